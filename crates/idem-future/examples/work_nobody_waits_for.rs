//! The promise under tokio: a caller waits with `tokio::time::timeout` and gives up; the
//! worker races its work against `Completer::closed()` in a `select!`, learns that nobody
//! will read its answer, and stops instead of finishing work for no one. Then a second
//! request whose reply arrives in time, read through `select!` beside a deadline.

use std::time::Duration;

use idem_future::promise;
use tokio::time::{sleep, timeout};

/// A worker that would take `work` to answer, unless every reader leaves first.
async fn worker(completer: idem_future::Completer<String, ()>, work: Duration) -> &'static str {
    tokio::select! {
        () = completer.closed() => "stopped: every reader is gone",
        () = sleep(work) => match completer.complete("the answer".to_string()) {
            Ok(()) => "answered",
            Err(_) => "lost the race to another completer",
        },
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    // The caller waits 50 ms for work that takes a minute. `timeout` drops the future
    // when it gives up: that is the last reader, so the worker's `closed()` resolves.
    let (completer, future) = promise::<String, ()>();
    let slow = tokio::spawn(worker(completer, Duration::from_secs(60)));
    match timeout(Duration::from_millis(50), future).await {
        Ok(outcome) => println!("caller: got {outcome:?}"),
        Err(_) => println!("caller: gave up after 50 ms"),
    }
    println!("slow worker: {}", slow.await.expect("the worker task ran"));

    // The same shapes, with a reply that comes in time.
    let (completer, future) = promise::<String, ()>();
    let fast = tokio::spawn(worker(completer, Duration::from_millis(5)));
    tokio::select! {
        outcome = future => println!("caller: got {outcome:?}"),
        () = sleep(Duration::from_secs(5)) => println!("caller: no answer in 5 s"),
    }
    println!("fast worker: {}", fast.await.expect("the worker task ran"));
}
