//! Requests per second through one axum handler, with and without the `Idempotency-Key`
//! layer, over a real loopback socket (one keep-alive HTTP/1 connection), 1 KiB bodies.
//! In each group `idem` is the layer and `without_layer` the same handler alone, measured
//! in the same run: `http_fresh` sends a new key per request (claim, run, store),
//! `http_replay` the same key again and again (a replay, the handler not run). Values:
//! `memory` (the async contract, answered on the request's task) and `sqlite` (writes
//! awaited on its writer thread's reply channel).
//! `http_store_calls` compares the memory store through the async contract with the same
//! store behind `Blocking` (every call on tokio's blocking pool).
//! `cargo xtask bench idem-http`.

// criterion's macros generate undocumented public functions.
#![allow(missing_docs)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::post;
use bytes::Bytes;
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use idem_core::{AsyncKeyStore, MemoryStore, StoreConfig};
use idem_http::{Blocking, IdempotencyLayer, StoredResponse};
use tokio::runtime::Runtime;

const BODY: [u8; 1024] = [b'x'; 1024];

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("rt")
}

/// The handler every row runs: reads the body, answers 201 with a small JSON body.
fn routes() -> Router {
    Router::new().route(
        "/charge",
        post(|body: Bytes| async move {
            (http::StatusCode::CREATED, format!("{{\"charged\":{}}}", body.len()))
        }),
    )
}

fn with_layer<S: AsyncKeyStore<StoredResponse> + 'static>(store: S) -> Router {
    routes().layer(IdempotencyLayer::new(store, |_: &_| Some("bench".into())))
}

fn serve(rt: &Runtime, router: Router) -> SocketAddr {
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("port");
        let addr = listener.local_addr().expect("bound");
        tokio::spawn(async move { axum::serve(listener, router).await });
        addr
    })
}

/// Sends `iters` requests on one keep-alive connection; `key(i)` names each one's key.
async fn drive(addr: SocketAddr, iters: u64, key: impl Fn(u64) -> Option<String>) -> Duration {
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

fn sqlite() -> idem_store_sqlite::SqliteStore<StoredResponse> {
    let dir = std::env::temp_dir().join(format!("idem-http-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let path = dir.join(format!("keys-{}.db", FRESH.fetch_add(1, Ordering::Relaxed)));
    let _ = std::fs::remove_file(&path);
    idem_store_sqlite::SqliteStore::open(&path, StoreConfig::default()).expect("open")
}

static FRESH: AtomicU64 = AtomicU64::new(0);

fn fresh_key(_: u64) -> Option<String> {
    Some(format!("k-{}", FRESH.fetch_add(1, Ordering::Relaxed)))
}

fn bench_http(c: &mut Criterion) {
    let rt = runtime();
    let plain = serve(&rt, routes());
    let memory = serve(&rt, with_layer(Arc::new(MemoryStore::new(StoreConfig::default()))));
    let on_disk = serve(&rt, with_layer(sqlite()));
    let blocking = Blocking::new(Arc::new(MemoryStore::new(StoreConfig::default())));
    let pooled = serve(&rt, with_layer(blocking));
    for (group, replay) in [("http_fresh", false), ("http_replay", true)] {
        let mut g = c.benchmark_group(group);
        g.sample_size(20).measurement_time(Duration::from_secs(3));
        for (value, addr) in [("memory", memory), ("sqlite", on_disk)] {
            let key =
                move |i: u64| if replay { Some(format!("{value}-same")) } else { fresh_key(i) };
            g.bench_function(BenchmarkId::new("idem", value), |b| {
                b.to_async(&rt).iter_custom(|iters| drive(addr, iters, key))
            });
            g.bench_function(BenchmarkId::new("without_layer", value), |b| {
                b.to_async(&rt).iter_custom(|iters| drive(plain, iters, |_| None))
            });
        }
        g.finish();
    }
    let mut g = c.benchmark_group("http_store_calls");
    g.sample_size(20).measurement_time(Duration::from_secs(3));
    g.bench_function("idem", |b| {
        b.to_async(&rt).iter_custom(|iters| drive(memory, iters, fresh_key))
    });
    g.bench_function("spawn_blocking", |b| {
        b.to_async(&rt).iter_custom(|iters| drive(pooled, iters, fresh_key))
    });
    g.finish();
}

criterion_group!(benches, bench_http);
criterion_main!(benches);
