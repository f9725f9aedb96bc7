//! Project tasks, in Rust so they run wherever cargo does: `cargo xtask <task>`;
//! `cargo xtask --help` lists them and `cargo xtask <task> --help` explains one.
//!
//! * `demo [--durable] [--check N]`: every crate's `examples/retry_storm.rs`, in release
//!   mode, joined into one table with a legend, and an SVG plot of the payments storm.
//! * `study <crate>`: one crate alone: its storm, its tests, its loom models.
//! * `loom [crate]`: every loom model (`tests/loom.rs`) under `--cfg loom`.
//! * `bench [crate] [--write]`: the criterion benches and a ratio table against the anchors.
//! * `ci`: fmt check, clippy with warnings denied, tests (and the PostgreSQL store's tests
//!   against a server `.ci/postgres.sh` starts), docs with warnings denied, the demo
//!   checked ten times, loom.
//! * `miri`: idem-future (the crate with unsafe code) under Miri, where nightly has it.
//! * `crash [--rounds N]`: the payment and wallet crash tests (real processes killed,
//!   power loss simulated), N rounds.
//! * `mutants [name...]`: the mutation catalogue; every named break must be caught.

use std::env;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

mod bench;
mod cluster;
mod demo;
mod mutants;
mod plot;
mod sim;

type Result<T = ()> = std::result::Result<T, String>;

/// A task: its name, its usage line, one line for the list, and its longer help.
struct Task {
    name: &'static str,
    usage: &'static str,
    summary: &'static str,
    help: &'static str,
}

const TASKS: &[Task] = &[
    Task {
        name: "demo",
        usage: "demo [--durable] [--check N]",
        summary: "retry storm against every crate, one table, and an SVG plot",
        help: "Runs every crate's examples/retry_storm.rs in release mode (building them \
               first, with cargo's progress) and prints one table: side effects per \
               intended operation without idem and with it, with a legend.\n\
               --durable   the payment and notification storms on the SQLite store\n\
               --check N   run every storm N times; fail unless each shows its harm \
               without idem and exactly one effect per intent with it (ci runs 10)",
    },
    Task {
        name: "study",
        usage: "study <crate>",
        summary: "one crate alone: its example, its tests, its loom models",
        help: "Runs one crate's retry storm, then its tests, then its loom models (if it \
               has any), each under a heading: the way to learn one mechanism alone.",
    },
    Task {
        name: "loom",
        usage: "loom [crate]",
        summary: "every loom model, release mode, LOOM_MAX_PREEMPTIONS=3 by default",
        help: "Runs tests/loom.rs of every crate that has one (or of the one named) under \
               --cfg loom, in target/loom.",
    },
    Task {
        name: "bench",
        usage: "bench [crate] [--write]",
        summary: "criterion benches; ratio table (--write: docs/benchmarks.md)",
        help: "Runs the criterion benches (of one crate, if named) and prints each group's \
               ratios: baseline time / idem time.\n\
               --write   also write the table into docs/benchmarks.md",
    },
    Task {
        name: "ci",
        usage: "ci",
        summary: "fmt check, clippy -D warnings, tests, docs -D warnings, loom, mutants",
        help: "What CI runs after the README's test command: fmt, clippy, tests (with the \
               tracing feature too), the PostgreSQL tests (one server with a skewed clock), \
               docs, every loom model, then the whole mutation catalogue.",
    },
    Task {
        name: "miri",
        usage: "miri",
        summary: "idem-future's tests under Miri (needs nightly with miri; not part of ci)",
        help: "Runs idem-future's tests (the crate with unsafe code) under Miri.",
    },
    Task {
        name: "crash",
        usage: "crash [--rounds N]",
        summary: "payment and wallet crash tests: killed workers, power loss; N rounds",
        help: "Runs the payment and the wallet crash tests (real worker processes killed \
               at random points, power loss simulated) for N rounds each (default 1000).",
    },
    Task {
        name: "cluster",
        usage: "cluster [--servers N] [--intents M] [--seed S] [--short] [--naive]",
        summary: "N checkout servers on PostgreSQL behind haproxy, faults, checked from outside",
        help: "Starts the harness's PostgreSQL server (.ci/postgres-cluster.sh), a gateway \
               process, N checkout servers (default 3) behind fault proxies and haproxy \
               (.ci/haproxy.sh), pays M intents (default 2000) through haproxy while \
               servers are killed, the database restarted and links cut on a schedule \
               drawn from the seed, then checks from the gateway's log and the answers: \
               every intent charged exactly once.\n\
               --short     300 intents, a fault every 0.7 s (ci runs it)\n\
               --naive     the servers without the layer: the check must fail\n\
               --clients C, --rate R   client threads (16), intents started per second (25)\n\
               --no-run    build the binaries only",
    },
    Task {
        name: "sim",
        usage: "sim --seeds N [--from S] | --seed S | --reach [name...]",
        summary: "seeded worlds of the checkout (turmoil): faults at every step, checked",
        help: "Runs N simulated worlds (crates/idem-sim, release, on every core): servers \
               running the checkout example's layer and handler, clients retrying, one \
               gateway and one store, with crashes, partitions, held messages, store \
               faults and clock jumps drawn from each world's seed. Prints worlds, \
               simulated seconds, requests, faults by kind and wall time; a failing world \
               prints its seed and the command that replays it.\n\
               --seed S    one world, with its trace (the same seed, the same trace)\n\
               --from S    the first seed of --seeds (default 0)\n\
               --reach     apply each catalogue entry in the code the worlds run and \
               report the seeds it took to be found (1,000 at most)",
    },
    Task {
        name: "mutants",
        usage: "mutants [name...]",
        summary: "break the code on purpose, one named mutation at a time; all caught",
        help: "Applies each named mutation (all, if none is named) to a copy of the tree \
               and checks that its test fails.",
    },
];

fn main() -> ExitCode {
    let args: Vec<String> = env::args().skip(1).collect();
    let result = dispatch(&args);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask: {message}");
            ExitCode::FAILURE
        }
    }
}

fn dispatch(args: &[String]) -> Result {
    let Some(name) = args.first().map(String::as_str) else {
        println!("{}", usage());
        return Ok(());
    };
    if matches!(name, "--help" | "-h" | "help") {
        match args.get(1) {
            Some(task) => println!("{}", task_help(find(task)?)),
            None => println!("{}", usage()),
        }
        return Ok(());
    }
    let task = find(name)?;
    let rest = &args[1..];
    if rest.iter().any(|a| a == "--help" || a == "-h") {
        println!("{}", task_help(task));
        return Ok(());
    }
    match task.name {
        "demo" => demo::run(&root(), rest),
        "study" => study(rest),
        "loom" => loom(single(task, rest)?.as_deref()),
        "bench" => bench::run(&root(), rest),
        "ci" => flags(task, rest, &[]).and_then(|_| ci()),
        "miri" => flags(task, rest, &[]).and_then(|_| miri()),
        "crash" => crash(rest),
        "cluster" => cluster::cluster(rest),
        "sim" => sim::sim(rest),
        _ => mutants::run(rest),
    }
}

fn find(name: &str) -> Result<&'static Task> {
    TASKS.iter().find(|t| t.name == name).ok_or_else(|| {
        let names: Vec<&str> = TASKS.iter().map(|t| t.name).collect();
        format!("unknown task {name:?}; the tasks: {}\n\n{}", names.join(", "), usage())
    })
}

/// `args` when each is one of `allowed`; otherwise an error naming the first that is not.
fn flags(task: &Task, args: &[String], allowed: &[&str]) -> Result<Vec<String>> {
    match args.iter().find(|a| !allowed.contains(&a.as_str())) {
        None => Ok(args.to_vec()),
        Some(bad) if allowed.is_empty() => Err(format!(
            "{}: takes no arguments, got {bad:?}; usage: cargo xtask {}",
            task.name, task.usage
        )),
        Some(bad) => Err(format!(
            "{}: unknown argument {bad:?}; valid: {}; usage: cargo xtask {}",
            task.name,
            allowed.join(", "),
            task.usage
        )),
    }
}

/// At most one positional argument.
fn single(task: &Task, args: &[String]) -> Result<Option<String>> {
    match args {
        [] => Ok(None),
        [one] if !one.starts_with('-') => Ok(Some(one.clone())),
        other => Err(format!(
            "{}: expected at most one crate, got {other:?}; usage: cargo xtask {}",
            task.name, task.usage
        )),
    }
}

fn usage() -> String {
    let mut text = String::from("usage: cargo xtask <task> [--help]\n\ntasks:\n");
    for task in TASKS {
        text.push_str(&format!("  {:<26} {}\n", task.usage, task.summary));
    }
    text.push_str("\n`cargo xtask <task> --help` explains one task.");
    text
}

fn task_help(task: &Task) -> String {
    format!("usage: cargo xtask {}\n\n{}", task.usage, task.help.replace("  ", " "))
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

/// The workspace's crates (folders under `crates/`) that have the file or folder `relative`.
fn crates_with(relative: &str) -> Result<Vec<String>> {
    let dir = root().join("crates");
    let entries = std::fs::read_dir(&dir).map_err(|e| format!("reading {}: {e}", dir.display()))?;
    let mut names: Vec<String> = entries
        .filter_map(|entry| entry.ok())
        .filter(|entry| entry.path().join(relative).exists())
        .filter_map(|entry| entry.file_name().into_string().ok())
        .collect();
    names.sort();
    Ok(names)
}

fn loom(only: Option<&str>) -> Result {
    let crates = crates_with("tests/loom.rs")?;
    let selected: Vec<&String> = crates.iter().filter(|c| only.is_none_or(|o| o == *c)).collect();
    if selected.is_empty() {
        let name = only.unwrap_or_default();
        return Err(format!(
            "loom: no crate {name:?} has tests/loom.rs; valid: {}",
            crates.join(", ")
        ));
    }
    let total = selected.len();
    for (done, name) in selected.into_iter().enumerate() {
        println!("xtask: loom {}/{total}: {name}", done + 1);
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

/// The steps that need a PostgreSQL server: the store's suite (with the clock-skewed
/// server), the crash tests on PostgreSQL, and last, alone, the restart under a live store.
fn postgres_steps() -> Result {
    let url = postgres_url()?;
    let skewed = skewed_postgres_url()?;
    run(
        "postgres",
        cargo()
            .args(["test", "-p", "idem-store-postgres", "--features", "server-tests"])
            .args(["--test", "postgres"])
            .env("IDEM_PG_URL", &url)
            .env("IDEM_PG_SKEWED_URL", &skewed)
            .env("IDEM_PGBOUNCER_URL", pgbouncer_url()?)
            .env("IDEM_PGBOUNCER_IGNORING_URL", pgbouncer_ignoring_url()?),
    )?;
    run(
        "postgres crash",
        cargo()
            .args(["test", "-p", "idem-crash", "--features", "postgres", "--test", "payments_pg"])
            .args(["--test", "orders_pg"])
            .env("IDEM_PG_URL", &url),
    )?;
    run(
        "checkout on postgres",
        cargo()
            .args([
                "test",
                "-p",
                "idem-http",
                "--features",
                "server-tests",
                "--test",
                "checkout_pg",
            ])
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
    Ok(())
}

/// The Redis store's suite: on the server `.ci/redis.sh` starts, and on the servers the
/// tests start themselves from the same binary.
fn redis_steps() -> Result {
    let url = redis_url()?;
    run(
        "redis",
        cargo()
            .args(["test", "-p", "idem-store-redis", "--features", "server-tests"])
            .args(["--test", "redis"])
            .env("IDEM_REDIS_URL", &url),
    )
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
    // Every crate's feature on in one build, and every test of each binary beside the
    // tracing ones: a collector that misses events another thread's test registered
    // first fails here, where one crate filtered to its tracing tests would hide it.
    // idem-http's `metrics` feature too: its counters reach a recorder, checked the same way.
    let traced = ["idem-core", "idem-payments", "idem-pool", "idem-wallet", "idem-http"];
    let mut features: Vec<String> = traced.iter().map(|k| format!("{k}/tracing")).collect();
    features.push("idem-http/metrics".into());
    let mut tracing = cargo();
    tracing.arg("test");
    for krate in traced {
        tracing.args(["-p", krate]);
    }
    run("tracing", tracing.args(["--features", &features.join(","), "--test", "it"]))?;
    postgres_steps()?;
    redis_steps()?;
    // The deployment: servers on one PostgreSQL behind haproxy, with faults (a short run).
    cluster::cluster(&["--short".to_string()])?;
    // The same deployment on Redis (the harness starts its own server, restarts it).
    cluster::cluster(&["--short", "--store", "redis"].map(String::from))?;
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
    run("demo", cargo().args(["xtask", "demo", "--check", "10"]))?;
    // The simulated deployment: seeded worlds with faults at every step.
    sim::sim(&["--seeds".to_string(), sim::CI_SEEDS.to_string()])?;
    loom(None)?;
    // Last: every break in the catalogue must still be caught, so none of it rots.
    mutants::run(&[])
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
/// Runs `cargo xtask study <crate>`: the crate's storm, tests and loom models, in order.
fn study(args: &[String]) -> Result {
    let crates = crates_with("Cargo.toml")?;
    let valid = crates.iter().filter(|c| *c != "idem-crash").cloned().collect::<Vec<_>>();
    let valid_list = valid.join(", ");
    let name = match args {
        [name] if valid.contains(name) => name,
        [name] if name == "idem-crash" => {
            return Err(format!(
                "study: idem-crash is test support, not a problem crate: run its crash tests \
                 with `cargo xtask crash`; valid: {valid_list}"
            ));
        }
        [name] => return Err(format!("study: no crate {name:?}; valid: {valid_list}")),
        [] => return Err(format!("study: expected one crate, got nothing; valid: {valid_list}")),
        more => {
            return Err(format!("study: expected one crate, got {more:?}; valid: {valid_list}"));
        }
    };
    let steps = 2 + usize::from(root().join("crates").join(name).join("tests/loom.rs").is_file());
    println!("\n== 1/{steps} {name}: its retry storm (examples/retry_storm.rs)\n");
    if root().join("crates").join(name).join("examples/retry_storm.rs").is_file() {
        // Built as the demo builds every storm: after the demo, nothing is rebuilt (one
        // crate built alone resolves its dependencies' features apart, and rebuilds them).
        run("storm build", &mut demo::build_command(&crates_with("examples/retry_storm.rs")?))?;
        let storm = root().join("target/release/examples").join(demo::example(name));
        run("storm", Command::new(storm).current_dir(root()))?;
    } else {
        println!("({name} has no storm of its own: it is used by the crates that have one)");
    }
    println!("\n== 2/{steps} {name}: its tests\n");
    study_tests(name)?;
    if steps == 3 {
        println!("\n== 3/{steps} {name}: its loom models\n");
        loom(Some(name))?;
    }
    println!("\n{name}: studied. Its README and docs page explain what you just ran.");
    Ok(())
}

/// Runs `name`'s test binaries as `cargo test --workspace` built them (after it, nothing is
/// rebuilt). Its doctests are left to `cargo test --doc -p <name>`, named at the end: built
/// for one crate, they would rebuild its dependencies.
fn study_tests(name: &str) -> Result {
    let built = cargo()
        .args(["test", "--workspace", "--no-run", "--message-format=json-render-diagnostics"])
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| format!("tests: cannot start cargo: {e}"))?;
    if !built.status.success() {
        return Err(format!("tests: the workspace's tests do not build ({})", built.status));
    }
    let mut binaries = Vec::new();
    for line in String::from_utf8_lossy(&built.stdout).lines() {
        let Ok(message) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        let of_name = message["target"]["src_path"]
            .as_str()
            .is_some_and(|p| Path::new(p).starts_with(root().join("crates").join(name)));
        if of_name
            && message["profile"]["test"] == true
            && let Some(exe) = message["executable"].as_str()
        {
            binaries.push(exe.to_string());
        }
    }
    for exe in &binaries {
        run("tests", Command::new(exe).current_dir(root().join("crates").join(name)))?;
    }
    println!(
        "xtask: tests: {} test binaries of {name} passed; its doctests (the examples in its \
         docs) run with `cargo test --workspace` or `cargo test --doc -p {name}`",
        binaries.len()
    );
    Ok(())
}

fn crash(args: &[String]) -> Result {
    let rounds = match args {
        [] => "1000".to_string(),
        [flag, n] if flag == "--rounds" && n.parse::<u64>().is_ok() => n.clone(),
        other => {
            return Err(format!(
                "crash: expected nothing or `--rounds N` with N a whole number, got {other:?}; \
                 usage: cargo xtask crash [--rounds N]"
            ));
        }
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

/// The Redis server for the Redis store's tests and benches: `IDEM_REDIS_URL` if set, else
/// the one `.ci/redis.sh` starts (installing it from Debian's packages if needed).
fn redis_url() -> Result<String> {
    server_url("IDEM_REDIS_URL", ".ci/redis.sh", "redis://")
}

/// The PostgreSQL server for the PostgreSQL store's tests: `IDEM_PG_URL` if set, else the
/// one `.ci/postgres.sh` starts (installing it from Debian's packages if needed).
fn postgres_url() -> Result<String> {
    server_url("IDEM_PG_URL", ".ci/postgres.sh", "postgres://")
}

/// pgbouncer in transaction pooling mode in front of the PostgreSQL server
/// (`.ci/pgbouncer.sh`), which the store must refuse at connect.
fn pgbouncer_url() -> Result<String> {
    server_url("IDEM_PGBOUNCER_URL", ".ci/pgbouncer.sh", "postgres://")
}

/// pgbouncer told to ignore startup options (`.ci/pgbouncer-ignoring.sh`), which drops
/// the store's statement timeout: the store must notice and refuse.
fn pgbouncer_ignoring_url() -> Result<String> {
    server_url("IDEM_PGBOUNCER_IGNORING_URL", ".ci/pgbouncer-ignoring.sh", "postgres://")
}

/// The cluster harness's own PostgreSQL server (`.ci/postgres-cluster.sh`), which it
/// restarts on purpose.
fn cluster_postgres_url() -> Result<String> {
    server_url("IDEM_CLUSTER_PG_URL", ".ci/postgres-cluster.sh", "postgres://")
}

/// A second PostgreSQL server whose clock runs ahead (`.ci/postgres-skewed.sh`).
fn skewed_postgres_url() -> Result<String> {
    server_url("IDEM_PG_SKEWED_URL", ".ci/postgres-skewed.sh", "postgres://")
}

/// The URL in `var`, or else the last line of what `script` prints once it has started
/// the server (it must start with `scheme`).
fn server_url(var: &str, script: &str, scheme: &str) -> Result<String> {
    if let Ok(url) = env::var(var) {
        return Ok(url);
    }
    println!("xtask: {var}: {}", root().join(script).display());
    let url = script_output(script).map_err(|why| format!("{var}: {why}"))?;
    if url.starts_with(scheme) { Ok(url) } else { Err(format!("{var}: no URL from {script}")) }
}

/// The last line `script` (relative to the root) prints, once it has succeeded.
fn script_output(script: &str) -> Result<String> {
    let path = root().join(script);
    let out = Command::new(&path)
        .output()
        .map_err(|e| format!("cannot start {}: {e}", path.display()))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        return Err(format!("{} failed:\n{stderr}", path.display()));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    Ok(stdout.lines().last().unwrap_or_default().trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::dispatch;

    fn refused(args: &[&str]) -> String {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        dispatch(&args).expect_err("refused before anything runs")
    }

    /// A bad argument is refused by name before a bench starts or `target/criterion` is
    /// cleared, and `study` says what it got.
    #[test]
    fn bad_arguments_are_refused_naming_what_was_given() {
        assert!(refused(&["bench", "--bogus"]).contains("\"--bogus\""));
        assert!(refused(&["bench", "no-such-crate"]).contains("no crate \"no-such-crate\""));
        assert!(refused(&["study", "idem-pool", "extra"]).contains("[\"idem-pool\", \"extra\"]"));
        assert!(refused(&["study", "idem-crash"]).contains("cargo xtask crash"));
        assert!(refused(&["ci", "--now"]).contains("\"--now\""));
    }
}
