//! trafikey's benchmark: one Valkey started here, three contenders on the same
//! workloads — trafikey's `EMQ.*` verbs, the same transitions as Lua scripts run with
//! EVALSHA (tests/bench/lua/), and BullMQ (tests/bench/bullmq/, through Node) — plus the
//! floor (the lifecycle's writes as plain pipelined commands) and a plain SET as the
//! per-request reference; and the coherence drop, `TRA.DROP` beside EVALSHA of the coherence
//! drop's reference Lua script (tests/fixtures/coherence_drop.lua). Prints the figures side by
//! side, writes target/bench/results.md and, on a full run, the benchmark's generated results
//! page (tests/bench/RESULTS.md) between `<!-- bench:start -->` and `<!-- bench:end -->`; the
//! notebook beside it (README.md) is written by people, never by a run.
//!
//! Run it with `scripts/bench` (builds the module, finds the server, installs BullMQ), or
//! `scripts/bench --short` for the quick check that every contender and workload works.
//!
//! ChasquiMQ (tests/bench/chasquimq/, a driver binary of its own, patched for Valkey) runs
//! beside them, and the process and lifecycle workloads run again in the production modes:
//! events off, one replica attached, AOF everysec (the last two on servers of their own).
//! The figures also go to target/bench/results.json.
//!
//! Options: --short, --n N, --mem M, --no-bullmq, --no-chasquimq, --no-modes, --no-notebook (leave tests/bench/RESULTS.md
//! alone on a full run; --no-readme is the same), --phase-limit SECONDS,
//! --quiet-wait SECONDS (how long each phase may wait for other processes on the machine to
//! go below 0.15 cores before it starts; 60 by default, 0 in the short mode), --only LIST
//! (some of trafikey,lua,bullmq,chasquimq,floor,set), --repeat R (passes over every workload, each
//! figure the median pass: 3 by default, 1 in the short mode), --only-waiting (only the waiting
//! workloads — wake latency, lateness of scheduled jobs, idle cost, blocking workers — and the
//! pipelined workloads they stand beside), --scale (after the passes, "Cost as work grows":
//! tests/bench/scale.rs; its smoke version runs in the short mode), --scale-huge (with the
//! 10^7-job point), --only-scale (the scale points alone), --caps (first, "Calls at their
//! caps": tests/bench/caps.rs, each batch call at its cap beside 10^6 jobs and the longest
//! event-loop cycle while upkeep catches up, beside the 2 ms goal; its smoke version runs in the
//! short mode), --only-caps (that alone), --only-forms (only the rows of the BullMQ forms —
//! `TRA.ADD` beside ChasquiMQ's `add_bulk`, the finish-and-fetch lifecycle, `CLAIM … ROW`,
//! BullMQ on trafikey beside BullMQ on Valkey: tests/bench/forms.rs — and the rows they are
//! held to). A run with --only, --only-waiting, --only-scale, --only-caps, --only-forms or
//! --short never touches tests/bench/RESULTS.md.
//! Environment: TRAFIKEY_MODULE (the .so), VALKEY_SERVER, BENCH_BULLMQ_DIR (BullMQ installed
//! with bench.mjs), BENCH_BULLMQ_WHY (the note when BullMQ is skipped), BENCH_CHASQUIMQ (the
//! ChasquiMQ driver's binary, or the stand-in the short mode runs in its place),
//! BENCH_CHASQUIMQ_STANDIN (set when it is the stand-in: why), BENCH_CHASQUIMQ_WHY (the note
//! when it is skipped), BENCH_SCRATCH (where the server's data dir goes), BENCH_TRAFIKEY_BULLMQ
//! (clients/bullmq's built dist/index.js, for BullMQ on trafikey), BENCH_TRAFIKEY_BULLMQ_WHY (the
//! note when that is skipped).
// A test may panic: that is how it fails. The module's own rules are for src/.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

use trafikey_support::resp;

mod bullmq;
mod caps;
mod chasquimq;
mod coherence;
mod driver;
mod forms;
mod load;
mod queue;
mod report;
mod scale;
mod sched;
mod server;
mod waiting;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Duration;

use coherence::Lane;
use load::Measured;
use queue::{Engine, Shape};
use report::{Idles, Memory, Pass, Report, Row, Setting, Status, WaitSetup, Who, DROP};
use resp::{Conn, Reply};
use server::Server;

const CONNS: usize = 50;
const DEPTH: usize = 32;
/// The waiting workloads: workers waiting for the wake and lateness jobs, the producers'
/// pace, the scheduled jobs' delays (ms), the active leases of the idle window with leases.
const WAITERS: usize = 8;
const WAIT_GAP: Duration = Duration::from_millis(2);
const SPREAD: (u64, u64) = (50, 500);
const LEASES: u64 = 1_000;
/// BullMQ's waiting workers: Workers × concurrency (as many slots as trafikey's waiters).
const BULL_WAITERS: (usize, usize) = (2, 4);
/// The benchmark's generated results page, from the repository's root: a full run rewrites
/// its tables.
const NOTEBOOK: &str = "tests/bench/RESULTS.md";

struct Opts {
    short: bool,
    n: u64,
    mem: u64,
    bullmq: bool,
    chasquimq: bool,
    /// Whether the production modes' servers (AOF, a replica) run.
    modes: bool,
    /// Whether a full run rewrites the results page's tables (tests/bench/RESULTS.md).
    notebook: bool,
    phase_limit: Duration,
    /// How long each phase may wait for other processes to quieten down.
    quiet_wait: Duration,
    /// The contenders to run (all when empty).
    only: Vec<Who>,
    /// Passes over every workload; each figure is the median pass.
    repeat: usize,
    /// Only the waiting workloads and the pipelined ones they stand beside.
    only_waiting: bool,
    /// Jobs of the wake and lateness workloads; the idle windows' length.
    wait_jobs: u64,
    idle_window: Duration,
    /// Cost as work grows (trafikey): the scale points after the passes.
    scale: bool,
    /// The 10^7-job point too.
    scale_huge: bool,
    /// Only the scale points (trafikey), no passes over the other workloads.
    only_scale: bool,
    /// Calls at their caps beside a million jobs, and upkeep catching up (`caps.rs`), before
    /// the passes; with `only_caps`, nothing else.
    caps: bool,
    only_caps: bool,
    /// Only the rows of the BullMQ forms (`forms.rs`: TRA.ADD, finish-and-fetch, CLAIM … ROW;
    /// BullMQ on trafikey beside BullMQ on Valkey) and the rows they are held to.
    only_forms: bool,
    /// Job schedulers at scale (`sched.rs`), before the passes; with `only_sched`, nothing else.
    sched: bool,
    only_sched: bool,
}

impl Opts {
    fn wants(&self, w: Who) -> bool {
        (self.only.is_empty() || self.only.contains(&w))
            && (w != Who::BullMq || self.bullmq)
            && (w != Who::ChasquiMq || self.chasquimq)
    }
}

fn parse_args() -> Result<Opts, String> {
    let mut o = Opts {
        short: false,
        n: 100_000,
        mem: 100_000,
        bullmq: true,
        chasquimq: true,
        modes: true,
        notebook: true,
        phase_limit: Duration::from_secs(300),
        quiet_wait: Duration::from_secs(60),
        only: vec![],
        repeat: 3,
        only_waiting: false,
        wait_jobs: 3_000,
        idle_window: Duration::from_secs(10),
        scale: false,
        scale_huge: false,
        only_scale: false,
        caps: false,
        only_caps: false,
        only_forms: false,
        sched: false,
        only_sched: false,
    };
    let mut n = None;
    let mut mem = None;
    let mut limit = None;
    let mut quiet = None;
    let mut repeat = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |what: &str| -> Result<u64, String> {
            args.next().and_then(|v| v.parse().ok()).ok_or(format!("{what} needs a number"))
        };
        match a.as_str() {
            "--short" => o.short = true,
            "--n" => n = Some(value("--n")?),
            "--mem" => mem = Some(value("--mem")?),
            "--phase-limit" => limit = Some(value("--phase-limit")?),
            "--no-bullmq" => o.bullmq = false,
            "--no-chasquimq" => o.chasquimq = false,
            "--no-modes" => o.modes = false,
            "--no-notebook" | "--no-readme" => o.notebook = false,
            "--quiet-wait" => quiet = Some(value("--quiet-wait")?),
            "--repeat" => repeat = Some(value("--repeat")?),
            "--only-waiting" => o.only_waiting = true,
            "--scale" => o.scale = true,
            "--scale-huge" => (o.scale, o.scale_huge) = (true, true),
            "--only-scale" => (o.scale, o.only_scale) = (true, true),
            "--caps" => o.caps = true,
            "--only-caps" => (o.caps, o.only_caps) = (true, true),
            "--only-forms" => o.only_forms = true,
            "--sched" => o.sched = true,
            "--only-sched" => (o.sched, o.only_sched) = (true, true),
            "--only" => {
                for w in args.next().ok_or("--only needs a list")?.split(',') {
                    o.only.push(match w {
                        "trafikey" => Who::Trafikey,
                        "lua" => Who::Lua,
                        "bullmq" => Who::BullMq,
                        "floor" => Who::Floor,
                        "set" => Who::Set,
                        "chasquimq" => Who::ChasquiMq,
                        other => {
                            return Err(format!(
                                "--only: unknown contender {other} (trafikey, lua, bullmq, chasquimq, floor, set)"
                            ))
                        }
                    });
                }
            }
            // cargo bench passes --bench to harness = false targets.
            "--bench" => {}
            "-h" | "--help" => {
                println!("usage: scripts/bench [--short] [--n N] [--mem M] [--no-bullmq] [--no-chasquimq] [--no-modes] [--no-notebook] [--phase-limit SECONDS] [--quiet-wait SECONDS] [--repeat R] [--only trafikey,lua,bullmq,floor,set] [--only-waiting] [--scale] [--scale-huge] [--only-scale] [--caps] [--only-caps] [--only-forms] [--sched] [--only-sched]");
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if o.only_scale || o.only_caps || o.only_sched {
        o.only = vec![Who::Trafikey];
    }
    if !o.only.is_empty() || o.only_waiting || o.only_forms {
        o.notebook = false;
    }
    if o.short {
        o.n = 500;
        o.mem = 500;
        o.wait_jobs = 200;
        o.idle_window = Duration::from_millis(500);
        o.phase_limit = Duration::from_secs(20);
        o.notebook = false;
        o.quiet_wait = Duration::ZERO;
        o.repeat = 1;
        load::NEVER_WAIT.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    o.n = n.unwrap_or(o.n).max(CONNS as u64);
    o.mem = mem.unwrap_or(o.mem).max(1);
    if let Some(l) = limit {
        o.phase_limit = Duration::from_secs(l.max(1));
    }
    if let Some(r) = repeat {
        o.repeat = usize::try_from(r.clamp(1, 99)).unwrap_or(1);
    }
    if let Some(q) = quiet {
        o.quiet_wait = Duration::from_secs(q);
    }
    load::QUIET_WAIT_MS.store(o.quiet_wait.as_millis() as u64, std::sync::atomic::Ordering::Relaxed);
    Ok(o)
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn server_bin() -> Result<PathBuf, String> {
    if let Ok(p) = std::env::var("VALKEY_SERVER") {
        return Ok(PathBuf::from(p));
    }
    let out = Command::new(root().join("scripts/valkey-server-path"))
        .output()
        .map_err(|e| format!("scripts/valkey-server-path: {e}"))?;
    if !out.status.success() {
        return Err(format!("cannot find valkey-server: {}", String::from_utf8_lossy(&out.stderr)));
    }
    Ok(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}

fn module_path() -> PathBuf {
    std::env::var("TRAFIKEY_MODULE")
        .map_or_else(|_| root().join("target/release/libtrafikey.so"), PathBuf::from)
}

fn say(s: &str) {
    eprintln!("bench: {s}");
}

/// Empty the keyspace and install the wire identity again.
fn fresh(c: &mut Conn) -> Result<(), String> {
    if let Some(e) = c.call(&[b"FLUSHALL", b"SYNC"]).err() {
        return Err(format!("FLUSHALL: {e}"));
    }
    match c.call(&[b"EMQ.INSTALL", b"1", b"{emq}:version"]) {
        Reply::Int(_) => Ok(()),
        other => Err(format!("EMQ.INSTALL: {other:?}")),
    }
}

fn capabilities(c: &mut Conn) -> (Vec<String>, String) {
    let r = c.call(&[b"EMQ.VERSION"]);
    let pairs: Vec<(Reply, Reply)> = match r {
        Reply::Map(m) => m,
        Reply::Array(a) => {
            a.chunks(2).filter(|p| p.len() == 2).map(|p| (p[0].clone(), p[1].clone())).collect()
        }
        _ => vec![],
    };
    let mut caps = vec![];
    let mut version = String::from("?");
    for (k, v) in pairs {
        match (k.str().as_str(), &v) {
            ("capabilities", Reply::Array(a)) => caps = a.iter().map(Reply::str).collect(),
            ("module_version", Reply::Bulk(_) | Reply::Simple(_)) => version = v.str(),
            _ => {}
        }
    }
    (caps, version)
}

/// Top-level command time (µs) of `names` in a phase's commandstats (None: all but the
/// tool's own INFO/CONFIG).
fn inside(m: &[(String, u64, u64)], names: Option<&[&str]>) -> f64 {
    m.iter()
        .filter(|(n, _, _)| match names {
            Some(ns) => ns.contains(&n.as_str()),
            None => {
                !matches!(n.as_str(), "info" | "config|resetstat" | "config|get" | "config|set" | "config")
            }
        })
        .map(|(_, _, us)| *us as f64)
        .sum()
}

fn row<T>(
    who: Who,
    workload: &'static str,
    mode: &'static str,
    r: Result<Measured<T>, String>,
    names: Option<&[&str]>,
) -> Row {
    match r {
        Ok(mut m) => {
            m.lat.sort_unstable();
            Row {
                jobs: m.jobs,
                secs: m.secs,
                cpu_us: m.cpu_us,
                inside_us: Some(inside(&m.inside, names)),
                p50_us: load::percentile(&m.lat, 50.0),
                p99_us: load::percentile(&m.lat, 99.0),
                foreign: Some(m.foreign),
                client: Some(m.client),
                replica_cpu_us: m.replica_cpu_us,
                ..empty_row(who, workload, mode, Status::Ok)
            }
        }
        Err(e) => failed(who, workload, mode, e),
    }
}

fn failed(who: Who, workload: &'static str, mode: &'static str, e: String) -> Row {
    say(&format!("{} {workload} {mode} FAILED: {e}", report::contender(who, workload)));
    empty_row(who, workload, mode, Status::Failed(e))
}

fn skipped(who: Who, workload: &'static str, mode: &'static str, why: &str) -> Row {
    empty_row(who, workload, mode, Status::Skipped(why.to_string()))
}

/// A row without figures: a phase that failed or did not run.
fn empty_row(who: Who, workload: &'static str, mode: &'static str, status: Status) -> Row {
    Row {
        who,
        workload,
        mode,
        jobs: 0,
        secs: 0.0,
        cpu_us: 0.0,
        inside_us: None,
        p50_us: 0,
        p99_us: 0,
        foreign: None,
        client: None,
        status,
        passes: vec![],
        best_rate: None,
        p99s: vec![],
        note: None,
        paired: vec![],
        replica_cpu_us: None,
    }
}

/// A measured phase, then its check of the queue's sets; the row says if either failed.
fn measured<T>(
    srv: &Server,
    who: Who,
    names: &[&str],
    workload: &'static str,
    mode: &'static str,
    waiting_after: u64,
    run: impl FnOnce() -> Result<Measured<T>, String>,
) -> Row {
    say(&format!("{} {workload} {mode}", who.label()));
    let r = run().and_then(|m| {
        if m.jobs == 0 {
            return Err("no jobs done".into());
        }
        queue::check_sets(srv, waiting_after).map(|()| m)
    });
    let r = row(who, workload, mode, r, Some(names));
    if r.ok() {
        say(&format!("  {:.0} jobs/s, {:.2} µs server CPU per job", r.rate(), r.cpu_per_job()));
    }
    r
}

/// One EchoMQ contender (trafikey or the twin) in a run.
struct Contender<'a> {
    who: Who,
    engine: &'a Engine,
    /// Whether its CLAIM and COMPLETE exist (the twin's always do).
    verbs: bool,
    /// Whether it runs the waiting workloads: CLAIM's BLOCK and upkeep (trafikey's, from
    /// module_version 0.2.0; the twin has neither).
    waits: bool,
    /// Whether it runs the batch-finish lane: `TRA.COMPLETES` is in this build (trafikey's;
    /// the twin has none).
    completes: bool,
}

const NO_VERBS: &str = "EMQ.CLAIM/EMQ.COMPLETE are not in this build";
const NO_WAITS: &str = "EMQ.CLAIM … BLOCK and upkeep are not in this build";
const NO_COMPLETES: &str = "TRA.COMPLETES is not in this build";
/// The batch-finish lane's commands, as commandstats names them.
const BATCH_NAMES: &[&str] = &["emq.enqueue", "emq.claim", "emq.complete", "tra.completes"];

/// Whether this server has `TRA.COMPLETES`.
fn completes_here(c: &mut Conn) -> bool {
    match c.call(&[b"COMMAND", b"INFO", b"TRA.COMPLETES"]) {
        Reply::Array(a) => a.first().is_some_and(|x| !x.is_nil()),
        _ => false,
    }
}

/// The batch-finish lane of a pipelined workload (trafikey, not with --only-waiting): its row,
/// or why it did not run.
fn batch_lane(
    srv: &Server,
    c: &mut Conn,
    x: &Contender,
    o: &Opts,
    workload: &'static str,
    rows: &mut Vec<Row>,
) -> Result<(), String> {
    if x.who != Who::Trafikey || o.only_waiting {
        return Ok(());
    }
    if !x.verbs || !x.completes {
        rows.push(skipped(x.who, workload, report::BATCH, if x.verbs { NO_COMPLETES } else { NO_VERBS }));
        return Ok(());
    }
    let (e, n, s) = (x.engine, o.n, shape(o, DEPTH));
    let run = |srv: &Server| {
        if workload == "lifecycle" {
            queue::lifecycle_with(srv, e, n, s, queue::Finish::Batch)
        } else {
            queue::claim_complete_with(srv, e, n, s, queue::Finish::Batch)
        }
    };
    if workload == "lifecycle" {
        fresh(c)?;
    } else {
        prefill(srv, c, e, o)?;
    }
    rows.push(measured(srv, x.who, BATCH_NAMES, workload, report::BATCH, 0, || run(srv)));
    Ok(())
}

/// The modes of the claim and lifecycle rounds: both, or only the pipelined one the blocking
/// workers stand beside.
fn modes(o: &Opts) -> &'static [(&'static str, usize)] {
    if o.only_waiting {
        &[("p32", DEPTH)]
    } else {
        &[("c50", 1), ("p32", DEPTH)]
    }
}

/// INFO trafikey's waiting counters: calls that blocked, waits ended by a job, timeouts.
fn wait_counts(c: &mut Conn) -> [u64; 3] {
    ["trafikey_blocked", "trafikey_woken", "trafikey_timeouts"]
        .map(|f| server::info(c, "trafikey", f).and_then(|v| v.parse().ok()).unwrap_or(0))
}

/// A blocking workers' phase (trafikey, after the pipelined mode it stands beside): its row,
/// noting how often the workers waited; nobody may be left blocked.
fn blocking_row(
    srv: &Server,
    c: &mut Conn,
    x: &Contender,
    workload: &'static str,
    run: impl FnOnce() -> Result<Measured<()>, String>,
) -> Row {
    let (names, before) = (x.engine.commands(), wait_counts(c));
    let claims = std::cell::Cell::new(0u64);
    let mut r = measured(srv, x.who, names, workload, "p32", 0, || {
        run().and_then(|m| {
            claims.set(m.inside.iter().find(|(n, _, _)| n == "emq.claim").map_or(0, |(_, calls, _)| *calls));
            waiting::none_blocked(srv).map(|()| m)
        })
    });
    let after = wait_counts(c);
    let [blocked, woken, timeouts] = [0, 1, 2].map(|i| after[i].saturating_sub(before[i]));
    let per = if claims.get() > 0 { r.jobs as f64 / claims.get() as f64 } else { f64::NAN };
    r.note = Some(format!(
        "{per:.1} jobs per CLAIM; {blocked} CLAIMs waited: {woken} got jobs, {timeouts} ended empty, by BLOCK's timeout or, each worker's last, by the CLIENT UNBLOCK … TIMEOUT that ends the phase"
    ));
    r
}

/// Round 1: enqueue, one call at a time and pipelined.
fn round_enqueue(
    srv: &Server,
    c: &mut Conn,
    x: &Contender,
    o: &Opts,
    rows: &mut Vec<Row>,
) -> Result<(), String> {
    let (names, e, n) = (x.engine.commands(), x.engine, o.n);
    fresh(c)?;
    rows.push(measured(srv, x.who, names, "enqueue", "c50", n, || queue::enqueue(srv, e, n, shape(o, 1))));
    fresh(c)?;
    rows.push(measured(srv, x.who, names, "enqueue", "p32", n, || {
        queue::enqueue(srv, e, n, shape(o, DEPTH))
    }));
    Ok(())
}

fn shape(o: &Opts, depth: usize) -> Shape {
    Shape { conns: CONNS, depth, limit: o.phase_limit }
}

/// An empty keyspace with `n` waiting jobs (not measured).
fn prefill(srv: &Server, c: &mut Conn, e: &Engine, o: &Opts) -> Result<(), String> {
    fresh(c)?;
    queue::enqueue(srv, e, o.n, shape(o, DEPTH)).map(|_| ())
}

/// A workload of N jobs on a server in a shape.
type Workload = fn(&Server, &Engine, u64, Shape) -> Result<load::Measured<()>, String>;

/// What rounds 2 and 3 measure: a workload's label, whether its N jobs wait before the
/// measure (prefilled) or its producers add them during it, how it runs, and its blocking
/// twin (its label and how many of the connections produce).
struct Work {
    name: &'static str,
    prefilled: bool,
    run: Workload,
    blocking: &'static str,
    producers: usize,
}

/// Round 2: claim+complete of N waiting jobs.
const CLAIM_COMPLETE: Work = Work {
    name: "claim+complete",
    prefilled: true,
    run: queue::claim_complete,
    blocking: report::BLOCKING_CLAIM,
    producers: 0,
};

/// Round 3: the full lifecycle.
const LIFECYCLE: Work = Work {
    name: "lifecycle",
    prefilled: false,
    run: queue::lifecycle,
    blocking: report::BLOCKING_LIFE,
    producers: CONNS / 2,
};

/// Round 2 or 3: `w` in each mode, then (trafikey) its blocking twin, then its batch lane.
fn round_work(
    srv: &Server,
    c: &mut Conn,
    x: &Contender,
    o: &Opts,
    w: &Work,
    rows: &mut Vec<Row>,
) -> Result<(), String> {
    let (names, e, n) = (x.engine.commands(), x.engine, o.n);
    let setup = |c: &mut Conn| if w.prefilled { prefill(srv, c, e, o) } else { fresh(c) };
    for &(mode, depth) in modes(o) {
        if !x.verbs {
            rows.push(skipped(x.who, w.name, mode, NO_VERBS));
            continue;
        }
        setup(c)?;
        rows.push(measured(srv, x.who, names, w.name, mode, 0, || (w.run)(srv, e, n, shape(o, depth))));
    }
    if x.who == Who::Trafikey {
        if !x.waits || !x.verbs {
            rows.push(skipped(x.who, w.blocking, "p32", NO_WAITS));
        } else {
            setup(c)?;
            let row = blocking_row(srv, c, x, w.blocking, || {
                waiting::blocking(srv, n, w.producers, CONNS - w.producers, DEPTH, o.phase_limit)
            });
            rows.push(row);
        }
    }
    batch_lane(srv, c, x, o, w.name, rows)
}

/// Round 4: CLAIM alone, then COMPLETE alone, one call at a time: each verb's server CPU
/// per call, to set beside a plain SET's.
fn round_per_call(
    srv: &Server,
    c: &mut Conn,
    x: &Contender,
    o: &Opts,
    rows: &mut Vec<Row>,
) -> Result<(), String> {
    let (names, e, n) = (x.engine.commands(), x.engine, o.n);
    if !x.verbs {
        rows.push(skipped(x.who, "CLAIM alone", "c50", NO_VERBS));
        rows.push(skipped(x.who, "COMPLETE alone", "c50", NO_VERBS));
        return Ok(());
    }
    prefill(srv, c, e, o)?;
    say(&format!("{} CLAIM alone c50", x.who.label()));
    match queue::claim_only(srv, e, n, shape(o, 1)) {
        Ok(mut m) => {
            let held = std::mem::take(&mut m.out);
            let claim_row = row(x.who, "CLAIM alone", "c50", Ok::<_, String>(m), Some(names));
            if claim_row.ok() {
                say(&format!(
                    "  {:.0} jobs/s, {:.2} µs server CPU per job",
                    claim_row.rate(),
                    claim_row.cpu_per_job()
                ));
            }
            rows.push(claim_row);
            rows.push(measured(srv, x.who, names, "COMPLETE alone", "c50", 0, || {
                queue::complete_only(srv, e, &held, shape(o, 1))
            }));
        }
        Err(err) => {
            rows.push(failed(x.who, "CLAIM alone", "c50", err));
            rows.push(skipped(x.who, "COMPLETE alone", "c50", "CLAIM alone failed"));
        }
    }
    Ok(())
}

/// Round 5: the pipelined lifecycle with events off (trafikey.events-maxlen 0; the twin is
/// reloaded so that it mirrors it).
fn round_events_off(
    srv: &Server,
    c: &mut Conn,
    x: &Contender,
    o: &Opts,
    rows: &mut Vec<Row>,
) -> Result<(), String> {
    let (names, n) = (x.engine.commands(), o.n);
    if !x.verbs {
        rows.push(skipped(x.who, report::CLAIM_QUIET, "p32", NO_VERBS));
        rows.push(skipped(x.who, "lifecycle, events off", "p32", NO_VERBS));
        return Ok(());
    }
    let cap = queue::config_get(c, "trafikey.events-maxlen")?;
    queue::config_set(c, "trafikey.events-maxlen", "0")?;
    let quiet = match x.engine {
        Engine::Native => Ok(Engine::Native),
        Engine::Lua { .. } => Engine::load_lua(c),
    };
    let r = quiet.and_then(|q| {
        prefill(srv, c, &q, o)?;
        let claim = measured(srv, x.who, names, report::CLAIM_QUIET, "p32", 0, || {
            queue::claim_complete(srv, &q, n, shape(o, DEPTH))
        });
        fresh(c)?;
        let life = measured(srv, x.who, names, "lifecycle, events off", "p32", 0, || {
            queue::lifecycle(srv, &q, n, shape(o, DEPTH))
        });
        Ok((claim, life))
    });
    queue::config_set(c, "trafikey.events-maxlen", &cap)?;
    match r {
        Ok((claim, life)) => {
            rows.push(claim);
            rows.push(life);
        }
        Err(err) => {
            rows.push(failed(x.who, report::CLAIM_QUIET, "p32", err.clone()));
            rows.push(failed(x.who, "lifecycle, events off", "p32", err));
        }
    }
    Ok(())
}

/// A wake or lateness phase's row, noting how its jobs reached the workers.
fn waited(who: Who, workload: &'static str, r: Result<waiting::Waited, String>) -> Row {
    match r {
        Ok(w) => {
            let mut note = format!("{} of {} jobs handed to a waiting worker", w.woken, w.m.jobs);
            if !w.rtt.is_empty() {
                note.push_str(&format!(
                    "; the ENQUEUE's own round trip p50 {:.2} ms, p99 {:.2} ms",
                    f64::from(load::percentile(&w.rtt, 50.0)) / 1e3,
                    f64::from(load::percentile(&w.rtt, 99.0)) / 1e3
                ));
            }
            if w.timeouts > 0 {
                note.push_str(&format!(", {} waits timed out", w.timeouts));
            }
            if w.early > 0 {
                note.push_str(&format!(
                    ", {} held before their due time as placed on the tool's clock (counted as 0)",
                    w.early
                ));
            }
            let names = ["emq.enqueue", "emq.schedule", "emq.claim", "emq.complete"];
            let mut r = row(who, workload, report::WAITING, Ok::<_, String>(w.m), Some(&names));
            if r.ok() {
                say(&format!(
                    "  p50 {:.3} ms, p99 {:.3} ms; {note}",
                    r.p50_us as f64 / 1e3,
                    r.p99_us as f64 / 1e3
                ));
            }
            r.note = Some(note);
            r
        }
        Err(e) => failed(who, workload, report::WAITING, e),
    }
}

/// Round 8 (trafikey): the waiting workloads — wake latency, lateness of scheduled jobs, and
/// the idle cost of waiting workers beside polling ones (each on a fresh keyspace).
fn round_waiting(
    srv: &Server,
    c: &mut Conn,
    x: &Contender,
    o: &Opts,
    rows: &mut Vec<Row>,
    idle: &mut Idles,
) -> Result<(), String> {
    use waiting::Idling;
    if !x.waits {
        rows.push(skipped(x.who, report::WAKE, report::WAITING, NO_WAITS));
        rows.push(skipped(x.who, report::PACED, report::WAITING, NO_WAITS));
        rows.push(skipped(x.who, report::LATE, report::WAITING, NO_WAITS));
        idle.extend(report::IDLE.iter().map(|w| (*w, Err(format!("skipped: {NO_WAITS}")))));
        return Ok(());
    }
    fresh(c)?;
    say(&format!(
        "trafikey {}: {WAITERS} workers waiting, one ENQUEUE every {} ms",
        report::WAKE,
        WAIT_GAP.as_millis()
    ));
    rows.push(waited(x.who, report::WAKE, waiting::wake(srv, WAITERS, o.wait_jobs, WAIT_GAP, o.phase_limit)));
    fresh(c)?;
    say(&format!("trafikey {}: no workers, one ENQUEUE every {} ms", report::PACED, WAIT_GAP.as_millis()));
    let r = row(
        x.who,
        report::PACED,
        report::WAITING,
        waiting::paced(srv, o.wait_jobs, WAIT_GAP),
        Some(&["emq.enqueue"]),
    );
    if r.ok() {
        say(&format!(
            "  p50 {:.3} ms, p99 {:.3} ms, {:.1} µs server CPU per ENQUEUE",
            r.p50_us as f64 / 1e3,
            r.p99_us as f64 / 1e3,
            r.cpu_per_job()
        ));
    }
    rows.push(r);
    fresh(c)?;
    say(&format!(
        "trafikey {}: {WAITERS} workers waiting, one SCHEDULE every {} ms due in {}..{} ms",
        report::LATE,
        WAIT_GAP.as_millis(),
        SPREAD.0,
        SPREAD.1
    ));
    let late = waiting::lateness(srv, WAITERS, o.wait_jobs, WAIT_GAP, SPREAD, o.phase_limit);
    rows.push(waited(x.who, report::LATE, late));
    // report::IDLE's setups, in its order: what the connections do, whether the queue holds
    // leases, whether upkeep is off (last: turned on again, its timer is re-armed only by the
    // next verb that makes something due).
    let setups = [
        (Idling::Nothing, false, false),
        (Idling::Waiting, false, false),
        (Idling::Waiting, true, false),
        (Idling::Polling, false, false),
        (Idling::Waiting, true, true),
    ];
    let upkeep = queue::config_get(c, "trafikey.upkeep")?;
    for (what, (how, leases, off)) in report::IDLE.iter().zip(setups) {
        fresh(c)?;
        say(&format!("trafikey idle {} s, {CONNS} connections: {what}", o.idle_window.as_secs_f64()));
        let r = (if leases { waiting::hold_leases(srv, LEASES) } else { Ok(()) })
            .and_then(|()| if off { queue::config_set(c, "trafikey.upkeep", "no") } else { Ok(()) })
            .and_then(|()| waiting::idle(srv, how, CONNS, o.idle_window));
        if off {
            queue::config_set(c, "trafikey.upkeep", &upkeep)?;
        }
        match &r {
            Ok(f) => say(&format!(
                "  server {:.3}% of a core, {:.0} CLAIMs/s, {:.1} upkeep ticks/s",
                f.cores() * 100.0,
                f.claims as f64 / f.secs,
                f.ticks as f64 / f.secs
            )),
            Err(e) => say(&format!("  FAILED: {e}")),
        }
        idle.push((what, r));
    }
    fresh(c)
}

/// One pass over every workload and contender: its rows and memory figures.
#[allow(clippy::too_many_arguments)]
fn pass(
    srv: &Server,
    c: &mut Conn,
    contenders: &[Contender],
    bull: &mut Bull,
    chq: &mut Chasqui,
    bins: &Bins,
    o: &Opts,
    keep: u64,
    cap: u64,
) -> Result<Pass, String> {
    let mut rows = Vec::new();
    let mut memory = Vec::new();
    let mut idle = Vec::new();
    if o.only_waiting {
        for x in contenders.iter().filter(|x| x.who == Who::Trafikey) {
            round_work(srv, c, x, o, &CLAIM_COMPLETE, &mut rows)?;
            round_work(srv, c, x, o, &LIFECYCLE, &mut rows)?;
            round_waiting(srv, c, x, o, &mut rows, &mut idle)?;
        }
        bull.round(srv, c, o, BULL_WAITING, &mut rows, &mut memory)?;
        report::pair_blocking(&mut rows);
        return Ok((rows, memory, idle));
    }
    if o.only_forms {
        // The reference rows the new ones stand beside: trafikey's own pipelined lifecycle,
        // BullMQ on Valkey and ChasquiMQ's lifecycle.
        if let Some(x) = contenders.iter().find(|x| x.who == Who::Trafikey && x.verbs) {
            fresh(c)?;
            rows.push(measured(srv, x.who, x.engine.commands(), "lifecycle", "p32", 0, || {
                queue::lifecycle(srv, x.engine, o.n, shape(o, DEPTH))
            }));
        }
        for part in ["enqueue", "claim", "lifecycle", "memory"] {
            bull.round(srv, c, o, part, &mut rows, &mut memory)?;
            bull.round_trafikey(srv, c, o, part, &mut rows, &mut memory)?;
        }
        chq.round(srv, c, o, "lifecycle", Setting::Default, &mut rows, &mut memory)?;
        round_forms(srv, c, contenders, chq, o, &mut rows)?;
        report::pair_bull(&mut rows);
        return Ok((rows, memory, idle));
    }
    for x in contenders {
        round_enqueue(srv, c, x, o, &mut rows)?;
    }
    bull.round(srv, c, o, "enqueue", &mut rows, &mut memory)?;
    bull.round_trafikey(srv, c, o, "enqueue", &mut rows, &mut memory)?;
    chq.round(srv, c, o, "enqueue", Setting::Default, &mut rows, &mut memory)?;
    for x in contenders {
        round_work(srv, c, x, o, &CLAIM_COMPLETE, &mut rows)?;
    }
    bull.round(srv, c, o, "claim", &mut rows, &mut memory)?;
    bull.round_trafikey(srv, c, o, "claim", &mut rows, &mut memory)?;
    chq.round(srv, c, o, "process", Setting::Default, &mut rows, &mut memory)?;
    for x in contenders {
        round_work(srv, c, x, o, &LIFECYCLE, &mut rows)?;
    }
    if o.wants(Who::Floor) {
        fresh(c)?;
        say("floor lifecycle p32");
        let f = queue::floor(srv, o.n, keep, cap, shape(o, DEPTH));
        let f = row(Who::Floor, "lifecycle", "p32", f, None);
        if f.ok() {
            say(&format!("  {:.0} jobs/s, {:.2} µs server CPU per job", f.rate(), f.cpu_per_job()));
        }
        rows.push(f);
        fresh(c)?;
        say("floor CLAIM alone c50, then COMPLETE alone c50");
        match queue::floor_per_call(srv, o.n, keep, cap, shape(o, 1)) {
            Ok((claim, complete)) => {
                rows.push(row(Who::Floor, "CLAIM alone", "c50", Ok::<_, String>(claim), None));
                rows.push(row(Who::Floor, "COMPLETE alone", "c50", Ok::<_, String>(complete), None));
            }
            Err(e) => {
                rows.push(failed(Who::Floor, "CLAIM alone", "c50", e.clone()));
                rows.push(failed(Who::Floor, "COMPLETE alone", "c50", e));
            }
        }
    }
    bull.round(srv, c, o, "lifecycle", &mut rows, &mut memory)?;
    bull.round_trafikey(srv, c, o, "lifecycle", &mut rows, &mut memory)?;
    chq.round(srv, c, o, "lifecycle", Setting::Default, &mut rows, &mut memory)?;
    for x in contenders {
        round_per_call(srv, c, x, o, &mut rows)?;
    }
    if o.wants(Who::Set) {
        fresh(c)?;
        say("plain SET c50");
        let s = row(Who::Set, "plain SET", "c50", queue::plain_set(srv, o.n, shape(o, 1)), Some(&["set"]));
        if s.ok() {
            say(&format!("  {:.0} calls/s, {:.2} µs server CPU per call", s.rate(), s.cpu_per_job()));
        }
        rows.push(s);
    }
    let mut lanes = Vec::new();
    if o.wants(Who::Trafikey) {
        lanes.push((
            Who::Trafikey,
            if Lane::native_here(c) { DropLane::Ready(Lane::Native) } else { DropLane::Skipped(NO_DROP) },
        ));
    }
    if o.wants(Who::Lua) {
        let script = root().join("tests/fixtures/coherence_drop.lua");
        lanes.push((Who::Lua, Lane::load_script(c, &script).map_or_else(DropLane::Failed, DropLane::Ready)));
    }
    round_drop(srv, c, &lanes, o, &mut rows)?;
    for x in contenders {
        round_events_off(srv, c, x, o, &mut rows)?;
    }
    bull.round_with(srv, c, o, "claim,lifecycle", Setting::EventsOff, &mut rows, &mut memory)?;
    chq.round(srv, c, o, "process,lifecycle", Setting::EventsOff, &mut rows, &mut memory)?;
    for x in contenders.iter().filter(|x| x.who == Who::Trafikey) {
        round_waiting(srv, c, x, o, &mut rows, &mut idle)?;
    }
    bull.round(srv, c, o, BULL_WAITING, &mut rows, &mut memory)?;
    for x in contenders {
        round_memory(srv, c, x, o, &mut memory)?;
    }
    bull.round(srv, c, o, "memory", &mut rows, &mut memory)?;
    bull.round_trafikey(srv, c, o, "memory", &mut rows, &mut memory)?;
    chq.round(srv, c, o, "memory", Setting::Default, &mut rows, &mut memory)?;
    round_forms(srv, c, contenders, chq, o, &mut rows)?;
    if o.modes {
        round_modes(bins, contenders, bull, chq, o, keep, cap, &mut rows)?;
    }
    report::pair_blocking(&mut rows);
    report::pair_batch(&mut rows);
    report::pair_bull(&mut rows);
    Ok((rows, memory, idle))
}

/// Whether this server has every command of `names` (`COMMAND INFO`).
fn commands_here(c: &mut Conn, names: &[&str]) -> bool {
    names.iter().all(|n| match c.call(&[b"COMMAND", b"INFO", n.as_bytes()]) {
        Reply::Array(a) => a.first().is_some_and(|x| !x.is_nil()),
        _ => false,
    })
}

const NO_FORMS: &str = "TRA.ADD / TRA.COMPLETENEXT are not in this build (module_version 0.3.0 has them)";

/// The rows of the BullMQ forms (forms.rs): trafikey's bulk add `TRA.ADD` in batches of 32
/// and 250, each beside ChasquiMQ's `add_bulk` of the same size; the finish-and-fetch lifecycle
/// (one `TRA.COMPLETENEXT` per job, its jobs enqueued one `EMQ.ENQUEUE` each as trafikey's own
/// lifecycle, and one `TRA.ADD` a write as ChasquiMQ's producers call `add_bulk`, that last
/// again with `KEEP 0` as ChasquiMQ keeps no finished job; ChasquiMQ's lifecycle row is the
/// pass's own); claim+complete with `CLAIM … ROW` right after the same
/// without. BullMQ on trafikey runs right after BullMQ on Valkey in each of their rounds
/// (`report::pair_bull`).
fn round_forms(
    srv: &Server,
    c: &mut Conn,
    contenders: &[Contender],
    chq: &mut Chasqui,
    o: &Opts,
    rows: &mut Vec<Row>,
) -> Result<(), String> {
    let n = o.n;
    let native = Engine::Native;
    if let Some(x) = contenders.iter().find(|x| x.who == Who::Trafikey) {
        let here = x.verbs && commands_here(c, &["TRA.ADD", "TRA.COMPLETENEXT"]);
        for (batch, mode, chq_mode) in forms::BATCHES {
            if here {
                fresh(c)?;
                rows.push(measured(srv, Who::Trafikey, forms::ADD_NAMES, forms::BULK, mode, n, || {
                    forms::bulk_add(srv, n, batch, shape(o, 1))
                }));
            } else {
                rows.push(skipped(Who::Trafikey, forms::BULK, mode, NO_FORMS));
            }
            chq.bulk(srv, c, o, batch, chq_mode, rows)?;
        }
        if here {
            for (mode, producer, kept) in [
                ("p32", forms::Producer::Enqueue, forms::Kept::Default),
                (forms::NEXT_ADD, forms::Producer::Add, forms::Kept::Default),
                (forms::NEXT_ADD_DROP, forms::Producer::Add, forms::Kept::None),
            ] {
                fresh(c)?;
                rows.push(measured(srv, Who::Trafikey, producer.names(), forms::NEXT, mode, 0, || {
                    forms::lifecycle_next(srv, n, shape(o, DEPTH), false, producer, kept)
                }));
            }
            if commands_here(c, &["TRA.COMPLETESNEXT"]) {
                fresh(c)?;
                rows.push(measured(
                    srv,
                    Who::Trafikey,
                    forms::MANY_NAMES,
                    forms::NEXT,
                    forms::NEXT_MANY,
                    0,
                    || {
                        let (enqueue, kept) = (forms::Producer::Enqueue, forms::Kept::Default);
                        forms::lifecycle_next(srv, n, shape(o, DEPTH), true, enqueue, kept)
                    },
                ));
            } else {
                rows.push(skipped(
                    Who::Trafikey,
                    forms::NEXT,
                    forms::NEXT_MANY,
                    "TRA.COMPLETESNEXT is not in this build",
                ));
            }
            for (mode, with) in [(forms::WITHOUT_ROW, false), (forms::WITH_ROW, true)] {
                prefill(srv, c, &native, o)?;
                rows.push(measured(srv, Who::Trafikey, forms::ROW_NAMES, forms::ROW_PAIR, mode, 0, || {
                    forms::claim_complete_row(srv, n, shape(o, DEPTH), with)
                }));
            }
        } else {
            rows.push(skipped(Who::Trafikey, forms::NEXT, "p32", NO_FORMS));
            rows.push(skipped(Who::Trafikey, forms::NEXT, forms::NEXT_ADD, NO_FORMS));
            rows.push(skipped(Who::Trafikey, forms::NEXT, forms::NEXT_ADD_DROP, NO_FORMS));
            rows.push(skipped(Who::Trafikey, forms::ROW_PAIR, forms::WITHOUT_ROW, NO_FORMS));
            rows.push(skipped(Who::Trafikey, forms::ROW_PAIR, forms::WITH_ROW, NO_FORMS));
        }
        report::pair_row(rows);
    }
    fresh(c)
}

/// Cost as work grows (`--scale`; its smoke version in the short mode), trafikey only, after
/// the passes: every point once per pass, points interleaved, each figure the median pass.
fn round_scale(
    srv: &Server,
    c: &mut Conn,
    o: &Opts,
    verbs: bool,
    notes: &mut Vec<String>,
) -> Result<Vec<report::ScaleLine>, String> {
    if !(o.scale || o.short) || !o.wants(Who::Trafikey) || o.only_waiting {
        return Ok(vec![]);
    }
    if !verbs {
        notes.push(format!("Cost as work grows was skipped: {NO_VERBS}."));
        return Ok(vec![]);
    }
    let points = scale::points(o.short, o.scale_huge);
    let mut runs: Vec<Vec<Result<scale::Run, String>>> = points.iter().map(|_| Vec::new()).collect();
    for pass in 0..o.repeat {
        for (pt, got) in points.iter().zip(runs.iter_mut()) {
            say(&format!("trafikey cost as work grows, {} (pass {} of {})", pt.label, pass + 1, o.repeat));
            let r = scale::run_point(srv, c, pt, CONNS, DEPTH, o.phase_limit);
            match &r {
                Ok(x) => say(&format!(
                    "  enqueue {:.2}, claim+complete {:.2} µs server CPU per job; {:.0} bytes per waiting job",
                    x.enq_cpu_us / x.jobs as f64,
                    x.drain_cpu_us / x.jobs as f64,
                    x.mem_bytes / x.jobs as f64
                )),
                Err(e) => {
                    say(&format!("  FAILED: {e}"));
                    fresh(c)?;
                }
            }
            got.push(r);
        }
    }
    if o.short {
        notes.push("Cost as work grows, short mode: a smoke version at tiny sizes (it checks the tool; the figures say nothing about scale). `scripts/bench --scale` runs 10^3, 10^5 and 10^6 waiting jobs, 10 000 queues × 100 and 10^6 jobs over 1 000 priority levels (`--scale-huge`: 10^7 too).".into());
    }
    Ok(points.iter().zip(runs).map(|(pt, r)| scale::summarise(pt, CONNS, DEPTH, r)).collect())
}

/// A coherence-drop lane of the run: its rows, or why it does not run.
enum DropLane {
    Ready(Lane),
    Skipped(&'static str),
    Failed(String),
}

const NO_DROP: &str = "TRA.DROP is not in this build";

/// Round 7: the coherence drop. Per mode, each lane on a fresh keyspace of
/// its own N rows, hit once each; then every lane's rows checked and the lanes' dropped rows
/// compared: a difference fails both.
fn round_drop(
    srv: &Server,
    c: &mut Conn,
    lanes: &[(Who, DropLane)],
    o: &Opts,
    rows: &mut Vec<Row>,
) -> Result<(), String> {
    for (mode, depth) in [("c50", 1), ("p32", DEPTH)] {
        let mut seen: Vec<(usize, Vec<u64>)> = Vec::new();
        for (who, lane) in lanes {
            let lane = match lane {
                DropLane::Ready(l) => l,
                DropLane::Skipped(why) => {
                    rows.push(skipped(*who, DROP, mode, why));
                    continue;
                }
                DropLane::Failed(e) => {
                    rows.push(failed(*who, DROP, mode, e.clone()));
                    continue;
                }
            };
            fresh(c)?;
            if let Err(e) = coherence::populate(srv, lane, o.n, o.phase_limit) {
                rows.push(failed(*who, DROP, mode, e));
                continue;
            }
            say(&format!("{} {DROP} {mode}", report::contender(*who, DROP)));
            let r = coherence::drops(srv, lane, o.n, shape(o, depth)).and_then(|mut m| {
                let said = std::mem::take(&mut m.out);
                coherence::verify(srv, lane, o.n, &said).map(|d| (m, d))
            });
            match r {
                Ok((m, dropped)) => {
                    let x = row(*who, DROP, mode, Ok::<_, String>(m), Some(lane.commands()));
                    say(&format!(
                        "  {:.0} calls/s, {:.2} µs server CPU per call, {} of {} rows dropped",
                        x.rate(),
                        x.cpu_per_job(),
                        dropped.len(),
                        o.n
                    ));
                    seen.push((rows.len(), dropped));
                    rows.push(x);
                }
                Err(e) => rows.push(failed(*who, DROP, mode, e)),
            }
        }
        if let [(a, da), (b, db)] = &seen[..] {
            if da != db {
                let e = format!("the lanes dropped different rows ({} and {})", da.len(), db.len());
                say(&format!("{DROP} {mode} FAILED: {e}"));
                rows[*a].status = Status::Failed(e.clone());
                rows[*b].status = Status::Failed(e);
            }
        }
    }
    fresh(c)
}

/// Round 6: memory per waiting job.
fn round_memory(
    srv: &Server,
    c: &mut Conn,
    x: &Contender,
    o: &Opts,
    memory: &mut Memory,
) -> Result<(), String> {
    fresh(c)?;
    if o.quiet_wait > Duration::ZERO {
        load::wait_quiet(srv.pid(), load::QUIET_CORES, o.quiet_wait);
    }
    say(&format!("{} memory per waiting job", x.who.label()));
    let mem = queue::memory_per_job(srv, x.engine, o.mem, o.phase_limit);
    if let Ok(b) = &mem {
        say(&format!("  {b:.0} bytes per waiting job"));
    }
    memory.push((x.who, mem));
    Ok(())
}

/// bench.mjs's parts for the waiting round.
const BULL_WAITING: &str = "wake,lateness";

/// BullMQ's part of a round: `bench.mjs --only <part>` on the same server.
struct Bull {
    dir: PathBuf,
    ready: bool,
    ran: bool,
    /// The trafikey backend for BullMQ (clients/bullmq's built dist/index.js), or why not.
    trafikey: Result<PathBuf, String>,
}

impl Bull {
    fn round(
        &mut self,
        srv: &Server,
        c: &mut Conn,
        o: &Opts,
        part: &str,
        rows: &mut Vec<Row>,
        memory: &mut Memory,
    ) -> Result<(), String> {
        self.round_with(srv, c, o, part, Setting::Default, rows, memory)
    }

    /// A round in one of the production modes (the best mode only, unless the default).
    #[allow(clippy::too_many_arguments)]
    fn round_with(
        &mut self,
        srv: &Server,
        c: &mut Conn,
        o: &Opts,
        part: &str,
        setting: Setting,
        rows: &mut Vec<Row>,
        memory: &mut Memory,
    ) -> Result<(), String> {
        if !self.ready {
            return Ok(());
        }
        c.call(&[b"FLUSHALL", b"SYNC"]);
        if o.quiet_wait > Duration::ZERO {
            load::wait_quiet(srv.pid(), load::QUIET_CORES, o.quiet_wait);
        }
        say(&format!("BullMQ {part} (node bench.mjs)"));
        let p = bullmq::Params {
            events: setting != Setting::EventsOff,
            best_only: setting != Setting::Default,
            replica_port: srv.replica.as_ref().map(|r| r.port),
            ..bull_params(srv, o, part)
        };
        match bullmq::run(&self.dir, &p) {
            Ok(out) => {
                self.ran = true;
                driver_rows(Who::BullMq, "bench.mjs", out, part, setting, rows, memory);
            }
            Err(e) => rows.push(failed(Who::BullMq, "bench.mjs", "", e)),
        }
        fresh(c)
    }
}

/// A driver's run of `part` on `srv` as this run's options set it.
fn driver_run(srv: &Server, o: &Opts, part: &str) -> driver::Run {
    driver::Run {
        port: srv.port,
        n: o.n,
        mem: o.mem,
        conns: CONNS,
        batch: DEPTH,
        phase_limit: o.phase_limit,
        server_pid: srv.pid(),
        only: part.to_string(),
    }
}

/// bench.mjs's run of `part` on `srv` as this run's options set it: BullMQ's own backend,
/// events on, every mode, no replica.
fn bull_params(srv: &Server, o: &Opts, part: &str) -> bullmq::Params {
    bullmq::Params {
        run: driver_run(srv, o, part),
        wait_jobs: o.wait_jobs,
        gap_ms: WAIT_GAP.as_millis() as u64,
        waiters: BULL_WAITERS,
        spread: SPREAD,
        events: true,
        best_only: false,
        replica_port: None,
        trafikey_client: None,
    }
}

impl Bull {
    /// bench.mjs's `part`s with BullMQ's classes bound to the trafikey backend
    /// (`withTrafikey(withBackend)`), on the same server with the module: rows of
    /// "BullMQ on trafikey", named as BullMQ's own (its memory part: its memory figure).
    fn round_trafikey(
        &mut self,
        srv: &Server,
        c: &mut Conn,
        o: &Opts,
        part: &str,
        rows: &mut Vec<Row>,
        memory: &mut Memory,
    ) -> Result<(), String> {
        if !self.ready {
            return Ok(());
        }
        let client = match &self.trafikey {
            Ok(p) => p.clone(),
            Err(why) => {
                say(&format!("BullMQ on trafikey skipped: {why}"));
                rows.push(skipped(Who::BullMqTrafikey, "enqueue", "p32", why));
                return Ok(());
            }
        };
        fresh(c)?;
        if o.quiet_wait > Duration::ZERO {
            load::wait_quiet(srv.pid(), load::QUIET_CORES, o.quiet_wait);
        }
        say(&format!("BullMQ on trafikey {part} (node bench.mjs --backend trafikey)"));
        let p = bullmq::Params { trafikey_client: Some(client), ..bull_params(srv, o, part) };
        match bullmq::run(&self.dir, &p) {
            Ok(out) => {
                driver_rows(Who::BullMqTrafikey, "bench.mjs", out, part, Setting::Default, rows, memory)
            }
            Err(e) => rows.push(failed(Who::BullMqTrafikey, "bench.mjs", "", e)),
        }
        fresh(c)
    }
}

/// ChasquiMQ's part of a round: its driver (tests/bench/chasquimq/) with `--only <part>` on
/// the same server.
struct Chasqui {
    bin: Option<PathBuf>,
    ran: bool,
}

impl Chasqui {
    #[allow(clippy::too_many_arguments)]
    fn round(
        &mut self,
        srv: &Server,
        c: &mut Conn,
        o: &Opts,
        part: &str,
        setting: Setting,
        rows: &mut Vec<Row>,
        memory: &mut Memory,
    ) -> Result<(), String> {
        let Some(bin) = self.bin.clone() else { return Ok(()) };
        c.call(&[b"FLUSHALL", b"SYNC"]);
        if o.quiet_wait > Duration::ZERO {
            load::wait_quiet(srv.pid(), load::QUIET_CORES, o.quiet_wait);
        }
        say(&format!(
            "ChasquiMQ {part} ({})",
            if setting == Setting::Default { "default" } else { setting.workload("lifecycle") }
        ));
        let p = chasquimq::Params {
            run: driver_run(srv, o, part),
            events: setting != Setting::EventsOff,
            replica_port: srv.replica.as_ref().map(|r| r.port),
        };
        match chasquimq::run(&bin, &p) {
            Ok(out) => {
                self.ran = true;
                driver_rows(Who::ChasquiMq, "driver", out, part, setting, rows, memory);
            }
            Err(e) => rows.push(failed(Who::ChasquiMq, "driver", "", e)),
        }
        fresh(c)
    }
}

impl Chasqui {
    /// The bulk add: the driver's `add_bulk` of `batch` from 50 tasks (part `bulk`), as the
    /// row `bulk add` / `mode`.
    fn bulk(
        &mut self,
        srv: &Server,
        c: &mut Conn,
        o: &Opts,
        batch: usize,
        mode: &'static str,
        rows: &mut Vec<Row>,
    ) -> Result<(), String> {
        let Some(bin) = self.bin.clone() else { return Ok(()) };
        c.call(&[b"FLUSHALL", b"SYNC"]);
        if o.quiet_wait > Duration::ZERO {
            load::wait_quiet(srv.pid(), load::QUIET_CORES, o.quiet_wait);
        }
        say(&format!("ChasquiMQ {} {mode}", forms::BULK));
        let p = chasquimq::Params {
            run: driver::Run { batch, ..driver_run(srv, o, "bulk") },
            events: true,
            replica_port: None,
        };
        match chasquimq::run(&bin, &p) {
            Ok(out) => {
                self.ran = true;
                for f in out.figures.iter().filter(|f| f.workload == forms::BULK) {
                    say(&format!(
                        "  {:.0} jobs/s, {:.2} µs server CPU per job",
                        f.jobs as f64 / f.secs,
                        f.cpu_us / f.jobs as f64
                    ));
                    rows.push(figure_row(Who::ChasquiMq, forms::BULK, mode, f, out.foreign));
                }
                if !out.figures.iter().any(|f| f.workload == forms::BULK) && out.errors.is_empty() {
                    rows.push(failed(
                        Who::ChasquiMq,
                        forms::BULK,
                        mode,
                        "the driver gave no bulk add figure".into(),
                    ));
                }
                for e in out.errors {
                    rows.push(failed(Who::ChasquiMq, forms::BULK, mode, e));
                }
            }
            Err(e) => rows.push(failed(Who::ChasquiMq, forms::BULK, mode, e)),
        }
        fresh(c)
    }
}

/// A contender driver's figure as the row of `workload` in `mode`.
fn figure_row(who: Who, workload: &'static str, mode: &'static str, f: &driver::Figure, foreign: f64) -> Row {
    Row {
        jobs: f.jobs,
        secs: f.secs,
        cpu_us: f.cpu_us,
        p50_us: f.p50_us,
        p99_us: f.p99_us,
        foreign: Some(foreign),
        replica_cpu_us: f.replica_cpu_us,
        ..empty_row(who, workload, mode, Status::Ok)
    }
}

/// A contender driver's figures as rows, named as trafikey's are (BullMQ's best mode and
/// ChasquiMQ's batches stand beside the pipelined p32), its errors as failed rows, and its
/// memory figure when the part measured one.
fn driver_rows(
    who: Who,
    what: &'static str,
    out: driver::Outcome,
    part: &str,
    setting: Setting,
    rows: &mut Vec<Row>,
    memory: &mut Memory,
) {
    for f in out.figures {
        let base = match f.workload.as_str() {
            "enqueue" => "enqueue",
            "claim+complete" => "claim+complete",
            "claim+complete named" => report::NAMED,
            "wake" => report::WAKE,
            "lateness" => report::LATE,
            _ => "lifecycle",
        };
        let workload = match setting {
            Setting::Default => base,
            st => st.workload(base),
        };
        let mode = match f.mode.as_str() {
            "c50" => "c50",
            "waiting" => report::WAITING,
            _ => "p32",
        };
        if mode == report::WAITING {
            say(&format!(
                "  {} {workload}: p50 {:.3} ms, p99 {:.3} ms",
                who.label(),
                f.p50_us as f64 / 1e3,
                f.p99_us as f64 / 1e3
            ));
        } else {
            say(&format!(
                "  {} {workload} {}: {:.0} jobs/s, {:.2} µs server CPU per job",
                who.label(),
                f.mode,
                f.jobs as f64 / f.secs,
                f.cpu_us / f.jobs as f64
            ));
        }
        rows.push(figure_row(who, workload, mode, &f, out.foreign));
    }
    for e in out.errors {
        rows.push(failed(who, what, "", e));
    }
    if part == "memory" {
        memory.push((who, out.memory.ok_or_else(|| "not measured".to_string())));
    }
}

/// Where the mode servers come from.
struct Bins<'a> {
    server: &'a Path,
    module: &'a Path,
    scratch: &'a Path,
}

/// The production modes on servers of their own: AOF (`appendonly yes`, `appendfsync
/// everysec`), then one replica attached. Every contender's process (claim+complete of a
/// prefilled queue) and lifecycle, pipelined (BullMQ, ChasquiMQ: their best mode).
#[allow(clippy::too_many_arguments)]
fn round_modes(
    bins: &Bins,
    contenders: &[Contender],
    bull: &mut Bull,
    chq: &mut Chasqui,
    o: &Opts,
    keep: u64,
    cap: u64,
    rows: &mut Vec<Row>,
) -> Result<(), String> {
    for setting in [Setting::Aof, Setting::Replica] {
        let (claim_w, life_w) = (setting.workload("claim+complete"), setting.workload("lifecycle"));
        let started = match setting {
            Setting::Aof => Server::start_with(
                bins.server,
                bins.module,
                bins.scratch,
                &["--appendonly", "yes", "--appendfsync", "everysec"],
            ),
            // The short mode's primary starts the replica's sync at once, without the 5 s a
            // primary waits by default for more replicas to share a diskless sync.
            _ => Server::start_replicated(
                bins.server,
                bins.module,
                bins.scratch,
                if o.short { &["--repl-diskless-sync-delay", "0"] } else { &[] },
            ),
        };
        let srv = match started {
            Ok(s) => s,
            Err(e) => {
                for x in contenders {
                    rows.push(failed(x.who, claim_w, "p32", e.clone()));
                    rows.push(failed(x.who, life_w, "p32", e.clone()));
                }
                continue;
            }
        };
        say(&format!(
            "{}: valkey-server pid {} on 127.0.0.1:{}{}",
            life_w,
            srv.pid(),
            srv.port,
            srv.replica.as_ref().map_or(String::new(), |r| format!(
                ", its replica pid {} on port {}",
                r.pid(),
                r.port
            ))
        ));
        let mut c = srv.conn()?;
        fresh(&mut c)?;
        let lua = Engine::load_lua(&mut c)?;
        for x in contenders {
            let (names, n) = (x.engine.commands(), o.n);
            if !x.verbs {
                rows.push(skipped(x.who, claim_w, "p32", NO_VERBS));
                rows.push(skipped(x.who, life_w, "p32", NO_VERBS));
                continue;
            }
            let e = if x.who == Who::Lua { &lua } else { x.engine };
            prefill(&srv, &mut c, e, o)?;
            srv.synced(&mut c)?;
            rows.push(measured(&srv, x.who, names, claim_w, "p32", 0, || {
                queue::claim_complete(&srv, e, n, shape(o, DEPTH))
            }));
            fresh(&mut c)?;
            srv.synced(&mut c)?;
            rows.push(measured(&srv, x.who, names, life_w, "p32", 0, || {
                queue::lifecycle(&srv, e, n, shape(o, DEPTH))
            }));
        }
        if o.wants(Who::Floor) {
            fresh(&mut c)?;
            srv.synced(&mut c)?;
            say(&format!("floor {life_w} p32"));
            let f = row(Who::Floor, life_w, "p32", queue::floor(&srv, o.n, keep, cap, shape(o, DEPTH)), None);
            if f.ok() {
                say(&format!("  {:.0} jobs/s, {:.2} µs server CPU per job", f.rate(), f.cpu_per_job()));
            }
            rows.push(f);
        }
        let mut none = Vec::new();
        bull.round_with(&srv, &mut c, o, "claim,lifecycle", setting, rows, &mut none)?;
        chq.round(&srv, &mut c, o, "process,lifecycle", setting, rows, &mut none)?;
    }
    Ok(())
}

/// Calls at their caps and upkeep catching up (`caps.rs`; tiny sizes in the short mode, which
/// checks the tool only): the table on stdout and in target/bench/caps.md, the figures in
/// target/bench/caps.json (`caps-short.*` in the short mode).
fn round_caps(o: &Opts, bin: &Path, module: &Path, scratch: &Path) -> Result<(), String> {
    let repeat = if o.short { 1 } else { o.repeat };
    let x = caps::run(bin, module, scratch, o.short, repeat)?;
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name").and_then(|r| r.split_once(':')).map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "?".into());
    let nproc = std::thread::available_parallelism().map_or(0, |n| n.get());
    let commit = sh("git", &["-C", &root().display().to_string(), "describe", "--always", "--dirty"])
        .unwrap_or_else(|| "?".into());
    let machine = format!(
        "{model}, nproc {nproc}; module {} at {commit}; {} pass(es); {}",
        module.display(),
        repeat,
        sh("date", &["-u", "+%Y-%m-%d %H:%M UTC"]).unwrap_or_else(|| "?".into())
    );
    let md = caps::markdown(&x, &machine);
    println!("{md}");
    let stem = if o.short { "caps-short" } else { "caps" };
    let dir = root().join("target/bench");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    std::fs::write(dir.join(format!("{stem}.md")), &md).map_err(|e| format!("{stem}.md: {e}"))?;
    let json = caps::json(&x);
    serde_json::from_str::<serde_json::Value>(&json)
        .map_err(|e| format!("{stem}.json does not parse: {e}"))?;
    std::fs::write(dir.join(format!("{stem}.json")), json).map_err(|e| format!("{stem}.json: {e}"))?;
    if x.lines.is_empty() || x.catchup.is_empty() {
        return Err("calls at their caps: no figures".into());
    }
    Ok(())
}

/// Job schedulers at scale (`sched.rs`): the table on stdout and in target/bench/sched.md
/// (`sched-short.md` in the short mode).
fn round_sched(o: &Opts, bin: &Path, module: &Path, scratch: &Path) -> Result<(), String> {
    let f = sched::run(bin, module, scratch, o.short)?;
    let nproc = std::thread::available_parallelism().map_or(0, |n| n.get());
    let commit = sh("git", &["-C", &root().display().to_string(), "describe", "--always", "--dirty"])
        .unwrap_or_else(|| "?".into());
    let machine = format!(
        "nproc {nproc}; module {} at {commit}; {}",
        module.display(),
        sh("date", &["-u", "+%Y-%m-%d %H:%M UTC"]).unwrap_or_else(|| "?".into())
    );
    let md = sched::markdown(&f, &machine);
    println!("{md}");
    let dir = root().join("target/bench");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let stem = if o.short { "sched-short" } else { "sched" };
    std::fs::write(dir.join(format!("{stem}.md")), &md).map_err(|e| format!("{stem}.md: {e}"))?;
    if f.late_ms.is_empty() {
        return Err("job schedulers: no iteration reached a worker".into());
    }
    Ok(())
}

fn sh(cmd: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(cmd).args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn machine(
    c: &mut Conn,
    module_version: &str,
    build: &str,
    bull_dir: &Path,
    bull_ran: bool,
) -> Vec<(String, String)> {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name").and_then(|r| r.split_once(':')).map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "?".into());
    let nproc = std::thread::available_parallelism().map_or(0, |n| n.get());
    let memtotal = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| m.lines().find_map(|l| l.strip_prefix("MemTotal:").map(|v| v.trim().to_string())))
        .unwrap_or_else(|| "?".into());
    let valkey = server::info(c, "server", "valkey_version")
        .or_else(|| server::info(c, "server", "redis_version"))
        .unwrap_or_else(|| "?".into());
    let alloc = server::info(c, "memory", "mem_allocator").unwrap_or_else(|| "?".into());
    let io_threads = queue::config_get(c, "io-threads").unwrap_or_else(|_| "?".into());
    let commit = sh("git", &["-C", &root().display().to_string(), "describe", "--always", "--dirty"])
        .unwrap_or_else(|| "?".into());
    let mut m = vec![
        ("CPU".to_string(), format!("{model}, nproc {nproc} — shared by the server, the 50 client connections and (for BullMQ) Node")),
        ("memory".to_string(), memtotal),
        ("Valkey".to_string(), format!("{valkey} (allocator {alloc}, io-threads {io_threads}), 127.0.0.1, `--save ''`")),
        ("trafikey".to_string(), format!("{module_version}, {build}, at {commit}")),
        ("date".to_string(), sh("date", &["-u", "+%Y-%m-%d %H:%M UTC"]).unwrap_or_else(|| "?".into())),
    ];
    if bull_ran {
        let ver = std::fs::read_to_string(bull_dir.join("node_modules/bullmq/package.json"))
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .and_then(|v| v.get("version").and_then(|x| x.as_str()).map(String::from))
            .unwrap_or_else(|| "?".into());
        m.push((
            "BullMQ".to_string(),
            format!("{ver} on Node {}", sh("node", &["--version"]).unwrap_or_else(|| "?".into())),
        ));
    }
    m
}

fn run(o: &Opts) -> Result<bool, String> {
    let bin = server_bin()?;
    let module = module_path();
    if !module.is_file() {
        return Err(format!("no module at {} (cargo build --release --lib)", module.display()));
    }
    let scratch = std::env::var("BENCH_SCRATCH").map_or_else(|_| root().join("target/bench"), PathBuf::from);
    std::fs::create_dir_all(&scratch).map_err(|e| format!("{}: {e}", scratch.display()))?;
    let bull_dir = std::env::var("BENCH_BULLMQ_DIR").map_or_else(|_| scratch.join("bullmq"), PathBuf::from);

    if o.sched {
        round_sched(o, &bin, &module, &scratch)?;
        if o.only_sched {
            return Ok(true);
        }
    }
    if o.caps || o.short {
        round_caps(o, &bin, &module, &scratch)?;
        if o.only_caps {
            return Ok(true);
        }
    }
    let srv = Server::start(&bin, &module, &scratch)?;
    say(&format!(
        "valkey-server pid {} on 127.0.0.1:{}, N = {}, {} connections",
        srv.pid(),
        srv.port,
        o.n,
        CONNS
    ));
    let mut c = srv.conn()?;
    fresh(&mut c)?;
    let (caps, module_version) = capabilities(&mut c);
    let verbs = ["enqueue", "claim", "complete.flat"].iter().all(|t| caps.iter().any(|c| c == t));
    if !caps.iter().any(|c| c == "enqueue") {
        return Err(format!("EMQ.ENQUEUE is not in this build (capabilities {caps:?})"));
    }
    let mut notes = Vec::new();
    if !verbs {
        let s = "EMQ.CLAIM / EMQ.COMPLETE are not in this build of the module: trafikey's claim and lifecycle workloads are skipped (the Lua twin, BullMQ and the floor still run).";
        say(s);
        notes.push(s.to_string());
    }
    // CLAIM's BLOCK and upkeep came with module_version 0.2.0 (README: EMQ.CLAIM).
    let at_least = |want: (u64, u64)| {
        let mut p = module_version.split('.').map(|x| x.parse::<u64>().unwrap_or(0));
        (p.next().unwrap_or(0), p.next().unwrap_or(0)) >= want
    };
    let waits = verbs && at_least((0, 2)) && queue::config_get(&mut c, "trafikey.upkeep").is_ok();
    if !waits && o.wants(Who::Trafikey) {
        say(&format!("{NO_WAITS} (module_version {module_version}): the waiting workloads are skipped"));
        notes.push(format!(
            "{NO_WAITS} (module_version {module_version}): the waiting workloads were skipped."
        ));
    }
    let lua = Engine::load_lua(&mut c)?;
    let native = Engine::Native;
    let mut contenders = Vec::new();
    if o.wants(Who::Trafikey) {
        let completes = completes_here(&mut c);
        if !completes {
            say(&format!("{NO_COMPLETES}: the batch-finish lane is skipped"));
        }
        contenders.push(Contender { who: Who::Trafikey, engine: &native, verbs, waits, completes });
    }
    if o.wants(Who::Lua) && !o.only_waiting {
        contenders.push(Contender {
            who: Who::Lua,
            engine: &lua,
            verbs: true,
            waits: false,
            completes: false,
        });
    }

    // Warm-up (not measured): scripts cached, allocator and dict sizes settled.
    fresh(&mut c)?;
    for x in &contenders {
        if x.verbs {
            queue::lifecycle(&srv, x.engine, o.n.min(5_000), shape(o, DEPTH))
                .map_err(|e| format!("warm-up: {e}"))?;
        } else {
            queue::enqueue(&srv, x.engine, o.n.min(5_000), shape(o, DEPTH))
                .map_err(|e| format!("warm-up: {e}"))?;
        }
        fresh(&mut c)?;
    }

    let trafikey_client = match std::env::var("BENCH_TRAFIKEY_BULLMQ") {
        Ok(p) if Path::new(&p).is_file() => Ok(PathBuf::from(p)),
        _ => Err(std::env::var("BENCH_TRAFIKEY_BULLMQ_WHY").unwrap_or_else(|_| {
            "the trafikey backend for BullMQ (clients/bullmq/dist/index.js) is not built: scripts/bench builds it".into()
        })),
    };
    if let Err(why) = &trafikey_client {
        if o.wants(Who::BullMq) {
            notes.push(format!("BullMQ on trafikey was skipped: {why}."));
        }
    }
    let mut bull = Bull { dir: bull_dir.clone(), ready: false, ran: false, trafikey: trafikey_client };
    let mut skipped_memory = Vec::new();
    if !o.wants(Who::BullMq) {
        notes.push(std::env::var("BENCH_BULLMQ_WHY").unwrap_or_else(|_| "BullMQ was not run.".into()));
        skipped_memory.push((Who::BullMq, Err("skipped".into())));
    } else if !bullmq::installed(&bull_dir) {
        let s = format!(
            "BullMQ is not installed in {} (scripts/bench installs it; no network?): skipped.",
            bull_dir.display()
        );
        say(&s);
        notes.push(s);
        skipped_memory.push((Who::BullMq, Err("skipped: not installed".into())));
    } else {
        bull.ready = true;
    }

    let mut chq = Chasqui { bin: None, ran: false };
    if !o.wants(Who::ChasquiMq) || o.only_waiting {
        if !o.only_waiting {
            notes.push(
                std::env::var("BENCH_CHASQUIMQ_WHY").unwrap_or_else(|_| "ChasquiMQ was not run.".into()),
            );
            skipped_memory.push((Who::ChasquiMq, Err("skipped".into())));
        }
    } else if let Some(b) = chasquimq::binary() {
        if let Some(why) = chasquimq::standin() {
            say(&why);
        }
        chq.bin = Some(b);
    } else {
        let s = "ChasquiMQ's driver is not built (scripts/bench builds it into target/bench/chasquimq and names it in BENCH_CHASQUIMQ): skipped.".to_string();
        say(&s);
        notes.push(s);
        skipped_memory.push((Who::ChasquiMq, Err("skipped: not built".into())));
    }
    let bins = Bins { server: &bin, module: &module, scratch: &scratch };

    // Workload by workload, every contender back to back, so that a change in the machine's
    // load during the run falls on all of them alike.
    let keep: u64 = queue::config_get(&mut c, "trafikey.keep-completed")?.parse().unwrap_or(1000);
    let cap: u64 = queue::config_get(&mut c, "trafikey.events-maxlen")?.parse().unwrap_or(10_000);
    let mut passes = Vec::new();
    for i in 0..o.repeat {
        if o.only_scale {
            break;
        }
        if o.repeat > 1 {
            say(&format!("pass {} of {}", i + 1, o.repeat));
        }
        passes.push(pass(&srv, &mut c, &contenders, &mut bull, &mut chq, &bins, o, keep, cap)?);
    }
    let (rows, mut memory, idle) = report::median(passes);
    let scale = round_scale(&srv, &mut c, o, verbs, &mut notes)?;
    memory.extend(skipped_memory);
    let lanes_ran = rows.iter().any(|r| r.workload == DROP);
    let bull_ran = bull.ran;
    if chq.ran && chasquimq::standin().is_some() {
        notes.extend(chasquimq::standin());
    } else if chq.ran {
        notes.push("ChasquiMQ 1.3.0 (crates.io, sha256 pinned in scripts/bench) does not run on stock Valkey: it sends `XADD … IDMP` (Redis 8.6), `XREADGROUP … CLAIM` (Redis 8.4) and `XACKDEL` (Redis 8.2). tests/bench/chasquimq/valkey.patch makes it run: `XADD` without `IDMP` (no producer-side dedup, none of its per-producer dedup state in the server), `XREADGROUP` without `CLAIM` (no reclaim of idle entries in the same call), and the ack flusher's `XACKDEL` as `XACK` + `XDEL` of the same ids in one pipeline (its Lua scripts for retries, the DLQ and stored results likewise, not used here). Each change removes work or state the unpatched engine has on Redis, so ChasquiMQ's figures are a lower bound on its cost. Driven through its own `Producer` (`add`, `add_bulk`; default pool of 8 connections) and one `Consumer` with its recommended worker settings (batch 256, concurrency 100, ack batch 256; its delayed-job promoter and scheduler on, as by default), a no-op handler, by tests/bench/chasquimq/ (a binary of its own, JSON lines). Its process phase counts the consumer's start (connections, `XGROUP CREATE`) inside the measured part; a phase ends when every job has been handled and its entry acked and deleted (`XLEN` 0, polled every ms). Its lifecycle latency is `add` sent → the handler runs (acks are batched after it); its process phase has no latency figure. Events off: `events_enabled = false`.".into());
    }
    if rows.iter().any(|r| r.ok() && report::split(r.workload).1 != "default") {
        notes.push("Production modes: events off is `trafikey.events-maxlen 0` (the twin reloaded to match), ChasquiMQ's `events_enabled = false`, and for BullMQ, as far as it allows, `streams.events.maxLen` 0 on every Queue (its scripts still `XADD` each event and trim to ~0) with jobs added `removeOnComplete: 1000` (completed jobs kept as trafikey keeps them; at its default it keeps all). The AOF mode runs on a server of its own started with `--appendonly yes --appendfsync everysec`; the replica mode on a primary of its own with a second valkey-server (the module loaded too) started as `--replicaof 127.0.0.1 <port>`, both stopped by pid after the mode; with a replica or AOF every contender's writes are propagated and trafikey builds its effects. The replica's CPU per job is read over the same phase, once its replication offset has caught up with the primary's (the primary's CPU is read after that too).".into());
    }
    if o.wants(Who::Trafikey) {
        let count = |c: &mut Conn, f: &str| server::info(c, "trafikey", f).unwrap_or_else(|| "?".into());
        let (built, skipped) =
            (count(&mut c, "trafikey_effects_built"), count(&mut c, "trafikey_effects_skipped"));
        notes.push(format!(
            "Replication: this server has no replica and no AOF, so it propagates nothing — not the twin's script effects, nor BullMQ's or the floor's commands — and trafikey builds none of its effects either (`INFO trafikey` at the end of this run: {skipped} effects skipped, {built} built); a skipped write still counts as a change for `save` points. With a replica or AOF every contender pays for its effects (`EFFECTS=1 scripts/profile` counts trafikey's side)."
        ));
    }

    notes.push(format!(
        "The Lua twin (tests/bench/lua/) makes the module's checks and writes with EVALSHA, the clock from `redis.call('TIME')`; it skips type checks and ACL checks on undeclared keys, which only makes it cheaper. Events on, `trafikey.keep-completed` {keep} (the twin mirrors it); BullMQ at its defaults (it keeps every completed job)."
    ));
    notes.push("In BullMQ's best-mode lifecycle the `addBulk` producers run ahead of the one worker, so its latency includes the backlog; trafikey's and the twin's pipelined lifecycle claims what each connection enqueued, so its queue stays short.".into());
    if o.repeat > 1 {
        notes.push(format!("Every figure is from the median of {} passes over all workloads (by server CPU per job, each row on its own; memory: the median); \"each pass\" lists the server CPU per job of every pass, lowest first, to show the spread.", o.repeat));
    }
    if lanes_ran {
        notes.push(format!(
            "Coherence drop: {} rows `cache:{{t}}:<i>` hold a frame (a 14-byte version `ECC` + 11 Base62 chars, then a {}-byte value) and are each hit once by `TRA.DROP 1 <row> <version>`; a separate set `cache:{{l}}:<i>` with the same frames is hit with the same versions by EVALSHA of the coherence drop's reference Lua script (tests/fixtures/coherence_drop.lua, SCRIPT LOADed at run time). Half the versions are newer (dropped), a quarter equal and a quarter older (kept). Each lane runs on a fresh keyspace; afterwards every row is read back and both lanes must have dropped exactly the same rows. The side-by-side table shows them in the trafikey and Lua columns, so \"Lua ÷ trafikey\" there is EVALSHA ÷ TRA.DROP; a job is one call.",
            o.n,
            coherence::frame(0).len() - 14
        ));
    }
    notes.push("The floor sends, per job, the writes the module replicates for ENQUEUE, CLAIM and COMPLETE (HSET, LPUSH, XADD MAXLEN ~ ×3, RPOP, ZADD ×2, ZREM, HSET ×2, and the default retention's batched ZREM + DEL) as plain commands, pipelined 32 jobs per write on 50 connections: no reads, no checks, no fence. The per-call floors (CLAIM's writes: RPOP, ZADD, HSET, XADD; COMPLETE's: ZREM, ZADD, HSET, XADD and the retention's share) send one job's writes together in one round trip, one job at a time on each of the 50 connections: what those writes cost the server at c50 with no module at all.".into());

    let busy: Vec<String> = rows
        .iter()
        .filter(|r| r.foreign.is_some_and(|f| f > load::QUIET_CORES))
        .map(|r| {
            format!(
                "{} {} {} ({:.2})",
                report::contender(r.who, r.workload),
                r.workload,
                r.mode,
                r.foreign.unwrap_or(0.0)
            )
        })
        .collect();
    if !busy.is_empty() {
        notes.push(format!("Other processes used more than {} cores of the machine during: {}. Those figures are less reliable; run again on a quiet machine.", load::QUIET_CORES, busy.join(", ")));
    }
    let wait = o.wants(Who::Trafikey).then_some(WaitSetup {
        workers: WAITERS,
        gap_ms: WAIT_GAP.as_millis() as u64,
        spread: SPREAD,
        idle_conns: CONNS,
        idle_secs: o.idle_window.as_secs_f64(),
        tick_ms: queue::config_get(&mut c, "trafikey.upkeep-tick-ms").unwrap_or_else(|_| "?".into()),
        leases: LEASES,
        producers: CONNS / 2,
        block_workers: CONNS - CONNS / 2,
        claim_workers: CONNS,
        bull: bull_ran.then_some(BULL_WAITERS),
    });
    let report = Report {
        rows,
        memory,
        idle,
        scale,
        wait,
        machine: {
            // The short mode loads whichever build scripts/bench made for it (it checks the
            // tool, not speed): the row names the file.
            let build = if o.short { module.display().to_string() } else { "release build".into() };
            let mut m = machine(&mut c, &module_version, &build, &bull_dir, bull_ran);
            if chq.ran && chasquimq::standin().is_some() {
                m.push(("ChasquiMQ".into(), chasquimq::STANDIN.into()));
            } else if chq.ran {
                m.push((
                    "ChasquiMQ".into(),
                    "1.3.0 (crates.io), patched for Valkey by tests/bench/chasquimq/valkey.patch".into(),
                ));
            }
            m
        },
        notes,
        n: o.n,
        mem_jobs: o.mem,
        conns: CONNS,
        depth: DEPTH,
    };
    drop(c);
    drop(srv);

    let md = report.markdown();
    println!("{md}");
    let failures = report.failures();
    let out = scratch.join(if o.short { "results-short.md" } else { "results.md" });
    let title = if o.short {
        "# trafikey benchmark — short mode (checks the tool, not speed)\n\n"
    } else {
        "# trafikey benchmark\n\n"
    };
    std::fs::write(&out, format!("{title}{md}")).map_err(|e| format!("{}: {e}", out.display()))?;
    say(&format!("results written to {}", out.display()));
    // The same figures, machine-readable; read back and checked: it parses and holds a
    // measured row for every contender that ran.
    let json_path = scratch.join(if o.short { "results-short.json" } else { "results.json" });
    let text = serde_json::to_string_pretty(&report.json(o.short)).map_err(|e| e.to_string())?;
    std::fs::write(&json_path, &text).map_err(|e| format!("{}: {e}", json_path.display()))?;
    let ran: Vec<Who> = [Who::Trafikey, Who::Lua, Who::BullMq, Who::ChasquiMq, Who::Floor, Who::Set]
        .into_iter()
        .filter(|w| report.rows.iter().any(|r| r.who == *w && r.ok()))
        .collect();
    let mut failures = failures;
    match std::fs::read_to_string(&json_path)
        .map_err(|e| e.to_string())
        .and_then(|t| report::check_json(&t, &ran).and_then(|()| report::check_scale_json(&t, &report.scale)))
    {
        Ok(()) => say(&format!(
            "{} written and checked: a row for each of {}",
            json_path.display(),
            ran.iter().map(|w| w.key()).collect::<Vec<_>>().join(", ")
        )),
        Err(e) => failures.push(e),
    }
    if o.notebook && failures.is_empty() {
        let path = root().join(NOTEBOOK);
        if let Ok(text) = std::fs::read_to_string(&path) {
            match report::splice_notebook(&text, &md) {
                Some(new) => {
                    std::fs::write(&path, new).map_err(|e| format!("{NOTEBOOK}: {e}"))?;
                    say(&format!("{NOTEBOOK} updated between its bench markers"));
                }
                None => say(&format!(
                    "{NOTEBOOK} has no <!-- bench:start --> / <!-- bench:end --> markers: not touched"
                )),
            }
        }
    }
    for f in &failures {
        say(&format!("FAILED: {f}"));
    }
    Ok(failures.is_empty())
}

/// The tool's own pure parts, checked on every run before anything is measured.
fn selfcheck() -> Result<(), String> {
    for n in [0u64, 1, 61, 62, 123_456_789, u64::MAX] {
        if queue::jnum(&queue::jid(n)) != Some(n) {
            return Err(format!("selfcheck: job id of {n} does not round-trip"));
        }
    }
    if &queue::jid(u64::MAX)[3..] != b"LygHa16AHYF" {
        return Err("selfcheck: jid(u64::MAX)".into());
    }
    let r = "a\n<!-- bench:start -->\nold\n<!-- bench:end -->\nb\n";
    let new = "a\n<!-- bench:start -->\nnew\n<!-- bench:end -->\nb\n";
    let named = "see `<!-- bench:start -->` and <!-- bench:end -->\n";
    let ok = report::splice_notebook(r, "new").as_deref() == Some(new)
        && report::splice_notebook("no markers", "x").is_none()
        && report::splice_notebook("<!-- bench:end --> <!-- bench:start -->", "x").is_none()
        && report::splice_notebook("<!-- bench:end -->\n<!-- bench:start -->\n", "x").is_none()
        // Markers named in the prose are not markers.
        && report::splice_notebook(&format!("{named}{r}"), "new") == Some(format!("{named}{new}"));
    if !ok {
        return Err("selfcheck: splicing the notebook's tables".into());
    }
    // The coherence drop's rows: the expected verdict (on the bytes) is the snowflakes'
    // order, and the mix is about half drops, with equal and older versions both kept.
    let mut kinds = [0u32; 3];
    for i in 0..10_000 {
        let (stored, incoming) = coherence::snowflakes(i);
        if coherence::expected_drop(i) != (incoming > stored)
            || coherence::frame(i)[..14] != coherence::version(stored)
        {
            return Err(format!("selfcheck: coherence drop row {i}"));
        }
        kinds[usize::from(incoming >= stored) + usize::from(incoming > stored)] += 1;
    }
    if kinds.iter().any(|&k| k < 2_000) || !(4_500..=5_500).contains(&kinds[2]) {
        return Err(format!("selfcheck: coherence drop mix [older, equal, newer] {kinds:?}"));
    }
    // The median of passes: the middle row by CPU per job, carrying every pass's figure; a
    // failure in any pass wins.
    let at = |cpu: f64, status: Status| Row {
        jobs: 10,
        cpu_us: cpu * 10.0,
        ..empty_row(Who::Trafikey, "enqueue", "c50", status)
    };
    let passes = [3.0, 1.0, 2.0].map(|c| {
        (
            vec![at(c, Status::Ok), at(c, if c == 1.0 { Status::Failed("x".into()) } else { Status::Ok })],
            vec![],
            vec![],
        )
    });
    let mut passes = Vec::from(passes);
    for (i, p) in passes.iter_mut().enumerate() {
        if let Some(r) = p.0.get_mut(1) {
            r.mode = "p32";
        }
        p.1.push((Who::Trafikey, Ok(100.0 + i as f64)));
    }
    // A latency row's median is the pass with the median p99; an idle window's, the median CPU.
    for (i, p) in passes.iter_mut().enumerate() {
        let mut r = at(1.0 + i as f64, Status::Ok);
        (r.workload, r.mode, r.p99_us) = (report::WAKE, report::WAITING, [30, 10, 20][i]);
        p.0.push(r);
        let fig = report::IdleFig {
            secs: 1.0,
            cpu_us: [3e3, 1e3, 2e3][i],
            client: 0.0,
            foreign: 0.0,
            claims: 0,
            ticks: 0,
            passes: vec![],
        };
        p.2.push((report::IDLE[1], Ok(fig)));
    }
    let (rows, mem, idle) = report::median(passes);
    let ok = matches!(&rows[..], [a, b, w] if a.cpu_per_job() == 2.0 && a.passes == [1.0, 2.0, 3.0] && !b.ok()
            && w.p99_us == 20 && w.cpu_per_job() == 3.0 && w.p99s == [10, 20, 30])
        && matches!(&mem[..], [(Who::Trafikey, Ok(m))] if *m == 101.0)
        && matches!(&idle[..], [(_, Ok(f))] if f.cpu_us == 2e3 && f.passes == [1e-3, 2e-3, 3e-3]);
    if !ok {
        return Err("selfcheck: median of passes".into());
    }
    // BullMQ on trafikey: each pass pairs its row with BullMQ on Valkey's row of the same
    // workload and mode in that pass; the median keeps every pass's ratio.
    let bull = |who: Who, w: &'static str, m: &'static str, cpu: f64| Row {
        jobs: 10,
        cpu_us: cpu * 10.0,
        secs: 1.0,
        ..empty_row(who, w, m, Status::Ok)
    };
    let passes: Vec<report::Pass> = [(40.0, 10.0), (80.0, 16.0), (50.0, 30.0)]
        .into_iter()
        .map(|(valkey, trafikey)| {
            let mut rows = vec![
                bull(Who::BullMq, "claim+complete", "p32", valkey),
                bull(Who::BullMq, "claim+complete", "c50", 1.0),
                bull(Who::BullMqTrafikey, "claim+complete", "p32", trafikey),
            ];
            report::pair_bull(&mut rows);
            (rows, vec![], vec![])
        })
        .collect();
    let (rows, _, _) = report::median(passes);
    let t = rows.iter().find(|r| r.who == Who::BullMqTrafikey);
    // Pass ratios 0.25, 0.2, 0.6: the median is 0.25, though the medians' ratio is 16/50.
    let ok = t.and_then(Row::paired).is_some_and(|(m, b)| m.1 == 0.25 && b.1 == 0.2 && m.0 == 1.0)
        && t.is_some_and(|t| t.paired.len() == 3);
    if !ok {
        return Err("selfcheck: BullMQ on trafikey paired with BullMQ on Valkey".into());
    }
    // results.json: parses, one row per contender, workload and mode, the production mode
    // split off the workload; a contender without a measured row is caught.
    let mut replica = at(4.0, Status::Ok);
    (replica.workload, replica.mode, replica.replica_cpu_us) = (report::LIFE_REPLICA, "p32", Some(30.0));
    let rep = Report {
        rows: vec![
            at(2.0, Status::Ok),
            replica,
            empty_row(Who::Lua, "enqueue", "c50", Status::Skipped("x".into())),
        ],
        memory: vec![(Who::ChasquiMq, Ok(120.0))],
        idle: vec![],
        scale: vec![],
        wait: None,
        machine: vec![("CPU".into(), "x".into())],
        notes: vec![],
        n: 10,
        mem_jobs: 10,
        conns: 1,
        depth: 1,
    };
    let text = rep.json(true).to_string();
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("selfcheck: results.json: {e}"))?;
    let ok = report::check_json(&text, &[Who::Trafikey, Who::ChasquiMq]).is_ok()
        && report::check_json(&text, &[Who::Lua]).is_err()
        && v.pointer("/rows/1/workload").and_then(|w| w.as_str()) == Some("lifecycle")
        && v.pointer("/rows/1/setting").and_then(|w| w.as_str()) == Some("replica")
        && v.pointer("/rows/1/replica_cpu_us_per_job").and_then(|w| w.as_f64()) == Some(3.0)
        && v.pointer("/rows/0/server_cpu_us_per_job/median").and_then(|w| w.as_f64()) == Some(2.0)
        && v.pointer("/rows/3/memory_bytes_per_job").and_then(|w| w.as_f64()) == Some(120.0);
    if !ok {
        return Err(format!("selfcheck: results.json {text}"));
    }
    // The scale rows: three per point, each with its ratio to the small point's figure; a
    // failed point has no figures and the check sees it.
    let fig = |m: f64| report::Figure { median: m, passes: vec![m], rate: 1.0 };
    let line = |label: &str, small: bool, m: f64| report::ScaleLine {
        label: label.into(),
        jobs: 10,
        queues: 1,
        levels: 1,
        cycles: 1,
        conns: 1,
        small,
        result: Ok(report::ScaleFigs {
            enqueue: fig(m),
            drain: fig(2.0 * m),
            memory: fig(100.0 * m),
            jobs_per_claim: 1.0,
            foreign: 0.0,
        }),
    };
    let mut rep = rep;
    rep.rows.clear();
    rep.memory.clear();
    rep.scale = vec![line("a", true, 2.0), line("b", false, 3.0)];
    let text = rep.json(true).to_string();
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("selfcheck: results.json: {e}"))?;
    let mut failed = line("b", false, 3.0);
    failed.result = Err("x".into());
    let ok = report::check_scale_json(&text, &rep.scale).is_ok()
        && report::check_scale_json(&text, &[failed]).is_err()
        && report::check_scale_json(&text, &[line("c", false, 1.0)]).is_err()
        && v.pointer("/rows/4/workload").and_then(|w| w.as_str()) == Some("scale: claim+complete")
        && v.pointer("/rows/4/scale/ratio_to_small").and_then(|w| w.as_f64()) == Some(1.5)
        && v.pointer("/rows/5/memory_bytes_per_job").and_then(|w| w.as_f64()) == Some(300.0)
        && v.pointer("/rows/5/server_cpu_us_per_job/median").is_some_and(serde_json::Value::is_null);
    if !ok {
        return Err(format!("selfcheck: results.json's scale rows {text}"));
    }
    if (0..1000).any(|j| !(SPREAD.0..=SPREAD.1).contains(&waiting::delay_ms(j, SPREAD))) {
        return Err("selfcheck: the scheduled jobs' delays".into());
    }
    let shares: u64 = (0..7).map(|i| load::share(100, 7, i)).map(|r| r.end - r.start).sum();
    if shares != 100 || load::share(100, 7, 6).end != 100 || load::percentile(&[1, 2, 3, 4], 50.0) != 2 {
        return Err("selfcheck: shares or percentiles".into());
    }
    Ok(())
}

fn main() -> ExitCode {
    if let Err(e) = selfcheck() {
        eprintln!("bench: {e}");
        return ExitCode::FAILURE;
    }
    let o = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("bench: {e}");
            return ExitCode::from(2);
        }
    };
    match run(&o) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("bench: {e}");
            ExitCode::FAILURE
        }
    }
}
