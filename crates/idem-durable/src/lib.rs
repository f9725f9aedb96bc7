//! What idem's durable backends share: the SQLite store, the PostgreSQL store and the
//! durable wallet each keep results on disk, and each must read back exactly what it
//! wrote, for the key it wrote it for, and answer a caller only once its write is durable.
//!
//! # Guarantee
//!
//! A stored result read back under its own key is the result that was written; read
//! under another key, or with a byte changed, it is refused as corrupt, never replayed
//! ([`result`]). Two SQL backends judge a stored row by the same rules ([`row`]). A
//! caller of the [group-commit writer](group_commit) is answered only after the group
//! holding its work committed, whether it blocks for the answer or awaits it; if the
//! commit failed, every caller of the group is told so and nothing of the group is
//! answered as done.
//!
//! # Examples
//!
//! ```
//! use idem_core::ScopedKey;
//! use idem_durable::result::{decode_result, encode_result};
//!
//! let key = ScopedKey::parse("tenant", "order-1")?;
//! let stored = encode_result(&key, &"ch_1".to_string(), 1024)?;
//! assert_eq!(decode_result::<String>(&key, &stored)?, "ch_1");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! A result type becomes storable by implementing [`Durable`]: the problem crates whose
//! results a durable store keeps do; their callers never need this crate.

pub mod codec;
pub mod group_commit;
pub mod result;
pub mod row;

pub use codec::{CodecError, Durable};
pub use result::{RESULT_BYTES_MAX_DEFAULT, RESULT_PREFIX, decode_result, encode_result};
