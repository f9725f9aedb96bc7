//! Accounts, transfers and their result codes, as TigerBeetle defines them (a subset).

/// An account id: any `u128` except 0 and `u128::MAX`.
pub type AccountId = u128;
/// The largest amount, `u128::MAX`: a post of it posts its pending transfer's whole
/// amount (TigerBeetle's `AMOUNT_MAX`).
pub const AMOUNT_MAX: u128 = u128::MAX;
/// A transfer id, chosen by the client once per intended transfer: any `u128` except 0
/// and `u128::MAX`.
pub type TransferId = u128;

bitflags::bitflags! {
    /// Account flags, at TigerBeetle's bit positions where the meaning is the same.
    ///
    /// Bits this wallet does not implement (TigerBeetle's `linked` 0 and `imported` 4, and
    /// every bit above `closed`) are refused with [`AccountResult::ReservedFlag`], so a
    /// flag a client sets is never silently ignored and stored.
    ///
    /// ```
    /// use idem_wallet::AccountFlags;
    ///
    /// let wallet = AccountFlags::DEBITS_MUST_NOT_EXCEED_CREDITS;
    /// assert_eq!(format!("{wallet:?}"), "AccountFlags(DEBITS_MUST_NOT_EXCEED_CREDITS)");
    /// assert_eq!(wallet.bits(), 1 << 1);
    /// assert!(!AccountFlags::from_bits_retain(1 << 4).is_supported()); // `imported`
    /// ```
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct AccountFlags: u16 {
        /// Debits (pending and posted) may never exceed posted credits: a customer wallet
        /// (bit 1).
        const DEBITS_MUST_NOT_EXCEED_CREDITS = 1 << 1;
        /// Credits (pending and posted) may never exceed posted debits (bit 2).
        const CREDITS_MUST_NOT_EXCEED_DEBITS = 1 << 2;
        /// Keeps the account's balances after every transfer that touches it, for
        /// [`Wallet::get_account_balances`](crate::Wallet::get_account_balances) (bit 3).
        const HISTORY = 1 << 3;
        /// Closed: no new transfer may touch the account (bit 5, TigerBeetle's `closed`;
        /// set by `close_account`).
        const CLOSED = 1 << 5;
    }
}

impl AccountFlags {
    /// Whether every set bit is one this wallet implements (no reserved bit is set).
    pub fn is_supported(self) -> bool {
        Self::from_bits(self.bits()).is_some()
    }
}

bitflags::bitflags! {
    /// Transfer flags, at TigerBeetle's bit positions.
    ///
    /// Bits this wallet does not implement (TigerBeetle's `balancing_debit` 4,
    /// `balancing_credit` 5, `closing_debit` 6, `closing_credit` 7, `imported` 8, and every
    /// bit above) are refused with [`TransferResult::ReservedFlag`].
    ///
    /// ```
    /// use idem_wallet::TransferFlags;
    ///
    /// let flags = TransferFlags::LINKED | TransferFlags::PENDING;
    /// assert_eq!(format!("{flags:?}"), "TransferFlags(LINKED | PENDING)");
    /// assert_eq!(TransferFlags::from_bits(1 << 14), None); // reserved
    /// ```
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct TransferFlags: u16 {
        /// Linked to the next event: the chain applies all-or-nothing (bit 0).
        const LINKED = 1 << 0;
        /// A pending (two-phase) transfer: reserves the amount until posted, voided or
        /// expired (bit 1).
        const PENDING = 1 << 1;
        /// Posts the pending transfer named by `pending_id` (bit 2, TigerBeetle's
        /// `post_pending_transfer`).
        const POST_PENDING = 1 << 2;
        /// Voids the pending transfer named by `pending_id` (bit 3, TigerBeetle's
        /// `void_pending_transfer`).
        const VOID_PENDING = 1 << 3;
    }
}

impl TransferFlags {
    /// Whether every set bit is one this wallet implements (no reserved bit is set).
    pub fn is_supported(self) -> bool {
        Self::from_bits(self.bits()).is_some()
    }
}

/// An account to create.
///
/// With the default flags an account's balance may go either way without limit: a user's
/// wallet that must never be overdrawn needs
/// [`AccountFlags::DEBITS_MUST_NOT_EXCEED_CREDITS`] (and a bank's or a house account,
/// which pays money out, usually none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct NewAccount {
    /// The account id.
    pub id: AccountId,
    /// The ledger (currency, asset), non-zero; transfers only move money within one
    /// ledger. `Default` leaves it 0, which is refused: set it.
    pub ledger: u32,
    /// A chart-of-accounts code, non-zero (`Default` leaves it 0: set it).
    pub code: u16,
    /// Balance limits, none by default (see above), and `HISTORY`.
    pub flags: AccountFlags,
    /// Opaque client data (a foreign key, say), stored, compared on a repeat and
    /// queryable ([`QueryFilter`](crate::QueryFilter)); 0 is none.
    pub user_data_128: u128,
    /// Opaque client data, as `user_data_128`.
    pub user_data_64: u64,
    /// Opaque client data, as `user_data_128`.
    pub user_data_32: u32,
}

/// An account and its balances, in minor units.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Account {
    /// The account id.
    pub id: AccountId,
    /// The ledger.
    pub ledger: u32,
    /// The code.
    pub code: u16,
    /// The flags.
    pub flags: AccountFlags,
    /// The client's data, as created.
    pub user_data_128: u128,
    /// The client's data, as created.
    pub user_data_64: u64,
    /// The client's data, as created.
    pub user_data_32: u32,
    /// Reserved by pending transfers that debit this account.
    pub debits_pending: u128,
    /// Posted debits.
    pub debits_posted: u128,
    /// Reserved by pending transfers that credit this account.
    pub credits_pending: u128,
    /// Posted credits.
    pub credits_posted: u128,
    /// When it was created (the ledger's timestamp).
    pub timestamp: u64,
}

/// Balances, by the double-entry convention: a debit moves money out of the debit account
/// and a credit into the credit account, so an account that holds money for its owner (a
/// user's wallet) has more credits than debits, and one that pays money out (the bank's
/// funding account) more debits than credits. Posted amounts only; pending ones are
/// reserved, not moved.
///
/// ```
/// use idem_wallet::{AccountFlags, NewAccount, Transfer, Wallet};
///
/// let wallet = Wallet::new();
/// let floor = AccountFlags::DEBITS_MUST_NOT_EXCEED_CREDITS;
/// wallet.create_accounts(&[
///     NewAccount { id: 1, ledger: 1, code: 1, ..Default::default() },              // the bank
///     NewAccount { id: 2, ledger: 1, code: 1, flags: floor, ..Default::default() }, // alice
/// ])?;
/// let top_up = Transfer {
///     id: 7, debit_account_id: 1, credit_account_id: 2, amount: 100, ledger: 1, code: 1,
///     ..Default::default()
/// };
/// wallet.create_transfers(&[top_up])?;
/// let (bank, alice) = (wallet.account(1).expect("bank"), wallet.account(2).expect("alice"));
/// assert_eq!((alice.credit_balance(), alice.available()), (100, 100));
/// assert_eq!((bank.debit_balance(), bank.credit_balance()), (100, 0));
/// # Ok::<(), idem_wallet::BatchError>(())
/// ```
impl Account {
    /// Posted credits less posted debits (0 if the debits are more): what an account that
    /// holds money for its owner holds.
    pub fn credit_balance(&self) -> u128 {
        self.credits_posted.saturating_sub(self.debits_posted)
    }

    /// Posted debits less posted credits (0 if the credits are more): what an account that
    /// pays money out has paid.
    pub fn debit_balance(&self) -> u128 {
        self.debits_posted.saturating_sub(self.credits_posted)
    }

    /// What a debit may still take from an account with
    /// [`AccountFlags::DEBITS_MUST_NOT_EXCEED_CREDITS`]: its credit balance less what
    /// pending debits reserve (0 if they reserve all of it).
    pub fn available(&self) -> u128 {
        self.credit_balance().saturating_sub(self.debits_pending)
    }
}

/// A transfer: move `amount` from `debit_account_id` to `credit_account_id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Transfer {
    /// The transfer id: the client's idempotency key for this transfer.
    pub id: TransferId,
    /// The account debited.
    pub debit_account_id: AccountId,
    /// The account credited.
    pub credit_account_id: AccountId,
    /// The amount moved. A post moves this much of its pending transfer's reservation
    /// and restores the rest, or the whole of it for [`AMOUNT_MAX`] (0 posts nothing); a
    /// void names 0 or the pending amount. A transfer of 0 is allowed and moves nothing.
    pub amount: u128,
    /// For a post or void: the pending transfer's id; otherwise 0.
    pub pending_id: TransferId,
    /// For a pending transfer: seconds until it expires (0: never).
    pub timeout: u32,
    /// The ledger; must match both accounts' (a post or void may leave it 0). `Default`
    /// leaves it 0, which a plain or pending transfer is refused for: set it.
    pub ledger: u32,
    /// A code, non-zero (a post or void may leave it 0; `Default` leaves it 0: set it).
    pub code: u16,
    /// Flags.
    pub flags: TransferFlags,
    /// Opaque client data (an order id, say), stored, compared on a repeat and queryable
    /// ([`QueryFilter`](crate::QueryFilter), [`AccountFilter`](crate::AccountFilter)); 0
    /// is none, and a post or void that leaves it 0 keeps its pending transfer's.
    pub user_data_128: u128,
    /// Opaque client data, as `user_data_128`.
    pub user_data_64: u64,
    /// Opaque client data, as `user_data_128`.
    pub user_data_32: u32,
}

/// Declares a result code enum with `ALL`, every code in declaration order (the order of
/// their one-byte codes in the durable log: `ALL[i] as u8 == i`), and its `FromStr`.
macro_rules! result_codes {
    (
        $(#[$meta:meta])*
        pub enum $name:ident { $($(#[$code_meta:meta])* $code:ident,)* }
    ) => {
        $(#[$meta])*
        pub enum $name { $($(#[$code_meta])* $code,)* }

        impl $name {
            /// Every code, in the order of their one-byte codes in the durable log (the
            /// declaration order: `ALL[i] as u8 == i`).
            pub const ALL: &[$name] = &[$(Self::$code),*];
        }

        /// Parses TigerBeetle's name for a code, as [`Display`](std::fmt::Display) writes
        /// it.
        impl std::str::FromStr for $name {
            type Err = UnknownResultCode;

            fn from_str(s: &str) -> Result<Self, UnknownResultCode> {
                let code = Self::ALL.iter().copied().find(|code| code.to_string() == s);
                code.ok_or_else(|| UnknownResultCode(s.to_owned()))
            }
        }
    };
}

result_codes! {
/// The outcome of one account in a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AccountResult {
    /// Created now.
    Created,
    /// Already exists with identical fields: the replay, a no-op.
    Exists,
    /// Already exists with a different ledger.
    ExistsWithDifferentLedger,
    /// Already exists with a different code.
    ExistsWithDifferentCode,
    /// Already exists with different flags.
    ExistsWithDifferentFlags,
    /// Already exists with a different `user_data_128`.
    ExistsWithDifferentUserData128,
    /// Already exists with a different `user_data_64`.
    ExistsWithDifferentUserData64,
    /// Already exists with a different `user_data_32`.
    ExistsWithDifferentUserData32,
    /// The id was 0.
    IdMustNotBeZero,
    /// The id was `u128::MAX`.
    IdMustNotBeIntMax,
    /// The ledger was 0.
    LedgerMustNotBeZero,
    /// The code was 0.
    CodeMustNotBeZero,
    /// Both balance limits at once.
    FlagsAreMutuallyExclusive,
    /// The ledger holds its capacity of accounts.
    AccountsFull,
    /// A flag bit this wallet does not implement was set (TigerBeetle's
    /// `reserved_flag`); see [`AccountFlags`]. Nothing was created.
    ReservedFlag,
}
}

result_codes! {
/// The outcome of one transfer in a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TransferResult {
    /// Applied now.
    Created,
    /// Already applied with identical fields: the replay, a no-op.
    Exists,
    /// Already applied with different flags.
    ExistsWithDifferentFlags,
    /// Already applied with a different pending id.
    ExistsWithDifferentPendingId,
    /// Already applied with a different timeout.
    ExistsWithDifferentTimeout,
    /// Already applied with a different debit account.
    ExistsWithDifferentDebitAccountId,
    /// Already applied with a different credit account.
    ExistsWithDifferentCreditAccountId,
    /// Already applied with a different amount.
    ExistsWithDifferentAmount,
    /// Already applied with a different ledger.
    ExistsWithDifferentLedger,
    /// Already applied with a different code.
    ExistsWithDifferentCode,
    /// Already applied with a different `user_data_128`.
    ExistsWithDifferentUserData128,
    /// Already applied with a different `user_data_64`.
    ExistsWithDifferentUserData64,
    /// Already applied with a different `user_data_32`.
    ExistsWithDifferentUserData32,
    /// This id failed before on the ledger's state: a retry cannot turn it into a success.
    IdAlreadyFailed,
    /// The id was 0.
    IdMustNotBeZero,
    /// The id was `u128::MAX`.
    IdMustNotBeIntMax,
    /// Another event of its linked chain failed; nothing of the chain was applied.
    LinkedEventFailed,
    /// The batch ended inside a linked chain.
    LinkedEventChainOpen,
    /// More than one of pending, post and void.
    FlagsAreMutuallyExclusive,
    /// The debit account id was 0.
    DebitAccountIdMustNotBeZero,
    /// The debit account id was `u128::MAX`.
    DebitAccountIdMustNotBeIntMax,
    /// The credit account id was 0.
    CreditAccountIdMustNotBeZero,
    /// The credit account id was `u128::MAX`.
    CreditAccountIdMustNotBeIntMax,
    /// Debit and credit account were the same.
    AccountsMustBeDifferent,
    /// A post or void without a pending id.
    PendingIdMustNotBeZero,
    /// A post or void naming `u128::MAX` as its pending id.
    PendingIdMustNotBeIntMax,
    /// A pending id on a transfer that is neither post nor void.
    PendingIdMustBeZero,
    /// A post or void naming itself.
    PendingIdMustBeDifferent,
    /// A timeout on a transfer that is not pending.
    TimeoutReservedForPendingTransfer,
    /// The ledger was 0.
    LedgerMustNotBeZero,
    /// The code was 0.
    CodeMustNotBeZero,
    /// No such debit account.
    DebitAccountNotFound,
    /// No such credit account.
    CreditAccountNotFound,
    /// The accounts are on different ledgers.
    AccountsMustHaveTheSameLedger,
    /// The transfer's ledger differs from the accounts'.
    TransferMustHaveTheSameLedgerAsAccounts,
    /// The debit account is closed (a void may still release a reservation on it).
    DebitAccountAlreadyClosed,
    /// The credit account is closed (a void may still release a reservation on it).
    CreditAccountAlreadyClosed,
    /// No pending transfer with that id.
    PendingTransferNotFound,
    /// The named transfer is not a pending one.
    PendingTransferNotPending,
    /// A post or void names a debit account other than its pending transfer's.
    PendingTransferHasDifferentDebitAccountId,
    /// A post or void names a credit account other than its pending transfer's.
    PendingTransferHasDifferentCreditAccountId,
    /// A post or void names a ledger other than its pending transfer's.
    PendingTransferHasDifferentLedger,
    /// A post or void names a code other than its pending transfer's.
    PendingTransferHasDifferentCode,
    /// A void of less than the pending amount (a void names 0 or the whole amount).
    PendingTransferHasDifferentAmount,
    /// The pending transfer was posted already.
    PendingTransferAlreadyPosted,
    /// The pending transfer was voided already.
    PendingTransferAlreadyVoided,
    /// The pending transfer expired.
    PendingTransferExpired,
    /// A post or void of more than the pending amount (and, for a post, less than
    /// [`AMOUNT_MAX`]).
    ExceedsPendingTransferAmount,
    /// The debit account would owe more than its credits.
    ExceedsCredits,
    /// The credit account would hold more than its debits.
    ExceedsDebits,
    /// A balance would overflow `u128`.
    Overflow,
    /// The ledger holds its capacity of transfers.
    TransfersFull,
    /// A flag bit this wallet does not implement was set (TigerBeetle's
    /// `reserved_flag`); see [`TransferFlags`]. A malformed request: the id stays free.
    ReservedFlag,
}
}

impl TransferResult {
    /// Whether this failure uses up its id: a retry under the id answers
    /// `IdAlreadyFailed`. These are TigerBeetle's transient codes, the ones that depend on
    /// state a later batch may change (an account or pending transfer created, a balance
    /// moved, an account closed), so that an old failure never turns into a success the
    /// client did not expect. Every other failure is decided by the request and records
    /// that cannot change, so it is decided again, the same, on a retry (and a corrected
    /// request under the same id is judged afresh); `Overflow` alone depends on balances
    /// and still uses up no id, as in TigerBeetle.
    pub fn uses_up_id(self) -> bool {
        matches!(
            self,
            Self::DebitAccountNotFound
                | Self::CreditAccountNotFound
                | Self::PendingTransferNotFound
                | Self::ExceedsCredits
                | Self::ExceedsDebits
                | Self::DebitAccountAlreadyClosed
                | Self::CreditAccountAlreadyClosed
        )
    }
}

/// Writes a variant's name as TigerBeetle spells its result codes: `ExceedsCredits` as
/// `exceeds_credits`, `ExistsWithDifferentUserData128` as
/// `exists_with_different_user_data_128`. Derived from `Debug`, so a new code can never
/// lack a name.
fn snake_case(f: &mut std::fmt::Formatter<'_>, camel: &str) -> std::fmt::Result {
    let mut previous: Option<char> = None;
    for c in camel.chars() {
        let word = c.is_ascii_uppercase()
            || (c.is_ascii_digit() && previous.is_some_and(|p| !p.is_ascii_digit()));
        if word && previous.is_some() {
            f.write_str("_")?;
        }
        write!(f, "{}", c.to_ascii_lowercase())?;
        previous = Some(c);
    }
    Ok(())
}

/// TigerBeetle's name for the code: `exists_with_different_flags`.
///
/// ```
/// assert_eq!(idem_wallet::AccountResult::AccountsFull.to_string(), "accounts_full");
/// ```
impl std::fmt::Display for AccountResult {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        snake_case(f, &format!("{self:?}"))
    }
}

/// TigerBeetle's name for the code: `exceeds_credits`; it parses back.
///
/// ```
/// use idem_wallet::TransferResult;
///
/// assert_eq!(TransferResult::IdAlreadyFailed.to_string(), "id_already_failed");
/// assert_eq!("exceeds_credits".parse(), Ok(TransferResult::ExceedsCredits));
/// ```
impl std::fmt::Display for TransferResult {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        snake_case(f, &format!("{self:?}"))
    }
}

/// A result code's name that no code has (`"exceeds_credit"` for `exceeds_credits`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a result code: codes are TigerBeetle's names, such as exceeds_credits")]
pub struct UnknownResultCode(pub String);

/// What happened to a pending transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PendingState {
    /// Reserving its amount.
    Pending,
    /// Posted by a later transfer.
    Posted,
    /// Voided by a later transfer.
    Voided,
    /// Its timeout passed.
    Expired,
}

/// A stored transfer, with the ledger's timestamp and, for pending ones, their state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StoredTransfer {
    /// The transfer: a plain or pending one as submitted; a post or void resolved, as
    /// TigerBeetle keeps it (its pending transfer's accounts, ledger and code, the amount it
    /// settled, a void's being the pending amount, and the pending transfer's user data if
    /// it left its own 0). A repeat is compared with it.
    pub transfer: Transfer,
    /// The amount actually moved: a post's settled amount (all of it for `AMOUNT_MAX`), 0 for
    /// a void.
    pub amount_applied: u128,
    /// When it was applied.
    pub timestamp: u64,
    /// For a pending transfer, what became of it.
    pub pending: Option<PendingState>,
}

/// One result per event of a batch, in the batch's order. A batch's failures come back
/// here, inside `Ok`, never as an `Err` (an `Err` is a batch refused whole): a result
/// that is not read is a failure nobody saw, so the compiler warns about one dropped.
/// [`all_applied`](Self::all_applied) turns the failures into an error for a caller
/// that expects none.
///
/// ```
/// use idem_wallet::{AccountFlags, NewAccount, Transfer, TransferResult, Wallet};
///
/// let wallet = Wallet::new();
/// let account = |id| NewAccount { id, ledger: 1, code: 1, ..Default::default() };
/// wallet.create_accounts(&[account(1), account(2)])?.all_applied()?;
/// let pay = Transfer {
///     id: 7, debit_account_id: 1, credit_account_id: 2, amount: 5, ledger: 1, code: 1,
///     ..Default::default()
/// };
/// wallet.create_transfers(&[pay])?.all_applied()?;
/// let missing = Transfer { id: 8, credit_account_id: 99, ..pay };
/// let refused = wallet.create_transfers(&[pay, missing])?;
/// assert_eq!(refused, [TransferResult::Exists, TransferResult::CreditAccountNotFound]);
/// let error = refused.all_applied().expect_err("one failed");
/// assert_eq!(error.to_string(), "1 of 2 events failed: #1 credit_account_not_found");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "a batch's failures come back inside Ok: read the results, or call all_applied"]
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Results<R> {
    codes: Vec<R>,
    timestamps: Vec<u64>,
}

/// A result code that says whether its event was applied: created now, or already
/// (`Exists`, a replay: treat it as created).
pub trait Applied: Copy + std::fmt::Display {
    /// Whether the event was applied, now or by an earlier attempt.
    fn applied(self) -> bool;
}

impl Applied for TransferResult {
    fn applied(self) -> bool {
        matches!(self, Self::Created | Self::Exists)
    }
}

impl Applied for AccountResult {
    fn applied(self) -> bool {
        matches!(self, Self::Created | Self::Exists)
    }
}

impl<R> Results<R> {
    /// One code and one timestamp per event.
    pub(crate) fn new(codes: Vec<R>, timestamps: Vec<u64>) -> Self {
        debug_assert_eq!(codes.len(), timestamps.len(), "a timestamp per event");
        Self { codes, timestamps }
    }

    /// The result codes as a vector.
    pub fn into_vec(self) -> Vec<R> {
        self.codes
    }

    /// One timestamp per event, as TigerBeetle 0.17 returns them: for an event created
    /// now, its record's new timestamp; for `Exists` (a replay), the timestamp the record
    /// got when it was created, so a retry learns the original's; for a failure, one of
    /// its own from the same counter, which names no record. So every event but a replay
    /// has a timestamp no other event has, later than every earlier one's (nanoseconds,
    /// as every timestamp).
    ///
    /// ```
    /// use idem_wallet::{AccountFlags, NewAccount, Transfer, Wallet};
    ///
    /// let wallet = Wallet::new();
    /// let account = |id| NewAccount { id, ledger: 1, code: 1, ..Default::default() };
    /// wallet.create_accounts(&[account(1), account(2)])?.all_applied()?;
    /// let pay = Transfer {
    ///     id: 7, debit_account_id: 1, credit_account_id: 2, amount: 5, ledger: 1, code: 1,
    ///     ..Default::default()
    /// };
    /// let first = wallet.create_transfers(&[pay])?;
    /// let retry = wallet.create_transfers(&[pay])?;
    /// assert_eq!(first.timestamps(), retry.timestamps(), "the retry learns the original's");
    /// assert_eq!(wallet.transfer(7).map(|t| t.timestamp), Some(first.timestamps()[0]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn timestamps(&self) -> &[u64] {
        &self.timestamps
    }
}

impl<R: Applied> Results<R> {
    /// `Ok` if every event was applied (created, or already: `Exists`), else the failures
    /// with their places in the batch.
    ///
    /// # Errors
    ///
    /// [`NotApplied`], listing each event that was not applied.
    pub fn all_applied(&self) -> Result<(), NotApplied<R>> {
        let failed: Vec<(usize, R)> =
            self.codes.iter().copied().enumerate().filter(|(_, r)| !r.applied()).collect();
        if failed.is_empty() {
            return Ok(());
        }
        Err(NotApplied { failed, of: self.codes.len() })
    }
}

impl<R> std::ops::Deref for Results<R> {
    type Target = [R];

    fn deref(&self) -> &[R] {
        &self.codes
    }
}

impl<R: std::fmt::Debug> std::fmt::Debug for Results<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.codes.fmt(f)
    }
}

impl<R: PartialEq> PartialEq<Vec<R>> for Results<R> {
    fn eq(&self, other: &Vec<R>) -> bool {
        self.codes == *other
    }
}

impl<R: PartialEq> PartialEq<Results<R>> for Vec<R> {
    fn eq(&self, other: &Results<R>) -> bool {
        *self == other.codes
    }
}

impl<R: PartialEq, const N: usize> PartialEq<[R; N]> for Results<R> {
    fn eq(&self, other: &[R; N]) -> bool {
        self.codes == *other
    }
}

impl<R: PartialEq> PartialEq<[R]> for Results<R> {
    fn eq(&self, other: &[R]) -> bool {
        self.codes == *other
    }
}

impl<R> IntoIterator for Results<R> {
    type Item = R;
    type IntoIter = std::vec::IntoIter<R>;

    fn into_iter(self) -> Self::IntoIter {
        self.codes.into_iter()
    }
}

impl<'a, R> IntoIterator for &'a Results<R> {
    type Item = &'a R;
    type IntoIter = std::slice::Iter<'a, R>;

    fn into_iter(self) -> Self::IntoIter {
        self.codes.iter()
    }
}

/// The events of a batch that were not applied, by their place in it, and how many it
/// held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotApplied<R> {
    /// Each event not applied: its place in the batch and its result.
    pub failed: Vec<(usize, R)>,
    /// How many events the batch held.
    pub of: usize,
}

impl<R: std::fmt::Display> std::fmt::Display for NotApplied<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} of {} events failed:", self.failed.len(), self.of)?;
        for (i, (at, result)) in self.failed.iter().enumerate() {
            let sep = if i == 0 { " " } else { ", " };
            write!(f, "{sep}#{at} {result}")?;
        }
        Ok(())
    }
}

impl<R: std::fmt::Debug + std::fmt::Display> std::error::Error for NotApplied<R> {}
