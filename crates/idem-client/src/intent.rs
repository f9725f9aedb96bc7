//! [`Intent`]: one user action, and the one key every attempt at it carries.

use std::fmt;

use http::HeaderValue;
use idem_core::{IdempotencyKey, KeyError};

/// One thing the user meant to do once (a click on "Pay", an order submitted), and its
/// `Idempotency-Key`. The key is made once, when the intent is, and every attempt at the
/// intent sends it: a retry can never get a new key, and two intents never share one
/// (a fresh UUID each, or the caller's own id).
///
/// Make the intent as close to the user's action as possible, and keep it as long as the
/// action may still be retried: an intent made per attempt is a new payment per attempt.
///
/// ```
/// use idem_client::Intent;
///
/// let pay = Intent::new();
/// assert_eq!(pay.key(), pay.clone().key(), "a clone is the same intent");
/// assert_ne!(pay.key(), Intent::new().key(), "another intent, another key");
/// // From the caller's own id, so the intent survives a restart of the process:
/// let order = Intent::from_id("order-1042")?;
/// assert_eq!(order.key(), "order-1042");
/// # Ok::<(), idem_core::KeyError>(())
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Intent {
    key: IdempotencyKey,
}

impl Intent {
    /// A new intent, its key a random UUID (version 4).
    pub fn new() -> Self {
        Self::from_uuid(uuid::Uuid::new_v4())
    }

    /// A new intent, its key a time-ordered UUID (version 7): keys sort by creation, which
    /// some stores index better.
    pub fn new_time_ordered() -> Self {
        Self::from_uuid(uuid::Uuid::now_v7())
    }

    fn from_uuid(uuid: uuid::Uuid) -> Self {
        let text = uuid.hyphenated().to_string();
        // A hyphenated UUID is 36 characters of hex digits and hyphens: always a valid key.
        let key = IdempotencyKey::new(&text).unwrap_or_else(|_| unreachable!("a UUID is a key"));
        Self { key }
    }

    /// The intent whose key is `id`, the caller's own identifier of the action (an order
    /// id): the same id gives the same key in any process, so a retry after a restart is
    /// still the same intent.
    ///
    /// # Errors
    ///
    /// [`KeyError`] if `id` is not a valid key (empty, over 255 bytes, or a character
    /// outside printable ASCII).
    pub fn from_id(id: &str) -> Result<Self, KeyError> {
        Ok(Self { key: IdempotencyKey::new(id)? })
    }

    /// The key every attempt sends.
    pub fn key(&self) -> &str {
        self.key.as_str()
    }

    /// The key as the header's value: an RFC 8941 string (`"order-1042"`), the form of
    /// the IETF draft, which idem-http reads as it reads a bare value.
    pub(crate) fn header(&self) -> HeaderValue {
        let mut quoted = String::with_capacity(self.key.as_str().len() + 2);
        quoted.push('"');
        for c in self.key.as_str().chars() {
            if c == '"' || c == '\\' {
                quoted.push('\\');
            }
            quoted.push(c);
        }
        quoted.push('"');
        // A key is printable ASCII, and so is its quoted form: always a valid value.
        HeaderValue::from_str(&quoted).unwrap_or_else(|_| unreachable!("printable ASCII"))
    }
}

impl Default for Intent {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for Intent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Intent").field(&self.key.as_str()).finish()
    }
}

/// Sets `intent`'s key as the request's `Idempotency-Key`, unless the caller set one of
/// its own (kept as it is); returns the key for the errors that name it: the intent's own
/// key, or the key the caller's header names as a server reads it (a quoted value
/// unquoted, so that `Intent::from_id` of it is the same key), or, if it names none, the
/// header as text.
pub(crate) fn key_to_send(headers: &mut http::HeaderMap, intent: &Intent) -> String {
    let name = http::HeaderName::from_static(idem_core::IDEMPOTENCY_KEY_HEADER);
    match headers.get(&name) {
        Some(own) => own
            .to_str()
            .ok()
            .and_then(|text| idem_core::key_text_of_header(text).ok())
            .unwrap_or_else(|| String::from_utf8_lossy(own.as_bytes()).into_owned()),
        None => {
            headers.insert(name, intent.header());
            intent.key().to_string()
        }
    }
}
