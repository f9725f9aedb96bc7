//! The async PostgreSQL store's claim and complete against the physical floor, in the
//! same run, on the same deadpool pool: group `pg_claim_complete/<n> tasks`, `idem` is
//! `AsyncPgStore::claim` then `complete` on a fresh key, `raw_tokio_postgres` the same two
//! round trips written by hand (an `INSERT ... ON CONFLICT DO NOTHING RETURNING` and an
//! `UPDATE`) on a table of the same shape, with no fencing, no encoding, no capacity. A
//! figure is the time per claim+complete over all tasks. Needs `IDEM_PG_URL`
//! (`cargo xtask bench` starts a server).

// criterion's macros generate undocumented public functions.
#![allow(missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use idem_core::{AsyncKeyStore, Claim, Fingerprint, ScopedKey, StoreConfig};
use idem_store_postgres::AsyncPgStore;
use idem_store_postgres::deadpool_postgres::Pool;

fn url() -> String {
    std::env::var("IDEM_PG_URL")
        .expect("IDEM_PG_URL must name a PostgreSQL server (cargo xtask bench starts one)")
}

static FRESH: AtomicU64 = AtomicU64::new(0);

fn fresh() -> u64 {
    FRESH.fetch_add(1, Ordering::Relaxed)
}

async fn idem(store: &AsyncPgStore<u64>, fingerprint: &Fingerprint) {
    let key = ScopedKey::parse("bench", &format!("k-{}", fresh())).expect("valid");
    let Claim::Acquired(lease) = store.claim(&key, fingerprint).await.expect("claim") else {
        panic!("a fresh key is acquired")
    };
    store.complete(&lease, 7).await.expect("complete");
}

/// The same two round trips by hand: claim a row if absent, then store its result.
async fn raw(pool: &Pool, schema: &str) {
    let client = pool.get().await.expect("a connection");
    let key = format!("k-{}", fresh());
    let claim = format!(
        "INSERT INTO \"{schema}\".raw_claims (key, token, finished) VALUES ($1, 1, FALSE) \
         ON CONFLICT (key) DO NOTHING RETURNING token"
    );
    let prepared = client.prepare_cached(&claim).await.expect("prepare");
    let claimed = client.query_opt(&prepared, &[&key]).await.expect("claim");
    assert!(claimed.is_some(), "a fresh key is claimed");
    let complete = format!(
        "UPDATE \"{schema}\".raw_claims SET finished = TRUE, result = $2 \
         WHERE key = $1 AND token = 1 AND NOT finished"
    );
    let result: &[u8] = b"\x07";
    let prepared = client.prepare_cached(&complete).await.expect("prepare");
    assert_eq!(client.execute(&prepared, &[&key, &result]).await.expect("complete"), 1);
}

fn bench_floor(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build();
    let rt = rt.expect("a runtime");
    let schema = format!("idem_bench_floor_{}", std::process::id());
    let store: AsyncPgStore<u64> = rt
        .block_on(AsyncPgStore::connect(&url(), &schema, StoreConfig::default()))
        .expect("connect");
    let store = Arc::new(store);
    let pool = store.pool().clone();
    rt.block_on(async {
        let client = pool.get().await.expect("a connection");
        let table = format!(
            "CREATE TABLE \"{schema}\".raw_claims (key TEXT PRIMARY KEY, token BIGINT NOT NULL, \
             finished BOOLEAN NOT NULL, result BYTEA)"
        );
        client.batch_execute(&table).await.expect("the raw table");
    });
    let fingerprint = Fingerprint::builder("bench").finish();
    for count in [1_u64, 16] {
        let mut g = c.benchmark_group(format!("pg_claim_complete/{count} tasks"));
        g.sample_size(10).measurement_time(Duration::from_secs(5));
        g.bench_function("idem", |b| {
            b.to_async(&rt).iter_custom(|iters| {
                let store = store.clone();
                idem_testkit::bench::timed_tasks(count, iters, move || {
                    let store = store.clone();
                    async move { idem(&store, &fingerprint).await }
                })
            })
        });
        g.bench_function("raw_tokio_postgres", |b| {
            b.to_async(&rt).iter_custom(|iters| {
                let (pool, schema) = (pool.clone(), schema.clone());
                idem_testkit::bench::timed_tasks(count, iters, move || {
                    let (pool, schema) = (pool.clone(), schema.clone());
                    async move { raw(&pool, &schema).await }
                })
            })
        });
        g.finish();
    }
    rt.block_on(store.drop_schema()).expect("the namespace is dropped");
}

criterion_group!(benches, bench_floor);
criterion_main!(benches);
