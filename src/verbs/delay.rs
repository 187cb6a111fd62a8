//! `EMQ.DELAY 4 job active delayed events token when` — park a held job in delayed until
//! `when`, without counting an attempt; the token is cleared. Replies the due time (ms).

use crate::domain::{self, When};
use crate::errors::Refusal;
use crate::host::{Exec, Reply, Verb};
use crate::queue::{existing_row, field, held, lease, zset, Event, Events, State};

pub struct Delay;

pub struct Args<'a> {
    token: &'a [u8],
    when: When,
}

impl Verb for Delay {
    type Args<'a> = Args<'a>;

    fn shape<'a>(args: &[&'a [u8]]) -> Result<Args<'a>, Refusal> {
        match args {
            [token, when] => Ok(Args { token, when: domain::args::when(when)? }),
            _ => Err(Refusal::Shape("EMQ.DELAY takes token when".into())),
        }
    }

    fn run<'a>(x: &mut Exec<'a>, a: Args<'a>) -> Result<Reply, Refusal> {
        domain::job_id(x.id)?;
        domain::token(a.token)?;
        let now = x.now();
        let due = domain::due(a.when, now)?;
        let row = existing_row(x)?;
        let active = zset(x, 1)?;
        let delayed = zset(x, 2)?;
        let events = Events::open(x, 3)?;
        let id = x.string(x.id)?;
        if !held(&row, &active, &id, a.token) {
            return Err(lease(x.id));
        }
        active.zrem(id.ptr());
        delayed.zadd(due, id.ptr())?;
        row.hset(&[(&field::STATE, State::Delayed.lit().get())])?;
        row.hdel(&[&field::TOKEN])?;
        events.emit(x, Some(id.ptr()), Event::Delayed { due })?;
        Ok(Reply::Int(due))
    }
}
