//! Test support for the crash tests (not published, not a problem crate): the plans both
//! sides of a crash test share, the worker binaries they kill (`crash_worker` for payments,
//! `wallet_worker` for the durable wallet), and a gateway whose charges outlive a killed
//! process. The libraries keep only seams (idem-wallet's `LogDevice`, store and gateway
//! traits); everything that injects a crash lives here.
//!
//! `cargo xtask crash --rounds N` runs `tests/payments.rs` and `tests/wallet.rs` in release
//! mode; `cargo xtask ci` runs `tests/payments_pg.rs` against a PostgreSQL server.
//!
//! # Guarantee
//!
//! What a worker acknowledged before it was killed is what the tests check against, and
//! the gateway's file outlives the worker: every charge line was synced before the charge
//! call returned, so a double charge after a crash always shows as two lines for one key.
//!
//! # Examples
//!
//! ```
//! use idem_crash::FileGateway;
//!
//! let path = std::env::temp_dir().join(format!("idem-crash-doc-{}", std::process::id()));
//! # let _ = std::fs::remove_file(&path);
//! let _gateway = FileGateway::open(&path)?;
//! assert!(FileGateway::charges(&path)?.is_empty(), "no charge yet");
//! # let _ = std::fs::remove_file(&path);
//! # Ok::<(), std::io::Error>(())
//! ```

mod gateway;

pub use gateway::FileGateway;

/// The payment crash plan: intents, crash points, the restarted clock, the ACK line.
pub mod payments {
    use std::time::Duration;

    use idem_core::{Clock, IdempotencyKey, SystemClock, Timestamp};

    use idem_payments::PaymentRequest;

    /// Intents per round.
    pub const INTENTS: u64 = 12;

    /// The worker's named crash points.
    pub const POINTS: [&str; 5] =
        ["after_claim", "after_charge", "after_record", "before_reply", "after_ack"];

    /// The system clock moved ahead by more than the worker's lease: the restarted process
    /// sees every lease of a dead worker as run out, without waiting for it.
    #[derive(Debug)]
    pub struct Later;

    impl Clock for Later {
        fn now(&self) -> Timestamp {
            SystemClock.now().saturating_add(Duration::from_secs(3600))
        }
    }

    /// The line a worker prints when it answers intent `i` with charge `charge`.
    pub fn ack_line(i: u64, charge: u64) -> String {
        format!("ACK {i} {charge}")
    }

    /// Reads back an [`ack_line`]: `(intent, charge)`, or `None` for any other line.
    ///
    /// ```
    /// use idem_crash::payments::{ack_line, parse_ack};
    ///
    /// assert_eq!(parse_ack(&ack_line(7, 42)), Some((7, 42)));
    /// assert_eq!(parse_ack("ACK 7"), None);
    /// assert_eq!(parse_ack("ACK 7 42 extra"), None);
    /// ```
    pub fn parse_ack(line: &str) -> Option<(u64, u64)> {
        let mut parts = line.split(' ');
        match (parts.next(), parts.next(), parts.next(), parts.next()) {
            (Some("ACK"), Some(i), Some(charge), None) => {
                Some((i.parse().ok()?, charge.parse().ok()?))
            }
            _ => None,
        }
    }

    /// Intent `i`: its key and its request.
    ///
    /// # Panics
    ///
    /// Never for the constants used (valid key, customer, amount and currency).
    pub fn intent(i: u64) -> (IdempotencyKey, PaymentRequest) {
        let key = IdempotencyKey::new(&format!("intent-{i}")).expect("valid key");
        let amount = 100 + i64::try_from(i % 1_000_000).unwrap_or(0);
        let request =
            PaymentRequest::new(&format!("cus_{}", i % 7), amount, "EUR").expect("valid request");
        (key, request)
    }
}

/// The wallet crash plan: the accounts and the batches both sides build.
pub mod wallet {
    use idem_wallet::{Transfer, TransferFlags};

    /// The accounts the worker creates: 1 (the bank) to 11.
    pub const ACCOUNTS: u128 = 11;

    /// The transfers of batch `b`: ten bank-to-wallet transfers, the first two linked in
    /// every third batch.
    pub fn batch(b: u128) -> Vec<Transfer> {
        let mut transfers: Vec<Transfer> = (1..=10u128)
            .map(|i| {
                let id = b * 10 + i;
                Transfer {
                    id,
                    debit_account_id: 1,
                    credit_account_id: id % 10 + 2,
                    amount: id % 97 + 1,
                    ledger: 1,
                    code: 1,
                    ..Default::default()
                }
            })
            .collect();
        if b.is_multiple_of(3) {
            transfers[0].flags = TransferFlags::LINKED;
            transfers[1].flags = TransferFlags::LINKED;
        }
        transfers
    }
}
