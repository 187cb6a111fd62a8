//! BullMQ as a contender: runs `bench.mjs` (installed with BullMQ by scripts/bench into a
//! scratch folder) against our server and reads the JSON lines it prints.

use std::io::Read as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// One figure BullMQ reported.
pub struct Figure {
    pub workload: String,
    pub mode: String,
    pub jobs: u64,
    pub secs: f64,
    pub cpu_us: f64,
    pub p50_us: u32,
    pub p99_us: u32,
    /// The replica's CPU over the phase, µs (the replica mode).
    pub replica_cpu_us: Option<f64>,
}

pub struct Outcome {
    pub figures: Vec<Figure>,
    /// Bytes per waiting job, when measured.
    pub memory: Option<f64>,
    pub errors: Vec<String>,
    /// Cores other processes used during the run.
    pub foreign: f64,
}

/// Whether BullMQ is installed in `dir` (scripts/bench puts it there).
pub fn installed(dir: &Path) -> bool {
    dir.join("node_modules/bullmq/package.json").is_file()
        && dir.join("node_modules/ioredis/package.json").is_file()
        && dir.join("bench.mjs").is_file()
}

pub struct Params {
    pub port: u16,
    pub n: u64,
    pub mem: u64,
    pub conns: usize,
    pub batch: usize,
    pub phase_limit: Duration,
    pub server_pid: u32,
    /// Which of bench.mjs's parts to run: enqueue, claim, lifecycle, memory, wake, lateness.
    pub only: String,
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
}

/// Run every BullMQ workload; the whole run is bounded by a time limit of its own.
pub fn run(dir: &Path, p: &Params) -> Result<Outcome, String> {
    let limit = p.phase_limit * 3 + Duration::from_secs(30);
    let s0 = crate::load::snap(p.server_pid);
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
    let mut child = Command::new("node")
        .arg(dir.join("bench.mjs"))
        .args(&extra)
        .args(["--port", &p.port.to_string(), "--n", &p.n.to_string(), "--mem", &p.mem.to_string()])
        .args(["--conns", &p.conns.to_string(), "--batch", &p.batch.to_string()])
        .args(["--deadline-s", &p.phase_limit.as_secs().max(1).to_string()])
        .args(["--wait-jobs", &p.wait_jobs.to_string(), "--gap-ms", &p.gap_ms.to_string()])
        .args(["--wait-workers", &p.waiters.0.to_string(), "--wait-concurrency", &p.waiters.1.to_string()])
        .args(["--delay-min", &p.spread.0.to_string(), "--delay-max", &p.spread.1.to_string()])
        .args(["--only", &p.only])
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("cannot run node: {e}"))?;
    let mut stdout = child.stdout.take().ok_or("no stdout from node")?;
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let t0 = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().map_err(|e| e.to_string())? {
            break Some(st);
        }
        if t0.elapsed() > limit {
            // Stopped by its pid.
            let _ = Command::new("kill").arg(child.id().to_string()).status();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let text = reader.join().unwrap_or_default();
    let foreign = crate::load::foreign(&s0, &crate::load::snap(p.server_pid));
    let mut out = Outcome { figures: Vec::new(), memory: None, errors: Vec::new(), foreign };
    for line in text.lines().filter(|l| l.trim_start().starts_with('{')) {
        let v: Value =
            serde_json::from_str(line).map_err(|e| format!("bad line from bench.mjs: {e}: {line}"))?;
        if let Some(e) = v.get("error").and_then(Value::as_str) {
            out.errors.push(e.to_string());
            continue;
        }
        let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let f = |k: &str| v.get(k).and_then(Value::as_f64).unwrap_or(f64::NAN);
        if s("workload") == "memory" {
            out.memory = Some(f("bytes") / f("jobs"));
            continue;
        }
        out.figures.push(Figure {
            workload: s("workload"),
            mode: s("mode"),
            jobs: f("jobs") as u64,
            secs: f("seconds"),
            cpu_us: f("cpu_us"),
            p50_us: f("p50_us") as u32,
            p99_us: f("p99_us") as u32,
            replica_cpu_us: v.get("replica_cpu_us").and_then(Value::as_f64),
        });
    }
    match status {
        None => out.errors.push(format!("bench.mjs ran past {}s and was stopped", limit.as_secs())),
        Some(st) if !st.success() && out.errors.is_empty() => {
            out.errors.push(format!("bench.mjs exited with {st}"))
        }
        _ => {}
    }
    Ok(out)
}
