//! Instructions, not seconds: 1,000 fresh notifications through the notifier (one worker,
//! a no-op provider, drained at the end) beside the same pipeline without dedup, counted by
//! valgrind's callgrind under gungraun (see idem-future's `instructions` bench). The
//! count covers every thread of the process: the submitting one and the worker. The
//! notifier, its store and the notifications are made in the setup and dropped after the
//! count; the pipeline without dedup starts its worker inside the count, as its criterion
//! twin does. The case named `idem` is this crate. `cargo xtask bench idem-notify`.

// gungraun's macros generate undocumented public items.
#![allow(missing_docs)]

mod pipelines;

use gungraun::{
    Callgrind, LibraryBenchmarkConfig, library_benchmark, library_benchmark_group, main,
};
use idem_notify::Notification;
use pipelines::{Idem, notifier, submissions, with_dedup, without_dedup};

/// Notifications per benchmark: enough that the first message's work is noise.
const MESSAGES: usize = 1_000;

/// What a case starts from, made outside the count.
enum Pipeline {
    Idem(Idem, Vec<Notification>),
    NoDedup(Vec<Notification>),
}

fn idem() -> Pipeline {
    Pipeline::Idem(notifier(1, MESSAGES), submissions(MESSAGES, 0))
}

fn no_dedup() -> Pipeline {
    Pipeline::NoDedup(submissions(MESSAGES, 0))
}

/// Also counts each worker's thread, from its loop's entry: the notifier's worker and the
/// pipeline's (`send_each`). Nothing else runs in them.
fn workers_counted() -> LibraryBenchmarkConfig {
    let mut config = LibraryBenchmarkConfig::default();
    config.tool(Callgrind::with_args([
        "--toggle-collect=idem_notify::notifier::work*",
        "--toggle-collect=*pipelines::send_each*",
    ]));
    config
}

// Submit fresh notifications and drain: one message's whole path, per message.
#[library_benchmark(config = workers_counted())]
#[bench::idem(setup = idem)]
#[bench::no_dedup(setup = no_dedup)]
fn per_message(pipeline: Pipeline) -> Pipeline {
    match &pipeline {
        Pipeline::Idem(notifier, input) => with_dedup(notifier, input),
        Pipeline::NoDedup(input) => without_dedup(1, input),
    }
    // Returned, so that its drop (the store's records freed) is not counted.
    pipeline
}

library_benchmark_group!(
    name = notify;
    benchmarks = per_message
);

main!(library_benchmark_groups = notify);
