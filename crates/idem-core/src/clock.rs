//! Time as the store sees it: milliseconds since the Unix epoch, read from a [`Clock`].
//!
//! Every time rule (lease expiry, result expiry) reads the clock it was given, so tests
//! move a [`ManualClock`] instead of sleeping.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

#[cfg(not(loom))]
use crate::sync::Arc;
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

/// The system clock read from a cached value that one background thread per process
/// (`idem-clock`) refreshes every [`CoarseClock::TICK`]: a read is one atomic load instead
/// of a system call, which is a third of an in-memory replay.
///
/// A reading is always a system clock reading taken earlier: it lags by at least a tick
/// and by more whenever the thread is not scheduled, and never runs ahead. So it serves
/// only to *check* deadlines (is this lease or result past its expiry?), where a late
/// reading keeps a record a little longer, never shorter. Deadlines are set from the
/// precise clock. The thread starts with the first coarse clock and ends within a tick of
/// the last one being dropped; if it cannot start, reads fall back to the system clock.
#[cfg(not(loom))]
#[derive(Debug, Clone)]
pub(crate) struct CoarseClock {
    ticked: Option<Arc<AtomicU64>>,
}

#[cfg(not(loom))]
impl CoarseClock {
    /// How often the thread refreshes the cached reading.
    pub(crate) const TICK: Duration = Duration::from_millis(1);

    /// The process-wide coarse clock, starting its thread if none is running.
    pub(crate) fn shared() -> Self {
        use crate::sync::{ConstMutex, PoisonError, Weak};
        static RUNNING: ConstMutex<Weak<AtomicU64>> = ConstMutex::new(Weak::new());
        // A panic cannot happen while the lock is held, but a poisoned lock still holds
        // a valid handle: use it.
        let mut running = RUNNING.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(ticked) = running.upgrade() {
            return Self { ticked: Some(ticked) };
        }
        let ticked = Arc::new(AtomicU64::new(SystemClock.now().as_millis()));
        let weak = Arc::downgrade(&ticked);
        // The last clock may have been dropped just now, its thread not yet ended: that
        // thread holds only a weak handle to a value nobody can reach again (its strong
        // count reached zero), so it ends on its next tick, and this new value gets its
        // own thread. Every reachable value has exactly one thread refreshing it.
        let spawned = crate::sync::spawn_named("idem-clock", move || {
            while let Some(ticked) = weak.upgrade() {
                // ORDERING: a single value with no data published alongside it.
                ticked.store(SystemClock.now().as_millis(), Ordering::Relaxed);
                drop(ticked);
                crate::sync::sleep(Self::TICK);
            }
        });
        if spawned.is_err() {
            return Self { ticked: None };
        }
        *running = Arc::downgrade(&ticked);
        Self { ticked: Some(ticked) }
    }
}

#[cfg(not(loom))]
impl Clock for CoarseClock {
    fn now(&self) -> Timestamp {
        match &self.ticked {
            // ORDERING: see `shared`.
            Some(ticked) => Timestamp(ticked.load(Ordering::Relaxed)),
            None => SystemClock.now(),
        }
    }
}
