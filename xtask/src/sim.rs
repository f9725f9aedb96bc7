//! `cargo xtask sim`: the deterministic simulation (crates/idem-sim) in release, and
//! `--reach`, which runs it against the mutation catalogue's entries in the code it
//! exercises and reports how many seeds each took to be found.

use crate::{Result, cargo, run};

/// Seeds `cargo xtask ci` runs: inside two minutes on two cores (about 30 ms a
/// world per core, and the build).
pub(crate) const CI_SEEDS: u64 = 4_000;

/// Seeds `--reach` gives each mutation before calling it out of reach.
pub(crate) const REACH_SEEDS: u64 = 1_000;

/// `sim --seeds N [--from S] | --seed S | --reach [name...]`.
pub(crate) fn sim(args: &[String]) -> Result {
    if args.first().map(String::as_str) == Some("--reach") {
        return crate::mutants::reach(&args[1..], REACH_SEEDS);
    }
    let known = ["--seeds", "--from", "--seed", "--stop-at-first"];
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        if !known.contains(&arg.as_str()) {
            return Err(format!("sim: unknown argument {arg:?}; {USAGE}"));
        }
        if arg != "--stop-at-first" && rest.next().is_none() {
            return Err(format!("sim: {arg} needs a number; {USAGE}"));
        }
    }
    if args.is_empty() {
        return Err(format!("sim: {USAGE}"));
    }
    run("sim", cargo().args(["run", "--release", "-q", "-p", "idem-sim", "--"]).args(args))
}

/// What `sim` takes.
pub(crate) const USAGE: &str =
    "usage: cargo xtask sim --seeds N [--from S] [--stop-at-first] | --seed S | --reach [name...]";
