//! What the crash tests share: a scratch directory per test, the round count, a seeded
//! random stream.

#![allow(dead_code, reason = "each crash test uses part of it")]

use std::path::PathBuf;

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
