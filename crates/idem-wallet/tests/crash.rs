//! Crash tests of the durable wallet: a worker process submits batches and is killed
//! (SIGKILL at a random moment) or aborts at a named point of the log writer (mid-append,
//! after append before fsync, after fsync before reply). Then the log is reopened, every
//! batch is retried (acknowledged ones too), and: every transfer is present exactly once,
//! retries of acknowledged batches create nothing, balances equal the sum of all
//! transfers, invariants hold. `IDEM_CRASH_ROUNDS` rounds (default 20); more with
//! `cargo xtask crash`.

use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use idem_wallet::crash_plan::batch;
use idem_wallet::{DurableWallet, LogError, TransferResult as R};

const BATCHES: u128 = 15;

fn dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("idem-wallet-crash-{}-{test}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[derive(Debug, Default)]
struct Tally {
    rounds: u64,
    crashes: u64,
    lost_acknowledged: u64,
    double_applied: u64,
}

fn round(n: u64, rng: &mut Rng, tally: &mut Tally) {
    let log = dir("rounds").join(format!("wallet-{n}.wal"));
    let mut command = Command::new(env!("CARGO_BIN_EXE_wallet_worker"));
    command.arg(&log).arg(BATCHES.to_string());
    let plan = rng.next() % 5;
    let record = (rng.next() % (BATCHES as u64 + 4)).to_string();
    match plan {
        0 => drop(command.arg("mid_append").arg(&record)),
        1 => drop(command.arg("after_append").arg(&record)),
        2 => drop(command.arg("after_sync").arg(&record)),
        _ => {}
    }
    let mut child =
        command.stdout(Stdio::piped()).stderr(Stdio::null()).spawn().expect("worker starts");
    if plan == 3 {
        std::thread::sleep(Duration::from_micros(rng.next() % 20_000));
        let _ = child.kill();
    }
    let stdout = child.stdout.take().expect("piped");
    let acked: HashSet<u128> = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .filter_map(|l| l.strip_prefix("ACK ").and_then(|b| b.parse().ok()))
        .collect();
    tally.crashes += u64::from(!child.wait().expect("worker ends").success());

    let wallet = DurableWallet::open(&log).expect("the log reopens after the crash");
    let accounts: Vec<_> = (1..=11u128)
        .map(|id| idem_wallet::NewAccount { id, ledger: 1, code: 1, flags: Default::default() })
        .collect();
    wallet.create_accounts(accounts).expect("accounts");
    for b in 0..BATCHES {
        let results = wallet.create_transfers(batch(b)).expect("retry");
        let created = results.iter().filter(|r| **r == R::Created).count();
        if acked.contains(&b) && created > 0 {
            tally.lost_acknowledged += 1;
        }
        assert!(
            results.iter().all(|r| matches!(r, R::Created | R::Exists | R::LinkedEventFailed)),
            "{results:?}"
        );
        // Replaying again must create nothing: every id applies once.
        let again = wallet.create_transfers(batch(b)).expect("replay");
        tally.double_applied += again.iter().filter(|r| **r == R::Created).count() as u64;
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
    tally.rounds += 1;
}

#[test]
fn killed_workers_lose_no_acknowledged_transfer_and_apply_none_twice() {
    let rounds: u64 =
        std::env::var("IDEM_CRASH_ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(20);
    let mut rng = Rng(0x0dd_ba11_5eed);
    let mut tally = Tally::default();
    for n in 0..rounds {
        round(n, &mut rng, &mut tally);
    }
    println!(
        "wallet crash rounds: {} rounds, {} workers crashed, {} lost acknowledged batches, {} \
            double-applied ids",
        tally.rounds, tally.crashes, tally.lost_acknowledged, tally.double_applied
    );
    assert_eq!((tally.lost_acknowledged, tally.double_applied), (0, 0), "{tally:?}");
    assert!(tally.crashes > 0);
    let _ = std::fs::remove_dir_all(dir("rounds"));
}

fn write_batches(log: &std::path::Path, batches: u128) {
    let wallet = DurableWallet::open(log).expect("open");
    let accounts: Vec<_> = (1..=11u128)
        .map(|id| idem_wallet::NewAccount { id, ledger: 1, code: 1, flags: Default::default() })
        .collect();
    wallet.create_accounts(accounts).expect("accounts");
    for b in 0..batches {
        wallet.create_transfers(batch(b)).expect("batch");
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
        let wallet = DurableWallet::open(&log).expect("a torn tail is recovered");
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
