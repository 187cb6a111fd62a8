//! `TRA.CLEAN 2 set events GRACE ms [COUNT n]` — `set` is `completed` or `failed`: deletes
//! the jobs that finished ms ago or earlier (score at most now − ms: GRACE 0 takes every
//! finished job), oldest first, rows with them, at most n (1..=10000, default 1000). Replies
//! the ids deleted (the client repeats while a full page comes back). One `cleaned` event (`count`) when it deleted any. GRACE is
//! 0..=2^53−1; rows are opened as the caller. Fenced.

use crate::domain::{self, args::Opt};
use crate::errors::Refusal;
use crate::host::command::{opt, q, Arg, Command, KeyRole, Keys, Slot, Spec, Spec::*, Ty};
use crate::host::{ArgStr, Exec, Kind, Reply, Str, Verb};
use crate::keyspace::Role::{self, *};
use crate::queue::{doomed_rows, Event, Events};

/// The finished sets: the key TRA.CLEAN trims.
pub const FINISHED: KeyRole = KeyRole::OneOf(&[Role::Completed, Role::Failed]);

pub const KEYS: Keys = Keys::of(&[Slot { role: FINISHED, spec: Spec::Take }, q(Events, Append)]);
pub const ARGS: &[Arg] = &[
    opt("grace", "GRACE", "ms", Ty::Int).range(domain::GRACE).required(),
    opt("count", "COUNT", "n", Ty::Int).range(domain::DELETE_COUNT),
];

/// The command, declared whole: registration, ACL, `COMMAND DOCS` and the reference take it
/// from here.
pub const COMMAND: Command = Command::new::<Clean>("TRA.CLEAN")
    .keys(KEYS)
    .args(ARGS)
    .writes()
    .summary("Delete jobs that finished GRACE ms ago or earlier, oldest first, a bounded batch a call.")
    .complexity("O(n log N) for n jobs");

pub struct Clean;

impl Verb for Clean {
    type Args<'a> = (i64, Option<i64>);

    fn shape(args: &[ArgStr]) -> Result<(i64, Option<i64>), Refusal> {
        let o = domain::args::options(args, &[Opt::Grace, Opt::Count])?;
        Ok((o.grace.ok_or(Refusal::Usage)?, o.count))
    }

    fn run(x: &mut Exec<'_>, (grace, count): (i64, Option<i64>)) -> Result<Reply, Refusal> {
        let grace = domain::GRACE.check(grace)?;
        let count = domain::delete_count(count)?;
        let set = x.open_as(FINISHED, Kind::ZSet)?;
        let events = Events::open(x)?;
        let cutoff = x.now().saturating_sub(grace);
        let old: Vec<Str> =
            set.zrange(f64::NEG_INFINITY, cutoff as f64, count).into_iter().map(|(m, _)| m).collect();
        let rows = doomed_rows(x, &old)?;
        set.zrem_many(&old.iter().map(Str::str_ref).collect::<Vec<_>>());
        rows.delete();
        if !old.is_empty() {
            events.emit(x, None, Event::Cleaned { count: old.len() as i64 })?;
        }
        Ok(Reply::Array(old.iter().map(|id| Reply::bulk(id.bytes())).collect()))
    }
}
