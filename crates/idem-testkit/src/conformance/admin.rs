//! The operator's calls every store must answer alike: [`KeyAdmin::inspect`] and
//! [`KeyAdmin::forget`].

use std::sync::Arc;

use idem_core::{
    Claim, Forgotten, KeyAdmin, KeyRecord, KeyStore, ManualClock, RecordState, StoreConfig,
    StoreError,
};

use super::{LEASE, START, TTL, acquire, claim, fixture, key, recover, request, with_scope_quota};

#[track_caller]
fn inspect<S: KeyAdmin>(store: &S, k: &idem_core::ScopedKey) -> Option<KeyRecord> {
    store.inspect(k).unwrap_or_else(|e| panic!("inspect of {k} failed: {e}"))
}

#[track_caller]
fn forget<S: KeyAdmin>(store: &S, k: &idem_core::ScopedKey) -> Forgotten {
    store.forget(k, "the suite", "a test").unwrap_or_else(|e| panic!("forget of {k} failed: {e}"))
}

/// Inspect shows each state with its deadline and the claiming request's fingerprint,
/// whatever fingerprint asks, and changes nothing: absent (no record left behind), in
/// flight, pending (not recovered by looking), finished, absent after the TTL.
pub fn inspect_shows_every_state<S: KeyStore<String> + KeyAdmin>(
    make: &dyn Fn(StoreConfig, Arc<ManualClock>) -> S,
) {
    let f = fixture(make, 1);
    let k = key("s", "k");
    for _ in 0..2 {
        assert_eq!(inspect(&f.store, &k), None, "an absent key");
    }
    let first = acquire(&f.store, &k, 7);
    let in_flight = RecordState::InFlight { lease_expires_at: START.saturating_add(LEASE) };
    let seen = KeyRecord { fingerprint: request(7), state: in_flight };
    assert_eq!(inspect(&f.store, &k), Some(seen));
    f.clock.advance(LEASE);
    let pending = RecordState::Pending { lease_expired_at: START.saturating_add(LEASE) };
    assert_eq!(inspect(&f.store, &k).map(|r| r.state), Some(pending));
    let second = recover(&f.store, &k, 7);
    assert_eq!(second.token().get(), first.token().get() + 1, "inspecting spent no token");
    f.store.complete(&second, "done".into()).expect("complete");
    let expires_at = START.saturating_add(LEASE).saturating_add(TTL);
    let finished = RecordState::Finished { expires_at };
    assert_eq!(inspect(&f.store, &k), Some(KeyRecord { fingerprint: request(7), state: finished }));
    f.clock.advance(TTL);
    assert_eq!(inspect(&f.store, &k), None, "an expired result is absent");
}

/// Forgetting a finished result removes it: the next claim, with any fingerprint, is a
/// fresh `Acquired` with a higher token; the record no longer counts against the
/// capacity; a second forget finds nothing.
pub fn forget_removes_a_finished_result<S: KeyStore<String> + KeyAdmin>(
    make: &dyn Fn(StoreConfig, Arc<ManualClock>) -> S,
) {
    let f = fixture(make, 1);
    let k = key("s", "poisoned");
    let first = acquire(&f.store, &k, 1);
    f.store.complete(&first, "a 500 a bug stored".into()).expect("complete");
    let record = inspect(&f.store, &k).expect("finished");
    assert_eq!(forget(&f.store, &k), Forgotten::Removed(record));
    assert_eq!(inspect(&f.store, &k), None, "forgotten");
    assert_eq!(forget(&f.store, &k), Forgotten::Absent, "a second forget finds nothing");
    let other = key("s", "other");
    let room = acquire(&f.store, &other, 1);
    f.store.release(&room).expect("release");
    let again = acquire(&f.store, &k, 2);
    assert!(again.token().get() > first.token().get(), "{again:?} after {first:?}");
}

/// A live holder is never forgotten: the answer names its deadline and the holder
/// completes as if nothing happened. An absent key is `Absent`.
pub fn forget_refuses_a_live_holder<S: KeyStore<String> + KeyAdmin>(
    make: &dyn Fn(StoreConfig, Arc<ManualClock>) -> S,
) {
    let f = fixture(make, 100);
    assert_eq!(forget(&f.store, &key("s", "never")), Forgotten::Absent);
    let k = key("s", "held");
    let lease = acquire(&f.store, &k, 1);
    f.clock.advance(LEASE / 2);
    let (lease_expires_at, retry_after) = (START.saturating_add(LEASE), LEASE / 2);
    let live = Forgotten::HolderLive { lease_expires_at, retry_after };
    assert_eq!(forget(&f.store, &k), live);
    assert_eq!(claim(&f.store, &k, 1), Claim::InFlight { retry_after: LEASE / 2 });
    f.store.complete(&lease, "done".into()).expect("the holder still completes");
    assert_eq!(claim(&f.store, &k, 1), Claim::Replay("done".into()));
}

/// Forgetting a pending claim (its lease ran out) removes it: the next claim is a fresh
/// `Acquired`, not a recovery; the old holder can neither renew nor complete; the claim
/// no longer counts against its scope's quota.
pub fn forget_of_a_pending_claim_fences_its_holder<S: KeyStore<String> + KeyAdmin>(
    make: &dyn Fn(StoreConfig, Arc<ManualClock>) -> S,
) {
    let (store, clock) = with_scope_quota(make, 1);
    let k = key("s", "stuck");
    let old = acquire(&store, &k, 1);
    clock.advance(LEASE);
    let pending = RecordState::Pending { lease_expired_at: START.saturating_add(LEASE) };
    let removed = Forgotten::Removed(KeyRecord { fingerprint: request(1), state: pending });
    assert_eq!(forget(&store, &k), removed);
    let other = acquire(&store, &key("s", "next"), 1);
    store.release(&other).expect("release");
    let fresh = acquire(&store, &k, 1);
    let lost = |r: Result<(), StoreError>| matches!(r, Err(StoreError::LeaseLost { .. }));
    assert!(lost(store.renew(&old).map(drop)), "the forgotten holder must not renew");
    assert!(lost(store.complete(&old, "late".into())), "nor complete");
    store.complete(&fresh, "fresh".into()).expect("the new holder completes");
    assert_eq!(claim(&store, &k, 1), Claim::Replay("fresh".into()));
}

/// Forgetting a finished result gives back no place in its scope's quota of claims in
/// flight (a finished record holds none): with a quota of 1 and one claim in flight, a
/// new claim is still refused after the forget.
pub fn forget_of_a_finished_result_frees_no_quota<S: KeyStore<String> + KeyAdmin>(
    make: &dyn Fn(StoreConfig, Arc<ManualClock>) -> S,
) {
    let (store, _clock) = with_scope_quota(make, 1);
    let done = acquire(&store, &key("s", "done"), 1);
    store.complete(&done, "done".into()).expect("complete");
    let _held = acquire(&store, &key("s", "held"), 1);
    assert!(matches!(forget(&store, &key("s", "done")), Forgotten::Removed(_)));
    let refused = store.claim(&key("s", "third"), &request(1));
    assert!(matches!(refused, Err(StoreError::ScopeQuota { .. })), "{refused:?}");
}
