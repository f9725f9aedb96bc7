//! The claimed-key store: the contract every backend keeps.

use std::fmt;
use std::time::Duration;

use crate::clock::Timestamp;
use crate::fingerprint::Fingerprint;
use crate::key::{Scope, ScopedKey};

/// A number that grows every time a key is claimed, so that of two leases on one key the
/// later one always has the higher token, and the store can refuse the earlier one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FencingToken(u64);

impl FencingToken {
    /// A token with the given value (for backends that store tokens).
    pub const fn new(value: u64) -> Self {
        Self(value)
    }

    /// The token's value.
    pub const fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Display for FencingToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// The right to act on a key, handed out by a claim and given back by
/// [`KeyStore::complete`] or [`KeyStore::release`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Lease {
    key: ScopedKey,
    token: FencingToken,
    expires_at: Timestamp,
}

impl Lease {
    /// Builds a lease (backends only; callers receive leases from claims).
    pub fn new(key: ScopedKey, token: FencingToken, expires_at: Timestamp) -> Self {
        Self { key, token, expires_at }
    }

    /// The key this lease holds.
    pub fn key(&self) -> &ScopedKey {
        &self.key
    }

    /// The fencing token: higher than that of every earlier lease on the key.
    pub fn token(&self) -> FencingToken {
        self.token
    }

    /// When the lease runs out. After this, another claim of the key is answered
    /// [`Claim::Recover`] and this lease may lose the key.
    pub fn expires_at(&self) -> Timestamp {
        self.expires_at
    }
}

/// The answer to a claim.
///
/// Exhaustive on purpose, unlike the error enums: a new answer would change what every
/// caller must do, so it should break their build rather than fall into a `_` arm.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use = "a claim decides whether the caller may act"]
pub enum Claim<R> {
    /// The key was absent: the caller now owns it and may perform the side effect, then
    /// [`complete`](KeyStore::complete) or [`release`](KeyStore::release) the lease.
    Acquired(Lease),
    /// Another caller holds a live lease: try again after `retry_after`, or use
    /// [`claim_wait`](KeyStore::claim_wait).
    InFlight {
        /// How long until the holder's lease runs out.
        retry_after: Duration,
    },
    /// The operation already finished: here is its stored result. Do not act again.
    Replay(R),
    /// The previous holder's lease ran out (it crashed or hung) before it finished. The
    /// caller now owns the key with a higher fencing token, but the side effect may or may
    /// not have happened: check it (for example ask the gateway) before acting again.
    Recover(Lease),
}

impl<R> Claim<R> {
    /// The lease, if this claim handed one out (`Acquired` or `Recover`).
    pub fn lease(&self) -> Option<&Lease> {
        match self {
            Self::Acquired(lease) | Self::Recover(lease) => Some(lease),
            Self::InFlight { .. } | Self::Replay(_) => None,
        }
    }
}

/// Why a store refused an operation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The key is held or finished for a request with a different fingerprint. The
    /// original record is untouched; the caller must use a new key for a new request.
    #[error("key {key} was used for a different request")]
    KeyReused {
        /// The key that was reused.
        key: ScopedKey,
    },
    /// The store holds `capacity` live records and refuses new keys until some finish and
    /// expire or are released. It never evicts a live record to make room.
    #[error(
        "store is full: {capacity} live records; sweep expired records, or raise the capacity \
         (StoreConfigBuilder::capacity)"
    )]
    StoreFull {
        /// The configured capacity.
        capacity: usize,
    },
    /// The scope already holds its quota of claims in flight
    /// ([`StoreConfigBuilder::scope_in_flight_max`]); the new claim is refused and nothing
    /// changes. Finish or reconcile that scope's pending claims first.
    #[error("scope {scope} holds {in_flight_max} claims in flight already")]
    ScopeQuota {
        /// The scope at its quota.
        scope: Scope,
        /// The configured quota.
        in_flight_max: usize,
    },
    /// The lease no longer holds its key: it was taken over after expiring, or the key was
    /// already completed or released. Nothing was changed.
    #[error("lease {token} on key {key} is no longer held")]
    LeaseLost {
        /// The key of the refused lease.
        key: ScopedKey,
        /// The token of the refused lease.
        token: FencingToken,
    },
    /// The backend failed (I/O, a lost connection, a corrupt file). Whether the operation
    /// took effect is unknown; a claim left pending is settled by recovery.
    #[error("storage failed: {0}")]
    Storage(Box<dyn std::error::Error + Send + Sync>),
}

/// The limits every store enforces; built by [`StoreConfig::builder`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreConfig {
    result_ttl: Duration,
    lease: Duration,
    capacity: usize,
    sweep_batch_max: usize,
    scope_in_flight_max: Option<usize>,
}

/// A setting was refused: which one, the value given, and what it accepts. Every idem
/// crate's configuration is refused in this one shape (the pool's, the HTTP layer's, the
/// notifier's re-export it), so a caller reads any of them the same way.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{setting} is {value}; it must be {accepted}")]
#[non_exhaustive]
pub struct ConfigError {
    /// Which setting (`lease`, `max_size`, `response_bytes_max`, ...).
    pub setting: &'static str,
    /// The refused value, as given.
    pub value: String,
    /// What the setting accepts (`between 1 and 1024`, `at least 1ms`, ...).
    pub accepted: String,
}

impl ConfigError {
    /// `setting` was given `value`; it accepts `accepted`.
    pub fn new(setting: &'static str, value: impl fmt::Debug, accepted: impl Into<String>) -> Self {
        Self { setting, value: format!("{value:?}"), accepted: accepted.into() }
    }
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            result_ttl: StoreConfig::RESULT_TTL_DEFAULT,
            lease: StoreConfig::LEASE_DEFAULT,
            capacity: StoreConfig::CAPACITY_DEFAULT,
            sweep_batch_max: StoreConfig::SWEEP_BATCH_DEFAULT,
            scope_in_flight_max: None,
        }
    }
}

impl StoreConfig {
    /// How long a finished result is replayed: 24 hours.
    pub const RESULT_TTL_DEFAULT: Duration = Duration::from_secs(24 * 60 * 60);
    /// How long a claim is held before another claimer may recover it: 30 seconds.
    pub const LEASE_DEFAULT: Duration = Duration::from_secs(30);
    /// How many records a store holds: 1,000,000.
    pub const CAPACITY_DEFAULT: usize = 1_000_000;
    /// The largest accepted capacity: 2^32 records.
    pub const CAPACITY_MAX: usize = 1 << 32;
    /// How many expired records one sweep removes at most: 1024.
    pub const SWEEP_BATCH_DEFAULT: usize = 1024;
    /// The largest accepted sweep batch.
    pub const SWEEP_BATCH_MAX: usize = 1 << 20;

    /// A builder starting from the defaults.
    ///
    /// ```
    /// use std::time::Duration;
    /// use idem_core::StoreConfig;
    ///
    /// let config = StoreConfig::builder()
    ///     .lease(Duration::from_secs(10))
    ///     .capacity(10_000)
    ///     .build()?;
    /// assert_eq!(config.lease(), Duration::from_secs(10));
    /// assert_eq!(config.result_ttl(), StoreConfig::RESULT_TTL_DEFAULT);
    /// # Ok::<(), idem_core::ConfigError>(())
    /// ```
    pub fn builder() -> StoreConfigBuilder {
        StoreConfigBuilder { config: Self::default() }
    }

    /// How long a finished result is replayed.
    pub fn result_ttl(&self) -> Duration {
        self.result_ttl
    }

    /// How long a claim is held before it may be recovered.
    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// The most records the store holds.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The most expired records one sweep removes.
    pub fn sweep_batch_max(&self) -> usize {
        self.sweep_batch_max
    }

    /// The most claims one scope may hold in flight at once, if limited.
    pub fn scope_in_flight_max(&self) -> Option<usize> {
        self.scope_in_flight_max
    }
}

/// Builds a validated [`StoreConfig`]; every setter names its default.
#[derive(Debug, Clone)]
pub struct StoreConfigBuilder {
    config: StoreConfig,
}

impl StoreConfigBuilder {
    /// How long a finished result is replayed; default 24 hours, at least 1ms.
    #[must_use]
    pub fn result_ttl(mut self, ttl: Duration) -> Self {
        self.config.result_ttl = ttl;
        self
    }

    /// How long a claim is held before another claimer may recover it; default 30
    /// seconds, at least 1ms. Choose it longer than the slowest side effect.
    #[must_use]
    pub fn lease(mut self, lease: Duration) -> Self {
        self.config.lease = lease;
        self
    }

    /// The most records held, finished or in flight; default 1,000,000, at most 2^32.
    #[must_use]
    pub fn capacity(mut self, capacity: usize) -> Self {
        self.config.capacity = capacity;
        self
    }

    /// The most expired records one sweep removes; default 1024, at most 2^20.
    #[must_use]
    pub fn sweep_batch_max(mut self, batch: usize) -> Self {
        self.config.sweep_batch_max = batch;
        self
    }

    /// The most claims one scope (one tenant) may hold in flight at once; default
    /// unlimited, 1 to 2^32. In-flight claims abandoned by crashed callers stay until
    /// recovered, and without a quota one tenant could fill the store's capacity for all;
    /// past it a new claim in that scope is refused with [`StoreError::ScopeQuota`]
    /// (replays and recoveries are not new claims and are never refused by it).
    #[must_use]
    pub fn scope_in_flight_max(mut self, max: usize) -> Self {
        self.config.scope_in_flight_max = Some(max);
        self
    }

    /// Checks every setting.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] naming the first setting out of range.
    pub fn build(self) -> Result<StoreConfig, ConfigError> {
        let c = self.config;
        for (name, value) in [("result_ttl", c.result_ttl), ("lease", c.lease)] {
            if value < Duration::from_millis(1) {
                return Err(ConfigError::new(name, value, "at least 1ms"));
            }
        }
        let counts = [
            ("capacity", c.capacity, StoreConfig::CAPACITY_MAX),
            ("sweep_batch_max", c.sweep_batch_max, StoreConfig::SWEEP_BATCH_MAX),
            ("scope_in_flight_max", c.scope_in_flight_max.unwrap_or(1), StoreConfig::CAPACITY_MAX),
        ];
        for (name, value, max) in counts {
            if value == 0 || value > max {
                return Err(ConfigError::new(name, value, format!("between 1 and {max}")));
            }
        }
        Ok(c)
    }
}

/// The first pause of a caller that polls a key held by another ([`KeyStore::claim_wait`]'s
/// default, idem-http's `wait_for_first`): 1 ms, short enough that a holder about to
/// finish is seen at once.
pub const WAIT_PAUSE_FIRST: Duration = Duration::from_millis(1);
/// The longest pause between two polls: 50 ms, so a waiter sees a finished holder within
/// that, and a thousand waiters poll a store at most 20,000 times a second.
pub const WAIT_PAUSE_MAX: Duration = Duration::from_millis(50);

/// The pause after `pause`: doubled, at most [`WAIT_PAUSE_MAX`].
pub fn next_wait_pause(pause: Duration) -> Duration {
    (pause * 2).min(WAIT_PAUSE_MAX)
}

/// A claimed-key store: one small state machine per key.
///
/// ```text
/// absent --claim--> in flight --complete--> finished --ttl--> absent
///                      |   \--release--> absent
///                      \--lease runs out, claim--> in flight (Recover, higher token)
/// ```
///
/// A record is live while `now < deadline`: a lease whose deadline equals the clock has
/// run out, and so has a result whose expiry equals the clock. Backends may do I/O and
/// fail; every method can return [`StoreError::Storage`].
pub trait KeyStore<R>: Send + Sync {
    /// Claims `key` for the request with fingerprint `fingerprint`.
    ///
    /// # Errors
    ///
    /// [`StoreError::KeyReused`] if the key is live for another fingerprint,
    /// [`StoreError::StoreFull`] if the key is new and the store is at capacity,
    /// [`StoreError::Storage`] if the backend failed.
    fn claim(&self, key: &ScopedKey, fingerprint: &Fingerprint) -> Result<Claim<R>, StoreError>;

    /// Claims `key`, and while another caller holds it, waits up to `timeout` for that
    /// holder to complete (then returns [`Claim::Replay`]), release (then
    /// [`Claim::Acquired`]) or lose its lease (then [`Claim::Recover`]). Returns
    /// [`Claim::InFlight`] if the holder still holds the key when `timeout` has passed.
    ///
    /// The default polls [`claim`](Self::claim) with a growing pause
    /// ([`WAIT_PAUSE_FIRST`] doubling to [`WAIT_PAUSE_MAX`], never past the holder's lease
    /// or the timeout); a backend that can be notified overrides it.
    ///
    /// # Errors
    ///
    /// As [`claim`](Self::claim).
    fn claim_wait(
        &self,
        key: &ScopedKey,
        fingerprint: &Fingerprint,
        timeout: Duration,
    ) -> Result<Claim<R>, StoreError> {
        let deadline = deadline_after(timeout);
        let mut pause = WAIT_PAUSE_FIRST;
        loop {
            let claim = self.claim(key, fingerprint)?;
            let Claim::InFlight { retry_after } = claim else { return Ok(claim) };
            let left = time_left(deadline);
            if left.is_zero() {
                return Ok(claim);
            }
            crate::sync::sleep(pause.min(left).min(retry_after.max(WAIT_PAUSE_FIRST)));
            pause = next_wait_pause(pause);
        }
    }

    /// Stores `result` as the outcome of the leased operation: later claims replay it
    /// until the result TTL ends. A lease that has run out but was not taken over still
    /// completes, since no one else can have acted on the key.
    ///
    /// # Errors
    ///
    /// [`StoreError::LeaseLost`] if the lease no longer holds the key (it was recovered
    /// by a later claim, or the key was completed or released already); nothing changes.
    /// [`StoreError::Storage`] if the backend failed.
    fn complete(&self, lease: &Lease, result: R) -> Result<(), StoreError>;

    /// Gives the key back because the attempt failed before any side effect: the key is
    /// absent again and the next claim is [`Claim::Acquired`]. Never release after a side
    /// effect may have happened; leave the claim pending for recovery instead.
    ///
    /// # Errors
    ///
    /// As [`complete`](Self::complete).
    fn release(&self, lease: &Lease) -> Result<(), StoreError>;

    /// Extends the lease its holder still holds by a whole [`StoreConfig::lease`] from now
    /// (the store's clock), and returns the extended lease: same key, same token, a later
    /// [`Lease::expires_at`]. A holder whose work may outlast its lease renews it, say
    /// every quarter of the lease, so no duplicate recovers the key while it still works. A
    /// lease that ran out but was not taken over still renews (as it still completes).
    ///
    /// # Errors
    ///
    /// [`StoreError::LeaseLost`] if the lease no longer holds the key (recovered by a later
    /// claim with a higher token, completed or released): nothing changes, and the holder
    /// must not store its result as if it held the key. [`StoreError::Storage`] if the
    /// backend failed.
    fn renew(&self, lease: &Lease) -> Result<Lease, StoreError>;

    /// How long a claim holds its key ([`StoreConfig::lease`]): a holder that renews
    /// does so well within it (idem-http and idem-payments renew every quarter of it).
    fn lease(&self) -> Duration;

    /// How long a finished result is replayed ([`StoreConfig::result_ttl`]): what a
    /// caller may tell its client about a key's lifetime.
    fn result_ttl(&self) -> Duration;

    /// Removes up to the configured batch of finished records whose TTL has ended, and
    /// returns how many it removed. In-flight claims are never removed, even with their
    /// lease run out: they are for [`Claim::Recover`].
    ///
    /// # Errors
    ///
    /// [`StoreError::Storage`] if the backend failed.
    fn sweep(&self) -> Result<usize, StoreError>;

    /// Up to `max` in-flight claims whose lease has run out: their holder crashed or hung
    /// after claiming, and the side effect may or may not have happened. A reconciler
    /// claims each (getting [`Claim::Recover`]), checks the real side effect, and
    /// completes or releases. Listing changes nothing.
    ///
    /// # Errors
    ///
    /// [`StoreError::Storage`] if the backend failed.
    fn pending(&self, max: usize) -> Result<Vec<PendingClaim>, StoreError>;

    /// Reads the state of `key` for the request with `fingerprint`, changing nothing: an
    /// absent key stays absent (a claim would acquire it and leave a record), a pending
    /// claim is not recovered, no lease is handed out. A status endpoint or a reconciler
    /// that only wants to know asks this, not [`claim`](Self::claim).
    ///
    /// # Errors
    ///
    /// [`StoreError::KeyReused`] if the key is live for another fingerprint (its result
    /// is never shown to another request); [`StoreError::Storage`] if the backend failed.
    fn lookup(&self, key: &ScopedKey, fingerprint: &Fingerprint)
    -> Result<KeyState<R>, StoreError>;

    /// The largest result this store can keep, in bytes of its encoding
    /// (idem-durable's `Durable::encode`), or `None` if it keeps any
    /// result whole (the memory store keeps the value itself). A caller that could hand
    /// the store a larger result (an HTTP layer storing responses, say) reads this when
    /// it is built and refuses a configuration that disagrees, so a result is never
    /// dropped at `complete` time. The default is `None`.
    fn result_bytes_max(&self) -> Option<usize> {
        None
    }
}

/// The state of a key, as read by [`KeyStore::lookup`]. Exhaustive on purpose, as
/// [`Claim`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyState<R> {
    /// No live record: never claimed, released, or its result's TTL has ended. A claim
    /// would acquire it.
    Absent,
    /// A holder's lease is live; it runs out after `retry_after`.
    InFlight {
        /// How long until the holder's lease runs out.
        retry_after: Duration,
    },
    /// Claimed, and the lease ran out without a complete or release: its side effect
    /// may or may not have happened. The next claim recovers it.
    Pending {
        /// When its lease ran out.
        lease_expired_at: Timestamp,
    },
    /// Finished: the result a claim with this fingerprint replays.
    Finished(R),
}

/// The instant `timeout` from now, or `None` (no deadline) for a timeout too long to add
/// to the clock, such as `Duration::MAX`.
pub(crate) fn deadline_after(timeout: Duration) -> Option<crate::sync::Instant> {
    crate::sync::Instant::now().checked_add(timeout)
}

/// The time left until `deadline` (`Duration::MAX` without one).
pub(crate) fn time_left(deadline: Option<crate::sync::Instant>) -> Duration {
    deadline.map_or(Duration::MAX, |d| d.saturating_duration_since(crate::sync::Instant::now()))
}

/// An in-flight claim whose lease has run out, as listed by [`KeyStore::pending`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingClaim {
    /// The claimed key.
    pub key: ScopedKey,
    /// The fingerprint of the request that claimed it: a reconciler claims with it.
    pub fingerprint: Fingerprint,
    /// When its lease ran out.
    pub lease_expired_at: Timestamp,
}

/// A shared store is a store: several processors (or a processor and a test) can hold one
/// backend through an `Arc`.
impl<R, S: KeyStore<R> + ?Sized> KeyStore<R> for crate::sync::Arc<S> {
    fn claim(&self, key: &ScopedKey, fingerprint: &Fingerprint) -> Result<Claim<R>, StoreError> {
        (**self).claim(key, fingerprint)
    }

    fn claim_wait(
        &self,
        key: &ScopedKey,
        fingerprint: &Fingerprint,
        timeout: Duration,
    ) -> Result<Claim<R>, StoreError> {
        (**self).claim_wait(key, fingerprint, timeout)
    }

    fn complete(&self, lease: &Lease, result: R) -> Result<(), StoreError> {
        (**self).complete(lease, result)
    }

    fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        (**self).release(lease)
    }

    fn renew(&self, lease: &Lease) -> Result<Lease, StoreError> {
        (**self).renew(lease)
    }

    fn lease(&self) -> Duration {
        (**self).lease()
    }

    fn result_ttl(&self) -> Duration {
        (**self).result_ttl()
    }

    fn sweep(&self) -> Result<usize, StoreError> {
        (**self).sweep()
    }

    fn pending(&self, max: usize) -> Result<Vec<PendingClaim>, StoreError> {
        (**self).pending(max)
    }

    fn lookup(
        &self,
        key: &ScopedKey,
        fingerprint: &Fingerprint,
    ) -> Result<KeyState<R>, StoreError> {
        (**self).lookup(key, fingerprint)
    }

    fn result_bytes_max(&self) -> Option<usize> {
        (**self).result_bytes_max()
    }
}
