//! idem-notify's integration tests: one binary, one module per concern.

mod behaviour;
mod hostile;
mod model;
mod shutdown_and_limits;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use idem_core::{ManualClock, MemoryStore, StoreConfig, Timestamp};
use idem_notify::{
    Channel, Config, ConfigBuilder, Notification, Notifier, Outcome, Provider, RetryPolicy,
    SimulatedProvider, Sleeper,
};

pub(crate) const LEASE: Duration = Duration::from_secs(60);

/// Records every wait instead of sleeping.
#[derive(Debug, Default)]
pub(crate) struct Recorder(pub(crate) Mutex<Vec<Duration>>);

impl Sleeper for Recorder {
    fn sleep(&self, duration: Duration) {
        self.0.lock().expect("not poisoned").push(duration);
    }
}

pub(crate) type TestNotifier = Notifier<SimulatedProvider, Arc<MemoryStore<Outcome>>>;

pub(crate) struct Setup<P: Provider = SimulatedProvider> {
    pub(crate) notifier: Notifier<P, Arc<MemoryStore<Outcome>>>,
    pub(crate) clock: Arc<ManualClock>,
    pub(crate) store: Arc<MemoryStore<Outcome>>,
    pub(crate) sleeps: Arc<Recorder>,
}

/// A notifier over `provider` on a memory store, the store and the notifier on one
/// manual clock, retries recorded rather than slept.
pub(crate) fn setup<P: Provider>(
    provider: P,
    tune: impl FnOnce(ConfigBuilder) -> ConfigBuilder,
) -> Setup<P> {
    let clock = Arc::new(ManualClock::new(Timestamp::from_millis(1_000_000)));
    let store = Arc::new(MemoryStore::with_clock(
        StoreConfig::builder().lease(LEASE).build().expect("valid"),
        clock.clone(),
    ));
    let sleeps = Arc::new(Recorder::default());
    let retry = RetryPolicy {
        base: Duration::from_millis(100),
        cap: Duration::from_secs(1),
        attempts_max: 4,
        seed: 7,
    };
    let builder =
        Config::builder().workers(1).retry(retry).sleeper(sleeps.clone()).clock(clock.clone());
    let config = tune(builder).build().expect("valid config");
    let notifier = Notifier::start(provider, store.clone(), config).expect("workers start");
    Setup { notifier, clock, store, sleeps }
}

/// How long a test waits for the workers before failing.
pub(crate) const WAIT: Duration = Duration::from_secs(10);

pub(crate) use idem_testkit::wait_until;

pub(crate) fn note(id: &str) -> Notification {
    Notification::new(id, "user:1", Channel::Email, "hello").expect("valid")
}

/// Drains the queue and stops the workers.
pub(crate) fn drain(n: &TestNotifier) {
    assert!(n.shutdown(Duration::from_secs(30)).drained);
}
