//! [`Blocking`]: a sync store behind the async contract, each call on tokio's blocking
//! pool.

use std::sync::Arc;
use std::time::Duration;

use idem_core::{
    AsyncKeyAdmin, AsyncKeyStore, Claim, Fingerprint, Forgotten, KeyAdmin, KeyRecord, KeyState,
    KeyStore, Lease, PendingClaim, ScopedKey, StoreError,
};

/// A sync [`KeyStore`] seen through [`AsyncKeyStore`]: every call runs on tokio's blocking
/// pool (`spawn_blocking`), so a store that blocks (the `postgres` crate's client, a
/// store of your own over a blocking driver) never stalls the runtime's workers. A hop
/// costs a thread hand-off each way; a store that implements the async contract itself
/// (the memory store, SQLite's writer thread, the async PostgreSQL store) needs none.
///
/// ```
/// use std::sync::Arc;
/// use idem_core::{MemoryStore, StoreConfig};
/// use idem_http::{Blocking, StoredResponse};
///
/// let sync_store = Arc::new(MemoryStore::<StoredResponse>::new(StoreConfig::default()));
/// let store = Blocking::new(sync_store);
/// let layer = idem_http::IdempotencyLayer::new(store, |_: &http::request::Parts| {
///     Some("tenant".to_string())
/// });
/// # drop(layer);
/// ```
#[derive(Debug)]
pub struct Blocking<S>(Arc<S>);

impl<S> Blocking<S> {
    /// Wraps `store`.
    pub fn new(store: Arc<S>) -> Self {
        Self(store)
    }

    /// The sync store inside.
    pub fn inner(&self) -> &Arc<S> {
        &self.0
    }
}

impl<S> Clone for Blocking<S> {
    fn clone(&self) -> Self {
        Self(Arc::clone(&self.0))
    }
}

/// Runs `op` on the blocking pool. A panic in the store resumes here; a runtime shutting
/// down mid-call is a storage error (whether the call took effect is unknown).
async fn call<S, T>(
    store: &Arc<S>,
    op: impl FnOnce(&S) -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError>
where
    S: Send + Sync + 'static,
    T: Send + 'static,
{
    let store = Arc::clone(store);
    match tokio::task::spawn_blocking(move || op(&store)).await {
        Ok(answer) => answer,
        Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
        Err(_) => Err(StoreError::Storage("the runtime shut down during a store call".into())),
    }
}

impl<R, S> AsyncKeyStore<R> for Blocking<S>
where
    R: Send + 'static,
    S: KeyStore<R> + 'static,
{
    async fn claim(
        &self,
        key: &ScopedKey,
        fingerprint: &Fingerprint,
    ) -> Result<Claim<R>, StoreError> {
        let (key, fingerprint) = (key.clone(), *fingerprint);
        call(&self.0, move |s| s.claim(&key, &fingerprint)).await
    }

    async fn complete(&self, lease: &Lease, result: R) -> Result<(), StoreError> {
        let lease = lease.clone();
        call(&self.0, move |s| s.complete(&lease, result)).await
    }

    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        let lease = lease.clone();
        call(&self.0, move |s| s.release(&lease)).await
    }

    async fn renew(&self, lease: &Lease) -> Result<Lease, StoreError> {
        let lease = lease.clone();
        call(&self.0, move |s| s.renew(&lease)).await
    }

    fn lease(&self) -> Duration {
        self.0.lease()
    }

    fn result_ttl(&self) -> Duration {
        self.0.result_ttl()
    }

    async fn sweep(&self) -> Result<usize, StoreError> {
        call(&self.0, KeyStore::sweep).await
    }

    async fn pending(&self, max: usize) -> Result<Vec<PendingClaim>, StoreError> {
        call(&self.0, move |s| s.pending(max)).await
    }

    async fn lookup(
        &self,
        key: &ScopedKey,
        fingerprint: &Fingerprint,
    ) -> Result<KeyState<R>, StoreError> {
        let (key, fingerprint) = (key.clone(), *fingerprint);
        call(&self.0, move |s| s.lookup(&key, &fingerprint)).await
    }

    fn result_bytes_max(&self) -> Option<usize> {
        self.0.result_bytes_max()
    }
}

impl<S: KeyAdmin + 'static> AsyncKeyAdmin for Blocking<S> {
    async fn inspect(&self, key: &ScopedKey) -> Result<Option<KeyRecord>, StoreError> {
        let key = key.clone();
        call(&self.0, move |s| s.inspect(&key)).await
    }

    async fn forget(&self, key: &ScopedKey, who: &str, why: &str) -> Result<Forgotten, StoreError> {
        let (key, who, why) = (key.clone(), who.to_string(), why.to_string());
        call(&self.0, move |s| s.forget(&key, &who, &why)).await
    }
}
