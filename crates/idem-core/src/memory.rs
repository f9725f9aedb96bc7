//! [`MemoryStore`]: the embedded claimed-key store.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fmt;
use std::hash::BuildHasher;
use std::time::Duration;

use hashbrown::HashTable;

use crate::admin::{Forgotten, KeyAdmin, KeyRecord, RecordState};
use crate::clock::{Clock, SystemClock, Timestamp};
use crate::fingerprint::Fingerprint;
use crate::key::{Scope, ScopedKey};
use crate::store::{
    Claim, FencingToken, KeyState, KeyStore, Lease, PendingClaim, StoreConfig, StoreError,
};
use crate::sync::{Arc, AtomicUsize, Condvar, Mutex, MutexGuard, Ordering};

/// The key hash: foldhash, seeded at random per store. Keys come from callers, so a
/// predictable hash would let one caller pile every key into one bucket (and one shard);
/// a per-store random seed keeps that out of reach of a caller who cannot read the
/// store's memory. foldhash is not a cryptographic hash and need not be one here: the
/// index decides only where a record sits, never whether two requests match (that is the
/// SHA-256 fingerprint's job, compared in full). It costs a fraction of SipHash on the
/// short, validated ASCII keys hashed on every claim, complete and replay.
/// Under loom a fixed-key hasher keeps every model run on the same shard.
/// A simulation seeds it ([`MemoryStore::simulated`]) so that a world replays
/// exactly: which shard a key lands on decides its fencing tokens.
#[cfg(not(loom))]
type KeyHasher = foldhash::fast::SeedableRandomState;
#[cfg(loom)]
type KeyHasher = std::hash::BuildHasherDefault<std::hash::DefaultHasher>;

/// Shards per store: enough that two cores rarely meet on one lock, few enough that a
/// sweep visiting every shard stays cheap. Loom models use two, to stay small.
#[cfg(not(loom))]
const SHARDS: usize = 64;

/// Expired results removed by each completion, at most (more wait for the next one, or
/// for `sweep`). A completion pops every stale expiry entry it meets on the way.
const EAGER_SWEEP_MAX: usize = 2;
#[cfg(loom)]
const SHARDS: usize = 2;

/// The embedded store: records in sharded hash maps, each shard under its own lock.
///
/// * A claim, complete or release takes exactly one shard lock once.
/// * Expiry costs what expired: each shard keeps finished records in a min-heap by
///   expiry, and a sweep pops only what has run out.
/// * A full store sweeps once, then refuses new keys with [`StoreError::StoreFull`]; it
///   never evicts a live record.
/// * [`claim_wait`](KeyStore::claim_wait) sleeps on the shard's condition variable and
///   is woken by the holder's complete or release, not by polling.
/// * Deadlines are set from the precise clock; far from a deadline a check reads only a
///   cached clock (see [`MemoryStore::new`]), near it the precise one.
/// * A result's `Clone` (for a replay or a lookup) and its `Drop` (when a sweep removes
///   it, or a claim takes over an expired one) run under the shard's lock, as a value in
///   any map behind a mutex would: they must not call this store (the lock is not
///   re-entrant: the call waits for ever), and a `Drop` that panics during a sweep leaves
///   the store's record count one too high (a full store then refuses one claim early,
///   and `assert_invariants` says so). Plain data (a `String`, a `Vec`, a struct of them)
///   does neither.
///
/// ```
/// use idem_core::{Claim, Fingerprint, KeyStore, MemoryStore, ScopedKey};
///
/// let store = MemoryStore::<String>::new(Default::default());
/// let key = ScopedKey::parse("customer:7", "order-1")?;
/// let request = Fingerprint::builder("order").u64("amount_minor", 500).finish();
///
/// let Claim::Acquired(lease) = store.claim(&key, &request)? else { unreachable!() };
/// // ... perform the side effect exactly here ...
/// store.complete(&lease, "order 1 placed".to_string())?;
///
/// // A retry of the same request replays the stored answer.
/// assert_eq!(store.claim(&key, &request)?, Claim::Replay("order 1 placed".to_string()));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct MemoryStore<R> {
    shards: Box<[Shard<R>]>,
    /// Sets deadlines (lease and result expiry) and sweeps: the precise clock.
    clock: Arc<dyn Clock>,
    /// The cheap reading for checking deadlines (see [`CheckTime`]): never ahead of
    /// `clock`, possibly behind it.
    check: Arc<dyn Clock>,
    config: StoreConfig,
    /// Records physically present (live or expired but not yet swept), for the capacity
    /// check. Reserved before an insert, so it never exceeds the capacity.
    records: AtomicUsize,
    /// Each key is hashed once per operation; the hash picks the shard and finds the
    /// record in the shard's table.
    hasher: KeyHasher,
    /// In-flight claims per scope, kept only when a scope quota is configured. Locked
    /// after a shard lock, never before one.
    scopes: Mutex<std::collections::HashMap<Scope, usize>>,
}

// Aligned to two cache lines (the unit the x86 adjacent-line prefetcher pulls in), so that
// threads on different shards never write one line: without it a shard (184 bytes) shared
// lines with its neighbours, and a claim on one core and a completion on another on the
// next shard moved the line back and forth.
#[repr(align(128))]
struct Shard<R> {
    state: Mutex<ShardState<R>>,
    /// Woken when an in-flight record with waiters is completed or released.
    changed: Condvar,
}

struct ShardState<R> {
    /// Records by key, found by the key's hash (kept in the record, for rehashing).
    table: HashTable<Record<R>>,
    /// Finished records by expiry, as (expiry, token, key hash); tokens are unique within a
    /// shard, so the token finds the record. An entry whose record has since been replaced
    /// (no record has that token any more) is stale and skipped when popped.
    expiry: BinaryHeap<Reverse<(Timestamp, FencingToken, u64)>>,
    /// Tokens grow per shard; a key always maps to one shard, so per key they grow too.
    next_token: u64,
    /// Threads in `claim_wait` sleeping on this shard's condition variable. A complete or
    /// release notifies only when there is one, so the common path makes no syscall.
    waiters: usize,
    stats: StoreStats,
}

struct Record<R> {
    hash: u64,
    key: ScopedKey,
    fingerprint: Fingerprint,
    token: FencingToken,
    phase: Phase<R>,
}

enum Phase<R> {
    InFlight { lease_expires_at: Timestamp },
    Finished { result: R, expires_at: Timestamp },
}

/// Counters of what a store has answered, for metrics and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Records present now (live, or expired and not yet swept).
    pub records: usize,
    /// Claims answered [`Claim::Acquired`].
    pub acquired: u64,
    /// Claims answered [`Claim::InFlight`].
    pub in_flight: u64,
    /// Claims answered [`Claim::Replay`].
    pub replayed: u64,
    /// Claims answered [`Claim::Recover`].
    pub recovered: u64,
    /// Claims refused with [`StoreError::KeyReused`].
    pub key_reused: u64,
    /// Claims refused with [`StoreError::StoreFull`].
    pub store_full: u64,
    /// Leases completed.
    pub completed: u64,
    /// Leases released.
    pub released: u64,
    /// Completes and releases refused with [`StoreError::LeaseLost`].
    pub lease_lost: u64,
    /// Expired finished records removed by sweeps (explicit, or a few per completion).
    pub swept: u64,
    /// Entries in the expiry index: one per finished record, plus entries of records
    /// taken over since, until a sweep or a completion pops them. Stays near `records`.
    pub expiry_entries: usize,
}

impl StoreStats {
    fn add(&mut self, other: &Self) {
        self.acquired += other.acquired;
        self.in_flight += other.in_flight;
        self.replayed += other.replayed;
        self.recovered += other.recovered;
        self.key_reused += other.key_reused;
        self.store_full += other.store_full;
        self.completed += other.completed;
        self.released += other.released;
        self.lease_lost += other.lease_lost;
        self.swept += other.swept;
    }
}

/// What one locked step of a claim decided.
enum Step<R> {
    Answer(Result<Claim<R>, StoreError>),
    /// The key is new and the store is full: sweep (without the lock), then try again.
    Full,
}

impl<R> fmt::Debug for MemoryStore<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryStore")
            .field("config", &self.config)
            .field("clock", &self.clock)
            // ORDERING: a count read for display; nothing is published through it.
            .field("records", &self.records.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl<R: Clone + Send> MemoryStore<R> {
    /// A store on the system clock.
    ///
    /// Deadlines are set from the system clock. A claim or lookup first reads a cached
    /// copy of it that one background thread per process (`idem-clock`) refreshes every
    /// millisecond: a deadline more than a second beyond that reading is live without a
    /// system call (most replays); a nearer one is judged by the system clock, so a lease
    /// or result expires exactly at its deadline. The copy only ever lags, so only a
    /// thread starved for over a second could keep a record past its deadline, never
    /// expire it early. The thread ends within a millisecond of the last such store being
    /// dropped. [`with_clock`](Self::with_clock) and [`with_clocks`](Self::with_clocks)
    /// start no thread.
    pub fn new(config: StoreConfig) -> Self {
        #[cfg(not(loom))]
        let check: Arc<dyn Clock> = Arc::new(crate::clock::CoarseClock::shared());
        #[cfg(loom)]
        let check: Arc<dyn Clock> = Arc::new(SystemClock);
        Self::with_clocks(config, Arc::new(SystemClock), check)
    }

    /// A store that reads time from `clock` (a [`ManualClock`](crate::ManualClock) in tests),
    /// for setting and for checking deadlines alike. It starts no thread.
    pub fn with_clock(config: StoreConfig, clock: Arc<dyn Clock>) -> Self {
        Self::with_clocks(config, Arc::clone(&clock), clock)
    }

    /// A store that sets deadlines by `clock` and judges a deadline more than a second
    /// away by `check` alone, a cheaper reading that may lag `clock` but must never run
    /// ahead of it (`new` pairs the system clock with the process's cached copy of it; a
    /// simulation can pair its clock with a delayed view). A deadline nearer than that is
    /// judged by `clock`. It starts no thread.
    pub fn with_clocks(config: StoreConfig, clock: Arc<dyn Clock>, check: Arc<dyn Clock>) -> Self {
        let shards = (0..SHARDS)
            .map(|_| Shard {
                state: Mutex::new(ShardState {
                    table: HashTable::new(),
                    expiry: BinaryHeap::new(),
                    next_token: 1,
                    waiters: 0,
                    stats: StoreStats::default(),
                }),
                changed: Condvar::new(),
            })
            .collect();
        let scopes = Mutex::new(std::collections::HashMap::new());
        let records = AtomicUsize::new(0);
        Self { shards, clock, check, config, records, hasher: KeyHasher::default(), scopes }
    }

    /// A store for a deterministic simulation: time from `clock`, as
    /// [`with_clocks`](Self::with_clocks), and the key hash seeded by `seed` instead of at
    /// random, so that the same seed places every key on the same shard (and so gives it
    /// the same fencing tokens) run after run. A service keeps the random seed: a caller
    /// who knows the seed can pile keys onto one shard.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use idem_core::{Clock, ManualClock, MemoryStore, StoreConfig, Timestamp};
    ///
    /// let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(Timestamp::from_millis(0)));
    /// let clocks = (clock.clone(), clock);
    /// let store = MemoryStore::<String>::simulated(StoreConfig::default(), clocks, 7);
    /// assert!(store.is_empty());
    /// ```
    ///
    /// `check` is the cheaper reading of [`with_clocks`](Self::with_clocks), which may lag
    /// `clock` but never run ahead of it: pass `clock` itself for none.
    #[cfg(not(loom))]
    pub fn simulated(
        config: StoreConfig,
        (clock, check): (Arc<dyn Clock>, Arc<dyn Clock>),
        seed: u64,
    ) -> Self {
        static SHARED: foldhash::SharedSeed = foldhash::SharedSeed::from_u64(0x1de5_eed5);
        let mut store = Self::with_clocks(config, clock, check);
        store.hasher = foldhash::fast::SeedableRandomState::with_seed(seed, &SHARED);
        store
    }

    /// The time to check deadlines against (see [`CheckTime`]).
    fn check_time(&self) -> CheckTime<'_> {
        CheckTime { cheap: self.check.now(), precise: &*self.clock }
    }

    /// The limits this store enforces.
    pub fn config(&self) -> &StoreConfig {
        &self.config
    }

    /// Records present now, live or expired but not yet swept.
    pub fn len(&self) -> usize {
        // ORDERING: a counter read for reporting; no data is published through it.
        self.records.load(Ordering::Relaxed)
    }

    /// Whether no record is present.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The counters summed over all shards.
    pub fn stats(&self) -> StoreStats {
        let mut total = StoreStats { records: self.len(), ..StoreStats::default() };
        for shard in self.shards.iter() {
            let state = shard.state.lock();
            total.add(&state.stats);
            total.expiry_entries += state.expiry.len();
        }
        total
    }

    /// Checks the store's internal invariants; tests call it after every step.
    ///
    /// # Panics
    ///
    /// If an invariant is broken (a bug in this crate, never a caller's error): every
    /// finished record has its expiry entry, every token is below its shard's next token,
    /// and the record count matches the maps (when no operation runs concurrently).
    pub fn assert_invariants(&self) {
        let mut present = 0;
        for shard in self.shards.iter() {
            let state = shard.state.lock();
            present += state.table.len();
            for record in &state.table {
                assert_eq!(record.hash, self.hasher.hash_one(&record.key), "hash drifted");
                assert!(record.token.get() < state.next_token, "token from the future");
                if let Phase::Finished { expires_at, .. } = record.phase {
                    let entry = Reverse((expires_at, record.token, record.hash));
                    assert!(state.expiry.iter().any(|e| *e == entry), "finished without expiry");
                }
            }
            let finished =
                state.table.iter().filter(|r| matches!(r.phase, Phase::Finished { .. })).count();
            assert!(state.expiry.len() >= finished, "expiry heap lost entries");
        }
        assert_eq!(present, self.len(), "record count drifted from the maps");
        assert!(present <= self.config.capacity(), "store holds more than its capacity");
    }

    /// The key's hash and its shard. The table inside a shard uses the hash's low bits (the
    /// bucket) and its top 7 bits (the tag that filters candidates before comparing keys),
    /// so the shard takes bits 32 and up: had it taken the top bits, every key in a shard
    /// would share its tag and each lookup would compare keys with many neighbours.
    fn locate(&self, key: &ScopedKey) -> (u64, &Shard<R>) {
        let hash = self.hasher.hash_one(key);
        (hash, &self.shards[(hash >> 32) as usize % self.shards.len()])
    }

    /// Counts one more claim in flight in `key`'s scope, if the quota (when there is one)
    /// allows it.
    ///
    /// RACE (quota): two claims in one scope, on keys in different shards, reach the quota
    /// at once. The count is checked and raised under the one scopes lock, so only one of
    /// them gets the last place. Loom model: `scope_quota_holds_across_shards`.
    fn scope_admits(&self, key: &ScopedKey) -> bool {
        let Some(max) = self.config.scope_in_flight_max() else { return true };
        let mut scopes = self.scopes.lock();
        let in_flight = scopes.entry(key.scope().clone()).or_insert(0);
        if *in_flight >= max {
            return false;
        }
        *in_flight += 1;
        true
    }

    /// Counts one claim in `key`'s scope no longer in flight (completed or released).
    fn scope_settled(&self, key: &ScopedKey) {
        if self.config.scope_in_flight_max().is_none() {
            return;
        }
        let mut scopes = self.scopes.lock();
        if let Some(in_flight) = scopes.get_mut(key.scope()) {
            *in_flight -= 1;
            if *in_flight == 0 {
                scopes.remove(key.scope());
            }
        }
    }

    fn quota_error(&self, key: &ScopedKey) -> StoreError {
        let in_flight_max = self.config.scope_in_flight_max().unwrap_or(usize::MAX);
        StoreError::ScopeQuota { scope: key.scope().clone(), in_flight_max }
    }

    /// Reserves room for one more record, if there is any.
    fn reserve(&self) -> bool {
        let capacity = self.config.capacity();
        // ORDERING: the counter guards only its own value (capacity); the records
        // themselves are published by the shard locks.
        self.records
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| (n < capacity).then_some(n + 1))
            .is_ok()
    }

    /// One claim decision, under the shard lock.
    ///
    /// RACE (check-then-insert): two claimers of one absent key. The lookup and the
    /// insert happen under one lock acquisition, so exactly one sees the key absent.
    /// Loom model: `two_claimers_one_owner`.
    fn claim_locked(
        &self,
        state: &mut ShardState<R>,
        (hash, key): (u64, &ScopedKey),
        fingerprint: &Fingerprint,
        now: &CheckTime<'_>,
    ) -> Step<R> {
        // `now` only checks deadlines; a new lease runs from the precise clock.
        let lease_expires_at = || self.clock.now().saturating_add(self.config.lease());
        let ShardState { table, next_token, stats, .. } = state;
        let mut take_token = || {
            let token = FencingToken::new(*next_token);
            *next_token += 1;
            token
        };
        let Some(record) = table.find_mut(hash, |r| r.key == *key) else {
            if !self.scope_admits(key) {
                return Step::Answer(Err(self.quota_error(key)));
            }
            if !self.reserve() {
                self.scope_settled(key);
                return Step::Full;
            }
            let token = take_token();
            let lease_expires_at = lease_expires_at();
            let phase = Phase::InFlight { lease_expires_at };
            let record = Record { hash, key: key.clone(), fingerprint: *fingerprint, token, phase };
            table.insert_unique(hash, record, |r| r.hash);
            stats.acquired += 1;
            return Step::Answer(Ok(Claim::Acquired(Lease::new(
                key.clone(),
                token,
                lease_expires_at,
            ))));
        };
        let mut relet = |record: &mut Record<R>| {
            let lease_expires_at = lease_expires_at();
            record.token = take_token();
            record.phase = Phase::InFlight { lease_expires_at };
            Lease::new(key.clone(), record.token, lease_expires_at)
        };
        let answer = match &record.phase {
            // An expired result counts as absent, whatever its fingerprint: reuse the slot.
            Phase::Finished { expires_at, .. } if now.reached(*expires_at) => {
                if !self.scope_admits(key) {
                    return Step::Answer(Err(self.quota_error(key)));
                }
                record.fingerprint = *fingerprint;
                stats.acquired += 1;
                Claim::Acquired(relet(record))
            }
            _ if record.fingerprint != *fingerprint => {
                stats.key_reused += 1;
                return Step::Answer(Err(StoreError::KeyReused { key: key.clone() }));
            }
            Phase::Finished { result, .. } => {
                stats.replayed += 1;
                Claim::Replay(result.clone())
            }
            Phase::InFlight { lease_expires_at } if !now.reached(*lease_expires_at) => {
                stats.in_flight += 1;
                Claim::InFlight { retry_after: now.until(*lease_expires_at) }
            }
            Phase::InFlight { .. } => {
                stats.recovered += 1;
                Claim::Recover(relet(record))
            }
        };
        Step::Answer(Ok(answer))
    }

    /// Claims, sweeping once if the store is full. `wait` lets [`KeyStore::claim_wait`]
    /// sleep on the shard between locked attempts.
    fn claim_inner(
        &self,
        key: &ScopedKey,
        fingerprint: &Fingerprint,
        mut wait: impl for<'a> FnMut(
            &'a Shard<R>,
            MutexGuard<'a, ShardState<R>>,
            &Claim<R>,
        ) -> WaitStep<'a, R>,
    ) -> Result<Claim<R>, StoreError> {
        let (hash, shard) = self.locate(key);
        let mut swept_once = false;
        let mut state = shard.state.lock();
        loop {
            let now = self.check_time();
            match self.claim_locked(&mut state, (hash, key), fingerprint, &now) {
                Step::Answer(Ok(claim @ Claim::InFlight { .. })) => {
                    match wait(shard, state, &claim) {
                        WaitStep::Again(guard) => state = guard,
                        WaitStep::Done => return Ok(claim),
                    }
                }
                Step::Answer(answer) => return answer,
                Step::Full if swept_once => {
                    state.stats.store_full += 1;
                    return Err(StoreError::StoreFull { capacity: self.config.capacity() });
                }
                Step::Full => {
                    drop(state);
                    self.sweep_all();
                    swept_once = true;
                    state = shard.state.lock();
                }
            }
        }
    }

    /// Sweeps every shard, up to the configured batch in all; returns how many it removed.
    fn sweep_all(&self) -> usize {
        let now = self.clock.now();
        let mut budget = self.config.sweep_batch_max();
        for shard in self.shards.iter() {
            if budget == 0 {
                break;
            }
            let removed = shard.state.lock().sweep(now, budget);
            // ORDERING: see `reserve`.
            self.records.fetch_sub(removed, Ordering::Relaxed);
            budget -= removed;
        }
        self.config.sweep_batch_max() - budget
    }

    /// Settles the in-flight record that `lease` holds: `finish` turns it into a result
    /// (`Some`) or removes it (`None`). Refuses a lease that no longer holds its key.
    ///
    /// RACE (fencing): a holder whose lease ran out settles while another caller recovers
    /// the key. The token is compared under the same lock that recovery takes to raise
    /// it, so exactly one of them wins. Loom model: `stale_complete_races_recovery`.
    fn settle(&self, lease: &Lease, outcome: Option<R>) -> Result<(), StoreError> {
        let (hash, shard) = self.locate(lease.key());
        let mut state = shard.state.lock();
        let state = &mut *state;
        let held =
            |r: &Record<R>| r.token == lease.token() && matches!(r.phase, Phase::InFlight { .. });
        let Ok(entry) = state.table.find_entry(hash, |r| r.key == *lease.key() && held(r)) else {
            state.stats.lease_lost += 1;
            return Err(StoreError::LeaseLost { key: lease.key().clone(), token: lease.token() });
        };
        // Completed or released, the claim is no longer in flight in its scope.
        self.scope_settled(lease.key());
        match outcome {
            Some(result) => {
                let now = self.clock.now();
                let expires_at = now.saturating_add(self.config.result_ttl());
                entry.into_mut().phase = Phase::Finished { result, expires_at };
                state.expiry.push(Reverse((expires_at, lease.token(), hash)));
                state.stats.completed += 1;
                // Expired results and the entries of records since taken over are removed
                // as time passes, a few per completion, not only when the store is full:
                // the expiry index stays as large as the live records, whatever the load.
                let removed = state.sweep(now, EAGER_SWEEP_MAX);
                // Most completions sweep nothing: skip the shared counter then (a locked
                // instruction on a line every claiming thread writes).
                if removed > 0 {
                    // ORDERING: see `reserve`.
                    self.records.fetch_sub(removed, Ordering::Relaxed);
                }
            }
            None => {
                entry.remove();
                state.stats.released += 1;
                // ORDERING: see `reserve`.
                self.records.fetch_sub(1, Ordering::Relaxed);
            }
        }
        if state.waiters > 0 {
            shard.changed.notify_all();
        }
        Ok(())
    }
}

impl<R: Clone + Send> MemoryStore<R> {
    /// Extends the in-flight record that `lease` holds by a whole lease from now.
    ///
    /// RACE (renewal against recovery): a holder renews as its lease runs out while
    /// another caller recovers the key. Both read and write the token under the shard's
    /// lock: either the renewal lands first (the record is live again, and the claim
    /// answers in flight) or the recovery does (the token is higher, and the renewal is
    /// refused). Loom model: `renewal_races_recovery`.
    fn renew_held(&self, lease: &Lease) -> Result<Lease, StoreError> {
        let (hash, shard) = self.locate(lease.key());
        let mut state = shard.state.lock();
        let held =
            |r: &Record<R>| r.token == lease.token() && matches!(r.phase, Phase::InFlight { .. });
        let Some(record) = state.table.find_mut(hash, |r| r.key == *lease.key() && held(r)) else {
            state.stats.lease_lost += 1;
            return Err(StoreError::LeaseLost { key: lease.key().clone(), token: lease.token() });
        };
        let lease_expires_at = self.clock.now().saturating_add(self.config.lease());
        record.phase = Phase::InFlight { lease_expires_at };
        Ok(Lease::new(lease.key().clone(), lease.token(), lease_expires_at))
    }
}

/// What a waiting claim does after an `InFlight` answer.
enum WaitStep<'a, R> {
    /// Claim again with this (re-acquired) guard.
    Again(MutexGuard<'a, ShardState<R>>),
    /// Return the `InFlight` answer.
    Done,
}

impl<R> ShardState<R> {
    /// Removes up to `max` finished records whose expiry is at or before `now`.
    fn sweep(&mut self, now: Timestamp, max: usize) -> usize {
        let mut removed = 0;
        while removed < max {
            match self.expiry.peek() {
                Some(Reverse((expires_at, _, _))) if *expires_at <= now => {}
                _ => break,
            }
            let Some(Reverse((expires_at, token, hash))) = self.expiry.pop() else { break };
            let current = |r: &Record<R>| {
                r.token == token
                    && matches!(r.phase, Phase::Finished { expires_at: e, .. } if e == expires_at)
            };
            if let Ok(entry) = self.table.find_entry(hash, current) {
                entry.remove();
                removed += 1;
            }
        }
        self.stats.swept += removed as u64;
        removed
    }
}

impl<R: Clone + Send> MemoryStore<R> {
    /// `claim_wait`'s work: claims, and while the key is in flight sleeps on the shard's
    /// condition variable until the holder settles, its lease runs out, or `timeout`.
    fn claim_waiting(
        &self,
        key: &ScopedKey,
        fingerprint: &Fingerprint,
        timeout: Duration,
    ) -> Result<Claim<R>, StoreError> {
        let deadline = crate::store::deadline_after(timeout);
        self.claim_inner(key, fingerprint, |shard, mut state, claim| {
            let left = crate::store::time_left(deadline);
            let Claim::InFlight { retry_after } = claim else { return WaitStep::Done };
            if left.is_zero() {
                return WaitStep::Done;
            }
            // Wake at the latest when the holder's lease runs out, to answer Recover. With
            // a manual clock that moves without real time passing, this is the timeout.
            let nap = left.min((*retry_after).max(crate::store::WAIT_PAUSE_FIRST));
            // RACE (lost wake-up): the holder settles between our check and our sleep.
            // We count ourselves and sleep without ever releasing the lock in between
            // (the condition variable releases it atomically), and `settle` reads the
            // count under the same lock. Loom model: `waiter_wakes_on_complete`.
            state.waiters += 1;
            let mut state = shard.changed.wait_for(state, nap);
            state.waiters -= 1;
            WaitStep::Again(state)
        })
    }
}

impl<R: Clone + Send> KeyStore<R> for MemoryStore<R> {
    fn claim(&self, key: &ScopedKey, fingerprint: &Fingerprint) -> Result<Claim<R>, StoreError> {
        crate::trace::claim(key, || self.claim_inner(key, fingerprint, |_, _, _| WaitStep::Done))
    }

    fn claim_wait(
        &self,
        key: &ScopedKey,
        fingerprint: &Fingerprint,
        timeout: Duration,
    ) -> Result<Claim<R>, StoreError> {
        crate::trace::claim(key, || self.claim_waiting(key, fingerprint, timeout))
    }

    fn complete(&self, lease: &Lease, result: R) -> Result<(), StoreError> {
        crate::trace::settle("complete", lease, || self.settle(lease, Some(result)))
    }

    fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        crate::trace::settle("release", lease, || self.settle(lease, None))
    }

    fn renew(&self, lease: &Lease) -> Result<Lease, StoreError> {
        self.renew_held(lease)
    }

    fn lease(&self) -> Duration {
        self.config.lease()
    }

    fn result_ttl(&self) -> Duration {
        self.config.result_ttl()
    }

    fn sweep(&self) -> Result<usize, StoreError> {
        Ok(self.sweep_all())
    }

    /// Scans the shards: the cost grows with the records held, so call it at a
    /// reconciliation interval, not per request.
    fn pending(&self, max: usize) -> Result<Vec<PendingClaim>, StoreError> {
        let now = self.clock.now();
        let mut found = Vec::new();
        for shard in self.shards.iter() {
            let state = shard.state.lock();
            for record in &state.table {
                if found.len() >= max {
                    return Ok(found);
                }
                if let Phase::InFlight { lease_expires_at } = record.phase
                    && lease_expires_at <= now
                {
                    found.push(PendingClaim {
                        key: record.key.clone(),
                        fingerprint: record.fingerprint,
                        lease_expired_at: lease_expires_at,
                    });
                }
            }
        }
        Ok(found)
    }

    fn lookup(
        &self,
        key: &ScopedKey,
        fingerprint: &Fingerprint,
    ) -> Result<KeyState<R>, StoreError> {
        let now = self.check_time();
        let (hash, shard) = self.locate(key);
        let state = shard.state.lock();
        let Some(record) = state.table.find(hash, |r| r.key == *key) else {
            return Ok(KeyState::Absent);
        };
        Ok(match &record.phase {
            Phase::Finished { expires_at, .. } if now.reached(*expires_at) => KeyState::Absent,
            _ if record.fingerprint != *fingerprint => {
                return Err(StoreError::KeyReused { key: key.clone() });
            }
            Phase::Finished { result, .. } => KeyState::Finished(result.clone()),
            Phase::InFlight { lease_expires_at } if !now.reached(*lease_expires_at) => {
                KeyState::InFlight { retry_after: now.until(*lease_expires_at) }
            }
            Phase::InFlight { lease_expires_at } => {
                KeyState::Pending { lease_expired_at: *lease_expires_at }
            }
        })
    }
}

impl<R> Record<R> {
    /// The record as an operator sees it at `now`; `None` for an expired result.
    fn seen(&self, now: Timestamp) -> Option<KeyRecord> {
        let state = match &self.phase {
            Phase::InFlight { lease_expires_at } => {
                crate::admin::record_state(false, *lease_expires_at, Timestamp::ZERO, now)
            }
            Phase::Finished { expires_at, .. } => {
                crate::admin::record_state(true, Timestamp::ZERO, *expires_at, now)
            }
        }?;
        Some(KeyRecord { fingerprint: self.fingerprint, state })
    }
}

impl<R: Clone + Send> MemoryStore<R> {
    /// RACE (forget against the holder): an operator forgets a key while its holder
    /// renews or completes, or a retry recovers it. The record is read, judged and removed
    /// under the shard's lock that those take: the forget sees the holder live (and
    /// refuses) or the key pending (and removes it, and the holder's token then holds
    /// nothing). Loom model: `forget_races_the_holder`.
    fn forget_now(&self, key: &ScopedKey) -> Forgotten {
        let now = self.clock.now();
        let (hash, shard) = self.locate(key);
        let mut state = shard.state.lock();
        let Ok(entry) = state.table.find_entry(hash, |r| r.key == *key) else {
            return Forgotten::Absent;
        };
        let decision = crate::admin::forget_decision(entry.get().seen(now), now);
        if let Forgotten::Removed(record) = decision {
            entry.remove();
            if matches!(record.state, RecordState::Pending { .. }) {
                self.scope_settled(key);
            }
            // ORDERING: see `reserve`.
            self.records.fetch_sub(1, Ordering::Relaxed);
            // A waiter on the pending claim claims again now: the key is absent.
            if state.waiters > 0 {
                shard.changed.notify_all();
            }
        }
        decision
    }
}

impl<R: Clone + Send> KeyAdmin for MemoryStore<R> {
    fn inspect(&self, key: &ScopedKey) -> Result<Option<KeyRecord>, StoreError> {
        let now = self.clock.now();
        let (hash, shard) = self.locate(key);
        let state = shard.state.lock();
        Ok(state.table.find(hash, |r| r.key == *key).and_then(|r| r.seen(now)))
    }

    fn forget(&self, key: &ScopedKey, who: &str, why: &str) -> Result<Forgotten, StoreError> {
        crate::trace::forgotten(key, who, why, Ok(self.forget_now(key)))
    }
}

/// How far from a deadline the cheap reading decides alone: beyond it, a reading that lags
/// by less than this cannot turn a live record into an expired one or back.
const CHECK_MARGIN: Duration = Duration::from_secs(1);

/// Deadline checks at the cost of one atomic load, exact where it matters: a deadline
/// more than [`CHECK_MARGIN`] after the cheap (possibly lagging) reading is live without
/// asking the precise clock; a nearer one is judged by the precise clock, so a record
/// expires exactly at its deadline unless the cheap reading lags by more than the margin
/// (a starved clock thread), and then only later, never earlier.
struct CheckTime<'a> {
    cheap: Timestamp,
    precise: &'a dyn Clock,
}

impl CheckTime<'_> {
    /// The time to judge `deadline` by.
    fn near(&self, deadline: Timestamp) -> Timestamp {
        if self.cheap.saturating_add(CHECK_MARGIN) < deadline {
            self.cheap
        } else {
            self.precise.now()
        }
    }

    /// Whether `deadline` has passed: a deadline is live while `now < deadline`.
    fn reached(&self, deadline: Timestamp) -> bool {
        self.near(deadline) >= deadline
    }

    /// How long until `deadline`, by the clock that set it: the cheap reading lags, and
    /// a wait told against it would run past the deadline (a 30 s lease answered
    /// `retry_after` 30.001 s). The later of the two readings, so a clock stepped back
    /// never makes the wait longer either.
    fn until(&self, deadline: Timestamp) -> Duration {
        deadline.saturating_duration_since(self.precise.now().max(self.cheap))
    }
}
