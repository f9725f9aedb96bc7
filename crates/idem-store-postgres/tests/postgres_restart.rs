//! The PostgreSQL server restarts under a live store, once: the store's connections are
//! all closed by it, and the store carries on (each connection is opened again before its
//! next use). A test binary of its own, run alone by `cargo xtask ci` after the other
//! PostgreSQL tests, so the restart cuts no other test's connections. Needs `IDEM_PG_URL`
//! and the right to restart the local cluster (`pg_ctlcluster`, as `.ci/postgres.sh`
//! sets up); `IDEM_PG_RESTART` may name another restart command.

use std::process::Command;

use idem_core::{Claim, Fingerprint, KeyStore, ScopedKey, StoreConfig};
use idem_store_postgres::PgStore;

fn url() -> String {
    std::env::var("IDEM_PG_URL")
        .expect("IDEM_PG_URL must name a PostgreSQL server (see .ci/postgres.sh)")
}

/// Restarts the server: `IDEM_PG_RESTART` if set, else the newest local cluster.
fn restart_server() {
    let command = std::env::var("IDEM_PG_RESTART").unwrap_or_else(|_| {
        "pg_ctlcluster $(ls /usr/lib/postgresql | sort -n | tail -1) main restart".into()
    });
    let status = Command::new("sh").arg("-c").arg(&command).status().expect("a shell");
    assert!(status.success(), "restarting the server with {command:?} failed: {status}");
}

#[test]
fn a_store_carries_on_after_the_server_restarts() {
    let schema = format!("idem_restart_{}", std::process::id());
    let store: PgStore<String> =
        PgStore::connect(&url(), &schema, StoreConfig::default()).expect("connect");
    let fp = Fingerprint::builder("restart").finish();
    let key = |name: &str| ScopedKey::parse("t", name).expect("key");
    let Claim::Acquired(lease) = store.claim(&key("before"), &fp).expect("claim") else {
        panic!("a fresh key")
    };
    restart_server();
    // Each of the four connections may fail the one call it was serving when the server
    // went away; from then on every call succeeds.
    let attempts: Vec<bool> =
        (0..8).map(|i| store.claim(&key(&format!("after-{i}")), &fp).is_ok()).collect();
    assert!(attempts[4..].iter().all(|ok| *ok), "{attempts:?}");
    store.complete(&lease, "done".into()).expect("the lease from before the restart holds");
    assert_eq!(store.claim(&key("before"), &fp).expect("replay"), Claim::Replay("done".into()));
    store.drop_schema().expect("drop the namespace");
}
