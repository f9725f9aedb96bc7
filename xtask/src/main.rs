//! Project tasks, in Rust so they run wherever cargo does: `cargo xtask <task>`.
//!
//! * `demo`: every crate's `examples/retry_storm.rs`, in release mode, joined into one
//!   table of intents, attempts and side effects, naive and idempotent.
//! * `loom [crate]`: every loom model (`tests/loom.rs`) under `--cfg loom`.
//! * `bench [crate] [--write]`: the criterion benches and a ratio table against the anchors.
//! * `ci`: fmt check, clippy with warnings denied, tests (and the PostgreSQL store's tests
//!   against a server `.ci/postgres.sh` starts), docs with warnings denied, loom.
//! * `miri`: idem-future (the crate with unsafe code) under Miri, where nightly has it.
//! * `crash [--rounds N]`: the payment and wallet crash tests (real processes killed,
//!   power loss simulated), N rounds.
//! * `mutants [name...]`: the mutation catalogue; every named break must be caught.

use std::env;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

mod bench;
mod demo;
mod mutants;

type Result<T = ()> = std::result::Result<T, String>;

const TASKS: &[(&str, &str)] = &[
    ("demo [--durable]", "retry storm against every crate, one table (--durable: SQLite store)"),
    ("loom [crate]", "every loom model, release mode, LOOM_MAX_PREEMPTIONS=3 by default"),
    ("bench [crate] [--write]", "criterion benches; ratio table (--write: docs/benchmarks.md)"),
    ("ci", "fmt check, clippy -D warnings, tests, docs -D warnings, loom"),
    ("miri", "idem-future's tests under Miri (needs nightly with miri; not part of ci)"),
    (
        "crash [--rounds N]",
        "payment and wallet crash tests: killed workers, power loss; N rounds (default 1000)",
    ),
    ("mutants [name...]", "break the code on purpose, one named mutation at a time; all caught"),
];

fn main() -> ExitCode {
    let args: Vec<String> = env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("demo") => demo::run(&root(), &args[1..]),
        Some("loom") => loom(args.get(1).map(String::as_str)),
        Some("bench") => bench::run(&root(), &args[1..]),
        Some("ci") => ci(),
        Some("miri") => miri(),
        Some("crash") => crash(&args[1..]),
        Some("mutants") => mutants::run(&args[1..]),
        Some(other) => Err(format!("unknown task {other:?}\n{}", usage())),
        None => {
            println!("{}", usage());
            Ok(())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask: {message}");
            ExitCode::FAILURE
        }
    }
}

fn usage() -> String {
    let mut text = String::from("usage: cargo xtask <task>\n\ntasks:\n");
    for (name, what) in TASKS {
        text.push_str(&format!("  {name:<26} {what}\n"));
    }
    text
}

/// The workspace root: xtask lives one level below it.
fn root() -> PathBuf {
    let manifest = env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into());
    Path::new(&manifest).parent().map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

fn cargo() -> Command {
    let mut command = Command::new(env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    command.current_dir(root());
    command
}

/// Runs `command`, echoing it first; a non-zero exit is an error naming the step.
fn run(step: &str, command: &mut Command) -> Result {
    println!("xtask: {step}: {command:?}");
    let status = command.status().map_err(|e| format!("{step}: cannot start: {e}"))?;
    if status.success() { Ok(()) } else { Err(format!("{step} failed ({status})")) }
}

/// The workspace's crates (folders under `crates/`) that have the file `relative`.
fn crates_with(relative: &str) -> Result<Vec<String>> {
    let dir = root().join("crates");
    let entries = std::fs::read_dir(&dir).map_err(|e| format!("reading {}: {e}", dir.display()))?;
    let mut names: Vec<String> = entries
        .filter_map(|entry| entry.ok())
        .filter(|entry| entry.path().join(relative).is_file())
        .filter_map(|entry| entry.file_name().into_string().ok())
        .collect();
    names.sort();
    Ok(names)
}

fn loom(only: Option<&str>) -> Result {
    let crates = crates_with("tests/loom.rs")?;
    let selected: Vec<&String> = crates.iter().filter(|c| only.is_none_or(|o| o == *c)).collect();
    if selected.is_empty() {
        return Err(format!(
            "no crate {only:?} with tests/loom.rs; crates with models: {crates:?}"
        ));
    }
    for name in selected {
        let mut command = cargo();
        command
            .args([
                "test",
                "--release",
                "--target-dir",
                "target/loom",
                "-p",
                name,
                "--test",
                "loom",
            ])
            .env("RUSTFLAGS", "--cfg loom")
            .env("LOOM_MAX_PREEMPTIONS", env::var("LOOM_MAX_PREEMPTIONS").unwrap_or("3".into()));
        run(&format!("loom {name}"), &mut command)?;
    }
    Ok(())
}

fn ci() -> Result {
    run("fmt", cargo().args(["fmt", "--all", "--", "--check"]))?;
    run(
        "clippy",
        cargo().args([
            "clippy",
            "--workspace",
            "--all-targets",
            "--all-features",
            "--",
            "-D",
            "warnings",
        ]),
    )?;
    run("test", cargo().args(["test", "--workspace"]))?;
    // The `tracing` feature, off above: what each crate reports, checked by a collector.
    for krate in ["idem-core", "idem-payments", "idem-pool", "idem-wallet"] {
        run(
            &format!("tracing {krate}"),
            cargo()
                .args(["test", "-p", krate, "--features", "tracing", "--test", "it"])
                .args(["tracing::"]),
        )?;
    }
    let url = postgres_url()?;
    run(
        "postgres",
        cargo()
            .args(["test", "-p", "idem-store-postgres", "--features", "server-tests"])
            .args(["--test", "postgres"])
            .env("IDEM_PG_URL", &url),
    )?;
    run(
        "postgres crash",
        cargo()
            .args(["test", "-p", "idem-crash", "--features", "postgres", "--test", "payments_pg"])
            .env("IDEM_PG_URL", &url),
    )?;
    // Last, alone: it restarts the server under a live store.
    run(
        "postgres restart",
        cargo()
            .args(["test", "-p", "idem-store-postgres", "--features", "server-tests"])
            .args(["--test", "postgres_restart"])
            .env("IDEM_PG_URL", &url),
    )?;
    // Default features and all features: a link that resolves only with a feature on
    // is caught by the first.
    run(
        "doc (default features)",
        cargo().args(["doc", "--workspace", "--no-deps"]).env("RUSTDOCFLAGS", "-D warnings"),
    )?;
    run(
        "doc (all features)",
        cargo()
            .args(["doc", "--workspace", "--no-deps", "--all-features"])
            .env("RUSTDOCFLAGS", "-D warnings"),
    )?;
    loom(None)
}

/// Runs the crate with unsafe code under Miri. Skips the proptest model (real threads in
/// many cases, hours under Miri); every other test runs.
fn miri() -> Result {
    // `+nightly` needs the rustup proxy, not the cargo binary that runs xtask.
    let mut command = Command::new("rustup");
    command.current_dir(root());
    run(
        "miri",
        command
            .args(["run", "nightly", "cargo", "miri", "test", "-p", "idem-future", "--test", "it"])
            .args(["--", "--skip", "model::"])
            .env("MIRIFLAGS", "-Zmiri-disable-isolation -Zmiri-permissive-provenance"),
    )
}

/// Runs the payment and wallet crash tests in release mode, `--rounds N` rounds each
/// (default 1000).
fn crash(args: &[String]) -> Result {
    let rounds = match args {
        [] => "1000".to_string(),
        [flag, n] if flag == "--rounds" && n.parse::<u64>().is_ok() => n.clone(),
        other => return Err(format!("usage: cargo xtask crash [--rounds N], got {other:?}")),
    };
    for test in ["payments", "wallet"] {
        let mut command = cargo();
        command
            .args(["test", "--release", "-p", "idem-crash", "--test", test, "--", "--nocapture"])
            .env("IDEM_CRASH_ROUNDS", &rounds);
        run(&format!("crash {test}"), &mut command)?;
    }
    Ok(())
}

/// The PostgreSQL server for the PostgreSQL store's tests: `IDEM_PG_URL` if set, else the
/// one `.ci/postgres.sh` starts (installing it from Debian's packages if needed).
fn postgres_url() -> Result<String> {
    if let Ok(url) = env::var("IDEM_PG_URL") {
        return Ok(url);
    }
    let script = root().join(".ci/postgres.sh");
    println!("xtask: postgres: {}", script.display());
    let out = Command::new(&script)
        .output()
        .map_err(|e| format!("postgres: cannot start {}: {e}", script.display()))?;
    if !out.status.success() {
        return Err(format!(
            "postgres: {} failed:\n{}",
            script.display(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let url =
        String::from_utf8_lossy(&out.stdout).lines().last().unwrap_or_default().trim().to_string();
    if url.starts_with("postgres://") {
        Ok(url)
    } else {
        Err(format!("postgres: no URL from {}", script.display()))
    }
}
