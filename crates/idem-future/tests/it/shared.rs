//! The shareable future: many threads and tasks wait on one completion.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::Duration;

use idem_future::{Error, promise};

#[test]
fn many_threads_see_the_winner() {
    let (completer, future) = promise::<String, ()>();
    let shared = future.shared();
    let readers: Vec<_> = (0..8)
        .map(|_| {
            let reader = shared.clone();
            thread::spawn(move || reader.wait())
        })
        .collect();
    let racers: Vec<_> = (0..4)
        .map(|i| {
            let c = completer.clone();
            thread::spawn(move || c.complete(format!("writer {i}")).is_ok())
        })
        .collect();
    let wins = racers.into_iter().filter_map(|r| r.join().expect("racer").then_some(())).count();
    assert_eq!(wins, 1);
    let winner = shared.try_get().expect("complete").expect("a value");
    for reader in readers {
        assert_eq!(reader.join().expect("reader"), Ok(winner.clone()));
    }
}

#[test]
fn many_tasks_are_all_woken() {
    let runtime = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
    let (completer, future) = promise::<u32, ()>();
    let shared = future.shared();
    runtime.block_on(async move {
        let tasks: Vec<_> = (0..16).map(|_| tokio::spawn(shared.clone())).collect();
        tokio::task::yield_now().await;
        completer.complete(11).expect("wins");
        for task in tasks {
            assert_eq!(task.await.expect("task"), Ok(11));
        }
    });
}

#[test]
fn shared_callbacks_get_the_outcome_once() {
    let (completer, future) = promise::<u32, &'static str>();
    let shared = future.shared();
    let seen = Arc::new(AtomicUsize::new(0));
    for _ in 0..3 {
        let seen = seen.clone();
        shared.on_complete(move |outcome| {
            assert_eq!(outcome, Err(Error::Failed("nope")));
            seen.fetch_add(1, Ordering::SeqCst);
        });
    }
    completer.fail("nope").expect("wins");
    let late = seen.clone();
    shared.on_complete(move |_| {
        late.fetch_add(1, Ordering::SeqCst);
    });
    assert_eq!(seen.load(Ordering::SeqCst), 4);
}

#[test]
fn shared_wait_timeout_and_try_get() {
    let (completer, future) = promise::<u32, ()>();
    let shared = future.shared();
    assert_eq!(shared.try_get(), None);
    assert_eq!(shared.wait_timeout(Duration::from_millis(10)), None);
    drop(completer);
    assert_eq!(shared.wait_timeout(Duration::from_secs(5)), Some(Err(Error::Abandoned)));
    assert_eq!(shared.clone().wait(), Err(Error::Abandoned));
}

/// Sharing a future whose promise already finished: every clone reads the outcome at once,
/// as often as it likes.
#[test]
fn sharing_after_completion_reads_the_outcome() {
    let (completer, future) = promise::<u32, &str>();
    completer.fail("late").expect("first");
    let shared = future.shared();
    let clone = shared.clone();
    assert_eq!(shared.try_get(), Some(Err(Error::Failed("late"))));
    assert_eq!(clone.wait_timeout(Duration::ZERO), Some(Err(Error::Failed("late"))));
    assert_eq!(clone.try_get(), Some(Err(Error::Failed("late"))), "read again");
}
