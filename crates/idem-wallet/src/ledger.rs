//! The ledger: a single-threaded state machine that applies batches of accounts and
//! transfers. `Wallet` (in `wallet.rs`) shares it between threads.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;

use hashbrown::{HashMap, HashSet};
use idem_core::Clock;

use crate::query::{
    AccountBalance, AccountFilter, AccountIndex, Bounds, FieldIndex, Fields, FilterError,
    QueryFilter, select,
};
use crate::types::{
    AMOUNT_MAX, Account, AccountFlags, AccountId, AccountResult, NewAccount, PendingState, Results,
    StoredTransfer, Transfer, TransferFlags, TransferId, TransferResult,
};

/// The most events in one batch (TigerBeetle's figure).
pub const BATCH_MAX: usize = 8189;

/// Capacities; a full ledger answers `AccountsFull` / `TransfersFull` per event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The most accounts.
    pub accounts_max: usize,
    /// The most transfers remembered (applied or failed).
    pub transfers_max: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self { accounts_max: 1 << 20, transfers_max: 1 << 24 }
    }
}

/// How many transfer ids a ledger remembers, from [`Ledger::remembered`]; together they
/// count against [`Limits::transfers_max`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Remembered {
    /// Transfers applied: a repeat of one is answered as existing, never applied again.
    pub transfers: usize,
    /// Ids of transfers that failed: a repeat of one is answered
    /// [`IdAlreadyFailed`](crate::TransferResult::IdAlreadyFailed).
    pub failed: usize,
    /// Timeouts of pending transfers the ledger watches, until each comes (one whose
    /// transfer was posted or voided meanwhile is dropped then). Bounded by the pending
    /// transfers with a timeout ever applied; a linked chain rolled back adds none.
    pub timeouts: usize,
}

/// A batch was refused as a whole; nothing in it was applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BatchError {
    /// More than [`BATCH_MAX`] events.
    #[error(
        "batch of {len} events exceeds the limit of {BATCH_MAX}: split it into smaller batches"
    )]
    TooLarge {
        /// The refused batch's length.
        len: usize,
    },
}

/// The found answers for a batch of ids, refusing a batch over [`BATCH_MAX`].
fn lookup<T>(ids: &[u128], find: impl Fn(u128) -> Option<T>) -> Result<Vec<T>, BatchError> {
    if ids.len() > BATCH_MAX {
        return Err(BatchError::TooLarge { len: ids.len() });
    }
    Ok(ids.iter().filter_map(|id| find(*id)).collect())
}

/// A batch's answers so far: one result and one timestamp per event.
type Answers = (Vec<TransferResult>, Vec<u64>);

/// An undo record: one change, recorded so a failed linked chain can be rolled back.
#[derive(Debug)]
enum Undo {
    /// An account as it was before the chain changed it.
    Account(Account),
    /// A transfer the chain stored (the arena's last).
    Transfer(TransferId),
    /// A pending transfer the chain settled, and its state before.
    Pending(TransferId, PendingState),
}

/// The in-memory ledger. Every method runs to completion; `Wallet` serialises callers.
#[derive(Debug)]
pub struct Ledger {
    accounts: HashMap<AccountId, Account>,
    /// Account ids in creation (timestamp) order: an account's position.
    account_order: Vec<AccountId>,
    /// Accounts by user data, ledger and code (positions in `account_order`).
    account_fields: FieldIndex,
    transfers: TransferArena,
    /// Transfers by user data, ledger and code (positions in the arena).
    transfer_fields: FieldIndex,
    /// Per account, the transfers that touch it and, for `HISTORY` accounts, the balances.
    by_account: AccountIndex,
    failed: HashSet<TransferId>,
    /// Pending transfers with a timeout, as (expiry ms, id, timestamp). The timestamp names
    /// the exact transfer: an entry left by a rolled-back chain must not expire a later
    /// transfer that reused the id.
    expiry: BinaryHeap<Reverse<(u64, TransferId, u64)>>,
    limits: Limits,
    clock: Arc<dyn Clock>,
    last_timestamp: u64,
    /// The clock, read once per batch (milliseconds).
    batch_now_ms: u64,
    /// Undo records of the linked chain being applied, for its rollback; empty otherwise.
    undo: Vec<Undo>,
    /// Whether changes get an undo record (inside a linked chain).
    recording_undo: bool,
    /// The timeouts of the pending transfers the chain being applied created: watched
    /// (moved to `expiry`) once the chain stands, dropped if it rolls back.
    chain_expiry: Vec<Reverse<(u64, TransferId, u64)>>,
}

impl Ledger {
    /// An empty ledger reading time from `clock` (timestamps and pending timeouts).
    pub fn new(limits: Limits, clock: Arc<dyn Clock>) -> Self {
        Self {
            accounts: HashMap::new(),
            account_order: Vec::new(),
            account_fields: FieldIndex::default(),
            transfers: TransferArena::default(),
            transfer_fields: FieldIndex::default(),
            by_account: AccountIndex::default(),
            failed: HashSet::new(),
            expiry: BinaryHeap::new(),
            limits,
            clock,
            last_timestamp: 0,
            batch_now_ms: 0,
            undo: Vec::new(),
            recording_undo: false,
            chain_expiry: Vec::new(),
        }
    }

    /// A unique, increasing timestamp: nanoseconds-since-epoch resolution from the clock's
    /// milliseconds, bumped by one when two events share a millisecond. Nanoseconds in a
    /// `u64` end in the year 2554: a clock past that saturates, and never panics.
    fn timestamp(&mut self) -> u64 {
        let now = self.batch_now_ms.saturating_mul(1_000_000);
        self.last_timestamp = now.max(self.last_timestamp.saturating_add(1));
        self.last_timestamp
    }

    /// Keeps an undo record of `change` while a linked chain is applied.
    fn record_undo(&mut self, change: Undo) {
        if self.recording_undo {
            self.undo.push(change);
        }
    }

    /// Looks up an account.
    pub fn account(&self, id: AccountId) -> Option<Account> {
        self.accounts.get(&id).copied()
    }

    /// Looks up a transfer.
    pub fn transfer(&self, id: TransferId) -> Option<StoredTransfer> {
        self.transfers.get(&id).copied()
    }

    /// Looks up a batch of accounts, as TigerBeetle's `lookup_accounts`: the ones that
    /// exist, in the order asked (an id asked twice is answered twice).
    ///
    /// # Errors
    ///
    /// [`BatchError::TooLarge`] for more than [`BATCH_MAX`] ids.
    pub fn lookup_accounts(&self, ids: &[AccountId]) -> Result<Vec<Account>, BatchError> {
        lookup(ids, |id| self.account(id))
    }

    /// Looks up a batch of transfers, as [`lookup_accounts`](Self::lookup_accounts).
    ///
    /// # Errors
    ///
    /// [`BatchError::TooLarge`] for more than [`BATCH_MAX`] ids.
    pub fn lookup_transfers(&self, ids: &[TransferId]) -> Result<Vec<StoredTransfer>, BatchError> {
        lookup(ids, |id| self.transfer(id))
    }

    /// An account's transfers, as TigerBeetle's `get_account_transfers`: those that
    /// debit it, credit it or both (as the filter's flags ask) and carry the filter's
    /// fields, in its time range, oldest first (newest with `REVERSED`), at most `limit`.
    /// An account that does not exist has none.
    ///
    /// # Errors
    ///
    /// [`FilterError`] for a filter no query can answer, naming the field.
    pub fn get_account_transfers(
        &self,
        filter: &AccountFilter,
    ) -> Result<Vec<StoredTransfer>, FilterError> {
        let bounds = filter.check()?;
        let Some(list) = self.by_account.transfers.get(&filter.account_id) else {
            return Ok(Vec::new());
        };
        let found = self.account_positions(filter, bounds, list);
        Ok(found.into_iter().map(|at| *self.transfers.at(at)).collect())
    }

    /// An account's balances after each transfer the filter selects (see
    /// [`get_account_transfers`](Self::get_account_transfers)), as TigerBeetle's
    /// `get_account_balances`. Only an account created with
    /// [`AccountFlags::HISTORY`] keeps them: any other has none, as in TigerBeetle.
    ///
    /// # Errors
    ///
    /// As [`get_account_transfers`](Self::get_account_transfers).
    ///
    /// # Panics
    ///
    /// If the history and the account's transfers are out of step (a bug in this crate).
    pub fn get_account_balances(
        &self,
        filter: &AccountFilter,
    ) -> Result<Vec<AccountBalance>, FilterError> {
        let bounds = filter.check()?;
        let id = filter.account_id;
        let (Some(list), Some(history)) =
            (self.by_account.transfers.get(&id), self.by_account.history.get(&id))
        else {
            return Ok(Vec::new());
        };
        let found = self.account_positions(filter, bounds, list);
        // One balance per position of the account's list, in step.
        let place = |at: u32| list.binary_search(&at).expect("a position of the account's list");
        Ok(found.into_iter().map(|at| history[place(at)]).collect())
    }

    /// The positions of the account's transfers (`list`) that `filter` selects: walked
    /// from the shorter of the account's list and the list of the rarest field the filter
    /// names, each transfer checked against the whole filter.
    fn account_positions(&self, filter: &AccountFilter, bounds: Bounds, list: &[u32]) -> Vec<u32> {
        let timestamp = |at: u32| self.transfers.at(at).timestamp;
        let matches = |at: u32| filter.matches(&self.transfers.at(at).transfer);
        let walked = match self.transfer_fields.candidates(&filter.fields()) {
            Some(rarer) if rarer.len() < list.len() => rarer,
            _ => list,
        };
        let found = select(walked.len(), |i| walked[i], bounds, timestamp, |i| matches(walked[i]));
        found.into_iter().map(|i| walked[i]).collect()
    }

    /// Transfers with every field the filter sets, as TigerBeetle's `query_transfers`, in
    /// its time range, oldest first (newest with `REVERSED`), at most `limit`. The work is
    /// a walk of the transfers holding the rarest field asked (all of them in the time
    /// range when the filter sets none).
    ///
    /// # Errors
    ///
    /// [`FilterError`] for a filter no query can answer, naming the field.
    pub fn query_transfers(
        &self,
        filter: &QueryFilter,
    ) -> Result<Vec<StoredTransfer>, FilterError> {
        let bounds = filter.check()?;
        let found = self.transfer_fields.find(
            &filter.fields(),
            bounds,
            self.transfers.len(),
            |at| self.transfers.at(at).timestamp,
            |at| Fields::of_transfer(&self.transfers.at(at).transfer),
        );
        Ok(found.into_iter().map(|at| *self.transfers.at(at)).collect())
    }

    /// Accounts with every field the filter sets, as TigerBeetle's `query_accounts`; see
    /// [`query_transfers`](Self::query_transfers).
    ///
    /// # Errors
    ///
    /// As [`query_transfers`](Self::query_transfers).
    pub fn query_accounts(&self, filter: &QueryFilter) -> Result<Vec<Account>, FilterError> {
        let bounds = filter.check()?;
        let account = |at: u32| &self.accounts[&self.account_order[at as usize]];
        let found = self.account_fields.find(
            &filter.fields(),
            bounds,
            self.account_order.len(),
            |at| account(at).timestamp,
            |at| Fields::of_account(account(at)),
        );
        Ok(found.into_iter().map(|at| *account(at)).collect())
    }

    /// How many transfer ids the ledger remembers: applied, and failed.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use idem_wallet::{AccountFlags, Ledger, Limits, NewAccount, Remembered, Transfer};
    ///
    /// let mut ledger = Ledger::new(Limits::default(), Arc::new(idem_core::SystemClock));
    /// let floor = AccountFlags::DEBITS_MUST_NOT_EXCEED_CREDITS;
    /// let account = |id, flags| NewAccount {
    ///     id, ledger: 1, code: 1, flags, ..Default::default()
    /// };
    /// ledger.create_accounts(&[account(1, floor), account(2, AccountFlags::default())])?;
    /// let t = |id, debit, credit| Transfer {
    ///     id, debit_account_id: debit, credit_account_id: credit, amount: 5, ledger: 1, code: 1,
    ///     ..Default::default()
    /// };
    /// // One over account 1's floor, one applied, then a repeat of each.
    /// ledger.create_transfers(&[t(8, 1, 2), t(7, 2, 1), t(8, 1, 2), t(7, 2, 1)])?;
    /// assert_eq!(ledger.remembered(), Remembered { transfers: 1, failed: 1, timeouts: 0 });
    /// # Ok::<(), idem_wallet::BatchError>(())
    /// ```
    pub fn remembered(&self) -> Remembered {
        Remembered {
            transfers: self.transfers.len(),
            failed: self.failed.len(),
            timeouts: self.expiry.len(),
        }
    }

    /// Closes an account: no new transfer may touch it. An assignment, idempotent by its
    /// shape: closing twice leaves the same state. Returns whether the account exists.
    pub fn close_account(&mut self, id: AccountId) -> bool {
        match self.accounts.get_mut(&id) {
            Some(account) => {
                account.flags |= AccountFlags::CLOSED;
                true
            }
            None => false,
        }
    }

    /// Creates accounts; one result per event, in order.
    ///
    /// # Errors
    ///
    /// [`BatchError::TooLarge`] for more than [`BATCH_MAX`] events; nothing is applied.
    pub fn create_accounts(
        &mut self,
        batch: &[NewAccount],
    ) -> Result<Results<AccountResult>, BatchError> {
        let now_ms = self.clock.now().as_millis();
        self.create_accounts_at(batch, now_ms)
    }

    /// As [`create_accounts`](Self::create_accounts), at a given time: the durable wallet
    /// replays its log with the times it recorded, so replay is deterministic.
    ///
    /// # Errors
    ///
    /// As [`create_accounts`](Self::create_accounts).
    pub fn create_accounts_at(
        &mut self,
        batch: &[NewAccount],
        now_ms: u64,
    ) -> Result<Results<AccountResult>, BatchError> {
        if batch.len() > BATCH_MAX {
            return Err(BatchError::TooLarge { len: batch.len() });
        }
        self.batch_now_ms = now_ms;
        let (mut codes, mut timestamps) = (Vec::with_capacity(batch.len()), Vec::new());
        for a in batch {
            let code = self.create_account(a);
            // A new account took the latest timestamp; a replay is answered with the
            // original's; a failure gets one of its own, which names no record.
            let timestamp = match code {
                AccountResult::Created => Some(self.last_timestamp),
                AccountResult::Exists => self.accounts.get(&a.id).map(|stored| stored.timestamp),
                _ => None,
            };
            codes.push(code);
            timestamps.push(timestamp.unwrap_or_else(|| self.timestamp()));
        }
        Ok(Results::new(codes, timestamps))
    }

    fn create_account(&mut self, a: &NewAccount) -> AccountResult {
        use AccountResult as R;
        // TigerBeetle's order: the flags, then the id, then a replay.
        if !a.flags.is_supported() {
            return R::ReservedFlag;
        }
        if a.id == 0 {
            return R::IdMustNotBeZero;
        }
        if a.id == u128::MAX {
            return R::IdMustNotBeIntMax;
        }
        if let Some(existing) = self.accounts.get(&a.id) {
            // The flags first, `closed` among them: a closed account is another account
            // than the one its create asked for.
            return if existing.flags != a.flags {
                R::ExistsWithDifferentFlags
            } else if existing.user_data_128 != a.user_data_128 {
                R::ExistsWithDifferentUserData128
            } else if existing.user_data_64 != a.user_data_64 {
                R::ExistsWithDifferentUserData64
            } else if existing.user_data_32 != a.user_data_32 {
                R::ExistsWithDifferentUserData32
            } else if existing.ledger != a.ledger {
                R::ExistsWithDifferentLedger
            } else if existing.code != a.code {
                R::ExistsWithDifferentCode
            } else {
                R::Exists
            };
        }
        let limits = AccountFlags::DEBITS_MUST_NOT_EXCEED_CREDITS
            | AccountFlags::CREDITS_MUST_NOT_EXCEED_DEBITS;
        if a.flags.contains(limits) {
            return R::FlagsAreMutuallyExclusive;
        }
        if a.ledger == 0 {
            return R::LedgerMustNotBeZero;
        }
        if a.code == 0 {
            return R::CodeMustNotBeZero;
        }
        if self.accounts.len() >= self.limits.accounts_max {
            return R::AccountsFull;
        }
        let timestamp = self.timestamp();
        let at = u32::try_from(self.account_order.len());
        let at = at.expect("accounts_max keeps the positions below u32::MAX");
        self.account_order.push(a.id);
        let account = Account {
            id: a.id,
            ledger: a.ledger,
            code: a.code,
            flags: a.flags,
            user_data_128: a.user_data_128,
            user_data_64: a.user_data_64,
            user_data_32: a.user_data_32,
            debits_pending: 0,
            debits_posted: 0,
            credits_pending: 0,
            credits_posted: 0,
            timestamp,
        };
        self.account_fields.add(at, &Fields::of_account(&account));
        self.accounts.insert(a.id, account);
        R::Created
    }

    /// Applies transfers; one result per event, in order. Linked chains apply
    /// all-or-nothing. Pending transfers whose timeout passed are expired first.
    ///
    /// # Errors
    ///
    /// [`BatchError::TooLarge`] for more than [`BATCH_MAX`] events; nothing is applied.
    pub fn create_transfers(
        &mut self,
        batch: &[Transfer],
    ) -> Result<Results<TransferResult>, BatchError> {
        let now_ms = self.clock.now().as_millis();
        self.create_transfers_at(batch, now_ms)
    }

    /// An empty ledger with this one's limits and clock.
    pub(crate) fn empty_like(&self) -> Self {
        Self::new(self.limits, self.clock.clone())
    }

    /// The time the ledger reads for a batch submitted now.
    pub fn now_ms(&self) -> u64 {
        self.clock.now().as_millis()
    }

    /// As [`create_transfers`](Self::create_transfers), at a given time (see
    /// [`create_accounts_at`](Self::create_accounts_at)).
    ///
    /// # Errors
    ///
    /// As [`create_transfers`](Self::create_transfers).
    pub fn create_transfers_at(
        &mut self,
        batch: &[Transfer],
        now_ms: u64,
    ) -> Result<Results<TransferResult>, BatchError> {
        if batch.len() > BATCH_MAX {
            return Err(BatchError::TooLarge { len: batch.len() });
        }
        self.batch_now_ms = now_ms;
        self.transfers.reserve(batch.len());
        self.expire_pending();
        let mut answers: Answers =
            (Vec::with_capacity(batch.len()), Vec::with_capacity(batch.len()));
        let mut start = 0;
        while start < batch.len() {
            let end = batch[start..]
                .iter()
                .position(|t| !t.flags.contains(TransferFlags::LINKED))
                .map(|offset| start + offset);
            // A batch that ends inside a chain: the chain runs to its last event, which is
            // the one whose flag is wrong (`LinkedEventChainOpen`), and nothing of it stays.
            let (chain, open) = match end {
                Some(end) => (&batch[start..=end], false),
                None => (&batch[start..], true),
            };
            self.apply_chain(chain, open, &mut answers);
            start += chain.len();
        }
        if cfg!(debug_assertions) {
            self.assert_invariants();
        }
        Ok(Results::new(answers.0, answers.1))
    }

    /// Applies one chain, all or nothing; `open`: the batch ended inside it, so its last
    /// event fails it.
    fn apply_chain(&mut self, chain: &[Transfer], open: bool, answers: &mut Answers) {
        let (results, timestamps) = (&mut answers.0, &mut answers.1);
        let linked = chain.len() > 1 || open;
        self.recording_undo = linked;
        self.undo.clear();
        self.chain_expiry.clear();
        let first = results.len();
        let transfers_before = self.transfers.len();
        for (offset, t) in chain.iter().enumerate() {
            let (result, timestamp) = if open && offset == chain.len() - 1 {
                (TransferResult::LinkedEventChainOpen, self.timestamp())
            } else {
                self.apply(t, linked)
            };
            results.push(result);
            timestamps.push(timestamp);
            if linked && result != TransferResult::Created {
                // Nothing of the chain stays; its events keep the timestamps they were
                // decided at (a rolled-back record's names nothing now), and the events
                // after this one get theirs.
                let rest = first + chain.len() - timestamps.len();
                for _ in 0..rest {
                    let at = self.timestamp();
                    timestamps.push(at);
                }
                let undo = std::mem::take(&mut self.undo);
                self.recording_undo = false;
                self.chain_expiry.clear();
                self.rollback(undo, transfers_before);
                // The failure that broke the chain uses up its id as it would alone (the
                // rollback kept the arena and the failed set within their limit).
                if result.uses_up_id() {
                    self.failed.insert(t.id);
                }
                for (i, r) in results[first..].iter_mut().enumerate() {
                    if i != offset {
                        *r = TransferResult::LinkedEventFailed;
                    }
                }
                results.extend(std::iter::repeat_n(
                    TransferResult::LinkedEventFailed,
                    chain.len() - offset - 1,
                ));
                if open {
                    // An open chain's last event is answered for its flag, whatever broke
                    // the chain before it.
                    *results.last_mut().expect("this chain's results") =
                        TransferResult::LinkedEventChainOpen;
                }
                return;
            }
        }
        // The chain stands: its pending transfers' timeouts are watched from now on.
        let stood = std::mem::take(&mut self.chain_expiry);
        self.expiry.extend(stood);
    }

    /// Undoes a failed chain's changes, newest first, back to the ledger it started from
    /// (which held `transfers_before` transfers).
    ///
    /// # Panics
    ///
    /// If an undo record names what the chain cannot have changed (a bug in this crate).
    fn rollback(&mut self, mut undo: Vec<Undo>, transfers_before: usize) {
        for change in undo.drain(..).rev() {
            match change {
                Undo::Account(before) => {
                    // A transfer changes accounts, never creates one.
                    let changed = self.accounts.insert(before.id, before);
                    assert!(changed.is_some(), "rollback of account {} it never had", before.id);
                }
                Undo::Transfer(id) => self.unstore_last(id),
                Undo::Pending(id, state) => {
                    let stored = self.transfers.get_mut(&id);
                    let stored = stored.expect("a settled pending transfer stays stored");
                    let settled =
                        matches!(stored.pending, Some(PendingState::Posted | PendingState::Voided));
                    assert!(settled, "rollback of {id}, which the chain did not settle");
                    stored.pending = Some(state);
                }
            }
        }
        assert_eq!(self.transfers.len(), transfers_before, "a rolled-back chain stores none");
    }

    /// Applies one transfer. `linked`: inside a chain, failures record nothing (the chain
    /// rolls back as a whole).
    ///
    /// Returns the result and the event's timestamp: the new record's when created, the
    /// stored one's for `Exists`, the batch's time otherwise.
    fn apply(&mut self, t: &Transfer, linked: bool) -> (TransferResult, u64) {
        use TransferResult as R;
        assert_eq!(self.recording_undo, linked, "undo records are kept inside chains only");
        // TigerBeetle's order: the flags, then the id, then a replay.
        let refused = if !t.flags.is_supported() {
            Some(R::ReservedFlag)
        } else if t.id == 0 {
            Some(R::IdMustNotBeZero)
        } else if t.id == u128::MAX {
            Some(R::IdMustNotBeIntMax)
        } else {
            None
        };
        if let Some(refused) = refused {
            return (refused, self.timestamp());
        }
        if let Some(stored) = self.transfers.get(&t.id) {
            let (result, original) = (self.exists(&stored.transfer, t), stored.timestamp);
            return (result, if result == R::Exists { original } else { self.timestamp() });
        }
        let result = self.apply_new(t, linked);
        // A transfer created now took the ledger's latest timestamp; a failure gets one of
        // its own.
        (result, if result == R::Created { self.last_timestamp } else { self.timestamp() })
    }

    /// [`apply`](Self::apply) for an id the ledger has not stored.
    fn apply_new(&mut self, t: &Transfer, linked: bool) -> TransferResult {
        use TransferResult as R;
        if self.failed.contains(&t.id) {
            return R::IdAlreadyFailed;
        }
        if let Err(malformed) = validate(t) {
            return malformed;
        }
        if self.transfers.len() + self.failed.len() >= self.limits.transfers_max {
            return R::TransfersFull;
        }
        let result = if t.flags.contains(TransferFlags::POST_PENDING)
            || t.flags.contains(TransferFlags::VOID_PENDING)
        {
            self.settle_pending(t)
        } else {
            self.move_money(t)
        };
        let uses_up = result != R::Created && result.uses_up_id() && !linked;
        if uses_up {
            // Outside a chain: there is no rollback, so no undo record.
            self.failed.insert(t.id);
        }
        // The id was neither stored nor failed on entry: now it is stored exactly when
        // created, and failed exactly when its failure used it up (a lookup each, so debug
        // builds only); the arena and the failed set stay within their limit.
        let (id, created) = (t.id, result == R::Created);
        debug_assert_eq!(self.transfers.get(&id).is_some(), created, "{id} stored iff created");
        debug_assert_eq!(self.failed.contains(&id), uses_up, "{id} failed iff used up");
        assert!(self.transfers.len() + self.failed.len() <= self.limits.transfers_max);
        result
    }

    /// The exists check of a repeat `t` of the stored transfer `e`, in TigerBeetle's
    /// order: `Exists` for the same transfer, else the first field that differs.
    fn exists(&self, e: &Transfer, t: &Transfer) -> TransferResult {
        use TransferResult as R;
        // The flags change what the other fields mean: compared first.
        if t.flags != e.flags {
            return R::ExistsWithDifferentFlags;
        }
        if t.pending_id != e.pending_id {
            return R::ExistsWithDifferentPendingId;
        }
        if t.timeout != e.timeout {
            return R::ExistsWithDifferentTimeout;
        }
        if t.flags.contains(TransferFlags::POST_PENDING)
            || t.flags.contains(TransferFlags::VOID_PENDING)
        {
            let p = self.transfers.get(&t.pending_id);
            let p = p.expect("a settled transfer's pending transfer stays stored").transfer;
            return settle_exists(e, t, &p);
        }
        if t.debit_account_id != e.debit_account_id {
            R::ExistsWithDifferentDebitAccountId
        } else if t.credit_account_id != e.credit_account_id {
            R::ExistsWithDifferentCreditAccountId
        } else if t.amount != e.amount {
            R::ExistsWithDifferentAmount
        } else if t.user_data_128 != e.user_data_128 {
            R::ExistsWithDifferentUserData128
        } else if t.user_data_64 != e.user_data_64 {
            R::ExistsWithDifferentUserData64
        } else if t.user_data_32 != e.user_data_32 {
            R::ExistsWithDifferentUserData32
        } else if t.ledger != e.ledger {
            R::ExistsWithDifferentLedger
        } else if t.code != e.code {
            R::ExistsWithDifferentCode
        } else {
            R::Exists
        }
    }

    /// A plain or pending transfer, well formed, under an id not seen yet.
    ///
    /// # Panics
    ///
    /// If the amount did not move exactly once, from one side of each account.
    fn move_money(&mut self, t: &Transfer) -> TransferResult {
        use TransferResult as R;
        debug_assert!(validate(t).is_ok(), "move_money of malformed transfer {}", t.id);
        debug_assert!(
            self.transfers.get(&t.id).is_none() && !self.failed.contains(&t.id),
            "move_money of transfer {}, whose id is known",
            t.id
        );
        let pending = t.flags.contains(TransferFlags::PENDING);
        let [debit, credit] =
            self.accounts.get_disjoint_mut([&t.debit_account_id, &t.credit_account_id]);
        let (Some(debit), Some(credit)) = (debit, credit) else {
            return if self.accounts.contains_key(&t.debit_account_id) {
                R::CreditAccountNotFound
            } else {
                R::DebitAccountNotFound
            };
        };
        if let Err(r) = check_accounts(debit, credit, t.ledger) {
            return r;
        }
        let before = (*debit, *credit);
        if let Err(r) = apply_amounts(debit, credit, t.amount, pending) {
            // apply_amounts changes nothing when it fails.
            return r;
        }
        let (debited, credited) = moved_sides(&before.0, &before.1, pending);
        let (debits, credits) = moved_sides(debit, credit, pending);
        let once = |before: u128, after: u128| before.checked_add(t.amount) == Some(after);
        let moved = once(debited, debits) && once(credited, credits);
        assert!(moved, "transfer {} did not move its amount exactly once", t.id);
        let after = [*debit, *credit];
        self.record_undo(Undo::Account(before.0));
        self.record_undo(Undo::Account(before.1));
        let timestamp = self.timestamp();
        let state = pending.then_some(PendingState::Pending);
        self.store(
            after,
            StoredTransfer { transfer: *t, amount_applied: t.amount, timestamp, pending: state },
        );
        if pending && t.timeout > 0 {
            // A timeout past the end of the clock's range never expires (saturates).
            let expires_ms = self.batch_now_ms.saturating_add(u64::from(t.timeout) * 1000);
            let entry = Reverse((expires_ms, t.id, timestamp));
            // Inside a chain the timeout is watched only once the chain stands: a chain
            // rolled back leaves no entry behind.
            if self.recording_undo {
                self.chain_expiry.push(entry);
            } else {
                self.expiry.push(entry);
            }
        }
        R::Created
    }

    /// A post or void of a pending transfer.
    fn settle_pending(&mut self, t: &Transfer) -> TransferResult {
        use TransferResult as R;
        let Some(stored) = self.transfers.get(&t.pending_id).copied() else {
            return R::PendingTransferNotFound;
        };
        let p = stored.transfer;
        let Some(state) = stored.pending else {
            return R::PendingTransferNotPending;
        };
        if let Err(different) = same_fields(t, &p) {
            return different;
        }
        let post = t.flags.contains(TransferFlags::POST_PENDING);
        let amount = match settled_amount(post, t.amount, stored.amount_applied) {
            Ok(amount) => amount,
            Err(refused) => return refused,
        };
        match state {
            PendingState::Posted => return R::PendingTransferAlreadyPosted,
            PendingState::Voided => return R::PendingTransferAlreadyVoided,
            PendingState::Expired => return R::PendingTransferExpired,
            PendingState::Pending => {}
        }
        let mut debit = self.accounts[&p.debit_account_id];
        let mut credit = self.accounts[&p.credit_account_id];
        // A closed account still lets a void give back what was reserved on it.
        if post && debit.flags.contains(AccountFlags::CLOSED) {
            return R::DebitAccountAlreadyClosed;
        }
        if post && credit.flags.contains(AccountFlags::CLOSED) {
            return R::CreditAccountAlreadyClosed;
        }
        release_reservation(&mut debit, &mut credit, stored.amount_applied, t.pending_id);
        if post {
            // The reservation was counted with the posted sides when it was made, and
            // `amount` is at most the reservation: no sum passes what was checked then.
            let posted = debit.debits_posted.checked_add(amount);
            debit.debits_posted = posted.expect("a post fits where its reservation did");
            let posted = credit.credits_posted.checked_add(amount);
            credit.credits_posted = posted.expect("a post fits where its reservation did");
        }
        let timestamp = self.timestamp();
        self.commit(debit, credit);
        let settled = if post { PendingState::Posted } else { PendingState::Voided };
        let pending = self.transfers.get_mut(&t.pending_id);
        pending.expect("the pending transfer read above is stored").pending = Some(settled);
        self.record_undo(Undo::Pending(t.pending_id, PendingState::Pending));
        let applied = if post { amount } else { 0 };
        // Kept resolved, as TigerBeetle keeps it: the pending transfer's accounts, ledger
        // and code, the amount settled (a void's: the pending amount), its user data if
        // this one left it 0.
        let resolved = Transfer { amount, timeout: 0, ..with_user_data(t, &p) };
        let resolved = Transfer { id: t.id, pending_id: t.pending_id, flags: t.flags, ..resolved };
        self.store(
            [debit, credit],
            StoredTransfer {
                transfer: resolved,
                amount_applied: applied,
                timestamp,
                pending: None,
            },
        );
        R::Created
    }

    /// Stores a transfer just applied and indexes it: by its fields, and under both
    /// accounts (`after`, debit then credit, as the transfer left them), with their
    /// balances for a `HISTORY` account.
    fn store(&mut self, after: [Account; 2], stored: StoredTransfer) {
        let t = stored.transfer;
        debug_assert_eq!([after[0].id, after[1].id], [t.debit_account_id, t.credit_account_id]);
        let at = self.transfers.insert(t.id, stored);
        self.transfer_fields.add(at, &Fields::of_transfer(&t));
        for account in &after {
            let balance = AccountBalance {
                debits_pending: account.debits_pending,
                debits_posted: account.debits_posted,
                credits_pending: account.credits_pending,
                credits_posted: account.credits_posted,
                timestamp: stored.timestamp,
            };
            let history = account.flags.contains(AccountFlags::HISTORY).then_some(balance);
            self.by_account.add(account.id, at, history);
        }
        self.record_undo(Undo::Transfer(t.id));
    }

    /// Undoes [`store`](Self::store) of the newest transfer, `id` (a chain's rollback).
    ///
    /// # Panics
    ///
    /// If `id` is not the newest transfer (a bug in this crate).
    fn unstore_last(&mut self, id: TransferId) {
        let stored = self.transfers.get(&id).copied();
        let t = stored.expect("a rolled-back transfer was stored").transfer;
        let at = self.transfers.remove(&id);
        self.transfer_fields.remove_last(at, &Fields::of_transfer(&t));
        for account in [t.debit_account_id, t.credit_account_id] {
            self.by_account.remove_last(account, at);
        }
    }

    fn commit(&mut self, debit: Account, credit: Account) {
        for account in [debit, credit] {
            if let Some(before) = self.accounts.insert(account.id, account) {
                self.record_undo(Undo::Account(before));
            }
        }
    }

    /// Releases the reservations of pending transfers whose timeout passed.
    fn expire_pending(&mut self) {
        let now = self.batch_now_ms;
        while let Some(Reverse((expires_ms, id, timestamp))) = self.expiry.peek().copied() {
            if expires_ms > now {
                break;
            }
            self.expiry.pop();
            let Some(stored) = self.transfers.get_mut(&id) else { continue };
            if stored.timestamp != timestamp || stored.pending != Some(PendingState::Pending) {
                continue;
            }
            stored.pending = Some(PendingState::Expired);
            let (amount, p) = (stored.amount_applied, stored.transfer);
            // A pending transfer's accounts exist: accounts are never removed.
            let [debit, credit] =
                self.accounts.get_disjoint_mut([&p.debit_account_id, &p.credit_account_id]);
            let (Some(debit), Some(credit)) = (debit, credit) else {
                panic!("pending transfer {id} names an account the ledger lacks");
            };
            release_reservation(debit, credit, amount, id);
        }
    }

    /// Checks the ledger's invariants: debits equal credits (posted and pending), no
    /// balance past its limit, pending reservations equal the pending transfers. Tests
    /// call it after every step; debug builds call it after every batch.
    ///
    /// # Panics
    ///
    /// If an invariant is broken (a bug in this crate, never a caller's error), with a
    /// description of the first broken invariant.
    pub fn assert_invariants(&self) {
        if let Some(broken) = self.broken_invariant() {
            panic!("wallet invariant broken: {broken}");
        }
    }

    /// The first broken invariant, described, or `None`. Overflow-safe for any legal
    /// state: the sums over all accounts are kept in 256 bits, since many accounts can
    /// each hold up to `u128::MAX`. Recovery uses it to refuse a log instead of
    /// panicking.
    pub(crate) fn broken_invariant(&self) -> Option<String> {
        let (mut dp, mut dq, mut cp, mut cq) = (Sum::ZERO, Sum::ZERO, Sum::ZERO, Sum::ZERO);
        for a in self.accounts.values() {
            dp.add(a.debits_posted);
            dq.add(a.debits_pending);
            cp.add(a.credits_posted);
            cq.add(a.credits_pending);
            // A side whose two parts overflow `u128` exceeds any other side.
            let exceeds = |posted: u128, pending: u128, limit: u128| {
                posted.checked_add(pending).is_none_or(|total| total > limit)
            };
            if a.flags.contains(AccountFlags::DEBITS_MUST_NOT_EXCEED_CREDITS)
                && exceeds(a.debits_posted, a.debits_pending, a.credits_posted)
            {
                return Some(format!("account {} exceeds its credits", a.id));
            }
            if a.flags.contains(AccountFlags::CREDITS_MUST_NOT_EXCEED_DEBITS)
                && exceeds(a.credits_posted, a.credits_pending, a.debits_posted)
            {
                return Some(format!("account {} exceeds its debits", a.id));
            }
        }
        if dp != cp || dq != cq {
            return Some(format!("debits {dp}/{dq} != credits {cp}/{cq} (posted/pending)"));
        }
        let mut reserved = Sum::ZERO;
        for t in self.transfers.values() {
            if t.pending == Some(PendingState::Pending) {
                reserved.add(t.amount_applied);
            }
        }
        if reserved != dq {
            return Some(format!("pending transfers reserve {reserved}, accounts show {dq}"));
        }
        let (entries, transfers) = (self.by_account.entries(), self.transfers.len());
        if entries != 2 * transfers || self.account_order.len() != self.accounts.len() {
            return Some(format!("the indexes hold {entries} entries for {transfers} transfers"));
        }
        None
    }
}

/// A sum of `u128` amounts in 256 bits: it cannot overflow for fewer than 2^128 terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Sum {
    high: u128,
    low: u128,
}

impl Sum {
    const ZERO: Self = Self { high: 0, low: 0 };

    fn add(&mut self, amount: u128) {
        let (low, carry) = self.low.overflowing_add(amount);
        self.low = low;
        self.high += u128::from(carry);
    }
}

impl std::fmt::Display for Sum {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.high {
            0 => write!(f, "{}", self.low),
            high => write!(f, "{high}*2^128+{}", self.low),
        }
    }
}

/// A post's or void's own `value`, or its pending transfer's if it left it 0.
fn or_pending<T: Copy + PartialEq + Default>(value: T, pending: T) -> T {
    if value == T::default() { pending } else { value }
}

/// `t` with each user data field it left 0 taken from its pending transfer `p`.
fn with_user_data(t: &Transfer, p: &Transfer) -> Transfer {
    Transfer {
        user_data_128: or_pending(t.user_data_128, p.user_data_128),
        user_data_64: or_pending(t.user_data_64, p.user_data_64),
        user_data_32: or_pending(t.user_data_32, p.user_data_32),
        ..*p
    }
}

/// The exists check of a repeat `t` of the post or void `e` of `p`, whose fields `e`
/// holds resolved: a field `t` leaves 0 is not compared, and its amount is compared as it
/// resolves (`AMOUNT_MAX` for a post, 0 for a void: the pending amount).
fn settle_exists(e: &Transfer, t: &Transfer, p: &Transfer) -> TransferResult {
    use TransferResult as R;
    let differs = |asked: u128, stored: u128| asked != 0 && asked != stored;
    let whole = if t.flags.contains(TransferFlags::POST_PENDING) { AMOUNT_MAX } else { 0 };
    let amount = if t.amount == whole { p.amount } else { t.amount };
    let user_data = with_user_data(t, p);
    if differs(t.debit_account_id, e.debit_account_id) {
        R::ExistsWithDifferentDebitAccountId
    } else if differs(t.credit_account_id, e.credit_account_id) {
        R::ExistsWithDifferentCreditAccountId
    } else if amount != e.amount {
        R::ExistsWithDifferentAmount
    } else if user_data.user_data_128 != e.user_data_128 {
        R::ExistsWithDifferentUserData128
    } else if user_data.user_data_64 != e.user_data_64 {
        R::ExistsWithDifferentUserData64
    } else if user_data.user_data_32 != e.user_data_32 {
        R::ExistsWithDifferentUserData32
    } else if differs(u128::from(t.ledger), u128::from(e.ledger)) {
        R::ExistsWithDifferentLedger
    } else if differs(u128::from(t.code), u128::from(e.code)) {
        R::ExistsWithDifferentCode
    } else {
        R::Exists
    }
}

/// The malformed-request checks: they depend on the transfer alone and use up no id. In
/// TigerBeetle's order (the reserved flags and the id are checked before a replay).
fn validate(t: &Transfer) -> Result<(), TransferResult> {
    use TransferResult as R;
    let f = t.flags;
    let kinds = [TransferFlags::PENDING, TransferFlags::POST_PENDING, TransferFlags::VOID_PENDING]
        .iter()
        .filter(|k| f.contains(**k))
        .count();
    if kinds > 1 {
        return Err(R::FlagsAreMutuallyExclusive);
    }
    if f.contains(TransferFlags::POST_PENDING) || f.contains(TransferFlags::VOID_PENDING) {
        // The accounts may be left 0: the pending transfer names them.
        return match t.pending_id {
            0 => Err(R::PendingIdMustNotBeZero),
            u128::MAX => Err(R::PendingIdMustNotBeIntMax),
            id if id == t.id => Err(R::PendingIdMustBeDifferent),
            _ if t.timeout != 0 => Err(R::TimeoutReservedForPendingTransfer),
            _ => Ok(()),
        };
    }
    match (t.debit_account_id, t.credit_account_id) {
        (0, _) => return Err(R::DebitAccountIdMustNotBeZero),
        (u128::MAX, _) => return Err(R::DebitAccountIdMustNotBeIntMax),
        (_, 0) => return Err(R::CreditAccountIdMustNotBeZero),
        (_, u128::MAX) => return Err(R::CreditAccountIdMustNotBeIntMax),
        (debit, credit) if debit == credit => return Err(R::AccountsMustBeDifferent),
        _ => {}
    }
    if t.pending_id != 0 {
        return Err(R::PendingIdMustBeZero);
    }
    if t.timeout != 0 && !f.contains(TransferFlags::PENDING) {
        return Err(R::TimeoutReservedForPendingTransfer);
    }
    if t.ledger == 0 {
        return Err(R::LedgerMustNotBeZero);
    }
    if t.code == 0 {
        return Err(R::CodeMustNotBeZero);
    }
    Ok(())
}

/// The fields a post or void may leave 0; set, each must be its pending transfer's.
fn same_fields(t: &Transfer, p: &Transfer) -> Result<(), TransferResult> {
    use TransferResult as R;
    if t.debit_account_id != 0 && t.debit_account_id != p.debit_account_id {
        return Err(R::PendingTransferHasDifferentDebitAccountId);
    }
    if t.credit_account_id != 0 && t.credit_account_id != p.credit_account_id {
        return Err(R::PendingTransferHasDifferentCreditAccountId);
    }
    if t.ledger != 0 && t.ledger != p.ledger {
        return Err(R::PendingTransferHasDifferentLedger);
    }
    if t.code != 0 && t.code != p.code {
        return Err(R::PendingTransferHasDifferentCode);
    }
    Ok(())
}

/// What a post (`post`) or a void of `pending` names as `asked` settles, by TigerBeetle's
/// rule since 0.16: a post of [`AMOUNT_MAX`] posts the whole reservation, a post of less
/// posts that much (0 included) and restores the rest; a void names 0 or the whole.
fn settled_amount(post: bool, asked: u128, pending: u128) -> Result<u128, TransferResult> {
    let amount = match (post, asked) {
        (true, AMOUNT_MAX) | (false, 0) => pending,
        (_, asked) => asked,
    };
    if amount > pending {
        return Err(TransferResult::ExceedsPendingTransferAmount);
    }
    if !post && amount < pending {
        return Err(TransferResult::PendingTransferHasDifferentAmount);
    }
    Ok(amount)
}

fn check_accounts(debit: &Account, credit: &Account, ledger: u32) -> Result<(), TransferResult> {
    use TransferResult as R;
    if debit.ledger != credit.ledger {
        return Err(R::AccountsMustHaveTheSameLedger);
    }
    if ledger != debit.ledger {
        return Err(R::TransferMustHaveTheSameLedgerAsAccounts);
    }
    if debit.flags.contains(AccountFlags::CLOSED) {
        return Err(R::DebitAccountAlreadyClosed);
    }
    if credit.flags.contains(AccountFlags::CLOSED) {
        return Err(R::CreditAccountAlreadyClosed);
    }
    Ok(())
}

/// Takes a pending transfer's reservation of `amount` off its accounts' pending sides.
///
/// # Panics
///
/// If the accounts hold less in pending than the reservation (a bug in this crate: every
/// reservation is counted there until it is posted, voided or expired, once).
fn release_reservation(debit: &mut Account, credit: &mut Account, amount: u128, id: TransferId) {
    let debits = debit.debits_pending.checked_sub(amount);
    let credits = credit.credits_pending.checked_sub(amount);
    let (Some(debits), Some(credits)) = (debits, credits) else {
        panic!(
            "pending transfer {id} reserves {amount}, its accounts hold {} and {} pending",
            debit.debits_pending, credit.credits_pending
        );
    };
    debit.debits_pending = debits;
    credit.credits_pending = credits;
}

/// The two sides a transfer moves: pending or posted debits of the debit account, and the
/// same credits of the credit account.
fn moved_sides(debit: &Account, credit: &Account, pending: bool) -> (u128, u128) {
    if pending {
        (debit.debits_pending, credit.credits_pending)
    } else {
        (debit.debits_posted, credit.credits_posted)
    }
}

/// Adds `amount` to the debit and credit sides (pending or posted), checking overflow and
/// the balance limits.
fn apply_amounts(
    debit: &mut Account,
    credit: &mut Account,
    amount: u128,
    pending: bool,
) -> Result<(), TransferResult> {
    use TransferResult as R;
    let debits =
        debit.debits_pending.checked_add(debit.debits_posted).and_then(|d| d.checked_add(amount));
    let credits = credit
        .credits_pending
        .checked_add(credit.credits_posted)
        .and_then(|c| c.checked_add(amount));
    let (Some(debits), Some(credits)) = (debits, credits) else {
        return Err(R::Overflow);
    };
    if debit.flags.contains(AccountFlags::DEBITS_MUST_NOT_EXCEED_CREDITS)
        && debits > debit.credits_posted
    {
        return Err(R::ExceedsCredits);
    }
    if credit.flags.contains(AccountFlags::CREDITS_MUST_NOT_EXCEED_DEBITS)
        && credits > credit.debits_posted
    {
        return Err(R::ExceedsDebits);
    }
    if pending {
        debit.debits_pending += amount;
        credit.credits_pending += amount;
    } else {
        debit.debits_posted += amount;
        credit.credits_posted += amount;
    }
    Ok(())
}

/// An arena of every applied transfer, in order, in fixed-size chunks (growing never moves
/// a stored transfer), and an index from id to position. Stored transfers (160 bytes) in
/// a hash map would make each rehash copy them all; the index's entries are 32 bytes.
#[derive(Debug, Default)]
struct TransferArena {
    index: HashMap<TransferId, u32>,
    chunks: Vec<Vec<StoredTransfer>>,
    len: usize,
}

impl TransferArena {
    const CHUNK: usize = 1 << 16;

    fn position(&self, at: u32) -> (usize, usize) {
        let at = at as usize;
        (at / Self::CHUNK, at % Self::CHUNK)
    }

    /// The transfer at position `at`.
    ///
    /// # Panics
    ///
    /// If there is none there (an index names only stored positions).
    fn at(&self, at: u32) -> &StoredTransfer {
        let (chunk, slot) = self.position(at);
        &self.chunks[chunk][slot]
    }

    fn get(&self, id: &TransferId) -> Option<&StoredTransfer> {
        let (chunk, slot) = self.position(*self.index.get(id)?);
        self.chunks.get(chunk)?.get(slot)
    }

    fn get_mut(&mut self, id: &TransferId) -> Option<&mut StoredTransfer> {
        let (chunk, slot) = self.position(*self.index.get(id)?);
        self.chunks.get_mut(chunk)?.get_mut(slot)
    }

    /// Appends a transfer whose id is not yet stored; returns its position.
    ///
    /// # Panics
    ///
    /// If the arena holds `u32::MAX` transfers (the ledger's limit is far below).
    fn insert(&mut self, id: TransferId, stored: StoredTransfer) -> u32 {
        let at = u32::try_from(self.len).expect("transfers_max keeps the arena below u32::MAX");
        if self.chunks.last().is_none_or(|c| c.len() == Self::CHUNK) {
            self.chunks.push(Vec::with_capacity(Self::CHUNK));
        }
        if let Some(chunk) = self.chunks.last_mut() {
            chunk.push(stored);
        }
        let previous = self.index.insert(id, at);
        debug_assert!(previous.is_none(), "transfer {id} stored twice");
        self.len += 1;
        at
    }

    /// Removes the most recently appended transfer (a linked chain's rollback, which
    /// undoes in reverse order); returns the position it had.
    ///
    /// # Panics
    ///
    /// If `id` is not the last transfer appended.
    fn remove(&mut self, id: &TransferId) -> u32 {
        let at = self.index.remove(id);
        let last = self.len.checked_sub(1).and_then(|last| u32::try_from(last).ok());
        assert!(at.is_some() && at == last, "rollback removes the last transfer, not {id}");
        if let Some(chunk) = self.chunks.last_mut() {
            chunk.pop();
            if chunk.is_empty() {
                self.chunks.pop();
            }
        }
        self.len -= 1;
        at.unwrap_or_default()
    }

    fn len(&self) -> usize {
        self.len
    }

    fn reserve(&mut self, additional: usize) {
        self.index.reserve(additional);
    }

    fn values(&self) -> impl Iterator<Item = &StoredTransfer> {
        self.chunks.iter().flatten()
    }
}
