//! idem-core's integration tests: one binary, one module per concern.

mod bounded;
mod config;
mod conformance;
mod fingerprint;
mod key;
mod lagging;
mod model;
mod quota;
mod stress;
#[cfg(feature = "tracing")]
mod tracing;
