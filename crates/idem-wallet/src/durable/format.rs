//! The log's bytes: a file header, then records that each check themselves twice.
//!
//! ```text
//! file:    "IDEMWAL5" record*
//! record:  [u32 payload length][u32 CRC-32 of the payload][u32 CRC-32 of the 8 bytes before]
//!          [payload]
//! payload: [u8 kind][u64 clock ms][u32 count][count events][count results]
//! ```
//!
//! Little-endian throughout. Kind 1: accounts (52 bytes each); kind 2: transfers (120
//! bytes each); kind 3: close one account (16 bytes, count 1). Each result is one byte,
//! the result code the batch was answered with; recovery applies the events again and
//! refuses the log if they decide anything else. The header has its own checksum so that
//! a flipped length is caught before it is trusted, and a length is legal only up to
//! [`PAYLOAD_MAX`], the largest batch.

use crate::ledger::BATCH_MAX;
use crate::types::{AccountFlags, AccountId, NewAccount, Transfer, TransferFlags};

/// The file header: magic, then the format version in its last byte. Version 5: accounts
/// and transfers carry TigerBeetle's three user data fields, and an account may keep its
/// balance history (version 4: posts and voids settle by TigerBeetle 0.16's amounts, and
/// the result codes name each differing field). A log of an older version is refused by
/// its version, never replayed with another meaning (its records would decide other
/// amounts and codes than they were answered with).
pub(crate) const FILE_HEADER: &[u8; 8] = b"IDEMWAL5";
/// The format version this build reads and writes: the header's last byte.
pub(crate) const FILE_VERSION: char = FILE_HEADER[FILE_HEADER.len() - 1] as char;
/// A record's header: length, payload checksum, header checksum.
pub(crate) const RECORD_HEADER: usize = 12;
const KIND_ACCOUNTS: u8 = 1;
const KIND_TRANSFERS: u8 = 2;
const KIND_CLOSE: u8 = 3;
const ACCOUNT_BYTES: usize = 52;
const TRANSFER_BYTES: usize = 120;
const CLOSE_BYTES: usize = 16;
const PAYLOAD_PREFIX: usize = 1 + 8 + 4;
/// The largest legal payload: a full batch of transfers and their results.
pub(crate) const PAYLOAD_MAX: usize = PAYLOAD_PREFIX + BATCH_MAX * (TRANSFER_BYTES + 1);

// The record layout, checked when the crate compiles: an account is its id (16),
// user_data_128 (16), user_data_64 (8), user_data_32 and ledger (4 each), code and flags
// (2 each); a transfer six 128-bit fields (user_data_128 the last), user_data_64 (8),
// user_data_32, timeout and ledger (4 each), code and flags (2 each); a close its account
// id (16); the prefix is kind (1), clock (8) and count (4); the largest payload's length
// fits the header's 32 bits.
const _: () = assert!(ACCOUNT_BYTES == 16 + 16 + 8 + 4 + 4 + 2 + 2);
const _: () = assert!(TRANSFER_BYTES == 6 * 16 + 8 + 4 + 4 + 4 + 2 + 2);
const _: () = assert!(CLOSE_BYTES == size_of::<AccountId>());
const _: () = assert!(PAYLOAD_PREFIX == 1 + 8 + 4);
const _: () = assert!(RECORD_HEADER == 3 * 4);
const _: () = assert!(PAYLOAD_MAX <= u32::MAX as usize);

/// Closing one account, as the log holds it: the third kind of record, beside a batch of
/// accounts and a batch of transfers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CloseAccount(pub(crate) AccountId);

/// A batch read back from the log. Only the record's kind byte says which it is, so the
/// reader needs one type for all three; the writer never builds one (each request to it
/// carries its own batch type).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decoded {
    Accounts(Vec<NewAccount>),
    Transfers(Vec<Transfer>),
    Close(CloseAccount),
}

/// A decoded record: the batch, the clock it ran at, and the result codes it was
/// answered with.
#[derive(Debug)]
pub(crate) struct Record {
    pub(crate) batch: Decoded,
    pub(crate) now_ms: u64,
    pub(crate) results: Vec<u8>,
}

/// Why the bytes at an offset are not a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bad {
    /// Fewer bytes left than a record header: a torn append, or corruption.
    ShortHeader,
    /// The header's own checksum fails.
    HeaderChecksum,
    /// The length is larger than any batch.
    LengthTooLarge,
    /// The payload runs past the end of the file.
    ShortPayload,
    /// The payload's checksum fails.
    PayloadChecksum,
    /// Checksums hold but the payload is not a batch (a bug, or a forged record).
    Undecodable,
}

impl Bad {
    pub(crate) fn reason(self) -> &'static str {
        match self {
            Self::ShortHeader => "record header cut short",
            Self::HeaderChecksum => "record header checksum mismatch",
            Self::LengthTooLarge => "record length larger than any batch",
            Self::ShortPayload => "record runs past the end of the log",
            Self::PayloadChecksum => "record payload checksum mismatch",
            Self::Undecodable => "record checksums hold but it is not a batch",
        }
    }
}

fn checksum(bytes: &[u8]) -> u32 {
    crc32fast::hash(bytes)
}

/// The record of a batch of accounts, run at `now_ms` and answered with `results`.
pub(crate) fn encode_accounts(accounts: &[NewAccount], now_ms: u64, results: &[u8]) -> Vec<u8> {
    let events = |payload: &mut Vec<u8>| {
        for a in accounts {
            payload.extend_from_slice(&a.id.to_le_bytes());
            payload.extend_from_slice(&a.user_data_128.to_le_bytes());
            payload.extend_from_slice(&a.user_data_64.to_le_bytes());
            payload.extend_from_slice(&a.user_data_32.to_le_bytes());
            payload.extend_from_slice(&a.ledger.to_le_bytes());
            payload.extend_from_slice(&a.code.to_le_bytes());
            payload.extend_from_slice(&a.flags.bits().to_le_bytes());
        }
    };
    let batch = Batch { kind: KIND_ACCOUNTS, count: accounts.len(), event_bytes: ACCOUNT_BYTES };
    encode(batch, now_ms, events, results)
}

/// The record of a batch of transfers, run at `now_ms` and answered with `results`.
pub(crate) fn encode_transfers(transfers: &[Transfer], now_ms: u64, results: &[u8]) -> Vec<u8> {
    let events = |payload: &mut Vec<u8>| {
        for t in transfers {
            let wide = [t.id, t.debit_account_id, t.credit_account_id, t.amount];
            for field in wide.into_iter().chain([t.pending_id, t.user_data_128]) {
                payload.extend_from_slice(&field.to_le_bytes());
            }
            payload.extend_from_slice(&t.user_data_64.to_le_bytes());
            payload.extend_from_slice(&t.user_data_32.to_le_bytes());
            payload.extend_from_slice(&t.timeout.to_le_bytes());
            payload.extend_from_slice(&t.ledger.to_le_bytes());
            payload.extend_from_slice(&t.code.to_le_bytes());
            payload.extend_from_slice(&t.flags.bits().to_le_bytes());
        }
    };
    let count = transfers.len();
    let batch = Batch { kind: KIND_TRANSFERS, count, event_bytes: TRANSFER_BYTES };
    encode(batch, now_ms, events, results)
}

/// The record of closing one account, run at `now_ms` and answered with `results`.
pub(crate) fn encode_close(close: CloseAccount, now_ms: u64, results: &[u8]) -> Vec<u8> {
    let events = |payload: &mut Vec<u8>| payload.extend_from_slice(&close.0.to_le_bytes());
    let batch = Batch { kind: KIND_CLOSE, count: 1, event_bytes: CLOSE_BYTES };
    encode(batch, now_ms, events, results)
}

/// What the payload prefix says about a batch, and the size of each of its events.
#[derive(Debug, Clone, Copy)]
struct Batch {
    kind: u8,
    count: usize,
    event_bytes: usize,
}

/// One record: the payload (prefix, the events `events` writes, the results), its length
/// and its two checksums.
fn encode(batch: Batch, now_ms: u64, events: impl FnOnce(&mut Vec<u8>), results: &[u8]) -> Vec<u8> {
    debug_assert_eq!(results.len(), batch.count, "one result per event");
    let mut payload = Vec::with_capacity(PAYLOAD_PREFIX + batch.count * (batch.event_bytes + 1));
    payload.push(batch.kind);
    payload.extend_from_slice(&now_ms.to_le_bytes());
    // A batch is at most BATCH_MAX events, checked before it reaches the log.
    payload.extend_from_slice(&u32::try_from(batch.count).unwrap_or(u32::MAX).to_le_bytes());
    events(&mut payload);
    debug_assert_eq!(payload.len(), PAYLOAD_PREFIX + batch.count * batch.event_bytes);
    payload.extend_from_slice(results);
    assert!(payload.len() <= PAYLOAD_MAX, "a batch larger than BATCH_MAX reached the log");
    let mut record = Vec::with_capacity(RECORD_HEADER + payload.len());
    record.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    record.extend_from_slice(&checksum(&payload).to_le_bytes());
    let header_checksum = checksum(&record[..8]);
    record.extend_from_slice(&header_checksum.to_le_bytes());
    record.extend_from_slice(&payload);
    record
}

/// Reads the record at `at`: the record and the offset after it, or why it is not one.
pub(crate) fn read(bytes: &[u8], at: usize) -> Result<(Record, usize), Bad> {
    let len = header_len(bytes, at)?;
    if len > PAYLOAD_MAX {
        return Err(Bad::LengthTooLarge);
    }
    let start = at + RECORD_HEADER;
    let payload = bytes.get(start..start + len).ok_or(Bad::ShortPayload)?;
    if checksum(payload) != word(bytes, at + 4) {
        return Err(Bad::PayloadChecksum);
    }
    let record = decode(payload).ok_or(Bad::Undecodable)?;
    Ok((record, start + len))
}

/// The little-endian word at `at` (in bounds: the caller checked the header's length).
fn word(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

/// The payload length the record header at `at` holds, once its checksum is checked.
fn header_len(bytes: &[u8], at: usize) -> Result<usize, Bad> {
    let header = bytes.get(at..at + RECORD_HEADER).ok_or(Bad::ShortHeader)?;
    if checksum(&header[..8]) != word(header, 8) {
        return Err(Bad::HeaderChecksum);
    }
    Ok(word(header, 0) as usize)
}

/// Where the record at `at` ends by its header's length, if that header's checksum holds
/// (the length is then the writer's, whatever its payload holds).
pub(crate) fn end_by_header(bytes: &[u8], at: usize) -> Option<usize> {
    header_len(bytes, at).ok().map(|len| at + RECORD_HEADER + len)
}

/// Little-endian field reader over a checked payload.
struct Fields<'a>(&'a [u8]);

impl Fields<'_> {
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (head, rest) = self.0.split_first_chunk::<N>()?;
        self.0 = rest;
        Some(*head)
    }
    fn u128(&mut self) -> Option<u128> {
        self.take().map(u128::from_le_bytes)
    }
    fn u64(&mut self) -> Option<u64> {
        self.take().map(u64::from_le_bytes)
    }
    fn u32(&mut self) -> Option<u32> {
        self.take().map(u32::from_le_bytes)
    }
    fn u16(&mut self) -> Option<u16> {
        self.take().map(u16::from_le_bytes)
    }
}

fn decode(payload: &[u8]) -> Option<Record> {
    let (&kind, rest) = payload.split_first()?;
    let mut f = Fields(rest);
    let now_ms = f.u64()?;
    let count = f.u32()? as usize;
    if count > BATCH_MAX {
        return None;
    }
    let batch = match kind {
        KIND_ACCOUNTS => {
            Decoded::Accounts((0..count).map(|_| account(&mut f)).collect::<Option<_>>()?)
        }
        KIND_TRANSFERS => {
            Decoded::Transfers((0..count).map(|_| transfer(&mut f)).collect::<Option<_>>()?)
        }
        KIND_CLOSE if count == 1 => Decoded::Close(CloseAccount(f.u128()?)),
        _ => return None,
    };
    (f.0.len() == count).then(|| Record { batch, now_ms, results: f.0.to_vec() })
}

fn account(f: &mut Fields<'_>) -> Option<NewAccount> {
    Some(NewAccount {
        id: f.u128()?,
        user_data_128: f.u128()?,
        user_data_64: f.u64()?,
        user_data_32: f.u32()?,
        ledger: f.u32()?,
        code: f.u16()?,
        flags: AccountFlags::from_bits_retain(f.u16()?),
    })
}

fn transfer(f: &mut Fields<'_>) -> Option<Transfer> {
    let [id, debit, credit, amount, pending_id, user_data_128] =
        [f.u128()?, f.u128()?, f.u128()?, f.u128()?, f.u128()?, f.u128()?];
    Some(Transfer {
        id,
        debit_account_id: debit,
        credit_account_id: credit,
        amount,
        pending_id,
        user_data_128,
        user_data_64: f.u64()?,
        user_data_32: f.u32()?,
        timeout: f.u32()?,
        ledger: f.u32()?,
        code: f.u16()?,
        flags: TransferFlags::from_bits_retain(f.u16()?),
    })
}
