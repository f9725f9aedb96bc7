//! The conformance suite against a real PostgreSQL server, plus a race between instances,
//! for the sync store here and for the async store in `postgres/async_store.rs`.
//! Needs `IDEM_PG_URL` (`.ci/postgres.sh` starts a server and prints it); `cargo xtask ci`
//! sets it up. Without it these tests fail: they never pass without a server.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use std::time::Duration;

use idem_core::{
    Claim, Fingerprint, Forgotten, KeyAdmin, KeyState, KeyStore, Lease, ManualClock, PendingClaim,
    ScopedKey, StoreConfig, StoreError,
};
use idem_store_postgres::{PgError, PgStore};

// The test binary's root is this file, so its module sits in the folder of its name.
#[path = "postgres/async_store.rs"]
mod async_store;
#[path = "postgres/silent.rs"]
mod silent;

fn url() -> String {
    std::env::var("IDEM_PG_URL")
        .expect("IDEM_PG_URL must name a PostgreSQL server (see .ci/postgres.sh)")
}

/// A fresh namespace per store, so tests (and test runs) never share tables.
fn schema() -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    format!("idem_test_{}_{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

/// A namespace that is dropped (with its tables) when the test is done with it.
struct Namespace(String);

impl Namespace {
    fn new() -> Self {
        Self(schema())
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        if let Ok(mut admin) = postgres::Client::connect(&url(), postgres::NoTls) {
            let _ = admin.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{}\" CASCADE", self.0));
        }
    }
}

/// A store and its namespace, dropped together.
struct TestStore {
    store: PgStore<String>,
    _namespace: Namespace,
}

impl KeyStore<String> for TestStore {
    fn claim(&self, key: &ScopedKey, fp: &Fingerprint) -> Result<Claim<String>, StoreError> {
        self.store.claim(key, fp)
    }
    fn claim_wait(
        &self,
        key: &ScopedKey,
        fp: &Fingerprint,
        timeout: Duration,
    ) -> Result<Claim<String>, StoreError> {
        self.store.claim_wait(key, fp, timeout)
    }
    fn complete(&self, lease: &Lease, result: String) -> Result<(), StoreError> {
        self.store.complete(lease, result)
    }
    fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        self.store.release(lease)
    }
    fn renew(&self, lease: &Lease) -> Result<Lease, StoreError> {
        self.store.renew(lease)
    }
    fn lease(&self) -> Duration {
        self.store.lease()
    }

    fn result_ttl(&self) -> Duration {
        self.store.result_ttl()
    }
    fn sweep(&self) -> Result<usize, StoreError> {
        self.store.sweep()
    }
    fn pending(&self, max: usize) -> Result<Vec<PendingClaim>, StoreError> {
        self.store.pending(max)
    }
    fn lookup(&self, key: &ScopedKey, fp: &Fingerprint) -> Result<KeyState<String>, StoreError> {
        self.store.lookup(key, fp)
    }
}

/// Waits until exactly one of the store's sessions on `namespace` waits for a lock (a row
/// another transaction holds), as the server sees it; fails the test after 4 s.
pub(crate) fn wait_for_one_session_on_a_lock(namespace: &Namespace, what: &str) {
    let mut admin = postgres::Client::connect(&url(), postgres::NoTls).expect("admin");
    let blocked = "SELECT count(*) FROM pg_stat_activity \
                   WHERE application_name = $1 AND wait_event_type = 'Lock'";
    let name = format!("idem:{}", namespace.0);
    idem_testkit::wait_until(what, Duration::from_secs(4), || {
        admin.query_one(blocked, &[&name]).expect("pg_stat_activity").get::<_, i64>(0) == 1
    });
}

/// Renews `name`'s claim in another session's open transaction (its row locked), starts
/// the forget `start` returns the answer of, waits until the forget waits on that row,
/// commits the renewal, and returns what the forget answered.
pub(crate) fn forget_beside_a_renewal<W: FnOnce() -> Forgotten>(
    namespace: &Namespace,
    name: &str,
    start: impl FnOnce() -> W,
) -> Forgotten {
    let mut renewal = postgres::Client::connect(&url(), postgres::NoTls).expect("a session");
    let mut tx = renewal.transaction().expect("begin");
    let renew = format!(
        "UPDATE \"{}\".claims SET lease_expires_at = lease_expires_at + 600000 WHERE key = $1",
        namespace.0
    );
    assert_eq!(tx.execute(&renew, &[&name]).expect("the renewal"), 1);
    let answer = start();
    wait_for_one_session_on_a_lock(namespace, "the forget to wait on the row");
    tx.commit().expect("commit the renewal");
    answer()
}

impl KeyAdmin for TestStore {
    fn inspect(&self, key: &ScopedKey) -> Result<Option<idem_core::KeyRecord>, StoreError> {
        self.store.inspect(key)
    }
    fn forget(&self, key: &ScopedKey, who: &str, why: &str) -> Result<Forgotten, StoreError> {
        self.store.forget(key, who, why)
    }
}

fn postgres(config: StoreConfig, clock: Arc<ManualClock>) -> TestStore {
    let namespace = Namespace::new();
    let store = PgStore::connect_with_clock(&url(), &namespace.0, config, clock).expect("connect");
    TestStore { store, _namespace: namespace }
}

idem_testkit::conformance_tests!(postgres);

#[test]
fn two_instances_racing_on_one_schema_give_one_owner() {
    let guard = Namespace::new();
    let namespace = guard.0.clone();
    let a: PgStore<String> =
        PgStore::connect(&url(), &namespace, StoreConfig::default()).expect("a");
    let b: PgStore<String> =
        PgStore::connect(&url(), &namespace, StoreConfig::default()).expect("b");
    let fp = Fingerprint::builder("t").finish();
    let claims: Vec<Claim<String>> = std::thread::scope(|s| {
        let run = |store: &PgStore<String>| {
            (0..30)
                .map(|i| {
                    store
                        .claim(&ScopedKey::parse("t", &format!("k{i}")).expect("key"), &fp)
                        .expect("claim")
                })
                .collect::<Vec<_>>()
        };
        let (a, b) = (&a, &b);
        let ha = s.spawn(move || run(a));
        let hb = s.spawn(move || run(b));
        let mut all = ha.join().expect("a");
        all.extend(hb.join().expect("b"));
        all
    });
    assert_eq!(claims.iter().filter(|c| matches!(c, Claim::Acquired(_))).count(), 30);
}

/// Holds advisory lock 4242 while `connect` starts (on a thread or a task) with a URL
/// that names its sessions `name`; sees, on the server, that it waits on the lock; lets
/// the lock go; returns what `connect` returned (its join, for its answer).
fn with_the_migration_lock_held<J>(name: &str, connect: impl FnOnce(String) -> J) -> J {
    let mut holder = postgres::Client::connect(&url(), postgres::NoTls).expect("a session");
    holder.execute("SELECT pg_advisory_lock(4242)", &[]).expect("the lock");
    let separator = if url().contains('?') { '&' } else { '?' };
    let connecting = connect(format!("{}{separator}application_name={name}", url()));
    // A bigint advisory key shows as classid (high half), objid (low half), objsubid 1.
    let waiting = "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid \
                   WHERE l.locktype = 'advisory' AND l.classid = 0 AND l.objid = 4242 \
                   AND l.objsubid = 1 AND NOT l.granted AND a.application_name = $1";
    idem_testkit::wait_until("the migration to wait on lock 4242", Duration::from_secs(4), || {
        let row = holder.query_one(waiting, &[&name]).expect("pg_locks");
        row.get::<_, i64>(0) == 1
    });
    holder.execute("SELECT pg_advisory_unlock(4242)", &[]).expect("unlock");
    connecting
}

/// The migration holds advisory lock 4242, the id every release takes (so that processes
/// of two releases starting together still migrate one after the other): while another
/// session holds it, `connect` waits on it, seen by the server; released, it connects.
#[test]
fn a_migration_waits_for_the_advisory_lock_every_release_takes() {
    let guard = Namespace::new();
    let name = format!("idem_lock_test_{}", std::process::id());
    let namespace = guard.0.clone();
    let connecting = with_the_migration_lock_held(&name, |store_url| {
        std::thread::spawn(move || {
            PgStore::<String>::connect(&store_url, &namespace, StoreConfig::default()).map(drop)
        })
    });
    connecting.join().expect("the connecting thread").expect("connects once the lock is free");
}

#[test]
fn a_bad_schema_name_is_refused() {
    let refused =
        PgStore::<String>::connect(&url(), "Robert'); DROP TABLE x;--", StoreConfig::default());
    assert!(refused.is_err());
}

#[test]
fn an_unreachable_server_is_a_typed_error() {
    let refused = PgStore::<String>::connect(
        "postgres://idem:idem@127.0.0.1:1/idem",
        "idem_x",
        StoreConfig::default(),
    );
    match refused {
        Err(idem_core::StoreError::Storage(e)) => {
            assert!(e.downcast_ref::<idem_store_postgres::PgError>().is_some(), "{e}");
        }
        other => panic!("expected a storage error, got {other:?}"),
    }
}

fn fp() -> Fingerprint {
    Fingerprint::builder("t").finish()
}

fn key(name: &str) -> ScopedKey {
    ScopedKey::parse("t", name).expect("key")
}

/// The server's clock, in milliseconds.
fn server_ms() -> i64 {
    let mut admin = postgres::Client::connect(&url(), postgres::NoTls).expect("admin");
    let row = admin
        .query_one("SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint", &[])
        .expect("now");
    row.get(0)
}

/// Leases run on the database's clock: a store reads no process's wall clock, so a
/// client whose clock is ahead cannot recover another's live lease. (A store given its
/// own clock trusts it; one 31 s ahead recovers at once, which is why such a clock must
/// be shared by every client.)
#[test]
fn leases_run_on_the_database_clock_so_skewed_clients_agree() {
    let namespace = Namespace::new();
    let config = StoreConfig::builder().lease(Duration::from_secs(30)).build().expect("valid");
    let a: PgStore<String> = PgStore::connect(&url(), &namespace.0, config).expect("a");
    let b: PgStore<String> = PgStore::connect(&url(), &namespace.0, config).expect("b");
    let before = server_ms();
    let Claim::Acquired(lease) = a.claim(&key("k"), &fp()).expect("claim") else { panic!() };
    let after = server_ms();
    let expires = lease.expires_at().as_millis() as i64;
    assert!(
        (before + 29_000..=after + 31_000).contains(&expires),
        "the lease ends 30 s after the server's now: {before} .. {expires} .. {after}"
    );
    match b.claim(&key("k"), &fp()).expect("claim") {
        Claim::InFlight { retry_after } => assert!(retry_after > Duration::from_secs(25)),
        other => panic!("another client sees the lease live, got {other:?}"),
    }
    let ahead = Arc::new(ManualClock::new(idem_core::Timestamp::from_millis(
        u64::try_from(after + 31_000).expect("positive"),
    )));
    let skewed: PgStore<String> =
        PgStore::connect_with_clock(&url(), &namespace.0, config, ahead).expect("skewed");
    assert!(matches!(skewed.claim(&key("k"), &fp()), Ok(Claim::Recover(_))), "own clock trusted");
}

/// The server closes the store's connections (as a restart does): the next calls open
/// them again instead of failing with "connection closed" forever.
#[test]
fn the_store_reconnects_after_the_server_closed_its_connections() {
    let namespace = Namespace::new();
    let store: PgStore<String> =
        PgStore::connect(&url(), &namespace.0, StoreConfig::default()).expect("connect");
    let _held = store.claim(&key("before"), &fp()).expect("claim");
    let mut admin = postgres::Client::connect(&url(), postgres::NoTls).expect("admin");
    let terminated = admin
        .query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
            &[&format!("idem:{}", namespace.0)],
        )
        .expect("terminate");
    assert_eq!(terminated.len(), 4, "the store's four connections");
    // A call whose connection died under it fails (it may have taken effect: not retried);
    // the connection is opened again for the next. Four connections: at most four fail.
    let attempts: Vec<bool> =
        (0..8).map(|i| store.claim(&key(&format!("after-{i}")), &fp()).is_ok()).collect();
    assert!(attempts[4..].iter().all(|ok| *ok), "{attempts:?}");
    assert!(matches!(store.claim(&key("before"), &fp()), Ok(Claim::InFlight { .. })));
}

/// A claim refused for its scope's quota ends its transaction before the refusal returns:
/// no session of the store is left idle in a transaction holding the record count's row
/// (every other claim in the namespace waited on it, up to the server's 5 s idle timeout).
#[test]
fn a_refused_claim_leaves_no_transaction_open() {
    let namespace = Namespace::new();
    let config = StoreConfig::builder().scope_in_flight_max(1).build().expect("valid");
    let store = PgStore::<String>::connect(&url(), &namespace.0, config).expect("connect");
    assert!(matches!(store.claim(&key("k1"), &fp()), Ok(Claim::Acquired(_))));
    let refused = store.claim(&key("k2"), &fp());
    assert!(matches!(refused, Err(StoreError::ScopeQuota { .. })), "{refused:?}");
    let mut admin = postgres::Client::connect(&url(), postgres::NoTls).expect("admin");
    let open = "SELECT count(*) FROM pg_stat_activity \
                WHERE application_name = $1 AND state = 'idle in transaction'";
    let name = format!("idem:{}", namespace.0);
    // The rollback was written before the refusal returned; the server may take a moment
    // to read it. Polled on the server's clock for 2 s, well under its 5 s idle timeout.
    let ended = (0..200).any(|_| {
        let count: i64 = admin.query_one(open, &[&name]).expect("sessions").get(0);
        count == 0 || admin.execute("SELECT pg_sleep(0.01)", &[]).map(|_| false).expect("sleep")
    });
    assert!(ended, "a session of the store stayed idle in a transaction for 2 s");
}

/// A database error carries the server's own message, not "db error".
#[test]
fn errors_carry_the_servers_message() {
    let wrong = url().replacen("idem:idem@", "idem:wrong-password@", 1);
    assert_ne!(wrong, url(), "the test URL names user idem with password idem");
    let error = PgStore::<String>::connect(&wrong, "idem_x", StoreConfig::default())
        .expect_err("a wrong password is refused");
    let text = error.to_string();
    assert!(text.contains("password authentication failed"), "{text}");
    assert!(text.contains("28P01"), "the SQLSTATE code: {text}");
}

/// Reserved words work as namespaces (every statement quotes the name); PostgreSQL's own
/// schemas and the shared `public` are refused with the reason.
#[test]
fn schema_names_are_checked_and_quoted() {
    let reserved = "select";
    let store: PgStore<String> =
        PgStore::connect(&url(), reserved, StoreConfig::default()).expect("a reserved word");
    let Claim::Acquired(lease) = store.claim(&key("k"), &fp()).expect("claim") else { panic!() };
    store.complete(&lease, "done".into()).expect("complete");
    drop(store);
    drop(Namespace(reserved.into()));
    let too_long = "a".repeat(64);
    for (name, why) in [
        ("public", "public is shared"),
        ("pg_idem", "reserved for PostgreSQL"),
        ("information_schema", "reserved for PostgreSQL"),
        ("", "1 to 63"),
        (too_long.as_str(), "1 to 63"),
        ("Upper", "lowercase"),
        ("1st", "not starting with a digit"),
    ] {
        match PgStore::<String>::connect(&url(), name, StoreConfig::default()) {
            Err(StoreError::Storage(e)) => match e.downcast_ref::<PgError>() {
                Some(PgError::SchemaName { why: got, .. }) => {
                    assert!(got.contains(why), "{name}: {got}")
                }
                other => panic!("{name}: {other:?}"),
            },
            other => panic!("{name}: expected a schema name error, got {other:?}"),
        }
    }
}

mod tls {
    //! The store over TLS, against the local server's self-signed certificate.

    use std::sync::Arc;

    use idem_core::{KeyStore, StoreConfig, StoreError};
    use idem_store_postgres::PgStore;
    use idem_store_postgres::rustls::client::danger::{
        HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier,
    };
    use idem_store_postgres::rustls::pki_types::{CertificateDer, ServerName, UnixTime};
    use idem_store_postgres::rustls::{
        self, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
    };

    use super::{Namespace, fp, key, url};

    /// Accepts the test server's self-signed certificate (it names the host, not
    /// 127.0.0.1); still checks the handshake's signatures.
    #[derive(Debug)]
    struct TestServer(Arc<rustls::crypto::CryptoProvider>);

    /// A TLS configuration that trusts the test server ([`TestServer`]).
    pub(super) fn trusting_the_test_server() -> ClientConfig {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        ClientConfig::builder()
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(TestServer(provider)))
            .with_no_client_auth()
    }

    /// A configuration that trusts no root: every server certificate is refused.
    pub(super) fn trusting_nothing() -> ClientConfig {
        ClientConfig::builder().with_root_certificates(RootCertStore::empty()).with_no_client_auth()
    }

    impl ServerCertVerifier for TestServer {
        fn verify_server_cert(
            &self,
            _: &CertificateDer<'_>,
            _: &[CertificateDer<'_>],
            _: &ServerName<'_>,
            _: &[u8],
            _: UnixTime,
        ) -> Result<ServerCertVerified, rustls::Error> {
            Ok(ServerCertVerified::assertion())
        }
        fn verify_tls12_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            let algorithms = &self.0.signature_verification_algorithms;
            rustls::crypto::verify_tls12_signature(message, cert, dss, algorithms)
        }
        fn verify_tls13_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            let algorithms = &self.0.signature_verification_algorithms;
            rustls::crypto::verify_tls13_signature(message, cert, dss, algorithms)
        }
        fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
            self.0.signature_verification_algorithms.supported_schemes()
        }
    }

    pub(super) fn require_tls() -> String {
        format!("{}?sslmode=require", url())
    }

    /// Every connection of a store opened with TLS is encrypted, and it works.
    #[test]
    fn a_store_over_tls_encrypts_every_connection() {
        let namespace = Namespace::new();
        let tls = trusting_the_test_server();
        let store: PgStore<String> =
            PgStore::connect_with_tls(&require_tls(), &namespace.0, StoreConfig::default(), tls)
                .expect("a TLS connection");
        let _held = store.claim(&key("k"), &fp()).expect("claim");
        let mut admin = postgres::Client::connect(&url(), postgres::NoTls).expect("admin");
        let encrypted: i64 = admin
            .query_one(
                "SELECT count(*) FROM pg_stat_ssl JOIN pg_stat_activity USING (pid)
                 WHERE application_name = $1 AND ssl",
                &[&format!("idem:{}", namespace.0)],
            )
            .expect("pg_stat_ssl")
            .get(0);
        assert_eq!(encrypted, 4, "the store's four connections are encrypted");
    }

    /// Certificates are verified: a configuration that trusts no root is refused.
    #[test]
    fn an_untrusted_server_certificate_is_refused() {
        let refused = PgStore::<String>::connect_with_tls(
            &require_tls(),
            "idem_x",
            StoreConfig::default(),
            trusting_nothing(),
        );
        refused_as_untrusted(refused);
    }

    /// Fails unless `refused` is the refusal of the server's certificate.
    pub(super) fn refused_as_untrusted<T: std::fmt::Debug>(refused: Result<T, StoreError>) {
        let error = refused.expect_err("an unknown issuer is refused");
        assert!(error.to_string().to_lowercase().contains("certificate"), "{error}");
    }
}

/// Leases and results run out on the server's clock while the client only waits: nothing
/// in the client moves time on. A short lease and TTL, and claims repeated (bounded by
/// [`WAIT`]) until the server's clock has passed each.
#[test]
fn a_lease_and_a_result_run_out_on_the_servers_clock_while_the_client_waits() {
    let namespace = Namespace::new();
    let short = Duration::from_millis(300);
    let config = StoreConfig::builder().lease(short).result_ttl(short).build().expect("valid");
    let store: PgStore<String> = PgStore::connect(&url(), &namespace.0, config).expect("store");
    let Claim::Acquired(_) = store.claim(&key("k"), &fp()).expect("claim") else { panic!() };
    let mut recovered = None;
    idem_testkit::wait_until("the lease to run out", WAIT, || {
        if let Ok(Claim::Recover(lease)) = store.claim(&key("k"), &fp()) {
            recovered = Some(lease);
        }
        recovered.is_some()
    });
    let lease = recovered.expect("recovered");
    store.complete(&lease, "done".into()).expect("complete");
    assert_eq!(store.claim(&key("k"), &fp()).expect("claim"), Claim::Replay("done".into()));
    idem_testkit::wait_until("the result to run out", WAIT, || {
        matches!(store.claim(&key("k"), &fp()), Ok(Claim::Acquired(_)))
    });
}

/// How long a test waits for the server's clock to pass a deadline before failing.
const WAIT: Duration = Duration::from_secs(10);

/// A server whose clock is two days ahead of this machine's (`.ci/postgres-skewed.sh`,
/// `IDEM_PG_SKEWED_URL`): a lease ends on the server's clock, not this process's, and a
/// result's lifetime too.
#[test]
fn a_servers_clock_offset_from_the_clients_sets_every_deadline() {
    let skewed = std::env::var("IDEM_PG_SKEWED_URL").expect(
        "IDEM_PG_SKEWED_URL must name a server with a skewed clock (.ci/postgres-skewed.sh)",
    );
    let name = schema();
    let config = StoreConfig::builder().lease(Duration::from_secs(30)).build().expect("valid");
    let store: PgStore<String> = PgStore::connect(&skewed, &name, config).expect("store");
    let mut admin = postgres::Client::connect(&skewed, postgres::NoTls).expect("admin");
    let mut server_now = || -> i64 {
        let row = admin
            .query_one("SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint", &[])
            .expect("now");
        row.get(0)
    };
    let before = server_now();
    let local = idem_core::Clock::now(&idem_core::SystemClock).as_millis() as i64;
    assert!(before - local > 24 * 3600 * 1000, "the server runs a day or more ahead");
    let Claim::Acquired(lease) = store.claim(&key("k"), &fp()).expect("claim") else { panic!() };
    let expires = lease.expires_at().as_millis() as i64;
    assert!(
        (before + 29_000..=before + 32_000).contains(&expires),
        "the lease ends 30 s after the server's now ({before}), not the client's ({local}): \
         {expires}"
    );
    store.complete(&lease, "done".into()).expect("complete");
    assert_eq!(store.claim(&key("k"), &fp()).expect("replay"), Claim::Replay("done".into()));
    store.drop_schema().expect("drop");
}

/// A lease or result lifetime of `Duration::MAX` ("for ever") is stored, not an overflow:
/// the claim completes and replays.
#[test]
fn a_lifetime_of_duration_max_means_for_ever() {
    let namespace = Namespace::new();
    for config in [
        StoreConfig::builder().result_ttl(Duration::MAX).build().expect("valid"),
        StoreConfig::builder().lease(Duration::MAX).build().expect("valid"),
    ] {
        let store: PgStore<String> = PgStore::connect(&url(), &namespace.0, config).expect("store");
        let name = format!("k{}", config.lease().as_secs());
        let Claim::Acquired(lease) = store.claim(&key(&name), &fp()).expect("claim") else {
            panic!("acquired")
        };
        store.complete(&lease, "r".into()).expect("complete");
        assert_eq!(store.claim(&key(&name), &fp()).expect("replay"), Claim::Replay("r".into()));
    }
}

/// Two stores racing for fresh keys: the loser's wait is never longer than the lease,
/// even when its transaction began before the winner's.
#[test]
fn a_losers_retry_after_never_exceeds_the_lease() {
    let namespace = Namespace::new();
    let config = StoreConfig::builder().lease(Duration::from_secs(30)).build().expect("valid");
    let stores: Vec<PgStore<String>> =
        (0..2).map(|_| PgStore::connect(&url(), &namespace.0, config).expect("store")).collect();
    // The early loser is rare (about 1 round in 100 was seen): 1,000 rounds find it.
    for round in 0..1000 {
        let barrier = std::sync::Barrier::new(2);
        let k = key(&format!("race-{round}"));
        let answers: Vec<Claim<String>> = std::thread::scope(|scope| {
            let racers: Vec<_> = stores
                .iter()
                .map(|store| {
                    let (barrier, k) = (&barrier, &k);
                    scope.spawn(move || {
                        barrier.wait();
                        store.claim(k, &fp()).expect("claim")
                    })
                })
                .collect();
            racers.into_iter().map(|r| r.join().expect("racer")).collect()
        });
        for answer in answers {
            if let Claim::InFlight { retry_after } = answer {
                assert!(retry_after <= config.lease(), "round {round}: {retry_after:?}");
            }
        }
    }
}

/// As the async store's: a forget that meets a renewal in flight on the pending claim's
/// row waits for it and sees the renewed lease, so it refuses.
#[test]
fn a_blocking_forget_waits_for_a_renewal_in_flight_and_sees_it() {
    let namespace = Namespace::new();
    let clock = Arc::new(ManualClock::new(idem_core::Timestamp::from_millis(1_700_000_000_000)));
    let config = StoreConfig::default();
    let store = PgStore::<String>::connect_with_clock(&url(), &namespace.0, config, clock.clone());
    let store = Arc::new(store.expect("connect"));
    let Claim::Acquired(_lease) = store.claim(&key("renewed"), &fp()).expect("claim") else {
        panic!("an absent key is acquired")
    };
    clock.advance(config.lease());
    let operator = Arc::clone(&store);
    let forgotten = forget_beside_a_renewal(&namespace, "renewed", move || {
        let forgetting =
            std::thread::spawn(move || operator.forget(&key("renewed"), "alice", "stuck"));
        move || forgetting.join().expect("the forget").expect("answered")
    });
    assert!(matches!(forgotten, Forgotten::HolderLive { .. }), "{forgotten:?}");
}

/// Tokens only grow, also across a namespace dropped and made again: a new token sequence
/// starts at the server's time in microseconds, so a lease from before the drop is
/// refused, never taken for the new owner's (both were token 1 before).
#[test]
fn tokens_grow_across_a_dropped_namespace() {
    let namespace = Namespace::new();
    let config = StoreConfig::default();
    let store: PgStore<String> = PgStore::connect(&url(), &namespace.0, config).expect("store");
    let Claim::Acquired(stale) = store.claim(&key("k"), &fp()).expect("claim") else {
        panic!("acquired")
    };
    store.drop_schema().expect("drop");
    let again: PgStore<String> = PgStore::connect(&url(), &namespace.0, config).expect("store");
    let Claim::Acquired(owner) = again.claim(&key("k"), &fp()).expect("claim") else {
        panic!("the dropped key is fresh")
    };
    assert!(owner.token() > stale.token(), "{owner:?} after {stale:?}");
    let refused = store.complete(&stale, "stale".into());
    assert!(matches!(refused, Err(StoreError::LeaseLost { .. })), "{refused:?}");
    again.complete(&owner, "owner".into()).expect("the owner completes");
    assert_eq!(again.claim(&key("k"), &fp()).expect("replay"), Claim::Replay("owner".into()));
}

/// A session whose transaction stops answering (here: left open by hand, as a process
/// paused between its claim and its commit leaves it) is ended by the server after the
/// statement timeout, so it cannot hold the namespace's row locks for as long as it lives.
#[test]
fn the_stores_sessions_end_a_transaction_left_idle() {
    let namespace = Namespace::new();
    let store: PgStore<String> =
        PgStore::connect(&url(), &namespace.0, StoreConfig::default()).expect("store");
    let shown = store.session_setting("idle_in_transaction_session_timeout").expect("shown");
    assert_eq!(shown, "5s", "the store's sessions leave an idle transaction open for ever");
}

/// A sweep that has picked an expired result waits on its row while another session takes
/// the key over (uncommitted); once that commits, the row is a live claim, and the sweep
/// leaves it. Deleting what the row had become would drop the new holder's claim (a
/// second owner could claim the key, and the holder's completion would be lost).
#[test]
fn a_sweep_never_deletes_a_row_taken_over_while_it_waited() {
    let store = with_expired_results(StoreConfig::builder(), &["taken", "expired"]);
    // Another session takes `taken` over and holds its row, uncommitted.
    let mut admin = postgres::Client::connect(&url(), postgres::NoTls).expect("admin");
    let mut takeover = admin.transaction().expect("a transaction");
    take_over_by_hand(&mut takeover, &store._namespace.0, "taken");
    let sweeping = {
        let store = store.clone();
        std::thread::spawn(move || store.sweep())
    };
    wait_for_one_session_on_a_lock(&store._namespace, "the sweep waiting on the row");
    takeover.commit().expect("committed");
    let swept = sweeping.join().expect("the sweep").expect("swept");
    assert_eq!(swept, 1, "only the expired result");
    let record = store.store.inspect(&key("taken")).expect("inspect").expect("kept");
    assert!(matches!(record.state, idem_core::RecordState::InFlight { .. }), "{record:?}");
}

/// Every session of the store commits synchronously, whatever the URL or a role says: a
/// completion acknowledged is on the server's disk.
#[test]
fn the_stores_sessions_commit_synchronously_whatever_the_url_says() {
    let namespace = Namespace::new();
    let url = format!("{}?options=-c%20synchronous_commit%3Doff", url());
    let store: PgStore<String> =
        PgStore::connect(&url, &namespace.0, StoreConfig::default()).expect("store");
    assert_eq!(store.session_setting("synchronous_commit").expect("shown"), "on");
}

/// Called from an async task (a thread that drives a tokio runtime), the blocking store
/// refuses with the reason instead of panicking, and loses none of its connections to
/// it; dropped inside an async task, it closes its connections without a panic.
#[test]
fn a_blocking_store_called_from_an_async_task_refuses_and_keeps_its_connections() {
    let namespace = Namespace::new();
    let store = PgStore::<String>::connect(&url(), &namespace.0, StoreConfig::default());
    let store = Arc::new(store.expect("connect"));
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
    let runtime = runtime.expect("a runtime");
    for _ in 0..6 {
        let store = store.clone();
        let answer = runtime.block_on(async move { store.claim(&key("from-a-task"), &fp()) });
        let Err(StoreError::Storage(why)) = &answer else { panic!("{answer:?}") };
        let why = why.downcast_ref::<PgError>();
        assert!(matches!(why, Some(PgError::InsideAsyncTask)), "{answer:?}");
    }
    let from_a_thread = store.claim(&key("from-a-thread"), &fp());
    assert!(matches!(from_a_thread, Ok(Claim::Acquired(_))), "{from_a_thread:?}");
    let store = Arc::try_unwrap(store).expect("the one handle");
    runtime.block_on(async move { drop(store) });
}

/// Holds the namespace's record count in a transaction of its own (`hold` locks its row),
/// claims `name` meanwhile, lets the claim wait 1.5 s on the server's clock behind it, then
/// commits: the claim's answer.
fn claim_behind_a_held_count(
    store: &Arc<PgStore<String>>,
    namespace: &Namespace,
    hold: &str,
    name: &'static str,
) -> Claim<String> {
    let mut admin = postgres::Client::connect(&url(), postgres::NoTls).expect("admin");
    let mut stalled = admin.transaction().expect("a transaction");
    stalled.batch_execute(hold).expect("the count held");
    let claiming = {
        let store = store.clone();
        std::thread::spawn(move || store.claim(&key(name), &fp()))
    };
    wait_for_one_session_on_a_lock(namespace, "the claim waiting on the record count");
    let waited_from = server_ms();
    idem_testkit::wait_until("1.5 s on the server's clock", Duration::from_secs(10), || {
        server_ms() >= waited_from + 1_500
    });
    stalled.commit().expect("committed");
    claiming.join().expect("the claimer").expect("claimed")
}

/// A fresh claim that waits on the namespace's record count (held by a claim whose session
/// stalled before its commit) for longer than its lease is handed a whole lease: counted
/// from when the row was written, the lease would have run out before anyone saw it, and
/// the next claim would recover the key at once.
#[test]
fn a_fresh_claim_that_waited_behind_another_gets_a_whole_lease() {
    let namespace = Namespace::new();
    let config = StoreConfig::builder().lease(Duration::from_secs(1)).build().expect("valid");
    let store = PgStore::<String>::connect(&url(), &namespace.0, config).expect("connect");
    let store = Arc::new(store);
    let count = format!("UPDATE \"{}\".meta SET records = records WHERE id = 1", namespace.0);
    let claim = claim_behind_a_held_count(&store, &namespace, &count, "fresh");
    assert!(matches!(claim, Claim::Acquired(_)), "{claim:?}");
    let state = store.lookup(&key("fresh"), &fp()).expect("lookup");
    assert!(matches!(state, KeyState::InFlight { .. }), "a whole lease: {state:?}");
    let again = store.claim(&key("fresh"), &fp()).expect("claim");
    assert!(matches!(again, Claim::InFlight { .. }), "not recovered at once: {again:?}");
}

/// Two takeovers of expired results in one scope with a quota of one: the second counts
/// the scope's claims in flight only once the first has committed (it waits on the record
/// count's lock the first holds), and is refused by the quota instead of passing beside
/// it.
#[test]
fn two_takeovers_in_one_scope_are_counted_against_its_quota_in_turn() {
    let store = with_expired_results(StoreConfig::builder().scope_in_flight_max(1), &["k1", "k2"]);
    // The first takeover (of k2), as another session makes it: its row, then the count.
    let namespace = &store._namespace.0;
    let mut admin = postgres::Client::connect(&url(), postgres::NoTls).expect("admin");
    let mut first = admin.transaction().expect("a transaction");
    take_over_by_hand(&mut first, namespace, "k2");
    let lock = format!("SELECT 1 FROM \"{namespace}\".meta WHERE id = 1 FOR UPDATE");
    first.query_one(&lock, &[]).expect("the count locked");
    let second = {
        let store = store.clone();
        std::thread::spawn(move || store.claim(&key("k1"), &fp()))
    };
    wait_for_one_session_on_a_lock(&store._namespace, "the second takeover's count waiting");
    first.commit().expect("committed");
    let refused = second.join().expect("the second claimer");
    assert!(matches!(refused, Err(StoreError::ScopeQuota { .. })), "{refused:?}");
}

/// A store (`config` with a result lifetime of a minute, on a manual clock) whose keys
/// `names` were claimed, completed, and their results have run out.
fn with_expired_results(config: idem_core::StoreConfigBuilder, names: &[&str]) -> Arc<TestStore> {
    let clock = Arc::new(ManualClock::new(idem_core::Timestamp::from_millis(1_000_000)));
    let ttl = Duration::from_secs(60);
    let store = postgres(config.result_ttl(ttl).build().expect("valid"), clock.clone());
    for name in names {
        let Claim::Acquired(lease) = store.claim(&key(name), &fp()).expect("claim") else {
            panic!("a fresh key")
        };
        store.complete(&lease, (*name).into()).expect("complete");
    }
    clock.advance(ttl * 2);
    Arc::new(store)
}

/// Takes key `name` of `namespace` over in `tx`, as another session's claim would: its row
/// locked until `tx` ends, in flight under a later token.
pub(crate) fn take_over_by_hand(tx: &mut postgres::Transaction<'_>, namespace: &str, name: &str) {
    let over = format!(
        "UPDATE \"{namespace}\".claims SET finished = FALSE, token = token + 1000000, \
         lease_expires_at = 9000000000000000, expires_at = 0, result = NULL WHERE key = $1"
    );
    assert_eq!(tx.execute(&over, &[&name]).expect("taken over"), 1);
}

/// A takeover in a scope with a quota that waits on the record count (held by a claim
/// whose session stalled) for longer than its lease is handed a whole lease all the same.
#[test]
fn a_takeover_that_waited_on_the_count_gets_a_whole_lease() {
    let namespace = Namespace::new();
    let lease = Duration::from_secs(1);
    let config = StoreConfig::builder()
        .lease(lease)
        .result_ttl(Duration::from_millis(1))
        .scope_in_flight_max(2)
        .build()
        .expect("valid");
    let store = PgStore::<String>::connect(&url(), &namespace.0, config).expect("connect");
    let store = Arc::new(store);
    let Claim::Acquired(first) = store.claim(&key("k1"), &fp()).expect("claim") else {
        panic!("a fresh key")
    };
    store.complete(&first, "done".into()).expect("complete");
    let expired_from = server_ms();
    idem_testkit::wait_until("the result expired", Duration::from_secs(10), || {
        server_ms() >= expired_from + 10
    });
    let lock = format!("SELECT 1 FROM \"{}\".meta WHERE id = 1 FOR UPDATE", namespace.0);
    let claim = claim_behind_a_held_count(&store, &namespace, &lock, "k1");
    assert!(matches!(claim, Claim::Acquired(_)), "{claim:?}");
    let again = store.claim(&key("k1"), &fp()).expect("claim");
    assert!(matches!(again, Claim::InFlight { .. }), "not recovered at once: {again:?}");
}
