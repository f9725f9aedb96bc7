//! The harness's processes: the gateway, the checkout servers (each behind its own fault
//! proxies to the database and the gateway) and haproxy in front. Every process it starts
//! it also stops: dropping [`Processes`] kills what is still running (on success, on
//! failure, and when a panic unwinds); Ctrl-C reaches them too, as they share the
//! harness's process group.

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::http;
use super::proxy::Proxy;
use crate::Result;

/// How long a process may take to serve after it starts.
const START_WAIT_MAX: Duration = Duration::from_secs(60);

/// What the servers are started with.
#[derive(Debug, Clone)]
pub(crate) struct ServerSpec {
    pub(crate) binary: PathBuf,
    /// The store's server every server shares (through its own proxy).
    pub(crate) database: SocketAddr,
    /// Which store that is.
    pub(crate) store: super::StoreKind,
    /// `--naive`: the servers without the layer (the break the check must see).
    pub(crate) naive: bool,
    /// The store's lease, in milliseconds.
    pub(crate) lease_ms: u64,
}

/// One checkout server: its port (kept across restarts) and its links.
#[derive(Debug)]
pub(crate) struct Server {
    pub(crate) port: u16,
    pub(crate) child: Option<Child>,
    pub(crate) database: Proxy,
    pub(crate) gateway: Proxy,
    log: PathBuf,
}

/// Every process of one run.
#[derive(Debug)]
pub(crate) struct Processes {
    pub(crate) gateway: SocketAddr,
    gateway_child: Child,
    pub(crate) servers: Vec<Server>,
    pub(crate) front: SocketAddr,
    haproxy: Option<Child>,
    spec: ServerSpec,
}

impl Drop for Processes {
    fn drop(&mut self) {
        let children = self.servers.iter_mut().filter_map(|s| s.child.as_mut());
        for child in children.chain(self.haproxy.as_mut()).chain([&mut self.gateway_child]) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A free loopback port (bound, read, released: nothing else on this machine takes it in
/// the moment between).
pub(crate) fn free_port() -> Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("a free port: {e}"))?;
    Ok(listener.local_addr().map_err(|e| format!("a free port: {e}"))?.port())
}

/// Starts the gateway (charges in `dir/charges.log`), then each server, then haproxy.
pub(crate) fn start(
    dir: &Path,
    gateway_binary: &Path,
    spec: ServerSpec,
    count: usize,
    seed: u64,
) -> Result<Processes> {
    let (gateway_child, gateway) = start_gateway(gateway_binary, dir, seed)?;
    let mut processes = Processes {
        gateway,
        gateway_child,
        servers: Vec::new(),
        front: SocketAddr::from(([127, 0, 0, 1], free_port()?)),
        haproxy: None,
        spec,
    };
    for index in 0..count {
        let database = Proxy::start(processes.spec.database).map_err(|e| format!("proxy: {e}"))?;
        let gateway = Proxy::start(processes.gateway).map_err(|e| format!("proxy: {e}"))?;
        let log = dir.join(format!("server-{index}.log"));
        let port = free_port()?;
        processes.servers.push(Server { port, child: None, database, gateway, log });
        // One at a time: each creates the shop's tables if absent, which is not safe
        // against itself.
        processes.restart(index)?;
    }
    processes.haproxy = Some(start_haproxy(dir, processes.front, &processes.servers)?);
    wait_serving(processes.front, "haproxy")?;
    Ok(processes)
}

fn start_gateway(binary: &Path, dir: &Path, seed: u64) -> Result<(Child, SocketAddr)> {
    let mut child = Command::new(binary)
        .args(["--file", &dir.join("charges.log").display().to_string()])
        .args(["--addr", "127.0.0.1:0", "--seed", &seed.to_string()])
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("starting {}: {e}", binary.display()))?;
    let mut line = String::new();
    let stdout = child.stdout.take().ok_or("the gateway's output")?;
    BufReader::new(stdout).read_line(&mut line).map_err(|e| format!("the gateway: {e}"))?;
    let addr = line.trim().strip_prefix("listening on ").and_then(|a| a.parse().ok());
    let addr = addr.ok_or_else(|| format!("the gateway said {line:?}"))?;
    Ok((child, addr))
}

impl Processes {
    /// Starts server `index` (again) on its port, and waits until it serves.
    pub(crate) fn restart(&mut self, index: usize) -> Result {
        let spec = self.spec.clone();
        let server = &mut self.servers[index];
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&server.log)
            .map_err(|e| format!("{}: {e}", server.log.display()))?;
        let err = log.try_clone().map_err(|e| format!("{}: {e}", server.log.display()))?;
        let mut command = Command::new(&spec.binary);
        command.env("IDEM_HTTP_ADDR", format!("127.0.0.1:{}", server.port));
        command.stdout(log).stderr(err);
        if spec.naive {
            command.arg("--naive");
        } else {
            let db = server.database.addr();
            let store = match spec.store {
                super::StoreKind::Postgres => format!("postgres:postgres://idem:idem@{db}/idem"),
                super::StoreKind::Redis => format!("redis:redis://{db}"),
            };
            command.args(["--store", &store]);
            command.args(["--lease-ms", &spec.lease_ms.to_string()]);
        }
        command.args(["--gateway", &format!("http://{}", server.gateway.addr())]);
        let child = command.spawn().map_err(|e| format!("starting server {index}: {e}"))?;
        server.child = Some(child);
        wait_serving(SocketAddr::from(([127, 0, 0, 1], server.port)), "a checkout server")
    }

    /// Kills server `index` at once (SIGKILL): whatever it was doing is cut mid-way. A
    /// server found already gone (it crashed on its own) is an error: the run must not
    /// count as a fault what the deployment did by itself.
    pub(crate) fn kill(&mut self, index: usize) -> Result {
        let Some(mut child) = self.servers[index].child.take() else {
            return Err(format!("server {index} was not running"));
        };
        if let Ok(Some(status)) = child.try_wait() {
            let log = self.servers[index].log.display();
            return Err(format!("server {index} had exited on its own ({status}); see {log}"));
        }
        child.kill().map_err(|e| format!("killing server {index}: {e}"))?;
        let _ = child.wait();
        Ok(())
    }
}

/// Waits until `addr` answers `GET /` with 200.
fn wait_serving(addr: SocketAddr, what: &str) -> Result {
    let started = Instant::now();
    while started.elapsed() < START_WAIT_MAX {
        let answer = http::call(addr, ("GET", "/"), &[], "", Duration::from_secs(1));
        if answer.is_ok_and(|reply| reply.status == 200) {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(format!("{what} on {addr} did not serve within {START_WAIT_MAX:?}"))
}

/// haproxy as users run it: health checks on `GET /`, and its own retry of a request on
/// another server when the connection fails or the server closes it without an answer
/// (one more source of duplicates: a request a killed server had received is sent again).
fn start_haproxy(dir: &Path, front: SocketAddr, servers: &[Server]) -> Result<Child> {
    let binary = crate::script_output(".ci/haproxy.sh")?;
    let mut config = format!(
        "global\n  maxconn 2048\n\
         defaults\n  mode http\n  timeout connect 1s\n  timeout client 30s\n\
         \x20 timeout server 30s\n  retries 2\n  option redispatch\n\
         \x20 option http-buffer-request\n  retry-on conn-failure empty-response\n\
         frontend shop\n  bind {front}\n  default_backend checkout\n\
         backend checkout\n  balance roundrobin\n  option httpchk GET /\n"
    );
    for (index, server) in servers.iter().enumerate() {
        let port = server.port;
        config.push_str(&format!(
            "  server s{index} 127.0.0.1:{port} check inter 300ms fall 2 rise 1\n"
        ));
    }
    let path = dir.join("haproxy.cfg");
    std::fs::write(&path, config).map_err(|e| format!("{}: {e}", path.display()))?;
    let log = std::fs::File::create(dir.join("haproxy.log")).map_err(|e| format!("log: {e}"))?;
    Command::new(binary.trim())
        .args(["-db", "-f", &path.display().to_string()])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .map_err(|e| format!("starting haproxy: {e}"))
}
