//! The group-commit writer for async callers (`submit_async`): answered only after the
//! commit, a failed group answered as such, the queue limit the same as `submit`'s, a
//! stopped writer answering at once, futures given up before their answer, and callers
//! on one runtime thread that never park it.

use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::thread::JoinHandle;
use std::time::Duration;

use idem_durable::group_commit::{CommitError, GroupCommit, GroupLimits, GroupStats};
use idem_testkit::wait_until;

use crate::group_commit::{Log, failure, writer};

/// How long a test waits for another thread before it fails instead of hanging.
const WAIT_MAX: Duration = Duration::from_secs(10);

/// Polls `future` once, with a waker that does nothing: what a runtime's first poll does.
fn poll_once<F: Future>(future: Pin<&mut F>) -> Poll<F::Output> {
    future.poll(&mut Context::from_waker(Waker::noop()))
}

/// Polls `future` until it is ready, failing the test after [`WAIT_MAX`].
#[track_caller]
fn ready<F: Future>(what: &str, mut future: Pin<&mut F>) -> F::Output {
    let mut answer = None;
    wait_until(what, WAIT_MAX, || {
        answer = match poll_once(future.as_mut()) {
            Poll::Ready(out) => Some(out),
            Poll::Pending => None,
        };
        answer.is_some()
    });
    answer.expect("ready")
}

/// Runs `future` to its end on a current-thread tokio runtime of its own thread, and
/// fails the test after [`WAIT_MAX`] if that thread never finishes (a blocked caller).
#[track_caller]
fn on_one_thread<T: Send + 'static>(future: impl Future<Output = T> + Send + 'static) -> T {
    let (done, answer) = channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().build().expect("a runtime");
        let _ = done.send(runtime.block_on(future));
    });
    let mut got = None;
    wait_until("the runtime's one thread to finish", WAIT_MAX, || {
        got = answer.try_recv().ok();
        got.is_some()
    });
    got.expect("finished")
}

fn events(log: &Arc<Mutex<Vec<String>>>) -> Vec<String> {
    log.lock().expect("lock").clone()
}

/// The work each request did, in order: the log without the writer's own steps.
fn worked(log: &Arc<Mutex<Vec<String>>>) -> Vec<String> {
    let writers = ["begin", "commit", "recover"];
    events(log).into_iter().filter(|e| !writers.contains(&e.as_str())).collect()
}

/// Work that logs `name` when it runs and answers it.
fn noting(name: &'static str) -> impl FnOnce(&mut Log) -> &'static str + Send + 'static {
    move |log: &mut Log| {
        log.note(name);
        name
    }
}

/// A writer held inside its first group's work, its queue empty behind it, until
/// [`Held::release`]; the first request came from a thread, answered after.
struct Held {
    log: Arc<Mutex<Vec<String>>>,
    release: Sender<()>,
    first: JoinHandle<Result<(), CommitError>>,
}

/// Whether the held work panics once released (a failed group).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Then {
    Finish,
    Panic,
}

fn held(log: Log, limits: GroupLimits, then: Then) -> (Arc<GroupCommit<Log>>, Held) {
    let seen = log.events.clone();
    let writer = Arc::new(GroupCommit::start("held", log, limits).expect("a thread"));
    let (release, released) = channel::<()>();
    let first = std::thread::spawn({
        let writer = writer.clone();
        move || {
            writer.submit(move |log: &mut Log| {
                log.note("held");
                let _ = released.recv();
                if then == Then::Panic {
                    panic!("the held work fails, as the test asks");
                }
            })
        }
    });
    let holding = || events(&seen).contains(&"held".to_string());
    wait_until("the writer to hold its first group", WAIT_MAX, holding);
    (writer, Held { log: seen, release, first })
}

impl Held {
    /// Lets the held work end: the writer's log, and what the held work's caller got.
    fn release(self) -> (Arc<Mutex<Vec<String>>>, Result<(), CommitError>) {
        self.release.send(()).expect("the writer holds its first group");
        let first = self.first.join().expect("the first caller's thread");
        (self.log, first)
    }
}

#[test]
fn an_async_caller_is_answered_only_after_its_group_commits() {
    let (open, gate) = channel();
    let log = Log { hold_commit: Some(gate), ..Log::default() };
    let seen = log.events.clone();
    let writer = writer(log);
    // Declared after the writer, so dropped before it: a failing assertion lets the held
    // commit go on, and dropping the writer (which joins its thread) does not hang.
    let open = open;
    let mut answer = pin!(writer.submit_async(noting("work")));
    assert!(poll_once(answer.as_mut()).is_pending(), "queued");
    wait_until("the commit to start", WAIT_MAX, || events(&seen).contains(&"commit".into()));
    assert!(poll_once(answer.as_mut()).is_pending(), "answered before its commit ended");
    open.send(()).expect("the commit waits");
    assert_eq!(ready("the answer", answer), Ok("work"));
    assert_eq!(events(&seen), ["begin", "work", "commit"]);
    assert_eq!(writer.stats(), GroupStats { groups_committed: 1, requests_committed: 1 });
}

#[test]
fn an_async_caller_of_a_failed_group_gets_the_failure_and_the_writer_goes_on() {
    let cases = [
        (Log { fail_commit: true, ..Log::default() }, "disk full"),
        (Log { fail_begin: true, ..Log::default() }, "no begin"),
    ];
    for (log, why) in cases {
        let writer = writer(log);
        assert_eq!(ready(why, pin!(writer.submit_async(|_: &mut Log| 1))), Err(failure(why)));
        let next = ready(why, pin!(writer.submit_async(|_: &mut Log| 2)));
        assert_eq!(next, Err(failure(why)), "{why}: the writer goes on");
        assert_eq!(writer.stats(), GroupStats::default(), "{why}: nothing committed");
    }
}

/// The queue holds `queue_max` requests for async callers as for threads (one limit):
/// with the writer held, the caller at the limit is queued, so its work runs although it
/// gave up its future; the one past it waits for room, so its work never runs.
#[test]
fn an_async_caller_at_the_limit_is_queued_and_one_past_it_is_not() {
    let (writer, held) =
        held(Log::default(), GroupLimits { queue_max: 2, group_max: 8 }, Then::Finish);
    let mut first = pin!(writer.submit_async(noting("first")));
    assert!(poll_once(first.as_mut()).is_pending());
    let mut at_the_limit = Box::pin(writer.submit_async(noting("at the limit")));
    assert!(poll_once(at_the_limit.as_mut()).is_pending());
    let mut past_it = Box::pin(writer.submit_async(noting("past the limit")));
    assert!(poll_once(past_it.as_mut()).is_pending());
    drop((at_the_limit, past_it));
    let (log, held_answer) = held.release();
    assert_eq!(held_answer, Ok(()));
    assert_eq!(ready("the first queued", first), Ok("first"));
    assert_eq!(writer.submit(noting("after")), Ok("after"), "queued after the dropped two");
    assert_eq!(worked(&log), ["held", "first", "at the limit", "after"]);
}

/// A caller past the limit sleeps until the writer takes a group off the queue, then
/// queues and is answered (its wake-up comes from the writer, not from polling).
#[test]
fn a_caller_past_the_limit_waits_for_room_and_is_answered() {
    let (writer, held) =
        held(Log::default(), GroupLimits { queue_max: 1, group_max: 1 }, Then::Finish);
    let mut queued = pin!(writer.submit_async(noting("queued")));
    assert!(poll_once(queued.as_mut()).is_pending());
    let mut waiting = pin!(writer.submit_async(noting("waiting")));
    assert!(poll_once(waiting.as_mut()).is_pending(), "no room: it waits");
    let (log, held_answer) = held.release();
    assert_eq!(held_answer, Ok(()));
    assert_eq!(ready("the caller past the limit", waiting), Ok("waiting"));
    assert_eq!(ready("the queued caller", queued), Ok("queued"));
    assert_eq!(worked(&log), ["held", "queued", "waiting"]);
    assert_eq!(writer.stats(), GroupStats { groups_committed: 3, requests_committed: 3 });
}

#[test]
fn a_stopped_writer_answers_an_async_caller_at_once() {
    let writer = writer(Log { stop_after_failure: true, ..Log::default() });
    let lost = writer.submit(|_: &mut Log| -> u8 { panic!("a bug in the work") });
    assert_eq!(lost, Err(CommitError::Lost));
    assert_eq!(writer.submit(|_: &mut Log| 1), Err(CommitError::Stopped), "the writer is gone");
    let mut answer = pin!(writer.submit_async(|_: &mut Log| 2));
    assert_eq!(poll_once(answer.as_mut()), Poll::Ready(Err(CommitError::Stopped)));
}

/// The writer stops (a failed group, and its committer says stop) while one caller is
/// queued and another waits for room: both are answered `Stopped`, neither waits on.
#[test]
fn callers_queued_or_waiting_for_room_when_the_writer_stops_are_answered_stopped() {
    let log = Log { stop_after_failure: true, ..Log::default() };
    let (writer, held) = held(log, GroupLimits { queue_max: 1, group_max: 1 }, Then::Panic);
    let mut queued = pin!(writer.submit_async(noting("queued")));
    assert!(poll_once(queued.as_mut()).is_pending());
    let mut waiting = pin!(writer.submit_async(noting("waiting")));
    assert!(poll_once(waiting.as_mut()).is_pending(), "no room: it waits");
    let (log, held_answer) = held.release();
    assert_eq!(held_answer, Err(CommitError::Lost), "the held work panicked");
    assert_eq!(ready("the caller waiting for room", waiting), Err(CommitError::Stopped));
    assert_eq!(ready("the queued caller", queued), Err(CommitError::Stopped));
    assert_eq!(worked(&log), ["held"], "nothing ran after the failure");
}

/// A future dropped after its work was queued: the work runs and commits with its group,
/// the other caller of that group gets its answer, and the writer takes the next group
/// (it would stop after any failure here).
#[test]
fn a_future_dropped_after_it_queued_leaves_its_group_and_the_writer_answered() {
    let log = Log { stop_after_failure: true, ..Log::default() };
    let (writer, held) = held(log, GroupLimits::default(), Then::Finish);
    let mut given_up = Box::pin(writer.submit_async(noting("given up")));
    assert!(poll_once(given_up.as_mut()).is_pending());
    let mut kept = pin!(writer.submit_async(noting("kept")));
    assert!(poll_once(kept.as_mut()).is_pending());
    drop(given_up);
    let (log, held_answer) = held.release();
    assert_eq!(held_answer, Ok(()));
    assert_eq!(ready("the caller that kept its future", kept), Ok("kept"));
    assert_eq!(writer.submit(noting("after")), Ok("after"));
    assert_eq!(worked(&log), ["held", "given up", "kept", "after"]);
    let groups = GroupStats { groups_committed: 3, requests_committed: 4 };
    assert_eq!(writer.stats(), groups, "the given-up work committed with its group");
}

/// Async callers on one runtime thread, most of them past the queue limit, while the
/// writer is held by work that only the last task on that thread releases, once every
/// caller has made its first try: a caller that blocked the thread waiting for room would
/// keep that task from ever running. All are answered, and they shared commits.
#[test]
fn callers_past_the_limit_never_park_their_runtime_thread() {
    const CALLERS: usize = 64;
    let limits = GroupLimits { queue_max: 4, group_max: 4 };
    let writer = Arc::new(GroupCommit::start("one-thread", Log::default(), limits).expect("ok"));
    let on_the_thread = writer.clone();
    let answers = on_one_thread(async move {
        let (release, released) = channel::<()>();
        let holder = on_the_thread.clone();
        let hold = move |_: &mut Log| {
            let _ = released.recv();
            0
        };
        let mut callers = vec![tokio::spawn(async move { holder.submit_async(hold).await })];
        let tried = Arc::new(AtomicUsize::new(0));
        for i in 1..=CALLERS {
            let (writer, tried) = (on_the_thread.clone(), tried.clone());
            callers.push(tokio::spawn(async move {
                tried.fetch_add(1, Ordering::Relaxed);
                writer.submit_async(move |_: &mut Log| i).await
            }));
        }
        tokio::spawn(async move {
            while tried.load(Ordering::Relaxed) < CALLERS {
                tokio::task::yield_now().await;
            }
            release.send(()).expect("the writer holds its first group");
        });
        let mut answers = Vec::new();
        for caller in callers {
            answers.push(caller.await.expect("a caller's task"));
        }
        answers
    });
    assert_eq!(answers, (0..=CALLERS).map(Ok).collect::<Vec<_>>());
    let stats = writer.stats();
    assert_eq!(stats.requests_committed, CALLERS as u64 + 1);
    assert!(stats.groups_committed < stats.requests_committed, "shared commits: {stats:?}");
}

/// A job that panics in the middle of its group: the jobs before it and after it are
/// answered `Failed` alike (the writer goes on: never `Stopped`), the panicking one
/// `Lost`; the next group commits.
#[test]
fn the_jobs_after_a_panicking_job_of_its_group_are_answered_failed() {
    let (writer, held) = held(Log::default(), GroupLimits::default(), Then::Finish);
    let mut before = pin!(writer.submit_async(noting("before")));
    let mut panics = pin!(writer.submit_async(|_: &mut Log| -> u8 { panic!("a bug") }));
    let mut after = pin!(writer.submit_async(noting("after")));
    for queued in [poll_once(before.as_mut()).is_pending(), poll_once(panics.as_mut()).is_pending()]
    {
        assert!(queued, "queued behind the held group");
    }
    assert!(poll_once(after.as_mut()).is_pending(), "queued behind the held group");
    let (log, first) = held.release();
    assert_eq!(first, Ok(()));
    let panicked = ready("the panicking job", panics);
    assert_eq!(panicked, Err(CommitError::Lost));
    let (before, after) = (ready("before", before), ready("after", after));
    assert!(matches!(before, Err(CommitError::Failed(_))), "{before:?}");
    assert_eq!(after.map_err(|e| e.to_string()), before.map_err(|e| e.to_string()));
    assert_eq!(ready("the next group", pin!(writer.submit_async(noting("next")))), Ok("next"));
    assert_eq!(worked(&log), ["held", "before", "next"], "the job after the panic never ran");
}

/// While the writer is stuck on one group, async callers that give up and try again do
/// not pile up wake-ups: what waits for room is one per caller waiting now.
#[test]
fn callers_that_give_up_waiting_for_room_leave_nothing_behind() {
    let limits = GroupLimits { queue_max: 1, group_max: 1 };
    let (writer, held) = held(Log::default(), limits, Then::Finish);
    let mut queued = pin!(writer.submit_async(noting("queued")));
    assert!(poll_once(queued.as_mut()).is_pending(), "takes the queue's one place");
    for _ in 0..10_000 {
        let mut gave_up = pin!(writer.submit_async(noting("gave up")));
        assert!(poll_once(gave_up.as_mut()).is_pending(), "waits for room");
    }
    let mut waiting = pin!(writer.submit_async(noting("waiting")));
    assert!(poll_once(waiting.as_mut()).is_pending(), "waits for room");
    assert_eq!(writer.waiting_for_room(), 1, "the callers that gave up left theirs");
    let (_, first) = held.release();
    assert_eq!(first, Ok(()));
    assert_eq!(ready("queued", queued), Ok("queued"));
    assert_eq!(ready("waiting", waiting), Ok("waiting"));
}
