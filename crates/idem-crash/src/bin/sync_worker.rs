//! A worker of the failed-sync test: it holds an SQLite store open and carries out one
//! command per line of its standard input, answering one line each (flushed), so the test
//! can make the disk fail between two commands. The test starts it with the
//! `fail_sync.c` fixture preloaded; `fail on` creates the flag file that makes the
//! fixture fail every sync of the store's write-ahead log, `fail off` removes it.
//!
//! Usage: `sync_worker <store file> <flag file>`. Commands, each with its answer:
//!
//! - `claim K`: `acquired`, `in-flight`, `replay R` or `recover`, or `error ...`;
//! - `complete K`: completes the lease the last claim of `K` got with the result `r-K`:
//!   `ok` or `error ...`;
//! - `lookup K`: `absent`, `in-flight`, `pending` or `finished R`, or `error ...`;
//! - `fail on`, `fail off`: `ok`; `quit`: the worker exits.

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use idem_core::{Claim, Fingerprint, KeyState, KeyStore, Lease, ScopedKey, StoreConfig};
use idem_store_sqlite::SqliteStore;

/// The store and the leases the worker's claims got, by key.
struct Worker {
    store: SqliteStore<String>,
    flag: PathBuf,
    leases: HashMap<String, Lease>,
}

fn fingerprint() -> Fingerprint {
    Fingerprint::builder("sync-worker").finish()
}

fn scoped(key: &str) -> Result<ScopedKey, String> {
    ScopedKey::parse("sync", key).map_err(|e| format!("error {e}"))
}

impl Worker {
    fn claim(&mut self, key: &str) -> Result<String, String> {
        let claim = self.store.claim(&scoped(key)?, &fingerprint());
        match claim.map_err(|e| format!("error {e}"))? {
            Claim::Acquired(lease) => {
                self.leases.insert(key.to_owned(), lease);
                Ok("acquired".to_owned())
            }
            Claim::Recover(lease) => {
                self.leases.insert(key.to_owned(), lease);
                Ok("recover".to_owned())
            }
            Claim::InFlight { .. } => Ok("in-flight".to_owned()),
            Claim::Replay(result) => Ok(format!("replay {result}")),
        }
    }

    fn complete(&mut self, key: &str) -> Result<String, String> {
        let lease = self.leases.get(key).ok_or_else(|| format!("error no lease for {key}"))?;
        self.store.complete(lease, format!("r-{key}")).map_err(|e| format!("error {e}"))?;
        Ok("ok".to_owned())
    }

    fn lookup(&self, key: &str) -> Result<String, String> {
        let state = self.store.lookup(&scoped(key)?, &fingerprint());
        Ok(match state.map_err(|e| format!("error {e}"))? {
            KeyState::Absent => "absent".to_owned(),
            KeyState::InFlight { .. } => "in-flight".to_owned(),
            KeyState::Pending { .. } => "pending".to_owned(),
            KeyState::Finished(result) => format!("finished {result}"),
        })
    }

    fn fail(&self, on: bool) -> Result<String, String> {
        let done =
            if on { std::fs::write(&self.flag, b"on") } else { std::fs::remove_file(&self.flag) };
        done.map(|()| "ok".to_owned()).map_err(|e| format!("error flag file: {e}"))
    }

    /// The answer to one command line.
    fn run(&mut self, line: &str) -> String {
        let answer = match line.split_once(' ') {
            Some(("claim", key)) => self.claim(key),
            Some(("complete", key)) => self.complete(key),
            Some(("lookup", key)) => self.lookup(key),
            Some(("fail", "on")) => self.fail(true),
            Some(("fail", "off")) => self.fail(false),
            _ => Err(format!("error unknown command {line:?}")),
        };
        answer.unwrap_or_else(|e| e)
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [store, flag] = args.as_slice() else {
        eprintln!("usage: sync_worker <store file> <flag file>");
        std::process::exit(2);
    };
    let store = match SqliteStore::open(Path::new(store), StoreConfig::default()) {
        Ok(store) => store,
        Err(e) => {
            eprintln!("sync_worker: cannot open the store: {e}");
            std::process::exit(1);
        }
    };
    let mut worker = Worker { store, flag: PathBuf::from(flag), leases: HashMap::new() };
    let mut out = std::io::stdout().lock();
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        if line == "quit" {
            break;
        }
        let answer = worker.run(line.trim());
        if writeln!(out, "{answer}").and_then(|()| out.flush()).is_err() {
            break;
        }
    }
}
