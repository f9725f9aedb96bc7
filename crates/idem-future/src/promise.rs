//! The promise: shared state, the completer side and the single-owner future.

use std::fmt;
use std::future::Future;
use std::mem;
use std::panic::{self, AssertUnwindSafe};
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use crate::sync::{
    Arc, AtomicBool, AtomicUsize, Condvar, Duration, Instant, Mutex, MutexGuard, Ordering,
};

/// Why a promise finished without a value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error<E> {
    /// A completer called [`Completer::fail`]; here is its error.
    Failed(E),
    /// A completer called [`Completer::cancel`].
    Cancelled,
    /// Every completer was dropped without completing: nobody will ever complete it.
    Abandoned,
}

impl<E: fmt::Display> fmt::Display for Error<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Failed(e) => write!(f, "promise failed: {e}"),
            Self::Cancelled => f.write_str("promise was cancelled"),
            Self::Abandoned => f.write_str("every completer was dropped without completing"),
        }
    }
}

impl<E: fmt::Debug + fmt::Display> std::error::Error for Error<E> {}

/// How a promise finished: what a callback registered with `on_complete` is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Completion {
    /// Completed with a value.
    Completed,
    /// Failed with an error.
    Failed,
    /// Cancelled.
    Cancelled,
    /// Abandoned: every completer dropped without completing.
    Abandoned,
}

impl Completion {
    fn of<T, E>(outcome: &Result<T, Error<E>>) -> Self {
        match outcome {
            Ok(_) => Self::Completed,
            Err(Error::Failed(_)) => Self::Failed,
            Err(Error::Cancelled) => Self::Cancelled,
            Err(Error::Abandoned) => Self::Abandoned,
        }
    }
}

pub(crate) type Callback = Box<dyn FnOnce(Completion) + Send>;

pub(crate) enum Slot<T, E> {
    Pending,
    Ready(Result<T, Error<E>>),
    /// The single-owner future took the outcome, which finished like this.
    Taken(Completion),
}

pub(crate) struct State<T, E> {
    pub(crate) slot: Slot<T, E>,
    /// The single-owner future's waker: the one registered by its latest poll.
    waker: Option<Waker>,
    /// Each shared future clone's latest waker, by clone id.
    pub(crate) shared_wakers: Vec<(u64, Waker)>,
    callbacks: Vec<Callback>,
    /// Threads blocked in a `wait`: completion notifies the condition variable only then.
    blocked: usize,
}

/// The state completers and futures share. The slot changes from `Pending` exactly once,
/// under the lock; `done` mirrors that for a lock-free `is_completed`.
pub(crate) struct Inner<T, E> {
    done: AtomicBool,
    completers: AtomicUsize,
    pub(crate) next_shared_id: AtomicUsize,
    pub(crate) state: Mutex<State<T, E>>,
    changed: Condvar,
}

impl<T, E> Inner<T, E> {
    pub(crate) fn is_completed(&self) -> bool {
        // ORDERING: Acquire pairs with the Release store in `settle`: whoever sees `true`
        // also sees everything the winner did before completing.
        self.done.load(Ordering::Acquire)
    }

    /// Stores `outcome` if the promise is still pending; otherwise hands it back.
    ///
    /// RACE (first write wins): completers racing each other and the last completer's
    /// drop. The pending check and the store happen under one lock acquisition, so exactly
    /// one outcome is ever stored. Loom model: `racing_completers_one_winner`.
    fn settle(&self, outcome: Result<T, Error<E>>) -> Result<(), Result<T, Error<E>>> {
        let mut state = self.state.lock();
        if !matches!(state.slot, Slot::Pending) {
            return Err(outcome);
        }
        let completion = Completion::of(&outcome);
        state.slot = Slot::Ready(outcome);
        // ORDERING: Release publishes the winner's prior writes to `is_completed` readers.
        self.done.store(true, Ordering::Release);
        let waker = state.waker.take();
        let shared_wakers = mem::take(&mut state.shared_wakers);
        let callbacks = mem::take(&mut state.callbacks);
        let blocked = state.blocked > 0;
        drop(state);
        // Nothing below runs under the lock: a waker or callback may re-enter this promise.
        if blocked {
            self.changed.notify_all();
        }
        waker.into_iter().chain(shared_wakers.into_iter().map(|(_, w)| w)).for_each(Waker::wake);
        run_callbacks(callbacks, completion);
        Ok(())
    }

    /// Runs `callback` once: now, on this thread, if the promise is complete; otherwise
    /// on the completing thread when it completes.
    ///
    /// RACE (register vs complete): the state check and the push happen under the lock
    /// that `settle` takes to drain the list, so a callback is either drained by `settle`
    /// or sees the completion here, never both, never neither. Loom model:
    /// `callback_races_completion`.
    pub(crate) fn on_complete(&self, callback: Callback) {
        let mut state = self.state.lock();
        let completion = match &state.slot {
            Slot::Pending => {
                state.callbacks.push(callback);
                return;
            }
            Slot::Ready(outcome) => Completion::of(outcome),
            Slot::Taken(completion) => *completion,
        };
        drop(state);
        run_callbacks(vec![callback], completion);
    }

    /// Blocks until the slot is no longer pending or `deadline` passes, then hands the
    /// locked state to `read`.
    pub(crate) fn wait_with<R>(
        &self,
        deadline: Option<Instant>,
        read: impl FnOnce(&mut State<T, E>) -> R,
    ) -> Option<R> {
        let mut state = self.state.lock();
        while matches!(state.slot, Slot::Pending) {
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return None;
            }
            // RACE (lost wake-up): `settle` reads `blocked` under the lock we hold until
            // the condition variable atomically releases it. Loom model:
            // `blocking_waiter_wakes`.
            state.blocked += 1;
            state = self.changed.wait(state, deadline);
            state.blocked -= 1;
        }
        Some(read(&mut state))
    }
}

/// Runs every callback once, each under `catch_unwind`, so one panicking callback does
/// not stop the others. The first panic is then resumed on this thread (unless it is
/// already unwinding, as when the last completer is dropped during a panic): the
/// completion has taken effect by then, and the promise is not poisoned.
fn run_callbacks(callbacks: Vec<Callback>, completion: Completion) {
    let mut first_panic = None;
    for callback in callbacks {
        if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(|| callback(completion))) {
            first_panic.get_or_insert(payload);
        }
    }
    if let Some(payload) = first_panic
        && !crate::sync::panicking()
    {
        panic::resume_unwind(payload);
    }
}

/// Creates a promise: a completer to settle it and a future to read it.
///
/// ```
/// let (completer, future) = idem_future::promise::<u32, String>();
/// let racer = completer.clone();
/// assert_eq!(completer.complete(1), Ok(()));
/// assert_eq!(racer.complete(2), Err(2)); // the loser gets its value back
/// assert_eq!(future.wait(), Ok(1));
/// ```
pub fn promise<T, E>() -> (Completer<T, E>, PromiseFuture<T, E>) {
    let inner = Arc::new(Inner {
        done: AtomicBool::new(false),
        completers: AtomicUsize::new(1),
        next_shared_id: AtomicUsize::new(0),
        state: Mutex::new(State {
            slot: Slot::Pending,
            waker: None,
            shared_wakers: Vec::new(),
            callbacks: Vec::new(),
            blocked: 0,
        }),
        changed: Condvar::default(),
    });
    (Completer { inner: inner.clone() }, PromiseFuture { inner })
}

/// The writing side of a promise. Clones race: the first completion (value, failure or
/// cancellation) wins, and every later one is refused and handed its argument back.
/// When the last clone is dropped without any of them completing, the promise finishes
/// with [`Error::Abandoned`].
pub struct Completer<T, E> {
    inner: Arc<Inner<T, E>>,
}

impl<T, E> Completer<T, E> {
    /// Completes the promise with `value`, if nothing completed it first.
    ///
    /// # Errors
    ///
    /// `Err(value)` if the promise was already completed, failed or cancelled: the loser
    /// gets its value back, untouched.
    ///
    /// # Panics
    ///
    /// If a callback registered with `on_complete` panicked; the completion has taken
    /// effect and every other callback has run (see the crate docs).
    pub fn complete(&self, value: T) -> Result<(), T> {
        self.inner.settle(Ok(value)).map_err(|lost| match lost {
            Ok(value) => value,
            Err(_) => unreachable!("settle hands back what it was given"),
        })
    }

    /// Fails the promise with `error`, if nothing completed it first.
    ///
    /// # Errors
    ///
    /// `Err(error)` if the promise was already completed: the error is handed back.
    ///
    /// # Panics
    ///
    /// As [`complete`](Self::complete).
    pub fn fail(&self, error: E) -> Result<(), E> {
        self.inner.settle(Err(Error::Failed(error))).map_err(|lost| match lost {
            Err(Error::Failed(error)) => error,
            _ => unreachable!("settle hands back what it was given"),
        })
    }

    /// Cancels the promise, if nothing completed it first; returns whether this call
    /// cancelled it. Idempotent by its shape: cancelling twice changes nothing more.
    ///
    /// # Panics
    ///
    /// As [`complete`](Self::complete).
    pub fn cancel(&self) -> bool {
        self.inner.settle(Err(Error::Cancelled)).is_ok()
    }

    /// Whether the promise has finished, in any way. Cheap: one atomic load.
    pub fn is_completed(&self) -> bool {
        self.inner.is_completed()
    }

    /// Runs `callback` exactly once with how the promise finished: on the completing
    /// thread if registered before completion, at once on this thread if after.
    ///
    /// # Panics
    ///
    /// If the promise is already complete and `callback` panics (it runs on this thread).
    pub fn on_complete(&self, callback: impl FnOnce(Completion) + Send + 'static) {
        self.inner.on_complete(Box::new(callback));
    }
}

impl<T, E> Clone for Completer<T, E> {
    fn clone(&self) -> Self {
        // ORDERING: a count of handles, like `Arc`'s; an existing handle (`self`) keeps
        // it above zero while we add one, so no ordering with other data is needed.
        self.inner.completers.fetch_add(1, Ordering::Relaxed);
        Self { inner: self.inner.clone() }
    }
}

impl<T, E> Drop for Completer<T, E> {
    fn drop(&mut self) {
        // ORDERING: AcqRel, so the last dropper sees every other dropper's writes before it
        // abandons the promise (as `Arc`'s drop does before freeing).
        if self.inner.completers.fetch_sub(1, Ordering::AcqRel) == 1 {
            // Refused if a completer already won; that is the normal case.
            let _ = self.inner.settle(Err(Error::Abandoned));
        }
    }
}

impl<T, E> fmt::Debug for Completer<T, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Completer").field("is_completed", &self.is_completed()).finish()
    }
}

/// The reading side of a promise, owned by one reader: await it, or block on it.
///
/// It resolves to `Ok(value)`, or to an [`Error`] saying it failed, was cancelled, or was
/// abandoned by every completer. For many readers, turn it into a
/// [`SharedFuture`](crate::SharedFuture) with [`shared`](Self::shared).
pub struct PromiseFuture<T, E> {
    inner: Arc<Inner<T, E>>,
}

/// What a blocking read returns: the outcome, or the future back if it is not ready.
pub type TryResult<T, E> = Result<Result<T, Error<E>>, PromiseFuture<T, E>>;

impl<T, E> PromiseFuture<T, E> {
    /// Whether the promise has finished, in any way. Cheap: one atomic load.
    pub fn is_completed(&self) -> bool {
        self.inner.is_completed()
    }

    /// Blocks this thread until the promise finishes, for code without an async runtime.
    ///
    /// # Errors
    ///
    /// [`Error::Failed`], [`Error::Cancelled`] or [`Error::Abandoned`], as it finished.
    pub fn wait(self) -> Result<T, Error<E>> {
        match self.inner.wait_with(None, take) {
            Some(outcome) => outcome,
            None => unreachable!("a wait without deadline returns only when ready"),
        }
    }

    /// Blocks up to `timeout` for the promise to finish.
    ///
    /// # Errors
    ///
    /// `Err(self)` if it is still pending after `timeout`, to wait again later.
    pub fn wait_timeout(self, timeout: Duration) -> TryResult<T, E> {
        let deadline = Instant::now().checked_add(timeout);
        match self.inner.wait_with(deadline, take) {
            Some(outcome) => Ok(outcome),
            None => Err(self),
        }
    }

    /// Takes the outcome if the promise has finished, without blocking.
    ///
    /// # Errors
    ///
    /// `Err(self)` if it is still pending.
    pub fn try_get(self) -> TryResult<T, E> {
        let mut state = self.inner.state.lock();
        if matches!(state.slot, Slot::Pending) {
            drop(state);
            return Err(self);
        }
        let outcome = take(&mut state);
        drop(state);
        Ok(outcome)
    }

    /// Runs `callback` exactly once with how the promise finished; see
    /// [`Completer::on_complete`].
    ///
    /// # Panics
    ///
    /// If the promise is already complete and `callback` panics (it runs on this thread).
    pub fn on_complete(&self, callback: impl FnOnce(Completion) + Send + 'static) {
        self.inner.on_complete(Box::new(callback));
    }

    /// Turns this future into one that many readers can clone and wait on.
    pub fn shared(self) -> crate::SharedFuture<T, E>
    where
        T: Clone,
        E: Clone,
    {
        crate::shared::SharedFuture::new(self.inner.clone())
    }
}

/// Takes a ready outcome out of the slot, leaving a record of how it finished.
///
/// # Panics
///
/// If the slot is pending or taken: callers check first, and a single-owner future that
/// returned its outcome is consumed or panics on the next poll before reaching here.
fn take<T, E>(state: &mut State<T, E>) -> Result<T, Error<E>> {
    match mem::replace(&mut state.slot, Slot::Taken(Completion::Abandoned)) {
        Slot::Ready(outcome) => {
            state.slot = Slot::Taken(Completion::of(&outcome));
            outcome
        }
        other => {
            let was_pending = matches!(other, Slot::Pending);
            state.slot = other;
            panic!("take from a slot that is not ready (pending: {was_pending})");
        }
    }
}

impl<T, E> Future for PromiseFuture<T, E> {
    type Output = Result<T, Error<E>>;

    /// # Panics
    ///
    /// If polled again after it returned `Ready` (the outcome was moved out), as futures
    /// generally may.
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.inner.state.lock();
        match state.slot {
            Slot::Ready(_) => Poll::Ready(take(&mut state)),
            Slot::Taken(_) => panic!("PromiseFuture polled after it returned Ready"),
            Slot::Pending => {
                // RACE (waker swap): a poll with a new waker races the completion. The
                // waker is replaced under the lock `settle` takes to take it, so the
                // completion wakes the latest waker. Loom model: `poll_races_completion`.
                register(&mut state, cx.waker());
                Poll::Pending
            }
        }
    }
}

fn register<T, E>(state: &mut MutexGuard<'_, State<T, E>>, waker: &Waker) {
    match &mut state.waker {
        Some(current) if current.will_wake(waker) => {}
        slot => *slot = Some(waker.clone()),
    }
}

impl<T, E> fmt::Debug for PromiseFuture<T, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PromiseFuture").field("is_completed", &self.is_completed()).finish()
    }
}
