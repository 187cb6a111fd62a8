//! ChasquiMQ as a contender: runs its driver (tests/bench/chasquimq/, built by scripts/bench
//! against ChasquiMQ 1.3.0 patched for Valkey) against our server and reads the JSON lines it
//! prints (`driver`), as bullmq.rs does for bench.mjs.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

pub use crate::driver::Outcome;

pub struct Params {
    pub port: u16,
    pub n: u64,
    pub mem: u64,
    pub conns: usize,
    pub batch: usize,
    pub phase_limit: Duration,
    pub server_pid: u32,
    /// Which of the driver's parts to run: enqueue, process, lifecycle, memory.
    pub only: String,
    /// ChasquiMQ's `events_enabled`.
    pub events: bool,
    pub replica_port: Option<u16>,
}

/// Whether the driver has been built (scripts/bench builds it and names it).
pub fn binary() -> Option<std::path::PathBuf> {
    let p = std::path::PathBuf::from(std::env::var("BENCH_CHASQUIMQ").ok()?);
    p.is_file().then_some(p)
}

pub fn run(bin: &Path, p: &Params) -> Result<Outcome, String> {
    let limit = p.phase_limit * 4 + Duration::from_secs(60);
    let mut cmd = Command::new(bin);
    cmd.args(["--port", &p.port.to_string(), "--n", &p.n.to_string(), "--mem", &p.mem.to_string()])
        .args(["--conns", &p.conns.to_string(), "--batch", &p.batch.to_string()])
        .args(["--deadline-s", &p.phase_limit.as_secs().max(1).to_string()])
        .args(["--only", &p.only, "--events", if p.events { "on" } else { "off" }]);
    if let Some(r) = p.replica_port {
        cmd.args(["--replica-port", &r.to_string()]);
    }
    crate::driver::run(cmd, "the ChasquiMQ driver", limit, p.server_pid)
}
