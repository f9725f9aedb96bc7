//! The queue's places, taken before a message id is claimed.
//!
//! A submission takes a place in the queue first, and claims its message id only with a
//! place in hand, so a claim never waits for room it may not get. Without it, a
//! resubmission that found the queue full had already recovered the id of a message
//! waiting in that queue past its lease: the waiting job then lost its lease and was
//! dropped as superseded, the resubmission was refused, and the message was never sent,
//! its producer told `Accepted` and a later retry `DuplicateInFlight`.
//!
//! RACE (submitters taking the last place): two submissions see one place left; one
//! read-modify-write takes it, so at most `capacity` places are ever taken and the
//! bounded channel behind them never refuses a job for room. Loom model:
//! `two_submitters_one_last_place`.

#[cfg(not(loom))]
use std::sync::atomic::{AtomicUsize, Ordering};

#[cfg(loom)]
use loom::sync::atomic::{AtomicUsize, Ordering};

/// The places of a queue of `capacity` jobs: taken by a submission, freed when a worker
/// takes its job off the queue (or the submission queues nothing).
#[doc(hidden)]
#[derive(Debug)]
pub struct Places {
    taken: AtomicUsize,
    capacity: usize,
}

impl Places {
    /// A queue of `capacity` places, none taken.
    pub fn new(capacity: usize) -> Self {
        Self { taken: AtomicUsize::new(0), capacity }
    }

    /// Takes a place; `false` if all `capacity` are taken.
    pub fn take(&self) -> bool {
        // ORDERING: Relaxed. The count publishes nothing: a job reaches its worker
        // through the channel, which orders it.
        let taken = self.taken.fetch_add(1, Ordering::Relaxed);
        if taken < self.capacity {
            return true;
        }
        self.free();
        false
    }

    /// Frees a place.
    pub fn free(&self) {
        // ORDERING: Relaxed, as in `take`.
        self.taken.fetch_sub(1, Ordering::Relaxed);
    }

    /// How many places are taken.
    pub fn taken(&self) -> usize {
        // ORDERING: Relaxed: a count for tests and metrics.
        self.taken.load(Ordering::Relaxed)
    }
}
