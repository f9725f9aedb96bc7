//! Real threads, bounded in count: 16 threads share 4 connections, releasing twice,
//! turning guards into loans and releasing them, and releasing stale loans kept from
//! earlier ones.
//! Nobody ever holds a connection someone else holds; afterwards every connection is back
//! and the counts add up.

use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::Duration;

use idem_pool::Fairness;

use crate::pool;

const THREADS: u64 = 16;
const ROUNDS: u64 = 300;

#[test]
fn sixteen_threads_four_connections_fifo() {
    sixteen_threads_four_connections(Fairness::Fifo);
}

#[test]
fn sixteen_threads_four_connections_barging() {
    sixteen_threads_four_connections(Fairness::Barging);
}

#[test]
fn sixteen_threads_four_connections_eventual() {
    sixteen_threads_four_connections(Fairness::Eventual);
}

fn sixteen_threads_four_connections(fairness: Fairness) {
    let (pool, _) = pool(4, |b| b.connection_timeout(Duration::from_secs(30)).fairness(fairness));
    let double = AtomicU64::new(0);
    let stale_or_double = AtomicU64::new(0);
    thread::scope(|s| {
        for t in 0..THREADS {
            let (pool, double, stale_or_double) = (&pool, &double, &stale_or_double);
            s.spawn(move || {
                let mut rng = t.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
                let mut kept = Vec::new();
                for _ in 0..ROUNDS {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    let mut conn = pool.get().expect("a connection within 30s");
                    conn.hold();
                    thread::yield_now();
                    conn.unhold();
                    match rng % 4 {
                        0 => {
                            assert!(conn.release());
                            assert!(!conn.release());
                            double.fetch_add(1, Ordering::Relaxed);
                        }
                        1 => {
                            let loan = conn.into_loan();
                            kept.push(loan.clone());
                            assert!(loan.release());
                        }
                        2 => {
                            if let Some(old) = kept.pop() {
                                assert!(!old.release(), "a kept loan was released already");
                                stale_or_double.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        _ => {}
                    }
                }
            });
        }
    });
    let state = pool.state();
    assert_eq!((state.in_use, state.waiters), (0, 0));
    assert_eq!(state.idle, state.size);
    assert!(state.size <= 4);
    assert_eq!(
        state.double_releases + state.stale_releases,
        double.into_inner() + stale_or_double.into_inner()
    );
    pool.assert_invariants();
}
