//! What an operator sees with the `tracing` feature: one span per batch and one event that
//! counts what it created, what it replayed (a retry made harmless) and what failed.

use idem_testkit::capture::{Level, capture};

use crate::{ALICE, BOB, t, wallet};

#[test]
fn a_replayed_batch_is_counted_as_replays_not_as_new_transfers() {
    let (w, _) = wallet();
    // The second is malformed (no ledger): it fails.
    let batch = [t(7, ALICE, BOB, 5), idem_wallet::Transfer { ledger: 0, ..t(8, ALICE, BOB, 5) }];
    let (_, seen) = capture(|| w.create_transfers(&batch).expect("batch"));
    let (_, again) = capture(|| w.create_transfers(&batch[..1]).expect("retry"));
    for (seen, counts) in [(seen, ["1", "0", "1"]), (again, ["0", "1", "0"])] {
        assert_eq!(seen.len(), 1, "one event per batch: {seen:?}");
        let event = &seen[0];
        assert_eq!((event.level, event.message.as_str()), (Level::INFO, "batch applied"));
        let fields = ["created", "replays", "failed"].map(|f| event.fields[f].as_str());
        assert_eq!(fields, counts, "{event:?}");
        assert!(event.span_field("create_transfers", "len").is_some(), "{event:?}");
    }
}
