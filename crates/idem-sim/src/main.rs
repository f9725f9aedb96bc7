//! `idem-sim`: runs seeded worlds of the checkout (see the library's docs), on every
//! core, and reports. `cargo xtask sim` runs it in release.
//!
//! ```text
//! idem-sim --seeds N [--from S] [--stop-at-first]   N worlds, seeds S..S+N (S: 0)
//! idem-sim --seed S                                 one world, with its trace
//! ```

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use idem_sim::Outcome;

/// What to run, from the arguments.
enum Run {
    One(u64),
    Many { from: u64, seeds: u64, stop_at_first: bool },
}

fn parse(args: &[String]) -> Result<Run, String> {
    let value = |name: &str| -> Result<Option<u64>, String> {
        let Some(at) = args.iter().position(|a| a == name) else { return Ok(None) };
        let text = args.get(at + 1).ok_or(format!("{name} needs a number"))?;
        text.parse().map(Some).map_err(|_| format!("{name} {text:?}: expected a number"))
    };
    if let Some(seed) = value("--seed")? {
        return Ok(Run::One(seed));
    }
    let seeds = value("--seeds")?.ok_or(USAGE)?;
    let from = value("--from")?.unwrap_or(0);
    Ok(Run::Many { from, seeds, stop_at_first: args.iter().any(|a| a == "--stop-at-first") })
}

const USAGE: &str = "usage: idem-sim --seeds N [--from S] [--stop-at-first] | --seed S";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    idem_sim::quiet_injected_panics();
    match parse(&args) {
        Ok(Run::One(seed)) => {
            let world = idem_sim::simulate(seed);
            print!("{}", world.trace);
            println!("{}", summary(&[&world], Duration::ZERO));
            print!("{}", world.report());
            if world.violations.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE }
        }
        Ok(Run::Many { from, seeds, stop_at_first }) => many(from, seeds, stop_at_first),
        Err(why) => {
            eprintln!("{why}");
            ExitCode::from(2)
        }
    }
}

/// Runs seeds `from..from + seeds` on every core; reports the failures and the figures.
fn many(from: u64, seeds: u64, stop_at_first: bool) -> ExitCode {
    let started = Instant::now();
    let next = AtomicU64::new(from);
    let stop = AtomicBool::new(false);
    let worlds: Mutex<Vec<Outcome>> = Mutex::new(Vec::new());
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                // ORDERING: the next seed and the stop flag order nothing else: each
                // world is whole on its thread, and the scope's join publishes them all.
                while !stop.load(Ordering::Relaxed) {
                    let seed = next.fetch_add(1, Ordering::Relaxed);
                    if seed >= from + seeds {
                        break;
                    }
                    let mut world = idem_sim::simulate(seed);
                    world.trace = String::new();
                    if !world.violations.is_empty() && stop_at_first {
                        // ORDERING: one world per thread; a flag
                        // or count that orders nothing else.
                        stop.store(true, Ordering::Relaxed);
                    }
                    worlds.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(world);
                }
            });
        }
    });
    let mut worlds = worlds.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
    worlds.sort_by_key(|w| w.seed);
    let all: Vec<&Outcome> = worlds.iter().collect();
    println!("{}", summary(&all, started.elapsed()));
    let failed: Vec<&&Outcome> = all.iter().filter(|w| !w.violations.is_empty()).collect();
    for world in &failed {
        print!("{}", world.report());
    }
    if let Some(first) = failed.first() {
        println!("first failing seed: {} ({} seeds run)", first.seed, first.seed - from + 1);
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

/// The figures of a run: worlds, simulated time, requests, faults by kind, wall time.
fn summary(worlds: &[&Outcome], wall: Duration) -> String {
    let simulated: Duration = worlds.iter().map(|w| w.simulated).sum();
    let requests: u64 = worlds.iter().map(|w| w.requests).sum();
    let mut faults: BTreeMap<&str, u64> = BTreeMap::new();
    for world in worlds {
        for (kind, n) in &world.faults {
            *faults.entry(kind).or_default() += n;
        }
    }
    let failed = worlds.iter().filter(|w| !w.violations.is_empty()).count();
    let mut out = format!(
        "{} worlds, {} failed; {:.0} simulated seconds; {requests} requests; wall {:.1} s\n",
        worlds.len(),
        failed,
        simulated.as_secs_f64(),
        wall.as_secs_f64()
    );
    out.push_str("faults:");
    for (kind, n) in faults {
        out.push_str(&format!("\n  {n:>8}  {kind}"));
    }
    out
}
