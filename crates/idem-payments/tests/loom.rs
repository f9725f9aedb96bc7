//! Loom models of the processor's own race: the lease renewer against the end of a
//! gateway call. Run with `cargo xtask loom idem-payments`.
//!
//! The renewer's registry and the store run on loom's primitives (`--cfg loom` reaches
//! idem-core's `sync` shim too), so loom explores every interleaving of the real code. The
//! store's own races (two claimers, a stale holder against a recovery, a renewal against a
//! recovery) are idem-core's models.
#![cfg(loom)]

use std::sync::Arc;
use std::time::Duration;

use idem_core::{
    Claim, Fingerprint, KeyAdmin, KeyStore, ManualClock, MemoryStore, RecordState, ScopedKey,
    StoreConfig, Timestamp,
};
use idem_payments::{PaymentOutcome, Registry};
use loom::thread;

const LEASE: Duration = Duration::from_secs(30);

/// A store on a manual clock, its one key claimed: the store and the lease.
fn claimed() -> (Arc<MemoryStore<PaymentOutcome>>, idem_core::Lease) {
    let clock = Arc::new(ManualClock::new(Timestamp::from_millis(0)));
    let config = StoreConfig::builder().lease(LEASE).capacity(4).build().expect("valid config");
    let store = Arc::new(MemoryStore::with_clock(config, clock));
    let key = ScopedKey::parse("shop/cus_1", "k").expect("valid key");
    let fingerprint = Fingerprint::builder("loom").u64("n", 1).finish();
    let Ok(Claim::Acquired(lease)) = store.claim(&key, &fingerprint) else {
        panic!("a fresh key is acquired");
    };
    (store, lease)
}

/// Race: a slow call's renewer has read its held lease and renews it while the gateway
/// call ends: the call releases its hold and completes (or leaves the claim pending).
/// Invariant: the hold is not put back by the renewal's outcome (nothing is held once both
/// are done, so a claim left pending is not renewed for ever), the completion stands
/// (a renewal after it is refused and changes nothing), and a renewal that landed while the
/// hold was still there is counted once.
#[test]
fn a_renewal_racing_the_end_of_its_call_is_not_put_back() {
    loom::model(|| {
        let (store, lease) = claimed();
        let registry = Arc::new(Registry::default());
        let id = registry.hold(lease.clone(), Duration::ZERO);
        let renewing = {
            let (registry, store) = (registry.clone(), store.clone());
            thread::spawn(move || {
                if let Some(lease) = registry.lease_of(id) {
                    registry.renewed(id, store.renew(&lease), LEASE / 4, LEASE / 16);
                }
            })
        };
        registry.release(id);
        let outcome = PaymentOutcome::Declined("card_declined".into());
        store.complete(&lease, outcome).expect("the holder completes");
        renewing.join().expect("the renewer");
        assert_eq!(registry.held(), 0, "a released hold was put back");
        let renewals = registry.renewals();
        assert!(renewals.renewed + renewals.lost <= 1, "one renewal at most: {renewals:?}");
        assert_eq!(renewals.failed, 0);
        let record = store.inspect(lease.key()).expect("inspects").expect("a record");
        assert!(matches!(record.state, RecordState::Finished { .. }), "{record:?}");
    });
}
