//! A shutdown that begins during a retry's pause, a worker whose job panics with a payload
//! that panics again, a store that keeps no result bytes, a provider's reason of any
//! length, and an unresolved message replayed.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use idem_core::{Lease, ManualClock, MemoryStore, StoreConfig, StoreError, Timestamp};
use idem_notify::{Config, DeliveryStatus, Notifier, Outcome, Sleeper, SubmitError, Submitted};
use idem_store_sqlite::SqliteStore;
use idem_testkit::faulty::Faulty;

use crate::hostile::{Script, Scripted};
use crate::{LEASE, WAIT, note, setup};

/// The longest a held pause waits for the test to end it.
const HOLD_MAX: Duration = Duration::from_secs(60);

/// A pause held until the test ends it; counts the pauses begun.
#[derive(Default)]
struct HeldPause {
    state: Mutex<(u32, bool)>,
    changed: Condvar,
}

impl HeldPause {
    fn wait_begun(&self) {
        let state = self.state.lock().expect("lock");
        let (state, _) = self.changed.wait_timeout_while(state, WAIT, |s| s.0 == 0).expect("lock");
        assert!(state.0 > 0, "no pause began");
    }

    fn end(&self) {
        self.state.lock().expect("lock").1 = true;
        self.changed.notify_all();
    }
}

impl Sleeper for HeldPause {
    fn sleep(&self, _duration: Duration) {
        let mut state = self.state.lock().expect("lock");
        state.0 += 1;
        self.changed.notify_all();
        let _ = self.changed.wait_timeout_while(state, HOLD_MAX, |s| !s.1).expect("lock");
    }
}

#[test]
fn a_shutdown_begun_during_a_retry_pause_starts_no_retry_after_it() {
    let (script, _starts) = Script::new(None);
    let pause = Arc::new(HeldPause::default());
    let s = Arc::new(setup(Scripted(script.clone()), |c| c.sleeper(pause.clone())));
    s.notifier.submit(note("flaky-paused")).expect("submit");
    pause.wait_begun();
    let shutdown = {
        let s = s.clone();
        std::thread::spawn(move || s.notifier.shutdown(Duration::ZERO))
    };
    // Probed with the paused id: in flight until the queue closes, so nothing is queued.
    crate::wait_until("the shutdown", WAIT, || {
        matches!(s.notifier.submit(note("flaky-paused")), Err(SubmitError::ShutDown))
    });
    pause.end();
    let report = shutdown.join().expect("the shutdown");
    assert_eq!(report.left, ["flaky-paused"], "given back, not retried");
    assert_eq!(script.sends.load(Ordering::SeqCst), 1, "no send after the deadline");
}

/// A panic payload whose own drop panics with the next (`self.0` deep).
pub(crate) struct Bomb(pub(crate) u32);

impl Drop for Bomb {
    fn drop(&mut self) {
        if self.0 > 0 {
            std::panic::panic_any(Bomb(self.0 - 1));
        }
    }
}

/// Panics once, with a [`Bomb`], in the first pause.
#[derive(Default)]
struct Bomber(AtomicBool);

impl Sleeper for Bomber {
    fn sleep(&self, _duration: Duration) {
        if !self.0.swap(true, Ordering::SeqCst) {
            std::panic::panic_any(Bomb(3));
        }
    }
}

#[test]
fn a_job_whose_panic_payload_panics_when_dropped_does_not_end_its_worker() {
    let (script, _starts) = Script::new(Some(DeliveryStatus::Unknown));
    let s = setup(Scripted(script.clone()), |c| c.sleeper(Arc::new(Bomber::default())));
    s.notifier.submit(note("flaky-bombed")).expect("submit");
    crate::wait_until("the job reported", WAIT, || s.notifier.stats().unresolved == 1);
    let after = s.notifier.submit(note("after"));
    assert_eq!(after.expect("the worker still takes jobs"), Submitted::Accepted);
    crate::wait_until("the next one sent", WAIT, || script.delivered("after") == 1);
    assert!(s.notifier.shutdown(WAIT).drained);
}

#[test]
fn a_store_that_keeps_no_result_bytes_is_refused_at_start() {
    let dir = idem_testkit::scratch_dir("notify-no-bytes");
    let open = |max| {
        SqliteStore::<Outcome>::open(&dir.join(format!("ids-{max}.db")), StoreConfig::default())
            .expect("opens")
            .with_result_bytes_max(max)
    };
    let (script, _starts) = Script::new(None);
    let refused = Notifier::start(Scripted(script.clone()), open(0), Config::default());
    let error = refused.map(|_| ()).expect_err("a store that keeps nothing is refused");
    assert_eq!(error.kind(), std::io::ErrorKind::InvalidInput, "{error}");
    assert!(error.to_string().contains("at least 1"), "{error}");
    let at_the_limit = Notifier::start(Scripted(script), open(1), Config::default());
    assert!(at_the_limit.expect("one byte keeps an outcome").shutdown(WAIT).drained);
}

#[test]
fn a_providers_reason_of_any_length_is_kept_cut() {
    let (script, _starts) = Script::new(None);
    let store = Arc::new(MemoryStore::new(StoreConfig::default()));
    let notifier = Notifier::start(Scripted(script), store, Config::default()).expect("starts");
    notifier.submit(note("loud")).expect("submit");
    assert!(notifier.shutdown(WAIT).drained);
    let dead = notifier.dead_letters();
    assert_eq!(dead.len(), 1);
    assert!((1_000..=1_024).contains(&dead[0].reason.len()), "{}", dead[0].reason.len());
}

#[test]
fn an_unresolved_message_replayed_is_listed_once() {
    let (script, _starts) = Script::new(Some(DeliveryStatus::Unknown));
    let s = setup(Scripted(script), |c| c);
    s.notifier.submit(note("vague-1")).expect("submit");
    crate::wait_until("unresolved", WAIT, || s.notifier.stats().unresolved == 1);
    s.clock.advance(LEASE);
    assert_eq!(s.notifier.submit(note("vague-1")).expect("replayed"), Submitted::Recovering);
    crate::wait_until("unresolved again", WAIT, || s.notifier.stats().unresolved == 2);
    assert_eq!(s.notifier.unresolved().len(), 1, "listed once");
    assert!(s.notifier.shutdown(WAIT).drained);
}

/// A store whose claim panics (a store with a bug) takes no place in the queue with it:
/// once it claims again, an empty queue accepts as many as it holds.
#[test]
fn a_claim_that_panics_leaves_the_queues_places_free() {
    let store = Faulty::new(MemoryStore::new(StoreConfig::default())).before_claim(|key| {
        assert!(!key.key().as_str().starts_with("boom"), "a store's claim that panics");
        Ok(())
    });
    let (script, _starts) = Script::new(None);
    let config = Config::builder().queue_capacity(2).build().expect("valid");
    let notifier = Notifier::start(Scripted(script.clone()), store, config).expect("starts");
    for id in ["boom-1", "boom-2", "boom-3"] {
        let panicked =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| notifier.submit(note(id))));
        assert!(panicked.is_err(), "the store's panic reaches the caller");
    }
    for id in ["m1", "m2"] {
        assert_eq!(notifier.submit(note(id)).expect("room"), Submitted::Accepted, "{id}");
    }
    assert!(notifier.shutdown(WAIT).drained);
    assert_eq!((script.delivered("m1"), script.delivered("m2")), (1, 1));
}

/// A renewal held past the shutdown's deadline (the message waited in the queue until
/// less than half its lease was left): once it answers, the send is not begun; the id is
/// given back and listed.
#[test]
fn no_send_begins_after_a_renewal_that_outlasted_the_shutdown_deadline() {
    let clock = Arc::new(ManualClock::new(Timestamp::from_millis(1_000_000)));
    let held = Arc::new(HeldPause::default());
    let hold = held.clone();
    let store = Faulty::new(MemoryStore::with_clock(
        StoreConfig::builder().lease(LEASE).build().expect("valid"),
        clock.clone(),
    ))
    .before_renew(move |_: &Lease| -> Result<(), StoreError> {
        hold.sleep(Duration::ZERO);
        Ok(())
    });
    let (script, starts) = Script::new(None);
    let config = Config::builder().workers(1).clock(clock.clone()).build().expect("valid");
    let notifier = Arc::new(Notifier::start(Scripted(script.clone()), store, config).expect("ok"));
    notifier.submit(note("hold")).expect("submit");
    starts.recv_timeout(WAIT).expect("the worker holds the first message");
    notifier.submit(note("m")).expect("submit");
    clock.advance(LEASE * 3 / 4); // less than half of m's lease left: its worker renews
    script.open();
    held.wait_begun();
    let shutdown = {
        let notifier = notifier.clone();
        std::thread::spawn(move || notifier.shutdown(Duration::ZERO))
    };
    crate::wait_until("the shutdown", WAIT, || {
        matches!(notifier.submit(note("m")), Err(SubmitError::ShutDown))
    });
    held.end();
    let report = shutdown.join().expect("the shutdown");
    assert_eq!(report.left, ["m"], "not sent past the deadline");
    assert_eq!(script.delivered("m"), 0);
}

/// A message queued past its lease and recovered by a repeat: two jobs for one id when a
/// shutdown stops both. The superseded one's id is not its to give back: listed once, no
/// settle counted as failed.
#[test]
fn a_superseded_job_stopped_by_the_shutdown_is_neither_listed_nor_counted_failed() {
    let (script, starts) = Script::new(None);
    let s = Arc::new(setup(Scripted(script.clone()), |c| c));
    s.notifier.submit(note("hold")).expect("submit");
    starts.recv_timeout(WAIT).expect("the worker holds the first message");
    assert_eq!(s.notifier.submit(note("m")).expect("queued"), Submitted::Accepted);
    s.clock.advance(LEASE);
    assert_eq!(s.notifier.submit(note("m")).expect("recovered"), Submitted::Recovering);
    let shutdown = {
        let s = s.clone();
        std::thread::spawn(move || s.notifier.shutdown(Duration::ZERO))
    };
    crate::wait_until("the shutdown", WAIT, || {
        matches!(s.notifier.submit(note("m")), Err(SubmitError::ShutDown))
    });
    script.open();
    let report = shutdown.join().expect("the shutdown");
    assert_eq!(report.left, ["m"], "listed once");
    let stats = s.notifier.stats();
    assert_eq!((stats.settle_failed, stats.superseded), (0, 1), "{stats:?}");
}
