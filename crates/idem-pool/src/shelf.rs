//! The pool's one module with unsafe code: every slot's phase and generation in one atomic
//! word, and a cell per slot that holds the connection while the slot is idle, so a `get`
//! and a return take no lock while nobody waits (the shape of HikariCP's ConcurrentBag: a
//! per-slot state claimed by compare-and-swap, a hint per thread of the slot it used last,
//! the mutex only for waiters).
//!
//! Ownership. A slot is owned by the holder of its [`Claim`], a token that only this module
//! makes and that cannot be copied: a `get` that took the slot off the shelf, a guard, a
//! thread connecting into the slot, or the pool's locked state (a parked loan, a grant to
//! a waiter). A claim is made only by a compare-and-swap that moves the word out of
//! `Idle` or `Empty` (one thread wins it), and given up only by the store that puts the
//! word back to `Idle` or `Empty`. So at most one claim per slot exists, and the cell,
//! touched only through a claim, has one user at a time.
//!
//! ```text
//! Empty --claim_empty: CAS--> Creating --lend_new--> Lent(g+1)
//! Idle(g) --reclaim: CAS--> Taken(g) --lend_new--> Lent(g+1)
//! Lent --put: store--> Idle               Lent --park--> Parked --lend_held--> Lent
//! Lent --grant--> Granted(g+1) --lend_held--> Lent
//! any claim --reserve--> Creating          any claim --empty--> Empty
//! ```

// The workspace denies unsafe code; this module and idem-future's slot are the exceptions.
#![allow(unsafe_code)]

use idem_core::Timestamp;

#[cfg(not(loom))]
use crate::sync::hint;
use crate::sync::{AtomicBool, AtomicU64, AtomicUsize, Ordering, UnsafeCell, fence};

/// What a slot holds now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// No connection; the slot is on the free list (or reserved by a grant to connect).
    Empty,
    /// Reserved for a caller that is connecting into it.
    Creating,
    /// A connection on the shelf, in the slot's cell, for anyone to take.
    Idle,
    /// Taken off the shelf, not lent yet: being checked (expired?), closed, or handed
    /// on. Still under the last loan's generation, so that loan's late release is a
    /// double release and no leak is counted for it.
    Taken,
    /// Lent: the connection is inside a guard (or a `get` on its way to one).
    Lent,
    /// Lent, but the guard was turned into a [`Loan`](crate::Loan): the connection is
    /// parked in the locked state, and only a release with this generation returns it.
    Parked,
    /// Handed to a waiter that has not woken yet: the connection is in its grant.
    Granted,
}

const PHASES: [Phase; 7] = [
    Phase::Empty,
    Phase::Creating,
    Phase::Idle,
    Phase::Taken,
    Phase::Lent,
    Phase::Parked,
    Phase::Granted,
];
const PHASE_BITS: u32 = 3;
const PHASE_MASK: u64 = (1 << PHASE_BITS) - 1;
/// Bits of the loan's generation kept beside the loan's start (`Place::lent`).
const LENT_TAG_BITS: u32 = 16;
const LENT_TAG_MASK: u64 = (1 << LENT_TAG_BITS) - 1;

/// A slot's word: its generation (grown each time the slot is lent, so no two loans of a
/// pool share one) and its phase. 61 bits of generation: at a hundred million loans a
/// second, seven centuries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Word {
    pub(crate) generation: u64,
    pub(crate) phase: Phase,
}

impl Word {
    fn pack(self) -> u64 {
        (self.generation << PHASE_BITS) | self.phase as u64
    }

    fn unpack(bits: u64) -> Self {
        // The mask keeps the index below 8 and only this module writes words, each from a
        // `Phase`, so the index is one of the seven.
        let phase = PHASES[(bits & PHASE_MASK) as usize];
        Self { generation: bits >> PHASE_BITS, phase }
    }
}

/// What an idle slot's cell holds: the connection and its times.
#[derive(Debug)]
pub(crate) struct Held<C> {
    pub(crate) conn: C,
    pub(crate) created_at: Timestamp,
    pub(crate) returned_at: Timestamp,
}

/// A lent connection with its slot's claim and times: what a guard holds.
#[derive(Debug)]
pub(crate) struct Lent<C> {
    pub(crate) conn: C,
    pub(crate) claim: Claim,
    pub(crate) created_at: Timestamp,
    pub(crate) lent_at: Timestamp,
}

/// The right to one slot: made by a winning compare-and-swap, given up by `put` or
/// `empty`. Not `Clone`: one per slot at a time is what makes the cell safe.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Claim {
    slot: usize,
    generation: u64,
}

impl Claim {
    pub(crate) fn slot(&self) -> usize {
        self.slot
    }

    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }
}

/// One slot. Aligned to two cache lines, so threads taking different slots do not share
/// a line (adjacent-line prefetch pairs lines).
#[repr(align(128))]
struct Place<C> {
    word: AtomicU64,
    /// When the current loan began (milliseconds, above) and its generation's low bits
    /// (below), for the leak count: maintenance trusts a start only for its own loan.
    lent: AtomicU64,
    cell: UnsafeCell<Option<Held<C>>>,
}

// SAFETY: the cell is touched only by the holder of the slot's `Claim` (see the module
// docs: one claim per slot, made by a compare-and-swap and given up by a release store),
// so sharing a `Place` between threads never gives two threads the cell at once; the
// connection it holds moves between threads, hence `C: Send`.
unsafe impl<C: Send> Sync for Place<C> {}

/// The slots' words and cells, and what the lock-free paths must see of the locked state.
pub(crate) struct Shelf<C> {
    places: Box<[Place<C>]>,
    /// Waiters in the queue, granted or not (a copy of the queue's length, written under
    /// the pool's lock): while it is above zero, returns go through the lock.
    waiting: AtomicUsize,
    closed: AtomicBool,
    /// This pool's name for the per-thread hint.
    #[cfg(not(loom))]
    id: u64,
}

impl<C> std::fmt::Debug for Shelf<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shelf").field("slots", &self.places.len()).finish_non_exhaustive()
    }
}

impl<C> Shelf<C> {
    pub(crate) fn new(size: usize) -> Self {
        let places = (0..size)
            .map(|_| Place {
                word: AtomicU64::new(Word { generation: 0, phase: Phase::Empty }.pack()),
                lent: AtomicU64::new(0),
                cell: UnsafeCell::new(None),
            })
            .collect();
        Self {
            places,
            waiting: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            #[cfg(not(loom))]
            id: hint::new_pool(),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.places.len()
    }

    /// The slot's word now (it may move at once unless the caller holds its claim or the
    /// slot is in a phase only the lock holder moves).
    pub(crate) fn word(&self, slot: usize) -> Word {
        // ORDERING: Acquire: a reader that then acts under the lock on a phase the lock
        // holder set sees what was written before it.
        Word::unpack(self.places[slot].word.load(Ordering::Acquire))
    }

    /// How many slots hold an idle connection (on the shelf, or taken off it and not
    /// lent) and how many are lent (in a guard, parked, or granted to a waiter), reading
    /// each word once: the two add up to connections that existed at some instant of the
    /// pass, never more than the slots.
    pub(crate) fn counts(&self) -> (usize, usize, usize) {
        let (mut idle, mut lent, mut creating) = (0, 0, 0);
        for i in 0..self.len() {
            match self.word(i).phase {
                Phase::Idle | Phase::Taken => idle += 1,
                Phase::Lent | Phase::Parked | Phase::Granted => lent += 1,
                Phase::Creating => creating += 1,
                Phase::Empty => {}
            }
        }
        (idle, lent, creating)
    }

    /// Whether some connection is on the shelf.
    pub(crate) fn any_idle(&self) -> bool {
        (0..self.len()).any(|i| self.word(i).phase == Phase::Idle)
    }

    /// Moves the word from `from` to `to` if it is `from`; the winner's claim.
    ///
    /// RACE (two takers): two `get`s take the same idle slot at once, without the lock;
    /// one compare-and-swap wins, the other finds the word moved and looks on. Loom
    /// model: `two_gets_race_for_one_idle_connection`.
    fn swap_word(&self, slot: usize, from: Word, to: Word) -> Option<Claim> {
        // ORDERING: AcqRel on success: Acquire to see the cell's connection written before
        // the `put` that made the slot idle; Release so that the next claimer sees what
        // this one wrote. Failure: nothing was won, nothing to see (Relaxed).
        let won = self.places[slot].word.compare_exchange(
            from.pack(),
            to.pack(),
            Ordering::AcqRel,
            Ordering::Relaxed,
        );
        won.ok().map(|_| Claim { slot, generation: to.generation })
    }

    /// Moves a claimed slot to `phase` under `generation`: a store, since only the claim's
    /// holder writes the word of a claimed slot.
    fn set(&self, claim: &mut Claim, generation: u64, phase: Phase) {
        claim.generation = generation;
        // ORDERING: Release: what the holder wrote before (the cell, the locked state's
        // copy) is seen by whoever reads this phase with Acquire.
        self.places[claim.slot].word.store(Word { generation, phase }.pack(), Ordering::Release);
    }

    /// Takes `slot`'s idle connection off the shelf, its generation kept: to lend it
    /// (`lend_new` gives the loan its generation once it is found fit), close it, check it
    /// or hand it to a waiter.
    pub(crate) fn reclaim(&self, slot: usize) -> Option<(Claim, Held<C>)> {
        let now = self.word(slot);
        if now.phase != Phase::Idle {
            return None;
        }
        let claim = self.swap_word(slot, now, Word { phase: Phase::Taken, ..now })?;
        // SAFETY: this thread won the compare-and-swap out of `Idle`, so it holds the
        // slot's only claim; the Acquire of that swap saw the `put` that filled the cell.
        let held = self.places[slot].cell.with_mut(|cell| unsafe { (*cell).take() });
        let held = held.expect("an idle slot's cell holds its connection (put fills it)");
        Some((claim, held))
    }

    /// Takes any idle connection off the shelf (as `reclaim`): this thread's last slot
    /// first (a warm connection, and a line no other thread is using), then the
    /// lowest-numbered idle slot, so a lightly used pool keeps lending the same few and
    /// the rest idle out.
    pub(crate) fn take_any(&self) -> Option<(Claim, Held<C>)> {
        #[cfg(not(loom))]
        if let Some(slot) = hint::get(self.id).filter(|&slot| slot < self.len())
            && let Some(taken) = self.reclaim(slot)
        {
            return Some(taken);
        }
        (0..self.len()).find_map(|slot| self.reclaim(slot))
    }

    /// Puts a claimed slot's connection on the shelf, idle under the claim's generation,
    /// for anyone to take. For a caller that holds the pool's lock: the waiters it sees
    /// there are all there are, so it wakes them itself and needs no fence.
    pub(crate) fn put(&self, mut claim: Claim, held: Held<C>) {
        let slot = claim.slot;
        // SAFETY: the caller gives up its claim, the slot's only one, so no other thread
        // touches the cell until the store below publishes it.
        self.places[slot].cell.with_mut(|cell| unsafe { *cell = Some(held) });
        let generation = claim.generation;
        self.set(&mut claim, generation, Phase::Idle);
    }

    /// `put`, without the pool's lock: a return that found nobody waiting. Returns
    /// whether the caller must now hand the connection on under the lock: someone
    /// waits, or the pool closed.
    ///
    /// RACE (lost wake-up across the shelf): a return that found nobody waiting puts the
    /// connection on the shelf just as a `get` queues as a waiter and looks at the shelf
    /// one last time before it sleeps. Both sides write, fence and then read (this
    /// return: the word, then the count of waiters; the waiter: the count, under the
    /// lock, then the words), so at least one sees the other: the waiter finds the
    /// connection, or this return sees the waiter and hands the connection on under the
    /// lock. The same holds against `close` and its flag. Loom models:
    /// `close_races_get_and_release` and `failed_connect_hands_the_slot_to_a_waiter`
    /// (each deadlocks without the fence, or when the return never hands on).
    #[must_use = "a connection someone waits for must be handed on under the lock"]
    pub(crate) fn put_unlocked(&self, claim: Claim, held: Held<C>) -> bool {
        self.put(claim, held);
        // ORDERING: SeqCst fence: the store in `put` against the waiter's fence after it
        // counted itself (`set_waiting`) and `close`'s after its flag (the race above).
        fence(Ordering::SeqCst);
        // ORDERING: Relaxed: ordered by the fence above.
        self.waiting.load(Ordering::Relaxed) > 0 || self.closed.load(Ordering::Relaxed)
    }

    /// Remembers `slot` as the one this thread gave back last: its next `take_any` tries
    /// it first.
    pub(crate) fn remember(&self, slot: usize) {
        #[cfg(not(loom))]
        hint::set(self.id, slot);
        #[cfg(loom)]
        let _ = slot;
    }

    /// Reserves an empty slot to connect into.
    pub(crate) fn claim_empty(&self, slot: usize) -> Option<Claim> {
        let now = self.word(slot);
        if now.phase != Phase::Empty {
            return None;
        }
        self.swap_word(slot, now, Word { phase: Phase::Creating, ..now })
    }

    /// A claimed slot, emptied, reserved for a waiter to connect into.
    pub(crate) fn reserve(&self, claim: &mut Claim) {
        let generation = claim.generation;
        self.set(claim, generation, Phase::Creating);
    }

    /// A claimed slot lent under a new generation: a connection just made into it, or an
    /// idle one taken off the shelf.
    pub(crate) fn lend_new(&self, claim: &mut Claim) {
        let generation = claim.generation + 1;
        self.set(claim, generation, Phase::Lent);
    }

    /// A claimed slot's connection parked for a loan (the claim goes to the locked state).
    pub(crate) fn park(&self, claim: &mut Claim) {
        let generation = claim.generation;
        self.set(claim, generation, Phase::Parked);
    }

    /// A claimed slot's connection handed to a waiter, under a new generation.
    pub(crate) fn grant(&self, claim: &mut Claim) {
        let generation = claim.generation + 1;
        self.set(claim, generation, Phase::Granted);
    }

    /// A parked or granted slot lent to the thread that holds its claim now.
    pub(crate) fn lend_held(&self, claim: &mut Claim) {
        let generation = claim.generation;
        self.set(claim, generation, Phase::Lent);
    }

    /// Gives up a claim: the slot is empty (its connection closed or never made).
    pub(crate) fn empty(&self, mut claim: Claim) {
        let generation = claim.generation;
        self.set(&mut claim, generation, Phase::Empty);
    }

    /// Records when the claimed slot's loan began, for the leak count.
    pub(crate) fn set_lent_at(&self, claim: &Claim, at: Timestamp) {
        let ms = at.as_millis().min(u64::MAX >> LENT_TAG_BITS);
        let packed = (ms << LENT_TAG_BITS) | (claim.generation & LENT_TAG_MASK);
        // ORDERING: Relaxed: maintenance checks the tag against the generation it read,
        // and a start it cannot match waits for the next round.
        self.places[claim.slot].lent.store(packed, Ordering::Relaxed);
    }

    /// Ends the claimed slot's loan for the leak count: its borrower gave it back, so the
    /// pool's own checks on the way back (`has_broken`) are not the borrower's time. The
    /// start is set past any clock reading (and the tag stays this loan's, so the next
    /// loan's start is trusted only once recorded).
    pub(crate) fn end_loan(&self, claim: &Claim) {
        let never = (u64::MAX >> LENT_TAG_BITS) << LENT_TAG_BITS;
        // ORDERING: Relaxed: see `set_lent_at`.
        self.places[claim.slot]
            .lent
            .store(never | (claim.generation & LENT_TAG_MASK), Ordering::Relaxed);
    }

    /// When loan `generation` of `slot` began, if its start was recorded.
    pub(crate) fn lent_at(&self, slot: usize, generation: u64) -> Option<Timestamp> {
        // ORDERING: Relaxed: see `set_lent_at`.
        let packed = self.places[slot].lent.load(Ordering::Relaxed);
        let ours = packed & LENT_TAG_MASK == generation & LENT_TAG_MASK;
        let ms = packed >> LENT_TAG_BITS;
        // The largest start marks an ended loan (`end_loan`); a clock that far out (the
        // year 10889) is past what the record holds, and its loans are not counted.
        (ours && ms != u64::MAX >> LENT_TAG_BITS).then(|| Timestamp::from_millis(ms))
    }

    /// Records the queue's length (under the pool's lock), then fences (the race in
    /// `put_unlocked`): a waiter that counted itself looks at the shelf after this.
    pub(crate) fn set_waiting(&self, waiters: usize) {
        // ORDERING: Relaxed store, then the SeqCst fence that pairs with
        // `put_unlocked`'s.
        self.waiting.store(waiters, Ordering::Relaxed);
        fence(Ordering::SeqCst);
    }

    /// Whether anyone waits (a hint for the lock-free `get` under `Fairness::Fifo`).
    pub(crate) fn waiting(&self) -> bool {
        // ORDERING: Relaxed: a `get` that misses a waiter that just queued is one that
        // arrived before it; nothing else is read through it.
        self.waiting.load(Ordering::Relaxed) > 0
    }

    /// Marks the pool closed (under its lock), then fences (the race in `put_unlocked`).
    pub(crate) fn close(&self) {
        // ORDERING: Relaxed store, then the SeqCst fence that pairs with
        // `put_unlocked`'s.
        self.closed.store(true, Ordering::Relaxed);
        fence(Ordering::SeqCst);
    }

    /// Whether the pool closed (a lock-free `get` takes nothing from a closed pool).
    pub(crate) fn is_closed(&self) -> bool {
        // ORDERING: Relaxed: a `get` that misses a close under way linearises before it.
        self.closed.load(Ordering::Relaxed)
    }
}
