//! Loom models of the store's races. Run with `cargo xtask loom idem-core`.
//!
//! Each model opens with the race it covers and the invariant it asserts. The store runs
//! on loom's mutex, condition variable and atomics (the crate's `sync` shim), so loom
//! explores every interleaving of the real code.
#![cfg(loom)]

use std::time::Duration;

use idem_core::{
    Claim, Fingerprint, Forgotten, KeyAdmin, KeyStore, ManualClock, MemoryStore, ScopedKey,
    StoreConfig, StoreError, Timestamp,
};
use loom::sync::Arc;
use loom::thread;

const LEASE: Duration = Duration::from_secs(30);

/// A small store and the clock it reads (a std `Arc`: only its atomic is modelled).
fn store() -> (Arc<MemoryStore<u32>>, std::sync::Arc<ManualClock>) {
    let clock = std::sync::Arc::new(ManualClock::new(Timestamp::from_millis(0)));
    let config = StoreConfig::builder().lease(LEASE).capacity(4).build().expect("valid config");
    (Arc::new(MemoryStore::with_clock(config, clock.clone())), clock)
}

fn key() -> ScopedKey {
    ScopedKey::parse("tenant", "k").expect("valid key")
}

fn request() -> Fingerprint {
    Fingerprint::builder("loom").u64("n", 1).finish()
}

/// A store whose one key's holder renews, on a thread of its own, just as its lease has
/// run out; the thread answers the renewal and the lease it renewed.
fn renewing_as_the_lease_runs_out() -> (Arc<MemoryStore<u32>>, thread::JoinHandle<Renewal>) {
    let (store, clock) = store();
    let Claim::Acquired(held) = store.claim(&key(), &request()).expect("claim") else {
        panic!("an absent key is acquired");
    };
    clock.advance(LEASE);
    let holder = {
        let store = store.clone();
        thread::spawn(move || (store.renew(&held), held))
    };
    (store, holder)
}

type Renewal = (Result<idem_core::Lease, StoreError>, idem_core::Lease);

/// Race: two claimers of one absent key (a check-then-insert window). The first completes
/// if it wins.
/// Invariant: exactly one `Acquired`; the other sees `InFlight`, or `Replay` of the
/// winner's result.
#[test]
fn two_claimers_one_owner() {
    loom::model(|| {
        let (store, _clock) = store();
        let first = {
            let store = store.clone();
            thread::spawn(move || {
                let claim = store.claim(&key(), &request()).expect("claim");
                if let Claim::Acquired(lease) = &claim {
                    store.complete(lease, 7).expect("the owner completes");
                }
                claim
            })
        };
        let second = store.claim(&key(), &request()).expect("claim");
        let first = first.join().expect("claimer thread");
        let owners = [&first, &second].iter().filter(|c| matches!(c, Claim::Acquired(_))).count();
        assert_eq!(owners, 1, "first {first:?}, second {second:?}");
        assert!(
            matches!(second, Claim::Acquired(_) | Claim::InFlight { .. } | Claim::Replay(7)),
            "second saw {second:?}"
        );
        store.assert_invariants();
    });
}

/// Race: a waiting claimer and the holder's complete (a lost wake-up if the completion
/// lands between the waiter's check and its sleep).
/// Invariant: the waiter always wakes and sees the completed result. Loom's condition
/// variable never times out, so a lost wake-up is reported as a deadlock.
#[test]
fn waiter_wakes_on_complete() {
    loom::model(|| {
        let (store, _clock) = store();
        let Claim::Acquired(lease) = store.claim(&key(), &request()).expect("claim") else {
            panic!("an absent key is acquired");
        };
        let waiter = {
            let store = store.clone();
            thread::spawn(move || {
                store.claim_wait(&key(), &request(), Duration::from_secs(3600)).expect("wait")
            })
        };
        store.complete(&lease, 9).expect("the holder completes");
        assert_eq!(waiter.join().expect("waiter thread"), Claim::Replay(9));
    });
}

/// Race: the holder of a run-out lease completes while another caller claims the key
/// and recovers it (the fencing window).
/// Invariant: exactly one of them wins. If the stale complete landed first, the claimer
/// replays its result; if the recovery landed first, the stale complete is `LeaseLost`
/// and the recovering holder's result is the one stored.
#[test]
fn stale_complete_races_recovery() {
    loom::model(|| {
        let (store, clock) = store();
        let Claim::Acquired(stale) = store.claim(&key(), &request()).expect("claim") else {
            panic!("an absent key is acquired");
        };
        clock.advance(LEASE);
        let late_holder = {
            let store = store.clone();
            thread::spawn(move || store.complete(&stale, 1))
        };
        let claim = store.claim(&key(), &request()).expect("claim");
        let completed = late_holder.join().expect("holder thread");
        match (&completed, claim) {
            (Ok(()), Claim::Replay(1)) => {}
            (Err(StoreError::LeaseLost { .. }), Claim::Recover(fresh)) => {
                store.complete(&fresh, 2).expect("the recovering holder completes");
                assert_eq!(store.claim(&key(), &request()).expect("claim"), Claim::Replay(2));
            }
            (completed, claim) => panic!("both or neither won: {completed:?} / {claim:?}"),
        }
        store.assert_invariants();
    });
}

/// Race: a holder renews its lease just as it runs out, while another caller claims the
/// key (and would recover it). Invariant: exactly one of them holds the key afterwards:
/// either the renewal landed first (the claim answers in flight and the holder's complete
/// is stored) or the recovery did (the renewal is `LeaseLost` and the holder's complete
/// is refused).
#[test]
fn renewal_races_recovery() {
    loom::model(|| {
        let (store, holder) = renewing_as_the_lease_runs_out();
        let claim = store.claim(&key(), &request()).expect("claim");
        let (renewed, held) = holder.join().expect("holder thread");
        match (renewed, claim) {
            (Ok(renewed), Claim::InFlight { .. }) => {
                store.complete(&renewed, 1).expect("the renewed holder completes");
                assert_eq!(store.claim(&key(), &request()).expect("claim"), Claim::Replay(1));
            }
            (Err(StoreError::LeaseLost { .. }), Claim::Recover(fresh)) => {
                let refused = store.complete(&held, 1);
                assert!(matches!(refused, Err(StoreError::LeaseLost { .. })), "{refused:?}");
                store.complete(&fresh, 2).expect("the recovering holder completes");
            }
            (renewed, claim) => panic!("both or neither hold the key: {renewed:?} / {claim:?}"),
        }
        store.assert_invariants();
    });
}

/// Race: an operator forgets a key whose holder's lease has just run out, while the
/// holder renews it. Invariant: either the renewal lands first (the forget sees a live
/// holder and refuses, and the holder completes) or the forget does (the pending claim is
/// removed, the renewal is refused, and the next claim acquires the key afresh): never a
/// forgotten key whose holder still holds a lease.
#[test]
fn forget_races_the_holder() {
    loom::model(|| {
        let (store, holder) = renewing_as_the_lease_runs_out();
        let forgotten = store.forget(&key(), "operator", "stuck").expect("forget");
        let (renewed, held) = holder.join().expect("holder thread");
        match (renewed, forgotten) {
            (Ok(renewed), Forgotten::HolderLive { .. }) => {
                store.complete(&renewed, 1).expect("the renewed holder completes");
                assert_eq!(store.claim(&key(), &request()).expect("claim"), Claim::Replay(1));
            }
            (Err(StoreError::LeaseLost { .. }), Forgotten::Removed(_)) => {
                let refused = store.complete(&held, 1);
                assert!(matches!(refused, Err(StoreError::LeaseLost { .. })), "{refused:?}");
                let fresh = store.claim(&key(), &request()).expect("claim");
                assert!(matches!(fresh, Claim::Acquired(_)), "{fresh:?}");
            }
            (renewed, forgotten) => {
                panic!("forgotten beside a holder: {renewed:?} / {forgotten:?}")
            }
        }
        store.assert_invariants();
    });
}

/// Race: two claims of different keys in one scope, with a quota of one claim in flight
/// per scope; the keys may sit in different shards, so no shard lock orders them.
/// Invariant: exactly one claim is in flight afterwards, the other was refused with
/// `ScopeQuota` and left no record.
#[test]
fn scope_quota_holds_across_shards() {
    loom::model(|| {
        let clock = std::sync::Arc::new(ManualClock::new(Timestamp::from_millis(0)));
        let config = StoreConfig::builder().scope_in_flight_max(1).build().expect("valid");
        let store = Arc::new(MemoryStore::<u32>::with_clock(config, clock));
        let claim = |store: &MemoryStore<u32>, name: &str| {
            let key = ScopedKey::parse("tenant", name).expect("valid key");
            match store.claim(&key, &request()) {
                Ok(Claim::Acquired(_)) => true,
                Err(StoreError::ScopeQuota { in_flight_max: 1, .. }) => false,
                other => panic!("{name}: {other:?}"),
            }
        };
        let other = {
            let store = store.clone();
            thread::spawn(move || claim(&store, "a"))
        };
        let mine = claim(&store, "b");
        let theirs = other.join().expect("claimer thread");
        assert!(mine ^ theirs, "exactly one gets the quota: {mine} {theirs}");
        assert_eq!(store.len(), 1, "the refusal left nothing");
        store.assert_invariants();
    });
}
