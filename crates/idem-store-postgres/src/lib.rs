//! [`PgStore`]: the claimed-key store on PostgreSQL, shared by several processes and
//! machines.
//!
//! * The claim is one `INSERT ... ON CONFLICT DO UPDATE ... WHERE ... RETURNING`
//!   statement: it inserts an absent key, or takes over an expired result or an expired
//!   lease (same fingerprint) with the next token from a sequence. Two instances racing on
//!   one key get exactly one owner, and no lock is held across a network round trip.
//! * Complete and release check the fencing token in the same statement.
//! * The schema lives in its own PostgreSQL schema (namespace), created by a versioned,
//!   idempotent migration; keys are scoped by tenant (the `scope` column); an index on
//!   expiry makes sweeping cheap, and sweeps delete in bounded batches.
//! * Connections: a small fixed set, each with a statement timeout; an unreachable or
//!   failing server is a typed [`StoreError::Storage`]. A failure during `complete` leaves
//!   the claim pending (to be recovered and checked), it never reports success it cannot
//!   prove.
//! * Waiting claims poll with backoff (the trait's default `claim_wait`): simple, and a
//!   waiter costs one indexed read per poll. LISTEN/NOTIFY would wake waiters sooner but
//!   needs a dedicated connection per listener; not worth it at these lease lengths.
//!
//! Results use the same versioned encoding as the SQLite store ([`Durable`]).
//!
//! # Guarantee
//!
//! However many processes and machines share one namespace, a key has at most one owner
//! at a time, a stale lease's completion or release is refused by its fencing token, and
//! every deadline (lease, result lifetime) is judged by the database's clock, read by the
//! statement that writes, never by a client's. The store keeps idem-core's `KeyStore`
//! contract (the conformance suite runs against a real server in CI).
//!
//! # Examples
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
//! // Any process on the same namespace now replays it.
//! assert_eq!(store.claim(&key, &request)?, Claim::Replay("ch_1".to_string()));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Features
//!
//! `tracing` (off by default): the `claim` and `settle` spans and events every store emits
//! (see `idem_core::trace`).

use std::fmt;
use std::time::Duration;

use postgres::{Client, NoTls};
use tokio_postgres_rustls::MakeRustlsConnect;

/// The TLS library the store's encrypted connections use (rustls), re-exported so that a
/// caller builds its `ClientConfig` with the same version.
pub use rustls;

use std::sync::Arc;
use std::time::Instant;

use idem_core::{
    Claim, Clock, FencingToken, Fingerprint, KeyState, KeyStore, Lease, PendingClaim, ScopedKey,
    StoreConfig, StoreError, Timestamp,
};
use idem_durable::Durable;
use idem_durable::encode_result;
use idem_durable::row::{
    StoredRow as Row, claim_refused, claim_with_sweep, decode_claim, pending_claim, row_state,
};
use parking_lot::{Condvar, Mutex};

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
    Postgres(#[from] postgres::Error),
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
    /// Every connection of the store stayed busy for `waited`: nothing was done.
    #[error("every connection stayed busy for {waited:?}; nothing was done")]
    Busy {
        /// How long the call waited.
        waited: Duration,
    },
}

impl From<PgError> for StoreError {
    fn from(error: PgError) -> Self {
        StoreError::Storage(Box::new(error))
    }
}

fn pg(error: postgres::Error) -> StoreError {
    PgError::Postgres(error).into()
}

/// The server's own words for a database error ("db error" alone says nothing); the
/// client library's message for anything else (a closed connection, a timeout).
fn describe(error: &postgres::Error) -> String {
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

/// The time every statement judges deadlines by, in milliseconds since the epoch:
/// parameter `$n` if the store was given a clock (every client must share it), else the
/// database's own clock, read by the statement that writes, on the connection that
/// writes. `now()` is the time its transaction started, after the connection was taken:
/// a wait for a free connection never spends a lease, and the statements of one
/// transaction (a claim and the read that says why it changed nothing) agree on it.
fn now_sql(n: usize) -> String {
    format!("COALESCE(${n}::BIGINT, (extract(epoch FROM now()) * 1000)::BIGINT)")
}

/// The claimed-key store on PostgreSQL.
pub struct PgStore<R> {
    clients: Mutex<Vec<Client>>,
    returned: Condvar,
    /// How to open a connection again after the server closed one.
    connector: Connector,
    /// The namespace, quoted for statements (`"name"`).
    schema: String,
    /// A clock the caller gave ([`PgStore::connect_with_clock`]); `None`: the database's.
    clock: Option<Arc<dyn Clock>>,
    config: StoreConfig,
    result_bytes_max: usize,
    _result: std::marker::PhantomData<fn() -> R>,
}

impl<R> fmt::Debug for PgStore<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgStore")
            .field("schema", &self.schema)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// Connections per store.
const CLIENTS: usize = 4;
/// Every statement gives up after this long.
const STATEMENT_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest a call waits for one of the store's connections to come back.
const CLIENT_WAIT_MAX: Duration = Duration::from_secs(10);
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

/// Where and how the store connects: the server's address, and TLS if asked for.
struct Connector {
    url: postgres::Config,
    tls: Option<MakeRustlsConnect>,
}

/// Opens one connection with the store's statement timeout.
fn open_client(connector: &Connector) -> Result<Client, StoreError> {
    let url = &connector.url;
    let connected = match &connector.tls {
        Some(tls) => url.connect(tls.clone()),
        None => url.connect(NoTls),
    };
    let mut client = connected.map_err(pg)?;
    let timeout = STATEMENT_TIMEOUT.as_millis();
    client.batch_execute(&format!("SET statement_timeout = {timeout}")).map_err(pg)?;
    Ok(client)
}

fn migrate(client: &mut Client, schema: &str) -> Result<(), StoreError> {
    let sql = format!(
        "CREATE SCHEMA IF NOT EXISTS {schema};
         CREATE TABLE IF NOT EXISTS {schema}.meta (id INT PRIMARY KEY CHECK (id = 1), version
             INT NOT NULL, records BIGINT NOT NULL);
         INSERT INTO {schema}.meta (id, version, records) VALUES (1, {PG_SCHEMA_VERSION}, 0) ON
             CONFLICT (id) DO NOTHING;
         CREATE SEQUENCE IF NOT EXISTS {schema}.tokens;
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
    );
    // Two processes migrating at once: serialise on an advisory lock.
    let mut tx = client.transaction().map_err(pg)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK_ID]).map_err(pg)?;
    tx.batch_execute(&sql).map_err(pg)?;
    let found: i32 = tx
        .query_one(&format!("SELECT version FROM {schema}.meta WHERE id = 1"), &[])
        .map_err(pg)?
        .get(0);
    tx.commit().map_err(pg)?;
    if found != PG_SCHEMA_VERSION {
        let schema = schema.trim_matches('"').to_string();
        return Err(PgError::SchemaVersion { schema, found }.into());
    }
    Ok(())
}

fn ms(t: Timestamp) -> i64 {
    i64::try_from(t.as_millis()).unwrap_or(i64::MAX)
}

impl<R: Durable + Clone + Send> PgStore<R> {
    /// Connects to `url`, migrates the tables in namespace `schema` (created if absent).
    /// Leases and result lifetimes run on the database's clock, so every client agrees on
    /// them whatever its own clock says.
    ///
    /// # Errors
    ///
    /// [`StoreError::Storage`] with [`PgError`]: unreachable server (with the server's
    /// message), bad schema name, or a schema of another version.
    pub fn connect(url: &str, schema: &str, config: StoreConfig) -> Result<Self, StoreError> {
        Self::open(url, schema, config, None, None)
    }

    /// As [`connect`](Self::connect), over TLS configured by `tls` (its root certificates
    /// decide which servers are trusted). Put `sslmode=require` in `url` to refuse a
    /// server that will not encrypt; every reconnect uses TLS too.
    ///
    /// # Errors
    ///
    /// As [`connect`](Self::connect); a TLS handshake failure is reported like an
    /// unreachable server, with the reason.
    pub fn connect_with_tls(
        url: &str,
        schema: &str,
        config: StoreConfig,
        tls: rustls::ClientConfig,
    ) -> Result<Self, StoreError> {
        Self::open(url, schema, config, None, Some(MakeRustlsConnect::new(tls)))
    }

    /// As [`connect`](Self::connect), reading time from `clock` instead of the database:
    /// for tests (a `ManualClock`), or where every client shares one clock. Clients on
    /// different clocks must not use it: a client ahead would recover others' live leases.
    ///
    /// # Errors
    ///
    /// As [`connect`](Self::connect).
    pub fn connect_with_clock(
        url: &str,
        schema: &str,
        config: StoreConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, StoreError> {
        Self::open(url, schema, config, Some(clock), None)
    }

    fn open(
        url: &str,
        schema: &str,
        config: StoreConfig,
        clock: Option<Arc<dyn Clock>>,
        tls: Option<MakeRustlsConnect>,
    ) -> Result<Self, StoreError> {
        check_schema_name(schema)?;
        let mut url: postgres::Config = url.parse().map_err(pg)?;
        url.connect_timeout(STATEMENT_TIMEOUT);
        if url.get_application_name().is_none() {
            // Names the store's sessions in `pg_stat_activity`.
            url.application_name(&format!("idem:{schema}"));
        }
        let connector = Connector { url, tls };
        let mut clients =
            (0..CLIENTS).map(|_| open_client(&connector)).collect::<Result<Vec<_>, _>>()?;
        let schema = format!("\"{schema}\"");
        migrate(&mut clients[0], &schema)?;
        Ok(Self {
            clients: Mutex::new(clients),
            returned: Condvar::new(),
            connector,
            schema,
            clock,
            config,
            result_bytes_max: idem_durable::RESULT_BYTES_MAX_DEFAULT,
            _result: std::marker::PhantomData,
        })
    }

    /// Sets the largest stored result, in bytes of its encoding (default
    /// [`RESULT_BYTES_MAX_DEFAULT`](idem_durable::RESULT_BYTES_MAX_DEFAULT), 2 MiB).
    #[must_use]
    pub fn with_result_bytes_max(mut self, max: usize) -> Self {
        self.result_bytes_max = max;
        self
    }

    /// Runs `f` with a connection from the store's set, waiting for one if all are busy.
    /// A connection the server closed (a restart, an idle timeout) is opened again first;
    /// if the server is still away, that is the error, and the next call tries again.
    /// An operation whose connection fails under it is not retried: it may have taken
    /// effect, and its caller decides (a claim left pending is recovered, never redone).
    fn with_client<T>(
        &self,
        f: impl FnOnce(&mut Client) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut client = {
            let mut clients = self.clients.lock();
            let deadline = Instant::now() + CLIENT_WAIT_MAX;
            loop {
                if let Some(client) = clients.pop() {
                    break client;
                }
                // Every client is busy: wait for one back, but not past the limit (a
                // client comes back when its statement ends, bounded by the timeout).
                if Instant::now() >= deadline {
                    return Err(PgError::Busy { waited: CLIENT_WAIT_MAX }.into());
                }
                let _ = self.returned.wait_until(&mut clients, deadline);
            }
        };
        let result = self.reconnect_if_closed(&mut client).and_then(|()| f(&mut client));
        self.clients.lock().push(client);
        self.returned.notify_one();
        result
    }

    /// Drops the store's namespace and every table in it (`DROP SCHEMA ... CASCADE`): a
    /// tenant offboarded, a test done. Every record is gone; later calls fail.
    ///
    /// # Errors
    ///
    /// [`StoreError::Storage`] if the server refuses or fails.
    pub fn drop_schema(&self) -> Result<(), StoreError> {
        let schema = &self.schema;
        self.with_client(|client| {
            client.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE")).map_err(pg)
        })
    }

    /// Replaces a connection the server closed with a new one (one attempt, bounded by
    /// the connect timeout).
    fn reconnect_if_closed(&self, client: &mut Client) -> Result<(), StoreError> {
        if !client.is_closed() {
            return Ok(());
        }
        *client = open_client(&self.connector)?;
        Ok(())
    }

    /// The parameter [`now_sql`] reads: the caller's clock, or `None` for the database's.
    fn now_param(&self) -> Option<i64> {
        self.clock.as_ref().map(|clock| ms(clock.now()))
    }

    fn claim_once(
        &self,
        key: &ScopedKey,
        fingerprint: &Fingerprint,
    ) -> Result<Claim<R>, StoreError> {
        let lease_ms = span_ms(self.config.lease());
        let s = &self.schema;
        let capacity = i64::try_from(self.config.capacity()).unwrap_or(i64::MAX);
        let now = self.now_param();
        self.with_client(|client| {
            let mut tx = client.transaction().map_err(pg)?;
            let taken = tx
                .query_opt(
                    &claim_sql(s),
                    &[
                        &key.scope().as_str(),
                        &key.key().as_str(),
                        &&fingerprint.as_bytes()[..],
                        &lease_ms,
                        &now,
                    ],
                )
                .map_err(pg)?;
            let Some(row) = taken else {
                let answer = inspect(&mut tx, s, key, fingerprint, now, self.config.lease())?;
                tx.commit().map_err(pg)?;
                return decode_claim(key, answer);
            };
            let (token, recovered, fresh): (i64, bool, bool) = (row.get(0), row.get(1), row.get(2));
            let lease_expires_at = timestamp(row.get(3));
            if fresh {
                let records: i64 = tx
                    .query_one(
                        &format!(
                            "UPDATE {s}.meta SET records = records + 1 WHERE id = 1
                        RETURNING records"
                        ),
                        &[],
                    )
                    .map_err(pg)?
                    .get(0);
                if records > capacity {
                    drop(tx); // rolls back the insert
                    return Err(StoreError::StoreFull { capacity: self.config.capacity() });
                }
            }
            if !recovered {
                // A refusal drops the transaction, which rolls the claim back.
                scope_quota(&mut tx, s, key, self.config)?;
            }
            tx.commit().map_err(pg)?;
            let lease = Lease::new(key.clone(), FencingToken::new(token as u64), lease_expires_at);
            Ok(if recovered { Claim::Recover(lease) } else { Claim::Acquired(lease) })
        })
    }
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

/// A stored time in milliseconds, as a timestamp (a negative one, never written, as 0).
fn timestamp(ms: i64) -> Timestamp {
    Timestamp::from_millis(u64::try_from(ms).unwrap_or(0))
}

/// The claim in one statement: insert the absent key, or take over an expired result
/// (any fingerprint) or an expired lease (same fingerprint), with the next token. `$4`
/// is the lease in milliseconds, `$5` the time ([`now_sql`]).
fn claim_sql(s: &str) -> String {
    let now = now_sql(5);
    format!(
        "INSERT INTO {s}.claims (scope, key, fingerprint, token, finished,
                            lease_expires_at, expires_at, result, recovered, fresh)
                         VALUES ($1, $2, $3, nextval('{s}.tokens'), FALSE, {now} + $4, 0, NULL,
                             FALSE, TRUE)
                         ON CONFLICT (scope, key) DO UPDATE SET
                             fingerprint = EXCLUDED.fingerprint, token = EXCLUDED.token,
                                 finished = FALSE,
                             lease_expires_at = EXCLUDED.lease_expires_at, expires_at = 0,
                                 result = NULL,
                             recovered = NOT {s}.claims.finished, fresh = FALSE
                         WHERE ({s}.claims.finished AND {s}.claims.expires_at <= {now})
                            OR (NOT {s}.claims.finished AND {s}.claims.lease_expires_at <= {now}
                                AND {s}.claims.fingerprint = EXCLUDED.fingerprint)
                         RETURNING token, recovered, fresh, lease_expires_at"
    )
}

/// With a scope quota, refuses a new in-flight claim (already written in `tx`) past it.
fn scope_quota(
    tx: &mut postgres::Transaction<'_>,
    s: &str,
    key: &ScopedKey,
    config: StoreConfig,
) -> Result<(), StoreError> {
    let Some(max) = config.scope_in_flight_max() else { return Ok(()) };
    let in_flight: i64 = tx
        .query_one(
            &format!("SELECT COUNT(*) FROM {s}.claims WHERE scope = $1 AND NOT finished"),
            &[&key.scope().as_str()],
        )
        .map_err(pg)?
        .get(0);
    if in_flight > i64::try_from(max).unwrap_or(i64::MAX) {
        return Err(StoreError::ScopeQuota { scope: key.scope().clone(), in_flight_max: max });
    }
    Ok(())
}

/// The claim changed nothing: say why. Reads only.
fn inspect(
    tx: &mut postgres::Transaction<'_>,
    s: &str,
    key: &ScopedKey,
    fingerprint: &Fingerprint,
    now: Option<i64>,
    lease: Duration,
) -> Result<Claim<Vec<u8>>, StoreError> {
    let row = tx
        .query_one(
            &format!(
                "SELECT fingerprint, finished, lease_expires_at, result, {} FROM {s}.claims
                WHERE scope = $1 AND key = $2",
                now_sql(3)
            ),
            &[&key.scope().as_str(), &key.key().as_str(), &now],
        )
        .map_err(pg)?;
    let now = timestamp(row.get(4));
    let stored: Vec<u8> = row.get(0);
    let row = Row {
        same_fingerprint: stored == fingerprint.as_bytes()[..],
        finished: row.get(1),
        lease_expires_ms: row.get(2),
        expires_ms: 0,
        result: row.get(3),
    };
    claim_refused(key, row, now, lease)
}

impl<R: Durable + Clone + Send> PgStore<R> {
    /// `complete`'s work, inside the trace span.
    fn complete_now(&self, lease: &Lease, result: R) -> Result<(), StoreError> {
        let bytes = encode_result(lease.key(), &result, self.result_bytes_max)?;
        let ttl_ms = span_ms(self.config.result_ttl());
        let s = &self.schema;
        let now = self.now_param();
        let changed = self.with_client(|client| {
            client
                .execute(
                    &format!(
                        "UPDATE {s}.claims SET finished = TRUE, expires_at = {} + $4,
                             result = $5
                         WHERE scope = $1 AND key = $2 AND token = $3 AND NOT finished",
                        now_sql(6)
                    ),
                    &[
                        &lease.key().scope().as_str(),
                        &lease.key().key().as_str(),
                        &(lease.token().get() as i64),
                        &ttl_ms,
                        &bytes,
                        &now,
                    ],
                )
                .map_err(pg)
        })?;
        if changed == 1 {
            Ok(())
        } else {
            Err(StoreError::LeaseLost { key: lease.key().clone(), token: lease.token() })
        }
    }

    /// Extends a held lease by a whole lease from the database's now; the new deadline is
    /// what the statement wrote, read back.
    fn renew_now(&self, lease: &Lease) -> Result<Lease, StoreError> {
        let s = &self.schema;
        let now = self.now_param();
        let lease_ms = span_ms(self.config.lease());
        let renewed = self.with_client(|client| {
            client
                .query_opt(
                    &format!(
                        "UPDATE {s}.claims SET lease_expires_at = {} + $4
                         WHERE scope = $1 AND key = $2 AND token = $3 AND NOT finished
                         RETURNING lease_expires_at",
                        now_sql(5)
                    ),
                    &[
                        &lease.key().scope().as_str(),
                        &lease.key().key().as_str(),
                        &(lease.token().get() as i64),
                        &lease_ms,
                        &now,
                    ],
                )
                .map_err(pg)
        })?;
        match renewed {
            Some(row) => Ok(Lease::new(lease.key().clone(), lease.token(), timestamp(row.get(0)))),
            None => Err(StoreError::LeaseLost { key: lease.key().clone(), token: lease.token() }),
        }
    }

    /// `release`'s work, inside the trace span.
    fn release_now(&self, lease: &Lease) -> Result<(), StoreError> {
        let s = &self.schema;
        self.with_client(|client| {
            let mut tx = client.transaction().map_err(pg)?;
            let changed = tx
                .execute(
                    &format!(
                        "DELETE FROM {s}.claims WHERE scope = $1 AND key = $2 AND token =
                        $3 AND NOT finished"
                    ),
                    &[
                        &lease.key().scope().as_str(),
                        &lease.key().key().as_str(),
                        &(lease.token().get() as i64),
                    ],
                )
                .map_err(pg)?;
            if changed != 1 {
                return Err(StoreError::LeaseLost {
                    key: lease.key().clone(),
                    token: lease.token(),
                });
            }
            tx.execute(&format!("UPDATE {s}.meta SET records = records - 1 WHERE id = 1"), &[])
                .map_err(pg)?;
            tx.commit().map_err(pg)
        })
    }
}

impl<R: Durable + Clone + Send> KeyStore<R> for PgStore<R> {
    fn claim(&self, key: &ScopedKey, fingerprint: &Fingerprint) -> Result<Claim<R>, StoreError> {
        idem_core::trace::claim(key, || {
            claim_with_sweep(|| self.claim_once(key, fingerprint), || self.sweep())
        })
    }

    fn complete(&self, lease: &Lease, result: R) -> Result<(), StoreError> {
        idem_core::trace::settle("complete", lease, || self.complete_now(lease, result))
    }

    fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        idem_core::trace::settle("release", lease, || self.release_now(lease))
    }

    fn renew(&self, lease: &Lease) -> Result<Lease, StoreError> {
        self.renew_now(lease)
    }

    fn lease(&self) -> Duration {
        self.config.lease()
    }

    fn sweep(&self) -> Result<usize, StoreError> {
        let s = &self.schema;
        let now = self.now_param();
        let batch = i64::try_from(self.config.sweep_batch_max()).unwrap_or(i64::MAX);
        self.with_client(|client| {
            let mut tx = client.transaction().map_err(pg)?;
            let removed = tx
                .execute(
                    &format!(
                        "DELETE FROM {s}.claims WHERE (scope, key) IN (
                             SELECT scope, key FROM {s}.claims WHERE finished AND expires_at <=
                                 {} LIMIT $2)",
                        now_sql(1)
                    ),
                    &[&now, &batch],
                )
                .map_err(pg)?;
            tx.execute(
                &format!("UPDATE {s}.meta SET records = records - $1 WHERE id = 1"),
                &[&(removed as i64)],
            )
            .map_err(pg)?;
            tx.commit().map_err(pg)?;
            Ok(removed as usize)
        })
    }

    fn pending(&self, max: usize) -> Result<Vec<PendingClaim>, StoreError> {
        let s = &self.schema;
        let now = self.now_param();
        let limit = i64::try_from(max).unwrap_or(i64::MAX);
        let rows = self.with_client(|client| {
            client
                .query(
                    &format!(
                        "SELECT scope, key, fingerprint, lease_expires_at FROM {s}.claims
                         WHERE NOT finished AND lease_expires_at <= {} LIMIT $2",
                        now_sql(1)
                    ),
                    &[&now, &limit],
                )
                .map_err(pg)
        })?;
        rows.into_iter()
            .map(|row| {
                let (scope, key, fp, expired): (String, String, Vec<u8>, i64) =
                    (row.get(0), row.get(1), row.get(2), row.get(3));
                Ok(pending_claim(&scope, &key, &fp, expired)?)
            })
            .collect()
    }

    fn lookup(
        &self,
        key: &ScopedKey,
        fingerprint: &Fingerprint,
    ) -> Result<KeyState<R>, StoreError> {
        let s = &self.schema;
        let now = self.now_param();
        // The time comes back even for an absent key (the outer join's one row).
        let row = self.with_client(|client| {
            client
                .query_one(
                    &format!(
                        "SELECT c.fingerprint, c.finished, c.lease_expires_at, c.expires_at,
                             c.result, {} FROM (SELECT 1) AS one LEFT JOIN {s}.claims AS c
                             ON c.scope = $1 AND c.key = $2",
                        now_sql(3)
                    ),
                    &[&key.scope().as_str(), &key.key().as_str(), &now],
                )
                .map_err(pg)
        })?;
        let now = timestamp(row.get(5));
        let Some(fp) = row.get::<_, Option<Vec<u8>>>(0) else { return Ok(KeyState::Absent) };
        let row = Row {
            same_fingerprint: fp == fingerprint.as_bytes()[..],
            finished: row.get(1),
            lease_expires_ms: row.get(2),
            expires_ms: row.get(3),
            result: row.get(4),
        };
        row_state(key, row, now, self.config.lease())
    }

    fn result_bytes_max(&self) -> Option<usize> {
        Some(self.result_bytes_max)
    }
}
