//! `cargo xtask bench`: runs the criterion benches, then prints each group's ratios.
//!
//! Convention: in every criterion group, the function named `idem` is this workspace's
//! implementation and every other function is a baseline measured in the same run. The
//! ratio is baseline time / idem time: above 1, idem is faster.

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::{Result, cargo, run as run_step};

const BEGIN: &str = "<!-- xtask bench: begin -->";
const END: &str = "<!-- xtask bench: end -->";

struct Measure {
    group: String,
    function: String,
    median_ns: f64,
}

pub(crate) fn run(root: &Path, args: &[String]) -> Result {
    let (write, only) = bench_args(args)?;
    let criterion_dir = root.join("target/criterion");
    let mut command = cargo();
    command.arg("bench");
    match only {
        Some(name) => {
            command.args(["-p", name]);
        }
        None => {
            // A full run starts clean so the table holds no result of a removed bench.
            let _ = fs::remove_dir_all(&criterion_dir);
            command.arg("--workspace");
        }
    }
    command.arg("--benches");
    // The PostgreSQL benches (idem-http's `http_pg`, idem-store-postgres's `floor`) need a
    // server: the one `cargo xtask ci` starts, unless IDEM_PG_URL names another.
    if only.is_none_or(|name| ["idem-http", "idem-store-postgres"].contains(&name.as_str())) {
        command.env("IDEM_PG_URL", crate::postgres_url()?);
    }
    // The Redis benches (idem-http's `http_pg` has a Redis row; idem-store-redis's
    // `floor`) need a Redis server: the one `.ci/redis.sh` starts, unless IDEM_REDIS_URL
    // names another.
    if only.is_none_or(|name| ["idem-http", "idem-store-redis"].contains(&name.as_str())) {
        command.env("IDEM_REDIS_URL", crate::redis_url()?);
    }
    run_step("bench", &mut command)?;
    let table = ratio_table(&collect(&criterion_dir)?);
    println!("\n{table}");
    if write {
        write_into_docs(&root.join("docs/benchmarks.md"), &table)?;
    }
    Ok(())
}

/// `[crate] [--write]`: whether to write the table, and the one crate to bench. Anything
/// else is refused before a bench starts (or `target/criterion` is cleared).
fn bench_args(args: &[String]) -> Result<(bool, Option<&String>)> {
    const USAGE: &str = "usage: cargo xtask bench [crate] [--write]";
    if let Some(bad) = args.iter().find(|a| a.starts_with('-') && *a != "--write") {
        return Err(format!("bench: unknown argument {bad:?}; valid: --write; {USAGE}"));
    }
    let named: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    let benched = crate::crates_with("benches")?;
    let only = match named.as_slice() {
        [] => None,
        [name] if benched.contains(name) => Some(*name),
        [name] => {
            let valid = benched.join(", ");
            return Err(format!("bench: no crate {name:?} has benches; valid: {valid}; {USAGE}"));
        }
        more => return Err(format!("bench: expected at most one crate, got {more:?}; {USAGE}")),
    };
    Ok((args.iter().any(|a| a == "--write"), only))
}

fn collect(dir: &Path) -> Result<Vec<Measure>> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(path) = stack.pop() {
        let Ok(entries) = fs::read_dir(&path) else { continue };
        for entry in entries.filter_map(|e| e.ok()) {
            let child = entry.path();
            if child.is_dir() {
                if child.ends_with("new") {
                    found.extend(read_measure(&child));
                } else {
                    stack.push(child);
                }
            }
        }
    }
    found.sort_by(|a, b| (&a.group, &a.function).cmp(&(&b.group, &b.function)));
    Ok(found)
}

fn read_json(path: PathBuf) -> Option<Value> {
    serde_json::from_str(&fs::read_to_string(path).ok()?).ok()
}

fn read_measure(new_dir: &Path) -> Option<Measure> {
    let bench = read_json(new_dir.join("benchmark.json"))?;
    let estimates = read_json(new_dir.join("estimates.json"))?;
    let group = bench["group_id"].as_str()?;
    let value = bench["value_str"].as_str().map(|v| format!("/{v}")).unwrap_or_default();
    Some(Measure {
        group: format!("{group}{value}"),
        function: bench["function_id"].as_str()?.to_string(),
        median_ns: estimates["median"]["point_estimate"].as_f64()?,
    })
}

fn ratio_table(measures: &[Measure]) -> String {
    let mut table = String::from(
        "| group | idem (ns) | baseline | baseline (ns) | ratio (baseline / idem) |\n\
         |---|---:|---|---:|---:|\n",
    );
    for idem in measures.iter().filter(|m| m.function == "idem") {
        for base in measures.iter().filter(|m| m.group == idem.group && m.function != "idem") {
            table.push_str(&format!(
                "| {} | {:.1} | {} | {:.1} | {:.2} |\n",
                idem.group,
                idem.median_ns,
                base.function,
                base.median_ns,
                base.median_ns / idem.median_ns
            ));
        }
    }
    table
}

fn write_into_docs(path: &Path, table: &str) -> Result {
    let text = fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let (Some(start), Some(end)) = (text.find(BEGIN), text.find(END)) else {
        return Err(format!("{} has no {BEGIN} ... {END} markers", path.display()));
    };
    let updated = format!("{}{BEGIN}\n{table}{}", &text[..start], &text[end..]);
    fs::write(path, updated).map_err(|e| format!("{}: {e}", path.display()))?;
    println!("xtask: wrote the table into {}", path.display());
    Ok(())
}
