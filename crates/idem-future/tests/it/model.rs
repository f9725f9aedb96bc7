//! A proptest over random schedules on real threads: completers race with complete, fail
//! and cancel, readers register callbacks and some drop their handles early. After each
//! run: exactly one winner, each callback ran exactly once, every reader saw the winner.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use idem_future::{Error, promise};
use proptest::prelude::*;

#[derive(Debug, Clone, Copy)]
enum Act {
    Complete(u32),
    Fail(u32),
    Cancel,
    OnComplete,
    Drop,
}

fn act() -> impl Strategy<Value = Act> {
    prop_oneof![
        any::<u32>().prop_map(Act::Complete),
        any::<u32>().prop_map(Act::Fail),
        Just(Act::Cancel),
        Just(Act::OnComplete),
        Just(Act::Drop),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn one_winner_callbacks_once(
        threads in prop::collection::vec(prop::collection::vec(act(), 1..5), 1..5)
    ) {
        let (completer, future) = promise::<u32, u32>();
        let shared = future.shared();
        let callbacks_registered = Arc::new(AtomicUsize::new(0));
        let callbacks_run = Arc::new(AtomicUsize::new(0));
        let barrier = Arc::new(Barrier::new(threads.len()));
        let handles: Vec<_> = threads.into_iter().map(|acts| {
            let (mut c, barrier) = (Some(completer.clone()), barrier.clone());
            let (registered, run) = (callbacks_registered.clone(), callbacks_run.clone());
            let reader = shared.clone();
            thread::spawn(move || {
                barrier.wait();
                let mut wins = Vec::new();
                for a in acts {
                    let Some(completer) = &c else { break };
                    let won = match a {
                        Act::Complete(v) => completer.complete(v).is_ok().then_some(Ok(v)),
                        Act::Fail(e) => completer.fail(e).is_ok().then_some(Err(Error::Failed(e))),
                        Act::Cancel => completer.cancel().then_some(Err(Error::Cancelled)),
                        Act::OnComplete => {
                            registered.fetch_add(1, Ordering::SeqCst);
                            let run = run.clone();
                            completer.on_complete(move |_| { run.fetch_add(1, Ordering::SeqCst); });
                            None
                        }
                        Act::Drop => { c = None; None }
                    };
                    wins.extend(won);
                }
                drop(c);
                (wins, reader.wait_timeout(Duration::from_secs(10)))
            })
        }).collect();
        drop(completer);
        let mut winners = Vec::new();
        let mut seen = Vec::new();
        for h in handles {
            let (wins, outcome) = h.join().expect("thread");
            winners.extend(wins);
            seen.push(outcome.expect("every reader sees an outcome: all completers are gone"));
        }
        let outcome = shared.wait();
        prop_assert!(winners.len() <= 1, "more than one winner: {:?}", winners);
        match winners.pop() {
            Some(w) => prop_assert_eq!(&outcome, &w),
            None => prop_assert_eq!(&outcome, &Err(Error::Abandoned)),
        }
        prop_assert!(seen.iter().all(|s| *s == outcome), "a reader saw another outcome");
        let registered = callbacks_registered.load(Ordering::SeqCst);
        prop_assert_eq!(callbacks_run.load(Ordering::SeqCst), registered);
    }
}
