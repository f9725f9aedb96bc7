//! The layer: read the key, fingerprint the request, claim before the handler runs, store
//! its response after, replay it to every repeat.

use std::fmt;
use std::future::Future;
use std::panic::{self, AssertUnwindSafe};
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::request::Parts;
use http::{HeaderValue, Request, Response, StatusCode, header};
use http_body::Body;
use http_body_util::BodyExt;
use idem_core::{
    AsyncKeyStore, Claim, Fingerprint, IdempotencyKey, Lease, Scope, ScopedKey, StoreError, Timer,
    WAIT_PAUSE_FIRST,
};
use sha2::{Digest, Sha256};
use tower_layer::Layer;
use tower_service::Service;

use crate::body::{BoxError, ResponseBody};
use crate::config::{Config, ConfigError};
use crate::header::{HeaderError, IDEMPOTENT_REPLAYED, parse_key};
use crate::outcomes::{Count, Counters};
use crate::problem::Problem;
use crate::stored::{
    NOT_KEPT_BODY_BYTES_MAX, STORED_ENVELOPE_BYTES, STORED_HEADER_BYTES_MAX, STORED_HEADERS_MAX,
    StoredResponse, headers_len,
};

/// Put in a response's extensions by a handler that did nothing (it refused before any
/// side effect, say a dependency was down): the claim is released instead of stored, so
/// a retry with the same key runs the handler again. With axum, return
/// `(StatusCode::SERVICE_UNAVAILABLE, Extension(NothingHappened), "...")`. A run that
/// recovered its claim ([`Recovering`]) never releases it, even so: the earlier run may
/// have acted, so the key stays in flight and the next request recovers and checks again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NothingHappened;

/// Put in a response's extensions by a handler that cannot know whether it acted (its
/// payment gateway timed out after the charge was sent): the response reaches its caller
/// but is not stored, and the key stays in flight, so the first request after the lease
/// runs with [`Recovering`] and checks before acting. Storing it would answer every
/// retry for a day with a failure that may have charged; releasing it would act twice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OutcomeUnknown;

/// Put in the request's extensions by the layer, before the handler runs: the lease its
/// claim holds. A handler that writes its effect to the store's own database reads it to
/// store its answer in the same transaction (the PostgreSQL store's `complete_in`), then
/// marks its response [`StoredByHandler`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claimed {
    pub(crate) lease: Lease,
}

impl Claimed {
    /// The lease the request's claim holds.
    pub fn lease(&self) -> &Lease {
        &self.lease
    }
}

/// Put in a response's extensions by a handler that stored its answer itself, with the
/// [`Claimed`] lease, in the transaction that made its effect (so the effect and the
/// answer commit together, or neither does): the layer passes the response on and stores
/// nothing. The handler must store exactly what it answers (build the response from the
/// [`StoredResponse`] it stored: [`StoredResponse::to_response`]), since every repeat
/// replays what was stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StoredByHandler;

/// Put in a request's extensions when an earlier request with this key started the
/// handler and never finished (its client went away, or the server died), and its lease
/// ran out: the side effect may or may not have happened. The handler must check before
/// acting (ask the payment gateway by key, look the order up) instead of acting blindly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Recovering;

/// The `Idempotency-Key` layer over an [`AsyncKeyStore`]; see the crate docs.
///
/// `scope` maps a request to the principal whose keys it uses (the authenticated
/// account or tenant): two principals' keys never meet, so one tenant can never be
/// answered with another tenant's stored response. It returns `None` for a request it
/// cannot attribute, which is answered 400.
pub struct IdempotencyLayer<St, F> {
    state: Arc<LayerState<St, F>>,
}

/// What the layer and every service it made share, behind one `Arc`: the store, the scope,
/// the configuration and the limits read from the store when the layer was built, the
/// waiters' count and the counters.
pub(crate) struct LayerState<St, F> {
    pub(crate) store: St,
    scope: F,
    pub(crate) config: Config,
    /// The largest response body kept: the config's, checked against the store's limit.
    pub(crate) response_bytes_max: usize,
    /// The largest result the store keeps (`AsyncKeyStore::result_bytes_max`), read once.
    pub(crate) store_bytes_max: Option<usize>,
    /// Requests waiting for a first request to finish (`wait_for_first`).
    waiters: AtomicUsize,
    pub(crate) counters: Counters,
    /// The runs going on their own tasks.
    pub(crate) runs: crate::run::Runs,
}

/// What the layer counted, from [`IdempotencyLayer::stats`]: the outcomes an operator
/// must see, because the client never does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LayerStats {
    /// Claims that took an absent key: the handler ran.
    pub acquired: u64,
    /// Claims that recovered a key whose lease had run out: the handler ran with
    /// [`Recovering`].
    pub recovered: u64,
    /// Repeats answered with the stored response.
    pub replayed: u64,
    /// Duplicates answered 409 while the first was in flight (after any wait).
    pub in_flight: u64,
    /// Requests answered 422: their key was used for another request.
    pub key_reused: u64,
    /// Requests answered 429: their principal held its quota of claims in flight.
    pub scope_quota: u64,
    /// Requests answered 503 because the store held all the keys it can.
    pub store_full: u64,
    /// Claims released, so that a retry runs again: the handler said nothing happened
    /// ([`NothingHappened`], or a status the configuration names effect-free).
    pub released: u64,
    /// Store calls that failed (a claim answered 503, a completion or release the store
    /// refused). A failed completion leaves the key in flight: the next request after
    /// the lease runs with [`Recovering`].
    pub store_errors: u64,
    /// Leases found lost (a renewal, completion or release refused): a handler slower
    /// than its lease was recovered by another request meanwhile.
    pub leases_lost: u64,
    /// Runs stopped because their lease could no longer be vouched for (no renewal the
    /// store answered for three eighths of a lease, as when the server is cut from the
    /// store, or a renewal that found the lease lost): their handlers were dropped where
    /// they waited and their keys left in flight for recovery.
    pub runs_stopped: u64,
    /// Responses too large to keep (body over `response_bytes_max`, or headers over
    /// [`STORED_HEADER_BYTES_MAX`](crate::STORED_HEADER_BYTES_MAX)): the first caller got
    /// the whole response, repeats get a problem saying it was not kept.
    pub not_kept: u64,
    /// Handlers whose outcome is unknown (a response body that failed half-way, one
    /// marked [`OutcomeUnknown`], a handler that panicked or was abandoned past
    /// `orphan_time_max`): their keys were left in flight for recovery.
    pub left_in_flight: u64,
    /// Leases extended while their handler ran (every quarter of the store's lease).
    pub leases_renewed: u64,
    /// Handlers whose client left before the answer, run to their end and settled: the
    /// client's retry replays what they answered.
    pub orphans_finished: u64,
    /// Handlers whose client left and that then ran past
    /// [`ConfigBuilder::orphan_time_max`](crate::ConfigBuilder::orphan_time_max): stopped,
    /// their keys left in flight for recovery.
    pub orphans_abandoned: u64,
    /// Records an operator forgot ([`Operator::forget`](crate::Operator::forget)): their
    /// next request runs the handler again.
    pub forgotten: u64,
}

impl<St, F> IdempotencyLayer<St, F>
where
    St: AsyncKeyStore<StoredResponse> + 'static,
    F: Fn(&Parts) -> Option<String> + Send + Sync + 'static,
{
    /// A layer with the default [`Config`] (POST and PATCH, optional key, 1 MiB limits,
    /// 409 at once for a duplicate in flight). The stored-response limit is 1 MiB,
    /// lowered to what the store keeps if it keeps less
    /// ([`AsyncKeyStore::result_bytes_max`]).
    pub fn new(store: St, scope: F) -> Self {
        // A store too small even for the stand-in (which `with_config` refuses) still gets
        // no larger limit than it keeps; its refused completions are counted and traced.
        let store_max = store.result_bytes_max();
        let limit = Config::default().response_limit(store_max).unwrap_or_else(|_| {
            store_max.unwrap_or(usize::MAX).saturating_sub(crate::STORED_ENVELOPE_BYTES)
        });
        Self::build(store, scope, Config::default(), limit)
    }

    /// A layer with `config`.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] naming `response_bytes_max` if the store cannot keep a response as large as
    /// `config` allows ([`ConfigBuilder::response_bytes_max`](crate::ConfigBuilder)): it
    /// names both limits. A response the store refused at completion would leave its key
    /// in flight and its handler would run again; this refuses that configuration first.
    pub fn with_config(store: St, scope: F, config: Config) -> Result<Self, ConfigError> {
        let limit = config.response_limit(store.result_bytes_max())?;
        Ok(Self::build(store, scope, config, limit))
    }

    fn build(store: St, scope: F, mut config: Config, response_bytes_max: usize) -> Self {
        let expires = http::HeaderName::from_static(crate::header::IDEMPOTENCY_EXPIRES);
        if config.advertise_expiry && !config.replay_headers.contains(&expires) {
            // Kept with the response, so every replay tells the same expiry.
            config.replay_headers.push(expires);
        }
        let (waiters, counters) = (AtomicUsize::new(0), Counters::default());
        let store_bytes_max = store.result_bytes_max();
        let state = LayerState {
            store,
            scope,
            config,
            response_bytes_max,
            store_bytes_max,
            waiters,
            counters,
            runs: crate::run::Runs::default(),
        };
        Self { state: Arc::new(state) }
    }

    /// The store the layer claims keys in.
    pub fn store(&self) -> &St {
        &self.state.store
    }

    /// The largest response body the layer keeps for replays, as checked against the
    /// store when the layer was built.
    pub fn response_bytes_max(&self) -> usize {
        self.state.response_bytes_max
    }

    /// The runs this layer has going on their own tasks: a graceful shutdown waits for
    /// them ([`Runs::drained`](crate::Runs::drained)) before the runtime ends.
    pub fn runs(&self) -> crate::Runs {
        self.state.runs.clone()
    }

    /// What the layer counted (store failures, lost leases, responses not kept).
    pub fn stats(&self) -> LayerStats {
        let c = &self.state.counters;
        LayerStats {
            acquired: c.get(Count::Acquired),
            recovered: c.get(Count::Recovered),
            replayed: c.get(Count::Replayed),
            in_flight: c.get(Count::InFlight),
            key_reused: c.get(Count::KeyReused),
            scope_quota: c.get(Count::ScopeQuota),
            store_full: c.get(Count::StoreFull),
            released: c.get(Count::Released),
            store_errors: c.get(Count::StoreErrors),
            leases_lost: c.get(Count::LeasesLost),
            runs_stopped: c.get(Count::RunsStopped),
            not_kept: c.get(Count::NotKept),
            left_in_flight: c.get(Count::LeftInFlight),
            leases_renewed: c.get(Count::LeasesRenewed),
            orphans_finished: c.get(Count::OrphansFinished),
            orphans_abandoned: c.get(Count::OrphansAbandoned),
            forgotten: c.get(Count::Forgotten),
        }
    }
}

impl<St, F> IdempotencyLayer<St, F>
where
    St: idem_core::AsyncKeyAdmin + 'static,
{
    /// The operator's handle on this layer's keys: look one up, forget one
    /// ([`Operator`](crate::Operator)), on the same store.
    pub fn operator(&self) -> crate::Operator<St, F> {
        crate::Operator::new(self.state.clone())
    }
}

impl<St, F> Clone for IdempotencyLayer<St, F> {
    fn clone(&self) -> Self {
        Self { state: self.state.clone() }
    }
}

impl<St, F> fmt::Debug for IdempotencyLayer<St, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IdempotencyLayer").field("config", &self.state.config).finish()
    }
}

impl<S, St, F> Layer<S> for IdempotencyLayer<St, F> {
    type Service = Idempotency<S, St, F>;

    fn layer(&self, inner: S) -> Self::Service {
        Idempotency { inner, state: self.state.clone() }
    }
}

/// The service [`IdempotencyLayer`] wraps around a handler.
pub struct Idempotency<S, St, F> {
    inner: S,
    state: Arc<LayerState<St, F>>,
}

impl<S: Clone, St, F> Clone for Idempotency<S, St, F> {
    fn clone(&self) -> Self {
        Self { inner: self.inner.clone(), state: self.state.clone() }
    }
}

impl<S, St, F> fmt::Debug for Idempotency<S, St, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Idempotency").field("config", &self.state.config).finish_non_exhaustive()
    }
}

impl<S, St, F, B, RB> Service<Request<B>> for Idempotency<S, St, F>
where
    S: Service<Request<B>, Response = Response<RB>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    St: AsyncKeyStore<StoredResponse> + 'static,
    F: Fn(&Parts) -> Option<String> + Send + Sync + 'static,
    B: Body<Data = Bytes> + From<Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
    RB: Body<Data = Bytes> + Send + 'static,
    RB::Error: Into<BoxError> + Send,
{
    type Response = Response<ResponseBody<RB>>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        // The service that was polled ready serves this request; a clone waits for the next.
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        Box::pin(handle(self.state.clone(), inner, request))
    }
}

/// What the claim decided.
pub(crate) enum Decision {
    /// Run the handler under this lease; `recovering` if an earlier run never finished;
    /// the instant the call that granted (or last renewed) it was sent, from which the
    /// run vouches for the lease.
    Run(Lease, bool, tokio::time::Instant),
    Replay(StoredResponse),
    Answer(Problem),
}

async fn handle<S, St, F, B, RB>(
    state: Arc<LayerState<St, F>>,
    mut inner: S,
    request: Request<B>,
) -> Result<Response<ResponseBody<RB>>, S::Error>
where
    S: Service<Request<B>, Response = Response<RB>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    St: AsyncKeyStore<StoredResponse> + 'static,
    F: Fn(&Parts) -> Option<String> + Send + Sync + 'static,
    B: Body<Data = Bytes> + From<Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
    RB: Body<Data = Bytes> + Send + 'static,
    RB::Error: Into<BoxError> + Send,
{
    let config = &state.config;
    let pass = |response: Response<RB>| response.map(ResponseBody::inner);
    if !config.methods.contains(request.method()) {
        return inner.call(request).await.map(pass);
    }
    let key = match parse_key(request.headers()) {
        Ok(Some(key)) => key,
        Ok(None) if !config.require_key => return inner.call(request).await.map(pass),
        Ok(None) => return Ok(missing_key().response()),
        Err(error) => return Ok(malformed_key(&error).response()),
    };
    let (mut parts, body) = request.into_parts();
    let scoped = match scoped_key(&state, &parts, key) {
        Ok(scoped) => scoped,
        Err(problem) => return Ok(problem.response()),
    };
    let (bytes, body_sha256) = match read_body(&parts, body, config.body_bytes_max).await {
        Ok(read) => read,
        Err(problem) => return Ok(problem.response()),
    };
    let fingerprint = match fingerprint(&parts, config, &bytes, &body_sha256) {
        Ok(fingerprint) => fingerprint,
        Err(problem) => return Ok(problem.response()),
    };
    let (lease, recovering, vouched) = match decide_detached(&state, scoped, fingerprint).await {
        Decision::Run(lease, recovering, vouched) => (lease, recovering, vouched),
        Decision::Replay(stored) => return Ok(replay(stored, &parts, config)),
        Decision::Answer(problem) => {
            idem_core::trace_event!(INFO, status = problem.status.as_u16(), problem.slug);
            return Ok(problem.response());
        }
    };
    if recovering {
        parts.extensions.insert(Recovering);
    }
    // From here the claim is ours, and a task of its own runs the handler and settles
    // the claim, to the end even if this future is dropped (the client went away).
    let request = Request::from_parts(parts, B::from(bytes));
    let held = crate::run::Held { lease, recovering, vouched };
    crate::run::run_claimed(state, inner, request, held).await
}

fn missing_key() -> Problem {
    Problem::new(
        StatusCode::BAD_REQUEST,
        "key-missing",
        "Idempotency-Key required",
        "this route needs an Idempotency-Key header: make one per intended operation \
         (a UUID) and send the same one on every retry",
    )
}

fn malformed_key(error: &HeaderError) -> Problem {
    Problem::new(
        StatusCode::BAD_REQUEST,
        "key-malformed",
        "Malformed Idempotency-Key",
        error.to_string(),
    )
}

/// The request's key under its principal's scope.
fn scoped_key<St, F>(
    state: &LayerState<St, F>,
    parts: &Parts,
    key: IdempotencyKey,
) -> Result<ScopedKey, Problem>
where
    F: Fn(&Parts) -> Option<String>,
{
    // A scope function that panics is a server bug, answered as an invalid scope: the
    // panic stays in the server (it would otherwise end the connection unanswered).
    let principal = match panic::catch_unwind(AssertUnwindSafe(|| (state.scope)(parts))) {
        Ok(Some(principal)) => principal,
        Ok(None) => {
            let detail = "the server cannot tell whose key this is; authenticate first";
            return Err(Problem::new(
                StatusCode::BAD_REQUEST,
                "no-scope",
                "No scope for the key",
                detail,
            ));
        }
        Err(_) => return Err(bad_scope(&"the scope function panicked")),
    };
    match Scope::new(&principal) {
        Ok(scope) => Ok(ScopedKey::new(scope, key)),
        // The scope comes from the server, not the client: a server bug, said as such to
        // the client, with an id to quote; what is wrong with it (which says something of
        // the principal) goes to the operator only.
        Err(error) => Err(bad_scope(&idem_core::ScopedKeyError::Scope(error))),
    }
}

/// The answer to a scope function that failed (`error`, for the operator's log only).
fn bad_scope(error: &dyn std::fmt::Display) -> Problem {
    let what = "the server's scope function returned an invalid scope";
    server_fault(("scope", "bad-scope", "Invalid scope"), what, error)
}

/// The answer to a fingerprint meaning that panicked.
fn meaning_panicked() -> Problem {
    let what = "the server failed to read the request's meaning; nothing was claimed or run";
    server_fault(("meaning", "bad-meaning", "Meaning failed"), what, &"it panicked")
}

/// A 500 for a fault of the server's own code (`op`, answered as problem `kind` with
/// `title`): `what` for the client with an error id, `error` for the operator's log only.
fn server_fault(
    (op, kind, title): (&'static str, &'static str, &'static str),
    what: &str,
    error: &dyn std::fmt::Display,
) -> Problem {
    let id = error_id(op);
    idem_core::trace_event!(ERROR, error_id = %id, %error, "{op}: the server's code failed");
    #[cfg(not(feature = "tracing"))]
    let _ = error;
    let detail = format!("{what}; the server's log says why, under error id {id}");
    Problem::new(StatusCode::INTERNAL_SERVER_ERROR, kind, title, detail)
}

/// Reads the body, at most `max` bytes, hashing it as it arrives.
async fn read_body<B>(parts: &Parts, body: B, max: usize) -> Result<(Bytes, [u8; 32]), Problem>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    let too_large = || {
        let detail = format!("the body is over {max} bytes; nothing was claimed or run");
        Problem::new(StatusCode::PAYLOAD_TOO_LARGE, "body-too-large", "Body too large", detail)
    };
    let declared = parts.headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok());
    if declared.and_then(|v| v.parse::<u64>().ok()).is_some_and(|len| len > max as u64) {
        return Err(too_large());
    }
    let mut body = pin!(body);
    let mut hasher = Sha256::new();
    let mut read = BytesMut::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|error| {
            // The error's text may name the server's internals: it goes to the operator.
            let error: BoxError = error.into();
            idem_core::trace_event!(WARN, %error, "reading a request body failed");
            drop(error);
            let detail = "reading the request body failed; nothing was claimed or run";
            Problem::new(StatusCode::BAD_REQUEST, "body-unreadable", "Unreadable body", detail)
        })?;
        if let Ok(data) = frame.into_data() {
            if read.len() + data.len() > max {
                return Err(too_large());
            }
            hasher.update(&data);
            read.extend_from_slice(&data);
        }
    }
    Ok((read.freeze(), hasher.finalize().into()))
}

/// The path and query the request was sent to: behind axum's `Router::nest` the URI the
/// layer sees has the nest's prefix stripped (`/orders/pay` and `/refunds/pay` both read
/// `/pay`), so the one axum keeps as sent (`OriginalUri`) is read first.
fn target(parts: &Parts) -> &str {
    #[cfg(feature = "axum")]
    if let Some(original) = parts.extensions.get::<axum::extract::OriginalUri>() {
        return original.0.path_and_query().map_or("/", |p| p.as_str());
    }
    parts.uri.path_and_query().map_or("/", |p| p.as_str())
}

/// The request's fingerprint: method, path and query, the configured headers, the body.
///
/// With a configured meaning, the meaning's SHA-256 stands for the body, under another
/// name than the body's bytes: a byte-exact fingerprint never equals a meaning's.
fn fingerprint(
    parts: &Parts,
    config: &Config,
    body: &Bytes,
    body_sha256: &[u8; 32],
) -> Result<Fingerprint, Problem> {
    let target = target(parts);
    let mut builder = Fingerprint::builder("idem-http/v1")
        .str("method", parts.method.as_str())
        .str("target", target);
    for name in &config.fingerprint_headers {
        for value in parts.headers.get_all(name) {
            builder = builder.bytes(name.as_str(), value.as_bytes());
        }
    }
    let Some(meaning) = &config.meaning else {
        return Ok(builder.bytes("body-sha256", body_sha256).finish());
    };
    // A meaning that panics is a server bug, answered with an error id (the panic would
    // otherwise end the request unanswered).
    let meant = panic::catch_unwind(AssertUnwindSafe(|| meaning.0.meaning(parts, body)))
        .map_err(|_| meaning_panicked())?;
    let meant = meant.map_err(|error| {
        let detail = format!("{error}; nothing was claimed or run");
        Problem::new(StatusCode::BAD_REQUEST, "body-not-understood", "Body not understood", detail)
    })?;
    let meaning_sha256: [u8; 32] = Sha256::digest(&meant).into();
    Ok(builder.bytes("meaning-sha256", &meaning_sha256).finish())
}

/// A place among the waiters, given back on drop (also when the request is dropped).
struct Waiter<'a>(&'a AtomicUsize);

impl<'a> Waiter<'a> {
    fn enter(waiters: &'a AtomicUsize, max: usize) -> Option<Self> {
        // ORDERING: a counter that bounds itself; no other data is published through it.
        let before = waiters.fetch_add(1, Ordering::Relaxed);
        if before >= max {
            waiters.fetch_sub(1, Ordering::Relaxed);
            return None;
        }
        Some(Self(waiters))
    }
}

impl Drop for Waiter<'_> {
    fn drop(&mut self) {
        // ORDERING: as in `enter`: the counter bounds itself and publishes nothing.
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The answer to a claim, with the store's own error, if any, left out of it: a client
/// learns a stable problem type and an error id to quote; the error itself goes to the
/// operator (`tracing`, and [`LayerStats::store_errors`]).
fn decision(
    answer: Result<Claim<StoredResponse>, StoreError>,
    counters: &Counters,
    sent: tokio::time::Instant,
) -> Decision {
    let (count, problem) = match answer {
        Ok(Claim::Acquired(lease)) => (Count::Acquired, Ok(Decision::Run(lease, false, sent))),
        Ok(Claim::Recover(lease)) => (Count::Recovered, Ok(Decision::Run(lease, true, sent))),
        Ok(Claim::Replay(stored)) => (Count::Replayed, Ok(Decision::Replay(stored))),
        Ok(Claim::InFlight { retry_after }) => {
            (Count::InFlight, Err(in_flight(counters, retry_after)))
        }
        Err(StoreError::KeyReused { .. }) => (Count::KeyReused, Err(key_reused())),
        Err(StoreError::ScopeQuota { in_flight_max, .. }) => {
            (Count::ScopeQuota, Err(scope_quota(in_flight_max)))
        }
        // The truth: room frees only as results expire, which no client can hurry; no
        // Retry-After, and nothing of the server's configuration.
        Err(StoreError::StoreFull { .. }) => (Count::StoreFull, Err(store_full())),
        Err(error) => {
            let id = count_store_error(counters, "claim", &error);
            return Decision::Answer(store_unavailable(&id));
        }
    };
    counters.count(count);
    problem.unwrap_or_else(Decision::Answer)
}

/// A duplicate of a request in flight: retry after the handlers' usual time (how long
/// nine in ten of the last took), never past the holder's lease.
fn in_flight(counters: &Counters, lease_left: Duration) -> Problem {
    Problem::new(
        StatusCode::CONFLICT,
        "key-in-flight",
        "Request in progress",
        "a request with this Idempotency-Key is still being processed; retry after \
         Retry-After seconds with the same key",
    )
    .retry_after(counters.retry_after(lease_left))
}

fn store_full() -> Problem {
    Problem::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "store-full",
        "Too many requests kept",
        "the server cannot take a new Idempotency-Key now; nothing was run. Try again later",
    )
}

fn store_unavailable(id: &str) -> Problem {
    Problem::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "store-unavailable",
        "Idempotency store unavailable",
        format!("nothing was run; the error's id for the operator is {id}"),
    )
    .retry_after(RETRY_AFTER_UNAVAILABLE)
}

fn scope_quota(in_flight_max: usize) -> Problem {
    Problem::new(
        StatusCode::TOO_MANY_REQUESTS,
        "scope-quota",
        "Too many requests in flight",
        format!("this principal has {in_flight_max} requests in flight already"),
    )
    .retry_after(RETRY_AFTER_UNAVAILABLE)
}

fn key_reused() -> Problem {
    Problem::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        "key-reused",
        "Idempotency-Key reused",
        "this key was used for a different request (method, path, headers or body \
             differ); its stored response is unchanged. Use a new key for a new request",
    )
}

/// The `Retry-After` of a 429 or 503: one second.
const RETRY_AFTER_UNAVAILABLE: Duration = Duration::from_secs(1);

/// Counts a store failure and traces it with a fresh id, which it returns for the client
/// to quote: the operator finds the error by it, the client never sees the error.
pub(crate) fn count_store_error(
    counters: &Counters,
    op: &'static str,
    error: &StoreError,
) -> String {
    counters.count(Count::StoreErrors);
    let id = error_id(op);
    idem_core::trace_event!(ERROR, op, error_id = %id, %error, "idempotency store failed");
    #[cfg(not(feature = "tracing"))]
    let _ = (op, error);
    id
}

/// A fresh id for an error a client is told of and the operator's log holds: a fresh
/// random key per id, so ids never repeat and say nothing of how many came before.
fn error_id(op: &'static str) -> String {
    use std::hash::BuildHasher;
    format!("{:016x}", std::hash::RandomState::new().hash_one(op))
}

/// The limits a kept response must fit: its body's, and the store's for the whole.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Keep {
    pub(crate) body: usize,
    pub(crate) store: Option<usize>,
}

/// What is kept of a response: its status, allow-listed headers and body when they fit
/// (the body within its limit, the headers within their count and bytes, the whole within
/// what the store keeps). Otherwise a problem saying it was not kept, with the kept
/// headers that do not describe the body (a `location` still names what was made) if
/// they fit, else with none: a stand-in of at most [`crate::NOT_KEPT_BYTES_MAX`] bytes,
/// which every store the layer accepts can keep.
pub(crate) fn stored_response(
    parts: &http::response::Parts,
    body: Option<&Bytes>,
    config: &Config,
    keep: Keep,
) -> (StoredResponse, bool) {
    let headers: Vec<_> = config
        .replay_headers
        .iter()
        .flat_map(|name| parts.headers.get_all(name).iter().map(|v| (name.clone(), v.clone())))
        .collect();
    let header_bytes = headers_len(&headers);
    let headers_fit =
        headers.len() <= STORED_HEADERS_MAX && header_bytes <= STORED_HEADER_BYTES_MAX;
    let fits_store = |len: usize| keep.store.is_none_or(|max| len <= max);
    let detail = match body {
        None => format!("the original response was over the {}-byte limit", keep.body),
        Some(_) if !headers_fit => format!(
            "the original response's headers were over {STORED_HEADERS_MAX} values or \
             {STORED_HEADER_BYTES_MAX} bytes"
        ),
        Some(body) if fits_store(STORED_ENVELOPE_BYTES + header_bytes + body.len()) => {
            let whole = StoredResponse { status: parts.status, headers, body: body.clone() };
            return (whole, true);
        }
        Some(_) => format!(
            "the original response was larger than the store keeps ({} bytes)",
            keep.store.unwrap_or(usize::MAX)
        ),
    };
    let detail = format!("{detail} for stored responses: it reached the first request only");
    let problem = Problem::new(parts.status, "response-too-large", "Response not kept", detail);
    let json = (header::CONTENT_TYPE, HeaderValue::from_static("application/problem+json"));
    let mut kept: Vec<_> = headers.into_iter().filter(|_| headers_fit).collect();
    kept.retain(|(name, _)| !describes_the_body(name));
    kept.push(json.clone());
    let body = problem.body();
    // Every store the layer accepts keeps a stand-in this large (`NOT_KEPT_BYTES_MAX`); a
    // longer one could be refused at completion, and its handler would run again.
    assert!(body.len() <= NOT_KEPT_BODY_BYTES_MAX, "a stand-in body of {} bytes", body.len());
    let stand_in = StoredResponse { status: parts.status, headers: kept, body };
    if fits_store(stand_in.encoded_len()) {
        return (stand_in, false);
    }
    (StoredResponse { status: parts.status, headers: vec![json], body: stand_in.body }, false)
}

/// A header about the body itself, wrong beside the problem that stands in for it.
fn describes_the_body(name: &header::HeaderName) -> bool {
    name.as_str().starts_with("content-") || matches!(name.as_str(), "etag" | "digest")
}

/// The stored response, marked as a replay, through the configured replay hook. A hook
/// that panics is a server bug: the replay is sent as stored (the hook's changes, maybe
/// half made, dropped), and the panic traced.
fn replay<RB>(
    stored: StoredResponse,
    request: &Parts,
    config: &Config,
) -> Response<ResponseBody<RB>> {
    let marked = |stored: &StoredResponse| {
        let mut response: Response<ResponseBody<RB>> = stored.to_response();
        response.headers_mut().insert(IDEMPOTENT_REPLAYED, HeaderValue::from_static("true"));
        response
    };
    let Some(hook) = &config.on_replay else { return marked(&stored) };
    let (mut parts, body) = marked(&stored).into_parts();
    if panic::catch_unwind(AssertUnwindSafe(|| (hook.0)(request, &mut parts))).is_err() {
        idem_core::trace_event!(ERROR, "the replay hook panicked; the replay is sent as stored");
        return marked(&stored);
    }
    Response::from_parts(parts, body)
}

/// Claims on a task of its own, and waits for the decision. If this future is dropped
/// before it took the decision (the client left; the store may still commit the claim),
/// a fresh claim is given back, since no handler ran: the client's retry then runs at
/// once instead of waiting out the lease. A recovered claim is left in flight, as any
/// recovered claim whose run did nothing.
///
/// RACE (the decision's send against this future's drop): the claim's task may send the
/// decision after this future was dropped (the send fails and the task gives the claim
/// back) or before it (the decision waits in the channel, and [`Untaken`] finds it there
/// when dropped). The drop closes the channel before it looks, so a send that lands
/// during the drop fails (and its task gives back) rather than leaving the decision in a
/// channel nobody reads: exactly one of the two holds a fresh lease, and gives it back
/// once. Both orders are forced by idem-http's tests (`runs::a_client_that_leaves_...`);
/// a send landing between the close and the look is tokio's oneshot's own race, not
/// forced here.
async fn decide_detached<St, F>(
    state: &Arc<LayerState<St, F>>,
    key: ScopedKey,
    fingerprint: Fingerprint,
) -> Decision
where
    St: AsyncKeyStore<StoredResponse> + 'static,
    F: Send + Sync + 'static,
{
    let (decided, decision) = tokio::sync::oneshot::channel();
    let claiming = Arc::clone(state);
    tokio::spawn(async move {
        let claimed = claiming.decide(key, fingerprint).await;
        if let Err(Decision::Run(lease, false, _)) = decided.send(claimed) {
            give_back(claiming, lease).await;
        }
    });
    let runtime = tokio::runtime::Handle::current();
    let mut untaken = Untaken { decision, state: Arc::clone(state), runtime };
    let taken = (&mut untaken.decision).await;
    taken.unwrap_or_else(|_| Decision::Answer(claim_failed()))
}

/// A fresh claim whose handler never ran, given back so that a retry runs at once. It is
/// counted in [`Runs`](crate::Runs) from this call, before the returned future is first
/// polled (or spawned), so that a graceful shutdown waits for it.
fn give_back<St, F>(
    state: Arc<LayerState<St, F>>,
    lease: Lease,
) -> impl Future<Output = ()> + Send + 'static
where
    St: AsyncKeyStore<StoredResponse> + 'static,
    F: Send + Sync + 'static,
{
    let counted = state.runs.start();
    async move {
        let _counted = counted;
        let released = state.store.release(&lease).await;
        if released.is_ok() {
            state.counters.count(Count::Released);
        }
        state.settled("release", released);
    }
}

/// The decision's receiving end while [`decide_detached`] waits on it. Dropped, it
/// closes the channel and gives back a fresh claim still waiting in it (see the RACE
/// there); once the decision was taken, the channel is empty and nothing happens. The
/// give-back runs on the runtime the request came in on, wherever the drop happens, and
/// is counted from the drop ([`give_back`]); a runtime already shutting down drops it
/// unrun, and the lease then runs out for a retry to recover.
struct Untaken<St, F>
where
    St: AsyncKeyStore<StoredResponse> + 'static,
    F: Send + Sync + 'static,
{
    decision: tokio::sync::oneshot::Receiver<Decision>,
    state: Arc<LayerState<St, F>>,
    runtime: tokio::runtime::Handle,
}

impl<St, F> Drop for Untaken<St, F>
where
    St: AsyncKeyStore<StoredResponse> + 'static,
    F: Send + Sync + 'static,
{
    fn drop(&mut self) {
        self.decision.close();
        let Ok(Decision::Run(lease, false, _)) = self.decision.try_recv() else { return };
        self.runtime.spawn(give_back(Arc::clone(&self.state), lease));
    }
}

/// The answer when the claim's own task ended without a decision (it panicked).
fn claim_failed() -> Problem {
    Problem::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "claim-failed",
        "Claim failed",
        "the server failed while claiming the key; nothing was run. Retry with the same key \
         (if the claim was taken, the retry is answered 409 until its lease runs out)",
    )
}

/// tokio's timer, for the store's waiting claim.
struct TokioTimer;

impl Timer for TokioTimer {
    fn now(&self) -> std::time::Instant {
        tokio::time::Instant::now().into_std()
    }

    fn sleep(&self, pause: Duration) -> impl Future<Output = ()> + Send {
        tokio::time::sleep(pause)
    }
}

/// The layer's steps that use its store.
impl<St, F> LayerState<St, F>
where
    St: AsyncKeyStore<StoredResponse> + 'static,
    F: Send + Sync + 'static,
{
    /// Claims the key; with `wait_for_first`, waits (bounded) for a request in flight.
    async fn decide(self: &Arc<Self>, key: ScopedKey, fingerprint: Fingerprint) -> Decision {
        let sent = tokio::time::Instant::now();
        let first = self.store.claim(&key, &fingerprint).await;
        // A claim answered when a renewal would already be due (a slow store) is vouched
        // for afresh, as one won after waiting: left to the run's guard, a run started
        // with less of it left than a renewal takes was stopped, its handler begun (or
        // never started), and its key held in flight a lease.
        if matches!(first, Ok(Claim::Acquired(_) | Claim::Recover(_)))
            && crate::run::renewal_due(sent, self.store.lease())
        {
            return match decision(first, &self.counters, sent) {
                Decision::Run(lease, recovering, _) => self.vouched(lease, recovering).await,
                other => other,
            };
        }
        let Some(wait) = self.config.wait else { return decision(first, &self.counters, sent) };
        let Ok(Claim::InFlight { retry_after }) = first else {
            return decision(first, &self.counters, sent);
        };
        // At most `waiters_max` requests wait at once; one more is answered 409 at once.
        let Some(_waiter) = Waiter::enter(&self.waiters, self.config.waiters_max) else {
            return decision(first, &self.counters, sent);
        };
        // The store's waiting claim: idem-core's pauses (1 ms doubling to 50 ms), never
        // past the holder's lease or `wait`, on tokio's clock. It claims before its first
        // pause, so the first pause is taken here: the claim just made is not made again.
        let pause = WAIT_PAUSE_FIRST.min(retry_after).min(wait);
        tokio::time::sleep(pause).await;
        let left = wait - pause;
        let waiting = tokio::time::Instant::now();
        let waited = self.store.claim_wait(&key, &fingerprint, left, &TokioTimer).await;
        match decision(waited, &self.counters, waiting) {
            Decision::Run(lease, recovering, _) => self.vouched(lease, recovering).await,
            other => other,
        }
    }

    /// A lease won after waiting (when its claim was sent is not known: somewhere in the
    /// wait), or by a claim answered too late to vouch for a run: one renewal, sent now,
    /// vouches for it (fenced by the token: answered, no one else took the key). If the
    /// store does not answer it in time, nothing runs: a fresh claim is given back (no
    /// handler ran), a recovered one is left in flight (an earlier run may have acted),
    /// and the client is told the store is unavailable.
    async fn vouched(self: &Arc<Self>, lease: Lease, recovering: bool) -> Decision {
        let sent = tokio::time::Instant::now();
        // Answered later, the renewal would start a run with less guard left than its own
        // first renewal may take (and a store gone silent is not waited out).
        let within = crate::run::start_within(self.store.lease());
        let error = match tokio::time::timeout(within, self.store.renew(&lease)).await {
            Ok(Ok(renewed)) => return Decision::Run(renewed, recovering, sent),
            Ok(Err(error)) => error,
            Err(_) => StoreError::Storage("a renewal not answered in time to vouch".into()),
        };
        // Lost: another claim holds the key now, and a release would be refused (and
        // counted lost a second time): nothing to give back.
        let lost = matches!(error, StoreError::LeaseLost { .. });
        if lost {
            self.lease_lost("renew");
        }
        let id = count_store_error(&self.counters, "renew", &error);
        // Given back before the answer, so that a retry sent at once finds the key free;
        // a release the store does not answer as soon goes on by itself (counted in
        // `Runs`), and the client is not held for it.
        if !recovering && !lost {
            let release = tokio::spawn(give_back(Arc::clone(self), lease));
            match tokio::time::timeout(within, release).await {
                // Counted and traced by `give_back`.
                Ok(Ok(())) => {}
                // The store's release panicked: the key runs out for a retry to recover.
                Ok(Err(_)) => self.left_in_flight("a late claim's release panicked"),
                Err(_) => {
                    idem_core::trace_event!(INFO, "a late claim's release goes on by itself");
                }
            }
        }
        Decision::Answer(store_unavailable(&id))
    }
}

impl<St, F> LayerState<St, F>
where
    St: AsyncKeyStore<StoredResponse>,
{
    /// Completes the claim with `stored`, unless a renewal found the lease lost (`lost`):
    /// a result is never stored as if its handler still held the key.
    pub(crate) async fn complete(
        &self,
        lease: &Lease,
        stored: StoredResponse,
        kept: bool,
        lost: &std::sync::atomic::AtomicBool,
    ) {
        if !kept {
            self.counters.count(Count::NotKept);
        }
        // ORDERING: Acquire, paired with the renewal's Release (see its RACE note).
        if lost.load(Ordering::Acquire) {
            self.lease_lost("renew");
            return;
        }
        // A store failure (a connection cut for a moment) is tried again after each pause
        // of `COMPLETE_RETRY_PAUSES`, if it failed fast (`COMPLETE_RETRY_IF_FAILED_WITHIN`):
        // a key left in flight is recovered later, and the recovery's answer is not this
        // one. LeaseLost (a slow handler was recovered by another request) or the last
        // failure: the caller still gets what its handler answered; the claim settles by
        // recovery.
        let started = tokio::time::Instant::now();
        let failed = match self.store.complete(lease, stored.clone()).await {
            Err(StoreError::Storage(error)) => StoreError::Storage(error),
            completed => return self.settled("complete", completed),
        };
        self.complete_again(lease, stored, (failed, started.elapsed()), lost).await;
    }

    /// The retries of a completion that failed with `failed` after `took`. A failure that
    /// took longer than `COMPLETE_RETRY_IF_FAILED_WITHIN` (a silent store: each try waits
    /// out the store's own bound) is not tried again; a try runs to the store's own bound
    /// (a slow store answers it). After a failure, a lease found lost (by a retry, or by a
    /// renewal during a pause) may be the failed try's own doing, applied with its answer
    /// lost (the key is complete): traced, not counted as a loss, which it may not be.
    async fn complete_again(
        &self,
        lease: &Lease,
        stored: StoredResponse,
        (mut failed, mut took): (StoreError, Duration),
        lost: &std::sync::atomic::AtomicBool,
    ) {
        for pause in COMPLETE_RETRY_PAUSES {
            if took > COMPLETE_RETRY_IF_FAILED_WITHIN {
                break;
            }
            count_store_error(&self.counters, "complete", &failed);
            tokio::time::sleep(pause).await;
            // ORDERING: Acquire, as in `complete`.
            if lost.load(Ordering::Acquire) {
                idem_core::trace_event!(WARN, "a lease found lost after a failed completion");
                return;
            }
            let started = tokio::time::Instant::now();
            failed = match self.store.complete(lease, stored.clone()).await {
                Err(StoreError::Storage(error)) => StoreError::Storage(error),
                Err(StoreError::LeaseLost { .. }) => {
                    idem_core::trace_event!(WARN, "a completion tried again found it settled");
                    return;
                }
                completed => return self.settled("complete", completed),
            };
            took = started.elapsed();
        }
        self.settled("complete", Err(failed));
    }
}

/// A failed completion is tried again only if it failed within this long: a brief cut
/// fails at once, while a store that answers nothing makes each try wait out the store's
/// own bound, and is not waited out again (four such tries once held an answer 20 s on
/// Redis, 88 s on PostgreSQL's defaults).
pub const COMPLETE_RETRY_IF_FAILED_WITHIN: std::time::Duration = std::time::Duration::from_secs(1);

/// The pauses before a failed completion is tried again, one per retry: about 0.4 s in
/// all, which a client waits for its answer when the store is away. Longer than a store's
/// connection takes to come back after a brief cut; short next to a lease.
pub const COMPLETE_RETRY_PAUSES: [std::time::Duration; 3] = [
    std::time::Duration::from_millis(20),
    std::time::Duration::from_millis(80),
    std::time::Duration::from_millis(320),
];

impl<St, F> LayerState<St, F> {
    /// Counts a key left in flight because its handler's outcome is unknown.
    pub(crate) fn left_in_flight(&self, why: &'static str) {
        self.counters.count(Count::LeftInFlight);
        idem_core::trace_event!(WARN, why, "outcome unknown: the key is left in flight");
        #[cfg(not(feature = "tracing"))]
        let _ = why;
    }

    /// Counts and traces a lease found lost by `op`.
    pub(crate) fn lease_lost(&self, op: &'static str) {
        self.counters.count(Count::LeasesLost);
        idem_core::trace_event!(WARN, op, "the lease was lost: a later claim recovered the key");
        #[cfg(not(feature = "tracing"))]
        let _ = op;
    }

    /// Counts and traces a settle the store refused: the client got its response, so
    /// only the operator can learn that its key stays in flight.
    pub(crate) fn settled(&self, op: &'static str, result: Result<(), StoreError>) {
        match result {
            Ok(()) => {}
            Err(StoreError::LeaseLost { .. }) => self.lease_lost(op),
            Err(error) => {
                count_store_error(&self.counters, op, &error);
            }
        }
    }
}
