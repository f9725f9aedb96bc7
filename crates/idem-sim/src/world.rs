//! One world: built from its seed, run step by step with the driver's faults (crashes,
//! partitions, holds, clock jumps, cuts from the store) until its faults stop and every
//! client is done, then drained and checked.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use idem_core::{Clock, ManualClock, MemoryStore, StoreConfig, Timestamp};
use idem_http::StoredResponse;
use idem_payments::{PaymentOutcome, SimulatedGateway};

use crate::hosts::{self, Intent, Size};
use crate::payments;
use crate::plan::{CALM_LIMIT, DRAIN, LEASE, Plan, STEADY_ONE_IN, TICK};
use crate::rng::Rng;
use crate::shared::WorldState;
use crate::{Outcome, check};

/// The layer's store and the processor's.
pub(crate) type Stores = (Arc<MemoryStore<StoredResponse>>, Arc<MemoryStore<PaymentOutcome>>);

/// The store clock's reading when a world starts: 2026-01-01T00:00:00Z.
const EPOCH_MS: u64 = 1_767_225_600_000;

/// The store's cheaper reading of the world's clock: behind it by a lag the world draws
/// (a cached copy refreshed late), never ahead.
#[derive(Debug)]
struct Lagging {
    clock: Arc<ManualClock>,
    lag: Duration,
}

impl Clock for Lagging {
    fn now(&self) -> Timestamp {
        let now = self.clock.now().as_millis();
        Timestamp::from_millis(now.saturating_sub(self.lag.as_millis() as u64).max(EPOCH_MS))
    }
}

/// A fault the driver undoes later, and when.
#[derive(Debug)]
enum Undo {
    Restart(usize),
    Repair(String, String),
    Release(String, String),
    Join(usize),
}

/// The world under way: the simulation and what the driver tracks.
struct Driver<'a> {
    sim: turmoil::Sim<'a>,
    shared: Arc<WorldState>,
    clock: Arc<ManualClock>,
    gateway: Arc<SimulatedGateway>,
    rng: Rng,
    /// The store clock's lead on simulated time, from its jumps.
    jumped: Duration,
    /// Simulated time the store clock was last set to.
    clocked: Duration,
    undo: Vec<(Duration, Undo)>,
    crashed: Vec<bool>,
    /// The clock's jumps within the last lease, and when.
    jumps: Vec<(Duration, Duration)>,
}

/// Simulates the world of `seed` to its end and checks it.
///
/// # Panics
///
/// Never for any seed (the store's settings are fixed: a lease of [`LEASE`]); only if
/// tokio cannot build a runtime on this thread, to align its task ids on.
pub fn simulate(seed: u64) -> Outcome {
    // One world at a time in a process, its tokio task ids aligned: see `align_task_ids`.
    let _alone = WORLDS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    align_task_ids();
    simulate_alone(seed)
}

/// Held by the world running in this process.
static WORLDS: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The shards a current-thread tokio runtime keeps its tasks in, by task id (`id % 4`
/// in tokio 1.54), with room: a multiple of 64 stays aligned if that grows.
const TASK_SHARDS: u64 = 64;

/// Moves tokio's process-wide task id counter to the next multiple of `TASK_SHARDS`.
/// A crash drops a host's runtime, which shuts its tasks down shard by shard, and each
/// dropped socket sends its close with a latency turmoil draws in that order: so the
/// order depends on the ids' residues, which depend on every task spawned before in the
/// process. A world that starts at a multiple, alone in its process (`WORLDS`), gets the
/// same residues, and so the same world, whatever ran before it.
fn align_task_ids() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a current-thread runtime to align task ids on (the world would not replay)");
    loop {
        let task = runtime.spawn(async {});
        let id: u64 = task.id().to_string().parse().unwrap_or(0);
        let _ = runtime.block_on(task);
        if id % TASK_SHARDS == TASK_SHARDS - 1 {
            return;
        }
    }
}

/// `simulate`, once the world runs alone.
fn simulate_alone(seed: u64) -> Outcome {
    let mut rng = Rng::new(seed);
    let plan = Plan::draw(&mut rng);
    // On a stream of its own, so that every other draw of the world stays as it was.
    let steady = Rng::new(seed.rotate_left(29) ^ 0x0057_ead1).below(STEADY_ONE_IN) == 0;
    let plan = if steady { plan.steadied() } else { plan };
    let shared = WorldState::new(plan.clone(), rng.fork());
    let clock = Arc::new(ManualClock::new(Timestamp::from_millis(EPOCH_MS)));
    let config = StoreConfig::builder().lease(LEASE).build().expect("a valid lease");
    // The layer's store holds a scope quota of exactly its keys: one claim in flight per
    // key at most, so a correct count never refuses (a 429 is a violation), and a place
    // that is not given back refuses a key that should run.
    let keys = intents(&plan, seed).iter().flatten().filter(|i| i.path != "/pay").count();
    let quota = StoreConfig::builder().lease(LEASE).scope_in_flight_max(keys.max(1));
    let quota = quota.build().expect("a valid lease and quota");
    let lagging = Arc::new(Lagging { clock: clock.clone(), lag: plan.check_lag });
    let clocks: (Arc<dyn Clock>, Arc<dyn Clock>) = (clock.clone(), lagging);
    let store = Arc::new(MemoryStore::simulated(quota, clocks.clone(), rng.next_u64()));
    let paid = Arc::new(MemoryStore::simulated(config, clocks, rng.next_u64()));
    let stores = (store, paid);
    let forever = Duration::from_secs(1 << 40);
    let gateway =
        Arc::new(SimulatedGateway::new().without_dedup().forgetting_after(forever, clock.clone()));
    let sim = build(&plan, seed, &shared, &stores, &gateway);
    let driver = Driver {
        sim,
        shared: Arc::clone(&shared),
        clock,
        gateway: Arc::clone(&gateway),
        rng: rng.fork(),
        jumped: Duration::ZERO,
        clocked: Duration::ZERO,
        undo: Vec::new(),
        crashed: vec![false; plan.servers],
        jumps: Vec::new(),
    };
    let (elapsed, mut violations) = driver.run();
    violations.extend(check::world(&shared, &stores, &gateway, &intents(&plan, seed)));
    Outcome {
        seed,
        violations,
        trace: shared.trace_text(),
        simulated: elapsed,
        // ORDERING: one thread runs the world (the runner: one world per thread); a flag
        // or count that orders nothing else.
        requests: shared.requests.load(Ordering::Relaxed),
        faults: shared.fault_counts(),
    }
}

/// The intents of a world on `plan`, numbered across its clients.
pub(crate) fn intents(plan: &Plan, seed: u64) -> Vec<Vec<Intent>> {
    let mut index = 0;
    // A third of the intents on each route, which ones drawn from the seed.
    let mut paths = Rng::new(seed.rotate_left(17) ^ 0x5eed);
    plan.intents
        .iter()
        .map(|&count| {
            (0..count)
                .map(|_| {
                    index += 1;
                    let key = format!("order-{seed:x}-{index}");
                    let path = ["/checkout", "/pay", "/receipt"][paths.below(3) as usize];
                    // A third of the receipts padded to exactly the layer's body limit.
                    let at_limit = path == "/receipt" && paths.below(3) == 0;
                    let size = if at_limit { Size::AtLimit } else { Size::Plain };
                    let amount = 100 + 5 * index as u64;
                    Intent { index, key, amount, path, reused: false, size }
                })
                .collect()
        })
        .collect()
}

/// The simulation of a world on `plan`: its servers and clients, on a network whose
/// latency the plan draws.
fn build<'a>(
    plan: &Plan,
    seed: u64,
    shared: &Arc<WorldState>,
    stores: &Stores,
    gateway: &Arc<SimulatedGateway>,
) -> turmoil::Sim<'a> {
    let limit = plan.chaos + CALM_LIMIT + DRAIN + Duration::from_secs(10);
    let mut sim = turmoil::Builder::new()
        .rng_seed(seed)
        .tick_duration(TICK)
        .simulation_duration(limit)
        .min_message_latency(Duration::from_millis(1))
        .max_message_latency(plan.latency_max)
        .build();
    for index in 0..plan.servers {
        let (shared, stores, gateway) = (shared.clone(), stores.clone(), gateway.clone());
        sim.host(format!("server{index}"), move || {
            hosts::server(shared.clone(), stores.clone(), gateway.clone(), index)
        });
    }
    let every: Vec<Intent> = intents(plan, seed).into_iter().flatten().collect();
    let processor = payments::processor(stores.1.clone(), shared.clone(), gateway.clone(), None);
    sim.client("operator", hosts::reconciler(shared.clone(), stores.0.clone(), processor, every));
    for (index, intents) in intents(plan, seed).into_iter().enumerate() {
        let client = hosts::client(shared.clone(), gateway.clone(), index, intents);
        sim.client(format!("client{index}"), client);
    }
    sim
}

impl Driver<'_> {
    /// Steps the world until its clients are done and it has drained; returns the
    /// simulated time it took and what went wrong on the way.
    fn run(mut self) -> (Duration, Vec<String>) {
        let plan = self.shared.plan.clone();
        let mut violations = Vec::new();
        let mut drained_at = None;
        loop {
            let finished = match self.sim.step() {
                Ok(finished) => finished,
                Err(error) => {
                    violations.push(format!("a host failed: {error}"));
                    break;
                }
            };
            let now = self.sim.elapsed();
            self.set_clock(now);
            if !self.shared.is_calm() && now >= plan.chaos {
                self.calm(now);
            }
            if !self.shared.is_calm() {
                self.strike(now, &plan);
            }
            self.undo_due(now);
            if finished && drained_at.is_none() {
                drained_at = Some(now + DRAIN);
            }
            if drained_at.is_some_and(|at| now >= at) {
                break;
            }
            if drained_at.is_none() && now >= plan.chaos + CALM_LIMIT {
                violations.push(format!(
                    "liveness: clients still unanswered {:?} after the faults stopped",
                    CALM_LIMIT
                ));
                break;
            }
        }
        (self.sim.elapsed(), violations)
    }

    /// Moves the store's clock to simulated time plus its jumps.
    fn set_clock(&mut self, now: Duration) {
        self.clock.advance(now.saturating_sub(self.clocked));
        self.clocked = now;
    }

    /// The faults of one step, each drawn at its rate.
    fn strike(&mut self, now: Duration, plan: &Plan) {
        for index in self.shared.take_crash_requests() {
            self.crash(now, index);
        }
        for index in 0..plan.servers {
            if self.rng.chance(plan.crash) {
                self.crash(now, index);
            }
            if self.rng.chance(plan.store_cut) && !self.shared.is_cut(index) {
                self.shared.fault_at(now, &format!("server{index}"), "server cut from the store");
                self.shared.set_cut(index, true);
                let back = now + self.rng.duration(Duration::from_millis(200), LEASE * 2);
                self.undo.push((back, Undo::Join(index)));
            }
        }
        if self.rng.chance(plan.partition) {
            self.partition(now, plan);
        }
        if self.rng.chance(plan.hold) {
            let (client, server) = self.pair(plan);
            self.shared.fault_at(now, &client, "messages to a server held");
            self.sim.hold(client.as_str(), server.as_str());
            let back = now + self.rng.duration(Duration::from_millis(50), Duration::from_secs(3));
            self.undo.push((back, Undo::Release(client, server)));
        }
        if self.rng.chance(plan.clock_jump) {
            self.jump(now);
        }
    }

    /// The store's clock jumps forward, within the layer's contract: over any lease, the
    /// store's clock runs less than half a lease ahead of the servers' elapsed time (a
    /// run stops its handler half a lease after its last vouched renewal). A jump that
    /// would break that is not made.
    fn jump(&mut self, now: Duration) {
        let jump = self.rng.duration(Duration::from_millis(1), LEASE / 4);
        self.jumps.retain(|(at, _)| now.saturating_sub(*at) < LEASE);
        let recent: Duration = self.jumps.iter().map(|(_, j)| *j).sum();
        // A margin of two steps: the store's clock is set once per step.
        if recent + jump + TICK * 2 >= LEASE / 2 {
            return;
        }
        self.jumps.push((now, jump));
        self.shared.fault_at(now, "store", "store clock jumped forward");
        self.jumped += jump;
        self.clock.advance(jump);
    }

    /// A client and a server, drawn.
    fn pair(&mut self, plan: &Plan) -> (String, String) {
        let client = self.rng.below(plan.clients as u64);
        let server = self.rng.below(plan.servers as u64);
        (format!("client{client}"), format!("server{server}"))
    }

    /// A partition between a client and a server, one way (either) or both.
    fn partition(&mut self, now: Duration, plan: &Plan) {
        let (client, server) = self.pair(plan);
        match self.rng.below(3) {
            0 => {
                self.shared.fault_at(now, &client, "partitioned from a server, both ways");
                self.sim.partition(client.as_str(), server.as_str());
            }
            1 => {
                self.shared.fault_at(now, &client, "partitioned from a server, one way");
                self.sim.partition_oneway(client.as_str(), server.as_str());
            }
            _ => {
                self.shared.fault_at(now, &server, "partitioned from a client, one way");
                self.sim.partition_oneway(server.as_str(), client.as_str());
            }
        }
        let back = now + self.rng.duration(Duration::from_millis(100), Duration::from_secs(4));
        self.undo.push((back, Undo::Repair(client, server)));
    }

    /// Crashes server `index` (if it runs) and schedules its restart.
    fn crash(&mut self, now: Duration, index: usize) {
        if self.crashed[index] {
            return;
        }
        let name = format!("server{index}");
        self.shared.fault_at(now, &name, "server crashed");
        self.sim.crash(name.as_str());
        self.crashed[index] = true;
        self.shared.set_cut(index, false);
        let back = now + self.rng.duration(Duration::from_millis(100), Duration::from_secs(3));
        self.undo.push((back, Undo::Restart(index)));
    }

    /// Undoes the faults whose time has come.
    fn undo_due(&mut self, now: Duration) {
        let (due, later) =
            std::mem::take(&mut self.undo).into_iter().partition(|(at, _)| *at <= now);
        self.undo = later;
        for (_, undo) in due {
            self.undo_one(now, undo);
        }
    }

    fn undo_one(&mut self, now: Duration, undo: Undo) {
        match undo {
            Undo::Restart(index) => {
                if self.crashed[index] {
                    let name = format!("server{index}");
                    self.shared.trace_at(now, &name, format_args!("restarted"));
                    self.sim.bounce(name.as_str());
                    self.crashed[index] = false;
                }
            }
            Undo::Repair(a, b) => self.sim.repair(a.as_str(), b.as_str()),
            Undo::Release(a, b) => self.sim.release(a.as_str(), b.as_str()),
            Undo::Join(index) => self.shared.set_cut(index, false),
        }
    }

    /// Stops every fault: heals the network, restarts the crashed, joins the cut, and
    /// drops the gateway's queued faults.
    fn calm(&mut self, now: Duration) {
        // ORDERING: one thread runs the world (the runner: one world per thread); a flag
        // or count that orders nothing else.
        self.shared.calm.store(true, Ordering::Relaxed);
        self.shared.trace_at(now, "world", format_args!("calm: the faults stop"));
        for (_, undo) in std::mem::take(&mut self.undo) {
            self.undo_one(now, undo);
        }
        for index in 0..self.shared.plan.servers {
            self.shared.set_cut(index, false);
        }
        self.gateway.clear_faults();
    }
}
