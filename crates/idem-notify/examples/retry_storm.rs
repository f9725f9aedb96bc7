//! A notification storm: 10,000 intended notifications; producers retry 30% of submits
//! (a timed-out submit), the queue redelivers 10%, and 5% of provider calls time out after
//! delivering. The provider does not deduplicate.
//!
//! Naive: every submission is sent, and a timed-out send is retried. idem: submit with the
//! message id. A repeat submission is answered with the original: the message is being
//! sent (`DuplicateInFlight`) or was delivered (`Duplicate(Delivered)`), never queued
//! again. Prints a sentence (and, for `cargo xtask demo`, its line: pings per intended
//! notification, naive > 1, idem exactly 1).

use std::time::Duration;

use idem_core::{KeyStore, MemoryStore, StoreConfig};
use idem_notify::{
    Channel, Config, Notification, Notifier, Outcome, Provider, ProviderFault, SimulatedProvider,
    SubmitError, Submitted,
};
use idem_testkit::storm::Row;

const INTENTS: usize = 10_000;

fn notification(i: usize) -> Notification {
    Notification::new(
        &format!("note-{i}"),
        &format!("user:{}", i % 700),
        Channel::Sms,
        "Your code is 4242",
    )
    .expect("valid")
}

/// Every intent once, plus a producer retry (30%) and a queue redelivery (10%).
fn submissions() -> Vec<usize> {
    let mut all = Vec::new();
    let mut rng: u64 = 5;
    for i in 0..INTENTS {
        all.push(i);
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        if rng % 100 < 30 {
            all.push(i);
        }
        if (rng >> 8) % 100 < 10 {
            all.push(i);
        }
    }
    all
}

/// Submits every entry of `list`, waiting while the queue is full; returns the repeat
/// submissions and those answered with the original (being sent, or delivered).
fn submit_all<S: KeyStore<Outcome> + 'static>(
    notifier: &Notifier<SimulatedProvider, S>,
    list: &[usize],
) -> (u64, u64) {
    let (mut submitted, mut repeats, mut same) = (vec![false; INTENTS], 0, 0);
    for (k, i) in list.iter().enumerate() {
        if k % 20 == 19 {
            notifier.provider().inject(ProviderFault::DeliverThenTimeout);
        }
        let answer = loop {
            match notifier.submit(notification(*i)) {
                Err(SubmitError::QueueFull { .. }) => std::thread::yield_now(),
                other => break other.expect("a submission is taken"),
            }
        };
        if std::mem::replace(&mut submitted[*i], true) {
            repeats += 1;
            let original = matches!(
                answer,
                Submitted::DuplicateInFlight | Submitted::Duplicate(Outcome::Delivered)
            );
            same += u64::from(original);
        }
    }
    (repeats, same)
}

fn main() {
    let list = submissions();

    // Naive: send every submission; retry a send that timed out.
    let naive = SimulatedProvider::new().forgetting_ids();
    for (call, i) in list.iter().enumerate() {
        let n = notification(*i);
        if call % 20 == 19 {
            naive.inject(ProviderFault::DeliverThenTimeout);
        }
        if naive.send(&n).is_err() {
            let _ = naive.send(&n);
        }
    }
    let naive_pings = naive.total_deliveries();

    // idem: the provider answers status but does not deduplicate.
    let provider = SimulatedProvider::new().forgetting_ids_but_keeping_status();
    let config = StoreConfig::builder().capacity(INTENTS * 2).build().expect("valid");
    // `--durable` (from `cargo xtask demo --durable`): the same storm on the SQLite store.
    let durable = std::env::args().any(|a| a == "--durable");
    let path = std::env::temp_dir().join(format!("idem-demo-notify-{}.sqlite", std::process::id()));
    let store: std::sync::Arc<dyn KeyStore<idem_notify::Outcome>> = if durable {
        std::sync::Arc::new(
            idem_store_sqlite::SqliteStore::open(&path, config).expect("store file"),
        )
    } else {
        std::sync::Arc::new(MemoryStore::new(config))
    };
    let notifier =
        Notifier::start(provider, store, Config::builder().workers(2).build().expect("valid"))
            .expect("workers start");
    let (repeats, same) = submit_all(&notifier, &list);
    let report = notifier.shutdown(Duration::from_secs(60));
    assert!(report.drained);
    let idem_pings = notifier.provider().total_deliveries();
    assert_eq!(idem_pings, INTENTS as u64, "exactly one ping per intended notification");
    Row {
        scenario: format!("notifications{}, redelivered", if durable { " (sqlite)" } else { "" }),
        intents: INTENTS as u64,
        attempts: list.len() as u64,
        without: naive_pings,
        with: idem_pings,
        effect: "pings delivered".into(),
        attempt: "submissions".into(),
        repeats,
        same,
    }
    .print();
    drop(notifier);
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}
