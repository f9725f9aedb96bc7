//! A completion storm: for each of many promises, four threads race to complete it (a
//! worker, a retry of the same work, a hedged replica, a timeout), and one callback per
//! promise should hear about it once.
//!
//! Naive: a plain slot under a lock that every writer overwrites, running the callbacks
//! on every write. idem: `Completer::complete`, first write wins, and every completer then
//! reads the promise (a `SharedFuture`): each repeat must read the first write's value.
//! Prints a sentence (and, for `cargo xtask demo`, its line: promises, completion
//! attempts, callback runs naive vs idem) and a second with the values the naive slot
//! overwrote.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;

use idem_future::promise;
use idem_testkit::storm::{Answers, Row};

const PROMISES: u64 = 20_000;
const WRITERS: u64 = 4;

/// The naive slot: the last writer's value stays, every write fires the callback.
struct NaiveSlot {
    value: Mutex<Option<u64>>,
    overwritten: AtomicU64,
    callback_runs: AtomicU64,
}

impl NaiveSlot {
    fn complete(&self, value: u64) {
        if self.value.lock().expect("not poisoned").replace(value).is_some() {
            self.overwritten.fetch_add(1, Ordering::Relaxed);
        }
        self.callback_runs.fetch_add(1, Ordering::Relaxed);
    }
}

fn naive() -> (u64, u64) {
    let (mut overwritten, mut runs) = (0, 0);
    for _ in 0..PROMISES / 100 {
        let slots: Vec<NaiveSlot> = (0..100)
            .map(|_| NaiveSlot {
                value: Mutex::new(None),
                overwritten: AtomicU64::new(0),
                callback_runs: AtomicU64::new(0),
            })
            .collect();
        thread::scope(|s| {
            for w in 0..WRITERS {
                let slots = &slots;
                s.spawn(move || slots.iter().for_each(|slot| slot.complete(w)));
            }
        });
        overwritten += slots.iter().map(|s| s.overwritten.load(Ordering::Relaxed)).sum::<u64>();
        runs += slots.iter().map(|s| s.callback_runs.load(Ordering::Relaxed)).sum::<u64>();
    }
    (overwritten, runs)
}

fn idem(answers: &Answers) -> (u64, u64) {
    let runs = std::sync::Arc::new(AtomicU64::new(0));
    let wins = AtomicU64::new(0);
    for batch in 0..PROMISES / 100 {
        let promises: Vec<_> = (0..100)
            .map(|_| {
                let (completer, future) = promise::<u64, ()>();
                let runs = runs.clone();
                future.on_complete(move |_| {
                    runs.fetch_add(1, Ordering::Relaxed);
                });
                (completer, future.shared())
            })
            .collect();
        thread::scope(|s| {
            for w in 0..WRITERS {
                let (promises, wins) = (&promises, &wins);
                s.spawn(move || {
                    for (p, (completer, shared)) in (batch * 100..).zip(promises) {
                        if completer.complete(w).is_ok() {
                            wins.fetch_add(1, Ordering::Relaxed);
                        }
                        // A loser may read while the winner is still writing: it waits.
                        answers.answer(p, &shared.wait().ok());
                    }
                });
            }
        });
        for (_, shared) in promises {
            assert!(shared.wait().is_ok_and(|v| v < WRITERS));
        }
    }
    assert_eq!(wins.load(Ordering::Relaxed), PROMISES, "exactly one winner per promise");
    (0, runs.load(Ordering::Relaxed))
}

fn main() {
    let (naive_overwritten, naive_runs) = naive();
    let answers = Answers::new(PROMISES);
    let (idem_overwritten, idem_runs) = idem(&answers);
    assert_eq!(idem_runs, PROMISES, "each callback runs exactly once");
    Row {
        scenario: format!("promises, {WRITERS} racing completers"),
        intents: PROMISES,
        attempts: PROMISES * WRITERS,
        without: naive_runs,
        with: idem_runs,
        effect: "callback runs".into(),
        attempt: "completions".into(),
        repeats: answers.repeats(),
        same: answers.same(),
    }
    .print();
    println!(
        "values overwritten: naive {naive_overwritten}, idem {idem_overwritten} (losers get \
            their value back)"
    );
}
