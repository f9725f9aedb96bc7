//! Real threads, bounded: four threads submit overlapping batches (every batch is sent by
//! two threads, in different orders, as a redelivering queue would). Afterwards every id
//! applied once, balances are exact, and the invariants hold.

use std::thread;

use idem_wallet::TransferResult as R;

use crate::{BANK, BOB, t, wallet};

const BATCHES: u128 = 40;
const PER_BATCH: u128 = 100;

#[test]
fn overlapping_redelivered_batches_apply_each_id_once() {
    let (w, _) = wallet();
    let batch = |b: u128| {
        (0..PER_BATCH).map(|i| t(b * PER_BATCH + i + 1, BANK, BOB, i + 1)).collect::<Vec<_>>()
    };
    let created: u128 = thread::scope(|s| {
        let handles: Vec<_> = (0..4u128)
            .map(|thread| {
                let (w, batch) = (&w, &batch);
                s.spawn(move || {
                    let mut created = 0;
                    // Threads 0 and 1 send the even batches, 2 and 3 the odd ones; each
                    // pair in opposite orders, so every batch is delivered twice.
                    let mut mine: Vec<u128> =
                        (0..BATCHES).filter(|b| b % 2 == thread / 2).collect();
                    if thread % 2 == 1 {
                        mine.reverse();
                    }
                    for b in mine {
                        let results = w.create_transfers(&batch(b)).expect("batch");
                        assert!(
                            results.iter().all(|r| matches!(r, R::Created | R::Exists)),
                            "{results:?}"
                        );
                        created += results.iter().filter(|r| **r == R::Created).count() as u128;
                    }
                    created
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("thread")).sum()
    });
    assert_eq!(created, BATCHES * PER_BATCH, "each id created exactly once");
    let per_batch_sum = PER_BATCH * (PER_BATCH + 1) / 2;
    assert_eq!(w.account(BOB).map(|a| a.credits_posted), Some(BATCHES * per_batch_sum));
    w.assert_invariants();
}
