//! The pool's state under its one lock: slots with generations, the idle and free lists,
//! and the queue of waiters. Everything here runs under the lock and never blocks.

use std::collections::VecDeque;

use idem_core::Timestamp;

use crate::sync::{Arc, Condvar, Duration, Instant};
use crate::{Fairness, LoanId, PoolState};

/// What a slot holds now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// No connection; the slot is on the free list (or reserved by a grant).
    Empty,
    /// Reserved for a caller that is connecting outside the lock.
    Creating,
    /// A connection on the idle list.
    Idle,
    /// Lent: the connection is inside a guard, not here.
    Lent,
    /// Lent, but the guard was turned into a [`Loan`](crate::Loan): the connection is
    /// parked here, and only a release with this generation returns it.
    Parked,
    /// Handed to a waiter that has not woken yet: the connection is here, reserved.
    Granted,
}

/// One connection place. The generation grows each time the slot is lent, so a handle
/// from an earlier loan can be recognised and refused.
#[derive(Debug)]
pub(crate) struct Slot<C> {
    pub(crate) conn: Option<C>,
    pub(crate) generation: u64,
    pub(crate) phase: Phase,
    pub(crate) created_at: Timestamp,
    pub(crate) returned_at: Timestamp,
    pub(crate) lent_at: Timestamp,
    pub(crate) leak_counted: bool,
}

/// What a releaser or `close` hands a waiter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Grant {
    /// A connection, already lent to the waiter under this loan's generation.
    Conn(LoanId),
    /// An empty slot, reserved for the waiter to connect into.
    Create { slot: usize },
    /// The pool closed.
    Closed,
}

#[derive(Debug)]
pub(crate) struct Waiter {
    pub(crate) id: u64,
    /// When it started waiting (for `Fairness::Eventual`).
    pub(crate) since: Instant,
    pub(crate) cv: Arc<Condvar>,
    pub(crate) grant: Option<Grant>,
    /// Barging only: woken to compete for an idle connection, not yet back to sleep.
    pub(crate) woken: bool,
}

#[derive(Debug)]
pub(crate) struct State<C> {
    pub(crate) slots: Vec<Slot<C>>,
    /// Idle slots, most recently returned last (lent first: warm connections stay warm).
    pub(crate) idle: Vec<usize>,
    /// Empty slots not reserved by anyone.
    pub(crate) free: Vec<usize>,
    /// Waiters in arrival order. The front is the longest waiter: the one a grant goes
    /// to, and under barging the first woken to compete; see `Fairness` for who is
    /// served first.
    pub(crate) waiters: VecDeque<Waiter>,
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
        let slots = (0..max_size)
            .map(|_| Slot {
                conn: None,
                generation: 0,
                phase: Phase::Empty,
                created_at: Timestamp::ZERO,
                returned_at: Timestamp::ZERO,
                lent_at: Timestamp::ZERO,
                leak_counted: false,
            })
            .collect();
        Self {
            slots,
            idle: Vec::with_capacity(max_size),
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
    fn first_ungranted(&mut self) -> Option<&mut Waiter> {
        self.waiters.iter_mut().find(|w| w.grant.is_none())
    }

    /// Whether a returned connection goes to the idle list for anyone to take (barging),
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

    /// Gives an empty slot to the longest waiter to connect into, or to the free list.
    pub(crate) fn give_free(&mut self, slot: usize) {
        debug_assert_eq!(self.slots[slot].phase, Phase::Empty);
        if self.closed {
            return;
        }
        match self.first_ungranted() {
            Some(waiter) => {
                let was_woken = waiter.woken;
                waiter.grant = Some(Grant::Create { slot });
                waiter.cv.notify_one();
                self.slots[slot].phase = Phase::Creating;
                if was_woken {
                    self.pass_on_wake();
                }
            }
            None => self.free.push(slot),
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
    fn pass_on_wake(&mut self) {
        if self.idle.is_empty() {
            return;
        }
        if let Some(waiter) = self.waiters.iter_mut().find(|w| w.grant.is_none() && !w.woken) {
            waiter.woken = true;
            waiter.cv.notify_one();
        }
    }

    /// Puts a healthy connection back: straight to the longest waiter if there is one
    /// (lent again under a new generation), else onto the idle list.
    ///
    /// # Panics
    ///
    /// If the slot is not lent or being filled, or holds a connection already (a bug in
    /// this crate: a connection would be given back twice).
    pub(crate) fn give_idle(&mut self, slot: usize, conn: C, now: Timestamp, fairness: Fairness) {
        let s = &mut self.slots[slot];
        assert!(
            matches!(s.phase, Phase::Lent | Phase::Creating) && s.conn.is_none(),
            "give_idle of slot {slot} in phase {:?}, holding a connection: {}",
            s.phase,
            s.conn.is_some()
        );
        s.conn = Some(conn);
        s.returned_at = now;
        let next_generation = s.generation + 1;
        if self.barges(fairness) {
            self.slots[slot].phase = Phase::Idle;
            self.idle.push(slot);
            // Wake one waiter that has not been woken yet, to compete for it. Each idle
            // return wakes a different waiter, so none is left asleep beside an idle
            // connection.
            if let Some(waiter) = self.waiters.iter_mut().find(|w| w.grant.is_none() && !w.woken) {
                waiter.woken = true;
                waiter.cv.notify_one();
            }
            self.debug_assert_given(slot);
            return;
        }
        match self.waiters.iter_mut().find(|w| w.grant.is_none()) {
            Some(waiter) => {
                let was_woken = waiter.woken;
                waiter.grant = Some(Grant::Conn(LoanId::new(slot, next_generation)));
                waiter.cv.notify_one();
                self.counters.handoffs += 1;
                let s = &mut self.slots[slot];
                s.generation = next_generation;
                s.phase = Phase::Granted;
                if was_woken {
                    self.pass_on_wake();
                }
            }
            None => {
                self.slots[slot].phase = Phase::Idle;
                self.idle.push(slot);
            }
        }
        self.debug_assert_given(slot);
    }

    /// `give_idle`'s postcondition: the slot holds its connection and is in exactly one
    /// place, once on the idle list or in one waiter's grant. Counting both is linear in
    /// the pool's size, so only debug builds pay for it on this path.
    fn debug_assert_given(&self, slot: usize) {
        if cfg!(debug_assertions) {
            let s = &self.slots[slot];
            let listed = self.idle.iter().filter(|&&i| i == slot).count();
            let id = LoanId::new(slot, s.generation);
            let grants = self.waiters.iter().filter(|w| w.grant == Some(Grant::Conn(id))).count();
            let placed = match s.phase {
                Phase::Idle => (listed, grants) == (1, 0),
                Phase::Granted => (listed, grants) == (0, 1),
                _ => false,
            };
            assert!(
                placed && s.conn.is_some(),
                "given slot {slot}: {:?}, listed {listed}, granted {grants}",
                s.phase
            );
        }
    }

    /// Lends slot `slot` (idle or granted): bumps its generation unless a grant already
    /// did, and moves the connection out.
    ///
    /// # Panics
    ///
    /// If the slot is neither idle nor granted, or holds no connection (a bug in this
    /// crate).
    pub(crate) fn lend(&mut self, slot: usize, now: Timestamp) -> (C, LoanId) {
        let s = &mut self.slots[slot];
        let phase = s.phase;
        assert!(matches!(phase, Phase::Idle | Phase::Granted), "lend of slot {slot} in {phase:?}");
        if s.phase == Phase::Idle {
            s.generation += 1;
        }
        s.lent_at = now;
        s.leak_counted = false;
        s.phase = Phase::Lent;
        let conn = s.conn.take().expect("an idle or granted slot holds its connection");
        let id = LoanId::new(slot, s.generation);
        // Callers take the slot off the idle list first; a lent slot left on it would be
        // lent again to the next caller while this one holds it.
        debug_assert!(!self.idle.contains(&slot), "lent slot {slot} is still on the idle list");
        (conn, id)
    }

    /// Empties an idle slot whose connection is being discarded, and hands the place on.
    ///
    /// # Panics
    ///
    /// If the slot is not idle or holds no connection (a bug in this crate).
    pub(crate) fn discard(&mut self, slot: usize) -> C {
        let s = &mut self.slots[slot];
        assert!(
            s.phase == Phase::Idle && s.conn.is_some(),
            "discard of slot {slot} in phase {:?}, holding a connection: {}",
            s.phase,
            s.conn.is_some()
        );
        let conn = s.conn.take().expect("an idle slot holds its connection");
        s.phase = Phase::Empty;
        self.counters.discarded += 1;
        self.give_free(slot);
        // Callers take the slot off the idle list first; an emptied slot left on it
        // would be lent with no connection.
        debug_assert!(!self.idle.contains(&slot), "discarded slot {slot} is on the idle list");
        let s = &self.slots[slot];
        let emptied = s.conn.is_none() && matches!(s.phase, Phase::Empty | Phase::Creating);
        debug_assert!(emptied, "discarded slot {slot} ends in phase {:?}", s.phase);
        conn
    }

    /// Connections lent: in a guard, parked for a loan, or granted to a waiter.
    pub(crate) fn in_use(&self) -> usize {
        self.slots
            .iter()
            .filter(|s| matches!(s.phase, Phase::Lent | Phase::Parked | Phase::Granted))
            .count()
    }

    /// Counts what `state()` reports from the slots.
    pub(crate) fn snapshot(&self) -> PoolState {
        let mut state = self.counters;
        state.idle = self.idle.len();
        state.in_use = self.in_use();
        state.size = state.idle + state.in_use;
        state.waiters = self.waiters.iter().filter(|w| w.grant.is_none()).count();
        state
    }

    /// # Panics
    ///
    /// If an invariant is broken (a bug in this crate): every slot is in exactly the list
    /// its phase says, idle slots hold a connection, lent ones do not, granted slots
    /// belong to exactly one waiter's grant.
    pub(crate) fn assert_invariants(&self, max_size: usize) {
        assert_eq!(self.slots.len(), max_size);
        let mut seen = vec![0u8; max_size];
        for &i in self.idle.iter().chain(&self.free) {
            seen[i] += 1;
        }
        for (i, s) in self.slots.iter().enumerate() {
            let listed = seen[i];
            match s.phase {
                Phase::Idle => assert!(listed == 1 && s.conn.is_some(), "idle slot {i}"),
                Phase::Empty => assert!(listed <= 1 && s.conn.is_none(), "empty slot {i}"),
                Phase::Lent | Phase::Creating => {
                    assert!(listed == 0 && s.conn.is_none(), "lent slot {i}: {:?}", s.phase);
                }
                Phase::Parked | Phase::Granted => {
                    assert!(listed == 0 && s.conn.is_some(), "held slot {i}");
                }
            }
            if s.phase == Phase::Idle {
                assert!(self.idle.contains(&i));
            }
            if s.phase == Phase::Granted {
                let grants = self
                    .waiters
                    .iter()
                    .filter(|w| w.grant == Some(Grant::Conn(LoanId::new(i, s.generation))))
                    .count();
                assert_eq!(grants, 1, "granted slot {i} belongs to one waiter");
            }
        }
        let snapshot = self.snapshot();
        assert!(snapshot.size <= max_size && snapshot.idle + snapshot.in_use == snapshot.size);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiter(id: u64) -> Waiter {
        let cv = Arc::new(Condvar::default());
        Waiter { id, since: Instant::now(), cv, grant: None, woken: false }
    }

    #[test]
    fn a_grant_to_a_woken_waiter_wakes_another_for_the_idle_connection() {
        let mut state: State<u32> = State::new(3);
        state.free.clear();
        state.slots[0].phase = Phase::Lent;
        state.slots[1].phase = Phase::Lent;
        state.waiters.extend((0..3).map(waiter));
        // A return under barging: idle, and the longest waiter woken to compete for it.
        state.give_idle(0, 7, Timestamp::ZERO, Fairness::Barging);
        assert_eq!(state.waiters.iter().filter(|w| w.woken).count(), 1);
        // Before it runs, a broken return's emptied slot is granted to that same waiter.
        state.slots[1].phase = Phase::Empty;
        state.give_free(1);
        let woken_for_idle = state.waiters.iter().any(|w| w.grant.is_none() && w.woken);
        assert!(woken_for_idle, "an idle connection beside waiters none of which is woken");
    }
}
