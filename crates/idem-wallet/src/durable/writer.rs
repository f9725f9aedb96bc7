//! The log writer, on idem-durable's group-commit writer: a group begins by taking the
//! ledger, each batch of the group is decided on it and its record (results included)
//! appended to the group's bytes, and the commit appends them and syncs once. The ledger
//! is held from deciding until the sync returns, so no reader sees a batch that a crash
//! could still take back. A failed group rebuilds the ledger from what was synced and
//! stops the writer.

use std::sync::Arc;

use idem_durable::group_commit::{AfterFailure, Committer, GroupLimits};
use parking_lot::{ArcMutexGuard, Mutex, RawMutex};

use crate::durable::format::FILE_HEADER;
use crate::durable::{LogDevice, Logged, recovery};
use crate::ledger::{BatchError, Ledger};

/// Batches queued for the writer (a caller past it waits to queue), and batches decided
/// and synced together.
pub(crate) const LIMITS: GroupLimits = GroupLimits { queue_max: 1024, group_max: 64 };

/// What the writer thread owns.
pub(crate) struct LogWriter<D: LogDevice> {
    device: D,
    ledger: Arc<Mutex<Ledger>>,
    /// The ledger, held for the group being decided and synced.
    held: Option<ArcMutexGuard<RawMutex, Ledger>>,
    /// The group's records, appended at commit.
    bytes: Vec<u8>,
    now_ms: u64,
    /// Bytes of the log known to be on disk.
    synced_len: u64,
}

impl<D: LogDevice> LogWriter<D> {
    pub(crate) fn new(device: D, ledger: Arc<Mutex<Ledger>>, synced_len: u64) -> Self {
        Self { device, ledger, held: None, bytes: Vec::new(), now_ms: 0, synced_len }
    }

    /// Decides `batch` on the held ledger and adds its record to the group.
    pub(crate) fn decide<B: Logged>(&mut self, batch: &B) -> Result<B::Results, BatchError> {
        let ledger = self.held.as_mut().expect("a group holds the ledger");
        let results = batch.decide(ledger, self.now_ms)?;
        self.bytes.extend(batch.record(self.now_ms, &B::codes(&results)));
        Ok(results)
    }
}

impl<D: LogDevice> Committer for LogWriter<D> {
    type Error = std::io::Error;

    fn begin(&mut self) -> std::io::Result<()> {
        let held = self.ledger.lock_arc();
        self.now_ms = held.now_ms();
        self.held = Some(held);
        self.bytes.clear();
        Ok(())
    }

    fn commit(&mut self) -> std::io::Result<()> {
        self.device.append(&self.bytes).and_then(|()| self.device.sync())?;
        self.synced_len += self.bytes.len() as u64;
        self.held = None;
        Ok(())
    }

    /// The ledger may be ahead of the disk (a failed append or sync, a panic midway):
    /// replay what is known to be synced into a fresh ledger, so readers see only durable
    /// batches, and stop. If even that fails the ledger is left as it is; the writer
    /// stops either way and reopening the log recovers every acknowledged batch.
    fn recover(&mut self) -> AfterFailure {
        let mut held = self.held.take().unwrap_or_else(|| self.ledger.lock_arc());
        if let Ok(bytes) = self.device.read_all() {
            let synced = usize::try_from(self.synced_len).ok().and_then(|len| bytes.get(..len));
            let mut fresh = held.empty_like();
            if let Some(synced) = synced.filter(|s| s.len() >= FILE_HEADER.len())
                && recovery::replay(synced, &mut fresh).is_ok()
            {
                *held = fresh;
            }
        }
        AfterFailure::Stop
    }
}
