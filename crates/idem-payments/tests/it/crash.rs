//! Crash windows: a worker dies at each point of the protocol; the gateway's charge
//! counter for the key stays at 1 and every retry gets the original answer.

use std::sync::Arc;

use idem_core::{Claim, KeyStore, ManualClock};
use idem_payments::{Fault, Gateway, GatewayKey, PayError, PaymentOutcome, SimulatedGateway};

use crate::{LEASE, charges, key, processor, request};

#[test]
fn crash_after_claim_before_charge() {
    let (p, clock) = processor();
    let (k, r) = (key("k"), request(10));
    let scoped = p.scoped_key(&k, &r).expect("scope");
    // The worker claims and dies before charging.
    let Claim::Acquired(_lost) = p.store().claim(&scoped, &r.fingerprint()).expect("claim") else {
        panic!("fresh key")
    };
    assert!(matches!(p.pay(&k, &r), Err(PayError::InProgress { .. })));
    clock.advance(LEASE);
    let report = p.reconcile(10);
    assert_eq!((report.released, report.completed), (1, 0), "never charged: released");
    assert!(!p.pay(&k, &r).expect("the retry charges").replayed);
    assert_eq!(charges(&p, &k, &r), 1);
}

#[test]
fn crash_after_charge_before_record_is_settled_by_reconcile() {
    let (p, clock) = processor();
    let (k, r) = (key("k"), request(10));
    let scoped = p.scoped_key(&k, &r).expect("scope");
    let Claim::Acquired(_lost) = p.store().claim(&scoped, &r.fingerprint()).expect("claim") else {
        panic!("fresh key")
    };
    // The worker charges and dies before storing the outcome: the ambiguous window.
    let charge = p.gateway().charge(&GatewayKey::derive(&scoped), &r).expect("charged");
    clock.advance(LEASE);
    let report = p.reconcile(10);
    assert_eq!((report.completed, report.released), (1, 0));
    let retry = p.pay(&k, &r).expect("replay");
    assert_eq!((retry.outcome, retry.replayed), (PaymentOutcome::Charged(charge), true));
    assert_eq!(charges(&p, &k, &r), 1);
}

#[test]
fn crash_after_record_before_reply_replays() {
    let (p, _) = processor();
    let (k, r) = (key("k"), request(10));
    let first = p.pay(&k, &r).expect("pay"); // the reply is lost on its way to the client
    let retry = p.pay(&k, &r).expect("the client retries");
    assert_eq!((retry.outcome, retry.replayed), (first.outcome, true));
    assert_eq!(charges(&p, &k, &r), 1);
}

#[test]
fn a_stale_workers_late_completion_is_refused() {
    let (p, clock) = processor();
    let (k, r) = (key("k"), request(10));
    let scoped = p.scoped_key(&k, &r).expect("scope");
    let Claim::Acquired(stale) = p.store().claim(&scoped, &r.fingerprint()).expect("claim") else {
        panic!("fresh key")
    };
    clock.advance(LEASE);
    let paid = p.pay(&k, &r).expect("a retry recovers and charges");
    let late = p.store().complete(&stale, PaymentOutcome::Declined("stale".into()));
    assert!(matches!(late, Err(idem_core::StoreError::LeaseLost { .. })));
    assert_eq!(p.pay(&k, &r).expect("replay").outcome, paid.outcome);
    assert_eq!(charges(&p, &k, &r), 1);
}

#[test]
fn reconcile_leaves_unknown_claims_and_reports_them() {
    use std::sync::Arc;
    use std::time::Duration;
    let clock = Arc::new(idem_core::ManualClock::new(idem_core::Timestamp::from_millis(1_000_000)));
    let gateway = idem_payments::SimulatedGateway::new()
        .forgetting_after(Duration::from_secs(10), clock.clone());
    let config = idem_core::StoreConfig::builder().lease(LEASE).build().expect("valid");
    let store = idem_core::MemoryStore::with_clock(config, clock.clone());
    let p = idem_payments::Processor::new("shop", gateway, store).expect("valid");
    let (k, r) = (key("k"), request(10));
    p.gateway().inject(Fault::ChargeThenTimeout);
    assert!(matches!(p.pay(&k, &r), Err(PayError::Pending(_))));
    clock.advance(LEASE); // past the gateway's 10 s memory: it cannot say any more
    let report = p.reconcile(10);
    assert_eq!(report.unresolved.len(), 1, "{report:?}");
    assert!(
        matches!(p.pay(&k, &r), Err(PayError::InProgress { .. })),
        "still pending, not recharged"
    );
    clock.advance(LEASE);
    assert!(
        matches!(p.pay(&k, &r), Err(PayError::Pending(_))),
        "a recovery does not charge blindly"
    );
    assert_eq!(charges(&p, &k, &r), 1);
}

/// A store that records which thread completed each lease, fails the completes of one
/// key (`broken`) as a full disk would, and fails every listing of pending claims while
/// `listing_broken` is set.
#[derive(Debug)]
struct Witness {
    inner: std::sync::Arc<idem_core::MemoryStore<PaymentOutcome>>,
    completed_by: std::sync::Mutex<Vec<std::thread::ThreadId>>,
    broken: Option<idem_core::ScopedKey>,
    listing_broken: std::sync::atomic::AtomicBool,
}

impl Witness {
    fn new(inner: std::sync::Arc<idem_core::MemoryStore<PaymentOutcome>>) -> Self {
        let (completed_by, listing_broken) = Default::default();
        Self { inner, completed_by, broken: None, listing_broken }
    }
}

impl KeyStore<PaymentOutcome> for Witness {
    fn claim(
        &self,
        key: &idem_core::ScopedKey,
        fp: &idem_core::Fingerprint,
    ) -> Result<Claim<PaymentOutcome>, idem_core::StoreError> {
        self.inner.claim(key, fp)
    }
    fn complete(
        &self,
        lease: &idem_core::Lease,
        result: PaymentOutcome,
    ) -> Result<(), idem_core::StoreError> {
        if self.broken.as_ref() == Some(lease.key()) {
            return Err(idem_core::StoreError::Storage("disk full".into()));
        }
        self.inner.complete(lease, result)?;
        self.completed_by.lock().expect("lock").push(std::thread::current().id());
        Ok(())
    }
    fn release(&self, lease: &idem_core::Lease) -> Result<(), idem_core::StoreError> {
        self.inner.release(lease)
    }
    fn renew(&self, lease: &idem_core::Lease) -> Result<idem_core::Lease, idem_core::StoreError> {
        self.inner.renew(lease)
    }
    fn lease(&self) -> std::time::Duration {
        self.inner.lease()
    }

    fn result_ttl(&self) -> std::time::Duration {
        self.inner.result_ttl()
    }
    fn sweep(&self) -> Result<usize, idem_core::StoreError> {
        self.inner.sweep()
    }
    fn pending(&self, max: usize) -> Result<Vec<idem_core::PendingClaim>, idem_core::StoreError> {
        if self.listing_broken.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(idem_core::StoreError::Storage("index unreadable".into()));
        }
        self.inner.pending(max)
    }
    fn lookup(
        &self,
        key: &idem_core::ScopedKey,
        fp: &idem_core::Fingerprint,
    ) -> Result<idem_core::KeyState<PaymentOutcome>, idem_core::StoreError> {
        self.inner.lookup(key, fp)
    }
}

/// A processor over a [`Witness`] store on a manual clock.
fn witnessed() -> (idem_payments::Processor<SimulatedGateway, Witness>, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(idem_core::Timestamp::from_millis(1_000_000)));
    let config = idem_core::StoreConfig::builder().lease(LEASE).build().expect("valid");
    let inner = Arc::new(idem_core::MemoryStore::with_clock(config, clock.clone()));
    let p = idem_payments::Processor::new("shop", SimulatedGateway::new(), Witness::new(inner));
    (p.expect("valid"), clock)
}

/// A reconcile and a client retry race for one pending claim, many rounds so that both
/// orders occur. Exactly one of them settles it (one completion in the store), the
/// report says whether it was the reconciler, and the other is answered, not charged.
#[test]
fn reconcile_and_a_client_retry_race_safely() {
    for round in 0..50 {
        let (p, clock) = witnessed();
        let (k, r) = (key("k"), request(10));
        p.gateway().inject(Fault::ChargeThenTimeout);
        assert!(matches!(p.pay(&k, &r), Err(PayError::Pending(_))));
        clock.advance(LEASE);
        let (report, retry, retry_thread) = std::thread::scope(|s| {
            let retry = s.spawn(|| (p.pay(&k, &r), std::thread::current().id()));
            let report = p.reconcile(10);
            let (retry, id) = retry.join().expect("retry thread");
            (report, retry, id)
        });
        let completed_by = p.store().completed_by.lock().expect("lock").clone();
        assert_eq!(completed_by.len(), 1, "round {round}: settled once: {report:?} {retry:?}");
        let by_retry = completed_by[0] == retry_thread;
        assert_eq!(report.completed, usize::from(!by_retry), "round {round}: {report:?}");
        match &retry {
            Ok(pay) => assert!(pay.replayed, "round {round}: {retry:?}"),
            Err(PayError::InProgress { .. }) => assert!(!by_retry, "round {round}"),
            Err(other) => panic!("round {round}: {other:?}"),
        }
        let scoped = p.scoped_key(&k, &r).expect("scope");
        assert_eq!(p.gateway().charges(&GatewayKey::derive(&scoped)), 1, "round {round}");
    }
}

/// A store whose `complete` fails for one key: the reconciler reports that claim as
/// failed and settles the rest of the batch.
#[test]
fn one_failing_claim_does_not_stop_the_batch() {
    let clock = Arc::new(ManualClock::new(idem_core::Timestamp::from_millis(1_000_000)));
    let config = idem_core::StoreConfig::builder().lease(LEASE).build().expect("valid");
    let inner = Arc::new(idem_core::MemoryStore::with_clock(config, clock.clone()));
    let requests: Vec<_> = (0..3).map(|i| (key(&format!("k{i}")), request(10 + i))).collect();
    let probe = idem_payments::Processor::new("shop", SimulatedGateway::new(), inner.clone())
        .expect("valid");
    let broken = probe.scoped_key(&requests[1].0, &requests[1].1).expect("scope");
    let store = Witness { broken: Some(broken.clone()), ..Witness::new(inner) };
    let p = idem_payments::Processor::new("shop", SimulatedGateway::new(), store).expect("valid");
    for (k, r) in &requests {
        p.gateway().inject(Fault::ChargeThenTimeout);
        assert!(matches!(p.pay(k, r), Err(PayError::Pending(_))));
    }
    clock.advance(LEASE);
    let report = p.reconcile(10);
    assert_eq!(report.completed, 2, "{report:?}");
    assert_eq!(report.failed.len(), 1);
    assert_eq!(report.failed[0].key, broken);
    assert!(report.failed[0].error.contains("disk full"), "{report:?}");
    assert_eq!(report.listing_failed, None);
}

/// A store that cannot list its pending claims: the report says the listing failed, with
/// the store's error, and names no claim; the claim stays pending and the next pass, on a
/// store that lists again, settles it.
#[test]
fn a_failed_listing_is_reported_as_the_listing() {
    let (p, clock) = witnessed();
    let (k, r) = (key("k"), request(10));
    p.gateway().inject(Fault::ChargeThenTimeout);
    assert!(matches!(p.pay(&k, &r), Err(PayError::Pending(_))));
    clock.advance(LEASE);
    p.store().listing_broken.store(true, std::sync::atomic::Ordering::SeqCst);
    let report = p.reconcile(10);
    let error = report.listing_failed.as_deref().expect("the listing failed");
    assert!(error.contains("index unreadable"), "{report:?}");
    assert!(report.failed.is_empty() && report.unresolved.is_empty(), "{report:?}");
    assert_eq!((report.completed, report.released, report.skipped), (0, 0, 0));
    p.store().listing_broken.store(false, std::sync::atomic::Ordering::SeqCst);
    let report = p.reconcile(10);
    assert_eq!((report.completed, report.listing_failed.as_deref()), (1, None), "{report:?}");
    let scoped = p.scoped_key(&k, &r).expect("scope");
    assert_eq!(p.gateway().charges(&GatewayKey::derive(&scoped)), 1);
}
