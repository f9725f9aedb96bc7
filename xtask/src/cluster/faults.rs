//! The faults, on a schedule drawn from the run's seed: a server killed mid-request and
//! restarted, the database restarted (fast and immediate modes), the link between one
//! server and the database or the gateway cut, and the gateway slow or dropping answers.

use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

use super::Lcg;
use super::http;
use super::procs::Processes;
use crate::Result;

/// One fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    /// SIGKILL to server `n`, restarted after a pause.
    Kill(usize),
    /// The database restarted: `fast` ends sessions cleanly, else `immediate` (a crash).
    DatabaseRestart { fast: bool },
    /// Server `n`'s link to the database cut for a while.
    CutDatabase(usize),
    /// Server `n`'s link to the gateway cut for a while.
    CutGateway(usize),
    /// Every charge takes 1.5 s for a while.
    SlowGateway,
    /// The gateway charges and drops three answers in ten for a while.
    DroppedAnswers,
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Kill(n) => write!(f, "kill s{n}"),
            Self::DatabaseRestart { fast: true } => f.write_str("db restart fast"),
            Self::DatabaseRestart { fast: false } => f.write_str("db restart immediate"),
            Self::CutDatabase(n) => write!(f, "cut s{n}-db"),
            Self::CutGateway(n) => write!(f, "cut s{n}-gateway"),
            Self::SlowGateway => f.write_str("slow gateway"),
            Self::DroppedAnswers => f.write_str("dropped answers"),
        }
    }
}

/// How many kinds of fault there are: the schedule's first faults are one of each.
const KINDS: u64 = 7;

/// Every kind's name, as [`Fault::kind`] gives it.
pub(crate) const KIND_NAMES: [&str; KINDS as usize] = [
    "kill",
    "db restart fast",
    "db restart immediate",
    "cut db",
    "cut gateway",
    "slow gateway",
    "dropped answers",
];

impl Fault {
    /// The kind of fault, without the server it hit.
    pub(crate) fn kind(self) -> &'static str {
        let index = match self {
            Self::Kill(_) => 0,
            Self::DatabaseRestart { fast: true } => 1,
            Self::DatabaseRestart { fast: false } => 2,
            Self::CutDatabase(_) => 3,
            Self::CutGateway(_) => 4,
            Self::SlowGateway => 5,
            Self::DroppedAnswers => 6,
        };
        KIND_NAMES[index]
    }
}

/// `count` faults for `servers` servers, drawn from `seed`: each kind once first (in an
/// order drawn from the seed), then kinds at random.
pub(crate) fn schedule(seed: u64, servers: usize, count: usize) -> Vec<Fault> {
    let mut lcg = Lcg::new(seed ^ 0xfa17);
    let mut kinds: Vec<u64> = (0..KINDS).collect();
    for i in (1..kinds.len()).rev() {
        kinds.swap(i, lcg.below(i as u64 + 1) as usize);
    }
    let mut faults = Vec::with_capacity(count);
    for n in 0..count {
        let kind = kinds.get(n).copied().unwrap_or_else(|| lcg.below(KINDS));
        let server = lcg.below(servers as u64) as usize;
        faults.push(match kind {
            0 => Fault::Kill(server),
            1 => Fault::DatabaseRestart { fast: true },
            2 => Fault::DatabaseRestart { fast: false },
            3 => Fault::CutDatabase(server),
            4 => Fault::CutGateway(server),
            5 => Fault::SlowGateway,
            _ => Fault::DroppedAnswers,
        });
    }
    faults
}

/// How long a cut, a slow gateway or dropped answers last, and a killed server stays down.
const OUTAGE: Duration = Duration::from_millis(800);

/// Brings `fault` about, and undoes it after [`OUTAGE`] (a killed server is restarted;
/// a database restart undoes itself).
pub(crate) fn inflict(fault: Fault, processes: &mut Processes, restart_db: &str) -> Result {
    match fault {
        Fault::Kill(n) => {
            processes.kill(n)?;
            std::thread::sleep(OUTAGE);
            processes.restart(n)
        }
        Fault::DatabaseRestart { fast } => {
            let mode = if fast { "fast" } else { "immediate" };
            let command = format!("{restart_db} -m {mode}");
            let status = std::process::Command::new("sh").args(["-c", &command]).status();
            match status {
                Ok(status) if status.success() => Ok(()),
                other => Err(format!("{command}: {other:?}")),
            }
        }
        Fault::CutDatabase(n) => cut(&processes.servers[n].database),
        Fault::CutGateway(n) => cut(&processes.servers[n].gateway),
        Fault::SlowGateway => gateway_for_a_while(processes.gateway, "slow_ms=1500"),
        Fault::DroppedAnswers => gateway_for_a_while(processes.gateway, "drop_permille=300"),
    }
}

fn cut(proxy: &super::proxy::Proxy) -> Result {
    proxy.cut();
    std::thread::sleep(OUTAGE);
    proxy.restore();
    Ok(())
}

fn gateway_for_a_while(gateway: SocketAddr, faults: &str) -> Result {
    tell_gateway(gateway, faults)?;
    std::thread::sleep(OUTAGE);
    tell_gateway(gateway, "")
}

/// Sets the gateway's faults (none for `""`).
pub(crate) fn tell_gateway(gateway: SocketAddr, faults: &str) -> Result {
    let timeout = Duration::from_secs(5);
    match http::call(gateway, ("POST", "/faults"), &[], faults, timeout) {
        Ok(reply) if reply.status == 200 => Ok(()),
        other => Err(format!("the gateway refused faults {faults:?}: {other:?}")),
    }
}
