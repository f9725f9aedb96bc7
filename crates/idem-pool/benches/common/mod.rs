//! What both pool benches share: a manager with nothing behind it, for both pools.

use std::convert::Infallible;

/// Connections that cost nothing, so a bench measures the pool alone.
#[derive(Debug)]
pub(crate) struct Noop;

impl idem_pool::Manager for Noop {
    type Connection = u64;
    type Error = Infallible;
    fn connect(&self) -> Result<u64, Infallible> {
        Ok(0)
    }
}

impl r2d2::ManageConnection for Noop {
    type Connection = u64;
    type Error = Infallible;
    fn connect(&self) -> Result<u64, Infallible> {
        Ok(0)
    }
    fn is_valid(&self, _: &mut u64) -> Result<(), Infallible> {
        Ok(())
    }
    fn has_broken(&self, _: &mut u64) -> bool {
        false
    }
}
