//! The stored outcome's encoding, for the durable stores (`idem_durable::Durable`).

use idem_durable::{CodecError, Durable};

use crate::gateway::{Charge, ChargeId};
use crate::money::{Amount, Currency};
use crate::processor::PaymentOutcome;

/// Tag 0 was a charge without its customer, from before the processor checked a charge
/// against its request; such a record is refused with a message, never guessed at.
const CHARGED_WITHOUT_CUSTOMER: u8 = 0;
const DECLINED: u8 = 1;
/// A charge: id, amount (8 bytes each, big-endian), currency (3 bytes), customer (rest).
const CHARGED: u8 = 2;

impl Durable for PaymentOutcome {
    fn encode(&self) -> Vec<u8> {
        match self {
            PaymentOutcome::Charged(c) => {
                let mut out = vec![CHARGED];
                out.extend_from_slice(&c.id.0.to_be_bytes());
                out.extend_from_slice(&c.amount.minor().to_be_bytes());
                out.extend_from_slice(c.currency.code().as_bytes());
                out.extend_from_slice(c.customer.as_bytes());
                out
            }
            PaymentOutcome::Declined(reason) => {
                let mut out = vec![DECLINED];
                out.extend_from_slice(reason.as_bytes());
                out
            }
        }
    }

    fn decode(bytes: &[u8]) -> Result<Self, CodecError> {
        let corrupt = |what: &str| CodecError::Corrupt(format!("payment outcome: {what}"));
        match bytes.split_first() {
            Some((&CHARGED, rest)) if rest.len() > 19 => {
                let id = u64::from_be_bytes(rest[0..8].try_into().map_err(|_| corrupt("id"))?);
                let minor =
                    u64::from_be_bytes(rest[8..16].try_into().map_err(|_| corrupt("amount"))?);
                let code = std::str::from_utf8(&rest[16..19]).map_err(|_| corrupt("currency"))?;
                let amount =
                    Amount::from_minor(i64::try_from(minor).map_err(|_| corrupt("amount"))?)
                        .map_err(|_| corrupt("amount"))?;
                let currency = Currency::parse(code).map_err(|_| corrupt("currency"))?;
                let customer = std::str::from_utf8(&rest[19..])
                    .ok()
                    .filter(|c| idem_core::Scope::new(c).is_ok())
                    .ok_or_else(|| corrupt("customer"))?
                    .to_string();
                let id = ChargeId(id);
                Ok(PaymentOutcome::Charged(Charge { id, customer, amount, currency }))
            }
            Some((&CHARGED_WITHOUT_CUSTOMER, _)) => {
                Err(corrupt("a charge without its customer, written by an older version"))
            }
            Some((&DECLINED, rest)) => Ok(PaymentOutcome::Declined(
                String::from_utf8(rest.to_vec()).map_err(|_| corrupt("reason"))?,
            )),
            _ => Err(corrupt("unknown tag")),
        }
    }
}
