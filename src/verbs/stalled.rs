//! `EMQ.STALLED 5 active wait prio failed events [MAXSTALLS n] [COUNT n]`
//!
//! Reclaims active jobs whose deadline has passed (at most COUNT, default
//! `trafikey.stalled-batch`, earliest deadline first): `sc+1` and a `stalled` event, then
//! back to ready at the front of wait (or prio), or — once stalls exceed MAXSTALLS (default:
//! the queue's own `max-stalls` in `meta`, else `trafikey.max-stalls`) — failed for good with error `stalled` and `am+1`, under the
//! default retention of failed jobs (`domain::stalled` decides which). The token is cleared
//! either way. Replies `[[requeued ids] [failed ids]]`.

use crate::config;
use crate::domain::{self, args::Opt, stalled::Fate, Keep};
use crate::errors::Refusal;
use crate::host::command::{opt, q, Arg, Command, Keys, Spec::*, Ty};
use crate::host::{Access, ArgStr, Exec, Key, Kind, Lit, Reply, Verb};
use crate::keyspace::Role::{self, *};
use crate::metrics;
use crate::queue::{self, field, End, Event, Events, Ready, Release, Retire, Row, Sets, State};

pub const KEYS: Keys =
    Keys::of(&[q(Active, Take), q(Wait, Insert), q(Prio, Insert), q(Failed, Update), q(Events, Append)]);
pub const ARGS: &[Arg] = &[
    opt("maxstalls", "MAXSTALLS", "n", Ty::Int).range(domain::MAX_STALLS),
    opt("count", "COUNT", "n", Ty::Int).range(domain::STALLED_COUNT),
];

/// The command, declared whole: registration, ACL, `COMMAND DOCS` and the reference take it
/// from here.
pub const COMMAND: Command = Command::new::<Stalled>("EMQ.STALLED")
    .tokens(&["stalled.check"])
    .keys(KEYS)
    .args(ARGS)
    .writes()
    .summary("Reclaim jobs whose lease expired: requeue them, or fail them past MAXSTALLS.")
    .complexity("O(n log N) for n jobs reclaimed");

pub struct Stalled;

/// The error a job that stalled too often fails with.
static STALLED: Lit = Lit::new(c"stalled");

pub struct Args {
    max_stalls: Option<i64>,
    count: Option<i64>,
}

impl Verb for Stalled {
    type Args<'a> = Args;

    fn shape(args: &[ArgStr]) -> Result<Args, Refusal> {
        let o = domain::args::options(args, &[Opt::MaxStalls, Opt::Count])?;
        Ok(Args { max_stalls: o.max_stalls, count: o.count })
    }

    fn run(x: &mut Exec<'_>, a: Args) -> Result<Reply, Refusal> {
        let max_stalls = match a.max_stalls {
            Some(n) => domain::MAX_STALLS.check(n)?,
            // `meta` is not among STALLED's keys: found, opened as the caller, read only when
            // no MAXSTALLS is given.
            None => {
                let meta = x.open_undeclared(Role::Meta, b"", Access::Read)?;
                max_stalls_of(&meta)?
            }
        };
        let count = domain::batch(
            a.count.unwrap_or(config::get(&config::STALLED_BATCH)),
            domain::STALLED_COUNT,
            domain::RECLAIM_PER_CALL,
        )? as i64;
        let (requeued, dead) = reclaim(x, max_stalls, count)?;
        Ok(Reply::Array(vec![Reply::Array(requeued), Reply::Array(dead)]))
    }
}

/// The queue's max stalls: `max-stalls` in its `meta` when that is an integer 0..=1000 (a
/// client sets it with HSET), else `trafikey.max-stalls`. A `meta` of another type answers
/// WRONGTYPE, as any key of the wrong type does.
pub fn max_stalls_of(meta: &Key) -> Result<i64, Refusal> {
    let own = if meta.exists_as(Kind::Hash)? {
        Row(meta)
            .get(&queue::meta::MAX_STALLS)
            .and_then(|v| domain::args::int(v.bytes()))
            .filter(|n| domain::MAX_STALLS.contains(*n))
    } else {
        None
    };
    Ok(own.unwrap_or_else(|| config::get(&config::MAX_STALLS)))
}

/// The expired leases, at most `count`, earliest deadline first: requeued or failed for good
/// past `max_stalls`. Returns the ids requeued and the ids failed. Upkeep runs this too.
pub fn reclaim(x: &mut Exec, max_stalls: i64, count: i64) -> Result<(Vec<Reply>, Vec<Reply>), Refusal> {
    let keep = queue::keep_for(None, &config::KEEP_FAILED)?;
    let active = x.open_as(Active, Kind::ZSet)?;
    let ready = Ready::open(x)?;
    let failed = x.open_as(Failed, Kind::ZSet)?;
    let events = Events::open(x)?;
    let now = x.now();

    // Read and check everything first: the expired leases, their rows, their fates.
    let expired =
        active.zrange(f64::NEG_INFINITY, now.saturating_sub(1) as f64, usize::try_from(count).unwrap_or(0));
    let mut jobs = Vec::with_capacity(expired.len());
    let mut fates = Vec::with_capacity(expired.len());
    for (id, _) in expired {
        let row = x.open_undeclared(Role::Job, id.bytes(), Access::Update)?;
        let stalls = if row.exists_as(Kind::Hash)? { Some(Row(&row).int(&field::STALLS, 0)) } else { None };
        fates.push(domain::stalled::fate(stalls, max_stalls));
        jobs.push((id, row));
    }
    let failing = if keep == Keep::None { 0 } else { fates.iter().filter(|f| f.fails()).count() as u64 };
    let ids: Vec<&[u8]> = jobs.iter().map(|(id, _)| id.bytes()).collect();
    let retire = Retire::plan(x, &failed, failing, now, keep, None, &ids)?;
    domain::stalled::retire_lowest(&mut fates, &ids, retire.drop_new);
    // The logs of the jobs deleted at once, opened before anything is written.
    let mut logs = Vec::with_capacity(jobs.len());
    let mut releases = Vec::new();
    for ((id, row), fate) in jobs.iter().zip(&fates) {
        let deleted =
            matches!(fate, Fate::Retire { .. }) || (matches!(fate, Fate::Fail { .. }) && keep == Keep::None);
        logs.push(if deleted { queue::log_of(x, id.bytes())? } else { None });
        if matches!(fate, Fate::Retire { .. } | Fate::Fail { .. }) {
            releases.push(Release::finishing(
                x,
                id.bytes(),
                row,
                Sets { ready: Some(&ready), delayed: None },
            )?);
        }
    }

    let (mut requeued, mut dead) = (Vec::new(), Vec::new());
    let taken: Vec<_> = jobs.iter().map(|(id, _)| id.str_ref()).collect();
    active.zrem_many(&taken);
    if !taken.is_empty() {
        active.signal_ready();
    }
    for (((id, row), fate), log) in jobs.iter().zip(&fates).zip(logs) {
        let (stalls, keep) = match *fate {
            Fate::Orphan => {
                metrics::add(&metrics::ORPHANS, 1);
                continue;
            }
            Fate::Requeue { stalls } => (stalls, None),
            Fate::Fail { stalls } => (stalls, Some(keep)),
            Fate::Retire { stalls } => (stalls, Some(Keep::None)),
        };
        let r = Row(row);
        events.emit(x, Some(id.str_ref()), Event::Stalled { stalls })?;
        let sc = x.int(stalls)?;
        if let Some(keep) = keep {
            let made = r.int(&field::MADE, 0).saturating_add(1);
            // Read before `finish`, which may delete the row (retention at once).
            let attempts = r.int(&field::ATTEMPTS, 1);
            let made_s = x.int(made)?;
            let alias = queue::Companions::alias_of(x, log.as_ref())?;
            queue::finish(
                x,
                row,
                &failed,
                id,
                State::Failed,
                keep,
                &[
                    (&field::STALLS, sc.str_ref()),
                    (&field::MADE, made_s.str_ref()),
                    (&field::ERROR, STALLED.str_ref()),
                ],
                log,
            )?;
            events.emit(
                x,
                Some(id.str_ref()),
                Event::Failed {
                    error: STALLED.str_ref(),
                    attempt: made,
                    attempts,
                    alias: alias.as_ref().map(|a| a.str_ref()),
                },
            )?;
            dead.push(Reply::bulk(id.bytes()));
        } else {
            let state = ready.put(id.str_ref(), r.priority(), End::Front)?;
            row.hset(&[(&field::STATE, state.lit().str_ref()), (&field::STALLS, sc.str_ref())])?;
            row.hdel(&[&field::TOKEN])?;
            events.emit(x, Some(id.str_ref()), Event::Waiting { prev: State::Active })?;
            requeued.push(Reply::bulk(id.bytes()));
        }
    }
    for r in &releases {
        r.apply(x, &events, Sets { ready: Some(&ready), delayed: None })?;
    }
    retire.apply(&failed);
    metrics::add(&metrics::RECLAIMED, requeued.len().saturating_add(dead.len()) as u64);
    Ok((requeued, dead))
}
