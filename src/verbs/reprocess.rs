//! `EMQ.REPROCESS 6 job completed failed wait prio events` — send a completed or failed job
//! back to ready (at the back of wait, or prio), clearing its result, error, finish time,
//! token and last claim time and setting its counters to 0. `EMQSTATE` when the job is not
//! finished.

use crate::domain;
use crate::errors::{not_in, Refusal};
use crate::host::command::{q, Arg, Command, Keys, Spec::*};
use crate::host::{ArgStr, Exec, Kind, Reply, Verb};
use crate::keyspace::Role::*;
use crate::queue::{existing_row, field, Event, Events, Ready, Row, State};

pub const KEYS: Keys = Keys::of(&[
    q(Job, Update),
    q(Completed, Take),
    q(Failed, Take),
    q(Wait, Insert),
    q(Prio, Insert),
    q(Events, Append),
]);
pub const ARGS: &[Arg] = &[];

/// The command, declared whole: registration, ACL, `COMMAND DOCS` and the reference take it
/// from here.
pub const COMMAND: Command = Command::new::<Reprocess>("EMQ.REPROCESS")
    .tokens(&["reprocess"])
    .keys(KEYS)
    .args(ARGS)
    .writes()
    .fast()
    .summary("Send a completed or failed job back to ready with its counters reset.")
    .complexity("O(log N)");

pub struct Reprocess;

impl Verb for Reprocess {
    type Args<'a> = ();

    fn shape(args: &[ArgStr]) -> Result<(), Refusal> {
        super::no_arguments(args)
    }

    fn run(x: &mut Exec<'_>, _: ()) -> Result<Reply, Refusal> {
        domain::job_id(x.id)?;
        let row = existing_row(x)?;
        let completed = x.open_as(Completed, Kind::ZSet)?;
        let failed = x.open_as(Failed, Kind::ZSet)?;
        let ready = Ready::open(x)?;
        let events = Events::open(x)?;
        let id = x.string(x.id)?;
        let r = Row(&row);
        let (prev, set) = match r.state() {
            Some(State::Completed) => (State::Completed, &completed),
            Some(State::Failed) => (State::Failed, &failed),
            _ => return Err(not_in(x.id, "completed or failed")),
        };
        if !set.zrem(id.ptr()) {
            return Err(not_in(x.id, "completed or failed"));
        }
        let state = ready.put(id.ptr(), r.priority(), false)?;
        row.hset(&[(&field::STATE, state.lit().get())])?;
        row.hdel(&[
            &field::RESULT,
            &field::ERROR,
            &field::FINISHED,
            &field::TOKEN,
            &field::STARTED,
            &field::MADE,
            &field::STALLS,
            &field::CLAIMED,
            &field::PROGRESS,
        ])?;
        events.emit(x, Some(id.ptr()), Event::Waiting { prev })?;
        Ok(Reply::Int(1))
    }
}
