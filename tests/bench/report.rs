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
}

impl Who {
    pub fn label(self) -> &'static str {
        match self {
            Who::Trafikey => "trafikey",
            Who::Lua => "Lua twin",
            Who::BullMq => "BullMQ",
            Who::Floor => "floor",
            Who::Set => "SET",
        }
    }
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
    /// The lowest server CPU per job of the passes (other tenants only ever add to it).
    pub fn best_cpu(&self) -> f64 {
        self.passes.first().copied().unwrap_or_else(|| self.cpu_per_job())
    }
    pub fn best_rate(&self) -> f64 {
        self.best_rate.unwrap_or_else(|| self.rate())
    }
}

pub struct Report {
    pub rows: Vec<Row>,
    pub memory: Memory,
    pub machine: Vec<(String, String)>,
    pub notes: Vec<String>,
    pub n: u64,
    pub mem_jobs: u64,
    pub conns: usize,
    pub depth: usize,
}

/// Workloads in table order: (workload, mode).
pub const ORDER: [(&str, &str); 12] = [
    ("enqueue", "c50"),
    ("enqueue", "p32"),
    ("claim+complete", "c50"),
    ("claim+complete", "p32"),
    ("lifecycle", "c50"),
    ("lifecycle", "p32"),
    ("lifecycle, events off", "p32"),
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

fn rate(v: f64) -> String {
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
        let _ = writeln!(s, "| workload | mode | trafikey jobs/s | Lua twin jobs/s | BullMQ jobs/s | trafikey CPU µs/job | Lua twin CPU µs/job | BullMQ CPU µs/job | Lua ÷ trafikey | BullMQ ÷ trafikey |");
        let _ = writeln!(s, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|");
        for (w, m) in ORDER.iter().filter(|(w, _)| !w.starts_with("plain")) {
            let t = self.get(Who::Trafikey, w, m);
            let l = self.get(Who::Lua, w, m);
            let b = self.get(Who::BullMq, w, m);
            if t.is_none() && l.is_none() && b.is_none() {
                continue;
            }
            let r = |x: Option<&Row>| x.map_or("–".to_string(), |x| rate(x.rate()));
            let c = |x: Option<&Row>| x.map_or("–".to_string(), |x| num(x.cpu_per_job()));
            let ratio = |x: Option<&Row>| match (x, t) {
                (Some(x), Some(t)) => format!("{:.2}×", x.cpu_per_job() / t.cpu_per_job()),
                _ => "–".into(),
            };
            let mode = if *m == "p32" && b.is_some() { "p32 (BullMQ: best)" } else { m };
            let w = if *w == DROP {
                "coherence drop, per call (trafikey: `TRA.DROP`; Lua: EVALSHA of the reference script)"
            } else {
                w
            };
            let _ = writeln!(
                s,
                "| {w} | {mode} | {} | {} | {} | {} | {} | {} | {} | {} |",
                r(t),
                r(l),
                r(b),
                c(t),
                c(l),
                c(b),
                ratio(l),
                ratio(b)
            );
        }
        if let Some(f) = self.get(Who::Floor, "lifecycle", "p32") {
            let t = self.get(Who::Trafikey, "lifecycle", "p32");
            let _ = writeln!(
                s,
                "| floor: the lifecycle's writes as plain commands | p32 | {} | | | {} | | | trafikey ÷ floor: {} | |",
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
                    "| floor: {verb}'s writes as plain commands, one round trip a call | c50 | {} | | | {} | | | trafikey ÷ floor: {} | |",
                    rate(f.rate()),
                    num(f.cpu_per_job()),
                    t.map_or("–".into(), |t| format!("{:.2}×", t.cpu_per_job() / f.cpu_per_job()))
                );
            }
        }
        if let Some(x) = self.get(Who::Set, "plain SET", "c50") {
            let _ = writeln!(
                s,
                "| plain SET (per request) | c50 | {} | | | {} | | | | |",
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

        // Detail.
        let _ = writeln!(s, "\n### Every figure\n");
        let _ = writeln!(s, "Latency is per job: enqueue = its call's round trip (pipelined: its batch's); claim+complete = CLAIM sent → COMPLETE answered (BullMQ: processor start → `completed` event; its fetch rides on the previous job's finish); lifecycle = ENQUEUE sent → COMPLETE answered (BullMQ: `add` sent → `completed` event); coherence drop = its call's round trip (pipelined: its batch's). \"Wall µs in command\" is the time inside the contender's own top-level commands (`INFO commandstats`: EMQ.*, TRA.DROP, EVALSHA, SET, the floor's commands); the rest of the server CPU is the per-request work around them (reading, parsing, replying, the event loop). It is wall time, not CPU: when the clients preempt the server inside a command that counts too, so on a busy machine it can exceed the server CPU. \"Clients\" is the CPU the tool's own client threads used meanwhile, in cores (client and server share the machine's 2 cores: what the clients take, the server cannot have). \"Other load\" is the CPU other processes on the machine used meanwhile (from /proc), in cores; a phase with much of it is less reliable. \"CPU ÷ trafikey\" is the row's server CPU per job over trafikey's in the same workload and mode (for the coherence drop: EVALSHA ÷ TRA.DROP).\n");
        let _ = writeln!(s, "| contender | workload | mode | jobs | s | jobs/s | server CPU µs/job | CPU ÷ trafikey | wall µs in command/job | p50 ms | p99 ms | clients (cores) | other load (cores) | CPU µs/job, each pass |");
        let _ = writeln!(s, "|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|");
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
                        "| {} | {} | {} | {} | {:.2} | {} | {} | {vs} | {} | {} | {} | {} | {} | {} |",
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
                        }
                    );
                }
                Status::Skipped(why) => {
                    let _ = writeln!(
                        s,
                        "| {} | {} | {} | skipped: {why} | | | | | | | | | | |",
                        contender(r.who, r.workload),
                        r.workload,
                        r.mode
                    );
                }
                Status::Failed(e) => {
                    let _ = writeln!(
                        s,
                        "| {} | {} | {} | **failed**: {} | | | | | | | | | | |",
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

/// Bytes per waiting job, per contender.
pub type Memory = Vec<(Who, Result<f64, String>)>;

/// One pass over every workload: its rows and memory figures.
pub type Pass = (Vec<Row>, Memory);

/// The median of several passes: for each row (by contender, workload and mode, in the
/// first pass's order) the pass with the median server CPU per job, carrying every pass's
/// figure; a row that failed in any pass is that failure. Memory: the median figure.
pub fn median(passes: Vec<Pass>) -> Pass {
    let mut rows: Vec<Vec<Row>> = Vec::new();
    let mut memory: Vec<(Who, Vec<Result<f64, String>>)> = Vec::new();
    for (pass_rows, pass_memory) in passes {
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
    }
    let rows = rows
        .into_iter()
        .filter_map(|mut g| {
            if let Some(i) = g.iter().position(|r| !r.ok()) {
                return Some(g.swap_remove(i));
            }
            g.sort_by(|a, b| a.cpu_per_job().total_cmp(&b.cpu_per_job()));
            let figures: Vec<f64> = g.iter().map(Row::cpu_per_job).collect();
            let best_rate = g.iter().map(Row::rate).fold(f64::NAN, f64::max);
            let mid = g.len().checked_sub(1)? / 2;
            let mut r = g.swap_remove(mid);
            if figures.len() > 1 {
                r.passes = figures;
                r.best_rate = Some(best_rate);
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
    (rows, memory)
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
