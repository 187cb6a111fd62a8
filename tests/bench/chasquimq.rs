//! ChasquiMQ as a contender: runs its driver (tests/bench/chasquimq/, built by scripts/bench
//! against ChasquiMQ 1.3.0 patched for Valkey) against our server and reads the JSON lines it
//! prints, as bullmq.rs does for bench.mjs.

use std::io::Read as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// One figure the driver reported.
pub struct Figure {
    pub workload: String,
    pub mode: String,
    pub jobs: u64,
    pub secs: f64,
    pub cpu_us: f64,
    pub replica_cpu_us: Option<f64>,
    pub p50_us: u32,
    pub p99_us: u32,
}

pub struct Outcome {
    pub figures: Vec<Figure>,
    pub memory: Option<f64>,
    pub errors: Vec<String>,
    /// Cores other processes used during the run.
    pub foreign: f64,
}

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
    let s0 = crate::load::snap(p.server_pid);
    let mut cmd = Command::new(bin);
    cmd.args(["--port", &p.port.to_string(), "--n", &p.n.to_string(), "--mem", &p.mem.to_string()])
        .args(["--conns", &p.conns.to_string(), "--batch", &p.batch.to_string()])
        .args(["--deadline-s", &p.phase_limit.as_secs().max(1).to_string()])
        .args(["--only", &p.only, "--events", if p.events { "on" } else { "off" }]);
    if let Some(r) = p.replica_port {
        cmd.args(["--replica-port", &r.to_string()]);
    }
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", bin.display()))?;
    let mut stdout = child.stdout.take().ok_or("no stdout from the ChasquiMQ driver")?;
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
        let v: Value = serde_json::from_str(line)
            .map_err(|e| format!("bad line from the ChasquiMQ driver: {e}: {line}"))?;
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
            replica_cpu_us: v.get("replica_cpu_us").and_then(Value::as_f64),
            p50_us: v.get("p50_us").and_then(Value::as_u64).unwrap_or(0) as u32,
            p99_us: v.get("p99_us").and_then(Value::as_u64).unwrap_or(0) as u32,
        });
    }
    match status {
        None => {
            out.errors.push(format!("the ChasquiMQ driver ran past {}s and was stopped", limit.as_secs()))
        }
        Some(st) if !st.success() && out.errors.is_empty() => {
            out.errors.push(format!("the ChasquiMQ driver exited with {st}"))
        }
        _ => {}
    }
    Ok(out)
}
