//! What every durable backend shares: the encoding of a stored result, checksummed and
//! bound to its key, and the reading of a stored row into a [`KeyState`].
//!
//! A backend crate (`idem-store-sqlite`, `idem-store-postgres`) stores each result as
//! [`encode_result`] writes it and reads it back with [`decode_result`]; a result type
//! becomes storable by implementing [`Durable`].
//!
//! ```
//! use idem_core::ScopedKey;
//! use idem_core::codec::{decode_result, encode_result};
//!
//! let key = ScopedKey::parse("tenant", "k")?;
//! let bytes = encode_result(&key, &"charged".to_string(), 1024)?;
//! assert_eq!(decode_result::<String>(&key, &bytes)?, "charged");
//! // Read under another key, the same bytes are refused, never replayed.
//! let other = ScopedKey::parse("tenant", "other")?;
//! assert!(decode_result::<String>(&other, &bytes).is_err());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::clock::Timestamp;
use crate::fingerprint::Fingerprint;
use crate::key::ScopedKey;
use crate::store::{Claim, KeyState, PendingClaim, StoreError};

/// Why stored bytes could not be written or read back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CodecError {
    /// The bytes are not what was written: damaged on disk, cut short, or another key's.
    #[error("corrupt record: {0}")]
    Corrupt(String),
    /// A result is larger than the backend's limit; nothing was stored.
    #[error("result of {len} bytes exceeds the limit of {max} bytes")]
    TooLarge {
        /// The refused result's size.
        len: usize,
        /// The limit.
        max: usize,
    },
}

impl From<CodecError> for StoreError {
    fn from(error: CodecError) -> Self {
        StoreError::Storage(Box::new(error))
    }
}

/// A result a durable store can keep: its bytes, and how to read them back. Stable
/// across releases: a durable store keeps what it wrote.
pub trait Durable: Sized {
    /// The payload's bytes.
    fn encode(&self) -> Vec<u8>;

    /// Reads back what `encode` wrote.
    ///
    /// # Errors
    ///
    /// [`CodecError::Corrupt`] if the bytes are not a valid encoding.
    fn decode(bytes: &[u8]) -> Result<Self, CodecError>;
}

impl Durable for String {
    fn encode(&self) -> Vec<u8> {
        self.as_bytes().to_vec()
    }
    fn decode(bytes: &[u8]) -> Result<Self, CodecError> {
        String::from_utf8(bytes.to_vec())
            .map_err(|_| CodecError::Corrupt("result is not UTF-8".into()))
    }
}

impl Durable for u64 {
    fn encode(&self) -> Vec<u8> {
        self.to_be_bytes().to_vec()
    }
    fn decode(bytes: &[u8]) -> Result<Self, CodecError> {
        let array: [u8; 8] =
            bytes.try_into().map_err(|_| CodecError::Corrupt("u64 is 8 bytes".into()))?;
        Ok(u64::from_be_bytes(array))
    }
}

/// The largest result a durable backend keeps by default, in bytes of its
/// [`Durable::encode`]: 2 MiB, room for an HTTP layer's default 1 MiB response with its
/// headers. Backends let the caller lower or raise it, and say it through
/// [`KeyStore::result_bytes_max`](crate::KeyStore::result_bytes_max).
pub const RESULT_BYTES_MAX_DEFAULT: usize = 2 << 20;

/// The version byte in front of every stored result: 2, a checksummed result. (1 was a
/// result without a checksum; backends refuse a store of that schema at open.)
const RESULT_ENCODING_V2: u8 = 2;
/// Version byte and checksum.
const RESULT_PREFIX: usize = 5;

/// The checksum of `payload` as the result of `key`: CRC-32 over the scope, the key (each
/// length-prefixed) and the payload, so a result read under another key, or with a byte
/// changed, fails it.
fn result_checksum(key: &ScopedKey, payload: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    for part in [key.scope().as_str(), key.key().as_str()] {
        hasher.update(&(part.len() as u32).to_le_bytes());
        hasher.update(part.as_bytes());
    }
    hasher.update(payload);
    hasher.finalize()
}

/// A result as a durable store keeps it for `key`: the version byte, the checksum
/// (little-endian), then [`Durable::encode`]'s bytes, at most `bytes_max` of them.
///
/// # Errors
///
/// [`CodecError::TooLarge`] (as a [`StoreError::Storage`]) past `bytes_max`.
pub fn encode_result<R: Durable>(
    key: &ScopedKey,
    result: &R,
    bytes_max: usize,
) -> Result<Vec<u8>, StoreError> {
    let payload = result.encode();
    if payload.len() > bytes_max {
        return Err(CodecError::TooLarge { len: payload.len(), max: bytes_max }.into());
    }
    let mut bytes = Vec::with_capacity(payload.len() + RESULT_PREFIX);
    bytes.push(RESULT_ENCODING_V2);
    bytes.extend_from_slice(&result_checksum(key, &payload).to_le_bytes());
    bytes.extend_from_slice(&payload);
    Ok(bytes)
}

/// Reads back what [`encode_result`] wrote for `key`.
///
/// # Errors
///
/// [`CodecError::Corrupt`] naming the key if the bytes fail their checksum (changed on
/// disk, or another key's), are cut short, or have an unknown version: never a replay of
/// wrong bytes.
pub fn decode_result<R: Durable>(key: &ScopedKey, bytes: &[u8]) -> Result<R, CodecError> {
    let corrupt = |what: &str| CodecError::Corrupt(format!("the result of key {key} {what}"));
    let Some((&version, rest)) = bytes.split_first() else {
        return Err(corrupt("is empty"));
    };
    if version != RESULT_ENCODING_V2 {
        return Err(corrupt(&format!("has unknown encoding {version}")));
    }
    let (checksum, payload) =
        rest.split_first_chunk::<4>().ok_or_else(|| corrupt("is cut short"))?;
    if u32::from_le_bytes(*checksum) != result_checksum(key, payload) {
        return Err(corrupt("fails its checksum"));
    }
    R::decode(payload)
}

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
    /// The stored result, as [`encode_result`] wrote it.
    pub result: Option<Vec<u8>>,
}

/// The state of `key` from its stored row, read at `now` (decoded with
/// [`decode_result`]). A live row for another fingerprint is `KeyReused`.
///
/// # Errors
///
/// [`StoreError::KeyReused`]; [`StoreError::Storage`] for a finished row without a result
/// or a result that does not decode.
pub fn row_state<R: Durable>(
    key: &ScopedKey,
    row: StoredRow,
    now: Timestamp,
) -> Result<KeyState<R>, StoreError> {
    let at = |ms: i64| Timestamp::from_millis(u64::try_from(ms).unwrap_or(0));
    if row.finished && at(row.expires_ms) <= now {
        return Ok(KeyState::Absent);
    }
    if !row.same_fingerprint {
        return Err(StoreError::KeyReused { key: key.clone() });
    }
    let lease_until = at(row.lease_expires_ms);
    Ok(match row.result {
        Some(bytes) if row.finished => KeyState::Finished(decode_result(key, &bytes)?),
        None if row.finished => {
            return Err(CodecError::Corrupt(format!("{key}: finished without a result")).into());
        }
        _ if now < lease_until => {
            KeyState::InFlight { retry_after: lease_until.saturating_duration_since(now) }
        }
        _ => KeyState::Pending { lease_expired_at: lease_until },
    })
}

/// Why a claim changed nothing, from the row the claim found (a SQL backend's claim
/// statement left it alone): another request's key, a replay (still encoded), or a live
/// lease.
///
/// # Errors
///
/// [`StoreError::KeyReused`]; [`CodecError::Corrupt`] for a finished row without a result.
pub fn claim_refused(
    key: &ScopedKey,
    row: StoredRow,
    now: Timestamp,
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
    let until = Timestamp::from_millis(u64::try_from(row.lease_expires_ms).unwrap_or(0));
    Ok(Claim::InFlight { retry_after: until.saturating_duration_since(now) })
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
    let fingerprint: [u8; 32] = fingerprint
        .try_into()
        .map_err(|_| CodecError::Corrupt(format!("{key}: fingerprint is not 32 bytes")))?;
    let lease_expired_at = Timestamp::from_millis(u64::try_from(lease_expired_ms).unwrap_or(0));
    Ok(PendingClaim { key, fingerprint: Fingerprint::from_bytes(fingerprint), lease_expired_at })
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
