//! The log writer: one thread owns the device. It takes every waiting request (up to
//! [`GROUP_MAX`]), decides them on the ledger, appends their records with their results,
//! syncs once (group commit), and answers. It holds the ledger from deciding until the
//! sync returns, so no reader sees a batch that a crash could still take back.

use crossbeam_channel::Receiver;
use parking_lot::Mutex;

use crate::durable::format::{self, FILE_HEADER};
use crate::durable::{LogDevice, Request, apply, recovery, result_codes};
use crate::ledger::Ledger;

/// Requests queued for the writer; a caller beyond it waits to queue.
pub(crate) const QUEUE_MAX: usize = 1024;
/// Requests decided and synced together.
const GROUP_MAX: usize = 64;

/// Runs until the queue closes, or until an append or sync fails: then the group is
/// answered with the error, the ledger is rebuilt from what was synced, and the writer
/// stops (every later request is answered `Stopped`).
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
        let now_ms = ledger.now_ms();
        let mut bytes = Vec::new();
        let mut answers = Vec::with_capacity(group.len());
        for request in &group {
            let answer = apply(&mut ledger, &request.op, now_ms).map_err(|e| e.to_string());
            if let Ok(answer) = &answer {
                bytes.extend(format::encode(&request.op, now_ms, &result_codes(answer)));
            }
            answers.push(answer);
        }
        if let Err(error) = device.append(&bytes).and_then(|()| device.sync()) {
            rebuild(&mut device, &mut ledger, synced_len);
            drop(ledger);
            for request in group {
                let _ = request.reply.send(Err(error.to_string()));
            }
            return;
        }
        synced_len += bytes.len() as u64;
        drop(ledger);
        for (request, answer) in group.into_iter().zip(answers) {
            let _ = request.reply.send(answer);
        }
    }
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
