//! One worker process of the order crash test: the completion inside the caller's
//! transaction, on PostgreSQL. For each intent it claims the intent's key, then in one
//! transaction inserts the order row (the effect) and stores the claim's answer (the
//! order's id) with `AsyncPgStore::complete_in`, commits, and prints `ACK <intent>
//! <order id>` (flushed). It aborts at a named point if asked, for one intent:
//! `after_claim`, `after_insert` (the order written, nothing committed),
//! `after_complete` (both written, nothing committed), `after_commit` (both committed, no
//! answer given) or `after_ack`. A key another worker holds is skipped (no answer).
//!
//! Usage: `order_worker <postgres URL> <first> <count> [<point> <intent>]`, the namespace
//! in `IDEM_PG_SCHEMA` (its `orders` table made by the test); with `IDEM_LATER=1` it
//! reads a clock past every lease (a restart that recovers what dead workers held).

use std::io::Write;
use std::sync::Arc;

use idem_core::{AsyncKeyStore, Claim, Fingerprint, ScopedKey, StoreConfig};
use idem_crash::orders::{POINTS, key, request};
use idem_crash::payments::{Ack, LEASE, Later, ack_line};
use idem_store_postgres::AsyncPgStore;

/// The crash plan: abort at `point` while handling intent `intent`.
struct Plan {
    point: Option<&'static str>,
    intent: u64,
}

impl Plan {
    fn hit(&self, point: &str, intent: u64) {
        if self.point == Some(point) && self.intent == intent {
            std::process::abort();
        }
    }
}

/// Claims, and for an owned claim inserts the order and completes in one transaction.
/// Returns the order id answered, or `None` if another worker holds the key.
async fn place(store: &AsyncPgStore<u64>, schema: &str, plan: &Plan, i: u64) -> Option<u64> {
    let (key, fingerprint): (ScopedKey, Fingerprint) = (key(i), request(i));
    let lease = match store.claim(&key, &fingerprint).await.expect("the claim is answered") {
        Claim::Acquired(lease) | Claim::Recover(lease) => lease,
        Claim::Replay(order) => return Some(order),
        Claim::InFlight { .. } => return None,
    };
    plan.hit("after_claim", i);
    let mut client = store.pool().get().await.expect("a connection");
    let tx = client.transaction().await.expect("a transaction");
    let insert =
        format!("INSERT INTO \"{schema}\".orders (key, amount) VALUES ($1, $2) RETURNING id");
    let amount = 100 + i as i64;
    let row = tx.query_one(&insert, &[&key.key().as_str(), &amount]).await.expect("inserted");
    let order = u64::try_from(row.get::<_, i64>(0)).expect("a positive id");
    plan.hit("after_insert", i);
    store.complete_in(&tx, &lease, order).await.expect("the completion is written");
    plan.hit("after_complete", i);
    tx.commit().await.expect("committed");
    plan.hit("after_commit", i);
    Some(order)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, url, first, count, rest @ ..] = &args[..] else {
        eprintln!("usage: order_worker <postgres URL> <first> <count> [<point> <intent>]");
        std::process::exit(2);
    };
    let (first, count): (u64, u64) = (first.parse().expect("first"), count.parse().expect("count"));
    let point = rest.first().and_then(|p| POINTS.iter().copied().find(|known| known == p));
    let plan = Plan { point, intent: rest.get(1).and_then(|t| t.parse().ok()).unwrap_or(0) };
    let schema = std::env::var("IDEM_PG_SCHEMA").expect("IDEM_PG_SCHEMA names the namespace");
    let later = std::env::var("IDEM_LATER").is_ok_and(|v| v == "1");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
    runtime.expect("a runtime").block_on(async {
        let config = StoreConfig::builder().lease(LEASE).build().expect("valid config");
        let store = if later {
            AsyncPgStore::connect_with_clock(url, &schema, config, Arc::new(Later)).await
        } else {
            AsyncPgStore::connect(url, &schema, config).await
        };
        let store = store.expect("the store connects");
        let mut out = std::io::stdout().lock();
        for i in first..first + count {
            if let Some(order) = place(&store, &schema, &plan, i).await {
                writeln!(out, "{}", ack_line(Ack { intent: i, charge: order })).expect("stdout");
                out.flush().expect("stdout");
                plan.hit("after_ack", i);
            }
        }
    });
}
