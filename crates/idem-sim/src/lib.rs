//! # idem-sim: the checkout in a simulated world
//!
//! **The problem.** Tests check the cases someone thought of; a real cluster meets a
//! crash, a lost answer and a retry at instants nobody chose. A simulation runs the real
//! code in a world whose time, network, scheduling and faults all come from one seed,
//! so thousands of worlds run in minutes, each fault meets every other, and any world
//! that fails is replayed exactly from its seed.
//!
//! **The world.** Two or three servers run the checkout example's service (the
//! `Idempotency-Key` layer on the route, the handler that charges the gateway and, on a
//! recovery, looks the key up first) over [turmoil]'s simulated TCP. Two to four
//! clients pay for one to three intents each, retrying early, late and concurrently.
//! The servers share one gateway (which does not deduplicate: the layer alone must) and
//! one [`MemoryStore`](idem_core::MemoryStore) on the world's clock, each through a
//! seam that fails, delays or hangs its calls. The driver crashes and restarts servers,
//! partitions and holds links, cuts servers from the store and jumps the store's clock
//! forward; then the faults stop, and every intent must be answered.
//!
//! A second workload shares the servers: `POST /pay`, served by idem-payments'
//! `Processor` on a second memory store, whose pending claims the operator reconciles.
//! A third, `POST /receipt`, streams the checkout's answer in frames, padded around the
//! limits of a store that keeps little (often over them, sometimes exactly at one),
//! and cuts or stalls the stream while the faults last.
//!
//! # Guarantee
//!
//! Checked after every world: at most one charge per intent; every successful answer
//! for an intent names the same charge, the one the gateway made, of the intent's
//! amount; every intent answered once the faults stop; no claim left in flight once the
//! world drains; fencing tokens only grow; the stores' own invariants; a streamed
//! receipt is either whole or the stand-in its size calls for, and the store is never
//! sent a result larger than it keeps. And the same seed
//! gives the same world: the same trace, byte for byte.
//!
//! # Examples
//!
//! ```
//! let world = idem_sim::simulate(7);
//! assert!(world.violations.is_empty(), "{}", world.report());
//! assert_eq!(world.trace, idem_sim::simulate(7).trace, "a seed replays exactly");
//! ```
//!
//! `cargo xtask sim --seeds 1000` runs a thousand worlds; `cargo xtask sim --seed 7`
//! replays one and prints its trace. docs/simulation.md explains the world, its faults
//! and their rates, and how to read a failing seed.

mod check;
mod checkout;
mod hosts;
mod payments;
pub mod plan;
mod receipt;
pub mod rng;
mod seam;
mod shared;
mod world;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

pub use world::simulate;

/// How one world went.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Its seed: `cargo xtask sim --seed <seed>` replays it.
    pub seed: u64,
    /// What its checks found wrong (nothing, for a world that held).
    pub violations: Vec<String>,
    /// Every event of the world, one line each, stamped with simulated time: the same
    /// seed gives the same trace, byte for byte.
    pub trace: String,
    /// Simulated time the world ran.
    pub simulated: Duration,
    /// Requests its clients sent.
    pub requests: u64,
    /// Faults injected, by kind.
    pub faults: BTreeMap<&'static str, u64>,
}

impl Outcome {
    /// What a person reads about this world: its seed, what failed, how to replay it.
    pub fn report(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "world {} ({} violations)", self.seed, self.violations.len());
        for violation in &self.violations {
            let _ = writeln!(out, "  {violation}");
        }
        let _ = writeln!(out, "replay: cargo xtask sim --seed {}", self.seed);
        out
    }
}

/// Keeps the panics the worlds inject on purpose (a receipt's body that panics
/// half-way, which the layer must catch) out of the output: every other panic is
/// printed as before. A runner calls it once, before its first world.
pub fn quiet_injected_panics() {
    let printed = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if info.payload().downcast_ref::<&str>() != Some(&receipt::INJECTED_PANIC) {
            printed(info);
        }
    }));
}
