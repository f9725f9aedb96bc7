//! The client against idem-http's own checkout server over real sockets, with faults in
//! between: an answer lost after the server committed, a slow first attempt, a storm of
//! duplicates that meet 409s. One charge per intent, every time; and against the naive
//! checkout, which ignores the header, what the client cannot fix.

#[path = "../../idem-http/examples/checkout_server/app.rs"]
#[allow(dead_code, unreachable_pub)]
mod app;
#[path = "../../idem-http/tests/common/own_runtime.rs"]
mod own_runtime;
#[path = "../../idem-http/examples/checkout_server/remote.rs"]
#[allow(dead_code, unreachable_pub)]
mod remote;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use idem_client::{Attempts, ClientError, IdempotentRetry, Intent, RetryPolicy};
use idem_core::{MemoryStore, StoreConfig};
use idem_payments::SimulatedGateway;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const ORDER: &str = "customer=cus_1&amount=1050&currency=EUR";

/// The checkout (`mode`) on a fresh loopback port, its gateway taking `latency` a charge.
/// Its own runtime on its own thread: the simulated gateway blocks its thread.
fn serve(mode: app::Mode, latency: Duration) -> (SocketAddr, Arc<app::Shop>) {
    let store = Arc::new(MemoryStore::new(StoreConfig::default()));
    let gateway = SimulatedGateway::new().without_dedup().with_latency(latency);
    let (router, shop) = app::router_on(mode, store, gateway);
    let addr = own_runtime::serve_on_own_runtime(router);
    (addr, shop)
}

/// A proxy in front of `server` that, for its first `drops` connections, passes the
/// request on, lets the server answer (and so commit), and closes the client's
/// connection without the answer: a response lost on the way back.
async fn dropping_proxy(server: SocketAddr, drops: usize) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let addr = listener.local_addr().expect("bound");
    let seen = Arc::new(AtomicUsize::new(0));
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let drop_it = seen.fetch_add(1, Ordering::SeqCst) < drops;
            tokio::spawn(relay(client, server, drop_it));
        }
    });
    addr
}

async fn relay(client: TcpStream, server: SocketAddr, drop_answer: bool) {
    let Ok(upstream) = TcpStream::connect(server).await else { return };
    let (mut client_in, mut client_out) = client.into_split();
    let (mut server_in, mut server_out) = upstream.into_split();
    let upward = tokio::spawn(async move {
        let _ = tokio::io::copy(&mut client_in, &mut server_out).await;
    });
    if drop_answer {
        // The server's answer arrives, so it has committed; the client never sees it.
        let mut answer = [0u8; 4096];
        let _ = server_in.read(&mut answer).await;
        let _ = client_out.shutdown().await;
        upward.abort();
        return;
    }
    let _ = tokio::io::copy(&mut server_in, &mut client_out).await;
    upward.abort();
}

fn client(policy: RetryPolicy) -> reqwest_middleware::ClientWithMiddleware {
    reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
        .with(IdempotentRetry::new(policy))
        .build()
}

fn quick() -> RetryPolicy {
    RetryPolicy::builder()
        .pauses(Duration::from_millis(10), Duration::from_millis(100))
        .build()
        .expect("a valid policy")
}

async fn pay(
    client: &reqwest_middleware::ClientWithMiddleware,
    addr: SocketAddr,
    intent: &Intent,
    body: &'static str,
) -> reqwest_middleware::Result<reqwest::Response> {
    let url = format!("http://{addr}/checkout");
    client.post(url).body(body).with_extension(intent.clone()).send().await
}

/// The server charges and commits, its answer is lost: the client retries with the same
/// key and gets the stored answer, a replay. One charge.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_answer_is_retried_with_the_same_key_and_charged_once() {
    let (server, shop) = serve(app::Mode::Idempotent, Duration::ZERO);
    let proxy = dropping_proxy(server, 1).await;
    let answer = pay(&client(quick()), proxy, &Intent::new(), ORDER).await.expect("an answer");
    let attempts = answer.extensions().get::<Attempts>().copied();
    assert_eq!(answer.status(), 201);
    assert_eq!(attempts, Some(Attempts { count: 2, replayed: true }));
    assert_eq!(shop.gateway.totals().charges, 1, "one charge");
}

/// The first attempt is slower than the client's patience: the client gives up on it and
/// retries with the same key, which meets the first still running (the server waits for
/// it, or answers 409) and replays its answer. One charge, however many attempts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_first_attempt_is_not_run_twice() {
    let (server, shop) = serve(app::Mode::Idempotent, Duration::from_millis(300));
    let policy = RetryPolicy::builder()
        .attempt_timeout(Duration::from_millis(100))
        .pauses(Duration::from_millis(10), Duration::from_millis(50))
        .build()
        .expect("a valid policy");
    let answer = pay(&client(policy), server, &Intent::new(), ORDER).await.expect("an answer");
    let attempts = answer.extensions().get::<Attempts>().copied().expect("attempts");
    assert!(answer.status().is_success(), "{}", answer.status());
    assert!(attempts.count >= 2 && attempts.replayed, "{attempts:?}");
    assert_eq!(shop.gateway.totals().charges, 1, "one charge");
}

/// Sixteen sends of one intent at once (a double click, many times over), through the
/// tower layer on hyper's client: all but the first meet it in flight (409, or a wait),
/// retry, and get the one charge's answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storm_of_one_intent_meets_409s_and_charges_once() {
    use tower::{Service, ServiceExt};
    let (server, shop) = serve(app::Mode::Idempotent, Duration::from_millis(100));
    let hyper = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<http_body_util::Full<bytes::Bytes>>();
    let client = tower::ServiceBuilder::new()
        .layer(idem_client::IdempotentRetryLayer::new(quick()))
        .service(hyper);
    let intent = Intent::new();
    let sends: Vec<_> = (0..16)
        .map(|_| {
            let (mut client, intent) = (client.clone(), intent.clone());
            tokio::spawn(async move {
                let body = http_body_util::Full::new(bytes::Bytes::from_static(ORDER.as_bytes()));
                let mut request = http::Request::post(format!("http://{server}/checkout"))
                    .body(body)
                    .expect("a request");
                request.extensions_mut().insert(intent);
                let answer = client.ready().await.expect("ready").call(request).await;
                let answer = answer.expect("an answer");
                use http_body_util::BodyExt;
                let body = answer.into_body().collect().await.expect("a body").to_bytes();
                String::from_utf8_lossy(&body).into_owned()
            })
        })
        .collect();
    let mut bodies = Vec::new();
    for send in sends {
        bodies.push(send.await.expect("a send"));
    }
    assert!(bodies.iter().all(|b| *b == bodies[0] && b.contains("ch_1")), "{bodies:?}");
    assert_eq!(shop.gateway.totals().charges, 1, "one charge");
}

/// One intent's key sent with another body is answered 422 once, never retried: a typed
/// error that names the key, after one attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_reused_for_another_body_is_a_typed_error_never_retried() {
    let (server, shop) = serve(app::Mode::Idempotent, Duration::ZERO);
    let client =
        client(RetryPolicy::builder().deadline(Duration::from_secs(2)).build().expect("ok"));
    let intent = Intent::from_id("order-7").expect("a key");
    pay(&client, server, &intent, ORDER).await.expect("the first");
    let other = "customer=cus_1&amount=9999&currency=EUR";
    let refused = pay(&client, server, &intent, other).await.expect_err("refused");
    let typed = client_error(&refused);
    let Some(ClientError::KeyReused { key, attempts: 1 }) = typed else {
        panic!("expected KeyReused after one attempt, got {refused:?}")
    };
    assert_eq!(key, "order-7", "the intent's own key, as Intent::from_id takes it back");
    assert_eq!(shop.gateway.totals().charges, 1);
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The middleware's own error inside reqwest-middleware's, if that is what `refused` is.
fn client_error(refused: &reqwest_middleware::Error) -> Option<&ClientError<BoxError>> {
    match refused {
        reqwest_middleware::Error::Middleware(e) => e.downcast_ref::<ClientError<BoxError>>(),
        reqwest_middleware::Error::Reqwest(_) => None,
    }
}

/// A streamed body cannot be sent again unchanged: the intent is refused before anything
/// is sent, with the middleware's own error (the one every other refusal downcasts to).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_body_is_refused_before_anything_is_sent() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let addr = listener.local_addr().expect("bound");
    let chunks: Vec<Result<&'static str, std::io::Error>> = vec![Ok(ORDER)];
    let body = reqwest::Body::wrap_stream(futures::stream::iter(chunks));
    let refused = client(RetryPolicy::default())
        .post(format!("http://{addr}/payments"))
        .body(body)
        .send()
        .await
        .expect_err("a streamed body");
    let error = client_error(&refused);
    assert!(matches!(error, Some(ClientError::BodyNotReplayable)), "{refused:?}");
    let accepted = tokio::time::timeout(Duration::from_millis(200), listener.accept()).await;
    assert!(accepted.is_err(), "nothing was sent");
}

/// A server that never answers well within the deadline: the outcome is unknown, said as
/// such (retry the same intent, never a new one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_its_deadline_an_intent_is_an_unknown_outcome() {
    // Bound and never listening: a connect is refused, and no listener of another test
    // can take the port while this one runs.
    let refusing = tokio::net::TcpSocket::new_v4().expect("a socket");
    refusing.bind("127.0.0.1:0".parse().expect("an address")).expect("a port");
    let nobody = refusing.local_addr().expect("bound");
    let policy = RetryPolicy::builder()
        .deadline(Duration::from_millis(300))
        .pauses(Duration::from_millis(10), Duration::from_millis(50))
        .build()
        .expect("a valid policy");
    let refused = pay(&client(policy), nobody, &Intent::new(), ORDER).await.expect_err("none");
    let message = refused.to_string();
    let typed = client_error(&refused);
    assert!(
        matches!(typed, Some(ClientError::OutcomeUnknown { attempts: 2.., .. })),
        "{refused:?}"
    );
    assert!(message.contains("never a new one"), "{message}");
}

/// What the client cannot fix: the naive checkout ignores the header, so the retry after
/// a lost answer charges again. The key makes retries safe only where the server keeps
/// its answers by key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn against_a_server_that_ignores_the_header_a_lost_answer_charges_twice() {
    let (server, shop) = serve(app::Mode::Naive, Duration::ZERO);
    let proxy = dropping_proxy(server, 1).await;
    let answer = pay(&client(quick()), proxy, &Intent::new(), ORDER).await.expect("an answer");
    assert_eq!(answer.status(), 201);
    assert_eq!(shop.gateway.totals().charges, 2, "the server did not keep its answer");
}

/// A server that keeps its answers by key, 500s included (as idem-http and Stripe do):
/// the first request of a key charges and fails 500, every later one gets that 500
/// replayed; it also answers `/redirect` with a 303 to an app's own scheme, after charging.
async fn keeping_server() -> (SocketAddr, Arc<std::sync::Mutex<Vec<String>>>) {
    use axum::http::{HeaderMap, StatusCode};
    use axum::response::IntoResponse;
    let charged: Arc<std::sync::Mutex<Vec<String>>> = Arc::default();
    let keys = charged.clone();
    let checkout = move |headers: HeaderMap| {
        let keys = keys.clone();
        async move {
            let key = headers.get("idempotency-key").map(|v| v.to_str().unwrap_or("?").to_string());
            let mut charged = keys.lock().expect("the keys");
            let key = key.unwrap_or_default();
            if charged.contains(&key) {
                return (StatusCode::INTERNAL_SERVER_ERROR, [("idempotent-replayed", "true")])
                    .into_response();
            }
            charged.push(key);
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    };
    let redirect = || async { (StatusCode::SEE_OTHER, [("location", "shopapp://paid/ch_1")]) };
    let in_a_loop = || async { (StatusCode::SEE_OTHER, [("location", "/loop")]) };
    let app = axum::Router::new()
        .route("/payments", axum::routing::post(checkout))
        .route("/redirect", axum::routing::post(redirect))
        .route("/loop", axum::routing::post(in_a_loop).get(in_a_loop));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let addr = listener.local_addr().expect("bound");
    tokio::spawn(async move { axum::serve(listener, app).await });
    (addr, charged)
}

/// A retry middleware outside this one (reqwest-retry's shape: it runs the chain again
/// with the same extensions), retrying a 500: without an intent of the caller's, the one
/// made for the call is kept in the extensions, so every outer try sends the same key.
struct OuterRetry;

#[async_trait::async_trait]
impl reqwest_middleware::Middleware for OuterRetry {
    async fn handle(
        &self,
        request: reqwest::Request,
        extensions: &mut http::Extensions,
        next: reqwest_middleware::Next<'_>,
    ) -> reqwest_middleware::Result<reqwest::Response> {
        for _ in 0..2 {
            let copy = request.try_clone().expect("a body in memory");
            let answer = next.clone().run(copy, extensions).await?;
            if !answer.status().is_server_error() {
                return Ok(answer);
            }
        }
        next.run(request, extensions).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outer_retry_of_a_call_without_an_intent_sends_one_key() {
    let (addr, charged) = keeping_server().await;
    let handing_back_5xx = RetryPolicy::builder().retry_server_errors(false).build();
    let handing_back_5xx = handing_back_5xx.expect("a valid policy");
    let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
        .with(OuterRetry)
        .with(IdempotentRetry::new(handing_back_5xx))
        .build();
    let answer = client.post(format!("http://{addr}/payments")).body(ORDER).send().await;
    assert_eq!(answer.expect("answered").status(), 500);
    let charged = charged.lock().expect("the keys").clone();
    assert_eq!(charged.len(), 1, "each outer try was a new intent: {charged:?}");
}

/// A redirect reqwest will not follow (to an app's own scheme, the end of a payment flow;
/// or one of a loop, past reqwest's policy) comes after the server has acted: the outcome
/// is unknown at once (each try would get the same answers), never "could not be made".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_the_client_cannot_follow_is_an_unknown_outcome() {
    let (addr, _) = keeping_server().await;
    let short = RetryPolicy::builder().deadline(Duration::from_secs(2)).build();
    let short = short.expect("a valid policy");
    for path in ["redirect", "loop"] {
        let refused = client(short)
            .post(format!("http://{addr}/{path}"))
            .body(ORDER)
            .with_extension(Intent::from_id("order-9").expect("a key"))
            .send()
            .await
            .expect_err("reqwest does not follow it");
        let typed = client_error(&refused);
        let Some(ClientError::OutcomeUnknown { attempts: 1, key, .. }) = typed else {
            panic!("{path}: {refused:?}")
        };
        assert_eq!(key, "order-9");
    }
}
