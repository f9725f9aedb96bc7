//! Where TigerBeetle's rules decide which code a request gets: the order of the checks,
//! the replays of posts and voids (compared as they resolve), which failures use up an
//! id, and a chain left open at the end of a batch.

use idem_wallet::{
    AMOUNT_MAX, AccountFlags, AccountResult, NewAccount, Transfer, TransferFlags,
    TransferResult as R,
};

use crate::{ALICE, BANK, BOB, t, wallet};

fn with(mut transfer: Transfer, edit: impl FnOnce(&mut Transfer)) -> Transfer {
    edit(&mut transfer);
    transfer
}

fn settle(id: u128, pending_id: u128, amount: u128, flags: TransferFlags) -> Transfer {
    Transfer { id, pending_id, amount, flags, ..Default::default() }
}

/// A post of `AMOUNT_MAX` and a void of 0 are kept as the amount they settled: a repeat
/// naming that amount, or leaving the accounts, ledger and code 0 or naming them as they
/// are, is the same transfer; naming another of any is not.
#[test]
fn a_repeat_of_a_post_or_void_is_compared_as_it_resolved() {
    let (post, void) = (TransferFlags::POST_PENDING, TransferFlags::VOID_PENDING);
    for (flag, whole) in [(post, AMOUNT_MAX), (void, 0)] {
        let (w, _) = wallet();
        let pending = with(t(1, ALICE, BOB, 80), |p| {
            (p.flags, p.user_data_128, p.user_data_32) = (TransferFlags::PENDING, 7, 3)
        });
        w.create_transfers(&[pending]).expect("batch").all_applied().expect("applied");
        assert_eq!(w.create_transfers(&[settle(2, 1, whole, flag)]).expect("b"), [R::Created]);
        let kept = w.transfer(2).expect("kept").transfer;
        let named = (kept.debit_account_id, kept.credit_account_id, kept.ledger, kept.code);
        let user_data = (kept.user_data_128, kept.user_data_64, kept.user_data_32);
        assert_eq!(
            (named, kept.amount, user_data),
            ((ALICE, BOB, 1, 1), 80, (7, 0, 3)),
            "{flag:?}"
        );
        let spelt_out = Transfer {
            debit_account_id: ALICE,
            credit_account_id: BOB,
            ledger: 1,
            code: 1,
            user_data_128: 7,
            user_data_32: 3,
            ..settle(2, 1, 80, flag)
        };
        let cases = [
            (settle(2, 1, whole, flag), R::Exists),
            (spelt_out, R::Exists),
            (with(spelt_out, |s| s.debit_account_id = BANK), R::ExistsWithDifferentDebitAccountId),
            (
                with(spelt_out, |s| s.credit_account_id = BANK),
                R::ExistsWithDifferentCreditAccountId,
            ),
            (with(spelt_out, |s| s.amount = 79), R::ExistsWithDifferentAmount),
            (with(spelt_out, |s| s.user_data_128 = 8), R::ExistsWithDifferentUserData128),
            (with(spelt_out, |s| s.user_data_64 = 8), R::ExistsWithDifferentUserData64),
            (with(spelt_out, |s| s.user_data_32 = 8), R::ExistsWithDifferentUserData32),
            (with(spelt_out, |s| s.ledger = 2), R::ExistsWithDifferentLedger),
            (with(spelt_out, |s| s.code = 2), R::ExistsWithDifferentCode),
            // User data before ledger and code, as TigerBeetle compares them.
            (
                with(spelt_out, |s| (s.user_data_128, s.code) = (8, 2)),
                R::ExistsWithDifferentUserData128,
            ),
        ];
        for (repeat, code) in cases {
            assert_eq!(w.create_transfers(&[repeat]).expect("batch"), [code], "{repeat:?}");
        }
        w.assert_invariants();
    }
}

/// Only TigerBeetle's transient failures (a missing account or pending transfer, a balance
/// limit, a closed account) use up an id; the rest are decided by the request and records
/// that never change, so a corrected request under the same id is judged afresh.
#[test]
fn only_transient_failures_use_up_an_id() {
    let (w, _) = wallet();
    w.create_transfers(&[with(t(1, ALICE, BOB, 80), |p| p.flags = TransferFlags::PENDING)])
        .expect("batch")
        .all_applied()
        .expect("applied");
    let too_much = settle(2, 1, 81, TransferFlags::POST_PENDING);
    assert_eq!(w.create_transfers(&[too_much]).expect("b"), [R::ExceedsPendingTransferAmount]);
    let right = settle(2, 1, 80, TransferFlags::POST_PENDING);
    assert_eq!(w.create_transfers(&[right]).expect("b"), [R::Created], "judged afresh");
    let missing = settle(3, 99, 0, TransferFlags::VOID_PENDING);
    assert_eq!(w.create_transfers(&[missing]).expect("b"), [R::PendingTransferNotFound]);
    let now_there = settle(3, 1, 0, TransferFlags::VOID_PENDING);
    assert_eq!(w.create_transfers(&[now_there]).expect("b"), [R::IdAlreadyFailed], "transient");
    let other_ledger = t(4, ALICE, crate::OTHER_LEDGER, 1);
    assert_eq!(w.create_transfers(&[other_ledger]).expect("b"), [R::AccountsMustHaveTheSameLedger]);
    assert_eq!(w.create_transfers(&[t(4, ALICE, BOB, 1)]).expect("b"), [R::Created]);
    w.assert_invariants();
}

/// A chain left open at the end of a batch runs to its last event: a failure before it
/// keeps its own code (and uses up its id if transient), the last event says the chain is
/// open, and nothing of the chain stays.
#[test]
fn an_open_chain_runs_to_its_last_event() {
    let (w, _) = wallet();
    let linked = |x: Transfer| with(x, |x| x.flags = TransferFlags::LINKED);
    let open = [linked(t(1, ALICE, BOB, 150)), linked(t(2, ALICE, BOB, 1))];
    assert_eq!(
        w.create_transfers(&open).expect("batch"),
        [R::ExceedsCredits, R::LinkedEventChainOpen]
    );
    assert_eq!(w.create_transfers(&[t(1, ALICE, BOB, 1)]).expect("b"), [R::IdAlreadyFailed]);
    let open =
        [linked(t(3, ALICE, BOB, 1)), linked(t(4, ALICE, BOB, 1)), linked(t(5, ALICE, BOB, 1))];
    assert_eq!(
        w.create_transfers(&open).expect("batch"),
        [R::LinkedEventFailed, R::LinkedEventFailed, R::LinkedEventChainOpen]
    );
    assert!(w.transfer(3).is_none() && w.transfer(4).is_none());
    assert_eq!(w.account(BOB).map(|b| b.credits_posted), Some(0));
    w.assert_invariants();
}

/// TigerBeetle's order of the malformed-request checks, and its `*_must_not_be_int_max`.
#[test]
fn malformed_requests_answer_in_tigerbeetles_order() {
    let (w, _) = wallet();
    let reserved = TransferFlags::from_bits_retain(1 << 14);
    let post = TransferFlags::POST_PENDING;
    let cases = [
        (with(t(0, ALICE, BOB, 1), |x| x.flags = reserved), R::ReservedFlag),
        (with(t(1, 0, BOB, 1), |x| x.pending_id = 7), R::DebitAccountIdMustNotBeZero),
        (
            with(t(1, ALICE, BOB, 1), |x| x.debit_account_id = u128::MAX),
            R::DebitAccountIdMustNotBeIntMax,
        ),
        (
            with(t(1, ALICE, BOB, 1), |x| x.credit_account_id = u128::MAX),
            R::CreditAccountIdMustNotBeIntMax,
        ),
        (with(t(1, ALICE, ALICE, 1), |x| x.timeout = 5), R::AccountsMustBeDifferent),
        (settle(1, u128::MAX, 0, post), R::PendingIdMustNotBeIntMax),
        // A post names its pending transfer's accounts, so two equal ones are no error of
        // its own: the pending transfer is looked for.
        (
            with(settle(1, 9, 0, post), |x| {
                (x.debit_account_id, x.credit_account_id) = (ALICE, ALICE)
            }),
            R::PendingTransferNotFound,
        ),
    ];
    for (transfer, code) in cases {
        assert_eq!(w.create_transfers(&[transfer]).expect("batch"), [code], "{transfer:?}");
    }
}

/// An account's repeat compares the flags first, `closed` among them, as TigerBeetle does;
/// the reserved flags are checked before the id.
#[test]
fn an_accounts_repeat_compares_its_flags_first_closed_among_them() {
    let (w, _) = wallet();
    let a = |id, ledger, code, flags| NewAccount { id, ledger, code, flags, ..Default::default() };
    let floor = AccountFlags::DEBITS_MUST_NOT_EXCEED_CREDITS;
    assert_eq!(w.create_accounts(&[a(10, 1, 1, floor)]).expect("b"), [AccountResult::Created]);
    let differs = w.create_accounts(&[a(10, 2, 1, AccountFlags::default())]).expect("b");
    assert_eq!(differs, [AccountResult::ExistsWithDifferentFlags]);
    assert!(w.close_account(10));
    let closed = w.create_accounts(&[a(10, 1, 1, floor)]).expect("b");
    assert_eq!(closed, [AccountResult::ExistsWithDifferentFlags]);
    let reserved = AccountFlags::from_bits_retain(1 << 4);
    let refused = w.create_accounts(&[a(0, 1, 1, reserved)]).expect("b");
    assert_eq!(refused, [AccountResult::ReservedFlag]);
}
