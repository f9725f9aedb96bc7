//! [`RetryPolicy`]: which answers are retried, how long to wait between attempts, and
//! when to give up. One policy serves both integrations.

use std::time::Duration;

use http::{HeaderMap, StatusCode};

/// When and how an intent is retried. Built with [`RetryPolicy::builder`]; the default
/// retries for up to 60 s, each attempt given 10 s, waiting 100 ms doubling to 5 s
/// between attempts (with full jitter), and retries other 5xx answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    deadline: Duration,
    attempt_timeout: Duration,
    pause_first: Duration,
    pause_max: Duration,
    retry_server_errors: bool,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            deadline: Duration::from_secs(60),
            attempt_timeout: Duration::from_secs(10),
            pause_first: Duration::from_millis(100),
            pause_max: Duration::from_secs(5),
            retry_server_errors: true,
        }
    }
}

/// Builds a [`RetryPolicy`], starting from the default.
#[derive(Debug, Clone, Copy)]
#[must_use]
pub struct RetryPolicyBuilder(RetryPolicy);

impl RetryPolicyBuilder {
    /// The longest an intent is tried for, from its first attempt: past it, no attempt
    /// starts, and the outcome is unknown ([`crate::ClientError::OutcomeUnknown`]).
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.0.deadline = deadline;
        self
    }

    /// The longest one attempt waits for its answer before it is given up on (and the
    /// intent retried, with the same key).
    pub fn attempt_timeout(mut self, timeout: Duration) -> Self {
        self.0.attempt_timeout = timeout;
        self
    }

    /// The first pause between attempts, doubled each time up to `max`; each pause is
    /// drawn at random below that bound (full jitter), so that clients that failed
    /// together do not retry together.
    pub fn pauses(mut self, first: Duration, max: Duration) -> Self {
        self.0.pause_first = first;
        self.0.pause_max = max;
        self
    }

    /// Whether a 5xx other than 503 is retried (default yes: with the same key, the
    /// server either replays its answer or runs the intent once).
    pub fn retry_server_errors(mut self, retry: bool) -> Self {
        self.0.retry_server_errors = retry;
        self
    }

    /// The policy.
    ///
    /// # Errors
    ///
    /// [`PolicyError`] naming the setting: a zero deadline or attempt timeout, or pauses
    /// whose first is zero or above the largest.
    pub fn build(self) -> Result<RetryPolicy, PolicyError> {
        let p = self.0;
        if p.deadline.is_zero() {
            return Err(PolicyError("deadline must be more than zero"));
        }
        if p.attempt_timeout.is_zero() {
            return Err(PolicyError("attempt_timeout must be more than zero"));
        }
        if p.pause_first.is_zero() || p.pause_first > p.pause_max {
            return Err(PolicyError("pauses: the first must be more than zero, at most max"));
        }
        Ok(p)
    }
}

/// A policy setting that cannot work, named.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("retry policy: {0}")]
pub struct PolicyError(&'static str);

/// What to do with an attempt's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// The server's answer for the intent: hand it to the caller.
    Answer,
    /// Try again, after at least this long if the server said (`Retry-After`).
    Retry(Option<Duration>),
    /// 422: the key was used for another request. A bug of the caller's, never retried.
    KeyReused,
}

/// The longest `Retry-After` honoured: a server asking for more is asked again sooner,
/// within the deadline.
const RETRY_AFTER_MAX: Duration = Duration::from_secs(60);

impl RetryPolicy {
    /// The builder, from the default policy.
    pub fn builder() -> RetryPolicyBuilder {
        RetryPolicyBuilder(Self::default())
    }

    /// The total deadline per intent.
    pub fn deadline(&self) -> Duration {
        self.deadline
    }

    /// The timeout of one attempt.
    pub fn attempt_timeout(&self) -> Duration {
        self.attempt_timeout
    }

    /// What an answer with `status` and `headers` means for the intent. A timeout or a
    /// connection error (no answer) is always retried.
    pub(crate) fn judge(&self, status: StatusCode, headers: &HeaderMap) -> Verdict {
        let told = || retry_after(headers);
        match status.as_u16() {
            422 => Verdict::KeyReused,
            409 | 429 | 503 => Verdict::Retry(told()),
            500..=599 if self.retry_server_errors => Verdict::Retry(told()),
            _ => Verdict::Answer,
        }
    }

    /// The pause before attempt `attempt + 1` (`attempt` from 1): at least what the
    /// server asked for, else a draw below the doubled bound. `salt` varies the draws
    /// between intents.
    pub(crate) fn pause(&self, attempt: u32, told: Option<Duration>, salt: u64) -> Duration {
        let doubled = self.pause_first.saturating_mul(1 << attempt.saturating_sub(1).min(16));
        let bound = doubled.min(self.pause_max);
        let bound_ms = u64::try_from(bound.as_millis()).unwrap_or(u64::MAX).max(1);
        let jittered = Duration::from_millis(mix(salt ^ u64::from(attempt)) % bound_ms);
        match told {
            Some(after) => after.min(RETRY_AFTER_MAX).max(jittered),
            None => jittered,
        }
    }
}

/// `Retry-After` in seconds, if the answer carries one (an HTTP date is not read: the
/// backoff applies then).
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(http::header::RETRY_AFTER)?.to_str().ok()?;
    value.trim().parse::<u64>().ok().map(Duration::from_secs)
}

/// splitmix64: a well-spread number from `x`, for the jitter.
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
