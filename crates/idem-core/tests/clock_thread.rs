//! The cached clock's thread (`idem-clock`), which `MemoryStore::new` starts: one per
//! process however many stores share it, gone after the last store is dropped, and never
//! started by `with_clock` or `with_clocks` (simulations and tests need a store that
//! starts no thread). Its own test binary: it counts the process's threads, which the
//! other tests' stores would change under it.

#![cfg(target_os = "linux")]

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use idem_core::{ManualClock, MemoryStore, StoreConfig, SystemClock, Timestamp};
use idem_testkit::wait_until;

const PATIENCE: Duration = Duration::from_secs(10);

/// The tests count the process's clock threads, so they take turns.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Threads of this process named `idem-clock` (Linux names threads in /proc).
fn clock_threads() -> usize {
    let tasks = std::fs::read_dir("/proc/self/task").expect("/proc/self/task");
    let comm = |t: std::fs::DirEntry| std::fs::read_to_string(t.path().join("comm"));
    tasks
        .filter_map(Result::ok)
        .filter_map(|t| comm(t).ok())
        .filter(|c| c.trim() == "idem-clock")
        .count()
}

#[test]
fn stores_alive_together_share_one_clock_thread_that_ends_after_the_last() {
    let _turn = one_at_a_time();
    let stores: Vec<_> = (0..20).map(|_| MemoryStore::<u32>::new(StoreConfig::default())).collect();
    // A thread of a store dropped by an earlier test may still be on its last tick.
    wait_until("one clock thread for 20 stores", PATIENCE, || clock_threads() == 1);
    drop(stores);
    wait_until("the clock thread to end", PATIENCE, || clock_threads() == 0);
    for round in 0..3 {
        let store = MemoryStore::<u32>::new(StoreConfig::default());
        wait_until(&format!("round {round}: a thread again"), PATIENCE, || clock_threads() == 1);
        drop(store);
        wait_until(&format!("round {round}: gone again"), PATIENCE, || clock_threads() == 0);
    }
}

/// Threads of this process started from the calling thread and not yet renamed: a thread
/// takes its parent's name until its first instructions rename it, so a clock thread
/// spawned a moment ago is counted here before `clock_threads` can see it.
fn threads_named_like_this_one() -> usize {
    let own = std::fs::read_to_string("/proc/thread-self/comm").expect("/proc/thread-self/comm");
    let tasks = std::fs::read_dir("/proc/self/task").expect("/proc/self/task");
    let comm = |t: std::fs::DirEntry| std::fs::read_to_string(t.path().join("comm"));
    let same = tasks.filter_map(Result::ok).filter_map(|t| comm(t).ok()).filter(|c| *c == own);
    same.count() - 1
}

#[test]
fn a_store_on_a_given_clock_starts_no_thread() {
    let _turn = one_at_a_time();
    wait_until("no clock thread left", PATIENCE, || clock_threads() == 0);
    let manual = Arc::new(ManualClock::new(Timestamp::from_millis(1)));
    let one = MemoryStore::<u32>::with_clock(StoreConfig::default(), manual.clone());
    let two =
        MemoryStore::<u32>::with_clocks(StoreConfig::default(), Arc::new(SystemClock), manual);
    // Either name a new clock thread may carry at this instant is counted.
    let started = clock_threads() + threads_named_like_this_one();
    assert_eq!(started, 0, "with_clock and with_clocks start none");
    drop((one, two));
}
