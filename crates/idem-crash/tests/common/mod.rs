//! What the crash tests share: a scratch directory per test, the round count, a seeded
//! random stream, the tally of what the rounds saw, and a worker's acknowledgements.

#![allow(dead_code, reason = "each crash test uses part of it")]

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::Child;

use idem_crash::payments::parse_ack;

/// A directory of this test process's own, per test.
pub(crate) fn dir(test: &str) -> PathBuf {
    static ROOT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    let root = ROOT.get_or_init(|| idem_testkit::scratch_dir("crash"));
    let dir = root.join(test);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// Rounds to run: `IDEM_CRASH_ROUNDS`, else `default`.
pub(crate) fn rounds(default: u64) -> u64 {
    std::env::var("IDEM_CRASH_ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(default)
}

/// Prints a progress line after every tenth of `rounds` (seen with `--nocapture`, as
/// `cargo xtask crash` runs them): a long run shows it is moving.
pub(crate) fn progress(test: &str, done: u64, rounds: u64) {
    let step = (rounds / 10).max(1);
    if done.is_multiple_of(step) || done == rounds {
        println!("{test}: {done} of {rounds} rounds");
    }
}

/// xorshift64: the same crash plan for the same seed.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// What a crash test's rounds saw, counted by name, and printed as one summary line
/// (seen with `--nocapture`, as `cargo xtask crash` runs them). The names are fixed when
/// the tally is made, in the order the summary shows them, so a misspelt name is a
/// failed assertion, never a counter of its own.
#[derive(Debug)]
pub(crate) struct Tally {
    test: &'static str,
    counts: Vec<(&'static str, u64)>,
}

impl Tally {
    /// A tally for `test` with the counters `names`, each at 0.
    pub(crate) fn new(test: &'static str, names: &[&'static str]) -> Self {
        Self { test, counts: names.iter().map(|name| (*name, 0)).collect() }
    }

    /// Where the counter `name` is; a name the tally was not made with fails the test.
    fn at(&self, name: &str) -> usize {
        let at = self.counts.iter().position(|(n, _)| *n == name);
        at.unwrap_or_else(|| panic!("{}: no counter named {name:?}", self.test))
    }

    /// Adds `n` to the counter `name`.
    pub(crate) fn add(&mut self, name: &str, n: u64) {
        let at = self.at(name);
        self.counts[at].1 += n;
    }

    /// The counter `name`.
    pub(crate) fn get(&self, name: &str) -> u64 {
        self.counts[self.at(name)].1
    }

    /// One line: the test, then every counter with its name.
    pub(crate) fn summary(&self) -> String {
        let counts: Vec<String> = self.counts.iter().map(|(n, c)| format!("{c} {n}")).collect();
        format!("{}: {}", self.test, counts.join(", "))
    }

    /// Fails the test, with the summary, unless every counter in `names` is 0: the harms
    /// the rounds must never see.
    pub(crate) fn assert_none(&self, names: &[&str]) {
        let seen: Vec<&str> = names.iter().copied().filter(|n| self.get(n) > 0).collect();
        assert!(seen.is_empty(), "{seen:?} seen: {}", self.summary());
    }

    /// Fails the test, with the summary, unless every counter in `names` is above 0: what
    /// the rounds must have exercised for the test to mean anything.
    pub(crate) fn assert_some(&self, names: &[&str]) {
        let missing: Vec<&str> = names.iter().copied().filter(|n| self.get(n) == 0).collect();
        assert!(missing.is_empty(), "{missing:?} never seen: {}", self.summary());
    }
}

/// What a worker acknowledged (read from its stdout until it ends): intent to answer
/// (the charge's id, or the order's).
pub(crate) fn acks(child: &mut Child) -> HashMap<u64, u64> {
    let stdout = child.stdout.take().expect("piped");
    let lines = BufReader::new(stdout).lines().map_while(Result::ok);
    lines.filter_map(|l| parse_ack(&l)).map(|ack| (ack.intent, ack.charge)).collect()
}
