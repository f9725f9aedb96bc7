//! Requests per second through one axum handler, with and without the `Idempotency-Key`
//! layer, over a real loopback socket (one keep-alive HTTP/1 connection), 1 KiB bodies.
//! In each group `idem` is the layer and `without_layer` the same handler alone, measured
//! in the same run: `http_fresh` sends a new key per request (claim, run, store),
//! `http_replay` the same key again and again (a replay, the handler not run). Values:
//! `memory` (the async contract, answered on the request's task) and `sqlite` (writes
//! awaited on its writer thread's reply channel).
//! `http_store_calls` compares the memory store through the async contract with the same
//! store behind `Blocking` (every call on tokio's blocking pool).
//! `http_sqlite/<n> clients`: the layer on SQLite beside the handler alone, each served on
//! a runtime of its own, at 1, 16 and 64 clients at once (fresh keys): how far the SQLite
//! store's group commit shares its fsyncs between concurrent requests.
//! `cargo xtask bench idem-http`.

// criterion's macros generate undocumented public functions.
#![allow(missing_docs)]

mod common;
#[path = "../tests/common/own_runtime.rs"]
mod own_runtime;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use common::{clients_at_once, drive, fresh, fresh_key, routes, with_layer};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use idem_core::{MemoryStore, StoreConfig};
use idem_http::{Blocking, StoredResponse};
use tokio::runtime::Runtime;

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("rt")
}

fn serve(rt: &Runtime, router: Router) -> SocketAddr {
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("port");
        let addr = listener.local_addr().expect("bound");
        tokio::spawn(async move { axum::serve(listener, router).await });
        addr
    })
}

fn sqlite() -> idem_store_sqlite::SqliteStore<StoredResponse> {
    let dir = std::env::temp_dir().join(format!("idem-http-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let path = dir.join(format!("keys-{}.db", fresh()));
    let _ = std::fs::remove_file(&path);
    idem_store_sqlite::SqliteStore::open(&path, StoreConfig::default()).expect("open")
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
    bench_sqlite_clients(c, &rt);
}

/// The layer on SQLite at 1, 16 and 64 concurrent clients, beside the handler alone.
fn bench_sqlite_clients(c: &mut Criterion, rt: &Runtime) {
    let plain = own_runtime::serve_on_own_runtime(routes());
    let on_disk = own_runtime::serve_on_own_runtime(with_layer(sqlite()));
    for clients in [1_u64, 16, 64] {
        let mut g = c.benchmark_group(format!("http_sqlite/{clients} clients"));
        g.sample_size(10).measurement_time(Duration::from_secs(5));
        for (name, addr, keyed) in [("idem", on_disk, true), ("without_layer", plain, false)] {
            g.bench_function(name, |b| {
                b.to_async(rt).iter_custom(|iters| clients_at_once(addr, clients, iters, keyed))
            });
        }
        g.finish();
    }
}

criterion_group!(benches, bench_http);
criterion_main!(benches);
