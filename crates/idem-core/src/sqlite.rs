//! [`SqliteStore`]: the claimed-key store in one SQLite file, durable through a crash.
//!
//! * WAL mode, `synchronous = FULL`: a claim, completion or release is one transaction,
//!   on disk (fsync'd) when the call returns, so an acknowledged call survives a process
//!   kill and a power loss. (`NORMAL` would survive a process kill but could lose the last
//!   commits on power loss; this store promises more, and pays for it in fsyncs.)
//! * The claim is one `INSERT ... ON CONFLICT DO UPDATE ... WHERE` statement: it inserts
//!   an absent key, or takes over an expired result or an expired lease (with the same
//!   fingerprint), raising the fencing token, in one atomic step. Only when it changes
//!   nothing does a read say why (in flight, replay, key reused), in the same transaction.
//! * Completion and release are one conditional statement each, on the fencing token.
//! * Several processes may open one file: SQLite's locking serialises writers
//!   (`busy_timeout` waits for the lock), and the claim statement gives exactly one owner.
//! * Results are stored with [`Durable`]'s versioned encoding, at most
//!   `result_bytes_max` bytes each.

use std::fmt;
use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use crate::clock::{Clock, SystemClock, Timestamp};
use crate::fingerprint::Fingerprint;
use crate::key::ScopedKey;
use crate::store::{Claim, FencingToken, KeyStore, Lease, PendingClaim, StoreConfig, StoreError};
use crate::sync::{Arc, Mutex};

/// The schema version this code writes and reads.
pub const SCHEMA_VERSION: i64 = 1;

/// The encoding of a stored result: a version byte, then `encode`'s bytes. Stable across
/// releases: a durable store keeps what it wrote.
pub trait Durable: Sized {
    /// The payload's bytes.
    fn encode(&self) -> Vec<u8>;
    /// Reads back what `encode` wrote.
    ///
    /// # Errors
    ///
    /// [`SqliteError::Corrupt`] if the bytes are not a valid encoding.
    fn decode(bytes: &[u8]) -> Result<Self, SqliteError>;
}

impl Durable for String {
    fn encode(&self) -> Vec<u8> {
        self.as_bytes().to_vec()
    }
    fn decode(bytes: &[u8]) -> Result<Self, SqliteError> {
        String::from_utf8(bytes.to_vec())
            .map_err(|_| SqliteError::Corrupt("result is not UTF-8".into()))
    }
}

impl Durable for u64 {
    fn encode(&self) -> Vec<u8> {
        self.to_be_bytes().to_vec()
    }
    fn decode(bytes: &[u8]) -> Result<Self, SqliteError> {
        let array: [u8; 8] =
            bytes.try_into().map_err(|_| SqliteError::Corrupt("u64 is 8 bytes".into()))?;
        Ok(u64::from_be_bytes(array))
    }
}

/// The version byte in front of every stored result.
const RESULT_ENCODING_V1: u8 = 1;

/// What went wrong in the SQLite store; wrapped in [`StoreError::Storage`].
#[derive(Debug, thiserror::Error)]
pub enum SqliteError {
    /// SQLite itself failed (I/O, a locked file past the busy timeout, a full disk).
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// The file was written by another schema version.
    #[error("store file has schema version {found}, this code reads version {SCHEMA_VERSION}")]
    SchemaVersion {
        /// The version found in the file.
        found: i64,
    },
    /// A result is larger than the configured limit.
    #[error("result of {len} bytes exceeds the limit of {max} bytes")]
    ResultTooLarge {
        /// The refused result's size.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// Stored bytes could not be read back.
    #[error("corrupt record: {0}")]
    Corrupt(String),
}

impl From<SqliteError> for StoreError {
    fn from(error: SqliteError) -> Self {
        StoreError::Storage(Box::new(error))
    }
}

fn storage(error: rusqlite::Error) -> StoreError {
    SqliteError::Sqlite(error).into()
}

/// The durable claimed-key store on one SQLite file.
pub struct SqliteStore<R> {
    conn: Mutex<Connection>,
    clock: Arc<dyn Clock>,
    config: StoreConfig,
    result_bytes_max: usize,
    _result: std::marker::PhantomData<fn() -> R>,
}

impl<R> fmt::Debug for SqliteStore<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteStore").field("config", &self.config).finish_non_exhaustive()
    }
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    schema_version INTEGER NOT NULL,
    next_token INTEGER NOT NULL,
    records INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS claims (
    scope TEXT NOT NULL,
    key TEXT NOT NULL,
    fingerprint BLOB NOT NULL,
    token INTEGER NOT NULL,
    finished INTEGER NOT NULL,
    lease_expires_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    result BLOB,
    recovered INTEGER NOT NULL DEFAULT 0,
    fresh INTEGER NOT NULL DEFAULT 1,
    PRIMARY KEY (scope, key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS claims_expiry ON claims (finished, expires_at);
CREATE INDEX IF NOT EXISTS claims_leases ON claims (finished, lease_expires_at);
";

impl<R: Durable + Clone + Send> SqliteStore<R> {
    /// Opens (creating if needed) the store at `path`, on the system clock.
    ///
    /// # Errors
    ///
    /// [`StoreError::Storage`] with [`SqliteError`]: the file cannot be opened, or has
    /// another schema version.
    pub fn open(path: &Path, config: StoreConfig) -> Result<Self, StoreError> {
        Self::open_with_clock(path, config, Arc::new(SystemClock))
    }

    /// Opens the store at `path`, reading time from `clock`.
    ///
    /// # Errors
    ///
    /// As [`open`](Self::open).
    pub fn open_with_clock(
        path: &Path,
        config: StoreConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, StoreError> {
        let conn = Connection::open(path).map_err(storage)?;
        conn.busy_timeout(Duration::from_secs(30)).map_err(storage)?;
        conn.pragma_update(None, "journal_mode", "WAL").map_err(storage)?;
        conn.pragma_update(None, "synchronous", "FULL").map_err(storage)?;
        conn.execute_batch(SCHEMA).map_err(storage)?;
        conn.execute(
            "INSERT OR IGNORE INTO meta (id, schema_version, next_token, records) VALUES (1, ?1, 1, 0)",
            params![SCHEMA_VERSION],
        )
        .map_err(storage)?;
        let found: i64 = conn
            .query_row("SELECT schema_version FROM meta WHERE id = 1", [], |r| r.get(0))
            .map_err(storage)?;
        if found != SCHEMA_VERSION {
            return Err(SqliteError::SchemaVersion { found }.into());
        }
        Ok(Self {
            conn: Mutex::new(conn),
            clock,
            config,
            result_bytes_max: 64 * 1024,
            _result: std::marker::PhantomData,
        })
    }

    /// Sets the largest stored result, in bytes (default 64 KiB).
    #[must_use]
    pub fn with_result_bytes_max(mut self, max: usize) -> Self {
        self.result_bytes_max = max;
        self
    }

    fn encode(&self, result: &R) -> Result<Vec<u8>, StoreError> {
        let payload = result.encode();
        if payload.len() > self.result_bytes_max {
            return Err(SqliteError::ResultTooLarge {
                len: payload.len(),
                max: self.result_bytes_max,
            }
            .into());
        }
        let mut bytes = Vec::with_capacity(payload.len() + 1);
        bytes.push(RESULT_ENCODING_V1);
        bytes.extend_from_slice(&payload);
        Ok(bytes)
    }

    fn decode(bytes: &[u8]) -> Result<R, StoreError> {
        match bytes.split_first() {
            Some((&RESULT_ENCODING_V1, payload)) => Ok(R::decode(payload)?),
            Some((version, _)) => {
                Err(SqliteError::Corrupt(format!("result encoding {version}")).into())
            }
            None => Err(SqliteError::Corrupt("empty result".into()).into()),
        }
    }

    fn ms(t: Timestamp) -> i64 {
        i64::try_from(t.as_millis()).unwrap_or(i64::MAX)
    }

    fn claim_tx(&self, key: &ScopedKey, fingerprint: &Fingerprint) -> Result<Claim<R>, StoreError> {
        let now = self.clock.now();
        let lease_expires_at = now.saturating_add(self.config.lease());
        let mut conn = self.conn.lock();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(storage)?;
        let (token, records): (i64, i64) = tx
            .query_row("UPDATE meta SET next_token = next_token + 1 WHERE id = 1 RETURNING next_token - 1, records", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .map_err(storage)?;
        // One statement: insert the absent key, or take over an expired result (any
        // fingerprint) or an expired lease (same fingerprint), raising the token.
        let taken: Option<(i64, i64)> = tx
            .query_row(
                "INSERT INTO claims (scope, key, fingerprint, token, finished, lease_expires_at, expires_at, result, recovered, fresh)
                 VALUES (?1, ?2, ?3, ?4, 0, ?5, 0, NULL, 0, 1)
                 ON CONFLICT (scope, key) DO UPDATE SET
                     fingerprint = excluded.fingerprint, token = excluded.token, finished = 0,
                     lease_expires_at = excluded.lease_expires_at, expires_at = 0, result = NULL,
                     recovered = 1 - claims.finished, fresh = 0
                 WHERE (claims.finished = 1 AND claims.expires_at <= ?6)
                    OR (claims.finished = 0 AND claims.lease_expires_at <= ?6 AND claims.fingerprint = excluded.fingerprint)
                 RETURNING recovered, fresh",
                params![
                    key.scope().as_str(),
                    key.key().as_str(),
                    &fingerprint.as_bytes()[..],
                    token,
                    Self::ms(lease_expires_at),
                    Self::ms(now)
                ],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(storage)?;
        let lease = Lease::new(key.clone(), FencingToken::new(token as u64), lease_expires_at);
        let answer = match taken {
            Some((_, 1)) if records >= self.config.capacity() as i64 => {
                // New key, store full: undo the insert by not committing.
                drop(tx);
                return Err(StoreError::StoreFull { capacity: self.config.capacity() });
            }
            Some((_, 1)) => {
                tx.execute("UPDATE meta SET records = records + 1 WHERE id = 1", [])
                    .map_err(storage)?;
                Claim::Acquired(lease)
            }
            Some((1, _)) => Claim::Recover(lease),
            Some(_) => Claim::Acquired(lease),
            None => {
                let (stored_fp, finished, lease_until, result): (Vec<u8>, i64, i64, Option<Vec<u8>>) = tx
                    .query_row(
                        "SELECT fingerprint, finished, lease_expires_at, result FROM claims WHERE scope = ?1 AND key = ?2",
                        params![key.scope().as_str(), key.key().as_str()],
                        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
                    )
                    .map_err(storage)?;
                if stored_fp != fingerprint.as_bytes()[..] {
                    return Err(StoreError::KeyReused { key: key.clone() });
                }
                if finished == 1 {
                    let bytes = result
                        .ok_or_else(|| SqliteError::Corrupt("finished without result".into()))?;
                    Claim::Replay(Self::decode(&bytes)?)
                } else {
                    let until = Timestamp::from_millis(u64::try_from(lease_until).unwrap_or(0));
                    Claim::InFlight { retry_after: until.saturating_duration_since(now) }
                }
            }
        };
        tx.commit().map_err(storage)?;
        Ok(answer)
    }

    fn settle(
        &self,
        lease: &Lease,
        sql: &str,
        extra: Option<(i64, Vec<u8>)>,
    ) -> Result<(), StoreError> {
        let key = lease.key();
        let token = lease.token().get() as i64;
        let conn = self.conn.lock();
        let changed = match extra {
            Some((expires_at, bytes)) => conn.execute(
                sql,
                params![key.scope().as_str(), key.key().as_str(), token, expires_at, bytes],
            ),
            None => conn.execute(sql, params![key.scope().as_str(), key.key().as_str(), token]),
        }
        .map_err(storage)?;
        if changed == 1 {
            Ok(())
        } else {
            Err(StoreError::LeaseLost { key: key.clone(), token: lease.token() })
        }
    }
}

impl<R: Durable + Clone + Send> KeyStore<R> for SqliteStore<R> {
    fn claim(&self, key: &ScopedKey, fingerprint: &Fingerprint) -> Result<Claim<R>, StoreError> {
        match self.claim_tx(key, fingerprint) {
            // A full store sweeps once, then decides again.
            Err(StoreError::StoreFull { .. }) if self.sweep()? > 0 => {
                self.claim_tx(key, fingerprint)
            }
            other => other,
        }
    }

    fn complete(&self, lease: &Lease, result: R) -> Result<(), StoreError> {
        let bytes = self.encode(&result)?;
        let expires_at = Self::ms(self.clock.now().saturating_add(self.config.result_ttl()));
        self.settle(
            lease,
            "UPDATE claims SET finished = 1, expires_at = ?4, result = ?5
             WHERE scope = ?1 AND key = ?2 AND token = ?3 AND finished = 0",
            Some((expires_at, bytes)),
        )
    }

    fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        let key = lease.key();
        let token = lease.token().get() as i64;
        let mut conn = self.conn.lock();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(storage)?;
        let changed = tx
            .execute(
                "DELETE FROM claims WHERE scope = ?1 AND key = ?2 AND token = ?3 AND finished = 0",
                params![key.scope().as_str(), key.key().as_str(), token],
            )
            .map_err(storage)?;
        if changed != 1 {
            return Err(StoreError::LeaseLost { key: key.clone(), token: lease.token() });
        }
        tx.execute("UPDATE meta SET records = records - 1 WHERE id = 1", []).map_err(storage)?;
        tx.commit().map_err(storage)
    }

    fn sweep(&self) -> Result<usize, StoreError> {
        let now = Self::ms(self.clock.now());
        let mut conn = self.conn.lock();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(storage)?;
        let removed = tx
            .execute(
                "DELETE FROM claims WHERE (scope, key) IN (
                     SELECT scope, key FROM claims WHERE finished = 1 AND expires_at <= ?1 LIMIT ?2)",
                params![now, self.config.sweep_batch_max() as i64],
            )
            .map_err(storage)?;
        tx.execute("UPDATE meta SET records = records - ?1 WHERE id = 1", params![removed as i64])
            .map_err(storage)?;
        tx.commit().map_err(storage)?;
        Ok(removed)
    }

    fn pending(&self, max: usize) -> Result<Vec<PendingClaim>, StoreError> {
        let now = Self::ms(self.clock.now());
        let conn = self.conn.lock();
        let mut statement = conn
            .prepare(
                "SELECT scope, key, fingerprint, lease_expires_at FROM claims
                 WHERE finished = 0 AND lease_expires_at <= ?1 LIMIT ?2",
            )
            .map_err(storage)?;
        let rows = statement
            .query_map(params![now, max as i64], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, Vec<u8>>(2)?,
                    r.get::<_, i64>(3)?,
                ))
            })
            .map_err(storage)?;
        let mut found = Vec::new();
        for row in rows {
            let (scope, key, fp, expired) = row.map_err(storage)?;
            let key = ScopedKey::parse(&scope, &key)
                .map_err(|e| SqliteError::Corrupt(format!("stored key: {e}")))?;
            let fp: [u8; 32] = fp
                .try_into()
                .map_err(|_| SqliteError::Corrupt("fingerprint is 32 bytes".into()))?;
            found.push(PendingClaim {
                key,
                fingerprint: Fingerprint::from_bytes(fp),
                lease_expired_at: Timestamp::from_millis(u64::try_from(expired).unwrap_or(0)),
            });
        }
        Ok(found)
    }
}

/// Rewrites the schema version of the file at `path` (tests of the version check only).
///
/// # Errors
///
/// [`SqliteError::Sqlite`] if the file cannot be opened or written.
#[doc(hidden)]
pub fn set_schema_version_for_tests(path: &Path, version: i64) -> Result<(), SqliteError> {
    let conn = Connection::open(path)?;
    conn.execute("UPDATE meta SET schema_version = ?1 WHERE id = 1", params![version])?;
    Ok(())
}
