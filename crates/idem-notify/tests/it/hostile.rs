//! Providers and callers that misbehave: a provider that panics, one whose sends wait
//! while the message's lease runs out in the queue, a second `shutdown` during the first,
//! and a notifier whose last handle is dropped by its own worker.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, Weak, mpsc};
use std::time::Duration;

use idem_core::StoreConfig;
use idem_notify::{
    Config, DeliveryStatus, Notification, Notifier, Outcome, Provider, RetryPolicy, SendError,
    SubmitError, Submitted, UnknownPolicy,
};
use idem_store_sqlite::SqliteStore;

use crate::{LEASE, WAIT, note, setup};

/// The longest a held send waits for the test to open the script.
const HOLD_MAX: Duration = Duration::from_secs(60);

/// What the scripted provider does and saw, shared with the test.
#[derive(Default)]
pub(crate) struct Script {
    /// Deliveries per message id (no dedup: a second send is a second ping).
    deliveries: Mutex<HashMap<String, u32>>,
    /// What `status` answers: `None` for the truth, from the deliveries.
    status: Option<DeliveryStatus>,
    /// Told when a send of `hold` starts; the send then waits for `open`.
    started: Mutex<Option<mpsc::Sender<()>>>,
    open: (Mutex<bool>, Condvar),
    /// `status` calls (each ambiguous send, each recovery asks once).
    pub(crate) statuses: AtomicU32,
    /// `send` calls, whatever they answered.
    pub(crate) sends: AtomicU32,
    /// What the shutdowns a `hold-shut-down` send called answered.
    reports: Mutex<Vec<idem_notify::ShutdownReport>>,
    /// Whether a `hold-refused` message was refused once already.
    refused: std::sync::atomic::AtomicBool,
    /// A notifier this provider holds a handle on (upgraded during each send).
    notifier: OnceLock<Weak<ScriptedNotifier>>,
}

/// A notifier over the scripted provider.
type ScriptedNotifier = Notifier<Scripted, Arc<idem_core::MemoryStore<idem_notify::Outcome>>>;

/// The provider the notifier owns; the test keeps the `Script`.
pub(crate) struct Scripted(pub(crate) Arc<Script>);

impl Provider for Scripted {
    fn send(&self, n: &Notification) -> Result<(), SendError> {
        let script = &self.0;
        script.sends.fetch_add(1, Ordering::SeqCst);
        assert_ne!(n.message_id(), "boom", "a provider that panics");
        // Held for the whole send: if the test drops its own handle meanwhile, the last
        // handle goes with this send, on the worker.
        let _handle = script.notifier.get().and_then(Weak::upgrade);
        if n.message_id().starts_with("flaky") {
            return Err(SendError::Transient("busy".into()));
        }
        if n.message_id().starts_with("loud") {
            return Err(SendError::Permanent(format!("refused: {}", "x".repeat(10_000))));
        }
        if n.message_id().starts_with("vague") {
            return Err(SendError::Ambiguous(format!("no answer: {}", "x".repeat(1_000))));
        }
        // Its first send is held and then refused for good; any later one delivers.
        let refused_once = n.message_id().starts_with("hold-refused");
        if refused_once && script.refused.swap(true, Ordering::SeqCst) {
            *script.deliveries.lock().expect("lock").entry(n.message_id().into()).or_default() += 1;
            return Ok(());
        }
        if n.message_id().starts_with("hold") {
            if let Some(started) = script.started.lock().expect("lock").as_ref() {
                let _ = started.send(());
            }
            // Bounded: a test whose assertion fails before it opens the script drops the
            // notifier, which joins this worker; unbounded, the failure would be a hang.
            let (open, opened) = &script.open;
            let is_open = open.lock().expect("lock");
            let _ = opened.wait_timeout_while(is_open, HOLD_MAX, |open| !*open).expect("lock");
            if refused_once {
                return Err(SendError::Permanent("invalid address".into()));
            }
            // The provider shuts its own notifier down, from the worker it runs on.
            if let Some(me) = _handle.as_ref().filter(|_| n.message_id().contains("shut-down")) {
                let report = me.shutdown(Duration::ZERO);
                script.reports.lock().expect("lock").push(report);
            }
        }
        *script.deliveries.lock().expect("lock").entry(n.message_id().into()).or_default() += 1;
        Ok(())
    }

    fn status(&self, n: &Notification) -> DeliveryStatus {
        self.0.statuses.fetch_add(1, Ordering::SeqCst);
        self.0.status.unwrap_or_else(|| match self.0.delivered(n.message_id()) {
            0 => DeliveryStatus::NotDelivered,
            _ => DeliveryStatus::Delivered,
        })
    }
}

impl Script {
    pub(crate) fn new(status: Option<DeliveryStatus>) -> (Arc<Self>, mpsc::Receiver<()>) {
        let (started, starts) = mpsc::channel();
        let script = Self { status, started: Mutex::new(Some(started)), ..Self::default() };
        (Arc::new(script), starts)
    }

    pub(crate) fn delivered(&self, id: &str) -> u32 {
        self.deliveries.lock().expect("lock").get(id).copied().unwrap_or(0)
    }

    pub(crate) fn open(&self) {
        *self.open.0.lock().expect("lock") = true;
        self.open.1.notify_all();
    }
}

/// The crate's setup (a manual clock shared by the store and the notifier), with this
/// provider.
fn scripted(script: &Arc<Script>, workers: usize) -> crate::Setup<Scripted> {
    setup(Scripted(script.clone()), |c| c.workers(workers))
}

#[test]
fn a_message_queued_past_its_lease_is_sent_once() {
    // The provider's status lags (it says not delivered), so only the lease stands
    // between a queued message and a resubmission's recovery.
    let (script, starts) = Script::new(Some(DeliveryStatus::NotDelivered));
    let s = scripted(&script, 1);
    s.notifier.submit(note("hold")).expect("submit");
    starts.recv_timeout(WAIT).expect("the worker holds the first message");
    assert_eq!(s.notifier.submit(note("m1")).expect("submit"), Submitted::Accepted);
    s.clock.advance(LEASE); // m1's lease runs out while it waits in the queue
    assert_eq!(s.notifier.submit(note("m1")).expect("submit"), Submitted::Recovering);
    script.open();
    assert!(s.notifier.shutdown(WAIT).drained);
    assert_eq!(script.delivered("m1"), 1, "a queued message and its recovery both sent");
    assert_eq!(s.notifier.stats().superseded, 1);
}

#[test]
fn a_panicking_provider_neither_ends_its_worker_nor_strands_the_queue() {
    let (script, _starts) = Script::new(Some(DeliveryStatus::Unknown));
    let s = scripted(&script, 1);
    for id in ["boom", "m2", "m3"] {
        assert_eq!(s.notifier.submit(note(id)).expect("submit"), Submitted::Accepted);
    }
    crate::wait_until("the queue drained", WAIT, || script.delivered("m3") == 1);
    assert_eq!(s.notifier.submit(note("m4")).expect("still accepting"), Submitted::Accepted);
    assert!(s.notifier.shutdown(WAIT).drained);
    assert_eq!((script.delivered("m2"), script.delivered("m4")), (1, 1));
    let stats = s.notifier.stats();
    // The panicking send may have delivered, and the provider cannot say: unresolved.
    assert_eq!((stats.provider_panics, stats.unresolved), (1, 1), "{stats:?}");
    assert_eq!(s.notifier.unresolved()[0].message_id(), "boom");
}

#[test]
fn a_second_shutdown_returns_once_the_first_has_drained() {
    let (script, starts) = Script::new(None);
    let s = Arc::new(scripted(&script, 1));
    for id in ["hold", "m2", "m3"] {
        s.notifier.submit(note(id)).expect("submit");
    }
    starts.recv_timeout(WAIT).expect("the worker holds the first message");
    let first = {
        let s = s.clone();
        std::thread::spawn(move || s.notifier.shutdown(Duration::MAX))
    };
    // Once the first has closed the queue, a second shutdown comes.
    crate::wait_until("the first shutdown", WAIT, || {
        matches!(s.notifier.submit(note("late")), Err(SubmitError::ShutDown))
    });
    let (done, second) = mpsc::channel();
    let (s2, script2) = (s.clone(), script.clone());
    std::thread::spawn(move || {
        let report = s2.notifier.shutdown(Duration::from_secs(60));
        let _ = done.send((report, script2.delivered("m3")));
    });
    // Opened once the second has answered, or has waited long enough to show it waits.
    let early = second.recv_timeout(Duration::from_millis(200)).ok();
    script.open();
    let (report, m3_at_return) = early.unwrap_or_else(|| second.recv().expect("answered"));
    assert!(report.drained && report.left.is_empty(), "{report:?}");
    assert_eq!(m3_at_return, 1, "the second shutdown said drained before the queue was");
    assert!(first.join().expect("first").drained);
}

#[test]
fn a_notifier_dropped_by_its_own_worker_stops_cleanly() {
    let (script, starts) = Script::new(None);
    let s = scripted(&script, 1);
    let notifier = Arc::new(s.notifier);
    script.notifier.set(Arc::downgrade(&notifier)).map_err(|_| ()).expect("set once");
    notifier.submit(note("hold")).expect("submit");
    starts.recv_timeout(WAIT).expect("the worker holds the message");
    drop(notifier); // the worker's send now holds the last handle
    script.open();
    // The worker drops the last handle: its shutdown skips joining itself (a join would
    // panic inside the send, and the provider would count a panic), and the worker stops.
    crate::wait_until("the notifier, its provider and worker gone", WAIT, || {
        Arc::strong_count(&script) == 1
    });
    assert_eq!(script.delivered("hold"), 1);
    assert_eq!(script.statuses.load(Ordering::SeqCst), 0, "the send went wrong (a panic?)");
}

#[test]
fn a_retry_whose_pause_outlasts_the_shutdown_deadline_is_not_started() {
    let (script, starts) = Script::new(None);
    let hour = Duration::from_secs(3_600);
    let retry = RetryPolicy { base: hour, cap: hour, attempts_max: 3, seed: 7 };
    let s = Arc::new(setup(Scripted(script.clone()), |c| c.retry(retry)));
    s.notifier.submit(note("hold")).expect("submit");
    starts.recv_timeout(WAIT).expect("the worker holds the first message");
    s.notifier.submit(note("flaky1")).expect("submit");
    let shutdown = {
        let s = s.clone();
        std::thread::spawn(move || s.notifier.shutdown(Duration::from_secs(30)))
    };
    crate::wait_until("the shutdown", WAIT, || {
        matches!(s.notifier.submit(note("late")), Err(SubmitError::ShutDown))
    });
    script.open();
    let report = shutdown.join().expect("shutdown");
    assert_eq!(report.left, ["flaky1"], "its retry would start an hour past the deadline");
    assert!(s.sleeps.0.lock().expect("lock").is_empty(), "no pause was begun");
    assert_eq!(s.notifier.stats().dead_lettered, 0);
}

#[test]
fn a_final_dead_letter_whose_reason_the_store_cannot_keep_is_stored_cut() {
    let dir = idem_testkit::scratch_dir("notify-reason");
    let store = SqliteStore::<Outcome>::open(&dir.join("ids.db"), StoreConfig::default())
        .expect("open")
        .with_result_bytes_max(64);
    let (script, _) = Script::new(Some(DeliveryStatus::Unknown));
    let retry = RetryPolicy { attempts_max: 1, ..RetryPolicy::default() };
    let config = Config::builder().retry(retry).unknown(UnknownPolicy::Resend).build();
    let notifier = Notifier::start(Scripted(script.clone()), store, config.expect("valid"))
        .expect("workers start");
    notifier.submit(note("vague1")).expect("submit");
    crate::wait_until("the dead letter", WAIT, || notifier.stats().dead_lettered == 1);
    let dead = notifier.dead_letters();
    assert!(dead[0].may_have_delivered && dead[0].reason.len() > 1_000, "{dead:?}");
    assert_eq!(notifier.stats().settle_failed, 0, "the store refused the outcome");
    // Final: a resubmission is answered with it, cut to what the store keeps.
    let again = notifier.submit(note("vague1")).expect("resubmit");
    let Submitted::Duplicate(Outcome::DeadLettered(kept)) = again else {
        panic!("not answered with the dead letter: {again:?}")
    };
    assert!(kept.len() < 64 && dead[0].reason.starts_with(&kept), "{kept:?}");
    assert!(notifier.shutdown(WAIT).drained);
}

/// A message waiting in a full queue past its lease: its repeats find no place and are
/// refused without touching its id, which stays the waiting job's, and it is sent once.
/// Before a submission took its place first, a repeat recovered the waiting job's id and
/// was then refused for room; the job, its lease lost, was dropped as superseded, and the
/// message was never sent. Repeats of a message in flight or delivered are still
/// answered as duplicates while the queue is full.
#[test]
fn a_message_waiting_in_a_full_queue_past_its_lease_is_sent_once() {
    let (script, starts) = Script::new(None);
    let s = setup(Scripted(script.clone()), |c| c.queue_capacity(1));
    s.notifier.submit(note("done")).expect("submit");
    crate::wait_until("the first one sent", WAIT, || s.notifier.stats().sent == 1);
    s.notifier.submit(note("hold")).expect("submit");
    starts.recv_timeout(WAIT).expect("the worker holds the second message");
    assert_eq!(s.notifier.submit(note("m1")).expect("queued"), Submitted::Accepted);
    let done = s.notifier.submit(note("done"));
    assert_eq!(done.expect("answered"), Submitted::Duplicate(Outcome::Delivered));
    let hold = s.notifier.submit(note("hold"));
    assert_eq!(hold.expect("answered"), Submitted::DuplicateInFlight);
    s.clock.advance(LEASE);
    let repeats: Vec<_> = (0..2).map(|_| s.notifier.submit(note("m1"))).collect();
    script.open();
    for refused in repeats {
        assert!(matches!(refused, Err(SubmitError::QueueFull { .. })), "{refused:?}");
    }
    assert!(s.notifier.shutdown(WAIT).drained);
    assert_eq!(script.delivered("m1"), 1, "the waiting message was sent, once");
    assert_eq!(s.notifier.stats().superseded, 0);
}

/// A recovered id whose job the shutdown's deadline stops before it starts stays in
/// flight: the attempt it recovered from may have delivered (here it did), and nobody has
/// asked the provider. Given back, the next notifier on the store would send it again.
#[test]
fn a_recovering_job_the_shutdown_never_starts_keeps_its_id_in_flight() {
    let (script, starts) = Script::new(None);
    let s = scripted(&script, 1);
    s.notifier.submit(note("hold")).expect("submit");
    starts.recv_timeout(WAIT).expect("the worker holds the first attempt");
    s.clock.advance(LEASE); // the attempt outlives its lease while it sends
    assert_eq!(s.notifier.submit(note("hold")).expect("submit"), Submitted::Recovering);
    let notifier = Arc::new(s.notifier);
    let shutdown = {
        let notifier = notifier.clone();
        std::thread::spawn(move || notifier.shutdown(Duration::ZERO))
    };
    // Probed with the held id: in flight until the queue closes, so nothing is queued.
    crate::wait_until("the shutdown", WAIT, || {
        matches!(notifier.submit(note("hold")), Err(SubmitError::ShutDown))
    });
    script.open();
    let report = shutdown.join().expect("shutdown");
    assert_eq!(report.left, ["hold"], "the recovering job is not sent, and said so");
    assert_eq!(script.delivered("hold"), 1, "the first attempt delivered");
    let next = Notifier::start(Scripted(script.clone()), s.store.clone(), Config::default())
        .expect("workers start");
    let again = next.submit(note("hold")).expect("submit");
    assert_eq!(again, Submitted::DuplicateInFlight, "the id was given back: sent blind");
    assert!(next.shutdown(WAIT).drained);
    assert_eq!(script.delivered("hold"), 1);
}

/// A send held past half the lease, then refused for good: meanwhile a resubmission
/// recovered the id and its job delivered the message. The held job's give-up is refused
/// by the token: superseded, no dead letter listed or counted for a delivered message.
#[test]
fn a_give_up_after_the_id_was_recovered_is_no_dead_letter() {
    let (script, starts) = Script::new(None);
    let s = scripted(&script, 2);
    s.notifier.submit(note("hold-refused")).expect("submit");
    starts.recv_timeout(WAIT).expect("the first send held");
    s.clock.advance(LEASE);
    let again = s.notifier.submit(note("hold-refused")).expect("a resubmission");
    assert_eq!(again, Submitted::Recovering);
    crate::wait_until("the recovery's delivery", WAIT, || script.delivered("hold-refused") == 1);
    script.open();
    assert!(s.notifier.shutdown(WAIT).drained);
    let stats = s.notifier.stats();
    assert!(s.notifier.dead_letters().is_empty(), "{:?}", s.notifier.dead_letters());
    assert_eq!((stats.dead_lettered, stats.superseded, stats.sent), (0, 1, 1), "{stats:?}");
}

/// Delivers, then panics with a [`Bomb`](crate::shutdown_and_limits::Bomb); its `status`
/// tells the truth (delivered).
struct DeliversThenBombs(AtomicU32);

impl Provider for DeliversThenBombs {
    fn send(&self, _: &Notification) -> Result<(), SendError> {
        self.0.fetch_add(1, Ordering::SeqCst);
        std::panic::resume_unwind(Box::new(crate::shutdown_and_limits::Bomb(3)))
    }
    fn status(&self, _: &Notification) -> DeliveryStatus {
        DeliveryStatus::Delivered
    }
}

/// A provider's panic whose payload panics when dropped is still the provider's panic: an
/// ambiguous send, settled by `status` (delivered), not a job lost to the worker's guard.
#[test]
fn a_provider_panic_whose_payload_panics_when_dropped_is_settled_by_status() {
    let s = setup(DeliversThenBombs(AtomicU32::new(0)), |c| c);
    s.notifier.submit(note("m1")).expect("submit");
    assert!(s.notifier.shutdown(WAIT).drained);
    let stats = s.notifier.stats();
    assert_eq!((stats.provider_panics, stats.sent, stats.unresolved), (1, 1, 0), "{stats:?}");
    assert_eq!(s.notifier.provider().0.load(Ordering::SeqCst), 1, "sent once");
}

/// A pause that tells the test it began, then waits for the test to let it end.
#[derive(Default)]
struct HeldPause {
    began: Mutex<bool>,
    ended: Mutex<bool>,
    changed: Condvar,
}

impl idem_notify::Sleeper for HeldPause {
    fn sleep(&self, _: Duration) {
        *self.began.lock().expect("lock") = true;
        self.changed.notify_all();
        let ended = self.ended.lock().expect("lock");
        let _ = self.changed.wait_timeout_while(ended, HOLD_MAX, |e| !*e).expect("lock");
    }
}

/// A shutdown that passes its deadline during a retry's pause: the retry never starts, so
/// it is not counted.
#[test]
fn a_retry_stopped_by_the_deadline_during_its_pause_is_not_counted() {
    let pause = Arc::new(HeldPause::default());
    let (script, _starts) = Script::new(None);
    let s = Arc::new(setup(Scripted(script.clone()), |c| c.sleeper(pause.clone())));
    s.notifier.submit(note("flaky1")).expect("submit");
    let began = pause.began.lock().expect("lock");
    let began = pause.changed.wait_timeout_while(began, WAIT, |b| !*b).expect("lock");
    assert!(*began.0, "the retry's pause began");
    drop(began);
    let shutdown = {
        let s = s.clone();
        std::thread::spawn(move || s.notifier.shutdown(Duration::ZERO))
    };
    crate::wait_until("the shutdown", WAIT, || {
        matches!(s.notifier.submit(note("late")), Err(SubmitError::ShutDown))
    });
    *pause.ended.lock().expect("lock") = true;
    pause.changed.notify_all();
    let left = shutdown.join().expect("shutdown").left;
    assert!(left.iter().any(|id| id == "flaky1"), "{left:?}");
    assert_eq!(script.sends.load(Ordering::SeqCst), 1, "one send, no retry");
    assert_eq!(s.notifier.stats().retries, 0);
}

/// A notifier whose provider holds a handle on it, `hold-shut-down` submitted first (held
/// while the test queues more), with one worker.
fn shut_down_by_its_provider(queued: &[&str]) -> (Arc<Script>, Arc<ScriptedNotifier>) {
    let (script, starts) = Script::new(None);
    let notifier = Arc::new(scripted(&script, 1).notifier);
    script.notifier.set(Arc::downgrade(&notifier)).map_err(|_| ()).expect("set once");
    notifier.submit(note("hold-shut-down")).expect("submit");
    starts.recv_timeout(WAIT).expect("the worker holds the first message");
    for id in queued {
        notifier.submit(note(id)).expect("submit");
    }
    (script, notifier)
}

/// A provider shuts its notifier down from the worker it runs on, two messages queued
/// behind it: that shutdown cannot wait for the worker, so it says not drained, and the
/// two, given back by the worker afterwards, are reported to the next shutdown.
#[test]
fn a_shutdown_from_a_worker_does_not_say_drained_and_the_next_reports_the_rest() {
    let (script, notifier) = shut_down_by_its_provider(&["m1", "m2"]);
    script.open();
    crate::wait_until("the provider's shutdown", WAIT, || {
        !script.reports.lock().expect("lock").is_empty()
    });
    let report = notifier.shutdown(WAIT);
    let inner = script.reports.lock().expect("lock").clone();
    assert!(!inner[0].drained, "from the worker: {inner:?}");
    let mut left = inner[0].left.clone();
    left.extend(report.left);
    assert_eq!(left, ["m1", "m2"], "every id given back is reported once");
    assert_eq!(script.delivered("m1") + script.delivered("m2"), 0);
}

/// A shutdown under way joins the worker whose provider calls `shutdown` in turn: the
/// provider's call returns at once, and so does the first, instead of each waiting for the
/// other.
#[test]
fn a_shutdown_from_a_worker_during_another_neither_waits_for_the_other() {
    let (script, notifier) = shut_down_by_its_provider(&[]);
    let (done, outer) = mpsc::channel();
    let outside = notifier.clone();
    std::thread::spawn(move || drop(done.send(outside.shutdown(Duration::from_secs(5)))));
    crate::wait_until("the first shutdown", WAIT, || {
        matches!(notifier.submit(note("late")), Err(SubmitError::ShutDown))
    });
    script.open();
    let report = outer.recv_timeout(WAIT).expect("the first shutdown returns");
    assert!(report.left.is_empty(), "{report:?}");
    assert_eq!(script.reports.lock().expect("lock").len(), 1, "the provider's returned");
    assert_eq!(script.delivered("hold-shut-down"), 1);
}
