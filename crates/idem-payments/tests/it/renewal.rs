//! A gateway call slower than the lease: the processor renews its lease while the call
//! runs, so no reconcile or retry takes the key over and charges again; once the call
//! ends the renewals stop, so a claim left pending still runs out and is reconciled.
//!
//! The store is on the real clock with a short lease, and the gateway holds each charge
//! until the test opens it: the test waits for renewals (or for the claim to run out),
//! never for a time.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread;
use std::time::Duration;

use idem_core::{Claim, IdempotencyKey, KeyStore, Lease, MemoryStore, StoreConfig, StoreError};
use idem_payments::{
    Charge, ChargeId, Gateway, GatewayError, GatewayKey, Lookup, PayError, PaymentOutcome,
    PaymentRequest, Processor,
};
use idem_testkit::faulty::{Faulty, Op};
use parking_lot::{Condvar, Mutex};

use crate::{key, request};

/// Short enough for a test, long enough for a renewal every quarter of it.
const LEASE: Duration = Duration::from_millis(200);
/// How long a test waits for what the renewer (or the lease's end) should bring.
const WAIT_MAX: Duration = Duration::from_secs(20);

/// What a held charge answers once opened.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Then {
    Charge,
    /// Charges, and the answer is lost.
    ChargeAndLoseTheAnswer,
}

/// Which of its calls a [`HeldGateway`] holds until the test opens it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Holds {
    /// Every charge.
    Charges,
    /// The first lookup, its answer read before it is held (an answer in transit).
    FirstLookup,
    /// The first lookup, its answer read once it is let go (a gateway slow to look).
    FirstLookupReadAfter,
}

#[derive(Default)]
struct Gate {
    open: bool,
    started: u32,
    lookups: u32,
    charged: Vec<(GatewayKey, Charge)>,
}

/// A gateway that does not deduplicate by key (each `charge` charges) and holds some of
/// its calls until the test opens it.
struct HeldGateway {
    then: Then,
    holds: Holds,
    gate: Mutex<Gate>,
    opened: Condvar,
}

impl HeldGateway {
    fn new(then: Then) -> Self {
        Self::holding(then, Holds::Charges)
    }

    fn holding(then: Then, holds: Holds) -> Self {
        Self { then, holds, gate: Mutex::new(Gate::default()), opened: Condvar::new() }
    }

    fn wait_open(&self, gate: &mut parking_lot::MutexGuard<'_, Gate>) {
        while !gate.open {
            self.opened.wait(gate);
        }
    }

    fn open(&self) {
        self.gate.lock().open = true;
        self.opened.notify_all();
    }

    fn charges(&self) -> usize {
        self.gate.lock().charged.len()
    }
}

impl Gateway for HeldGateway {
    fn charge(&self, key: &GatewayKey, request: &PaymentRequest) -> Result<Charge, GatewayError> {
        let mut gate = self.gate.lock();
        gate.started += 1;
        if self.holds == Holds::Charges {
            self.wait_open(&mut gate);
        }
        let id = ChargeId(gate.charged.len() as u64 + 1);
        let (customer, amount) = (request.customer().to_owned(), request.amount());
        let charge = Charge { id, customer, amount, currency: request.currency() };
        gate.charged.push((key.clone(), charge.clone()));
        match self.then {
            Then::Charge => Ok(charge),
            Then::ChargeAndLoseTheAnswer => Err(GatewayError::Ambiguous("timed out".into())),
        }
    }

    fn lookup(&self, key: &GatewayKey) -> Lookup {
        let mut gate = self.gate.lock();
        let answer = |gate: &Gate| {
            let first = gate.charged.iter().find(|(charged, _)| charged == key);
            first.map_or(Lookup::NotCharged, |(_, charge)| Lookup::Charged(charge.clone()))
        };
        let before = answer(&gate);
        gate.lookups += 1;
        match self.holds {
            Holds::FirstLookup if gate.lookups == 1 => self.wait_open(&mut gate),
            Holds::FirstLookupReadAfter if gate.lookups == 1 => {
                self.wait_open(&mut gate);
                return answer(&gate);
            }
            _ => {}
        }
        before
    }

    fn set_refunded(&self, _charge: ChargeId) -> bool {
        false
    }
}

/// Opens the gate when the test ends, passed or failed, so no charge is left held.
struct OpenOnDrop(Arc<HeldGateway>);

impl Drop for OpenOnDrop {
    fn drop(&mut self) {
        self.0.open();
    }
}

type HeldProcessor = Processor<Arc<HeldGateway>, MemoryStore<PaymentOutcome>>;

fn processor(then: Then) -> (Arc<HeldProcessor>, Arc<HeldGateway>) {
    let config = StoreConfig::builder().lease(LEASE).build().expect("a valid lease");
    let gateway = Arc::new(HeldGateway::new(then));
    let processor = Processor::new("shop", gateway.clone(), MemoryStore::new(config));
    (Arc::new(processor.expect("a valid merchant")), gateway)
}

/// Pays on a thread of its own; waits until its charge is held at the gateway.
fn pay_held(
    p: &Arc<HeldProcessor>,
    gateway: &HeldGateway,
    k: &IdempotencyKey,
    r: &PaymentRequest,
) -> thread::JoinHandle<Result<idem_payments::Payment, PayError>> {
    pay_held_on(p, gateway, k, r)
}

/// As [`pay_held`], on a processor over any store.
fn pay_held_on<S: KeyStore<PaymentOutcome> + 'static>(
    p: &Arc<Processor<Arc<HeldGateway>, S>>,
    gateway: &HeldGateway,
    k: &IdempotencyKey,
    r: &PaymentRequest,
) -> thread::JoinHandle<Result<idem_payments::Payment, PayError>> {
    let (payer, k, r) = (p.clone(), k.clone(), r.clone());
    let paying = thread::spawn(move || payer.pay(&k, &r));
    idem_testkit::wait_until("the charge held at the gateway", WAIT_MAX, || {
        gateway.gate.lock().started == 1
    });
    paying
}

#[test]
fn a_charge_slower_than_the_lease_keeps_its_key_and_is_charged_once() {
    let (p, gateway) = processor(Then::Charge);
    let _open = OpenOnDrop(gateway.clone());
    let (k, r) = (key("slow-1"), request(2_500));
    let paying = pay_held(&p, &gateway, &k, &r);
    // Five renewals a quarter of the lease apart: more than a whole lease has passed since
    // the claim. Without them the claim runs out and is listed pending.
    idem_testkit::wait_until("five renewals, or the claim run out", WAIT_MAX, || {
        p.renewals().renewed >= 5 || !p.store().pending(1).expect("lists").is_empty()
    });
    assert!(p.store().pending(1).expect("lists").is_empty(), "the held claim ran out");
    let report = p.reconcile(10);
    assert_eq!((report.released, report.completed, report.skipped), (0, 0, 0), "{report:?}");
    assert!(matches!(p.pay(&k, &r), Err(PayError::InProgress { .. })), "a retry waits");
    gateway.open();
    let first = paying.join().expect("the payer").expect("pays");
    assert!(!first.replayed);
    let retry = p.pay(&k, &r).expect("replays");
    assert!(retry.replayed && retry.outcome == first.outcome);
    assert_eq!(gateway.charges(), 1, "charged once");
    assert_eq!((p.renewing(), p.renewals().lost, p.renewals().failed), (0, 0, 0));
}

#[test]
fn a_claim_left_pending_by_a_slow_call_is_no_longer_renewed_and_is_reconciled() {
    let (p, gateway) = processor(Then::ChargeAndLoseTheAnswer);
    let _open = OpenOnDrop(gateway.clone());
    let (k, r) = (key("slow-2"), request(900));
    let paying = pay_held(&p, &gateway, &k, &r);
    idem_testkit::wait_until("two renewals", WAIT_MAX, || p.renewals().renewed >= 2);
    gateway.open();
    assert!(matches!(paying.join().expect("the payer"), Err(PayError::Pending(_))));
    assert_eq!(p.renewing(), 0, "the call ended: its lease is held no more");
    // The renewals stopped with the call: the claim runs out and the reconciler settles it
    // from the gateway's record, without a second charge.
    idem_testkit::wait_until("the claim run out", WAIT_MAX, || {
        !p.store().pending(1).expect("lists").is_empty()
    });
    assert_eq!(p.reconcile(10).completed, 1);
    let retry = p.pay(&k, &r).expect("replays the reconciled charge");
    assert!(retry.replayed && matches!(retry.outcome, PaymentOutcome::Charged(_)));
    assert_eq!(gateway.charges(), 1, "charged once");
}

/// A processor on a held gateway and a store that runs `before_renew` before each
/// renewal.
type HookedProcessor = Arc<Processor<Arc<HeldGateway>, Faulty<MemoryStore<PaymentOutcome>>>>;

fn hooked<F>(then: Then, before_renew: F) -> (HookedProcessor, Arc<HeldGateway>)
where
    F: Fn(&Lease) -> Result<(), StoreError> + Send + Sync + 'static,
{
    let config = StoreConfig::builder().lease(LEASE).build().expect("a valid lease");
    let gateway = Arc::new(HeldGateway::new(then));
    let store = Faulty::new(MemoryStore::new(config)).before_renew(before_renew);
    let processor = Processor::new("shop", gateway.clone(), store).expect("a valid merchant");
    (Arc::new(processor), gateway)
}

#[test]
fn a_renewal_the_store_holds_for_one_call_delays_no_other_calls_renewals() {
    let opened = Arc::new((Mutex::new(false), Condvar::new()));
    let (victim_renewals, slow_held) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
    let (hold, count, held) = (opened.clone(), victim_renewals.clone(), slow_held.clone());
    let (p, gateway) = hooked(Then::Charge, move |lease: &Lease| {
        if lease.key().key().as_str() == "slow" {
            held.fetch_add(1, Ordering::SeqCst);
            let mut open = hold.0.lock();
            while !*open {
                hold.1.wait(&mut open);
            }
        } else {
            count.fetch_add(1, Ordering::SeqCst);
        }
        Ok(())
    });
    let _open = OpenOnDrop(gateway.clone());
    let _renewals_go_on = OnDrop(move || {
        *opened.0.lock() = true;
        opened.1.notify_all();
    });
    let (slow, victim, r) = (key("slow"), key("victim"), request(700));
    let pay = |k: &idem_core::IdempotencyKey| {
        let (payer, k, r) = (p.clone(), k.clone(), r.clone());
        thread::spawn(move || payer.pay(&k, &r))
    };
    // The slow call's renewal is held first, then the other call starts: a renewer shared
    // by both would be stuck in the held renewal before the other call is even due.
    let slow_paying = pay(&slow);
    idem_testkit::wait_until("the slow call's renewal held", WAIT_MAX, || {
        slow_held.load(Ordering::SeqCst) >= 1
    });
    let paying = [slow_paying, pay(&victim)];
    idem_testkit::wait_until("both charges held", WAIT_MAX, || gateway.gate.lock().started == 2);
    // The slow key's first renewal never returns while the test runs; the victim's go on.
    let victim_run_out = || {
        let pending = p.store().pending(2).expect("lists");
        pending.iter().any(|c| c.key.key().as_str() == "victim")
    };
    idem_testkit::wait_until(
        "five renewals of the other call, or its claim run out",
        WAIT_MAX,
        || victim_renewals.load(Ordering::SeqCst) >= 5 || victim_run_out(),
    );
    assert!(!victim_run_out(), "renewals of the other call: {victim_renewals:?}");
    // The slow call's lease may have run out (the store held its renewal for a whole
    // lease: the case only a deduplicating gateway covers); the victim's holds.
    p.reconcile(10);
    assert!(matches!(p.pay(&victim, &r), Err(PayError::InProgress { .. })), "a retry waits");
    gateway.open();
    drop(_renewals_go_on);
    for paying in paying {
        assert!(paying.join().expect("a payer").is_ok());
    }
    assert!(p.pay(&victim, &r).expect("replays").replayed);
    assert_eq!(gateway.charges(), 2, "one charge per key");
}

#[test]
fn a_store_away_for_most_of_a_lease_does_not_lose_it() {
    // The first four renewals fail: a store away from the first renewal, a quarter of the
    // lease in, to past half of it. Retried every sixteenth of the lease, the fifth lands
    // well before the lease runs out.
    let failures = Arc::new(AtomicU32::new(0));
    let failing = failures.clone();
    let (p, gateway) = hooked(Then::Charge, move |_: &Lease| {
        if failing.fetch_add(1, Ordering::SeqCst) < 4 {
            return Err(StoreError::Storage("the store is away".into()));
        }
        Ok(())
    });
    let _open = OpenOnDrop(gateway.clone());
    let (k, r) = (key("away"), request(300));
    let paying = pay_held_on(&p, &gateway, &k, &r);
    idem_testkit::wait_until(
        "a renewal after the failures, or the claim run out",
        WAIT_MAX,
        || p.renewals().renewed >= 2 || !p.store().pending(1).expect("lists").is_empty(),
    );
    assert!(p.store().pending(1).expect("lists").is_empty(), "{:?}", p.renewals());
    assert_eq!(p.reconcile(10).released, 0);
    gateway.open();
    assert!(!paying.join().expect("the payer").expect("pays").replayed);
    assert_eq!((p.renewals().failed, p.renewals().lost), (4, 0));
    assert_eq!(gateway.charges(), 1, "charged once");
}

#[test]
fn a_recovery_that_lost_its_lease_during_the_lookup_does_not_charge() {
    // Its lookup answers "not charged" (read before the other's charge): no charge, and
    // an error. Or it reads the other's charge: not its to complete, and a retry replays.
    for holds in [Holds::FirstLookup, Holds::FirstLookupReadAfter] {
        recovery_that_lost_its_lease(holds);
    }
}

fn recovery_that_lost_its_lease(holds: Holds) {
    let config = StoreConfig::builder().lease(LEASE).build().expect("a valid lease");
    let store = Arc::new(MemoryStore::new(config));
    let gateway = Arc::new(HeldGateway::holding(Then::Charge, holds));
    let _open = OpenOnDrop(gateway.clone());
    // The first processor cannot renew; the second shares its store and gateway.
    let cut_off = Faulty::new(store.clone()).failing(Op::Renew, "the store is away");
    let first = Arc::new(Processor::new("shop", gateway.clone(), cut_off).expect("valid"));
    let second = Processor::new("shop", gateway.clone(), store.clone()).expect("valid");
    let (k, r) = (key("recovered"), request(1_200));
    // An attempt claimed and crashed: its claim runs out and is pending.
    let scoped = first.scoped_key(&k, &r).expect("a scope");
    assert!(matches!(store.claim(&scoped, &r.fingerprint()), Ok(Claim::Acquired(_))));
    idem_testkit::wait_until("the crashed claim run out", WAIT_MAX, || {
        !store.pending(1).expect("lists").is_empty()
    });
    // The first recovers it and asks the gateway; the answer ("not charged") is held.
    let recovering = {
        let (first, k, r) = (first.clone(), k.clone(), r.clone());
        thread::spawn(move || first.pay(&k, &r))
    };
    idem_testkit::wait_until("the lookup held", WAIT_MAX, || gateway.gate.lock().lookups == 1);
    // Its renewals fail; its lease runs out; the second recovers, hears "not charged" and
    // charges.
    idem_testkit::wait_until("the recovered claim run out", WAIT_MAX, || {
        !store.pending(1).expect("lists").is_empty()
    });
    let charged = second.pay(&k, &r).expect("the second charges");
    assert!(matches!(charged.outcome, PaymentOutcome::Charged(_)));
    gateway.open();
    let late = recovering.join().expect("the first payer");
    // "Not charged": its renewal before charging fails (this processor cannot renew).
    // The other's charge: refused at its completion, the key the other's.
    let told = match holds {
        Holds::FirstLookupReadAfter => matches!(late, Err(PayError::InProgress { .. })),
        _ => matches!(late, Err(PayError::Store(_))),
    };
    assert!(told, "the first: {late:?}");
    assert_eq!(gateway.charges(), 1, "charged once");
    let again = first.pay(&k, &r).expect("a retry replays");
    assert!(again.replayed && again.outcome == charged.outcome, "{again:?}");
}

/// A reconcile recovers a pending key and asks the gateway, slowly (its lookup is not
/// renewed): its lease runs out, a payer recovers the key and settles it. The reconcile's
/// release or completion is refused by the token: the key is reported skipped, not failed,
/// whether its lookup read "not charged" or the payer's charge.
#[test]
fn a_reconcile_that_lost_its_lease_skips_the_key() {
    for holds in [Holds::FirstLookup, Holds::FirstLookupReadAfter] {
        let config = StoreConfig::builder().lease(LEASE).build().expect("a valid lease");
        let store = Arc::new(MemoryStore::new(config));
        let gateway = Arc::new(HeldGateway::holding(Then::Charge, holds));
        let _open = OpenOnDrop(gateway.clone());
        let p = Arc::new(Processor::new("shop", gateway.clone(), store.clone()).expect("valid"));
        let (k, r) = (key("reconciled"), request(1_300));
        let scoped = p.scoped_key(&k, &r).expect("a scope");
        assert!(matches!(store.claim(&scoped, &r.fingerprint()), Ok(Claim::Acquired(_))));
        let run_out = || !store.pending(1).expect("lists").is_empty();
        idem_testkit::wait_until("the crashed claim run out", WAIT_MAX, run_out);
        let reconciling = {
            let p = p.clone();
            thread::spawn(move || p.reconcile(10))
        };
        idem_testkit::wait_until("the lookup held", WAIT_MAX, || gateway.gate.lock().lookups == 1);
        idem_testkit::wait_until("the reconcile's claim run out", WAIT_MAX, run_out);
        let paid = p.pay(&k, &r).expect("the payer recovers and charges");
        gateway.open();
        let report = reconciling.join().expect("the reconcile");
        assert_eq!((report.skipped, report.completed, report.released), (1, 0, 0), "{report:?}");
        assert!(report.failed.is_empty(), "{report:?}");
        assert_eq!(gateway.charges(), 1, "charged once");
        assert_eq!(p.pay(&k, &r).expect("replays").outcome, paid.outcome);
    }
}

/// Runs a closure when dropped (the test's end, passed or failed).
struct OnDrop<F: FnMut()>(F);

impl<F: FnMut()> Drop for OnDrop<F> {
    fn drop(&mut self) {
        (self.0)();
    }
}

/// A store whose renewal panics with a payload whose drop panics in turn: the renewing
/// thread drops it under a guard and goes on renewing; the call keeps its key.
#[test]
fn a_renewal_that_panics_twice_over_does_not_end_the_renewals() {
    let bombed = Arc::new(AtomicU32::new(0));
    let once = bombed.clone();
    let (p, gateway) = hooked(Then::Charge, move |_: &Lease| {
        if once.fetch_add(1, Ordering::SeqCst) == 0 {
            crate::tenants::Bomb::explode(3);
        }
        Ok(())
    });
    let _open = OpenOnDrop(gateway.clone());
    let (k, r) = (key("bombed"), request(450));
    let paying = pay_held_on(&p, &gateway, &k, &r);
    idem_testkit::wait_until("renewals after the panic, or the claim run out", WAIT_MAX, || {
        p.renewals().renewed >= 4 || !p.store().pending(1).expect("lists").is_empty()
    });
    assert!(p.store().pending(1).expect("lists").is_empty(), "{:?}", p.renewals());
    gateway.open();
    assert!(paying.join().expect("the payer").is_ok());
    assert_eq!((p.renewals().failed, gateway.charges()), (1, 1));
}

/// The one case left to a deduplicating gateway, counted: the store holds a call's
/// renewal until its lease has run out, a reconcile releases the key, and the call's
/// completion is then refused. `Renewals::lost` says so, once per call, whether the held
/// renewal comes back refused before the call ends (`renewal_back_first`) or after.
fn outlived(renewal_back_first: bool) -> idem_payments::Renewals {
    let renew_gate = Arc::new((Mutex::new(false), Condvar::new()));
    let gate = renew_gate.clone();
    let (p, gateway) = hooked(Then::Charge, move |_: &Lease| {
        let mut open = gate.0.lock();
        while !*open {
            gate.1.wait(&mut open);
        }
        Ok(())
    });
    let _open = OpenOnDrop(gateway.clone());
    let renewals_go_on = OnDrop(move || {
        *renew_gate.0.lock() = true;
        renew_gate.1.notify_all();
    });
    let (k, r) = (key("outlived"), request(120));
    let paying = pay_held_on(&p, &gateway, &k, &r);
    idem_testkit::wait_until("the claim run out", WAIT_MAX, || {
        !p.store().pending(1).expect("lists").is_empty()
    });
    assert_eq!(p.reconcile(10).released, 1, "not charged yet: released");
    if renewal_back_first {
        drop(renewals_go_on);
        idem_testkit::wait_until("the renewal refused", WAIT_MAX, || p.renewals().lost == 1);
        gateway.open();
        assert!(paying.join().expect("the payer").is_ok());
    } else {
        gateway.open();
        assert!(paying.join().expect("the payer").is_ok());
        drop(renewals_go_on);
    }
    p.renewals()
}

#[test]
fn a_call_that_outlived_its_claim_is_counted_lost() {
    let renewals = outlived(false);
    assert_eq!(renewals.lost, 1, "{renewals:?}");
}

#[test]
fn a_call_whose_renewal_and_completion_were_both_refused_is_counted_lost_once() {
    let renewals = outlived(true);
    assert_eq!(renewals.lost, 1, "{renewals:?}");
}
