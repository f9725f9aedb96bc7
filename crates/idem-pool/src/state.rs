//! The pool's state under its lock: the free list, parked loans, the queue of waiters and
//! the counters. The slots' phases and idle connections are on the shelf (`shelf.rs`),
//! outside the lock. Everything here runs under the lock and never blocks.

use std::collections::VecDeque;

use crate::shelf::{Claim, Held, Lent, Phase, Shelf};
use crate::sync::{Arc, Condvar, Duration, Instant};
use crate::{Fairness, PoolState};

/// What a releaser or `close` hands a waiter.
#[derive(Debug)]
pub(crate) enum Grant<C> {
    /// A connection, already lent to the waiter under its claim's generation.
    Conn(Claim, Held<C>),
    /// An empty slot, reserved for the waiter to connect into.
    Create(Claim),
    /// The pool closed.
    Closed,
}

#[derive(Debug)]
pub(crate) struct Waiter<C> {
    pub(crate) id: u64,
    /// When it started waiting (for `Fairness::Eventual`).
    pub(crate) since: Instant,
    pub(crate) cv: Arc<Condvar>,
    pub(crate) grant: Option<Grant<C>>,
    /// Barging only: woken to compete for an idle connection, not yet back to sleep.
    pub(crate) woken: bool,
}

#[derive(Debug)]
pub(crate) struct State<C> {
    /// Per slot, the generation of the loan last counted as a suspected leak (0: none).
    pub(crate) leak_counted: Vec<u64>,
    /// Per slot, the connection of a parked loan, with the slot's claim, and whether its
    /// guard was marked broken (the loan's release then closes it).
    pub(crate) parked: Vec<Option<(Lent<C>, bool)>>,
    /// Empty slots not reserved by anyone.
    pub(crate) free: Vec<usize>,
    /// Waiters in arrival order. The front is the longest waiter: the one a grant goes
    /// to, and under barging the first woken to compete; see `Fairness` for who is
    /// served first.
    pub(crate) waiters: VecDeque<Waiter<C>>,
    pub(crate) next_waiter_id: u64,
    /// `Fairness::Eventual`'s bound on overtaking.
    pub(crate) fair_after: Duration,
    /// `Fairness::Eventual`: no fair hand-off before this instant.
    pub(crate) next_fair: Option<Instant>,
    pub(crate) closed: bool,
    pub(crate) last_error: Option<Arc<dyn std::error::Error + Send + Sync>>,
    /// The pause after the last failed connect (zero after a success): it doubles with
    /// each failure in a row, up to a cap.
    pub(crate) connect_backoff: Duration,
    /// No connect starts before this instant (set by a failed connect): whoever holds a
    /// slot to connect into waits for it, so a down server is not hammered.
    pub(crate) connect_after: Option<Instant>,
    pub(crate) counters: PoolState,
}

impl<C> State<C> {
    pub(crate) fn new(max_size: usize) -> Self {
        Self {
            leak_counted: vec![0; max_size],
            parked: (0..max_size).map(|_| None).collect(),
            // Reversed so that slot 0 is used first.
            free: (0..max_size).rev().collect(),
            waiters: VecDeque::new(),
            next_waiter_id: 0,
            fair_after: Duration::ZERO,
            next_fair: None,
            closed: false,
            last_error: None,
            connect_backoff: Duration::ZERO,
            connect_after: None,
            counters: PoolState::default(),
        }
    }

    /// The first waiter without a grant.
    fn first_ungranted(&mut self) -> Option<&mut Waiter<C>> {
        self.waiters.iter_mut().find(|w| w.grant.is_none())
    }

    /// Whether some waiter has no grant yet.
    pub(crate) fn someone_waits(&self) -> bool {
        self.waiters.iter().any(|w| w.grant.is_none())
    }

    /// Queues a waiter, and tells the lock-free paths (see `Shelf::put_unlocked`).
    pub(crate) fn enqueue(&mut self, shelf: &Shelf<C>, waiter: Waiter<C>) {
        self.waiters.push_back(waiter);
        shelf.set_waiting(self.waiters.len());
    }

    /// Takes a waiter off the queue, and tells the lock-free paths.
    pub(crate) fn dequeue(&mut self, shelf: &Shelf<C>, position: usize) -> Option<Waiter<C>> {
        let waiter = self.waiters.remove(position);
        shelf.set_waiting(self.waiters.len());
        waiter
    }

    /// Whether a returned connection goes on the shelf for anyone to take (barging),
    /// rather than to the longest waiter. Under `Eventual`, as parking_lot's mutex: barging,
    /// except that once the longest waiter has waited `fair_after`, a return is handed to
    /// it, at most one such fair hand-off per `fair_after`. The hand-offs, each a wake-up,
    /// are so bounded in rate (the throughput of barging), and every waiter is served in
    /// turn (none overtaken forever). The clock is read only when someone waits.
    fn barges(&mut self, fairness: Fairness) -> bool {
        match fairness {
            Fairness::Fifo => false,
            Fairness::Barging => true,
            Fairness::Eventual => {
                let Some(head) = self.waiters.iter().find(|w| w.grant.is_none()) else {
                    return true;
                };
                let now = Instant::now();
                let due = self.next_fair.is_none_or(|at| now >= at);
                if due && now.saturating_duration_since(head.since) >= self.fair_after {
                    self.next_fair = now.checked_add(self.fair_after);
                    return false;
                }
                true
            }
        }
    }

    /// Gives the claimed slot, emptied, to the longest waiter to connect into, or to the
    /// free list (or leaves it empty in a closed pool).
    pub(crate) fn give_free(&mut self, shelf: &Shelf<C>, mut claim: Claim) {
        if self.closed {
            shelf.empty(claim);
            return;
        }
        match self.first_ungranted() {
            Some(waiter) => {
                let was_woken = waiter.woken;
                shelf.reserve(&mut claim);
                waiter.grant = Some(Grant::Create(claim));
                waiter.cv.notify_one();
                if was_woken {
                    self.pass_on_wake(shelf);
                }
            }
            None => {
                let slot = claim.slot();
                shelf.empty(claim);
                self.free.push(slot);
            }
        }
    }

    /// A grant went to a waiter already woken to compete for an idle connection: it will
    /// spend that wake-up on its grant, so another waiter is woken for the connection.
    ///
    /// RACE (a wake-up spent twice): under barging, a return wakes one waiter for the idle
    /// connection; before it runs, a grant (an emptied slot to connect into, or a fair
    /// hand-off) goes to that same waiter, the longest. Without this, the idle connection
    /// sits beside a sleeping waiter until its timeout. Test:
    /// `a_grant_to_a_woken_waiter_wakes_another_for_the_idle_connection`.
    fn pass_on_wake(&mut self, shelf: &Shelf<C>) {
        if !shelf.any_idle() {
            return;
        }
        self.wake_one();
    }

    /// Wakes one waiter that has not been woken yet, to compete for an idle connection.
    /// Each idle return wakes a different waiter, so none is left asleep beside an idle
    /// connection.
    fn wake_one(&mut self) {
        if let Some(waiter) = self.waiters.iter_mut().find(|w| w.grant.is_none() && !w.woken) {
            waiter.woken = true;
            waiter.cv.notify_one();
        }
    }

    /// Puts a healthy connection back: straight to the longest waiter if the fairness says
    /// so (lent again under a new generation), else onto the shelf (waking a waiter to
    /// compete for it, if any waits).
    pub(crate) fn give_idle(
        &mut self,
        shelf: &Shelf<C>,
        mut claim: Claim,
        held: Held<C>,
        fairness: Fairness,
    ) {
        if self.barges(fairness) {
            // Under the lock the waiters are seen here, not through a fence.
            shelf.put(claim, held);
            self.wake_one();
            return;
        }
        match self.first_ungranted() {
            Some(waiter) => {
                let was_woken = waiter.woken;
                shelf.grant(&mut claim);
                waiter.grant = Some(Grant::Conn(claim, held));
                waiter.cv.notify_one();
                self.counters.handoffs += 1;
                if was_woken {
                    self.pass_on_wake(shelf);
                }
            }
            None => {
                shelf.put(claim, held);
            }
        }
    }

    /// Closes a claimed slot's connection and hands the place on. Returns the connection,
    /// for the caller to drop once it has let go of the lock.
    pub(crate) fn discard(&mut self, shelf: &Shelf<C>, claim: Claim, held: Held<C>) -> C {
        self.counters.discarded += 1;
        self.give_free(shelf, claim);
        held.conn
    }

    /// Counts what `state()` reports from the slots.
    pub(crate) fn snapshot(&self, shelf: &Shelf<C>) -> PoolState {
        let mut state = self.counters;
        (state.idle, state.in_use, state.connecting) = shelf.counts();
        state.size = state.idle + state.in_use;
        state.waiters = self.waiters.iter().filter(|w| w.grant.is_none()).count();
        state
    }

    /// # Panics
    ///
    /// If an invariant is broken (a bug in this crate): the free list holds empty slots
    /// once each, a parked slot's connection is in the parked list under its generation,
    /// a granted slot belongs to exactly one waiter's grant, a slot reserved by a grant
    /// to connect into is `Creating`. Lent and idle slots move without the lock, so only
    /// their absence from the lists is checked.
    pub(crate) fn assert_invariants(&self, shelf: &Shelf<C>, max_size: usize) {
        assert_eq!((shelf.len(), self.parked.len()), (max_size, max_size));
        let mut listed = vec![0u8; max_size];
        for &i in &self.free {
            listed[i] += 1;
        }
        for (i, &listed) in listed.iter().enumerate() {
            let word = shelf.word(i);
            let parked = self.parked[i].as_ref().map(|(lent, _)| lent.claim.generation());
            let granted = |create: bool| {
                let ours =
                    |claim: &Claim| (claim.slot(), claim.generation()) == (i, word.generation);
                let grants = self.waiters.iter().filter_map(|w| w.grant.as_ref());
                grants
                    .filter(|grant| match grant {
                        Grant::Conn(claim, _) => !create && ours(claim),
                        Grant::Create(claim) => create && ours(claim),
                        Grant::Closed => false,
                    })
                    .count()
            };
            match word.phase {
                Phase::Empty => assert!(listed <= 1, "empty slot {i} listed {listed} times"),
                Phase::Parked => assert_eq!(parked, Some(word.generation), "parked slot {i}"),
                Phase::Granted => assert_eq!(granted(false), 1, "granted slot {i}: one grant"),
                Phase::Creating | Phase::Idle | Phase::Taken | Phase::Lent => {
                    assert_eq!(listed, 0, "slot {i}");
                }
            }
            if word.phase != Phase::Parked {
                assert!(parked.is_none(), "slot {i} in {:?} has a parked connection", word.phase);
            }
            assert!(word.phase == Phase::Creating || granted(true) == 0, "slot {i} create grant");
        }
        let snapshot = self.snapshot(shelf);
        assert!(snapshot.size <= max_size && snapshot.idle + snapshot.in_use == snapshot.size);
    }
}

#[cfg(test)]
mod tests {
    use idem_core::Timestamp;

    use super::*;

    fn waiter(id: u64) -> Waiter<u32> {
        let cv = Arc::new(Condvar::default());
        Waiter { id, since: Instant::now(), cv, grant: None, woken: false }
    }

    /// A claim on `slot`, lent as a `get` would have it.
    fn lent(shelf: &Shelf<u32>, slot: usize) -> Claim {
        let mut claim = shelf.claim_empty(slot).expect("an empty slot");
        shelf.lend_new(&mut claim);
        claim
    }

    #[test]
    fn a_grant_to_a_woken_waiter_wakes_another_for_the_idle_connection() {
        let shelf = Shelf::new(3);
        let mut state: State<u32> = State::new(3);
        state.free.clear();
        let (first, second) = (lent(&shelf, 0), lent(&shelf, 1));
        state.waiters.extend((0..3).map(waiter));
        // A return under barging: idle, and the longest waiter woken to compete for it.
        let held = Held { conn: 7, created_at: Timestamp::ZERO, returned_at: Timestamp::ZERO };
        state.give_idle(&shelf, first, held, Fairness::Barging);
        assert_eq!(state.waiters.iter().filter(|w| w.woken).count(), 1);
        // Before it runs, a broken return's emptied slot is granted to that same waiter.
        state.give_free(&shelf, second);
        let woken_for_idle = state.waiters.iter().any(|w| w.grant.is_none() && w.woken);
        assert!(woken_for_idle, "an idle connection beside waiters none of which is woken");
    }
}
