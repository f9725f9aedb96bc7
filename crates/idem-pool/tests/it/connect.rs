//! A failed connect never strands the slot it was made for: its caller tries again after
//! the backoff, and at its deadline the slot goes to the head waiter, under every
//! fairness mode.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;

use idem_pool::{Error, Fairness, HealthCheck, Manager, Pool};

use crate::{TestError, WAIT_LIMIT, wait_for_waiters, wait_until};

/// The first connect blocks until `fail_first` is called, then fails; later ones succeed.
#[derive(Debug, Default)]
struct FailFirst {
    calls: AtomicU64,
    gate: Mutex<bool>,
    opened: Condvar,
}

impl FailFirst {
    fn fail_first(&self) {
        *self.gate.lock().expect("lock") = true;
        self.opened.notify_all();
    }
}

impl Manager for FailFirst {
    type Connection = u64;
    type Error = TestError;

    fn connect(&self) -> Result<u64, TestError> {
        let call = self.calls.fetch_add(1, Ordering::SeqCst);
        if call > 0 {
            return Ok(call);
        }
        let mut open = self.gate.lock().expect("lock");
        while !*open {
            open = self.opened.wait(open).expect("lock");
        }
        Err(TestError("first connect failed"))
    }
}

fn check(fairness: Fairness, borrowers: usize) {
    let pool = Pool::builder()
        .max_size(1)
        .fairness(fairness)
        .health_check(HealthCheck::Never)
        .maintenance_interval(None)
        .connection_timeout(WAIT_LIMIT)
        .build(FailFirst::default())
        .expect("valid config");
    let got = Arc::new(AtomicU64::new(0));
    let spawn = |pool: &Pool<FailFirst>| {
        let (pool, got) = (pool.clone(), got.clone());
        thread::spawn(move || {
            let conn = pool.get().map_err(|e| e.to_string())?;
            got.fetch_add(1, Ordering::SeqCst);
            drop(conn);
            Ok::<(), String>(())
        })
    };
    let mut threads = vec![spawn(&pool)];
    wait_until("the first connect to start", WAIT_LIMIT, || {
        pool.manager().calls.load(Ordering::SeqCst) == 1
    });
    let state = pool.state();
    assert_eq!((state.connecting, state.size), (1, 0), "{fairness:?}: {state:?}");
    threads.extend((1..borrowers).map(|_| spawn(&pool)));
    wait_for_waiters(&pool, borrowers - 1);
    pool.manager().fail_first();
    for (i, thread) in threads.into_iter().enumerate() {
        let result = thread.join().expect("borrower");
        assert_eq!(result, Ok(()), "{fairness:?}, borrower {i} of {borrowers}");
    }
    assert_eq!(got.load(Ordering::SeqCst), borrowers as u64);
    let state = pool.state();
    let counts = (state.created, state.size, state.timeouts, state.connecting);
    assert_eq!(counts, (1, 1, 0, 0), "{fairness:?}");
    pool.assert_invariants();
}

#[test]
fn a_failed_connect_hands_its_slot_to_the_waiters() {
    for fairness in [Fairness::Fifo, Fairness::Barging] {
        for borrowers in [2, 8] {
            check(fairness, borrowers);
        }
    }
}

/// Refuses every connect while `refuse` is set.
#[derive(Debug, Default)]
struct Refusing {
    refuse: std::sync::atomic::AtomicBool,
    calls: AtomicU64,
}

impl Manager for Refusing {
    type Connection = u64;
    type Error = TestError;

    fn connect(&self) -> Result<u64, TestError> {
        let call = self.calls.fetch_add(1, Ordering::SeqCst);
        if self.refuse.load(Ordering::SeqCst) {
            return Err(TestError("connection refused"));
        }
        Ok(call)
    }
}

/// A caller keeps the slot it connects into through its failed connects, until its
/// deadline: then the slot goes to the waiter behind it, under Fifo too (where no waiter
/// may take a free slot while another waits).
#[test]
fn a_caller_that_times_out_connecting_hands_its_slot_on() {
    let pool = Pool::builder()
        .max_size(1)
        .fairness(Fairness::Fifo)
        .health_check(HealthCheck::Never)
        .maintenance_interval(None)
        .build(Refusing::default())
        .expect("valid config");
    pool.manager().refuse.store(true, Ordering::SeqCst);
    let first = {
        let pool = pool.clone();
        thread::spawn(move || pool.get_timeout(std::time::Duration::from_millis(300)).is_ok())
    };
    wait_until("the first connect", WAIT_LIMIT, || pool.manager().calls.load(Ordering::SeqCst) > 0);
    let second = {
        let pool = pool.clone();
        thread::spawn(move || pool.get_timeout(WAIT_LIMIT).map(|conn| *conn))
    };
    wait_for_waiters(&pool, 1);
    assert!(!first.join().expect("first"), "refused until its deadline");
    pool.manager().refuse.store(false, Ordering::SeqCst);
    assert!(second.join().expect("second").is_ok(), "the waiter connected into the slot");
    pool.assert_invariants();
}

/// An error whose drop stops at a gate (a logging error that flushes, say).
#[derive(Debug)]
struct SlowError(Arc<crate::Gate>);

impl std::fmt::Display for SlowError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("refused")
    }
}

impl std::error::Error for SlowError {}

impl Drop for SlowError {
    fn drop(&mut self) {
        self.0.pass();
    }
}

/// Refuses while `refuse` is set, with errors whose drop stops at `gate` when armed.
#[derive(Debug)]
struct SlowlyRefusing {
    refuse: std::sync::atomic::AtomicBool,
    calls: AtomicU64,
    gate: Arc<crate::Gate>,
}

impl Manager for SlowlyRefusing {
    type Connection = u64;
    type Error = SlowError;

    fn connect(&self) -> Result<u64, SlowError> {
        let call = self.calls.fetch_add(1, Ordering::SeqCst);
        if self.refuse.load(Ordering::SeqCst) {
            return Err(SlowError(self.gate.clone()));
        }
        Ok(call)
    }
}

/// A caller's deadline holds after a failed connect even when the pause before the next
/// is already over: here another caller's success reset it while this one was dropping
/// the error its failure replaced.
#[test]
fn a_caller_does_not_connect_again_past_its_deadline() {
    let (gate, arrivals, open) = crate::Gate::new();
    let manager = SlowlyRefusing {
        refuse: std::sync::atomic::AtomicBool::new(true),
        calls: AtomicU64::new(0),
        gate: gate.clone(),
    };
    let pool = Pool::builder()
        .max_size(2)
        .health_check(HealthCheck::Never)
        .maintenance_interval(None)
        .connection_timeout(WAIT_LIMIT)
        .build(manager)
        .expect("valid config");
    gate.armed.store(true, Ordering::SeqCst);
    let deadline = std::time::Duration::from_millis(50);
    let first = {
        let pool = pool.clone();
        thread::spawn(move || pool.get_timeout(deadline).map(|conn| *conn))
    };
    // Its second refusal replaced the first's error, whose drop stops at the gate.
    arrivals.recv_timeout(WAIT_LIMIT).expect("the first caller drops an error");
    past(deadline * 2);
    pool.manager().refuse.store(false, Ordering::SeqCst);
    let other = pool.get().expect("another caller connects: the pause is reset");
    open.send(()).expect("the first caller waits");
    let result = first.join().expect("first");
    assert!(
        matches!(result, Err(Error::Timeout { .. })),
        "connected past its deadline: {result:?}"
    );
    drop(other);
    pool.assert_invariants();
}

/// Returns once at least `time` has passed, measured by a pool's own wait (tests read no
/// clock): a `get_timeout` on an exhausted pool.
fn past(time: std::time::Duration) {
    let pool = Pool::builder()
        .max_size(1)
        .maintenance_interval(None)
        .build(crate::TestManager::default())
        .expect("valid config");
    let _held = pool.get().expect("the one connection");
    assert!(pool.get_timeout(time).is_err(), "exhausted until its timeout");
}
