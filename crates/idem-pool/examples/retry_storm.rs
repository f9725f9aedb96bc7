//! Cleanup paths that release twice: four threads borrow connections from a pool of four,
//! and in 30% of the loans a second cleanup path (an error handler, a retried cleanup)
//! releases the same connection again.
//!
//! Naive: a free list that pushes whatever is released; the second release puts back a
//! connection this thread no longer holds (already on the list, or already lent to
//! another thread), so two borrowers can end up sharing it. idem: the second release is
//! a counted no-op. The effect counted is that harm itself, a connection given back that
//! was already given back, read from each connection's owner at the moment of release:
//! every second release counts (and a single release of a connection that another thread
//! took meanwhile, after an earlier double), so thousands on every run, whatever the
//! interleaving. With idem it must be 0, and no loan ever finds its connection held.
//! Prints a sentence and one line for `cargo xtask demo`.

use std::convert::Infallible;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;

const THREADS: u64 = 4;
const LOANS_PER_THREAD: u64 = 5_000;
const CONNECTIONS: usize = 4;
const DOUBLE_PERCENT: u64 = 30;

/// A connection that notices when a second holder takes it, and who holds it.
#[derive(Debug, Default)]
struct Conn {
    held: AtomicBool,
    /// The borrowing thread plus one; 0 while it is back in the pool.
    owner: AtomicU64,
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

/// Returns (connections given back twice, loans that found theirs held, releases).
fn naive() -> (u64, u64, u64) {
    let pool = NaivePool {
        free: Mutex::new((0..CONNECTIONS).collect()),
        conns: (0..CONNECTIONS).map(|_| Conn::default()).collect(),
    };
    let (shared, releases) = (AtomicU64::new(0), AtomicU64::new(0));
    let returned_twice = AtomicU64::new(0);
    thread::scope(|s| {
        for t in 0..THREADS {
            let (pool, shared, releases) = (&pool, &shared, &releases);
            let returned_twice = &returned_twice;
            s.spawn(move || {
                for loan in 0..LOANS_PER_THREAD {
                    let Some(i) = pool.free.lock().expect("lock").pop() else {
                        thread::yield_now();
                        continue;
                    };
                    take(&pool.conns[i], shared);
                    pool.conns[i].owner.store(t + 1, Ordering::SeqCst);
                    let times = if double(t, loan) { 2 } else { 1 };
                    for _ in 0..times {
                        // Given back by a thread that no longer holds it: the harm.
                        if pool.conns[i].owner.swap(0, Ordering::SeqCst) != t + 1 {
                            returned_twice.fetch_add(1, Ordering::Relaxed);
                        }
                        pool.conns[i].held.store(false, Ordering::SeqCst);
                        pool.free.lock().expect("lock").push(i);
                        releases.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    (returned_twice.into_inner(), shared.into_inner(), releases.into_inner())
}

#[derive(Debug)]
struct Manager;

impl idem_pool::Manager for Manager {
    type Connection = Conn;
    type Error = Infallible;
    fn connect(&self) -> Result<Conn, Infallible> {
        Ok(Conn::default())
    }
}

/// Returns (connections the pool took back twice, loans that found theirs held, releases).
fn idem() -> (u64, u64, u64) {
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
    // Every release beyond one per loan was refused as a double release: the pool took
    // each connection back once.
    let releases = releases.into_inner();
    let returned_twice = releases - pool.state().double_releases - THREADS * LOANS_PER_THREAD;
    (returned_twice, shared.into_inner(), releases)
}

fn main() {
    let (naive_twice, naive_shared, naive_releases) = naive();
    let (idem_twice, idem_shared, idem_releases) = idem();
    assert_eq!((idem_twice, idem_shared), (0, 0), "idem never takes a connection back twice");
    println!("loans that found their connection already held: naive {naive_shared}, idem 0");
    let (scenario, effect, attempt) = (
        format!("loans, {DOUBLE_PERCENT}% released twice"),
        "connections given back twice",
        "releases",
    );
    let (intents, attempts, without, with) =
        (THREADS * LOANS_PER_THREAD, naive_releases.max(idem_releases), naive_twice, idem_twice);
    println!(
        "{scenario}: {without} {effect} without idem, {with} with idem, for {intents} intended \
         operations ({attempts} {attempt})"
    );
    println!(
        "retry_storm\t{scenario}\t{intents}\t{attempts}\t{without}\t{with}\t{effect}\t{attempt}"
    );
}
