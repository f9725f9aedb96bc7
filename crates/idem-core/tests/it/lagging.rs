//! The two-clock rule of `MemoryStore::with_clocks`: deadlines set by the precise clock,
//! far ones judged by a cheaper reading that may lag it (`new` pairs the system clock with
//! a cached copy of it), near ones by the precise clock.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use idem_core::{
    Claim, Clock, Fingerprint, KeyState, KeyStore, ManualClock, MemoryStore, ScopedKey,
    StoreConfig, Timestamp,
};

/// How far from a deadline the cheap reading alone decides: "more than a second".
const CHECK_MARGIN: Duration = Duration::from_secs(1);

const TTL: Duration = Duration::from_secs(30);
const MS: Duration = Duration::from_millis(1);

/// The deadlines' clock, counting its reads.
#[derive(Debug, Default)]
struct Precise {
    clock: ManualClock,
    reads: AtomicUsize,
}

impl Clock for Precise {
    fn now(&self) -> Timestamp {
        // ORDERING: a test counter.
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.clock.now()
    }
}

struct Lagging {
    store: MemoryStore<u32>,
    precise: Arc<Precise>,
    check: Arc<ManualClock>,
}

/// A store whose cheap reading lags its deadlines' clock by `lag`.
fn lagging(lag: Duration) -> Lagging {
    let config = StoreConfig::builder().lease(TTL).result_ttl(TTL).build().expect("valid");
    let start = Timestamp::from_millis(1 << 40);
    let precise = Arc::new(Precise { clock: ManualClock::new(start), ..Default::default() });
    let behind = Timestamp::from_millis(start.as_millis() - lag.as_millis() as u64);
    let check = Arc::new(ManualClock::new(behind));
    let store = MemoryStore::with_clocks(config, precise.clone(), check.clone());
    Lagging { store, precise, check }
}

impl Lagging {
    fn finish(&self, key: &ScopedKey, fp: &Fingerprint, result: u32) {
        let Ok(Claim::Acquired(lease)) = self.store.claim(key, fp) else { panic!("acquired") };
        self.store.complete(&lease, result).expect("completes");
    }

    fn advance(&self, by: Duration) {
        self.precise.clock.advance(by);
        self.check.advance(by);
    }
}

fn key() -> (ScopedKey, Fingerprint) {
    (ScopedKey::parse("s", "k").expect("valid"), Fingerprint::builder("t").finish())
}

#[test]
fn a_lease_ends_exactly_at_its_deadline_whatever_the_lag() {
    let t = lagging(Duration::from_millis(100));
    let (key, fp) = key();
    assert!(matches!(t.store.claim(&key, &fp), Ok(Claim::Acquired(_))));
    t.advance(TTL - MS);
    let Ok(Claim::InFlight { retry_after }) = t.store.claim(&key, &fp) else { panic!() };
    assert_eq!(retry_after, MS);
    assert!(matches!(t.store.lookup(&key, &fp), Ok(KeyState::InFlight { .. })));
    t.advance(MS);
    assert!(matches!(t.store.lookup(&key, &fp), Ok(KeyState::Pending { .. })));
    assert!(matches!(t.store.claim(&key, &fp), Ok(Claim::Recover(_))));
}

/// The wait a second claim is told is the lease left by the clock that set the
/// deadline, never more than the lease, however far the cheap reading lags.
#[test]
fn retry_after_never_exceeds_the_lease_left_whatever_the_lag() {
    let t = lagging(Duration::from_millis(100));
    let (key, fp) = key();
    assert!(matches!(t.store.claim(&key, &fp), Ok(Claim::Acquired(_))));
    let Ok(Claim::InFlight { retry_after }) = t.store.claim(&key, &fp) else { panic!() };
    assert_eq!(retry_after, TTL, "at once: the whole lease, not the lease plus the lag");
    let Ok(KeyState::InFlight { retry_after }) = t.store.lookup(&key, &fp) else { panic!() };
    assert_eq!(retry_after, TTL);
    t.advance(Duration::from_secs(10));
    let Ok(Claim::InFlight { retry_after }) = t.store.claim(&key, &fp) else { panic!() };
    assert_eq!(retry_after, TTL - Duration::from_secs(10));
}

#[test]
fn a_result_ends_exactly_at_its_deadline_whatever_the_lag() {
    let t = lagging(Duration::from_millis(100));
    let (key, fp) = key();
    t.finish(&key, &fp, 7);
    t.advance(TTL - MS);
    assert_eq!(t.store.claim(&key, &fp).expect("claims"), Claim::Replay(7));
    assert!(matches!(t.store.lookup(&key, &fp), Ok(KeyState::Finished(7))));
    t.advance(MS);
    assert!(matches!(t.store.lookup(&key, &fp), Ok(KeyState::Absent)));
    assert!(matches!(t.store.claim(&key, &fp), Ok(Claim::Acquired(_))));
}

#[test]
fn a_replay_far_from_its_deadline_never_reads_the_precise_clock() {
    let t = lagging(Duration::from_millis(100));
    let (key, fp) = key();
    t.finish(&key, &fp, 7);
    t.advance(TTL - CHECK_MARGIN - MS);
    // ORDERING: a test counter.
    let reads = t.precise.reads.load(Ordering::Relaxed);
    for _ in 0..10 {
        assert_eq!(t.store.claim(&key, &fp).expect("claims"), Claim::Replay(7));
    }
    assert_eq!(t.precise.reads.load(Ordering::Relaxed), reads);
}

#[test]
fn a_lag_beyond_the_margin_only_keeps_a_record_longer() {
    let t = lagging(CHECK_MARGIN * 5);
    let (key, fp) = key();
    t.finish(&key, &fp, 7);
    t.advance(TTL);
    assert_eq!(t.store.claim(&key, &fp).expect("claims"), Claim::Replay(7));
    t.advance(CHECK_MARGIN * 4);
    assert!(matches!(t.store.claim(&key, &fp), Ok(Claim::Acquired(_))));
}

/// A simulated store's key hash is seeded: two stores with one seed place 200 keys on
/// the same shards, so every key gets the same fencing token in both (a token counts
/// claims per shard, so keys sharing a shard tell the placement apart), and another seed
/// places them otherwise.
#[test]
fn a_simulated_store_places_keys_by_its_seed() {
    use idem_core::{Claim, Fingerprint, KeyStore, ManualClock, MemoryStore, ScopedKey};
    use std::sync::Arc;
    let tokens = |seed: u64| -> Vec<u64> {
        let clock: Arc<dyn idem_core::Clock> =
            Arc::new(ManualClock::new(idem_core::Timestamp::from_millis(1)));
        let store = MemoryStore::<u8>::simulated(Default::default(), (clock.clone(), clock), seed);
        let request = Fingerprint::builder("t").finish();
        (0..200)
            .map(|i| {
                let key = ScopedKey::parse("s", &format!("k{i}")).expect("a key");
                match KeyStore::claim(&store, &key, &request).expect("claimed") {
                    Claim::Acquired(lease) => lease.token().get(),
                    other => panic!("{other:?}"),
                }
            })
            .collect()
    };
    assert_eq!(tokens(7), tokens(7), "one seed, one placement");
    assert_ne!(tokens(7), tokens(8), "another seed, another placement");
}
