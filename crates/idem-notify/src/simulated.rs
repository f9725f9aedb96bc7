//! A simulated provider: counts deliveries per (recipient, channel, message id) and fails
//! on demand.

use std::collections::{HashMap, VecDeque};

use parking_lot::Mutex;

use crate::message::{Channel, Notification};
use crate::provider::{DeliveryStatus, Provider, SendError};

/// A failure to inject into the next send call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProviderFault {
    /// Refused before sending (transient).
    FailBeforeSend,
    /// Rate limited (transient).
    Throttle,
    /// Bad address (permanent).
    Permanent,
    /// Delivered, then the answer is lost (ambiguous).
    DeliverThenTimeout,
    /// Lost before delivering, and the caller cannot tell (ambiguous).
    TimeoutWithoutDelivery,
}

#[derive(Debug, Default)]
struct State {
    deliveries: HashMap<(String, Channel, String), u32>,
    faults: VecDeque<ProviderFault>,
}

/// A provider in memory. By default it deduplicates by message id and answers `status`;
/// it can be told to forget ids (no dedup, status unknown) or to have no status API.
#[derive(Debug)]
pub struct SimulatedProvider {
    state: Mutex<State>,
    dedup: bool,
    has_status: bool,
}

impl Default for SimulatedProvider {
    fn default() -> Self {
        Self::new()
    }
}

impl SimulatedProvider {
    /// A provider that deduplicates and answers status.
    pub fn new() -> Self {
        Self { state: Mutex::new(State::default()), dedup: true, has_status: true }
    }

    /// Forgets ids: every send delivers, and `status` answers `Unknown`. Tests use it so
    /// that only the notifier stands between a retry and a second ping.
    #[must_use]
    pub fn forgetting_ids(mut self) -> Self {
        self.dedup = false;
        self.has_status = false;
        self
    }

    /// Does not deduplicate (every send delivers) but answers `status` truthfully: only
    /// the caller's own protocol stands between a retry and a second delivery.
    #[must_use]
    pub fn forgetting_ids_but_keeping_status(mut self) -> Self {
        self.dedup = false;
        self.has_status = true;
        self
    }

    /// Deduplicates but has no status API (`Unknown` always).
    #[must_use]
    pub fn without_status(mut self) -> Self {
        self.has_status = false;
        self
    }

    /// Makes the next send fail with `fault` (faults queue up in order).
    pub fn inject(&self, fault: ProviderFault) {
        self.state.lock().faults.push_back(fault);
    }

    /// Drops every injected fault not yet used.
    pub fn clear_faults(&self) {
        self.state.lock().faults.clear();
    }

    /// Deliveries made for this notification's recipient, channel and id.
    pub fn deliveries(&self, n: &Notification) -> u32 {
        self.state.lock().deliveries.get(&key(n)).copied().unwrap_or(0)
    }

    /// Deliveries made in all.
    pub fn total_deliveries(&self) -> u64 {
        self.state.lock().deliveries.values().map(|n| u64::from(*n)).sum()
    }
}

fn key(n: &Notification) -> (String, Channel, String) {
    (n.recipient().to_string(), n.channel(), n.message_id().to_string())
}

impl Provider for SimulatedProvider {
    fn send(&self, n: &Notification) -> Result<(), SendError> {
        let mut state = self.state.lock();
        let fault = state.faults.pop_front();
        match fault {
            Some(ProviderFault::FailBeforeSend) => {
                return Err(SendError::Transient("unavailable".into()));
            }
            Some(ProviderFault::Throttle) => return Err(SendError::Transient("throttled".into())),
            Some(ProviderFault::Permanent) => {
                return Err(SendError::Permanent("invalid address".into()));
            }
            Some(ProviderFault::TimeoutWithoutDelivery) => {
                return Err(SendError::Ambiguous("timed out".into()));
            }
            Some(ProviderFault::DeliverThenTimeout) | None => {}
        }
        let count = state.deliveries.entry(key(n)).or_default();
        if *count == 0 || !self.dedup {
            *count += 1;
        }
        match fault {
            Some(ProviderFault::DeliverThenTimeout) => {
                Err(SendError::Ambiguous("timed out".into()))
            }
            _ => Ok(()),
        }
    }

    fn status(&self, n: &Notification) -> DeliveryStatus {
        if !self.has_status {
            return DeliveryStatus::Unknown;
        }
        match self.state.lock().deliveries.get(&key(n)) {
            Some(count) if *count > 0 => DeliveryStatus::Delivered,
            _ => DeliveryStatus::NotDelivered,
        }
    }
}
