//! The encoding of a stored result, checksummed and bound to its key: what every durable
//! backend writes and reads back.
//!
//! ```
//! use idem_core::ScopedKey;
//! use idem_durable::result::{decode_result, encode_result};
//!
//! let key = ScopedKey::parse("tenant", "k")?;
//! let bytes = encode_result(&key, &"charged".to_string(), 1024)?;
//! assert_eq!(decode_result::<String>(&key, &bytes)?, "charged");
//! // Read under another key, the same bytes are refused, never replayed.
//! let other = ScopedKey::parse("tenant", "other")?;
//! assert!(decode_result::<String>(&other, &bytes).is_err());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::codec::{CodecError, Durable};
use idem_core::{ScopedKey, StoreError};

/// The largest result a durable backend keeps by default, in bytes of its
/// [`Durable::encode`]: 2 MiB, room for an HTTP layer's default 1 MiB response with its
/// headers. Backends let the caller lower or raise it, and say it through
/// [`KeyStore::result_bytes_max`](idem_core::KeyStore::result_bytes_max).
pub const RESULT_BYTES_MAX_DEFAULT: usize = 2 << 20;

/// The version byte in front of every stored result: 2, a checksummed result. (1 was a
/// result without a checksum; backends refuse a store of that schema at open.)
const RESULT_ENCODING_V2: u8 = 2;
/// The bytes a stored result takes beside its payload (at most `bytes_max` of
/// [`encode_result`]): the version byte and the checksum. A store whose backend bounds one
/// value (Redis's `proto-max-bulk-len`) must take `bytes_max` plus these.
pub const RESULT_PREFIX: usize = 5;

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
