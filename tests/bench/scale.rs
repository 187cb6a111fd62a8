//! Cost as work grows (`--scale`): trafikey's server CPU per job and memory per job for the
//! pipelined lifecycle's two phases — enqueue N jobs into an empty keyspace (the queue grows
//! to N waiting), then claim+complete all of them — as N grows, with the jobs spread over many
//! queues, and with priorities spread over many levels. Each figure is set beside the small
//! queue's (10^3 waiting jobs). Measured, not asserted.

use std::time::{Duration, Instant};

use crate::load::{self, Measured, Pipe};
use crate::queue::{self, Cmds, Engine, Keys, Shape};
use crate::report::{Figure, ScaleFigs, ScaleLine};
use crate::resp::{Conn, Reply};
use crate::server::{self, Server};

/// The small point's phases are repeated on a fresh keyspace until they have covered at least
/// this many jobs (their CPU and memory summed), so its figures are not a few milliseconds'.
const SMALL_COVER: u64 = 50_000;
const SMALL_COVER_SHORT: u64 = 5_000;
/// A point with few jobs runs on fewer connections, so that each still makes at least this
/// many writes of `depth` (and as many full claims): on 50 connections 10^3 jobs would be one
/// short write and one claim each, then an empty claim each, all per-request cost.
const WRITES_PER_CONN: u64 = 8;

/// The connections a point runs on.
pub fn conns_for(jobs: u64, conns: usize, depth: usize) -> usize {
    conns.min(jobs.div_ceil(depth as u64 * WRITES_PER_CONN) as usize).max(1)
}

/// One point of the scale: how many jobs, over how many queues and priority levels.
#[derive(Clone)]
pub struct Point {
    pub label: String,
    pub jobs: u64,
    pub queues: u64,
    /// 1: every job at priority 0 (the wait list); more: priorities 1..=levels (the prio set).
    pub levels: u64,
    /// Fresh keyspace, both phases, this many times; figures summed.
    pub cycles: u64,
    /// The reference every other point is set beside.
    pub small: bool,
}

/// The points of a run: 10^3 (the small queue), 10^5, 10^6 (and 10^7 with `huge`) waiting jobs
/// in one queue; 10 000 queues of 100 jobs each; 10^6 jobs over 1 000 priority levels. The
/// short mode's smoke version: the same kinds at tiny sizes.
pub fn points(short: bool, huge: bool) -> Vec<Point> {
    let one = |jobs: u64, small: bool| Point {
        label: format!("{} waiting jobs, one queue", crate::report::rate(jobs as f64)),
        jobs,
        queues: 1,
        levels: 1,
        cycles: 1,
        small,
    };
    let (sizes, queues, per_queue, prio_jobs, levels): (Vec<u64>, u64, u64, u64, u64) = if short {
        (vec![1_000, 10_000], 100, 20, 2_000, 1_000)
    } else {
        let mut s = vec![1_000, 100_000, 1_000_000];
        if huge {
            s.push(10_000_000);
        }
        (s, 10_000, 100, 1_000_000, 1_000)
    };
    let cover = if short { SMALL_COVER_SHORT } else { SMALL_COVER };
    let mut out: Vec<Point> = sizes.iter().enumerate().map(|(i, &n)| one(n, i == 0)).collect();
    out[0].cycles = cover.div_ceil(out[0].jobs).max(1);
    out.push(Point {
        label: format!(
            "{} queues × {} jobs, workers claiming round-robin",
            crate::report::rate(queues as f64),
            per_queue
        ),
        jobs: queues * per_queue,
        queues,
        levels: 1,
        cycles: 1,
        small: false,
    });
    out.push(Point {
        label: format!(
            "{} waiting jobs, one queue, priorities over {} levels",
            crate::report::rate(prio_jobs as f64),
            crate::report::rate(levels as f64)
        ),
        jobs: prio_jobs,
        queues: 1,
        levels,
        cycles: 1,
        small: false,
    });
    out
}

/// The queue of job j, and its priority (None: priority 0, the wait list).
fn queue_of(j: u64, queues: u64) -> usize {
    (j % queues) as usize
}

fn priority_of(j: u64, levels: u64) -> Option<u64> {
    // A multiplicative hash, so that consecutive jobs land on scattered levels.
    (levels > 1).then(|| 1 + (j.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 33) % levels)
}

/// The queues' keys: `bench` alone, or `bench0` … for many.
fn queue_keys(queues: u64) -> Vec<Keys> {
    if queues == 1 {
        vec![Keys::new(queue::QUEUE)]
    } else {
        (0..queues).map(|q| Keys::new(&format!("{}{q}", queue::QUEUE))).collect()
    }
}

/// Enqueue jobs 0..n, job j into queue j % queues at its priority; `depth` per write.
fn enqueue(srv: &Server, keys: &[Keys], n: u64, levels: u64, s: Shape) -> Result<Measured<()>, String> {
    let native = Engine::Native;
    load::phase_now(srv, s.conns, s.limit, |cx| {
        let mut p = Pipe::new();
        let mine: Vec<u64> = load::share(n, s.conns, cx.index).collect();
        for chunk in mine.chunks(s.depth) {
            cx.check_time()?;
            for &j in chunk {
                let cmds = Cmds { engine: &native, keys: &keys[queue_of(j, keys.len() as u64)] };
                cmds.enqueue_at(&mut p, &queue::jid(j), priority_of(j, levels));
            }
            for r in p.run(cx.conn)? {
                queue::expect_one(&r, "ENQUEUE")?;
            }
        }
        Ok((mine.len() as u64, ()))
    })
}

/// Claim and complete until every queue is empty, pipelined: each write carries the COMPLETEs
/// of the last claim's jobs and the next `CLAIM … COUNT depth`. One queue: every worker
/// claims from it until a claim comes back empty. Many queues (at least one per worker):
/// worker i owns the queues q with q % workers = i and claims from them round-robin, one
/// claim per queue in turn; a queue leaves its rotation when a claim gives fewer than COUNT
/// (nobody else claims from it).
fn drain(srv: &Server, keys: &[Keys], s: Shape) -> Result<Measured<()>, String> {
    let native = Engine::Native;
    let shared = keys.len() == 1;
    load::phase_now(srv, s.conns, s.limit, |cx| {
        let mut p = Pipe::new();
        let mut rotation: Vec<usize> =
            if shared { vec![0] } else { (cx.index..keys.len()).step_by(s.conns).collect() };
        let mut at = 0usize;
        let mut done = 0u64;
        let mut held: Vec<Vec<u8>> = Vec::new();
        let mut held_q = 0usize;
        let mut tok = queue::token(cx, 0);
        let mut round = 0u64;
        while !rotation.is_empty() || !held.is_empty() {
            cx.check_time()?;
            round += 1;
            let next = queue::token(cx, round);
            let finishing = Cmds { engine: &native, keys: &keys[held_q] }.finish(
                &mut p,
                &held,
                &tok,
                queue::Finish::Each,
            );
            let q = (!rotation.is_empty()).then(|| {
                at %= rotation.len();
                rotation[at]
            });
            if let Some(q) = q {
                Cmds { engine: &native, keys: &keys[q] }.claim(&mut p, &next, s.depth);
            }
            let r = p.run(cx.conn)?;
            if r.len() != finishing + usize::from(q.is_some()) {
                return Err(format!(
                    "{} replies for {} commands",
                    r.len(),
                    finishing + usize::from(q.is_some())
                ));
            }
            queue::check_finish(&r[..finishing], held.len(), queue::Finish::Each)?;
            done += held.len() as u64;
            held = Vec::new();
            if let Some(q) = q {
                held = queue::claimed(&r[finishing])?;
                held_q = q;
                if held.is_empty() || (!shared && held.len() < s.depth) {
                    rotation.remove(at);
                } else {
                    at += 1;
                }
            }
            tok = next;
        }
        Ok((done, ()))
    })
}

/// Wait until the server has dropped the phase's connections (their buffers are part of
/// `used_memory`): `connected_clients` back to `want`, 5 s at most.
fn clients_back(c: &mut Conn, want: u64) -> Result<(), String> {
    let t0 = Instant::now();
    loop {
        let now = connected(c);
        if now <= want {
            return Ok(());
        }
        if t0.elapsed() > Duration::from_secs(5) {
            return Err(format!("{now} clients still connected after the phase (expected {want})"));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn connected(c: &mut Conn) -> u64 {
    server::info(c, "clients", "connected_clients").and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// `used_memory`, read twice: the first INFO may itself grow this connection's buffers.
fn memory_now(c: &mut Conn) -> i64 {
    server::used_memory(c);
    server::used_memory(c)
}

/// After a drain: every queue's wait, prio and active empty.
fn check_empty(c: &mut Conn, keys: &[Keys]) -> Result<(), String> {
    for chunk in keys.chunks(500) {
        let mut p = Pipe::new();
        for k in chunk {
            p.cmd(&[b"LLEN", k.wait()]);
            p.cmd(&[b"ZCARD", k.prio()]);
            p.cmd(&[b"ZCARD", k.active()]);
        }
        for (i, r) in p.run(c)?.iter().enumerate() {
            if !matches!(r, Reply::Int(0)) {
                return Err(format!(
                    "after the drain: {} of a queue holds {r:?}",
                    ["wait", "prio", "active"][i % 3]
                ));
            }
        }
    }
    Ok(())
}

/// One pass over one point: its figures, summed over its cycles.
pub struct Run {
    pub enq_cpu_us: f64,
    pub enq_secs: f64,
    pub drain_cpu_us: f64,
    pub drain_secs: f64,
    pub mem_bytes: f64,
    pub jobs: u64,
    pub claims: u64,
    /// Cores other processes used, over the point's phases.
    pub foreign: f64,
}

/// Measure one point once (its cycles): fresh keyspace, enqueue (memory read after it, once
/// the phase's connections are gone), claim+complete, the queues checked empty.
pub fn run_point(
    srv: &Server,
    c: &mut Conn,
    pt: &Point,
    conns: usize,
    depth: usize,
    limit: Duration,
) -> Result<Run, String> {
    let keys = queue_keys(pt.queues);
    let conns = conns_for(pt.jobs, conns, depth);
    let s = Shape { conns, depth, limit };
    // The server's per-command latency histograms (tens of KB each) come and go with the
    // phases' CONFIG RESETSTAT: that would be memory of the phase. Off while measuring.
    let tracking = queue::config_get(c, "latency-tracking")?;
    queue::config_set(c, "latency-tracking", "no")?;
    // …and the histograms made before, freed now rather than inside the first phase.
    if let Some(e) = c.call(&[b"CONFIG", b"RESETSTAT"]).err() {
        return Err(format!("CONFIG RESETSTAT: {e}"));
    }
    let r = cycles(srv, c, pt, &keys, s);
    queue::config_set(c, "latency-tracking", &tracking)?;
    r
}

fn cycles(srv: &Server, c: &mut Conn, pt: &Point, keys: &[Keys], s: Shape) -> Result<Run, String> {
    let mut run = Run {
        enq_cpu_us: 0.0,
        enq_secs: 0.0,
        drain_cpu_us: 0.0,
        drain_secs: 0.0,
        mem_bytes: 0.0,
        jobs: 0,
        claims: 0,
        foreign: 0.0,
    };
    load::settle(srv);
    // Only this connection, once the server has let go of the last phase's: a client freed
    // during a phase is CPU and memory of that phase.
    let clients = if clients_back(c, 1).is_ok() { 1 } else { connected(c) };
    for _ in 0..pt.cycles {
        crate::fresh(c)?;
        clients_back(c, clients)?;
        let m0 = memory_now(c);
        let e = enqueue(srv, keys, pt.jobs, pt.levels, s)?;
        if e.jobs != pt.jobs {
            return Err(format!("enqueued {} of {} jobs", e.jobs, pt.jobs));
        }
        clients_back(c, clients)?;
        let m1 = memory_now(c);
        let d = drain(srv, keys, s)?;
        if d.jobs != pt.jobs {
            return Err(format!("claimed and completed {} of {} jobs", d.jobs, pt.jobs));
        }
        check_empty(c, keys)?;
        clients_back(c, clients)?;
        run.enq_cpu_us += e.cpu_us;
        run.enq_secs += e.secs;
        run.drain_cpu_us += d.cpu_us;
        run.drain_secs += d.secs;
        run.mem_bytes += (m1 - m0) as f64;
        run.jobs += pt.jobs;
        run.claims += d.inside.iter().find(|(n, _, _)| n == "emq.claim").map_or(0, |(_, calls, _)| *calls);
        // Other load over the point's phases, weighted by their length (one short phase's
        // /proc ticks alone say little).
        run.foreign += e.foreign * e.secs + d.foreign * d.secs;
    }
    crate::fresh(c)?;
    run.foreign /= (run.enq_secs + run.drain_secs).max(1e-9);
    Ok(run)
}

/// A point's line of the table from its passes: each figure the median pass, on its own.
pub fn summarise(pt: &Point, conns: usize, depth: usize, runs: Vec<Result<Run, String>>) -> ScaleLine {
    let conns = conns_for(pt.jobs, conns, depth);
    let result = (|| {
        let runs: Vec<Run> = runs.into_iter().collect::<Result<_, _>>()?;
        if runs.is_empty() {
            return Err("not measured".to_string());
        }
        let fig = |per_job: &dyn Fn(&Run) -> f64, rate: &dyn Fn(&Run) -> f64| -> Figure {
            let mut v: Vec<(f64, f64)> = runs.iter().map(|r| (per_job(r), rate(r))).collect();
            v.sort_by(|a, b| a.0.total_cmp(&b.0));
            let (median, rate) = v[(v.len() - 1) / 2];
            Figure { median, passes: v.iter().map(|x| x.0).collect(), rate }
        };
        Ok(ScaleFigs {
            enqueue: fig(&|r| r.enq_cpu_us / r.jobs as f64, &|r| r.jobs as f64 / r.enq_secs),
            drain: fig(&|r| r.drain_cpu_us / r.jobs as f64, &|r| r.jobs as f64 / r.drain_secs),
            memory: fig(&|r| r.mem_bytes / r.jobs as f64, &|_| f64::NAN),
            jobs_per_claim: {
                let (j, c) = runs.iter().fold((0u64, 0u64), |a, r| (a.0 + r.jobs, a.1 + r.claims));
                if c > 0 {
                    j as f64 / c as f64
                } else {
                    f64::NAN
                }
            },
            foreign: runs.iter().map(|r| r.foreign).fold(0.0, f64::max),
        })
    })();
    ScaleLine {
        label: pt.label.clone(),
        jobs: pt.jobs,
        queues: pt.queues,
        levels: pt.levels,
        cycles: pt.cycles,
        conns,
        small: pt.small,
        result,
    }
}
