//! The harness's clients: each intent is one payment with its own key, sent through the
//! load balancer and retried on a timeout, a connection error, a 5xx and a 409 (honouring
//! `Retry-After`) until it is answered or its deadline passes. Some intents are sent
//! twice at once (a double click), and some once more after their answer (a reload): the
//! check then holds every answer of one intent to one charge.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::Lcg;
use super::http;

/// How long one attempt waits for its answer before the client gives up on it.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest pause between two attempts of one intent (and the cap on a `Retry-After`).
const PAUSE_MAX: Duration = Duration::from_secs(2);

/// One intended payment.
#[derive(Debug, Clone)]
pub(crate) struct Intent {
    pub(crate) key: String,
    pub(crate) customer: String,
    pub(crate) amount_minor: u64,
}

/// The intents of a run of `seed`: keys and customers unique per intent, so the gateway's
/// log names the intent of every charge.
pub(crate) fn intents(seed: u64, count: usize) -> Vec<Intent> {
    let mut lcg = Lcg::new(seed ^ 0x1de3);
    (0..count)
        .map(|n| {
            let mut amount_minor = 100 + lcg.below(9_900);
            if amount_minor == DECLINED_MINOR {
                amount_minor += 1;
            }
            Intent { key: format!("i{seed}-{n}"), customer: format!("cus{n}"), amount_minor }
        })
        .collect()
}

/// The amount the harness's gateway declines (`idem_crash::DECLINED_MINOR`): never an
/// intent's.
const DECLINED_MINOR: u64 = 666;

/// What the clients saw of each intent: every successful answer's charge id, and how long
/// until the first.
#[derive(Debug, Default)]
pub(crate) struct Seen {
    pub(crate) charges: Vec<Vec<String>>,
    pub(crate) first_answer: Vec<Option<Duration>>,
    /// Answers that were final but not a success (a 4xx): each a bug, named.
    pub(crate) refused: Vec<String>,
}

/// The counts the summary prints.
#[derive(Debug, Default)]
pub(crate) struct Counts {
    pub(crate) requests: AtomicU64,
}

/// How a batch of intents is sent.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Drive {
    /// Client threads.
    pub(crate) clients: usize,
    /// No attempt starts after this.
    pub(crate) deadline: Instant,
    /// Some intents sent twice at once, some once more after their answer.
    pub(crate) double: bool,
    /// The n-th intent of the batch starts no earlier than `start + n * every`.
    pub(crate) pace: Option<(Instant, Duration)>,
}

/// Sends every intent whose index `todo` yields, as `how` says, each retried until answered
/// or the deadline.
pub(crate) fn drive(
    front: SocketAddr,
    intents: &Arc<Vec<Intent>>,
    todo: Vec<usize>,
    how: Drive,
    seen: &Arc<Mutex<Seen>>,
    counts: &Arc<Counts>,
) {
    let Drive { clients, deadline, double, pace } = how;
    let next = Arc::new(AtomicUsize::new(0));
    let todo = Arc::new(todo);
    let threads: Vec<_> = (0..clients)
        .map(|client| {
            let (intents, todo, next) = (intents.clone(), todo.clone(), next.clone());
            let (seen, counts) = (seen.clone(), counts.clone());
            std::thread::spawn(move || {
                let mut lcg = Lcg::new(0x5eed ^ client as u64);
                // ORDERING: a work counter; each index is handed out once.
                loop {
                    let nth = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&index) = todo.get(nth) else { break };
                    if let Some((start, every)) = pace {
                        let due = start + every * u32::try_from(nth).unwrap_or(u32::MAX);
                        std::thread::sleep(due.saturating_duration_since(Instant::now()));
                    }
                    let sends = if double { 1 + u64::from(lcg.below(10) == 0) } else { 1 };
                    let started = Instant::now();
                    for answer in pay_many(front, &intents[index], sends, deadline, &counts) {
                        record(&seen, index, answer, started);
                    }
                    if double && lcg.below(4) == 0 {
                        let again = pay(front, &intents[index], deadline, &counts, &mut lcg);
                        record(&seen, index, again, started);
                    }
                }
            })
        })
        .collect();
    for thread in threads {
        let _ = thread.join();
    }
}

fn record(seen: &Mutex<Seen>, index: usize, answer: Answer, started: Instant) {
    let mut seen = seen.lock().unwrap_or_else(PoisonError::into_inner);
    match answer {
        Answer::Charged(id) => {
            seen.charges[index].push(id);
            seen.first_answer[index].get_or_insert(started.elapsed());
        }
        Answer::Refused(why) => seen.refused.push(format!("intent {index}: {why}")),
        Answer::Unanswered => {}
    }
}

/// What the clients got for an intent in the end.
#[derive(Debug)]
enum Answer {
    Charged(String),
    Refused(String),
    Unanswered,
}

/// `sends` attempts of one intent at once (a double click), each retried; every answer,
/// so that the check holds each of them to the intent's one charge.
fn pay_many(
    front: SocketAddr,
    intent: &Intent,
    sends: u64,
    deadline: Instant,
    counts: &Arc<Counts>,
) -> Vec<Answer> {
    let twins: Vec<_> = (1..sends)
        .map(|twin| {
            let (intent, counts) = (intent.clone(), counts.clone());
            std::thread::spawn(move || pay(front, &intent, deadline, &counts, &mut Lcg::new(twin)))
        })
        .collect();
    let mut answers =
        vec![pay(front, intent, deadline, counts, &mut Lcg::new(intent.amount_minor))];
    for twin in twins {
        answers.push(twin.join().unwrap_or_else(|_| Answer::Refused("a client panicked".into())));
    }
    answers
}

/// One intent, retried until it is answered or `deadline`.
fn pay(
    front: SocketAddr,
    intent: &Intent,
    deadline: Instant,
    counts: &Counts,
    lcg: &mut Lcg,
) -> Answer {
    let body = format!("customer={}&amount={}&currency=EUR", intent.customer, intent.amount_minor);
    let headers = [
        ("idempotency-key", intent.key.as_str()),
        ("content-type", "application/x-www-form-urlencoded"),
    ];
    let mut pause = Duration::from_millis(50);
    while Instant::now() < deadline {
        // ORDERING: a counter, read once at the end.
        counts.requests.fetch_add(1, Ordering::Relaxed);
        let reply = http::call(front, ("POST", "/checkout"), &headers, &body, ATTEMPT_TIMEOUT);
        let wait = match reply {
            Ok(reply) if (200..300).contains(&reply.status) => {
                return match charge_id(&reply.body) {
                    Some(id) => Answer::Charged(id),
                    None => Answer::Refused(format!(
                        "{} without a charge: {}",
                        reply.status, reply.body
                    )),
                };
            }
            Ok(reply) if reply.status == 409 || reply.status >= 500 => {
                reply.retry_after.map(Duration::from_secs)
            }
            Ok(reply) => return Answer::Refused(format!("{}: {}", reply.status, reply.body)),
            Err(_) => None,
        };
        let jitter = Duration::from_millis(lcg.below(50));
        std::thread::sleep(wait.unwrap_or(pause).min(PAUSE_MAX) + jitter);
        pause = (pause * 2).min(PAUSE_MAX);
    }
    Answer::Unanswered
}

/// The charge an answer names (`"charge":"ch_N"`).
fn charge_id(body: &str) -> Option<String> {
    let rest = body.split_once("\"charge\":\"")?.1;
    Some(rest.split_once('"')?.0.to_string())
}
