//! Wakers that misbehave: one that panics when woken, one whose drop re-enters the promise
//! (an executor's waker that owns its task, and the task a handle on the promise). The
//! promise still serves everyone else, frees everything, and never deadlocks.

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use idem_future::promise;

use crate::{CountingWaker, Tracked};

/// How long a scenario may take before it counts as deadlocked.
const WAIT_LIMIT: Duration = Duration::from_secs(10);

/// A waker that panics when woken.
struct Panicking;

impl Wake for Panicking {
    fn wake(self: Arc<Self>) {
        panic!("a waker that panics");
    }
}

/// A waker that owns something (a handle on the promise) and drops it with itself.
#[derive(Default)]
struct Owning(Mutex<Option<Box<dyn Send>>>);

impl Wake for Owning {
    fn wake(self: Arc<Self>) {}
}

fn poll<F: Future + Unpin>(future: &mut F, waker: &Waker) -> Poll<F::Output> {
    Pin::new(future).poll(&mut Context::from_waker(waker))
}

/// A waker whose last clone, once dropped, drops `owned`.
fn owning(owned: impl Send + 'static) -> Waker {
    let waker = Arc::new(Owning::default());
    *waker.0.lock().expect("not poisoned") = Some(Box::new(owned));
    Waker::from(waker)
}

/// Runs `scenario` on a thread of its own; whether it finished within `WAIT_LIMIT` (a
/// deadlock fails the test instead of hanging it).
fn finishes(scenario: impl FnOnce() + Send + 'static) -> bool {
    let (done, finished) = mpsc::channel();
    std::thread::spawn(move || {
        scenario();
        let _ = done.send(());
    });
    finished.recv_timeout(WAIT_LIMIT).is_ok()
}

fn counted_callback(
    runs: &Arc<AtomicUsize>,
) -> impl FnOnce(idem_future::Completion) + Send + use<> {
    let runs = runs.clone();
    move |_| {
        runs.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn a_panicking_reader_waker_stops_neither_the_other_readers_nor_the_callbacks() {
    let (completer, future) = promise::<u32, ()>();
    let shared = future.shared();
    let (mut bad, mut good) = (shared.clone(), shared.clone());
    let (woken, good_waker) = CountingWaker::new();
    assert!(poll(&mut bad, &Waker::from(Arc::new(Panicking))).is_pending());
    assert!(poll(&mut good, &good_waker).is_pending());
    let runs = Arc::new(AtomicUsize::new(0));
    completer.on_complete(counted_callback(&runs));
    let completed = catch_unwind(AssertUnwindSafe(|| completer.complete(1)));
    assert!(completed.is_err(), "the waker's panic is passed on to the completer");
    assert!(completer.is_completed());
    assert_eq!((runs.load(Ordering::SeqCst), woken.count()), (1, 1));
    assert!(matches!(poll(&mut good, &good_waker), Poll::Ready(Ok(1))));
}

#[test]
fn a_panicking_owner_waker_stops_neither_the_callbacks_nor_the_readers() {
    let (completer, mut future) = promise::<u32, ()>();
    assert!(poll(&mut future, &Waker::from(Arc::new(Panicking))).is_pending());
    let runs = Arc::new(AtomicUsize::new(0));
    completer.on_complete(counted_callback(&runs));
    let completed = catch_unwind(AssertUnwindSafe(|| completer.complete(1)));
    assert!(completed.is_err(), "the waker's panic is passed on to the completer");
    assert_eq!(runs.load(Ordering::SeqCst), 1, "the callback ran once");
    assert!(matches!(poll(&mut future, &Waker::noop().clone()), Poll::Ready(Ok(1))));
}

#[test]
fn a_panicking_closed_waker_wakes_the_others_and_leaks_nothing() {
    let (completer, future) = promise::<Tracked, ()>();
    let (mut bad, mut good) = (completer.closed(), completer.closed());
    let (woken, good_waker) = CountingWaker::new();
    assert!(poll(&mut bad, &Waker::from(Arc::new(Panicking))).is_pending());
    assert!(poll(&mut good, &good_waker).is_pending());
    let drops = Arc::new(AtomicUsize::new(0));
    assert!(completer.complete(Tracked(drops.clone())).is_ok());
    let dropped = catch_unwind(AssertUnwindSafe(|| drop(future)));
    assert!(dropped.is_err(), "the waker's panic is passed on to the last reader's drop");
    assert_eq!(woken.count(), 1, "the other closed future was woken");
    drop((bad, good, completer));
    assert_eq!(drops.load(Ordering::SeqCst), 1, "the value was freed with the promise");
}

#[test]
fn a_waker_dropped_by_forgetting_it_may_reenter_the_promise() {
    assert!(
        finishes(|| {
            let (completer, future) = promise::<u32, ()>();
            let shared = future.shared();
            let mut reader = shared.clone();
            // The lists hold the only clone of a waker that owns another reader.
            assert!(poll(&mut reader, &owning(shared.clone())).is_pending());
            drop(reader); // forgets its waker, whose drop drops the other reader
            drop((shared, completer));
        }),
        "deadlocked: a waker was dropped under the promise's lock"
    );
}

#[test]
fn a_waker_dropped_by_a_repoll_may_reenter_the_promise() {
    assert!(
        finishes(|| {
            let (completer, future) = promise::<u32, ()>();
            let mut closed = completer.closed();
            assert!(poll(&mut closed, &owning(completer.closed())).is_pending());
            // A poll with another waker replaces (drops) the first, which drops a handle.
            assert!(poll(&mut closed, &Waker::noop().clone()).is_pending());
            drop((closed, future, completer));
        }),
        "deadlocked: a waker was dropped under the promise's lock"
    );
}
