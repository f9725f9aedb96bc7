//! A completer learns that every reader is gone (`is_closed`, and the `closed()` future),
//! as tokio's oneshot sender does; a single-owner future tells when it is terminated.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll};

use idem_future::promise;

use crate::CountingWaker;

#[test]
fn dropping_the_only_reader_closes_the_promise() {
    let (completer, future) = promise::<u32, ()>();
    assert!(!completer.is_closed());
    drop(future);
    assert!(completer.is_closed());
    assert!(completer.clone().is_closed(), "final, and seen by every completer");
    assert_eq!(completer.complete(1), Ok(()), "completing still works: read by no one");
}

#[test]
fn a_shared_promise_closes_only_when_its_last_clone_goes() {
    let (completer, future) = promise::<u32, ()>();
    let shared = future.shared();
    assert!(!completer.is_closed(), "turning the future into a shared one keeps a reader");
    let clones: Vec<_> = (0..3).map(|_| shared.clone()).collect();
    drop(shared);
    for (left, clone) in clones.into_iter().enumerate().rev() {
        assert!(!completer.is_closed(), "{} readers left", left + 1);
        drop(clone);
    }
    assert!(completer.is_closed());
}

/// A shared future's pending callback holds the promise (it reads the outcome when it
/// runs) but is not a reader: it does not keep the promise open.
#[test]
fn a_pending_shared_callback_is_not_a_reader() {
    let (completer, future) = promise::<u32, ()>();
    let shared = future.shared();
    let (tx, rx) = std::sync::mpsc::channel();
    shared.on_complete(move |outcome| tx.send(outcome).expect("receiver alive"));
    drop(shared);
    assert!(completer.is_closed(), "no reader left, only a callback");
    completer.complete(4).expect("first");
    assert_eq!(rx.try_recv(), Ok(Ok(4)), "the callback still ran, with the outcome");
}

#[test]
fn a_reader_that_took_its_outcome_is_gone() {
    let (completer, future) = promise::<u32, ()>();
    completer.complete(3).expect("first");
    assert_eq!(future.wait(), Ok(3));
    assert!(completer.is_closed(), "wait consumed the reader");
}

#[test]
fn closed_is_pending_while_a_reader_lives_and_wakes_once_when_it_goes() {
    let (completer, future) = promise::<u32, ()>();
    let mut closed = pin!(completer.closed());
    let (counter, waker) = CountingWaker::new();
    let mut cx = Context::from_waker(&waker);
    assert_eq!(closed.as_mut().poll(&mut cx), Poll::Pending);
    assert_eq!(closed.as_mut().poll(&mut cx), Poll::Pending, "a second poll, same waker");
    assert_eq!(counter.count(), 0);
    drop(future);
    assert_eq!(counter.count(), 1, "the last reader's drop woke it, once");
    assert_eq!(closed.as_mut().poll(&mut cx), Poll::Ready(()));
    // A closed() made after the fact is ready at once.
    assert_eq!(pin!(completer.closed()).poll(&mut cx), Poll::Ready(()));
}

#[test]
fn a_dropped_closed_future_leaves_no_waker_behind() {
    let (completer, future) = promise::<u32, ()>();
    let (counter, waker) = CountingWaker::new();
    let mut cx = Context::from_waker(&waker);
    for _ in 0..1000 {
        let mut closed = pin!(completer.closed());
        assert_eq!(closed.as_mut().poll(&mut cx), Poll::Pending);
    }
    drop(future);
    assert_eq!(counter.count(), 0, "no dropped Closed future was still registered");
}

#[test]
fn is_terminated_turns_true_when_the_outcome_is_taken() {
    let (completer, future) = promise::<u32, ()>();
    let mut future = pin!(future);
    let (_, waker) = CountingWaker::new();
    let mut cx = Context::from_waker(&waker);
    assert_eq!(future.as_mut().poll(&mut cx), Poll::Pending);
    assert!(!future.is_terminated(), "pending");
    completer.complete(9).expect("first");
    assert!(!future.is_terminated(), "complete, not yet read");
    assert_eq!(future.as_mut().poll(&mut cx), Poll::Ready(Ok(9)));
    assert!(future.is_terminated());
}
