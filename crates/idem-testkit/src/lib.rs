//! What idem's tests, examples and benches share, in one place instead of a copy in each:
//! the conformance suite every [`KeyStore`](idem_core::KeyStore) backend runs against
//! itself, a `tracing` collector for tests (feature `tracing`), a bounded wait, scratch
//! directories, the retry storm of the demo's examples ([`storm`]) and the timing harness
//! of the threaded benches ([`bench`](mod@bench)). A dev-dependency only: no library
//! depends on it.
//!
//! # Guarantee
//!
//! Every backend that runs [`conformance_tests!`] is held to the same behaviour, case by
//! case; a case that fails names what the backend did wrong. [`wait_until`] never hangs a
//! test: a condition that never comes fails it, naming what it waited for. A storm's
//! [`Plan`](storm::Plan) gives the same attempts, in the same order, on every run.
//!
//! # Examples
//!
//! ```
//! use std::time::Duration;
//! use idem_testkit::{scratch_dir, wait_until};
//!
//! let dir = scratch_dir("example");
//! assert!(dir.is_dir());
//! wait_until("the directory", Duration::from_secs(1), || dir.exists());
//! ```

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

pub mod bench;
mod block_on;
#[cfg(feature = "tracing")]
pub mod capture;
pub mod conformance;
pub mod faulty;
pub mod storm;

pub use block_on::{BlockOn, TokioTimer, runtime};

/// Waits until `condition` holds, checking every 100 µs, and panics naming `what` if it
/// does not hold within `limit`. For a test that waits for another thread to reach a
/// point (a waiter queued, a worker finished): it moves no clock and asserts no timing;
/// a condition that never comes fails the test instead of hanging it.
///
/// # Panics
///
/// If `condition` does not hold within `limit`: that is how the test fails.
#[track_caller]
pub fn wait_until(what: &str, limit: Duration, mut condition: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + limit;
    while !condition() {
        assert!(std::time::Instant::now() < deadline, "gave up after {limit:?} waiting for {what}");
        std::thread::sleep(Duration::from_micros(100));
    }
}

/// A fresh, empty directory for a test's files, unique to this process and this call even
/// when the system reuses process ids between runs (a fresh container numbers its
/// processes the same way every time, so two test runs can share a pid).
///
/// # Panics
///
/// If the directory cannot be created.
pub fn scratch_dir(tag: &str) -> std::path::PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    // ORDERING: a counter for unique names; nothing is published through it.
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let since_epoch = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    let nanos = since_epoch.map_or(0, |d| d.as_nanos());
    let name = format!("idem-{tag}-{}-{nanos}-{n}", std::process::id());
    let dir = std::env::temp_dir().join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    dir
}
