//! A hand-built future whose completion is first-write-wins and whose callbacks run
//! exactly once.
//!
//! A result is often raced for: a request hedged to two replicas, a timeout racing the
//! reply, a cancellation racing the worker, a retry of the same work finishing second.
//! Completing it twice must be harmless, and everyone waiting for it must hear once.
//!
//! # Guarantee
//!
//! A promise is settled exactly once, by the first of its completions (value, failure,
//! cancellation, or abandonment when every completer is dropped); every other completion
//! is refused and handed its argument back. Every callback registered with `on_complete`
//! runs exactly once, and every reader sees the winner's outcome.
//!
//! # Examples
//!
//! ```
//! use std::time::Duration;
//! use idem_future::{promise, Completion, Error};
//!
//! let (completer, future) = promise::<&str, String>();
//! let timeout = completer.clone();
//! future.on_complete(|how| assert_eq!(how, Completion::Completed));
//!
//! let worker = std::thread::spawn(move || completer.complete("reply"));
//! let won_by_reply = worker.join().unwrap().is_ok();
//! // The timeout fires late: it loses, and is told so.
//! assert_eq!(timeout.cancel(), !won_by_reply);
//!
//! match future.wait_timeout(Duration::from_secs(5)) {
//!     Ok(Ok(reply)) => assert_eq!(reply, "reply"),
//!     Ok(Err(Error::Cancelled)) => unreachable!("the reply completed first"),
//!     other => panic!("unexpected {other:?}"),
//! }
//! ```
//!
//! # What is idempotent here, and how
//!
//! * **By shape, no id needed:** `cancel` (a second cancel changes nothing and returns
//!   `false`), `is_completed`, and reading the outcome of a [`SharedFuture`] (every read
//!   returns the same outcome).
//! * **Completion** is first-write-wins: the promise itself is the id. `complete`, `fail`
//!   and `cancel` race; exactly one wins. A loser gets `Err(value)` (or `Err(error)`, or
//!   `false`): its value is returned untouched, never dropped, never stored.
//! * **Remembered for:** the life of the promise; the outcome lives until the future
//!   takes it (a [`PromiseFuture`]) or the last reader is dropped (a [`SharedFuture`]).
//!
//! # Happens-before
//!
//! Everything the winning completer did before `complete` is visible to whoever observes
//! the outcome: an `await`, a `wait`, a `try_get`, a callback, or `is_completed` returning
//! `true`.
//!
//! # Callbacks
//!
//! `on_complete` (on the completer, the future or a shared future) runs its callback
//! exactly once: on the completing thread, after the outcome is published, if registered
//! before completion; at once on the registering thread if after; and still exactly once
//! if the two race. Callbacks never run under an internal lock: one may register more
//! callbacks, complete another promise, or read this one. A callback that panics does not
//! stop the others and does not poison the promise: each runs under `catch_unwind`, and
//! the first panic is resumed on the completing thread after all of them ran (the
//! completion has taken effect by then). If that thread is already unwinding (the last
//! completer dropped during a panic), the callback's panic is discarded instead. Wakers
//! are held to the same rule: one that panics when woken stops no other waker, callback
//! or blocked reader, and its panic comes out of `complete` (or the last reader's drop,
//! for a [`Completer::closed`] future's waker) once every one was served. No waker is
//! dropped under the lock either, so a waker that owns its task, and the task a handle on
//! this promise, may drop that handle.
//!
//! A callback that owns a completer of its own promise keeps that promise from ever being
//! abandoned, as an `Arc` that holds itself is never freed: the promise waits for the
//! callback, and the callback for the promise. Complete or drop such a completer
//! elsewhere.
//!
//! # When every reader is gone
//!
//! As with tokio's oneshot sender, a completer can learn that nobody will read the
//! outcome: [`Completer::is_closed`] turns true once the [`PromiseFuture`] (or every
//! [`SharedFuture`] clone) is dropped, and [`Completer::closed`] is a future that resolves
//! then, to race against the work in a `select!`. A caller that gives up with
//! `tokio::time::timeout` drops its future, and the worker stops. The example
//! `work_nobody_waits_for` shows both under tokio.
//!
//! A [`PromiseFuture`] that returned `Ready` must not be polled again (it panics, as
//! tokio's receiver does); [`PromiseFuture::is_terminated`] says so, like `futures`'
//! `FusedFuture`. A [`SharedFuture`] may be polled again and answers the same outcome.
//!
//! # Threads
//!
//! The handles cross threads when the outcome can: a completer, a future or a shared
//! future of `T` and `E` is `Send` and `Sync` when both are `Send` (a [`SharedFuture`]'s
//! methods also need them `Sync`: its readers borrow the outcome). A promise of a value
//! that must stay on its thread stays there too:
//!
//! ```compile_fail
//! fn crosses_threads<X: Send>(_: X) {}
//! let (completer, _future) = idem_future::promise::<std::rc::Rc<u8>, ()>();
//! crosses_threads(completer); // `Rc` is not `Send`, so neither is this completer
//! ```
//!
//! # Errors a reader can see
//!
//! [`Error::Failed`] carries the completer's error, [`Error::Cancelled`] says it was
//! cancelled, and [`Error::Abandoned`] says every completer was dropped without
//! completing: a reader never hangs on a promise nobody can complete.
//!
//! # Features
//!
//! `tracing` (off by default): an event when a promise is abandoned and when a callback
//! panics.

/// The README's examples, compiled and run as doctests, so a reader's first program works.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

mod cell;
mod promise;
mod shared;
mod sync;

pub use promise::{Closed, Completer, Completion, Error, PromiseFuture, TryResult, promise};
pub use shared::SharedFuture;
