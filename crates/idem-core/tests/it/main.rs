//! idem-core's integration tests: one binary, one module per concern.

mod bounded;
mod config;
mod conformance;
mod fingerprint;
mod key;
mod model;
mod quota;
mod stress;
#[cfg(feature = "tracing")]
mod tracing;
