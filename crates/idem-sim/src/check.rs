//! The checks after every world: the invariant (at most one charge per intent, every
//! answer naming the same charge), liveness (every intent answered once the faults
//! stopped, no claim left in flight), and the store's own invariants (tokens only grow).

use std::sync::Arc;

use idem_core::{Claim, Fingerprint, IdempotencyKey, KeyStore, MemoryStore, ScopedKey};
use idem_http::StoredResponse;
use idem_payments::{Gateway, GatewayKey, Lookup, PaymentRequest, SimulatedGateway};

use crate::checkout::app::MERCHANT;
use crate::hosts::Intent;
use crate::payments::{self, SimProcessor};
use crate::shared::{Told, WorldState, lock};
use crate::world::Stores;

/// The most in-flight claims listed in a violation.
const PENDING_LISTED_MAX: usize = 16;

/// What went wrong in a world that has drained: one line per violation.
pub(crate) fn world(
    shared: &Arc<WorldState>,
    (store, paid): &Stores,
    gateway: &Arc<SimulatedGateway>,
    intents: &[Vec<Intent>],
) -> Vec<String> {
    let mut violations = Vec::new();
    // The processor's keys are scoped as it scopes them: its own instance says how.
    let processor = payments::processor(Arc::clone(paid), shared.clone(), gateway.clone(), None);
    for intent in intents.iter().flatten() {
        intent_answers(shared, gateway, &processor, intent, &mut violations);
    }
    let listed = [
        ("layer", KeyStore::pending(&**store, PENDING_LISTED_MAX)),
        ("processor", KeyStore::pending(&**paid, PENDING_LISTED_MAX)),
    ];
    for (whose, pending) in listed {
        match pending {
            Ok(pending) if pending.is_empty() => {}
            Ok(pending) => violations.push(format!(
                "the {whose}'s claims still in flight after the world drained (past lease \
                 and reconcile): {:?}",
                pending.iter().map(|p| p.key.to_string()).collect::<Vec<_>>()
            )),
            Err(error) => violations.push(format!("the {whose}'s store failed a listing: {error}")),
        }
    }
    let invariants = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        store.assert_invariants();
        paid.assert_invariants();
    }));
    if let Err(panic) = invariants {
        let why = panic.downcast_ref::<String>().cloned().unwrap_or_default();
        violations.push(format!("the store's invariants fail: {why}"));
    }
    let keys = intents.iter().flatten().filter(|i| i.path != "/pay").count();
    violations.extend(quota_given_back(store, keys));
    let recovered = lock(&shared.recovered);
    if shared.plan.steady && !recovered.is_empty() {
        violations.push(format!(
            "a steady world (no server, store or gateway fault) recovered {recovered:?}: a \
             claim or a run was dropped with its client, or a run stopped for want of a \
             renewal, and left its key held for a lease"
        ));
    }
    drop(recovered);
    for breach in lock(&shared.breaches).iter() {
        violations.push(format!("the store contract broken: {breach}"));
    }
    for (key, tokens) in lock(&shared.tokens).iter() {
        if tokens.windows(2).any(|pair| pair[1] <= pair[0]) {
            violations.push(format!("fencing tokens of {key} did not grow: {tokens:?}"));
        }
    }
    violations
}

/// Whether the layer's store gave back every place of its scope quota once the world
/// drained: as many fresh keys as the quota holds must each be claimed (then released).
/// A completion or a release that kept its place refuses one.
fn quota_given_back(store: &MemoryStore<StoredResponse>, keys: usize) -> Option<String> {
    let fingerprint = Fingerprint::builder("quota-probe").finish();
    let mut leases = Vec::new();
    let mut refused = None;
    for probe in 0..keys.max(1) {
        let Ok(key) = ScopedKey::parse(MERCHANT, &format!("quota-probe-{probe}")) else { break };
        match KeyStore::claim(store, &key, &fingerprint) {
            Ok(Claim::Acquired(lease)) => leases.push(lease),
            other => {
                let why = format!("{other:?}").chars().take(120).collect::<String>();
                refused = Some(format!(
                    "the layer's store refused fresh claim {} of its quota of {}, once the \
                     world drained (places kept): {why}",
                    probe + 1,
                    keys.max(1)
                ));
                break;
            }
        }
    }
    for lease in &leases {
        if let Err(error) = KeyStore::release(store, lease) {
            let why =
                format!("the quota probe's claim {} was not given back: {error}", lease.key());
            return Some(refused.map_or(why.clone(), |r| format!("{r}; {why}")));
        }
    }
    refused
}

/// The key an intent's payment is claimed under: the checkout's (its merchant), or the
/// processor's (its merchant and the customer).
fn scoped_key(processor: &SimProcessor, intent: &Intent) -> Option<ScopedKey> {
    if intent.path != "/pay" {
        return ScopedKey::parse(MERCHANT, &intent.key).ok();
    }
    let key = IdempotencyKey::new(&intent.key).ok()?;
    let customer = format!("cus_{}", intent.index);
    let request = PaymentRequest::new(&customer, i64::try_from(intent.amount).ok()?, "EUR").ok()?;
    processor.scoped_key(&key, &request).ok()
}

/// The checks of one intent: its charges, and what its client was told.
fn intent_answers(
    shared: &WorldState,
    gateway: &SimulatedGateway,
    processor: &SimProcessor,
    intent: &Intent,
    violations: &mut Vec<String>,
) {
    let told = lock(&shared.told).get(&intent.index).cloned().unwrap_or_default();
    let Some(scoped) = scoped_key(processor, intent) else {
        violations.push(format!("intent {}: its key {:?} is invalid", intent.index, intent.key));
        return;
    };
    let key = GatewayKey::derive(&scoped);
    let charges = gateway.charges(&key);
    let name = format!("intent {} ({})", intent.index, intent.key);
    if charges > 1 {
        violations.push(format!("{name}: charged {charges} times"));
    }
    let charged: Vec<(&String, &String)> = told
        .iter()
        .filter_map(|t| match t {
            Told::Charged { charge, amount } => Some((charge, amount)),
            _ => None,
        })
        .collect();
    let declined = told.contains(&Told::Declined);
    wrong_answers(&name, &told, violations);
    let stood_in = told.contains(&Told::StoodIn);
    if charged.is_empty() && !declined && !stood_in {
        violations.push(format!("liveness: {name} was never answered (told {told:?})"));
    }
    if stood_in && charges == 0 {
        violations.push(format!("{name}: answered as paid (a stand-in), and nothing charged"));
    }
    if declined && (charges > 0 || !charged.is_empty() || stood_in) {
        violations.push(format!("{name}: told declined, and charged {charges} ({told:?})"));
    }
    let Some(&(first, amount)) = charged.first() else {
        if let (true, Lookup::Charged(charge)) = (stood_in, gateway.lookup(&key))
            && charge.amount.minor() != intent.amount
        {
            violations.push(format!("{name}: charged {}, asked {}", charge.amount, intent.amount));
        }
        return;
    };
    if charged.iter().any(|(charge, _)| *charge != first) {
        violations.push(format!("{name}: answers name different charges: {charged:?}"));
    }
    match gateway.lookup(&key) {
        Lookup::Charged(charge) => {
            let shown = charge.amount.in_currency(charge.currency).to_string();
            if charge.id.to_string() != *first || shown != *amount {
                let made = format!("{} of {shown}", charge.id);
                violations
                    .push(format!("{name}: told {first} of {amount}, the gateway made {made}"));
            }
            if charge.amount.minor() != intent.amount {
                violations.push(format!("{name}: charged {shown}, asked {}", intent.amount));
            }
        }
        other => violations.push(format!("{name}: told {first}, the gateway says {other:?}")),
    }
}

/// The answers that are wrong in themselves, whatever else the intent was told.
fn wrong_answers(name: &str, told: &[Told], violations: &mut Vec<String>) {
    for t in told {
        if let Told::Unexpected { status } = t {
            violations.push(format!("{name}: answered {status}, which no retry should get"));
        }
        if let Told::Leaked { status } = t {
            violations.push(format!("{name}: a {status} answer carried the store's error text"));
        }
        if let Told::Broken { why } = t {
            violations.push(format!("{name}: {why}"));
        }
        if let Told::ReusedAnswered { status, charge } = t {
            violations.push(format!(
                "{name}: its key reused for another amount was answered {status} ({charge})"
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use idem_core::{Fingerprint, KeyStore, ManualClock, MemoryStore, ScopedKey, StoreConfig};
    use idem_payments::{Gateway, GatewayKey, PaymentRequest, SimulatedGateway};

    use super::world;
    use crate::checkout::app::MERCHANT;
    use crate::hosts::Intent;
    use crate::plan::{LEASE, Plan};
    use crate::rng::Rng;
    use crate::shared::{Told, WorldState, lock};

    struct Fixture {
        shared: Arc<WorldState>,
        store: Arc<MemoryStore<idem_http::StoredResponse>>,
        paid: Arc<MemoryStore<idem_payments::PaymentOutcome>>,
        gateway: Arc<SimulatedGateway>,
        clock: Arc<ManualClock>,
        intent: Intent,
    }

    fn fixture() -> Fixture {
        fixture_on(Plan::draw(&mut Rng::new(1)))
    }

    fn fixture_on(plan: Plan) -> Fixture {
        let shared = WorldState::new(plan, Rng::new(2));
        let clock = Arc::new(ManualClock::new(idem_core::Timestamp::from_millis(1)));
        let config = StoreConfig::builder().lease(LEASE).build().expect("a valid lease");
        let clocks: (Arc<dyn idem_core::Clock>, Arc<dyn idem_core::Clock>) =
            (clock.clone(), clock.clone());
        let store = Arc::new(MemoryStore::simulated(config, clocks.clone(), 3));
        let paid = Arc::new(MemoryStore::simulated(config, clocks, 4));
        let gateway = Arc::new(SimulatedGateway::new().without_dedup());
        let intent = Intent {
            index: 1,
            key: "order-1".into(),
            amount: 105,
            path: "/checkout",
            reused: false,
            size: crate::hosts::Size::Plain,
        };
        Fixture { shared, store, paid, gateway, clock, intent }
    }

    impl Fixture {
        fn charge(&self) -> String {
            let key = GatewayKey::derive(&ScopedKey::parse(MERCHANT, "order-1").expect("key"));
            let order = PaymentRequest::new("cus_1", 105, "EUR").expect("order");
            self.gateway.charge(&key, &order).expect("charged").id.to_string()
        }

        fn tell(&self, charge: &str) {
            let amount = "1.05 EUR".to_string();
            self.shared.tell(1, Told::Charged { charge: charge.into(), amount });
        }

        fn violations(&self) -> Vec<String> {
            let stores = (self.store.clone(), self.paid.clone());
            world(&self.shared, &stores, &self.gateway, &[vec![self.intent.clone()]])
        }
    }

    #[test]
    fn a_world_that_held_has_no_violation() {
        let f = fixture();
        let charge = f.charge();
        f.tell(&charge);
        f.tell(&charge);
        assert_eq!(f.violations(), Vec::<String>::new());
    }

    #[test]
    fn a_second_charge_and_answers_naming_two_charges_are_violations() {
        let f = fixture();
        let (first, second) = (f.charge(), f.charge());
        f.tell(&first);
        f.tell(&second);
        let found = f.violations().join("\n");
        assert!(found.contains("charged 2 times"), "{found}");
        assert!(found.contains("answers name different charges"), "{found}");
    }

    #[test]
    fn an_answer_the_gateway_never_made_is_a_violation() {
        let f = fixture();
        f.tell("ch_99");
        let found = f.violations().join("\n");
        assert!(found.contains("told ch_99, the gateway says NotCharged"), "{found}");
    }

    #[test]
    fn an_answer_naming_a_charge_the_gateway_did_not_make_for_it_is_a_violation() {
        let f = fixture();
        let made = f.charge();
        f.tell("ch_0");
        let found = f.violations().join("\n");
        assert!(
            found.contains(&format!("told ch_0 of 1.05 EUR, the gateway made {made}")),
            "{found}"
        );
    }

    #[test]
    fn an_unanswered_intent_a_claim_left_in_flight_and_tokens_not_growing_are_violations() {
        let f = fixture();
        let key = ScopedKey::parse(MERCHANT, "order-1").expect("key");
        let request = Fingerprint::builder("checkout").u64("amount", 105).finish();
        let _held = KeyStore::claim(&*f.store, &key, &request).expect("claimed");
        f.clock.advance(LEASE + Duration::from_millis(1));
        lock(&f.shared.tokens).insert("demo-shop/order-1".into(), vec![2, 2]);
        let found = f.violations().join("\n");
        assert!(found.contains("liveness: intent 1 (order-1) was never answered"), "{found}");
        assert!(found.contains("the layer's claims still in flight"), "{found}");
        assert!(found.contains("fencing tokens of demo-shop/order-1 did not grow"), "{found}");
    }

    #[test]
    fn a_recovery_is_a_violation_in_a_steady_world_only() {
        for steady in [false, true] {
            let plan = Plan::draw(&mut Rng::new(1));
            let f = fixture_on(if steady { plan.steadied() } else { plan });
            let charge = f.charge();
            f.tell(&charge);
            f.shared.recovered("server0", &ScopedKey::parse(MERCHANT, "order-1").expect("key"));
            let found = f.violations().join("\n");
            assert_eq!(found.contains("a steady world"), steady, "{found}");
        }
    }

    #[test]
    fn an_answer_carrying_the_stores_error_text_is_a_violation() {
        let f = fixture();
        let charge = f.charge();
        f.tell(&charge);
        f.shared.tell(1, Told::Leaked { status: 503 });
        let found = f.violations().join("\n");
        assert!(found.contains("a 503 answer carried the store's error text"), "{found}");
    }

    #[test]
    fn a_reused_key_answered_with_a_charge_is_a_violation() {
        let f = fixture();
        let charge = f.charge();
        f.tell(&charge);
        f.shared.tell(1, Told::ReusedAnswered { status: 201, charge: charge.clone() });
        let found = f.violations().join("\n");
        assert!(found.contains("reused for another amount was answered 201"), "{found}");
    }

    #[test]
    fn a_decline_after_a_charge_and_an_unexpected_status_are_violations() {
        let f = fixture();
        let charge = f.charge();
        f.tell(&charge);
        f.shared.tell(1, Told::Declined);
        f.shared.tell(1, Told::Unexpected { status: 422 });
        let found = f.violations().join("\n");
        assert!(found.contains("told declined, and charged 1"), "{found}");
        assert!(found.contains("answered 422"), "{found}");
    }

    #[test]
    fn a_stand_in_answers_the_intent_but_only_for_a_charge_made() {
        let f = fixture();
        f.shared.tell(1, Told::StoodIn);
        let found = f.violations().join("\n");
        assert!(found.contains("answered as paid (a stand-in), and nothing charged"), "{found}");
        assert!(!found.contains("liveness"), "{found}");
        f.charge();
        assert_eq!(f.violations(), Vec::<String>::new());
    }

    #[test]
    fn a_broken_answer_and_a_breach_of_the_store_contract_are_violations() {
        let f = fixture();
        let charge = f.charge();
        f.tell(&charge);
        f.shared.tell(1, Told::Broken { why: "a 201 receipt cut short".into() });
        f.shared.breach("server0", "a result of 2000 bytes".into());
        let found = f.violations().join("\n");
        assert!(found.contains("intent 1 (order-1): a 201 receipt cut short"), "{found}");
        assert!(found.contains("the store contract broken: a result of 2000 bytes"), "{found}");
    }
}
