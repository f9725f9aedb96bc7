//! Instructions, not seconds: one thread's replays of 1,000 completed payments, the
//! processor on the memory store beside the seed's design (one global lock around a map),
//! counted by valgrind's callgrind under gungraun (see idem-future's `instructions`
//! bench). The payer, its keys and the first payment of each are made in an uncounted
//! setup. The case named `idem` is this crate. The seed hashes with fixed keys, so its
//! count repeats; the store seeds its key hash at random per store and a thread refreshes
//! its coarse clock, so its count moves a little from run to run.
//! `cargo xtask bench idem-payments`.

// gungraun's macros generate undocumented public items.
#![allow(missing_docs)]

#[allow(dead_code, reason = "the pool of fresh keys is the pay bench's alone")]
mod payers;

use std::hint::black_box;

use gungraun::{library_benchmark, library_benchmark_group, main};
use idem_core::IdempotencyKey;
use idem_payments::PaymentRequest;
use payers::{HOT, Idem, Payer, Seed};

/// A payer whose first `HOT` keys are paid, with those keys and the request.
fn paid<P: Payer>() -> (P, Vec<IdempotencyKey>, PaymentRequest) {
    let keys: Vec<IdempotencyKey> =
        (0..HOT).map(|i| IdempotencyKey::new(&format!("checkout-{i}")).expect("valid")).collect();
    let request = PaymentRequest::new("cus_bench", 1250, "EUR").expect("valid");
    let payer = P::fresh();
    for key in &keys {
        payer.pay(key, &request);
    }
    (payer, keys, request)
}

// Pay again with a key already paid: the stored outcome comes back.
#[library_benchmark]
#[bench::idem(setup = paid::<Idem>)]
#[bench::seed_global_lock(setup = paid::<Seed>)]
fn pay_replay<P: Payer>(
    (payer, keys, request): (P, Vec<IdempotencyKey>, PaymentRequest),
) -> (P, Vec<IdempotencyKey>, PaymentRequest) {
    for key in &keys[..1_000] {
        black_box(payer.pay(key, &request));
    }
    (payer, keys, request)
}

library_benchmark_group!(
    name = payments;
    benchmarks = pay_replay
);

main!(library_benchmark_groups = payments);
