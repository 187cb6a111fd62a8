//! `EMQ.EXTEND 2 job active token lease_ms` — move a held job's deadline to now+lease_ms.
//! A job is held while it is in active and its row carries the token, even past its
//! deadline until STALLED reclaims it. Replies the new deadline (ms).

use crate::domain;
use crate::errors::Refusal;
use crate::host::command::{q, val, Arg, Command, Keys, Spec::*, Ty};
use crate::host::{ArgStr, Exec, Reply, Verb};
use crate::keyspace::Role::*;
use crate::queue::Holder;

pub const KEYS: Keys = Keys::of(&[q(Job, Read), q(Active, Update)]);
pub const ARGS: &[Arg] = &[val("token", Ty::Str), val("lease_ms", Ty::Int).range(domain::LEASE)];

/// The command, declared whole: registration, ACL, `COMMAND DOCS` and the reference take it
/// from here.
pub const COMMAND: Command = Command::new::<Extend>("EMQ.EXTEND")
    .holder()
    .tokens(&["extend"])
    .keys(KEYS)
    .args(ARGS)
    .writes()
    .fast()
    .summary("Move a held job's lease deadline to now+lease_ms.")
    .complexity("O(log N)");

pub struct Extend;

pub struct Args<'a> {
    token: ArgStr<'a>,
    lease: i64,
}

impl Verb for Extend {
    type Args<'a> = Args<'a>;

    fn shape<'a>(args: &[ArgStr<'a>]) -> Result<Args<'a>, Refusal> {
        match args {
            [token, lease] => Ok(Args { token: *token, lease: domain::args::number(lease, "lease_ms")? }),
            _ => Err(Refusal::Usage),
        }
    }

    fn run<'a>(x: &mut Exec<'a>, a: Args<'a>) -> Result<Reply, Refusal> {
        domain::job_id(x.id)?;
        domain::token(&a.token)?;
        let ms = domain::LEASE.check(a.lease)?;
        let job = Holder::open(x)?;
        job.check(&a.token)?;
        let deadline = domain::deadline(x.now(), ms);
        job.active.zadd(deadline, job.id.str_ref())?;
        // A shorter lease runs out before the one upkeep knows of.
        crate::queue::due_at(x, deadline);
        Ok(Reply::Int(deadline))
    }
}
