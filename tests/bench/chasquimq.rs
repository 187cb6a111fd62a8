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

/// What the ChasquiMQ column is when the stand-in ran in the driver's place.
pub const STANDIN: &str = "not run: its driver was not built; a stand-in (tests/bench/chasquimq/standin.py) sent the requests ChasquiMQ 1.3.0 sends on Valkey as plain commands, and the ChasquiMQ figures are the stand-in's";

/// Why the driver named in BENCH_CHASQUIMQ is the stand-in, when it is: scripts/bench's short
/// mode runs it when the driver is not built and cached (building it takes minutes), so that
/// the tool's ChasquiMQ paths and the requests against the server are still checked.
pub fn standin() -> Option<String> {
    std::env::var("BENCH_CHASQUIMQ_STANDIN").ok().filter(|s| !s.is_empty())
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
