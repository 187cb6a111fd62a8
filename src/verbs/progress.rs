//! `TRA.PROGRESS 3 job active events token progress` — the holder reports how far it got:
//! an opaque report of 0..=4096 bytes stored in the row (field `g`, shown by `TRA.JOB`,
//! replaced by the next report, cleared by REPROCESS), and one `progress` event. Replies 1;
//! `EMQLEASE` when the job is not held with this token. Fenced.

use crate::domain;
use crate::errors::Refusal;
use crate::host::command::{q, val, Arg, Command, Keys, Spec::*, Ty};
use crate::host::{drive, ArgStr, Exec, Reply, Verb};
use crate::keyspace::Role::*;
use crate::queue::{field, Event, Events, Holder};

pub const KEYS: Keys = Keys::of(&[q(Job, Update), q(Active, Read), q(Events, Append)]);
pub const ARGS: &[Arg] = &[val("token", Ty::Str), val("progress", Ty::Str)];

/// The command, declared whole: registration, ACL, `COMMAND DOCS` and the reference take it
/// from here.
pub const COMMAND: Command = Command::new("TRA.PROGRESS", drive::<Progress>)
    .keys(KEYS)
    .args(ARGS)
    .writes()
    .fast()
    .summary("The holder reports its progress on a job: stored in the row, one event.")
    .complexity("O(log N)");

pub struct Progress;

pub struct Args<'a> {
    token: ArgStr<'a>,
    progress: ArgStr<'a>,
}

impl Verb for Progress {
    type Args<'a> = Args<'a>;

    fn shape<'a>(args: &[ArgStr<'a>]) -> Result<Args<'a>, Refusal> {
        match args {
            [token, progress] => Ok(Args { token: *token, progress: *progress }),
            _ => Err(Refusal::Usage),
        }
    }

    fn run<'a>(x: &mut Exec<'a>, a: Args<'a>) -> Result<Reply, Refusal> {
        domain::job_id(x.id)?;
        domain::token(&a.token)?;
        domain::payload(&a.progress, domain::PROGRESS_MAX, "progress")?;
        let job = Holder::open(x)?;
        let events = Events::open(x)?;
        job.check(&a.token)?;
        if a.progress.ptr().is_null() {
            return Err(crate::errors::host_reply());
        }
        job.row.hset(&[(&field::PROGRESS, a.progress.ptr())])?;
        events.emit(x, Some(job.id.ptr()), Event::Progress)?;
        Ok(Reply::Int(1))
    }
}
