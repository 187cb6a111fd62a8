//! `EMQ.EXTEND 2 job active token lease_ms` — move a held job's deadline to now+lease_ms.
//! A job is held while it is in active and its row carries the token, even past its
//! deadline until STALLED reclaims it. Replies the new deadline (ms).

use crate::domain;
use crate::errors::Refusal;
use crate::host::{Exec, Reply, Verb};
use crate::queue::{existing_row, held, lease, zset};

pub struct Extend;

pub struct Args<'a> {
    token: &'a [u8],
    lease: i64,
}

impl Verb for Extend {
    type Args<'a> = Args<'a>;

    fn shape<'a>(args: &[&'a [u8]]) -> Result<Args<'a>, Refusal> {
        match args {
            [token, lease] => Ok(Args { token, lease: domain::args::number(lease, "lease_ms")? }),
            _ => Err(Refusal::Shape("EMQ.EXTEND takes token lease_ms".into())),
        }
    }

    fn run<'a>(x: &mut Exec<'a>, a: Args<'a>) -> Result<Reply, Refusal> {
        domain::job_id(x.id)?;
        domain::token(a.token)?;
        let ms = domain::range(a.lease, 1, domain::LEASE_MAX, "lease_ms")?;
        let row = existing_row(x)?;
        let active = zset(x, 1)?;
        let id = x.string(x.id)?;
        if !held(&row, &active, &id, a.token) {
            return Err(lease(x.id));
        }
        let deadline = domain::deadline(x.now(), ms);
        active.zadd(deadline, id.ptr())?;
        Ok(Reply::Int(deadline))
    }
}
