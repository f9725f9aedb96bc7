//! The checkout example's service on a real loopback port, and a real HTTP/1 client: one
//! that sends duplicates at once, and one that gives up on slow answers and retries with
//! the same key. One charge per intended payment; without the layer, one per request.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use idem_core::{MemoryStore, StoreConfig};
use idem_payments::SimulatedGateway;

#[path = "../../examples/checkout_server/app.rs"]
#[allow(dead_code, unreachable_pub)]
mod app;
#[path = "../common/checkout_client.rs"]
mod checkout_client;
#[path = "../common/own_runtime.rs"]
mod own_runtime;
#[path = "../../examples/checkout_server/remote.rs"]
#[allow(dead_code, unreachable_pub)]
mod remote;
#[path = "../../examples/checkout_server/serve.rs"]
#[allow(dead_code, unreachable_pub)]
mod serve;

use checkout_client::post;

/// Serves `mode` on a fresh loopback port, on a gateway that takes `latency` per charge.
/// The server has its own runtime on its own thread: the simulated gateway blocks its
/// thread for `latency`, and must not stall the client's timers.
async fn serve(mode: app::Mode, latency: Duration) -> (SocketAddr, Arc<app::Shop>) {
    let store = Arc::new(MemoryStore::new(StoreConfig::default()));
    let gateway = SimulatedGateway::new().without_dedup().with_latency(latency);
    let (router, shop) = app::router_on(mode, store, gateway);
    let addr = own_runtime::serve_on_own_runtime(router);
    (addr, shop)
}

/// A client that gives up on an answer after `patience` and retries with the same key,
/// doubling its patience, until it gets an answer (at most 12 attempts).
async fn patient_client(addr: SocketAddr, key: String) -> (u16, String, u32) {
    let mut patience = Duration::from_millis(5);
    for attempt in 1..=12 {
        if let Ok(Ok((status, _, body))) = tokio::time::timeout(patience, post(addr, &key)).await {
            return (status, body, attempt);
        }
        patience *= 2;
    }
    panic!("no answer for {key} in 12 attempts");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_duplicates_over_sockets_charge_once() {
    let (addr, shop) = serve(app::Mode::Idempotent, Duration::ZERO).await;
    let duplicates: Vec<_> = (0..16).map(|_| tokio::spawn(post(addr, "order-1"))).collect();
    let mut bodies = Vec::new();
    for duplicate in duplicates {
        let (status, _, body) =
            crate::bounded("a duplicate", duplicate).await.expect("task").expect("http");
        assert_eq!(status, 201, "{body}");
        bodies.push(body);
    }
    bodies.dedup();
    assert_eq!(bodies.len(), 1, "every duplicate got the one charge: {bodies:?}");
    assert_eq!(shop.gateway.totals().charges, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_retries_on_timeouts_charges_once_per_intent() {
    // A gateway slower than the client's first patience: every intent is retried.
    let (addr, shop) = serve(app::Mode::Idempotent, Duration::from_millis(20)).await;
    let clients: Vec<_> =
        (0..4).map(|i| tokio::spawn(patient_client(addr, format!("intent-{i}")))).collect();
    let mut requests = 0;
    for client in clients {
        let (status, body, attempts) = crate::bounded("a client", client).await.expect("client");
        assert!(status == 201 || status == 200, "{status}: {body}");
        assert!(attempts >= 2, "the first attempt (5 ms) gave up on a 20 ms gateway");
        requests += attempts;
    }
    assert_eq!(shop.gateway.totals().charges, 4, "one charge per intent, for {requests} requests");
}

/// A request on a new connection with any method, key and body: status and body.
async fn send_raw(
    addr: SocketAddr,
    method: http::Method,
    key: Option<&str>,
) -> Result<(u16, String), hyper::Error> {
    let stream = tokio::net::TcpStream::connect(addr).await.expect("the server listens");
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    let mut request = http::Request::builder().method(method).uri("/checkout");
    request = request.header("host", addr.to_string());
    if let Some(key) = key {
        request = request.header("idempotency-key", format!("\"{key}\""));
    }
    let body = Full::new(Bytes::from_static(b"customer=cus_1&amount=1050&currency=EUR"));
    let response = sender.send_request(request.body(body).expect("valid")).await?;
    let status = response.status().as_u16();
    let body = response.into_body().collect().await?.to_bytes();
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}

/// A payment without a key is refused with a 400 that says why, not an empty reply.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payment_without_a_key_is_400_and_charges_nothing() {
    let (addr, shop) = serve(app::Mode::Idempotent, Duration::ZERO).await;
    let (status, body) = send_raw(addr, http::Method::POST, None).await.expect("an answer");
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("key-missing"), "{body}");
    assert_eq!(shop.gateway.totals().charges, 0);
}

/// The router's own 405 (a PATCH to the POST-only route) is never stored under the key:
/// a POST with that key afterwards charges, instead of being refused as a reused key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_patch_to_the_post_route_is_405_and_never_kept_under_its_key() {
    let (addr, shop) = serve(app::Mode::Idempotent, Duration::ZERO).await;
    let (status, _) = send_raw(addr, http::Method::PATCH, Some("k1")).await.expect("answer");
    assert_eq!(status, 405);
    let (status, body) = send_raw(addr, http::Method::POST, Some("k1")).await.expect("answer");
    assert_eq!(status, 201, "the key is fresh for the POST: {body}");
    assert_eq!(shop.gateway.totals().charges, 1);
}

/// A gateway that charges and loses its answer: the customer is told the outcome is not
/// known (never the gateway's own words), the key stays in flight, and the retry after the
/// lease asks the gateway and answers with the one charge. Never two charges, never a stored
/// 502 for a payment that was made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_charge_whose_answer_was_lost_is_recovered_not_stored_as_a_failure() {
    let clock = Arc::new(idem_core::ManualClock::new(idem_core::Timestamp::from_millis(1)));
    let store = Arc::new(MemoryStore::with_clock(StoreConfig::default(), clock.clone()));
    let gateway = SimulatedGateway::new().without_dedup();
    gateway.inject(idem_payments::Fault::ChargeThenTimeout);
    let (router, shop) = app::router_on(app::Mode::Idempotent, store, gateway);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let addr = listener.local_addr().expect("bound");
    tokio::spawn(async move { axum::serve(listener, router).await });
    let (status, _, body) = post(addr, "order-9").await.expect("an answer");
    assert_eq!(status, 502, "{body}");
    assert!(body.contains("not known") && !body.contains("timed out"), "{body}");
    // (A retry in the lease would wait for the first, up to the example's 10 s, then get
    // 409: the layer's own tests show that case without the wait.)
    clock.advance(StoreConfig::LEASE_DEFAULT);
    let (status, _, body) = post(addr, "order-9").await.expect("an answer");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"how\":\"recovered\""), "{body}");
    assert_eq!(shop.gateway.totals().charges, 1, "one charge");
}

/// A client that gives up while its charge is under way (a 200 ms gateway, a 50 ms
/// timeout) and closes its connection: the handler is not cancelled with it. It charges
/// once, its answer is stored, and the client's retry with the same key replays it:
/// never a recovery after the lease, never a second charge.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_leaves_mid_handler_gets_a_replay_on_its_retry() {
    let (addr, shop) = serve(app::Mode::Idempotent, Duration::from_millis(200)).await;
    for i in 0..4 {
        let key = format!("left-{i}");
        let gave_up = tokio::time::timeout(Duration::from_millis(50), post(addr, &key)).await;
        assert!(gave_up.is_err(), "the first attempt gave up before the gateway answered");
        // The example waits for a request in flight (up to 10 s) and then replays it.
        let (status, replayed, body) = post(addr, &key).await.expect("an answer");
        assert_eq!((status, replayed), (201, true), "{body}");
        assert!(!body.contains("recovered"), "the handler finished, nothing to recover: {body}");
    }
    assert_eq!(shop.gateway.totals().charges, 4, "one charge per intent");
}

/// The same over a handler that awaits (a charge over the network): hyper drops the
/// future of a request whose client closed its connection, at its next await. The layer
/// runs the claimed handler on a task of its own, so it ends its work, its answer is
/// stored, and the retry replays it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_awaiting_handler_whose_client_left_finishes_and_its_answer_replays() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let finished = Arc::new(AtomicUsize::new(0));
    let counter = finished.clone();
    let handler = move || {
        let counter = counter.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
            (http::StatusCode::CREATED, format!("charged {n}"))
        }
    };
    let config = idem_http::Config::builder()
        .wait_for_first(Some(Duration::from_secs(5)))
        .build()
        .expect("valid");
    let store = Arc::new(MemoryStore::new(StoreConfig::default()));
    let layer = idem_http::IdempotencyLayer::with_config(store, |_: &_| Some("t".into()), config);
    let router = axum::Router::new()
        .route("/checkout", axum::routing::post(handler))
        .layer(layer.expect("fits"));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let addr = listener.local_addr().expect("bound");
    tokio::spawn(async move { axum::serve(listener, router).await });
    let gave_up = tokio::time::timeout(Duration::from_millis(50), post(addr, "k")).await;
    assert!(gave_up.is_err(), "the client gave up before the handler answered");
    let (status, replayed, body) = post(addr, "k").await.expect("an answer");
    assert_eq!((status, replayed, body.as_str()), (201, true, "charged 1"));
    assert_eq!(finished.load(Ordering::SeqCst), 1, "one run, to its end");
}

/// The example's server within `limits`, on a fresh port, with the memory store.
async fn serve_within(limits: serve::Limits) -> (SocketAddr, Arc<app::Shop>) {
    let store = Arc::new(MemoryStore::new(StoreConfig::default()));
    let (router, shop) = app::router(app::Mode::Idempotent, store);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let addr = listener.local_addr().expect("bound");
    tokio::spawn(serve::serve(listener, router, limits, std::future::pending()));
    (addr, shop)
}

/// Reads from `stream` until the server closes it; what it sent.
async fn until_closed(stream: &mut tokio::net::TcpStream) -> String {
    use tokio::io::AsyncReadExt;
    let mut said = Vec::new();
    let read = stream.read_to_end(&mut said);
    crate::bounded("the server to close the connection", read).await.expect("read");
    String::from_utf8_lossy(&said).into_owned()
}

/// A client that sends its headers and half its body, then stalls: the body timeout
/// answers 400 and ends the connection, and nothing is charged; one that stalls inside
/// its headers has its connection closed by the header timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_half_sent_request_is_cut_off_and_charges_nothing() {
    use tokio::io::AsyncWriteExt;
    let limits = serve::Limits {
        header_timeout: Duration::from_millis(200),
        body_timeout: Duration::from_millis(200),
        ..serve::Limits::default()
    };
    let (addr, shop) = serve_within(limits).await;
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let head = "POST /checkout HTTP/1.1\r\nhost: x\r\nidempotency-key: \"k1\"\r\n\
                content-type: application/x-www-form-urlencoded\r\ncontent-length: 40\r\n\r\n\
                customer=cus_1";
    stream.write_all(head.as_bytes()).await.expect("sent");
    let said = until_closed(&mut stream).await;
    assert!(said.starts_with("HTTP/1.1 400"), "{said}");
    assert_eq!(shop.gateway.totals().charges, 0);
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    stream.write_all(b"POST /checkout HTTP/1.1\r\nhost: x\r\n").await.expect("sent");
    let said = until_closed(&mut stream).await;
    assert!(!said.contains("201"), "nothing served on half a head: {said}");
}

/// At its connection bound the server serves no more connections until one closes: a
/// third client behind two idle ones is answered once one of them leaves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_its_connection_bound_a_client_waits_for_a_connection_to_close() {
    let limits = serve::Limits { connections_max: 2, ..serve::Limits::default() };
    let (addr, _) = serve_within(limits).await;
    let idle = [
        tokio::net::TcpStream::connect(addr).await.expect("connect"),
        tokio::net::TcpStream::connect(addr).await.expect("connect"),
    ];
    let third = tokio::spawn(post(addr, "k3"));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!third.is_finished(), "the third connection waits while two are held");
    drop(idle);
    let (status, _, body) = crate::bounded("the third", third).await.expect("task").expect("http");
    assert_eq!(status, 201, "{body}");
}

/// Tells the gateway at `addr` which faults to inject (its `POST /faults`).
async fn tell_gateway(addr: SocketAddr, faults: &str) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("the gateway listens");
    let request = format!(
        "POST /faults HTTP/1.1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{faults}",
        faults.len()
    );
    stream.write_all(request.as_bytes()).await.expect("sent");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.expect("an answer");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

/// The checkout on a fresh loopback port, its payments sent to the gateway at `gateway`.
async fn serve_on_remote(
    store: Arc<MemoryStore<idem_http::StoredResponse>>,
    gateway: SocketAddr,
) -> SocketAddr {
    let (router, shop) = app::router_on(app::Mode::Idempotent, store, SimulatedGateway::new());
    let remote = remote::RemoteGateway::parse(&format!("http://{gateway}")).expect("a URL");
    shop.remote.set(remote).expect("set once");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let addr = listener.local_addr().expect("bound");
    tokio::spawn(async move { axum::serve(listener, router).await });
    addr
}

/// The gateway on the other side of a network (the cluster harness's, on its own threads,
/// its charges in a synced file): a charge whose answer the gateway drops is unknown to
/// the checkout (502, not stored), and the retry after the lease asks the gateway by key
/// and answers with that one charge.
/// The layer stops a run by dropping its handler where it waits; a payment on the
/// blocking pool goes on. One still asking the gateway about a recovered key when its run
/// is dropped sends no charge after that (another server may be recovering the key, and
/// its lookup would not see a charge still to come).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payment_whose_run_was_dropped_sends_no_charge() {
    use std::io::{BufRead, BufReader, Write};
    // A gateway that tells the test each request's first line, and answers a lookup
    // (nothing charged) only when the test says.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let gateway = listener.local_addr().expect("bound");
    let (heard, hears) = std::sync::mpsc::channel::<String>();
    let (answer, answers) = std::sync::mpsc::channel::<()>();
    let told = heard.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut line = String::new();
            let _ = BufReader::new(&stream).read_line(&mut line);
            let lookup = line.starts_with("GET /lookup");
            let _ = told.send(line);
            if lookup && answers.recv().is_ok() {
                let _ = stream.write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n");
            }
        }
    });
    let store = Arc::new(MemoryStore::new(StoreConfig::default()));
    let (_, shop) = app::router_on(app::Mode::Idempotent, store, SimulatedGateway::new());
    let remote = remote::RemoteGateway::parse(&format!("http://{gateway}")).expect("a URL");
    shop.remote.set(remote).expect("set once");
    let mut headers = http::HeaderMap::new();
    headers.insert("idempotency-key", http::HeaderValue::from_static("\"intent-1\""));
    let order = "customer=cus_1&amount=1050&currency=EUR";
    let run = tokio::spawn(async move {
        let paid = shop.paying(move |shop, gone| {
            let paid = app::pay(shop, gone, true, &headers, order);
            let _ = heard.send("the payment ended".into());
            paid
        });
        paid.await
    });
    let first = hears.recv().expect("the lookup");
    assert!(first.starts_with("GET /lookup"), "{first}");
    // Dropped where it waits, as the layer stops a run whose lease it cannot vouch for.
    run.abort();
    assert!(run.await.is_err_and(|e| e.is_cancelled()));
    answer.send(()).expect("the gateway waits");
    let next = hears.recv_timeout(Duration::from_secs(30)).expect("the payment ends");
    assert_eq!(next, "the payment ended", "the gateway was called after the run was dropped");
    // A connection the payment opened before it ended is accepted before this one.
    let mut last = std::net::TcpStream::connect(gateway).expect("the gateway listens");
    last.write_all(b"LAST\r\n").expect("written");
    let after = hears.recv_timeout(Duration::from_secs(30)).expect("the gateway hears it");
    assert_eq!(after, "LAST\r\n", "the payment connected to the gateway after its run was dropped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_gateway_is_asked_before_a_recovering_request_charges() {
    let charges = idem_testkit::scratch_dir("remote-gateway").join("charges.log");
    let gateway = idem_crash::GatewayServer::start(&charges, "127.0.0.1:0", 7).expect("gateway");
    let clock = Arc::new(idem_core::ManualClock::new(idem_core::Timestamp::from_millis(1)));
    let store = Arc::new(MemoryStore::with_clock(StoreConfig::default(), clock.clone()));
    let addr = serve_on_remote(store, gateway.addr()).await;
    tell_gateway(gateway.addr(), "drop_permille=1000").await;
    let (status, _, body) = post(addr, "order-1").await.expect("an answer");
    assert_eq!(status, 502, "{body}");
    tell_gateway(gateway.addr(), "drop_permille=0").await;
    clock.advance(StoreConfig::LEASE_DEFAULT);
    let (status, _, body) = post(addr, "order-1").await.expect("an answer");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"how\":\"recovered\""), "{body}");
    assert_eq!(idem_crash::FileGateway::charges(&charges).expect("the file").len(), 1);
}

/// A gateway that cannot be reached charged nothing: 503 saying so, and the key is
/// released, so the retry runs again (here, and finds it down again) rather than waiting
/// out a lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_gateway_charged_nothing_and_the_retry_runs_again() {
    // Bound and never listening: a connect is refused, and no listener of another test
    // can take the port while this one runs.
    let refusing = tokio::net::TcpSocket::new_v4().expect("a socket");
    refusing.bind("127.0.0.1:0".parse().expect("an address")).expect("a port");
    let nobody = refusing.local_addr().expect("bound");
    let addr = serve_on_remote(Arc::new(MemoryStore::new(StoreConfig::default())), nobody).await;
    for attempt in 1..=2 {
        let (status, replayed, body) = post(addr, "order-2").await.expect("an answer");
        assert_eq!((status, replayed), (503, false), "attempt {attempt}: {body}");
        assert!(body.contains("nothing was charged"), "{body}");
    }
}

/// What the gateway answers decides what the checkout may do: a decline is the customer's
/// answer (402, kept: a retry is declined again without asking the gateway), a failure
/// before charging released the key (503, and the retry, the gateway back, charges once).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decline_is_kept_and_a_failure_before_charging_lets_the_retry_charge() {
    let charges = idem_testkit::scratch_dir("remote-answers").join("charges.log");
    let gateway = idem_crash::GatewayServer::start(&charges, "127.0.0.1:0", 7).expect("gateway");
    let addr =
        serve_on_remote(Arc::new(MemoryStore::new(StoreConfig::default())), gateway.addr()).await;
    let declined = "customer=cus_1&amount=666&currency=EUR";
    for attempt in 1..=2 {
        let (status, replayed, body) =
            checkout_client::post_order(addr, "order-d", declined).await.expect("an answer");
        assert_eq!((status, replayed), (402, attempt == 2), "attempt {attempt}: {body}");
    }
    tell_gateway(gateway.addr(), "fail_permille=1000").await;
    let (status, _, body) = post(addr, "order-f").await.expect("an answer");
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("nothing was charged"), "{body}");
    tell_gateway(gateway.addr(), "fail_permille=0").await;
    let (status, replayed, body) = post(addr, "order-f").await.expect("an answer");
    assert_eq!((status, replayed), (201, false), "{body}");
    assert_eq!(idem_crash::FileGateway::charges(&charges).expect("the file").len(), 1);
}
