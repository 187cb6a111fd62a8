//! `EMQ.COMPLETE 4 job active completed events token result [KEEP n] [AGE ms] [ECHO]
//! [METRICS max]`
//!
//! Moves a held job to completed (row: result, finish time, `am+1`; the finishing token
//! stays, so the same COMPLETE repeated after a lost reply answers 0 and writes nothing).
//! Retention: KEEP n trims completed to its n newest, deleting the trimmed rows; KEEP 0
//! deletes this job at once; -1 keeps all; without KEEP, `trafikey.keep-completed`. AGE ms
//! also drops jobs finished before now−ms. At most `trafikey.retention-batch` per call.
//! ECHO: the `completed` event carries the result too (for event readers that need it after
//! retention deleted the row). A finish that leaves nothing ready or active also writes
//! `drained`. The job's DEDUP id, if it has one without a TTL, is released. METRICS max: the
//! job is counted by the minute in `metrics:completed` (`queue::tally`), a series of at most
//! max points.

use crate::config;
use crate::domain::{
    self,
    args::{Opt, Options},
    Keep,
};
use crate::errors::{self, Refusal};
use crate::host::command::{flag, opt, q, val, Arg, Command, Keys, Spec::*, Ty};
use crate::host::{ArgStr, Exec, Key, Kind, Reply, Verb};
use crate::keyspace::Role::*;
use crate::queue::{self, field, Event, Events, Holder, Release, Retire, Row, Sets, State, Tallied, Tally};

pub const KEYS: Keys = Keys::of(&[q(Job, Update), q(Active, Take), q(Completed, Update), q(Events, Append)]);
/// KEEP and AGE, the retention options COMPLETE and FAIL share.
pub const KEEP: Arg = opt("keep", "KEEP", "n", Ty::Int).range(domain::KEEP);
pub const AGE: Arg = opt("age", "AGE", "ms", Ty::Int).range(domain::AGE);
/// ECHO: the `completed` event carries the result.
pub const ECHO: Arg = flag("echo", "ECHO");
/// METRICS: the finish counts its job by the minute (COMPLETE, TRA.COMPLETENEXT, FAIL).
pub const METRICS: Arg = opt("metrics", "METRICS", "max", Ty::Int).range(domain::tally::METRICS);
pub const ARGS: &[Arg] = &[val("token", Ty::Str), val("result", Ty::Str), KEEP, AGE, ECHO, METRICS];

/// The command, declared whole: registration, ACL, `COMMAND DOCS` and the reference take it
/// from here.
pub const COMMAND: Command = Command::new::<Complete>("EMQ.COMPLETE")
    .holder()
    .tokens(&["complete.flat"])
    .keys(KEYS)
    .args(ARGS)
    .writes()
    .summary("Finish a held job with its result; 0 when the same token already completed it.")
    .complexity("O(log N), plus O(r log N) for r jobs retired");

pub struct Complete;

/// A finish as COMPLETE and TRA.COMPLETENEXT take it.
#[derive(Clone, Copy)]
pub struct Finish<'a> {
    pub token: ArgStr<'a>,
    pub result: ArgStr<'a>,
    pub keep: Option<i64>,
    pub age: Option<i64>,
    pub echo: bool,
    pub metrics: Option<i64>,
}

impl<'a> Finish<'a> {
    /// `token result [KEEP n] [AGE ms] [ECHO] [METRICS max]`.
    pub fn shape(args: &[ArgStr<'a>]) -> Result<Finish<'a>, Refusal> {
        match args {
            [token, result, rest @ ..] => {
                let o = domain::args::options(rest, &[Opt::Keep, Opt::Age, Opt::Echo, Opt::Metrics])?;
                Ok(Finish::of(*token, *result, &o))
            }
            _ => Err(Refusal::Usage),
        }
    }

    /// The finish the options of a call give (KEEP, AGE, ECHO, METRICS).
    pub fn of(token: ArgStr<'a>, result: ArgStr<'a>, o: &Options<ArgStr<'a>>) -> Finish<'a> {
        Finish { token, result, keep: o.keep, age: o.age, echo: o.echo, metrics: o.metrics }
    }
}

impl Verb for Complete {
    type Args<'a> = Finish<'a>;

    fn shape<'a>(args: &[ArgStr<'a>]) -> Result<Finish<'a>, Refusal> {
        Finish::shape(args)
    }

    fn run<'a>(x: &mut Exec<'a>, a: Finish<'a>) -> Result<Reply, Refusal> {
        let done = finish_held(x, a, Drained::Ask)?;
        Ok(Reply::Int(done.into()))
    }
}

/// Whether a finish writes `drained` itself (COMPLETE), or leaves it to its caller, which
/// knows more after it (TRA.COMPLETENEXT claims next).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Drained {
    Ask,
    Leave,
}

/// Finishes the call's held job: every check first (EMQLEASE, or false and nothing written
/// for the same token finishing again), then the writes. True when it finished it.
pub fn finish_held<'a>(x: &mut Exec<'a>, a: Finish<'a>, drained: Drained) -> Result<bool, Refusal> {
    finish_leaving(x, a, drained, Sets::default()).map(|(done, _)| done)
}

/// The keys a finish wrote that a claim after it in the same call writes too, still open:
/// `active`, which the finish may have emptied (and so deleted) through this handle, and
/// the events stream.
pub struct Left {
    pub active: Key,
    pub events: Events,
}

/// [`finish_held`], handing back `active` and the events stream open.
/// `sets`: the ready sets the call has open (TRA.COMPLETENEXT), through which a job kept
/// for the finished job's DEDUP id is made; the others are found.
pub fn finish_leaving<'a>(
    x: &mut Exec<'a>,
    a: Finish<'a>,
    drained: Drained,
    sets: Sets,
) -> Result<(bool, Left), Refusal> {
    domain::job_id(x.id)?;
    domain::token(&a.token)?;
    domain::payload(&a.result, config::max_payload(), "result")?;
    let keep = queue::keep_for(a.keep, &config::KEEP_COMPLETED)?;
    let age = queue::age(a.age)?;
    queue::tally::check(a.metrics)?;
    let job = Holder::open(x)?;
    let completed = x.open_as(Completed, Kind::ZSet)?;
    let events = Events::open(x)?;
    let tally = Tally::open(x, Tallied::Completed, a.metrics, 1)?;
    if !job.holds(&a.token) {
        // The same token finishing again: its reply was lost, the job is done.
        if Row(&job.row).completed_by(&a.token) {
            return Ok((false, Left { active: job.active, events }));
        }
        return Err(errors::lease(x.id));
    }
    let now = x.now();
    // Attempts made and the DEDUP id, in one read of the row.
    let [made, dedup, ..] = job.row.hget_many(&[&field::MADE, &field::DEDUP]);
    let made = made.and_then(|m| domain::args::int(m.bytes())).unwrap_or(0).saturating_add(1);
    let retire =
        Retire::plan(x, &completed, u64::from(keep != Keep::None), now, keep, age, &[job.id.bytes()])?;

    let id = x.id;
    let log = if keep == Keep::None { queue::log_of(x, id)? } else { None };
    // A row deleted at once: its event names the job by its alias too.
    let alias = queue::Companions::alias_of(x, log.as_ref())?;
    let release = Release::finishing_of(x, id, dedup, sets)?;
    let drains = drained == Drained::Ask && events.on() && queue::drains(x, &job.active);
    let made_s = x.int(made)?;
    let result = a.result.str_ref();
    if result.is_missing() {
        return Err(errors::host_reply());
    }

    job.active.zrem(job.id.str_ref());
    job.active.signal_ready();
    let fields = [(&field::RESULT, result), (&field::MADE, made_s.str_ref())];
    queue::finish(x, &job.row, &completed, &job.id, State::Completed, keep, &fields, log)?;
    let echoed = a.echo.then_some(result);
    let alias = alias.as_ref().map(|a| a.str_ref());
    events.emit(x, Some(job.id.str_ref()), Event::Completed { attempt: made, result: echoed, alias })?;
    // A job kept for its DEDUP id made ready (or delayed): the queue is not drained.
    let brought = release.apply(x, &events, sets)?;
    if drains && !brought {
        events.emit(x, None, Event::Drained)?;
    }
    retire.apply(&completed);
    if let Some(t) = &tally {
        t.apply(x)?;
    }
    Ok((true, Left { active: job.active, events }))
}
