//! Crash tests of the durable wallet: a worker process submits batches and dies: killed
//! (SIGKILL at a random moment), aborted at a named point of the log writer (mid-append,
//! after append before sync, after sync before reply), or cut off by a simulated power
//! loss (only synced bytes survive, then a torn prefix or zeros), including right after
//! an acknowledgement. Then the log is reopened, every batch is retried (acknowledged
//! ones too), and: every transfer is present exactly once, retries of acknowledged
//! batches create nothing, balances equal the sum of all transfers, invariants hold.
//! `IDEM_CRASH_ROUNDS` rounds (default 20); more with `cargo xtask crash`.

mod common;
use common::{Rng, Tally, dir};

use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use idem_core::SystemClock;
use idem_crash::wallet::batch;
use idem_wallet::{DurableWallet, Limits, LogError, TransferResult as R};

const BATCHES: u128 = 15;

// The tally's counters, in the order its summary shows them.
const ROUNDS: &str = "rounds";
const CRASHES: &str = "workers crashed";
const POWER_LOSSES: &str = "of them by power loss";
const TORN_TAILS: &str = "torn tails cut";
const LOST_ACKNOWLEDGED: &str = "lost acknowledged batches";
const DOUBLE_APPLIED: &str = "double-applied ids";

/// The worker's faults (see `src/bin/wallet_worker.rs`); the rest of the plans are a
/// SIGKILL at a random moment and no fault at all.
const FAULTS: [&str; 6] = [
    "kill_mid_append",
    "kill_after_append",
    "kill_after_sync",
    "power_mid_append",
    "power_after_append",
    "power_after_ack",
];

/// Runs one worker with a random fault; returns the batches it acknowledged.
fn run_worker(log: &std::path::Path, rng: &mut Rng, tally: &mut Tally) -> HashSet<u128> {
    let mut command = Command::new(env!("CARGO_BIN_EXE_wallet_worker"));
    command.arg(log).arg(BATCHES.to_string());
    let plan = (rng.next() % (FAULTS.len() as u64 + 2)) as usize;
    let n = rng.next() % (BATCHES as u64 + 4);
    if let Some(fault) = FAULTS.get(plan) {
        command.arg(fault).arg(n.to_string());
        tally.add(POWER_LOSSES, u64::from(fault.starts_with("power")));
    }
    let mut child =
        command.stdout(Stdio::piped()).stderr(Stdio::null()).spawn().expect("worker starts");
    if plan == FAULTS.len() {
        std::thread::sleep(Duration::from_micros(rng.next() % 20_000));
        let _ = child.kill();
    }
    let stdout = child.stdout.take().expect("piped");
    let acked = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .filter_map(|l| l.strip_prefix("ACK ").and_then(|b| b.parse().ok()))
        .collect();
    tally.add(CRASHES, u64::from(!child.wait().expect("worker ends").success()));
    acked
}

fn round(n: u64, rng: &mut Rng, tally: &mut Tally) {
    let log = dir("rounds").join(format!("wallet-{n}.wal"));
    let acked = run_worker(&log, rng, tally);
    let wallet = DurableWallet::open(&log).expect("the log reopens after the crash");
    if let Some(tail) = &wallet.recovery().torn_tail {
        tally.add(TORN_TAILS, 1);
        let _ = std::fs::remove_file(&tail.saved_to);
    }
    let accounts: Vec<_> = (1..=11u128)
        .map(|id| idem_wallet::NewAccount { id, ledger: 1, code: 1, ..Default::default() })
        .collect();
    wallet.create_accounts(&accounts).expect("accounts").all_applied().expect("applied");
    for b in 0..BATCHES {
        let results = wallet.create_transfers(&batch(b)).expect("retry");
        let created = results.iter().filter(|r| **r == R::Created).count();
        if acked.contains(&b) && created > 0 {
            tally.add(LOST_ACKNOWLEDGED, 1);
        }
        assert!(
            results.iter().all(|r| matches!(r, R::Created | R::Exists | R::LinkedEventFailed)),
            "{results:?}"
        );
        // Replaying again must create nothing: every id applies once.
        let again = wallet.create_transfers(&batch(b)).expect("replay");
        tally.add(DOUBLE_APPLIED, again.iter().filter(|r| **r == R::Created).count() as u64);
    }
    let mut expected = [0u128; 12];
    for b in 0..BATCHES {
        for t in batch(b) {
            assert!(wallet.transfer(t.id).is_some(), "transfer {} missing", t.id);
            expected[t.credit_account_id as usize] += t.amount;
            expected[1] += t.amount;
        }
    }
    assert_eq!(wallet.account(1).map(|a| a.debits_posted), Some(expected[1]));
    for (id, credits) in expected.iter().enumerate().skip(2) {
        let posted = wallet.account(id as u128).map(|a| a.credits_posted);
        assert_eq!(posted, Some(*credits), "account {id}");
    }
    wallet.assert_invariants();
    drop(wallet);
    let _ = std::fs::remove_file(&log);
    tally.add(ROUNDS, 1);
}

#[test]
fn killed_workers_lose_no_acknowledged_transfer_and_apply_none_twice() {
    let rounds = common::rounds(20);
    let mut rng = Rng(0x0dd_ba11_5eed);
    let names = [ROUNDS, CRASHES, POWER_LOSSES, TORN_TAILS, LOST_ACKNOWLEDGED, DOUBLE_APPLIED];
    let mut tally = Tally::new("wallet crash rounds", &names);
    for n in 0..rounds {
        round(n, &mut rng, &mut tally);
        common::progress("wallet crash", n + 1, rounds);
    }
    println!("{}", tally.summary());
    tally.assert_none(&[LOST_ACKNOWLEDGED, DOUBLE_APPLIED]);
    tally.assert_some(&[CRASHES, POWER_LOSSES]);
    let _ = std::fs::remove_dir_all(dir("rounds"));
}

fn write_batches(log: &std::path::Path, batches: u128) {
    let wallet = DurableWallet::open(log).expect("open");
    let accounts: Vec<_> = (1..=11u128)
        .map(|id| idem_wallet::NewAccount { id, ledger: 1, code: 1, ..Default::default() })
        .collect();
    wallet.create_accounts(&accounts).expect("accounts").all_applied().expect("applied");
    for b in 0..batches {
        wallet.create_transfers(&batch(b)).expect("batch").all_applied().expect("applied");
    }
}

#[test]
fn a_torn_tail_is_cut_and_everything_before_it_kept() {
    for cut in [1u64, 7, 100, 500] {
        let log = dir("torn").join(format!("torn-{cut}.wal"));
        write_batches(&log, 3);
        let len = std::fs::metadata(&log).expect("log").len();
        let file = std::fs::OpenOptions::new().write(true).open(&log).expect("log");
        file.set_len(len - cut).expect("truncate");
        drop(file);
        let cut_bytes = std::fs::read(&log).expect("log")[record_offsets(&log)[3]..].to_vec();
        let wallet = DurableWallet::open(&log).expect("a torn tail is recovered");
        let tail = wallet.recovery().torn_tail.clone().expect("the cut is reported");
        assert_eq!(std::fs::read(&tail.saved_to).expect("side file"), cut_bytes, "kept aside");
        assert_eq!(std::fs::metadata(&log).expect("log").len(), tail.offset);
        assert!(
            wallet.transfer(10).is_some() && wallet.transfer(20).is_some(),
            "batches 0 and 1 kept"
        );
        assert!(wallet.transfer(30).is_none(), "the torn last batch is gone (never acknowledged)");
        wallet.assert_invariants();
    }
    let _ = std::fs::remove_dir_all(dir("torn"));
}

#[test]
fn corruption_in_the_middle_refuses_to_open_with_the_offset() {
    let log = dir("corrupt").join("corrupt.wal");
    write_batches(&log, 3);
    let mut bytes = std::fs::read(&log).expect("log");
    // The first record (the accounts) starts right after the 8-byte header; flip a byte
    // of its payload.
    bytes[8 + 8 + 20] ^= 0xff;
    std::fs::write(&log, &bytes).expect("write");
    match DurableWallet::open(&log) {
        Err(LogError::Corrupt { offset, .. }) => assert_eq!(offset, 8),
        other => panic!("expected Corrupt at offset 8, got {other:?}"),
    }
    let _ = std::fs::remove_dir_all(dir("corrupt"));
}

/// The offset of every record in the log at `log` (record 0 is the accounts).
fn record_offsets(log: &std::path::Path) -> Vec<usize> {
    let bytes = std::fs::read(log).expect("log");
    let mut offsets = Vec::new();
    let mut at = 8;
    while let Some(len) = bytes.get(at..at + 4) {
        offsets.push(at);
        at += 12 + u32::from_le_bytes(len.try_into().expect("4 bytes")) as usize;
    }
    offsets
}

#[test]
fn a_flipped_length_bit_in_the_middle_is_corruption_not_a_torn_tail() {
    let log = dir("length").join("length.wal");
    write_batches(&log, 10);
    let offsets = record_offsets(&log);
    let len = std::fs::metadata(&log).expect("log").len();
    let mut bytes = std::fs::read(&log).expect("log");
    // The top byte of record 3's little-endian length: the record now "runs past the end".
    bytes[offsets[3] + 3] ^= 0x80;
    std::fs::write(&log, &bytes).expect("write");
    match DurableWallet::open(&log) {
        Err(LogError::Corrupt { offset, reason }) => {
            assert_eq!(offset, offsets[3] as u64);
            // The header's own checksum catches it before the length is trusted.
            assert!(reason.starts_with("record header checksum mismatch"), "{reason}");
        }
        other => panic!("expected Corrupt at {}, got {other:?}", offsets[3]),
    }
    assert_eq!(std::fs::metadata(&log).expect("log").len(), len, "nothing was cut");
    let _ = std::fs::remove_dir_all(dir("length"));
}

#[test]
fn bit_rot_in_the_last_record_is_cut_aside_and_reported_never_silently() {
    let log = dir("rot").join("rot.wal");
    write_batches(&log, 3);
    let last = *record_offsets(&log).last().expect("records");
    let mut bytes = std::fs::read(&log).expect("log");
    bytes[last + 12 + 30] ^= 0x01;
    std::fs::write(&log, &bytes).expect("write");
    let wallet = DurableWallet::open(&log).expect("no valid record follows: a torn tail");
    let tail = wallet.recovery().torn_tail.clone().expect("reported");
    assert_eq!(
        (tail.offset, tail.reason.as_str()),
        (last as u64, "record payload checksum mismatch")
    );
    assert_eq!(std::fs::read(&tail.saved_to).expect("side file"), bytes[last..].to_vec());
    assert!(wallet.transfer(20).is_some() && wallet.transfer(30).is_none());
    drop(wallet);
    let _ = std::fs::remove_dir_all(dir("rot"));
}

#[test]
fn a_zero_filled_tail_is_a_torn_tail() {
    let log = dir("zeros").join("zeros.wal");
    write_batches(&log, 3);
    let len = std::fs::metadata(&log).expect("log").len();
    let file = std::fs::OpenOptions::new().write(true).open(&log).expect("log");
    file.set_len(len + 4096).expect("extend with zeros");
    drop(file);
    let wallet = DurableWallet::open(&log).expect("a zero-filled tail is recognised");
    let tail = wallet.recovery().torn_tail.clone().expect("reported");
    assert_eq!((tail.offset, tail.len, tail.reason.as_str()), (len, 4096, "zero-filled tail"));
    assert!(wallet.transfer(30).is_some(), "every batch kept");
    assert_eq!(wallet.recovery().records, 4);
    drop(wallet);
    let _ = std::fs::remove_dir_all(dir("zeros"));
}

#[test]
fn reopening_with_other_limits_is_refused_not_a_rewritten_history() {
    let log = dir("limits").join("limits.wal");
    write_batches(&log, 3);
    let offsets = record_offsets(&log);
    // Room for 15 transfers: batch 1 (record 2) would now be answered differently.
    let limits = Limits { transfers_max: 15, ..Limits::default() };
    match DurableWallet::open_with(&log, limits, Arc::new(SystemClock)) {
        Err(LogError::Diverged { offset }) => assert_eq!(offset, offsets[2] as u64),
        other => panic!("expected Diverged at {}, got {other:?}", offsets[2]),
    }
    assert_eq!(DurableWallet::open(&log).expect("the right limits").recovery().records, 4);
    let _ = std::fs::remove_dir_all(dir("limits"));
}

/// A log file whose `panic_at`th append panics (a buggy device, or an internal check that
/// trips while a group is written).
struct PanickingFile {
    file: std::fs::File,
    appends: u64,
    panic_at: u64,
}

impl idem_wallet::LogDevice for PanickingFile {
    fn read_all(&mut self) -> std::io::Result<Vec<u8>> {
        self.file.read_all()
    }
    fn append(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.appends += 1;
        assert_ne!(self.appends, self.panic_at, "the device fails");
        self.file.append(bytes)
    }
    fn sync(&mut self) -> std::io::Result<()> {
        self.file.sync()
    }
    fn truncate(&mut self, len: u64) -> std::io::Result<()> {
        self.file.truncate(len)
    }
}

/// A writer that fails mid-group answers its callers with an error (no hang, no success),
/// refuses later batches, and leaves a log that reopens with every acknowledged batch.
#[test]
fn a_failing_writer_fails_its_callers_and_leaves_a_log_that_reopens() {
    let log = dir("panic").join("panic.wal");
    let file =
        std::fs::OpenOptions::new().read(true).append(true).create(true).open(&log).expect("log");
    // Append 1 is the file header, 2 the accounts, 3 and 4 batches 0 and 1; 5 fails.
    let device = PanickingFile { file, appends: 0, panic_at: 5 };
    let wallet = DurableWallet::open_on(&log, device, Limits::default(), Arc::new(SystemClock))
        .expect("open");
    let accounts: Vec<_> = (1..=11u128)
        .map(|id| idem_wallet::NewAccount { id, ledger: 1, code: 1, ..Default::default() })
        .collect();
    wallet.create_accounts(&accounts).expect("accounts").all_applied().expect("applied");
    wallet.create_transfers(&batch(0)).expect("batch 0").all_applied().expect("applied");
    wallet.create_transfers(&batch(1)).expect("batch 1").all_applied().expect("applied");
    let failed = wallet.create_transfers(&batch(2));
    assert!(matches!(failed, Err(LogError::WriterFailed(_))), "{failed:?}");
    assert!(wallet.transfer(21).is_none(), "readers never see the failed batch");
    assert!(matches!(wallet.create_transfers(&batch(3)), Err(LogError::Stopped)));
    drop(wallet);
    let reopened = DurableWallet::open(&log).expect("the log reopens");
    assert!(reopened.transfer(20).is_some() && reopened.transfer(21).is_none());
    reopened.assert_invariants();
    drop(reopened);
    let _ = std::fs::remove_dir_all(dir("panic"));
}
