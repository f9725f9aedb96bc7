//! The harness's fault proxy: a TCP relay between one server and what it talks to (the
//! database, the gateway) that can cut the link. A cut closes every connection through
//! it at once and refuses new ones until the link is restored: both ends notice at once,
//! as after a peer's reset. A silent partition (packets dropped, connections hung until
//! a timeout) is not what it makes.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// The most connections one proxy relays at once; more are closed at once (a server's
/// database pool is 16, its gateway calls one per payment in flight).
const CONNECTIONS_MAX: usize = 256;

/// A running proxy: where it listens, and its links.
#[derive(Debug, Clone)]
pub(crate) struct Proxy {
    addr: SocketAddr,
    links: Arc<Mutex<Links>>,
}

/// The open links and whether the proxy is cut, under one lock.
///
/// RACE (a link opened during a cut): the accept thread registers a link while the fault
/// thread cuts. Both take this lock: the link is registered before the cut (and closed
/// by it) or refused after it; none survives a cut.
#[derive(Debug, Default)]
struct Links {
    cut: bool,
    next: u64,
    open: HashMap<u64, (TcpStream, TcpStream)>,
}

impl Proxy {
    /// Relays connections from a fresh loopback port to `upstream`, on threads of its own
    /// for as long as the harness runs.
    pub(crate) fn start(upstream: SocketAddr) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let proxy = Self { addr, links: Arc::default() };
        let relay = proxy.clone();
        std::thread::Builder::new()
            .name("proxy-accept".into())
            .spawn(move || relay.accept(&listener, upstream))?;
        Ok(proxy)
    }

    /// Where the proxy listens.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    fn links(&self) -> MutexGuard<'_, Links> {
        self.links.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Cuts the link: every connection through it is closed, and new ones are refused
    /// until [`restore`](Self::restore).
    pub(crate) fn cut(&self) {
        let mut links = self.links();
        links.cut = true;
        for (client, server) in links.open.values() {
            let _ = client.shutdown(Shutdown::Both);
            let _ = server.shutdown(Shutdown::Both);
        }
    }

    /// Restores the link.
    pub(crate) fn restore(&self) {
        self.links().cut = false;
    }

    /// Registers a link; its id, or `None` if the proxy is cut, full, or the sockets
    /// cannot be shared.
    fn register(&self, client: &TcpStream, server: &TcpStream) -> Option<u64> {
        let pair = (client.try_clone().ok()?, server.try_clone().ok()?);
        let mut links = self.links();
        if links.cut || links.open.len() >= CONNECTIONS_MAX {
            return None;
        }
        links.next += 1;
        let id = links.next;
        links.open.insert(id, pair);
        Some(id)
    }

    fn accept(&self, listener: &TcpListener, upstream: SocketAddr) {
        for client in listener.incoming().flatten() {
            let Ok(server) = TcpStream::connect_timeout(&upstream, Duration::from_secs(2)) else {
                let _ = client.shutdown(Shutdown::Both);
                continue;
            };
            let Some(id) = self.register(&client, &server) else {
                let _ = (client.shutdown(Shutdown::Both), server.shutdown(Shutdown::Both));
                continue;
            };
            let proxy = self.clone();
            let _ = std::thread::Builder::new().name("proxy-link".into()).spawn(move || {
                relay(client, server);
                proxy.links().open.remove(&id);
            });
        }
    }
}

/// Copies both ways until either side closes, then closes both.
fn relay(client: TcpStream, server: TcpStream) {
    let (Ok(client_in), Ok(server_in)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    let upward = std::thread::spawn(move || copy(client_in, server));
    copy(server_in, client);
    let _ = upward.join();
}

fn copy(mut from: TcpStream, mut to: TcpStream) {
    let mut buffer = [0u8; 16 * 1024];
    while let Ok(n @ 1..) = from.read(&mut buffer) {
        if to.write_all(&buffer[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Both);
    let _ = from.shutdown(Shutdown::Both);
}
