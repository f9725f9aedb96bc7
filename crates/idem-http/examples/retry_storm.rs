//! A checkout retry storm over real sockets: 1,000 intended payments against the checkout
//! service on loopback; 30% of them are sent twice (a client retrying a timeout, a double
//! click), four clients at once, so a retry often runs beside the attempt it repeats.
//!
//! Naive: the service without the layer, where every request charges. idem: the same
//! service behind `IdempotencyLayer`, each attempt sent by idem-client with its intent's
//! key (made once per intent, from the intent's id). The gateway does NOT deduplicate,
//! so the layer alone keeps charges at one per intent, and every answer a retry gets must
//! be the intent's first answer's body, byte for byte. Prints a sentence (and, for
//! `cargo xtask demo`, its line).

#[path = "checkout_server/app.rs"]
#[allow(dead_code)]
mod app;
#[path = "checkout_server/remote.rs"]
#[allow(dead_code)]
mod remote;

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use idem_core::{MemoryStore, StoreConfig};
use idem_testkit::storm::{Answers, Plan, Retries, Row};

const INTENTS: u64 = 1_000;
const CLIENTS: usize = 4;
const RETRY_PERCENT: u64 = 30;

/// Every intent once plus its retries, shuffled locally so retries land near their
/// original (the same generator as the payments storm).
const PLAN: Plan =
    Plan { intents: INTENTS, retry_percent: RETRY_PERCENT, retries: Retries::Once, seed: 7 };

/// One `POST /checkout` for intent `i`, on a new connection.
async fn post(addr: SocketAddr, i: u64) -> u16 {
    let stream = tokio::net::TcpStream::connect(addr).await.expect("the server listens");
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.expect("handshake");
    tokio::spawn(connection);
    let request = http::Request::post("/checkout")
        .header("host", "storm")
        .header("idempotency-key", format!("\"checkout-{i}\""))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(Full::new(Bytes::from_static(b"customer=cus_1&amount=1050&currency=EUR")))
        .expect("a valid request");
    let response = sender.send_request(request).await.expect("an answer");
    let status = response.status().as_u16();
    response.into_body().collect().await.expect("a body");
    status
}

/// The client of the "with idem" side: idem-client's layer on hyper's client, which sends
/// one key per intent (from the intent's own id) on every attempt, and retries.
type Client = idem_client::IdempotentRetryService<
    hyper_util::client::legacy::Client<
        hyper_util::client::legacy::connect::HttpConnector,
        Full<Bytes>,
    >,
>;

fn client() -> Client {
    let hyper = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http();
    let layer = idem_client::IdempotentRetryLayer::new(idem_client::RetryPolicy::default());
    tower::Layer::layer(&layer, hyper)
}

/// What a client is told: the status, the content type and the body. A replay must tell
/// all three as the first answer did (it adds only `Idempotent-Replayed`).
type Told = (u16, Option<http::HeaderValue>, Bytes);

/// One `POST /checkout` for intent `i` through idem-client: its key made from the intent.
async fn post_with(client: &Client, addr: SocketAddr, i: u64) -> Told {
    use tower::{Service, ServiceExt};
    let mut request = http::Request::post(format!("http://{addr}/checkout"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(Full::new(Bytes::from_static(b"customer=cus_1&amount=1050&currency=EUR")))
        .expect("a valid request");
    let intent = idem_client::Intent::from_id(&format!("checkout-{i}")).expect("a valid key");
    request.extensions_mut().insert(intent);
    let mut client = client.clone();
    let response = client.ready().await.expect("ready").call(request).await.expect("an answer");
    let status = response.status().as_u16();
    let content_type = response.headers().get(http::header::CONTENT_TYPE).cloned();
    (status, content_type, response.into_body().collect().await.expect("a body").to_bytes())
}

/// Runs the storm against a fresh service in `mode`; returns the charges it made. With
/// idem, each answer is recorded in `answers`.
async fn storm(mode: app::Mode, list: Arc<Vec<u64>>, answers: Arc<Answers>) -> u64 {
    let (router, shop) = app::router(mode, Arc::new(MemoryStore::new(StoreConfig::default())));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
    let addr = listener.local_addr().expect("bound");
    let server = tokio::spawn(async move { axum::serve(listener, router).await });
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let (list, answers) = (list.clone(), answers.clone());
            tokio::spawn(async move {
                let client = client();
                for &i in list.iter().skip(c).step_by(CLIENTS) {
                    let status = match mode {
                        app::Mode::Naive => post(addr, i).await,
                        app::Mode::Idempotent => {
                            let told = post_with(&client, addr, i).await;
                            answers.answer(i, &told);
                            told.0
                        }
                    };
                    assert!(status == 201 || status == 200, "intent {i}: {status}");
                }
            })
        })
        .collect();
    for client in clients {
        client.await.expect("a client");
    }
    server.abort();
    shop.gateway.totals().charges
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let list = Arc::new(PLAN.attempts());
    let answers = Arc::new(Answers::new(INTENTS));
    let naive = storm(app::Mode::Naive, list.clone(), answers.clone()).await;
    let idem = storm(app::Mode::Idempotent, list.clone(), answers.clone()).await;
    Row {
        scenario: format!("HTTP checkout, {RETRY_PERCENT}% retried"),
        intents: INTENTS,
        attempts: list.len() as u64,
        without: naive,
        with: idem,
        effect: "cards charged".into(),
        attempt: "requests".into(),
        repeats: answers.repeats(),
        same: answers.same(),
    }
    .print();
}
