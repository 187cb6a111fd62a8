//! `TRA.JOBS 1 set [FROM i] [COUNT n] [REV]` — a page of one state set's ids, in the order the
//! queue serves them: `wait` the next claimed first, the sorted sets lowest score first (the
//! next due, the next lease to expire, the oldest finished); REV the other way. From position
//! i (default 0), at most n (1..=1000, default 100): `[next, [id ...]]`, `next` the position to
//! continue from, or -1 at the end. `set` is any of the queue's six state sets. One call reads
//! one page (LRANGE / ZRANGE by rank): bounded whatever the queue's size. Read-only, no fence.

use crate::domain::{self, args::Opt};
use crate::errors::Refusal;
use crate::host::command::{flag, opt, Arg, Command, KeyRole, Keys, Slot, Spec, Ty};
use crate::host::{ArgStr, Exec, Kind, Reply, Verb};
use crate::keyspace::Role;

/// The six state sets: the key TRA.JOBS pages.
pub const SETS: KeyRole =
    KeyRole::OneOf(&[Role::Wait, Role::Prio, Role::Active, Role::Delayed, Role::Completed, Role::Failed]);

pub const KEYS: Keys = Keys::of(&[Slot { role: SETS, spec: Spec::Read }]);
pub const ARGS: &[Arg] = &[
    opt("from", "FROM", "i", Ty::Int).range(domain::JOBS_FROM),
    opt("count", "COUNT", "n", Ty::Int).range(domain::PAGE_COUNT),
    flag("rev", "REV"),
];

/// The command, declared whole: registration, ACL, `COMMAND DOCS` and the reference take it
/// from here.
pub const COMMAND: Command = Command::new::<Jobs>("TRA.JOBS")
    .keys(KEYS)
    .args(ARGS)
    .summary("A page of one state set's ids, in serving order.")
    .complexity("O(log N + n) for a page of n");

pub struct Jobs;

pub struct Args {
    from: Option<i64>,
    count: Option<i64>,
    rev: bool,
}

impl Verb for Jobs {
    type Args<'a> = Args;

    fn shape(args: &[ArgStr]) -> Result<Args, Refusal> {
        let o = domain::args::options(args, &[Opt::From, Opt::Count, Opt::Rev])?;
        Ok(Args { from: o.from, count: o.count, rev: o.rev })
    }

    fn run(x: &mut Exec<'_>, a: Args) -> Result<Reply, Refusal> {
        let from = domain::JOBS_FROM.check(a.from.unwrap_or(0))?;
        let count = domain::PAGE_COUNT.check(a.count.unwrap_or(100))?;
        let set = x.set.ok_or_else(crate::errors::host_reply)?;
        let key = x.read(SETS)?;
        let list = set == Role::Wait;
        key.exists_as(if list { Kind::List } else { Kind::ZSet })?;
        let total = i64::try_from(key.len()).unwrap_or(i64::MAX);
        let last = from.saturating_add(count.saturating_sub(1));
        let ids = if from >= total {
            Vec::new()
        } else if list {
            // wait is served from its right end: position i from the front is index -1-i.
            if a.rev {
                key.range_read(c"LRANGE", from, last, None)?
            } else {
                let mut page = key.range_read(
                    c"LRANGE",
                    (-1i64).saturating_sub(last),
                    (-1i64).saturating_sub(from),
                    None,
                )?;
                page.reverse();
                page
            }
        } else {
            key.range_read(c"ZRANGE", from, last, a.rev.then_some(c"REV"))?
        };
        let end = from.saturating_add(ids.len() as i64);
        let next = if end < total { end } else { -1 };
        Ok(Reply::Array(vec![Reply::Int(next), Reply::Array(ids.iter().map(|id| Reply::bulk(id)).collect())]))
    }
}
