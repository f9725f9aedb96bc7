//! The claimed-key store on PostgreSQL, shared by several processes and machines: a
//! service on many machines needs one record of which keys are claimed, completed or
//! free, and every machine must see the others' claims the moment they are made.
//!
//! Two stores keep the same rows in the same tables, so processes of either kind can
//! share a namespace:
//!
//! * [`AsyncPgStore`], for tokio services (axum, tower): idem-core's `AsyncKeyStore` on
//!   tokio-postgres, over a maintained pool (deadpool-postgres) that it builds itself or
//!   takes from the caller. Its [`complete_in`](AsyncPgStore::complete_in) completes a
//!   claim inside the caller's own transaction, so the effect (an order row) and the
//!   stored answer commit together or not at all.
//! * [`PgStore`], for threads: idem-core's `KeyStore` on tokio-postgres, with a small
//!   fixed set of its own connections, each on a single-threaded event loop that the
//!   calling thread drives for the length of its call (as the blocking `postgres` client
//!   does). A call blocks its thread until the server answers; never call it from an
//!   async task.
//!
//! Pick the async store in a tokio service and the sync store in threaded code; neither
//! is a wrapper of the other (no blocking-pool hop per call, no hop to another thread).
//!
//! How both keep the contract:
//!
//! * The claim is one `INSERT ... ON CONFLICT DO UPDATE ... WHERE ... RETURNING`
//!   statement: it inserts an absent key, or takes over an expired result or an expired
//!   lease (same fingerprint) with the next token from a sequence. Two instances racing on
//!   one key get exactly one owner, and no lock is held across a network round trip.
//! * Complete, renew and release check the fencing token in the same statement.
//! * The schema lives in its own PostgreSQL schema (namespace), created by a versioned,
//!   idempotent migration under an advisory lock; keys are scoped by tenant (the `scope`
//!   column); an index on expiry makes sweeping cheap, and sweeps delete in bounded
//!   batches.
//! * Every connection has a statement timeout; a wait for a free connection is bounded
//!   ([`PgError::Busy`]), and so is a wait for the server's answers
//!   ([`CALL_WAIT_MAX_DEFAULT`], [`PgError::TimedOut`]): a server or a link that stops
//!   answering with its socket open fails the call, it never hangs it; a connection the
//!   server closed is replaced before its next use;
//!   an unreachable or failing server is a typed [`StoreError::Storage`]. A failure during
//!   `complete` leaves the claim pending (to be recovered and checked), it never reports
//!   success it cannot prove.
//! * Waiting claims poll with backoff (the contracts' default `claim_wait`): simple, and a
//!   waiter costs one indexed read per poll. LISTEN/NOTIFY would wake waiters sooner but
//!   needs a dedicated connection per listener; not worth it at these lease lengths.
//!
//! Both stores send the same statements and read rows with the same functions (the
//! private `sql` module); results use the same versioned encoding as the SQLite store
//! ([`Durable`](idem_durable::Durable)).
//!
//! # Guarantee
//!
//! However many processes and machines share one namespace, a key has at most one owner
//! at a time, a stale lease's completion or release is refused by its fencing token, and
//! every deadline (lease, result lifetime) is judged by the database's clock, read by the
//! statement that writes, never by a client's. Both stores keep idem-core's contract (the
//! conformance suite runs against a real server in CI, through each).
//!
//! # Examples
//!
//! In a tokio service:
//!
//! ```no_run
//! use idem_core::{AsyncKeyStore, Claim, Fingerprint, ScopedKey, StoreConfig};
//! use idem_store_postgres::AsyncPgStore;
//!
//! # async fn service() -> Result<(), Box<dyn std::error::Error>> {
//! let url = "postgres://idem:idem@127.0.0.1:5432/idem";
//! let store = AsyncPgStore::<String>::connect(url, "payments_keys", StoreConfig::default())
//!     .await?;
//! let key = ScopedKey::parse("shop", "order-1")?;
//! let request = Fingerprint::builder("order").u64("amount_minor", 1050).finish();
//! if let Claim::Acquired(lease) = store.claim(&key, &request).await? {
//!     // ... charge exactly here ...
//!     store.complete(&lease, "ch_1".to_string()).await?;
//! }
//! // Any process on the same namespace now replays it.
//! assert_eq!(store.claim(&key, &request).await?, Claim::Replay("ch_1".to_string()));
//! # Ok(())
//! # }
//! ```
//!
//! From threads:
//!
//! ```no_run
//! use idem_core::{Claim, Fingerprint, KeyStore, ScopedKey, StoreConfig};
//! use idem_store_postgres::PgStore;
//!
//! let url = "postgres://idem:idem@127.0.0.1:5432/idem";
//! let store = PgStore::<String>::connect(url, "payments_keys", StoreConfig::default())?;
//! let key = ScopedKey::parse("shop", "order-1")?;
//! let request = Fingerprint::builder("order").u64("amount_minor", 1050).finish();
//! if let Claim::Acquired(lease) = store.claim(&key, &request)? {
//!     // ... charge exactly here ...
//!     store.complete(&lease, "ch_1".to_string())?;
//! }
//! assert_eq!(store.claim(&key, &request)?, Claim::Replay("ch_1".to_string()));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Completing inside the caller's transaction is shown in [`AsyncPgStore`]'s docs.
//!
//! # Features
//!
//! `tracing` (off by default): the `claim` and `settle` spans and events every store emits
//! (see `idem_core::trace`).

use std::time::Duration;

/// The pool the async store runs on, re-exported so that a caller builds its own pool
/// ([`AsyncPgStore::from_pool`]) with the same version.
pub use deadpool_postgres;
/// The TLS library the store's encrypted connections use (rustls), re-exported so that a
/// caller builds its `ClientConfig` with the same version.
pub use rustls;
/// The async client, re-exported so that a caller's transaction
/// ([`AsyncPgStore::complete_in`]) is of the same version.
pub use tokio_postgres;

use std::sync::Arc;

use idem_core::{Clock, ConfigError, StoreError, Timestamp};
use tokio_postgres::types::ToSql;

mod admin;
mod async_store;
mod blocking;
mod rows;

pub use async_store::{AsyncPgStore, POOL_SIZE_DEFAULT, POOL_WAIT_MAX_DEFAULT};
pub use blocking::PgStore;

/// The schema version this code migrates to and reads. Version 2: every result carries a
/// checksum bound to its key (a schema of version 1 is refused).
pub const PG_SCHEMA_VERSION: i32 = 2;

/// What went wrong with PostgreSQL; wrapped in [`StoreError::Storage`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PgError {
    /// The server failed, timed out, or could not be reached; the message is the
    /// server's own where it sent one (severity, SQLSTATE code, message, detail, hint).
    #[error("postgres: {}", describe(.0))]
    Postgres(#[from] tokio_postgres::Error),
    /// The schema was migrated by another version of this code.
    #[error("schema {schema} has version {found}, this code reads version {PG_SCHEMA_VERSION}")]
    SchemaVersion {
        /// The namespace.
        schema: String,
        /// The version found.
        found: i32,
    },
    /// A namespace name that is not a plain identifier, or is one PostgreSQL keeps for
    /// itself or for applications (`public`, `information_schema`, `pg_*`).
    #[error("invalid schema name {name:?}: {why}")]
    SchemaName {
        /// The refused name.
        name: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// A stored value could not be read back.
    #[error("corrupt record: {0}")]
    Corrupt(String),
    /// The server did not answer within `waited` (a server or a link that stopped
    /// answering, its socket still open): the call may or may not have taken effect, as
    /// any call whose answer was lost, and its connection was closed.
    #[error(
        "the server did not answer within {waited:?}; the call may or may not have taken \
         effect"
    )]
    TimedOut {
        /// How long the call waited for the server's answers.
        waited: Duration,
    },
    /// The blocking store was called from a thread that drives a tokio runtime (an async
    /// task), where it cannot block on its own connection's event loop. Nothing was done:
    /// call it from a thread of its own or `tokio::task::spawn_blocking`, or use
    /// [`AsyncPgStore`] in async code.
    #[error(
        "PgStore was called from an async task, where it cannot block; nothing was done: \
         call it from spawn_blocking or a thread, or use AsyncPgStore"
    )]
    InsideAsyncTask,
    /// A connection's runtime (the event loop the blocking store drives each call on)
    /// could not be started: the OS refused its resources. Nothing was done.
    #[error("could not start a connection's event loop: {0}")]
    Runtime(std::io::Error),
    /// Every connection of the store stayed busy for `waited`: nothing was done.
    #[error("every connection stayed busy for {waited:?}; nothing was done")]
    Busy {
        /// How long the call waited.
        waited: Duration,
    },
    /// The pool could not hand out a connection for a reason of its own (it was closed,
    /// or a limit the caller set on it ran out); nothing was done.
    #[error("connection pool: {0}")]
    Pool(deadpool_postgres::PoolError),
    /// A pool's connections lack a setting the store needs (a caller's pool whose
    /// statements may run for ever).
    #[error("the pool's connections: {0}")]
    Setting(ConfigError),
    /// A connection pooler between the store and PostgreSQL (pgbouncer) refused the
    /// session settings the store opens every connection with. The store keeps session
    /// state (its statement timeout, named prepared statements) that a pooler in
    /// transaction mode hands from one client to another; nothing was done.
    #[error(
        "a connection pooler refused the store's session settings ({0}): the store keeps \
         session state (prepared statements, its statement timeout) that a transaction-mode \
         pooler cannot keep; connect to PostgreSQL directly"
    )]
    Pooler(String),
}

impl From<PgError> for StoreError {
    fn from(error: PgError) -> Self {
        StoreError::Storage(Box::new(error))
    }
}

fn pg(error: tokio_postgres::Error) -> StoreError {
    PgError::Postgres(error).into()
}

/// A failed connect: as [`pg`], but a pooler in front of the server (pgbouncer), which
/// refuses the startup options every connection of the store opens with, is named for
/// what sits there, not only by its words. Only a connect can meet that refusal.
fn connect_failed(error: tokio_postgres::Error) -> StoreError {
    if let Some(db) = error.as_db_error()
        && db.message().starts_with("unsupported startup parameter")
    {
        return PgError::Pooler(db.message().to_string()).into();
    }
    pg(error)
}

/// The server's own words for a database error ("db error" alone says nothing); the
/// client library's message for anything else (a closed connection, a timeout).
fn describe(error: &tokio_postgres::Error) -> String {
    let Some(db) = error.as_db_error() else {
        // The client's message, then each cause (a TLS handshake's reason, an I/O error).
        let mut text = error.to_string();
        let mut cause = std::error::Error::source(error);
        while let Some(inner) = cause {
            text.push_str(&format!(": {inner}"));
            cause = inner.source();
        }
        return text;
    };
    let mut text = format!("{} {}: {}", db.severity(), db.code().code(), db.message());
    if let Some(detail) = db.detail() {
        text.push_str(&format!(" ({detail})"));
    }
    if let Some(hint) = db.hint() {
        text.push_str(&format!("; hint: {hint}"));
    }
    text
}

/// The longest namespace name: PostgreSQL's identifier limit (`NAMEDATALEN` - 1 bytes). The
/// server would cut a longer name silently, and two long names could then meet.
const SCHEMA_NAME_BYTES_MAX: usize = 63;

/// Checks a namespace name: a plain lowercase identifier that is not PostgreSQL's own
/// (`pg_*`, `information_schema`) nor the default one applications share (`public`).
/// Reserved words (`select`, `user`) are fine: every statement quotes the name.
fn check_schema_name(name: &str) -> Result<(), PgError> {
    let refuse = |why| Err(PgError::SchemaName { name: name.to_string(), why });
    if name.is_empty() || name.len() > SCHEMA_NAME_BYTES_MAX {
        return refuse("use 1 to 63 characters");
    }
    let plain = name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if !plain || name.as_bytes()[0].is_ascii_digit() {
        return refuse("use lowercase letters, digits and underscores, not starting with a digit");
    }
    if name.starts_with("pg_") || name == "information_schema" {
        return refuse("the name is reserved for PostgreSQL's own schemas");
    }
    if name == "public" {
        return refuse("public is shared with the application's own tables; choose a namespace");
    }
    Ok(())
}

/// Every statement gives up after this long, on every connection the stores open.
const STATEMENT_TIMEOUT: Duration = Duration::from_secs(5);

/// The longest a call of either store waits for the server's answers once it has a
/// connection, unless told otherwise (`with_call_wait_max`): two statement timeouts (a
/// claim may wait on a row's lock, then sweep) and two seconds for the round trips. A
/// server that answers ends every statement within its timeout; past this bound the
/// server or the link has stopped answering, and the call fails with
/// [`PgError::TimedOut`] instead of waiting for ever.
pub const CALL_WAIT_MAX_DEFAULT: Duration = Duration::from_secs(12);

/// The advisory lock every migration holds for its transaction, so that processes that
/// migrate one database at once run one after another: `CREATE ... IF NOT EXISTS` is not
/// safe against itself (two sessions can both find a table absent, and the second then
/// fails on the catalogue's unique index). The number means nothing in itself; it was
/// picked once and must never change: a process of an earlier release and one of this
/// release starting together on a new database serialise only if they take the same
/// lock (the server test that holds it pins the value). Advisory locks are shared by
/// every application on the database: one that held this id for longer than the
/// statement timeout would make `connect` fail, never a migration run twice at once.
const MIGRATION_LOCK_ID: i64 = 4242;

/// The connection settings both stores open their own connections with: `url`'s, a
/// connect timeout of [`STATEMENT_TIMEOUT`], that statement timeout (and the same idle in
/// transaction timeout) as a startup option,
/// and the application name `idem:<schema>` (unless `url` names one), which names the
/// store's sessions in `pg_stat_activity`.
/// Checks the namespace name first.
fn session_config(url: &str, schema: &str) -> Result<tokio_postgres::Config, StoreError> {
    check_schema_name(schema)?;
    let mut config: tokio_postgres::Config = url.parse().map_err(pg)?;
    config.connect_timeout(STATEMENT_TIMEOUT);
    // The statement timeout as a startup option too, after the URL's own options (the
    // later setting wins): a pooler that cannot carry session settings refuses it at
    // connect, where the store can say so, rather than failing later on a statement.
    // And a transaction left open by a session that stopped answering (a process paused
    // between its claim and its commit, a link cut) is ended by the server after as long,
    // instead of holding its row locks (the record count's among them) for as long as the
    // session lives: every other claim would wait on them, each to its statement timeout.
    // And every commit waits for its write-ahead log to be flushed: a URL's or a role's
    // `synchronous_commit=off` would let the store acknowledge a completion that a crash
    // of the server then loses.
    let timeout = format!(
        "-c statement_timeout={ms} -c idle_in_transaction_session_timeout={ms} \
         -c synchronous_commit=on",
        ms = STATEMENT_TIMEOUT.as_millis()
    );
    let options = match config.get_options() {
        Some(own) => format!("{own} {timeout}"),
        None => timeout,
    };
    config.options(options);
    if config.get_application_name().is_none() {
        config.application_name(format!("idem:{schema}"));
    }
    Ok(config)
}

/// One parameter of a statement, as both clients take it.
type Param<'a> = &'a (dyn ToSql + Sync);

/// The time every statement judges deadlines by, in milliseconds since the epoch:
/// parameter `$n` if the store was given a clock (every client must share it), else the
/// database's own clock, read by the statement that writes, on the connection that
/// writes. `now()` is the time its transaction started, after the connection was taken:
/// a wait for a free connection never spends a lease, and the statements of one
/// transaction (a claim and the read that says why it changed nothing) agree on it.
fn now_sql(n: usize) -> String {
    format!("COALESCE(${n}::BIGINT, (extract(epoch FROM now()) * 1000)::BIGINT)")
}

/// The time a new deadline is counted from: as [`now_sql`], but the database's clock at
/// the moment the expression is evaluated (`clock_timestamp()`), not at the start of the
/// transaction. A claim or renewal that waited on a row's lock (another transaction held
/// it: a caller's `complete_in`, a concurrent claim) sets its lease from when it got the
/// row, so the lease it hands out is a whole lease, never one that ran out while it
/// waited (which a claim waiting behind it would recover at once: two holders).
fn clock_sql(n: usize) -> String {
    format!("COALESCE(${n}::BIGINT, (extract(epoch FROM clock_timestamp()) * 1000)::BIGINT)")
}

/// Where a store's statements read the time: a clock the caller gave (every client must
/// share it), or the database's own ([`now_sql`]).
#[derive(Debug, Clone)]
struct StatementClock {
    clock: Option<Arc<dyn Clock>>,
}

impl StatementClock {
    /// The parameter [`now_sql`] reads: the caller's clock, or `None` for the database's.
    fn now_param(&self) -> Option<i64> {
        self.clock.as_ref().map(|clock| ms(clock.now()))
    }
}

/// A time in milliseconds since the epoch, as a `BIGINT`.
fn ms(t: Timestamp) -> i64 {
    i64::try_from(t.as_millis()).unwrap_or(i64::MAX)
}

/// A lease or lifetime in milliseconds, at most [`SPAN_MS_MAX`]: the statements add it to
/// the database's time, which must not overflow a `BIGINT` (a `Duration::MAX` lifetime
/// means "for ever", about 73 million years here).
fn span_ms(span: Duration) -> i64 {
    i64::try_from(span.as_millis()).unwrap_or(i64::MAX).min(SPAN_MS_MAX)
}

/// The longest lease or lifetime a statement adds to the time: a quarter of `BIGINT`'s
/// range, so that any time of this era plus it stays in range.
const SPAN_MS_MAX: i64 = i64::MAX / 4;

/// Reads the statement timeout a connection runs with, in milliseconds (0: none). Sent
/// first on a new connection, by the simple query protocol: no named statement, so a
/// pooler that hands server sessions between clients (and their prepared statements
/// with them) cannot fail it before the store has found out that it is there.
const STATEMENT_TIMEOUT_SETTING_SQL: &str =
    "SELECT setting FROM pg_settings WHERE name = 'statement_timeout'";

/// The statement timeout, in milliseconds, from the answer to
/// [`STATEMENT_TIMEOUT_SETTING_SQL`].
fn statement_timeout_ms(answer: &[tokio_postgres::SimpleQueryMessage]) -> Result<i64, StoreError> {
    let setting = answer.iter().find_map(|message| match message {
        tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0),
        _ => None,
    });
    setting.and_then(|ms| ms.parse().ok()).ok_or_else(|| {
        PgError::Pooler("the server did not say its statement_timeout setting".into()).into()
    })
}

/// Checks that a connection the store opened runs with the statement timeout it asked for
/// at connect. A pooler told to ignore startup options (pgbouncer's
/// `ignore_startup_parameters = options`) accepts the connection and drops the option:
/// the store would then run without a timeout, on sessions it shares with others.
fn session_kept_its_timeout(timeout_ms: i64) -> Result<(), StoreError> {
    let asked = i64::try_from(STATEMENT_TIMEOUT.as_millis()).unwrap_or(i64::MAX);
    if timeout_ms == asked {
        return Ok(());
    }
    Err(PgError::Pooler(format!(
        "the session runs with statement_timeout {timeout_ms} ms, not the {asked} ms it asked \
         for at connect: something between the store and PostgreSQL drops startup options"
    ))
    .into())
}

/// The advisory lock a migration holds for its transaction (see [`MIGRATION_LOCK_ID`]).
const MIGRATION_LOCK_SQL: &str = "SELECT pg_advisory_xact_lock($1)";

/// The parameters of [`MIGRATION_LOCK_SQL`].
const MIGRATION_LOCK_PARAMS: [Param<'static>; 1] = [&MIGRATION_LOCK_ID];

/// The migration: the namespace, its version row, the token sequence, the claims and
/// their expiry indexes, each created if absent. Run under [`MIGRATION_LOCK_SQL`]. A
/// token sequence never used starts at the server's time in microseconds: a namespace
/// dropped and made again (`drop_schema`) hands out tokens above every one handed out
/// before it (fewer than a million claims a second since), so an old holder's lease
/// stays refused.
fn migration_sql(schema: &str) -> String {
    format!(
        "CREATE SCHEMA IF NOT EXISTS {schema};
         CREATE TABLE IF NOT EXISTS {schema}.meta (id INT PRIMARY KEY CHECK (id = 1), version
             INT NOT NULL, records BIGINT NOT NULL);
         INSERT INTO {schema}.meta (id, version, records) VALUES (1, {PG_SCHEMA_VERSION}, 0) ON
             CONFLICT (id) DO NOTHING;
         CREATE SEQUENCE IF NOT EXISTS {schema}.tokens;
         SELECT setval('{schema}.tokens',
             (extract(epoch FROM clock_timestamp()) * 1000000)::bigint, false)
             FROM {schema}.tokens WHERE NOT is_called;
         CREATE TABLE IF NOT EXISTS {schema}.claims (
             scope TEXT NOT NULL,
             key TEXT NOT NULL,
             fingerprint BYTEA NOT NULL,
             token BIGINT NOT NULL,
             finished BOOLEAN NOT NULL,
             lease_expires_at BIGINT NOT NULL,
             expires_at BIGINT NOT NULL,
             result BYTEA,
             recovered BOOLEAN NOT NULL DEFAULT FALSE,
             fresh BOOLEAN NOT NULL DEFAULT TRUE,
             PRIMARY KEY (scope, key));
         CREATE INDEX IF NOT EXISTS claims_expiry ON {schema}.claims (finished, expires_at);
         CREATE INDEX IF NOT EXISTS claims_leases ON {schema}.claims (finished, lease_expires_at);"
    )
}

/// The version the migrated namespace has, read in the migration's transaction.
fn version_sql(schema: &str) -> String {
    format!("SELECT version FROM {schema}.meta WHERE id = 1")
}

/// Every statement a store sends, its text built once for the store's namespace.
#[derive(Debug)]
struct Statements {
    /// The namespace, quoted (`"name"`).
    schema: String,
    claim: String,
    inspect: String,
    scope_in_flight: String,
    count_locked: String,
    complete: String,
    renew: String,
    release: String,
    sweep: String,
    pending: String,
    lookup: String,
    /// An operator's read of a row, whatever its fingerprint (no result).
    record: String,
    /// As `record`, locking the row for the forget in the same transaction.
    record_locked: String,
    forget: String,
}

impl Statements {
    /// The statements on namespace `schema`, which must have passed
    /// [`check_schema_name`](crate::check_schema_name).
    fn new(schema: &str) -> Self {
        let s = format!("\"{schema}\"");
        Self {
            claim: claim_sql(&s),
            inspect: format!(
                "SELECT fingerprint, finished, lease_expires_at, result, {} FROM {s}.claims
                 WHERE scope = $1 AND key = $2",
                now_sql(3)
            ),
            scope_in_flight: format!(
                "SELECT COUNT(*) FROM {s}.claims WHERE scope = $1 AND NOT finished"
            ),
            count_locked: format!("SELECT 1 FROM {s}.meta WHERE id = 1 FOR UPDATE"),
            complete: format!(
                "UPDATE {s}.claims SET finished = TRUE, expires_at = {} + $4, result = $5
                 WHERE scope = $1 AND key = $2 AND token = $3 AND NOT finished",
                now_sql(6)
            ),
            renew: format!(
                "UPDATE {s}.claims SET lease_expires_at = {} + $4
                 WHERE scope = $1 AND key = $2 AND token = $3 AND NOT finished
                 RETURNING lease_expires_at",
                clock_sql(5)
            ),
            release: release_sql(&s),
            sweep: sweep_sql(&s),
            pending: format!(
                "SELECT scope, key, fingerprint, lease_expires_at FROM {s}.claims
                 WHERE NOT finished AND lease_expires_at <= {} LIMIT $2",
                now_sql(1)
            ),
            // The time comes back even for an absent key (the outer join's one row).
            lookup: format!(
                "SELECT c.fingerprint, c.finished, c.lease_expires_at, c.expires_at, c.result,
                     {} FROM (SELECT 1) AS one LEFT JOIN {s}.claims AS c
                     ON c.scope = $1 AND c.key = $2",
                now_sql(3)
            ),
            record: record_sql(&s),
            record_locked: format!("{} FOR UPDATE", record_sql(&s)),
            forget: forget_sql(&s),
            schema: s,
        }
    }

    /// Drops the namespace and everything in it.
    fn drop_schema(&self) -> String {
        format!("DROP SCHEMA IF EXISTS {} CASCADE", self.schema)
    }
}

/// The claim in one statement: insert the absent key, or take over an expired result
/// (any fingerprint) or an expired lease (same fingerprint), with the next token; a new
/// row adds one to the record count in the same statement, which returns the count. `$4`
/// is the lease in milliseconds, `$5` the time ([`now_sql`]). It runs in a transaction
/// that a refusal (the store full, a scope over its quota) rolls back.
fn claim_sql(s: &str) -> String {
    let (now, clock) = (now_sql(5), clock_sql(5));
    format!(
        "WITH taken AS (
             INSERT INTO {s}.claims (scope, key, fingerprint, token, finished,
                 lease_expires_at, expires_at, result, recovered, fresh)
             VALUES ($1, $2, $3, nextval('{s}.tokens'), FALSE, {now} + $4, 0, NULL, FALSE, TRUE)
             ON CONFLICT (scope, key) DO UPDATE SET
                 fingerprint = EXCLUDED.fingerprint, token = EXCLUDED.token, finished = FALSE,
                 lease_expires_at = {clock} + $4, expires_at = 0, result = NULL,
                 recovered = NOT {s}.claims.finished, fresh = FALSE
             WHERE ({s}.claims.finished AND {s}.claims.expires_at <= {now})
                OR (NOT {s}.claims.finished AND {s}.claims.lease_expires_at <= {now}
                    AND {s}.claims.fingerprint = EXCLUDED.fingerprint)
             RETURNING token, recovered, fresh, lease_expires_at),
         counted AS (
             UPDATE {s}.meta SET records = records + 1
             WHERE id = 1 AND EXISTS (SELECT 1 FROM taken WHERE fresh)
             RETURNING records)
         SELECT token, recovered, fresh, lease_expires_at, (SELECT records FROM counted),
             {clock}
         FROM taken"
    )
}

/// The release in one statement: the fenced delete, and the record count less one if it
/// deleted; it returns how many rows it deleted (0: the lease was lost).
fn release_sql(s: &str) -> String {
    counted_delete_sql(
        s,
        &format!(
            "DELETE FROM {s}.claims WHERE scope = $1 AND key = $2 AND token = $3 AND NOT finished
             RETURNING 1"
        ),
    )
}

/// The claim rows `delete` removes (a `DELETE ... RETURNING 1`), and the record count less
/// one if it removed a row, in one statement that returns how many rows it deleted.
fn counted_delete_sql(s: &str, delete: &str) -> String {
    format!(
        "WITH gone AS ({delete}),
         counted AS (
             UPDATE {s}.meta SET records = records - 1
             WHERE id = 1 AND EXISTS (SELECT 1 FROM gone) RETURNING 1)
         SELECT COUNT(*) FROM gone"
    )
}

/// An operator's read of a row: its fingerprint, state and deadlines, and the time
/// ([`now_sql`]); no row for an absent key.
fn record_sql(s: &str) -> String {
    format!(
        "SELECT fingerprint, finished, lease_expires_at, expires_at, {} FROM {s}.claims
         WHERE scope = $1 AND key = $2",
        now_sql(3)
    )
}

/// A forget's delete of a row its transaction locked and judged, and the record count
/// less one if it deleted; it returns how many rows it deleted.
fn forget_sql(s: &str) -> String {
    counted_delete_sql(
        s,
        &format!("DELETE FROM {s}.claims WHERE scope = $1 AND key = $2 RETURNING 1"),
    )
}

/// The sweep in one statement: at most `$2` expired results deleted, and the record count
/// less as many; it returns how many it deleted. `$1` is the time.
///
/// RACE (a sweep against a takeover): the sweep picks an expired result, and before it
/// deletes the row another session takes the key over (a new claim on it, uncommitted):
/// the delete waits for that row, and PostgreSQL then checks the new version of the row
/// against the delete's own condition only, not the subquery's. So the condition is
/// repeated on the delete: the row taken over is no longer a finished, expired result,
/// and stays (deleted, it would leave its new holder's claim gone: a second owner, and
/// its completion lost). Test: `a_sweep_never_deletes_a_row_taken_over_while_it_waited`.
fn sweep_sql(s: &str) -> String {
    format!(
        "WITH gone AS (
             DELETE FROM {s}.claims WHERE (scope, key) IN (
                 SELECT scope, key FROM {s}.claims WHERE finished AND expires_at <= {now}
                 LIMIT $2)
                 AND finished AND expires_at <= {now}
             RETURNING 1),
         removed AS (SELECT COUNT(*) AS n FROM gone),
         counted AS (
             UPDATE {s}.meta SET records = records - removed.n FROM removed
             WHERE id = 1 AND removed.n > 0 RETURNING 1)
         SELECT n FROM removed",
        now = now_sql(1)
    )
}
