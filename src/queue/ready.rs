//! Making jobs ready: the two ready sets, promotion of due delayed jobs, and the jobs found
//! past their EXPIRE time, failed instead of being promoted or handed out.

use crate::config;
use crate::domain::{self, Keep};
use crate::errors::Refusal;
use crate::host::{Access, Exec, Key, Kind, StrRef};
use crate::keyspace::Role;
use crate::metrics;

use super::events::word;
use super::{field, finish, keep_for, log_of, Event, Events, Found, Retire, Row, State};

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

/// Jobs a call found past their EXPIRE time, failed for good with error `expired` (under
/// `keep-failed`) instead of being promoted or handed out. Planned before anything is
/// written: the failed set (found, not declared, by CLAIM: opened as the caller), the
/// retention the failures cause, the logs of rows deleted at once.
pub struct Expiry<'f> {
    jobs: Vec<&'f Found>,
    plan: Option<ExpiryPlan>,
}

struct ExpiryPlan {
    failed: Key,
    retire: Retire,
    keep: Keep,
    /// Per job: deleted at once (keep-failed 0, or beyond the cap), with its log.
    at_once: Vec<Option<Option<super::Companions>>>,
    /// The jobs' DEDUP ids released.
    releases: Vec<super::Release>,
}

impl<'f> Expiry<'f> {
    /// `sets`: the call's ready and delayed sets, through which a job kept for an expiring
    /// job's DEDUP id is made.
    pub fn plan(x: &mut Exec, jobs: Vec<&'f Found>, sets: super::dedup::Sets) -> Result<Expiry<'f>, Refusal> {
        if jobs.is_empty() {
            return Ok(Expiry { jobs, plan: None });
        }
        let keep = keep_for(None, &config::KEEP_FAILED)?;
        let failed = x.open_undeclared(Role::Failed, b"", Access::Update)?;
        failed.exists_as(Kind::ZSet)?;
        let adding = if keep == Keep::None { 0 } else { jobs.len() as u64 };
        let expiring: Vec<&[u8]> = jobs.iter().map(|j| j.id.bytes()).collect();
        let retire = Retire::plan(x, &failed, adding, x.now(), keep, None, &expiring)?;
        let ids: Vec<Option<&[u8]>> = expiring.iter().copied().map(Some).collect();
        let gone = domain::gone_at_once(&ids, retire.drop_new, keep == Keep::None);
        let mut at_once = Vec::with_capacity(jobs.len());
        let mut releases = Vec::with_capacity(jobs.len());
        for (job, gone) in jobs.iter().zip(gone) {
            at_once.push(if gone { Some(log_of(x, job.id.bytes())?) } else { None });
            releases.push(super::Release::finishing(x, job.id.bytes(), &job.row, sets)?);
        }
        Ok(Expiry { jobs, plan: Some(ExpiryPlan { failed, retire, keep, at_once, releases }) })
    }

    /// Each job, already out of the set it waited in: failed, its `failed` event. Returns how
    /// many.
    pub fn apply(self, x: &Exec, events: &Events, sets: super::dedup::Sets) -> Result<u64, Refusal> {
        let Some(p) = self.plan else { return Ok(0) };
        for (job, at_once) in self.jobs.iter().zip(p.at_once) {
            let made = Row(&job.row).int(&field::MADE, 0);
            let attempts = Row(&job.row).int(&field::ATTEMPTS, 1);
            let (keep, log) = match at_once {
                Some(log) => (Keep::None, log),
                None => (p.keep, None),
            };
            let alias = super::Companions::alias_of(x, log.as_ref())?;
            finish(
                x,
                &job.row,
                &p.failed,
                &job.id,
                State::Failed,
                keep,
                &[(&field::ERROR, word::EXPIRED.str_ref())],
                log,
            )?;
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
        for r in &p.releases {
            r.apply(x, events, sets)?;
        }
        p.retire.apply(&p.failed);
        let n = self.jobs.len() as u64;
        metrics::add(&metrics::EXPIRED, n);
        Ok(n)
    }
}

/// Whether finishing the one job left in `active` drains the queue: nothing ready in `wait`
/// or `prio` and nothing else active. Asked before the finish writes, so that its `drained`
/// event follows the finish. The finishing verbs do not declare `wait` and `prio`: they are
/// found keys, read as the caller, and read only when `active` holds this job alone; a caller
/// who may not read them gets no `drained` event (never a refusal: the event is a courtesy
/// to event readers, the finish is what was asked).
pub fn drains(x: &mut Exec, active: &Key) -> bool {
    if active.len() != 1 {
        return false;
    }
    let empty = |x: &mut Exec, role: Role| {
        x.open_undeclared(role, b"", Access::Read).is_ok_and(|k| k.kind() == Kind::Empty)
    };
    empty(x, Role::Wait) && empty(x, Role::Prio)
}
