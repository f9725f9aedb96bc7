//! Time as the store sees it: milliseconds since the Unix epoch, read from a [`Clock`].
//!
//! Every time rule (lease expiry, result expiry) reads the clock it was given, so tests
//! move a [`ManualClock`] instead of sleeping.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::sync::{AtomicU64, Ordering};

/// A point in time: whole milliseconds since the Unix epoch. Wall-clock based, because
/// durable stores keep deadlines across restarts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Timestamp(u64);

impl Timestamp {
    /// The epoch itself.
    pub const ZERO: Self = Self(0);

    /// A timestamp `ms` milliseconds after the epoch.
    pub const fn from_millis(ms: u64) -> Self {
        Self(ms)
    }

    /// Milliseconds since the epoch.
    pub const fn as_millis(self) -> u64 {
        self.0
    }

    /// `self + duration`, saturating at the far future instead of overflowing.
    pub fn saturating_add(self, duration: Duration) -> Self {
        Self(self.0.saturating_add(millis_saturating(duration)))
    }

    /// How long from `earlier` to `self`; zero if `earlier` is later.
    pub fn saturating_duration_since(self, earlier: Self) -> Duration {
        Duration::from_millis(self.0.saturating_sub(earlier.0))
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}ms", self.0)
    }
}

/// A duration in whole milliseconds, saturating at `u64::MAX`.
pub(crate) fn millis_saturating(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// A source of the current time.
pub trait Clock: Send + Sync + fmt::Debug {
    /// The current time.
    fn now(&self) -> Timestamp;
}

/// The operating system's wall clock.
///
/// ```
/// use idem_core::{Clock, SystemClock, Timestamp};
///
/// assert!(SystemClock.now() > Timestamp::from_millis(1_600_000_000_000));
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        // A clock set before 1970 reads as the epoch: deadlines then look expired, which
        // only ever causes a `Recover` (checked by its holder), never a double side effect.
        let since_epoch = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        Timestamp(millis_saturating(since_epoch))
    }
}

/// A clock that moves only when told to: for tests and simulations.
///
/// ```
/// use std::time::Duration;
/// use idem_core::{Clock, ManualClock, Timestamp};
///
/// let clock = ManualClock::new(Timestamp::from_millis(1_000));
/// clock.advance(Duration::from_secs(30));
/// assert_eq!(clock.now(), Timestamp::from_millis(31_000));
/// ```
#[derive(Debug, Default)]
pub struct ManualClock {
    now_ms: AtomicU64,
}

impl ManualClock {
    /// A clock that reads `start` until it is advanced.
    pub fn new(start: Timestamp) -> Self {
        Self { now_ms: AtomicU64::new(start.0) }
    }

    /// Moves the clock forward by `duration` (saturating). It never moves back.
    pub fn advance(&self, duration: Duration) {
        let ms = millis_saturating(duration);
        // ORDERING: the clock is a single value with no data published alongside it.
        let _ = self
            .now_ms
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |now| Some(now.saturating_add(ms)));
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        // ORDERING: see `advance`.
        Timestamp(self.now_ms.load(Ordering::Relaxed))
    }
}
