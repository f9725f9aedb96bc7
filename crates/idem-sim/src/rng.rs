//! The world's randomness: one seeded generator per stream (the driver's faults, the
//! hosts' draws), so that the same seed draws the same numbers in the same order.

use std::time::Duration;

/// SplitMix64: small, fast, and every seed (0 included) gives a full-period stream.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// The stream for `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        let wide = u128::from(self.next_u64()) * u128::from(n);
        u64::try_from(wide >> 64).unwrap_or(0)
    }

    /// A number in `lo..=hi`.
    pub fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi.saturating_sub(lo) + 1)
    }

    /// True with probability `per_million` in a million.
    pub fn chance(&mut self, per_million: u32) -> bool {
        self.below(1_000_000) < u64::from(per_million)
    }

    /// A duration in `lo..=hi`, to the millisecond.
    pub fn duration(&mut self, lo: Duration, hi: Duration) -> Duration {
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        Duration::from_millis(self.between(ms(lo), ms(hi)))
    }

    /// A second, independent stream, drawn from this one.
    pub fn fork(&mut self) -> Rng {
        Rng(self.next_u64())
    }
}

#[cfg(test)]
mod tests {
    use super::Rng;

    #[test]
    fn the_same_seed_draws_the_same_numbers_and_below_stays_below() {
        let (mut a, mut b) = (Rng::new(7), Rng::new(7));
        let drawn: Vec<u64> = (0..100).map(|_| a.below(10)).collect();
        assert_eq!(drawn, (0..100).map(|_| b.below(10)).collect::<Vec<_>>());
        assert!(drawn.iter().all(|n| *n < 10));
        assert!((0..10).all(|n| drawn.contains(&n)), "every value is reachable: {drawn:?}");
        assert_ne!(Rng::new(8).next_u64(), Rng::new(7).next_u64());
    }
}
