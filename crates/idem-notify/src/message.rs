//! Notifications: who, where, what, and the id that makes a retry harmless.

use std::fmt;

use idem_core::{Fingerprint, IdempotencyKey, KeyError, Scope, ScopedKey};

/// The longest content accepted, in bytes.
pub const CONTENT_LEN_MAX: usize = 64 * 1024;

/// Why a notification was refused before it was queued.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidNotification {
    /// The message id is not a valid key.
    #[error("invalid message id: {0}")]
    MessageId(KeyError),
    /// The recipient is not a valid key.
    #[error("invalid recipient: {0}")]
    Recipient(KeyError),
    /// The content is empty or longer than [`CONTENT_LEN_MAX`].
    #[error("content must be 1 to {CONTENT_LEN_MAX} bytes, got {len_bytes}")]
    Content {
        /// The refused length.
        len_bytes: usize,
    },
}

/// Where a notification goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Channel {
    /// Email.
    Email,
    /// SMS.
    Sms,
    /// Mobile push.
    Push,
}

impl Channel {
    /// The channel's name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Email => "email",
            Self::Sms => "sms",
            Self::Push => "push",
        }
    }
}

impl fmt::Display for Channel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Parses a channel's [`name`](Channel::name): `"sms".parse::<Channel>()`.
///
/// ```
/// use idem_notify::Channel;
///
/// assert_eq!("push".parse::<Channel>(), Ok(Channel::Push));
/// assert_eq!(Channel::Email.to_string().parse::<Channel>(), Ok(Channel::Email));
/// assert!("fax".parse::<Channel>().is_err());
/// ```
impl std::str::FromStr for Channel {
    type Err = UnknownChannel;

    fn from_str(name: &str) -> Result<Self, UnknownChannel> {
        [Self::Email, Self::Sms, Self::Push]
            .into_iter()
            .find(|c| c.name() == name)
            .ok_or_else(|| UnknownChannel { name: name.chars().take(ECHOED_CHARS_MAX).collect() })
    }
}

/// The most of a refused channel name an error repeats: enough to recognise it, never a
/// whole hostile input copied into a log line.
const ECHOED_CHARS_MAX: usize = 64;

/// A channel name that is none of `email`, `sms` or `push`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown channel {name:?}: use email, sms or push")]
pub struct UnknownChannel {
    /// The refused name (at most its first 64 characters).
    pub name: String,
}

/// One notification to one recipient on one channel. The producer chooses the message
/// id once per intended notification and reuses it on every retry.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Notification {
    /// The message id within the recipient's scope: the dedup key, built once here so
    /// that a submission borrows it instead of cloning its parts.
    key: ScopedKey,
    channel: Channel,
    content: String,
}

impl Notification {
    /// Validates a notification.
    ///
    /// # Errors
    ///
    /// [`InvalidNotification`] naming the bad field.
    pub fn new(
        message_id: &str,
        recipient: &str,
        channel: Channel,
        content: &str,
    ) -> Result<Self, InvalidNotification> {
        let message_id = IdempotencyKey::new(message_id).map_err(InvalidNotification::MessageId)?;
        let recipient = Scope::new(recipient).map_err(InvalidNotification::Recipient)?;
        if content.is_empty() || content.len() > CONTENT_LEN_MAX {
            return Err(InvalidNotification::Content { len_bytes: content.len() });
        }
        let key = ScopedKey::new(recipient, message_id);
        Ok(Self { key, channel, content: content.to_string() })
    }

    /// One notification per channel, each with an id derived from `message_id` and the
    /// channel (`<id>/<channel>`), so a retry of the whole fan-out pings each channel at
    /// most once.
    ///
    /// # Errors
    ///
    /// As [`new`](Self::new), for the first channel whose notification is invalid.
    ///
    /// ```
    /// use idem_notify::{Channel, Notification};
    ///
    /// let channels = [Channel::Email, Channel::Push];
    /// let all = Notification::fan_out("order-9-shipped", "user:42", &channels, "Shipped!")?;
    /// assert_eq!(all[1].message_id(), "order-9-shipped/push");
    /// # Ok::<(), idem_notify::InvalidNotification>(())
    /// ```
    pub fn fan_out(
        message_id: &str,
        recipient: &str,
        channels: &[Channel],
        content: &str,
    ) -> Result<Vec<Self>, InvalidNotification> {
        channels
            .iter()
            .map(|c| Self::new(&format!("{message_id}/{}", c.name()), recipient, *c, content))
            .collect()
    }

    /// The message id.
    pub fn message_id(&self) -> &str {
        self.key.key().as_str()
    }

    /// The recipient.
    pub fn recipient(&self) -> &str {
        self.key.scope().as_str()
    }

    /// The channel.
    pub fn channel(&self) -> Channel {
        self.channel
    }

    /// The content.
    pub fn content(&self) -> &str {
        &self.content
    }

    /// The dedup key the id store keeps: the message id, scoped to the recipient.
    pub fn key(&self) -> &ScopedKey {
        &self.key
    }

    /// The fingerprint the id store keeps beside the key: a SHA-256 of the channel and the
    /// content, so the same id with other content is refused. Computed on each call (each
    /// submission computes it once); with the key it looks the message up in the store:
    ///
    /// ```
    /// use idem_core::{KeyState, KeyStore, MemoryStore};
    /// use idem_notify::{Channel, Notification, Outcome};
    ///
    /// let store = MemoryStore::<Outcome>::new(Default::default());
    /// let n = Notification::new("msg-1", "user:7", Channel::Push, "hi")?;
    /// assert_eq!(store.lookup(n.key(), &n.fingerprint())?, KeyState::Absent);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn fingerprint(&self) -> Fingerprint {
        Fingerprint::builder("idem-notify/send")
            .str("channel", self.channel.name())
            .str("content", &self.content)
            .finish()
    }
}
