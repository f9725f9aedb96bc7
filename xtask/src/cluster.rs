//! `cargo xtask cluster`: the deployment users run, tested end to end. Real processes on
//! loopback: the store's server (the harness's own PostgreSQL, or with `--store redis` a
//! Redis server it starts), N checkout servers on it (the checkout example, `--store
//! postgres:URL` or `redis:URL`, `--gateway URL`), haproxy in front, and the gateway
//! process on the other side of fault proxies; clients pay through haproxy while faults
//! are inflicted on a seeded schedule; then the check, from outside the servers.

mod check;
mod faults;
mod http;
mod load;
mod procs;
mod proxy;
mod redis;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::{Result, root, run};

/// A seeded generator (64-bit LCG, high bits out): the same seed, the same run.
#[derive(Debug, Clone)]
pub(crate) struct Lcg(u64);

impl Lcg {
    pub(crate) fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    /// A number below `n` (at least 1).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.0 =
            self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n.max(1)
    }
}

/// A run's shape, from the command line.
#[derive(Debug, Clone)]
struct Options {
    servers: usize,
    intents: usize,
    seed: u64,
    clients: usize,
    /// Intents started per second while the faults run.
    rate: u32,
    /// A fault every this long (a little more or less, from the seed).
    fault_every: Duration,
    naive: bool,
    no_run: bool,
    store: StoreKind,
}

/// Which store the servers share.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StoreKind {
    /// The harness's own PostgreSQL server (`.ci/postgres-cluster.sh`).
    Postgres,
    /// A Redis server the harness starts (AOF synced on every write, no eviction).
    Redis,
}

const USAGE: &str = "cluster [--servers N] [--intents M] [--seed S] [--clients C] \
                     [--rate R] [--short] [--naive] [--no-run] [--store postgres|redis]";

fn options(args: &[String]) -> Result<Options> {
    let mut options = Options {
        servers: 3,
        intents: 2_000,
        seed: 1,
        clients: 16,
        rate: 25,
        fault_every: Duration::from_secs(1),
        naive: false,
        no_run: false,
        store: StoreKind::Postgres,
    };
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let mut number = |name: &str| -> Result<u64> {
            let value = args.next().ok_or(format!("{name} needs a number; usage: {USAGE}"))?;
            value.parse().map_err(|_| format!("{name} {value:?}: not a number; usage: {USAGE}"))
        };
        match arg.as_str() {
            "--servers" => options.servers = number("--servers")?.clamp(1, 16) as usize,
            "--intents" => options.intents = number("--intents")?.clamp(1, 1_000_000) as usize,
            "--seed" => options.seed = number("--seed")?,
            "--clients" => options.clients = number("--clients")?.clamp(1, 256) as usize,
            "--rate" => options.rate = number("--rate")?.clamp(1, 10_000) as u32,
            "--short" => {
                (options.intents, options.rate) = (300, 10);
                options.fault_every = Duration::from_millis(700);
            }
            "--naive" => options.naive = true,
            "--no-run" => options.no_run = true,
            "--store" => {
                options.store = match args.next().map(String::as_str) {
                    Some("postgres") => StoreKind::Postgres,
                    Some("redis") => StoreKind::Redis,
                    other => {
                        return Err(format!("--store {other:?}: postgres or redis; {USAGE}"));
                    }
                };
            }
            other => return Err(format!("cluster: unknown argument {other:?}; usage: {USAGE}")),
        }
    }
    Ok(options)
}

/// The binaries the harness runs, built first.
fn build() -> Result<(PathBuf, PathBuf)> {
    run(
        "cluster build",
        crate::cargo().args(["build", "-q", "-p", "idem-http", "--example", "checkout_server"]),
    )?;
    run(
        "cluster build",
        crate::cargo().args(["build", "-q", "-p", "idem-crash", "--bin", "gateway_server"]),
    )?;
    let target =
        std::env::var("CARGO_TARGET_DIR").map_or_else(|_| root().join("target"), PathBuf::from);
    let debug = if target.is_absolute() { target } else { root().join(target) }.join("debug");
    Ok((debug.join("examples/checkout_server"), debug.join("gateway_server")))
}

/// The harness's database: its URL, where it listens, and the command that restarts it.
fn database() -> Result<(String, std::net::SocketAddr, String)> {
    let url = crate::cluster_postgres_url()?;
    let hostport = url.split('@').nth(1).and_then(|rest| rest.split('/').next());
    let addr = hostport.and_then(|h| h.parse().ok()).ok_or(format!("{url}: no HOST:PORT"))?;
    let restart = std::env::var("IDEM_CLUSTER_PG_RESTART").unwrap_or_else(|_| {
        "pg_ctlcluster $(ls /usr/lib/postgresql | sort -n | tail -1) harness restart".into()
    });
    Ok((url, addr, restart))
}

pub(crate) fn cluster(args: &[String]) -> Result {
    let options = options(args)?;
    let (server_binary, gateway_binary) = build()?;
    if options.no_run {
        return Ok(());
    }
    let dir = root().join(format!("target/cluster/seed-{}", options.seed));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    // Stopped when the run ends, however it ends.
    let mut redis_server = None;
    let (url, database, restart_db) = match options.store {
        StoreKind::Postgres => {
            let db = database()?;
            check::psql(&db.0, "DROP SCHEMA IF EXISTS checkout CASCADE")?;
            db
        }
        StoreKind::Redis => {
            let server = redis::Server::start(&dir.join("redis"))?;
            let db = (server.url(), server.addr(), server.restart_command()?);
            redis_server = Some(server);
            db
        }
    };
    let spec = procs::ServerSpec {
        binary: server_binary,
        database,
        store: options.store,
        naive: options.naive,
        lease_ms: 2_000,
    };
    let processes = procs::start(&dir, &gateway_binary, spec, options.servers, options.seed)?;
    let replay = replay_command(&options);
    let plan = faults::schedule(options.seed, options.servers, 10_000);
    let shown: Vec<String> = plan.iter().take(12).map(ToString::to_string).collect();
    println!(
        "cluster: seed {}: {} servers, {} intents; faults: {}, ...",
        options.seed,
        options.servers,
        options.intents,
        shown.join(", ")
    );
    println!("cluster: replay with `{replay}`; logs in {}", dir.display());
    let outcome = drive_and_check(&options, processes, &plan, (&url, &restart_db), &dir);
    drop(redis_server);
    match outcome {
        Ok(()) => Ok(()),
        Err(why) => Err(format!("{why}\ncluster: seed {}: replay with `{replay}`", options.seed)),
    }
}

fn replay_command(options: &Options) -> String {
    let mut command = format!(
        "cargo xtask cluster --seed {} --servers {} --intents {} --rate {} --clients {}",
        options.seed, options.servers, options.intents, options.rate, options.clients
    );
    if options.naive {
        command.push_str(" --naive");
    }
    if options.store == StoreKind::Redis {
        command.push_str(" --store redis");
    }
    command
}

/// What the faults thread did, by kind.
type Inflicted = BTreeMap<String, u64>;

/// The faults thread: one fault of `plan` after another, a pause between, until `stop`.
fn faults_thread(
    processes: Arc<Mutex<procs::Processes>>,
    plan: Vec<faults::Fault>,
    (every, seed): (Duration, u64),
    restart_db: String,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Result<Inflicted>> {
    std::thread::spawn(move || {
        let mut lcg = Lcg::new(seed ^ 0x7135);
        let mut inflicted = Inflicted::new();
        for fault in plan {
            let pause = every / 2 + Duration::from_millis(lcg.below(every.as_millis() as u64 + 1));
            std::thread::sleep(pause);
            // ORDERING: a stop flag; the joiner reads the thread's result, not memory.
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let mut processes = processes.lock().unwrap_or_else(PoisonError::into_inner);
            faults::inflict(fault, &mut processes, &restart_db)?;
            *inflicted.entry(fault.kind().to_string()).or_default() += 1;
        }
        Ok(inflicted)
    })
}

fn drive_and_check(
    options: &Options,
    processes: procs::Processes,
    plan: &[faults::Fault],
    (url, restart_db): (&str, &str),
    dir: &std::path::Path,
) -> Result {
    let front = processes.front;
    let processes = Arc::new(Mutex::new(processes));
    let intents = Arc::new(load::intents(options.seed, options.intents));
    let seen = Arc::new(Mutex::new(load::Seen {
        charges: vec![Vec::new(); intents.len()],
        first_answer: vec![None; intents.len()],
        refused: Vec::new(),
    }));
    let counts = Arc::new(load::Counts::default());
    let stop = Arc::new(AtomicBool::new(false));
    let timing = (options.fault_every, options.seed);
    let faulting = faults_thread(
        processes.clone(),
        plan.to_vec(),
        timing,
        restart_db.to_string(),
        stop.clone(),
    );
    let started = Instant::now();
    let every = Duration::from_secs(1) / options.rate;
    let deadline = started + every * options.intents as u32 + Duration::from_secs(60);
    let how = load::Drive {
        clients: options.clients,
        deadline,
        double: true,
        pace: Some((started, every)),
    };
    load::drive(front, &intents, (0..intents.len()).collect(), how, &seen, &counts);
    // ORDERING: as in `faults_thread`.
    stop.store(true, Ordering::Relaxed);
    let inflicted = faulting.join().map_err(|_| "the faults thread panicked")??;
    faults::tell_gateway(processes.lock().unwrap_or_else(PoisonError::into_inner).gateway, "")?;
    let loaded = started.elapsed();
    reconcile(front, &intents, &seen, &counts, options.clients);
    if options.store == StoreKind::Redis && !options.naive {
        settle_left_in_flight(url, front, (&intents, &seen, &counts), options.clients)?;
    }
    let seen = seen.lock().unwrap_or_else(PoisonError::into_inner);
    let mut verdict = check::judge(&dir.join("charges.log"), &intents, &seen)?;
    match (options.naive, options.store) {
        (true, _) => {}
        (false, StoreKind::Postgres) => check::database(url, &mut verdict, intents.len())?,
        (false, StoreKind::Redis) => redis::check(url, &mut verdict)?,
    }
    summary(options, &seen, &counts, (&inflicted, loaded), &verdict);
    verdict_result(&verdict, &inflicted)
}

/// After the faults: every intent without an answer is retried (once its claim's lease
/// has run out, a retry recovers it) until answered, or for at most a minute.
fn reconcile(
    front: std::net::SocketAddr,
    intents: &Arc<Vec<load::Intent>>,
    seen: &Arc<Mutex<load::Seen>>,
    counts: &Arc<load::Counts>,
    clients: usize,
) {
    let todo: Vec<usize> = {
        let seen = seen.lock().unwrap_or_else(PoisonError::into_inner);
        (0..intents.len()).filter(|i| seen.charges[*i].is_empty()).collect()
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let how = load::Drive { clients, deadline, double: false, pace: None };
    load::drive(front, intents, todo, how, seen, counts);
}

/// A reconciler's pass: a key whose answer its client got, but whose completion the
/// store refused (the store's server restarted under it), stays in flight for recovery,
/// as the layer promises; the operator's reconciler retries each such key once its lease
/// has run out, and the retry recovers it (asking the gateway) and stores its answer.
/// The check then judges the recovered answers like any other.
fn settle_left_in_flight(
    url: &str,
    front: std::net::SocketAddr,
    (intents, seen, counts): (&Arc<Vec<load::Intent>>, &Arc<Mutex<load::Seen>>, &Arc<load::Counts>),
    clients: usize,
) -> Result {
    let keys = redis::in_flight_keys(url)?;
    if keys.is_empty() {
        return Ok(());
    }
    println!("cluster: {} keys left in flight: retried once their leases run out", keys.len());
    // The servers' lease (2 s) and a margin.
    std::thread::sleep(Duration::from_millis(2_500));
    let todo: Vec<usize> = (0..intents.len()).filter(|i| keys.contains(&intents[*i].key)).collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    let how = load::Drive { clients, deadline, double: false, pace: None };
    load::drive(front, intents, todo, how, seen, counts);
    Ok(())
}

fn summary(
    options: &Options,
    seen: &load::Seen,
    counts: &load::Counts,
    (inflicted, loaded): (&Inflicted, Duration),
    verdict: &check::Verdict,
) {
    let mut times: Vec<Duration> = seen.first_answer.iter().flatten().copied().collect();
    times.sort();
    let at =
        |q: f64| times.get(((times.len() as f64 * q) as usize).min(times.len().saturating_sub(1)));
    let faults: Vec<String> = inflicted.iter().map(|(k, n)| format!("{k} {n}")).collect();
    println!(
        "cluster: {} intents, {} requests, {} answered in {loaded:.1?}; faults: {}; \
         p50 {:?}, p99 {:?} to an answer; doubles {}, lost {}, mismatched {}, other {}",
        options.intents,
        counts.requests.load(Ordering::Relaxed),
        times.len(),
        faults.join(", "),
        at(0.5).copied().unwrap_or_default(),
        at(0.99).copied().unwrap_or_default(),
        verdict.doubles.len(),
        verdict.lost.len(),
        verdict.mismatched.len(),
        verdict.other.len(),
    );
}

/// Passes if nothing went wrong and every kind of fault happened.
fn verdict_result(verdict: &check::Verdict, inflicted: &Inflicted) -> Result {
    let mut problems: Vec<&String> = Vec::new();
    for list in [&verdict.doubles, &verdict.lost, &verdict.mismatched, &verdict.other] {
        problems.extend(list.iter().take(5));
    }
    if !verdict.passed() {
        let named: Vec<&str> = problems.iter().map(|p| p.as_str()).collect();
        return Err(format!("cluster: the promise broke:\n  {}", named.join("\n  ")));
    }
    let missing: Vec<&str> =
        faults::KIND_NAMES.iter().copied().filter(|k| !inflicted.contains_key(*k)).collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!("cluster: the run ended before these faults happened: {missing:?}"))
    }
}
