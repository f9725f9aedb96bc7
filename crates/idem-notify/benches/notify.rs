//! Messages per second through the notifier with a no-op provider, 1 and 2 workers, 0% and
//! 30% duplicate submissions, beside the same pipeline without dedup (a bounded
//! crossbeam queue and workers calling the provider) in the same run: the cost of
//! idempotency. `cargo xtask bench idem-notify`. The group `notify_parts` times, on one
//! thread, the two steps a submission takes before it returns (the fingerprint and the
//! claim) and the worker's complete: what bounds the ratio from above.

// criterion's macros generate undocumented public functions.
#![allow(missing_docs)]

mod pipelines;

use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{
    BenchmarkGroup, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main,
};
use idem_core::{Claim, KeyStore, Lease, MemoryStore, StoreConfig};
use idem_notify::{Notification, Outcome, Provider};
use pipelines::{
    Idem, OneMs, notifier, notifier_on, submissions, with_dedup, without_dedup, without_dedup_on,
};

const MESSAGES: usize = 10_000;
/// Fewer through the provider that takes 1 ms a send: a second's work for one worker.
const SLOW_MESSAGES: usize = 1_000;

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("notify");
    for dup_percent in [0, 30] {
        let input = submissions(MESSAGES, dup_percent);
        group.throughput(Throughput::Elements(input.len() as u64));
        for workers in [1, 2] {
            let param = format!("{dup_percent}% dup, {workers} workers");
            side_by_side(
                &mut group,
                &param,
                &input,
                || notifier(workers, MESSAGES),
                || without_dedup(workers, &input),
            );
        }
    }
    group.finish();
    slow(c);
    parts(c);
}

/// A message's steps on one thread, over the 10,000 fresh ids of the 0% rows: the
/// fingerprint and the claim (both on the submitting thread, before `submit` returns), and
/// the complete (the worker's). No queue, no second core.
fn parts(c: &mut Criterion) {
    let mut group = c.benchmark_group("notify_parts");
    let input = submissions(MESSAGES, 0);
    group.throughput(Throughput::Elements(input.len() as u64));
    group.bench_function("fingerprint", |b| {
        b.iter(|| input.iter().map(|n| n.fingerprint()).fold(0, |a, f| a ^ f.as_bytes()[0]))
    });
    let fingerprints: Vec<_> = input.iter().map(|n| n.fingerprint()).collect();
    let store = || {
        let config = StoreConfig::builder().capacity(MESSAGES).build().expect("valid");
        MemoryStore::<Outcome>::new(config)
    };
    let claim_all = |store: &MemoryStore<Outcome>| -> Vec<Lease> {
        let claims = input.iter().zip(&fingerprints).map(|(n, f)| store.claim(n.key(), f));
        claims
            .map(|c| match c {
                Ok(Claim::Acquired(lease)) => lease,
                _ => panic!("fresh"),
            })
            .collect()
    };
    group.bench_function("claim", |b| {
        b.iter_custom(|iters| {
            each(iters, || {
                let store = store();
                let mut leases = Vec::new();
                let time = timed(|| leases = claim_all(&store));
                drop((leases, store));
                time
            })
        })
    });
    group.bench_function("complete", |b| {
        b.iter_custom(|iters| {
            each(iters, || {
                let store = store();
                let leases = claim_all(&store);
                let complete = |l| store.complete(l, Outcome::Delivered).expect("held");
                timed(|| leases.iter().for_each(complete))
            })
        })
    });
    group.finish();
}

/// The sum of `iters` timings by `one`.
fn each(iters: u64, mut one: impl FnMut() -> Duration) -> Duration {
    (0..iters).map(|_| one()).sum()
}

/// How long `f` took.
fn timed(f: impl FnOnce()) -> Duration {
    let start = Instant::now();
    f();
    start.elapsed()
}

/// The same pipelines, 0% duplicates, through a provider that takes 1 ms a send: the ratio
/// a deployment sees, where the provider's call is milliseconds.
fn slow(c: &mut Criterion) {
    let mut group = c.benchmark_group("notify_1ms");
    let input = submissions(SLOW_MESSAGES, 0);
    group.throughput(Throughput::Elements(input.len() as u64));
    for workers in [1, 8] {
        let param = format!("{workers} workers");
        let started = || notifier_on(OneMs, workers, SLOW_MESSAGES);
        side_by_side(&mut group, &param, &input, started, || {
            without_dedup_on(&OneMs, workers, &input)
        });
    }
    group.finish();
}

/// `input` through a notifier `started` anew for each iteration (its start not timed),
/// beside `no_dedup`, the same pipeline without dedup.
fn side_by_side<P: Provider>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    param: &str,
    input: &[Notification],
    started: impl Fn() -> Idem<P>,
    no_dedup: impl Fn(),
) {
    group.bench_function(BenchmarkId::new("idem", param), |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| {
                    let notifier = started();
                    let start = Instant::now();
                    with_dedup(&notifier, input);
                    start.elapsed()
                })
                .sum()
        })
    });
    group.bench_function(BenchmarkId::new("no_dedup", param), |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| {
                    let start = Instant::now();
                    no_dedup();
                    start.elapsed()
                })
                .sum()
        })
    });
}

criterion_group! {
    name = notify;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    targets = bench
}
criterion_main!(notify);
