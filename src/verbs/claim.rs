//! `EMQ.CLAIM 6 wait prio active delayed meta events token lease_ms [COUNT n] [BLOCK ms] [ROW] [BY worker]`
//! `EMQ.CLAIM 6 wait prio active delayed meta events PAUSE|RESUME`
//!
//! First promotes due delayed jobs (at most `trafikey.promote-batch`), then, unless the queue
//! is paused, takes up to COUNT ready jobs in the order the queue serves them
//! (`domain::claim`), each becoming active with deadline now+lease_ms; the row records the
//! token, `as+1` and the claim time, and with BY the worker's name (`w`, which only the next
//! claim with BY replaces). Replies `[[id name data attempt] ...]`, with ROW each entry also
//! the row as `job::claimed_view` shows it. The queue's
//! limits (TRA.LIMIT: a rate window, a FOR, global concurrency) cut how many it takes
//! (`domain::limit`); under a rate it records its window in `meta`.
//! With BLOCK and nothing to take (none ready, paused, or held by a limit), the caller waits
//! up to ms (0: no limit) for a job of this queue to become ready, for RESUME or for the
//! limit to let it claim — `wait`, `prio` and `meta` are signalled by every verb that makes
//! a job ready, by upkeep's promotions, by RESUME, by TRA.LIMIT and by upkeep when a window
//! or a FOR ends; `active` (waited on under global concurrency) by every verb that takes a
//! job out of it — and the claim then runs as it would at that moment (`host::blocking`); the timeout
//! answers the empty array. Inside MULTI or a script it answers at once, as without BLOCK.
//! PAUSE/RESUME write `meta` and need the caller's write permission on it (CLAIM declares
//! `meta` read-only, so a worker with read-only `meta` can claim but not pause).

use crate::config;
use crate::domain::{self, args::Opt, claim::Pick, claim::Plan, fnv::fnv};
use crate::errors::Refusal;
use crate::host::command::{block, flag, one_of, opt, q, val, word, Arg, Command, Keys, Spec::*, Ty};
use crate::host::{one, Access, ArgStr, Exec, Key, Kind, Reply, Str, Verb};
use crate::keyspace::Role::{self, *};
use crate::metrics;
use crate::queue::sched::Succession;
use crate::queue::{field, limit, meta, Event, Events, Expiry, Found, Promotion, Ready, Sets, State};

pub const KEYS: Keys = Keys::of(&[
    q(Wait, Update),
    q(Prio, Update),
    q(Active, Insert),
    q(Delayed, Take),
    q(Meta, Read),
    q(Events, Append),
]);
pub const ARGS: &[Arg] = &[one_of(
    "mode",
    None,
    &[
        block(
            "take",
            None,
            &[
                val("token", Ty::Str),
                val("lease_ms", Ty::Int).range(domain::LEASE),
                opt("count", "COUNT", "n", Ty::Int).range(domain::CLAIM_COUNT),
                opt("block", "BLOCK", "ms", Ty::Int).range(domain::BLOCK),
                flag("row", "ROW"),
                BY,
            ],
        ),
        word("PAUSE"),
        word("RESUME"),
    ],
)];

/// `BY worker`, on every verb that claims: the name each row it takes records.
pub const BY: Arg = opt("by", "BY", "worker", Ty::Str);

/// The command, declared whole: registration, ACL, `COMMAND DOCS` and the reference take it
/// from here.
pub const COMMAND: Command = Command::new::<Claim>("EMQ.CLAIM")
    .tokens(&["claim", "claim.pause"])
    .keys(KEYS)
    .args(ARGS)
    .writes()
    .summary("Promote due delayed jobs, then take up to COUNT ready jobs under a lease; or pause/resume the queue.")
    .complexity("O((n + p) log N) for n jobs taken and p promoted");

pub struct Claim;

pub enum Args<'a> {
    Take {
        token: ArgStr<'a>,
        lease: i64,
        count: Option<i64>,
        block: Option<i64>,
        row: bool,
        by: Option<ArgStr<'a>>,
    },
    Pause(bool),
}

/// The keys a waiting claimer is woken by: the ready sets, and `meta` for RESUME, a change
/// of the queue's limits and the reopening of its rate window (upkeep signals it then).
const WAKE_ON: &[Role] = &[Wait, Prio, Meta];
/// The same and `active`, for a queue under global concurrency: a job leaving `active` lets
/// a claim proceed, and every verb that takes one out signals it.
const WAKE_ON_ACTIVE: &[Role] = &[Wait, Prio, Meta, Active];

impl Verb for Claim {
    type Args<'a> = Args<'a>;

    fn shape<'a>(args: &[ArgStr<'a>]) -> Result<Args<'a>, Refusal> {
        match args {
            [w] if w.eq_ignore_ascii_case(b"PAUSE") => Ok(Args::Pause(true)),
            [w] if w.eq_ignore_ascii_case(b"RESUME") => Ok(Args::Pause(false)),
            [token, lease, rest @ ..] => {
                let lease = domain::args::number(lease, "lease_ms")?;
                let o = domain::args::options(rest, &[Opt::Count, Opt::Block, Opt::Row, Opt::By])?;
                Ok(Args::Take { token: *token, lease, count: o.count, block: o.block, row: o.row, by: o.by })
            }
            _ => Err(Refusal::Usage),
        }
    }

    fn run<'a>(x: &mut Exec<'a>, a: Args<'a>) -> Result<Reply, Refusal> {
        match a {
            Args::Pause(on) => pause(x, on),
            Args::Take { token, lease, count, block, row, by } => {
                let take = Take::check(token, lease, count, row, by)?;
                let block = block.map(|b| domain::BLOCK.check(b)).transpose()?;
                let (jobs, settled, concurrency) = take.run(x, None)?;
                Ok(match block {
                    // Nothing ready (paused, or limited): wait for a job to become ready, for
                    // RESUME, or for the limit to let the claim proceed.
                    Some(timeout_ms) if jobs.is_empty() && settled => {
                        Reply::Block { timeout_ms, roles: if concurrency { WAKE_ON_ACTIVE } else { WAKE_ON } }
                    }
                    _ => jobs.reply(),
                })
            }
        }
    }
}

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
pub struct Take<'a> {
    token: ArgStr<'a>,
    lease: i64,
    count: usize,
    row: bool,
    /// The worker's name, recorded in each row it takes.
    by: Option<ArgStr<'a>>,
}

/// The jobs a claim handed out: `[id name data attempt]` each, with ROW also the job's row
/// (`job::claimed_view`).
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

impl<'a> Take<'a> {
    pub fn check(
        token: ArgStr<'a>,
        lease: i64,
        count: Option<i64>,
        row: bool,
        by: Option<ArgStr<'a>>,
    ) -> Result<Take<'a>, Refusal> {
        domain::token(&token)?;
        let lease = domain::LEASE.check(lease)?;
        let count = domain::batch(count.unwrap_or(1), domain::CLAIM_COUNT, domain::CLAIM_PER_CALL)?;
        if let Some(by) = &by {
            domain::worker(by)?;
        }
        Ok(Take { token, lease, count, row, by })
    }

    /// The same claim, for at most `count` jobs.
    pub fn at_most(self, count: usize) -> Take<'a> {
        Take { count: self.count.min(count), ..self }
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
                crate::queue::due_at(x, at);
            }
        }
        let serve = !paused && count > 0;
        let cap = Cap { serve, concurrency: limits.concurrency };
        let (jobs, settled) = take_past_expired(x, Take { count, ..self }, cap, first)?;
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

fn pause(x: &mut Exec, on: bool) -> Result<Reply, Refusal> {
    let meta_name = x.key_name(Meta)?;
    x.caller()?.key(meta_name, Access::Write)?;
    let meta = x.open_as(Meta, Kind::Hash)?;
    let events = Events::open(x)?;
    let paused = meta.hget(&meta::PAUSED).is_some();
    if paused == on {
        return Ok(Reply::Int(0));
    }
    if on {
        meta.hset(&[(&meta::PAUSED, one().str_ref())])?;
    } else {
        meta.hdel(&[&meta::PAUSED])?;
        meta.signal_ready();
    }
    events.emit(x, None, if on { Event::Paused } else { Event::Resumed })?;
    Ok(Reply::Int(1))
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
    t: Take,
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
/// failed as expired instead. `opened`: its keys, when the caller has them open.
fn take(
    x: &mut Exec,
    t: Take,
    promote: bool,
    cap: Cap,
    opened: Option<Pass>,
) -> Result<(Taken4, u64), Refusal> {
    let Take { token, lease, count, row, by } = t;
    let (ready, active, delayed, events) = match opened {
        Some(p) => (p.ready, p.active, p.delayed, p.events),
        None => {
            let ready = Ready::open(x)?;
            let active = x.open_as(Active, Kind::ZSet)?;
            let delayed = x.open_as(Delayed, Kind::ZSet)?;
            (ready, active, delayed, Events::open(x)?)
        }
    };
    let count = match cap.concurrency {
        Some(c) => {
            let room = u64::try_from(c).unwrap_or(0).saturating_sub(active.len());
            usize::try_from(room).map_or(count, |r| count.min(r))
        }
        None => count,
    };
    let now = x.now();

    // Read and check everything first (rows are opened as the caller): due delayed jobs,
    // then the jobs taken.
    // Only the first pass promotes: one CLAIM promotes at most `promote-batch`.
    let batch = if promote { usize::try_from(config::get(&config::PROMOTE_BATCH)).unwrap_or(0) } else { 0 };
    let promotion = Promotion::read(x, &delayed, now, batch)?;
    let promoted = &promotion.jobs;
    // The jobs taken, in the order the queue serves them.
    let mut taken: Few<Taken> = Few::with_capacity(count);
    if cap.serve && count > 0 {
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
                    let id =
                        lowest.get_mut(i).and_then(Option::take).ok_or_else(crate::errors::host_reply)?;
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
    }

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

    // Take every pick out of its ready set (one effect per set), then make the live ones
    // active (one effect) and record each claim on its row.
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
    let live: Few<&Found> = sized(ordered.len(), ordered.iter().map(|(j, _)| *j).filter(|j| j.live()));
    let dropped = ordered.iter().filter(|(j, _)| j.orphan).count().saturating_add(twice.len());
    metrics::add(&metrics::ORPHANS, dropped as u64);
    let expired = expiry.apply(x, &events, sets)?;
    let ids: Few<_> = live.iter().map(|j| j.id.str_ref()).collect();
    let deadline = domain::deadline(now, lease);
    active.zadd_many(deadline, &ids)?;
    if !live.is_empty() {
        crate::queue::due_at(x, deadline);
    }
    let (tok, at) = (x.string(&token)?, x.int(now)?);
    let worker = by.map(|w| x.string(&w)).transpose()?;
    let mut out = Vec::with_capacity(live.len());
    let mut rows = row.then(|| Vec::with_capacity(live.len()));
    for job in live.iter() {
        let count =
            |s: Option<&Str>| s.and_then(|s| domain::args::int(s.bytes())).unwrap_or(0).saturating_add(1);
        // With ROW the row is read whole, once, before the claim writes it; the view is that
        // read with the claim's writes put in.
        // Filled in place: the read is some 400 bytes, and each move of it a copy.
        let mut fields = None;
        let (started, attempt, name, data) = if row {
            let f = fields.insert(super::job::Fields::read(&job.row));
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
            rows.push(super::job::claimed_view(fields, started, now, job.expires, deadline, worker.as_ref()));
        }
        out.push([
            job.id.share().map_or_else(|| Reply::bulk(job.id.bytes()), Reply::Str),
            name.map_or(Reply::Null, Reply::Str),
            data.map_or(Reply::Null, Reply::Str),
            Reply::Int(attempt),
        ]);
    }
    succession.make(x, &delayed, &events)?;
    Ok((Taken4 { jobs: out, rows }, expired))
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
