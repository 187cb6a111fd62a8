//! `TRA.DRAIN 4 wait prio delayed events [DELAYED] [COUNT n]` — deletes jobs that wait to run:
//! those in `wait` (from the front), then in `prio` (lowest first), and with DELAYED those in
//! `delayed` too (earliest due first), rows with them, at most n (1..=10000, default 1000) in
//! one call. Held and finished jobs stay. Replies the number deleted: the client repeats until
//! 0. One `cleaned` event (`count`) per call that deleted any. The rows are found, not
//! declared: opened as the caller. Fenced.

use crate::domain::{self, args::Opt};
use crate::errors::Refusal;
use crate::host::command::{flag, opt, q, Arg, Command, Keys, Spec::*, Ty};
use crate::host::{ArgStr, Exec, Kind, Reply, Str, Verb};
use crate::keyspace::Role::*;
use crate::queue::{doomed_rows, Event, Events};

pub const KEYS: Keys = Keys::of(&[q(Wait, Take), q(Prio, Take), q(Delayed, Take), q(Events, Append)]);
pub const ARGS: &[Arg] = &[flag("delayed", "DELAYED"), opt("count", "COUNT", "n", Ty::Int)];

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
        // The ids, read and their rows checked first.
        let from_wait: Vec<Vec<u8>> = match left.min(usize::try_from(wait.len()).unwrap_or(usize::MAX)) {
            0 => Vec::new(),
            n => wait.range_read(c"LRANGE", (n as i64).saturating_neg(), -1, None)?,
        };
        left = left.saturating_sub(from_wait.len());
        let from_prio = prio.zrange(f64::NEG_INFINITY, f64::INFINITY, left);
        left = left.saturating_sub(from_prio.len());
        let from_delayed =
            if delayed_too { delayed.zrange(f64::NEG_INFINITY, f64::INFINITY, left) } else { Vec::new() };
        let mut ids: Vec<Str> = Vec::with_capacity(count);
        for id in &from_wait {
            ids.push(x.string(id)?);
        }
        let prio_ids: Vec<Str> = from_prio.into_iter().map(|(m, _)| m).collect();
        let delayed_ids: Vec<Str> = from_delayed.into_iter().map(|(m, _)| m).collect();
        let all: Vec<&Str> = ids.iter().chain(&prio_ids).chain(&delayed_ids).collect();
        let owned: Vec<Str> = all.iter().filter_map(|s| s.share()).collect();
        let rows = doomed_rows(x, &owned)?;
        // Then the writes.
        wait.rpop_drop(from_wait.len());
        prio.zrem_many(&prio_ids.iter().map(Str::str_ref).collect::<Vec<_>>());
        delayed.zrem_many(&delayed_ids.iter().map(Str::str_ref).collect::<Vec<_>>());
        rows.delete();
        let n = owned.len() as i64;
        if n > 0 {
            events.emit(x, None, Event::Cleaned { count: n })?;
        }
        Ok(Reply::Int(n))
    }
}
