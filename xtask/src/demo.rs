//! `cargo xtask demo`: the retry storm table.
//!
//! Each crate's `examples/retry_storm.rs` (target `retry_storm_<crate without idem->`)
//! prints a sentence for a person and, with `IDEM_DEMO_TABLE=1` (which this task sets; the
//! name is `idem_testkit::storm::TABLE_LINE_ENV`), one line for this table:
//! `retry_storm<TAB>scenario<TAB>intents<TAB>attempts<TAB>effects without idem<TAB>effects
//! with idem<TAB>what an effect is<TAB>what an attempt is<TAB>repeats<TAB>repeats answered
//! with the original`.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::{Result, cargo, crates_with};

struct Row {
    krate: String,
    scenario: String,
    intents: u64,
    attempts: u64,
    naive: u64,
    idem: u64,
    effect: String,
    attempt: String,
    /// With idem: answers after an intent's first, and those equal to the first.
    repeats: u64,
    same: u64,
}

/// The widest scenario the table shows without running into the next column.
pub(crate) const SCENARIO_WIDTH: usize = 36;

/// The crates whose storm can run on the durable SQLite store (`--durable`).
const DURABLE: &[&str] = &["idem-payments", "idem-notify"];

pub(crate) fn run(root: &Path, args: &[String]) -> Result {
    const USAGE: &str = "usage: cargo xtask demo [--durable] [--check N] [--only CRATE]";
    let durable = args.iter().any(|a| a == "--durable");
    let takes_value = |i: usize| i > 0 && matches!(args[i - 1].as_str(), "--check" | "--only");
    if let Some((_, bad)) = args.iter().enumerate().find(|(i, a)| {
        !matches!(a.as_str(), "--durable" | "--check" | "--only") && !takes_value(*i)
    }) {
        return Err(format!(
            "demo: unknown argument {bad:?}; valid: --durable, --check N, --only CRATE; {USAGE}"
        ));
    }
    let value = |flag: &str| args.iter().position(|a| a == flag).map(|at| args.get(at + 1));
    let rounds = match value("--check") {
        None => None,
        Some(n) => Some(
            n.and_then(|n| n.parse::<u32>().ok())
                .filter(|n| *n > 0)
                .ok_or(format!("demo: --check takes a number of rounds (at least 1); {USAGE}"))?,
        ),
    };
    let mut crates = crates_with("examples/retry_storm.rs")?;
    if crates.is_empty() {
        return Err("no crate has examples/retry_storm.rs".into());
    }
    // One storm alone (the mutation catalogue's entries each break one crate's).
    if let Some(only) = value("--only") {
        let only = only.ok_or(format!("demo: --only takes a crate; {USAGE}"))?;
        crates = one_storm(crates, only)?;
    }
    build(&crates)?;
    let mut rows = Vec::new();
    for round in 1..=rounds.unwrap_or(1) {
        rows.clear();
        for (done, name) in crates.iter().enumerate() {
            match rounds {
                Some(n) => println!(
                    "xtask: demo: round {round}/{n}, storm {}/{}: {name}",
                    done + 1,
                    crates.len()
                ),
                None => println!("xtask: demo: storm {}/{}: {name}", done + 1, crates.len()),
            }
            let row = parse(name, &output(name, &mut storm(root, name, durable))?)?;
            if rounds.is_some() {
                check(&row)?;
            }
            rows.push(row);
        }
    }
    print_table(&rows);
    if crates.iter().any(|c| c == "idem-payments") {
        println!("xtask: demo: the payments storm at retry rates 0% to 100%, for the plot");
        let mut rates = storm(root, "idem-payments", false);
        let points = crate::plot::parse(&output("idem-payments", rates.arg("--rates"))?)?;
        let path = crate::plot::draw(root, &points)?;
        println!("xtask: demo: plot of charges per intended payment: {}", path.display());
    }
    if let Some(n) = rounds {
        println!(
            "xtask: demo: {n} runs in a row, every storm showed its harm without idem and one \
             effect per intent with it (none for the pool), and every repeat answered with the \
             original"
        );
    }
    Ok(())
}

/// `name`'s storm alone, if `name` is among the crates with one.
fn one_storm(crates: Vec<String>, name: &str) -> Result<Vec<String>> {
    if !crates.iter().any(|c| c == name) {
        return Err(format!("demo: no storm in {name:?}; the storms: {crates:?}"));
    }
    Ok(vec![name.to_string()])
}

/// Builds every storm first, with cargo's own progress: a cold build takes minutes, and
/// each run after it is quiet.
fn build(crates: &[String]) -> Result {
    println!(
        "xtask: demo: building {} retry storms (release mode; a few minutes the first time)",
        crates.len()
    );
    crate::run("build", &mut build_command(crates))
}

/// `cargo build --release` of every storm in `crates`.
pub(crate) fn build_command(crates: &[String]) -> Command {
    let mut build = cargo();
    build.args(["build", "--release"]);
    for name in crates {
        build.args(["-p", name, "--example", &example(name)]);
    }
    build
}

/// Each crate names its example `retry_storm_<crate without idem->`, so that the
/// workspace's examples do not collide in target/.
pub(crate) fn example(name: &str) -> String {
    format!("retry_storm_{}", name.trim_start_matches("idem-"))
}

/// The built storm of `name`, run directly, from cargo's target directory
/// (`CARGO_TARGET_DIR` when it is set, as the mutation catalogue sets it).
fn storm(root: &Path, name: &str, durable: bool) -> Command {
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or(root.join("target"), |dir| root.join(dir));
    let mut command = Command::new(target.join("release/examples").join(example(name)));
    command.current_dir(root).env("IDEM_DEMO_TABLE", "1");
    if durable && DURABLE.contains(&name) {
        command.arg("--durable");
    }
    command
}

/// A row proves its mechanism when the storm retried, the harm shows without idem and is
/// absent with it: with idem exactly one effect per intent (none for the pool, whose
/// effect is a harm), without idem more than that.
fn check(row: &Row) -> Result {
    let harm_only = row.krate == "idem-pool";
    let expected = if harm_only { 0 } else { row.intents };
    if row.attempts <= row.intents {
        return Err(format!(
            "{}: {} {} for {} intents: the storm retried none of them",
            row.krate, row.attempts, row.attempt, row.intents
        ));
    }
    if row.idem != expected {
        return Err(format!(
            "{}: {} {} with idem, expected {expected}",
            row.krate, row.idem, row.effect
        ));
    }
    if row.repeats == 0 || row.same != row.repeats {
        return Err(format!(
            "{}: {} of {} repeats answered with the original with idem, expected all of them \
             (and at least one)",
            row.krate, row.same, row.repeats
        ));
    }
    if row.naive <= expected {
        return Err(format!(
            "{}: {} {} without idem: the storm did not show the harm (expected more than \
             {expected})",
            row.krate, row.naive, row.effect
        ));
    }
    Ok(())
}

/// The longest one storm may run (each takes seconds; a storm past this is stuck, as one
/// whose thread died while the others wait for it would be).
const STORM_TIME_MAX: Duration = Duration::from_secs(300);

fn output(name: &str, command: &mut Command) -> Result<String> {
    output_within(name, command, STORM_TIME_MAX)
}

/// `command`'s output if it succeeds within `limit`; killed past it, with an error that
/// says so.
fn output_within(name: &str, command: &mut Command, limit: Duration) -> Result<String> {
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = command.spawn().map_err(|e| format!("{name}: cannot start: {e}"))?;
    let started = Instant::now();
    while child.try_wait().map_err(|e| format!("{name}: cannot wait: {e}"))?.is_none() {
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("{name}: retry_storm ran past {limit:?} and was stopped"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().map_err(|e| format!("{name}: cannot read: {e}"))?;
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
    let [_, scenario, intents, attempts, naive, idem, effect, attempt, repeats, same] = fields[..]
    else {
        return Err(format!("{name}: expected 10 tab-separated fields: {line:?}"));
    };
    if scenario.chars().count() > SCENARIO_WIDTH {
        return Err(format!("{name}: scenario over {SCENARIO_WIDTH} characters: {scenario:?}"));
    }
    let number = |s: &str| s.parse::<u64>().map_err(|e| format!("{name}: {s:?}: {e}"));
    Ok(Row {
        krate: name.to_string(),
        scenario: scenario.to_string(),
        intents: number(intents)?,
        attempts: number(attempts)?,
        naive: number(naive)?,
        idem: number(idem)?,
        effect: effect.to_string(),
        attempt: attempt.to_string(),
        repeats: number(repeats)?,
        same: number(same)?,
    })
}

fn print_table(rows: &[Row]) {
    println!("\n{:<69}{:^23}  {:^19}  {:>13}", "", "effects", "per intent", "repeats");
    println!(
        "{:<14} {:<36} {:>7} {:>8}  {:>12} {:>9}  {:>9} {:>9}  {:>13}",
        "crate",
        "scenario",
        "intents",
        "attempts",
        "without idem",
        "with idem",
        "without",
        "with",
        "same/repeats"
    );
    for r in rows {
        let per = |n: u64| n as f64 / r.intents.max(1) as f64;
        println!(
            "{:<14} {:<36} {:>7} {:>8}  {:>12} {:>9}  {:>9.3} {:>9.3}  {:>13}",
            r.krate,
            r.scenario,
            r.intents,
            r.attempts,
            r.naive,
            r.idem,
            per(r.naive),
            per(r.idem),
            format!("{}/{}", r.same, r.repeats)
        );
    }
    println!("{}", wrap(&legend(rows), 100));
}

/// `text` with each line broken at spaces to at most `width` columns; continuation lines
/// keep the line's indentation plus two spaces.
fn wrap(text: &str, width: usize) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let indent = line.len() - line.trim_start().len();
        let mut current = String::new();
        for word in line.split_whitespace() {
            if !current.is_empty() && current.len() + 1 + word.len() > width {
                out.push_str(&current);
                out.push('\n');
                current = " ".repeat(indent + 2);
            } else if !current.is_empty() {
                current.push(' ');
            } else {
                current = " ".repeat(indent);
            }
            current.push_str(word);
        }
        out.push_str(&current);
        out.push('\n');
    }
    out
}

/// What each column and each row's effect means.
fn legend(rows: &[Row]) -> String {
    let mut text = String::from(
        "\nlegend: intents = operations meant to happen once; attempts = what the storm sent \
         (retries, redeliveries, double clicks included); effects = what happened, counted \
         without idem (the same code done naively) and with idem; per intent = effects / \
         intents. With idem every row shows 1.000, the pool 0.000 (its effect is a harm). \
         retried = sent once more (a retry of a timeout, a redelivery, a double click); \
         repeats = the answers idem gave after an intent's first, and same = those equal to \
         the first (the other half of the invariant: a repeat returns the original answer; \
         for the pool, a second release refused, the connection left where the first put \
         it, even when another borrower holds it by then).\n",
    );
    for r in rows {
        text.push_str(&format!("  {}: effect = {}; attempt = {}\n", r.krate, r.effect, r.attempt));
    }
    text.push_str(
        "  notify's naive effects exceed its attempts: a send that delivered and then timed \
         out is sent again by the naive retry (one attempt, two pings); payments' \
         attempts are idem's, with one retry after the storm of each intent left without an \
         answer (an attempt beside the one it repeats is refused, not answered).",
    );
    text
}

#[cfg(test)]
mod tests {
    use super::{Row, check};

    #[test]
    fn only_names_a_crate_with_a_storm() {
        let crates = vec!["idem-pool".to_string(), "idem-http".to_string()];
        assert_eq!(super::one_storm(crates.clone(), "idem-http"), Ok(vec!["idem-http".into()]));
        let unknown = super::one_storm(crates, "idem-nothing").expect_err("refused");
        assert!(unknown.contains("no storm in \"idem-nothing\"") && unknown.contains("idem-pool"));
        let args = ["--only".to_string()];
        let bare = super::run(&crate::root(), &args).expect_err("refused");
        assert!(bare.contains("--only takes a crate"), "{bare}");
    }

    fn row(krate: &str, naive: u64, idem: u64, repeats: u64, same: u64) -> Row {
        Row {
            krate: krate.into(),
            scenario: "a storm".into(),
            intents: 10,
            attempts: 13,
            naive,
            idem,
            effect: "effects".into(),
            attempt: "attempts".into(),
            repeats,
            same,
        }
    }

    #[test]
    fn a_row_proves_its_point_only_with_every_repeat_answered_the_same() {
        assert!(check(&row("idem-core", 13, 10, 3, 3)).is_ok());
        let other = check(&row("idem-core", 13, 10, 3, 2)).expect_err("a repeat answered anew");
        assert!(other.contains("2 of 3 repeats"), "{other}");
        assert!(check(&row("idem-core", 13, 10, 0, 0)).is_err(), "no repeat at all");
    }

    #[test]
    fn a_row_without_harm_or_with_a_second_effect_fails() {
        assert!(check(&row("idem-pool", 5, 0, 3, 3)).is_ok());
        let harmless = check(&row("idem-pool", 0, 0, 3, 3)).expect_err("no harm shown");
        assert!(harmless.contains("did not show the harm"), "{harmless}");
        assert!(check(&row("idem-pool", 5, 1, 3, 3)).is_err(), "a harm with idem");
        assert!(check(&row("idem-core", 10, 10, 3, 3)).is_err(), "naive as good as idem");
        assert!(check(&row("idem-core", 13, 11, 3, 3)).is_err(), "a second effect with idem");
    }

    #[test]
    fn a_storm_past_its_time_is_stopped_with_an_error() {
        let mut stuck = std::process::Command::new("sleep");
        stuck.arg("5");
        let limit = std::time::Duration::from_millis(200);
        let stopped = super::output_within("idem-pool", &mut stuck, limit).expect_err("stuck");
        assert!(stopped.contains("ran past 200ms"), "{stopped}");
        let mut quick = std::process::Command::new("echo");
        let said = super::output_within("idem-pool", quick.arg("a row"), limit).expect("ran");
        assert_eq!(said, "a row\n");
    }

    #[test]
    fn a_storm_that_retried_nothing_proves_nothing() {
        let unretried = Row { attempts: 10, ..row("idem-core", 13, 10, 3, 3) };
        let refused = check(&unretried).expect_err("no intent retried");
        assert!(refused.contains("retried none"), "{refused}");
    }
}
