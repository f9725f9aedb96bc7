//! The lease renewer: keeps a payment's claim alive while a gateway call runs.
//!
//! A card network can take longer than the store's lease. Were the lease to run out during
//! the charge, a reconcile (or a retry) would recover the claim, ask the gateway before the
//! charge landed, hear "never charged" and release the key; the next retry would then
//! charge again at a gateway that does not deduplicate by key. So each gateway call runs
//! with its lease held here, and a held lease is renewed every quarter of the store's
//! lease, as idem-http renews around its handlers:
//!
//! ```text
//!   pay:      claim -- hold(lease) -- gateway.charge ................. -- drop -- complete
//!   watcher:                     at 1/4: this call is slow, give it a renewer
//!   renewer:                             renew at 1/4, 2/4, ... while held
//! ```
//!
//! Most calls end well within a quarter of the lease and cost a registry entry, nothing
//! more. One watcher thread per processor (started by the first call that needs it, ended
//! when the processor is dropped) notices a call still held at its first renewal, and gives
//! it a renewing thread of its own: a store slow to answer one renewal delays that call's
//! renewals only, never another's, however many calls are slow at once. A failed renewal
//! is tried again after a sixteenth of the lease, so a store away for most of a lease still
//! keeps it. While no call waits for a renewer the watcher sleeps without a deadline, and
//! the next `hold` wakes it; while one waits, it wakes when the first is due, at least
//! once a quarter of the lease (a lease held meanwhile is due a quarter later, never
//! before that wake).

use std::collections::HashMap;
use std::panic::{self, AssertUnwindSafe};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use idem_core::{KeyStore, Lease, StoreError};

use crate::processor::PaymentOutcome;

#[cfg(loom)]
use loom::sync::{Condvar, Mutex, MutexGuard};
#[cfg(not(loom))]
use parking_lot::{Condvar, Mutex, MutexGuard};

/// A century: a due time this far off is never reached.
const NEVER: Duration = Duration::from_secs(100 * 365 * 24 * 60 * 60);

/// `at + by`, or [`NEVER`] after `at` if that is past what an `Instant` holds (a lease
/// of `Duration::MAX`): a due time, never a panic.
fn after(at: Instant, by: Duration) -> Instant {
    at.checked_add(by).or_else(|| at.checked_add(NEVER)).unwrap_or(at)
}

/// How the renewals went, over a processor's life (see [`Processor::renewals`]).
///
/// [`Processor::renewals`]: crate::Processor::renewals
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Renewals {
    /// Leases extended while a gateway call ran.
    pub renewed: u64,
    /// Gateway calls that outlived their claim: a renewal, or the call's completion, was
    /// refused because another caller had recovered the key (the store was away, or slow
    /// to answer a renewal, until the lease ran out). Only a gateway that deduplicates by
    /// key then prevents a second charge: an operator watches this.
    pub lost: u64,
    /// Renewals that failed (the store unreachable, or panicked): tried again a sixteenth
    /// of the lease later while the call still runs.
    pub failed: u64,
}

/// One held lease: the latest renewal of it, when it is next due, and whether a thread
/// of its own renews it.
#[derive(Debug)]
struct Held {
    lease: Lease,
    due: Instant,
    renewer: bool,
}

#[derive(Debug, Default)]
struct State {
    next_id: u64,
    held: HashMap<u64, Held>,
    renewals: Renewals,
    stopping: bool,
    /// The watcher sleeps with no deadline: no call waits for a renewer. The next `hold`
    /// wakes it.
    watcher_idle: bool,
}

/// The leases held while their gateway calls run, and their renewal schedule. Its size is
/// the number of gateway calls in flight on one processor: one per calling thread.
#[doc(hidden)]
#[derive(Debug, Default)]
pub struct Registry {
    state: Mutex<State>,
    wake: Condvar,
}

/// The outcome of one renewal, as [`Registry::renewed`] takes it.
#[doc(hidden)]
pub type Renewed = Result<Lease, StoreError>;

impl Registry {
    fn lock(&self) -> MutexGuard<'_, State> {
        #[cfg(not(loom))]
        return self.state.lock();
        #[cfg(loom)]
        return self.state.lock().expect("a loom model thread panicked holding the registry");
    }

    /// Holds `lease` from now on, first due `due_in` from now; returns its id for
    /// [`release`](Self::release).
    pub fn hold(&self, lease: Lease, due_in: Duration) -> u64 {
        let due = after(Instant::now(), due_in);
        let mut state = self.lock();
        let id = state.next_id;
        state.next_id += 1;
        state.held.insert(id, Held { lease, due, renewer: false });
        if std::mem::take(&mut state.watcher_idle) {
            drop(state);
            self.wake.notify_all();
        }
        id
    }

    /// Stops renewing lease `id`: its gateway call ended. Wakes the lease's renewing
    /// thread, if it has one, to end it. `false` if the lease was no longer held (a
    /// renewal found it lost, and counted it).
    pub fn release(&self, id: u64) -> bool {
        let released = self.lock().held.remove(&id);
        let held = released.is_some();
        if released.is_some_and(|held| held.renewer) {
            self.wake.notify_all();
        }
        held
    }

    /// The latest renewal of lease `id`, if it is still held: what its renewer renews.
    pub fn lease_of(&self, id: u64) -> Option<Lease> {
        self.lock().held.get(&id).map(|held| held.lease.clone())
    }

    /// Takes the outcome of renewing lease `id`: due again `again_in` from now after a
    /// renewal, `retry_in` after a failure.
    ///
    /// RACE (a renewal against the end of its call): the renewer read the lease, and the
    /// call ended and released it while the store renewed it. The entry is gone and is
    /// never put back: a held lease outliving its call would be renewed for ever, and a
    /// claim its caller left pending (an ambiguous answer) would never run out and never
    /// be reconciled. The renewal itself lands once more at most, and is harmless: the
    /// call completed (the renewal is then refused) or left the claim pending one lease
    /// longer. Loom model: `a_renewal_racing_the_end_of_its_call_is_not_put_back`.
    pub fn renewed(&self, id: u64, outcome: Renewed, again_in: Duration, retry_in: Duration) {
        let now = Instant::now();
        let mut state = self.lock();
        let Some(held) = state.held.get_mut(&id) else { return };
        match outcome {
            Ok(lease) => {
                held.lease = lease;
                held.due = after(now, again_in);
                state.renewals.renewed += 1;
            }
            Err(StoreError::LeaseLost { .. }) => {
                state.held.remove(&id);
                state.renewals.lost += 1;
            }
            Err(_) => {
                held.due = after(now, retry_in);
                state.renewals.failed += 1;
            }
        }
    }

    /// How many leases are held now.
    pub fn held(&self) -> usize {
        self.lock().held.len()
    }

    /// The counts so far.
    pub fn renewals(&self) -> Renewals {
        self.lock().renewals
    }

    /// The watcher's wait: the held leases due now that have no renewer yet (each now
    /// marked as having one), or `None` once stopped.
    fn slow_calls(&self, quarter: Duration) -> Option<Vec<u64>> {
        let mut state = self.lock();
        loop {
            if state.stopping {
                return None;
            }
            let now = Instant::now();
            let waiting = state.held.iter_mut().filter(|(_, held)| !held.renewer);
            let mut first = after(now, quarter);
            let mut due = Vec::new();
            // With no call waiting for a renewer, nothing can come due before a `hold`,
            // which wakes the watcher: it sleeps without a deadline rather than every
            // quarter of a lease (300 idle processors on a 1 ms lease used a core).
            let mut none = true;
            for (id, held) in waiting {
                none = false;
                if held.due <= now {
                    held.renewer = true;
                    due.push(*id);
                } else {
                    first = first.min(held.due);
                }
            }
            if !due.is_empty() {
                return Some(due);
            }
            state.watcher_idle = none;
            if none {
                first = after(now, NEVER);
            }
            state = self.wait_until(state, first);
            state.watcher_idle = false;
        }
    }

    /// A renewer's wait: lease `id` once it is due, or `None` once it is released (or the
    /// processor stopped).
    fn next_due(&self, id: u64) -> Option<Lease> {
        let mut state = self.lock();
        loop {
            if state.stopping {
                return None;
            }
            let held = state.held.get(&id)?;
            if held.due <= Instant::now() {
                return Some(held.lease.clone());
            }
            let due = held.due;
            state = self.wait_until(state, due);
        }
    }

    /// Gives a call the OS refused a renewing thread for back to the watcher, which hands
    /// it on again (or renews it itself) when its renewal is next due. Nothing if the call
    /// ended meanwhile.
    fn no_renewer(&self, id: u64) {
        if let Some(held) = self.lock().held.get_mut(&id) {
            held.renewer = false;
        }
    }

    /// Counts a call that outlived its claim with no renewal that said so: its completion
    /// was refused because another caller had recovered the key.
    pub(crate) fn count_lost(&self) {
        self.lock().renewals.lost += 1;
    }

    fn wait_until<'a>(
        &self,
        guard: MutexGuard<'a, State>,
        until: Instant,
    ) -> MutexGuard<'a, State> {
        #[cfg(not(loom))]
        {
            let mut guard = guard;
            // Timed out or woken, the caller's loop looks again.
            let _ = self.wake.wait_until(&mut guard, until);
            guard
        }
        #[cfg(loom)]
        {
            let _ = until;
            self.wake.wait(guard).expect("a loom model thread panicked holding the registry")
        }
    }

    fn stop(&self) {
        self.lock().stopping = true;
        self.wake.notify_all();
    }
}

/// The renewals of one processor: the registry, and the watcher thread, started by the
/// first [`hold`](Self::hold).
#[derive(Debug, Default)]
pub(crate) struct Renewer {
    registry: Arc<Registry>,
    watcher: OnceLock<JoinHandle<()>>,
    starting: Mutex<()>,
}

/// A lease held for renewal until this is dropped.
pub(crate) struct Holding<'a> {
    registry: &'a Registry,
    id: u64,
}

impl Holding<'_> {
    /// Ends the hold when its call returned: `false` if a renewal had found the lease
    /// lost meanwhile (and counted it in [`Renewals::lost`]).
    pub(crate) fn end(self) -> bool {
        let held = self.registry.release(self.id);
        std::mem::forget(self);
        held
    }
}

impl Drop for Holding<'_> {
    /// A call that panicked: the hold ends all the same.
    fn drop(&mut self) {
        self.registry.release(self.id);
    }
}

/// The schedule of one store's renewals: due every quarter of its lease, and again a
/// sixteenth of it after a failure (each at least a millisecond: a lease shorter than
/// that cannot be kept by any renewal).
#[derive(Debug, Clone, Copy)]
struct Schedule {
    quarter: Duration,
    retry: Duration,
}

impl Schedule {
    fn of(lease: Duration) -> Self {
        let at_least_a_ms = |d: Duration| d.max(Duration::from_millis(1));
        Self { quarter: at_least_a_ms(lease / 4), retry: at_least_a_ms(lease / 16) }
    }
}

impl Renewer {
    /// Holds `lease` for renewal by `store` until the returned guard is dropped (after the
    /// gateway call, whether it returned or panicked).
    ///
    /// # Errors
    ///
    /// The OS's error if the watcher thread could not be started: nothing is held.
    pub(crate) fn hold<S>(&self, store: &Arc<S>, lease: &Lease) -> std::io::Result<Holding<'_>>
    where
        S: KeyStore<PaymentOutcome> + 'static,
    {
        let schedule = Schedule::of(store.lease());
        self.started(store, schedule)?;
        let id = self.registry.hold(lease.clone(), schedule.quarter);
        Ok(Holding { registry: &self.registry, id })
    }

    fn started<S>(&self, store: &Arc<S>, schedule: Schedule) -> std::io::Result<()>
    where
        S: KeyStore<PaymentOutcome> + 'static,
    {
        if self.watcher.get().is_some() {
            return Ok(());
        }
        #[cfg(not(loom))]
        let _once = self.starting.lock();
        #[cfg(loom)]
        let _once = self.starting.lock().expect("a loom model thread panicked while starting");
        if self.watcher.get().is_some() {
            return Ok(());
        }
        let (registry, store) = (Arc::clone(&self.registry), Arc::clone(store));
        let watcher = std::thread::Builder::new()
            .name("idem-payments-lease-watcher".into())
            .spawn(move || watch(&registry, &store, schedule))?;
        // Set under `starting`: no other thread sets it.
        let _ = self.watcher.set(watcher);
        Ok(())
    }

    /// The counts so far.
    pub(crate) fn renewals(&self) -> Renewals {
        self.registry.renewals()
    }

    /// How many leases are held now.
    pub(crate) fn held(&self) -> usize {
        self.registry.held()
    }

    /// Counts a gateway call that outlived its claim (see [`Registry::count_lost`]).
    pub(crate) fn count_lost(&self) {
        self.registry.count_lost();
    }
}

impl Drop for Renewer {
    fn drop(&mut self) {
        self.registry.stop();
        if let Some(watcher) = self.watcher.take() {
            // The watcher never calls the store: it ends at once. A renewing thread in the
            // middle of a renewal ends after it, on its own.
            let _ = watcher.join();
        }
    }
}

/// The watcher: gives each call still held at its first renewal a renewing thread of its
/// own, until stopped. A thread the OS refuses is counted failed and asked for again.
fn watch<S>(registry: &Arc<Registry>, store: &Arc<S>, schedule: Schedule)
where
    S: KeyStore<PaymentOutcome> + 'static,
{
    while let Some(slow) = registry.slow_calls(schedule.quarter) {
        for id in slow {
            let (mine, theirs) = (Arc::clone(registry), Arc::clone(store));
            let started = std::thread::Builder::new()
                .name("idem-payments-lease-renewer".into())
                .spawn(move || renew_while_held(&mine, &*theirs, id, schedule));
            if started.is_err() {
                // No thread to renew with: the watcher renews this round itself (a slow
                // store then delays the other calls' hand-offs, not this lease), and hands
                // the call on again when it is next due.
                if let Some(lease) = registry.lease_of(id) {
                    registry.renewed(
                        id,
                        renewal(&**store, &lease),
                        schedule.quarter,
                        schedule.retry,
                    );
                }
                registry.no_renewer(id);
            }
        }
    }
}

/// One renewal: a store that panics is a failed renewal, its payload dropped under a guard
/// (a payload whose drop panics again would otherwise end the thread renewing).
fn renewal<S: KeyStore<PaymentOutcome>>(store: &S, lease: &Lease) -> Renewed {
    panic::catch_unwind(AssertUnwindSafe(|| store.renew(lease))).unwrap_or_else(|payload| {
        idem_core::drop_panic_payload(payload);
        Err(StoreError::Storage("the store panicked".into()))
    })
}

/// One slow call's renewer: renews its lease whenever due, until the call releases it.
fn renew_while_held<S: KeyStore<PaymentOutcome>>(
    registry: &Registry,
    store: &S,
    id: u64,
    schedule: Schedule,
) {
    while let Some(lease) = registry.next_due(id) {
        registry.renewed(id, renewal(store, &lease), schedule.quarter, schedule.retry);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// A lease of `Duration::MAX` (a caller's, through `Registry::hold`) makes its renewal
    /// due a century off, not a panic on the `Instant`'s overflow.
    #[test]
    fn a_due_time_past_what_an_instant_holds_is_far_off() {
        let now = Instant::now();
        assert_eq!(after(now, Duration::MAX), now + NEVER);
        assert_eq!(after(now, Duration::from_secs(1)), now + Duration::from_secs(1));
    }
}
