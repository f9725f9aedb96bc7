//! Crash tests that kill real processes. Each round starts `crash_worker` on fresh store
//! and gateway files; the worker aborts at a named crash point (after claim, after the
//! charge, after recording, before replying, right after an answer) or is SIGKILLed at a
//! random moment. Then this process "restarts": opens the same files, reconciles in half
//! the rounds (in the others a retry meets the abandoned claim first, as `Recover`, and
//! must ask the gateway before charging), and retries every intent. The gateway file does
//! not deduplicate, so a blind charge shows as a second line. Checks:
//! each intent charged exactly once (the gateway file is the truth: it outlives the
//! child), every acknowledged answer replayed identically, nothing left pending, and the
//! store file opens cleanly.
//!
//! `cargo test` runs `IDEM_CRASH_ROUNDS` rounds (default 20); `cargo xtask crash --rounds N`
//! runs more, in release mode.

mod common;
use common::{Rng, Tally, dir};

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use idem_core::{KeyStore, StoreConfig};
use idem_crash::FileGateway;
use idem_crash::payments::{INTENTS, Intent, LEASE, Later, POINTS, intent, parse_ack};
use idem_payments::{PaymentOutcome, Processor};
use idem_store_sqlite::SqliteStore;

// The tally's counters, in the order its summary shows them.
const ROUNDS: &str = "rounds";
const CRASHES: &str = "workers crashed";
const WITHOUT_RECONCILE: &str = "restarts without reconcile";
const DOUBLE_EFFECTS: &str = "double effects";
const LOST_ACKS: &str = "lost acknowledged results";
const UNRESOLVED: &str = "unresolved";

fn round(n: u64, rng: &mut Rng, tally: &mut Tally) {
    let store_path = dir("rounds").join(format!("store-{n}.sqlite"));
    let gateway_path = dir("rounds").join(format!("gateway-{n}.log"));
    let mut command = Command::new(env!("CARGO_BIN_EXE_crash_worker"));
    command.arg(&store_path).arg(&gateway_path).arg("0").arg(INTENTS.to_string());
    let plan = rng.next() % (POINTS.len() as u64 + 2);
    let kill_after = if plan < POINTS.len() as u64 {
        command.arg(POINTS[plan as usize]).arg((rng.next() % INTENTS).to_string());
        None
    } else if plan == POINTS.len() as u64 {
        Some(Duration::from_micros(rng.next() % 40_000))
    } else {
        None
    };
    let mut child =
        command.stdout(Stdio::piped()).stderr(Stdio::null()).spawn().expect("the worker starts");
    if let Some(delay) = kill_after {
        std::thread::sleep(delay);
        let _ = child.kill(); // SIGKILL; it may have finished already
    }
    let stdout = child.stdout.take().expect("piped stdout");
    let acks: HashMap<u64, u64> = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .filter_map(|l| parse_ack(&l))
        .map(|ack| (ack.intent, ack.charge))
        .collect();
    let status = child.wait().expect("the worker ends");
    tally.add(CRASHES, u64::from(!status.success()));

    // Restart: the same files, a clock past every lease.
    let config = StoreConfig::builder().lease(LEASE).build().expect("valid config");
    let store =
        SqliteStore::<PaymentOutcome>::open_with_clock(&store_path, config, Arc::new(Later))
            .expect("the store file opens cleanly after the crash");
    let processor =
        Processor::new("shop", FileGateway::open(&gateway_path).expect("gateway"), store)
            .expect("merchant");
    if rng.next().is_multiple_of(2) {
        let report = processor.reconcile(1000);
        tally.add(UNRESOLVED, report.unresolved.len() as u64);
    } else {
        tally.add(WITHOUT_RECONCILE, 1);
    }
    for i in 0..INTENTS {
        let Intent { key, request } = intent(i);
        let payment =
            processor.pay(&key, &request).expect("every intent settles after the restart");
        let PaymentOutcome::Charged(charge) = payment.outcome else { panic!("no declines here") };
        if let Some(acked) = acks.get(&i)
            && *acked != charge.id.0
        {
            tally.add(LOST_ACKS, 1);
        }
    }
    assert!(processor.store().pending(1000).expect("pending").is_empty(), "nothing left pending");
    let mut per_key: HashMap<String, u64> = HashMap::new();
    for record in FileGateway::charges(&gateway_path).expect("gateway file") {
        *per_key.entry(record.key).or_default() += 1;
    }
    assert_eq!(per_key.len() as u64, INTENTS, "every intent charged");
    tally.add(DOUBLE_EFFECTS, per_key.values().filter(|n| **n > 1).count() as u64);
    tally.add(ROUNDS, 1);
    let _ = std::fs::remove_file(&store_path);
    let _ = std::fs::remove_file(&gateway_path);
}

#[test]
fn crashed_workers_never_charge_twice_nor_lose_an_acknowledged_answer() {
    let rounds = common::rounds(20);
    let mut rng = Rng(0x5eed_1234_abcd_ef01);
    let names = [ROUNDS, CRASHES, WITHOUT_RECONCILE, DOUBLE_EFFECTS, LOST_ACKS, UNRESOLVED];
    let mut tally = Tally::new("crash rounds", &names);
    for n in 0..rounds {
        round(n, &mut rng, &mut tally);
        common::progress("payments crash", n + 1, rounds);
    }
    println!("{}", tally.summary());
    tally.assert_none(&[DOUBLE_EFFECTS, LOST_ACKS, UNRESOLVED]);
    tally.assert_some(&[CRASHES]);
    let _ = std::fs::remove_dir_all(dir("rounds"));
}

/// Two worker processes pay the same intents at the same time, on one store file and one
/// gateway file: SQLite's locking and the one-statement claim give one owner per key, so
/// each intent is charged once, and both workers' answers name the same charge.
#[test]
fn two_processes_racing_on_one_file_charge_once() {
    let store_path = dir("race").join("race.sqlite");
    let gateway_path = dir("race").join("race-gateway.log");
    let spawn = || {
        Command::new(env!("CARGO_BIN_EXE_crash_worker"))
            .arg(&store_path)
            .arg(&gateway_path)
            .arg("0")
            .arg(INTENTS.to_string())
            .stdout(Stdio::piped())
            .spawn()
            .expect("a worker starts")
    };
    let (a, b) = (spawn(), spawn());
    let mut answers: HashMap<u64, u64> = HashMap::new();
    for child in [a, b] {
        let output = child.wait_with_output().expect("the worker ends");
        assert!(output.status.success());
        for line in String::from_utf8_lossy(&output.stdout).lines() {
            let Some(ack) = parse_ack(line) else { continue };
            let (i, charge) = (ack.intent, ack.charge);
            if let Some(other) = answers.insert(i, charge) {
                assert_eq!(other, charge, "intent {i}: the two workers answered different charges");
            }
        }
    }
    let charges = FileGateway::charges(&gateway_path).expect("gateway file");
    assert_eq!(charges.len() as u64, INTENTS, "one charge per intent across two processes");
    let _ = std::fs::remove_dir_all(dir("race"));
}
