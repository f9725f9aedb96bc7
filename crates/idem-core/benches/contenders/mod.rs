//! The contenders both benches run: the memory store (sync and through the async
//! contract) and two baselines that keep the same record but skip what the store adds
//! (no clock read, no expiry bookkeeping, no capacity check).

use std::collections::HashMap;
use std::sync::Mutex;

use dashmap::DashMap;
use idem_core::{AsyncKeyStore, Claim, Fingerprint, KeyStore, MemoryStore, ScopedKey, StoreConfig};
use idem_testkit::bench::FixedKeys;

pub(crate) const POOL: usize = 1 << 18;
pub(crate) const HOT: usize = 1024;

enum Entry {
    InFlight { fp: Fingerprint, token: u64 },
    Done { fp: Fingerprint, result: u64 },
}

/// What every contender offers: claim the key; if acquired, complete it with 1 and return
/// `None`; if finished, return the stored result.
pub(crate) trait Contender: Sync {
    fn fresh() -> Self;
    fn claim(&self, key: &ScopedKey, fp: &Fingerprint) -> Option<u64>;
}

impl Contender for MemoryStore<u64> {
    fn fresh() -> Self {
        let config = StoreConfig::builder().capacity(POOL * 2).build().expect("valid config");
        MemoryStore::new(config)
    }
    fn claim(&self, key: &ScopedKey, fp: &Fingerprint) -> Option<u64> {
        match KeyStore::claim(self, key, fp).expect("claim") {
            Claim::Acquired(lease) => {
                KeyStore::complete(self, &lease, 1).expect("complete");
                None
            }
            Claim::Replay(r) => Some(r),
            other => panic!("unexpected {other:?}"),
        }
    }
}

/// The memory store through the async contract.
pub(crate) struct AsyncMemory(MemoryStore<u64>);

/// The value of a future that is ready at its first poll, as the memory store's are.
fn at_once<T>(future: impl std::future::Future<Output = T>) -> T {
    let mut future = std::pin::pin!(future);
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    match future.as_mut().poll(&mut context) {
        std::task::Poll::Ready(value) => value,
        std::task::Poll::Pending => unreachable!("the memory store answers at once"),
    }
}

impl Contender for AsyncMemory {
    fn fresh() -> Self {
        Self(MemoryStore::fresh())
    }
    fn claim(&self, key: &ScopedKey, fp: &Fingerprint) -> Option<u64> {
        match at_once(AsyncKeyStore::claim(&self.0, key, fp)).expect("claim") {
            Claim::Acquired(lease) => {
                at_once(AsyncKeyStore::complete(&self.0, &lease, 1)).expect("complete");
                None
            }
            Claim::Replay(r) => Some(r),
            other => panic!("unexpected {other:?}"),
        }
    }
}

pub(crate) struct GlobalMutex(Mutex<(HashMap<ScopedKey, Entry, FixedKeys>, u64)>);

impl Contender for GlobalMutex {
    fn fresh() -> Self {
        Self(Mutex::new((HashMap::default(), 0)))
    }
    fn claim(&self, key: &ScopedKey, fp: &Fingerprint) -> Option<u64> {
        let mut guard = self.0.lock().expect("not poisoned");
        let (map, next) = &mut *guard;
        match map.get(key) {
            Some(Entry::Done { fp: f, result }) if f == fp => return Some(*result),
            Some(_) => panic!("unexpected"),
            None => {}
        }
        *next += 1;
        let token = *next;
        map.insert(key.clone(), Entry::InFlight { fp: *fp, token });
        drop(guard);
        let mut guard = self.0.lock().expect("not poisoned");
        if let Some(entry) = guard.0.get_mut(key)
            && let Entry::InFlight { fp, token: t } = *entry
            && t == token
        {
            *entry = Entry::Done { fp, result: 1 };
        }
        None
    }
}

pub(crate) struct Dash(DashMap<ScopedKey, Entry, FixedKeys>, std::sync::atomic::AtomicU64);

impl Contender for Dash {
    fn fresh() -> Self {
        Self(DashMap::default(), Default::default())
    }
    fn claim(&self, key: &ScopedKey, fp: &Fingerprint) -> Option<u64> {
        let token = match self.0.entry(key.clone()) {
            dashmap::Entry::Occupied(e) => match e.get() {
                Entry::Done { fp: f, result } if f == fp => return Some(*result),
                _ => panic!("unexpected"),
            },
            dashmap::Entry::Vacant(v) => {
                let token = self.1.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                v.insert(Entry::InFlight { fp: *fp, token });
                token
            }
        };
        if let Some(mut entry) = self.0.get_mut(key)
            && let Entry::InFlight { fp, token: t } = *entry
            && t == token
        {
            *entry = Entry::Done { fp, result: 1 };
        }
        None
    }
}

pub(crate) struct Inputs {
    pub(crate) keys: Vec<ScopedKey>,
    pub(crate) fp: Fingerprint,
}

pub(crate) fn inputs() -> Inputs {
    let keys = (0..POOL)
        .map(|i| ScopedKey::parse("bench", &format!("key-{i}")).expect("valid key"))
        .collect();
    Inputs { keys, fp: Fingerprint::builder("bench").u64("n", 1).finish() }
}
