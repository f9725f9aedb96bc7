//! The store contract for async callers: [`AsyncKeyStore`], the same state machine as
//! [`KeyStore`] with methods that return futures.

use std::future::Future;
use std::time::{Duration, Instant};

use crate::fingerprint::Fingerprint;
use crate::key::ScopedKey;
use crate::memory::MemoryStore;
use crate::store::{
    Claim, KeyState, KeyStore, Lease, PendingClaim, StoreError, WAIT_PAUSE_FIRST, next_wait_pause,
};

/// The timer an async claim-and-wait naps on: the caller's runtime's, so that a paused
/// or simulated clock (tokio's `start_paused`, turmoil) governs the wait as it does the
/// caller's other timers. idem-core has no runtime of its own.
pub trait Timer: Send + Sync {
    /// The runtime's reading of now.
    fn now(&self) -> Instant;
    /// A future that is ready `pause` from now.
    fn sleep(&self, pause: Duration) -> impl Future<Output = ()> + Send;
}

/// A claimed-key store for async callers: the [`KeyStore`] state machine, the same
/// answers and the same errors, with each method a future, so a backend that talks to a
/// database over the network (tokio-postgres) or to a writer thread (SQLite) never parks
/// a runtime thread while it waits.
///
/// ```text
/// absent --claim--> in flight --complete--> finished --ttl--> absent
///                    |  ^  \--release--> absent
///                    |  \--renew (same token, later deadline)
///                    \--lease runs out, claim--> in flight (Recover, higher token)
/// ```
///
/// Which contract a backend implements: this one if its calls wait on I/O (a network
/// database, a writer thread); [`KeyStore`] if it answers from memory or serves threads.
/// [`MemoryStore`] implements both without a hop: its calls take one lock for well under
/// a microsecond and are answered on the caller's task.
///
/// ```
/// use idem_core::{AsyncKeyStore, Claim, Fingerprint, MemoryStore, ScopedKey};
///
/// # async fn checkout() -> Result<(), Box<dyn std::error::Error>> {
/// let store = MemoryStore::<String>::new(Default::default());
/// let key = ScopedKey::parse("customer:7", "order-1")?;
/// let request = Fingerprint::builder("order").u64("amount_minor", 500).finish();
/// let Claim::Acquired(lease) = AsyncKeyStore::claim(&store, &key, &request).await? else {
///     unreachable!("an absent key is acquired")
/// };
/// AsyncKeyStore::complete(&store, &lease, "placed".to_string()).await?;
/// # Ok(())
/// # }
/// ```
pub trait AsyncKeyStore<R>: Send + Sync {
    /// As [`KeyStore::claim`].
    ///
    /// # Errors
    ///
    /// As [`KeyStore::claim`].
    fn claim(
        &self,
        key: &ScopedKey,
        fingerprint: &Fingerprint,
    ) -> impl Future<Output = Result<Claim<R>, StoreError>> + Send;

    /// As [`KeyStore::claim_wait`], napping on `timer` between claims: the pauses start
    /// at [`WAIT_PAUSE_FIRST`] and double to [`WAIT_PAUSE_MAX`](crate::WAIT_PAUSE_MAX),
    /// never past the holder's lease or the timeout, and the timeout is read on `timer`.
    ///
    /// # Errors
    ///
    /// As [`KeyStore::claim`].
    fn claim_wait(
        &self,
        key: &ScopedKey,
        fingerprint: &Fingerprint,
        timeout: Duration,
        timer: &impl Timer,
    ) -> impl Future<Output = Result<Claim<R>, StoreError>> + Send
    where
        R: Send,
    {
        async move {
            let deadline = timer.now().checked_add(timeout);
            let mut pause = WAIT_PAUSE_FIRST;
            loop {
                let claim = self.claim(key, fingerprint).await?;
                let Claim::InFlight { retry_after } = claim else { return Ok(claim) };
                let now = timer.now();
                let left = deadline.map_or(Duration::MAX, |d| d.saturating_duration_since(now));
                if left.is_zero() {
                    return Ok(claim);
                }
                timer.sleep(pause.min(left).min(retry_after.max(WAIT_PAUSE_FIRST))).await;
                pause = next_wait_pause(pause);
            }
        }
    }

    /// As [`KeyStore::complete`].
    ///
    /// # Errors
    ///
    /// As [`KeyStore::complete`].
    fn complete(
        &self,
        lease: &Lease,
        result: R,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// As [`KeyStore::release`].
    ///
    /// # Errors
    ///
    /// As [`KeyStore::release`].
    fn release(&self, lease: &Lease) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// As [`KeyStore::renew`].
    ///
    /// # Errors
    ///
    /// As [`KeyStore::renew`].
    fn renew(&self, lease: &Lease) -> impl Future<Output = Result<Lease, StoreError>> + Send;

    /// As [`KeyStore::lease`]: how long a claim holds its key.
    fn lease(&self) -> Duration;

    /// As [`KeyStore::result_ttl`]: how long a finished result is replayed.
    fn result_ttl(&self) -> Duration;

    /// As [`KeyStore::sweep`].
    ///
    /// # Errors
    ///
    /// As [`KeyStore::sweep`].
    fn sweep(&self) -> impl Future<Output = Result<usize, StoreError>> + Send;

    /// As [`KeyStore::pending`].
    ///
    /// # Errors
    ///
    /// As [`KeyStore::pending`].
    fn pending(
        &self,
        max: usize,
    ) -> impl Future<Output = Result<Vec<PendingClaim>, StoreError>> + Send;

    /// As [`KeyStore::lookup`].
    ///
    /// # Errors
    ///
    /// As [`KeyStore::lookup`].
    fn lookup(
        &self,
        key: &ScopedKey,
        fingerprint: &Fingerprint,
    ) -> impl Future<Output = Result<KeyState<R>, StoreError>> + Send;

    /// As [`KeyStore::result_bytes_max`]; the default is `None`.
    fn result_bytes_max(&self) -> Option<usize> {
        None
    }
}

/// The memory store answers async callers on their own task: each call takes one shard
/// lock, briefly, and never waits on I/O.
impl<R: Clone + Send + Sync> AsyncKeyStore<R> for MemoryStore<R> {
    async fn claim(&self, key: &ScopedKey, fingerprint: &Fingerprint) -> ClaimResult<R> {
        KeyStore::claim(self, key, fingerprint)
    }

    async fn complete(&self, lease: &Lease, result: R) -> Result<(), StoreError> {
        KeyStore::complete(self, lease, result)
    }

    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        KeyStore::release(self, lease)
    }

    async fn renew(&self, lease: &Lease) -> Result<Lease, StoreError> {
        KeyStore::renew(self, lease)
    }

    fn lease(&self) -> Duration {
        KeyStore::lease(self)
    }

    fn result_ttl(&self) -> Duration {
        KeyStore::result_ttl(self)
    }

    async fn sweep(&self) -> Result<usize, StoreError> {
        KeyStore::sweep(self)
    }

    async fn pending(&self, max: usize) -> Result<Vec<PendingClaim>, StoreError> {
        KeyStore::pending(self, max)
    }

    async fn lookup(
        &self,
        key: &ScopedKey,
        fingerprint: &Fingerprint,
    ) -> Result<KeyState<R>, StoreError> {
        KeyStore::lookup(self, key, fingerprint)
    }

    fn result_bytes_max(&self) -> Option<usize> {
        KeyStore::result_bytes_max(self)
    }
}

type ClaimResult<R> = Result<Claim<R>, StoreError>;

/// A shared store is a store, as for [`KeyStore`].
impl<R: Send, S: AsyncKeyStore<R> + ?Sized> AsyncKeyStore<R> for crate::sync::Arc<S> {
    fn claim(
        &self,
        key: &ScopedKey,
        fingerprint: &Fingerprint,
    ) -> impl Future<Output = ClaimResult<R>> + Send {
        (**self).claim(key, fingerprint)
    }

    fn claim_wait(
        &self,
        key: &ScopedKey,
        fingerprint: &Fingerprint,
        timeout: Duration,
        timer: &impl Timer,
    ) -> impl Future<Output = ClaimResult<R>> + Send {
        (**self).claim_wait(key, fingerprint, timeout, timer)
    }

    fn complete(
        &self,
        lease: &Lease,
        result: R,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        (**self).complete(lease, result)
    }

    fn release(&self, lease: &Lease) -> impl Future<Output = Result<(), StoreError>> + Send {
        (**self).release(lease)
    }

    fn renew(&self, lease: &Lease) -> impl Future<Output = Result<Lease, StoreError>> + Send {
        (**self).renew(lease)
    }

    fn lease(&self) -> Duration {
        (**self).lease()
    }

    fn result_ttl(&self) -> Duration {
        (**self).result_ttl()
    }

    fn sweep(&self) -> impl Future<Output = Result<usize, StoreError>> + Send {
        (**self).sweep()
    }

    fn pending(
        &self,
        max: usize,
    ) -> impl Future<Output = Result<Vec<PendingClaim>, StoreError>> + Send {
        (**self).pending(max)
    }

    fn lookup(
        &self,
        key: &ScopedKey,
        fingerprint: &Fingerprint,
    ) -> impl Future<Output = Result<KeyState<R>, StoreError>> + Send {
        (**self).lookup(key, fingerprint)
    }

    fn result_bytes_max(&self) -> Option<usize> {
        (**self).result_bytes_max()
    }
}
