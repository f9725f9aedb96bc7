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
    // The criterion benches by name: `--benches` would also start the instruction-count
    // benches, which run again below with their output read.
    for name in criterion_benches(&root.join("crates"), only)? {
        command.args(["--bench", &name]);
    }
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
    // The instruction-count benches (`benches/instructions.rs`) run under gungraun, whose
    // runner binary must be installed at the library's version; they run after criterion's
    // benches, once.
    let counted: Vec<String> = crate::crates_with("benches/instructions.rs")?
        .into_iter()
        .filter(|name| only.is_none_or(|o| o == name))
        .collect();
    let runner = if counted.is_empty() { None } else { Some(gungraun_runner(root)?) };
    if let Some(runner) = &runner {
        command.env("GUNGRAUN_RUNNER", runner);
    }
    run_step("bench", &mut command)?;
    let mut table = ratio_table(&collect(&criterion_dir)?);
    if let Some(runner) = &runner {
        table.push('\n');
        table.push_str(&count_table(&instruction_counts(runner, &counted)?));
    }
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
    let rows: Vec<Row> =
        measures.iter().map(|m| (m.group.as_str(), m.function.as_str(), m.median_ns)).collect();
    let header = "| group | idem (ns) | baseline | baseline (ns) | ratio (baseline / idem) |";
    ratios(header, &rows, |ns| format!("{ns:.1}"))
}

/// One measure: its group (or bench), its function (or case), its value.
type Row<'a> = (&'a str, &'a str, f64);

/// A table of every baseline beside the `idem` row of its group: both values, shown by
/// `show`, and their ratio (baseline / idem).
fn ratios(header: &str, rows: &[Row], show: fn(f64) -> String) -> String {
    let mut table = format!("{header}\n|---|---:|---|---:|---:|\n");
    for (group, _, idem) in rows.iter().filter(|(_, function, _)| *function == "idem") {
        for (_, base, value) in rows.iter().filter(|(g, f, _)| g == group && *f != "idem") {
            table.push_str(&format!(
                "| {group} | {} | {base} | {} | {:.2} |\n",
                show(*idem),
                show(*value),
                value / idem
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

/// The gungraun library's version, as Cargo.lock holds it: its runner must be the same
/// (a test checks the two agree).
const GUNGRAUN_VERSION: &str = "0.20.0";

/// One instruction count: a benchmark function's case (`idem` or an anchor).
#[derive(Debug, PartialEq, Eq)]
struct Count {
    bench: String,
    case: String,
    instructions: u64,
}

/// The `gungraun-runner` binary of [`GUNGRAUN_VERSION`], installed under
/// `target/gungraun/` on first use; valgrind must be on the PATH.
fn gungraun_runner(root: &Path) -> Result<PathBuf> {
    let valgrind = std::process::Command::new("valgrind").arg("--version").output();
    if !valgrind.is_ok_and(|out| out.status.success()) {
        return Err("bench: the instruction counts need valgrind on the PATH (Debian: \
                    apt-get install valgrind)"
            .into());
    }
    let prefix = root.join("target/gungraun").join(GUNGRAUN_VERSION);
    let runner = prefix.join("bin/gungraun-runner");
    if !runner.exists() {
        let mut install = cargo();
        install.args(["install", "--locked", "--version", GUNGRAUN_VERSION, "--root"]);
        install.arg(&prefix).arg("gungraun-runner");
        run_step("install gungraun-runner", &mut install)?;
    }
    Ok(runner)
}

/// Runs each crate's `instructions` bench and reads its counts.
fn instruction_counts(runner: &Path, crates: &[String]) -> Result<Vec<Count>> {
    let mut counts = Vec::new();
    for name in crates {
        let out = cargo()
            .args(["bench", "-p", name, "--bench", "instructions"])
            .env("GUNGRAUN_RUNNER", runner)
            .output()
            .map_err(|e| format!("cannot start cargo bench: {e}"))?;
        let text = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            let why = String::from_utf8_lossy(&out.stderr);
            return Err(format!("bench: {name}'s instruction counts failed:\n{text}{why}"));
        }
        counts.extend(parse_counts(&text));
    }
    Ok(counts)
}

/// Reads gungraun's report: a line `<bench path>::<function> <case>:(<args>)` and, below
/// it, `Instructions: <count>|<previous count>`.
fn parse_counts(report: &str) -> Vec<Count> {
    let mut counts = Vec::new();
    let mut current: Option<(String, String)> = None;
    for line in report.lines() {
        if let Some(rest) = line.trim().strip_prefix("Instructions:") {
            let number = rest.trim().split('|').next().unwrap_or("").trim();
            if let (Some((bench, case)), Ok(instructions)) = (current.take(), number.parse()) {
                counts.push(Count { bench, case, instructions });
            }
        } else if !line.starts_with(' ')
            && let Some((path, case)) = line.split_once(' ')
            && let Some((case, _args)) = case.split_once(':')
            && let Some((_, function)) = path.rsplit_once("::")
        {
            current = Some((function.to_string(), case.to_string()));
        }
    }
    counts
}

fn count_table(counts: &[Count]) -> String {
    let rows: Vec<Row> =
        counts.iter().map(|c| (c.bench.as_str(), c.case.as_str(), c.instructions as f64)).collect();
    let header = "| bench | idem (instructions) | baseline | baseline (instructions) \
                  | ratio (baseline / idem) |";
    ratios(header, &rows, |count| format!("{count}"))
}

/// The bench targets of the crates (or of `only`) but the instruction-count ones, from
/// each manifest's `[[bench]]` sections, sorted and once each.
fn criterion_benches(crates: &Path, only: Option<&String>) -> Result<Vec<String>> {
    let mut names = Vec::new();
    for name in crate::crates_with("benches")? {
        if only.is_some_and(|o| *o != name) {
            continue;
        }
        let manifest = crates.join(&name).join("Cargo.toml");
        let text = fs::read_to_string(&manifest)
            .map_err(|e| format!("bench: reading {}: {e}", manifest.display()))?;
        names.extend(bench_names(&text).into_iter().filter(|b| b != "instructions"));
    }
    names.sort();
    names.dedup();
    Ok(names)
}

/// The `name` of each `[[bench]]` section of a manifest.
fn bench_names(manifest: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut in_bench = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_bench = line == "[[bench]]";
        } else if in_bench && let Some(value) = line.strip_prefix("name") {
            let value = value.trim_start().trim_start_matches('=').trim().trim_matches('"');
            names.push(value.to_string());
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_read_from_gungraun_s_report() {
        let report = "instructions::future::await_ready idem:(Impl :: Idem)\n  \
                      Instructions:      353156|N/A     (*********)\n  L1 Hits: 5|N/A\n\
                      instructions::future::await_ready oneshot:(Impl :: Oneshot)\n  \
                      Instructions:      222030|221023  (+0.4%)\n";
        let counts = parse_counts(report);
        let expect = |case: &str, instructions| Count {
            bench: "await_ready".into(),
            case: case.into(),
            instructions,
        };
        assert_eq!(counts, vec![expect("idem", 353_156), expect("oneshot", 222_030)]);
        let table = count_table(&counts);
        assert!(table.contains("| await_ready | 353156 | oneshot | 222030 | 0.63 |"), "{table}");
    }

    #[test]
    fn criterion_runs_every_bench_but_the_instruction_counts() {
        let manifest = "[package]\nname = \"idem-x\"\n\n[[bench]]\nname = \"store\"\n\
                        harness = false\n\n[[bench]]\nname = \"instructions\"\n\
                        harness = false\n\n[[example]]\nname = \"storm\"\n";
        assert_eq!(bench_names(manifest), ["store", "instructions"]);
        let names = criterion_benches(&crate::root().join("crates"), None).expect("manifests");
        assert!(names.contains(&"promise".to_string()), "{names:?}");
        assert!(!names.contains(&"instructions".to_string()), "{names:?}");
    }

    #[test]
    fn the_runner_s_version_is_the_library_s() {
        let lock = fs::read_to_string(crate::root().join("Cargo.lock")).expect("Cargo.lock");
        let entry = format!("name = \"gungraun\"\nversion = \"{GUNGRAUN_VERSION}\"");
        assert!(lock.contains(&entry), "Cargo.lock's gungraun is not {GUNGRAUN_VERSION}");
    }
}
