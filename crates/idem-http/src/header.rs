//! The `Idempotency-Key` request header: an RFC 8941 string (`"8e03978e-40d5"`, the IETF
//! draft's form) or a bare value (Stripe's form), read into a validated key.

use http::HeaderMap;
use idem_core::{IdempotencyKey, KeyError, QuotedKeyError};

/// The request header that carries the key (header names are case-insensitive).
pub const IDEMPOTENCY_KEY: &str = idem_core::IDEMPOTENCY_KEY_HEADER;
/// The response header set on a replayed response.
pub const IDEMPOTENT_REPLAYED: &str = idem_core::IDEMPOTENT_REPLAYED_HEADER;
/// The response header that tells, with
/// [`ConfigBuilder::advertise_expiry`](crate::ConfigBuilder::advertise_expiry), until when
/// the key's answer is replayed (an HTTP date); after it the key is forgotten and the same
/// key would run the request again. Not a standard header: the IETF draft leaves the
/// expiry to the server's documentation.
pub const IDEMPOTENCY_EXPIRES: &str = "idempotency-expires";

/// The last instant an HTTP date can name, 9999-12-31T23:59:59Z, in seconds since 1970.
const LAST_HTTP_DATE_SECS: u64 = 253_402_300_799;

/// `at` as an HTTP date, or `None` past the year 9999, which an HTTP date cannot name (a
/// store whose leases or results never run out, `Duration::MAX`, reaches it; `httpdate`
/// would panic on it).
pub(crate) fn http_date(at: std::time::SystemTime) -> Option<String> {
    let last = std::time::UNIX_EPOCH + std::time::Duration::from_secs(LAST_HTTP_DATE_SECS);
    (at <= last).then(|| httpdate::fmt_http_date(at))
}

/// Why an `Idempotency-Key` header was refused (answered 400 before anything was claimed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HeaderError {
    /// The header appeared more than once: one request, one key.
    #[error("Idempotency-Key appears {count} times; send it once")]
    Repeated {
        /// How many times.
        count: usize,
    },
    /// The value has bytes outside visible ASCII.
    #[error("Idempotency-Key must be visible ASCII")]
    NotAscii,
    /// A quoted value is not an RFC 8941 string: unterminated, a bad escape, or text after
    /// the closing quote.
    #[error("Idempotency-Key is not a valid quoted string: {reason}")]
    BadString {
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The key inside is not valid: empty, longer than 255 bytes, or with spaces at
    /// either end.
    #[error("Idempotency-Key is not a valid key: {0}")]
    Key(KeyError),
}

/// Reads the request's key: `Ok(None)` if it has none.
///
/// # Errors
///
/// [`HeaderError`] naming what is wrong with the header.
pub fn parse_key(headers: &HeaderMap) -> Result<Option<IdempotencyKey>, HeaderError> {
    let mut values = headers.get_all(IDEMPOTENCY_KEY).iter();
    let Some(value) = values.next() else { return Ok(None) };
    let extra = values.count();
    if extra > 0 {
        return Err(HeaderError::Repeated { count: extra + 1 });
    }
    let text = value.to_str().map_err(|_| HeaderError::NotAscii)?;
    let key = idem_core::key_text_of_header(text).map_err(|e| match e {
        QuotedKeyError::NotAscii => HeaderError::NotAscii,
        other => HeaderError::BadString { reason: other.reason() },
    })?;
    IdempotencyKey::new(&key).map(Some).map_err(HeaderError::Key)
}
