//! A proptest model: random payment attempts (first tries, retries, duplicate clicks),
//! gateway faults, clock moves and reconciliations. After every step no key was charged
//! twice; at the end, after settling, every intent was charged exactly once or declined,
//! and the gateway's total equals the sum of the charged intents.

use std::time::Duration;

use idem_payments::{Fault, PayError, PaymentOutcome};
use proptest::prelude::*;

use crate::{LEASE, charges, key, processor_with, request};

const INTENTS: usize = 5;

#[derive(Debug, Clone)]
enum Op {
    Attempt(usize),
    DoubleClick(usize),
    Inject(u8),
    Advance(bool),
    Reconcile,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (0..INTENTS).prop_map(Op::Attempt),
        2 => (0..INTENTS).prop_map(Op::DoubleClick),
        2 => (0..4u8).prop_map(Op::Inject),
        2 => any::<bool>().prop_map(Op::Advance),
        1 => Just(Op::Reconcile),
    ]
}

fn fault(kind: u8) -> Fault {
    match kind {
        0 => Fault::RefuseBeforeCharge,
        1 => Fault::ChargeThenTimeout,
        2 => Fault::TimeoutWithoutCharge,
        _ => Fault::Decline("card declined".into()),
    }
}

fn check(ops: &[Op]) {
    // A gateway without deduplication: only the processor prevents a second charge.
    let (p, clock) = processor_with(idem_payments::SimulatedGateway::new().without_dedup());
    let intents: Vec<_> =
        (0..INTENTS).map(|i| (key(&format!("intent-{i}")), request(100 + i as i64))).collect();
    let mut seen: Vec<Option<PaymentOutcome>> = vec![None; INTENTS];
    let mut record = |i: usize, result: Result<idem_payments::Payment, PayError>| match result {
        Ok(payment) => {
            if let Some(earlier) = &seen[i] {
                assert_eq!(&payment.outcome, earlier, "intent {i}: a repeat changed the answer");
            }
            seen[i] = Some(payment.outcome);
        }
        Err(PayError::InProgress { .. } | PayError::Pending(_) | PayError::Unavailable(_)) => {}
        Err(other) => panic!("intent {i}: unexpected {other}"),
    };
    for op in ops {
        match *op {
            Op::Attempt(i) => record(i, p.pay(&intents[i].0, &intents[i].1)),
            Op::DoubleClick(i) => {
                let (first, second) = std::thread::scope(|s| {
                    let a = s.spawn(|| p.pay(&intents[i].0, &intents[i].1));
                    let b = p.pay(&intents[i].0, &intents[i].1);
                    (a.join().expect("click"), b)
                });
                record(i, first);
                record(i, second);
            }
            Op::Inject(kind) => p.gateway().inject(fault(kind)),
            Op::Advance(full_lease) => {
                clock.advance(if full_lease { LEASE } else { Duration::from_secs(1) })
            }
            Op::Reconcile => {
                let report = p.reconcile(100);
                let clean = report.unresolved.is_empty() && report.failed.is_empty();
                assert!(clean && report.listing_failed.is_none(), "{report:?}");
            }
        }
        for (k, r) in &intents {
            assert!(charges(&p, k, r) <= 1, "a key was charged twice after {op:?}");
        }
    }
    // Settle: no more faults; let leases run out, reconcile, and have every client retry.
    p.gateway().clear_faults();
    for _ in 0..3 {
        clock.advance(LEASE);
        p.reconcile(100);
        for (i, (k, r)) in intents.iter().enumerate() {
            record(i, p.pay(k, r));
        }
    }
    let mut charged_sum = 0;
    for (i, (k, r)) in intents.iter().enumerate() {
        match &seen[i] {
            Some(PaymentOutcome::Charged(c)) => {
                assert_eq!(charges(&p, k, r), 1, "intent {i} charged once");
                charged_sum += c.amount.minor();
            }
            Some(PaymentOutcome::Declined(_)) => assert_eq!(charges(&p, k, r), 0),
            None => panic!("intent {i} unresolved after settling"),
        }
    }
    assert_eq!(
        p.gateway().totals().charged_minor,
        charged_sum,
        "money charged = money of charged intents"
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn every_intent_charged_at_most_once(ops in prop::collection::vec(op(), 1..40)) {
        check(&ops);
    }
}
