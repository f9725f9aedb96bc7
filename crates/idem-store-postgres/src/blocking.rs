//! [`PgStore`]: the store for threads, on the blocking `postgres` client with a small
//! fixed set of its own connections.

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::{Duration, Instant};

use idem_core::{
    Claim, Clock, Fingerprint, KeyState, KeyStore, Lease, PendingClaim, ScopedKey, StoreConfig,
    StoreError,
};
use idem_durable::Durable;
use idem_durable::row::{claim_with_sweep, decode_claim};
use parking_lot::{Condvar, Mutex};
use postgres::{Client, NoTls};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::rows::{self, Settings, Taken};
use crate::{PgError, Statements, connect_failed, pg, rustls, session_config};

/// The claimed-key store on PostgreSQL, for threads: each call blocks its thread until
/// the server answers. For a tokio service, [`AsyncPgStore`](crate::AsyncPgStore).
pub struct PgStore<R> {
    clients: Mutex<Vec<Client>>,
    returned: Condvar,
    /// How to open a connection again after the server closed one.
    connector: Connector,
    /// The statements, the clock ([`PgStore::connect_with_clock`]'s or the database's)
    /// and the limits.
    pub(crate) settings: Settings,
    _result: PhantomData<fn() -> R>,
}

impl<R> fmt::Debug for PgStore<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgStore").field("settings", &self.settings).finish_non_exhaustive()
    }
}

/// Connections per store.
const CLIENTS: usize = 4;
/// The longest a call waits for one of the store's connections to come back.
const CLIENT_WAIT_MAX: Duration = Duration::from_secs(10);

/// Where and how the store connects: the server's address, and TLS if asked for.
struct Connector {
    url: postgres::Config,
    tls: Option<MakeRustlsConnect>,
}

/// Opens one connection, with the store's statement timeout as a startup option.
fn open_client(connector: &Connector) -> Result<Client, StoreError> {
    let url = &connector.url;
    let connected = match &connector.tls {
        Some(tls) => url.connect(tls.clone()),
        None => url.connect(NoTls),
    };
    // The statement timeout comes with the connection: a startup option (`session_config`).
    connected.map_err(connect_failed)
}

/// Checks first that the connection kept the statement timeout it asked for at connect,
/// then migrates `statements`' namespace under the migration lock and checks its version.
fn migrate(client: &mut Client, statements: &Statements) -> Result<(), StoreError> {
    let schema = &statements.schema;
    let timeout = client.simple_query(crate::STATEMENT_TIMEOUT_SETTING_SQL).map_err(pg)?;
    crate::session_kept_its_timeout(crate::statement_timeout_ms(&timeout)?)?;
    // Two processes migrating at once: serialise on an advisory lock.
    let mut tx = client.transaction().map_err(pg)?;
    tx.execute(crate::MIGRATION_LOCK_SQL, &crate::MIGRATION_LOCK_PARAMS).map_err(pg)?;
    tx.batch_execute(&crate::migration_sql(schema)).map_err(pg)?;
    let version = tx.query_one(&crate::version_sql(schema), &[]).map_err(pg)?;
    tx.commit().map_err(pg)?;
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
        let url = postgres::Config::from(session_config(url, schema)?);
        let connector = Connector { url, tls };
        let mut clients =
            (0..CLIENTS).map(|_| open_client(&connector)).collect::<Result<Vec<_>, _>>()?;
        let settings = Settings::new(schema, config, clock);
        migrate(&mut clients[0], &settings.statements)?;
        Ok(Self {
            clients: Mutex::new(clients),
            returned: Condvar::new(),
            connector,
            settings,
            _result: PhantomData,
        })
    }

    /// Sets the largest stored result, in bytes of its encoding (default
    /// [`RESULT_BYTES_MAX_DEFAULT`](idem_durable::RESULT_BYTES_MAX_DEFAULT), 2 MiB).
    #[must_use]
    pub fn with_result_bytes_max(mut self, max: usize) -> Self {
        self.settings.result_bytes_max = max;
        self
    }

    /// Runs `f` with a connection from the store's set, waiting for one if all are busy.
    /// A connection the server closed (a restart, an idle timeout) is opened again first;
    /// if the server is still away, that is the error, and the next call tries again.
    /// An operation whose connection fails under it is not retried: it may have taken
    /// effect, and its caller decides (a claim left pending is recovered, never redone).
    pub(crate) fn with_client<T>(
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
        let drop = self.settings.statements.drop_schema();
        self.with_client(|client| client.batch_execute(&drop).map_err(pg))
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
        self.with_client(|client| {
            let row = client.query_one("SELECT current_setting($1)", &[&name]).map_err(pg)?;
            Ok(row.get(0))
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

    /// One claim in one transaction: the claim statement, then either the read that says
    /// why it changed nothing, or the checks that may roll it back.
    fn claim_once(
        &self,
        key: &ScopedKey,
        fingerprint: &Fingerprint,
    ) -> Result<Claim<R>, StoreError> {
        let (st, config) = (&self.settings.statements, &self.settings.config);
        let params = self.settings.claim(key, fingerprint);
        self.with_client(|client| {
            let mut tx = client.transaction().map_err(pg)?;
            let Some(row) = tx.query_opt(&st.claim, &params.claim()).map_err(pg)? else {
                let row = tx.query_one(&st.inspect, &params.inspect()).map_err(pg)?;
                tx.commit().map_err(pg)?;
                return decode_claim(key, rows::refused(&row, key, fingerprint, config)?);
            };
            // A refusal drops the transaction, which rolls the claim back.
            // The scope's quota first, as the memory store (and the async store).
            let taken = Taken::read(&row);
            if taken.needs_quota_check(config) {
                let row = tx.query_one(&st.scope_in_flight, &params.scope()).map_err(pg)?;
                rows::within_quota(&row, key, config)?;
            }
            taken.within_capacity(config)?;
            tx.commit().map_err(pg)?;
            Ok(taken.into_claim(key))
        })
    }

    /// `complete`'s work, inside the trace span.
    fn complete_now(&self, lease: &Lease, result: R) -> Result<(), StoreError> {
        let params = self.settings.completion(lease, &result)?;
        let complete = &self.settings.statements.complete;
        let changed =
            self.with_client(|client| client.execute(complete, &params.completion()).map_err(pg))?;
        rows::settled(changed, lease)
    }

    /// `release`'s work, inside the trace span.
    fn release_now(&self, lease: &Lease) -> Result<(), StoreError> {
        let params = self.settings.release(lease);
        let release = &self.settings.statements.release;
        let row =
            self.with_client(|client| client.query_one(release, &params.fence()).map_err(pg))?;
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
        let row =
            self.with_client(|client| client.query_opt(renew, &params.renewal()).map_err(pg))?;
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
        let row = self.with_client(|client| client.query_one(sweep, &params.list()).map_err(pg))?;
        Ok(usize::try_from(rows::deleted(&row)).unwrap_or(usize::MAX))
    }

    fn pending(&self, max: usize) -> Result<Vec<PendingClaim>, StoreError> {
        let params = self.settings.pending(max);
        let pending = &self.settings.statements.pending;
        let rows = self.with_client(|client| client.query(pending, &params.list()).map_err(pg))?;
        rows::pending(&rows)
    }

    fn lookup(
        &self,
        key: &ScopedKey,
        fingerprint: &Fingerprint,
    ) -> Result<KeyState<R>, StoreError> {
        let params = self.settings.claim(key, fingerprint);
        let lookup = &self.settings.statements.lookup;
        let row =
            self.with_client(|client| client.query_one(lookup, &params.inspect()).map_err(pg))?;
        rows::looked_up(&row, key, fingerprint, &self.settings.config)
    }

    fn result_bytes_max(&self) -> Option<usize> {
        Some(self.settings.result_bytes_max)
    }
}
