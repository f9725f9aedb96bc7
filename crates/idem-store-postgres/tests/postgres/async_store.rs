//! The async store against a real server: the whole conformance suite through the async
//! contract, then what only a pool and a caller's transaction have. Every store is built
//! and awaited on the suite's runtime (`idem_testkit::runtime`), where its connections'
//! tasks run; the blocking admin client of the parent module is used only outside it.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use idem_core::{
    AsyncKeyAdmin, AsyncKeyStore, Claim, Clock, Fingerprint, KeyState, Lease, ManualClock,
    PendingClaim, ScopedKey, StoreConfig, StoreError, Timestamp,
};
use idem_store_postgres::deadpool_postgres::{Manager, Pool};
use idem_store_postgres::tokio_postgres::{self, NoTls};
use idem_store_postgres::{AsyncPgStore, PgError, PgStore};
use idem_testkit::runtime;

use super::{
    Namespace, forget_beside_a_renewal, fp, key, schema, url, wait_for_one_session_on_a_lock,
    with_the_migration_lock_held,
};

/// A store and its namespace, dropped together (the namespace after the store, outside
/// the runtime).
struct AsyncTestStore {
    store: AsyncPgStore<String>,
    _namespace: Namespace,
}

impl AsyncKeyStore<String> for AsyncTestStore {
    fn claim(
        &self,
        key: &ScopedKey,
        fp: &Fingerprint,
    ) -> impl Future<Output = Result<Claim<String>, StoreError>> + Send {
        self.store.claim(key, fp)
    }
    fn complete(
        &self,
        lease: &Lease,
        result: String,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        self.store.complete(lease, result)
    }
    fn release(&self, lease: &Lease) -> impl Future<Output = Result<(), StoreError>> + Send {
        self.store.release(lease)
    }
    fn renew(&self, lease: &Lease) -> impl Future<Output = Result<Lease, StoreError>> + Send {
        self.store.renew(lease)
    }
    fn lease(&self) -> Duration {
        self.store.lease()
    }

    fn result_ttl(&self) -> Duration {
        self.store.result_ttl()
    }
    fn sweep(&self) -> impl Future<Output = Result<usize, StoreError>> + Send {
        self.store.sweep()
    }
    fn pending(
        &self,
        max: usize,
    ) -> impl Future<Output = Result<Vec<PendingClaim>, StoreError>> + Send {
        self.store.pending(max)
    }
    fn lookup(
        &self,
        key: &ScopedKey,
        fp: &Fingerprint,
    ) -> impl Future<Output = Result<KeyState<String>, StoreError>> + Send {
        self.store.lookup(key, fp)
    }
    fn result_bytes_max(&self) -> Option<usize> {
        self.store.result_bytes_max()
    }
}

impl AsyncKeyAdmin for AsyncTestStore {
    fn inspect(
        &self,
        key: &ScopedKey,
    ) -> impl Future<Output = Result<Option<idem_core::KeyRecord>, StoreError>> + Send {
        self.store.inspect(key)
    }
    fn forget(
        &self,
        key: &ScopedKey,
        who: &str,
        why: &str,
    ) -> impl Future<Output = Result<idem_core::Forgotten, StoreError>> + Send {
        self.store.forget(key, who, why)
    }
}

fn async_postgres(config: StoreConfig, clock: Arc<ManualClock>) -> AsyncTestStore {
    let namespace = Namespace::new();
    let url = url();
    let connecting = AsyncPgStore::connect_with_clock(&url, &namespace.0, config, clock);
    let store = runtime().block_on(connecting).expect("connect");
    AsyncTestStore { store, _namespace: namespace }
}

idem_testkit::async_conformance_tests!(async_postgres);

/// Runs `f` to its end on the suite's runtime.
fn run<T>(f: impl Future<Output = T>) -> T {
    runtime().block_on(f)
}

/// How long one awaited step may take before the test calls it a hang.
const HANG: Duration = Duration::from_secs(30);

/// `f`, or a failure naming `what` if it does not end within [`HANG`].
async fn bounded<T>(what: &str, f: impl Future<Output = T>) -> T {
    match tokio::time::timeout(HANG, f).await {
        Ok(value) => value,
        Err(_) => panic!("{what} did not end within {HANG:?}"),
    }
}

async fn connect(namespace: &Namespace, config: StoreConfig) -> AsyncPgStore<String> {
    AsyncPgStore::connect(&url(), &namespace.0, config).await.expect("connect")
}

/// An admin connection on the runtime (the blocking client cannot run inside it).
async fn admin() -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(&url(), NoTls).await.expect("admin");
    tokio::spawn(connection);
    client
}

/// The `PgError` inside a storage error, or a failure naming what came instead.
fn pg_error<'a, T: std::fmt::Debug>(what: &str, result: &'a Result<T, StoreError>) -> &'a PgError {
    match result {
        Err(StoreError::Storage(error)) => match error.downcast_ref::<PgError>() {
            Some(error) => error,
            None => panic!("{what}: a storage error that is not a PgError: {error}"),
        },
        other => panic!("{what}: expected a storage error, got {other:?}"),
    }
}

/// A caller's own pool of `size` connections, with the statement timeout in the URL's
/// options if `timeout` is given.
fn callers_pool(size: usize, timeout: Option<&str>) -> Pool {
    let mut config: tokio_postgres::Config = url().parse().expect("the test URL");
    if let Some(timeout) = timeout {
        config.options(format!("-c statement_timeout={timeout}"));
    }
    let manager = Manager::new(config, NoTls);
    Pool::builder(manager).max_size(size).build().expect("a pool without timeouts")
}

/// Two stores on one namespace, each claiming the same 30 keys at once: every key has
/// exactly one owner (acquired or recovered), and the other claim sees it in flight.
#[test]
fn two_async_stores_racing_on_one_schema_give_one_owner() {
    let namespace = Namespace::new();
    let claims: Vec<Claim<String>> = run(async {
        let a = Arc::new(connect(&namespace, StoreConfig::default()).await);
        let b = Arc::new(connect(&namespace, StoreConfig::default()).await);
        let racer = |store: Arc<AsyncPgStore<String>>| {
            tokio::spawn(async move {
                let mut claims = Vec::new();
                for i in 0..30 {
                    let k = key(&format!("k{i}"));
                    claims.push(store.claim(&k, &fp()).await.expect("claim"));
                }
                claims
            })
        };
        let (ha, hb) = (racer(a), racer(b));
        let mut all = bounded("racer a", ha).await.expect("racer a");
        all.extend(bounded("racer b", hb).await.expect("racer b"));
        all
    });
    let owners = claims.iter().filter(|c| matches!(c, Claim::Acquired(_) | Claim::Recover(_)));
    let in_flight = claims.iter().filter(|c| matches!(c, Claim::InFlight { .. }));
    assert_eq!((owners.count(), in_flight.count()), (30, 30), "{claims:?}");
}

/// The sync and the async store keep the same rows: a claim made by one is in flight for
/// the other, and a completion made by one replays through the other.
#[test]
fn the_sync_and_the_async_store_share_a_namespace() {
    let namespace = Namespace::new();
    let sync: PgStore<String> =
        PgStore::connect(&url(), &namespace.0, StoreConfig::default()).expect("sync store");
    let async_store = run(connect(&namespace, StoreConfig::default()));
    let Claim::Acquired(lease) =
        idem_core::KeyStore::claim(&sync, &key("k"), &fp()).expect("claim")
    else {
        panic!("a fresh key")
    };
    run(async {
        let seen = async_store.claim(&key("k"), &fp()).await.expect("claim");
        assert!(matches!(seen, Claim::InFlight { .. }), "{seen:?}");
        async_store.complete(&lease, "done".into()).await.expect("the sync store's lease");
    });
    let replayed = idem_core::KeyStore::claim(&sync, &key("k"), &fp()).expect("replay");
    assert_eq!(replayed, Claim::Replay("done".into()));
}

/// A caller's pool runs the store and stays the caller's: its statements and the store's
/// share it, and the store's rows are the ones it wrote.
#[test]
fn a_store_runs_on_the_callers_pool() {
    let namespace = Namespace::new();
    let pool = callers_pool(2, Some("5000"));
    run(async {
        let store: AsyncPgStore<String> =
            AsyncPgStore::from_pool(pool.clone(), &namespace.0, StoreConfig::default())
                .await
                .expect("the caller's pool");
        let Claim::Acquired(lease) = store.claim(&key("k"), &fp()).await.expect("claim") else {
            panic!("a fresh key")
        };
        store.complete(&lease, "done".into()).await.expect("complete");
        let replay = store.claim(&key("k"), &fp()).await.expect("replay");
        assert_eq!(replay, Claim::Replay("done".into()));
        let own = pool.get().await.expect("the caller's own connection");
        let table = format!("SELECT count(*) FROM \"{}\".claims", namespace.0);
        let rows: i64 = own.query_one(&table, &[]).await.expect("the store's table").get(0);
        assert_eq!(rows, 1);
        assert_eq!(store.pool().status().max_size, 2, "the store runs on the caller's pool");
    });
}

/// A caller's pool whose connections run statements without a timeout, or commit without
/// waiting for the disk, is refused, naming the setting; a bad namespace name is refused
/// before anything is sent.
#[test]
fn a_callers_pool_without_a_statement_timeout_or_a_bad_name_is_refused() {
    let namespace = Namespace::new();
    run(async {
        let unbounded = callers_pool(1, None);
        let refused =
            AsyncPgStore::<String>::from_pool(unbounded, &namespace.0, StoreConfig::default())
                .await;
        match pg_error("no statement timeout", &refused) {
            PgError::Setting(setting) => assert_eq!(setting.setting, "statement_timeout"),
            other => panic!("expected the setting refused, got {other:?}"),
        }
        let mut asynchronous: tokio_postgres::Config = url().parse().expect("the test URL");
        asynchronous.options("-c statement_timeout=5000 -c synchronous_commit=off");
        let manager = Manager::new(asynchronous, NoTls);
        let pool = Pool::builder(manager).max_size(1).build().expect("a pool");
        let refused =
            AsyncPgStore::<String>::from_pool(pool, &namespace.0, StoreConfig::default()).await;
        match pg_error("commits acknowledged before the disk", &refused) {
            PgError::Setting(setting) => assert_eq!(setting.setting, "synchronous_commit"),
            other => panic!("expected the setting refused, got {other:?}"),
        }
        let bounded_pool = callers_pool(1, Some("5000"));
        let name = "Robert'); DROP TABLE x;--";
        let refused =
            AsyncPgStore::<String>::from_pool(bounded_pool, name, StoreConfig::default()).await;
        assert!(matches!(pg_error("a bad name", &refused), PgError::SchemaName { .. }));
    });
}

/// The namespace's order table, for the effect a handler writes beside its completion.
async fn orders_table(namespace: &Namespace) -> String {
    let table = format!("\"{}\".orders", namespace.0);
    let create = format!("CREATE TABLE {table} (id TEXT PRIMARY KEY)");
    admin().await.batch_execute(&create).await.expect("the orders table");
    table
}

async fn orders(table: &str) -> i64 {
    let count = format!("SELECT count(*) FROM {table}");
    admin().await.query_one(&count, &[]).await.expect("count orders").get(0)
}

async fn acquire(store: &AsyncPgStore<String>, name: &str) -> Lease {
    match store.claim(&key(name), &fp()).await.expect("claim") {
        Claim::Acquired(lease) => lease,
        other => panic!("{name}: expected acquired, got {other:?}"),
    }
}

/// Committed: the order and the stored answer appear together, and neither before; a
/// duplicate claim made meanwhile waits on the claim's row (seen by the server) and
/// replays the answer once it commits.
#[test]
fn complete_in_commits_the_effect_and_the_answer_together() {
    let namespace = Namespace::new();
    let store = Arc::new(run(connect(&namespace, StoreConfig::default())));
    let table = run(orders_table(&namespace));
    let lease = run(acquire(&store, "order-1"));
    let mut client = run(store.pool().get()).expect("a connection");
    let tx = run(client.transaction()).expect("begin");
    let insert = format!("INSERT INTO {table} (id) VALUES ('order-1')");
    run(tx.execute(&insert, &[])).expect("the order");
    run(store.complete_in(&tx, &lease, "placed".into())).expect("complete in tx");
    let before = run(store.lookup(&key("order-1"), &fp())).expect("lookup");
    assert!(matches!(before, KeyState::InFlight { .. }), "uncommitted: {before:?}");
    assert_eq!(run(orders(&table)), 0, "uncommitted");
    let duplicate = Arc::clone(&store);
    let waiting = runtime().spawn(async move { duplicate.claim(&key("order-1"), &fp()).await });
    wait_for_one_session_on_a_lock(&namespace, "the duplicate to wait on the row");
    run(tx.commit()).expect("commit");
    let duplicate = run(bounded("the duplicate claim", waiting)).expect("the task");
    assert_eq!(duplicate.expect("claim"), Claim::Replay("placed".into()));
    assert_eq!(run(orders(&table)), 1);
}

/// A forget that meets a renewal in flight (another session holds the pending claim's row,
/// renewing it) waits for the row, then judges the renewed lease: live, so it refuses, and
/// the renewed holder's record stands. A forget that judged the row as it was before the
/// renewal committed would delete a live holder's claim.
#[test]
fn a_forget_waits_for_a_renewal_in_flight_and_sees_it() {
    use idem_core::{AsyncKeyAdmin, Forgotten};
    let namespace = Namespace::new();
    let clock = Arc::new(ManualClock::new(Timestamp::from_millis(1_700_000_000_000)));
    let config = StoreConfig::default();
    let server = url();
    let connecting = AsyncPgStore::connect_with_clock(&server, &namespace.0, config, clock.clone());
    let store = Arc::new(run(connecting).expect("connect"));
    let _lease = run(acquire(&store, "renewed"));
    clock.advance(config.lease());
    let operator = Arc::clone(&store);
    let forgotten = forget_beside_a_renewal(&namespace, "renewed", move || {
        let forgetting = runtime()
            .spawn(async move { operator.forget(&key("renewed"), "alice", "stuck").await });
        move || run(bounded("the forget", forgetting)).expect("the task").expect("forget")
    });
    assert!(matches!(forgotten, Forgotten::HolderLive { .. }), "{forgotten:?}");
    let state = run(store.lookup(&key("renewed"), &fp())).expect("lookup");
    assert!(matches!(state, KeyState::InFlight { .. }), "the renewed claim stands: {state:?}");
}

/// Rolled back, or the connection lost before the commit (a crash): neither the order nor
/// the answer stands, the claim stays in flight, and its holder can still complete it.
#[test]
fn complete_in_rolled_back_or_cut_off_leaves_neither() {
    let namespace = Namespace::new();
    run(async {
        let store = connect(&namespace, StoreConfig::default()).await;
        let table = orders_table(&namespace).await;
        for (name, crash) in [("rolled-back", false), ("cut-off", true)] {
            let lease = acquire(&store, name).await;
            let mut client = store.pool().get().await.expect("a connection");
            let tx = client.transaction().await.expect("begin");
            let insert = format!("INSERT INTO {table} (id) VALUES ('{name}')");
            tx.execute(&insert, &[]).await.expect("the order");
            store.complete_in(&tx, &lease, "placed".into()).await.expect("complete in tx");
            if crash {
                let pid: i32 =
                    tx.query_one("SELECT pg_backend_pid()", &[]).await.expect("pid").get(0);
                let kill = admin().await;
                kill.execute("SELECT pg_terminate_backend($1)", &[&pid]).await.expect("kill");
                assert!(tx.commit().await.is_err(), "{name}: a commit on a dead connection");
            } else {
                tx.rollback().await.expect("rollback");
            }
            assert_eq!(orders(&table).await, 0, "{name}");
            let state = store.lookup(&key(name), &fp()).await.expect("lookup");
            assert!(matches!(state, KeyState::InFlight { .. }), "{name}: {state:?}");
            store.complete(&lease, "placed".into()).await.expect("the lease still holds");
        }
    });
}

/// A stale lease (its key recovered by a later claim) completes nothing in the caller's
/// transaction: `LeaseLost`, the caller rolls back, and the recovering holder completes.
#[test]
fn complete_in_with_a_stale_lease_is_refused() {
    let namespace = Namespace::new();
    let clock = Arc::new(ManualClock::new(Timestamp::from_millis(1_700_000_000_000)));
    let config = StoreConfig::default();
    run(async {
        let store: AsyncPgStore<String> =
            AsyncPgStore::connect_with_clock(&url(), &namespace.0, config, clock.clone())
                .await
                .expect("connect");
        let table = orders_table(&namespace).await;
        let stale = acquire(&store, "order-1").await;
        clock.advance(config.lease());
        let Claim::Recover(fresh) = store.claim(&key("order-1"), &fp()).await.expect("claim")
        else {
            panic!("the lease ran out: recovered")
        };
        // A plain tokio-postgres client's transaction, not the store's pool's.
        let (mut client, connection) = tokio_postgres::connect(&url(), NoTls).await.expect("c");
        tokio::spawn(connection);
        let tx = client.transaction().await.expect("begin");
        let insert = format!("INSERT INTO {table} (id) VALUES ('order-1')");
        tx.execute(&insert, &[]).await.expect("the order");
        match store.complete_in(&tx, &stale, "stale".into()).await {
            Err(StoreError::LeaseLost { token, .. }) => assert_eq!(token, stale.token()),
            other => panic!("expected LeaseLost, got {other:?}"),
        }
        tx.rollback().await.expect("rollback");
        assert_eq!(orders(&table).await, 0);
        store.complete(&fresh, "fresh".into()).await.expect("the recovering holder completes");
        let replay = store.claim(&key("order-1"), &fp()).await.expect("replay");
        assert_eq!(replay, Claim::Replay("fresh".into()));
    });
}

/// The server closes every connection of the store (`pg_terminate_backend`, as a
/// restart or an administrator does): each later call answers (success, or a typed
/// error), never hangs; at most one call per closed connection fails; the pool's new
/// connections have the statement timeout; the claim made before is still held.
#[test]
fn the_pool_replaces_connections_the_server_closed() {
    let namespace = Namespace::new();
    run(async {
        let store = connect(&namespace, StoreConfig::default()).await;
        let held: Vec<_> = bounded("three connections", async {
            let mut held = Vec::new();
            for _ in 0..3 {
                held.push(store.pool().get().await.expect("a connection"));
            }
            held
        })
        .await;
        drop(held);
        let _before = acquire(&store, "before").await;
        let terminate = "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                         WHERE application_name = $1";
        let name = format!("idem:{}", namespace.0);
        let terminated = admin().await.query(terminate, &[&name]).await.expect("terminate").len();
        assert!(terminated >= 3, "the store's connections, by name: {terminated}");
        let mut failed = 0;
        for i in 0..2 * idem_store_postgres::POOL_SIZE_DEFAULT {
            let (k, request) = (key(&format!("after-{i}")), fp());
            let claim = store.claim(&k, &request);
            let answer = bounded("a claim after the server closed the connections", claim).await;
            if answer.is_err() {
                pg_error("a claim on a closed connection", &answer);
                failed += 1;
            }
        }
        assert!(failed <= terminated, "{failed} calls failed for {terminated} connections");
        let answer = store.claim(&key("last"), &fp()).await;
        assert!(matches!(answer, Ok(Claim::Acquired(_))), "{answer:?}");
        let client = store.pool().get().await.expect("a connection");
        let timeout: String =
            client.query_one("SHOW statement_timeout", &[]).await.expect("show").get(0);
        assert_eq!(timeout, "5s", "a replacement connection has the statement timeout");
        let before = store.claim(&key("before"), &fp()).await.expect("claim");
        assert!(matches!(before, Claim::InFlight { .. }), "{before:?}");
    });
}

/// Every connection of the pool is held: a call waits the store's bound for one, then
/// fails with `Busy` naming the wait, having done nothing; a connection given back
/// serves the next call.
#[test]
fn a_wait_for_a_free_connection_is_bounded() {
    let namespace = Namespace::new();
    let pool = callers_pool(1, Some("5000"));
    let wait = Duration::from_millis(200);
    run(async {
        let store: AsyncPgStore<String> =
            AsyncPgStore::from_pool(pool.clone(), &namespace.0, StoreConfig::default())
                .await
                .expect("the caller's pool")
                .with_pool_wait_max(wait);
        let held = pool.get().await.expect("the pool's one connection");
        let refused = bounded("a claim with every connection held", async {
            store.claim(&key("k"), &fp()).await
        })
        .await;
        match pg_error("every connection held", &refused) {
            PgError::Busy { waited } => assert_eq!(*waited, wait),
            other => panic!("expected Busy, got {other:?}"),
        }
        assert!(pg_error("", &refused).to_string().contains("200ms"), "the wait is named");
        drop(held);
        let answer = store.claim(&key("k"), &fp()).await;
        assert!(matches!(answer, Ok(Claim::Acquired(_))), "nothing was done: {answer:?}");
    });
}

/// A statement blocked on a lock another session holds gives up after the store's
/// statement timeout (5 s), with the server's `query_canceled`: a call never waits for
/// ever on the server.
#[test]
fn a_blocked_statement_gives_up_after_the_statement_timeout() {
    let namespace = Namespace::new();
    let store = run(connect(&namespace, StoreConfig::default()));
    let mut admin = postgres::Client::connect(&url(), postgres::NoTls).expect("admin");
    let mut locker = admin.transaction().expect("begin");
    let lock = format!("LOCK TABLE \"{}\".claims IN ACCESS EXCLUSIVE MODE", namespace.0);
    locker.batch_execute(&lock).expect("the table locked");
    let blocked = run(bounded("a claim on a locked table", store.claim(&key("k"), &fp())));
    match pg_error("a blocked claim", &blocked) {
        PgError::Postgres(error) => {
            let code = error.code().map(|code| code.code());
            assert_eq!(code, Some("57014"), "query_canceled: {error}");
        }
        other => panic!("expected the server's timeout, got {other:?}"),
    }
    locker.rollback().expect("unlock");
    assert!(matches!(run(store.claim(&key("k"), &fp())), Ok(Claim::Acquired(_))));
}

/// The async store's migration takes the same advisory lock (4242) as every release:
/// while another session holds it, `connect` waits on it; released, it connects.
#[test]
fn an_async_migration_waits_for_the_advisory_lock() {
    let namespace = Namespace::new();
    let name = format!("idem_async_lock_test_{}", std::process::id());
    let schema = namespace.0.clone();
    let connecting = with_the_migration_lock_held(&name, |store_url| {
        runtime().spawn(async move {
            let config = StoreConfig::default();
            AsyncPgStore::<String>::connect(&store_url, &schema, config).await.map(drop)
        })
    });
    let connected = run(bounded("connect after the lock", connecting)).expect("the task");
    connected.expect("connects once the lock is free");
}

/// A lease ends 30 s after the server's now, on a server whose clock runs days ahead of
/// this machine's (`IDEM_PG_SKEWED_URL`): the async store reads no client clock.
#[test]
fn an_async_stores_deadlines_follow_a_skewed_servers_clock() {
    let skewed = std::env::var("IDEM_PG_SKEWED_URL").expect(
        "IDEM_PG_SKEWED_URL must name a server with a skewed clock (.ci/postgres-skewed.sh)",
    );
    let mut admin = postgres::Client::connect(&skewed, postgres::NoTls).expect("admin");
    let server_now = "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint";
    let before: i64 = admin.query_one(server_now, &[]).expect("now").get(0);
    let local = i64::try_from(idem_core::SystemClock.now().as_millis()).expect("in range");
    assert!(before - local > 24 * 3600 * 1000, "the server runs a day or more ahead");
    let config = StoreConfig::builder().lease(Duration::from_secs(30)).build().expect("valid");
    let name = schema();
    run(async {
        let store: AsyncPgStore<String> =
            AsyncPgStore::connect(&skewed, &name, config).await.expect("store");
        let Claim::Acquired(lease) = store.claim(&key("k"), &fp()).await.expect("claim") else {
            panic!("a fresh key")
        };
        let expires = i64::try_from(lease.expires_at().as_millis()).expect("in range");
        assert!(
            (before + 29_000..=before + 32_000).contains(&expires),
            "the lease ends 30 s after the server's now ({before}), not the client's \
             ({local}): {expires}"
        );
        store.complete(&lease, "done".into()).await.expect("complete");
        let replay = store.claim(&key("k"), &fp()).await.expect("replay");
        assert_eq!(replay, Claim::Replay("done".into()));
        store.drop_schema().await.expect("drop");
    });
}

mod tls {
    //! The async store over TLS, against the local server's self-signed certificate.

    use idem_core::{AsyncKeyStore, StoreConfig};
    use idem_store_postgres::AsyncPgStore;

    use super::super::tls::{
        refused_as_untrusted, require_tls, trusting_nothing, trusting_the_test_server,
    };
    use super::{Namespace, admin, fp, key, run};

    /// Every connection the pool opens is encrypted, and the store works over them.
    #[test]
    fn an_async_store_over_tls_encrypts_every_connection() {
        let namespace = Namespace::new();
        let (all, encrypted): (i64, i64) = run(async {
            let tls = trusting_the_test_server();
            let store: AsyncPgStore<String> = AsyncPgStore::connect_with_tls(
                &require_tls(),
                &namespace.0,
                Default::default(),
                tls,
            )
            .await
            .expect("a TLS connection");
            let _held = store.claim(&key("k"), &fp()).await.expect("claim");
            let count = "SELECT count(*), count(*) FILTER (WHERE ssl) FROM pg_stat_ssl
                         JOIN pg_stat_activity USING (pid) WHERE application_name = $1";
            let name = format!("idem:{}", namespace.0);
            let row = admin().await.query_one(count, &[&name]).await.expect("pg_stat_ssl");
            (row.get(0), row.get(1))
        });
        assert!(all >= 1, "the store's connections are seen by name");
        assert_eq!(encrypted, all, "every connection of the store is encrypted");
    }

    /// Certificates are verified: a configuration that trusts no root is refused.
    #[test]
    fn an_async_store_refuses_an_untrusted_server_certificate() {
        let refused = run(AsyncPgStore::<String>::connect_with_tls(
            &require_tls(),
            "idem_x",
            StoreConfig::default(),
            trusting_nothing(),
        ));
        refused_as_untrusted(refused);
    }
}

/// An unreachable server and a wrong password are typed errors with the reason.
#[test]
fn an_async_connect_to_an_unreachable_server_or_a_wrong_password_is_typed() {
    let unreachable = "postgres://idem:idem@127.0.0.1:1/idem";
    let refused = run(AsyncPgStore::<String>::connect(unreachable, "idem_x", Default::default()));
    assert!(matches!(pg_error("unreachable", &refused), PgError::Postgres(_)));
    let wrong = url().replacen("idem:idem@", "idem:wrong-password@", 1);
    let refused = run(AsyncPgStore::<String>::connect(&wrong, "idem_x", Default::default()));
    let text = pg_error("a wrong password", &refused).to_string();
    assert!(text.contains("28P01"), "the server's SQLSTATE: {text}");
}

/// A result over the store's limit is refused before anything is written: the claim
/// stays in flight.
#[test]
fn a_result_over_the_async_stores_limit_is_refused() {
    let namespace = Namespace::new();
    run(async {
        let store = connect(&namespace, StoreConfig::default()).await.with_result_bytes_max(64);
        assert_eq!(store.result_bytes_max(), Some(64));
        let lease = acquire(&store, "k").await;
        let refused = store.complete(&lease, "x".repeat(1000)).await;
        let too_large = match &refused {
            Err(StoreError::Storage(error)) => error.downcast_ref::<idem_durable::CodecError>(),
            _ => None,
        };
        assert!(
            matches!(too_large, Some(idem_durable::CodecError::TooLarge { .. })),
            "{refused:?}"
        );
        let state = store.lookup(&key("k"), &fp()).await.expect("lookup");
        assert!(matches!(state, KeyState::InFlight { .. }), "{state:?}");
    });
}

/// A claim that waits on the key's row lock (the holder's `complete_in` transaction holds
/// it) past the lease: when the holder rolls back, the claim takes the key over with a
/// whole lease from when it got the row, so the key is in flight, not already run out
/// (a lease counted from when the claim began waiting would be born expired, and the
/// next claim would recover it at once: two holders).
#[test]
fn a_claim_that_waited_on_the_row_lock_gets_a_whole_lease() {
    let namespace = Namespace::new();
    run(async {
        let config = StoreConfig::builder().lease(Duration::from_secs(1)).build().expect("ok");
        let store = Arc::new(connect(&namespace, config).await);
        let Claim::Acquired(held) = store.claim(&key("k"), &fp()).await.expect("claim") else {
            panic!("an absent key is acquired")
        };
        let mut client = store.pool().get().await.expect("a connection");
        let tx = client.transaction().await.expect("a transaction");
        store.complete_in(&tx, &held, "A".into()).await.expect("written, not committed");
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let waiter = store.clone();
        let waiting = tokio::spawn(async move { waiter.claim(&key("k"), &fp()).await });
        tokio::time::sleep(Duration::from_millis(1500)).await;
        tx.rollback().await.expect("rolled back");
        let taken = bounded("the waiter", waiting).await.expect("task").expect("claim");
        assert!(matches!(taken, Claim::Recover(_)), "the waiter takes the key over: {taken:?}");
        let state = store.lookup(&key("k"), &fp()).await.expect("lookup");
        assert!(matches!(state, KeyState::InFlight { .. }), "a whole lease: {state:?}");
    });
}

/// Through pgbouncer in transaction pooling mode (`IDEM_PGBOUNCER_URL`, from
/// `.ci/pgbouncer.sh`), as many deployments run it: the store keeps session state (named
/// prepared statements, its statement timeout) that such a pooler hands from client to
/// client, so both stores refuse it at connect, saying so, rather than failing later on
/// "prepared statement already exists".
///
/// The same pooler told to ignore startup options (`IDEM_PGBOUNCER_IGNORING_URL`, from
/// `.ci/pgbouncer-ignoring.sh`) accepts the connections and drops the timeout they ask
/// for: both stores read it back at connect, and refuse.
#[test]
fn a_transaction_pooler_in_front_is_refused_at_connect() {
    for var in ["IDEM_PGBOUNCER_URL", "IDEM_PGBOUNCER_IGNORING_URL"] {
        let url = std::env::var(var)
            .unwrap_or_else(|_| panic!("{var} must name pgbouncer (see .ci/pgbouncer*.sh)"));
        pooler_refused(&url);
    }
}

fn pooler_refused(url: &str) {
    let config = StoreConfig::default();
    let blocking = PgStore::<String>::connect(url, "idem_pooled", config);
    let threaded = run(AsyncPgStore::<String>::connect(url, "idem_pooled", config));
    for (what, error) in
        [("blocking", pg_error("blocking", &blocking)), ("async", pg_error("async", &threaded))]
    {
        assert!(matches!(error, PgError::Pooler(_)), "{what}: {error:?}");
        assert!(error.to_string().contains("connect to PostgreSQL directly"), "{what}: {error}");
    }
}

/// As the blocking store's: a fresh claim that waited on the record count for longer than
/// its lease is handed a whole lease, renewed before its commit.
#[test]
fn an_async_fresh_claim_that_waited_behind_another_gets_a_whole_lease() {
    let namespace = Namespace::new();
    let config = StoreConfig::builder().lease(Duration::from_secs(1)).build().expect("valid");
    let store = Arc::new(run(connect(&namespace, config)));
    let mut admin = postgres::Client::connect(&url(), postgres::NoTls).expect("admin");
    let mut stalled = admin.transaction().expect("a transaction");
    let count = format!("UPDATE \"{}\".meta SET records = records WHERE id = 1", namespace.0);
    assert_eq!(stalled.execute(&count, &[]).expect("the count held"), 1);
    let waiter = store.clone();
    let claiming = runtime().spawn(async move { waiter.claim(&key("fresh"), &fp()).await });
    wait_for_one_session_on_a_lock(&namespace, "the claim waiting on the record count");
    let waited_from = super::server_ms();
    idem_testkit::wait_until("1.5 s on the server's clock", Duration::from_secs(10), || {
        super::server_ms() >= waited_from + 1_500
    });
    stalled.commit().expect("committed");
    let claim = run(bounded("the claim", claiming)).expect("task").expect("claimed");
    assert!(matches!(claim, Claim::Acquired(_)), "{claim:?}");
    let state = run(store.lookup(&key("fresh"), &fp())).expect("lookup");
    assert!(matches!(state, KeyState::InFlight { .. }), "a whole lease: {state:?}");
    run(async { drop(store) });
}

/// With no wait for a free connection (`with_pool_wait_max(Duration::ZERO)`), a pool whose
/// connections the server closed opens new ones: the wait bounds a wait for others'
/// connections, not the opening of one.
#[test]
fn a_store_that_never_waits_for_a_connection_still_opens_one() {
    let namespace = Namespace::new();
    let store = run(connect(&namespace, StoreConfig::default()));
    let store = store.with_pool_wait_max(Duration::ZERO);
    assert!(run(store.lookup(&key("k"), &fp())).is_ok(), "a connection free at once");
    let mut admin = postgres::Client::connect(&url(), postgres::NoTls).expect("admin");
    let terminate =
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1";
    let name = format!("idem:{}", namespace.0);
    assert!(!admin.query(terminate, &[&name]).expect("terminated").is_empty());
    // The first calls may meet the closed connection (it may have taken effect: not
    // retried); then a new one is opened, never refused for a wait.
    let answers: Vec<bool> = (0..5).map(|_| run(store.lookup(&key("k"), &fp())).is_ok()).collect();
    assert!(answers[2..].iter().all(|ok| *ok), "a new connection opened: {answers:?}");
    run(async { drop(store) });
}

/// As the blocking store's: a takeover in a scope with a quota counts the scope's claims
/// in flight only under the record count's lock, after another takeover committed.
#[test]
fn two_async_takeovers_in_one_scope_are_counted_against_its_quota_in_turn() {
    let namespace = Namespace::new();
    let clock = Arc::new(ManualClock::new(Timestamp::from_millis(1_000_000)));
    let ttl = Duration::from_secs(60);
    let config =
        StoreConfig::builder().result_ttl(ttl).scope_in_flight_max(1).build().expect("valid");
    let server = url();
    let store =
        AsyncPgStore::<String>::connect_with_clock(&server, &namespace.0, config, clock.clone());
    let store = Arc::new(run(store).expect("connect"));
    for name in ["k1", "k2"] {
        let Claim::Acquired(lease) = run(store.claim(&key(name), &fp())).expect("claim") else {
            panic!("a fresh key")
        };
        run(store.complete(&lease, name.into())).expect("complete");
    }
    clock.advance(ttl * 2);
    let mut admin = postgres::Client::connect(&url(), postgres::NoTls).expect("admin");
    let mut first = admin.transaction().expect("a transaction");
    super::take_over_by_hand(&mut first, &namespace.0, "k2");
    let lock = format!("SELECT 1 FROM \"{}\".meta WHERE id = 1 FOR UPDATE", namespace.0);
    first.query_one(&lock, &[]).expect("the count locked");
    let waiter = store.clone();
    let second = runtime().spawn(async move { waiter.claim(&key("k1"), &fp()).await });
    wait_for_one_session_on_a_lock(&namespace, "the second takeover's count waiting");
    first.commit().expect("committed");
    let refused = run(bounded("the second claim", second)).expect("task");
    assert!(matches!(refused, Err(StoreError::ScopeQuota { .. })), "{refused:?}");
    run(async { drop(store) });
}
