//! Tidy: the rules `docs/ARCHITECTURE.md` and the house style state, checked by ordinary
//! tests so that they stay true. Each rule is a function from a file's path and text to
//! its violations (`path:line: rule: what`), run over the tree by one `#[test]`, and run
//! once more over a planted violation by `each_rule_catches_a_planted_violation`, so a
//! rule that can no longer fail is noticed.
//!
//! Allow-lists name each exception and why; they are short on purpose.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The longest line, in columns (rustfmt's `max_width`).
const LINE_COLUMNS_MAX: usize = 100;
/// The longest function, in lines from `fn` to its closing brace.
const FUNCTION_LINES_MAX: usize = 70;

/// Lines that may run past [`LINE_COLUMNS_MAX`]: (path, why).
const LONG_LINE_ALLOWED: &[(&str, &str)] = &[];

/// Files under `tests/` that may sleep and read real time: (path, why).
const REAL_TIME_ALLOWED: &[(&str, &str)] = &[
    ("crates/idem-crash/tests/payments.rs", "places a SIGKILL at a random instant"),
    ("crates/idem-crash/tests/payments_pg.rs", "places a SIGKILL at a random instant"),
    ("crates/idem-crash/tests/orders_pg.rs", "places a SIGKILL at a random instant"),
    ("crates/idem-crash/tests/wallet.rs", "places a SIGKILL at a random instant"),
    ("crates/idem-testkit/src/lib.rs", "wait_until: a bounded poll; it moves no clock"),
    ("crates/idem-testkit/src/bench.rs", "the benches' timing harness: timing is its job"),
    ("crates/idem-testkit/src/block_on.rs", "TokioTimer reads tokio's clock, paused or not"),
    ("crates/idem-http/tests/it/runs.rs", "the store reads tokio's paused clock: no real time"),
    ("crates/idem-client/tests/policy.rs", "tokio's paused clock: no real time passes"),
    (
        "crates/idem-crash/src/gateway_http.rs",
        "a gateway process told to be slow sleeps, as a slow gateway takes time",
    ),
    (
        "crates/idem-testkit/src/conformance.rs",
        "a waiter is given 20 ms to reach its wait: a suite for any store cannot see it \
         waiting; only the answer is checked, never the time",
    ),
];

/// The crates that solve a problem: none may depend on another.
const PROBLEM_CRATES: &[&str] =
    &["idem-payments", "idem-wallet", "idem-pool", "idem-future", "idem-notify"];

type Violations = Vec<String>;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask sits in the root").to_path_buf()
}

/// Every file under `dir` (relative to the root) whose name ends with one of `exts`,
/// skipping build output and version control.
fn files(dir: &str, exts: &[&str]) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![root().join(dir)];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                if !matches!(name.as_str(), "target" | ".git" | "proptest-regressions") {
                    stack.push(path);
                }
            } else if exts.iter().any(|ext| name.ends_with(ext)) {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

fn relative(path: &Path) -> String {
    path.strip_prefix(root()).unwrap_or(path).to_string_lossy().replace('\\', "/")
}

/// Runs `rule` over `paths` and fails with every violation found.
#[track_caller]
fn check(paths: &[PathBuf], rule: fn(&str, &str) -> Violations) {
    let mut violations = Vec::new();
    for path in paths {
        let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        violations.extend(rule(&relative(path), &text));
    }
    assert!(violations.is_empty(), "tidy found:\n{}", violations.join("\n"));
}

fn rust_files() -> Vec<PathBuf> {
    let mut paths = files("crates", &[".rs"]);
    paths.extend(files("xtask", &[".rs"]));
    paths
}

fn allowed(list: &[(&str, &str)], path: &str) -> bool {
    list.iter().any(|(allowed, _why)| *allowed == path)
}

// ---- rule: line length ----------------------------------------------------------------

fn long_lines(path: &str, text: &str) -> Violations {
    if allowed(LONG_LINE_ALLOWED, path) {
        return Vec::new();
    }
    let mut found = Vec::new();
    for (i, line) in text.lines().enumerate() {
        // Markdown tables cannot wrap; every other line can.
        let table_row = path.ends_with(".md") && line.trim_start().starts_with('|');
        let columns = line.chars().count();
        if columns > LINE_COLUMNS_MAX && !table_row {
            found.push(format!("{path}:{}: line length: {columns} columns", i + 1));
        }
    }
    found
}

#[test]
fn lines_are_at_most_100_columns() {
    let mut paths = rust_files();
    paths.extend(files("docs", &[".md"]));
    paths.extend(files("crates", &[".md", ".toml"]));
    paths.extend(files(".ci", &[""]));
    paths.push(root().join("README.md"));
    paths.push(root().join("Cargo.toml"));
    check(&paths, long_lines);
}

// ---- rule: function length ------------------------------------------------------------

/// Whether `line` (trimmed) opens a function definition.
fn opens_fn(trimmed: &str) -> bool {
    let mut rest = trimmed;
    for prefix in ["pub(crate) ", "pub(super) ", "pub ", "const ", "async ", "unsafe "] {
        rest = rest.strip_prefix(prefix).unwrap_or(rest);
    }
    rest.starts_with("fn ")
}

fn long_functions(path: &str, text: &str) -> Violations {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    for (start, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        if !opens_fn(trimmed) {
            continue;
        }
        let indent = &line[..line.len() - trimmed.len()];
        // A declaration without a body (a trait method) ends with `;` before any `{`.
        let Some(open) = lines[start..].iter().position(|l| l.contains('{') || l.ends_with(';'))
        else {
            continue;
        };
        if !lines[start + open].contains('{') || lines[start + open].trim_end().ends_with('}') {
            continue;
        }
        let close = format!("{indent}}}");
        let Some(end) = lines[start..].iter().position(|l| l.trim_end() == close) else {
            continue;
        };
        let length = end + 1;
        if length > FUNCTION_LINES_MAX {
            let name = trimmed.split('(').next().unwrap_or(trimmed);
            found
                .push(format!("{path}:{}: function length: `{name}` is {length} lines", start + 1));
        }
    }
    found
}

#[test]
fn functions_are_at_most_70_lines() {
    check(&rust_files(), long_functions);
}

// ---- rule: the sync shim --------------------------------------------------------------

/// What only a crate's `sync` module may name, in the crates that have one.
const SYNC_NAMES: &[&str] =
    &["std::sync", "parking_lot", "std::thread", "core::sync", "loom::", "thread::spawn"];

fn outside_sync_shim(path: &str, text: &str) -> Violations {
    let in_shimmed_src = path.contains("/src/") && !path.ends_with("/src/sync.rs");
    let crate_dir = path.split("/src/").next().unwrap_or_default();
    if !in_shimmed_src || !root().join(crate_dir).join("src/sync.rs").exists() {
        return Vec::new();
    }
    code_naming(path, text, SYNC_NAMES, "sync shim: outside sync.rs, names")
}

/// Each line of code (not a comment: doc examples are the user's code, not the crate's)
/// that contains one of `names`, as a violation of `rule`.
fn code_naming(path: &str, text: &str, names: &[&str], rule: &str) -> Violations {
    let mut found = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let code = line.trim_start();
        if code.starts_with("//") {
            continue;
        }
        if let Some(name) = names.iter().find(|name| code.contains(*name)) {
            found.push(format!("{path}:{}: {rule} `{name}`", i + 1));
        }
    }
    found
}

#[test]
fn only_the_sync_module_names_locks_atomics_and_threads() {
    check(&files("crates", &[".rs"]), outside_sync_shim);
}

// ---- rule: tests move no real time ----------------------------------------------------

const REAL_TIME: &[&str] = &["thread::sleep", "Instant::now", ".elapsed()", "Instant"];

/// The crates whose `src/` is test support, held to the tests' rule.
const TEST_SUPPORT: &[&str] = &["crates/idem-testkit/src/", "crates/idem-crash/src/"];

fn real_time_in_tests(path: &str, text: &str) -> Violations {
    let test_code = path.contains("/tests/") || TEST_SUPPORT.iter().any(|s| path.starts_with(s));
    if !test_code || allowed(REAL_TIME_ALLOWED, path) {
        return Vec::new();
    }
    code_naming(path, text, REAL_TIME, "real time in a test:")
}

#[test]
fn tests_neither_sleep_nor_time_themselves() {
    check(&files("crates", &[".rs"]), real_time_in_tests);
}

// ---- rule: the code map ---------------------------------------------------------------

/// The source files `docs/ARCHITECTURE.md`'s code map names: `crates/<name>` or `xtask/`
/// opens a crate, and each backticked `*.rs` on the bullets under it is a file in its
/// `src/`.
fn code_map(architecture: &str) -> BTreeSet<String> {
    let section = architecture.split("## Code map").nth(1).unwrap_or_default();
    let section = section.split("\n## ").next().unwrap_or_default();
    let mut named = BTreeSet::new();
    let mut krate = String::new();
    for line in section.lines() {
        let ticked = line.split('`').skip(1).step_by(2);
        if let Some(top) = line.strip_prefix("- `") {
            krate = top.split('`').next().unwrap_or_default().trim_end_matches('/').to_string();
            continue;
        }
        for name in ticked.filter(|t| t.ends_with(".rs")) {
            named.insert(format!("{krate}/src/{name}"));
        }
    }
    named
}

fn code_map_mismatches(architecture: &str, sources: &BTreeSet<String>) -> Violations {
    let named = code_map(architecture);
    let unnamed = sources.difference(&named).map(|p| format!("{p}: code map: not named"));
    let missing = named.difference(sources).map(|p| format!("{p}: code map: no such file"));
    unnamed.chain(missing).collect()
}

#[test]
fn the_code_map_names_every_source_file_and_nothing_else() {
    let architecture =
        fs::read_to_string(root().join("docs/ARCHITECTURE.md")).expect("docs/ARCHITECTURE.md");
    let mut sources: BTreeSet<String> =
        files("crates", &[".rs"]).iter().map(|p| relative(p)).collect();
    sources.extend(files("xtask", &[".rs"]).iter().map(|p| relative(p)));
    sources.retain(|p| p.contains("/src/") && !p.ends_with("/src/lib.rs"));
    let violations = code_map_mismatches(&architecture, &sources);
    assert!(violations.is_empty(), "tidy found:\n{}", violations.join("\n"));
}

// ---- rule: problem crates stand alone -------------------------------------------------

/// `(package, dependency)` pairs from `cargo metadata`'s JSON where both are problem
/// crates.
fn sibling_dependencies(metadata: &serde_json::Value) -> Violations {
    let mut found = Vec::new();
    for package in metadata["packages"].as_array().into_iter().flatten() {
        let name = package["name"].as_str().unwrap_or_default();
        if !PROBLEM_CRATES.contains(&name) {
            continue;
        }
        for dependency in package["dependencies"].as_array().into_iter().flatten() {
            let dependency = dependency["name"].as_str().unwrap_or_default();
            if PROBLEM_CRATES.contains(&dependency) {
                found.push(format!("crates/{name}/Cargo.toml: depends on {dependency}"));
            }
        }
    }
    found
}

/// The crates that may use idem-durable: those that keep state on disk, those whose
/// results a durable store keeps (they implement its `Durable`), and the simulation,
/// whose seam measures a result as a durable store would write it.
const DURABLE_USERS: &[&str] = &[
    "idem-wallet",
    "idem-store-sqlite",
    "idem-store-postgres",
    "idem-store-redis",
    "idem-payments",
    "idem-notify",
    "idem-http",
    "idem-sim",
];

/// Normal (not dev) dependencies that break the layers: idem-testkit is for tests,
/// examples and benches only; idem-durable for the crates that keep state on disk.
fn layer_dependencies(metadata: &serde_json::Value) -> Violations {
    let mut found = Vec::new();
    for package in metadata["packages"].as_array().into_iter().flatten() {
        let name = package["name"].as_str().unwrap_or_default();
        for dependency in package["dependencies"].as_array().into_iter().flatten() {
            if dependency["kind"].as_str() == Some("dev") {
                continue;
            }
            let on = dependency["name"].as_str().unwrap_or_default();
            let wrong = match on {
                "idem-testkit" => true,
                "idem-durable" => !DURABLE_USERS.contains(&name),
                _ => false,
            };
            if wrong {
                found.push(format!("crates/{name}/Cargo.toml: a normal dependency on {on}"));
            }
        }
    }
    found
}

fn metadata() -> serde_json::Value {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline"])
        .current_dir(root())
        .output()
        .expect("cargo metadata runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).expect("JSON")
}

#[test]
fn no_problem_crate_depends_on_another() {
    let violations = sibling_dependencies(&metadata());
    assert!(violations.is_empty(), "tidy found:\n{}", violations.join("\n"));
}

#[test]
fn test_support_and_durable_parts_are_used_only_where_they_belong() {
    let violations = layer_dependencies(&metadata());
    assert!(violations.is_empty(), "tidy found:\n{}", violations.join("\n"));
}

// ---- rule: docs render ----------------------------------------------------------------

/// The text of a Mermaid statement that is shown to the reader: after the first `:`.
fn mermaid_label(line: &str) -> Option<&str> {
    let (_, label) = line.split_once(':')?;
    Some(label)
}

fn broken_docs(path: &str, text: &str) -> Violations {
    let mut found = Vec::new();
    let mut in_mermaid = false;
    let mut in_code = false;
    for (i, line) in text.lines().enumerate() {
        let at = format!("{path}:{}", i + 1);
        let fence = line.trim_start().starts_with("```");
        if fence {
            in_mermaid = !in_code && line.trim_start().starts_with("```mermaid");
            in_code = !in_code;
            continue;
        }
        if in_mermaid {
            let label = mermaid_label(line).unwrap_or_default();
            let without_breaks = label.replace("<br/>", "").replace("<br>", "");
            if label.contains(';') {
                found.push(format!("{at}: mermaid: `;` in a label ends the statement"));
            }
            if without_breaks.contains('<') || without_breaks.contains('>') {
                found.push(format!("{at}: mermaid: raw `<` or `>` in a label"));
            }
        } else if !in_code {
            found.extend(broken_links(path, line).into_iter().map(|l| format!("{at}: {l}")));
        }
    }
    found
}

/// Links in one markdown line to files that do not exist (relative to the doc).
fn broken_links(path: &str, line: &str) -> Violations {
    let dir = root().join(path).parent().map(Path::to_path_buf).unwrap_or_default();
    let mut found = Vec::new();
    for piece in line.split("](").skip(1) {
        let target = piece.split(')').next().unwrap_or_default();
        let target = target.split('#').next().unwrap_or_default();
        let external = ["http://", "https://", "mailto:"].iter().any(|s| target.starts_with(s));
        if target.is_empty() || external {
            continue;
        }
        if !dir.join(target).exists() {
            found.push(format!("link: `{target}` does not exist"));
        }
    }
    found
}

#[test]
fn docs_render_and_their_links_resolve() {
    let mut paths = files("docs", &[".md"]);
    paths.extend(files("crates", &[".md"]));
    paths.push(root().join("README.md"));
    check(&paths, broken_docs);
}

// ---- rule: no placeholders ------------------------------------------------------------

/// Built from parts, so that this file does not match itself.
fn placeholders() -> [String; 4] {
    [
        ["to", "do!("].concat(),
        ["unimple", "mented!("].concat(),
        ["db", "g!("].concat(),
        ["#[ig", "nore"].concat(),
    ]
}

fn placeholders_in(path: &str, text: &str) -> Violations {
    let mut found = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if let Some(p) = placeholders().iter().find(|p| line.contains(p.as_str())) {
            found.push(format!("{path}:{}: placeholder: `{p}`", i + 1));
        }
    }
    found
}

#[test]
fn no_placeholders_or_ignored_tests() {
    check(&rust_files(), placeholders_in);
}

// ---- rule: errors and result codes can grow ---------------------------------------------

/// A public enum named `...Error` or `...Result` in a library's `src/` must carry
/// `#[non_exhaustive]` among the attributes above it, so that a new error or result code is
/// not a breaking change (the Rust API Guidelines' future-proofing).
fn exhaustive_errors(path: &str, text: &str) -> Violations {
    if !path.contains("/src/") || path.starts_with("xtask/") {
        return Vec::new();
    }
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(rest) = line.trim_start().strip_prefix("pub enum ") else { continue };
        let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        if !(name.ends_with("Error") || name.ends_with("Result")) {
            continue;
        }
        let attributes = lines[..i].iter().rev().take_while(|l| {
            let l = l.trim_start();
            l.starts_with("#[") || l.starts_with("///")
        });
        if !attributes.into_iter().any(|l| l.trim() == "#[non_exhaustive]") {
            found.push(format!(
                "{path}:{}: exhaustive error: `{name}` lacks #[non_exhaustive]",
                i + 1
            ));
        }
    }
    found
}

#[test]
fn public_errors_and_result_codes_are_non_exhaustive() {
    check(&rust_files(), exhaustive_errors);
}

// ---- every rule can fail --------------------------------------------------------------

// ---- rule: no store result is thrown away ---------------------------------------------

/// The store calls whose result says whether a key is still held.
const STORE_CALLS: &[&str] = &[".complete(", ".release(", ".claim(", ".claim_wait("];

/// A `let _ =` on a store call in a library crate: a refused completion or release would
/// leave its key in flight and nobody would know. Each must be counted and traced.
fn discarded_store_results(path: &str, text: &str) -> Violations {
    if !path.contains("/src/") || path.contains("/testkit") {
        return Vec::new();
    }
    let mut found = Vec::new();
    let mut lines = text.lines().enumerate().peekable();
    while let Some((i, line)) = lines.next() {
        let code = line.trim_start();
        if !code.starts_with("let _ =") {
            continue;
        }
        // The call may sit on the next line, as rustfmt breaks a long statement.
        let next = lines.peek().map_or("", |(_, l)| l);
        let statement =
            if code.ends_with(';') { code.to_string() } else { format!("{code}{next}") };
        if STORE_CALLS.iter().any(|call| statement.contains(call)) {
            found.push(format!("{path}:{}: a store call's result is thrown away", i + 1));
        }
    }
    found
}

#[test]
fn no_library_throws_a_store_result_away() {
    check(&files("crates", &[".rs"]), discarded_store_results);
}

// ---- rule: unsafe code, and the argument beside each unsafe block and atomic ordering --

/// The files that may hold unsafe code: idem-future's write-once slot and idem-pool's shelf.
const UNSAFE_ALLOWED: [&str; 2] =
    ["crates/idem-future/src/cell.rs", "crates/idem-pool/src/shelf.rs"];
/// How many lines above an `unsafe` block or an atomic ordering its comment may sit.
const ARGUMENT_REACH: usize = 8;

/// Whether one of the `reach` lines before line `i` (or line `i` itself) holds `mark`.
fn argued(lines: &[&str], i: usize, reach: usize, mark: &str) -> bool {
    lines[i.saturating_sub(reach)..=i].iter().any(|line| line.contains(mark))
}

/// Unsafe code outside [`UNSAFE_ALLOWED`] (or an allow of it anywhere else), an `unsafe`
/// block or impl without a `// SAFETY:` comment above it, and an atomic ordering in a
/// library without an `// ORDERING:` argument near it.
fn unargued(path: &str, text: &str) -> Violations {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    let in_src = path.contains("/src/") && !path.starts_with("xtask/");
    for (i, line) in lines.iter().enumerate() {
        let code = line.trim_start();
        if code.starts_with("//") {
            continue;
        }
        let at = |what: &str| format!("{path}:{}: {what}", i + 1);
        let is_unsafe = code.contains("unsafe {") || code.contains("unsafe impl");
        if (is_unsafe || code.contains("unsafe fn") || code.contains("allow(unsafe_code)"))
            && !UNSAFE_ALLOWED.contains(&path)
        {
            found.push(at(&format!("unsafe code outside {}", UNSAFE_ALLOWED.join(", "))));
        }
        if is_unsafe && !argued(&lines, i, ARGUMENT_REACH, "SAFETY:") {
            found.push(at("an unsafe block without a `// SAFETY:` comment above it"));
        }
        let ordering = ["Relaxed", "Acquire", "Release", "AcqRel", "SeqCst"]
            .iter()
            .any(|o| code.contains(&format!("Ordering::{o}")));
        if in_src && ordering && !argued(&lines, i, ARGUMENT_REACH, "ORDERING:") {
            found.push(at("an atomic ordering without an `// ORDERING:` argument near it"));
        }
    }
    found
}

#[test]
fn unsafe_code_and_atomic_orderings_are_argued_where_they_are() {
    check(&files("crates", &[".rs"]), unargued);
}

// ---- rule: no test-only functions in a library ---------------------------------------

/// A hidden public function for tests: a library's API holds nothing only tests use.
fn test_only_functions(path: &str, text: &str) -> Violations {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let code = line.trim_start();
        let hidden = i > 0 && lines[i - 1].trim_start().starts_with("#[doc(hidden)]");
        if code.starts_with("pub fn") && (code.contains("_for_tests") || hidden) {
            found.push(format!("{path}:{}: a hidden or test-only public function", i + 1));
        }
    }
    found
}

#[test]
fn no_library_has_a_hidden_function_for_tests() {
    check(&files("crates", &[".rs"]), test_only_functions);
}

// ---- rule: each crate opens with its guarantee and an example -------------------------

fn crate_docs(path: &str, text: &str) -> Violations {
    if !path.ends_with("/src/lib.rs") {
        return Vec::new();
    }
    ["//! # Guarantee", "//! # Examples"]
        .iter()
        .filter(|section| !text.lines().any(|line| line.trim_end() == **section))
        .map(|section| format!("{path}: the crate docs have no `{}` section", &section[4..]))
        .collect()
}

#[test]
fn every_crate_opens_with_its_guarantee_and_an_example() {
    check(&files("crates", &[".rs"]), crate_docs);
}

// ---- rule: allow-lists hold only what is still needed ---------------------------------

#[test]
fn every_allow_list_entry_is_still_needed() {
    let mut stale = Vec::new();
    for (path, why) in REAL_TIME_ALLOWED {
        let text = fs::read_to_string(root().join(path)).unwrap_or_default();
        if code_naming(path, &text, REAL_TIME, "").is_empty() {
            stale.push(format!("{path}: allowed real time ({why}), but it uses none"));
        }
    }
    for (path, why) in LONG_LINE_ALLOWED {
        let text = fs::read_to_string(root().join(path)).unwrap_or_default();
        if text.lines().all(|line| line.chars().count() <= LINE_COLUMNS_MAX) {
            stale.push(format!("{path}: allowed long lines ({why}), but has none"));
        }
    }
    assert!(stale.is_empty(), "stale allow-list entries:\n{}", stale.join("\n"));
}

// ---- rule: retired names stay retired --------------------------------------------------

/// Names the glossary (docs/ARCHITECTURE.md) retired, and why: (text, why).
const RETIRED: &[(&str, &str)] = &[
    ("struct Shared<", "four types had this name: say what it is (SharedFuture keeps the word)"),
    ("struct Shared {", "four types had this name: say what it is (SharedFuture keeps the word)"),
    ("TransferLog", "the wallet's transfers live in a TransferArena; log means the WAL"),
    ("fn detach(", "sqlx's detach takes a connection out of its pool: the pool's is into_loan"),
    ("dummy_key", "a made-up key in a report hides what failed: report it as what it is"),
];
/// A type the store's claim owns the name of (`idem_core::Lease`); elsewhere, a loan.
const LEASE_TYPES: &[&str] = &["struct Lease", "enum Lease", "type Lease "];

fn retired_names(path: &str, text: &str) -> Violations {
    let mut found = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let code = line.trim_start();
        if code.starts_with("//") {
            continue;
        }
        for (name, why) in RETIRED {
            if code.contains(name) {
                found.push(format!("{path}:{}: retired name `{name}`: {why}", i + 1));
            }
        }
        if !path.starts_with("crates/idem-core/") && LEASE_TYPES.iter().any(|t| code.contains(t)) {
            found.push(format!("{path}:{}: `Lease` is idem-core's claim; name this a loan", i + 1));
        }
    }
    found
}

#[test]
fn retired_names_stay_retired() {
    let mut paths = files("crates", &[".rs"]);
    paths.retain(|p| !relative(p).starts_with("xtask/"));
    check(&paths, retired_names);
}

// ---- rule: docs speak of the code, not of the project's bookkeeping -------------------

/// Words that point a reader at what they do not have: an issue tracker, a stop's notes.
fn bookkeeping(path: &str, text: &str) -> Violations {
    let mut found = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let lower = line.to_lowercase();
        let issue_number = lower.match_indices("issue ").any(|(at, m)| {
            lower[at + m.len()..].chars().next().is_some_and(|c| c.is_ascii_digit())
        });
        if issue_number || lower.contains("closing note") || lower.contains("before the fix") {
            found
                .push(format!("{path}:{}: cites an issue or a note; say what was measured", i + 1));
        }
    }
    found
}

#[test]
fn docs_cite_no_issue_numbers_or_notes() {
    let mut paths = files("docs", &[".md"]);
    paths.extend(files("crates", &[".md"]));
    paths.extend(files("crates", &[".rs"]).into_iter().filter(|p| relative(p).contains("/src/")));
    paths.push(root().join("README.md"));
    check(&paths, bookkeeping);
}

#[test]
fn each_rule_catches_a_planted_violation() {
    let cited = "Measured in issue 18.\nSee the closing note.\nAn issue with it: none.\n";
    assert_eq!(bookkeeping("docs/x.md", cited).len(), 2, "bookkeeping");
    let old = "pub(crate) struct Shared<P, S> {\npub struct Lease {\n    fn detach(self) {}\n";
    assert_eq!(retired_names("crates/idem-pool/src/x.rs", old).len(), 3, "retired names");
    let core = "pub struct Lease {\n";
    assert!(retired_names("crates/idem-core/src/store.rs", core).is_empty(), "core's Lease");
    let planted = "fn f() {\n    #![allow(unsafe_code)]\n    unsafe { g() }\n}\n";
    assert_eq!(unargued("crates/idem-notify/src/retry.rs", planted).len(), 3, "unsafe");
    let argued_block = "    // SAFETY: g needs nothing.\n    unsafe { g() }\n";
    assert!(unargued(UNSAFE_ALLOWED[0], argued_block).is_empty(), "argued unsafe in cell.rs");
    let ordering = "    n.fetch_add(1, Ordering::Relaxed);\n";
    assert_eq!(unargued("crates/a/src/x.rs", ordering).len(), 1, "ordering");
    let hidden = "#[doc(hidden)]\npub fn set_version(v: i64) {}\npub fn x_for_tests() {}\n";
    assert_eq!(test_only_functions("crates/a/src/x.rs", hidden).len(), 2, "test-only");
    let bare = "//! A crate.\n//!\n//! # Examples\n";
    assert_eq!(crate_docs("crates/a/src/lib.rs", bare).len(), 1, "crate docs");
    let dropped = "    let _ = self.store.complete(&lease, stored);\n";
    assert_eq!(discarded_store_results("crates/a/src/x.rs", dropped).len(), 1, "store result");
    let broken = "    let _ =\n        store.release(&lease);\n";
    assert_eq!(discarded_store_results("crates/a/src/x.rs", broken).len(), 1, "two lines");
    let wide = format!("// {}\n", "x".repeat(LINE_COLUMNS_MAX));
    assert_eq!(long_lines("crates/a/src/x.rs", &wide).len(), 1, "line length");
    let body = "    let x = 1;\n".repeat(FUNCTION_LINES_MAX);
    let long = format!("pub(crate) fn f() {{\n{body}}}\n");
    assert_eq!(long_functions("crates/a/src/x.rs", &long).len(), 1, "function length");
    let short = format!("fn f() {{\n{}}}\n", "    let x = 1;\n".repeat(FUNCTION_LINES_MAX - 2));
    assert!(long_functions("crates/a/src/x.rs", &short).is_empty(), "70 lines are fine");
    let locked = "use parking_lot::Mutex;\n";
    assert_eq!(outside_sync_shim("crates/idem-pool/src/pool.rs", locked).len(), 1, "sync");
    assert!(outside_sync_shim("crates/idem-pool/src/sync.rs", locked).is_empty(), "sync.rs");
    let sleeps = "    std::thread::sleep(d);\n";
    assert_eq!(real_time_in_tests("crates/a/tests/it/x.rs", sleeps).len(), 1, "real time");
    let support = "crates/idem-testkit/src/x.rs";
    assert_eq!(real_time_in_tests(support, sleeps).len(), 1, "real time in test support");
    let map = "## Code map\n\n- `crates/a`: a.\n  - `x.rs`: x.\n";
    let sources: BTreeSet<String> = ["crates/a/src/y.rs".to_string()].into();
    assert_eq!(code_map_mismatches(map, &sources).len(), 2, "code map, both ways");
    let metadata = serde_json::json!({"packages": [
        {"name": "idem-wallet", "dependencies": [{"name": "idem-pool"}]}
    ]});
    assert_eq!(sibling_dependencies(&metadata).len(), 1, "sibling dependency");
    let layers = serde_json::json!({"packages": [
        {"name": "idem-pool", "dependencies": [
            {"name": "idem-testkit", "kind": null}, {"name": "idem-durable", "kind": null},
            {"name": "idem-testkit", "kind": "dev"}]},
        {"name": "idem-wallet", "dependencies": [{"name": "idem-durable", "kind": null}]}
    ]});
    assert_eq!(layer_dependencies(&layers).len(), 2, "testkit and durable layers");
    let diagram = "```mermaid\nsequenceDiagram\n    A->>B: a; b\n    A->>B: x <y>\n```\n";
    assert_eq!(broken_docs("docs/x.md", diagram).len(), 2, "mermaid");
    assert_eq!(broken_docs("docs/x.md", "see [it](nowhere.md)\n").len(), 1, "link");
    let placeholder = format!("    {}\n", placeholders()[0]);
    assert_eq!(placeholders_in("crates/a/src/x.rs", &placeholder).len(), 1, "placeholder");
    let closed = "/// Why.\n#[derive(Debug)]\npub enum ReadError {\n    A,\n}\n";
    assert_eq!(exhaustive_errors("crates/a/src/x.rs", closed).len(), 1, "non_exhaustive");
    let open = closed.replace("#[derive(Debug)]", "#[derive(Debug)]\n#[non_exhaustive]");
    assert!(exhaustive_errors("crates/a/src/x.rs", &open).is_empty(), "non_exhaustive ok");
}
