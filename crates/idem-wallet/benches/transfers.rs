//! Transfers per second through batches of 1, 100 and 8189 events, fresh ids and replays,
//! 1 and 2 submitting threads: idem-wallet (`idem`) beside the obvious design in the same
//! run (one mutex over a map of balances and a set of applied ids, no validation, no
//! limits, no two-phase). `cargo xtask bench idem-wallet`.

// criterion's macros generate undocumented public functions.
#![allow(missing_docs)]

mod ledgers;

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use idem_testkit::bench;
use idem_wallet::{Transfer, Wallet};
use ledgers::{CHUNK, Ledger, Obvious, transfer};

/// Submits `batches` batches of `size` from `threads` threads; ids are fresh unless
/// `replay` (then every batch repeats the first `size` ids). Times only the submits.
fn run<L: Ledger>(size: usize, threads: usize, replay: bool, batches: u64) -> Duration {
    let per_thread = batches.div_ceil(threads as u64);
    let mut total = Duration::ZERO;
    let chunk_batches = (CHUNK / size as u64).max(1);
    let mut done = 0;
    while done < per_thread {
        let n = chunk_batches.min(per_thread - done);
        let ledger = L::fresh();
        let prepared: Vec<Vec<Vec<Transfer>>> = (0..threads)
            .map(|t| {
                (0..n)
                    .map(|b| {
                        let base = if replay {
                            1
                        } else {
                            1 + ((t as u64 * per_thread + done + b) * size as u64) as u128
                        };
                        (0..size as u128).map(|i| transfer(base + i)).collect()
                    })
                    .collect()
            })
            .collect();
        if replay {
            ledger.submit(&prepared[0][0]);
        }
        total += bench::timed(&prepared, |batches| {
            for batch in batches {
                black_box(ledger.submit(batch));
            }
        });
        done += n;
    }
    total
}

fn bench(c: &mut Criterion) {
    for (name, replay) in [("transfers_fresh", false), ("transfers_replay", true)] {
        let mut group = c.benchmark_group(name);
        for size in [1usize, 100, 8189] {
            group.throughput(Throughput::Elements(size as u64));
            for threads in [1usize, 2] {
                let param = format!("batch {size}, {threads} threads");
                group.bench_function(BenchmarkId::new("idem", &param), |b| {
                    b.iter_custom(|iters| run::<Wallet>(size, threads, replay, iters))
                });
                group.bench_function(BenchmarkId::new("obvious", &param), |b| {
                    b.iter_custom(|iters| run::<Obvious>(size, threads, replay, iters))
                });
            }
        }
        group.finish();
    }
}

criterion_group! {
    name = transfers;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = bench
}
criterion_main!(transfers);
