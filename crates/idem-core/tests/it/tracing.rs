//! What an operator sees with the `tracing` feature: one `claim` or `settle` span per
//! store operation, naming the key's scope, and one event for its outcome.

use std::sync::Arc;
use std::time::Duration;

use idem_core::{
    Claim, Fingerprint, KeyStore, ManualClock, MemoryStore, ScopedKey, StoreConfig, Timestamp,
};
use idem_testkit::capture::{Level, Seen, capture};

/// The one event of `seen`, checked to run in span `span` for scope `shop`.
#[track_caller]
fn only(seen: Vec<Seen>, span: &str) -> Seen {
    assert_eq!(seen.len(), 1, "one event per operation: {seen:?}");
    let event = seen.into_iter().next().expect("one");
    assert_eq!(event.span_field(span, "scope"), Some("shop"), "{event:?}");
    assert_eq!(event.span_field(span, "key"), Some("order-1"), "{event:?}");
    event
}

#[test]
fn a_replay_a_recover_a_reuse_and_a_lost_lease_each_say_so() {
    let clock = Arc::new(ManualClock::new(Timestamp::from_millis(1_000_000)));
    let config = StoreConfig::builder().lease(Duration::from_secs(5)).build().expect("valid");
    let store = MemoryStore::<String>::with_clock(config, clock.clone());
    let key = ScopedKey::parse("shop", "order-1").expect("valid");
    let fp = Fingerprint::builder("pay").u64("amount", 10).finish();
    let other = Fingerprint::builder("pay").u64("amount", 99).finish();

    let (claim, seen) = capture(|| store.claim(&key, &fp));
    let Ok(Claim::Acquired(first)) = claim else { panic!("{claim:?}") };
    assert_eq!(only(seen, "claim").message, "acquired");

    let (_, seen) = capture(|| store.claim(&key, &fp));
    let in_flight = only(seen, "claim");
    assert_eq!((in_flight.level, in_flight.message.as_str()), (Level::INFO, "in flight"));

    clock.advance(Duration::from_secs(6));
    let (claim, seen) = capture(|| store.claim(&key, &fp));
    let Ok(Claim::Recover(second)) = claim else { panic!("{claim:?}") };
    let recover = only(seen, "claim");
    assert_eq!(recover.level, Level::WARN);
    assert!(recover.message.starts_with("recover"), "{recover:?}");

    let (lost, seen) = capture(|| store.complete(&first, "late".to_string()));
    assert!(lost.is_err(), "the first lease was taken over");
    let lost = only(seen, "settle");
    assert_eq!((lost.level, lost.span_field("settle", "op")), (Level::WARN, Some("complete")));
    assert!(lost.message.starts_with("lease lost"), "{lost:?}");

    store.complete(&second, "charged: secret-card-data".to_string()).expect("held");
    let (_, seen) = capture(|| store.claim(&key, &fp));
    let replay = only(seen, "claim");
    assert_eq!((replay.level, replay.message.as_str()), (Level::INFO, "replay"));
    assert!(replay.all_values().all(|v| !v.contains("secret")), "no stored result: {replay:?}");

    let (_, seen) = capture(|| store.claim(&key, &other));
    let reused = only(seen, "claim");
    assert_eq!(reused.level, Level::WARN);
    assert!(reused.message.starts_with("key reused"), "{reused:?}");
}

/// A forget is traced at warn with who asked and why, the key, and what was removed; a
/// refused forget says the holder still runs. No stored result is in either.
#[test]
fn a_forget_says_who_asked_and_why() {
    use idem_core::KeyAdmin;
    let store = MemoryStore::<String>::new(StoreConfig::default());
    let key = ScopedKey::parse("shop", "order-1").expect("valid");
    let fp = Fingerprint::builder("pay").u64("amount", 10).finish();
    let Ok(Claim::Acquired(lease)) = store.claim(&key, &fp) else { panic!("acquired") };
    let (_, seen) = capture(|| store.forget(&key, "alice", "ticket 42"));
    let refused = seen.into_iter().next().expect("an event");
    assert_eq!(refused.level, Level::WARN);
    assert!(refused.message.starts_with("forget refused"), "{refused:?}");
    store.complete(&lease, "secret-card-data".to_string()).expect("held");
    let (_, seen) = capture(|| store.forget(&key, "alice", "ticket 42"));
    assert_eq!(seen.len(), 1, "{seen:?}");
    let event = &seen[0];
    assert_eq!(event.level, Level::WARN);
    assert!(event.message.starts_with("forgotten"), "{event:?}");
    for (field, value) in [("who", "alice"), ("why", "ticket 42"), ("scope", "shop")] {
        assert_eq!(event.fields.get(field).map(String::as_str), Some(value), "{event:?}");
    }
    assert!(event.fields.get("was").is_some_and(|w| w.contains("Finished")), "{event:?}");
    assert!(event.all_values().all(|v| !v.contains("secret")), "no stored result: {event:?}");
}
