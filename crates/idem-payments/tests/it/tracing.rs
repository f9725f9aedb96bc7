//! What an operator sees with the `tracing` feature: each `pay` runs in a span naming the
//! merchant/customer scope and the key; the store's events (replay, recover) run inside
//! it, the processor adds its own; no amount, currency or card reaches a field.

use idem_payments::{Fault, PayError};
use idem_testkit::capture::{Level, Seen, capture};

use crate::{LEASE, key, processor, request};

/// The messages of `seen`, each checked to run in a `pay` span for `shop/cus_1`, key `k1`.
#[track_caller]
fn messages(seen: &[Seen]) -> Vec<(Level, &str)> {
    for event in seen {
        assert_eq!(event.span_field("pay", "scope"), Some("shop/cus_1"), "{event:?}");
        assert_eq!(event.span_field("pay", "key"), Some("k1"), "{event:?}");
        let amount = "1234";
        assert!(event.all_values().all(|v| !v.contains(amount)), "no amount: {event:?}");
    }
    seen.iter().map(|e| (e.level, e.message.as_str())).collect()
}

#[test]
fn an_ambiguous_charge_then_its_recovery_then_a_replay() {
    let (p, clock) = processor();
    let (k, r) = (key("k1"), request(1234));
    p.gateway().inject(Fault::TimeoutWithoutCharge);
    let (paid, seen) = capture(|| p.pay(&k, &r));
    assert!(matches!(paid, Err(PayError::Pending(_))));
    assert_eq!(
        messages(&seen),
        [
            (Level::DEBUG, "acquired"),
            (Level::WARN, "ambiguous gateway answer: the claim stays pending")
        ]
    );
    clock.advance(LEASE);
    let (paid, seen) = capture(|| p.pay(&k, &r));
    assert!(!paid.expect("recovered: not charged, so charged now").replayed);
    let said = messages(&seen);
    assert_eq!(said.len(), 2, "{said:?}");
    assert_eq!(said[0].0, Level::WARN);
    assert!(said[0].1.starts_with("recover"), "the store's recover: {said:?}");
    assert_eq!(said[1], (Level::WARN, "recover: asking the gateway before charging"));
    let (paid, seen) = capture(|| p.pay(&k, &r));
    assert!(paid.expect("stored").replayed);
    assert_eq!(messages(&seen), [(Level::INFO, "replay")]);
}
