//! A notification service where a message id means a retried send never pings the user
//! twice.
//!
//! A notification goes out through a provider (email, SMS, push). The producer retries a
//! timed-out submit, the queue redelivers, a worker crashes after the provider accepted
//! the message, a provider call times out after delivering: each pings the user again
//! unless every notification carries a message id that the service, and the provider,
//! deduplicate. The producer chooses the id once per intended notification.
//!
//! # Guarantee
//!
//! Within the dedup window (the id store's result TTL, 24 hours by default), a message id
//! reaches the provider's `send` again only after the provider said it was not delivered:
//! a duplicate submission is answered, a lost answer is settled with `status`, and one the
//! provider cannot settle is reported unresolved rather than resent (unless configured
//! for at-least-once). The provider is handed the id as its own idempotency key, so a
//! provider that deduplicates closes the last hop too.
//!
//! # Examples
//!
//! ```
//! use idem_core::MemoryStore;
//! use idem_notify::{Channel, Config, Notification, Notifier, SimulatedProvider, Submitted};
//!
//! let store = MemoryStore::new(Default::default());
//! let notifier = Notifier::start(SimulatedProvider::new(), store, Config::default())?;
//! let n = Notification::new("welcome-user-42", "user:42", Channel::Email, "Welcome!")?;
//! assert_eq!(notifier.submit(n.clone())?, Submitted::Accepted);
//! // The producer timed out and retries: answered, not queued again.
//! let again = notifier.submit(n.clone())?;
//! assert!(matches!(again, Submitted::DuplicateInFlight | Submitted::Duplicate(_)));
//! let report = notifier.shutdown(std::time::Duration::from_secs(5));
//! assert!(report.drained);
//! assert_eq!(notifier.provider().deliveries(&n), 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Which operations need an id
//!
//! * **Need an id:** sending. A ping is an event, not a state: repeating it repeats it.
//!   The producer generates the id (`order-9-shipped`, not a fresh UUID per attempt);
//!   [`Notification::fan_out`] derives one per channel.
//! * **Idempotent by shape:** [`Notifier::mark_read`] sets a flag; setting it twice leaves
//!   the same state.
//! * **Remembered for:** the dedup window per recipient (the store's result TTL). A
//!   replay after that sends again; a message still in flight is remembered until it
//!   finishes.
//!
//! # Dead letters
//!
//! A message given up on is listed in [`Notifier::dead_letters`]. If every attempt was
//! answered as not delivered, its id is given back and a resubmission under the same id
//! is sent again (nothing reached the user, so it cannot ping twice). If an attempt may
//! have delivered (an ambiguous send resent under [`UnknownPolicy::Resend`]), the dead
//! letter is final: the id replays `Duplicate(DeadLettered)`.
//!
//! # When the provider has no status
//!
//! Then an ambiguous send (a timeout after sending) cannot be settled. The default,
//! [`UnknownPolicy::ReportUnresolved`], keeps at most once and reports the message in
//! [`Notifier::unresolved`]; [`UnknownPolicy::Resend`] opts into at least once on that
//! hop (a second ping possible).
//!
//! # Features
//!
//! `tracing` (off by default): `submit` and `send` spans naming the recipient, message id
//! and channel, and warnings for a recovery, an ambiguous send, a dead letter and an
//! unresolved message. Never the content.

mod config;
mod message;
mod notifier;
mod places;
mod provider;
mod retry;
mod simulated;

pub use config::{
    ATTEMPTS_MAX, Config, ConfigBuilder, ConfigError, QUEUE_CAPACITY_MAX, RETRY_CAP_MAX,
    UnknownPolicy, WORKERS_MAX,
};
pub use message::{CONTENT_LEN_MAX, Channel, InvalidNotification, Notification, UnknownChannel};
pub use notifier::{
    DeadLetter, MarkReadError, Notifier, Outcome, ShutdownReport, Stats, SubmitError, Submitted,
};
/// The queue's places, public for the loom models in `tests/loom.rs` only.
#[doc(hidden)]
pub use places::Places;
pub use provider::{DeliveryStatus, Provider, SendError};
pub use retry::{Jitter, RetryPolicy, Sleeper, ThreadSleeper};
pub use simulated::{ProviderFault, SimulatedProvider};
