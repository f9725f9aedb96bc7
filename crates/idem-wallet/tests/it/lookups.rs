//! Batch lookups, as TigerBeetle's `lookup_accounts` and `lookup_transfers`: the records
//! that exist, in the order asked; at most `BATCH_MAX` ids. Both handles answer alike.

use idem_wallet::{Account, BATCH_MAX, BatchError, DurableWallet, NewAccount, StoredTransfer};

use crate::{ALICE, BANK, BOB, t, wallet};

/// The ids found, in the order the lookup answered.
fn ids_of_accounts(found: &[Account]) -> Vec<u128> {
    found.iter().map(|a| a.id).collect()
}

fn ids_of_transfers(found: &[StoredTransfer]) -> Vec<u128> {
    found.iter().map(|s| s.transfer.id).collect()
}

#[test]
fn lookups_answer_the_found_records_in_the_order_asked() {
    let (w, _) = wallet();
    w.create_transfers(&[t(7, ALICE, BOB, 5)]).expect("batch").all_applied().expect("applied");
    let found = w.lookup_accounts(&[BOB, 99, BANK, BOB]).expect("small batch");
    assert_eq!(ids_of_accounts(&found), vec![BOB, BANK, BOB], "missing 99 left out");
    assert_eq!(found[0], w.account(BOB).expect("bob"), "the same record as one lookup");
    let found = w.lookup_transfers(&[7, 8, 1_000_000]).expect("small batch");
    assert_eq!(ids_of_transfers(&found), vec![7, 1_000_000]);
    assert_eq!(w.lookup_accounts(&[]), Ok(Vec::new()));
}

#[test]
fn a_lookup_of_batch_max_ids_is_answered_and_one_more_is_refused() {
    let (w, _) = wallet();
    let full = vec![BOB; BATCH_MAX];
    assert_eq!(w.lookup_accounts(&full).expect("at the limit").len(), BATCH_MAX);
    let over = vec![BOB; BATCH_MAX + 1];
    assert_eq!(w.lookup_accounts(&over), Err(BatchError::TooLarge { len: BATCH_MAX + 1 }));
    let over = vec![7; BATCH_MAX + 1];
    assert_eq!(w.lookup_transfers(&over), Err(BatchError::TooLarge { len: BATCH_MAX + 1 }));
}

#[test]
fn the_durable_wallet_takes_the_same_batches() {
    let dir = std::env::temp_dir().join(format!("idem-wallet-lookups-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let path = dir.join("wallet.wal");
    let _ = std::fs::remove_file(&path);
    let wallet = DurableWallet::open(&path).expect("open");
    let a = |id| NewAccount { id, ledger: 1, code: 1, ..Default::default() };
    let accounts = [a(1), a(2)];
    wallet.create_accounts(&accounts).expect("accounts").all_applied().expect("applied");
    let transfer = t(5, 1, 2, 3);
    wallet.create_transfers(&[transfer]).expect("transfers").all_applied().expect("applied");
    let found = wallet.lookup_accounts(&[2, 3, 1]).expect("small batch");
    assert_eq!(ids_of_accounts(&found), vec![2, 1]);
    let found = wallet.lookup_transfers(&[5]).expect("small batch");
    assert_eq!(found.iter().map(|s| s.transfer).collect::<Vec<_>>(), vec![transfer]);
    let over = vec![1; BATCH_MAX + 1];
    assert_eq!(wallet.lookup_accounts(&over), Err(BatchError::TooLarge { len: BATCH_MAX + 1 }));
    drop(wallet);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_log_that_cannot_be_opened_is_named_in_the_error() {
    let path = std::env::temp_dir().join("idem-no-such-dir").join("nested").join("wallet.wal");
    let error = DurableWallet::open(&path).map(|_| ()).expect_err("a missing directory");
    let message = error.to_string();
    assert!(message.contains(&path.display().to_string()), "the path is named: {message}");
}

/// The balance helpers: a wallet's credit balance, what it still has available past the
/// reservations on it, a paying account's debit balance, and 0 where a side is short.
#[test]
fn balances_by_the_double_entry_convention() {
    let (w, _) = wallet();
    let mut hold = t(50, ALICE, BOB, 30);
    hold.flags = idem_wallet::TransferFlags::PENDING;
    w.create_transfers(&[t(51, ALICE, BOB, 20), hold])
        .expect("batch")
        .all_applied()
        .expect("applied");
    let (alice, bob) = (w.account(ALICE).expect("alice"), w.account(BOB).expect("bob"));
    // Alice: 100 topped up, 20 paid, 30 held.
    assert_eq!((alice.credit_balance(), alice.available(), alice.debit_balance()), (80, 50, 0));
    assert_eq!((bob.credit_balance(), bob.available()), (20, 20));
    let bank = w.account(crate::BANK).expect("bank");
    assert_eq!((bank.debit_balance(), bank.credit_balance(), bank.available()), (100, 0, 0));
}
