//! The notifier: submit claims the message id and queues; workers send, retry, and store
//! the outcome with the id.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, TrySendError};
use idem_core::{Claim, IdempotencyKey, KeyStore, Lease, Scope, ScopedKey, StoreError};
use parking_lot::{Mutex, RwLock};

use crate::config::{Config, UnknownPolicy};
use crate::message::{InvalidNotification, Notification};
use crate::provider::{DeliveryStatus, Provider, SendError};
use crate::retry::Jitter;

/// The stored outcome of a message id, replayed to duplicates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The provider delivered it.
    Delivered,
    /// Given up on, with the reason.
    DeadLettered(String),
}

impl idem_durable::Durable for Outcome {
    fn encode(&self) -> Vec<u8> {
        match self {
            Outcome::Delivered => vec![0],
            Outcome::DeadLettered(reason) => {
                let mut out = vec![1];
                out.extend_from_slice(reason.as_bytes());
                out
            }
        }
    }

    fn decode(bytes: &[u8]) -> Result<Self, idem_durable::CodecError> {
        let corrupt = || idem_durable::CodecError::Corrupt("notification outcome".into());
        match bytes.split_first() {
            Some((0, [])) => Ok(Outcome::Delivered),
            Some((1, reason)) => Ok(Outcome::DeadLettered(
                String::from_utf8(reason.to_vec()).map_err(|_| corrupt())?,
            )),
            _ => Err(corrupt()),
        }
    }
}

/// What `submit` did with a notification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Submitted {
    /// Queued: it will be sent (or dead-lettered, or reported unresolved).
    Accepted,
    /// Queued again after its earlier attempt's lease ran out (a crash or a stuck
    /// worker): the worker asks the provider before sending.
    Recovering,
    /// The same id was already queued or is being sent.
    DuplicateInFlight,
    /// The same id already finished, like this.
    Duplicate(Outcome),
}

/// Why `submit` refused a notification. Nothing was queued.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SubmitError {
    /// The queue is full: retry later.
    #[error("queue full ({capacity} notifications)")]
    QueueFull {
        /// The queue's capacity.
        capacity: usize,
    },
    /// The notifier is shutting down or shut down.
    #[error("notifier is shut down")]
    ShutDown,
    /// The same message id was used for different content or channel.
    #[error("message id {0} was used for different content")]
    ContentMismatch(ScopedKey),
    /// The id store refused or failed.
    #[error("id store: {0}")]
    Store(StoreError),
}

/// Counters, from [`Notifier::stats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Notifications queued (first time or recovering).
    pub accepted: u64,
    /// Submissions answered as duplicates.
    pub duplicates: u64,
    /// Notifications delivered.
    pub sent: u64,
    /// Retries after a transient or ambiguous failure.
    pub retries: u64,
    /// Notifications given up on.
    pub dead_lettered: u64,
    /// Notifications whose delivery is unknown and left for a human (or a later replay).
    pub unresolved: u64,
    /// Dead letters and unresolved notifications dropped from their lists (the oldest
    /// first) because a list held `reports_max` already.
    pub reports_dropped: u64,
    /// Submissions refused (queue full, shut down, content mismatch).
    pub refused: u64,
    /// Completions and releases of a message id that the id store refused (a lost lease)
    /// or failed: the id stays in flight and a replay after its lease asks the provider
    /// before sending. Each is also a `tracing` event.
    pub settle_failed: u64,
}

/// A notification given up on, with the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    /// The notification.
    pub notification: Notification,
    /// Why.
    pub reason: String,
    /// Whether an attempt may have delivered it: an ambiguous send that the provider
    /// could not settle, resent under [`UnknownPolicy::Resend`]. Such a dead letter is
    /// final: its id is stored as [`Outcome::DeadLettered`] and a resubmission is answered
    /// as a duplicate. Otherwise every attempt was answered as not delivered, the id is
    /// given back, and a resubmission under the same id is sent again (it cannot ping
    /// twice: nothing reached the user).
    pub may_have_delivered: bool,
}

/// Why `mark_read` refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MarkReadError {
    /// The recipient or the message id is not valid; nothing was marked.
    #[error(transparent)]
    Invalid(#[from] InvalidNotification),
    /// The read set holds `read_max` pairs; nothing was marked.
    #[error("the read set is full ({read_max} messages)")]
    ReadSetFull {
        /// The configured limit.
        read_max: usize,
    },
}

/// What `shutdown` left behind.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ShutdownReport {
    /// Whether every queued notification was processed before the deadline.
    pub drained: bool,
    /// Message ids still queued at the deadline: not sent, their ids released, so a later
    /// replay sends them.
    pub left: Vec<String>,
}

struct Job {
    notification: Notification,
    lease: Lease,
    recovering: bool,
}

#[derive(Default)]
struct Counters {
    accepted: AtomicU64,
    duplicates: AtomicU64,
    sent: AtomicU64,
    retries: AtomicU64,
    dead_lettered: AtomicU64,
    unresolved: AtomicU64,
    reports_dropped: AtomicU64,
    refused: AtomicU64,
    settle_failed: AtomicU64,
}

/// What the notifier and its workers share, behind one `Arc`: the provider, the id store,
/// the configuration, the counters, the reports and the read set, and the shutdown's
/// deadline and leftovers.
struct NotifierState<P, S> {
    provider: P,
    store: S,
    config: Config,
    counters: Counters,
    dead: Mutex<VecDeque<DeadLetter>>,
    unresolved: Mutex<VecDeque<Notification>>,
    read: Mutex<HashSet<ScopedKey>>,
    /// Set by `shutdown`: workers stop taking jobs after this instant.
    deadline: Mutex<Option<Instant>>,
    left: Mutex<Vec<String>>,
}

/// A bounded queue and worker threads that send each message id at most once.
pub struct Notifier<P: Provider, S: KeyStore<Outcome> + 'static> {
    state: Arc<NotifierState<P, S>>,
    /// `None` once shut down. A submission holds the read lock from its shutdown check to
    /// its send instead of cloning the sender per message; `shutdown` takes the write lock
    /// to drop it, after the submissions under way.
    sender: RwLock<Option<Sender<Job>>>,
    workers: Mutex<Vec<JoinHandle<()>>>,
}

impl<P: Provider, S: KeyStore<Outcome> + 'static> std::fmt::Debug for Notifier<P, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notifier")
            .field("config", &self.state.config)
            .field("stats", &self.stats())
            .finish()
    }
}

fn add(counter: &AtomicU64) {
    // ORDERING: a statistic; no data is published through it.
    counter.fetch_add(1, Ordering::Relaxed);
}

impl<P: Provider, S: KeyStore<Outcome> + 'static> Notifier<P, S> {
    /// Starts `config.workers()` workers over `provider`, deduplicating with `store`
    /// (whose result TTL is the dedup window: 24 hours by default). The configuration
    /// was checked when it was built ([`Config::builder`]).
    ///
    /// # Errors
    ///
    /// The I/O error if the OS refuses to start a worker thread; the workers already
    /// started are stopped, and nothing was queued.
    pub fn start(provider: P, store: S, config: Config) -> Result<Self, std::io::Error> {
        let (sender, receiver) = crossbeam_channel::bounded(config.queue_capacity());
        let state = Arc::new(NotifierState {
            provider,
            store,
            config,
            counters: Counters::default(),
            dead: Mutex::new(VecDeque::new()),
            unresolved: Mutex::new(VecDeque::new()),
            read: Mutex::new(HashSet::new()),
            deadline: Mutex::new(None),
            left: Mutex::new(Vec::new()),
        });
        let mut workers = Vec::with_capacity(state.config.workers());
        for i in 0..state.config.workers() {
            let (state, receiver) = (state.clone(), receiver.clone());
            let seed = state.config.retry().seed.wrapping_add(i as u64);
            let spawned = std::thread::Builder::new()
                .name(format!("idem-notify-worker-{i}"))
                .spawn(move || work(&state, &receiver, Jitter::new(seed)));
            match spawned {
                Ok(worker) => workers.push(worker),
                Err(error) => {
                    // Closing the queue stops the workers already started.
                    drop(sender);
                    workers.into_iter().for_each(|w| drop(w.join()));
                    return Err(error);
                }
            }
        }
        Ok(Self { state, sender: RwLock::new(Some(sender)), workers: Mutex::new(workers) })
    }

    /// Submits a notification; returns at once. The message id is claimed before it is
    /// queued, so a second submission (a producer retry, a redelivery, a restart replay)
    /// is answered as a duplicate instead of queued again.
    ///
    /// # Errors
    ///
    /// [`SubmitError`]: queue full, shut down, content mismatch, store failure. Nothing is
    /// queued and the id is not held.
    pub fn submit(&self, notification: Notification) -> Result<Submitted, SubmitError> {
        let _span = idem_core::trace_span!(
            INFO,
            "submit",
            recipient = notification.recipient(),
            message_id = notification.message_id(),
            channel = %notification.channel()
        );
        let result = self.try_submit(notification);
        match &result {
            Ok(Submitted::Accepted | Submitted::Recovering) => add(&self.state.counters.accepted),
            Ok(_) => add(&self.state.counters.duplicates),
            Err(_) => add(&self.state.counters.refused),
        }
        result
    }

    fn try_submit(&self, notification: Notification) -> Result<Submitted, SubmitError> {
        let sender = self.sender.read();
        let sender = sender.as_ref().ok_or(SubmitError::ShutDown)?;
        let key = notification.key();
        let claim =
            self.state.store.claim(key, &notification.fingerprint()).map_err(|e| match e {
                StoreError::KeyReused { key } => SubmitError::ContentMismatch(key),
                other => SubmitError::Store(other),
            })?;
        let (lease, recovering) = match claim {
            Claim::Acquired(lease) => (lease, false),
            Claim::Recover(lease) => (lease, true),
            Claim::InFlight { .. } => return Ok(Submitted::DuplicateInFlight),
            Claim::Replay(outcome) => return Ok(Submitted::Duplicate(outcome)),
        };
        let job = Job { notification, lease, recovering };
        match sender.try_send(job) {
            Ok(()) if recovering => Ok(Submitted::Recovering),
            Ok(()) => Ok(Submitted::Accepted),
            Err(refused) => {
                let (job, error) = match refused {
                    TrySendError::Full(job) => (
                        job,
                        SubmitError::QueueFull { capacity: self.state.config.queue_capacity() },
                    ),
                    TrySendError::Disconnected(job) => (job, SubmitError::ShutDown),
                };
                // Nothing was sent: give the id back so a later submission is accepted.
                settled(&self.state, "release", self.state.store.release(&job.lease));
                Err(error)
            }
        }
    }

    /// Marks a message read. An assignment to a named target: idempotent by its shape,
    /// it needs no id of its own. Returns whether it was newly marked.
    ///
    /// # Errors
    ///
    /// [`MarkReadError::Invalid`] if the recipient or the message id is not valid (named
    /// by [`InvalidNotification`]); [`MarkReadError::ReadSetFull`] if the read set holds
    /// `read_max` pairs already.
    pub fn mark_read(&self, recipient: &str, message_id: &str) -> Result<bool, MarkReadError> {
        let recipient = Scope::new(recipient).map_err(InvalidNotification::Recipient)?;
        let id = IdempotencyKey::new(message_id).map_err(InvalidNotification::MessageId)?;
        let key = ScopedKey::new(recipient, id);
        let mut read = self.state.read.lock();
        if read.contains(&key) {
            return Ok(false);
        }
        let read_max = self.state.config.read_max();
        if read.len() >= read_max {
            return Err(MarkReadError::ReadSetFull { read_max });
        }
        Ok(read.insert(key))
    }

    /// Whether a message was marked read.
    pub fn is_read(&self, recipient: &str, message_id: &str) -> bool {
        ScopedKey::parse(recipient, message_id).is_ok_and(|k| self.state.read.lock().contains(&k))
    }

    /// The counters.
    pub fn stats(&self) -> Stats {
        let c = &self.state.counters;
        // ORDERING: counters read for reporting; each stands alone and publishes nothing.
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Stats {
            accepted: get(&c.accepted),
            duplicates: get(&c.duplicates),
            sent: get(&c.sent),
            retries: get(&c.retries),
            dead_lettered: get(&c.dead_lettered),
            unresolved: get(&c.unresolved),
            reports_dropped: get(&c.reports_dropped),
            refused: get(&c.refused),
            settle_failed: get(&c.settle_failed),
        }
    }

    /// Notifications given up on, with their reasons: the latest `reports_max`, oldest
    /// first.
    pub fn dead_letters(&self) -> Vec<DeadLetter> {
        self.state.dead.lock().iter().cloned().collect()
    }

    /// Notifications whose delivery is unknown and the provider cannot say: left
    /// pending, never resent blindly. A replay after the lease runs out asks again. The
    /// latest `reports_max`, oldest first.
    pub fn unresolved(&self) -> Vec<Notification> {
        self.state.unresolved.lock().iter().cloned().collect()
    }

    /// The provider (for tests and the demo).
    pub fn provider(&self) -> &P {
        &self.state.provider
    }

    /// The id store (for tests and the demo).
    pub fn store(&self) -> &S {
        &self.state.store
    }

    /// Stops accepting, lets the workers drain the queue until `deadline` from now, and
    /// reports what was left. Idempotent by its shape: a second call reports nothing new.
    pub fn shutdown(&self, deadline: Duration) -> ShutdownReport {
        // A deadline too long to add to the clock (`Duration::MAX`) drains everything.
        let drain_until = Instant::now().checked_add(deadline);
        *self.state.deadline.lock() = drain_until;
        drop(self.sender.write().take());
        let workers = std::mem::take(&mut *self.workers.lock());
        for worker in workers {
            // A worker that panicked has already lost its job; the rest are reported.
            let _ = worker.join();
        }
        let left = std::mem::take(&mut *self.state.left.lock());
        ShutdownReport { drained: left.is_empty(), left }
    }
}

impl<P: Provider, S: KeyStore<Outcome> + 'static> Drop for Notifier<P, S> {
    fn drop(&mut self) {
        if !self.workers.lock().is_empty() {
            self.shutdown(Duration::ZERO);
        }
    }
}

/// A worker: takes jobs until the queue is closed and empty; past the shutdown deadline
/// it gives each remaining job's id back instead of sending.
fn work<P: Provider, S: KeyStore<Outcome>>(
    state: &NotifierState<P, S>,
    jobs: &Receiver<Job>,
    mut jitter: Jitter,
) {
    for job in jobs.iter() {
        let past_deadline = state.deadline.lock().is_some_and(|d| Instant::now() >= d);
        if past_deadline {
            settled(state, "release", state.store.release(&job.lease));
            state.left.lock().push(job.notification.message_id().to_string());
            continue;
        }
        process(state, job, &mut jitter);
    }
}

fn process<P: Provider, S: KeyStore<Outcome>>(
    state: &NotifierState<P, S>,
    job: Job,
    jitter: &mut Jitter,
) {
    let n = &job.notification;
    let _span = idem_core::trace_span!(
        INFO,
        "send",
        recipient = n.recipient(),
        message_id = n.message_id(),
        channel = %n.channel()
    );
    if job.recovering {
        idem_core::trace_event!(WARN, "recover: asking the provider before sending");
        // An earlier attempt lost its lease: it may have delivered. Ask first.
        match state.provider.status(n) {
            DeliveryStatus::Delivered => return finish(state, &job, Outcome::Delivered),
            DeliveryStatus::NotDelivered => {}
            DeliveryStatus::Unknown if state.config.unknown() == UnknownPolicy::Resend => {}
            DeliveryStatus::Unknown => return unresolved(state, job),
        }
    }
    let policy = state.config.retry();
    let mut last = String::new();
    // Set once an attempt may have delivered; then a dead letter is final.
    let mut may_have_delivered = job.recovering && state.config.unknown() == UnknownPolicy::Resend;
    for attempt in 0..policy.attempts_max {
        if attempt > 0 {
            add(&state.counters.retries);
        }
        match state.provider.send(n) {
            Ok(()) => return finish(state, &job, Outcome::Delivered),
            Err(SendError::Permanent(reason)) => {
                return dead(state, &job, reason, may_have_delivered);
            }
            Err(SendError::Transient(reason)) => last = reason,
            Err(SendError::Ambiguous(reason)) => match ambiguous(state, n) {
                DeliveryStatus::Delivered => return finish(state, &job, Outcome::Delivered),
                DeliveryStatus::NotDelivered => last = reason,
                DeliveryStatus::Unknown if state.config.unknown() == UnknownPolicy::Resend => {
                    may_have_delivered = true;
                    last = reason
                }
                DeliveryStatus::Unknown => return unresolved(state, job),
            },
        }
        if attempt + 1 < policy.attempts_max {
            state.config.sleeper().sleep(policy.delay(attempt, jitter));
        }
    }
    let reason = format!("gave up after {} attempts: {last}", policy.attempts_max);
    dead(state, &job, reason, may_have_delivered);
}

/// Asks the provider about a send that got no answer.
fn ambiguous<P: Provider, S: KeyStore<Outcome>>(
    state: &NotifierState<P, S>,
    n: &Notification,
) -> DeliveryStatus {
    let status = state.provider.status(n);
    idem_core::trace_event!(WARN, ?status, "ambiguous send: asked the provider");
    status
}

fn finish<P: Provider, S: KeyStore<Outcome>>(
    state: &NotifierState<P, S>,
    job: &Job,
    outcome: Outcome,
) {
    let delivered = outcome == Outcome::Delivered;
    // LeaseLost: another submission recovered the id meanwhile; it asks the provider
    // before sending, so nothing is sent twice. Counted and traced, nothing more.
    settled(state, "complete", state.store.complete(&job.lease, outcome));
    // Counted after the store write: a caller who sees the count sees the stored outcome.
    if delivered {
        add(&state.counters.sent);
    }
}

/// Gives up on a message. Final (stored as dead-lettered) if an attempt may have
/// delivered it; otherwise the id is given back, so a resubmission sends it again.
fn dead<P: Provider, S: KeyStore<Outcome>>(
    state: &NotifierState<P, S>,
    job: &Job,
    reason: String,
    may_have_delivered: bool,
) {
    idem_core::trace_event!(WARN, %reason, may_have_delivered, "dead letter");
    let notification = job.notification.clone();
    let letter = DeadLetter { notification, reason: reason.clone(), may_have_delivered };
    report(state, &state.dead, letter);
    let settle = if may_have_delivered {
        state.store.complete(&job.lease, Outcome::DeadLettered(reason))
    } else {
        state.store.release(&job.lease)
    };
    settled(state, "dead letter", settle);
    add(&state.counters.dead_lettered);
}

/// Counts and traces a settle the id store refused or failed: the id stays in flight
/// until its lease runs out, and a replay then asks the provider before sending.
fn settled<P, S>(state: &NotifierState<P, S>, op: &'static str, result: Result<(), StoreError>) {
    if let Err(error) = result {
        add(&state.counters.settle_failed);
        idem_core::trace_event!(WARN, op, %error, "the id store refused a settle");
        #[cfg(not(feature = "tracing"))]
        let _ = (op, error);
    }
}

/// Leaves the id pending (its lease runs out; a replay then asks the provider again) and
/// reports the notification.
fn unresolved<P: Provider, S: KeyStore<Outcome>>(state: &NotifierState<P, S>, job: Job) {
    idem_core::trace_event!(WARN, "unresolved: the provider cannot say; left pending");
    add(&state.counters.unresolved);
    report(state, &state.unresolved, job.notification);
}

/// Appends to a report list, dropping (and counting) the oldest entry past `reports_max`.
fn report<P: Provider, S: KeyStore<Outcome>, T>(
    state: &NotifierState<P, S>,
    list: &Mutex<VecDeque<T>>,
    entry: T,
) {
    let mut list = list.lock();
    if list.len() >= state.config.reports_max() {
        list.pop_front();
        add(&state.counters.reports_dropped);
    }
    list.push_back(entry);
}
