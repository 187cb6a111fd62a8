//! Waiting and upkeep: workers that wait inside the server (`EMQ.CLAIM … BLOCK ms`) and the
//! module's own timer promoting scheduled jobs the moment they fall due (trafikey only: the
//! twin has neither).
//!
//! * Wake latency: `workers` connections waiting in `CLAIM … BLOCK`, one ENQUEUE every `gap`
//!   from a connection of its own: from the ENQUEUE sent to the waiting worker's CLAIM reply
//!   read, both on this process's monotonic clock.
//! * Lateness of scheduled jobs: the same waiting workers, one `EMQ.SCHEDULE` every `gap` with
//!   an absolute `when` = the server's `TIME` (read just before) + d, d spread over a range:
//!   from that due time, placed on the monotonic clock by the TIME call's round trip, to the
//!   worker's CLAIM reply read.
//! * Idle cost: the server's CPU over a window with `conns` connections on an empty queue that
//!   do nothing, wait in `CLAIM … BLOCK 0`, or poll with a plain CLAIM every 10 ms.
//! * Blocking workers' throughput: workers looping the COMPLETEs of what they hold and
//!   `CLAIM … COUNT d BLOCK 1000` in one write, fed by pipelining producers or a prefilled queue.
//!
//! Every wait is ended by `CLIENT UNBLOCK <id> TIMEOUT` (or its own timeout), and every
//! workload checks afterwards that no client is left blocked.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::load::{self, Ctx, Measured, Pipe};
use crate::queue::{self, jid, jnum, Cmds, Engine, Keys, Sent, QUEUE};
use crate::report::IdleFig;
use crate::resp::{Conn, Reply};
use crate::server::{self, Server};

/// How long a waiter of the wake and lateness workloads waits before it asks again (its
/// waits are ended by CLIENT UNBLOCK at the end anyway).
const WAITER_BLOCK_MS: u64 = 2_000;
/// The blocking workers' `BLOCK` in the throughput workloads.
pub const WORKER_BLOCK_MS: u64 = 1_000;
/// The pollers' period in the idle workload.
pub const POLL_EVERY: Duration = Duration::from_millis(10);

fn call(c: &mut Conn, args: &[&[u8]]) -> Result<Reply, String> {
    c.send(args).map_err(|e| format!("send: {e}"))?;
    c.read().map_err(|e| format!("read: {e}"))
}

fn info_u64(c: &mut Conn, section: &str, field: &str) -> u64 {
    server::info(c, section, field).and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// `INFO clients` `blocked_clients`.
pub fn blocked_clients(c: &mut Conn) -> u64 {
    info_u64(c, "clients", "blocked_clients")
}

/// Wait (at most `limit`) until exactly `n` clients are blocked.
fn wait_blocked(c: &mut Conn, n: usize, limit: Duration) -> Result<(), String> {
    let t0 = Instant::now();
    loop {
        let b = blocked_clients(c);
        if b == n as u64 {
            return Ok(());
        }
        if t0.elapsed() > limit {
            return Err(format!("{b} clients blocked after {limit:?}, expected {n}"));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// After a workload: no client is left blocked (a second at most for the last to go).
pub fn none_blocked(srv: &Server) -> Result<(), String> {
    wait_blocked(&mut srv.conn()?, 0, Duration::from_secs(1)).map_err(|e| format!("after the workload: {e}"))
}

/// The waiting connections of a workload: their client ids, and how they are told to stop.
struct Crew {
    ids: Mutex<Vec<u64>>,
    stop: AtomicBool,
    left: AtomicUsize,
}

impl Crew {
    fn new() -> Crew {
        Crew { ids: Mutex::new(Vec::new()), stop: AtomicBool::new(false), left: AtomicUsize::new(0) }
    }

    /// A connection joins: its id, for CLIENT UNBLOCK.
    fn join(&self, c: &mut Conn) -> Result<(), String> {
        match call(c, &[b"CLIENT", b"ID"])? {
            Reply::Int(id) => {
                self.ids.lock().unwrap_or_else(|e| e.into_inner()).push(id as u64);
                Ok(())
            }
            other => Err(format!("CLIENT ID answered {other:?}")),
        }
    }

    /// Something outside the crew failed: stop it.
    fn fail(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }

    fn stopping(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// A connection's loop is over (however it ended); a failure stops the others too.
    fn leave<T>(&self, r: Result<T, String>) -> Result<T, String> {
        if r.is_err() {
            self.stop.store(true, Ordering::SeqCst);
        }
        self.left.fetch_add(1, Ordering::SeqCst);
        r
    }

    /// Stop: raise the flag, then end every wait with CLIENT UNBLOCK … TIMEOUT until all `n`
    /// connections have left their loops (one that was about to wait when the flag rose is
    /// unblocked on the next pass).
    fn stop_all(&self, c: &mut Conn, n: usize) -> Result<(), String> {
        self.stop.store(true, Ordering::SeqCst);
        let t0 = Instant::now();
        while self.left.load(Ordering::SeqCst) < n {
            if t0.elapsed() > Duration::from_secs(10) {
                return Err("the waiting connections did not stop".into());
            }
            let ids = self.ids.lock().unwrap_or_else(|e| e.into_inner()).clone();
            for id in ids {
                let id = id.to_string();
                if let Some(e) = call(c, &[b"CLIENT", b"UNBLOCK", id.as_bytes(), b"TIMEOUT"])?.err() {
                    return Err(format!("CLIENT UNBLOCK: {e}"));
                }
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(())
    }
}

/// Jobs completed so far, and a wait for all of them (no polling: the client threads share
/// the machine's cores with the server).
struct Done {
    n: AtomicU64,
    all: u64,
    lock: Mutex<()>,
    cv: Condvar,
}

impl Done {
    fn new(all: u64) -> Done {
        Done { n: AtomicU64::new(0), all, lock: Mutex::new(()), cv: Condvar::new() }
    }

    fn add(&self, k: u64) {
        if self.n.fetch_add(k, Ordering::SeqCst) + k >= self.all {
            let _g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
            self.cv.notify_all();
        }
    }

    fn get(&self) -> u64 {
        self.n.load(Ordering::SeqCst)
    }

    /// Wait until all are done (true), or until `give_up` says so or `deadline` passes (false;
    /// both are looked at every 10 ms).
    fn wait(&self, deadline: Instant, give_up: impl Fn() -> bool) -> bool {
        let mut g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if self.get() >= self.all {
                return true;
            }
            if give_up() || Instant::now() > deadline {
                return false;
            }
            g = self.cv.wait_timeout(g, Duration::from_millis(10)).unwrap_or_else(|e| e.into_inner()).0;
        }
    }
}

/// Per job, the moment its latency counts from (ns after `epoch`, +1 so that 0 is unset).
struct Marks {
    epoch: Instant,
    at: Vec<AtomicU64>,
}

impl Marks {
    fn new(n: u64) -> Marks {
        Marks { epoch: Instant::now(), at: (0..n).map(|_| AtomicU64::new(0)).collect() }
    }

    fn set(&self, j: u64, t: Instant) {
        if let Some(a) = self.at.get(j as usize) {
            a.store(t.saturating_duration_since(self.epoch).as_nanos() as u64 + 1, Ordering::SeqCst);
        }
    }

    /// µs from job `id`'s mark to `now` (negative: before it).
    fn since(&self, id: &[u8], now: Instant) -> Option<i64> {
        let m = self.at.get(jnum(id)? as usize)?.load(Ordering::SeqCst).checked_sub(1)?;
        let now = now.duration_since(self.epoch).as_nanos() as i64;
        Some((now - m as i64) / 1000)
    }
}

/// What a wake or lateness workload gave besides its figures.
pub struct Waited {
    pub m: Measured<()>,
    /// Waits that ended with a job (`trafikey_woken`) and by their own timeout, during it.
    pub woken: u64,
    pub timeouts: u64,
    /// Jobs held before their mark (lateness: before the due time as placed on this clock).
    pub early: u64,
    /// The producer's own calls' round trips (wake: each ENQUEUE's), µs, sorted.
    pub rtt: Vec<u32>,
}

/// One waiting worker: `CLAIM … BLOCK`, and for each job it gets the latency from its mark,
/// then its COMPLETE; until told to stop.
fn waiter(
    conn: &mut Conn,
    index: usize,
    crew: &Crew,
    marks: &Marks,
    done: &Done,
    early: &AtomicU64,
) -> Result<Vec<u32>, String> {
    let (engine, keys) = (Engine::Native, Keys::new(QUEUE));
    let cmds = Cmds { engine: &engine, keys: &keys };
    crew.join(conn)?;
    let mut lat = Vec::new();
    let mut p = Pipe::new();
    let mut round = 0u64;
    while !crew.stopping() {
        round += 1;
        let tok = format!("b{index}-{round}").into_bytes();
        cmds.claim_block(&mut p, &tok, 1, Some(WAITER_BLOCK_MS));
        let r = p.run(conn)?;
        let now = Instant::now();
        let got = queue::claimed(&r[0])?;
        if got.is_empty() {
            continue;
        }
        for id in &got {
            let us = marks.since(id, now).ok_or("a job without its mark")?;
            if us < 0 {
                early.fetch_add(1, Ordering::Relaxed);
            }
            lat.push(u32::try_from(us.max(0)).unwrap_or(u32::MAX));
            cmds.complete(&mut p, id, &tok);
        }
        for x in p.run(conn)? {
            queue::expect_one(&x, "COMPLETE")?;
        }
        done.add(got.len() as u64);
    }
    Ok(lat)
}

/// What feeds the waiting workers: it marks each job and gives back its calls' round trips.
type Produce<'a> = dyn Fn(&mut Conn, &Marks) -> Result<Vec<u32>, String> + Sync + 'a;

/// `workers` waiting workers; once all are blocked, `produce` feeds `jobs` jobs (marking
/// each, and giving back its calls' round trips) and the measured part lasts until the last
/// is completed.
fn with_waiters(
    srv: &Server,
    workers: usize,
    jobs: u64,
    limit: Duration,
    produce: &Produce,
) -> Result<Waited, String> {
    load::settle(srv);
    let marks = Marks::new(jobs);
    let crew = Crew::new();
    let (done, early) = (Done::new(jobs), AtomicU64::new(0));
    let mut ctl = srv.conn()?;
    let mut prod = srv.conn()?;
    let mut cs: Vec<Conn> = (0..workers).map(|_| srv.conn()).collect::<Result<_, _>>()?;
    if let Some(e) = call(&mut ctl, &[b"CONFIG", b"RESETSTAT"])?.err() {
        return Err(format!("CONFIG RESETSTAT: {e}"));
    }
    let (measured, stopped, lats) = std::thread::scope(|s| {
        let handles: Vec<_> = cs
            .iter_mut()
            .enumerate()
            .map(|(index, conn)| {
                let (crew, marks, done, early) = (&crew, &marks, &done, &early);
                s.spawn(move || crew.leave(waiter(conn, index, crew, marks, done, early)))
            })
            .collect();
        let measured = (|| {
            wait_blocked(&mut ctl, workers, Duration::from_secs(10))?;
            let count = |c: &mut Conn| {
                (info_u64(c, "trafikey", "trafikey_woken"), info_u64(c, "trafikey", "trafikey_timeouts"))
            };
            let (w0, to0) = count(&mut ctl);
            let cpu0 = server::cpu_us(&mut ctl);
            let s0 = load::snap(srv.pid());
            let t0 = Instant::now();
            let rtt = produce(&mut prod, &marks)?;
            if !done.wait(Instant::now() + limit, || crew.stopping()) {
                return Err(if crew.stopping() {
                    "a waiting worker failed".to_string()
                } else {
                    format!("{} of {jobs} jobs held after the time limit", done.get())
                });
            }
            let secs = t0.elapsed().as_secs_f64();
            let s1 = load::snap(srv.pid());
            let cpu1 = server::cpu_us(&mut ctl);
            let (w1, to1) = count(&mut ctl);
            let (foreign, client) = (load::foreign(&s0, &s1), load::client(&s0, &s1));
            Ok((secs, cpu1 - cpu0, foreign, client, w1 - w0, to1 - to0, rtt))
        })();
        let stopped = crew.stop_all(&mut ctl, workers);
        let lats: Vec<_> = handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("a waiting worker panicked".into())))
            .collect();
        (measured, stopped, lats)
    });
    let (secs, cpu_us, foreign, client, woken, timeouts, mut rtt) = measured?;
    rtt.sort_unstable();
    stopped?;
    let mut lat = Vec::new();
    for l in lats {
        lat.extend(l?);
    }
    let inside = server::commandstats(&mut ctl);
    none_blocked(srv)?;
    queue::check_sets(srv, 0)?;
    let m = Measured {
        jobs: lat.len() as u64,
        secs,
        cpu_us,
        inside,
        lat,
        out: vec![],
        foreign,
        client,
        replica_cpu_us: None,
    };
    Ok(Waited { m, woken, timeouts, early: early.load(Ordering::Relaxed), rtt })
}

/// Sleep until `t0 + gap × k`.
fn pace(t0: Instant, gap: Duration, k: u64) {
    let at = t0 + gap * u32::try_from(k).unwrap_or(u32::MAX);
    let now = Instant::now();
    if at > now {
        std::thread::sleep(at - now);
    }
}

/// Wake latency: `jobs` ENQUEUEs, one every `gap`, to `workers` waiting workers.
pub fn wake(
    srv: &Server,
    workers: usize,
    jobs: u64,
    gap: Duration,
    limit: Duration,
) -> Result<Waited, String> {
    let produce = |c: &mut Conn, marks: &Marks| -> Result<Vec<u32>, String> {
        let (engine, keys) = (Engine::Native, Keys::new(QUEUE));
        let cmds = Cmds { engine: &engine, keys: &keys };
        let mut p = Pipe::new();
        let mut rtt = Vec::with_capacity(jobs as usize);
        let t0 = Instant::now();
        for j in 0..jobs {
            cmds.enqueue(&mut p, &jid(j));
            let t = Instant::now();
            marks.set(j, t);
            queue::expect_one(&p.run(c)?[0], "ENQUEUE")?;
            rtt.push(u32::try_from(t.elapsed().as_micros()).unwrap_or(u32::MAX));
            pace(t0, gap, j + 1);
        }
        Ok(rtt)
    };
    with_waiters(srv, workers, jobs, limit, &produce)
}

/// The delay of the `j`-th scheduled job, spread over `lo..=hi` ms (the same in bench.mjs).
pub fn delay_ms(j: u64, (lo, hi): (u64, u64)) -> u64 {
    lo + (j * 7919) % (hi - lo + 1)
}

/// A TIME round trip short enough to place the server's clock on ours (µs); past it, TIME is
/// asked again (a few times at most, keeping the shortest).
const TIME_RTT_US: u128 = 200;

/// The server's clock (µs) and the moment of this process's clock it belongs to: the middle of
/// the TIME call's round trip (the shortest of a few when the machine is busy).
fn server_time(c: &mut Conn) -> Result<(Instant, u64), String> {
    let mut best: Option<(Duration, Instant, u64)> = None;
    for _ in 0..4 {
        let t0 = Instant::now();
        let r = call(c, &[b"TIME"])?;
        let rtt = t0.elapsed();
        let us = match &r {
            Reply::Array(a) if a.len() == 2 => {
                let n = |x: &Reply| std::str::from_utf8(x.bytes()).ok().and_then(|s| s.parse::<u64>().ok());
                match (n(&a[0]), n(&a[1])) {
                    (Some(s), Some(us)) => s * 1_000_000 + us,
                    _ => return Err(format!("TIME answered {r:?}")),
                }
            }
            _ => return Err(format!("TIME answered {r:?}")),
        };
        if best.is_none_or(|(b, _, _)| rtt < b) {
            best = Some((rtt, t0 + rtt / 2, us));
        }
        if rtt.as_micros() <= TIME_RTT_US {
            break;
        }
    }
    best.map(|(_, at, us)| (at, us)).ok_or_else(|| "no TIME".to_string())
}

/// Lateness: `jobs` SCHEDULEs, one every `gap`, each due `delay_ms(j)` after the server's TIME
/// read just before it (an absolute `when`), to `workers` waiting workers.
pub fn lateness(
    srv: &Server,
    workers: usize,
    jobs: u64,
    gap: Duration,
    spread: (u64, u64),
    limit: Duration,
) -> Result<Waited, String> {
    let produce = |c: &mut Conn, marks: &Marks| -> Result<Vec<u32>, String> {
        let (engine, keys) = (Engine::Native, Keys::new(QUEUE));
        let cmds = Cmds { engine: &engine, keys: &keys };
        let mut p = Pipe::new();
        let t0 = Instant::now();
        for j in 0..jobs {
            let (at, server_us) = server_time(c)?;
            let due_ms = server_us / 1000 + delay_ms(j, spread);
            marks.set(j, at + Duration::from_micros(due_ms * 1000 - server_us));
            cmds.schedule(&mut p, &jid(j), due_ms.to_string().as_bytes());
            queue::expect_one(&p.run(c)?[0], "SCHEDULE")?;
            pace(t0, gap, j + 1);
        }
        Ok(Vec::new())
    };
    with_waiters(srv, workers, jobs, limit, &produce)
}

/// The reference for the wake rows' server CPU: `jobs` ENQUEUEs at the same pace with nobody
/// waiting (they stay in the queue). Latency: each ENQUEUE's round trip.
pub fn paced(srv: &Server, jobs: u64, gap: Duration) -> Result<Measured<()>, String> {
    load::settle(srv);
    let (engine, keys) = (Engine::Native, Keys::new(QUEUE));
    let cmds = Cmds { engine: &engine, keys: &keys };
    let mut ctl = srv.conn()?;
    let mut c = srv.conn()?;
    if let Some(e) = call(&mut ctl, &[b"CONFIG", b"RESETSTAT"])?.err() {
        return Err(format!("CONFIG RESETSTAT: {e}"));
    }
    let mut p = Pipe::new();
    let mut lat = Vec::with_capacity(jobs as usize);
    let cpu0 = server::cpu_us(&mut ctl);
    let s0 = load::snap(srv.pid());
    let t0 = Instant::now();
    for j in 0..jobs {
        cmds.enqueue(&mut p, &jid(j));
        let t = Instant::now();
        queue::expect_one(&p.run(&mut c)?[0], "ENQUEUE")?;
        lat.push(u32::try_from(t.elapsed().as_micros()).unwrap_or(u32::MAX));
        pace(t0, gap, j + 1);
    }
    let secs = t0.elapsed().as_secs_f64();
    let s1 = load::snap(srv.pid());
    let cpu1 = server::cpu_us(&mut ctl);
    let inside = server::commandstats(&mut ctl);
    queue::check_sets(srv, jobs)?;
    let (foreign, client) = (load::foreign(&s0, &s1), load::client(&s0, &s1));
    Ok(Measured {
        jobs,
        secs,
        cpu_us: cpu1 - cpu0,
        inside,
        lat,
        out: vec![],
        foreign,
        client,
        replica_cpu_us: None,
    })
}

/// What the idle connections do.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Idling {
    /// Connected (one PING each), nothing more.
    Nothing,
    /// `CLAIM … BLOCK 0` on the empty queue.
    Waiting,
    /// A plain CLAIM every [`POLL_EVERY`], staggered over the period.
    Polling,
}

fn idle_conn(conn: &mut Conn, index: usize, conns: usize, how: Idling, crew: &Crew) -> Result<(), String> {
    let (engine, keys) = (Engine::Native, Keys::new(QUEUE));
    let cmds = Cmds { engine: &engine, keys: &keys };
    let mut p = Pipe::new();
    let tok = format!("idle{index}").into_bytes();
    match how {
        Idling::Nothing => {
            match call(conn, &[b"PING"])? {
                Reply::Simple(_) => {}
                other => return Err(format!("PING answered {other:?}")),
            }
            while !crew.stopping() {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        Idling::Waiting => {
            crew.join(conn)?;
            while !crew.stopping() {
                cmds.claim_block(&mut p, &tok, 1, Some(0));
                if !queue::claimed(&p.run(conn)?[0])?.is_empty() {
                    return Err("an idle waiter got a job".into());
                }
            }
        }
        Idling::Polling => {
            let t0 = Instant::now() + POLL_EVERY * u32::try_from(index).unwrap_or(0) / conns.max(1) as u32;
            let mut k = 0;
            while !crew.stopping() {
                pace(t0, POLL_EVERY, k);
                k += 1;
                cmds.claim(&mut p, &tok, 1);
                if !queue::claimed(&p.run(conn)?[0])?.is_empty() {
                    return Err("an idle poller got a job".into());
                }
            }
        }
    }
    Ok(())
}

/// The server's CPU over `window` with `conns` connections idling as `how` on the queue as
/// it is (the caller sets it up: empty, or holding leases).
pub fn idle(srv: &Server, how: Idling, conns: usize, window: Duration) -> Result<IdleFig, String> {
    load::settle(srv);
    let crew = Crew::new();
    let mut ctl = srv.conn()?;
    let mut cs: Vec<Conn> = (0..conns).map(|_| srv.conn()).collect::<Result<_, _>>()?;
    let (measured, stopped, ends) = std::thread::scope(|s| {
        let handles: Vec<_> = cs
            .iter_mut()
            .enumerate()
            .map(|(index, conn)| {
                let crew = &crew;
                s.spawn(move || crew.leave(idle_conn(conn, index, conns, how, crew)))
            })
            .collect();
        let measured = (|| {
            match how {
                Idling::Waiting => wait_blocked(&mut ctl, conns, Duration::from_secs(10))?,
                // Every poller past its first period, every idle connection past its PING.
                Idling::Polling | Idling::Nothing => std::thread::sleep(POLL_EVERY * 5),
            }
            if let Some(e) = call(&mut ctl, &[b"CONFIG", b"RESETSTAT"])?.err() {
                return Err(format!("CONFIG RESETSTAT: {e}"));
            }
            let ticks0 = info_u64(&mut ctl, "trafikey", "trafikey_upkeep_ticks");
            let cpu0 = server::cpu_us(&mut ctl);
            let s0 = load::snap(srv.pid());
            let t0 = Instant::now();
            let end = t0 + window;
            while Instant::now() < end {
                if crew.stopping() {
                    return Err("an idle connection failed".to_string());
                }
                std::thread::sleep(
                    Duration::from_millis(20).min(end.saturating_duration_since(Instant::now())),
                );
            }
            let secs = t0.elapsed().as_secs_f64();
            let s1 = load::snap(srv.pid());
            let cpu1 = server::cpu_us(&mut ctl);
            let ticks1 = info_u64(&mut ctl, "trafikey", "trafikey_upkeep_ticks");
            let claims = server::commandstats(&mut ctl)
                .iter()
                .find(|(n, _, _)| n == "emq.claim")
                .map_or(0, |(_, calls, _)| *calls);
            if how == Idling::Waiting && blocked_clients(&mut ctl) != conns as u64 {
                return Err("not every waiter stayed blocked through the window".to_string());
            }
            Ok(IdleFig {
                secs,
                cpu_us: cpu1 - cpu0,
                client: load::client(&s0, &s1),
                foreign: load::foreign(&s0, &s1),
                claims,
                ticks: ticks1.saturating_sub(ticks0),
                passes: vec![],
            })
        })();
        let stopped = crew.stop_all(&mut ctl, conns);
        let ends: Vec<_> = handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("an idle connection panicked".into())))
            .collect();
        (measured, stopped, ends)
    });
    let fig = measured?;
    stopped?;
    for e in ends {
        e?;
    }
    none_blocked(srv)?;
    Ok(fig)
}

/// `n` jobs enqueued and claimed (lease 600 s) by a connection of its own, then left active:
/// leases upkeep has to watch.
pub fn hold_leases(srv: &Server, n: u64) -> Result<(), String> {
    let (engine, keys) = (Engine::Native, Keys::new(QUEUE));
    let cmds = Cmds { engine: &engine, keys: &keys };
    let mut c = srv.conn()?;
    let mut p = Pipe::new();
    for chunk in (0..n).collect::<Vec<_>>().chunks(500) {
        for &j in chunk {
            cmds.enqueue(&mut p, &jid(j));
        }
        for r in p.run(&mut c)? {
            queue::expect_one(&r, "ENQUEUE")?;
        }
    }
    let mut held = 0;
    while held < n {
        cmds.claim(&mut p, format!("holder-{held}").as_bytes(), (n - held).min(1000) as usize);
        let got = queue::claimed(&p.run(&mut c)?[0])?.len() as u64;
        if got == 0 {
            return Err(format!("holding leases: {held} of {n} claimed"));
        }
        held += got;
    }
    Ok(())
}

/// One blocking worker: each write the COMPLETEs of what it holds and `CLAIM … COUNT depth
/// BLOCK 1000`; the COMPLETEs' replies are read (and counted) before the CLAIM's, which may
/// wait. Ends when told to stop with nothing held. Latency per job: its ENQUEUE sent (with
/// producers; else its CLAIM sent) → its COMPLETE answered.
fn blocking_worker(
    cx: &mut Ctx,
    cmds: &Cmds,
    crew: &Crew,
    done: &Done,
    sent: Option<&Sent>,
    depth: usize,
) -> Result<(u64, ()), String> {
    crew.join(cx.conn)?;
    let mut p = Pipe::new();
    let mut held: Vec<Vec<u8>> = Vec::new();
    let mut tok = queue::token(cx, 0);
    let mut claimed_at = Instant::now();
    let mut mine = 0u64;
    for round in 1.. {
        cx.check_time()?;
        let claiming = !crew.stopping();
        if held.is_empty() && !claiming {
            break;
        }
        for id in &held {
            cmds.complete(&mut p, id, &tok);
        }
        let next = queue::token(cx, round);
        let t = Instant::now();
        if claiming {
            cmds.claim_block(&mut p, &next, depth, Some(WORKER_BLOCK_MS));
        }
        p.send(cx.conn)?;
        for id in &held {
            queue::expect_one(&cx.conn.read().map_err(|e| format!("read: {e}"))?, "COMPLETE")?;
            cx.lat.push(match sent {
                Some(s) => s.since(cx, id),
                None => u32::try_from(claimed_at.elapsed().as_micros()).unwrap_or(u32::MAX),
            });
        }
        mine += held.len() as u64;
        done.add(held.len() as u64);
        held = if claiming {
            queue::claimed(&cx.conn.read().map_err(|e| format!("read: {e}"))?)?
        } else {
            Vec::new()
        };
        claimed_at = t;
        tok = next;
    }
    Ok((mine, ()))
}

/// Blocking workers' throughput: `producers` connections enqueue jobs `0..n` (`depth` per
/// write; none: the queue was prefilled with them) while `workers` connections loop
/// [`blocking_worker`]; one more connection ends the waits once all `n` are completed.
pub fn blocking(
    srv: &Server,
    n: u64,
    producers: usize,
    workers: usize,
    depth: usize,
    limit: Duration,
) -> Result<Measured<()>, String> {
    let (engine, keys) = (Engine::Native, Keys::new(QUEUE));
    let cmds = Cmds { engine: &engine, keys: &keys };
    let sent = Sent::new(n);
    let crew = Crew::new();
    let done = Done::new(n);
    load::phase(srv, producers + workers + 1, limit, |cx| {
        if cx.index < producers {
            let mut p = Pipe::new();
            let mine: Vec<u64> = load::share(n, producers, cx.index).collect();
            let r = mine.chunks(depth).try_for_each(|chunk| {
                cx.check_time()?;
                for &j in chunk {
                    sent.mark(cx, j);
                    cmds.enqueue(&mut p, &jid(j));
                }
                p.run(cx.conn)?.iter().try_for_each(|r| queue::expect_one(r, "ENQUEUE"))
            });
            // A producer that fails stops the workers (they would wait for its jobs).
            r.map(|()| (0, ())).inspect_err(|_| crew.fail())
        } else if cx.index < producers + workers {
            let sent = (producers > 0).then_some(&sent);
            crew.leave(blocking_worker(cx, &cmds, &crew, &done, sent, depth))
        } else {
            // The closer: once every job is completed (or a worker failed), end the waits.
            if !done.wait(cx.deadline, || crew.stopping()) && !crew.stopping() {
                // Past the time limit: still end the waits, then fail.
                crew.stop_all(cx.conn, workers)?;
                return Err(format!("{} of {n} jobs completed in the time limit", done.get()));
            }
            crew.stop_all(cx.conn, workers)?;
            Ok((0, ()))
        }
    })
}
