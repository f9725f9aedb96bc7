//! The polls both benches time: one poll, and a poll while pending then another.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

/// Polls `future` once with a no-op waker.
pub(crate) fn poll_once<F: Future>(future: F) -> Poll<F::Output> {
    let future = pin!(future);
    future.poll(&mut Context::from_waker(Waker::noop()))
}

/// Polls while pending (the waker is stored), runs `complete`, polls again.
pub(crate) fn pending_then_ready<F: Future>(future: F, complete: impl FnOnce()) -> Poll<F::Output> {
    let mut future = pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    assert!(future.as_mut().poll(&mut cx).is_pending());
    complete();
    future.as_mut().poll(&mut cx)
}
