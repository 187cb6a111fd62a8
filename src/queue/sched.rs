//! Job schedulers in the keyspace. `emq:{Q}:scheds` maps each scheduler's id to the time of
//! its next iteration not yet made; `emq:{Q}:sched:<id>` holds its rule, its job template and
//! its state (iterations made, the pending one's time and job id). An iteration is an ordinary
//! job, custom id `repeat:<id>:<ms>`, its row naming the scheduler (`rs`) and the iteration's
//! time (`rt`) and its number (`rn`). Each is made at its own time by upkeep, ready, or, when
//! a claim takes the pending one first, by that claim, delayed at its time; either maker
//! moves the score and the pending job on in the same atomic step, and acts only on what is
//! its own (upkeep on a score that came, a claim on the job the hash names as pending), so
//! each iteration is made once. The score is keyspace state, written (and replicated) as
//! effects, so whichever node serves it, a restart or a failover neither repeats nor skips
//! an iteration.
use crate::domain::sched::{self, Repeat, Spec};
use crate::domain::{self, id};
use crate::errors::Refusal;
use crate::host::{Access, Exec, Key, Kind, Lit, Str};
use crate::keyspace::Role;
use crate::metrics;

use super::{field, Aliases, End, Event, Events, Pairs, Ready, State};

/// A scheduler hash's fields.
pub mod sfield {
    use crate::host::Lit;
    macro_rules! fields {
        ($($name:ident = $text:literal;)*) => { $(pub static $name: Lit = Lit::new($text);)* };
    }
    fields! {
        EVERY = c"every";
        OFFSET = c"offset";
        PATTERN = c"pattern";
        TZ = c"tz";
        START = c"start";
        END = c"end";
        LIMIT = c"limit";
        IMMEDIATELY = c"immediately";
        COUNT = c"count";
        NEXT = c"next";
        JOB = c"job";
        NAME = c"name";
        DATA = c"data";
        PRIORITY = c"priority";
        ATTEMPTS = c"attempts";
        BACKOFF = c"backoff";
        OPTS = c"opts";
    }
}

/// The template fields, each with the row field an iteration's job takes it into.
pub fn template_fields() -> [(&'static Lit, &'static Lit); 6] {
    [
        (&sfield::NAME, &field::NAME),
        (&sfield::DATA, &field::DATA),
        (&sfield::PRIORITY, &field::PRIORITY),
        (&sfield::ATTEMPTS, &field::ATTEMPTS),
        (&sfield::BACKOFF, &field::BACKOFF),
        (&sfield::OPTS, &field::OPTS),
    ]
}

fn int(h: &Key, f: &Lit) -> Option<i64> {
    h.hget(f).and_then(|v| domain::args::int(v.bytes()))
}

/// A stored scheduler's rule; None when the hash does not hold one (written by a client).
pub fn spec_of(h: &Key) -> Option<Spec> {
    let repeat = match (int(h, &sfield::EVERY), h.hget(&sfield::PATTERN)) {
        (Some(every), None) => sched::every(every, int(h, &sfield::OFFSET)).ok()?,
        (None, Some(p)) => {
            let tz = match h.hget(&sfield::TZ) {
                Some(t) => sched::tz(t.bytes()).ok()?,
                None => chrono_tz::Tz::UTC,
            };
            Repeat::Pattern { cron: Box::new(sched::cron(p.bytes()).ok()?), tz }
        }
        _ => return None,
    };
    Some(Spec {
        repeat,
        start: int(h, &sfield::START),
        end: int(h, &sfield::END),
        limit: int(h, &sfield::LIMIT),
        immediately: h.hget(&sfield::IMMEDIATELY).is_some(),
    })
}

/// The iterations made so far (the pending one included).
pub fn count_of(h: &Key) -> i64 {
    int(h, &sfield::COUNT).unwrap_or(0)
}

/// The time of the last iteration made (the pending one).
pub fn last_of(h: &Key) -> Option<i64> {
    int(h, &sfield::NEXT)
}

/// A job template: the row fields every iteration's job gets, as server strings.
pub struct Template {
    pub fields: Vec<(&'static Lit, Str)>,
}

impl Template {
    /// As a scheduler hash holds it; None without a name.
    pub fn of(h: &Key) -> Option<Template> {
        let fields: Vec<_> =
            template_fields().into_iter().filter_map(|(s, r)| h.hget(s).map(|v| (r, v))).collect();
        fields.iter().any(|(f, _)| std::ptr::eq(*f, &field::NAME)).then_some(Template { fields })
    }

    fn priority(&self) -> i64 {
        self.fields
            .iter()
            .find(|(f, _)| std::ptr::eq(*f, &field::PRIORITY))
            .and_then(|(_, v)| domain::args::int(v.bytes()))
            .unwrap_or(0)
    }

    fn name(&self) -> Option<&Str> {
        self.fields.iter().find(|(f, _)| std::ptr::eq(*f, &field::NAME)).map(|(_, v)| v)
    }
}

/// An iteration about to be made: its time, its job's id and custom id, its row opened.
pub struct Iteration {
    pub at: i64,
    pub id: Str,
    pub alias: Str,
    row: Key,
}

/// The iteration at `at` of scheduler `sid`, or — while its custom id names a job still
/// there — the next of its times; its job id is the first free of a few tries. `taken`: ids
/// this call already chose; `replacing`: a job the call deletes first, whose custom id is
/// then free. None when no time or id is free (checked, nothing written).
pub fn plan(
    x: &mut Exec,
    aliases: &Aliases,
    sid: &[u8],
    spec: &Spec,
    mut at: i64,
    taken: &[&[u8]],
    replacing: Option<&[u8]>,
) -> Result<Option<Iteration>, Refusal> {
    let now = x.now();
    for _ in 0..sched::TRIES {
        let alias = x.string(&sched::alias(sid, at))?;
        let held = aliases.holder(alias.str_ref()).is_some_and(|j| Some(j.bytes()) != replacing);
        if held {
            match spec.after(at, now) {
                Some(t) => {
                    at = t;
                    continue;
                }
                None => return Ok(None),
            }
        }
        for probe in 0..sched::TRIES as u64 {
            let jid = sched::iteration_id(sid, at, probe);
            if taken.contains(&&jid[..]) || replacing == Some(&jid[..]) {
                continue;
            }
            let row = x.open_undeclared(Role::Job, &jid, Access::Update)?;
            if !row.exists_as(Kind::Hash)? {
                return Ok(Some(Iteration { at, id: x.string(&jid)?, alias, row }));
            }
        }
        return Ok(None);
    }
    Ok(None)
}

/// Where an iteration's job is made: `delayed` at its time, or ready at once.
pub enum Place<'k> {
    Delayed(&'k Key),
    Ready(&'k Ready),
}

impl Iteration {
    /// Create the iteration's job: the template's fields, its creation time, its custom id,
    /// its scheduler, time and number (`round`, 1 for the first). In `delayed` at its time
    /// with one `delayed` event (as SCHEDULE's), or ready by the template's priority with
    /// one `added` event (as ENQUEUE's).
    #[allow(clippy::too_many_arguments)]
    pub fn make(
        &self,
        x: &Exec,
        sid: &Str,
        tpl: &Template,
        round: i64,
        into: Place<'_>,
        aliases: &Aliases,
        events: &Events,
    ) -> Result<(), Refusal> {
        let (created, at, round) = (x.int(x.now())?, x.int(self.at)?, x.int(round)?);
        let priority = tpl.priority();
        let state = match into {
            Place::Delayed(_) => State::Delayed,
            Place::Ready(_) if priority == 0 => State::Wait,
            Place::Ready(_) => State::Prio,
        };
        let mut pairs: Pairs = smallvec::smallvec![(&field::STATE, state.lit().str_ref())];
        pairs.extend(tpl.fields.iter().map(|(f, v)| (*f, v.str_ref())));
        pairs.extend([
            (&field::CREATED, created.str_ref()),
            (&field::ALIAS, self.alias.str_ref()),
            (&field::SCHEDULER, sid.str_ref()),
            (&field::ITERATION, at.str_ref()),
            (&field::ROUND, round.str_ref()),
        ]);
        self.row.hset(&pairs)?;
        aliases.set(self.alias.str_ref(), self.id.str_ref())?;
        let name = tpl.name().map(Str::str_ref).ok_or_else(crate::errors::host_reply)?;
        let alias = Some(self.alias.str_ref());
        match into {
            Place::Delayed(delayed) => {
                delayed.zadd(self.at, self.id.str_ref())?;
                events.emit(x, Some(self.id.str_ref()), Event::Scheduled { due: self.at, name, alias })?;
                super::due_at(x, self.at);
            }
            Place::Ready(ready) => {
                ready.put(self.id.str_ref(), priority, End::Back)?;
                events.emit(x, Some(self.id.str_ref()), Event::Added { name, prio: priority, alias })?;
            }
        }
        Ok(())
    }
}

/// The score a scheduler takes in `scheds` once `it` is made: the time of its next
/// iteration, not yet made; without one, `it`'s own time, which upkeep reads as its end.
pub fn score_after(spec: &Spec, it: &Iteration, now: i64) -> i64 {
    spec.after(it.at, now).unwrap_or(it.at)
}

/// The scheduler's state after an iteration is made: its count, time and pending job.
pub fn advance(x: &Exec, h: &Key, count: i64, it: &Iteration) -> Result<(), Refusal> {
    let (count, next) = (x.int(count)?, x.int(it.at)?);
    h.hset(&[
        (&sfield::COUNT, count.str_ref()),
        (&sfield::NEXT, next.str_ref()),
        (&sfield::JOB, it.id.str_ref()),
    ])
}

/// What is done with one scheduler whose next iteration's time came or whose pending one
/// was taken.
enum Step {
    /// No rule the module can read (a client wrote the hash, or `scheds` names a scheduler
    /// without one): the scheduler leaves `scheds`, counted as an orphan.
    Orphan(Str),
    /// No iteration after the last one made (LIMIT, END, no time left): the scheduler is
    /// deleted.
    Ended(Str, Key),
    /// The next iteration, and the scheduler's score after it.
    Next { sid: Str, h: Key, count: i64, it: Iteration, tpl: Template, score: i64 },
}

/// Who made an iteration: counted apart in `INFO trafikey`.
#[derive(Clone, Copy)]
pub enum Maker {
    /// Upkeep, at the iteration's time.
    Upkeep,
    /// The claim that took the pending iteration.
    Claim,
}

/// The step for scheduler `sid` (hash `h`, a hash that exists or not) whose score in
/// `scheds` is `score`: its iteration at that time (or the next free one), or its end. A
/// score not after the last iteration made (`next`) marks that there is none. Unlisted, the
/// time after the last one made. `ids`: the job ids this call already chose.
fn step(
    x: &mut Exec,
    aliases: &mut Option<Aliases>,
    ids: &mut Vec<Vec<u8>>,
    sid: Str,
    h: Key,
    score: Option<i64>,
) -> Result<Step, Refusal> {
    let now = x.now();
    let spec = if h.exists_as(Kind::Hash)? { spec_of(&h) } else { None };
    let (Some(spec), Some(tpl)) = (spec, Template::of(&h)) else {
        return Ok(Step::Orphan(sid));
    };
    let count = count_of(&h);
    let last = int(&h, &sfield::NEXT);
    let at = match score {
        Some(s) => Some(s).filter(|s| last.is_none_or(|l| *s > l)),
        None => spec.after(last.unwrap_or(now), now),
    };
    let it = match at.filter(|_| spec.may_make(count)) {
        Some(t) => {
            let a = match aliases.take() {
                Some(a) => a,
                None => Aliases::open(x)?,
            };
            let taken: Vec<&[u8]> = ids.iter().map(Vec::as_slice).collect();
            let it = plan(x, &a, sid.bytes(), &spec, t, &taken, None);
            *aliases = Some(a);
            it?
        }
        None => None,
    };
    Ok(match it {
        Some(it) => {
            ids.push(it.id.bytes().to_vec());
            let score = score_after(&spec, &it, now);
            Step::Next { sid, h, count: count.saturating_add(1), it, tpl, score }
        }
        None => Step::Ended(sid, h),
    })
}

/// The planned steps, made in order (the alias hash opened afresh: the call's own deletions
/// may have emptied it): by upkeep, ready when the iteration's time has come; by a claim,
/// in `delayed` at its time. Returns how many iterations were made.
fn apply(
    x: &mut Exec,
    steps: Vec<Step>,
    scheds: &Key,
    delayed: &Key,
    ready: Option<&Ready>,
    events: &Events,
    by: Maker,
) -> Result<u64, Refusal> {
    let aliases =
        if steps.iter().any(|s| matches!(s, Step::Next { .. })) { Some(Aliases::open(x)?) } else { None };
    let now = x.now();
    let mut made = 0u64;
    for step in steps {
        match step {
            Step::Orphan(sid) => {
                scheds.zrem(sid.str_ref());
                metrics::add(&metrics::ORPHANS, 1);
            }
            Step::Ended(sid, h) => {
                scheds.zrem(sid.str_ref());
                h.delete();
            }
            Step::Next { sid, h, count, it, tpl, score } => {
                let aliases = aliases.as_ref().ok_or_else(crate::errors::host_reply)?;
                let place = match ready {
                    Some(r) if it.at <= now => Place::Ready(r),
                    _ => Place::Delayed(delayed),
                };
                it.make(x, &sid, &tpl, count, place, aliases, events)?;
                advance(x, &h, count, &it)?;
                scheds.zadd(score, sid.str_ref())?;
                made = made.saturating_add(1);
            }
        }
    }
    let counter = match by {
        Maker::Upkeep => &metrics::UPKEEP_ITERATIONS,
        Maker::Claim => &metrics::CLAIM_ITERATIONS,
    };
    metrics::add(counter, made);
    Ok(made)
}

/// Upkeep's step for a queue's schedulers: for each whose next iteration's time has come
/// (its score in `scheds`; at most `budget`, earliest first), make that iteration ready (one
/// job however late; its time is the score's) and move the score to the next time after
/// now, or end the scheduler. A claim that takes the pending iteration makes the next one
/// and moves the score past it, so nothing is made twice. Checked whole before anything is
/// written. Returns how many schedulers it handled.
pub fn fire(
    x: &mut Exec,
    scheds: &Key,
    delayed: &Key,
    ready: &Ready,
    events: &Events,
    budget: usize,
) -> Result<usize, Refusal> {
    let due = scheds.zrange(f64::NEG_INFINITY, x.now() as f64, budget);
    if due.is_empty() {
        return Ok(0);
    }
    let (mut aliases, mut ids) = (None, Vec::new());
    let mut steps = Vec::with_capacity(due.len());
    for (sid, score) in due {
        let h = x.open_undeclared(Role::Sched, sid.bytes(), Access::Update)?;
        steps.push(step(x, &mut aliases, &mut ids, sid, h, Some(score as i64))?);
    }
    let n = steps.len();
    apply(x, steps, scheds, delayed, Some(ready), events, Maker::Upkeep)?;
    Ok(n)
}

/// The successors a claim makes for the pending iterations it takes: planned and checked
/// whole before the call's first write, made after its own.
#[derive(Default)]
pub struct Succession {
    steps: Vec<Step>,
    scheds: Option<Key>,
}

impl Succession {
    /// For the jobs a call takes, each with its row's `rs`: those its scheduler's hash names
    /// as pending (`job`). An old iteration (retried, reprocessed, or one after which upkeep
    /// already made the next) or one of a deleted scheduler makes none. The successor's time
    /// is the scheduler's score, the next not yet made.
    pub fn plan<'j>(
        x: &mut Exec,
        taken: impl Iterator<Item = (&'j Str, &'j Str)>,
    ) -> Result<Succession, Refusal> {
        let (mut aliases, mut ids) = (None, Vec::new());
        let mut steps = Vec::new();
        let mut scheds: Option<Key> = None;
        for (jid, sid) in taken {
            if sched::scheduler_id(sid.bytes()).is_err() {
                continue;
            }
            let h = x.open_undeclared(Role::Sched, sid.bytes(), Access::Update)?;
            if !h.exists_as(Kind::Hash)? || h.hget(&sfield::JOB).is_none_or(|j| j.bytes() != jid.bytes()) {
                continue;
            }
            let z = match scheds.take() {
                Some(z) => z,
                None => {
                    let z = x.open_undeclared(Role::Scheds, b"", Access::Update)?;
                    z.exists_as(Kind::ZSet)?;
                    z
                }
            };
            let sid = x.string(sid.bytes())?;
            let score = z.zscore(sid.str_ref()).map(|t| t as i64);
            scheds = Some(z);
            steps.push(step(x, &mut aliases, &mut ids, sid, h, score)?);
        }
        if steps.is_empty() {
            return Ok(Succession::default());
        }
        Ok(Succession { steps, scheds })
    }

    /// Makes the planned successors. Returns how many iterations it made.
    pub fn make(self, x: &mut Exec, delayed: &Key, events: &Events) -> Result<u64, Refusal> {
        let Some(scheds) = self.scheds else { return Ok(0) };
        apply(x, self.steps, &scheds, delayed, None, events, Maker::Claim)
    }
}

/// Whether job `id` is its scheduler's pending iteration: its row names a scheduler (`rs`)
/// whose hash names the job as pending (`job`). The hash is read as the caller;
/// `row` is the job's row, opened by the caller.
pub fn is_pending(x: &mut Exec, id: &[u8], row: &Key) -> Result<bool, Refusal> {
    if !row.exists_as(Kind::Hash)? {
        return Ok(false);
    }
    let Some(sid) = row.hget(&field::SCHEDULER).filter(|s| sched::scheduler_id(s.bytes()).is_ok()) else {
        return Ok(false);
    };
    let h = x.open_undeclared(Role::Sched, sid.bytes(), Access::Read)?;
    Ok(h.exists_as(Kind::Hash)? && h.hget(&sfield::JOB).is_some_and(|j| j.bytes() == id))
}

/// The job id a row's branded id check accepts, for the pending job named in a hash.
pub fn pending_job(h: &Key) -> Option<Str> {
    h.hget(&sfield::JOB).filter(|j| id::is_job_id(j.bytes()))
}
