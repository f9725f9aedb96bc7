//! The Redis store's claim and complete against the floor, in the same run, on the same
//! connection manager: group `redis_claim_complete/<n> tasks`, `idem` is
//! `RedisStore::claim` then `complete` on a fresh key (two script calls, each reading the
//! record, checking the token, moving it between the sorted sets), `raw_redis` the two
//! plain commands a hand-written store would send (`SET key token NX PX lease`, then
//! `SET key result XX PX ttl`), with no fencing, no capacity, no encoding. A figure is the
//! time per claim+complete over all tasks. Needs `IDEM_REDIS_URL` (`.ci/redis.sh` starts
//! a server).

// criterion's macros generate undocumented public functions.
#![allow(missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use idem_core::{AsyncKeyStore, Claim, Fingerprint, ScopedKey, StoreConfig};
use idem_store_redis::RedisStore;
use idem_store_redis::redis::aio::ConnectionManager;
use idem_testkit::bench::timed_tasks;

fn url() -> String {
    std::env::var("IDEM_REDIS_URL")
        .expect("IDEM_REDIS_URL must name a Redis server (.ci/redis.sh starts one)")
}

static FRESH: AtomicU64 = AtomicU64::new(0);

fn fresh() -> u64 {
    // ORDERING: a counter for unique keys; nothing is published through it.
    FRESH.fetch_add(1, Ordering::Relaxed)
}

async fn idem(store: &RedisStore<u64>, fingerprint: &Fingerprint) {
    let key = ScopedKey::parse("bench", &format!("k-{}", fresh())).expect("valid");
    let Claim::Acquired(lease) = store.claim(&key, fingerprint).await.expect("claim") else {
        panic!("a fresh key is acquired")
    };
    store.complete(&lease, 7).await.expect("complete");
}

/// The same two round trips by hand: take the key if absent, then store its result.
async fn raw(mut conn: ConnectionManager, prefix: &str) {
    let key = format!("{prefix}:raw:{}", fresh());
    let claimed: Option<String> = idem_store_redis::redis::cmd("SET")
        .arg(&key)
        .arg(1)
        .arg("NX")
        .arg("PX")
        .arg(30_000)
        .query_async(&mut conn)
        .await
        .expect("claim");
    assert!(claimed.is_some(), "a fresh key is claimed");
    let stored: Option<String> = idem_store_redis::redis::cmd("SET")
        .arg(&key)
        .arg(b"\x07".as_slice())
        .arg("XX")
        .arg("PX")
        .arg(86_400_000)
        .query_async(&mut conn)
        .await
        .expect("complete");
    assert!(stored.is_some(), "the claimed key is completed");
}

fn bench_floor(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build();
    let rt = rt.expect("a runtime");
    let prefix = format!("idem_bench_floor_{}", std::process::id());
    let store: RedisStore<u64> =
        rt.block_on(RedisStore::connect(&url(), &prefix, StoreConfig::default())).expect("connect");
    let store = Arc::new(store);
    let client = idem_store_redis::redis::Client::open(url()).expect("a valid URL");
    let conn = rt.block_on(client.get_connection_manager()).expect("a connection manager");
    let fingerprint = Fingerprint::builder("bench").finish();
    for count in [1_u64, 16, 64] {
        let mut g = c.benchmark_group(format!("redis_claim_complete/{count} tasks"));
        g.sample_size(10).measurement_time(Duration::from_secs(5));
        g.bench_function("idem", |b| {
            b.to_async(&rt).iter_custom(|iters| {
                let store = store.clone();
                timed_tasks(count, iters, move || {
                    let store = store.clone();
                    async move { idem(&store, &fingerprint).await }
                })
            })
        });
        g.bench_function("raw_redis", |b| {
            b.to_async(&rt).iter_custom(|iters| {
                let (conn, prefix) = (conn.clone(), prefix.clone());
                timed_tasks(count, iters, move || {
                    let (conn, prefix) = (conn.clone(), prefix.clone());
                    async move { raw(conn, &prefix).await }
                })
            })
        });
        g.finish();
    }
    rt.block_on(store.drop_namespace()).expect("the namespace is dropped");
    let _: usize = rt
        .block_on(async {
            let mut conn = conn.clone();
            // A cursor, in chunks, freed off the server's thread (UNLINK): a run leaves
            // hundreds of thousands of raw keys, and one KEYS and one DEL of them all
            // outlasted the client's answer timeout.
            let (mut cursor, mut deleted) = (0_u64, 0);
            loop {
                let (next, keys): (u64, Vec<String>) = idem_store_redis::redis::cmd("SCAN")
                    .arg(cursor)
                    .arg("MATCH")
                    .arg(format!("{prefix}:raw:*"))
                    .arg("COUNT")
                    .arg(CLEANUP_CHUNK)
                    .query_async(&mut conn)
                    .await?;
                if !keys.is_empty() {
                    let unlink = idem_store_redis::redis::cmd("UNLINK").arg(keys).to_owned();
                    deleted += unlink.query_async::<usize>(&mut conn).await?;
                }
                if next == 0 {
                    break;
                }
                cursor = next;
            }
            Ok::<usize, idem_store_redis::redis::RedisError>(deleted)
        })
        .expect("the raw keys are deleted");
}

/// Raw keys deleted per command when the bench cleans up.
const CLEANUP_CHUNK: usize = 10_000;

criterion_group!(benches, bench_floor);
criterion_main!(benches);
