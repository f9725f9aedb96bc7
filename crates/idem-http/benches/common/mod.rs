//! What the layer's benches share: the handler every row runs, the layer around it, a
//! client on one keep-alive connection, and fresh keys.

#![allow(dead_code, reason = "each bench uses part of it")]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::post;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use idem_core::AsyncKeyStore;
use idem_http::{IdempotencyLayer, StoredResponse};

/// Every request's body: 1 KiB.
pub(crate) const BODY: [u8; 1024] = [b'x'; 1024];

/// The handler every row runs: reads the body, answers 201 with a small JSON body.
pub(crate) fn routes() -> Router {
    Router::new().route(
        "/charge",
        post(|body: Bytes| async move {
            (http::StatusCode::CREATED, format!("{{\"charged\":{}}}", body.len()))
        }),
    )
}

/// [`routes`] behind the layer on `store`, with its defaults.
pub(crate) fn with_layer<S: AsyncKeyStore<StoredResponse> + 'static>(store: S) -> Router {
    routes().layer(IdempotencyLayer::new(store, |_: &_| Some("bench".into())))
}

static FRESH: AtomicU64 = AtomicU64::new(0);

/// A key no request of this process has sent (the process id keeps runs apart on a
/// shared database).
pub(crate) fn fresh_key(_: u64) -> Option<String> {
    Some(format!("k-{}-{}", std::process::id(), FRESH.fetch_add(1, Ordering::Relaxed)))
}

/// A number no other caller of this process got.
pub(crate) fn fresh() -> u64 {
    FRESH.fetch_add(1, Ordering::Relaxed)
}

/// Sends `iters` requests on one keep-alive connection; `key(i)` names each one's key.
/// The time from the connection's first request to its last answer.
pub(crate) async fn drive(
    addr: SocketAddr,
    iters: u64,
    key: impl Fn(u64) -> Option<String>,
) -> Duration {
    let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.expect("handshake");
    tokio::spawn(connection);
    let start = Instant::now();
    for i in 0..iters {
        let mut request = http::Request::post("/charge").header("host", "bench");
        if let Some(key) = key(i) {
            request = request.header("idempotency-key", key);
        }
        let request = request.body(Full::new(Bytes::from_static(&BODY))).expect("request");
        sender.ready().await.expect("ready");
        let response = sender.send_request(request).await.expect("response");
        assert!(response.status().is_success(), "{}", response.status());
        response.into_body().collect().await.expect("body");
    }
    start.elapsed()
}

/// `iters` requests split over `clients` clients at once, each on its own connection
/// (`keyed`: a fresh key per request); the time until the last ends, scaled to `iters`.
pub(crate) async fn clients_at_once(
    addr: SocketAddr,
    clients: u64,
    iters: u64,
    keyed: bool,
) -> Duration {
    let share = iters.div_ceil(clients);
    let start = Instant::now();
    let key = if keyed { fresh_key } else { |_| None };
    let runs: Vec<_> = (0..clients).map(|_| tokio::spawn(drive(addr, share, key))).collect();
    for run in runs {
        run.await.expect("a client");
    }
    start.elapsed().mul_f64(iters as f64 / (share * clients) as f64)
}
