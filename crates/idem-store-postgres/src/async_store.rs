//! [`AsyncPgStore`]: the store for tokio services, on tokio-postgres over a maintained
//! pool (deadpool-postgres), and its completion inside the caller's transaction.

use std::fmt;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use deadpool_postgres::{
    BuildError, HookError, Manager, ManagerConfig, Object, Pool, PoolError, RecyclingMethod,
    Runtime, TimeoutType, Timeouts,
};
use idem_core::{
    AsyncKeyStore, Claim, Clock, ConfigError, Fingerprint, KeyState, Lease, PendingClaim,
    ScopedKey, StoreConfig, StoreError,
};
use idem_durable::Durable;
use idem_durable::row::decode_claim;
use tokio_postgres::{NoTls, Row, Transaction};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::rows::{self, Settings, Taken};
use crate::{
    CALL_WAIT_MAX_DEFAULT, Param, PgError, STATEMENT_TIMEOUT, Statements, check_schema_name,
    connect_failed, pg, rustls, session_config,
};

/// Connections in the pool [`AsyncPgStore::connect`] builds.
pub const POOL_SIZE_DEFAULT: usize = 8;

/// The longest a call waits for a free connection unless told otherwise
/// ([`AsyncPgStore::with_pool_wait_max`]).
pub const POOL_WAIT_MAX_DEFAULT: Duration = Duration::from_secs(10);

/// The claimed-key store on PostgreSQL for tokio services: idem-core's [`AsyncKeyStore`]
/// on tokio-postgres over a deadpool pool.
///
/// The pool is the store's own ([`AsyncPgStore::connect`], [`POOL_SIZE_DEFAULT`]
/// connections, each opened with the store's statement timeout) or the caller's
/// ([`AsyncPgStore::from_pool`], shared with the service's own queries). Either way:
///
/// * a wait for a free connection is bounded ([`POOL_WAIT_MAX_DEFAULT`],
///   [`AsyncPgStore::with_pool_wait_max`]): past it the call fails with
///   [`PgError::Busy`], naming the wait, and nothing was done;
/// * a call as a whole ends within that wait and
///   [`CALL_WAIT_MAX_DEFAULT`](crate::CALL_WAIT_MAX_DEFAULT)
///   ([`AsyncPgStore::with_call_wait_max`]), whatever the server does: a server or a link
///   that stops answering with its socket open is [`PgError::TimedOut`], not a hang;
/// * a connection the server closed (a restart, an administrator's
///   `pg_terminate_backend`) is noticed by the pool when it is next handed out and
///   replaced by a new one; a call whose connection died under it fails with a typed
///   error and is not retried (it may have taken effect);
/// * each statement is prepared once per connection and then only bound and run.
///
/// # Completing inside the caller's transaction
///
/// A handler whose effect is a row in the same database (an order) can make the effect
/// and the stored answer one commit: [`AsyncPgStore::complete_in`] runs the completion,
/// fenced by the lease's token, in the caller's transaction. Committing makes both
/// visible; rolling back, or a crash before the commit, leaves neither, and the claim
/// stays in flight (its holder may complete it again; after its lease it is recovered).
/// A lease lost meanwhile is [`StoreError::LeaseLost`] and changes nothing: the caller
/// must then roll back, since another attempt owns the key and may act.
///
/// The transaction must be on a connection to the store's database (the store's pool,
/// [`AsyncPgStore::pool`], or the caller's own); the statements name the namespace, so
/// the connection's `search_path` does not matter. Until it commits, the completion holds
/// the claim's row: a duplicate request's claim waits for the commit (at most its
/// statement timeout) and then replays the answer, so keep the transaction short. The
/// result's lifetime counts from the transaction's start (`now()`).
///
/// ```no_run
/// use idem_core::{AsyncKeyStore, Claim, Fingerprint, ScopedKey, StoreConfig, StoreError};
/// use idem_store_postgres::AsyncPgStore;
///
/// # async fn place_order() -> Result<(), Box<dyn std::error::Error>> {
/// let url = "postgres://idem:idem@127.0.0.1:5432/idem";
/// let store = AsyncPgStore::<String>::connect(url, "shop_keys", StoreConfig::default()).await?;
/// let key = ScopedKey::parse("customer:7", "order-1")?;
/// let request = Fingerprint::builder("order").u64("amount_minor", 1050).finish();
/// let Claim::Acquired(lease) = store.claim(&key, &request).await? else {
///     return Ok(()); // a replay, a request in flight, or a recovery to check first
/// };
/// let mut client = store.pool().get().await?;
/// let tx = client.transaction().await?;
/// tx.execute(
///     "INSERT INTO shop.orders (id, amount_minor) VALUES ($1, $2)",
///     &[&"order-1", &1050_i64],
/// )
/// .await?;
/// match store.complete_in(&tx, &lease, "order-1 placed".to_string()).await {
///     // The order and the answer, in one commit.
///     Ok(()) => tx.commit().await?,
///     // Another attempt recovered the key: this order must not stand.
///     Err(StoreError::LeaseLost { .. }) => tx.rollback().await?,
///     // Dropping the transaction rolls it back; the claim stays in flight.
///     Err(other) => return Err(other.into()),
/// }
/// # Ok(())
/// # }
/// ```
pub struct AsyncPgStore<R> {
    pool: Pool,
    /// The statements, the clock ([`AsyncPgStore::connect_with_clock`]'s or the
    /// database's) and the limits.
    pub(crate) settings: Settings,
    pool_wait_max: Duration,
    call_wait_max: Duration,
    _result: PhantomData<fn() -> R>,
}

impl<R> fmt::Debug for AsyncPgStore<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsyncPgStore")
            .field("settings", &self.settings)
            .field("pool", &self.pool.status())
            .field("pool_wait_max", &self.pool_wait_max)
            .field("call_wait_max", &self.call_wait_max)
            .finish_non_exhaustive()
    }
}

tokio::task_local! {
    /// Set by `bounded` for the call it runs, and raised when that call runs out of time,
    /// so that the connection the call holds leaves the pool as it is dropped.
    static OUT_OF_TIME: Arc<AtomicBool>;
}

/// A pooled connection lent to one call. Dropped after its call ran out of time (the
/// server or the link stopped answering), or with a call its caller gave up, it is taken
/// out of the pool and closed, not given back: given back, every later call that got it
/// would wait its whole bound too, for as long as TCP keeps the silent connection open,
/// while a new connection might be answered at once (a failover behind a proxy).
pub(crate) struct Lent {
    object: Option<Object>,
    out_of_time: Option<Arc<AtomicBool>>,
}

impl Deref for Lent {
    type Target = Object;

    fn deref(&self) -> &Object {
        self.object.as_ref().expect("lent until dropped")
    }
}

impl DerefMut for Lent {
    fn deref_mut(&mut self) -> &mut Object {
        self.object.as_mut().expect("lent until dropped")
    }
}

impl Drop for Lent {
    fn drop(&mut self) {
        // ORDERING: raised and read on the thread that drops the call (the flag is set
        // before the call's future, which holds this, is dropped); no other reads it.
        let late = self.out_of_time.as_ref().is_some_and(|flag| flag.load(Ordering::Relaxed));
        if let (true, Some(object)) = (late, self.object.take()) {
            drop(Object::take(object));
        }
    }
}

/// Raises its flag when dropped before [`answered`](Self::answered): the call it guards
/// was given up by its caller while it held a connection (see [`Lent`]).
struct Abandoned(Option<Arc<AtomicBool>>);

impl Abandoned {
    fn answered(mut self) {
        self.0 = None;
    }
}

impl Drop for Abandoned {
    fn drop(&mut self) {
        if let Some(flag) = &self.0 {
            // ORDERING: read by `Lent::drop` as the same drop goes on, on this thread.
            flag.store(true, Ordering::Relaxed);
        }
    }
}

/// A connection from `pool`, waiting at most `wait` for one to be free.
///
/// A place free in the pool is taken first without waiting, and a connection opened in it
/// if none is idle: the wait bounds a wait for others' connections, not the opening of
/// one (bounded by the call's own bound). A zero wait, or one shorter than a connect,
/// once cancelled every opening at its first step, and a pool whose connections the
/// server had closed never opened another.
async fn checkout(pool: &Pool, wait: Duration) -> Result<Object, StoreError> {
    let at_once = Timeouts { wait: Some(Duration::ZERO), create: None, recycle: None };
    match pool.timeout_get(&at_once).await {
        Err(PoolError::Timeout(TimeoutType::Wait)) if !wait.is_zero() => {}
        Err(PoolError::Timeout(TimeoutType::Wait)) => {
            return Err(PgError::Busy { waited: wait }.into());
        }
        taken => return taken.map_err(pool_error),
    }
    match tokio::time::timeout(wait, pool.get()).await {
        Ok(got) => got.map_err(pool_error),
        Err(_elapsed) => Err(PgError::Busy { waited: wait }.into()),
    }
}

/// A pool's failure: the server's error where there is one, else the pool's own.
fn pool_error(error: PoolError) -> StoreError {
    match error {
        // A pool's backend error is met opening a connection.
        PoolError::Backend(error) | PoolError::PostCreateHook(HookError::Backend(error)) => {
            connect_failed(error)
        }
        other => PgError::Pool(other).into(),
    }
}

/// The pool [`AsyncPgStore::connect`] builds: [`POOL_SIZE_DEFAULT`] connections to `url`,
/// each opened with the statement timeout as a startup option (a replacement for a
/// closed one too), connects bounded by the statement timeout.
fn own_pool(url: &str, schema: &str, tls: Option<MakeRustlsConnect>) -> Result<Pool, StoreError> {
    let session = session_config(url, schema)?;
    // Fast: a connection handed out is checked for being closed, with no round trip.
    let manager_config = ManagerConfig { recycling_method: RecyclingMethod::Fast };
    let manager = match tls {
        Some(tls) => Manager::from_config(session, tls, manager_config),
        None => Manager::from_config(session, NoTls, manager_config),
    };
    // Every connection opens with the statement timeout as a startup option
    // (`session_config`), a replacement for a closed one too.
    Pool::builder(manager)
        .max_size(POOL_SIZE_DEFAULT)
        .runtime(Runtime::Tokio1)
        .create_timeout(Some(STATEMENT_TIMEOUT))
        .recycle_timeout(Some(STATEMENT_TIMEOUT))
        .build()
        .map_err(|error| match error {
            BuildError::NoRuntimeSpecified => PgError::Pool(PoolError::NoRuntimeSpecified).into(),
        })
}

/// Whose pool a store runs on: its own (every connection opened with the store's
/// statement timeout), or the caller's (with a timeout of the caller's, checked).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PoolOwner {
    Store,
    Caller,
}

/// Refuses a caller's pool whose connections acknowledge a commit before it is on disk
/// (`synchronous_commit=off`): a crash of the server would lose completions the store
/// had reported done. The store's own connections ask for `on` at connect.
async fn commits_synchronously(client: &Object) -> Result<(), StoreError> {
    let setting = "SELECT current_setting('synchronous_commit')";
    let row = client.query_one(setting, &[]).await.map_err(pg)?;
    let value: String = row.get(0);
    if value != "off" {
        return Ok(());
    }
    let accepted = "on, local, remote_write or remote_apply: a completion the store reports \
                    done must survive a crash of the server";
    Err(PgError::Setting(ConfigError::new("synchronous_commit", value, accepted)).into())
}

/// Migrates `statements`' namespace under the migration lock, checks its version, and
/// refuses a pool whose connections run statements without a timeout: the store's own
/// without the one it set (a pooler dropped it), the caller's without any.
async fn migrate(pool: &Pool, statements: &Statements, owner: PoolOwner) -> Result<(), StoreError> {
    let schema = &statements.schema;
    let mut client = checkout(pool, POOL_WAIT_MAX_DEFAULT).await?;
    let timeout = client.simple_query(crate::STATEMENT_TIMEOUT_SETTING_SQL).await.map_err(pg)?;
    let timeout_ms = crate::statement_timeout_ms(&timeout)?;
    if owner == PoolOwner::Store {
        crate::session_kept_its_timeout(timeout_ms)?;
    } else if timeout_ms <= 0 {
        let accepted = "more than 0: set it for the pool's connections \
                        (`options=-c statement_timeout=5000` in the URL, or a role's default)";
        let refused = ConfigError::new("statement_timeout", timeout_ms, accepted);
        return Err(PgError::Setting(refused).into());
    } else {
        commits_synchronously(&client).await?;
    }
    // Two processes migrating at once: serialise on an advisory lock.
    let tx = client.transaction().await.map_err(pg)?;
    tx.execute(crate::MIGRATION_LOCK_SQL, &crate::MIGRATION_LOCK_PARAMS).await.map_err(pg)?;
    tx.batch_execute(&crate::migration_sql(schema)).await.map_err(pg)?;
    let version = tx.query_one(&crate::version_sql(schema), &[]).await.map_err(pg)?;
    tx.commit().await.map_err(pg)?;
    rows::check_version(schema, &version)
}

impl<R: Durable + Clone + Send + Sync> AsyncPgStore<R> {
    /// Connects to `url` with a pool of its own ([`POOL_SIZE_DEFAULT`] connections, opened
    /// as calls need them), and migrates the tables in namespace `schema` (created if
    /// absent). Leases and result lifetimes run on the database's clock, so every client
    /// agrees on them whatever its own clock says. Call it inside a tokio runtime: the
    /// connections' tasks run on it.
    ///
    /// # Errors
    ///
    /// [`StoreError::Storage`] with [`PgError`]: unreachable server (with the server's
    /// message), bad schema name, or a schema of another version.
    pub async fn connect(url: &str, schema: &str, config: StoreConfig) -> Result<Self, StoreError> {
        Self::on_pool(own_pool(url, schema, None)?, schema, config, None, PoolOwner::Store).await
    }

    /// As [`connect`](Self::connect), over TLS configured by `tls` (its root certificates
    /// decide which servers are trusted). Put `sslmode=require` in `url` to refuse a
    /// server that will not encrypt; every connection the pool opens uses TLS.
    ///
    /// # Errors
    ///
    /// As [`connect`](Self::connect); a TLS handshake failure is reported like an
    /// unreachable server, with the reason.
    pub async fn connect_with_tls(
        url: &str,
        schema: &str,
        config: StoreConfig,
        tls: rustls::ClientConfig,
    ) -> Result<Self, StoreError> {
        let pool = own_pool(url, schema, Some(MakeRustlsConnect::new(tls)))?;
        Self::on_pool(pool, schema, config, None, PoolOwner::Store).await
    }

    /// As [`connect`](Self::connect), reading time from `clock` instead of the database:
    /// for tests (a `ManualClock`), or where every client shares one clock. Clients on
    /// different clocks must not use it: a client ahead would recover others' live leases.
    ///
    /// # Errors
    ///
    /// As [`connect`](Self::connect).
    pub async fn connect_with_clock(
        url: &str,
        schema: &str,
        config: StoreConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, StoreError> {
        let pool = own_pool(url, schema, None)?;
        Self::on_pool(pool, schema, config, Some(clock), PoolOwner::Store).await
    }

    /// Runs on the caller's `pool` (built with the re-exported
    /// [`deadpool_postgres`](crate::deadpool_postgres)), shared with the service's own
    /// queries, and migrates namespace `schema`. The pool's connections keep the caller's
    /// settings, TLS and size; they must run statements with a timeout (a role's or the
    /// URL's `statement_timeout`), so that no call of the store can hold a connection and
    /// a row for ever. The store's bound on a wait for a free connection applies whatever
    /// the pool's own.
    ///
    /// # Errors
    ///
    /// As [`connect`](Self::connect); [`PgError::Setting`] if the pool's connections have
    /// no statement timeout.
    pub async fn from_pool(
        pool: Pool,
        schema: &str,
        config: StoreConfig,
    ) -> Result<Self, StoreError> {
        check_schema_name(schema)?;
        Self::on_pool(pool, schema, config, None, PoolOwner::Caller).await
    }

    async fn on_pool(
        pool: Pool,
        schema: &str,
        config: StoreConfig,
        clock: Option<Arc<dyn Clock>>,
        owner: PoolOwner,
    ) -> Result<Self, StoreError> {
        let settings = Settings::new(schema, config, clock);
        let store = Self {
            pool,
            settings,
            pool_wait_max: POOL_WAIT_MAX_DEFAULT,
            call_wait_max: CALL_WAIT_MAX_DEFAULT,
            _result: PhantomData,
        };
        store.bounded(migrate(&store.pool, &store.settings.statements, owner)).await?;
        Ok(store)
    }

    /// Sets the largest stored result, in bytes of its encoding (default
    /// [`RESULT_BYTES_MAX_DEFAULT`](idem_durable::RESULT_BYTES_MAX_DEFAULT), 2 MiB).
    #[must_use]
    pub fn with_result_bytes_max(mut self, max: usize) -> Self {
        self.settings.result_bytes_max = max;
        self
    }

    /// Sets the longest a call waits for a free connection before it fails with
    /// [`PgError::Busy`] (default [`POOL_WAIT_MAX_DEFAULT`], 10 s). Zero takes only a
    /// connection free at once.
    #[must_use]
    pub fn with_pool_wait_max(mut self, wait: Duration) -> Self {
        self.pool_wait_max = wait;
        self
    }

    /// Sets the longest a call waits for the server's answers, beyond its wait for a free
    /// connection (default [`CALL_WAIT_MAX_DEFAULT`](crate::CALL_WAIT_MAX_DEFAULT), 12 s):
    /// past both the call fails with [`PgError::TimedOut`] (a server or a link that stopped
    /// answering, its socket still open). Such a call may or may not have taken effect,
    /// like any call whose answer was lost: a claim it made is recovered after its lease,
    /// never taken twice. Its connection is taken out of the pool and closed; the pool
    /// opens a new one when a call needs it. Keep it above the statement
    /// timeout (5 s), which bounds a statement that waits on a lock: a server that answers
    /// is never cut off.
    #[must_use]
    pub fn with_call_wait_max(mut self, wait: Duration) -> Self {
        self.call_wait_max = wait;
        self
    }

    /// Runs `call` within the store's bounds: its wait for a connection and its wait for
    /// the server's answers.
    pub(crate) async fn bounded<T>(
        &self,
        call: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        let waited = self.pool_wait_max.saturating_add(self.call_wait_max);
        let out_of_time = Arc::new(AtomicBool::new(false));
        let call = OUT_OF_TIME.scope(out_of_time.clone(), call);
        let mut call = std::pin::pin!(tokio::time::timeout(waited, call));
        // Declared after `call`, so dropped before it: a caller that gives the call up (a
        // timeout of its own, an aborted task) raises the flag before the connection the
        // call holds is dropped, and that connection, which did not answer in time for
        // its caller, leaves the pool as one that ran out of this bound does.
        let abandoned = Abandoned(Some(out_of_time.clone()));
        let answered = call.as_mut().await;
        abandoned.answered();
        match answered {
            Ok(answer) => answer,
            Err(_elapsed) => {
                // Raised before `call` (and the connection it holds) is dropped, at the
                // end of this function: the connection leaves the pool (see `Lent`).
                // ORDERING: read by `Lent::drop` on this same task.
                out_of_time.store(true, Ordering::Relaxed);
                Err(PgError::TimedOut { waited }.into())
            }
        }
    }

    /// The pool the store runs on: for the caller's own statements, and for the
    /// transactions [`complete_in`](Self::complete_in) completes in.
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// Drops the store's namespace and every table in it (`DROP SCHEMA ... CASCADE`): a
    /// tenant offboarded, a test done. Every record is gone; later calls fail.
    ///
    /// # Errors
    ///
    /// [`StoreError::Storage`] if the server refuses or fails.
    pub async fn drop_schema(&self) -> Result<(), StoreError> {
        self.bounded(async {
            let client = self.connection().await?;
            client.batch_execute(&self.settings.statements.drop_schema()).await.map_err(pg)
        })
        .await
    }

    /// Completes `lease` with `result` inside the caller's transaction `tx` (a
    /// deadpool-postgres transaction derefs to it): the stored answer becomes visible
    /// when `tx` commits, together with whatever else `tx` wrote, and never if it rolls
    /// back. See [`AsyncPgStore`]'s docs for an example and for what `tx` must be.
    ///
    /// # Errors
    ///
    /// [`StoreError::LeaseLost`] if the lease no longer holds its key (recovered by
    /// another claim, or settled already): nothing was written, and the caller must roll
    /// `tx` back, since another attempt owns the key. [`StoreError::Storage`] with
    /// [`CodecError::TooLarge`](idem_durable::CodecError::TooLarge) for a result past
    /// [`with_result_bytes_max`](Self::with_result_bytes_max) (nothing sent), or with
    /// [`PgError`] if the statement fails (then `tx` is aborted and can only roll back).
    pub async fn complete_in(
        &self,
        tx: &Transaction<'_>,
        lease: &Lease,
        result: R,
    ) -> Result<(), StoreError> {
        let done = async {
            let params = self.settings.completion(lease, &result)?;
            let complete = &self.settings.statements.complete;
            let changed = tx.execute(complete, &params.completion()).await.map_err(pg)?;
            rows::settled(changed, lease)
        };
        let done = self.bounded(done).await;
        idem_core::trace::settle("complete", lease, || done)
    }
}

impl<R: Durable + Clone + Send + Sync> AsyncPgStore<R> {
    pub(crate) async fn connection(&self) -> Result<Lent, StoreError> {
        let object = checkout(&self.pool, self.pool_wait_max).await?;
        let out_of_time = OUT_OF_TIME.try_with(Arc::clone).ok();
        Ok(Lent { object: Some(object), out_of_time })
    }

    /// Runs `statement` on a free connection; `None` if it returned no row.
    pub(crate) async fn query_opt(
        &self,
        statement: &str,
        params: &[Param<'_>],
    ) -> Result<Option<Row>, StoreError> {
        let client = self.connection().await?;
        let prepared = client.prepare_cached(statement).await.map_err(pg)?;
        client.query_opt(&prepared, params).await.map_err(pg)
    }

    /// Runs `statement` on a free connection; its rows.
    async fn query(&self, statement: &str, params: &[Param<'_>]) -> Result<Vec<Row>, StoreError> {
        let client = self.connection().await?;
        let prepared = client.prepare_cached(statement).await.map_err(pg)?;
        client.query(&prepared, params).await.map_err(pg)
    }

    /// Runs `statement`, which returns exactly one row, on a free connection.
    async fn query_one(&self, statement: &str, params: &[Param<'_>]) -> Result<Row, StoreError> {
        let client = self.connection().await?;
        let prepared = client.prepare_cached(statement).await.map_err(pg)?;
        client.query_one(&prepared, params).await.map_err(pg)
    }

    /// One claim in one transaction: the claim statement, then either the read that says
    /// why it changed nothing, or the checks that may roll it back.
    async fn claim_once(
        &self,
        key: &ScopedKey,
        fingerprint: &Fingerprint,
    ) -> Result<Claim<R>, StoreError> {
        let (st, config) = (&self.settings.statements, &self.settings.config);
        let params = self.settings.claim(key, fingerprint);
        let mut client = self.connection().await?;
        let tx = client.transaction().await.map_err(pg)?;
        let claim = tx.prepare_cached(&st.claim).await.map_err(pg)?;
        let Some(row) = tx.query_opt(&claim, &params.claim()).await.map_err(pg)? else {
            let inspect = tx.prepare_cached(&st.inspect).await.map_err(pg)?;
            let row = tx.query_one(&inspect, &params.inspect()).await.map_err(pg)?;
            tx.commit().await.map_err(pg)?;
            return decode_claim(key, rows::refused(&row, key, fingerprint, config)?);
        };
        // A refusal drops the transaction, which rolls the claim back.
        // The scope's quota first, as the memory store: a key refused by both is refused
        // by its scope (a sweep of the store would not admit it).
        let mut taken = Taken::read(&row);
        if taken.needs_quota_check(config) {
            if taken.counts_under_lock() {
                let lock = tx.prepare_cached(&st.count_locked).await.map_err(pg)?;
                tx.query_one(&lock, &[]).await.map_err(pg)?;
                taken.count_locked();
            }
            let count = tx.prepare_cached(&st.scope_in_flight).await.map_err(pg)?;
            let row = tx.query_one(&count, &params.scope()).await.map_err(pg)?;
            rows::within_quota(&row, key, config)?;
        }
        taken.within_capacity(config)?;
        // A lease cut short by a wait on the record count: renewed before the commit (see
        // `Taken::lease_cut_short`).
        if taken.lease_cut_short(config) {
            let lease = taken.lease(key);
            let renewal = self.settings.renewal(&lease);
            let renew = tx.prepare_cached(&st.renew).await.map_err(pg)?;
            let row = tx.query_opt(&renew, &renewal.renewal()).await.map_err(pg)?;
            taken = taken.renewed_to(&rows::renewed(row, &lease)?);
        }
        tx.commit().await.map_err(pg)?;
        Ok(taken.into_claim(key))
    }

    /// A claim that sweeps expired results once when the store is full, then tries again.
    async fn claim_swept(
        &self,
        key: &ScopedKey,
        fingerprint: &Fingerprint,
    ) -> Result<Claim<R>, StoreError> {
        let first = self.claim_once(key, fingerprint).await;
        if !matches!(first, Err(StoreError::StoreFull { .. })) || self.sweep_now().await? == 0 {
            return first;
        }
        self.claim_once(key, fingerprint).await
    }

    async fn complete_now(&self, lease: &Lease, result: R) -> Result<(), StoreError> {
        let params = self.settings.completion(lease, &result)?;
        let client = self.connection().await?;
        let complete = client.prepare_cached(&self.settings.statements.complete).await;
        let complete = complete.map_err(pg)?;
        let changed = client.execute(&complete, &params.completion()).await.map_err(pg)?;
        rows::settled(changed, lease)
    }

    async fn release_now(&self, lease: &Lease) -> Result<(), StoreError> {
        let params = self.settings.release(lease);
        let row = self.query_one(&self.settings.statements.release, &params.fence()).await?;
        rows::settled(rows::deleted(&row), lease)
    }

    async fn sweep_now(&self) -> Result<usize, StoreError> {
        let params = self.settings.sweep();
        let row = self.query_one(&self.settings.statements.sweep, &params.list()).await?;
        Ok(usize::try_from(rows::deleted(&row)).unwrap_or(usize::MAX))
    }
}

/// Every call awaits the server without blocking a thread. The `claim` and `settle`
/// trace events are reported when the call's answer is in (a span cannot stay entered
/// across the awaits), with the same names and fields as every store's.
impl<R: Durable + Clone + Send + Sync> AsyncKeyStore<R> for AsyncPgStore<R> {
    async fn claim(
        &self,
        key: &ScopedKey,
        fingerprint: &Fingerprint,
    ) -> Result<Claim<R>, StoreError> {
        let answer = self.bounded(self.claim_swept(key, fingerprint)).await;
        idem_core::trace::claim(key, || answer)
    }

    async fn complete(&self, lease: &Lease, result: R) -> Result<(), StoreError> {
        let done = self.bounded(self.complete_now(lease, result)).await;
        idem_core::trace::settle("complete", lease, || done)
    }

    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        let done = self.bounded(self.release_now(lease)).await;
        idem_core::trace::settle("release", lease, || done)
    }

    /// Extends a held lease by a whole lease from the database's now; the new deadline is
    /// what the statement wrote, read back.
    async fn renew(&self, lease: &Lease) -> Result<Lease, StoreError> {
        let params = self.settings.renewal(lease);
        let renewal = params.renewal();
        let renew = self.query_opt(&self.settings.statements.renew, &renewal);
        let row = self.bounded(renew).await?;
        rows::renewed(row, lease)
    }

    fn lease(&self) -> Duration {
        self.settings.config.lease()
    }

    fn result_ttl(&self) -> Duration {
        self.settings.config.result_ttl()
    }

    async fn sweep(&self) -> Result<usize, StoreError> {
        self.bounded(self.sweep_now()).await
    }

    async fn pending(&self, max: usize) -> Result<Vec<PendingClaim>, StoreError> {
        let params = self.settings.pending(max);
        let list = params.list();
        let rows = self.query(&self.settings.statements.pending, &list);
        rows::pending(&self.bounded(rows).await?)
    }

    async fn lookup(
        &self,
        key: &ScopedKey,
        fingerprint: &Fingerprint,
    ) -> Result<KeyState<R>, StoreError> {
        let params = self.settings.claim(key, fingerprint);
        let inspect = params.inspect();
        let row = self.query_one(&self.settings.statements.lookup, &inspect);
        rows::looked_up(&self.bounded(row).await?, key, fingerprint, &self.settings.config)
    }

    fn result_bytes_max(&self) -> Option<usize> {
        Some(self.settings.result_bytes_max)
    }
}
