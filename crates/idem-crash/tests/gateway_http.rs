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
