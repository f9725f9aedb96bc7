//! get + drop cycles: idem-pool (`idem`) beside r2d2 0.8 with the same no-op manager, in
//! one run. 4 connections shared by 1, 2, 8 and 16 threads, and 1 connection on 1 thread.
//! Both pools use their defaults otherwise (health check on checkout, idle timeout, max
//! lifetime). Group `get_drop` runs idem-pool's strict `Fairness::Fifo`, group
//! `get_drop_barging` its r2d2-like `Fairness::Barging`. `cargo xtask bench idem-pool`.

// criterion's macros generate undocumented public functions.
#![allow(missing_docs)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use idem_testkit::bench;

#[path = "../tests/managers/mod.rs"]
mod managers;
use managers::Noop;

fn bench(c: &mut Criterion) {
    group(c, "get_drop", idem_pool::Fairness::Fifo);
    group(c, "get_drop_barging", idem_pool::Fairness::Barging);
}

/// One group per fairness mode, each with its own r2d2 run beside it.
fn group(c: &mut Criterion, name: &str, fairness: idem_pool::Fairness) {
    let mut group = c.benchmark_group(name);
    for (connections, threads) in [(1, 1), (4, 1), (4, 2), (4, 8), (4, 16)] {
        let param = format!("{connections} conns, {threads} threads");
        let idem = idem_pool::Pool::builder()
            .max_size(connections)
            .min_idle(connections)
            .fairness(fairness)
            .build(Noop)
            .expect("valid config");
        group.bench_function(BenchmarkId::new("idem", &param), |b| {
            b.iter_custom(|iters| {
                bench::timed_iters(threads, iters, |_| drop(black_box(idem.get().expect("get"))))
            })
        });
        let r2d2 =
            r2d2::Pool::builder().max_size(connections as u32).build(Noop).expect("r2d2 pool");
        group.bench_function(BenchmarkId::new("r2d2", &param), |b| {
            b.iter_custom(|iters| {
                bench::timed_iters(threads, iters, |_| drop(black_box(r2d2.get().expect("get"))))
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = pool;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2));
    targets = bench
}
criterion_main!(pool);
