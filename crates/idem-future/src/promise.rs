//! The promise: its state, the completer side and the single-owner future.

use std::fmt;
use std::future::Future;
use std::mem::{self, ManuallyDrop};
use std::panic::{self, AssertUnwindSafe};
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use crate::cell::{self, Allocation, Owner, Plain, Reader, Readers, Snapshot};
use crate::sync::{AtomicUsize, Condvar, Duration, Instant, Mutex, Ordering};

/// Why a promise finished without a value.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
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

impl Completion {
    const ALL: [Self; 4] = [Self::Completed, Self::Failed, Self::Cancelled, Self::Abandoned];

    fn index(self) -> usize {
        self as usize
    }

    fn from_index(index: usize) -> Self {
        Self::ALL[index]
    }
}

/// Everything that waits for the outcome but the single-owner future's waker (which is
/// the slot's, lock-free): registered under the mutex, served by the winning completer if
/// it saw the slot's `WAITING` flag, or by the registrant itself if the outcome was
/// published first. Allocated by the first registrant, so a promise nobody waits on this
/// way carries one empty pointer.
struct Waiting {
    /// Each shared future clone's latest waker, by clone id.
    shared_wakers: Vec<(u64, Waker)>,
    callbacks: Vec<Callback>,
    /// Threads blocked in a `wait`: the completer notifies the condition variable only then.
    blocked: usize,
    /// Each pending [`Closed`] future's latest waker, by id: woken when the last reader goes.
    closed_wakers: Vec<(u64, Waker)>,
    /// Under loom, lists never freed fail the model (they are dropped by hand: `Lists`).
    #[cfg(loom)]
    _track: crate::sync::Track,
}

impl Waiting {
    fn new() -> Self {
        Self {
            shared_wakers: Vec::new(),
            callbacks: Vec::new(),
            blocked: 0,
            closed_wakers: Vec::new(),
            #[cfg(loom)]
            _track: crate::sync::Track::new(()),
        }
    }
}

/// What completers and futures share besides the outcome's slot.
pub(crate) struct Rest {
    completers: AtomicUsize,
    next_shared_id: AtomicUsize,
    waiting: Mutex<Lists>,
    changed: Condvar,
}

/// The lists, once allocated. Dropped by hand, by `Rest`'s drop: left to the compiler, the
/// drop of the vectors of wakers and callbacks sat in an out-of-line call that every
/// promise paid, although most never allocate the lists.
type Lists = ManuallyDrop<Option<Box<Waiting>>>;

impl Drop for Rest {
    fn drop(&mut self) {
        if let Some(lists) = ManuallyDrop::into_inner(mem::take(self.waiting.get_mut())) {
            free_lists(lists);
        }
    }
}

/// Drops lists a registrant allocated; see `Rest`'s drop.
#[cold]
#[inline(never)]
fn free_lists(lists: Box<Waiting>) {
    drop(lists);
}

impl Readers for Rest {
    /// Wakes every `Closed` future that registered (see `Allocation::watch`): all of
    /// them, even if one waker panics; the first panic is passed on after.
    fn last_reader_gone(&self) {
        let wakers = mem::take(&mut lists(&mut self.waiting.lock()).closed_wakers);
        let mut first_panic = None;
        wake_all(wakers, &mut first_panic);
        pass_on(first_panic);
    }
}

/// The state completers and futures share: the outcome, written once (see `cell.rs`), in
/// `slot`, beside [`Rest`], in one allocation.
pub(crate) type Inner<T, E> = Allocation<Result<T, Error<E>>, Rest>;

/// The single-owner future's handle: the only one that moves the outcome out.
type OwnerOf<T, E> = Owner<Result<T, Error<E>>, Rest>;
/// A handle that is not a reader: a completer's, a `Closed` future's, a callback's.
pub(crate) type PlainOf<T, E> = Plain<Result<T, Error<E>>, Rest>;
/// A shared future's handle, counted as a reader.
pub(crate) type ReaderOf<T, E> = Reader<Result<T, Error<E>>, Rest>;

/// The lists behind the mutex, allocated on first use.
fn lists(waiting: &mut Option<Box<Waiting>>) -> &mut Waiting {
    waiting.get_or_insert_with(|| Box::new(Waiting::new()))
}

/// Stores `waker` as the latest of the future `id` in `wakers` (unless the one there
/// would wake the same task). Returns the waker it replaced, for the caller to drop once
/// it has let go of the lock.
///
/// Re-entry, not a race (one thread, so no loom model): an executor's waker may own its
/// task, and the task a handle on this promise; dropping the last clone of such a waker
/// drops the handle, whose drop takes the promise's lock. So no waker is dropped under the
/// lock: here and in `forget` the waker leaves the list under the lock and is dropped
/// after. Tests: `a_waker_dropped_by_a_repoll_may_reenter_the_promise` and its twin.
#[must_use = "drop the replaced waker after the lock"]
fn keep_latest(wakers: &mut Vec<(u64, Waker)>, id: u64, waker: &Waker) -> Option<Waker> {
    match wakers.iter_mut().find(|(i, _)| *i == id) {
        Some((_, current)) if current.will_wake(waker) => None,
        Some((_, current)) => Some(mem::replace(current, waker.clone())),
        None => {
            wakers.push((id, waker.clone()));
            None
        }
    }
}

/// Forgets the future `id`'s waker in the list `pick` chooses, if the lists exist; the
/// waker is dropped after the lock (see `keep_latest`).
fn forget(waiting: &Mutex<Lists>, id: u64, pick: fn(&mut Waiting) -> &mut Vec<(u64, Waker)>) {
    let mut guard = waiting.lock();
    let forgotten = guard.as_mut().and_then(|waiting| {
        let wakers = pick(waiting);
        let at = wakers.iter().position(|(i, _)| *i == id)?;
        Some(wakers.swap_remove(at))
    });
    drop(guard);
    drop(forgotten);
}

/// Wakes every waker of `wakers`, even if one panics; the first panic is kept in
/// `first_panic` for the caller to pass on once everything is served.
fn wake_all(wakers: Vec<(u64, Waker)>, first_panic: &mut Option<Panic>) {
    for (_, waker) in wakers {
        caught(first_panic, || waker.wake());
    }
}

/// A panic's payload, caught to be passed on later.
type Panic = Box<dyn std::any::Any + Send>;

/// Runs `f`; if it panics, keeps the first panic in `first_panic` and returns.
fn caught(first_panic: &mut Option<Panic>, f: impl FnOnce()) {
    if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(f)) {
        first_panic.get_or_insert(payload);
    }
}

/// Passes a caught panic on, unless this thread is already unwinding (a second panic
/// would abort the process).
fn pass_on(first_panic: Option<Panic>) {
    if let Some(payload) = first_panic
        && !crate::sync::panicking()
    {
        panic::resume_unwind(payload);
    }
}

impl<T, E> Inner<T, E> {
    pub(crate) fn is_completed(&self) -> bool {
        self.slot.snapshot().is_done()
    }

    /// Stores `outcome` if the promise is still pending; otherwise hands it back.
    ///
    /// RACE (first write wins): completers racing each other and the last completer's
    /// drop. The slot's compare-and-swap lets exactly one outcome in. Loom model:
    /// `racing_completers_one_winner`.
    fn settle(&self, outcome: Result<T, Error<E>>) -> Result<(), Result<T, Error<E>>> {
        let completion = Completion::of(&outcome);
        let claimed = self.slot.set(outcome, completion.index())?;
        if claimed.is_waiting() {
            self.serve(claimed, completion);
        } else {
            // Nothing registered under the lock: the owner's waker, if any, is all there
            // is to serve, and a panic from it skips nothing.
            self.slot.wake_owner(claimed);
        }
        Ok(())
    }

    /// Wakes and runs everything registered before the outcome was published: the owner's
    /// waker, the shared readers' wakers, the blocked threads, the callbacks. Every one is
    /// served even if a waker or a callback panics; the first panic is passed on after.
    /// Nothing runs under the lock: a waker or callback may re-enter this promise. Out of
    /// line and cold: a completion that finds nothing registered (the common case) then
    /// carries none of this frame's register saves.
    #[cold]
    #[inline(never)]
    fn serve(&self, claimed: Snapshot, completion: Completion) {
        let mut first_panic = None;
        caught(&mut first_panic, || self.slot.wake_owner(claimed));
        if claimed.is_waiting() {
            let mut guard = self.waiting.lock();
            let waiting = lists(&mut guard);
            let shared_wakers = mem::take(&mut waiting.shared_wakers);
            let callbacks = mem::take(&mut waiting.callbacks);
            let blocked = waiting.blocked > 0;
            drop(guard);
            if blocked {
                self.changed.notify_all();
            }
            wake_all(shared_wakers, &mut first_panic);
            run_callbacks_caught(callbacks, completion, &mut first_panic);
        }
        pass_on(first_panic);
    }

    /// Runs `callback` once: now, on this thread, if the promise is complete; otherwise
    /// on the completing thread when it completes.
    ///
    /// RACE (register vs complete): the callback is pushed under the lock and then the
    /// slot's `WAITING` flag is set; the flag and the completer's claim are both
    /// compare-and-swaps of one word, so exactly one sees the other: either the completer
    /// sees `WAITING` and drains the list after publishing, or we see the claim, wait for
    /// the publish (`Slot::set_flag`) and pop our own callback back (still under the lock,
    /// so the completer cannot have drained it). Loom model: `callback_races_completion`.
    pub(crate) fn on_complete(&self, callback: Callback) {
        let now = self.slot.snapshot();
        if now.is_done() {
            return run_callbacks(vec![callback], Completion::from_index(now.kind()));
        }
        let mut guard = self.waiting.lock();
        let waiting = lists(&mut guard);
        waiting.callbacks.push(callback);
        let before = self.slot.mark_waiting();
        if before.is_done() {
            let mine = waiting.callbacks.pop().into_iter().collect();
            drop(guard);
            run_callbacks(mine, Completion::from_index(before.kind()));
        }
    }

    /// Registers `waker` for the shared clone `id`; returns whether the outcome was
    /// published first. Same protocol as `register_waker`.
    pub(crate) fn register_shared_waker(&self, id: u64, waker: &Waker) -> bool {
        let mut guard = self.waiting.lock();
        let replaced = keep_latest(&mut lists(&mut guard).shared_wakers, id, waker);
        let done = self.slot.mark_waiting().is_done();
        drop(guard);
        drop(replaced);
        done
    }

    /// Forgets the shared clone `id`'s waker.
    pub(crate) fn forget_shared_waker(&self, id: u64) {
        forget(&self.waiting, id, |waiting| &mut waiting.shared_wakers);
    }

    /// Blocks until the outcome is published or `deadline` passes; `None` on timeout.
    pub(crate) fn wait_until(&self, deadline: Option<Instant>) -> Option<Completion> {
        loop {
            let now = self.slot.snapshot();
            if now.is_done() {
                return Some(Completion::from_index(now.kind()));
            }
            let mut waiting = self.waiting.lock();
            if self.slot.mark_waiting().is_done() {
                continue;
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return None;
            }
            // RACE (lost wake-up): we hold the lock from setting `WAITING` until the
            // condition variable releases it atomically, and the completer must take the
            // lock to read `blocked`: it cannot miss us. Loom model: `blocking_waiter_wakes`.
            lists(&mut waiting).blocked += 1;
            waiting = self.changed.wait(waiting, deadline);
            lists(&mut waiting).blocked -= 1;
        }
    }

    /// Stores `waker` for the `Closed` future `id`; returns whether every reader is gone
    /// already (then nothing is stored). The waker is stored before the lock is released,
    /// and `last_reader_gone` takes the lock: see `Allocation::watch` for the race.
    fn register_closed_waker(&self, id: u64, waker: &Waker) -> bool {
        let mut guard = self.waiting.lock();
        if self.watch() {
            return true;
        }
        let replaced = keep_latest(&mut lists(&mut guard).closed_wakers, id, waker);
        drop(guard);
        drop(replaced);
        false
    }

    fn forget_closed_waker(&self, id: u64) {
        forget(&self.waiting, id, |waiting| &mut waiting.closed_wakers);
    }

    pub(crate) fn next_shared_id(&self) -> u64 {
        // ORDERING: a unique id source; nothing else is published through it.
        self.next_shared_id.fetch_add(1, Ordering::Relaxed) as u64
    }

    /// A clone of the published outcome, for shared readers.
    pub(crate) fn read_clone(&self) -> Option<Result<T, Error<E>>>
    where
        T: Clone + Sync,
        E: Clone + Sync,
    {
        self.slot.read(Clone::clone)
    }
}

/// Runs every callback once, each under `catch_unwind`, so one panicking callback does
/// not stop the others. The first panic is then resumed on this thread (unless it is
/// already unwinding, as when the last completer is dropped during a panic): the
/// completion has taken effect by then, and the promise is not poisoned.
fn run_callbacks(callbacks: Vec<Callback>, completion: Completion) {
    let mut first_panic = None;
    run_callbacks_caught(callbacks, completion, &mut first_panic);
    pass_on(first_panic);
}

/// Runs every callback, even if one panics; the first panic is kept in `first_panic`.
fn run_callbacks_caught(
    callbacks: Vec<Callback>,
    completion: Completion,
    first_panic: &mut Option<Panic>,
) {
    for callback in callbacks {
        if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(|| callback(completion))) {
            #[cfg(feature = "tracing")]
            tracing::error!(?completion, "an on_complete callback panicked; the others still ran");
            first_panic.get_or_insert(payload);
        }
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
    let cell::FirstHandles { owner, plain } = cell::owned(Rest {
        completers: AtomicUsize::new(1),
        next_shared_id: AtomicUsize::new(0),
        waiting: Mutex::new(ManuallyDrop::new(None)),
        changed: Condvar::default(),
    });
    (Completer { inner: plain }, PromiseFuture { owner })
}

/// The writing side of a promise. Clones race: the first completion (value, failure or
/// cancellation) wins, and every later one is refused and handed its argument back.
/// When the last clone is dropped without any of them completing, the promise finishes
/// with [`Error::Abandoned`].
pub struct Completer<T, E> {
    inner: PlainOf<T, E>,
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

    /// Whether every reader is gone (the [`PromiseFuture`] and every [`SharedFuture`]
    /// clone dropped), as tokio's `Sender::is_closed`: a completion now would be read by
    /// no one, so work that only produces it may stop. Final once true. Cheap: one load.
    ///
    /// [`SharedFuture`]: crate::SharedFuture
    ///
    /// ```
    /// let (completer, future) = idem_future::promise::<u32, ()>();
    /// assert!(!completer.is_closed());
    /// drop(future);
    /// assert!(completer.is_closed());
    /// assert_eq!(completer.complete(1), Ok(())); // still first-write-wins; read by no one
    /// ```
    pub fn is_closed(&self) -> bool {
        self.inner.is_closed()
    }

    /// A future that resolves once every reader is gone, as tokio's `Sender::closed`:
    /// race it against the work with `select!` to stop work nobody will read. It owns a
    /// handle to the promise (it may be spawned) but is not a completer: it neither
    /// completes the promise nor keeps it from being abandoned.
    pub fn closed(&self) -> Closed<T, E> {
        Closed { id: self.inner.next_shared_id(), inner: self.inner.plain() }
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
        // Once the promise is settled, abandonment is moot: skip the count (one atomic
        // read-modify-write saved on the common path, complete-then-drop). The count then
        // stays above the number of live completers, which no one reads any more.
        if self.inner.is_completed() {
            return;
        }
        // ORDERING: AcqRel, so the last dropper sees every other dropper's writes before it
        // abandons the promise (as `Arc`'s drop does before freeing).
        if self.inner.completers.fetch_sub(1, Ordering::AcqRel) == 1 {
            // Refused if a completer already won; that is the normal case.
            let abandoned = self.inner.settle(Err(Error::Abandoned)).is_ok();
            #[cfg(feature = "tracing")]
            if abandoned {
                tracing::debug!("promise abandoned: every completer dropped without completing");
            }
            #[cfg(not(feature = "tracing"))]
            let _ = abandoned;
        }
    }
}

impl<T, E> fmt::Debug for Completer<T, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Completer")
            .field("is_completed", &self.is_completed())
            .field("is_closed", &self.is_closed())
            .finish()
    }
}

/// Resolves once every reader of a promise is gone; made by [`Completer::closed`].
pub struct Closed<T, E> {
    inner: PlainOf<T, E>,
    /// This future's place among the promise's waiting lists.
    id: u64,
}

impl<T, E> Future for Closed<T, E> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.inner.is_closed() || self.inner.register_closed_waker(self.id, cx.waker()) {
            return Poll::Ready(());
        }
        Poll::Pending
    }
}

impl<T, E> Drop for Closed<T, E> {
    fn drop(&mut self) {
        // Forget this future's waker, so dropped `Closed` futures do not pile up.
        self.inner.forget_closed_waker(self.id);
    }
}

impl<T, E> fmt::Debug for Closed<T, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Closed").field("is_closed", &self.inner.is_closed()).finish()
    }
}

/// The reading side of a promise, owned by one reader: await it, or block on it.
///
/// It resolves to `Ok(value)`, or to an [`Error`] saying it failed, was cancelled, or was
/// abandoned by every completer. For many readers, turn it into a
/// [`SharedFuture`](crate::SharedFuture) with [`shared`](Self::shared).
pub struct PromiseFuture<T, E> {
    owner: OwnerOf<T, E>,
}

/// What a blocking read returns: the outcome, or the future back if it is not ready.
pub type TryResult<T, E> = Result<Result<T, Error<E>>, PromiseFuture<T, E>>;

impl<T, E> PromiseFuture<T, E> {
    fn inner(&self) -> &Inner<T, E> {
        self.owner.allocation()
    }

    /// Moves the published outcome out.
    ///
    /// # Panics
    ///
    /// If the outcome was taken already (a poll after `Ready`, then another read).
    fn take(&mut self) -> Option<Result<T, Error<E>>> {
        match self.owner.take() {
            Ok(outcome) => Some(outcome),
            Err(now) if now.is_taken() => panic!("PromiseFuture polled after it returned Ready"),
            Err(_) => None,
        }
    }

    /// Whether the promise has finished, in any way. Cheap: one atomic load.
    pub fn is_completed(&self) -> bool {
        self.inner().is_completed()
    }

    /// Whether this future already returned `Ready` (its outcome was moved out), as
    /// `futures`' `FusedFuture::is_terminated`: it must not be polled again (a poll after
    /// `Ready` panics, as tokio's oneshot receiver's does). `select!` loops check it, or
    /// wrap the future with `futures::FutureExt::fuse`.
    ///
    /// ```
    /// # futures::executor::block_on(async {
    /// let (completer, mut future) = idem_future::promise::<u32, ()>();
    /// completer.complete(7).unwrap();
    /// assert!(!future.is_terminated());
    /// assert_eq!((&mut future).await, Ok(7));
    /// assert!(future.is_terminated());
    /// # });
    /// ```
    pub fn is_terminated(&self) -> bool {
        self.inner().slot.snapshot().is_taken()
    }

    /// Blocks this thread until the promise finishes, for code without an async runtime.
    ///
    /// # Errors
    ///
    /// [`Error::Failed`], [`Error::Cancelled`] or [`Error::Abandoned`], as it finished.
    ///
    /// # Panics
    ///
    /// If this future already returned `Ready` from `poll` (the outcome was moved out).
    pub fn wait(mut self) -> Result<T, Error<E>> {
        loop {
            self.inner().wait_until(None);
            if let Some(outcome) = self.take() {
                return outcome;
            }
        }
    }

    /// Blocks up to `timeout` for the promise to finish.
    ///
    /// # Errors
    ///
    /// `Err(self)` if it is still pending after `timeout`, to wait again later.
    ///
    /// # Panics
    ///
    /// As [`wait`](Self::wait).
    pub fn wait_timeout(self, timeout: Duration) -> TryResult<T, E> {
        let deadline = Instant::now().checked_add(timeout);
        match self.inner().wait_until(deadline) {
            Some(_) => self.try_get(),
            None => Err(self),
        }
    }

    /// Takes the outcome if the promise has finished, without blocking.
    ///
    /// # Errors
    ///
    /// `Err(self)` if it is still pending.
    ///
    /// # Panics
    ///
    /// As [`wait`](Self::wait).
    pub fn try_get(mut self) -> TryResult<T, E> {
        match self.take() {
            Some(outcome) => Ok(outcome),
            None => Err(self),
        }
    }

    /// Runs `callback` exactly once with how the promise finished; see
    /// [`Completer::on_complete`].
    ///
    /// # Panics
    ///
    /// If the promise is already complete and `callback` panics (it runs on this thread).
    pub fn on_complete(&self, callback: impl FnOnce(Completion) + Send + 'static) {
        self.inner().on_complete(Box::new(callback));
    }

    /// Turns this future into one that many readers can clone and wait on.
    ///
    /// # Panics
    ///
    /// If this future already returned `Ready` from `poll` (the outcome was moved out).
    pub fn shared(self) -> crate::SharedFuture<T, E>
    where
        T: Clone + Send + Sync,
        E: Clone + Send + Sync,
    {
        assert!(
            !self.inner().slot.share().is_taken(),
            "PromiseFuture::shared after it returned Ready"
        );
        // The owner's reader handle becomes the shared future's: the count of readers
        // does not move, so no `Closed` future wakes for it.
        crate::shared::SharedFuture::new(self.owner.into_reader())
    }
}

impl<T, E> Future for PromiseFuture<T, E> {
    type Output = Result<T, Error<E>>;

    /// # Panics
    ///
    /// If polled again after it returned `Ready` (the outcome was moved out), as futures
    /// generally may.
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if let Some(outcome) = this.take() {
            return Poll::Ready(outcome);
        }
        // The waker sits in the slot, lock-free; see `Slot::register_owner` for the race.
        if this.owner.register(cx.waker()) {
            // Published while we registered: the completer will not wake us, so take now.
            if let Some(outcome) = this.take() {
                return Poll::Ready(outcome);
            }
        }
        Poll::Pending
    }
}

impl<T, E> fmt::Debug for PromiseFuture<T, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PromiseFuture").field("is_completed", &self.is_completed()).finish()
    }
}
