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
    #[error("unknown currency {0:?}: use an upper-case ISO 4217 code: EUR, USD, GBP, JPY or CHF")]
    UnknownCurrency(String),
    /// The text is not a whole number of minor units (`"1050"` for 10.50 EUR).
    #[error("amount {text:?} is not a whole number of minor units (write 10.50 EUR as 1050)")]
    AmountNotANumber {
        /// The refused text (at most its first 64 bytes).
        text: String,
    },
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

    /// The amount with its currency's decimal point and code: `10.50 EUR`, `1050 JPY`.
    ///
    /// ```
    /// use idem_payments::{Amount, Currency};
    ///
    /// let amount: Amount = "1050".parse()?;
    /// assert_eq!(amount.to_string(), "1050"); // Display: minor units, as parsed
    /// assert_eq!(amount.in_currency(Currency::Eur).to_string(), "10.50 EUR");
    /// assert_eq!(amount.in_currency(Currency::Jpy).to_string(), "1050 JPY");
    /// # Ok::<(), idem_payments::ValidationError>(())
    /// ```
    pub fn in_currency(self, currency: Currency) -> impl fmt::Display {
        InCurrency(self, currency)
    }
}

/// Minor units, the form [`FromStr`](std::str::FromStr) reads back.
impl fmt::Display for Amount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Parses a positive whole number of minor units, as [`Amount::from_minor`].
impl std::str::FromStr for Amount {
    type Err = ValidationError;

    fn from_str(text: &str) -> Result<Self, ValidationError> {
        match text.parse::<i64>() {
            Ok(minor) => Self::from_minor(minor),
            Err(_) => Err(ValidationError::AmountNotANumber { text: clip(text) }),
        }
    }
}

/// The most of a caller's text an error repeats: enough to recognise it, never a whole
/// hostile input copied into a log line.
const ECHOED_BYTES_MAX: usize = 64;

/// At most the first [`ECHOED_BYTES_MAX`] bytes of hostile text, cut at a character
/// boundary, for an error.
fn clip(text: &str) -> String {
    let end = (0..=text.len().min(ECHOED_BYTES_MAX))
        .rev()
        .find(|i| text.is_char_boundary(*i))
        .unwrap_or(0);
    text[..end].to_string()
}

struct InCurrency(Amount, Currency);

impl fmt::Display for InCurrency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (minor, currency) = (self.0.0, self.1);
        match currency.minor_digits() {
            0 => write!(f, "{minor} {currency}"),
            digits => {
                let scale = 10_u64.pow(digits);
                let (major, rest) = (minor / scale, minor % scale);
                write!(f, "{major}.{rest:0width$} {currency}", width = digits as usize)
            }
        }
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
            other => return Err(ValidationError::UnknownCurrency(clip(other))),
        })
    }

    /// Digits after the decimal point (ISO 4217's minor unit): 0 for JPY, 2 otherwise.
    pub fn minor_digits(self) -> u32 {
        match self {
            Self::Jpy => 0,
            Self::Eur | Self::Usd | Self::Gbp | Self::Chf => 2,
        }
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

/// As [`Currency::parse`]: `"EUR".parse::<Currency>()`.
impl std::str::FromStr for Currency {
    type Err = ValidationError;

    fn from_str(code: &str) -> Result<Self, ValidationError> {
        Self::parse(code)
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
