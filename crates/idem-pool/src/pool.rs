//! The pool: checkout, return, close and maintenance.

use std::fmt;
use std::panic::{self, AssertUnwindSafe};

use idem_core::Timestamp;

use crate::config::{Builder, Config, Fairness, HealthCheck};
use crate::conn::{Loan, LoanId, PooledConnection};

use crate::shelf::{Claim, Held, Lent, Phase, Shelf};
use crate::state::{Grant, State, Waiter};
use crate::sync::{Arc, Condvar, Duration, Instant, Mutex, MutexGuard};
use crate::{ConfigError, Error, Manager, PoolState};

/// The shortest and longest pause after a failed connect before the pool connects again
/// (doubling with each failure in a row). Zero under loom: loom's condition variables
/// never time out, and a model explores orders, not pauses.
#[cfg(not(loom))]
const BACKOFF_MIN: Duration = Duration::from_millis(10);
#[cfg(not(loom))]
const BACKOFF_MAX: Duration = Duration::from_secs(1);
#[cfg(loom)]
const BACKOFF_MIN: Duration = Duration::ZERO;
#[cfg(loom)]
const BACKOFF_MAX: Duration = Duration::ZERO;

/// The pool proper, the part that lends connections and takes them back: the manager,
/// the settings and the locked state. `Pool` handles, guards and loans each hold it, so a
/// guard or a loan can give its connection back after every `Pool` handle is gone.
pub(crate) struct Lender<M: Manager> {
    pub(crate) manager: M,
    pub(crate) config: Config,
    /// The slots' phases and idle connections, outside the lock.
    pub(crate) shelf: Shelf<M::Connection>,
    pub(crate) state: Mutex<State<M::Connection>>,
    /// Wakes callers waiting out a connect backoff when the pool closes.
    pub(crate) backoff: Condvar,
}

/// A blocking connection pool whose release is idempotent. Cheap to clone: clones share
/// one pool.
///
/// ```
/// # use std::convert::Infallible;
/// # #[derive(Debug)] struct Noop;
/// # impl idem_pool::Manager for Noop {
/// #     type Connection = (); type Error = Infallible;
/// #     fn connect(&self) -> Result<(), Infallible> { Ok(()) }
/// # }
/// let pool = idem_pool::Pool::builder().max_size(2).build(Noop)?;
/// let mut conn = pool.get()?;
/// assert!(conn.release());  // back in the pool
/// assert!(!conn.release()); // a second release is a counted no-op
/// assert_eq!(pool.state().double_releases, 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Pool<M: Manager> {
    handle: Arc<Handle<M>>,
}

/// The owner of the maintenance thread's stop signal: when the last `Pool` clone goes,
/// the thread is told to stop (guards and loans keep only the `Lender`).
struct Handle<M: Manager> {
    lender: Arc<Lender<M>>,
    stop: Arc<Stop>,
}

#[derive(Default)]
struct Stop {
    stopped: Mutex<bool>,
    cv: Condvar,
}

impl Stop {
    fn signal(&self) {
        *self.stopped.lock() = true;
        self.cv.notify_one();
    }
}

impl<M: Manager> Drop for Handle<M> {
    fn drop(&mut self) {
        self.stop.signal();
    }
}

impl<M: Manager> Clone for Pool<M> {
    fn clone(&self) -> Self {
        Self { handle: self.handle.clone() }
    }
}

impl<M: Manager + fmt::Debug> fmt::Debug for Pool<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pool")
            .field("manager", &self.handle.lender.manager)
            .field("config", &self.handle.lender.config)
            .field("state", &self.state())
            .finish()
    }
}

impl<M: Manager> Pool<M> {
    /// A builder with the defaults (`max_size` 10, `connection_timeout` 30 s, ...); the
    /// manager type is inferred from the [`Builder::build`] call.
    pub fn builder() -> Builder<M> {
        Builder::default()
    }
}

impl<M: Manager> Builder<M> {
    /// Validates the settings, makes `min_idle` connections (best effort: a failure here
    /// is reported by the first `get`), and starts the maintenance thread if configured.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] naming the first setting out of range.
    pub fn build(self, manager: M) -> Result<Pool<M>, ConfigError> {
        let config = self.validate()?;
        let mut state = State::new(config.max_size);
        state.fair_after = config.fair_after;
        let state = Mutex::new(state);
        let shelf = Shelf::new(config.max_size);
        let backoff = Condvar::default();
        let lender = Arc::new(Lender { manager, config, shelf, state, backoff });
        let handle = Arc::new(Handle { lender, stop: Arc::new(Stop::default()) });
        let pool = Pool { handle };
        pool.maintain();
        pool.start_maintenance();
        Ok(pool)
    }
}

impl<M: Manager> Pool<M> {
    fn lender(&self) -> &Arc<Lender<M>> {
        &self.handle.lender
    }

    /// Waits up to the configured connection timeout for a connection.
    ///
    /// # Errors
    ///
    /// As [`get_timeout`](Self::get_timeout).
    pub fn get(&self) -> Result<PooledConnection<M>, Error> {
        self.get_timeout(self.lender().config.connection_timeout)
    }

    /// Waits up to `timeout` for a connection: an idle one, a new one if the pool is below
    /// `max_size`, or one returned by another thread. Which waiter a returned connection
    /// goes to is the pool's [`Fairness`]: by default ([`Fairness::Eventual`]) a running
    /// thread may take it first, but never once the longest waiter has waited
    /// `fair_after`; strict arrival order is [`Fairness::Fifo`].
    ///
    /// # Errors
    ///
    /// [`Error::Timeout`] (with the connections in use, and the last connection error, if
    /// any) when `timeout` passes,
    /// [`Error::Closed`] if the pool is or gets closed, [`Error::TooManyWaiters`] if
    /// `waiters_max` threads are already waiting.
    pub fn get_timeout(&self, timeout: Duration) -> Result<PooledConnection<M>, Error> {
        let _span = idem_core::trace_span!(DEBUG, "checkout", ?timeout);
        let result = self.lender().checkout(Some(timeout));
        #[cfg(feature = "tracing")]
        if let Err(error) = &result {
            idem_core::trace_event!(WARN, %error, "checkout failed");
        }
        result
    }

    /// A connection if one is idle or can be made at once, as r2d2's `try_get`; never
    /// waits for a return, a backoff or a waiter ahead of it.
    ///
    /// `None` means "nothing now", not a timeout: it is not counted in
    /// [`PoolState::timeouts`](crate::PoolState::timeouts). It is also the answer of a
    /// closed pool ([`is_closed`](Self::is_closed) tells) and of a connect that failed
    /// (its error is kept as the cause a later `get`'s [`Error::Timeout`] reports).
    pub fn try_get(&self) -> Option<PooledConnection<M>> {
        let _span = idem_core::trace_span!(DEBUG, "checkout", timeout = "none");
        self.lender().checkout(None).ok()
    }

    /// Releases a loan; see [`Loan::release`].
    pub fn release(&self, loan: &Loan<M>) -> bool {
        loan.release()
    }

    /// Closes the pool: every waiter not yet handed a connection wakes with
    /// [`Error::Closed`] (one that was handed one gets it), idle connections are
    /// dropped now, lent ones when they come back, and `get` fails from now on. Idempotent
    /// by its shape: closing twice changes nothing more.
    pub fn close(&self) {
        self.handle.stop.signal();
        let idle = {
            let mut state = self.lender().state.lock();
            if state.closed {
                return;
            }
            state.closed = true;
            let shelf = &self.lender().shelf;
            shelf.close();
            for waiter in state.waiters.iter_mut().filter(|w| w.grant.is_none()) {
                waiter.grant = Some(Grant::Closed);
                waiter.cv.notify_one();
            }
            self.lender().backoff.notify_all();
            let idle = (0..shelf.len()).filter_map(|slot| shelf.reclaim(slot)).collect::<Vec<_>>();
            idle.into_iter()
                .map(|(claim, held)| state.discard(shelf, claim, held))
                .collect::<Vec<_>>()
        };
        // Connections are closed outside the lock: closing one may be slow.
        drop(idle);
    }

    /// The manager the pool was built with.
    pub fn manager(&self) -> &M {
        &self.lender().manager
    }

    /// Whether [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        self.lender().state.lock().closed
    }

    /// Counts for metrics: size, idle, in use, waiters, and what happened so far.
    pub fn state(&self) -> PoolState {
        let lender = self.lender();
        lender.state.lock().snapshot(&lender.shelf)
    }

    /// Closes idle connections past their idle timeout or lifetime, counts lent ones held
    /// past the leak threshold, and makes connections up to `min_idle`. The maintenance
    /// thread calls it; with no thread configured, call it yourself.
    pub fn maintain(&self) {
        self.lender().maintain();
    }

    /// Checks the pool's internal invariants; tests call it after every step.
    ///
    /// # Panics
    ///
    /// If an invariant is broken (a bug in this crate, never a caller's error).
    pub fn assert_invariants(&self) {
        let lender = self.lender();
        lender.state.lock().assert_invariants(&lender.shelf, lender.config.max_size);
    }

    #[cfg(not(loom))]
    fn start_maintenance(&self) {
        let Some(interval) = self.lender().config.maintenance_interval else { return };
        let weak = crate::sync::Weak::clone(&Arc::downgrade(self.lender()));
        let stop = self.handle.stop.clone();
        // Without a thread the pool still works; maintenance runs on `maintain`.
        let _ = crate::sync::spawn_named("idem-pool-maintenance", move || {
            maintenance_loop(&weak, &stop, interval);
        });
    }

    /// Loom models run without the maintenance thread.
    #[cfg(loom)]
    fn start_maintenance(&self) {}
}

#[cfg(not(loom))]
fn maintenance_loop<M: Manager>(
    lender: &crate::sync::Weak<Lender<M>>,
    stop: &Stop,
    interval: Duration,
) {
    loop {
        // An interval too long to add to the clock (`Duration::MAX`) waits in long naps.
        let now = Instant::now();
        let until = now.checked_add(interval).unwrap_or(now + NAP_WITHOUT_DEADLINE);
        {
            let stopped = stop.stopped.lock();
            let stopped = if *stopped { stopped } else { stop.cv.wait_until(stopped, until) };
            if *stopped {
                return;
            }
        }
        match lender.upgrade() {
            Some(lender) if !lender.state.lock().closed => {
                // A manager or a connection's drop that panics must not end maintenance
                // for good (idle expiry, leak counts and min_idle would stop): the round
                // is cut short, its state already put back, and the next round runs.
                if panic::catch_unwind(AssertUnwindSafe(|| lender.maintain())).is_err() {
                    idem_core::trace_event!(ERROR, "a maintenance round panicked; next round");
                }
            }
            _ => return,
        }
    }
}

/// The error of the last failed connect or health check, as `state()` reports it.
type LastError = Arc<dyn std::error::Error + Send + Sync>;

/// Runs a manager call `f`; if it panics, `restore` puts back the pool's state the call
/// held (its slot) before the panic goes on to the caller: a panicking `connect`,
/// `is_valid` or `has_broken` costs the pool no place.
fn guarded<T>(f: impl FnOnce() -> T, restore: impl FnOnce()) -> T {
    match panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(value) => value,
        Err(payload) => {
            restore();
            panic::resume_unwind(payload)
        }
    }
}

/// What one locked step of a checkout decided.
enum Step<C> {
    Lend(Lent<C>),
    Retry,
    Create(Claim),
    Wait,
    Fail(Error),
}

impl<M: Manager> Lender<M> {
    /// The clock, read only when a time rule is configured (lifetime, idle timeout, leak
    /// threshold); otherwise the epoch, which no rule looks at.
    fn now(&self) -> Timestamp {
        let c = &self.config;
        if c.max_lifetime.is_some() || c.idle_timeout.is_some() || c.leak_threshold.is_some() {
            c.clock.now()
        } else {
            Timestamp::ZERO
        }
    }

    /// Whether an idle connection must be closed rather than lent.
    fn expired(&self, held: &Held<M::Connection>, now: Timestamp) -> bool {
        let c = &self.config;
        c.max_lifetime.is_some_and(|l| held.created_at.saturating_add(l) <= now)
            || c.idle_timeout.is_some_and(|t| held.returned_at.saturating_add(t) <= now)
    }

    /// An idle connection taken off the shelf, lent from `now` under a new generation.
    fn lend_idle(
        &self,
        mut claim: Claim,
        held: Held<M::Connection>,
        now: Timestamp,
    ) -> Lent<M::Connection> {
        self.shelf.lend_new(&mut claim);
        self.loan(claim, held, now)
    }

    /// Runs `f` (a manager's call, the clock, the drop of a user's value: anything that
    /// may panic) while this caller holds the slot of `claim`. If it panics, the slot is
    /// emptied and handed on (to the longest waiter, or the free list) before the panic
    /// goes on, so it costs the pool no place; `discarded` says whether the connection
    /// the caller holds is then counted closed (one lent before, not one just made, which
    /// was not counted created either). Returns `f`'s answer and the claim.
    fn holding<T>(&self, claim: Claim, discarded: bool, f: impl FnOnce() -> T) -> (T, Claim) {
        let mut claim = Some(claim);
        let answer = guarded(f, || self.slot_emptied(claim.take(), discarded));
        (answer, claim.expect("only a panic takes the claim, and it does not return here"))
    }

    /// A connection lent from `now` under its claim's generation (its start recorded for
    /// the leak count once its check passed, in `validated`).
    fn loan(&self, claim: Claim, held: Held<M::Connection>, now: Timestamp) -> Lent<M::Connection> {
        Lent { conn: held.conn, claim, created_at: held.created_at, lent_at: now }
    }

    /// The lock-free `get`: an idle connection off the shelf, unless the pool closed or,
    /// under `Fairness::Fifo`, someone waits (then the locked path decides who is served).
    /// An expired one met on the way is closed, and the locked path decides.
    fn take_unlocked(&self, now: Timestamp) -> Option<Lent<M::Connection>> {
        let fifo = self.config.fairness == Fairness::Fifo;
        if self.shelf.is_closed() || (fifo && self.shelf.waiting()) {
            return None;
        }
        let (claim, held) = self.shelf.take_any()?;
        if self.expired(&held, now) {
            let closed = self.state.lock().discard(&self.shelf, claim, held);
            drop(closed);
            return None;
        }
        Some(self.lend_idle(claim, held, now))
    }

    /// One locked decision: lend an idle connection, reserve a slot to connect into, or
    /// wait. An expired idle connection met on the way is moved into `trash` (to be closed
    /// outside the lock) and the caller decides again.
    fn step(
        &self,
        state: &mut State<M::Connection>,
        now: Timestamp,
        trash: &mut Vec<M::Connection>,
    ) -> Step<M::Connection> {
        if state.closed {
            return Step::Fail(Error::Closed);
        }
        // Fifo: waiters are served first, a newcomer takes nothing while someone waits.
        // Barging and Eventual: a running thread may take an idle connection (Eventual
        // bounds that by handing returns to a waiter that has waited `fair_after`).
        let fifo = self.config.fairness == Fairness::Fifo;
        if !fifo || !state.someone_waits() {
            if let Some((claim, held)) = self.shelf.take_any() {
                if self.expired(&held, now) {
                    trash.push(state.discard(&self.shelf, claim, held));
                    return Step::Retry;
                }
                return Step::Lend(self.lend_idle(claim, held, now));
            }
            if let Some(slot) = state.free.pop() {
                let claim = self.shelf.claim_empty(slot).expect("a slot on the free list is empty");
                return Step::Create(claim);
            }
        }
        Step::Wait
    }

    /// Checks a connection out, waiting up to `timeout` (`None`: never wait, and an
    /// `Error::Timeout` that is not counted, since `try_get` reports it as `None`).
    pub(crate) fn checkout(
        self: &Arc<Self>,
        timeout: Option<Duration>,
    ) -> Result<PooledConnection<M>, Error> {
        // Real time is read only once this call has to wait or connect: the fast path
        // never does.
        let mut started: Option<Started> = None;
        let mut start = || *started.get_or_insert_with(|| Started::now(timeout));
        let mut yielded = false;
        loop {
            let now = self.now();
            if let Some(lent) = self.take_unlocked(now) {
                return match self.validated(lent) {
                    Ok(guard) => Ok(guard),
                    Err(claim) => self.connect_into(claim, start()),
                };
            }
            let mut trash = Vec::new();
            let mut state = self.state.lock();
            let claim = match self.step(&mut state, now, &mut trash) {
                Step::Retry => {
                    // Close the expired connection outside the lock, then decide again.
                    drop(state);
                    drop(trash);
                    continue;
                }
                Step::Fail(error) => return Err(error),
                Step::Lend(lent) => {
                    drop(state);
                    match self.validated(lent) {
                        Ok(guard) => return Ok(guard),
                        Err(claim) => claim,
                    }
                }
                Step::Create(claim) => {
                    drop(state);
                    claim
                }
                Step::Wait if start().deadline == Deadline::Now => {
                    return Err(self.timeout(&state, Duration::ZERO));
                }
                // Before parking, once: let the threads that hold connections run, since
                // one of them is likely about to return one (a park and wake-up costs a
                // context switch each; with more threads than cores a yield is cheaper).
                Step::Wait if !yielded => {
                    yielded = true;
                    drop(state);
                    crate::sync::yield_now();
                    continue;
                }
                Step::Wait => match self.wait(state, start())? {
                    Waited::Guard(guard) => return Ok(guard),
                    Waited::Create(claim) => claim,
                    Waited::Again => continue,
                },
            };
            return self.connect_into(claim, start());
        }
    }

    /// Connects into the slot of `claim` for this caller. After a failed connect it waits
    /// out the pool's pause and tries again, keeping the slot (and so, under
    /// `Fairness::Fifo`, its turn: a waiter behind it does not take the slot and get
    /// served first) until it has a connection or its deadline passes; the slot is then
    /// handed on and the call times out (`connect_turn`). `try_get` tries once.
    fn connect_into(
        self: &Arc<Self>,
        mut claim: Claim,
        started: Started,
    ) -> Result<PooledConnection<M>, Error> {
        loop {
            claim = self.connect_turn(claim, started)?;
            claim = match self.create(claim) {
                Ok(guard) => return Ok(guard),
                Err(claim) => claim,
            };
            // The deadline is looked at after every failed connect, not only while a pause
            // is pending (`connect_turn`): a pause may have passed, or been reset by another
            // caller's success, while this one dropped the error it replaced.
            let past = match started.deadline {
                Deadline::Now => true,
                Deadline::At(deadline) => Instant::now() >= deadline,
                Deadline::Never => false,
            };
            if past {
                let mut state = self.state.lock();
                state.give_free(&self.shelf, claim);
                // `try_get` (Deadline::Now) did not wait, so it did not time out.
                state.counters.timeouts += u64::from(started.deadline != Deadline::Now);
                let waited = if started.deadline == Deadline::Now {
                    Duration::ZERO
                } else {
                    started.at.elapsed()
                };
                return Err(self.timeout(&state, waited));
            }
        }
    }

    /// Waits, holding the reserved slot of `claim`, until a connect may start (the backoff
    /// after a failed connect has passed). If the caller's deadline comes first, or it
    /// may not wait at all, the slot is handed on (to the head waiter, or the free list)
    /// and the call times out; if the pool closes, the slot is emptied and the call fails.
    fn connect_turn(&self, claim: Claim, started: Started) -> Result<Claim, Error> {
        let mut state = self.state.lock();
        loop {
            if state.closed {
                state.give_free(&self.shelf, claim);
                return Err(Error::Closed);
            }
            let now = Instant::now();
            let after = match state.connect_after {
                Some(after) if now < after => after,
                _ => return Ok(claim),
            };
            let until = match started.deadline {
                Deadline::At(deadline) if now < deadline => after.min(deadline),
                Deadline::Never => after,
                Deadline::Now | Deadline::At(_) => {
                    // RACE (stranded slot): callers queued as waiters while this one
                    // connected and failed; under Fifo none of them may take a free slot,
                    // and no return will come for a connection that was never made. So
                    // the slot goes to the head waiter, who connects into it once the
                    // pause has passed. Test:
                    // `connect::a_caller_that_times_out_connecting_hands_its_slot_on`; loom
                    // model of the retry: `failed_connect_hands_the_slot_to_a_waiter`.
                    state.give_free(&self.shelf, claim);
                    // `try_get` (Deadline::Now) did not wait, so it did not time out.
                    state.counters.timeouts += u64::from(started.deadline != Deadline::Now);
                    return Err(self.timeout(&state, started.at.elapsed()));
                }
            };
            state = self.backoff.wait_until(state, until);
        }
    }

    /// Records a failed connect: its error, and the pause before the next connect. Returns
    /// the error it replaced, for the caller to drop once it has let go of the lock.
    #[must_use = "drop the replaced error after the lock"]
    fn connect_failed(state: &mut State<M::Connection>, error: M::Error) -> Option<LastError> {
        let replaced = state.last_error.replace(Arc::new(error));
        state.connect_backoff = (state.connect_backoff * 2).clamp(BACKOFF_MIN, BACKOFF_MAX);
        state.connect_after = Instant::now().checked_add(state.connect_backoff);
        replaced
    }

    /// Empties the slot a manager call held when the call panicked, and hands it on (to
    /// the longest waiter, or the free list), so the panic costs the pool no place.
    fn slot_emptied(&self, claim: Option<Claim>, discarded: bool) {
        let Some(claim) = claim else { return };
        let mut state = self.state.lock();
        if discarded {
            state.counters.discarded += 1;
        }
        state.give_free(&self.shelf, claim);
    }

    /// Records a successful connect: the next failure starts the backoff afresh.
    fn connect_succeeded(state: &mut State<M::Connection>) {
        state.connect_backoff = Duration::ZERO;
        state.connect_after = None;
    }

    fn timeout(&self, state: &State<M::Connection>, waited: Duration) -> Error {
        let (_, in_use, _) = self.shelf.counts();
        let max_size = self.config.max_size;
        Error::Timeout { waited, in_use, max_size, last_error: state.last_error.clone() }
    }

    /// Queues this thread as a waiter until a grant or its deadline. Returns with the
    /// lock released.
    fn wait<'a>(
        self: &'a Arc<Self>,
        mut state: MutexGuard<'a, State<M::Connection>>,
        started: Started,
    ) -> Result<Waited<M>, Error> {
        let queued = state.waiters.iter().filter(|w| w.grant.is_none()).count();
        if queued >= self.config.waiters_max {
            return Err(Error::TooManyWaiters { waiters_max: self.config.waiters_max });
        }
        let id = state.next_waiter_id;
        state.next_waiter_id += 1;
        let cv = Arc::new(Condvar::default());
        // A waiter woken to compete and overtaken queues again with its first instant, so
        // Eventual's bound counts its whole wait, not its latest turn.
        let since = started.at;
        let waiter = Waiter { id, since, cv: cv.clone(), grant: None, woken: false };
        state.enqueue(&self.shelf, waiter);
        loop {
            // RACE (lost wake-up): a releaser grants us a connection between our check and
            // our sleep. The grant is written under the lock we hold until the condition
            // variable releases it, and each waiter has its own condition variable, so
            // the notification cannot go to anyone else. Loom model:
            // `release_wakes_waiting_get`.
            let position = state.waiters.iter().position(|w| w.id == id);
            let position = position.expect("a waiter leaves the queue only by itself");
            if let Some(grant) = state.waiters[position].grant.take() {
                state.dequeue(&self.shelf, position);
                return self.granted(state, grant);
            }
            state.waiters[position].woken = false;
            // A return that did not see us queue put its connection on the shelf (the
            // race in `Shelf::put_unlocked`): barging, take it; Fifo, it goes to the
            // longest waiter.
            if self.config.fairness == Fairness::Fifo {
                let idle = (0..self.shelf.len()).find_map(|slot| self.shelf.reclaim(slot));
                if let Some((claim, held)) = idle {
                    state.give_idle(&self.shelf, claim, held, Fairness::Fifo);
                    continue;
                }
            } else if let Some((claim, held)) = self.shelf.take_any() {
                state.dequeue(&self.shelf, position);
                return Ok(self.lend_taken(state, claim, held));
            }
            let now = Instant::now();
            let until = match started.deadline {
                Deadline::At(deadline) if now >= deadline => {
                    state.dequeue(&self.shelf, position);
                    state.counters.timeouts += 1;
                    return Err(self.timeout(&state, started.at.elapsed()));
                }
                Deadline::At(deadline) => deadline,
                // No deadline (a timeout too long to add): sleep in long naps.
                Deadline::Never | Deadline::Now => now + NAP_WITHOUT_DEADLINE,
            };
            state = cv.wait_until(state, until);
        }
    }

    /// Lends a connection a waiter took off the shelf (closing it first, and deciding
    /// again, if it expired). Returns with the lock released.
    ///
    /// RACE (barging): a running thread may take the idle connection between the wake-up
    /// and this waiter's turn at the lock; the waiter then finds the shelf empty and waits
    /// again (its first instant kept, so `Fairness::Eventual` still counts its whole
    /// wait). Loom models: `release_wakes_waiting_get_barging`,
    /// `release_wakes_waiting_get_eventual`.
    fn lend_taken(
        self: &Arc<Self>,
        state: MutexGuard<'_, State<M::Connection>>,
        claim: Claim,
        held: Held<M::Connection>,
    ) -> Waited<M> {
        // The caller's clock is read outside the lock (it may be slow, or ask the pool).
        drop(state);
        let (now, claim) = self.holding(claim, true, || self.now());
        if self.expired(&held, now) {
            let closed = self.state.lock().discard(&self.shelf, claim, held);
            drop(closed);
            return Waited::Again;
        }
        match self.validated(self.lend_idle(claim, held, now)) {
            Ok(guard) => Waited::Guard(guard),
            Err(claim) => Waited::Create(claim),
        }
    }

    fn granted(
        self: &Arc<Self>,
        state: MutexGuard<'_, State<M::Connection>>,
        grant: Grant<M::Connection>,
    ) -> Result<Waited<M>, Error> {
        match grant {
            Grant::Closed => Err(Error::Closed),
            Grant::Create(claim) => Ok(Waited::Create(claim)),
            Grant::Conn(mut claim, held) => {
                // Lent before the lock goes (a granted slot belongs to a queued grant), and
                // the caller's clock read outside the lock.
                self.shelf.lend_held(&mut claim);
                drop(state);
                let (now, claim) = self.holding(claim, true, || self.now());
                if self.expired(&held, now) {
                    // Handed on past its lifetime (or idle time): closed, not lent; the
                    // slot is this waiter's to connect into. A connection whose drop
                    // panics still gives the slot back.
                    self.state.lock().counters.discarded += 1;
                    let ((), mut claim) = self.holding(claim, false, || drop(held));
                    self.shelf.reserve(&mut claim);
                    return Ok(Waited::Create(claim));
                }
                Ok(match self.validated(self.loan(claim, held, now)) {
                    Ok(guard) => Waited::Guard(guard),
                    Err(claim) => Waited::Create(claim),
                })
            }
        }
    }

    /// Health-checks a freshly lent connection. A failing one is discarded and its slot,
    /// emptied, stays this caller's to connect into (`Err`): it was this caller's turn.
    fn validated(
        self: &Arc<Self>,
        lent: Lent<M::Connection>,
    ) -> Result<PooledConnection<M>, Claim> {
        if self.config.health_check != HealthCheck::OnCheckout {
            return Ok(PooledConnection::new(self.clone(), lent));
        }
        let Lent { mut conn, claim, created_at, lent_at } = lent;
        let (checked, mut claim) = self.holding(claim, true, || self.manager.is_valid(&mut conn));
        if let Err(error) = checked {
            let mut state = self.state.lock();
            let replaced = state.last_error.replace(Arc::new(error));
            state.counters.discarded += 1;
            self.shelf.reserve(&mut claim);
            drop(state);
            let ((), claim) = self.holding(claim, false, || drop((conn, replaced)));
            return Err(claim);
        }
        Ok(PooledConnection::new(self.clone(), Lent { conn, claim, created_at, lent_at }))
    }

    /// Connects into the reserved slot of `claim` and lends the new connection; on a
    /// failed connect, gives the claim back to the caller.
    fn create(self: &Arc<Self>, claim: Claim) -> Result<PooledConnection<M>, Claim> {
        let (result, claim) = self.holding(claim, false, || self.manager.connect());
        let (now, mut claim) = self.holding(claim, false, || self.now());
        let mut state = self.state.lock();
        match result {
            Ok(conn) => {
                self.shelf.lend_new(&mut claim);
                state.counters.created += 1;
                Self::connect_succeeded(&mut state);
                // Closed while connecting: the caller still gets it; it is closed on return.
                drop(state);
                let lent = Lent { conn, claim, created_at: now, lent_at: now };
                Ok(PooledConnection::new(self.clone(), lent))
            }
            Err(error) => {
                // The slot stays this caller's (`connect_into` tries again after the pause
                // or hands it on), also when the replaced error's drop panics.
                let replaced = Self::connect_failed(&mut state, error);
                drop(state);
                let ((), claim) = self.holding(claim, false, || drop(replaced));
                Err(claim)
            }
        }
    }

    /// Takes back a loan's connection. `broken` discards it. With nobody waiting, the
    /// connection goes on the shelf without the lock.
    pub(crate) fn give_back(&self, lent: Lent<M::Connection>, broken: bool) {
        let Lent { mut conn, claim, created_at, lent_at } = lent;
        self.shelf.end_loan(&claim);
        let (broken, claim) = if broken {
            (true, claim)
        } else {
            self.holding(claim, true, || self.manager.has_broken(&mut conn))
        };
        // No clock read on return (it is half of a get+drop cycle's cost): the loan's start
        // stands in for "now". A lifetime that ended during the loan is caught by the next
        // checkout, which reads the clock; idle time counts from the loan's start.
        let lifetime_over =
            self.config.max_lifetime.is_some_and(|l| created_at.saturating_add(l) <= lent_at);
        let held = Held { conn, created_at, returned_at: lent_at };
        let slot = claim.slot();
        if !broken && !lifetime_over && !self.shelf.waiting() && !self.shelf.is_closed() {
            if self.shelf.put_unlocked(claim, held) {
                self.rehome(slot);
            }
            self.shelf.remember(slot);
            return;
        }
        let mut state = self.state.lock();
        if state.closed || broken || lifetime_over {
            let closed = state.discard(&self.shelf, claim, held);
            drop(state);
            drop(closed);
            return;
        }
        state.give_idle(&self.shelf, claim, held, self.config.fairness);
    }

    /// Hands on, under the lock, a connection a return put on the shelf as a waiter
    /// queued or the pool closed (the race in `Shelf::put_unlocked`); nothing if it was taken.
    fn rehome(&self, slot: usize) {
        let mut state = self.state.lock();
        let Some((claim, held)) = self.shelf.reclaim(slot) else { return };
        if state.closed {
            let closed = state.discard(&self.shelf, claim, held);
            drop(state);
            drop(closed);
            return;
        }
        state.give_idle(&self.shelf, claim, held, self.config.fairness);
    }

    fn maintain(&self) {
        let now = self.now();
        let mut trash = Vec::new();
        let mut leaks_found = 0;
        {
            let mut state = self.state.lock();
            if state.closed {
                return;
            }
            for slot in 0..self.shelf.len() {
                let Some((claim, held)) = self.shelf.reclaim(slot) else { continue };
                if self.expired(&held, now) {
                    trash.push(state.discard(&self.shelf, claim, held));
                } else {
                    state.give_idle(&self.shelf, claim, held, self.config.fairness);
                }
            }
            if let Some(threshold) = self.config.leak_threshold {
                leaks_found = self.count_leaks(&mut state, threshold, now);
            }
        }
        if leaks_found > 0 {
            idem_core::trace_event!(
                WARN,
                leaks = leaks_found,
                "loans held past the leak threshold"
            );
        }
        drop(trash);
        self.fill_min_idle();
    }

    /// Counts loans held past `threshold`, each once.
    fn count_leaks(
        &self,
        state: &mut State<M::Connection>,
        threshold: Duration,
        now: Timestamp,
    ) -> u64 {
        let mut leaks = 0;
        for slot in 0..self.shelf.len() {
            let word = self.shelf.word(slot);
            let lent = matches!(word.phase, Phase::Lent | Phase::Parked);
            if !lent || state.leak_counted[slot] == word.generation {
                continue;
            }
            let lent_at = self.shelf.lent_at(slot, word.generation);
            if lent_at.is_some_and(|at| at.saturating_add(threshold) <= now) {
                state.leak_counted[slot] = word.generation;
                leaks += 1;
            }
        }
        state.counters.leaks_suspected += leaks;
        leaks
    }

    /// Makes connections until `min_idle` are idle, one at a time, outside the lock;
    /// stops at the first failure (the next round retries).
    fn fill_min_idle(&self) {
        loop {
            let claim = {
                let mut state = self.state.lock();
                let (idle, _, _) = self.shelf.counts();
                if state.closed || state.someone_waits() || idle >= self.config.min_idle {
                    return;
                }
                let Some(slot) = state.free.pop() else { return };
                self.shelf.claim_empty(slot).expect("a slot on the free list is empty")
            };
            let (result, claim) = self.holding(claim, false, || self.manager.connect());
            let (now, claim) = self.holding(claim, false, || self.now());
            let mut state = self.state.lock();
            match result {
                Ok(conn) => {
                    state.counters.created += 1;
                    Self::connect_succeeded(&mut state);
                    if state.closed {
                        state.counters.discarded += 1;
                        self.shelf.empty(claim);
                        drop(state);
                        drop(conn);
                        return;
                    }
                    let held = Held { conn, created_at: now, returned_at: now };
                    state.give_idle(&self.shelf, claim, held, self.config.fairness);
                }
                Err(error) => {
                    let replaced = Self::connect_failed(&mut state, error);
                    state.give_free(&self.shelf, claim);
                    drop(state);
                    drop(replaced);
                    return;
                }
            }
        }
    }

    /// Releases a loan: returns the connection if the loan still holds it.
    pub(crate) fn release_loan(&self, id: LoanId) -> bool {
        let (slot, generation) = (id.slot(), id.generation());
        let mut state = self.state.lock();
        let word = self.shelf.word(slot);
        if word.generation != generation {
            state.counters.stale_releases += 1;
            drop(state);
            idem_core::trace_event!(
                WARN,
                slot,
                generation,
                "stale release: the slot was lent again since; ignored"
            );
            return false;
        }
        if word.phase != Phase::Parked {
            state.counters.double_releases += 1;
            drop(state);
            idem_core::trace_event!(DEBUG, slot, generation, "double release: ignored");
            return false;
        }
        let parked = state.parked[slot].take();
        let (mut lent, broken) = parked.expect("a parked slot's connection is parked");
        self.shelf.lend_held(&mut lent.claim);
        drop(state);
        self.give_back(lent, broken);
        true
    }

    /// Parks a guard's connection, for a loan to release later; a guard marked `broken`
    /// makes that release close it.
    pub(crate) fn park(&self, mut lent: Lent<M::Connection>, broken: bool) {
        let mut state = self.state.lock();
        let slot = lent.claim.slot();
        self.shelf.park(&mut lent.claim);
        state.parked[slot] = Some((lent, broken));
    }

    /// Counts a release of a guard that was already released.
    pub(crate) fn count_double_release(&self) {
        self.state.lock().counters.double_releases += 1;
        idem_core::trace_event!(DEBUG, "double release of a guard: ignored");
    }
}

/// How long a waiter without a deadline sleeps between checks of its grant.
const NAP_WITHOUT_DEADLINE: Duration = Duration::from_secs(3600);

/// When a checkout started to wait, and until when it may.
#[derive(Debug, Clone, Copy)]
struct Started {
    at: Instant,
    deadline: Deadline,
}

impl Started {
    fn now(timeout: Option<Duration>) -> Self {
        let at = Instant::now();
        let deadline = match timeout {
            None => Deadline::Now,
            Some(timeout) => at.checked_add(timeout).map_or(Deadline::Never, Deadline::At),
        };
        Self { at, deadline }
    }
}

/// How long a checkout may wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Deadline {
    /// Not at all (`try_get`).
    Now,
    /// Until this instant.
    At(Instant),
    /// Without end (a timeout too long to add to the clock, such as `Duration::MAX`).
    Never,
}

/// How a wait ended.
enum Waited<M: Manager> {
    Guard(PooledConnection<M>),
    Create(Claim),
    Again,
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::{Arc, Duration, Manager, Stop, maintenance_loop};

    /// A manager for a pool that is never built.
    #[derive(Debug)]
    enum Unbuilt {}

    impl Manager for Unbuilt {
        type Connection = ();
        type Error = std::convert::Infallible;
        fn connect(&self) -> Result<(), Self::Error> {
            match *self {}
        }
    }

    /// An interval too long to add to the clock (`Duration::MAX`): the maintenance thread
    /// computes its wait without panicking, and stops when told.
    #[test]
    fn maintenance_with_an_endless_interval_waits_and_stops() {
        let stop = Arc::new(Stop::default());
        let lender = crate::sync::Weak::<super::Lender<Unbuilt>>::new();
        // Stopped before it starts: the loop still computes its first wait.
        stop.signal();
        let stopping = stop.clone();
        let thread = crate::sync::spawn_named("test-maintenance", move || {
            maintenance_loop(&lender, &stopping, Duration::MAX);
        });
        let thread = thread.expect("a thread");
        assert!(thread.join().is_ok(), "the maintenance thread neither panicked nor hung");
    }
}
