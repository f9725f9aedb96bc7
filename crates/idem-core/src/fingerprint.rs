//! Request fingerprints: a stable digest of what was asked, so that a key reused for a
//! different request is refused instead of replaying someone else's answer.

use std::fmt;

use sha2::{Digest, Sha256};

/// The version of the canonical encoding; hashed first, so a future encoding can never
/// collide with this one. Durable stores keep fingerprints, so this encoding is frozen.
const ENCODING_V1: &[u8] = b"idem-fingerprint-v1";

/// One byte per field kind, so that `u64 5` and the 8 bytes `00..05` never encode alike.
#[derive(Clone, Copy)]
#[repr(u8)]
enum Tag {
    Domain = 0,
    Bytes = 1,
    Str = 2,
    U64 = 3,
    I64 = 4,
    U128 = 5,
    Bool = 6,
}

/// A SHA-256 digest of a canonical encoding of a request.
///
/// The encoding is unambiguous: every field is written as a kind tag, its name and its
/// value, each variable-length part prefixed by its length, so `("ab", "c")` and
/// `("a", "bc")` differ. It is identical across processes, platforms and releases.
///
/// ```
/// use idem_core::Fingerprint;
///
/// let a = Fingerprint::builder("payment")
///     .str("currency", "EUR")
///     .u64("amount_minor", 1250)
///     .finish();
/// let b = Fingerprint::builder("payment")
///     .str("currency", "EUR")
///     .u64("amount_minor", 1251)
///     .finish();
/// assert_ne!(a, b);
/// assert_eq!(a.to_hex().len(), 64);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Fingerprint([u8; 32]);

impl Fingerprint {
    /// Starts a fingerprint for one kind of request (`domain`, for example `"payment"`), so
    /// that two kinds of request with the same fields never share a fingerprint.
    pub fn builder(domain: &str) -> FingerprintBuilder {
        let mut builder = FingerprintBuilder { hasher: Sha256::new() };
        builder.hasher.update(ENCODING_V1);
        builder.write(Tag::Domain, "", domain.as_bytes());
        builder
    }

    /// Rebuilds a fingerprint from its 32 bytes, as a durable store reads it back.
    pub const fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    /// The 32 digest bytes.
    pub const fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// Lowercase hexadecimal, 64 characters.
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Fingerprint({})", &self.to_hex()[..16])
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

/// Adds named fields to a [`Fingerprint`]; see [`Fingerprint::builder`].
///
/// Fields are hashed in the order they are added; a request type adds its fields in one
/// fixed order.
#[derive(Clone)]
pub struct FingerprintBuilder {
    hasher: Sha256,
}

impl fmt::Debug for FingerprintBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FingerprintBuilder").finish_non_exhaustive()
    }
}

impl FingerprintBuilder {
    fn write(&mut self, tag: Tag, name: &str, value: &[u8]) {
        self.hasher.update([tag as u8]);
        self.hasher.update((name.len() as u64).to_be_bytes());
        self.hasher.update(name.as_bytes());
        self.hasher.update((value.len() as u64).to_be_bytes());
        self.hasher.update(value);
    }

    /// Adds a field of raw bytes.
    #[must_use]
    pub fn bytes(mut self, name: &str, value: &[u8]) -> Self {
        self.write(Tag::Bytes, name, value);
        self
    }

    /// Adds a text field.
    #[must_use]
    pub fn str(mut self, name: &str, value: &str) -> Self {
        self.write(Tag::Str, name, value.as_bytes());
        self
    }

    /// Adds an unsigned integer field.
    #[must_use]
    pub fn u64(mut self, name: &str, value: u64) -> Self {
        self.write(Tag::U64, name, &value.to_be_bytes());
        self
    }

    /// Adds a signed integer field.
    #[must_use]
    pub fn i64(mut self, name: &str, value: i64) -> Self {
        self.write(Tag::I64, name, &value.to_be_bytes());
        self
    }

    /// Adds a 128-bit unsigned integer field (amounts, ids).
    #[must_use]
    pub fn u128(mut self, name: &str, value: u128) -> Self {
        self.write(Tag::U128, name, &value.to_be_bytes());
        self
    }

    /// Adds a boolean field.
    #[must_use]
    pub fn bool(mut self, name: &str, value: bool) -> Self {
        self.write(Tag::Bool, name, &[u8::from(value)]);
        self
    }

    /// The digest of everything added.
    pub fn finish(self) -> Fingerprint {
        Fingerprint(self.hasher.finalize().into())
    }
}
