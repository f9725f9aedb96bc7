//! A request hedged to two replicas: whichever answers first completes the promise; the
//! slower replica is told it lost and gets its reply back, so it can log or discard it.
//! A timeout races them both and cancels if neither answers in time.

use std::thread;
use std::time::Duration;

use idem_future::{Error, promise};

fn main() {
    let (completer, reply) = promise::<String, String>();
    reply.on_complete(|how| println!("callback: the request finished as {how:?}, once"));

    let replicas: Vec<_> = [("replica-a", 30), ("replica-b", 10)]
        .into_iter()
        .map(|(name, delay_ms)| {
            let completer = completer.clone();
            thread::spawn(move || {
                thread::sleep(Duration::from_millis(delay_ms));
                match completer.complete(format!("answer from {name}")) {
                    Ok(()) => println!("{name}: won"),
                    Err(late) => println!("{name}: lost, kept its reply: {late:?}"),
                }
            })
        })
        .collect();
    let timeout = {
        let completer = completer.clone();
        thread::spawn(move || {
            thread::sleep(Duration::from_secs(2));
            if completer.cancel() {
                println!("timeout: cancelled the request");
            }
        })
    };
    drop(completer);

    match reply.wait() {
        Ok(answer) => println!("caller: {answer}"),
        Err(Error::Cancelled) => println!("caller: timed out"),
        Err(other) => println!("caller: {other}"),
    }
    for handle in replicas.into_iter().chain([timeout]) {
        handle.join().expect("thread");
    }
}
