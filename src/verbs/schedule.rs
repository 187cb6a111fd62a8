//! `EMQ.SCHEDULE 3 job delayed events when name data [PRIORITY p] [ATTEMPTS n]
//! [BACKOFF FIXED|EXP ms] [OPTS blob] [EXPIRE when] [ALIAS key]
//! [DEDUP id [DEDUPTTL ms [EXTEND] | KEEPLAST] [REPLACE]]`
//!
//! ENQUEUE for later: creates the row in state delayed with score = due (`when` is absolute
//! ms or `+ms`; a time in the past is due now, and the next CLAIM promotes it). An existing
//! row or a live ALIAS makes the call a no-op answering 0. LIFO is not taken: a scheduled
//! job becomes ready in due order. Its `delayed` event carries `name` (and `alias`): a new
//! job, where DELAY's and FAIL's put one off. DEDUP as ENQUEUE's (a live id answers its
//! holder's id); a job KEEPLAST keeps is due, once made, as long after its holder finishes
//! as it was due after the call.

use super::options::{job_args, ALIAS, ATTEMPTS, BACKOFF, DEDUP, EXPIRE, OPTS, PRIORITY};
use crate::domain::{self, args::Opt, args::Options, When};
use crate::errors::Refusal;
use crate::host::command::{q, val, Arg, Command, Keys, Spec::*, Ty};
use crate::host::{ArgStr, Exec, Kind, Reply, Verb};
use crate::keyspace::Role::*;
use crate::queue::alias::{live_alias, name_alias};
use crate::queue::dedup::{self, Keeping, Produced};
use crate::queue::{Aliases, Event, Events, NewJob, State};

pub const KEYS: Keys = Keys::of(&[q(Job, Insert), q(Delayed, Insert), q(Events, Append)]);
pub const ARGS: &[Arg] = &[
    val("when", Ty::Str).range(domain::WHEN),
    val("name", Ty::Str),
    val("data", Ty::Str).payload(),
    PRIORITY,
    ATTEMPTS,
    BACKOFF,
    OPTS,
    EXPIRE,
    ALIAS,
    DEDUP,
];

/// The command, declared whole: registration, ACL, `COMMAND DOCS` and the reference take it
/// from here.
pub const COMMAND: Command = Command::new::<Schedule>("EMQ.SCHEDULE")
    .tokens(&["schedule"])
    .keys(KEYS)
    .args(ARGS)
    .creates()
    .fast()
    .summary(
        "Create a job that becomes ready at `when`; 0 and nothing written when the id or its ALIAS exists, the holder's id when its DEDUP id is live.",
    )
    .complexity("O(log N)");

pub struct Schedule;

pub struct Args<'a> {
    when: When,
    name: ArgStr<'a>,
    data: ArgStr<'a>,
    o: Options<ArgStr<'a>>,
}

impl Verb for Schedule {
    type Args<'a> = Args<'a>;

    fn shape<'a>(args: &[ArgStr<'a>]) -> Result<Args<'a>, Refusal> {
        let [when, rest @ ..] = args else { return Err(Refusal::Usage) };
        let when = domain::args::when(when)?;
        let (name, data, o) = job_args(
            rest,
            &[
                Opt::Priority,
                Opt::Attempts,
                Opt::Backoff,
                Opt::Opts,
                Opt::Expire,
                Opt::Alias,
                Opt::Dedup,
                Opt::DedupTtl,
                Opt::Extend,
                Opt::Replace,
                Opt::KeepLast,
            ],
        )?;
        Ok(Args { when, name, data, o })
    }

    fn run<'a>(x: &mut Exec<'a>, a: Args<'a>) -> Result<Reply, Refusal> {
        domain::job_id(x.id)?;
        let now = x.now();
        let job = NewJob::check(a.name, a.data, &a.o, now)?;
        let due = domain::due(a.when, now)?;
        let row = x.write(Job)?;
        if row.exists_as(Kind::Hash)? {
            return Ok(Reply::Int(0));
        }
        let aliases = job.alias.map(|_| Aliases::open(x)).transpose()?;
        if live_alias(aliases.as_ref(), &job) {
            return Ok(Reply::Int(0));
        }
        let delayed = x.open_as(Delayed, Kind::ZSet)?;
        let events = Events::open(x)?;
        let keeping = Keeping { job: &job, lifo: false, due: Some(due) };
        let replaced = match job
            .dedup
            .as_deref()
            .map(|d| dedup::produce(x, *d, &events, Some(&delayed), &keeping))
            .transpose()?
        {
            Some(Produced::Duplicate(holder)) => return Ok(Reply::Str(holder)),
            Some(Produced::Holds(replaced)) => replaced,
            None => None,
        };
        let id = x.string(x.id)?;
        job.create(x, &row, x.id, State::Delayed, x.int(now)?.str_ref())?;
        name_alias(aliases.as_ref(), &job, &id)?;
        if let Some(c) = replaced {
            c.delete();
        }
        delayed.zadd(due, id.str_ref())?;
        let alias = job.alias.map(|a| a.str_ref());
        events.emit(x, Some(id.str_ref()), Event::Scheduled { due, name: a.name.str_ref(), alias })?;
        crate::queue::due_at(x, due);
        Ok(Reply::Int(1))
    }
}
