//! idem-future's integration tests: one binary, one module per concern.

mod behaviour;
mod callbacks;
mod closed;
mod model;
mod reentry;
mod shared;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Wake, Waker};

/// A waker that counts its wake-ups.
#[derive(Default)]
pub(crate) struct CountingWaker(AtomicUsize);

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

impl CountingWaker {
    pub(crate) fn new() -> (Arc<Self>, Waker) {
        let counter = Arc::new(Self::default());
        (counter.clone(), Waker::from(counter))
    }

    pub(crate) fn count(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

/// A value that counts how often it was dropped.
#[derive(Debug)]
pub(crate) struct Tracked(pub(crate) Arc<AtomicUsize>);

impl Drop for Tracked {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}
