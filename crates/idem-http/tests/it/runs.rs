//! A claimed request's run: its lease renewed while the handler works, the bound on a
//! handler whose client left, and what a renewal that finds the lease lost keeps from the
//! store. On tokio's paused clock, which the store reads too (`TokioClock`): a lease runs
//! out as tokio's timers fire, and no test waits in real time.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::response::IntoResponse;
use axum::routing::post;
use idem_core::{
    AsyncKeyStore, Claim, Clock, Fingerprint, KeyState, Lease, MemoryStore, PendingClaim,
    ScopedKey, StoreConfig, StoreError, Timestamp,
};
use idem_http::{IdempotencyLayer, StoredResponse};
use tower::ServiceExt;

use crate::{charge, config, send};

/// The store's clock on tokio's: paused in these tests, moved only by tokio's timers.
#[derive(Debug)]
struct TokioClock(tokio::time::Instant);

impl Clock for TokioClock {
    fn now(&self) -> Timestamp {
        let since = tokio::time::Instant::now().saturating_duration_since(self.0);
        Timestamp::from_millis(1_000_000).saturating_add(since)
    }
}

const LEASE: Duration = Duration::from_millis(300);

fn store() -> Arc<MemoryStore<StoredResponse>> {
    let config = StoreConfig::builder().lease(LEASE).build().expect("valid");
    Arc::new(MemoryStore::with_clock(config, Arc::new(TokioClock(tokio::time::Instant::now()))))
}

/// A `POST /charge` that sleeps `work` on tokio's clock, then counts a finished run and
/// answers `201 charged <n>`.
fn slow(work: Duration) -> (axum::routing::MethodRouter, Arc<AtomicUsize>) {
    let finished = Arc::new(AtomicUsize::new(0));
    let counter = finished.clone();
    let route = post(move || {
        let counter = counter.clone();
        async move {
            tokio::time::sleep(work).await;
            let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
            (http::StatusCode::CREATED, format!("charged {n}"))
        }
    });
    (route, finished)
}

/// The tests' scope function, as a type.
type Tenant = fn(&http::request::Parts) -> Option<String>;

/// `route` at `/charge` behind a layer on `store` with `config`, and the layer, whose
/// counts the tests read.
fn behind<St>(
    store: St,
    route: axum::routing::MethodRouter,
    config: idem_http::Config,
) -> (Router, IdempotencyLayer<St, Tenant>)
where
    St: AsyncKeyStore<StoredResponse> + 'static,
{
    let tenant: Tenant = crate::tenant;
    let layer = IdempotencyLayer::with_config(store, tenant, config).expect("fits");
    (Router::new().route("/charge", route).layer(layer.clone()), layer)
}

/// A client that sends a charge and leaves 50 ms later, before any answer.
async fn leave_after_50_ms(router: &Router) {
    let request = router.clone().oneshot(charge(Some("k1"), "x"));
    let gave_up = tokio::time::timeout(Duration::from_millis(50), request);
    assert!(gave_up.await.is_err(), "the client left before the answer");
}

/// A handler three times slower than its lease, with a duplicate every 50 ms: its lease
/// is renewed, so every duplicate is answered 409 while it works, none recovers the key,
/// and the handler runs once; the duplicates after it replay its answer.
#[tokio::test(start_paused = true)]
async fn a_handler_three_times_slower_than_its_lease_runs_once() {
    let (route, finished) = slow(LEASE * 3);
    let (router, stats) = behind(store(), route, config(|c| c));
    let first = tokio::spawn({
        let router = router.clone();
        async move { send(&router, charge(Some("k1"), "x")).await }
    });
    let mut in_flight = 0;
    while finished.load(Ordering::SeqCst) == 0 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let duplicate = send(&router, charge(Some("k1"), "x")).await;
        match duplicate.status {
            409 => in_flight += 1,
            _ => assert!(duplicate.replayed, "never a second run: {duplicate:?}"),
        }
    }
    let first = first.await.expect("the first request");
    assert_eq!((first.status, first.body.as_str()), (201, "charged 1"));
    let after = send(&router, charge(Some("k1"), "x")).await;
    assert_eq!((after.replayed, after.body.as_str()), (true, "charged 1"));
    assert_eq!(finished.load(Ordering::SeqCst), 1, "one run");
    assert!(in_flight >= 15, "duplicates through three leases were in flight: {in_flight}");
    assert!(stats.stats().leases_renewed >= 8, "{:?}", stats.stats());
}

/// A memory store bent as a test needs: its renewals all answer that the lease was lost
/// (as when another request recovered the key while the handler ran) or all fail (the
/// server cut from the store), or its claims take `claim_takes` to answer after they took
/// effect (a slow database).
struct Bent {
    inner: Arc<MemoryStore<StoredResponse>>,
    renewals: Renewals,
    claim_takes: Duration,
    renewals_seen: AtomicUsize,
    /// Each completion waits this long and fails (a silent server, a call waiting out
    /// the store's own bound).
    silent_completions: Option<Duration>,
    /// The first completions fail at once (a connection reset); later ones take this long
    /// and are kept (a slow store).
    completions_failing_then_slow: Option<(AtomicUsize, Duration)>,
    /// Each release panics (a store with a bug).
    release_panics: bool,
}

impl Bent {
    fn new(
        inner: Arc<MemoryStore<StoredResponse>>,
        renewals: Renewals,
        claim_takes: Duration,
    ) -> Self {
        let renewals_seen = AtomicUsize::new(0);
        let (silent_completions, completions_failing_then_slow) = (None, None);
        Self {
            inner,
            renewals,
            claim_takes,
            renewals_seen,
            silent_completions,
            completions_failing_then_slow,
            release_panics: false,
        }
    }

    fn with_completions_failing_then_slow(mut self, failing: usize, takes: Duration) -> Self {
        self.completions_failing_then_slow = Some((AtomicUsize::new(failing), takes));
        self
    }

    fn with_release_panicking(mut self) -> Self {
        self.release_panics = true;
        self
    }

    fn with_silent_completions(mut self, bound: Duration) -> Self {
        self.silent_completions = Some(bound);
        self
    }
}

/// What a [`Bent`] store's renewals do.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Renewals {
    Work,
    Lost,
    Fail,
    /// Every other one fails (a flaky connection).
    FailEveryOther,
    /// The first is answered 30 ms after it was sent; the rest are never answered.
    SlowThenHang,
    /// Each is answered this long after it was sent.
    Slow(Duration),
    /// The first is answered after the first span, the rest after the second.
    FirstSlow(Duration, Duration),
    /// Each fails this long after it was sent (a store gone silent: the call waited out
    /// its bound).
    SilentFor(Duration),
}

impl AsyncKeyStore<StoredResponse> for Bent {
    async fn claim(
        &self,
        k: &ScopedKey,
        fp: &Fingerprint,
    ) -> Result<Claim<StoredResponse>, StoreError> {
        let claimed = AsyncKeyStore::claim(&self.inner, k, fp).await;
        // Under a millisecond (a lease of a few), moved exactly: a timer rounds it up.
        if self.claim_takes < Duration::from_millis(1) {
            tokio::time::advance(self.claim_takes).await;
        } else {
            tokio::time::sleep(self.claim_takes).await;
        }
        claimed
    }
    async fn complete(&self, lease: &Lease, result: StoredResponse) -> Result<(), StoreError> {
        if let Some(bound) = self.silent_completions {
            tokio::time::sleep(bound).await;
            return Err(StoreError::Storage("no answer within the store's bound".into()));
        }
        if let Some((failing, takes)) = &self.completions_failing_then_slow {
            let left =
                failing.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
            if left.is_ok() {
                return Err(StoreError::Storage("a connection reset".into()));
            }
            tokio::time::sleep(*takes).await;
        }
        AsyncKeyStore::complete(&self.inner, lease, result).await
    }
    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        assert!(!self.release_panics, "a store whose release panics");
        if let Renewals::SilentFor(bound) = self.renewals {
            tokio::time::sleep(bound).await;
        }
        AsyncKeyStore::release(&self.inner, lease).await
    }
    async fn renew(&self, lease: &Lease) -> Result<Lease, StoreError> {
        match self.renewals {
            Renewals::Lost => {
                let (key, token) = (lease.key().clone(), lease.token());
                return Err(StoreError::LeaseLost { key, token });
            }
            Renewals::Fail => return Err(StoreError::Storage("cut from the store".into())),
            Renewals::FailEveryOther
                if self.renewals_seen.fetch_add(1, Ordering::SeqCst).is_multiple_of(2) =>
            {
                return Err(StoreError::Storage("a connection reset".into()));
            }
            Renewals::SlowThenHang => {
                if self.renewals_seen.fetch_add(1, Ordering::SeqCst) > 0 {
                    std::future::pending::<()>().await;
                }
                tokio::time::sleep(Duration::from_millis(30)).await;
            }
            Renewals::Slow(takes) => tokio::time::sleep(takes).await,
            Renewals::FirstSlow(first, rest) => {
                let seen = self.renewals_seen.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(if seen == 0 { first } else { rest }).await;
            }
            Renewals::SilentFor(bound) => {
                tokio::time::sleep(bound).await;
                return Err(StoreError::Storage("no answer within the store's bound".into()));
            }
            Renewals::FailEveryOther | Renewals::Work => {}
        }
        AsyncKeyStore::renew(&self.inner, lease).await
    }
    fn lease(&self) -> Duration {
        AsyncKeyStore::lease(&self.inner)
    }

    fn result_ttl(&self) -> Duration {
        AsyncKeyStore::result_ttl(&self.inner)
    }
    async fn sweep(&self) -> Result<usize, StoreError> {
        AsyncKeyStore::sweep(&self.inner).await
    }
    async fn pending(&self, max: usize) -> Result<Vec<PendingClaim>, StoreError> {
        AsyncKeyStore::pending(&self.inner, max).await
    }
    async fn lookup(
        &self,
        k: &ScopedKey,
        fp: &Fingerprint,
    ) -> Result<KeyState<StoredResponse>, StoreError> {
        AsyncKeyStore::lookup(&self.inner, k, fp).await
    }
}

/// A renewal that finds the lease lost (another request recovered the key): the run is
/// stopped where its handler waits, before the rest of its work (a second side effect),
/// its client is told the outcome is unknown, the key stays in flight for whoever holds
/// it now, and the operator sees a lost lease counted.
#[tokio::test(start_paused = true)]
async fn a_renewal_that_finds_the_lease_lost_stops_the_run_before_its_effect() {
    let (route, finished) = slow(LEASE * 2 / 3);
    let inner = store();
    let bent = Bent::new(inner.clone(), Renewals::Lost, Duration::ZERO);
    let (router, stats) = behind(bent, route, config(|c| c));
    let started = tokio::time::Instant::now();
    let first = send(&router, charge(Some("k1"), "x")).await;
    assert_eq!(first.status, 503, "{first:?}");
    assert!(first.body.contains("run-stopped"), "{first:?}");
    // At the renewal that found the loss (a quarter lease in), not at the deadline.
    assert!(started.elapsed() < LEASE * 3 / 8, "stopped at once: {:?}", started.elapsed());
    tokio::time::sleep(LEASE).await;
    assert_eq!(finished.load(Ordering::SeqCst), 0, "stopped before its effect");
    assert_eq!(stats.stats().leases_lost, 1, "{:?}", stats.stats());
    assert_eq!(stats.stats().runs_stopped, 1, "{:?}", stats.stats());
    assert_eq!(stats.stats().left_in_flight, 1, "{:?}", stats.stats());
    assert_eq!(inner.stats().completed, 0, "nothing completed");
}

/// A server cut from its store while a handler slower than the lease runs: no renewal
/// can vouch for the lease, so three eighths of a lease after the claim was sent the run
/// is stopped
/// where its handler waits, before its effect; once the lease has run out (on the store's
/// clock) a retry on a server that reaches the store recovers the key and runs once. Had
/// the first run gone on, both would have acted.
#[tokio::test(start_paused = true)]
async fn a_handler_cut_from_its_store_stops_before_half_a_lease_and_the_recovery_runs_once() {
    let (route, finished) = slow(LEASE * 2);
    let inner = store();
    let cut = Bent::new(inner.clone(), Renewals::Fail, Duration::ZERO);
    let (router, stats) = behind(cut, route.clone(), config(|c| c));
    let started = tokio::time::Instant::now();
    let first = send(&router, charge(Some("k1"), "x")).await;
    assert_eq!(first.status, 503, "{first:?}");
    let stopped_after = started.elapsed();
    assert!(stopped_after >= LEASE * 3 / 8 && stopped_after < LEASE / 2, "{stopped_after:?}");
    tokio::time::sleep(LEASE).await;
    let (joined, _) = behind(inner.clone(), route, config(|c| c));
    let retry = send(&joined, charge(Some("k1"), "x")).await;
    assert_eq!((retry.status, retry.body.as_str()), (201, "charged 1"), "{retry:?}");
    tokio::time::sleep(LEASE * 3).await;
    assert_eq!(finished.load(Ordering::SeqCst), 1, "one effect: the stopped run never acted");
    assert!(stats.stats().store_errors >= 1, "the failed renewals: {:?}", stats.stats());
    assert_eq!((stats.stats().runs_stopped, stats.stats().leases_lost), (1, 0));
}

/// A store that fails every other renewal (a flaky connection) still serves a handler
/// three times slower than its lease: a failed renewal is tried again a sixteenth of a
/// lease later, well before the run's lease is in doubt, so the run goes on and acts once.
#[tokio::test(start_paused = true)]
async fn a_failed_renewal_tried_again_keeps_a_slow_run_going() {
    let (route, finished) = slow(LEASE * 3);
    let bent = Bent::new(store(), Renewals::FailEveryOther, Duration::ZERO);
    let (router, stats) = behind(bent, route, config(|c| c));
    let first = send(&router, charge(Some("k1"), "x")).await;
    assert_eq!((first.status, first.body.as_str()), (201, "charged 1"), "{first:?}");
    assert_eq!(finished.load(Ordering::SeqCst), 1);
    assert_eq!(stats.stats().runs_stopped, 0, "{:?}", stats.stats());
    assert!(stats.stats().store_errors >= 4, "renewals failed: {:?}", stats.stats());
}

/// A renewal that finds the lease lost after the handler returned, while its streamed
/// body is still being read: the body reaches its client whole, but it is not completed
/// as if the run still held the key (the store under the bent one would take it), and
/// the loss is counted.
#[tokio::test(start_paused = true)]
async fn a_lease_lost_while_the_body_streams_keeps_the_answer_out_of_the_store() {
    use http_body_util::BodyExt;
    let inner = store();
    let bent = Bent::new(inner.clone(), Renewals::Lost, Duration::ZERO);
    let route = post(|| async { http::Response::new(chunks(64)) });
    let (router, stats) = behind(bent, route, config(|c| c.response_bytes_max(1024)));
    let response = router.clone().oneshot(charge(Some("k1"), "x")).await.expect("infallible");
    let mut body = response.into_body();
    let head = body.frame().await.expect("a frame").expect("the head");
    assert!(head.is_data());
    // A renewal (every quarter lease) finds the lease lost while the client pauses.
    tokio::time::sleep(LEASE / 2).await;
    let rest = body.collect().await.expect("the rest").to_bytes();
    assert!(!rest.is_empty(), "the rest of the body came");
    tokio::time::sleep(LEASE).await;
    assert_eq!(inner.stats().completed, 0, "not completed after the loss");
    assert_eq!(stats.stats().leases_lost, 1, "{:?}", stats.stats());
}

/// A renewal answered late vouches from when it was sent, not from when its answer came
/// (the store's deadline runs from the send): its first renewal, sent a quarter lease in,
/// is answered 30 ms later and no other ever is, so the run stops three eighths of a lease
/// after that send.
#[tokio::test(start_paused = true)]
async fn a_late_renewal_answer_vouches_from_its_send() {
    let (route, finished) = slow(LEASE * 2);
    let bent = Bent::new(store(), Renewals::SlowThenHang, Duration::ZERO);
    let (router, _stats) = behind(bent, route, config(|c| c));
    let started = tokio::time::Instant::now();
    let first = send(&router, charge(Some("k1"), "x")).await;
    assert_eq!(first.status, 503, "{first:?}");
    let from_the_send = LEASE / 4 + LEASE * 3 / 8;
    let stopped = started.elapsed();
    assert!(stopped <= from_the_send + Duration::from_millis(5), "{stopped:?}");
    assert!(stopped >= from_the_send, "{stopped:?}");
    assert_eq!(finished.load(Ordering::SeqCst), 0);
}

/// A claim answered later than three eighths of a lease after it was sent cannot vouch
/// for a run (the lease may be running out by the store's clock): a renewal sent then
/// vouches for it afresh (answered, no one else took the key), and its handler runs, once.
#[tokio::test(start_paused = true)]
async fn a_claim_answered_after_its_guard_is_vouched_afresh_and_runs_once() {
    runs_once(Duration::ZERO, Renewals::Work, LEASE / 2 + Duration::from_millis(10)).await;
}

/// A charge to a handler working `work`, through a [`Bent`] store with `renewals` whose
/// claims take `claim_takes`: answered 201 by one run, none stopped.
async fn runs_once(work: Duration, renewals: Renewals, claim_takes: Duration) {
    let (route, finished) = slow(work);
    let (router, stats) = behind(Bent::new(store(), renewals, claim_takes), route, config(|c| c));
    let first = send(&router, charge(Some("k1"), "x")).await;
    let said = format!("claims taking {claim_takes:?}: {first:?}");
    assert_eq!((first.status, first.body.as_str()), (201, "charged 1"), "{said}");
    assert_eq!((finished.load(Ordering::SeqCst), stats.stats().runs_stopped), (1, 0), "{said}");
}

/// A late claim whose renewal is answered late too (a store that stays slow): nothing
/// runs, and the fresh claim is given back (no handler ran), so a retry is not held off
/// for a lease; the client is told the store is unavailable.
#[tokio::test(start_paused = true)]
async fn a_late_claim_whose_renewal_is_late_too_is_given_back_and_runs_nothing() {
    let (route, finished) = slow(Duration::ZERO);
    let slow_claims = LEASE / 2 + Duration::from_millis(10);
    let bent = Bent::new(store(), Renewals::Slow(LEASE / 2), slow_claims);
    let (router, stats) = behind(bent, route, config(|c| c));
    let first = send(&router, charge(Some("k1"), "x")).await;
    assert_eq!(first.status, 503, "{first:?}");
    assert!(first.body.contains("store-unavailable"), "{first:?}");
    assert_eq!((finished.load(Ordering::SeqCst), stats.stats().released), (0, 1));
}

/// A claim answered a fifth of a lease after it was sent (a store slow for a moment), and
/// a handler that takes half a lease while every renewal is answered: the first renewal
/// goes a quarter of a lease after the claim's send, before the run's guard (three eighths
/// after it) runs out, and the run finishes, once.
#[tokio::test(start_paused = true)]
async fn a_slow_claim_does_not_stop_a_healthy_run_before_its_first_renewal() {
    runs_once(LEASE / 2, Renewals::Work, LEASE / 5).await;
}

/// A store gone silent as the handler answers: each completion waits out the store's own
/// bound (5 s here, Redis's response timeout) and fails. A failure that slow is not tried
/// again: the answer comes after one bound, not four.
#[tokio::test(start_paused = true)]
async fn a_silent_store_is_not_waited_out_again() {
    let bound = Duration::from_secs(5);
    let (route, finished) = slow(Duration::ZERO);
    let bent = Bent::new(store(), Renewals::Work, Duration::ZERO).with_silent_completions(bound);
    let (router, _stats) = behind(bent, route, config(|c| c));
    let started = tokio::time::Instant::now();
    let first = send(&router, charge(Some("k1"), "x")).await;
    assert_eq!((first.status, finished.load(Ordering::SeqCst)), (201, 1), "{first:?}");
    let at_most = bound + Duration::from_millis(10);
    assert!(started.elapsed() <= at_most, "answered {:?} after", started.elapsed());
}

/// A late claim (a renewal already due) whose vouching renewal is answered just inside
/// the guard but past a renewal period: started on it, the run's first renewal (due at
/// once, answered in 30 ms) could not land inside the sliver of guard left, and the run
/// was stopped after its handler began. Such a renewal starts nothing: 503, no handler.
#[tokio::test(start_paused = true)]
async fn a_vouching_renewal_answered_past_a_renewal_period_starts_nothing() {
    let (route, finished) = slow(Duration::from_millis(50));
    let renewals = Renewals::FirstSlow(LEASE * 35 / 100, Duration::from_millis(30));
    let bent = Bent::new(store(), renewals, LEASE * 3 / 10);
    let (router, stats) = behind(bent, route, config(|c| c));
    let first = send(&router, charge(Some("k1"), "x")).await;
    assert!(first.status == 503 && first.body.contains("store-unavailable"), "{first:?}");
    let stats = stats.stats();
    assert_eq!((finished.load(Ordering::SeqCst), stats.runs_stopped, stats.released), (0, 0, 1));
}

/// Leases of 1 and 2 ms, whose guard (three eighths) is shorter than a renewal period (a
/// millisecond at least): a claim answered past the guard is vouched for afresh and runs.
#[tokio::test(start_paused = true)]
async fn a_claim_past_the_guard_of_a_millisecond_lease_is_vouched_afresh_and_runs() {
    for (lease, claim_takes) in [(1, 500), (2, 900)] {
        let (lease, claim_takes) =
            (Duration::from_millis(lease), Duration::from_micros(claim_takes));
        let config_of = StoreConfig::builder().lease(lease).build().expect("valid");
        let clock = Arc::new(TokioClock(tokio::time::Instant::now()));
        let inner = Arc::new(MemoryStore::with_clock(config_of, clock));
        // No timer in the handler: on the paused clock a timer fires on a millisecond tick,
        // past a guard of under a millisecond.
        let finished = Arc::new(AtomicUsize::new(0));
        let counter = finished.clone();
        let route = post(move || {
            counter.fetch_add(1, Ordering::SeqCst);
            async { (http::StatusCode::CREATED, "charged 1") }
        });
        let (router, stats) =
            behind(Bent::new(inner, Renewals::Work, claim_takes), route, config(|c| c));
        let first = send(&router, charge(Some("k1"), "x")).await;
        let said = format!("lease {lease:?}, claim {claim_takes:?}: {first:?} {:?}", stats.stats());
        assert_eq!((first.status, finished.load(Ordering::SeqCst)), (201, 1), "{said}");
    }
}

/// A late claim, then the store goes silent (each renewal and release waits out the
/// store's bound, 5 s here): the vouching renewal is waited for only as long as it could
/// still start a run, and the release only as long again (it goes on by itself), so the
/// client hears its 503 soon, not after two bounds.
#[tokio::test(start_paused = true)]
async fn a_late_claim_on_a_store_gone_silent_is_answered_soon() {
    let bound = Duration::from_secs(5);
    let (route, finished) = slow(Duration::ZERO);
    let claim_takes = LEASE * 3 / 10;
    let (router, _stats) =
        behind(Bent::new(store(), Renewals::SilentFor(bound), claim_takes), route, config(|c| c));
    let started = tokio::time::Instant::now();
    let first = send(&router, charge(Some("k1"), "x")).await;
    let took = started.elapsed();
    assert_eq!((first.status, finished.load(Ordering::SeqCst)), (503, 0), "{first:?}");
    let at_most = claim_takes + LEASE / 2 + Duration::from_millis(10);
    assert!(took <= at_most, "answered after {took:?}, at most {at_most:?}");
}

/// A late claim given back by a store whose release panics: the client still hears its
/// 503, and the key, held until its lease runs out, is counted left in flight.
#[tokio::test(start_paused = true)]
async fn a_late_claim_whose_release_panics_is_counted_left_in_flight() {
    let (route, finished) = slow(Duration::ZERO);
    let slow_claims = LEASE / 2 + Duration::from_millis(10);
    let bent = Bent::new(store(), Renewals::Slow(LEASE / 2), slow_claims).with_release_panicking();
    let (router, stats) = behind(bent, route, config(|c| c));
    let first = send(&router, charge(Some("k1"), "x")).await;
    assert!(first.status == 503 && first.body.contains("store-unavailable"), "{first:?}");
    let stats = stats.stats();
    let counts = (finished.load(Ordering::SeqCst), stats.released, stats.left_in_flight);
    assert_eq!(counts, (0, 0, 1), "{stats:?}");
}

/// A late claim whose vouching renewal finds the lease lost (another request recovered
/// the key meanwhile): nothing runs, nothing is given back (the key is the other's), and
/// the loss is counted once.
#[tokio::test(start_paused = true)]
async fn a_late_claim_whose_renewal_finds_it_lost_is_counted_lost_once() {
    let (route, finished) = slow(Duration::ZERO);
    let slow_claims = LEASE / 2 + Duration::from_millis(10);
    let (router, stats) =
        behind(Bent::new(store(), Renewals::Lost, slow_claims), route, config(|c| c));
    let first = send(&router, charge(Some("k1"), "x")).await;
    assert_eq!(first.status, 503, "{first:?}");
    let stats = stats.stats();
    assert_eq!((finished.load(Ordering::SeqCst), stats.leases_lost, stats.released), (0, 1, 0));
}

/// A store that fails a completion at once (a connection reset) and then answers in a
/// second and a bit (alive, slow: a replica lagging behind `WAIT`): the retry runs to the
/// store's own bound and is kept, and a repeat after the lease replays the answer instead
/// of recovering the key and running the handler again.
#[tokio::test(start_paused = true)]
async fn a_completion_the_store_answers_slowly_after_a_reset_is_kept() {
    let (route, finished) = slow(Duration::ZERO);
    let slow_store = Duration::from_millis(1_100);
    let bent = Bent::new(store(), Renewals::Work, Duration::ZERO)
        .with_completions_failing_then_slow(1, slow_store);
    let (router, stats) = behind(bent, route, config(|c| c));
    let first = send(&router, charge(Some("k1"), "x")).await;
    assert_eq!((first.status, first.body.as_str()), (201, "charged 1"), "{first:?}");
    tokio::time::sleep(LEASE * 2).await;
    let repeat = send(&router, charge(Some("k1"), "x")).await;
    assert!(repeat.replayed && repeat.body == "charged 1", "{repeat:?} {:?}", stats.stats());
    assert_eq!(finished.load(Ordering::SeqCst), 1);
}

/// A claim answered just inside its guard (the store slow for a moment) would leave its
/// run less of the guard than a renewal takes: it is vouched for afresh before the handler
/// starts, and the run finishes, once, as a claim answered just past the guard does.
#[tokio::test(start_paused = true)]
async fn a_claim_answered_just_inside_its_guard_is_vouched_afresh_and_runs_once() {
    let guard = LEASE * 3 / 8;
    for claim_takes in [guard - Duration::from_millis(5), guard + Duration::from_millis(5)] {
        let renewals = Renewals::Slow(Duration::from_millis(30));
        runs_once(Duration::from_millis(50), renewals, claim_takes).await;
    }
}

/// A completion applied but answered as failed, and a renewal in the retry's first pause
/// that finds the key settled by it: not counted as a lease lost to another request (none
/// recovered it), and the repeat replays the answer.
#[tokio::test(start_paused = true)]
async fn a_renewal_that_finds_a_failed_completion_applied_is_not_counted_as_a_loss() {
    // The first renewal is due a quarter of a lease (75 ms) after the claim; the handler
    // answers at 70 ms, so the renewal falls in the retry's first pause (20 ms).
    let (route, finished) = slow(Duration::from_millis(70));
    let failing = idem_testkit::faulty::Faulty::new(store()).completing_then_failing("cut", 1);
    let (router, stats) = behind(failing, route, config(|c| c));
    let first = send(&router, charge(Some("k1"), "x")).await;
    assert_eq!((first.status, first.body.as_str()), (201, "charged 1"), "{first:?}");
    let repeat = send(&router, charge(Some("k1"), "x")).await;
    assert!(repeat.replayed && repeat.body == "charged 1", "{repeat:?}");
    let stats = stats.stats();
    assert_eq!(finished.load(Ordering::SeqCst), 1);
    assert_eq!((stats.store_errors, stats.leases_lost), (1, 0), "{stats:?}");
}

/// A duplicate that waited (`wait_for_first`) longer than half a lease for a first run
/// that then did nothing and gave the key back: the claim it wins at the end of its wait
/// is vouched for afresh (a renewal sent then), so its handler runs, once.
#[tokio::test(start_paused = true)]
async fn a_claim_won_after_a_long_wait_is_vouched_for_afresh_and_runs() {
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    let route = post(move || {
        let counter = counter.clone();
        async move {
            if counter.fetch_add(1, Ordering::SeqCst) == 0 {
                tokio::time::sleep(LEASE * 2 / 3).await;
                let nothing = axum::Extension(idem_http::NothingHappened);
                return (http::StatusCode::SERVICE_UNAVAILABLE, nothing, "try again")
                    .into_response();
            }
            (http::StatusCode::CREATED, "charged").into_response()
        }
    });
    let waits = config(|c| c.wait_for_first(Some(LEASE * 4)));
    let (router, _stats) = behind(store(), route, waits);
    let first = tokio::spawn({
        let router = router.clone();
        async move { send(&router, charge(Some("k1"), "x")).await }
    });
    tokio::time::sleep(Duration::from_millis(10)).await;
    let waiter = send(&router, charge(Some("k1"), "x")).await;
    assert_eq!(first.await.expect("the first").status, 503);
    assert_eq!((waiter.status, waiter.body.as_str()), (201, "charged"), "{waiter:?}");
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

/// A handler whose client left: it runs on, past the client, for `orphan_time_max`, then
/// is stopped, and its key is left in flight for recovery (counted).
#[tokio::test(start_paused = true)]
async fn an_orphaned_handler_past_its_bound_is_stopped_and_left_in_flight() {
    let (route, finished) = slow(Duration::from_secs(10));
    let config = config(|c| c.orphan_time_max(Duration::from_secs(1)));
    let (router, stats) = behind(store(), route, config);
    leave_after_50_ms(&router).await;
    tokio::time::sleep(Duration::from_millis(900)).await;
    assert_eq!(stats.stats().orphans_abandoned, 0, "still within its bound");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(stats.stats().orphans_abandoned, 1, "{:?}", stats.stats());
    assert_eq!(stats.stats().left_in_flight, 1, "{:?}", stats.stats());
    tokio::time::sleep(Duration::from_secs(20)).await;
    assert_eq!(finished.load(Ordering::SeqCst), 0, "stopped, never finished");
}

/// A handler whose client left within its bound finishes, and the retry replays it.
#[tokio::test(start_paused = true)]
async fn an_orphaned_handler_within_its_bound_finishes_and_replays() {
    let (route, finished) = slow(Duration::from_millis(500));
    let (router, stats) = behind(store(), route, config(|c| c));
    leave_after_50_ms(&router).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(finished.load(Ordering::SeqCst), 1);
    assert_eq!(stats.stats().orphans_finished, 1, "{:?}", stats.stats());
    let retry = send(&router, charge(Some("k1"), "x")).await;
    assert_eq!((retry.replayed, retry.body.as_str()), (true, "charged 1"));
}

/// A handler that stores its own answer with the claim's lease (as one that completes in
/// its own database transaction does) and marks its response `StoredByHandler`: the
/// layer stores nothing more, the retry replays what the handler stored, and nothing is
/// counted as lost or failed.
#[tokio::test(start_paused = true)]
async fn a_handler_that_stored_its_own_answer_is_replayed_and_not_stored_twice() {
    use axum::Extension;
    use idem_http::{Claimed, StoredByHandler};
    let store = store();
    let handler = {
        let store = store.clone();
        move |Extension(claimed): Extension<Claimed>| {
            let store = store.clone();
            async move {
                let answer = StoredResponse {
                    status: http::StatusCode::CREATED,
                    headers: vec![(http::header::CONTENT_TYPE, "text/plain".parse().expect("ok"))],
                    body: "order 7".into(),
                };
                AsyncKeyStore::complete(&store, claimed.lease(), answer.clone()).await.expect("ok");
                let mut response: http::Response<axum::body::Body> = answer.to_response();
                response.extensions_mut().insert(StoredByHandler);
                response
            }
        }
    };
    let layer = IdempotencyLayer::with_config(store.clone(), crate::tenant, config(|c| c));
    let layer = layer.expect("fits");
    let stats = layer.clone();
    let router = Router::new().route("/charge", post(handler)).layer(layer);
    let first = send(&router, charge(Some("k1"), "x")).await;
    assert_eq!((first.status, first.replayed, first.body.as_str()), (201, false, "order 7"));
    let retry = send(&router, charge(Some("k1"), "x")).await;
    assert_eq!((retry.status, retry.replayed, retry.body.as_str()), (201, true, "order 7"));
    assert_eq!(retry.headers["content-type"], "text/plain");
    let counted = stats.stats();
    assert_eq!((counted.leases_lost, counted.store_errors, counted.left_in_flight), (0, 0, 0));
    assert_eq!(store.stats().lease_lost, 0, "the layer never tried to complete it again");
}

/// A run that recovered a claim and then did nothing (it answered `NothingHappened`, or a
/// status named effect-free: its gateway was down) never releases the key: the claim's
/// earlier run may have acted, so the next request recovers it again and checks again,
/// rather than acting as a fresh claim.
#[tokio::test(start_paused = true)]
async fn a_recovered_claim_is_never_released_by_a_run_that_did_nothing() {
    use axum::Extension;
    use axum::response::IntoResponse;
    use idem_http::{EffectFree, NothingHappened, OutcomeUnknown, Recovering};
    let down = http::StatusCode::SERVICE_UNAVAILABLE;
    for by_status in [false, true] {
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = seen.clone();
        let route = post(move |recovering: Option<Extension<Recovering>>| {
            let log = log.clone();
            async move {
                let run = {
                    let mut seen = log.lock().expect("unpoisoned");
                    seen.push(recovering.is_some());
                    seen.len()
                };
                match run {
                    1 => (http::StatusCode::GATEWAY_TIMEOUT, Extension(OutcomeUnknown))
                        .into_response(),
                    2 if by_status => down.into_response(),
                    2 => (down, Extension(NothingHappened)).into_response(),
                    _ => (http::StatusCode::OK, "checked first").into_response(),
                }
            }
        });
        let config =
            config(|c| if by_status { c.release_on(EffectFree::statuses([down])) } else { c });
        let layer = IdempotencyLayer::with_config(store(), crate::tenant, config).expect("fits");
        let stats = layer.clone();
        let router = Router::new().route("/charge", route).layer(layer);
        send(&router, charge(Some("k1"), "x")).await;
        tokio::time::sleep(LEASE).await;
        assert_eq!(send(&router, charge(Some("k1"), "x")).await.status, 503);
        assert_eq!(send(&router, charge(Some("k1"), "x")).await.status, 409, "still held");
        tokio::time::sleep(LEASE).await;
        send(&router, charge(Some("k1"), "x")).await;
        let seen = seen.lock().expect("unpoisoned").clone();
        assert_eq!(seen, [false, true, true], "the third run recovers too ({by_status})");
        assert_eq!(stats.stats().released, 0);
    }
}

/// A handler that blocks its thread for three leases (a sync SDK call) keeps its lease:
/// the renewal runs on a task of its own, on the runtime's other worker, so a duplicate in
/// the meantime is answered 409 and the handler runs once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_that_blocks_its_thread_keeps_its_lease() {
    // A lease long enough that a loaded machine's scheduling delays stay well within it:
    // renewals every 500 ms, each with a second to spare.
    let lease = Duration::from_millis(1500);
    let short = StoreConfig::builder().lease(lease).build().expect("valid");
    let store = Arc::new(MemoryStore::<StoredResponse>::new(short));
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = runs.clone();
    let route = post(move || {
        let counter = counter.clone();
        async move {
            counter.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(4500));
            (http::StatusCode::CREATED, "charged")
        }
    });
    let layer = IdempotencyLayer::with_config(store, crate::tenant, config(|c| c)).expect("fits");
    let router = Router::new().route("/charge", route).layer(layer);
    let first = tokio::spawn({
        let router = router.clone();
        async move { send(&router, charge(Some("k1"), "x")).await }
    });
    tokio::time::sleep(Duration::from_millis(3000)).await;
    let duplicate = send(&router, charge(Some("k1"), "x")).await;
    assert_eq!(duplicate.status, 409, "{duplicate:?}");
    assert_eq!(crate::bounded("the first", first).await.expect("first").status, 201);
    assert_eq!(runs.load(Ordering::SeqCst), 1, "one run");
}

/// A graceful shutdown waits for the runs still going: `runs()` counts a run whose client
/// left, `drained` says no while it works and yes once it ended, and the handler ran to
/// its end.
#[tokio::test(start_paused = true)]
async fn a_shutdown_can_wait_for_the_runs_still_going() {
    let (route, finished) = slow(Duration::from_secs(2));
    let layer = IdempotencyLayer::with_config(store(), crate::tenant, config(|c| c));
    let layer = layer.expect("fits");
    let runs = layer.runs();
    let router = Router::new().route("/charge", route).layer(layer);
    leave_after_50_ms(&router).await;
    assert_eq!(runs.going(), 1, "its run goes on");
    assert!(!runs.drained(Duration::from_secs(1)).await, "not drained while it works");
    assert!(runs.drained(Duration::from_secs(5)).await, "drained once it ended");
    assert_eq!((runs.going(), finished.load(Ordering::SeqCst)), (0, 1));
}

/// A body of `count` chunks of 1 KiB.
fn chunks(count: usize) -> axum::body::Body {
    struct Chunks(usize);
    impl futures_core::Stream for Chunks {
        type Item = Result<bytes::Bytes, std::io::Error>;
        fn poll_next(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<Self::Item>> {
            let Some(left) = self.0.checked_sub(1) else { return std::task::Poll::Ready(None) };
            self.0 = left;
            std::task::Poll::Ready(Some(Ok(bytes::Bytes::from(vec![b'x'; 1024]))))
        }
    }
    axum::body::Body::from_stream(Chunks(count))
}

/// A layer (1 KiB kept, `orphan_time_max` 1 s) around a route that streams 64 KiB, and
/// the body of one request's answer, read to its first frame (its head).
async fn a_streamed_response_read_to_its_head() -> (Router, axum::body::Body) {
    use http_body_util::BodyExt;
    let route = post(|| async { http::Response::new(chunks(64)) });
    let config = config(|c| c.response_bytes_max(1024).orphan_time_max(Duration::from_secs(1)));
    let layer = IdempotencyLayer::with_config(store(), crate::tenant, config).expect("fits");
    let router = Router::new().route("/charge", route).layer(layer);
    let response = router.clone().oneshot(charge(Some("k1"), "x")).await.expect("infallible");
    let mut body = response.into_body();
    let head = body.frame().await.expect("a frame").expect("the head");
    assert!(head.is_data());
    (router, body)
}

/// A client that reads the head of a streamed response and then stops reading, its
/// connection open, is treated as gone once it has taken no frame for `orphan_time_max`:
/// the run reads the rest, keeps the response, and the key no longer waits on it.
#[tokio::test(start_paused = true)]
async fn a_client_that_stops_reading_a_stream_does_not_hold_its_key() {
    let (router, body) = a_streamed_response_read_to_its_head().await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let retry = send(&router, charge(Some("k1"), "x")).await;
    assert!(retry.replayed, "kept, not held in flight by the stalled reader: {retry:?}");
    drop(body);
}

/// A client that leaves while its claim is being written (the store takes the claim, then
/// 100 ms to answer): no handler ran, so the fresh claim is given back, and the client's
/// retry runs at once instead of waiting out the lease.
#[tokio::test(start_paused = true)]
async fn a_client_that_leaves_during_its_claim_leaves_no_key_behind() {
    let (route, finished) = slow(Duration::from_millis(10));
    let bent = Bent::new(store(), Renewals::Work, Duration::from_millis(100));
    let (router, stats) = behind(bent, route, config(|c| c));
    let gave_up = tokio::time::timeout(
        Duration::from_millis(50),
        router.clone().oneshot(charge(Some("k1"), "x")),
    );
    assert!(gave_up.await.is_err(), "the client left during the claim");
    // Past the claim's answer, well within its 300 ms lease.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let retry = send(&router, charge(Some("k1"), "x")).await;
    assert_eq!((retry.status, finished.load(Ordering::SeqCst)), (201, 1), "{retry:?}");
    assert_eq!(stats.stats().released, 1);
}

/// A client that leaves the moment its claim is answered (the decision sent to it, not yet
/// taken): no handler ran, so the fresh claim is given back when the request is dropped,
/// and the client's retry runs at once instead of waiting out the lease.
#[tokio::test(start_paused = true)]
async fn a_client_that_leaves_as_its_claim_is_answered_leaves_no_key_behind() {
    use std::future::Future;
    let (route, finished) = slow(Duration::from_millis(10));
    let bent = Bent::new(store(), Renewals::Work, Duration::from_millis(100));
    let (router, stats) = behind(bent, route, config(|c| c));
    let mut request = Box::pin(router.clone().oneshot(charge(Some("k1"), "x")));
    let first = std::future::poll_fn(|cx| std::task::Poll::Ready(request.as_mut().poll(cx)));
    assert!(first.await.is_pending(), "the claim takes 100 ms to answer");
    // The claim's answer comes and is sent to the request, which is never polled again.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(stats.stats().released, 0, "the claim's task sent its decision");
    drop(request);
    // The give-back counts as a run: a graceful shutdown waits for it.
    assert!(stats.runs().drained(Duration::from_secs(1)).await, "the give-back ended");
    assert_eq!(stats.stats().released, 1, "given back once drained");
    let retry = send(&router, charge(Some("k1"), "x")).await;
    assert_eq!((retry.status, finished.load(Ordering::SeqCst)), (201, 1), "{retry:?}");
    assert!(!retry.replayed);
}

/// A request dropped on a thread outside any runtime (its future moved off the runtime it
/// came in on), its claim answered and waiting for it: the fresh claim is still given
/// back, on that runtime, and the retry runs at once.
#[test]
fn a_request_dropped_off_its_runtime_still_gives_its_claim_back() {
    use std::future::Future;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime");
    let (route, finished) = slow(Duration::ZERO);
    let bent = Bent::new(store(), Renewals::Work, Duration::from_millis(20));
    let (router, stats) = behind(bent, route, config(|c| c));
    let mut request = Box::pin(router.clone().oneshot(charge(Some("k1"), "x")));
    runtime.block_on(async {
        let first = std::future::poll_fn(|cx| std::task::Poll::Ready(request.as_mut().poll(cx)));
        assert!(first.await.is_pending(), "the claim takes 20 ms to answer");
        // Well past the claim's answer: the decision waits for the request.
        tokio::time::sleep(Duration::from_millis(200)).await;
    });
    std::thread::spawn(move || drop(request)).join().expect("dropped");
    runtime.block_on(async {
        let given_back = async {
            while stats.stats().released == 0 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        crate::bounded("the claim given back", given_back).await;
        let retry = send(&router, charge(Some("k1"), "x")).await;
        assert_eq!((retry.status, finished.load(Ordering::SeqCst)), (201, 1), "{retry:?}");
    });
}

/// A route whose first run's outcome is unknown (its key left in flight) and whose later
/// runs answer 200; what each run was told of recovering, in order.
fn unknown_then_checked() -> (axum::routing::MethodRouter, Arc<std::sync::Mutex<Vec<bool>>>) {
    use axum::Extension;
    use idem_http::{OutcomeUnknown, Recovering};
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    let route = post(move |recovering: Option<Extension<Recovering>>| {
        let log = log.clone();
        async move {
            let mut seen = log.lock().expect("unpoisoned");
            seen.push(recovering.is_some());
            if seen.len() == 1 {
                return (http::StatusCode::GATEWAY_TIMEOUT, Extension(OutcomeUnknown))
                    .into_response();
            }
            (http::StatusCode::OK, "checked first").into_response()
        }
    });
    (route, seen)
}

/// A recovering request dropped before its claim is answered, or once the answer waits
/// for it, never gives the recovered claim back (an earlier run may have acted): the key
/// stays held, and the next recovery after the lease is the one that runs.
#[tokio::test(start_paused = true)]
async fn a_recovering_client_that_leaves_leaves_its_claim_held() {
    use std::future::Future;
    for answered in [false, true] {
        let (route, seen) = unknown_then_checked();
        let bent = Bent::new(store(), Renewals::Work, Duration::from_millis(100));
        let (router, stats) = behind(bent, route, config(|c| c));
        assert_eq!(send(&router, charge(Some("k1"), "x")).await.status, 504);
        tokio::time::sleep(LEASE).await;
        let mut request = Box::pin(router.clone().oneshot(charge(Some("k1"), "x")));
        let first = std::future::poll_fn(|cx| std::task::Poll::Ready(request.as_mut().poll(cx)));
        assert!(first.await.is_pending(), "the claim takes 100 ms to answer");
        // Dropped at 50 ms (the claim's task then finds it gone) or at 150 ms (the
        // recovered claim waiting in the channel); either way past the claim's answer.
        let before = Duration::from_millis(if answered { 150 } else { 50 });
        tokio::time::sleep(before).await;
        drop(request);
        tokio::time::sleep(Duration::from_millis(200) - before).await;
        assert_eq!(stats.stats().released, 0, "a recovered claim given back ({answered})");
        assert_eq!(send(&router, charge(Some("k1"), "x")).await.status, 409, "held");
        tokio::time::sleep(LEASE).await;
        assert_eq!(send(&router, charge(Some("k1"), "x")).await.status, 200);
        let seen = seen.lock().expect("unpoisoned").clone();
        assert_eq!(seen, [false, true], "no run between, then a recovery ({answered})");
    }
}

/// A client that pauses past `orphan_time_max` in the middle of a streamed response and
/// then reads on missed frames: its body ends with an error, never as if it were whole.
#[tokio::test(start_paused = true)]
async fn a_client_that_missed_frames_gets_a_body_that_fails() {
    use http_body_util::BodyExt;
    let (_router, body) = a_streamed_response_read_to_its_head().await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let rest = body.collect().await;
    assert!(rest.is_err(), "missed frames, yet the body ended as if whole");
}
