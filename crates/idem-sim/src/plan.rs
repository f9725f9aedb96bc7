//! A world's shape and its fault rates, all drawn from its seed: each rate is drawn
//! between 0 and its ceiling, so some worlds are calm in one respect and stormy in
//! another, and every fault meets every other across the seeds.

use std::time::Duration;

use crate::rng::Rng;

/// The store's lease in every world: short, so that a world sees many leases run out.
pub const LEASE: Duration = Duration::from_secs(2);
/// A simulated step: turmoil runs every host this long per step.
pub const TICK: Duration = Duration::from_millis(5);
/// How long a world may run once its faults stop before an intent left unanswered is a
/// liveness failure: many leases, many retries.
pub const CALM_LIMIT: Duration = Duration::from_secs(90);
/// How long the world runs on after its last client is done, so that a run still
/// holding a claim (a hung store call, an orphaned handler) settles before the checks.
pub const DRAIN: Duration = Duration::from_secs(8);
/// The most intents one client pays for.
pub const INTENTS_MAX: u64 = 3;
/// One world in this many is steady: its servers, store and gateway never fail, and only
/// its clients and network misbehave (see [`Plan::steadied`]).
pub const STEADY_ONE_IN: u64 = 6;

/// A rate in parts per million.
pub type PerMillion = u32;

/// The shape of a world and how often each fault strikes.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Whether the servers, the store and the gateway never fail in this world: no key
    /// may then be left held for a recovery (see [`Plan::steadied`]).
    pub steady: bool,
    /// Servers behind the clients, all on one store and one gateway.
    pub servers: usize,
    /// Client hosts; each pays for its intents one after the other.
    pub clients: usize,
    /// Intents per client.
    pub intents: Vec<u64>,
    /// How long the faults last before the world calms down.
    pub chaos: Duration,
    /// The network's slowest message.
    pub latency_max: Duration,
    /// How long a client waits for an answer before it gives up on that attempt.
    pub client_timeout: Duration,
    /// How far the store's cheaper clock reading lags its precise one.
    pub check_lag: Duration,
    /// Per step, per server: a crash (restarted a while later).
    pub crash: PerMillion,
    /// Per step: a partition between a client and a server (one way or both).
    pub partition: PerMillion,
    /// Per step: a client's messages to a server held back for a while.
    pub hold: PerMillion,
    /// Per step: the store's clock jumps forward (at most a quarter lease, and less than
    /// half a lease within any lease).
    pub clock_jump: PerMillion,
    /// Per step, per server: the server cut from the store for a while.
    pub store_cut: PerMillion,
    /// Per store call: it fails before reaching the store.
    pub store_fail_before: PerMillion,
    /// Per store call: it is applied, and its answer is lost.
    pub store_fail_after: PerMillion,
    /// Per store call: it is delayed (up to `store_delay_max`).
    pub store_delay: PerMillion,
    /// The longest a delayed store call waits: 400 ms, a tenth of a second in a steady
    /// world (a renewal sent every quarter lease and answered within it still vouches
    /// before the last one's three eighths of a lease run out, so no run is stopped for
    /// want of one).
    pub store_delay_max: Duration,
    /// Per store call: it hangs for one to three leases, then goes through.
    pub store_hang: PerMillion,
    /// Per claim acquired: the server is cut from the store before it completes.
    pub cut_after_claim: PerMillion,
    /// Per claim acquired, and again per complete: the server crashes there (after the
    /// claim, before the handler; after the handler's charge, before its complete).
    pub crash_in_handler: PerMillion,
    /// Per attempt: the gateway refuses the next charge (nothing charged).
    pub gateway_refuse: PerMillion,
    /// Per attempt: the gateway charges and loses the answer.
    pub gateway_charge_lost: PerMillion,
    /// Per attempt: the gateway loses the request (nothing charged, outcome unknown).
    pub gateway_request_lost: PerMillion,
    /// Per intent: the card is declined.
    pub gateway_decline: PerMillion,
    /// Per attempt: a second attempt is sent at once, to another server.
    pub concurrent: PerMillion,
    /// Per attempt: a retry is sent early, before this one is answered.
    pub early: PerMillion,
    /// Per answered intent: it is sent again later (the answer must not change).
    pub late: PerMillion,
    /// Per answered intent: its key is sent again with another amount (a client's bug:
    /// it must be refused, never answered as a repeat).
    pub reuse: PerMillion,
    /// Per request reaching the checkout's handler: the handler is slow (up to three
    /// leases) before it charges.
    pub slow_handler: PerMillion,
    /// Per receipt answered: its body is cut before a frame (after the charge).
    pub receipt_cut: PerMillion,
    /// Per receipt answered: its body stalls before a frame (up to 3 s).
    pub receipt_stall: PerMillion,
    /// Per receipt intent answered: an attempt with a body over the limit (a client's
    /// bug, to be refused).
    pub oversize: PerMillion,
}

impl Plan {
    /// The plan seed `seed` draws.
    pub fn draw(rng: &mut Rng) -> Self {
        let servers = usize::try_from(rng.between(2, 3)).unwrap_or(2);
        let clients = usize::try_from(rng.between(2, 4)).unwrap_or(2);
        let intents = (0..clients).map(|_| rng.between(1, INTENTS_MAX)).collect();
        let mut rate = |ceiling: PerMillion| {
            u32::try_from(rng.below(u64::from(ceiling) + 1)).unwrap_or(ceiling)
        };
        let plan = Self {
            steady: false,
            servers,
            clients,
            intents,
            chaos: Duration::ZERO,
            latency_max: Duration::ZERO,
            client_timeout: Duration::ZERO,
            check_lag: Duration::ZERO,
            crash: rate(1_500),
            partition: rate(3_000),
            hold: rate(3_000),
            clock_jump: rate(1_000),
            store_cut: rate(1_500),
            store_fail_before: rate(80_000),
            store_fail_after: rate(80_000),
            store_delay: rate(250_000),
            store_delay_max: Duration::from_millis(400),
            store_hang: rate(30_000),
            cut_after_claim: rate(80_000),
            crash_in_handler: rate(60_000),
            gateway_refuse: rate(100_000),
            gateway_charge_lost: rate(150_000),
            gateway_request_lost: rate(60_000),
            gateway_decline: rate(50_000),
            concurrent: rate(300_000),
            early: rate(300_000),
            late: rate(500_000),
            reuse: rate(200_000),
            slow_handler: rate(100_000),
            receipt_cut: rate(200_000),
            receipt_stall: rate(100_000),
            oversize: rate(300_000),
        };
        Self {
            chaos: rng.duration(Duration::from_secs(2), Duration::from_secs(12)),
            latency_max: rng.duration(Duration::from_millis(1), Duration::from_millis(80)),
            client_timeout: rng.duration(Duration::from_millis(300), Duration::from_secs(4)),
            check_lag: rng.duration(Duration::ZERO, Duration::from_millis(1_500)),
            ..plan
        }
    }

    /// This plan with every fault of the servers, the store and the gateway taken out:
    /// no crash, cut, failed, lost or hung store call, clock jump, slow handler, lost
    /// charge or request, or cut receipt; store calls are still delayed, by a tenth of a
    /// second at most. What is left is the clients' and the
    /// network's: partitions, holds, latency, timeouts, early, concurrent and late
    /// retries, reused keys, oversized bodies, stalled readers, refusals and declines.
    /// In such a world a key is left held only by a claim or a run dropped with its
    /// client, which the checks count as a violation: a recovery where nothing failed.
    pub fn steadied(self) -> Self {
        Self {
            steady: true,
            crash: 0,
            clock_jump: 0,
            store_cut: 0,
            store_fail_before: 0,
            store_fail_after: 0,
            store_hang: 0,
            store_delay_max: Duration::from_millis(100),
            cut_after_claim: 0,
            crash_in_handler: 0,
            gateway_charge_lost: 0,
            gateway_request_lost: 0,
            slow_handler: 0,
            receipt_cut: 0,
            ..self
        }
    }
}
