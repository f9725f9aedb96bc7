//! The durable wallet: every batch is decided, appended to a write-ahead log with its
//! results, and synced before it is answered; opening the log replays it and checks that
//! every record decides the same results again.
//!
//! * [`format`]: the bytes of the log (a file header, records with a header checksum and
//!   a payload checksum, each batch with its results).
//! * [`recovery`]: the replay, and the rule that tells a torn tail (cut, kept aside,
//!   reported) from corruption (refused, with its offset).
//! * [`writer`]: the log writer, on idem-durable's group-commit writer.
//!
//! The log goes through a [`LogDevice`]: a [`File`] normally; a crash test passes a
//! device that throws away what was written since the last sync, as a power loss does.

mod format;
mod recovery;
mod writer;

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use idem_core::{Clock, SystemClock};
use idem_durable::group_commit::{CommitError, GroupCommit};
use parking_lot::Mutex;

use format::CloseAccount;

use crate::ledger::{BATCH_MAX, BatchError, Ledger, Limits};
use crate::types::{AccountId, AccountResult, NewAccount};
use crate::types::{Results, Transfer, TransferResult};
use crate::wallet::{Wallet, trace_batch};

/// Why the log could not be opened or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LogError {
    /// An I/O error.
    #[error("log I/O: {0}")]
    Io(#[from] std::io::Error),
    /// Another wallet holds the log open (in this process or another: a second server, or
    /// a restart that overlaps the old process). Two writers on one log would each answer
    /// the same transfer id as created. Stop the other, or open another log.
    #[error("the log {} is open in another wallet; stop it, or open another log", .path.display())]
    Locked {
        /// The log's path.
        path: PathBuf,
    },
    /// The file is not a wallet log of this format.
    #[error("not a wallet log of this format (bad file header)")]
    BadHeader,
    /// The file is a wallet log of another format version, which this build does not
    /// replay: open it with the version that wrote it, or start a new log.
    #[error(
        "a wallet log of format version {found}; this build reads version {reads} only: open \
         it with the version that wrote it, or start a new log",
        reads = format::FILE_VERSION
    )]
    Version {
        /// The version digit the file's header holds.
        found: char,
    },
    /// A record is corrupt and acknowledged batches may follow it, so the wallet refuses
    /// to open instead of dropping them. Restore the log from a replica or a backup.
    #[error("corrupt log record at byte offset {offset}: {reason}")]
    Corrupt {
        /// Where the bad record starts.
        offset: u64,
        /// What is wrong with it.
        reason: String,
    },
    /// Replaying the record at `offset` decided other results than the batch was
    /// answered with (the wallet was opened with other limits, or the ledger's rules
    /// changed): history would be rewritten, so the wallet refuses to open.
    #[error("the record at byte offset {offset} replays to other results than it answered")]
    Diverged {
        /// Where the record starts.
        offset: u64,
    },
    /// Replaying the log broke a ledger invariant.
    #[error("replayed ledger is inconsistent: {0}")]
    Inconsistent(String),
    /// The batch was refused (too large); nothing was logged.
    #[error(transparent)]
    Batch(#[from] BatchError),
    /// The log writer stopped (an earlier write or sync failed); nothing more is
    /// accepted. Reopen the log: it holds every acknowledged batch.
    #[error("the log writer stopped")]
    Stopped,
    /// The group holding this batch failed: an append or sync erred, or deciding or
    /// writing it panicked (a bug: an internal check, a device that panicked). Nothing of
    /// the group was answered as done, the in-memory ledger was rebuilt from the synced
    /// log, and the writer stopped; reopening the log recovers every acknowledged batch.
    /// The rebuild reads the log back: on a device that can no longer be read, the ledger
    /// stays as the group left it and reads may show it; reopen before trusting a read.
    /// Its source says why: the device's I/O error, or the panic.
    #[error("the log writer failed: {0}; this batch may not be logged")]
    WriterFailed(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// Where the log's bytes go: a [`File`] normally. A device must make every appended byte
/// durable when `sync` returns `Ok`; a crash test passes one that, at a simulated power
/// loss, keeps only what was synced.
pub trait LogDevice: Send + 'static {
    /// Reads the whole log.
    ///
    /// # Errors
    ///
    /// The I/O error.
    fn read_all(&mut self) -> std::io::Result<Vec<u8>>;

    /// Appends `bytes` at the end.
    ///
    /// # Errors
    ///
    /// The I/O error; what was appended is unknown.
    fn append(&mut self, bytes: &[u8]) -> std::io::Result<()>;

    /// Makes every appended byte durable (`fsync`).
    ///
    /// # Errors
    ///
    /// The I/O error; what is durable is unknown since the last successful sync.
    fn sync(&mut self) -> std::io::Result<()>;

    /// Cuts the log to `len` bytes, durably.
    ///
    /// # Errors
    ///
    /// The I/O error.
    fn truncate(&mut self, len: u64) -> std::io::Result<()>;
}

/// A boxed device is a device (the wallet keeps its device boxed).
impl<D: LogDevice + ?Sized> LogDevice for Box<D> {
    fn read_all(&mut self) -> std::io::Result<Vec<u8>> {
        (**self).read_all()
    }
    fn append(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        (**self).append(bytes)
    }
    fn sync(&mut self) -> std::io::Result<()> {
        (**self).sync()
    }
    fn truncate(&mut self, len: u64) -> std::io::Result<()> {
        (**self).truncate(len)
    }
}

/// A file opened for reading and appending.
impl LogDevice for File {
    fn read_all(&mut self) -> std::io::Result<Vec<u8>> {
        let mut bytes = Vec::new();
        self.seek(SeekFrom::Start(0))?;
        self.read_to_end(&mut bytes)?;
        Ok(bytes)
    }

    fn append(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.write_all(bytes)
    }

    fn sync(&mut self) -> std::io::Result<()> {
        self.sync_data()
    }

    fn truncate(&mut self, len: u64) -> std::io::Result<()> {
        self.set_len(len)?;
        self.sync_all()
    }
}

/// What opening the log found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recovery {
    /// Records replayed.
    pub records: u64,
    /// A tail that was not a complete record, cut from the log.
    pub torn_tail: Option<TornTail>,
}

/// A tail cut from the log at open: never acknowledged (its sync had not returned), kept
/// in a side file all the same, so that nothing is dropped unseen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TornTail {
    /// Where the cut starts.
    pub offset: u64,
    /// How many bytes were cut.
    pub len: u64,
    /// Why the bytes there are not a record.
    pub reason: String,
    /// The side file holding the cut bytes: `<log>.torn-<offset>`, or `<log>.torn-<offset>.N`
    /// when earlier cuts at that offset are kept already (at most [`TORN_TAILS_MAX`] per
    /// offset).
    pub saved_to: PathBuf,
}

/// One kind of batch the log holds: how the ledger decides it, the result codes its
/// record keeps, and the record's bytes. A request to the log writer is one of these and
/// is answered with its own `Results`, so no answer is matched back to its request.
pub(crate) trait Logged: Send + 'static {
    /// What the batch is answered with.
    type Results: Send + 'static;

    /// Decides the batch on `ledger` at the clock value `now_ms` (the one its record
    /// keeps, so that replay decides alike).
    fn decide(&self, ledger: &mut Ledger, now_ms: u64) -> Result<Self::Results, BatchError>;

    /// The results as the log stores them: one byte per event, the result's code.
    fn codes(results: &Self::Results) -> Vec<u8>;

    /// The batch's record, run at `now_ms` and answered with `codes`.
    fn record(&self, now_ms: u64, codes: &[u8]) -> Vec<u8>;
}

impl Logged for Vec<NewAccount> {
    type Results = Results<AccountResult>;

    fn decide(&self, ledger: &mut Ledger, now_ms: u64) -> Result<Self::Results, BatchError> {
        ledger.create_accounts_at(self, now_ms)
    }

    fn codes(results: &Self::Results) -> Vec<u8> {
        results.iter().map(|r| *r as u8).collect()
    }

    fn record(&self, now_ms: u64, codes: &[u8]) -> Vec<u8> {
        format::encode_accounts(self, now_ms, codes)
    }
}

impl Logged for Vec<Transfer> {
    type Results = Results<TransferResult>;

    fn decide(&self, ledger: &mut Ledger, now_ms: u64) -> Result<Self::Results, BatchError> {
        ledger.create_transfers_at(self, now_ms)
    }

    fn codes(results: &Self::Results) -> Vec<u8> {
        results.iter().map(|r| *r as u8).collect()
    }

    fn record(&self, now_ms: u64, codes: &[u8]) -> Vec<u8> {
        format::encode_transfers(self, now_ms, codes)
    }
}

impl Logged for CloseAccount {
    /// Whether the account exists.
    type Results = bool;

    fn decide(&self, ledger: &mut Ledger, _now_ms: u64) -> Result<bool, BatchError> {
        Ok(ledger.close_account(self.0))
    }

    fn codes(existed: &bool) -> Vec<u8> {
        vec![u8::from(*existed)]
    }

    fn record(&self, now_ms: u64, codes: &[u8]) -> Vec<u8> {
        format::encode_close(*self, now_ms, codes)
    }
}

/// A wallet whose every acknowledged batch is on disk. Batches from all threads go to one
/// log writer: those arriving while a sync is in progress share the next one (group
/// commit); each batch is answered only after its record, results included, is synced.
/// Its lookups are every [`Wallet`]'s.
///
/// ```
/// use idem_wallet::{AccountFlags, DurableWallet, NewAccount, Transfer, TransferResult};
///
/// let path = std::env::temp_dir().join(format!("idem-wallet-doc-{}.wal", std::process::id()));
/// # let _ = std::fs::remove_file(&path);
/// let wallet = DurableWallet::open(&path)?;
/// let a = |id| NewAccount { id, ledger: 1, code: 1, ..Default::default() };
/// wallet.create_accounts(&[a(1), a(2)])?;
/// let t = Transfer {
///     id: 9, debit_account_id: 1, credit_account_id: 2, amount: 5, ledger: 1, code: 1,
///     ..Default::default()
/// };
/// assert_eq!(wallet.create_transfers(&[t])?, vec![TransferResult::Created]);
/// drop(wallet); // a crash here loses nothing acknowledged
/// let reopened = DurableWallet::open(&path)?;
/// assert_eq!(reopened.recovery().records, 2);
/// assert_eq!(reopened.create_transfers(&[t])?, vec![TransferResult::Exists]);
/// assert_eq!(reopened.account(2).map(|a| a.credits_posted), Some(5));
/// # drop(reopened); std::fs::remove_file(&path).ok();
/// # Ok::<(), idem_wallet::LogError>(())
/// ```
pub type DurableWallet = Wallet<Durable>;

/// How a [`DurableWallet`] keeps its batches: a write-ahead log at `path`, written by one
/// group-commit writer, and what opening the log found.
pub struct Durable {
    writer: GroupCommit<writer::LogWriter<Box<dyn LogDevice>>>,
    path: PathBuf,
    recovery: Recovery,
}

impl std::fmt::Debug for Durable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Durable")
            .field("path", &self.path)
            .field("recovery", &self.recovery)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for DurableWallet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DurableWallet")
            .field("path", &self.storage.path)
            .field("recovery", &self.storage.recovery)
            .finish_non_exhaustive()
    }
}

impl DurableWallet {
    /// Opens (creating) the log at `path` with the default limits and the system clock,
    /// replaying it.
    ///
    /// # Errors
    ///
    /// [`LogError`]: I/O, not a log, corruption (with its offset), a replay that decides
    /// other results, or an inconsistent replay; [`LogError::Locked`] if another wallet
    /// holds the log open (the file is locked for as long as the wallet lives).
    pub fn open(path: &Path) -> Result<Self, LogError> {
        Self::open_with(path, Limits::default(), Arc::new(SystemClock))
    }

    /// Opens (creating) the log at `path` with explicit limits and clock. The limits must
    /// be the ones the log was written with: a replay that decides other results is
    /// refused ([`LogError::Diverged`]).
    ///
    /// # Errors
    ///
    /// As [`open`](Self::open).
    pub fn open_with(path: &Path, limits: Limits, clock: Arc<dyn Clock>) -> Result<Self, LogError> {
        let file = OpenOptions::new().read(true).append(true).create(true).open(path);
        // The OS error alone ("No such file or directory") does not say which file.
        let file = file.map_err(|e| {
            std::io::Error::new(e.kind(), format!("cannot open the log {}: {e}", path.display()))
        })?;
        // An exclusive lock for the life of the file (the writer's device): released when
        // the wallet's writer closes it, or by the OS when the process dies.
        file.try_lock().map_err(|e| match e {
            std::fs::TryLockError::WouldBlock => LogError::Locked { path: path.to_path_buf() },
            std::fs::TryLockError::Error(e) => LogError::Io(std::io::Error::new(
                e.kind(),
                format!("cannot lock the log {}: {e}", path.display()),
            )),
        })?;
        Self::open_on(path, file, limits, clock)
    }

    /// Opens the log on `device`, which holds the log at `path` (`path` names the side
    /// file of a cut tail, and the directory to sync). Nothing is locked here: the caller
    /// keeps every other writer off the device ([`open_with`](Self::open_with) locks the
    /// file).
    ///
    /// # Errors
    ///
    /// As [`open`](Self::open).
    pub fn open_on<D: LogDevice>(
        path: &Path,
        mut device: D,
        limits: Limits,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, LogError> {
        let mut ledger = Ledger::new(limits, clock);
        let (recovery, synced_len) = recover(path, &mut device, &mut ledger)?;
        // The log (or its cut) is durable only once its directory entry is.
        sync_directory(path)?;
        let ledger = Arc::new(Mutex::new(ledger));
        let device: Box<dyn LogDevice> = Box::new(device);
        let state = writer::LogWriter::new(device, ledger.clone(), synced_len);
        let writer = GroupCommit::start("idem-wallet-log", state, writer::LIMITS)?;
        Ok(Self { ledger, storage: Durable { writer, path: path.to_path_buf(), recovery } })
    }

    /// What opening the log found: records replayed, and a torn tail if one was cut.
    pub fn recovery(&self) -> &Recovery {
        &self.storage.recovery
    }

    /// Decides `batch` in the writer's next group and answers with its own results once
    /// the group is synced.
    fn ask<B: Logged>(&self, batch: B) -> Result<B::Results, LogError> {
        let decide = move |w: &mut writer::LogWriter<Box<dyn LogDevice>>| w.decide(&batch);
        match self.storage.writer.submit(decide) {
            Ok(results) => Ok(results?),
            Err(CommitError::Stopped) => Err(LogError::Stopped),
            Err(CommitError::Failed(why)) => Err(LogError::WriterFailed(Box::new(why))),
            // Lost (the batch's own work panicked), or a reason added later: the writer
            // failed this batch, and the error says how.
            Err(other) => Err(LogError::WriterFailed(Box::new(other))),
        }
    }

    /// Creates accounts, durably.
    ///
    /// # Errors
    ///
    /// [`LogError::Batch`] for a batch over [`BATCH_MAX`] (nothing logged); I/O errors.
    pub fn create_accounts(
        &self,
        batch: &[NewAccount],
    ) -> Result<Results<AccountResult>, LogError> {
        if batch.len() > BATCH_MAX {
            return Err(BatchError::TooLarge { len: batch.len() }.into());
        }
        let _span = idem_core::trace_span!(INFO, "create_accounts", len = batch.len());
        // The batch is copied once, to travel to the writer thread.
        let results = self.ask(batch.to_vec())?;
        trace_batch(&results, AccountResult::Created, AccountResult::Exists);
        Ok(results)
    }

    /// Applies transfers, durably: the results are returned only after the batch and its
    /// results are on disk.
    ///
    /// # Errors
    ///
    /// As [`create_accounts`](Self::create_accounts).
    pub fn create_transfers(
        &self,
        batch: &[Transfer],
    ) -> Result<Results<TransferResult>, LogError> {
        if batch.len() > BATCH_MAX {
            return Err(BatchError::TooLarge { len: batch.len() }.into());
        }
        let _span = idem_core::trace_span!(INFO, "create_transfers", len = batch.len());
        let results = self.ask(batch.to_vec())?;
        trace_batch(&results, TransferResult::Created, TransferResult::Exists);
        Ok(results)
    }

    /// Closes an account, durably; idempotent by its shape.
    ///
    /// # Errors
    ///
    /// I/O errors.
    pub fn close_account(&self, id: AccountId) -> Result<bool, LogError> {
        self.ask(CloseAccount(id))
    }
}

/// Replays the log on `device` into `ledger`, writing the file header into an empty log
/// and cutting a torn tail (kept in a side file first). Returns what it found and the
/// length of the log, all of it synced.
fn recover<D: LogDevice>(
    path: &Path,
    device: &mut D,
    ledger: &mut Ledger,
) -> Result<(Recovery, u64), LogError> {
    let bytes = device.read_all()?;
    if bytes.is_empty() || recovery::torn_creation(&bytes) {
        // A new log, or one whose header never reached the disk: nothing in it was ever
        // acknowledged. What is there is kept aside; the log starts afresh.
        let torn_tail = if bytes.is_empty() {
            None
        } else {
            Some(cut(path, device, 0, &bytes, "file header cut short")?)
        };
        device.append(format::FILE_HEADER)?;
        device.sync()?;
        return Ok((Recovery { records: 0, torn_tail }, format::FILE_HEADER.len() as u64));
    }
    let replayed = recovery::replay(&bytes, ledger)?;
    let torn_tail = match replayed.tail {
        None => None,
        Some(tail) => Some(cut(path, device, tail.offset, &tail.bytes, tail.reason)?),
    };
    Ok((Recovery { records: replayed.records, torn_tail }, replayed.valid_len))
}

/// Keeps `bytes` (the log from `offset` on) in a side file, synced, then cuts the log at
/// `offset`.
fn cut<D: LogDevice>(
    path: &Path,
    device: &mut D,
    offset: u64,
    bytes: &[u8],
    reason: &str,
) -> Result<TornTail, LogError> {
    let (saved_to, mut side) = side_file(path, offset)?;
    side.write_all(bytes)?;
    side.sync_all()?;
    // The side file's name too, before the log loses the bytes: a power loss after the
    // cut must not leave them in a file no directory names.
    sync_directory(path)?;
    device.truncate(offset)?;
    idem_core::trace_event!(
        WARN,
        offset,
        len = bytes.len(),
        reason,
        saved_to = %saved_to.display(),
        "torn tail cut from the log and kept aside"
    );
    Ok(TornTail { offset, len: bytes.len() as u64, reason: reason.into(), saved_to })
}

/// Side files a log may keep for cuts at one offset (`<log>.torn-<offset>`, then
/// `.torn-<offset>.1`, ...): the first append after a restart can tear at the same offset
/// again, and an earlier cut's bytes are never overwritten. Past it, opening the log is
/// refused (an I/O error that says so) until some are moved away.
pub const TORN_TAILS_MAX: u32 = 1_000;

/// A new side file for the tail cut at `offset`, created (never truncating one kept
/// before), and its path. With `TORN_TAILS_MAX` kept already the cut is refused: nothing
/// is cut that could not be kept.
fn side_file(path: &Path, offset: u64) -> Result<(PathBuf, File), LogError> {
    for n in 0..TORN_TAILS_MAX {
        let mut name = path.file_name().unwrap_or_default().to_os_string();
        name.push(format!(".torn-{offset}"));
        if n > 0 {
            name.push(format!(".{n}"));
        }
        let saved_to = path.with_file_name(name);
        match OpenOptions::new().write(true).create_new(true).open(&saved_to) {
            Ok(file) => return Ok((saved_to, file)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e.into()),
        }
    }
    Err(LogError::Io(std::io::Error::other(format!(
        "{TORN_TAILS_MAX} torn tails of {} cut at byte {offset} are kept already; move them \
         away to let the log open",
        path.display()
    ))))
}

/// Syncs the directory holding `path`, so that a newly created log (or side file) stays.
fn sync_directory(path: &Path) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    File::open(dir)?.sync_all()
}
