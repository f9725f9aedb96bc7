//! A server that stops answering with its socket open (a process paused, a proxy or a
//! link that holds the bytes): every call of either store ends at its bound with
//! `PgError::TimedOut`, and the store works again once the server answers. And one that
//! closes the store's connections between calls: none of them is lent.
//!
//! A proxy in this process forwards the store's connections to the test server; frozen,
//! it keeps every socket open and passes nothing on, either way.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use idem_core::{AsyncKeyStore, Claim, KeyStore, StoreConfig, StoreError};
use idem_store_postgres::{AsyncPgStore, PgError, PgStore};
use idem_testkit::runtime;
use parking_lot::{Condvar, Mutex};

use super::{Namespace, fp, key, url};

/// The bound the tests give each call: long enough for a reconnect (TCP, authentication),
/// which it bounds too, on a loaded machine (300 ms failed a reconnect once in ten runs
/// beside four busy loops).
const CALL_WAIT: Duration = Duration::from_secs(1);
/// How long a test waits for a call that should end at its bound (or for a connect, at
/// the statement timeout of 5 s) before it calls it a hang.
const HANG: Duration = Duration::from_secs(30);

#[derive(Default)]
struct Gate {
    frozen: Mutex<bool>,
    thawed: Condvar,
}

impl Gate {
    fn set(&self, frozen: bool) {
        *self.frozen.lock() = frozen;
        self.thawed.notify_all();
    }

    fn pass(&self) {
        let mut frozen = self.frozen.lock();
        while *frozen {
            self.thawed.wait(&mut frozen);
        }
    }
}

/// The proxy: its port, its gate (every connection's), each connection's own gate, and
/// every socket it holds (shut down when dropped).
struct Proxy {
    port: u16,
    gate: Arc<Gate>,
    own_gates: Arc<Mutex<Vec<Arc<Gate>>>>,
    sockets: Arc<Mutex<Vec<TcpStream>>>,
    closed: Arc<AtomicBool>,
}

impl Proxy {
    /// A proxy to `upstream`, frozen from the start if `frozen` (a port that takes
    /// connections and never answers).
    fn to(upstream: u16, frozen: bool) -> Self {
        let listener = TcpListener::bind(("127.0.0.1", 0)).expect("a free port");
        let port = listener.local_addr().expect("bound").port();
        let gate = Arc::new(Gate { frozen: Mutex::new(frozen), thawed: Condvar::new() });
        let sockets = Arc::new(Mutex::new(Vec::new()));
        let closed = Arc::new(AtomicBool::new(false));
        let own_gates: Arc<Mutex<Vec<Arc<Gate>>>> = Arc::default();
        let (accepting, held, closing) = (gate.clone(), sockets.clone(), closed.clone());
        let owns = own_gates.clone();
        thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                if closing.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)) else { return };
                let mut sockets = held.lock();
                for stream in [&client, &server] {
                    sockets.push(stream.try_clone().expect("a socket's handle"));
                }
                let pair = |a: &TcpStream, b: &TcpStream| {
                    (a.try_clone().expect("handle"), b.try_clone().expect("handle"))
                };
                let (up, down) = (pair(&client, &server), pair(&server, &client));
                let own = Arc::new(Gate::default());
                owns.lock().push(own.clone());
                let gates = [accepting.clone(), own];
                let (g1, g2) = (gates.clone(), gates);
                thread::spawn(move || pump(up.0, up.1, &g1));
                thread::spawn(move || pump(down.0, down.1, &g2));
            }
        });
        Self { port, gate, own_gates, sockets, closed }
    }

    /// Every connection, those opened later too, stops passing bytes on.
    fn freeze(&self) {
        self.gate.set(true);
    }

    /// The connections open now stop passing bytes on; new ones pass them (a failover
    /// behind a proxy, a middlebox that lost its state).
    fn freeze_existing(&self) {
        self.own_gates.lock().iter().for_each(|gate| gate.set(true));
    }

    fn thaw(&self) {
        self.gate.set(false);
        self.own_gates.lock().iter().for_each(|gate| gate.set(false));
    }

    /// Closes every connection open now, both ways, as a server that ends its sessions
    /// does (a restart, an idle session timeout); new connections pass. On loopback the
    /// close has reached the store's socket when this returns.
    fn cut(&self) {
        for socket in self.sockets.lock().drain(..) {
            let _ = socket.shutdown(Shutdown::Both);
        }
    }

    /// The test server's URL, through this proxy.
    fn url(&self) -> String {
        let upstream = format!(":{}/", upstream_port());
        url().replacen(&upstream, &format!(":{}/", self.port), 1)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.closed.store(true, Ordering::SeqCst);
        self.thaw();
        for socket in self.sockets.lock().drain(..) {
            let _ = socket.shutdown(Shutdown::Both);
        }
        // Wakes the accepting thread, which then ends.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// Copies `from` to `to`, each read passed on only while both gates are open.
fn pump(mut from: TcpStream, mut to: TcpStream, gates: &[Arc<Gate>; 2]) {
    let mut buffer = [0_u8; 16 * 1024];
    while let Ok(read) = from.read(&mut buffer) {
        gates.iter().for_each(|gate| gate.pass());
        if read == 0 || to.write_all(&buffer[..read]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}

/// The test server's port, from its URL.
fn upstream_port() -> u16 {
    let config: idem_store_postgres::tokio_postgres::Config = url().parse().expect("a URL");
    config.get_ports().first().copied().unwrap_or(5432)
}

/// Whether `answer` is the store's own "no answer within the bound".
fn timed_out<T: std::fmt::Debug>(answer: &Result<T, StoreError>) -> bool {
    let Err(StoreError::Storage(why)) = answer else { return false };
    matches!(why.downcast_ref::<PgError>(), Some(PgError::TimedOut { .. }))
}

/// Whether `answer` is the store's "no answer within `bound`".
fn timed_out_after<T: std::fmt::Debug>(answer: &Result<T, StoreError>, bound: Duration) -> bool {
    let Err(StoreError::Storage(why)) = answer else { return false };
    matches!(why.downcast_ref::<PgError>(), Some(PgError::TimedOut { waited }) if *waited == bound)
}

/// Runs `call` on a thread of its own; its answer, or a panic naming `what` after [`HANG`].
fn within_hang<T: Send + 'static>(what: &str, call: impl FnOnce() -> T + Send + 'static) -> T {
    let (answered, answer) = mpsc::channel();
    thread::spawn(move || answered.send(call()));
    answer.recv_timeout(HANG).unwrap_or_else(|_| panic!("{what}: no end within {HANG:?}"))
}

#[test]
fn a_blocking_call_to_a_server_that_stops_answering_ends_at_its_bound() {
    let (namespace, proxy) = (Namespace::new(), Proxy::to(upstream_port(), false));
    let store = PgStore::<String>::connect(&proxy.url(), &namespace.0, StoreConfig::default());
    let store = Arc::new(store.expect("connects through the proxy").with_call_wait_max(CALL_WAIT));
    assert!(matches!(store.claim(&key("before"), &fp()), Ok(Claim::Acquired(_))));
    proxy.freeze();
    // More calls than the store has connections: each closes the one it got no answer
    // on, and its place opens a new one at its next use (none is lost).
    // Each ends at the store's own bound, a reconnect's included (it waited the 5 s
    // connect bound before).
    for attempt in 0..5 {
        let frozen = store.clone();
        let answer = within_hang("a claim", move || frozen.claim(&key("during"), &fp()));
        assert!(timed_out_after(&answer, CALL_WAIT), "attempt {attempt}: {answer:?}");
    }
    proxy.thaw();
    // The connections that got no answer were closed; new ones are opened.
    let after = within_hang("a claim after", {
        let store = store.clone();
        move || store.claim(&key("after"), &fp())
    });
    assert!(matches!(after, Ok(Claim::Acquired(_))), "{after:?}");
}

#[test]
fn a_blocking_connect_to_a_port_that_never_answers_ends_at_its_bound() {
    let proxy = Proxy::to(upstream_port(), true);
    let url = proxy.url();
    let answer = within_hang("a connect", move || {
        PgStore::<String>::connect(&url, "idem_never", StoreConfig::default()).map(|_| ())
    });
    assert!(timed_out(&answer), "{answer:?}");
}

/// The server ends the store's sessions while no call runs: its goodbye is read before a
/// connection is lent, so no call fails for it; each opens a new connection in the closed
/// one's place.
#[test]
fn a_connection_the_server_closed_between_calls_is_replaced_before_use() {
    closed_between_calls(|calls| calls());
}

/// The same from `spawn_blocking`, whose thread holds a runtime's handle and may block.
#[test]
fn a_connection_closed_between_calls_is_replaced_for_a_spawn_blocking_caller() {
    closed_between_calls(|calls| {
        let blocking = runtime().block_on(async { tokio::task::spawn_blocking(calls).await });
        blocking.expect("the blocking calls end")
    });
}

/// Eight claims made by `run` after the proxy closed every connection of the store.
fn closed_between_calls(
    run: impl FnOnce(Box<dyn FnOnce() -> Vec<Claimed> + Send>) -> Vec<Claimed>,
) {
    let (namespace, proxy) = (Namespace::new(), Proxy::to(upstream_port(), false));
    let store = PgStore::<String>::connect(&proxy.url(), &namespace.0, StoreConfig::default());
    let store = Arc::new(store.expect("connects through the proxy"));
    assert!(matches!(store.claim(&key("before"), &fp()), Ok(Claim::Acquired(_))));
    proxy.cut();
    let calling = store.clone();
    let claims = run(Box::new(move || {
        (0..8).map(|i| calling.claim(&key(&format!("after-{i}")), &fp())).collect()
    }));
    for (i, claim) in claims.iter().enumerate() {
        assert!(matches!(claim, Ok(Claim::Acquired(_))), "call {i}: {claim:?}");
    }
    assert!(matches!(store.claim(&key("before"), &fp()), Ok(Claim::InFlight { .. })));
}

/// A claim's answer.
type Claimed = Result<Claim<String>, StoreError>;

/// An async store through `proxy`, waiting 100 ms for a free connection and [`CALL_WAIT`]
/// for the server's answers.
fn async_through(proxy: &Proxy, namespace: &Namespace) -> AsyncPgStore<String> {
    let through = proxy.url();
    runtime().block_on(async {
        let store = AsyncPgStore::<String>::connect(&through, &namespace.0, Default::default());
        let store = store.await.expect("connects through the proxy");
        store.with_pool_wait_max(Duration::from_millis(100)).with_call_wait_max(CALL_WAIT)
    })
}

/// Claims `name` on `store`; its answer, or a panic after [`HANG`].
fn async_claim(store: &AsyncPgStore<String>, name: &str) -> Result<Claim<String>, StoreError> {
    let (k, request) = (key(name), fp());
    let bounded = async { tokio::time::timeout(HANG, store.claim(&k, &request)).await };
    runtime().block_on(bounded).unwrap_or_else(|_| panic!("{name}: no end within {HANG:?}"))
}

#[test]
fn an_async_call_to_a_server_that_stops_answering_ends_at_its_bound() {
    let (namespace, proxy) = (Namespace::new(), Proxy::to(upstream_port(), false));
    let store = async_through(&proxy, &namespace);
    let claim = |name: &str| async_claim(&store, name);
    assert!(matches!(claim("before"), Ok(Claim::Acquired(_))));
    proxy.freeze();
    // The first gets no answer on its connection, which leaves the pool; the next opens a
    // new one, which cannot connect: it ends at the call's bound too.
    for _ in 0..2 {
        let answer = claim("during");
        assert!(timed_out(&answer), "{answer:?}");
    }
    proxy.thaw();
    let after = claim("after");
    assert!(matches!(after, Ok(Claim::Acquired(_))), "{after:?}");
    runtime().block_on(async { drop(store) });
}

/// The connections an async store holds go silent while new ones would be answered (a
/// failover behind a proxy): the call that got no answer takes its connection out of the
/// pool, and the next call, on a new connection, is answered.
#[test]
fn an_async_store_replaces_a_connection_that_stopped_answering() {
    let (namespace, proxy) = (Namespace::new(), Proxy::to(upstream_port(), false));
    let store = async_through(&proxy, &namespace);
    let claim = |name: &str| async_claim(&store, name);
    assert!(matches!(claim("before"), Ok(Claim::Acquired(_))));
    proxy.freeze_existing();
    let answers: Vec<_> = (0..4).map(|i| claim(&format!("after-{i}"))).collect();
    assert!(timed_out(&answers[0]), "the silent connection's call: {:?}", answers[0]);
    assert!(answers[1..].iter().all(|a| matches!(a, Ok(Claim::Acquired(_)))), "{answers:?}");
    proxy.thaw();
    runtime().block_on(async { drop(store) });
}

/// A call its caller gives up (a timeout of its own, shorter than the store's bound, or
/// an aborted task) on a connection gone silent takes that connection out of the pool
/// too: the next call, on a new connection, is answered at once, where the silent one
/// would have held it for the store's whole bound.
#[test]
fn a_call_given_up_by_its_caller_on_a_silent_connection_takes_it_out_of_the_pool() {
    let (namespace, proxy) = (Namespace::new(), Proxy::to(upstream_port(), false));
    let store = async_through(&proxy, &namespace);
    assert!(matches!(async_claim(&store, "before"), Ok(Claim::Acquired(_))));
    proxy.freeze_existing();
    let (k, request) = (key("given-up"), fp());
    let given_up = async { tokio::time::timeout(CALL_WAIT / 4, store.claim(&k, &request)).await };
    let given_up = runtime().block_on(given_up);
    assert!(given_up.is_err(), "the silent connection cannot answer: {given_up:?}");
    let next = async_claim(&store, "next");
    assert!(matches!(next, Ok(Claim::Acquired(_))), "{next:?}");
    proxy.thaw();
    runtime().block_on(async { drop(store) });
}
