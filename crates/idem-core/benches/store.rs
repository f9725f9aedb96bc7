//! Claim+complete on distinct keys, and a replay hit, at 1 and 2 threads: `MemoryStore`
//! (function `idem`) beside two baselines in the same run. `cargo xtask bench idem-core`.
//!
//! * `global_mutex`: the seed's design, one lock around one `HashMap`.
//! * `dashmap`: a claim on a `DashMap` entry (sharded `RwLock`s).
//!
//! `async_contract` runs the same claim+complete through `AsyncKeyStore` (function
//! `idem`, each future polled once: the memory store answers at once) beside the sync
//! `KeyStore` (`sync`), on one thread: what the async contract costs.
//!
//! Both baselines keep the same record (fingerprint, token, in-flight or result) but skip
//! what the store adds: no clock read, no expiry bookkeeping, no capacity check.

// criterion's macros generate undocumented public functions.
#![allow(missing_docs)]

use std::collections::HashMap;
use std::hint::black_box;
use std::sync::Mutex;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use dashmap::DashMap;
use idem_core::{AsyncKeyStore, Claim, Fingerprint, KeyStore, MemoryStore, ScopedKey, StoreConfig};
use idem_testkit::bench;

const POOL: usize = 1 << 18;
const HOT: usize = 1024;

enum Entry {
    InFlight { fp: Fingerprint, token: u64 },
    Done { fp: Fingerprint, result: u64 },
}

/// What every contender offers: claim the key; if acquired, complete it with 1 and return
/// `None`; if finished, return the stored result.
trait Contender: Sync {
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
struct AsyncMemory(MemoryStore<u64>);

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

struct GlobalMutex(Mutex<(HashMap<ScopedKey, Entry>, u64)>);

impl Contender for GlobalMutex {
    fn fresh() -> Self {
        Self(Mutex::new((HashMap::new(), 0)))
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

struct Dash(DashMap<ScopedKey, Entry>, std::sync::atomic::AtomicU64);

impl Contender for Dash {
    fn fresh() -> Self {
        Self(DashMap::new(), Default::default())
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

struct Inputs {
    keys: Vec<ScopedKey>,
    fp: Fingerprint,
}

fn inputs() -> Inputs {
    let keys = (0..POOL)
        .map(|i| ScopedKey::parse("bench", &format!("key-{i}")).expect("valid key"))
        .collect();
    Inputs { keys, fp: Fingerprint::builder("bench").u64("n", 1).finish() }
}

/// Claim+complete on keys never seen before; a fresh contender every `POOL` operations.
fn claim_complete<C: Contender>(inputs: &Inputs, threads: usize, iters: u64) -> Duration {
    let mut total = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let chunk = left.min(POOL as u64);
        let contender = C::fresh();
        total += bench::timed_iters(threads, chunk, |i| {
            black_box(contender.claim(&inputs.keys[i % POOL], &inputs.fp));
        });
        left -= chunk;
    }
    total
}

/// Claims of keys already completed: the replay path.
fn replay<C: Contender>(inputs: &Inputs, threads: usize, iters: u64) -> Duration {
    let contender = C::fresh();
    for key in &inputs.keys[..HOT] {
        contender.claim(key, &inputs.fp);
    }
    bench::timed_iters(threads, iters, |i| {
        let result = contender.claim(&inputs.keys[i % HOT], &inputs.fp);
        assert_eq!(black_box(result), Some(1));
    })
}

fn benches(c: &mut Criterion) {
    let inputs = inputs();
    for (name, run) in [
        (
            "claim_complete",
            [
                claim_complete::<MemoryStore<u64>> as fn(&Inputs, usize, u64) -> Duration,
                claim_complete::<GlobalMutex>,
                claim_complete::<Dash>,
            ],
        ),
        ("replay_hit", [replay::<MemoryStore<u64>>, replay::<GlobalMutex>, replay::<Dash>]),
    ] {
        let mut group = c.benchmark_group(name);
        for threads in [1, 2] {
            for (contender, f) in ["idem", "global_mutex", "dashmap"].into_iter().zip(run) {
                let id = BenchmarkId::new(contender, format!("{threads} threads"));
                group.bench_function(id, |b| b.iter_custom(|iters| f(&inputs, threads, iters)));
            }
        }
        group.finish();
    }
    let mut group = c.benchmark_group("async_contract");
    let contenders = [
        ("idem", claim_complete::<AsyncMemory> as fn(&Inputs, usize, u64) -> Duration),
        ("sync", claim_complete::<MemoryStore<u64>>),
    ];
    for (contender, f) in contenders {
        let id = BenchmarkId::new(contender, "1 threads");
        group.bench_function(id, |b| b.iter_custom(|iters| f(&inputs, 1, iters)));
    }
    group.finish();
}

criterion_group! {
    name = store;
    config = Criterion::default().sample_size(30).measurement_time(Duration::from_secs(3));
    targets = benches
}
criterion_main!(store);
