//! [`RedisStore`]: idem-core's async store contract on one Redis connection manager, each
//! operation one script (see `scripts.rs`).

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use idem_core::{
    AsyncKeyStore, Claim, Clock, ConfigError, FencingToken, Fingerprint, KeyState, Lease,
    PendingClaim, ScopedKey, StoreConfig, StoreError,
};
use idem_durable::row::{StoredRow, claim_with_sweep_async, pending_claim, row_state, stored_at};
use idem_durable::{Durable, RESULT_BYTES_MAX_DEFAULT, decode_result, encode_result};
use redis::AsyncConnectionConfig;
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};

use crate::lanes::Lanes;
use redis::{ErrorKind, ScriptInvocation, ServerErrorKind, Value};

use crate::keys::Keys;
use crate::reply::Reply;
use crate::scripts::Scripts;
use crate::server::{self, ServerDurability};
use crate::{RedisError, redis_error};

/// How long a call waits for the server's answer before it fails (the connection is
/// then replaced): the bound that keeps a hung server from hanging a request.
pub const RESPONSE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long opening a connection may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// The most pending claims one [`pending`](AsyncKeyStore::pending) call lists, whatever
/// its `max`: the script runs on the server's one thread, and a reconciler calls again
/// for the rest.
pub const PENDING_BATCH_MAX: usize = 1024;
/// The longest lease or result lifetime the store takes: deadlines are milliseconds in a
/// Lua number, exact below 2^53 (year 287,000); 100 years keeps every sum far below.
const SPAN_MAX: Duration = Duration::from_secs(100 * 365 * 24 * 60 * 60);

/// How many replicas must acknowledge each change, and how long to wait for them
/// (`WAIT count timeout`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Replicas {
    /// Replicas that must hold a change before it is acknowledged.
    pub count: usize,
    /// The longest wait for them.
    pub timeout: Duration,
}

/// How a [`RedisStore`] connects, beyond the URL, namespace and limits.
#[derive(Clone, Default)]
pub struct RedisOptions {
    clock: Option<Arc<dyn Clock>>,
    restart_may_forget: bool,
    server_checked_by_operator: bool,
    replicas: Option<Replicas>,
    result_bytes_max: Option<usize>,
    response_timeout: Option<Duration>,
}

impl fmt::Debug for RedisOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisOptions")
            .field("own_clock", &self.clock.is_some())
            .field("restart_may_forget", &self.restart_may_forget)
            .field("server_checked_by_operator", &self.server_checked_by_operator)
            .field("replicas", &self.replicas)
            .field("result_bytes_max", &self.result_bytes_max)
            .field("response_timeout", &self.response_timeout)
            .finish()
    }
}

impl RedisOptions {
    /// The defaults: the server's clock, an append-only file required, no replicas.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads time from `clock` instead of the server: for tests (a `ManualClock`). The
    /// store then gives Redis no expiry of its own (Redis's clock is not `clock`): expired
    /// results are removed by [`sweep`](AsyncKeyStore::sweep). Clients on different
    /// clocks must not use it: one ahead would recover others' live leases.
    #[must_use]
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = Some(clock);
        self
    }

    /// Accepts a server without an append-only file: a restart of it may forget keys,
    /// and a repeat of a forgotten key runs again (a cache-like deployment).
    #[must_use]
    pub fn restart_may_forget(mut self) -> Self {
        self.restart_may_forget = true;
        self
    }

    /// Skips reading the server's configuration, for a managed server that refuses
    /// `CONFIG GET`: the operator vouches that `maxmemory-policy` is `noeviction`, that
    /// the server persists as the deployment needs, and that its `proto-max-bulk-len`
    /// takes the store's largest result plus 5 bytes of encoding.
    #[must_use]
    pub fn server_checked_by_operator(mut self) -> Self {
        self.server_checked_by_operator = true;
        self
    }

    /// Acknowledges each change, and each replay, only once `count` replicas hold it
    /// (`WAIT`, on the same connection, at most `timeout`); fewer is
    /// [`RedisError::NotReplicated`]. The wait must be below the response timeout, checked
    /// here and again at connect (whichever option was set last).
    ///
    /// # Errors
    ///
    /// [`ConfigError`] for a `count` of 0, or a `timeout` of 0 (which Redis reads as
    /// "wait for ever") or not below the response timeout.
    pub fn wait_for_replicas(
        mut self,
        count: usize,
        timeout: Duration,
    ) -> Result<Self, ConfigError> {
        self.replicas = Some(Replicas { count, timeout });
        self.check_replicas()?;
        Ok(self)
    }

    /// Refuses a replica wait the store could not keep.
    fn check_replicas(&self) -> Result<(), ConfigError> {
        let Some(Replicas { count, timeout }) = self.replicas else { return Ok(()) };
        if count == 0 {
            return Err(ConfigError::new("replicas", count, "at least 1"));
        }
        let response = self.response_timeout.unwrap_or(RESPONSE_TIMEOUT);
        if timeout < Duration::from_millis(1) || timeout >= response {
            let accepted = format!("at least 1ms and below the response timeout ({response:?})");
            return Err(ConfigError::new("replica wait", timeout, accepted));
        }
        Ok(())
    }

    /// The largest stored result, in bytes of its encoding (default
    /// [`RESULT_BYTES_MAX_DEFAULT`], 2 MiB).
    #[must_use]
    pub fn result_bytes_max(mut self, max: usize) -> Self {
        self.result_bytes_max = Some(max);
        self
    }

    /// How long a call waits for the server (default [`RESPONSE_TIMEOUT`]).
    #[must_use]
    pub fn response_timeout(mut self, timeout: Duration) -> Self {
        self.response_timeout = Some(timeout);
        self
    }
}

/// The claimed-key store on Redis: idem-core's [`AsyncKeyStore`] (and
/// [`AsyncKeyAdmin`](idem_core::AsyncKeyAdmin)) over one multiplexed connection that the
/// `redis` crate's connection manager replaces when it breaks (and, with replicas, one
/// connection per change waiting for them). Cloning shares them.
///
/// A call waits at most [`RESPONSE_TIMEOUT`] for the server, reconnecting included (a
/// down or hung server answers [`RedisError::TimedOut`](crate::RedisError::TimedOut)
/// then); a call whose connection failed under it is a [`StoreError::Storage`] and is
/// never retried by the store (it may have taken effect): a claim left pending is
/// recovered, as after any storage failure. Connecting takes at most [`CONNECT_TIMEOUT`]
/// to open the connection, then the response timeout for the server's checks.
pub struct RedisStore<R> {
    conn: ConnectionManager,
    keys: Keys,
    scripts: Arc<Scripts>,
    config: StoreConfig,
    clock: Option<Arc<dyn Clock>>,
    result_bytes_max: usize,
    replicas: Option<Replicas>,
    /// With replicas: the connections the changes that wait for them take, one each (see
    /// the `lanes` module), so that no call queues behind another's `WAIT`.
    lanes: Option<Arc<Lanes>>,
    /// The bound on each call's round trips, reconnecting included.
    response_timeout: Duration,
    server: ServerDurability,
    _result: PhantomData<fn() -> R>,
}

/// `call` bounded by `limit` as a whole: the connection manager's own response timeout
/// covers one reply, not its reconnects (six tries with backoff: 44 s against a port that
/// accepts and never answers), so a down or hung server would hold the caller far past it.
async fn bounded<T>(
    what: &'static str,
    limit: Duration,
    call: impl std::future::Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    match tokio::time::timeout(limit, call).await {
        Ok(answer) => answer,
        Err(_) => Err(RedisError::TimedOut { call: what, after: limit }.into()),
    }
}

impl<R> Clone for RedisStore<R> {
    fn clone(&self) -> Self {
        Self {
            conn: self.conn.clone(),
            keys: self.keys.clone(),
            scripts: self.scripts.clone(),
            config: self.config,
            clock: self.clock.clone(),
            result_bytes_max: self.result_bytes_max,
            replicas: self.replicas,
            lanes: self.lanes.clone(),
            response_timeout: self.response_timeout,
            server: self.server.clone(),
            _result: PhantomData,
        }
    }
}

impl<R> fmt::Debug for RedisStore<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStore")
            .field("namespace", &self.keys.leases)
            .field("config", &self.config)
            .field("replicas", &self.replicas)
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

/// A duration in whole milliseconds.
fn ms(span: Duration) -> u64 {
    u64::try_from(span.as_millis()).unwrap_or(u64::MAX)
}

/// Refuses a lease or result lifetime past [`SPAN_MAX`].
fn check_spans(config: &StoreConfig) -> Result<(), StoreError> {
    for (name, span) in [("lease", config.lease()), ("result_ttl", config.result_ttl())] {
        if span > SPAN_MAX {
            let refused = ConfigError::new(name, span, "at most 100 years on the Redis store");
            return Err(StoreError::Storage(Box::new(refused)));
        }
    }
    Ok(())
}

impl<R: Durable + Send + Sync> RedisStore<R> {
    /// Connects to `url` (`redis://host:port/db`; this build has no TLS: reach a remote
    /// server through a TLS tunnel) and keeps its
    /// records under the namespace `prefix`, with the server's clock, after checking the
    /// server's eviction policy and persistence. Call it inside a tokio runtime.
    ///
    /// # Errors
    ///
    /// [`StoreError::Storage`] with [`RedisError`]: a bad prefix, an unreachable server,
    /// a policy that can evict keys, no append-only file; a lease or TTL over 100 years.
    pub async fn connect(url: &str, prefix: &str, config: StoreConfig) -> Result<Self, StoreError> {
        Self::connect_with(url, prefix, config, RedisOptions::default()).await
    }

    /// As [`connect`](Self::connect), with `options`.
    ///
    /// # Errors
    ///
    /// As [`connect`](Self::connect).
    pub async fn connect_with(
        url: &str,
        prefix: &str,
        config: StoreConfig,
        options: RedisOptions,
    ) -> Result<Self, StoreError> {
        check_spans(&config)?;
        options.check_replicas().map_err(|e| StoreError::Storage(Box::new(e)))?;
        let keys = Keys::new(prefix)?;
        let client = redis::Client::open(url).map_err(redis_error)?;
        let response_timeout = options.response_timeout.unwrap_or(RESPONSE_TIMEOUT);
        let manager = ConnectionManagerConfig::new()
            .set_response_timeout(Some(response_timeout))
            .set_connection_timeout(Some(CONNECT_TIMEOUT));
        let lanes = options.replicas.map(|_| {
            let lane = AsyncConnectionConfig::new()
                .set_response_timeout(Some(response_timeout))
                .set_connection_timeout(Some(CONNECT_TIMEOUT));
            Arc::new(Lanes::new(client.clone(), lane))
        });
        let opening = client.get_connection_manager_with_config(manager);
        let mut conn =
            bounded("connect", CONNECT_TIMEOUT, async { opening.await.map_err(redis_error) })
                .await?;
        let result_bytes_max = options.result_bytes_max.unwrap_or(RESULT_BYTES_MAX_DEFAULT);
        let scripts = Scripts::new();
        let server = bounded("the server's checks", response_timeout, async {
            server::check_primary(&mut conn).await?;
            let server = if options.server_checked_by_operator {
                ServerDurability::vouched()
            } else {
                server::check(&mut conn, options.restart_may_forget, result_bytes_max).await?
            };
            for script in scripts.all() {
                script.prepare_invoke().load_async(&mut conn).await.map_err(redis_error)?;
            }
            Ok(server)
        });
        let server = server.await?;
        Ok(Self {
            conn,
            keys,
            scripts: Arc::new(scripts),
            config,
            clock: options.clock,
            result_bytes_max,
            replicas: options.replicas,
            lanes,
            response_timeout,
            server,
            _result: PhantomData,
        })
    }

    /// The server's settings as read at connect: what an acknowledged change survives.
    pub fn server(&self) -> &ServerDurability {
        &self.server
    }

    /// Deletes every key of the namespace (`SCAN` and `DEL`, in batches): a tenant
    /// offboarded, a test done. Returns how many keys it deleted.
    ///
    /// # Errors
    ///
    /// [`StoreError::Storage`] if the server fails; what was deleted stays deleted.
    pub async fn drop_namespace(&self) -> Result<usize, StoreError> {
        let mut conn = self.conn.clone();
        let (mut cursor, mut deleted) = (0u64, 0usize);
        loop {
            let mut scan = redis::cmd("SCAN");
            scan.arg(cursor).arg("MATCH").arg(self.keys.pattern()).arg("COUNT").arg(1000);
            let (next, batch): (u64, Vec<String>) = self.query("SCAN", &scan, &mut conn).await?;
            if !batch.is_empty() {
                let n: usize = self.query("DEL", redis::cmd("DEL").arg(&batch), &mut conn).await?;
                deleted += n;
            }
            if next == 0 {
                return Ok(deleted);
            }
            cursor = next;
        }
    }

    /// One command, bounded as a script is.
    async fn query<T: redis::FromRedisValue>(
        &self,
        what: &'static str,
        command: &redis::Cmd,
        conn: &mut ConnectionManager,
    ) -> Result<T, StoreError> {
        let call = async { command.query_async(conn).await.map_err(redis_error) };
        bounded(what, self.response_timeout, call).await
    }

    /// The time the scripts use: the injected clock's, or `server` (theirs).
    pub(crate) fn time(&self) -> String {
        self.clock.as_ref().map_or_else(|| "server".into(), |c| c.now().as_millis().to_string())
    }

    /// Runs `invocation` (and, with replicas and `wait`, `WAIT` after it on the same
    /// connection, in one pipeline, on a lane of its own); its reply and, if it waited,
    /// how many acknowledged. A script that only reads (`wait` false) waits for no
    /// replica, on the shared connection.
    pub(crate) async fn run(
        &self,
        invocation: &ScriptInvocation<'_>,
        wait: bool,
    ) -> Result<(Value, Option<i64>), StoreError> {
        let mut pipe = redis::pipe();
        pipe.invoke_script(invocation);
        let (Some(replicas), Some(lanes)) = (self.replicas.filter(|_| wait), &self.lanes) else {
            let mut conn = self.conn.clone();
            let call =
                async { Self::invoke(&pipe, invocation, &mut conn).await.map_err(redis_error) };
            return bounded("a script", self.response_timeout, call).await;
        };
        pipe.cmd("WAIT").arg(replicas.count).arg(ms(replicas.timeout));
        let call = async {
            let mut lane = lanes.lane().await.map_err(redis_error)?;
            let answer = Self::invoke(&pipe, invocation, lane.conn()).await;
            // Answered, an error reply too (the server is there, the connection waits for
            // nothing): the lane is kept. Its connection failed (a restart, say): closed,
            // with the idle ones. Timed out or given up (dropped here): closed alone.
            match &answer {
                Ok(_) => lane.answered(),
                Err(e) if matches!(e.kind(), ErrorKind::Server(_) | ErrorKind::Extension) => {
                    lane.answered();
                }
                Err(e) if !e.is_timeout() && (e.is_io_error() || e.is_connection_dropped()) => {
                    lane.failed();
                }
                Err(_) => {}
            }
            answer.map_err(redis_error)
        };
        bounded("a script", self.response_timeout, call).await
    }

    /// Sends `pipe` (which invokes `invocation`) on `conn`, loading the script once if the
    /// server forgot it; the script's reply and the `WAIT`'s, if any.
    async fn invoke<C: ConnectionLike>(
        pipe: &redis::Pipeline,
        invocation: &ScriptInvocation<'_>,
        conn: &mut C,
    ) -> redis::RedisResult<(Value, Option<i64>)> {
        let send = async |conn: &mut C| {
            let replies: Vec<Value> = pipe.query_async(conn).await?;
            let mut replies = replies.into_iter();
            let first = replies.next().unwrap_or(Value::Nil).extract_error()?;
            let acked =
                replies.next().and_then(|v| if let Value::Int(n) = v { Some(n) } else { None });
            Ok::<_, redis::RedisError>((first, acked))
        };
        match send(conn).await {
            // The server lost its script cache (a restart): load it, send once more. A
            // script the server did not know did not run, so nothing runs twice.
            Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                invocation.load_async(conn).await?;
                send(conn).await
            }
            other => other,
        }
    }

    /// `Ok` unless replicas were asked for and fewer acknowledged a change (`acked` is
    /// what a waiting [`run`](Self::run) returned).
    pub(crate) fn replicated(&self, acked: Option<i64>) -> Result<(), StoreError> {
        let Some(r) = self.replicas else { return Ok(()) };
        // No WAIT reply at all counts as none acknowledged.
        let acked = acked.unwrap_or(0);
        if acked >= i64::try_from(r.count).unwrap_or(i64::MAX) {
            return Ok(());
        }
        Err(RedisError::NotReplicated { acked, wanted: r.count, timeout_ms: ms(r.timeout) }.into())
    }

    async fn claim_once(&self, key: &ScopedKey, fp: &Fingerprint) -> Result<Claim<R>, StoreError> {
        let member = Keys::member(key);
        let quota = self.keys.quota(key.scope());
        let mut invocation = self.scripts.claim.prepare_invoke();
        invocation
            .key(self.keys.record(&member))
            .key(&self.keys.leases)
            .key(&self.keys.results)
            .key(&self.keys.tokens)
            .key(quota)
            .arg(&fp.as_bytes()[..])
            .arg(ms(self.config.lease()))
            .arg(self.config.capacity())
            .arg(self.config.scope_in_flight_max().unwrap_or(0))
            .arg(self.time())
            .arg(&member);
        let (value, acked) = self.run(&invocation, true).await?;
        let mut reply = Reply::new(value, "claim");
        match reply.text()?.as_str() {
            status @ ("acquired" | "recover") => {
                let token = FencingToken::new(u64::try_from(reply.int()?).unwrap_or(0));
                let lease = Lease::new(key.clone(), token, stored_at(reply.int()?));
                self.replicated(acked)?;
                Ok(if status == "recover" { Claim::Recover(lease) } else { Claim::Acquired(lease) })
            }
            "replay" => {
                let result = decode_result(key, &reply.bytes()?)?;
                // A replay, too, only of what the replicas hold: a result the primary has
                // alone may be gone after a failover, and the retry would run again.
                self.replicated(acked)?;
                Ok(Claim::Replay(result))
            }
            "inflight" => {
                let (until, now) = (reply.int()?, reply.int()?);
                let left = Duration::from_millis(u64::try_from(until - now).unwrap_or(0));
                Ok(Claim::InFlight { retry_after: left.min(self.config.lease()) })
            }
            "reused" => Err(StoreError::KeyReused { key: key.clone() }),
            "full" => Err(StoreError::StoreFull { capacity: self.config.capacity() }),
            "quota" => Err(StoreError::ScopeQuota {
                scope: key.scope().clone(),
                in_flight_max: self.config.scope_in_flight_max().unwrap_or(0),
            }),
            other => Err(RedisError::Reply(format!("claim answered {other:?}")).into()),
        }
    }

    /// `Ok` if the script changed the record (`1`), else the lease is lost.
    fn settled(&self, value: Value, acked: Option<i64>, lease: &Lease) -> Result<(), StoreError> {
        if Reply::new(value, "settle").int()? == 1 {
            return self.replicated(acked);
        }
        Err(StoreError::LeaseLost { key: lease.key().clone(), token: lease.token() })
    }

    async fn complete_now(&self, lease: &Lease, result: &R) -> Result<(), StoreError> {
        let bytes = encode_result(lease.key(), result, self.result_bytes_max)?;
        let member = Keys::member(lease.key());
        let mut invocation = self.scripts.complete.prepare_invoke();
        invocation
            .key(self.keys.record(&member))
            .key(&self.keys.leases)
            .key(&self.keys.results)
            .key(self.keys.quota(lease.key().scope()))
            .arg(lease.token().get())
            .arg(ms(self.config.result_ttl()))
            .arg(bytes)
            .arg(self.time())
            .arg(&member)
            .arg(if self.clock.is_none() { "1" } else { "0" });
        let (value, acked) = self.run(&invocation, true).await?;
        self.settled(value, acked, lease)
    }

    async fn release_now(&self, lease: &Lease) -> Result<(), StoreError> {
        let member = Keys::member(lease.key());
        let mut invocation = self.scripts.release.prepare_invoke();
        invocation
            .key(self.keys.record(&member))
            .key(&self.keys.leases)
            .key(self.keys.quota(lease.key().scope()))
            .arg(lease.token().get())
            .arg(&member);
        let (value, acked) = self.run(&invocation, true).await?;
        self.settled(value, acked, lease)
    }

    async fn renew_now(&self, lease: &Lease) -> Result<Lease, StoreError> {
        let member = Keys::member(lease.key());
        let mut invocation = self.scripts.renew.prepare_invoke();
        invocation
            .key(self.keys.record(&member))
            .key(&self.keys.leases)
            .arg(lease.token().get())
            .arg(ms(self.config.lease()))
            .arg(self.time())
            .arg(&member);
        let (value, acked) = self.run(&invocation, true).await?;
        if value == Value::Nil {
            return Err(StoreError::LeaseLost { key: lease.key().clone(), token: lease.token() });
        }
        let until = Reply::new(value, "renew").int()?;
        self.replicated(acked)?;
        Ok(Lease::new(lease.key().clone(), lease.token(), stored_at(until)))
    }

    async fn sweep_now(&self) -> Result<usize, StoreError> {
        let mut invocation = self.scripts.sweep.prepare_invoke();
        invocation
            .key(&self.keys.results)
            .arg(self.time())
            .arg(self.config.sweep_batch_max())
            .arg(self.keys.record_prefix());
        let (value, _) = self.run(&invocation, false).await?;
        Ok(usize::try_from(Reply::new(value, "sweep").int()?).unwrap_or(0))
    }

    async fn pending_now(&self, max: usize) -> Result<Vec<PendingClaim>, StoreError> {
        let mut invocation = self.scripts.pending.prepare_invoke();
        invocation
            .key(&self.keys.leases)
            .arg(self.time())
            .arg(max.min(PENDING_BATCH_MAX))
            .arg(self.keys.record_prefix());
        let (value, _) = self.run(&invocation, false).await?;
        let mut reply = Reply::new(value, "pending");
        let mut pending = Vec::new();
        while !reply.is_empty() {
            let key = Keys::parse_member(&reply.bytes()?)?;
            let (fingerprint, expired) = (reply.bytes()?, reply.int()?);
            let (scope, name) = (key.scope().as_str(), key.key().as_str());
            pending.push(pending_claim(scope, name, &fingerprint, expired)?);
        }
        Ok(pending)
    }

    /// The record of `key` as the `read` script returns it: the server's time and, if
    /// there is a record, its fields (with the result if `with_result`).
    pub(crate) async fn read(
        &self,
        key: &ScopedKey,
        with_result: bool,
    ) -> Result<(i64, Option<Stored>), StoreError> {
        let mut invocation = self.scripts.read.prepare_invoke();
        invocation.key(self.keys.record(&Keys::member(key))).arg(self.time()).arg(if with_result {
            "1"
        } else {
            "0"
        });
        let (value, _) = self.run(&invocation, false).await?;
        let mut reply = Reply::new(value, "read");
        let now = reply.int()?;
        if reply.is_empty() {
            return Ok((now, None));
        }
        let stored = Stored::read(&mut reply)?;
        let result = if reply.is_empty() { None } else { Some(reply.bytes()?) };
        Ok((now, Some(Stored { result, ..stored })))
    }

    pub(crate) fn keys(&self) -> &Keys {
        &self.keys
    }

    pub(crate) fn scripts(&self) -> &Scripts {
        &self.scripts
    }
}

/// A record's fields as a script returned them.
#[derive(Debug)]
pub(crate) struct Stored {
    pub(crate) fingerprint: Vec<u8>,
    pub(crate) finished: bool,
    pub(crate) lease_ms: i64,
    pub(crate) expires_ms: i64,
    pub(crate) result: Option<Vec<u8>>,
}

impl Stored {
    /// Reads fp, fin, lease, exp.
    pub(crate) fn read(reply: &mut Reply) -> Result<Self, RedisError> {
        Ok(Self {
            fingerprint: reply.bytes()?,
            finished: reply.text()? == "1",
            lease_ms: reply.int()?,
            expires_ms: reply.int()?,
            result: None,
        })
    }
}

/// Every call is one script on the shared connection, awaited without blocking a
/// thread; the trace events are the ones every store reports.
impl<R: Durable + Clone + Send + Sync> AsyncKeyStore<R> for RedisStore<R> {
    async fn claim(&self, key: &ScopedKey, fp: &Fingerprint) -> Result<Claim<R>, StoreError> {
        let claim = || self.claim_once(key, fp);
        let answer = claim_with_sweep_async(claim, || self.sweep_now()).await;
        idem_core::trace::claim(key, || answer)
    }

    async fn complete(&self, lease: &Lease, result: R) -> Result<(), StoreError> {
        let done = self.complete_now(lease, &result).await;
        idem_core::trace::settle("complete", lease, || done)
    }

    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        let done = self.release_now(lease).await;
        idem_core::trace::settle("release", lease, || done)
    }

    async fn renew(&self, lease: &Lease) -> Result<Lease, StoreError> {
        self.renew_now(lease).await
    }

    fn lease(&self) -> Duration {
        self.config.lease()
    }

    fn result_ttl(&self) -> Duration {
        self.config.result_ttl()
    }

    async fn sweep(&self) -> Result<usize, StoreError> {
        self.sweep_now().await
    }

    async fn pending(&self, max: usize) -> Result<Vec<PendingClaim>, StoreError> {
        self.pending_now(max).await
    }

    async fn lookup(&self, key: &ScopedKey, fp: &Fingerprint) -> Result<KeyState<R>, StoreError> {
        let (now, stored) = self.read(key, true).await?;
        let Some(stored) = stored else { return Ok(KeyState::Absent) };
        let row = StoredRow {
            same_fingerprint: stored.fingerprint == fp.as_bytes(),
            finished: stored.finished,
            lease_expires_ms: stored.lease_ms,
            expires_ms: stored.expires_ms,
            result: stored.result,
        };
        row_state(key, row, stored_at(now), self.config.lease())
    }

    fn result_bytes_max(&self) -> Option<usize> {
        Some(self.result_bytes_max)
    }
}
