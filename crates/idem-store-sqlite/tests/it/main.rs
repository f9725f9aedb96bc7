//! The conformance suite against the SQLite store, through both store contracts, plus
//! what only a file can show: reopening keeps everything, a file of another schema
//! version is refused, the result size limit, and two handles on one file give one owner;
//! and async callers (`async_callers`) answered through the writer's reply channel.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use idem_core::{
    Claim, Fingerprint, KeyStore, ManualClock, ScopedKey, StoreConfig, StoreError, Timestamp,
};
use idem_store_sqlite::{SqliteError, SqliteStore};

/// A fresh file in this test process's own scratch directory.
pub(crate) fn temp_file(tag: &str) -> PathBuf {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = DIR.get_or_init(|| idem_testkit::scratch_dir("sqlite-tests"));
    dir.join(format!("{tag}-{n}.sqlite"))
}

fn sqlite(config: StoreConfig, clock: Arc<ManualClock>) -> SqliteStore<String> {
    SqliteStore::open_with_clock(&temp_file("conformance"), config, clock).expect("open")
}

mod conformance {
    use super::sqlite;
    idem_testkit::conformance_tests!(sqlite);
}

/// The same suite through the async contract: every call awaited.
mod through_the_async_contract {
    use super::sqlite;
    idem_testkit::async_conformance_tests!(sqlite);
}

mod async_callers;

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
    // Another release's file: its version rewritten behind the store's back.
    let conn = rusqlite::Connection::open(&path).expect("open the file");
    conn.execute("UPDATE meta SET schema_version = 99 WHERE id = 1", []).expect("rewrite");
    drop(conn);
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
        Err(StoreError::Storage(e)) => assert_eq!(
            e.downcast_ref::<idem_durable::CodecError>(),
            Some(&idem_durable::CodecError::TooLarge { len: 8, max: 4 })
        ),
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

/// Two handles opening one fresh file at the same instant both succeed (the set-up of a
/// new file takes the write lock; the second waits for it instead of failing "database is
/// locked"). Many rounds, since the window is small.
#[test]
fn concurrent_first_opens_of_one_file_both_succeed() {
    for round in 0..100 {
        let path = temp_file("first-open");
        let start = std::sync::Barrier::new(2);
        let results: Vec<Result<(), String>> = std::thread::scope(|s| {
            let open = || {
                start.wait();
                SqliteStore::<String>::open(&path, StoreConfig::default())
                    .map(drop)
                    .map_err(|e| e.to_string())
            };
            let other = s.spawn(open);
            let mine = open();
            vec![mine, other.join().expect("opener")]
        });
        assert!(results.iter().all(Result::is_ok), "round {round}: {results:?}");
    }
}

#[test]
fn the_store_runs_with_a_write_ahead_log_and_full_sync() {
    let store: SqliteStore<String> =
        SqliteStore::open(&temp_file("pragmas"), StoreConfig::default()).expect("open");
    let durability = store.durability().expect("pragmas");
    assert_eq!((durability.journal_mode.as_str(), durability.synchronous), ("wal", 2));
}

/// A file with `count` finished keys `k0..`, each with the result `result-<i>-<padding>`.
fn file_with_results(tag: &str, count: usize) -> (PathBuf, Vec<ScopedKey>) {
    let path = temp_file(tag);
    let store: SqliteStore<String> =
        SqliteStore::open(&path, StoreConfig::default()).expect("open");
    let keys: Vec<ScopedKey> =
        (0..count).map(|i| ScopedKey::parse("tenant", &format!("k{i}")).expect("key")).collect();
    for (i, key) in keys.iter().enumerate() {
        let Claim::Acquired(lease) = store.claim(key, &fp()).expect("claim") else {
            panic!("fresh")
        };
        store.complete(&lease, result_of(i)).expect("complete");
    }
    drop(store); // the last connection closing checkpoints the WAL into the file
    (path, keys)
}

fn result_of(i: usize) -> String {
    format!("result-{i:06}-{}", "x".repeat(200))
}

/// Where `needle` starts in `haystack`, every time (a page freed by a later write may
/// still hold an old copy).
fn find_all(haystack: &[u8], needle: &[u8]) -> Vec<usize> {
    let found: Vec<usize> =
        (0..haystack.len()).filter(|&i| haystack[i..].starts_with(needle)).collect();
    assert!(!found.is_empty(), "stored result in the file");
    found
}

/// Every key either replays its own result or is refused with an error: never another
/// key's result, never altered bytes. Returns how many were refused.
fn replays_only_own_results(path: &std::path::Path, keys: &[ScopedKey]) -> usize {
    let store: SqliteStore<String> = match SqliteStore::open(path, StoreConfig::default()) {
        Ok(store) => store,
        Err(_) => return keys.len(), // refused at open: nothing replayed
    };
    let mut refused = 0;
    for (i, key) in keys.iter().enumerate() {
        match store.claim(key, &fp()) {
            Ok(Claim::Replay(result)) => assert_eq!(result, result_of(i), "key {key}"),
            Ok(other) => panic!("key {key}: a finished key answered {other:?}"),
            Err(error) => {
                assert!(error.to_string().contains(key.key().as_str()), "{error}");
                refused += 1;
            }
        }
    }
    refused
}

#[test]
fn a_result_changed_on_disk_is_refused_naming_its_key() {
    let (path, keys) = file_with_results("bitrot", 20);
    let mut bytes = std::fs::read(&path).expect("file");
    for at in find_all(&bytes, result_of(7).as_bytes()) {
        bytes[at + 30] ^= 0x01; // inside the payload: the b-tree is intact, quick_check passes
    }
    std::fs::write(&path, &bytes).expect("write");
    assert_eq!(replays_only_own_results(&path, &keys), 1, "exactly k7 refused");
}

#[test]
fn another_keys_result_copied_over_a_result_on_disk_is_refused() {
    let (path, keys) = file_with_results("swap", 20);
    let mut bytes = std::fs::read(&path).expect("file");
    // Each stored blob is [version][checksum][payload]: k4's whole blob, checksum and
    // all, replaces k3's, so only a checksum bound to the key can tell.
    let len = 5 + result_of(3).len();
    let k4 = find_all(&bytes, result_of(4).as_bytes())[0] - 5;
    let blob = bytes[k4..k4 + len].to_vec();
    for at in find_all(&bytes, result_of(3).as_bytes()) {
        bytes[at - 5..at - 5 + len].copy_from_slice(&blob);
    }
    std::fs::write(&path, &bytes).expect("write");
    assert_eq!(replays_only_own_results(&path, &keys), 1, "k3 refused");
}

#[test]
fn a_damaged_or_cut_file_never_replays_a_wrong_result() {
    let (path, keys) = file_with_results("damage", 300);
    let original = std::fs::read(&path).expect("file");
    let mut detected = 0;
    for offset in (4096..original.len() - 64).step_by(4096 + 1024) {
        let mut bytes = original.clone();
        bytes[offset..offset + 64].iter_mut().for_each(|b| *b ^= 0x5a);
        std::fs::write(&path, &bytes).expect("write");
        detected += usize::from(replays_only_own_results(&path, &keys) > 0);
    }
    std::fs::write(&path, &original[..original.len() - 100]).expect("cut");
    detected += usize::from(replays_only_own_results(&path, &keys) > 0);
    assert!(detected > 0, "some damage was noticed");
}

#[test]
fn a_file_that_cannot_be_opened_is_named_in_the_error() {
    let path = std::env::temp_dir().join("idem-no-such-dir").join("nested").join("keys.db");
    let error = match SqliteStore::<String>::open(&path, StoreConfig::default()) {
        Err(error) => error.to_string(),
        Ok(_) => panic!("a file under a missing directory cannot be opened"),
    };
    assert!(error.contains(&path.display().to_string()), "the path is named: {error}");
    assert!(error.starts_with("storage failed: cannot open the store file"), "{error}");
}

/// A second connection to the store's file, to change its schema beside the store.
fn side_connection(path: &std::path::Path) -> rusqlite::Connection {
    let conn = rusqlite::Connection::open(path).expect("a second connection");
    conn.busy_timeout(std::time::Duration::from_secs(30)).expect("busy timeout");
    conn
}

/// Makes the COMMIT of any transaction that claims a key starting with `poisoned` fail:
/// a trigger adds a row that breaks a deferred foreign key, which SQLite checks only at
/// COMMIT (foreign keys are enforced: the bundled SQLite is built with
/// `SQLITE_DEFAULT_FOREIGN_KEYS=1`). Such a COMMIT fails and leaves the transaction
/// open, as a COMMIT that cannot write its WAL frames (a full disk, an I/O error) may: the
/// writer must roll it back before it can begin the next group.
fn poison_commits(side: &rusqlite::Connection) {
    side.execute_batch(
        "CREATE TABLE poison_parent (id INTEGER PRIMARY KEY);
         CREATE TABLE poison_child (
             parent INTEGER REFERENCES poison_parent (id) DEFERRABLE INITIALLY DEFERRED);
         CREATE TRIGGER poison AFTER INSERT ON claims WHEN NEW.key LIKE 'poisoned%'
         BEGIN INSERT INTO poison_child VALUES (NEW.token); END;",
    )
    .expect("the poison");
}

fn rows_named(side: &rusqlite::Connection, pattern: &str) -> i64 {
    side.query_row("SELECT COUNT(*) FROM claims WHERE key LIKE ?1", [pattern], |r| r.get(0))
        .expect("count")
}

#[track_caller]
fn assert_write_failed(answer: Result<Claim<String>, StoreError>, what: &str) {
    match answer {
        Err(StoreError::Storage(e)) => match e.downcast_ref::<SqliteError>() {
            Some(SqliteError::Write(why)) => {
                let source = why.error().downcast_ref::<rusqlite::Error>();
                assert!(source.is_some(), "{what}: SQLite's own error is the source: {why:?}");
                assert!(why.to_string().contains("FOREIGN KEY"), "{what}: {why}");
            }
            other => panic!("{what}: expected SqliteError::Write, got {other:?}"),
        },
        other => panic!("{what}: expected the failed COMMIT's error, got {other:?}"),
    }
}

#[track_caller]
fn assert_acquired(store: &SqliteStore<String>, key: &ScopedKey, what: &str) -> idem_core::Lease {
    match store.claim(key, &fp()) {
        Ok(Claim::Acquired(lease)) => lease,
        other => panic!("{what}: expected Acquired for {key}, got {other:?}"),
    }
}

/// A group whose COMMIT fails: its caller gets the error, nothing of it is visible (to the
/// store or to another connection), what was committed before stays, and the writer's
/// recovery rolls the open transaction back, so the next claim succeeds.
#[test]
fn a_failed_commit_fails_its_caller_stores_nothing_and_the_next_claim_succeeds() {
    let path = temp_file("failed-commit");
    let store: SqliteStore<String> =
        SqliteStore::open(&path, StoreConfig::default()).expect("open");
    let before = ScopedKey::parse("tenant", "before").expect("key");
    let lease = assert_acquired(&store, &before, "before the poison");
    store.complete(&lease, "kept".into()).expect("complete");
    let side = side_connection(&path);
    poison_commits(&side);
    let poisoned = ScopedKey::parse("tenant", "poisoned").expect("key");
    assert_write_failed(store.claim(&poisoned, &fp()), "the poisoned claim");
    assert_eq!(store.lookup(&poisoned, &fp()).expect("lookup"), idem_core::KeyState::Absent);
    assert_eq!(rows_named(&side, "poisoned%"), 0, "nothing of the failed group is on disk");
    let after = ScopedKey::parse("tenant", "after").expect("key");
    let lease = assert_acquired(&store, &after, "the claim after the failed COMMIT");
    store.complete(&lease, "after".into()).expect("complete after the failure");
    assert_eq!(store.claim(&before, &fp()).expect("claim"), Claim::Replay("kept".into()));
    side.execute_batch("DROP TRIGGER poison").expect("the poison removed");
    assert_acquired(&store, &poisoned, "the poisoned key, once its claim can commit");
}

/// Claims from many threads, some poisoned, grouped as they arrive (which claims share a
/// group is the writer's choice, not the test's): every claim answered with an error left
/// nothing behind and can be claimed again once the poison is gone, every claim answered
/// `Acquired` is stored, and every poisoned claim failed.
#[test]
fn concurrent_claims_beside_failing_commits_are_answered_as_stored() {
    let path = temp_file("failed-commits-concurrent");
    let store: SqliteStore<String> =
        SqliteStore::open(&path, StoreConfig::default()).expect("open");
    let side = side_connection(&path);
    poison_commits(&side);
    let names: Vec<String> = (0..16)
        .map(|i| if i % 4 == 0 { format!("poisoned-{i}") } else { format!("k{i}") })
        .collect();
    let answers: Vec<(ScopedKey, bool)> = std::thread::scope(|s| {
        let claims: Vec<_> = names
            .iter()
            .map(|name| {
                let (store, key) = (&store, ScopedKey::parse("tenant", name).expect("key"));
                s.spawn(move || {
                    let answer = store.claim(&key, &fp());
                    let acquired = matches!(answer, Ok(Claim::Acquired(_)));
                    if !acquired {
                        assert_write_failed(answer, key.key().as_str());
                    }
                    (key, acquired)
                })
            })
            .collect();
        claims.into_iter().map(|c| c.join().expect("claimer")).collect()
    });
    side.execute_batch("DROP TRIGGER poison").expect("the poison removed");
    for (key, acquired) in answers {
        let stored = rows_named(&side, key.key().as_str());
        assert_eq!(stored, i64::from(acquired), "{key}: answered acquired {acquired}");
        assert!(!(acquired && key.key().as_str().starts_with("poisoned")), "{key} committed");
        if !acquired {
            assert_acquired(&store, &key, "a key whose claim failed, claimed again");
        }
    }
}
