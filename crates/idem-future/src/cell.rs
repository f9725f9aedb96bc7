//! The one module with unsafe code: a write-once slot whose state lives in one atomic word,
//! and the single-owner reader's waker beside it.
//!
//! The safe design (every state change under a mutex) measured 83 ns for create, complete
//! and one poll, against 38 ns for tokio's oneshot (docs/benchmarks.md). This slot makes
//! the uncontended path lock-free: a completion is one compare-and-swap plus one
//! fetch-add, a ready read by the owner is one load and one store. The owner's waker sits
//! in the slot too, guarded by the `OWNER` bit as tokio's oneshot guards its receiver's
//! task: registering it is one fetch-or, and the completer wakes it without a lock.
//! Everything else that waits (shared readers' wakers, blocked threads, callbacks) lives
//! under a mutex in `promise.rs`; this slot only tells the completer whether anyone
//! registered there (`WAITING`).
//!
//! States (bits 0-1) and flags of the word:
//!
//! ```text
//! PENDING --set: CAS--> WRITING --set: fetch_add--> READY --take: store--> TAKEN
//!                                                     \--share: fetch_or SHARED (read forever)
//! WAITING (bit 2): set by anyone who registered under the promise's mutex.
//! SHARED  (bit 3): readers may borrow the value; `take` is refused from then on.
//! kind    (bits 4-5): how it completed, written together with READY.
//! OWNER   (bit 6): the owner's waker cell holds a waker; only the owner sets or clears it.
//! ```

// This module is the crate's only unsafe code; the workspace denies it everywhere else.
#![allow(unsafe_code)]

use std::mem::MaybeUninit;
use std::ops::Deref;
use std::task::Waker;

use crate::sync::{Arc, AtomicUsize, Ordering, UnsafeCell};

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
    /// Holds a waker exactly when `OWNER` is set.
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

    /// Writes `value` if no one has; `kind` (0 to 3) is published with it, and the owner's
    /// waker, if one is registered, is woken. Returns the word as it was just before
    /// publishing (so the caller sees `WAITING`), or the value back if another writer won.
    pub(crate) fn set(&self, value: V, kind: usize) -> Result<Snapshot, V> {
        assert!(kind <= KIND_MAX, "kind {kind} does not fit in two bits");
        let mut current = self.state.load(Ordering::Relaxed);
        loop {
            if current & PHASE != PENDING {
                return Err(value);
            }
            // ORDERING: Acquire on success so the write below cannot move above the claim;
            // Relaxed on failure, which only retries or gives up.
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
        // SAFETY: the CAS above moved the phase from PENDING to WRITING; only one CAS can
        // do that, and no other method touches `value` while the phase is WRITING (`take`
        // and `read` require READY, `drop` needs `&mut self`). So this write is exclusive.
        self.value.with_mut(|slot| unsafe { (*slot).write(value) });
        // ORDERING: Release publishes the value written above to every Acquire that sees
        // READY; Acquire lets us read the `WAITING` flag set by registrants, and the
        // owner's waker stored before its Release fetch-or of `OWNER`, with fresh eyes.
        // WRITING + 1 == READY, and the kind bits were zero.
        let before = self.state.fetch_add(1 | (kind << KIND_SHIFT), Ordering::AcqRel);
        debug_assert_eq!(before & PHASE, WRITING, "only the writer moves WRITING on");
        if before & OWNER != 0 {
            // SAFETY: `OWNER` was set when we published, so the cell holds a waker, and the
            // owner never writes the cell again: it rewrites only after clearing `OWNER`
            // with a compare-and-swap that refuses a done word. The owner may read it at
            // the same time (`will_wake`); shared reads are sound. The cell is dropped
            // only by `drop`, which needs `&mut self`.
            self.owner.with(|cell| unsafe { (*cell).assume_init_ref() }.wake_by_ref());
        }
        Ok(Snapshot(before))
    }

    /// Stores `waker` as the owner's, to be woken by the winning `set`. Returns whether
    /// the value was published first: then no one will wake it, and the owner takes now.
    ///
    /// RACE (waker swap): a poll with a new waker races the completion. The old waker is
    /// replaced only after `OWNER` is cleared by a compare-and-swap that refuses a done
    /// word, and the new one is announced by a fetch-or; the publish is a
    /// read-modify-write of the same word, so exactly one of them sees the other: the
    /// writer wakes the waker stored last, or the owner sees the value. Loom model:
    /// `poll_races_completion`.
    ///
    /// # Safety
    ///
    /// Only the owner calls this, never from two threads at once.
    unsafe fn register_owner(&self, waker: &Waker) -> bool {
        // ORDERING: Acquire, so that a done word's value is visible to the owner's `take`.
        let mut current = self.state.load(Ordering::Acquire);
        loop {
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
                Err(actual) => current = actual,
            }
        }
        // SAFETY: `OWNER` is clear, and it was clear (or cleared by us) on a word that was
        // not done: a writer reads the cell only if it saw `OWNER` when publishing, so no
        // one reads or writes the cell now but us.
        self.owner.with_mut(|cell| unsafe { (*cell).write(waker.clone()) });
        // ORDERING: Release publishes the waker to the writer's Acquire publish; Acquire
        // lets a done word's value be read. One read-modify-write against the publish.
        Snapshot(self.state.fetch_or(OWNER, Ordering::AcqRel)).is_done()
    }

    /// Sets `WAITING` and returns the word as it was. If that word `is_done`, the writer
    /// has already published and will not look for waiters: the caller must serve itself.
    pub(crate) fn mark_waiting(&self) -> Snapshot {
        // ORDERING: AcqRel: both this and the writer's `fetch_add` are read-modify-writes
        // of one word, so exactly one of them sees the other. Acquire lets a caller that
        // sees `is_done` read the value.
        Snapshot(self.state.fetch_or(WAITING, Ordering::AcqRel))
    }

    /// Moves the value out, once, unless the slot was shared. `None` if it is not ready,
    /// already taken, or shared.
    ///
    /// # Safety
    ///
    /// Only the owner calls this, never from two threads at once.
    unsafe fn take(&self) -> Option<V> {
        // ORDERING: Acquire pairs with the Release in `set`: the value is visible.
        let current = self.state.load(Ordering::Acquire);
        if current & PHASE != READY || current & SHARED != 0 {
            return None;
        }
        // A store, not a read-modify-write: after READY the word's other writers are the
        // owner (`share`, `OWNER`: not now, we are the owner) and `mark_waiting`, whose
        // `WAITING` bit no one reads once the word is done (it sees done either way).
        // ORDERING: Relaxed: nothing is published by TAKEN; `drop` has `&mut self`.
        self.state.store((current & !PHASE) | TAKEN, Ordering::Relaxed);
        // SAFETY: READY means `set` initialised the value and published it (see ORDERING);
        // no borrow exists because `read` requires SHARED, which was clear; only the owner
        // takes (the caller's contract) and it saw READY, not TAKEN. After TAKEN nothing
        // reads the value again, including `drop`, so moving it out is sound.
        Some(self.value.with(|slot| unsafe { (*slot).assume_init_read() }))
    }

    /// Allows `read`, and refuses `take` from now on. Returns the word as it was.
    pub(crate) fn share(&self) -> Snapshot {
        // ORDERING: Acquire, so that a later `read` of a ready value sees it.
        Snapshot(self.state.fetch_or(SHARED, Ordering::AcqRel))
    }

    /// Runs `f` on a borrow of the value if it is ready and shared; `None` otherwise.
    pub(crate) fn read<R>(&self, f: impl FnOnce(&V) -> R) -> Option<R>
    where
        V: Sync,
    {
        let now = self.snapshot();
        if now.0 & PHASE != READY || now.0 & SHARED == 0 {
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

/// A slot and the state `X` shared with it, in one allocation; reads through to `X`.
pub(crate) struct Shared<V, X> {
    pub(crate) slot: Slot<V>,
    rest: X,
}

impl<V, X> Deref for Shared<V, X> {
    type Target = X;

    fn deref(&self) -> &X {
        &self.rest
    }
}

/// The one handle that may move the value out and register the owner's waker. Made only by
/// [`owned`], once per allocation, and not `Clone`: `&mut self` on its methods is what
/// makes the slot's `take` and `register_owner` exclusive.
pub(crate) struct Owner<V, X> {
    shared: Arc<Shared<V, X>>,
}

/// A new pending slot beside `rest`: the owner, and a handle for everyone else.
pub(crate) fn owned<V, X>(rest: X) -> (Owner<V, X>, Arc<Shared<V, X>>) {
    let shared = Arc::new(Shared { slot: Slot::new(), rest });
    (Owner { shared: shared.clone() }, shared)
}

impl<V, X> Owner<V, X> {
    /// The shared state, as every other handle sees it.
    pub(crate) fn shared(&self) -> &Arc<Shared<V, X>> {
        &self.shared
    }

    /// Moves the value out, once; `None` if it is not ready, already taken, or shared.
    pub(crate) fn take(&mut self) -> Option<V> {
        // SAFETY: `&mut self` on the only `Owner` of this slot: no other `take` or
        // `register_owner` runs on it.
        unsafe { self.shared.slot.take() }
    }

    /// Stores `waker` for the winning writer to wake; `true` if the value was published
    /// first (then take it now: no one will wake the waker).
    pub(crate) fn register(&mut self, waker: &Waker) -> bool {
        // SAFETY: as in `take`.
        unsafe { self.shared.slot.register_owner(waker) }
    }
}
