//! The load driver: `conns` connections, one thread each, started together; the server's
//! CPU (INFO cpu) and the time inside commands (INFO commandstats) read around the measured
//! part from a connection of its own; per-job latencies collected and summarised.

use std::io::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use crate::resp::{Conn, Reply};
use crate::server::{self, Server};

/// What one measured phase gave.
pub struct Measured<T> {
    pub jobs: u64,
    pub secs: f64,
    /// Server CPU (user + sys) spent during the phase, µs.
    pub cpu_us: f64,
    /// Per-command (name, calls, usec inside the command) during the phase.
    pub inside: Vec<(String, u64, u64)>,
    /// Latencies a job saw, µs (what each one means is the workload's to say).
    pub lat: Vec<u32>,
    /// What each connection handed back, in connection order.
    pub out: Vec<T>,
    /// CPU used by other processes on the machine during the phase, in cores.
    pub foreign: f64,
    /// CPU this tool (the clients) used during the phase, in cores.
    pub client: f64,
    /// The replica's CPU over the same phase, µs (the replica mode), once it had caught up.
    pub replica_cpu_us: Option<f64>,
}

/// CPU time so far, in clock ticks: the whole machine (busy), the server, this process and
/// its waited-for children. What is left of a delta is other people's load.
#[derive(Clone, Copy, Default)]
pub struct CpuSnap {
    busy: u64,
    server: u64,
    me: u64,
    children: u64,
    at: Option<Instant>,
}

/// Ticks per second of /proc's counters (USER_HZ, 100 on Linux).
const HZ: f64 = 100.0;

fn proc_times(path: &str) -> (u64, u64) {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    // Fields after the command name (which may hold spaces), from field 3 on.
    let rest = text.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<u64> = rest.split_whitespace().map(|x| x.parse().unwrap_or(0)).collect();
    // utime stime cutime cstime are fields 14..=17, i.e. rest[11..=14].
    let own = f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0);
    let kids = f.get(13).copied().unwrap_or(0) + f.get(14).copied().unwrap_or(0);
    (own, kids)
}

pub fn snap(server_pid: u32) -> CpuSnap {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let cpu: Vec<u64> = stat
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    // user nice system idle iowait irq softirq steal: busy is all but idle and iowait.
    let busy = [0usize, 1, 2, 5, 6, 7].iter().map(|&i| cpu.get(i).copied().unwrap_or(0)).sum();
    let (server, _) = proc_times(&format!("/proc/{server_pid}/stat"));
    let (me, children) = proc_times("/proc/self/stat");
    CpuSnap { busy, server, me, children, at: Some(Instant::now()) }
}

/// Cores other processes used between two snapshots.
pub fn foreign(a: &CpuSnap, b: &CpuSnap) -> f64 {
    let (Some(t0), Some(t1)) = (a.at, b.at) else { return 0.0 };
    let secs = t1.duration_since(t0).as_secs_f64();
    if secs <= 0.0 {
        return 0.0;
    }
    let ours = (b.server - a.server) + (b.me - a.me) + (b.children - a.children);
    let other = b.busy.saturating_sub(a.busy).saturating_sub(ours);
    (other as f64 / HZ / secs).max(0.0)
}

/// Cores this process (the load's clients) used between two snapshots.
pub fn client(a: &CpuSnap, b: &CpuSnap) -> f64 {
    let (Some(t0), Some(t1)) = (a.at, b.at) else { return 0.0 };
    let secs = t1.duration_since(t0).as_secs_f64();
    if secs <= 0.0 {
        return 0.0;
    }
    (b.me.saturating_sub(a.me)) as f64 / HZ / secs
}

/// Wait (at most `max`, and within the run's budget) until other processes use less than
/// `cores` of the machine.
pub fn wait_quiet(server_pid: u32, cores: f64, max: Duration) -> f64 {
    if NEVER_WAIT.load(Ordering::Relaxed) {
        return 0.0;
    }
    let t0 = Instant::now();
    let max = max.min(Duration::from_millis(QUIET_BUDGET_MS.load(Ordering::Relaxed)));
    let f = loop {
        let a = snap(server_pid);
        std::thread::sleep(Duration::from_millis(500));
        let f = foreign(&a, &snap(server_pid));
        if f < cores || t0.elapsed() >= max {
            break f;
        }
    };
    let spent = t0.elapsed().as_millis() as u64;
    let _ =
        QUIET_BUDGET_MS.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| Some(b.saturating_sub(spent)));
    f
}

/// Where one connection is in a phase.
pub struct Ctx<'a> {
    pub conn: &'a mut Conn,
    pub index: usize,
    pub lat: Vec<u32>,
    pub deadline: Instant,
    pub epoch: Instant,
}

impl Ctx<'_> {
    pub fn check_time(&self) -> Result<(), String> {
        if Instant::now() > self.deadline {
            Err("the phase ran past its time limit".into())
        } else {
            Ok(())
        }
    }

    pub fn record(&mut self, since: Instant, jobs: usize) {
        let us = u32::try_from(since.elapsed().as_micros()).unwrap_or(u32::MAX);
        for _ in 0..jobs {
            self.lat.push(us);
        }
    }
}

/// How long a phase waits for the machine to be quiet (other processes under
/// [`QUIET_CORES`]) before it starts, ms. 0: no wait.
pub static QUIET_WAIT_MS: AtomicU64 = AtomicU64::new(0);
/// What is left of the whole run's waiting for quiet, ms (5 minutes at most in all).
pub static QUIET_BUDGET_MS: AtomicU64 = AtomicU64::new(300_000);
pub const QUIET_CORES: f64 = 0.15;
/// The short mode: nothing waits for quiet, not even the parts that always do (caps, job
/// schedulers). It checks the tool, not speed, and on a machine shared with builds each of
/// those waits would run to its limit.
pub static NEVER_WAIT: AtomicBool = AtomicBool::new(false);

/// Before a measured part: wait for the machine to be quiet, as the run was told to.
pub fn settle(srv: &Server) {
    let wait = QUIET_WAIT_MS.load(Ordering::Relaxed);
    if wait > 0 {
        wait_quiet(srv.pid(), QUIET_CORES, Duration::from_millis(wait));
    }
}

/// Run `f` on `conns` connections at once. Each returns the jobs it did and a value.
pub fn phase<T, F>(srv: &Server, conns: usize, limit: Duration, f: F) -> Result<Measured<T>, String>
where
    T: Send,
    F: Fn(&mut Ctx) -> Result<(u64, T), String> + Sync,
{
    settle(srv);
    phase_now(srv, conns, limit, f)
}

/// `phase` without waiting for the machine to be quiet first (the caller settled once for a
/// series of short phases).
pub fn phase_now<T, F>(srv: &Server, conns: usize, limit: Duration, f: F) -> Result<Measured<T>, String>
where
    T: Send,
    F: Fn(&mut Ctx) -> Result<(u64, T), String> + Sync,
{
    let mut cs: Vec<Conn> = (0..conns).map(|_| srv.conn()).collect::<Result<_, _>>()?;
    let mut ctl = srv.conn()?;
    let reset = ctl.call(&[b"CONFIG", b"RESETSTAT"]);
    if let Some(e) = reset.err() {
        return Err(format!("CONFIG RESETSTAT: {e}"));
    }
    let barrier = Barrier::new(conns + 1);
    let epoch = Instant::now();
    let (results, secs, cpu_us) = std::thread::scope(|s| {
        let handles: Vec<_> = cs
            .iter_mut()
            .enumerate()
            .map(|(index, conn)| {
                let (barrier, f) = (&barrier, &f);
                s.spawn(move || {
                    barrier.wait();
                    let mut cx =
                        Ctx { conn, index, lat: Vec::new(), deadline: Instant::now() + limit, epoch };
                    let r = f(&mut cx);
                    (r, cx.lat)
                })
            })
            .collect();
        let cpu0 = server::cpu_us(&mut ctl);
        let rep0 = srv.replica_cpu_us();
        let s0 = snap(srv.pid());
        let t0 = Instant::now();
        barrier.wait();
        let results: Vec<_> = handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| (Err("a load thread panicked".into()), vec![])))
            .collect();
        let secs = t0.elapsed().as_secs_f64();
        // With a replica: what the primary spends sending and the replica applying, counted
        // once the replica has caught up.
        let synced = srv.synced(&mut ctl);
        let s1 = snap(srv.pid());
        let cpu1 = server::cpu_us(&mut ctl);
        let rep = match (rep0, srv.replica_cpu_us()) {
            (Some(a), Some(b)) => Some(b - a),
            _ => None,
        };
        (results, secs, (cpu1 - cpu0, foreign(&s0, &s1), client(&s0, &s1), rep, synced))
    });
    let (cpu_us, foreign, client, replica_cpu_us, synced) = cpu_us;
    synced?;
    let inside = server::commandstats(&mut ctl);
    let mut m = Measured {
        jobs: 0,
        secs,
        cpu_us,
        inside,
        lat: Vec::new(),
        out: Vec::with_capacity(conns),
        foreign,
        client,
        replica_cpu_us,
    };
    for (r, lat) in results {
        let (jobs, out) = r?;
        m.jobs += jobs;
        m.out.push(out);
        m.lat.extend(lat);
    }
    Ok(m)
}

/// Commands written into one buffer and sent in one write; their replies read in order.
pub struct Pipe {
    buf: Vec<u8>,
    n: usize,
}

impl Pipe {
    pub fn new() -> Pipe {
        Pipe { buf: Vec::with_capacity(16 * 1024), n: 0 }
    }

    pub fn cmd(&mut self, args: &[&[u8]]) {
        let _ = write!(self.buf, "*{}\r\n", args.len());
        for a in args {
            let _ = write!(self.buf, "${}\r\n", a.len());
            self.buf.extend_from_slice(a);
            self.buf.extend_from_slice(b"\r\n");
        }
        self.n += 1;
    }

    /// Send what is queued without reading: how many replies to read (with `Conn::read`).
    pub fn send(&mut self, c: &mut Conn) -> Result<usize, String> {
        c.send_raw(&self.buf).map_err(|e| format!("send: {e}"))?;
        let n = self.n;
        self.buf.clear();
        self.n = 0;
        Ok(n)
    }

    /// Send what is queued and read as many replies.
    pub fn run(&mut self, c: &mut Conn) -> Result<Vec<Reply>, String> {
        c.send_raw(&self.buf).map_err(|e| format!("send: {e}"))?;
        let mut out = Vec::with_capacity(self.n);
        for _ in 0..self.n {
            out.push(c.read().map_err(|e| format!("read: {e}"))?);
        }
        self.buf.clear();
        self.n = 0;
        Ok(out)
    }
}

/// Percentile `p` (0..=100) of sorted values, nearest rank.
pub fn percentile(sorted: &[u32], p: f64) -> u32 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Split `n` over `k` as evenly as possible: the range of share `i`.
pub fn share(n: u64, k: usize, i: usize) -> std::ops::Range<u64> {
    let k = k as u64;
    let i = i as u64;
    let base = n / k;
    let extra = n % k;
    let lo = i * base + i.min(extra);
    let hi = lo + base + u64::from(i < extra);
    lo..hi
}
