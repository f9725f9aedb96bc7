//! `pay` through a zero-latency simulated gateway: fresh keys and replays, at 1 and 2
//! threads, beside the seed's design in the same run (one global lock around a map,
//! checking and charging under it). `cargo xtask bench idem-payments`.

// criterion's macros generate undocumented public functions.
#![allow(missing_docs)]

mod payers;

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use idem_core::IdempotencyKey;
use idem_payments::PaymentRequest;
use idem_testkit::bench;
use payers::{HOT, Idem, POOL, Payer, Seed};

fn fresh_keys<P: Payer>(
    keys: &[IdempotencyKey],
    r: &PaymentRequest,
    threads: usize,
    iters: u64,
) -> Duration {
    let mut total = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let chunk = left.min(POOL as u64);
        let payer = P::fresh();
        total += bench::timed_iters(threads, chunk, |i| {
            black_box(payer.pay(&keys[i % POOL], r));
        });
        left -= chunk;
    }
    total
}

fn replays<P: Payer>(
    keys: &[IdempotencyKey],
    r: &PaymentRequest,
    threads: usize,
    iters: u64,
) -> Duration {
    let payer = P::fresh();
    for key in &keys[..HOT] {
        payer.pay(key, r);
    }
    bench::timed_iters(threads, iters, |i| {
        black_box(payer.pay(&keys[i % HOT], r));
    })
}

type Run = fn(&[IdempotencyKey], &PaymentRequest, usize, u64) -> Duration;

fn bench(c: &mut Criterion) {
    let keys: Vec<IdempotencyKey> =
        (0..POOL).map(|i| IdempotencyKey::new(&format!("checkout-{i}")).expect("valid")).collect();
    let request = PaymentRequest::new("cus_bench", 1250, "EUR").expect("valid");
    let groups: [(&str, [(&str, Run); 2]); 2] = [
        ("pay_fresh", [("idem", fresh_keys::<Idem>), ("seed_global_lock", fresh_keys::<Seed>)]),
        ("pay_replay", [("idem", replays::<Idem>), ("seed_global_lock", replays::<Seed>)]),
    ];
    for (name, contenders) in groups {
        let mut group = c.benchmark_group(name);
        for threads in [1, 2] {
            for (contender, run) in contenders {
                let id = BenchmarkId::new(contender, format!("{threads} threads"));
                group.bench_function(id, |b| {
                    b.iter_custom(|iters| run(&keys, &request, threads, iters))
                });
            }
        }
        group.finish();
    }
}

criterion_group! {
    name = pay;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2));
    targets = bench
}
criterion_main!(pay);
