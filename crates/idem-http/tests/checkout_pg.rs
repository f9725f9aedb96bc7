//! The checkout example on PostgreSQL over real sockets, each order recorded in the
//! transaction that stores its answer: concurrent duplicates make one order and one
//! charge, and a charge whose answer was lost is recorded once, by the recovery after the
//! lease. Needs `IDEM_PG_URL` (`.ci/postgres.sh`); `cargo xtask ci` runs it.

#[path = "../examples/checkout_server/app.rs"]
#[allow(dead_code, unreachable_pub)]
mod app;
#[path = "common/checkout_client.rs"]
mod checkout_client;
#[path = "../examples/checkout_server/orders.rs"]
#[allow(dead_code, unreachable_pub)]
mod orders;
#[path = "../examples/checkout_server/remote.rs"]
#[allow(dead_code, unreachable_pub)]
mod remote;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use idem_core::{ManualClock, StoreConfig, Timestamp};
use idem_payments::{Fault, SimulatedGateway};
use idem_store_postgres::AsyncPgStore;

fn url() -> String {
    std::env::var("IDEM_PG_URL")
        .expect("IDEM_PG_URL must name a PostgreSQL server (see .ci/postgres.sh)")
}

fn schema() -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    format!("idem_checkout_{}_{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

/// The recorded checkout on a fresh namespace and port, its store on `clock`.
async fn serve(
    gateway: SimulatedGateway,
    clock: Arc<ManualClock>,
) -> (SocketAddr, Arc<orders::Orders>) {
    let schema = schema();
    let url = url();
    let store = AsyncPgStore::connect_with_clock(&url, &schema, StoreConfig::default(), clock);
    let store = orders::with_orders(store.await.expect("connect"), &schema).await.expect("table");
    let (router, shop) = orders::router(store, &schema, gateway);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let addr = listener.local_addr().expect("bound");
    tokio::spawn(async move { axum::serve(listener, router).await });
    (addr, shop)
}

/// One `POST /checkout` with `key`: its status, replay flag and body.
async fn post(addr: SocketAddr, key: &str) -> (u16, bool, String) {
    checkout_client::post(addr, key).await.expect("an answer")
}

/// The orders recorded: (key, charge).
async fn recorded(orders: &orders::Orders) -> Vec<(String, String)> {
    let client = orders.store.pool().get().await.expect("a connection");
    let query = format!("SELECT key, charge FROM \"{}\".orders", orders.schema);
    let rows = client.query(&query, &[]).await.expect("the orders");
    rows.iter().map(|r| (r.get(0), r.get(1))).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_duplicates_record_one_order_and_one_charge() {
    let clock = Arc::new(ManualClock::new(Timestamp::from_millis(1_700_000_000_000)));
    let (addr, orders) = serve(SimulatedGateway::new().without_dedup(), clock).await;
    let duplicates: Vec<_> = (0..8).map(|_| tokio::spawn(post(addr, "order-1"))).collect();
    let mut bodies = Vec::new();
    for duplicate in duplicates {
        let (status, _, body) = duplicate.await.expect("a duplicate");
        assert_eq!(status, 201, "{body}");
        bodies.push(body);
    }
    bodies.dedup();
    assert_eq!(bodies.len(), 1, "one answer for all: {bodies:?}");
    let placed = recorded(&orders).await;
    assert_eq!(placed.len(), 1, "{placed:?}");
    assert!(bodies[0].contains(&placed[0].1), "the answer names the order's charge");
    assert_eq!(orders.shop.gateway.totals().charges, 1);
    orders.store.drop_schema().await.expect("the namespace is dropped");
}

/// The gateway charges and loses its answer: no order is recorded and the key stays in
/// flight; after the lease the retry asks the gateway, records the order and its answer
/// together, and every later retry replays them. One charge, one order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_charge_whose_answer_was_lost_is_recorded_once_on_recovery() {
    let clock = Arc::new(ManualClock::new(Timestamp::from_millis(1_700_000_000_000)));
    let gateway = SimulatedGateway::new().without_dedup();
    gateway.inject(Fault::ChargeThenTimeout);
    let (addr, orders) = serve(gateway, clock.clone()).await;
    let (status, _, body) = post(addr, "order-9").await;
    assert_eq!(status, 502, "{body}");
    assert!(recorded(&orders).await.is_empty(), "no order without its answer");
    clock.advance(StoreConfig::LEASE_DEFAULT);
    let (status, replayed, body) = post(addr, "order-9").await;
    assert_eq!((status, replayed), (200, false), "{body}");
    assert!(body.contains("\"how\":\"recovered\""), "{body}");
    let (status, replayed, again) = post(addr, "order-9").await;
    assert_eq!((status, replayed, &again), (200, true, &body));
    assert_eq!(recorded(&orders).await.len(), 1);
    assert_eq!(orders.shop.gateway.totals().charges, 1);
    orders.store.drop_schema().await.expect("the namespace is dropped");
}
