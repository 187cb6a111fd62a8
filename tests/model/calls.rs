//! Concrete calls: what is sent, with every argument resolved.

use super::*;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backoff {
    Fixed(i64),
    Exp(i64),
}

#[derive(Clone, Copy, Debug)]
pub enum WhenArg {
    /// Absolute ms.
    At(i64),
    /// `+ms` from the server clock.
    In(i64),
}

impl WhenArg {
    pub fn text(self) -> Vec<u8> {
        match self {
            WhenArg::At(t) => t.to_string().into_bytes(),
            WhenArg::In(d) => format!("+{d}").into_bytes(),
        }
    }
}

/// FAIL's decision, as sent: none (attempts and backoff decide), one of the three, or a
/// shape the module refuses (two at once, LIFO without RETRY).
#[derive(Clone, Copy, Debug)]
pub enum Decision {
    Backoff,
    Final,
    /// RETRY, with LIFO when true.
    Retry(bool),
    Delay(WhenArg),
    /// FINAL and RETRY together.
    Clash,
    /// LIFO without RETRY.
    LifoAlone,
}

#[derive(Clone, Debug)]
pub struct NewJob {
    pub name: Vec<u8>,
    pub data: Vec<u8>,
    pub priority: Option<i64>,
    pub attempts: Option<i64>,
    pub backoff: Option<Backoff>,
    /// EXPIRE when: not handed out from then on unless a CLAIM took it in time.
    pub expire: Option<WhenArg>,
    /// ALIAS key: the client's own id for the job.
    pub alias: Option<Vec<u8>>,
    /// DEDUP id [DEDUPTTL ms] [EXTEND] [REPLACE].
    pub dedup: Option<DedupArg>,
}

/// A producer's deduplication options.
#[derive(Clone, Debug)]
pub struct DedupArg {
    pub id: Vec<u8>,
    pub ttl: Option<i64>,
    pub extend: bool,
    pub replace: bool,
}

/// One job of TRA.ADD: its row's id, the job, LIFO, `DELAY when`.
#[derive(Clone, Debug)]
pub struct AddJob {
    pub id: Vec<u8>,
    pub job: NewJob,
    pub lifo: bool,
    pub delay: Option<WhenArg>,
}

#[derive(Clone, Debug)]
pub enum Call {
    /// `TRA.SCHEDULER … SET EVERY ms [OFFSET ms] [LIMIT n] JOB name data`.
    SchedSet {
        sid: Vec<u8>,
        every: i64,
        offset: Option<i64>,
        limit: Option<i64>,
        name: Vec<u8>,
        data: Vec<u8>,
    },
    /// `TRA.SCHEDULER … DEL`.
    SchedDel {
        sid: Vec<u8>,
    },
    Enqueue {
        id: Vec<u8>,
        job: NewJob,
        lifo: bool,
    },
    Schedule {
        id: Vec<u8>,
        when: WhenArg,
        job: NewJob,
    },
    Claim {
        token: Vec<u8>,
        lease: i64,
        count: Option<i64>,
        row: bool,
        by: Option<Vec<u8>>,
    },
    Pause(bool),
    Extend {
        id: Vec<u8>,
        token: Vec<u8>,
        lease: i64,
    },
    Extends {
        lease: i64,
        pairs: Vec<(Vec<u8>, Vec<u8>)>,
    },
    Complete {
        id: Vec<u8>,
        token: Vec<u8>,
        result: Vec<u8>,
        keep: Option<i64>,
        age: Option<i64>,
        echo: bool,
        metrics: Option<i64>,
    },
    Promote {
        id: Vec<u8>,
    },
    Reschedule {
        id: Vec<u8>,
        when: WhenArg,
    },
    Delay {
        id: Vec<u8>,
        token: Vec<u8>,
        when: WhenArg,
    },
    Fail {
        id: Vec<u8>,
        token: Vec<u8>,
        error: Vec<u8>,
        keep: Option<i64>,
        age: Option<i64>,
        decision: Decision,
        stack: Option<Vec<u8>>,
        metrics: Option<i64>,
    },
    Reprocess {
        id: Vec<u8>,
        from: Option<St>,
        keep_made: bool,
        keep_started: bool,
        keep_progress: bool,
        lifo: bool,
    },
    /// TRA.PRIORITY.
    Priority {
        id: Vec<u8>,
        priority: i64,
        lifo: bool,
    },
    /// A client's `HSET emq:{Q}:meta max-stalls v` (Some), or its HDEL (None).
    MetaStalls(Option<Vec<u8>>),
    /// A client's `HINCRBY emq:{Q}:metrics:<kind> prevTS -ms` (kind 0 completed, 1 failed):
    /// the current minute moved back, so that the next count ends it.
    MetricsBack {
        kind: usize,
        ms: i64,
    },
    Requeue {
        id: Vec<u8>,
        token: Vec<u8>,
    },
    Stalled {
        max_stalls: Option<i64>,
        count: Option<i64>,
    },
    // The inspection and administration commands (TRA.*).
    Progress {
        id: Vec<u8>,
        token: Vec<u8>,
        progress: Vec<u8>,
        echo: bool,
    },
    SetProgress {
        id: Vec<u8>,
        progress: Vec<u8>,
        echo: bool,
    },
    /// TRA.SETDATA.
    SetData {
        id: Vec<u8>,
        data: Vec<u8>,
    },
    AddLog {
        id: Vec<u8>,
        line: Vec<u8>,
        keep: Option<i64>,
    },
    CompleteNext {
        id: Vec<u8>,
        token: Vec<u8>,
        result: Vec<u8>,
        lease: i64,
        keep: Option<i64>,
        echo: bool,
        metrics: Option<i64>,
        count: Option<i64>,
        row: bool,
        by: Option<Vec<u8>>,
    },
    Log {
        id: Vec<u8>,
        token: Vec<u8>,
        line: Vec<u8>,
        keep: Option<i64>,
    },
    Remove {
        id: Vec<u8>,
        force: bool,
    },
    Drain {
        delayed: bool,
        count: Option<i64>,
    },
    Clean {
        set: St,
        grace: i64,
        count: Option<i64>,
    },
    Obliterate {
        force: bool,
        count: Option<i64>,
    },
    Job {
        id: Vec<u8>,
    },
    Counts,
    Jobs {
        set: St,
        from: Option<i64>,
        count: Option<i64>,
        rev: bool,
    },
    // TRA.COMPLETES: (id, token, result) triples.
    Completes {
        triples: Vec<(Vec<u8>, Vec<u8>, Vec<u8>)>,
    },
    // TRA.COMPLETESNEXT: (id, token, result) triples (each id a row key of the call), then
    // the claim's token and lease, and COMPLETE's options.
    CompletesNext {
        triples: Vec<(Vec<u8>, Vec<u8>, Vec<u8>)>,
        claim: Vec<u8>,
        lease: i64,
        keep: Option<i64>,
        age: Option<i64>,
        echo: bool,
        metrics: Option<i64>,
        row: bool,
        by: Option<Vec<u8>>,
    },
    // TRA.ADD: the jobs, one row key each.
    Add {
        jobs: Vec<AddJob>,
    },
    // TRA.LIMIT and TRA.LIMITS: the queue's limits.
    Limit(LimitArg),
    Limits,
}

/// What a TRA.LIMIT call asks.
#[derive(Clone, Debug, PartialEq)]
pub enum LimitArg {
    Rate(i64, i64),
    RateOff,
    Concurrency(i64),
    ConcurrencyOff,
    For(i64),
    Clear,
}

impl Call {
    pub fn verb(&self) -> &'static str {
        match self {
            Call::Enqueue { .. } => "EMQ.ENQUEUE",
            Call::Schedule { .. } => "EMQ.SCHEDULE",
            Call::Claim { .. } | Call::Pause(_) => "EMQ.CLAIM",
            Call::Extend { .. } => "EMQ.EXTEND",
            Call::Extends { .. } => "EMQ.EXTENDS",
            Call::Complete { .. } => "EMQ.COMPLETE",
            Call::Promote { .. } => "EMQ.PROMOTE",
            Call::Reschedule { .. } => "EMQ.RESCHEDULE",
            Call::Delay { .. } => "EMQ.DELAY",
            Call::Fail { .. } => "EMQ.FAIL",
            Call::Reprocess { .. } => "EMQ.REPROCESS",
            Call::Requeue { .. } => "EMQ.REQUEUE",
            Call::Stalled { .. } => "EMQ.STALLED",
            Call::Progress { .. } => "TRA.PROGRESS",
            Call::Log { .. } => "TRA.LOG",
            Call::Remove { .. } => "TRA.REMOVE",
            Call::Drain { .. } => "TRA.DRAIN",
            Call::Clean { .. } => "TRA.CLEAN",
            Call::Obliterate { .. } => "TRA.OBLITERATE",
            Call::Job { .. } => "TRA.JOB",
            Call::Counts => "TRA.COUNTS",
            Call::Jobs { .. } => "TRA.JOBS",
            Call::Completes { .. } => "TRA.COMPLETES",
            Call::SetProgress { .. } => "TRA.SETPROGRESS",
            Call::SetData { .. } => "TRA.SETDATA",
            Call::AddLog { .. } => "TRA.ADDLOG",
            Call::CompleteNext { .. } => "TRA.COMPLETENEXT",
            Call::CompletesNext { .. } => "TRA.COMPLETESNEXT",
            Call::Priority { .. } => "TRA.PRIORITY",
            Call::MetaStalls(Some(_)) => "HSET",
            Call::MetaStalls(None) => "HDEL",
            Call::MetricsBack { .. } => "HINCRBY",
            Call::Add { .. } => "TRA.ADD",
            Call::Limit(_) => "TRA.LIMIT",
            Call::Limits => "TRA.LIMITS",
            Call::SchedSet { .. } | Call::SchedDel { .. } => "TRA.SCHEDULER",
        }
    }

    pub fn job_id(&self) -> &[u8] {
        match self {
            Call::Enqueue { id, .. }
            | Call::Schedule { id, .. }
            | Call::Extend { id, .. }
            | Call::Complete { id, .. }
            | Call::Promote { id }
            | Call::Reschedule { id, .. }
            | Call::Delay { id, .. }
            | Call::Fail { id, .. }
            | Call::Reprocess { id, .. }
            | Call::Priority { id, .. }
            | Call::Requeue { id, .. }
            | Call::Progress { id, .. }
            | Call::Log { id, .. }
            | Call::SetProgress { id, .. }
            | Call::SetData { id, .. }
            | Call::AddLog { id, .. }
            | Call::CompleteNext { id, .. }
            | Call::Remove { id, .. }
            | Call::Job { id } => id,
            _ => b"",
        }
    }

    /// The arguments after the keys. `lc` spells option words in lower case (options are
    /// case-insensitive).
    pub fn args(&self, lc: bool) -> Vec<Vec<u8>> {
        let w = |s: &str| if lc { s.to_ascii_lowercase().into_bytes() } else { s.as_bytes().to_vec() };
        let num = |v: i64| v.to_string().into_bytes();
        let mut a: Vec<Vec<u8>> = Vec::new();
        let job_opts = |a: &mut Vec<Vec<u8>>, j: &NewJob| {
            if let Some(p) = j.priority {
                a.extend([w("PRIORITY"), num(p)]);
            }
            if let Some(n) = j.attempts {
                a.extend([w("ATTEMPTS"), num(n)]);
            }
            match j.backoff {
                Some(Backoff::Fixed(ms)) => a.extend([w("BACKOFF"), w("FIXED"), num(ms)]),
                Some(Backoff::Exp(ms)) => a.extend([w("BACKOFF"), w("EXP"), num(ms)]),
                None => {}
            }
            if let Some(x) = j.expire {
                a.extend([w("EXPIRE"), x.text()]);
            }
            if let Some(k) = &j.alias {
                a.extend([w("ALIAS"), k.clone()]);
            }
            if let Some(d) = &j.dedup {
                a.extend([w("DEDUP"), d.id.clone()]);
                if let Some(t) = d.ttl {
                    a.extend([w("DEDUPTTL"), num(t)]);
                }
                if d.extend {
                    a.push(w("EXTEND"));
                }
                if d.replace {
                    a.push(w("REPLACE"));
                }
            }
        };
        let retention = |a: &mut Vec<Vec<u8>>, keep: &Option<i64>, age: &Option<i64>| {
            if let Some(k) = keep {
                a.extend([w("KEEP"), num(*k)]);
            }
            if let Some(s) = age {
                a.extend([w("AGE"), num(*s)]);
            }
        };
        let worker = |a: &mut Vec<Vec<u8>>, by: &Option<Vec<u8>>| {
            if let Some(name) = by {
                a.extend([w("BY"), name.clone()]);
            }
        };
        match self {
            Call::SchedSet { every, offset, limit, name, data, .. } => {
                a.extend([w("SET"), w("EVERY"), num(*every)]);
                if let Some(o) = offset {
                    a.extend([w("OFFSET"), num(*o)]);
                }
                if let Some(l) = limit {
                    a.extend([w("LIMIT"), num(*l)]);
                }
                a.extend([w("JOB"), name.clone(), data.clone()]);
            }
            Call::SchedDel { .. } => a.push(w("DEL")),
            Call::Enqueue { job, lifo, .. } => {
                a.extend([job.name.clone(), job.data.clone()]);
                job_opts(&mut a, job);
                if *lifo {
                    a.push(w("LIFO"));
                }
            }
            Call::Schedule { when, job, .. } => {
                a.extend([when.text(), job.name.clone(), job.data.clone()]);
                job_opts(&mut a, job);
            }
            Call::Claim { token, lease, count, row, by } => {
                a.extend([token.clone(), num(*lease)]);
                if let Some(n) = count {
                    a.extend([w("COUNT"), num(*n)]);
                }
                if *row {
                    a.push(w("ROW"));
                }
                worker(&mut a, by);
            }
            Call::Pause(on) => a.push(w(if *on { "PAUSE" } else { "RESUME" })),
            Call::Extend { token, lease, .. } => a.extend([token.clone(), num(*lease)]),
            Call::Extends { lease, pairs } => {
                a.push(num(*lease));
                for (id, t) in pairs {
                    a.extend([id.clone(), t.clone()]);
                }
            }
            Call::Complete { token, result, keep, age, echo, metrics, .. } => {
                a.extend([token.clone(), result.clone()]);
                retention(&mut a, keep, age);
                if *echo {
                    a.push(w("ECHO"));
                }
                if let Some(m) = metrics {
                    a.extend([w("METRICS"), num(*m)]);
                }
            }
            Call::CompleteNext { token, result, lease, keep, echo, metrics, count, row, by, .. } => {
                a.extend([token.clone(), result.clone(), num(*lease)]);
                retention(&mut a, keep, &None);
                if *echo {
                    a.push(w("ECHO"));
                }
                if let Some(m) = metrics {
                    a.extend([w("METRICS"), num(*m)]);
                }
                if let Some(n) = count {
                    a.extend([w("COUNT"), num(*n)]);
                }
                if *row {
                    a.push(w("ROW"));
                }
                worker(&mut a, by);
            }
            Call::SetProgress { progress, echo, .. } => {
                a.push(progress.clone());
                if *echo {
                    a.push(w("ECHO"));
                }
            }
            Call::SetData { data, .. } => a.push(data.clone()),
            Call::AddLog { line, keep, .. } => {
                a.push(line.clone());
                if let Some(k) = keep {
                    a.extend([w("KEEP"), num(*k)]);
                }
            }
            Call::Promote { .. } | Call::MetaStalls(_) | Call::MetricsBack { .. } => {}
            Call::Reprocess { from, keep_made, keep_started, keep_progress, lifo, .. } => {
                if let Some(set) = from {
                    a.extend([w("FROM"), w(set.word())]);
                }
                for (on, word) in [
                    (*keep_made, "KEEPMADE"),
                    (*keep_started, "KEEPSTARTED"),
                    (*keep_progress, "KEEPPROGRESS"),
                    (*lifo, "LIFO"),
                ] {
                    if on {
                        a.push(w(word));
                    }
                }
            }
            Call::Priority { priority, lifo, .. } => {
                a.push(num(*priority));
                if *lifo {
                    a.push(w("LIFO"));
                }
            }
            Call::Reschedule { when, .. } => a.push(when.text()),
            Call::Delay { token, when, .. } => a.extend([token.clone(), when.text()]),
            Call::Fail { token, error, keep, age, decision, stack, metrics, .. } => {
                a.extend([token.clone(), error.clone()]);
                match decision {
                    Decision::Backoff => {}
                    Decision::Final => a.push(w("FINAL")),
                    Decision::Retry(lifo) => {
                        a.push(w("RETRY"));
                        if *lifo {
                            a.push(w("LIFO"));
                        }
                    }
                    Decision::Delay(when) => a.extend([w("DELAY"), when.text()]),
                    Decision::Clash => a.extend([w("FINAL"), w("RETRY")]),
                    Decision::LifoAlone => a.push(w("LIFO")),
                }
                if let Some(s) = stack {
                    a.extend([w("STACK"), s.clone()]);
                }
                retention(&mut a, keep, age);
                if let Some(m) = metrics {
                    a.extend([w("METRICS"), num(*m)]);
                }
            }
            Call::Requeue { token, .. } => a.push(token.clone()),
            Call::Stalled { max_stalls, count } => {
                if let Some(m) = max_stalls {
                    a.extend([w("MAXSTALLS"), num(*m)]);
                }
                if let Some(n) = count {
                    a.extend([w("COUNT"), num(*n)]);
                }
            }
            Call::Progress { token, progress, echo, .. } => {
                a.extend([token.clone(), progress.clone()]);
                if *echo {
                    a.push(w("ECHO"));
                }
            }
            Call::Log { token, line, keep, .. } => {
                a.extend([token.clone(), line.clone()]);
                if let Some(k) = keep {
                    a.extend([w("KEEP"), num(*k)]);
                }
            }
            Call::Remove { force, .. } | Call::Obliterate { force, count: None } => {
                if *force {
                    a.push(w("FORCE"));
                }
            }
            Call::Obliterate { force, count: Some(n) } => {
                if *force {
                    a.push(w("FORCE"));
                }
                a.extend([w("COUNT"), num(*n)]);
            }
            Call::Drain { delayed, count } => {
                if *delayed {
                    a.push(w("DELAYED"));
                }
                if let Some(n) = count {
                    a.extend([w("COUNT"), num(*n)]);
                }
            }
            Call::Clean { grace, count, .. } => {
                a.extend([w("GRACE"), num(*grace)]);
                if let Some(n) = count {
                    a.extend([w("COUNT"), num(*n)]);
                }
            }
            Call::Job { .. } | Call::Counts | Call::Limits => {}
            Call::Limit(l) => match l {
                LimitArg::Rate(max, ms) => a.extend([w("RATE"), num(*max), num(*ms)]),
                LimitArg::RateOff => a.extend([w("RATE"), w("OFF")]),
                LimitArg::Concurrency(n) => a.extend([w("CONCURRENCY"), num(*n)]),
                LimitArg::ConcurrencyOff => a.extend([w("CONCURRENCY"), w("OFF")]),
                LimitArg::For(ms) => a.extend([w("FOR"), num(*ms)]),
                LimitArg::Clear => a.push(w("CLEAR")),
            },
            Call::Jobs { from, count, rev, .. } => {
                if let Some(f) = from {
                    a.extend([w("FROM"), num(*f)]);
                }
                if let Some(n) = count {
                    a.extend([w("COUNT"), num(*n)]);
                }
                if *rev {
                    a.push(w("REV"));
                }
            }
            Call::Completes { triples } => {
                for (id, t, r) in triples {
                    a.extend([id.clone(), t.clone(), r.clone()]);
                }
            }
            Call::CompletesNext { triples, claim, lease, keep, age, echo, metrics, row, by } => {
                for (_, t, r) in triples {
                    a.extend([t.clone(), r.clone()]);
                }
                a.extend([claim.clone(), num(*lease)]);
                retention(&mut a, keep, age);
                if *echo {
                    a.push(w("ECHO"));
                }
                if let Some(m) = metrics {
                    a.extend([w("METRICS"), num(*m)]);
                }
                if *row {
                    a.push(w("ROW"));
                }
                worker(&mut a, by);
            }
            Call::Add { jobs } => {
                for j in jobs {
                    let mut o = Vec::new();
                    job_opts(&mut o, &j.job);
                    if j.lifo {
                        o.push(w("LIFO"));
                    }
                    if let Some(d) = j.delay {
                        o.extend([w("DELAY"), d.text()]);
                    }
                    a.extend([j.job.name.clone(), j.job.data.clone(), num(o.len() as i64)]);
                    a.extend(o);
                }
            }
        }
        a
    }

    /// The whole command: `verb numkeys keys... args...`, keys by the verb's key roles.
    pub fn argv(&self, q: &Q, lc: bool) -> Vec<Vec<u8>> {
        const ALL: [&str; 6] = ["wait", "prio", "active", "delayed", "completed", "failed"];
        if let Call::MetaStalls(v) = self {
            let mut argv =
                vec![self.verb().as_bytes().to_vec(), q.k("meta").into_bytes(), b"max-stalls".to_vec()];
            argv.extend(v.clone());
            return argv;
        }
        if let Call::MetricsBack { kind, ms } = self {
            let key = q.k(if *kind == 0 { "metrics:completed" } else { "metrics:failed" });
            return vec![
                b"HINCRBY".to_vec(),
                key.into_bytes(),
                b"prevTS".to_vec(),
                (-ms).to_string().into_bytes(),
            ];
        }
        if let Call::SchedSet { sid, .. } | Call::SchedDel { sid } = self {
            let mut v = vec![self.verb().as_bytes().to_vec(), b"4".to_vec()];
            let mut k = format!("emq:{{{}}}:sched:", q.0).into_bytes();
            k.extend_from_slice(sid);
            v.push(k);
            v.extend(["scheds", "delayed", "events"].iter().map(|r| q.k(r).into_bytes()));
            v.extend(self.args(lc));
            return v;
        }
        let roles: Vec<&str> = match self {
            Call::Priority { .. } => vec!["job", "wait", "prio", "events"],
            Call::Log { .. } | Call::AddLog { .. } => vec!["job", "log"],
            Call::Remove { .. } => [&["job"][..], &ALL, &["events"]].concat(),
            Call::Drain { .. } => vec!["wait", "prio", "delayed", "events"],
            Call::Clean { set, .. } => vec![set.word(), "events"],
            Call::Obliterate { .. } => [&ALL[..], &["meta", "events"]].concat(),
            Call::Job { .. } => vec!["job"],
            Call::Counts => [&ALL[..], &["meta"]].concat(),
            Call::Jobs { set, .. } => vec![set.word()],
            Call::Add { .. } => vec!["wait", "prio", "delayed", "events"],
            Call::CompletesNext { .. } => {
                vec!["wait", "prio", "active", "delayed", "completed", "meta", "events"]
            }
            Call::Limit(_) => vec!["meta"],
            Call::Limits => vec!["meta", "active"],
            _ => keys_of(self.verb()),
        };
        let mut v = vec![self.verb().as_bytes().to_vec(), roles.len().to_string().into_bytes()];
        if let Call::Add { jobs } = self {
            // The four queue keys, then `n` and the rows.
            v.extend(roles.iter().map(|r| q.k(r).into_bytes()));
            v.push(jobs.len().to_string().into_bytes());
            v.extend(jobs.iter().map(|j| q.job(&String::from_utf8_lossy(&j.id)).into_bytes()));
            v.extend(self.args(lc));
            return v;
        }
        if let Call::CompletesNext { triples, .. } = self {
            // The seven queue keys, then `n` and the rows.
            v.extend(roles.iter().map(|r| q.k(r).into_bytes()));
            v.push(triples.len().to_string().into_bytes());
            v.extend(triples.iter().map(|(id, ..)| q.job(&String::from_utf8_lossy(id)).into_bytes()));
            v.extend(self.args(lc));
            return v;
        }
        for r in &roles {
            if *r == "job" || *r == "log" {
                let mut k = format!("emq:{{{}}}:{r}:", q.0).into_bytes();
                k.extend_from_slice(self.job_id());
                v.push(k);
            } else {
                v.push(q.k(r).into_bytes());
            }
        }
        v.extend(self.args(lc));
        v
    }
}
