//! `TRA.SETPROGRESS 2 job events progress [ECHO]` — any client reports a job's progress,
//! whatever its state and whoever holds it: TRA.PROGRESS without the lease. The same report
//! (0..=4096 bytes, row field `g`), the same `progress` event (with ECHO, carrying the
//! report). Replies 1; `EMQNOJOB` when the row is absent. A command of its own, not an option
//! of TRA.PROGRESS, so that ACL can grant the two apart. Fenced.

use crate::domain;
use crate::errors::Refusal;
use crate::host::command::{q, val, Arg, Command, Keys, Spec::*, Ty};
use crate::host::{ArgStr, Exec, Reply, Verb};
use crate::keyspace::Role::*;
use crate::queue::{existing_row, Events};

use super::options::ECHO;
use crate::queue::progress::Report;

pub const KEYS: Keys = Keys::of(&[q(Job, Update), q(Events, Append)]);
pub const ARGS: &[Arg] = &[val("progress", Ty::Str), ECHO];

pub const COMMAND: Command = Command::new::<SetProgress>("TRA.SETPROGRESS")
    .keys(KEYS)
    .args(ARGS)
    .writes()
    .fast()
    .summary("Report progress on any job, held or not: stored in the row, one event.")
    .complexity("O(1)");

pub struct SetProgress;

impl Verb for SetProgress {
    type Args<'a> = Report<'a>;

    fn shape<'a>(args: &[ArgStr<'a>]) -> Result<Report<'a>, Refusal> {
        match args {
            [value, rest @ ..] => Report::shape(*value, rest),
            _ => Err(Refusal::Usage),
        }
    }

    fn run<'a>(x: &mut Exec<'a>, a: Report<'a>) -> Result<Reply, Refusal> {
        domain::job_id(x.id)?;
        a.check()?;
        let row = existing_row(x)?;
        let events = Events::open(x)?;
        let id = x.string(x.id)?;
        a.write(x, &row, &id, &events)?;
        Ok(Reply::Int(1))
    }
}
