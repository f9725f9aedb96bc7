//! The shared handle: any number of threads submit batches to one ledger, kept in memory
//! ([`Memory`]) or behind a write-ahead log ([`Durable`](crate::Durable)). The lookups are
//! written once, for both.

use std::fmt;
use std::sync::Arc;

use idem_core::{Clock, SystemClock};
use parking_lot::Mutex;

use crate::ledger::{BatchError, Ledger, Limits, Remembered};
use crate::query::{AccountBalance, AccountFilter, FilterError, QueryFilter};
use crate::types::{
    Account, AccountId, AccountResult, NewAccount, Results, StoredTransfer, Transfer, TransferId,
    TransferResult,
};

/// A ledger shared by threads, kept by `S`: in memory alone ([`Memory`], the default), or
/// in memory behind a write-ahead log ([`Durable`](crate::Durable), named
/// [`DurableWallet`](crate::DurableWallet)). Each batch is applied under one lock
/// acquisition, in the order batches arrive: nothing deadlocks (one lock, never held
/// while waiting for anything else) and no update is lost (a batch sees every batch
/// before it). Both kinds answer lookups alike, from one implementation.
///
/// ```
/// use idem_wallet::{AccountFlags, NewAccount, Transfer, TransferResult, Wallet};
///
/// let wallet = Wallet::new();
/// wallet.create_accounts(&[
///     NewAccount { id: 1, ledger: 978, code: 1, ..Default::default() },
///     NewAccount { id: 2, ledger: 978, code: 1, ..Default::default() },
/// ])?;
/// let pay = Transfer {
///     id: 7, debit_account_id: 1, credit_account_id: 2, amount: 500, ledger: 978, code: 1,
///     ..Default::default()
/// };
/// assert_eq!(wallet.create_transfers(&[pay])?, vec![TransferResult::Created]);
/// // The client never heard back and retries with the same id: answered, not applied.
/// assert_eq!(wallet.create_transfers(&[pay])?, vec![TransferResult::Exists]);
/// assert_eq!(wallet.account(2).map(|a| a.credits_posted), Some(500));
/// # Ok::<(), idem_wallet::BatchError>(())
/// ```
pub struct Wallet<S = Memory> {
    /// The ledger; a durable wallet's writer thread holds it too.
    pub(crate) ledger: Arc<Mutex<Ledger>>,
    /// Where batches go besides the ledger.
    pub(crate) storage: S,
}

/// How a [`Wallet`] keeps its batches: in memory alone, gone with the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Memory;

impl fmt::Debug for Wallet<Memory> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Wallet").field("ledger", &self.ledger).finish()
    }
}

impl Default for Wallet {
    fn default() -> Self {
        Self::new()
    }
}

impl Wallet {
    /// An empty wallet with the default limits, on the system clock.
    pub fn new() -> Self {
        Self::with(Limits::default(), Arc::new(SystemClock))
    }

    /// An empty wallet with these limits, reading time from `clock`.
    pub fn with(limits: Limits, clock: Arc<dyn Clock>) -> Self {
        Self { ledger: Arc::new(Mutex::new(Ledger::new(limits, clock))), storage: Memory }
    }

    /// Creates accounts; see [`Ledger::create_accounts`].
    ///
    /// # Errors
    ///
    /// [`BatchError::TooLarge`]; nothing is applied.
    pub fn create_accounts(
        &self,
        batch: &[NewAccount],
    ) -> Result<Results<AccountResult>, BatchError> {
        let _span = idem_core::trace_span!(INFO, "create_accounts", len = batch.len());
        let results = self.ledger.lock().create_accounts(batch)?;
        trace_batch(&results, AccountResult::Created, AccountResult::Exists);
        Ok(results)
    }

    /// Applies transfers; see [`Ledger::create_transfers`].
    ///
    /// # Errors
    ///
    /// [`BatchError::TooLarge`]; nothing is applied.
    pub fn create_transfers(
        &self,
        batch: &[Transfer],
    ) -> Result<Results<TransferResult>, BatchError> {
        let _span = idem_core::trace_span!(INFO, "create_transfers", len = batch.len());
        let results = self.ledger.lock().create_transfers(batch)?;
        trace_batch(&results, TransferResult::Created, TransferResult::Exists);
        Ok(results)
    }

    /// Closes an account; idempotent by its shape. Returns whether it exists.
    pub fn close_account(&self, id: AccountId) -> bool {
        self.ledger.lock().close_account(id)
    }
}

/// The lookups, one implementation for every kind of wallet. A durable wallet's reads see
/// only synced batches: its writer holds the ledger from deciding a group until the
/// group's sync returns.
impl<S> Wallet<S> {
    /// Looks up an account.
    pub fn account(&self, id: AccountId) -> Option<Account> {
        self.ledger.lock().account(id)
    }

    /// Looks up a transfer.
    pub fn transfer(&self, id: TransferId) -> Option<StoredTransfer> {
        self.ledger.lock().transfer(id)
    }

    /// Looks up a batch of accounts; see [`Ledger::lookup_accounts`].
    ///
    /// # Errors
    ///
    /// [`BatchError::TooLarge`] for more than [`BATCH_MAX`](crate::BATCH_MAX) ids.
    pub fn lookup_accounts(&self, ids: &[AccountId]) -> Result<Vec<Account>, BatchError> {
        self.ledger.lock().lookup_accounts(ids)
    }

    /// Looks up a batch of transfers; see [`Ledger::lookup_transfers`].
    ///
    /// # Errors
    ///
    /// [`BatchError::TooLarge`] for more than [`BATCH_MAX`](crate::BATCH_MAX) ids.
    pub fn lookup_transfers(&self, ids: &[TransferId]) -> Result<Vec<StoredTransfer>, BatchError> {
        self.ledger.lock().lookup_transfers(ids)
    }

    /// An account's transfers; see [`Ledger::get_account_transfers`].
    ///
    /// # Errors
    ///
    /// [`FilterError`] for a filter no query can answer, naming the field.
    pub fn get_account_transfers(
        &self,
        filter: &AccountFilter,
    ) -> Result<Vec<StoredTransfer>, FilterError> {
        self.ledger.lock().get_account_transfers(filter)
    }

    /// An account's balance history; see [`Ledger::get_account_balances`].
    ///
    /// # Errors
    ///
    /// [`FilterError`] for a filter no query can answer, naming the field.
    pub fn get_account_balances(
        &self,
        filter: &AccountFilter,
    ) -> Result<Vec<AccountBalance>, FilterError> {
        self.ledger.lock().get_account_balances(filter)
    }

    /// Accounts by their fields; see [`Ledger::query_accounts`].
    ///
    /// # Errors
    ///
    /// [`FilterError`] for a filter no query can answer, naming the field.
    pub fn query_accounts(&self, filter: &QueryFilter) -> Result<Vec<Account>, FilterError> {
        self.ledger.lock().query_accounts(filter)
    }

    /// Transfers by their fields; see [`Ledger::query_transfers`].
    ///
    /// # Errors
    ///
    /// [`FilterError`] for a filter no query can answer, naming the field.
    pub fn query_transfers(
        &self,
        filter: &QueryFilter,
    ) -> Result<Vec<StoredTransfer>, FilterError> {
        self.ledger.lock().query_transfers(filter)
    }

    /// How many transfer ids and pending timeouts the ledger remembers; see
    /// [`Ledger::remembered`].
    pub fn remembered(&self) -> Remembered {
        self.ledger.lock().remembered()
    }

    /// Checks the ledger's invariants; see [`Ledger::assert_invariants`].
    ///
    /// # Panics
    ///
    /// If an invariant is broken (a bug in this crate).
    pub fn assert_invariants(&self) {
        self.ledger.lock().assert_invariants();
    }
}

/// Reports a batch's results to an operator: how many were created now, how many were
/// replays (`exists`, a retry made harmless) and how many failed. One event per batch,
/// never one per event: a batch holds up to `BATCH_MAX`.
pub(crate) fn trace_batch<T: Copy + PartialEq>(results: &[T], created: T, exists: T) {
    #[cfg(feature = "tracing")]
    {
        let count = |code: T| results.iter().filter(|r| **r == code).count();
        let (created, replays) = (count(created), count(exists));
        let failed = results.len() - created - replays;
        idem_core::trace_event!(INFO, created, replays, failed, "batch applied");
    }
    #[cfg(not(feature = "tracing"))]
    let _ = (results, created, exists);
}
