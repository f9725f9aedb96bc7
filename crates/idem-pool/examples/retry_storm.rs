//! Cleanup paths that release twice: four threads borrow connections from a pool of four, and in
//! 30% of the loans a second cleanup path (an error handler, a retried cleanup) releases the same
//! connection again.
//!
//! Naive: a free queue (first in, first out, as a fair pool lends) that takes whatever is released.
//! The second release puts the connection in the queue a second time, so two borrowers can take it:
//! each loan then shares its connection with another borrower, the harm of a double release in a
//! real pool (two requests' statements interleaved on one session). Every loan holds its connection
//! until all four threads hold theirs (a round), as a query would, so the harm shows however the
//! threads are scheduled, and it is counted where it happens: a loan that found its connection
//! already held, or whose connection another borrower took while it held it. idem: the second
//! release is a counted no-op, no loan ever shares, and each second release is answered as the
//! first was (the connection stays where the first put it). Half the second releases come from the
//! guard, half from a clone of a detached loan released while the thread's next detached loan
//! holds its round, when another borrower may hold the connection, or have it parked under a newer
//! detached loan: the pool tells the stale release by the slot's generation, and a stale release
//! that took a parked connection would show as the newer loan's own release refused, counted as
//! sharing. Prints a sentence (and, for `cargo
//! xtask demo`, its line).

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;

const THREADS: u64 = 4;
const LOANS_PER_THREAD: u64 = 5_000;
const CONNECTIONS: usize = 4;
const DOUBLE_PERCENT: u64 = 30;

/// A connection that notices a second borrower.
#[derive(Debug, Default)]
struct Conn {
    /// The borrowing thread plus one; 0 while no loan holds it. Shared, so that a loan
    /// detached from its guard still marks its holder.
    owner: Arc<AtomicU64>,
}

/// One loan of `conn` by thread `t`, held until every thread holds its loan of the round
/// (`round`), as a query holds its session; returns whether another borrower shared it:
/// it was already held when this loan took it, or someone else had taken it by the time
/// this loan ended. `meanwhile` runs while every loan of the round is held.
fn hold(owner: &AtomicU64, t: u64, round: &Barrier, meanwhile: impl FnOnce()) -> bool {
    let before = owner.swap(t + 1, Ordering::SeqCst);
    round.wait();
    meanwhile();
    let after = owner.swap(0, Ordering::SeqCst);
    before != 0 || after != t + 1
}

fn double(thread: u64, loan: u64) -> bool {
    (thread * 7919 + loan * 104_729) % 100 < DOUBLE_PERCENT
}

struct NaivePool {
    free: Mutex<VecDeque<usize>>,
    conns: Vec<Conn>,
}

/// Returns (loans that shared their connection, releases).
fn naive() -> (u64, u64) {
    let pool = NaivePool {
        free: Mutex::new((0..CONNECTIONS).collect()),
        conns: (0..CONNECTIONS).map(|_| Conn::default()).collect(),
    };
    let (shared, releases) = (AtomicU64::new(0), AtomicU64::new(0));
    let round = Barrier::new(THREADS as usize);
    thread::scope(|s| {
        for t in 0..THREADS {
            let (pool, shared, releases, round) = (&pool, &shared, &releases, &round);
            s.spawn(move || {
                for loan in 0..LOANS_PER_THREAD {
                    let i = loop {
                        match pool.free.lock().expect("lock").pop_front() {
                            Some(i) => break i,
                            None => thread::yield_now(),
                        }
                    };
                    if hold(&pool.conns[i].owner, t, round, || {}) {
                        shared.fetch_add(1, Ordering::Relaxed);
                    }
                    let times = if double(t, loan) { 2 } else { 1 };
                    for _ in 0..times {
                        pool.free.lock().expect("lock").push_back(i);
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
}

/// Loan `loan` of thread `t` from idem's pool, held for a round and released `twice` or
/// once; returns whether it shared its connection. A loan whose second release comes from
/// a detached clone parks its connection in its slot for the round, while the stale
/// clone of this thread's detached loan before it is released (`late`): one that took the
/// connection from under this loan shows as this loan's own release refused, and counts
/// as sharing (the next borrower would get it). A thread that is lent the slot it had
/// before meets its own stale clone there, so the check is met however threads are
/// scheduled.
fn idem_loan(
    pool: &idem_pool::Pool<Manager>,
    (t, loan, twice): (u64, u64, bool),
    round: &Barrier,
    late: &mut Option<idem_pool::Loan<Manager>>,
) -> bool {
    let mut conn = pool.get().expect("a connection");
    let owner = Arc::clone(&conn.owner);
    if twice && loan % 2 == 0 {
        let stale = late.take();
        let detached = conn.into_loan();
        let shared = hold(&owner, t, round, || {
            if let Some(stale) = stale {
                stale.release();
            }
        });
        *late = Some(detached.clone());
        return !detached.release() || shared;
    }
    let shared = hold(&owner, t, round, || {});
    conn.release();
    if twice {
        conn.release();
    }
    shared
}

/// Returns (loans that shared their connection, releases, second releases, second releases
/// the pool answered as the first: refused as double or stale releases).
fn idem() -> (u64, u64, u64, u64) {
    let pool = idem_pool::Pool::builder().max_size(CONNECTIONS).build(Manager).expect("config");
    let (shared, releases) = (AtomicU64::new(0), AtomicU64::new(0));
    let seconds = AtomicU64::new(0);
    let round = Barrier::new(THREADS as usize);
    thread::scope(|s| {
        for t in 0..THREADS {
            let (pool, shared, releases, round) = (&pool, &shared, &releases, &round);
            let seconds = &seconds;
            s.spawn(move || {
                // A detached loan's late clone, released during the thread's next detached
                // loan, while its connection may be lent to another borrower.
                let mut late: Option<idem_pool::Loan<Manager>> = None;
                for loan in 0..LOANS_PER_THREAD {
                    let twice = double(t, loan);
                    if idem_loan(pool, (t, loan, twice), round, &mut late) {
                        shared.fetch_add(1, Ordering::Relaxed);
                    }
                    releases.fetch_add(1 + u64::from(twice), Ordering::Relaxed);
                    seconds.fetch_add(u64::from(twice), Ordering::Relaxed);
                }
                if let Some(last) = late {
                    last.release();
                }
            });
        }
    });
    let state = pool.state();
    let refused = state.double_releases + state.stale_releases;
    (shared.into_inner(), releases.into_inner(), seconds.into_inner(), refused)
}

fn main() {
    // A thread that panics (an assert of the pool's) would leave the others waiting at
    // the round's barrier for ever: the storm ends there, failed, instead.
    std::panic::set_hook(Box::new(|info| {
        eprintln!("{info}");
        std::process::exit(101);
    }));
    let (naive_shared, naive_releases) = naive();
    let (idem_shared, idem_releases, seconds, refused) = idem();
    assert_eq!(idem_shared, 0, "no loan of idem's pool shares its connection");
    idem_testkit::storm::Row {
        scenario: format!("loans, {DOUBLE_PERCENT}% released twice"),
        intents: THREADS * LOANS_PER_THREAD,
        attempts: naive_releases.max(idem_releases),
        without: naive_shared,
        with: idem_shared,
        effect: "loans that shared a connection".into(),
        attempt: "releases".into(),
        repeats: seconds,
        same: refused,
    }
    .print();
}
