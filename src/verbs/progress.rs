//! `TRA.PROGRESS 3 job active events token progress [ECHO]` — the holder reports how far it
//! got: an opaque report of 0..=4096 bytes stored in the row (field `g`, shown by `TRA.JOB`,
//! replaced by the next report, cleared by REPROCESS), and one `progress` event; with ECHO the
//! event carries the report (`progress`). Replies 1; `EMQLEASE` when the job is not held with
//! this token. Fenced.

use super::options::ECHO;
use crate::domain::{self};
use crate::errors::Refusal;
use crate::host::command::{q, val, Arg, Command, Keys, Spec::*, Ty};
use crate::host::{ArgStr, Exec, Reply, Verb};
use crate::keyspace::Role::*;
use crate::queue::progress::Report;
use crate::queue::{Events, Holder};

pub const KEYS: Keys = Keys::of(&[q(Job, Update), q(Active, Read), q(Events, Append)]);
/// ECHO: the `progress` event carries the report.
pub const ARGS: &[Arg] = &[val("token", Ty::Str), val("progress", Ty::Str), ECHO];

pub const COMMAND: Command = Command::new::<Progress>("TRA.PROGRESS")
    .holder()
    .keys(KEYS)
    .args(ARGS)
    .writes()
    .fast()
    .summary("The holder reports its progress on a job: stored in the row, one event.")
    .complexity("O(log N)");

pub struct Progress;

pub struct Args<'a> {
    token: ArgStr<'a>,
    report: Report<'a>,
}

impl Verb for Progress {
    type Args<'a> = Args<'a>;

    fn shape<'a>(args: &[ArgStr<'a>]) -> Result<Args<'a>, Refusal> {
        match args {
            [token, value, rest @ ..] => Ok(Args { token: *token, report: Report::shape(*value, rest)? }),
            _ => Err(Refusal::Usage),
        }
    }

    fn run<'a>(x: &mut Exec<'a>, a: Args<'a>) -> Result<Reply, Refusal> {
        domain::job_id(x.id)?;
        domain::token(&a.token)?;
        a.report.check()?;
        let job = Holder::open(x)?;
        let events = Events::open(x)?;
        job.check(&a.token)?;
        a.report.write(x, &job.row, &job.id, &events)?;
        Ok(Reply::Int(1))
    }
}
