//! One test per documented behaviour, with a `check` that drives `pay`.

use std::time::Duration;

use idem_payments::{Fault, PayError, Payment, PaymentOutcome, PaymentRequest, ValidationError};

use crate::{LEASE, charges, key, processor, request};

#[test]
fn first_call_charges_and_repeats_replay_the_identical_charge() {
    let (p, _) = processor();
    let (k, r) = (key("k1"), request(1250));
    let first = p.pay(&k, &r).expect("pay");
    assert!(!first.replayed);
    let PaymentOutcome::Charged(charge) = &first.outcome else { panic!("charged") };
    assert_eq!((charge.amount.minor(), charge.currency.code()), (1250, "EUR"));
    for _ in 0..3 {
        let again = p.pay(&k, &r).expect("replay");
        assert_eq!(again, Payment { outcome: first.outcome.clone(), replayed: true });
    }
    assert_eq!(charges(&p, &k, &r), 1);
}

#[test]
fn same_key_different_request_is_refused_and_the_original_untouched() {
    let (p, _) = processor();
    let k = key("k1");
    let first = p.pay(&k, &request(100)).expect("pay");
    assert!(matches!(p.pay(&k, &request(200)), Err(PayError::KeyReused(_))));
    assert_eq!(p.pay(&k, &request(100)).expect("replay").outcome, first.outcome);
}

#[test]
fn two_customers_with_the_same_key_never_meet() {
    let (p, _) = processor();
    let k = key("order-1");
    let a = PaymentRequest::new("cus_a", 100, "EUR").expect("valid");
    let b = PaymentRequest::new("cus_b", 999, "EUR").expect("valid");
    let pa = p.pay(&k, &a).expect("a pays");
    let pb = p.pay(&k, &b).expect("b pays");
    assert!(!pa.replayed && !pb.replayed);
    assert_ne!(pa.outcome, pb.outcome);
}

#[test]
fn concurrent_repeat_is_in_progress_with_retry_after() {
    let (p, clock) = processor();
    let (k, r) = (key("k1"), request(10));
    p.gateway().inject(Fault::ChargeThenTimeout);
    assert!(matches!(p.pay(&k, &r), Err(PayError::Pending(_))));
    clock.advance(Duration::from_secs(10));
    match p.pay(&k, &r) {
        Err(PayError::InProgress { retry_after }) => {
            assert_eq!(retry_after, LEASE - Duration::from_secs(10))
        }
        other => panic!("expected InProgress, got {other:?}"),
    }
    assert_eq!(charges(&p, &k, &r), 1);
}

#[test]
fn pay_wait_returns_the_first_attempts_outcome() {
    let (p, _) = processor();
    let (k, r) = (key("k1"), request(10));
    let first = p.pay(&k, &r).expect("pay");
    for timeout in [Duration::ZERO, Duration::from_millis(50), Duration::MAX] {
        let waited = p.pay_wait(&k, &r, timeout).expect("pay_wait");
        assert_eq!((&waited.outcome, waited.replayed), (&first.outcome, true), "{timeout:?}");
    }
    // An absent key with no deadline at all charges at once.
    assert!(!p.pay_wait(&key("k2"), &r, Duration::MAX).expect("charges").replayed);
}

#[test]
fn a_decline_is_stored_and_replayed_not_rerun() {
    let (p, _) = processor();
    let (k, r) = (key("k1"), request(10));
    p.gateway().inject(Fault::Decline("insufficient funds".into()));
    let first = p.pay(&k, &r).expect("a decline is an outcome");
    assert_eq!(first.outcome, PaymentOutcome::Declined("insufficient funds".into()));
    let again = p.pay(&k, &r).expect("replay");
    assert_eq!((again.outcome, again.replayed), (first.outcome, true));
    assert_eq!(charges(&p, &k, &r), 0);
}

#[test]
fn refused_before_sending_releases_so_a_retry_charges() {
    let (p, _) = processor();
    let (k, r) = (key("k1"), request(10));
    p.gateway().inject(Fault::RefuseBeforeCharge);
    assert!(matches!(p.pay(&k, &r), Err(PayError::Unavailable(_))));
    assert_eq!(charges(&p, &k, &r), 0);
    let retry = p.pay(&k, &r).expect("the retry charges");
    assert!(!retry.replayed);
    assert_eq!(charges(&p, &k, &r), 1);
}

#[test]
fn ambiguous_failure_stays_pending_never_released_never_stored() {
    let (p, clock) = processor();
    let (k, r) = (key("k1"), request(10));
    p.gateway().inject(Fault::ChargeThenTimeout);
    assert!(matches!(p.pay(&k, &r), Err(PayError::Pending(_))));
    assert!(matches!(p.pay(&k, &r), Err(PayError::InProgress { .. })), "not released");
    clock.advance(LEASE);
    // The retry after the lease recovers, asks the gateway, and finds the charge.
    let recovered = p.pay(&k, &r).expect("recovered");
    assert!(recovered.replayed);
    assert!(matches!(recovered.outcome, PaymentOutcome::Charged(_)));
    assert_eq!(charges(&p, &k, &r), 1);
}

#[test]
fn ambiguous_failure_that_charged_nothing_is_charged_once_on_recovery() {
    let (p, clock) = processor();
    let (k, r) = (key("k1"), request(10));
    p.gateway().inject(Fault::TimeoutWithoutCharge);
    assert!(matches!(p.pay(&k, &r), Err(PayError::Pending(_))));
    clock.advance(LEASE);
    let paid = p.pay(&k, &r).expect("recovered, not charged: charge now");
    assert!(!paid.replayed);
    assert_eq!(charges(&p, &k, &r), 1);
}

#[test]
fn invalid_requests_are_rejected_before_claiming() {
    let cases: &[(&str, i64, &str, ValidationError)] = &[
        ("cus", 0, "EUR", ValidationError::NonPositiveAmount(0)),
        ("cus", -5, "EUR", ValidationError::NonPositiveAmount(-5)),
        ("cus", 5, "EURO", ValidationError::UnknownCurrency("EURO".into())),
        ("cus", 5, "eur", ValidationError::UnknownCurrency("eur".into())),
        ("", 5, "EUR", ValidationError::Customer(idem_core::KeyError::Empty)),
    ];
    for (customer, amount, currency, expected) in cases {
        assert_eq!(PaymentRequest::new(customer, *amount, currency).as_ref(), Err(expected));
    }
    let (p, _) = processor();
    let long = "c".repeat(252); // fits a scope alone, not after "shop/"
    let request = PaymentRequest::new(&long, 5, "EUR").expect("valid on its own");
    assert!(matches!(
        p.pay(&key("k"), &request),
        Err(PayError::Invalid(ValidationError::ScopeTooLong {
            merchant_bytes: 4,
            customer_bytes: 252,
            max_bytes: 255
        }))
    ));
    assert_eq!(p.store().len(), 0, "nothing was claimed");
}

#[test]
fn mark_refunded_is_idempotent_by_shape() {
    let (p, _) = processor();
    let PaymentOutcome::Charged(charge) = p.pay(&key("k"), &request(10)).expect("pay").outcome
    else {
        panic!("charged")
    };
    assert!(p.mark_refunded(charge.id));
    assert!(p.mark_refunded(charge.id), "a repeat leaves the same state");
    assert!(p.gateway().is_refunded(charge.id));
    assert!(!p.mark_refunded(idem_payments::ChargeId(999)), "an unknown charge");
}

#[test]
fn store_full_is_a_typed_error() {
    use idem_core::{MemoryStore, StoreConfig};
    let store = MemoryStore::new(StoreConfig::builder().capacity(1).build().expect("valid"));
    let p = idem_payments::Processor::new("shop", idem_payments::SimulatedGateway::new(), store)
        .expect("valid");
    p.pay(&key("a"), &request(1)).expect("first");
    assert!(matches!(
        p.pay(&key("b"), &request(1)),
        Err(PayError::Store(idem_core::StoreError::StoreFull { .. }))
    ));
}

#[test]
fn a_gateway_memory_of_duration_max_never_forgets_and_never_overflows() {
    let clock =
        std::sync::Arc::new(idem_core::ManualClock::new(idem_core::Timestamp::from_millis(0)));
    let gateway = idem_payments::SimulatedGateway::new()
        .with_latency(Duration::ZERO)
        .forgetting_after(Duration::MAX, clock.clone());
    let store =
        idem_core::MemoryStore::with_clock(idem_core::StoreConfig::default(), clock.clone());
    let p = idem_payments::Processor::new("shop", gateway, store).expect("valid");
    let (k, r) = (key("k"), request(10));
    p.gateway().inject(Fault::ChargeThenTimeout);
    assert!(matches!(p.pay(&k, &r), Err(PayError::Pending(_))));
    clock.advance(Duration::from_secs(100 * 365 * 24 * 3600));
    let report = p.reconcile(10);
    assert_eq!(report.completed, 1, "the gateway still remembers the charge: {report:?}");
}
