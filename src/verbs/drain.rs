//! `TRA.DRAIN 4 wait prio delayed events [DELAYED] [COUNT n]` — deletes jobs that wait to run:
//! those in `wait` (from the front), then in `prio` (lowest first), and with DELAYED those in
//! `delayed` too (earliest due first), rows with them, at most n (1..=10000, default 1000) in
//! one call. Held and finished jobs stay, and so does a job scheduler's pending iteration
//! (passed over: the n are counted among the others; its row and its scheduler's hash are read
//! as the caller). Replies the number deleted: the client repeats until
//! 0. One `cleaned` event (`count`) per call that deleted any. The rows are found, not
//! declared: opened as the caller. Fenced.

use crate::domain::{self, args::Opt};
use crate::errors::Refusal;
use crate::host::command::{flag, opt, q, Arg, Command, Keys, Spec::*, Ty};
use crate::host::Key;
use crate::host::{ArgStr, Exec, Kind, Reply, Str, Verb};
use crate::keyspace::Role::*;
use crate::queue::{doomed_rows_opened, open_doomed, sched, Event, Events};

pub const KEYS: Keys = Keys::of(&[q(Wait, Take), q(Prio, Take), q(Delayed, Take), q(Events, Append)]);
pub const ARGS: &[Arg] =
    &[flag("delayed", "DELAYED"), opt("count", "COUNT", "n", Ty::Int).range(domain::DELETE_COUNT)];

/// The command, declared whole: registration, ACL, `COMMAND DOCS` and the reference take it
/// from here.
pub const COMMAND: Command = Command::new::<Drain>("TRA.DRAIN")
    .keys(KEYS)
    .args(ARGS)
    .writes()
    .summary("Delete jobs waiting to run (and delayed ones with DELAYED), a bounded batch a call.")
    .complexity("O(n log N) for n jobs");

pub struct Drain;

impl Verb for Drain {
    type Args<'a> = (bool, Option<i64>);

    fn shape(args: &[ArgStr]) -> Result<(bool, Option<i64>), Refusal> {
        let o = domain::args::options(args, &[Opt::Delayed, Opt::Count])?;
        Ok((o.delayed, o.count))
    }

    fn run(x: &mut Exec<'_>, (delayed_too, count): (bool, Option<i64>)) -> Result<Reply, Refusal> {
        let count = domain::delete_count(count)?;
        let mut left = count;
        let wait = x.open_as(Wait, Kind::List)?;
        let prio = x.open_as(Prio, Kind::ZSet)?;
        let delayed = x.open_as(Delayed, Kind::ZSet)?;
        let events = Events::open(x)?;
        // The ids, read and their rows checked first. A scheduler's pending iteration stays:
        // it is passed over, and the call takes as many others as COUNT allows behind it.
        let wait_len = usize::try_from(wait.len()).unwrap_or(usize::MAX);
        let (mut ids, mut kept, mut span): (Vec<Str>, Vec<(usize, Str)>, usize) = (Vec::new(), Vec::new(), 0);
        // Each row is opened once, for writing: its `rs` read, then deleted with it.
        let mut rows: Vec<Key> = Vec::new();
        // How many entries from the claiming end the deletions reach: those are popped, and
        // the pending iterations among them pushed back in their order.
        let mut reach = 0usize;
        while ids.len() < left && span < wait_len {
            let n = left.saturating_sub(ids.len()).min(wait_len.saturating_sub(span));
            let (from, to) = (span.saturating_add(n) as i64, span.saturating_add(1) as i64);
            let chunk = wait.range_read(c"LRANGE", from.saturating_neg(), to.saturating_neg(), None)?;
            // The front of the queue is the tail: the chunk from its claiming end on.
            for (i, id) in chunk.iter().rev().enumerate() {
                let (pos, id) = (span.saturating_add(i), x.string(id)?);
                let row = open_doomed(x, id.bytes())?;
                if sched::is_pending(x, id.bytes(), &row)? {
                    kept.push((pos, id));
                } else {
                    ids.push(id);
                    rows.push(row);
                    reach = pos.saturating_add(1);
                }
            }
            span = span.saturating_add(n);
        }
        left = left.saturating_sub(ids.len());
        let (prio_ids, prio_rows) = unpended(x, &prio, left)?;
        left = left.saturating_sub(prio_ids.len());
        let (delayed_ids, delayed_rows) =
            if delayed_too { unpended(x, &delayed, left)? } else { (Vec::new(), Vec::new()) };
        let all: Vec<&Str> = ids.iter().chain(&prio_ids).chain(&delayed_ids).collect();
        let owned: Vec<Str> = all.iter().filter_map(|s| s.share()).collect();
        rows.extend(prio_rows);
        rows.extend(delayed_rows);
        let rows = doomed_rows_opened(x, &owned, rows)?;
        // Then the writes.
        wait.rpop_drop(reach);
        for (_, id) in kept.iter().rev().filter(|(pos, _)| *pos < reach) {
            wait.rpush(id.str_ref())?;
        }
        prio.zrem_many(&prio_ids.iter().map(Str::str_ref).collect::<Vec<_>>());
        delayed.zrem_many(&delayed_ids.iter().map(Str::str_ref).collect::<Vec<_>>());
        rows.delete();
        let n = rows.jobs() as i64;
        if n > 0 {
            events.emit(x, None, Event::Cleaned { count: n })?;
        }
        Ok(Reply::Int(n))
    }
}

/// Up to `n` members of `set`, lowest first, that are not a scheduler's pending iteration,
/// with their rows (opened for writing): the read grows past the pending ones met (each
/// checked once).
fn unpended(x: &mut Exec, set: &Key, n: usize) -> Result<(Vec<Str>, Vec<Key>), Refusal> {
    let mut checked: Vec<Option<Key>> = Vec::new();
    let mut limit = n;
    loop {
        let got = set.zrange(f64::NEG_INFINITY, f64::INFINITY, limit);
        for (m, _) in got.iter().skip(checked.len()) {
            let row = open_doomed(x, m.bytes())?;
            checked.push((!sched::is_pending(x, m.bytes(), &row)?).then_some(row));
        }
        let kept = checked.iter().filter(|r| r.is_none()).count();
        let want = n.saturating_add(kept);
        if got.len() < limit || want == limit {
            let (ids, rows) =
                got.into_iter().zip(checked).filter_map(|((m, _), row)| row.map(|r| (m, r))).take(n).unzip();
            return Ok((ids, rows));
        }
        limit = want;
    }
}
