//! [`AsyncKeyAdmin`] for [`RedisStore`]: an operator's inspect is one read; a forget is
//! one script that judges the record and deletes it only if it is finished or pending.
//!
//! RACE (forget against the holder, across clients): a holder renews while an operator
//! forgets. Redis runs the two scripts one after the other, never interleaved: either the
//! renewal runs first and the forget sees the lease live (it refuses), or the forget runs
//! first and the renewal finds no record (its lease is lost). Covered by the conformance
//! case `forget_of_a_pending_claim_fences_its_holder` on a real server.

use std::time::Duration;

use idem_core::{AsyncKeyAdmin, Forgotten, KeyRecord, ScopedKey, StoreError};
use idem_durable::Durable;
use idem_durable::row::{stored_at, stored_record};

use crate::keys::Keys;
use crate::reply::Reply;
use crate::store::Stored;
use crate::{RedisError, RedisStore};

impl<R: Durable + Clone + Send + Sync> RedisStore<R> {
    async fn forget_now(&self, key: &ScopedKey) -> Result<Forgotten, StoreError> {
        let (keys, member) = (self.keys(), Keys::member(key));
        let mut invocation = self.scripts().forget.prepare_invoke();
        invocation
            .key(keys.record(&member))
            .key(&keys.leases)
            .key(&keys.results)
            .key(keys.quota(key.scope()))
            .arg(self.time())
            .arg(&member);
        let (value, acked) = self.run(&invocation, true).await?;
        let mut reply = Reply::new(value, "forget");
        let status = reply.text()?;
        let now = reply.int()?;
        match status.as_str() {
            "absent" => Ok(Forgotten::Absent),
            "live" => {
                let until = reply.int()?;
                let left = Duration::from_millis(u64::try_from(until - now).unwrap_or(0));
                Ok(Forgotten::HolderLive { lease_expires_at: stored_at(until), retry_after: left })
            }
            "removed" => {
                let s = Stored::read(&mut reply)?;
                let deadlines = (s.lease_ms, s.expires_ms);
                let record =
                    stored_record(key, &s.fingerprint, s.finished, deadlines, stored_at(now))?;
                self.replicated(acked)?;
                let record = record
                    .ok_or_else(|| RedisError::Reply("forget removed an expired record".into()))?;
                Ok(Forgotten::Removed(record))
            }
            other => Err(RedisError::Reply(format!("forget answered {other:?}")).into()),
        }
    }
}

impl<R: Durable + Clone + Send + Sync> AsyncKeyAdmin for RedisStore<R> {
    async fn inspect(&self, key: &ScopedKey) -> Result<Option<KeyRecord>, StoreError> {
        let (now, stored) = self.read(key, false).await?;
        let Some(s) = stored else { return Ok(None) };
        let deadlines = (s.lease_ms, s.expires_ms);
        Ok(stored_record(key, &s.fingerprint, s.finished, deadlines, stored_at(now))?)
    }

    async fn forget(&self, key: &ScopedKey, who: &str, why: &str) -> Result<Forgotten, StoreError> {
        let answer = self.forget_now(key).await;
        idem_core::trace::forgotten(key, who, why, answer)
    }
}
