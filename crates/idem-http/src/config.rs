//! The layer's settings and limits, built and validated by [`ConfigBuilder`].

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use http::{HeaderName, Method, StatusCode};

use crate::meaning::{Meaning, SharedMeaning};

/// Response statuses the handler promises it answers only when it did nothing (no
/// charge, no write): a response with one of them releases its key instead of being
/// kept, so a retry with the same key runs the handler again, as if the handler had
/// marked it [`NothingHappened`](crate::NothingHappened). The default is none: every
/// response is kept, as Stripe keeps every response, 500s included.
///
/// The danger is in the name: a status listed here that a handler also answers after
/// its side effect (a 503 after the charge went through, a 500 from a panic half-way)
/// runs that effect again on the retry. List only statuses answered before any effect,
/// such as a 429 from a rate limiter in front of the handler.
///
/// ```
/// use http::StatusCode;
/// use idem_http::{Config, EffectFree};
///
/// let config = Config::builder()
///     .release_on(EffectFree::statuses([StatusCode::TOO_MANY_REQUESTS]))
///     .build()?;
/// # Ok::<(), idem_http::ConfigError>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EffectFree(Vec<StatusCode>);

impl EffectFree {
    /// The statuses answered only before any side effect.
    pub fn statuses(statuses: impl IntoIterator<Item = StatusCode>) -> Self {
        Self(statuses.into_iter().collect())
    }

    pub(crate) fn contains(&self, status: StatusCode) -> bool {
        self.0.contains(&status)
    }
}

/// A function called with every replay before it is sent: the request, and the replayed
/// response's head (status, headers, extensions) to observe or change.
type ReplayFn = dyn Fn(&http::request::Parts, &mut http::response::Parts) + Send + Sync;

/// The configured replay hook, shared by every clone of a config.
#[derive(Clone)]
pub(crate) struct ReplayHook(pub(crate) Arc<ReplayFn>);

impl fmt::Debug for ReplayHook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ReplayHook")
    }
}

/// The layer's validated settings; see [`ConfigBuilder`] for each default.
#[derive(Debug, Clone)]
pub struct Config {
    pub(crate) methods: Vec<Method>,
    pub(crate) require_key: bool,
    pub(crate) body_bytes_max: usize,
    /// `None`: [`ConfigBuilder::RESPONSE_BYTES_DEFAULT`], or less if the store keeps less.
    pub(crate) response_bytes_max: Option<usize>,
    pub(crate) waiters_max: usize,
    pub(crate) wait: Option<Duration>,
    pub(crate) fingerprint_headers: Vec<HeaderName>,
    pub(crate) replay_headers: Vec<HeaderName>,
    pub(crate) orphan_time_max: Duration,
    pub(crate) effect_free: EffectFree,
    pub(crate) meaning: Option<SharedMeaning>,
    pub(crate) on_replay: Option<ReplayHook>,
    pub(crate) advertise_expiry: bool,
}

impl Config {
    /// A builder with the defaults.
    pub fn builder() -> ConfigBuilder {
        ConfigBuilder::default()
    }
}

impl Config {
    /// The stored-response body limit on a store that keeps results of at most
    /// `store_max` bytes: the one set, checked against the store, or the default, lowered
    /// to fit. A response whose headers then make it too large for the store is kept as a
    /// problem (at most [`NOT_KEPT_BYTES_MAX`](crate::NOT_KEPT_BYTES_MAX) bytes), never
    /// dropped.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] naming `response_bytes_max` if the one set does not fit, or the
    /// store cannot keep even the problem that stands in for a response too large to keep.
    pub(crate) fn response_limit(&self, store_max: Option<usize>) -> Result<usize, ConfigError> {
        use crate::stored::{NOT_KEPT_BYTES_MAX, STORED_ENVELOPE_BYTES};
        let Some(store_max) = store_max else {
            return Ok(self.response_bytes_max.unwrap_or(ConfigBuilder::RESPONSE_BYTES_DEFAULT));
        };
        let fits = store_max.saturating_sub(STORED_ENVELOPE_BYTES);
        let set = self.response_bytes_max;
        let limit = set.unwrap_or(ConfigBuilder::RESPONSE_BYTES_DEFAULT.min(fits));
        let needed = (limit + STORED_ENVELOPE_BYTES).max(NOT_KEPT_BYTES_MAX);
        if needed <= store_max {
            return Ok(limit);
        }
        let accepted = format!(
            "at most {fits} for a store that keeps {store_max} bytes (a stored response \
             takes {STORED_ENVELOPE_BYTES} bytes beside its headers and body, and at least \
             {NOT_KEPT_BYTES_MAX} in all), or raise the store's limit (with_result_bytes_max) \
             to at least {needed}"
        );
        Err(ConfigError::new("response_bytes_max", limit, accepted))
    }
}

impl Default for Config {
    fn default() -> Self {
        ConfigBuilder::default().config
    }
}

/// A setting was refused, named, with the value given and what it accepts: the shape
/// every idem crate's configuration errors have (idem-core's). A `response_bytes_max` the
/// store cannot keep is refused by [`IdempotencyLayer::with_config`](crate::IdempotencyLayer)
/// in this shape too, naming both limits and what to set: a response refused at completion
/// would leave its key in flight and its handler run again.
pub use idem_core::ConfigError;

/// Headers that frame one message on one connection: never stored, never replayed.
const FRAMING: &[&str] = &[
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "upgrade",
];

/// Builds a [`Config`]; every setter names its default.
///
/// ```
/// use std::time::Duration;
/// use idem_http::Config;
///
/// let config = Config::builder()
///     .require_key(true)
///     .body_bytes_max(64 * 1024)
///     .wait_for_first(Some(Duration::from_secs(2)))
///     .build()?;
/// # Ok::<(), idem_http::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct ConfigBuilder {
    config: Config,
}

impl Default for ConfigBuilder {
    fn default() -> Self {
        Self {
            config: Config {
                methods: vec![Method::POST, Method::PATCH],
                require_key: false,
                body_bytes_max: ConfigBuilder::BODY_BYTES_DEFAULT,
                response_bytes_max: None,
                waiters_max: ConfigBuilder::WAITERS_DEFAULT,
                wait: None,
                fingerprint_headers: vec![http::header::CONTENT_TYPE],
                replay_headers: vec![http::header::CONTENT_TYPE, http::header::LOCATION],
                orphan_time_max: ConfigBuilder::ORPHAN_TIME_DEFAULT,
                effect_free: EffectFree::default(),
                meaning: None,
                on_replay: None,
                advertise_expiry: false,
            },
        }
    }
}

impl ConfigBuilder {
    /// The largest body or stored response limit: 64 MiB.
    pub const BYTES_LIMIT: usize = 64 << 20;
    /// The default request body limit: 1 MiB.
    pub const BODY_BYTES_DEFAULT: usize = 1 << 20;
    /// The default stored response limit: 1 MiB (lowered to what the store keeps).
    pub const RESPONSE_BYTES_DEFAULT: usize = 1 << 20;
    /// The default `waiters_max`: 1,024.
    pub const WAITERS_DEFAULT: usize = 1024;
    /// The most requests that may wait for a first request at once.
    pub const WAITERS_LIMIT: usize = 1 << 20;
    /// The shortest `wait_for_first`: one pause of its claim loop (idem-core's
    /// [`WAIT_PAUSE_FIRST`](idem_core::WAIT_PAUSE_FIRST), 1 ms), which a shorter wait
    /// would sleep anyway.
    pub const WAIT_MIN: Duration = idem_core::WAIT_PAUSE_FIRST;
    /// The longest `wait_for_first`: one hour.
    pub const WAIT_LIMIT: Duration = Duration::from_secs(3600);
    /// The default `orphan_time_max`: one minute.
    pub const ORPHAN_TIME_DEFAULT: Duration = Duration::from_secs(60);
    /// The shortest `orphan_time_max`: one millisecond.
    pub const ORPHAN_TIME_MIN: Duration = Duration::from_millis(1);
    /// The longest `orphan_time_max`: one hour.
    pub const ORPHAN_TIME_LIMIT: Duration = Duration::from_secs(3600);

    /// The methods the layer applies to; others pass through untouched. Default `POST`
    /// and `PATCH` (the IETF draft's non-idempotent methods).
    #[must_use]
    pub fn methods(mut self, methods: impl IntoIterator<Item = Method>) -> Self {
        self.config.methods = methods.into_iter().collect();
        self
    }

    /// Whether a request without the header is refused (400) instead of passed through.
    /// Default `false`; apply a layer with `true` to the routes that need a key.
    #[must_use]
    pub fn require_key(mut self, required: bool) -> Self {
        self.config.require_key = required;
        self
    }

    /// The largest request body read and fingerprinted; one byte more is answered 413
    /// before anything is claimed. Default [`BODY_BYTES_DEFAULT`](Self::BODY_BYTES_DEFAULT),
    /// 1 MiB.
    #[must_use]
    pub fn body_bytes_max(mut self, bytes: usize) -> Self {
        self.config.body_bytes_max = bytes;
        self
    }

    /// The largest response body stored for replays. A larger response still reaches
    /// its caller whole (the layer reads up to the limit, then streams the rest on
    /// without holding it); what is stored (and replayed) is its status, its headers and
    /// a problem body saying it was too large to keep. Default
    /// [`RESPONSE_BYTES_DEFAULT`](Self::RESPONSE_BYTES_DEFAULT), 1 MiB, or less if the
    /// store keeps less ([`KeyStore::result_bytes_max`](idem_core::KeyStore)). A value
    /// the store cannot keep is refused when the layer is built
    /// ([`ConfigError`] naming `response_bytes_max`).
    #[must_use]
    pub fn response_bytes_max(mut self, bytes: usize) -> Self {
        self.config.response_bytes_max = Some(bytes);
        self
    }

    /// The most duplicates that may wait for a first request at once (with
    /// [`wait_for_first`](Self::wait_for_first)); one more is answered 409 at once.
    /// Default [`WAITERS_DEFAULT`](Self::WAITERS_DEFAULT), 1,024.
    #[must_use]
    pub fn waiters_max(mut self, waiters: usize) -> Self {
        self.config.waiters_max = waiters;
        self
    }

    /// How long a duplicate of a request in flight waits for it to finish and then
    /// replays its response; `None` answers 409 with `Retry-After` at once. Default `None`;
    /// a wait is between [`WAIT_MIN`](Self::WAIT_MIN) and [`WAIT_LIMIT`](Self::WAIT_LIMIT).
    #[must_use]
    pub fn wait_for_first(mut self, wait: Option<Duration>) -> Self {
        self.config.wait = wait;
        self
    }

    /// The request headers that are part of the fingerprint, beside the method, the path
    /// and query, and the body. Default `content-type`.
    #[must_use]
    pub fn fingerprint_headers(mut self, names: impl IntoIterator<Item = HeaderName>) -> Self {
        self.config.fingerprint_headers = names.into_iter().collect();
        self
    }

    /// The response headers stored and replayed (others, such as `set-cookie` or `date`,
    /// are never stored). Default `content-type` and `location`. Headers that frame the
    /// message (`content-length`, `transfer-encoding`, `connection` and the other
    /// hop-by-hop ones) are refused at [`build`](Self::build).
    #[must_use]
    pub fn replay_headers(mut self, names: impl IntoIterator<Item = HeaderName>) -> Self {
        // Each name once: one listed twice would replay its values twice.
        let mut kept: Vec<HeaderName> = Vec::new();
        for name in names {
            if !kept.contains(&name) {
                kept.push(name);
            }
        }
        self.config.replay_headers = kept;
        self
    }

    /// How long a handler whose client left may still run. A claimed request's handler
    /// runs on a task of its own, so a client that gives up (a timeout, a closed tab)
    /// does not cancel it half-way: it runs to its end, its response is stored, and the
    /// client's retry replays it. Past this bound, counted from when the client left, it
    /// is stopped and its key left in flight for recovery after the lease
    /// ([`LayerStats::orphans_abandoned`](crate::LayerStats)). A client that stops reading
    /// a streamed response (its connection left open) is treated as gone after as long
    /// without taking a frame: the rest is read, not sent, and the response kept. Default
    /// [`ORPHAN_TIME_DEFAULT`](Self::ORPHAN_TIME_DEFAULT), one minute; between
    /// [`ORPHAN_TIME_MIN`](Self::ORPHAN_TIME_MIN) and
    /// [`ORPHAN_TIME_LIMIT`](Self::ORPHAN_TIME_LIMIT).
    #[must_use]
    pub fn orphan_time_max(mut self, limit: Duration) -> Self {
        self.config.orphan_time_max = limit;
        self
    }

    /// Which response statuses release their key instead of being kept (see
    /// [`EffectFree`] for the promise this makes). Default: none, every response kept.
    #[must_use]
    pub fn release_on(mut self, effect_free: EffectFree) -> Self {
        self.config.effect_free = effect_free;
        self
    }

    /// What of the body goes into the fingerprint in place of its bytes (a
    /// [`JsonMeaning`](crate::JsonMeaning), or any [`Meaning`]). Default: the body's bytes,
    /// exactly.
    #[must_use]
    pub fn fingerprint_meaning(mut self, meaning: impl Meaning) -> Self {
        self.config.meaning = Some(SharedMeaning(Arc::new(meaning)));
        self
    }

    /// Calls `hook` with every replayed response before it is sent, with the request: to
    /// count replays by route, add a header, log. It sees and may change the status,
    /// headers and extensions; the body is the stored one. Default: none.
    #[must_use]
    pub fn on_replay(
        mut self,
        hook: impl Fn(&http::request::Parts, &mut http::response::Parts) + Send + Sync + 'static,
    ) -> Self {
        self.config.on_replay = Some(ReplayHook(Arc::new(hook)));
        self
    }

    /// Whether each kept response (and so each replay) carries an
    /// [`Idempotency-Expires`](crate::header::IDEMPOTENCY_EXPIRES) header: the time, as an
    /// HTTP date, until which the key's answer is replayed (when the response was kept
    /// plus the store's result TTL). A client then knows how long it may retry with the
    /// key, and when a retry would run the request again. Default `false`.
    #[must_use]
    pub fn advertise_expiry(mut self, advertise: bool) -> Self {
        self.config.advertise_expiry = advertise;
        self
    }

    /// Validates the settings.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] naming the first setting out of range.
    pub fn build(self) -> Result<Config, ConfigError> {
        let c = self.config;
        let response = c.response_bytes_max.unwrap_or(Self::RESPONSE_BYTES_DEFAULT);
        for (name, value) in
            [("body_bytes_max", c.body_bytes_max), ("response_bytes_max", response)]
        {
            if value == 0 || value > Self::BYTES_LIMIT {
                let accepted = format!("between 1 and {} bytes", Self::BYTES_LIMIT);
                return Err(ConfigError::new(name, value, accepted));
            }
        }
        if c.waiters_max == 0 || c.waiters_max > Self::WAITERS_LIMIT {
            let accepted = format!("between 1 and {}", Self::WAITERS_LIMIT);
            return Err(ConfigError::new("waiters_max", c.waiters_max, accepted));
        }
        if let Some(wait) = c.wait.filter(|w| *w < Self::WAIT_MIN || *w > Self::WAIT_LIMIT) {
            let accepted = format!("between {:?} and {:?}", Self::WAIT_MIN, Self::WAIT_LIMIT);
            return Err(ConfigError::new("wait_for_first", wait, accepted));
        }
        let orphan = c.orphan_time_max;
        if orphan < Self::ORPHAN_TIME_MIN || orphan > Self::ORPHAN_TIME_LIMIT {
            let accepted =
                format!("between {:?} and {:?}", Self::ORPHAN_TIME_MIN, Self::ORPHAN_TIME_LIMIT);
            return Err(ConfigError::new("orphan_time_max", orphan, accepted));
        }
        if c.methods.is_empty() {
            return Err(ConfigError::new("methods", &c.methods, "at least one method"));
        }
        if let Some(name) = c.replay_headers.iter().find(|n| FRAMING.contains(&n.as_str())) {
            let accepted = "no header that frames the message (each response frames itself)";
            return Err(ConfigError::new("replay_headers", name, accepted));
        }
        Ok(c)
    }
}
