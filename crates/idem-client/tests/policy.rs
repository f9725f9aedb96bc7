//! The retry policy, attempt by attempt, on tokio's paused clock (no real time passes):
//! which answers are retried and which handed back, how long each pause is, that the
//! deadline is never overrun, and what the builder refuses. The client is the tower layer
//! around a scripted service that records every attempt.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use idem_client::{Attempts, ClientError, IdempotentRetryLayer, Intent, RetryPolicy};
use tokio::time::Instant;
use tower::{Layer, Service, ServiceExt};

/// One attempt as the server saw it: when, its key and body.
#[derive(Debug, Clone)]
struct Seen {
    at: Instant,
    key: Option<String>,
    body: Bytes,
}

/// A server that answers attempt n with `answers[n]` (the last one again after them), or
/// never answers if that is `None`.
fn scripted(answers: Vec<Option<(u16, Headers)>>) -> (Server, Log) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let answers = Arc::new(answers);
    let service = tower::service_fn(move |request: Request<Full<Bytes>>| {
        let (log, answers) = (log.clone(), answers.clone());
        async move {
            use http_body_util::BodyExt;
            let key = request
                .headers()
                .get("idempotency-key")
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
            let body = request.into_body().collect().await.map_err(|e| e.to_string())?.to_bytes();
            let n = {
                let mut log = log.lock().expect("the log");
                log.push(Seen { at: Instant::now(), key, body });
                log.len() - 1
            };
            let Some((status, headers)) = answers[n.min(answers.len() - 1)] else {
                std::future::pending::<()>().await;
                unreachable!("never answers");
            };
            let mut answer = Response::builder().status(status);
            for (name, value) in headers {
                answer = answer.header(*name, *value);
            }
            answer.body(()).map_err(|e| e.to_string())
        }
    });
    (Server::new(service), seen)
}

/// Headers of a scripted answer.
type Headers = &'static [(&'static str, &'static str)];

/// The scripted server, as the client sees it.
type Server = tower::util::BoxCloneService<Request<Full<Bytes>>, Response<()>, String>;
/// What the server saw.
type Log = Arc<Mutex<Vec<Seen>>>;

fn policy() -> RetryPolicy {
    RetryPolicy::builder()
        .deadline(Duration::from_secs(20))
        .attempt_timeout(Duration::from_secs(2))
        .pauses(Duration::from_millis(100), Duration::from_millis(800))
        .build()
        .expect("a valid policy")
}

async fn send(
    service: Server,
    policy: RetryPolicy,
    intent: Option<Intent>,
    headers: &[(&str, &str)],
) -> Result<(StatusCode, Attempts), ClientError<String>> {
    let mut client = IdempotentRetryLayer::new(policy).layer(service);
    let mut request = Request::post("http://shop/checkout")
        .body(Full::new(Bytes::from_static(b"amount=1050")))
        .expect("a request");
    for (name, value) in headers {
        let name = http::HeaderName::from_bytes(name.as_bytes()).expect("a header name");
        request.headers_mut().insert(name, value.parse().expect("a header value"));
    }
    if let Some(intent) = intent {
        request.extensions_mut().insert(intent);
    }
    let answer = client.ready().await?.call(request).await?;
    let attempts = *answer.extensions().get::<Attempts>().expect("attempts");
    Ok((answer.status(), attempts))
}

const NONE: &[(&str, &str)] = &[];

/// 409, 429 and 503 are retried after their Retry-After (never sooner), with the same key
/// and body; then the answer is handed back.
#[tokio::test(start_paused = true)]
async fn busy_answers_are_retried_after_their_retry_after_with_the_same_key_and_body() {
    for status in [409, 429, 503] {
        let (server, seen) =
            scripted(vec![Some((status, &[("retry-after", "3")])), Some((201, NONE))]);
        let intent = Intent::from_id("order-1").expect("a key");
        let answer = send(server, policy(), Some(intent), &[]).await.expect("answered");
        assert_eq!(answer, (StatusCode::CREATED, Attempts { count: 2, replayed: false }));
        let seen = seen.lock().expect("the log").clone();
        assert!(seen[1].at - seen[0].at >= Duration::from_secs(3), "{status}: {seen:?}");
        assert!(seen.iter().all(|s| s.key.as_deref() == Some("\"order-1\"")), "{seen:?}");
        assert!(seen.iter().all(|s| s.body == seen[0].body), "{seen:?}");
    }
}

/// Other 4xx are the server's answer: handed back after one attempt. 5xx are retried by
/// default, handed back with `retry_server_errors(false)`. A replayed answer is handed
/// back whatever its status (a stored 500 stays a 500).
#[tokio::test(start_paused = true)]
async fn final_answers_are_handed_back_at_once() {
    let no_5xx = RetryPolicy::builder().retry_server_errors(false).build().expect("valid");
    let replayed: Headers = &[("idempotent-replayed", "true")];
    let cases: [(u16, Headers, RetryPolicy, u32); 5] = [
        (400, NONE, policy(), 1),
        (404, NONE, policy(), 1),
        (500, NONE, policy(), 2),
        (500, NONE, no_5xx, 1),
        (500, replayed, policy(), 1),
    ];
    for (status, headers, policy, count) in cases {
        let (server, _) = scripted(vec![Some((status, headers)), Some((201, NONE))]);
        let (got, attempts) = send(server, policy, None, &[]).await.expect("answered");
        let expected = if count == 1 { status } else { 201 };
        assert_eq!((got.as_u16(), attempts.count), (expected, count), "{status} {headers:?}");
    }
}

/// 422 ends the intent after one attempt as `KeyReused`, naming the intent's own key; a
/// policy without a key-reused status hands the 422 back instead.
#[tokio::test(start_paused = true)]
async fn a_422_is_key_reused_or_with_the_policy_the_servers_answer() {
    let (server, seen) = scripted(vec![Some((422, NONE))]);
    let refused = send(server, policy(), Some(Intent::from_id("o-9").expect("a key")), &[]).await;
    assert!(
        matches!(&refused, Err(ClientError::KeyReused { key, attempts: 1 }) if key == "o-9"),
        "{refused:?}"
    );
    assert_eq!(seen.lock().expect("the log").len(), 1);
    let lenient = RetryPolicy::builder().key_reused_status(None).build().expect("valid");
    let (server, _) = scripted(vec![Some((422, NONE))]);
    let (status, attempts) = send(server, lenient, None, &[]).await.expect("answered");
    assert_eq!((status.as_u16(), attempts.count), (422, 1));
}

/// An attempt that starts with less time left than its timeout is cut at the deadline,
/// not at its own timeout: a server that never answers, a 3 s deadline, attempts of 2 s.
/// The second attempt starts after 2 s and a short pause, and the intent still ends by
/// 3 s.
#[tokio::test(start_paused = true)]
async fn an_attempt_that_starts_near_the_deadline_is_cut_at_it() {
    let (server, seen) = scripted(vec![None]);
    let near = RetryPolicy::builder()
        .deadline(Duration::from_secs(3))
        .attempt_timeout(Duration::from_secs(2))
        .pauses(Duration::from_millis(100), Duration::from_millis(100))
        .build()
        .expect("a valid policy");
    let started = Instant::now();
    let refused = send(server, near, Some(Intent::from_id("o-2").expect("a key")), &[]).await;
    let ended = started.elapsed();
    assert!(matches!(refused, Err(ClientError::OutcomeUnknown { .. })), "{refused:?}");
    assert!(seen.lock().expect("the log").len() >= 2, "a second attempt started");
    assert!(ended <= Duration::from_secs(3), "ended after {ended:?}");
}

/// A server that never answers: each attempt is cut at its timeout, no attempt starts
/// past the deadline, the intent ends within it as unknown, naming its key and saying to
/// retry the same intent. A server that asks for more than the cap is asked again after
/// the cap.
#[tokio::test(start_paused = true)]
async fn the_deadline_is_never_overrun_and_ends_as_an_unknown_outcome() {
    let (server, seen) = scripted(vec![None]);
    let started = Instant::now();
    let intent = Intent::from_id("o-1").expect("a key");
    let refused = send(server, policy(), Some(intent), &[]).await;
    let ended = started.elapsed();
    let Err(ClientError::OutcomeUnknown { key, attempts, .. }) = &refused else {
        panic!("{refused:?}")
    };
    assert_eq!(key, "o-1");
    assert!(ended <= policy().deadline(), "ended after {ended:?}");
    let seen = seen.lock().expect("the log").clone();
    assert_eq!(*attempts as usize, seen.len());
    assert!(seen.len() >= 5, "attempts of 2 s each, pauses under 1 s, in 20 s: {}", seen.len());
    for pair in seen.windows(2) {
        let gap = pair[1].at - pair[0].at;
        assert!(
            gap >= policy().attempt_timeout() && gap <= Duration::from_millis(2_800),
            "{gap:?}"
        );
    }
    let long = RetryPolicy::builder().deadline(Duration::from_secs(120)).build().expect("valid");
    const ASKED: [&[(&str, &str)]; 2] =
        [&[("retry-after", "100")], &[("retry-after", "999999999999999999999")]];
    for asked in ASKED {
        let (server, seen) = scripted(vec![Some((503, asked)), Some((201, NONE))]);
        send(server, long, None, &[]).await.expect("answered");
        let seen = seen.lock().expect("the log").clone();
        assert_eq!(seen[1].at - seen[0].at, idem_client::RETRY_AFTER_MAX, "{asked:?}: the cap");
    }
}

/// Pauses: drawn below a bound that doubles from the first (100 ms) to the largest
/// (800 ms), random, so two runs of one intent do not pause in step. Over nine pauses at
/// the 800 ms bound, one at least is past 100 ms (all below: a chance of one in 10^8).
#[tokio::test(start_paused = true)]
async fn pauses_double_to_their_bound_with_full_jitter() {
    let busy = || vec![Some((503, NONE)); 12].into_iter().chain([Some((201, NONE))]).collect();
    let (server, seen) = scripted(busy());
    send(server, policy(), None, &[]).await.expect("answered");
    let gaps: Vec<Duration> =
        seen.lock().expect("the log").windows(2).map(|p| p[1].at - p[0].at).collect();
    for (n, gap) in gaps.iter().enumerate() {
        let bound = Duration::from_millis(100 * (1 << n.min(3)));
        assert!(*gap <= bound, "pause {n}: {gap:?} past its bound {bound:?}");
    }
    assert!(gaps[3..].iter().any(|g| *g > Duration::from_millis(100)), "never doubled: {gaps:?}");
    let (again, seen_again) = scripted(busy());
    send(again, policy(), None, &[]).await.expect("answered");
    let again: Vec<Duration> =
        seen_again.lock().expect("the log").windows(2).map(|p| p[1].at - p[0].at).collect();
    assert_ne!(gaps, again, "two runs drew the same pauses");
}

/// A key the caller set is kept as it is, on every attempt.
#[tokio::test(start_paused = true)]
async fn a_key_the_caller_set_is_sent_unchanged() {
    let (server, seen) = scripted(vec![Some((503, NONE)), Some((201, NONE))]);
    send(server, policy(), None, &[("idempotency-key", "their-own")]).await.expect("answered");
    let seen = seen.lock().expect("the log").clone();
    assert!(seen.iter().all(|s| s.key.as_deref() == Some("their-own")), "{seen:?}");
}

/// The builder refuses what cannot work, naming the setting.
#[test]
fn the_builder_refuses_settings_that_cannot_work() {
    let second = Duration::from_secs(1);
    let cases = [
        (RetryPolicy::builder().deadline(Duration::ZERO), "deadline"),
        (RetryPolicy::builder().deadline(Duration::MAX), "deadline"),
        (RetryPolicy::builder().attempt_timeout(Duration::ZERO), "attempt_timeout"),
        (RetryPolicy::builder().pauses(Duration::ZERO, second), "pauses"),
        (RetryPolicy::builder().pauses(second * 2, second), "pauses"),
    ];
    for (builder, says) in cases {
        let refused = builder.build().expect_err("refused");
        assert!(refused.to_string().contains(says), "{refused} should name {says}");
    }
    assert!(RetryPolicy::builder().deadline(idem_client::DEADLINE_MAX).build().is_ok());
}

/// The first attempt goes to the service `poll_ready` made ready: under a concurrency limit
/// of one, the permit it took is the one the attempt uses (a clone would wait for a permit
/// the ready one holds, for ever).
#[tokio::test(start_paused = true)]
async fn the_first_attempt_uses_the_service_made_ready() {
    let (server, seen) = scripted(vec![Some((201, NONE))]);
    let limited = Server::new(tower::limit::ConcurrencyLimitLayer::new(1).layer(server));
    let (status, attempts) = send(limited, policy(), None, &[]).await.expect("answered");
    assert_eq!((status.as_u16(), attempts.count), (201, 1));
    assert_eq!(seen.lock().expect("the log").len(), 1);
}

/// A pause that would end within a timer's granularity of the deadline is not begun: the
/// timer may wake a millisecond late, and the attempt after it would start past the
/// deadline. Here the server asks for 1 s and the deadline is 50 us after that.
#[tokio::test(start_paused = true)]
async fn a_pause_that_ends_at_the_deadline_is_not_begun() {
    let (server, seen) = scripted(vec![Some((503, &[("retry-after", "1")])), Some((201, NONE))]);
    let tight = RetryPolicy::builder()
        .deadline(Duration::from_secs(1) + Duration::from_micros(50))
        .pauses(Duration::from_nanos(1), Duration::from_nanos(1))
        .build()
        .expect("a valid policy");
    let ended = send(server, tight, Some(Intent::new()), NONE).await;
    assert!(matches!(ended, Err(ClientError::OutcomeUnknown { attempts: 1, .. })), "{ended:?}");
    assert_eq!(seen.lock().expect("the log").len(), 1, "an attempt at the deadline");
}

/// A caller's own key in the draft's quoted form: the error names the key the server
/// reads (unquoted), so that `Intent::from_id` of it is the same key, as the errors say.
#[tokio::test(start_paused = true)]
async fn the_key_an_error_names_is_the_key_the_server_reads() {
    let (server, seen) = scripted(vec![Some((503, NONE))]);
    let own = [("idempotency-key", r#" "order-\"7\"" "#)];
    let ended = send(server.clone(), policy(), None, &own).await;
    let Err(ClientError::OutcomeUnknown { key, .. }) = ended else { panic!("{ended:?}") };
    assert_eq!(key, r#"order-"7""#);
    let before = seen.lock().expect("the log").len();
    let again = Intent::from_id(&key).expect("the error's key is a key");
    let _ = send(server, policy(), Some(again), NONE).await;
    let seen = seen.lock().expect("the log").clone();
    let read = |s: &Seen| idem_core::key_text_of_header(s.key.as_deref().expect("a key"));
    assert_eq!(read(&seen[0]), read(&seen[before]), "the same key, read as a server reads it");
}
