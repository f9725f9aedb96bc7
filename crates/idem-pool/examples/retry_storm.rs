//! Cleanup paths that release twice: four threads borrow connections from a pool of four,
//! and in 30% of the loans a second cleanup path (an error handler, a retried cleanup)
//! releases the same connection again.
//!
//! Naive: a free list that pushes whatever is released; the second release puts the
//! connection on the list twice, and two borrowers later share it. idem: the second
//! release is a counted no-op. Prints one line for `cargo xtask demo`: loans, releases
//! attempted, and loans that found their connection already held (naive vs idem).

use std::convert::Infallible;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;

const THREADS: u64 = 4;
const LOANS_PER_THREAD: u64 = 5_000;
const CONNECTIONS: usize = 4;
const DOUBLE_PERCENT: u64 = 30;

/// A connection that notices when a second holder takes it.
#[derive(Debug, Default)]
struct Conn {
    held: AtomicBool,
}

/// Counts a shared loan if the connection was already held.
fn take(conn: &Conn, shared: &AtomicU64) {
    if conn.held.swap(true, Ordering::SeqCst) {
        shared.fetch_add(1, Ordering::Relaxed);
    }
}

fn double(thread: u64, loan: u64) -> bool {
    (thread * 7919 + loan * 104_729) % 100 < DOUBLE_PERCENT
}

struct NaivePool {
    free: Mutex<Vec<usize>>,
    conns: Vec<Conn>,
}

fn naive() -> (u64, u64) {
    let pool = NaivePool {
        free: Mutex::new((0..CONNECTIONS).collect()),
        conns: (0..CONNECTIONS).map(|_| Conn::default()).collect(),
    };
    let (shared, releases) = (AtomicU64::new(0), AtomicU64::new(0));
    thread::scope(|s| {
        for t in 0..THREADS {
            let (pool, shared, releases) = (&pool, &shared, &releases);
            s.spawn(move || {
                for loan in 0..LOANS_PER_THREAD {
                    let Some(i) = pool.free.lock().expect("lock").pop() else {
                        thread::yield_now();
                        continue;
                    };
                    take(&pool.conns[i], shared);
                    let times = if double(t, loan) { 2 } else { 1 };
                    for _ in 0..times {
                        pool.conns[i].held.store(false, Ordering::SeqCst);
                        pool.free.lock().expect("lock").push(i);
                        releases.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    (shared.into_inner(), releases.into_inner())
}

#[derive(Debug)]
struct Manager;

impl idem_pool::Manager for Manager {
    type Connection = Conn;
    type Error = Infallible;
    fn connect(&self) -> Result<Conn, Infallible> {
        Ok(Conn::default())
    }
    fn is_valid(&self, _: &mut Conn) -> Result<(), Infallible> {
        Ok(())
    }
    fn has_broken(&self, _: &mut Conn) -> bool {
        false
    }
}

fn idem() -> (u64, u64) {
    let pool = idem_pool::Pool::builder().max_size(CONNECTIONS).build(Manager).expect("config");
    let (shared, releases) = (AtomicU64::new(0), AtomicU64::new(0));
    thread::scope(|s| {
        for t in 0..THREADS {
            let (pool, shared, releases) = (&pool, &shared, &releases);
            s.spawn(move || {
                for loan in 0..LOANS_PER_THREAD {
                    let mut conn = pool.get().expect("a connection");
                    take(&conn, shared);
                    conn.held.store(false, Ordering::SeqCst);
                    let times = if double(t, loan) { 2 } else { 1 };
                    for _ in 0..times {
                        conn.release();
                        releases.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    let state = pool.state();
    assert_eq!(
        state.double_releases + THREADS * LOANS_PER_THREAD,
        releases.load(Ordering::Relaxed)
    );
    (shared.into_inner(), releases.into_inner())
}

fn main() {
    let (naive_shared, naive_releases) = naive();
    let (idem_shared, idem_releases) = idem();
    assert_eq!(idem_shared, 0, "idem never lends a held connection");
    println!(
        "retry_storm\t{DOUBLE_PERCENT}% released twice; effect: shared \
            loan\t{}\t{}\t{naive_shared}\t{idem_shared}",
        THREADS * LOANS_PER_THREAD,
        naive_releases.max(idem_releases)
    );
}
