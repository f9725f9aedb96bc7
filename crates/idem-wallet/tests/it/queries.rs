//! The queries beside lookups, table-driven with TigerBeetle's names: an account's
//! transfers and balances (`AccountFilter`), accounts and transfers by their fields
//! (`QueryFilter`), the filters refused and why, the limit at its limit, and each event's
//! timestamp in its batch's results.

use std::time::Duration;

use idem_wallet::{
    AccountBalance, AccountFilter, AccountFilterFlags as Side, AccountFlags, FilterError,
    NewAccount, QUERY_LIMIT_MAX, QueryFilter, QueryFilterFlags, StoredTransfer, Transfer,
    TransferFlags, TransferResult as R, Wallet,
};

use crate::{ALICE, BANK, BOB, t, wallet};

fn ids(found: &[StoredTransfer]) -> Vec<u128> {
    found.iter().map(|s| s.transfer.id).collect()
}

fn tagged(id: u128, debit: u128, credit: u128, tags: (u128, u64, u32, u16)) -> Transfer {
    let (user_data_128, user_data_64, user_data_32, code) = tags;
    Transfer { user_data_128, user_data_64, user_data_32, code, ..t(id, debit, credit, 1) }
}

/// Alice and bob trade under a few tags; a failed transfer and a rolled-back chain leave
/// nothing to find. Returns the wallet and the timestamps of transfers 11 and 14.
fn traded() -> (Wallet, u64, u64) {
    let (w, clock) = wallet();
    let batch = [
        tagged(10, BOB, ALICE, (100, 0, 0, 1)),
        tagged(11, ALICE, BOB, (100, 5, 0, 1)),
        tagged(12, BOB, ALICE, (200, 5, 9, 2)),
        tagged(13, ALICE, BANK, (0, 0, 9, 1)),
    ];
    w.create_transfers(&batch).expect("batch").all_applied().expect("applied");
    clock.advance(Duration::from_millis(10));
    let failed = tagged(20, ALICE, BOB, (100, 5, 9, 3));
    let failed = Transfer { amount: 1_000, ..failed };
    let mut chain = [tagged(21, BOB, ALICE, (100, 5, 9, 3)), failed];
    chain[0].flags = TransferFlags::LINKED;
    let late = [tagged(14, ALICE, BOB, (100, 0, 0, 2)), failed];
    let answered = w.create_transfers(&late).expect("batch");
    assert_eq!(answered, [R::Created, R::ExceedsCredits]);
    let answered = w.create_transfers(&chain).expect("batch");
    assert_eq!(answered, [R::LinkedEventFailed, R::IdAlreadyFailed]);
    let at = |id| w.transfer(id).expect("stored").timestamp;
    let (eleven, fourteen) = (at(11), at(14));
    (w, eleven, fourteen)
}

#[test]
fn account_filter_table() {
    let (w, eleven, fourteen) = traded();
    let both = Side::DEBITS | Side::CREDITS;
    let alice = AccountFilter { account_id: ALICE, limit: 10, flags: both, ..Default::default() };
    let cases: Vec<(&str, AccountFilter, Vec<u128>)> = vec![
        // The fixture's top-up (1,000,000) credits alice first.
        ("debits and credits", alice, vec![1_000_000, 10, 11, 12, 13, 14]),
        ("debits", AccountFilter { flags: Side::DEBITS, ..alice }, vec![11, 13, 14]),
        ("credits", AccountFilter { flags: Side::CREDITS, ..alice }, vec![1_000_000, 10, 12]),
        ("reversed", AccountFilter { flags: both | Side::REVERSED, ..alice }, {
            vec![14, 13, 12, 11, 10, 1_000_000]
        }),
        ("limit", AccountFilter { limit: 2, ..alice }, vec![1_000_000, 10]),
        ("limit, reversed", AccountFilter { limit: 2, flags: both | Side::REVERSED, ..alice }, {
            vec![14, 13]
        }),
        ("timestamp_min", AccountFilter { timestamp_min: eleven, ..alice }, vec![11, 12, 13, 14]),
        ("timestamp_max", AccountFilter { timestamp_max: eleven, ..alice }, {
            vec![1_000_000, 10, 11]
        }),
        (
            "timestamp_min and timestamp_max",
            AccountFilter { timestamp_min: eleven, timestamp_max: eleven, ..alice },
            vec![11],
        ),
        ("after the last", AccountFilter { timestamp_min: fourteen + 1, ..alice }, vec![]),
        ("user_data_128", AccountFilter { user_data_128: 100, ..alice }, vec![10, 11, 14]),
        ("user_data_64", AccountFilter { user_data_64: 5, ..alice }, vec![11, 12]),
        ("user_data_32", AccountFilter { user_data_32: 9, ..alice }, vec![12, 13]),
        ("code", AccountFilter { code: 2, ..alice }, vec![12, 14]),
        ("every field", AccountFilter { user_data_128: 100, user_data_64: 5, ..alice }, {
            vec![11]
        }),
        ("a value nobody holds", AccountFilter { user_data_128: 300, ..alice }, vec![]),
        ("the failed and the rolled back", AccountFilter { code: 3, ..alice }, vec![]),
        ("an account with no transfers", AccountFilter { account_id: 5, ..alice }, vec![]),
        ("an account that does not exist", AccountFilter { account_id: 77, ..alice }, vec![]),
    ];
    for (name, filter, want) in cases {
        let found = w.get_account_transfers(&filter).expect(name);
        assert_eq!(ids(&found), want, "{name}");
    }
}

#[test]
fn query_filter_table() {
    let (w, eleven, _) = traded();
    let any = QueryFilter { limit: 10, ..Default::default() };
    let cases: Vec<(&str, QueryFilter, Vec<u128>)> = vec![
        ("no field: every transfer", any, vec![1_000_000, 10, 11, 12, 13, 14]),
        ("user_data_128", QueryFilter { user_data_128: 100, ..any }, vec![10, 11, 14]),
        ("user_data_64", QueryFilter { user_data_64: 5, ..any }, vec![11, 12]),
        ("user_data_32", QueryFilter { user_data_32: 9, ..any }, vec![12, 13]),
        ("ledger", QueryFilter { ledger: 1, limit: 3, ..any }, vec![1_000_000, 10, 11]),
        ("another ledger", QueryFilter { ledger: 2, ..any }, vec![]),
        ("code", QueryFilter { code: 2, ..any }, vec![12, 14]),
        ("intersection", QueryFilter { user_data_128: 100, code: 2, ..any }, vec![14]),
        ("intersection, rare field last", QueryFilter { code: 1, user_data_64: 5, ..any }, {
            vec![11]
        }),
        ("reversed", QueryFilter { code: 1, flags: QueryFilterFlags::REVERSED, ..any }, {
            vec![13, 11, 10, 1_000_000]
        }),
        ("timestamp_min", QueryFilter { user_data_128: 100, timestamp_min: eleven, ..any }, {
            vec![11, 14]
        }),
        ("timestamp_max, no field", QueryFilter { timestamp_max: eleven, ..any }, {
            vec![1_000_000, 10, 11]
        }),
        ("the failed and the rolled back", QueryFilter { code: 3, ..any }, vec![]),
    ];
    for (name, filter, want) in cases {
        let found = w.query_transfers(&filter).expect(name);
        assert_eq!(ids(&found), want, "{name}");
    }
}

#[test]
fn query_accounts_by_their_fields() {
    let w = Wallet::new();
    let a = |id, ledger, code, tags: (u128, u64, u32)| NewAccount {
        id,
        ledger,
        code,
        user_data_128: tags.0,
        user_data_64: tags.1,
        user_data_32: tags.2,
        ..Default::default()
    };
    let accounts = [
        a(1, 1, 10, (42, 0, 0)),
        a(2, 1, 20, (42, 6, 0)),
        a(3, 2, 10, (7, 6, 3)),
        a(4, 2, 10, (42, 0, 3)),
    ];
    w.create_accounts(&accounts).expect("batch").all_applied().expect("applied");
    let any = QueryFilter { limit: 10, ..Default::default() };
    let cases: Vec<(&str, QueryFilter, Vec<u128>)> = vec![
        ("no field: every account", any, vec![1, 2, 3, 4]),
        ("user_data_128", QueryFilter { user_data_128: 42, ..any }, vec![1, 2, 4]),
        ("user_data_64", QueryFilter { user_data_64: 6, ..any }, vec![2, 3]),
        ("user_data_32", QueryFilter { user_data_32: 3, ..any }, vec![3, 4]),
        ("ledger", QueryFilter { ledger: 2, ..any }, vec![3, 4]),
        ("code", QueryFilter { code: 10, ..any }, vec![1, 3, 4]),
        ("intersection", QueryFilter { ledger: 2, user_data_128: 42, ..any }, vec![4]),
        ("reversed, limit", QueryFilter { limit: 2, flags: QueryFilterFlags::REVERSED, ..any }, {
            vec![4, 3]
        }),
        ("a value nobody holds", QueryFilter { code: 30, ..any }, vec![]),
    ];
    for (name, filter, want) in cases {
        let found: Vec<u128> =
            w.query_accounts(&filter).expect(name).iter().map(|a| a.id).collect();
        assert_eq!(found, want, "{name}");
    }
}

#[test]
fn a_filter_no_query_can_answer_is_refused_naming_the_field() {
    let (w, _) = wallet();
    let both = Side::DEBITS | Side::CREDITS;
    let ok = AccountFilter { account_id: ALICE, limit: 1, flags: both, ..Default::default() };
    let cases = [
        (AccountFilter { account_id: 0, ..ok }, FilterError::AccountId(0)),
        (AccountFilter { account_id: u128::MAX, ..ok }, FilterError::AccountId(u128::MAX)),
        (AccountFilter { flags: Side::REVERSED, ..ok }, FilterError::NoSide),
        (AccountFilter { limit: 0, ..ok }, FilterError::LimitZero),
        (
            AccountFilter { timestamp_min: u64::MAX, ..ok },
            FilterError::TimestampIntMax("timestamp_min"),
        ),
        (
            AccountFilter { timestamp_max: u64::MAX, ..ok },
            FilterError::TimestampIntMax("timestamp_max"),
        ),
        (
            AccountFilter { timestamp_min: 9, timestamp_max: 8, ..ok },
            FilterError::TimestampRange { min: 9, max: 8 },
        ),
        (
            AccountFilter { flags: both | Side::from_bits_retain(1 << 3), ..ok },
            FilterError::ReservedFlag(0b1011),
        ),
    ];
    for (filter, error) in cases {
        assert_eq!(w.get_account_transfers(&filter), Err(error), "{filter:?}");
        assert_eq!(w.get_account_balances(&filter), Err(error), "{filter:?}");
    }
    let ok = QueryFilter { limit: 1, ..Default::default() };
    let cases = [
        (QueryFilter { limit: 0, ..ok }, FilterError::LimitZero),
        (
            QueryFilter { timestamp_min: 2, timestamp_max: 1, ..ok },
            FilterError::TimestampRange { min: 2, max: 1 },
        ),
        (
            QueryFilter { flags: QueryFilterFlags::from_bits_retain(2), ..ok },
            FilterError::ReservedFlag(2),
        ),
    ];
    for (filter, error) in cases {
        assert_eq!(w.query_transfers(&filter), Err(error), "{filter:?}");
        assert_eq!(w.query_accounts(&filter), Err(error), "{filter:?}");
    }
    let message = FilterError::TimestampRange { min: 9, max: 8 }.to_string();
    assert!(message.contains("timestamp_min 9") && message.contains("swap"), "{message}");
}

/// More matches than the limit: exactly `QUERY_LIMIT_MAX` come back (for a larger limit
/// too, as TigerBeetle serves one), and the next page, from one past the last timestamp,
/// holds the rest.
#[test]
fn a_query_at_its_limit_returns_the_limit_and_pages_by_timestamp() {
    let (w, _) = wallet();
    let total = u128::from(QUERY_LIMIT_MAX) + 100;
    for start in (0..total).step_by(QUERY_LIMIT_MAX as usize) {
        let end = (start + u128::from(QUERY_LIMIT_MAX)).min(total);
        let batch: Vec<Transfer> =
            (start..end).map(|i| Transfer { code: 7, ..t(10 + i, BANK, BOB, 1) }).collect();
        w.create_transfers(&batch).expect("batch").all_applied().expect("applied");
    }
    let first = QueryFilter { code: 7, limit: QUERY_LIMIT_MAX, ..Default::default() };
    let page = w.query_transfers(&first).expect("a valid filter");
    assert_eq!(page.len(), QUERY_LIMIT_MAX as usize);
    let larger = QueryFilter { limit: u32::MAX, ..first };
    assert_eq!(w.query_transfers(&larger).expect("served up to the most"), page);
    let last = page.last().expect("a full page").timestamp;
    let next = QueryFilter { timestamp_min: last + 1, ..first };
    let rest = w.query_transfers(&next).expect("a valid filter");
    let all: Vec<u128> = ids(&page).into_iter().chain(ids(&rest)).collect();
    assert_eq!(all, (10..10 + total).collect::<Vec<_>>(), "every transfer once, in order");
    let bob = AccountFilter {
        account_id: BOB,
        limit: QUERY_LIMIT_MAX,
        flags: Side::CREDITS,
        ..Default::default()
    };
    assert_eq!(w.get_account_transfers(&bob).expect("valid").len(), QUERY_LIMIT_MAX as usize);
}

fn balance(pending: (u128, u128), posted: (u128, u128), timestamp: u64) -> AccountBalance {
    AccountBalance {
        debits_pending: pending.0,
        credits_pending: pending.1,
        debits_posted: posted.0,
        credits_posted: posted.1,
        timestamp,
    }
}

/// Bob keeps a history: his balances after each transfer, a pending one, its post, a
/// void; a pending transfer that expires adds no entry (as in TigerBeetle) and a chain
/// rolled back leaves none. Alice keeps none.
#[test]
fn a_history_account_keeps_its_balances_after_each_transfer() {
    let (w, clock) = wallet();
    let pending = |id, amount, timeout| Transfer {
        flags: TransferFlags::PENDING,
        timeout,
        ..t(id, ALICE, BOB, amount)
    };
    let settle = |id, pending_id, amount, flags| Transfer {
        id,
        pending_id,
        amount,
        flags,
        ..Default::default()
    };
    let batch = [
        pending(10, 30, 0),
        settle(11, 10, 20, TransferFlags::POST_PENDING),
        pending(12, 5, 0),
        settle(13, 12, 0, TransferFlags::VOID_PENDING),
        pending(14, 7, 1),
    ];
    w.create_transfers(&batch).expect("batch").all_applied().expect("applied");
    clock.advance(Duration::from_secs(2));
    let mut chain = [t(20, BOB, ALICE, 1), t(21, ALICE, BOB, 1_000)];
    chain[0].flags = TransferFlags::LINKED;
    let rolled_back = w.create_transfers(&chain).expect("batch");
    assert_eq!(rolled_back, [R::LinkedEventFailed, R::ExceedsCredits]);
    w.create_transfers(&[t(15, BOB, ALICE, 4)]).expect("batch").all_applied().expect("applied");
    let at = |id| w.transfer(id).expect("stored").timestamp;
    let want = vec![
        balance((0, 30), (0, 0), at(10)),
        balance((0, 0), (0, 20), at(11)),
        balance((0, 5), (0, 20), at(12)),
        balance((0, 0), (0, 20), at(13)),
        balance((0, 7), (0, 20), at(14)),
        // 14 expired before this one, which shows it.
        balance((0, 0), (4, 20), at(15)),
    ];
    let bob = AccountFilter {
        account_id: BOB,
        limit: 10,
        flags: Side::DEBITS | Side::CREDITS,
        ..Default::default()
    };
    assert_eq!(w.get_account_balances(&bob).expect("valid"), want);
    let debits = AccountFilter { flags: Side::DEBITS | Side::REVERSED, ..bob };
    assert_eq!(w.get_account_balances(&debits).expect("valid"), [want[5]]);
    let alice = AccountFilter { account_id: ALICE, ..bob };
    assert_eq!(w.get_account_balances(&alice).expect("valid"), [], "no HISTORY flag");
    assert!(w.account(BOB).expect("bob").flags.contains(AccountFlags::HISTORY));
}

/// Each event's timestamp comes back with the results: a new record's, the original's on
/// a replay, and for a failure one of its own that names no record; every event but a
/// replay has a timestamp no other has, later than every earlier one's.
#[test]
fn results_carry_each_events_timestamp() {
    let (w, clock) = wallet();
    let first = w.create_transfers(&[t(10, BANK, BOB, 1), t(11, BANK, BOB, 2)]).expect("b");
    let stored = |id| w.transfer(id).expect("stored").timestamp;
    assert_eq!(first.timestamps(), [stored(10), stored(11)]);
    clock.advance(Duration::from_secs(1));
    let mut chain = [t(12, BANK, BOB, 1), t(13, ALICE, BOB, 1_000), t(16, BANK, BOB, 1)];
    chain[0].flags = TransferFlags::LINKED;
    chain[1].flags = TransferFlags::LINKED;
    let batch = [t(10, BANK, BOB, 1), t(14, BANK, 77, 1), t(15, BANK, BOB, 1), chain[0]];
    let batch = [&batch[..], &chain[1..]].concat();
    let later = w.create_transfers(&batch).expect("batch");
    assert_eq!(
        later,
        [
            R::Exists,
            R::CreditAccountNotFound,
            R::Created,
            R::LinkedEventFailed,
            R::ExceedsCredits,
            R::LinkedEventFailed
        ]
    );
    let at = later.timestamps();
    assert_eq!((at[0], at[2]), (stored(10), stored(15)), "a replay's is the original's");
    assert!(at[1..].windows(2).all(|w| w[0] < w[1]), "unique and growing: {at:?}");
    assert!(at[1] > stored(11), "later than every earlier event's");
    for (i, failed) in [1, 3, 4, 5].into_iter().map(|i| (i, at[i])) {
        let exactly = QueryFilter {
            timestamp_min: failed,
            timestamp_max: failed,
            limit: 1,
            ..Default::default()
        };
        assert_eq!(w.query_transfers(&exactly).expect("valid"), [], "event {i} names a record");
    }
    let account = NewAccount { id: 50, ledger: 1, code: 1, ..Default::default() };
    let created = w.create_accounts(&[account]).expect("batch");
    let replayed = w.create_accounts(&[account, NewAccount { id: 0, ..account }]).expect("b");
    let kept = w.account(50).expect("created").timestamp;
    assert_eq!((created.timestamps(), replayed.timestamps()[0]), (&[kept][..], kept));
    assert!(replayed.timestamps()[1] > kept, "a failed account's is its own");
}

/// An account filter walks the shorter of the account's transfers and the rarest field's:
/// on an account with thousands of transfers, a filter by a user data only one of them
/// holds finds it, in the account's order, beside the filter's other rules (the side).
#[test]
fn an_account_filter_by_a_rare_field_finds_it_among_many() {
    let (w, _) = wallet();
    let many: Vec<Transfer> = (0..5_000).map(|i| t(10 + i, BANK, BOB, 1)).collect();
    w.create_transfers(&many).expect("batch").all_applied().expect("applied");
    let tagged = [
        Transfer { user_data_128: 42, ..t(9_000, BANK, BOB, 1) },
        Transfer { user_data_128: 42, ..t(9_001, BOB, BANK, 1) },
        Transfer { user_data_128: 42, ..t(9_002, BANK, ALICE, 1) },
    ];
    w.create_transfers(&tagged).expect("batch").all_applied().expect("applied");
    let bob = AccountFilter {
        account_id: BOB,
        user_data_128: 42,
        limit: 10,
        flags: Side::CREDITS,
        ..Default::default()
    };
    assert_eq!(ids(&w.get_account_transfers(&bob).expect("valid")), [9_000]);
    let both = AccountFilter { flags: Side::DEBITS | Side::CREDITS | Side::REVERSED, ..bob };
    assert_eq!(ids(&w.get_account_transfers(&both).expect("valid")), [9_001, 9_000]);
    let balances = w.get_account_balances(&both).expect("valid");
    let stamps: Vec<u64> = balances.iter().map(|b| b.timestamp).collect();
    let stored = |id| w.transfer(id).expect("stored").timestamp;
    assert_eq!(stamps, [stored(9_001), stored(9_000)], "the balances after those two");
    assert_eq!(balances[1].credits_posted, 5_001, "after 5,000 credits and this one");
}

/// A linked chain that rolls back leaves no pending timeout behind: the ledger watches
/// only the timeouts of pending transfers that stand.
#[test]
fn a_rolled_back_chain_leaves_no_timeout_to_watch() {
    let (w, _) = wallet();
    for i in 0..1_000 {
        let pending = Transfer {
            flags: TransferFlags::PENDING | TransferFlags::LINKED,
            timeout: u32::MAX,
            ..t(10 + i, BANK, BOB, 1)
        };
        let broken = t(5_000 + i, BOB, BOB, 1);
        let answered = w.create_transfers(&[pending, broken]).expect("batch");
        assert_eq!(answered, [R::LinkedEventFailed, R::AccountsMustBeDifferent]);
    }
    let standing = Transfer { flags: TransferFlags::PENDING, timeout: 60, ..t(7, BANK, BOB, 1) };
    w.create_transfers(&[standing]).expect("batch").all_applied().expect("applied");
    let mut chain = [standing, t(8, BANK, BOB, 1)];
    chain[0] =
        Transfer { id: 6, flags: TransferFlags::PENDING | TransferFlags::LINKED, ..standing };
    w.create_transfers(&chain).expect("batch").all_applied().expect("applied");
    let remembered = w.remembered();
    assert_eq!(remembered.timeouts, 2, "the two that stand, none of the 1,000 rolled back");
}
