//! The pool's test managers, shared by its loom models (`tests/loom.rs`) and its benches
//! (`benches/`, through a `#[path]`). They live here, not in idem-testkit: idem-pool
//! takes idem-testkit as a dev-dependency, so idem-testkit cannot depend on idem-pool
//! without closing a cycle between the two.

use std::convert::Infallible;

/// Connections that cost nothing, each the number 7, so a bench measures the pool alone
/// and a model can check that the connection it got is the one made. A manager for r2d2
/// too, so the benches run both pools on it.
#[derive(Debug)]
pub(crate) struct Noop;

impl idem_pool::Manager for Noop {
    type Connection = u32;
    type Error = Infallible;
    fn connect(&self) -> Result<u32, Infallible> {
        Ok(7)
    }
}

impl r2d2::ManageConnection for Noop {
    type Connection = u32;
    type Error = Infallible;
    fn connect(&self) -> Result<u32, Infallible> {
        Ok(7)
    }
    fn is_valid(&self, _: &mut u32) -> Result<(), Infallible> {
        Ok(())
    }
    fn has_broken(&self, _: &mut u32) -> bool {
        false
    }
}

/// Fails its first connect; every later connect succeeds. Its flag is loom's atomic, so
/// the models explore the threads' order around it; only the loom models use it.
#[cfg(loom)]
#[derive(Debug, Default)]
pub(crate) struct FailFirst {
    failed: loom::sync::atomic::AtomicBool,
}

/// [`FailFirst`]'s error.
#[cfg(loom)]
#[derive(Debug, thiserror::Error)]
#[error("connection refused")]
pub(crate) struct Refused;

#[cfg(loom)]
impl idem_pool::Manager for FailFirst {
    type Connection = u32;
    type Error = Refused;
    fn connect(&self) -> Result<u32, Refused> {
        use loom::sync::atomic::Ordering::SeqCst;
        if self.failed.swap(true, SeqCst) { Ok(7) } else { Err(Refused) }
    }
}
