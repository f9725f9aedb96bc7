//! Real threads, bounded in count: four threads claim, complete and release overlapping
//! keys; afterwards every finished key replays the one result stored for it, and the
//! store's invariants hold.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use idem_core::{Claim, Fingerprint, KeyStore, MemoryStore, ScopedKey, StoreConfig};

const THREADS: u64 = 4;
const ROUNDS: u64 = 2_000;
const KEYS: u64 = 64;

#[test]
fn overlapping_claims_act_once_per_key() {
    let store = MemoryStore::<u64>::new(StoreConfig::default());
    let keys: Vec<ScopedKey> =
        (0..KEYS).map(|k| ScopedKey::parse("stress", &format!("k{k}")).expect("key")).collect();
    let fp = Fingerprint::builder("stress").finish();
    let effects: Vec<AtomicU64> = (0..KEYS).map(|_| AtomicU64::new(0)).collect();
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (store, keys, fp, effects) = (&store, &keys, &fp, &effects);
            s.spawn(move || {
                for round in 0..ROUNDS {
                    let k = ((round * 7 + t * 13) % KEYS) as usize;
                    match store.claim_wait(&keys[k], fp, Duration::from_secs(10)).expect("claim") {
                        // Every third attempt fails before acting and gives the key back.
                        Claim::Acquired(lease) if (round + t) % 3 == 0 => {
                            store.release(&lease).expect("release");
                        }
                        Claim::Acquired(lease) => {
                            let n = effects[k].fetch_add(1, Ordering::SeqCst);
                            store.complete(&lease, k as u64 * 1000 + n).expect("complete");
                        }
                        Claim::Replay(result) => assert_eq!(result / 1000, k as u64),
                        other => panic!("unexpected {other:?}"),
                    }
                }
            });
        }
    });
    for (k, key) in keys.iter().enumerate() {
        let acted = effects[k].load(Ordering::SeqCst);
        assert!(acted <= 1, "key {k} acted {acted} times");
        if acted == 1 {
            assert_eq!(store.claim(key, &fp).expect("claim"), Claim::Replay(k as u64 * 1000));
        }
    }
    store.assert_invariants();
}
