//! The figures of one run, as Markdown: printed, written to target/bench/results.md and
//! (full runs) into the benchmark's notebook, tests/bench/README.md, between its bench markers.

use std::fmt::Write as _;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Who {
    Trafikey,
    Lua,
    BullMq,
    Floor,
    Set,
    ChasquiMq,
    /// BullMQ's own classes with the trafikey backend (clients/bullmq), on the module.
    BullMqTrafikey,
}

impl Who {
    pub fn label(self) -> &'static str {
        match self {
            Who::Trafikey => "trafikey",
            Who::Lua => "Lua twin",
            Who::BullMq => "BullMQ",
            Who::Floor => "floor",
            Who::Set => "SET",
            Who::ChasquiMq => "ChasquiMQ",
            Who::BullMqTrafikey => "BullMQ on trafikey",
        }
    }

    /// The name `--only` and results.json use.
    pub fn key(self) -> &'static str {
        match self {
            Who::Trafikey => "trafikey",
            Who::Lua => "lua",
            Who::BullMq => "bullmq",
            Who::Floor => "floor",
            Who::Set => "set",
            Who::ChasquiMq => "chasquimq",
            Who::BullMqTrafikey => "bullmq-trafikey",
        }
    }
}

/// The production modes, for the process (claim+complete, prefilled) and lifecycle
/// workloads, pipelined (p32; BullMQ and ChasquiMQ: their best mode): events off (on the
/// main server), one replica attached, and AOF with `appendfsync everysec` (each on a server
/// of its own, started for the mode).
pub const CLAIM_QUIET: &str = "claim+complete, events off";
pub const LIFE_QUIET: &str = "lifecycle, events off";
pub const CLAIM_REPLICA: &str = "claim+complete, replica";
pub const LIFE_REPLICA: &str = "lifecycle, replica";
pub const CLAIM_AOF: &str = "claim+complete, AOF everysec";
pub const LIFE_AOF: &str = "lifecycle, AOF everysec";

/// The modes' table: (mode, its process workload, its lifecycle workload).
pub const MODES: [(&str, &str, &str); 4] = [
    ("default", "claim+complete", "lifecycle"),
    ("events off", CLAIM_QUIET, LIFE_QUIET),
    ("replica", CLAIM_REPLICA, LIFE_REPLICA),
    ("AOF everysec", CLAIM_AOF, LIFE_AOF),
];

/// A setting of the production modes: the workloads it turns `claim+complete` and
/// `lifecycle` into.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Setting {
    Default,
    EventsOff,
    Replica,
    Aof,
}

impl Setting {
    pub fn workload(self, base: &str) -> &'static str {
        let i = match self {
            Setting::Default => 0,
            Setting::EventsOff => 1,
            Setting::Replica => 2,
            Setting::Aof => 3,
        };
        let (_, claim, life) = MODES[i];
        if base.starts_with("claim") {
            claim
        } else {
            life
        }
    }
}

/// A workload's base and its production mode ("default" for all the others).
pub fn split(workload: &str) -> (&str, &'static str) {
    for (mode, claim, life) in MODES.iter().skip(1) {
        if workload == *claim {
            return ("claim+complete", mode);
        }
        if workload == *life {
            return ("lifecycle", mode);
        }
    }
    (workload, "default")
}

/// The coherence drop's workload: trafikey's row is `TRA.DROP`, the Lua row EVALSHA of the
/// coherence drop's reference Lua script (tests/fixtures/coherence_drop.lua).
pub const DROP: &str = "coherence drop";

/// Who a row's figures are from: the contender, or for the coherence drop what it ran.
pub fn contender(who: Who, workload: &str) -> &'static str {
    match (who, workload == DROP) {
        (Who::Trafikey, true) => "trafikey `TRA.DROP`",
        (Who::Lua, true) => "reference script (EVALSHA)",
        _ => who.label(),
    }
}

pub enum Status {
    Ok,
    Skipped(String),
    Failed(String),
}

pub struct Row {
    pub who: Who,
    pub workload: &'static str,
    pub mode: &'static str,
    pub jobs: u64,
    pub secs: f64,
    pub cpu_us: f64,
    /// µs spent inside the contender's top-level commands (INFO commandstats), when known.
    pub inside_us: Option<f64>,
    pub p50_us: u32,
    pub p99_us: u32,
    /// Cores other processes on the machine used meanwhile.
    pub foreign: Option<f64>,
    /// Cores the tool's own clients used meanwhile (not known for BullMQ's Node clients).
    pub client: Option<f64>,
    pub status: Status,
    /// Server CPU per job of every pass this row was the median of, lowest first.
    pub passes: Vec<f64>,
    /// The highest jobs/s of those passes.
    pub best_rate: Option<f64>,
    /// The p99 of every pass, lowest first.
    pub p99s: Vec<u32>,
    /// What else the phase showed (the waiting workloads: how often workers waited).
    pub note: Option<String>,
    /// A blocking workers' row over the pipelined row it stands beside, in the same pass:
    /// (jobs/s ratio, server CPU per job ratio), one per pass.
    pub paired: Vec<(f64, f64)>,
    /// The replica's CPU over the phase, µs (the replica mode).
    pub replica_cpu_us: Option<f64>,
}

impl Row {
    pub fn ok(&self) -> bool {
        matches!(self.status, Status::Ok)
    }
    pub fn rate(&self) -> f64 {
        self.jobs as f64 / self.secs
    }
    pub fn cpu_per_job(&self) -> f64 {
        self.cpu_us / self.jobs as f64
    }
    pub fn replica_per_job(&self) -> Option<f64> {
        self.replica_cpu_us.map(|r| r / self.jobs as f64)
    }
    /// The lowest server CPU per job of the passes (other tenants only ever add to it).
    pub fn best_cpu(&self) -> f64 {
        self.passes.first().copied().unwrap_or_else(|| self.cpu_per_job())
    }
    pub fn best_rate(&self) -> f64 {
        self.best_rate.unwrap_or_else(|| self.rate())
    }
    /// The paired ratios' medians, (jobs/s, CPU), each on its own; and their best (the highest
    /// jobs/s ratio, the lowest CPU ratio).
    pub fn paired(&self) -> Option<((f64, f64), (f64, f64))> {
        let mut rates: Vec<f64> = self.paired.iter().map(|p| p.0).collect();
        let mut cpus: Vec<f64> = self.paired.iter().map(|p| p.1).collect();
        rates.sort_by(f64::total_cmp);
        cpus.sort_by(f64::total_cmp);
        let mid = rates.len().checked_sub(1)? / 2;
        Some(((rates[mid], cpus[mid]), (*rates.last()?, *cpus.first()?)))
    }
}

/// The batch-finish lane's mode: the pipelined (p32) claim+complete and lifecycle with the
/// COMPLETEs of each claim sent as one `TRA.COMPLETES` (trafikey only).
pub const BATCH: &str = "p32, batch finish";

/// One pass's rows: each batch-finish row paired with the p32 row of its workload in the same
/// pass, so that the two are compared as measured side by side.
pub fn pair_batch(rows: &mut [Row]) {
    for workload in ["claim+complete", "lifecycle"] {
        pair(rows, (Who::Trafikey, workload, BATCH), (Who::Trafikey, workload, "p32"));
    }
}

/// In one pass's rows, the row `of` paired with the row `beside` it: (jobs/s ratio, server CPU
/// per job ratio), when both were measured.
fn pair(rows: &mut [Row], of: (Who, &str, &str), beside: (Who, &str, &str)) {
    let is = |r: &Row, (who, workload, mode): (Who, &str, &str)| {
        r.who == who && r.workload == workload && r.mode == mode && r.ok()
    };
    let base = rows.iter().find(|r| is(r, beside)).map(|r| (r.rate(), r.cpu_per_job()));
    if let (Some((rate, cpu)), Some(r)) = (base, rows.iter_mut().find(|r| is(r, of))) {
        r.paired = vec![(r.rate() / rate, r.cpu_per_job() / cpu)];
    }
}

/// The rows of the BullMQ forms (tests/bench/forms.rs): workloads and modes.
pub const BULK: &str = "bulk add";
pub const NEXT: &str = "lifecycle, finish-and-fetch";
/// The finish-and-fetch lifecycle's mode with its jobs enqueued by one TRA.ADD a write (the
/// mode "p32" enqueues them one EMQ.ENQUEUE each).
pub const NEXT_ADD: &str = "p32, TRA.ADD producers";
/// The same with `KEEP 0` on each TRA.COMPLETENEXT: no finished job kept, as ChasquiMQ keeps none.
pub const NEXT_ADD_DROP: &str = "p32, TRA.ADD producers, KEEP 0";
/// The finish-and-fetch lifecycle's mode with one TRA.COMPLETESNEXT for the jobs a connection holds.
pub const NEXT_MANY: &str = "p32, one TRA.COMPLETESNEXT a write";
pub const ROW_PAIR: &str = "claim+complete, CLAIM … ROW";
pub const WITHOUT_ROW: &str = "p32, without ROW";
pub const WITH_ROW: &str = "p32, ROW";
/// The bulk add's lanes: (batch, trafikey's mode, ChasquiMQ's mode).
pub const BULK_LANES: [(usize, &str, &str); 2] =
    [(32, "TRA.ADD 32 a call", "add_bulk 32"), (250, "TRA.ADD 250 a call", "add_bulk 250")];
/// bench.mjs's claim+complete with its one Worker named (BullMQ records the name in each job).
pub const NAMED: &str = "claim+complete, named Worker";
/// bench.mjs's workloads, BullMQ on Valkey beside BullMQ on trafikey: (name, workload, mode).
pub const BULL_PAIRS: [(&str, &str, &str); 7] = [
    ("add (50 Queues, one add at a time)", "enqueue", "c50"),
    ("addBulk of 32 (50 Queues)", "enqueue", "p32"),
    ("Workers at concurrency 1 (50 Workers)", "claim+complete", "c50"),
    ("Worker at concurrency 50 (1 Worker)", "claim+complete", "p32"),
    ("named Worker at concurrency 50 (1 Worker)", NAMED, "p32"),
    ("lifecycle: add + 50 Workers × 1", "lifecycle", "c50"),
    ("lifecycle: addBulk + 1 Worker × 50", "lifecycle", "p32"),
];

/// One pass's rows: claim+complete with `CLAIM … ROW` paired with the same without ROW,
/// run right before it.
pub fn pair_row(rows: &mut [Row]) {
    pair(rows, (Who::Trafikey, ROW_PAIR, WITH_ROW), (Who::Trafikey, ROW_PAIR, WITHOUT_ROW));
}

/// One pass's rows: each BullMQ-on-trafikey row paired with BullMQ on Valkey's row of the same
/// workload, run right before it, so that a change in the machine's load between the two is
/// small.
pub fn pair_bull(rows: &mut [Row]) {
    for (_, workload, mode) in BULL_PAIRS {
        pair(rows, (Who::BullMqTrafikey, workload, mode), (Who::BullMq, workload, mode));
    }
}

/// The blocking workers' rows and the pipelined rows (mode p32) they stand beside.
pub const BESIDE: [(&str, &str); 2] = [(BLOCKING_LIFE, "lifecycle"), (BLOCKING_CLAIM, "claim+complete")];

/// One pass's rows: each blocking workers' row paired with the pipelined row it stands beside
/// in the same pass (run right before it), so a change in the machine's load between passes
/// falls on both.
pub fn pair_blocking(rows: &mut [Row]) {
    for (blocking, beside) in BESIDE {
        pair(rows, (Who::Trafikey, blocking, "p32"), (Who::Trafikey, beside, "p32"));
    }
}

/// The waiting workloads: wake latency and lateness (their mode is [`WAITING`]), and the
/// blocking workers' throughput beside the pipelined workloads they are held to.
pub const WAKE: &str = "wake latency";
pub const LATE: &str = "lateness, scheduled jobs";
/// The wake rows' reference: ENQUEUEs at their pace with nobody waiting.
pub const PACED: &str = "ENQUEUE alone, same pace";
pub const WAITING: &str = "waiting";
pub const BLOCKING_LIFE: &str = "lifecycle, blocking workers";
pub const BLOCKING_CLAIM: &str = "claim+complete, BLOCK";

/// Workloads whose median pass is chosen by p99 latency, not server CPU per job.
fn by_latency(workload: &str) -> bool {
    workload == WAKE || workload == LATE || workload == PACED
}

/// One idle window: the server's CPU while connections idle.
pub struct IdleFig {
    pub secs: f64,
    pub cpu_us: f64,
    pub client: f64,
    pub foreign: f64,
    /// CLAIMs the server ran during the window, and upkeep ticks that acted.
    pub claims: u64,
    pub ticks: u64,
    /// Server CPU, cores, of every pass this one is the median of, lowest first.
    pub passes: Vec<f64>,
}

impl IdleFig {
    /// Server CPU in cores (CPU-seconds per second).
    pub fn cores(&self) -> f64 {
        self.cpu_us / 1e6 / self.secs
    }
}

/// The idle windows, by setup (in the order of [`IDLE`]).
pub type Idles = Vec<(&'static str, Result<IdleFig, String>)>;

/// The idle setups: what the connections do, as the table names it.
pub const IDLE: [&str; 5] = [
    "connected, nothing sent (the server idle)",
    "waiting in `CLAIM … BLOCK 0`",
    "waiting in `CLAIM … BLOCK 0`, the queue holding active leases",
    "polling: a plain `CLAIM` every 10 ms each",
    "waiting in `CLAIM … BLOCK 0`, the queue holding active leases, `trafikey.upkeep no`",
];

/// How the waiting workloads ran, for the table's words.
pub struct WaitSetup {
    pub workers: usize,
    pub gap_ms: u64,
    pub spread: (u64, u64),
    pub idle_conns: usize,
    pub idle_secs: f64,
    /// `trafikey.upkeep-tick-ms`, as the server has it.
    pub tick_ms: String,
    pub leases: u64,
    pub producers: usize,
    pub block_workers: usize,
    pub claim_workers: usize,
    /// BullMQ's Workers × concurrency, when it ran.
    pub bull: Option<(usize, usize)>,
}

/// One figure of the scale table: the median pass's value, every pass's (lowest first), and
/// the median pass's jobs/s (NaN for memory).
pub struct Figure {
    pub median: f64,
    pub passes: Vec<f64>,
    pub rate: f64,
}

/// A scale point's figures: server CPU per job of the enqueue and the claim+complete phases,
/// memory per waiting job (after the enqueue), jobs per CLAIM, the most other load seen.
pub struct ScaleFigs {
    pub enqueue: Figure,
    pub drain: Figure,
    pub memory: Figure,
    pub jobs_per_claim: f64,
    pub foreign: f64,
}

/// One point of "Cost as work grows".
pub struct ScaleLine {
    pub label: String,
    pub jobs: u64,
    pub queues: u64,
    pub levels: u64,
    /// How many times its phases ran on a fresh keyspace per pass (figures summed).
    pub cycles: u64,
    pub conns: usize,
    /// The small-queue point every other one is set beside.
    pub small: bool,
    pub result: Result<ScaleFigs, String>,
}

/// The scale table's goal: each figure within this factor of the small queue's.
pub const SCALE_GOAL: f64 = 1.15;

pub struct Report {
    pub rows: Vec<Row>,
    pub memory: Memory,
    pub idle: Idles,
    /// Cost as work grows (`--scale`; a smoke version in the short mode).
    pub scale: Vec<ScaleLine>,
    pub wait: Option<WaitSetup>,
    pub machine: Vec<(String, String)>,
    pub notes: Vec<String>,
    pub n: u64,
    pub mem_jobs: u64,
    pub conns: usize,
    pub depth: usize,
}

/// Workloads in table order: (workload, mode).
pub const ORDER: [(&str, &str); 21] = [
    ("enqueue", "c50"),
    ("enqueue", "p32"),
    ("claim+complete", "c50"),
    ("claim+complete", "p32"),
    ("claim+complete", BATCH),
    (BLOCKING_CLAIM, "p32"),
    ("lifecycle", "c50"),
    ("lifecycle", "p32"),
    ("lifecycle", BATCH),
    (BLOCKING_LIFE, "p32"),
    (CLAIM_QUIET, "p32"),
    (LIFE_QUIET, "p32"),
    (CLAIM_REPLICA, "p32"),
    (LIFE_REPLICA, "p32"),
    (CLAIM_AOF, "p32"),
    (LIFE_AOF, "p32"),
    ("CLAIM alone", "c50"),
    ("COMPLETE alone", "c50"),
    (DROP, "c50"),
    (DROP, "p32"),
    ("plain SET", "c50"),
];

fn num(v: f64) -> String {
    if !v.is_finite() {
        "–".into()
    } else if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

pub fn rate(v: f64) -> String {
    if !v.is_finite() {
        "–".into()
    } else {
        let r = v.round() as u64;
        let s = r.to_string();
        let mut out = String::new();
        for (i, ch) in s.chars().enumerate() {
            if i > 0 && (s.len() - i).is_multiple_of(3) {
                out.push(' ');
            }
            out.push(ch);
        }
        out
    }
}

fn ms(us: u32) -> String {
    let v = f64::from(us) / 1000.0;
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

impl Report {
    pub fn get(&self, who: Who, workload: &str, mode: &str) -> Option<&Row> {
        self.rows.iter().find(|r| r.who == who && r.workload == workload && r.mode == mode && r.ok())
    }

    fn mem(&self, who: Who) -> Option<f64> {
        self.memory.iter().find(|(w, _)| *w == who).and_then(|(_, r)| r.as_ref().ok().copied())
    }

    pub fn failures(&self) -> Vec<String> {
        let mut f: Vec<String> = self
            .rows
            .iter()
            .filter_map(|r| match &r.status {
                Status::Failed(e) => {
                    Some(format!("{} {} {}: {e}", contender(r.who, r.workload), r.workload, r.mode))
                }
                _ => None,
            })
            .collect();
        for (w, r) in &self.memory {
            if let Err(e) = r {
                if !e.starts_with("skipped") {
                    f.push(format!("{} memory: {e}", w.label()));
                }
            }
        }
        for (what, r) in &self.idle {
            if let Err(e) = r {
                if !e.starts_with("skipped") {
                    f.push(format!("trafikey idle, {what}: {e}"));
                }
            }
        }
        for l in &self.scale {
            if let Err(e) = &l.result {
                f.push(format!("trafikey cost as work grows, {}: {e}", l.label));
            }
        }
        f
    }

    pub fn markdown(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "### Machine\n");
        for (k, v) in &self.machine {
            let _ = writeln!(s, "- {k}: {v}");
        }
        let _ = writeln!(
            s,
            "\nN = {} jobs per workload, {} connections; `c50` = each connection waits for each reply (BullMQ: 50 `Queue`s calling `add`, 50 `Worker`s of concurrency 1); `p32` = pipelined {} deep with `CLAIM … COUNT {}` (BullMQ's best mode instead: `addBulk` of {} from 50 `Queue`s, one `Worker` at concurrency 50). Server CPU is `used_cpu_user + used_cpu_sys` of the server process (`INFO cpu`) over the measured part, divided by the jobs (for the coherence drop, the calls). Client and server share the machine's cores, so jobs/s depends on the client as well; server CPU per job does not.\n",
            self.n, self.conns, self.depth, self.depth, self.depth
        );

        // Side by side.
        let _ = writeln!(s, "### Side by side\n");
        let _ = writeln!(s, "| workload | mode | trafikey jobs/s | Lua twin jobs/s | BullMQ jobs/s | ChasquiMQ jobs/s | trafikey CPU µs/job | Lua twin CPU µs/job | BullMQ CPU µs/job | ChasquiMQ CPU µs/job | Lua ÷ trafikey | BullMQ ÷ trafikey | ChasquiMQ ÷ trafikey |");
        let _ = writeln!(s, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|");
        for (w, m) in ORDER.iter().filter(|(w, _)| !w.starts_with("plain")) {
            let t = self.get(Who::Trafikey, w, m);
            let l = self.get(Who::Lua, w, m);
            let b = self.get(Who::BullMq, w, m);
            let q = self.get(Who::ChasquiMq, w, m);
            if t.is_none() && l.is_none() && b.is_none() && q.is_none() {
                continue;
            }
            let r = |x: Option<&Row>| x.map_or("–".to_string(), |x| rate(x.rate()));
            let c = |x: Option<&Row>| x.map_or("–".to_string(), |x| num(x.cpu_per_job()));
            let ratio = |x: Option<&Row>| match (x, t) {
                (Some(x), Some(t)) => format!("{:.2}×", x.cpu_per_job() / t.cpu_per_job()),
                _ => "–".into(),
            };
            let mode = match (*m == "p32", b.is_some(), q.is_some()) {
                (true, true, true) => "p32 (BullMQ, ChasquiMQ: best)",
                (true, true, false) => "p32 (BullMQ: best)",
                (true, false, true) => "p32 (ChasquiMQ: best)",
                _ => m,
            };
            let w = if *w == DROP {
                "coherence drop, per call (trafikey: `TRA.DROP`; Lua: EVALSHA of the reference script)"
            } else {
                w
            };
            let _ = writeln!(
                s,
                "| {w} | {mode} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                r(t),
                r(l),
                r(b),
                r(q),
                c(t),
                c(l),
                c(b),
                c(q),
                ratio(l),
                ratio(b),
                ratio(q)
            );
        }
        if let Some(f) = self.get(Who::Floor, "lifecycle", "p32") {
            let t = self.get(Who::Trafikey, "lifecycle", "p32");
            let _ = writeln!(
                s,
                "| floor: the lifecycle's writes as plain commands | p32 | {} | | | | {} | | | | trafikey ÷ floor: {} | | |",
                rate(f.rate()),
                num(f.cpu_per_job()),
                t.map_or("–".into(), |t| format!("{:.2}×", t.cpu_per_job() / f.cpu_per_job()))
            );
        }
        for verb in ["CLAIM", "COMPLETE"] {
            let w = if verb == "CLAIM" { "CLAIM alone" } else { "COMPLETE alone" };
            if let Some(f) = self.get(Who::Floor, w, "c50") {
                let t = self.get(Who::Trafikey, w, "c50");
                let _ = writeln!(
                    s,
                    "| floor: {verb}'s writes as plain commands, one round trip a call | c50 | {} | | | | {} | | | | trafikey ÷ floor: {} | | |",
                    rate(f.rate()),
                    num(f.cpu_per_job()),
                    t.map_or("–".into(), |t| format!("{:.2}×", t.cpu_per_job() / f.cpu_per_job()))
                );
            }
        }
        if let Some(x) = self.get(Who::Set, "plain SET", "c50") {
            let _ = writeln!(
                s,
                "| plain SET (per request) | c50 | {} | | | | {} | | | | | | |",
                rate(x.rate()),
                num(x.cpu_per_job())
            );
        }

        // Memory.
        let _ = writeln!(s, "\n### Memory per waiting job\n");
        let _ = writeln!(s, "`used_memory` growth over {} small jobs enqueued into an empty queue, events at their default (the capped events stream is part of it).\n", self.mem_jobs);
        let _ = writeln!(s, "| contender | bytes per waiting job |");
        let _ = writeln!(s, "|---|--:|");
        for (w, r) in &self.memory {
            let v = match r {
                Ok(b) => format!("{b:.0}"),
                Err(e) => e.clone(),
            };
            let _ = writeln!(s, "| {} | {v} |", w.label());
        }

        // The production modes.
        if self.rows.iter().any(|r| r.ok() && split(r.workload).1 != "default") {
            let _ = writeln!(s, "\n### Production modes\n");
            let _ = writeln!(s, "Server CPU µs per job on the primary, pipelined (p32; BullMQ and ChasquiMQ in their best mode), N = {} jobs: the default (events on, no replica, no AOF); events off; one replica attached (a second valkey-server started as `--replicaof` the first; the replica's own CPU per job beside it, read once it has caught up with the primary's offset); `appendonly yes` + `appendfsync everysec`. The replica and AOF modes each run on a server of their own, started for the mode. \"process\" is claim+complete of a prefilled queue. jobs/s in the same order.\n", self.n);
            let _ = writeln!(s, "| contender | workload | default | events off | replica: primary | replica: the replica | AOF everysec | ÷ trafikey (default / events off / replica / AOF) | jobs/s (default / events off / replica / AOF) |");
            let _ = writeln!(s, "|---|---|--:|--:|--:|--:|--:|--:|--:|");
            for (label, base) in [("process", "claim+complete"), ("lifecycle", "lifecycle")] {
                for who in [Who::Trafikey, Who::Lua, Who::BullMq, Who::ChasquiMq, Who::Floor] {
                    let rows: Vec<Option<&Row>> =
                        [Setting::Default, Setting::EventsOff, Setting::Replica, Setting::Aof]
                            .iter()
                            .map(|st| {
                                let w = if *st == Setting::Default { base } else { st.workload(base) };
                                self.get(who, w, "p32")
                            })
                            .collect();
                    if rows.iter().all(Option::is_none) {
                        continue;
                    }
                    let cpu = |r: Option<&Row>| r.map_or("–".to_string(), |r| num(r.cpu_per_job()));
                    let rep = rows[2].and_then(Row::replica_per_job).map_or("–".to_string(), num);
                    let vs: Vec<String> =
                        [Setting::Default, Setting::EventsOff, Setting::Replica, Setting::Aof]
                            .iter()
                            .zip(&rows)
                            .map(|(st, r)| {
                                let w = if *st == Setting::Default { base } else { st.workload(base) };
                                match (r, self.get(Who::Trafikey, w, "p32")) {
                                    (Some(r), Some(t)) if who != Who::Trafikey => {
                                        format!("{:.2}×", r.cpu_per_job() / t.cpu_per_job())
                                    }
                                    _ => "–".into(),
                                }
                            })
                            .collect();
                    let rates: Vec<String> =
                        rows.iter().map(|r| r.map_or("–".to_string(), |r| rate(r.rate()))).collect();
                    let _ = writeln!(
                        s,
                        "| {} | {label} | {} | {} | {} | {rep} | {} | {} | {} |",
                        who.label(),
                        cpu(rows[0]),
                        cpu(rows[1]),
                        cpu(rows[2]),
                        cpu(rows[3]),
                        vs.join(" / "),
                        rates.join(" / ")
                    );
                }
            }
        }

        self.batch_finish(&mut s);
        self.forms_tables(&mut s);
        self.scale_table(&mut s);

        // Targets.
        let _ = writeln!(s, "\n### Targets\n");
        let _ = writeln!(s, "| target | figure (median pass) | best pass | goal | verdict (median) |");
        let _ = writeln!(s, "|---|--:|--:|--:|---|");
        let set = self.get(Who::Set, "plain SET", "c50");
        let mut target =
            |name: &str, fig: Option<(f64, f64)>, goal: &str, met: &dyn Fn(f64) -> bool, unit: &str| {
                let show = |v: Option<f64>| v.map_or("–".into(), |v| format!("{}{unit}", num(v)));
                let v = match fig {
                    Some((median, _)) if met(median) => "met",
                    Some(_) => "**not met**",
                    None => "not measured",
                };
                let _ = writeln!(
                    s,
                    "| {name} | {} | {} | {goal} | {v} |",
                    show(fig.map(|f| f.0)),
                    show(fig.map(|f| f.1))
                );
            };
        // A ratio of two rows' server CPU per job: (median ÷ median, best ÷ best).
        let ratio = |a: Option<&Row>, b: Option<&Row>| -> Option<(f64, f64)> {
            let (a, b) = (a?, b?);
            Some((a.cpu_per_job() / b.cpu_per_job(), a.best_cpu() / b.best_cpu()))
        };
        for (name, w) in [
            ("ENQUEUE server CPU per call ÷ SET's, c50", "enqueue"),
            ("CLAIM server CPU per call ÷ SET's, c50", "CLAIM alone"),
            ("COMPLETE server CPU per call ÷ SET's, c50", "COMPLETE alone"),
        ] {
            target(name, ratio(self.get(Who::Trafikey, w, "c50"), set), "≤ 1.5×", &|r| r <= 1.5, "×");
        }
        let life = self.get(Who::Trafikey, "lifecycle", "p32");
        let r = ratio(life, self.get(Who::BullMq, "lifecycle", "p32"));
        target("lifecycle p32 server CPU per job ÷ BullMQ best mode's", r, "≤ 0.2×", &|r| r <= 0.2, "×");
        let r = ratio(life, self.get(Who::Floor, "lifecycle", "p32"));
        target("lifecycle p32 server CPU per job ÷ the floor's", r, "≤ 1×", &|r| r <= 1.0, "×");
        let m = self.mem(Who::Trafikey).zip(self.mem(Who::BullMq)).map(|(a, b)| (a - b, a - b));
        target("memory per waiting job, trafikey − BullMQ", m, "< 0 bytes", &|d| d < 0.0, " B");
        let rates = |w: &str| self.get(Who::Trafikey, w, "p32").map(|r| (r.rate(), r.best_rate()));
        target("enqueues/s, pipelined", rates("enqueue"), "≥ 200 000", &|v| v >= 200_000.0, "");
        target(
            "lifecycle jobs/s, pipelined, events off",
            rates("lifecycle, events off"),
            "≥ 100 000",
            &|v| v >= 100_000.0,
            "",
        );
        if self.rows.iter().any(|r| r.who == Who::ChasquiMq && r.ok()) {
            for (name, w, m, goal, limit) in [
                (
                    "enqueue c50, 50 in flight: trafikey ÷ ChasquiMQ server CPU per job",
                    "enqueue",
                    "c50",
                    "≤ 0.8×",
                    0.8,
                ),
                ("enqueue batched (p32): trafikey ÷ ChasquiMQ", "enqueue", "p32", "≤ 0.8×", 0.8),
                (
                    "process (claim+complete p32): trafikey ÷ ChasquiMQ",
                    "claim+complete",
                    "p32",
                    "≤ 0.8×",
                    0.8,
                ),
                ("lifecycle p32: trafikey ÷ ChasquiMQ", "lifecycle", "p32", "≤ 0.8×", 0.8),
                ("process, events off on both: trafikey ÷ ChasquiMQ", CLAIM_QUIET, "p32", "≤ 1×", 1.0),
                ("lifecycle, events off on both: trafikey ÷ ChasquiMQ", LIFE_QUIET, "p32", "≤ 1×", 1.0),
                ("process, one replica: trafikey ÷ ChasquiMQ (primary)", CLAIM_REPLICA, "p32", "≤ 0.8×", 0.8),
                (
                    "lifecycle, one replica: trafikey ÷ ChasquiMQ (primary)",
                    LIFE_REPLICA,
                    "p32",
                    "≤ 0.8×",
                    0.8,
                ),
            ] {
                let r = ratio(self.get(Who::Trafikey, w, m), self.get(Who::ChasquiMq, w, m));
                target(name, r, goal, &|r| r <= limit, "×");
            }
            let m = self.mem(Who::Trafikey).zip(self.mem(Who::ChasquiMq)).map(|(a, b)| (a - b, a - b));
            target("memory per waiting job, trafikey − ChasquiMQ", m, "≤ 0 bytes", &|d| d <= 0.0, " B");
        }
        for (name, fig, goal, limit, at_most) in self.forms_goals() {
            if at_most {
                target(&name, fig, goal, &|r| r <= limit, "×");
            } else {
                target(&name, fig, goal, &|r| r >= limit, "×");
            }
        }
        let r =
            ratio(self.get(Who::Trafikey, LIFE_REPLICA, "p32"), self.get(Who::BullMq, LIFE_REPLICA, "p32"));
        if r.is_some() {
            target(
                "lifecycle p32 with a replica: trafikey ÷ BullMQ best mode's (primary)",
                r,
                "≤ 0.12×",
                &|r| r <= 0.12,
                "×",
            );
        }
        if self.wait.is_some() {
            // p99 in ms: (the median pass's, the best pass's).
            let p99 = |w: &str| {
                self.get(Who::Trafikey, w, WAITING).map(|r| {
                    let best = r.p99s.first().copied().unwrap_or(r.p99_us);
                    (f64::from(r.p99_us) / 1000.0, f64::from(best) / 1000.0)
                })
            };
            target(
                "wake latency p99, workers waiting in CLAIM … BLOCK",
                p99(WAKE),
                "≤ 1 ms",
                &|v| v <= 1.0,
                " ms",
            );
            target(
                "lateness p99 of scheduled jobs, workers waiting",
                p99(LATE),
                "≤ 5 ms",
                &|v| v <= 5.0,
                " ms",
            );
            // Paired within each pass (the median of the passes' ratios).
            let paired = self.get(Who::Trafikey, BLOCKING_LIFE, "p32").and_then(Row::paired);
            let r = paired.map(|(m, b)| (m.1, b.1));
            target(
                "blocking workers' lifecycle server CPU per job ÷ lifecycle p32's",
                r,
                "≤ 1.1×",
                &|r| r <= 1.1,
                "×",
            );
            let r = paired.map(|(m, b)| (m.0, b.0));
            target("blocking workers' lifecycle jobs/s ÷ lifecycle p32's", r, "≥ 0.9×", &|r| r >= 0.9, "×");
        }

        // What a per-call target is up against: the same writes with no module at all.
        let floors: Vec<(&str, f64, Option<f64>)> =
            [("CLAIM", "CLAIM alone"), ("COMPLETE", "COMPLETE alone")]
                .iter()
                .filter_map(|(v, w)| {
                    let f = self.get(Who::Floor, w, "c50")?.cpu_per_job();
                    Some((
                        *v,
                        f / set?.cpu_per_job(),
                        self.get(Who::Trafikey, w, "c50").map(|t| t.cpu_per_job() / f),
                    ))
                })
                .collect();
        if !floors.is_empty() {
            let _ = writeln!(s, "\nThe per-call targets beside the per-call floors (the verb's own writes as plain commands, one round trip a call, no module):\n");
            let _ =
                writeln!(s, "| verb | its writes alone ÷ SET's, c50 | the verb ÷ its writes alone, c50 |");
            let _ = writeln!(s, "|---|--:|--:|");
            for (v, f, t) in floors {
                let _ = writeln!(
                    s,
                    "| {v} | {}× | {} |",
                    num(f),
                    t.map_or("–".into(), |t| format!("{}×", num(t)))
                );
            }
        }

        self.waiting(&mut s);

        // Detail.
        let _ = writeln!(s, "\n### Every figure\n");
        let _ = writeln!(s, "Latency is per job: enqueue = its call's round trip (pipelined: its batch's); claim+complete = CLAIM sent → COMPLETE answered (BullMQ: processor start → `completed` event; its fetch rides on the previous job's finish); lifecycle = ENQUEUE sent → COMPLETE answered (BullMQ: `add` sent → `completed` event); coherence drop = its call's round trip (pipelined: its batch's); wake latency = ENQUEUE sent → the waiting worker's CLAIM reply read (BullMQ: `add` sent → processor start); lateness = the due time → the waiting worker's CLAIM reply read (BullMQ: `add` sent + delay → processor start); the blocking workers' rows as the workloads they stand beside (jobs/s of the wake and lateness rows is the producer's pace, their server CPU per job everything the server did meanwhile). \"Wall µs in command\" is the time inside the contender's own top-level commands (`INFO commandstats`: EMQ.*, TRA.DROP, EVALSHA, SET, the floor's commands); the rest of the server CPU is the per-request work around them (reading, parsing, replying, the event loop). It is wall time, not CPU: when the clients preempt the server inside a command that counts too, so on a busy machine it can exceed the server CPU. \"Clients\" is the CPU the tool's own client threads used meanwhile, in cores (client and server share the machine's 2 cores: what the clients take, the server cannot have). \"Other load\" is the CPU other processes on the machine used meanwhile (from /proc), in cores; a phase with much of it is less reliable. \"CPU ÷ trafikey\" is the row's server CPU per job over trafikey's in the same workload and mode (for the coherence drop: EVALSHA ÷ TRA.DROP).\n");
        let _ = writeln!(s, "| contender | workload | mode | jobs | s | jobs/s | server CPU µs/job | CPU ÷ trafikey | wall µs in command/job | p50 ms | p99 ms | clients (cores) | other load (cores) | CPU µs/job, each pass | replica CPU µs/job |");
        let _ = writeln!(s, "|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|");
        for r in &self.rows {
            match &r.status {
                Status::Ok => {
                    let vs = match self.get(Who::Trafikey, r.workload, r.mode) {
                        Some(t) if r.who != Who::Trafikey => {
                            format!("{:.2}×", r.cpu_per_job() / t.cpu_per_job())
                        }
                        _ => "–".into(),
                    };
                    let _ = writeln!(
                        s,
                        "| {} | {} | {} | {} | {:.2} | {} | {} | {vs} | {} | {} | {} | {} | {} | {} | {} |",
                        contender(r.who, r.workload),
                        r.workload,
                        r.mode,
                        r.jobs,
                        r.secs,
                        rate(r.rate()),
                        num(r.cpu_per_job()),
                        r.inside_us.map_or("–".into(), |v| num(v / r.jobs as f64)),
                        ms(r.p50_us),
                        ms(r.p99_us),
                        r.client.map_or("–".into(), |f| format!("{f:.2}")),
                        r.foreign.map_or("–".into(), |f| format!("{f:.2}")),
                        if r.passes.is_empty() {
                            "–".to_string()
                        } else {
                            r.passes.iter().map(|&v| num(v)).collect::<Vec<_>>().join(" / ")
                        },
                        r.replica_per_job().map_or("–".into(), num)
                    );
                }
                Status::Skipped(why) => {
                    let _ = writeln!(
                        s,
                        "| {} | {} | {} | skipped: {why} | | | | | | | | | | | |",
                        contender(r.who, r.workload),
                        r.workload,
                        r.mode
                    );
                }
                Status::Failed(e) => {
                    let _ = writeln!(
                        s,
                        "| {} | {} | {} | **failed**: {} | | | | | | | | | | | |",
                        contender(r.who, r.workload),
                        r.workload,
                        r.mode,
                        e.replace('|', "/")
                    );
                }
            }
        }
        if !self.notes.is_empty() {
            let _ = writeln!(s, "\n### Notes\n");
            for n in &self.notes {
                let _ = writeln!(s, "- {n}");
            }
        }
        s
    }
}

/// A goal of the rows of the BullMQ forms: (name, (median, best) ratio, goal, limit, whether
/// the ratio must be at most the limit, else at least).
type FormsGoal = (String, Option<(f64, f64)>, &'static str, f64, bool);

impl Report {
    /// The goals of the rows of the BullMQ forms: (name, (median, best) ratio, goal, limit,
    /// whether the ratio must be at most the limit (else at least)).
    fn forms_goals(&self) -> Vec<FormsGoal> {
        let cpu = |a: Option<&Row>, b: Option<&Row>| -> Option<(f64, f64)> {
            let (a, b) = (a?, b?);
            Some((a.cpu_per_job() / b.cpu_per_job(), a.best_cpu() / b.best_cpu()))
        };
        let mut g = Vec::new();
        for (_, t, q) in BULK_LANES {
            let r = cpu(self.get(Who::Trafikey, BULK, t), self.get(Who::ChasquiMq, BULK, q));
            if self.rows.iter().any(|r| r.workload == BULK) {
                g.push((
                    format!("bulk add, {t} ÷ ChasquiMQ {q}: server CPU per job"),
                    r,
                    "≤ 0.8×",
                    0.8,
                    true,
                ));
            }
        }
        if self.rows.iter().any(|r| r.workload == NEXT) {
            // Beside ChasquiMQ's lifecycle, whose producers call add_bulk of 32: the jobs
            // enqueued by TRA.ADD of 32, trafikey's bulk add.
            let r =
                cpu(self.get(Who::Trafikey, NEXT, NEXT_ADD), self.get(Who::ChasquiMq, "lifecycle", "p32"));
            g.push(("finish-and-fetch lifecycle (one TRA.COMPLETENEXT a job, TRA.ADD producers) ÷ ChasquiMQ's lifecycle (add_bulk producers): server CPU per job".into(), r, "≤ 0.8×", 0.8, true));
        }
        if let Some(w) = self.get(Who::Trafikey, ROW_PAIR, WITH_ROW) {
            let r = w.paired().map(|(m, b)| (m.1, b.1));
            g.push((
                "claim+complete with CLAIM … ROW ÷ without: server CPU per job (paired)".into(),
                r,
                "≤ 1.15×",
                1.15,
                true,
            ));
        }
        if self.rows.iter().any(|r| r.who == Who::BullMqTrafikey) {
            for (name, w, m) in BULL_PAIRS {
                let p = self.get(Who::BullMqTrafikey, w, m).and_then(Row::paired);
                g.push((
                    format!("BullMQ {name}: on trafikey ÷ on Valkey, server CPU per job (paired)"),
                    p.map(|(m, b)| (m.1, b.1)),
                    "≤ 0.3×",
                    0.3,
                    true,
                ));
                g.push((
                    format!("BullMQ {name}: on trafikey ÷ on Valkey, jobs/s (paired)"),
                    p.map(|(m, b)| (m.0, b.0)),
                    "≥ 2×",
                    2.0,
                    false,
                ));
            }
        }
        g
    }

    /// The rows of the BullMQ forms: the bulk add, finish-and-fetch, CLAIM … ROW, and BullMQ
    /// on trafikey beside BullMQ on Valkey.
    fn forms_tables(&self, s: &mut String) {
        let has = |w: &str| self.rows.iter().any(|r| r.workload == w);
        let x = |v: f64| if v.is_finite() { format!("{v:.2}×") } else { "–".into() };
        let fig = |r: Option<&Row>| {
            r.map_or(("–".to_string(), "–".to_string()), |r| (rate(r.rate()), num(r.cpu_per_job())))
        };
        let why = |who: Who, w: &str, m: &str| {
            self.rows.iter().find(|r| r.who == who && r.workload == w && r.mode == m).and_then(|r| {
                match &r.status {
                    Status::Skipped(y) => Some(format!("skipped: {y}")),
                    Status::Failed(e) => Some(format!("**failed**: {}", e.replace('|', "/"))),
                    Status::Ok => None,
                }
            })
        };
        if has(BULK) {
            let _ = writeln!(
                s,
                "
### Bulk add
"
            );
            let _ = writeln!(s, "N = {} jobs into an empty queue from {} connections, one call at a time on each: trafikey's `TRA.ADD` of 32 and of 250 jobs a call (256 capped at the verb's 250), ChasquiMQ's `Producer::add_bulk` of the same size from {} tasks, in the same run. Goal: trafikey ≤ 0.8× ChasquiMQ's server CPU per job.
", self.n, self.conns, self.conns);
            let _ = writeln!(s, "| batch | trafikey jobs/s | trafikey CPU µs/job | ChasquiMQ jobs/s | ChasquiMQ CPU µs/job | trafikey ÷ ChasquiMQ CPU |");
            let _ = writeln!(s, "|---|--:|--:|--:|--:|--:|");
            for (b, t, q) in BULK_LANES {
                let (tr, qr) = (self.get(Who::Trafikey, BULK, t), self.get(Who::ChasquiMq, BULK, q));
                let ((a, bb), (c, d)) = (fig(tr), fig(qr));
                let (a, bb) = match why(Who::Trafikey, BULK, t) {
                    Some(y) => (y, String::new()),
                    None => (a, bb),
                };
                let (c, d) = match why(Who::ChasquiMq, BULK, q) {
                    Some(y) => (y, String::new()),
                    None => (c, d),
                };
                let r = tr.zip(qr).map_or("–".into(), |(t, q)| x(t.cpu_per_job() / q.cpu_per_job()));
                let _ = writeln!(s, "| {b} | {a} | {bb} | {c} | {d} | {r} |");
            }
        }
        if has(NEXT) || has(ROW_PAIR) {
            let _ = writeln!(
                s,
                "
### Finish-and-fetch and CLAIM … ROW
"
            );
            let _ = writeln!(s, "Finish-and-fetch: the pipelined lifecycle (events on) with each held job finished by one `TRA.COMPLETENEXT` that also fetches the next (one call per job; a connection holding nothing claims `COUNT {}` once). Its jobs enqueued by one `TRA.ADD` a write, beside ChasquiMQ's lifecycle of the same run (whose producers call `add_bulk` of 32); the same with `KEEP 0` on each finish, which deletes the job as it completes, as ChasquiMQ deletes each entry it acks (the other rows keep `trafikey.keep-completed` finished jobs, as BullMQ users keep theirs; ChasquiMQ keeps none); enqueued by one `EMQ.ENQUEUE` each, beside ChasquiMQ's lifecycle and trafikey's own p32 lifecycle (one COMPLETE per job, its jobs enqueued the same way); then the same lifecycle with the jobs a connection holds finished by one `TRA.COMPLETESNEXT` a write (no goal: the goal's form is one call per job). CLAIM … ROW: claim+complete p32 of N prefilled jobs with `ROW` on every CLAIM, right after the same without ROW (the ratio pairs the two rows of each pass).
", self.depth);
            let _ = writeln!(
                s,
                "| workload | jobs/s | CPU µs/job | beside | its jobs/s | its CPU µs/job | CPU ÷ | goal |"
            );
            let _ = writeln!(s, "|---|--:|--:|---|--:|--:|--:|---|");
            let mut line = |name: &str,
                            a: Option<&Row>,
                            a_why: Option<String>,
                            bname: &str,
                            b: Option<&Row>,
                            ratio: Option<f64>,
                            goal: &str| {
                let (ar, ac) = fig(a);
                let (ar, ac) = match a_why {
                    Some(y) => (y, String::new()),
                    None => (ar, ac),
                };
                let (br, bc) = fig(b);
                let _ = writeln!(
                    s,
                    "| {name} | {ar} | {ac} | {bname} | {br} | {bc} | {} | {goal} |",
                    ratio.map_or("–".into(), x)
                );
            };
            if has(NEXT) {
                let q = self.get(Who::ChasquiMq, "lifecycle", "p32");
                let a = self.get(Who::Trafikey, NEXT, NEXT_ADD);
                line(
                    "lifecycle, one TRA.COMPLETENEXT per job, TRA.ADD producers",
                    a,
                    why(Who::Trafikey, NEXT, NEXT_ADD),
                    "ChasquiMQ lifecycle (add_bulk producers)",
                    q,
                    a.zip(q).map(|(a, q)| a.cpu_per_job() / q.cpu_per_job()),
                    "≤ 0.8×",
                );
                let d = self.get(Who::Trafikey, NEXT, NEXT_ADD_DROP);
                if d.is_some() || why(Who::Trafikey, NEXT, NEXT_ADD_DROP).is_some() {
                    line(
                        "the same, each TRA.COMPLETENEXT with KEEP 0 (no finished job kept)",
                        d,
                        why(Who::Trafikey, NEXT, NEXT_ADD_DROP),
                        "ChasquiMQ lifecycle (add_bulk producers)",
                        q,
                        d.zip(q).map(|(d, q)| d.cpu_per_job() / q.cpu_per_job()),
                        "",
                    );
                }
                let t = self.get(Who::Trafikey, NEXT, "p32");
                let r = t.zip(q).map(|(t, q)| t.cpu_per_job() / q.cpu_per_job());
                line(
                    "lifecycle, one TRA.COMPLETENEXT per job",
                    t,
                    why(Who::Trafikey, NEXT, "p32"),
                    "ChasquiMQ lifecycle",
                    q,
                    r,
                    "",
                );
                let l = self.get(Who::Trafikey, "lifecycle", "p32");
                let r = t.zip(l).map(|(t, l)| t.cpu_per_job() / l.cpu_per_job());
                line(
                    "lifecycle, one TRA.COMPLETENEXT per job",
                    t,
                    None,
                    "trafikey lifecycle p32 (COMPLETE + CLAIM)",
                    l,
                    r,
                    "",
                );
                let m = self.get(Who::Trafikey, NEXT, NEXT_MANY);
                if m.is_some() || why(Who::Trafikey, NEXT, NEXT_MANY).is_some() {
                    let r = m.zip(q).map(|(m, q)| m.cpu_per_job() / q.cpu_per_job());
                    line(
                        "lifecycle, one TRA.COMPLETESNEXT for the jobs held",
                        m,
                        why(Who::Trafikey, NEXT, NEXT_MANY),
                        "ChasquiMQ lifecycle",
                        q,
                        r,
                        "",
                    );
                }
            }
            if has(ROW_PAIR) {
                let w = self.get(Who::Trafikey, ROW_PAIR, WITH_ROW);
                let wo = self.get(Who::Trafikey, ROW_PAIR, WITHOUT_ROW);
                let r = w.and_then(Row::paired).map(|(m, _)| m.1);
                line(
                    "claim+complete, CLAIM … ROW",
                    w,
                    why(Who::Trafikey, ROW_PAIR, WITH_ROW),
                    "the same without ROW",
                    wo,
                    r,
                    "≤ 1.15×",
                );
            }
        }
        if self.rows.iter().any(|r| r.who == Who::BullMqTrafikey) {
            let _ = writeln!(
                s,
                "
### BullMQ on trafikey
"
            );
            let _ = writeln!(s, "The same `bench.mjs` workloads (N = {}) run twice in each pass, one right after the other: BullMQ 6.7.0 on its own Redis backend (its Lua scripts) on this Valkey, then BullMQ's classes bound to the trafikey backend (`trafikey-bullmq`, clients/bullmq: `withTrafikey(withBackend)`) on the same server with the module. Each pass's ratio pairs the two rows of that pass; the ratios shown are the medians of the passes' ratios (\"each pass\": every pass's CPU ratio, lowest first), and the figures are each row's median pass. Goals: on trafikey ≤ 0.3× the server CPU per job and ≥ 2× the jobs/s, in every workload.
", self.n);
            let _ = writeln!(s, "| workload | on Valkey: jobs/s | CPU µs/job | on trafikey: jobs/s | CPU µs/job | CPU ÷ (≤ 0.3×) | CPU ÷, each pass | jobs/s ÷ (≥ 2×) |");
            let _ = writeln!(s, "|---|--:|--:|--:|--:|--:|--:|--:|");
            for (name, w, m) in BULL_PAIRS {
                let (t, b) = (self.get(Who::BullMqTrafikey, w, m), self.get(Who::BullMq, w, m));
                let ((br, bc), (tr, tc)) = (fig(b), fig(t));
                let (cr, rr) =
                    t.and_then(Row::paired).map_or(("–".into(), "–".into()), |(m, _)| (x(m.1), x(m.0)));
                let mut each: Vec<f64> = t.map_or_else(Vec::new, |t| t.paired.iter().map(|p| p.1).collect());
                each.sort_by(f64::total_cmp);
                let each = if each.is_empty() {
                    "–".into()
                } else {
                    each.into_iter().map(x).collect::<Vec<_>>().join(", ")
                };
                let _ = writeln!(s, "| {name} | {br} | {bc} | {tr} | {tc} | {cr} | {each} | {rr} |");
            }
            if let (Some(b), Some(t)) = (self.mem(Who::BullMq), self.mem(Who::BullMqTrafikey)) {
                let _ = writeln!(s, "\nMemory per waiting job, bench.mjs's memory part ({} jobs added by `addBulk` of 1 000 into an empty queue; `used_memory` growth, events at their default, median pass): BullMQ on Valkey {b:.0} B, BullMQ on trafikey {t:.0} B ({} of it).", self.mem_jobs, x(t / b));
            }
            for r in self.rows.iter().filter(|r| r.who == Who::BullMqTrafikey && !r.ok()) {
                if let Status::Skipped(y) | Status::Failed(y) = &r.status {
                    let _ = writeln!(
                        s,
                        "
BullMQ on trafikey, {} {}: {}",
                        r.workload,
                        r.mode,
                        y.replace('|', "/")
                    );
                }
            }
        }
    }

    /// The batch-finish lane beside the pipelined lane it varies (trafikey, same pass).
    fn batch_finish(&self, s: &mut String) {
        let lanes: Vec<(&str, &Row)> = ["claim+complete", "lifecycle"]
            .into_iter()
            .filter_map(|w| {
                self.rows
                    .iter()
                    .find(|r| r.who == Who::Trafikey && r.workload == w && r.mode == BATCH)
                    .map(|r| (w, r))
            })
            .collect();
        if lanes.is_empty() {
            return;
        }
        let _ = writeln!(s, "\n### Batch finish\n");
        let _ = writeln!(s, "trafikey's pipelined workloads (p32, N = {} jobs, {} connections) with the COMPLETEs of each claim sent as one `TRA.COMPLETES 3 active completed events id token result …` carrying all the claim's triples (up to {} jobs), instead of one `EMQ.COMPLETE` per job; everything else the same, every entry's reply checked to be 1. Each batch-finish phase runs in the same pass as the p32 phase it varies; the ratios pair the two rows of each pass (the median of the passes' ratios; \"each pass\": every pass's CPU ratio, lowest first).\n", self.n, self.conns, self.depth);
        let _ = writeln!(s, "| workload | one COMPLETE per job: jobs/s | CPU µs/job | one TRA.COMPLETES per claim: jobs/s | CPU µs/job | jobs/s ÷ per-job finish | CPU ÷ per-job finish | CPU ÷, each pass |");
        let _ = writeln!(s, "|---|--:|--:|--:|--:|--:|--:|--:|");
        for (w, b) in lanes {
            if !b.ok() {
                let why = match &b.status {
                    Status::Skipped(why) => format!("skipped: {why}"),
                    Status::Failed(e) => format!("**failed**: {}", e.replace('|', "/")),
                    Status::Ok => String::new(),
                };
                let _ = writeln!(s, "| {w} | | | {why} | | | | |");
                continue;
            }
            let base = self.get(Who::Trafikey, w, "p32");
            let (rate_r, cpu_r) = b.paired().map_or((f64::NAN, f64::NAN), |(m, _)| m);
            let mut each: Vec<f64> = b.paired.iter().map(|p| p.1).collect();
            each.sort_by(f64::total_cmp);
            let x = |v: f64| if v.is_finite() { format!("{v:.2}×") } else { "–".into() };
            let each = if each.is_empty() {
                "–".into()
            } else {
                each.iter().map(|&v| x(v)).collect::<Vec<_>>().join(" / ")
            };
            let _ = writeln!(
                s,
                "| {w} | {} | {} | {} | {} | {} | {} | {each} |",
                base.map_or("–".into(), |r| rate(r.rate())),
                base.map_or("–".into(), |r| num(r.cpu_per_job())),
                rate(b.rate()),
                num(b.cpu_per_job()),
                x(rate_r),
                x(cpu_r)
            );
        }
    }

    /// "Cost as work grows": each scale point's figures and their ratio to the small queue's.
    fn scale_table(&self, s: &mut String) {
        if self.scale.is_empty() {
            return;
        }
        let small = self.scale.iter().find(|l| l.small).and_then(|l| l.result.as_ref().ok());
        let _ = writeln!(s, "\n### Cost as work grows\n");
        let _ = writeln!(s, "trafikey alone, the pipelined lifecycle's two phases ({} connections, {} commands per write, `CLAIM … COUNT {}`): enqueue N jobs into an empty keyspace (the queue grows to N waiting), then claim+complete them all (one `EMQ.COMPLETE` per job). Server CPU per job of each phase; memory per waiting job = `used_memory` growth over the enqueue (read once the phase's connections are gone), events at their default (`events-maxlen` caps each queue's stream, so one big queue keeps its last entries only, 10 000 small queues keep all of theirs). Many queues: job j goes to queue j mod Q; worker i owns the queues q with q mod workers = i and claims from them round-robin, one claim per queue in turn. Priorities: job j at a hashed level 1..=L (all in the prio set). The small point's phases are repeated on a fresh keyspace ({} times per pass here) and summed; a point runs on ⌈N / {}⌉ connections when that is fewer than {}, so that each makes about 8 full writes (and as many full claims). Each figure is the median pass, on its own. \"÷ small\" is the figure over the small queue's; the goal is each within {:.0}% of it (a job should cost the same however much work is around it) — reported, not asserted: a ratio above {:.2}× is in bold.\n",
            self.conns, self.depth, self.depth,
            self.scale.iter().find(|l| l.small).map_or(1, |l| l.cycles),
            self.depth * 8,
            self.conns,
            (SCALE_GOAL - 1.0) * 100.0, SCALE_GOAL);
        let _ = writeln!(s, "| work | jobs | queues | priority levels | connections | enqueue CPU µs/job | ÷ small | claim+complete CPU µs/job | ÷ small | memory B/waiting job | ÷ small | enqueue jobs/s | claim+complete jobs/s | jobs per CLAIM | CPU µs/job each pass (enqueue; claim+complete) | other load (cores) |");
        let _ = writeln!(s, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|");
        for l in &self.scale {
            let f = match &l.result {
                Ok(f) => f,
                Err(e) => {
                    let _ = writeln!(
                        s,
                        "| {} | {} | {} | {} | {} | **failed**: {} | | | | | | | | | | |",
                        l.label,
                        l.jobs,
                        l.queues,
                        l.levels,
                        l.conns,
                        e.replace('|', "/")
                    );
                    continue;
                }
            };
            let vs = |a: f64, b: Option<f64>| match b {
                _ if l.small => "1×".to_string(),
                Some(b) if b > 0.0 && a.is_finite() => {
                    let r = a / b;
                    if r > SCALE_GOAL {
                        format!("**{r:.2}×**")
                    } else {
                        format!("{r:.2}×")
                    }
                }
                _ => "–".into(),
            };
            let each = |x: &Figure| x.passes.iter().map(|&v| num(v)).collect::<Vec<_>>().join(" / ");
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.0} | {} | {} | {} | {:.1} | {}; {} | {:.2} |",
                l.label,
                rate(l.jobs as f64),
                rate(l.queues as f64),
                if l.levels > 1 { rate(l.levels as f64) } else { "– (priority 0)".into() },
                l.conns,
                num(f.enqueue.median),
                vs(f.enqueue.median, small.map(|x| x.enqueue.median)),
                num(f.drain.median),
                vs(f.drain.median, small.map(|x| x.drain.median)),
                f.memory.median,
                vs(f.memory.median, small.map(|x| x.memory.median)),
                rate(f.enqueue.rate),
                rate(f.drain.rate),
                f.jobs_per_claim,
                each(&f.enqueue),
                each(&f.drain),
                f.foreign
            );
        }
    }

    /// The table of the waiting workloads: wake latency, lateness, the blocking workers'
    /// throughput beside the pipelined workloads, and the idle cost.
    fn waiting(&self, s: &mut String) {
        let Some(w) = &self.wait else { return };
        let _ = writeln!(s, "\n### Waiting and upkeep\n");
        let _ = writeln!(s, "Workers waiting inside the server in `EMQ.CLAIM … BLOCK ms` (trafikey blocks them on the queue's keys), and upkeep's timer promoting scheduled jobs as they fall due, which wakes them. Measured, not asserted: each goal is shown beside its figure. Latencies are taken by the tool's own threads on one monotonic clock; each row is the pass with the median p99 (\"each pass\" lists every pass's p99, lowest first).\n");
        let _ = writeln!(s, "| measurement | contender | setup | jobs | p50 ms | p99 ms | p99 ms, each pass | server CPU µs/job | goal | verdict (median) |");
        let _ = writeln!(s, "|---|---|---|--:|--:|--:|--:|--:|--:|---|");
        let bull = w.bull.map(|(k, c)| format!("{k} `Worker`s × concurrency {c}"));
        let lines: [(&str, &str, Who, String, &str, f64); 5] = [
            (
                WAKE,
                "wake latency: ENQUEUE sent → the waiting worker's CLAIM reply read",
                Who::Trafikey,
                format!("{} connections waiting in `CLAIM … BLOCK 2000` on an empty queue; one ENQUEUE every {} ms from another", w.workers, w.gap_ms),
                "p99 ≤ 1 ms",
                1.0,
            ),
            (
                PACED,
                "reference: ENQUEUE's round trip, nobody waiting",
                Who::Trafikey,
                format!("the same ENQUEUEs at the same pace (one every {} ms) with no worker at all: what the server spends per request at this low rate, whatever waits", w.gap_ms),
                "",
                f64::NAN,
            ),
            (
                WAKE,
                "wake latency: `add` sent → the processor starts",
                Who::BullMq,
                format!("{}, idle on an empty queue; one `add` every {} ms (from the same Node process)", bull.clone().unwrap_or_default(), w.gap_ms),
                "",
                f64::NAN,
            ),
            (
                LATE,
                "lateness of scheduled jobs: the waiting worker's CLAIM reply read − the due time",
                Who::Trafikey,
                format!("the same {} waiting connections; one `EMQ.SCHEDULE` every {} ms with an absolute `when` = the server's `TIME` (read just before it) + d, d spread over {}..{} ms; the due time placed on the tool's clock by that TIME call's round trip (± half of it, some 30 µs); upkeep on", w.workers, w.gap_ms, w.spread.0, w.spread.1),
                "p99 ≤ 5 ms",
                5.0,
            ),
            (
                LATE,
                "lateness of delayed jobs: the processor starts − (`add` sent + d)",
                Who::BullMq,
                format!("{}, waiting; one `queue.add(name, data, {{ delay: d }})` every {} ms, d as for trafikey; the due time on Node's `performance.now()` (BullMQ takes it from the client's `Date.now()` at `add`)", bull.unwrap_or_default(), w.gap_ms),
                "",
                f64::NAN,
            ),
        ];
        for (workload, what, who, setup, goal, limit) in lines {
            let Some(r) =
                self.rows.iter().find(|r| r.who == who && r.workload == workload && r.mode == WAITING)
            else {
                continue;
            };
            let (jobs, p50, p99, each, cpu, verdict) = match &r.status {
                Status::Ok => {
                    let each = if r.p99s.is_empty() {
                        "–".to_string()
                    } else {
                        r.p99s.iter().map(|&v| ms(v)).collect::<Vec<_>>().join(" / ")
                    };
                    let verdict = if limit.is_nan() {
                        ""
                    } else if f64::from(r.p99_us) / 1000.0 <= limit {
                        "met"
                    } else {
                        "**not met**"
                    };
                    (r.jobs.to_string(), ms(r.p50_us), ms(r.p99_us), each, num(r.cpu_per_job()), verdict)
                }
                Status::Skipped(why) => (
                    format!("skipped: {why}"),
                    String::new(),
                    String::new(),
                    String::new(),
                    String::new(),
                    "",
                ),
                Status::Failed(e) => (
                    format!("**failed**: {}", e.replace('|', "/")),
                    String::new(),
                    String::new(),
                    String::new(),
                    String::new(),
                    "",
                ),
            };
            let setup = match &r.note {
                Some(n) => format!("{setup} ({n})"),
                None => setup,
            };
            let _ = writeln!(
                s,
                "| {what} | {} | {setup} | {jobs} | {p50} | {p99} | {each} | {cpu} | {goal} | {verdict} |",
                who.label()
            );
        }

        let _ = writeln!(s, "\nBlocking workers beside the pipelined workloads of the same run, each run right after the one it stands beside (N = {} jobs; goal: within 10% of its jobs/s and server CPU per job). The ratios pair the two rows of each pass: the median of the passes' ratios (\"each pass\": every pass's CPU ratio, lowest first):\n", self.n);
        let _ = writeln!(s, "| workload | setup | jobs/s | server CPU µs/job | p50 ms | p99 ms | beside | its jobs/s | its CPU µs/job | jobs/s ÷ its | CPU ÷ its | CPU ÷ its, each pass | verdict (median) |");
        let _ = writeln!(s, "|---|---|--:|--:|--:|--:|---|--:|--:|--:|--:|--:|---|");
        let pairs = [
            (
                BLOCKING_LIFE,
                format!("{} producers pipelining {} ENQUEUEs a write, {} workers each looping the COMPLETEs of what they hold + `CLAIM … COUNT {} BLOCK 1000` in one write; latency ENQUEUE sent → COMPLETE answered", w.producers, self.depth, w.block_workers, self.depth),
                "lifecycle",
                "lifecycle p32",
            ),
            (
                BLOCKING_CLAIM,
                format!("N jobs prefilled; {} workers each looping the COMPLETEs of what they hold + `CLAIM … COUNT {} BLOCK 1000` in one write; latency CLAIM sent → COMPLETE answered", w.claim_workers, self.depth),
                "claim+complete",
                "claim+complete p32",
            ),
        ];
        for (workload, setup, beside, label) in pairs {
            let Some(b) = self.rows.iter().find(|r| r.who == Who::Trafikey && r.workload == workload) else {
                continue;
            };
            let setup = match &b.note {
                Some(n) => format!("{setup} ({n})"),
                None => setup,
            };
            if !b.ok() {
                let why = match &b.status {
                    Status::Skipped(why) => format!("skipped: {why}"),
                    Status::Failed(e) => format!("**failed**: {}", e.replace('|', "/")),
                    Status::Ok => String::new(),
                };
                let _ = writeln!(s, "| {workload} | {setup} | {why} | | | | {label} | | | | | | |");
                continue;
            }
            let r = self.get(Who::Trafikey, beside, "p32");
            let (rate_r, cpu_r) = b.paired().map_or((f64::NAN, f64::NAN), |(m, _)| m);
            let mut each: Vec<f64> = b.paired.iter().map(|p| p.1).collect();
            each.sort_by(f64::total_cmp);
            let each = if each.len() > 1 {
                each.iter().map(|v| format!("{v:.2}×")).collect::<Vec<_>>().join(" / ")
            } else {
                "–".into()
            };
            let verdict = if !rate_r.is_finite() {
                "not measured"
            } else if rate_r >= 0.9 && cpu_r <= 1.1 {
                "met"
            } else {
                "**not met**"
            };
            let x = |v: f64| if v.is_finite() { format!("{v:.2}×") } else { "–".into() };
            let _ = writeln!(
                s,
                "| {workload} | {setup} | {} | {} | {} | {} | {label} | {} | {} | {} | {} | {each} | {verdict} |",
                rate(b.rate()),
                num(b.cpu_per_job()),
                ms(b.p50_us),
                ms(b.p99_us),
                r.map_or("–".into(), |r| rate(r.rate())),
                r.map_or("–".into(), |r| num(r.cpu_per_job())),
                x(rate_r),
                x(cpu_r)
            );
        }

        if self.idle.is_empty() {
            return;
        }
        let _ = writeln!(s, "\nIdle cost: the server's CPU (`used_cpu_user + used_cpu_sys` deltas) over {} s with {} connections on an empty queue, every waiter blocked before the window opens (`INFO clients` `blocked_clients`); upkeep on (`trafikey.upkeep-tick-ms` {}: the longest its timer sleeps) unless the row says otherwise; the leases are {} jobs claimed with a 600 s lease by another connection and left active. Each row is the pass with the median CPU.\n", w.idle_secs, w.idle_conns, w.tick_ms, w.leases);
        let _ = writeln!(s, "| {} connections | server CPU, % of a core | above the idle server, % of a core | each pass, % | CLAIMs/s | upkeep ticks/s | clients (cores) | other load (cores) |", w.idle_conns);
        let _ = writeln!(s, "|---|--:|--:|--:|--:|--:|--:|--:|");
        let base = self
            .idle
            .iter()
            .find(|(w, _)| *w == IDLE[0])
            .and_then(|(_, r)| r.as_ref().ok())
            .map(IdleFig::cores);
        for (what, r) in &self.idle {
            match r {
                Ok(f) => {
                    let pct = |c: f64| format!("{:.3}", c * 100.0);
                    let above = match base {
                        Some(b) if *what != IDLE[0] => pct(f.cores() - b),
                        _ => "–".into(),
                    };
                    let each = if f.passes.is_empty() {
                        "–".to_string()
                    } else {
                        f.passes.iter().map(|&c| pct(c)).collect::<Vec<_>>().join(" / ")
                    };
                    let _ = writeln!(
                        s,
                        "| {what} | {} | {above} | {each} | {} | {:.1} | {:.2} | {:.2} |",
                        pct(f.cores()),
                        rate(f.claims as f64 / f.secs),
                        f.ticks as f64 / f.secs,
                        f.client,
                        f.foreign
                    );
                }
                Err(e) => {
                    let _ = writeln!(s, "| {what} | {} | | | | | | |", e.replace('|', "/"));
                }
            }
        }
    }
}

impl Report {
    /// The figures as JSON (target/bench/results.json): one row per contender, workload and
    /// mode, so a claim can be checked without parsing the tables.
    pub fn json(&self, short: bool) -> serde_json::Value {
        use serde_json::{json, Value};
        let opt = |v: Option<f64>| v.filter(|x| x.is_finite()).map_or(Value::Null, |x| json!(x));
        let mut rows = Vec::new();
        for r in &self.rows {
            let (base, setting) = split(r.workload);
            let (status, why) = match &r.status {
                Status::Ok => ("ok", None),
                Status::Skipped(w) => ("skipped", Some(w.clone())),
                Status::Failed(e) => ("failed", Some(e.clone())),
            };
            let measured = r.ok();
            let lat = measured && (r.p50_us > 0 || r.p99_us > 0);
            let passes: Vec<f64> =
                if r.passes.is_empty() && measured { vec![r.cpu_per_job()] } else { r.passes.clone() };
            rows.push(json!({
                "contender": r.who.key(),
                "label": contender(r.who, r.workload),
                "workload": base,
                "mode": r.mode,
                "setting": setting,
                "status": status,
                "why": why,
                "jobs": r.jobs,
                "seconds": measured.then_some(r.secs),
                "jobs_per_s": opt(measured.then(|| r.rate())),
                "server_cpu_us_per_job": {
                    "median": opt(measured.then(|| r.cpu_per_job())),
                    "passes": passes,
                },
                "replica_cpu_us_per_job": opt(if measured { r.replica_per_job() } else { None }),
                "memory_bytes_per_job": Value::Null,
                "p50_us": if lat { json!(r.p50_us) } else { Value::Null },
                "p99_us": if lat { json!(r.p99_us) } else { Value::Null },
                "p99_us_passes": r.p99s,
                "other_load_cores": opt(r.foreign),
                "note": r.note,
                "paired": if r.paired.is_empty() { Value::Null } else { json!({
                    "jobs_per_s_ratio": r.paired.iter().map(|p| p.0).collect::<Vec<_>>(),
                    "cpu_ratio": r.paired.iter().map(|p| p.1).collect::<Vec<_>>(),
                }) },
            }));
        }
        for (w, m) in &self.memory {
            let (status, why, b) = match m {
                Ok(b) => ("ok", None, json!(b)),
                Err(e) if e.starts_with("skipped") => ("skipped", Some(e.clone()), Value::Null),
                Err(e) => ("failed", Some(e.clone()), Value::Null),
            };
            rows.push(json!({
                "contender": w.key(),
                "label": w.label(),
                "workload": "memory per waiting job",
                "mode": "",
                "setting": "default",
                "status": status,
                "why": why,
                "jobs": self.mem_jobs,
                "memory_bytes_per_job": b,
            }));
        }
        let small = self.scale.iter().find(|l| l.small).and_then(|l| l.result.as_ref().ok());
        for l in &self.scale {
            type Pick = fn(&ScaleFigs) -> &Figure;
            let parts: [(&str, &str, Pick); 3] = [
                ("scale: enqueue", "p32", |f| &f.enqueue),
                ("scale: claim+complete", "p32", |f| &f.drain),
                ("scale: memory per waiting job", "", |f| &f.memory),
            ];
            for (workload, mode, pick) in parts {
                let memory = mode.is_empty();
                let (status, why) = match &l.result {
                    Ok(_) => ("ok", None),
                    Err(e) => ("failed", Some(e.clone())),
                };
                let fig = l.result.as_ref().ok().map(pick);
                let ratio = match (fig, small.map(pick)) {
                    (Some(a), Some(b)) if b.median > 0.0 => json!(a.median / b.median),
                    _ => Value::Null,
                };
                let median = fig.map(|x| x.median);
                let foreign = l.result.as_ref().ok().map(|f| f.foreign);
                rows.push(json!({
                    "contender": Who::Trafikey.key(),
                    "label": Who::Trafikey.label(),
                    "workload": workload,
                    "mode": mode,
                    "setting": "default",
                    "status": status,
                    "why": why,
                    "jobs": l.jobs * l.cycles,
                    "seconds": Value::Null,
                    "jobs_per_s": opt(fig.map(|x| x.rate)),
                    "server_cpu_us_per_job": {
                        "median": if memory { Value::Null } else { opt(median) },
                        "passes": if memory { vec![] } else { fig.map_or(vec![], |x| x.passes.clone()) },
                    },
                    "replica_cpu_us_per_job": Value::Null,
                    "memory_bytes_per_job": if memory { opt(median) } else { Value::Null },
                    "memory_bytes_per_job_passes": if memory { fig.map_or(vec![], |x| x.passes.clone()) } else { vec![] },
                    "p50_us": Value::Null,
                    "p99_us": Value::Null,
                    "p99_us_passes": Vec::<u32>::new(),
                    "other_load_cores": opt(foreign),
                    "note": Value::Null,
                    "scale": {
                        "point": l.label,
                        "waiting_jobs": l.jobs,
                        "queues": l.queues,
                        "priority_levels": l.levels,
                        "connections": l.conns,
                        "cycles": l.cycles,
                        "small_queue": l.small,
                        "ratio_to_small": ratio,
                        "goal_ratio": SCALE_GOAL,
                        "jobs_per_claim": opt(l.result.as_ref().ok().map(|f| f.jobs_per_claim)),
                    },
                }));
            }
        }
        let machine: serde_json::Map<String, Value> =
            self.machine.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
        json!({
            "short": short,
            "n": self.n,
            "memory_jobs": self.mem_jobs,
            "connections": self.conns,
            "depth": self.depth,
            "machine": machine,
            "rows": rows,
            "notes": self.notes,
        })
    }
}

/// Check results.json's text: it parses, and holds an "ok" row for each of `ran`.
pub fn check_json(text: &str, ran: &[Who]) -> Result<(), String> {
    let v: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("results.json does not parse: {e}"))?;
    let rows = v.get("rows").and_then(|r| r.as_array()).ok_or("results.json has no rows")?;
    for w in ran {
        let has = rows.iter().any(|r| {
            r.get("contender").and_then(|c| c.as_str()) == Some(w.key())
                && r.get("status").and_then(|s| s.as_str()) == Some("ok")
                && (r.pointer("/server_cpu_us_per_job/median").is_some_and(|m| m.is_number())
                    || r.get("memory_bytes_per_job").is_some_and(|m| m.is_number()))
        });
        if !has {
            return Err(format!("results.json holds no measured row for {}", w.label()));
        }
    }
    Ok(())
}

/// Check results.json's scale rows: for each point of `scale`, its three rows (enqueue,
/// claim+complete, memory), each naming the point, measured where the point was.
pub fn check_scale_json(text: &str, scale: &[ScaleLine]) -> Result<(), String> {
    let v: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("results.json does not parse: {e}"))?;
    let rows = v.get("rows").and_then(|r| r.as_array()).ok_or("results.json has no rows")?;
    for l in scale {
        for (workload, field) in [
            ("scale: enqueue", "/server_cpu_us_per_job/median"),
            ("scale: claim+complete", "/server_cpu_us_per_job/median"),
            ("scale: memory per waiting job", "/memory_bytes_per_job"),
        ] {
            let row = rows.iter().find(|r| {
                r.get("workload").and_then(|w| w.as_str()) == Some(workload)
                    && r.pointer("/scale/point").and_then(|p| p.as_str()) == Some(l.label.as_str())
            });
            let Some(row) = row else {
                return Err(format!("results.json has no {workload} row for {}", l.label));
            };
            let measured = row.pointer(field).is_some_and(serde_json::Value::is_number)
                && row.pointer("/scale/ratio_to_small").is_some_and(serde_json::Value::is_number);
            if l.result.is_ok() != measured {
                return Err(format!("results.json's {workload} row for {} does not match the run", l.label));
            }
        }
    }
    Ok(())
}

/// Bytes per waiting job, per contender.
pub type Memory = Vec<(Who, Result<f64, String>)>;

/// One pass over every workload: its rows, memory figures and idle windows.
pub type Pass = (Vec<Row>, Memory, Idles);

/// The median of several passes: for each row (by contender, workload and mode, in the
/// first pass's order) the pass with the median server CPU per job (the latency workloads:
/// the median p99), carrying every pass's figure; a row that failed in any pass is that
/// failure. Memory: the median figure. Idle windows: the pass with the median CPU.
pub fn median(passes: Vec<Pass>) -> Pass {
    let mut rows: Vec<Vec<Row>> = Vec::new();
    let mut memory: Vec<(Who, Vec<Result<f64, String>>)> = Vec::new();
    let mut idle: Vec<(&'static str, Vec<Result<IdleFig, String>>)> = Vec::new();
    for (pass_rows, pass_memory, pass_idle) in passes {
        for r in pass_rows {
            match rows.iter_mut().find(|g| {
                g.first().is_some_and(|f| f.who == r.who && f.workload == r.workload && f.mode == r.mode)
            }) {
                Some(g) => g.push(r),
                None => rows.push(vec![r]),
            }
        }
        for (w, m) in pass_memory {
            match memory.iter_mut().find(|(x, _)| *x == w) {
                Some((_, g)) => g.push(m),
                None => memory.push((w, vec![m])),
            }
        }
        for (w, m) in pass_idle {
            match idle.iter_mut().find(|(x, _)| *x == w) {
                Some((_, g)) => g.push(m),
                None => idle.push((w, vec![m])),
            }
        }
    }
    let rows = rows
        .into_iter()
        .filter_map(|mut g| {
            if let Some(i) = g.iter().position(|r| !r.ok()) {
                return Some(g.swap_remove(i));
            }
            let mut figures: Vec<f64> = g.iter().map(Row::cpu_per_job).collect();
            figures.sort_by(f64::total_cmp);
            let mut p99s: Vec<u32> = g.iter().map(|r| r.p99_us).collect();
            p99s.sort_unstable();
            let paired: Vec<(f64, f64)> = g.iter().flat_map(|r| r.paired.iter().copied()).collect();
            if g.first().is_some_and(|r| by_latency(r.workload)) {
                g.sort_by_key(|r| r.p99_us);
            } else {
                g.sort_by(|a, b| a.cpu_per_job().total_cmp(&b.cpu_per_job()));
            }
            let best_rate = g.iter().map(Row::rate).fold(f64::NAN, f64::max);
            let mid = g.len().checked_sub(1)? / 2;
            let mut r = g.swap_remove(mid);
            r.paired = paired;
            if figures.len() > 1 {
                r.passes = figures;
                r.best_rate = Some(best_rate);
                r.p99s = p99s;
            }
            Some(r)
        })
        .collect();
    let memory = memory
        .into_iter()
        .map(|(w, mut g)| {
            if let Some(i) = g.iter().position(Result::is_err) {
                return (w, g.swap_remove(i));
            }
            let mut v: Vec<f64> = g.into_iter().filter_map(Result::ok).collect();
            v.sort_by(f64::total_cmp);
            let mid = v.len().saturating_sub(1) / 2;
            (w, v.get(mid).copied().ok_or_else(|| "not measured".to_string()))
        })
        .collect();
    let idle = idle
        .into_iter()
        .map(|(w, mut g)| {
            if let Some(i) = g.iter().position(Result::is_err) {
                return (w, g.swap_remove(i));
            }
            let mut v: Vec<IdleFig> = g.into_iter().filter_map(Result::ok).collect();
            v.sort_by(|a, b| a.cores().total_cmp(&b.cores()));
            let each: Vec<f64> = v.iter().map(IdleFig::cores).collect();
            let mid = v.len().saturating_sub(1) / 2;
            if v.is_empty() {
                return (w, Err("not measured".to_string()));
            }
            let mut f = v.swap_remove(mid);
            if each.len() > 1 {
                f.passes = each;
            }
            (w, Ok(f))
        })
        .collect();
    (rows, memory, idle)
}

/// Replace what lies between the bench markers of the notebook's text (tests/bench/README.md)
/// with `body`, if both markers are there, in order. A marker counts only on a line of its
/// own, so the notebook's prose may name them.
pub fn splice_notebook(notebook: &str, body: &str) -> Option<String> {
    const START: &str = "<!-- bench:start -->";
    const END: &str = "<!-- bench:end -->";
    // Where the first line from `from` on that is exactly `marker` starts.
    let line = |from: usize, marker: &str| -> Option<usize> {
        let mut at = from;
        for l in notebook[from..].split_inclusive('\n') {
            if l.trim_end() == marker {
                return Some(at);
            }
            at += l.len();
        }
        None
    };
    let a = line(0, START)?;
    let after = a + START.len();
    let b = line(after, END)?;
    let mut out = String::with_capacity(notebook.len() + body.len());
    out.push_str(&notebook[..after]);
    out.push('\n');
    out.push_str(body.trim_end());
    out.push('\n');
    out.push_str(&notebook[b..]);
    Some(out)
}
