//! The payers both benches run: the processor on the memory store, and the seed's design
//! (check, charge and record under one global lock).

use std::collections::HashMap;
use std::sync::Mutex;

use idem_core::{IdempotencyKey, MemoryStore, ScopedKey, StoreConfig};
use idem_payments::{
    Gateway, GatewayKey, PaymentOutcome, PaymentRequest, Processor, SimulatedGateway,
};
use idem_testkit::bench::FixedKeys;

pub(crate) const POOL: usize = 1 << 16;
pub(crate) const HOT: usize = 1024;

pub(crate) trait Payer: Sync {
    fn fresh() -> Self;
    fn pay(&self, key: &IdempotencyKey, request: &PaymentRequest) -> PaymentOutcome;
}

pub(crate) type Idem = Processor<SimulatedGateway, MemoryStore<PaymentOutcome>>;

impl Payer for Idem {
    fn fresh() -> Self {
        let config = StoreConfig::builder().capacity(POOL * 2).build().expect("valid config");
        Processor::new("bench", SimulatedGateway::new(), MemoryStore::new(config)).expect("valid")
    }
    fn pay(&self, key: &IdempotencyKey, request: &PaymentRequest) -> PaymentOutcome {
        Processor::pay(self, key, request).expect("pay").outcome
    }
}

/// The seed: check, charge and record under one global lock.
pub(crate) struct Seed {
    gateway: SimulatedGateway,
    done: Mutex<HashMap<ScopedKey, PaymentOutcome, FixedKeys>>,
}

impl Payer for Seed {
    fn fresh() -> Self {
        Self { gateway: SimulatedGateway::new(), done: Mutex::new(HashMap::default()) }
    }
    fn pay(&self, key: &IdempotencyKey, request: &PaymentRequest) -> PaymentOutcome {
        let scope = idem_core::Scope::new(request.customer()).expect("valid scope");
        let scoped = ScopedKey::new(scope, key.clone());
        let mut done = self.done.lock().expect("not poisoned");
        if let Some(outcome) = done.get(&scoped) {
            return outcome.clone();
        }
        let charge = self.gateway.charge(&GatewayKey::derive(&scoped), request).expect("charge");
        let outcome = PaymentOutcome::Charged(charge);
        done.insert(scoped, outcome.clone());
        outcome
    }
}
