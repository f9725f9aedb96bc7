//! [`PgStore`]: the store for threads, on tokio-postgres with a small fixed set of its own
//! connections, each driven by the calling thread on a runtime of its own.

use std::fmt;
use std::marker::PhantomData;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Duration, Instant};

use idem_core::{
    Claim, Clock, Fingerprint, KeyState, KeyStore, Lease, PendingClaim, ScopedKey, StoreConfig,
    StoreError,
};
use idem_durable::Durable;
use idem_durable::row::{claim_with_sweep, decode_claim};
use parking_lot::{Condvar, Mutex};
use tokio::runtime::Runtime;
use tokio_postgres::{Client, NoTls};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::rows::{self, Settings, Taken};
use crate::{
    CALL_WAIT_MAX_DEFAULT, PgError, STATEMENT_TIMEOUT, Statements, connect_failed, pg, rustls,
    session_config,
};

/// The claimed-key store on PostgreSQL, for threads: each call blocks its thread until
/// the server answers, or until [`CALL_WAIT_MAX_DEFAULT`] (see
/// [`with_call_wait_max`](Self::with_call_wait_max)) has passed without an answer. For a
/// tokio service, [`AsyncPgStore`](crate::AsyncPgStore).
pub struct PgStore<R> {
    /// The store's connections; `None` is a place whose connection is opened at its next
    /// use (one dropped after a call that got no answer in time).
    clients: Mutex<Vec<Option<Conn>>>,
    returned: Condvar,
    /// How to open a connection again after the server closed one.
    connector: Connector,
    /// The statements, the clock ([`PgStore::connect_with_clock`]'s or the database's)
    /// and the limits.
    pub(crate) settings: Settings,
    call_wait_max: Duration,
    _result: PhantomData<fn() -> R>,
}

impl<R> fmt::Debug for PgStore<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgStore")
            .field("settings", &self.settings)
            .field("call_wait_max", &self.call_wait_max)
            .finish_non_exhaustive()
    }
}

/// Connections per store.
const CLIENTS: usize = 4;
/// The longest a call waits for one of the store's connections to come back.
const CLIENT_WAIT_MAX: Duration = Duration::from_secs(10);

/// Where and how the store connects: the server's address, and TLS if asked for.
struct Connector {
    url: tokio_postgres::Config,
    tls: Option<MakeRustlsConnect>,
}

/// One connection: a tokio-postgres client, and the single-threaded runtime its
/// connection's task runs on. The thread that makes a call drives that runtime for the
/// call's length (as the blocking `postgres` client does): no hop to another thread, and
/// a call that waits too long is dropped, with the connection, at its bound.
struct Conn {
    client: Client,
    runtime: Runtime,
}

/// Opens one connection, with the store's statement timeout as a startup option; the
/// whole of it (the TCP connect, TLS, the startup exchange) bounded by `bound` (the
/// statement timeout at most), so a port that accepts and never answers is an error, not
/// a hang.
fn open_client(connector: &Connector, bound: Duration) -> Result<Conn, StoreError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(PgError::Runtime)?;
    let url = &connector.url;
    let connect = async {
        // The connection's task is spawned on this runtime: it runs whenever a call
        // drives the runtime.
        match &connector.tls {
            Some(tls) => url.connect(tls.clone()).await.map(|(client, connection)| {
                drop(tokio::spawn(connection));
                client
            }),
            None => url.connect(NoTls).await.map(|(client, connection)| {
                drop(tokio::spawn(connection));
                client
            }),
        }
    };
    let bounded = async { tokio::time::timeout(bound, connect).await };
    let connected = panic::catch_unwind(AssertUnwindSafe(|| runtime.block_on(bounded)));
    match connected {
        Ok(Ok(Ok(client))) => Ok(Conn { client, runtime }),
        Ok(Ok(Err(error))) => Err(connect_failed(error)),
        // A name lookup may still run on the event loop's blocking thread: not waited for.
        Ok(Err(_elapsed)) => {
            runtime.shutdown_background();
            Err(PgError::TimedOut { waited: bound }.into())
        }
        Err(_panicked) => {
            runtime.shutdown_background();
            Err(PgError::InsideAsyncTask.into())
        }
    }
}

/// A place taken from the store's set, given back when dropped: with its connection if
/// the call kept it, else empty (opened again at its next use).
struct Place<'a, R> {
    store: &'a PgStore<R>,
    conn: Option<Conn>,
}

impl<R> Drop for Place<'_, R> {
    /// Puts the place back in the set (its connection, or `None` to open at its next use)
    /// and wakes a waiter.
    fn drop(&mut self) {
        self.store.clients.lock().push(self.conn.take());
        self.store.returned.notify_one();
    }
}

/// How many turns of a connection's event loop [`still_open`] gives its connection's task
/// to read what the server sent since the last call (the first polls the socket, the
/// second runs the task it woke), and a call gives it after its answer to write what the
/// call left queued (a dropped transaction's `ROLLBACK`).
const READ_TURNS: usize = 2;

/// `n` turns of the event loop that runs this, without waiting: each lets the tasks it
/// woke run (a connection's task reads what arrived, or writes what was queued).
async fn turns(n: usize) {
    for _ in 0..n {
        tokio::task::yield_now().await;
    }
}

/// Whether `conn` is still open. Its connection's task runs only while a call drives its
/// event loop, so a close the server sent since the last call (a restart, an idle session
/// timeout, an administrator's `pg_terminate_backend`) is read first: the event loop turns
/// without waiting, no round trip, and a connection whose server said goodbye is not lent.
/// A close still on its way (the server ending the session as the call starts) fails that
/// call, which is not retried; the next opens a new connection.
///
/// RACE (a close unread between calls): the server's goodbye arrives while no call runs;
/// without these turns, `is_closed` still says open and the next call on it fails.
/// Test: `silent::a_connection_the_server_closed_between_calls_is_replaced_before_use`.
///
/// # Errors
///
/// [`PgError::InsideAsyncTask`] on a thread that drives a runtime already (an async task;
/// `spawn_blocking` threads may block and are served): no event loop can turn there.
fn still_open(conn: &Conn) -> Result<bool, StoreError> {
    let read = async {
        for _ in 0..READ_TURNS {
            if conn.client.is_closed() {
                return;
            }
            turns(1).await;
        }
    };
    match panic::catch_unwind(AssertUnwindSafe(|| conn.runtime.block_on(read))) {
        Ok(()) => Ok(!conn.client.is_closed()),
        Err(_panicked) => Err(PgError::InsideAsyncTask.into()),
    }
}

/// Closes `conn` without waiting for its event loop's threads (a name lookup still under
/// way), and from any thread, an async task's included (dropping an event loop there
/// would panic).
fn close(conn: Conn) {
    let Conn { client, runtime } = conn;
    drop(client);
    runtime.shutdown_background();
}

impl<R> Drop for PgStore<R> {
    fn drop(&mut self) {
        for conn in self.clients.get_mut().drain(..).flatten() {
            close(conn);
        }
    }
}

/// Checks first that the connection kept the statement timeout it asked for at connect,
/// then migrates `statements`' namespace under the migration lock and checks its version.
async fn migrate(client: &mut Client, statements: &Statements) -> Result<(), StoreError> {
    let schema = &statements.schema;
    let timeout = client.simple_query(crate::STATEMENT_TIMEOUT_SETTING_SQL).await.map_err(pg)?;
    crate::session_kept_its_timeout(crate::statement_timeout_ms(&timeout)?)?;
    // Two processes migrating at once: serialise on an advisory lock.
    let tx = client.transaction().await.map_err(pg)?;
    let lock = (crate::MIGRATION_LOCK_SQL, &crate::MIGRATION_LOCK_PARAMS);
    tx.execute(lock.0, lock.1).await.map_err(pg)?;
    tx.batch_execute(&crate::migration_sql(schema)).await.map_err(pg)?;
    let version = tx.query_one(&crate::version_sql(schema), &[]).await.map_err(pg)?;
    tx.commit().await.map_err(pg)?;
    rows::check_version(schema, &version)
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
        let connector = Connector { url: session_config(url, schema)?, tls };
        let settings = Settings::new(schema, config, clock);
        let mut clients = Vec::with_capacity(CLIENTS);
        for _ in 0..CLIENTS {
            clients.push(Some(open_client(&connector, STATEMENT_TIMEOUT)?));
        }
        let store = Self {
            clients: Mutex::new(clients),
            returned: Condvar::new(),
            connector,
            settings,
            call_wait_max: CALL_WAIT_MAX_DEFAULT,
            _result: PhantomData,
        };
        store.with_client(async |client| migrate(client, &store.settings.statements).await)?;
        Ok(store)
    }

    /// Sets the longest a call waits for the server's answers once it has a connection
    /// (default [`CALL_WAIT_MAX_DEFAULT`], 12 s): past it the call fails with
    /// [`PgError::TimedOut`] and its connection is closed (a server or a link that stopped
    /// answering, its socket still open). Such a call may or may not have taken effect,
    /// like any call whose answer was lost: a claim it made is recovered after its lease,
    /// never taken twice. Keep it above the statement timeout (5 s), which bounds a
    /// statement that waits on a lock: a server that answers is never cut off. A call that
    /// must open its connection again first (the last one closed) waits for that at most
    /// this long too, and at most the 5 s connect bound.
    #[must_use]
    pub fn with_call_wait_max(mut self, wait: Duration) -> Self {
        self.call_wait_max = wait;
        self
    }

    /// Sets the largest stored result, in bytes of its encoding (default
    /// [`RESULT_BYTES_MAX_DEFAULT`](idem_durable::RESULT_BYTES_MAX_DEFAULT), 2 MiB).
    #[must_use]
    pub fn with_result_bytes_max(mut self, max: usize) -> Self {
        self.settings.result_bytes_max = max;
        self
    }

    /// Runs `f` with a connection from the store's set, waiting for one if all are busy,
    /// and for the server's answers at most [`with_call_wait_max`](Self::with_call_wait_max).
    /// A connection the server closed (a restart, an idle timeout) is opened again first;
    /// if the server is still away, that is the error, and the next call tries again.
    /// An operation whose connection fails under it, or that got no answer in time, is not
    /// retried: it may have taken effect, and its caller decides (a claim left pending is
    /// recovered, never redone). A connection that got no answer in time is closed.
    pub(crate) fn with_client<T>(
        &self,
        f: impl AsyncFnOnce(&mut Client) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        // The place goes back to the set however the call ends, a panic included.
        let mut place = Place { store: self, conn: self.take_place()? };
        let mut conn = match place.conn.take() {
            Some(conn) => match still_open(&conn) {
                Ok(true) => conn,
                Ok(false) => {
                    close(conn);
                    self.reopen()?
                }
                Err(refused) => {
                    place.conn = Some(conn);
                    return Err(refused);
                }
            },
            None => self.reopen()?,
        };
        let Conn { client, runtime } = &mut conn;
        let wait = self.call_wait_max;
        let call = async { tokio::time::timeout(wait, f(client)).await };
        // A thread that already drives a tokio runtime (an async task) cannot block on
        // another: `still_open` or `open_client` refused it above, so this cannot panic.
        match runtime.block_on(call) {
            Ok(answer) => {
                // RACE (a rollback left queued): a call that returns early from inside a
                // transaction (a claim refused for its scope's quota or the store's
                // capacity) drops it, which only queues its `ROLLBACK` for the connection's
                // task; `block_on` returns as soon as the call does, so without these turns
                // the `ROLLBACK` waited for the connection's next call while the session sat
                // idle in a transaction holding the record count's row, and every claim in
                // the namespace waited on it (up to the server's 5 s idle timeout). Test:
                // `a_refused_claim_leaves_no_transaction_open`.
                runtime.block_on(turns(READ_TURNS));
                place.conn = Some(conn);
                answer
            }
            // Closed here, the connection's socket is gone: whatever the server sends
            // later reaches nobody. The place opens a new one at its next use.
            Err(_elapsed) => {
                close(conn);
                Err(PgError::TimedOut { waited: wait }.into())
            }
        }
    }

    /// A new connection in a place whose last one closed: bounded by the call's own wait
    /// if it is shorter than the connect bound (a caller who asked for calls of a second
    /// gets them, a reconnect included).
    fn reopen(&self) -> Result<Conn, StoreError> {
        open_client(&self.connector, self.call_wait_max.min(STATEMENT_TIMEOUT))
    }

    /// A place from the store's set (its connection, or `None` to open), waiting at most
    /// `CLIENT_WAIT_MAX` while every connection is busy.
    fn take_place(&self) -> Result<Option<Conn>, StoreError> {
        let mut clients = self.clients.lock();
        let deadline = Instant::now() + CLIENT_WAIT_MAX;
        loop {
            if let Some(place) = clients.pop() {
                return Ok(place);
            }
            // Every connection is busy: wait for one back, but not past the limit (one
            // comes back when its call ends, bounded by the call's wait).
            if Instant::now() >= deadline {
                return Err(PgError::Busy { waited: CLIENT_WAIT_MAX }.into());
            }
            let _ = self.returned.wait_until(&mut clients, deadline);
        }
    }

    /// Drops the store's namespace and every table in it (`DROP SCHEMA ... CASCADE`): a
    /// tenant offboarded, a test done. Every record is gone; later calls fail.
    ///
    /// # Errors
    ///
    /// [`StoreError::Storage`] if the server refuses or fails.
    pub fn drop_schema(&self) -> Result<(), StoreError> {
        let drop = self.settings.statements.drop_schema();
        self.with_client(async |client| client.batch_execute(&drop).await.map_err(pg))
    }

    /// A setting of the store's sessions as the server reports it (`current_setting`):
    /// `statement_timeout` and `idle_in_transaction_session_timeout` are the store's own
    /// (5 s each), whatever the server's defaults. For an operator, and a test that holds
    /// the store to them.
    ///
    /// # Errors
    ///
    /// [`StoreError::Storage`] if the server refuses (an unknown setting) or fails.
    pub fn session_setting(&self, name: &str) -> Result<String, StoreError> {
        self.with_client(async |client| {
            let setting = "SELECT current_setting($1)";
            let row = client.query_one(setting, &[&name]).await.map_err(pg)?;
            Ok(row.get(0))
        })
    }

    /// One claim in one transaction: the claim statement, then either the read that says
    /// why it changed nothing, or the checks that may roll it back.
    fn claim_once(
        &self,
        key: &ScopedKey,
        fingerprint: &Fingerprint,
    ) -> Result<Claim<R>, StoreError> {
        let (st, config) = (&self.settings.statements, &self.settings.config);
        let params = self.settings.claim(key, fingerprint);
        self.with_client(async |client| {
            let tx = client.transaction().await.map_err(pg)?;
            let Some(row) = tx.query_opt(&st.claim, &params.claim()).await.map_err(pg)? else {
                let row = tx.query_one(&st.inspect, &params.inspect()).await.map_err(pg)?;
                tx.commit().await.map_err(pg)?;
                return decode_claim(key, rows::refused(&row, key, fingerprint, config)?);
            };
            // A refusal drops the transaction, which rolls the claim back.
            // The scope's quota first, as the memory store (and the async store).
            let mut taken = Taken::read(&row);
            if taken.needs_quota_check(config) {
                if taken.counts_under_lock() {
                    tx.query_one(&st.count_locked, &[]).await.map_err(pg)?;
                    taken.count_locked();
                }
                let row = tx.query_one(&st.scope_in_flight, &params.scope()).await;
                rows::within_quota(&row.map_err(pg)?, key, config)?;
            }
            taken.within_capacity(config)?;
            if taken.lease_cut_short(config) {
                let lease = taken.lease(key);
                let renewal = self.settings.renewal(&lease);
                let row = tx.query_opt(&st.renew, &renewal.renewal()).await.map_err(pg)?;
                taken = taken.renewed_to(&rows::renewed(row, &lease)?);
            }
            tx.commit().await.map_err(pg)?;
            Ok(taken.into_claim(key))
        })
    }

    /// `complete`'s work, inside the trace span.
    fn complete_now(&self, lease: &Lease, result: R) -> Result<(), StoreError> {
        let params = self.settings.completion(lease, &result)?;
        let complete = &self.settings.statements.complete;
        let changed = self.with_client(async |client| {
            client.execute(complete, &params.completion()).await.map_err(pg)
        })?;
        rows::settled(changed, lease)
    }

    /// `release`'s work, inside the trace span.
    fn release_now(&self, lease: &Lease) -> Result<(), StoreError> {
        let params = self.settings.release(lease);
        let release = &self.settings.statements.release;
        let row = self.with_client(async |client| {
            client.query_one(release, &params.fence()).await.map_err(pg)
        })?;
        rows::settled(rows::deleted(&row), lease)
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

    /// Extends a held lease by a whole lease from the database's now; the new deadline is
    /// what the statement wrote, read back.
    fn renew(&self, lease: &Lease) -> Result<Lease, StoreError> {
        let params = self.settings.renewal(lease);
        let renew = &self.settings.statements.renew;
        let row = self.with_client(async |client| {
            client.query_opt(renew, &params.renewal()).await.map_err(pg)
        })?;
        rows::renewed(row, lease)
    }

    fn lease(&self) -> Duration {
        self.settings.config.lease()
    }

    fn result_ttl(&self) -> Duration {
        self.settings.config.result_ttl()
    }

    fn sweep(&self) -> Result<usize, StoreError> {
        let params = self.settings.sweep();
        let sweep = &self.settings.statements.sweep;
        let row = self.with_client(async |client| {
            client.query_one(sweep, &params.list()).await.map_err(pg)
        })?;
        Ok(usize::try_from(rows::deleted(&row)).unwrap_or(usize::MAX))
    }

    fn pending(&self, max: usize) -> Result<Vec<PendingClaim>, StoreError> {
        let params = self.settings.pending(max);
        let pending = &self.settings.statements.pending;
        let rows = self
            .with_client(async |client| client.query(pending, &params.list()).await.map_err(pg))?;
        rows::pending(&rows)
    }

    fn lookup(
        &self,
        key: &ScopedKey,
        fingerprint: &Fingerprint,
    ) -> Result<KeyState<R>, StoreError> {
        let params = self.settings.claim(key, fingerprint);
        let lookup = &self.settings.statements.lookup;
        let row = self.with_client(async |client| {
            client.query_one(lookup, &params.inspect()).await.map_err(pg)
        })?;
        rows::looked_up(&row, key, fingerprint, &self.settings.config)
    }

    fn result_bytes_max(&self) -> Option<usize> {
        Some(self.settings.result_bytes_max)
    }
}
