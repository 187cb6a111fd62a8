//! `TRA.COMPLETES 3 active completed events id token result [id token result ...]` — COMPLETE
//! for many held jobs in one call: a worker that processed a batch finishes it in one request
//! instead of one per job. Each entry answers as COMPLETE would: 1 completed; 0 when that
//! token already completed it (a repeat after a lost reply: nothing written); -1 when the job
//! is not held with that token (what COMPLETE answers `EMQLEASE` for); -2 when there is no
//! such job (`EMQNOJOB`). Rows are found from the ids, not declared: opened as the caller,
//! as EXTENDS opens them. Retention as COMPLETE without KEEP (`trafikey.keep-completed`).
//! At most `domain::CLAIM_PER_CALL` jobs a call (what one CLAIM hands out); an id given twice
//! is refused. Fenced.

use crate::config;
use crate::domain::{self, Keep};
use crate::errors::Refusal;
use crate::host::command::{block, q, val, Arg, Command, Keys, Spec::*, Ty};
use crate::host::{Access, ArgStr, Exec, Key, Kind, Reply, Str, Verb};
use crate::keyspace::Role::{self, *};
use crate::queue::{self, field, Event, Events, Release, Retire, Row, Sets, State, Tallied, Tally};

pub const KEYS: Keys = Keys::of(&[q(Active, Take), q(Completed, Update), q(Events, Append)]);
pub const ARGS: &[Arg] =
    &[block("job", None, &[val("id", Ty::Str), val("token", Ty::Str), val("result", Ty::Str)]).multiple()];

/// What one entry came to.
const DONE: i64 = 1;
const REPEAT: i64 = 0;
const NOT_HELD: i64 = -1;
const NO_JOB: i64 = -2;

/// The command, declared whole: registration, ACL, `COMMAND DOCS` and the reference take it
/// from here.
pub const COMMAND: Command = Command::new::<Completes>("TRA.COMPLETES")
    .holder()
    .keys(KEYS)
    .args(ARGS)
    .writes()
    .summary("COMPLETE many held jobs at once: 1, 0 (a repeat), -1 (not held) or -2 (no such job) for each.")
    .complexity("O(n log N) for n jobs");

pub struct Completes;

pub struct Args<'a> {
    jobs: Vec<[ArgStr<'a>; 3]>,
}

impl Verb for Completes {
    type Args<'a> = Args<'a>;

    fn shape<'a>(args: &[ArgStr<'a>]) -> Result<Args<'a>, Refusal> {
        if args.is_empty() || !args.len().is_multiple_of(3) {
            return Err(Refusal::Usage);
        }
        let jobs = args.chunks_exact(3).filter_map(|t| Some([*t.first()?, *t.get(1)?, *t.get(2)?])).collect();
        Ok(Args { jobs })
    }

    fn run<'a>(x: &mut Exec<'a>, a: Args<'a>) -> Result<Reply, Refusal> {
        // The order of checks: every id gated first, then the ranges.
        for [id, ..] in &a.jobs {
            domain::job_id(id)?;
        }
        let max = usize::try_from(domain::CLAIM_PER_CALL).unwrap_or(0);
        if a.jobs.len() > max {
            return Err(Refusal::Arg(format!("at most {max} jobs")));
        }
        let payload_max = config::max_payload();
        for [_, token, result] in &a.jobs {
            domain::token(token)?;
            domain::payload(result, payload_max, "result")?;
        }
        let mut ids: Vec<&[u8]> = a.jobs.iter().map(|[id, ..]| id.bytes()).collect();
        ids.sort_unstable();
        if ids.windows(2).any(|w| w.first() == w.get(1)) {
            return Err(Refusal::Arg("an id given twice".into()));
        }
        let active = x.open_as(Active, Kind::ZSet)?;
        let completed = x.open_as(Completed, Kind::ZSet)?;
        let events = Events::open(x)?;
        let mut held = Vec::with_capacity(a.jobs.len());
        for [id, token, result] in &a.jobs {
            let row = x.open_undeclared(Role::Job, id, Access::Update)?;
            let exists = row.exists_as(Kind::Hash)?;
            held.push(Held { id: x.string(id)?, row, exists, token: *token, result: *result });
        }
        let fates =
            finish_many(x, &mut held, Finishing::default(), &active, &completed, &events, Sets::default())?;
        Ok(Reply::Array(fates.into_iter().map(Reply::Int).collect()))
    }
}

/// A job a batch finishes: its id, its row (open, and whether it exists), the token that
/// should hold it and its result.
pub struct Held<'a> {
    pub id: Str,
    pub row: Key,
    pub exists: bool,
    pub token: ArgStr<'a>,
    pub result: ArgStr<'a>,
}

/// How a batch finishes its jobs: COMPLETE's options (KEEP, AGE, ECHO, METRICS).
#[derive(Clone, Copy, Default)]
pub struct Finishing {
    pub keep: Option<i64>,
    pub age: Option<i64>,
    pub echo: bool,
    pub metrics: Option<i64>,
}

/// Each job as COMPLETE would finish it, answered by a code: `DONE`, `REPEAT`, `NOT_HELD`,
/// `NO_JOB`. Everything is read and checked first (retention, logs, DEDUP ids, the metrics
/// keys), then written; nothing is written when no job finishes. Retention counts the
/// batch's finished jobs together, as one COMPLETE of them all would. `sets`: the ready sets
/// the call has open, through which jobs kept for the finished jobs' DEDUP ids are made.
#[allow(clippy::too_many_arguments)]
pub fn finish_many(
    x: &mut Exec,
    held: &mut [Held],
    how: Finishing,
    active: &Key,
    completed: &Key,
    events: &Events,
    sets: Sets,
) -> Result<Vec<i64>, Refusal> {
    let keep = queue::keep_for(how.keep, &config::KEEP_COMPLETED)?;
    let age = queue::age(how.age)?;
    queue::tally::check(how.metrics)?;
    let fates: Vec<i64> = held
        .iter()
        .map(|h| {
            if !h.exists {
                NO_JOB
            } else if Row(&h.row).held_by(&h.token) && active.zscore(h.id.str_ref()).is_some() {
                DONE
            } else if Row(&h.row).completed_by(&h.token) {
                REPEAT
            } else {
                NOT_HELD
            }
        })
        .collect();
    let finishing = fates.iter().filter(|f| **f == DONE).count() as u64;
    if finishing == 0 {
        // Nothing finishes: nothing is written, retention included.
        return Ok(fates);
    }
    let now = x.now();
    let adding = if keep == Keep::None { 0 } else { finishing };
    let ids: Vec<Option<&[u8]>> =
        held.iter().zip(&fates).map(|(h, f)| (*f == DONE).then(|| h.id.bytes())).collect();
    let done: Vec<&[u8]> = ids.iter().flatten().copied().collect();
    let retire = Retire::plan(x, completed, adding, now, keep, age, &done)?;
    let tally =
        Tally::open(x, Tallied::Completed, how.metrics, i64::try_from(finishing).unwrap_or(i64::MAX))?;
    let at_once = domain::gone_at_once(&ids, retire.drop_new, keep == Keep::None);
    let mut logs = Vec::with_capacity(held.len());
    let mut releases = Vec::new();
    // Per job: attempts made once it finishes, read with its DEDUP id.
    let mut made_of = Vec::with_capacity(held.len());
    for ((h, fate), gone) in held.iter().zip(&fates).zip(&at_once) {
        logs.push(if *fate == DONE && *gone { queue::log_of(x, h.id.bytes())? } else { None });
        if *fate == DONE {
            let [made, dedup, ..] = h.row.hget_many(&[&field::MADE, &field::DEDUP]);
            made_of.push(made.and_then(|m| domain::args::int(m.bytes())).unwrap_or(0).saturating_add(1));
            releases.push(Release::finishing_of(x, h.id.bytes(), dedup, sets)?);
        } else {
            made_of.push(0);
        }
    }
    for h in held.iter() {
        if h.result.str_ref().is_missing() {
            return Err(crate::errors::host_reply());
        }
    }

    // Write.
    let taken: Vec<_> =
        held.iter().zip(&fates).filter(|(_, f)| **f == DONE).map(|(h, _)| h.id.str_ref()).collect();
    active.zrem_many(&taken);
    active.signal_ready();
    for ((((h, fate), gone), log), made) in held.iter().zip(&fates).zip(&at_once).zip(logs).zip(made_of) {
        if *fate != DONE {
            continue;
        }
        let made_s = x.int(made)?;
        let result = h.result.str_ref();
        let fields = [(&field::RESULT, result), (&field::MADE, made_s.str_ref())];
        let keep = if *gone { Keep::None } else { keep };
        let alias = queue::Companions::alias_of(x, log.as_ref())?;
        queue::finish(x, &h.row, completed, &h.id, State::Completed, keep, &fields, log)?;
        let echoed = how.echo.then_some(result);
        let alias = alias.as_ref().map(|a| a.str_ref());
        events.emit(x, Some(h.id.str_ref()), Event::Completed { attempt: made, result: echoed, alias })?;
    }
    for r in &releases {
        r.apply(x, events, sets)?;
    }
    // Written: the rows' handles closed before retention deletes rows through its own (a
    // repeat's row sits in `completed`, where retention may delete it).
    for h in held.iter_mut() {
        h.row.close();
    }
    retire.apply(completed);
    if let Some(t) = &tally {
        t.apply(x)?;
    }
    Ok(fates)
}
