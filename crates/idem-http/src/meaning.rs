//! The fingerprint of a request's meaning: what of the body decides whether two requests
//! are the same request, when its bytes may differ (JSON field order, a timestamp the
//! client sets on every attempt).

use std::fmt;
use std::sync::Arc;

use http::request::Parts;
use serde_json::Value;

/// Why a request's body has no meaning the fingerprint can read (a body that should be
/// JSON and is not): answered 400 with this text, before anything is claimed. Say what
/// is wrong with the client's input; never the server's internals.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct MeaningError(pub String);

/// What of a request's body goes into its fingerprint, in place of the body's bytes: two
/// requests whose meanings are equal (byte for byte) are the same request. The method,
/// the path and query and the configured headers stay in the fingerprint beside it, so a
/// key sent to another route is still another request. The default is the body itself.
///
/// Any `Fn(&Parts, &[u8]) -> Result<Vec<u8>, MeaningError>` is a meaning.
pub trait Meaning: Send + Sync + 'static {
    /// The bytes that stand for this request's body.
    ///
    /// # Errors
    ///
    /// [`MeaningError`] if the body has no meaning this reads (answered 400).
    fn meaning(&self, parts: &Parts, body: &[u8]) -> Result<Vec<u8>, MeaningError>;
}

impl<F> Meaning for F
where
    F: Fn(&Parts, &[u8]) -> Result<Vec<u8>, MeaningError> + Send + Sync + 'static,
{
    fn meaning(&self, parts: &Parts, body: &[u8]) -> Result<Vec<u8>, MeaningError> {
        self(parts, body)
    }
}

/// A JSON body's meaning: the same value whatever the order of its objects' fields and
/// whatever its whitespace, without the fields named in [`ignoring`](Self::ignoring) (at
/// any depth: a `client_time` or `attempt` field a client sets on each attempt). Numbers
/// are compared as written (`1` and `1.0` differ, and so do two integers past what a
/// float holds), strings after unescaping. Of a field named twice in one object the last
/// counts, as serde_json reads it: a handler that reads such a body otherwise would act
/// on another request than the one fingerprinted, so it should refuse it. A body that
/// is not JSON is refused with 400, and so is one nested 128 arrays and objects deep or
/// more (serde_json's recursion limit; 127 is read), so a hostile body cannot exhaust the
/// stack.
///
/// ```
/// use idem_http::{Config, JsonMeaning};
///
/// let config = Config::builder()
///     .fingerprint_meaning(JsonMeaning::new().ignoring("client_time"))
///     .build()?;
/// # Ok::<(), idem_http::ConfigError>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct JsonMeaning {
    ignored: Vec<String>,
}

impl JsonMeaning {
    /// Every field counts.
    pub fn new() -> Self {
        Self::default()
    }

    /// Leaves fields named `field` out of the meaning, in every object of the body.
    #[must_use]
    pub fn ignoring(mut self, field: &str) -> Self {
        self.ignored.push(field.to_string());
        self
    }

    fn write(&self, value: &Value, out: &mut Vec<u8>) {
        match value {
            Value::Object(map) => {
                let mut fields: Vec<(&String, &Value)> =
                    map.iter().filter(|(name, _)| !self.ignored.contains(name)).collect();
                // serde_json's map is sorted unless a crate in the build turns on its
                // `preserve_order` feature (then it keeps the body's order): sort anyway.
                fields.sort_by(|a, b| a.0.cmp(b.0));
                out.push(b'{');
                for (i, (name, value)) in fields.into_iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    out.extend_from_slice(Value::String(name.clone()).to_string().as_bytes());
                    out.push(b':');
                    self.write(value, out);
                }
                out.push(b'}');
            }
            Value::Array(items) => {
                out.push(b'[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    self.write(item, out);
                }
                out.push(b']');
            }
            leaf => out.extend_from_slice(leaf.to_string().as_bytes()),
        }
    }
}

/// serde_json's own key for a number kept as written (`arbitrary_precision`, on here):
/// an object whose one key is this string reads as that number, so
/// `{"amount":{"$serde_json::private::Number":"100"}}` would mean `{"amount":100}`.
const NUMBER_TOKEN: &[u8] = b"$serde_json::private::Number";

/// Whether a string of `body` (JSON that parsed) reads, unescaped, as [`NUMBER_TOKEN`].
fn holds_number_token(body: &[u8]) -> bool {
    let mut at = 0;
    while let Some(open) = body[at..].iter().position(|b| *b == b'"') {
        let (mut i, mut text) = (at + open + 1, Vec::new());
        while let Some(&b) = body.get(i) {
            match b {
                b'"' => break,
                // `\uXXXX`: an ASCII code unit as itself, anything else as a byte the
                // token does not hold.
                b'\\' if body.get(i + 1) == Some(&b'u') => {
                    let unit = body.get(i + 2..i + 6).and_then(|h| std::str::from_utf8(h).ok());
                    let unit = unit.and_then(|h| u8::from_str_radix(h, 16).ok());
                    text.push(unit.filter(u8::is_ascii).unwrap_or(0xff));
                    i += 6;
                }
                // `\"`, `\\`, `\/` as themselves; `\n` and the other letters as the
                // control characters they stand for.
                b'\\' => {
                    let escaped = body.get(i + 1).copied().unwrap_or(0xff);
                    text.push(if matches!(escaped, b'"' | b'\\' | b'/') { escaped } else { 0 });
                    i += 2;
                }
                _ => {
                    text.push(b);
                    i += 1;
                }
            }
        }
        if text == NUMBER_TOKEN {
            return true;
        }
        at = i + 1;
        if at >= body.len() {
            return false;
        }
    }
    false
}

impl Meaning for JsonMeaning {
    fn meaning(&self, _parts: &Parts, body: &[u8]) -> Result<Vec<u8>, MeaningError> {
        let value: Value = serde_json::from_slice(body)
            .map_err(|error| MeaningError(format!("the body must be JSON: {error}")))?;
        if holds_number_token(body) {
            let said = "the body holds serde_json's private number key, which would read as a \
                        number: not a request this server takes";
            return Err(MeaningError(said.into()));
        }
        let mut out = Vec::with_capacity(body.len());
        self.write(&value, &mut out);
        Ok(out)
    }
}

/// The configured meaning, shared by every clone of a config.
#[derive(Clone)]
pub(crate) struct SharedMeaning(pub(crate) Arc<dyn Meaning>);

impl fmt::Debug for SharedMeaning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Meaning")
    }
}
