//! `--gateway http://HOST:PORT`: the checkout's payments sent to a gateway on the other
//! side of a network (the cluster harness's `gateway_server`, whose wire is plain text
//! over HTTP/1.1), one connection per call, with bounded waits.
//!
//! What a failure means decides what the checkout may do next: a connection the gateway
//! never accepted charged nothing (the key is released, a retry runs again); a request
//! sent and not answered (a timeout, a dropped connection) may have charged, so it is an
//! unknown outcome, and the retry after the lease looks the key up before it charges.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

use idem_payments::{
    Charge, ChargeId, Currency, Gateway, GatewayError, GatewayKey, Lookup, PaymentRequest,
};

/// How long a connection to the gateway may take to open.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a gateway may take to answer once asked, in all (a slow gateway is slower
/// than this only when it is broken; the answer is then unknown).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest answer read from the gateway.
const ANSWER_BYTES_MAX: usize = 4096;

/// A gateway reached over the network.
#[derive(Debug, Clone)]
pub(crate) struct RemoteGateway {
    addr: SocketAddr,
}

impl RemoteGateway {
    /// The gateway at `url` (`http://HOST:PORT`, no path).
    pub(crate) fn parse(url: &str) -> Result<Self, String> {
        let hostport = url
            .strip_prefix("http://")
            .filter(|h| !h.is_empty() && !h.contains('/'))
            .ok_or(format!("--gateway {url:?}: expected http://HOST:PORT"))?;
        let addr = hostport
            .to_socket_addrs()
            .map_err(|e| format!("--gateway {url:?}: {e}"))?
            .next()
            .ok_or(format!("--gateway {url:?}: the name has no address"))?;
        Ok(Self { addr })
    }

    /// One request and its answer (status code, body). `Err(true)`: the connection was
    /// never made, or `unwanted` said so once it was open, and nothing was sent;
    /// `Err(false)`: sent, and no answer came.
    fn call(&self, request: &str, unwanted: impl Fn() -> bool) -> Result<(u16, String), bool> {
        let mut stream =
            TcpStream::connect_timeout(&self.addr, CONNECT_TIMEOUT).map_err(|_| true)?;
        if unwanted() {
            return Err(true);
        }
        let deadline = std::time::Instant::now() + ANSWER_TIMEOUT;
        let mut exchange = || -> std::io::Result<(u16, String)> {
            stream.set_write_timeout(Some(ANSWER_TIMEOUT))?;
            stream.write_all(request.as_bytes())?;
            let mut reader = BufReader::new(Deadlined { stream: &stream, deadline }.take(LIMIT));
            read_answer(&mut reader)
        };
        exchange().map_err(|_| false)
    }
}

/// The most bytes read of one answer, head and body.
const LIMIT: u64 = 2 * ANSWER_BYTES_MAX as u64;

/// A stream whose every read waits only for what is left until `deadline`: a gateway
/// that trickles its answer a byte at a time is still cut off at the deadline.
struct Deadlined<'a> {
    stream: &'a TcpStream,
    deadline: std::time::Instant,
}

impl Read for Deadlined<'_> {
    fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        let left = self.deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(std::io::ErrorKind::TimedOut.into());
        }
        self.stream.set_read_timeout(Some(left))?;
        (&*self.stream).read(buffer)
    }
}

fn read_answer(reader: &mut impl BufRead) -> std::io::Result<(u16, String)> {
    let bad = |what: &str| std::io::Error::other(format!("a malformed answer: {what}"));
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let status: u16 =
        line.split_whitespace().nth(1).and_then(|s| s.parse().ok()).ok_or(bad("status"))?;
    let mut length = None;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header)? == 0 {
            return Err(bad("cut in its head"));
        }
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse::<usize>().ok();
        }
    }
    let length = length.filter(|n| *n <= ANSWER_BYTES_MAX).ok_or(bad("length"))?;
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    Ok((status, String::from_utf8(body).map_err(|_| bad("not UTF-8"))?))
}

fn request(method: &str, target: &str, body: &str) -> String {
    format!(
        "{method} {target} HTTP/1.1\r\nhost: gateway\r\nconnection: close\r\n\
         content-length: {}\r\n\r\n{body}",
        body.len()
    )
}

impl RemoteGateway {
    /// [`Gateway::charge`], unless `unwanted` says so once the connection is open (a
    /// connect takes up to [`CONNECT_TIMEOUT`]): then nothing is sent, and the answer is
    /// `Refused`.
    pub(crate) fn charge_unless(
        &self,
        key: &GatewayKey,
        order: &PaymentRequest,
        unwanted: impl Fn() -> bool,
    ) -> Result<Charge, GatewayError> {
        let (amount, currency, customer) = (order.amount(), order.currency(), order.customer());
        let body = format!("{key} {} {} {customer}", amount.minor(), currency.code());
        match self.call(&request("POST", "/charge", &body), unwanted) {
            Ok((200, id)) => match id.trim().parse::<u64>() {
                Ok(id) => {
                    Ok(Charge { id: ChargeId(id), customer: customer.into(), amount, currency })
                }
                Err(_) => Err(GatewayError::Ambiguous(format!("a charge id {id:?}"))),
            },
            Ok((402, reason)) => Err(GatewayError::Declined(reason)),
            Ok((503, why)) => Err(GatewayError::Refused(why)),
            Ok((status, body)) => Err(GatewayError::Ambiguous(format!("{status} {body}"))),
            Err(true) => Err(GatewayError::Refused("the gateway is unreachable".into())),
            Err(false) => Err(GatewayError::Ambiguous("sent, and no answer came".into())),
        }
    }
}

impl Gateway for RemoteGateway {
    fn charge(&self, key: &GatewayKey, order: &PaymentRequest) -> Result<Charge, GatewayError> {
        self.charge_unless(key, order, || false)
    }

    fn lookup(&self, key: &GatewayKey) -> Lookup {
        match self.call(&request("GET", &format!("/lookup?key={key}"), ""), || false) {
            Ok((200, found)) => charged(&found).map_or(Lookup::Unknown, Lookup::Charged),
            Ok((404, _)) => Lookup::NotCharged,
            _ => Lookup::Unknown,
        }
    }

    fn set_refunded(&self, _charge: ChargeId) -> bool {
        false
    }
}

/// `charged ID AMOUNT_MINOR CURRENCY CUSTOMER`, as the gateway's lookup answers.
fn charged(text: &str) -> Option<Charge> {
    let parts: Vec<&str> = text.trim().splitn(5, ' ').collect();
    let ["charged", id, amount, currency, customer] = parts[..] else { return None };
    let amount = idem_payments::Amount::from_minor(amount.parse().ok()?).ok()?;
    let currency = Currency::parse(currency).ok()?;
    Some(Charge { id: ChargeId(id.parse().ok()?), customer: customer.into(), amount, currency })
}
