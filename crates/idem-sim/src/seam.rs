//! The seam between a server and the store: every call of the store contract passes it,
//! and it fails, delays or hangs the call as the world's plan draws, or cuts the server
//! off for a while. Behind it, one [`MemoryStore`] on the world's clock, shared by every
//! server (a host reached without a network hop: its faults are the seam's).

use std::sync::Arc;
use std::time::Duration;

use idem_core::{
    AsyncKeyAdmin, AsyncKeyStore, Claim, Fingerprint, Forgotten, KeyAdmin, KeyRecord, KeyState,
    KeyStore, Lease, MemoryStore, PendingClaim, ScopedKey, StoreError,
};
use idem_http::StoredResponse;

use crate::plan::LEASE;
use crate::shared::WorldState;

/// What the seam does to one call.
enum Fate {
    /// Through, at once.
    Through,
    /// Never reaches the store.
    FailBefore,
    /// Applied, and its answer lost.
    FailAfter,
    /// Through, after this long.
    Delayed(Duration),
}

/// Server `server`'s way to the shared store.
#[derive(Debug, Clone)]
pub(crate) struct Seam {
    store: Arc<MemoryStore<StoredResponse>>,
    shared: Arc<WorldState>,
    server: usize,
    name: String,
    /// The most a result may take in the store's encoding, if this seam says so.
    kept_max: Option<usize>,
}

impl Seam {
    /// Server `server`'s seam to `store`.
    pub(crate) fn new(
        store: Arc<MemoryStore<StoredResponse>>,
        shared: Arc<WorldState>,
        server: usize,
    ) -> Self {
        Self { store, shared, server, name: format!("server{server}"), kept_max: None }
    }

    /// This seam, for a store that keeps results of at most `bytes` in its encoding: it
    /// says so to the layer, and records a breach for any larger result sent.
    pub(crate) fn keeping(self, bytes: usize) -> Self {
        Self { kept_max: Some(bytes), ..self }
    }

    fn fate(&self) -> Fate {
        let plan = &self.shared.plan;
        if self.shared.strikes(plan.store_fail_before) {
            self.shared.fault(&self.name, "store call failed before the store");
            Fate::FailBefore
        } else if self.shared.strikes(plan.store_fail_after) {
            self.shared.fault(&self.name, "store call applied, answer lost");
            Fate::FailAfter
        } else if self.shared.strikes(plan.store_hang) {
            self.shared.fault(&self.name, "store call hung");
            Fate::Delayed(self.shared.draw(|rng| rng.duration(LEASE, LEASE * 3)))
        } else if self.shared.strikes(plan.store_delay) {
            let most = plan.store_delay_max;
            Fate::Delayed(self.shared.draw(|rng| rng.duration(Duration::from_millis(1), most)))
        } else {
            Fate::Through
        }
    }

    /// Runs `call` on the store, through the seam's fate for `op`.
    async fn call<T>(
        &self,
        op: &str,
        call: impl FnOnce(&MemoryStore<StoredResponse>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        if self.shared.is_cut(self.server) {
            return Err(unreachable(op));
        }
        match self.fate() {
            Fate::FailBefore => return Err(unreachable(op)),
            Fate::FailAfter => {
                let _lost = call(&self.store);
                return Err(unreachable(op));
            }
            Fate::Delayed(pause) => tokio::time::sleep(pause).await,
            Fate::Through => {}
        }
        // The call reaches the store only if the server is still joined to it.
        if self.shared.is_cut(self.server) {
            return Err(unreachable(op));
        }
        call(&self.store)
    }

    /// Records a lease the store granted, and sometimes strands its holder: cut from
    /// the store, or crashed, before it can act on it. True when it is to crash.
    fn granted(&self, claim: &Claim<StoredResponse>) -> bool {
        let Some(lease) = claim.lease() else { return false };
        self.shared.granted(&self.name, lease);
        let plan = &self.shared.plan;
        if self.shared.strikes(plan.cut_after_claim) {
            self.shared.fault(&self.name, "server cut from the store after a claim");
            self.shared.set_cut(self.server, true);
        }
        self.crashes("server crashed after a claim")
    }

    /// Whether the server crashes now, at the rate the plan draws (`kind` says where).
    fn crashes(&self, kind: &'static str) -> bool {
        if !self.shared.strikes(self.shared.plan.crash_in_handler) {
            return false;
        }
        self.shared.fault(&self.name, kind);
        self.shared.request_crash(self.server);
        true
    }

    /// Waits for the driver to crash this server (its next step does): the task never
    /// goes on, as a process killed at this instant would not.
    async fn crash_here() {
        tokio::time::sleep(crate::plan::TICK * 4).await;
    }
}

/// The error a failed call returns: the store did not answer.
pub(crate) fn unreachable(op: &str) -> StoreError {
    StoreError::Storage(format!("{STORE_ERROR_MARK}: the store did not answer a {op}").into())
}

/// The words every error of the seam carries: no client may ever read them.
pub(crate) const STORE_ERROR_MARK: &str = "simulated store failure";

impl AsyncKeyStore<StoredResponse> for Seam {
    async fn claim(
        &self,
        key: &ScopedKey,
        fingerprint: &Fingerprint,
    ) -> Result<Claim<StoredResponse>, StoreError> {
        let claim = self.call("claim", |store| KeyStore::claim(store, key, fingerprint)).await?;
        if matches!(claim, Claim::Recover(_)) {
            self.shared.recovered(&self.name, key);
        }
        if self.granted(&claim) {
            Self::crash_here().await;
        }
        Ok(claim)
    }

    async fn complete(&self, lease: &Lease, result: StoredResponse) -> Result<(), StoreError> {
        // After the handler (and its charge), before the answer is stored.
        if self.crashes("server crashed before its complete") {
            Self::crash_here().await;
        }
        // The bytes a durable store writes (the encoding itself, not the layer's count).
        let bytes = idem_durable::Durable::encode(&result).len();
        if let Some(max) = self.kept_max.filter(|max| bytes > *max) {
            let why = format!("the layer sent a result of {bytes} bytes to a store keeping {max}");
            self.shared.breach(&self.name, why);
        }
        self.call("complete", |store| KeyStore::complete(store, lease, result)).await
    }

    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        self.call("release", |store| KeyStore::release(store, lease)).await
    }

    async fn renew(&self, lease: &Lease) -> Result<Lease, StoreError> {
        self.call("renew", |store| KeyStore::renew(store, lease)).await
    }

    fn lease(&self) -> Duration {
        KeyStore::lease(&*self.store)
    }

    fn result_ttl(&self) -> Duration {
        KeyStore::result_ttl(&*self.store)
    }

    async fn sweep(&self) -> Result<usize, StoreError> {
        self.call("sweep", KeyStore::sweep).await
    }

    async fn pending(&self, max: usize) -> Result<Vec<PendingClaim>, StoreError> {
        self.call("pending", |store| KeyStore::pending(store, max)).await
    }

    async fn lookup(
        &self,
        key: &ScopedKey,
        fingerprint: &Fingerprint,
    ) -> Result<KeyState<StoredResponse>, StoreError> {
        self.call("lookup", |store| KeyStore::lookup(store, key, fingerprint)).await
    }

    fn result_bytes_max(&self) -> Option<usize> {
        let store = KeyStore::result_bytes_max(&*self.store);
        match (self.kept_max, store) {
            (Some(kept), Some(store)) => Some(kept.min(store)),
            (kept, store) => kept.or(store),
        }
    }
}

/// The operator's calls pass the seam as the layer's do.
impl AsyncKeyAdmin for Seam {
    async fn inspect(&self, key: &ScopedKey) -> Result<Option<KeyRecord>, StoreError> {
        self.call("inspect", |store| KeyAdmin::inspect(store, key)).await
    }

    async fn forget(&self, key: &ScopedKey, who: &str, why: &str) -> Result<Forgotten, StoreError> {
        self.call("forget", |store| KeyAdmin::forget(store, key, who, why)).await
    }
}
