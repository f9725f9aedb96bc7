//! idem-http's integration tests: one binary, one module per concern. Most drive the
//! layer in process (`tower::ServiceExt::oneshot`); `sockets` runs a real server and a
//! real client on loopback.

mod behaviour;
mod concurrency;
mod edges;
mod features;
mod header;
mod limits;
mod operator;
mod routes;
mod runs;
mod sockets;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::routing::post;
use http::{Request, Response};
use http_body_util::BodyExt;
use idem_core::{ManualClock, MemoryStore, StoreConfig, Timestamp};
use idem_http::{Config, IdempotencyLayer, StoredResponse};
use tower::ServiceExt;

pub(crate) const LEASE: Duration = Duration::from_secs(30);

/// The principal a request speaks for: its `x-tenant` header (a stand-in for the
/// authenticated account).
pub(crate) fn tenant(parts: &http::request::Parts) -> Option<String> {
    parts.headers.get("x-tenant")?.to_str().ok().map(str::to_string)
}

pub(crate) type Store = Arc<MemoryStore<StoredResponse>>;

/// A memory store on a manual clock.
pub(crate) fn store() -> (Store, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(Timestamp::from_millis(1_000_000)));
    let config = StoreConfig::builder().lease(LEASE).build().expect("valid config");
    (Arc::new(MemoryStore::with_clock(config, clock.clone())), clock)
}

/// The layer's config for a memory store: inline store calls, plus `tune`.
pub(crate) fn config(
    tune: impl FnOnce(idem_http::ConfigBuilder) -> idem_http::ConfigBuilder,
) -> Config {
    tune(Config::builder()).build().expect("valid config")
}

/// A router whose `POST /charge` counts its runs and answers `201 charged <n>: <body>`,
/// with a `location` (replayed) and a `set-cookie` (never stored).
pub(crate) fn app(store: Store, config: Config) -> (Router, Arc<AtomicUsize>) {
    app_with(IdempotencyLayer::with_config(store, tenant, config).expect("the store fits"))
}

/// As [`app`], behind `layer`.
pub(crate) fn app_with<St, F>(layer: IdempotencyLayer<St, F>) -> (Router, Arc<AtomicUsize>)
where
    St: idem_core::AsyncKeyStore<StoredResponse> + 'static,
    F: Fn(&http::request::Parts) -> Option<String> + Send + Sync + 'static,
{
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = runs.clone();
    let handler = move |body: String| {
        let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
        async move {
            Response::builder()
                .status(201)
                .header("location", format!("/charges/{n}"))
                .header("set-cookie", "session=secret")
                .body(Body::from(format!("charged {n}: {body}")))
                .expect("valid response")
        }
    };
    let router =
        Router::new().route("/charge", post(handler).get(|| async { "read" })).layer(layer);
    (router, runs)
}

/// A `POST /charge` for tenant `t1` with `key` (if any) and `body`.
pub(crate) fn charge(key: Option<&str>, body: &str) -> Request<Body> {
    let mut request = Request::post("/charge").header("x-tenant", "t1");
    if let Some(key) = key {
        request = request.header("idempotency-key", key);
    }
    request.body(Body::from(body.to_string())).expect("valid request")
}

/// What a response said: status, the replay header, body text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Said {
    pub(crate) status: u16,
    pub(crate) replayed: bool,
    pub(crate) body: String,
    pub(crate) headers: http::HeaderMap,
}

pub(crate) async fn send(router: &Router, request: Request<Body>) -> Said {
    let response = router.clone().oneshot(request).await.expect("infallible");
    said(response).await
}

pub(crate) async fn said(response: Response<Body>) -> Said {
    let (parts, body) = response.into_parts();
    let body = body.collect().await.expect("a body").to_bytes();
    Said {
        status: parts.status.as_u16(),
        replayed: parts.headers.get("idempotent-replayed").is_some_and(|v| v == "true"),
        body: String::from_utf8_lossy(&body).into_owned(),
        headers: parts.headers,
    }
}

pub(crate) fn runs(counter: &AtomicUsize) -> usize {
    counter.load(Ordering::SeqCst)
}

/// Lets other tasks run until `condition` holds; gives up (failing the test) after a
/// bounded number of turns.
pub(crate) async fn yield_until(what: &str, mut condition: impl FnMut() -> bool) {
    for _ in 0..100_000 {
        if condition() {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("gave up waiting for {what}");
}

/// How long a test waits for another task to reach a point before failing (instead of
/// hanging when the code under test is broken). Never reached by a passing test.
pub(crate) const WAIT_LIMIT: Duration = Duration::from_secs(20);

/// Awaits `future`, failing the test if it takes longer than [`WAIT_LIMIT`].
pub(crate) async fn bounded<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
    match tokio::time::timeout(WAIT_LIMIT, future).await {
        Ok(value) => value,
        Err(_) => panic!("gave up after {WAIT_LIMIT:?} waiting for {what}"),
    }
}
