//! Connections of their own for the changes that wait for replicas.
//!
//! `WAIT` holds the connection it is sent on until enough replicas acknowledge, or its
//! timeout, and the server answers one connection's commands in order. On the store's one
//! shared connection every call, reads too, queued behind each change's wait: with a
//! replica away, callers were answered one replica timeout apart, and a lookup (which waits
//! for no replica) timed out behind six claims. A change that waits takes a lane here: a
//! connection no other call uses until its answer came. At most [`REPLICA_WAITS_MAX`] wait
//! at once per store (its clones share them); a change past that waits for a lane, within
//! its call's bound.

use std::sync::Mutex;

use redis::AsyncConnectionConfig;
use redis::aio::MultiplexedConnection;
use tokio::sync::{Semaphore, SemaphorePermit};

/// The most changes of one store (and its clones) waiting for replicas at once, each on a
/// connection of its own; as many connections stay open once used.
pub const REPLICA_WAITS_MAX: usize = 64;

/// The lanes of one store: idle connections, and the room for one per waiting change.
pub(crate) struct Lanes {
    client: redis::Client,
    config: AsyncConnectionConfig,
    idle: Mutex<Vec<MultiplexedConnection>>,
    room: Semaphore,
}

/// A connection lent to one change. Given back only once its call was answered: one whose
/// call failed, or was given up with its `WAIT` still pending, is closed (the next change
/// on it would wait behind that `WAIT`).
pub(crate) struct Lane<'a> {
    lanes: &'a Lanes,
    conn: Option<MultiplexedConnection>,
    ended: Ended,
    _room: SemaphorePermit<'a>,
}

/// How a lane's call ended, for what its drop does with the connection.
#[derive(Clone, Copy)]
enum Ended {
    /// Not yet: dropped so, the call was given up.
    Unanswered,
    Answered,
    Failed,
}

impl Lanes {
    pub(crate) fn new(client: redis::Client, config: AsyncConnectionConfig) -> Self {
        let (idle, room) = (Mutex::new(Vec::new()), Semaphore::new(REPLICA_WAITS_MAX));
        Self { client, config, idle, room }
    }

    /// A lane: an idle connection, else a new one, once fewer than the most wait.
    pub(crate) async fn lane(&self) -> redis::RedisResult<Lane<'_>> {
        let Ok(room) = self.room.acquire().await else {
            unreachable!("the lanes' semaphore is never closed")
        };
        let idle = self.idle.lock().unwrap_or_else(std::sync::PoisonError::into_inner).pop();
        let conn = match idle {
            Some(conn) => conn,
            None => self.client.get_multiplexed_async_connection_with_config(&self.config).await?,
        };
        Ok(Lane { lanes: self, conn: Some(conn), ended: Ended::Unanswered, _room: room })
    }
}

impl Lane<'_> {
    /// The lane's connection.
    pub(crate) fn conn(&mut self) -> &mut MultiplexedConnection {
        let Some(conn) = self.conn.as_mut() else { unreachable!("lent until dropped") };
        conn
    }

    /// The call on this lane was answered: its connection waits for nothing, and goes back
    /// to the idle ones.
    pub(crate) fn answered(&mut self) {
        self.ended = Ended::Answered;
    }

    /// The connection of this lane failed under its call (not an error reply: the server
    /// answered those): it is closed, and the idle ones too.
    pub(crate) fn failed(&mut self) {
        self.ended = Ended::Failed;
    }
}

impl Drop for Lane<'_> {
    /// An answered lane goes back to the idle ones. One whose connection failed is
    /// closed, and the idle ones with it: the server is most often gone (a restart closes
    /// every connection), and each idle lane handed out after it failed its change in
    /// turn, up to [`REPLICA_WAITS_MAX`] changes for one restart (a completion and its
    /// retries among them); the shared connection fails one call, then reconnects.
    /// A lane given up unanswered (its caller's timeout, a dropped call) is closed alone.
    fn drop(&mut self) {
        let mut idle = self.lanes.idle.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match (self.ended, self.conn.take()) {
            (Ended::Answered, Some(conn)) => idle.push(conn),
            (Ended::Failed, _) => idle.clear(),
            _ => {}
        }
    }
}
