//! Taking jobs: a claim's promotions, its picks in the order the queue serves them, the
//! expired jobs it fails instead, and the rows it makes active. CLAIM runs it alone; the
//! finish-and-fetch verbs run it after their finishes, on the keys they have open.

use crate::config;
use crate::domain::{self, claim::Pick, claim::Plan, fnv::fnv};
use crate::errors::Refusal;
use crate::host::{ArgStr, Exec, Key, Kind, Reply, Str};
use crate::keyspace::Role::*;
use crate::metrics;

use super::sched::Succession;
use super::{field, limit, Event, Events, Expiry, Found, Promotion, Ready, Sets, State};

/// The claim's keys, opened and type-checked by a caller that wrote before the claim
/// (TRA.COMPLETENEXT): its writes touched none of them, or only through these handles, so
/// the claim's first pass uses them instead of opening them again. A second handle on a key
/// would go stale if the first emptied it: the server deletes an emptied key through the
/// handle that emptied it, and only that handle knows.
pub struct Opened {
    pub meta: Key,
    pub pass: Pass,
}

/// A claim as CLAIM and TRA.COMPLETENEXT take it, its values checked.
#[derive(Clone, Copy)]
pub struct Claiming<'a> {
    token: ArgStr<'a>,
    lease: i64,
    count: usize,
    row: bool,
    /// The worker's name, recorded in each row it takes.
    by: Option<ArgStr<'a>>,
}

/// The jobs a claim handed out: `[id name data attempt]` each, with ROW also the job's row
/// (`queue::view::claimed_view`).
pub struct Taken4 {
    jobs: Vec<[Reply; 4]>,
    rows: Option<Vec<Reply>>,
}

impl Taken4 {
    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    fn len(&self) -> usize {
        self.jobs.len()
    }

    fn extend(&mut self, more: Taken4) {
        self.jobs.extend(more.jobs);
        if let (Some(rows), Some(more)) = (&mut self.rows, more.rows) {
            rows.extend(more);
        }
    }

    pub fn reply(self) -> Reply {
        match self.rows {
            None => Reply::Rows4(self.jobs),
            Some(rows) => Reply::Array(
                self.jobs
                    .into_iter()
                    .zip(rows)
                    .map(|([a, b, c, d], row)| Reply::Array(vec![a, b, c, d, row]))
                    .collect(),
            ),
        }
    }
}

impl<'a> Claiming<'a> {
    pub fn check(
        token: ArgStr<'a>,
        lease: i64,
        count: Option<i64>,
        row: bool,
        by: Option<ArgStr<'a>>,
    ) -> Result<Claiming<'a>, Refusal> {
        domain::token(&token)?;
        let lease = domain::LEASE.check(lease)?;
        let count = domain::batch(count.unwrap_or(1), domain::CLAIM_COUNT, domain::CLAIM_PER_CALL)?;
        if let Some(by) = &by {
            domain::worker(by)?;
        }
        Ok(Claiming { token, lease, count, row, by })
    }

    /// The same claim, for at most `count` jobs.
    pub fn at_most(self, count: usize) -> Claiming<'a> {
        Claiming { count: self.count.min(count), ..self }
    }

    /// Claims, within the queue's limits (`domain::limit`); the flags say whether it met no
    /// expired job it could not go past (a waiting claimer may then wait), and whether the
    /// queue has a global concurrency (a waiter then also waits for a job to leave `active`).
    pub fn run(self, x: &mut Exec, opened: Option<Opened>) -> Result<(Taken4, bool, bool), Refusal> {
        // Read-only: opening it for writing costs an unlimited claim more; a rate-limited one
        // reopens it to record its window, once this handle is closed.
        let (meta, first) = match opened {
            Some(Opened { meta, pass }) => (meta, Some(pass)),
            None => (x.read(Meta)?, None),
        };
        meta.exists_as(Kind::Hash)?;
        let (paused, limits) = limit::read(&meta);
        drop(meta);
        let now = x.now();
        let mut count = self.count;
        if limits.any() {
            // Global concurrency is applied by each pass, on the `active` it opens.
            let allow = limits.allow(now, 0);
            count = usize::try_from(allow.take).map_or(count, |t| count.min(t));
            if let Some(at) = allow.reopen {
                // Upkeep visits the queue when its window reopens, and wakes its waiters.
                super::due_at(x, at);
            }
        }
        let serve = !paused && count > 0;
        let cap = Cap { serve, concurrency: limits.concurrency };
        let (jobs, settled) = take_past_expired(x, Claiming { count, ..self }, cap, first)?;
        limit::record(x, &limits, now, jobs.len())?;
        Ok((jobs, settled, limits.concurrency.is_some()))
    }
}

/// The keys one pass of a claim writes, open.
pub struct Pass {
    pub ready: Ready,
    pub delayed: Key,
    pub active: Key,
    pub events: Events,
}

/// What bounds every pass of a claim: whether it may take jobs at all (not paused, not held
/// by the rate limit), and the queue's global concurrency.
#[derive(Clone, Copy)]
struct Cap {
    serve: bool,
    concurrency: Option<i64>,
}

/// The ready set a taken job leaves.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Src {
    Wait,
    Prio,
}

/// A job this call takes: found in a ready set, or one it promotes first (by index); or an
/// id met a second time (a set holding it twice, or two sets holding it: no verb makes
/// either), dropped from its set as an orphan's entry is and never opened. Two handles on
/// one row would go stale when one of them deletes it (a job failed as expired under
/// keep-failed 0).
enum Taken {
    Ready(Found, Src),
    Promoted(usize),
    Twice(Str, Src),
}

/// Passes one CLAIM makes at most while the jobs it meets keep turning out expired.
const PASSES: usize = 4;

/// `take`, again while jobs it met had expired and it is still short of `count`: expired jobs
/// do not use up a claim, and a waiting claimer does not wait while a job is ready behind
/// them. A later pass that is refused (it wrote nothing) ends the claim with what it has;
/// after the last pass with expired jobs still met, the claim answers (empty or short)
/// rather than wait.
/// Returns the jobs, and whether the last pass met no expired job (only then may an empty
/// claim wait).
fn take_past_expired(
    x: &mut Exec,
    t: Claiming,
    cap: Cap,
    first: Option<Pass>,
) -> Result<(Taken4, bool), Refusal> {
    let count = t.count;
    let (mut jobs, mut expired) = take(x, t, true, cap, first)?;
    // Jobs met in all passes, handed out or failed: one CLAIM's work stays within its bound.
    let mut met = jobs.len().saturating_add(expired as usize);
    let bound = usize::try_from(domain::CLAIM_PER_CALL).unwrap_or(0);
    for _ in 1..PASSES {
        let want = count.saturating_sub(jobs.len()).min(bound.saturating_sub(met));
        if expired == 0 || want == 0 {
            break;
        }
        match take(x, t.at_most(want), false, cap, None) {
            Ok((more, e)) => {
                met = met.saturating_add(more.len()).saturating_add(e as usize);
                jobs.extend(more);
                expired = e;
            }
            Err(_) => return Ok((jobs, false)),
        }
    }
    Ok((jobs, expired == 0))
}

/// The claim itself: promotions, then (unless the cap stops it) up to `t.count` jobs, and no
/// more than the global concurrency leaves room for, as reply rows, and how many jobs it
/// failed as expired instead. `opened`: its keys, when the caller has them open. Everything
/// is read and checked first (rows are opened as the caller), then written.
fn take(
    x: &mut Exec,
    t: Claiming,
    promote: bool,
    cap: Cap,
    opened: Option<Pass>,
) -> Result<(Taken4, u64), Refusal> {
    let Pass { ready, delayed, active, events } = match opened {
        Some(p) => p,
        None => Pass::open(x)?,
    };
    let count = room(t.count, cap.concurrency, &active);
    let now = x.now();
    // Only the first pass promotes: one CLAIM promotes at most `promote-batch`.
    let batch = if promote { usize::try_from(config::get(&config::PROMOTE_BATCH)).unwrap_or(0) } else { 0 };
    let promotion = Promotion::read(x, &delayed, now, batch)?;
    let promoted = &promotion.jobs;
    let taken = if cap.serve && count > 0 { pick(x, &ready, promoted, count)? } else { Few::new() };

    // Jobs past their EXPIRE time, due or picked: failed instead (planned before writing).
    let picked_expired = taken.iter().filter_map(|t| match t {
        Taken::Ready(f, _) if f.expired && !f.orphan => Some(f),
        _ => None,
    });
    let sets = Sets { ready: Some(&ready), delayed: Some(&delayed) };
    let expiry = Expiry::plan(x, promotion.expired().chain(picked_expired).collect(), sets)?;
    // A job scheduler's pending iteration taken: its successor, planned now, made below.
    let iterations = taken.iter().filter_map(|t| {
        let f = match t {
            Taken::Ready(f, _) => f,
            Taken::Promoted(i) => promoted.get(*i)?,
            Taken::Twice(..) => return None,
        };
        f.scheduler.as_ref().filter(|_| f.live()).map(|s| (&f.id, s))
    });
    let succession = Succession::plan(x, iterations)?;

    // Write: promotions, then claims.
    promotion.apply(x, &ready, &delayed, &events)?;
    let live = take_out(&ready, &taken, promoted);
    let expired = expiry.apply(x, &events, sets)?;
    let ids: Few<_> = live.iter().map(|j| j.id.str_ref()).collect();
    let deadline = domain::deadline(now, t.lease);
    active.zadd_many(deadline, &ids)?;
    if !live.is_empty() {
        super::due_at(x, deadline);
    }
    let jobs = activate(x, &live, &t, now, deadline, &events)?;
    succession.make(x, &delayed, &events)?;
    Ok((jobs, expired))
}

impl Pass {
    fn open(x: &mut Exec) -> Result<Pass, Refusal> {
        let ready = Ready::open(x)?;
        let active = x.open_as(Active, Kind::ZSet)?;
        let delayed = x.open_as(Delayed, Kind::ZSet)?;
        Ok(Pass { ready, delayed, active, events: Events::open(x)? })
    }
}

/// `count`, cut to the room the global concurrency leaves in `active`.
fn room(count: usize, concurrency: Option<i64>, active: &Key) -> usize {
    match concurrency {
        Some(c) => {
            let room = u64::try_from(c).unwrap_or(0).saturating_sub(active.len());
            usize::try_from(room).map_or(count, |r| count.min(r))
        }
        None => count,
    }
}

/// The jobs a claim takes, in the order the queue serves them (`domain::claim`): from `wait`,
/// from `prio`'s lowest, and among the jobs this call promotes. Each row is opened (as the
/// caller) and read; an id met a second time is marked, never opened twice.
fn pick(x: &mut Exec, ready: &Ready, promoted: &[Found], count: usize) -> Result<Few<Taken>, Refusal> {
    let mut taken: Few<Taken> = Few::with_capacity(count);
    let wait_len = usize::try_from(ready.wait.len()).unwrap_or(usize::MAX);
    let prios: Few<Option<i64>> = promoted.iter().map(|p| p.live().then_some(p.priority)).collect();
    let plan = Plan::new(wait_len, &prios, count);
    let lowest = match plan.prio_needed() {
        0 => Vec::new(),
        n => ready.prio.zrange(f64::NEG_INFINITY, f64::INFINITY, n),
    };
    let prom: Few<(Option<i64>, &[u8])> =
        prios.iter().zip(promoted).map(|(p, f)| (*p, f.id.bytes())).collect();
    let prio: Few<(i64, &[u8])> = lowest.iter().map(|(m, s)| (*s as i64, m.bytes())).collect();
    let picks = plan.finish(&prom, &prio);
    drop((prom, prio));
    let mut lowest = lowest.into_iter().map(|(m, _)| Some(m)).collect::<Few<_>>();
    // Each id met so far, hashed (FNV-1a): a pick is compared in full only with a hash it
    // matches.
    let mut seen: Few<u64> = promoted.iter().map(|p| fnv(p.id.bytes())).collect();
    for pick in picks {
        let (id, src) = match pick {
            Pick::Wait(i) => {
                let id = ready
                    .wait
                    .lindex((-1i64).saturating_sub(i as i64))
                    .ok_or_else(crate::errors::host_reply)?;
                (id, Src::Wait)
            }
            Pick::Prio(i) => {
                let id = lowest.get_mut(i).and_then(Option::take).ok_or_else(crate::errors::host_reply)?;
                (id, Src::Prio)
            }
            Pick::Promoted(i) => {
                taken.push(Taken::Promoted(i));
                continue;
            }
        };
        let h = fnv(id.bytes());
        let met = |b: &[u8]| b == id.bytes();
        let twice = seen.contains(&h)
            && (promoted.iter().any(|p| met(p.id.bytes()))
                || taken.iter().any(|t| matches!(t, Taken::Ready(f, _) if met(f.id.bytes()))));
        if twice {
            taken.push(Taken::Twice(id, src));
        } else {
            seen.push(h);
            taken.push(Taken::Ready(Found::taken(x, id)?, src));
        }
    }
    Ok(taken)
}

/// Takes every pick out of its ready set (one effect per set) and counts the orphans and
/// twice-met ids dropped. Returns the live jobs, to be made active.
fn take_out<'t>(ready: &Ready, taken: &'t [Taken], promoted: &'t [Found]) -> Few<&'t Found> {
    let ordered: Few<(&Found, Src)> = sized(
        taken.len(),
        taken.iter().filter_map(|t| match t {
            Taken::Ready(f, src) => Some((f, *src)),
            Taken::Promoted(i) => {
                promoted.get(*i).map(|p| (p, if p.priority == 0 { Src::Wait } else { Src::Prio }))
            }
            Taken::Twice(..) => None,
        }),
    );
    let twice: Few<(&Str, Src)> = taken
        .iter()
        .filter_map(|t| match t {
            Taken::Twice(id, src) => Some((id, *src)),
            _ => None,
        })
        .collect();
    let from_wait = ordered.iter().map(|(_, s)| *s).chain(twice.iter().map(|(_, s)| *s));
    ready.wait.rpop_drop(from_wait.filter(|s| *s == Src::Wait).count());
    let from_prio = sized(
        ordered.len().saturating_add(twice.len()),
        ordered
            .iter()
            .map(|(j, s)| (j.id.str_ref(), *s))
            .chain(twice.iter().map(|(id, s)| (id.str_ref(), *s)))
            .filter(|(_, s)| *s == Src::Prio)
            .map(|(id, _)| id),
    );
    ready.prio.zrem_many(&from_prio);
    let dropped = ordered.iter().filter(|(j, _)| j.orphan).count().saturating_add(twice.len());
    metrics::add(&metrics::ORPHANS, dropped as u64);
    sized(ordered.len(), ordered.iter().map(|(j, _)| *j).filter(|j| j.live()))
}

/// Records each live job's claim on its row (token, `as+1`, the claim time, BY's worker; an
/// EXPIRE spent) with its `active` event, and makes the reply: `[id name data attempt]`
/// each, with ROW the row as it is after the claim.
fn activate(
    x: &Exec,
    live: &[&Found],
    t: &Claiming,
    now: i64,
    deadline: i64,
    events: &Events,
) -> Result<Taken4, Refusal> {
    let (tok, at) = (x.string(&t.token)?, x.int(now)?);
    let worker = t.by.map(|w| x.string(&w)).transpose()?;
    let mut out = Vec::with_capacity(live.len());
    let mut rows = t.row.then(|| Vec::with_capacity(live.len()));
    for job in live.iter() {
        let count =
            |s: Option<&Str>| s.and_then(|s| domain::args::int(s.bytes())).unwrap_or(0).saturating_add(1);
        // With ROW the row is read whole, once, before the claim writes it; the view is that
        // read with the claim's writes put in.
        // Filled in place: the read is some 400 bytes, and each move of it a copy.
        let mut fields = None;
        let (started, attempt, name, data) = if t.row {
            let f = fields.insert(super::view::Fields::read(&job.row));
            let (started, attempt) = (count(f.peek(&field::STARTED)), count(f.peek(&field::MADE)));
            (started, attempt, f.take(&field::NAME), f.take(&field::DATA))
        } else {
            let [started, made, name, data] =
                job.row.hget_many(&[&field::STARTED, &field::MADE, &field::NAME, &field::DATA]);
            (count(started.as_ref()), count(made.as_ref()), name, data)
        };
        let started_s = x.int(started)?;
        let claim = [
            (&field::STATE, State::Active.lit().str_ref()),
            (&field::TOKEN, tok.str_ref()),
            (&field::STARTED, started_s.str_ref()),
            (&field::CLAIMED, at.str_ref()),
        ];
        match &worker {
            Some(w) => {
                let [a, b, c, d] = claim;
                job.row.hset(&[a, b, c, d, (&field::WORKER, w.str_ref())])?
            }
            None => job.row.hset(&claim)?,
        }
        if job.expires {
            // Taken in time: its EXPIRE is spent.
            job.row.hdel(&[&field::EXPIRE])?;
        }
        events.emit(x, Some(job.id.str_ref()), Event::Active { attempt })?;
        if let (Some(rows), Some(fields)) = (&mut rows, &mut fields) {
            rows.push(super::view::claimed_view(
                fields,
                started,
                now,
                job.expires,
                deadline,
                worker.as_ref(),
            ));
        }
        out.push([
            job.id.share().map_or_else(|| Reply::bulk(job.id.bytes()), Reply::Str),
            name.map_or(Reply::Null, Reply::Str),
            data.map_or(Reply::Null, Reply::Str),
            Reply::Int(attempt),
        ]);
    }
    Ok(Taken4 { jobs: out, rows })
}

/// The call's working lists: on the stack for the usual few jobs, sized once beyond that (a
/// filter's size hint starts at zero, and growing them job by job cost more than the claim's
/// own reads: callgrind).
type Few<T> = smallvec::SmallVec<[T; 8]>;

fn sized<T>(cap: usize, items: impl Iterator<Item = T>) -> Few<T> {
    let mut v = Few::with_capacity(cap);
    v.extend(items);
    v
}
