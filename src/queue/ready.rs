//! Making jobs ready: the two ready sets, promotion of due delayed jobs, and the jobs found
//! past their EXPIRE time, failed instead of being promoted or handed out.

use crate::config;
use crate::errors::Refusal;
use crate::host::{Access, Exec, Key, Kind, StrRef};
use crate::keyspace::Role;
use crate::metrics;

use super::events::word;
use super::{field, keep_for, Event, Events, Found, Row, State};

/// The two ready sets of a queue, type-checked.
pub struct Ready {
    pub wait: Key,
    pub prio: Key,
}

impl Ready {
    /// The call's declared `wait` and `prio`.
    pub fn open(x: &Exec) -> Result<Ready, Refusal> {
        Ok(Ready { wait: x.open_as(Role::Wait, Kind::List)?, prio: x.open_as(Role::Prio, Kind::ZSet)? })
    }

    /// Make a job ready by its priority: wait (at `end`: the back, or the front for requeues
    /// and LIFO) for priority 0, else prio (priority, then id; `end` changes nothing there),
    /// and wake a claimer waiting on that set. Returns the state the job now has.
    pub fn put(&self, id: StrRef<'_>, priority: i64, end: End) -> Result<State, Refusal> {
        if priority == 0 {
            if end == End::Front {
                self.wait.rpush(id)?;
            } else {
                self.wait.lpush(id)?;
            }
            self.wait.signal_ready();
            Ok(State::Wait)
        } else {
            self.prio.zadd(priority, id)?;
            self.prio.signal_ready();
            Ok(State::Prio)
        }
    }
}

/// Where in `wait` a job goes: the back (the usual), or the front (next to be claimed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    Back,
    Front,
}

impl End {
    /// The front when `lifo`, else the back.
    pub const fn lifo(lifo: bool) -> End {
        if lifo {
            End::Front
        } else {
            End::Back
        }
    }
}

/// The delayed jobs due now, earliest due first, at most a batch: read and checked first,
/// written by `apply`. CLAIM promotes before it takes; upkeep promotes on its timer.
pub struct Promotion {
    pub jobs: Vec<Found>,
}

impl Promotion {
    /// The due jobs that expired first: the caller fails them (`Expiry`).
    pub fn expired(&self) -> impl Iterator<Item = &Found> {
        self.jobs.iter().filter(|j| j.expired && !j.orphan)
    }

    pub fn read(x: &mut Exec, delayed: &Key, now: i64, batch: usize) -> Result<Promotion, Refusal> {
        let due = delayed.zrange(f64::NEG_INFINITY, now as f64, batch);
        let mut jobs = Vec::with_capacity(due.len());
        for (id, _) in due {
            jobs.push(Found::due(x, id)?);
        }
        Ok(Promotion { jobs })
    }

    /// Each job out of delayed and ready by its priority (which wakes a waiting claimer),
    /// its row's state set, one `waiting` event (`prev delayed`); an orphan id is dropped and
    /// counted. Returns how many were promoted.
    pub fn apply(&self, x: &Exec, ready: &Ready, delayed: &Key, events: &Events) -> Result<u64, Refusal> {
        let due: Vec<_> = self.jobs.iter().map(|p| p.id.str_ref()).collect();
        delayed.zrem_many(&due);
        let mut promoted = 0u64;
        for p in &self.jobs {
            if p.orphan {
                metrics::add(&metrics::ORPHANS, 1);
                continue;
            }
            if p.expired {
                // Failed by the caller's `Expiry`, not promoted.
                continue;
            }
            let state = ready.put(p.id.str_ref(), p.priority, End::Back)?;
            p.row.hset(&[(&field::STATE, state.lit().str_ref())])?;
            events.emit(x, Some(p.id.str_ref()), Event::Waiting { prev: State::Delayed })?;
            promoted = promoted.saturating_add(1);
        }
        metrics::add(&metrics::PROMOTED, promoted);
        Ok(promoted)
    }
}

/// The ready and delayed sets a call has open, through which a job it makes ready or delayed
/// on the way (a kept job its finish brings in) goes; those it lacks are found, opened as the
/// caller.
#[derive(Clone, Copy, Default)]
pub struct Sets<'k> {
    pub ready: Option<&'k Ready>,
    pub delayed: Option<&'k Key>,
}

/// Jobs a call found past their EXPIRE time, failed for good with error `expired` (under
/// `keep-failed`) instead of being promoted or handed out. Planned before anything is
/// written: the failed set (found, not declared, by CLAIM: opened as the caller), the
/// retention the failures cause, the logs of rows deleted at once.
pub struct Expiry<'f> {
    jobs: Vec<&'f Found>,
    plan: Option<(Key, super::finish::Ending)>,
}

impl<'f> Expiry<'f> {
    /// `sets`: the call's ready and delayed sets, through which a job kept for an expiring
    /// job's DEDUP id is made.
    pub fn plan(x: &mut Exec, jobs: Vec<&'f Found>, sets: Sets) -> Result<Expiry<'f>, Refusal> {
        if jobs.is_empty() {
            return Ok(Expiry { jobs, plan: None });
        }
        let keep = keep_for(None, &config::KEEP_FAILED)?;
        let failed = x.open_undeclared(Role::Failed, b"", Access::Update)?;
        failed.exists_as(Kind::ZSet)?;
        let expiring: Vec<&[u8]> = jobs.iter().map(|j| j.id.bytes()).collect();
        let ending = jobs.iter().map(|j| Some((j.id.bytes(), j.row.hget(&field::DEDUP)))).collect();
        let ending = super::finish::Ending::plan(x, &failed, keep, None, ending, &expiring, None, sets)?;
        Ok(Expiry { jobs, plan: Some((failed, ending)) })
    }

    /// Each job, already out of the set it waited in: failed, its `failed` event. Returns how
    /// many.
    pub fn apply(self, x: &Exec, events: &Events, sets: Sets) -> Result<u64, Refusal> {
        let Some((failed, mut ending)) = self.plan else { return Ok(0) };
        for (i, job) in self.jobs.iter().enumerate() {
            // Read before the row is written, or deleted at once.
            let made = Row(&job.row).int(&field::MADE, 0);
            let attempts = Row(&job.row).int(&field::ATTEMPTS, 1);
            let fields = [(&field::ERROR, word::EXPIRED.str_ref())];
            let alias = ending.end(x, i, &job.row, &failed, &job.id, State::Failed, &fields)?;
            events.emit(
                x,
                Some(job.id.str_ref()),
                Event::Failed {
                    error: word::EXPIRED.str_ref(),
                    attempt: made,
                    attempts,
                    alias: alias.as_ref().map(|a| a.str_ref()),
                },
            )?;
        }
        ending.close(x, &failed, events, sets)?;
        let n = self.jobs.len() as u64;
        metrics::add(&metrics::EXPIRED, n);
        Ok(n)
    }
}

/// Whether finishing `finishing` jobs, the last ones in `active`, drains the queue: nothing
/// ready in `wait` or `prio` and nothing else active. Asked before the finish writes, so that its `drained`
/// event follows the finish. The finishing verbs do not declare `wait` and `prio`: they are
/// found keys, read as the caller, and read only when `active` holds these jobs alone; a caller
/// who may not read them gets no `drained` event (never a refusal: the event is a courtesy
/// to event readers, the finish is what was asked).
pub fn drains(x: &mut Exec, active: &Key, finishing: usize) -> bool {
    if active.len() != finishing as u64 {
        return false;
    }
    let empty = |x: &mut Exec, role: Role| {
        x.open_undeclared(role, b"", Access::Read).is_ok_and(|k| k.kind() == Kind::Empty)
    };
    empty(x, Role::Wait) && empty(x, Role::Prio)
}
