//! Reclaiming expired leases (STALLED, and upkeep on its own): each job counts a stall and
//! goes back to ready at the front, or — past the queue's max stalls (`domain::stalled`) —
//! fails for good with error `stalled`, one more attempt made, as every finish ends a job
//! (`finish::Ending`).

use crate::config;
use crate::domain::{self, stalled::Fate};
use crate::errors::Refusal;
use crate::host::{Access, Exec, Key, Kind, Lit, Reply};
use crate::keyspace::Role::{self, *};
use crate::metrics;

use super::finish::Ending;
use super::{field, keep_for, End, Event, Events, Ready, Row, Sets, State};

/// The error a job that stalled too often fails with.
static STALLED: Lit = Lit::new(c"stalled");

/// The queue's max stalls: `max-stalls` in its `meta` when that is an integer 0..=1000 (a
/// client sets it with HSET), else `trafikey.max-stalls`. A `meta` of another type answers
/// WRONGTYPE, as any key of the wrong type does.
pub fn max_stalls_of(meta: &Key) -> Result<i64, Refusal> {
    let own = if meta.exists_as(Kind::Hash)? {
        Row(meta)
            .get(&super::meta::MAX_STALLS)
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
    let keep = keep_for(None, &config::KEEP_FAILED)?;
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
    let ids: Vec<&[u8]> = jobs.iter().map(|(id, _)| id.bytes()).collect();
    let ending = jobs
        .iter()
        .zip(&fates)
        .map(|((id, row), fate)| fate.fails().then(|| (id.bytes(), row.hget(&field::DEDUP))))
        .collect();
    let sets = Sets { ready: Some(&ready), delayed: None };
    let mut ending = Ending::plan(x, &failed, keep, None, ending, &ids, None, sets)?;

    let (mut requeued, mut dead) = (Vec::new(), Vec::new());
    let taken: Vec<_> = jobs.iter().map(|(id, _)| id.str_ref()).collect();
    active.zrem_many(&taken);
    if !taken.is_empty() {
        active.signal_ready();
    }
    for (i, ((id, row), fate)) in jobs.iter().zip(&fates).enumerate() {
        let (stalls, fails) = match *fate {
            Fate::Orphan => {
                metrics::add(&metrics::ORPHANS, 1);
                continue;
            }
            Fate::Requeue { stalls } => (stalls, false),
            Fate::Fail { stalls } => (stalls, true),
        };
        let r = Row(row);
        events.emit(x, Some(id.str_ref()), Event::Stalled { stalls })?;
        let sc = x.int(stalls)?;
        if fails {
            // Read before the row is written, or deleted at once.
            let made = r.int(&field::MADE, 0).saturating_add(1);
            let attempts = r.int(&field::ATTEMPTS, 1);
            let made_s = x.int(made)?;
            let fields = [
                (&field::STALLS, sc.str_ref()),
                (&field::MADE, made_s.str_ref()),
                (&field::ERROR, STALLED.str_ref()),
            ];
            let alias = ending.end(x, i, row, &failed, id, State::Failed, &fields)?;
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
    ending.close(x, &failed, &events, sets)?;
    metrics::add(&metrics::RECLAIMED, requeued.len().saturating_add(dead.len()) as u64);
    Ok((requeued, dead))
}
