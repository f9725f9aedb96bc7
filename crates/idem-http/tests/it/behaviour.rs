//! One test per row of the layer's table (docs/http.md): methods, a missing key, scope,
//! fingerprint, first request, replay, "nothing happened", and the ambiguous end.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::body::Body;
use axum::extract::Extension;
use axum::routing::post;
use axum::{Router, http::StatusCode};
use http::Request;
use idem_http::{IdempotencyLayer, NothingHappened, Recovering};

use crate::{LEASE, app, charge, config, runs, send, store};

#[tokio::test]
async fn the_first_request_runs_once_and_every_repeat_replays_it() {
    let (store, _) = store();
    let (router, counter) = app(store, config(|c| c));
    let first = send(&router, charge(Some("k1"), "10 EUR")).await;
    assert_eq!(
        (first.status, first.replayed, first.body.as_str()),
        (201, false, "charged 1: 10 EUR")
    );
    for _ in 0..3 {
        let again = send(&router, charge(Some("k1"), "10 EUR")).await;
        assert_eq!((again.status, again.body.as_str()), (201, "charged 1: 10 EUR"));
        assert!(again.replayed, "Idempotent-Replayed: true");
        assert_eq!(again.headers["location"], "/charges/1", "allow-listed header replayed");
        assert!(again.headers.get("set-cookie").is_none(), "other headers never stored");
    }
    assert_eq!(runs(&counter), 1);
}

#[tokio::test]
async fn other_methods_and_requests_without_a_key_pass_through() {
    let (store, _) = store();
    let (router, counter) = app(store, config(|c| c));
    for _ in 0..2 {
        let get = Request::get("/charge").header("idempotency-key", "k1").header("x-tenant", "t1");
        let read = send(&router, get.body(Body::empty()).expect("request")).await;
        assert_eq!((read.status, read.replayed), (200, false), "GET is not the layer's");
        let keyless = send(&router, charge(None, "10 EUR")).await;
        assert_eq!((keyless.status, keyless.replayed), (201, false), "no key: runs");
    }
    assert_eq!(runs(&counter), 2, "each keyless POST ran");
}

#[tokio::test]
async fn a_route_that_requires_a_key_refuses_a_request_without_one() {
    let (store, _) = store();
    let (router, counter) = app(store, config(|c| c.require_key(true)));
    let refused = send(&router, charge(None, "10 EUR")).await;
    assert_eq!(refused.status, 400);
    assert_eq!(refused.headers["content-type"], "application/problem+json");
    assert!(refused.body.contains("\"status\":400") && refused.body.contains("key-missing"));
    assert_eq!(runs(&counter), 0);
}

#[tokio::test]
async fn one_tenant_never_gets_another_tenants_response() {
    let (store, _) = store();
    let (router, counter) = app(store, config(|c| c));
    let mine = send(&router, charge(Some("k1"), "10 EUR")).await;
    let mut theirs = charge(Some("k1"), "10 EUR");
    theirs.headers_mut().insert("x-tenant", "t2".parse().expect("valid"));
    let theirs = send(&router, theirs).await;
    assert_eq!((mine.replayed, theirs.replayed), (false, false), "two tenants, two runs");
    assert_ne!(mine.body, theirs.body);
    let mut anonymous = charge(Some("k1"), "10 EUR");
    anonymous.headers_mut().remove("x-tenant");
    let anonymous = send(&router, anonymous).await;
    assert_eq!(anonymous.status, 400, "no principal, no key: {anonymous:?}");
    assert!(anonymous.body.contains("no-scope"));
    assert_eq!(runs(&counter), 2);
}

#[tokio::test]
async fn the_same_key_for_another_request_is_422_and_the_stored_response_is_untouched() {
    let (store, _) = store();
    let (router, counter) = app(store, config(|c| c));
    send(&router, charge(Some("k1"), "10 EUR")).await;
    let other_body = send(&router, charge(Some("k1"), "99 EUR")).await;
    let mut other_type = charge(Some("k1"), "10 EUR");
    other_type.headers_mut().insert("content-type", "text/csv".parse().expect("valid"));
    let other_type = send(&router, other_type).await;
    let other_path = Request::post("/charge?currency=usd")
        .header("idempotency-key", "k1")
        .header("x-tenant", "t1")
        .body(Body::from("10 EUR"))
        .expect("request");
    let other_path = send(&router, other_path).await;
    for refused in [other_body, other_type, other_path] {
        assert_eq!(refused.status, 422, "{refused:?}");
        assert_eq!(refused.headers["content-type"], "application/problem+json");
        assert!(refused.body.contains("key-reused"), "{refused:?}");
    }
    let replay = send(&router, charge(Some("k1"), "10 EUR")).await;
    assert_eq!((replay.replayed, replay.body.as_str()), (true, "charged 1: 10 EUR"));
    assert_eq!(runs(&counter), 1);
}

#[tokio::test]
async fn a_handler_that_says_nothing_happened_releases_the_key() {
    let (store, _) = store();
    let runs = Arc::new(AtomicUsize::new(0));
    let router = Router::new()
        .route(
            "/charge",
            post({
                let runs = runs.clone();
                move || {
                    let n = runs.fetch_add(1, Ordering::SeqCst);
                    async move {
                        if n == 0 {
                            Err((
                                StatusCode::SERVICE_UNAVAILABLE,
                                Extension(NothingHappened),
                                "bank down",
                            ))
                        } else {
                            Ok((StatusCode::CREATED, "charged"))
                        }
                    }
                }
            }),
        )
        .layer(IdempotencyLayer::with_config(store, crate::tenant, config(|c| c)).expect("fits"));
    let refused = send(&router, charge(Some("k1"), "10 EUR")).await;
    assert_eq!((refused.status, refused.replayed), (503, false));
    let retried = send(&router, charge(Some("k1"), "10 EUR")).await;
    assert_eq!((retried.status, retried.replayed), (201, false), "ran again: {retried:?}");
    let replay = send(&router, charge(Some("k1"), "10 EUR")).await;
    assert_eq!((replay.status, replay.replayed), (201, true));
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_request_whose_handler_never_finished_is_recovered_after_its_lease() {
    let (store, clock) = store();
    let started = Arc::new(tokio::sync::Notify::new());
    let recovered = Arc::new(AtomicUsize::new(0));
    let started_once = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let handler = {
        let (started, recovered) = (started.clone(), recovered.clone());
        move |recovering: Option<Extension<Recovering>>| {
            let (started, recovered) = (started.clone(), recovered.clone());
            let started_once = started_once.clone();
            async move {
                if recovering.is_some() {
                    recovered.fetch_add(1, Ordering::SeqCst);
                    return (StatusCode::OK, "checked the bank: charged once");
                }
                if !started_once.swap(true, Ordering::SeqCst) {
                    started.notify_one();
                    // The client goes away while this runs: the future is dropped here.
                    std::future::pending::<()>().await;
                }
                (StatusCode::CREATED, "charged again, blindly")
            }
        }
    };
    let layer = IdempotencyLayer::with_config(store, crate::tenant, config(|c| c)).expect("fits");
    let router = Router::new().route("/charge", post(handler)).layer(layer);
    let first = tokio::spawn({
        let router = router.clone();
        async move { send(&router, charge(Some("k1"), "x")).await }
    });
    crate::bounded("the handler to start", started.notified()).await;
    first.abort();
    let first = crate::bounded("the aborted request", first).await;
    assert!(first.is_err_and(|e| e.is_cancelled()), "the first request never answered");
    let in_flight = send(&router, charge(Some("k1"), "x")).await;
    assert_eq!(in_flight.status, 409, "still in flight within its lease: {in_flight:?}");
    assert!(in_flight.headers.contains_key("retry-after"));
    clock.advance(LEASE);
    let recovering = send(&router, charge(Some("k1"), "x")).await;
    assert_eq!(
        (recovering.status, recovering.body.as_str()),
        (200, "checked the bank: charged once")
    );
    assert_eq!(recovered.load(Ordering::SeqCst), 1, "the handler was told to check first");
    let replay = send(&router, charge(Some("k1"), "x")).await;
    assert!(replay.replayed);
}

#[tokio::test]
async fn a_handler_that_panicked_leaves_the_key_in_flight_until_recovered() {
    let (store, clock) = store();
    let calls = Arc::new(AtomicUsize::new(0));
    let handler = {
        let calls = calls.clone();
        move |recovering: Option<Extension<Recovering>>| {
            let n = calls.fetch_add(1, Ordering::SeqCst);
            async move {
                assert!(n > 0, "the first run panics half-way");
                match recovering {
                    Some(_) => (StatusCode::OK, "checked first"),
                    None => (StatusCode::CREATED, "acted blindly"),
                }
            }
        }
    };
    let layer = IdempotencyLayer::with_config(store, crate::tenant, config(|c| c)).expect("fits");
    let stats = layer.clone();
    let router = Router::new().route("/charge", post(handler)).layer(layer);
    // The handler runs on a task of its own: its panic ends that task, not the server's,
    // and the client is told that whether it acted is unknown.
    let first = send(&router, charge(Some("k1"), "x")).await;
    assert_eq!(first.status, 500, "{first:?}");
    assert!(first.body.contains("handler-failed"), "{}", first.body);
    assert_eq!(stats.stats().left_in_flight, 1, "counted for the operator");
    let in_flight = send(&router, charge(Some("k1"), "x")).await;
    assert_eq!(in_flight.status, 409, "not released by the panic: {in_flight:?}");
    clock.advance(LEASE);
    let recovered = send(&router, charge(Some("k1"), "x")).await;
    assert_eq!((recovered.status, recovered.body.as_str()), (200, "checked first"));
}

/// A scope function that returns an invalid scope is the server's bug: the client gets a
/// 500 with an error id, and nothing of the principal (its length, a byte, a position);
/// no handler runs.
#[tokio::test]
async fn an_invalid_scope_is_a_500_with_an_error_id_and_nothing_of_the_principal() {
    let (store, _) = store();
    let (router, counter) = app(store, config(|c| c));
    for principal in [" padded", &"x".repeat(300)] {
        let mut request = charge(Some("k1"), "10 EUR");
        request.headers_mut().insert("x-tenant", principal.parse().expect("valid"));
        let refused = send(&router, request).await;
        assert_eq!(refused.status, 500, "{refused:?}");
        assert!(refused.body.contains("bad-scope") && refused.body.contains("error id"));
        for detail in ["position", "bytes long", "space", "padded", "key is", "scope is"] {
            assert!(!refused.body.contains(detail), "{detail:?} reached the client: {refused:?}");
        }
    }
    assert_eq!(runs(&counter), 0);
}
