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
pub mod gateway_http;

pub use gateway::{ChargeRecord, FileGateway};
pub use gateway_http::{DECLINED_MINOR, Faults, GATEWAY_CONNECTIONS_MAX, GatewayServer};

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

    /// The lease every worker claims with, and every restart too.
    pub const LEASE: Duration = Duration::from_secs(60);

    /// How far [`Later`] runs ahead of the system clock: past [`LEASE`].
    pub const LATER_BY: Duration = Duration::from_secs(3600);
    const _: () = assert!(LATER_BY.as_secs() > LEASE.as_secs(), "Later must pass every lease");

    /// The system clock moved ahead by more than the worker's lease: the restarted process
    /// sees every lease of a dead worker as run out, without waiting for it.
    #[derive(Debug)]
    pub struct Later;

    impl Clock for Later {
        fn now(&self) -> Timestamp {
            SystemClock.now().saturating_add(LATER_BY)
        }
    }

    /// What a worker told its client: intent `intent` was answered with the gateway's
    /// charge `charge` (0 for a decline).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct Ack {
        /// The intent's number (see [`intent`]).
        pub intent: u64,
        /// The charge id it was answered with.
        pub charge: u64,
    }

    /// The line a worker prints for `ack`.
    pub fn ack_line(ack: Ack) -> String {
        format!("ACK {} {}", ack.intent, ack.charge)
    }

    /// Reads back an [`ack_line`], or `None` for any other line.
    ///
    /// ```
    /// use idem_crash::payments::{Ack, ack_line, parse_ack};
    ///
    /// let ack = Ack { intent: 7, charge: 42 };
    /// assert_eq!(parse_ack(&ack_line(ack)), Some(ack));
    /// assert_eq!(parse_ack("ACK 7"), None);
    /// assert_eq!(parse_ack("ACK 7 42 extra"), None);
    /// ```
    pub fn parse_ack(line: &str) -> Option<Ack> {
        let mut parts = line.split(' ');
        match (parts.next(), parts.next(), parts.next(), parts.next()) {
            (Some("ACK"), Some(intent), Some(charge), None) => {
                Some(Ack { intent: intent.parse().ok()?, charge: charge.parse().ok()? })
            }
            _ => None,
        }
    }

    /// One intended payment: its key, made once, and the request every attempt sends.
    #[derive(Debug, Clone)]
    pub struct Intent {
        /// The idempotency key of every attempt.
        pub key: IdempotencyKey,
        /// What it pays.
        pub request: PaymentRequest,
    }

    /// Intent `i`: its key and its request.
    ///
    /// # Panics
    ///
    /// Never for the constants used (valid key, customer, amount and currency).
    pub fn intent(i: u64) -> Intent {
        let key = IdempotencyKey::new(&format!("intent-{i}")).expect("valid key");
        let amount = 100 + i64::try_from(i % 1_000_000).unwrap_or(0);
        let request =
            PaymentRequest::new(&format!("cus_{}", i % 7), amount, "EUR").expect("valid request");
        Intent { key, request }
    }
}

/// The order crash plan (the completion inside the caller's transaction, on
/// PostgreSQL): each intent's key and fingerprint, the worker's crash points, and the
/// orders table both sides use. An acknowledgement is a [`payments::Ack`] whose `charge`
/// is the order's id.
pub mod orders {
    use idem_core::{Fingerprint, ScopedKey};

    /// Intents per round.
    pub const INTENTS: u64 = 12;

    /// The order worker's named crash points, in the order it passes them.
    pub const POINTS: [&str; 5] =
        ["after_claim", "after_insert", "after_complete", "after_commit", "after_ack"];

    /// The orders table in namespace `schema`: one row per order placed, and nothing that
    /// refuses a second row for a key, so an order placed twice shows as two rows.
    pub fn orders_table(schema: &str) -> String {
        format!(
            "CREATE SCHEMA IF NOT EXISTS \"{schema}\";
             CREATE TABLE \"{schema}\".orders
                 (id BIGSERIAL PRIMARY KEY, key TEXT NOT NULL, amount BIGINT NOT NULL)"
        )
    }

    /// Intent `i`'s key.
    ///
    /// # Panics
    ///
    /// Never: the key is valid for every `i`.
    pub fn key(i: u64) -> ScopedKey {
        ScopedKey::parse("shop", &format!("order-{i}")).expect("a valid key")
    }

    /// Intent `i`'s request fingerprint.
    pub fn request(i: u64) -> Fingerprint {
        Fingerprint::builder("order").u64("intent", i).finish()
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
