//! The durable wallet when its log device fails or its log holds a record it cannot read.
//!
//! * An append or a sync that returns an error fails its batch: the caller is answered
//!   `WriterFailed`, nothing of the batch is visible to a later read, every read after the
//!   failure returns (none waits on a ledger the writer never gave back), and the writer
//!   stops: later batches are answered `Stopped`, as `LogError::WriterFailed` documents.
//!   Reopening the log recovers every acknowledged batch, and a retry of the failed one
//!   applies it at most once.
//! * A record whose checksums hold but whose kind is unknown is corruption: the log is
//!   refused at the record's offset and nothing is cut, wherever the record sits.
//! * A reopened log answers every query as before: user data, histories and timestamps
//!   come back from the log, not from memory.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, mpsc};
use std::time::Duration;

use idem_core::SystemClock;
use idem_wallet::{
    AccountFilter, AccountFilterFlags, AccountFlags, AccountResult, DurableWallet, Limits,
    LogDevice, LogError, NewAccount, QueryFilter, Transfer, TransferFlags, TransferResult as R,
};

use crate::t;

/// How long a read may take before the test calls it hung.
const WAIT: Duration = Duration::from_secs(10);

/// Runs `read` on its own thread and waits at most [`WAIT`] for its answer, so that a read
/// blocked for ever (on a ledger lock nobody gives back) fails the test instead of hanging
/// it. The thread of a read that never returns is left behind; the test has failed.
#[track_caller]
fn promptly<T: Send + 'static>(what: &str, read: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(read());
    });
    match rx.recv_timeout(WAIT) {
        Ok(answer) => answer,
        Err(_) => panic!("{what} did not return within {WAIT:?}: it waits on the failed group"),
    }
}

/// Which device call fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// The append writes the first half of the bytes, then errs (a torn write, ENOSPC).
    Append,
    /// The append succeeds; the sync errs (EIO from fsync).
    Sync,
}

/// The log file, with the `fail_at`th call of `fault` answered with an error. Every call
/// before and after it goes to the file.
struct FailingFile {
    file: File,
    fault: Fault,
    calls: u64,
    fail_at: u64,
}

impl FailingFile {
    fn fails_now(&mut self, fault: Fault) -> bool {
        if fault != self.fault {
            return false;
        }
        self.calls += 1;
        self.calls == self.fail_at
    }
}

fn injected() -> std::io::Error {
    std::io::Error::other("injected device failure")
}

impl LogDevice for FailingFile {
    fn read_all(&mut self) -> std::io::Result<Vec<u8>> {
        self.file.read_all()
    }
    fn append(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        if self.fails_now(Fault::Append) {
            self.file.append(&bytes[..bytes.len() / 2])?;
            return Err(injected());
        }
        self.file.append(bytes)
    }
    fn sync(&mut self) -> std::io::Result<()> {
        if self.fails_now(Fault::Sync) { Err(injected()) } else { self.file.sync() }
    }
    fn truncate(&mut self, len: u64) -> std::io::Result<()> {
        self.file.truncate(len)
    }
}

fn log_in(tag: &str) -> PathBuf {
    idem_testkit::scratch_dir(tag).join("wallet.wal")
}

fn open_failing(log: &Path, fault: Fault, fail_at: u64) -> Arc<DurableWallet> {
    let file = std::fs::OpenOptions::new().read(true).append(true).create(true).open(log);
    let device = FailingFile { file: file.expect("the log"), fault, calls: 0, fail_at };
    let wallet = DurableWallet::open_on(log, device, Limits::default(), Arc::new(SystemClock));
    Arc::new(wallet.expect("open"))
}

fn accounts() -> Vec<NewAccount> {
    (1..=3).map(|id| NewAccount { id, ledger: 1, code: 1, ..Default::default() }).collect()
}

/// The batch that fails: two transfers the ledger would accept.
fn doomed() -> [Transfer; 2] {
    [t(11, 1, 2, 7), t(12, 2, 3, 5)]
}

/// Reads after the failure see the acknowledged batches only, and return.
fn check_reads_after_failure(wallet: &Arc<DurableWallet>, fault: Fault) {
    let w = wallet.clone();
    let seen = promptly("a transfer lookup", move || (w.transfer(10), w.transfer(11)));
    assert!(seen.0.is_some(), "{fault:?}: the acknowledged transfer stays visible");
    assert!(seen.1.is_none(), "{fault:?}: the failed batch is not visible");
    let w = wallet.clone();
    let found = promptly("a batch lookup", move || w.lookup_transfers(&[10, 11, 12]));
    assert_eq!(found.expect("small").len(), 1, "{fault:?}: only transfer 10");
    let w = wallet.clone();
    let credited = promptly("an account lookup", move || w.account(2).map(|a| a.credits_posted));
    assert_eq!(credited, Some(50), "{fault:?}: no amount of the failed batch is visible");
    let w = wallet.clone();
    promptly("the invariant check", move || w.assert_invariants());
}

/// Later batches are refused `Stopped`, promptly: the writer is not wedged.
fn check_writer_stopped(wallet: &Arc<DurableWallet>, fault: Fault) {
    let w = wallet.clone();
    let later =
        promptly("a batch after the failure", move || w.create_transfers(&[t(13, 1, 3, 1)]));
    assert!(matches!(later, Err(LogError::Stopped)), "{fault:?}: {later:?}");
    let w = wallet.clone();
    let retried = promptly("a retry of the failed batch", move || w.create_transfers(&doomed()));
    assert!(matches!(retried, Err(LogError::Stopped)), "{fault:?}: {retried:?}");
}

/// Reopened, the log holds every acknowledged batch; the failed batch is either cut (its
/// bytes never fully reached the file) or replayed (they did, though the sync said no),
/// and a retry of it is answered accordingly, applied once either way.
fn check_reopened(log: &Path, fault: Fault, acknowledged_len: u64) {
    let reopened = DurableWallet::open(log).expect("the log reopens");
    let torn = reopened.recovery().torn_tail.as_ref().map(|tail| tail.offset);
    let expected = match fault {
        Fault::Append => (Some(acknowledged_len), vec![R::Created, R::Created]),
        Fault::Sync => (None, vec![R::Exists, R::Exists]),
    };
    assert_eq!(torn, expected.0, "{fault:?}: {:?}", reopened.recovery());
    assert!(reopened.transfer(10).is_some(), "{fault:?}: acknowledged transfer kept");
    assert_eq!(reopened.create_transfers(&[t(10, 1, 2, 50)]).expect("replay"), vec![R::Exists]);
    assert_eq!(reopened.create_transfers(&doomed()).expect("retry"), expected.1, "{fault:?}");
    assert_eq!(reopened.account(2).map(|a| a.credits_posted), Some(57), "{fault:?}: once");
    reopened.assert_invariants();
}

#[test]
fn a_failed_append_or_sync_fails_its_batch_hides_it_and_stops_the_writer() {
    for fault in [Fault::Append, Fault::Sync] {
        let log = log_in("wallet-device-fault");
        // Call 1 writes the file header, 2 the accounts, 3 transfer 10; call 4 fails.
        let wallet = open_failing(&log, fault, 4);
        let created = wallet.create_accounts(&accounts()).expect("accounts");
        assert!(created.iter().all(|r| *r == AccountResult::Created), "{created:?}");
        assert_eq!(wallet.create_transfers(&[t(10, 1, 2, 50)]).expect("ack"), vec![R::Created]);
        let acknowledged_len = std::fs::metadata(&log).expect("log").len();
        let w = wallet.clone();
        let failed = promptly("the failing batch", move || w.create_transfers(&doomed()));
        match &failed {
            Err(LogError::WriterFailed(why)) => {
                assert!(why.to_string().contains("injected"), "{why}");
            }
            other => panic!("{fault:?}: expected WriterFailed, got {other:?}"),
        }
        check_reads_after_failure(&wallet, fault);
        check_writer_stopped(&wallet, fault);
        drop(wallet);
        check_reopened(&log, fault, acknowledged_len);
        let _ = std::fs::remove_dir_all(log.parent().expect("a directory"));
    }
}

/// A record as the log frames it (see `durable/format.rs`): length, payload checksum,
/// header checksum, payload.
fn framed(payload: &[u8]) -> Vec<u8> {
    let mut record = Vec::new();
    record.extend_from_slice(&u32::try_from(payload.len()).expect("small").to_le_bytes());
    record.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
    let header_checksum = crc32fast::hash(&record[..8]);
    record.extend_from_slice(&header_checksum.to_le_bytes());
    record.extend_from_slice(payload);
    record
}

/// A payload of `kind` with no events: kind, clock, count 0.
fn payload_of_kind(kind: u8) -> Vec<u8> {
    let mut payload = vec![kind];
    payload.extend_from_slice(&1_700_000_000_000u64.to_le_bytes());
    payload.extend_from_slice(&0u32.to_le_bytes());
    payload
}

/// A log of three acknowledged batches; returns its bytes.
fn acknowledged_log(log: &Path) -> Vec<u8> {
    let wallet = DurableWallet::open(log).expect("open");
    wallet.create_accounts(&accounts()).expect("accounts").all_applied().expect("applied");
    wallet.create_transfers(&[t(10, 1, 2, 50)]).expect("batch").all_applied().expect("applied");
    wallet.create_transfers(&[t(11, 2, 3, 5)]).expect("batch").all_applied().expect("applied");
    drop(wallet);
    std::fs::read(log).expect("log")
}

/// Where the unknown record goes, and what is around it.
#[derive(Debug, Clone, Copy)]
enum Placed {
    /// The last record of the log (where a torn append would be).
    Last,
    /// Between acknowledged records.
    Middle,
    /// After a record with a flipped payload bit, at the end: the bad record is not the
    /// last append, since one whose checksums hold was written after it.
    AfterBitRot,
}

/// The log bytes for `placed`, and the offset the refusal must name.
fn with_unknown_record(valid: &[u8], kind: u8, placed: Placed) -> (Vec<u8>, usize) {
    let unknown = framed(&payload_of_kind(kind));
    let starts = record_starts(valid);
    let mut bytes = valid.to_vec();
    match placed {
        Placed::Last => {
            bytes.extend_from_slice(&unknown);
            (bytes, valid.len())
        }
        Placed::Middle => {
            bytes.splice(starts[2]..starts[2], unknown.iter().copied());
            (bytes, starts[2])
        }
        Placed::AfterBitRot => {
            let rotted = starts[starts.len() - 1];
            bytes[rotted + 12 + 20] ^= 0x01;
            bytes.extend_from_slice(&unknown);
            (bytes, rotted)
        }
    }
}

/// The offset of each record of a valid log (after the 8-byte file header).
fn record_starts(bytes: &[u8]) -> Vec<usize> {
    let mut starts = Vec::new();
    let mut at = 8;
    while at + 12 <= bytes.len() {
        starts.push(at);
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
        at += 12 + len as usize;
    }
    starts
}

#[test]
fn a_record_of_unknown_kind_with_valid_checksums_is_corruption_never_a_torn_tail() {
    for (kind, placed) in [
        (0, Placed::Last),
        (4, Placed::Last),
        (255, Placed::Last),
        (9, Placed::Middle),
        (9, Placed::AfterBitRot),
    ] {
        let log = log_in("wallet-unknown-kind");
        let valid = acknowledged_log(&log);
        let (bytes, offset) = with_unknown_record(&valid, kind, placed);
        std::fs::write(&log, &bytes).expect("write");
        match DurableWallet::open(&log) {
            Err(LogError::Corrupt { offset: at, reason }) => {
                assert_eq!(at, offset as u64, "kind {kind} {placed:?}: {reason}");
            }
            Err(other) => panic!("kind {kind} {placed:?}: expected Corrupt, got {other:?}"),
            Ok(w) => panic!("kind {kind} {placed:?}: opened, {:?}", w.recovery()),
        }
        assert_eq!(std::fs::read(&log).expect("log"), bytes, "kind {kind} {placed:?}: nothing cut");
        let dir = log.parent().expect("a directory");
        let side_files = std::fs::read_dir(dir).expect("dir").count();
        assert_eq!(side_files, 1, "kind {kind} {placed:?}: no torn tail kept aside");
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// A log written by an older format (version 3 replayed posts of 0 as the whole amount)
/// is refused by its version, with what to do, and left as it was; a file that is no
/// wallet log at all is a bad header.
#[test]
fn a_log_of_an_older_format_is_refused_by_its_version_and_kept() {
    let log = log_in("wallet-old-version");
    let mut bytes = acknowledged_log(&log);
    // Version 4 logs, the last format before user data and histories, are the ones met.
    bytes[7] = b'4';
    std::fs::write(&log, &bytes).expect("write");
    let refused = DurableWallet::open(&log).map(|_| ()).expect_err("an old version");
    assert!(matches!(refused, LogError::Version { found: '4' }), "{refused:?}");
    assert!(refused.to_string().contains("start a new log"), "{refused}");
    assert_eq!(std::fs::read(&log).expect("log"), bytes, "nothing cut or rewritten");
    std::fs::write(&log, b"NOTALOG!").expect("write");
    let refused = DurableWallet::open(&log).map(|_| ()).expect_err("not a log");
    assert!(matches!(refused, LogError::BadHeader), "{refused:?}");
}

/// Everything a query can ask of `wallet`, as one value to compare.
fn every_answer(wallet: &DurableWallet) -> String {
    let any = QueryFilter { limit: 100, ..Default::default() };
    let mut answers =
        format!("{:?}\n{:?}\n", wallet.query_accounts(&any), wallet.query_transfers(&any));
    for user_data_64 in [0, 6] {
        let tagged = QueryFilter { user_data_64, user_data_32: 3, ..any };
        answers += &format!("{:?}\n", wallet.query_transfers(&tagged));
    }
    for account_id in 1..=3 {
        let filter = AccountFilter {
            account_id,
            limit: 100,
            flags: AccountFilterFlags::DEBITS | AccountFilterFlags::CREDITS,
            ..Default::default()
        };
        answers += &format!("{:?}\n", wallet.get_account_transfers(&filter));
        answers += &format!("{:?}\n", wallet.get_account_balances(&filter));
    }
    answers
}

#[test]
fn a_reopened_log_answers_every_query_as_before() {
    let log = log_in("wallet-queries-reopened");
    let wallet = DurableWallet::open(&log).expect("open");
    let account = |id, user_data_128, flags| NewAccount {
        id,
        ledger: 1,
        code: 1,
        flags,
        user_data_128,
        user_data_64: 40 + id as u64,
        user_data_32: 3,
    };
    let accounts = [
        account(1, 8, AccountFlags::default()),
        account(2, 9, AccountFlags::HISTORY),
        account(3, 9, AccountFlags::HISTORY),
    ];
    wallet.create_accounts(&accounts).expect("batch").all_applied().expect("applied");
    let tag = |x: Transfer, u64_, u32_| Transfer { user_data_64: u64_, user_data_32: u32_, ..x };
    let pending = Transfer { flags: TransferFlags::PENDING, ..t(11, 2, 3, 5) };
    let post = Transfer {
        id: 12,
        pending_id: 11,
        amount: 3,
        flags: TransferFlags::POST_PENDING,
        ..Default::default()
    };
    let batch = [tag(t(10, 1, 2, 50), 6, 3), tag(pending, 6, 0), tag(post, 0, 3)];
    let first = wallet.create_transfers(&batch).expect("batch");
    first.all_applied().expect("applied");
    let before = every_answer(&wallet);
    assert!(before.contains("user_data_64: 6") && before.contains("credits_pending: 5"));
    drop(wallet);
    let wallet = DurableWallet::open(&log).expect("reopen");
    assert_eq!(every_answer(&wallet), before, "the log keeps what the queries read");
    let replayed = wallet.create_transfers(&batch).expect("batch");
    assert_eq!(replayed, [R::Exists; 3]);
    assert_eq!(replayed.timestamps(), first.timestamps(), "the original timestamps");
}

/// Two wallets on one log would each answer the same transfer id `Created` (each replays
/// its own ledger) and move the money twice. The second open is refused while the first
/// lives; once the first is dropped its lock is gone with it.
#[test]
fn a_log_open_in_one_wallet_is_refused_to_a_second_until_the_first_is_dropped() {
    let log = log_in("wallet-locked");
    let first = DurableWallet::open(&log).expect("open");
    first.create_accounts(&accounts()).expect("accounts").all_applied().expect("applied");
    let second = DurableWallet::open(&log);
    let Err(LogError::Locked { path }) = &second else {
        panic!("a second wallet opened the log: {:?}", second.map(|w| w.recovery().clone()))
    };
    assert_eq!(path, &log);
    let said = second.as_ref().map(|_| ()).expect_err("refused").to_string();
    assert!(said.contains("open in another wallet") && said.contains("wallet.wal"), "{said}");
    assert_eq!(first.create_transfers(&[t(9, 1, 2, 5)]).expect("logged"), vec![R::Created]);
    drop(first);
    let reopened = DurableWallet::open(&log).expect("the lock went with the first wallet");
    assert_eq!(reopened.create_transfers(&[t(9, 1, 2, 5)]).expect("replay"), vec![R::Exists]);
    assert_eq!(reopened.account(2).map(|a| a.credits_posted), Some(5));
}

/// A transfer's 128-bit fields are the client's to choose, and the log keeps them as they
/// are: 96 bytes that can spell a whole record whose checksums hold. When a crash tears
/// the append that holds them, the torn record's own payload is no later record: the tail
/// is cut and reported, not refused as corruption (which would need a restore).
#[test]
fn a_torn_append_whose_payload_spells_a_record_is_cut_not_refused() {
    let log = log_in("wallet-spelled");
    let _ = acknowledged_log(&log);
    let mut spelled = framed(&payload_of_kind(3)); // a close of no accounts, whole
    spelled.resize(96, 0);
    let field =
        |i: usize| u128::from_le_bytes(spelled[i * 16..i * 16 + 16].try_into().expect("16"));
    let crafted = Transfer {
        id: field(0),
        debit_account_id: field(1),
        credit_account_id: field(2),
        amount: field(3),
        pending_id: field(4),
        user_data_128: field(5),
        ..t(0, 1, 2, 0)
    };
    let before = {
        let wallet = DurableWallet::open(&log).expect("open");
        let before = std::fs::metadata(&log).expect("log").len();
        let _ = wallet.create_transfers(&[crafted]).expect("logged, whatever its answer");
        before
    };
    let whole = std::fs::read(&log).expect("log");
    std::fs::write(&log, &whole[..whole.len() - 10]).expect("a torn append");
    let reopened = DurableWallet::open(&log).expect("a torn append is cut, not corruption");
    let torn = reopened.recovery().torn_tail.clone().expect("cut and reported");
    assert_eq!(torn.offset, before, "{torn:?}");
    assert_eq!(reopened.create_transfers(&[t(10, 1, 2, 50)]).expect("replay"), vec![R::Exists]);
}

/// Every cut keeps its bytes aside: the first append after a restart can tear at the same
/// offset again, and the second cut's side file must not overwrite the first's. With
/// `TORN_TAILS_MAX` kept at one offset, the log is refused, not cut unseen.
#[test]
fn cuts_at_one_offset_keep_every_side_file_up_to_the_limit() {
    let log = log_in("wallet-side-files");
    let valid = acknowledged_log(&log);
    let cut_once = |tail: &[u8]| {
        let mut bytes = valid.clone();
        bytes.extend_from_slice(tail);
        std::fs::write(&log, &bytes).expect("a torn append");
        DurableWallet::open(&log).map(|w| w.recovery().torn_tail.clone().expect("cut"))
    };
    let first = cut_once(b"first torn tail").expect("cut");
    let second = cut_once(b"second torn tail").expect("cut");
    assert_eq!((first.offset, second.offset), (valid.len() as u64, valid.len() as u64));
    assert_ne!(first.saved_to, second.saved_to);
    assert_eq!(std::fs::read(&first.saved_to).expect("kept"), b"first torn tail");
    assert_eq!(std::fs::read(&second.saved_to).expect("kept"), b"second torn tail");
    for n in 2..idem_wallet::TORN_TAILS_MAX {
        std::fs::write(format!("{}.{n}", first.saved_to.display()), b"").expect("a side file");
    }
    let refused = cut_once(b"one more").expect_err("no room to keep the tail");
    assert!(refused.to_string().contains("torn tails"), "{refused}");
    assert!(std::fs::read(&log).expect("log").ends_with(b"one more"), "cut unseen");
}
