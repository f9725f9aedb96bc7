//! Claim+complete on distinct keys, and a replay hit, at 1 and 2 threads: `MemoryStore`
//! (function `idem`) beside two baselines in the same run. `cargo xtask bench idem-core`.
//!
//! * `global_mutex`: the seed's design, one lock around one `HashMap`.
//! * `dashmap`: a claim on a `DashMap` entry (sharded `RwLock`s).
//!
//! `async_contract` runs the same claim+complete through `AsyncKeyStore` (function
//! `idem`, each future polled once: the memory store answers at once) beside the sync
//! `KeyStore` (`sync`), on one thread: what the async contract costs.
//!
//! Both baselines keep the same record (fingerprint, token, in-flight or result) but skip
//! what the store adds: no clock read, no expiry bookkeeping, no capacity check.

// criterion's macros generate undocumented public functions.
#![allow(missing_docs)]

mod contenders;

use std::hint::black_box;
use std::time::Duration;

use contenders::{AsyncMemory, Contender, Dash, GlobalMutex, HOT, Inputs, POOL, inputs};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use idem_core::MemoryStore;
use idem_testkit::bench;

/// Claim+complete on keys never seen before; a fresh contender every `POOL` operations.
fn claim_complete<C: Contender>(inputs: &Inputs, threads: usize, iters: u64) -> Duration {
    let mut total = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let chunk = left.min(POOL as u64);
        let contender = C::fresh();
        total += bench::timed_iters(threads, chunk, |i| {
            black_box(contender.claim(&inputs.keys[i % POOL], &inputs.fp));
        });
        left -= chunk;
    }
    total
}

/// Claims of keys already completed: the replay path.
fn replay<C: Contender>(inputs: &Inputs, threads: usize, iters: u64) -> Duration {
    let contender = C::fresh();
    for key in &inputs.keys[..HOT] {
        contender.claim(key, &inputs.fp);
    }
    bench::timed_iters(threads, iters, |i| {
        let result = contender.claim(&inputs.keys[i % HOT], &inputs.fp);
        assert_eq!(black_box(result), Some(1));
    })
}

fn benches(c: &mut Criterion) {
    let inputs = inputs();
    for (name, run) in [
        (
            "claim_complete",
            [
                claim_complete::<MemoryStore<u64>> as fn(&Inputs, usize, u64) -> Duration,
                claim_complete::<GlobalMutex>,
                claim_complete::<Dash>,
            ],
        ),
        ("replay_hit", [replay::<MemoryStore<u64>>, replay::<GlobalMutex>, replay::<Dash>]),
    ] {
        let mut group = c.benchmark_group(name);
        for threads in [1, 2] {
            for (contender, f) in ["idem", "global_mutex", "dashmap"].into_iter().zip(run) {
                let id = BenchmarkId::new(contender, format!("{threads} threads"));
                group.bench_function(id, |b| b.iter_custom(|iters| f(&inputs, threads, iters)));
            }
        }
        group.finish();
    }
    let mut group = c.benchmark_group("async_contract");
    let contenders = [
        ("idem", claim_complete::<AsyncMemory> as fn(&Inputs, usize, u64) -> Duration),
        ("sync", claim_complete::<MemoryStore<u64>>),
    ];
    for (contender, f) in contenders {
        let id = BenchmarkId::new(contender, "1 threads");
        group.bench_function(id, |b| b.iter_custom(|iters| f(&inputs, 1, iters)));
    }
    group.finish();
}

criterion_group! {
    name = store;
    config = Criterion::default().sample_size(30).measurement_time(Duration::from_secs(3));
    targets = benches
}
criterion_main!(store);
