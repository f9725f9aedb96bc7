//! Messages per second through the notifier with a no-op provider, 1 and 2 workers, 0% and
//! 30% duplicate submissions, beside the same pipeline without dedup (a bounded
//! crossbeam queue and workers calling the provider) in the same run: the cost of
//! idempotency. `cargo xtask bench idem-notify`.

// criterion's macros generate undocumented public functions.
#![allow(missing_docs)]

use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use crossbeam_channel::TrySendError;
use idem_core::{MemoryStore, StoreConfig};
use idem_notify::{Channel, Config, Notification, Notifier, Provider, SubmitError};

const MESSAGES: usize = 10_000;

/// Accepts everything at once.
#[derive(Debug, Default)]
struct Noop;

impl Provider for Noop {
    fn send(&self, _: &Notification) -> Result<(), idem_notify::SendError> {
        Ok(())
    }
    fn status(&self, _: &Notification) -> idem_notify::DeliveryStatus {
        idem_notify::DeliveryStatus::NotDelivered
    }
}

/// The submissions: `MESSAGES` distinct ids, with `dup_percent` of them submitted twice.
fn submissions(dup_percent: usize) -> Vec<Notification> {
    let mut all = Vec::new();
    for i in 0..MESSAGES {
        let n = Notification::new(
            &format!("msg-{i}"),
            &format!("user:{}", i % 1000),
            Channel::Push,
            "hi",
        )
        .expect("valid");
        if i % 100 < dup_percent {
            all.push(n.clone());
        }
        all.push(n);
    }
    all
}

fn with_dedup(workers: usize, input: &[Notification]) -> Duration {
    let store =
        MemoryStore::new(StoreConfig::builder().capacity(MESSAGES * 2).build().expect("valid"));
    let notifier =
        Notifier::start(Noop, store, Config::builder().workers(workers).build().expect("valid"))
            .expect("workers start");
    let start = Instant::now();
    for n in input {
        while let Err(SubmitError::QueueFull { .. }) = notifier.submit(n.clone()) {
            std::thread::yield_now();
        }
    }
    notifier.shutdown(Duration::from_secs(60));
    start.elapsed()
}

fn without_dedup(workers: usize, input: &[Notification]) -> Duration {
    let (tx, rx) = crossbeam_channel::bounded::<Notification>(1024);
    let start = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..workers {
            let rx = rx.clone();
            s.spawn(move || rx.iter().for_each(|n| drop(Noop.send(&n))));
        }
        for n in input {
            let mut n = n.clone();
            loop {
                match tx.try_send(n) {
                    Ok(()) => break,
                    Err(TrySendError::Full(back)) => {
                        n = back;
                        std::thread::yield_now();
                    }
                    Err(TrySendError::Disconnected(_)) => unreachable!("workers outlive the loop"),
                }
            }
        }
        drop(tx);
    });
    start.elapsed()
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("notify");
    for dup_percent in [0, 30] {
        let input = submissions(dup_percent);
        group.throughput(Throughput::Elements(input.len() as u64));
        for workers in [1, 2] {
            let param = format!("{dup_percent}% dup, {workers} workers");
            group.bench_function(BenchmarkId::new("idem", &param), |b| {
                b.iter_custom(|iters| (0..iters).map(|_| with_dedup(workers, &input)).sum())
            });
            group.bench_function(BenchmarkId::new("no_dedup", &param), |b| {
                b.iter_custom(|iters| (0..iters).map(|_| without_dedup(workers, &input)).sum())
            });
        }
    }
    group.finish();
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
