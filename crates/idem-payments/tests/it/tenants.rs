//! One tenant is never answered with another tenant's charge: scopes are unambiguous, and
//! a gateway answer that is not the request's is never stored or returned.

use std::sync::Arc;

use std::sync::atomic::{AtomicBool, Ordering};

use idem_core::{KeyError, KeyStore, ManualClock, MemoryStore, StoreConfig, Timestamp};
use idem_payments::{
    Amount, Charge, ChargeField, ChargeId, Currency, Fault, Gateway, GatewayError, GatewayKey,
    Lookup, PayError, PaymentOutcome, PaymentRequest, Processor, SimulatedGateway, ValidationError,
};
use proptest::prelude::*;

use crate::{LEASE, key};

fn store() -> MemoryStore<PaymentOutcome> {
    MemoryStore::new(StoreConfig::default())
}

#[test]
fn a_merchant_with_the_separator_is_refused_so_pairs_cannot_collide() {
    // `shop` + `eu/cus_1` and `shop/eu` + `cus_1` would both be `shop/eu/cus_1`.
    let gateway = Arc::new(SimulatedGateway::new());
    let refused = Processor::new("shop/eu", gateway.clone(), store());
    assert!(matches!(refused, Err(ValidationError::MerchantSeparator { position: 4 })));
    let shop = Processor::new("shop", gateway.clone(), store()).expect("valid merchant");
    let request = PaymentRequest::new("eu/cus_1", 500, "EUR").expect("valid");
    assert!(!shop.pay(&key("k"), &request).expect("pays").replayed);
}

#[test]
fn two_merchants_on_one_gateway_each_get_their_own_charge() {
    let gateway = Arc::new(SimulatedGateway::new());
    let a = Processor::new("shop", gateway.clone(), store()).expect("valid");
    let b = Processor::new("shop:eu", gateway.clone(), store()).expect("valid");
    let (ra, rb) = (request("eu/cus_1", 500), request("cus_1", 700));
    let pa = a.pay(&key("k"), &ra).expect("a pays");
    let pb = b.pay(&key("k"), &rb).expect("b pays");
    assert!(!pa.replayed && !pb.replayed);
    let PaymentOutcome::Charged(cb) = pb.outcome else { panic!("b charged") };
    assert_eq!((cb.customer.as_str(), cb.amount.minor()), ("cus_1", 700));
}

#[test]
fn errors_name_the_input_that_is_wrong() {
    let gateway = SimulatedGateway::new();
    let empty = Processor::new("", gateway, store());
    assert!(matches!(empty, Err(ValidationError::Merchant(KeyError::Empty))));
    let padded = Processor::new(" shop", SimulatedGateway::new(), store());
    assert!(matches!(padded, Err(ValidationError::Merchant(_))));
    let customer = PaymentRequest::new("", 5, "EUR");
    assert_eq!(customer, Err(ValidationError::Customer(KeyError::Empty)));
    let long_merchant = "m".repeat(200);
    let p = Processor::new(&long_merchant, SimulatedGateway::new(), store()).expect("valid");
    let err = p.pay(&key("k"), &request(&"c".repeat(60), 5)).expect_err("too long together");
    let PayError::Invalid(error) = err else { panic!("invalid: {err:?}") };
    let expected =
        ValidationError::ScopeTooLong { merchant_bytes: 200, customer_bytes: 60, max_bytes: 255 };
    assert_eq!(error, expected);
    assert!(error.to_string().contains("merchant (200 bytes) and customer (60 bytes)"));
}

fn request(customer: &str, amount: i64) -> PaymentRequest {
    PaymentRequest::new(customer, amount, "EUR").expect("valid request")
}

/// How a lying gateway changes the real charge before answering.
type Lie = fn(&mut Charge);

/// A gateway that answers every charge with `lie` applied to the real charge.
#[derive(Debug)]
struct Lying {
    inner: SimulatedGateway,
    lie: Lie,
}

impl Gateway for Lying {
    fn charge(&self, key: &GatewayKey, request: &PaymentRequest) -> Result<Charge, GatewayError> {
        let mut charge = self.inner.charge(key, request)?;
        (self.lie)(&mut charge);
        Ok(charge)
    }

    fn lookup(&self, key: &GatewayKey) -> Lookup {
        match self.inner.lookup(key) {
            Lookup::Charged(mut charge) => {
                (self.lie)(&mut charge);
                Lookup::Charged(charge)
            }
            other => other,
        }
    }

    fn set_refunded(&self, charge: ChargeId) -> bool {
        self.inner.set_refunded(charge)
    }
}

#[test]
fn a_charge_that_is_not_the_request_is_never_stored_or_returned() {
    let lies: [(ChargeField, Lie); 3] = [
        (ChargeField::Customer, |c| c.customer = "cus_other".into()),
        (ChargeField::Amount, |c| c.amount = Amount::from_minor(1).expect("valid")),
        (ChargeField::Currency, |c| c.currency = Currency::Usd),
    ];
    for (field, lie) in lies {
        check_mismatch(field, lie);
    }
}

fn check_mismatch(field: ChargeField, lie: Lie) {
    let (p, clock) = processor_on(Lying { inner: SimulatedGateway::new(), lie });
    let (k, r) = (key("k"), request("cus_1", 500));
    match p.pay(&k, &r) {
        Err(PayError::GatewayMismatch { field: f, .. }) => assert_eq!(f, field),
        other => panic!("{field}: expected a mismatch, got {other:?}"),
    }
    // Not completed, not released: the claim is pending, a retry is told to wait.
    assert!(matches!(p.pay(&k, &r), Err(PayError::InProgress { .. })), "{field}");
    clock.advance(LEASE);
    let report = p.reconcile(10);
    assert_eq!((report.completed, report.released, report.mismatched.len()), (0, 0, 1));
    // Still pending: listed again once the reconciler's own lease runs out.
    clock.advance(LEASE);
    let scoped = p.scoped_key(&k, &r).expect("valid");
    let pending = p.store().pending(10).expect("listing");
    assert_eq!(pending.iter().map(|c| &c.key).collect::<Vec<_>>(), [&scoped], "{field}");
}

#[test]
fn a_recovering_retry_refuses_a_lookup_that_is_not_the_request() {
    let lie: Lie = |c| c.amount = Amount::from_minor(1).expect("valid");
    let gateway = Lying { inner: SimulatedGateway::new(), lie };
    // The first attempt charges and loses the answer; the retry after the lease recovers
    // and asks the gateway, which reports another amount.
    gateway.inner.inject(idem_payments::Fault::ChargeThenTimeout);
    let (p, clock) = processor_on(gateway);
    let (k, r) = (key("k"), request("cus_1", 500));
    assert!(matches!(p.pay(&k, &r), Err(PayError::Pending(_))));
    clock.advance(LEASE);
    let retry = p.pay(&k, &r);
    assert!(matches!(retry, Err(PayError::GatewayMismatch { field: ChargeField::Amount, .. })));
    assert!(matches!(p.pay(&k, &r), Err(PayError::InProgress { .. })), "still pending");
}

type ClockedProcessor<G> = Processor<G, MemoryStore<PaymentOutcome>>;

fn processor_on<G: Gateway>(gateway: G) -> (ClockedProcessor<G>, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(Timestamp::from_millis(0)));
    let config = StoreConfig::builder().lease(LEASE).build().expect("valid");
    let store = MemoryStore::with_clock(config, clock.clone());
    (Processor::new("shop", gateway, store).expect("valid"), clock)
}

#[test]
fn a_gateway_in_an_arc_is_a_gateway() {
    let gateway = Arc::new(SimulatedGateway::new());
    let a = Processor::new("a", Arc::clone(&gateway), store()).expect("valid");
    let b = Processor::new("b", Arc::clone(&gateway), store()).expect("valid");
    a.pay(&key("k"), &request("c", 1)).expect("a pays");
    b.pay(&key("k"), &request("c", 1)).expect("b pays");
    assert_eq!(gateway.totals().charges, 2, "two charges of 1 minor unit");
}

/// Scope parts from a tiny alphabet rich in separators, so that an ambiguous joining
/// would be found quickly.
fn part() -> impl Strategy<Value = String> {
    proptest::collection::vec(prop::sample::select(vec!['a', '/', ':', 'b']), 1..5)
        .prop_map(|chars| chars.into_iter().collect())
}

proptest! {
    /// Two distinct (merchant, customer) pairs that are both accepted never share a scope
    /// or a gateway key.
    #[test]
    fn distinct_pairs_never_share_a_scope_or_a_gateway_key(
        pairs in proptest::collection::vec((part(), part()), 2..8)
    ) {
        let k = key("k");
        let mut seen: Vec<((String, String), idem_core::ScopedKey, GatewayKey)> = Vec::new();
        for (merchant, customer) in pairs {
            let Ok(p) = Processor::new(&merchant, SimulatedGateway::new(), store()) else {
                continue;
            };
            let scoped = p.scoped_key(&k, &request(&customer, 1)).expect("short parts fit");
            let gateway_key = GatewayKey::derive(&scoped);
            for (pair, other_scoped, other_key) in &seen {
                if *pair != (merchant.clone(), customer.clone()) {
                    prop_assert_ne!(other_scoped, &scoped, "{:?} and {:?}", pair, customer);
                    prop_assert_ne!(other_key, &gateway_key);
                }
            }
            seen.push(((merchant, customer), scoped, gateway_key));
        }
    }
}

/// A store two merchants share, on a manual clock.
fn shared_store() -> (Arc<MemoryStore<PaymentOutcome>>, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(Timestamp::from_millis(1_000_000)));
    let config = StoreConfig::builder().lease(LEASE).build().expect("valid config");
    (Arc::new(MemoryStore::with_clock(config, clock.clone())), clock)
}

#[test]
fn reconcile_leaves_another_merchants_claims_alone() {
    let (store, clock) = shared_store();
    let gateway_b = Arc::new(SimulatedGateway::new().without_dedup());
    let a = Processor::new("shop-a", Arc::new(SimulatedGateway::new()), store.clone());
    let b = Processor::new("shop-b", gateway_b.clone(), store.clone());
    let (a, b) = (a.expect("valid"), b.expect("valid"));
    let request = request("cus_1", 500);
    gateway_b.inject(Fault::ChargeThenTimeout);
    let charged = b.pay(&key("k"), &request);
    assert!(matches!(charged, Err(PayError::Pending(_))), "{charged:?}");
    clock.advance(LEASE);
    // shop-a's gateway never saw the key: releasing it would let the retry charge again.
    let report = a.reconcile(10);
    assert_eq!((report.other_merchants, report.released, report.completed), (1, 0, 0));
    assert_eq!(b.reconcile(10).completed, 1, "its own merchant settles it");
    assert!(b.pay(&key("k"), &request).expect("replayed").replayed);
    let scoped = b.scoped_key(&key("k"), &request).expect("valid");
    assert_eq!(gateway_b.charges(&GatewayKey::derive(&scoped)), 1);
}

/// A panic payload whose drop panics with the next, `self.0` deep.
pub(crate) struct Bomb(pub(crate) u32);

impl Bomb {
    /// Panics with a bomb `depth` deep. Without the panic hook (`resume_unwind`): what is
    /// tested is the catching, and the hook's backtrace, printed with RUST_BACKTRACE set on
    /// a loaded machine, took longer than a renewal test's lease.
    pub(crate) fn explode(depth: u32) -> ! {
        std::panic::resume_unwind(Box::new(Bomb(depth)))
    }
}

impl Drop for Bomb {
    fn drop(&mut self) {
        if self.0 > 0 {
            Bomb::explode(self.0 - 1);
        }
    }
}

/// A gateway whose first lookup panics, with a payload whose drop panics in turn; the
/// rest is the simulated gateway's.
struct PanickingOnce {
    inner: SimulatedGateway,
    panicked: AtomicBool,
}

impl Gateway for PanickingOnce {
    fn charge(&self, key: &GatewayKey, request: &PaymentRequest) -> Result<Charge, GatewayError> {
        self.inner.charge(key, request)
    }

    fn lookup(&self, key: &GatewayKey) -> Lookup {
        if !self.panicked.swap(true, Ordering::SeqCst) {
            Bomb::explode(3);
        }
        self.inner.lookup(key)
    }

    fn set_refunded(&self, charge: ChargeId) -> bool {
        self.inner.set_refunded(charge)
    }
}

#[test]
fn a_lookup_that_panics_leaves_its_claim_pending_and_the_batch_goes_on() {
    let (store, clock) = shared_store();
    let gateway =
        PanickingOnce { inner: SimulatedGateway::new(), panicked: AtomicBool::new(false) };
    let shop = Processor::new("shop", gateway, store).expect("valid");
    for k in ["k1", "k2", "k3"] {
        shop.gateway().inner.inject(Fault::ChargeThenTimeout);
        assert!(matches!(shop.pay(&key(k), &request("cus_1", 500)), Err(PayError::Pending(_))));
    }
    clock.advance(LEASE);
    // On a thread of its own: a pass that let the panic out fails this test, and the
    // payload (whose drop panics) is leaked rather than dropped by the test harness.
    let shop = Arc::new(shop);
    let passing = {
        let shop = shop.clone();
        std::thread::spawn(move || shop.reconcile(10))
    };
    let report = passing.join().unwrap_or_else(|payload| {
        std::mem::forget(payload);
        panic!("the reconcile pass let the lookup's panic out")
    });
    assert_eq!((report.completed, report.unresolved.len()), (2, 1), "{report:?}");
    clock.advance(LEASE);
    assert_eq!(shop.reconcile(10).completed, 1, "the next pass settles the one left");
}
