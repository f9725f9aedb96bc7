//! Callbacks run exactly once, wherever and whenever they were registered.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;

use idem_future::{Completion, promise};

fn counter() -> (Arc<AtomicUsize>, impl Fn() -> usize) {
    let count = Arc::new(AtomicUsize::new(0));
    let read = count.clone();
    (count, move || read.load(Ordering::SeqCst))
}

#[test]
fn registered_before_completion_runs_on_the_completing_thread() {
    let (completer, future) = promise::<u32, ()>();
    let ran_on = Arc::new(Mutex::new(None));
    let slot = ran_on.clone();
    future.on_complete(move |how| {
        assert_eq!(how, Completion::Completed);
        *slot.lock().expect("not poisoned") = Some(thread::current().id());
    });
    let completing = thread::spawn(move || {
        completer.complete(1).expect("wins");
        thread::current().id()
    })
    .join()
    .expect("completing thread");
    assert_eq!(*ran_on.lock().expect("not poisoned"), Some(completing));
}

#[test]
fn registered_after_completion_runs_at_once_on_this_thread() {
    let (completer, future) = promise::<u32, ()>();
    completer.cancel();
    let (count, runs) = counter();
    let here = thread::current().id();
    completer.on_complete(move |how| {
        assert_eq!((how, thread::current().id()), (Completion::Cancelled, here));
        count.fetch_add(1, Ordering::SeqCst);
    });
    assert_eq!(runs(), 1);
    // After the value was taken, late callbacks still learn how it finished.
    assert_eq!(future.wait(), Err(idem_future::Error::Cancelled));
    let (count, runs) = counter();
    completer.on_complete(move |how| {
        assert_eq!(how, Completion::Cancelled);
        count.fetch_add(1, Ordering::SeqCst);
    });
    assert_eq!(runs(), 1);
}

#[test]
fn each_callback_runs_once_despite_repeated_completions() {
    let (completer, _future) = promise::<u32, ()>();
    let (count, runs) = counter();
    for _ in 0..5 {
        let count = count.clone();
        completer.on_complete(move |_| {
            count.fetch_add(1, Ordering::SeqCst);
        });
    }
    for v in 0..3 {
        let _ = completer.complete(v);
        let _ = completer.cancel();
    }
    drop(completer);
    assert_eq!(runs(), 5, "five callbacks, once each");
}

#[test]
fn callback_registered_inside_a_callback_runs_once() {
    let (completer, future) = promise::<u32, ()>();
    let (count, runs) = counter();
    let again = completer.clone();
    completer.on_complete(move |_| {
        // The promise is complete: this runs at once, on this thread, with no lock held.
        again.on_complete(move |how| {
            assert_eq!(how, Completion::Completed);
            count.fetch_add(1, Ordering::SeqCst);
        });
    });
    completer.complete(1).expect("wins");
    assert_eq!(runs(), 1);
    assert_eq!(future.wait(), Ok(1));
}

#[test]
fn callback_may_complete_another_promise() {
    let (first, first_future) = promise::<u32, ()>();
    let (second, second_future) = promise::<u32, ()>();
    first_future.on_complete(move |_| {
        second.complete(2).expect("the chained promise wins");
    });
    first.complete(1).expect("wins");
    assert_eq!(second_future.wait(), Ok(2));
    assert_eq!(first_future.wait(), Ok(1));
}

#[test]
fn a_panicking_callback_does_not_stop_the_others_or_poison() {
    let (completer, future) = promise::<u32, ()>();
    let (count, runs) = counter();
    let before = count.clone();
    completer.on_complete(move |_| {
        before.fetch_add(1, Ordering::SeqCst);
    });
    completer.on_complete(|_| panic!("callback failed"));
    completer.on_complete(move |_| {
        count.fetch_add(1, Ordering::SeqCst);
    });
    let result = catch_unwind(AssertUnwindSafe(|| completer.complete(9)));
    let payload = result.expect_err("the callback's panic is resumed on the completing thread");
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"callback failed"));
    assert_eq!(runs(), 2, "both other callbacks ran");
    assert!(completer.is_completed(), "the completion took effect");
    assert_eq!(completer.complete(10), Err(10), "and still wins against later writes");
    assert_eq!(future.wait(), Ok(9), "the outcome is readable: nothing is poisoned");
}

#[test]
fn abandonment_runs_callbacks() {
    let (completer, _future) = promise::<u32, ()>();
    let (count, runs) = counter();
    completer.on_complete(move |how| {
        assert_eq!(how, Completion::Abandoned);
        count.fetch_add(1, Ordering::SeqCst);
    });
    drop(completer);
    assert_eq!(runs(), 1);
}
