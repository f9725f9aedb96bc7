//! A store that fails on purpose: [`Faulty`] wraps any [`KeyStore`] (or
//! [`AsyncKeyStore`]) and answers the
//! operations it is told to fail with [`StoreError::Storage`] and a given message, for
//! tests of what a caller does when its store refuses (a layer that must not leak the
//! message, a notifier that must count a refused completion).
//!
//! ```
//! use idem_core::{Fingerprint, KeyStore, MemoryStore, ScopedKey, StoreConfig};
//! use idem_testkit::faulty::{Faulty, Op};
//!
//! let store = Faulty::new(MemoryStore::<u32>::new(StoreConfig::default()))
//!     .failing(Op::Claim, "disk full");
//! let key = ScopedKey::parse("s", "k")?;
//! let refused = store.claim(&key, &Fingerprint::builder("x").finish());
//! assert!(refused.is_err_and(|e| e.to_string().contains("disk full")));
//! # Ok::<(), idem_core::KeyError>(())
//! ```

use std::sync::atomic::{AtomicUsize, Ordering};

use idem_core::{
    AsyncKeyAdmin, AsyncKeyStore, Claim, Fingerprint, Forgotten, KeyAdmin, KeyRecord, KeyState,
    KeyStore, Lease, PendingClaim, ScopedKey, StoreError,
};

/// An operation of the store contract that [`Faulty`] can fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `claim` (and the default `claim_wait`, which claims).
    Claim,
    /// `complete`.
    Complete,
    /// `release`.
    Release,
    /// `renew`.
    Renew,
    /// `pending`.
    Pending,
    /// `inspect` ([`KeyAdmin`]).
    Inspect,
    /// `forget` ([`KeyAdmin`]).
    Forget,
}

/// `inner`, except that the operations named by [`failing`](Self::failing) fail, and each
/// renewal runs [`before_renew`](Self::before_renew)'s hook first.
#[derive(Debug)]
pub struct Faulty<S> {
    inner: S,
    /// Each failing operation, its message, and how many more calls fail (`None`: all).
    fails: Vec<(Op, &'static str, Option<AtomicUsize>)>,
    /// Completions that take effect and then answer a failure, and how many more do.
    completes_then_fail: Option<(&'static str, AtomicUsize)>,
    before_renew: Option<RenewHook>,
    before_claim: Option<ClaimHook>,
}

/// What runs before each renewal: it may hold the renewal (a store slow to answer) or
/// fail it (an error returned instead of renewing).
type RenewHookFn = dyn Fn(&Lease) -> Result<(), StoreError> + Send + Sync;

struct RenewHook(Box<RenewHookFn>);

/// What runs before each claim: it may fail it, or panic (a store with a bug).
type ClaimHookFn = dyn Fn(&ScopedKey) -> Result<(), StoreError> + Send + Sync;

struct ClaimHook(Box<ClaimHookFn>);

impl std::fmt::Debug for ClaimHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClaimHook")
    }
}

impl std::fmt::Debug for RenewHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RenewHook")
    }
}

impl<S> Faulty<S> {
    /// `inner`, failing nothing yet.
    pub fn new(inner: S) -> Self {
        Self {
            inner,
            fails: Vec::new(),
            completes_then_fail: None,
            before_renew: None,
            before_claim: None,
        }
    }

    /// Runs `hook` before each claim (and each of `claim_wait`'s): its error is the
    /// claim's answer, and it may panic (a store with a bug).
    #[must_use]
    pub fn before_claim(
        mut self,
        hook: impl Fn(&ScopedKey) -> Result<(), StoreError> + Send + Sync + 'static,
    ) -> Self {
        self.before_claim = Some(ClaimHook(Box::new(hook)));
        self
    }

    fn claiming(&self, key: &ScopedKey) -> Result<(), StoreError> {
        self.check(Op::Claim)?;
        self.before_claim.as_ref().map_or(Ok(()), |hook| (hook.0)(key))
    }

    /// Runs `hook` before each renewal of a lease: its error is the renewal's answer (the
    /// lease not renewed), and it may block (a store that holds one lease's renewal).
    #[must_use]
    pub fn before_renew(
        mut self,
        hook: impl Fn(&Lease) -> Result<(), StoreError> + Send + Sync + 'static,
    ) -> Self {
        self.before_renew = Some(RenewHook(Box::new(hook)));
        self
    }

    fn renewing(&self, lease: &Lease) -> Result<(), StoreError> {
        self.check(Op::Renew)?;
        self.before_renew.as_ref().map_or(Ok(()), |hook| (hook.0)(lease))
    }

    /// Fails every `op` with [`StoreError::Storage`] saying `message`.
    #[must_use]
    pub fn failing(mut self, op: Op, message: &'static str) -> Self {
        self.fails.push((op, message, None));
        self
    }

    /// Fails the next `times` calls of `op` with [`StoreError::Storage`] saying `message`,
    /// and lets the later ones through (a store away for a moment).
    #[must_use]
    pub fn failing_first(mut self, op: Op, message: &'static str, times: usize) -> Self {
        self.fails.push((op, message, Some(AtomicUsize::new(times))));
        self
    }

    /// The next `times` completions take effect in the wrapped store and then answer
    /// [`StoreError::Storage`] saying `message` (the connection cut after the write, before
    /// its answer): the caller cannot tell them from completions that failed.
    #[must_use]
    pub fn completing_then_failing(mut self, message: &'static str, times: usize) -> Self {
        self.completes_then_fail = Some((message, AtomicUsize::new(times)));
        self
    }

    /// The answer of a completion that took effect (`done`), or the failure it answers
    /// instead (see [`completing_then_failing`](Self::completing_then_failing)).
    fn completed(&self, done: Result<(), StoreError>) -> Result<(), StoreError> {
        let Some((message, left)) = &self.completes_then_fail else { return done };
        // ORDERING: Relaxed; a count of calls left to fail, which publishes nothing.
        let fails = left.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
        match (done, fails) {
            (Ok(()), Ok(_)) => Err(StoreError::Storage((*message).into())),
            (done, _) => done,
        }
    }

    /// The wrapped store.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    fn check(&self, op: Op) -> Result<(), StoreError> {
        // ORDERING: Relaxed; a count of calls left to fail, which publishes nothing.
        let fails = |left: &Option<AtomicUsize>| {
            left.as_ref().is_none_or(|left| {
                left.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                    .is_ok()
            })
        };
        match self.fails.iter().find(|(o, _, left)| *o == op && fails(left)) {
            Some((_, message, _)) => Err(StoreError::Storage((*message).into())),
            None => Ok(()),
        }
    }
}

impl<R, S: KeyStore<R>> KeyStore<R> for Faulty<S> {
    fn claim(&self, key: &ScopedKey, fingerprint: &Fingerprint) -> Result<Claim<R>, StoreError> {
        self.claiming(key)?;
        self.inner.claim(key, fingerprint)
    }

    fn complete(&self, lease: &Lease, result: R) -> Result<(), StoreError> {
        self.check(Op::Complete)?;
        self.completed(self.inner.complete(lease, result))
    }

    fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        self.check(Op::Release)?;
        self.inner.release(lease)
    }

    fn renew(&self, lease: &Lease) -> Result<Lease, StoreError> {
        self.renewing(lease)?;
        self.inner.renew(lease)
    }

    fn lease(&self) -> std::time::Duration {
        KeyStore::lease(&self.inner)
    }

    fn result_ttl(&self) -> std::time::Duration {
        KeyStore::result_ttl(&self.inner)
    }

    fn sweep(&self) -> Result<usize, StoreError> {
        self.inner.sweep()
    }

    fn pending(&self, max: usize) -> Result<Vec<PendingClaim>, StoreError> {
        self.check(Op::Pending)?;
        self.inner.pending(max)
    }

    fn lookup(
        &self,
        key: &ScopedKey,
        fingerprint: &Fingerprint,
    ) -> Result<KeyState<R>, StoreError> {
        self.inner.lookup(key, fingerprint)
    }

    fn result_bytes_max(&self) -> Option<usize> {
        self.inner.result_bytes_max()
    }
}

impl<R: Send, S: AsyncKeyStore<R>> AsyncKeyStore<R> for Faulty<S> {
    async fn claim(&self, key: &ScopedKey, fp: &Fingerprint) -> Result<Claim<R>, StoreError> {
        self.claiming(key)?;
        self.inner.claim(key, fp).await
    }

    async fn complete(&self, lease: &Lease, result: R) -> Result<(), StoreError> {
        self.check(Op::Complete)?;
        self.completed(self.inner.complete(lease, result).await)
    }

    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        self.check(Op::Release)?;
        self.inner.release(lease).await
    }

    async fn renew(&self, lease: &Lease) -> Result<Lease, StoreError> {
        self.renewing(lease)?;
        self.inner.renew(lease).await
    }

    fn lease(&self) -> std::time::Duration {
        AsyncKeyStore::lease(&self.inner)
    }

    fn result_ttl(&self) -> std::time::Duration {
        AsyncKeyStore::result_ttl(&self.inner)
    }

    async fn sweep(&self) -> Result<usize, StoreError> {
        self.inner.sweep().await
    }

    async fn pending(&self, max: usize) -> Result<Vec<PendingClaim>, StoreError> {
        self.check(Op::Pending)?;
        self.inner.pending(max).await
    }

    async fn lookup(&self, key: &ScopedKey, fp: &Fingerprint) -> Result<KeyState<R>, StoreError> {
        self.inner.lookup(key, fp).await
    }

    fn result_bytes_max(&self) -> Option<usize> {
        self.inner.result_bytes_max()
    }
}

impl<S: KeyAdmin> KeyAdmin for Faulty<S> {
    fn inspect(&self, key: &ScopedKey) -> Result<Option<KeyRecord>, StoreError> {
        self.check(Op::Inspect)?;
        self.inner.inspect(key)
    }

    fn forget(&self, key: &ScopedKey, who: &str, why: &str) -> Result<Forgotten, StoreError> {
        self.check(Op::Forget)?;
        self.inner.forget(key, who, why)
    }
}

impl<S: AsyncKeyAdmin> AsyncKeyAdmin for Faulty<S> {
    async fn inspect(&self, key: &ScopedKey) -> Result<Option<KeyRecord>, StoreError> {
        self.check(Op::Inspect)?;
        self.inner.inspect(key).await
    }

    async fn forget(&self, key: &ScopedKey, who: &str, why: &str) -> Result<Forgotten, StoreError> {
        self.check(Op::Forget)?;
        self.inner.forget(key, who, why).await
    }
}
