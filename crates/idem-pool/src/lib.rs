//! A blocking connection pool whose release is idempotent.
//!
//! A pool lends scarce connections. Code that releases a connection twice is common: an
//! explicit release plus the guard's drop, an error handler plus a `finally`, a retried
//! cleanup. In a naive pool the second release puts the connection on the free list
//! twice, and two borrowers later share one connection. Here every loan is named by a
//! slot and a generation, and a release only acts on the loan it names.
//!
//! # Guarantee
//!
//! A connection is lent to at most one holder at a time. A second release of a loan, or a
//! release of a loan whose slot has since been lent again, changes nothing and is counted
//! in [`PoolState`].
//!
//! # Examples
//!
//! ```
//! use std::convert::Infallible;
//! use idem_pool::{Manager, Pool};
//!
//! #[derive(Debug)]
//! struct Numbers;
//!
//! impl Manager for Numbers {
//!     type Connection = Vec<u8>;
//!     type Error = Infallible;
//!     fn connect(&self) -> Result<Vec<u8>, Infallible> { Ok(Vec::new()) }
//! }
//!
//! let pool = Pool::builder().max_size(1).build(Numbers)?;
//! let first = pool.get()?.into_loan();  // a loan, releasable from anywhere
//! let cleanup = first.clone();           // a second cleanup path holds it too
//! assert!(first.release());              // the connection goes back
//! let mut second = pool.get()?;          // and is lent again
//! second.push(7);
//! assert!(!cleanup.release());           // the stale release touches nothing
//! assert_eq!(*second, vec![7]);
//! assert_eq!(pool.state().stale_releases, 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # What is idempotent here, and how
//!
//! * **By shape:** [`Pool::close`] (a second close does nothing) and
//!   [`PooledConnection::release`] (a second call returns `false`).
//! * **By id:** a [`Loan`] is named by its [`LoanId`], a slot index and a generation; the
//!   pool generates the id at checkout, and remembers only the current generation of
//!   each slot, which is all a stale release needs to be refused.
//!
//! # Why the guard alone is not enough
//!
//! r2d2's guard gives its connection back exactly once because the guard owns it: Rust
//! moves make a double return impossible. That stops being true as soon as a loan outlives
//! its guard: a cleanup handed to another thread, a callback registered with an external
//! system, two error paths that both "make sure" the connection goes back. A [`Loan`]
//! (from [`PooledConnection::into_loan`]) is that loan as a value, and the generation
//! check is what keeps its stale copies from ever touching the next borrower's
//! connection. (`into_loan` keeps the connection in the pool's custody; it is not sqlx's
//! `detach`, which takes a connection out of its pool for good.)
//!
//! # Features
//!
//! `tracing` (off by default): a `checkout` span per `get`, and warnings for a failed
//! checkout (with its cause), a stale release and suspected leaks.

/// The README's examples, compiled and run as doctests, so a reader's first program works.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

mod config;
mod conn;
mod manager;
mod pool;
mod shelf;
mod state;
mod sync;

pub use config::{Builder, ConfigError, Fairness, HealthCheck};
pub use conn::{Loan, LoanId, PooledConnection};
pub use manager::Manager;
pub use pool::Pool;

use std::time::Duration;

use crate::sync::Arc;

/// Why `get` failed.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No connection became available in time. Its message says how many connections
    /// were in use, as HikariCP's does, and ends with the last error from connecting or a
    /// health check, as r2d2's does ("...: connection refused"); the same error is its
    /// [`source`](std::error::Error::source), for error-chain walkers.
    #[error(
        "timed out after {waited:?} waiting for a connection ({in_use} of {max_size} in use){}",
        cause(last_error)
    )]
    Timeout {
        /// How long the caller waited.
        waited: Duration,
        /// Connections lent when the wait ended (in a guard, a loan, or granted to a
        /// waiter): all `max_size` of them means the pool was exhausted, fewer means
        /// connecting failed or was pausing after a failure.
        in_use: usize,
        /// The pool's `max_size`.
        max_size: usize,
        /// The last error from connecting or a health check, if any.
        #[source]
        last_error: Option<Arc<dyn std::error::Error + Send + Sync>>,
    },
    /// The pool was closed.
    #[error("the pool is closed")]
    Closed,
    /// Too many threads were already waiting.
    #[error("{waiters_max} threads are already waiting for a connection")]
    TooManyWaiters {
        /// The configured limit.
        waiters_max: usize,
    },
}

/// The tail of a timeout's message: the last connection error, if there was one.
fn cause(last_error: &Option<Arc<dyn std::error::Error + Send + Sync>>) -> String {
    last_error.as_ref().map(|e| format!("; last connection error: {e}")).unwrap_or_default()
}

/// Counts for metrics and tests, from [`Pool::state`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolState {
    /// Connections that exist: idle plus in use.
    pub size: usize,
    /// Idle connections (on the shelf, or taken off it and not lent yet).
    pub idle: usize,
    /// Connections lent (in a guard, in a [`Loan`], or handed to a waking waiter).
    pub in_use: usize,
    /// Connections being opened (by a `get`, or by maintenance up to `min_idle`): each
    /// holds a place of `max_size`, and counts in `size` once it is open.
    pub connecting: usize,
    /// Threads waiting in `get`.
    pub waiters: usize,
    /// Connections made so far.
    pub created: u64,
    /// Connections closed by the pool (broken, expired, failed check, closed pool).
    pub discarded: u64,
    /// `get` calls that timed out (a `try_get` that found nothing is not one).
    pub timeouts: u64,
    /// Releases of a loan that was already released (no-ops).
    pub double_releases: u64,
    /// Releases of a loan whose slot was since lent again (no-ops).
    pub stale_releases: u64,
    /// Loans held past the leak threshold, each counted once by maintenance.
    pub leaks_suspected: u64,
    /// Returned connections handed straight to the longest waiter, by fairness mode:
    /// under `Fairness::Fifo`, every return while a thread waits; under
    /// `Fairness::Eventual`, only the fair hand-offs (a return while the longest waiter has
    /// waited `fair_after`, at most one per `fair_after`; every other return barges);
    /// under `Fairness::Barging`, none: a return goes on the shelf and this stays 0.
    /// A slot handed to a waiter to connect into (after a failed connect or a discard) is
    /// not a hand-off.
    pub handoffs: u64,
}
