//! A claimed request's run, owned by a task of its own: the handler, its lease renewed
//! while it works, and the settle of its claim, to the end even if the client leaves.
//!
//! ```text
//! connection future            run task (tokio::spawn)
//!   claim ---- Run(lease) ---->  handler ............ renew every lease/4
//!   waits on the reply  <-----   response head (whole body: completed first)
//!   client leaves? (drop) --->   orphaned: the rest may take `orphan_time_max`
//!                                body streamed on, then complete (stand-in kept)
//! ```

use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body::Body;
use http_body_util::BodyExt;
use idem_core::{AsyncKeyStore, Lease, StoreError};
use tokio::sync::{mpsc, oneshot, watch};
use tower_service::Service;

use crate::body::{BoxError, ResponseBody, Streamed};
use crate::layer::{
    Claimed, Keep, LayerState, NothingHappened, OutcomeUnknown, StoredByHandler, stored_response,
};
use crate::outcomes::Count;
use crate::problem::Problem;
use crate::stored::StoredResponse;

/// Frames of a streamed response buffered between the run task and the client: the
/// task reads the handler's body at most this far ahead of what the client took.
pub(crate) const STREAM_FRAMES_BUFFERED: usize = 4;

/// What the run task sends back: the response, or the service's own error.
type Reply<RB, E> = Result<Response<ResponseBody<RB>>, E>;

/// The claim is settled, or left in flight on purpose, only by disarming this guard: a
/// run that ends otherwise (the handler panicked, the run was abandoned past
/// `orphan_time_max`) is counted as left in flight when the guard drops.
struct Unsettled<'a, St, F> {
    state: &'a LayerState<St, F>,
    armed: bool,
}

impl<St, F> Drop for Unsettled<'_, St, F> {
    fn drop(&mut self) {
        if self.armed {
            self.state.left_in_flight("the run ended before its claim was settled");
        }
    }
}

/// Starts the run of a claimed request on a task of its own, and waits for its answer.
/// Dropping the returned future (the client went away) does not stop the run.
pub(crate) async fn run_claimed<S, St, F, B, RB>(
    state: Arc<LayerState<St, F>>,
    inner: S,
    request: Request<B>,
    held: Held,
) -> Reply<RB, S::Error>
where
    S: Service<Request<B>, Response = Response<RB>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    St: AsyncKeyStore<StoredResponse> + 'static,
    F: Send + Sync + 'static,
    B: Send + 'static,
    RB: Body<Data = Bytes> + Send + 'static,
    RB::Error: Into<BoxError> + Send,
{
    let (reply, answer) = oneshot::channel();
    let (present, gone) = oneshot::channel::<()>();
    // The renewal, on a task of its own, so that a handler that blocks its thread (a sync
    // SDK call) cannot starve it: on a multi-threaded runtime another worker renews. It is
    // spawned before the run: a task spawned from a worker waits in that worker's slot
    // for the next task, which no other worker may take, and the run then blocks it.
    let lost = Arc::new(AtomicBool::new(false));
    let (vouch, vouched) = watch::channel(Some(held.vouched));
    let renewal = (held.lease.clone(), lost.clone(), vouch, held.vouched);
    let renewal = tokio::spawn(keep_renewing(state.clone(), renewal));
    let stop = StopRenewing(renewal.abort_handle());
    let run_state = Arc::clone(&state);
    let counted = state.runs.start();
    tokio::spawn(async move {
        let _counted = counted;
        let run = run(&run_state, inner, request, (held, lost, vouched, stop), reply);
        orphan_bound(&run_state, run, gone).await;
    });
    // The client is here while this future waits, and then while it reads a streamed
    // body: dropping `present` (with this future, or with that body) says it left.
    let mut answered = answer.await.unwrap_or_else(|_| Ok(unfinished().response()));
    if let Ok(response) = &mut answered {
        response.body_mut().hold_presence(present);
    }
    answered
}

/// The answer when the run ended before it answered: its handler panicked, or the store
/// did while the handler's answer was being kept (the client cannot tell, and the words
/// claim neither).
fn unfinished() -> Problem {
    Problem::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "handler-failed",
        "Handler failed",
        "the request's run failed before it answered; whether it acted is unknown. Retry \
         with the same key: after its lease the retry checks before acting",
    )
}

/// Runs `run` to its end while the client is there (`gone` pending), and at most
/// `orphan_time_max` once it has left.
async fn orphan_bound<St, F>(
    state: &LayerState<St, F>,
    run: impl Future<Output = ()>,
    gone: oneshot::Receiver<()>,
) {
    let mut run = pin!(run);
    tokio::select! {
        () = &mut run => return,
        _ = gone => {}
    }
    let limit = state.config.orphan_time_max;
    match tokio::time::timeout(limit, run).await {
        Ok(()) => state.counters.count(Count::OrphansFinished),
        Err(_) => {
            state.counters.count(Count::OrphansAbandoned);
            idem_core::trace_event!(WARN, ?limit, "an orphaned handler ran past its bound");
        }
    }
}

/// The claim a run holds: its lease, and whether it recovered a claim an earlier run
/// never settled.
pub(crate) struct Held {
    pub(crate) lease: Lease,
    pub(crate) recovering: bool,
    /// When the call that granted the lease was sent: the store's deadline is at least a
    /// lease after it.
    pub(crate) vouched: tokio::time::Instant,
}

/// Stops the renewal task when the run ends, however it ends (settled, panicked, or
/// abandoned past its orphan bound).
struct StopRenewing(tokio::task::AbortHandle);

impl Drop for StopRenewing {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The handler under a renewed lease, then the settle.
async fn run<S, St, F, B, RB>(
    state: &Arc<LayerState<St, F>>,
    mut inner: S,
    request: Request<B>,
    (held, lost, vouched, _stop): (Held, Arc<AtomicBool>, Vouched, StopRenewing),
    reply: oneshot::Sender<Reply<RB, S::Error>>,
) where
    S: Service<Request<B>, Response = Response<RB>>,
    St: AsyncKeyStore<StoredResponse> + 'static,
    F: Send + Sync + 'static,
    RB: Body<Data = Bytes> + Send + 'static,
    RB::Error: Into<BoxError> + Send,
{
    let mut unsettled = Unsettled { state, armed: true };
    let Held { lease, recovering, .. } = held;
    let mut request = request;
    request.extensions_mut().insert(Claimed { lease: lease.clone() });
    let work = async {
        let started = tokio::time::Instant::now();
        // RACE (a handler outliving its lease): a server cut from the store cannot renew,
        // the lease runs out, another server recovers the key and acts; a handler still
        // running here would act a second time. So the handler is polled only while the
        // lease is vouched for (`Doubt`, checked before every poll); past that it is
        // dropped where it waits, before its next step, and the key is left in flight
        // for a recovery that checks before acting. A step that runs without yielding
        // past the deadline is not cut short: the deadline leaves an eighth of a lease
        // for it. The simulation's slow handlers and store cuts are the check
        // (crates/idem-sim).
        let mut doubt = Doubt::new(vouched, state.store.lease());
        let mut call = pin!(inner.call(request));
        let answered = std::future::poll_fn(|cx| {
            if doubt.poll_due(cx).is_ready() {
                return std::task::Poll::Ready(None);
            }
            call.as_mut().poll(cx).map(Some)
        })
        .await;
        let Some(answered) = answered else {
            stop(state, doubt.lost(), reply);
            return;
        };
        state.counters.handler_took(started.elapsed());
        match answered {
            // The service failed before any response: nothing says whether it acted.
            Err(error) => {
                state.left_in_flight("the service returned an error");
                let _ = reply.send(Err(error));
            }
            Ok(response) => {
                settle(state, (&lease, recovering), response, &lost, reply).await;
            }
        }
    };
    work.await;
    unsettled.armed = false;
}

/// What the renewals tell the run: when the last call that vouched for the lease was
/// sent (`None`: a renewal found it lost).
type Vouched = watch::Receiver<Option<tokio::time::Instant>>;

/// The renewal's side of [`Vouched`].
type Vouch = watch::Sender<Option<tokio::time::Instant>>;

/// Whether a run vouched for by a call sent at `sent` would be due a renewal at once: a
/// renewal period has passed since the send ([`start_within`]). A claim answered that late
/// is vouched for afresh before its handler starts: started on it, the run would have less
/// of its guard left than a renewal may take to be answered, and be stopped after its
/// handler began.
pub(crate) fn renewal_due(sent: tokio::time::Instant, lease: Duration) -> bool {
    later(sent, start_within(lease)) <= tokio::time::Instant::now()
}

/// How long after its send a claim or a renewal may be answered and still start a run: a
/// renewal period, and never past the guard ([`vouched_for`]; a lease under 8/3 ms has a
/// guard shorter than the millisecond a period takes at least).
pub(crate) fn start_within(lease: Duration) -> Duration {
    renewal_period(lease).min(vouched_for(lease))
}

/// A run's renewals are sent this far apart: a quarter of the lease, at least 1 ms.
fn renewal_period(lease: Duration) -> Duration {
    (lease / 4).max(Duration::from_millis(1))
}

/// How long after the send of the last claim or renewal the store answered a run may go
/// on: three eighths of a lease. The store's deadline is a whole lease after that send,
/// by its clock; the layer assumes the store's clock runs less than half a lease ahead of
/// the server's elapsed time over any lease, and keeps an eighth of a lease for a step
/// the handler takes without yielding.
fn vouched_for(lease: Duration) -> Duration {
    // A lease too long to triple (a store told "never expire" with `Duration::MAX`)
    // is cut first: the run never waits that long anyway.
    lease.min(FAR_FUTURE) * 3 / 8
}

/// The longest wait the run's timers are given: thirty years. A store's lease may be as
/// long as `Duration::MAX`, which no clock can add to an instant: such a lease panicked in
/// the run's task before the handler ran, and left its key held for good.
const FAR_FUTURE: Duration = Duration::from_secs(30 * 365 * 24 * 3_600);

/// `at` plus `by`, `by` cut to [`FAR_FUTURE`] so that the sum never overflows.
fn later(at: tokio::time::Instant, by: Duration) -> tokio::time::Instant {
    at + by.min(FAR_FUTURE)
}

/// Whether the run may go on: due once its lease is no longer vouched for.
struct Doubt {
    vouched: Vouched,
    grace: Duration,
    timer: Pin<Box<tokio::time::Sleep>>,
    /// Ready when a renewal reports (false: the renewal task ended). Owned, so that its
    /// waker stays registered between polls: a loss must wake the run at once.
    report: Pin<Box<dyn Future<Output = bool> + Send>>,
}

/// The next report on `vouched`, on a receiver of its own.
fn next_report(vouched: &Vouched) -> Pin<Box<dyn Future<Output = bool> + Send>> {
    let mut own = vouched.clone();
    Box::pin(async move { own.changed().await.is_ok() })
}

impl Doubt {
    fn new(vouched: Vouched, lease: Duration) -> Self {
        let grace = vouched_for(lease);
        let until = vouched.borrow().map_or_else(tokio::time::Instant::now, |at| later(at, grace));
        let report = next_report(&vouched);
        Self { vouched, grace, timer: Box::pin(tokio::time::sleep_until(until)), report }
    }

    /// Whether a renewal found the lease lost.
    fn lost(&self) -> bool {
        self.vouched.borrow().is_none()
    }

    /// Ready once the lease is in doubt: its last vouch is older than the grace (checked
    /// against the clock at every poll, not only when the timer fires), or it was lost.
    /// Otherwise it arranges to be woken at the deadline, and when a renewal reports.
    fn poll_due(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        loop {
            // Marked seen, so that the next report's receiver waits for a newer one.
            let Some(at) = *self.vouched.borrow_and_update() else {
                return std::task::Poll::Ready(());
            };
            let until = later(at, self.grace);
            if tokio::time::Instant::now() >= until {
                return std::task::Poll::Ready(());
            }
            if self.timer.deadline() != until {
                self.timer.as_mut().reset(until);
            }
            let _ = self.timer.as_mut().poll(cx);
            // A renewal's report wakes the run (a loss must stop it at once); a renewal
            // task that ended leaves the last vouch to run out on the timer.
            match self.report.as_mut().poll(cx) {
                std::task::Poll::Ready(true) => self.report = next_report(&self.vouched),
                std::task::Poll::Ready(false) => {
                    self.report = Box::pin(std::future::pending());
                    return std::task::Poll::Pending;
                }
                std::task::Poll::Pending => return std::task::Poll::Pending,
            }
        }
    }
}

/// A run whose lease is in doubt: counted, its key left in flight, its client told.
fn stop<St, F, RB, E>(state: &LayerState<St, F>, lost: bool, reply: oneshot::Sender<Reply<RB, E>>)
where
    St: AsyncKeyStore<StoredResponse>,
    RB: Body<Data = Bytes> + Send + 'static,
{
    state.counters.count(Count::RunsStopped);
    if lost {
        state.lease_lost("renew");
    }
    state.left_in_flight("the run was stopped: its lease could not be vouched for");
    if reply.send(Ok(stopped(state.store.lease()).response())).is_err() {
        // An orphan's client had left: nobody hears the answer; the key stays for recovery.
        idem_core::trace_event!(INFO, "a stopped run's client had already left");
    }
}

/// The answer when the run was stopped because its lease was in doubt: retry after the
/// lease, when the retry recovers the key (checking before acting).
fn stopped(lease: Duration) -> Problem {
    Problem::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "run-stopped",
        "Run stopped",
        "the server could not confirm with the idempotency store that this request still \
         held its key, so it stopped the run; whether it acted is unknown. Retry with the \
         same key: after the lease the retry checks before acting",
    )
    .retry_after(lease)
}

/// Renews `lease` every quarter of the store's lease (from one send to the next, the
/// first a quarter after the send of the claim or renewal that vouched for it, `since`)
/// while the run works, and reports each answered renewal's send to the run (`vouch`): the run
/// goes on for three eighths of a lease after it, so one failed renewal, tried again a
/// sixteenth of a lease later, does not stop a run the store still serves. A renewal that
/// finds the lease lost (a duplicate recovered the key) reports it, sets `lost` and
/// stops: the run is stopped, or its result is not stored as if it held the key. A
/// failed renewal (the store did not answer) is counted.
///
/// RACE (renewal against recovery): the store compares the token in the statement that
/// extends the deadline, so a renewal either lands before a recovery (which then answers
/// in flight) or is refused after it. Loom model: idem-core's `renewal_races_recovery`.
///
/// RACE (the lost flag against the completion): the flag is set on this task and read by
/// the run's; a completion that starts before the flag is seen is refused by the store's
/// fencing all the same (the token moved on), so the flag only spares the call and counts
/// the loss. The store side is the loom model above.
///
/// RACE (a slow claim against the run's guard): the guard counts three eighths of a lease
/// from the claim's send; a first renewal counted from this task's start (after the claim
/// was answered) came after the guard ran out when the claim took over an eighth of a
/// lease, and a healthy run was stopped. Counted from `since`, a renewal is due before the
/// guard whatever the claim took. Test: `runs::a_slow_claim_does_not_stop_a_healthy_run`.
async fn keep_renewing<St, F>(
    state: Arc<LayerState<St, F>>,
    (lease, lost, vouch, since): (Lease, Arc<AtomicBool>, Vouch, tokio::time::Instant),
) where
    St: AsyncKeyStore<StoredResponse>,
{
    let every = renewal_period(state.store.lease());
    let again = (state.store.lease() / 16).max(Duration::from_millis(1));
    let mut next = later(since, every);
    loop {
        tokio::time::sleep_until(next).await;
        let sent = tokio::time::Instant::now();
        match state.store.renew(&lease).await {
            Ok(_) => {
                vouch.send_modify(|at| *at = at.map(|at| at.max(sent)));
                state.counters.count(Count::LeasesRenewed);
                next = later(sent, every);
            }
            Err(StoreError::LeaseLost { .. }) => {
                vouch.send_replace(None);
                // ORDERING: Release, paired with the Acquire in `complete`: the run sees
                // the loss once it sees the flag (see the RACE above). Counted there,
                // where it decides what is kept (or where the run is stopped): a handler
                // that stored its answer itself (`StoredByHandler`) finished the claim,
                // which a late renewal then finds settled.
                lost.store(true, Ordering::Release);
                idem_core::trace_event!(WARN, "a renewal found the lease lost");
                return;
            }
            Err(error) => {
                crate::layer::count_store_error(&state.counters, "renew", &error);
                // Soon again: the run stops once no renewal has vouched for the lease
                // for three eighths of one.
                next = later(tokio::time::Instant::now(), again);
            }
        }
    }
}

/// Settles the claim with the handler's response and sends the response on: a whole
/// body is completed first, then sent; one over the stored limit is sent at once,
/// streamed, and its stand-in completed only once the stream ended well.
async fn settle<St, F, RB, E>(
    state: &LayerState<St, F>,
    (lease, recovering): (&Lease, bool),
    response: Response<RB>,
    lost: &AtomicBool,
    reply: oneshot::Sender<Reply<RB, E>>,
) where
    St: AsyncKeyStore<StoredResponse>,
    RB: Body<Data = Bytes> + Send + 'static,
    RB::Error: Into<BoxError> + Send,
{
    let (mut parts, body) = response.into_parts();
    if !must_keep(state, (lease, recovering), &mut parts).await {
        let _ = reply.send(Ok(Response::from_parts(parts, ResponseBody::inner(body))));
        return;
    }
    if state.config.advertise_expiry {
        advertise_expiry(state, &mut parts.headers);
    }
    let limit = state.response_bytes_max;
    let keep = Keep { body: limit, store: state.store_bytes_max };
    let mut body = pin!(body);
    let head = match read_head(body.as_mut(), limit).await {
        Ok(Head::Whole(bytes)) => {
            let (stored, kept) = stored_response(&parts, Some(&bytes), &state.config, keep);
            state.complete(lease, stored, kept, lost).await;
            let _ = reply.send(Ok(Response::from_parts(parts, ResponseBody::full(bytes))));
            return;
        }
        Ok(Head::Over(head)) => head,
        Err(error) => {
            body_failed(state, error);
            let _ = reply.send(Ok(failed_half_way().response()));
            return;
        }
    };
    let (stored, kept) = stored_response(&parts, None, &state.config, keep);
    let (sender, receiver) = mpsc::channel(STREAM_FRAMES_BUFFERED);
    let frames = Frames { sender, stall: state.config.orphan_time_max };
    let streamed = ResponseBody::streamed(head, receiver);
    let _ = reply.send(Ok(Response::from_parts(parts, streamed)));
    match stream_rest(body, &frames).await {
        // The end is sent once the stand-in is kept: a caller that retries the moment its
        // body ends finds it, as a caller of a whole body finds its response kept.
        Ok(whole) => {
            state.complete(lease, stored, kept, lost).await;
            // A client that missed frames (it stalled past the bound, then read on) is
            // told its body is not whole, never an end as if it were.
            let end = if whole {
                Streamed::End
            } else {
                Streamed::Failed("the response was cut short: the client stopped reading".into())
            };
            frames.send(end).await;
        }
        Err(error) => body_failed(state, error),
    }
}

/// Whether the response is to be kept; if not, the claim is settled here as the response
/// says: already completed by the handler, left in flight (the outcome is unknown, or a
/// recovered claim did nothing), or released (nothing happened).
async fn must_keep<St, F>(
    state: &LayerState<St, F>,
    (lease, recovering): (&Lease, bool),
    parts: &mut http::response::Parts,
) -> bool
where
    St: AsyncKeyStore<StoredResponse>,
{
    if parts.extensions.remove::<StoredByHandler>().is_some() {
        // The handler completed the claim itself, inside its own transaction.
        return false;
    }
    // An unknown outcome wins over "nothing happened" if a handler says both,
    // since releasing a key whose effect may have happened would act twice.
    if parts.extensions.remove::<OutcomeUnknown>().is_some() {
        state.left_in_flight("the handler marked its outcome unknown");
        return false;
    }
    // Nothing happened, as the handler says, or as the configuration says of this status
    // (a promise the handler made: releasing after an effect would run it again).
    let effect_free = state.config.effect_free.contains(parts.status);
    let nothing_happened = parts.extensions.remove::<NothingHappened>().is_some();
    if !(nothing_happened || effect_free) {
        return true;
    }
    if recovering {
        // This run did nothing, but the claim it recovered was held by an earlier run
        // that may have acted: releasing would let the next request act blindly, as a
        // fresh claim. Left in flight, the next request recovers it and checks again.
        state.left_in_flight("a recovered claim is never released");
        return false;
    }
    // If the release fails, the claim stays in flight and recovers after its lease.
    let released = state.store.release(lease).await;
    if released.is_ok() {
        state.counters.count(Count::Released);
    }
    state.settled("release", released);
    false
}

/// Sets [`IDEMPOTENCY_EXPIRES`](crate::header::IDEMPOTENCY_EXPIRES): now plus the store's
/// result TTL. A lifetime past what an HTTP date can say (the year 9999) is told as none.
fn advertise_expiry<St, F>(state: &LayerState<St, F>, headers: &mut http::HeaderMap)
where
    St: AsyncKeyStore<StoredResponse>,
{
    let expires = std::time::SystemTime::now().checked_add(state.store.result_ttl());
    if let Some(date) = expires.and_then(crate::header::http_date)
        && let Ok(date) = http::HeaderValue::from_str(&date)
    {
        headers.insert(crate::header::IDEMPOTENCY_EXPIRES, date);
    }
}

/// The head of a response body: the whole of it, or the first `limit`-plus bytes.
enum Head {
    Whole(Bytes),
    Over(Bytes),
}

/// Reads `body` until it ends or passes `limit` bytes.
async fn read_head<B>(mut body: std::pin::Pin<&mut B>, limit: usize) -> Result<Head, BoxError>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    let mut read = bytes::BytesMut::new();
    while let Some(frame) = body.frame().await {
        // Trailers are not kept (nor replayed): only data counts.
        let Ok(data) = frame.map_err(Into::into)?.into_data() else { continue };
        read.extend_from_slice(&data);
        if read.len() > limit {
            return Ok(Head::Over(read.freeze()));
        }
    }
    Ok(Head::Whole(read.freeze()))
}

/// Sends the rest of `body` to the client through `frames`, and reads it to its end
/// even once the client has gone (its receiver dropped): whether the response ended
/// well decides whether it is kept; whether the client took every frame, the answer.
async fn stream_rest<B>(mut body: std::pin::Pin<&mut B>, frames: &Frames) -> Result<bool, BoxError>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    let mut taking = true;
    while let Some(frame) = body.frame().await {
        match frame {
            // A client that left, or took no frame for the stall bound, is sent no more;
            // the body is still read to its end.
            Ok(frame) if taking => taking = frames.send(Streamed::Frame(frame)).await,
            Ok(_) => {}
            Err(error) => {
                let error: BoxError = error.into();
                let said = "the response failed half-way; retry with the same key";
                frames.send(Streamed::Failed(said.into())).await;
                return Err(error);
            }
        }
    }
    Ok(taking)
}

/// The channel to a streamed body, with how long a frame may wait for the client.
struct Frames {
    sender: mpsc::Sender<Streamed>,
    stall: Duration,
}

impl Frames {
    /// Sends `item`; whether the client took it within the stall bound (a client that
    /// stops reading, its connection open, would otherwise hold its key for ever).
    async fn send(&self, item: Streamed) -> bool {
        let sent = tokio::time::timeout(self.stall, self.sender.send(item)).await;
        matches!(sent, Ok(Ok(())))
    }
}

/// A response body that failed: what the handler did is unknown, so the claim stays in
/// flight and the next request after the lease recovers.
fn body_failed<St, F>(state: &LayerState<St, F>, error: BoxError) {
    idem_core::trace_event!(WARN, %error, "the handler's response body failed");
    drop(error);
    state.left_in_flight("the response body failed");
}

fn failed_half_way() -> Problem {
    Problem::new(
        StatusCode::BAD_GATEWAY,
        "response-failed",
        "Response failed",
        "the handler's response failed half-way; whether it acted is unknown. Retry with \
         the same key: the retry checks before acting",
    )
}

/// The runs a layer has on their own tasks, for a graceful shutdown: a server that stops
/// accepting connections waits with [`Runs::drained`] for the runs still going (their
/// clients may have left), so no handler is dropped half-way when the runtime ends. A
/// fresh claim being given back for a client that left before its handler ran counts as
/// a run too, so the shutdown does not leave its key held for a lease. A claim still
/// being decided does not: a runtime that ends then may leave a claim the store took
/// held until its lease runs out. From
/// [`IdempotencyLayer::runs`](crate::IdempotencyLayer::runs); clones share the count.
#[derive(Debug, Clone)]
pub struct Runs(Arc<tokio::sync::watch::Sender<usize>>);

impl Default for Runs {
    fn default() -> Self {
        Self(Arc::new(tokio::sync::watch::Sender::new(0)))
    }
}

impl Runs {
    /// How many runs are going now.
    pub fn going(&self) -> usize {
        *self.0.borrow()
    }

    /// Waits until no run is going, at most `limit`; whether none is. A run started while
    /// it waits is waited for too.
    pub async fn drained(&self, limit: Duration) -> bool {
        let mut count = self.0.subscribe();
        // The watch channel checks and waits in one step: an end between a check and a
        // wait cannot be missed.
        let idle = count.wait_for(|going| *going == 0);
        matches!(tokio::time::timeout(limit, idle).await, Ok(Ok(_)))
    }

    /// Counts a run from now until the returned guard drops (the run's end, however it
    /// ends: settled, panicked, abandoned).
    pub(crate) fn start(&self) -> RunGuard {
        self.0.send_modify(|going| *going += 1);
        RunGuard(self.clone())
    }
}

/// One run counted in [`Runs`].
pub(crate) struct RunGuard(Runs);

impl Drop for RunGuard {
    fn drop(&mut self) {
        (self.0).0.send_modify(|going| *going -= 1);
    }
}
