//! `EMQ.STALLED 5 active wait prio failed events [MAXSTALLS n] [COUNT n]`
//!
//! Reclaims active jobs whose deadline has passed (at most COUNT, default
//! `trafikey.stalled-batch`, earliest deadline first): `sc+1` and a `stalled` event, then
//! back to ready at the front of wait (or prio), or — once stalls exceed MAXSTALLS (default:
//! the queue's own `max-stalls` in `meta`, else `trafikey.max-stalls`) — failed for good with error `stalled` and `am+1`, under the
//! default retention of failed jobs (`domain::stalled` decides which). The token is cleared
//! either way. Replies `[[requeued ids] [failed ids]]`.

use crate::config;
use crate::domain::{self, args::Opt};
use crate::errors::Refusal;
use crate::host::command::{opt, q, Arg, Command, Keys, Spec::*, Ty};
use crate::host::{Access, ArgStr, Exec, Reply, Verb};
use crate::keyspace::Role::{self, *};
use crate::queue::stall;

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
                stall::max_stalls_of(&meta)?
            }
        };
        let count = domain::batch(
            a.count.unwrap_or(config::get(&config::STALLED_BATCH)),
            domain::STALLED_COUNT,
            domain::RECLAIM_PER_CALL,
        )? as i64;
        let (requeued, dead) = stall::reclaim(x, max_stalls, count)?;
        Ok(Reply::Array(vec![Reply::Array(requeued), Reply::Array(dead)]))
    }
}
