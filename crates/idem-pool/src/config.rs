//! The pool's limits, built and validated by [`Builder`].

use std::fmt;
use std::marker::PhantomData;
use std::time::Duration;

use idem_core::{Clock, SystemClock};

use crate::sync::Arc;

/// Whether a connection is checked (with [`Manager::is_valid`](crate::Manager::is_valid))
/// each time it is lent out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HealthCheck {
    /// Check every connection on checkout; a failing one is discarded and the caller
    /// connects a new one into its slot (subject to the pause after a failed connect and
    /// to its deadline).
    OnCheckout,
    /// Never check on checkout (broken connections are still caught on return).
    Never,
}

/// Who gets a returned connection when threads are waiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fairness {
    /// The longest waiter, handed the connection directly: waiters are served in arrival
    /// order and no thread is woken for nothing. With more threads than connections,
    /// every loan costs a wake-up.
    Fifo,
    /// Whoever asks first (as r2d2): the connection goes back on the shelf (idle) and the
    /// longest waiter is woken to compete for it with running threads. Faster when
    /// threads outnumber connections; a waiter can be overtaken, and woken for nothing.
    Barging,
    /// Barging until the longest waiter has waited [`Builder::fair_after`] (default
    /// 500 us), then that waiter is handed the next returned connection directly (as
    /// parking_lot's mutex does): the speed of barging, and no waiter overtaken forever.
    Eventual,
}

/// A setting was refused: which one, the value given, what it accepts. The same shape as
/// every idem crate's (idem-core's).
pub use idem_core::ConfigError;

/// Validated settings; see [`Builder`] for each default.
#[derive(Clone)]
pub(crate) struct Config {
    pub(crate) max_size: usize,
    pub(crate) min_idle: usize,
    pub(crate) connection_timeout: Duration,
    pub(crate) idle_timeout: Option<Duration>,
    pub(crate) max_lifetime: Option<Duration>,
    pub(crate) health_check: HealthCheck,
    pub(crate) fairness: Fairness,
    pub(crate) fair_after: Duration,
    pub(crate) leak_threshold: Option<Duration>,
    pub(crate) maintenance_interval: Option<Duration>,
    pub(crate) waiters_max: usize,
    pub(crate) clock: Arc<dyn Clock>,
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("max_size", &self.max_size)
            .field("min_idle", &self.min_idle)
            .field("connection_timeout", &self.connection_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .field("max_lifetime", &self.max_lifetime)
            .field("health_check", &self.health_check)
            .field("fairness", &self.fairness)
            .field("fair_after", &self.fair_after)
            .field("leak_threshold", &self.leak_threshold)
            .field("maintenance_interval", &self.maintenance_interval)
            .field("waiters_max", &self.waiters_max)
            .finish_non_exhaustive()
    }
}

/// Builds a [`Pool`](crate::Pool); every setter names its default.
///
/// ```
/// use std::time::Duration;
/// # use std::convert::Infallible;
/// # #[derive(Debug)] struct Noop;
/// # impl idem_pool::Manager for Noop {
/// #     type Connection = (); type Error = Infallible;
/// #     fn connect(&self) -> Result<(), Infallible> { Ok(()) }
/// # }
/// let pool = idem_pool::Pool::builder()
///     .max_size(4)
///     .min_idle(1)
///     .connection_timeout(Duration::from_secs(2))
///     .build(Noop)?;
/// assert_eq!(pool.state().size, 1); // min_idle is filled at build
/// # Ok::<(), idem_pool::ConfigError>(())
/// ```
///
/// The builder names the pool's manager type `M` (as r2d2's does), so
/// `Pool::builder()` needs no placeholder type: `M` is inferred from
/// [`build`](Self::build).
pub struct Builder<M> {
    config: Config,
    manager: PhantomData<fn() -> M>,
}

impl<M> fmt::Debug for Builder<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder").field("config", &self.config).finish()
    }
}

impl<M> Clone for Builder<M> {
    fn clone(&self) -> Self {
        Self { config: self.config.clone(), manager: PhantomData }
    }
}

impl<M> Default for Builder<M> {
    fn default() -> Self {
        Self {
            manager: PhantomData,
            config: Config {
                max_size: 10,
                min_idle: 0,
                connection_timeout: Duration::from_secs(30),
                idle_timeout: Some(Duration::from_secs(10 * 60)),
                max_lifetime: Some(Duration::from_secs(30 * 60)),
                health_check: HealthCheck::OnCheckout,
                fairness: Fairness::Eventual,
                fair_after: Duration::from_micros(500),
                leak_threshold: None,
                maintenance_interval: Some(Duration::from_secs(30)),
                waiters_max: 10_000,
                clock: Arc::new(SystemClock),
            },
        }
    }
}

impl<M> Builder<M> {
    /// A builder with the defaults, as [`Pool::builder`](crate::Pool::builder).
    pub fn new() -> Self {
        Self::default()
    }

    /// The largest accepted `max_size`.
    pub const MAX_SIZE_LIMIT: usize = 1 << 16;

    /// The most connections, idle and lent together; default 10, at most 65,536.
    #[must_use]
    pub fn max_size(mut self, max_size: usize) -> Self {
        self.config.max_size = max_size;
        self
    }

    /// Connections kept idle by maintenance (and made at build); default 0, at most
    /// `max_size`.
    #[must_use]
    pub fn min_idle(mut self, min_idle: usize) -> Self {
        self.config.min_idle = min_idle;
        self
    }

    /// How long `get` waits for a connection; default 30 seconds.
    #[must_use]
    pub fn connection_timeout(mut self, timeout: Duration) -> Self {
        self.config.connection_timeout = timeout;
        self
    }

    /// A connection idle for longer than this is closed instead of lent; default 10
    /// minutes, `None` to keep idle connections forever. Idle time counts from the start
    /// of the connection's last loan (the pool reads no clock on return), so a long loan
    /// makes a connection look idle sooner: at worst it is replaced early, never late.
    #[must_use]
    pub fn idle_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.config.idle_timeout = timeout;
        self
    }

    /// A connection older than this is closed instead of lent or kept; default 30 minutes,
    /// `None` for no limit.
    #[must_use]
    pub fn max_lifetime(mut self, lifetime: Option<Duration>) -> Self {
        self.config.max_lifetime = lifetime;
        self
    }

    /// Whether connections are checked on checkout; default [`HealthCheck::OnCheckout`].
    #[must_use]
    pub fn health_check(mut self, check: HealthCheck) -> Self {
        self.config.health_check = check;
        self
    }

    /// Who gets a returned connection while threads wait; default
    /// [`Fairness::Eventual`].
    #[must_use]
    pub fn fairness(mut self, fairness: Fairness) -> Self {
        self.config.fairness = fairness;
        self
    }

    /// Under [`Fairness::Eventual`], how long the longest waiter may be overtaken before
    /// a returned connection is handed to it directly; default 500 us. Zero is Fifo.
    #[must_use]
    pub fn fair_after(mut self, wait: Duration) -> Self {
        self.config.fair_after = wait;
        self
    }

    /// A connection lent for longer than this is counted as a suspected leak (once) by
    /// maintenance; default `None` (off).
    #[must_use]
    pub fn leak_threshold(mut self, threshold: Option<Duration>) -> Self {
        self.config.leak_threshold = threshold;
        self
    }

    /// How often a background thread runs [`Pool::maintain`](crate::Pool::maintain);
    /// default 30 seconds, `None` for no thread (call `maintain` yourself). The thread
    /// stops when the pool is closed or its last handle dropped.
    #[must_use]
    pub fn maintenance_interval(mut self, interval: Option<Duration>) -> Self {
        self.config.maintenance_interval = interval;
        self
    }

    /// The most threads waiting in `get` at once; one more is refused with
    /// [`Error::TooManyWaiters`](crate::Error::TooManyWaiters); default 10,000.
    #[must_use]
    pub fn waiters_max(mut self, waiters_max: usize) -> Self {
        self.config.waiters_max = waiters_max;
        self
    }

    /// The clock that lifetimes, idle timeouts and leaks are measured by; default
    /// idem-core's `SystemClock`. Tests pass its `ManualClock`. (Named, not linked: with
    /// `cargo doc --no-deps` a link into idem-core would have nowhere to go.)
    #[must_use]
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.config.clock = clock;
        self
    }

    pub(crate) fn validate(self) -> Result<Config, ConfigError> {
        let c = self.config;
        if c.max_size == 0 || c.max_size > Self::MAX_SIZE_LIMIT {
            let accepted = format!("between 1 and {}", Self::MAX_SIZE_LIMIT);
            return Err(ConfigError::new("max_size", c.max_size, accepted));
        }
        if c.min_idle > c.max_size {
            let accepted = format!("at most max_size ({})", c.max_size);
            return Err(ConfigError::new("min_idle", c.min_idle, accepted));
        }
        let durations = [
            ("connection_timeout", Some(c.connection_timeout)),
            ("idle_timeout", c.idle_timeout),
            ("max_lifetime", c.max_lifetime),
            ("leak_threshold", c.leak_threshold),
            ("maintenance_interval", c.maintenance_interval),
        ];
        for (name, value) in durations {
            if let Some(value) = value.filter(|v| *v < Duration::from_millis(1)) {
                return Err(ConfigError::new(name, value, "at least 1ms"));
            }
        }
        if c.waiters_max == 0 {
            return Err(ConfigError::new("waiters_max", 0, "at least 1"));
        }
        Ok(c)
    }
}
