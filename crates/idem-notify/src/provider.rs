//! The last hop: the email, SMS or push provider.

use crate::message::Notification;

/// Why a send did not (or may not have) delivered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SendError {
    /// Nothing was delivered and a later attempt may succeed (throttled, 5xx before
    /// sending): retried with backoff.
    #[error("transient: {0}")]
    Transient(String),
    /// Nothing was delivered and no attempt will succeed (bad address, blocked): not
    /// retried, dead-lettered.
    #[error("permanent: {0}")]
    Permanent(String),
    /// Sent, and no answer came back: it may or may not have been delivered. Asked with
    /// `status`, never resent blindly.
    #[error("ambiguous: {0}")]
    Ambiguous(String),
}

/// What the provider knows about a message id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeliveryStatus {
    /// Delivered.
    Delivered,
    /// Never delivered.
    NotDelivered,
    /// The provider cannot say (no status API, or it forgot the id).
    Unknown,
}

/// A notification provider. It is handed the message id as its own idempotency key.
pub trait Provider: Send + Sync + 'static {
    /// Sends `notification`; the provider should deduplicate by its message id.
    ///
    /// # Errors
    ///
    /// [`SendError`]: transient, permanent, or ambiguous.
    fn send(&self, notification: &Notification) -> Result<(), SendError>;

    /// What happened to `message_id` for `recipient`. A provider without a status API
    /// answers `Unknown`: then an ambiguous send is reported unresolved, not resent
    /// (unless the notifier is configured for at-least-once).
    fn status(&self, notification: &Notification) -> DeliveryStatus;
}
