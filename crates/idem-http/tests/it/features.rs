//! What users of Stripe's and Powertools' idempotency ask for: which responses are kept,
//! a fingerprint of the request's meaning, a hook on replays, and counters an operator
//! graphs. Each through the public API.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::body::Body;
use axum::response::IntoResponse;
use axum::routing::post;
use http::{Response, StatusCode};
use idem_http::{EffectFree, IdempotencyLayer, JsonMeaning};

use crate::{charge, config, send, store};

/// A `POST /charge` answering `status(n)` on its n-th run, counting runs.
fn answering(status: fn(usize) -> u16) -> (axum::routing::MethodRouter, Arc<AtomicUsize>) {
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = runs.clone();
    let route = post(move || {
        let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
        async move {
            Response::builder().status(status(n)).body(Body::from(format!("run {n}"))).expect("ok")
        }
    });
    (route, runs)
}

/// By default every response is kept, failures included (as Stripe keeps 500s): a retry
/// of a 500 replays it. A status named effect-free releases its key instead: the retry
/// runs again, and the release is counted.
#[tokio::test]
async fn every_response_is_kept_unless_its_status_is_named_effect_free() {
    let first_fails = |n: usize| if n == 1 { 429 } else { 201 };
    for (policy, retried_runs) in
        [(None, 1), (Some(EffectFree::statuses([StatusCode::TOO_MANY_REQUESTS])), 2)]
    {
        let (route, runs) = answering(first_fails);
        let config = config(|c| match policy.clone() {
            Some(policy) => c.release_on(policy),
            None => c,
        });
        let layer = IdempotencyLayer::with_config(store().0, crate::tenant, config).expect("fits");
        let stats = layer.clone();
        let router = Router::new().route("/charge", route).layer(layer);
        let first = send(&router, charge(Some("k1"), "x")).await;
        assert_eq!(first.status, 429);
        let retry = send(&router, charge(Some("k1"), "x")).await;
        assert_eq!(runs.load(Ordering::SeqCst), retried_runs, "{retry:?}");
        let expected = if retried_runs == 1 { (429, true) } else { (201, false) };
        assert_eq!((retry.status, retry.replayed), expected);
        assert_eq!(stats.stats().released, (retried_runs - 1) as u64);
    }
}

/// A JSON body's meaning: the same request with its fields reordered, its whitespace
/// changed and a `client_time` field that differs on every attempt replays; a change of
/// meaning (the amount) is another request (422); a body that is not JSON is 400 and
/// claims nothing.
#[tokio::test]
async fn a_json_meaning_ignores_field_order_and_named_fields_and_refuses_non_json() {
    let (route, runs) = answering(|_| 201);
    let meaning = JsonMeaning::new().ignoring("client_time");
    let config = config(|c| c.fingerprint_meaning(meaning));
    let layer = IdempotencyLayer::with_config(store().0, crate::tenant, config).expect("fits");
    let router = Router::new().route("/charge", route).layer(layer);
    let first =
        r#"{"amount": 1050, "currency": "EUR", "client_time": 1, "items": [{"a": 1, "b": 2}]}"#;
    let again = r#"{"items":[{"b":2,"a":1}],"client_time":99,"currency":"EUR","amount":1050}"#;
    assert_eq!(send(&router, charge(Some("k1"), first)).await.status, 201);
    let replay = send(&router, charge(Some("k1"), again)).await;
    assert!(replay.replayed, "the same meaning replays: {replay:?}");
    let other =
        r#"{"amount": 1051, "currency": "EUR", "client_time": 1, "items": [{"a": 1, "b": 2}]}"#;
    assert_eq!(send(&router, charge(Some("k1"), other)).await.status, 422);
    let not_json = send(&router, charge(Some("k2"), "amount=1050")).await;
    assert_eq!(not_json.status, 400, "{not_json:?}");
    assert!(not_json.body.contains("body-not-understood") && not_json.body.contains("JSON"));
    let deep = format!("{}{}", "[".repeat(128), "]".repeat(128));
    assert_eq!(send(&router, charge(Some("k3"), &deep)).await.status, 400, "128 deep: refused");
    let at_limit = format!("{}{}", "[".repeat(127), "]".repeat(127));
    assert_eq!(send(&router, charge(Some("k4"), &at_limit)).await.status, 201, "127 deep: read");
    assert_eq!(runs.load(Ordering::SeqCst), 2, "the first and the 127-deep request ran");
}

/// Without a meaning, the fingerprint is the body's bytes: reordered fields are another
/// request.
#[tokio::test]
async fn by_default_the_fingerprint_is_the_bodys_bytes() {
    let (route, _) = answering(|_| 201);
    let layer = IdempotencyLayer::with_config(store().0, crate::tenant, config(|c| c));
    let router = Router::new().route("/charge", route).layer(layer.expect("fits"));
    assert_eq!(send(&router, charge(Some("k1"), r#"{"a":1,"b":2}"#)).await.status, 201);
    assert_eq!(send(&router, charge(Some("k1"), r#"{"b":2,"a":1}"#)).await.status, 422);
}

/// The replay hook sees every replay (and only replays), with the request, and may add a
/// header to the replayed response.
#[tokio::test]
async fn the_replay_hook_sees_each_replay_and_may_change_its_head() {
    let (route, _) = answering(|_| 201);
    let seen = Arc::new(AtomicUsize::new(0));
    let counter = seen.clone();
    let config = config(|c| {
        c.on_replay(move |request, response| {
            counter.fetch_add(1, Ordering::SeqCst);
            let tenant = request.headers["x-tenant"].clone();
            response.headers.insert("x-replayed-for", tenant);
        })
    });
    let layer = IdempotencyLayer::with_config(store().0, crate::tenant, config).expect("fits");
    let router = Router::new().route("/charge", route).layer(layer);
    let first = send(&router, charge(Some("k1"), "x")).await;
    assert!(!first.headers.contains_key("x-replayed-for"));
    assert_eq!(seen.load(Ordering::SeqCst), 0, "not called for a first answer");
    for n in 1..=2 {
        let replay = send(&router, charge(Some("k1"), "x")).await;
        assert_eq!(replay.headers["x-replayed-for"], "t1");
        assert_eq!(seen.load(Ordering::SeqCst), n);
    }
}

/// The counters an operator graphs, one per answer: acquired, replayed, reused, in
/// flight and recovered.
#[tokio::test]
async fn each_answer_is_counted() {
    let (store, clock) = store();
    let route = post(|body: String| async move {
        if body == "unknown" {
            (StatusCode::BAD_GATEWAY, axum::Extension(idem_http::OutcomeUnknown), "?")
                .into_response()
        } else {
            (StatusCode::CREATED, "ok").into_response()
        }
    });
    let layer = IdempotencyLayer::with_config(store, crate::tenant, config(|c| c));
    let layer = layer.expect("fits");
    let stats = layer.clone();
    let router = Router::new().route("/charge", route).layer(layer);
    for (key, body, status) in [
        ("k1", "x", 201),
        ("k1", "x", 201),
        ("k1", "y", 422),
        ("k2", "unknown", 502),
        ("k2", "unknown", 409),
    ] {
        assert_eq!(send(&router, charge(Some(key), body)).await.status, status, "{key} {body}");
    }
    clock.advance(crate::LEASE);
    assert_eq!(send(&router, charge(Some("k2"), "unknown")).await.status, 502);
    let s = stats.stats();
    let answers = (s.acquired, s.replayed, s.key_reused, s.in_flight, s.recovered);
    assert_eq!(answers, (2, 1, 1, 1, 1), "{s:?}");
    assert_eq!(s.left_in_flight, 2, "{s:?}");
}

/// With the `metrics` feature, the same counts reach the `metrics` facade's recorder,
/// under `idem_http_*_total`.
#[cfg(feature = "metrics")]
#[tokio::test]
async fn the_counts_reach_the_metrics_recorder() {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let (route, _) = answering(|_| 201);
    let layer = IdempotencyLayer::with_config(store().0, crate::tenant, config(|c| c));
    let router = Router::new().route("/charge", route).layer(layer.expect("fits"));
    let _guard = metrics::set_default_local_recorder(&recorder);
    // A current-thread runtime: every count is made on this thread, under the recorder.
    send(&router, charge(Some("k1"), "x")).await;
    send(&router, charge(Some("k1"), "x")).await;
    let counted: std::collections::HashMap<String, u64> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter_map(|(key, _, _, value)| match value {
            DebugValue::Counter(n) => Some((key.key().name().to_string(), n)),
            _ => None,
        })
        .collect();
    assert_eq!(counted.get("idem_http_acquired_total"), Some(&1), "{counted:?}");
    assert_eq!(counted.get("idem_http_replayed_total"), Some(&1), "{counted:?}");
}

/// A duplicate of a request in flight is told to retry after the handlers' usual time
/// (nine in ten of the last took at most that), not after the whole lease left: here 2 s
/// of work under a 30 s lease says 2, and before any handler has answered, the lease.
#[tokio::test(start_paused = true)]
async fn retry_after_follows_how_long_handlers_take_never_past_the_lease() {
    let route = post(|| async {
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
        (StatusCode::CREATED, "done")
    });
    let layer = IdempotencyLayer::with_config(store().0, crate::tenant, config(|c| c));
    let router = Router::new().route("/charge", route).layer(layer.expect("fits"));
    let in_flight = |key: &'static str| {
        let router = router.clone();
        async move {
            let first = tokio::spawn({
                let router = router.clone();
                async move { send(&router, charge(Some(key), "x")).await }
            });
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            let duplicate = send(&router, charge(Some(key), "x")).await;
            assert_eq!(first.await.expect("first").status, 201);
            assert_eq!(duplicate.status, 409, "{duplicate:?}");
            duplicate.headers["retry-after"].to_str().expect("ascii").to_string()
        }
    };
    assert_eq!(in_flight("k1").await, "30", "no handler has answered yet: the lease left");
    assert_eq!(in_flight("k2").await, "2", "the last handler took 2 s");
}

/// With `advertise_expiry`, a kept response says until when its key's answer is
/// replayed (when it was kept plus the store's result TTL, an HTTP date), and every replay
/// says the same; a lifetime past the year 9999 is said as no date, never a panic.
#[tokio::test]
async fn a_kept_response_tells_when_its_key_expires() {
    let (route, _) = answering(|_| 201);
    let layer = IdempotencyLayer::with_config(
        store().0,
        crate::tenant,
        config(|c| c.advertise_expiry(true)),
    );
    let router = Router::new().route("/charge", route).layer(layer.expect("fits"));
    let first = send(&router, charge(Some("k1"), "x")).await;
    let said = first.headers["idempotency-expires"].to_str().expect("ascii").to_string();
    let at = httpdate::parse_http_date(&said).expect("an HTTP date");
    let ttl = idem_core::StoreConfig::RESULT_TTL_DEFAULT;
    let lifetime = at.duration_since(std::time::SystemTime::now()).expect("in the future");
    assert!(lifetime <= ttl && lifetime + std::time::Duration::from_secs(60) > ttl, "{said}");
    let replay = send(&router, charge(Some("k1"), "x")).await;
    assert_eq!(
        (replay.replayed, &replay.headers["idempotency-expires"]),
        (true, &first.headers["idempotency-expires"])
    );
    let forever = idem_core::StoreConfig::builder()
        .result_ttl(std::time::Duration::from_secs(1 << 40))
        .build()
        .expect("valid");
    let store = Arc::new(idem_core::MemoryStore::new(forever));
    let (route, _) = answering(|_| 201);
    let layer =
        IdempotencyLayer::with_config(store, crate::tenant, config(|c| c.advertise_expiry(true)));
    let router = Router::new().route("/charge", route).layer(layer.expect("fits"));
    let far = send(&router, charge(Some("k1"), "x")).await;
    assert_eq!(far.status, 201, "{far:?}");
    assert!(!far.headers.contains_key("idempotency-expires"), "past the year 9999: no date");
    let (route, _) = answering(|_| 201);
    let layer = IdempotencyLayer::with_config(crate::store().0, crate::tenant, config(|c| c));
    let router = Router::new().route("/charge", route).layer(layer.expect("fits"));
    let plain = send(&router, charge(Some("k1"), "x")).await;
    assert!(!plain.headers.contains_key("idempotency-expires"), "off by default");
}

/// A JSON meaning compares numbers as written: two amounts that differ only past what a
/// float holds are two requests (422), and so are `1.0` and `1.00`.
#[tokio::test]
async fn a_json_meaning_compares_numbers_as_written() {
    let (route, _) = answering(|_| 201);
    let config = config(|c| c.fingerprint_meaning(JsonMeaning::new()));
    let layer = IdempotencyLayer::with_config(store().0, crate::tenant, config).expect("fits");
    let router = Router::new().route("/charge", route).layer(layer);
    for (key, first, other) in [
        ("k1", r#"{"amount":100000000000000000000001}"#, r#"{"amount":100000000000000000000000}"#),
        ("k2", r#"{"amount":1.0}"#, r#"{"amount":1.00}"#),
    ] {
        assert_eq!(send(&router, charge(Some(key), first)).await.status, 201);
        assert_eq!(send(&router, charge(Some(key), other)).await.status, 422, "{other}");
        assert!(send(&router, charge(Some(key), first)).await.replayed);
    }
}
