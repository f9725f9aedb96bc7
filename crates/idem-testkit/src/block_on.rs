//! [`BlockOn`]: an async store seen through the sync contract, so the one conformance
//! suite (and any sync test) runs against async backends.

use std::future::Future;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use idem_core::{
    AsyncKeyAdmin, AsyncKeyStore, Claim, Fingerprint, Forgotten, KeyAdmin, KeyRecord, KeyState,
    KeyStore, Lease, PendingClaim, ScopedKey, StoreError, Timer,
};

/// The suite's runtime: multi-threaded (two workers), shared by every case of a test
/// binary, so a store that spawns tasks (a connection's) keeps them across calls.
///
/// # Panics
///
/// If the runtime cannot be started (no threads left): nothing can be tested then.
pub fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("the suite's tokio runtime starts")
    })
}

/// tokio's timer, for [`AsyncKeyStore::claim_wait`].
#[derive(Debug, Clone, Copy, Default)]
pub struct TokioTimer;

impl Timer for TokioTimer {
    fn now(&self) -> Instant {
        tokio::time::Instant::now().into_std()
    }

    fn sleep(&self, pause: Duration) -> impl Future<Output = ()> + Send {
        tokio::time::sleep(pause)
    }
}

/// An [`AsyncKeyStore`] whose every call is awaited to its end on [`runtime`]: the sync
/// [`KeyStore`] contract over an async backend. For tests, from threads outside the
/// runtime (a call from inside it panics, as `block_on` does).
#[derive(Debug)]
pub struct BlockOn<S>(S);

impl<S> BlockOn<S> {
    /// Wraps `store`.
    pub fn new(store: S) -> Self {
        Self(store)
    }

    /// The async store inside.
    pub fn inner(&self) -> &S {
        &self.0
    }
}

fn wait<T>(future: impl Future<Output = T>) -> T {
    runtime().block_on(future)
}

impl<R: Send, S: AsyncKeyStore<R>> KeyStore<R> for BlockOn<S> {
    fn claim(&self, key: &ScopedKey, fingerprint: &Fingerprint) -> Result<Claim<R>, StoreError> {
        wait(self.0.claim(key, fingerprint))
    }

    fn claim_wait(
        &self,
        key: &ScopedKey,
        fingerprint: &Fingerprint,
        timeout: Duration,
    ) -> Result<Claim<R>, StoreError> {
        wait(self.0.claim_wait(key, fingerprint, timeout, &TokioTimer))
    }

    fn complete(&self, lease: &Lease, result: R) -> Result<(), StoreError> {
        wait(self.0.complete(lease, result))
    }

    fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        wait(self.0.release(lease))
    }

    fn renew(&self, lease: &Lease) -> Result<Lease, StoreError> {
        wait(self.0.renew(lease))
    }

    fn lease(&self) -> Duration {
        self.0.lease()
    }

    fn result_ttl(&self) -> Duration {
        self.0.result_ttl()
    }

    fn sweep(&self) -> Result<usize, StoreError> {
        wait(self.0.sweep())
    }

    fn pending(&self, max: usize) -> Result<Vec<PendingClaim>, StoreError> {
        wait(self.0.pending(max))
    }

    fn lookup(
        &self,
        key: &ScopedKey,
        fingerprint: &Fingerprint,
    ) -> Result<KeyState<R>, StoreError> {
        wait(self.0.lookup(key, fingerprint))
    }

    fn result_bytes_max(&self) -> Option<usize> {
        self.0.result_bytes_max()
    }
}

impl<S: AsyncKeyAdmin> KeyAdmin for BlockOn<S> {
    fn inspect(&self, key: &ScopedKey) -> Result<Option<KeyRecord>, StoreError> {
        wait(self.0.inspect(key))
    }

    fn forget(&self, key: &ScopedKey, who: &str, why: &str) -> Result<Forgotten, StoreError> {
        wait(self.0.forget(key, who, why))
    }
}
