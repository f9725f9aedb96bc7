//! The response kept with a key: its status, its allow-listed headers and its body.

use bytes::Bytes;
use http::{HeaderName, HeaderValue, StatusCode};
use idem_durable::{CodecError, Durable};

/// A response as the store keeps it, replayed to every repeat of its request.
///
/// Cheap to clone (the body is shared), so a replay from the memory store copies no body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredResponse {
    /// The status.
    pub status: StatusCode,
    /// The allow-listed headers ([`ConfigBuilder::replay_headers`](crate::ConfigBuilder)).
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// The body.
    pub body: Bytes,
}

/// The encoding's version: the first byte of every stored response.
const VERSION: u8 = 1;

/// The most response headers stored with a key (the allow-list's values, in order).
pub const STORED_HEADERS_MAX: usize = 64;

/// The most bytes a stored response's headers take in its encoding (each name and value
/// with their lengths): 4 KiB. A response whose replayed headers take more is kept as a
/// problem saying it was too large to keep, as one whose body is over the limit.
pub const STORED_HEADER_BYTES_MAX: usize = 4 << 10;

/// What a stored response takes in its encoding beside its headers and body: version,
/// status, header count, body length.
pub const STORED_ENVELOPE_BYTES: usize = 1 + 2 + 2 + 4;

/// What one header takes in the encoding beside its name and value: the name's length
/// (`u16`) and the value's (`u32`).
const HEADER_ENCODING_BYTES: usize = 2 + 4;

/// The largest problem body that stands in for a response too large to keep; the layer
/// asserts every stand-in it builds is within it (the tests' stand-ins take 227 to 245
/// bytes).
pub(crate) const NOT_KEPT_BODY_BYTES_MAX: usize = 512;

/// The largest problem kept in place of a response too large to keep, with only its
/// content type: the least a store must be able to keep (an idempotency layer on a store
/// that keeps less is refused when it is built).
pub const NOT_KEPT_BYTES_MAX: usize = STORED_ENVELOPE_BYTES
    + (HEADER_ENCODING_BYTES + "content-type".len() + "application/problem+json".len())
    + NOT_KEPT_BODY_BYTES_MAX;

impl StoredResponse {
    /// The response this stored one answers with the first time: its status, headers and
    /// body (a replay adds `Idempotent-Replayed: true`). A handler that stores its own
    /// answer ([`StoredByHandler`](crate::StoredByHandler)) returns this.
    pub fn to_response<B: From<Bytes>>(&self) -> http::Response<B> {
        let mut response = http::Response::new(B::from(self.body.clone()));
        *response.status_mut() = self.status;
        for (name, value) in &self.headers {
            response.headers_mut().append(name.clone(), value.clone());
        }
        response
    }

    /// The bytes this response takes in a durable store ([`Durable::encode`]'s length).
    pub fn encoded_len(&self) -> usize {
        STORED_ENVELOPE_BYTES + headers_len(&self.headers) + self.body.len()
    }
}

/// The bytes `headers` take in a stored response's encoding.
pub(crate) fn headers_len(headers: &[(HeaderName, HeaderValue)]) -> usize {
    headers.iter().map(|(n, v)| HEADER_ENCODING_BYTES + n.as_str().len() + v.len()).sum()
}

/// Stable across releases, as [`Durable`] requires: version, status, headers (count, then
/// each name and value with its length), body (length, bytes). Little-endian.
impl Durable for StoredResponse {
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.encoded_len());
        out.push(VERSION);
        out.extend_from_slice(&self.status.as_u16().to_le_bytes());
        out.extend_from_slice(&(self.headers.len() as u16).to_le_bytes());
        for (name, value) in &self.headers {
            out.extend_from_slice(&(name.as_str().len() as u16).to_le_bytes());
            out.extend_from_slice(name.as_str().as_bytes());
            out.extend_from_slice(&(value.len() as u32).to_le_bytes());
            out.extend_from_slice(value.as_bytes());
        }
        out.extend_from_slice(&(self.body.len() as u32).to_le_bytes());
        out.extend_from_slice(&self.body);
        out
    }

    fn decode(bytes: &[u8]) -> Result<Self, CodecError> {
        let corrupt = |what: &str| CodecError::Corrupt(format!("stored response: {what}"));
        let mut r = Reader(bytes);
        if r.take(1).ok_or_else(|| corrupt("empty"))? != [VERSION] {
            return Err(corrupt("unknown version"));
        }
        let status = r.u16().ok_or_else(|| corrupt("no status"))?;
        let status = StatusCode::from_u16(status).map_err(|_| corrupt("invalid status"))?;
        let count = r.u16().ok_or_else(|| corrupt("no header count"))?;
        // A hostile count allocates no more than the layer ever keeps.
        let mut headers = Vec::with_capacity(usize::from(count).min(STORED_HEADERS_MAX));
        for _ in 0..count {
            let name_len = r.u16().ok_or_else(|| corrupt("header cut short"))?;
            let name = r.take(usize::from(name_len)).ok_or_else(|| corrupt("header cut short"))?;
            let name = HeaderName::from_bytes(name).map_err(|_| corrupt("invalid header name"))?;
            let value_len = r.u32().ok_or_else(|| corrupt("header cut short"))?;
            let value = r.take(value_len as usize).ok_or_else(|| corrupt("header cut short"))?;
            let value = HeaderValue::from_bytes(value).map_err(|_| corrupt("bad header value"))?;
            headers.push((name, value));
        }
        let body_len = r.u32().ok_or_else(|| corrupt("no body length"))?;
        let body = r.take(body_len as usize).ok_or_else(|| corrupt("body cut short"))?;
        if !r.0.is_empty() {
            return Err(corrupt("bytes after the body"));
        }
        Ok(Self { status, headers, body: Bytes::copy_from_slice(body) })
    }
}

/// Reads little-endian fields off the front of a slice.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = self.0.split_at_checked(n)?;
        self.0 = rest;
        Some(head)
    }

    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_le_bytes([b[0], b[1]]))
    }

    fn u32(&mut self) -> Option<u32> {
        self.take(4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
}
