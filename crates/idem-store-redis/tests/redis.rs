//! The Redis store against real servers: the async conformance suite on the shared server
//! (`IDEM_REDIS_URL`, started by `.ci/redis.sh`), then what only Redis has, each on a
//! `redis-server` this test starts itself (found on `PATH`, or `IDEM_REDIS_SERVER`): the
//! configurations refused at connect, a `kill -9` of a server with `appendfsync always`,
//! and `WAIT` on a replica; and leases claimed by a client whose clock is two days ahead
//! (the `claim_once` client under libfaketime, which Redis itself does not run under). Without a
//! server these tests fail: they never pass without one.

use std::future::Future;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use idem_core::{
    AsyncKeyAdmin, AsyncKeyStore, Claim, Fingerprint, Forgotten, KeyRecord, KeyState, Lease,
    ManualClock, PendingClaim, ScopedKey, StoreConfig, StoreError,
};
use idem_store_redis::{REPLICA_WAITS_MAX, RedisError, RedisOptions, RedisStore};
use idem_testkit::{runtime, wait_until};

fn url() -> String {
    std::env::var("IDEM_REDIS_URL")
        .expect("IDEM_REDIS_URL must name a Redis server (see .ci/redis.sh)")
}

/// A fresh namespace per store, so tests (and test runs) never share keys.
fn prefix() -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    format!("idem_test_{}_{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

fn run<T>(f: impl Future<Output = T>) -> T {
    runtime().block_on(f)
}

/// A store whose namespace is deleted when the test is done with it.
struct TestStore(RedisStore<String>);

impl Drop for TestStore {
    fn drop(&mut self) {
        let _ = run(self.0.drop_namespace());
    }
}

impl AsyncKeyStore<String> for TestStore {
    fn claim(
        &self,
        key: &ScopedKey,
        fp: &Fingerprint,
    ) -> impl Future<Output = Result<Claim<String>, StoreError>> + Send {
        self.0.claim(key, fp)
    }
    fn complete(
        &self,
        lease: &Lease,
        result: String,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        self.0.complete(lease, result)
    }
    fn release(&self, lease: &Lease) -> impl Future<Output = Result<(), StoreError>> + Send {
        self.0.release(lease)
    }
    fn renew(&self, lease: &Lease) -> impl Future<Output = Result<Lease, StoreError>> + Send {
        self.0.renew(lease)
    }
    fn lease(&self) -> Duration {
        self.0.lease()
    }
    fn result_ttl(&self) -> Duration {
        self.0.result_ttl()
    }
    fn sweep(&self) -> impl Future<Output = Result<usize, StoreError>> + Send {
        self.0.sweep()
    }
    fn pending(
        &self,
        max: usize,
    ) -> impl Future<Output = Result<Vec<PendingClaim>, StoreError>> + Send {
        self.0.pending(max)
    }
    fn lookup(
        &self,
        key: &ScopedKey,
        fp: &Fingerprint,
    ) -> impl Future<Output = Result<KeyState<String>, StoreError>> + Send {
        self.0.lookup(key, fp)
    }
    fn result_bytes_max(&self) -> Option<usize> {
        self.0.result_bytes_max()
    }
}

impl AsyncKeyAdmin for TestStore {
    fn inspect(
        &self,
        key: &ScopedKey,
    ) -> impl Future<Output = Result<Option<KeyRecord>, StoreError>> + Send {
        self.0.inspect(key)
    }
    fn forget(
        &self,
        key: &ScopedKey,
        who: &str,
        why: &str,
    ) -> impl Future<Output = Result<Forgotten, StoreError>> + Send {
        self.0.forget(key, who, why)
    }
}

fn on_shared_server(config: StoreConfig, clock: Arc<ManualClock>) -> TestStore {
    let options = RedisOptions::new().clock(clock);
    let (url, prefix) = (url(), prefix());
    TestStore(run(RedisStore::connect_with(&url, &prefix, config, options)).expect("connect"))
}

idem_testkit::async_conformance_tests!(on_shared_server);

fn key(name: &str) -> ScopedKey {
    ScopedKey::parse("shop", name).expect("a valid key")
}

fn fp() -> Fingerprint {
    Fingerprint::builder("redis-test").u64("n", 1).finish()
}

/// A `redis-server` this test runs, on a free loopback port, in its own directory;
/// killed (`SIGKILL`) when dropped.
struct Server {
    child: Child,
    port: u16,
    dir: PathBuf,
    args: Vec<String>,
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("its address").port()
}

fn spawn(port: u16, dir: &PathBuf, args: &[String]) -> Child {
    let binary = std::env::var("IDEM_REDIS_SERVER").unwrap_or_else(|_| "redis-server".into());
    let mut command = Command::new(&binary);
    command
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", ""])
        .arg("--dir")
        .arg(dir)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    command.spawn().unwrap_or_else(|e| panic!("cannot start {binary}: {e}"))
}

fn faketime_library() -> Option<String> {
    let dirs = std::fs::read_dir("/usr/lib").ok()?;
    dirs.flatten()
        .map(|d| d.path().join("faketime/libfaketime.so.1"))
        .find(|p| p.exists())
        .map(|p| p.display().to_string())
}

impl Server {
    fn start(tag: &str, args: &[&str]) -> Self {
        let dir = idem_testkit::scratch_dir(tag);
        let args: Vec<String> = args.iter().map(|a| (*a).to_string()).collect();
        let port = free_port();
        let child = spawn(port, &dir, &args);
        let server = Self { child, port, dir, args };
        server.wait_until_up();
        server
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    fn wait_until_up(&self) {
        let client = redis::Client::open(self.url()).expect("a valid URL");
        let up = || {
            let ping = |mut conn: redis::Connection| redis::cmd("PING").query::<String>(&mut conn);
            client.get_connection().is_ok_and(|conn| ping(conn).is_ok())
        };
        wait_until("redis-server to answer", Duration::from_secs(20), up);
    }

    /// Kills the server (`SIGKILL`: no shutdown, no final write) and starts it again on
    /// the same port and directory.
    fn kill_and_restart(&mut self) {
        self.kill();
        self.child = spawn(self.port, &self.dir, &self.args);
        self.wait_until_up();
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    fn command(&self, args: &[&str]) -> redis::Value {
        let client = redis::Client::open(self.url()).expect("a valid URL");
        let mut conn = client.get_connection().expect("a connection");
        let mut cmd = redis::cmd(args[0]);
        for arg in &args[1..] {
            cmd.arg(*arg);
        }
        cmd.query(&mut conn).expect("the command")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

fn config() -> StoreConfig {
    StoreConfig::default()
}

fn refusal(server: &Server, options: RedisOptions) -> String {
    let url = server.url();
    match run(RedisStore::<String>::connect_with(&url, "p", config(), options)) {
        Ok(_) => panic!("connected to a server it must refuse"),
        Err(StoreError::Storage(why)) => why.to_string(),
        Err(other) => panic!("expected a storage error, got {other:?}"),
    }
}

#[test]
fn a_server_that_can_evict_keys_is_refused_naming_the_policy() {
    for policy in ["allkeys-lru", "volatile-lru", "volatile-ttl", "allkeys-random"] {
        let server = Server::start("redis-evicting", &["--maxmemory-policy", policy]);
        let why = refusal(&server, RedisOptions::new());
        assert!(why.contains(policy) && why.contains("maxmemory-policy noeviction"), "{why}");
    }
}

#[test]
fn a_server_without_an_append_only_file_is_refused_unless_the_caller_accepts_it() {
    let server = Server::start("redis-forgetful", &["--appendonly", "no"]);
    let why = refusal(&server, RedisOptions::new());
    assert!(why.contains("appendonly no") && why.contains("restart_may_forget"), "{why}");
    let accepted = RedisOptions::new().restart_may_forget();
    let store = run(RedisStore::<String>::connect_with(&server.url(), "p", config(), accepted));
    let store = store.expect("accepted by the caller");
    assert_eq!(store.server().appendonly, Some(false));
}

/// Runs the `claim_once` client (a binary of this crate, built with this test) under
/// libfaketime, its clock two days ahead of this machine's and of the server's; returns
/// the deadline it printed.
fn claim_from_a_client_ahead(url: &str, prefix: &str, key: &str, clock: &str) -> u64 {
    let example = std::path::Path::new(env!("CARGO_BIN_EXE_claim_once"));
    let lib = faketime_library().expect("libfaketime (Debian's faketime package)");
    let out = Command::new(example)
        .args([url, prefix, key, clock])
        .env("LD_PRELOAD", lib)
        .env("FAKETIME", "+2d")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", example.display()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    let deadline =
        stdout.trim().strip_prefix("expires_at_ms ").unwrap_or_else(|| panic!("{stdout}"));
    deadline.parse().expect("a deadline in ms")
}

/// A client whose clock is two days ahead claims a key: its lease ends 30 s from the
/// server's now, not from its own, and a client on this machine's clock sees it held for
/// at most that long. The same client reading its own clock gets a lease two days out:
/// the skew is real, and only the server's clock keeps them in agreement.
#[test]
fn leases_run_on_the_servers_clock_whatever_the_clients() {
    let (url, prefix) = (url(), prefix());
    let here = || SystemTime::now().duration_since(UNIX_EPOCH).expect("after 1970").as_millis();
    let before = here();
    let server_clock = u128::from(claim_from_a_client_ahead(&url, &prefix, "k", "server"));
    let lease = config().lease().as_millis();
    assert!(server_clock >= before + lease && server_clock <= here() + lease, "{server_clock}");
    let store = run(RedisStore::<String>::connect(&url, &prefix, config())).expect("connect");
    match run(store.claim(&key("k"), &Fingerprint::builder("claim_once").finish())) {
        Ok(Claim::InFlight { retry_after }) => assert!(retry_after <= config().lease()),
        other => panic!("the skewed client's claim is not held: {other:?}"),
    }
    let own_clock = u128::from(claim_from_a_client_ahead(&url, &prefix, "k2", "own"));
    let day = 24 * 60 * 60 * 1000;
    assert!(own_clock > here() + day, "the client's clock is not ahead: {own_clock}");
    let _ = run(store.drop_namespace());
}

/// `appendfsync always`: a completion acknowledged is on disk. The server is killed
/// (`SIGKILL`) after a run of completions and restarted from its append-only file; every
/// acknowledged completion replays, and the claim in flight is still held.
#[test]
fn a_killed_server_with_appendfsync_always_keeps_every_acknowledged_completion() {
    let mut server =
        Server::start("redis-killed", &["--appendonly", "yes", "--appendfsync", "always"]);
    let store =
        run(RedisStore::<String>::connect(&server.url(), "crash", config())).expect("connect");
    assert_eq!(store.server().appendfsync.as_deref(), Some("always"));
    let done = 200;
    run(async {
        for i in 0..done {
            let k = key(&format!("k{i}"));
            let Claim::Acquired(lease) = store.claim(&k, &fp()).await.expect("claim") else {
                panic!("fresh key")
            };
            store.complete(&lease, format!("r{i}")).await.expect("complete");
        }
        let held = store.claim(&key("held"), &fp()).await.expect("claim");
        assert!(matches!(held, Claim::Acquired(_)));
    });
    server.kill_and_restart();
    let store =
        run(RedisStore::<String>::connect(&server.url(), "crash", config())).expect("reconnect");
    run(async {
        for i in 0..done {
            let replay = store.claim(&key(&format!("k{i}")), &fp()).await.expect("claim");
            assert_eq!(replay, Claim::Replay(format!("r{i}")), "completion {i} was lost");
        }
        let held = store.claim(&key("held"), &fp()).await.expect("claim");
        assert!(matches!(held, Claim::InFlight { .. }), "the claim in flight: {held:?}");
    });
}

/// With a replica and `wait_for_replicas(1, ..)`: a completion acknowledged is on the
/// replica, so a failover to it (the primary killed, the replica promoted) replays it;
/// with the replica stopped, a completion is an error naming the replicas, never an
/// acknowledgement.
#[test]
fn wait_for_replicas_acknowledges_only_what_a_replica_holds() {
    let aof = ["--appendonly", "yes", "--appendfsync", "always"];
    let mut primary = Server::start("redis-primary", &aof);
    let replica_of = ["--replicaof", "127.0.0.1", &primary.port.to_string()];
    let replica = Server::start("redis-replica", &[&aof[..], &replica_of[..]].concat());
    let options = RedisOptions::new().wait_for_replicas(1, Duration::from_millis(1000));
    let options = options.expect("valid");
    let store = run(RedisStore::<String>::connect_with(&primary.url(), "w", config(), options))
        .expect("connect");
    let claim = |name: &str| match run(store.claim(&key(name), &fp())) {
        Ok(Claim::Acquired(lease)) => lease,
        other => panic!("claim of {name}: {other:?}"),
    };
    // The replica's first copy: a WAIT on the primary answers 1 once it is in sync.
    let synced = || primary.command(&["WAIT", "1", "100"]) == redis::Value::Int(1);
    wait_until("the replica's first copy", Duration::from_secs(20), synced);
    let acknowledged = claim("acknowledged");
    run(store.complete(&acknowledged, "acknowledged".into())).expect("a replica holds it");
    let unreplicated = claim("unreplicated");
    let pid = replica.child.id().to_string();
    let signal = |which| Command::new("kill").args([which, pid.as_str()]).status();
    assert!(signal("-STOP").expect("kill -STOP").success());
    let refused = run(store.complete(&unreplicated, "unreplicated".into()));
    let refused_claim = run(store.claim(&key("third"), &fp()));
    // The unreplicated result is on the primary alone: its replay is refused too.
    let replay = run(store.claim(&key("unreplicated"), &fp()));
    let _ = signal("-CONT");
    for refused in [refused.map(|()| None), refused_claim.map(Some), replay.map(Some)] {
        match refused {
            Err(StoreError::Storage(why)) => {
                let why = why.downcast::<RedisError>().expect("a Redis error");
                assert!(matches!(*why, RedisError::NotReplicated { acked: 0, wanted: 1, .. }));
            }
            other => panic!("an unreplicated change was answered {other:?}"),
        }
    }
    primary.kill();
    replica.command(&["REPLICAOF", "NO", "ONE"]);
    let promoted = run(RedisStore::<String>::connect(&replica.url(), "w", config()))
        .expect("connect to the promoted replica");
    let replay = run(promoted.claim(&key("acknowledged"), &fp())).expect("claim");
    assert_eq!(replay, Claim::Replay("acknowledged".into()), "the failover lost it");
}

/// With `wait_for_replicas` and no replica to answer, as many claims as may wait at once
/// ([`REPLICA_WAITS_MAX`]) wait for one, each on a connection of its own (the server holds
/// that many `WAIT`s, where one shared connection held one and queued the rest behind it),
/// and one more waits for a lane, opening no connection; a lookup, which waits for no
/// replica, is answered meanwhile. Each claim is then refused as not replicated.
#[test]
fn changes_waiting_for_replicas_hold_up_no_other_call() {
    let server = Server::start("redis-lanes", &["--appendonly", "yes", "--appendfsync", "always"]);
    let options = RedisOptions::new().wait_for_replicas(1, Duration::from_millis(1500));
    let options = options.expect("valid");
    let store = run(RedisStore::<String>::connect_with(&server.url(), "lanes", config(), options));
    let store = Arc::new(store.expect("connect"));
    let claims: Vec<_> = (0..=REPLICA_WAITS_MAX)
        .map(|i| {
            let store = store.clone();
            runtime().spawn(async move { store.claim(&key(&format!("k{i}")), &fp()).await })
        })
        .collect();
    // The lanes, the store's shared connection and this INFO's own.
    let clients = |n: usize| move |info: &str| info.contains(&format!("connected_clients:{n}\r"));
    let held = |info: &str| info.contains(&format!("blocked_clients:{REPLICA_WAITS_MAX}\r"));
    let all_held = || {
        let info = info_clients(&server);
        held(&info) && clients(REPLICA_WAITS_MAX + 2)(&info)
    };
    wait_until("every lane's WAIT held at once", Duration::from_secs(10), all_held);
    let looked = run(store.lookup(&key("other"), &fp()));
    assert!(matches!(looked, Ok(KeyState::Absent)), "{looked:?}");
    for claim in claims {
        match run(claim).expect("the claim's task") {
            Err(StoreError::Storage(why)) => {
                let why = why.downcast::<RedisError>().expect("a Redis error");
                assert!(matches!(*why, RedisError::NotReplicated { acked: 0, wanted: 1, .. }));
            }
            other => panic!("a claim no replica acknowledged was answered {other:?}"),
        }
    }
    // A claim given up by its caller while its WAIT is held closes its lane: the next
    // change on that connection would wait behind the WAIT. One lane fewer stays open.
    let (given_up, request) = (key("given-up"), fp());
    let given_up = store.claim(&given_up, &request);
    let given_up = async { tokio::time::timeout(Duration::from_millis(200), given_up).await };
    assert!(run(given_up).is_err(), "no replica answers within 200 ms");
    let closed = || clients(REPLICA_WAITS_MAX + 1)(&info_clients(&server));
    wait_until("the given-up lane closed", Duration::from_secs(10), closed);
}

/// A restart closes every idle lane: the first change after it fails on a closed
/// connection, as a call on the shared connection does, and that failure closes the other
/// idle lanes, so the next change opens a new one (before, each of four idle lanes failed
/// a change in turn: a completion and its three retries could all fail on one restart).
#[test]
fn after_a_restart_one_change_fails_and_the_next_gets_a_new_lane() {
    let mut server = Server::start("redis-lanes-restart", &["--appendonly", "yes"]);
    let options = RedisOptions::new().wait_for_replicas(1, Duration::from_millis(20));
    let options = options.expect("valid");
    let store = run(RedisStore::<String>::connect_with(&server.url(), "lanes", config(), options));
    let store = Arc::new(store.expect("connect"));
    let not_replicated = |answer: &Result<Claim<String>, StoreError>| match answer {
        Err(StoreError::Storage(why)) => {
            matches!(why.downcast_ref::<RedisError>(), Some(RedisError::NotReplicated { .. }))
        }
        _ => false,
    };
    // Four changes at once: four lanes, idle once answered (no replica: not replicated).
    for answer in four_lanes(&store) {
        assert!(not_replicated(&answer), "{answer:?}");
    }
    server.kill_and_restart();
    let first = run(store.claim(&key("after-0"), &fp()));
    let next = run(store.claim(&key("after-1"), &fp()));
    assert!(not_replicated(&next), "the change after the first failure: {next:?} ({first:?})");
}

/// An error reply (the server refusing a change: out of memory under `noeviction`) comes
/// from a server that is there: its lane is kept, and so are the idle ones, so the next
/// change opens no connection (a refusal once closed every idle lane, and a server already
/// in trouble was then sent a new connection per change).
#[test]
fn a_change_the_server_refuses_keeps_the_lanes() {
    let server = Server::start("redis-lanes-refused", &["--appendonly", "yes"]);
    let options = RedisOptions::new().wait_for_replicas(1, Duration::from_millis(20));
    let options = options.expect("valid");
    let store = run(RedisStore::<String>::connect_with(&server.url(), "lanes", config(), options));
    let store = Arc::new(store.expect("connect"));
    for answer in four_lanes(&store) {
        assert!(answer.is_err(), "no replica acknowledges: {answer:?}");
    }
    server.command(&["CONFIG", "SET", "maxmemory", "1"]);
    let refused = run(store.claim(&key("refused"), &fp()));
    server.command(&["CONFIG", "SET", "maxmemory", "0"]);
    assert!(format!("{refused:?}").contains("OOM"), "the server refused it: {refused:?}");
    // Each reading opens a connection of its own: one more between the two readings.
    let received = || {
        let stats = match server.command(&["INFO", "stats"]) {
            redis::Value::BulkString(info) => String::from_utf8_lossy(&info).into_owned(),
            other => panic!("INFO answered {other:?}"),
        };
        let line = stats.lines().find_map(|l| l.strip_prefix("total_connections_received:"));
        line.and_then(|n| n.trim().parse::<u64>().ok()).expect("a count")
    };
    let before = received();
    let next = run(store.claim(&key("next"), &fp()));
    assert!(next.is_err(), "no replica acknowledges: {next:?}");
    assert_eq!(received(), before + 1, "the next change opened a connection");
}

/// Four claims on `store` at once (keys `k0` to `k3`), so four lanes when it waits for
/// replicas, idle once answered; their answers.
fn four_lanes(store: &Arc<RedisStore<String>>) -> Vec<Result<Claim<String>, StoreError>> {
    let claims: Vec<_> = (0..4)
        .map(|i| {
            let store = store.clone();
            runtime().spawn(async move { store.claim(&key(&format!("k{i}")), &fp()).await })
        })
        .collect();
    claims.into_iter().map(|claim| run(claim).expect("the claim's task")).collect()
}

/// What `INFO clients` says of `server`.
fn info_clients(server: &Server) -> String {
    match server.command(&["INFO", "clients"]) {
        redis::Value::BulkString(info) => String::from_utf8_lossy(&info).into_owned(),
        other => panic!("INFO answered {other:?}"),
    }
}

/// Many tasks on two stores claim one key at once: exactly one owns it.
#[test]
fn racing_tasks_on_two_stores_get_one_owner() {
    let (url, prefix) = (url(), prefix());
    let connect = || RedisStore::<String>::connect(&url, &prefix, config());
    let stores = [run(connect()).expect("connect"), run(connect()).expect("connect")];
    let owners = run(async {
        let mut tasks = Vec::new();
        for i in 0..64 {
            let store = stores[i % 2].clone();
            tasks.push(tokio::spawn(async move { store.claim(&key("race"), &fp()).await }));
        }
        let mut owners = 0;
        for task in tasks {
            // An owner is a claim that handed out a lease: acquired, or (wrongly, for a
            // live key) recovered.
            if task.await.expect("task").expect("claim").lease().is_some() {
                owners += 1;
            }
        }
        owners
    });
    assert_eq!(owners, 1);
    let _ = run(stores[0].drop_namespace());
}

/// On the server's clock, Redis itself expires a finished record at its TTL, and never a
/// record in flight: `PTTL` is the TTL left on the one and none (-1) on the other, and
/// the finished one is gone from the server once its TTL has passed.
#[test]
fn redis_expires_finished_results_and_never_a_claim_in_flight() {
    let ttl = Duration::from_millis(300);
    let config = StoreConfig::builder().result_ttl(ttl).build().expect("valid");
    let (url, prefix) = (url(), prefix());
    let store = run(RedisStore::<String>::connect(&url, &prefix, config)).expect("connect");
    let record = |name: &str| format!("{{{prefix}}}:r:4:shop:{name}");
    let client = redis::Client::open(url.as_str()).expect("a valid URL");
    let mut conn = client.get_connection().expect("a connection");
    let mut pttl = |name: &str| -> i64 {
        redis::cmd("PTTL").arg(record(name)).query(&mut conn).expect("PTTL")
    };
    let Claim::Acquired(done) = run(store.claim(&key("done"), &fp())).expect("claim") else {
        panic!("fresh key")
    };
    let Claim::Acquired(_held) = run(store.claim(&key("held"), &fp())).expect("claim") else {
        panic!("fresh key")
    };
    run(store.complete(&done, "r".into())).expect("complete");
    let left = pttl("done");
    assert!(left > 0 && left <= 300, "a finished record's TTL: {left}");
    assert_eq!(pttl("held"), -1, "a record in flight has no TTL");
    wait_until("Redis to expire the result", Duration::from_secs(10), || pttl("done") == -2);
    assert_eq!(pttl("held"), -1, "still held, still no TTL");
    assert!(matches!(run(store.claim(&key("done"), &fp())), Ok(Claim::Acquired(_))));
    let _ = run(store.drop_namespace());
}

/// The namespace dropped under a holder: the next claim's token is still above the
/// holder's (a counter created afresh starts at the server's time in microseconds), so
/// the stale holder cannot complete the new owner's claim.
#[test]
fn tokens_only_grow_even_after_the_namespace_is_dropped() {
    let (url, prefix) = (url(), prefix());
    let store = run(RedisStore::<String>::connect(&url, &prefix, config())).expect("connect");
    let Claim::Acquired(stale) = run(store.claim(&key("k"), &fp())).expect("claim") else {
        panic!("fresh key")
    };
    assert!(run(store.drop_namespace()).expect("dropped") > 0);
    let Claim::Acquired(owner) = run(store.claim(&key("k"), &fp())).expect("claim") else {
        panic!("the dropped key is fresh")
    };
    assert!(owner.token() > stale.token(), "{owner:?} after {stale:?}");
    let refused = run(store.complete(&stale, "stale".into()));
    assert!(matches!(refused, Err(StoreError::LeaseLost { .. })), "{refused:?}");
    run(store.complete(&owner, "owner".into())).expect("the owner completes");
    assert_eq!(run(store.claim(&key("k"), &fp())).expect("claim"), Claim::Replay("owner".into()));
    let _ = run(store.drop_namespace());
}

/// A replica is refused at connect, even one that accepts writes: a store on it and one on
/// the primary would each own a key.
#[test]
fn a_replica_is_refused_even_one_that_accepts_writes() {
    let primary = Server::start("redis-role-primary", &["--appendonly", "yes"]);
    let port = primary.port.to_string();
    let args =
        ["--appendonly", "yes", "--replicaof", "127.0.0.1", &port, "--replica-read-only", "no"];
    let replica = Server::start("redis-role-replica", &args);
    let why = refusal(&replica, RedisOptions::new());
    assert!(why.contains("not the primary") && why.contains("connect to the primary"), "{why}");
    let vouched = RedisOptions::new().server_checked_by_operator();
    assert!(refusal(&replica, vouched).contains("not the primary"), "vouching skips no role");
}

/// `pending` lists at most `PENDING_BATCH_MAX` a call, whatever its `max` (`usize::MAX`
/// included), and the reconciler's next call lists the rest once the first are settled.
#[test]
fn pending_answers_any_max_up_to_its_batch() {
    let clock = Arc::new(ManualClock::new(idem_testkit::conformance::START));
    let store = on_shared_server(config(), clock.clone());
    let total = idem_store_redis::PENDING_BATCH_MAX + 10;
    run(async {
        for i in 0..total {
            let claimed = store.claim(&key(&format!("k{i}")), &fp()).await.expect("claim");
            assert!(matches!(claimed, Claim::Acquired(_)));
        }
    });
    clock.advance(config().lease());
    for max in [usize::MAX, 1 << 60, total] {
        let listed = run(store.pending(max)).expect("pending");
        assert_eq!(listed.len(), idem_store_redis::PENDING_BATCH_MAX, "max {max}");
    }
    assert_eq!(run(store.pending(3)).expect("pending").len(), 3);
}

/// A scope's counter of claims in flight is removed when it reaches 0: scopes used and
/// settled leave no key behind.
#[test]
fn settled_scopes_leave_no_counter_behind() {
    let (url, prefix) = (url(), prefix());
    let store = run(RedisStore::<String>::connect(&url, &prefix, config())).expect("connect");
    run(async {
        for i in 0..50 {
            let k = ScopedKey::parse(&format!("tenant-{i}"), "k").expect("valid");
            let Claim::Acquired(lease) = store.claim(&k, &fp()).await.expect("claim") else {
                panic!("fresh key")
            };
            if i % 2 == 0 {
                store.release(&lease).await.expect("release");
            } else {
                store.complete(&lease, "done".into()).await.expect("complete");
            }
        }
    });
    let client = redis::Client::open(url.as_str()).expect("a valid URL");
    let mut conn = client.get_connection().expect("a connection");
    let counters: Vec<String> =
        redis::cmd("KEYS").arg(format!("{{{prefix}}}:q:*")).query(&mut conn).expect("KEYS");
    assert!(counters.is_empty(), "{} counters left: {counters:?}", counters.len());
    let _ = run(store.drop_namespace());
}

/// The connect check reads the server's settings over RESP3 too (`?protocol=resp3`,
/// where `CONFIG GET` answers a map), and the replica wait is checked at connect
/// whatever order the options were set in.
#[test]
fn the_connect_checks_hold_over_resp3_and_in_any_order_of_options() {
    let (url, prefix) = (format!("{}?protocol=resp3", url()), prefix());
    let store = run(RedisStore::<String>::connect(&url, &prefix, config())).expect("RESP3");
    assert_eq!(store.server().appendonly, Some(true));
    let late = RedisOptions::new().wait_for_replicas(1, Duration::from_secs(4)).expect("valid");
    let late = late.response_timeout(Duration::from_millis(100));
    match run(RedisStore::<String>::connect_with(&url, &prefix, config(), late)) {
        Err(StoreError::Storage(why)) => assert!(why.to_string().contains("replica wait")),
        other => panic!("a wait past the response timeout was accepted: {other:?}"),
    }
}

/// A port that takes connections and never answers (a hung server, or the address of one
/// restarting behind a proxy); closed when dropped.
struct Silent {
    port: u16,
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Silent {
    fn on(port: u16) -> Self {
        let listener = TcpListener::bind(("127.0.0.1", port)).expect("the port again");
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopping = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut held = Vec::new();
            for conn in listener.incoming() {
                if stopping.load(Ordering::SeqCst) {
                    break;
                }
                held.push(conn);
            }
        });
        Self { port, stop, thread: Some(thread) }
    }
}

impl Drop for Silent {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = std::net::TcpStream::connect(("127.0.0.1", self.port));
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Whether `answer` is the store's own "no answer within the bound".
fn timed_out<T: std::fmt::Debug>(answer: &Result<T, StoreError>) -> bool {
    let Err(StoreError::Storage(why)) = answer else { return false };
    matches!(why.downcast_ref::<RedisError>(), Some(RedisError::TimedOut { .. }))
}

/// A call is bounded by the response timeout as a whole, reconnecting included: against
/// a server gone (refused connections) and a port that accepts and never answers, each
/// call ends at its bound, not after the connection manager's retries (9 s and 44 s).
#[test]
fn a_call_to_a_server_gone_or_silent_ends_within_the_response_timeout() {
    let mut server = Server::start("redis-gone", &["--appendonly", "yes"]);
    let options = RedisOptions::new().response_timeout(Duration::from_millis(300));
    let store = run(RedisStore::<String>::connect_with(&server.url(), "p", config(), options));
    let store = store.expect("connect");
    let (k, request) = (key("k"), fp());
    let call = |what: &str| {
        let bounded =
            async { tokio::time::timeout(Duration::from_secs(3), store.claim(&k, &request)).await };
        run(bounded).unwrap_or_else(|_| panic!("{what}: no end within 3 s (its bound: 300 ms)"))
    };
    server.kill();
    for _ in 0..2 {
        let answer = call("gone");
        assert!(answer.is_err(), "{answer:?}");
    }
    let _silent = Silent::on(server.port);
    for _ in 0..2 {
        let answer = call("silent");
        assert!(timed_out(&answer), "{answer:?}");
    }
}

/// Connecting to a port that never answers ends within the connect timeout and the
/// response timeout, with the store's own error.
#[test]
fn connecting_to_a_silent_port_ends_within_its_bound() {
    let silent = Silent::on(free_port());
    let url = format!("redis://127.0.0.1:{}", silent.port);
    let options = RedisOptions::new().response_timeout(Duration::from_millis(300));
    let connect = RedisStore::<String>::connect_with(&url, "p", config(), options);
    let bounded = async { tokio::time::timeout(Duration::from_secs(15), connect).await };
    let answer = run(bounded).expect("ended within 15 s (its bounds: 5 s and 300 ms)");
    assert!(timed_out(&answer.map(|_| ())), "the store's own timeout");
}

/// A counter begun afresh (the namespace dropped) starts at the server's time, whatever
/// the injected clock reads: a clock that does not move must not repeat a token.
#[test]
fn tokens_grow_after_a_drop_on_a_clock_that_does_not_move() {
    let clock = Arc::new(ManualClock::new(idem_core::Timestamp::from_millis(1_000)));
    let store = on_shared_server(config(), clock);
    let Claim::Acquired(stale) = run(store.claim(&key("k"), &fp())).expect("claim") else {
        panic!("fresh key")
    };
    assert!(run(store.0.drop_namespace()).expect("dropped") > 0);
    let Claim::Acquired(owner) = run(store.claim(&key("k"), &fp())).expect("claim") else {
        panic!("the dropped key is fresh")
    };
    assert!(owner.token() > stale.token(), "{owner:?} after {stale:?}");
    let refused = run(store.complete(&stale, "stale".into()));
    assert!(matches!(refused, Err(StoreError::LeaseLost { .. })), "{refused:?}");
}

/// A store whose largest result is past the server's largest argument is refused at
/// connect (a result it promised to keep would fail at `complete`); at the limit, taken.
#[test]
fn a_result_limit_past_the_servers_bulk_limit_is_refused_at_connect() {
    let server =
        Server::start("redis-bulk", &["--appendonly", "yes", "--proto-max-bulk-len", "1mb"]);
    let why = refusal(&server, RedisOptions::new());
    assert!(why.contains("proto-max-bulk-len") && why.contains("1048576"), "{why}");
    // A result is sent with the encoding's prefix: the limit is the server's less it.
    let largest = (1 << 20) - idem_durable::RESULT_PREFIX;
    let past = RedisOptions::new().result_bytes_max(largest + 1);
    assert!(refusal(&server, past).contains("proto-max-bulk-len"), "one byte past");
    let at = RedisOptions::new().result_bytes_max(largest);
    let store = run(RedisStore::<String>::connect_with(&server.url(), "p", config(), at));
    let store = store.expect("at the server's limit");
    let Claim::Acquired(lease) = run(store.claim(&key("big"), &fp())).expect("claim") else {
        panic!("fresh key")
    };
    run(store.complete(&lease, "x".repeat(largest))).expect("the largest result kept");
}
