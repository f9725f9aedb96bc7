//! The leak count counts loans held past the threshold by their borrowers, and nothing
//! else: not the pool's own health check of a connection about to be lent, nor a
//! connection taken off the shelf and not lent yet.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread;
use std::time::Duration;

use idem_core::{Clock, ManualClock, Timestamp};
use idem_pool::{Fairness, HealthCheck, Manager, Pool};

use crate::{Gate, TestError, WAIT_LIMIT, wait_for_waiters};

const THRESHOLD: Duration = Duration::from_secs(5);

/// Connections whose health check stops at a gate.
#[derive(Debug)]
struct SlowCheck(Arc<Gate>);

impl Manager for SlowCheck {
    type Connection = ();
    type Error = TestError;

    fn connect(&self) -> Result<(), TestError> {
        Ok(())
    }

    fn is_valid(&self, _: &mut ()) -> Result<(), TestError> {
        self.0.pass();
        Ok(())
    }
}

#[test]
fn a_slow_health_check_is_not_a_leak() {
    let (gate, arrivals, open) = Gate::new();
    let clock = Arc::new(ManualClock::new(Timestamp::from_millis(1_000_000)));
    let pool = Pool::builder()
        .max_size(1)
        .leak_threshold(Some(THRESHOLD))
        .health_check(HealthCheck::OnCheckout)
        .maintenance_interval(None)
        .clock(clock.clone())
        .build(SlowCheck(gate.clone()))
        .expect("valid config");
    drop(pool.get().expect("made"));
    gate.armed.store(true, Ordering::SeqCst);
    let borrower = {
        let pool = pool.clone();
        thread::spawn(move || drop(pool.get().expect("lent after its check")))
    };
    arrivals.recv_timeout(WAIT_LIMIT).expect("the check began");
    // The check outlasts the threshold; the connection has not reached its borrower.
    clock.advance(THRESHOLD * 2);
    pool.maintain();
    open.send(()).expect("the check waits");
    borrower.join().expect("borrower");
    pool.maintain();
    assert_eq!(pool.state().leaks_suspected, 0, "the pool's own check counted as a leak");
}

/// A manual clock whose reading stops at a gate when armed.
#[derive(Debug)]
struct GatedClock {
    inner: ManualClock,
    gate: Arc<Gate>,
}

impl Clock for GatedClock {
    fn now(&self) -> Timestamp {
        self.gate.pass();
        self.inner.now()
    }
}

#[test]
fn a_connection_taken_off_the_shelf_and_not_yet_lent_is_not_a_leak() {
    let (gate, arrivals, open) = Gate::new();
    let clock =
        Arc::new(GatedClock { inner: ManualClock::new(Timestamp::from_millis(1_000_000)), gate });
    let pool = Pool::builder()
        .max_size(1)
        .fairness(Fairness::Barging)
        .leak_threshold(Some(THRESHOLD))
        .health_check(HealthCheck::Never)
        .connection_timeout(WAIT_LIMIT)
        .maintenance_interval(None)
        .clock(clock.clone())
        .build(crate::TestManager::default())
        .expect("valid config");
    let held = pool.get().expect("get");
    let waiter = {
        let pool = pool.clone();
        thread::spawn(move || drop(pool.get().expect("the waiter's turn")))
    };
    wait_for_waiters(&pool, 1);
    // Returned at once: its loan lasted no time. The waiter, woken, takes it off the
    // shelf and reads the clock (stopped at the gate) before it lends it; meanwhile time
    // passes and maintenance looks.
    clock.gate.armed.store(true, Ordering::SeqCst);
    drop(held);
    arrivals.recv_timeout(WAIT_LIMIT).expect("the waiter reads the clock");
    // Between two loans: counted idle, not in use.
    let state = pool.state();
    assert_eq!((state.idle, state.in_use), (1, 0), "{state:?}");
    clock.inner.advance(THRESHOLD * 2);
    pool.maintain();
    open.send(()).expect("the waiter waits");
    waiter.join().expect("waiter");
    assert_eq!(pool.state().leaks_suspected, 0, "a connection between loans counted");
}

/// Connections whose broken check on return stops at a gate.
#[derive(Debug)]
struct SlowReturnCheck(Arc<Gate>);

impl Manager for SlowReturnCheck {
    type Connection = ();
    type Error = TestError;

    fn connect(&self) -> Result<(), TestError> {
        Ok(())
    }

    fn has_broken(&self, _: &mut ()) -> bool {
        self.0.pass();
        false
    }
}

#[test]
fn a_slow_broken_check_on_return_is_not_a_leak() {
    let (gate, arrivals, open) = Gate::new();
    let clock = Arc::new(ManualClock::new(Timestamp::from_millis(1_000_000)));
    let pool = Pool::builder()
        .max_size(1)
        .leak_threshold(Some(THRESHOLD))
        .maintenance_interval(None)
        .clock(clock.clone())
        .build(SlowReturnCheck(gate.clone()))
        .expect("valid config");
    let borrowed = pool.get().expect("get");
    gate.armed.store(true, Ordering::SeqCst);
    // Given back at once; the pool's check on the way back outlasts the threshold.
    let returner = thread::spawn(move || drop(borrowed));
    arrivals.recv_timeout(WAIT_LIMIT).expect("the return's check began");
    clock.advance(THRESHOLD * 2);
    pool.maintain();
    open.send(()).expect("the check waits");
    returner.join().expect("returner");
    assert_eq!(pool.state().leaks_suspected, 0, "the pool's own check counted as a leak");
}
