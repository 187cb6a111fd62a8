//! `EMQ.DELAY 4 job active delayed events token when` — park a held job in delayed until
//! `when`, without counting an attempt; the token is cleared. Replies the due time (ms).

use crate::domain::{self, When};
use crate::errors::Refusal;
use crate::host::command::{q, val, Arg, Command, Keys, Spec::*, Ty};
use crate::host::{ArgStr, Exec, Kind, Reply, Verb};
use crate::keyspace::Role::*;
use crate::queue::{field, Event, Events, Holder, State};

pub const KEYS: Keys = Keys::of(&[q(Job, Update), q(Active, Take), q(Delayed, Insert), q(Events, Append)]);
pub const ARGS: &[Arg] = &[val("token", Ty::Str), val("when", Ty::Str).range(domain::WHEN)];

/// The command, declared whole: registration, ACL, `COMMAND DOCS` and the reference take it
/// from here.
pub const COMMAND: Command = Command::new::<Delay>("EMQ.DELAY")
    .holder()
    .tokens(&["delay"])
    .keys(KEYS)
    .args(ARGS)
    .writes()
    .fast()
    .summary("Park a held job in delayed until `when`, counting no attempt.")
    .complexity("O(log N)");

pub struct Delay;

pub struct Args<'a> {
    token: ArgStr<'a>,
    when: When,
}

impl Verb for Delay {
    type Args<'a> = Args<'a>;

    fn shape<'a>(args: &[ArgStr<'a>]) -> Result<Args<'a>, Refusal> {
        match args {
            [token, when] => Ok(Args { token: *token, when: domain::args::when(when)? }),
            _ => Err(Refusal::Usage),
        }
    }

    fn run<'a>(x: &mut Exec<'a>, a: Args<'a>) -> Result<Reply, Refusal> {
        domain::job_id(x.id)?;
        domain::token(&a.token)?;
        let due = domain::due(a.when, x.now())?;
        let job = Holder::open(x)?;
        let delayed = x.open_as(Delayed, Kind::ZSet)?;
        let events = Events::open(x)?;
        job.check(&a.token)?;
        job.active.zrem(job.id.str_ref());
        job.active.signal_ready();
        delayed.zadd(due, job.id.str_ref())?;
        job.row.hset(&[(&field::STATE, State::Delayed.lit().str_ref())])?;
        job.row.hdel(&[&field::TOKEN])?;
        events.emit(x, Some(job.id.str_ref()), Event::Delayed { due })?;
        crate::queue::due_at(x, due);
        Ok(Reply::Int(due))
    }
}
