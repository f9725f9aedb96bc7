//! The order crash test: the completion inside the caller's transaction, on PostgreSQL.
//! Two worker processes place the same orders on one server: each inserts an order row
//! and stores its claim's answer (the order's id) in one transaction. One is killed
//! (SIGKILL at a random moment, or an abort at a named point: after the claim, after the
//! insert, after the completion, after the commit, after the answer), the other runs to
//! the end, then a restarted worker past every lease places every order again. Checks:
//! exactly one order row per intent (0 placed twice, 0 missing), every stored answer names
//! the order that exists, and every answer given before the crash is the one replayed.
//! Needs `IDEM_PG_URL` (`.ci/postgres.sh`); `IDEM_CRASH_ROUNDS` rounds (default 10).

mod common;
use common::acks;

use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use idem_core::{KeyStore, StoreConfig};
use idem_crash::orders::{INTENTS, POINTS, key, orders_table};
use idem_store_postgres::PgStore;

fn worker(url: &str, schema: &str, crash: Option<(&str, u64)>, later: bool) -> Child {
    let mut command = Command::new(env!("CARGO_BIN_EXE_order_worker"));
    command.arg(url).arg("0").arg(INTENTS.to_string()).env("IDEM_PG_SCHEMA", schema);
    if later {
        command.env("IDEM_LATER", "1");
    }
    if let Some((point, intent)) = crash {
        command.arg(point).arg(intent.to_string());
    }
    command.stdout(Stdio::piped()).stderr(Stdio::null()).spawn().expect("a worker starts")
}

/// What the workers answered before the restart: (intent, order id).
type Answers = Vec<(u64, u64)>;

/// What one round left: orders per key (their ids), and the answers the restart gave.
struct Round {
    orders: HashMap<String, Vec<u64>>,
    settled: HashMap<u64, u64>,
}

fn round(url: &str, admin: &mut postgres::Client, n: u64, rng: u64) -> (Round, Answers, bool) {
    let schema = format!("idem_orders_{}_{n}", std::process::id());
    admin.batch_execute(&orders_table(&schema)).expect("the orders table");
    // Every other round aborts at a named point, each point in turn (ten rounds pass
    // every point once); the others are killed at a random moment.
    let named = n.is_multiple_of(2);
    let crash = named.then(|| (POINTS[(n / 2 % 5) as usize], (rng >> 8) % INTENTS));
    let mut a = worker(url, &schema, crash, false);
    let mut b = worker(url, &schema, None, false);
    if !named {
        std::thread::sleep(Duration::from_micros((rng >> 16) % 20_000));
        let _ = a.kill();
    }
    let mut answers: Vec<(u64, u64)> = acks(&mut a).into_iter().collect();
    answers.extend(acks(&mut b));
    let crashed = !a.wait().expect("a ends").success();
    assert!(b.wait().expect("b ends").success(), "the surviving worker finishes");
    let mut restart = worker(url, &schema, None, true);
    let settled = acks(&mut restart);
    assert!(restart.wait().expect("the restart ends").success());
    let mut orders: HashMap<String, Vec<u64>> = HashMap::new();
    let rows = admin.query(&format!("SELECT key, id FROM \"{schema}\".orders"), &[]);
    for row in rows.expect("the orders") {
        let id: i64 = row.get(1);
        orders.entry(row.get(0)).or_default().push(u64::try_from(id).expect("positive"));
    }
    let store = PgStore::<u64>::connect(url, &schema, StoreConfig::default()).expect("connect");
    assert!(store.pending(1000).expect("pending").is_empty(), "nothing left pending");
    store.drop_schema().expect("the round's namespace is dropped");
    (Round { orders, settled }, answers, crashed)
}

#[test]
fn an_order_and_its_stored_answer_commit_together_through_crashes() {
    let url = std::env::var("IDEM_PG_URL")
        .expect("IDEM_PG_URL must name a PostgreSQL server (see .ci/postgres.sh)");
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).expect("an admin connection");
    let rounds = common::rounds(10);
    let mut rng = common::Rng(0x2545_f491_4f6c_dd1d);
    let (mut crashes, mut twice, mut missing, mut lost, mut wrong) = (0, 0, 0, 0, 0);
    for n in 0..rounds {
        let (round, answers, crashed) = round(&url, &mut admin, n, rng.next());
        crashes += u64::from(crashed);
        assert_eq!(round.settled.len() as u64, INTENTS, "the restart answers every intent");
        for i in 0..INTENTS {
            let placed = round.orders.get(key(i).key().as_str()).map_or(&[][..], Vec::as_slice);
            twice += u64::from(placed.len() > 1);
            missing += u64::from(placed.is_empty());
            wrong += u64::from(placed.first() != Some(&round.settled[&i]));
        }
        lost += answers.iter().filter(|(i, order)| round.settled[i] != *order).count();
        common::progress("orders_pg crash", n + 1, rounds);
    }
    println!(
        "order crash rounds: {rounds} rounds, {crashes} workers crashed, {twice} orders placed \
         twice, {missing} missing, {wrong} answers naming another order, {lost} acknowledged \
         answers lost"
    );
    assert_eq!((twice, missing, wrong, lost), (0, 0, 0, 0));
    assert!(crashes > 0);
}
