//! The one place that names synchronisation primitives: parking_lot and std normally,
//! loom's under `--cfg loom`, so the models in `tests/loom.rs` explore the real pool.

pub(crate) use std::time::{Duration, Instant};

/// Shared ownership of the pool's state. std's `Arc` under loom too: the state it shares
/// is guarded by the modelled mutex, and methods take `self: &Arc<Self>`, which loom's
/// `Arc` does not support.
pub(crate) use std::sync::Arc;
#[cfg(not(loom))]
pub(crate) use std::sync::Weak;

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering, fence};

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering, fence};

/// An `UnsafeCell` with loom's closure API, so loom checks every access in `shelf.rs`.
#[cfg(not(loom))]
#[derive(Debug)]
pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    pub(crate) fn new(value: T) -> Self {
        Self(std::cell::UnsafeCell::new(value))
    }

    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;

/// Lets other threads run (loom's yield under `--cfg loom`).
pub(crate) fn yield_now() {
    #[cfg(not(loom))]
    std::thread::yield_now();
    #[cfg(loom)]
    loom::thread::yield_now();
}

/// Starts the maintenance thread, named `name`; `Err` if the OS refuses a thread. Not
/// under loom: the models run without maintenance.
#[cfg(not(loom))]
pub(crate) fn spawn_named(
    name: &str,
    f: impl FnOnce() + Send + 'static,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new().name(name.into()).spawn(f)
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

/// A condition variable paired with [`Mutex`]; each waiter of the pool has its own.
#[derive(Debug, Default)]
pub(crate) struct Condvar {
    #[cfg(not(loom))]
    inner: parking_lot::Condvar,
    #[cfg(loom)]
    inner: loom::sync::Condvar,
}

impl Condvar {
    /// Waits for a notification or until `deadline`. Spurious wake-ups happen: callers
    /// re-check their condition. Loom's condition variable never times out.
    ///
    /// # Panics
    ///
    /// Under loom only, if a thread panicked while holding the lock (a failed model).
    pub(crate) fn wait_until<'a, T>(
        &self,
        guard: MutexGuard<'a, T>,
        deadline: Instant,
    ) -> MutexGuard<'a, T> {
        #[cfg(not(loom))]
        {
            let mut guard = guard;
            // Timed out or not, the caller re-checks its grant and its deadline.
            let _ = self.inner.wait_until(&mut guard, deadline);
            guard
        }
        #[cfg(loom)]
        {
            let _ = deadline;
            self.inner.wait(guard).expect("a loom model thread panicked while holding the lock")
        }
    }

    pub(crate) fn notify_one(&self) {
        self.inner.notify_one();
    }

    pub(crate) fn notify_all(&self) {
        self.inner.notify_all();
    }
}

/// The per-thread hint of the shelf (`shelf.rs`): the slot this thread gave back last, per
/// pool. Not under loom: loom runs its threads on one, which would share it.
#[cfg(not(loom))]
pub(crate) mod hint {
    use std::cell::Cell;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// Names pools for the hint (a pool id is never reused).
    static NEXT_POOL: AtomicU64 = AtomicU64::new(1);

    thread_local! {
        /// The pool and slot this thread last gave back to the shelf.
        static LAST: Cell<(u64, usize)> = const { Cell::new((0, 0)) };
    }

    pub(crate) fn new_pool() -> u64 {
        // ORDERING: Relaxed: only uniqueness matters, which the read-modify-write gives.
        NEXT_POOL.fetch_add(1, Ordering::Relaxed)
    }

    #[inline]
    pub(crate) fn get(pool: u64) -> Option<usize> {
        let (of, slot) = LAST.get();
        (of == pool).then_some(slot)
    }

    #[inline]
    pub(crate) fn set(pool: u64, slot: usize) {
        LAST.set((pool, slot));
    }
}
