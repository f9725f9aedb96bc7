//! Two-phase transfers: reserve, post (fully or partly), void, expire; repeats answered.

use std::time::Duration;

use idem_wallet::{PendingState, Transfer, TransferFlags, TransferResult as R};

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
    w.create_transfers(&[pending(1, 80, 0)]).expect("batch");
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
fn post_of_zero_posts_all_and_more_than_pending_is_refused() {
    let (w, _) = wallet();
    w.create_transfers(&[pending(1, 80, 0)]).expect("batch");
    assert_eq!(
        w.create_transfers(&[settle(2, 1, 81, TransferFlags::POST_PENDING)]).expect("batch"),
        vec![R::ExceedsPendingTransferAmount]
    );
    assert_eq!(
        w.create_transfers(&[settle(3, 1, 0, TransferFlags::POST_PENDING)]).expect("batch"),
        vec![R::Created]
    );
    assert_eq!(w.account(BOB).map(|b| b.credits_posted), Some(80));
}

#[test]
fn void_releases_and_a_second_void_is_answered() {
    let (w, _) = wallet();
    w.create_transfers(&[pending(1, 80, 0)]).expect("batch");
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
    w.create_transfers(&[pending(1, 80, 10)]).expect("batch");
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
    w.create_transfers(&[pending(1, 10, 0)]).expect("batch");
    let mut post = settle(2, 1, 0, TransferFlags::POST_PENDING);
    post.credit_account_id = crate::BANK;
    assert_eq!(
        w.create_transfers(&[post]).expect("batch"),
        vec![R::PendingTransferHasDifferentFields]
    );
    post.credit_account_id = BOB;
    assert_eq!(
        w.create_transfers(&[post]).expect("batch"),
        vec![R::IdAlreadyFailed],
        "state failures use up the id"
    );
}

/// A post or void may leave the pending transfer's accounts, ledger and code at 0 or name
/// them as they are; naming another of any of them is refused (TigerBeetle's
/// `pending_transfer_has_different_*` codes, one result here:
/// `PendingTransferHasDifferentFields`) and moves nothing; naming all four as they are is
/// applied.
#[test]
fn a_post_or_void_naming_another_account_ledger_or_code_is_refused() {
    type Change = fn(&mut Transfer);
    let fields: [(&str, Change); 4] = [
        ("debit_account_id", |s| s.debit_account_id = crate::BANK),
        ("credit_account_id", |s| s.credit_account_id = crate::BANK),
        ("ledger", |s| s.ledger = 2),
        ("code", |s| s.code = 2),
    ];
    for flag in [TransferFlags::POST_PENDING, TransferFlags::VOID_PENDING] {
        for (field, change) in fields {
            let (w, _) = wallet();
            w.create_transfers(&[pending(1, 10, 0)]).expect("batch");
            let mut other = settle(2, 1, 0, flag);
            change(&mut other);
            assert_eq!(
                w.create_transfers(&[other]).expect("batch"),
                vec![R::PendingTransferHasDifferentFields],
                "{flag:?} naming another {field}"
            );
            assert_eq!(w.transfer(1).and_then(|s| s.pending), Some(PendingState::Pending));
            assert_eq!(w.account(ALICE).map(|a| a.debits_pending), Some(10), "nothing moved");
            let same = Transfer {
                debit_account_id: ALICE,
                credit_account_id: BOB,
                ledger: 1,
                code: 1,
                ..settle(3, 1, 0, flag)
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
        flags: idem_wallet::AccountFlags::default(),
    });
    let results = w.create_accounts(&accounts).expect("batch");
    assert!(results.iter().all(|r| *r == idem_wallet::AccountResult::Created), "{results:?}");
    w.assert_invariants();
}
