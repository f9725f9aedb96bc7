//! [`RetryPolicy`]: which answers are retried, how long to wait between attempts, and
//! when to give up. One policy serves both integrations.

use std::time::Duration;

use http::{HeaderMap, StatusCode};

/// When and how an intent is retried. Built with [`RetryPolicy::builder`]; the default
/// retries for up to 60 s, each attempt given 10 s, waiting 100 ms doubling to 5 s
/// between attempts (with full jitter), retries other 5xx answers, and takes 422 for "the
/// key was used for another request" (the IETF draft's, and idem-http's, answer).
///
/// An answer the server marks as a replay (`Idempotent-Replayed: true`) is handed back
/// whatever its status: it is the answer stored for the key, and a retry would only get
/// it again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    deadline: Duration,
    attempt_timeout: Duration,
    pause_first: Duration,
    pause_max: Duration,
    retry_server_errors: bool,
    key_reused: Option<StatusCode>,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            deadline: Duration::from_secs(60),
            attempt_timeout: Duration::from_secs(10),
            pause_first: Duration::from_millis(100),
            pause_max: Duration::from_secs(5),
            retry_server_errors: true,
            key_reused: Some(StatusCode::UNPROCESSABLE_ENTITY),
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

    /// The status by which the server says "this key was used for another request"
    /// (default 422, the IETF draft's; Stripe's is 400), answered as
    /// [`ClientError::KeyReused`](crate::ClientError::KeyReused) and never retried.
    /// `None` hands every such answer back: for a server whose 422 also means "invalid
    /// input" and that says key reuse no other way.
    pub fn key_reused_status(mut self, status: Option<StatusCode>) -> Self {
        self.0.key_reused = status;
        self
    }

    /// The policy.
    ///
    /// # Errors
    ///
    /// [`PolicyError`] naming the setting: a deadline of zero or over [`DEADLINE_MAX`], a
    /// zero attempt timeout, or pauses whose first is zero or above the largest.
    pub fn build(self) -> Result<RetryPolicy, PolicyError> {
        let p = self.0;
        if p.deadline.is_zero() || p.deadline > DEADLINE_MAX {
            return Err(PolicyError("deadline must be more than zero and at most a day"));
        }
        // An attempt timeout or a pause longer than the deadline is cut at the deadline.
        if p.attempt_timeout.is_zero() {
            return Err(PolicyError("attempt_timeout must be more than zero"));
        }
        if p.pause_first.is_zero() || p.pause_first > p.pause_max {
            return Err(PolicyError("pauses: the first must be more than zero, at most max"));
        }
        Ok(p)
    }
}

/// The longest deadline an intent may have: a day. Past it, a caller should store the
/// intent and retry it later, not hold a task open.
pub const DEADLINE_MAX: Duration = Duration::from_secs(24 * 60 * 60);

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
    /// The key was used for another request (422 by default). A bug of the caller's,
    /// never retried.
    KeyReused,
}

/// The longest `Retry-After` honoured: a server asking for more is asked again after
/// this long (a pause that would end past the deadline ends the intent at once, as
/// unknown: waiting would only reach the deadline).
pub const RETRY_AFTER_MAX: Duration = Duration::from_secs(30);

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
        if replayed(headers) {
            return Verdict::Answer;
        }
        if Some(status) == self.key_reused {
            return Verdict::KeyReused;
        }
        match status.as_u16() {
            409 | 429 | 503 => Verdict::Retry(told()),
            500..=599 if self.retry_server_errors => Verdict::Retry(told()),
            _ => Verdict::Answer,
        }
    }

    /// The pause before attempt `attempt + 1` (`attempt` from 1): at least what the
    /// server asked for, else a draw below the doubled bound. `salt` varies the draws
    /// between intents.
    pub(crate) fn pause(&self, attempt: u32, told: Option<Duration>, salt: u64) -> Duration {
        let factor = 1u32.checked_shl(attempt.saturating_sub(1)).unwrap_or(u32::MAX);
        let bound = self.pause_first.saturating_mul(factor).min(self.pause_max);
        let bound_ns = u64::try_from(bound.as_nanos()).unwrap_or(u64::MAX).max(1);
        let jittered = Duration::from_nanos(mix(salt ^ u64::from(attempt)) % bound_ns);
        match told {
            Some(after) => after.min(RETRY_AFTER_MAX).max(jittered),
            None => jittered,
        }
    }
}

/// `Retry-After` in seconds, if the answer carries one (an HTTP date is not read: the
/// backoff applies then).
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(http::header::RETRY_AFTER)?.to_str().ok()?.trim();
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // Digits too many for a number of seconds still ask for a long wait: the cap.
    Some(value.parse::<u64>().map_or(RETRY_AFTER_MAX, Duration::from_secs))
}

/// Whether the server says the answer is a replay of the one stored for the key.
pub(crate) fn replayed(headers: &HeaderMap) -> bool {
    let replayed = headers.get(idem_core::IDEMPOTENT_REPLAYED_HEADER);
    replayed.is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"true"))
}

/// splitmix64: a well-spread number from `x`, for the jitter.
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
