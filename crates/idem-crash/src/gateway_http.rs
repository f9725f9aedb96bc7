//! A payment gateway on the other side of a network, for the cluster harness and the
//! checkout example's `--gateway`: an HTTP/1.1 service that charges, writes every charge
//! to its file and syncs it before it answers, does not deduplicate (a second charge with
//! one key is a second charge: the check counts them), answers a lookup by key, and can be
//! told to misbehave as real gateways do.
//!
//! The wire, plain text so that a shell can drive it:
//!
//! - `POST /charge` with body `KEY AMOUNT_MINOR CURRENCY CUSTOMER`: 200 `ID` once the
//!   charge is synced; 402 `REASON` for a decline (an amount of 666 is declined, as a card
//!   is); 503 when told to fail before charging (nothing charged).
//! - `GET /lookup?key=KEY`: 200 `charged ID AMOUNT_MINOR CURRENCY CUSTOMER`, 404 `not
//!   charged`, or 409 `in progress` while a charge of that key is under way (it may
//!   still land: never "not charged" then).
//! - `POST /faults` with body `slow_ms=N fail_permille=N drop_permille=N`: from now on,
//!   each charge waits `slow_ms`, fails before charging with that probability, or charges
//!   and then closes the connection without answering with that probability (seeded).
//! - `GET /health`: 200.
//!
//! Every line of the file is `KEY AMOUNT_MINOR CURRENCY ID CUSTOMER`, as
//! [`FileGateway::charges`](crate::FileGateway::charges) reads it: a key without spaces, a
//! customer without line breaks (a request otherwise is refused, 400, so that no charge
//! can write another's line). A last line torn by a crash (never answered) is cut at
//! start. A write or sync that fails leaves the file in doubt: every later charge is
//! refused (503, nothing charged) and every lookup fails (500) until a restart. A request
//! head over 8 KiB is refused (431), a body over it too (413), a bad length (400).

use std::collections::{HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use idem_payments::{Amount, Charge, ChargeId, Currency};
use parking_lot::Mutex;

use crate::{ChargeRecord, FileGateway};

/// The most connections served at once; one more is closed at once.
pub const GATEWAY_CONNECTIONS_MAX: usize = 512;
/// The largest request head or body read, in bytes.
const REQUEST_BYTES_MAX: usize = 8 * 1024;
/// How long a connection may sit between requests, or take to send one.
const READ_TIMEOUT: Duration = Duration::from_secs(30);
/// The amount a card declines.
pub const DECLINED_MINOR: u64 = 666;

/// What the gateway is told to do to each charge.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Faults {
    /// Waits this long before charging.
    pub slow_ms: u64,
    /// In a thousand charges, how many fail before charging (503).
    pub fail_permille: u32,
    /// In a thousand charges, how many charge and then drop the answer.
    pub drop_permille: u32,
}

impl Faults {
    /// Reads `slow_ms=N fail_permille=N drop_permille=N` (any subset, any order).
    ///
    /// # Errors
    ///
    /// A word that is not one of the three with a number, or a permille over 1000.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut faults = Self::default();
        for word in text.split_whitespace() {
            let (name, value) = word.split_once('=').ok_or(format!("{word:?}: expected name=N"))?;
            let n: u64 = value.parse().map_err(|_| format!("{word:?}: not a number"))?;
            let permille = || u32::try_from(n).ok().filter(|p| *p <= 1000);
            match name {
                "slow_ms" => faults.slow_ms = n,
                "fail_permille" => faults.fail_permille = permille().ok_or("at most 1000")?,
                "drop_permille" => faults.drop_permille = permille().ok_or("at most 1000")?,
                other => {
                    return Err(format!(
                        "{other:?}: expected slow_ms, fail_permille or drop_permille"
                    ));
                }
            }
        }
        Ok(faults)
    }
}

/// The gateway's state: the file (appended and synced per charge) and its index by key.
#[derive(Debug)]
struct Book {
    file: File,
    by_key: HashMap<String, Charge>,
    /// Keys whose charge has begun and not ended: a lookup says "in progress", never "not
    /// charged", for them (a slow charge may still land).
    in_progress: HashSet<String>,
    charges: u64,
    faults: Faults,
    /// A write or sync of the file failed: what is on disk is in doubt, so every later
    /// charge is refused (nothing charged) and every lookup fails, until a restart
    /// repairs the file.
    failed: bool,
    /// A seeded generator for the faults' coin flips.
    seed: u64,
}

impl Book {
    fn flip(&mut self, permille: u32) -> bool {
        // xorshift64*: a seeded sequence, the same for the same seed and calls.
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 7;
        self.seed ^= self.seed << 17;
        (self.seed % 1000) < u64::from(permille)
    }
}

/// A running gateway: the address it listens on.
#[derive(Debug)]
pub struct GatewayServer {
    addr: std::net::SocketAddr,
}

impl GatewayServer {
    /// Opens (creating) the charge file at `path`, reads the charges already in it, binds
    /// `addr` and serves on threads of its own until the process ends. `seed` drives the
    /// faults' coin flips.
    ///
    /// # Errors
    ///
    /// The I/O error if the file cannot be opened or read, or `addr` cannot be bound.
    pub fn start(path: &Path, addr: &str, seed: u64) -> std::io::Result<Self> {
        repair_torn_tail(path)?;
        let mut by_key = HashMap::new();
        let existing = FileGateway::charges(path)?;
        let charges = existing.len() as u64;
        for record in existing {
            by_key.entry(record.key).or_insert(record.charge);
        }
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        let (in_progress, faults) = (HashSet::new(), Faults::default());
        let book =
            Book { file, by_key, in_progress, charges, faults, failed: false, seed: seed | 1 };
        let listener = TcpListener::bind(addr)?;
        let addr = listener.local_addr()?;
        let book = Arc::new(Mutex::new(book));
        std::thread::Builder::new()
            .name("gateway-accept".into())
            .spawn(move || accept(&listener, &book))?;
        Ok(Self { addr })
    }

    /// Where it listens.
    pub fn addr(&self) -> std::net::SocketAddr {
        self.addr
    }
}

/// Cuts a last line that does not end with a newline: a write torn by a crash, never
/// answered (the answer follows the sync). Without the cut, the next charge would be
/// appended to it and both lines read as one.
fn repair_torn_tail(path: &Path) -> std::io::Result<()> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    if bytes.last().is_none_or(|b| *b == b'\n') {
        return Ok(());
    }
    let whole = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |at| at + 1);
    let file = OpenOptions::new().write(true).open(path)?;
    file.set_len(whole as u64)?;
    file.sync_all()
}

fn accept(listener: &TcpListener, book: &Arc<Mutex<Book>>) {
    let open = Arc::new(AtomicUsize::new(0));
    for stream in listener.incoming().flatten() {
        // ORDERING: a count of threads, guarding nothing else.
        if open.fetch_add(1, Ordering::Relaxed) >= GATEWAY_CONNECTIONS_MAX {
            open.fetch_sub(1, Ordering::Relaxed);
            continue;
        }
        let (book, served) = (Arc::clone(book), Arc::clone(&open));
        let spawned = std::thread::Builder::new().name("gateway-conn".into()).spawn(move || {
            let _ = serve(stream, &book);
            served.fetch_sub(1, Ordering::Relaxed);
        });
        if spawned.is_err() {
            // No thread left: the connection is dropped, as a full server would, and its
            // place given back (the closure that would have is gone with it).
            // ORDERING: the same count of threads.
            open.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// One request as read: method, path with query, body.
struct Request {
    method: String,
    target: String,
    body: String,
    /// The client asked to close after the answer (`connection: close`).
    close: bool,
}

/// Serves requests on one connection until it closes, fails, sends a request it refuses
/// (answered, then closed), or a charge drops its answer.
fn serve(stream: TcpStream, book: &Mutex<Book>) -> std::io::Result<()> {
    stream.set_read_timeout(Some(READ_TIMEOUT))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut writer = stream;
    loop {
        let (answer, close) = match read_request(&mut reader)? {
            None => return Ok(()),
            Some(Err(refused)) => (Some(refused), true),
            Some(Ok(request)) => (answer(&request, book), request.close),
        };
        // None: charged, and told to drop the answer: the client never hears.
        let Some((status, body)) = answer else { return Ok(()) };
        let head = format!(
            "HTTP/1.1 {status}\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\r\n",
            body.len()
        );
        writer.write_all(head.as_bytes())?;
        writer.write_all(body.as_bytes())?;
        writer.flush()?;
        if close {
            return Ok(());
        }
    }
}

/// An answer: the status line's text and the body.
type Answer = (&'static str, String);

/// One line of the request's head, at most what is left of [`REQUEST_BYTES_MAX`].
fn head_line(reader: &mut BufReader<TcpStream>, left: &mut usize) -> std::io::Result<String> {
    let mut line = String::new();
    let read = reader.by_ref().take(*left as u64).read_line(&mut line)?;
    *left = left.saturating_sub(read);
    Ok(line)
}

/// The next request; `None` at the end of the connection; an answer for a request it
/// refuses (a head over the limit, a bad length, a body over the limit or not UTF-8).
fn read_request(
    reader: &mut BufReader<TcpStream>,
) -> std::io::Result<Option<Result<Request, Answer>>> {
    let mut left = REQUEST_BYTES_MAX;
    let line = head_line(reader, &mut left)?;
    if line.is_empty() {
        return Ok(None);
    }
    let too_long = || Ok(Some(Err(("431 Request Header Fields Too Large", "head".into()))));
    let mut words = line.split_whitespace();
    let (Some(method), Some(target), true) = (words.next(), words.next(), line.ends_with('\n'))
    else {
        return if left == 0 { too_long() } else { Ok(Some(Err(bad("request line")))) };
    };
    let (method, target) = (method.to_string(), target.to_string());
    let (mut length, mut close) = (0usize, false);
    loop {
        let header = head_line(reader, &mut left)?;
        if !header.ends_with('\n') {
            return if left == 0 { too_long() } else { Ok(None) };
        }
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        let Some((name, value)) = header.split_once(':') else { continue };
        if name.eq_ignore_ascii_case("content-length") {
            let Ok(n) = value.trim().parse() else { return Ok(Some(Err(bad("content-length")))) };
            length = n;
        } else if name.eq_ignore_ascii_case("connection") {
            close = value.trim().eq_ignore_ascii_case("close");
        }
    }
    if length > REQUEST_BYTES_MAX {
        return Ok(Some(Err(("413 Content Too Large", "body".into()))));
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    let Ok(body) = String::from_utf8(body) else { return Ok(Some(Err(bad("body")))) };
    Ok(Some(Ok(Request { method, target, body, close })))
}

fn bad(what: &str) -> Answer {
    ("400 Bad Request", format!("a bad {what}"))
}

/// The answer to `request`; `None` to drop the connection unanswered.
fn answer(request: &Request, book: &Mutex<Book>) -> Option<Answer> {
    match (request.method.as_str(), request.target.split_once('?')) {
        ("GET", None) if request.target == "/health" => Some(("200 OK", "ok".into())),
        ("POST", None) if request.target == "/charge" => charge(&request.body, book),
        ("POST", None) if request.target == "/faults" => match Faults::parse(&request.body) {
            Ok(faults) => {
                book.lock().faults = faults;
                Some(("200 OK", format!("{faults:?}")))
            }
            Err(why) => Some(("400 Bad Request", why)),
        },
        ("GET", Some(("/lookup", query))) => {
            let Some(key) = query.strip_prefix("key=") else { return Some(bad("query")) };
            Some(lookup(&book.lock(), key))
        }
        _ => Some(("404 Not Found", "no such route".into())),
    }
}

/// A lookup: the key's first charge, "not charged", or, while a charge of the key is
/// under way or the file is in doubt, neither (the client must not take it as not
/// charged).
fn lookup(book: &Book, key: &str) -> Answer {
    if book.failed {
        return ("500 Internal Server Error", "the charge log is in doubt".into());
    }
    match book.by_key.get(key) {
        Some(c) => {
            let (id, amount, currency) = (c.id.0, c.amount.minor(), c.currency.code());
            ("200 OK", format!("charged {id} {amount} {currency} {}", c.customer))
        }
        None if book.in_progress.contains(key) => ("409 Conflict", "in progress".into()),
        None => ("404 Not Found", "not charged".into()),
    }
}

/// A word of the wire: printable, no space (a key) or no line break (a customer).
fn plain(text: &str, spaces: bool) -> bool {
    !text.is_empty() && text.chars().all(|c| !c.is_control() && (spaces || c != ' '))
}

/// A charge: validated, then the faults, then the line appended and synced, then the
/// answer.
fn charge(body: &str, book: &Mutex<Book>) -> Option<Answer> {
    let parts: Vec<&str> = body.trim_end_matches(['\r', '\n']).splitn(4, ' ').collect();
    let [key, amount, currency, customer] = parts[..] else {
        return Some(("400 Bad Request", "KEY AMOUNT_MINOR CURRENCY CUSTOMER".into()));
    };
    let amount = amount.parse::<i64>().ok().and_then(|a| Amount::from_minor(a).ok());
    let (Some(amount), Ok(currency), true) =
        (amount, Currency::parse(currency), plain(key, false) && plain(customer, true))
    else {
        return Some(bad("charge: a key without spaces, an amount, a currency, a customer"));
    };
    if amount.minor() == DECLINED_MINOR {
        return Some(("402 Payment Required", "card declined".into()));
    }
    let slow = {
        let mut book = book.lock();
        if book.failed {
            return Some(("503 Service Unavailable", "the charge log is in doubt".into()));
        }
        book.in_progress.insert(key.to_string());
        book.faults.slow_ms
    };
    std::thread::sleep(Duration::from_millis(slow));
    let mut book = book.lock();
    book.in_progress.remove(key);
    let (fail, drop_it) = (book.faults.fail_permille, book.faults.drop_permille);
    if book.flip(fail) {
        return Some(("503 Service Unavailable", "failed before charging".into()));
    }
    let id = book.charges + 1;
    let line = ChargeRecord::line(key, amount.minor(), currency.code(), id, customer);
    if book.file.write_all(line.as_bytes()).and_then(|()| book.file.sync_data()).is_err() {
        // The line may or may not be on disk: the client is told neither, and no later
        // charge is appended after what may be half a line.
        book.failed = true;
        return None;
    }
    book.charges = id;
    let charge = Charge { id: ChargeId(id), customer: customer.to_string(), amount, currency };
    book.by_key.entry(key.to_string()).or_insert(charge);
    if book.flip(drop_it) {
        return None;
    }
    Some(("200 OK", id.to_string()))
}
