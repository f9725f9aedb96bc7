//! The durable wallet: every batch is appended to a write-ahead log and fsync'd before it
//! is applied and answered; opening the log replays it.
//!
//! Log format: an 8-byte header `IDEMWAL1`, then records:
//! `[u32 payload length][u32 CRC-32 of the payload][payload]`, little-endian, where the
//! payload is `[u8 kind][u64 clock ms][u32 count][events]` (kind 1: accounts, 24 bytes
//! each; kind 2: transfers, 108 bytes each; kind 3: close one account). The clock value is
//! the time the batch was applied at, so replay is deterministic (timestamps, timeouts).
//!
//! Recovery: records are read in order. A record that runs past the end of the file, or
//! is the last one and fails its checksum, is a torn tail: it was never acknowledged
//! (its fsync had not returned) and is cut off. A record that fails its checksum with
//! more data after it is corruption in the middle: opening refuses, naming the offset,
//! rather than silently dropping acknowledged transfers.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender};
use idem_core::{Clock, SystemClock};
use parking_lot::Mutex;

use crate::ledger::{BATCH_MAX, BatchError, Ledger, Limits};
use crate::types::{
    Account, AccountFlags, AccountId, AccountResult, NewAccount, StoredTransfer, Transfer,
    TransferFlags, TransferId, TransferResult,
};

const HEADER: &[u8; 8] = b"IDEMWAL1";
const RECORD_HEADER: usize = 8;
const KIND_ACCOUNTS: u8 = 1;
const KIND_TRANSFERS: u8 = 2;
const KIND_CLOSE: u8 = 3;
const ACCOUNT_BYTES: usize = 24;
const TRANSFER_BYTES: usize = 108;

/// Why the log could not be opened or written.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// An I/O error.
    #[error("log I/O: {0}")]
    Io(#[from] std::io::Error),
    /// The file is not a wallet log.
    #[error("not a wallet log (bad header)")]
    BadHeader,
    /// A record in the middle of the log is corrupt: acknowledged transfers may follow it,
    /// so the wallet refuses to open instead of dropping them.
    #[error("corrupt log record at byte offset {offset}: {reason}")]
    Corrupt {
        /// Where the bad record starts.
        offset: u64,
        /// What is wrong with it.
        reason: String,
    },
    /// Replaying the log broke a ledger invariant.
    #[error("replayed ledger is inconsistent: {0}")]
    Inconsistent(String),
    /// The batch was refused (too large); nothing was logged.
    #[error(transparent)]
    Batch(#[from] BatchError),
    /// The log writer stopped (an earlier write failed); nothing more is accepted.
    #[error("the log writer stopped")]
    Stopped,
}

/// A named point where the log writer aborts the process, for crash tests.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashPoint {
    /// Never.
    None,
    /// Half of the nth record written, then abort (a torn tail).
    MidAppend(u64),
    /// The nth record written, not yet fsync'd.
    AfterAppend(u64),
    /// The nth record fsync'd, not yet applied or answered.
    AfterSync(u64),
}

fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = 0xffff_ffffu32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 { (crc >> 1) ^ 0xedb8_8320 } else { crc >> 1 };
        }
    }
    !crc
}

enum Op {
    Accounts(Vec<NewAccount>),
    Transfers(Vec<Transfer>),
    Close(AccountId),
}

enum Answer {
    Accounts(Vec<AccountResult>),
    Transfers(Vec<TransferResult>),
    Close(bool),
}

struct Request {
    op: Op,
    reply: Sender<Result<Answer, String>>,
}

fn encode(op: &Op, now_ms: u64) -> Vec<u8> {
    let (kind, count) = match op {
        Op::Accounts(a) => (KIND_ACCOUNTS, a.len()),
        Op::Transfers(t) => (KIND_TRANSFERS, t.len()),
        Op::Close(_) => (KIND_CLOSE, 1),
    };
    let per_event = match op {
        Op::Accounts(_) => ACCOUNT_BYTES,
        Op::Transfers(_) => TRANSFER_BYTES,
        Op::Close(_) => 16,
    };
    let mut payload = Vec::with_capacity(13 + count * per_event);
    payload.push(kind);
    payload.extend_from_slice(&now_ms.to_le_bytes());
    payload.extend_from_slice(&(count as u32).to_le_bytes());
    match op {
        Op::Accounts(accounts) => {
            for a in accounts {
                payload.extend_from_slice(&a.id.to_le_bytes());
                payload.extend_from_slice(&a.ledger.to_le_bytes());
                payload.extend_from_slice(&a.code.to_le_bytes());
                payload.extend_from_slice(&a.flags.0.to_le_bytes());
            }
        }
        Op::Transfers(transfers) => {
            for t in transfers {
                for field in [
                    t.id,
                    t.debit_account_id,
                    t.credit_account_id,
                    t.amount,
                    t.pending_id,
                    t.user_data,
                ] {
                    payload.extend_from_slice(&field.to_le_bytes());
                }
                payload.extend_from_slice(&t.timeout.to_le_bytes());
                payload.extend_from_slice(&t.ledger.to_le_bytes());
                payload.extend_from_slice(&t.code.to_le_bytes());
                payload.extend_from_slice(&t.flags.0.to_le_bytes());
            }
        }
        Op::Close(id) => payload.extend_from_slice(&id.to_le_bytes()),
    }
    let mut record = Vec::with_capacity(RECORD_HEADER + payload.len());
    record.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    record.extend_from_slice(&crc32(&payload).to_le_bytes());
    record.extend_from_slice(&payload);
    record
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

fn decode(payload: &[u8]) -> Option<(Op, u64)> {
    let (&kind, rest) = payload.split_first()?;
    let mut f = Fields(rest);
    let now_ms = f.u64()?;
    let count = f.u32()? as usize;
    let op = match kind {
        KIND_ACCOUNTS => Op::Accounts(
            (0..count)
                .map(|_| {
                    Some(NewAccount {
                        id: f.u128()?,
                        ledger: f.u32()?,
                        code: f.u16()?,
                        flags: AccountFlags(f.u16()?),
                    })
                })
                .collect::<Option<_>>()?,
        ),
        KIND_TRANSFERS => Op::Transfers(
            (0..count)
                .map(|_| {
                    let [id, debit, credit, amount, pending_id, user_data] =
                        [f.u128()?, f.u128()?, f.u128()?, f.u128()?, f.u128()?, f.u128()?];
                    Some(Transfer {
                        id,
                        debit_account_id: debit,
                        credit_account_id: credit,
                        amount,
                        pending_id,
                        user_data,
                        timeout: f.u32()?,
                        ledger: f.u32()?,
                        code: f.u16()?,
                        flags: TransferFlags(f.u16()?),
                    })
                })
                .collect::<Option<_>>()?,
        ),
        KIND_CLOSE => Op::Close(f.u128()?),
        _ => return None,
    };
    f.0.is_empty().then_some((op, now_ms))
}

fn apply(ledger: &mut Ledger, op: &Op, now_ms: u64) -> Result<Answer, BatchError> {
    Ok(match op {
        Op::Accounts(a) => Answer::Accounts(ledger.create_accounts_at(a, now_ms)?),
        Op::Transfers(t) => Answer::Transfers(ledger.create_transfers_at(t, now_ms)?),
        Op::Close(id) => Answer::Close(ledger.close_account(*id)),
    })
}

/// Reads the log, applies every complete record, cuts a torn tail, and returns the ledger
/// and the length of the valid log.
fn recover(file: &mut File, ledger: &mut Ledger) -> Result<u64, LogError> {
    let mut bytes = Vec::new();
    file.seek(SeekFrom::Start(0))?;
    file.read_to_end(&mut bytes)?;
    if bytes.is_empty() {
        file.write_all(HEADER)?;
        file.sync_all()?;
        return Ok(HEADER.len() as u64);
    }
    if bytes.len() < HEADER.len() || &bytes[..HEADER.len()] != HEADER {
        return Err(LogError::BadHeader);
    }
    let mut at = HEADER.len();
    while at < bytes.len() {
        let offset = at as u64;
        let Some(header) = bytes.get(at..at + RECORD_HEADER) else { break }; // torn header
        let len = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize;
        let crc = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
        let end = at + RECORD_HEADER + len;
        let Some(payload) = bytes.get(at + RECORD_HEADER..end) else { break }; // torn payload
        let last = end == bytes.len();
        if crc32(payload) != crc {
            if last {
                break; // a torn last record
            }
            return Err(LogError::Corrupt { offset, reason: "checksum mismatch".into() });
        }
        let Some((op, now_ms)) = decode(payload) else {
            return Err(LogError::Corrupt { offset, reason: "undecodable record".into() });
        };
        apply(ledger, &op, now_ms)?;
        at = end;
    }
    if let Some(broken) = ledger.broken_invariant() {
        return Err(LogError::Inconsistent(broken));
    }
    if at < bytes.len() {
        file.set_len(at as u64)?;
        file.sync_all()?;
    }
    Ok(at as u64)
}

/// A wallet whose every acknowledged batch is on disk. Batches from all threads go to one
/// log writer: those arriving while an fsync is in progress share the next one (group
/// commit); each batch is applied and answered only after its record is on disk.
///
/// ```
/// use idem_wallet::{AccountFlags, DurableWallet, NewAccount, Transfer, TransferResult};
///
/// let path = std::env::temp_dir().join(format!("idem-wallet-doc-{}.wal", std::process::id()));
/// # let _ = std::fs::remove_file(&path);
/// let wallet = DurableWallet::open(&path)?;
/// let a = |id| NewAccount { id, ledger: 1, code: 1, flags: AccountFlags::default() };
/// wallet.create_accounts(vec![a(1), a(2)])?;
/// let t = Transfer {
///     id: 9, debit_account_id: 1, credit_account_id: 2, amount: 5, ledger: 1, code: 1,
///     ..Default::default()
/// };
/// assert_eq!(wallet.create_transfers(vec![t])?, vec![TransferResult::Created]);
/// drop(wallet); // a crash here loses nothing acknowledged
/// let reopened = DurableWallet::open(&path)?;
/// assert_eq!(reopened.create_transfers(vec![t])?, vec![TransferResult::Exists]);
/// # drop(reopened); std::fs::remove_file(&path).ok();
/// # Ok::<(), idem_wallet::LogError>(())
/// ```
pub struct DurableWallet {
    ledger: Arc<Mutex<Ledger>>,
    requests: Option<Sender<Request>>,
    writer: Option<JoinHandle<()>>,
    path: PathBuf,
}

impl std::fmt::Debug for DurableWallet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DurableWallet").field("path", &self.path).finish_non_exhaustive()
    }
}

impl DurableWallet {
    /// Opens (creating) the log at `path` with the default limits and the system clock,
    /// replaying it.
    ///
    /// # Errors
    ///
    /// [`LogError`]: I/O, not a log, corruption in the middle (with its offset), or an
    /// inconsistent replay.
    pub fn open(path: &Path) -> Result<Self, LogError> {
        Self::open_with(path, Limits::default(), Arc::new(SystemClock), CrashPoint::None)
    }

    /// Opens with explicit limits, clock and (for crash tests) a crash point.
    ///
    /// # Errors
    ///
    /// As [`open`](Self::open).
    #[doc(hidden)]
    pub fn open_with(
        path: &Path,
        limits: Limits,
        clock: Arc<dyn Clock>,
        crash: CrashPoint,
    ) -> Result<Self, LogError> {
        let mut file = OpenOptions::new().read(true).append(true).create(true).open(path)?;
        let mut ledger = Ledger::new(limits, clock);
        recover(&mut file, &mut ledger)?;
        let ledger = Arc::new(Mutex::new(ledger));
        let (requests, queue) = crossbeam_channel::bounded::<Request>(1024);
        let writer_ledger = ledger.clone();
        let writer = std::thread::Builder::new()
            .name("idem-wallet-log".into())
            .spawn(move || write_log(file, &writer_ledger, &queue, crash))?;
        Ok(Self {
            ledger,
            requests: Some(requests),
            writer: Some(writer),
            path: path.to_path_buf(),
        })
    }

    fn ask(&self, op: Op) -> Result<Answer, LogError> {
        let (reply, answer) = crossbeam_channel::bounded(1);
        self.requests
            .as_ref()
            .ok_or(LogError::Stopped)?
            .send(Request { op, reply })
            .map_err(|_| LogError::Stopped)?;
        answer
            .recv()
            .map_err(|_| LogError::Stopped)?
            .map_err(|e| LogError::Io(std::io::Error::other(e)))
    }

    /// Creates accounts, durably.
    ///
    /// # Errors
    ///
    /// [`LogError::Batch`] for a batch over [`BATCH_MAX`] (nothing logged); I/O errors.
    pub fn create_accounts(&self, batch: Vec<NewAccount>) -> Result<Vec<AccountResult>, LogError> {
        if batch.len() > BATCH_MAX {
            return Err(BatchError::TooLarge { len: batch.len() }.into());
        }
        match self.ask(Op::Accounts(batch))? {
            Answer::Accounts(results) => Ok(results),
            _ => Err(LogError::Stopped),
        }
    }

    /// Applies transfers, durably: the results are returned only after the batch is on
    /// disk.
    ///
    /// # Errors
    ///
    /// As [`create_accounts`](Self::create_accounts).
    pub fn create_transfers(&self, batch: Vec<Transfer>) -> Result<Vec<TransferResult>, LogError> {
        if batch.len() > BATCH_MAX {
            return Err(BatchError::TooLarge { len: batch.len() }.into());
        }
        match self.ask(Op::Transfers(batch))? {
            Answer::Transfers(results) => Ok(results),
            _ => Err(LogError::Stopped),
        }
    }

    /// Closes an account, durably; idempotent by its shape.
    ///
    /// # Errors
    ///
    /// I/O errors.
    pub fn close_account(&self, id: AccountId) -> Result<bool, LogError> {
        match self.ask(Op::Close(id))? {
            Answer::Close(existed) => Ok(existed),
            _ => Err(LogError::Stopped),
        }
    }

    /// Looks up an account.
    pub fn account(&self, id: AccountId) -> Option<Account> {
        self.ledger.lock().account(id)
    }

    /// Looks up a transfer.
    pub fn transfer(&self, id: TransferId) -> Option<StoredTransfer> {
        self.ledger.lock().transfer(id)
    }

    /// Checks the ledger's invariants; see [`Ledger::assert_invariants`].
    ///
    /// # Panics
    ///
    /// If an invariant is broken (a bug in this crate).
    pub fn assert_invariants(&self) {
        self.ledger.lock().assert_invariants();
    }
}

impl Drop for DurableWallet {
    fn drop(&mut self) {
        drop(self.requests.take());
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
    }
}

/// The log writer: takes every waiting request, appends their records, one fsync, then
/// applies them in order and answers.
fn write_log(mut file: File, ledger: &Mutex<Ledger>, queue: &Receiver<Request>, crash: CrashPoint) {
    let mut written: u64 = 0;
    while let Ok(first) = queue.recv() {
        let mut batch = vec![first];
        while batch.len() < 64 {
            match queue.try_recv() {
                Ok(request) => batch.push(request),
                Err(_) => break,
            }
        }
        let now_ms = ledger.lock().now_ms();
        let mut bytes = Vec::new();
        for request in &batch {
            let record = encode(&request.op, now_ms);
            written += 1;
            if crash == CrashPoint::MidAppend(written) {
                bytes.extend_from_slice(&record[..record.len() / 2]);
                let _ = file.write_all(&bytes);
                let _ = file.sync_data();
                std::process::abort();
            }
            bytes.extend_from_slice(&record);
        }
        let synced = file.write_all(&bytes).and_then(|()| {
            if matches!(crash, CrashPoint::AfterAppend(n) if n <= written) {
                std::process::abort();
            }
            file.sync_data()
        });
        if let Err(e) = synced {
            // Nothing of this group is applied or acknowledged; the writer stops.
            for request in batch {
                let _ = request.reply.send(Err(e.to_string()));
            }
            return;
        }
        if matches!(crash, CrashPoint::AfterSync(n) if n <= written) {
            std::process::abort();
        }
        let mut ledger = ledger.lock();
        for request in batch {
            let answer = apply(&mut ledger, &request.op, now_ms).map_err(|e| e.to_string());
            let _ = request.reply.send(answer);
        }
    }
}
