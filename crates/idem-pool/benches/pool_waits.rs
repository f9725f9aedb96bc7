//! Throughput and wait percentiles under contention, idem-pool beside r2d2 in one run:
//! 4 and 16 connections, 1 to 64 threads, holding each connection 0 or 2 us, a no-op
//! manager, both pools otherwise at their defaults (idem-pool's `Fairness::Eventual`; its
//! `Fifo` beside for reference). Each cell runs `CYCLES_PER_CELL` get+hold+drop cycles;
//! a get's wait is timed alone. `cargo bench -p idem-pool --bench pool_waits`.

// A bench prints its table; nothing here is a library.
#![allow(missing_docs)]

use std::time::{Duration, Instant};

use idem_testkit::bench;

#[path = "../tests/managers/mod.rs"]
mod managers;
use managers::Noop;

/// get+hold+drop cycles per cell, split over its threads.
const CYCLES_PER_CELL: usize = 200_000;

/// What one cell measured.
struct Cell {
    per_second: f64,
    waits_ns: Vec<u64>,
}

impl Cell {
    fn percentile(&self, p: f64) -> u64 {
        let at = ((self.waits_ns.len() as f64 - 1.0) * p).round() as usize;
        self.waits_ns[at]
    }
}

/// Runs the cell's cycles on `threads` threads: `get` returns a guard held for `hold`.
fn run<G>(threads: usize, hold: Duration, get: impl Fn() -> G + Sync) -> Cell {
    let per_thread = CYCLES_PER_CELL / threads;
    let (elapsed, waits) = bench::timed_with(0..threads, |_| {
        let mut waits = Vec::with_capacity(per_thread);
        for _ in 0..per_thread {
            let asked = Instant::now();
            let guard = get();
            waits.push(asked.elapsed().as_nanos() as u64);
            let held = Instant::now();
            while held.elapsed() < hold {
                std::hint::spin_loop();
            }
            drop(guard);
        }
        waits
    });
    let mut waits_ns: Vec<u64> = waits.into_iter().flatten().collect();
    waits_ns.sort_unstable();
    Cell { per_second: (per_thread * threads) as f64 / elapsed.as_secs_f64(), waits_ns }
}

fn idem(connections: usize, fairness: idem_pool::Fairness) -> idem_pool::Pool<Noop> {
    idem_pool::Pool::builder()
        .max_size(connections)
        .min_idle(connections)
        .fairness(fairness)
        .build(Noop)
        .expect("valid config")
}

fn us(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1000.0)
}

fn main() {
    println!(
        "| conns, threads, hold | r2d2 /s | idem /s | ratio | Fifo ratio \
         | r2d2 p50 / p99 / max us | idem p50 / p99 / max us |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for connections in [4usize, 16] {
        for threads in [1usize, 2, 4, 8, 16, 64] {
            for hold in [Duration::ZERO, Duration::from_micros(2)] {
                let r2d2 = r2d2::Pool::builder()
                    .max_size(connections as u32)
                    .build(Noop)
                    .expect("r2d2 pool");
                let anchor = run(threads, hold, || r2d2.get().expect("get"));
                let eventual = idem(connections, idem_pool::Fairness::Eventual);
                let ours = run(threads, hold, || eventual.get().expect("get"));
                let fifo = idem(connections, idem_pool::Fairness::Fifo);
                let strict = run(threads, hold, || fifo.get().expect("get"));
                let stats = |c: &Cell| {
                    format!(
                        "{} / {} / {}",
                        us(c.percentile(0.5)),
                        us(c.percentile(0.99)),
                        us(c.percentile(1.0))
                    )
                };
                println!(
                    "| {connections}, {threads}, {} us | {:.0} | {:.0} | {:.2} | {:.2} | {} | {} |",
                    hold.as_micros(),
                    anchor.per_second,
                    ours.per_second,
                    ours.per_second / anchor.per_second,
                    strict.per_second / anchor.per_second,
                    stats(&anchor),
                    stats(&ours),
                );
            }
        }
    }
}
