//! Memory stays flat under long runs: what the store keeps is bounded by its live
//! records, not by how many operations it has seen.

use std::sync::Arc;

use idem_core::{Claim, Fingerprint, KeyStore, ManualClock, MemoryStore, ScopedKey};
use idem_core::{StoreConfig, Timestamp};

/// One key claimed, completed and left to expire, a million times: one live record at a
/// time, and the expiry index stays that size (it held one entry per cycle before
/// completions swept as they went).
#[test]
fn a_million_cycles_on_one_key_keep_the_store_flat() {
    let clock = Arc::new(ManualClock::new(Timestamp::from_millis(0)));
    let store = MemoryStore::<u64>::with_clock(StoreConfig::default(), clock.clone());
    let key = ScopedKey::parse("tenant", "k").expect("key");
    let fingerprint = Fingerprint::builder("cycle").finish();
    for cycle in 0..1_000_000u64 {
        let Claim::Acquired(lease) = store.claim(&key, &fingerprint).expect("claim") else {
            panic!("cycle {cycle}: the expired result counts as absent")
        };
        store.complete(&lease, cycle).expect("complete");
        clock.advance(StoreConfig::RESULT_TTL_DEFAULT);
        if cycle % 100_000 == 0 {
            let stats = store.stats();
            assert!(stats.records <= 1 && stats.expiry_entries <= 2, "cycle {cycle}: {stats:?}");
        }
    }
    let stats = store.stats();
    assert!(stats.records <= 1 && stats.expiry_entries <= 2, "{stats:?}");
    store.assert_invariants();
}
