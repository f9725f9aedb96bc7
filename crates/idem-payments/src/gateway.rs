//! The card network, as the processor sees it: charge with a key, look up by key.

use std::fmt;

use crate::money::{Amount, Currency, PaymentRequest};

/// The key the gateway deduplicates by: derived from the claimed key (never from the
/// attempt), so every retry and every recovery of one payment sends the same key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GatewayKey(String);

impl GatewayKey {
    /// Derives the gateway key of a claimed key: the hex SHA-256 of its scope and key,
    /// length-prefixed (see [`idem_core::Fingerprint`]).
    pub fn derive(key: &idem_core::ScopedKey) -> Self {
        let digest = idem_core::Fingerprint::builder("idem-payments/gateway-key")
            .str("scope", key.scope().as_str())
            .str("key", key.key().as_str())
            .finish();
        Self(digest.to_hex())
    }

    /// The key's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for GatewayKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The gateway's id for a charge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChargeId(pub u64);

/// `ch_42`, the form a gateway's dashboard shows.
impl fmt::Display for ChargeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ch_{}", self.0)
    }
}

/// A text that is not a charge id as [`ChargeId`]'s `Display` writes it (`ch_42`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a charge id: expected ch_ and a number, such as ch_42")]
pub struct BadChargeId(pub String);

/// Parses `ch_42` back, as `Display` writes it.
///
/// ```
/// use idem_payments::ChargeId;
///
/// assert_eq!("ch_42".parse(), Ok(ChargeId(42)));
/// assert_eq!(ChargeId(7).to_string().parse(), Ok(ChargeId(7)));
/// assert!("42".parse::<ChargeId>().is_err());
/// ```
impl std::str::FromStr for ChargeId {
    type Err = BadChargeId;

    fn from_str(s: &str) -> Result<Self, BadChargeId> {
        let digits = s.strip_prefix("ch_").filter(|d| d.bytes().all(|b| b.is_ascii_digit()));
        digits.and_then(|d| d.parse().ok()).map(ChargeId).ok_or_else(|| BadChargeId(s.to_owned()))
    }
}

/// A charge the gateway made.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Charge {
    /// The gateway's id.
    pub id: ChargeId,
    /// Whose card was charged: the processor refuses a charge for another customer than
    /// the request's (see [`PayError::GatewayMismatch`](crate::PayError::GatewayMismatch)).
    pub customer: String,
    /// How much.
    pub amount: Amount,
    /// In what.
    pub currency: Currency,
}

/// Why a charge did not (or may not have) happened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GatewayError {
    /// A definitive answer: the card was declined. Nothing was charged; retrying with the
    /// same key gives the same answer.
    #[error("declined: {0}")]
    Declined(String),
    /// The request never reached the network (connection refused, rate limited before
    /// sending): nothing was charged, a retry may charge.
    #[error("refused before sending: {0}")]
    Refused(String),
    /// The request was sent and no answer came back (a timeout, a dropped connection):
    /// the charge may or may not have happened. Only `lookup` can tell.
    #[error("no answer after sending: {0}")]
    Ambiguous(String),
}

/// What `lookup` knows about a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// Charged, with this charge.
    Charged(Charge),
    /// Declined, with this reason.
    Declined(String),
    /// No charge was ever made with this key.
    NotCharged,
    /// The gateway cannot say now (it is down, or has forgotten the key).
    Unknown,
}

/// A payment gateway. It is handed the gateway key with every charge, deduplicates by it,
/// and can be asked afterwards what happened to a key.
pub trait Gateway: Send + Sync {
    /// Charges the request's customer its amount in its currency, once per `key`: a
    /// repeat with the same key returns the first charge (or decline) instead of charging
    /// again. The request was validated when it was made, so a gateway never sees a
    /// negative amount or an unknown currency. The charge returned names the customer,
    /// amount and currency actually charged; the processor holds them against the request
    /// and never stores a charge that differs.
    ///
    /// # Errors
    ///
    /// [`GatewayError`]: declined, refused before sending, or ambiguous.
    fn charge(&self, key: &GatewayKey, request: &PaymentRequest) -> Result<Charge, GatewayError>;

    /// What happened to `key`.
    fn lookup(&self, key: &GatewayKey) -> Lookup;

    /// Marks a charge refunded. An assignment to a named target: idempotent by its shape,
    /// it needs no key; a repeat leaves the same state. Returns whether the charge exists.
    fn set_refunded(&self, charge: ChargeId) -> bool;
}

/// A shared gateway is a gateway: several processors can hold one through an `Arc`.
impl<G: Gateway + ?Sized> Gateway for std::sync::Arc<G> {
    fn charge(&self, key: &GatewayKey, request: &PaymentRequest) -> Result<Charge, GatewayError> {
        (**self).charge(key, request)
    }

    fn lookup(&self, key: &GatewayKey) -> Lookup {
        (**self).lookup(key)
    }

    fn set_refunded(&self, charge: ChargeId) -> bool {
        (**self).set_refunded(charge)
    }
}
