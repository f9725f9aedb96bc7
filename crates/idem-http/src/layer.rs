//! The layer: read the key, fingerprint the request, claim before the handler runs, store
//! its response after, replay it to every repeat.

use std::fmt;
use std::future::Future;
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
    Claim, Fingerprint, IdempotencyKey, KeyStore, Lease, Scope, ScopedKey, StoreError,
};
use sha2::{Digest, Sha256};
use tower_layer::Layer;
use tower_service::Service;

use crate::config::{Config, StoreCalls};
use crate::header::{HeaderError, IDEMPOTENT_REPLAYED, parse_key};
use crate::problem::Problem;
use crate::stored::StoredResponse;

/// Put in a response's extensions by a handler that did nothing (it refused before any
/// side effect, say a dependency was down): the claim is released instead of stored, so
/// a retry with the same key runs the handler again. With axum, return
/// `(StatusCode::SERVICE_UNAVAILABLE, Extension(NothingHappened), "...")`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NothingHappened;

/// Put in a request's extensions when an earlier request with this key started the
/// handler and never finished (its client went away, or the server died), and its lease
/// ran out: the side effect may or may not have happened. The handler must check before
/// acting (ask the payment gateway by key, look the order up) instead of acting blindly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Recovering;

/// The most response headers stored with a key (the allow-list's values, in order).
pub const STORED_HEADERS_MAX: usize = 64;

/// A boxed error, as tower's.
type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The `Idempotency-Key` layer over a [`KeyStore`]; see the crate docs.
///
/// `scope` maps a request to the principal whose keys it uses (the authenticated
/// account or tenant): two principals' keys never meet, so one tenant can never be
/// answered with another tenant's stored response. It returns `None` for a request it
/// cannot attribute, which is answered 400.
pub struct IdempotencyLayer<St, F> {
    shared: Arc<Shared<St, F>>,
}

struct Shared<St, F> {
    store: St,
    scope: F,
    config: Config,
    /// Requests waiting for a first request to finish (`wait_for_first`).
    waiters: AtomicUsize,
}

impl<St, F> IdempotencyLayer<St, F>
where
    St: KeyStore<StoredResponse> + 'static,
    F: Fn(&Parts) -> Option<String> + Send + Sync + 'static,
{
    /// A layer with the default [`Config`] (POST and PATCH, optional key, 1 MiB limits,
    /// 409 at once for a duplicate in flight, store calls on the blocking pool).
    pub fn new(store: St, scope: F) -> Self {
        Self::with_config(store, scope, Config::default())
    }

    /// A layer with `config`.
    pub fn with_config(store: St, scope: F, config: Config) -> Self {
        let waiters = AtomicUsize::new(0);
        Self { shared: Arc::new(Shared { store, scope, config, waiters }) }
    }

    /// The store the layer claims keys in.
    pub fn store(&self) -> &St {
        &self.shared.store
    }
}

impl<St, F> Clone for IdempotencyLayer<St, F> {
    fn clone(&self) -> Self {
        Self { shared: self.shared.clone() }
    }
}

impl<St, F> fmt::Debug for IdempotencyLayer<St, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IdempotencyLayer").field("config", &self.shared.config).finish()
    }
}

impl<S, St, F> Layer<S> for IdempotencyLayer<St, F> {
    type Service = Idempotency<S, St, F>;

    fn layer(&self, inner: S) -> Self::Service {
        Idempotency { inner, shared: self.shared.clone() }
    }
}

/// The service [`IdempotencyLayer`] wraps around a handler.
pub struct Idempotency<S, St, F> {
    inner: S,
    shared: Arc<Shared<St, F>>,
}

impl<S: Clone, St, F> Clone for Idempotency<S, St, F> {
    fn clone(&self) -> Self {
        Self { inner: self.inner.clone(), shared: self.shared.clone() }
    }
}

impl<S, St, F> fmt::Debug for Idempotency<S, St, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Idempotency").field("config", &self.shared.config).finish_non_exhaustive()
    }
}

impl<S, St, F, B, RB> Service<Request<B>> for Idempotency<S, St, F>
where
    S: Service<Request<B>, Response = Response<RB>> + Clone + Send + 'static,
    S::Future: Send,
    St: KeyStore<StoredResponse> + 'static,
    F: Fn(&Parts) -> Option<String> + Send + Sync + 'static,
    B: Body<Data = Bytes> + From<Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
    RB: Body<Data = Bytes> + From<Bytes> + Send + 'static,
    RB::Error: Into<BoxError>,
{
    type Response = Response<RB>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response<RB>, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        // The service that was polled ready serves this request; a clone waits for the next.
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        Box::pin(handle(self.shared.clone(), inner, request))
    }
}

/// What the claim decided.
enum Decision {
    /// Run the handler under this lease; `recovering` if an earlier run never finished.
    Run(Lease, bool),
    Replay(StoredResponse),
    Answer(Problem),
}

async fn handle<S, St, F, B, RB>(
    shared: Arc<Shared<St, F>>,
    mut inner: S,
    request: Request<B>,
) -> Result<Response<RB>, S::Error>
where
    S: Service<Request<B>, Response = Response<RB>>,
    St: KeyStore<StoredResponse> + 'static,
    F: Fn(&Parts) -> Option<String> + Send + Sync + 'static,
    B: Body<Data = Bytes> + From<Bytes>,
    B::Error: Into<BoxError>,
    RB: Body<Data = Bytes> + From<Bytes>,
    RB::Error: Into<BoxError>,
{
    let config = &shared.config;
    if !config.methods.contains(request.method()) {
        return inner.call(request).await;
    }
    let key = match parse_key(request.headers()) {
        Ok(Some(key)) => key,
        Ok(None) if !config.require_key => return inner.call(request).await,
        Ok(None) => return Ok(missing_key().response()),
        Err(error) => return Ok(malformed_key(&error).response()),
    };
    let (mut parts, body) = request.into_parts();
    let scoped = match scoped_key(&shared, &parts, key) {
        Ok(scoped) => scoped,
        Err(problem) => return Ok(problem.response()),
    };
    let (bytes, body_sha256) = match read_body(&parts, body, config.body_bytes_max).await {
        Ok(read) => read,
        Err(problem) => return Ok(problem.response()),
    };
    let fingerprint = fingerprint(&parts, config, &body_sha256);
    let (lease, recovering) = match shared.decide(scoped, fingerprint).await {
        Decision::Run(lease, recovering) => (lease, recovering),
        Decision::Replay(stored) => return Ok(replay(stored)),
        Decision::Answer(problem) => {
            idem_core::trace_event!(INFO, status = problem.status.as_u16(), problem.slug);
            return Ok(problem.response());
        }
    };
    if recovering {
        parts.extensions.insert(Recovering);
    }
    // From here the claim is ours. If this future is dropped (the client went away) or
    // the handler panics, nothing settles it: it stays in flight until its lease runs
    // out, and the next request with the key gets `Recovering`.
    let response = inner.call(Request::from_parts(parts, B::from(bytes))).await?;
    Ok(shared.finish(lease, response).await)
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
    shared: &Shared<St, F>,
    parts: &Parts,
    key: IdempotencyKey,
) -> Result<ScopedKey, Problem>
where
    F: Fn(&Parts) -> Option<String>,
{
    let Some(principal) = (shared.scope)(parts) else {
        let detail = "the server cannot tell whose key this is; authenticate first";
        return Err(Problem::new(
            StatusCode::BAD_REQUEST,
            "no-scope",
            "No scope for the key",
            detail,
        ));
    };
    match Scope::new(&principal) {
        Ok(scope) => Ok(ScopedKey::new(scope, key)),
        // The scope comes from the server, not the client: a server bug, said as such.
        Err(error) => Err(Problem::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "bad-scope",
            "Invalid scope",
            format!("the server's scope function returned an invalid scope: {error}"),
        )),
    }
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
            let detail = format!("reading the body failed: {}", error.into());
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

/// The request's fingerprint: method, path and query, the configured headers, the body.
fn fingerprint(parts: &Parts, config: &Config, body_sha256: &[u8; 32]) -> Fingerprint {
    let target = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let mut builder = Fingerprint::builder("idem-http/v1")
        .str("method", parts.method.as_str())
        .str("target", target);
    for name in &config.fingerprint_headers {
        for value in parts.headers.get_all(name) {
            builder = builder.bytes(name.as_str(), value.as_bytes());
        }
    }
    builder.bytes("body-sha256", body_sha256).finish()
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
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

fn decision(answer: Result<Claim<StoredResponse>, StoreError>) -> Decision {
    let problem = match answer {
        Ok(Claim::Acquired(lease)) => return Decision::Run(lease, false),
        Ok(Claim::Recover(lease)) => return Decision::Run(lease, true),
        Ok(Claim::Replay(stored)) => return Decision::Replay(stored),
        Ok(Claim::InFlight { retry_after }) => Problem::new(
            StatusCode::CONFLICT,
            "key-in-flight",
            "Request in progress",
            "a request with this Idempotency-Key is still being processed; retry after \
             Retry-After seconds with the same key",
        )
        .retry_after(retry_after),
        Err(StoreError::KeyReused { .. }) => Problem::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "key-reused",
            "Idempotency-Key reused",
            "this key was used for a different request (method, path, headers or body \
             differ); its stored response is unchanged. Use a new key for a new request",
        ),
        Err(StoreError::ScopeQuota { in_flight_max, .. }) => Problem::new(
            StatusCode::TOO_MANY_REQUESTS,
            "scope-quota",
            "Too many requests in flight",
            format!("this principal has {in_flight_max} requests in flight already"),
        )
        .retry_after(Duration::from_secs(1)),
        Err(error) => Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "store-unavailable",
            "Idempotency store unavailable",
            format!("nothing was run: {error}"),
        )
        .retry_after(Duration::from_secs(1)),
    };
    Decision::Answer(problem)
}

/// What is kept of a response: its status, its allow-listed headers, its body (or, past
/// the limit, a problem body that says it was too large to keep).
fn stored_response(parts: &http::response::Parts, body: &Bytes, config: &Config) -> StoredResponse {
    let mut headers: Vec<_> = config
        .replay_headers
        .iter()
        .flat_map(|name| parts.headers.get_all(name).iter().map(|v| (name.clone(), v.clone())))
        .take(STORED_HEADERS_MAX)
        .collect();
    if body.len() <= config.response_bytes_max {
        return StoredResponse { status: parts.status, headers, body: body.clone() };
    }
    let detail = format!(
        "the original response ({} bytes) was over the {}-byte limit for stored responses: \
         it reached the first request only",
        body.len(),
        config.response_bytes_max
    );
    let problem = Problem::new(parts.status, "response-too-large", "Response not kept", detail);
    headers.retain(|(name, _)| name != header::CONTENT_TYPE);
    headers.push((header::CONTENT_TYPE, HeaderValue::from_static("application/problem+json")));
    StoredResponse { status: parts.status, headers, body: problem.body() }
}

/// The stored response, marked as a replay.
fn replay<RB: From<Bytes>>(stored: StoredResponse) -> Response<RB> {
    let mut response = Response::new(RB::from(stored.body));
    *response.status_mut() = stored.status;
    let headers = response.headers_mut();
    for (name, value) in stored.headers {
        headers.append(name, value);
    }
    headers.insert(IDEMPOTENT_REPLAYED, HeaderValue::from_static("true"));
    response
}

/// The layer's steps that use its store.
impl<St, F> Shared<St, F>
where
    St: KeyStore<StoredResponse> + 'static,
    F: Send + Sync + 'static,
{
    /// Claims the key; with `wait_for_first`, waits (bounded) for a request in flight.
    async fn decide(self: &Arc<Self>, key: ScopedKey, fingerprint: Fingerprint) -> Decision {
        let first = self.claim(&key, fingerprint).await;
        match (&first, self.config.wait) {
            (Ok(Claim::InFlight { .. }), Some(wait)) => {
                self.wait_for_first(key, fingerprint, wait, first).await
            }
            _ => decision(first),
        }
    }

    async fn claim(
        self: &Arc<Self>,
        key: &ScopedKey,
        fingerprint: Fingerprint,
    ) -> Result<Claim<StoredResponse>, StoreError> {
        let key = key.clone();
        self.store_call(move |store| store.claim(&key, &fingerprint)).await
    }

    /// After a first claim answered `in_flight`, naps (1 ms doubling to 50 ms) and claims
    /// again until the first request finishes or `wait` passes. At most `waiters_max`
    /// requests wait at once; one more is answered with `in_flight` (409) at once.
    async fn wait_for_first(
        self: &Arc<Self>,
        key: ScopedKey,
        fingerprint: Fingerprint,
        wait: Duration,
        in_flight: Result<Claim<StoredResponse>, StoreError>,
    ) -> Decision {
        let Some(_waiter) = Waiter::enter(&self.waiters, self.config.waiters_max) else {
            return decision(in_flight);
        };
        let deadline = tokio::time::Instant::now() + wait;
        let mut pause = Duration::from_millis(1);
        let mut answer = in_flight;
        loop {
            // The lease the holder has left: never nap past it (it may be recovered then).
            let Ok(Claim::InFlight { retry_after }) = &answer else { return decision(answer) };
            let now = tokio::time::Instant::now();
            if now >= deadline {
                return decision(answer);
            }
            let nap = pause.min(*retry_after).min(deadline - now).max(Duration::from_millis(1));
            tokio::time::sleep(nap).await;
            pause = (pause * 2).min(Duration::from_millis(50));
            answer = self.claim(&key, fingerprint).await;
        }
    }

    /// Calls the store, on the blocking pool unless configured inline.
    async fn store_call<T>(self: &Arc<Self>, op: impl FnOnce(&St) -> T + Send + 'static) -> T
    where
        T: Send + 'static,
    {
        match self.config.store_calls {
            StoreCalls::Inline => op(&self.store),
            StoreCalls::SpawnBlocking => {
                let shared = Arc::clone(self);
                match tokio::task::spawn_blocking(move || op(&shared.store)).await {
                    Ok(value) => value,
                    Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
                    Err(_) => panic!("the tokio runtime shut down during a store call"),
                }
            }
        }
    }

    /// Settles the claim with the handler's response, and returns the response.
    async fn finish<RB>(self: &Arc<Self>, lease: Lease, response: Response<RB>) -> Response<RB>
    where
        RB: Body<Data = Bytes> + From<Bytes>,
        RB::Error: Into<BoxError>,
    {
        let (mut parts, body) = response.into_parts();
        if parts.extensions.remove::<NothingHappened>().is_some() {
            // The handler says nothing happened: give the key back, so a retry runs again.
            // If the release fails, the claim stays in flight and recovers after its lease.
            let _ = self.store_call(move |store| store.release(&lease)).await;
            return Response::from_parts(parts, body);
        }
        let bytes = match body.collect().await {
            Ok(collected) => collected.to_bytes(),
            // The response failed half-way: what the handler did is unknown, so the claim
            // stays in flight and the next request recovers.
            Err(error) => {
                let detail = format!("the handler's response failed: {}", error.into());
                let problem = Problem::new(
                    StatusCode::BAD_GATEWAY,
                    "response-failed",
                    "Response failed",
                    detail,
                );
                return problem.response();
            }
        };
        let stored = stored_response(&parts, &bytes, &self.config);
        // LeaseLost (a slow handler was recovered by another request) or a store failure:
        // the caller still gets what its handler answered; the claim settles by recovery.
        let _ = self.store_call(move |store| store.complete(&lease, stored)).await;
        Response::from_parts(parts, RB::from(bytes))
    }
}
