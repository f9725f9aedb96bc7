//! Transfers retried and redelivered: 10,000 intended transfers of 1 unit between 100
//! wallets; 30% of them are delivered again (a client retry after a timeout, a queue
//! redelivery), from four threads at once.
//!
//! Naive: a ledger that applies every delivery. idem: `Wallet::create_transfers` with the
//! transfer's id. A repeat is answered `Exists`, and the transfer it names is the one its
//! first delivery created (the same timestamp). Prints a sentence (and, for `cargo xtask
//! demo`, its line: money moved per intended transfer, naive > 1, idem exactly 1) and a
//! second showing that money is conserved.

use std::sync::Mutex;

use idem_testkit::storm::{Answers, Row};
use idem_wallet::{NewAccount, Transfer, TransferResult, Wallet};

const INTENTS: u128 = 10_000;
const ACCOUNTS: u128 = 100;
const THREADS: usize = 4;
const RETRY_PERCENT: u128 = 30;

fn transfer(id: u128) -> Transfer {
    let debit = id % ACCOUNTS + 1;
    let credit = (id * 7 + 1) % ACCOUNTS + 1;
    let credit = if credit == debit { credit % ACCOUNTS + 1 } else { credit };
    Transfer {
        id,
        debit_account_id: debit,
        credit_account_id: credit,
        amount: 1,
        ledger: 1,
        code: 1,
        ..Default::default()
    }
}

/// Every intent once, 30% twice, shuffled nearby so a redelivery often races its original.
fn deliveries() -> Vec<u128> {
    let mut list = Vec::new();
    let mut rng: u64 = 99;
    for id in 1..=INTENTS {
        list.push(id);
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        if u128::from(rng % 100) < RETRY_PERCENT {
            list.push(id);
        }
    }
    for i in (1..list.len()).rev() {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        list.swap(i, i.saturating_sub((rng % 8) as usize));
    }
    list
}

fn storm(list: &[u128], deliver: impl Fn(&[u128]) + Sync) {
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let deliver = &deliver;
            s.spawn(move || {
                let mine: Vec<u128> = list.iter().skip(t).step_by(THREADS).copied().collect();
                mine.chunks(64).for_each(deliver);
            });
        }
    });
}

fn main() {
    let list = deliveries();

    let naive = Mutex::new(vec![0i128; ACCOUNTS as usize + 1]);
    storm(&list, |ids| {
        let mut balances = naive.lock().expect("not poisoned");
        for t in ids.iter().map(|id| transfer(*id)) {
            balances[t.debit_account_id as usize] -= 1;
            balances[t.credit_account_id as usize] += 1;
        }
    });
    let naive = naive.into_inner().expect("not poisoned");
    let naive_moved_total = list.len() as u128; // every delivery moved one unit

    let wallet = Wallet::new();
    let accounts: Vec<NewAccount> = (1..=ACCOUNTS)
        .map(|id| NewAccount { id, ledger: 1, code: 1, ..Default::default() })
        .collect();
    wallet.create_accounts(&accounts).expect("batch").all_applied().expect("applied");
    let answers = Answers::new(INTENTS as u64 + 1);
    storm(&list, |ids| {
        let batch: Vec<Transfer> = ids.iter().map(|id| transfer(*id)).collect();
        let results = wallet.create_transfers(&batch).expect("batch");
        for (id, result) in ids.iter().zip(results.iter()) {
            // What the client hears: applied (first as Created, then as Exists), and the
            // transfer that stands for its id.
            let applied = matches!(result, TransferResult::Created | TransferResult::Exists);
            let stored = wallet.transfer(*id).map(|t| t.timestamp);
            answers.answer(*id as u64, &(applied, stored));
        }
    });
    let idem_moved: u128 =
        (1..=ACCOUNTS).map(|id| wallet.account(id).map_or(0, |a| a.credits_posted)).sum();
    let net: i128 = (1..=ACCOUNTS)
        .map(|id| {
            wallet.account(id).map_or(0, |a| a.credits_posted as i128 - a.debits_posted as i128)
        })
        .sum();
    wallet.assert_invariants();
    assert_eq!(idem_moved, INTENTS, "each intended transfer moved its money exactly once");
    Row {
        scenario: format!("transfers, {RETRY_PERCENT}% redelivered"),
        intents: INTENTS as u64,
        attempts: list.len() as u64,
        without: naive_moved_total as u64,
        with: idem_moved as u64,
        effect: "units moved".into(),
        attempt: "deliveries".into(),
        repeats: answers.repeats(),
        same: answers.same(),
    }
    .print();
    // Both ledgers are double-entry, so both conserve money; only the naive one moved it
    // more than once.
    println!("money conserved: naive net {}, idem net {net}", naive.iter().sum::<i128>());
}
