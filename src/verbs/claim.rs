//! `EMQ.CLAIM 6 wait prio active delayed meta events token lease_ms [COUNT n]`
//! `EMQ.CLAIM 6 wait prio active delayed meta events PAUSE|RESUME`
//!
//! First promotes due delayed jobs (at most `trafikey.promote-batch`), then, unless the queue
//! is paused, takes up to COUNT ready jobs — wait first (its front), then prio in score
//! order — each becoming active with deadline now+lease_ms; the row records the token,
//! `as+1` and the claim time. Replies `[[id name data attempt] ...]`.
//! PAUSE/RESUME write `meta` and need the caller's write permission on it (CLAIM declares
//! `meta` read-only, so a worker with read-only `meta` can claim but not pause).

use crate::config;
use crate::domain::{self, args::Opt};
use crate::errors::Refusal;
use crate::host::{Access, Exec, Key, Kind, Lit, Reply, Str, Verb};
use crate::keyspace::Role;
use crate::metrics;
use crate::queue::{field, zset, Event, Events, Ready, Row, State};

pub struct Claim;

pub enum Args<'a> {
    Take { token: &'a [u8], lease: i64, count: Option<i64> },
    Pause(bool),
}

static PAUSED: Lit = Lit::new(c"paused");
static ONE: Lit = Lit::new(c"1");

impl Verb for Claim {
    type Args<'a> = Args<'a>;

    fn shape<'a>(args: &[&'a [u8]]) -> Result<Args<'a>, Refusal> {
        match args {
            [w] if w.eq_ignore_ascii_case(b"PAUSE") => Ok(Args::Pause(true)),
            [w] if w.eq_ignore_ascii_case(b"RESUME") => Ok(Args::Pause(false)),
            [token, lease, rest @ ..] => Ok(Args::Take {
                token,
                lease: domain::args::number(lease, "lease_ms")?,
                count: domain::args::options(rest, &[Opt::Count])?.count,
            }),
            _ => Err(Refusal::Shape("EMQ.CLAIM takes token lease_ms [COUNT n], or PAUSE or RESUME".into())),
        }
    }

    fn run<'a>(x: &mut Exec<'a>, a: Args<'a>) -> Result<Reply, Refusal> {
        match a {
            Args::Pause(on) => pause(x, on),
            Args::Take { token, lease, count } => {
                domain::token(token)?;
                let lease = domain::range(lease, 1, domain::LEASE_MAX, "lease_ms")?;
                let count = domain::range(count.unwrap_or(1), 1, domain::CLAIM_COUNT_MAX, "COUNT")?;
                take(x, token, lease, count as usize)
            }
        }
    }
}

fn pause(x: &mut Exec, on: bool) -> Result<Reply, Refusal> {
    let meta_name = x.key_name(4);
    x.caller()?.key(meta_name, Access::Write)?;
    let meta = x.open(4, true);
    meta.exists_as(Kind::Hash)?;
    let events = Events::open(x, 5)?;
    let paused = meta.hget(&PAUSED).is_some();
    if paused == on {
        return Ok(Reply::Int(0));
    }
    if on {
        meta.hset(&[(&PAUSED, ONE.get())])?;
    } else {
        meta.hdel(&[&PAUSED])?;
    }
    events.emit(x, None, if on { Event::Paused } else { Event::Resumed })?;
    Ok(Reply::Int(1))
}

/// A job CLAIM touches, with its row opened (as the caller) before anything is written.
struct Found {
    id: Str,
    row: Key,
    /// The row is missing: the id is dropped from its set and counted, never refused.
    orphan: bool,
    /// Read only for promoted jobs, which go where their priority says; a job taken from a
    /// ready set needs none.
    priority: i64,
}

fn found(x: &mut Exec, id: Str, promoted: bool) -> Result<Found, Refusal> {
    let row = x.open_undeclared(Role::Job, id.bytes(), Access::Update)?;
    let orphan = !row.exists_as(Kind::Hash)?;
    let priority = if orphan || !promoted { 0 } else { Row(&row).priority() };
    Ok(Found { id, row, orphan, priority })
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Src {
    Wait,
    Prio,
}

/// A job this call takes: found in a ready set, or one it promotes first (by index).
enum Pick {
    Ready(Found, Src),
    Promoted(usize),
}

fn take(x: &mut Exec, token: &[u8], lease: i64, count: usize) -> Result<Reply, Refusal> {
    let ready = Ready::open(x.open(0, true), x.open(1, true))?;
    let active = zset(x, 2)?;
    let delayed = zset(x, 3)?;
    let meta = x.open(4, false);
    meta.exists_as(Kind::Hash)?;
    let events = Events::open(x, 5)?;
    let now = x.now();

    // Read and check everything first (rows are opened as the caller). Due delayed jobs,
    // earliest due first:
    let batch = usize::try_from(config::get(&config::PROMOTE_BATCH)).unwrap_or(0);
    let due_now = delayed.zrange(f64::NEG_INFINITY, now as f64, batch);
    let mut promoted = Vec::with_capacity(due_now.len());
    for (id, _) in due_now {
        promoted.push(found(x, id, true)?);
    }
    // The jobs taken, in order: the front of wait (its right end), the promoted wait jobs
    // (pushed behind it), then prio and the promoted prio jobs by (priority, id).
    let mut picks: Few<Pick> = Few::with_capacity(count);
    if meta.hget(&PAUSED).is_none() {
        let in_wait = usize::try_from(ready.wait.len()).unwrap_or(usize::MAX).min(count);
        for i in 0..in_wait {
            let id = ready.wait.lindex(-1 - i as i64).ok_or_else(crate::errors::host_reply)?;
            picks.push(Pick::Ready(found(x, id, false)?, Src::Wait));
        }
        let waiting = promoted.iter().enumerate().filter(|(_, p)| !p.orphan && p.priority == 0);
        picks.extend(waiting.map(|(i, _)| Pick::Promoted(i)).take(count.saturating_sub(picks.len())));
        let left = count.saturating_sub(picks.len());
        if left > 0 {
            let mut cands: Vec<(i64, Str, Option<usize>)> =
                ready.prio.zrange(f64::NEG_INFINITY, f64::INFINITY, left).into_iter().map(|(m, s)| (s as i64, m, None)).collect();
            for (i, p) in promoted.iter().enumerate().filter(|(_, p)| !p.orphan && p.priority != 0) {
                cands.push((p.priority, x.string(p.id.bytes())?, Some(i)));
            }
            cands.sort_by(|a, b| (a.0, a.1.bytes()).cmp(&(b.0, b.1.bytes())));
            cands.truncate(left);
            for (_, id, promo) in cands {
                picks.push(match promo {
                    Some(i) => Pick::Promoted(i),
                    None => Pick::Ready(found(x, id, false)?, Src::Prio),
                });
            }
        }
    }

    // Write: promotions, then claims.
    let mut promoted_n = 0u64;
    let due: Vec<_> = promoted.iter().map(|p| p.id.ptr()).collect();
    delayed.zrem_many(&due);
    for p in &promoted {
        if p.orphan {
            metrics::add(&metrics::ORPHANS, 1);
            continue;
        }
        let state = ready.put(p.id.ptr(), p.priority, false)?;
        p.row.hset(&[(&field::STATE, state.lit().get())])?;
        events.emit(x, Some(p.id.ptr()), Event::Waiting { prev: State::Delayed })?;
        promoted_n += 1;
    }
    metrics::add(&metrics::PROMOTED, promoted_n);

    // Take every pick out of its ready set (one effect per set), then make the live ones
    // active (one effect) and record each claim on its row.
    let deadline = domain::deadline(now, lease);
    let jobs: Few<(&Found, Src)> = sized(
        picks.len(),
        picks.iter().filter_map(|pick| match pick {
            Pick::Ready(f, src) => Some((f, *src)),
            Pick::Promoted(i) => promoted.get(*i).map(|p| (p, if p.priority == 0 { Src::Wait } else { Src::Prio })),
        }),
    );
    ready.wait.rpop_drop(jobs.iter().filter(|(_, s)| *s == Src::Wait).count());
    let from_prio = sized(jobs.len(), jobs.iter().filter(|(_, s)| *s == Src::Prio).map(|(j, _)| j.id.ptr()));
    ready.prio.zrem_many(&from_prio);
    let live: Few<&Found> = sized(jobs.len(), jobs.iter().map(|(j, _)| *j).filter(|j| !j.orphan));
    metrics::add(&metrics::ORPHANS, jobs.len().saturating_sub(live.len()) as u64);
    let ids: Few<_> = live.iter().map(|j| j.id.ptr()).collect();
    active.zadd_many(deadline, &ids)?;
    let (tok, at) = (x.string(token)?, x.int(now)?);
    let mut out = Vec::with_capacity(live.len());
    for job in live.iter() {
        let [started, made, name, data] = job.row.hget_many(&[&field::STARTED, &field::MADE, &field::NAME, &field::DATA]);
        let count = |s: Option<Str>| s.and_then(|s| domain::args::int(s.bytes())).unwrap_or(0).saturating_add(1);
        let (started, attempt) = (count(started), count(made));
        job.row.hset(&[
            (&field::STATE, State::Active.lit().get()),
            (&field::TOKEN, tok.ptr()),
            (&field::STARTED, x.int(started)?.ptr()),
            (&field::CLAIMED, at.ptr()),
        ])?;
        events.emit(x, Some(job.id.ptr()), Event::Active { attempt })?;
        out.push(Reply::Array(vec![
            job.id.share().map_or_else(|| Reply::bulk(job.id.bytes()), Reply::Str),
            name.map_or(Reply::Null, Reply::Str),
            data.map_or(Reply::Null, Reply::Str),
            Reply::Int(attempt),
        ]));
    }
    Ok(Reply::Array(out))
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
