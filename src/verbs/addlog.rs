//! `TRA.ADDLOG 2 job log line [KEEP n]` — any client appends a line to a job's log, whatever
//! the job's state and whoever holds it: TRA.LOG without the lease. The same log, range and
//! retention as TRA.LOG's (`KEEP` 1..=1000000, default `trafikey.log-keep`; the line
//! 0..=`trafikey.max-payload` bytes); replies the log's length; `EMQNOJOB` when the row is
//! absent. A command of its own, not an option of TRA.LOG, so that ACL can grant the two
//! apart: a worker may log on the jobs it holds without being able to log on any job.
//! Fenced.

use crate::domain::args::Opt;
use crate::errors::Refusal;
use crate::host::command::{q, val, Arg, Command, Keys, Spec::*, Ty};
use crate::host::{ArgStr, Exec, Kind, Reply, Verb};
use crate::keyspace::Role::*;
use crate::queue::existing_row;

pub const KEYS: Keys = Keys::of(&[q(Job, Read), q(Log, Append)]);
pub const ARGS: &[Arg] = &[val("line", Ty::Str).payload(), super::options::LOG_KEEP];

pub const COMMAND: Command = Command::new::<AddLog>("TRA.ADDLOG")
    .keys(KEYS)
    .args(ARGS)
    .creates()
    .fast()
    .summary("Append a line to any job's log, held or not, keeping the newest n.")
    .complexity("O(1), plus the lines trimmed");

pub struct AddLog;

pub struct Args<'a> {
    line: ArgStr<'a>,
    keep: Option<i64>,
}

impl Verb for AddLog {
    type Args<'a> = Args<'a>;

    fn shape<'a>(args: &[ArgStr<'a>]) -> Result<Args<'a>, Refusal> {
        match args {
            [line, rest @ ..] => {
                Ok(Args { line: *line, keep: crate::domain::args::options(rest, &[Opt::Keep])?.keep })
            }
            _ => Err(Refusal::Usage),
        }
    }

    fn run<'a>(x: &mut Exec<'a>, a: Args<'a>) -> Result<Reply, Refusal> {
        let keep = crate::queue::log::checked(x, &a.line, a.keep)?;
        existing_row(x)?;
        let log = x.open_as(Log, Kind::List)?;
        crate::queue::log::append(&log, a.line, keep)
    }
}
