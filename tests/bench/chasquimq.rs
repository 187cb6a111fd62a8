//! ChasquiMQ as a contender: runs its driver (tests/bench/chasquimq/, built by scripts/bench
//! against ChasquiMQ 1.3.0 patched for Valkey) against our server and reads the JSON lines it
//! prints (`driver`), as bullmq.rs does for bench.mjs.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

pub use crate::driver::Outcome;

pub struct Params {
    /// Its parts (`only`): enqueue, process, lifecycle, memory, bulk.
    pub run: crate::driver::Run,
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
    let limit = p.run.phase_limit * 4 + Duration::from_secs(60);
    let mut cmd = Command::new(bin);
    cmd.args(p.run.flags()).args(["--events", if p.events { "on" } else { "off" }]);
    if let Some(r) = p.replica_port {
        cmd.args(["--replica-port", &r.to_string()]);
    }
    crate::driver::run(cmd, "the ChasquiMQ driver", limit, p.run.server_pid)
}
