//! `EMQ.REQUEUE 5 job active wait prio events token` — the holder gives the job back: ready
//! again at the front of wait (the job was not at fault), or prio; no attempt counted, the
//! token cleared.

use crate::domain;
use crate::errors::Refusal;
use crate::host::{Exec, Reply, Verb};
use crate::queue::{existing_row, field, held, lease, zset, Event, Events, Ready, Row, State};

pub struct Requeue;

impl Verb for Requeue {
    type Args<'a> = &'a [u8];

    fn shape<'a>(args: &[&'a [u8]]) -> Result<&'a [u8], Refusal> {
        match args {
            [token] => Ok(token),
            _ => Err(Refusal::Shape("EMQ.REQUEUE takes token".into())),
        }
    }

    fn run<'a>(x: &mut Exec<'a>, token: &'a [u8]) -> Result<Reply, Refusal> {
        domain::job_id(x.id)?;
        domain::token(token)?;
        let row = existing_row(x)?;
        let active = zset(x, 1)?;
        let ready = Ready::open(x.open(2, true), x.open(3, true))?;
        let events = Events::open(x, 4)?;
        let id = x.string(x.id)?;
        if !held(&row, &active, &id, token) {
            return Err(lease(x.id));
        }
        active.zrem(id.ptr());
        let state = ready.put(id.ptr(), Row(&row).priority(), true)?;
        row.hset(&[(&field::STATE, state.lit().get())])?;
        row.hdel(&[&field::TOKEN])?;
        events.emit(x, Some(id.ptr()), Event::Waiting { prev: State::Active })?;
        Ok(Reply::Int(1))
    }
}
