//! Real threads behind a barrier: one key, many payers, exactly one charge.

use std::sync::Barrier;
use std::thread;

use idem_payments::{PayError, PaymentRequest};

use crate::{charges, key, processor, request};

#[test]
fn n_threads_one_key_one_charge() {
    for round in 0..20 {
        let (p, _) = processor();
        let (k, r) = (key(&format!("k{round}")), request(500));
        let barrier = Barrier::new(8);
        let results: Vec<_> = thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|_| {
                    s.spawn(|| {
                        barrier.wait();
                        p.pay(&k, &r)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().expect("payer")).collect()
        });
        assert_eq!(charges(&p, &k, &r), 1, "round {round}");
        let fresh = results.iter().filter(|r| matches!(r, Ok(p) if !p.replayed)).count();
        assert_eq!(fresh, 1, "exactly one payer charged: {results:?}");
        assert!(results.iter().all(|r| matches!(r, Ok(_) | Err(PayError::InProgress { .. }))));
    }
}

#[test]
fn different_requests_under_one_key_never_charge_twice() {
    let (p, _) = processor();
    let k = key("shared");
    let barrier = Barrier::new(6);
    let requests: Vec<PaymentRequest> = (1..=6).map(request).collect();
    thread::scope(|s| {
        for r in &requests {
            let (p, k, barrier) = (&p, &k, &barrier);
            s.spawn(move || {
                barrier.wait();
                let _ = p.pay(k, r);
            });
        }
    });
    // Same customer, so one scoped key (and one gateway key) for all six requests.
    assert_eq!(charges(&p, &k, &requests[0]), 1, "one key, one charge, whichever request won");
    let total_charges = p.gateway().totals().charges;
    assert_eq!(total_charges, 1);
}
