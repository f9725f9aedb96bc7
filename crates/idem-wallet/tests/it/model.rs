//! A proptest model: random batches (valid, invalid, replays, reused ids with changed
//! fields, linked chains, pending transfers with timeouts, posts and voids) and clock
//! moves. A sequential model replays the effect of every event the ledger reported
//! `Created`; after every batch the balances match the model, the invariants hold, no id
//! was created twice, and submitting the same batch again moves nothing. The queries are
//! checked against the model too: each account's transfers (both sides, one side
//! reversed, a limit), transfers by user data, and bob's balance history.

use std::collections::HashMap;
use std::time::Duration;

use idem_wallet::{
    AMOUNT_MAX, AccountFilter, AccountFilterFlags as Side, QUERY_LIMIT_MAX, QueryFilter, Transfer,
    TransferFlags, TransferResult as R, Wallet,
};
use proptest::prelude::*;

use crate::{ALICE, BANK, BOB, CAPPED, t, wallet};

const ACCOUNTS: [u128; 5] = [BANK, ALICE, BOB, CAPPED, 99];

fn transfer() -> impl Strategy<Value = Transfer> {
    (1..14u128, 0..5usize, 0..5usize, 0..120u128, 0..6u8, 1..14u128, 0..3u32, any::<bool>())
        .prop_map(|(id, d, c, amount, kind, pending_id, timeout, linked)| {
            let mut x = t(id, ACCOUNTS[d], ACCOUNTS[c], amount);
            match kind {
                0 | 1 => {}
                2 => (x.flags, x.timeout) = (TransferFlags::PENDING, timeout),
                3 => {
                    x = Transfer {
                        id,
                        pending_id,
                        // 0, 20, 40 or the whole reservation.
                        amount: if amount % 4 == 3 { AMOUNT_MAX } else { amount % 4 * 20 },
                        flags: TransferFlags::POST_PENDING,
                        ..Default::default()
                    }
                }
                4 => {
                    x = Transfer {
                        id,
                        pending_id,
                        // 0 (the whole), or an amount that is the whole only by chance.
                        amount: if amount % 2 == 0 { 0 } else { amount },
                        flags: TransferFlags::VOID_PENDING,
                        ..Default::default()
                    }
                }
                _ => (x.user_data_128, x.user_data_32) = (7, 3),
            }
            if linked {
                x.flags |= TransferFlags::LINKED;
            }
            x
        })
}

#[derive(Default)]
struct Model {
    /// (debits_pending, debits_posted, credits_pending, credits_posted) per account.
    balances: HashMap<u128, [u128; 4]>,
    /// Live pending transfers: id -> (debit, credit, amount, expires_ms or none).
    pending: HashMap<u128, (u128, u128, u128, Option<u64>)>,
    created: HashMap<u128, Transfer>,
    /// The created ids, oldest first: the ledger's timestamp order.
    order: Vec<u128>,
    /// Bob's balances after each transfer that touched him (bob keeps a history).
    bob_history: Vec<[u128; 4]>,
    now_ms: u64,
}

impl Model {
    fn add(&mut self, account: u128, slot: usize, amount: u128, sub: bool) {
        let b = self.balances.entry(account).or_default();
        b[slot] = if sub { b[slot] - amount } else { b[slot] + amount };
    }

    fn expire(&mut self) {
        let now = self.now_ms;
        let expired: Vec<u128> = self
            .pending
            .iter()
            .filter(|(_, p)| p.3.is_some_and(|e| e <= now))
            .map(|(id, _)| *id)
            .collect();
        for id in expired {
            let (d, c, amount, _) = self.pending.remove(&id).expect("listed");
            self.add(d, 0, amount, true);
            self.add(c, 2, amount, true);
        }
    }

    /// Whether `x` means the transfer `e` the model keeps for its id: the same, or a post
    /// or void that leaves fields 0 or names its amount as the whole (TigerBeetle's rule).
    fn same(&self, e: &Transfer, x: &Transfer) -> bool {
        let settles = x.flags.contains(TransferFlags::POST_PENDING)
            || x.flags.contains(TransferFlags::VOID_PENDING);
        if !settles || x.flags != e.flags || x.pending_id != e.pending_id {
            return x == e;
        }
        let omitted = |asked: u128, kept: u128| asked == 0 || asked == kept;
        x.timeout == e.timeout
            && omitted(x.debit_account_id, e.debit_account_id)
            && omitted(x.credit_account_id, e.credit_account_id)
            && omitted(x.ledger.into(), e.ledger.into())
            && omitted(x.code.into(), e.code.into())
            && self.resolved(x) == *e
    }

    /// A post or void as it resolves against its pending transfer; any other as it is.
    fn resolved(&self, x: &Transfer) -> Transfer {
        let post = x.flags.contains(TransferFlags::POST_PENDING);
        if !post && !x.flags.contains(TransferFlags::VOID_PENDING) {
            return *x;
        }
        let Some(p) = self.created.get(&x.pending_id) else { return *x };
        let whole = if post { AMOUNT_MAX } else { 0 };
        Transfer {
            id: x.id,
            pending_id: x.pending_id,
            flags: x.flags,
            timeout: 0,
            amount: if x.amount == whole { p.amount } else { x.amount },
            user_data_128: if x.user_data_128 == 0 { p.user_data_128 } else { x.user_data_128 },
            user_data_32: if x.user_data_32 == 0 { p.user_data_32 } else { x.user_data_32 },
            ..*p
        }
    }

    fn created(&mut self, x: &Transfer) {
        let kept = self.resolved(x);
        assert!(self.created.insert(x.id, kept).is_none(), "id {} created twice", x.id);
        self.order.push(x.id);
        self.apply(x);
        if [kept.debit_account_id, kept.credit_account_id].contains(&BOB) {
            self.bob_history.push(self.balances.get(&BOB).copied().unwrap_or_default());
        }
    }

    /// Moves the balances for `x`, just created.
    fn apply(&mut self, x: &Transfer) {
        if x.flags.contains(TransferFlags::POST_PENDING)
            || x.flags.contains(TransferFlags::VOID_PENDING)
        {
            let (d, c, amount, _) =
                self.pending.remove(&x.pending_id).expect("a live pending transfer");
            self.add(d, 0, amount, true);
            self.add(c, 2, amount, true);
            if x.flags.contains(TransferFlags::VOID_PENDING) {
                assert!([0, amount].contains(&x.amount), "void {} of {}", x.id, x.amount);
            }
            if x.flags.contains(TransferFlags::POST_PENDING) {
                let posted = if x.amount == AMOUNT_MAX { amount } else { x.amount };
                assert!(posted <= amount, "post {} of {posted} from {amount} pending", x.id);
                self.add(d, 1, posted, false);
                self.add(c, 3, posted, false);
            }
        } else if x.flags.contains(TransferFlags::PENDING) {
            let expires = (x.timeout > 0).then(|| self.now_ms + u64::from(x.timeout) * 1000);
            self.pending.insert(x.id, (x.debit_account_id, x.credit_account_id, x.amount, expires));
            self.add(x.debit_account_id, 0, x.amount, false);
            self.add(x.credit_account_id, 2, x.amount, false);
        } else {
            self.add(x.debit_account_id, 1, x.amount, false);
            self.add(x.credit_account_id, 3, x.amount, false);
        }
    }

    /// The created transfers `keep` passes, in timestamp order, as the wallet keeps them.
    fn listed(&self, keep: impl Fn(&Transfer) -> bool) -> Vec<u128> {
        self.order.iter().copied().filter(|id| keep(&self.created[id])).collect()
    }

    fn assert_queries(&self, w: &Wallet) {
        let ids = |found: Vec<idem_wallet::StoredTransfer>| -> Vec<u128> {
            found.iter().map(|s| s.transfer.id).collect()
        };
        for id in ACCOUNTS {
            let filter = AccountFilter {
                account_id: id,
                limit: QUERY_LIMIT_MAX,
                flags: Side::DEBITS | Side::CREDITS,
                ..Default::default()
            };
            let touches = |t: &Transfer| t.debit_account_id == id || t.credit_account_id == id;
            let found = w.get_account_transfers(&filter).expect("a valid filter");
            assert_eq!(ids(found), self.listed(touches), "account {id}'s transfers");
            let newest = AccountFilter { limit: 3, flags: Side::DEBITS | Side::REVERSED, ..filter };
            let mut debits = self.listed(|t| t.debit_account_id == id);
            debits.reverse();
            debits.truncate(3);
            let found = w.get_account_transfers(&newest).expect("a valid filter");
            assert_eq!(ids(found), debits, "account {id}'s newest debits");
        }
        let tagged = QueryFilter { user_data_128: 7, limit: QUERY_LIMIT_MAX, ..Default::default() };
        let found = w.query_transfers(&tagged).expect("a valid filter");
        assert_eq!(ids(found), self.listed(|t| t.user_data_128 == 7), "user data 7");
        let bob = AccountFilter {
            account_id: BOB,
            limit: QUERY_LIMIT_MAX,
            flags: Side::DEBITS | Side::CREDITS,
            ..Default::default()
        };
        let history = w.get_account_balances(&bob).expect("a valid filter");
        let balances: Vec<[u128; 4]> = history
            .iter()
            .map(|b| [b.debits_pending, b.debits_posted, b.credits_pending, b.credits_posted])
            .collect();
        assert_eq!(balances, self.bob_history, "bob's balance history");
        let times: Vec<u64> = history.iter().map(|b| b.timestamp).collect();
        let found = w.get_account_transfers(&bob).expect("a valid filter");
        let transfer_times: Vec<u64> = found.iter().map(|s| s.timestamp).collect();
        assert_eq!(times, transfer_times, "one balance per transfer, at its timestamp");
    }

    fn assert_matches(&self, w: &Wallet) {
        for id in ACCOUNTS.into_iter().filter(|id| *id != 99) {
            let a = w.account(id).expect("account");
            let b = self.balances.get(&id).copied().unwrap_or_default();
            assert_eq!(
                [a.debits_pending, a.debits_posted, a.credits_pending, a.credits_posted],
                b,
                "account {id}"
            );
        }
    }
}

fn check(batches: &[(Vec<Transfer>, u64)]) {
    let (w, clock) = wallet();
    let mut m = Model::default();
    m.created(&t(1_000_000, BANK, ALICE, 100)); // the fixture's top-up
    for (batch, advance_ms) in batches {
        clock.advance(Duration::from_millis(*advance_ms));
        m.now_ms += advance_ms;
        m.expire();
        let results = w.create_transfers(batch).expect("small batch");
        assert_eq!(results.len(), batch.len());
        for (x, r) in batch.iter().zip(&results) {
            if *r == R::Created {
                m.created(x);
            } else if let Some(original) = m.created.get(&x.id) {
                // A repeat of an applied id is answered, never applied: `Exists` for
                // identical fields, `ExistsWith...` otherwise (or the chain's failure).
                let identical = m.same(original, x);
                let fine = match r {
                    R::Exists => identical,
                    R::LinkedEventFailed | R::LinkedEventChainOpen => true,
                    other => !identical && format!("{other:?}").starts_with("ExistsWith"),
                };
                assert!(fine, "id {} (identical: {identical}) answered {r:?}", x.id);
            }
        }
        m.assert_matches(&w);
        m.assert_queries(&w);
        w.assert_invariants();
        // The same batch again: an id already applied is never applied twice (the model
        // asserts it); events that failed only because of their chain may apply now.
        let again = w.create_transfers(batch).expect("small batch");
        for (x, r) in batch.iter().zip(&again) {
            if *r == R::Created {
                m.created(x);
            }
        }
        m.assert_matches(&w);
        m.assert_queries(&w);
    }
}

/// Proptest cases: `IDEM_MODEL_CASES` (for a long local run), else 256.
fn model_cases() -> u32 {
    std::env::var("IDEM_MODEL_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(256)
}

/// A batch of transfers and how far the clock moves after it, in milliseconds.
fn batch() -> impl Strategy<Value = (Vec<Transfer>, u64)> {
    let advance = prop::sample::select(vec![0u64, 500, 1_000, 5_000]);
    (prop::collection::vec(transfer(), 1..8), advance)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: model_cases(), ..ProptestConfig::default() })]

    #[test]
    fn ledger_matches_model(batches in prop::collection::vec(batch(), 1..12)) {
        check(&batches);
    }
}
