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

impl Iteration {
    /// Create the iteration's job in `delayed` at its time: the template's fields, its
    /// creation time, its custom id, its scheduler and time; one `delayed` event (as
    /// SCHEDULE's).
    pub fn make(
        &self,
        x: &Exec,
        sid: &Str,
        tpl: &Template,
        delayed: &Key,
        aliases: &Aliases,
        events: &Events,
    ) -> Result<(), Refusal> {
        let (created, at) = (x.int(x.now())?, x.int(self.at)?);
        let mut pairs: Pairs = smallvec::smallvec![(&field::STATE, State::Delayed.lit().str_ref())];
        pairs.extend(tpl.fields.iter().map(|(f, v)| (*f, v.str_ref())));
        pairs.extend([
            (&field::CREATED, created.str_ref()),
            (&field::ALIAS, self.alias.str_ref()),
            (&field::SCHEDULER, sid.str_ref()),
            (&field::ITERATION, at.str_ref()),
        ]);
        self.row.hset(&pairs)?;
        aliases.set(self.alias.str_ref(), self.id.str_ref())?;
        delayed.zadd(self.at, self.id.str_ref())?;
        let name = tpl.name().map(Str::str_ref).ok_or_else(crate::errors::host_reply)?;
        events.emit(
            x,
            Some(self.id.str_ref()),
            Event::Scheduled { due: self.at, name, alias: Some(self.alias.str_ref()) },
        )?;
        super::due_at(x, self.at);
        Ok(())
    }
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

/// What upkeep does with one scheduler whose time has come.
enum Due {
    /// The zset names a scheduler without a (valid) hash: dropped.
    Orphan(Str),
    /// No iteration after this one (LIMIT, END, no time left): the scheduler is deleted.
    Ended(Str, Key),
    /// The next iteration.
    Next { sid: Str, h: Key, count: i64, it: Iteration, tpl: Template },
}

/// Upkeep's step for a queue's schedulers: for each whose pending iteration's time has come
/// (at most `budget`, earliest first), make the next iteration, or end the scheduler. Checked
/// whole before anything is written. Returns how many schedulers it handled.
pub fn fire(
    x: &mut Exec,
    scheds: &Key,
    delayed: &Key,
    events: &Events,
    budget: usize,
) -> Result<usize, Refusal> {
    let now = x.now();
    let due = scheds.zrange(f64::NEG_INFINITY, now as f64, budget);
    if due.is_empty() {
        return Ok(0);
    }
    let aliases = Aliases::open(x)?;
    let mut plans = Vec::with_capacity(due.len());
    let mut ids: Vec<Vec<u8>> = Vec::new();
    for (sid, score) in due {
        let h = x.open_undeclared(Role::Sched, sid.bytes(), Access::Update)?;
        let spec = if h.exists_as(Kind::Hash)? { spec_of(&h) } else { None };
        let (Some(spec), Some(tpl)) = (spec, Template::of(&h)) else {
            plans.push(Due::Orphan(sid));
            continue;
        };
        let count = count_of(&h);
        let next = spec.after(score as i64, now).filter(|_| spec.may_make(count));
        let taken: Vec<&[u8]> = ids.iter().map(Vec::as_slice).collect();
        let it = match next {
            Some(t) => plan(x, &aliases, sid.bytes(), &spec, t, &taken, None)?,
            None => None,
        };
        match it {
            Some(it) => {
                ids.push(it.id.bytes().to_vec());
                plans.push(Due::Next { sid, h, count: count.saturating_add(1), it, tpl });
            }
            None => plans.push(Due::Ended(sid, h)),
        }
    }
    let n = plans.len();
    for p in plans {
        match p {
            Due::Orphan(sid) => {
                scheds.zrem(sid.str_ref());
                metrics::add(&metrics::ORPHANS, 1);
            }
            Due::Ended(sid, h) => {
                scheds.zrem(sid.str_ref());
                h.delete();
            }
            Due::Next { sid, h, count, it, tpl } => {
                it.make(x, &sid, &tpl, delayed, &aliases, events)?;
                advance(x, &h, count, &it)?;
                scheds.zadd(it.at, sid.str_ref())?;
                metrics::add(&metrics::UPKEEP_ITERATIONS, 1);
            }
        }
    }
    Ok(n)
}

/// The job id a row's branded id check accepts, for the pending job named in a hash.
pub fn pending_job(h: &Key) -> Option<Str> {
    h.hget(&sfield::JOB).filter(|j| id::is_job_id(j.bytes()))
}
