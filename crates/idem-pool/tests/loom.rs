//! Loom models of the pool's races. Run with `cargo xtask loom idem-pool`.
//!
//! Each model opens with the race it covers and the invariant it asserts. The pool runs on
//! loom's mutex, condition variables and `Arc` (the crate's `sync` shim).
#![cfg(loom)]

mod managers;

use std::time::Duration;

use idem_pool::{Error, Fairness, HealthCheck, Pool};
use loom::sync::{Arc, Condvar, Mutex};
use loom::thread;

use managers::{FailFirst, Noop};

fn one_connection_pool() -> Pool<Noop> {
    pool_with(Fairness::Fifo)
}

fn pool_with(fairness: Fairness) -> Pool<Noop> {
    pool_with_after(fairness, Duration::from_micros(500))
}

fn pool_with_after(fairness: Fairness, fair_after: Duration) -> Pool<Noop> {
    Pool::builder()
        .max_size(1)
        .fairness(fairness)
        .fair_after(fair_after)
        .health_check(HealthCheck::Never)
        .maintenance_interval(None)
        .connection_timeout(Duration::from_secs(3600))
        .build(Noop)
        .expect("valid config")
}

/// Race: two clones of one loan are released at once (two cleanup paths).
/// Invariant: exactly one release returns the connection; the other is a counted double
/// release; the connection is idle once, not twice.
#[test]
fn racing_loan_releases() {
    loom::model(|| {
        let pool = one_connection_pool();
        let loan = pool.get().expect("get").into_loan();
        let other = loan.clone();
        let racer = thread::spawn(move || other.release());
        let mine = loan.release();
        let theirs = racer.join().unwrap();
        assert!(mine ^ theirs, "exactly one release wins: {mine} {theirs}");
        let state = pool.state();
        assert_eq!((state.idle, state.in_use, state.double_releases), (1, 0, 1));
        pool.assert_invariants();
    });
}

/// Race: two threads take the one idle connection off the shelf at once, each with a
/// compare-and-swap of its slot's word and no lock.
/// Invariant: exactly one of them gets it; the other finds nothing (`try_get` is `None`).
#[test]
fn two_gets_race_for_one_idle_connection() {
    loom::model(|| {
        let pool = one_connection_pool();
        drop(pool.get().expect("made, and idle"));
        let other = {
            let pool = pool.clone();
            thread::spawn(move || pool.try_get())
        };
        // Each keeps what it took until both have tried.
        let mine = pool.try_get();
        let theirs = other.join().unwrap();
        assert!(mine.is_some() ^ theirs.is_some(), "exactly one taker");
        drop((mine, theirs));
        assert_eq!(pool.state().idle, 1, "given back");
        pool.assert_invariants();
    });
}

/// Race: a connection is returned while another thread is about to wait for one (a lost
/// wake-up if the return lands between the waiter's check and its sleep).
/// Invariant: the waiter always gets the connection; loom's condition variables never
/// time out, so a lost wake-up is reported as a deadlock.
#[test]
fn release_wakes_waiting_get() {
    release_wakes_waiting_get_with(Fairness::Fifo);
}

/// The same race with `Fairness::Barging`: the connection goes to the idle list and the
/// waiter is woken to take it (no handoff).
/// Invariant: as above, the waiter always gets the connection.
#[test]
fn release_wakes_waiting_get_barging() {
    release_wakes_waiting_get_with(Fairness::Barging);
}

/// The same race under `Fairness::Eventual`, both ways it can decide: barging (the
/// waiter has not waited `fair_after`) and a fair hand-off (`fair_after` zero).
/// Invariant: as above, the waiter always gets the connection.
#[test]
fn release_wakes_waiting_get_eventual() {
    release_wakes_waiting_get_with(Fairness::Eventual);
    release_wakes_waiting_get_after(Fairness::Eventual, Duration::ZERO);
}

fn release_wakes_waiting_get_with(fairness: Fairness) {
    release_wakes_waiting_get_after(fairness, Duration::from_micros(500));
}

fn release_wakes_waiting_get_after(fairness: Fairness, fair_after: Duration) {
    loom::model(move || {
        let pool = pool_with_after(fairness, fair_after);
        let held = pool.get().expect("get");
        let waiter = {
            let pool = pool.clone();
            thread::spawn(move || pool.get().map(|conn| *conn))
        };
        drop(held);
        assert_eq!(waiter.join().unwrap().expect("the waiter gets the connection"), 7);
        pool.assert_invariants();
    });
}

/// Race: two connections come back, one after the other, while two threads wait for one,
/// barging (each return goes to the idle list and wakes one waiter to take it); both
/// returns may land before either woken waiter runs.
/// Invariant: both waiters get a connection while the other holds one (each keeps its
/// connection until both have one, so neither can rescue the other by returning it). A
/// return that woke the already woken waiter again would leave the other asleep beside an
/// idle connection; loom's condition variables never time out, so that is reported as a
/// deadlock.
#[test]
fn two_returns_wake_two_waiters_barging() {
    loom::model(|| {
        let pool = Pool::builder()
            .max_size(2)
            .fairness(Fairness::Barging)
            .health_check(HealthCheck::Never)
            .maintenance_interval(None)
            .connection_timeout(Duration::from_secs(3600))
            .build(Noop)
            .expect("valid config");
        let held = [pool.get().expect("get"), pool.get().expect("get")];
        let both = Arc::new(Rendezvous::default());
        let waiters: Vec<_> = (0..2)
            .map(|_| {
                let (pool, both) = (pool.clone(), both.clone());
                thread::spawn(move || {
                    let conn = pool.get().expect("each waiter gets a connection");
                    both.arrive_and_wait(2);
                    *conn
                })
            })
            .collect();
        // Both wait before anything comes back (the state says so, under the pool's lock).
        while pool.state().waiters < 2 {
            thread::yield_now();
        }
        drop(held);
        for waiter in waiters {
            assert_eq!(waiter.join().unwrap(), 7);
        }
        pool.assert_invariants();
    });
}

/// Threads that wait for each other: a barrier on loom's mutex and condition variable.
#[derive(Default)]
struct Rendezvous {
    arrived: Mutex<usize>,
    all_in: Condvar,
}

impl Rendezvous {
    fn arrive_and_wait(&self, n: usize) {
        let mut arrived = self.arrived.lock().unwrap();
        *arrived += 1;
        self.all_in.notify_all();
        while *arrived < n {
            arrived = self.all_in.wait(arrived).unwrap();
        }
    }
}

/// Race: `close` runs while one thread waits in `get` and another returns a connection.
/// Invariant: the waiter ends (with the connection or `Closed`), never hangs; afterwards
/// the closed pool holds no connection.
#[test]
fn close_races_get_and_release() {
    loom::model(|| {
        let pool = one_connection_pool();
        let held = pool.get().expect("get");
        let waiter = {
            let pool = pool.clone();
            thread::spawn(move || match pool.get() {
                Ok(conn) => drop(conn),
                Err(error) => assert!(matches!(error, Error::Closed), "{error:?}"),
            })
        };
        let closer = {
            let pool = pool.clone();
            thread::spawn(move || pool.close())
        };
        drop(held);
        waiter.join().unwrap();
        closer.join().unwrap();
        assert_eq!(pool.state().size, 0, "a closed pool keeps no connection");
        pool.assert_invariants();
    });
}

/// Race: a connect fails while another thread queues as a waiter (the stranded slot: the
/// failed slot must reach the waiter, or under Fifo nobody may take it and no return
/// will ever come).
/// Invariant: both threads get the connection in turn, one connection is made; loom's
/// condition variables never time out, so a stranded waiter is reported as a deadlock.
#[test]
fn failed_connect_hands_the_slot_to_a_waiter() {
    for fairness in [Fairness::Fifo, Fairness::Barging] {
        loom::model(move || {
            let pool = Pool::builder()
                .max_size(1)
                .fairness(fairness)
                .health_check(HealthCheck::Never)
                .maintenance_interval(None)
                .connection_timeout(Duration::from_secs(3600))
                .build(FailFirst::default())
                .expect("valid config");
            let other = {
                let pool = pool.clone();
                thread::spawn(move || pool.get().map(|conn| *conn))
            };
            let mine = pool.get().map(|conn| *conn);
            let theirs = other.join().unwrap();
            assert_eq!((mine.expect("mine"), theirs.expect("theirs")), (7, 7));
            assert_eq!(pool.state().created, 1);
            pool.assert_invariants();
        });
    }
}
