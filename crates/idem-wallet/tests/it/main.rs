//! idem-wallet's integration tests: one binary, one module per concern.

mod codes;
mod durable;
mod lookups;
mod model;
mod queries;
mod stress;
mod tigerbeetle;
#[cfg(feature = "tracing")]
mod tracing;
mod two_phase;

use std::sync::Arc;

use idem_core::{ManualClock, Timestamp};
use idem_wallet::{AccountFlags, Limits, NewAccount, Transfer, Wallet};

pub(crate) const BANK: u128 = 1;
pub(crate) const ALICE: u128 = 2;
pub(crate) const BOB: u128 = 3;
pub(crate) const OTHER_LEDGER: u128 = 4;
pub(crate) const CAPPED: u128 = 5;

/// A wallet with: the bank (no limits), alice (debits may not exceed credits) holding 100,
/// bob (no limits, keeps a balance history), an account on ledger 2, and one whose credits
/// may not exceed debits.
pub(crate) fn wallet() -> (Wallet, Arc<ManualClock>) {
    wallet_with(Limits::default())
}

pub(crate) fn wallet_with(limits: Limits) -> (Wallet, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(Timestamp::from_millis(1_700_000_000_000)));
    let w = Wallet::with(limits, clock.clone());
    let account =
        |id, ledger, flags| NewAccount { id, ledger, code: 1, flags, ..Default::default() };
    let results = w
        .create_accounts(&[
            account(BANK, 1, AccountFlags::default()),
            account(ALICE, 1, AccountFlags::DEBITS_MUST_NOT_EXCEED_CREDITS),
            account(BOB, 1, AccountFlags::HISTORY),
            account(OTHER_LEDGER, 2, AccountFlags::default()),
            account(CAPPED, 1, AccountFlags::CREDITS_MUST_NOT_EXCEED_DEBITS),
        ])
        .expect("small batch");
    assert!(results.iter().all(|r| *r == idem_wallet::AccountResult::Created));
    let top_up = t(1_000_000, BANK, ALICE, 100);
    assert_eq!(
        w.create_transfers(&[top_up]).expect("batch"),
        vec![idem_wallet::TransferResult::Created]
    );
    (w, clock)
}

/// A plain transfer on ledger 1, code 1.
pub(crate) fn t(id: u128, debit: u128, credit: u128, amount: u128) -> Transfer {
    Transfer {
        id,
        debit_account_id: debit,
        credit_account_id: credit,
        amount,
        ledger: 1,
        code: 1,
        ..Default::default()
    }
}
