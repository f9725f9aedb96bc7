//! Store configuration: defaults, validation at the limits, and the counters.

use std::sync::Arc;
use std::time::Duration;

use idem_core::{
    Claim, ConfigError, Fingerprint, KeyStore, ManualClock, MemoryStore, ScopedKey, StoreConfig,
    StoreError, Timestamp,
};

#[test]
fn defaults_are_documented_values() {
    let c = StoreConfig::default();
    assert_eq!(c.result_ttl(), Duration::from_secs(24 * 3600));
    assert_eq!(c.lease(), Duration::from_secs(30));
    assert_eq!(c.capacity(), 1_000_000);
    assert_eq!(c.sweep_batch_max(), 1024);
    assert_eq!(StoreConfig::builder().build(), Ok(c));
}

#[test]
fn invalid_settings_are_refused_by_name() {
    let b = StoreConfig::builder;
    let ms = Duration::from_millis;
    let max = StoreConfig::CAPACITY_MAX;
    // Each build, and the refusal it gets: (setting, value, accepted).
    type Refused = (&'static str, String, String);
    let cases: Vec<(Result<StoreConfig, ConfigError>, Refused)> = vec![
        (b().lease(ms(0)).build(), ("lease", "0ns".into(), "at least 1ms".into())),
        (
            b().result_ttl(Duration::from_micros(999)).build(),
            ("result_ttl", "999µs".into(), "at least 1ms".into()),
        ),
        (b().capacity(0).build(), ("capacity", "0".into(), format!("between 1 and {max}"))),
        (
            b().capacity(max + 1).build(),
            ("capacity", (max + 1).to_string(), format!("between 1 and {max}")),
        ),
        (
            b().sweep_batch_max(0).build(),
            (
                "sweep_batch_max",
                "0".into(),
                format!("between 1 and {}", StoreConfig::SWEEP_BATCH_MAX),
            ),
        ),
    ];
    for (got, (setting, value, accepted)) in cases {
        let error = got.expect_err(setting);
        assert_eq!((error.setting, &error.value, &error.accepted), (setting, &value, &accepted));
    }
    let error = b().lease(ms(0)).build().expect_err("too short");
    assert_eq!(error.to_string(), "lease is 0ns; it must be at least 1ms");
    assert!(b().lease(ms(1)).capacity(StoreConfig::CAPACITY_MAX).build().is_ok());
}

#[test]
fn counters_count_each_answer() {
    let clock = Arc::new(ManualClock::new(Timestamp::from_millis(0)));
    let config = StoreConfig::builder().capacity(1).build().expect("valid");
    let store = MemoryStore::<u8>::with_clock(config, clock.clone());
    let (a, b) =
        (ScopedKey::parse("s", "a").expect("key"), ScopedKey::parse("s", "b").expect("key"));
    let fp = |n| Fingerprint::builder("t").u64("n", n).finish();
    let Claim::Acquired(first) = store.claim(&a, &fp(1)).expect("claim") else { panic!() };
    let _ = store.claim(&a, &fp(1)).expect("in flight");
    assert!(matches!(store.claim(&a, &fp(2)), Err(StoreError::KeyReused { .. })));
    let full = store.claim(&b, &fp(1)).expect_err("full");
    assert!(matches!(full, StoreError::StoreFull { capacity: 1 }));
    assert!(full.to_string().contains("sweep"), "the message says what to do: {full}");
    clock.advance(config.lease());
    let Claim::Recover(second) = store.claim(&a, &fp(1)).expect("claim") else { panic!() };
    assert!(store.complete(&first, 1).is_err());
    store.complete(&second, 2).expect("complete");
    let _ = store.claim(&a, &fp(1)).expect("replay");
    clock.advance(config.result_ttl());
    assert_eq!(store.sweep().expect("sweep"), 1);
    let stats = store.stats();
    let expected = idem_core::StoreStats {
        records: 0,
        acquired: 1,
        in_flight: 1,
        replayed: 1,
        recovered: 1,
        key_reused: 1,
        store_full: 1,
        completed: 1,
        released: 0,
        lease_lost: 1,
        swept: 1,
        expiry_entries: 0,
    };
    assert_eq!(stats, expected);
    assert!(store.is_empty());
}

/// Every duration setting at the extremes: zero is refused by name, `Duration::MAX` is
/// accepted and saturates (a lease or result that never ends), the clock saturates.
#[test]
fn durations_at_zero_and_max() {
    for (name, builder) in [
        ("lease", StoreConfig::builder().lease(std::time::Duration::ZERO)),
        ("result_ttl", StoreConfig::builder().result_ttl(std::time::Duration::ZERO)),
    ] {
        let refused = builder.build();
        assert!(
            matches!(&refused, Err(e) if e.setting == name && e.accepted == "at least 1ms"),
            "{refused:?}"
        );
    }
    let max = std::time::Duration::MAX;
    let config = StoreConfig::builder().lease(max).result_ttl(max).build().expect("valid");
    let clock = std::sync::Arc::new(ManualClock::new(Timestamp::from_millis(5)));
    let store = MemoryStore::<u64>::with_clock(config, clock.clone());
    let key = ScopedKey::parse("s", "k").expect("key");
    let fp = idem_core::Fingerprint::builder("t").finish();
    let Claim::Acquired(lease) = store.claim(&key, &fp).expect("claim") else { panic!() };
    assert_eq!(lease.expires_at(), Timestamp::from_millis(u64::MAX), "saturated");
    store.complete(&lease, 9).expect("complete");
    let century = std::time::Duration::from_secs(100 * 365 * 24 * 3600);
    clock.advance(century);
    assert_eq!(store.claim(&key, &fp).expect("claim"), Claim::Replay(9), "never expires");
    let clock = ManualClock::new(Timestamp::from_millis(5));
    clock.advance(max);
    clock.advance(max);
    assert_eq!(idem_core::Clock::now(&clock), Timestamp::from_millis(u64::MAX), "saturates");
}
