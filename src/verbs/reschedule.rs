//! `EMQ.RESCHEDULE 3 job delayed events when` — move a delayed job's due time. Replies the
//! due time (ms). `EMQSTATE` when the job is not delayed.

use crate::domain::{self, When};
use crate::errors::{not_in, Refusal};
use crate::host::command::{q, val, Arg, Command, Keys, Spec::*, Ty};
use crate::host::{ArgStr, Exec, Kind, Reply, Verb};
use crate::keyspace::Role::*;
use crate::queue::{existing_row, Event, Events, Row, State};

pub const KEYS: Keys = Keys::of(&[q(Job, Read), q(Delayed, Update), q(Events, Append)]);
pub const ARGS: &[Arg] = &[val("when", Ty::Str).range(domain::WHEN)];

/// The command, declared whole: registration, ACL, `COMMAND DOCS` and the reference take it
/// from here.
pub const COMMAND: Command = Command::new::<Reschedule>("EMQ.RESCHEDULE")
    .tokens(&["reschedule"])
    .keys(KEYS)
    .args(ARGS)
    .writes()
    .fast()
    .summary("Move a delayed job's due time.")
    .complexity("O(log N)");

pub struct Reschedule;

impl Verb for Reschedule {
    type Args<'a> = When;

    fn shape(args: &[ArgStr]) -> Result<When, Refusal> {
        match args {
            [when] => domain::args::when(when),
            _ => Err(Refusal::Usage),
        }
    }

    fn run(x: &mut Exec<'_>, when: When) -> Result<Reply, Refusal> {
        domain::job_id(x.id)?;
        let due = domain::due(when, x.now())?;
        let row = existing_row(x)?;
        let delayed = x.open_as(Delayed, Kind::ZSet)?;
        let events = Events::open(x)?;
        let id = x.string(x.id)?;
        if Row(&row).state() != Some(State::Delayed) || delayed.zscore(id.str_ref()).is_none() {
            return Err(not_in(x.id, "delayed"));
        }
        delayed.zadd(due, id.str_ref())?;
        events.emit(x, Some(id.str_ref()), Event::Delayed { due })?;
        crate::queue::due_at(x, due);
        Ok(Reply::Int(due))
    }
}
