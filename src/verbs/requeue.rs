//! `EMQ.REQUEUE 5 job active wait prio events token` — the holder gives the job back: ready
//! again at the front of wait (the job was not at fault), or prio; no attempt counted, the
//! token cleared.

use crate::domain;
use crate::errors::Refusal;
use crate::host::command::{q, val, Arg, Command, Keys, Spec::*, Ty};
use crate::host::{ArgStr, Exec, Reply, Verb};
use crate::keyspace::Role::*;
use crate::queue::{field, End, Event, Events, Holder, Ready, Row, State};

pub const KEYS: Keys =
    Keys::of(&[q(Job, Update), q(Active, Take), q(Wait, Insert), q(Prio, Insert), q(Events, Append)]);
pub const ARGS: &[Arg] = &[val("token", Ty::Str)];

/// The command, declared whole: registration, ACL, `COMMAND DOCS` and the reference take it
/// from here.
pub const COMMAND: Command = Command::new::<Requeue>("EMQ.REQUEUE")
    .holder()
    .tokens(&["requeue"])
    .keys(KEYS)
    .args(ARGS)
    .writes()
    .fast()
    .summary("Give a held job back: ready again at the front, no attempt counted.")
    .complexity("O(log N)");

pub struct Requeue;

impl Verb for Requeue {
    type Args<'a> = ArgStr<'a>;

    fn shape<'a>(args: &[ArgStr<'a>]) -> Result<ArgStr<'a>, Refusal> {
        match args {
            [token] => Ok(*token),
            _ => Err(Refusal::Usage),
        }
    }

    fn run<'a>(x: &mut Exec<'a>, token: ArgStr<'a>) -> Result<Reply, Refusal> {
        domain::job_id(x.id)?;
        domain::token(&token)?;
        let job = Holder::open(x)?;
        let ready = Ready::open(x)?;
        let events = Events::open(x)?;
        job.check(&token)?;
        job.active.zrem(job.id.str_ref());
        job.active.signal_ready();
        let state = ready.put(job.id.str_ref(), Row(&job.row).priority(), End::Front)?;
        job.row.hset(&[(&field::STATE, state.lit().str_ref())])?;
        job.row.hdel(&[&field::TOKEN])?;
        events.emit(x, Some(job.id.str_ref()), Event::Waiting { prev: State::Active })?;
        Ok(Reply::Int(1))
    }
}
