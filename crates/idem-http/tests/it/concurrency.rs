//! Duplicates that arrive while the first request runs: 409 with `Retry-After`, or (with
//! `wait_for_first`) a replay of the first's response; 64 at once, the handler runs once.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::routing::post;
use idem_http::{Blocking, Config, IdempotencyLayer};
use tokio::sync::Notify;

use crate::{Store, charge, config, send, store};

/// A router whose handler tells `started`, then waits for `release` before answering.
fn gated(store: Store, config: Config) -> (Router, Arc<AtomicUsize>, Arc<Notify>, Arc<Notify>) {
    let (started, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let runs = Arc::new(AtomicUsize::new(0));
    let handler = {
        let (started, release, runs) = (started.clone(), release.clone(), runs.clone());
        move |body: String| {
            let (started, release, runs) = (started.clone(), release.clone(), runs.clone());
            async move {
                let n = runs.fetch_add(1, Ordering::SeqCst) + 1;
                started.notify_one();
                release.notified().await;
                format!("charged {n}: {body}")
            }
        }
    };
    let layer = IdempotencyLayer::with_config(store, crate::tenant, config).expect("fits");
    (Router::new().route("/charge", post(handler)).layer(layer), runs, started, release)
}

#[tokio::test]
async fn a_duplicate_in_flight_is_409_with_retry_after_and_a_problem() {
    let (store, _) = store();
    let (router, runs, started, release) = gated(store, config(|c| c));
    let first = tokio::spawn({
        let router = router.clone();
        async move { send(&router, charge(Some("k1"), "10 EUR")).await }
    });
    crate::bounded("the handler to start", started.notified()).await;
    let duplicate = send(&router, charge(Some("k1"), "10 EUR")).await;
    assert_eq!(duplicate.status, 409);
    assert_eq!(duplicate.headers["retry-after"], "30", "the lease left, in seconds");
    assert_eq!(duplicate.headers["content-type"], "application/problem+json");
    assert!(duplicate.body.contains("key-in-flight") && duplicate.body.contains("\"status\":409"));
    release.notify_one();
    let first = crate::bounded("the first request", first).await.expect("first request");
    assert_eq!((first.status, first.replayed), (200, false));
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn with_wait_for_first_a_duplicate_waits_and_replays_the_first() {
    let (store, _) = store();
    let wait = Some(Duration::from_secs(30));
    let (router, runs, started, release) = gated(store, config(|c| c.wait_for_first(wait)));
    let first = tokio::spawn({
        let router = router.clone();
        async move { send(&router, charge(Some("k1"), "10 EUR")).await }
    });
    crate::bounded("the handler to start", started.notified()).await;
    let duplicate = tokio::spawn({
        let router = router.clone();
        async move { send(&router, charge(Some("k1"), "10 EUR")).await }
    });
    release.notify_one();
    let first = crate::bounded("the first request", first).await.expect("first");
    let duplicate = crate::bounded("the duplicate", duplicate).await.expect("duplicate");
    assert_eq!((first.replayed, duplicate.replayed), (false, true));
    assert_eq!(duplicate.body, first.body);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

/// 64 duplicates at once, twenty times over, on a multi-thread runtime: the handler runs
/// once per key and every duplicate answers with that one run's response.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_concurrent_duplicates_run_the_handler_once() {
    let (store, _) = store();
    let wait = Some(Duration::from_secs(60));
    let (router, runs) = crate::app(store, config(|c| c.wait_for_first(wait)));
    for round in 0..20 {
        let key = format!("round-{round}");
        let requests: Vec<_> = (0..64)
            .map(|_| {
                let (router, key) = (router.clone(), key.clone());
                tokio::spawn(async move { send(&router, charge(Some(&key), "10 EUR")).await })
            })
            .collect();
        let mut bodies = Vec::new();
        for request in requests {
            let said = crate::bounded("a duplicate", request).await.expect("a request");
            assert_eq!(said.status, 201, "round {round}: {said:?}");
            bodies.push(said.body);
        }
        bodies.dedup();
        assert_eq!(bodies.len(), 1, "round {round}: one response for all 64: {bodies:?}");
        assert_eq!(runs.load(Ordering::SeqCst), round + 1, "round {round}: one run");
    }
}

/// A sync store behind `Blocking` (each call on tokio's blocking pool) serves the layer
/// as an async one does: here the SQLite store through its sync contract.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sync_store_behind_blocking_serves_the_layer() {
    let dir = std::env::temp_dir().join(format!("idem-http-sqlite-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let path = dir.join("keys.db");
    let _ = std::fs::remove_file(&path);
    let sqlite = idem_store_sqlite::SqliteStore::open(&path, idem_core::StoreConfig::default())
        .expect("open");
    let sqlite = Blocking::new(Arc::new(sqlite));
    let layer = IdempotencyLayer::with_config(sqlite, crate::tenant, Config::default());
    let layer = layer.expect("fits");
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = runs.clone();
    let handler = move || {
        let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
        async move { format!("charged {n}") }
    };
    let router = Router::new().route("/charge", post(handler)).layer(layer);
    let first = send(&router, charge(Some("k1"), "10 EUR")).await;
    let again = send(&router, charge(Some("k1"), "10 EUR")).await;
    assert_eq!((first.replayed, again.replayed, again.body.as_str()), (false, true, "charged 1"));
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    std::fs::remove_dir_all(&dir).ok();
}
