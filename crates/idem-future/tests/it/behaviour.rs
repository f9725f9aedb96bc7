//! One test per documented behaviour of completers and the single-owner future.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use idem_future::{Completer, Error, PromiseFuture, SharedFuture, promise};

use crate::{CountingWaker, Tracked};

type P = (Completer<u32, &'static str>, PromiseFuture<u32, &'static str>);

#[derive(Debug, Clone, Copy)]
enum Write {
    Complete(u32),
    Fail(&'static str),
    Cancel,
}

/// Applies `write`; returns whether it won.
fn apply(c: &Completer<u32, &'static str>, write: Write) -> bool {
    match write {
        Write::Complete(v) => c.complete(v).map_err(|back| assert_eq!(back, v)).is_ok(),
        Write::Fail(e) => c.fail(e).map_err(|back| assert_eq!(back, e)).is_ok(),
        Write::Cancel => c.cancel(),
    }
}

#[track_caller]
fn check(writes: &[Write], expected: Result<u32, Error<&'static str>>) {
    let (completer, future): P = promise();
    let clones: Vec<_> = writes.iter().map(|_| completer.clone()).collect();
    let won: Vec<bool> = writes.iter().zip(&clones).map(|(w, c)| apply(c, *w)).collect();
    assert_eq!(won.iter().filter(|w| **w).count(), 1, "exactly one write wins: {writes:?}");
    assert!(won[0], "the first write wins");
    assert!(completer.is_completed() && future.is_completed());
    assert_eq!(future.wait(), expected, "{writes:?}");
}

#[test]
fn first_write_wins_table() {
    use Write::*;
    check(&[Complete(1), Complete(2)], Ok(1));
    check(&[Complete(1), Fail("late"), Cancel], Ok(1));
    check(&[Fail("boom"), Complete(2)], Err(Error::Failed("boom")));
    check(&[Cancel, Complete(2), Fail("late")], Err(Error::Cancelled));
    check(&[Cancel, Cancel], Err(Error::Cancelled));
}

#[test]
fn loser_value_is_handed_back_not_dropped() {
    let (completer, future) = promise::<Tracked, ()>();
    let drops = Arc::new(AtomicUsize::new(0));
    completer.complete(Tracked(drops.clone())).expect("first wins");
    let back = completer.complete(Tracked(drops.clone())).expect_err("second loses");
    assert_eq!(drops.load(Ordering::SeqCst), 0, "the loser's value is alive in our hands");
    drop(back);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    drop(future);
    drop(completer);
    assert_eq!(drops.load(Ordering::SeqCst), 2, "the winner's value is dropped once");
}

#[test]
fn completion_before_first_poll() {
    let (completer, future) = promise::<u32, ()>();
    completer.complete(7).expect("wins");
    assert_eq!(futures::executor::block_on(future), Ok(7));
}

#[test]
fn completion_after_first_poll_wakes_the_waker() {
    let (completer, future) = promise::<u32, ()>();
    let mut future = pin!(future);
    let (count, waker) = CountingWaker::new();
    let mut cx = Context::from_waker(&waker);
    assert!(future.as_mut().poll(&mut cx).is_pending());
    assert_eq!(count.count(), 0);
    completer.complete(8).expect("wins");
    assert_eq!(count.count(), 1, "completion wakes the registered waker once");
    assert_eq!(future.as_mut().poll(&mut cx), Poll::Ready(Ok(8)));
}

#[test]
fn waker_replaced_between_polls_wakes_only_the_latest() {
    let (completer, future) = promise::<u32, ()>();
    let mut future = pin!(future);
    let (old, old_waker) = CountingWaker::new();
    let (new, new_waker) = CountingWaker::new();
    assert!(future.as_mut().poll(&mut Context::from_waker(&old_waker)).is_pending());
    assert!(future.as_mut().poll(&mut Context::from_waker(&new_waker)).is_pending());
    completer.complete(1).expect("wins");
    assert_eq!((old.count(), new.count()), (0, 1), "the stale waker must not be woken");
}

/// The promise holds a clone of the latest poll's waker: the replaced clone is dropped at
/// the swap, the latest one with the promise, whether it completed or not. (Counted by the
/// waker's `Arc`: the test's handle and the `Waker` itself make two.)
#[test]
fn stored_wakers_are_dropped_when_replaced_and_with_the_promise() {
    for complete in [false, true] {
        let (completer, future) = promise::<u32, ()>();
        let mut future = Box::pin(future);
        let (old, old_waker) = CountingWaker::new();
        let (new, new_waker) = CountingWaker::new();
        assert!(future.as_mut().poll(&mut Context::from_waker(&old_waker)).is_pending());
        assert_eq!(Arc::strong_count(&old), 3, "the first poll stored a clone");
        assert!(future.as_mut().poll(&mut Context::from_waker(&new_waker)).is_pending());
        assert_eq!(Arc::strong_count(&old), 2, "the swap dropped the old clone");
        assert_eq!(Arc::strong_count(&new), 3);
        if complete {
            completer.complete(1).expect("wins");
            assert_eq!(new.count(), 1);
        }
        drop(future);
        assert_eq!(Arc::strong_count(&new), 3, "a completer keeps the promise alive");
        drop(completer);
        assert_eq!(Arc::strong_count(&new), 2, "complete: {complete}: the clone went with it");
    }
}

#[test]
fn wait_timeout_expires_then_waits_again() {
    let (completer, future) = promise::<u32, ()>();
    let future = future.wait_timeout(Duration::from_millis(20)).expect_err("still pending");
    let future = future.try_get().expect_err("still pending");
    completer.complete(3).expect("wins");
    assert_eq!(future.wait_timeout(Duration::from_secs(5)).expect("ready"), Ok(3));
}

#[test]
fn blocking_wait_wakes_on_completion_from_another_thread() {
    let (completer, future) = promise::<u32, ()>();
    let started = std::sync::Arc::new(std::sync::Barrier::new(2));
    let reader = {
        let started = started.clone();
        std::thread::spawn(move || {
            started.wait();
            future.wait()
        })
    };
    // Completed while the reader is about to wait or waiting: either way it wakes.
    started.wait();
    completer.complete(4).expect("wins");
    assert_eq!(reader.join().expect("reader"), Ok(4));
}

#[test]
fn dropping_every_completer_abandons() {
    let (completer, future) = promise::<u32, ()>();
    let clone = completer.clone();
    drop(completer);
    assert!(!future.is_completed(), "one completer is still alive");
    drop(clone);
    assert!(future.is_completed());
    assert_eq!(future.wait(), Err(Error::Abandoned));
}

#[test]
fn abandonment_wakes_an_async_reader() {
    let (completer, future) = promise::<u32, ()>();
    let mut future = pin!(future);
    let (count, waker) = CountingWaker::new();
    assert!(future.as_mut().poll(&mut Context::from_waker(&waker)).is_pending());
    drop(completer);
    assert_eq!(count.count(), 1);
    assert_eq!(future.poll(&mut Context::from_waker(&waker)), Poll::Ready(Err(Error::Abandoned)));
}

#[test]
fn completed_then_dropped_completers_do_not_abandon() {
    let (completer, future) = promise::<u32, ()>();
    completer.complete(5).expect("wins");
    drop(completer);
    assert_eq!(future.wait(), Ok(5));
}

#[test]
fn dropping_the_future_drops_the_value_once() {
    let drops = Arc::new(AtomicUsize::new(0));
    let (completer, future) = promise::<Tracked, ()>();
    drop(future);
    completer.complete(Tracked(drops.clone())).expect("a dropped reader does not refuse");
    assert_eq!(drops.load(Ordering::SeqCst), 0);
    drop(completer);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}

#[test]
#[should_panic(expected = "polled after it returned Ready")]
fn polling_after_ready_panics() {
    let (completer, future) = promise::<u32, ()>();
    completer.complete(1).expect("wins");
    let mut future = pin!(future);
    let (_count, waker) = CountingWaker::new();
    let mut cx = Context::from_waker(&waker);
    assert_eq!(future.as_mut().poll(&mut cx), Poll::Ready(Ok(1)));
    let _ = future.as_mut().poll(&mut cx);
}

#[test]
#[should_panic(expected = "PromiseFuture::shared after it returned Ready")]
fn sharing_after_ready_panics() {
    let (completer, mut future) = promise::<u32, ()>();
    completer.complete(1).expect("wins");
    let (_count, waker) = CountingWaker::new();
    let mut cx = Context::from_waker(&waker);
    assert_eq!(std::pin::Pin::new(&mut future).poll(&mut cx), Poll::Ready(Ok(1)));
    // The outcome was moved out: a shared future would have nothing to read.
    let shared = future.shared();
    let _ = shared.try_get();
}

#[test]
fn errors_say_what_happened() {
    assert_eq!(Error::Failed("disk full").to_string(), "promise failed: disk full");
    assert_eq!(Error::<&str>::Cancelled.to_string(), "promise was cancelled");
    assert_eq!(
        Error::<&str>::Abandoned.to_string(),
        "every completer was dropped without completing"
    );
}

#[test]
fn public_types_are_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Completer<String, String>>();
    send_sync::<PromiseFuture<String, String>>();
    send_sync::<SharedFuture<String, String>>();
    send_sync::<Error<String>>();
}

#[test]
fn wait_timeout_at_zero_and_max() {
    let (completer, future) = promise::<u32, ()>();
    let future = future.wait_timeout(Duration::ZERO).expect_err("pending: given back at once");
    let shared = future.shared();
    assert_eq!(shared.wait_timeout(Duration::ZERO), None, "pending");
    completer.complete(5).expect("wins");
    assert_eq!(shared.wait_timeout(Duration::MAX), Some(Ok(5)), "no overflow, no wait");
    let (completer, future) = promise::<u32, ()>();
    completer.complete(6).expect("wins");
    assert_eq!(future.wait_timeout(Duration::MAX).expect("ready"), Ok(6));
}
