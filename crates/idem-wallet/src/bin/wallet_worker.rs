//! One worker process of the durable wallet's crash tests: opens the log, creates the
//! accounts, submits batches `0..count` (plain transfers, a linked chain in every third
//! batch, and a replay of the previous batch after every fifth), printing `ACK <batch>`
//! (flushed) after each answer. With a crash point it aborts inside the log writer.
//!
//! Usage: `wallet_worker <log file> <count> [mid_append|after_append|after_sync <record>]`

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use idem_core::SystemClock;
use idem_wallet::crash_plan::batch;
use idem_wallet::{AccountFlags, CrashPoint, DurableWallet, Limits, NewAccount};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, log, count, rest @ ..] = &args[..] else {
        eprintln!("usage: wallet_worker <log> <count> [<point> <record>]");
        std::process::exit(2);
    };
    let count: u128 = count.parse().expect("count");
    let record: u64 = rest.get(1).and_then(|r| r.parse().ok()).unwrap_or(0);
    let crash = match rest.first().map(String::as_str) {
        Some("mid_append") => CrashPoint::MidAppend(record),
        Some("after_append") => CrashPoint::AfterAppend(record),
        Some("after_sync") => CrashPoint::AfterSync(record),
        _ => CrashPoint::None,
    };
    let wallet =
        DurableWallet::open_with(Path::new(log), Limits::default(), Arc::new(SystemClock), crash)
            .expect("the log opens");
    let accounts: Vec<NewAccount> = (1..=11u128)
        .map(|id| NewAccount { id, ledger: 1, code: 1, flags: AccountFlags::default() })
        .collect();
    wallet.create_accounts(accounts).expect("accounts");
    let mut out = std::io::stdout().lock();
    for b in 0..count {
        wallet.create_transfers(batch(b)).expect("batch");
        if b % 5 == 4 {
            wallet.create_transfers(batch(b - 1)).expect("replay");
        }
        writeln!(out, "ACK {b}").expect("stdout");
        out.flush().expect("stdout");
    }
}
