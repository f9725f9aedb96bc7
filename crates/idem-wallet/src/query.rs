//! The queries beside lookups by id, as TigerBeetle has them: an account's transfers and
//! its balance history ([`AccountFilter`]), and accounts or transfers by their user data,
//! ledger and code ([`QueryFilter`]). Every answer is in timestamp order (or reversed) and
//! bounded by the filter's `limit`, at most [`QUERY_LIMIT_MAX`].
//!
//! The ledger keeps an index for each: per account, the positions of the transfers that
//! touch it (and, for a `HISTORY` account, its balances after each); per field value, the
//! positions of the records that hold it. Positions grow with timestamps, so a time range
//! is two binary searches on one list, and a query walks the shortest list its filter
//! names, checking the other fields on each record it passes.

use hashbrown::HashMap;

use crate::ledger::BATCH_MAX;
use crate::types::{Account, AccountId, Transfer};

/// The most results one query returns (TigerBeetle's bound, what fits one reply): a
/// larger `limit` is served up to it, as TigerBeetle serves one. A caller who wants more
/// pages: the next query starts one nanosecond past the last timestamp returned.
pub const QUERY_LIMIT_MAX: u32 = BATCH_MAX as u32;

bitflags::bitflags! {
    /// Which of an account's transfers an [`AccountFilter`] returns, and in which order
    /// (TigerBeetle's `AccountFilterFlags`, at its bit positions).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct AccountFilterFlags: u32 {
        /// Transfers that debit the account (bit 0).
        const DEBITS = 1 << 0;
        /// Transfers that credit the account (bit 1).
        const CREDITS = 1 << 1;
        /// Newest first (bit 2); oldest first without it.
        const REVERSED = 1 << 2;
    }
}

bitflags::bitflags! {
    /// The order of a [`QueryFilter`]'s answer (TigerBeetle's `QueryFilterFlags`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct QueryFilterFlags: u32 {
        /// Newest first (bit 0); oldest first without it.
        const REVERSED = 1 << 0;
    }
}

/// One account's transfers, or its balance history, as TigerBeetle's `AccountFilter`. A
/// field left 0 filters nothing; `account_id`, `limit` and one of `DEBITS` and `CREDITS`
/// must be set.
///
/// ```
/// use idem_wallet::{AccountFilter, AccountFilterFlags, NewAccount, Transfer, Wallet};
///
/// let wallet = Wallet::new();
/// let account = |id| NewAccount { id, ledger: 1, code: 1, ..Default::default() };
/// wallet.create_accounts(&[account(1), account(2)])?.all_applied()?;
/// let pay = |id, order| Transfer {
///     id, debit_account_id: 1, credit_account_id: 2, amount: 5, ledger: 1, code: 1,
///     user_data_128: order, ..Default::default()
/// };
/// wallet.create_transfers(&[pay(7, 100), pay(8, 200), pay(9, 100)])?.all_applied()?;
/// let filter = AccountFilter {
///     account_id: 2,
///     user_data_128: 100,
///     limit: 10,
///     flags: AccountFilterFlags::CREDITS | AccountFilterFlags::REVERSED,
///     ..Default::default()
/// };
/// let found: Vec<u128> =
///     wallet.get_account_transfers(&filter)?.iter().map(|t| t.transfer.id).collect();
/// assert_eq!(found, [9, 7], "order 100's credits, newest first");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct AccountFilter {
    /// The account, neither 0 nor `u128::MAX`.
    pub account_id: AccountId,
    /// Only transfers with this `user_data_128` (0: any).
    pub user_data_128: u128,
    /// Only transfers with this `user_data_64` (0: any).
    pub user_data_64: u64,
    /// Only transfers with this `user_data_32` (0: any).
    pub user_data_32: u32,
    /// Only transfers with this code (0: any).
    pub code: u16,
    /// The earliest timestamp returned, inclusive (0: no bound).
    pub timestamp_min: u64,
    /// The latest timestamp returned, inclusive (0: no bound).
    pub timestamp_max: u64,
    /// The most results, at least 1; at most [`QUERY_LIMIT_MAX`] come back whatever it
    /// says (as in TigerBeetle): page for more.
    pub limit: u32,
    /// Debits, credits or both, and the order.
    pub flags: AccountFilterFlags,
}

/// Accounts or transfers by the fields they were created with, as TigerBeetle's
/// `QueryFilter`: a record matches when it has every field the filter sets (a field left
/// 0 filters nothing); `limit` must be set.
///
/// ```
/// use idem_wallet::{NewAccount, QueryFilter, Wallet};
///
/// let wallet = Wallet::new();
/// let account = |id, code, customer| NewAccount {
///     id, ledger: 1, code, user_data_128: customer, ..Default::default()
/// };
/// wallet.create_accounts(&[account(1, 10, 42), account(2, 20, 42), account(3, 10, 7)])?
///     .all_applied()?;
/// let filter = QueryFilter { user_data_128: 42, code: 10, limit: 10, ..Default::default() };
/// let found: Vec<u128> = wallet.query_accounts(&filter)?.iter().map(|a| a.id).collect();
/// assert_eq!(found, [1]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct QueryFilter {
    /// Only records with this `user_data_128` (0: any).
    pub user_data_128: u128,
    /// Only records with this `user_data_64` (0: any).
    pub user_data_64: u64,
    /// Only records with this `user_data_32` (0: any).
    pub user_data_32: u32,
    /// Only records on this ledger (0: any).
    pub ledger: u32,
    /// Only records with this code (0: any).
    pub code: u16,
    /// The earliest timestamp returned, inclusive (0: no bound).
    pub timestamp_min: u64,
    /// The latest timestamp returned, inclusive (0: no bound).
    pub timestamp_max: u64,
    /// The most results, at least 1; at most [`QUERY_LIMIT_MAX`] come back whatever it
    /// says (as in TigerBeetle): page for more.
    pub limit: u32,
    /// The order.
    pub flags: QueryFilterFlags,
}

/// An account's balances just after one transfer that touched it, kept for accounts
/// created with [`AccountFlags::HISTORY`](crate::AccountFlags::HISTORY). The timestamp
/// is that transfer's. A pending transfer that expires changes the balances and adds no
/// entry (as in TigerBeetle): the next transfer's entry shows the change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct AccountBalance {
    /// Reserved by pending debits.
    pub debits_pending: u128,
    /// Posted debits.
    pub debits_posted: u128,
    /// Reserved by pending credits.
    pub credits_pending: u128,
    /// Posted credits.
    pub credits_posted: u128,
    /// The transfer's timestamp.
    pub timestamp: u64,
}

/// A filter was refused: it names what no query can answer. TigerBeetle answers such a
/// filter with nothing; here the error says which field is wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FilterError {
    /// `account_id` was 0 or `u128::MAX`.
    #[error("filter account_id {0} names no account: set the id of the account to query")]
    AccountId(u128),
    /// Neither `DEBITS` nor `CREDITS` was set: no transfer can match.
    #[error("filter flags set neither DEBITS nor CREDITS: set one or both")]
    NoSide,
    /// `limit` was 0.
    #[error(
        "filter limit is 0: set the most results to return (at most {QUERY_LIMIT_MAX} come back)"
    )]
    LimitZero,
    /// `limit` was over [`QUERY_LIMIT_MAX`].
    #[error("filter limit {0} is over {QUERY_LIMIT_MAX}: ask for fewer and page by timestamp_min")]
    LimitTooLarge(u32),
    /// A timestamp bound was `u64::MAX`.
    #[error("filter {0} is u64::MAX: leave it 0 for no bound")]
    TimestampIntMax(&'static str),
    /// `timestamp_min` was after `timestamp_max`: the range is empty.
    #[error("filter timestamp_min {min} is after timestamp_max {max}: swap them")]
    TimestampRange {
        /// The filter's `timestamp_min`.
        min: u64,
        /// The filter's `timestamp_max`.
        max: u64,
    },
    /// A flag bit no filter defines was set.
    #[error("filter flags {0:#x} set a reserved bit: use the flags the filter type names")]
    ReservedFlag(u32),
}

/// The bounds every filter shares, checked: the inclusive timestamp range and the limit.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bounds {
    min: u64,
    max: u64,
    limit: usize,
    reversed: bool,
}

impl Bounds {
    fn new(min: u64, max: u64, limit: u32, reversed: bool) -> Result<Self, FilterError> {
        if limit == 0 {
            return Err(FilterError::LimitZero);
        }
        for (bound, name) in [(min, "timestamp_min"), (max, "timestamp_max")] {
            if bound == u64::MAX {
                return Err(FilterError::TimestampIntMax(name));
            }
        }
        let max = if max == 0 { u64::MAX } else { max };
        if min > max {
            return Err(FilterError::TimestampRange { min, max });
        }
        // As in TigerBeetle, a larger limit is served up to what one answer holds.
        let limit = limit.min(QUERY_LIMIT_MAX);
        Ok(Self { min, max, limit: limit as usize, reversed })
    }
}

impl AccountFilter {
    /// The filter's bounds, or why it is refused.
    pub(crate) fn check(&self) -> Result<Bounds, FilterError> {
        if self.account_id == 0 || self.account_id == u128::MAX {
            return Err(FilterError::AccountId(self.account_id));
        }
        if AccountFilterFlags::from_bits(self.flags.bits()).is_none() {
            return Err(FilterError::ReservedFlag(self.flags.bits()));
        }
        let sides = AccountFilterFlags::DEBITS | AccountFilterFlags::CREDITS;
        if !self.flags.intersects(sides) {
            return Err(FilterError::NoSide);
        }
        let reversed = self.flags.contains(AccountFilterFlags::REVERSED);
        Bounds::new(self.timestamp_min, self.timestamp_max, self.limit, reversed)
    }

    /// The transfer fields the filter asks for.
    pub(crate) fn fields(&self) -> Fields {
        Fields {
            user_data_128: self.user_data_128,
            user_data_64: self.user_data_64,
            user_data_32: self.user_data_32,
            ledger: 0,
            code: self.code,
        }
    }

    /// Whether `t`, a transfer that touches the account, passes the filter.
    pub(crate) fn matches(&self, t: &Transfer) -> bool {
        let debit = self.flags.contains(AccountFilterFlags::DEBITS)
            && t.debit_account_id == self.account_id;
        let credit = self.flags.contains(AccountFilterFlags::CREDITS)
            && t.credit_account_id == self.account_id;
        (debit || credit) && Fields::of_transfer(t).has(&self.fields())
    }
}

impl QueryFilter {
    /// The filter's bounds, or why it is refused.
    pub(crate) fn check(&self) -> Result<Bounds, FilterError> {
        if QueryFilterFlags::from_bits(self.flags.bits()).is_none() {
            return Err(FilterError::ReservedFlag(self.flags.bits()));
        }
        let reversed = self.flags.contains(QueryFilterFlags::REVERSED);
        Bounds::new(self.timestamp_min, self.timestamp_max, self.limit, reversed)
    }

    /// The fields the filter asks for.
    pub(crate) fn fields(&self) -> Fields {
        Fields {
            user_data_128: self.user_data_128,
            user_data_64: self.user_data_64,
            user_data_32: self.user_data_32,
            ledger: self.ledger,
            code: self.code,
        }
    }
}

/// The queryable fields of a record (an account or a transfer); 0 is none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fields {
    pub(crate) user_data_128: u128,
    pub(crate) user_data_64: u64,
    pub(crate) user_data_32: u32,
    pub(crate) ledger: u32,
    pub(crate) code: u16,
}

impl Fields {
    pub(crate) fn of_account(a: &Account) -> Self {
        Self {
            user_data_128: a.user_data_128,
            user_data_64: a.user_data_64,
            user_data_32: a.user_data_32,
            ledger: a.ledger,
            code: a.code,
        }
    }

    pub(crate) fn of_transfer(t: &Transfer) -> Self {
        Self {
            user_data_128: t.user_data_128,
            user_data_64: t.user_data_64,
            user_data_32: t.user_data_32,
            ledger: t.ledger,
            code: t.code,
        }
    }

    /// The index keys of the fields set, 0s left out.
    fn keys(&self) -> impl Iterator<Item = Key> {
        [
            (self.user_data_128 != 0).then_some(Key::UserData128(self.user_data_128)),
            (self.user_data_64 != 0).then_some(Key::UserData64(self.user_data_64)),
            (self.user_data_32 != 0).then_some(Key::UserData32(self.user_data_32)),
            (self.ledger != 0).then_some(Key::Ledger(self.ledger)),
            (self.code != 0).then_some(Key::Code(self.code)),
        ]
        .into_iter()
        .flatten()
    }

    /// Whether these fields have every field `wanted` sets.
    pub(crate) fn has(&self, wanted: &Self) -> bool {
        let same = |want: u128, have: u128| want == 0 || want == have;
        same(wanted.user_data_128, self.user_data_128)
            && same(wanted.user_data_64.into(), self.user_data_64.into())
            && same(wanted.user_data_32.into(), self.user_data_32.into())
            && same(wanted.ledger.into(), self.ledger.into())
            && same(wanted.code.into(), self.code.into())
    }
}

/// One field's value, as an index key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Key {
    UserData128(u128),
    UserData64(u64),
    UserData32(u32),
    Ledger(u32),
    Code(u16),
}

/// The positions of the records holding one value, ascending. Most user data values are
/// held by one record, so one position is kept without an allocation.
#[derive(Debug, Clone)]
enum Postings {
    One(u32),
    Many(Vec<u32>),
}

impl Postings {
    fn as_slice(&self) -> &[u32] {
        match self {
            Self::One(at) => std::slice::from_ref(at),
            Self::Many(all) => all,
        }
    }
}

/// An index from field values to the positions of the records that hold them, for one
/// kind of record (accounts, or transfers). Records are appended in timestamp order and
/// only the last can be removed (a rolled-back chain), so every list stays ascending.
#[derive(Debug, Default)]
pub(crate) struct FieldIndex {
    postings: HashMap<Key, Postings>,
}

impl FieldIndex {
    /// Indexes the record at `at`, the newest.
    pub(crate) fn add(&mut self, at: u32, fields: &Fields) {
        for key in fields.keys() {
            match self.postings.get_mut(&key) {
                None => {
                    self.postings.insert(key, Postings::One(at));
                }
                Some(Postings::One(first)) => {
                    let first = *first;
                    self.postings.insert(key, Postings::Many(vec![first, at]));
                }
                Some(Postings::Many(all)) => all.push(at),
            }
        }
    }

    /// Removes the newest record, at `at`, which holds `fields`.
    ///
    /// # Panics
    ///
    /// If `at` is not the newest position under one of its keys (a bug in this crate).
    pub(crate) fn remove_last(&mut self, at: u32, fields: &Fields) {
        for key in fields.keys() {
            let emptied = match self.postings.get_mut(&key) {
                Some(Postings::One(only)) => {
                    assert_eq!(*only, at, "the index's newest {key:?} is not {at}");
                    true
                }
                Some(Postings::Many(all)) => {
                    assert_eq!(all.pop(), Some(at), "the index's newest {key:?} is not {at}");
                    all.is_empty()
                }
                None => panic!("record {at} holds {key:?}, which the index lacks"),
            };
            if emptied {
                self.postings.remove(&key);
            }
        }
    }

    /// The shortest list among the fields `wanted` sets, or `None` when it sets none (every
    /// record is a candidate). A field no record holds gives the empty list.
    pub(crate) fn candidates(&self, wanted: &Fields) -> Option<&[u32]> {
        let list = |key| self.postings.get(&key).map_or(&[][..], Postings::as_slice);
        wanted.keys().map(list).min_by_key(|list| list.len())
    }

    /// The positions of the records (`records` of them, at positions `0..records`) that
    /// hold every field `wanted` sets, as `bounds` selects them: the shortest candidate
    /// list is walked, each record's other fields (`fields` reads them) checked.
    pub(crate) fn find(
        &self,
        wanted: &Fields,
        bounds: Bounds,
        records: usize,
        timestamp: impl Fn(u32) -> u64,
        fields: impl Fn(u32) -> Fields,
    ) -> Vec<u32> {
        let Some(list) = self.candidates(wanted) else {
            let position = |place: usize| {
                u32::try_from(place).expect("the ledger's limits keep positions below u32::MAX")
            };
            let every = select(records, position, bounds, &timestamp, |_| true);
            return every.into_iter().map(position).collect();
        };
        let has = |place: usize| fields(list[place]).has(wanted);
        let found = select(list.len(), |place| list[place], bounds, &timestamp, has);
        found.into_iter().map(|place| list[place]).collect()
    }
}

/// Per account, the positions of the transfers that touch it and, for a `HISTORY`
/// account, its balances after each (one balance per position, in step).
#[derive(Debug, Default)]
pub(crate) struct AccountIndex {
    pub(crate) transfers: HashMap<AccountId, Vec<u32>>,
    pub(crate) history: HashMap<AccountId, Vec<AccountBalance>>,
}

impl AccountIndex {
    /// Records that the transfer at `at` touched `account`, and its balances after it if
    /// the account keeps a history.
    pub(crate) fn add(&mut self, account: AccountId, at: u32, history: Option<AccountBalance>) {
        self.transfers.entry(account).or_default().push(at);
        if let Some(balance) = history {
            self.history.entry(account).or_default().push(balance);
        }
    }

    /// Removes the newest transfer, at `at`, from `account`.
    ///
    /// # Panics
    ///
    /// If it is not the account's newest (a bug in this crate).
    pub(crate) fn remove_last(&mut self, account: AccountId, at: u32) {
        let list = self.transfers.get_mut(&account);
        assert_eq!(list.and_then(Vec::pop), Some(at), "{at} is not account {account}'s newest");
        if let Some(history) = self.history.get_mut(&account) {
            history.pop();
        }
    }

    /// How many account-transfer entries there are: two per transfer.
    pub(crate) fn entries(&self) -> usize {
        self.transfers.values().map(Vec::len).sum()
    }
}

/// The places `0..len` of a list of positions (ascending; `at` reads one, `timestamp` a
/// position's timestamp) that `bounds` selects and `keep` passes, in the bounds' order, at
/// most its limit. The time range is found by two binary searches; `keep` is asked only
/// inside it, and only until the limit is reached.
pub(crate) fn select(
    len: usize,
    at: impl Fn(usize) -> u32,
    bounds: Bounds,
    timestamp: impl Fn(u32) -> u64,
    keep: impl Fn(usize) -> bool,
) -> Vec<usize> {
    let first_where = |pred: &dyn Fn(u64) -> bool| {
        let (mut low, mut high) = (0, len);
        while low < high {
            let middle = low + (high - low) / 2;
            if pred(timestamp(at(middle))) {
                high = middle;
            } else {
                low = middle + 1;
            }
        }
        low
    };
    let start = first_where(&|ts| ts >= bounds.min);
    let end = first_where(&|ts| ts > bounds.max);
    let places = start..end.max(start);
    let kept = |i: &usize| keep(*i);
    if bounds.reversed {
        places.rev().filter(kept).take(bounds.limit).collect()
    } else {
        places.filter(kept).take(bounds.limit).collect()
    }
}
