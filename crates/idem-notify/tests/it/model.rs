//! A proptest model: random submissions, duplicates, redeliveries (after lease expiry) and
//! provider faults, with a provider that does not deduplicate. After draining, each id was
//! delivered at most once, and every message is delivered, dead-lettered or reported
//! unresolved: none vanishes.

use std::collections::HashSet;

use idem_notify::{ProviderFault, SimulatedProvider, SubmitError, Submitted};
use proptest::prelude::*;

use crate::{LEASE, WAIT, note, setup, wait_until};

#[derive(Debug, Clone)]
enum Op {
    Submit(u8),
    Fault(u8),
    ExpireLeases,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (0..6u8).prop_map(Op::Submit),
        2 => (0..5u8).prop_map(Op::Fault),
        1 => Just(Op::ExpireLeases),
    ]
}

fn fault(kind: u8) -> ProviderFault {
    match kind {
        0 => ProviderFault::FailBeforeSend,
        1 => ProviderFault::Throttle,
        2 => ProviderFault::Permanent,
        3 => ProviderFault::DeliverThenTimeout,
        _ => ProviderFault::TimeoutWithoutDelivery,
    }
}

fn check(ops: &[Op]) {
    // Dedups nothing, but answers status: only the notifier prevents a second ping.
    let provider = SimulatedProvider::new();
    let s = setup(provider.forgetting_ids_but_keeping_status(), |c| c.workers(2));
    let mut submitted = HashSet::new();
    for op in ops {
        match *op {
            Op::Submit(i) => match s.notifier.submit(note(&format!("m{i}"))) {
                Ok(Submitted::Accepted | Submitted::Recovering) => {
                    submitted.insert(i);
                }
                Ok(_) => {}
                Err(SubmitError::QueueFull { .. }) => {}
                Err(e) => panic!("unexpected {e}"),
            },
            Op::Fault(kind) => s.notifier.provider().inject(fault(kind)),
            Op::ExpireLeases => {
                // Only claims left pending (unresolved) may expire: a lease that runs out
                // while its worker is still sending is a hung worker, which the lease
                // length must rule out (and a deduplicating provider would absorb).
                // The counters move after the store is written, so once they add up
                // every worker has finished what it took. If they never do, the test
                // fails here rather than moving the clock under a sending worker.
                let settled = |st: idem_notify::Stats| {
                    st.sent + st.dead_lettered + st.unresolved >= st.accepted
                };
                wait_until("every accepted message to settle", WAIT, || {
                    settled(s.notifier.stats())
                });
                s.clock.advance(LEASE);
            }
        }
    }
    assert!(s.notifier.shutdown(std::time::Duration::from_secs(30)).drained);
    let dead: HashSet<String> = s
        .notifier
        .dead_letters()
        .into_iter()
        .map(|d| d.notification.message_id().to_string())
        .collect();
    let unresolved: HashSet<String> =
        s.notifier.unresolved().into_iter().map(|n| n.message_id().to_string()).collect();
    for i in 0..6u8 {
        let n = note(&format!("m{i}"));
        let delivered = s.notifier.provider().deliveries(&n);
        assert!(delivered <= 1, "m{i} delivered {delivered} times");
        if submitted.contains(&i) {
            let accounted = delivered == 1
                || dead.contains(n.message_id())
                || unresolved.contains(n.message_id());
            assert!(accounted, "m{i} vanished");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn each_id_delivered_at_most_once_and_none_vanishes(ops in prop::collection::vec(op(), 1..40)) {
        check(&ops);
    }
}
