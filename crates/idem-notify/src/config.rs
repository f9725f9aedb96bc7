//! The notifier's settings: a builder that states each default and refuses a value out of
//! range by name, so a `Config` that exists is one `Notifier::start` can run.

use std::sync::Arc;

use idem_core::{Clock, SystemClock};

use crate::retry::{RetryPolicy, Sleeper, ThreadSleeper};

/// The most worker threads.
pub const WORKERS_MAX: usize = 64;
/// The largest queue (the queue's slots are allocated when the notifier starts).
pub const QUEUE_CAPACITY_MAX: usize = 1 << 20;
/// The most attempts per message.
pub const ATTEMPTS_MAX: u32 = 100;
/// The longest backoff a retry policy may set (`retry.cap`): a shutdown waits for a pause
/// under way, so a cap of years would hold it (and a notifier's drop) for as long.
pub const RETRY_CAP_MAX: std::time::Duration = std::time::Duration::from_secs(60 * 60);

/// What to do when a send's outcome is unknown and the provider cannot say.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UnknownPolicy {
    /// Report it unresolved and leave it: at most once, never a second ping.
    ReportUnresolved,
    /// Send it again: at least once, a second ping possible.
    Resend,
}

/// A setting out of range, named, with the value given and what it accepts: the shape
/// every idem crate's configuration errors have (idem-core's).
pub use idem_core::ConfigError;

/// The notifier's settings, built by [`Config::builder`] (or [`Config::default`]).
///
/// ```
/// use idem_notify::{Config, ConfigError};
///
/// let config = Config::builder().workers(4).queue_capacity(10_000).build()?;
/// assert_eq!(config.workers(), 4);
/// let refused: ConfigError = Config::builder().workers(0).build().unwrap_err();
/// assert_eq!((refused.setting, refused.value.as_str()), ("workers", "0"));
/// # Ok::<(), ConfigError>(())
/// ```
#[derive(Clone)]
pub struct Config {
    workers: usize,
    queue_capacity: usize,
    retry: RetryPolicy,
    unknown: UnknownPolicy,
    sleeper: Arc<dyn Sleeper>,
    clock: Arc<dyn Clock>,
    read_max: usize,
    reports_max: usize,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("workers", &self.workers)
            .field("queue_capacity", &self.queue_capacity)
            .field("retry", &self.retry)
            .field("unknown", &self.unknown)
            .field("read_max", &self.read_max)
            .field("reports_max", &self.reports_max)
            .finish_non_exhaustive()
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            workers: 2,
            queue_capacity: 1024,
            retry: RetryPolicy::default(),
            unknown: UnknownPolicy::ReportUnresolved,
            sleeper: Arc::new(ThreadSleeper),
            clock: Arc::new(SystemClock),
            read_max: 1_000_000,
            reports_max: 1_000,
        }
    }
}

impl Config {
    /// A builder that starts from the defaults.
    pub fn builder() -> ConfigBuilder {
        ConfigBuilder { config: Self::default() }
    }

    /// Worker threads.
    pub fn workers(&self) -> usize {
        self.workers
    }

    /// Queue capacity.
    pub fn queue_capacity(&self) -> usize {
        self.queue_capacity
    }

    /// The retry policy.
    pub fn retry(&self) -> RetryPolicy {
        self.retry
    }

    /// What an unsettled ambiguous send does.
    pub fn unknown(&self) -> UnknownPolicy {
        self.unknown
    }

    /// How workers wait between attempts.
    pub(crate) fn sleeper(&self) -> &dyn Sleeper {
        &*self.sleeper
    }

    pub(crate) fn clock(&self) -> &dyn Clock {
        &*self.clock
    }

    /// The most (recipient, id) pairs `mark_read` remembers.
    pub fn read_max(&self) -> usize {
        self.read_max
    }

    /// The most dead letters, and the most unresolved notifications, kept for reading.
    pub fn reports_max(&self) -> usize {
        self.reports_max
    }
}

/// Builds a [`Config`]; each setter says its default.
#[derive(Debug, Clone)]
pub struct ConfigBuilder {
    config: Config,
}

impl ConfigBuilder {
    /// Worker threads; default 2, 1 to [`WORKERS_MAX`].
    pub fn workers(mut self, workers: usize) -> Self {
        self.config.workers = workers;
        self
    }

    /// Queue capacity; default 1024, 1 to [`QUEUE_CAPACITY_MAX`]. A full queue refuses
    /// a submission with `QueueFull`.
    pub fn queue_capacity(mut self, capacity: usize) -> Self {
        self.config.queue_capacity = capacity;
        self
    }

    /// Retries of transient failures; default [`RetryPolicy::default`] (5 attempts,
    /// 100 ms doubling to 10 s, full jitter).
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.config.retry = retry;
        self
    }

    /// Ambiguous sends with no status answer; default [`UnknownPolicy::ReportUnresolved`].
    pub fn unknown(mut self, unknown: UnknownPolicy) -> Self {
        self.config.unknown = unknown;
        self
    }

    /// How workers wait between attempts; default real sleeps ([`ThreadSleeper`]). Tests
    /// pass a recorder so that no test sleeps.
    pub fn sleeper(mut self, sleeper: Arc<dyn Sleeper>) -> Self {
        self.config.sleeper = sleeper;
        self
    }

    /// The clock a worker reads to see how much of a message's lease is left before it
    /// sends (it renews a lease with less than half left); default the system clock. Give
    /// it the id store's clock when the store has one of its own (a `ManualClock` in
    /// tests). A store on another machine's clock (PostgreSQL's) may run ahead of this one
    /// by up to half a lease before a renewal comes too late.
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.config.clock = clock;
        self
    }

    /// The most (recipient, id) pairs `mark_read` remembers; default 1,000,000, at least 1.
    pub fn read_max(mut self, read_max: usize) -> Self {
        self.config.read_max = read_max;
        self
    }

    /// The most dead letters, and the most unresolved notifications, kept for
    /// [`Notifier::dead_letters`](crate::Notifier::dead_letters) and
    /// [`Notifier::unresolved`](crate::Notifier::unresolved); default 1,000, at least 1.
    /// Past it the oldest is dropped from the list and counted
    /// ([`Stats::reports_dropped`](crate::Stats::reports_dropped)); the message's id keeps
    /// its state in the store either way.
    pub fn reports_max(mut self, reports_max: usize) -> Self {
        self.config.reports_max = reports_max;
        self
    }

    /// Checks every setting.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] naming the first setting out of range.
    pub fn build(self) -> Result<Config, ConfigError> {
        let c = self.config;
        let between = |max: &dyn std::fmt::Display| format!("between 1 and {max}");
        if !(1..=WORKERS_MAX).contains(&c.workers) {
            return Err(ConfigError::new("workers", c.workers, between(&WORKERS_MAX)));
        }
        if !(1..=QUEUE_CAPACITY_MAX).contains(&c.queue_capacity) {
            let accepted = between(&QUEUE_CAPACITY_MAX);
            return Err(ConfigError::new("queue_capacity", c.queue_capacity, accepted));
        }
        if !(1..=ATTEMPTS_MAX).contains(&c.retry.attempts_max) {
            let accepted = between(&ATTEMPTS_MAX);
            return Err(ConfigError::new("retry.attempts_max", c.retry.attempts_max, accepted));
        }
        if c.retry.cap > RETRY_CAP_MAX {
            let accepted = format!("at most {RETRY_CAP_MAX:?}");
            return Err(ConfigError::new("retry.cap", c.retry.cap, accepted));
        }
        if c.retry.base > c.retry.cap {
            let accepted = format!("at most retry.cap ({:?})", c.retry.cap);
            return Err(ConfigError::new("retry.base", c.retry.base, accepted));
        }
        for (setting, value) in [("read_max", c.read_max), ("reports_max", c.reports_max)] {
            if value == 0 {
                return Err(ConfigError::new(setting, value, "at least 1"));
            }
        }
        Ok(c)
    }
}
