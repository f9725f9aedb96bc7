//! `cargo xtask demo`: the retry storm table.
//!
//! Each crate's `examples/retry_storm.rs` (target `retry_storm_<crate without idem->`)
//! prints one line:
//! `retry_storm<TAB>scenario<TAB>intents<TAB>attempts<TAB>naive effects<TAB>idem effects`.

use std::path::Path;
use std::process::Command;

use crate::{Result, cargo, crates_with};

struct Row {
    krate: String,
    scenario: String,
    intents: u64,
    attempts: u64,
    naive: u64,
    idem: u64,
}

/// The crates whose storm can run on the durable SQLite store (`--durable`).
const DURABLE: &[&str] = &["idem-payments", "idem-notify"];

pub(crate) fn run(_root: &Path, args: &[String]) -> Result {
    let durable = args.iter().any(|a| a == "--durable");
    let crates = crates_with("examples/retry_storm.rs")?;
    if crates.is_empty() {
        return Err("no crate has examples/retry_storm.rs".into());
    }
    let mut rows = Vec::new();
    for name in &crates {
        let mut command = cargo();
        // Each crate names its example `retry_storm_<crate without idem->`, so that the
        // workspace's examples do not collide in target/.
        let example = format!("retry_storm_{}", name.trim_start_matches("idem-"));
        command.args(["run", "--quiet", "--release", "-p", name, "--example", &example]);
        if durable && DURABLE.contains(&name.as_str()) {
            command.args(["--", "--durable"]);
        }
        rows.push(parse(name, &output(name, &mut command)?)?);
    }
    print_table(&rows);
    Ok(())
}

fn output(name: &str, command: &mut Command) -> Result<String> {
    let out = command.output().map_err(|e| format!("{name}: cannot start: {e}"))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        return Err(format!("{name}: retry_storm failed ({}):\n{stderr}", out.status));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn parse(name: &str, stdout: &str) -> Result<Row> {
    let line = stdout
        .lines()
        .find(|l| l.starts_with("retry_storm\t"))
        .ok_or_else(|| format!("{name}: no retry_storm line in its output:\n{stdout}"))?;
    let fields: Vec<&str> = line.split('\t').collect();
    let [_, scenario, intents, attempts, naive, idem] = fields[..] else {
        return Err(format!("{name}: expected 6 tab-separated fields: {line:?}"));
    };
    let number = |s: &str| s.parse::<u64>().map_err(|e| format!("{name}: {s:?}: {e}"));
    Ok(Row {
        krate: name.to_string(),
        scenario: scenario.to_string(),
        intents: number(intents)?,
        attempts: number(attempts)?,
        naive: number(naive)?,
        idem: number(idem)?,
    })
}

fn print_table(rows: &[Row]) {
    println!(
        "{:<14} {:<44} {:>8} {:>9} {:>13} {:>12} {:>11} {:>10}",
        "crate",
        "scenario",
        "intents",
        "attempts",
        "naive effects",
        "idem effects",
        "naive/int",
        "idem/int"
    );
    for r in rows {
        let per = |n: u64| n as f64 / r.intents.max(1) as f64;
        println!(
            "{:<14} {:<44} {:>8} {:>9} {:>13} {:>12} {:>11.3} {:>10.3}",
            r.krate,
            r.scenario,
            r.intents,
            r.attempts,
            r.naive,
            r.idem,
            per(r.naive),
            per(r.idem)
        );
    }
}
