//! The durable side: the stored outcome's encoding, and a gateway whose charges live in a
//! file, so the truth about side effects survives a crashed process.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use idem_core::sqlite::{Durable, SqliteError};
use parking_lot::Mutex;

use crate::gateway::{Charge, ChargeId, Gateway, GatewayError, GatewayKey, Lookup};
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

    fn decode(bytes: &[u8]) -> Result<Self, SqliteError> {
        let corrupt = |what: &str| SqliteError::Corrupt(format!("payment outcome: {what}"));
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

/// A gateway whose every charge is a line appended (and fsync'd) to a file before the
/// charge returns, so the record of side effects outlives the process that made them.
/// It does not deduplicate: every charge call charges, so a double charge shows as two
/// lines for one key. Lines: `key amount currency charge_id customer` (the customer last:
/// it may contain spaces).
#[derive(Debug)]
pub struct FileGateway {
    path: PathBuf,
    file: Mutex<File>,
}

impl FileGateway {
    /// Opens (creating) the charge file at `path`.
    ///
    /// # Errors
    ///
    /// The I/O error if the file cannot be opened.
    pub fn open(path: &Path) -> std::io::Result<Self> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(Self { path: path.to_path_buf(), file: Mutex::new(file) })
    }

    /// Every charge in the file, in order: (gateway key, charge).
    ///
    /// # Errors
    ///
    /// The I/O error if the file cannot be read; malformed lines (a torn last write) are
    /// skipped: they were never acknowledged.
    pub fn charges(path: &Path) -> std::io::Result<Vec<(String, Charge)>> {
        let file = match File::open(path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut charges = Vec::new();
        for line in BufReader::new(file).lines() {
            let line = line?;
            let parts: Vec<&str> = line.splitn(5, ' ').collect();
            let [key, amount, currency, id, customer] = parts[..] else { continue };
            let (Ok(amount), Ok(currency), Ok(id)) = (
                amount
                    .parse::<i64>()
                    .map_err(|_| ())
                    .and_then(|a| Amount::from_minor(a).map_err(|_| ())),
                Currency::parse(currency),
                id.parse::<u64>(),
            ) else {
                continue;
            };
            let customer = customer.to_string();
            charges
                .push((key.to_string(), Charge { id: ChargeId(id), customer, amount, currency }));
        }
        Ok(charges)
    }
}

impl Gateway for FileGateway {
    fn charge(
        &self,
        key: &GatewayKey,
        customer: &str,
        amount: Amount,
        currency: Currency,
    ) -> Result<Charge, GatewayError> {
        let mut file = self.file.lock();
        let id = Self::charges(&self.path).map_err(|e| GatewayError::Refused(e.to_string()))?.len()
            as u64
            + 1;
        let (key, minor, code) = (key.as_str(), amount.minor(), currency.code());
        let line = format!("{key} {minor} {code} {id} {customer}\n");
        file.write_all(line.as_bytes()).map_err(|e| GatewayError::Ambiguous(e.to_string()))?;
        file.sync_data().map_err(|e| GatewayError::Ambiguous(e.to_string()))?;
        Ok(Charge { id: ChargeId(id), customer: customer.to_string(), amount, currency })
    }

    fn lookup(&self, key: &GatewayKey) -> Lookup {
        let _serialised = self.file.lock();
        match Self::charges(&self.path) {
            Ok(charges) => match charges.into_iter().find(|(k, _)| k == key.as_str()) {
                Some((_, charge)) => Lookup::Charged(charge),
                None => Lookup::NotCharged,
            },
            Err(_) => Lookup::Unknown,
        }
    }

    fn set_refunded(&self, _charge: ChargeId) -> bool {
        false
    }
}
