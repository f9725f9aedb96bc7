//! A `tracing` collector for tests (features `testkit` and `tracing`): it records every
//! event emitted on the calling thread while a closure runs, with the spans it ran in, so
//! a test can check what an operator would see.
//!
//! ```
//! use idem_core::testkit::capture::capture;
//! use idem_core::{Claim, Fingerprint, KeyStore, MemoryStore, ScopedKey, StoreConfig};
//!
//! let store = MemoryStore::<u32>::new(StoreConfig::default());
//! let key = ScopedKey::parse("shop", "order-1")?;
//! let fp = Fingerprint::builder("order").u64("amount", 10).finish();
//! let (_, seen) = capture(|| store.claim(&key, &fp));
//! assert_eq!(seen[0].message, "acquired");
//! assert_eq!(seen[0].span_field("claim", "scope"), Some("shop"));
//! # Ok::<(), idem_core::KeyError>(())
//! ```

use std::collections::BTreeMap;
use std::fmt;

pub use tracing::Level;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Metadata, Subscriber};

use crate::sync::{Arc, Mutex};

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

/// Runs `f` with a collector as this thread's default and returns what it saw.
pub fn capture<T>(f: impl FnOnce() -> T) -> (T, Vec<Seen>) {
    let collector = Arc::new(Collector::default());
    let result = tracing::subscriber::with_default(collector.clone(), f);
    let seen = std::mem::take(&mut collector.state.lock().seen);
    (result, seen)
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

impl Subscriber for Collector {
    fn register_callsite(&self, _: &'static Metadata<'static>) -> Interest {
        Interest::always()
    }

    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }

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
        if let Some((_, known)) = self.state.lock().spans.get_mut(span.into_u64() as usize - 1) {
            known.extend(fields.0);
        }
    }

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let mut fields = Text::default();
        event.record(&mut fields);
        let message = fields.0.remove("message").unwrap_or_default();
        let mut state = self.state.lock();
        let spans = state.entered.iter().map(|id| state.spans[*id as usize - 1].clone()).collect();
        let level = *event.metadata().level();
        state.seen.push(Seen { level, message, fields: fields.0, spans });
    }

    fn enter(&self, span: &Id) {
        self.state.lock().entered.push(span.into_u64());
    }

    fn exit(&self, span: &Id) {
        let mut state = self.state.lock();
        if let Some(at) = state.entered.iter().rposition(|id| *id == span.into_u64()) {
            state.entered.remove(at);
        }
    }
}
