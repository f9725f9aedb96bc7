//! The conformance suite, run against [`MemoryStore`].

use std::sync::Arc;

use idem_core::{ManualClock, MemoryStore, StoreConfig};

fn memory(config: StoreConfig, clock: Arc<ManualClock>) -> MemoryStore<String> {
    MemoryStore::with_clock(config, clock)
}

idem_testkit::conformance_tests!(memory);
