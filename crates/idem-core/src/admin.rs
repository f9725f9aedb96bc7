//! What an operator does to a key by hand: read its record whatever request made it
//! ([`KeyAdmin::inspect`]), and forget a record a bug poisoned ([`KeyAdmin::forget`]),
//! beside the request path of [`KeyStore`](crate::KeyStore) and
//! [`AsyncKeyStore`](crate::AsyncKeyStore).
//!
//! Forgetting breaks the promise on purpose, for one key: the next request with that key
//! runs again as if it were new. That is what an operator wants for a response stored by
//! a bug (a 500 the handler should never have produced, kept for a day), and what must
//! never happen to a key whose holder still runs: then two attempts would act at once.
//! So [`forget`](KeyAdmin::forget) removes a finished record or a claim whose lease ran
//! out, and refuses a live holder ([`Forgotten::HolderLive`]); once the holder's lease
//! runs out, the claim is pending and can be forgotten. A holder that outlives its
//! forgotten claim cannot store its result: its lease's token no longer holds the key,
//! and a later claim of the key gets a higher token.

use std::future::Future;
use std::time::Duration;

use crate::clock::Timestamp;
use crate::fingerprint::Fingerprint;
use crate::key::ScopedKey;
use crate::store::StoreError;

/// A key's record as an operator sees it, whatever request made it. It never holds the
/// stored result: a result is shown only to a request with its fingerprint
/// ([`KeyStore::lookup`](crate::KeyStore::lookup)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyRecord {
    /// The fingerprint of the request that claimed the key.
    pub fingerprint: Fingerprint,
    /// Where the record stands.
    pub state: RecordState,
}

/// Where a record stands, with the deadline that ends that state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordState {
    /// A holder's lease is live until `lease_expires_at`.
    InFlight {
        /// When the holder's lease runs out unless renewed.
        lease_expires_at: Timestamp,
    },
    /// Claimed, and the lease ran out at `lease_expired_at` unsettled: the side effect may
    /// or may not have happened; the next claim with the same fingerprint recovers it.
    Pending {
        /// When its lease ran out.
        lease_expired_at: Timestamp,
    },
    /// Finished: its result is replayed until `expires_at`, then the key is absent.
    Finished {
        /// When the result's TTL ends.
        expires_at: Timestamp,
    },
}

/// What [`KeyAdmin::forget`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forgotten {
    /// No live record (never claimed, released, or its result expired): nothing changed.
    Absent,
    /// The record is gone; the next claim of the key acquires it afresh.
    Removed(KeyRecord),
    /// A holder's lease is live until `lease_expires_at`: nothing changed. Forgetting
    /// would let a retry run beside the holder; ask again once the lease has run out.
    HolderLive {
        /// When the holder's lease runs out unless renewed.
        lease_expires_at: Timestamp,
        /// How long until then, on the store's own clock (the database's, for a shared
        /// store): what a caller should wait before asking again.
        retry_after: Duration,
    },
}

/// What an operator does to a key of a store by hand. Every store of the workspace
/// implements it; a request path never needs it.
///
/// ```
/// use idem_core::{
///     Claim, Fingerprint, Forgotten, KeyAdmin, KeyStore, MemoryStore, RecordState, ScopedKey,
/// };
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let store = MemoryStore::<String>::new(Default::default());
/// let key = ScopedKey::parse("customer:7", "order-1")?;
/// let request = Fingerprint::builder("order").u64("amount_minor", 500).finish();
/// let Claim::Acquired(lease) = store.claim(&key, &request)? else { unreachable!() };
/// store.complete(&lease, "a response a bug produced".to_string())?;
///
/// let record = store.inspect(&key)?.expect("finished");
/// assert!(matches!(record.state, RecordState::Finished { .. }));
/// let gone = store.forget(&key, "alice", "the 500 of the broken release")?;
/// assert_eq!(gone, Forgotten::Removed(record));
/// assert!(matches!(store.claim(&key, &request)?, Claim::Acquired(_)));
/// # Ok(())
/// # }
/// ```
pub trait KeyAdmin: Send + Sync {
    /// The record of `key`, whatever request made it; `None` if no live record holds it
    /// (an expired result not yet swept counts as absent). Changes nothing.
    ///
    /// # Errors
    ///
    /// [`StoreError::Storage`] if the backend failed.
    fn inspect(&self, key: &ScopedKey) -> Result<Option<KeyRecord>, StoreError>;

    /// Removes the record of `key` if it is finished or pending, so that the next claim
    /// acquires it afresh; refuses a live holder. `who` (the operator) and `why` are
    /// reported with the outcome (`tracing` feature).
    ///
    /// # Errors
    ///
    /// [`StoreError::Storage`] if the backend failed; whether the record is gone is then
    /// unknown, and asking again is safe.
    fn forget(&self, key: &ScopedKey, who: &str, why: &str) -> Result<Forgotten, StoreError>;
}

/// [`KeyAdmin`] for async callers: the same answers, each a future.
pub trait AsyncKeyAdmin: Send + Sync {
    /// As [`KeyAdmin::inspect`].
    ///
    /// # Errors
    ///
    /// As [`KeyAdmin::inspect`].
    fn inspect(
        &self,
        key: &ScopedKey,
    ) -> impl Future<Output = Result<Option<KeyRecord>, StoreError>> + Send;

    /// As [`KeyAdmin::forget`].
    ///
    /// # Errors
    ///
    /// As [`KeyAdmin::forget`].
    fn forget(
        &self,
        key: &ScopedKey,
        who: &str,
        why: &str,
    ) -> impl Future<Output = Result<Forgotten, StoreError>> + Send;
}

/// A shared store is administered as the store.
impl<S: KeyAdmin + ?Sized> KeyAdmin for crate::sync::Arc<S> {
    fn inspect(&self, key: &ScopedKey) -> Result<Option<KeyRecord>, StoreError> {
        (**self).inspect(key)
    }

    fn forget(&self, key: &ScopedKey, who: &str, why: &str) -> Result<Forgotten, StoreError> {
        (**self).forget(key, who, why)
    }
}

/// A shared store is administered as the store.
impl<S: AsyncKeyAdmin + ?Sized> AsyncKeyAdmin for crate::sync::Arc<S> {
    fn inspect(
        &self,
        key: &ScopedKey,
    ) -> impl Future<Output = Result<Option<KeyRecord>, StoreError>> + Send {
        (**self).inspect(key)
    }

    fn forget(
        &self,
        key: &ScopedKey,
        who: &str,
        why: &str,
    ) -> impl Future<Output = Result<Forgotten, StoreError>> + Send {
        (**self).forget(key, who, why)
    }
}

/// The memory store answers on the caller's task, as its [`AsyncKeyStore`] does.
///
/// [`AsyncKeyStore`]: crate::AsyncKeyStore
impl<R: Clone + Send + Sync> AsyncKeyAdmin for crate::memory::MemoryStore<R> {
    async fn inspect(&self, key: &ScopedKey) -> Result<Option<KeyRecord>, StoreError> {
        KeyAdmin::inspect(self, key)
    }

    async fn forget(&self, key: &ScopedKey, who: &str, why: &str) -> Result<Forgotten, StoreError> {
        KeyAdmin::forget(self, key, who, why)
    }
}

/// A record's state at `now` from the fields a store keeps (finished or not, the lease's
/// deadline, the result's expiry): `None` for a result whose TTL has ended. Every store of
/// the workspace judges its records with it; a backend of your own can too.
pub fn record_state(
    finished: bool,
    lease_expires_at: Timestamp,
    expires_at: Timestamp,
    now: Timestamp,
) -> Option<RecordState> {
    if finished {
        (expires_at > now).then_some(RecordState::Finished { expires_at })
    } else if lease_expires_at <= now {
        Some(RecordState::Pending { lease_expired_at: lease_expires_at })
    } else {
        Some(RecordState::InFlight { lease_expires_at })
    }
}

/// What a forget does with the record it found at `now`, read under the lock (or in the
/// transaction) that the removal then takes: nothing for no record, a refusal for a live
/// holder (with the time left on its lease), else the removal. Every store of the
/// workspace decides with it; a backend of your own can too.
pub fn forget_decision(record: Option<KeyRecord>, now: Timestamp) -> Forgotten {
    match record {
        None => Forgotten::Absent,
        Some(KeyRecord { state: RecordState::InFlight { lease_expires_at }, .. }) => {
            let retry_after = lease_expires_at.saturating_duration_since(now);
            Forgotten::HolderLive { lease_expires_at, retry_after }
        }
        Some(record) => Forgotten::Removed(record),
    }
}
