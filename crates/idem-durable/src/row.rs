//! How a SQL backend reads a stored claim row: into a [`KeyState`], into the reason a
//! claim changed nothing, into a pending claim, into an operator's record; and a claim
//! that sweeps once when full (for either store contract).
//! The SQLite and PostgreSQL stores share these, so they judge a row alike.

use crate::codec::{CodecError, Durable};
use std::future::Future;
use std::time::Duration;

use idem_core::{
    Claim, Fingerprint, KeyRecord, KeyState, PendingClaim, RecordState, ScopedKey, StoreError,
    Timestamp, record_state,
};

use crate::result::decode_result;

/// A claim row as a SQL backend stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredRow {
    /// Whether the row's fingerprint is the asking request's.
    pub same_fingerprint: bool,
    /// Whether the claim was completed.
    pub finished: bool,
    /// When the lease runs out, in milliseconds since the epoch.
    pub lease_expires_ms: i64,
    /// When the result expires, in milliseconds since the epoch.
    pub expires_ms: i64,
    /// The stored result, as [`encode_result`](crate::encode_result) wrote it.
    pub result: Option<Vec<u8>>,
}

/// How long a caller waits for a holder whose lease ends at `until`, read at `now`: never
/// more than the `lease` itself. A reading taken before the holder's (a transaction that
/// began earlier, then waited on the holder's row) would otherwise measure the holder's
/// deadline from an earlier time.
fn wait_left(until: Timestamp, now: Timestamp, lease: Duration) -> Duration {
    until.saturating_duration_since(now).min(lease)
}

/// The state of `key` from its stored row, read at `now` (decoded with
/// [`decode_result`]), for a store whose leases last `lease`. A live row for another
/// fingerprint is `KeyReused`.
///
/// # Errors
///
/// [`StoreError::KeyReused`]; [`StoreError::Storage`] for a finished row without a result
/// or a result that does not decode.
pub fn row_state<R: Durable>(
    key: &ScopedKey,
    row: StoredRow,
    now: Timestamp,
    lease: Duration,
) -> Result<KeyState<R>, StoreError> {
    let deadlines = (stored_at(row.lease_expires_ms), stored_at(row.expires_ms));
    let Some(state) = record_state(row.finished, deadlines.0, deadlines.1, now) else {
        return Ok(KeyState::Absent);
    };
    if !row.same_fingerprint {
        return Err(StoreError::KeyReused { key: key.clone() });
    }
    Ok(match (state, row.result) {
        (RecordState::Finished { .. }, Some(bytes)) => {
            KeyState::Finished(decode_result(key, &bytes)?)
        }
        (RecordState::Finished { .. }, None) => {
            return Err(CodecError::Corrupt(format!("{key}: finished without a result")).into());
        }
        (RecordState::InFlight { lease_expires_at }, _) => {
            KeyState::InFlight { retry_after: wait_left(lease_expires_at, now, lease) }
        }
        (RecordState::Pending { lease_expired_at }, _) => KeyState::Pending { lease_expired_at },
    })
}

/// Why a claim changed nothing, from the row the claim found (a SQL backend's claim
/// statement left it alone): another request's key, a replay (still encoded), or a live
/// lease (its wait bounded by `lease`, the store's).
///
/// # Errors
///
/// [`StoreError::KeyReused`]; [`CodecError::Corrupt`] for a finished row without a result.
pub fn claim_refused(
    key: &ScopedKey,
    row: StoredRow,
    now: Timestamp,
    lease: Duration,
) -> Result<Claim<Vec<u8>>, StoreError> {
    if !row.same_fingerprint {
        return Err(StoreError::KeyReused { key: key.clone() });
    }
    if row.finished {
        let bytes = row
            .result
            .ok_or_else(|| CodecError::Corrupt(format!("{key}: finished without a result")))?;
        return Ok(Claim::Replay(bytes));
    }
    let until = stored_at(row.lease_expires_ms);
    Ok(Claim::InFlight { retry_after: wait_left(until, now, lease) })
}

/// A claim as a SQL backend answered it, with its replay decoded for `key`.
///
/// # Errors
///
/// [`CodecError::Corrupt`] if the replayed result does not decode.
pub fn decode_claim<R: Durable>(
    key: &ScopedKey,
    claim: Claim<Vec<u8>>,
) -> Result<Claim<R>, StoreError> {
    Ok(match claim {
        Claim::Replay(bytes) => Claim::Replay(decode_result(key, &bytes)?),
        Claim::Acquired(lease) => Claim::Acquired(lease),
        Claim::Recover(lease) => Claim::Recover(lease),
        Claim::InFlight { retry_after } => Claim::InFlight { retry_after },
    })
}

/// A pending claim from its stored columns.
///
/// # Errors
///
/// [`CodecError::Corrupt`] if the stored key or fingerprint is not valid.
pub fn pending_claim(
    scope: &str,
    key: &str,
    fingerprint: &[u8],
    lease_expired_ms: i64,
) -> Result<PendingClaim, CodecError> {
    let key = ScopedKey::parse(scope, key)
        .map_err(|e| CodecError::Corrupt(format!("stored key: {e}")))?;
    let fingerprint = stored_fingerprint(&key, fingerprint)?;
    Ok(PendingClaim { key, fingerprint, lease_expired_at: stored_at(lease_expired_ms) })
}

/// A stored row's record as an operator sees it at `now` ([`idem_core::KeyAdmin`]):
/// `None` for a result whose TTL has ended.
///
/// # Errors
///
/// [`CodecError::Corrupt`] if the stored fingerprint is not 32 bytes.
pub fn stored_record(
    key: &ScopedKey,
    fingerprint: &[u8],
    finished: bool,
    (lease_expires_ms, expires_ms): (i64, i64),
    now: Timestamp,
) -> Result<Option<KeyRecord>, CodecError> {
    let fingerprint = stored_fingerprint(key, fingerprint)?;
    let state = record_state(finished, stored_at(lease_expires_ms), stored_at(expires_ms), now);
    Ok(state.map(|state| KeyRecord { fingerprint, state }))
}

/// A stored time in milliseconds as a timestamp (a negative one, never written, as 0).
pub fn stored_at(ms: i64) -> Timestamp {
    Timestamp::from_millis(u64::try_from(ms).unwrap_or(0))
}

/// `key`'s stored fingerprint, refused as corrupt unless it is 32 bytes.
fn stored_fingerprint(key: &ScopedKey, bytes: &[u8]) -> Result<Fingerprint, CodecError> {
    let bytes: [u8; 32] = bytes
        .try_into()
        .map_err(|_| CodecError::Corrupt(format!("{key}: fingerprint is not 32 bytes")))?;
    Ok(Fingerprint::from_bytes(bytes))
}

/// A claim that sweeps expired results once when the store is full, then tries again:
/// `claim` and `sweep` are the backend's own.
///
/// # Errors
///
/// As `claim`; `sweep`'s error if the sweep fails.
pub fn claim_with_sweep<T>(
    mut claim: impl FnMut() -> Result<T, StoreError>,
    sweep: impl FnOnce() -> Result<usize, StoreError>,
) -> Result<T, StoreError> {
    match claim() {
        Err(StoreError::StoreFull { .. }) if sweep()? > 0 => claim(),
        other => other,
    }
}

/// As [`claim_with_sweep`], for a backend whose `claim` and `sweep` are futures (its
/// async contract): the same rule, one sweep when full, then one more claim.
///
/// # Errors
///
/// As [`claim_with_sweep`].
pub async fn claim_with_sweep_async<T, Claimed, Swept>(
    mut claim: impl FnMut() -> Claimed,
    sweep: impl FnOnce() -> Swept,
) -> Result<T, StoreError>
where
    Claimed: Future<Output = Result<T, StoreError>>,
    Swept: Future<Output = Result<usize, StoreError>>,
{
    match claim().await {
        Err(StoreError::StoreFull { .. }) if sweep().await? > 0 => claim().await,
        other => other,
    }
}
