//! The pipelines both benches run: the notifier on the memory store with a no-op provider,
//! and the same pipeline without dedup (a bounded crossbeam queue and workers calling the
//! provider).

#![allow(dead_code, reason = "each bench uses part of it")]

use std::time::Duration;

use crossbeam_channel::TrySendError;
use idem_core::{MemoryStore, StoreConfig};
use idem_notify::{Channel, Config, Notification, Notifier, Provider, SubmitError};

/// Accepts everything at once.
#[derive(Debug, Default)]
pub(crate) struct Noop;

impl Provider for Noop {
    fn send(&self, _: &Notification) -> Result<(), idem_notify::SendError> {
        Ok(())
    }
    fn status(&self, _: &Notification) -> idem_notify::DeliveryStatus {
        idem_notify::DeliveryStatus::NotDelivered
    }
}

/// Takes a millisecond a send, as a provider's API call does (a real one takes
/// milliseconds): beside it, what dedup costs a message is out of sight.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct OneMs;

impl Provider for OneMs {
    fn send(&self, _: &Notification) -> Result<(), idem_notify::SendError> {
        std::thread::sleep(Duration::from_millis(1));
        Ok(())
    }
    fn status(&self, _: &Notification) -> idem_notify::DeliveryStatus {
        idem_notify::DeliveryStatus::NotDelivered
    }
}

/// `messages` distinct ids, with `dup_percent` of them submitted twice.
pub(crate) fn submissions(messages: usize, dup_percent: usize) -> Vec<Notification> {
    let mut all = Vec::new();
    for i in 0..messages {
        let n = Notification::new(
            &format!("msg-{i}"),
            &format!("user:{}", i % 1000),
            Channel::Push,
            "hi",
        )
        .expect("valid");
        if i % 100 < dup_percent {
            all.push(n.clone());
        }
        all.push(n);
    }
    all
}

/// The notifier the dedup pipeline runs: `workers` workers, a store for `messages` ids.
pub(crate) type Idem<P = Noop> = Notifier<P, MemoryStore<idem_notify::Outcome>>;

/// A started notifier with `workers` workers and room for `messages` ids.
pub(crate) fn notifier(workers: usize, messages: usize) -> Idem {
    notifier_on(Noop, workers, messages)
}

/// [`notifier`] with `provider`.
pub(crate) fn notifier_on<P: Provider>(provider: P, workers: usize, messages: usize) -> Idem<P> {
    let store =
        MemoryStore::new(StoreConfig::builder().capacity(messages * 2).build().expect("valid"));
    Notifier::start(provider, store, Config::builder().workers(workers).build().expect("valid"))
        .expect("workers start")
}

/// Submits every notification of `input` (a clone each, retried while the queue is full)
/// and drains the notifier (the caller drops it, outside what it times).
pub(crate) fn with_dedup<P: Provider>(notifier: &Idem<P>, input: &[Notification]) {
    for n in input {
        while let Err(SubmitError::QueueFull { .. }) = notifier.submit(n.clone()) {
            std::thread::yield_now();
        }
    }
    notifier.shutdown(Duration::from_secs(60));
}

/// A worker of the pipeline without dedup: sends each notification until the queue closes.
/// A function of its own so that the instruction count can find the worker's thread.
#[inline(never)]
pub(crate) fn send_each<P: Provider>(
    provider: &P,
    queue: &crossbeam_channel::Receiver<Notification>,
) {
    queue.iter().for_each(|n| drop(provider.send(&n)));
}

/// The same submissions through a bounded queue to `workers` workers, no dedup.
pub(crate) fn without_dedup(workers: usize, input: &[Notification]) {
    without_dedup_on(&Noop, workers, input);
}

/// [`without_dedup`] with `provider`.
pub(crate) fn without_dedup_on<P: Provider>(provider: &P, workers: usize, input: &[Notification]) {
    let (tx, rx) = crossbeam_channel::bounded::<Notification>(1024);
    std::thread::scope(|s| {
        for _ in 0..workers {
            let rx = rx.clone();
            s.spawn(move || send_each(provider, &rx));
        }
        for n in input {
            let mut n = n.clone();
            loop {
                match tx.try_send(n) {
                    Ok(()) => break,
                    Err(TrySendError::Full(back)) => {
                        n = back;
                        std::thread::yield_now();
                    }
                    Err(TrySendError::Disconnected(_)) => unreachable!("workers outlive the loop"),
                }
            }
        }
        drop(tx);
    });
}
