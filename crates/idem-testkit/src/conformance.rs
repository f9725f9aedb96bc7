//! The conformance suite: the behaviour every [`KeyStore`] backend must have.
//!
//! A backend runs the whole suite against itself with one line in its tests:
//!
//! ```
//! use std::sync::Arc;
//! use idem_core::{ManualClock, MemoryStore, StoreConfig};
//!
//! fn make(config: StoreConfig, clock: Arc<ManualClock>) -> MemoryStore<String> {
//!     MemoryStore::with_clock(config, clock)
//! }
//! idem_testkit::conformance_tests!(make);
//! # fn main() {}
//! ```
//!
//! Each case builds a fresh store with the configuration it needs and a [`ManualClock`]
//! that starts at [`START`]; time moves only when a case moves it. A case panics, naming
//! what the backend did wrong, if the backend misbehaves.
//!
//! # Panics
//!
//! Every case panics when the backend breaks the contract: that is how a case fails.

// Each case's only panics are its assertions, documented once above.
#![allow(clippy::missing_panics_doc)]

use std::time::Duration;

use std::sync::{Arc, Barrier};
use std::thread;

mod admin;

pub use admin::{
    forget_of_a_finished_result_frees_no_quota, forget_of_a_pending_claim_fences_its_holder,
    forget_refuses_a_live_holder, forget_removes_a_finished_result, inspect_shows_every_state,
};

use idem_core::{
    Claim, Fingerprint, KeyState, KeyStore, Lease, ManualClock, ScopedKey, StoreConfig, StoreError,
    Timestamp,
};

/// Where every case's clock starts.
pub const START: Timestamp = Timestamp::from_millis(1_700_000_000_000);
/// The lease every case uses unless it says otherwise.
pub const LEASE: Duration = Duration::from_secs(30);
/// The result TTL every case uses unless it says otherwise.
pub const TTL: Duration = Duration::from_secs(3600);

/// A fresh store and the clock it reads.
#[derive(Debug)]
pub struct Fixture<S> {
    /// The store under test.
    pub store: S,
    /// The clock the store reads; cases move it.
    pub clock: Arc<ManualClock>,
}

fn config(capacity: usize) -> StoreConfig {
    StoreConfig::builder()
        .lease(LEASE)
        .result_ttl(TTL)
        .capacity(capacity)
        .sweep_batch_max(16)
        .build()
        .expect("the suite's configuration is valid")
}

/// A fresh store whose scopes each hold at most `in_flight_max` claims in flight, and the
/// clock it reads.
fn with_scope_quota<S>(
    make: &dyn Fn(StoreConfig, Arc<ManualClock>) -> S,
    in_flight_max: usize,
) -> (S, Arc<ManualClock>) {
    let config = StoreConfig::builder()
        .lease(LEASE)
        .result_ttl(TTL)
        .scope_in_flight_max(in_flight_max)
        .build()
        .expect("the suite's configuration is valid");
    let clock = Arc::new(ManualClock::new(START));
    (make(config, clock.clone()), clock)
}

fn fixture<S>(make: &dyn Fn(StoreConfig, Arc<ManualClock>) -> S, capacity: usize) -> Fixture<S> {
    let clock = Arc::new(ManualClock::new(START));
    Fixture { store: make(config(capacity), clock.clone()), clock }
}

/// A key in scope `scope`.
///
/// # Panics
///
/// If `scope` or `key` is not a valid key (the suite only passes valid ones).
pub fn key(scope: &str, key: &str) -> ScopedKey {
    ScopedKey::parse(scope, key).expect("the suite's keys are valid")
}

/// A request fingerprint numbered `n`.
pub fn request(n: u64) -> Fingerprint {
    Fingerprint::builder("testkit").u64("n", n).finish()
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[track_caller]
fn claim<S: KeyStore<String>>(s: &S, k: &ScopedKey, fp: u64) -> Claim<String> {
    s.claim(k, &request(fp)).expect("claim should be answered")
}

#[track_caller]
fn acquire<S: KeyStore<String>>(s: &S, k: &ScopedKey, fp: u64) -> Lease {
    match claim(s, k, fp) {
        Claim::Acquired(lease) => lease,
        other => panic!("expected Acquired for {k}, got {other:?}"),
    }
}

#[track_caller]
fn recover<S: KeyStore<String>>(s: &S, k: &ScopedKey, fp: u64) -> Lease {
    match claim(s, k, fp) {
        Claim::Recover(lease) => lease,
        other => panic!("expected Recover for {k}, got {other:?}"),
    }
}

#[track_caller]
fn assert_lease_lost(result: Result<(), StoreError>) {
    assert!(matches!(result, Err(StoreError::LeaseLost { .. })), "expected LeaseLost: {result:?}");
}

/// Absent, claim: `Acquired`; complete; claim: `Replay` of exactly that result.
pub fn acquire_complete_replay<S: KeyStore<String>>(
    make: &dyn Fn(StoreConfig, Arc<ManualClock>) -> S,
) {
    let f = fixture(make, 100);
    let k = key("s", "k");
    let lease = acquire(&f.store, &k, 1);
    assert_eq!(lease.key(), &k);
    assert_eq!(lease.expires_at(), START.saturating_add(LEASE));
    assert_eq!(f.store.lease(), LEASE, "the store tells the lease it was configured with");
    assert_eq!(f.store.result_ttl(), TTL, "and the result TTL");
    f.store.complete(&lease, "charged".into()).expect("complete");
    for _ in 0..3 {
        assert_eq!(claim(&f.store, &k, 1), Claim::Replay("charged".into()));
    }
}

/// A held key answers `InFlight` with the time left on the lease.
pub fn in_flight_reports_retry_after<S: KeyStore<String>>(
    make: &dyn Fn(StoreConfig, Arc<ManualClock>) -> S,
) {
    let f = fixture(make, 100);
    let k = key("s", "k");
    let _lease = acquire(&f.store, &k, 1);
    assert_eq!(claim(&f.store, &k, 1), Claim::InFlight { retry_after: LEASE });
    f.clock.advance(Duration::from_secs(10));
    assert_eq!(claim(&f.store, &k, 1), Claim::InFlight { retry_after: Duration::from_secs(20) });
}

/// Release makes the key absent: the next claim acquires it with a higher token.
pub fn release_makes_key_absent<S: KeyStore<String>>(
    make: &dyn Fn(StoreConfig, Arc<ManualClock>) -> S,
) {
    let f = fixture(make, 100);
    let k = key("s", "k");
    let first = acquire(&f.store, &k, 1);
    f.store.release(&first).expect("release");
    let second = acquire(&f.store, &k, 1);
    assert!(second.token() > first.token(), "tokens must grow: {first:?} then {second:?}");
    // The released lease is stale: it cannot settle the new holder's claim.
    assert_lease_lost(f.store.complete(&first, "stale".into()));
    assert_lease_lost(f.store.release(&first));
    assert_eq!(claim(&f.store, &k, 1), Claim::InFlight { retry_after: LEASE });
}

/// The lease runs out exactly at its deadline: a millisecond before, `InFlight`; at the
/// deadline, `Recover` with a higher token.
pub fn expired_lease_recovers<S: KeyStore<String>>(
    make: &dyn Fn(StoreConfig, Arc<ManualClock>) -> S,
) {
    let f = fixture(make, 100);
    let k = key("s", "k");
    let first = acquire(&f.store, &k, 1);
    f.clock.advance(LEASE - ms(1));
    assert_eq!(claim(&f.store, &k, 1), Claim::InFlight { retry_after: ms(1) });
    f.clock.advance(ms(1));
    let second = recover(&f.store, &k, 1);
    assert!(second.token() > first.token(), "recovery must raise the token");
    assert_eq!(second.expires_at(), START.saturating_add(LEASE * 2));
    // The recovered claim is in flight again, with a fresh lease.
    assert_eq!(claim(&f.store, &k, 1), Claim::InFlight { retry_after: LEASE });
}

/// After a recovery, the old lease's complete and release are refused and change nothing;
/// the new lease completes.
pub fn stale_lease_is_fenced<S: KeyStore<String>>(
    make: &dyn Fn(StoreConfig, Arc<ManualClock>) -> S,
) {
    let f = fixture(make, 100);
    let k = key("s", "k");
    let old = acquire(&f.store, &k, 1);
    f.clock.advance(LEASE);
    let new = recover(&f.store, &k, 1);
    assert_lease_lost(f.store.complete(&old, "old".into()));
    assert_lease_lost(f.store.release(&old));
    assert_eq!(claim(&f.store, &k, 1), Claim::InFlight { retry_after: LEASE });
    f.store.complete(&new, "new".into()).expect("the recovering holder completes");
    assert_eq!(claim(&f.store, &k, 1), Claim::Replay("new".into()));
    assert_lease_lost(f.store.complete(&old, "old".into()));
    assert_eq!(claim(&f.store, &k, 1), Claim::Replay("new".into()));
}

/// A lease that ran out but was not taken over still completes: nobody else acted.
pub fn late_complete_without_takeover<S: KeyStore<String>>(
    make: &dyn Fn(StoreConfig, Arc<ManualClock>) -> S,
) {
    let f = fixture(make, 100);
    let k = key("s", "k");
    let lease = acquire(&f.store, &k, 1);
    f.clock.advance(LEASE * 3);
    f.store.complete(&lease, "late".into()).expect("an untaken lease completes");
    assert_eq!(claim(&f.store, &k, 1), Claim::Replay("late".into()));
}

/// A settled lease is spent: completing or releasing it again is `LeaseLost` and the
/// stored result stays.
pub fn settled_lease_is_spent<S: KeyStore<String>>(
    make: &dyn Fn(StoreConfig, Arc<ManualClock>) -> S,
) {
    let f = fixture(make, 100);
    let k = key("s", "k");
    let lease = acquire(&f.store, &k, 1);
    f.store.complete(&lease, "first".into()).expect("complete");
    assert_lease_lost(f.store.complete(&lease, "second".into()));
    assert_lease_lost(f.store.release(&lease));
    assert_eq!(claim(&f.store, &k, 1), Claim::Replay("first".into()));
}

/// A renewal extends a held lease by a whole lease from now, same key and token: past
/// the first deadline the key is still in flight (no recovery), and the renewed lease
/// completes. A lease that ran out untaken still renews.
pub fn renew_extends_the_lease<S: KeyStore<String>>(
    make: &dyn Fn(StoreConfig, Arc<ManualClock>) -> S,
) {
    let f = fixture(make, 100);
    let k = key("s", "k");
    let first = acquire(&f.store, &k, 1);
    f.clock.advance(LEASE - ms(1));
    let renewed = f.store.renew(&first).expect("a held lease renews");
    assert_eq!((renewed.key(), renewed.token()), (&k, first.token()));
    let due = START.saturating_add(LEASE * 2 - ms(1));
    assert_eq!(renewed.expires_at(), due, "a whole lease from the renewal");
    f.clock.advance(ms(1));
    assert_eq!(claim(&f.store, &k, 1), Claim::InFlight { retry_after: LEASE - ms(1) });
    f.clock.advance(LEASE * 2);
    let again = f.store.renew(&renewed).expect("a lease run out but not taken over renews");
    assert_eq!(again.token(), first.token());
    f.store.complete(&again, "slow".into()).expect("the renewed lease completes");
    assert_eq!(claim(&f.store, &k, 1), Claim::Replay("slow".into()));
}

/// A renewal is refused, changing nothing, once the lease no longer holds its key: taken
/// over after it ran out, completed, or released.
pub fn renew_of_a_lost_lease_is_refused<S: KeyStore<String>>(
    make: &dyn Fn(StoreConfig, Arc<ManualClock>) -> S,
) {
    let f = fixture(make, 100);
    let lost = |r: Result<Lease, StoreError>| matches!(r, Err(StoreError::LeaseLost { .. }));
    let k = key("s", "taken");
    let old = acquire(&f.store, &k, 1);
    f.clock.advance(LEASE);
    let new = recover(&f.store, &k, 1);
    assert!(lost(f.store.renew(&old)), "a taken-over lease must not renew");
    assert_eq!(claim(&f.store, &k, 1), Claim::InFlight { retry_after: LEASE });
    f.store.complete(&new, "new".into()).expect("the recovering holder completes");
    assert!(lost(f.store.renew(&new)), "a completed lease must not renew");
    assert_eq!(claim(&f.store, &k, 1), Claim::Replay("new".into()));
    let k = key("s", "released");
    let released = acquire(&f.store, &k, 1);
    f.store.release(&released).expect("release");
    assert!(lost(f.store.renew(&released)), "a released lease must not renew");
    // The refused renewals changed nothing: the released key is acquired afresh.
    let again = acquire(&f.store, &k, 1);
    assert!(again.token() > released.token(), "a fresh claim has a higher token");
}

/// A lease for a key the store never saw is `LeaseLost`.
pub fn unknown_lease_is_lost<S: KeyStore<String>>(
    make: &dyn Fn(StoreConfig, Arc<ManualClock>) -> S,
) {
    let f = fixture(make, 100);
    let k = key("s", "never-claimed");
    let lease = Lease::new(k.clone(), idem_core::FencingToken::new(7), START.saturating_add(LEASE));
    assert_lease_lost(f.store.complete(&lease, "x".into()));
    assert_lease_lost(f.store.release(&lease));
    let _ = acquire(&f.store, &k, 1);
}

/// A different fingerprint is `KeyReused`, in flight, finished and with the lease run
/// out, and the original record is untouched.
pub fn key_reused_is_refused<S: KeyStore<String>>(
    make: &dyn Fn(StoreConfig, Arc<ManualClock>) -> S,
) {
    let f = fixture(make, 100);
    let k = key("s", "k");
    let reused = |s: &S| matches!(s.claim(&k, &request(2)), Err(StoreError::KeyReused { .. }));
    let lease = acquire(&f.store, &k, 1);
    assert!(reused(&f.store), "in flight: a different request must be refused");
    assert_eq!(claim(&f.store, &k, 1), Claim::InFlight { retry_after: LEASE });
    f.clock.advance(LEASE);
    assert!(reused(&f.store), "lease run out: a different request must still be refused");
    f.store.complete(&lease, "one".into()).expect("complete");
    assert!(reused(&f.store), "finished: a different request must be refused");
    assert_eq!(claim(&f.store, &k, 1), Claim::Replay("one".into()));
}

/// A result is replayed until its TTL ends; at the expiry instant the key is absent, for
/// any fingerprint.
pub fn result_expires_at_ttl<S: KeyStore<String>>(
    make: &dyn Fn(StoreConfig, Arc<ManualClock>) -> S,
) {
    let f = fixture(make, 100);
    let k = key("s", "k");
    let first = acquire(&f.store, &k, 1);
    f.clock.advance(ms(5));
    f.store.complete(&first, "done".into()).expect("complete");
    f.clock.advance(TTL - ms(1));
    assert_eq!(claim(&f.store, &k, 1), Claim::Replay("done".into()));
    f.clock.advance(ms(1));
    let second = acquire(&f.store, &k, 2);
    assert!(second.token() > first.token());
    assert_lease_lost(f.store.complete(&first, "stale".into()));
}

/// The same key under two scopes is two keys.
pub fn scopes_are_separate<S: KeyStore<String>>(make: &dyn Fn(StoreConfig, Arc<ManualClock>) -> S) {
    let f = fixture(make, 100);
    let a = key("customer:1", "k");
    let b = key("customer:2", "k");
    let la = acquire(&f.store, &a, 1);
    let lb = acquire(&f.store, &b, 2);
    f.store.complete(&la, "a".into()).expect("complete a");
    f.store.complete(&lb, "b".into()).expect("complete b");
    assert_eq!(claim(&f.store, &a, 1), Claim::Replay("a".into()));
    assert_eq!(claim(&f.store, &b, 2), Claim::Replay("b".into()));
}

/// At capacity new keys are refused with `StoreFull`, existing keys still answer, and
/// room comes back by release or by results expiring; nothing live is evicted.
pub fn capacity_refuses_new_keys<S: KeyStore<String>>(
    make: &dyn Fn(StoreConfig, Arc<ManualClock>) -> S,
) {
    let f = fixture(make, 2);
    let (a, b, c) = (key("s", "a"), key("s", "b"), key("s", "c"));
    let la = acquire(&f.store, &a, 1);
    let lb = acquire(&f.store, &b, 1);
    let full =
        |s: &S| matches!(s.claim(&c, &request(1)), Err(StoreError::StoreFull { capacity: 2 }));
    assert!(full(&f.store), "a third key must be refused");
    assert_eq!(claim(&f.store, &a, 1), Claim::InFlight { retry_after: LEASE });
    f.clock.advance(LEASE);
    assert!(full(&f.store), "in-flight claims with run-out leases are not evicted");
    f.store.release(&la).expect("release");
    let lc = acquire(&f.store, &c, 1);
    f.store.complete(&lb, "b".into()).expect("complete");
    f.store.complete(&lc, "c".into()).expect("complete");
    assert!(matches!(f.store.claim(&a, &request(1)), Err(StoreError::StoreFull { .. })));
    f.clock.advance(TTL);
    // Both results expired: the full store sweeps and makes room.
    let _ = acquire(&f.store, &a, 1);
}

/// Sweep removes only finished records past their TTL, in bounded batches, and never an
/// in-flight claim, even one whose lease ran out.
pub fn sweep_removes_only_expired_results<S: KeyStore<String>>(
    make: &dyn Fn(StoreConfig, Arc<ManualClock>) -> S,
) {
    let f = fixture(make, 100);
    let pending = key("s", "pending");
    let _held = acquire(&f.store, &pending, 1);
    for i in 0..20 {
        let k = key("s", &format!("done-{i}"));
        let lease = acquire(&f.store, &k, 1);
        f.store.complete(&lease, format!("r{i}")).expect("complete");
    }
    assert_eq!(f.store.sweep().expect("sweep"), 0, "nothing has expired yet");
    f.clock.advance(TTL);
    assert_eq!(f.store.sweep().expect("sweep"), 16, "one sweep removes at most the batch");
    assert_eq!(f.store.sweep().expect("sweep"), 4);
    assert_eq!(f.store.sweep().expect("sweep"), 0);
    let _ = recover(&f.store, &pending, 1);
}

/// `pending` lists exactly the in-flight claims whose lease ran out (at the deadline
/// instant), with their fingerprints, up to `max`; never live or finished ones.
pub fn pending_lists_expired_claims<S: KeyStore<String>>(
    make: &dyn Fn(StoreConfig, Arc<ManualClock>) -> S,
) {
    let f = fixture(make, 100);
    let (crashed, live, done) = (key("s", "crashed"), key("s", "live"), key("s", "done"));
    let _lost = acquire(&f.store, &crashed, 1);
    let finished = acquire(&f.store, &done, 3);
    f.store.complete(&finished, "ok".into()).expect("complete");
    f.clock.advance(LEASE - ms(1));
    assert!(f.store.pending(10).expect("pending").is_empty(), "nothing has run out yet");
    let _held = acquire(&f.store, &live, 2);
    f.clock.advance(ms(1));
    let pending = f.store.pending(10).expect("pending");
    assert_eq!(pending.len(), 1, "{pending:?}");
    assert_eq!((&pending[0].key, pending[0].fingerprint), (&crashed, request(1)));
    assert_eq!(pending[0].lease_expired_at, START.saturating_add(LEASE));
    assert!(f.store.pending(0).expect("pending").is_empty(), "bounded by max");
    // Recovering the claim renews its lease: it is no longer pending.
    let _recovered = recover(&f.store, &crashed, 1);
    assert!(f.store.pending(10).expect("pending").is_empty());
}

/// `claim_wait` on an absent key acquires at once.
pub fn claim_wait_absent_acquires<S: KeyStore<String>>(
    make: &dyn Fn(StoreConfig, Arc<ManualClock>) -> S,
) {
    let f = fixture(make, 100);
    let k = key("s", "k");
    // The longest timeout there is: an absent key is acquired at once, nothing overflows.
    let got = f.store.claim_wait(&k, &request(1), Duration::MAX).expect("claim_wait");
    assert!(matches!(got, Claim::Acquired(_)), "got {got:?}");
}

/// `claim_wait` gives up at its timeout with `InFlight` (a zero timeout at once).
pub fn claim_wait_times_out<S: KeyStore<String>>(
    make: &dyn Fn(StoreConfig, Arc<ManualClock>) -> S,
) {
    let f = fixture(make, 100);
    let k = key("s", "k");
    let _lease = acquire(&f.store, &k, 1);
    for timeout in [Duration::ZERO, ms(20)] {
        let got = f.store.claim_wait(&k, &request(1), timeout).expect("claim_wait");
        assert!(matches!(got, Claim::InFlight { .. }), "{timeout:?}: got {got:?}");
    }
}

fn settle_while_waiting<S: KeyStore<String> + Sync>(
    make: &dyn Fn(StoreConfig, Arc<ManualClock>) -> S,
    settle: fn(&S, &Lease),
) -> Claim<String> {
    let f = fixture(make, 100);
    let k = key("s", "k");
    let lease = acquire(&f.store, &k, 1);
    thread::scope(|scope| {
        // No deadline at all: only the settle ends the wait.
        let waiter = scope.spawn(|| f.store.claim_wait(&k, &request(1), Duration::MAX));
        thread::sleep(ms(20));
        settle(&f.store, &lease);
        waiter.join().expect("waiter thread").expect("claim_wait")
    })
}

/// A waiter wakes when the holder completes, and gets the result.
pub fn claim_wait_sees_completion<S: KeyStore<String> + Sync>(
    make: &dyn Fn(StoreConfig, Arc<ManualClock>) -> S,
) {
    let got = settle_while_waiting(make, |s, l| s.complete(l, "done".into()).expect("complete"));
    assert_eq!(got, Claim::Replay("done".into()));
}

/// A waiter wakes when the holder releases, and acquires the key.
pub fn claim_wait_sees_release<S: KeyStore<String> + Sync>(
    make: &dyn Fn(StoreConfig, Arc<ManualClock>) -> S,
) {
    let got = settle_while_waiting(make, |s, l| s.release(l).expect("release"));
    assert!(matches!(got, Claim::Acquired(_)), "got {got:?}");
}

/// Eight threads claim one key at once: exactly one `Acquired`, the rest `InFlight`.
pub fn racing_claimers_one_owner<S: KeyStore<String> + Sync>(
    make: &dyn Fn(StoreConfig, Arc<ManualClock>) -> S,
) {
    const THREADS: usize = 8;
    for round in 0..20 {
        let f = fixture(make, 100);
        let k = key("s", &format!("race-{round}"));
        let barrier = Barrier::new(THREADS);
        let claims: Vec<Claim<String>> = thread::scope(|scope| {
            let handles: Vec<_> = (0..THREADS)
                .map(|_| {
                    scope.spawn(|| {
                        barrier.wait();
                        f.store.claim(&k, &request(1)).expect("claim")
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().expect("claimer thread")).collect()
        });
        let owners = claims.iter().filter(|c| matches!(c, Claim::Acquired(_))).count();
        assert_eq!(owners, 1, "round {round}: {claims:?}");
        assert!(claims.iter().all(|c| matches!(c, Claim::Acquired(_) | Claim::InFlight { .. })));
    }
}

#[track_caller]
fn lookup<S: KeyStore<String>>(store: &S, k: &ScopedKey, n: u64) -> KeyState<String> {
    store.lookup(k, &request(n)).unwrap_or_else(|e| panic!("lookup of {k} failed: {e}"))
}

/// A lookup follows the state machine: absent, in flight (with the time left), pending
/// once the lease runs out, finished with the result, absent after the TTL; a live key
/// looked up with another fingerprint is `KeyReused`.
pub fn lookup_follows_the_state_machine<S: KeyStore<String>>(
    make: &dyn Fn(StoreConfig, Arc<ManualClock>) -> S,
) {
    let f = fixture(make, 100);
    let k = key("s", "k");
    assert_eq!(lookup(&f.store, &k, 1), KeyState::Absent);
    let _first = acquire(&f.store, &k, 1);
    assert_eq!(lookup(&f.store, &k, 1), KeyState::InFlight { retry_after: LEASE });
    let reused = f.store.lookup(&k, &request(2));
    assert!(matches!(reused, Err(StoreError::KeyReused { .. })), "{reused:?}");
    f.clock.advance(LEASE);
    let expired = START.saturating_add(LEASE);
    assert_eq!(lookup(&f.store, &k, 1), KeyState::Pending { lease_expired_at: expired });
    let second = recover(&f.store, &k, 1);
    f.store.complete(&second, "done".into()).expect("complete");
    assert_eq!(lookup(&f.store, &k, 1), KeyState::Finished("done".into()));
    let reused = f.store.lookup(&k, &request(2));
    assert!(matches!(reused, Err(StoreError::KeyReused { .. })), "{reused:?}");
    f.clock.advance(TTL);
    assert_eq!(lookup(&f.store, &k, 2), KeyState::Absent, "an expired result is absent");
}

/// A lookup changes nothing: an absent key leaves no record (a full store still has
/// room for it), and a pending claim is not recovered by looking at it.
pub fn lookup_changes_nothing<S: KeyStore<String>>(
    make: &dyn Fn(StoreConfig, Arc<ManualClock>) -> S,
) {
    let f = fixture(make, 1);
    let (looked, claimed) = (key("s", "looked-at"), key("s", "claimed"));
    for _ in 0..3 {
        assert_eq!(lookup(&f.store, &looked, 1), KeyState::Absent);
    }
    let first = acquire(&f.store, &claimed, 1);
    f.clock.advance(LEASE);
    for _ in 0..3 {
        assert!(matches!(lookup(&f.store, &claimed, 1), KeyState::Pending { .. }));
    }
    assert_eq!(f.store.pending(10).expect("pending").len(), 1, "still pending");
    let second = recover(&f.store, &claimed, 1);
    assert_eq!(second.token().get(), first.token().get() + 1, "no token was spent by lookups");
}

/// With a scope quota of 2: a third claim in flight in one scope is refused and changes
/// nothing, another scope is not affected, a completion makes room, and replays and
/// recoveries are never refused by the quota.
pub fn scope_quota_refuses_past_the_limit<S: KeyStore<String>>(
    make: &dyn Fn(StoreConfig, Arc<ManualClock>) -> S,
) {
    let (store, clock) = with_scope_quota(make, 2);
    let first = acquire(&store, &key("a", "k1"), 1);
    let _second = acquire(&store, &key("a", "k2"), 1);
    let refused = store.claim(&key("a", "k3"), &request(1));
    match &refused {
        Err(StoreError::ScopeQuota { scope, in_flight_max: 2 }) => assert_eq!(scope.as_str(), "a"),
        other => panic!("expected ScopeQuota, got {other:?}"),
    }
    assert_eq!(store.lookup(&key("a", "k3"), &request(1)).expect("lookup"), KeyState::Absent);
    let _other = acquire(&store, &key("b", "k3"), 1);
    store.complete(&first, "done".into()).expect("complete");
    let _third = acquire(&store, &key("a", "k3"), 1);
    assert_eq!(claim(&store, &key("a", "k1"), 1), Claim::Replay("done".into()));
    clock.advance(LEASE);
    let _recovered = recover(&store, &key("a", "k2"), 1);
}

/// A new key past both its scope's quota and the store's capacity is refused by its
/// scope: a sweep of the store would not admit it (and the caller is told which limit to
/// wait for: 429 by the layer, not 503).
pub fn scope_quota_is_judged_before_capacity<S: KeyStore<String>>(
    make: &dyn Fn(StoreConfig, Arc<ManualClock>) -> S,
) {
    let config = StoreConfig::builder()
        .lease(LEASE)
        .result_ttl(TTL)
        .capacity(2)
        .scope_in_flight_max(1)
        .build()
        .expect("the suite's configuration is valid");
    let store = make(config, Arc::new(ManualClock::new(START)));
    let _a = acquire(&store, &key("a", "k1"), 1);
    let _b = acquire(&store, &key("b", "k1"), 1);
    match store.claim(&key("a", "k2"), &request(1)) {
        Err(StoreError::ScopeQuota { scope, in_flight_max: 1 }) => assert_eq!(scope.as_str(), "a"),
        other => panic!("expected ScopeQuota (the store is full too), got {other:?}"),
    }
}

/// Generates one `#[test]` per conformance case for the async backend built by `$make`, a
/// `fn(StoreConfig, Arc<ManualClock>) -> S` where `S: AsyncKeyStore<String> + AsyncKeyAdmin`:
/// each case runs the same steps as for a sync backend, every call awaited on the suite's
/// runtime ([`BlockOn`](crate::BlockOn)). Build the store inside `runtime().block_on(...)`
/// if it needs a runtime to start.
#[macro_export]
macro_rules! async_conformance_tests {
    ($make:expr) => {
        fn __blocking_store(
            config: idem_core::StoreConfig,
            clock: std::sync::Arc<idem_core::ManualClock>,
        ) -> $crate::BlockOn<impl idem_core::AsyncKeyStore<String> + idem_core::AsyncKeyAdmin> {
            $crate::BlockOn::new($make(config, clock))
        }
        $crate::conformance_tests!(__blocking_store);
    };
}

/// Generates one `#[test]` per conformance case for the backend built by `$make`, a
/// `fn(StoreConfig, Arc<ManualClock>) -> S` where `S: KeyStore<String> + KeyAdmin + Sync`.
#[macro_export]
macro_rules! conformance_tests {
    ($make:expr) => {
        $crate::conformance_tests!(@cases $make;
            acquire_complete_replay, in_flight_reports_retry_after, release_makes_key_absent,
            expired_lease_recovers, stale_lease_is_fenced, late_complete_without_takeover,
            settled_lease_is_spent, unknown_lease_is_lost, key_reused_is_refused,
            result_expires_at_ttl, scopes_are_separate, capacity_refuses_new_keys,
            sweep_removes_only_expired_results, claim_wait_absent_acquires,
            claim_wait_times_out, claim_wait_sees_completion, claim_wait_sees_release,
            racing_claimers_one_owner, pending_lists_expired_claims,
            lookup_follows_the_state_machine, lookup_changes_nothing,
            scope_quota_refuses_past_the_limit, scope_quota_is_judged_before_capacity,
            renew_extends_the_lease,
            renew_of_a_lost_lease_is_refused, inspect_shows_every_state,
            forget_removes_a_finished_result, forget_refuses_a_live_holder,
            forget_of_a_pending_claim_fences_its_holder,
            forget_of_a_finished_result_frees_no_quota);
    };
    (@cases $make:expr; $($case:ident),* $(,)?) => {
        $(
            #[test]
            fn $case() {
                $crate::conformance::$case(&$make);
            }
        )*
    };
}
