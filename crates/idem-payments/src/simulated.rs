//! A simulated gateway: deduplicates by key like a real card network, counts every real
//! charge, and fails on demand.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use idem_core::{Clock, SystemClock, Timestamp};
use parking_lot::Mutex;

use crate::gateway::{Charge, ChargeId, Gateway, GatewayError, GatewayKey, Lookup};
use crate::money::PaymentRequest;

/// A failure to inject into the next charge call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// Refused before sending: nothing is charged.
    RefuseBeforeCharge,
    /// The charge is made, then the answer is lost: the caller sees `Ambiguous`.
    ChargeThenTimeout,
    /// The request is lost before the network: nothing is charged, but the caller sees
    /// `Ambiguous` (it cannot know).
    TimeoutWithoutCharge,
    /// The card is declined with this reason.
    Decline(String),
}

/// Random faults for storms: each charge call draws one, from a seeded generator.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FaultPlan {
    /// Percent of calls refused before sending.
    pub refuse_percent: u64,
    /// Percent of calls that charge and then lose the answer.
    pub charge_then_timeout_percent: u64,
    /// The generator's seed.
    pub seed: u64,
}

#[derive(Debug)]
struct Entry {
    outcome: Result<Charge, String>,
    at: Timestamp,
}

#[derive(Debug, Default)]
struct State {
    by_key: HashMap<GatewayKey, Entry>,
    /// Real charges made per key: the side effects a test counts.
    charges: HashMap<GatewayKey, u32>,
    charged_minor: u64,
    refunded: HashSet<ChargeId>,
    next_id: u64,
    injected: VecDeque<Fault>,
    rng: u64,
}

/// What a [`SimulatedGateway`] charged in all, from [`SimulatedGateway::totals`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct ChargeTotals {
    /// Real charges made (a repeat answered from the gateway's memory is not one).
    pub charges: u64,
    /// Their amounts summed, in minor units, whatever their currencies (saturating at
    /// `u64::MAX`).
    pub charged_minor: u64,
}

/// A card network in memory. It deduplicates by [`GatewayKey`] for `forget_after` (by
/// its clock; default: forever), counts every real charge per key, and fails as told:
/// injected faults first, then the random [`FaultPlan`].
#[derive(Debug)]
pub struct SimulatedGateway {
    state: Mutex<State>,
    plan: FaultPlan,
    latency: Duration,
    forget_after: Option<Duration>,
    dedup: bool,
    clock: Arc<dyn Clock>,
}

impl Default for SimulatedGateway {
    fn default() -> Self {
        Self::new()
    }
}

impl SimulatedGateway {
    /// A gateway that never fails, answers at once and never forgets.
    pub fn new() -> Self {
        Self {
            state: Mutex::new(State::default()),
            plan: FaultPlan::default(),
            latency: Duration::ZERO,
            forget_after: None,
            dedup: true,
            clock: Arc::new(SystemClock),
        }
    }

    /// Draws random faults from `plan` on every call.
    #[must_use]
    pub fn with_faults(mut self, plan: FaultPlan) -> Self {
        self.state.get_mut().rng = plan.seed | 1;
        self.plan = plan;
        self
    }

    /// Sleeps `latency` in every charge (the slow part of a real network).
    #[must_use]
    pub fn with_latency(mut self, latency: Duration) -> Self {
        self.latency = latency;
        self
    }

    /// Forgets a key `window` after its charge (by `clock`): `lookup` then answers
    /// `Unknown`, and a charge with that key charges again.
    #[must_use]
    pub fn forgetting_after(mut self, window: Duration, clock: Arc<dyn Clock>) -> Self {
        self.forget_after = Some(window);
        self.clock = clock;
        self
    }

    /// A gateway that does not deduplicate: every charge call charges, even with a key it
    /// has seen (lookup still answers by key). Tests use it so that only the processor
    /// stands between a retry and a second charge.
    #[must_use]
    pub fn without_dedup(mut self) -> Self {
        self.dedup = false;
        self
    }

    /// Makes the next charge call fail with `fault` (faults queue up in order).
    pub fn inject(&self, fault: Fault) {
        self.state.lock().injected.push_back(fault);
    }

    /// Drops every injected fault not yet used.
    pub fn clear_faults(&self) {
        self.state.lock().injected.clear();
    }

    /// Real charges made with `key`.
    pub fn charges(&self, key: &GatewayKey) -> u32 {
        self.state.lock().charges.get(key).copied().unwrap_or(0)
    }

    /// Real charges made in all, and their sum.
    pub fn totals(&self) -> ChargeTotals {
        let state = self.state.lock();
        let charges = state.charges.values().map(|n| u64::from(*n)).sum();
        ChargeTotals { charges, charged_minor: state.charged_minor }
    }

    /// Whether `charge` was marked refunded.
    pub fn is_refunded(&self, charge: ChargeId) -> bool {
        self.state.lock().refunded.contains(&charge)
    }

    fn draw(&self, state: &mut State) -> Option<Fault> {
        if let Some(fault) = state.injected.pop_front() {
            return Some(fault);
        }
        let p = self.plan;
        if p.refuse_percent + p.charge_then_timeout_percent == 0 {
            return None;
        }
        state.rng ^= state.rng << 13;
        state.rng ^= state.rng >> 7;
        state.rng ^= state.rng << 17;
        let roll = state.rng % 100;
        if roll < p.refuse_percent {
            Some(Fault::RefuseBeforeCharge)
        } else if roll < p.refuse_percent + p.charge_then_timeout_percent {
            Some(Fault::ChargeThenTimeout)
        } else {
            None
        }
    }

    fn remembered<'a>(&self, state: &'a State, key: &GatewayKey) -> Option<&'a Entry> {
        let now = self.clock.now();
        state
            .by_key
            .get(key)
            .filter(|e| self.forget_after.is_none_or(|w| now < e.at.saturating_add(w)))
    }
}

impl Gateway for SimulatedGateway {
    fn charge(&self, key: &GatewayKey, request: &PaymentRequest) -> Result<Charge, GatewayError> {
        if !self.latency.is_zero() {
            std::thread::sleep(self.latency);
        }
        let mut state = self.state.lock();
        let fault = self.draw(&mut state);
        match &fault {
            Some(Fault::RefuseBeforeCharge) => {
                return Err(GatewayError::Refused("connection refused".into()));
            }
            Some(Fault::TimeoutWithoutCharge) => {
                return Err(GatewayError::Ambiguous("timed out".into()));
            }
            _ => {}
        }
        // A key seen before (and not forgotten) answers what it answered then.
        let known = if self.dedup { self.remembered(&state, key) } else { None };
        let outcome = match known {
            Some(entry) => entry.outcome.clone(),
            None => {
                let outcome = match fault.clone() {
                    Some(Fault::Decline(reason)) => Err(reason),
                    _ => {
                        state.next_id += 1;
                        *state.charges.entry(key.clone()).or_default() += 1;
                        // Saturating: amounts up to `i64::MAX` minor units each, and a
                        // panic here (its charge counted, its key not yet recorded) would
                        // leave a charge that `lookup` says never happened.
                        state.charged_minor =
                            state.charged_minor.saturating_add(request.amount().minor());
                        Ok(Charge {
                            id: ChargeId(state.next_id),
                            customer: request.customer().to_string(),
                            amount: request.amount(),
                            currency: request.currency(),
                        })
                    }
                };
                let at = self.clock.now();
                state.by_key.insert(key.clone(), Entry { outcome: outcome.clone(), at });
                outcome
            }
        };
        match (fault, outcome) {
            (Some(Fault::ChargeThenTimeout), _) => Err(GatewayError::Ambiguous("timed out".into())),
            (_, Ok(charge)) => Ok(charge),
            (_, Err(reason)) => Err(GatewayError::Declined(reason)),
        }
    }

    fn lookup(&self, key: &GatewayKey) -> Lookup {
        let state = self.state.lock();
        match self.remembered(&state, key) {
            Some(Entry { outcome: Ok(charge), .. }) => Lookup::Charged(charge.clone()),
            Some(Entry { outcome: Err(reason), .. }) => Lookup::Declined(reason.clone()),
            None if state.by_key.contains_key(key) => Lookup::Unknown,
            None => Lookup::NotCharged,
        }
    }

    fn set_refunded(&self, charge: ChargeId) -> bool {
        let mut state = self.state.lock();
        let exists = charge.0 >= 1 && charge.0 <= state.next_id;
        if exists {
            state.refunded.insert(charge);
        }
        exists
    }
}
