//! The world's hosts: servers that serve the checkout over simulated TCP, and clients
//! that pay for their intents, retrying as real clients do (early, late, concurrently).

use std::future::Future;
use std::net::{IpAddr, Ipv4Addr};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use idem_core::MemoryStore;
use idem_http::StoredResponse;
use idem_payments::{Fault, PaymentOutcome, SimulatedGateway};

use axum::extract::{Extension, State};
use axum::http::HeaderMap;
use axum::response::Response;
use idem_http::Recovering;

use crate::checkout::app;
use crate::payments::{self, SimProcessor};
use crate::plan::LEASE;
use crate::receipt;
use crate::seam::Seam;
use crate::shared::{Told, WorldState};

/// The port every server listens on.
const PORT: u16 = 80;
/// The largest answer body a client reads.
const ANSWER_BYTES_MAX: usize = 16 * 1024;

/// One server: the checkout service on `PORT`, each connection served on a task.
pub(crate) async fn server(
    shared: Arc<WorldState>,
    (store, paid): (Arc<MemoryStore<StoredResponse>>, Arc<MemoryStore<PaymentOutcome>>),
    gateway: Arc<SimulatedGateway>,
    index: usize,
) -> turmoil::Result {
    let name = format!("server{index}");
    shared.trace(&name, format_args!("started"));
    let seam = Seam::new(store, Arc::clone(&shared), index);
    let processor = payments::processor(paid, Arc::clone(&shared), gateway.clone(), Some(index));
    let router = checkout_router(&shared, seam.clone(), gateway.clone());
    let router = receipt::route(router, &shared, seam, gateway);
    let router = payments::route(router, Arc::new(processor));
    let listener =
        turmoil::net::TcpListener::bind((IpAddr::from(Ipv4Addr::UNSPECIFIED), PORT)).await?;
    loop {
        let (stream, _) = listener.accept().await?;
        let service = TowerToHyperService::new(router.clone());
        tokio::spawn(async move {
            // No `Date` header: hyper would read the real clock for it.
            let connection = hyper::server::conn::http1::Builder::new()
                .auto_date_header(false)
                .serve_connection(TokioIo::new(stream), service);
            let _ = connection.await;
        });
    }
}

/// The checkout example's route as its `router_on` mounts it (the layer on the route,
/// the example's handler behind it), and the layer's operator, which answers lookups.
fn checkout_router(
    shared: &Arc<WorldState>,
    seam: Seam,
    gateway: Arc<SimulatedGateway>,
) -> axum::Router {
    let shop = Arc::new(app::Shop::new(gateway));
    let layer = app::layer(seam);
    let operator = layer.operator();
    let look_up = move |request: axum::extract::Request| async move {
        operator.serve(request, "operator").await
    };
    let route = axum::routing::post(checkout(shared, false)).route_layer(layer);
    axum::Router::new()
        .route("/checkout", route)
        .route(OPERATOR_PATH, axum::routing::get(look_up))
        .with_state(shop)
}

/// Where every server serves the checkout layer's operator (its lookups).
const OPERATOR_PATH: &str = "/operator";

/// The shop a checkout handler takes, as axum hands it over.
type Shop = State<Arc<app::Shop>>;
/// Whether a checkout handler's run recovers a claim left in flight.
type Recovery = Option<Extension<Recovering>>;
/// A checkout handler's answer, on its way.
type Answering = Pin<Box<dyn Future<Output = Response> + Send>>;

/// The example's checkout handler with one fault before it: at the plan's rate it is
/// slow, up to three leases (the layer renews the claim meanwhile). Its answer goes out
/// as it is, or, if `receipt`, streamed as a receipt.
pub(crate) fn checkout(
    shared: &Arc<WorldState>,
    receipt: bool,
) -> impl Fn(Shop, Recovery, HeaderMap, String) -> Answering + Clone + Send + Sync + 'static {
    let shared = Arc::clone(shared);
    move |shop, recovering, headers, body| {
        let shared = Arc::clone(&shared);
        Box::pin(async move {
            if shared.strikes(shared.plan.slow_handler) {
                shared.fault("handler", "slow handler");
                let pause = shared.draw(|rng| rng.duration(Duration::ZERO, LEASE * 3));
                tokio::time::sleep(pause).await;
            }
            let body = if receipt { receipt::order_form(&body).unwrap_or(body) } else { body };
            let answer = app::checkout(shop, recovering, headers, body).await;
            if receipt { receipt::streamed(&shared, answer).await } else { answer }
        })
    }
}

/// One intent: what a client pays for, under one key.
#[derive(Debug, Clone)]
pub(crate) struct Intent {
    /// Its number in the world.
    pub(crate) index: usize,
    /// Its `Idempotency-Key`.
    pub(crate) key: String,
    /// Its amount, in cents of EUR.
    pub(crate) amount: u64,
    /// Where it is paid: `/checkout` (the layer), `/receipt` (the layer on a store that
    /// keeps little, the answer streamed) or `/pay` (the processor).
    pub(crate) path: &'static str,
    /// A client's bug: this attempt reuses the intent's key for another amount, after
    /// the intent was answered. Its answer must never be a success.
    pub(crate) reused: bool,
    /// How large its request body is.
    pub(crate) size: Size,
}

/// How large a request body is, against the receipt layer's `body_bytes_max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Size {
    /// As short as the order takes.
    Plain,
    /// Padded to exactly the limit: it must be taken as any other.
    AtLimit,
    /// A client's bug: this attempt's body is over the limit by this many bytes, sent
    /// with its length or chunked in two frames. It must be refused (413), never run.
    Over { by: usize, chunked: bool },
}

/// How an attempt ended.
enum Attempt {
    /// Answered for good (a charge, a decline, or an answer no retry should get).
    Final(Told),
    /// In flight elsewhere: retry after this long.
    Busy(Duration),
    /// A 5xx, or no answer: retry after a pause.
    Retry,
}

/// One client: pays for each of its intents in turn until each is answered. It also
/// decides the gateway's faults, since each meets the next charge made for a client.
pub(crate) async fn client(
    shared: Arc<WorldState>,
    gateway: Arc<SimulatedGateway>,
    index: usize,
    intents: Vec<Intent>,
) -> turmoil::Result {
    let name = format!("client{index}");
    for intent in intents {
        settle(&shared, &gateway, &name, &intent).await;
    }
    shared.trace(&name, format_args!("done"));
    // ORDERING: every host runs on the driver's one thread; a count, ordering nothing.
    shared.clients_done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    Ok(())
}

/// Passes the reconciler makes at most once the clients are done.
const RECONCILE_PASSES_MAX: u32 = 40;
/// Passes in a row, a lease apart, that find nothing before the reconciler ends: longer
/// than the longest hang and a lease.
const RECONCILE_QUIET: u32 = 5;

/// The operator's reconciler. While the faults last it runs the processor's
/// reconcile every lease (a real one runs all the time). Once the faults have stopped
/// and every client is done, it also lists the layer's claims whose lease ran out (a key
/// whose client got its answer, but whose complete never reached the store, stays in
/// flight for recovery) and sends each one's request again; the retry recovers it
/// (asking the gateway) and stores its answer, which is judged like any other. It ends
/// after `RECONCILE_QUIET` passes in a row find nothing left: a store call that hung
/// before the faults stopped can still land (up to three leases late) and claim a key
/// whose connection is gone.
pub(crate) async fn reconciler(
    shared: Arc<WorldState>,
    store: Arc<MemoryStore<StoredResponse>>,
    processor: SimProcessor,
    intents: Vec<Intent>,
) -> turmoil::Result {
    let name = "operator";
    let clients = shared.plan.clients as u64;
    // ORDERING: the world runs on one thread; the count orders nothing.
    let done = |shared: &WorldState| {
        shared.is_calm()
            && shared.clients_done.load(std::sync::atomic::Ordering::Relaxed) == clients
    };
    while !done(&shared) {
        tokio::time::sleep(LEASE).await;
        reconcile_payments(&shared, &processor);
        // The operator looks at what is left in flight (through the faults: a lookup the
        // store fails must not show the store's words).
        let (mut listed, mut stateless) = (0, 0);
        for claim in idem_core::KeyStore::pending(&*store, intents.len().max(1))? {
            listed += 1;
            stateless += usize::from(look_up(&shared, &claim.key).await.is_none());
        }
        if listed > 0 {
            shared.trace(name, format_args!("looked {listed} up, {stateless} without a state"));
        }
    }
    let mut quiet = 0;
    for pass in 1..=RECONCILE_PASSES_MAX {
        tokio::time::sleep(LEASE).await;
        let left = reconcile_payments(&shared, &processor);
        let pending = idem_core::KeyStore::pending(&*store, intents.len().max(1))?;
        shared.trace(name, format_args!("pass {pass}: {} claims left in flight", pending.len()));
        quiet = if pending.is_empty() && left == 0 { quiet + 1 } else { 0 };
        if quiet == RECONCILE_QUIET {
            break;
        }
        for claim in pending {
            let Some(intent) = intents.iter().find(|i| i.key == claim.key.key().as_str()) else {
                continue;
            };
            // The operator's own lookup decides: only a claim whose lease ran out is sent.
            if look_up(&shared, &claim.key).await.as_deref() != Some("pending") {
                continue;
            }
            if let Attempt::Final(told) = attempt(&shared, name, intent).await {
                shared.tell(intent.index, told);
            }
        }
    }
    Ok(())
}

/// The state the operator's endpoint on a server the operator picks gives `key` (as its
/// JSON names it), or `None` if it answered none; an answer with the store's words in
/// it is a breach.
async fn look_up(shared: &WorldState, key: &idem_core::ScopedKey) -> Option<String> {
    let server = shared.draw(|rng| rng.below(shared.plan.servers as u64));
    let host = format!("server{server}");
    let (scope, key) = (key.scope().as_str(), key.key().as_str());
    let request = http::Request::get(format!("{OPERATOR_PATH}?scope={scope}&key={key}"))
        .header(http::header::HOST, &host)
        .body(RequestBody::Left(Full::new(Bytes::new())))
        .ok()?;
    let answer = tokio::time::timeout(LEASE, send(&host, request)).await;
    let Ok(Ok((status, _, body))) = answer else {
        shared.trace("operator", format_args!("look up {key} -> {host}: no answer"));
        return None;
    };
    if body.contains(crate::seam::STORE_ERROR_MARK) {
        shared.breach("operator", format!("a {status} lookup carried the store's error text"));
    }
    let state = json_field(&body, "state");
    let shown = state.as_deref().map_or_else(|| shown(&body), str::to_string);
    shared.trace("operator", format_args!("look up {key} -> {host}: {status} {shown}"));
    state
}

/// One reconcile of the processor's pending claims: how many it did not settle (or
/// could not list).
fn reconcile_payments(shared: &WorldState, processor: &SimProcessor) -> usize {
    let report = processor.reconcile(RECONCILE_BATCH_MAX);
    let settled = report.completed + report.released;
    let left = report.unresolved.len() + report.mismatched.len() + report.failed.len();
    let left = left + usize::from(report.listing_failed.is_some());
    if settled + left > 0 {
        shared.trace("operator", format_args!("reconciled {settled} payments, {left} left"));
    }
    left
}

/// The most pending payments one reconcile takes.
const RECONCILE_BATCH_MAX: usize = 64;

/// Sends `intent` until it is answered, with the retries the plan draws.
async fn settle(shared: &Arc<WorldState>, gateway: &SimulatedGateway, name: &str, intent: &Intent) {
    let plan = &shared.plan;
    if shared.strikes(plan.gateway_decline) {
        shared.fault(name, "card declined");
        gateway.inject(Fault::Decline("insufficient funds".into()));
    }
    let mut extra = Vec::new();
    let mut pause = Duration::from_millis(50);
    loop {
        inject_gateway_faults(shared, gateway, name);
        if shared.strikes(plan.concurrent) {
            shared.fault(name, "concurrent retry");
            extra.push(spawn_attempt(shared, name, intent, Duration::ZERO));
        }
        if shared.strikes(plan.early) {
            shared.fault(name, "early retry");
            let after = shared.draw(|rng| rng.duration(Duration::ZERO, plan.client_timeout));
            extra.push(spawn_attempt(shared, name, intent, after));
        }
        match attempt(shared, name, intent).await {
            Attempt::Final(told) => {
                let charged = matches!(told, Told::Charged { .. });
                shared.tell(intent.index, told);
                if charged && shared.strikes(plan.late) {
                    shared.fault(name, "late retry");
                    let after =
                        shared.draw(|rng| rng.duration(Duration::ZERO, Duration::from_secs(6)));
                    extra.push(spawn_attempt(shared, name, intent, after));
                }
                if intent.path == "/receipt" && shared.strikes(plan.oversize) {
                    shared.fault(name, "request over the body limit");
                    let by = shared.draw(|rng| rng.between(1, 200) as usize);
                    let chunked = shared.draw(|rng| rng.below(2) == 0);
                    let over = Intent { size: Size::Over { by, chunked }, ..intent.clone() };
                    extra.push(spawn_attempt(shared, name, &over, Duration::ZERO));
                }
                if charged && shared.strikes(plan.reuse) {
                    shared.fault(name, "key reused for another amount");
                    let other =
                        Intent { amount: intent.amount + 1, reused: true, ..intent.clone() };
                    let after =
                        shared.draw(|rng| rng.duration(Duration::ZERO, Duration::from_secs(6)));
                    extra.push(spawn_attempt(shared, name, &other, after));
                }
                break;
            }
            Attempt::Busy(after) => tokio::time::sleep(after).await,
            Attempt::Retry => {
                let jitter = shared.draw(|rng| rng.duration(Duration::ZERO, pause));
                tokio::time::sleep(pause + jitter).await;
                pause = (pause * 2).min(Duration::from_secs(2));
            }
        }
    }
    for handle in extra {
        let _ = handle.await;
    }
}

/// Queues the gateway faults this attempt draws: each meets the next charge, whoever
/// makes it.
fn inject_gateway_faults(shared: &WorldState, gateway: &SimulatedGateway, name: &str) {
    let plan = &shared.plan;
    if shared.strikes(plan.gateway_refuse) {
        shared.fault(name, "gateway refuses the next charge");
        gateway.inject(Fault::RefuseBeforeCharge);
    }
    if shared.strikes(plan.gateway_charge_lost) {
        shared.fault(name, "gateway charges, answer lost");
        gateway.inject(Fault::ChargeThenTimeout);
    }
    if shared.strikes(plan.gateway_request_lost) {
        shared.fault(name, "gateway loses the request");
        gateway.inject(Fault::TimeoutWithoutCharge);
    }
}

/// An extra attempt, `after` from now, on a task of its own: its answer is recorded
/// as any other, and never retried.
fn spawn_attempt(
    shared: &Arc<WorldState>,
    name: &str,
    intent: &Intent,
    after: Duration,
) -> tokio::task::JoinHandle<()> {
    let (shared, name, intent) = (Arc::clone(shared), name.to_string(), intent.clone());
    tokio::spawn(async move {
        tokio::time::sleep(after).await;
        if let Attempt::Final(told) = attempt(&shared, &name, &intent).await {
            shared.tell(intent.index, told);
        }
    })
}

/// One request for `intent` to a server the client picks, within the client's timeout.
async fn attempt(shared: &WorldState, name: &str, intent: &Intent) -> Attempt {
    let server = shared.draw(|rng| rng.below(shared.plan.servers as u64));
    let host = format!("server{server}");
    // ORDERING: one thread runs the world; the count orders nothing.
    let number = shared.requests.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let exchange = exchange(&host, intent, number);
    let answer = match tokio::time::timeout(shared.plan.client_timeout, exchange).await {
        Ok(Ok(answer)) => answer,
        Ok(Err(why)) => {
            shared.trace(name, format_args!("#{number} {} -> {host}: {why}", intent.key));
            return Attempt::Retry;
        }
        Err(_) => {
            shared.trace(name, format_args!("#{number} {} -> {host}: timed out", intent.key));
            return Attempt::Retry;
        }
    };
    let (status, headers, body) = answer;
    let retry_after =
        headers.get(http::header::RETRY_AFTER).and_then(|v| v.to_str().ok()?.parse().ok());
    let shown = shown(&body);
    shared.trace(name, format_args!("#{number} {} -> {host}: {status} {shown}", intent.key));
    // The seam's errors name it: an answer that carries the words reached a client with
    // the store's internals in it.
    if body.contains(crate::seam::STORE_ERROR_MARK) {
        shared.tell(intent.index, Told::Leaked { status });
    }
    if let Size::Over { by, .. } = intent.size {
        // Refused as too large (before the store is asked): what it should get. Never
        // retried.
        if status == 413 {
            return Attempt::Retry;
        }
        let why = format!("a request {by} bytes over the body limit answered {status}");
        return Attempt::Final(Told::Broken { why });
    }
    let judged = match status {
        200..=299 if intent.path == "/receipt" => {
            Attempt::Final(receipt::judge(status, &headers, &body))
        }
        _ => classify(status, retry_after, &body),
    };
    match judged {
        Attempt::Final(Told::Charged { charge, .. }) if intent.reused => {
            Attempt::Final(Told::ReusedAnswered { status, charge })
        }
        Attempt::Final(Told::StoodIn) if intent.reused => {
            Attempt::Final(Told::ReusedAnswered { status, charge: "a stand-in".into() })
        }
        // The quota holds a place for every key: a 429 is wrong for a reused key too.
        _ if intent.reused && status == 429 => Attempt::Final(Told::Unexpected { status }),
        // Refused (422) or not now: what a reused key should get. Never retried.
        _ if intent.reused => Attempt::Retry,
        other => other,
    }
}

/// What an answer means to the client.
fn classify(status: u16, retry_after: Option<u64>, body: &str) -> Attempt {
    match status {
        200..=299 => Attempt::Final(Told::Charged {
            charge: json_field(body, "charge").unwrap_or_default(),
            amount: json_field(body, "amount").unwrap_or_default(),
        }),
        402 => Attempt::Final(Told::Declined),
        409 => Attempt::Busy(Duration::from_secs(retry_after.unwrap_or(1).clamp(1, 5))),
        500..=599 => Attempt::Retry,
        status => Attempt::Final(Told::Unexpected { status }),
    }
}

/// The most of an answer's body the trace shows.
const SHOWN_BYTES_MAX: usize = 120;

/// An answer's body as the trace shows it: a problem by its title (its detail holds an
/// error id drawn at random, which would make two runs of one seed differ), any other
/// body whole if short, else its start, its end and its length.
fn shown(body: &str) -> String {
    match json_field(body, "title") {
        Some(title) if body.contains("\"status\":") => format!("problem: {title}"),
        _ if body.len() > SHOWN_BYTES_MAX && body.is_ascii() => {
            let (start, end) = (&body[..80], &body[body.len() - 20..]);
            format!("{start}...{end} ({} bytes)", body.len())
        }
        _ => body.to_string(),
    }
}

/// The string value of `field` in the checkout's flat JSON answer.
pub(crate) fn json_field(body: &str, field: &str) -> Option<String> {
    let start = body.find(&format!("\"{field}\":\""))? + field.len() + 4;
    let len = body[start..].find('"')?;
    Some(body[start..start + len].to_string())
}

type Answer = (u16, http::HeaderMap, String);

/// Why an exchange got no answer.
type NoAnswer = Box<dyn std::error::Error + Send + Sync>;

/// A request body: whole, with its length, or in frames.
type RequestBody = http_body_util::Either<Full<Bytes>, receipt::Frames>;

/// One payment request for `intent` to `host`, the client's request `number`: its
/// order (a form; on `/receipt`, JSON in either field order with the number as its
/// `client_time`), padded to the size it has.
async fn exchange(host: &str, intent: &Intent, number: u64) -> Result<Answer, NoAnswer> {
    let padded = match intent.size {
        Size::Plain => None,
        Size::AtLimit => Some(receipt::REQUEST_BYTES_MAX),
        Size::Over { by, .. } => Some(receipt::REQUEST_BYTES_MAX + by),
    };
    let (body, kind) = if intent.path == "/receipt" {
        (receipt::order_json(intent, number, padded), "application/json")
    } else {
        let mut body =
            format!("customer=cus_{}&amount={}&currency=EUR", intent.index, intent.amount);
        if let Some(len) = padded {
            body.push_str("&note=");
            let pad = len.saturating_sub(body.len());
            body.push_str(&"n".repeat(pad));
        }
        (body, "application/x-www-form-urlencoded")
    };
    let body = Bytes::from(body);
    let body = match intent.size {
        Size::Over { chunked: true, .. } => {
            let half = body.len() / 2;
            RequestBody::Right(receipt::Frames::new(vec![body.slice(..half), body.slice(half..)]))
        }
        _ => RequestBody::Left(Full::new(body)),
    };
    let request = http::Request::post(intent.path)
        .header(http::header::HOST, host)
        .header("idempotency-key", format!("\"{}\"", intent.key))
        .header(http::header::CONTENT_TYPE, kind)
        .body(body)?;
    send(host, request).await
}

/// One HTTP/1.1 exchange with `host` on a fresh connection.
async fn send(host: &str, request: http::Request<RequestBody>) -> Result<Answer, NoAnswer> {
    let stream = turmoil::net::TcpStream::connect((host, PORT)).await?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    let response = sender.send_request(request).await?;
    let status = response.status().as_u16();
    let (parts, body) = response.into_parts();
    let limited = http_body_util::Limited::new(body, ANSWER_BYTES_MAX);
    let bytes = limited.collect().await?.to_bytes();
    Ok((status, parts.headers, String::from_utf8_lossy(&bytes).into_owned()))
}
