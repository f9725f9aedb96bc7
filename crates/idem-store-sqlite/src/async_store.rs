//! [`AsyncKeyStore`] for [`SqliteStore`]: the same operations as its [`KeyStore`]
//! (the same writes, the same read fast path, the same sweep when full), answered to an
//! async caller without a thread of its runtime waiting for the disk.
//!
//! A write goes to the writer thread with `GroupCommit::submit_async`: the caller's task
//! sleeps until the writer sends the answer down the write's reply channel, after its
//! group committed (or failed). A full writer queue is waited for the same way.
//!
//! A read (a claim's fast path, `lookup`) runs on the caller's task, as the memory
//! store's calls do, because it is short and never waits for a writer: it takes the
//! reader connection's mutex, which no one holds across an await or an fsync (only other
//! reads, each for one indexed read of one row), and reads that row in WAL mode, which
//! takes no lock a writer holds. The row's pages usually come from SQLite's page cache or
//! the OS's; when they do not, the read waits for the disk once, as a task reading a file
//! would. Sending each read to a thread instead would cost a hop per replay, the call a
//! retry storm makes most, to save a rare page read.
//!
//! What a read can still wait for, and rarely: SQLite makes a WAL reader wait (through
//! the busy timeout) while another connection holds the file exclusively, which happens
//! when the last connection to the file closes and cleans up its WAL, when a connection
//! rebuilds the WAL index after a crash, or when a process opened the file in exclusive
//! locking mode. A sync caller waits there too; an async caller's thread does, once.

use idem_core::{
    AsyncKeyStore, Claim, Fingerprint, KeyState, KeyStore, Lease, PendingClaim, ScopedKey,
    StoreError,
};
use idem_durable::Durable;
use idem_durable::row::{claim_with_sweep_async, decode_claim};

use crate::{
    SqliteStore, WriteJob, claim_write, pending_write, release_write, renew_write, sweep_write,
    written,
};

impl<R: Durable + Clone + Send> SqliteStore<R> {
    /// Runs `job` in the writer's next transaction; ready after the commit, with its own
    /// typed result or why the transaction failed. No thread waits meanwhile.
    pub(crate) async fn write_async<T: Send + 'static>(
        &self,
        job: impl WriteJob<T>,
    ) -> Result<T, StoreError> {
        written(self.writer.submit_async(job).await)
    }

    /// As the sync claim: the fast path on the caller's task, else the writer's claim.
    async fn claim_once_async(
        &self,
        key: &ScopedKey,
        fingerprint: &Fingerprint,
    ) -> Result<Claim<R>, StoreError> {
        if let Some(answer) = self.read_claim(key, fingerprint)? {
            return Ok(answer);
        }
        decode_claim(key, self.write_async(claim_write(key, fingerprint)).await?)
    }
}

/// Every write answered through the writer thread's reply channel; reads on the caller's
/// task (see the module's docs). The trace events are those of the sync contract; each is
/// reported, in its span, once the answer is in: a span entered across an await would
/// stay entered on its thread while other tasks ran there.
impl<R: Durable + Clone + Send + Sync> AsyncKeyStore<R> for SqliteStore<R> {
    async fn claim(
        &self,
        key: &ScopedKey,
        fingerprint: &Fingerprint,
    ) -> Result<Claim<R>, StoreError> {
        let claim = || self.claim_once_async(key, fingerprint);
        let answer = claim_with_sweep_async(claim, || self.write_async(sweep_write())).await;
        idem_core::trace::claim(key, || answer)
    }

    async fn complete(&self, lease: &Lease, result: R) -> Result<(), StoreError> {
        let answer = match self.complete_write(lease, &result) {
            Ok(job) => self.write_async(job).await,
            Err(refused) => Err(refused),
        };
        idem_core::trace::settle("complete", lease, || answer)
    }

    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        let answer = self.write_async(release_write(lease)).await;
        idem_core::trace::settle("release", lease, || answer)
    }

    async fn renew(&self, lease: &Lease) -> Result<Lease, StoreError> {
        self.write_async(renew_write(lease)).await
    }

    fn lease(&self) -> std::time::Duration {
        KeyStore::lease(self)
    }

    fn result_ttl(&self) -> std::time::Duration {
        KeyStore::result_ttl(self)
    }

    async fn sweep(&self) -> Result<usize, StoreError> {
        self.write_async(sweep_write()).await
    }

    async fn pending(&self, max: usize) -> Result<Vec<PendingClaim>, StoreError> {
        self.write_async(pending_write(max)).await
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
