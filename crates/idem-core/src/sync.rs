//! The one place that names synchronisation primitives.
//!
//! Normally these are parking_lot's lock and condition variable and std's atomics; under
//! `--cfg loom` they are loom's, so the loom models in `tests/loom.rs` explore every
//! interleaving of the real store code. Nothing else in `src/` names `std::sync`,
//! `std::thread` or `parking_lot` directly (a tidy test holds this).

pub(crate) use std::time::{Duration, Instant};

/// Shared immutable data (key text, the clock handle). Not modelled by loom: nothing is
/// ever written through it after construction.
pub(crate) use std::sync::Arc;

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

#[cfg(not(loom))]
pub(crate) use std::thread::JoinHandle;

/// The registry of the process-wide coarse clock (`clock::CoarseClock`): a const-built
/// lock around a weak handle. Not under loom: models run on a manual clock.
#[cfg(not(loom))]
pub(crate) use std::sync::{Mutex as ConstMutex, PoisonError, Weak};

/// Starts a named thread.
#[cfg(not(loom))]
pub(crate) fn spawn_named(
    name: &str,
    f: impl FnOnce() + Send + 'static,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new().name(name.into()).spawn(f)
}

/// Pauses the calling thread (under loom: yields, since loom has no time).
#[cfg(not(loom))]
pub(crate) fn sleep(duration: Duration) {
    std::thread::sleep(duration);
}

/// Pauses the calling thread (under loom: yields, since loom has no time).
#[cfg(loom)]
pub(crate) fn sleep(_duration: Duration) {
    loom::thread::yield_now();
}

/// A mutex whose `lock` cannot fail (parking_lot has no poisoning; loom's is unwrapped).
#[derive(Debug, Default)]
pub(crate) struct Mutex<T> {
    #[cfg(not(loom))]
    inner: parking_lot::Mutex<T>,
    #[cfg(loom)]
    inner: loom::sync::Mutex<T>,
}

#[cfg(not(loom))]
pub(crate) type MutexGuard<'a, T> = parking_lot::MutexGuard<'a, T>;
#[cfg(loom)]
pub(crate) type MutexGuard<'a, T> = loom::sync::MutexGuard<'a, T>;

impl<T> Mutex<T> {
    pub(crate) fn new(value: T) -> Self {
        #[cfg(not(loom))]
        let inner = parking_lot::Mutex::new(value);
        #[cfg(loom)]
        let inner = loom::sync::Mutex::new(value);
        Self { inner }
    }

    /// # Panics
    ///
    /// Under loom only, if a thread panicked while holding the lock (a failed model).
    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        #[cfg(not(loom))]
        return self.inner.lock();
        #[cfg(loom)]
        return self.inner.lock().expect("a loom model thread panicked while holding the lock");
    }
}

/// A condition variable paired with [`Mutex`].
#[derive(Debug, Default)]
pub(crate) struct Condvar {
    #[cfg(not(loom))]
    inner: parking_lot::Condvar,
    #[cfg(loom)]
    inner: loom::sync::Condvar,
}

impl Condvar {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Waits for a notification or `timeout`, whichever is first; spurious wake-ups happen,
    /// so callers re-check their condition. Loom's condition variable never times out.
    ///
    /// # Panics
    ///
    /// Under loom only, if a thread panicked while holding the lock (a failed model).
    pub(crate) fn wait_for<'a, T>(
        &self,
        guard: MutexGuard<'a, T>,
        timeout: Duration,
    ) -> MutexGuard<'a, T> {
        #[cfg(not(loom))]
        {
            let mut guard = guard;
            // Timed out or not, the caller re-checks the state and its own deadline.
            let _ = self.inner.wait_for(&mut guard, timeout);
            guard
        }
        #[cfg(loom)]
        {
            let (guard, _) = self
                .inner
                .wait_timeout(guard, timeout)
                .expect("a loom model thread panicked while holding the lock");
            guard
        }
    }

    pub(crate) fn notify_all(&self) {
        self.inner.notify_all();
    }
}
