//! `EMQ.STALLED 5 active wait prio failed events [MAXSTALLS n] [COUNT n]`
//!
//! Reclaims active jobs whose deadline has passed (at most COUNT, default
//! `trafikey.stalled-batch`, earliest deadline first): `sc+1` and a `stalled` event, then
//! back to ready at the front of wait (or prio), or — once stalls exceed MAXSTALLS (default
//! `trafikey.max-stalls`) — failed for good with error `stalled` and `am+1`, under the
//! default retention of failed jobs. The token is cleared either way.
//! Replies `[[requeued ids] [failed ids]]`.

use crate::config;
use crate::domain::{self, args::Opt, Keep};
use crate::errors::Refusal;
use crate::host::{Access, Exec, Kind, Lit, Reply, Verb};
use crate::keyspace::Role;
use crate::metrics;
use crate::queue::{self, field, zset, Event, Events, Ready, Retire, Row, State};

pub struct Stalled;

/// The error a job that stalled too often fails with.
static STALLED: Lit = Lit::new(c"stalled");

pub struct Args {
    max_stalls: Option<i64>,
    count: Option<i64>,
}

impl Verb for Stalled {
    type Args<'a> = Args;

    fn shape(args: &[&[u8]]) -> Result<Args, Refusal> {
        let o = domain::args::options(args, &[Opt::MaxStalls, Opt::Count])?;
        Ok(Args { max_stalls: o.max_stalls, count: o.count })
    }

    fn run(x: &mut Exec<'_>, a: Args) -> Result<Reply, Refusal> {
        let max_stalls = domain::range(a.max_stalls.unwrap_or(config::get(&config::MAX_STALLS)), 0, domain::MAX_STALLS_MAX, "MAXSTALLS")?;
        let count = domain::range(a.count.unwrap_or(config::get(&config::STALLED_BATCH)), 1, domain::STALLED_COUNT_MAX, "COUNT")?;
        let keep = queue::keep_for(None, &config::KEEP_FAILED)?;
        let active = zset(x, 0)?;
        let ready = Ready::open(x.open(1, true), x.open(2, true))?;
        let failed = zset(x, 3)?;
        let events = Events::open(x, 4)?;
        let now = x.now();

        // Read and check everything first: the expired leases and their rows.
        let expired = active.zrange(f64::NEG_INFINITY, now.saturating_sub(1) as f64, usize::try_from(count).unwrap_or(0));
        let mut jobs = Vec::with_capacity(expired.len());
        let mut failing = 0u64;
        for (id, _) in expired {
            let row = x.open_undeclared(Role::Job, id.bytes(), Access::Update)?;
            let exists = row.exists_as(Kind::Hash)?;
            let stalls = if exists { Row(&row).int(&field::STALLS, 0).saturating_add(1) } else { 0 };
            let fails = exists && stalls > max_stalls;
            failing += u64::from(fails && keep != Keep::None);
            jobs.push((id, row, exists, stalls, fails));
        }
        let retire = Retire::plan(x, &failed, failing, now, keep, None)?;
        // One call can fail more jobs than the cap keeps: the lowest ids among them (all
        // finish now) are retired at once.
        let mut failing_ids: Vec<&[u8]> = jobs.iter().filter(|j| j.4).map(|j| j.0.bytes()).collect();
        failing_ids.sort_unstable();
        let retired_now: Vec<&[u8]> = failing_ids.into_iter().take(usize::try_from(retire.drop_new).unwrap_or(usize::MAX)).collect();

        let (mut requeued, mut dead) = (Vec::new(), Vec::new());
        let taken: Vec<_> = jobs.iter().map(|(id, ..)| id.ptr()).collect();
        active.zrem_many(&taken);
        for (id, row, exists, stalls, fails) in &jobs {
            if !exists {
                metrics::add(&metrics::ORPHANS, 1);
                continue;
            }
            let r = Row(row);
            events.emit(x, Some(id.ptr()), Event::Stalled { stalls: *stalls })?;
            let sc = x.int(*stalls)?;
            if *fails {
                let made = r.int(&field::MADE, 0).saturating_add(1);
                let made_s = x.int(made)?;
                let keep = if retired_now.contains(&id.bytes()) { Keep::None } else { keep };
                queue::finish(
                    x,
                    row,
                    &failed,
                    id,
                    State::Failed,
                    keep,
                    &[(&field::STALLS, sc.ptr()), (&field::MADE, made_s.ptr()), (&field::ERROR, STALLED.get())],
                )?;
                events.emit(x, Some(id.ptr()), Event::Failed { error: STALLED.get(), attempt: made })?;
                dead.push(Reply::bulk(id.bytes()));
            } else {
                let state = ready.put(id.ptr(), r.priority(), true)?;
                row.hset(&[(&field::STATE, state.lit().get()), (&field::STALLS, sc.ptr())])?;
                row.hdel(&[&field::TOKEN])?;
                events.emit(x, Some(id.ptr()), Event::Waiting { prev: State::Active })?;
                requeued.push(Reply::bulk(id.bytes()));
            }
        }
        retire.apply(&failed);
        metrics::add(&metrics::RECLAIMED, (requeued.len() + dead.len()) as u64);
        Ok(Reply::Array(vec![Reply::Array(requeued), Reply::Array(dead)]))
    }
}
