//! What the pool needs to know about a connection.

/// Creates and checks connections; the pool calls it, never the user. Only
/// [`connect`](Self::connect) must be written: the two checks default to "healthy".
///
/// ```
/// use std::convert::Infallible;
///
/// #[derive(Debug)]
/// struct Counter;
///
/// impl idem_pool::Manager for Counter {
///     type Connection = u64;
///     type Error = Infallible;
///     fn connect(&self) -> Result<u64, Infallible> { Ok(0) }
/// }
///
/// let pool = idem_pool::Pool::builder().max_size(1).build(Counter)?;
/// assert_eq!(*pool.get()?, 0); // checked on checkout by the default `is_valid`
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait Manager: Send + Sync + 'static {
    /// The pooled resource.
    type Connection: Send + 'static;
    /// Why a connection could not be made or failed its check.
    type Error: std::error::Error + Send + Sync + 'static;

    /// Opens a new connection. Called outside the pool's lock; it may be slow.
    ///
    /// # Errors
    ///
    /// The reason the connection could not be made; `get` retries with backoff and
    /// reports the last such error if its timeout passes.
    fn connect(&self) -> Result<Self::Connection, Self::Error>;

    /// A health check on checkout (for example `SELECT 1`), when enabled. The default
    /// passes every connection: without a check, a broken connection is found by its
    /// user, who can [`mark_broken`](crate::PooledConnection::mark_broken) it.
    ///
    /// # Errors
    ///
    /// The reason the connection is unusable; the pool discards it and the caller
    /// connects a new one in its place.
    fn is_valid(&self, connection: &mut Self::Connection) -> Result<(), Self::Error> {
        let _ = connection;
        Ok(())
    }

    /// A cheap check on return (no I/O): is this connection known to be broken? A broken
    /// connection is discarded instead of going back among the idle ones. The default
    /// knows of no breakage (`false`); a connection marked broken by its guard is
    /// discarded either way.
    fn has_broken(&self, connection: &mut Self::Connection) -> bool {
        let _ = connection;
        false
    }
}
