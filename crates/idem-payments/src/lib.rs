//! A payment processor with claimed idempotency keys and reconciliation of pending claims.
//!
//! The checkout button charges a card; the network hiccups after the request is sent; the
//! customer clicks again. Without a key the second click charges again, and charges per
//! intended payment come to 1 + the retry rate. Here the client sends one idempotency key
//! per intended payment, and the processor claims it before charging, stores the outcome
//! with it, and replays that outcome on every repeat.
//!
//! # Guarantee
//!
//! A key is charged at most once through this processor: a repeat replays the stored
//! charge or decline, a concurrent repeat is told to wait, and an attempt whose outcome
//! was lost stays pending until [`Processor::reconcile`] (or a retry) asks the gateway what
//! happened, instead of charging blindly. The gateway is handed a key derived from the
//! claimed key, so it deduplicates too.
//!
//! # Examples
//!
//! ```
//! use idem_core::{IdempotencyKey, MemoryStore};
//! use idem_payments::{Fault, PayError, PaymentRequest, Processor, SimulatedGateway};
//!
//! let store = MemoryStore::new(Default::default());
//! let processor = Processor::new("shop", SimulatedGateway::new(), store)?;
//! let key = IdempotencyKey::new("order-991")?;
//! let request = PaymentRequest::new("cus_7", 4_999, "USD")?;
//!
//! // The gateway charges, then the answer is lost.
//! processor.gateway().inject(Fault::ChargeThenTimeout);
//! assert!(matches!(processor.pay(&key, &request), Err(PayError::Pending(_))));
//! // A retry right away is told the first attempt is still in flight; nothing is charged.
//! assert!(matches!(processor.pay(&key, &request), Err(PayError::InProgress { .. })));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Which operations need a key
//!
//! * **Need a key:** [`Processor::pay`]. A charge is an increment of the customer's debt;
//!   repeating it repeats the debt. The **client** generates the key once per intended
//!   payment (when the checkout page renders, not per HTTP attempt) and sends it on every
//!   retry. Keys are scoped to the merchant and customer.
//! * **Idempotent by shape:** [`Processor::mark_refunded`] sets a named charge's status;
//!   repeating an assignment leaves the same state, so it needs no key.
//! * **Remembered for:** the store's result TTL (default 24 hours) after the outcome is
//!   stored; a pending claim is remembered until it is reconciled.
//!
//! # Failures
//!
//! | gateway answer | stored | key | caller sees |
//! |---|---|---|---|
//! | charged | the charge | finished | `Ok(Payment)` |
//! | declined (definitive) | the decline | finished | `Ok(Payment)`: `Declined`, replayed |
//! | refused before sending | nothing | released | `Unavailable`: retry may charge |
//! | no answer after sending | nothing | pending | `Pending`: reconcile settles it |
//! | invalid request | nothing | never claimed | `Invalid` |

#[cfg(feature = "sqlite")]
mod durable;
mod gateway;
mod money;
mod processor;
mod simulated;

#[cfg(feature = "sqlite")]
pub use durable::FileGateway;
pub use gateway::{Charge, ChargeId, Gateway, GatewayError, GatewayKey, Lookup};
pub use money::{Amount, Currency, PaymentRequest, ValidationError};
pub use processor::{ChargeField, PayError, Payment, PaymentOutcome, Processor, ReconcileReport};
pub use simulated::{Fault, FaultPlan, SimulatedGateway};

/// Helpers shared by the crash-test worker binary and the crash tests, so both sides pay
/// the same intents. Not part of the API.
#[doc(hidden)]
pub mod crash_plan {
    use std::time::Duration;

    use idem_core::{Clock, IdempotencyKey, SystemClock, Timestamp};

    use crate::PaymentRequest;

    /// Intents per round.
    pub const INTENTS: u64 = 12;

    /// The worker's named crash points.
    pub const POINTS: [&str; 5] =
        ["after_claim", "after_charge", "after_record", "before_reply", "after_ack"];

    /// The system clock moved ahead by more than the worker's lease: the restarted process
    /// sees every lease of a dead worker as run out, without waiting for it.
    #[derive(Debug)]
    pub struct Later;

    impl Clock for Later {
        fn now(&self) -> Timestamp {
            SystemClock.now().saturating_add(Duration::from_secs(3600))
        }
    }

    /// The line a worker prints when it answers intent `i` with charge `charge`.
    pub fn ack_line(i: u64, charge: u64) -> String {
        format!("ACK {i} {charge}")
    }

    /// Reads back an [`ack_line`]: `(intent, charge)`, or `None` for any other line.
    ///
    /// ```
    /// use idem_payments::crash_plan::{ack_line, parse_ack};
    ///
    /// assert_eq!(parse_ack(&ack_line(7, 42)), Some((7, 42)));
    /// assert_eq!(parse_ack("ACK 7"), None);
    /// assert_eq!(parse_ack("ACK 7 42 extra"), None);
    /// ```
    pub fn parse_ack(line: &str) -> Option<(u64, u64)> {
        let mut parts = line.split(' ');
        match (parts.next(), parts.next(), parts.next(), parts.next()) {
            (Some("ACK"), Some(i), Some(charge), None) => {
                Some((i.parse().ok()?, charge.parse().ok()?))
            }
            _ => None,
        }
    }

    /// Intent `i`: its key and its request.
    ///
    /// # Panics
    ///
    /// Never for the constants used (valid key, customer, amount and currency).
    pub fn intent(i: u64) -> (IdempotencyKey, PaymentRequest) {
        let key = IdempotencyKey::new(&format!("intent-{i}")).expect("valid key");
        let amount = 100 + i64::try_from(i % 1_000_000).unwrap_or(0);
        let request =
            PaymentRequest::new(&format!("cus_{}", i % 7), amount, "EUR").expect("valid request");
        (key, request)
    }
}
