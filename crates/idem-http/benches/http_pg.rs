//! Requests per second through the layer on PostgreSQL and on Redis, at 1, 16 and 64
//! concurrent clients (each on its own keep-alive HTTP/1 connection, fresh keys, 1 KiB
//! bodies): in group `http_pg/<n> clients`, `idem` is the layer on the async store
//! (`AsyncPgStore`, tokio-postgres on a deadpool pool), `redis` the layer on `RedisStore`,
//! `blocking` the layer on the sync PostgreSQL store behind `Blocking` (every call on
//! tokio's blocking pool), `without_layer` the same handler alone, all in the same run. A
//! figure is the time per request over all clients (its inverse is the throughput). Needs
//! `IDEM_PG_URL` and `IDEM_REDIS_URL` (`cargo xtask bench` starts both servers).

// criterion's macros generate undocumented public functions.
#![allow(missing_docs)]

mod common;
#[path = "../tests/common/own_runtime.rs"]
mod own_runtime;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use common::{clients_at_once, routes, with_layer};
use criterion::{Criterion, criterion_group, criterion_main};
use idem_core::StoreConfig;
use idem_http::{Blocking, StoredResponse};
use idem_store_postgres::{AsyncPgStore, PgStore};
use idem_store_redis::RedisStore;

fn url() -> String {
    std::env::var("IDEM_PG_URL")
        .expect("IDEM_PG_URL must name a PostgreSQL server (cargo xtask bench starts one)")
}

/// Serves `router` on its own 2-worker runtime, on its own thread.
fn serve(router: Router) -> SocketAddr {
    own_runtime::serve_on_own_runtime(router)
}

fn bench_http_pg(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build();
    let rt = rt.expect("a client runtime");
    let schema = format!("idem_bench_http_{}", std::process::id());
    let config = StoreConfig::default();
    let setup = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("rt");
    // The async store's pool lives on the server's runtime threads: built on a runtime of
    // its own that stays up for the run.
    let async_store: AsyncPgStore<StoredResponse> =
        setup.block_on(AsyncPgStore::connect(&url(), &schema, config)).expect("connect");
    let sync_store: PgStore<StoredResponse> =
        PgStore::connect(&url(), &format!("{schema}_sync"), config).expect("connect");
    let sync_store = Arc::new(sync_store);
    let redis_url = std::env::var("IDEM_REDIS_URL")
        .expect("IDEM_REDIS_URL must name a Redis server (cargo xtask bench starts one)");
    let redis_store: RedisStore<StoredResponse> =
        setup.block_on(RedisStore::connect(&redis_url, &schema, config)).expect("connect");
    let plain = serve(routes());
    let on_async = serve(with_layer(async_store));
    let on_blocking = serve(with_layer(Blocking::new(sync_store.clone())));
    let on_redis = serve(with_layer(redis_store.clone()));
    for clients in [1_u64, 16, 64] {
        let mut g = c.benchmark_group(format!("http_pg/{clients} clients"));
        g.sample_size(10).measurement_time(Duration::from_secs(5));
        for (name, addr, keyed) in [
            ("idem", on_async, true),
            ("redis", on_redis, true),
            ("blocking", on_blocking, true),
            ("without_layer", plain, false),
        ] {
            g.bench_function(name, |b| {
                b.to_async(&rt).iter_custom(|iters| clients_at_once(addr, clients, iters, keyed))
            });
        }
        g.finish();
    }
    sync_store.drop_schema().expect("the sync namespace is dropped");
    setup.block_on(redis_store.drop_namespace()).expect("the Redis namespace is dropped");
    let admin = PgStore::<StoredResponse>::connect(&url(), &schema, config).expect("connect");
    admin.drop_schema().expect("the async namespace is dropped");
}

criterion_group!(benches, bench_http_pg);
criterion_main!(benches);
