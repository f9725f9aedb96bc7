//! The second workload: `POST /pay` on every server, served by idem-payments'
//! [`Processor`] (claim the key before charging, replay the stored outcome, recover a
//! claim left in flight by asking the gateway) on a second shared memory store, through
//! a seam that fails calls before or after they apply. The operator's reconciler runs
//! [`Processor::reconcile`] on it once the faults stop.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use idem_core::{
    Claim, Fingerprint, KeyState, KeyStore, Lease, MemoryStore, PendingClaim, ScopedKey, StoreError,
};
use idem_payments::{PayError, PaymentOutcome, Processor, SimulatedGateway};

use crate::shared::WorldState;

/// The processor's merchant: every `/pay` key is scoped to it and the customer.
pub(crate) const PAY_MERCHANT: &str = "sim-shop";

/// The processor every server runs on the shared store.
pub(crate) type SimProcessor = Processor<Arc<SimulatedGateway>, SyncSeam>;

/// The processor of server `server`, or of the operator (`None`).
pub(crate) fn processor(
    store: Arc<MemoryStore<PaymentOutcome>>,
    shared: Arc<WorldState>,
    gateway: Arc<SimulatedGateway>,
    server: Option<usize>,
) -> SimProcessor {
    let name = server.map_or("operator".to_string(), |s| format!("server{s}"));
    let seam = SyncSeam { store, shared, server, name };
    Processor::new(PAY_MERCHANT, gateway, seam).expect("a valid merchant")
}

/// `router` with `POST /pay` served by `processor`.
pub(crate) fn route(router: Router, processor: Arc<SimProcessor>) -> Router {
    router.route(
        "/pay",
        post(
            move |headers: HeaderMap, body: String| async move { pay(&processor, &headers, &body) },
        ),
    )
}

/// One payment: the processor's answer as the client reads it.
fn pay(processor: &SimProcessor, headers: &HeaderMap, body: &str) -> Response {
    let Some(key) = idem_http::header::parse_key(headers).ok().flatten() else {
        return (StatusCode::BAD_REQUEST, "an Idempotency-Key header is required").into_response();
    };
    let Ok(request) = crate::checkout::app::parse_order(body) else {
        return (StatusCode::BAD_REQUEST, "customer, amount and currency").into_response();
    };
    match processor.pay(&key, &request) {
        Ok(payment) => match payment.outcome {
            PaymentOutcome::Charged(charge) => {
                let json = crate::checkout::app::charge_json(&charge, "paid");
                (StatusCode::CREATED, json).into_response()
            }
            PaymentOutcome::Declined(reason) => {
                (StatusCode::PAYMENT_REQUIRED, reason).into_response()
            }
        },
        Err(PayError::InProgress { .. } | PayError::Pending(_)) => {
            (StatusCode::CONFLICT, [("retry-after", "1")], "in progress").into_response()
        }
        Err(PayError::KeyReused(_)) => {
            (StatusCode::UNPROCESSABLE_ENTITY, "key reused").into_response()
        }
        Err(PayError::Invalid(_)) => (StatusCode::BAD_REQUEST, "invalid").into_response(),
        Err(other) => {
            (StatusCode::SERVICE_UNAVAILABLE, format!("not now: {}", kind(&other))).into_response()
        }
    }
}

/// A payment error's kind, for the trace (its text may name store internals).
fn kind(error: &PayError) -> &'static str {
    match error {
        PayError::Unavailable(_) => "gateway unavailable",
        PayError::GatewayMismatch { .. } => "gateway mismatch",
        PayError::Store(_) => "store",
        _ => "other",
    }
}

/// A server's way to the processor's store: each call fails before it reaches the store,
/// or applies and loses its answer, at the world's rates (a sync call cannot be delayed
/// in a simulation: the processor is a blocking library).
#[derive(Debug)]
pub(crate) struct SyncSeam {
    store: Arc<MemoryStore<PaymentOutcome>>,
    shared: Arc<WorldState>,
    server: Option<usize>,
    name: String,
}

impl SyncSeam {
    fn call<T>(
        &self,
        op: &str,
        call: impl FnOnce(&MemoryStore<PaymentOutcome>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let plan = &self.shared.plan;
        if self.server.is_some_and(|s| self.shared.is_cut(s)) {
            return Err(crate::seam::unreachable(op));
        }
        if self.shared.strikes(plan.store_fail_before) {
            self.shared.fault(&self.name, "store call failed before the store");
            return Err(crate::seam::unreachable(op));
        }
        let result = call(&self.store);
        if self.shared.strikes(plan.store_fail_after) {
            self.shared.fault(&self.name, "store call applied, answer lost");
            return Err(crate::seam::unreachable(op));
        }
        result
    }
}

impl KeyStore<PaymentOutcome> for SyncSeam {
    fn claim(
        &self,
        key: &ScopedKey,
        fingerprint: &Fingerprint,
    ) -> Result<Claim<PaymentOutcome>, StoreError> {
        let claim = self.call("claim", |store| KeyStore::claim(store, key, fingerprint))?;
        if let Some(lease) = claim.lease() {
            self.shared.granted(&self.name, lease);
        }
        Ok(claim)
    }

    fn complete(&self, lease: &Lease, result: PaymentOutcome) -> Result<(), StoreError> {
        self.call("complete", |store| KeyStore::complete(store, lease, result))
    }

    fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        self.call("release", |store| KeyStore::release(store, lease))
    }

    fn renew(&self, lease: &Lease) -> Result<Lease, StoreError> {
        self.call("renew", |store| KeyStore::renew(store, lease))
    }

    fn lease(&self) -> Duration {
        KeyStore::lease(&*self.store)
    }

    fn result_ttl(&self) -> Duration {
        KeyStore::result_ttl(&*self.store)
    }

    fn sweep(&self) -> Result<usize, StoreError> {
        self.call("sweep", KeyStore::sweep)
    }

    fn pending(&self, max: usize) -> Result<Vec<PendingClaim>, StoreError> {
        self.call("pending", |store| KeyStore::pending(store, max))
    }

    fn lookup(
        &self,
        key: &ScopedKey,
        fingerprint: &Fingerprint,
    ) -> Result<KeyState<PaymentOutcome>, StoreError> {
        self.call("lookup", |store| KeyStore::lookup(store, key, fingerprint))
    }
}
