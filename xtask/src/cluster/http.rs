//! The harness's HTTP/1.1 client: one request per connection (`connection: close`), every
//! wait bounded. Its clients, its readiness checks and its gateway control all use it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// The largest answer read.
const ANSWER_BYTES_MAX: usize = 64 * 1024;

/// An answer: its status, its `Retry-After` in seconds (if any), its body.
#[derive(Debug, Clone)]
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) retry_after: Option<u64>,
    pub(crate) body: String,
}

/// Sends `method target` with `headers` and `body` to `addr`, waiting at most `timeout`
/// to connect and as long again for each read.
pub(crate) fn call(
    addr: SocketAddr,
    (method, target): (&str, &str),
    headers: &[(&str, &str)],
    body: &str,
    timeout: Duration,
) -> std::io::Result<Reply> {
    let mut stream = TcpStream::connect_timeout(&addr, timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    let mut request =
        format!("{method} {target} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str(&format!("content-length: {}\r\n\r\n{body}", body.len()));
    stream.write_all(request.as_bytes())?;
    read_reply(&mut BufReader::new(stream))
}

fn read_reply(reader: &mut impl BufRead) -> std::io::Result<Reply> {
    let bad = |what: &str| std::io::Error::other(format!("a malformed answer: {what}"));
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let status =
        line.split_whitespace().nth(1).and_then(|s| s.parse().ok()).ok_or(bad("status"))?;
    let (mut length, mut retry_after) = (None, None);
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header)? == 0 {
            return Err(bad("cut in its head"));
        }
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        let Some((name, value)) = header.split_once(':') else { continue };
        if name.eq_ignore_ascii_case("content-length") {
            length = value.trim().parse::<usize>().ok();
        } else if name.eq_ignore_ascii_case("retry-after") {
            retry_after = value.trim().parse().ok();
        }
    }
    let mut body = Vec::new();
    match length {
        Some(n) if n <= ANSWER_BYTES_MAX => {
            body.resize(n, 0);
            reader.read_exact(&mut body)?;
        }
        Some(_) => return Err(bad("too long")),
        None => {
            reader.take(ANSWER_BYTES_MAX as u64).read_to_end(&mut body)?;
        }
    }
    Ok(Reply { status, retry_after, body: String::from_utf8_lossy(&body).into_owned() })
}
