//! idem-pool's integration tests: one binary, one module per concern.

mod behaviour;
mod connect;
mod hostile;
mod leaks;
mod model;
mod stress;
#[cfg(feature = "tracing")]
mod tracing;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use idem_core::{ManualClock, Timestamp};
use idem_pool::{Builder, HealthCheck, Manager, Pool};

/// A connection that knows whether someone holds it, so a test can catch two holders.
#[derive(Debug)]
pub(crate) struct TestConn {
    pub(crate) id: u64,
    held: Arc<AtomicBool>,
    /// The manager's switch: the next connection dropped panics (once).
    panic_drop: Arc<AtomicBool>,
}

impl Drop for TestConn {
    fn drop(&mut self) {
        if self.panic_drop.swap(false, Ordering::SeqCst) && !std::thread::panicking() {
            std::panic::resume_unwind(Box::new("a connection whose drop panics"));
        }
    }
}

impl TestConn {
    /// Marks this connection held by the caller; panics if someone else holds it.
    pub(crate) fn hold(&self) {
        assert!(!self.held.swap(true, Ordering::SeqCst), "connection {} lent twice", self.id);
    }

    /// Marks this connection no longer held (call before giving it back).
    pub(crate) fn unhold(&self) {
        self.held.store(false, Ordering::SeqCst);
    }
}

/// A manager with switches: refuse to connect, fail health checks, report broken ids.
#[derive(Debug, Default)]
pub(crate) struct TestManager {
    next_id: AtomicU64,
    pub(crate) refuse_connect: AtomicBool,
    pub(crate) fail_checks: AtomicBool,
    pub(crate) broken: Mutex<HashSet<u64>>,
    /// The next `connect`, health check or broken check panics (once each).
    pub(crate) panic_connect: AtomicBool,
    pub(crate) panic_check: AtomicBool,
    pub(crate) panic_broken: AtomicBool,
    /// The next connection dropped panics (once).
    pub(crate) panic_drop: Arc<AtomicBool>,
    /// Calls of `connect`, refused ones too.
    pub(crate) connects: AtomicU64,
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct TestError(pub(crate) &'static str);

impl Manager for TestManager {
    type Connection = TestConn;
    type Error = TestError;

    fn connect(&self) -> Result<TestConn, TestError> {
        self.connects.fetch_add(1, Ordering::SeqCst);
        assert!(!self.panic_connect.swap(false, Ordering::SeqCst), "a connect that panics");
        if self.refuse_connect.load(Ordering::SeqCst) {
            return Err(TestError("connection refused"));
        }
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let panic_drop = self.panic_drop.clone();
        Ok(TestConn { id, held: Arc::new(AtomicBool::new(false)), panic_drop })
    }

    fn is_valid(&self, _: &mut TestConn) -> Result<(), TestError> {
        assert!(!self.panic_check.swap(false, Ordering::SeqCst), "a health check that panics");
        if self.fail_checks.load(Ordering::SeqCst) {
            return Err(TestError("health check failed"));
        }
        Ok(())
    }

    fn has_broken(&self, conn: &mut TestConn) -> bool {
        assert!(!self.panic_broken.swap(false, Ordering::SeqCst), "a broken check that panics");
        self.broken.lock().expect("not poisoned").contains(&conn.id)
    }
}

/// A pool on a manual clock, with no maintenance thread.
pub(crate) fn pool(
    max_size: usize,
    tune: impl FnOnce(Builder<TestManager>) -> Builder<TestManager>,
) -> (Pool<TestManager>, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(Timestamp::from_millis(1_000_000)));
    let builder = Pool::builder()
        .max_size(max_size)
        .connection_timeout(Duration::from_millis(200))
        .health_check(HealthCheck::OnCheckout)
        .maintenance_interval(None)
        .clock(clock.clone());
    let pool = tune(builder).build(TestManager::default()).expect("valid config");
    (pool, clock)
}

pub(crate) use idem_testkit::wait_until;

/// How long a test waits for another thread to reach a point before failing.
pub(crate) const WAIT_LIMIT: Duration = Duration::from_secs(10);

/// Waits until `n` threads wait in `get` on `pool`.
#[track_caller]
pub(crate) fn wait_for_waiters<M: Manager>(pool: &Pool<M>, n: usize) {
    wait_until(&format!("{n} waiters"), WAIT_LIMIT, || pool.state().waiters >= n);
}

/// Something a thread stops in until the test lets it go: it says it arrived, then waits.
#[derive(Debug)]
pub(crate) struct Gate {
    pub(crate) armed: AtomicBool,
    arrived: Mutex<Sender<()>>,
    go: Mutex<Receiver<()>>,
}

impl Gate {
    /// The gate, the receiver of its arrivals and the sender that opens it.
    pub(crate) fn new() -> (Arc<Self>, Receiver<()>, Sender<()>) {
        let (arrived, arrivals) = mpsc::channel();
        let (open, go) = mpsc::channel();
        let gate =
            Gate { armed: AtomicBool::new(false), arrived: Mutex::new(arrived), go: go.into() };
        (Arc::new(gate), arrivals, open)
    }

    /// Stops the first caller since `arm`, until the test opens the gate.
    pub(crate) fn pass(&self) {
        if self.armed.swap(false, Ordering::SeqCst) {
            let _ = self.arrived.lock().expect("not poisoned").send(());
            let _ = self.go.lock().expect("not poisoned").recv_timeout(WAIT_LIMIT);
        }
    }
}
