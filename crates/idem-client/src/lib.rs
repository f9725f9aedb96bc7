//! The client half of the `Idempotency-Key` protocol: one key per intent, made once and
//! sent on every attempt, with retries that are safe because of it.
//!
//! A server that honours `Idempotency-Key` (idem-http, Stripe) runs a request once per
//! key; what the key is, and when it is reused, is the client's to get right, and clients
//! get it wrong. A retry loop that makes the request anew makes a new key, or none: a
//! timeout after the server charged, then a retry, is a second charge. Stripe's SDKs had
//! to add keys reused across their own retries; a generic retry middleware (reqwest-retry)
//! retries without a key at all.
//!
//! # Guarantee
//!
//! One key per [`Intent`] (one user action), made once and sent on every attempt at it;
//! two intents never share a key; a retry never changes the body. With a server that
//! keeps its answers by key, that is at most one effect per intent, however many attempts
//! the network forces. An intent is never retried past its deadline, and never after a
//! 422; either way the caller gets a typed [`ClientError`] saying what is known.
//!
//! # The mechanism
//!
//! An [`Intent`] carries the key (a fresh UUID, or the caller's own id so that it survives
//! a restart). [`RetryPolicy`] says what is retried: a timeout or a connection error, 409
//! (the first attempt still runs), 429 and 503 (honouring `Retry-After`), and by default
//! other 5xx; never 422 (the key was used for another request: a bug,
//! [`ClientError::KeyReused`]) nor another 4xx (the server's answer). Pauses double with
//! full jitter, capped, and a deadline bounds the intent: past it the outcome is unknown
//! ([`ClientError::OutcomeUnknown`]), and the caller must retry the same intent later,
//! never make a new one. The answer's extensions say what happened ([`Attempts`]: how
//! many, and whether the server replayed a stored answer).
//!
//! Two integrations share the policy: [`IdempotentRetry`], a `reqwest-middleware`
//! middleware (feature `reqwest`, on by default), and [`IdempotentRetryLayer`], a tower
//! layer for hyper and other tower clients (a runnable example on each).
//!
//! # Examples
//!
//! ```
//! use idem_client::{Intent, RetryPolicy};
//! use std::time::Duration;
//!
//! let policy = RetryPolicy::builder()
//!     .deadline(Duration::from_secs(30))
//!     .attempt_timeout(Duration::from_secs(5))
//!     .build()?;
//! let intent = Intent::new(); // once per user action
//! assert_eq!(intent.key().len(), 36);
//! assert_eq!(policy.deadline(), Duration::from_secs(30));
//! # Ok::<(), idem_client::PolicyError>(())
//! ```
//!
//! # Why a crate of its own
//!
//! A client should not build a server's layer (the response store's encoding, JSON
//! meaning, tower's server side), and a server should not build reqwest: the two halves
//! meet only at the header. docs/http.md shows both halves of the sequence.
//!
//! # What it cannot fix
//!
//! Against a server that ignores the header, a retry after a lost answer runs the request
//! again: the key makes retries safe only where the server keeps its answers by key (the
//! socket tests show both).

mod intent;
mod policy;
mod retry;
mod tower;

#[cfg(feature = "reqwest")]
mod reqwest;

pub use intent::Intent;
pub use policy::{DEADLINE_MAX, PolicyError, RETRY_AFTER_MAX, RetryPolicy, RetryPolicyBuilder};
#[cfg(feature = "reqwest")]
pub use reqwest::IdempotentRetry;
pub use retry::Attempts;
pub use tower::{IdempotentRetryLayer, IdempotentRetryService};

/// Why an intent got no answer to hand to its caller.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError<E> {
    /// The server answered 422: this key was used for a different request. The intent's
    /// key was reused for another body (a bug of the caller's), never retried.
    #[error(
        "the server says key {key:?} was used for a different request (422) after \
         {attempts} attempts: an intent's key must only ever carry one request"
    )]
    KeyReused {
        /// The key.
        key: String,
        /// Attempts sent.
        attempts: u32,
    },
    /// The deadline passed with no answer for the caller: the request may or may not have
    /// taken effect. Retry the same intent later (same key); a new intent could do it
    /// twice.
    #[error(
        "the outcome of intent {key:?} is unknown after {attempts} attempts (last: {last}): \
         it may have taken effect; retry the same intent later, never a new one"
    )]
    OutcomeUnknown {
        /// The key.
        key: String,
        /// Attempts sent.
        attempts: u32,
        /// What the last attempt got.
        last: String,
    },
    /// The request's body is a stream, which cannot be sent twice unchanged: give it as
    /// bytes.
    #[error("the request's body is a stream: a retried intent needs its body as bytes")]
    BodyNotReplayable,
    /// The request could not be made at all (a malformed request, a client that is not
    /// ready): no retry mends it.
    #[error("the request could not be made: {0}")]
    Request(E),
}
