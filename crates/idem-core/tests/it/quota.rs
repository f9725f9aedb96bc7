//! The scope quota (`StoreConfig::scope_in_flight_max`) counts claims in flight, not
//! claims ever made: however a claim ends (released, completed, released after a
//! recovery), its place in the scope's quota is given back, so a scope that settles every
//! claim is never refused, however many claims it makes.

use std::sync::Arc;

use idem_core::{Claim, Fingerprint, KeyStore, Lease, ManualClock, MemoryStore, ScopedKey};
use idem_core::{StoreConfig, StoreError, Timestamp};

const QUOTA: usize = 2;

/// How a claim ends.
#[derive(Debug, Clone, Copy)]
enum Settle {
    Release,
    Complete,
    /// Its lease runs out, the next claim recovers it, and that lease is released.
    RecoverThenRelease,
}

fn store() -> (MemoryStore<String>, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(Timestamp::from_millis(1_700_000_000_000)));
    let config = StoreConfig::builder().scope_in_flight_max(QUOTA).build().expect("valid");
    (MemoryStore::with_clock(config, clock.clone()), clock)
}

fn key(n: usize) -> ScopedKey {
    ScopedKey::parse("tenant", &format!("k{n}")).expect("key")
}

fn request() -> Fingerprint {
    Fingerprint::builder("quota").finish()
}

#[track_caller]
fn acquire(store: &MemoryStore<String>, n: usize, why: &str) -> Lease {
    match store.claim(&key(n), &request()) {
        Ok(Claim::Acquired(lease)) => lease,
        other => panic!("claim {n} ({why}): expected Acquired, got {other:?}"),
    }
}

fn settle(store: &MemoryStore<String>, clock: &ManualClock, lease: &Lease, how: Settle) {
    match how {
        Settle::Release => store.release(lease).expect("release"),
        Settle::Complete => store.complete(lease, "done".into()).expect("complete"),
        Settle::RecoverThenRelease => {
            clock.advance(StoreConfig::LEASE_DEFAULT);
            let Ok(Claim::Recover(recovered)) = store.claim(lease.key(), &request()) else {
                panic!("{}: an expired lease is recovered", lease.key())
            };
            store.release(&recovered).expect("release the recovered lease");
        }
    }
}

#[test]
fn every_settled_claim_gives_back_its_place_in_the_scope_quota() {
    for how in [Settle::Release, Settle::Complete, Settle::RecoverThenRelease] {
        let (store, clock) = store();
        // Three times the quota, one claim at a time: each is acquired.
        for n in 0..3 * QUOTA {
            let lease = acquire(&store, n, &format!("after {n} settled by {how:?}"));
            settle(&store, &clock, &lease, how);
        }
        // At the quota, a further claim is refused until one of them settles.
        let held: Vec<Lease> = (100..100 + QUOTA).map(|n| acquire(&store, n, "filling")).collect();
        let refused = store.claim(&key(200), &request());
        assert!(matches!(refused, Err(StoreError::ScopeQuota { .. })), "{how:?}: {refused:?}");
        settle(&store, &clock, &held[0], how);
        acquire(&store, 200, &format!("after one of the full quota settled by {how:?}"));
        store.assert_invariants();
    }
}
