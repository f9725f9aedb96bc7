//! The timing harness of the threaded benches: their work on real threads, released
//! together by a barrier, timed from the first thread's start until the last thread is
//! done, each thread reading the clock itself. Spawning
//! the threads and preparing each one's share happen before the clock starts, so a
//! figure is the work alone, as criterion's `iter_custom` expects.
//!
//! ```
//! use std::hint::black_box;
//! use idem_testkit::bench;
//!
//! // 1,000 operations split over 2 threads, op(0) to op(999): what `iter_custom` times.
//! let elapsed = bench::timed_iters(2, 1_000, |i| {
//!     black_box(i * 2);
//! });
//! // One share per thread, prepared before the clock starts.
//! let shares = vec![vec![1_u64, 2], vec![3, 4]];
//! let (elapsed_too, sums) = bench::timed_with(shares, |share| share.iter().sum::<u64>());
//! assert_eq!(sums, [3, 7]);
//! # let _ = (elapsed, elapsed_too);
//! ```
//!
//! Speed is measured in benches, never asserted in a test: nothing here checks a time.

use std::sync::Barrier;
use std::time::{Duration, Instant};

/// A hasher with fixed keys: the same SipHash as a `RandomState`, so that a baseline's
/// map hashes alike run after run and an instruction count of it repeats exactly.
pub type FixedKeys = std::hash::BuildHasherDefault<std::collections::hash_map::DefaultHasher>;

/// Runs `work` once per share, each on a thread of its own, all released together, and
/// returns the time from their release until the last one finished.
///
/// # Panics
///
/// If a thread's work panics (the panic is passed on).
pub fn timed<T: Send>(shares: impl IntoIterator<Item = T>, work: impl Fn(T) + Sync) -> Duration {
    timed_with(shares, work).0
}

/// [`timed`], with what each thread's work returned, in the order of the shares.
///
/// # Panics
///
/// If a thread's work panics (the panic is passed on).
pub fn timed_with<T: Send, R: Send>(
    shares: impl IntoIterator<Item = T>,
    work: impl Fn(T) -> R + Sync,
) -> (Duration, Vec<R>) {
    let shares: Vec<T> = shares.into_iter().collect();
    let start = Barrier::new(shares.len());
    // Each thread reads the clock itself, after the barrier and after its work: the span is
    // the first start to the last end. A clock read by the spawning thread after the
    // barrier started late whenever that thread lost its core to the workers (64 threads
    // on 2 cores), and a pool bench then reported 18 million 2 us holds a second.
    let spans: Vec<(Instant, Instant, R)> = std::thread::scope(|scope| {
        let workers: Vec<_> = shares
            .into_iter()
            .map(|share| {
                let (start, work) = (&start, &work);
                scope.spawn(move || {
                    start.wait();
                    let began = Instant::now();
                    let result = work(share);
                    (began, Instant::now(), result)
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
            .collect()
    });
    let first = spans.iter().map(|(began, _, _)| *began).min();
    let last = spans.iter().map(|(_, ended, _)| *ended).max();
    let elapsed = match (first, last) {
        (Some(first), Some(last)) => last.saturating_duration_since(first),
        _ => Duration::ZERO,
    };
    (elapsed, spans.into_iter().map(|(_, _, result)| result).collect())
}

/// `iters` operations split over `threads` threads, timed as [`timed`] times them: each
/// thread runs `iters / threads` rounded up (a few more than `iters` in all, at most
/// `threads - 1`), thread `t` calling `op(i)` for `i` from `t * per_thread` up to
/// `(t + 1) * per_thread`, so every index is one operation's own.
///
/// # Panics
///
/// If `threads` is 0, or if an operation panics (the panic is passed on).
pub fn timed_iters(threads: usize, iters: u64, op: impl Fn(usize) + Sync) -> Duration {
    assert!(threads > 0, "a bench needs at least one thread");
    let per_thread = (iters as usize).div_ceil(threads);
    timed(0..threads, |t| (t * per_thread..(t + 1) * per_thread).for_each(&op))
}

/// Runs `iters` calls of `op` on `count` tokio tasks of the current runtime (an equal
/// share each, rounded up), and returns the time they took, scaled to `iters` calls: the
/// async benches' `iter_custom` with concurrent callers.
///
/// # Panics
///
/// If a task panics (the panic is passed on).
pub async fn timed_tasks<F, Fut>(count: u64, iters: u64, op: F) -> Duration
where
    F: Fn() -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let share = iters.div_ceil(count.max(1));
    let start = Instant::now();
    let running: Vec<_> = (0..count.max(1))
        .map(|_| {
            let op = op.clone();
            tokio::spawn(async move {
                for _ in 0..share {
                    op().await;
                }
            })
        })
        .collect();
    for task in running {
        task.await.expect("a bench task panicked");
    }
    start.elapsed().mul_f64(iters as f64 / (share * count.max(1)) as f64)
}
