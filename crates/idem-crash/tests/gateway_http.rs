//! The harness's gateway over its wire: it charges and syncs before it answers, does not
//! deduplicate, answers lookups (across a restart, from its file), declines, refuses bad
//! requests, and fails or drops answers when told to.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};

use idem_crash::{FileGateway, GatewayServer};

/// One request on a new connection; the status code and body, or `None` if the gateway
/// closed the connection without answering.
fn call(addr: SocketAddr, method: &str, target: &str, body: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect(addr).expect("the gateway listens");
    let request = format!(
        "{method} {target} HTTP/1.1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).expect("sent");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("read");
    let status = answer.split_whitespace().nth(1)?.parse().ok()?;
    let body = answer.split_once("\r\n\r\n").map(|(_, b)| b.to_string())?;
    Some((status, body))
}

#[test]
fn it_charges_every_time_and_answers_lookups_across_a_restart() {
    let file = idem_testkit::scratch_dir("gateway-http").join("charges.log");
    let gateway = GatewayServer::start(&file, "127.0.0.1:0", 1).expect("gateway");
    let addr = gateway.addr();
    assert_eq!(call(addr, "GET", "/health", ""), Some((200, "ok".into())));
    assert_eq!(call(addr, "GET", "/lookup?key=k1", ""), Some((404, "not charged".into())));
    assert_eq!(call(addr, "POST", "/charge", "k1 1050 EUR cus 1"), Some((200, "1".into())));
    assert_eq!(call(addr, "POST", "/charge", "k1 1050 EUR cus 1"), Some((200, "2".into())));
    let declined =
        call(addr, "POST", "/charge", &format!("k2 {} EUR c", idem_crash::DECLINED_MINOR));
    assert_eq!(declined.map(|(s, _)| s), Some(402));
    for bad in ["k3 ten EUR c", "k3 10 XXX c", "k3 10"] {
        assert_eq!(call(addr, "POST", "/charge", bad).map(|(s, _)| s), Some(400), "{bad}");
    }
    let records = FileGateway::charges(&file).expect("the file");
    assert_eq!(records.len(), 2, "not deduplicated, and nothing else charged: {records:?}");
    assert_eq!(records[0].charge.customer, "cus 1");
    let restarted = GatewayServer::start(&file, "127.0.0.1:0", 1).expect("restarted");
    let found = call(restarted.addr(), "GET", "/lookup?key=k1", "");
    assert_eq!(found, Some((200, "charged 1 1050 EUR cus 1".into())));
    assert_eq!(call(restarted.addr(), "POST", "/charge", "k4 5 EUR c"), Some((200, "3".into())));
}

#[test]
fn told_to_it_fails_before_charging_or_drops_the_answer_after() {
    let file = idem_testkit::scratch_dir("gateway-faults").join("charges.log");
    let addr = GatewayServer::start(&file, "127.0.0.1:0", 1).expect("gateway").addr();
    let refused = call(addr, "POST", "/faults", "fail_permille=1001");
    assert_eq!(refused.map(|(s, _)| s), Some(400));
    assert_eq!(
        call(addr, "POST", "/faults", "slow_ms=1 fail_permille=1000").map(|a| a.0),
        Some(200)
    );
    assert_eq!(call(addr, "POST", "/charge", "k1 10 EUR c").map(|(s, _)| s), Some(503));
    assert!(FileGateway::charges(&file).expect("the file").is_empty(), "failed before charging");
    assert_eq!(call(addr, "POST", "/faults", "drop_permille=1000").map(|a| a.0), Some(200));
    assert_eq!(call(addr, "POST", "/charge", "k1 10 EUR c"), None, "the answer dropped");
    assert_eq!(FileGateway::charges(&file).expect("the file").len(), 1, "but charged");
    assert_eq!(call(addr, "GET", "/lookup?key=k1", "").map(|(s, _)| s), Some(200));
}

/// Sends `raw` bytes as they are; the status code answered, if any.
fn raw_status(addr: SocketAddr, raw: &[u8]) -> Option<u16> {
    let mut stream = TcpStream::connect(addr).expect("the gateway listens");
    stream.write_all(raw).expect("sent");
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer.split_whitespace().nth(1)?.parse().ok()
}

#[test]
fn a_request_it_cannot_take_is_answered_and_charges_nothing() {
    let file = idem_testkit::scratch_dir("gateway-refusals").join("charges.log");
    let addr = GatewayServer::start(&file, "127.0.0.1:0", 1).expect("gateway").addr();
    // A customer with a line break would write a second, forged line into the log.
    let forged = "k1 10 EUR alice\nk9 500000 EUR 77 mallory";
    assert_eq!(call(addr, "POST", "/charge", forged).map(|(s, _)| s), Some(400));
    assert_eq!(call(addr, "POST", "/charge", "k 1 10 EUR c").map(|(s, _)| s), Some(400));
    let head = format!("GET /health HTTP/1.1\r\nx: {}\r\n\r\n", "a".repeat(9_000));
    assert_eq!(raw_status(addr, head.as_bytes()), Some(431));
    let endless = format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(9_000));
    assert_eq!(raw_status(addr, endless.as_bytes()), Some(431));
    let big = b"POST /charge HTTP/1.1\r\ncontent-length: 9000\r\n\r\n";
    assert_eq!(raw_status(addr, big), Some(413));
    let length = b"POST /charge HTTP/1.1\r\ncontent-length: ten\r\n\r\n";
    assert_eq!(raw_status(addr, length), Some(400));
    assert!(FileGateway::charges(&file).expect("the file").is_empty(), "nothing charged");
    assert_eq!(call(addr, "GET", "/lookup?key=k9", ""), Some((404, "not charged".into())));
}

#[test]
fn a_torn_last_line_is_cut_at_start_and_never_swallows_a_charge() {
    let file = idem_testkit::scratch_dir("gateway-torn").join("charges.log");
    std::fs::write(&file, "k0 100 EUR 1 c\nkx 100 EU").expect("a torn file");
    let addr = GatewayServer::start(&file, "127.0.0.1:0", 1).expect("gateway").addr();
    assert_eq!(call(addr, "POST", "/charge", "k1 5 EUR c"), Some((200, "2".into())));
    let restarted = GatewayServer::start(&file, "127.0.0.1:0", 1).expect("restarted").addr();
    assert_eq!(
        call(restarted, "GET", "/lookup?key=k1", ""),
        Some((200, "charged 2 5 EUR c".into()))
    );
    assert_eq!(call(restarted, "GET", "/lookup?key=kx", "").map(|(s, _)| s), Some(404));
}

#[test]
fn while_a_charge_is_under_way_its_lookup_says_so_never_not_charged() {
    let file = idem_testkit::scratch_dir("gateway-in-progress").join("charges.log");
    let addr = GatewayServer::start(&file, "127.0.0.1:0", 1).expect("gateway").addr();
    assert_eq!(call(addr, "POST", "/faults", "slow_ms=400").map(|a| a.0), Some(200));
    let charging = std::thread::spawn(move || call(addr, "POST", "/charge", "k1 10 EUR c"));
    idem_testkit::wait_until(
        "the charge to be under way",
        std::time::Duration::from_secs(5),
        || call(addr, "GET", "/lookup?key=k1", "") == Some((409, "in progress".into())),
    );
    assert_eq!(charging.join().expect("the charge"), Some((200, "1".into())));
    assert_eq!(call(addr, "GET", "/lookup?key=k1", "").map(|(s, _)| s), Some(200));
}
