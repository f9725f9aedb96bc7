//! A gateway whose charges live in a file: the truth about side effects outlives the
//! worker process that made them.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use idem_payments::{
    Amount, Charge, ChargeId, Currency, Gateway, GatewayError, GatewayKey, Lookup, PaymentRequest,
};
use parking_lot::Mutex;

/// One line of a [`FileGateway`]'s file: a charge and the gateway key it was made with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChargeRecord {
    /// The gateway key, as text.
    pub key: String,
    /// The charge.
    pub charge: Charge,
}

impl ChargeRecord {
    /// The line that records charge `id` of `minor` units of `code` for `customer` under
    /// `key`, newline included, as [`FileGateway::charges`] reads it back.
    pub fn line(key: &str, minor: u64, code: &str, id: u64, customer: &str) -> String {
        format!("{key} {minor} {code} {id} {customer}\n")
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

    /// Every charge in the file, in order.
    ///
    /// # Errors
    ///
    /// The I/O error if the file cannot be read; malformed lines (a torn last write) are
    /// skipped: they were never acknowledged.
    pub fn charges(path: &Path) -> std::io::Result<Vec<ChargeRecord>> {
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
            let charge =
                Charge { id: ChargeId(id), customer: customer.to_string(), amount, currency };
            charges.push(ChargeRecord { key: key.to_string(), charge });
        }
        Ok(charges)
    }
}

impl Gateway for FileGateway {
    fn charge(&self, key: &GatewayKey, request: &PaymentRequest) -> Result<Charge, GatewayError> {
        let mut file = self.file.lock();
        let id = Self::charges(&self.path).map_err(|e| GatewayError::Refused(e.to_string()))?.len()
            as u64
            + 1;
        let (amount, currency, customer) =
            (request.amount(), request.currency(), request.customer());
        let (key, minor, code) = (key.as_str(), amount.minor(), currency.code());
        let line = ChargeRecord::line(key, minor, code, id, customer);
        file.write_all(line.as_bytes()).map_err(|e| GatewayError::Ambiguous(e.to_string()))?;
        file.sync_data().map_err(|e| GatewayError::Ambiguous(e.to_string()))?;
        Ok(Charge { id: ChargeId(id), customer: customer.to_string(), amount, currency })
    }

    fn lookup(&self, key: &GatewayKey) -> Lookup {
        let _serialised = self.file.lock();
        match Self::charges(&self.path) {
            Ok(charges) => match charges.into_iter().find(|record| record.key == key.as_str()) {
                Some(record) => Lookup::Charged(record.charge),
                None => Lookup::NotCharged,
            },
            Err(_) => Lookup::Unknown,
        }
    }

    fn set_refunded(&self, _charge: ChargeId) -> bool {
        false
    }
}
