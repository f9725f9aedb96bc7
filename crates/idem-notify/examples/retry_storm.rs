//! A notification storm: 10,000 intended notifications; producers retry 30% of submits
//! (a timed-out submit), the queue redelivers 10%, and 5% of provider calls time out after
//! delivering. The provider does not deduplicate.
//!
//! Naive: every submission is sent, and a timed-out send is retried. idem: submit with the
//! message id. Prints one line for `cargo xtask demo` (pings per intended notification:
//! naive > 1, idem exactly 1).

use std::time::Duration;

use idem_core::{KeyStore, MemoryStore, StoreConfig};
use idem_notify::{
    Channel, Config, Notification, Notifier, Provider, ProviderFault, SimulatedProvider,
    SubmitError,
};

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
    for (k, i) in list.iter().enumerate() {
        if k % 20 == 19 {
            notifier.provider().inject(ProviderFault::DeliverThenTimeout);
        }
        while let Err(SubmitError::QueueFull { .. }) = notifier.submit(notification(*i)) {
            std::thread::yield_now();
        }
    }
    let report = notifier.shutdown(Duration::from_secs(60));
    assert!(report.drained);
    let idem_pings = notifier.provider().total_deliveries();
    assert_eq!(idem_pings, INTENTS as u64, "exactly one ping per intended notification");
    let (scenario, effect, attempt) = (
        format!("notifications{}, redelivered", if durable { " (sqlite)" } else { "" }),
        "pings delivered",
        "submissions",
    );
    let (intents, attempts, without, with) = (INTENTS, list.len(), naive_pings, idem_pings);
    println!(
        "{scenario}: {without} {effect} without idem, {with} with idem, for {intents} intended \
         operations ({attempts} {attempt})"
    );
    println!(
        "retry_storm\t{scenario}\t{intents}\t{attempts}\t{without}\t{with}\t{effect}\t{attempt}"
    );
    drop(notifier);
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}
