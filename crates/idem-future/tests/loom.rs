//! Loom models of the promise's races. Run with `cargo xtask loom idem-future`.
//!
//! Each model opens with the race it covers and the invariant it asserts. The promise
//! runs on loom's mutex, condition variable, atomics and `Arc` (the crate's `sync` shim),
//! so loom explores every interleaving of the real code and checks for leaks.
#![cfg(loom)]

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Wake, Waker};

use idem_future::{Error, promise};
use loom::sync::Arc;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;

/// A waker that counts its wake-ups (std `Arc` for `Wake`; the counter is loom's).
struct Counting(AtomicUsize);

impl Wake for Counting {
    fn wake(self: std::sync::Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn counting() -> (std::sync::Arc<Counting>, Waker) {
    let counter = std::sync::Arc::new(Counting(AtomicUsize::new(0)));
    (counter.clone(), Waker::from(counter))
}

/// Race: two completers and a canceller settle one promise at once.
/// Invariant: exactly one wins, and the reader sees the winner's outcome.
#[test]
fn racing_completers_one_winner() {
    loom::model(|| {
        let (completer, future) = promise::<u32, ()>();
        let racers: Vec<_> = [1, 2]
            .into_iter()
            .map(|v| {
                let c = completer.clone();
                thread::spawn(move || c.complete(v).is_ok().then_some(Ok(v)))
            })
            .collect();
        let cancelled = completer.cancel().then_some(Err(Error::Cancelled));
        let mut winners: Vec<_> = racers.into_iter().filter_map(|r| r.join().unwrap()).collect();
        winners.extend(cancelled);
        assert_eq!(winners.len(), 1, "winners: {winners:?}");
        assert_eq!(future.wait(), winners[0]);
    });
}

/// Race: a callback is registered while the promise completes.
/// Invariant: the callback runs exactly once, whichever side runs it.
#[test]
fn callback_races_completion() {
    loom::model(|| {
        let (completer, future) = promise::<u32, ()>();
        let runs = Arc::new(AtomicUsize::new(0));
        let completing = thread::spawn(move || completer.complete(1).is_ok());
        let counter = runs.clone();
        future.on_complete(move |_| {
            counter.fetch_add(1, Ordering::SeqCst);
        });
        assert!(completing.join().unwrap());
        assert_eq!(runs.load(Ordering::SeqCst), 1);
    });
}

/// Race: the reader polls twice with different wakers while the promise completes.
/// Invariant: if the last poll was pending, the completion woke that poll's waker, and
/// never the replaced one; either way the next poll is ready.
#[test]
fn poll_races_completion() {
    loom::model(|| {
        let (completer, future) = promise::<u32, ()>();
        let completing = thread::spawn(move || completer.complete(5).is_ok());
        let mut future = pin!(future);
        let (first, first_waker) = counting();
        let (second, second_waker) = counting();
        let mut cx = Context::from_waker(&first_waker);
        if let Poll::Ready(outcome) = future.as_mut().poll(&mut cx) {
            assert_eq!(outcome, Ok(5));
            assert!(completing.join().unwrap());
            return;
        }
        let mut cx = Context::from_waker(&second_waker);
        let last = future.as_mut().poll(&mut cx);
        assert!(completing.join().unwrap());
        match last {
            Poll::Ready(outcome) => assert_eq!(outcome, Ok(5)),
            Poll::Pending => {
                assert_eq!(second.0.load(Ordering::SeqCst), 1, "the latest waker is woken");
                assert_eq!(first.0.load(Ordering::SeqCst), 0, "the replaced waker is not");
                assert_eq!(future.as_mut().poll(&mut cx), Poll::Ready(Ok(5)));
            }
        }
    });
}

/// Race: the reader drops the future while a completer stores a value.
/// Invariant: the value is dropped exactly once, never leaked (loom checks that every
/// loom `Arc` is freed when the model ends) and never dropped twice.
#[test]
fn drop_races_completion() {
    loom::model(|| {
        let (completer, future) = promise::<Arc<u32>, ()>();
        let completing = thread::spawn(move || completer.complete(Arc::new(7)).is_ok());
        drop(future);
        assert!(completing.join().unwrap(), "a dropped reader does not refuse the value");
    });
}

/// Race: a thread blocks in `wait` while another completes (a lost wake-up if the
/// completion lands between the waiter's check and its sleep).
/// Invariant: the waiter always wakes with the value; loom reports a lost wake-up as a
/// deadlock, since its condition variable never times out.
#[test]
fn blocking_waiter_wakes() {
    loom::model(|| {
        let (completer, future) = promise::<u32, ()>();
        let waiter = thread::spawn(move || future.wait());
        assert!(completer.complete(3).is_ok());
        assert_eq!(waiter.join().unwrap(), Ok(3));
    });
}

/// Race: one completer completes and then drops while the other completer drops.
/// Invariant: the completion wins over abandonment (it came first on its own thread),
/// and the reader never sees `Abandoned`.
#[test]
fn abandonment_races_completion() {
    loom::model(|| {
        let (completer, future) = promise::<u32, ()>();
        let other = completer.clone();
        let completing = thread::spawn(move || completer.complete(4).is_ok());
        drop(other);
        assert!(completing.join().unwrap());
        assert_eq!(future.wait(), Ok(4));
    });
}

/// Race: a shared reader polls while the promise completes, and a second shared reader
/// exists (its own waker slot).
/// Invariant: if the poll was pending, the completion woke its waker, and both readers
/// then see the same value.
#[test]
fn shared_poll_races_completion() {
    loom::model(|| {
        let (completer, future) = promise::<u32, ()>();
        let shared = future.shared();
        let other = shared.clone();
        let completing = thread::spawn(move || completer.complete(6).is_ok());
        let mut reader = pin!(shared);
        let (woken, waker) = counting();
        let first = reader.as_mut().poll(&mut Context::from_waker(&waker));
        assert!(completing.join().unwrap());
        if first.is_pending() {
            assert_eq!(woken.0.load(Ordering::SeqCst), 1, "the pending reader is woken");
        }
        assert_eq!(reader.as_mut().poll(&mut Context::from_waker(&waker)), Poll::Ready(Ok(6)));
        assert_eq!(other.try_get(), Some(Ok(6)));
    });
}

/// Race: the single-owner future is turned into a shared one (which sets `SHARED` in the
/// state word) while a completer writes and publishes with a plain store.
/// Invariant: the shared future reads the winner's value: the flag is never lost to the
/// publish.
#[test]
fn sharing_races_completion() {
    loom::model(|| {
        let (completer, future) = promise::<u32, ()>();
        let completing = thread::spawn(move || completer.complete(8).is_ok());
        let shared = future.shared();
        assert!(completing.join().unwrap());
        assert_eq!(shared.try_get(), Some(Ok(8)));
    });
}

/// Race: the reader takes the outcome (a plain store of TAKEN) while the completer, having
/// completed, registers a callback (a fetch_or of WAITING on the same word).
/// Invariant: the reader gets the value, the callback runs exactly once, and the state
/// stays consistent (a later registration still sees the promise complete).
#[test]
fn take_races_callback_registration() {
    loom::model(|| {
        let (completer, future) = promise::<u32, ()>();
        assert!(completer.complete(8).is_ok());
        let runs = Arc::new(AtomicUsize::new(0));
        let registering = {
            let runs = runs.clone();
            thread::spawn(move || {
                completer.on_complete(move |_| {
                    runs.fetch_add(1, Ordering::SeqCst);
                });
                completer
            })
        };
        assert_eq!(future.wait(), Ok(8));
        let completer = registering.join().unwrap();
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        let late = runs.clone();
        completer.on_complete(move |_| {
            late.fetch_add(1, Ordering::SeqCst);
        });
        assert_eq!(runs.load(Ordering::SeqCst), 2);
    });
}

/// Race: a shared reader reads the outcome with `try_get` (a load of the state word, then
/// a read of the value) while the completer writes and publishes it; the reader spins
/// (yielding) until it sees the promise completed, so it reads the value without any other
/// synchronisation with the completer (no join, no lock).
/// Invariant: the reader sees exactly the value written (loom reports a read of the value
/// not ordered after its write, as with a `Relaxed` state load, as a causality violation).
#[test]
fn shared_try_get_races_completion() {
    loom::model(|| {
        let (completer, future) = promise::<u32, ()>();
        let shared = future.shared();
        let completing = thread::spawn(move || completer.complete(8).is_ok());
        let seen = loop {
            if let Some(seen) = shared.try_get() {
                break seen;
            }
            thread::yield_now();
        };
        assert_eq!(seen, Ok(8));
        assert!(completing.join().unwrap());
    });
}

/// Race: a completer polls `closed()` while the last reader (one of two shared clones,
/// the other already gone) drops on another thread.
/// Invariant: if the poll was pending, the drop woke its waker exactly once; either way
/// `closed()` is ready afterwards and `is_closed` is true. A lost wake-up would leave a
/// `select!` on `closed()` asleep forever.
#[test]
fn closed_wakes_when_the_last_reader_drops() {
    loom::model(|| {
        let (completer, future) = promise::<u32, ()>();
        let shared = future.shared();
        let last = shared.clone();
        drop(shared);
        let dropping = thread::spawn(move || drop(last));
        let mut closed = pin!(completer.closed());
        let (woken, waker) = counting();
        let mut cx = Context::from_waker(&waker);
        let first = closed.as_mut().poll(&mut cx);
        dropping.join().unwrap();
        if first.is_pending() {
            assert_eq!(woken.0.load(Ordering::SeqCst), 1, "the last drop woke the poll");
        }
        assert_eq!(closed.as_mut().poll(&mut cx), Poll::Ready(()));
        assert!(completer.is_closed());
    });
}

/// Race: the last handle is dropped on a thread that never touched the promise's state
/// word after the owner did: the owner stored its waker, took the outcome (a plain
/// store) and dropped its future, while another thread drops a `closed()` future, the last
/// handle.
/// Invariant: freeing the promise (its waker cell, its value) happens after every other
/// handle's writes, whichever thread frees it; loom reports an unordered access to either
/// cell as a failed model.
#[test]
fn the_last_handle_frees_after_every_other_handles_writes() {
    loom::model(|| {
        let (completer, future) = promise::<u32, ()>();
        let closed = completer.closed();
        let dropping = thread::spawn(move || drop(closed));
        let mut future = Box::pin(future);
        let (_woken, waker) = counting();
        let mut cx = Context::from_waker(&waker);
        assert_eq!(future.as_mut().poll(&mut cx), Poll::Pending, "nothing completed yet");
        completer.complete(3).expect("the only completer");
        drop(completer);
        assert_eq!(future.as_mut().poll(&mut cx), Poll::Ready(Ok(3)));
        drop(future);
        dropping.join().unwrap();
    });
}
