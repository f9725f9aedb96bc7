//! The operator's handle: a key looked up and forgotten through the public API, as an
//! application mounts it on an admin route of its own.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::body::Body;
use axum::routing::{any, post};
use http::{Request, Response};
use idem_core::{Forgotten, RecordState};
use idem_http::{IdempotencyLayer, OperatorError};
use tokio::sync::Semaphore;

use crate::{LEASE, bounded, charge, config, send, store, yield_until};

/// A `POST /charge` that answers 500 on its first run (a bug), 201 after, and an admin
/// route (`/admin/keys`) that hands every request to the layer's operator as "alice".
fn app() -> (Router, Arc<AtomicUsize>, impl Fn() -> idem_http::LayerStats) {
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = runs.clone();
    let handler = post(move || {
        let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
        let status = if n == 1 { 500 } else { 201 };
        async move {
            Response::builder().status(status).body(Body::from(format!("run {n}"))).expect("ok")
        }
    });
    let layer = IdempotencyLayer::with_config(store().0, crate::tenant, config(|c| c));
    let layer = layer.expect("fits");
    let operator = layer.operator();
    let admin = any(move |request: Request<Body>| {
        let operator = operator.clone();
        async move { operator.serve(request, "alice").await }
    });
    let stats = layer.clone();
    let router = Router::new().route("/charge", handler).layer(layer).route("/admin/keys", admin);
    (router, runs, move || stats.stats())
}

fn admin(method: &str, query: &str) -> Request<Body> {
    let uri = format!("/admin/keys?{query}");
    Request::builder().method(method).uri(uri).body(Body::empty()).expect("valid request")
}

fn json(body: &str) -> serde_json::Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"))
}

/// A 500 a bug stored is replayed; the operator sees it finished, forgets it (a 200
/// naming what was removed, counted), and the retry runs the handler again. A second
/// forget and a lookup of the forgotten key are 404.
#[tokio::test]
async fn a_forgotten_response_runs_again_on_its_next_request() {
    let (router, runs, stats) = app();
    assert_eq!(send(&router, charge(Some("k1"), "x")).await.status, 500);
    assert_eq!(send(&router, charge(Some("k1"), "x")).await.status, 500, "replayed");
    let looked = send(&router, admin("GET", "scope=t1&key=k1")).await;
    assert_eq!(looked.status, 200, "{looked:?}");
    let record = &json(&looked.body)["record"];
    assert_eq!(record["state"], "finished", "{looked:?}");
    assert!(record["expires_at"].as_str().is_some_and(|d| d.ends_with("GMT")), "{record}");
    assert_eq!(record["fingerprint"].as_str().map(str::len), Some(64), "{record}");
    // The store's clock starts at 1,000,000 ms; a result lives 24 hours.
    let expires_ms = 1_000_000 + idem_core::StoreConfig::RESULT_TTL_DEFAULT.as_millis() as u64;
    assert_eq!(record["expires_at_ms"], expires_ms, "{record}");
    let date = std::time::UNIX_EPOCH + std::time::Duration::from_millis(expires_ms);
    assert_eq!(record["expires_at"], httpdate::fmt_http_date(date), "{record}");
    let gone = send(&router, admin("DELETE", "scope=t1&key=k1&reason=the+500+of+release+42")).await;
    assert_eq!(gone.status, 200, "{gone:?}");
    assert_eq!(json(&gone.body)["forgotten"], *record, "what was removed is what was seen");
    assert_eq!(stats().forgotten, 1);
    let retried = send(&router, charge(Some("k1"), "x")).await;
    assert_eq!((retried.status, retried.replayed), (201, false), "{retried:?}");
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    let absent = send(&router, admin("GET", "scope=t1&key=absent")).await;
    let never = send(&router, admin("DELETE", "scope=t1&key=absent&reason=r")).await;
    assert_eq!((absent.status, never.status), (404, 404), "{absent:?} {never:?}");
    assert_eq!(stats().forgotten, 1, "a forget that found nothing is not counted");
}

/// While the first request runs, its key is in flight: a lookup says so with its lease,
/// a forget is refused (409, with a Retry-After within the lease) and changes nothing,
/// and the first request's answer is then replayed as usual.
#[tokio::test]
async fn a_key_whose_first_request_runs_is_never_forgotten() {
    let gate = Arc::new(Semaphore::new(0));
    let (runs, counter, held) = (Arc::new(AtomicUsize::new(0)), gate.clone(), Arc::new(()));
    let started = runs.clone();
    let handler = post(move || {
        let (gate, started, _held) = (counter.clone(), started.clone(), held.clone());
        async move {
            started.fetch_add(1, Ordering::SeqCst);
            let _permit = gate.acquire().await.expect("open");
            "charged"
        }
    });
    let layer = IdempotencyLayer::with_config(store().0, crate::tenant, config(|c| c));
    let layer = layer.expect("fits");
    let (operator, stats) = (layer.operator(), layer.clone());
    let router = Router::new().route("/charge", handler).layer(layer);
    let first = tokio::spawn({
        let router = router.clone();
        async move { send(&router, charge(Some("k1"), "x")).await }
    });
    yield_until("the first request runs", || runs.load(Ordering::SeqCst) == 1).await;
    let record = operator.inspect("t1", "k1").await.expect("inspect").expect("in flight");
    assert!(matches!(record.state, RecordState::InFlight { .. }), "{record:?}");
    let refused = operator.forget("t1", "k1", "alice", "stuck?").await.expect("answered");
    assert!(matches!(refused, Forgotten::HolderLive { .. }), "{refused:?}");
    let app = Router::new().route(
        "/admin/keys",
        any(move |request: Request<Body>| {
            let operator = operator.clone();
            async move { operator.serve(request, "alice").await }
        }),
    );
    let over_http = send(&app, admin("DELETE", "scope=t1&key=k1&reason=stuck")).await;
    assert_eq!(over_http.status, 409, "{over_http:?}");
    let after: u64 = over_http.headers["retry-after"].to_str().expect("ascii").parse().expect("n");
    // The store's clock has not moved since the claim: the whole lease is left.
    assert_eq!(after, LEASE.as_secs(), "Retry-After on the store's clock");
    assert_eq!(stats.stats().forgotten, 0, "refusals are not counted");
    gate.add_permits(1);
    let first = bounded("the first request", first).await.expect("joined");
    assert_eq!(first.status, 200);
    let retry = send(&router, charge(Some("k1"), "x")).await;
    assert!(retry.replayed, "the refused forget changed nothing: {retry:?}");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

/// Every bad call is refused by name before the store is asked: a missing or repeated
/// parameter, a bad escape, an invalid key, a forget without a reason or with one too
/// long, a method the operator does not answer.
#[tokio::test]
async fn a_bad_operator_call_names_what_is_wrong() {
    let (router, _, stats) = app();
    send(&router, charge(Some("k1"), "x")).await;
    let long = "r".repeat(idem_http::FORGET_REASON_BYTES_MAX + 1);
    let cases: [(&str, String, u16, &str); 9] = [
        ("GET", "key=k1".into(), 400, "\\\"scope\\\""),
        ("GET", "scope=t1&scope=t2&key=k1".into(), 400, "twice"),
        ("GET", "scope=t1&key=k%zz".into(), 400, "percent escape"),
        ("GET", "scope=t1&key=".into(), 400, "invalid scope or key"),
        ("DELETE", "scope=t1&key=k1".into(), 400, "\\\"reason\\\""),
        ("DELETE", "scope=t1&key=k1&reason=+".into(), 400, "reason"),
        ("DELETE", format!("scope=t1&key=k1&reason={long}"), 400, "reason"),
        ("POST", "scope=t1&key=k1".into(), 405, "GET"),
        ("GET", format!("scope=t1&key=k1&pad={}", "p".repeat(4_096)), 400, "at most 4096"),
    ];
    for (method, query, status, says) in cases {
        let answer = send(&router, admin(method, &query)).await;
        assert_eq!(answer.status, status, "{method} {query}: {answer:?}");
        assert!(answer.body.contains(says), "{method} {query} should say {says}: {}", answer.body);
        if status == 405 {
            assert_eq!(answer.headers["allow"], "GET, DELETE", "{answer:?}");
        }
    }
    assert_eq!(stats().forgotten, 0, "nothing was forgotten");
    let replay = send(&router, charge(Some("k1"), "x")).await;
    assert!(replay.replayed, "{replay:?}");
    let layer = IdempotencyLayer::with_config(store().0, crate::tenant, config(|c| c));
    let operator = layer.expect("fits").operator();
    let refused = operator.forget("t1", "k1", "alice", "").await;
    assert!(matches!(refused, Err(OperatorError::Reason(0))), "{refused:?}");
}

/// A store that fails answers 503 saying only that it failed: never the store's own
/// words (SQL, a path, a server's message).
#[tokio::test]
async fn a_store_failure_is_a_503_without_the_stores_words() {
    use idem_testkit::faulty::{Faulty, Op};
    let secret = "SELECT * FROM idem.claims: /var/lib/postgresql is full";
    let store = Faulty::new(store().0).failing(Op::Inspect, secret).failing(Op::Forget, secret);
    let layer = IdempotencyLayer::with_config(store, crate::tenant, config(|c| c));
    let operator = layer.expect("fits").operator();
    for (method, query) in [("GET", "scope=t1&key=k1"), ("DELETE", "scope=t1&key=k1&reason=r")] {
        let answer = operator.serve(admin(method, query), "alice").await;
        let answer = crate::said(answer.map(Body::new)).await;
        assert_eq!(answer.status, 503, "{answer:?}");
        assert!(!answer.body.contains("SELECT") && !answer.body.contains("/var"), "{answer:?}");
    }
}

/// A claim whose handler's outcome is unknown stays in flight; once its lease runs out,
/// the operator sees it pending, and may forget it with a reason of the longest length
/// allowed: the next request then runs afresh instead of recovering.
#[tokio::test]
async fn a_pending_claim_is_shown_pending_and_can_be_forgotten() {
    let (store, clock) = store();
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = runs.clone();
    let handler = post(move || {
        counter.fetch_add(1, Ordering::SeqCst);
        async { (http::StatusCode::BAD_GATEWAY, axum::Extension(idem_http::OutcomeUnknown), "?") }
    });
    let layer = IdempotencyLayer::with_config(store, crate::tenant, config(|c| c)).expect("fits");
    let operator = layer.operator();
    let router = Router::new().route("/charge", handler).layer(layer);
    assert_eq!(send(&router, charge(Some("k1"), "x")).await.status, 502);
    clock.advance(LEASE);
    let looked = operator.serve(admin("GET", "scope=t1&key=k1"), "alice").await;
    let looked = crate::said(looked.map(Body::new)).await;
    assert_eq!(json(&looked.body)["record"]["state"], "pending", "{looked:?}");
    let reason = "r".repeat(idem_http::FORGET_REASON_BYTES_MAX);
    let gone = operator.forget("t1", "k1", "alice", &reason).await.expect("forgotten");
    assert!(matches!(gone, Forgotten::Removed(_)), "{gone:?}");
    let fresh = send(&router, charge(Some("k1"), "x")).await;
    assert_eq!((fresh.status, runs.load(Ordering::SeqCst)), (502, 2), "ran afresh: {fresh:?}");
}

/// A forget of an invalid key without a reason names the key first, as `forget` does:
/// the scope, then the key, then the reason.
#[tokio::test]
async fn a_bad_forget_names_the_scope_then_the_key_then_the_reason() {
    let (router, _, _) = app();
    let cases = [
        ("scope=&key=k1", "scope is empty"),
        ("scope=t1&key=", "key is empty"),
        ("scope=t1&key=k1", "\\\"reason\\\""),
    ];
    for (query, says) in cases {
        let answer = send(&router, admin("DELETE", query)).await;
        assert_eq!(answer.status, 400, "{query}: {answer:?}");
        assert!(answer.body.contains(says), "{query} should say {says}: {}", answer.body);
    }
}

/// A store whose results never run out (`Duration::MAX`, which `StoreConfig` takes):
/// the deadline is past what an HTTP date can name, so the record shows it as `null`
/// beside its milliseconds; a lookup and a forget are answered (they once panicked, the
/// forget after it had taken effect).
#[tokio::test]
async fn a_record_whose_result_never_expires_is_shown_and_forgotten() {
    let clock = Arc::new(idem_core::ManualClock::new(idem_core::Timestamp::from_millis(1)));
    let never = idem_core::StoreConfig::builder().result_ttl(std::time::Duration::MAX).build();
    let store = idem_core::MemoryStore::with_clock(never.expect("valid"), clock);
    let layer = IdempotencyLayer::with_config(Arc::new(store), crate::tenant, config(|c| c));
    let layer = layer.expect("fits");
    let operator = layer.operator();
    let serve = any(move |request: Request<Body>| {
        let operator = operator.clone();
        async move { operator.serve(request, "alice").await }
    });
    let router = Router::new()
        .route("/charge", post(|| async { "charged" }))
        .layer(layer)
        .route("/admin/keys", serve);
    assert_eq!(send(&router, charge(Some("k1"), "x")).await.status, 200);
    let looked = send(&router, admin("GET", "scope=t1&key=k1")).await;
    assert_eq!(looked.status, 200, "{looked:?}");
    let record = &json(&looked.body)["record"];
    assert!(record["expires_at"].is_null() && record["expires_at_ms"].is_u64(), "{record}");
    let forgotten = send(&router, admin("DELETE", "scope=t1&key=k1&reason=a%20test")).await;
    assert_eq!(forgotten.status, 200, "{forgotten:?}");
}
