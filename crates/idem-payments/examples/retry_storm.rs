//! A checkout retry storm: 10,000 intended payments; 30% of them are retried once, some
//! retries run concurrently with the attempt they repeat,
//! and 5% of charges lose their answer after charging (the hiccup that makes clients
//! retry). Four threads replay the shuffled attempts.
//!
//! Naive: every attempt charges. idem: every attempt pays with the intent's key; after the
//! storm, leases run out, `reconcile` settles what lost its answer, and clients that got
//! no answer retry once more. The gateway here does NOT deduplicate, so the processor
//! alone keeps charges at one per intent; every answer a retry gets is held against the
//! intent's first (the same charge). Prints a sentence (and, for `cargo xtask demo`, its
//! line).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use idem_core::{IdempotencyKey, KeyStore, ManualClock, MemoryStore, StoreConfig, Timestamp};
use idem_payments::{FaultPlan, Gateway, GatewayKey, PaymentRequest, Processor, SimulatedGateway};
use idem_testkit::storm::{self, Answers, Plan, Retries, Row};

const INTENTS: u64 = 10_000;
const THREADS: usize = 4;
const RETRY_PERCENT: u64 = 30;

/// Every intent once plus its retries, shuffled locally so retries land near their
/// original (and often run beside it). One retry for `retry_percent` of intents: charges
/// per intent = 1 + retry rate, naively.
fn attempts(retry_percent: u64) -> Vec<u64> {
    Plan { intents: INTENTS, retry_percent, retries: Retries::Once, seed: 7 }.attempts()
}

fn intent(i: u64) -> (IdempotencyKey, PaymentRequest) {
    let key = IdempotencyKey::new(&format!("checkout-{i}")).expect("valid key");
    let request = PaymentRequest::new(&format!("cus_{}", i % 500), 1_000 + (i % 90) as i64, "EUR")
        .expect("valid request");
    (key, request)
}

/// Every attempt charges: the naive checkout, without keys. Returns the charges made.
fn naive_charges(list: &[u64]) -> u64 {
    // Naive: no key; every attempt is a charge.
    let naive = SimulatedGateway::new().without_dedup();
    let counter = AtomicU64::new(0);
    storm::run(list, THREADS, |i| {
        let (_, r) = intent(i);
        let key = GatewayKey::derive(
            &idem_core::ScopedKey::parse(
                "naive",
                &format!("attempt-{}", counter.fetch_add(1, Ordering::Relaxed)),
            )
            .expect("key"),
        );
        naive.charge(&key, &r).expect("charge");
    });
    naive.totals().charges
}

/// Every attempt pays with its intent's key; hiccups after charging; then settle.
/// Returns the charges made, the answers, the attempts made after the storm (one per intent
/// left without an answer), and the store file to remove (`--durable`).
fn idem_charges(list: &[u64], durable: bool) -> (u64, Answers, u64, std::path::PathBuf) {
    // idem: a key per intent; hiccups after charging; then settle.
    let clock = Arc::new(ManualClock::new(Timestamp::from_millis(0)));
    let config = StoreConfig::builder().capacity(100_000).build().expect("valid config");
    let gateway = SimulatedGateway::new().without_dedup().with_faults(FaultPlan {
        charge_then_timeout_percent: 5,
        seed: 11,
        ..FaultPlan::default()
    });
    let path =
        std::env::temp_dir().join(format!("idem-demo-payments-{}.sqlite", std::process::id()));
    let store: Arc<dyn KeyStore<idem_payments::PaymentOutcome>> = if durable {
        Arc::new(
            idem_store_sqlite::SqliteStore::open_with_clock(&path, config, clock.clone())
                .expect("store file"),
        )
    } else {
        Arc::new(MemoryStore::with_clock(config, clock.clone()))
    };
    let processor = Processor::new("shop", gateway, store).expect("valid merchant");
    let answers = Answers::new(INTENTS);
    let answer = |i: u64, payment: idem_payments::Payment| {
        answers.answer(i, &format!("{:?}", payment.outcome));
    };
    storm::run(list, THREADS, |i| {
        let (k, r) = intent(i);
        // An attempt beside the one it repeats, or whose charge lost its answer, gets an
        // error and no answer: the client retries it after the storm.
        if let Ok(payment) = processor.pay(&k, &r) {
            answer(i, payment);
        }
    });
    clock.advance(StoreConfig::LEASE_DEFAULT + Duration::from_secs(1));
    let report = processor.reconcile(INTENTS as usize);
    assert!(report.unresolved.is_empty(), "{report:?}");
    let unanswered: Vec<u64> = (0..INTENTS).filter(|i| !answers.answered(*i)).collect();
    for &i in &unanswered {
        let (k, r) = intent(i);
        answer(i, processor.pay(&k, &r).expect("every intent is settled by now"));
    }
    let idem_charges = processor.gateway().totals().charges;
    assert_eq!(idem_charges, INTENTS, "exactly one charge per intended payment");
    (idem_charges, answers, unanswered.len() as u64, path)
}

/// `--rates`: the storm at retry rates 0% to 100%, one `rate` line each, for the demo's
/// plot of charges per intended payment against the retry rate.
fn rates() {
    for percent in (0..=100).step_by(10) {
        let list = attempts(percent);
        let (naive, (idem, ..)) = (naive_charges(&list), idem_charges(&list, false));
        println!("rate\t{percent}\t{INTENTS}\t{naive}\t{idem}");
    }
}

fn main() {
    if std::env::args().any(|a| a == "--rates") {
        return rates();
    }
    // `--durable` (from `cargo xtask demo --durable`): the same storm on the SQLite store.
    let durable = std::env::args().any(|a| a == "--durable");
    let list = attempts(RETRY_PERCENT);
    let naive_charges = naive_charges(&list);
    let (idem_charges, answers, late, path) = idem_charges(&list, durable);
    Row {
        scenario: format!(
            "payments{}, {RETRY_PERCENT}% retried",
            if durable { " (sqlite)" } else { "" }
        ),
        intents: INTENTS,
        attempts: list.len() as u64 + late,
        without: naive_charges,
        with: idem_charges,
        effect: "cards charged".into(),
        attempt: "payment attempts".into(),
        repeats: answers.repeats(),
        same: answers.same(),
    }
    .print();
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}
