//! The group-commit writer every durable part shares (the SQLite store, the durable
//! wallet): one thread owns the durable state; work that arrives while a commit is in
//! progress joins the next group; a group is committed (one fsync) and only then is each
//! caller answered. Each request carries its own typed reply: a caller gets back exactly
//! the type its work returned, so no request and answer enums can be mismatched.
//!
//! ```
//! use idem_durable::group_commit::{Committer, GroupCommit, GroupLimits};
//!
//! /// Sums numbers; a group is "durable" once `commit` adds it to the total.
//! #[derive(Debug, Default)]
//! struct Sum { pending: u64, total: u64 }
//!
//! impl Committer for Sum {
//!     type Error = std::io::Error;
//!     fn begin(&mut self) -> std::io::Result<()> { self.pending = 0; Ok(()) }
//!     fn commit(&mut self) -> std::io::Result<()> { self.total += self.pending; Ok(()) }
//! }
//!
//! let writer = GroupCommit::start("sum", Sum::default(), GroupLimits::default())?;
//! let seen = writer.submit(|sum: &mut Sum| { sum.pending += 5; sum.total })?;
//! assert_eq!(seen, 0); // answered after its group committed; it saw the total before
//! assert_eq!(writer.submit(|sum: &mut Sum| sum.total)?, 5);
//! assert_eq!(writer.stats().groups_committed, 2);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! An async caller submits with [`GroupCommit::submit_async`] and awaits the same answer:
//! the writer sends it down the request's reply channel after the commit, so no thread
//! of the caller's runtime waits for the disk. A full queue is waited for in the same
//! way: the caller's task sleeps until the writer makes room.
//!
//! ```
//! # use idem_durable::group_commit::{Committer, GroupCommit, GroupLimits};
//! # #[derive(Debug, Default)]
//! # struct Sum { pending: u64, total: u64 }
//! # impl Committer for Sum {
//! #     type Error = std::io::Error;
//! #     fn begin(&mut self) -> std::io::Result<()> { self.pending = 0; Ok(()) }
//! #     fn commit(&mut self) -> std::io::Result<()> { self.total += self.pending; Ok(()) }
//! # }
//! let writer = GroupCommit::start("sum", Sum::default(), GroupLimits::default())?;
//! let runtime = tokio::runtime::Builder::new_current_thread().build()?;
//! let total = runtime.block_on(async {
//!     writer.submit_async(|sum: &mut Sum| sum.pending += 5).await?;
//!     writer.submit_async(|sum: &mut Sum| sum.total).await
//! })?;
//! assert_eq!(total, 5);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel as channel};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

/// What the writer does with its state around each group.
pub trait Committer: Send + 'static {
    /// Why a group could not start or commit (an SQLite error, an I/O error): handed to
    /// every caller of the group inside [`CommitError::Failed`], with its source kept.
    type Error: std::error::Error + Send + Sync + 'static;

    /// Starts a group (`BEGIN`, taking a lock).
    ///
    /// # Errors
    ///
    /// Why the group cannot start; every request of the group is answered with it.
    fn begin(&mut self) -> Result<(), Self::Error>;

    /// Makes the group's work durable (`COMMIT`, an fsync). Callers are answered only
    /// after it returns `Ok`.
    ///
    /// # Errors
    ///
    /// Why it failed: what is durable is then unknown, and every request of the group is
    /// answered with the error.
    fn commit(&mut self) -> Result<(), Self::Error>;

    /// After a group failed (its `begin` or `commit` erred, or its work panicked): undo
    /// what can be undone, and say whether the writer may go on. The default goes on.
    fn recover(&mut self) -> AfterFailure {
        AfterFailure::Continue
    }
}

/// Whether the writer takes more work after a failed group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterFailure {
    /// The state is consistent again: take the next group.
    Continue,
    /// The state cannot be trusted: answer every later request `Stopped`.
    Stop,
}

/// The writer's limits, named. Both must be at least 1, and `queue_max` at most
/// [`GroupLimits::QUEUE_MAX_LIMIT`]: [`GroupCommit::start`] refuses others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupLimits {
    /// Requests waiting for the writer; a caller past it waits to queue. Default 1024.
    pub queue_max: usize,
    /// Requests committed together at most. Default 64.
    pub group_max: usize,
}

impl GroupLimits {
    /// The largest `queue_max`: the queue's places are allocated when the writer starts,
    /// so a huge bound would take its memory at once (or abort the process).
    pub const QUEUE_MAX_LIMIT: usize = 65_536;
}

impl Default for GroupLimits {
    fn default() -> Self {
        Self { queue_max: 1024, group_max: 64 }
    }
}

/// Why a group failed: the committer's own error (its source chain kept), or a panic in
/// the group's work. Shared by every caller of the group.
#[derive(Debug, Clone)]
pub struct GroupFailure(Arc<dyn std::error::Error + Send + Sync>);

impl GroupFailure {
    /// The committer's error, to downcast to its type.
    pub fn error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        &*self.0
    }
}

impl fmt::Display for GroupFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Transparent: it says what the committer's error says and hands on that error's own
/// source, so a chain printed from it names each cause once.
impl std::error::Error for GroupFailure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

/// Two failures are the same if they say the same: one group's callers share one.
impl PartialEq for GroupFailure {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0.to_string() == other.0.to_string()
    }
}

impl Eq for GroupFailure {}

/// The group's work panicked: nothing of it was committed.
#[derive(Debug, thiserror::Error)]
#[error("the group's work panicked")]
struct WorkPanicked;

/// Why a request got no result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CommitError {
    /// The group could not start or commit, or its work panicked: nothing of it is
    /// answered as done.
    #[error("the group failed: {0}")]
    Failed(#[source] GroupFailure),
    /// The writer is gone (closed, or stopped after a failure).
    #[error("the writer stopped")]
    Stopped,
    /// No answer came: the request's own work panicked. Nothing of it is to be trusted.
    #[error("the request's work panicked; nothing of it was committed")]
    Lost,
}

type Finish = Box<dyn FnOnce(Result<(), &CommitError>) + Send>;
/// A request: run on the state (`Some`), or refused unrun (`None`, its group failed to
/// start); either way it returns how to answer its caller once the group's fate is known.
type Job<S> = Box<dyn FnOnce(Option<&mut S>) -> Finish + Send>;
/// Where a request's answer arrives: sent once, after its group's fate is known.
type Answer<T> = oneshot::Receiver<Result<T, CommitError>>;

/// What the writer has committed since it started, for operators: requests per group is
/// how many callers shared each commit (each fsync).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GroupStats {
    /// Groups whose commit succeeded.
    pub groups_committed: u64,
    /// Requests in those groups (each answered with its own result after the commit).
    pub requests_committed: u64,
}

/// The writer's counts, kept by the writer thread and read by [`GroupCommit::stats`].
#[derive(Debug, Default)]
struct Counts {
    groups: AtomicU64,
    requests: AtomicU64,
}

/// The writer: a thread that owns `S` and commits work in groups. Dropping it lets the
/// thread finish what is queued and joins it.
pub struct GroupCommit<S: Committer> {
    jobs: Option<SyncSender<Job<S>>>,
    room: Arc<Room>,
    counts: Arc<Counts>,
    thread: Option<JoinHandle<()>>,
}

impl<S: Committer> fmt::Debug for GroupCommit<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GroupCommit").field("running", &self.jobs.is_some()).finish()
    }
}

impl<S: Committer> GroupCommit<S> {
    /// Starts the writer thread, named `name`, owning `state`.
    ///
    /// # Errors
    ///
    /// [`std::io::ErrorKind::InvalidInput`] naming the limit if `queue_max` or
    /// `group_max` is 0 or `queue_max` is past [`GroupLimits::QUEUE_MAX_LIMIT`], or
    /// if `name` holds a NUL byte (a thread's name cannot); the OS error if the thread
    /// cannot start.
    pub fn start(name: &str, state: S, limits: GroupLimits) -> std::io::Result<Self> {
        let invalid = |why: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, why);
        for (setting, value) in [("queue_max", limits.queue_max), ("group_max", limits.group_max)] {
            if value == 0 {
                return Err(invalid(format!("GroupLimits::{setting} must be at least 1, got 0")));
            }
        }
        if limits.queue_max > GroupLimits::QUEUE_MAX_LIMIT {
            return Err(invalid(format!(
                "GroupLimits::queue_max must be at most {}, got {}",
                GroupLimits::QUEUE_MAX_LIMIT,
                limits.queue_max
            )));
        }
        if name.contains('\0') {
            return Err(invalid(format!("the writer's name {name:?} holds a NUL byte")));
        }
        let (jobs, queue) = channel::<Job<S>>(limits.queue_max);
        let (room, counts) = (Arc::new(Room::default()), Arc::new(Counts::default()));
        let inbox = Inbox { queue: Some(queue), room: room.clone(), group_max: limits.group_max };
        let writer_counts = counts.clone();
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || run(state, &inbox, &writer_counts))?;
        Ok(Self { jobs: Some(jobs), room, counts, thread: Some(thread) })
    }

    /// Runs `work` on the state inside the next group and returns its result once the
    /// group is committed. A full queue (`queue_max` requests waiting) blocks the calling
    /// thread until the writer takes a group off it.
    ///
    /// # Errors
    ///
    /// [`CommitError::Failed`] if the group did not commit (nothing of `work` is to be
    /// trusted as done); [`CommitError::Stopped`] if the writer is gone.
    pub fn submit<T: Send + 'static>(
        &self,
        work: impl FnOnce(&mut S) -> T + Send + 'static,
    ) -> Result<T, CommitError> {
        let (job, answer) = job_for(work);
        let jobs = self.jobs.as_ref().ok_or(CommitError::Stopped)?;
        jobs.send(job).map_err(|_| CommitError::Stopped)?;
        answered(answer.recv())
    }

    /// As [`submit`](Self::submit), for an async caller: the future is ready with `work`'s
    /// result once its group is committed, and no thread waits for it meanwhile. The writer
    /// sends the answer down the request's reply channel, which wakes the caller's task. A
    /// full queue (the same `queue_max`, shared with [`submit`](Self::submit)'s callers) is
    /// waited for the same way: the task sleeps until the writer takes a group off the
    /// queue, then tries again. A stopped writer answers at once.
    ///
    /// Dropping the future gives up the answer, not the work: dropped before its first
    /// poll or while it waits for room, `work` never runs; dropped once `work` is queued,
    /// `work` runs in its group and may commit, and only its answer is thrown away.
    /// Neither disturbs the writer or the other callers of the group. A caller that must
    /// know whether `work` committed awaits the answer.
    ///
    /// # Errors
    ///
    /// As [`submit`](Self::submit).
    pub fn submit_async<T: Send + 'static>(
        &self,
        work: impl FnOnce(&mut S) -> T + Send + 'static,
    ) -> impl Future<Output = Result<T, CommitError>> + Send + '_ {
        let (job, answer) = job_for(work);
        async move {
            self.queue(job).await?;
            answered(answer.await)
        }
    }

    /// Puts `job` on the queue, sleeping (without its thread) while the queue is full.
    async fn queue(&self, mut job: Job<S>) -> Result<(), CommitError> {
        let jobs = self.jobs.as_ref().ok_or(CommitError::Stopped)?;
        let mut woken = None;
        loop {
            match jobs.try_send(job) {
                Ok(()) => return Ok(()),
                Err(TrySendError::Disconnected(_)) => return Err(CommitError::Stopped),
                Err(TrySendError::Full(back)) => job = back,
            }
            match woken.take() {
                // It was registered before the try that just failed: any room made since
                // then wakes it (a wake-up is sent, or its sender dropped: try again).
                Some(wake) => {
                    let _ = wake.await;
                }
                // RACE (room made, or the writer stopped, between a failed try and the
                // registration): register, then try once more before sleeping, so that
                // what happened in that gap is seen by the second try. No test forces the
                // gap; the `submit_async` tests cover the wake-ups around it.
                None => woken = Some(self.room.wait()),
            }
        }
    }

    /// What the writer has committed so far. A caller that got its answer sees its own
    /// group counted.
    pub fn stats(&self) -> GroupStats {
        // ORDERING: counts for operators; a caller's reply channel orders the writer's
        // increments before the caller's reading (sent after them, received before it).
        GroupStats {
            groups_committed: self.counts.groups.load(Ordering::Relaxed),
            requests_committed: self.counts.requests.load(Ordering::Relaxed),
        }
    }

    /// The wake-ups held for async callers waiting for room in a full queue: one per
    /// caller waiting (a caller that gave up, its future dropped, is let go when the next
    /// one waits or the writer makes room).
    pub fn waiting_for_room(&self) -> usize {
        self.room.0.lock().unwrap_or_else(PoisonError::into_inner).len()
    }
}

/// A request's answer as it arrived on its reply channel.
fn answered<T, E>(answer: Result<Result<T, CommitError>, E>) -> Result<T, CommitError> {
    // Every job answers, even dropped unrun (`Reply`); this is only a backstop.
    answer.map_err(|_| CommitError::Lost)?
}

impl<S: Committer> Drop for GroupCommit<S> {
    fn drop(&mut self) {
        drop(self.jobs.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Async callers waiting for room in the writer's queue. Each is woken when the writer
/// takes a group off the queue (room was made) and when the writer stops (none will be).
#[derive(Debug, Default)]
struct Room(Mutex<Vec<oneshot::Sender<()>>>);

impl Room {
    /// A wake-up for the next time room is made or the writer stops.
    fn wait(&self) -> oneshot::Receiver<()> {
        let (wake, woken) = oneshot::channel();
        let mut waiting = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        // The wake-ups of callers that gave up (their futures dropped) go first: while the
        // writer is stuck on one group, callers that time out and try again would
        // otherwise each leave one behind, without bound. What is kept is one per caller
        // now waiting.
        waiting.retain(|caller| !caller.is_closed());
        waiting.push(wake);
        woken
    }

    /// Wakes every waiting caller to try again.
    fn wake(&self) {
        let callers = std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner));
        for caller in callers {
            // A caller that gave up (dropped its future) is not waiting any more.
            let _ = caller.send(());
        }
    }
}

/// The writer thread's end of the queue.
struct Inbox<S> {
    /// `None` once dropped.
    queue: Option<Receiver<Job<S>>>,
    room: Arc<Room>,
    group_max: usize,
}

impl<S> Inbox<S> {
    /// The next group: the first request to arrive and what queued behind it, up to
    /// `group_max`; `None` once every sender is gone.
    fn next_group(&self) -> Option<Vec<Job<S>>> {
        let queue = self.queue.as_ref()?;
        let first = queue.recv().ok()?;
        let mut group = vec![first];
        group.extend(queue.try_iter().take(self.group_max - 1));
        self.room.wake();
        Some(group)
    }
}

/// The writer stopped (it returned, or unwound): the queue is closed first, so that every
/// later try to queue fails `Stopped`, then every caller waiting for room is woken to
/// make that try. A caller of a stopped writer is answered at once, never left waiting.
impl<S> Drop for Inbox<S> {
    fn drop(&mut self) {
        drop(self.queue.take());
        self.room.wake();
    }
}

/// The writer thread: groups until the queue closes, or a failed group says stop.
fn run<S: Committer>(mut state: S, inbox: &Inbox<S>, counts: &Counts) {
    while let Some(group) = inbox.next_group() {
        let run = || commit_group(&mut state, group, counts);
        // A panicking job loses its own reply (its caller sees `Lost`); the jobs run
        // before it are answered `Failed` by `commit_group`'s guard as it unwinds.
        let committed = std::panic::catch_unwind(AssertUnwindSafe(run)).unwrap_or(Err(()));
        if committed.is_err() && state.recover() == AfterFailure::Stop {
            return;
        }
    }
}

/// Runs one group. Every job's caller is answered: with its result after a commit, with
/// the failure otherwise (also if a later job panics: the finishers run on unwind).
fn commit_group<S: Committer>(
    state: &mut S,
    group: Vec<Job<S>>,
    counts: &Counts,
) -> Result<(), ()> {
    if let Err(why) = state.begin() {
        let error = CommitError::Failed(GroupFailure(Arc::new(why)));
        for job in group {
            job(None)(Err(&error));
        }
        return Err(());
    }
    let mut pending = Pending(Vec::with_capacity(group.len()));
    // Dropped before `pending` if a job panics: the jobs after it, never run, are answered
    // `Failed` as the ones before it are (not `Stopped`: the writer goes on).
    let mut unrun = Unrun(group.into_iter());
    for job in unrun.0.by_ref() {
        pending.0.push(job(Some(state)));
    }
    let committed = state.commit().map_err(|why| CommitError::Failed(GroupFailure(Arc::new(why))));
    let failed = committed.is_err();
    if !failed {
        // ORDERING: counts for operators, read by `stats`; each caller's reply, sent after
        // these, orders them before anything the caller reads once answered.
        counts.groups.fetch_add(1, Ordering::Relaxed);
        counts.requests.fetch_add(pending.0.len() as u64, Ordering::Relaxed);
    }
    for finish in pending.0.drain(..) {
        finish(committed.as_ref().map(|_| ()));
    }
    if failed { Err(()) } else { Ok(()) }
}

/// A request's job and where its answer arrives.
fn job_for<S: Committer, T: Send + 'static>(
    work: impl FnOnce(&mut S) -> T + Send + 'static,
) -> (Job<S>, Answer<T>) {
    let (tx, answer) = oneshot::channel::<Result<T, CommitError>>();
    let mut reply = Reply { tx: Some(tx), started: false };
    let job: Job<S> = Box::new(move |state: Option<&mut S>| match state {
        Some(state) => {
            reply.started = true;
            let out = work(state);
            Box::new(move |committed: Result<(), &CommitError>| {
                reply.send(committed.map(|()| out).map_err(Clone::clone));
            })
        }
        None => Box::new(move |refused: Result<(), &CommitError>| {
            reply.send(Err(refused.err().cloned().unwrap_or(CommitError::Stopped)));
        }),
    });
    (job, answer)
}

/// A caller's reply channel, answered exactly once. Dropped unsent, it answers by itself:
/// `Lost` if the work started (it panicked), `Stopped` if the job never ran.
///
/// RACE (stop behind a failure): a failed group's callers are answered before the writer
/// decides to stop, so a caller may queue its next request in that gap; the writer then
/// returns and the queue drops the job unrun. Its caller is answered `Stopped`, as if it
/// had come a moment later, never `Lost` (which would claim its work ran and panicked).
/// Test: `a_job_dropped_unrun_answers_stopped` (the channel's drop is not loom-modelled).
///
/// A caller that gave up (an async caller dropped its future) has dropped its end: the
/// answer is thrown away, and nothing else changes.
struct Reply<T> {
    tx: Option<oneshot::Sender<Result<T, CommitError>>>,
    started: bool,
}

impl<T> Reply<T> {
    fn send(mut self, answer: Result<T, CommitError>) {
        if let Some(tx) = self.tx.take() {
            let _ = tx.send(answer);
        }
    }
}

impl<T> Drop for Reply<T> {
    fn drop(&mut self) {
        if let Some(tx) = self.tx.take() {
            let _ =
                tx.send(Err(if self.started { CommitError::Lost } else { CommitError::Stopped }));
        }
    }
}

/// The failure of a group one of whose jobs panicked.
fn work_panicked() -> CommitError {
    CommitError::Failed(GroupFailure(Arc::new(WorkPanicked)))
}

/// Jobs of a group not yet run: if the group unwinds (a job panicked), each is answered
/// with the same failure as the jobs run before it.
struct Unrun<S: Committer>(std::vec::IntoIter<Job<S>>);

impl<S: Committer> Drop for Unrun<S> {
    fn drop(&mut self) {
        let panicked = work_panicked();
        for job in self.0.by_ref() {
            job(None)(Err(&panicked));
        }
    }
}

/// Finishers not yet run: if the group unwinds (a job panicked), each is answered with a
/// failure instead of never.
struct Pending(Vec<Finish>);

impl Drop for Pending {
    fn drop(&mut self) {
        let panicked = work_panicked();
        for finish in self.0.drain(..) {
            finish(Err(&panicked));
        }
    }
}

/// How a job answers when it is not run to the end, which the writer's races decide and a
/// test through `submit` cannot force.
#[cfg(test)]
mod reply {
    use super::*;

    #[derive(Debug)]
    struct Nothing;

    impl Committer for Nothing {
        type Error = std::io::Error;
        fn begin(&mut self) -> std::io::Result<()> {
            Ok(())
        }
        fn commit(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_job_dropped_unrun_answers_stopped() {
        let (job, answer) = job_for::<Nothing, u32>(|_| 1);
        drop(job);
        assert_eq!(answer.recv(), Ok(Err(CommitError::Stopped)));
    }

    #[test]
    fn a_job_whose_work_panics_answers_lost() {
        let (job, answer) = job_for::<Nothing, u32>(|_| panic!("the work fails"));
        let ran = std::panic::catch_unwind(AssertUnwindSafe(|| job(Some(&mut Nothing))));
        assert!(ran.is_err());
        assert_eq!(answer.recv(), Ok(Err(CommitError::Lost)));
    }

    #[test]
    fn a_job_run_and_committed_answers_once_with_its_result() {
        let (job, answer) = job_for::<Nothing, u32>(|_| 7);
        job(Some(&mut Nothing))(Ok(()));
        assert_eq!(answer.recv_ref(), Ok(Ok(7)));
        assert!(answer.recv_ref().is_err(), "exactly one answer");
    }
}
