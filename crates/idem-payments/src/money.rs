//! Validated payment requests: amounts in minor units, known currencies, customers.

use std::fmt;

use idem_core::Fingerprint;

/// Why a payment request was refused before anything was claimed or charged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ValidationError {
    /// The amount was zero or negative.
    #[error("amount must be positive, got {0} minor units")]
    NonPositiveAmount(i64),
    /// The currency is not one this processor accepts.
    #[error("unknown currency {0:?}")]
    UnknownCurrency(String),
    /// The customer id was empty, too long, not printable ASCII, or had whitespace at
    /// either end.
    #[error("invalid customer id: {0}")]
    Customer(idem_core::KeyError),
    /// The merchant id was empty, too long, not printable ASCII, or had whitespace at
    /// either end.
    #[error("invalid merchant id: {0}")]
    Merchant(idem_core::KeyError),
    /// The merchant id contains `/`, the separator between merchant and customer in a
    /// payment's scope. Refused so that two (merchant, customer) pairs can never share a
    /// scope: `shop` + `eu/cus_1` and `shop/eu` + `cus_1` would.
    #[error("merchant id has '/' at byte {position}; '/' separates merchant and customer")]
    MerchantSeparator {
        /// The zero-based byte position of the first `/`.
        position: usize,
    },
    /// The merchant and customer ids are each valid but too long together for one scope
    /// (`merchant/customer`, at most [`idem_core::KEY_LEN_MAX`] bytes). Use a shorter
    /// customer id for this merchant.
    #[error(
        "merchant ({merchant_bytes} bytes) and customer ({customer_bytes} bytes) are too \
         long together: merchant + '/' + customer must be at most {max_bytes} bytes"
    )]
    ScopeTooLong {
        /// The merchant id's length in bytes.
        merchant_bytes: usize,
        /// The customer id's length in bytes.
        customer_bytes: usize,
        /// The longest scope, [`idem_core::KEY_LEN_MAX`].
        max_bytes: usize,
    },
}

/// A positive amount in minor units (cents, pence, yen).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Amount(u64);

impl Amount {
    /// Validates an amount in minor units.
    ///
    /// # Errors
    ///
    /// [`ValidationError::NonPositiveAmount`] for zero or a negative amount.
    pub fn from_minor(minor: i64) -> Result<Self, ValidationError> {
        u64::try_from(minor)
            .ok()
            .filter(|m| *m > 0)
            .map(Self)
            .ok_or(ValidationError::NonPositiveAmount(minor))
    }

    /// The amount in minor units.
    pub fn minor(self) -> u64 {
        self.0
    }
}

/// The currencies this processor accepts (ISO 4217).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Currency {
    /// Euro.
    Eur,
    /// US dollar.
    Usd,
    /// Pound sterling.
    Gbp,
    /// Yen (no minor unit: amounts are whole yen).
    Jpy,
    /// Swiss franc.
    Chf,
}

impl Currency {
    /// Parses an ISO 4217 code, upper case.
    ///
    /// # Errors
    ///
    /// [`ValidationError::UnknownCurrency`] for any other text.
    pub fn parse(code: &str) -> Result<Self, ValidationError> {
        Ok(match code {
            "EUR" => Self::Eur,
            "USD" => Self::Usd,
            "GBP" => Self::Gbp,
            "JPY" => Self::Jpy,
            "CHF" => Self::Chf,
            other => return Err(ValidationError::UnknownCurrency(other.to_string())),
        })
    }

    /// The ISO 4217 code.
    pub fn code(self) -> &'static str {
        match self {
            Self::Eur => "EUR",
            Self::Usd => "USD",
            Self::Gbp => "GBP",
            Self::Jpy => "JPY",
            Self::Chf => "CHF",
        }
    }
}

impl fmt::Display for Currency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// What a customer asked to pay: validated at construction, so a `PaymentRequest` that
/// exists is one the processor may claim a key for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PaymentRequest {
    customer: idem_core::Scope,
    amount: Amount,
    currency: Currency,
    /// Computed once at construction: a SHA-256 is most of a replay's cost.
    fingerprint: Fingerprint,
}

impl PaymentRequest {
    /// Validates every field.
    ///
    /// # Errors
    ///
    /// The first [`ValidationError`]: customer, then amount, then currency.
    ///
    /// ```
    /// use idem_payments::{PaymentRequest, ValidationError};
    ///
    /// let ok = PaymentRequest::new("cus_42", 1250, "EUR")?;
    /// assert_eq!(ok.amount().minor(), 1250);
    /// let zero = PaymentRequest::new("cus_42", 0, "EUR");
    /// assert_eq!(zero, Err(ValidationError::NonPositiveAmount(0)));
    /// let unknown = PaymentRequest::new("cus_42", 5, "XXX");
    /// assert!(matches!(unknown, Err(ValidationError::UnknownCurrency(_))));
    /// # Ok::<(), ValidationError>(())
    /// ```
    pub fn new(customer: &str, amount_minor: i64, currency: &str) -> Result<Self, ValidationError> {
        let customer = idem_core::Scope::new(customer).map_err(ValidationError::Customer)?;
        let amount = Amount::from_minor(amount_minor)?;
        let currency = Currency::parse(currency)?;
        let fingerprint = Self::fingerprint_of(customer.as_str(), amount, currency);
        Ok(Self { customer, amount, currency, fingerprint })
    }

    /// The fingerprint of a request with these fields: also how a charge the gateway
    /// reports is held against the request that claimed its key.
    pub(crate) fn fingerprint_of(
        customer: &str,
        amount: Amount,
        currency: Currency,
    ) -> Fingerprint {
        Fingerprint::builder("idem-payments/pay")
            .str("customer", customer)
            .u64("amount_minor", amount.0)
            .str("currency", currency.code())
            .finish()
    }

    /// The customer paying.
    pub fn customer(&self) -> &str {
        self.customer.as_str()
    }

    /// The customer id as the validated scope it was checked as.
    pub(crate) fn customer_scope(&self) -> &idem_core::Scope {
        &self.customer
    }

    /// The amount.
    pub fn amount(&self) -> Amount {
        self.amount
    }

    /// The currency.
    pub fn currency(&self) -> Currency {
        self.currency
    }

    /// The request's fingerprint: the same key with another fingerprint is refused.
    pub fn fingerprint(&self) -> Fingerprint {
        self.fingerprint
    }
}
