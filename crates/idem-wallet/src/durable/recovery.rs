//! Recovery: the log is replayed into a ledger, record by record, and each record's
//! results are decided again and compared with the ones it was answered with.
//!
//! A bad record (a checksum that fails, a length past the largest batch or past the end
//! of the file) is judged by what follows it:
//!
//! * only zeros: a zero-filled tail (a file extended but never written, as a power loss
//!   can leave): cut;
//! * a record whose checksums hold somewhere after it (valid, or not a batch): corruption
//!   in the middle, since that record was appended later and acknowledged records may sit
//!   on both sides: the log is refused, naming the offset. When the bad record's header
//!   holds (only its payload is short or fails its checksum), the search starts past the
//!   record's end: its payload is a client's bytes, free to spell a record;
//! * anything else: a torn tail, the last append cut short by a crash before its sync
//!   returned, so never acknowledged: cut, and the bytes cut are kept beside the log and
//!   reported, never dropped silently.
//!
//! A record whose checksums hold but which is not a batch (an unknown kind, events that do
//! not fill it) was written whole, so it is never a torn append: the log is refused at its
//! offset wherever it sits, and nothing is cut.

use crate::durable::format::{self, Bad, Decoded, FILE_HEADER};
use crate::durable::{LogError, Logged};
use crate::ledger::{BatchError, Ledger};

/// What a replay found.
#[derive(Debug)]
pub(crate) struct Replayed {
    /// Bytes of the log that hold valid records (header included).
    pub(crate) valid_len: u64,
    /// Records replayed.
    pub(crate) records: u64,
    /// A tail that is not a record, to be cut.
    pub(crate) tail: Option<CutTail>,
}

/// A tail to cut.
#[derive(Debug)]
pub(crate) struct CutTail {
    pub(crate) offset: u64,
    pub(crate) bytes: Vec<u8>,
    pub(crate) reason: &'static str,
}

/// Replays `bytes` (a whole log, header first) into `ledger`.
pub(crate) fn replay(bytes: &[u8], ledger: &mut Ledger) -> Result<Replayed, LogError> {
    let magic = &FILE_HEADER[..FILE_HEADER.len() - 1];
    match bytes.get(..FILE_HEADER.len()) {
        Some(header) if header == FILE_HEADER => {}
        Some([found_magic @ .., version]) if found_magic == magic => {
            return Err(LogError::Version { found: char::from(*version) });
        }
        _ => return Err(LogError::BadHeader),
    }
    let mut at = FILE_HEADER.len();
    let mut records = 0;
    let mut tail = None;
    while at < bytes.len() {
        let offset = at as u64;
        match format::read(bytes, at) {
            Ok((record, next)) => {
                let codes = decide(&record.batch, ledger, record.now_ms)?;
                if codes != record.results {
                    return Err(LogError::Diverged { offset });
                }
                records += 1;
                at = next;
            }
            Err(Bad::Undecodable) => {
                return Err(LogError::Corrupt { offset, reason: Bad::Undecodable.reason().into() });
            }
            Err(bad) => {
                tail = Some(judge_tail(bytes, at, bad)?);
                break;
            }
        }
    }
    if let Some(broken) = ledger.broken_invariant() {
        return Err(LogError::Inconsistent(broken));
    }
    Ok(Replayed { valid_len: at as u64, records, tail })
}

/// Decides a batch read back from the log, as the writer decided it, and returns the
/// result codes it decides now.
fn decide(batch: &Decoded, ledger: &mut Ledger, now_ms: u64) -> Result<Vec<u8>, BatchError> {
    fn codes<B: Logged>(b: &B, ledger: &mut Ledger, now_ms: u64) -> Result<Vec<u8>, BatchError> {
        Ok(B::codes(&b.decide(ledger, now_ms)?))
    }
    match batch {
        Decoded::Accounts(accounts) => codes(accounts, ledger, now_ms),
        Decoded::Transfers(transfers) => codes(transfers, ledger, now_ms),
        Decoded::Close(close) => codes(close, ledger, now_ms),
    }
}

/// The bad record at `at` is a tail to cut, or corruption if a valid record follows.
fn judge_tail(bytes: &[u8], at: usize, bad: Bad) -> Result<CutTail, LogError> {
    let rest = &bytes[at..];
    let offset = at as u64;
    if rest.iter().all(|b| *b == 0) {
        return Ok(CutTail { offset, bytes: rest.to_vec(), reason: "zero-filled tail" });
    }
    // A record whose checksums hold follows: written after the bad one, so the bad one
    // is not the last append. An undecodable record counts too; its checksums say it was
    // written whole, and cutting it would drop it unseen.
    let whole = |y: usize| matches!(format::read(bytes, y), Ok(_) | Err(Bad::Undecodable));
    // A bad payload under a header whose checksum holds: the bytes up to the record's end
    // are its own payload, which a client's transfer fields fill as it likes (they may
    // spell a whole record), so the search starts past them. A torn last append (its
    // payload past the end of the file) is then cut, never taken for corruption.
    let from = match bad {
        Bad::ShortPayload | Bad::PayloadChecksum => format::end_by_header(bytes, at),
        _ => None,
    };
    let from = from.unwrap_or(at + 1).min(bytes.len());
    if let Some(next) = (from..bytes.len()).find(|&y| whole(y)) {
        let reason = format!("{}; a valid record follows at byte {next}", bad.reason());
        return Err(LogError::Corrupt { offset, reason });
    }
    Ok(CutTail { offset, bytes: rest.to_vec(), reason: bad.reason() })
}

/// Whether `bytes` is a log whose file header never fully reached the disk: a proper
/// prefix of the header, then only zeros. (A whole header is a log; anything else is not
/// one and is refused.)
pub(crate) fn torn_creation(bytes: &[u8]) -> bool {
    let prefix = bytes.iter().zip(FILE_HEADER).take_while(|(a, b)| a == b).count();
    prefix < FILE_HEADER.len() && bytes[prefix..].iter().all(|b| *b == 0)
}
