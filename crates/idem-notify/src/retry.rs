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

/// What a seed of 0 (a state xorshift never leaves) is replaced by: far from the small
/// seeds a notifier gives its workers (the policy's seed plus the worker's number), so
/// that with a policy seed of 0 worker 0 does not draw worker 1's waits.
const ZERO_SEED_STANDS_FOR: u64 = 0x9e37_79b9_7f4a_7c15;

impl Jitter {
    /// A source seeded with `seed` (0, which xorshift cannot use, is replaced by a fixed
    /// odd constant).
    pub fn new(seed: u64) -> Self {
        Self(if seed == 0 { ZERO_SEED_STANDS_FOR } else { seed })
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

#[cfg(test)]
mod tests {
    use super::Jitter;

    /// A notifier seeds worker `i` with the policy's seed plus `i`: no two workers may draw
    /// the same waits, at the ends of the range either (0 and 1, `MAX` and 0 after the
    /// wrap, collided when 0 stood for 1).
    #[test]
    fn neighbouring_seeds_draw_different_waits() {
        for seed in [0, 1, u64::MAX - 1, u64::MAX] {
            let mut first = Jitter::new(seed);
            let mut next = Jitter::new(seed.wrapping_add(1));
            let mut last = Jitter::new(seed.wrapping_add(2));
            let draws = [first.next_u64(), next.next_u64(), last.next_u64()];
            assert!(draws[0] != draws[1] && draws[1] != draws[2], "seed {seed}: {draws:?}");
        }
    }
}
