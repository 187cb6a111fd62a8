//! A contender's own driver, run as a child process (BullMQ's `bench.mjs`, the ChasquiMQ
//! driver): it runs against our server and prints one JSON line per figure, which this reads.
//! The run is bounded by a time limit; past it the child is stopped by its pid.
//!
//! A line is `{"workload":…,"mode":…,"jobs":N,"seconds":s,"cpu_us":u,"p50_us":a,"p99_us":b}`
//! (and `replica_cpu_us` in the replica mode), `{"workload":"memory","bytes":B,"jobs":N}`, or
//! `{"error":…}`.

use std::io::Read as _;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// One figure a driver reported.
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

/// What every driver is told, with the same flags: the server, the workload's size and
/// shape, the time each phase may take, and which of its parts to run.
pub struct Run {
    pub port: u16,
    pub n: u64,
    pub mem: u64,
    pub conns: usize,
    pub batch: usize,
    pub phase_limit: Duration,
    pub server_pid: u32,
    pub only: String,
}

impl Run {
    /// The flags that say it: `--port --n --mem --conns --batch --deadline-s --only`.
    pub fn flags(&self) -> Vec<String> {
        let deadline = self.phase_limit.as_secs().max(1);
        [
            ("--port", self.port.to_string()),
            ("--n", self.n.to_string()),
            ("--mem", self.mem.to_string()),
            ("--conns", self.conns.to_string()),
            ("--batch", self.batch.to_string()),
            ("--deadline-s", deadline.to_string()),
            ("--only", self.only.clone()),
        ]
        .into_iter()
        .flat_map(|(flag, v)| [flag.to_string(), v])
        .collect()
    }
}

/// Runs `cmd` (named `what` in errors) for at most `limit`, beside the server `server_pid`.
pub fn run(mut cmd: Command, what: &str, limit: Duration, server_pid: u32) -> Result<Outcome, String> {
    let s0 = crate::load::snap(server_pid);
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("cannot run {what}: {e}"))?;
    let mut stdout = child.stdout.take().ok_or_else(|| format!("no stdout from {what}"))?;
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
            let _ = Command::new("kill").arg(child.id().to_string()).status();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let text = reader.join().unwrap_or_default();
    let foreign = crate::load::foreign(&s0, &crate::load::snap(server_pid));
    let mut out = Outcome { figures: Vec::new(), memory: None, errors: Vec::new(), foreign };
    for line in text.lines().filter(|l| l.trim_start().starts_with('{')) {
        let v: Value =
            serde_json::from_str(line).map_err(|e| format!("bad line from {what}: {e}: {line}"))?;
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
        let us = |k: &str| v.get(k).and_then(Value::as_f64).map_or(0, |x| x as u32);
        out.figures.push(Figure {
            workload: s("workload"),
            mode: s("mode"),
            jobs: f("jobs") as u64,
            secs: f("seconds"),
            cpu_us: f("cpu_us"),
            p50_us: us("p50_us"),
            p99_us: us("p99_us"),
            replica_cpu_us: v.get("replica_cpu_us").and_then(Value::as_f64),
        });
    }
    match status {
        None => out.errors.push(format!("{what} ran past {}s and was stopped", limit.as_secs())),
        Some(st) if !st.success() && out.errors.is_empty() => {
            out.errors.push(format!("{what} exited with {st}"))
        }
        _ => {}
    }
    Ok(out)
}
