//! `idem-sim`: runs seeded worlds of the checkout (see the library's docs), on every
//! core, and reports. `cargo xtask sim` runs it in release.
//!
//! ```text
//! idem-sim --seeds N [--from S] [--stop-at-first]   N worlds, seeds S..S+N (S: 0)
//! idem-sim --seed S                                 one world, with its trace
//! ```

use std::collections::BTreeMap;
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

/// What to run, from the arguments.
enum Run {
    One(u64),
    Many {
        from: u64,
        seeds: u64,
        stop_at_first: bool,
    },
    /// A worker the runner started: its slice of the seeds.
    Worker {
        worker: u64,
        workers: u64,
        from: u64,
        seeds: u64,
        stop_at_first: bool,
    },
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
    let stop_at_first = args.iter().any(|a| a == "--stop-at-first");
    if args.first().map(String::as_str) == Some("--worker") {
        let number = |at: usize| args.get(at).and_then(|a| a.parse().ok()).ok_or(USAGE);
        let (worker, workers, from, seeds) = (number(1)?, number(2)?, number(3)?, number(4)?);
        return Ok(Run::Worker { worker, workers: workers.max(1), from, seeds, stop_at_first });
    }
    let seeds = value("--seeds")?.ok_or(USAGE)?;
    let from = value("--from")?.unwrap_or(0);
    Ok(Run::Many { from, seeds, stop_at_first })
}

const USAGE: &str = "usage: idem-sim --seeds N [--from S] [--stop-at-first] | --seed S";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    idem_sim::quiet_injected_panics();
    match parse(&args) {
        Ok(Run::One(seed)) => {
            let world = idem_sim::simulate(seed);
            print!("{}", world.trace);
            let mut tally = Tally::default();
            tally.read(&world_line(&world));
            println!("{}", tally.summary(Duration::ZERO));
            print!("{}", world.report());
            if world.violations.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE }
        }
        Ok(Run::Many { from, seeds, stop_at_first }) => many(from, seeds, stop_at_first),
        Ok(Run::Worker { worker, workers, from, seeds, stop_at_first }) => {
            work(worker, workers, from, seeds, stop_at_first)
        }
        Err(why) => {
            eprintln!("{why}");
            ExitCode::from(2)
        }
    }
}

/// Runs seeds `from..from + seeds` on every core, one worker process per core (a world
/// runs alone in its process: see `simulate`); reports the failures and the figures.
fn many(from: u64, seeds: u64, stop_at_first: bool) -> ExitCode {
    let started = Instant::now();
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get()) as u64;
    let mut children = Vec::new();
    for worker in 0..workers.min(seeds.max(1)) {
        let mut command = Command::new(match std::env::current_exe() {
            Ok(exe) => exe,
            Err(why) => return refused(&format!("the runner cannot find itself: {why}")),
        });
        let slice = [worker, workers, from, seeds].map(|n| n.to_string());
        command.arg("--worker").args(slice).stdout(Stdio::piped());
        if stop_at_first {
            command.arg("--stop-at-first");
        }
        match command.spawn() {
            Ok(child) => children.push(child),
            Err(why) => return refused(&format!("a worker did not start: {why}")),
        }
    }
    let gathered = gather(&mut children, stop_at_first);
    for mut child in children {
        let _ = child.kill();
        let _ = child.wait();
    }
    let (mut tally, stopped, failed) = match gathered {
        Ok((tally, stopped)) => (tally, stopped, None),
        Err((tally, why)) => (tally, false, Some(why)),
    };
    tally.reports.sort_by_key(|(seed, _)| *seed);
    if stopped {
        // Other workers were stopped mid-world: only the lowest report is whole for sure.
        tally.reports.truncate(1);
    }
    println!("{}", tally.summary(started.elapsed()));
    for (_, report) in &tally.reports {
        print!("{report}");
    }
    if let Some(why) = failed {
        return refused(&why);
    }
    if !stopped && tally.worlds != seeds {
        return refused(&format!("the workers reported {} of {seeds} worlds", tally.worlds));
    }
    if let Some((first, _)) = tally.reports.first() {
        println!("first failing seed: {first} ({} seeds up to it)", first - from + 1);
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

/// What a run gathered, and whether it stopped at its first failure; or what it had
/// when a worker failed itself (a panic, a kill), and which seed that worker ran.
type Gathered = Result<(Tally, bool), (Tally, String)>;

/// Reads the workers' lines as they come; if `stop_at_first`, stops once no failing seed
/// lower than the lowest one found can come (the caller ends the workers). A worker
/// whose output closes is waited for: it must have ended well (or failed a world).
fn gather(children: &mut [std::process::Child], stop_at_first: bool) -> Gathered {
    // Each worker's lines, then `None` once its output closes.
    let (lines, read) = std::sync::mpsc::channel::<(usize, Option<String>)>();
    for (worker, child) in children.iter_mut().enumerate() {
        let Some(stdout) = child.stdout.take() else {
            return Err((Tally::default(), format!("worker {worker} has no output")));
        };
        let lines = lines.clone();
        std::thread::spawn(move || {
            for line in std::io::BufRead::lines(std::io::BufReader::new(stdout)) {
                let Ok(line) = line else { break };
                if lines.send((worker, Some(line))).is_err() {
                    return;
                }
            }
            let _ = lines.send((worker, None));
        });
    }
    drop(lines);
    let mut tally = Tally::default();
    // Per worker: the last seed it finished, or `u64::MAX` once it ended; and the seed
    // it runs now.
    let mut reached = vec![0_u64; children.len()];
    let mut running = vec![None; children.len()];
    while let Ok((worker, line)) = read.recv() {
        let (Some(slot), Some(now)) = (reached.get_mut(worker), running.get_mut(worker)) else {
            continue;
        };
        match line {
            None => {
                let status = children.get_mut(worker).map(std::process::Child::wait);
                if let Some(why) = ended_badly(status) {
                    let seed = now.map_or("none".to_string(), |s: u64| s.to_string());
                    return Err((tally, format!("worker {worker} ended ({why}) in seed {seed}")));
                }
                *slot = u64::MAX;
            }
            Some(line) => {
                let seed = line.split('\t').nth(1).and_then(|s| s.parse().ok());
                if line.starts_with("start\t") {
                    *now = seed;
                    continue;
                }
                if line.starts_with("world\t") {
                    *slot = seed.unwrap_or(*slot).max(*slot);
                    *now = None;
                }
                tally.read(&line);
            }
        }
        // Stopping at the first failure: once every worker has passed the lowest failing
        // seed (or ended), no lower one can come, and its report is whole.
        let lowest = tally.reports.iter().map(|(seed, _)| *seed).min();
        if let Some(lowest) = lowest.filter(|_| stop_at_first)
            && reached.iter().all(|r| *r > lowest)
        {
            return Ok((tally, true));
        }
    }
    // Every worker ended; those that stopped at a failure left seeds unrun.
    let stopped = stop_at_first && !tally.reports.is_empty();
    Ok((tally, stopped))
}

/// Why a worker's end is not one it chose (a world failing is one: exit code 1).
fn ended_badly(status: Option<std::io::Result<std::process::ExitStatus>>) -> Option<String> {
    match status {
        Some(Ok(status)) if status.success() || status.code() == Some(1) => None,
        Some(Ok(status)) => Some(status.to_string()),
        Some(Err(why)) => Some(why.to_string()),
        None => Some("no such worker".to_string()),
    }
}

/// Says why the run could not go on.
fn refused(why: &str) -> ExitCode {
    eprintln!("idem-sim: {why}");
    ExitCode::from(2)
}

/// One worker: seeds `from + worker`, `from + worker + workers`, ... below `from + seeds`,
/// one after the other, each as a line the runner reads (and a failing one's report).
fn work(worker: u64, workers: u64, from: u64, seeds: u64, stop_at_first: bool) -> ExitCode {
    let mut failed = false;
    for seed in (from + worker..from + seeds).step_by(usize::try_from(workers).unwrap_or(1)) {
        println!("start\t{seed}");
        let world = idem_sim::simulate(seed);
        print!("{}", world_line(&world));
        if !world.violations.is_empty() {
            for line in world.report().lines() {
                println!("report\t{seed}\t{line}");
            }
            failed = true;
            if stop_at_first {
                break;
            }
        }
    }
    if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS }
}

/// A world's line for the runner: seed, simulated milliseconds, requests, violations,
/// then each fault kind with its count.
fn world_line(world: &idem_sim::Outcome) -> String {
    let faults: Vec<String> = world.faults.iter().map(|(k, n)| format!("{k}={n}")).collect();
    let (seed, ms, broken) = (world.seed, world.simulated.as_millis(), world.violations.len());
    format!("world\t{seed}\t{ms}\t{}\t{broken}\t{}\n", world.requests, faults.join("\t"))
}

/// What the workers reported, summed.
#[derive(Default)]
struct Tally {
    worlds: u64,
    failed: u64,
    simulated: Duration,
    requests: u64,
    faults: BTreeMap<String, u64>,
    /// The failing worlds' reports, by seed.
    reports: Vec<(u64, String)>,
}

impl Tally {
    /// Adds a worker's lines.
    fn read(&mut self, output: &str) {
        for line in output.lines() {
            let mut fields = line.split('\t');
            let (kind, seed) = (fields.next(), fields.next().and_then(|s| s.parse().ok()));
            match (kind, seed) {
                (Some("world"), Some(_)) => self.world(fields),
                (Some("report"), Some(seed)) => {
                    let text = fields.collect::<Vec<_>>().join("\t");
                    match self.reports.iter_mut().find(|(s, _)| *s == seed) {
                        Some((_, report)) => report.push_str(&format!("{text}\n")),
                        None => self.reports.push((seed, format!("{text}\n"))),
                    }
                }
                _ => {}
            }
        }
    }

    /// Adds one world's line (after its seed).
    fn world<'a>(&mut self, mut fields: impl Iterator<Item = &'a str>) {
        let mut number = || fields.next().and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
        let (ms, requests, broken) = (number(), number(), number());
        self.worlds += 1;
        self.failed += u64::from(broken > 0);
        self.simulated += Duration::from_millis(ms);
        self.requests += requests;
        for fault in fields {
            if let Some((kind, n)) = fault.rsplit_once('=') {
                *self.faults.entry(kind.to_string()).or_default() += n.parse().unwrap_or(0);
            }
        }
    }

    /// The figures of a run: worlds, simulated time, requests, faults by kind, wall time.
    fn summary(&self, wall: Duration) -> String {
        let mut out = format!(
            "{} worlds, {} failed; {:.0} simulated seconds; {} requests; wall {:.1} s\n",
            self.worlds,
            self.failed,
            self.simulated.as_secs_f64(),
            self.requests,
            wall.as_secs_f64()
        );
        out.push_str("faults:");
        for (kind, n) in &self.faults {
            out.push_str(&format!("\n  {n:>8}  {kind}"));
        }
        out
    }
}
