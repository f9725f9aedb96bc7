//! The retry loop both integrations share: one intent's attempts, each bounded by the
//! attempt timeout, all by the intent's deadline, judged by the [`RetryPolicy`].

use std::future::Future;
use std::time::Duration;

use http::{HeaderMap, StatusCode};

use crate::{ClientError, RetryPolicy, policy::Verdict};

/// What an intent's attempts came to, put in the answer's extensions: how many attempts
/// it took, and whether the server said the answer is a replay (`Idempotent-Replayed`),
/// that is, an earlier attempt had already taken effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attempts {
    /// Attempts sent, this answer's included.
    pub count: u32,
    /// The server replayed an answer it had stored for this key.
    pub replayed: bool,
}

/// One attempt's failure to get an answer.
#[derive(Debug)]
pub(crate) enum Failed<E> {
    /// No answer came (a timeout, a connection error): the request may have reached the
    /// server. Retried, with the same key.
    Unanswered(E),
    /// The request could not be made at all (a malformed request): no retry mends it.
    Unsendable(E),
    /// The server answered, and the answer could not be taken (a redirect the client
    /// will not follow): the server may have acted, and a retry would get the same
    /// answer. The outcome is unknown at once.
    Unfollowed(E),
}

/// How late a timer may wake (tokio's timer wheel counts whole milliseconds): a pause
/// that would end within this of the deadline is not begun, since the attempt after it
/// would start past the deadline.
const TIMER_SLACK: Duration = Duration::from_millis(2);

/// The answer's status and headers, whatever the integration's response type.
pub(crate) trait Answer {
    fn status(&self) -> StatusCode;
    fn headers(&self) -> &HeaderMap;
}

/// Sends attempts (`send`, each a copy of the same request with the same key) until one
/// is an answer for the caller, the policy refuses, or the deadline passes.
pub(crate) async fn attempts<T, E, F>(
    policy: &RetryPolicy,
    key: &str,
    mut send: impl FnMut() -> F,
) -> Result<(T, Attempts), ClientError<E>>
where
    T: Answer,
    E: std::fmt::Display,
    F: Future<Output = Result<T, Failed<E>>>,
{
    let started = tokio::time::Instant::now();
    // The policy's deadline is at most a day: always a representable instant.
    let deadline = started.checked_add(policy.deadline()).unwrap_or(started);
    // Random per intent's run: two clients sending one intent do not pause in step.
    let salt = uuid::Uuid::new_v4().as_u64_pair().0;
    let unknown = |attempts, last: String| ClientError::OutcomeUnknown {
        key: key.to_string(),
        attempts,
        last,
    };
    let mut attempt = 0u32;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if attempt > 0 && left.is_zero() {
            // A pause that overran its timer: no attempt starts past the deadline.
            return Err(unknown(attempt, "the deadline passed during the pause".into()));
        }
        attempt += 1;
        let bounded = tokio::time::timeout(policy.attempt_timeout().min(left), send()).await;
        let (last, told) = match bounded {
            Err(_) => (format!("no answer within {:?}", policy.attempt_timeout().min(left)), None),
            Ok(Err(Failed::Unsendable(error))) => return Err(ClientError::Request(error)),
            Ok(Err(Failed::Unanswered(error))) => (error.to_string(), None),
            Ok(Err(Failed::Unfollowed(error))) => return Err(unknown(attempt, error.to_string())),
            Ok(Ok(answer)) => match policy.judge(answer.status(), answer.headers()) {
                Verdict::Answer => {
                    let replayed = crate::policy::replayed(answer.headers());
                    return Ok((answer, Attempts { count: attempt, replayed }));
                }
                Verdict::KeyReused => {
                    return Err(ClientError::KeyReused { key: key.to_string(), attempts: attempt });
                }
                Verdict::Retry(told) => (format!("answered {}", answer.status()), told),
            },
        };
        let pause = policy.pause(attempt, told, salt);
        if tokio::time::Instant::now() + pause + TIMER_SLACK >= deadline {
            return Err(unknown(attempt, last));
        }
        tokio::time::sleep(pause).await;
    }
}
