//! idem-payments' integration tests: one binary, one module per concern.

mod behaviour;
mod concurrency;
mod conversions;
mod crash;
mod model;
mod renewal;
mod tenants;
#[cfg(feature = "tracing")]
mod tracing;

use std::sync::Arc;
use std::time::Duration;

use idem_core::{IdempotencyKey, ManualClock, MemoryStore, StoreConfig, Timestamp};
use idem_payments::{GatewayKey, PaymentRequest, Processor, SimulatedGateway};

pub(crate) const LEASE: Duration = Duration::from_secs(30);

pub(crate) type TestProcessor =
    Processor<SimulatedGateway, MemoryStore<idem_payments::PaymentOutcome>>;

/// A processor on a manual clock, with a fault-free gateway.
pub(crate) fn processor() -> (TestProcessor, Arc<ManualClock>) {
    processor_with(SimulatedGateway::new())
}

pub(crate) fn processor_with(gateway: SimulatedGateway) -> (TestProcessor, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(Timestamp::from_millis(1_000_000)));
    let config = StoreConfig::builder().lease(LEASE).build().expect("valid config");
    let store = MemoryStore::with_clock(config, clock.clone());
    (Processor::new("shop", gateway, store).expect("valid merchant"), clock)
}

pub(crate) fn key(text: &str) -> IdempotencyKey {
    IdempotencyKey::new(text).expect("valid key")
}

pub(crate) fn request(amount: i64) -> PaymentRequest {
    PaymentRequest::new("cus_1", amount, "EUR").expect("valid request")
}

/// Real charges the gateway made for `key` with `request`'s customer.
pub(crate) fn charges(p: &TestProcessor, k: &IdempotencyKey, r: &PaymentRequest) -> u32 {
    let scoped = p.scoped_key(k, r).expect("valid scope");
    p.gateway().charges(&GatewayKey::derive(&scoped))
}
