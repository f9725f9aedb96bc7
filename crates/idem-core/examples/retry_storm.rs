//! A retry storm against the claimed-key store: four threads replay a shuffled list of
//! attempts in which every intended operation appears once plus its retries, so the same
//! key is often attempted on two threads at once.
//!
//! Naive: every attempt performs the side effect. Idempotent: every attempt claims the
//! key first; only `Acquired` acts, `InFlight` waits for the holder, `Replay` returns.
//! The action's result is a number drawn when it acts, so a replay of any other result
//! shows. Prints a sentence (and, for `cargo xtask demo`, its line).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use idem_core::{Claim, Fingerprint, KeyStore, MemoryStore, ScopedKey, StoreConfig};
use idem_testkit::storm::{self, Answers, Plan, Retries, Row};

const INTENTS: u64 = 20_000;
const THREADS: usize = 4;
/// Chance, in percent, that an intent is retried once, as in every other storm.
const RETRY_PERCENT: u64 = 50;
/// Half the intents sent twice: a client that retries a timeout once.
const PLAN: Plan =
    Plan { intents: INTENTS, retry_percent: RETRY_PERCENT, retries: Retries::Once, seed: 42 };

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let list = PLAN.attempts();
    let naive = AtomicU64::new(0);
    storm::run(&list, THREADS, |_| {
        naive.fetch_add(1, Ordering::Relaxed);
    });

    let store = Arc::new(MemoryStore::<u64>::new(StoreConfig::default()));
    let effects = AtomicU64::new(0);
    let answers = Answers::new(INTENTS);
    storm::run(&list, THREADS, |intent| {
        let key = ScopedKey::parse("demo", &format!("intent-{intent}")).expect("valid key");
        let request = Fingerprint::builder("demo").u64("intent", intent).finish();
        match store.claim_wait(&key, &request, Duration::from_secs(5)).expect("claim") {
            Claim::Acquired(lease) | Claim::Recover(lease) => {
                let result = effects.fetch_add(1, Ordering::Relaxed);
                // Recorded before it is stored: a replay can only come after.
                answers.answer(intent, &result);
                store.complete(&lease, result).expect("complete");
            }
            Claim::Replay(result) => answers.answer(intent, &result),
            Claim::InFlight { .. } => panic!("a holder took longer than 5s"),
        }
    });

    let (naive, idem) = (naive.into_inner(), effects.into_inner());
    assert_eq!(idem, INTENTS, "each intent must act exactly once");
    Row {
        scenario: format!("claims, 4 threads, {RETRY_PERCENT}% retried"),
        intents: INTENTS,
        attempts: list.len() as u64,
        without: naive,
        with: idem,
        effect: "actions taken".into(),
        attempt: "claims".into(),
        repeats: answers.repeats(),
        same: answers.same(),
    }
    .print();
    Ok(())
}
