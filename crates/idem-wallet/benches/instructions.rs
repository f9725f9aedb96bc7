//! Instructions, not seconds: one thread's 1,000 transfers, each in a batch of its own,
//! fresh ids and replays, idem-wallet beside the obvious design (one mutex over a map of
//! balances and a set of applied ids, hashing with fixed keys), counted by valgrind's
//! callgrind under gungraun (see idem-future's `instructions` bench). The ledger and the
//! transfers are made in an uncounted setup (for replays, every transfer applied once).
//! The case named `idem` is this crate. `cargo xtask bench idem-wallet`.

// gungraun's macros generate undocumented public items.
#![allow(missing_docs)]

#[allow(dead_code, reason = "the chunk size is the transfers bench's alone")]
mod ledgers;

use std::hint::black_box;

use gungraun::{library_benchmark, library_benchmark_group, main};
use idem_wallet::{Transfer, Wallet};
use ledgers::{Ledger, Obvious, transfer};

/// Transfers per benchmark.
const ROUNDS: u128 = 1_000;

/// A fresh ledger and `ROUNDS` transfers with ids it has not seen.
fn fresh<L: Ledger>() -> (L, Vec<Transfer>) {
    (L::fresh(), (1..=ROUNDS).map(transfer).collect())
}

/// The same, every transfer applied once already, so each is a replay.
fn applied<L: Ledger>() -> (L, Vec<Transfer>) {
    let (ledger, transfers) = fresh::<L>();
    ledger.submit(&transfers);
    (ledger, transfers)
}

fn one_by_one<L: Ledger>((ledger, transfers): (L, Vec<Transfer>)) -> (L, Vec<Transfer>) {
    for t in &transfers {
        black_box(ledger.submit(std::slice::from_ref(t)));
    }
    (ledger, transfers)
}

// A transfer with a fresh id, applied.
#[library_benchmark]
#[bench::idem(setup = fresh::<Wallet>)]
#[bench::obvious(setup = fresh::<Obvious>)]
fn transfer_fresh<L: Ledger>(state: (L, Vec<Transfer>)) -> (L, Vec<Transfer>) {
    one_by_one(state)
}

// A transfer whose id was applied: a no-op that says so.
#[library_benchmark]
#[bench::idem(setup = applied::<Wallet>)]
#[bench::obvious(setup = applied::<Obvious>)]
fn transfer_replay<L: Ledger>(state: (L, Vec<Transfer>)) -> (L, Vec<Transfer>) {
    one_by_one(state)
}

library_benchmark_group!(
    name = wallet;
    benchmarks = transfer_fresh, transfer_replay
);

main!(library_benchmark_groups = wallet);
