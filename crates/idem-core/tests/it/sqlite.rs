//! The conformance suite against the SQLite store, plus what only a file can show:
//! reopening keeps everything, a file of another schema version is refused, the result
//! size limit, and two handles on one file give one owner.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use idem_core::sqlite::{SqliteError, SqliteStore};
use idem_core::{
    Claim, Fingerprint, KeyStore, ManualClock, ScopedKey, StoreConfig, StoreError, Timestamp,
};

/// A fresh file under the system temp dir, unique per call (and per test process).
pub(crate) fn temp_file(tag: &str) -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("idem-core-tests-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir.join(format!("{tag}-{n}.sqlite"))
}

fn sqlite(config: StoreConfig, clock: Arc<ManualClock>) -> SqliteStore<String> {
    SqliteStore::open_with_clock(&temp_file("conformance"), config, clock).expect("open")
}

mod conformance {
    use super::sqlite;
    idem_core::conformance_tests!(sqlite);
}

fn key() -> ScopedKey {
    ScopedKey::parse("tenant", "k").expect("key")
}

fn fp() -> Fingerprint {
    Fingerprint::builder("t").u64("n", 1).finish()
}

#[test]
fn reopening_the_file_keeps_results_and_pending_claims() {
    let path = temp_file("reopen");
    let clock = Arc::new(ManualClock::new(Timestamp::from_millis(1_000)));
    let done = ScopedKey::parse("tenant", "done").expect("key");
    {
        let store: SqliteStore<String> =
            SqliteStore::open_with_clock(&path, StoreConfig::default(), clock.clone())
                .expect("open");
        let Claim::Acquired(lease) = store.claim(&done, &fp()).expect("claim") else {
            panic!("fresh")
        };
        store.complete(&lease, "charged".into()).expect("complete");
        let Claim::Acquired(_crashed) = store.claim(&key(), &fp()).expect("claim") else {
            panic!("fresh")
        };
    } // the process "dies" here
    let store: SqliteStore<String> =
        SqliteStore::open_with_clock(&path, StoreConfig::default(), clock.clone()).expect("reopen");
    assert_eq!(store.claim(&done, &fp()).expect("claim"), Claim::Replay("charged".into()));
    assert!(matches!(store.claim(&key(), &fp()).expect("claim"), Claim::InFlight { .. }));
    clock.advance(StoreConfig::LEASE_DEFAULT);
    assert_eq!(store.pending(10).expect("pending").len(), 1, "the crashed claim is pending");
    assert!(matches!(store.claim(&key(), &fp()).expect("claim"), Claim::Recover(_)));
}

#[test]
fn another_schema_version_is_refused() {
    let path = temp_file("schema");
    drop(SqliteStore::<String>::open(&path, StoreConfig::default()).expect("open"));
    idem_core::sqlite::set_schema_version_for_tests(&path, 99).expect("rewrite the version");
    match SqliteStore::<String>::open(&path, StoreConfig::default()) {
        Err(StoreError::Storage(e)) => {
            let e = e.downcast_ref::<SqliteError>().expect("a SqliteError");
            assert!(matches!(e, SqliteError::SchemaVersion { found: 99 }), "{e}");
        }
        other => panic!("expected a schema error, got {other:?}"),
    }
}

#[test]
fn results_over_the_limit_are_refused_and_the_claim_stays() {
    let store: SqliteStore<String> = SqliteStore::open(&temp_file("limit"), StoreConfig::default())
        .expect("open")
        .with_result_bytes_max(4);
    let Claim::Acquired(lease) = store.claim(&key(), &fp()).expect("claim") else {
        panic!("fresh")
    };
    match store.complete(&lease, "too long".into()) {
        Err(StoreError::Storage(e)) => assert!(matches!(
            e.downcast_ref::<SqliteError>(),
            Some(SqliteError::ResultTooLarge { len: 8, max: 4 })
        )),
        other => panic!("expected ResultTooLarge, got {other:?}"),
    }
    store.complete(&lease, "ok".into()).expect("a small result completes");
}

#[test]
fn two_handles_on_one_file_give_one_owner() {
    let path = temp_file("two-handles");
    let a: SqliteStore<String> = SqliteStore::open(&path, StoreConfig::default()).expect("open a");
    let b: SqliteStore<String> = SqliteStore::open(&path, StoreConfig::default()).expect("open b");
    let claims: Vec<Claim<String>> = std::thread::scope(|s| {
        let ha = s.spawn(|| {
            (0..20)
                .map(|i| {
                    a.claim(&ScopedKey::parse("t", &format!("k{i}")).expect("key"), &fp())
                        .expect("claim")
                })
                .collect::<Vec<_>>()
        });
        let hb = s.spawn(|| {
            (0..20)
                .map(|i| {
                    b.claim(&ScopedKey::parse("t", &format!("k{i}")).expect("key"), &fp())
                        .expect("claim")
                })
                .collect::<Vec<_>>()
        });
        let mut all = ha.join().expect("a");
        all.extend(hb.join().expect("b"));
        all
    });
    let owners = claims.iter().filter(|c| matches!(c, Claim::Acquired(_))).count();
    assert_eq!(owners, 20, "exactly one owner per key across two handles");
}
