//! What an operator sees with the `tracing` feature: a checkout span per `get`, a warning
//! for a stale release (naming the slot and generation) and for a timeout (with its cause).

use std::time::Duration;

use idem_testkit::capture::{Level, capture};

use crate::pool;

#[test]
fn a_stale_release_is_a_warning_that_names_the_loan() {
    let (pool, _) = pool(1, |b| b);
    let ((stale, holder), seen) = capture(|| {
        let loan = pool.get().expect("get").into_loan();
        let stale = loan.clone();
        assert!(loan.release());
        (stale, pool.get().expect("the same slot, lent again"))
    });
    assert!(seen.is_empty(), "nothing to report on a healthy loan: {seen:?}");
    let (slot, generation) = (stale.loan_id().slot(), stale.loan_id().generation());
    let (released, seen) = capture(|| stale.release());
    assert!(!released);
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].level, Level::WARN);
    assert!(seen[0].message.starts_with("stale release"), "{:?}", seen[0]);
    assert_eq!(seen[0].fields.get("slot"), Some(&slot.to_string()));
    assert_eq!(seen[0].fields.get("generation"), Some(&generation.to_string()));
    drop(holder);
}

#[test]
fn a_timed_out_checkout_warns_inside_its_span() {
    let (pool, _) = pool(1, |b| b);
    let _held = pool.get().expect("get");
    let (result, seen) = capture(|| pool.get_timeout(Duration::from_millis(1)));
    assert!(result.is_err());
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!((seen[0].level, seen[0].message.as_str()), (Level::WARN, "checkout failed"));
    assert_eq!(seen[0].span_field("checkout", "timeout"), Some("1ms"));
    assert!(seen[0].fields["error"].starts_with("timed out"), "{:?}", seen[0]);
}
