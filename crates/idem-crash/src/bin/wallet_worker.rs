//! One worker process of the durable wallet's crash tests: opens the log through a device
//! that can simulate a crash, creates the accounts, submits batches `0..count` (plain
//! transfers, a linked chain in every third batch, and a replay of the previous batch
//! after every fifth), printing `ACK <batch>` (flushed) after each answer.
//!
//! Usage: `wallet_worker <log file> <count> [<fault> <n>]`, where `<fault>` is one of:
//!
//! * `kill_mid_append`, `kill_after_append`, `kill_after_sync`: the process dies during
//!   the nth append (half of it written), before the nth sync, or after the nth sync
//!   before the answer. The page cache survives: what was written stays.
//! * `power_mid_append`, `power_after_append`: power is lost at the same points: only
//!   synced bytes survive, plus a torn prefix of the unsynced ones or a zero-filled
//!   extension (chosen by `n`).
//! * `power_after_ack`: power is lost right after batch `n` is acknowledged, so the last
//!   acknowledged batch is checked every round, not by timing.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use idem_core::SystemClock;
use idem_crash::wallet::batch;
use idem_wallet::{DurableWallet, Limits, LogDevice, NewAccount};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    None,
    KillMidAppend(u64),
    KillAfterAppend(u64),
    KillAfterSync(u64),
    PowerMidAppend(u64),
    PowerAfterAppend(u64),
    PowerAfterAck(u128),
}

/// What the device knows: how far the log is synced, and what was appended since.
#[derive(Debug)]
struct Disk {
    path: PathBuf,
    synced_len: u64,
    unsynced: Vec<u8>,
    appends: u64,
    syncs: u64,
    fault: Fault,
}

impl Disk {
    /// Power is lost: the file keeps only what was synced, and then (as a disk may) a
    /// prefix of the unsynced bytes or a run of zeros; the process dies.
    fn power_loss(&self, n: u64) -> ! {
        let file = OpenOptions::new().write(true).open(&self.path).expect("log");
        file.set_len(self.synced_len).expect("cut to the synced length");
        let mut file = OpenOptions::new().append(true).open(&self.path).expect("log");
        let torn = match n % 3 {
            0 => Vec::new(),
            1 => self.unsynced[..self.unsynced.len() * 2 / 3].to_vec(),
            _ => vec![0; (n as usize % 50) + 1],
        };
        file.write_all(&torn).expect("torn tail");
        file.sync_all().expect("sync");
        std::process::abort();
    }
}

/// A file whose unsynced bytes a simulated power loss throws away.
struct PowerLossFile {
    file: File,
    disk: Arc<Mutex<Disk>>,
}

impl LogDevice for PowerLossFile {
    fn read_all(&mut self) -> std::io::Result<Vec<u8>> {
        self.file.read_all()
    }

    fn append(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        let mut disk = self.disk.lock().expect("disk");
        disk.appends += 1;
        match disk.fault {
            Fault::KillMidAppend(n) if n == disk.appends => {
                self.file.write_all(&bytes[..bytes.len() / 2])?;
                std::process::abort();
            }
            Fault::PowerMidAppend(n) if n == disk.appends => {
                disk.unsynced.extend_from_slice(&bytes[..bytes.len() / 2]);
                disk.power_loss(n);
            }
            _ => {}
        }
        disk.unsynced.extend_from_slice(bytes);
        self.file.write_all(bytes)
    }

    fn sync(&mut self) -> std::io::Result<()> {
        let mut disk = self.disk.lock().expect("disk");
        disk.syncs += 1;
        match disk.fault {
            Fault::KillAfterAppend(n) if n == disk.syncs => std::process::abort(),
            Fault::PowerAfterAppend(n) if n == disk.syncs => disk.power_loss(n),
            _ => {}
        }
        self.file.sync()?;
        disk.synced_len += disk.unsynced.len() as u64;
        disk.unsynced.clear();
        if disk.fault == Fault::KillAfterSync(disk.syncs) {
            std::process::abort();
        }
        Ok(())
    }

    fn truncate(&mut self, len: u64) -> std::io::Result<()> {
        self.file.truncate(len)?;
        let mut disk = self.disk.lock().expect("disk");
        (disk.synced_len, disk.unsynced) = (len, Vec::new());
        Ok(())
    }
}

fn fault(args: &[String]) -> Fault {
    let n: u64 = args.get(1).and_then(|n| n.parse().ok()).unwrap_or(0);
    match args.first().map(String::as_str) {
        Some("kill_mid_append") => Fault::KillMidAppend(n),
        Some("kill_after_append") => Fault::KillAfterAppend(n),
        Some("kill_after_sync") => Fault::KillAfterSync(n),
        Some("power_mid_append") => Fault::PowerMidAppend(n),
        Some("power_after_append") => Fault::PowerAfterAppend(n),
        Some("power_after_ack") => Fault::PowerAfterAck(u128::from(n)),
        _ => Fault::None,
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, log, count, rest @ ..] = &args[..] else {
        eprintln!("usage: wallet_worker <log> <count> [<fault> <n>]");
        std::process::exit(2);
    };
    let count: u128 = count.parse().expect("count");
    let path = Path::new(log);
    let file = OpenOptions::new().read(true).append(true).create(true).open(path).expect("log");
    let synced_len = file.metadata().expect("log").len();
    let fault = fault(rest);
    let disk =
        Disk { path: path.into(), synced_len, unsynced: Vec::new(), appends: 0, syncs: 0, fault };
    let disk = Arc::new(Mutex::new(disk));
    let device = PowerLossFile { file, disk: disk.clone() };
    let wallet = DurableWallet::open_on(path, device, Limits::default(), Arc::new(SystemClock))
        .expect("the log opens");
    let accounts: Vec<NewAccount> = (1..=11u128)
        .map(|id| NewAccount { id, ledger: 1, code: 1, ..Default::default() })
        .collect();
    wallet.create_accounts(&accounts).expect("accounts").all_applied().expect("applied");
    let mut out = std::io::stdout().lock();
    for b in 0..count {
        wallet.create_transfers(&batch(b)).expect("batch").all_applied().expect("applied");
        if b % 5 == 4 {
            wallet.create_transfers(&batch(b - 1)).expect("replay").all_applied().expect("applied");
        }
        writeln!(out, "ACK {b}").expect("stdout");
        out.flush().expect("stdout");
        if fault == Fault::PowerAfterAck(b) {
            disk.lock().expect("disk").power_loss(0);
        }
    }
}
