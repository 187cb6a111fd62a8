//! `EMQ.PROMOTE 5 job delayed wait prio events` — make a delayed job ready now (wait at the
//! back, or prio). `EMQSTATE` when the job is not delayed.

use crate::domain;
use crate::errors::Refusal;
use crate::host::{Exec, Reply, Verb};
use crate::queue::{existing_row, field, not_in, zset, Event, Events, Ready, Row, State};

pub struct Promote;

impl Verb for Promote {
    type Args<'a> = ();

    fn shape(args: &[&[u8]]) -> Result<(), Refusal> {
        super::version::no_arguments("EMQ.PROMOTE", args)
    }

    fn run(x: &mut Exec<'_>, _: ()) -> Result<Reply, Refusal> {
        domain::job_id(x.id)?;
        let row = existing_row(x)?;
        let delayed = zset(x, 1)?;
        let ready = Ready::open(x.open(2, true), x.open(3, true))?;
        let events = Events::open(x, 4)?;
        let id = x.string(x.id)?;
        if Row(&row).state() != Some(State::Delayed) || delayed.zscore(id.ptr()).is_none() {
            return Err(not_in(x.id, "delayed"));
        }
        delayed.zrem(id.ptr());
        let state = ready.put(id.ptr(), Row(&row).priority(), false)?;
        row.hset(&[(&field::STATE, state.lit().get())])?;
        events.emit(x, Some(id.ptr()), Event::Waiting { prev: State::Delayed })?;
        Ok(Reply::Int(1))
    }
}
