//! What both stores are judged by ([`Settings`]), what they bind to the statements (the
//! statements' text is in the crate root) and how they read the rows that come back, so
//! that [`PgStore`](crate::PgStore) and [`AsyncPgStore`](crate::AsyncPgStore) write the
//! same rows and judge them alike: only the waiting differs.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use idem_core::{
    Claim, Clock, FencingToken, Fingerprint, Forgotten, KeyRecord, KeyState, Lease, PendingClaim,
    ScopedKey, StoreConfig, StoreError, Timestamp,
};
use idem_durable::row::stored_at;
use idem_durable::row::{StoredRow, claim_refused, pending_claim, row_state, stored_record};
use idem_durable::{Durable, encode_result};
use tokio_postgres::Row;

use crate::{PG_SCHEMA_VERSION, Param, PgError, StatementClock, Statements, span_ms};

/// A count or limit as a `BIGINT`.
fn bigint(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Refuses a namespace of another version (`schema` quoted, as the statements name it).
pub(crate) fn check_version(schema: &str, row: &Row) -> Result<(), StoreError> {
    let found: i32 = row.get(0);
    if found != PG_SCHEMA_VERSION {
        let schema = schema.trim_matches('"').to_string();
        return Err(PgError::SchemaVersion { schema, found }.into());
    }
    Ok(())
}

/// What every call of a store is judged by, alike in both stores: the statements of its
/// namespace, where it reads the time, and its limits. Each call takes the parameters
/// of its statements from here.
pub(crate) struct Settings {
    pub(crate) statements: Statements,
    clock: StatementClock,
    pub(crate) config: StoreConfig,
    /// The largest stored result, in bytes of its encoding.
    pub(crate) result_bytes_max: usize,
}

impl fmt::Debug for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Settings")
            .field("schema", &self.statements.schema)
            .field("clock", &self.clock)
            .field("config", &self.config)
            .field("result_bytes_max", &self.result_bytes_max)
            .finish_non_exhaustive()
    }
}

impl Settings {
    /// For namespace `schema` (already checked), reading the time from `clock` if given,
    /// else from the database; results up to the default limit.
    pub(crate) fn new(schema: &str, config: StoreConfig, clock: Option<Arc<dyn Clock>>) -> Self {
        Self {
            statements: Statements::new(schema),
            clock: StatementClock { clock },
            config,
            result_bytes_max: idem_durable::RESULT_BYTES_MAX_DEFAULT,
        }
    }

    /// For the claim of `key` and the reads of its row.
    pub(crate) fn claim<'a>(
        &self,
        key: &'a ScopedKey,
        fingerprint: &'a Fingerprint,
    ) -> ClaimParams<'a> {
        ClaimParams {
            scope: key.scope().as_str(),
            key: key.key().as_str(),
            fingerprint: &fingerprint.as_bytes()[..],
            lease_ms: span_ms(self.config.lease()),
            now: self.clock.now_param(),
        }
    }

    /// For the completion of `lease` with `result`, encoded within the limit, kept for
    /// the configured result lifetime.
    pub(crate) fn completion<'a, R: Durable>(
        &self,
        lease: &'a Lease,
        result: &R,
    ) -> Result<FencedParams<'a>, StoreError> {
        let bytes = encode_result(lease.key(), result, self.result_bytes_max)?;
        Ok(FencedParams::new(lease, self.config.result_ttl(), self.clock.now_param(), bytes))
    }

    /// For the renewal of `lease` by a whole lease.
    pub(crate) fn renewal<'a>(&self, lease: &'a Lease) -> FencedParams<'a> {
        FencedParams::new(lease, self.config.lease(), self.clock.now_param(), Vec::new())
    }

    /// For the release of `lease`.
    pub(crate) fn release<'a>(&self, lease: &'a Lease) -> FencedParams<'a> {
        FencedParams::new(lease, Duration::ZERO, None, Vec::new())
    }

    /// For an operator's read or forget of `key`.
    pub(crate) fn key<'a>(&self, key: &'a ScopedKey) -> KeyParams<'a> {
        KeyParams {
            scope: key.scope().as_str(),
            key: key.key().as_str(),
            now: self.clock.now_param(),
        }
    }

    /// For a sweep of at most the configured batch.
    pub(crate) fn sweep(&self) -> BatchParams {
        BatchParams { now: self.clock.now_param(), limit: bigint(self.config.sweep_batch_max()) }
    }

    /// For a list of at most `max` pending claims.
    pub(crate) fn pending(&self, max: usize) -> BatchParams {
        BatchParams { now: self.clock.now_param(), limit: bigint(max) }
    }
}

/// The parameters of the claim and of the reads of its row.
pub(crate) struct ClaimParams<'a> {
    scope: &'a str,
    key: &'a str,
    fingerprint: &'a [u8],
    lease_ms: i64,
    now: Option<i64>,
}

impl ClaimParams<'_> {
    /// For [`Statements::claim`].
    pub(crate) fn claim(&self) -> [Param<'_>; 5] {
        [&self.scope, &self.key, &self.fingerprint, &self.lease_ms, &self.now]
    }

    /// For [`Statements::inspect`] and [`Statements::lookup`].
    pub(crate) fn inspect(&self) -> [Param<'_>; 3] {
        [&self.scope, &self.key, &self.now]
    }

    /// For [`Statements::scope_in_flight`].
    pub(crate) fn scope(&self) -> [Param<'_>; 1] {
        [&self.scope]
    }
}

/// The parameters of an operator's read and forget of one key.
pub(crate) struct KeyParams<'a> {
    scope: &'a str,
    key: &'a str,
    now: Option<i64>,
}

impl KeyParams<'_> {
    /// For [`Statements::record`] and [`Statements::record_locked`].
    pub(crate) fn record(&self) -> [Param<'_>; 3] {
        [&self.scope, &self.key, &self.now]
    }

    /// For [`Statements::forget`].
    pub(crate) fn forget(&self) -> [Param<'_>; 2] {
        [&self.scope, &self.key]
    }
}

/// The parameters of a statement fenced by a lease's token: complete, renew, release.
pub(crate) struct FencedParams<'a> {
    scope: &'a str,
    key: &'a str,
    token: i64,
    /// The result's lifetime (complete) or the lease (renew), in milliseconds.
    span_ms: i64,
    now: Option<i64>,
    /// The encoded result (complete).
    result: Vec<u8>,
}

impl<'a> FencedParams<'a> {
    fn new(lease: &'a Lease, span: Duration, now: Option<i64>, result: Vec<u8>) -> Self {
        let (scope, key) = (lease.key().scope().as_str(), lease.key().key().as_str());
        // Tokens come from a BIGINT sequence: never past i64::MAX.
        let token = i64::try_from(lease.token().get()).unwrap_or(i64::MAX);
        Self { scope, key, token, span_ms: span_ms(span), now, result }
    }

    /// For [`Statements::release`].
    pub(crate) fn fence(&self) -> [Param<'_>; 3] {
        [&self.scope, &self.key, &self.token]
    }

    /// For [`Statements::renew`].
    pub(crate) fn renewal(&self) -> [Param<'_>; 5] {
        [&self.scope, &self.key, &self.token, &self.span_ms, &self.now]
    }

    /// For [`Statements::complete`].
    pub(crate) fn completion(&self) -> [Param<'_>; 6] {
        [&self.scope, &self.key, &self.token, &self.span_ms, &self.result, &self.now]
    }
}

/// The parameters of the sweep and the pending list: the time, and how many rows at most.
pub(crate) struct BatchParams {
    now: Option<i64>,
    limit: i64,
}

impl BatchParams {
    /// For [`Statements::sweep`] and [`Statements::pending`].
    pub(crate) fn list(&self) -> [Param<'_>; 2] {
        [&self.now, &self.limit]
    }
}

/// What the claim statement returned when it took the key.
#[derive(Debug)]
pub(crate) struct Taken {
    token: i64,
    recovered: bool,
    lease_expires_ms: i64,
    /// The record count after a new row was added; `None` for a takeover.
    records: Option<i64>,
    /// The time when the statement answered, after any wait on the record count.
    answered_ms: i64,
    /// Whether the claim locked the record count after its statement (a takeover checked
    /// against its scope's quota), and so may have waited there after `answered_ms`.
    count_locked_after: bool,
}

impl Taken {
    pub(crate) fn read(row: &Row) -> Self {
        Self {
            token: row.get(0),
            recovered: row.get(1),
            lease_expires_ms: row.get(3),
            records: row.get(4),
            answered_ms: row.get(5),
            count_locked_after: false,
        }
    }

    /// Whether the lease the claim wrote has lost more than a tenth of its length before
    /// the statement answered.
    ///
    /// RACE (a fresh claim behind another's uncommitted count): a new row's lease is
    /// counted from when the row is written; the claim then waits on the namespace's
    /// record count, which a claim whose session stalled before its commit holds until
    /// the server ends that session (5 s). The lease handed out would be short, or run
    /// out already, and the next claim would recover the key at once: two holders. Such a
    /// lease is renewed in the claim's own transaction, before anyone can see it. Test:
    /// `a_fresh_claim_that_waited_behind_another_gets_a_whole_lease`.
    /// A takeover that locked the record count after its statement (see
    /// [`counts_under_lock`](Self::counts_under_lock)) may have waited there as long, its
    /// lease already written: it is renewed whatever its statement's answer said.
    pub(crate) fn lease_cut_short(&self, config: &StoreConfig) -> bool {
        if self.count_locked_after {
            return true;
        }
        let lease = crate::span_ms(config.lease());
        let written_at = self.lease_expires_ms.saturating_sub(lease);
        self.answered_ms.saturating_sub(written_at) > lease / 10
    }

    /// The lease the claim holds.
    pub(crate) fn lease(&self, key: &ScopedKey) -> Lease {
        let token = FencingToken::new(u64::try_from(self.token).unwrap_or(0));
        Lease::new(key.clone(), token, stored_at(self.lease_expires_ms))
    }

    /// The claim, its lease renewed to `renewed`.
    pub(crate) fn renewed_to(self, renewed: &Lease) -> Self {
        let lease_expires_ms = i64::try_from(renewed.expires_at().as_millis()).unwrap_or(i64::MAX);
        Self { lease_expires_ms, ..self }
    }

    /// Refuses a new row past the store's capacity (the caller rolls the claim back).
    pub(crate) fn within_capacity(&self, config: &StoreConfig) -> Result<(), StoreError> {
        match self.records {
            Some(records) if records > bigint(config.capacity()) => {
                Err(StoreError::StoreFull { capacity: config.capacity() })
            }
            _ => Ok(()),
        }
    }

    /// Whether the claim must be checked against a scope quota: a new claim in flight
    /// where one is configured (a recovery takes over a claim already counted).
    pub(crate) fn needs_quota_check(&self, config: &StoreConfig) -> bool {
        !self.recovered && config.scope_in_flight_max().is_some()
    }

    /// Whether the claim must lock the record count before it counts its scope's claims in
    /// flight: a takeover of an expired result, which did not lock it (a new row did, in
    /// the claim statement).
    ///
    /// RACE (two takeovers in one scope): each counts the scope's claims in flight while
    /// the other's is not committed, and both pass a quota of one. Counting under the
    /// record count's lock, taken after the claim's own row as every claim takes them,
    /// puts the second count after the first commit. Test:
    /// `two_takeovers_in_one_scope_are_counted_against_its_quota_in_turn`.
    pub(crate) fn counts_under_lock(&self) -> bool {
        self.records.is_none()
    }

    /// Notes that the claim locked the record count after its statement.
    pub(crate) fn count_locked(&mut self) {
        self.count_locked_after = true;
    }

    /// The answer: the key acquired, or recovered from a holder whose lease ran out.
    pub(crate) fn into_claim<R>(self, key: &ScopedKey) -> Claim<R> {
        let lease = self.lease(key);
        if self.recovered { Claim::Recover(lease) } else { Claim::Acquired(lease) }
    }
}

/// Refuses a new claim in flight past the scope's quota, from the count
/// [`Statements::scope_in_flight`] read after the claim was written.
pub(crate) fn within_quota(
    row: &Row,
    key: &ScopedKey,
    config: &StoreConfig,
) -> Result<(), StoreError> {
    let Some(max) = config.scope_in_flight_max() else { return Ok(()) };
    let in_flight: i64 = row.get(0);
    if in_flight > bigint(max) {
        return Err(StoreError::ScopeQuota { scope: key.scope().clone(), in_flight_max: max });
    }
    Ok(())
}

/// Why the claim changed nothing, from the row [`Statements::inspect`] read.
pub(crate) fn refused(
    row: &Row,
    key: &ScopedKey,
    fingerprint: &Fingerprint,
    config: &StoreConfig,
) -> Result<Claim<Vec<u8>>, StoreError> {
    let stored: Vec<u8> = row.get(0);
    let stored = StoredRow {
        same_fingerprint: stored == fingerprint.as_bytes()[..],
        finished: row.get(1),
        lease_expires_ms: row.get(2),
        expires_ms: 0,
        result: row.get(3),
    };
    claim_refused(key, stored, stored_at(row.get(4)), config.lease())
}

/// The state of a key from the row [`Statements::lookup`] read.
pub(crate) fn looked_up<R: idem_durable::Durable>(
    row: &Row,
    key: &ScopedKey,
    fingerprint: &Fingerprint,
    config: &StoreConfig,
) -> Result<KeyState<R>, StoreError> {
    let now = stored_at(row.get(5));
    let Some(stored) = row.get::<_, Option<Vec<u8>>>(0) else { return Ok(KeyState::Absent) };
    let stored = StoredRow {
        same_fingerprint: stored == fingerprint.as_bytes()[..],
        finished: row.get(1),
        lease_expires_ms: row.get(2),
        expires_ms: row.get(3),
        result: row.get(4),
    };
    row_state(key, stored, now, config.lease())
}

/// A completion or release that changed `changed` rows: one, or the lease was lost.
pub(crate) fn settled(changed: u64, lease: &Lease) -> Result<(), StoreError> {
    if changed == 1 { Ok(()) } else { Err(lease_lost(lease)) }
}

/// The renewed lease from what [`Statements::renew`] returned (no row: the lease was
/// lost), its deadline the one the statement wrote.
pub(crate) fn renewed(row: Option<Row>, lease: &Lease) -> Result<Lease, StoreError> {
    match row {
        Some(row) => Ok(Lease::new(lease.key().clone(), lease.token(), stored_at(row.get(0)))),
        None => Err(lease_lost(lease)),
    }
}

fn lease_lost(lease: &Lease) -> StoreError {
    StoreError::LeaseLost { key: lease.key().clone(), token: lease.token() }
}

/// How many rows the release or the sweep deleted.
pub(crate) fn deleted(row: &Row) -> u64 {
    u64::try_from(row.get::<_, i64>(0)).unwrap_or(0)
}

/// The pending claims from the rows [`Statements::pending`] read.
pub(crate) fn pending(rows: &[Row]) -> Result<Vec<PendingClaim>, StoreError> {
    rows.iter()
        .map(|row| Ok(pending_claim(row.get(0), row.get(1), row.get(2), row.get(3))?))
        .collect()
}

/// An operator's record of `key` from the row [`Statements::record`] read (none: absent).
pub(crate) fn record(row: Option<&Row>, key: &ScopedKey) -> Result<Option<KeyRecord>, StoreError> {
    let Some(row) = row else { return Ok(None) };
    let deadlines = (row.get(2), row.get(3));
    Ok(stored_record(key, row.get(0), row.get(1), deadlines, stored_at(row.get(4)))?)
}

/// What a forget does with the row [`Statements::record_locked`] read and locked, judged
/// at the time that row was read at (`idem_core::forget_decision`).
pub(crate) fn forget_judged(row: Option<&Row>, key: &ScopedKey) -> Result<Forgotten, StoreError> {
    let now = row.map_or(Timestamp::ZERO, |row| stored_at(row.get(4)));
    Ok(idem_core::forget_decision(record(row, key)?, now))
}
