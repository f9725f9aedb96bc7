//! Instructions, not seconds: one thread's claim and complete of fresh keys, and replay
//! hits, on the memory store beside the same contenders as the `store` bench (one mutex
//! over a map, a DashMap, both hashing with fixed keys so that their counts repeat),
//! counted by valgrind's callgrind under gungraun (see
//! idem-future's `instructions` bench). The contender and its keys are made in an
//! uncounted setup; each benchmark runs `ROUNDS` operations. The case named `idem` is this
//! crate. The store's own counts move by about 1% from run to run: it seeds its key hash
//! at random per store, as a service must, and a thread refreshes its coarse clock.
//! `cargo xtask bench idem-core`.

// gungraun's macros generate undocumented public items.
#![allow(missing_docs)]

#[allow(dead_code, reason = "the async contender is the store bench's alone")]
mod contenders;

use std::hint::black_box;

use contenders::{Contender, Dash, GlobalMutex, HOT, Inputs, inputs};
use gungraun::{library_benchmark, library_benchmark_group, main};
use idem_core::MemoryStore;

/// Operations per benchmark: enough that the first call's work is noise.
const ROUNDS: usize = 1_000;

/// A contender, its keys and their fingerprint, made outside the count.
fn fresh<C: Contender>() -> (C, Inputs) {
    (C::fresh(), inputs())
}

/// The same, with the first `HOT` keys completed, so a claim of one replays.
fn hot<C: Contender>() -> (C, Inputs) {
    let (contender, inputs) = fresh::<C>();
    for key in &inputs.keys[..HOT] {
        contender.claim(key, &inputs.fp);
    }
    (contender, inputs)
}

fn claims<C: Contender>((contender, inputs): (C, Inputs)) -> (C, Inputs) {
    for key in &inputs.keys[..ROUNDS] {
        black_box(contender.claim(key, &inputs.fp));
    }
    (contender, inputs)
}

// Claim a key never seen before and complete it.
#[library_benchmark]
#[bench::idem(setup = fresh::<MemoryStore<u64>>)]
#[bench::global_mutex(setup = fresh::<GlobalMutex>)]
#[bench::dashmap(setup = fresh::<Dash>)]
fn claim_complete<C: Contender>(state: (C, Inputs)) -> (C, Inputs) {
    claims(state)
}

// Claim a key already completed: the stored result comes back.
#[library_benchmark]
#[bench::idem(setup = hot::<MemoryStore<u64>>)]
#[bench::global_mutex(setup = hot::<GlobalMutex>)]
#[bench::dashmap(setup = hot::<Dash>)]
fn replay_hit<C: Contender>(state: (C, Inputs)) -> (C, Inputs) {
    claims(state)
}

library_benchmark_group!(
    name = store;
    benchmarks = claim_complete, replay_hit
);

main!(library_benchmark_groups = store);
