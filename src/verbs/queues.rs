//! `TRA.QUEUES [FROM i] [COUNT n]` — the queues this node's upkeep knows in the caller's
//! database (`registry`), in name order, from position i (default 0), at most n (1..=1000,
//! default 100). Replies `[next, [Q ...]]`, `next` the position to continue from, or -1 at the
//! end. Read-only, no keys, no fence. After a restart or a failover the list fills again as
//! upkeep's scan finds the queues.

use crate::domain::{self, args::Opt};
use crate::errors::Refusal;
use crate::host::command::{opt, Arg, Command, Keys, Ty};
use crate::host::{timer, ArgStr, Exec, Reply, Verb};
use crate::registry;

pub const KEYS: Keys = Keys::of(&[]);
pub const ARGS: &[Arg] = &[
    opt("from", "FROM", "i", Ty::Int).range(domain::QUEUES_FROM),
    opt("count", "COUNT", "n", Ty::Int).range(domain::PAGE_COUNT),
];

/// The command, declared whole: registration, ACL, `COMMAND DOCS` and the reference take it
/// from here.
pub const COMMAND: Command = Command::new::<Queues>("TRA.QUEUES")
    .bare()
    .keys(KEYS)
    .args(ARGS)
    .summary("The queues upkeep knows in this database, a page at a time.")
    .complexity("O(log Q + n) for a page of n of Q queues");

pub struct Queues;

impl Verb for Queues {
    type Args<'a> = (Option<i64>, Option<i64>);

    fn shape(args: &[ArgStr]) -> Result<(Option<i64>, Option<i64>), Refusal> {
        let o = domain::args::options(args, &[Opt::From, Opt::Count])?;
        Ok((o.from, o.count))
    }

    fn run(x: &mut Exec<'_>, (from, count): (Option<i64>, Option<i64>)) -> Result<Reply, Refusal> {
        let from = domain::QUEUES_FROM.check(from.unwrap_or(0))?;
        let count = domain::PAGE_COUNT.check(count.unwrap_or(100))?;
        let (page, next) = registry::page(
            timer::selected(x.ctx()),
            usize::try_from(from).unwrap_or(usize::MAX),
            usize::try_from(count).unwrap_or(0),
        );
        let next = next.and_then(|n| i64::try_from(n).ok()).unwrap_or(-1);
        Ok(Reply::Array(vec![Reply::Int(next), Reply::Array(page.iter().map(|q| Reply::bulk(q)).collect())]))
    }
}
