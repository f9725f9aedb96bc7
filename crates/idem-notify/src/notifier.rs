//! The notifier: submit claims the message id and queues; workers send, retry, and store
//! the outcome with the id.

use std::collections::{HashSet, VecDeque};
use std::panic::{self, AssertUnwindSafe};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, TrySendError};
use idem_core::{Claim, IdempotencyKey, KeyState, KeyStore, Lease, Scope, ScopedKey, StoreError};
use parking_lot::{Mutex, RwLock};

use crate::config::{Config, UnknownPolicy};
use crate::message::{InvalidNotification, Notification};
use crate::places::Places;
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

/// Why `submit` refused a notification. Nothing was queued by this submission (an earlier
/// one of the same id may still wait in the queue: `QueueFull` says only that there was
/// no room for this one).
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
    /// Sends the provider accepted (a send, or an ambiguous one it then said it
    /// delivered). A recovery that finds its message delivered by an earlier attempt
    /// stores that, and does not count it again.
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
    /// Sends skipped because a later submission had recovered the id first (the message
    /// waited in the queue, or between retries, past its lease): that submission asks the
    /// provider before sending, so this one is dropped rather than sent twice.
    pub superseded: u64,
    /// Provider calls that panicked: a `send` counted as an ambiguous failure, a `status`
    /// as unknown. The worker goes on.
    pub provider_panics: u64,
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

/// The id store's refusal of a submission: the id used for other content, or a failure.
impl From<StoreError> for SubmitError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::KeyReused { key } => Self::ContentMismatch(key),
            other => Self::Store(other),
        }
    }
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
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ShutdownReport {
    /// Whether every queued notification was processed before the deadline.
    pub drained: bool,
    /// Message ids still queued at the deadline: not sent, their ids released, so a later
    /// replay sends them; except a recovering message's (a replay of one whose earlier
    /// attempt may have delivered), left in flight until its lease runs out, when a replay
    /// asks the provider first.
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
    superseded: AtomicU64,
    provider_panics: AtomicU64,
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
    /// The queue's places: one is taken before a message id is claimed.
    places: Places,
}

/// A place taken by a submission: freed when dropped unless its job was queued (the
/// worker that takes the job off the queue frees it then).
struct PlaceTaken<'a> {
    places: &'a Places,
    queued: bool,
}

impl Drop for PlaceTaken<'_> {
    fn drop(&mut self) {
        if !self.queued {
            self.places.free();
        }
    }
}

/// A bounded queue and worker threads that send each message id at most once.
pub struct Notifier<P: Provider, S: KeyStore<Outcome> + 'static> {
    state: Arc<NotifierState<P, S>>,
    /// `None` once shut down. A submission holds the read lock from its shutdown check to
    /// its send instead of cloning the sender per message; `shutdown` takes the write lock
    /// to drop it, after the submissions under way.
    sender: RwLock<Option<Sender<Job>>>,
    workers: Mutex<Vec<JoinHandle<()>>>,
    /// The workers' threads, for a `shutdown` called on one of them (by a provider).
    worker_threads: Vec<std::thread::ThreadId>,
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
        if store.result_bytes_max().is_some_and(|max| max < OUTCOME_BYTES_MIN) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "the id store keeps no result bytes: a notification's outcome needs at least \
                 1 (a final dead letter it cannot keep would be sent again); give the store a \
                 result limit of at least 1",
            ));
        }
        let (sender, receiver) = crossbeam_channel::bounded(config.queue_capacity());
        let places = Places::new(config.queue_capacity());
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
            places,
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
        let worker_threads = workers.iter().map(|w| w.thread().id()).collect();
        let workers = Mutex::new(workers);
        Ok(Self { state, sender: RwLock::new(Some(sender)), workers, worker_threads })
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
        // A place in the queue first, and the id claimed only with one in hand: a claim
        // that then found no room would have recovered the id of a message still waiting
        // in the queue (see `places`).
        if !self.state.places.take() {
            return self.answered_without_room(&notification);
        }
        // Freed unless the job was queued, however the claim ends, a store's panic too.
        let mut place = PlaceTaken { places: &self.state.places, queued: false };
        let answer = self.claim_and_queue(sender, notification);
        place.queued = matches!(answer, Ok(Submitted::Accepted | Submitted::Recovering));
        answer
    }

    /// A submission that found no place: a duplicate is still answered as one (read, not
    /// claimed); anything else is refused for room, its id untouched.
    fn answered_without_room(&self, notification: &Notification) -> Result<Submitted, SubmitError> {
        let capacity = self.state.config.queue_capacity();
        let key = notification.key();
        match self.state.store.lookup(key, &notification.fingerprint()) {
            Ok(KeyState::Finished(outcome)) => Ok(Submitted::Duplicate(outcome)),
            Ok(KeyState::InFlight { .. }) => Ok(Submitted::DuplicateInFlight),
            Ok(KeyState::Absent | KeyState::Pending { .. }) => {
                Err(SubmitError::QueueFull { capacity })
            }
            Err(error) => Err(error.into()),
        }
    }

    /// Claims the id and queues the job, with a place taken for it.
    fn claim_and_queue(
        &self,
        sender: &Sender<Job>,
        notification: Notification,
    ) -> Result<Submitted, SubmitError> {
        let key = notification.key();
        let claim = self.state.store.claim(key, &notification.fingerprint())?;
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
                // Not reached while the places hold (a place was taken for this job, and
                // the workers hold the queue open until it closes); kept for safety.
                // Nothing was sent by this submission: give the id back so a later one is
                // accepted. Not a recovered id: an earlier attempt may have delivered, and
                // nobody has asked the provider yet. Left to its lease, the next
                // submission recovers it again and asks first (released, it would send
                // blind).
                if !job.recovering {
                    settled(&self.state, "release", self.state.store.release(&job.lease));
                }
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
            superseded: get(&c.superseded),
            provider_panics: get(&c.provider_panics),
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
    /// reports what was left. Past the deadline no send and no retry starts; a send (or a
    /// retry's pause, at most [`RETRY_CAP_MAX`](crate::RETRY_CAP_MAX)) under way when it
    /// passes ends first, and `shutdown` returns once it
    /// has. Idempotent by its shape: a second call, even one made while the first drains,
    /// returns once the first is done and reports nothing new.
    ///
    /// Called on one of the notifier's own workers (a provider that holds a handle on its
    /// notifier, or drops the last one), it cannot wait for the workers: it closes the
    /// queue, sets the deadline if it is the first, and returns at once, `drained: false`
    /// and `left` empty: what the workers give back is reported by a `shutdown` under way
    /// on another thread, or the next one.
    pub fn shutdown(&self, deadline: Duration) -> ShutdownReport {
        // A deadline too long to add to the clock (`Duration::MAX`) drains everything.
        let drain_until = Instant::now().checked_add(deadline);
        // RACE (a shutdown on a worker): the worker's provider calls `shutdown` while
        // another thread's `shutdown` holds `workers` and joins that very worker; waiting
        // for the lock there, each would wait for the other for ever. A worker's call
        // takes no lock the joiner holds. Test: `hostile::a_shutdown_from_a_worker_
        // during_another_neither_waits_for_the_other`.
        // It takes no leftovers either: a shutdown under way on another thread reports
        // them (a provider's report would reach no one).
        if self.worker_threads.contains(&std::thread::current().id()) {
            self.close(drain_until);
            return ShutdownReport { drained: false, left: Vec::new() };
        }
        // Held until the workers are joined: a second call waits for the first, instead
        // of reporting a drained queue while the first still drains it.
        let mut workers = self.workers.lock();
        self.close(drain_until);
        for worker in std::mem::take(&mut *workers) {
            // A worker that panicked has already lost its job; the rest are reported.
            let _ = worker.join();
        }
        let left = std::mem::take(&mut *self.state.left.lock());
        ShutdownReport { drained: left.is_empty(), left }
    }

    /// Closes the queue; the first call sets the workers' deadline (a later one keeps it).
    fn close(&self, drain_until: Option<Instant>) {
        let mut sender = self.sender.write();
        if sender.take().is_some() {
            *self.state.deadline.lock() = drain_until;
        }
    }
}

impl<P: Provider, S: KeyStore<Outcome> + 'static> Drop for Notifier<P, S> {
    /// A notifier dropped without [`shutdown`](Notifier::shutdown) shuts down with a zero
    /// deadline: what is still queued is not sent, its ids are given back (a replay sends
    /// them), and a `tracing` warning counts them, since no report reaches anyone.
    fn drop(&mut self) {
        if !self.workers.lock().is_empty() {
            let report = self.shutdown(Duration::ZERO);
            if !report.drained {
                idem_core::trace_event!(
                    WARN,
                    left = report.left.len(),
                    "notifier dropped without shutdown: queued ones not sent, ids given back"
                );
            }
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
        // Off the queue: its place is free for the next submission.
        state.places.free();
        // A provider's panic is caught where the provider is called; one from anywhere
        // else (a sleeper, a store) must not end the worker and strand the queue behind
        // it. The job's outcome is then unknown: reported unresolved, its id left in
        // flight until its lease runs out (a replay then asks the provider).
        if let Err(payload) =
            panic::catch_unwind(AssertUnwindSafe(|| take(state, &job, &mut jitter)))
        {
            idem_core::drop_panic_payload(payload);
            idem_core::trace_event!(ERROR, "a worker's job panicked; reported unresolved");
            unresolved(state, &job.notification);
        }
    }
}

/// One job off the queue: processed, or, past the shutdown's deadline, not sent.
fn take<P: Provider, S: KeyStore<Outcome>>(
    state: &NotifierState<P, S>,
    job: &Job,
    jitter: &mut Jitter,
) {
    if !past_deadline(state, Duration::ZERO) {
        return process(state, job, jitter);
    }
    // A recovered id is not given back before the provider was asked (see `try_submit`):
    // listed, and left to its lease.
    if job.recovering {
        state.left.lock().push(job.notification.message_id().to_string());
    } else {
        give_back(state, &job.notification, &job.lease);
    }
}

/// Whether the shutdown's deadline has passed, or will have after `pause`.
fn past_deadline<P, S>(state: &NotifierState<P, S>, pause: Duration) -> bool {
    let deadline = *state.deadline.lock();
    deadline.is_some_and(|d| Instant::now().checked_add(pause).is_none_or(|end| end >= d))
}

/// Not sent, for the shutdown: the id is given back (a later replay sends it) and the
/// message id listed in the shutdown's report.
fn give_back<P, S: KeyStore<Outcome>>(
    state: &NotifierState<P, S>,
    notification: &Notification,
    lease: &Lease,
) {
    match state.store.release(lease) {
        // A later submission recovered the id: its own job (listed or sent) has it, and
        // this one was superseded, not given back.
        Err(StoreError::LeaseLost { .. }) => add(&state.counters.superseded),
        released => {
            settled(state, "release", released);
            state.left.lock().push(notification.message_id().to_string());
        }
    }
}

/// How a send attempt's lease check ended when it cannot go on.
enum Held {
    /// The lease holds (renewed if it had less than half left).
    Yes(Lease),
    /// A later submission recovered the id: it sends, not this job.
    Superseded,
    /// The id store failed: nothing may be sent without knowing the id is this job's.
    StoreFailed(StoreError),
}

/// Checks, before a send, that the id is still this job's: a lease with less than half
/// its length left is renewed.
///
/// RACE (a queued message's lease runs out): a message that waits in the queue, or
/// between retries, past its lease can be recovered by a resubmission; its worker then
/// asks the provider (not delivered yet) and sends, and this job, sent too, pings twice.
/// The renewal is refused once the id was recovered, so only one of the two sends. Test:
/// `a_message_queued_past_its_lease_is_sent_once`.
fn held<P, S: KeyStore<Outcome>>(state: &NotifierState<P, S>, lease: &Lease) -> Held {
    let half = state.store.lease() / 2;
    if state.config.clock().now().saturating_add(half) < lease.expires_at() {
        return Held::Yes(lease.clone());
    }
    match state.store.renew(lease) {
        Ok(renewed) => Held::Yes(renewed),
        Err(StoreError::LeaseLost { .. }) => Held::Superseded,
        Err(error) => Held::StoreFailed(error),
    }
}

/// Calls the provider's `send`; a panic counts as an ambiguous failure (it may have
/// delivered), counted and traced.
fn send<P: Provider, S>(state: &NotifierState<P, S>, n: &Notification) -> Result<(), SendError> {
    panic::catch_unwind(AssertUnwindSafe(|| state.provider.send(n))).unwrap_or_else(|payload| {
        // A payload whose drop panics again would escape here: dropped under a guard.
        idem_core::drop_panic_payload(payload);
        add(&state.counters.provider_panics);
        idem_core::trace_event!(ERROR, "the provider's send panicked; taken as ambiguous");
        Err(SendError::Ambiguous("the provider's send panicked".to_string()))
    })
}

/// Asks the provider about a message; a panic counts as `Unknown`, counted and traced.
fn status<P: Provider, S>(state: &NotifierState<P, S>, n: &Notification) -> DeliveryStatus {
    let status = panic::catch_unwind(AssertUnwindSafe(|| state.provider.status(n))).unwrap_or_else(
        |payload| {
            idem_core::drop_panic_payload(payload);
            add(&state.counters.provider_panics);
            DeliveryStatus::Unknown
        },
    );
    idem_core::trace_event!(WARN, ?status, "asked the provider");
    status
}

/// What a job's attempts have come to so far.
struct Attempts {
    /// The latest lease (renewed as it goes).
    lease: Lease,
    /// Set once an attempt may have delivered; then a dead letter is final.
    may_have_delivered: bool,
    /// The last failure's reason.
    last: String,
}

fn process<P: Provider, S: KeyStore<Outcome>>(
    state: &NotifierState<P, S>,
    job: &Job,
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
    let resend = state.config.unknown() == UnknownPolicy::Resend;
    let mut tried =
        Attempts { lease: job.lease.clone(), may_have_delivered: false, last: "".into() };
    if job.recovering {
        idem_core::trace_event!(WARN, "recover: asking the provider before sending");
        // An earlier attempt lost its lease: it may have delivered. Ask first.
        match status(state, n) {
            // Delivered by the attempt it recovers from: stored, not counted sent again.
            DeliveryStatus::Delivered => return finish(state, &tried.lease, Outcome::Delivered, 0),
            DeliveryStatus::NotDelivered => {}
            DeliveryStatus::Unknown if resend => tried.may_have_delivered = true,
            DeliveryStatus::Unknown => return unresolved(state, n),
        }
    }
    let policy = state.config.retry();
    for attempt in 0..policy.attempts_max {
        match attempt_once(state, n, &mut tried, attempt > 0) {
            Next::Settled => return,
            Next::Stopped => return stopped(state, job, &tried, attempt),
            Next::Retry => {}
        }
        if attempt + 1 < policy.attempts_max {
            let pause = policy.delay(attempt, jitter);
            // No retry starts past the shutdown's deadline (a pause under way ends first).
            if past_deadline(state, pause) {
                return stopped(state, job, &tried, attempt + 1);
            }
            // A shutdown that begins during the pause: its deadline is looked at again
            // before the next send (`attempt_once`).
            state.config.sleeper().sleep(pause);
        }
    }
    let reason = format!("gave up after {} attempts: {}", policy.attempts_max, tried.last);
    dead(state, n, &tried.lease, reason, tried.may_have_delivered);
}

/// What a job does after one attempt.
enum Next {
    /// Settled: delivered, dead, unresolved or superseded.
    Settled,
    /// Failed in a way a retry may mend.
    Retry,
    /// Not sent: the shutdown's deadline passed before the send began.
    Stopped,
}

/// One attempt: the lease checked, the send, and what its failure means.
fn attempt_once<P: Provider, S: KeyStore<Outcome>>(
    state: &NotifierState<P, S>,
    n: &Notification,
    tried: &mut Attempts,
    retry: bool,
) -> Next {
    match held(state, &tried.lease) {
        Held::Yes(lease) => tried.lease = lease,
        Held::Superseded => {
            add(&state.counters.superseded);
            idem_core::trace_event!(WARN, "superseded: a resubmission recovered the id first");
            return Next::Settled;
        }
        Held::StoreFailed(error) => {
            let reason = format!("the id store failed before a send: {error}");
            dead(state, n, &tried.lease, reason, tried.may_have_delivered);
            return Next::Settled;
        }
    }
    // No send begins past the shutdown's deadline, however long the provider's `status`
    // (a recovery's) or the lease's renewal took since the last look.
    if past_deadline(state, Duration::ZERO) {
        return Next::Stopped;
    }
    // A retry counts once its send begins: one stopped or superseded first never was.
    if retry {
        add(&state.counters.retries);
    }
    match send(state, n) {
        Ok(()) => finish(state, &tried.lease, Outcome::Delivered, 1),
        Err(SendError::Permanent(reason)) => {
            dead(state, n, &tried.lease, reason, tried.may_have_delivered);
        }
        Err(SendError::Transient(reason)) => {
            tried.last = reason;
            return Next::Retry;
        }
        Err(SendError::Ambiguous(reason)) => match status(state, n) {
            DeliveryStatus::Delivered => finish(state, &tried.lease, Outcome::Delivered, 1),
            DeliveryStatus::NotDelivered => {
                tried.last = reason;
                return Next::Retry;
            }
            DeliveryStatus::Unknown if state.config.unknown() == UnknownPolicy::Resend => {
                tried.may_have_delivered = true;
                tried.last = reason;
                return Next::Retry;
            }
            DeliveryStatus::Unknown => unresolved(state, n),
        },
    }
    Next::Settled
}

/// A job whose retries the shutdown's deadline cut short: given back if nothing may have
/// reached the user, else a final dead letter.
fn stopped<P, S: KeyStore<Outcome>>(
    state: &NotifierState<P, S>,
    job: &Job,
    tried: &Attempts,
    attempts: u32,
) {
    if tried.may_have_delivered {
        let reason = format!("stopped by shutdown after {attempts} attempts: {}", tried.last);
        return dead(state, &job.notification, &tried.lease, reason, true);
    }
    give_back(state, &job.notification, &tried.lease);
}

/// Stores a delivered outcome; `sent` is 1 if this job's own send delivered it, 0 if an
/// earlier attempt had (a recovery that found it delivered).
fn finish<P, S: KeyStore<Outcome>>(
    state: &NotifierState<P, S>,
    lease: &Lease,
    outcome: Outcome,
    sent: u64,
) {
    // LeaseLost: another submission recovered the id meanwhile; it asks the provider
    // before sending, so nothing is sent twice. Counted and traced, nothing more.
    settled(state, "complete", state.store.complete(lease, outcome));
    // Counted after the store write: a caller who sees the count sees the stored outcome.
    // ORDERING: a counter read for reporting; nothing is published through it.
    state.counters.sent.fetch_add(sent, Ordering::Relaxed);
}

/// Gives up on a message. Final (stored as dead-lettered) if an attempt may have
/// delivered it; otherwise the id is given back, so a resubmission sends it again. The
/// stored reason is cut to what the store keeps (the list keeps it whole): a final dead
/// letter the store refused would stay in flight, and be resent after its lease.
fn dead<P, S: KeyStore<Outcome>>(
    state: &NotifierState<P, S>,
    notification: &Notification,
    lease: &Lease,
    reason: String,
    may_have_delivered: bool,
) {
    let reason = cut(&reason, REASON_BYTES_MAX).to_string();
    idem_core::trace_event!(WARN, %reason, may_have_delivered, "dead letter");
    let settle = if may_have_delivered {
        let kept = kept_reason(&reason, state.store.result_bytes_max());
        state.store.complete(lease, Outcome::DeadLettered(kept))
    } else {
        state.store.release(lease)
    };
    // RACE (a dead letter for a superseded job): a send outlasts half the lease, a
    // resubmission recovers the id and its job settles it (delivered, say); this job's
    // give-up is then refused by the token. The id is the other job's: superseded, neither
    // listed nor counted dead (the list would tell operators to resubmit a message already
    // delivered). Test: `hostile::a_give_up_after_the_id_was_recovered_is_no_dead_letter`.
    if let Err(StoreError::LeaseLost { .. }) = settle {
        add(&state.counters.superseded);
        return;
    }
    let notification = notification.clone();
    report(state, &state.dead, DeadLetter { notification, reason, may_have_delivered });
    settled(state, "dead letter", settle);
    add(&state.counters.dead_lettered);
}

/// `reason` cut (at a character boundary) so that its stored outcome (one tag byte and
/// the text) fits in `bytes_max`, if the store has a limit.
fn kept_reason(reason: &str, bytes_max: Option<usize>) -> String {
    match bytes_max {
        Some(max) => cut(reason, max.saturating_sub(1)).to_string(),
        None => reason.to_string(),
    }
}

/// The longest dead letter's reason kept, listed or stored, in bytes: a provider's error
/// text is the provider's, of any length.
const REASON_BYTES_MAX: usize = 1024;

/// The smallest result a store must keep for the notifier: an outcome's tag byte.
const OUTCOME_BYTES_MIN: usize = 1;

/// `text` cut at a character boundary to at most `max` bytes.
fn cut(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
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
fn unresolved<P, S>(state: &NotifierState<P, S>, notification: &Notification) {
    idem_core::trace_event!(WARN, "unresolved: the provider cannot say; left pending");
    add(&state.counters.unresolved);
    let mut list = state.unresolved.lock();
    // Listed once: each replay of an unresolved message asks the provider again and may
    // come back here; it moves to the end instead of pushing others out of the list.
    list.retain(|listed| listed.key() != notification.key());
    push_capped(state, &mut list, notification.clone());
}

/// Appends to a report list, dropping (and counting) the oldest entry past `reports_max`.
fn report<P, S, T>(state: &NotifierState<P, S>, list: &Mutex<VecDeque<T>>, entry: T) {
    push_capped(state, &mut list.lock(), entry);
}

fn push_capped<P, S, T>(state: &NotifierState<P, S>, list: &mut VecDeque<T>, entry: T) {
    if list.len() >= state.config.reports_max() {
        list.pop_front();
        add(&state.counters.reports_dropped);
    }
    list.push_back(entry);
}
