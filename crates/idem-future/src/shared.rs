//! The shareable future: many readers, threads and tasks, wait on one completion.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::promise::{Error, ReaderOf};
use crate::sync::{Duration, Instant};

/// A future many readers can clone and wait on; each gets a clone of the outcome.
///
/// Made by [`PromiseFuture::shared`](crate::PromiseFuture::shared). Every clone is its
/// own reader with its own waker, so clones polled by different tasks are all woken.
///
/// ```
/// let (completer, future) = idem_future::promise::<String, ()>();
/// let shared = future.shared();
/// let readers: Vec<_> = (0..3)
///     .map(|_| {
///         let reader = shared.clone();
///         std::thread::spawn(move || reader.wait())
///     })
///     .collect();
/// completer.complete("ready".to_string()).unwrap();
/// for reader in readers {
///     assert_eq!(reader.join().unwrap(), Ok("ready".to_string()));
/// }
/// ```
pub struct SharedFuture<T, E> {
    inner: ReaderOf<T, E>,
    /// This clone's place among the promise's waiting lists.
    id: u64,
}

impl<T: Clone + Send + Sync, E: Clone + Send + Sync> SharedFuture<T, E> {
    /// A handle on `inner` for a reader already counted (by `shared` or `clone`).
    pub(crate) fn new(inner: ReaderOf<T, E>) -> Self {
        let id = inner.next_shared_id();
        Self { inner, id }
    }

    /// Whether the promise has finished, in any way. Cheap: one atomic load.
    pub fn is_completed(&self) -> bool {
        self.inner.is_completed()
    }

    /// Blocks this thread until the promise finishes and returns a clone of the outcome.
    ///
    /// # Errors
    ///
    /// [`Error::Failed`], [`Error::Cancelled`] or [`Error::Abandoned`], as it finished.
    pub fn wait(&self) -> Result<T, Error<E>> {
        loop {
            self.inner.wait_until(None);
            if let Some(outcome) = self.inner.read_clone() {
                return outcome;
            }
        }
    }

    /// Blocks up to `timeout`; `None` if the promise is still pending then.
    pub fn wait_timeout(&self, timeout: Duration) -> Option<Result<T, Error<E>>> {
        let deadline = Instant::now().checked_add(timeout);
        self.inner.wait_until(deadline)?;
        self.inner.read_clone()
    }

    /// A clone of the outcome if the promise has finished; `None` if it is pending.
    pub fn try_get(&self) -> Option<Result<T, Error<E>>> {
        self.inner.read_clone()
    }

    /// Runs `callback` exactly once with a clone of the outcome: on the completing thread
    /// if registered before completion, at once on this thread if after.
    ///
    /// # Panics
    ///
    /// If the promise is already complete and `callback` panics (it runs on this thread).
    pub fn on_complete(&self, callback: impl FnOnce(Result<T, Error<E>>) + Send + 'static)
    where
        T: 'static,
        E: 'static,
    {
        // The callback holds the promise's allocation until it runs; completion (at the
        // latest, abandonment when the last completer drops) runs it and so breaks the cycle.
        let inner = self.inner.plain();
        self.inner.on_complete(Box::new(move |_| {
            if let Some(outcome) = inner.read_clone() {
                callback(outcome);
            }
        }));
    }
}

impl<T: Clone + Send + Sync, E: Clone + Send + Sync> Clone for SharedFuture<T, E> {
    fn clone(&self) -> Self {
        Self::new(self.inner.clone())
    }
}

impl<T, E> Drop for SharedFuture<T, E> {
    fn drop(&mut self) {
        // Forget this clone's waker, so dropped readers do not pile up in the state.
        self.inner.forget_shared_waker(self.id);
    }
}

impl<T: Clone + Send + Sync, E: Clone + Send + Sync> Future for SharedFuture<T, E> {
    type Output = Result<T, Error<E>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if let Some(outcome) = self.inner.read_clone() {
            return Poll::Ready(outcome);
        }
        if self.inner.register_shared_waker(self.id, cx.waker())
            && let Some(outcome) = self.inner.read_clone()
        {
            return Poll::Ready(outcome);
        }
        Poll::Pending
    }
}

impl<T, E> fmt::Debug for SharedFuture<T, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let done = self.inner.is_completed();
        f.debug_struct("SharedFuture").field("id", &self.id).field("is_completed", &done).finish()
    }
}
