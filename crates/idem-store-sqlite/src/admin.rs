//! [`KeyAdmin`] and [`AsyncKeyAdmin`] for [`SqliteStore`]: an operator's inspect reads on
//! the reader connection, as a lookup does; a forget is one write on the writer thread,
//! which reads, judges and deletes the row in one transaction, so no claim, renewal or
//! completion lands between the judgement and the delete.

use idem_core::{
    AsyncKeyAdmin, Forgotten, KeyAdmin, KeyRecord, ScopedKey, StoreError, Timestamp,
    forget_decision,
};
use idem_durable::Durable;
use idem_durable::row::stored_record;
use rusqlite::{Connection, OptionalExtension, params};

use crate::{SqliteStore, WriteJob, exec, in_savepoint, row, storage};

/// The record of `key` at `now`, as `conn` sees it.
fn read_record(
    conn: &Connection,
    key: &ScopedKey,
    now: Timestamp,
) -> Result<Option<KeyRecord>, StoreError> {
    let found: Option<(Vec<u8>, i64, i64, i64)> = row(
        conn,
        "SELECT fingerprint, finished, lease_expires_at, expires_at FROM claims
            WHERE scope = ?1 AND key = ?2",
        params![key.scope().as_str(), key.key().as_str()],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
    )
    .optional()
    .map_err(storage)?;
    let Some((fingerprint, finished, lease_ms, expires_ms)) = found else { return Ok(None) };
    Ok(stored_record(key, &fingerprint, finished == 1, (lease_ms, expires_ms), now)?)
}

/// Removes the row of `key` if it is finished or pending, and counts it out.
fn forget_row(conn: &Connection, key: &ScopedKey, now: Timestamp) -> Result<Forgotten, StoreError> {
    let decision = forget_decision(read_record(conn, key, now)?, now);
    if let Forgotten::Removed(_) = decision {
        let scope_key = params![key.scope().as_str(), key.key().as_str()];
        exec(conn, "DELETE FROM claims WHERE scope = ?1 AND key = ?2", scope_key)
            .map_err(storage)?;
        exec(conn, "UPDATE meta SET records = records - 1 WHERE id = 1", []).map_err(storage)?;
    }
    Ok(decision)
}

fn forget_write(key: &ScopedKey) -> impl WriteJob<Forgotten> {
    let key = key.clone();
    in_savepoint(move |conn, now, _| forget_row(conn, &key, now), |_| true)
}

impl<R: Durable + Clone + Send> SqliteStore<R> {
    fn inspect_now(&self, key: &ScopedKey) -> Result<Option<KeyRecord>, StoreError> {
        let now = crate::now_of(self.clock.as_ref())?;
        read_record(&self.reader.lock(), key, now)
    }
}

impl<R: Durable + Clone + Send> KeyAdmin for SqliteStore<R> {
    fn inspect(&self, key: &ScopedKey) -> Result<Option<KeyRecord>, StoreError> {
        self.inspect_now(key)
    }

    fn forget(&self, key: &ScopedKey, who: &str, why: &str) -> Result<Forgotten, StoreError> {
        idem_core::trace::forgotten(key, who, why, self.write(forget_write(key)))
    }
}

impl<R: Durable + Clone + Send + Sync> AsyncKeyAdmin for SqliteStore<R> {
    async fn inspect(&self, key: &ScopedKey) -> Result<Option<KeyRecord>, StoreError> {
        self.inspect_now(key)
    }

    async fn forget(&self, key: &ScopedKey, who: &str, why: &str) -> Result<Forgotten, StoreError> {
        let answer = self.write_async(forget_write(key)).await;
        idem_core::trace::forgotten(key, who, why, answer)
    }
}
