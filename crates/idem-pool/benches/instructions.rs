//! Instructions, not seconds: one thread's get and drop of a connection, idem-pool beside
//! r2d2 0.8 with the same no-op manager, counted by valgrind's callgrind under gungraun
//! (see idem-future's `instructions` bench). Each pool is built in the setup, which is
//! not counted, with 4 connections ready; the benchmark runs `ROUNDS` get and drop
//! cycles. The case named `idem` is this crate. `cargo xtask bench idem-pool`.

// gungraun's macros generate undocumented public items.
#![allow(missing_docs)]

use std::hint::black_box;

use gungraun::{library_benchmark, library_benchmark_group, main};

#[path = "../tests/managers/mod.rs"]
mod managers;
use managers::Noop;

/// Cycles per benchmark: enough that the first checkout's work is noise.
const ROUNDS: u64 = 1_000;

/// The pool under test, built outside the count.
enum Pool {
    Idem(idem_pool::Pool<Noop>),
    R2d2(r2d2::Pool<Noop>),
}

fn idem() -> Pool {
    let pool = idem_pool::Pool::builder().max_size(4).min_idle(4).build(Noop).expect("config");
    Pool::Idem(pool)
}

fn r2d2() -> Pool {
    Pool::R2d2(r2d2::Pool::builder().max_size(4).build(Noop).expect("r2d2 pool"))
}

// Get a connection and drop it, on one thread: the uncontended path.
#[library_benchmark]
#[bench::idem(setup = idem)]
#[bench::r2d2(setup = r2d2)]
fn get_drop(pool: Pool) -> Pool {
    for _ in 0..ROUNDS {
        match &pool {
            Pool::Idem(pool) => drop(black_box(pool.get().expect("get"))),
            Pool::R2d2(pool) => drop(black_box(pool.get().expect("get"))),
        }
    }
    pool
}

library_benchmark_group!(
    name = pool;
    benchmarks = get_drop
);

main!(library_benchmark_groups = pool);
