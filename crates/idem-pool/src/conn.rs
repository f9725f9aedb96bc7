//! What a borrower holds: a guard that gives back on drop, or a loan held as a value.

use std::fmt;
use std::ops::{Deref, DerefMut};

use crate::Manager;
use crate::pool::Lender;
use crate::shelf::Lent;
use crate::sync::Arc;

/// The name of one loan: the slot lent and the slot's generation at the time. The
/// generation grows each time the slot is lent, so no two loans of a pool share an id.
///
/// ```
/// # use std::convert::Infallible;
/// # #[derive(Debug)] struct Noop;
/// # impl idem_pool::Manager for Noop {
/// #     type Connection = (); type Error = Infallible;
/// #     fn connect(&self) -> Result<(), Infallible> { Ok(()) }
/// # }
/// let pool = idem_pool::Pool::builder().max_size(1).build(Noop)?;
/// let first = pool.get()?.loan_id();
/// let second = pool.get()?.loan_id();
/// assert_eq!((first.slot(), second.slot()), (0, 0)); // the one slot, lent twice
/// assert!(second.generation() > first.generation());
/// assert_eq!(first.to_string(), "slot 0 generation 1");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LoanId {
    slot: usize,
    generation: u64,
}

impl LoanId {
    pub(crate) fn new(slot: usize, generation: u64) -> Self {
        Self { slot, generation }
    }

    /// The index of the slot lent, below the pool's `max_size`.
    pub fn slot(self) -> usize {
        self.slot
    }

    /// The slot's generation when it was lent.
    pub fn generation(self) -> u64 {
        self.generation
    }
}

impl fmt::Display for LoanId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "slot {} generation {}", self.slot, self.generation)
    }
}

/// A borrowed connection. Derefs to the connection; dropping it gives the connection
/// back, and so does [`release`](Self::release), once: a second release, or the drop
/// after a release, is a no-op.
pub struct PooledConnection<M: Manager> {
    lender: Arc<Lender<M>>,
    lent: Option<Lent<M::Connection>>,
    id: LoanId,
    broken: bool,
}

impl<M: Manager> PooledConnection<M> {
    /// The loan begins: its start is recorded for the leak count (after its health check,
    /// which is the pool's time, not the borrower's).
    #[inline]
    pub(crate) fn new(lender: Arc<Lender<M>>, lent: Lent<M::Connection>) -> Self {
        lender.shelf.set_lent_at(&lent.claim, lent.lent_at);
        let id = LoanId::new(lent.claim.slot(), lent.claim.generation());
        Self { lender, lent: Some(lent), id, broken: false }
    }

    /// Gives the connection back now; returns whether this call did. A second call is a
    /// no-op that returns `false` and is counted in
    /// [`PoolState::double_releases`](crate::PoolState::double_releases).
    pub fn release(&mut self) -> bool {
        match self.lent.take() {
            Some(lent) => {
                self.lender.give_back(lent, self.broken);
                true
            }
            None => {
                self.lender.count_double_release();
                false
            }
        }
    }

    /// Whether the connection was already given back with [`release`](Self::release).
    pub fn is_released(&self) -> bool {
        self.lent.is_none()
    }

    /// Marks the connection broken: on return it is closed and replaced, never lent again.
    pub fn mark_broken(&mut self) {
        self.broken = true;
    }

    /// Turns the guard into a [`Loan`]: the connection goes back into the pool's custody,
    /// parked and still lent, until the loan (or any clone of it) is released, from any
    /// thread. The loan keeps this guard's [`LoanId`].
    ///
    /// # Panics
    ///
    /// If the guard was already released.
    pub fn into_loan(mut self) -> Loan<M> {
        let lent = self.lent.take().expect("into_loan of a released PooledConnection");
        self.lender.park(lent, self.broken);
        Loan { lender: self.lender.clone(), id: self.id }
    }

    /// This loan's slot and generation: a stable name for logs and tests.
    pub fn loan_id(&self) -> LoanId {
        self.id
    }
}

impl<M: Manager> Deref for PooledConnection<M> {
    type Target = M::Connection;

    /// # Panics
    ///
    /// If the guard was already released: using a connection after giving it back is a
    /// bug in the caller, and the pool refuses to let it touch the next borrower's.
    fn deref(&self) -> &M::Connection {
        &self.lent.as_ref().expect("use of a PooledConnection after release").conn
    }
}

impl<M: Manager> DerefMut for PooledConnection<M> {
    /// # Panics
    ///
    /// As `deref`.
    fn deref_mut(&mut self) -> &mut M::Connection {
        &mut self.lent.as_mut().expect("use of a PooledConnection after release").conn
    }
}

impl<M: Manager> Drop for PooledConnection<M> {
    fn drop(&mut self) {
        if let Some(lent) = self.lent.take() {
            self.lender.give_back(lent, self.broken);
        }
    }
}

impl<M: Manager> fmt::Debug for PooledConnection<M>
where
    M::Connection: fmt::Debug,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let conn = self.lent.as_ref().map(|lent| &lent.conn);
        f.debug_struct("PooledConnection").field("id", &self.id).field("conn", &conn).finish()
    }
}

/// A loan held as a value rather than a guard: its [`LoanId`] and the pool. Cheap to
/// clone and send; releasing it returns the connection once. A second release, or a
/// release after the slot was lent to someone else, does nothing to the current holder
/// (the generation no longer matches) and is counted in [`PoolState`](crate::PoolState).
/// Made by [`PooledConnection::into_loan`].
///
/// Dropping a `Loan` does not return its connection: a loan may be cloned and handed to
/// whoever finishes the work, so only an explicit [`release`](Loan::release) gives the
/// slot back. A loan dropped unreleased keeps its connection parked, counted in use, and
/// its slot is not lent again: release every loan you make.
pub struct Loan<M: Manager> {
    lender: Arc<Lender<M>>,
    id: LoanId,
}

impl<M: Manager> Loan<M> {
    /// Returns the connection to the pool; returns whether this call did.
    ///
    /// RACE (double release): two clones released at once. Both check the slot's
    /// generation and phase under the pool lock; the first moves the phase off
    /// `Parked`, so the second sees it moved and counts a double release. Loom model:
    /// `racing_loan_releases`.
    pub fn release(&self) -> bool {
        self.lender.release_loan(self.id)
    }

    /// The loan's slot and generation.
    pub fn loan_id(&self) -> LoanId {
        self.id
    }
}

impl<M: Manager> Clone for Loan<M> {
    fn clone(&self) -> Self {
        Self { lender: self.lender.clone(), id: self.id }
    }
}

impl<M: Manager> fmt::Debug for Loan<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Loan").field("id", &self.id).finish()
    }
}
