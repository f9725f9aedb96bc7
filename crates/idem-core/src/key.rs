//! Validated idempotency keys and the scope they live in.

use std::fmt;

use crate::sync::Arc;

/// The longest key or scope, in bytes.
pub const KEY_LEN_MAX: usize = 255;

/// The HTTP request header that carries a key (`Idempotency-Key`, lower case as header
/// names compare): where idem-http reads it and idem-client writes it.
pub const IDEMPOTENCY_KEY_HEADER: &str = "idempotency-key";
/// The HTTP response header that marks an answer replayed for its key (`true`): where
/// idem-http sets it and idem-client reads it.
pub const IDEMPOTENT_REPLAYED_HEADER: &str = "idempotent-replayed";

/// Why an `Idempotency-Key` header value that opens with a quote is not an RFC 8941
/// string (see [`key_text_of_header`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum QuotedKeyError {
    /// The closing quote is missing.
    Unterminated,
    /// A backslash escapes something other than `"` or `\`.
    BadEscape,
    /// Text follows the closing quote.
    TextAfterQuote,
    /// A character outside visible ASCII (and space).
    NotAscii,
}

impl QuotedKeyError {
    /// What is wrong, in a few words.
    pub fn reason(self) -> &'static str {
        match self {
            Self::Unterminated => "no closing quote",
            Self::BadEscape => "only \\\" and \\\\ escape",
            Self::TextAfterQuote => "text after the closing quote",
            Self::NotAscii => "a character outside visible ASCII",
        }
    }
}

impl fmt::Display for QuotedKeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.reason())
    }
}

impl std::error::Error for QuotedKeyError {}

/// The key an `Idempotency-Key` header value names, as a server reads it: the content of
/// an RFC 8941 string (`"order-1042"`, the IETF draft's form) or a bare value as it is
/// (Stripe's form), spaces and tabs around it dropped. Where idem-http reads a request's
/// key and idem-client names the key a caller set itself. Not yet validated as a key
/// ([`IdempotencyKey::new`] does that).
///
/// ```
/// assert_eq!(idem_core::key_text_of_header(r#" "order-\"1042\"" "#)?, r#"order-"1042""#);
/// assert_eq!(idem_core::key_text_of_header("order-1042")?, "order-1042");
/// assert!(idem_core::key_text_of_header(r#""order-1042"#).is_err());
/// # Ok::<(), idem_core::QuotedKeyError>(())
/// ```
///
/// # Errors
///
/// [`QuotedKeyError`] if the value opens with a quote and is not an RFC 8941 string.
pub fn key_text_of_header(value: &str) -> Result<String, QuotedKeyError> {
    // RFC 8941 parsing drops spaces around a field value; HTTP drops tabs too.
    let text = value.trim_matches([' ', '\t']);
    let Some(rest) = text.strip_prefix('"') else { return Ok(text.to_string()) };
    let mut key = String::with_capacity(rest.len());
    let mut chars = rest.chars();
    loop {
        match chars.next() {
            None => return Err(QuotedKeyError::Unterminated),
            Some('"') => break,
            Some('\\') => match chars.next() {
                Some(c @ ('"' | '\\')) => key.push(c),
                _ => return Err(QuotedKeyError::BadEscape),
            },
            Some(c @ ' '..='~') => key.push(c),
            Some(_) => return Err(QuotedKeyError::NotAscii),
        }
    }
    if chars.next().is_some() {
        return Err(QuotedKeyError::TextAfterQuote);
    }
    Ok(key)
}

/// Why a key or scope was refused. Its message says "key"; [`ScopedKey::parse`], which
/// validates both parts, says which part with a [`ScopedKeyError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum KeyError {
    /// The input was the empty string.
    Empty,
    /// The input was longer than [`KEY_LEN_MAX`] bytes.
    TooLong {
        /// The length of the refused input, in bytes.
        len_bytes: usize,
    },
    /// A byte outside printable ASCII (0x20 to 0x7E).
    BadByte {
        /// The zero-based position of the first bad byte.
        position: usize,
        /// The bad byte itself.
        byte: u8,
    },
    /// A space at the start or the end. HTTP strips whitespace around a header value, so
    /// such a key would come back through a proxy as another key on a retry. Spaces
    /// inside are allowed.
    SurroundingSpace {
        /// The zero-based position of the space: 0, or the last byte.
        position: usize,
    },
}

impl KeyError {
    /// The message, naming the refused part `part` ("key" or "scope").
    fn describe(&self, f: &mut fmt::Formatter<'_>, part: &str) -> fmt::Result {
        match *self {
            Self::Empty => write!(f, "{part} is empty"),
            Self::TooLong { len_bytes } => {
                write!(f, "{part} is {len_bytes} bytes long, the limit is {KEY_LEN_MAX}")
            }
            Self::BadByte { position, byte } => write!(
                f,
                "{part} has byte 0x{byte:02x} at position {position}, only printable ASCII is \
                 allowed"
            ),
            Self::SurroundingSpace { position } => write!(
                f,
                "{part} has a space at position {position}; spaces at either end are not allowed"
            ),
        }
    }
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.describe(f, "key")
    }
}

impl std::error::Error for KeyError {}

/// Which part of a scoped key [`ScopedKey::parse`] refused, and why.
///
/// ```
/// use idem_core::{KeyError, ScopedKey, ScopedKeyError};
///
/// let refused = ScopedKey::parse("", "k").expect_err("an empty scope");
/// assert_eq!(refused, ScopedKeyError::Scope(KeyError::Empty));
/// assert_eq!(refused.to_string(), "scope is empty");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ScopedKeyError {
    /// The scope is not valid.
    Scope(KeyError),
    /// The key is not valid (the scope was).
    Key(KeyError),
}

impl ScopedKeyError {
    /// What is wrong with the refused part, whichever it is.
    pub fn error(&self) -> KeyError {
        match *self {
            Self::Scope(e) | Self::Key(e) => e,
        }
    }
}

impl fmt::Display for ScopedKeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Scope(e) => e.describe(f, "scope"),
            Self::Key(e) => e.describe(f, "key"),
        }
    }
}

impl std::error::Error for ScopedKeyError {}

/// Which part was refused is dropped: for callers whose errors are [`KeyError`]s.
impl From<ScopedKeyError> for KeyError {
    fn from(e: ScopedKeyError) -> Self {
        e.error()
    }
}

fn validate(input: &str) -> Result<(), KeyError> {
    let bytes = input.as_bytes();
    if bytes.is_empty() {
        return Err(KeyError::Empty);
    }
    if bytes.len() > KEY_LEN_MAX {
        return Err(KeyError::TooLong { len_bytes: bytes.len() });
    }
    if let Some(position) = bytes.iter().position(|b| !(0x20..=0x7e).contains(b)) {
        return Err(KeyError::BadByte { position, byte: bytes[position] });
    }
    // Printable ASCII has one whitespace byte: the space.
    let last = bytes.len() - 1;
    match (bytes[0], bytes[last]) {
        (b' ', _) => Err(KeyError::SurroundingSpace { position: 0 }),
        (_, b' ') => Err(KeyError::SurroundingSpace { position: last }),
        _ => Ok(()),
    }
}

macro_rules! validated_string {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(Arc<str>);

        impl $name {
            /// Validates `input`: 1 to 255 bytes of printable ASCII (0x20 to 0x7E), with no
            /// space at either end (spaces inside are fine).
            ///
            /// # Errors
            ///
            /// [`KeyError::Empty`], [`KeyError::TooLong`], [`KeyError::BadByte`] (naming
            /// the first bad position) or [`KeyError::SurroundingSpace`], saying what is
            /// wrong with `input`.
            pub fn new(input: &str) -> Result<Self, KeyError> {
                validate(input)?;
                Ok(Self(input.into()))
            }

            /// The validated text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({:?})", stringify!($name), &*self.0)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl std::str::FromStr for $name {
            type Err = KeyError;
            fn from_str(s: &str) -> Result<Self, KeyError> {
                Self::new(s)
            }
        }

        impl TryFrom<&str> for $name {
            type Error = KeyError;
            fn try_from(s: &str) -> Result<Self, KeyError> {
                Self::new(s)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }
    };
}

validated_string! {
    /// An idempotency key chosen by the caller, once per intended operation, and sent again
    /// on every retry of that operation.
    ///
    /// ```
    /// use idem_core::{IdempotencyKey, KeyError};
    ///
    /// let key = IdempotencyKey::new("order-1234/checkout")?;
    /// assert_eq!(key.as_str(), "order-1234/checkout");
    /// assert_eq!(IdempotencyKey::new(""), Err(KeyError::Empty));
    /// assert_eq!(
    ///     IdempotencyKey::new("tab\there"),
    ///     Err(KeyError::BadByte { position: 3, byte: b'\t' }),
    /// );
    /// # Ok::<(), KeyError>(())
    /// ```
    IdempotencyKey
}

validated_string! {
    /// The namespace a key lives in: a tenant, an account or an endpoint. Two customers who
    /// pick the same key under different scopes never see each other's records.
    ///
    /// ```
    /// use idem_core::Scope;
    ///
    /// let scope = Scope::new("merchant:42")?;
    /// assert_eq!(scope.to_string(), "merchant:42");
    /// # Ok::<(), idem_core::KeyError>(())
    /// ```
    Scope
}

impl Scope {
    /// `self/child`: a scope nested in this one, as a tenant's customers live in the
    /// tenant's scope. Both parts are valid already, so only the joined length is checked
    /// (no second validation, no string growing as it is built): this runs on every request.
    ///
    /// Two different (parent, child) pairs make the same scope only if a parent contains
    /// `/`; a caller that lets tenants choose parents must refuse `/` in them.
    ///
    /// ```
    /// use idem_core::{KeyError, Scope};
    ///
    /// let customer = Scope::new("merchant-9")?.join(&Scope::new("cus_42")?)?;
    /// assert_eq!(customer.as_str(), "merchant-9/cus_42");
    ///
    /// let long = Scope::new(&"m".repeat(200))?;
    /// assert_eq!(long.join(&long), Err(KeyError::TooLong { len_bytes: 401 }));
    /// # Ok::<(), KeyError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`KeyError::TooLong`] if `parent/child` exceeds [`KEY_LEN_MAX`] bytes.
    pub fn join(&self, child: &Scope) -> Result<Scope, KeyError> {
        let len_bytes = self.0.len() + 1 + child.0.len();
        if len_bytes > KEY_LEN_MAX {
            return Err(KeyError::TooLong { len_bytes });
        }
        // Printable ASCII throughout, the first byte is the parent's and the last the
        // child's (neither a space): valid by construction.
        let mut joined = String::with_capacity(len_bytes);
        joined.push_str(&self.0);
        joined.push('/');
        joined.push_str(&child.0);
        Ok(Scope(joined.into()))
    }
}

/// A key within its scope: what the store actually indexes by.
///
/// ```
/// use idem_core::{IdempotencyKey, Scope, ScopedKey};
///
/// let a = ScopedKey::new(Scope::new("customer:1")?, IdempotencyKey::new("k")?);
/// let b = ScopedKey::new(Scope::new("customer:2")?, IdempotencyKey::new("k")?);
/// assert_ne!(a, b);
/// # Ok::<(), idem_core::KeyError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ScopedKey {
    scope: Scope,
    key: IdempotencyKey,
}

impl ScopedKey {
    /// Joins a scope and a key.
    pub fn new(scope: Scope, key: IdempotencyKey) -> Self {
        Self { scope, key }
    }

    /// Validates both parts at once.
    ///
    /// # Errors
    ///
    /// A [`ScopedKeyError`] naming whichever part is invalid, the scope first.
    pub fn parse(scope: &str, key: &str) -> Result<Self, ScopedKeyError> {
        let scope = Scope::new(scope).map_err(ScopedKeyError::Scope)?;
        let key = IdempotencyKey::new(key).map_err(ScopedKeyError::Key)?;
        Ok(Self::new(scope, key))
    }

    /// The scope part.
    pub fn scope(&self) -> &Scope {
        &self.scope
    }

    /// The key part.
    pub fn key(&self) -> &IdempotencyKey {
        &self.key
    }
}

impl fmt::Display for ScopedKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.scope, self.key)
    }
}
