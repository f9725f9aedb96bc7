//! The ledgers both benches run: idem-wallet and the obvious design (one mutex over a map
//! of balances and a set of applied ids), and the transfers they are given.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use idem_testkit::bench::FixedKeys;
use idem_wallet::{NewAccount, Transfer, Wallet};

pub(crate) const ACCOUNTS: u128 = 1024;
/// Transfers per fresh ledger, so memory stays bounded however long criterion runs.
pub(crate) const CHUNK: u64 = 1 << 20;

pub(crate) trait Ledger: Sync {
    fn fresh() -> Self;
    fn submit(&self, batch: &[Transfer]) -> usize;
}

impl Ledger for Wallet {
    fn fresh() -> Self {
        let w = Wallet::new();
        let accounts: Vec<NewAccount> = (1..=ACCOUNTS)
            .map(|id| NewAccount { id, ledger: 1, code: 1, ..Default::default() })
            .collect();
        drop(w.create_accounts(&accounts).expect("batch"));
        w
    }
    fn submit(&self, batch: &[Transfer]) -> usize {
        self.create_transfers(batch).expect("batch").len()
    }
}

/// The obvious design: one mutex, a map of balances, a set of ids.
/// Balances by account, and the applied transfer ids.
type Books = (HashMap<u128, i128, FixedKeys>, HashSet<u128, FixedKeys>);

pub(crate) struct Obvious(Mutex<Books>);

impl Ledger for Obvious {
    fn fresh() -> Self {
        Self(Mutex::new(((1..=ACCOUNTS).map(|id| (id, 0)).collect(), HashSet::default())))
    }
    fn submit(&self, batch: &[Transfer]) -> usize {
        let mut guard = self.0.lock().expect("not poisoned");
        let (balances, ids) = &mut *guard;
        let mut applied = 0;
        for t in batch {
            if ids.insert(t.id) {
                *balances.entry(t.debit_account_id).or_default() -= t.amount as i128;
                *balances.entry(t.credit_account_id).or_default() += t.amount as i128;
                applied += 1;
            }
        }
        applied
    }
}

pub(crate) fn transfer(id: u128) -> Transfer {
    let debit = id % ACCOUNTS + 1;
    let credit = (id * 7 + 3) % ACCOUNTS + 1;
    let credit = if credit == debit { credit % ACCOUNTS + 1 } else { credit };
    Transfer {
        id,
        debit_account_id: debit,
        credit_account_id: credit,
        amount: 1 + id % 100,
        ledger: 1,
        code: 1,
        ..Default::default()
    }
}
