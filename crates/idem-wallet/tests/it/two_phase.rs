//! Two-phase transfers: reserve, post (fully or partly), void, expire; repeats answered.

use std::time::Duration;

use idem_wallet::{AMOUNT_MAX, PendingState, Transfer, TransferFlags, TransferResult as R};

use crate::{ALICE, BOB, t, wallet};

fn pending(id: u128, amount: u128, timeout: u32) -> Transfer {
    let mut p = t(id, ALICE, BOB, amount);
    p.flags = TransferFlags::PENDING;
    p.timeout = timeout;
    p
}

fn settle(id: u128, pending_id: u128, amount: u128, flag: TransferFlags) -> Transfer {
    Transfer { id, pending_id, amount, flags: flag, ..Default::default() }
}

#[test]
fn pending_reserves_and_counts_against_limits() {
    let (w, _) = wallet();
    assert_eq!(w.create_transfers(&[pending(1, 80, 0)]).expect("batch"), vec![R::Created]);
    let alice = w.account(ALICE).expect("alice");
    assert_eq!((alice.debits_pending, alice.debits_posted), (80, 0));
    assert_eq!(
        w.create_transfers(&[t(2, ALICE, BOB, 30)]).expect("batch"),
        vec![R::ExceedsCredits],
        "80 reserved of 100"
    );
    w.assert_invariants();
}

#[test]
fn post_a_smaller_amount_then_a_second_post_or_void_is_answered() {
    let (w, _) = wallet();
    w.create_transfers(&[pending(1, 80, 0)]).expect("batch").all_applied().expect("applied");
    assert_eq!(
        w.create_transfers(&[settle(2, 1, 50, TransferFlags::POST_PENDING)]).expect("batch"),
        vec![R::Created]
    );
    let (alice, bob) = (w.account(ALICE).expect("a"), w.account(BOB).expect("b"));
    assert_eq!((alice.debits_pending, alice.debits_posted, bob.credits_posted), (0, 50, 50));
    assert_eq!(w.transfer(1).and_then(|s| s.pending), Some(PendingState::Posted));
    assert_eq!(
        w.create_transfers(&[settle(3, 1, 0, TransferFlags::POST_PENDING)]).expect("batch"),
        vec![R::PendingTransferAlreadyPosted]
    );
    assert_eq!(
        w.create_transfers(&[settle(4, 1, 0, TransferFlags::VOID_PENDING)]).expect("batch"),
        vec![R::PendingTransferAlreadyPosted]
    );
    assert_eq!(
        w.create_transfers(&[settle(2, 1, 50, TransferFlags::POST_PENDING)]).expect("batch"),
        vec![R::Exists]
    );
    assert_eq!(w.account(BOB).map(|b| b.credits_posted), Some(50), "nothing moved twice");
    w.assert_invariants();
}

#[test]
fn a_post_of_amount_max_posts_all_and_more_than_pending_is_refused() {
    let (w, _) = wallet();
    w.create_transfers(&[pending(1, 80, 0)]).expect("batch").all_applied().expect("applied");
    assert_eq!(
        w.create_transfers(&[settle(2, 1, 81, TransferFlags::POST_PENDING)]).expect("batch"),
        vec![R::ExceedsPendingTransferAmount]
    );
    let all = settle(3, 1, AMOUNT_MAX, TransferFlags::POST_PENDING);
    assert_eq!(w.create_transfers(&[all]).expect("batch"), vec![R::Created]);
    assert_eq!(w.account(BOB).map(|b| b.credits_posted), Some(80));
}

#[test]
fn void_releases_and_a_second_void_is_answered() {
    let (w, _) = wallet();
    w.create_transfers(&[pending(1, 80, 0)]).expect("batch").all_applied().expect("applied");
    assert_eq!(
        w.create_transfers(&[settle(2, 1, 0, TransferFlags::VOID_PENDING)]).expect("batch"),
        vec![R::Created]
    );
    assert_eq!(w.account(ALICE).map(|a| (a.debits_pending, a.debits_posted)), Some((0, 0)));
    assert_eq!(
        w.create_transfers(&[settle(3, 1, 0, TransferFlags::VOID_PENDING)]).expect("batch"),
        vec![R::PendingTransferAlreadyVoided]
    );
    assert_eq!(
        w.create_transfers(&[settle(4, 1, 0, TransferFlags::POST_PENDING)]).expect("batch"),
        vec![R::PendingTransferAlreadyVoided]
    );
}

#[test]
fn a_pending_transfer_expires_by_the_clock_and_cannot_be_posted() {
    let (w, clock) = wallet();
    w.create_transfers(&[pending(1, 80, 10)]).expect("batch").all_applied().expect("applied");
    clock.advance(Duration::from_millis(9_999));
    assert_eq!(w.create_transfers(&[t(5, BOB, ALICE, 1)]).expect("batch"), vec![R::Created]);
    assert_eq!(w.account(ALICE).map(|a| a.debits_pending), Some(80), "not yet expired");
    clock.advance(Duration::from_millis(1));
    assert_eq!(
        w.create_transfers(&[settle(2, 1, 0, TransferFlags::POST_PENDING)]).expect("batch"),
        vec![R::PendingTransferExpired]
    );
    assert_eq!(w.account(ALICE).map(|a| a.debits_pending), Some(0), "the reservation is released");
    assert_eq!(w.transfer(1).and_then(|s| s.pending), Some(PendingState::Expired));
    w.assert_invariants();
}

#[test]
fn a_post_naming_other_accounts_is_refused() {
    let (w, _) = wallet();
    w.create_transfers(&[pending(1, 10, 0)]).expect("batch").all_applied().expect("applied");
    let mut post = settle(2, 1, 0, TransferFlags::POST_PENDING);
    post.credit_account_id = crate::BANK;
    assert_eq!(
        w.create_transfers(&[post]).expect("batch"),
        vec![R::PendingTransferHasDifferentCreditAccountId]
    );
    // Decided by the request and the pending transfer, which cannot change: the id is
    // not used up, and the corrected post under it is applied (TigerBeetle's rule).
    post.credit_account_id = BOB;
    assert_eq!(w.create_transfers(&[post]).expect("batch"), vec![R::Created]);
}

/// A post or void may leave the pending transfer's accounts, ledger and code at 0 or name
/// them as they are; naming another of any of them is refused with TigerBeetle's code for
/// that field and moves nothing; naming all four as they are is applied.
#[test]
fn a_post_or_void_naming_another_account_ledger_or_code_is_refused() {
    type Change = fn(&mut Transfer);
    let fields: [(&str, Change, R); 4] = [
        (
            "debit_account_id",
            |s| s.debit_account_id = crate::BANK,
            R::PendingTransferHasDifferentDebitAccountId,
        ),
        (
            "credit_account_id",
            |s| s.credit_account_id = crate::BANK,
            R::PendingTransferHasDifferentCreditAccountId,
        ),
        ("ledger", |s| s.ledger = 2, R::PendingTransferHasDifferentLedger),
        ("code", |s| s.code = 2, R::PendingTransferHasDifferentCode),
    ];
    for flag in [TransferFlags::POST_PENDING, TransferFlags::VOID_PENDING] {
        for (field, change, code) in fields {
            let (w, _) = wallet();
            w.create_transfers(&[pending(1, 10, 0)])
                .expect("batch")
                .all_applied()
                .expect("applied");
            let mut other = settle(2, 1, 0, flag);
            change(&mut other);
            assert_eq!(
                w.create_transfers(&[other]).expect("batch"),
                vec![code],
                "{flag:?} naming another {field}"
            );
            assert_eq!(w.transfer(1).and_then(|s| s.pending), Some(PendingState::Pending));
            assert_eq!(w.account(ALICE).map(|a| a.debits_pending), Some(10), "nothing moved");
            let same = Transfer {
                debit_account_id: ALICE,
                credit_account_id: BOB,
                ledger: 1,
                code: 1,
                ..settle(3, 1, 10, flag)
            };
            assert_eq!(w.create_transfers(&[same]).expect("batch"), vec![R::Created], "{flag:?}");
            w.assert_invariants();
        }
    }
}

/// A clock at the end of its range is caller input too: a pending transfer's expiry and
/// the records' timestamps saturate there instead of panicking, and the ledger stays whole.
#[test]
fn a_clock_at_the_end_of_its_range_saturates_and_never_panics() {
    let (w, clock) = crate::wallet();
    let now = idem_core::Clock::now(&*clock).as_millis();
    clock.advance(std::time::Duration::from_millis(u64::MAX - 1000 - now));
    let created = w.create_transfers(&[pending(40, 10, u32::MAX)]).expect("batch");
    assert_eq!(created, vec![R::Created], "the far timeout saturates");
    let accounts = [300, 301].map(|id| idem_wallet::NewAccount {
        id,
        ledger: 1,
        code: 1,
        ..Default::default()
    });
    let results = w.create_accounts(&accounts).expect("batch");
    assert!(results.iter().all(|r| *r == idem_wallet::AccountResult::Created), "{results:?}");
    w.assert_invariants();
}

/// TigerBeetle's table for resolving a pending transfer (0.16 on), row by row, on a
/// reservation of 80 from Alice (100 posted to her) to Bob: each row's code by its
/// TigerBeetle name, and the four balances of both accounts after it.
#[test]
fn every_row_of_tigerbeetles_post_and_void_table() {
    let (post, void) = (TransferFlags::POST_PENDING, TransferFlags::VOID_PENDING);
    // (flag, amount named, code, Alice's and Bob's [debits pending, debits posted,
    // credits pending, credits posted] after it)
    type Row = (TransferFlags, u128, &'static str, [u128; 4], [u128; 4]);
    let rows: [Row; 10] = [
        (post, 50, "created", [0, 50, 0, 100], [0, 0, 0, 50]),
        (post, 80, "created", [0, 80, 0, 100], [0, 0, 0, 80]),
        (post, AMOUNT_MAX, "created", [0, 80, 0, 100], [0, 0, 0, 80]),
        (post, 0, "created", [0, 0, 0, 100], [0, 0, 0, 0]),
        (post, 81, "exceeds_pending_transfer_amount", [80, 0, 0, 100], [0, 0, 80, 0]),
        (post, AMOUNT_MAX - 1, "exceeds_pending_transfer_amount", [80, 0, 0, 100], [0, 0, 80, 0]),
        (void, 0, "created", [0, 0, 0, 100], [0, 0, 0, 0]),
        (void, 80, "created", [0, 0, 0, 100], [0, 0, 0, 0]),
        (void, 50, "pending_transfer_has_different_amount", [80, 0, 0, 100], [0, 0, 80, 0]),
        (void, 81, "exceeds_pending_transfer_amount", [80, 0, 0, 100], [0, 0, 80, 0]),
    ];
    let sides = |a: idem_wallet::Account| {
        [a.debits_pending, a.debits_posted, a.credits_pending, a.credits_posted]
    };
    for (flag, amount, code, alice, bob) in rows {
        let (w, _) = wallet();
        w.create_transfers(&[pending(1, 80, 0)]).expect("batch").all_applied().expect("applied");
        let result = w.create_transfers(&[settle(2, 1, amount, flag)]).expect("batch");
        let row = format!("{flag:?} of {amount}");
        assert_eq!(result.iter().map(R::to_string).collect::<Vec<_>>(), [code], "{row}");
        assert_eq!(sides(w.account(ALICE).expect("alice")), alice, "Alice after {row}");
        assert_eq!(sides(w.account(BOB).expect("bob")), bob, "Bob after {row}");
        let state = if code == "created" && flag == post {
            PendingState::Posted
        } else if code == "created" {
            PendingState::Voided
        } else {
            PendingState::Pending
        };
        assert_eq!(w.transfer(1).and_then(|s| s.pending), Some(state), "{row}");
        w.assert_invariants();
    }
}

/// A pending transfer of 0 reserves nothing and posts nothing; a closed account refuses
/// a post but still lets a void give its reservation back (TigerBeetle's rule: the only
/// movement a closed account allows).
#[test]
fn a_reservation_of_zero_and_a_closed_accounts_post_and_void() {
    let (w, _) = wallet();
    assert_eq!(w.create_transfers(&[pending(1, 0, 0)]).expect("batch"), vec![R::Created]);
    let all = settle(2, 1, AMOUNT_MAX, TransferFlags::POST_PENDING);
    assert_eq!(w.create_transfers(&[all]).expect("batch"), vec![R::Created]);
    assert_eq!(w.account(BOB).map(|b| (b.credits_pending, b.credits_posted)), Some((0, 0)));
    w.create_transfers(&[pending(3, 30, 0), pending(4, 20, 0)])
        .expect("batch")
        .all_applied()
        .expect("applied");
    assert!(w.close_account(BOB));
    let post = settle(5, 3, AMOUNT_MAX, TransferFlags::POST_PENDING);
    assert_eq!(w.create_transfers(&[post]).expect("batch"), vec![R::CreditAccountAlreadyClosed]);
    let void = settle(6, 4, 0, TransferFlags::VOID_PENDING);
    assert_eq!(w.create_transfers(&[void]).expect("batch"), vec![R::Created]);
    let alice = w.account(ALICE).expect("alice");
    assert_eq!((alice.debits_pending, alice.debits_posted), (30, 0), "only the void moved");
    w.assert_invariants();
}
