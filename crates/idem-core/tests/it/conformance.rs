//! The conformance suite, run against [`MemoryStore`].

use std::sync::Arc;

use idem_core::{ManualClock, MemoryStore, StoreConfig};

fn memory(config: StoreConfig, clock: Arc<ManualClock>) -> MemoryStore<String> {
    MemoryStore::with_clock(config, clock)
}

idem_testkit::conformance_tests!(memory);

/// The same suite through the async contract: every call awaited.
mod through_the_async_contract {
    use super::memory;

    idem_testkit::async_conformance_tests!(memory);
}
