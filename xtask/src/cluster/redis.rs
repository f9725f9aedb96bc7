//! `--store redis`: the Redis server the harness starts for a run (an append-only file
//! synced on every write, no eviction: what the Redis store requires), the command that
//! restarts it as the database-restart fault does (`-m fast`: `SHUTDOWN`, its clean stop;
//! `-m immediate`: `SIGKILL`), and the check of what it holds once the run is over.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::check::Verdict;
use super::procs::free_port;
use crate::Result;

/// How long the server may take to answer after it starts.
const START_WAIT_MAX: Duration = Duration::from_secs(30);

/// The run's Redis server, stopped when dropped.
#[derive(Debug)]
pub(crate) struct Server {
    port: u16,
    dir: PathBuf,
}

/// The arguments the server is started with, every time.
fn server_args(port: u16, dir: &Path) -> Vec<String> {
    let dir = dir.display().to_string();
    let args = [
        "--port",
        &port.to_string(),
        "--bind",
        "127.0.0.1",
        "--dir",
        &dir,
        "--daemonize",
        "yes",
        "--pidfile",
        &format!("{dir}/redis.pid"),
        "--logfile",
        &format!("{dir}/redis.log"),
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--save",
        "",
        "--maxmemory-policy",
        "noeviction",
    ];
    args.iter().map(|a| (*a).to_string()).collect()
}

/// `redis-cli -p port` with `args`; its output.
fn cli(port: u16, args: &[&str]) -> Result<String> {
    let out = Command::new("redis-cli")
        .args(["-p", &port.to_string()])
        .args(args)
        .output()
        .map_err(|e| format!("redis-cli: {e} (is Debian's redis-server installed?)"))?;
    if !out.status.success() {
        return Err(format!("redis-cli {args:?}: {}", String::from_utf8_lossy(&out.stderr)));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

impl Server {
    /// Starts a server on a free port with its files in `dir`, and waits until it answers.
    pub(crate) fn start(dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let port = free_port()?;
        let status = Command::new("redis-server")
            .args(server_args(port, dir))
            .status()
            .map_err(|e| format!("redis-server: {e} (is Debian's redis-server installed?)"))?;
        if !status.success() {
            return Err(format!("redis-server exited {status}; see {}", dir.display()));
        }
        let started = Instant::now();
        while cli(port, &["ping"]).ok().as_deref() != Some("PONG") {
            if started.elapsed() > START_WAIT_MAX {
                return Err(format!(
                    "redis-server on {port} did not answer; see {}",
                    dir.display()
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(Self { port, dir: dir.to_path_buf() })
    }

    pub(crate) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub(crate) fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// A shell command that restarts the server; the fault adds `-m fast` or
    /// `-m immediate`. Written to a script in the server's directory.
    pub(crate) fn restart_command(&self) -> Result<String> {
        let (port, dir) = (self.port, self.dir.display());
        let start =
            server_args(self.port, &self.dir).iter().map(|a| format!("'{a}'")).collect::<Vec<_>>();
        let script = format!(
            "#!/bin/sh\n\
             # Restarts the run's Redis server: -m fast (SHUTDOWN) or -m immediate (SIGKILL).\n\
             if [ \"$2\" = fast ]; then redis-cli -p {port} shutdown >/dev/null 2>&1\n\
             else kill -9 \"$(cat '{dir}/redis.pid')\"; fi\n\
             while redis-cli -p {port} ping >/dev/null 2>&1; do sleep 0.05; done\n\
             redis-server {}\n\
             until redis-cli -p {port} ping 2>/dev/null | grep -q PONG; do sleep 0.05; done\n",
            start.join(" ")
        );
        let path = self.dir.join("restart.sh");
        std::fs::write(&path, script).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(format!("sh '{}'", path.display()))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = cli(self.port, &["shutdown", "nosave"]);
    }
}

/// The keys of the checkout's namespace whose claims are in flight: the index of
/// records in flight, each member's key (after its scope).
pub(crate) fn in_flight_keys(url: &str) -> Result<Vec<String>> {
    let members = cli(port_of(url)?, &["ZRANGE", "{checkout}:leases", "0", "-1"])?;
    let keys = members.lines().filter_map(|member| {
        let (len, rest) = member.split_once(':')?;
        let scope_len: usize = len.parse().ok()?;
        rest.get(scope_len + 1..).map(str::to_owned)
    });
    Ok(keys.collect())
}

fn port_of(url: &str) -> Result<u16> {
    url.rsplit(':').next().and_then(|p| p.parse().ok()).ok_or(format!("{url}: no port"))
}

/// What the server holds once the run is over: no claim of the checkout's namespace in
/// flight after the reconcile (the index of records in flight is empty).
pub(crate) fn check(url: &str, verdict: &mut Verdict) -> Result {
    let port =
        url.rsplit(':').next().and_then(|p| p.parse().ok()).ok_or(format!("{url}: no port"))?;
    let in_flight = cli(port, &["ZCARD", "{checkout}:leases"])?;
    if in_flight != "0" {
        verdict.other.push(format!("{in_flight} claims left in flight after the reconcile"));
    }
    // With nothing in flight, no scope's counter of claims in flight may be left.
    let counters = cli(port_of(url)?, &["KEYS", "{checkout}:q:*"])?;
    if !counters.is_empty() {
        verdict.other.push(format!("scope counters left with nothing in flight: {counters}"));
    }
    Ok(())
}
