//! The one module with unsafe code: a write-once slot whose state lives in one atomic word.
//!
//! The safe design (every state change under a mutex) measured 83 ns for create, complete
//! and one poll, against 38 ns for tokio's oneshot (docs/benchmarks.md). This slot makes
//! the uncontended path lock-free: a completion is one compare-and-swap plus one
//! fetch-add, a ready read is one load plus one compare-and-swap. Everything that waits
//! (wakers, blocked threads, callbacks) still lives under a mutex in `promise.rs`; this
//! slot only tells the completer whether anyone registered there (`WAITING`).
//!
//! States (bits 0-1) and flags of the word:
//!
//! ```text
//! PENDING --set: CAS--> WRITING --set: fetch_add--> READY --take: CAS--> TAKEN
//!                                                     \--share: fetch_or SHARED (read forever)
//! WAITING (bit 2): set by anyone who registered under the promise's mutex.
//! SHARED  (bit 3): readers may borrow the value; `take` is refused from then on.
//! kind    (bits 4-5): how it completed, written together with READY.
//! ```

// This module is the crate's only unsafe code; the workspace denies it everywhere else.
#![allow(unsafe_code)]

use std::mem::MaybeUninit;

use crate::sync::{AtomicUsize, Ordering, UnsafeCell};

const PHASE: usize = 0b11;
const PENDING: usize = 0;
const WRITING: usize = 1;
const READY: usize = 2;
const TAKEN: usize = 3;
const WAITING: usize = 1 << 2;
const SHARED: usize = 1 << 3;
const KIND_SHIFT: usize = 4;
const KIND_MAX: usize = 0b11;

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
/// one reader or borrowed by many.
pub(crate) struct Slot<V> {
    state: AtomicUsize,
    value: UnsafeCell<MaybeUninit<V>>,
}

// SAFETY: the slot moves a `V` in (`set`) and out (`take`), possibly across threads, so it
// is `Send` and `Sync` when `V` is `Send`, like a mutex. Sharing `&V` across threads
// (`read`) is gated on `V: Sync` at the method.
unsafe impl<V: Send> Send for Slot<V> {}
// SAFETY: as above; every access to `value` is ordered by `state` (see each method).
unsafe impl<V: Send> Sync for Slot<V> {}

impl<V> Slot<V> {
    pub(crate) fn new() -> Self {
        Self { state: AtomicUsize::new(PENDING), value: UnsafeCell::new(MaybeUninit::uninit()) }
    }

    /// The current word.
    pub(crate) fn snapshot(&self) -> Snapshot {
        // ORDERING: Acquire pairs with the Release in `set`, so a caller that sees
        // `is_done` also sees the value and everything the writer did before it.
        Snapshot(self.state.load(Ordering::Acquire))
    }

    /// Writes `value` if no one has; `kind` (0 to 3) is published with it. Returns the
    /// word as it was just before publishing (so the caller sees `WAITING`), or the
    /// value back if another writer won.
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
        // READY; Acquire lets us read the `WAITING` flag set by registrants with fresh
        // eyes. WRITING + 1 == READY, and the kind bits were zero.
        let before = self.state.fetch_add(1 | (kind << KIND_SHIFT), Ordering::AcqRel);
        debug_assert_eq!(before & PHASE, WRITING, "only the writer moves WRITING on");
        Ok(Snapshot(before))
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
    pub(crate) fn take(&self) -> Option<V> {
        let mut current = self.state.load(Ordering::Relaxed);
        loop {
            if current & PHASE != READY || current & SHARED != 0 {
                return None;
            }
            // ORDERING: Acquire pairs with the Release in `set`: the value is visible.
            match self.state.compare_exchange_weak(
                current,
                (current & !PHASE) | TAKEN,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(actual) => current = actual,
            }
        }
        // SAFETY: the CAS moved READY to TAKEN, which happens once; READY means `set`
        // initialised the value (and published it, see ORDERING), and no borrow exists
        // because `read` requires SHARED, which the CAS saw clear. After TAKEN nothing
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
    }
}
