//! `EMQ.SCHEDULE 3 job delayed events when name data [PRIORITY p] [ATTEMPTS n]
//! [BACKOFF FIXED|EXP ms] [OPTS blob] [EXPIRE when]`
//!
//! ENQUEUE for later: creates the row in state delayed with score = due (`when` is absolute
//! ms or `+ms`; a time in the past is due now, and the next CLAIM promotes it). An existing
//! row makes the call a no-op answering 0. LIFO is not taken: a scheduled job becomes
//! ready in due order.

use super::enqueue::{job_args, ATTEMPTS, BACKOFF, EXPIRE, OPTS, PRIORITY};
use crate::domain::{self, args::Opt, args::Options, When};
use crate::errors::Refusal;
use crate::host::command::{q, val, Arg, Command, Keys, Spec::*, Ty};
use crate::host::{ArgStr, Exec, Kind, Reply, Verb};
use crate::keyspace::Role::*;
use crate::queue::{Event, Events, NewJob, State};

pub const KEYS: Keys = Keys::of(&[q(Job, Insert), q(Delayed, Insert), q(Events, Append)]);
pub const ARGS: &[Arg] = &[
    val("when", Ty::Str),
    val("name", Ty::Str),
    val("data", Ty::Str),
    PRIORITY,
    ATTEMPTS,
    BACKOFF,
    OPTS,
    EXPIRE,
];

/// The command, declared whole: registration, ACL, `COMMAND DOCS` and the reference take it
/// from here.
pub const COMMAND: Command = Command::new::<Schedule>("EMQ.SCHEDULE")
    .tokens(&["schedule"])
    .keys(KEYS)
    .args(ARGS)
    .creates()
    .fast()
    .summary("Create a job that becomes ready at `when`; 0 and nothing written when the id exists.")
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
        let (name, data, o) =
            job_args(rest, &[Opt::Priority, Opt::Attempts, Opt::Backoff, Opt::Opts, Opt::Expire])?;
        Ok(Args { when, name, data, o })
    }

    fn run<'a>(x: &mut Exec<'a>, a: Args<'a>) -> Result<Reply, Refusal> {
        domain::job_id(x.id)?;
        let now = x.now();
        let job = NewJob::check(a.name, a.data, &a.o, now)?;
        let due = domain::due(a.when, now)?;
        let row = x.open(Job, true)?;
        if row.exists_as(Kind::Hash)? {
            return Ok(Reply::Int(0));
        }
        let delayed = x.open_as(Delayed, Kind::ZSet)?;
        let events = Events::open(x)?;
        let id = x.string(x.id)?;
        job.create(x, &row, State::Delayed, now)?;
        delayed.zadd(due, id.ptr())?;
        events.emit(x, Some(id.ptr()), Event::Delayed { due })?;
        crate::queue::due_at(x, due);
        Ok(Reply::Int(1))
    }
}
