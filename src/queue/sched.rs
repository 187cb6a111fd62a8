//! Job schedulers in the keyspace. `emq:{Q}:scheds` maps each scheduler's id to the time of
//! its pending iteration; `emq:{Q}:sched:<id>` holds its rule, its job template and its state
//! (iterations made, the pending one's time and job id). The pending iteration is an ordinary
//! delayed job, custom id `repeat:<id>:<ms>`, its row naming the scheduler (`rs`) and the
//! iteration's time (`rt`); it becomes ready as every delayed job does. When its time comes,
//! upkeep makes the next one in the same atomic step that moves the scheduler's time on: the
//! time is keyspace state, written (and replicated) as effects, so an iteration is made once
//! whichever node serves it, and a restart or a failover neither repeats nor skips one.

use crate::domain::sched::{self, Repeat, Spec};
use crate::domain::{self, id};
use crate::errors::Refusal;
use crate::host::{Access, Exec, Key, Kind, Lit, Str};
use crate::keyspace::Role;
use crate::metrics;

use super::{field, Aliases, Event, Events, Pairs, State};

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
        let held = aliases.holder(alias.ptr()).is_some_and(|j| Some(j.bytes()) != replacing);
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

impl Iteration {
    /// Create the iteration's job in `delayed` at its time: the template's fields, its
    /// creation time, its custom id, its scheduler, time and number (`round`, 1 for the
    /// first); one `delayed` event (as SCHEDULE's).
    #[allow(clippy::too_many_arguments)]
    pub fn make(
        &self,
        x: &Exec,
        sid: &Str,
        tpl: &Template,
        round: i64,
        delayed: &Key,
        aliases: &Aliases,
        events: &Events,
    ) -> Result<(), Refusal> {
        let (created, at, round) = (x.int(x.now())?, x.int(self.at)?, x.int(round)?);
        let mut pairs: Pairs = smallvec::smallvec![(&field::STATE, State::Delayed.lit().get())];
        pairs.extend(tpl.fields.iter().map(|(f, v)| (*f, v.ptr())));
        pairs.extend([
            (&field::CREATED, created.ptr()),
            (&field::ALIAS, self.alias.ptr()),
            (&field::SCHEDULER, sid.ptr()),
            (&field::ITERATION, at.ptr()),
            (&field::ROUND, round.ptr()),
        ]);
        self.row.hset(&pairs)?;
        aliases.set(self.alias.ptr(), self.id.ptr())?;
        delayed.zadd(self.at, self.id.ptr())?;
        let name = tpl.name().map(Str::ptr).ok_or_else(crate::errors::host_reply)?;
        events.emit(
            x,
            Some(self.id.ptr()),
            Event::Scheduled { due: self.at, name, alias: Some(self.alias.ptr()) },
        )?;
        super::due_at(x, self.at);
        Ok(())
    }
}

/// The scheduler's state after an iteration is made: its count, time and pending job.
pub fn advance(x: &Exec, h: &Key, count: i64, it: &Iteration) -> Result<(), Refusal> {
    let (count, next) = (x.int(count)?, x.int(it.at)?);
    h.hset(&[(&sfield::COUNT, count.ptr()), (&sfield::NEXT, next.ptr()), (&sfield::JOB, it.id.ptr())])
}

/// What a call that takes a scheduler's pending iteration does with the scheduler.
enum Step {
    /// The hash names the job but holds no rule the module can read (a client wrote it): the
    /// scheduler leaves `scheds`, counted as an orphan.
    Orphan(Str),
    /// No iteration after this one (LIMIT, END, no time left): the scheduler is deleted.
    Ended(Str, Key),
    /// The next iteration.
    Next { sid: Str, h: Key, count: i64, it: Iteration, tpl: Template },
}

/// The successors a call makes for the pending iterations it takes (to `active`, or out of
/// the queue): planned and checked whole before the call's first write, made after its own.
#[derive(Default)]
pub struct Succession {
    steps: Vec<Step>,
    scheds: Option<Key>,
}

impl Succession {
    /// For the jobs a call takes, each with its row's `rs`: those its scheduler's hash names
    /// as pending (`job`). An old iteration (retried, reprocessed) or one of a deleted
    /// scheduler makes none. The next time is after now (`Spec::after`), by the server's clock.
    pub fn plan<'j>(
        x: &mut Exec,
        taken: impl Iterator<Item = (&'j Str, &'j Str)>,
    ) -> Result<Succession, Refusal> {
        let now = x.now();
        let mut steps = Vec::new();
        let mut aliases: Option<Aliases> = None;
        let mut ids: Vec<Vec<u8>> = Vec::new();
        for (jid, sid) in taken {
            if sched::scheduler_id(sid.bytes()).is_err() {
                continue;
            }
            let h = x.open_undeclared(Role::Sched, sid.bytes(), Access::Update)?;
            if !h.exists_as(Kind::Hash)? || h.hget(&sfield::JOB).is_none_or(|j| j.bytes() != jid.bytes()) {
                continue;
            }
            let sid = x.string(sid.bytes())?;
            let (Some(spec), Some(tpl)) = (spec_of(&h), Template::of(&h)) else {
                steps.push(Step::Orphan(sid));
                continue;
            };
            let count = count_of(&h);
            let prev = int(&h, &sfield::NEXT).unwrap_or(now);
            let next = spec.after(prev, now).filter(|_| spec.may_make(count));
            let it = match next {
                Some(t) => {
                    let a = match aliases.take() {
                        Some(a) => a,
                        None => Aliases::open(x)?,
                    };
                    let taken: Vec<&[u8]> = ids.iter().map(Vec::as_slice).collect();
                    let it = plan(x, &a, sid.bytes(), &spec, t, &taken, None)?;
                    aliases = Some(a);
                    it
                }
                None => None,
            };
            match it {
                Some(it) => {
                    ids.push(it.id.bytes().to_vec());
                    steps.push(Step::Next { sid, h, count: count.saturating_add(1), it, tpl });
                }
                None => steps.push(Step::Ended(sid, h)),
            }
        }
        if steps.is_empty() {
            return Ok(Succession::default());
        }
        let scheds = x.open_undeclared(Role::Scheds, b"", Access::Update)?;
        scheds.exists_as(Kind::ZSet)?;
        Ok(Succession { steps, scheds: Some(scheds) })
    }

    /// Makes the planned successors (the alias hash opened afresh: the call's own deletions
    /// may have emptied it). Returns how many iterations it made.
    pub fn make(self, x: &mut Exec, delayed: &Key, events: &Events) -> Result<u64, Refusal> {
        let Some(scheds) = self.scheds else { return Ok(0) };
        let mut made = 0u64;
        let aliases = if self.steps.iter().any(|s| matches!(s, Step::Next { .. })) {
            Some(Aliases::open(x)?)
        } else {
            None
        };
        for step in self.steps {
            match step {
                Step::Orphan(sid) => {
                    scheds.zrem(sid.ptr());
                    metrics::add(&metrics::ORPHANS, 1);
                }
                Step::Ended(sid, h) => {
                    scheds.zrem(sid.ptr());
                    h.delete();
                }
                Step::Next { sid, h, count, it, tpl } => {
                    let aliases = aliases.as_ref().ok_or_else(crate::errors::host_reply)?;
                    it.make(x, &sid, &tpl, count, delayed, aliases, events)?;
                    advance(x, &h, count, &it)?;
                    scheds.zadd(it.at, sid.ptr())?;
                    made = made.saturating_add(1);
                }
            }
        }
        metrics::add(&metrics::SCHED_ITERATIONS, made);
        Ok(made)
    }
}

/// The job id a row's branded id check accepts, for the pending job named in a hash.
pub fn pending_job(h: &Key) -> Option<Str> {
    h.hget(&sfield::JOB).filter(|j| id::is_job_id(j.bytes()))
}
