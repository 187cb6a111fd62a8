//! BullMQ as a contender: runs `bench.mjs` (installed with BullMQ by scripts/bench into a
//! scratch folder) against our server and reads the JSON lines it prints.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

pub use crate::driver::Outcome;

/// Whether BullMQ is installed in `dir` (scripts/bench puts it there).
pub fn installed(dir: &Path) -> bool {
    dir.join("node_modules/bullmq/package.json").is_file()
        && dir.join("node_modules/ioredis/package.json").is_file()
        && dir.join("bench.mjs").is_file()
}

pub struct Params {
    /// Its parts (`only`): enqueue, claim, lifecycle, memory, wake, lateness.
    pub run: crate::driver::Run,
    /// The waiting parts (wake, lateness): jobs, one `add` every `gap_ms`, Workers ×
    /// concurrency, and the delays' range (ms).
    pub wait_jobs: u64,
    pub gap_ms: u64,
    pub waiters: (usize, usize),
    pub spread: (u64, u64),
    /// Events off: the events stream capped at 0 (`streams.events.maxLen`) and completed jobs
    /// kept as trafikey keeps them (`removeOnComplete` 1000).
    pub events: bool,
    /// Only the best mode (the production modes' rounds).
    pub best_only: bool,
    /// The replica's port, to read its CPU around each phase (the replica mode).
    pub replica_port: Option<u16>,
    /// BullMQ on trafikey: the trafikey backend's built entry point (clients/bullmq's
    /// dist/index.js); None: BullMQ's own Redis backend.
    pub trafikey_client: Option<std::path::PathBuf>,
}

/// Run every BullMQ workload; the whole run is bounded by a time limit of its own.
pub fn run(dir: &Path, p: &Params) -> Result<Outcome, String> {
    let limit = p.run.phase_limit * 3 + Duration::from_secs(30);
    let mut extra: Vec<String> = Vec::new();
    if !p.events {
        extra.extend(["--events".into(), "off".into()]);
    }
    if p.best_only {
        extra.push("--best-only".into());
    }
    if let Some(r) = p.replica_port {
        extra.extend(["--replica-port".into(), r.to_string()]);
    }
    if let Some(t) = &p.trafikey_client {
        extra.extend([
            "--backend".into(),
            "trafikey".into(),
            "--trafikey-client".into(),
            t.display().to_string(),
        ]);
    }
    let mut cmd = Command::new("node");
    cmd.arg(dir.join("bench.mjs"))
        .args(&extra)
        .args(p.run.flags())
        .args(["--wait-jobs", &p.wait_jobs.to_string(), "--gap-ms", &p.gap_ms.to_string()])
        .args(["--wait-workers", &p.waiters.0.to_string(), "--wait-concurrency", &p.waiters.1.to_string()])
        .args(["--delay-min", &p.spread.0.to_string(), "--delay-max", &p.spread.1.to_string()])
        .current_dir(dir);
    crate::driver::run(cmd, "bench.mjs", limit, p.run.server_pid)
}
