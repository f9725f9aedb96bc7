//! [`Operator`]: what an operator does by hand to the keys a layer claims: look one up
//! (its state and when that state ends), and forget one a bug poisoned, so that its next
//! request runs again. The application mounts it where it wants, behind its own
//! authentication ([`Operator::serve`]), or calls it from its own tools.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use idem_core::{AsyncKeyAdmin, Forgotten, KeyRecord, RecordState, ScopedKey, ScopedKeyError};
use serde_json::{Value, json};

use crate::layer::LayerState;
use crate::outcomes::Count;
use crate::problem::Problem;

/// The longest `why` a forget takes, in bytes: a sentence or a ticket reference for the
/// log, not a document.
pub const FORGET_REASON_BYTES_MAX: usize = 512;

/// The longest query string [`Operator::serve`] reads, in bytes: a scope, a key (each at
/// most [`KEY_LEN_MAX`](idem_core::KEY_LEN_MAX)) and a reason, percent-encoded.
pub const OPERATOR_QUERY_BYTES_MAX: usize = 4096;

/// An operator's handle on the keys of one [`IdempotencyLayer`](crate::IdempotencyLayer)
/// (from [`IdempotencyLayer::operator`](crate::IdempotencyLayer::operator)): the same
/// store, and forgets counted in the layer's [`LayerStats`](crate::LayerStats).
///
/// Forgetting a finished response makes the next request with its key run the handler
/// again: for a response a bug stored (a 500 kept for a day), that is the point; for a
/// response after a real side effect, it repeats the side effect. A key whose first
/// request still runs is never forgotten ([`Forgotten::HolderLive`]).
pub struct Operator<St, F> {
    state: Arc<LayerState<St, F>>,
}

impl<St, F> Clone for Operator<St, F> {
    fn clone(&self) -> Self {
        Self { state: Arc::clone(&self.state) }
    }
}

impl<St, F> fmt::Debug for Operator<St, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Operator").finish_non_exhaustive()
    }
}

/// Why an operator's call was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OperatorError {
    /// The scope or the key is not a valid one (empty, too long, a character outside the
    /// allowed set): no store holds it.
    #[error("invalid scope or key: {0}")]
    Key(#[from] ScopedKeyError),
    /// The reason for a forget is empty or longer than [`FORGET_REASON_BYTES_MAX`].
    #[error(
        "a forget needs a reason: 1 to {FORGET_REASON_BYTES_MAX} bytes, not only spaces; got \
         {0} bytes"
    )]
    Reason(usize),
    /// The store failed; for a forget, whether the record is gone is unknown, and asking
    /// again is safe.
    #[error("the store failed: {0}")]
    Store(#[from] idem_core::StoreError),
}

impl<St, F> Operator<St, F>
where
    St: AsyncKeyAdmin + 'static,
{
    pub(crate) fn new(state: Arc<LayerState<St, F>>) -> Self {
        Self { state }
    }

    /// The record of `key` in `scope` (the scope the layer's scope function gives that
    /// principal), whatever request made it; `None` if no live record holds it.
    ///
    /// # Errors
    ///
    /// [`OperatorError::Key`] for an invalid scope or key; [`OperatorError::Store`].
    pub async fn inspect(
        &self,
        scope: &str,
        key: &str,
    ) -> Result<Option<KeyRecord>, OperatorError> {
        let key = ScopedKey::parse(scope, key)?;
        Ok(self.state.store.inspect(&key).await?)
    }

    /// Forgets `key` in `scope` if it is finished or pending: its next request runs the
    /// handler again. `who` (the operator, as the application authenticated them) and
    /// `why` are traced with the outcome; a removal is counted
    /// ([`LayerStats::forgotten`](crate::LayerStats::forgotten)).
    ///
    /// # Errors
    ///
    /// [`OperatorError::Key`]; [`OperatorError::Reason`] for an empty or overlong `why`
    /// (nothing is done); [`OperatorError::Store`].
    pub async fn forget(
        &self,
        scope: &str,
        key: &str,
        who: &str,
        why: &str,
    ) -> Result<Forgotten, OperatorError> {
        self.forget_scoped(&ScopedKey::parse(scope, key)?, who, why).await
    }

    /// [`forget`](Self::forget) of a key already validated.
    async fn forget_scoped(
        &self,
        key: &ScopedKey,
        who: &str,
        why: &str,
    ) -> Result<Forgotten, OperatorError> {
        if why.trim().is_empty() || why.len() > FORGET_REASON_BYTES_MAX {
            return Err(OperatorError::Reason(why.len()));
        }
        let forgotten = self.state.store.forget(key, who, why).await?;
        if let Forgotten::Removed(_) = forgotten {
            self.state.counters.count(Count::Forgotten);
        }
        Ok(forgotten)
    }

    /// Answers an operator's HTTP request, for the application to mount on a route of
    /// its own behind its own authentication; `who` is the operator it authenticated.
    /// The query names the record: `?scope=S&key=K` (percent-encoded).
    ///
    /// - `GET`: 200 with the record as JSON (`state`, `fingerprint`, and the deadline
    ///   that ends the state, as an HTTP date and in milliseconds), 404 if absent.
    /// - `DELETE` with `&reason=R`: forgets it; 200 with what was removed, 404 if absent,
    ///   409 with `Retry-After` if the first request still runs.
    /// - Anything else: 405. A bad query: 400 naming the parameter. A store failure: 503,
    ///   without the store's own words.
    pub async fn serve<B>(&self, request: Request<B>, who: &str) -> Response<Full<Bytes>> {
        match self.answer(request.method(), request.uri().query().unwrap_or(""), who).await {
            Ok((status, body)) => json_response(status, &body),
            Err(problem) => {
                let mut response: Response<Full<Bytes>> = problem.response();
                if problem.status == StatusCode::METHOD_NOT_ALLOWED {
                    let allow = HeaderValue::from_static("GET, DELETE");
                    response.headers_mut().insert(header::ALLOW, allow);
                }
                response
            }
        }
    }

    async fn answer(
        &self,
        method: &Method,
        query: &str,
        who: &str,
    ) -> Result<(StatusCode, Value), Problem> {
        if *method != Method::GET && *method != Method::DELETE {
            let detail = "use GET to look a key up, DELETE to forget it";
            return Err(Problem::new(StatusCode::METHOD_NOT_ALLOWED, "operator", "Method", detail));
        }
        let query = Query::parse(query)?;
        let (scope, key) = (query.get("scope")?, query.get("key")?);
        if *method == Method::GET {
            let record = self.inspect(scope, key).await.map_err(refusal)?;
            let Some(record) = record else { return Err(absent()) };
            return Ok((
                StatusCode::OK,
                json!({ "scope": scope, "key": key, "record": shown(&record) }),
            ));
        }
        // The key named first, the reason then, as `forget` checks them.
        let scoped = ScopedKey::parse(scope, key).map_err(|e| refusal(e.into()))?;
        let why = query.get("reason")?;
        match self.forget_scoped(&scoped, who, why).await.map_err(refusal)? {
            Forgotten::Absent => Err(absent()),
            Forgotten::Removed(record) => Ok((
                StatusCode::OK,
                json!({ "scope": scope, "key": key, "forgotten": shown(&record) }),
            )),
            Forgotten::HolderLive { retry_after, .. } => {
                let detail = "the first request with this key still runs; forget it once its \
                              lease has run out";
                Err(Problem::new(StatusCode::CONFLICT, "operator-holder-live", "In flight", detail)
                    .retry_after(retry_after))
            }
        }
    }
}

fn absent() -> Problem {
    let detail = "no live record holds this key: never used, released, or its response expired";
    Problem::new(StatusCode::NOT_FOUND, "operator-absent", "No record", detail)
}

/// A refused call as a problem: the caller's mistakes named, a store failure not described.
fn refusal(error: OperatorError) -> Problem {
    match error {
        OperatorError::Store(_) => Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "operator-store",
            "Store unavailable",
            "the store failed; whether a forget took effect is unknown: ask again",
        ),
        other => {
            Problem::new(StatusCode::BAD_REQUEST, "operator-query", "Bad query", other.to_string())
        }
    }
}

fn json_response(status: StatusCode, body: &Value) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// A record as JSON: its state, its fingerprint in hex, and the deadline that ends the
/// state, as an HTTP date and in milliseconds since the epoch.
fn shown(record: &KeyRecord) -> Value {
    let (state, field, at) = match record.state {
        RecordState::InFlight { lease_expires_at } => {
            ("in_flight", "lease_expires_at", lease_expires_at)
        }
        RecordState::Pending { lease_expired_at } => {
            ("pending", "lease_expired_at", lease_expired_at)
        }
        RecordState::Finished { expires_at } => ("finished", "expires_at", expires_at),
    };
    let mut shown = json!({ "state": state, "fingerprint": record.fingerprint.to_hex() });
    // Past the year 9999 (a lease or result that never runs out) no HTTP date names it:
    // `null`, beside the milliseconds.
    let date = UNIX_EPOCH.checked_add(Duration::from_millis(at.as_millis()));
    shown[field] = date.and_then(crate::header::http_date).map_or(Value::Null, Value::String);
    shown[format!("{field}_ms")] = Value::from(at.as_millis());
    shown
}

/// A query string's parameters, percent-decoded.
struct Query(Vec<(String, String)>);

impl Query {
    fn parse(query: &str) -> Result<Self, Problem> {
        if query.len() > OPERATOR_QUERY_BYTES_MAX {
            let detail =
                format!("the query is {} bytes; at most {OPERATOR_QUERY_BYTES_MAX}", query.len());
            return Err(bad_query(detail));
        }
        let mut pairs = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            pairs.push((decode(name)?, decode(value)?));
        }
        Ok(Self(pairs))
    }

    /// The one value of `name`; a missing or repeated parameter is refused by name.
    fn get(&self, name: &str) -> Result<&str, Problem> {
        let mut values = self.0.iter().filter(|(n, _)| n == name).map(|(_, v)| v.as_str());
        match (values.next(), values.next()) {
            (Some(value), None) => Ok(value),
            (None, _) => Err(bad_query(format!("the query needs the parameter {name:?}"))),
            (Some(_), Some(_)) => Err(bad_query(format!("the parameter {name:?} is given twice"))),
        }
    }
}

fn bad_query(detail: String) -> Problem {
    Problem::new(StatusCode::BAD_REQUEST, "operator-query", "Bad query", detail)
}

/// Percent-decodes `text` (`+` is a space), refusing a bad escape or bytes that are not
/// UTF-8.
fn decode(text: &str) -> Result<String, Problem> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = bytes.get(i + 1..i + 3).filter(|h| h.iter().all(u8::is_ascii_hexdigit));
                let hex = hex.and_then(|h| std::str::from_utf8(h).ok());
                let byte = hex.and_then(|h| u8::from_str_radix(h, 16).ok());
                let Some(byte) = byte else {
                    return Err(bad_query(format!("a bad percent escape at byte {i} of {text:?}")));
                };
                out.push(byte);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            other => {
                out.push(other);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| bad_query(format!("{text:?} does not decode to UTF-8")))
}
