//! The payment crash test on PostgreSQL with two worker processes on one server: one is
//! killed (SIGKILL at a random moment, or an abort at a named point), the other runs to the
//! end. Then a restarted process reconciles and retries every intent. Checks: one charge
//! per intent, every acknowledged answer replayed identically, nothing left pending.
//! Needs `IDEM_PG_URL` (`.ci/postgres.sh`); `IDEM_CRASH_ROUNDS` rounds (default 10).

mod common;
use common::{acks, dir};

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use idem_core::{KeyStore, StoreConfig};
use idem_crash::FileGateway;
use idem_crash::payments::{INTENTS, Intent, LEASE, Later, POINTS, intent};
use idem_payments::{PaymentOutcome, Processor};
use idem_store_postgres::PgStore;

fn worker(url: &str, schema: &str, gateway: &PathBuf, crash: Option<(&str, u64)>) -> Child {
    let mut command = Command::new(env!("CARGO_BIN_EXE_crash_worker"));
    command.arg(url).arg(gateway).arg("0").arg(INTENTS.to_string()).env("IDEM_PG_SCHEMA", schema);
    if let Some((point, intent)) = crash {
        command.arg(point).arg(intent.to_string());
    }
    command.stdout(Stdio::piped()).stderr(Stdio::null()).spawn().expect("a worker starts")
}

#[test]
fn two_workers_on_one_server_one_killed_charge_once() {
    let url = std::env::var("IDEM_PG_URL")
        .expect("IDEM_PG_URL must name a PostgreSQL server (see .ci/postgres.sh)");
    let rounds = common::rounds(10);
    let mut rng: u64 = 0x9e37_79b9_7f4a_7c15;
    let (mut crashes, mut double, mut lost) = (0, 0, 0);
    for n in 0..rounds {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let schema = format!("idem_crash_{}_{n}", std::process::id());
        let gateway = dir("rounds").join(format!("gateway-{n}.log"));
        let named = rng.is_multiple_of(2);
        let crash = named.then(|| (POINTS[(rng % 4) as usize], (rng >> 8) % INTENTS));
        let mut a = worker(&url, &schema, &gateway, crash);
        let mut b = worker(&url, &schema, &gateway, None);
        if !named {
            std::thread::sleep(Duration::from_micros((rng >> 16) % 30_000));
            let _ = a.kill();
        }
        let mut answers: Vec<(u64, u64)> = acks(&mut a).into_iter().collect();
        answers.extend(acks(&mut b));
        crashes += u64::from(!a.wait().expect("a ends").success());
        assert!(b.wait().expect("b ends").success(), "the surviving worker finishes");

        let config = StoreConfig::builder().lease(LEASE).build().expect("valid");
        let store =
            PgStore::<PaymentOutcome>::connect_with_clock(&url, &schema, config, Arc::new(Later))
                .expect("connect");
        let processor =
            Processor::new("shop", FileGateway::open(&gateway).expect("gateway"), store)
                .expect("merchant");
        let report = processor.reconcile(1000);
        let clean = report.unresolved.is_empty() && report.failed.is_empty();
        assert!(clean && report.listing_failed.is_none(), "{report:?}");
        let mut final_charge = HashMap::new();
        for i in 0..INTENTS {
            let Intent { key, request } = intent(i);
            let PaymentOutcome::Charged(charge) =
                processor.pay(&key, &request).expect("settles").outcome
            else {
                panic!("no declines here")
            };
            final_charge.insert(i, charge.id.0);
        }
        lost += answers.iter().filter(|(i, c)| final_charge[i] != *c).count();
        assert!(processor.store().pending(1000).expect("pending").is_empty());
        let mut per_key: HashMap<String, u64> = HashMap::new();
        for record in FileGateway::charges(&gateway).expect("gateway") {
            *per_key.entry(record.key).or_default() += 1;
        }
        assert_eq!(per_key.len() as u64, INTENTS);
        double += per_key.values().filter(|c| **c > 1).count();
        processor.store().drop_schema().expect("the round's namespace is dropped");
        common::progress("payments_pg crash", n + 1, rounds);
    }
    println!(
        "pg crash rounds: {rounds} rounds, {crashes} workers crashed, {double} double charges, \
            {lost} lost acknowledged answers"
    );
    assert_eq!((double, lost), (0, 0));
    assert!(crashes > 0);
    let _ = std::fs::remove_dir_all(dir("rounds"));
}

/// Two worker processes pay the same intents at once on one server, neither killed: one
/// owner per key, one charge per intent, and both answer every intent with the same charge.
#[test]
fn two_processes_racing_on_one_server_charge_once() {
    let url = std::env::var("IDEM_PG_URL")
        .expect("IDEM_PG_URL must name a PostgreSQL server (see .ci/postgres.sh)");
    let schema = format!("idem_race_{}", std::process::id());
    let gateway = dir("race").join("race-gateway.log");
    let (mut a, mut b) =
        (worker(&url, &schema, &gateway, None), worker(&url, &schema, &gateway, None));
    let mut answers: HashMap<u64, u64> = HashMap::new();
    for child in [&mut a, &mut b] {
        for (i, charge) in acks(child) {
            if let Some(other) = answers.insert(i, charge) {
                assert_eq!(other, charge, "intent {i}: two answers");
            }
        }
        assert!(child.wait().expect("ends").success());
    }
    assert_eq!(FileGateway::charges(&gateway).expect("gateway").len() as u64, INTENTS);
    let store = PgStore::<PaymentOutcome>::connect(&url, &schema, StoreConfig::default());
    store.expect("connect").drop_schema().expect("the namespace is dropped");
    let _ = std::fs::remove_dir_all(dir("race"));
}
