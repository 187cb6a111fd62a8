//! `TRA.SCHEDULER 4 sched:<ID> scheds delayed events SET (EVERY ms [OFFSET ms] | PATTERN cron
//! [TZ tz]) [START ms] [END ms] [LIMIT n] [IMMEDIATELY] JOB name data [PRIORITY p]
//! [ATTEMPTS n] [BACKOFF FIXED|EXP ms] [OPTS blob]`
//! `TRA.SCHEDULER 4 sched:<ID> scheds delayed events DEL`
//!
//! SET creates or replaces job scheduler `<ID>` (1..=200 bytes): its rule, its job template,
//! and its first pending iteration — a delayed job at the iteration's time, custom id
//! `repeat:<ID>:<ms>` (`queue::sched`) — with the time after it as the scheduler's score. Replacing keeps the iteration count and, for an EVERY
//! scheduler whose interval and phase did not change, the pending time; otherwise the time
//! comes from the new rule (the first after now, or, when the pending iteration was already
//! taken, the one after it). The pending job not yet taken — delayed, or promoted early to
//! `wait` or `prio` — is deleted and made anew (events `removed` then `delayed`). A PATTERN
//! whose first time's custom id a live job holds is refused (`EMQSTATE`). Replies
//! `[job id, time]`.
//! DEL deletes the scheduler and its pending job while that is still delayed; 1, or 0 when
//! there is no such scheduler. Everything is checked before the first write. Fenced.

use crate::domain::sched::{self, Repeat, Spec};
use crate::domain::{self, args::Opt, args::Options};
use crate::errors::{printable, Refusal};
use crate::host::command::{block, flag, one_of, opt, q, val, word, Arg, Command, Keys, Spec::*, Ty};
use crate::host::{Access, ArgStr, Exec, Key, Kind, Lit, Reply, Str, StrRef, Verb};
use crate::keyspace::Role::*;
use crate::queue::sched::{self as qs, sfield, Template};
use crate::queue::{companions_of, field, meta, Aliases, Companions, Event, Events, NewJob, Row, State};

use super::options::{job_args, ATTEMPTS, BACKOFF, OPTS, PRIORITY};

pub const KEYS: Keys =
    Keys::of(&[q(Sched, Update), q(Scheds, Update), q(Delayed, Update), q(Events, Append)]);
pub const ARGS: &[Arg] = &[one_of(
    "action",
    None,
    &[
        block(
            "set",
            Some("SET"),
            &[
                one_of(
                    "repeat",
                    None,
                    &[
                        block(
                            "every",
                            Some("EVERY"),
                            &[
                                val("ms", Ty::Int).range(sched::EVERY),
                                opt("offset", "OFFSET", "ms", Ty::Int).range(sched::OFFSET),
                            ],
                        ),
                        block(
                            "pattern",
                            Some("PATTERN"),
                            &[val("cron", Ty::Str), opt("tz", "TZ", "tz", Ty::Str)],
                        ),
                    ],
                ),
                opt("start", "START", "ms", Ty::Int).range(sched::START),
                opt("end", "END", "ms", Ty::Int).range(sched::END),
                opt("limit", "LIMIT", "n", Ty::Int).range(sched::LIMIT),
                flag("immediately", "IMMEDIATELY"),
                block(
                    "job",
                    Some("JOB"),
                    &[
                        val("name", Ty::Str),
                        val("data", Ty::Str).payload(),
                        PRIORITY,
                        ATTEMPTS,
                        BACKOFF,
                        OPTS,
                    ],
                ),
            ],
        ),
        word("DEL"),
    ],
)];

/// The command, declared whole: registration, ACL, `COMMAND DOCS` and the reference take it
/// from here.
pub const COMMAND: Command = Command::new::<Scheduler>("TRA.SCHEDULER")
    .keys(KEYS)
    .args(ARGS)
    .creates()
    .summary("Create or replace a job scheduler (EVERY or a cron PATTERN, a job template), or delete one.")
    .complexity("O(log N); a cron pattern's search for its next time");

pub struct Scheduler;

pub enum Args<'a> {
    Set(Box<SetArgs<'a>>),
    Del,
}

pub struct SetArgs<'a> {
    every: Option<i64>,
    offset: Option<i64>,
    pattern: Option<ArgStr<'a>>,
    tz: Option<ArgStr<'a>>,
    start: Option<i64>,
    end: Option<i64>,
    limit: Option<i64>,
    immediately: bool,
    name: ArgStr<'a>,
    data: ArgStr<'a>,
    o: Options<ArgStr<'a>>,
}

/// The words SET takes before JOB, in any order, each at most once.
const WORDS: [&str; 9] = ["EVERY", "OFFSET", "PATTERN", "TZ", "START", "END", "LIMIT", "IMMEDIATELY", "JOB"];

fn set_args<'a>(args: &[ArgStr<'a>]) -> Result<SetArgs<'a>, Refusal> {
    let (mut every, mut offset, mut pattern, mut tz) = (None, None, None, None);
    let (mut start, mut end, mut limit, mut immediately) = (None, None, None, false);
    let mut seen: Vec<&'static str> = Vec::new();
    let mut i = 0usize;
    let (name, data, o) = loop {
        let Some(w) = args.get(i) else { return Err(Refusal::Shape("SET needs JOB name data".into())) };
        let word = WORDS
            .into_iter()
            .find(|k| w.eq_ignore_ascii_case(k.as_bytes()))
            .ok_or_else(|| Refusal::Shape(format!("unknown option {}", printable(w))))?;
        if seen.contains(&word) {
            return Err(Refusal::Shape(format!("option {word} given twice")));
        }
        seen.push(word);
        if word == "JOB" {
            let rest = args.get(i.saturating_add(1)..).unwrap_or(&[]);
            break job_args(rest, &[Opt::Priority, Opt::Attempts, Opt::Backoff, Opt::Opts])?;
        }
        if word == "IMMEDIATELY" {
            immediately = true;
            i = i.saturating_add(1);
            continue;
        }
        let v = *args
            .get(i.saturating_add(1))
            .ok_or_else(|| Refusal::Shape(format!("option {word} needs a value")))?;
        let num = || domain::args::number(&v, word).map(Some);
        match word {
            "EVERY" => every = num()?,
            "OFFSET" => offset = num()?,
            "START" => start = num()?,
            "END" => end = num()?,
            "LIMIT" => limit = num()?,
            "PATTERN" => pattern = Some(v),
            _ => tz = Some(v),
        }
        i = i.saturating_add(2);
    };
    if every.is_some() == pattern.is_some() {
        return Err(Refusal::Shape("give EVERY or PATTERN, one of them".into()));
    }
    if offset.is_some() && every.is_none() {
        return Err(Refusal::Shape("OFFSET goes with EVERY".into()));
    }
    if tz.is_some() && pattern.is_none() {
        return Err(Refusal::Shape("TZ goes with PATTERN".into()));
    }
    Ok(SetArgs { every, offset, pattern, tz, start, end, limit, immediately, name, data, o })
}

impl Verb for Scheduler {
    type Args<'a> = Args<'a>;

    fn shape<'a>(args: &[ArgStr<'a>]) -> Result<Args<'a>, Refusal> {
        match args {
            [w] if w.eq_ignore_ascii_case(b"DEL") => Ok(Args::Del),
            [w, rest @ ..] if w.eq_ignore_ascii_case(b"SET") => Ok(Args::Set(Box::new(set_args(rest)?))),
            _ => Err(Refusal::Usage),
        }
    }

    fn run<'a>(x: &mut Exec<'a>, a: Args<'a>) -> Result<Reply, Refusal> {
        sched::scheduler_id(x.id)?;
        match a {
            Args::Set(s) => set(x, *s),
            Args::Del => del(x),
        }
    }
}

/// The scheduler's pending job while it has not been taken — delayed, or promoted early to
/// `wait` or `prio` — and so replaced or deleted with the scheduler: its id, its row, its log
/// and alias entry, and the set that holds it (`wait` and `prio` found, opened as the caller).
struct Pending {
    id: Str,
    row: Key,
    companions: Option<Companions>,
    state: State,
    set: Option<Key>,
}

impl Pending {
    /// `ready_too`: also when it is in `wait` or `prio` (SET replaces it there; DEL leaves it
    /// to run, as BullMQ's removal of a scheduler does).
    fn find(x: &mut Exec, h: &Key, delayed: &Key, ready_too: bool) -> Result<Option<Pending>, Refusal> {
        let Some(id) = qs::pending_job(h) else { return Ok(None) };
        let row = x.open_undeclared(Job, id.bytes(), Access::Update)?;
        if !row.exists_as(Kind::Hash)? {
            return Ok(None);
        }
        if Row(&row).get(&field::SCHEDULER).is_none_or(|s| s.bytes() != x.id) {
            return Ok(None);
        }
        let (state, set) = match Row(&row).state() {
            Some(State::Delayed) if delayed.zscore(id.str_ref()).is_some() => (State::Delayed, None),
            Some(State::Prio) if ready_too => {
                let prio = x.open_undeclared(Prio, b"", Access::Update)?;
                if !prio.exists_as(Kind::ZSet)? || prio.zscore(id.str_ref()).is_none() {
                    return Ok(None);
                }
                (State::Prio, Some(prio))
            }
            Some(State::Wait) if ready_too => {
                // A paused queue's ready iteration is left to run on resume, as BullMQ's upsert
                // leaves it: the scheduler goes on from it as from a taken one.
                let meta = x.open_undeclared(Meta, b"", Access::Read)?;
                if meta.exists_as(Kind::Hash)? && meta.hget(&meta::PAUSED).is_some() {
                    return Ok(None);
                }
                let wait = x.open_undeclared(Wait, b"", Access::Update)?;
                if !wait.exists_as(Kind::List)? {
                    return Ok(None);
                }
                (State::Wait, Some(wait))
            }
            _ => return Ok(None),
        };
        let companions = companions_of(x, id.bytes(), &row)?;
        Ok(Some(Pending { id, row, companions, state, set }))
    }

    /// Its row, log, alias entry and set entry deleted; event `removed`.
    fn remove(self, x: &Exec, delayed: &Key, events: &Events) -> Result<(), Refusal> {
        match (&self.state, &self.set) {
            (State::Wait, Some(wait)) => wait.lrem(self.id.str_ref())?,
            (State::Prio, Some(prio)) => {
                prio.zrem(self.id.str_ref());
            }
            _ => {
                delayed.zrem(self.id.str_ref());
            }
        }
        let alias = Companions::alias_of(x, self.companions.as_ref())?;
        self.row.delete();
        if let Some(c) = self.companions {
            c.delete();
        }
        let alias = alias.as_ref().map(|a| a.str_ref());
        events.emit(x, Some(self.id.str_ref()), Event::Removed { prev: self.state, alias })
    }
}

fn set(x: &mut Exec, s: SetArgs) -> Result<Reply, Refusal> {
    let now = x.now();
    let mut spec = rule(&s, now)?;
    let job = NewJob::check(s.name, s.data, &s.o, now)?;

    // The keys, and the scheduler as it is.
    let h = x.open_as(Sched, Kind::Hash)?;
    let scheds = x.open_as(Scheds, Kind::ZSet)?;
    let delayed = x.open_as(Delayed, Kind::ZSet)?;
    let events = Events::open(x)?;
    let sid = x.string(x.id)?;
    let exists = h.kind() == Kind::Hash;
    // The last iteration made (the score is the time of the next, not yet made).
    let old_next = if exists { qs::last_of(&h) } else { None }
        .or_else(|| scheds.zscore(sid.str_ref()).map(|t| t as i64));
    let old = if exists { qs::spec_of(&h) } else { None };
    let count = if exists { qs::count_of(&h) } else { 0 };
    let pending = if exists { Pending::find(x, &h, &delayed, true)? } else { None };

    let at = first_time(&mut spec, old.as_ref(), pending.is_some(), old_next, s.offset, now);
    let at =
        at.ok_or_else(|| Refusal::Arg("the scheduler has no time to come (PATTERN, START, END)".into()))?;
    let made = if pending.is_some() { count.saturating_sub(1) } else { count };
    if !spec.may_make(made) {
        return Err(Refusal::Arg(format!("LIMIT {} is reached", spec.limit.unwrap_or(0))));
    }
    let aliases = Aliases::open(x)?;
    let replacing = pending.as_ref().map(|p| p.id.bytes());
    // A PATTERN's first time whose custom id a live job still holds (an iteration taken and
    // not yet finished, of this scheduler or of one deleted and set again) is refused, as
    // BullMQ's upsert refuses it: the time is the rule's, and passing over it would skip a
    // run the caller asked for. EVERY passes over such times (`qs::plan`).
    if matches!(spec.repeat, Repeat::Pattern { .. }) {
        let alias = x.string(&sched::alias(x.id, at))?;
        if aliases.holder(alias.str_ref()).is_some_and(|j| Some(j.bytes()) != replacing) {
            return Err(Refusal::State(format!("iteration {} already exists", printable(alias.bytes()))));
        }
    }
    let Some(it) = qs::plan(x, &aliases, x.id, &spec, at, &[], replacing)? else {
        return Err(Refusal::State(format!("scheduler {} has no free iteration id", printable(x.id))));
    };
    let tpl = template(x, &job)?;
    let fields = spec_fields(x, &spec, s.pattern, s.tz)?;

    // Write: the old pending job out, the new one in, the scheduler rewritten whole. Deleting
    // the old job's alias entry may empty the alias hash (through the pending job's own
    // handle), so the handle used for reading is closed first and the hash opened again.
    drop(aliases);
    if let Some(p) = pending {
        p.remove(x, &delayed, &events)?;
    }
    let aliases = Aliases::open(x)?;
    it.make(x, &sid, &tpl, made.saturating_add(1), qs::Place::Delayed(&delayed), &aliases, &events)?;
    h.delete();
    drop(h);
    let h = x.open_as(Sched, Kind::Hash)?;
    let mut pairs: Vec<(&Lit, StrRef)> = fields.iter().map(|(f, v)| (*f, v.str_ref())).collect();
    pairs.extend(tpl_pairs(&tpl));
    h.hset(&pairs)?;
    qs::advance(x, &h, made.saturating_add(1), &it)?;
    scheds.zadd(qs::score_after(&spec, &it, now), sid.str_ref())?;
    Ok(Reply::Array(vec![Reply::Str(it.id), Reply::Int(it.at)]))
}

/// SET's ranges: the rule (EVERY, or a PATTERN that matches some time, with its TZ), its
/// bounds, the template's IMMEDIATELY.
fn rule(s: &SetArgs, now: i64) -> Result<Spec, Refusal> {
    let repeat = match (s.every, s.pattern) {
        (Some(every), _) => sched::every(every, s.offset)?,
        (None, Some(p)) => {
            let cron = Box::new(sched::cron(&p)?);
            if !sched::ever_matches(&cron, sched::year_of(now)) {
                return Err(Refusal::Arg(format!("PATTERN {} never matches", printable(&p))));
            }
            let tz = s.tz.map(|t| sched::tz(&t)).transpose()?.unwrap_or(chrono_tz::Tz::UTC);
            Repeat::Pattern { cron, tz }
        }
        (None, None) => return Err(Refusal::Usage),
    };
    sched::bounds(s.start, s.end, s.limit, now)?;
    if s.immediately && s.start.is_some() {
        return Err(Refusal::Arg("IMMEDIATELY and START exclude each other".into()));
    }
    Ok(Spec { repeat, start: s.start, end: s.end, limit: s.limit, immediately: s.immediately })
}

/// The pending iteration's time: kept by an EVERY scheduler whose interval and phase stay
/// (`spec` then takes the old phase); the one after the last iteration when that one is
/// already ready; else the new rule's first. None: the rule has no time to come.
fn first_time(
    spec: &mut Spec,
    old: Option<&Spec>,
    pending: bool,
    old_next: Option<i64>,
    offset: Option<i64>,
    now: i64,
) -> Option<i64> {
    let kept_phase = match (old, &spec.repeat) {
        (
            Some(Spec { repeat: Repeat::Every { every: a, offset: o }, .. }),
            Repeat::Every { every: b, offset: p },
        ) if a == b && (offset.is_none() || o == p) => Some(*o),
        _ => None,
    };
    if let (Some(o), Repeat::Every { offset, .. }) = (kept_phase, &mut spec.repeat) {
        *offset = o;
    }
    match (pending, old_next) {
        (true, Some(t)) if kept_phase.is_some() => Some(t),
        (false, Some(t)) if old.is_some() => spec.after(t, now),
        _ => {
            // A phase given stays, OFFSET 0 included (times k·ms); none given is the first's.
            let first = spec.first_phased(now, offset.is_some());
            if let (Some(t), None, None) = (first, kept_phase, offset) {
                spec.settle_offset(t);
            }
            first
        }
    }
}

/// The template as the scheduler hash keeps it: the row's encodings, defaults not stored.
fn template(x: &Exec, job: &NewJob) -> Result<Template, Refusal> {
    let mut fields = vec![(&field::NAME, x.string(&job.name)?), (&field::DATA, x.string(&job.data)?)];
    if job.priority != 0 {
        fields.push((&field::PRIORITY, x.int(job.priority)?));
    }
    if job.attempts != 1 {
        fields.push((&field::ATTEMPTS, x.int(job.attempts)?));
    }
    if let Some(b) = job.backoff {
        fields.push((&field::BACKOFF, x.string(domain::backoff_encode(b).as_bytes())?));
    }
    if let Some(o) = job.opts {
        fields.push((&field::OPTS, x.string(&o)?));
    }
    Ok(Template { fields })
}

/// The template's fields under the scheduler hash's names.
fn tpl_pairs(tpl: &Template) -> Vec<(&'static Lit, StrRef<'_>)> {
    tpl.fields
        .iter()
        .filter_map(|(rf, v)| {
            qs::template_fields()
                .into_iter()
                .find(|(_, r)| std::ptr::eq(*r, *rf))
                .map(|(s, _)| (s, v.str_ref()))
        })
        .collect()
}

/// The rule's fields as the scheduler hash keeps them.
fn spec_fields(
    x: &Exec,
    spec: &Spec,
    pattern: Option<ArgStr>,
    tz: Option<ArgStr>,
) -> Result<Vec<(&'static Lit, Str)>, Refusal> {
    let mut f = Vec::with_capacity(8);
    match &spec.repeat {
        Repeat::Every { every, offset } => {
            f.push((&sfield::EVERY, x.int(*every)?));
            f.push((&sfield::OFFSET, x.int(*offset)?));
        }
        Repeat::Pattern { .. } => {
            if let Some(p) = pattern {
                f.push((&sfield::PATTERN, x.string(&p)?));
            }
            if let Some(t) = tz {
                f.push((&sfield::TZ, x.string(&t)?));
            }
        }
    }
    for (lit, v) in [(&sfield::START, spec.start), (&sfield::END, spec.end), (&sfield::LIMIT, spec.limit)] {
        if let Some(v) = v {
            f.push((lit, x.int(v)?));
        }
    }
    if spec.immediately {
        f.push((&sfield::IMMEDIATELY, x.int(1)?));
    }
    Ok(f)
}

fn del(x: &mut Exec) -> Result<Reply, Refusal> {
    let h = x.open_as(Sched, Kind::Hash)?;
    let scheds = x.open_as(Scheds, Kind::ZSet)?;
    let delayed = x.open_as(Delayed, Kind::ZSet)?;
    let events = Events::open(x)?;
    let sid = x.string(x.id)?;
    let listed = scheds.zscore(sid.str_ref()).is_some();
    if h.kind() == Kind::Empty && !listed {
        return Ok(Reply::Int(0));
    }
    let pending = Pending::find(x, &h, &delayed, false)?;
    if let Some(p) = pending {
        p.remove(x, &delayed, &events)?;
    }
    scheds.zrem(sid.str_ref());
    h.delete();
    Ok(Reply::Int(1))
}
