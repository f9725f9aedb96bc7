//! The shareable future: many readers, threads and tasks, wait on one completion.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::promise::{Error, Inner, Slot};
use crate::sync::{Arc, Duration, Instant, Ordering};

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
    inner: Arc<Inner<T, E>>,
    /// This clone's waker slot in the shared state.
    id: u64,
}

impl<T: Clone, E: Clone> SharedFuture<T, E> {
    pub(crate) fn new(inner: Arc<Inner<T, E>>) -> Self {
        // ORDERING: a unique id source; nothing else is published through it.
        let id = inner.next_shared_id.fetch_add(1, Ordering::Relaxed) as u64;
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
        match self.inner.wait_with(None, |state| read(&state.slot)) {
            Some(outcome) => outcome,
            None => unreachable!("a wait without deadline returns only when ready"),
        }
    }

    /// Blocks up to `timeout`; `None` if the promise is still pending then.
    pub fn wait_timeout(&self, timeout: Duration) -> Option<Result<T, Error<E>>> {
        let deadline = Instant::now().checked_add(timeout);
        self.inner.wait_with(deadline, |state| read(&state.slot))
    }

    /// A clone of the outcome if the promise has finished; `None` if it is pending.
    pub fn try_get(&self) -> Option<Result<T, Error<E>>> {
        match &self.inner.state.lock().slot {
            Slot::Pending => None,
            slot => Some(read(slot)),
        }
    }

    /// Runs `callback` exactly once with a clone of the outcome: on the completing thread
    /// if registered before completion, at once on this thread if after.
    ///
    /// # Panics
    ///
    /// If the promise is already complete and `callback` panics (it runs on this thread).
    pub fn on_complete(&self, callback: impl FnOnce(Result<T, Error<E>>) + Send + 'static)
    where
        T: Send + 'static,
        E: Send + 'static,
    {
        // The callback holds the shared state until it runs; completion (at the latest,
        // abandonment when the last completer drops) runs it and so breaks the cycle.
        let inner = self.inner.clone();
        self.inner.on_complete(Box::new(move |_| {
            let outcome = read(&inner.state.lock().slot);
            callback(outcome);
        }));
    }
}

/// A clone of a finished slot's outcome.
///
/// # Panics
///
/// If the slot is pending or taken: shared futures never take, and callers check first.
fn read<T: Clone, E: Clone>(slot: &Slot<T, E>) -> Result<T, Error<E>> {
    match slot {
        Slot::Ready(outcome) => outcome.clone(),
        Slot::Pending | Slot::Taken(_) => panic!("read from a slot that is not ready"),
    }
}

impl<T: Clone, E: Clone> Clone for SharedFuture<T, E> {
    fn clone(&self) -> Self {
        Self::new(self.inner.clone())
    }
}

impl<T, E> Drop for SharedFuture<T, E> {
    fn drop(&mut self) {
        // Forget this clone's waker, so dropped readers do not pile up in the state.
        let mut state = self.inner.state.lock();
        state.shared_wakers.retain(|(id, _)| *id != self.id);
    }
}

impl<T: Clone, E: Clone> Future for SharedFuture<T, E> {
    type Output = Result<T, Error<E>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.inner.state.lock();
        if !matches!(state.slot, Slot::Pending) {
            return Poll::Ready(read(&state.slot));
        }
        let waker = cx.waker();
        match state.shared_wakers.iter_mut().find(|(id, _)| *id == self.id) {
            Some((_, current)) if current.will_wake(waker) => {}
            Some((_, current)) => *current = waker.clone(),
            None => state.shared_wakers.push((self.id, waker.clone())),
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
