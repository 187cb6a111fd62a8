//! Model-based property test of the job queue: a pure Rust model of the thirteen job verbs
//! (ENQUEUE, CLAIM with PAUSE/RESUME, EXTEND, EXTENDS, COMPLETE, SCHEDULE, PROMOTE,
//! RESCHEDULE, DELAY, FAIL, REPROCESS, REQUEUE, STALLED; ENQUEUE and SCHEDULE with and without
//! `EXPIRE when`) and of the inspection and administration commands (TRA.COMPLETES,
//! TRA.PROGRESS, TRA.LOG, TRA.REMOVE with and without FORCE,
//! TRA.DRAIN with and without DELAYED, TRA.CLEAN of either finished set, TRA.OBLITERATE with
//! and without FORCE, and the reads TRA.JOB, TRA.COUNTS, TRA.JOBS, whose replies are checked
//! against the model's own view), written from the contract (src/CONTRACT.md), the reference
//! page (src/verbs/README.md) and the verbs' doc comments — not from the module's code — run
//! side by side with a live server on random sequences of verbs.
//!
//! After every step the test compares: the reply (value, or the class of an error: its first
//! word; RESP3 maps as their RESP2 pairs), the events the step appended (the contract's
//! events table: names, ids and facts, in order), and the whole queue — every state set with
//! its scores (lease deadlines, due times, finish times, priorities), `wait` in claim order,
//! the paused flag, whether `meta` and `events` exist, every job's log (`emq:{Q}:log:<ID>`,
//! line by line), and every job row's fields the model tracks (state, name, data, priority,
//! attempts, created, token, started, made, stalls, claimed, result, error, finished,
//! progress, expire). After every step the invariant holds on the server's own view — every
//! job id in at most one state set, its row's `st` naming it, a row iff the job is in a set,
//! no log without its row — and a refusal leaves `DEBUG DIGEST` unchanged (a refusal writes
//! nothing). Every path that deletes a row deletes its log in the model (retention by count
//! and by age, KEEP 0, STALLED's failures under retention, REMOVE, DRAIN, CLEAN, OBLITERATE),
//! so the server must too; the summary counts the logs each verb deleted. After every
//! sequence `Q::check_invariant` runs, and a replica of the server must hold the same
//! keyspace (`DEBUG DIGEST`): the verbs replicate their effects.
//!
//! Time. The model never assumes the server's clock: the test reads `TIME` before and after
//! each step (separate round trips, so each command runs in an event-loop turn of its own)
//! and accepts the step if the model, run at *some* instant `now` in that bracket, produces
//! exactly what the server did. Every time-dependent value (deadlines, due times, finish
//! times, which leases have expired and which delayed jobs are due) is then exact, so leases
//! of 1–20 ms and `when`s a few ms ahead are fine: they expire during real sleeps (1–25 ms
//! and 100–150 ms steps) or simply while the sequence runs, and the model follows.
//!
//! EXPIRE. A job created with `EXPIRE when` (past, +0, a few ms ahead, far ahead, absolute,
//! and out of range) that no CLAIM has taken by then is never handed out: the CLAIM that meets
//! it — promoting it when due, or taking it from `wait`/`prio` — fails it for good with
//! `expired` (`f` = now, a `failed` event with `attempt` = `am`, under `keep-failed`, deleted
//! at once with 0 or beyond the cap), and goes on to the jobs behind it: another pass while the
//! last one met an expired job, at most 4, meeting at most 100 jobs in all (each pass promotes
//! again). Once a CLAIM took the job in time its EXPIRE is spent for good — a retry, a stall or
//! REPROCESS does not revive it (the reference page says so in as many words). The server runs
//! with upkeep off, so only CLAIM expires jobs.
//!
//! TRA.COMPLETES: up to 100 `id token result` triples (sometimes padded with jobs that do not
//! exist to exactly 100, or 101), each answered as COMPLETE would (1, 0 for the finishing
//! token's repeat, -1 not held, -2 no job), `keep-completed` retention when a job finished;
//! refused whole (the id gate on every id first, then the count, tokens, results, an id twice).
//!
//! Every config the model depends on is set per case, at random, and modelled:
//! `keep-completed`, `keep-failed`, `max-stalls`, `stalled-batch`, `promote-batch`,
//! `retention-batch` (1 and 2 make the bounds bite), `max-payload` (4 bytes makes payload
//! ranges bite), `log-keep` (1 and 2 make TRA.LOG's default trim bite) and `events-maxlen`
//! (0 turns events off).
//!
//! Cases are of two kinds: ordinary workers, and "crashy" ones whose holder verbs are rare,
//! so leases pile up and STALLED reclaims several at once. Some cases send the verbs over
//! RESP3 (the replies must be the same).
//!
//! Scale: `MODEL_CASES` (default 96) cases of up to `MODEL_STEPS` (default 60) steps, seed
//! `MODEL_SEED` (default fixed, so CI is reproducible; any u64 explores elsewhere).
//! Shrinking a failure is bounded by `MODEL_SHRINK_MS` (default 120000) and
//! `MODEL_SHRINK_ITERS` (default 4000).
//! A failure prints the shrunk sequence, every command it sent with the reply, and the
//! difference between the model and the server. Sequences it found where the module departed
//! from the contract are replayed by `found_divergences_replay` on every run, whatever the
//! seed (regressions once fixed).

use trafikey_support::*;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::strategy::Union;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};

// ---------------------------------------------------------------------------------------
// The contract's constants (src/CONTRACT.md, "Value ranges").

const TIME_MAX: i64 = (1 << 53) - 1;
const PRIORITY_MAX: i64 = (1 << 21) - 1;
const ATTEMPTS_MAX: i64 = 1_000_000;
const BACKOFF_MAX: i64 = 1 << 31;
const LEASE_MAX: i64 = 1 << 31;
const CLAIM_COUNT_MAX: i64 = 1000;
const STALLED_COUNT_MAX: i64 = 10_000;
/// What one call does at most, whatever COUNT asks (the module's `domain::*_PER_CALL`).
const CLAIM_PER_CALL: i64 = 100;
const RECLAIM_PER_CALL: i64 = 200;
/// Passes one CLAIM makes at most while the jobs it meets keep turning out expired (the
/// reference page's "a few passes"; the module's `claim::PASSES`).
const CLAIM_PASSES: usize = 4;
/// Jobs one TRA.COMPLETES finishes at most (more is refused).
const COMPLETES_MAX: usize = 100;
const MAX_STALLS_MAX: i64 = 1000;
const EXTENDS_PAIRS_MAX: usize = 1000;
const TOKEN_MAX: usize = 128;
const NAME_MAX: usize = 256;
const PROGRESS_MAX: usize = 4096;
const LOG_KEEP_MAX: i64 = 1_000_000;
const DELETE_COUNT_DEFAULT: i64 = 1000;
const DELETE_COUNT_MAX: i64 = 10_000;
const PAGE_MAX: i64 = 1000;

/// The id pool: small, so verbs collide on the same jobs (5 ids), or larger in some cases
/// (24 ids), so finished sets outgrow small retention caps.
const POOL_MAX: usize = 24;
fn pool_id(i: usize) -> Vec<u8> {
    jid(1000 + i as u64).into_bytes()
}
/// Ids the id gate refuses: above u64::MAX, 13 bytes, wrong brand case, just past the max.
const BAD_IDS: [&[u8]; 4] = [b"JOBzzzzzzzzzzz", b"JOB0000000001", b"job0000000000A", b"JOBLygHa16AHYG"];
const TOKENS: [&[u8]; 3] = [b"w1", b"w2", b"w3"];

/// The id gate, written from the contract ("Branded ids"): 14 bytes, brand `JOB`, 11 Base62
/// characters whose value fits in a u64 (the alphabet is in ASCII order, so compare bytes).
fn is_job_id(id: &[u8]) -> bool {
    id.len() == 14
        && &id[..3] == b"JOB"
        && id[3..].iter().all(u8::is_ascii_alphanumeric)
        && id[3..] <= b"LygHa16AHYF"[..]
}

// ---------------------------------------------------------------------------------------
// Concrete calls: what is sent, with every argument resolved.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Backoff {
    Fixed(i64),
    Exp(i64),
}

#[derive(Clone, Copy, Debug)]
enum WhenArg {
    /// Absolute ms.
    At(i64),
    /// `+ms` from the server clock.
    In(i64),
}

impl WhenArg {
    fn text(self) -> Vec<u8> {
        match self {
            WhenArg::At(t) => t.to_string().into_bytes(),
            WhenArg::In(d) => format!("+{d}").into_bytes(),
        }
    }
}

#[derive(Clone, Debug)]
struct NewJob {
    name: Vec<u8>,
    data: Vec<u8>,
    priority: Option<i64>,
    attempts: Option<i64>,
    backoff: Option<Backoff>,
    /// EXPIRE when: not handed out from then on unless a CLAIM took it in time.
    expire: Option<WhenArg>,
}

#[derive(Clone, Debug)]
enum Call {
    Enqueue { id: Vec<u8>, job: NewJob, lifo: bool },
    Schedule { id: Vec<u8>, when: WhenArg, job: NewJob },
    Claim { token: Vec<u8>, lease: i64, count: Option<i64> },
    Pause(bool),
    Extend { id: Vec<u8>, token: Vec<u8>, lease: i64 },
    Extends { lease: i64, pairs: Vec<(Vec<u8>, Vec<u8>)> },
    Complete { id: Vec<u8>, token: Vec<u8>, result: Vec<u8>, keep: Option<i64>, age: Option<i64> },
    Promote { id: Vec<u8> },
    Reschedule { id: Vec<u8>, when: WhenArg },
    Delay { id: Vec<u8>, token: Vec<u8>, when: WhenArg },
    Fail { id: Vec<u8>, token: Vec<u8>, error: Vec<u8>, keep: Option<i64>, age: Option<i64>, final_: bool },
    Reprocess { id: Vec<u8> },
    Requeue { id: Vec<u8>, token: Vec<u8> },
    Stalled { max_stalls: Option<i64>, count: Option<i64> },
    // The inspection and administration commands (TRA.*).
    Progress { id: Vec<u8>, token: Vec<u8>, progress: Vec<u8> },
    Log { id: Vec<u8>, token: Vec<u8>, line: Vec<u8>, keep: Option<i64> },
    Remove { id: Vec<u8>, force: bool },
    Drain { delayed: bool, count: Option<i64> },
    Clean { set: St, grace: i64, count: Option<i64> },
    Obliterate { force: bool, count: Option<i64> },
    Job { id: Vec<u8> },
    Counts,
    Jobs { set: St, from: Option<i64>, count: Option<i64>, rev: bool },
    // TRA.COMPLETES: (id, token, result) triples.
    Completes { triples: Vec<(Vec<u8>, Vec<u8>, Vec<u8>)> },
}

impl Call {
    fn verb(&self) -> &'static str {
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
        }
    }

    fn job_id(&self) -> &[u8] {
        match self {
            Call::Enqueue { id, .. }
            | Call::Schedule { id, .. }
            | Call::Extend { id, .. }
            | Call::Complete { id, .. }
            | Call::Promote { id }
            | Call::Reschedule { id, .. }
            | Call::Delay { id, .. }
            | Call::Fail { id, .. }
            | Call::Reprocess { id }
            | Call::Requeue { id, .. }
            | Call::Progress { id, .. }
            | Call::Log { id, .. }
            | Call::Remove { id, .. }
            | Call::Job { id } => id,
            _ => b"",
        }
    }

    /// The arguments after the keys. `lc` spells option words in lower case (options are
    /// case-insensitive).
    fn args(&self, lc: bool) -> Vec<Vec<u8>> {
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
        };
        let retention = |a: &mut Vec<Vec<u8>>, keep: &Option<i64>, age: &Option<i64>| {
            if let Some(k) = keep {
                a.extend([w("KEEP"), num(*k)]);
            }
            if let Some(s) = age {
                a.extend([w("AGE"), num(*s)]);
            }
        };
        match self {
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
            Call::Claim { token, lease, count } => {
                a.extend([token.clone(), num(*lease)]);
                if let Some(n) = count {
                    a.extend([w("COUNT"), num(*n)]);
                }
            }
            Call::Pause(on) => a.push(w(if *on { "PAUSE" } else { "RESUME" })),
            Call::Extend { token, lease, .. } => a.extend([token.clone(), num(*lease)]),
            Call::Extends { lease, pairs } => {
                a.push(num(*lease));
                for (id, t) in pairs {
                    a.extend([id.clone(), t.clone()]);
                }
            }
            Call::Complete { token, result, keep, age, .. } => {
                a.extend([token.clone(), result.clone()]);
                retention(&mut a, keep, age);
            }
            Call::Promote { .. } | Call::Reprocess { .. } => {}
            Call::Reschedule { when, .. } => a.push(when.text()),
            Call::Delay { token, when, .. } => a.extend([token.clone(), when.text()]),
            Call::Fail { token, error, keep, age, final_, .. } => {
                a.extend([token.clone(), error.clone()]);
                retention(&mut a, keep, age);
                if *final_ {
                    a.push(w("FINAL"));
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
            Call::Progress { token, progress, .. } => a.extend([token.clone(), progress.clone()]),
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
            Call::Job { .. } | Call::Counts => {}
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
        }
        a
    }

    /// The whole command: `verb numkeys keys... args...`, keys by the verb's key roles.
    fn argv(&self, q: &Q, lc: bool) -> Vec<Vec<u8>> {
        const ALL: [&str; 6] = ["wait", "prio", "active", "delayed", "completed", "failed"];
        let roles: Vec<&str> = match self {
            Call::Log { .. } => vec!["job", "log"],
            Call::Remove { .. } => [&["job"][..], &ALL, &["events"]].concat(),
            Call::Drain { .. } => vec!["wait", "prio", "delayed", "events"],
            Call::Clean { set, .. } => vec![set.word(), "events"],
            Call::Obliterate { .. } => [&ALL[..], &["meta", "events"]].concat(),
            Call::Job { .. } => vec!["job"],
            Call::Counts => [&ALL[..], &["meta"]].concat(),
            Call::Jobs { set, .. } => vec![set.word()],
            _ => keys_of(self.verb()).to_vec(),
        };
        let mut v = vec![self.verb().as_bytes().to_vec(), roles.len().to_string().into_bytes()];
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

// ---------------------------------------------------------------------------------------
// The model.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum St {
    Wait,
    Prio,
    Active,
    Delayed,
    Completed,
    Failed,
}

impl St {
    fn word(self) -> &'static str {
        match self {
            St::Wait => "wait",
            St::Prio => "prio",
            St::Active => "active",
            St::Delayed => "delayed",
            St::Completed => "completed",
            St::Failed => "failed",
        }
    }
}

/// A job row as the model sees it. The comparison with the server goes through `RowView`.
#[derive(Clone, Debug)]
struct Row {
    state: St,
    name: Vec<u8>,
    data: Vec<u8>,
    priority: i64,
    attempts: i64,
    backoff: Option<Backoff>,
    created: i64,
    /// The current holder's token, or the token that completed the job.
    token: Option<Vec<u8>>,
    started: i64,
    made: i64,
    stalls: i64,
    claimed: Option<i64>,
    result: Option<Vec<u8>>,
    error: Option<Vec<u8>>,
    finished: Option<i64>,
    /// The holder's last TRA.PROGRESS report.
    progress: Option<Vec<u8>>,
    /// EXPIRE, absolute ms (row field `x`).
    expire: Option<i64>,
    /// A CLAIM has taken the job (in time): its EXPIRE is spent for good — a retry after
    /// FAIL, a stall or REPROCESS makes it wait again, and it is handed out as any job
    /// (src/verbs/README.md, EMQ.ENQUEUE's "EXPIRE when"). Not a row field.
    spent: bool,
}

#[derive(Clone, Copy, Debug)]
struct Cfg {
    /// TRA.LOG's default KEEP.
    log_keep: i64,
    keep_completed: i64,
    keep_failed: i64,
    max_stalls: i64,
    stalled_batch: i64,
    /// Due jobs one CLAIM promotes at most (earliest due first).
    promote_batch: i64,
    /// Finished jobs one call deletes by retention at most (oldest first).
    retention_batch: i64,
    /// Largest data, result, error accepted.
    max_payload: usize,
    /// `events-maxlen` 0 turns events off.
    events: bool,
}

#[derive(Clone, Debug)]
struct Model {
    cfg: Cfg,
    rows: BTreeMap<Vec<u8>, Row>,
    /// `wait` in claim order: the front is claimed first.
    wait: VecDeque<Vec<u8>>,
    /// `prio` in claim order: (priority, id).
    prio: BTreeSet<(i64, Vec<u8>)>,
    /// id → lease deadline.
    active: BTreeMap<Vec<u8>, i64>,
    /// id → due time.
    delayed: BTreeMap<Vec<u8>, i64>,
    /// id → finish time.
    completed: BTreeMap<Vec<u8>, i64>,
    failed: BTreeMap<Vec<u8>, i64>,
    paused: bool,
    /// The last token each job was claimed with (kept after it is cleared): for stale holders.
    last_token: BTreeMap<Vec<u8>, Vec<u8>>,
    /// Each job's log (TRA.LOG), oldest line first: deleted with its row, always.
    logs: BTreeMap<Vec<u8>, Vec<Vec<u8>>>,
    /// Whether the events stream exists (an event was appended since the last OBLITERATE).
    events_exist: bool,
}

/// One event's fields, flat: `event <name> [id <ID>] facts...`.
type Event = Vec<Vec<u8>>;

fn event(name: &str, id: Option<&[u8]>, facts: &[(&str, Vec<u8>)]) -> Event {
    let mut e = vec![b"event".to_vec(), name.as_bytes().to_vec()];
    if let Some(id) = id {
        e.extend([b"id".to_vec(), id.to_vec()]);
    }
    for (k, v) in facts {
        e.extend([k.as_bytes().to_vec(), v.clone()]);
    }
    e
}

fn n(v: i64) -> Vec<u8> {
    v.to_string().into_bytes()
}

type Refused = &'static str;

fn gate(id: &[u8]) -> Result<(), Refused> {
    if is_job_id(id) {
        Ok(())
    } else {
        Err("EMQID")
    }
}

fn within(v: i64, lo: i64, hi: i64) -> Result<i64, Refused> {
    if (lo..=hi).contains(&v) {
        Ok(v)
    } else {
        Err("EMQARG")
    }
}

fn token_ok(t: &[u8]) -> Result<(), Refused> {
    if (1..=TOKEN_MAX).contains(&t.len()) {
        Ok(())
    } else {
        Err("EMQARG")
    }
}

/// `when` at `now`: absolute or `+ms`, ≤ 2^53−1, a time in the past is due now.
fn due_of(w: WhenArg, now: i64) -> Result<i64, Refused> {
    let at = match w {
        WhenArg::At(t) => t,
        WhenArg::In(d) => now.checked_add(d).ok_or("EMQARG")?,
    };
    Ok(within(at, 0, TIME_MAX)?.max(now))
}

/// EXPIRE `when` at `now`: absolute or `+ms`, 0..=2^53−1, a time already past kept as given
/// (the job is expired from the start).
fn expire_of(w: WhenArg, now: i64) -> Result<i64, Refused> {
    let at = match w {
        WhenArg::At(t) => t,
        WhenArg::In(d) => now.checked_add(d).ok_or("EMQARG")?,
    };
    within(at, 0, TIME_MAX)
}

/// KEEP: -1 all, 0 delete this job now, n the n newest; default: the config.
fn keep_of(given: Option<i64>, default: i64) -> Result<i64, Refused> {
    match given {
        Some(k) if k < -1 => Err("EMQARG"),
        Some(k) => Ok(k),
        None => Ok(default),
    }
}

fn age_of(given: Option<i64>) -> Result<Option<i64>, Refused> {
    given.map(|a| within(a, 0, TIME_MAX)).transpose()
}

/// The backoff delay after `made` finished attempts: FIXED d, or EXP d·2^(made−1), saturating.
fn backoff_delay(b: Option<Backoff>, made: i64) -> i64 {
    match b {
        None => 0,
        Some(Backoff::Fixed(d)) => d,
        Some(Backoff::Exp(d)) => {
            let e = made - 1;
            let factor = if e >= 62 { i64::MAX } else { 1i64 << e };
            d.saturating_mul(factor).min(TIME_MAX)
        }
    }
}

struct Checked {
    name: Vec<u8>,
    data: Vec<u8>,
    priority: i64,
    attempts: i64,
    backoff: Option<Backoff>,
    expire: Option<i64>,
}

fn check_new(j: &NewJob, max_payload: usize, now: i64) -> Result<Checked, Refused> {
    if !(1..=NAME_MAX).contains(&j.name.len()) {
        return Err("EMQARG");
    }
    if j.data.len() > max_payload {
        return Err("EMQARG");
    }
    let priority = within(j.priority.unwrap_or(0), 0, PRIORITY_MAX)?;
    let attempts = within(j.attempts.unwrap_or(1), 1, ATTEMPTS_MAX)?;
    let backoff = match j.backoff {
        Some(Backoff::Fixed(ms)) => Some(Backoff::Fixed(within(ms, 0, BACKOFF_MAX)?)),
        Some(Backoff::Exp(ms)) => Some(Backoff::Exp(within(ms, 0, BACKOFF_MAX)?)),
        None => None,
    };
    let expire = j.expire.map(|w| expire_of(w, now)).transpose()?;
    Ok(Checked { name: j.name.clone(), data: j.data.clone(), priority, attempts, backoff, expire })
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Finished {
    Completed,
    Failed,
}

impl Model {
    fn new(cfg: Cfg) -> Model {
        Model {
            cfg,
            rows: BTreeMap::new(),
            wait: VecDeque::new(),
            prio: BTreeSet::new(),
            active: BTreeMap::new(),
            delayed: BTreeMap::new(),
            completed: BTreeMap::new(),
            failed: BTreeMap::new(),
            paused: false,
            last_token: BTreeMap::new(),
            logs: BTreeMap::new(),
            events_exist: false,
        }
    }

    /// Delete a job's row, and its log with it (every path that deletes a row does).
    fn drop_row(&mut self, id: &[u8]) {
        self.rows.remove(id);
        self.logs.remove(id);
    }

    /// Take a job out of whatever state set holds it.
    fn unset(&mut self, id: &[u8]) {
        self.wait.retain(|w| w != id);
        self.prio.retain(|(_, w)| w != id);
        for m in [&mut self.active, &mut self.delayed, &mut self.completed, &mut self.failed] {
            m.remove(id);
        }
    }

    /// A state set's ids in the order TRA.JOBS pages it (the order the queue serves them).
    fn ordered(&self, set: St) -> Vec<Vec<u8>> {
        let by_score = |m: &BTreeMap<Vec<u8>, i64>| {
            let mut v: Vec<(i64, Vec<u8>)> = m.iter().map(|(id, s)| (*s, id.clone())).collect();
            v.sort();
            v.into_iter().map(|(_, id)| id).collect()
        };
        match set {
            St::Wait => self.wait.iter().cloned().collect(),
            St::Prio => self.prio.iter().map(|(_, id)| id.clone()).collect(),
            St::Active => by_score(&self.active),
            St::Delayed => by_score(&self.delayed),
            St::Completed => by_score(&self.completed),
            St::Failed => by_score(&self.failed),
        }
    }

    fn set_len(&self, set: St) -> usize {
        match set {
            St::Wait => self.wait.len(),
            St::Prio => self.prio.len(),
            St::Active => self.active.len(),
            St::Delayed => self.delayed.len(),
            St::Completed => self.completed.len(),
            St::Failed => self.failed.len(),
        }
    }

    fn row(&mut self, id: &[u8]) -> &mut Row {
        self.rows.get_mut(id).expect("the model's own row")
    }

    /// Held: in active, and the row carries the token.
    fn held(&self, id: &[u8], token: &[u8]) -> bool {
        self.active.contains_key(id)
            && self.rows.get(id).is_some_and(|r| r.state == St::Active && r.token.as_deref() == Some(token))
    }

    /// Make a job ready by its priority: wait (back, or front for the "not at fault"
    /// returns and LIFO) for priority 0, else prio.
    fn ready(&mut self, id: &[u8], front: bool) {
        let p = self.rows[id].priority;
        if p == 0 {
            if front {
                self.wait.push_front(id.to_vec());
            } else {
                self.wait.push_back(id.to_vec());
            }
            self.row(id).state = St::Wait;
        } else {
            self.prio.insert((p, id.to_vec()));
            self.row(id).state = St::Prio;
        }
    }

    /// Retention of a finished set: after `added` (finished now, so the newest)
    /// joined the entries `before`, keep the `keep` newest (n > 0), and with AGE drop entries
    /// finished before now−age, at most `retention-batch` per call. Trimmed rows are deleted.
    /// Entries are ordered as the set orders them, by (finish time, id): jobs finished in the
    /// same call share a finish time, so among them the lowest ids are the oldest.
    ///
    /// `soft`: the keep is the config's default, which the project documents as a soft cap
    /// (src/verbs/README.md): the set may grow past n by n/16 (at most 64; exact below 16)
    /// and is then trimmed back to n.
    #[allow(clippy::too_many_arguments)]
    fn retire(
        &mut self,
        which: Finished,
        before: Vec<(i64, Vec<u8>)>,
        added: Vec<Vec<u8>>,
        keep: i64,
        soft: bool,
        age: Option<i64>,
        now: i64,
    ) {
        let mut order: Vec<(i64, Vec<u8>)> = before;
        order.sort();
        let mut added = added;
        added.sort();
        order.extend(added.into_iter().map(|id| (now, id)));
        let slack = if soft && keep > 0 { (keep as usize / 16).min(64) } else { 0 };
        let by_count =
            if keep > 0 && order.len() > keep as usize + slack { order.len() - keep as usize } else { 0 };
        let cutoff = age.map(|a| now - a);
        let mut budget = self.cfg.retention_batch;
        for (i, (score, id)) in order.iter().enumerate() {
            if budget > 0 && (i < by_count || cutoff.is_some_and(|c| *score < c)) {
                budget -= 1;
                match which {
                    Finished::Completed => self.completed.remove(id),
                    Finished::Failed => self.failed.remove(id),
                };
                self.logs.remove(id);
                self.rows.remove(id);
            }
        }
    }

    fn finished_before(&self, which: Finished) -> Vec<(i64, Vec<u8>)> {
        let set = if which == Finished::Completed { &self.completed } else { &self.failed };
        set.iter().map(|(id, s)| (*s, id.clone())).collect()
    }

    /// Run one call at server time `now`. On a refusal the caller discards this model (a
    /// refusal writes nothing), so the arms may check as they go.
    fn apply(&mut self, call: &Call, now: i64, ev: &mut Vec<Event>) -> Result<Reply, Refused> {
        match call {
            Call::Enqueue { id, job, lifo } => {
                gate(id)?;
                let j = check_new(job, self.cfg.max_payload, now)?;
                if self.rows.contains_key(id) {
                    return Ok(Reply::Int(0));
                }
                self.create(id, &j, now);
                self.ready(id, *lifo);
                ev.push(event("added", Some(id), &[("name", j.name.clone()), ("prio", n(j.priority))]));
                Ok(Reply::Int(1))
            }
            Call::Schedule { id, when, job } => {
                gate(id)?;
                let j = check_new(job, self.cfg.max_payload, now)?;
                let due = due_of(*when, now)?;
                if self.rows.contains_key(id) {
                    return Ok(Reply::Int(0));
                }
                self.create(id, &j, now);
                self.row(id).state = St::Delayed;
                self.delayed.insert(id.clone(), due);
                ev.push(event("delayed", Some(id), &[("due", n(due))]));
                Ok(Reply::Int(1))
            }
            Call::Pause(on) => {
                if self.paused == *on {
                    return Ok(Reply::Int(0));
                }
                self.paused = *on;
                ev.push(event(if *on { "paused" } else { "resumed" }, None, &[]));
                Ok(Reply::Int(1))
            }
            Call::Claim { token, lease, count } => {
                token_ok(token)?;
                let lease = within(*lease, 1, LEASE_MAX)?;
                let count = within(count.unwrap_or(1), 1, CLAIM_COUNT_MAX)?.min(CLAIM_PER_CALL) as usize;
                // Expired jobs do not use up a claim: another pass while the last one met any,
                // at most CLAIM_PASSES, all of them meeting at most CLAIM_PER_CALL jobs.
                let mut out = Vec::new();
                let (mut want, mut met) = (count, 0usize);
                for pass in 0..CLAIM_PASSES {
                    // Only the first pass promotes: one CLAIM promotes at most promote-batch.
                    let (got, expired) = self.claim_pass(token, lease, want, now, pass == 0, ev);
                    met += got.len() + expired;
                    out.extend(got);
                    want = (count - out.len()).min((CLAIM_PER_CALL as usize).saturating_sub(met));
                    if expired == 0 || want == 0 {
                        break;
                    }
                }
                Ok(Reply::Array(out))
            }
            Call::Extend { id, token, lease } => {
                gate(id)?;
                token_ok(token)?;
                let lease = within(*lease, 1, LEASE_MAX)?;
                if !self.rows.contains_key(id) {
                    return Err("EMQNOJOB");
                }
                if !self.held(id, token) {
                    return Err("EMQLEASE");
                }
                let deadline = (now + lease).min(TIME_MAX);
                self.active.insert(id.clone(), deadline);
                Ok(Reply::Int(deadline))
            }
            Call::Extends { lease, pairs } => {
                for (id, _) in pairs {
                    gate(id)?;
                }
                let lease = within(*lease, 1, LEASE_MAX)?;
                if pairs.is_empty() || pairs.len() > EXTENDS_PAIRS_MAX {
                    return Err("EMQARG");
                }
                for (_, t) in pairs {
                    token_ok(t)?;
                }
                let deadline = (now + lease).min(TIME_MAX);
                let mut out = Vec::new();
                for (id, t) in pairs {
                    if self.held(id, t) {
                        self.active.insert(id.clone(), deadline);
                        out.push(Reply::Int(deadline));
                    } else {
                        out.push(Reply::Int(0));
                    }
                }
                Ok(Reply::Array(out))
            }
            Call::Complete { id, token, result, keep, age } => {
                gate(id)?;
                token_ok(token)?;
                if result.len() > self.cfg.max_payload {
                    return Err("EMQARG");
                }
                let soft = keep.is_none();
                let keep = keep_of(*keep, self.cfg.keep_completed)?;
                let age = age_of(*age)?;
                let Some(r) = self.rows.get(id) else { return Err("EMQNOJOB") };
                if !self.held(id, token) {
                    // The same token repeating a COMPLETE it already made: 0, nothing written.
                    if r.state == St::Completed && r.token.as_deref() == Some(&token[..]) {
                        return Ok(Reply::Int(0));
                    }
                    return Err("EMQLEASE");
                }
                let before = self.finished_before(Finished::Completed);
                self.active.remove(id);
                let made = r.made + 1;
                let mut added = vec![];
                if keep == 0 {
                    self.drop_row(id);
                } else {
                    let r = self.row(id);
                    r.state = St::Completed;
                    r.result = Some(result.clone());
                    r.finished = Some(now);
                    r.made = made;
                    self.completed.insert(id.clone(), now);
                    added.push(id.clone());
                }
                ev.push(event("completed", Some(id), &[("attempt", n(made))]));
                self.retire(Finished::Completed, before, added, keep, soft, age, now);
                Ok(Reply::Int(1))
            }
            Call::Promote { id } => {
                gate(id)?;
                let Some(r) = self.rows.get(id) else { return Err("EMQNOJOB") };
                if r.state != St::Delayed {
                    return Err("EMQSTATE");
                }
                self.delayed.remove(id);
                self.ready(id, false);
                ev.push(event("waiting", Some(id), &[("prev", b"delayed".to_vec())]));
                Ok(Reply::Int(1))
            }
            Call::Reschedule { id, when } => {
                gate(id)?;
                let due = due_of(*when, now)?;
                let Some(r) = self.rows.get(id) else { return Err("EMQNOJOB") };
                if r.state != St::Delayed {
                    return Err("EMQSTATE");
                }
                self.delayed.insert(id.clone(), due);
                ev.push(event("delayed", Some(id), &[("due", n(due))]));
                Ok(Reply::Int(due))
            }
            Call::Delay { id, token, when } => {
                gate(id)?;
                token_ok(token)?;
                let due = due_of(*when, now)?;
                if !self.rows.contains_key(id) {
                    return Err("EMQNOJOB");
                }
                if !self.held(id, token) {
                    return Err("EMQLEASE");
                }
                self.active.remove(id);
                self.delayed.insert(id.clone(), due);
                let r = self.row(id);
                r.state = St::Delayed;
                r.token = None;
                ev.push(event("delayed", Some(id), &[("due", n(due))]));
                Ok(Reply::Int(due))
            }
            Call::Fail { id, token, error, keep, age, final_ } => {
                gate(id)?;
                token_ok(token)?;
                if error.len() > self.cfg.max_payload {
                    return Err("EMQARG");
                }
                let soft = keep.is_none();
                let keep = keep_of(*keep, self.cfg.keep_failed)?;
                let age = age_of(*age)?;
                if !self.rows.contains_key(id) {
                    return Err("EMQNOJOB");
                }
                if !self.held(id, token) {
                    return Err("EMQLEASE");
                }
                let before = self.finished_before(Finished::Failed);
                self.active.remove(id);
                let (made, attempts, backoff) = {
                    let r = self.row(id);
                    r.made += 1;
                    r.error = Some(error.clone());
                    r.token = None;
                    (r.made, r.attempts, r.backoff)
                };
                if *final_ || made >= attempts {
                    let mut added = vec![];
                    if keep == 0 {
                        self.drop_row(id);
                    } else {
                        let r = self.row(id);
                        r.state = St::Failed;
                        r.finished = Some(now);
                        self.failed.insert(id.clone(), now);
                        added.push(id.clone());
                    }
                    ev.push(event("failed", Some(id), &[("error", error.clone()), ("attempt", n(made))]));
                    self.retire(Finished::Failed, before, added, keep, soft, age, now);
                    return Ok(Reply::Simple("failed".into()));
                }
                let d = backoff_delay(backoff, made);
                if d == 0 {
                    self.ready(id, false);
                    ev.push(event("waiting", Some(id), &[("prev", b"active".to_vec())]));
                    Ok(Reply::Simple("retry".into()))
                } else {
                    let due = (now + d).min(TIME_MAX);
                    self.row(id).state = St::Delayed;
                    self.delayed.insert(id.clone(), due);
                    ev.push(event("delayed", Some(id), &[("due", n(due))]));
                    Ok(Reply::Simple("delayed".into()))
                }
            }
            Call::Reprocess { id } => {
                gate(id)?;
                let Some(r) = self.rows.get(id) else { return Err("EMQNOJOB") };
                let prev = r.state;
                match prev {
                    St::Completed => self.completed.remove(id),
                    St::Failed => self.failed.remove(id),
                    _ => return Err("EMQSTATE"),
                };
                let r = self.row(id);
                r.result = None;
                r.error = None;
                r.finished = None;
                r.token = None;
                r.started = 0;
                r.made = 0;
                r.stalls = 0;
                // The last claim's time belongs to the attempts just reset.
                r.claimed = None;
                r.progress = None;
                self.ready(id, false);
                ev.push(event("waiting", Some(id), &[("prev", prev.word().as_bytes().to_vec())]));
                Ok(Reply::Int(1))
            }
            Call::Requeue { id, token } => {
                gate(id)?;
                token_ok(token)?;
                if !self.rows.contains_key(id) {
                    return Err("EMQNOJOB");
                }
                if !self.held(id, token) {
                    return Err("EMQLEASE");
                }
                self.active.remove(id);
                self.row(id).token = None;
                self.ready(id, true);
                ev.push(event("waiting", Some(id), &[("prev", b"active".to_vec())]));
                Ok(Reply::Int(1))
            }
            Call::Stalled { max_stalls, count } => {
                let max_stalls = within(max_stalls.unwrap_or(self.cfg.max_stalls), 0, MAX_STALLS_MAX)?;
                let count = within(count.unwrap_or(self.cfg.stalled_batch), 1, STALLED_COUNT_MAX)?
                    .min(RECLAIM_PER_CALL);
                let keep = self.cfg.keep_failed;
                // Leases whose deadline has passed, earliest first.
                let mut expired: Vec<(i64, Vec<u8>)> =
                    self.active.iter().filter(|(_, d)| **d < now).map(|(id, d)| (*d, id.clone())).collect();
                expired.sort();
                expired.truncate(count as usize);
                let before = self.finished_before(Finished::Failed);
                let (mut requeued, mut dead, mut added) = (vec![], vec![], vec![]);
                for (_, id) in expired {
                    self.active.remove(&id);
                    let stalls = {
                        let r = self.row(&id);
                        r.stalls += 1;
                        r.token = None;
                        r.stalls
                    };
                    ev.push(event("stalled", Some(&id), &[("stalls", n(stalls))]));
                    if stalls > max_stalls {
                        let made = {
                            let r = self.row(&id);
                            r.made += 1;
                            r.error = Some(b"stalled".to_vec());
                            r.finished = Some(now);
                            r.state = St::Failed;
                            r.made
                        };
                        if keep == 0 {
                            self.drop_row(&id);
                        } else {
                            self.failed.insert(id.clone(), now);
                            added.push(id.clone());
                        }
                        ev.push(event(
                            "failed",
                            Some(&id),
                            &[("error", b"stalled".to_vec()), ("attempt", n(made))],
                        ));
                        dead.push(Reply::Bulk(id));
                    } else {
                        self.ready(&id, true);
                        ev.push(event("waiting", Some(&id), &[("prev", b"active".to_vec())]));
                        requeued.push(Reply::Bulk(id));
                    }
                }
                self.retire(Finished::Failed, before, added, keep, true, None, now);
                Ok(Reply::Array(vec![Reply::Array(requeued), Reply::Array(dead)]))
            }
            Call::Progress { id, token, progress } => {
                gate(id)?;
                token_ok(token)?;
                if progress.len() > PROGRESS_MAX {
                    return Err("EMQARG");
                }
                if !self.rows.contains_key(id) {
                    return Err("EMQNOJOB");
                }
                if !self.held(id, token) {
                    return Err("EMQLEASE");
                }
                self.row(id).progress = Some(progress.clone());
                ev.push(event("progress", Some(id), &[]));
                Ok(Reply::Int(1))
            }
            Call::Log { id, token, line, keep } => {
                gate(id)?;
                token_ok(token)?;
                if line.len() > self.cfg.max_payload {
                    return Err("EMQARG");
                }
                let keep = within(keep.unwrap_or(self.cfg.log_keep), 1, LOG_KEEP_MAX)?;
                if !self.rows.contains_key(id) {
                    return Err("EMQNOJOB");
                }
                if !self.held(id, token) {
                    return Err("EMQLEASE");
                }
                let log = self.logs.entry(id.clone()).or_default();
                log.push(line.clone());
                let over = log.len().saturating_sub(keep as usize);
                log.drain(..over);
                Ok(Reply::Int(log.len() as i64))
            }
            Call::Remove { id, force } => {
                gate(id)?;
                let Some(r) = self.rows.get(id) else { return Ok(Reply::Int(0)) };
                let prev = r.state;
                if prev == St::Active && !force {
                    return Err("EMQSTATE");
                }
                self.unset(id);
                self.drop_row(id);
                ev.push(event("removed", Some(id), &[("prev", prev.word().as_bytes().to_vec())]));
                Ok(Reply::Int(1))
            }
            Call::Drain { delayed, count } => {
                let count = within(count.unwrap_or(DELETE_COUNT_DEFAULT), 1, DELETE_COUNT_MAX)? as usize;
                let mut doomed: Vec<Vec<u8>> = self.ordered(St::Wait);
                doomed.extend(self.ordered(St::Prio));
                if *delayed {
                    doomed.extend(self.ordered(St::Delayed));
                }
                doomed.truncate(count);
                for id in &doomed {
                    self.unset(id);
                    self.drop_row(id);
                }
                if !doomed.is_empty() {
                    ev.push(event("cleaned", None, &[("count", n(doomed.len() as i64))]));
                }
                Ok(Reply::Int(doomed.len() as i64))
            }
            Call::Clean { set, grace, count } => {
                let grace = within(*grace, 0, TIME_MAX)?;
                let count = within(count.unwrap_or(DELETE_COUNT_DEFAULT), 1, DELETE_COUNT_MAX)? as usize;
                let cutoff = now - grace;
                let finished = if *set == St::Completed { &self.completed } else { &self.failed };
                let mut old: Vec<(i64, Vec<u8>)> =
                    finished.iter().filter(|(_, f)| **f < cutoff).map(|(id, f)| (*f, id.clone())).collect();
                old.sort();
                old.truncate(count);
                for (_, id) in &old {
                    self.unset(id);
                    self.drop_row(id);
                }
                if !old.is_empty() {
                    ev.push(event("cleaned", None, &[("count", n(old.len() as i64))]));
                }
                Ok(Reply::Array(old.into_iter().map(|(_, id)| Reply::Bulk(id)).collect()))
            }
            Call::Obliterate { force, count } => {
                let mut budget = within(count.unwrap_or(DELETE_COUNT_DEFAULT), 1, DELETE_COUNT_MAX)? as usize;
                if !self.active.is_empty() && !force {
                    return Err("EMQSTATE");
                }
                // The rows first, from the sets in this order, at most COUNT.
                let mut doomed = Vec::new();
                for set in [St::Wait, St::Prio, St::Active, St::Delayed, St::Completed, St::Failed] {
                    let ids = self.ordered(set);
                    let take = ids.len().min(budget);
                    budget -= take;
                    doomed.extend(ids.into_iter().take(take));
                }
                for id in &doomed {
                    self.unset(id);
                    self.drop_row(id);
                }
                let sets = [St::Wait, St::Prio, St::Active, St::Delayed, St::Completed, St::Failed];
                let jobs_left: usize = sets.iter().map(|s| self.set_len(*s)).sum();
                // Then, once no job is left, the queue's own keys (a set is gone with its
                // last job; meta exists while paused; events once one was written).
                let mut keys_left = 0;
                if jobs_left == 0 {
                    for exists in [self.paused, self.events_exist].iter().enumerate() {
                        if !*exists.1 {
                            continue;
                        }
                        if budget > 0 {
                            budget -= 1;
                            if exists.0 == 0 {
                                self.paused = false;
                            } else {
                                self.events_exist = false;
                            }
                        } else {
                            keys_left += 1;
                        }
                    }
                } else {
                    keys_left = sets.iter().filter(|s| self.set_len(**s) > 0).count()
                        + usize::from(self.paused)
                        + usize::from(self.events_exist);
                }
                Ok(Reply::Int((jobs_left + keys_left) as i64))
            }
            Call::Job { id } => {
                gate(id)?;
                let Some(r) = self.rows.get(id) else { return Ok(Reply::Nil) };
                let int = Reply::Int;
                let opt_int = |v: Option<i64>| v.map_or(Reply::Nil, Reply::Int);
                let opt_bulk = |v: &Option<Vec<u8>>| v.clone().map_or(Reply::Nil, Reply::Bulk);
                let backoff = r.backoff.map_or(Reply::Nil, |b| {
                    Reply::Bulk(match b {
                        Backoff::Fixed(ms) => format!("FIXED {ms}").into_bytes(),
                        Backoff::Exp(ms) => format!("EXP {ms}").into_bytes(),
                    })
                });
                let score = |st: St, m: &BTreeMap<Vec<u8>, i64>| {
                    if r.state == st {
                        opt_int(m.get(id).copied())
                    } else {
                        Reply::Nil
                    }
                };
                let facts = [
                    ("id", Reply::Bulk(id.clone())),
                    ("state", Reply::Bulk(r.state.word().as_bytes().to_vec())),
                    ("name", Reply::Bulk(r.name.clone())),
                    ("data", Reply::Bulk(r.data.clone())),
                    ("opts", Reply::Nil),
                    ("priority", int(r.priority)),
                    ("attempts", int(r.attempts)),
                    ("backoff", backoff),
                    ("created", int(r.created)),
                    ("started", int(r.started)),
                    ("made", int(r.made)),
                    ("stalls", int(r.stalls)),
                    ("claimed", opt_int(r.claimed)),
                    ("deadline", score(St::Active, &self.active)),
                    ("due", score(St::Delayed, &self.delayed)),
                    ("expire", opt_int(r.expire)),
                    ("progress", opt_bulk(&r.progress)),
                    ("result", opt_bulk(&r.result)),
                    ("error", opt_bulk(&r.error)),
                    ("finished", opt_int(r.finished)),
                ];
                Ok(Reply::Array(
                    facts.into_iter().flat_map(|(k, v)| [Reply::Bulk(k.as_bytes().to_vec()), v]).collect(),
                ))
            }
            Call::Counts => {
                let mut out = Vec::new();
                for set in [St::Wait, St::Prio, St::Active, St::Delayed, St::Completed, St::Failed] {
                    out.extend([
                        Reply::Bulk(set.word().as_bytes().to_vec()),
                        Reply::Int(self.set_len(set) as i64),
                    ]);
                }
                out.extend([Reply::Bulk(b"paused".to_vec()), Reply::Int(i64::from(self.paused))]);
                Ok(Reply::Array(out))
            }
            Call::Completes { triples } => {
                if triples.is_empty() {
                    return Err("EMQSHAPE");
                }
                // The id gate first (every id argument), then the ranges.
                for (id, _, _) in triples {
                    gate(id)?;
                }
                if triples.len() > COMPLETES_MAX {
                    return Err("EMQARG");
                }
                for (_, t, r) in triples {
                    token_ok(t)?;
                    if r.len() > self.cfg.max_payload {
                        return Err("EMQARG");
                    }
                }
                let distinct: BTreeSet<&Vec<u8>> = triples.iter().map(|(id, _, _)| id).collect();
                if distinct.len() != triples.len() {
                    return Err("EMQARG");
                }
                // Each entry as COMPLETE would answer it; retention as COMPLETE without KEEP.
                let keep = self.cfg.keep_completed;
                let before = self.finished_before(Finished::Completed);
                let mut out = Vec::new();
                let mut added = Vec::new();
                for (id, token, result) in triples {
                    let Some(r) = self.rows.get(id) else {
                        out.push(Reply::Int(-2));
                        continue;
                    };
                    if !self.held(id, token) {
                        let repeat = r.state == St::Completed && r.token.as_deref() == Some(&token[..]);
                        out.push(Reply::Int(if repeat { 0 } else { -1 }));
                        continue;
                    }
                    self.active.remove(id);
                    let made = r.made + 1;
                    if keep == 0 {
                        self.drop_row(id);
                    } else {
                        let r = self.row(id);
                        r.state = St::Completed;
                        r.result = Some(result.clone());
                        r.finished = Some(now);
                        r.made = made;
                        self.completed.insert(id.clone(), now);
                        added.push(id.clone());
                    }
                    ev.push(event("completed", Some(id), &[("attempt", n(made))]));
                    out.push(Reply::Int(1));
                }
                if out.contains(&Reply::Int(1)) {
                    self.retire(Finished::Completed, before, added, keep, true, None, now);
                }
                Ok(Reply::Array(out))
            }
            Call::Jobs { set, from, count, rev } => {
                let from = within(from.unwrap_or(0), 0, TIME_MAX)?;
                let count = within(count.unwrap_or(100), 1, PAGE_MAX)?;
                let mut ids = self.ordered(*set);
                if *rev {
                    ids.reverse();
                }
                let total = ids.len() as i64;
                let page: Vec<Reply> =
                    ids.into_iter().skip(from as usize).take(count as usize).map(Reply::Bulk).collect();
                let end = from + page.len() as i64;
                let next = if end < total { end } else { -1 };
                Ok(Reply::Array(vec![Reply::Int(next), Reply::Array(page)]))
            }
        }
    }

    /// Whether a job met at `now` has expired: its EXPIRE time has come and no CLAIM ever took it.
    fn expired(&self, id: &[u8], now: i64) -> bool {
        self.rows.get(id).is_some_and(|r| !r.spent && r.expire.is_some_and(|x| now >= x))
    }

    /// One pass of CLAIM: due delayed jobs first (earliest due first, at most
    /// `promote-batch`), each ready at the back — or, expired, failed instead; then, unless
    /// paused, up to `want` ready jobs in serving order, the expired among them failed instead
    /// of handed out. Events: the promotions' `waiting`, then the expired jobs' `failed` (the
    /// promoted ones first, then those met in the ready sets), then the claims' `active`.
    /// Returns the reply rows and how many jobs expired.
    fn claim_pass(
        &mut self,
        token: &[u8],
        lease: i64,
        want: usize,
        now: i64,
        promote: bool,
        ev: &mut Vec<Event>,
    ) -> (Vec<Reply>, usize) {
        let mut due: Vec<(i64, Vec<u8>)> =
            self.delayed.iter().filter(|(_, d)| **d <= now).map(|(id, d)| (*d, id.clone())).collect();
        due.sort();
        due.truncate(if promote { self.cfg.promote_batch as usize } else { 0 });
        let mut expired = Vec::new();
        for (_, id) in due {
            self.delayed.remove(&id);
            if self.expired(&id, now) {
                expired.push(id);
            } else {
                self.ready(&id, false);
                ev.push(event("waiting", Some(&id), &[("prev", b"delayed".to_vec())]));
            }
        }
        let mut picked = Vec::new();
        if !self.paused {
            for _ in 0..want {
                let id = if let Some(id) = self.wait.pop_front() {
                    id
                } else if let Some((p, id)) = self.prio.iter().next().cloned() {
                    self.prio.remove(&(p, id.clone()));
                    id
                } else {
                    break;
                };
                if self.expired(&id, now) {
                    expired.push(id);
                } else {
                    picked.push(id);
                }
            }
        }
        if !expired.is_empty() {
            // Failed for good with `expired`, under keep-failed (a soft cap; 0 deletes them).
            let keep = self.cfg.keep_failed;
            let before = self.finished_before(Finished::Failed);
            let mut added = Vec::new();
            for id in &expired {
                let made = {
                    let r = self.row(id);
                    r.state = St::Failed;
                    r.error = Some(b"expired".to_vec());
                    r.finished = Some(now);
                    r.token = None;
                    r.made
                };
                if keep == 0 {
                    self.drop_row(id);
                } else {
                    self.failed.insert(id.clone(), now);
                    added.push(id.clone());
                }
                ev.push(event("failed", Some(id), &[("error", b"expired".to_vec()), ("attempt", n(made))]));
            }
            self.retire(Finished::Failed, before, added, keep, true, None, now);
        }
        let mut out = Vec::new();
        for id in picked {
            let r = self.row(&id);
            r.state = St::Active;
            r.token = Some(token.to_vec());
            r.started += 1;
            r.claimed = Some(now);
            r.spent = true;
            // The CLAIM deletes `x` from the row: EXPIRE is spent.
            r.expire = None;
            let attempt = r.made + 1;
            let (name, data) = (r.name.clone(), r.data.clone());
            self.active.insert(id.clone(), (now + lease).min(TIME_MAX));
            self.last_token.insert(id.clone(), token.to_vec());
            ev.push(event("active", Some(&id), &[("attempt", n(attempt))]));
            out.push(Reply::Array(vec![
                Reply::Bulk(id),
                Reply::Bulk(name),
                Reply::Bulk(data),
                Reply::Int(attempt),
            ]));
        }
        (out, expired.len())
    }

    fn create(&mut self, id: &[u8], j: &Checked, now: i64) {
        self.rows.insert(
            id.to_vec(),
            Row {
                state: St::Wait,
                name: j.name.clone(),
                data: j.data.clone(),
                priority: j.priority,
                attempts: j.attempts,
                backoff: j.backoff,
                created: now,
                token: None,
                started: 0,
                made: 0,
                stalls: 0,
                claimed: None,
                result: None,
                error: None,
                finished: None,
                progress: None,
                expire: j.expire,
                spent: false,
            },
        );
    }

    fn view(&self) -> View {
        let zset = |m: &BTreeMap<Vec<u8>, i64>| {
            let mut v: Vec<(i64, Vec<u8>)> = m.iter().map(|(id, s)| (*s, id.clone())).collect();
            v.sort();
            v.into_iter().map(|(s, id)| (id, s)).collect::<Vec<_>>()
        };
        View {
            wait: self.wait.iter().cloned().collect(),
            prio: self.prio.iter().map(|(p, id)| (id.clone(), *p)).collect(),
            active: zset(&self.active),
            delayed: zset(&self.delayed),
            completed: zset(&self.completed),
            failed: zset(&self.failed),
            paused: self.paused,
            rows: self
                .rows
                .iter()
                .map(|(id, r)| {
                    (
                        id.clone(),
                        RowView {
                            st: r.state.word().as_bytes().to_vec(),
                            name: r.name.clone(),
                            data: r.data.clone(),
                            priority: r.priority,
                            attempts: r.attempts,
                            created: r.created,
                            token: r.token.clone(),
                            started: r.started,
                            made: r.made,
                            stalls: r.stalls,
                            claimed: r.claimed,
                            result: r.result.clone(),
                            error: r.error.clone(),
                            finished: r.finished,
                            progress: r.progress.clone(),
                            expire: r.expire,
                        },
                    )
                })
                .collect(),
            logs: self
                .logs
                .iter()
                .filter(|(_, l)| !l.is_empty())
                .map(|(id, l)| (id.clone(), l.clone()))
                .collect(),
            meta_exists: self.paused,
            events_exist: self.events_exist,
        }
    }
}

// ---------------------------------------------------------------------------------------
// What the test compares: the queue as the model holds it and as the server holds it.

#[derive(Debug, PartialEq)]
struct RowView {
    st: Vec<u8>,
    name: Vec<u8>,
    data: Vec<u8>,
    priority: i64,
    attempts: i64,
    created: i64,
    token: Option<Vec<u8>>,
    started: i64,
    made: i64,
    stalls: i64,
    claimed: Option<i64>,
    result: Option<Vec<u8>>,
    error: Option<Vec<u8>>,
    finished: Option<i64>,
    progress: Option<Vec<u8>>,
    expire: Option<i64>,
}

#[derive(Debug, PartialEq)]
struct View {
    /// Each job's log lines, oldest first (only jobs that have a log).
    logs: BTreeMap<Vec<u8>, Vec<Vec<u8>>>,
    /// Whether `meta` and `events` exist (OBLITERATE deletes them).
    meta_exists: bool,
    events_exist: bool,
    /// Claim order (the list's right end first).
    wait: Vec<Vec<u8>>,
    /// (member, score) in the set's order.
    prio: Vec<(Vec<u8>, i64)>,
    active: Vec<(Vec<u8>, i64)>,
    delayed: Vec<(Vec<u8>, i64)>,
    completed: Vec<(Vec<u8>, i64)>,
    failed: Vec<(Vec<u8>, i64)>,
    paused: bool,
    rows: BTreeMap<Vec<u8>, RowView>,
}

fn cmd(parts: &[&[u8]]) -> Vec<Vec<u8>> {
    parts.iter().map(|p| p.to_vec()).collect()
}

fn bulk(r: &Reply) -> Result<Vec<u8>, String> {
    match r {
        Reply::Bulk(b) => Ok(b.clone()),
        Reply::Simple(s) => Ok(s.clone().into_bytes()),
        other => Err(format!("expected a string, got {other:?}")),
    }
}

fn arr(r: &Reply) -> Result<&[Reply], String> {
    match r {
        Reply::Array(a) => Ok(a),
        other => Err(format!("expected an array, got {other:?}")),
    }
}

fn int_of(b: &[u8]) -> Result<i64, String> {
    std::str::from_utf8(b)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("not an integer: {}", show(b)))
}

fn score_of(b: &[u8]) -> Result<i64, String> {
    let f: f64 = std::str::from_utf8(b)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("not a score: {}", show(b)))?;
    if f.fract() != 0.0 {
        return Err(format!("a fractional score {f}"));
    }
    Ok(f as i64)
}

/// The server's queue, plus the events appended since `last_event`.
fn read_view(
    c: &mut Conn,
    q: &Q,
    pool: usize,
    last_event: &mut Vec<u8>,
) -> Result<(View, Vec<Event>), String> {
    let mut cmds = vec![cmd(&[b"LRANGE", q.k("wait").as_bytes(), b"0", b"-1"])];
    for z in ["prio", "active", "delayed", "completed", "failed"] {
        cmds.push(cmd(&[b"ZRANGE", q.k(z).as_bytes(), b"0", b"-1", b"WITHSCORES"]));
    }
    cmds.push(cmd(&[b"HEXISTS", q.k("meta").as_bytes(), b"paused"]));
    for i in 0..pool {
        let mut k = format!("emq:{{{}}}:job:", q.0).into_bytes();
        k.extend(pool_id(i));
        cmds.push(vec![b"HGETALL".to_vec(), k]);
    }
    let mut start = b"(".to_vec();
    start.extend_from_slice(last_event);
    cmds.push(vec![b"XRANGE".to_vec(), q.k("events").into_bytes(), start, b"+".to_vec()]);
    for i in 0..pool {
        let mut k = format!("emq:{{{}}}:log:", q.0).into_bytes();
        k.extend(pool_id(i));
        cmds.push(vec![b"LRANGE".to_vec(), k, b"0".to_vec(), b"-1".to_vec()]);
    }
    cmds.push(cmd(&[b"EXISTS", q.k("meta").as_bytes()]));
    cmds.push(cmd(&[b"EXISTS", q.k("events").as_bytes()]));
    let r = c.pipeline(&cmds);
    let mut wait: Vec<Vec<u8>> = arr(&r[0])?.iter().map(bulk).collect::<Result<_, _>>()?;
    wait.reverse();
    let mut zs = Vec::new();
    for reply in &r[1..6] {
        let flat = arr(reply)?;
        let mut v = Vec::new();
        for p in flat.chunks(2) {
            v.push((bulk(&p[0])?, score_of(&bulk(&p[1])?)?));
        }
        zs.push(v);
    }
    let paused = r[6] == Reply::Int(1);
    let mut rows = BTreeMap::new();
    for i in 0..pool {
        let flat = arr(&r[7 + i])?;
        if flat.is_empty() {
            continue;
        }
        let mut f: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        for p in flat.chunks(2) {
            f.insert(String::from_utf8_lossy(&bulk(&p[0])?).into_owned(), bulk(&p[1])?);
        }
        let int = |k: &str, d: i64| -> Result<i64, String> { f.get(k).map_or(Ok(d), |v| int_of(v)) };
        let opt_int = |k: &str| -> Result<Option<i64>, String> { f.get(k).map(|v| int_of(v)).transpose() };
        rows.insert(
            pool_id(i),
            RowView {
                st: f.get("st").cloned().unwrap_or_default(),
                name: f.get("n").cloned().unwrap_or_default(),
                data: f.get("d").cloned().unwrap_or_default(),
                priority: int("p", 0)?,
                attempts: int("a", 1)?,
                created: int("c", -1)?,
                token: f.get("tk").cloned(),
                started: int("as", 0)?,
                made: int("am", 0)?,
                stalls: int("sc", 0)?,
                claimed: opt_int("ca")?,
                result: f.get("r").cloned(),
                error: f.get("e").cloned(),
                finished: opt_int("f")?,
                progress: f.get("g").cloned(),
                expire: opt_int("x")?,
            },
        );
    }
    let mut logs = BTreeMap::new();
    for i in 0..pool {
        let lines: Vec<Vec<u8>> = arr(&r[8 + pool + i])?.iter().map(bulk).collect::<Result<_, _>>()?;
        if !lines.is_empty() {
            logs.insert(pool_id(i), lines);
        }
    }
    let meta_exists = r[8 + 2 * pool] == Reply::Int(1);
    let events_exist = r[9 + 2 * pool] == Reply::Int(1);
    let mut events = Vec::new();
    for e in arr(&r[7 + pool])? {
        let e = arr(e)?;
        *last_event = bulk(&e[0])?;
        events.push(arr(&e[1])?.iter().map(bulk).collect::<Result<Vec<_>, _>>()?);
    }
    if !events_exist {
        // OBLITERATE deleted the stream: the next one starts afresh (its ids may be lower).
        *last_event = b"0-0".to_vec();
    }
    let mut zs = zs.into_iter();
    let mut next = || zs.next().unwrap_or_default();
    let view = View {
        wait,
        prio: next(),
        active: next(),
        delayed: next(),
        completed: next(),
        failed: next(),
        paused,
        rows,
        logs,
        meta_exists,
        events_exist,
    };
    Ok((view, events))
}

fn same_reply(exp: &Reply, got: &Reply) -> bool {
    match (exp, got) {
        (Reply::Error(class), Reply::Error(text)) => text.split(' ').next() == Some(class.as_str()),
        _ => *exp == flat(got),
    }
}

/// A reply as RESP2 shows it: maps as flat pairs (TRA.JOB, TRA.COUNTS over RESP3).
fn flat(r: &Reply) -> Reply {
    match r {
        Reply::Map(pairs) => Reply::Array(pairs.iter().flat_map(|(k, v)| [flat(k), flat(v)]).collect()),
        Reply::Array(a) => Reply::Array(a.iter().map(flat).collect()),
        other => other.clone(),
    }
}

/// The invariant, read off the server's own view: every job id in at most one state set,
/// its row's `st` naming that set, a row iff the job is in a set, and no log without its row.
fn invariant(s: &View) -> Option<String> {
    let mut seen: BTreeMap<&Vec<u8>, &str> = BTreeMap::new();
    let sets: [(&str, Vec<&Vec<u8>>); 6] = [
        ("wait", s.wait.iter().collect()),
        ("prio", s.prio.iter().map(|(id, _)| id).collect()),
        ("active", s.active.iter().map(|(id, _)| id).collect()),
        ("delayed", s.delayed.iter().map(|(id, _)| id).collect()),
        ("completed", s.completed.iter().map(|(id, _)| id).collect()),
        ("failed", s.failed.iter().map(|(id, _)| id).collect()),
    ];
    for (name, ids) in &sets {
        for id in ids {
            if let Some(other) = seen.insert(id, name) {
                return Some(format!("{} is in {name} and in {other}", show(id)));
            }
            match s.rows.get(*id) {
                None => return Some(format!("{} is in {name} but has no row", show(id))),
                Some(r) if r.st != name.as_bytes() => {
                    return Some(format!("{} is in {name} but its row says {}", show(id), show(&r.st)))
                }
                _ => {}
            }
        }
    }
    if let Some(id) = s.rows.keys().find(|id| !seen.contains_key(id)) {
        return Some(format!("the row of {} is in no state set", show(id)));
    }
    if let Some(id) = s.logs.keys().find(|id| !s.rows.contains_key(*id)) {
        return Some(format!("the log of {} outlived its row", show(id)));
    }
    None
}

/// Where the model's step and the server's differ; None when they agree.
fn differences(
    exp: &Reply,
    got: &Reply,
    exp_ev: &[Event],
    got_ev: &[Event],
    m: &View,
    s: &View,
) -> Option<String> {
    let mut d = String::new();
    if !same_reply(exp, got) {
        let _ = writeln!(d, "  reply: model {} / server {}", show_reply(exp), show_reply(got));
    }
    if exp_ev != got_ev {
        let _ = writeln!(d, "  events: model {} / server {}", show_events(exp_ev), show_events(got_ev));
    }
    let sets: [(&str, String, String); 9] = [
        ("wait (claim order)", show_ids(&m.wait), show_ids(&s.wait)),
        ("prio", show_scored(&m.prio), show_scored(&s.prio)),
        ("active", show_scored(&m.active), show_scored(&s.active)),
        ("delayed", show_scored(&m.delayed), show_scored(&s.delayed)),
        ("completed", show_scored(&m.completed), show_scored(&s.completed)),
        ("failed", show_scored(&m.failed), show_scored(&s.failed)),
        ("paused", m.paused.to_string(), s.paused.to_string()),
        ("meta exists", m.meta_exists.to_string(), s.meta_exists.to_string()),
        ("events exist", m.events_exist.to_string(), s.events_exist.to_string()),
    ];
    for (name, a, b) in sets {
        if a != b {
            let _ = writeln!(d, "  {name}: model {a} / server {b}");
        }
    }
    let logs: BTreeSet<&Vec<u8>> = m.logs.keys().chain(s.logs.keys()).collect();
    for id in logs {
        let (a, b) = (m.logs.get(id), s.logs.get(id));
        if a != b {
            let _ = writeln!(
                d,
                "  log of {}: model {:?} / server {:?}",
                show(id),
                a.map(|l| show_ids(l)),
                b.map(|l| show_ids(l))
            );
        }
    }
    let ids: BTreeSet<&Vec<u8>> = m.rows.keys().chain(s.rows.keys()).collect();
    for id in ids {
        let (a, b) = (m.rows.get(id), s.rows.get(id));
        if a != b {
            let _ = writeln!(
                d,
                "  row {}:\n    model  {:?}\n    server {:?}",
                show(id),
                a.map(RowShow),
                b.map(RowShow)
            );
        }
    }
    (!d.is_empty()).then_some(d)
}

struct RowShow<'a>(&'a RowView);
impl std::fmt::Debug for RowShow<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let r = self.0;
        let o = |v: &Option<Vec<u8>>| v.as_ref().map_or("-".to_string(), |b| show(b));
        let oi = |v: &Option<i64>| v.map_or("-".to_string(), |i| i.to_string());
        write!(
            f,
            "st={} n={} d={} p={} a={} c={} tk={} as={} am={} sc={} ca={} r={} e={} f={} g={} x={}",
            show(&r.st),
            show(&r.name),
            show(&r.data),
            r.priority,
            r.attempts,
            r.created,
            o(&r.token),
            r.started,
            r.made,
            r.stalls,
            oi(&r.claimed),
            o(&r.result),
            o(&r.error),
            oi(&r.finished),
            o(&r.progress),
            oi(&r.expire)
        )
    }
}

// ---------------------------------------------------------------------------------------
// Printing.

fn show(b: &[u8]) -> String {
    if b.len() > 40 && b.iter().all(|&c| c == b[0]) {
        return format!("{}×{}", show(&b[..1]), b.len());
    }
    escape(b)
}

fn show_ids(v: &[Vec<u8>]) -> String {
    format!("[{}]", v.iter().map(|i| show(i)).collect::<Vec<_>>().join(" "))
}

fn show_scored(v: &[(Vec<u8>, i64)]) -> String {
    format!("[{}]", v.iter().map(|(i, s)| format!("{}@{s}", show(i))).collect::<Vec<_>>().join(" "))
}

fn show_events(v: &[Event]) -> String {
    format!(
        "[{}]",
        v.iter()
            .map(|e| e.iter().map(|p| show(p)).collect::<Vec<_>>().join(" "))
            .collect::<Vec<_>>()
            .join(" | ")
    )
}

fn show_reply(r: &Reply) -> String {
    match r {
        Reply::Int(i) => i.to_string(),
        Reply::Bulk(b) => show(b),
        Reply::Simple(s) => format!("+{s}"),
        Reply::Error(e) => format!("(error {e})"),
        Reply::Nil => "nil".into(),
        Reply::Array(a) => format!("[{}]", a.iter().map(show_reply).collect::<Vec<_>>().join(" ")),
        other => format!("{other:?}"),
    }
}

fn show_argv(v: &[Vec<u8>]) -> String {
    v.iter().map(|a| show(a)).collect::<Vec<_>>().join(" ")
}

// ---------------------------------------------------------------------------------------
// Generated steps: symbolic choices, resolved against the model and the clock when run.

#[derive(Clone, Debug)]
enum IdC {
    Pool(usize),
    Bad(usize),
    /// The k-th (mod n) job the model has in active, else `Pool(k)`.
    Active(usize),
    /// The k-th job in delayed, else `Pool(k)`.
    Delayed(usize),
    /// The k-th job in completed or failed, else `Pool(k)`.
    Finished(usize),
}

#[derive(Clone, Debug)]
enum TokC {
    /// The token the row carries now (the holder's, or the completer's), else `w1`.
    Holder,
    /// The token of the job's last claim, cleared or not.
    Last,
    Pool(usize),
    Empty,
    /// 129 bytes.
    Long,
}

#[derive(Clone, Debug)]
enum ClaimTok {
    /// A token never used before.
    Fresh,
    Pool(usize),
    Empty,
    Long,
}

#[derive(Clone, Debug)]
enum WhenC {
    /// `+ms`.
    In(i64),
    /// Absolute: this many ms before the clock read just before the step.
    Ago(i64),
    /// Absolute: this many ms after it.
    Ahead(i64),
    /// Absolute, literally.
    Abs(i64),
}

/// Bytes that print as escaped text in a failing sequence.
#[derive(Clone)]
struct B(Vec<u8>);
impl std::fmt::Debug for B {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&show(&self.0))
    }
}

#[derive(Clone, Debug)]
struct JobC {
    name: B,
    data: B,
    priority: Option<i64>,
    attempts: Option<i64>,
    backoff: Option<Backoff>,
    expire: Option<WhenC>,
}

/// Which job one TRA.COMPLETES entry names.
#[derive(Clone, Debug)]
enum EntryId {
    /// The next held job this call has not named yet, else the next pool id it has not
    /// named (distinct ids: the call is not refused for a repeat).
    Next,
    /// Any choice, so an id may come twice.
    Any(IdC),
}

/// One TRA.COMPLETES entry: which job, which token, the result.
type Entry = (EntryId, TokC, B);

#[derive(Clone, Debug)]
enum Op {
    Enqueue {
        id: IdC,
        job: JobC,
        lifo: bool,
        lc: bool,
    },
    Schedule {
        id: IdC,
        when: WhenC,
        job: JobC,
        lc: bool,
    },
    Claim {
        tok: ClaimTok,
        lease: i64,
        count: Option<i64>,
        lc: bool,
    },
    Pause(bool, bool),
    Extend {
        id: IdC,
        tok: TokC,
        lease: i64,
    },
    Extends {
        lease: i64,
        pairs: Vec<(IdC, TokC)>,
    },
    Complete {
        id: IdC,
        tok: TokC,
        result: B,
        keep: Option<i64>,
        age: Option<i64>,
        lc: bool,
    },
    Promote {
        id: IdC,
    },
    Reschedule {
        id: IdC,
        when: WhenC,
    },
    Delay {
        id: IdC,
        tok: TokC,
        when: WhenC,
    },
    Fail {
        id: IdC,
        tok: TokC,
        error: B,
        keep: Option<i64>,
        age: Option<i64>,
        final_: bool,
        lc: bool,
    },
    Reprocess {
        id: IdC,
    },
    Requeue {
        id: IdC,
        tok: TokC,
    },
    Stalled {
        max_stalls: Option<i64>,
        count: Option<i64>,
        lc: bool,
    },
    Progress {
        id: IdC,
        tok: TokC,
        progress: B,
    },
    Log {
        id: IdC,
        tok: TokC,
        line: B,
        keep: Option<i64>,
    },
    Remove {
        id: IdC,
        force: bool,
    },
    Drain {
        delayed: bool,
        count: Option<i64>,
        lc: bool,
    },
    Clean {
        failed: bool,
        grace: i64,
        count: Option<i64>,
    },
    Obliterate {
        force: bool,
        count: Option<i64>,
    },
    Job {
        id: IdC,
    },
    Counts,
    Jobs {
        set: usize,
        from: Option<i64>,
        count: Option<i64>,
        rev: bool,
        lc: bool,
    },
    /// TRA.COMPLETES; `fill`: padded with entries for jobs that do not exist (distinct ids
    /// outside the pool) to this many entries (100 is the most one call takes).
    Completes {
        entries: Vec<Entry>,
        fill: Option<usize>,
    },
    /// Real waiting, ms.
    Sleep(u64),
}

struct Resolver<'a> {
    m: &'a Model,
    pool: usize,
    clock: i64,
    fresh: &'a mut u64,
}

impl Resolver<'_> {
    fn id(&self, c: &IdC) -> Vec<u8> {
        let pick = |ids: Vec<&Vec<u8>>, k: usize| {
            if ids.is_empty() {
                pool_id(k % self.pool)
            } else {
                ids[k % ids.len()].clone()
            }
        };
        match c {
            IdC::Pool(i) => pool_id(*i % self.pool),
            IdC::Bad(i) => BAD_IDS[*i].to_vec(),
            IdC::Active(k) => pick(self.m.active.keys().collect(), *k),
            IdC::Delayed(k) => pick(self.m.delayed.keys().collect(), *k),
            IdC::Finished(k) => pick(self.m.completed.keys().chain(self.m.failed.keys()).collect(), *k),
        }
    }
    fn tok(&self, c: &TokC, id: &[u8]) -> Vec<u8> {
        match c {
            TokC::Holder => {
                self.m.rows.get(id).and_then(|r| r.token.clone()).unwrap_or_else(|| TOKENS[0].to_vec())
            }
            TokC::Last => self.m.last_token.get(id).cloned().unwrap_or_else(|| TOKENS[0].to_vec()),
            TokC::Pool(i) => TOKENS[*i].to_vec(),
            TokC::Empty => vec![],
            TokC::Long => vec![b't'; TOKEN_MAX + 1],
        }
    }
    fn when(&self, c: &WhenC) -> WhenArg {
        match c {
            WhenC::In(d) => WhenArg::In(*d),
            WhenC::Ago(d) => WhenArg::At(self.clock - d),
            WhenC::Ahead(d) => WhenArg::At(self.clock + d),
            WhenC::Abs(t) => WhenArg::At(*t),
        }
    }
    fn job(&self, j: &JobC) -> NewJob {
        NewJob {
            name: j.name.0.clone(),
            data: j.data.0.clone(),
            priority: j.priority,
            attempts: j.attempts,
            backoff: j.backoff,
            expire: j.expire.as_ref().map(|w| self.when(w)),
        }
    }

    /// The concrete call, and whether option words go in lower case.
    fn call(&mut self, op: &Op) -> (Call, bool) {
        match op {
            Op::Enqueue { id, job, lifo, lc } => {
                (Call::Enqueue { id: self.id(id), job: self.job(job), lifo: *lifo }, *lc)
            }
            Op::Schedule { id, when, job, lc } => {
                (Call::Schedule { id: self.id(id), when: self.when(when), job: self.job(job) }, *lc)
            }
            Op::Claim { tok, lease, count, lc } => {
                let token = match tok {
                    ClaimTok::Fresh => {
                        *self.fresh += 1;
                        format!("c{}", self.fresh).into_bytes()
                    }
                    ClaimTok::Pool(i) => TOKENS[*i].to_vec(),
                    ClaimTok::Empty => vec![],
                    ClaimTok::Long => vec![b't'; TOKEN_MAX + 1],
                };
                (Call::Claim { token, lease: *lease, count: *count }, *lc)
            }
            Op::Pause(on, lc) => (Call::Pause(*on), *lc),
            Op::Extend { id, tok, lease } => {
                let id = self.id(id);
                (Call::Extend { token: self.tok(tok, &id), id, lease: *lease }, false)
            }
            Op::Extends { lease, pairs } => {
                let pairs = pairs
                    .iter()
                    .map(|(i, t)| {
                        let id = self.id(i);
                        (id.clone(), self.tok(t, &id))
                    })
                    .collect();
                (Call::Extends { lease: *lease, pairs }, false)
            }
            Op::Complete { id, tok, result, keep, age, lc } => {
                let id = self.id(id);
                (
                    Call::Complete {
                        token: self.tok(tok, &id),
                        id,
                        result: result.0.clone(),
                        keep: *keep,
                        age: *age,
                    },
                    *lc,
                )
            }
            Op::Promote { id } => (Call::Promote { id: self.id(id) }, false),
            Op::Reschedule { id, when } => {
                (Call::Reschedule { id: self.id(id), when: self.when(when) }, false)
            }
            Op::Delay { id, tok, when } => {
                let id = self.id(id);
                (Call::Delay { token: self.tok(tok, &id), id, when: self.when(when) }, false)
            }
            Op::Fail { id, tok, error, keep, age, final_, lc } => {
                let id = self.id(id);
                (
                    Call::Fail {
                        token: self.tok(tok, &id),
                        id,
                        error: error.0.clone(),
                        keep: *keep,
                        age: *age,
                        final_: *final_,
                    },
                    *lc,
                )
            }
            Op::Reprocess { id } => (Call::Reprocess { id: self.id(id) }, false),
            Op::Requeue { id, tok } => {
                let id = self.id(id);
                (Call::Requeue { token: self.tok(tok, &id), id }, false)
            }
            Op::Stalled { max_stalls, count, lc } => {
                (Call::Stalled { max_stalls: *max_stalls, count: *count }, *lc)
            }
            Op::Progress { id, tok, progress } => {
                let id = self.id(id);
                (Call::Progress { token: self.tok(tok, &id), id, progress: progress.0.clone() }, false)
            }
            Op::Log { id, tok, line, keep } => {
                let id = self.id(id);
                (Call::Log { token: self.tok(tok, &id), id, line: line.0.clone(), keep: *keep }, false)
            }
            Op::Remove { id, force } => (Call::Remove { id: self.id(id), force: *force }, false),
            Op::Drain { delayed, count, lc } => (Call::Drain { delayed: *delayed, count: *count }, *lc),
            Op::Clean { failed, grace, count } => (
                Call::Clean {
                    set: if *failed { St::Failed } else { St::Completed },
                    grace: *grace,
                    count: *count,
                },
                false,
            ),
            Op::Obliterate { force, count } => (Call::Obliterate { force: *force, count: *count }, false),
            Op::Job { id } => (Call::Job { id: self.id(id) }, false),
            Op::Counts => (Call::Counts, false),
            Op::Jobs { set, from, count, rev, lc } => {
                let sets = [St::Wait, St::Prio, St::Active, St::Delayed, St::Completed, St::Failed];
                (Call::Jobs { set: sets[*set % 6], from: *from, count: *count, rev: *rev }, *lc)
            }
            Op::Completes { entries, fill } => {
                // The explicit choices first (two of them may name one job: refused), then
                // each `Next` a job none of the others names.
                let chosen: Vec<Option<Vec<u8>>> = entries
                    .iter()
                    .map(|(e, _, _)| match e {
                        EntryId::Any(c) => Some(self.id(c)),
                        EntryId::Next => None,
                    })
                    .collect();
                let mut named: BTreeSet<Vec<u8>> = chosen.iter().flatten().cloned().collect();
                let mut held: Vec<Vec<u8>> = self.m.active.keys().cloned().collect();
                let mut triples = Vec::new();
                for ((_, t, r), c) in entries.iter().zip(chosen) {
                    let id = c.unwrap_or_else(|| {
                        held.retain(|h| !named.contains(h));
                        let spare = (0..self.pool).map(pool_id).find(|p| !named.contains(p));
                        if held.is_empty() {
                            spare.unwrap_or_else(|| pool_id(0))
                        } else {
                            held.remove(0)
                        }
                    });
                    named.insert(id.clone());
                    triples.push((id.clone(), self.tok(t, &id), r.0.clone()));
                }
                let mut k = 0u64;
                while fill.is_some_and(|f| triples.len() < f) {
                    triples.push((jid(900_000 + k).into_bytes(), TOKENS[0].to_vec(), b"ok".to_vec()));
                    k += 1;
                }
                (Call::Completes { triples }, false)
            }
            Op::Sleep(_) => unreachable!("sleeps are not calls"),
        }
    }
}

fn weighted<T: std::fmt::Debug + 'static>(arms: Vec<(u32, BoxedStrategy<T>)>) -> BoxedStrategy<T> {
    Union::new_weighted(arms).boxed()
}

fn id_c() -> BoxedStrategy<IdC> {
    weighted(vec![
        (40, (0..POOL_MAX).prop_map(IdC::Pool).boxed()),
        (1, (0..BAD_IDS.len()).prop_map(IdC::Bad).boxed()),
    ])
}

/// An id for a verb that wants a job in some state: mostly one that is, sometimes any.
fn id_in(state: fn(usize) -> IdC) -> BoxedStrategy<IdC> {
    weighted(vec![
        (30, (0..8usize).prop_map(state).boxed()),
        (12, (0..POOL_MAX).prop_map(IdC::Pool).boxed()),
        (1, (0..BAD_IDS.len()).prop_map(IdC::Bad).boxed()),
    ])
}

fn held_id() -> BoxedStrategy<IdC> {
    id_in(IdC::Active)
}

fn tok_c() -> BoxedStrategy<TokC> {
    weighted(vec![
        (60, Just(TokC::Holder).boxed()),
        (3, Just(TokC::Last).boxed()),
        (3, (0..TOKENS.len()).prop_map(TokC::Pool).boxed()),
        (1, Just(TokC::Empty).boxed()),
        (1, Just(TokC::Long).boxed()),
    ])
}

fn claim_tok() -> BoxedStrategy<ClaimTok> {
    weighted(vec![
        (40, Just(ClaimTok::Fresh).boxed()),
        (10, (0..TOKENS.len()).prop_map(ClaimTok::Pool).boxed()),
        (1, Just(ClaimTok::Empty).boxed()),
        (1, Just(ClaimTok::Long).boxed()),
    ])
}

fn lease() -> BoxedStrategy<i64> {
    weighted(vec![
        (30, (1i64..=5).boxed()),
        (10, (6i64..=20).boxed()),
        (25, Just(60_000i64).boxed()),
        (1, Just(0i64).boxed()),
        (1, Just(LEASE_MAX).boxed()),
        (1, Just(LEASE_MAX + 1).boxed()),
    ])
}

fn when_c() -> BoxedStrategy<WhenC> {
    weighted(vec![
        (12, (0i64..=20).prop_map(WhenC::In).boxed()),
        (8, Just(WhenC::In(60_000)).boxed()),
        (8, (1i64..=100_000).prop_map(WhenC::Ago).boxed()),
        (8, (0i64..=20).prop_map(WhenC::Ahead).boxed()),
        (5, Just(WhenC::Ahead(60_000)).boxed()),
        (1, Just(WhenC::Abs(0)).boxed()),
        (1, Just(WhenC::Abs(TIME_MAX)).boxed()),
        (1, Just(WhenC::Abs(TIME_MAX + 1)).boxed()),
        (1, Just(WhenC::In(TIME_MAX + 1)).boxed()),
    ])
}

fn job_c() -> BoxedStrategy<JobC> {
    let name = weighted(vec![
        (40, Just(b"alpha".to_vec()).boxed()),
        (20, Just(b"b".to_vec()).boxed()),
        (1, Just(vec![b'n'; NAME_MAX]).boxed()),
        (1, Just(vec![]).boxed()),
        (1, Just(vec![b'n'; NAME_MAX + 1]).boxed()),
    ]);
    let data = weighted(vec![
        (6, Just(b"{}".to_vec()).boxed()),
        (2, Just(vec![]).boxed()),
        (2, Just(b"\x00\xff\r\n data".to_vec()).boxed()),
    ]);
    let priority = weighted(vec![
        (40, Just(None).boxed()),
        (10, Just(Some(0i64)).boxed()),
        (30, (1i64..=3).prop_map(Some).boxed()),
        (1, Just(Some(PRIORITY_MAX)).boxed()),
        (1, Just(Some(PRIORITY_MAX + 1)).boxed()),
        (1, Just(Some(-1i64)).boxed()),
    ]);
    let attempts = weighted(vec![
        (30, Just(None).boxed()),
        (30, (1i64..=3).prop_map(Some).boxed()),
        (1, Just(Some(ATTEMPTS_MAX)).boxed()),
        (1, Just(Some(0i64)).boxed()),
        (1, Just(Some(ATTEMPTS_MAX + 1)).boxed()),
    ]);
    let backoff = weighted(vec![
        (40, Just(None).boxed()),
        (12, (0i64..=20).prop_map(|d| Some(Backoff::Fixed(d))).boxed()),
        (3, Just(Some(Backoff::Fixed(60_000))).boxed()),
        (12, (0i64..=10).prop_map(|d| Some(Backoff::Exp(d))).boxed()),
        (1, Just(Some(Backoff::Exp(BACKOFF_MAX))).boxed()),
        (1, Just(Some(Backoff::Fixed(BACKOFF_MAX + 1))).boxed()),
        (1, Just(Some(Backoff::Exp(-1))).boxed()),
    ]);
    // EXPIRE: mostly none; else past (expired from the start), +0, a few ms ahead (expires
    // during the sequence, often before a CLAIM), far ahead, and the range's edges.
    let expire = weighted(vec![
        (44, Just(None).boxed()),
        (4, (1i64..=100_000).prop_map(|d| Some(WhenC::Ago(d))).boxed()),
        (2, Just(Some(WhenC::In(0))).boxed()),
        (6, (1i64..=20).prop_map(|d| Some(WhenC::In(d))).boxed()),
        (4, (0i64..=20).prop_map(|d| Some(WhenC::Ahead(d))).boxed()),
        (3, Just(Some(WhenC::In(60_000))).boxed()),
        (1, Just(Some(WhenC::Ahead(60_000))).boxed()),
        (1, Just(Some(WhenC::Abs(0))).boxed()),
        (1, Just(Some(WhenC::Abs(TIME_MAX))).boxed()),
        (1, Just(Some(WhenC::Abs(TIME_MAX + 1))).boxed()),
        (1, Just(Some(WhenC::In(TIME_MAX + 1))).boxed()),
    ]);
    (name, data, priority, attempts, backoff, expire)
        .prop_map(|(name, data, priority, attempts, backoff, expire)| JobC {
            name: B(name),
            data: B(data),
            priority,
            attempts,
            backoff,
            expire,
        })
        .boxed()
}

fn keep() -> BoxedStrategy<Option<i64>> {
    weighted(vec![
        (30, Just(None).boxed()),
        (6, Just(Some(-1i64)).boxed()),
        (6, Just(Some(0i64)).boxed()),
        (12, (1i64..=3).prop_map(Some).boxed()),
        (1, Just(Some(-2i64)).boxed()),
    ])
}

fn age() -> BoxedStrategy<Option<i64>> {
    weighted(vec![
        (50, Just(None).boxed()),
        (3, Just(Some(0i64)).boxed()),
        (6, (1i64..=200).prop_map(Some).boxed()),
        (1, Just(Some(TIME_MAX + 1)).boxed()),
        (1, Just(Some(-1i64)).boxed()),
    ])
}

fn lc() -> BoxedStrategy<bool> {
    prop::bool::weighted(0.2).boxed()
}

/// The ops of one case. `crashy` cases model workers that mostly die: the holder verbs are
/// rare, so leases pile up, expire together, and STALLED reclaims (and fails) several at once.
fn op(crashy: bool) -> BoxedStrategy<Op> {
    let h = |w: u32| if crashy { (w / 4).max(1) } else { w };
    let count = weighted(vec![
        (30, Just(None).boxed()),
        (24, (1i64..=3).prop_map(Some).boxed()),
        (2, Just(Some(CLAIM_COUNT_MAX)).boxed()),
        (1, Just(Some(0i64)).boxed()),
        (1, Just(Some(CLAIM_COUNT_MAX + 1)).boxed()),
    ]);
    let result = weighted(vec![
        (8, Just(b"ok".to_vec()).boxed()),
        (1, Just(vec![]).boxed()),
        (1, Just(b"\x00\xfe bin".to_vec()).boxed()),
    ]);
    let error = weighted(vec![
        (8, Just(b"boom".to_vec()).boxed()),
        (1, Just(vec![]).boxed()),
        (1, Just(b"\xc3\xa9 \x00".to_vec()).boxed()),
    ]);
    let max_stalls = weighted(vec![
        (24, Just(None).boxed()),
        (16, (0i64..=2).prop_map(Some).boxed()),
        (1, Just(Some(MAX_STALLS_MAX + 1)).boxed()),
        (1, Just(Some(-1i64)).boxed()),
    ]);
    let s_count = weighted(vec![
        (24, Just(None).boxed()),
        (16, (1i64..=2).prop_map(Some).boxed()),
        (1, Just(Some(0i64)).boxed()),
        (1, Just(Some(STALLED_COUNT_MAX + 1)).boxed()),
    ]);
    weighted(vec![
        (
            16,
            (id_c(), job_c(), prop::bool::weighted(0.2), lc())
                .prop_map(|(id, job, lifo, lc)| Op::Enqueue { id, job, lifo, lc })
                .boxed(),
        ),
        (
            6,
            (id_c(), when_c(), job_c(), lc())
                .prop_map(|(id, when, job, lc)| Op::Schedule { id, when, job, lc })
                .boxed(),
        ),
        (
            14,
            (claim_tok(), lease(), count, lc())
                .prop_map(|(tok, lease, count, lc)| Op::Claim { tok, lease, count, lc })
                .boxed(),
        ),
        (1, lc().prop_map(|lc| Op::Pause(true, lc)).boxed()),
        (2, lc().prop_map(|lc| Op::Pause(false, lc)).boxed()),
        (
            h(4),
            (held_id(), tok_c(), lease()).prop_map(|(id, tok, lease)| Op::Extend { id, tok, lease }).boxed(),
        ),
        (
            h(3),
            (lease(), prop::collection::vec((held_id(), tok_c()), 1..=3))
                .prop_map(|(lease, pairs)| Op::Extends { lease, pairs })
                .boxed(),
        ),
        (
            h(9),
            (held_id(), tok_c(), result, keep(), age(), lc())
                .prop_map(|(id, tok, result, keep, age, lc)| Op::Complete {
                    id,
                    tok,
                    result: B(result),
                    keep,
                    age,
                    lc,
                })
                .boxed(),
        ),
        (3, id_in(IdC::Delayed).prop_map(|id| Op::Promote { id }).boxed()),
        (3, (id_in(IdC::Delayed), when_c()).prop_map(|(id, when)| Op::Reschedule { id, when }).boxed()),
        (
            h(3),
            (held_id(), tok_c(), when_c()).prop_map(|(id, tok, when)| Op::Delay { id, tok, when }).boxed(),
        ),
        (
            h(9),
            (held_id(), tok_c(), error, keep(), age(), prop::bool::weighted(0.2), lc())
                .prop_map(|(id, tok, error, keep, age, final_, lc)| Op::Fail {
                    id,
                    tok,
                    error: B(error),
                    keep,
                    age,
                    final_,
                    lc,
                })
                .boxed(),
        ),
        (4, id_in(IdC::Finished).prop_map(|id| Op::Reprocess { id }).boxed()),
        (h(3), (held_id(), tok_c()).prop_map(|(id, tok)| Op::Requeue { id, tok }).boxed()),
        (
            16,
            (max_stalls, s_count, lc())
                .prop_map(|(max_stalls, count, lc)| Op::Stalled { max_stalls, count, lc })
                .boxed(),
        ),
        (8, (1u64..=25).prop_map(Op::Sleep).boxed()),
        (2, (100u64..=150).prop_map(Op::Sleep).boxed()),
        // The inspection and administration commands.
        (
            h(3),
            (held_id(), tok_c(), progress())
                .prop_map(|(id, tok, progress)| Op::Progress { id, tok, progress })
                .boxed(),
        ),
        (
            h(14),
            (held_id(), tok_c(), line(), log_keep())
                .prop_map(|(id, tok, line, keep)| Op::Log { id, tok, line, keep })
                .boxed(),
        ),
        (3, (id_c(), prop::bool::weighted(0.4)).prop_map(|(id, force)| Op::Remove { id, force }).boxed()),
        (
            1,
            (prop::bool::ANY, del_count(), lc())
                .prop_map(|(delayed, count, lc)| Op::Drain { delayed, count, lc })
                .boxed(),
        ),
        (
            3,
            (prop::bool::ANY, grace(), del_count())
                .prop_map(|(failed, grace, count)| Op::Clean { failed, grace, count })
                .boxed(),
        ),
        (
            1,
            (prop::bool::weighted(0.5), del_count())
                .prop_map(|(force, count)| Op::Obliterate { force, count })
                .boxed(),
        ),
        (h(6), completes().prop_map(|(entries, fill)| Op::Completes { entries, fill }).boxed()),
        (4, id_c().prop_map(|id| Op::Job { id }).boxed()),
        (2, Just(Op::Counts).boxed()),
        (
            3,
            (0usize..6, page_from(), page_count(), prop::bool::weighted(0.3), lc())
                .prop_map(|(set, from, count, rev, lc)| Op::Jobs { set, from, count, rev, lc })
                .boxed(),
        ),
    ])
}

/// TRA.COMPLETES entries: mostly distinct held jobs with their holders' tokens; sometimes
/// any id (a finished job: the repeat's 0; a gone one: -2; one twice: refused), a stale or bad
/// token, a result too long for `max-payload` 4; rarely padded to 100 entries (the most one
/// call takes) or 101 (refused).
fn completes() -> BoxedStrategy<(Vec<Entry>, Option<usize>)> {
    let id = weighted(vec![
        (30, Just(EntryId::Next).boxed()),
        (4, (0..8usize).prop_map(|k| EntryId::Any(IdC::Finished(k))).boxed()),
        (3, id_c().prop_map(EntryId::Any).boxed()),
        (2, (0..8usize).prop_map(|k| EntryId::Any(IdC::Active(k))).boxed()),
    ]);
    let result = weighted(vec![
        (8, Just(b"ok".to_vec()).boxed()),
        (1, Just(vec![]).boxed()),
        (1, Just(b"\x00\xfe bin".to_vec()).boxed()),
    ]);
    let fill = weighted(vec![
        (40, Just(None).boxed()),
        (1, Just(Some(COMPLETES_MAX)).boxed()),
        (1, Just(Some(COMPLETES_MAX + 1)).boxed()),
    ]);
    (prop::collection::vec((id, tok_c(), result.prop_map(B)), 1..=4), fill).boxed()
}

fn progress() -> BoxedStrategy<B> {
    weighted(vec![
        (8, Just(b"50%".to_vec()).boxed()),
        (1, Just(vec![]).boxed()),
        (1, Just(vec![b'g'; PROGRESS_MAX]).boxed()),
        (1, Just(vec![b'g'; PROGRESS_MAX + 1]).boxed()),
    ])
    .prop_map(B)
    .boxed()
}

fn line() -> BoxedStrategy<B> {
    weighted(vec![
        (8, Just(b"line".to_vec()).boxed()),
        (1, Just(vec![]).boxed()),
        (1, Just(b"\x00\xff 5by".to_vec()).boxed()),
    ])
    .prop_map(B)
    .boxed()
}

fn log_keep() -> BoxedStrategy<Option<i64>> {
    weighted(vec![
        (20, Just(None).boxed()),
        (10, (1i64..=3).prop_map(Some).boxed()),
        (1, Just(Some(0i64)).boxed()),
        (1, Just(Some(LOG_KEEP_MAX)).boxed()),
        (1, Just(Some(LOG_KEEP_MAX + 1)).boxed()),
    ])
}

fn del_count() -> BoxedStrategy<Option<i64>> {
    weighted(vec![
        (10, Just(None).boxed()),
        (10, (1i64..=3).prop_map(Some).boxed()),
        (1, Just(Some(0i64)).boxed()),
        (1, Just(Some(DELETE_COUNT_MAX)).boxed()),
        (1, Just(Some(DELETE_COUNT_MAX + 1)).boxed()),
    ])
}

fn grace() -> BoxedStrategy<i64> {
    weighted(vec![
        (5, Just(0i64).boxed()),
        (5, (1i64..=60).boxed()),
        (2, Just(60_000i64).boxed()),
        (1, Just(-1i64).boxed()),
        (1, Just(TIME_MAX + 1).boxed()),
    ])
}

fn page_from() -> BoxedStrategy<Option<i64>> {
    weighted(vec![
        (10, Just(None).boxed()),
        (10, (0i64..=5).prop_map(Some).boxed()),
        (1, Just(Some(-1i64)).boxed()),
        (1, Just(Some(TIME_MAX + 1)).boxed()),
    ])
}

fn page_count() -> BoxedStrategy<Option<i64>> {
    weighted(vec![
        (10, Just(None).boxed()),
        (10, (1i64..=3).prop_map(Some).boxed()),
        (1, Just(Some(0i64)).boxed()),
        (1, Just(Some(PAGE_MAX + 1)).boxed()),
    ])
}

#[derive(Clone, Debug)]
struct Case {
    cfg: Cfg,
    /// How many ids the case draws from.
    pool: usize,
    crashy: bool,
    /// Send the verbs over RESP3 (the same replies in both protocols).
    resp3: bool,
    ops: Vec<Op>,
}

fn case(steps: usize) -> BoxedStrategy<Case> {
    let keep = || prop::sample::select(vec![-1i64, 0, 1, 2, 16, 1000]);
    let batch = || prop::sample::select(vec![1i64, 2, 100, 100]);
    let cfg = (
        (keep(), keep(), 0i64..=2, batch()),
        (batch(), batch(), prop::sample::select(vec![4usize, 1 << 20, 1 << 20]), prop::bool::weighted(0.85)),
        prop::sample::select(vec![1i64, 2, 1000]),
    )
        .prop_map(
            |(
                (keep_completed, keep_failed, max_stalls, stalled_batch),
                (promote_batch, retention_batch, max_payload, events),
                log_keep,
            )| Cfg {
                log_keep,
                keep_completed,
                keep_failed,
                max_stalls,
                stalled_batch,
                promote_batch,
                retention_batch,
                max_payload,
                events,
            },
        );
    let pool = prop::sample::select(vec![5usize, 5, 5, POOL_MAX]);
    (cfg, pool, prop::bool::weighted(0.3), prop::bool::weighted(0.3))
        .prop_flat_map(move |(cfg, pool, crashy, resp3)| {
            prop::collection::vec(op(crashy), 1..=steps).prop_map(move |ops| Case {
                cfg,
                pool,
                crashy,
                resp3,
                ops,
            })
        })
        .boxed()
}

// ---------------------------------------------------------------------------------------
// Running a case against the server and the model.

/// The clock and the keyspace's digest, in one round trip.
fn time_and_digest(c: &mut Conn) -> Result<(i64, String), String> {
    let r = c.pipeline(&[cmd(&[b"TIME"]), cmd(&[b"DEBUG", b"DIGEST"])]);
    let a = arr(&r[0])?;
    let t = int_of(&bulk(&a[0])?)? * 1000 + int_of(&bulk(&a[1])?)? / 1000;
    Ok((t, String::from_utf8_lossy(&bulk(&r[1])?).into_owned()))
}

fn ok(c: &mut Conn, args: &[&[u8]]) -> Result<(), String> {
    match c.call(args) {
        Reply::Error(e) => Err(format!("{}: {e}", show_argv(&cmd(args)))),
        _ => Ok(()),
    }
}

/// How often each verb met each outcome (success, 0, or an error class), for the summary.
type Coverage = std::cell::RefCell<BTreeMap<(String, String), u64>>;

fn outcome(call: &Call, r: &Reply) -> String {
    match (call, r) {
        (_, Reply::Error(e)) => e.split(' ').next().unwrap_or("").to_string(),
        (Call::Pause(on), Reply::Int(i)) => format!("{} {i}", if *on { "PAUSE" } else { "RESUME" }),
        (_, Reply::Int(0)) => "0".into(),
        (_, Reply::Simple(s)) => s.clone(),
        (Call::Claim { .. }, Reply::Array(a)) => format!("{} jobs", a.len().min(2)),
        (Call::Stalled { .. }, Reply::Array(a)) => {
            let n =
                |i: usize| a.get(i).map_or(0, |x| if let Reply::Array(v) = x { v.len().min(1) } else { 0 });
            format!("requeued {} failed {}", n(0), n(1))
        }
        (Call::Completes { .. }, Reply::Array(a)) => {
            let mut seen: Vec<String> = Vec::new();
            for v in [1, 0, -1, -2] {
                if a.contains(&Reply::Int(v)) {
                    seen.push(v.to_string());
                }
            }
            format!("[{}]", seen.join(" "))
        }
        (Call::Extends { .. }, Reply::Array(a)) => {
            if a.contains(&Reply::Int(0)) {
                "some 0".into()
            } else {
                "all extended".into()
            }
        }
        _ => "ok".into(),
    }
}

/// A primary with the module installed and a replica following it: every case's effects must
/// reach the replica (verbs replicate their resolved writes, never the verb).
struct Pair {
    primary: Server,
    replica: Server,
}

impl Pair {
    fn start() -> Pair {
        let primary = Server::quiet();
        let replica = Server::start(Opts::default());
        replica.follow(&primary);
        Pair { primary, replica }
    }

    /// The replica holds exactly the primary's keyspace.
    fn in_sync(&self) -> Result<(), String> {
        let mut p = self.primary.conn();
        if p.call(&[b"WAIT", b"1", b"5000"]) != Reply::Int(1) {
            return Err("the replica did not acknowledge within 5 s".into());
        }
        let (a, b) = (digest(&mut p), digest(&mut self.replica.conn()));
        if a != b {
            return Err(format!(
                "the replica's keyspace differs from the primary's (DEBUG DIGEST {a} / {b})"
            ));
        }
        Ok(())
    }
}

fn run_case(pair: &Pair, case: &Case, cov: &Coverage) -> Result<(), String> {
    let srv = &pair.primary;
    let mut c = srv.conn();
    ok(&mut c, &[b"FLUSHALL"])?;
    ok(&mut c, &[b"EMQ.INSTALL", b"1", b"{emq}:version"])?;
    let cfg = case.cfg;
    for (k, v) in [
        ("keep-completed", cfg.keep_completed),
        ("keep-failed", cfg.keep_failed),
        ("max-stalls", cfg.max_stalls),
        ("stalled-batch", cfg.stalled_batch),
        ("promote-batch", cfg.promote_batch),
        ("retention-batch", cfg.retention_batch),
        ("events-maxlen", if cfg.events { 100_000 } else { 0 }),
        ("max-payload", cfg.max_payload as i64),
        ("log-keep", cfg.log_keep),
    ] {
        ok(&mut c, &[b"CONFIG", b"SET", format!("trafikey.{k}").as_bytes(), v.to_string().as_bytes()])?;
    }
    let q = Q::new("model");
    let mut m = Model::new(cfg);
    let mut log = format!(
        "configs: {cfg:?}, {} ids{}{}\n",
        case.pool,
        if case.crashy { ", crashy workers" } else { "" },
        if case.resp3 { ", verbs over RESP3" } else { "" }
    );
    // The verbs go over `vc`; reads of the queue and the clock over `c` (RESP2).
    let mut vc = srv.conn();
    if case.resp3 && !matches!(vc.call(&[b"HELLO", b"3"]), Reply::Map(_)) {
        return Err("HELLO 3 failed".into());
    }
    let mut fresh = 0u64;
    let mut last_event = b"0-0".to_vec();
    for (i, op) in case.ops.iter().enumerate() {
        if let Op::Sleep(ms) = op {
            std::thread::sleep(Duration::from_millis(*ms));
            let _ = writeln!(log, "{i:>3} (sleep {ms} ms)");
            continue;
        }
        let (t0, before) = time_and_digest(&mut c)?;
        let (call, lc) = Resolver { m: &m, pool: case.pool, clock: t0, fresh: &mut fresh }.call(op);
        let argv = call.argv(&q, lc);
        let refs: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
        let reply = vc.call(&refs);
        let (t1, after) = time_and_digest(&mut c)?;
        let (view, events) = read_view(&mut c, &q, case.pool, &mut last_event)
            .map_err(|e| format!("{log}reading the queue: {e}"))?;
        let _ = writeln!(log, "{i:>3} [{t0}..{t1}] {} -> {}", show_argv(&argv), show_reply(&reply));
        if reply.err().is_some() && before != after {
            return Err(format!("{log}\nA REFUSAL WROTE at step {i}: DEBUG DIGEST {before} -> {after}"));
        }
        if let Some(e) = invariant(&view) {
            return Err(format!(
                "{log}\nINVARIANT (each job in at most one state set, named by its row; no log without its row) broken at step {i}: {e}"
            ));
        }
        *cov.borrow_mut().entry((call.verb().to_string(), outcome(&call, &reply))).or_default() += 1;
        let step = |now: i64| {
            let mut next = m.clone();
            let mut ev = Vec::new();
            let exp = match next.apply(&call, now, &mut ev) {
                Ok(r) => r,
                Err(class) => {
                    next = m.clone();
                    ev.clear();
                    Reply::Error(class.to_string())
                }
            };
            if !next.cfg.events {
                ev.clear();
            }
            if !ev.is_empty() {
                next.events_exist = true;
            }
            let d = differences(&exp, &reply, &ev, &events, &next.view(), &view);
            (next, d)
        };
        let mut first_diff = None;
        let mut agreed = None;
        for now in t0..=t1.max(t0) {
            let (next, d) = step(now);
            match d {
                None => {
                    agreed = Some(next);
                    break;
                }
                Some(d) => {
                    first_diff.get_or_insert((now, d));
                }
            }
        }
        match agreed {
            Some(next) => {
                // Which paths deleted a log with its row (the summary shows each).
                let gone = m.logs.keys().filter(|id| !next.logs.contains_key(*id)).count() as u64;
                // Jobs a CLAIM failed as expired (the reply does not show them; the events,
                // which agree, do — unless events are off).
                let expired = events
                    .iter()
                    .filter(|e| e.windows(2).any(|w| w == [b"error".to_vec(), b"expired".to_vec()]))
                    .count() as u64;
                if expired > 0 {
                    *cov.borrow_mut().entry((call.verb().to_string(), "expired".into())).or_default() +=
                        expired;
                }
                if gone > 0 {
                    *cov.borrow_mut().entry((call.verb().to_string(), "logs deleted".into())).or_default() +=
                        gone;
                }
                m = next
            }
            None => {
                let (now, d) = first_diff.unwrap_or_default();
                // Tell a clock-bracket problem (the harness's) from a real divergence.
                let outside = (t0 - 200..t0).chain(t1 + 1..t1 + 200).find(|t| step(*t).1.is_none());
                let note = match outside {
                    Some(t) => format!(
                        "\nNOTE: the model agrees at now={t}, outside the TIME bracket [{t0}, {t1}]: a clock problem, not a divergence"
                    ),
                    None => String::new(),
                };
                return Err(format!(
                    "{log}\nDIVERGENCE at step {i} (model run at now={now} of [{t0}, {t1}]):\n{d}{note}"
                ));
            }
        }
    }
    let inv = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        q.check_invariant(&mut c);
    }));
    if let Err(p) = inv {
        let msg = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        return Err(format!(
            "{log}\nINVARIANT (each job in at most one state set, named by its row) broken at the end: {msg}"
        ));
    }
    pair.in_sync().map_err(|e| format!("{log}\nREPLICATION (verbs replicate their resolved writes): {e}"))?;
    Ok(())
}

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

#[test]
fn job_core_agrees_with_its_model() {
    let cases = env_num("MODEL_CASES", 96) as u32;
    let steps = env_num("MODEL_STEPS", 60) as usize;
    let seed = env_num("MODEL_SEED", 0x7472_6166_696b_6579);
    let mut seed_bytes = [0u8; 32];
    seed_bytes[..8].copy_from_slice(&seed.to_le_bytes());
    eprintln!("model: {cases} cases of up to {steps} steps, MODEL_SEED={seed}");
    let pair = Pair::start();
    let config = Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: env_num("MODEL_SHRINK_ITERS", 4000) as u32,
        max_shrink_time: env_num("MODEL_SHRINK_MS", 120_000) as u32,
        ..Config::default()
    };
    let mut runner = TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes));
    let t = Instant::now();
    let (ran, steps_run) = (std::cell::Cell::new(0u64), std::cell::Cell::new(0u64));
    let cov = Coverage::default();
    let result = runner.run(&case(steps), |case| {
        ran.set(ran.get() + 1);
        steps_run.set(steps_run.get() + case.ops.len() as u64);
        run_case(&pair, &case, &cov).map_err(TestCaseError::fail)
    });
    let mut summary = String::new();
    for ((verb, out), k) in cov.borrow().iter() {
        let _ = write!(summary, "{verb}:{out}={k}  ");
    }
    eprintln!("model: outcomes: {summary}");
    eprintln!(
        "model: {} sequences, {} steps (shrinking included) in {:.1?}",
        ran.get(),
        steps_run.get(),
        t.elapsed()
    );
    match result {
        Ok(()) => {}
        Err(TestError::Fail(reason, case)) => {
            let ops: Vec<String> =
                case.ops.iter().enumerate().map(|(i, o)| format!("{i:>3} {o:?}")).collect();
            panic!(
                "the module and the model disagree (MODEL_SEED={seed}).\n\nminimal sequence ({:?}, {} ids, crashy {}, resp3 {}):\n{}\n\nits run (TIME bracket, command, reply):\n{reason}",
                case.cfg,
                case.pool,
                case.crashy,
                case.resp3,
                ops.join("\n")
            )
        }
        Err(TestError::Abort(reason)) => panic!("aborted: {reason}"),
    }
}

/// The shrunk sequences the random test found where the module departed from the contract,
/// replayed on every run whatever the random seed: regressions once the module is fixed.
#[test]
fn found_divergences_replay() {
    let job = || JobC {
        name: B(b"alpha".to_vec()),
        data: B(b"{}".to_vec()),
        priority: None,
        attempts: None,
        backoff: None,
        expire: None,
    };
    let enqueue = |i| Op::Enqueue { id: IdC::Pool(i), job: job(), lifo: false, lc: false };
    let cfg = Cfg {
        log_keep: 1000,
        keep_completed: -1,
        keep_failed: 1,
        max_stalls: 0,
        stalled_batch: 100,
        promote_batch: 100,
        retention_batch: 100,
        max_payload: 1 << 20,
        events: true,
    };
    let case = |ops| Case { cfg, pool: 5, crashy: false, resp3: false, ops };
    let claim1 = || Op::Claim { tok: ClaimTok::Fresh, lease: 60_000, count: Some(1), lc: false };
    let complete_all = || Op::Complete {
        id: IdC::Active(0),
        tok: TokC::Holder,
        result: B(b"ok".to_vec()),
        keep: Some(-1),
        age: None,
        lc: false,
    };
    let found: Vec<(&str, Case)> = vec![
        (
            "STALLED failing more jobs in one call than keep-failed left them all in `failed` \
             (fixed in de15125): src/CONTRACT.md (KEEP n trims that finished set to its n newest; \
             without KEEP the config's default applies) and src/verbs/README.md (the default is \
             a soft cap, exact below 16). Retire::plan only trimmed entries already in the set.",
            case(vec![
                enqueue(0),
                enqueue(1),
                Op::Claim { tok: ClaimTok::Fresh, lease: 1, count: Some(2), lc: false },
                Op::Sleep(20),
                Op::Stalled { max_stalls: None, count: None, lc: false },
            ]),
        ),
        (
            "the same, with the leases expiring in the other order than the ids: the jobs one \
             call fails share a finish time, so the lowest ids are the oldest and go first",
            case(vec![
                enqueue(0),
                enqueue(1),
                enqueue(2),
                Op::Claim { tok: ClaimTok::Fresh, lease: 9, count: Some(1), lc: false },
                Op::Claim { tok: ClaimTok::Fresh, lease: 5, count: Some(1), lc: false },
                Op::Claim { tok: ClaimTok::Fresh, lease: 1, count: Some(1), lc: false },
                Op::Sleep(30),
                Op::Stalled { max_stalls: None, count: None, lc: false },
            ]),
        ),
        (
            "Fixed (the CLAIM in time deletes `x`): REPROCESS revived a spent EXPIRE. src/verbs/README.md, EMQ.ENQUEUE's \
             `EXPIRE when`: once a CLAIM has taken a job in time, its EXPIRE is spent — a retry \
             after FAIL, a stall or REPROCESS makes it wait again, and it is handed out as any \
             job. REPROCESS deletes `as`, and `domain::expired` reads `as` 0 as never claimed: \
             the next CLAIM fails the reprocessed job with `expired` instead of handing it out.",
            case(vec![
                Op::Enqueue {
                    id: IdC::Pool(0),
                    job: JobC { expire: Some(WhenC::In(30)), ..job() },
                    lifo: false,
                    lc: false,
                },
                claim1(),
                Op::Complete {
                    id: IdC::Active(0),
                    tok: TokC::Holder,
                    result: B(b"ok".to_vec()),
                    keep: Some(-1),
                    age: None,
                    lc: false,
                },
                Op::Reprocess { id: IdC::Finished(0) },
                Op::Sleep(40),
                claim1(),
            ]),
        ),
        (
            "Fixed (nothing finishes, nothing is written): a TRA.COMPLETES that finished no job still trimmed `completed`. \
             src/verbs/README.md, TRA.COMPLETES: 0 (a repeat) and -1/-2 write nothing; \
             retention is COMPLETE's without KEEP, and COMPLETE trims only when a job finishes \
             (src/CONTRACT.md, Retention: a job finishing may trim that set). completes.rs runs \
             `Retire::plan` whether or not an entry finished: here keep-completed 1 and two \
             jobs kept by KEEP -1; an entry for a job that does not exist (-2) deletes the older.",
            Case {
                cfg: Cfg { keep_completed: 1, ..cfg },
                ..case(vec![
                    enqueue(0),
                    enqueue(1),
                    Op::Claim { tok: ClaimTok::Fresh, lease: 60_000, count: Some(2), lc: false },
                    complete_all(),
                    complete_all(),
                    Op::Completes {
                        entries: vec![(EntryId::Any(IdC::Pool(2)), TokC::Pool(0), B(b"ok".to_vec()))],
                        fill: None,
                    },
                ])
            },
        ),
        (
            "Fixed (every id gated first): TRA.COMPLETES checked a triple's token and result before the next \
             triple's id. src/CONTRACT.md, order of checks: the id gate (the key suffix or id \
             arguments) comes before the value ranges, so a bad id anywhere answers EMQID, as \
             EXTENDS does; completes.rs answers EMQARG for a bad token in an earlier triple.",
            case(vec![
                enqueue(0),
                claim1(),
                Op::Completes {
                    entries: vec![
                        (EntryId::Next, TokC::Long, B(b"ok".to_vec())),
                        (EntryId::Any(IdC::Bad(0)), TokC::Pool(0), B(b"ok".to_vec())),
                    ],
                    fill: None,
                },
            ]),
        ),
        (
            "Fixed (every id gated first): the same for more than 100 entries: completes.rs refuses the count \
             (EMQARG) before it gates the ids (EMQID first, by the order of checks).",
            case(vec![Op::Completes {
                entries: vec![(EntryId::Any(IdC::Bad(0)), TokC::Pool(0), B(b"ok".to_vec()))],
                fill: Some(COMPLETES_MAX + 1),
            }]),
        ),
    ];
    let pair = Pair::start();
    let cov = Coverage::default();
    let mut failures = Vec::new();
    for (what, case) in &found {
        if let Err(e) = run_case(&pair, case, &cov) {
            failures.push(format!("== {what}\n{e}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} known divergence(s) still reproduce:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

/// Every path that deletes a row deletes its job's log (a log never outlives its row), each
/// run once as a fixed sequence against the model — whatever the random cases happen to
/// reach: retention by count (KEEP n) and by age (AGE), KEEP 0, STALLED's failure under
/// `keep-failed 0`, TRA.COMPLETES under `keep-completed 0`, REMOVE … FORCE of a held job,
/// DRAIN, CLEAN and OBLITERATE … FORCE.
#[test]
fn every_path_deletes_the_log_with_its_row() {
    let job = || JobC {
        name: B(b"alpha".to_vec()),
        data: B(b"{}".to_vec()),
        priority: None,
        attempts: None,
        backoff: None,
        expire: None,
    };
    let enqueue = |i| Op::Enqueue { id: IdC::Pool(i), job: job(), lifo: false, lc: false };
    let claim = |count, lease| Op::Claim { tok: ClaimTok::Fresh, lease, count: Some(count), lc: false };
    let log = |k| Op::Log { id: IdC::Active(k), tok: TokC::Holder, line: B(b"line".to_vec()), keep: None };
    let complete = |keep, age| Op::Complete {
        id: IdC::Active(0),
        tok: TokC::Holder,
        result: B(b"ok".to_vec()),
        keep,
        age,
        lc: false,
    };
    let cfg = Cfg {
        log_keep: 1000,
        keep_completed: -1,
        keep_failed: 1000,
        max_stalls: 0,
        stalled_batch: 100,
        promote_batch: 100,
        retention_batch: 100,
        max_payload: 1 << 20,
        events: true,
    };
    let case = |cfg, ops| Case { cfg, pool: 5, crashy: false, resp3: false, ops };
    let paths: Vec<(&str, Case)> = vec![
        (
            "EMQ.COMPLETE",
            // KEEP 1: the older completed job goes, with its log.
            case(
                cfg,
                vec![
                    enqueue(0),
                    enqueue(1),
                    claim(2, 60_000),
                    log(0),
                    log(1),
                    complete(Some(-1), None),
                    complete(Some(1), None),
                ],
            ),
        ),
        (
            "EMQ.COMPLETE",
            // AGE 1: a job finished more than 1 ms ago goes, with its log.
            case(
                cfg,
                vec![
                    enqueue(0),
                    claim(1, 60_000),
                    log(0),
                    complete(Some(-1), None),
                    Op::Sleep(5),
                    enqueue(1),
                    claim(1, 60_000),
                    complete(Some(-1), Some(1)),
                ],
            ),
        ),
        (
            "EMQ.FAIL",
            // KEEP 0: the job goes at once, with its log.
            case(
                cfg,
                vec![
                    enqueue(0),
                    claim(1, 60_000),
                    log(0),
                    Op::Fail {
                        id: IdC::Active(0),
                        tok: TokC::Holder,
                        error: B(b"boom".to_vec()),
                        keep: Some(0),
                        age: None,
                        final_: true,
                        lc: false,
                    },
                ],
            ),
        ),
        (
            "EMQ.STALLED",
            // keep-failed 0: a stalled job failing for good goes at once, with its log.
            case(
                Cfg { keep_failed: 0, ..cfg },
                vec![
                    enqueue(0),
                    claim(1, 1),
                    log(0),
                    Op::Sleep(10),
                    Op::Stalled { max_stalls: Some(0), count: None, lc: false },
                ],
            ),
        ),
        (
            "TRA.COMPLETES",
            // keep-completed 0: the finished job goes at once, with its log.
            case(
                Cfg { keep_completed: 0, ..cfg },
                vec![
                    enqueue(0),
                    claim(1, 60_000),
                    log(0),
                    Op::Completes {
                        entries: vec![(EntryId::Next, TokC::Holder, B(b"ok".to_vec()))],
                        fill: None,
                    },
                ],
            ),
        ),
        (
            "TRA.REMOVE",
            case(
                cfg,
                vec![enqueue(0), claim(1, 60_000), log(0), Op::Remove { id: IdC::Pool(0), force: true }],
            ),
        ),
        (
            "TRA.DRAIN",
            case(
                cfg,
                vec![
                    enqueue(0),
                    claim(1, 60_000),
                    log(0),
                    Op::Requeue { id: IdC::Active(0), tok: TokC::Holder },
                    Op::Drain { delayed: false, count: None, lc: false },
                ],
            ),
        ),
        (
            "TRA.CLEAN",
            case(
                cfg,
                vec![
                    enqueue(0),
                    claim(1, 60_000),
                    log(0),
                    complete(Some(-1), None),
                    Op::Sleep(5),
                    Op::Clean { failed: false, grace: 0, count: None },
                ],
            ),
        ),
        (
            "TRA.OBLITERATE",
            case(
                cfg,
                vec![enqueue(0), claim(1, 60_000), log(0), Op::Obliterate { force: true, count: None }],
            ),
        ),
    ];
    let pair = Pair::start();
    let mut failures = Vec::new();
    for (verb, case) in &paths {
        let cov = Coverage::default();
        if let Err(e) = run_case(&pair, case, &cov) {
            failures.push(format!("== {verb}\n{e}"));
        } else if !cov.borrow().contains_key(&(verb.to_string(), "logs deleted".to_string())) {
            failures.push(format!("== {verb}: the sequence deleted no log ({:?})", cov.borrow()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// CLAIM goes past expired jobs, pass by pass, as fixed sequences against the model: each
/// pass promotes again (`promote-batch` 1 here, so one due job a pass), at most 4 passes, the
/// expired jobs failed under `keep-failed` 1 (the cap bites: beyond it a job goes at once);
/// also while paused (promotion runs, nothing is handed out); and a job met expired in `wait`
/// does not use up the claim: the job behind it is handed out by the same call.
#[test]
fn claim_goes_past_expired_jobs() {
    let job = |expire| JobC {
        name: B(b"alpha".to_vec()),
        data: B(b"{}".to_vec()),
        priority: None,
        attempts: None,
        backoff: None,
        expire,
    };
    let expired = || Some(WhenC::Ago(5));
    let schedule =
        |i, expire| Op::Schedule { id: IdC::Pool(i), when: WhenC::Ago(10), job: job(expire), lc: false };
    let enqueue = |i, expire| Op::Enqueue { id: IdC::Pool(i), job: job(expire), lifo: false, lc: false };
    let claim = |count| Op::Claim { tok: ClaimTok::Fresh, lease: 60_000, count: Some(count), lc: false };
    let cfg = Cfg {
        log_keep: 1000,
        keep_completed: -1,
        keep_failed: 1,
        max_stalls: 0,
        stalled_batch: 100,
        promote_batch: 1,
        retention_batch: 100,
        max_payload: 1 << 20,
        events: true,
    };
    let case = |ops| Case { cfg, pool: 24, crashy: false, resp3: false, ops };
    // (what, sequence, jobs expired in all)
    let cases: Vec<(&str, Case, u64)> = vec![
        (
            "only a CLAIM's first pass promotes: two claims, promote-batch 1, two expired jobs",
            case(vec![
                schedule(0, expired()),
                schedule(1, expired()),
                schedule(2, expired()),
                schedule(3, expired()),
                schedule(4, None),
                claim(1),
                claim(1),
            ]),
            2,
        ),
        (
            "the same while paused: promotion (and expiry) runs, nothing is handed out",
            case(vec![
                Op::Pause(true, false),
                schedule(0, expired()),
                schedule(1, expired()),
                schedule(2, None),
                claim(2),
                Op::Pause(false, false),
                claim(2),
            ]),
            2,
        ),
        (
            "expired jobs in wait and prio do not use up the claim",
            case(vec![
                enqueue(0, expired()),
                enqueue(1, Some(WhenC::In(0))),
                enqueue(2, None),
                Op::Enqueue {
                    id: IdC::Pool(3),
                    job: JobC { priority: Some(1), ..job(expired()) },
                    lifo: false,
                    lc: false,
                },
                enqueue(4, Some(WhenC::In(60_000))),
                claim(2),
                claim(2),
            ]),
            3,
        ),
    ];
    let pair = Pair::start();
    let mut failures = Vec::new();
    for (what, case, want) in &cases {
        let cov = Coverage::default();
        if let Err(e) = run_case(&pair, case, &cov) {
            failures.push(format!("== {what}\n{e}"));
            continue;
        }
        let got = cov.borrow().get(&("EMQ.CLAIM".to_string(), "expired".to_string())).copied().unwrap_or(0);
        if got != *want {
            failures.push(format!("== {what}: {got} jobs expired, not {want} ({:?})", cov.borrow()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
