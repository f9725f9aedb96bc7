//! Retry policy: exponential backoff with full jitter, from a seedable source.

use std::time::Duration;

/// How transient failures are retried: attempt `n` (from 0) waits a uniformly random
/// time in `[0, min(cap, base * 2^n)]` ("full jitter"), and a message gets at most
/// `attempts_max` attempts before it is dead-lettered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// The first backoff's upper bound; default 100 ms.
    pub base: Duration,
    /// The largest backoff; default 10 s.
    pub cap: Duration,
    /// Attempts per message, the first included; default 5.
    pub attempts_max: u32,
    /// The jitter source's seed (tests fix it); default 1.
    pub seed: u64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            base: Duration::from_millis(100),
            cap: Duration::from_secs(10),
            attempts_max: 5,
            seed: 1,
        }
    }
}

impl RetryPolicy {
    /// The upper bound of the wait after attempt `attempt` (0-based) failed.
    pub fn bound(&self, attempt: u32) -> Duration {
        let factor = 1u32.checked_shl(attempt.min(31)).unwrap_or(u32::MAX);
        self.base.saturating_mul(factor).min(self.cap)
    }

    /// The wait after attempt `attempt` failed, drawn from `jitter`.
    pub fn delay(&self, attempt: u32, jitter: &mut Jitter) -> Duration {
        let bound = u64::try_from(self.bound(attempt).as_nanos()).unwrap_or(u64::MAX);
        Duration::from_nanos(jitter.next_u64() % bound.saturating_add(1))
    }
}

/// A small deterministic random source (xorshift64*), so tests can replay a schedule.
#[derive(Debug, Clone)]
pub struct Jitter(u64);

impl Jitter {
    /// A source seeded with `seed` (0 is replaced by 1).
    pub fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }

    /// The next value.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// How a worker waits between attempts: really, or (in tests) by recording the wait.
pub trait Sleeper: Send + Sync + 'static {
    /// Waits `duration`.
    fn sleep(&self, duration: Duration);
}

/// Sleeps the thread.
#[derive(Debug, Clone, Copy, Default)]
pub struct ThreadSleeper;

impl Sleeper for ThreadSleeper {
    fn sleep(&self, duration: Duration) {
        std::thread::sleep(duration);
    }
}
