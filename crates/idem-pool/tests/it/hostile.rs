//! Managers that misbehave: a `connect`, health check or broken check that panics, an
//! error whose drop calls back into the pool, and a connection handed on past its
//! lifetime. The pool keeps every place, never deadlocks, and lends nothing stale.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, mpsc};
use std::time::Duration;

use idem_core::{Clock, ManualClock, Timestamp};
use idem_pool::{Fairness, Manager, Pool};

use crate::{WAIT_LIMIT, pool, wait_for_waiters, wait_until};

#[test]
fn a_connect_that_panics_costs_no_place() {
    let (pool, _) = pool(1, |b| b);
    pool.manager().panic_connect.store(true, Ordering::SeqCst);
    assert!(catch_unwind(AssertUnwindSafe(|| pool.get())).is_err(), "the panic goes on");
    pool.assert_invariants();
    let conn = pool.get().expect("the one place is still there");
    assert_eq!((pool.state().in_use, pool.state().created), (1, 1));
    drop(conn);
}

#[test]
fn a_health_check_that_panics_costs_no_place() {
    let (pool, _) = pool(1, |b| b);
    drop(pool.get().expect("get"));
    pool.manager().panic_check.store(true, Ordering::SeqCst);
    assert!(catch_unwind(AssertUnwindSafe(|| pool.get())).is_err(), "the panic goes on");
    pool.assert_invariants();
    assert_eq!(pool.state().discarded, 1, "the unchecked connection was closed");
    assert_eq!(pool.get().expect("a new connection in its place").id, 1);
}

#[test]
fn a_broken_check_that_panics_costs_no_place() {
    let (pool, _) = pool(1, |b| b);
    let conn = pool.get().expect("get");
    pool.manager().panic_broken.store(true, Ordering::SeqCst);
    assert!(catch_unwind(AssertUnwindSafe(move || drop(conn))).is_err(), "the panic goes on");
    pool.assert_invariants();
    let loan = pool.get().expect("the place is back").into_loan();
    let stale = loan.clone();
    pool.manager().panic_broken.store(true, Ordering::SeqCst);
    assert!(catch_unwind(AssertUnwindSafe(|| loan.release())).is_err(), "the panic goes on");
    assert!(!stale.release(), "the loan's place was taken back");
    pool.assert_invariants();
    assert_eq!(pool.get().expect("the place is back again").id, 2);
    assert_eq!(pool.state().discarded, 2);
}

#[test]
fn a_maintenance_round_that_panics_does_not_end_maintenance() {
    let tick = Some(Duration::from_millis(2));
    let (pool, _) = pool(2, |b| b.min_idle(1).maintenance_interval(tick));
    let held = pool.get().expect("the idle one");
    // The next round's fill of min_idle panics; the round after fills it.
    pool.manager().panic_connect.store(true, Ordering::SeqCst);
    wait_until("a refill after the panic", WAIT_LIMIT, || pool.state().idle == 1);
    assert!(!pool.manager().panic_connect.load(Ordering::SeqCst), "the panic happened");
    drop(held);
    pool.assert_invariants();
}

#[test]
fn a_connection_handed_on_past_its_lifetime_is_closed_not_lent() {
    let life = Some(Duration::from_secs(10));
    let (pool, clock) = pool(1, |b| b.fairness(Fairness::Fifo).max_lifetime(life));
    let held = pool.get().expect("get");
    assert_eq!(held.id, 0);
    let (answer, answered) = mpsc::channel();
    let waiter = pool.clone();
    std::thread::spawn(move || {
        let _ = answer.send(waiter.get_timeout(WAIT_LIMIT).map(|conn| conn.id));
    });
    wait_for_waiters(&pool, 1);
    clock.advance(Duration::from_secs(60));
    drop(held); // handed straight to the waiter, 60 s old
    let id = answered.recv_timeout(WAIT_LIMIT).expect("answered").expect("a connection");
    assert_eq!(id, 1, "the waiter was lent a connection past its lifetime");
    assert_eq!((pool.state().created, pool.state().discarded), (2, 1));
}

#[test]
fn a_connection_handed_on_past_its_lifetime_whose_drop_panics_costs_no_place() {
    let life = Some(Duration::from_secs(10));
    let (pool, clock) = pool(1, |b| b.fairness(Fairness::Fifo).max_lifetime(life));
    let held = pool.get().expect("get");
    let (answer, answered) = mpsc::channel();
    let waiter = pool.clone();
    std::thread::spawn(move || {
        let got = catch_unwind(AssertUnwindSafe(|| waiter.get_timeout(WAIT_LIMIT).is_ok()));
        let _ = answer.send(got.is_err());
    });
    wait_for_waiters(&pool, 1);
    clock.advance(Duration::from_secs(60));
    pool.manager().panic_drop.store(true, Ordering::SeqCst);
    drop(held); // handed to the waiter, which closes it (60 s old), and the close panics
    assert!(answered.recv_timeout(WAIT_LIMIT).expect("answered"), "the panic goes on");
    pool.assert_invariants();
    let conn = pool.get().expect("the one place is still there");
    assert_eq!((pool.state().created, pool.state().discarded), (2, 1));
    drop(conn);
}

/// How long a `get` after a panic waits for the place the panic must not have cost: a
/// place that is there is lent at once; one lost would be waited for until this passes.
const PLACE_BACK: Duration = Duration::from_secs(1);

/// A clock that panics on its `n`th reading from now on (once), else reads `inner`.
#[derive(Debug)]
struct PanickingClock {
    inner: ManualClock,
    readings_left: AtomicU64,
}

impl Clock for PanickingClock {
    fn now(&self) -> Timestamp {
        let left = self.readings_left.load(Ordering::SeqCst);
        if left > 0 && self.readings_left.fetch_sub(1, Ordering::SeqCst) == 1 {
            std::panic::resume_unwind(Box::new("a clock that panics"));
        }
        self.inner.now()
    }
}

#[test]
fn a_clock_that_panics_while_a_place_is_held_costs_no_place() {
    let clock = Arc::new(PanickingClock {
        inner: ManualClock::new(Timestamp::from_millis(1_000_000)),
        readings_left: AtomicU64::new(0),
    });
    let pool = Pool::builder()
        .max_size(1)
        .connection_timeout(WAIT_LIMIT)
        .maintenance_interval(None)
        .clock(clock.clone())
        .build(crate::TestManager::default())
        .expect("valid config");
    // The first get reads the clock before it reserves the place, and again once it has
    // connected into it: that second reading panics.
    clock.readings_left.store(2, Ordering::SeqCst);
    assert!(catch_unwind(AssertUnwindSafe(|| pool.get())).is_err(), "the panic goes on");
    pool.assert_invariants();
    let conn = pool.get_timeout(PLACE_BACK).expect("the one place is still there");
    assert_eq!(pool.state().in_use, 1);
    drop(conn);
}

/// An error that asks the pool for its state when dropped (a logging error, say).
#[derive(Debug)]
struct Telling;

impl std::fmt::Display for Telling {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("refused")
    }
}

impl std::error::Error for Telling {}

impl Drop for Telling {
    fn drop(&mut self) {
        if let Some(pool) = TELLING_POOL.get() {
            let _ = pool.state();
        }
    }
}

/// Refuses every connect with a `Telling` error.
#[derive(Debug)]
struct Refusing;

impl Manager for Refusing {
    type Connection = ();
    type Error = Telling;

    fn connect(&self) -> Result<(), Telling> {
        Err(Telling)
    }

    fn is_valid(&self, _: &mut ()) -> Result<(), Telling> {
        Ok(())
    }

    fn has_broken(&self, _: &mut ()) -> bool {
        false
    }
}

static TELLING_POOL: OnceLock<Pool<Refusing>> = OnceLock::new();

#[test]
fn an_error_whose_drop_calls_the_pool_does_not_deadlock_it() {
    let pool = Pool::builder()
        .max_size(1)
        .connection_timeout(Duration::from_millis(50))
        .maintenance_interval(None)
        .build(Refusing)
        .expect("valid config");
    TELLING_POOL.set(pool.clone()).expect("set once");
    let (done, finished) = mpsc::channel();
    std::thread::spawn(move || {
        // Two failed connects: the second replaces (drops) the first's error.
        for _ in 0..2 {
            assert!(pool.get().is_err(), "every connect is refused");
        }
        let _ = done.send(());
    });
    finished.recv_timeout(WAIT_LIMIT).expect("deadlocked: an error was dropped under the lock");
}

/// An error whose drop panics if its switch is on (once: the switch turns off).
#[derive(Debug)]
struct PanickingError(Arc<std::sync::atomic::AtomicBool>);

impl std::fmt::Display for PanickingError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("refused")
    }
}

impl std::error::Error for PanickingError {}

impl Drop for PanickingError {
    fn drop(&mut self) {
        if self.0.swap(false, Ordering::SeqCst) && !std::thread::panicking() {
            std::panic::resume_unwind(Box::new("an error whose drop panics"));
        }
    }
}

/// Refuses while `refuse` is set, with errors that share the switch `panic_drop`.
#[derive(Debug, Default)]
struct RefusingPanickily {
    refuse: std::sync::atomic::AtomicBool,
    panic_drop: Arc<std::sync::atomic::AtomicBool>,
}

impl Manager for RefusingPanickily {
    type Connection = ();
    type Error = PanickingError;

    fn connect(&self) -> Result<(), PanickingError> {
        if self.refuse.load(Ordering::SeqCst) {
            Err(PanickingError(self.panic_drop.clone()))
        } else {
            Ok(())
        }
    }
}

#[test]
fn a_connect_error_whose_drop_panics_costs_no_place() {
    let pool = Pool::builder()
        .max_size(1)
        .maintenance_interval(None)
        .connection_timeout(WAIT_LIMIT)
        .build(RefusingPanickily::default())
        .expect("valid config");
    pool.manager().refuse.store(true, Ordering::SeqCst);
    pool.manager().panic_drop.store(true, Ordering::SeqCst);
    // The second refusal replaces the first's error, whose drop panics.
    assert!(catch_unwind(AssertUnwindSafe(|| pool.get())).is_err(), "the panic goes on");
    pool.manager().refuse.store(false, Ordering::SeqCst);
    pool.assert_invariants();
    let conn = pool.get_timeout(PLACE_BACK).expect("the one place is still there");
    assert_eq!(pool.state().in_use, 1);
    drop(conn);
}

#[test]
fn a_clock_that_panics_as_a_waiter_is_handed_a_connection_counts_it_closed() {
    let clock = Arc::new(PanickingClock {
        inner: ManualClock::new(Timestamp::from_millis(1_000_000)),
        readings_left: AtomicU64::new(0),
    });
    let pool = Pool::builder()
        .max_size(1)
        .fairness(Fairness::Fifo)
        .connection_timeout(WAIT_LIMIT)
        .maintenance_interval(None)
        .clock(clock.clone())
        .build(crate::TestManager::default())
        .expect("valid config");
    let held = pool.get().expect("get");
    let waiter = {
        let pool = pool.clone();
        std::thread::spawn(move || catch_unwind(AssertUnwindSafe(|| pool.get())).is_err())
    };
    wait_for_waiters(&pool, 1);
    // The waiter, handed the connection, reads the clock before lending it: it panics.
    clock.readings_left.store(1, Ordering::SeqCst);
    drop(held);
    assert!(waiter.join().expect("waiter"), "the panic goes on");
    let state = pool.state();
    assert_eq!((state.created, state.discarded, state.size), (1, 1, 0), "{state:?}");
    pool.assert_invariants();
}

/// Connects through a gate, when armed.
#[derive(Debug)]
struct GatedConnect(Arc<crate::Gate>);

impl Manager for GatedConnect {
    type Connection = ();
    type Error = crate::TestError;

    fn connect(&self) -> Result<(), crate::TestError> {
        self.0.pass();
        Ok(())
    }
}

#[test]
fn a_refill_that_ends_after_close_counts_its_connection_closed() {
    let (gate, arrivals, open) = crate::Gate::new();
    let pool = Pool::builder()
        .max_size(2)
        .min_idle(1)
        .maintenance_interval(None)
        .build(GatedConnect(gate.clone()))
        .expect("valid config");
    let held = pool.get().expect("the idle one");
    gate.armed.store(true, Ordering::SeqCst);
    let refill = {
        let pool = pool.clone();
        std::thread::spawn(move || pool.maintain())
    };
    arrivals.recv_timeout(WAIT_LIMIT).expect("the refill connects");
    pool.close();
    open.send(()).expect("the refill waits");
    refill.join().expect("refill");
    drop(held);
    let state = pool.state();
    assert_eq!((state.created, state.discarded, state.size), (2, 2, 0), "{state:?}");
}
