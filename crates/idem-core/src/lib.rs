//! The shared core of idem: validated keys, request fingerprints, a clock, and the
//! claimed-key store.
//!
//! A retried call (a double click, a client retrying a timeout, a redelivered message, a
//! restarted process) must not perform its side effect twice. The mechanism shared by the
//! payment processor and the notification service is the *claimed key*: before acting,
//! claim the caller's idempotency key; after acting, store the result under the key; on a
//! repeat, replay the stored result instead of acting again.
//!
//! # Guarantee
//!
//! For each [`ScopedKey`], at most one caller at a time holds a live lease, and once a
//! lease is completed every later claim with the same fingerprint replays that one result
//! until its TTL ends; a claim with another fingerprint is refused, never answered with
//! someone else's result.
//!
//! # Examples
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use idem_core::{Claim, Fingerprint, KeyStore, ManualClock, MemoryStore, ScopedKey,
//!                 StoreConfig, StoreError, Timestamp};
//!
//! let clock = Arc::new(ManualClock::new(Timestamp::from_millis(0)));
//! let store = MemoryStore::<u64>::with_clock(StoreConfig::default(), clock.clone());
//! let key = ScopedKey::parse("tenant:acme", "invoice-77")?;
//! let request = Fingerprint::builder("invoice").u64("amount_minor", 9_900).finish();
//!
//! // The first attempt claims the key and acts.
//! let Claim::Acquired(lease) = store.claim(&key, &request)? else { panic!("new key") };
//! // A concurrent retry is told to come back later.
//! assert!(matches!(store.claim(&key, &request)?, Claim::InFlight { .. }));
//! store.complete(&lease, 4242)?; // the id of the invoice we created
//! // Every retry now gets the original answer.
//! assert_eq!(store.claim(&key, &request)?, Claim::Replay(4242));
//! // The same key for a different request is refused.
//! let other = Fingerprint::builder("invoice").u64("amount_minor", 1).finish();
//! assert!(matches!(store.claim(&key, &other), Err(StoreError::KeyReused { .. })));
//! // After the result TTL, the key is forgotten.
//! clock.advance(StoreConfig::RESULT_TTL_DEFAULT);
//! assert!(matches!(store.claim(&key, &other)?, Claim::Acquired(_)));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Which operations need a key
//!
//! * Idempotent by their shape, no key needed: [`KeyStore::sweep`], reading a key's state
//!   with [`KeyStore::lookup`] (a read: it leaves no record and recovers nothing, where a
//!   claim of an absent key would acquire it), and every constructor and validator here.
//! * Needs a key: any operation with a side effect outside the store. The **caller**
//!   generates the key, once per intended operation and as close to the user's intent as
//!   possible (the checkout page, not the HTTP client), and sends the same key on every
//!   retry.
//! * Remembered for: the result TTL after completion (default 24 hours), and for as long
//!   as a claim is in flight (an in-flight claim is never forgotten, even with its lease
//!   run out, because its side effect may have happened).
//!
//! # The lease and the fencing token
//!
//! A claim hands out a [`Lease`] for [`StoreConfig::lease`] (default 30 seconds). If its
//! holder crashes or hangs, the next claim after the lease runs out gets
//! [`Claim::Recover`] with a higher [`FencingToken`]: it must check whether the side
//! effect happened before acting. The old holder's `complete` or `release` is then
//! refused with [`StoreError::LeaseLost`] and changes nothing.
//!
//! # Backends
//!
//! [`MemoryStore`] is the embedded default. The durable store on one SQLite file and the
//! store shared through PostgreSQL are adapter crates of their own (`idem-store-sqlite`,
//! `idem-store-postgres`) that depend on this one. A backend implements [`KeyStore`],
//! keeps its results with the `idem-durable` crate (what makes a result storable, its
//! checksummed encoding, the group-commit writer), and runs the conformance suite of the
//! `idem-testkit` crate against itself with its `conformance_tests!` macro.
//!
//! # Features
//!
//! `tracing` (off by default): the stores' `claim` and `settle` spans and their events
//! (replay, in flight, recover, key reused, lease lost), through [`trace`]; free when off.

mod admin;
mod async_store;
mod clock;
mod fingerprint;
mod key;
mod memory;
mod payload;
mod store;
mod sync;
pub mod trace;

pub use admin::{
    AsyncKeyAdmin, Forgotten, KeyAdmin, KeyRecord, RecordState, forget_decision, record_state,
};
pub use async_store::{AsyncKeyStore, Timer};
pub use clock::{Clock, ManualClock, SystemClock, Timestamp};
pub use fingerprint::{Fingerprint, FingerprintBuilder};
pub use key::{
    IDEMPOTENCY_KEY_HEADER, IDEMPOTENT_REPLAYED_HEADER, IdempotencyKey, KEY_LEN_MAX, KeyError,
    QuotedKeyError, Scope, ScopedKey, ScopedKeyError, key_text_of_header,
};
pub use memory::{MemoryStore, StoreStats};
pub use payload::{PAYLOAD_DROPS_MAX, drop_panic_payload};
pub use store::{
    Claim, ConfigError, FencingToken, KeyState, KeyStore, Lease, PendingClaim, StoreConfig,
    StoreConfigBuilder, StoreError, WAIT_PAUSE_FIRST, WAIT_PAUSE_MAX, next_wait_pause,
};
