//! Job schedulers at scale (`--only-sched`, or `--sched` before the passes): 10 000 schedulers
//! on one node, each on a server of its own (started and stopped by pid like the main one).
//!
//! * **Lateness**: 10 000 EVERY schedulers (interval 10 s, their phases spread one a
//!   millisecond, so an iteration falls due every millisecond), four workers waiting in
//!   `EMQ.CLAIM … BLOCK … ROW` and completing with `KEEP 0`; for every iteration a worker
//!   receives, the time from the iteration's time (its row's `iteration`) to its arrival at
//!   the worker (the client's clock, the same machine's). p50, p99, max; how many arrived.
//!   Then upkeep's longest tick since the server started (`upkeep_tick_max_us`, and its CPU,
//!   `upkeep_tick_max_cpu_us`; before the window upkeep had nothing to do), its ticks over
//!   2 ms in the window, and the server's longest event-loop cycle in it (`INFO debug`
//!   `eventloop_duration_max`, after `CONFIG RESETSTAT`).
//! * **A burst**: the same 10 000 as cron schedulers all due in the same second
//!   (`*/10 * * * * *`): the lateness of the last ones shows what one node's promotion and
//!   hand-out of 10 000 jobs at once takes.
//! * **Idle**: the server's CPU over a window with 10 000 schedulers whose next times are an
//!   hour away, beside the same server with none (each measured on a fresh server, the
//!   module loaded and installed, nothing connected but the reader): the cost of keeping
//!   them between their times, as a share of one core.
//!
//! Like every figure of the benchmark, these are a report, not a test: a busy machine makes
//! them worse (the run waits for a quiet machine first).

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::sleep;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::load::{self, Pipe};
use crate::resp::{Conn, Reply};
use crate::server::{self, Server};

const Q: &str = "sched";
const WORKERS: usize = 4;
/// The schedulers' interval, ms.
const EVERY: i64 = 10_000;

pub struct Figs {
    pub schedulers: usize,
    pub create_secs: f64,
    /// Lateness of each iteration at its worker, ms, sorted.
    pub late_ms: Vec<f64>,
    pub window_secs: f64,
    pub tick_max_us: f64,
    pub tick_max_cpu_us: f64,
    pub ticks_over_2ms: f64,
    pub eventloop_max_us: f64,
    pub iterations: f64,
    /// In the window: the server's CPU, and other processes' (both in cores).
    pub server_cores: f64,
    pub foreign_cores: f64,
    /// Server CPU over the idle window, as cores: with the schedulers, and without.
    pub idle_with: f64,
    pub idle_without: f64,
    pub idle_secs: f64,
    /// Lateness when every scheduler falls due in the same second, ms, sorted.
    pub burst_ms: Vec<f64>,
}

fn k(role: &str) -> Vec<u8> {
    format!("emq:{{{Q}}}:{role}").into_bytes()
}

fn set_cmd(i: usize, args: &[String]) -> Vec<Vec<u8>> {
    let mut v = vec![
        b"TRA.SCHEDULER".to_vec(),
        b"4".to_vec(),
        k(&format!("sched:s{i}")),
        k("scheds"),
        k("delayed"),
        k("events"),
    ];
    v.extend(args.iter().map(|a| a.as_bytes().to_vec()));
    v
}

fn now_ms() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

fn num(c: &mut Conn, section: &str, field: &str) -> f64 {
    server::info(c, section, field).and_then(|v| v.parse().ok()).unwrap_or(f64::NAN)
}

/// `n` schedulers, the i-th made by `args(i)`, pipelined.
fn create(c: &mut Conn, n: usize, args: impl Fn(usize) -> Vec<String>) -> Result<(), String> {
    let mut p = Pipe::new();
    for i in 0..n {
        let v = set_cmd(i, &args(i));
        let refs: Vec<&[u8]> = v.iter().map(Vec::as_slice).collect();
        p.cmd(&refs);
        if (i + 1) % 500 == 0 || i + 1 == n {
            for r in p.run(c)? {
                if let Some(e) = r.err() {
                    return Err(format!("TRA.SCHEDULER SET: {e}"));
                }
            }
        }
    }
    Ok(())
}

fn installed(bin: &Path, module: &Path, scratch: &Path) -> Result<(Server, Conn), String> {
    let srv = Server::start(bin, module, scratch)?;
    let mut c = srv.conn()?;
    let r = c.call(&[b"EMQ.INSTALL", b"1", b"{emq}:version"]);
    if let Some(e) = r.err() {
        return Err(format!("EMQ.INSTALL: {e}"));
    }
    Ok((srv, c))
}

/// The `iteration` of a `CLAIM … ROW` entry's row (flat pairs or a map).
fn iteration_of(entry: &Reply) -> Option<i64> {
    let Reply::Array(e) = entry else { return None };
    let pairs: Vec<(&Reply, &Reply)> = match e.get(4)? {
        Reply::Array(flat) => flat.chunks(2).filter_map(|p| Some((p.first()?, p.get(1)?))).collect(),
        Reply::Map(m) => m.iter().map(|(a, b)| (a, b)).collect(),
        _ => return None,
    };
    pairs.into_iter().find(|(f, _)| matches!(f, Reply::Bulk(b) if b == b"iteration")).and_then(|(_, v)| {
        match v {
            Reply::Int(t) => Some(*t),
            _ => None,
        }
    })
}

fn worker(port: u16, w: usize, stop: &AtomicBool) -> Result<Vec<f64>, String> {
    let mut c = Conn::connect(port).map_err(|e| format!("connect: {e}"))?;
    let tok = format!("w{w}");
    let mut late = Vec::new();
    let (active, completed, events) = (k("active"), k("completed"), k("events"));
    let claim: Vec<Vec<u8>> = [
        &b"EMQ.CLAIM"[..],
        b"6",
        &k("wait"),
        &k("prio"),
        &k("active"),
        &k("delayed"),
        &k("meta"),
        &k("events"),
        tok.as_bytes(),
        b"60000",
        b"COUNT",
        b"8",
        b"BLOCK",
        b"200",
        b"ROW",
    ]
    .iter()
    .map(|a| a.to_vec())
    .collect();
    while !stop.load(Ordering::Relaxed) {
        let refs: Vec<&[u8]> = claim.iter().map(Vec::as_slice).collect();
        let r = c.call(&refs);
        let at = now_ms();
        let Reply::Array(jobs) = r else { return Err(format!("CLAIM: {r:?}")) };
        if jobs.is_empty() {
            continue;
        }
        let mut p = Pipe::new();
        for j in &jobs {
            if let Some(t) = iteration_of(j) {
                late.push(at - t as f64);
            }
            let Reply::Array(e) = j else { continue };
            let Some(Reply::Bulk(id)) = e.first() else { continue };
            let row = [k("job:"), id.clone()].concat();
            let v: Vec<&[u8]> = vec![
                b"EMQ.COMPLETE",
                b"4",
                &row,
                &active,
                &completed,
                &events,
                tok.as_bytes(),
                b"ok",
                b"KEEP",
                b"0",
            ];
            p.cmd(&v);
        }
        for r in p.run(&mut c)? {
            if let Some(e) = r.err() {
                return Err(format!("COMPLETE: {e}"));
            }
        }
    }
    Ok(late)
}

pub fn run(bin: &Path, module: &Path, scratch: &Path, short: bool) -> Result<Figs, String> {
    let n = if short { 500 } else { 10_000 };
    let window = Duration::from_secs(if short { 3 } else { 20 });
    let idle_window = Duration::from_secs(if short { 2 } else { 10 });

    // Lateness and upkeep's ticks.
    let (srv, mut c) = installed(bin, module, scratch)?;
    load::wait_quiet(srv.pid(), 0.3, Duration::from_secs(30));
    let t0 = Instant::now();
    // Phases one a millisecond (spread over the interval), the first times 3 s from now.
    let first = (now_ms() as i64 + 3000) / EVERY * EVERY + EVERY;
    let spread = EVERY / n as i64;
    create(&mut c, n, |i| {
        let start = first + i as i64 * spread.max(1);
        ["SET", "EVERY", &EVERY.to_string(), "START", &start.to_string(), "JOB", "tick", "{}"]
            .map(String::from)
            .to_vec()
    })?;
    let create_secs = t0.elapsed().as_secs_f64();
    let stop = Arc::new(AtomicBool::new(false));
    let handles: Vec<_> = (0..WORKERS)
        .map(|w| {
            let (port, stop) = (srv.port, stop.clone());
            std::thread::spawn(move || worker(port, w, &stop))
        })
        .collect();
    // Measure from the first iteration's time on.
    while now_ms() < first as f64 - 200.0 {
        sleep(Duration::from_millis(20));
    }
    c.call(&[b"CONFIG", b"RESETSTAT"]);
    let ticks_over0 = num(&mut c, "trafikey", "trafikey_upkeep_ticks_over_2ms");
    let made = |c: &mut Conn| {
        num(c, "trafikey", "trafikey_upkeep_iterations") + num(c, "trafikey", "trafikey_claim_iterations")
    };
    let iters0 = made(&mut c);
    let s0 = load::snap(srv.pid());
    let cpu0 = server::cpu_us(&mut c);
    let w0 = Instant::now();
    sleep(window);
    let window_secs = w0.elapsed().as_secs_f64();
    let server_cores = (server::cpu_us(&mut c) - cpu0) / 1e6 / window_secs;
    let foreign_cores = load::foreign(&s0, &load::snap(srv.pid()));
    let tick_max_us = num(&mut c, "trafikey", "trafikey_upkeep_tick_max_us");
    let tick_max_cpu_us = num(&mut c, "trafikey", "trafikey_upkeep_tick_max_cpu_us");
    let ticks_over_2ms = num(&mut c, "trafikey", "trafikey_upkeep_ticks_over_2ms") - ticks_over0;
    let iterations = made(&mut c) - iters0;
    let eventloop_max_us = num(&mut c, "debug", "eventloop_duration_max");
    stop.store(true, Ordering::Relaxed);
    let mut late_ms = Vec::new();
    for h in handles {
        late_ms.extend(h.join().map_err(|_| "a worker panicked".to_string())??);
    }
    late_ms.sort_by(f64::total_cmp);
    drop(c);
    drop(srv);

    // Idle: with 10 000 schedulers an hour away, and with none.
    let idle = |with: bool| -> Result<(f64, f64), String> {
        let (srv, mut c) = installed(bin, module, scratch)?;
        if with {
            let start = now_ms() as i64 + 3_600_000;
            create(&mut c, n, |i| {
                ["SET", "EVERY", "60000", "START", &(start + i as i64).to_string(), "JOB", "tick", "{}"]
                    .map(String::from)
                    .to_vec()
            })?;
        }
        sleep(Duration::from_millis(500));
        load::wait_quiet(srv.pid(), 0.3, Duration::from_secs(30));
        let cpu0 = server::cpu_us(&mut c);
        let t = Instant::now();
        sleep(idle_window);
        let cpu1 = server::cpu_us(&mut c);
        let secs = t.elapsed().as_secs_f64();
        Ok(((cpu1 - cpu0) / 1e6 / secs, secs))
    };
    let (idle_without, idle_secs) = idle(false)?;
    let (idle_with, _) = idle(true)?;

    // A burst: every scheduler due in the same second, every 10 s.
    let (srv, mut c) = installed(bin, module, scratch)?;
    load::wait_quiet(srv.pid(), 0.3, Duration::from_secs(30));
    create(&mut c, n, |_| {
        ["SET", "PATTERN", "*/10 * * * * *", "JOB", "tick", "{}"].map(String::from).to_vec()
    })?;
    let stop = Arc::new(AtomicBool::new(false));
    let handles: Vec<_> = (0..WORKERS)
        .map(|w| {
            let (port, stop) = (srv.port, stop.clone());
            std::thread::spawn(move || worker(port, w, &stop))
        })
        .collect();
    sleep(window);
    stop.store(true, Ordering::Relaxed);
    let mut burst_ms = Vec::new();
    for h in handles {
        burst_ms.extend(h.join().map_err(|_| "a worker panicked".to_string())??);
    }
    burst_ms.sort_by(f64::total_cmp);
    drop(c);
    drop(srv);
    Ok(Figs {
        schedulers: n,
        create_secs,
        late_ms,
        window_secs,
        tick_max_us,
        tick_max_cpu_us,
        ticks_over_2ms,
        eventloop_max_us,
        iterations,
        server_cores,
        foreign_cores,
        idle_with,
        idle_without,
        idle_secs,
        burst_ms,
    })
}

fn pct(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i.min(v.len() - 1)]
}

pub fn markdown(f: &Figs, machine: &str) -> String {
    let mut s = String::new();
    s.push_str(&format!("### Job schedulers: {} on one node\n\n", f.schedulers));
    s.push_str(&format!("{machine}\n\n"));
    s.push_str("| figure | value | goal |\n|---|---|---|\n");
    s.push_str(&format!(
        "| created (TRA.SCHEDULER SET, pipelined) | {} in {:.2} s | — |\n",
        f.schedulers, f.create_secs
    ));
    s.push_str(&format!(
        "| iterations made by upkeep / received by the {WORKERS} waiting workers in {:.1} s | {:.0} / {} | — |\n",
        f.window_secs,
        f.iterations,
        f.late_ms.len()
    ));
    s.push_str(&format!(
        "| in that window: the server's CPU / other processes' (the machine's own load) | {:.3} / {:.2} cores | — |\n",
        f.server_cores, f.foreign_cores
    ));
    s.push_str(&format!(
        "| iteration time → a waiting worker, p50 / p99 / max | {:.2} / {:.2} / {:.2} ms | p99 ≤ 5 ms |\n",
        pct(&f.late_ms, 0.5),
        pct(&f.late_ms, 0.99),
        f.late_ms.last().copied().unwrap_or(f64::NAN)
    ));
    s.push_str(&format!(
        "| upkeep's longest tick (wall / its CPU) | {:.0} / {:.0} µs | within its ~1 ms budget, < 2 ms |\n",
        f.tick_max_us, f.tick_max_cpu_us
    ));
    s.push_str(&format!(
        "| a burst: all {} due in the same second (`PATTERN */10 * * * * *`), {} received: p50 / p99 / max | {:.1} / {:.1} / {:.1} ms | — |\n",
        f.schedulers,
        f.burst_ms.len(),
        pct(&f.burst_ms, 0.5),
        pct(&f.burst_ms, 0.99),
        f.burst_ms.last().copied().unwrap_or(f64::NAN)
    ));
    s.push_str(&format!("| upkeep ticks over 2 ms in the window | {:.0} | 0 |\n", f.ticks_over_2ms));
    s.push_str(&format!("| server's longest event-loop cycle | {:.0} µs | — |\n", f.eventloop_max_us));
    s.push_str(&format!(
        "| idle server CPU, {:.0} s: without schedulers / with {} between their times | {:.3} % / {:.3} % of a core (+{:.3} %) | ≤ +1 % |\n",
        f.idle_secs,
        f.schedulers,
        f.idle_without * 100.0,
        f.idle_with * 100.0,
        (f.idle_with - f.idle_without) * 100.0
    ));
    s
}
