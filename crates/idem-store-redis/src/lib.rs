//! The claimed-key store on Redis (or Valkey), shared by every process that reaches the
//! server: idem-core's `AsyncKeyStore` on the maintained `redis` client and its
//! reconnecting connection manager.
//!
//! Redis is where idempotency libraries most often ship double executions: a recovery
//! that overwrites a live in-progress record, a `SETEX` that replaces an in-flight one, a
//! lock deleted without checking who holds it, a key evicted under memory pressure, a
//! write lost on failover. This store is built against each:
//!
//! * **Every state change is one server-side script** (Lua, sent once, then called by its
//!   hash): claim, claim over an expired lease (same fingerprint, a higher fencing
//!   token), complete and release only by the holder of the current token, renew, sweep,
//!   forget. Redis runs a script atomically, so two instances racing on one key get
//!   exactly one owner.
//! * **Deadlines come from the server's clock** (`TIME`, read inside the script): every
//!   client agrees on when a lease ends, whatever its own clock says.
//! * **Finished results expire by Redis itself** at their TTL (`PEXPIREAT`); a record in
//!   flight never expires on its own (it waits for its holder, or for a recovery), and
//!   the capacity and per-scope quotas hold as in the other backends.
//! * **At connect the store reads the server's configuration** and refuses a replica (it
//!   writes to the primary only), a `maxmemory-policy` that can evict keys (a live record
//!   evicted is a repeat executed), and a server without an append-only file unless the
//!   caller accepts that a restart may forget keys ([`RedisOptions::restart_may_forget`]).
//! * **Fencing tokens only grow**, also across a namespace dropped or a restart that
//!   forgot the counter: a counter created afresh starts at the server's time in
//!   microseconds, above every token handed out before.
//! * **Replicas**: with [`RedisOptions::wait_for_replicas`], each change is followed by
//!   `WAIT` on the same connection, one of its own ([`REPLICA_WAITS_MAX`] at once), so that
//!   no other call waits behind it; a change fewer replicas acknowledged is an error.
//!
//! What each server setting survives (a process kill, a power loss, a failover) is in
//! `docs/durability.md`; in short: `appendfsync always` loses no acknowledged change to a
//! kill or a power cut, `everysec` up to a second of them, and a failover can lose what
//! `WAIT` did not confirm.
//!
//! # Guarantee
//!
//! However many processes share one namespace, a key has at most one owner at a time, a
//! stale lease's completion or release is refused by its fencing token, and every
//! deadline is judged by the server's clock, read by the script that writes.
//!
//! # Examples
//!
//! ```no_run
//! use idem_core::{AsyncKeyStore, Claim, Fingerprint, ScopedKey, StoreConfig};
//! use idem_store_redis::RedisStore;
//!
//! # async fn service() -> Result<(), Box<dyn std::error::Error>> {
//! let store =
//!     RedisStore::<String>::connect("redis://127.0.0.1:6379", "shop", StoreConfig::default())
//!         .await?;
//! let key = ScopedKey::parse("customer:7", "order-1")?;
//! let request = Fingerprint::builder("order").u64("amount_minor", 1050).finish();
//! if let Claim::Acquired(lease) = store.claim(&key, &request).await? {
//!     // ... charge exactly here ...
//!     store.complete(&lease, "ch_1".to_string()).await?;
//! }
//! // Any process on the same namespace now replays it.
//! assert_eq!(store.claim(&key, &request).await?, Claim::Replay("ch_1".to_string()));
//! # Ok(())
//! # }
//! ```
//!
//! # Features
//!
//! `tracing` (off by default): the `claim` and `settle` events every store emits (see
//! `idem_core::trace`).

mod admin;
mod keys;
mod lanes;
mod reply;
mod scripts;
mod server;
mod store;

pub use lanes::REPLICA_WAITS_MAX;
pub use server::ServerDurability;
pub use store::{
    CONNECT_TIMEOUT, PENDING_BATCH_MAX, RESPONSE_TIMEOUT, RedisOptions, RedisStore, Replicas,
};

/// The client, re-exported so that a caller names its types (a URL's connection info, an
/// error) with the same version.
pub use redis;

use idem_core::StoreError;

/// What went wrong with Redis; wrapped in [`StoreError::Storage`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RedisError {
    /// The server failed, timed out, or could not be reached (the client's message, with
    /// the server's where it sent one).
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    /// The namespace prefix is not one this store accepts.
    #[error("namespace {prefix:?} {reason}")]
    Prefix {
        /// The refused prefix.
        prefix: String,
        /// What is wrong with it, and what is accepted.
        reason: &'static str,
    },
    /// The server may evict keys under memory pressure: a record evicted is a key
    /// forgotten while its holder runs, or a replay lost.
    #[error(
        "maxmemory-policy is {policy}: Redis may evict a live record and a repeat would run \
         again; set `maxmemory-policy noeviction` (a full server then refuses writes, which \
         the store reports)"
    )]
    EvictionPolicy {
        /// The server's policy.
        policy: String,
    },
    /// The server keeps no append-only file: a restart loses every record written since
    /// its last snapshot, and repeats of those keys run again.
    #[error(
        "the server has appendonly {appendonly}: a restart would forget keys; set \
         `appendonly yes` (with `appendfsync always` to lose nothing to a crash), or accept \
         it with RedisOptions::restart_may_forget"
    )]
    NoPersistence {
        /// The server's `appendonly` setting.
        appendonly: String,
    },
    /// The server is a replica: a store writes to the primary only.
    #[error(
        "the server is a {role}, not the primary: connect to the primary (a replica that \
         accepts writes keeps them to itself, and two stores would each own a key)"
    )]
    NotPrimary {
        /// The server's role (`slave`, in Redis's words).
        role: String,
    },
    /// `CONFIG GET` was refused (a managed server that renames or forbids it), so the
    /// eviction policy and persistence cannot be checked.
    #[error(
        "cannot read the server's configuration ({0}); check maxmemory-policy and appendonly \
         by hand, then connect with RedisOptions::server_checked_by_operator"
    )]
    ConfigUnreadable(redis::RedisError),
    /// Fewer replicas acknowledged a change than [`RedisOptions::wait_for_replicas`] asks:
    /// the change is on the primary, but a failover now may lose it. Whether it survives
    /// is unknown, as for any storage failure.
    #[error("{acked} of {wanted} replicas acknowledged the change within {timeout_ms} ms")]
    NotReplicated {
        /// How many replicas acknowledged it.
        acked: i64,
        /// How many were asked for.
        wanted: usize,
        /// How long the store waited.
        timeout_ms: u64,
    },
    /// The store's largest result, with the 5 bytes its encoding adds, is past the largest
    /// argument the server takes (`proto-max-bulk-len`): a result the store promised to
    /// keep would be refused at `complete`.
    #[error(
        "result_bytes_max is {result_bytes_max} bytes (and 5 of encoding), past the server's \
         proto-max-bulk-len ({bulk_max}): lower RedisOptions::result_bytes_max, or raise \
         proto-max-bulk-len"
    )]
    ResultsPastTheServer {
        /// The store's largest result.
        result_bytes_max: usize,
        /// The server's `proto-max-bulk-len`.
        bulk_max: u64,
    },
    /// No answer within the call's bound: the server is down, restarting or hung (the
    /// connection manager may still be reconnecting). Whether the call took effect is
    /// unknown, as for any storage failure.
    #[error("redis: no answer within {after:?} ({call}); the call's outcome is unknown")]
    TimedOut {
        /// What was asked (a script's name, a connect).
        call: &'static str,
        /// The bound that ran out.
        after: std::time::Duration,
    },
    /// A script answered something this version does not read (another version's
    /// scripts on the same namespace, or a record changed by hand).
    #[error("unexpected reply from the server: {0}")]
    Reply(String),
}

impl From<RedisError> for StoreError {
    fn from(error: RedisError) -> Self {
        StoreError::Storage(Box::new(error))
    }
}

/// A client error as a store error.
pub(crate) fn redis_error(error: redis::RedisError) -> StoreError {
    RedisError::Redis(error).into()
}
