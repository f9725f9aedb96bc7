//! Each limit at its edge: the body (413 before anything is claimed), the stored response
//! (the first caller gets it whole, repeats get its status and a problem), the waiters.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::routing::post;
use idem_http::{Config, ConfigError, IdempotencyLayer};
use tokio::sync::Notify;

use crate::{app, charge, config, runs, send, store};

#[tokio::test]
async fn a_body_at_the_limit_runs_and_one_byte_more_is_413_with_nothing_claimed() {
    let (store, _) = store();
    let (router, counter) = app(store, config(|c| c.body_bytes_max(16)));
    let over = send(&router, charge(Some("k1"), &"x".repeat(17))).await;
    assert_eq!(over.status, 413, "{over:?}");
    assert!(over.body.contains("body-too-large") && over.body.contains("16 bytes"));
    let at = send(&router, charge(Some("k1"), &"x".repeat(16))).await;
    assert_eq!((at.status, at.replayed), (201, false), "the key was not claimed by the 413");
    assert_eq!(runs(&counter), 1);
}

#[tokio::test]
async fn a_response_over_the_stored_limit_reaches_its_caller_and_replays_as_a_problem() {
    let (store, _) = store();
    let (router, counter) = app(store, config(|c| c.response_bytes_max(20)));
    let body = "a long order description";
    let first = send(&router, charge(Some("k1"), body)).await;
    assert_eq!(first.body, format!("charged 1: {body}"), "the first caller gets it whole");
    let replay = send(&router, charge(Some("k1"), body)).await;
    assert_eq!((replay.status, replay.replayed), (201, true), "same status: it did happen");
    assert_eq!(replay.headers["content-type"], "application/problem+json");
    assert!(replay.body.contains("response-too-large") && replay.body.contains("20-byte"));
    assert_eq!(replay.headers["location"], "/charges/1");
    let fits = send(&router, charge(Some("k2"), "short")).await;
    let again = send(&router, charge(Some("k2"), "short")).await;
    assert_eq!(again.body, fits.body, "20 bytes or fewer are kept: {}", fits.body.len());
    assert_eq!(runs(&counter), 2);
}

/// On tokio's paused clock: a nap passes no real time, so a duplicate that waited (the
/// break this catches) is seen at once by the time it took, instead of after a real wait.
#[tokio::test(start_paused = true)]
async fn past_waiters_max_a_duplicate_is_answered_409_at_once() {
    let (store, _) = store();
    let wait = Some(Duration::from_secs(60));
    let config = config(|c| c.wait_for_first(wait).waiters_max(1));
    let (started, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let runs = Arc::new(AtomicUsize::new(0));
    let handler = {
        let (started, release, runs) = (started.clone(), release.clone(), runs.clone());
        move || {
            let (started, release, runs) = (started.clone(), release.clone(), runs.clone());
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
                started.notify_one();
                release.notified().await;
                "charged"
            }
        }
    };
    let layer = IdempotencyLayer::with_config(store.clone(), crate::tenant, config)
        .expect("the store fits");
    let router = Router::new().route("/charge", post(handler)).layer(layer);
    let spawn =
        |router: Router| tokio::spawn(async move { send(&router, charge(Some("k1"), "x")).await });
    let first = spawn(router.clone());
    crate::bounded("the handler to start", started.notified()).await;
    let waiting = spawn(router.clone());
    // On this one-thread runtime the waiter runs until its first sleep, by which time it
    // holds the one waiter's place: its claim was answered "in flight" once.
    crate::yield_until("the first duplicate waits", || store.stats().in_flight >= 1).await;
    // On the paused clock this second passes only once every task waits on time: a
    // duplicate that naps instead of being refused lets it pass first.
    let refused =
        tokio::time::timeout(Duration::from_secs(1), send(&router, charge(Some("k1"), "x")))
            .await
            .expect("answered at once, without waiting for the first request");
    assert_eq!(refused.status, 409, "{refused:?}");
    release.notify_one();
    assert_eq!(crate::bounded("the first", first).await.expect("first").status, 200);
    assert!(crate::bounded("the waiter", waiting).await.expect("waiter").replayed);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

#[test]
fn settings_out_of_range_are_refused_by_name() {
    let short = idem_http::ConfigBuilder::WAIT_MIN - Duration::from_nanos(1);
    let cases = [
        (Config::builder().body_bytes_max(0).build(), "body_bytes_max"),
        (Config::builder().response_bytes_max((64 << 20) + 1).build(), "response_bytes_max"),
        (Config::builder().waiters_max(0).build(), "waiters_max"),
        (Config::builder().wait_for_first(Some(Duration::ZERO)).build(), "wait_for_first"),
        (Config::builder().wait_for_first(Some(short)).build(), "wait_for_first"),
        (Config::builder().wait_for_first(Some(Duration::MAX)).build(), "wait_for_first"),
        (Config::builder().methods([]).build(), "methods"),
    ];
    for (built, name) in cases {
        let error: ConfigError = built.expect_err(name);
        assert!(error.to_string().contains(name), "{error}");
    }
}

/// The store's own limits answer before anything runs: a principal at its in-flight
/// quota 429 with `Retry-After`, a full store 503 saying only what is true (no
/// `Retry-After`: room frees as results expire, which no client can hurry; nothing of the
/// server's configuration), both counted.
#[tokio::test]
async fn the_store_at_its_limits_is_503_or_429_and_nothing_runs() {
    let clock = Arc::new(idem_core::ManualClock::new(idem_core::Timestamp::from_millis(1)));
    let limits = [
        (idem_core::StoreConfig::builder().capacity(1), 503, "store-full", false),
        (idem_core::StoreConfig::builder().scope_in_flight_max(1), 429, "scope-quota", true),
    ];
    for (builder, status, slug, retry_after) in limits {
        let store =
            idem_core::MemoryStore::with_clock(builder.build().expect("valid"), clock.clone());
        let store = Arc::new(store);
        // One key held in flight (claimed, never settled) fills either limit.
        let held = idem_core::ScopedKey::parse("t1", "held").expect("valid");
        let fp = idem_core::Fingerprint::builder("x").finish();
        let _lease = idem_core::KeyStore::claim(&*store, &held, &fp).expect("claimed");
        let layer = IdempotencyLayer::with_config(store, crate::tenant, config(|c| c));
        let layer = layer.expect("fits");
        let stats = layer.clone();
        let (router, counter) = crate::app_with(layer);
        let refused = send(&router, charge(Some("k1"), "10 EUR")).await;
        assert_eq!(refused.status, status, "{refused:?}");
        assert!(refused.body.contains(slug), "{refused:?}");
        assert_eq!(refused.headers.contains_key("retry-after"), retry_after, "{refused:?}");
        assert!(!refused.body.contains("capacity"), "no configuration advice: {refused:?}");
        let counted = stats.stats();
        assert_eq!(
            (counted.store_full, counted.scope_quota),
            if retry_after { (0, 1) } else { (1, 0) }
        );
        assert_eq!(counted.store_errors, 0, "a full store is not a failing one");
        assert_eq!(runs(&counter), 0, "nothing ran");
    }
}

/// A store told its leases never run out (`Duration::MAX`, as `StoreConfig` allows): the
/// run's timers are cut to thirty years, so the handler runs and its answer replays. The
/// run's arithmetic once overflowed here, before the handler ran, and left the key held.
#[tokio::test]
async fn a_store_whose_leases_never_run_out_still_runs_and_replays() {
    for lease in [Duration::MAX, Duration::from_secs(u64::MAX / 2)] {
        let clock = Arc::new(idem_core::ManualClock::new(idem_core::Timestamp::from_millis(1)));
        let config = idem_core::StoreConfig::builder().lease(lease).build().expect("valid");
        let store = Arc::new(idem_core::MemoryStore::with_clock(config, clock));
        let (router, counter) = app(store, crate::config(|c| c));
        let first = send(&router, charge(Some("k1"), "x")).await;
        assert_eq!((first.status, first.replayed), (201, false), "{lease:?}: {first:?}");
        let again = send(&router, charge(Some("k1"), "x")).await;
        assert_eq!((again.status, again.replayed), (201, true), "{lease:?}: {again:?}");
        assert_eq!(runs(&counter), 1);
    }
}

/// A scope function that panics (for one principal) is a server bug: that request is
/// answered 500 `bad-scope` with only an error id, nothing is claimed, and the service
/// goes on answering the others. The panic once ended the connection unanswered.
#[tokio::test]
async fn a_scope_function_that_panics_is_answered_as_a_bad_scope() {
    let (store, _) = store();
    let scope = |parts: &http::request::Parts| {
        let tenant = crate::tenant(parts);
        assert_ne!(tenant.as_deref(), Some("panics"), "a scope function that panics");
        tenant
    };
    let layer = IdempotencyLayer::with_config(store.clone(), scope, crate::config(|c| c));
    let (router, counter) = crate::app_with(layer.expect("the store fits"));
    let mut request = charge(Some("k1"), "x");
    request.headers_mut().insert("x-tenant", "panics".parse().expect("a header value"));
    let refused = send(&router, request).await;
    assert_eq!(refused.status, 500, "{refused:?}");
    assert!(refused.body.contains("bad-scope") && !refused.body.contains("panic"));
    assert_eq!((runs(&counter), store.len()), (0, 0), "nothing ran, nothing was claimed");
    let answered = send(&router, charge(Some("k1"), "x")).await;
    assert_eq!((answered.status, answered.replayed), (201, false));
}
