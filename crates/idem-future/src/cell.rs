//! The one module with unsafe code: a write-once slot whose state lives in one atomic word,
//! the single-owner reader's waker beside it, and a second atomic word that counts the
//! handles on the promise's allocation (and the readers among them, `Count`).
//!
//! The safe design (every state change under a mutex) measured 83 ns for create, complete
//! and one poll, against 38 ns for tokio's oneshot (docs/benchmarks.md). This slot takes
//! no lock: a completion is one compare-and-swap (the claim) and one store (the publish),
//! a ready read by the owner is one load and one store. The publish can be a plain store
//! because nobody else writes the word while a write is in progress (`WRITING`): a flag
//! setter that meets it waits the few instructions until the value is published
//! (`set_flag`). The owner's waker sits in the slot too, guarded by the `OWNER` bit as
//! tokio's oneshot guards its receiver's task: registering it is one compare-and-swap,
//! and the completer wakes it without a lock.
//! Everything else that waits (shared readers' wakers, blocked threads, callbacks) lives
//! under a mutex in `promise.rs`; this slot only tells the completer whether anyone
//! registered there (`WAITING`).
//!
//! States (bits 0-1) and flags of the word:
//!
//! ```text
//! PENDING --set: CAS--> WRITING --set: store--> READY --take: store--> TAKEN
//!                                                 \--share: CAS sets SHARED (read forever)
//! WAITING (bit 2): set by anyone who registered under the promise's mutex.
//! SHARED  (bit 3): readers may borrow the value; the owner, now a reader, never takes.
//! kind    (bits 4-5): how it completed, written together with READY.
//! OWNER   (bit 6): the owner's waker cell holds a waker; only the owner sets or clears it.
//! ```

// This module is the crate's only unsafe code; the workspace denies it everywhere else.
#![allow(unsafe_code)]

use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::ops::Deref;
use std::panic::{self, AssertUnwindSafe};
use std::ptr::NonNull;
use std::task::Waker;

use crate::sync::{AtomicU64, AtomicUsize, Ordering, UnsafeCell, fence, wait_turn};

const PHASE: usize = 0b11;
const PENDING: usize = 0;
const WRITING: usize = 1;
const READY: usize = 2;
const TAKEN: usize = 3;
const WAITING: usize = 1 << 2;
const SHARED: usize = 1 << 3;
const KIND_SHIFT: usize = 4;
const KIND_MAX: usize = 0b11;
const OWNER: usize = 1 << 6;

/// A snapshot of the slot's word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Snapshot(usize);

impl Snapshot {
    /// The value was published (it may since have been taken).
    pub(crate) fn is_done(self) -> bool {
        self.0 & PHASE >= READY
    }

    /// The single reader took the value.
    pub(crate) fn is_taken(self) -> bool {
        self.0 & PHASE == TAKEN
    }

    /// Someone registered under the promise's mutex before the value was published.
    pub(crate) fn is_waiting(self) -> bool {
        self.0 & WAITING != 0
    }

    /// The kind passed to [`Slot::set`], once done.
    pub(crate) fn kind(self) -> usize {
        (self.0 >> KIND_SHIFT) & KIND_MAX
    }
}

/// A value written at most once, by whichever writer wins, and then either moved out by
/// one reader (the owner) or borrowed by many; and the owner's waker.
///
/// Moving the value out and storing the owner's waker are the [`Owner`]'s alone: the two
/// methods that do it are private to this module, and an `Owner` exists once per slot.
pub(crate) struct Slot<V> {
    state: AtomicUsize,
    value: UnsafeCell<MaybeUninit<V>>,
    /// Holds a waker whenever `OWNER` is set (and, for a moment, while the owner registers
    /// one and sets the flag).
    owner: UnsafeCell<MaybeUninit<Waker>>,
}

// SAFETY: the slot moves a `V` in (`set`) and out (`take`), possibly across threads, so it
// is `Send` and `Sync` when `V` is `Send`, like a mutex. Sharing `&V` across threads
// (`read`) is gated on `V: Sync` at the method. `Waker` is `Send + Sync`.
unsafe impl<V: Send> Send for Slot<V> {}
// SAFETY: as above; every access to `value` and `owner` is ordered by `state` (see each
// method).
unsafe impl<V: Send> Sync for Slot<V> {}

impl<V> Slot<V> {
    fn new() -> Self {
        Self {
            state: AtomicUsize::new(PENDING),
            value: UnsafeCell::new(MaybeUninit::uninit()),
            owner: UnsafeCell::new(MaybeUninit::uninit()),
        }
    }

    /// The current word.
    pub(crate) fn snapshot(&self) -> Snapshot {
        // ORDERING: Acquire pairs with the Release in `set`, so a caller that sees
        // `is_done` also sees the value and everything the writer did before it.
        Snapshot(self.state.load(Ordering::Acquire))
    }

    /// Writes `value` if no one has; `kind` (0 to 3) is published with it. Returns the
    /// word as it was when claimed (the flags the publish kept, so the caller sees
    /// `WAITING` and `OWNER`), or the value back if another writer won. The winner then
    /// wakes the owner with [`wake_owner`](Self::wake_owner), apart from the publish, so
    /// that a waker that panics cannot keep it from serving everyone else.
    pub(crate) fn set(&self, value: V, kind: usize) -> Result<Snapshot, V> {
        assert!(kind <= KIND_MAX, "kind {kind} does not fit in two bits");
        // ORDERING: Relaxed is a first guess only: the claim below is the compare-and-swap
        // that orders, and a stale guess just fails it and retries.
        let mut current = self.state.load(Ordering::Relaxed);
        loop {
            if current & PHASE != PENDING {
                return Err(value);
            }
            // ORDERING: Acquire on success so the write below cannot move above the claim,
            // and so that we read the owner's waker stored before its Release of `OWNER`
            // and the flags set before it; Relaxed on failure, which retries or gives up.
            match self.state.compare_exchange_weak(
                current,
                current | WRITING,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(actual) => current = actual,
            }
        }
        // From here until the publish, nobody else writes the word (`set_flag` waits for
        // us): `current` holds every flag there is.
        // SAFETY: the CAS above moved the phase from PENDING to WRITING; only one CAS can
        // do that, and no other method touches `value` while the phase is WRITING (`take`
        // and `read` require READY, `drop` needs `&mut self`). So this write is exclusive.
        self.value.with_mut(|slot| unsafe { (*slot).write(value) });
        // ORDERING: Release publishes the value written above to every Acquire that sees
        // READY. A store, not a read-modify-write: no one else writes the word while it
        // says WRITING, so no flag can be lost (see `set_flag`). The kind bits were zero.
        let before = current;
        self.state.store(before | READY | (kind << KIND_SHIFT), Ordering::Release);
        Ok(Snapshot(before))
    }

    /// Wakes the owner's waker if `claimed`, the word a winning [`set`](Self::set)
    /// returned, says one was registered; the waker stays in the cell (until `drop`).
    ///
    /// # Panics
    ///
    /// If the slot's word is not done and announcing the owner's waker (a bug in this
    /// crate: only the winner of `set` calls this, with what `set` returned); and if the
    /// waker's `wake_by_ref` panics.
    pub(crate) fn wake_owner(&self, claimed: Snapshot) {
        if claimed.0 & OWNER == 0 {
            return;
        }
        // ORDERING: Acquire pairs with the owner's Release of `OWNER` (and with `set`'s
        // publish): the waker stored before the flag is visible.
        let now = self.state.load(Ordering::Acquire);
        assert!(
            now & PHASE >= READY && now & OWNER != 0,
            "the owner woken on a word that is not done or has no waker"
        );
        // SAFETY: the word is done and says `OWNER`, so the cell holds the waker the owner
        // stored before announcing it, and no one writes the cell again: the owner
        // rewrites it only after clearing `OWNER` with a compare-and-swap that refuses a
        // claimed word, and a done word stays claimed. The owner may read it at the same
        // time (`will_wake`); shared reads are sound. The cell is dropped only by `drop`,
        // which needs `&mut self`.
        self.owner.with(|cell| unsafe { (*cell).assume_init_ref() }.wake_by_ref());
    }

    /// Stores `waker` as the owner's, to be woken by the winning `set`. Returns whether
    /// the value was published first: then no one will wake it, and the owner takes now.
    ///
    /// RACE (waker swap): a poll with a new waker races the completion. The old waker is
    /// replaced only after `OWNER` is cleared by a compare-and-swap that refuses a claimed
    /// word, and the new one is announced by another; the claim is a compare-and-swap of
    /// the same word, so exactly one of them sees the other: the writer wakes the waker
    /// stored last, or the owner sees the value. Loom model: `poll_races_completion`.
    ///
    /// # Safety
    ///
    /// Only the owner calls this, never from two threads at once.
    unsafe fn register_owner(&self, waker: &Waker) -> bool {
        // ORDERING: Acquire, so that a done word's value is visible to the owner's `take`.
        let mut current = self.settled(Ordering::Acquire);
        loop {
            // Only the owner takes, and it registers only after a take that found no value
            // (`PromiseFuture::poll`): a taken word is a poll after `Ready` let through.
            assert_ne!(current & PHASE, TAKEN, "the owner registered after it took");
            if current & PHASE >= READY {
                return true;
            }
            if current & OWNER == 0 {
                break;
            }
            // SAFETY: `OWNER` is set, so the cell holds the waker this owner stored; the
            // writer may read it at the same time, which is a shared read as this one.
            let same =
                self.owner.with(|cell| unsafe { (*cell).assume_init_ref() }.will_wake(waker));
            if same {
                return false;
            }
            // Clearing `OWNER` gives the cell back to the owner only on a word no writer
            // has claimed (`settled` waits out a write; done words returned above).
            assert_eq!(current & PHASE, PENDING, "the owner's flag cleared on a claimed word");
            // ORDERING: Acquire on success pairs with nothing new (only this owner writes
            // the cell); on failure the loop re-reads with Acquire semantics as above.
            match self.state.compare_exchange_weak(
                current,
                current & !OWNER,
                Ordering::Acquire,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    // SAFETY: `OWNER` was set (the cell is initialised) and is now clear
                    // on a word that was not done: no writer has read it, and none will
                    // until we set `OWNER` again. The cell is ours alone.
                    self.owner.with_mut(|cell| unsafe { (*cell).assume_init_drop() });
                    break;
                }
                // Never retry on a claimed word: the writer may be reading the cell.
                // ORDERING: Acquire, so a word found done shows the value published with it.
                Err(_) => current = self.settled(Ordering::Acquire),
            }
        }
        // SAFETY: `OWNER` is clear, and it was clear (or cleared by us) on a word that was
        // not claimed: a writer reads the cell only if it saw `OWNER` when claiming, so no
        // one reads or writes the cell now but us.
        self.owner.with_mut(|cell| unsafe { (*cell).write(waker.clone()) });
        let before = self.set_flag(OWNER, false);
        // The cell was written while it was the owner's alone: the word before the flag
        // had no `OWNER` (only the owner sets it, and it cleared it) and no write in
        // progress (`set_flag` waits one out, or a writer's publish would drop the flag).
        assert_eq!(before.0 & OWNER, 0, "the owner's waker was written while announced");
        assert_ne!(before.0 & PHASE, WRITING, "the owner's flag was set during a write");
        if before.is_done() {
            // Claimed before our flag: no writer will read the cell, and without `OWNER`
            // `drop` will not either. The waker is ours to drop.
            // SAFETY: written just above; `OWNER` is clear, so no one else reads it.
            self.owner.with_mut(|cell| unsafe { (*cell).assume_init_drop() });
            return true;
        }
        false
    }

    /// The word once no write is in progress, loaded with `order`: the writer publishes
    /// with a plain store, so nobody else may change the word between its claim and its
    /// publish, and everyone who would waits here (a few instructions: the value's move).
    fn settled(&self, order: Ordering) -> usize {
        let mut turn = 0;
        loop {
            let current = self.state.load(order);
            if current & PHASE != WRITING {
                return current;
            }
            wait_turn(turn);
            turn += 1;
        }
    }

    /// Sets `flag`, on a done word only if `done_too`, and returns the word as it was
    /// (done or not); a write in progress is waited out (see `settled`).
    ///
    /// RACE (flag vs claim): a registrant sets its flag while a completer claims. Both are
    /// compare-and-swaps of one word, so exactly one sees the other: the writer sees the
    /// flag when it claims (and serves the registrant after publishing), or the
    /// registrant sees the claim, waits for the publish, and serves itself. Loom models:
    /// `callback_races_completion`, `poll_races_completion`, `blocking_waiter_wakes`.
    fn set_flag(&self, flag: usize, done_too: bool) -> Snapshot {
        // ORDERING: Relaxed reads are guesses for the compare-and-swap, which orders; a done
        // word is read again with Acquire before its value is trusted.
        let mut current = self.settled(Ordering::Relaxed);
        loop {
            if current & PHASE >= READY && !done_too {
                // ORDERING: Acquire pairs with the publish, so a done word's value is seen.
                return Snapshot(self.state.load(Ordering::Acquire));
            }
            // ORDERING: AcqRel on success: Release publishes what the registrant stored
            // before its flag (a waker, a callback) to the writer's Acquire claim, and
            // Acquire lets a later read of a done word see the value. Relaxed on failure,
            // which only retries.
            match self.state.compare_exchange_weak(
                current,
                current | flag,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Snapshot(current),
                // ORDERING: a failed swap only retries; the next swap orders.
                Err(_) => current = self.settled(Ordering::Relaxed),
            }
        }
    }

    /// Sets `WAITING` and returns the word as it was. If that word `is_done`, the writer
    /// has already published and will not look for waiters: the caller must serve itself.
    pub(crate) fn mark_waiting(&self) -> Snapshot {
        self.set_flag(WAITING, false)
    }

    /// Moves the value out, once. The word it found instead if it is not ready or already
    /// taken (so the caller need not read it again).
    ///
    /// # Panics
    ///
    /// If the slot was shared: the owner gives up taking when it shares (a bug in this
    /// crate, not a refusal: the value may be borrowed).
    ///
    /// # Safety
    ///
    /// Only the owner calls this, never from two threads at once.
    unsafe fn take(&self) -> Result<V, Snapshot> {
        // ORDERING: Acquire pairs with the Release in `set`: the value is visible.
        let current = self.state.load(Ordering::Acquire);
        // `share` is the owner's last act (`PromiseFuture::shared` consumes it), so the
        // owner never sees the flag; if it did, readers may hold `&V` (see `read`).
        assert_eq!(current & SHARED, 0, "the owner took from a shared slot");
        if current & PHASE != READY {
            return Err(Snapshot(current));
        }
        // A store, not a read-modify-write: after READY the word's other writers are the
        // owner (`share`, `OWNER`: not now, we are the owner) and `set_flag`, which
        // changes nothing on a done word.
        // ORDERING: Relaxed: nothing is published by TAKEN; `drop` has `&mut self`.
        self.state.store((current & !PHASE) | TAKEN, Ordering::Relaxed);
        // SAFETY: READY means `set` initialised the value and published it (see ORDERING);
        // no borrow exists because `read` requires SHARED, which was clear (asserted
        // above); only the owner takes (the caller's contract) and it saw READY, not
        // TAKEN. After TAKEN nothing reads the value again, including `drop`, so moving it
        // out is sound.
        Ok(self.value.with(|slot| unsafe { (*slot).assume_init_read() }))
    }

    /// Allows `read`; the owner gives up `take` with it (`take` asserts the flag is clear).
    /// Returns the word as it was.
    pub(crate) fn share(&self) -> Snapshot {
        self.set_flag(SHARED, true)
    }

    /// Runs `f` on a borrow of the value if it is ready; `None` otherwise.
    ///
    /// # Panics
    ///
    /// If the slot was never shared, or was taken (bugs in this crate: only a shared
    /// future reads, and a shared slot is never taken).
    pub(crate) fn read<R>(&self, f: impl FnOnce(&V) -> R) -> Option<R>
    where
        V: Sync,
    {
        let now = self.snapshot();
        // A reader exists only after `share` set the flag, and its handle came to this
        // thread after that; no write clears the flag (the publish keeps the flags it
        // claimed over, and `set_flag` waits out a write). Shared, the slot is never
        // taken (`take` asserts it): the value stays until `drop`.
        assert_ne!(now.0 & SHARED, 0, "a read from a slot that was never shared");
        assert_ne!(now.0 & PHASE, TAKEN, "a read from a taken slot");
        if now.0 & PHASE != READY {
            return None;
        }
        // SAFETY: READY (seen with Acquire, pairing with `set`'s Release) means the value
        // is initialised and visible; SHARED means `take` can never succeed, so the value
        // stays in place until `drop`, which needs `&mut self`. Many threads may hold
        // `&V` at once, which `V: Sync` allows.
        Some(self.value.with(|slot| f(unsafe { (*slot).assume_init_ref() })))
    }
}

impl<V> Drop for Slot<V> {
    fn drop(&mut self) {
        let state = self.snapshot();
        if state.0 & PHASE == READY {
            // SAFETY: READY means initialised and not taken; `&mut self` means no other
            // access exists. WRITING cannot be seen here: the writer holds `&self`.
            self.value.with_mut(|slot| unsafe { (*slot).assume_init_drop() });
        }
        if state.0 & OWNER != 0 {
            // SAFETY: `OWNER` set means the cell holds a waker; `&mut self`: no other access.
            self.owner.with_mut(|cell| unsafe { (*cell).assume_init_drop() });
        }
    }
}

/// The handles on an [`Allocation`], counted in one word: bit 0 is `WATCHED` (a
/// `closed()` future waits for the last reader), bits 1 to 31 count the readers among the
/// handles, bits 32 to 63 count every handle. A reader's drop is one read-modify-write
/// that leaves both counts at once; the last handle frees the allocation.
const WATCHED: u64 = 1;
const ONE_READER: u64 = 1 << 1;
const ONE_HANDLE: u64 = 1 << 32;
const READERS: u64 = ONE_HANDLE - ONE_READER;
/// The most handles (or readers) of one promise; one more aborts, as `Arc` does.
const COUNT_MAX: u64 = (1 << 31) - 1;

fn readers(refs: u64) -> u64 {
    (refs & READERS) / ONE_READER
}

fn handles(refs: u64) -> u64 {
    refs / ONE_HANDLE
}

/// What the state beside the slot does when the last reader leaves while a `closed()`
/// future watches (see [`Allocation::watch`]); called on the dropping thread, which still
/// holds its handle.
pub(crate) trait Readers {
    fn last_reader_gone(&self);
}

/// The promise's one heap allocation: a slot and the rest of the state `X` beside it,
/// counted by the handles and freed by the last one; reads through to `X`.
pub(crate) struct Allocation<V, X> {
    refs: AtomicU64,
    pub(crate) slot: Slot<V>,
    rest: X,
    /// Under loom, a leak of the allocation fails the model.
    #[cfg(loom)]
    _track: crate::sync::Track,
}

impl<V, X> Deref for Allocation<V, X> {
    type Target = X;

    fn deref(&self) -> &X {
        &self.rest
    }
}

impl<V, X> Allocation<V, X> {
    /// Whether every reader is gone. Final once true: readers are only ever cloned from
    /// a reader.
    pub(crate) fn is_closed(&self) -> bool {
        // ORDERING: Acquire pairs with the last reader's AcqRel decrement.
        readers(self.refs.load(Ordering::Acquire)) == 0
    }

    /// Sets `WATCHED`; returns whether every reader is gone already. Call it under the lock
    /// that [`Readers::last_reader_gone`] takes, after storing what it must find there.
    ///
    /// RACE (closed vs last reader): a `closed()` poll sets `WATCHED` while the last reader
    /// drops. Both are read-modify-writes of the `refs` word, so exactly one sees the
    /// other: the poll sees no reader left, or the dropper sees `WATCHED` and calls
    /// `last_reader_gone`, which takes the lock the poll held. Loom model:
    /// `closed_wakes_when_the_last_reader_drops`.
    pub(crate) fn watch(&self) -> bool {
        // ORDERING: AcqRel, one read-modify-write against the dropper's.
        readers(self.refs.fetch_or(WATCHED, Ordering::AcqRel)) == 0
    }
}

/// A counted handle on an [`Allocation`]; `READER` handles are also counted as
/// readers (the promise's futures), the others are not (completers, `closed()` futures,
/// callbacks). Cloning keeps the role; [`plain`](Self::plain) makes a non-reader handle.
pub(crate) struct Handle<V, X: Readers, const READER: bool> {
    ptr: NonNull<Allocation<V, X>>,
    /// The handle owns a share of the allocation (for the drop check).
    _owns: PhantomData<Allocation<V, X>>,
}

/// A handle that is not a reader.
pub(crate) type Plain<V, X> = Handle<V, X, false>;
/// A handle that is a reader.
pub(crate) type Reader<V, X> = Handle<V, X, true>;

// SAFETY: a handle gives `&Allocation` to any thread that holds it and may drop the
// allocation on any thread, as `Arc` does: both need `Allocation: Send + Sync`, which holds
// when `V: Send` (see `Slot`'s impls) and `X: Send + Sync`.
unsafe impl<V: Send, X: Readers + Send + Sync, const R: bool> Send for Handle<V, X, R> {}
// SAFETY: as above.
unsafe impl<V: Send, X: Readers + Send + Sync, const R: bool> Sync for Handle<V, X, R> {}

// A handle is a pointer: moving it never moves the allocation, as with `Arc`.
impl<V, X: Readers, const R: bool> Unpin for Handle<V, X, R> {}

impl<V, X: Readers, const READER: bool> Handle<V, X, READER> {
    /// The counts one handle of this role adds.
    const UNIT: u64 = if READER { ONE_HANDLE + ONE_READER } else { ONE_HANDLE };

    /// One more handle of role `R` on the allocation `ptr`, which the caller keeps alive
    /// with a handle of its own.
    fn counted<const R: bool>(ptr: NonNull<Allocation<V, X>>) -> Handle<V, X, R> {
        // SAFETY: the caller holds a handle, so the allocation is alive.
        let allocation = unsafe { ptr.as_ref() };
        // ORDERING: a count of handles, like `Arc`'s clone: an existing handle keeps the
        // allocation alive while we add one, so no ordering with other data is needed.
        let before = allocation.refs.fetch_add(Handle::<V, X, R>::UNIT, Ordering::Relaxed);
        if handles(before) >= COUNT_MAX || readers(before) >= COUNT_MAX {
            // As `Arc`: a count this high means handles are being leaked; continuing could
            // wrap the count and free the allocation under live handles.
            std::process::abort();
        }
        Handle { ptr, _owns: PhantomData }
    }

    /// Another handle on the same allocation that is not a reader.
    pub(crate) fn plain(&self) -> Plain<V, X> {
        Self::counted(self.ptr)
    }

    /// Leaves the count: the last reader out while `WATCHED` calls `last_reader_gone`
    /// (still holding this handle), and the last handle out frees the allocation.
    fn release(&mut self) {
        // SAFETY: this handle keeps the allocation alive until its count is given back.
        let allocation = unsafe { self.ptr.as_ref() };
        let mut unit = Self::UNIT;
        // A watcher's waker that panics in `last_reader_gone` must not keep this handle's
        // count (the allocation would never be freed): caught, and passed on once the
        // handle has left.
        let mut served = Ok(());
        if READER {
            // ORDERING: Relaxed: the compare-and-swap below re-reads with AcqRel.
            let mut current = allocation.refs.load(Ordering::Relaxed);
            loop {
                if readers(current) == 1 && current & WATCHED != 0 {
                    // Leave as a reader first and serve the watchers while this handle
                    // keeps the allocation alive; then leave as a handle below.
                    // ORDERING: AcqRel, the read-modify-write `watch` races (see there).
                    allocation.refs.fetch_sub(ONE_READER, Ordering::AcqRel);
                    served = panic::catch_unwind(AssertUnwindSafe(|| {
                        allocation.rest.last_reader_gone();
                    }));
                    unit = ONE_HANDLE;
                    break;
                }
                // ORDERING: AcqRel: Release, so that the handle that frees sees this
                // handle's writes (as `Arc`'s drop); Acquire, as `watch` needs (see there).
                match allocation.refs.compare_exchange_weak(
                    current,
                    current - unit,
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                ) {
                    Ok(_) if handles(current) == 1 => return self.free(),
                    Ok(_) => return,
                    Err(actual) => current = actual,
                }
            }
        }
        // ORDERING: Release, so that the handle that frees sees this handle's writes.
        if handles(allocation.refs.fetch_sub(unit, Ordering::Release)) == 1 {
            self.free();
        }
        if let Err(payload) = served
            && !crate::sync::panicking()
        {
            panic::resume_unwind(payload);
        }
    }

    /// Frees the allocation; called by the last handle only.
    fn free(&mut self) {
        // ORDERING: Acquire pairs with every other handle's Release decrement (as `Arc`'s
        // drop): their writes to the allocation happen before we drop it.
        fence(Ordering::Acquire);
        // SAFETY: the count of handles reached zero on our decrement: no other handle
        // exists and none can be made (a handle is cloned only from a live one). The
        // allocation came from `Box::leak` in `owned`.
        drop(unsafe { Box::from_raw(self.ptr.as_ptr()) });
    }
}

impl<V, X: Readers, const READER: bool> Deref for Handle<V, X, READER> {
    type Target = Allocation<V, X>;

    fn deref(&self) -> &Allocation<V, X> {
        // SAFETY: this handle keeps the allocation alive.
        unsafe { self.ptr.as_ref() }
    }
}

impl<V, X: Readers, const READER: bool> Clone for Handle<V, X, READER> {
    fn clone(&self) -> Self {
        Self::counted(self.ptr)
    }
}

impl<V, X: Readers, const READER: bool> Drop for Handle<V, X, READER> {
    fn drop(&mut self) {
        self.release();
    }
}

/// The one handle that may move the value out and register the owner's waker: a reader.
/// Made only by [`owned`], once per allocation, and not `Clone`: `&mut self` on its
/// methods is what makes the slot's `take` and `register_owner` exclusive.
pub(crate) struct Owner<V, X: Readers> {
    reader: Reader<V, X>,
}

/// The first two handles on a new allocation, from [`owned`].
pub(crate) struct FirstHandles<V, X: Readers> {
    /// The owner: a reader, and the only handle that takes.
    pub(crate) owner: Owner<V, X>,
    /// A handle that is not a reader (the first completer's).
    pub(crate) plain: Plain<V, X>,
}

/// A new pending slot beside `rest`: its owner (a reader) and one handle that is not.
pub(crate) fn owned<V, X: Readers>(rest: X) -> FirstHandles<V, X> {
    let allocation = Box::new(Allocation {
        refs: AtomicU64::new(2 * ONE_HANDLE + ONE_READER),
        slot: Slot::new(),
        rest,
        #[cfg(loom)]
        _track: crate::sync::Track::new(()),
    });
    let ptr = NonNull::from(Box::leak(allocation));
    let owner = Owner { reader: Handle { ptr, _owns: PhantomData } };
    FirstHandles { owner, plain: Handle { ptr, _owns: PhantomData } }
}

impl<V, X: Readers> Owner<V, X> {
    /// The allocation, as every other handle sees it.
    pub(crate) fn allocation(&self) -> &Reader<V, X> {
        &self.reader
    }

    /// Gives up the right to take, keeping the reader (for a shared future).
    pub(crate) fn into_reader(self) -> Reader<V, X> {
        self.reader
    }

    /// Moves the value out, once; the word found instead if it is not ready or already
    /// taken.
    pub(crate) fn take(&mut self) -> Result<V, Snapshot> {
        // SAFETY: `&mut self` on the only `Owner` of this slot: no other `take` or
        // `register_owner` runs on it.
        unsafe { self.reader.slot.take() }
    }

    /// Stores `waker` for the winning writer to wake; `true` if the value was published
    /// first (then take it now: no one will wake the waker).
    pub(crate) fn register(&mut self, waker: &Waker) -> bool {
        // SAFETY: as in `take`.
        unsafe { self.reader.slot.register_owner(waker) }
    }
}
