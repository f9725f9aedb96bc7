//! What a borrower holds: a guard that gives back on drop, or a detached lease.

use std::fmt;
use std::ops::{Deref, DerefMut};

use crate::Manager;
use crate::pool::Shared;
use crate::sync::Arc;

/// A borrowed connection. Derefs to the connection; dropping it gives the connection
/// back, and so does [`release`](Self::release), once: a second release, or the drop
/// after a release, is a no-op.
pub struct PooledConnection<M: Manager> {
    shared: Arc<Shared<M>>,
    conn: Option<M::Connection>,
    slot: usize,
    generation: u64,
    broken: bool,
}

impl<M: Manager> PooledConnection<M> {
    pub(crate) fn new(
        shared: Arc<Shared<M>>,
        conn: M::Connection,
        slot: usize,
        generation: u64,
    ) -> Self {
        Self { shared, conn: Some(conn), slot, generation, broken: false }
    }

    /// Gives the connection back now; returns whether this call did. A second call is a
    /// no-op that returns `false` and is counted in
    /// [`PoolState::double_releases`](crate::PoolState::double_releases).
    pub fn release(&mut self) -> bool {
        match self.conn.take() {
            Some(conn) => {
                self.shared.give_back(self.slot, self.generation, conn, self.broken);
                true
            }
            None => {
                self.shared.count_double_release();
                false
            }
        }
    }

    /// Whether the connection was already given back with [`release`](Self::release).
    pub fn is_released(&self) -> bool {
        self.conn.is_none()
    }

    /// Marks the connection broken: on return it is closed and replaced, never lent again.
    pub fn mark_broken(&mut self) {
        self.broken = true;
    }

    /// Turns the guard into a [`Lease`]: the connection goes back into the pool's custody,
    /// still lent, until the lease (or any clone of it) is released, from any thread.
    ///
    /// # Panics
    ///
    /// If the guard was already released.
    pub fn detach(mut self) -> Lease<M> {
        let conn = self.conn.take().expect("detach of a released PooledConnection");
        self.shared.detach(self.slot, self.generation, conn);
        Lease { shared: self.shared.clone(), slot: self.slot, generation: self.generation }
    }

    /// This loan's slot and generation: stable identifiers for logs and tests.
    pub fn loan_id(&self) -> (usize, u64) {
        (self.slot, self.generation)
    }
}

impl<M: Manager> Deref for PooledConnection<M> {
    type Target = M::Connection;

    /// # Panics
    ///
    /// If the guard was already released: using a connection after giving it back is a
    /// bug in the caller, and the pool refuses to let it touch the next borrower's.
    fn deref(&self) -> &M::Connection {
        self.conn.as_ref().expect("use of a PooledConnection after release")
    }
}

impl<M: Manager> DerefMut for PooledConnection<M> {
    /// # Panics
    ///
    /// As `deref`.
    fn deref_mut(&mut self) -> &mut M::Connection {
        self.conn.as_mut().expect("use of a PooledConnection after release")
    }
}

impl<M: Manager> Drop for PooledConnection<M> {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            self.shared.give_back(self.slot, self.generation, conn, self.broken);
        }
    }
}

impl<M: Manager> fmt::Debug for PooledConnection<M>
where
    M::Connection: fmt::Debug,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PooledConnection")
            .field("slot", &self.slot)
            .field("generation", &self.generation)
            .field("conn", &self.conn)
            .finish()
    }
}

/// A detached loan: a slot index and a generation. Cheap to clone and send; releasing it
/// returns the connection once. A second release, or a release after the slot was lent
/// to someone else, does nothing to the current holder (the generation no longer
/// matches) and is counted in [`PoolState`](crate::PoolState).
pub struct Lease<M: Manager> {
    shared: Arc<Shared<M>>,
    slot: usize,
    generation: u64,
}

impl<M: Manager> Lease<M> {
    /// Returns the connection to the pool; returns whether this call did.
    ///
    /// RACE (double release): two clones released at once. Both check the slot's
    /// generation and phase under the pool lock; the first moves the phase off
    /// `Detached`, so the second sees it moved and counts a double release. Loom model:
    /// `racing_lease_releases`.
    pub fn release(&self) -> bool {
        self.shared.release_lease(self.slot, self.generation)
    }

    /// The loan's slot and generation.
    pub fn loan_id(&self) -> (usize, u64) {
        (self.slot, self.generation)
    }
}

impl<M: Manager> Clone for Lease<M> {
    fn clone(&self) -> Self {
        Self { shared: self.shared.clone(), slot: self.slot, generation: self.generation }
    }
}

impl<M: Manager> fmt::Debug for Lease<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lease")
            .field("slot", &self.slot)
            .field("generation", &self.generation)
            .finish()
    }
}
