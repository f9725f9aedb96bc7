//! [`KeyAdmin`] for [`PgStore`] and [`AsyncPgStore`]: an operator's inspect is one read;
//! a forget is one transaction that locks the row (`SELECT ... FOR UPDATE`), judges it,
//! and deletes it only if it is finished or pending, so no claim, renewal or completion
//! of another session lands between the judgement and the delete: they wait for the
//! row's lock, and then find the key absent.
//!
//! RACE (forget against the holder, across sessions): a holder renews while an operator
//! forgets. Either the renewal commits first, and the locked read sees the lease live
//! (the forget refuses), or the forget holds the row first, and the renewal then finds
//! no row (its lease is lost). The time the forget judges by is its transaction's start,
//! before any wait for the lock: a lease that ran out while it waited is still judged
//! live, the safe side. Covered by the conformance case
//! `forget_of_a_pending_claim_fences_its_holder` on a real server.

use idem_core::{AsyncKeyAdmin, Forgotten, KeyAdmin, KeyRecord, ScopedKey, StoreError};
use idem_durable::Durable;

use crate::{AsyncPgStore, PgStore, pg, rows};

impl<R: Durable + Clone + Send> KeyAdmin for PgStore<R> {
    fn inspect(&self, key: &ScopedKey) -> Result<Option<KeyRecord>, StoreError> {
        let params = self.settings.key(key);
        let record = &self.settings.statements.record;
        let row =
            self.with_client(async |c| c.query_opt(record, &params.record()).await.map_err(pg))?;
        rows::record(row.as_ref(), key)
    }

    fn forget(&self, key: &ScopedKey, who: &str, why: &str) -> Result<Forgotten, StoreError> {
        let (st, params) = (&self.settings.statements, self.settings.key(key));
        let answer = self.with_client(async |client| {
            let tx = client.transaction().await.map_err(pg)?;
            let row = tx.query_opt(&st.record_locked, &params.record()).await.map_err(pg)?;
            let decision = rows::forget_judged(row.as_ref(), key)?;
            if let Forgotten::Removed(_) = decision {
                tx.execute(&st.forget, &params.forget()).await.map_err(pg)?;
            }
            tx.commit().await.map_err(pg)?;
            Ok(decision)
        });
        idem_core::trace::forgotten(key, who, why, answer)
    }
}

impl<R: Durable + Clone + Send + Sync> AsyncPgStore<R> {
    async fn forget_now(&self, key: &ScopedKey) -> Result<Forgotten, StoreError> {
        let (st, params) = (&self.settings.statements, self.settings.key(key));
        let mut client = self.connection().await?;
        let tx = client.transaction().await.map_err(pg)?;
        let locked = tx.prepare_cached(&st.record_locked).await.map_err(pg)?;
        let row = tx.query_opt(&locked, &params.record()).await.map_err(pg)?;
        let decision = rows::forget_judged(row.as_ref(), key)?;
        if let Forgotten::Removed(_) = decision {
            let forget = tx.prepare_cached(&st.forget).await.map_err(pg)?;
            tx.execute(&forget, &params.forget()).await.map_err(pg)?;
        }
        tx.commit().await.map_err(pg)?;
        Ok(decision)
    }
}

impl<R: Durable + Clone + Send + Sync> AsyncKeyAdmin for AsyncPgStore<R> {
    async fn inspect(&self, key: &ScopedKey) -> Result<Option<KeyRecord>, StoreError> {
        let params = self.settings.key(key);
        let record = params.record();
        let row = self.query_opt(&self.settings.statements.record, &record);
        rows::record(self.bounded(row).await?.as_ref(), key)
    }

    async fn forget(&self, key: &ScopedKey, who: &str, why: &str) -> Result<Forgotten, StoreError> {
        let answer = self.bounded(self.forget_now(key)).await;
        idem_core::trace::forgotten(key, who, why, answer)
    }
}
