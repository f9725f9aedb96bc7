//! The checkout service: a page whose button pays, and `POST /checkout`, which charges a
//! simulated gateway. Shared by the example's `main`, its socket test and the demo.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::{Extension, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use idem_core::{AsyncKeyStore, ScopedKey};
use idem_http::{
    Config, IdempotencyLayer, NothingHappened, OutcomeUnknown, Recovering, StoredResponse,
};
use idem_payments::{Gateway, GatewayError, GatewayKey, Lookup, PaymentRequest, SimulatedGateway};

/// Whether the service takes the `Idempotency-Key` header into account.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Every request charges: the seed's naive checkout.
    Naive,
    /// The layer in front: one charge per key.
    Idempotent,
}

/// The shop: its gateway (which does not deduplicate: the layer alone must) and a source of
/// fresh gateway keys for the naive mode.
#[derive(Debug)]
pub(crate) struct Shop {
    /// Shared when several servers charge one gateway (the simulation's world).
    pub(crate) gateway: Arc<SimulatedGateway>,
    /// A gateway over the network (`--gateway`), which takes the place of `gateway`.
    pub(crate) remote: std::sync::OnceLock<super::remote::RemoteGateway>,
    fresh: AtomicU64,
    /// The layer's runs, for a shutdown to wait for (none without the layer).
    pub(crate) runs: std::sync::OnceLock<idem_http::Runs>,
}

impl Shop {
    /// A shop on `gateway`.
    pub(crate) fn new(gateway: impl Into<Arc<SimulatedGateway>>) -> Self {
        let (remote, runs) = (std::sync::OnceLock::new(), std::sync::OnceLock::new());
        Self { gateway: gateway.into(), remote, fresh: AtomicU64::new(0), runs }
    }

    /// The gateway payments go to: the remote one if set, else the simulated one.
    pub(crate) fn payments(&self) -> &dyn Gateway {
        match self.remote.get() {
            Some(remote) => remote,
            None => &*self.gateway,
        }
    }

    /// Runs `pay` where its gateway may wait: on this task for the simulated gateway
    /// (it answers from memory), on tokio's blocking pool for a remote one (its client
    /// blocks on the network, which must not stall the runtime's workers).
    ///
    /// RACE (a payment outliving its run): the layer stops a run whose lease it can no
    /// longer vouch for by dropping the handler where it waits, here; the blocking call
    /// goes on. A payment that had not yet sent its charge would send it after the stop,
    /// while another server recovers the key, asks the gateway (nothing charged yet) and
    /// charges too. `pay` is told when its run is gone ([`Abandoned`]) and sends no charge
    /// after that. Test:
    /// `sockets::a_payment_whose_run_was_dropped_sends_no_charge`.
    pub(crate) async fn paying(
        self: &Arc<Self>,
        pay: impl FnOnce(&Shop, &Abandoned) -> Paid + Send + 'static,
    ) -> Paid {
        if self.remote.get().is_none() {
            return pay(self, &Abandoned::default());
        }
        let (shop, abandoned) = (Arc::clone(self), Abandoned::default());
        let mut gone = RaisedOnDrop(Some(abandoned.clone()));
        let answered = tokio::task::spawn_blocking(move || pay(&shop, &abandoned)).await;
        gone.0 = None;
        match answered {
            Ok(paid) => paid,
            Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
            // The runtime is shutting down mid-payment: whether it charged is unknown.
            Err(_) => Err(Box::new(outcome_unknown())),
        }
    }
}

/// Raised once the run a payment answers to is gone: the payment then sends no charge.
#[derive(Debug, Clone, Default)]
pub(crate) struct Abandoned(Arc<std::sync::atomic::AtomicBool>);

impl Abandoned {
    /// Whether the run is gone.
    pub(crate) fn raised(&self) -> bool {
        // ORDERING: Acquire, paired with the Release of the drop that raises it: a
        // payment that sees it raised sees the run gone.
        self.0.load(Ordering::Acquire)
    }
}

/// Raises its flag when dropped holding one: the future waiting for the payment was
/// dropped before the payment answered.
struct RaisedOnDrop(Option<Abandoned>);

impl Drop for RaisedOnDrop {
    fn drop(&mut self) {
        if let Some(abandoned) = &self.0 {
            // ORDERING: Release, see `Abandoned::raised`.
            abandoned.0.store(true, Ordering::Release);
        }
    }
}

/// A payment's outcome: the charge and how it was found, or the answer to give instead.
pub(crate) type Paid = Result<(StatusCode, idem_payments::Charge, &'static str), Box<Response>>;

/// Every key is scoped to this merchant. A real service scopes by the session's account.
pub(crate) const MERCHANT: &str = "demo-shop";

/// The router for `mode`, with `store` for the layer's keys and a gateway that does not
/// deduplicate (so the layer alone must).
pub(crate) fn router<S>(mode: Mode, store: S) -> (Router, Arc<Shop>)
where
    S: AsyncKeyStore<StoredResponse> + 'static,
{
    router_on(mode, store, SimulatedGateway::new().without_dedup())
}

/// As [`router`], on `gateway` (a slow one, in the tests).
pub(crate) fn router_on<S>(
    mode: Mode,
    store: S,
    gateway: impl Into<Arc<SimulatedGateway>>,
) -> (Router, Arc<Shop>)
where
    S: AsyncKeyStore<StoredResponse> + 'static,
{
    let shop = Arc::new(Shop::new(gateway));
    let routes = Router::new().route("/", get(page));
    let router = match mode {
        Mode::Naive => routes.route("/checkout", post(checkout_naive)),
        Mode::Idempotent => {
            let layer = layer(store);
            let _ = shop.runs.set(layer.runs());
            // On the route, not the router: the router's own answers (404, and 405 for a
            // PATCH to this POST-only route) never reach the layer, so they are never
            // stored under a key that a later POST would then find reused.
            routes.route("/checkout", post(checkout).route_layer(layer))
        }
    };
    (router.with_state(shop.clone()), shop)
}

/// The layer every idempotent checkout route has, on `store`.
pub(crate) fn layer<S>(store: S) -> IdempotencyLayer<S, fn(&http::request::Parts) -> Option<String>>
where
    S: AsyncKeyStore<StoredResponse> + 'static,
{
    // A payment without a key is refused (400), not charged: the page always sends one,
    // so a request without it is a client bug to surface.
    let config = Config::builder()
        .require_key(true)
        .wait_for_first(Some(Duration::from_secs(10)))
        .build()
        .expect("valid settings");
    let merchant: fn(&http::request::Parts) -> Option<String> = |_| Some(MERCHANT.to_string());
    IdempotencyLayer::with_config(store, merchant, config)
        .expect("the store keeps the layer's responses")
}

/// The checkout page. It offers a fresh key when it renders, but the page keeps the first
/// key it was given for this order (in the browser's `localStorage`): the key belongs to
/// the intent (this order), not to the click nor to the render, so a double click, a
/// retry after a network error and a reload all send the same key.
pub(crate) async fn page() -> Html<String> {
    Html(PAGE.replace("{KEY}", &intent_key()))
}

/// 128 random bits in hex (a UUID v4 in a real service).
fn intent_key() -> String {
    // Each `RandomState` is keyed afresh from the process's random seed.
    let half = || {
        let mut hasher = RandomState::new().build_hasher();
        hasher.write_u8(0);
        hasher.finish()
    };
    format!("{:016x}{:016x}", half(), half())
}

/// `customer=cus_1&amount=1050&currency=EUR`, validated.
pub(crate) fn parse_order(body: &str) -> Result<PaymentRequest, String> {
    let field = |name: &str| {
        body.split('&').find_map(|pair| pair.strip_prefix(name)?.strip_prefix('=')).unwrap_or("")
    };
    let amount: i64 =
        field("amount").parse().map_err(|_| "amount must be minor units".to_string())?;
    PaymentRequest::new(field("customer"), amount, field("currency")).map_err(|e| e.to_string())
}

fn charged(status: StatusCode, charge: &idem_payments::Charge, how: &str) -> Response {
    (status, [("content-type", "application/json")], charge_json(charge, how)).into_response()
}

/// The JSON body that answers a charge.
pub(crate) fn charge_json(charge: &idem_payments::Charge, how: &str) -> String {
    let amount = charge.amount.in_currency(charge.currency);
    format!("{{\"charge\":\"{}\",\"amount\":\"{amount}\",\"how\":\"{how}\"}}", charge.id)
}

/// The naive checkout: charges on every request, with a fresh gateway key each time.
async fn checkout_naive(State(shop): State<Arc<Shop>>, body: String) -> Response {
    let order = match parse_order(&body) {
        Ok(order) => order,
        Err(why) => return (StatusCode::BAD_REQUEST, why).into_response(),
    };
    let n = shop.fresh.fetch_add(1, Ordering::Relaxed);
    let key = ScopedKey::parse(MERCHANT, &format!("request-{n}")).expect("valid key");
    let key = GatewayKey::derive(&key);
    let paid = shop
        .paying(move |shop, gone| Ok((StatusCode::CREATED, charge(shop, gone, &key, &order)?, "")));
    match paid.await {
        Ok((status, charge, _)) => charged(status, &charge, "charged"),
        Err(answer) => *answer,
    }
}

/// The idempotent checkout, behind the layer: the gateway key is derived from the
/// request's `Idempotency-Key`. A recovering request asks the gateway first.
pub(crate) async fn checkout(
    State(shop): State<Arc<Shop>>,
    recovering: Option<Extension<Recovering>>,
    headers: HeaderMap,
    body: String,
) -> Response {
    let recovering = recovering.is_some();
    match shop.paying(move |shop, gone| pay(shop, gone, recovering, &headers, &body)).await {
        Ok((status, charge, how)) => charged(status, &charge, how),
        Err(answer) => *answer,
    }
}

/// The payment behind a checkout: the charge and how it was found (charged now, or
/// recovered from the gateway), or the answer to give instead (a bad order, a decline,
/// an unknown outcome), each marked as the layer must treat it. No charge is sent once
/// `gone` is raised.
pub(crate) fn pay(
    shop: &Shop,
    gone: &Abandoned,
    recovering: bool,
    headers: &HeaderMap,
    body: &str,
) -> Paid {
    let order = match parse_order(body) {
        // Refused before any charge: nothing happened, so a fixed retry may run.
        Err(why) => {
            return Err(Box::new(
                (StatusCode::BAD_REQUEST, Extension(NothingHappened), why).into_response(),
            ));
        }
        Ok(order) => order,
    };
    // The layer refused a request without a valid key (`require_key`); answer 400 rather
    // than trust that if this handler is ever mounted without it.
    let Some(key) = idem_http::header::parse_key(headers).ok().flatten() else {
        let why = "an Idempotency-Key header is required";
        return Err(Box::new(
            (StatusCode::BAD_REQUEST, Extension(NothingHappened), why).into_response(),
        ));
    };
    let Ok(scope) = idem_core::Scope::new(MERCHANT) else {
        return Err(Box::new(
            (StatusCode::INTERNAL_SERVER_ERROR, "invalid merchant scope").into_response(),
        ));
    };
    let key = GatewayKey::derive(&ScopedKey::new(scope, key));
    if recovering {
        match shop.payments().lookup(&key) {
            Lookup::Charged(charge) => return Ok((StatusCode::OK, charge, "recovered")),
            Lookup::NotCharged => {}
            Lookup::Declined(reason) => {
                return Err(Box::new((StatusCode::PAYMENT_REQUIRED, reason).into_response()));
            }
            // Still unknown: answer so, and leave the key in flight for the next recovery.
            Lookup::Unknown => return Err(Box::new(outcome_unknown())),
        }
    }
    charge(shop, gone, &key, &order).map(|charge| (StatusCode::CREATED, charge, "charged"))
}

/// Charges `order`, unless its run is `gone` (checked before the call, and by a remote
/// gateway again once its connection is open, just before the charge is written).
fn charge(
    shop: &Shop,
    gone: &Abandoned,
    key: &GatewayKey,
    order: &PaymentRequest,
) -> Result<idem_payments::Charge, Box<Response>> {
    let charged = match shop.remote.get() {
        _ if gone.raised() => Err(GatewayError::Refused("the run is gone".into())),
        Some(remote) => remote.charge_unless(key, order, || gone.raised()),
        None => shop.gateway.charge(key, order),
    };
    match charged {
        Ok(charge) => Ok(charge),
        Err(GatewayError::Declined(reason)) => {
            Err(Box::new((StatusCode::PAYMENT_REQUIRED, reason).into_response()))
        }
        // Nothing was charged: the key is given back, so a retry runs again. The gateway's
        // own words stay in the server's log, not in the customer's answer.
        Err(GatewayError::Refused(_)) => {
            let why = "the payment service is unavailable; nothing was charged, retry later";
            Err(Box::new(
                (StatusCode::SERVICE_UNAVAILABLE, Extension(NothingHappened), why).into_response(),
            ))
        }
        // Sent, no answer: charged or not, nobody knows yet. Never stored as the answer.
        Err(_) => Err(Box::new(outcome_unknown())),
    }
}

/// The answer when the gateway cannot say whether it charged: not stored, so the retry
/// after the lease asks the gateway before acting.
fn outcome_unknown() -> Response {
    let why = "the payment's outcome is not known yet; retry with the same key: the retry \
               checks with the payment service before charging";
    (StatusCode::BAD_GATEWAY, Extension(OutcomeUnknown), why).into_response()
}

const PAGE: &str = r#"<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Checkout</title>
<style>
body { font: 16px system-ui, sans-serif; max-width: 32rem; margin: 3rem auto; }
button { font-size: 1.2rem; padding: .6rem 1.4rem; }
#status { margin-top: 1.2rem; font-size: 1.1rem; min-height: 1.5rem; }
#status.paid { color: #106b21; } #status.problem { color: #9a3412; }
#log { white-space: pre-wrap; font-family: monospace; font-size: .8rem; }
</style></head>
<body data-key="{KEY}">
<h1>Order #1: 10.50 EUR</h1>
<p>Click as often as you like, reload the page: this order keeps one key, so every click,
every retry and every reload sends the same <code>Idempotency-Key</code>.</p>
<button id="pay">Pay 10.50 EUR</button>
<div id="status" role="status" aria-live="polite"></div>
<details><summary>What the server answered</summary><div id="log"></div></details>
<script>
// The order's key: the one kept for this order, else the one this render offers (kept
// from now on). A reload must not make a new intent of the same order.
const stored = window.localStorage.getItem('idem-order-1');
const key = stored || document.body.dataset.key;
if (!stored) { window.localStorage.setItem('idem-order-1', key); }
const button = document.getElementById('pay');
const log = (line) => { document.getElementById('log').textContent += line + '\n'; };
const say = (text, kind) => {
  const status = document.getElementById('status');
  status.textContent = text;
  status.className = kind || '';
};
const pause = (ms) => new Promise((done) => setTimeout(done, ms));
// What a person reads for an answer; the raw answer goes to the log.
function shown(response, replayed, text) {
  if (response.ok) {
    const charge = JSON.parse(text);
    return replayed
      ? ['Already paid: ' + charge.amount + ' (charge ' + charge.charge
         + '). Nothing was charged again.', 'paid']
      : ['Paid ' + charge.amount + ' (charge ' + charge.charge + '). Thank you.', 'paid'];
  }
  if (response.status === 402) { return ['The card was declined: ' + text, 'problem']; }
  return ['The payment could not be confirmed yet. Pay again: you will not be charged twice.',
          'problem'];
}
async function pay() {
  button.disabled = true;
  say('Paying...');
  for (let attempt = 1; attempt <= 5; attempt++) {
    try {
      const response = await fetch('/checkout', {
        method: 'POST',
        headers: { 'Idempotency-Key': '"' + key + '"',
                   'Content-Type': 'application/x-www-form-urlencoded' },
        body: 'customer=cus_1&amount=1050&currency=EUR',
      });
      const replayed = response.headers.get('Idempotent-Replayed') === 'true';
      const text = await response.text();
      log(response.status + (replayed ? ' (replayed) ' : ' ') + text);
      if (response.status === 409) {
        say('Your payment is still being processed...');
        await pause(1000 * Number(response.headers.get('Retry-After') || 1));
        continue;
      }
      const [message, kind] = shown(response, replayed, text);
      say(message, kind);
      // Paid: the button stays off. Otherwise the person may try again, with the same key.
      button.disabled = response.ok;
      button.textContent = response.ok ? 'Paid' : 'Pay 10.50 EUR';
      return;
    } catch (error) {
      log('network error, retrying with the same key: ' + error);
      say('The network failed; trying again with the same key...');
    }
  }
  say('The payment could not be confirmed yet. Pay again: you will not be charged twice.',
      'problem');
  button.disabled = false;
}
button.addEventListener('click', pay);
</script>
</body></html>
"#;
