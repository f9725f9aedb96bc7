//! [`SqliteStore`]: the claimed-key store in one SQLite file, durable through a crash.
//!
//! * WAL mode, `synchronous = FULL`: a claim, completion or release is one transaction,
//!   on disk (fsync'd) when the call returns, so an acknowledged call survives a process
//!   kill and a power loss. (`NORMAL` would survive a process kill but could lose the last
//!   commits on power loss; this store promises more, and pays for it in fsyncs.)
//! * The claim is one `INSERT ... ON CONFLICT DO UPDATE ... WHERE` statement: it inserts
//!   an absent key, or takes over an expired result or an expired lease (with the same
//!   fingerprint), raising the fencing token, in one atomic step. Only when it changes
//!   nothing does a read say why (in flight, replay, key reused), in the same transaction.
//! * Completion and release are one conditional statement each, on the fencing token.
//! * Several processes may open one file: SQLite's locking serialises writers
//!   (`busy_timeout` waits for the lock), and the claim statement gives exactly one owner.
//! * Results are stored with idem-core's checksummed [`Durable`] encoding, at most
//!   `result_bytes_max` bytes each.
//! * Group commit: one writer thread owns the connection. Operations that arrive while a
//!   commit is in progress are applied together in the next transaction, each inside its
//!   own savepoint (one failing operation does not undo the others), and every caller is
//!   answered only after that transaction is on disk. Concurrent callers share fsyncs;
//!   nobody is acknowledged earlier than before ([`SqliteStore::commit_stats`] counts
//!   the transactions and the writes in them).
//!
//! # Both store contracts
//!
//! The store serves idem-core's [`KeyStore`] (callers on threads) and
//! [`AsyncKeyStore`](idem_core::AsyncKeyStore) (async services): one state machine, the
//! same writes, limits, errors and trace events. The two differ only in how a caller
//! waits:
//!
//! * A sync call's write blocks its thread until the writer answers.
//! * An async call's write goes to the same writer's queue with a reply channel of its
//!   own, and its task sleeps: no runtime thread and no blocking-pool thread waits for
//!   the disk. After the group's commit (or its failure) the writer sends the answer down
//!   that channel, which wakes the task. A full queue (4096 writes) is waited for the same
//!   way, and a writer that has stopped answers at once.
//! * Reads (a replay, a claim in flight, `lookup`) are answered on the caller's task or
//!   thread, on the reader connection: one indexed read of one row under a mutex nobody
//!   holds across a commit, which in WAL mode does not wait for a writer (the rare waits
//!   it can meet are listed in the async contract's module, `src/async_store.rs`).
//!
//! An async call given up (its future dropped) once its write is queued still happens,
//! and only its answer is lost: a claim leaves its key in flight until its lease runs out
//! and the next claim recovers it; a completion is stored and replays. A caller that must
//! know the outcome awaits it.
//!
//! # Guarantee
//!
//! A claim, completion or release answered `Ok` (returned or awaited) is on disk: after a
//! process kill or a power loss, the reopened file answers as the store did (checked by
//! the crash tests, and by `durability()` reading back WAL and `FULL`). A failed commit is
//! an error its callers see; nothing of its group is visible or acknowledged. The store
//! keeps idem-core's `KeyStore` and `AsyncKeyStore` contracts (the conformance suite runs
//! against it through each).
//!
//! # Examples
//!
//! ```
//! use idem_core::{Claim, Fingerprint, KeyStore, ScopedKey, StoreConfig};
//! use idem_store_sqlite::SqliteStore;
//!
//! let path = std::env::temp_dir().join(format!("idem-doc-{}.db", std::process::id()));
//! # let _ = std::fs::remove_file(&path);
//! let key = ScopedKey::parse("shop", "order-1")?;
//! let request = Fingerprint::builder("order").u64("amount_minor", 1050).finish();
//! {
//!     let store = SqliteStore::<String>::open(&path, StoreConfig::default())?;
//!     let Claim::Acquired(lease) = store.claim(&key, &request)? else { unreachable!() };
//!     store.complete(&lease, "ch_1".to_string())?;
//! }
//! // Reopened (after a restart, a crash): the stored answer replays.
//! let store = SqliteStore::<String>::open(&path, StoreConfig::default())?;
//! assert_eq!(store.claim(&key, &request)?, Claim::Replay("ch_1".to_string()));
//! # drop(store);
//! # let _ = std::fs::remove_file(&path);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The same store, awaited by an async caller:
//!
//! ```
//! use idem_core::{AsyncKeyStore, Claim, Fingerprint, ScopedKey, StoreConfig};
//! use idem_store_sqlite::SqliteStore;
//!
//! let path = std::env::temp_dir().join(format!("idem-doc-async-{}.db", std::process::id()));
//! # let _ = std::fs::remove_file(&path);
//! let store = SqliteStore::<String>::open(&path, StoreConfig::default())?;
//! let key = ScopedKey::parse("shop", "order-2")?;
//! let request = Fingerprint::builder("order").u64("amount_minor", 700).finish();
//! let runtime = tokio::runtime::Builder::new_current_thread().build()?;
//! let replay = runtime.block_on(async {
//!     let Claim::Acquired(lease) = AsyncKeyStore::claim(&store, &key, &request).await? else {
//!         unreachable!("an absent key is acquired")
//!     };
//!     AsyncKeyStore::complete(&store, &lease, "ch_2".to_string()).await?;
//!     AsyncKeyStore::claim(&store, &key, &request).await
//! })?;
//! assert_eq!(replay, Claim::Replay("ch_2".to_string()));
//! # drop(store);
//! # let _ = std::fs::remove_file(&path);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Features
//!
//! `tracing` (off by default): the `claim` and `settle` spans and events every store emits
//! (see `idem_core::trace`).

mod admin;
mod async_store;

use std::fmt;
use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, params};

use std::sync::Arc;

use idem_core::{
    Claim, Clock, FencingToken, Fingerprint, KeyState, KeyStore, Lease, PendingClaim, ScopedKey,
    StoreConfig, StoreError, SystemClock, Timestamp,
};
use idem_durable::Durable;
use idem_durable::encode_result;
use idem_durable::group_commit::{
    AfterFailure, CommitError, Committer, GroupCommit, GroupFailure, GroupLimits,
};
use idem_durable::row::{
    StoredRow as Row, claim_refused, claim_with_sweep, decode_claim, pending_claim, row_state,
};
use parking_lot::Mutex;

/// What [`SqliteStore::commit_stats`] reports (idem-durable's, re-exported).
pub use idem_durable::group_commit::GroupStats;

/// The schema version this code writes and reads. Version 2: every result carries a
/// checksum bound to its key.
pub const SCHEMA_VERSION: i64 = 2;

/// What went wrong in the SQLite store; wrapped in [`StoreError::Storage`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SqliteError {
    /// SQLite itself failed (I/O, a locked file past the busy timeout, a full disk).
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// The file was written by another schema version.
    #[error("store file has schema version {found}, this code reads version {SCHEMA_VERSION}")]
    SchemaVersion {
        /// The version found in the file.
        found: i64,
    },
    /// Stored bytes could not be read back, or the file failed its integrity check.
    #[error("corrupt record: {0}")]
    Corrupt(String),
    /// The write transaction failed (a locked file past the busy timeout, I/O, a full
    /// disk): nothing of it happened. Not corruption; a retry may succeed. Its source is
    /// SQLite's own error (downcast [`GroupFailure::error`] to `rusqlite::Error`).
    #[error("write transaction failed: {0}")]
    Write(#[source] GroupFailure),
    /// The writer thread is gone (the store is closing); nothing more is written.
    #[error("the store's writer thread stopped")]
    WriterStopped,
    /// The store file could not be opened or set up (a missing directory, no permission,
    /// a file that is not a database, a lock held past the busy timeout).
    #[error("cannot open the store file {}: {reason}", path.display())]
    Open {
        /// The file.
        path: std::path::PathBuf,
        /// What SQLite said.
        reason: String,
    },
}

impl From<SqliteError> for StoreError {
    fn from(error: SqliteError) -> Self {
        StoreError::Storage(Box::new(error))
    }
}

fn storage(error: rusqlite::Error) -> StoreError {
    SqliteError::Sqlite(error).into()
}

/// The durable claimed-key store on one SQLite file.
pub struct SqliteStore<R> {
    /// A second connection for the read-only fast path: a replay, or a claim that is
    /// clearly in flight, is answered without queueing behind writes.
    reader: Mutex<Connection>,
    clock: Arc<dyn Clock>,
    writer: GroupCommit<Writer>,
    result_bytes_max: usize,
    /// How long a claim is held: bounds the wait a read-path answer tells.
    lease: Duration,
    /// How long a finished result is replayed.
    result_ttl: Duration,
    _result: std::marker::PhantomData<fn() -> R>,
}

impl<R> fmt::Debug for SqliteStore<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteStore")
            .field("result_bytes_max", &self.result_bytes_max)
            .finish_non_exhaustive()
    }
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    schema_version INTEGER NOT NULL,
    next_token INTEGER NOT NULL,
    records INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS claims (
    scope TEXT NOT NULL,
    key TEXT NOT NULL,
    fingerprint BLOB NOT NULL,
    token INTEGER NOT NULL,
    finished INTEGER NOT NULL,
    lease_expires_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    result BLOB,
    recovered INTEGER NOT NULL DEFAULT 0,
    fresh INTEGER NOT NULL DEFAULT 1,
    PRIMARY KEY (scope, key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS claims_expiry ON claims (finished, expires_at);
CREATE INDEX IF NOT EXISTS claims_leases ON claims (finished, lease_expires_at);
";

/// The durability settings a store runs with, as SQLite reports them
/// ([`SqliteStore::durability`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Durability {
    /// `PRAGMA journal_mode`: `"wal"`, the write-ahead log.
    pub journal_mode: String,
    /// `PRAGMA synchronous`: 2 is `FULL`, an fsync at every commit.
    pub synchronous: i64,
}

/// Why a group failed whose transaction SQLite rolled back under one of its operations.
const GROUP_ROLLED_BACK: &str = "an earlier operation of this group failed (an I/O error, a \
                                 full disk) and SQLite rolled the group's transaction back: \
                                 nothing of it happened";

/// The writer's limits: operations queued for it, and operations in one transaction.
const WRITER_LIMITS: GroupLimits = GroupLimits { queue_max: 4096, group_max: 1024 };

/// What the writer thread owns: the write connection, inside a transaction per group.
struct Writer {
    conn: Connection,
    clock: Arc<dyn Clock>,
    config: StoreConfig,
}

impl Committer for Writer {
    type Error = rusqlite::Error;

    fn begin(&mut self) -> rusqlite::Result<()> {
        exec(&self.conn, "BEGIN IMMEDIATE", []).map(drop)
    }

    fn commit(&mut self) -> rusqlite::Result<()> {
        if self.conn.is_autocommit() {
            // Rolled back by SQLite under an operation that failed: said as such, not as
            // COMMIT's "no transaction is active".
            let code = rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_ABORT);
            return Err(rusqlite::Error::SqliteFailure(code, Some(GROUP_ROLLED_BACK.into())));
        }
        exec(&self.conn, "COMMIT", []).map(drop)
    }

    /// A failed commit (or begin), a failed sync of the log included: roll back what is
    /// left and go on. SQLite publishes a commit only after its sync, so nothing of the
    /// group is visible, and the next group overwrites its frames in the log. Its callers
    /// were answered with the error, whose outcome is unknown (the frames may reach the
    /// disk anyway): see docs/durability.md, "A failed sync".
    fn recover(&mut self) -> AfterFailure {
        let _ = self.conn.execute_batch("ROLLBACK");
        AfterFailure::Continue
    }
}

impl Writer {
    /// Runs one operation in its own savepoint inside the group's transaction: its changes
    /// are kept if `keep` says so (a refusal changes nothing), rolled back otherwise, so
    /// one operation's failure never undoes the others.
    fn in_savepoint<T>(
        &mut self,
        op: impl FnOnce(&Connection, Timestamp, StoreConfig) -> Result<T, StoreError>,
        keep: impl FnOnce(&T) -> bool,
    ) -> Result<T, StoreError> {
        let now = now_of(self.clock.as_ref())?;
        if self.conn.is_autocommit() {
            // An earlier operation's failure (an I/O error, a full disk) made SQLite roll
            // the group's transaction back. Run now, this one would begin a transaction of
            // its own and commit it at its savepoint's release, outside the group, while
            // its caller is answered the group's failure: it is not run.
            return Err(StoreError::Storage(GROUP_ROLLED_BACK.into()));
        }
        // Cached statements: parsed once per connection, not once per operation.
        exec(&self.conn, "SAVEPOINT op", []).map_err(storage)?;
        let result = op(&self.conn, now, self.config);
        if !result.as_ref().is_ok_and(keep)
            && let Err(rollback) = exec(&self.conn, "ROLLBACK TO op", [])
        {
            // The savepoint went with the whole transaction: the operation's own error
            // says why (a rollback's "no such savepoint" would not).
            return result.and(Err(storage(rollback)));
        }
        exec(&self.conn, "RELEASE op", []).map_err(storage)?;
        result
    }
}

fn ms(t: Timestamp) -> i64 {
    i64::try_from(t.as_millis()).unwrap_or(i64::MAX)
}

/// The latest clock reading the store works with, in ms since the epoch (about 146
/// million years): its deadlines are kept as `i64` ms, a "never" lease (`Duration::MAX`)
/// as `i64::MAX`. Past it a finite lease's deadline would be cut to that maximum, and a
/// reading at it would find every lease already run out: a live one taken over.
const CLOCK_MS_MAX: u64 = i64::MAX as u64 / 2;

/// The store's clock, read; a reading past [`CLOCK_MS_MAX`] is refused (a broken clock:
/// deciding on it could hand one key to two owners).
fn now_of(clock: &dyn Clock) -> Result<Timestamp, StoreError> {
    let now = clock.now();
    if now.as_millis() > CLOCK_MS_MAX {
        let why = format!(
            "the clock reads {} ms since the epoch, past the {CLOCK_MS_MAX} ms the store keeps \
             deadlines for: fix the clock",
            now.as_millis()
        );
        return Err(StoreError::Storage(why.into()));
    }
    Ok(now)
}

/// How long a statement waits for a lock another connection holds (another process's
/// writer on the same file, a checkpoint) before SQLite answers `SQLITE_BUSY`, which the
/// store reports as a storage error. A bound chosen, not measured: far longer than a
/// group's commit (a few fsyncs), so another process's writes never fail a caller, and
/// short enough that a lock nobody gives back (a process stopped while it held it, a
/// `sqlite3` shell left in a transaction) fails calls instead of hanging them.
const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// How many times opening retries its set-up while another handle holds the file's
/// write lock (two processes creating one file at once).
const OPEN_ATTEMPTS_MAX: u32 = 50;
/// The pause before set-up attempt `n + 1` is `n` steps, at most [`OPEN_PAUSE_MAX`]: at
/// most 790 ms of pauses over [`OPEN_ATTEMPTS_MAX`] attempts before opening gives up.
const OPEN_PAUSE_STEP: Duration = Duration::from_millis(1);
/// The longest pause between two set-up attempts.
const OPEN_PAUSE_MAX: Duration = Duration::from_millis(20);

fn open_connection(path: &Path) -> Result<Connection, StoreError> {
    let cannot_open = |error: rusqlite::Error| -> StoreError {
        SqliteError::Open { path: path.to_path_buf(), reason: error.to_string() }.into()
    };
    let conn = Connection::open(path).map_err(cannot_open)?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(cannot_open)?;
    let mut attempt = 1;
    // A lock upgrade that could deadlock, or switching the journal mode, answers BUSY at
    // once instead of waiting for the busy timeout: retry the whole set-up, with a pause.
    while let Err(error) = set_up(&conn) {
        if attempt >= OPEN_ATTEMPTS_MAX || !is_busy(&error) {
            return Err(cannot_open(error));
        }
        std::thread::sleep((OPEN_PAUSE_STEP * attempt).min(OPEN_PAUSE_MAX));
        attempt += 1;
    }
    let found: i64 = conn
        .query_row("SELECT schema_version FROM meta WHERE id = 1", [], |r| r.get(0))
        .map_err(storage)?;
    if found != SCHEMA_VERSION {
        return Err(SqliteError::SchemaVersion { found }.into());
    }
    Ok(conn)
}

/// WAL, `synchronous = FULL`, and the schema, created under the write lock.
fn set_up(conn: &Connection) -> rusqlite::Result<()> {
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.execute_batch(&format!(
        "BEGIN IMMEDIATE; {SCHEMA}
         INSERT OR IGNORE INTO meta (id, schema_version, next_token, records)
             VALUES (1, {SCHEMA_VERSION}, 1, 0);
         COMMIT;"
    ))
    .inspect_err(|_| {
        let _ = conn.execute_batch("ROLLBACK");
    })
}

fn is_busy(error: &rusqlite::Error) -> bool {
    use rusqlite::ErrorCode::{DatabaseBusy, DatabaseLocked};
    matches!(error.sqlite_error_code(), Some(DatabaseBusy | DatabaseLocked))
}

/// SQLite's own integrity check of the file's structure (`PRAGMA quick_check`): a file
/// damaged on disk is refused at open, naming what SQLite found.
fn quick_check(conn: &Connection) -> Result<(), StoreError> {
    let mut statement = conn.prepare("PRAGMA quick_check").map_err(storage)?;
    let findings: Vec<String> = statement
        .query_map([], |r| r.get(0))
        .map_err(storage)?
        .collect::<Result<_, _>>()
        .map_err(storage)?;
    if findings == ["ok"] {
        return Ok(());
    }
    Err(SqliteError::Corrupt(format!("quick_check: {}", findings.join("; "))).into())
}

/// Runs a statement through the connection's statement cache (preparing the claim's
/// upsert costs more than running it).
fn exec<P: rusqlite::Params>(conn: &Connection, sql: &str, params: P) -> rusqlite::Result<usize> {
    conn.prepare_cached(sql)?.execute(params)
}

/// Reads one row through the statement cache.
fn row<T, P: rusqlite::Params>(
    conn: &Connection,
    sql: &str,
    params: P,
    f: impl FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    conn.prepare_cached(sql)?.query_row(params, f)
}

fn complete_row(
    conn: &Connection,
    lease: &Lease,
    bytes: &[u8],
    now: Timestamp,
    config: StoreConfig,
) -> Result<(), StoreError> {
    let expires_at = ms(now.saturating_add(config.result_ttl()));
    let changed = exec(
        conn,
        "UPDATE claims SET finished = 1, expires_at = ?4, result = ?5
         WHERE scope = ?1 AND key = ?2 AND token = ?3 AND finished = 0",
        params![
            lease.key().scope().as_str(),
            lease.key().key().as_str(),
            lease.token().get() as i64,
            expires_at,
            bytes
        ],
    );
    settled(changed, lease)
}

fn release_row(conn: &Connection, lease: &Lease) -> Result<(), StoreError> {
    let changed = exec(
        conn,
        "DELETE FROM claims WHERE scope = ?1 AND key = ?2 AND token = ?3 AND finished = 0",
        params![
            lease.key().scope().as_str(),
            lease.key().key().as_str(),
            lease.token().get() as i64
        ],
    );
    settled(changed, lease)?;
    exec(conn, "UPDATE meta SET records = records - 1 WHERE id = 1", []).map(drop).map_err(storage)
}

/// Extends a held lease by a whole lease from `now`.
fn renew_row(
    conn: &Connection,
    lease: &Lease,
    now: Timestamp,
    config: StoreConfig,
) -> Result<Lease, StoreError> {
    let lease_expires_at = now.saturating_add(config.lease());
    let changed = exec(
        conn,
        "UPDATE claims SET lease_expires_at = ?4
         WHERE scope = ?1 AND key = ?2 AND token = ?3 AND finished = 0",
        params![
            lease.key().scope().as_str(),
            lease.key().key().as_str(),
            lease.token().get() as i64,
            ms(lease_expires_at)
        ],
    );
    settled(changed, lease)?;
    Ok(Lease::new(lease.key().clone(), lease.token(), lease_expires_at))
}

fn settled(changed: rusqlite::Result<usize>, lease: &Lease) -> Result<(), StoreError> {
    match changed.map_err(storage)? {
        1 => Ok(()),
        _ => Err(StoreError::LeaseLost { key: lease.key().clone(), token: lease.token() }),
    }
}

fn claim(
    conn: &Connection,
    key: &ScopedKey,
    fingerprint: &Fingerprint,
    now: Timestamp,
    config: StoreConfig,
) -> Result<Claim<Vec<u8>>, StoreError> {
    let lease_expires_at = now.saturating_add(config.lease());
    let (token, records): (i64, i64) =
        row(conn, "SELECT next_token, records FROM meta WHERE id = 1", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .map_err(storage)?;
    // One statement: insert the absent key, or take over an expired result (any
    // fingerprint) or an expired lease (same fingerprint), with the next token.
    let taken: Option<(i64, i64)> = row(
        conn,
        "INSERT INTO claims (scope, key, fingerprint, token, finished, lease_expires_at,
                expires_at, result, recovered, fresh)
             VALUES (?1, ?2, ?3, ?4, 0, ?5, 0, NULL, 0, 1)
             ON CONFLICT (scope, key) DO UPDATE SET
                 fingerprint = excluded.fingerprint, token = excluded.token, finished = 0,
                 lease_expires_at = excluded.lease_expires_at, expires_at = 0, result = NULL,
                 recovered = 1 - claims.finished, fresh = 0
             WHERE (claims.finished = 1 AND claims.expires_at <= ?6)
                OR (claims.finished = 0 AND claims.lease_expires_at <= ?6 AND
                    claims.fingerprint = excluded.fingerprint)
             RETURNING recovered, fresh",
        params![
            key.scope().as_str(),
            key.key().as_str(),
            &fingerprint.as_bytes()[..],
            token,
            ms(lease_expires_at),
            ms(now)
        ],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .optional()
    .map_err(storage)?;
    let lease = Lease::new(key.clone(), FencingToken::new(token as u64), lease_expires_at);
    let Some((recovered, fresh)) = taken else {
        return inspect(conn, key, fingerprint, now, config.lease());
    };
    // The scope's quota first, as the memory store: a key refused by both is refused by
    // its scope (a sweep of the store would not admit it).
    if recovered == 0 {
        scope_quota(conn, key, config)?;
    }
    if fresh == 1 && records >= config.capacity() as i64 {
        // The savepoint rolls the insert back.
        return Err(StoreError::StoreFull { capacity: config.capacity() });
    }
    let counted = if fresh == 1 { 1 } else { 0 };
    exec(
        conn,
        "UPDATE meta SET next_token = next_token + 1, records = records + ?1 WHERE id = 1",
        params![counted],
    )
    .map_err(storage)?;
    Ok(if recovered == 1 { Claim::Recover(lease) } else { Claim::Acquired(lease) })
}

/// With a scope quota, refuses a new in-flight claim (already written, and rolled back
/// with its savepoint by the refusal) past the quota.
fn scope_quota(conn: &Connection, key: &ScopedKey, config: StoreConfig) -> Result<(), StoreError> {
    let Some(max) = config.scope_in_flight_max() else { return Ok(()) };
    let in_flight: i64 = row(
        conn,
        "SELECT COUNT(*) FROM claims WHERE scope = ?1 AND finished = 0",
        params![key.scope().as_str()],
        |r| r.get(0),
    )
    .map_err(storage)?;
    if in_flight > i64::try_from(max).unwrap_or(i64::MAX) {
        return Err(StoreError::ScopeQuota { scope: key.scope().clone(), in_flight_max: max });
    }
    Ok(())
}

/// The claim changed nothing: say why (in flight, replay, key reused). Reads only.
fn inspect(
    conn: &Connection,
    key: &ScopedKey,
    fingerprint: &Fingerprint,
    now: Timestamp,
    lease: Duration,
) -> Result<Claim<Vec<u8>>, StoreError> {
    let (stored_fp, finished, lease_until, result): (Vec<u8>, i64, i64, Option<Vec<u8>>) = row(
        conn,
        "SELECT fingerprint, finished, lease_expires_at, result FROM claims WHERE scope =
                ?1 AND key = ?2",
        params![key.scope().as_str(), key.key().as_str()],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
    )
    .map_err(storage)?;
    let row = Row {
        same_fingerprint: stored_fp == fingerprint.as_bytes()[..],
        finished: finished == 1,
        lease_expires_ms: lease_until,
        expires_ms: 0,
        result,
    };
    claim_refused(key, row, now, lease)
}

fn sweep(conn: &Connection, now: Timestamp, config: StoreConfig) -> Result<usize, StoreError> {
    let removed = exec(
        conn,
        "DELETE FROM claims WHERE (scope, key) IN (
                 SELECT scope, key FROM claims WHERE finished = 1 AND expires_at <= ?1 LIMIT ?2)",
        params![ms(now), config.sweep_batch_max() as i64],
    )
    .map_err(storage)?;
    exec(conn, "UPDATE meta SET records = records - ?1 WHERE id = 1", params![removed as i64])
        .map_err(storage)?;
    Ok(removed)
}

fn pending(conn: &Connection, now: Timestamp, max: usize) -> Result<Vec<PendingClaim>, StoreError> {
    let mut statement = conn
        .prepare_cached(
            "SELECT scope, key, fingerprint, lease_expires_at FROM claims
             WHERE finished = 0 AND lease_expires_at <= ?1 LIMIT ?2",
        )
        .map_err(storage)?;
    let rows = statement
        .query_map(params![ms(now), max as i64], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, Vec<u8>>(2)?,
                r.get::<_, i64>(3)?,
            ))
        })
        .map_err(storage)?;
    let mut found = Vec::new();
    for row in rows {
        let (scope, key, fp, expired) = row.map_err(storage)?;
        found.push(pending_claim(&scope, &key, &fp, expired)?);
    }
    Ok(found)
}

impl<R: Durable + Clone + Send> SqliteStore<R> {
    /// Opens (creating if needed) the store at `path`, on the system clock.
    ///
    /// # Errors
    ///
    /// [`StoreError::Storage`] with [`SqliteError`]: the file cannot be opened, or has
    /// another schema version.
    pub fn open(path: &Path, config: StoreConfig) -> Result<Self, StoreError> {
        Self::open_with_clock(path, config, Arc::new(SystemClock))
    }

    /// Opens the store at `path`, reading time from `clock`, and starts its writer thread.
    ///
    /// # Errors
    ///
    /// As [`open`](Self::open); also if the writer thread cannot be started.
    pub fn open_with_clock(
        path: &Path,
        config: StoreConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, StoreError> {
        let conn = open_connection(path)?;
        quick_check(&conn)?;
        let reader = open_connection(path)?;
        let writer = Writer { conn, clock: clock.clone(), config };
        let writer = GroupCommit::start("idem-sqlite-writer", writer, WRITER_LIMITS)
            .map_err(|e| StoreError::Storage(Box::new(e)))?;
        Ok(Self {
            reader: Mutex::new(reader),
            clock,
            writer,
            result_bytes_max: idem_durable::RESULT_BYTES_MAX_DEFAULT,
            lease: config.lease(),
            result_ttl: config.result_ttl(),
            _result: std::marker::PhantomData,
        })
    }

    /// The durability settings the store's connections run with, read back from SQLite:
    /// `journal_mode` `"wal"` and `synchronous` 2 (`FULL`). A test holds the store to
    /// them, since a killed process cannot show a missing sync.
    ///
    /// # Errors
    ///
    /// [`StoreError::Storage`] if SQLite fails.
    pub fn durability(&self) -> Result<Durability, StoreError> {
        let reader = self.reader.lock();
        let journal_mode: String =
            reader.query_row("PRAGMA journal_mode", [], |r| r.get(0)).map_err(storage)?;
        let synchronous: i64 =
            reader.query_row("PRAGMA synchronous", [], |r| r.get(0)).map_err(storage)?;
        Ok(Durability { journal_mode, synchronous })
    }

    /// Sets the largest stored result, in bytes of its encoding (default
    /// [`RESULT_BYTES_MAX_DEFAULT`](idem_durable::RESULT_BYTES_MAX_DEFAULT), 2 MiB).
    #[must_use]
    pub fn with_result_bytes_max(mut self, max: usize) -> Self {
        self.result_bytes_max = max;
        self
    }

    /// What the writer thread has committed since the store opened: its groups (each one
    /// transaction, one fsync) and the writes in them. Reads answered beside the writer
    /// (replays, in-flight claims, lookups) are not in it.
    pub fn commit_stats(&self) -> GroupStats {
        self.writer.stats()
    }

    /// Runs `job` in the writer's next transaction and answers after the commit, blocking
    /// the calling thread meanwhile: its own typed result, or why the transaction failed.
    fn write<T: Send + 'static>(&self, job: impl WriteJob<T>) -> Result<T, StoreError> {
        written(self.writer.submit(job))
    }

    /// The row of `key` as it stands for a request with `fingerprint`, read on the reader
    /// connection (no write lock, no writer thread).
    fn read_row(
        &self,
        key: &ScopedKey,
        fingerprint: &Fingerprint,
    ) -> Result<Option<Row>, StoreError> {
        let reader = self.reader.lock();
        row(
            &reader,
            "SELECT fingerprint, finished, lease_expires_at, expires_at, result FROM claims
                WHERE scope = ?1 AND key = ?2",
            params![key.scope().as_str(), key.key().as_str()],
            |r| {
                let stored: Vec<u8> = r.get(0)?;
                let finished: i64 = r.get(1)?;
                Ok(Row {
                    same_fingerprint: stored == fingerprint.as_bytes()[..],
                    finished: finished == 1,
                    lease_expires_ms: r.get(2)?,
                    expires_ms: r.get(3)?,
                    result: r.get(4)?,
                })
            },
        )
        .optional()
        .map_err(storage)
    }

    /// The read-only fast path: a live result with this fingerprint is a replay, a live
    /// lease with this fingerprint is in flight. A read may be a moment stale; both answers
    /// stay true or become "retry" (a finished record never changes before it expires).
    /// Anything else (absent, expired, another fingerprint) goes to the writer.
    fn read_claim(
        &self,
        key: &ScopedKey,
        fingerprint: &Fingerprint,
    ) -> Result<Option<Claim<R>>, StoreError> {
        Ok(match self.lookup(key, fingerprint)? {
            KeyState::Finished(result) => Some(Claim::Replay(result)),
            KeyState::InFlight { retry_after } => Some(Claim::InFlight { retry_after }),
            KeyState::Absent | KeyState::Pending { .. } => None,
        })
    }

    fn claim_once(
        &self,
        key: &ScopedKey,
        fingerprint: &Fingerprint,
    ) -> Result<Claim<R>, StoreError> {
        if let Some(answer) = self.read_claim(key, fingerprint)? {
            return Ok(answer);
        }
        decode_claim(key, self.write(claim_write(key, fingerprint))?)
    }

    /// `complete`'s write: the result encoded here, within the store's limit, before it
    /// goes to the writer.
    fn complete_write(&self, lease: &Lease, result: &R) -> Result<impl WriteJob<()>, StoreError> {
        let bytes = encode_result(lease.key(), result, self.result_bytes_max)?;
        let lease = lease.clone();
        Ok(in_savepoint(
            move |conn, now, config| complete_row(conn, &lease, &bytes, now, config),
            |_| true,
        ))
    }
}

/// One write for the writer thread: an operation run in the group's transaction, answered
/// with its own result once the group is committed.
trait WriteJob<T>: FnOnce(&mut Writer) -> Result<T, StoreError> + Send + 'static {}

impl<T, F: FnOnce(&mut Writer) -> Result<T, StoreError> + Send + 'static> WriteJob<T> for F {}

/// `op` as a write in a savepoint of its own, its changes kept if `keep` says so.
fn in_savepoint<T, Op, Keep>(op: Op, keep: Keep) -> impl WriteJob<T>
where
    Op: FnOnce(&Connection, Timestamp, StoreConfig) -> Result<T, StoreError> + Send + 'static,
    Keep: FnOnce(&T) -> bool + Send + 'static,
{
    move |writer: &mut Writer| writer.in_savepoint(op, keep)
}

/// A write's answer as the writer gave it: the operation's own result, or why its group
/// got none.
fn written<T>(answer: Result<Result<T, StoreError>, CommitError>) -> Result<T, StoreError> {
    match answer {
        Ok(result) => result,
        Err(CommitError::Failed(why)) => Err(SqliteError::Write(why).into()),
        // Stopped, Lost, or a reason added later: the writer gave no answer.
        Err(_) => Err(SqliteError::WriterStopped.into()),
    }
}

/// The claim's write: insert or take over the key, kept only if the caller now holds it.
fn claim_write(key: &ScopedKey, fingerprint: &Fingerprint) -> impl WriteJob<Claim<Vec<u8>>> {
    let (key, fp) = (key.clone(), *fingerprint);
    let owned = |c: &Claim<Vec<u8>>| matches!(c, Claim::Acquired(_) | Claim::Recover(_));
    in_savepoint(move |conn, now, config| claim(conn, &key, &fp, now, config), owned)
}

fn release_write(lease: &Lease) -> impl WriteJob<()> {
    let lease = lease.clone();
    in_savepoint(move |conn, _, _| release_row(conn, &lease), |_| true)
}

fn renew_write(lease: &Lease) -> impl WriteJob<Lease> {
    let lease = lease.clone();
    in_savepoint(move |conn, now, config| renew_row(conn, &lease, now, config), |_| true)
}

fn sweep_write() -> impl WriteJob<usize> {
    in_savepoint(sweep, |_| true)
}

/// Read-only, but on the writer's connection, in the group's transaction: nothing to keep.
fn pending_write(max: usize) -> impl WriteJob<Vec<PendingClaim>> {
    in_savepoint(move |conn, now, _| pending(conn, now, max), |_| false)
}

impl<R: Durable + Clone + Send> KeyStore<R> for SqliteStore<R> {
    fn claim(&self, key: &ScopedKey, fingerprint: &Fingerprint) -> Result<Claim<R>, StoreError> {
        idem_core::trace::claim(key, || {
            claim_with_sweep(|| self.claim_once(key, fingerprint), || self.sweep())
        })
    }

    fn complete(&self, lease: &Lease, result: R) -> Result<(), StoreError> {
        idem_core::trace::settle("complete", lease, || {
            self.write(self.complete_write(lease, &result)?)
        })
    }

    fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        idem_core::trace::settle("release", lease, || self.write(release_write(lease)))
    }

    fn lease(&self) -> Duration {
        self.lease
    }

    fn result_ttl(&self) -> Duration {
        self.result_ttl
    }

    fn renew(&self, lease: &Lease) -> Result<Lease, StoreError> {
        self.write(renew_write(lease))
    }

    fn sweep(&self) -> Result<usize, StoreError> {
        self.write(sweep_write())
    }

    fn pending(&self, max: usize) -> Result<Vec<PendingClaim>, StoreError> {
        self.write(pending_write(max))
    }

    /// Reads on the reader connection, beside the writer thread: it takes no write lock.
    fn lookup(
        &self,
        key: &ScopedKey,
        fingerprint: &Fingerprint,
    ) -> Result<KeyState<R>, StoreError> {
        let now = now_of(self.clock.as_ref())?;
        let Some(row) = self.read_row(key, fingerprint)? else { return Ok(KeyState::Absent) };
        row_state(key, row, now, self.lease)
    }

    fn result_bytes_max(&self) -> Option<usize> {
        Some(self.result_bytes_max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use idem_core::ManualClock;

    /// A writer on a fresh store file, outside its thread: the test drives its groups.
    fn writer(tag: &str) -> (Writer, std::path::PathBuf) {
        let path = idem_testkit::scratch_dir(tag).join("ids.db");
        let conn = open_connection(&path).expect("a store");
        let clock = Arc::new(ManualClock::new(Timestamp::from_millis(1_000_000)));
        (Writer { conn, clock, config: StoreConfig::default() }, path)
    }

    fn key(name: &str) -> ScopedKey {
        ScopedKey::parse("shop", name).expect("a key")
    }

    /// A write that fills the disk in the middle of a group (here `max_page_count`; an
    /// I/O error or a real full disk alike) makes SQLite roll the group's transaction back
    /// on its own. The operation after it is not run: run, it would commit alone at its
    /// savepoint's release while its caller is answered the group's failure. The group
    /// fails saying why, and nothing of it is stored.
    #[test]
    fn an_operation_behind_one_that_filled_the_disk_is_not_committed_alone() {
        let (mut w, path) = writer("sqlite-full-mid-group");
        let fp = Fingerprint::builder("pay").u64("amount", 1).finish();
        w.begin().expect("begin");
        let Ok(Claim::Acquired(big)) = claim_write(&key("big"), &fp)(&mut w) else {
            panic!("claimed")
        };
        w.commit().expect("commit");
        let pages: i64 = w.conn.query_row("PRAGMA page_count", [], |r| r.get(0)).expect("n");
        w.conn.execute_batch(&format!("PRAGMA max_page_count = {}", pages + 4)).expect("set");
        w.begin().expect("begin");
        assert!(matches!(claim_write(&key("before"), &fp)(&mut w), Ok(Claim::Acquired(_))));
        let huge = vec![7u8; 1 << 20];
        let fill = move |c: &Connection, now, config| complete_row(c, &big, &huge, now, config);
        let filled = in_savepoint(fill, |_| true)(&mut w);
        assert!(filled.as_ref().is_err_and(|e| e.to_string().contains("full")), "{filled:?}");
        let after = claim_write(&key("after"), &fp)(&mut w);
        assert!(after.is_err(), "run outside the group: {after:?}");
        let failed = w.commit().expect_err("the group is gone");
        assert!(failed.to_string().contains("rolled the group's transaction back"), "{failed}");
        assert_eq!(w.recover(), AfterFailure::Continue);
        let look = Connection::open(&path).expect("a reader");
        let stored: Vec<String> = look
            .prepare("SELECT key FROM claims ORDER BY key")
            .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
            .expect("the keys");
        assert_eq!(stored, ["big"], "only what was committed before the group");
    }

    /// Past `CLOCK_MS_MAX` every deadline would be cut to the largest one kept, and a
    /// live lease taken over at once: the reading is refused; at it, leases hold.
    #[test]
    fn a_clock_past_what_the_store_keeps_is_refused() {
        let fp = Fingerprint::builder("pay").u64("amount", 1).finish();
        let (mut w, _) = writer("sqlite-far-clock");
        w.clock = Arc::new(ManualClock::new(Timestamp::from_millis(CLOCK_MS_MAX)));
        w.begin().expect("begin");
        assert!(matches!(claim_write(&key("k"), &fp)(&mut w), Ok(Claim::Acquired(_))));
        let again = claim_write(&key("k"), &fp)(&mut w);
        assert!(matches!(again, Ok(Claim::InFlight { .. })), "{again:?}");
        w.clock = Arc::new(ManualClock::new(Timestamp::from_millis(CLOCK_MS_MAX + 1)));
        let refused = claim_write(&key("k"), &fp)(&mut w).expect_err("a broken clock");
        assert!(refused.to_string().contains("fix the clock"), "{refused}");
        w.commit().expect("commit");
    }
}
