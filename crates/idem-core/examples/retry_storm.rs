//! A retry storm against the claimed-key store: four threads replay a shuffled list of
//! attempts in which every intended operation appears once plus its retries, so the same
//! key is often attempted on two threads at once.
//!
//! Naive: every attempt performs the side effect. Idempotent: every attempt claims the
//! key first; only `Acquired` acts, `InFlight` waits for the holder, `Replay` returns.
//! Prints one line for `cargo xtask demo`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use idem_core::{Claim, Fingerprint, KeyStore, MemoryStore, ScopedKey, StoreConfig};
use idem_testkit::storm::{self, Plan, Retries};

const INTENTS: u64 = 20_000;
const THREADS: usize = 4;
/// Chance, in percent, that an attempt is retried (again and again, geometrically).
const RETRY_PERCENT: u64 = 50;
/// Each attempt is retried until one is not: a client that retries until it hears back.
const PLAN: Plan = Plan {
    intents: INTENTS,
    retry_percent: RETRY_PERCENT,
    retries: Retries::UntilAnswered,
    seed: 42,
};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let list = PLAN.attempts();
    let naive = AtomicU64::new(0);
    storm::run(&list, THREADS, |_| {
        naive.fetch_add(1, Ordering::Relaxed);
    });

    let store = Arc::new(MemoryStore::<u64>::new(StoreConfig::default()));
    let effects = AtomicU64::new(0);
    storm::run(&list, THREADS, |intent| {
        let key = ScopedKey::parse("demo", &format!("intent-{intent}")).expect("valid key");
        let request = Fingerprint::builder("demo").u64("intent", intent).finish();
        match store.claim_wait(&key, &request, Duration::from_secs(5)).expect("claim") {
            Claim::Acquired(lease) | Claim::Recover(lease) => {
                effects.fetch_add(1, Ordering::Relaxed);
                store.complete(&lease, intent).expect("complete");
            }
            Claim::Replay(result) => assert_eq!(result, intent),
            Claim::InFlight { .. } => panic!("a holder took longer than 5s"),
        }
    });

    let (naive, idem) = (naive.into_inner(), effects.into_inner());
    assert_eq!(idem, INTENTS, "each intent must act exactly once");
    let (scenario, effect, attempt) =
        (format!("claims, 4 threads, {RETRY_PERCENT}% retried"), "actions taken", "claims");
    let (intents, attempts, without, with) = (INTENTS, list.len(), naive, idem);
    println!(
        "{scenario}: {without} {effect} without idem, {with} with idem, for {intents} intended \
         operations ({attempts} {attempt})"
    );
    println!(
        "retry_storm\t{scenario}\t{intents}\t{attempts}\t{without}\t{with}\t{effect}\t{attempt}"
    );
    Ok(())
}
