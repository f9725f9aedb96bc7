//! A failed fsync of SQLite's write-ahead log, made by a real worker process: the
//! `fail_sync.c` fixture, preloaded into it, fails every sync of the store's `-wal` file
//! while a flag file exists, with EIO, as a disk's failed write-back does. The writes
//! whose commit could not be synced are answered with an error and are not visible; the
//! writer rolls back and serves the next write; nothing answered `ok` is ever lost,
//! whether the worker quits or is killed.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use idem_core::{Fingerprint, KeyState, KeyStore, ScopedKey, StoreConfig};
use idem_store_sqlite::SqliteStore;

/// How long a worker may take to answer one command: a write that hangs on a failed sync
/// fails the test instead of hanging it.
const ANSWER_WAIT_MAX: Duration = Duration::from_secs(10);

/// Builds the fixture into `dir` with the C compiler every Rust build links with.
fn fixture(dir: &Path) -> PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/fail_sync.c");
    let library = dir.join("libfail_sync.so");
    let built = Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&library)
        .arg(&source)
        .arg("-ldl")
        .status()
        .expect("cc runs");
    assert!(built.success(), "cc could not build {}", source.display());
    library
}

/// A worker with the fixture preloaded, and its answers on a channel.
struct Worker {
    child: Child,
    stdin: ChildStdin,
    answers: mpsc::Receiver<String>,
    failures_log: PathBuf,
}

impl Worker {
    fn start(dir: &Path, store: &Path) -> Self {
        let flag = dir.join("fail.flag");
        let failures_log = dir.join("failures.log");
        let mut child = Command::new(env!("CARGO_BIN_EXE_sync_worker"))
            .arg(store)
            .arg(&flag)
            .env("LD_PRELOAD", fixture(dir))
            .env("IDEM_FAIL_SYNC_FLAG", &flag)
            .env("IDEM_FAIL_SYNC_SUFFIX", "-wal")
            .env("IDEM_FAIL_SYNC_LOG", &failures_log)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("the worker starts");
        let stdin = child.stdin.take().expect("its stdin");
        let stdout = BufReader::new(child.stdout.take().expect("its stdout"));
        let (send, answers) = mpsc::channel();
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        Self { child, stdin, answers, failures_log }
    }

    /// Sends `command` and returns the worker's answer.
    fn ask(&mut self, command: &str) -> String {
        writeln!(self.stdin, "{command}").expect("the worker reads");
        self.answers
            .recv_timeout(ANSWER_WAIT_MAX)
            .unwrap_or_else(|e| panic!("{command:?}: no answer in {ANSWER_WAIT_MAX:?}: {e}"))
    }

    /// The syncs the fixture failed: what it was asked to do, confirmed.
    fn syncs_failed(&self) -> Vec<String> {
        let log = std::fs::read_to_string(&self.failures_log).unwrap_or_default();
        log.lines().map(str::to_owned).collect()
    }

    fn kill(mut self) {
        self.child.kill().expect("killed");
        self.child.wait().expect("reaped");
    }

    fn quit(mut self) {
        writeln!(self.stdin, "quit").expect("the worker reads");
        assert!(self.child.wait().expect("it exits").success());
    }
}

/// What the store in `file` holds for `key`, read by a process without the fixture.
fn state(file: &Path, key: &str) -> String {
    let store: SqliteStore<String> = SqliteStore::open(file, StoreConfig::default()).expect("open");
    let key = ScopedKey::parse("sync", key).expect("valid");
    let fingerprint = Fingerprint::builder("sync-worker").finish();
    match store.lookup(&key, &fingerprint).expect("lookup") {
        KeyState::Absent => "absent".into(),
        KeyState::InFlight { .. } => "in-flight".into(),
        KeyState::Pending { .. } => "pending".into(),
        KeyState::Finished(result) => format!("finished {result}"),
    }
}

/// A worker on a store in a scratch directory `name` of its own, which has written through
/// a failing disk: acknowledged before the disk fails, `a` finished and `c` claimed; while
/// it fails, the claim of `b` and the completion of `c`, each answered an error. Returns
/// the worker, its disk still failing, and the store's file.
fn after_writes_through_a_failing_disk(name: &str) -> (Worker, PathBuf) {
    let dir = idem_testkit::scratch_dir(name);
    let file = dir.join("keys.db");
    let mut worker = Worker::start(&dir, &file);
    assert_eq!(worker.ask("claim a"), "acquired");
    assert_eq!(worker.ask("complete a"), "ok");
    assert_eq!(worker.ask("claim c"), "acquired");
    assert_eq!(worker.ask("fail on"), "ok");
    for write in ["claim b", "complete c"] {
        let answer = worker.ask(write);
        assert!(answer.starts_with("error storage failed"), "{write}: {answer}");
    }
    let failed = worker.syncs_failed();
    assert!(failed.len() >= 2 && failed.iter().all(|f| f.ends_with("-wal")), "{failed:?}");
    (worker, file)
}

#[test]
fn a_failed_wal_sync_fails_its_writes_shows_nothing_and_the_next_write_succeeds() {
    let (mut worker, file) = after_writes_through_a_failing_disk("sqlite-sync-fails");
    // Nothing of a failed write is visible; what was acknowledged is.
    assert_eq!(worker.ask("lookup a"), "finished r-a");
    assert_eq!(worker.ask("lookup b"), "absent");
    assert_eq!(worker.ask("lookup c"), "in-flight");
    // The disk heals: the writer rolled back and serves the next writes.
    assert_eq!(worker.ask("fail off"), "ok");
    assert_eq!(worker.ask("claim b"), "acquired");
    assert_eq!(worker.ask("complete b"), "ok");
    assert_eq!(worker.ask("complete c"), "ok");
    worker.quit();
    for key in ["a", "b", "c"] {
        assert_eq!(state(&file, key), format!("finished r-{key}"), "{key} after a reopen");
    }
}

#[test]
fn killed_after_a_failed_sync_it_loses_nothing_acknowledged() {
    let (worker, file) = after_writes_through_a_failing_disk("sqlite-sync-killed");
    worker.kill();
    assert_eq!(state(&file, "a"), "finished r-a");
    // A write answered with an error has an unknown outcome, as for any storage error:
    // its frames may have reached the file without the sync, and the next open finds
    // them. Either outcome is one the caller was told to expect, never anything else.
    let b = state(&file, "b");
    assert!(["absent", "in-flight"].contains(&b.as_str()), "b: {b}");
    let c = state(&file, "c");
    assert!(["in-flight", "finished r-c"].contains(&c.as_str()), "c: {c}");
}
