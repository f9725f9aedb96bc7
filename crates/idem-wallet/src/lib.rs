//! A double-entry wallet where a transfer id makes a replayed transfer a no-op.
//!
//! A client that retries a transfer after a timeout, or a queue that redelivers it, must
//! not move the money twice. The client chooses a transfer id once per intended transfer
//! and sends it on every retry; the ledger remembers every id for its whole life, so a
//! replay is answered (`Exists`), not applied. The semantics are TigerBeetle's, for a
//! subset of its fields; the differences are listed below.
//!
//! # Guarantee
//!
//! A transfer id applies at most once for the life of the ledger; the sum of all debits
//! always equals the sum of all credits; no balance passes its limit.
//!
//! # Examples
//!
//! ```
//! use idem_wallet::{AccountFlags, NewAccount, Transfer, TransferFlags, TransferResult, Wallet};
//! use TransferResult::{Created, ExceedsCredits, Exists, LinkedEventFailed};
//!
//! let wallet = Wallet::new();
//! // Alice's wallet must never be overdrawn; the bank's account pays money out.
//! let floor = AccountFlags::DEBITS_MUST_NOT_EXCEED_CREDITS;
//! wallet.create_accounts(&[
//!     NewAccount { id: 1, ledger: 1, code: 1, ..Default::default() },              // the bank
//!     NewAccount { id: 2, ledger: 1, code: 2, flags: floor, ..Default::default() }, // alice
//! ])?;
//! let t = |id, debit, credit, amount| Transfer {
//!     id, debit_account_id: debit, credit_account_id: credit, amount, ledger: 1, code: 1,
//!     ..Default::default()
//! };
//! // The client picks id 9 once for this top-up and sends it on every retry: the retry
//! // after a timeout, or the queue's redelivery, is answered and moves nothing.
//! assert_eq!(wallet.create_transfers(&[t(9, 1, 2, 100)])?, [Created]);
//! assert_eq!(wallet.create_transfers(&[t(9, 1, 2, 100)])?, [Exists]);
//! assert_eq!(wallet.account(2).map(|a| a.credit_balance()), Some(100));
//!
//! // A linked chain: two payments that apply together or not at all.
//! let mut chain = [t(10, 2, 1, 30), t(11, 2, 1, 90)];
//! chain[0].flags = TransferFlags::LINKED;
//! let results = wallet.create_transfers(&chain)?;
//! assert_eq!(results, [LinkedEventFailed, ExceedsCredits]);
//! assert_eq!(wallet.account(2).map(|a| a.credit_balance()), Some(100), "nothing moved");
//! # Ok::<(), idem_wallet::BatchError>(())
//! ```
//!
//! [`Wallet`] keeps its ledger in memory; [`DurableWallet`], a `Wallet<`[`Durable`]`>`,
//! also writes every batch to a write-ahead log before it answers. Both answer lookups
//! through the same methods, written once.
//!
//! # Which operations need an id, and the two failure classes
//!
//! * **Need an id:** every transfer. The client generates it once per intended transfer
//!   and reuses it on every retry; ids are remembered forever (see `docs/wallet.md` for
//!   what that costs). A retry is answered `Exists` (the same transfer: treat it as
//!   `Created`) or `ExistsWith…` naming the first field that differs. A post or void is
//!   kept as it resolved, so a repeat that leaves its pending transfer's fields 0, or
//!   names them, is the same transfer.
//! * **Transient failures** (TigerBeetle's: an account or the pending transfer not found,
//!   exceeds credits or debits, an account closed) use up the id: a retry is answered
//!   `IdAlreadyFailed`, so a retry can never turn an old failure into a success after the
//!   ledger changed. [`TransferResult::uses_up_id`] says which.
//! * **Every other failure** (a malformed request, a post of more than was reserved, a
//!   pending transfer already posted, ...) is decided by the request and records that
//!   cannot change, so it does not record the id: a retry is decided again, the same, and
//!   a corrected request under the same id is judged afresh. (`Overflow`, as in
//!   TigerBeetle, is the exception: it depends on balances yet uses up no id.)
//! * **Idempotent by shape, no id:** [`Wallet::close_account`] (an assignment), lookups.
//!
//! # Linked chains
//!
//! Events flagged `LINKED` chain to the next one; the chain applies all-or-nothing. When
//! one fails, it reports its own result and every other event of the chain reports
//! `LinkedEventFailed`; nothing of the chain is visible, and only the failing event's id
//! can be used up (a transient failure, as alone). A batch that ends inside a chain runs
//! the chain to its last event, which answers `LinkedEventChainOpen`. Replaying a chain
//! that was applied answers `Exists` for its first event and `LinkedEventFailed` for the
//! rest (the `Exists` stops the chain): a client reads a chain whose first event says
//! `Exists` as applied.
//!
//! # Two-phase transfers
//!
//! A `PENDING` transfer reserves its amount (counted against the balance limits) until a
//! `POST_PENDING` or `VOID_PENDING` transfer names it by `pending_id`, with its own new id.
//! The amounts follow TigerBeetle since 0.16: a post of [`AMOUNT_MAX`] or of the pending
//! amount posts it all, a smaller one posts that much (0 included) and restores the rest,
//! a larger one is `ExceedsPendingTransferAmount`; a void names 0 or the pending amount
//! (less is `PendingTransferHasDifferentAmount`). A second post or void answers
//! `PendingTransferAlreadyPosted` / `AlreadyVoided` and moves nothing. A pending transfer
//! with a timeout expires (by the injected clock) and can then not be posted. Unlike
//! TigerBeetle, whose cluster expires them on its own, expiry is applied when the next
//! transfer batch is decided (so a log replays it at the same point): until then a lookup
//! shows the transfer pending and its amount reserved, and a post or void of it is
//! refused as expired all the same. A closed account refuses a post but lets a void give
//! its reservation back.
//!
//! # Queries
//!
//! Beside lookups by id, TigerBeetle's four queries, on every kind of wallet: an
//! account's transfers ([`Wallet::get_account_transfers`]) and its balance after each
//! ([`Wallet::get_account_balances`], for an account created with
//! [`AccountFlags::HISTORY`]), both by an [`AccountFilter`]; and accounts or transfers by
//! their `user_data_128/64/32`, ledger and code ([`Wallet::query_accounts`],
//! [`Wallet::query_transfers`]) by a [`QueryFilter`]. Answers come in timestamp order (or
//! reversed) within an optional time range, at most the filter's `limit` (up to
//! [`QUERY_LIMIT_MAX`]); a filter no query can answer is refused with a [`FilterError`]
//! naming the field. Each batch's [`Results`] also carry every event's timestamp, as
//! TigerBeetle 0.17 returns them.
//!
//! # Where this differs from TigerBeetle
//!
//! Durable through [`DurableWallet`] (a write-ahead log of batches, not TigerBeetle's
//! replicated log); a subset of fields (no account `imported` timestamps); a subset of
//! flags, each at TigerBeetle's bit position, the rest (`balancing_*`, `closing_*`,
//! `imported`, linked accounts) refused with `ReservedFlag`; a filter no query can answer
//! is an error here, where TigerBeetle answers it with nothing; accounts are closed by
//! `close_account`, not by a closing transfer; one `Overflow` code instead of one per
//! balance; `AccountsFull` and `TransfersFull` for the ledger's capacities, which
//! TigerBeetle has no code for.
//!
//! # Features
//!
//! `tracing` (off by default): a span per batch and one event counting what it created,
//! replayed and failed; a warning for a torn tail cut at open.

/// The README's examples, compiled and run as doctests, so a reader's first program works.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

mod durable;
mod ledger;
mod query;
mod types;
mod wallet;

pub use durable::{
    Durable, DurableWallet, LogDevice, LogError, Recovery, TORN_TAILS_MAX, TornTail,
};
pub use ledger::{BATCH_MAX, BatchError, Ledger, Limits, Remembered};
pub use query::{
    AccountBalance, AccountFilter, AccountFilterFlags, FilterError, QUERY_LIMIT_MAX, QueryFilter,
    QueryFilterFlags,
};
pub use types::{
    AMOUNT_MAX, Account, AccountFlags, AccountId, AccountResult, Applied, NewAccount, NotApplied,
    PendingState, Results, StoredTransfer, Transfer, TransferFlags, TransferId, TransferResult,
    UnknownResultCode,
};
pub use wallet::{Memory, Wallet};

/// The clock a wallet reads ([`Wallet::with`], [`DurableWallet::open_with`]), and the two
/// the workspace provides: the system's, and a manual one for tests.
pub use idem_core::{Clock, ManualClock, SystemClock};
