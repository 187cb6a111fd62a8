//! The queue keeps itself: on a primary, the module promotes delayed jobs as they fall due and
//! reclaims leases that lapsed (ran out), on its own timer, for every queue it knows (`registry`).
//!
//! Each tick takes the queues whose time has come from the registry's agenda, earliest first,
//! and for each runs one internal command (its keys declared like any verb's, run through the
//! same shape → layout → fence → domain):
//! promote what is due (as CLAIM's own promotion does: ready by priority, a `waiting` event,
//! and the ready set signalled, so a claimer waiting with BLOCK is woken), then reclaim what
//! lapsed (as `EMQ.STALLED` does, under `trafikey.max-stalls`); when a limited queue's
//! rate window or FOR has ended, it signals `meta` so that the claimers it held back claim
//! (the claim that was held back put that time on the agenda); and it makes the next
//! iteration of each job scheduler whose time has come (`queue::sched`). One tick handles at most
//! `trafikey.upkeep-batch` jobs over all queues and stops after about a millisecond, so the
//! event loop is never held long; the rest waits for the next tick, at once. The timer then
//! sleeps until the next thing due — the earliest due delayed job or lease deadline seen, at
//! most `trafikey.upkeep-tick-ms` — and a verb that schedules something earlier wakes it
//! sooner (`host::timer::wake_by`).
//!
//! Upkeep acts as the server, not as a user: ACL does not apply to it. It does nothing on a
//! replica, while loading, in a database whose fence key is not this module's (the fence
//! refuses its command there), or with `trafikey.upkeep no` (then CLAIM still promotes and
//! `EMQ.STALLED` still reclaims, as without upkeep). Its writes replicate as effects like a
//! verb's, each tick one transaction. A lease is reclaimed once: reclaiming takes it out of
//! `active`.

#![forbid(unsafe_code)]

use std::os::raw::c_int;
use std::sync::atomic::Ordering;
use std::sync::Mutex;

use crate::config;
use crate::domain::{self, args::Opt};
use crate::errors::Refusal;
use crate::host::command::{opt, q, Arg, Command, Keys, Spec::*, Ty};
use crate::host::{self, timer, ArgStr, Ctx, Exec, Kind, Reply, Str, Verb};
use crate::keyspace::{self, Role, Role::*};
use crate::metrics;
use crate::queue::stall;
use crate::queue::{Events, Expiry, Found, Promotion, Ready, Row, Sets, State};
use crate::registry::{self, Queue};

const KEYS: Keys = Keys::of(&[
    q(Delayed, Take),
    q(Wait, Insert),
    q(Prio, Insert),
    q(Active, Take),
    q(Failed, Update),
    q(Events, Append),
    q(Completed, Read),
    q(Meta, Read),
    q(Scheds, Update),
]);
const ARGS: &[Arg] = &[opt("count", "COUNT", "n", Ty::Int)];

/// The internal command one queue's upkeep runs. Never registered: no client can call it.
static UPKEEP: Command = Command::new::<Upkeep>("TRAFIKEY.UPKEEP")
    .keys(KEYS)
    .args(ARGS)
    .writes()
    .summary("One queue's upkeep: promote due delayed jobs, reclaim lapsed leases, fail expired jobs.")
    .complexity("O(n log N) for n jobs");
struct Upkeep;

impl Verb for Upkeep {
    type Args<'a> = i64;

    fn shape(args: &[ArgStr]) -> Result<i64, Refusal> {
        domain::args::options(args, &[Opt::Count])?.count.ok_or(Refusal::Usage)
    }

    /// Replies `[promoted, reclaimed, next, expired, iterations]`: `next` the earliest due
    /// time, lease deadline or scheduler time still pending in the queue (ms), -1 when nothing
    /// is, -2 when none of its keys is left; `expired` the waiting jobs failed for their
    /// EXPIRE time; `iterations` the job schedulers whose time had come (each made its next
    /// iteration, or ended).
    fn run(x: &mut Exec<'_>, count: i64) -> Result<Reply, Refusal> {
        let budget = usize::try_from(count).unwrap_or(0);
        let now = x.now();
        let queue: registry::Queue = (timer::selected(x.ctx()), x.queue.to_vec());
        // Every key checked before the first write; each phase closes its keys before the
        // next opens them again (an emptied set is deleted when its handle closes).
        let (promoted, lapsed, expired) = promote_and_expire(x, &queue, now, budget)?;
        let left = budget.saturating_sub(usize::try_from(promoted.saturating_add(expired)).unwrap_or(budget));
        // Job schedulers whose next iteration's time has come: each makes it, ready, in one
        // step with its next time.
        let fired = if left > 0 {
            let scheds = x.open_as(Scheds, Kind::ZSet)?;
            let delayed = x.open_as(Delayed, Kind::ZSet)?;
            let events = Events::open(x)?;
            let ready = Ready::open(x)?;
            crate::queue::sched::fire(x, &scheds, &delayed, &ready, &events, left)?
        } else {
            0
        };
        let left = left.saturating_sub(fired);
        let reclaimed = if left > 0 && lapsed {
            let max_stalls = stall::max_stalls_of(&x.read(Meta)?)?;
            let count = left.min(domain::STALLED_COUNT_MAX as usize) as i64;
            let (requeued, failed) = stall::reclaim(x, max_stalls, count)?;
            requeued.len().saturating_add(failed.len()) as i64
        } else {
            0
        };
        let next = next_due(x, now)?;
        Ok(Reply::Array(vec![
            Reply::Int(promoted as i64),
            Reply::Int(reclaimed),
            Reply::Int(next),
            Reply::Int(expired as i64),
            Reply::Int(fired as i64),
        ]))
    }
}

/// The visit's first phase: due delayed jobs promoted, and waiting jobs whose EXPIRE time has
/// come (the index in memory says which) failed, within `budget`. Returns how many were
/// promoted, whether a lease has run out (the reclaim then has work), and how many expired.
fn promote_and_expire(
    x: &mut Exec<'_>,
    queue: &registry::Queue,
    now: i64,
    budget: usize,
) -> Result<(u64, bool, u64), Refusal> {
    let ready = Ready::open(x)?;
    let delayed = x.open_as(Delayed, Kind::ZSet)?;
    let active = x.open_as(Active, Kind::ZSet)?;
    x.open_as(Failed, Kind::ZSet)?;
    let events = Events::open(x)?;
    // A lease has run out: the reclaim below has work.
    let lapsed = !active.zrange(f64::NEG_INFINITY, now.saturating_sub(1) as f64, 1).is_empty();
    let promotion = Promotion::read(x, &delayed, now, budget)?;
    // Waiting jobs whose EXPIRE time has come (the index in memory says which).
    let mut expiring: Vec<(Found, State)> = Vec::new();
    for id in registry::take_expired(queue, now, budget) {
        if promotion.jobs.iter().any(|p| p.id.bytes() == id.as_slice()) {
            continue;
        }
        let Some(s) = x.ctx().string(&id) else { continue };
        let job = Found::taken(x, s)?;
        let state = Row(&job.row).state();
        match state {
            Some(st @ (State::Wait | State::Prio | State::Delayed)) if job.expired && !job.orphan => {
                // Deep in a long wait list it is left for the CLAIM that reaches it.
                if st == State::Wait && !ready.wait.near_tail(job.id.str_ref(), WAIT_WINDOW)? {
                    registry::note_expiry(queue.0, x.queue, &id, now.saturating_add(RETRY_MS));
                    continue;
                }
                expiring.push((job, st));
            }
            _ => {}
        }
    }
    let sets = Sets { ready: Some(&ready), delayed: Some(&delayed) };
    let expiry = Expiry::plan(x, promotion.expired().chain(expiring.iter().map(|(j, _)| j)).collect(), sets)?;
    let promoted = promotion.apply(x, &ready, &delayed, &events)?;
    for (job, st) in &expiring {
        match st {
            State::Wait => {
                ready.wait.lrem_from_tail(job.id.str_ref())?;
            }
            State::Prio => {
                ready.prio.zrem_many(&[job.id.str_ref()]);
            }
            _ => {
                delayed.zrem_many(&[job.id.str_ref()]);
            }
        }
    }
    let expired = expiry.apply(x, &events, sets)?;
    Ok((promoted, lapsed, expired))
}

/// The earliest due time, lease deadline, scheduler time or limit's end still pending in the
/// queue (ms); -1 when nothing is, -2 when none of its keys is left.
fn next_due(x: &mut Exec<'_>, now: i64) -> Result<i64, Refusal> {
    let first = |role: Role| -> Result<Option<i64>, Refusal> {
        let k = x.read(role)?;
        Ok(k.zrange(f64::NEG_INFINITY, f64::INFINITY, 1).first().map(|(_, s)| *s as i64))
    };
    let reopen = limit_reopens(x, now)?;
    let next =
        [first(Delayed)?, first(Active)?, first(Scheds)?, reopen].into_iter().flatten().min().unwrap_or(-1);
    let mut gone = true;
    for role in [Delayed, Wait, Prio, Active, Failed, Events, Completed, Meta, Scheds] {
        gone &= x.read(role)?.kind() == Kind::Empty;
    }
    Ok(if gone { -2 } else { next })
}

/// A limited queue's rate window or manual limit: while it holds, when it ends (upkeep comes
/// back then); once it has ended, with jobs ready, `meta` is signalled so that the claimers
/// it held back, waiting with BLOCK, claim now.
fn limit_reopens(x: &Exec, now: i64) -> Result<Option<i64>, Refusal> {
    let meta = x.read(Meta)?;
    if !meta.exists_as(Kind::Hash)? {
        return Ok(None);
    }
    let (_, limits) = crate::queue::limit::read(&meta);
    if let Some(at) = limits.allow(now, 0).reopen {
        return Ok(Some(at));
    }
    let ended = limits.hold != 0 || (limits.rate.is_some() && limits.until != 0);
    if ended && (x.read(Wait)?.len() > 0 || x.read(Prio)?.len() > 0) {
        meta.signal_ready();
    }
    Ok(None)
}

/// The scan in progress.
struct Search {
    /// A scan of every database is to start (their number is found by selecting them).
    scan_all: bool,
    /// The databases still to scan, and the scan of the first of them.
    scan_dbs: Vec<c_int>,
    scan: Option<timer::Scan>,
}

static SEARCH: Mutex<Search> = Mutex::new(Search { scan_all: false, scan_dbs: Vec::new(), scan: None });

fn search() -> std::sync::MutexGuard<'static, Search> {
    SEARCH.lock().unwrap_or_else(|e| e.into_inner())
}

/// How far from the tail of a wait list upkeep looks for an expired job (CLAIM fails one
/// further in when it gets there), and when it looks again.
const WAIT_WINDOW: i64 = 1000;
const RETRY_MS: i64 = 1000;

/// Scan steps a tick takes at most (each a handful of keys).
const SCAN_STEPS: usize = 100;
/// How long one tick may work, µs: the scan and the queues' steps together. The clock is read
/// after every scan step and every queue step, and a queue step is not started when the
/// longest one this tick took would not fit in what is left, so a tick ends within about the
/// budget plus one short step (under 2 ms in all, even beside a million waiting jobs).
const TICK_BUDGET_US: u64 = 1000;
/// The part of the budget the keyspace scan may use when it runs (at least one step a tick);
/// the rest is the queues'.
const SCAN_BUDGET_US: u64 = 400;
/// Jobs one queue step handles at most (each step is one internal command on one queue): small
/// enough that a step stays a fraction of the budget beside a million jobs (about 10 µs a job
/// there), large enough that a step's fixed cost (its keys opened, the next due time read)
/// stays small beside its jobs.
pub const STEP_JOBS: usize = 32;

/// Load time: start the timer and look for queues.
pub fn start(ctx: Ctx<'_>) -> Result<(), String> {
    rescan(-1);
    timer::start(ctx, timer::Hooks { tick, on, rescan })
}

/// Look for the queues of database `db` (all with -1) again. A look already pending is
/// widened, never narrowed: a flush of one database while every database waits to be looked
/// at leaves them all to it.
fn rescan(db: c_int) {
    registry::clear(db);
    let mut s = search();
    if db < 0 {
        s.scan = None;
        s.scan_all = true;
        s.scan_dbs.clear();
    } else if !s.scan_all {
        if s.scan_dbs.first() == Some(&db) {
            // Being looked at: from its start again.
            s.scan = None;
        } else if !s.scan_dbs.contains(&db) {
            s.scan_dbs.push(db);
        }
    }
}

fn on() -> bool {
    config::get_bool(&config::UPKEEP)
}

/// `CONFIG SET` of `upkeep` or `upkeep-tick-ms`: takes effect now, not at the next tick —
/// upkeep switched back on starts at once (nothing else would arm its timer).
pub fn settings_changed() {
    timer::settings_changed(config::get(&config::UPKEEP_TICK_MS));
}

/// One tick: a scan step, then the queues whose time has come, earliest first. Returns when
/// to look again.
fn tick(ctx: Ctx<'_>) -> timer::Next {
    timer::TICK_MS.store(config::get(&config::UPKEEP_TICK_MS), Ordering::Relaxed);
    if !on() {
        return timer::Next::Off;
    }
    if !timer::may_act(ctx) {
        return timer::Next::Idle;
    }
    metrics::add(&metrics::UPKEEP_TICKS, 1);
    let t0 = timer::monotonic_us();
    let cpu0 = timer::thread_cpu_us();
    let elapsed = || timer::monotonic_us().saturating_sub(t0);
    // The scan first, within its share of the budget; the queues' steps in what is left.
    let scanning = scan_step(ctx, t0);
    let mut left = usize::try_from(config::get(&config::UPKEEP_BATCH)).unwrap_or(0);
    let now = timer::now_ms();
    // The longest queue step this tick: the next one is started only if that much fits.
    let mut longest: u64 = 0;
    while left > 0 && elapsed().saturating_add(longest) <= TICK_BUDGET_US {
        let Some(queue) = registry::first_due(now) else { break };
        // One queue a short step at a time, so that no step is long; the tick's budget decides
        // how many.
        let started = timer::monotonic_us();
        let visited = visit(ctx, &queue, left.min(STEP_JOBS));
        metrics::add(&metrics::UPKEEP_STEPS, 1);
        longest = longest.max(timer::monotonic_us().saturating_sub(started));
        match visited {
            Some(Visit { done, next, gone }) => {
                left = left.saturating_sub(done);
                // Nothing done: whatever is pending is not due before the next millisecond.
                let next = if done == 0 { next.map(|t| t.max(now.saturating_add(1))) } else { next };
                if gone {
                    registry::forget(&queue);
                } else {
                    registry::reschedule(&queue, next);
                }
            }
            // Not this node's to serve (not installed, wrong types): off the agenda.
            None => registry::reschedule(&queue, None),
        }
    }
    let took = elapsed();
    metrics::UPKEEP_TICK_MAX_US.fetch_max(took, Ordering::Relaxed);
    let cpu = timer::thread_cpu_us().saturating_sub(cpu0);
    metrics::UPKEEP_TICK_MAX_CPU_US.fetch_max(cpu, Ordering::Relaxed);
    if took > 2000 {
        metrics::add(&metrics::UPKEEP_TICKS_OVER_2MS, 1);
    }
    if scanning || registry::first_due(now).is_some() {
        // Work left over: come back at once, after the event loop has served its clients.
        return timer::Next::At(now);
    }
    registry::next_due().map_or(timer::Next::Idle, timer::Next::At)
}

/// What one visit to a queue did: jobs handled, the next time anything is due there (None:
/// nothing pending), whether none of its keys is left.
struct Visit {
    done: usize,
    next: Option<i64>,
    gone: bool,
}

/// One visit of upkeep to a queue; None when upkeep cannot serve it (not installed, wrong
/// types).
fn visit(ctx: Ctx<'_>, (db, name): &Queue, budget: usize) -> Option<Visit> {
    if !timer::select(ctx, *db) {
        return None;
    }
    let mut argv: Vec<Str> = Vec::with_capacity(10);
    let mut text = |b: &[u8]| ctx.string(b).map(|s| argv.push(s));
    text(UPKEEP.name.as_bytes())?;
    text(UPKEEP.keys.len().to_string().as_bytes())?;
    for slot in UPKEEP.keys.iter() {
        let host::command::KeyRole::Queue(role) = slot.role else { return None };
        text(&keyspace::key(name, role, b""))?;
    }
    text(b"COUNT")?;
    text(budget.to_string().as_bytes())?;
    match host::run_internal(ctx, &UPKEEP, &argv) {
        Ok(Reply::Array(r)) => {
            let int = |i: usize| match r.get(i) {
                Some(Reply::Int(v)) => *v,
                _ => 0,
            };
            let (promoted, reclaimed, next, expired, fired) = (int(0), int(1), int(2), int(3), int(4));
            let gone = next == -2;
            metrics::add(&metrics::UPKEEP_PROMOTED, promoted.unsigned_abs());
            metrics::add(&metrics::UPKEEP_RECLAIMED, reclaimed.unsigned_abs());
            metrics::add(&metrics::UPKEEP_EXPIRED, expired.unsigned_abs());
            let done = usize::try_from(
                promoted.saturating_add(reclaimed).saturating_add(expired).saturating_add(fired),
            )
            .unwrap_or(0);
            let next = (next >= 0).then_some(next);
            let expiry = registry::next_expiry(&(*db, name.clone()));
            let next = match (next, expiry) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            Some(Visit { done, next, gone })
        }
        Ok(_) => None,
        Err(_) => {
            metrics::add(&metrics::UPKEEP_REFUSED, 1);
            None
        }
    }
}

/// Scan steps over the databases still to look at: every `emq:{Q}:delayed` and
/// `emq:{Q}:active` found notes its queue. At least one step, then more while the tick
/// (begun at `t0`, µs) is within the scan's share of its budget; the rows a step finds are
/// read before the next step, so their cost counts too. True while the scan is not over.
fn scan_step(ctx: Ctx<'_>, t0: u64) -> bool {
    let now = timer::now_ms();
    let mut s = search();
    if s.scan_all {
        s.scan_all = false;
        s.scan_dbs = (0..c_int::MAX).take_while(|&db| timer::select(ctx, db)).collect();
    }
    // Rows seen by a step: each with an EXPIRE goes back on upkeep's index.
    let mut rows: Vec<(c_int, Vec<u8>)> = Vec::new();
    for step in 0..SCAN_STEPS {
        if step > 0 && timer::monotonic_us().saturating_sub(t0) >= SCAN_BUDGET_US {
            break;
        }
        let Some(&db) = s.scan_dbs.first() else { break };
        if s.scan.is_none() {
            s.scan = timer::Scan::new();
        }
        let more = match (&mut s.scan, timer::select(ctx, db)) {
            (Some(scan), true) => scan.step(ctx, &mut |name| {
                if let Some(p) = keyspace::parse(name) {
                    match p.role {
                        // Something may be due: visit it soon, to learn when.
                        Role::Delayed | Role::Active | Role::Scheds => registry::note(db, p.queue, Some(now)),
                        Role::Wait
                        | Role::Prio
                        | Role::Completed
                        | Role::Failed
                        | Role::Meta
                        | Role::Events => registry::note(db, p.queue, None),
                        Role::Job => rows.push((db, name.to_vec())),
                        Role::Bus
                        | Role::Seen
                        | Role::Fails
                        | Role::Log
                        | Role::Alias
                        | Role::Dedup
                        | Role::Kept
                        | Role::Sched
                        | Role::Metrics => {}
                    }
                }
            }),
            _ => false,
        };
        if !more {
            s.scan = None;
            s.scan_dbs.remove(0);
        }
        // Read the rows this step found now, inside the scan's share of the budget.
        for (db, name) in rows.drain(..) {
            if let Some(at) = expiry_of(ctx, db, &name) {
                if let Some(p) = keyspace::parse_as(&name, Role::Job) {
                    registry::note_expiry(db, p.queue, p.suffix, at);
                    registry::note(db, p.queue, Some(at));
                }
            }
        }
    }
    !s.scan_dbs.is_empty()
}

/// The EXPIRE time of the row named `name` in database `db`, if it has one and still waits.
fn expiry_of(ctx: Ctx<'_>, db: c_int, name: &[u8]) -> Option<i64> {
    if !timer::select(ctx, db) {
        return None;
    }
    let key = host::Key::open_named(ctx, ctx.string(name)?, false);
    let [st, at, ..] = key.hget_many(&[&crate::queue::field::STATE, &crate::queue::field::EXPIRE]);
    let waiting =
        matches!(st.and_then(|s| State::of(s.bytes())), Some(State::Wait | State::Prio | State::Delayed));
    if waiting {
        at.and_then(|a| domain::args::int(a.bytes()))
    } else {
        None
    }
}
