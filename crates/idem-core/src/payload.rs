//! Dropping a caught panic's payload without a second panic escaping.
//!
//! A worker that catches a panic (a provider's, a store's) and goes on must also drop what
//! the panic carried, and that payload's `Drop` is foreign code: it may panic too, with a
//! payload of its own. Dropped outside a guard, that second panic ends the worker the first
//! guard was there to keep. idem-notify's workers and idem-payments' lease renewers both
//! drop payloads through [`drop_panic_payload`].

use std::any::Any;
use std::panic::{self, AssertUnwindSafe};

/// The most panics a payload's drop may raise in turn (each with a payload of its own)
/// before the last payload is leaked instead of dropped.
pub const PAYLOAD_DROPS_MAX: usize = 8;

/// Drops a caught panic's `payload`, each panic its drop raises caught in turn, up to
/// [`PAYLOAD_DROPS_MAX`]; past that the last payload is leaked (a payload that panics
/// whenever it is dropped would otherwise never be done with).
///
/// ```
/// struct Bomb(u32);
/// impl Drop for Bomb {
///     fn drop(&mut self) {
///         if self.0 > 0 {
///             std::panic::panic_any(Bomb(self.0 - 1));
///         }
///     }
/// }
/// let caught = std::panic::catch_unwind(|| std::panic::panic_any(Bomb(3)));
/// idem_core::drop_panic_payload(caught.unwrap_err()); // no panic escapes
/// ```
pub fn drop_panic_payload(payload: Box<dyn Any + Send>) {
    let mut payload = payload;
    for _ in 0..PAYLOAD_DROPS_MAX {
        match panic::catch_unwind(AssertUnwindSafe(move || drop(payload))) {
            Ok(()) => return,
            Err(next) => payload = next,
        }
    }
    std::mem::forget(payload);
}
