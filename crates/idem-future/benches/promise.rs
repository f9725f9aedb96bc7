//! idem-future beside tokio's oneshot, futures' oneshot and faern's `oneshot`, in one run.
//! `cargo xtask bench idem-future`.
//!
//! (a) `await`: create, complete, then poll once on the same thread (a no-op waker).
//! (b) `blocking`: create, complete, then a blocking wait on the same thread.
//! (c) `cross_thread`: a worker thread completes; this thread waits, usually parked.
//! (d) `race8`: eight worker threads race to complete one promise; this thread waits.
//!     The oneshot channels have a single sender, so their racers share it through a
//!     `Mutex<Option<Sender>>` and the first `take` sends: what a user would write.

// criterion's macros generate undocumented public functions.
#![allow(missing_docs)]

mod common;

use std::hint::black_box;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::thread;

use common::{pending_then_ready, poll_once};
use criterion::{Criterion, criterion_group, criterion_main};

type Job = Box<dyn FnOnce() + Send>;

/// Long-lived worker threads, so no bench pays for spawning threads.
struct Workers {
    senders: Vec<mpsc::Sender<Job>>,
}

impl Workers {
    fn new(n: usize) -> Self {
        let senders = (0..n)
            .map(|_| {
                let (tx, rx) = mpsc::channel::<Job>();
                thread::spawn(move || rx.into_iter().for_each(|job| job()));
                tx
            })
            .collect();
        Self { senders }
    }

    fn run(&self, i: usize, job: impl FnOnce() + Send + 'static) {
        self.senders[i].send(Box::new(job)).expect("worker alive");
    }
}

fn bench_await(c: &mut Criterion) {
    let mut g = c.benchmark_group("await");
    g.bench_function("idem", |b| {
        b.iter(|| {
            let (tx, rx) = idem_future::promise::<u64, ()>();
            let _ = tx.complete(black_box(1));
            assert!(matches!(poll_once(rx), Poll::Ready(Ok(1))));
        })
    });
    g.bench_function("tokio_oneshot", |b| {
        b.iter(|| {
            let (tx, rx) = tokio::sync::oneshot::channel::<u64>();
            let _ = tx.send(black_box(1));
            assert!(matches!(poll_once(rx), Poll::Ready(Ok(1))));
        })
    });
    g.bench_function("futures_oneshot", |b| {
        b.iter(|| {
            let (tx, rx) = futures::channel::oneshot::channel::<u64>();
            let _ = tx.send(black_box(1));
            assert!(matches!(poll_once(rx), Poll::Ready(Ok(1))));
        })
    });
    g.bench_function("oneshot", |b| {
        b.iter(|| {
            let (tx, rx) = oneshot::channel::<u64>();
            let _ = tx.send(black_box(1));
            assert!(matches!(poll_once(rx), Poll::Ready(Ok(1))));
        })
    });
    g.finish();
}

/// Create, poll once while pending (the waker is stored), complete, poll again: the path
/// of a future awaited before its value arrives.
fn bench_await_pending(c: &mut Criterion) {
    let mut g = c.benchmark_group("await_pending");
    g.bench_function("idem", |b| {
        b.iter(|| {
            let (tx, rx) = idem_future::promise::<u64, ()>();
            let ready = pending_then_ready(rx, || {
                let _ = tx.complete(black_box(1));
            });
            assert!(matches!(ready, Poll::Ready(Ok(1))));
        })
    });
    g.bench_function("tokio_oneshot", |b| {
        b.iter(|| {
            let (tx, rx) = tokio::sync::oneshot::channel::<u64>();
            let ready = pending_then_ready(rx, || {
                let _ = tx.send(black_box(1));
            });
            assert!(matches!(ready, Poll::Ready(Ok(1))));
        })
    });
    g.bench_function("oneshot", |b| {
        b.iter(|| {
            let (tx, rx) = oneshot::channel::<u64>();
            let ready = pending_then_ready(rx, || {
                let _ = tx.send(black_box(1));
            });
            assert!(matches!(ready, Poll::Ready(Ok(1))));
        })
    });
    g.finish();
}

fn bench_blocking(c: &mut Criterion) {
    let mut g = c.benchmark_group("blocking");
    g.bench_function("idem", |b| {
        b.iter(|| {
            let (tx, rx) = idem_future::promise::<u64, ()>();
            let _ = tx.complete(black_box(1));
            assert_eq!(rx.wait(), Ok(1));
        })
    });
    g.bench_function("tokio_oneshot", |b| {
        b.iter(|| {
            let (tx, rx) = tokio::sync::oneshot::channel::<u64>();
            let _ = tx.send(black_box(1));
            assert_eq!(rx.blocking_recv(), Ok(1));
        })
    });
    g.bench_function("futures_oneshot", |b| {
        b.iter(|| {
            let (tx, rx) = futures::channel::oneshot::channel::<u64>();
            let _ = tx.send(black_box(1));
            assert_eq!(futures::executor::block_on(rx), Ok(1));
        })
    });
    g.bench_function("oneshot", |b| {
        b.iter(|| {
            let (tx, rx) = oneshot::channel::<u64>();
            let _ = tx.send(black_box(1));
            assert_eq!(rx.recv(), Ok(1));
        })
    });
    g.finish();
}

fn bench_cross_thread(c: &mut Criterion) {
    let workers = Workers::new(1);
    let mut g = c.benchmark_group("cross_thread");
    g.bench_function("idem", |b| {
        b.iter(|| {
            let (tx, rx) = idem_future::promise::<u64, ()>();
            workers.run(0, move || {
                let _ = tx.complete(1);
            });
            assert_eq!(rx.wait(), Ok(1));
        })
    });
    g.bench_function("tokio_oneshot", |b| {
        b.iter(|| {
            let (tx, rx) = tokio::sync::oneshot::channel::<u64>();
            workers.run(0, move || {
                let _ = tx.send(1);
            });
            assert_eq!(rx.blocking_recv(), Ok(1));
        })
    });
    g.bench_function("futures_oneshot", |b| {
        b.iter(|| {
            let (tx, rx) = futures::channel::oneshot::channel::<u64>();
            workers.run(0, move || {
                let _ = tx.send(1);
            });
            assert_eq!(futures::executor::block_on(rx), Ok(1));
        })
    });
    g.bench_function("oneshot", |b| {
        b.iter(|| {
            let (tx, rx) = oneshot::channel::<u64>();
            workers.run(0, move || {
                let _ = tx.send(1);
            });
            assert_eq!(rx.recv(), Ok(1));
        })
    });
    g.finish();
}

const RACERS: usize = 8;

/// Hands each of `RACERS` workers a clone of `send`, which tries to complete with its index.
fn race<S: Clone + Send + 'static>(workers: &Workers, send: S, attempt: fn(&S, u64)) {
    for i in 0..RACERS {
        let send = send.clone();
        workers.run(i, move || attempt(&send, i as u64));
    }
}

fn bench_race(c: &mut Criterion) {
    let workers = Workers::new(RACERS);
    let mut g = c.benchmark_group("race8");
    g.bench_function("idem", |b| {
        b.iter(|| {
            let (tx, rx) = idem_future::promise::<u64, ()>();
            race(&workers, tx, |tx, v| {
                let _ = tx.complete(v);
            });
            assert!(rx.wait().is_ok_and(|v| v < RACERS as u64));
        })
    });
    g.bench_function("tokio_oneshot", |b| {
        b.iter(|| {
            let (tx, rx) = tokio::sync::oneshot::channel::<u64>();
            race(&workers, Arc::new(Mutex::new(Some(tx))), |tx, v| {
                let taken = tx.lock().expect("not poisoned").take();
                if let Some(tx) = taken {
                    let _ = tx.send(v);
                }
            });
            assert!(rx.blocking_recv().is_ok_and(|v| v < RACERS as u64));
        })
    });
    g.bench_function("futures_oneshot", |b| {
        b.iter(|| {
            let (tx, rx) = futures::channel::oneshot::channel::<u64>();
            race(&workers, Arc::new(Mutex::new(Some(tx))), |tx, v| {
                let taken = tx.lock().expect("not poisoned").take();
                if let Some(tx) = taken {
                    let _ = tx.send(v);
                }
            });
            assert!(futures::executor::block_on(rx).is_ok_and(|v| v < RACERS as u64));
        })
    });
    g.bench_function("oneshot", |b| {
        b.iter(|| {
            let (tx, rx) = oneshot::channel::<u64>();
            race(&workers, Arc::new(Mutex::new(Some(tx))), |tx, v| {
                let taken = tx.lock().expect("not poisoned").take();
                if let Some(tx) = taken {
                    let _ = tx.send(v);
                }
            });
            assert!(rx.recv().is_ok_and(|v| v < RACERS as u64));
        })
    });
    g.finish();
}

criterion_group! {
    name = promise;
    config = Criterion::default()
        .sample_size(30)
        .warm_up_time(std::time::Duration::from_secs(1))
        .measurement_time(std::time::Duration::from_secs(2));
    targets = bench_await, bench_await_pending, bench_blocking, bench_cross_thread, bench_race
}
criterion_main!(promise);
