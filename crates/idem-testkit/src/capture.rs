//! A `tracing` collector for tests (features `testkit` and `tracing`): it records every
//! event emitted on the calling thread while a closure runs, with the spans it ran in, so
//! a test can check what an operator would see.
//!
//! One global dispatcher, installed on first use, routes each event to the collector of
//! the thread that emitted it. A collector set per thread with `with_default` alone
//! misses events: `tracing` caches each callsite's interest when the callsite is first
//! registered, and a callsite another thread registered first (under no collector) could
//! be cached as never interesting, so a test running beside others saw nothing. The
//! global router asks, at every call, whether this thread is capturing.
//!
//! ```
//! use idem_testkit::capture::capture;
//!
//! // What a store's claim emits with idem-core's `tracing` feature on: an event in a span.
//! let ((), seen) = capture(|| {
//!     let _span = tracing::debug_span!("claim", scope = "shop").entered();
//!     tracing::debug!(token = 7, "acquired");
//! });
//! assert_eq!(seen[0].message, "acquired");
//! assert_eq!(seen[0].fields["token"], "7");
//! assert_eq!(seen[0].span_field("claim", "scope"), Some("shop"));
//! ```

use std::collections::BTreeMap;
use std::fmt;

pub use tracing::Level;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Metadata, Subscriber};

use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

/// The fields of an event or span, as text: `%` values by `Display`, others by `Debug`,
/// strings as they are.
pub type Fields = BTreeMap<String, String>;

/// One event a test saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// The event's level.
    pub level: Level,
    /// Its message.
    pub message: String,
    /// Its other fields.
    pub fields: Fields,
    /// The spans it ran in, outermost first: each span's name and fields.
    pub spans: Vec<(String, Fields)>,
}

impl Seen {
    /// The field `field` of the innermost span named `span` this event ran in.
    pub fn span_field(&self, span: &str, field: &str) -> Option<&str> {
        let (_, fields) = self.spans.iter().rev().find(|(name, _)| name == span)?;
        fields.get(field).map(String::as_str)
    }

    /// Every field value of the event and its spans, to check that none holds a payload.
    pub fn all_values(&self) -> impl Iterator<Item = &str> {
        let spans = self.spans.iter().flat_map(|(_, fields)| fields.values());
        self.fields.values().chain(spans).map(String::as_str).chain([self.message.as_str()])
    }
}

/// Runs `f` with a collector for this thread and returns what it saw.
pub fn capture<T>(f: impl FnOnce() -> T) -> (T, Vec<Seen>) {
    let collector = Arc::new(Collector::default());
    let previous = CAPTURING.with(|current| current.replace(Some(collector.clone())));
    // Restores the thread's previous collector even if `f` panics.
    struct Restore(Option<Arc<Collector>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            CAPTURING.with(|current| *current.borrow_mut() = self.0.take());
        }
    }
    let restore = Restore(previous);
    let result = if install_router() {
        // A callsite registered by another thread while the router was being installed
        // may still hold the interest (and level) it got from no subscriber at all: ask
        // again, now that the router answers for every callsite.
        tracing::callsite::rebuild_interest_cache();
        f()
    } else {
        // Another global subscriber was installed first: fall back to this thread's own.
        tracing::subscriber::with_default(Route, f)
    };
    drop(restore);
    let seen = std::mem::take(&mut collector.state.lock().seen);
    (result, seen)
}

thread_local! {
    /// The collector of the `capture` running on this thread, if any.
    static CAPTURING: std::cell::RefCell<Option<Arc<Collector>>> =
        const { std::cell::RefCell::new(None) };
}

/// Installs [`Route`] as the global dispatcher, once; whether it is the global one.
fn install_router() -> bool {
    static INSTALLED: OnceLock<bool> = OnceLock::new();
    *INSTALLED.get_or_init(|| tracing::subscriber::set_global_default(Route).is_ok())
}

/// The span id given to spans made while this thread captures nothing: ignored after.
const UNSEEN: u64 = u64::MAX;

/// The global subscriber: hands every call to the calling thread's collector, if any.
struct Route;

impl Route {
    fn with<T>(&self, f: impl FnOnce(&Collector) -> T) -> Option<T> {
        CAPTURING.with(|current| current.borrow().as_deref().map(f))
    }
}

impl Subscriber for Route {
    fn register_callsite(&self, _: &'static Metadata<'static>) -> Interest {
        // Asked again at every call (`enabled`): whether a thread captures changes.
        Interest::sometimes()
    }

    fn enabled(&self, _: &Metadata<'_>) -> bool {
        self.with(|_| ()).is_some()
    }

    fn new_span(&self, span: &Attributes<'_>) -> Id {
        self.with(|c| c.new_span(span)).unwrap_or_else(|| Id::from_u64(UNSEEN))
    }

    fn record(&self, span: &Id, values: &Record<'_>) {
        self.with(|c| c.record(span, values));
    }

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        self.with(|c| c.event(event));
    }

    fn enter(&self, span: &Id) {
        self.with(|c| c.enter(span));
    }

    fn exit(&self, span: &Id) {
        self.with(|c| c.exit(span));
    }
}

#[derive(Default)]
struct Collector {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    spans: Vec<(String, Fields)>,
    entered: Vec<u64>,
    seen: Vec<Seen>,
}

#[derive(Default)]
struct Text(Fields);

impl Visit for Text {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_string(), value.to_string());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(field.name().to_string(), format!("{value:?}"));
    }
}

/// What one `capture` saw; [`Route`] calls it on the capturing thread.
impl Collector {
    fn new_span(&self, span: &Attributes<'_>) -> Id {
        let mut fields = Text::default();
        span.record(&mut fields);
        let mut state = self.state.lock();
        state.spans.push((span.metadata().name().to_string(), fields.0));
        Id::from_u64(state.spans.len() as u64)
    }

    fn record(&self, span: &Id, values: &Record<'_>) {
        let mut fields = Text::default();
        values.record(&mut fields);
        let at = (span.into_u64() as usize).wrapping_sub(1);
        if let Some((_, known)) = self.state.lock().spans.get_mut(at) {
            known.extend(fields.0);
        }
    }

    fn event(&self, event: &Event<'_>) {
        let mut fields = Text::default();
        event.record(&mut fields);
        let message = fields.0.remove("message").unwrap_or_default();
        let mut state = self.state.lock();
        let spans = state.entered.iter().filter_map(|id| state.spans.get(*id as usize - 1));
        let spans = spans.cloned().collect();
        let level = *event.metadata().level();
        state.seen.push(Seen { level, message, fields: fields.0, spans });
    }

    fn enter(&self, span: &Id) {
        if span.into_u64() != UNSEEN {
            self.state.lock().entered.push(span.into_u64());
        }
    }

    fn exit(&self, span: &Id) {
        let mut state = self.state.lock();
        if let Some(at) = state.entered.iter().rposition(|id| *id == span.into_u64()) {
            state.entered.remove(at);
        }
    }
}
