//! `EMQ.CLAIM 6 wait prio active delayed meta events token lease_ms [COUNT n] [BLOCK ms] [ROW] [BY worker]`
//! `EMQ.CLAIM 6 wait prio active delayed meta events PAUSE|RESUME`
//!
//! First promotes due delayed jobs (at most `trafikey.promote-batch`), then, unless the queue
//! is paused, takes up to COUNT ready jobs in the order the queue serves them
//! (`domain::claim`), each becoming active with deadline now+lease_ms; the row records the
//! token, `as+1` and the claim time, and with BY the worker's name (`w`, which only the next
//! claim with BY replaces). Replies `[[id name data attempt] ...]`, with ROW each entry also
//! the row as `queue::view::claimed_view` shows it. The queue's
//! limits (TRA.LIMIT: a rate window, a FOR, global concurrency) cut how many it takes
//! (`domain::limit`); under a rate it records its window in `meta`.
//! With BLOCK and nothing to take (none ready, paused, or held by a limit), the caller waits
//! up to ms (0: no limit) for a job of this queue to become ready, for RESUME or for the
//! limit to let it claim — `wait`, `prio` and `meta` are signalled by every verb that makes
//! a job ready, by upkeep's promotions, by RESUME, by TRA.LIMIT and by upkeep when a window
//! or a FOR ends; `active` (waited on under global concurrency) by every verb that takes a
//! job out of it — and the claim then runs as it would at that moment (`host::blocking`); the timeout
//! answers the empty array. Inside MULTI or a script it answers at once, as without BLOCK.
//! PAUSE/RESUME write `meta` and need the caller's write permission on it (CLAIM declares
//! `meta` read-only, so a worker with read-only `meta` can claim but not pause).

use super::options::BY;
use crate::domain::{self, args::Opt};
use crate::errors::Refusal;
use crate::host::command::{block, flag, one_of, opt, q, val, word, Arg, Command, Keys, Spec::*, Ty};
use crate::host::{one, Access, ArgStr, Exec, Kind, Reply, Verb};
use crate::keyspace::Role::{self, *};
use crate::queue::claim::Claiming;
use crate::queue::{meta, Event, Events};

pub const KEYS: Keys = Keys::of(&[
    q(Wait, Update),
    q(Prio, Update),
    q(Active, Insert),
    q(Delayed, Take),
    q(Meta, Read),
    q(Events, Append),
]);
pub const ARGS: &[Arg] = &[one_of(
    "mode",
    None,
    &[
        block(
            "take",
            None,
            &[
                val("token", Ty::Str),
                val("lease_ms", Ty::Int).range(domain::LEASE),
                opt("count", "COUNT", "n", Ty::Int).range(domain::CLAIM_COUNT),
                opt("block", "BLOCK", "ms", Ty::Int).range(domain::BLOCK),
                flag("row", "ROW"),
                BY,
            ],
        ),
        word("PAUSE"),
        word("RESUME"),
    ],
)];

/// The command, declared whole: registration, ACL, `COMMAND DOCS` and the reference take it
/// from here.
pub const COMMAND: Command = Command::new::<Claim>("EMQ.CLAIM")
    .tokens(&["claim", "claim.pause"])
    .keys(KEYS)
    .args(ARGS)
    .writes()
    .summary("Promote due delayed jobs, then take up to COUNT ready jobs under a lease; or pause/resume the queue.")
    .complexity("O((n + p) log N) for n jobs taken and p promoted");

pub struct Claim;

pub enum Args<'a> {
    Take {
        token: ArgStr<'a>,
        lease: i64,
        count: Option<i64>,
        block: Option<i64>,
        row: bool,
        by: Option<ArgStr<'a>>,
    },
    Pause(bool),
}

/// The keys a waiting claimer is woken by: the ready sets, and `meta` for RESUME, a change
/// of the queue's limits and the reopening of its rate window (upkeep signals it then).
const WAKE_ON: &[Role] = &[Wait, Prio, Meta];
/// The same and `active`, for a queue under global concurrency: a job leaving `active` lets
/// a claim proceed, and every verb that takes one out signals it.
const WAKE_ON_ACTIVE: &[Role] = &[Wait, Prio, Meta, Active];

impl Verb for Claim {
    type Args<'a> = Args<'a>;

    fn shape<'a>(args: &[ArgStr<'a>]) -> Result<Args<'a>, Refusal> {
        match args {
            [w] if w.eq_ignore_ascii_case(b"PAUSE") => Ok(Args::Pause(true)),
            [w] if w.eq_ignore_ascii_case(b"RESUME") => Ok(Args::Pause(false)),
            [token, lease, rest @ ..] => {
                let lease = domain::args::number(lease, "lease_ms")?;
                let o = domain::args::options(rest, &[Opt::Count, Opt::Block, Opt::Row, Opt::By])?;
                Ok(Args::Take { token: *token, lease, count: o.count, block: o.block, row: o.row, by: o.by })
            }
            _ => Err(Refusal::Usage),
        }
    }

    fn run<'a>(x: &mut Exec<'a>, a: Args<'a>) -> Result<Reply, Refusal> {
        match a {
            Args::Pause(on) => pause(x, on),
            Args::Take { token, lease, count, block, row, by } => {
                let take = Claiming::check(token, lease, count, row, by)?;
                let block = block.map(|b| domain::BLOCK.check(b)).transpose()?;
                let (jobs, settled, concurrency) = take.run(x, None)?;
                Ok(match block {
                    // Nothing ready (paused, or limited): wait for a job to become ready, for
                    // RESUME, or for the limit to let the claim proceed.
                    Some(timeout_ms) if jobs.is_empty() && settled => {
                        Reply::Block { timeout_ms, roles: if concurrency { WAKE_ON_ACTIVE } else { WAKE_ON } }
                    }
                    _ => jobs.reply(),
                })
            }
        }
    }
}

fn pause(x: &mut Exec, on: bool) -> Result<Reply, Refusal> {
    let meta_name = x.key_name(Meta)?;
    x.caller()?.key(meta_name, Access::Write)?;
    let meta = x.open_as(Meta, Kind::Hash)?;
    let events = Events::open(x)?;
    let paused = meta.hget(&meta::PAUSED).is_some();
    if paused == on {
        return Ok(Reply::Int(0));
    }
    if on {
        meta.hset(&[(&meta::PAUSED, one().str_ref())])?;
    } else {
        meta.hdel(&[&meta::PAUSED])?;
        meta.signal_ready();
    }
    events.emit(x, None, if on { Event::Paused } else { Event::Resumed })?;
    Ok(Reply::Int(1))
}
