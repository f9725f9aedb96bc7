//! Loom models of the notifier's own race: submissions taking the queue's last place.
//! Run with `cargo xtask loom idem-notify`.
//!
//! The places run on loom's atomics (`--cfg loom`), so loom explores every interleaving
//! of the real code. The id store's races are idem-core's models.
#![cfg(loom)]

use std::sync::Arc;

use idem_notify::Places;
use loom::thread;

/// Race: two submissions see one place left and take it at once.
/// Invariant: exactly one gets it (a queue of one never holds two jobs), the other is
/// refused and leaves nothing taken; once the winner's job is off the queue, the place
/// is free again.
#[test]
fn two_submitters_one_last_place() {
    loom::model(|| {
        let places = Arc::new(Places::new(1));
        let other = {
            let places = places.clone();
            thread::spawn(move || places.take())
        };
        let mine = places.take();
        let theirs = other.join().expect("the other submitter");
        assert!(mine ^ theirs, "exactly one takes the last place: {mine} {theirs}");
        assert_eq!(places.taken(), 1);
        places.free();
        assert!(places.take(), "the freed place is taken again");
    });
}

/// Race: a worker frees the one place (its job off the queue) while a submission tries to
/// take it.
/// Invariant: the submission gets it or is refused, and nothing is taken twice: after
/// both, the count is one if it got it, else zero.
#[test]
fn a_place_freed_while_a_submitter_takes_it() {
    loom::model(|| {
        let places = Arc::new(Places::new(1));
        assert!(places.take(), "the queued job's place");
        let worker = {
            let places = places.clone();
            thread::spawn(move || places.free())
        };
        let got = places.take();
        worker.join().expect("the worker");
        assert_eq!(places.taken(), usize::from(got));
    });
}
