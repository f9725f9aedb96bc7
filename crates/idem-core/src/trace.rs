//! What an operator sees: `tracing` spans and events, compiled only with the `tracing`
//! feature (off by default). Without it every function here is an empty inline call and
//! every macro expands to nothing, so the hot paths pay nothing.
//!
//! Every store reports through these functions, so the three backends (and a backend of
//! your own) name their spans, events and fields alike:
//!
//! - [`KeyStore::claim`] and `claim_wait` run in a `claim` span (`scope`, `key`) and end
//!   with one event: `acquired` (debug), `replay` (info), `in flight` (info), `recover`
//!   (warn: the last holder's lease ran out unfinished) or `key reused` (warn).
//! - [`KeyStore::complete`] and `release` run in a `settle` span (`op`, `scope`, `key`,
//!   `token`); a refused lease is a `lease lost` event (warn).
//!
//! Fields name the key's scope and the key (identifiers a client chose), never a
//! fingerprint's input, a stored result or any other payload. The problem crates add their
//! own spans (`pay`, `create_transfers`, `checkout`, `send`) with the same conventions.
//!
//! [`KeyStore::claim`]: crate::KeyStore::claim
//! [`KeyStore::complete`]: crate::KeyStore::complete

use crate::{Claim, Forgotten, Lease, ScopedKey, StoreError};

/// A span entered for the length of an operation; with the feature off, nothing.
#[must_use = "the span ends when this guard is dropped"]
#[derive(Debug)]
pub struct Entered {
    #[cfg(feature = "tracing")]
    _span: Option<tracing::span::EnteredSpan>,
}

impl Entered {
    /// No span: what the span macro gives when the calling crate's feature is off.
    pub fn none() -> Self {
        Self {
            #[cfg(feature = "tracing")]
            _span: None,
        }
    }

    /// Enters `span` until the guard is dropped.
    #[cfg(feature = "tracing")]
    pub fn new(span: tracing::Span) -> Self {
        Self { _span: Some(span.entered()) }
    }
}

/// Runs a claim inside a `claim` span and reports its answer: the store's side of the
/// events, the same for every backend.
///
/// # Errors
///
/// Whatever `run` returns, unchanged.
#[inline]
pub fn claim<R>(
    key: &ScopedKey,
    run: impl FnOnce() -> Result<Claim<R>, StoreError>,
) -> Result<Claim<R>, StoreError> {
    #[cfg(feature = "tracing")]
    let _span = tracing::debug_span!("claim", scope = %key.scope(), key = %key.key()).entered();
    let answer = run();
    #[cfg(feature = "tracing")]
    claimed(&answer);
    #[cfg(not(feature = "tracing"))]
    let _ = key;
    answer
}

#[cfg(feature = "tracing")]
fn claimed<R>(answer: &Result<Claim<R>, StoreError>) {
    use tracing::{debug, info, warn};
    match answer {
        Ok(Claim::Acquired(lease)) => debug!(token = %lease.token(), "acquired"),
        Ok(Claim::Replay(_)) => info!("replay"),
        Ok(Claim::InFlight { retry_after }) => info!(?retry_after, "in flight"),
        Ok(Claim::Recover(lease)) => {
            warn!(token = %lease.token(), "recover: the last holder's lease ran out unfinished");
        }
        Err(StoreError::KeyReused { .. }) => warn!("key reused for a different request"),
        Err(error) => warn!(%error, "claim failed"),
    }
}

/// Runs a complete (`op` is `"complete"`) or release (`"release"`) inside a span and
/// reports a lost lease.
///
/// # Errors
///
/// Whatever `run` returns, unchanged.
#[inline]
pub fn settle(
    op: &'static str,
    lease: &Lease,
    run: impl FnOnce() -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    #[cfg(feature = "tracing")]
    let _span = tracing::debug_span!(
        "settle",
        op,
        scope = %lease.key().scope(),
        key = %lease.key().key(),
        token = %lease.token()
    )
    .entered();
    let result = run();
    #[cfg(feature = "tracing")]
    if let Err(StoreError::LeaseLost { .. }) = &result {
        tracing::warn!("lease lost: the key was recovered by another claim or settled already");
    }
    #[cfg(not(feature = "tracing"))]
    let _ = (op, lease);
    result
}

/// Reports a forget's `answer`, with who asked and why, at warn: forgetting a key lets
/// its next request run again, which an operator reading the log must be able to trace.
///
/// # Errors
///
/// `answer`, unchanged.
#[inline]
pub fn forgotten(
    key: &ScopedKey,
    who: &str,
    why: &str,
    answer: Result<Forgotten, StoreError>,
) -> Result<Forgotten, StoreError> {
    #[cfg(feature = "tracing")]
    {
        let (scope, key) = (key.scope().as_str(), key.key().as_str());
        match &answer {
            Ok(Forgotten::Removed(record)) => {
                let was = &record.state;
                tracing::warn!(scope, key, who, why, ?was, "forgotten: its next request runs");
            }
            Ok(Forgotten::Absent) => tracing::info!(scope, key, who, why, "forget: no record"),
            Ok(Forgotten::HolderLive { .. }) => {
                tracing::warn!(scope, key, who, why, "forget refused: the holder still runs");
            }
            Err(error) => tracing::warn!(scope, key, who, why, %error, "forget failed"),
        }
    }
    #[cfg(not(feature = "tracing"))]
    let _ = (key, who, why);
    answer
}

/// Enters a span when the calling crate's `tracing` feature is on; nothing otherwise.
/// `trace_span!(DEBUG, "pay", scope = %scope)`: a level, a name, then `tracing` fields.
#[doc(hidden)]
#[macro_export]
macro_rules! trace_span {
    ($level:ident, $name:literal $(, $($field:tt)*)?) => {{
        #[cfg(feature = "tracing")]
        let entered = $crate::trace::Entered::new($crate::trace::__tracing::span!(
            $crate::trace::__tracing::Level::$level,
            $name
            $(, $($field)*)?
        ));
        #[cfg(not(feature = "tracing"))]
        let entered = $crate::trace::Entered::none();
        entered
    }};
}

/// Emits an event when the calling crate's `tracing` feature is on; nothing otherwise.
/// `trace_event!(WARN, slot, "stale release")`: a level, then `tracing` fields and message.
#[doc(hidden)]
#[macro_export]
macro_rules! trace_event {
    ($level:ident, $($arg:tt)+) => {
        #[cfg(feature = "tracing")]
        $crate::trace::__tracing::event!($crate::trace::__tracing::Level::$level, $($arg)+);
    };
}

#[cfg(feature = "tracing")]
#[doc(hidden)]
pub use tracing as __tracing;
