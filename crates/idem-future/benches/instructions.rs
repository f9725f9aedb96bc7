//! Instructions, not seconds: idem-future's single-thread paths beside tokio's oneshot and
//! faern's `oneshot`, each counted by valgrind's callgrind under gungraun, so a figure
//! repeats exactly for the same binary whatever else the machine is doing. Each
//! benchmark runs its path `ROUNDS` times; divide by it for one. As in the criterion
//! benches, the case named `idem` is this crate and every other case of the same function
//! an anchor. `cargo xtask bench idem-future` runs it (and installs the `gungraun-runner`
//! binary it needs, of the library's version); it needs valgrind.

// gungraun's macros generate undocumented public items.
#![allow(missing_docs)]

mod common;

use std::hint::black_box;
use std::task::Poll;

use common::{pending_then_ready, poll_once};

use gungraun::{library_benchmark, library_benchmark_group, main};

/// Paths run per benchmark: enough that the allocator's first call is noise.
const ROUNDS: u64 = 1_000;

#[derive(Debug, Clone, Copy)]
enum Impl {
    Idem,
    TokioOneshot,
    Oneshot,
}

// Create, complete, then poll once: the value is there before the first poll.
#[library_benchmark]
#[bench::idem(Impl::Idem)]
#[bench::tokio_oneshot(Impl::TokioOneshot)]
#[bench::oneshot(Impl::Oneshot)]
fn await_ready(which: Impl) -> u64 {
    let mut sum = 0;
    for i in 0..ROUNDS {
        let ready = match which {
            Impl::Idem => {
                let (tx, rx) = idem_future::promise::<u64, ()>();
                let _ = tx.complete(black_box(i));
                poll_once(rx).map(Result::ok)
            }
            Impl::TokioOneshot => {
                let (tx, rx) = tokio::sync::oneshot::channel::<u64>();
                let _ = tx.send(black_box(i));
                poll_once(rx).map(Result::ok)
            }
            Impl::Oneshot => {
                let (tx, rx) = oneshot::channel::<u64>();
                let _ = tx.send(black_box(i));
                poll_once(rx).map(Result::ok)
            }
        };
        if let Poll::Ready(Some(v)) = ready {
            sum += v;
        }
    }
    black_box(sum)
}

// Create, poll while pending, complete, poll: a future awaited before its value.
#[library_benchmark]
#[bench::idem(Impl::Idem)]
#[bench::tokio_oneshot(Impl::TokioOneshot)]
#[bench::oneshot(Impl::Oneshot)]
fn await_pending(which: Impl) -> u64 {
    let mut sum = 0;
    for i in 0..ROUNDS {
        let ready = match which {
            Impl::Idem => {
                let (tx, rx) = idem_future::promise::<u64, ()>();
                pending_then_ready(rx, || {
                    let _ = tx.complete(black_box(i));
                })
                .map(Result::ok)
            }
            Impl::TokioOneshot => {
                let (tx, rx) = tokio::sync::oneshot::channel::<u64>();
                pending_then_ready(rx, || {
                    let _ = tx.send(black_box(i));
                })
                .map(Result::ok)
            }
            Impl::Oneshot => {
                let (tx, rx) = oneshot::channel::<u64>();
                pending_then_ready(rx, || {
                    let _ = tx.send(black_box(i));
                })
                .map(Result::ok)
            }
        };
        if let Poll::Ready(Some(v)) = ready {
            sum += v;
        }
    }
    black_box(sum)
}

library_benchmark_group!(
    name = future;
    benchmarks = await_ready, await_pending
);

main!(library_benchmark_groups = future);
