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
//! claimed key, so it deduplicates too. A gateway call slower than the store's lease keeps
//! its key: the processor renews the lease while the call runs
//! ([`Processor::renewals`]), so no reconcile or retry asks the gateway before the charge
//! lands and charges again. So a gateway call that hangs in a live process keeps its key
//! until it returns (give the gateway's client a timeout); a process that crashed or
//! stopped renews nothing, and its claims are recovered after the lease.
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
//!
//! # Features
//!
//! `tracing` (off by default): a `pay` span per payment naming its scope and key, the
//! store's events inside it, and warnings for a recovery, an ambiguous answer and a
//! mismatched charge. Never an amount or a card.

mod durable;
mod gateway;
mod money;
mod processor;
mod renewer;
mod simulated;

pub use gateway::{BadChargeId, Charge, ChargeId, Gateway, GatewayError, GatewayKey, Lookup};
pub use money::{Amount, Currency, PaymentRequest, ValidationError};
pub use processor::{
    ChargeField, FailedClaim, MismatchedCharge, PayError, Payment, PaymentOutcome, Processor,
    ReconcileReport,
};
pub use renewer::Renewals;
/// The renewer's registry, public for the loom models in `tests/loom.rs` only.
#[doc(hidden)]
pub use renewer::{Registry, Renewed};
pub use simulated::{ChargeTotals, Fault, FaultPlan, SimulatedGateway};
