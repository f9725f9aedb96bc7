//! The conformance suite against a real PostgreSQL server, plus a race between instances.
//! Needs `IDEM_PG_URL` (`.ci/postgres.sh` starts a server and prints it); `cargo xtask ci`
//! sets it up. Without it these tests fail: they never pass without a server.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use idem_core::pg::PgStore;
use idem_core::{Claim, Fingerprint, KeyStore, ManualClock, ScopedKey, StoreConfig};

fn url() -> String {
    std::env::var("IDEM_PG_URL")
        .expect("IDEM_PG_URL must name a PostgreSQL server (see .ci/postgres.sh)")
}

/// A fresh namespace per store, so tests (and test runs) never share tables.
fn schema() -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    format!("idem_test_{}_{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

fn postgres(config: StoreConfig, clock: Arc<ManualClock>) -> PgStore<String> {
    PgStore::connect_with_clock(&url(), &schema(), config, clock).expect("connect")
}

idem_core::conformance_tests!(postgres);

#[test]
fn two_instances_racing_on_one_schema_give_one_owner() {
    let namespace = schema();
    let a: PgStore<String> =
        PgStore::connect(&url(), &namespace, StoreConfig::default()).expect("a");
    let b: PgStore<String> =
        PgStore::connect(&url(), &namespace, StoreConfig::default()).expect("b");
    let fp = Fingerprint::builder("t").finish();
    let claims: Vec<Claim<String>> = std::thread::scope(|s| {
        let run = |store: &PgStore<String>| {
            (0..30)
                .map(|i| {
                    store
                        .claim(&ScopedKey::parse("t", &format!("k{i}")).expect("key"), &fp)
                        .expect("claim")
                })
                .collect::<Vec<_>>()
        };
        let (a, b) = (&a, &b);
        let ha = s.spawn(move || run(a));
        let hb = s.spawn(move || run(b));
        let mut all = ha.join().expect("a");
        all.extend(hb.join().expect("b"));
        all
    });
    assert_eq!(claims.iter().filter(|c| matches!(c, Claim::Acquired(_))).count(), 30);
}

#[test]
fn a_bad_schema_name_is_refused() {
    let refused =
        PgStore::<String>::connect(&url(), "Robert'); DROP TABLE x;--", StoreConfig::default());
    assert!(refused.is_err());
}

#[test]
fn an_unreachable_server_is_a_typed_error() {
    let refused = PgStore::<String>::connect(
        "postgres://idem:idem@127.0.0.1:1/idem",
        "idem_x",
        StoreConfig::default(),
    );
    match refused {
        Err(idem_core::StoreError::Storage(e)) => {
            assert!(e.downcast_ref::<idem_core::pg::PgError>().is_some(), "{e}");
        }
        other => panic!("expected a storage error, got {other:?}"),
    }
}
