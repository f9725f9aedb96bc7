//! Durable transfers per second (`durable`: the write-ahead log, fsync per group) beside
//! the in-memory wallet (`idem`) in one run: batches of 1, 100 and 8189, fresh ids, 1 and
//! 2 submitting threads. Then the recovery time of a log of 1,000,000 transfers.
//! `cargo bench -p idem-wallet --bench durable`

// criterion's macros generate undocumented public functions.
#![allow(missing_docs)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use idem_testkit::bench;
use idem_wallet::{DurableWallet, NewAccount, Transfer, Wallet};

const ACCOUNTS: u128 = 1024;
static NEXT: AtomicU64 = AtomicU64::new(0);

fn log_path() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("idem-wallet-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir.join(format!("wallet-{}.wal", NEXT.fetch_add(1, Ordering::Relaxed)))
}

fn accounts() -> Vec<NewAccount> {
    (1..=ACCOUNTS).map(|id| NewAccount { id, ledger: 1, code: 1, ..Default::default() }).collect()
}

fn transfer(id: u128) -> Transfer {
    let debit = id % ACCOUNTS + 1;
    let credit = (id + 1) % ACCOUNTS + 1;
    Transfer {
        id,
        debit_account_id: debit,
        credit_account_id: credit,
        amount: 1,
        ledger: 1,
        code: 1,
        ..Default::default()
    }
}

trait Submit: Sync {
    fn submit(&self, batch: Vec<Transfer>);
}

impl Submit for DurableWallet {
    fn submit(&self, batch: Vec<Transfer>) {
        drop(self.create_transfers(&batch).expect("batch"));
    }
}

impl Submit for Wallet {
    fn submit(&self, batch: Vec<Transfer>) {
        drop(self.create_transfers(&batch).expect("batch"));
    }
}

/// `batches` batches of `size` fresh transfers from `threads` threads; times the submits.
fn run<W: Submit>(
    wallet: &W,
    next_id: &AtomicU64,
    size: usize,
    threads: usize,
    batches: u64,
) -> Duration {
    let per_thread = batches.div_ceil(threads as u64);
    let prepared: Vec<Vec<Vec<Transfer>>> = (0..threads)
        .map(|_| {
            (0..per_thread)
                .map(|_| {
                    let base = next_id.fetch_add(size as u64, Ordering::Relaxed) as u128;
                    (0..size as u128).map(|i| transfer(base + i)).collect()
                })
                .collect()
        })
        .collect();
    bench::timed(prepared, |batches| batches.into_iter().for_each(|b| wallet.submit(b)))
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("durable_transfers");
    for size in [1usize, 100, 8189] {
        group.throughput(Throughput::Elements(size as u64));
        for threads in [1usize, 2] {
            let param = format!("batch {size}, {threads} threads");
            let durable = DurableWallet::open(&log_path()).expect("open");
            drop(durable.create_accounts(&accounts()).expect("accounts"));
            let memory = Wallet::new();
            drop(memory.create_accounts(&accounts()).expect("accounts"));
            let next = AtomicU64::new(1);
            group.bench_function(BenchmarkId::new("durable", &param), |b| {
                b.iter_custom(|iters| run(&durable, &next, size, threads, iters))
            });
            group.bench_function(BenchmarkId::new("idem", &param), |b| {
                b.iter_custom(|iters| run(&memory, &next, size, threads, iters))
            });
        }
    }
    group.finish();
    recovery_time();
    let _ = std::fs::remove_dir_all(log_path().parent().expect("dir"));
}

/// Writes a log of 1,000,000 transfers and times reopening it.
fn recovery_time() {
    let path = log_path();
    {
        let wallet = DurableWallet::open(&path).expect("open");
        drop(wallet.create_accounts(&accounts()).expect("accounts"));
        let mut id = 1u128;
        while id <= 1_000_000 {
            let end = (id + 8189).min(1_000_001);
            drop(
                wallet
                    .create_transfers(&(id..end).map(transfer).collect::<Vec<_>>())
                    .expect("batch"),
            );
            id = end;
        }
    }
    let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    let start = Instant::now();
    let wallet = DurableWallet::open(&path).expect("reopen");
    let took = start.elapsed();
    assert!(wallet.transfer(1_000_000).is_some());
    println!("recovery of 1,000,000 transfers ({size} bytes of log): {took:?}");
}

criterion_group! {
    name = durable;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = bench
}
criterion_main!(durable);
