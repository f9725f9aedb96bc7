//! idem-durable's integration tests: one binary, one module per concern.

mod group_commit;
mod submit_async;
