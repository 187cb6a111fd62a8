//! `EMQ.REPROCESS 6 job completed failed wait prio events` — send a completed or failed job
//! back to ready (at the back of wait, or prio), clearing its result, error, finish time and
//! token and setting its counters to 0. `EMQSTATE` when the job is not finished.

use crate::domain;
use crate::errors::Refusal;
use crate::host::{Exec, Reply, Verb};
use crate::queue::{existing_row, field, not_in, zset, Event, Events, Ready, Row, State};

pub struct Reprocess;

impl Verb for Reprocess {
    type Args<'a> = ();

    fn shape(args: &[&[u8]]) -> Result<(), Refusal> {
        super::version::no_arguments("EMQ.REPROCESS", args)
    }

    fn run(x: &mut Exec<'_>, _: ()) -> Result<Reply, Refusal> {
        domain::job_id(x.id)?;
        let row = existing_row(x)?;
        let completed = zset(x, 1)?;
        let failed = zset(x, 2)?;
        let ready = Ready::open(x.open(3, true), x.open(4, true))?;
        let events = Events::open(x, 5)?;
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
        ])?;
        events.emit(x, Some(id.ptr()), Event::Waiting { prev })?;
        Ok(Reply::Int(1))
    }
}
