//! idem-core's integration tests: one binary, one module per concern.

mod conformance;
mod fingerprint;
mod key;
mod model;
