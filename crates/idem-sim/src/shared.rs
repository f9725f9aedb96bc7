//! What every host of a world shares with the driver: the plan, the hosts' random
//! stream, the trace, the fault counts, the store clock, and what the clients were told.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::plan::Plan;
use crate::rng::Rng;

/// An answer a client was given for an intent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Told {
    /// A 2xx naming this charge and amount.
    Charged { charge: String, amount: String },
    /// 402: the card was declined.
    Declined,
    /// An answer no retry of a valid request should get (a 400, a 422, ...).
    Unexpected { status: u16 },
    /// An answer whose body carries a store error's words (internal detail a client
    /// must never see).
    Leaked { status: u16 },
    /// A success for a request that reused the intent's key with another amount: the
    /// layer or the processor took another request for a repeat.
    ReusedAnswered { status: u16, charge: String },
    /// A 2xx receipt kept too large to keep: the intent was paid; the answer names no
    /// charge.
    StoodIn,
    /// An answer that is wrong in itself (a receipt cut short and sent as whole, a
    /// stand-in the limits do not call for): why.
    Broken { why: String },
}

/// The world's shared state. The hosts run on the driver's thread, one at a time, so
/// the locks are never contended; they are there because the store contract's futures
/// must be `Send`.
#[derive(Debug)]
pub(crate) struct WorldState {
    /// The world's plan.
    pub(crate) plan: Plan,
    rng: Mutex<Rng>,
    trace: Mutex<String>,
    faults: Mutex<BTreeMap<&'static str, u64>>,
    /// Once set, no fault is injected any more.
    pub(crate) calm: AtomicBool,
    /// Servers cut from the store, by index.
    cut: Mutex<Vec<bool>>,
    /// Servers that asked the driver to crash them (mid-handler), by index.
    crash_requests: Mutex<Vec<usize>>,
    /// Every lease the store granted, per key, in grant order: tokens must grow.
    pub(crate) tokens: Mutex<BTreeMap<String, Vec<u64>>>,
    /// What each intent's client was told, per intent, in order.
    pub(crate) told: Mutex<BTreeMap<usize, Vec<Told>>>,
    /// Requests sent by every client.
    pub(crate) requests: AtomicU64,
    /// Clients whose every intent is answered.
    pub(crate) clients_done: AtomicU64,
    /// Breaches of the store contract a seam saw the layer make (a result larger than
    /// the store keeps).
    pub(crate) breaches: Mutex<Vec<String>>,
    /// The keys whose claim the store granted as a recovery (an earlier holder's lease
    /// ran out), in order.
    pub(crate) recovered: Mutex<Vec<String>>,
}

/// A key as the trace and the checks name it: `scope/key`.
fn key_name(key: &idem_core::ScopedKey) -> String {
    format!("{}/{}", key.scope().as_str(), key.key().as_str())
}

/// Takes a lock, even one a panicking host left poisoned (the checks still run).
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl WorldState {
    /// The shared state of a world on `plan`, its hosts drawing from `rng`.
    pub(crate) fn new(plan: Plan, rng: Rng) -> Arc<Self> {
        let servers = plan.servers;
        Arc::new(Self {
            plan,
            rng: Mutex::new(rng),
            trace: Mutex::new(String::new()),
            faults: Mutex::new(BTreeMap::new()),
            calm: AtomicBool::new(false),
            cut: Mutex::new(vec![false; servers]),
            crash_requests: Mutex::new(Vec::new()),
            tokens: Mutex::new(BTreeMap::new()),
            told: Mutex::new(BTreeMap::new()),
            requests: AtomicU64::new(0),
            clients_done: AtomicU64::new(0),
            breaches: Mutex::new(Vec::new()),
            recovered: Mutex::new(Vec::new()),
        })
    }

    /// Runs `draw` on the hosts' random stream.
    pub(crate) fn draw<T>(&self, draw: impl FnOnce(&mut Rng) -> T) -> T {
        draw(&mut lock(&self.rng))
    }

    /// Whether a fault of rate `per_million` strikes now (never once the world is calm).
    pub(crate) fn strikes(&self, per_million: u32) -> bool {
        !self.is_calm() && self.draw(|rng| rng.chance(per_million))
    }

    /// Whether the faults have stopped.
    pub(crate) fn is_calm(&self) -> bool {
        // ORDERING: one thread runs the world (the runner: one world per thread); a flag
        // or count that orders nothing else.
        self.calm.load(Ordering::Relaxed)
    }

    /// Adds a line to the trace, stamped with the simulated time.
    pub(crate) fn trace(&self, who: &str, what: std::fmt::Arguments<'_>) {
        let at = turmoil::sim_elapsed().unwrap_or_default();
        self.trace_at(at, who, what);
    }

    /// Adds a line to the trace, stamped with `at`.
    pub(crate) fn trace_at(&self, at: Duration, who: &str, what: std::fmt::Arguments<'_>) {
        let mut trace = lock(&self.trace);
        let _ = writeln!(trace, "{:>9.3} {who:<8} {what}", at.as_secs_f64());
    }

    /// Counts a fault of `kind` and traces it.
    pub(crate) fn fault(&self, who: &str, kind: &'static str) {
        *lock(&self.faults).entry(kind).or_default() += 1;
        self.trace(who, format_args!("fault: {kind}"));
    }

    /// Counts a fault the driver injected at `at`.
    pub(crate) fn fault_at(&self, at: Duration, who: &str, kind: &'static str) {
        *lock(&self.faults).entry(kind).or_default() += 1;
        self.trace_at(at, who, format_args!("fault: {kind}"));
    }

    /// The trace so far.
    pub(crate) fn trace_text(&self) -> String {
        lock(&self.trace).clone()
    }

    /// Faults injected so far, by kind.
    pub(crate) fn fault_counts(&self) -> BTreeMap<&'static str, u64> {
        lock(&self.faults).clone()
    }

    /// Whether server `index` is cut from the store.
    pub(crate) fn is_cut(&self, index: usize) -> bool {
        lock(&self.cut).get(index).copied().unwrap_or(false)
    }

    /// Cuts server `index` from the store, or joins it again.
    pub(crate) fn set_cut(&self, index: usize, cut: bool) {
        if let Some(slot) = lock(&self.cut).get_mut(index) {
            *slot = cut;
        }
    }

    /// Asks the driver to crash server `index` at its next step.
    pub(crate) fn request_crash(&self, index: usize) {
        lock(&self.crash_requests).push(index);
    }

    /// The crashes asked for since the last call.
    pub(crate) fn take_crash_requests(&self) -> Vec<usize> {
        std::mem::take(&mut *lock(&self.crash_requests))
    }

    /// Records and traces a lease a store granted `who`: its key's tokens must grow.
    pub(crate) fn granted(&self, who: &str, lease: &idem_core::Lease) {
        let key = key_name(lease.key());
        let token = lease.token().get();
        self.trace(who, format_args!("granted {key} token {token}"));
        lock(&self.tokens).entry(key).or_default().push(token);
    }

    /// Records and traces a claim the store granted `who` as a recovery of `key`.
    pub(crate) fn recovered(&self, who: &str, key: &idem_core::ScopedKey) {
        let key = key_name(key);
        self.trace(who, format_args!("recovers {key}"));
        lock(&self.recovered).push(key);
    }

    /// Records a breach of the store contract that `who` saw.
    pub(crate) fn breach(&self, who: &str, why: String) {
        self.trace(who, format_args!("breach: {why}"));
        lock(&self.breaches).push(why);
    }

    /// Records what intent `intent`'s client was told.
    pub(crate) fn tell(&self, intent: usize, told: Told) {
        lock(&self.told).entry(intent).or_default().push(told);
    }
}
