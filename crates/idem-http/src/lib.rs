//! The `Idempotency-Key` header for async HTTP services: a tower layer over any idem
//! [`AsyncKeyStore`](idem_core::AsyncKeyStore) (memory, SQLite, PostgreSQL), or a sync
//! [`KeyStore`](idem_core::KeyStore) behind [`Blocking`].
//!
//! A client sends `POST /checkout`; the network drops the response; the client (or its
//! library, or the customer clicking again) sends it again. Without a key the server
//! cannot tell a retry from a new order and charges twice. With the IETF draft's
//! `Idempotency-Key` header (Stripe's long before), the client names the intended
//! operation once and the server answers every repeat with the first answer.
//!
//! # Guarantee
//!
//! For one principal (the `scope` function's answer) and one key, the handler runs at
//! most once per request fingerprint (method, path and query, chosen headers, body), and
//! every repeat gets the stored status, headers and body with `Idempotent-Replayed:
//! true`. Concurrent duplicates are answered 409 (or wait and replay); the same key for a
//! different request is answered 422 and changes nothing. A run that never finished (the
//! server died, the handler panicked) is not repeated blindly: after its lease the next
//! request runs with [`Recovering`], which tells the handler to check before acting.
//!
//! A claimed request's handler runs on a task of its own: a client that gives up does not
//! cancel it half-way; it runs to its end (for at most
//! [`ConfigBuilder::orphan_time_max`] after the client left), its answer is stored, and
//! the retry replays it. While it runs, its lease is renewed every quarter of the store's
//! lease (on a task of its own, so a handler that blocks its thread does not starve it on
//! a multi-threaded runtime; on a current-thread runtime nothing runs while it blocks), so
//! a handler slower than the lease is never run twice by duplicates; a renewal
//! that finds the lease lost (the key was recovered meanwhile) keeps its result from
//! being stored as if it still held the key. A run whose lease the store no longer vouches
//! for is dropped where it waits (503 `run-stopped`, the key left for a recovery): work the
//! handler handed to another thread (`spawn_blocking`) goes on unless the handler tells it
//! to stop, as the checkout example's payment is told (`docs/http.md`).
//!
//! # Examples
//!
//! ```
//! use std::sync::Arc;
//! use axum::{Router, routing::post};
//! use idem_core::{MemoryStore, StoreConfig};
//! use idem_http::{Config, IdempotencyLayer, StoredResponse};
//! use tower::ServiceExt;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let store = Arc::new(MemoryStore::<StoredResponse>::new(StoreConfig::default()));
//! let config = Config::builder().require_key(true).build()?;
//! // Keys are scoped by the caller's principal: here, a header the auth layer set.
//! let tenant = |parts: &http::request::Parts| {
//!     parts.headers.get("x-tenant")?.to_str().ok().map(str::to_string)
//! };
//! let app = Router::new()
//!     .route("/checkout", post(|| async { "charged once" }))
//!     .layer(IdempotencyLayer::with_config(store, tenant, config)?);
//!
//! let request = || {
//!     http::Request::post("/checkout")
//!         .header("idempotency-key", "\"order-42\"")
//!         .header("x-tenant", "shop-1")
//!         .body(axum::body::Body::empty())
//! };
//! let first = app.clone().oneshot(request()?).await?;
//! let retry = app.clone().oneshot(request()?).await?;
//! assert!(first.headers().get("idempotent-replayed").is_none());
//! assert_eq!(retry.headers()["idempotent-replayed"], "true");
//! # Ok(())
//! # }
//! ```
//!
//! # The answers the layer gives on its own
//!
//! All as RFC 9457 `application/problem+json`, before the handler runs:
//!
//! | status | when |
//! |---|---|
//! | 400 | the header is malformed, repeated, or missing where [`ConfigBuilder::require_key`] |
//! | 409 + `Retry-After` | a request with this key is in flight |
//! | 413 | the body is over [`ConfigBuilder::body_bytes_max`] (nothing claimed) |
//! | 422 | the key was used for a different request |
//! | 429, 503 | the principal's in-flight quota; the store is full or down |
//!
//! A handler that did nothing (it refused before any side effect) marks its response with
//! [`NothingHappened`], and the key is released instead of stored. docs/http.md has the
//! longer explanation, a diagram and a comparison with Stripe, the IETF draft and other
//! Rust middlewares.
//!
//! An operator looks a key up and forgets one a bug poisoned through
//! [`IdempotencyLayer::operator`]: an [`Operator`] on the layer's store, which the
//! application mounts behind its own admin route ([`Operator::serve`]).
//!
//! # Features
//!
//! `tracing` (off by default): the store's `claim` and `settle` events, and an event for
//! each answer the layer gives on its own.

mod blocking;
mod body;
mod config;
pub mod header;
mod layer;
mod meaning;
mod operator;
mod outcomes;
mod problem;
mod run;
mod stored;

pub use blocking::Blocking;
pub use body::ResponseBody;
pub use config::{Config, ConfigBuilder, ConfigError, EffectFree};
pub use header::HeaderError;
pub use layer::{
    COMPLETE_RETRY_IF_FAILED_WITHIN, COMPLETE_RETRY_PAUSES, Claimed, Idempotency, IdempotencyLayer,
    LayerStats, NothingHappened, OutcomeUnknown, Recovering, StoredByHandler,
};
pub use meaning::{JsonMeaning, Meaning, MeaningError};
pub use operator::{FORGET_REASON_BYTES_MAX, OPERATOR_QUERY_BYTES_MAX, Operator, OperatorError};
pub use run::Runs;
pub use stored::{
    NOT_KEPT_BYTES_MAX, STORED_ENVELOPE_BYTES, STORED_HEADER_BYTES_MAX, STORED_HEADERS_MAX,
    StoredResponse,
};
