//! A real HTTP/1 client of the checkout example, shared by the tests that drive it over
//! sockets.

use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;

/// One `POST /checkout` for order 1 with `key`, on a new connection: its status, replay
/// flag and body, or the connection's failure.
pub(crate) async fn post(addr: SocketAddr, key: &str) -> Result<(u16, bool, String), hyper::Error> {
    post_order(addr, key, "customer=cus_1&amount=1050&currency=EUR").await
}

/// As [`post`], with the order `body` (`customer=..&amount=..&currency=..`).
#[allow(dead_code, reason = "not every test binary that shares the client sends its own")]
pub(crate) async fn post_order(
    addr: SocketAddr,
    key: &str,
    body: &'static str,
) -> Result<(u16, bool, String), hyper::Error> {
    let stream = tokio::net::TcpStream::connect(addr).await.expect("the server listens");
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    let request = http::Request::post("/checkout")
        .header("host", addr.to_string())
        .header("idempotency-key", format!("\"{key}\""))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(Full::new(Bytes::from_static(body.as_bytes())))
        .expect("a valid request");
    let response = sender.send_request(request).await?;
    let status = response.status().as_u16();
    let replayed = response.headers().get("idempotent-replayed").is_some_and(|v| v == "true");
    let body = response.into_body().collect().await?.to_bytes();
    Ok((status, replayed, String::from_utf8_lossy(&body).into_owned()))
}
