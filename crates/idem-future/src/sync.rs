//! The one place that names synchronisation primitives: parking_lot and std normally,
//! loom's under `--cfg loom` so the models in `tests/loom.rs` explore the real code.
//! Under loom the promise's allocation and its lists carry a `loom::alloc::Track`, so
//! loom's leak check sees every promise's allocation and every list freed by hand.

pub(crate) use std::time::{Duration, Instant};

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering, fence};

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU64, AtomicUsize, Ordering, fence};

/// Under loom, a marker in each promise's allocation: loom fails a model that leaks it.
#[cfg(loom)]
pub(crate) type Track = loom::alloc::Track<()>;

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

    /// The value, through `&mut self`: no other handle exists, so no lock is taken.
    ///
    /// # Panics
    ///
    /// Under loom only, if a thread panicked while holding the lock (a failed model).
    pub(crate) fn get_mut(&mut self) -> &mut T {
        #[cfg(not(loom))]
        return self.inner.get_mut();
        #[cfg(loom)]
        return self.inner.get_mut().expect("a loom model thread panicked while holding the lock");
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
    /// Waits for a notification, or until `deadline` if there is one. Spurious wake-ups
    /// happen: callers re-check their condition. Loom's condition variable never times out.
    ///
    /// # Panics
    ///
    /// Under loom only, if a thread panicked while holding the lock (a failed model).
    pub(crate) fn wait<'a, T>(
        &self,
        guard: MutexGuard<'a, T>,
        deadline: Option<Instant>,
    ) -> MutexGuard<'a, T> {
        #[cfg(not(loom))]
        {
            let mut guard = guard;
            match deadline {
                // Timed out or not, the caller re-checks the state and its own deadline.
                Some(deadline) => drop(self.inner.wait_until(&mut guard, deadline)),
                None => self.inner.wait(&mut guard),
            }
            guard
        }
        #[cfg(loom)]
        {
            let _ = deadline;
            self.inner.wait(guard).expect("a loom model thread panicked while holding the lock")
        }
    }

    pub(crate) fn notify_all(&self) {
        self.inner.notify_all();
    }
}

/// Whether the current thread is unwinding (under loom, never: loom models do not unwind
/// on purpose).
#[cfg(not(loom))]
pub(crate) fn panicking() -> bool {
    std::thread::panicking()
}

/// Whether the current thread is unwinding (under loom, never: loom models do not unwind
/// on purpose).
#[cfg(loom)]
pub(crate) fn panicking() -> bool {
    false
}

/// An `UnsafeCell` with loom's closure API, so loom can check every access in `cell.rs`.
#[cfg(not(loom))]
#[derive(Debug)]
pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    pub(crate) fn new(value: T) -> Self {
        Self(std::cell::UnsafeCell::new(value))
    }

    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }

    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;

/// One turn of waiting for another thread's short step (the slot's write in progress):
/// a CPU spin hint, and after `SPINS_BEFORE_YIELD` turns the rest of the time slice, so a
/// writer that was preempted mid-write gets the core back. Under loom, a yield, which lets
/// the model schedule the writer.
#[cfg(not(loom))]
pub(crate) fn wait_turn(turn: u32) {
    /// Spins before yielding: the write takes a few nanoseconds unless it was preempted.
    const SPINS_BEFORE_YIELD: u32 = 64;
    if turn < SPINS_BEFORE_YIELD {
        std::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
}

/// One turn of waiting for another thread's short step (see the non-loom version).
#[cfg(loom)]
pub(crate) fn wait_turn(_turn: u32) {
    loom::thread::yield_now();
}
