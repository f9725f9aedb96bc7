//! What the layer counts (for [`LayerStats`](crate::LayerStats), and through the
//! `metrics` facade with the feature of that name), and how long its handlers take (for
//! the `Retry-After` of a duplicate in flight).

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Each thing the layer counts. With the `metrics` feature, each is also a counter of the
/// `metrics` facade, named as in [`Count::metric`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Count {
    Acquired,
    Recovered,
    Replayed,
    InFlight,
    KeyReused,
    ScopeQuota,
    StoreFull,
    StoreErrors,
    LeasesLost,
    NotKept,
    LeftInFlight,
    Released,
    LeasesRenewed,
    OrphansFinished,
    OrphansAbandoned,
    Forgotten,
    RunsStopped,
}

const COUNTS: usize = 17;

impl Count {
    /// The counter's name in the `metrics` facade: `idem_http_` and what it counts, with
    /// the `_total` suffix Prometheus gives counters.
    #[cfg_attr(not(feature = "metrics"), allow(dead_code, reason = "read by the metrics feature"))]
    pub(crate) const fn metric(self) -> &'static str {
        match self {
            Self::Acquired => "idem_http_acquired_total",
            Self::Recovered => "idem_http_recovered_total",
            Self::Replayed => "idem_http_replayed_total",
            Self::InFlight => "idem_http_in_flight_total",
            Self::KeyReused => "idem_http_key_reused_total",
            Self::ScopeQuota => "idem_http_scope_quota_total",
            Self::StoreFull => "idem_http_store_full_total",
            Self::StoreErrors => "idem_http_store_errors_total",
            Self::LeasesLost => "idem_http_leases_lost_total",
            Self::NotKept => "idem_http_not_kept_total",
            Self::LeftInFlight => "idem_http_left_in_flight_total",
            Self::Released => "idem_http_released_total",
            Self::LeasesRenewed => "idem_http_leases_renewed_total",
            Self::OrphansFinished => "idem_http_orphans_finished_total",
            Self::OrphansAbandoned => "idem_http_orphans_abandoned_total",
            Self::Forgotten => "idem_http_forgotten_total",
            Self::RunsStopped => "idem_http_runs_stopped_total",
        }
    }
}

/// The layer's counters, and the durations of its last handlers.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    counts: [AtomicU64; COUNTS],
    durations: Durations,
}

impl Counters {
    /// Adds one to `count`.
    pub(crate) fn count(&self, count: Count) {
        // ORDERING: a counter, read for reporting; no data is published through it.
        self.counts[count as usize].fetch_add(1, Ordering::Relaxed);
        #[cfg(feature = "metrics")]
        metrics::counter!(count.metric()).increment(1);
    }

    /// What `count` has counted.
    pub(crate) fn get(&self, count: Count) -> u64 {
        // ORDERING: as in `count`.
        self.counts[count as usize].load(Ordering::Relaxed)
    }

    /// Notes how long a handler took to answer.
    pub(crate) fn handler_took(&self, took: Duration) {
        self.durations.record(took);
    }

    /// How long a duplicate should wait before it retries: how long nine in ten of the
    /// last handlers took to answer, never past `lease_left` (the holder's lease, after
    /// which the key may be recovered); `lease_left` before any handler has answered.
    pub(crate) fn retry_after(&self, lease_left: Duration) -> Duration {
        self.durations.p90().map_or(lease_left, |p90| p90.min(lease_left))
    }
}

/// The durations of the last [`Durations::KEPT`] handlers, under a lock taken once per
/// handler and once per duplicate in flight.
#[derive(Debug, Default)]
struct Durations {
    last: Mutex<VecDeque<Duration>>,
}

impl Durations {
    /// How many durations the estimate is made of: 256.
    const KEPT: usize = 256;

    fn record(&self, took: Duration) {
        let mut last = self.last.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if last.len() == Self::KEPT {
            last.pop_front();
        }
        last.push_back(took);
    }

    fn p90(&self) -> Option<Duration> {
        let last = self.last.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut sorted: Vec<Duration> = last.iter().copied().collect();
        drop(last);
        sorted.sort_unstable();
        let at = (sorted.len() * 9 / 10).min(sorted.len().checked_sub(1)?);
        sorted.get(at).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_estimate_is_the_ninetieth_percentile_of_the_last_256_capped_by_the_lease() {
        let counters = Counters::default();
        let lease = Duration::from_secs(30);
        assert_eq!(counters.retry_after(lease), lease, "no handler yet: the lease left");
        for ms in 1..=100 {
            counters.handler_took(Duration::from_millis(ms));
        }
        assert_eq!(counters.retry_after(lease), Duration::from_millis(91));
        assert_eq!(counters.retry_after(Duration::from_millis(40)), Duration::from_millis(40));
        for _ in 0..Durations::KEPT {
            counters.handler_took(Duration::from_secs(2));
        }
        assert_eq!(counters.retry_after(lease), Duration::from_secs(2), "only the last 256");
    }
}
