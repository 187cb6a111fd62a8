//! `EMQ.PROMOTE 5 job delayed wait prio events` — make a delayed job ready now (wait at the
//! back, or prio). `EMQSTATE` when the job is not delayed.

use crate::domain;
use crate::errors::{not_in, Refusal};
use crate::host::command::{q, Arg, Command, Keys, Spec::*};
use crate::host::{ArgStr, Exec, Kind, Reply, Verb};
use crate::keyspace::Role::*;
use crate::queue::{existing_row, field, End, Event, Events, Ready, Row, State};

pub const KEYS: Keys =
    Keys::of(&[q(Job, Update), q(Delayed, Take), q(Wait, Insert), q(Prio, Insert), q(Events, Append)]);
pub const ARGS: &[Arg] = &[];

/// The command, declared whole: registration, ACL, `COMMAND DOCS` and the reference take it
/// from here.
pub const COMMAND: Command = Command::new::<Promote>("EMQ.PROMOTE")
    .tokens(&["promote"])
    .keys(KEYS)
    .args(ARGS)
    .writes()
    .fast()
    .summary("Make a delayed job ready now.")
    .complexity("O(log N)");

pub struct Promote;

impl Verb for Promote {
    type Args<'a> = ();

    fn shape(args: &[ArgStr]) -> Result<(), Refusal> {
        super::no_arguments(args)
    }

    fn run(x: &mut Exec<'_>, _: ()) -> Result<Reply, Refusal> {
        domain::job_id(x.id)?;
        let row = existing_row(x)?;
        let delayed = x.open_as(Delayed, Kind::ZSet)?;
        let ready = Ready::open(x)?;
        let events = Events::open(x)?;
        let id = x.string(x.id)?;
        if Row(&row).state() != Some(State::Delayed) || delayed.zscore(id.str_ref()).is_none() {
            return Err(not_in(x.id, "delayed"));
        }
        delayed.zrem(id.str_ref());
        let state = ready.put(id.str_ref(), Row(&row).priority(), End::Back)?;
        row.hset(&[(&field::STATE, state.lit().str_ref())])?;
        events.emit(x, Some(id.str_ref()), Event::Waiting { prev: State::Delayed })?;
        Ok(Reply::Int(1))
    }
}
