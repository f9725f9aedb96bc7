//! What a remembered transfer id costs: applies 1,000,000 transfers and prints how much
//! the process's resident memory grew per transfer (Linux `/proc/self/statm`). With
//! `--tagged`, each transfer also carries a `user_data_128` of its own (an order id, say)
//! and one of 16 `user_data_32` values, which the query index keeps too.
//! `cargo run --release -p idem-wallet --example memory_per_transfer [-- --tagged]`

use idem_wallet::{NewAccount, Transfer, Wallet};

/// Resident memory of this process, in bytes (Linux: `/proc/self/statm`, in pages).
fn resident_bytes() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: usize = statm.split_whitespace().nth(1).and_then(|p| p.parse().ok()).unwrap_or(0);
    pages * 4096
}

const TRANSFERS: u128 = 1_000_000;

fn main() {
    let tagged = std::env::args().any(|a| a == "--tagged");
    let wallet = Wallet::new();
    let accounts: Vec<NewAccount> = (1..=1024u128)
        .map(|id| NewAccount { id, ledger: 1, code: 1, ..Default::default() })
        .collect();
    wallet.create_accounts(&accounts).expect("batch").all_applied().expect("applied");
    let before = resident_bytes();
    let mut id = 1;
    while id <= TRANSFERS {
        let end = (id + 8189).min(TRANSFERS + 1);
        let batch: Vec<Transfer> = (id..end)
            .map(|i| Transfer {
                id: i,
                debit_account_id: i % 1024 + 1,
                credit_account_id: (i + 1) % 1024 + 1,
                amount: 1,
                ledger: 1,
                code: 1,
                user_data_128: if tagged { i } else { 0 },
                user_data_32: if tagged { (i % 16) as u32 + 1 } else { 0 },
                ..Default::default()
            })
            .collect();
        wallet.create_transfers(&batch).expect("batch").all_applied().expect("applied");
        id = end;
    }
    let held = resident_bytes().saturating_sub(before);
    println!(
        "{TRANSFERS} transfers{}: {held} resident bytes, {:.1} bytes per remembered transfer",
        if tagged { " with user data" } else { "" },
        held as f64 / TRANSFERS as f64
    );
}
