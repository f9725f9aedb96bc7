//! The log writer: one thread owns the device. It takes every waiting request (up to
//! [`GROUP_MAX`]), decides them on the ledger, appends their records with their results,
//! syncs once (group commit), and answers. It holds the ledger from deciding until the
//! sync returns, so no reader sees a batch that a crash could still take back.

use std::panic::AssertUnwindSafe;

use crossbeam_channel::Receiver;
use parking_lot::Mutex;

use crate::durable::format::{self, FILE_HEADER};
use crate::durable::{Answer, LogDevice, LogError, Request, apply, recovery, result_codes};
use crate::ledger::Ledger;

/// Requests queued for the writer; a caller beyond it waits to queue.
pub(crate) const QUEUE_MAX: usize = 1024;
/// Requests decided and synced together.
const GROUP_MAX: usize = 64;

/// Runs until the queue closes, or until a group fails: an append or sync that errs, or a
/// panic while deciding or writing it. Then the group is answered with the error, the
/// ledger is rebuilt from what was synced, and the writer stops (every later request is
/// answered `Stopped`). Nothing of a failed group is answered as done.
pub(crate) fn write_log<D: LogDevice>(
    mut device: D,
    ledger: &Mutex<Ledger>,
    queue: &Receiver<Request>,
    mut synced_len: u64,
) {
    while let Ok(first) = queue.recv() {
        let mut group = vec![first];
        group.extend(queue.try_iter().take(GROUP_MAX - 1));
        let mut ledger = ledger.lock();
        let run = std::panic::catch_unwind(AssertUnwindSafe(|| {
            commit_group(&mut device, &mut ledger, &group)
        }));
        let failure = match run {
            Ok(Ok((written, answers))) => {
                synced_len += written;
                drop(ledger);
                for (request, answer) in group.into_iter().zip(answers) {
                    let _ = request.reply.send(answer);
                }
                continue;
            }
            Ok(Err(error)) => LogError::Io(error),
            Err(panic) => LogError::WriterFailed(panic_message(panic.as_ref())),
        };
        rebuild(&mut device, &mut ledger, synced_len);
        drop(ledger);
        let message = failure.to_string();
        let mut failure = Some(failure);
        for request in group {
            let error = failure.take().unwrap_or_else(|| LogError::WriterFailed(message.clone()));
            let _ = request.reply.send(Err(error));
        }
        return;
    }
}

/// Decides every request of the group, appends their records and syncs once. Returns the
/// bytes written and the answers, or the I/O error (what is on disk is then unknown).
fn commit_group<D: LogDevice>(
    device: &mut D,
    ledger: &mut Ledger,
    group: &[Request],
) -> std::io::Result<(u64, Vec<Result<Answer, LogError>>)> {
    let now_ms = ledger.now_ms();
    let mut bytes = Vec::new();
    let mut answers = Vec::with_capacity(group.len());
    for request in group {
        let answer = apply(ledger, &request.op, now_ms).map_err(LogError::Batch);
        if let Ok(answer) = &answer {
            bytes.extend(format::encode(&request.op, now_ms, &result_codes(answer)));
        }
        answers.push(answer);
    }
    device.append(&bytes)?;
    device.sync()?;
    Ok((bytes.len() as u64, answers))
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    let text = panic.downcast_ref::<&str>().map(|s| s.to_string());
    text.or_else(|| panic.downcast_ref::<String>().cloned()).unwrap_or_else(|| "a panic".into())
}

/// After a failed append or sync the ledger is ahead of the disk: replay what is known to
/// be synced into a fresh ledger, so readers see only durable batches. If even that fails
/// the ledger is left as it is; the writer stops either way.
fn rebuild<D: LogDevice>(device: &mut D, ledger: &mut Ledger, synced_len: u64) {
    let Ok(bytes) = device.read_all() else { return };
    let Some(synced) = usize::try_from(synced_len).ok().and_then(|len| bytes.get(..len)) else {
        return;
    };
    let mut fresh = ledger.empty_like();
    if synced.len() >= FILE_HEADER.len() && recovery::replay(synced, &mut fresh).is_ok() {
        *ledger = fresh;
    }
}
