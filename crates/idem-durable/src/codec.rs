//! What makes a result storable by a durable backend: [`Durable`], its bytes and how to
//! read them back, and [`CodecError`], why stored bytes were refused. A problem crate
//! whose results a durable store keeps (a payment's outcome, a notification's, an HTTP
//! response) implements [`Durable`] for them; the backends wrap the bytes in the
//! checksummed encoding of [`result`](crate::result).
//!
//! ```
//! use idem_durable::Durable;
//!
//! let bytes = "charged".to_string().encode();
//! assert_eq!(String::decode(&bytes)?, "charged");
//! assert!(String::decode(&[0xff]).is_err());
//! # Ok::<(), idem_durable::CodecError>(())
//! ```

use idem_core::StoreError;

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
