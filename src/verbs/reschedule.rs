//! `EMQ.RESCHEDULE 3 job delayed events when` — move a delayed job's due time. Replies the
//! due time (ms). `EMQSTATE` when the job is not delayed.

use crate::domain::{self, When};
use crate::errors::Refusal;
use crate::host::{Exec, Reply, Verb};
use crate::queue::{existing_row, not_in, zset, Event, Events, Row, State};

pub struct Reschedule;

impl Verb for Reschedule {
    type Args<'a> = When;

    fn shape(args: &[&[u8]]) -> Result<When, Refusal> {
        match args {
            [when] => domain::args::when(when),
            _ => Err(Refusal::Shape("EMQ.RESCHEDULE takes when".into())),
        }
    }

    fn run(x: &mut Exec<'_>, when: When) -> Result<Reply, Refusal> {
        domain::job_id(x.id)?;
        let now = x.now();
        let due = domain::due(when, now)?;
        let row = existing_row(x)?;
        let delayed = zset(x, 1)?;
        let events = Events::open(x, 2)?;
        let id = x.string(x.id)?;
        if Row(&row).state() != Some(State::Delayed) || delayed.zscore(id.ptr()).is_none() {
            return Err(not_in(x.id, "delayed"));
        }
        delayed.zadd(due, id.ptr())?;
        events.emit(x, Some(id.ptr()), Event::Delayed { due })?;
        Ok(Reply::Int(due))
    }
}
