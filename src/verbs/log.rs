//! `TRA.LOG 2 job log token line [KEEP n]` — the holder appends a line to its job's log,
//! `emq:{Q}:log:<ID>` (a list, oldest first), keeping the newest n (1..=1000000, default
//! `trafikey.log-keep`). The line is 0..=`trafikey.max-payload` bytes. Replies the log's
//! length. `EMQLEASE` unless the row says the job is active with this token (the `active` set
//! is not among the keys: the row decides). Both keys name one job. A log is deleted with its
//! job by every path that deletes a row: retention, KEEP 0, REMOVE, DRAIN, CLEAN, OBLITERATE.
//! Fenced.

use crate::domain::{self, args::Opt};
use crate::errors::{lease, Refusal};
use crate::host::command::{q, val, Arg, Command, Keys, Spec::*, Ty};
use crate::host::{ArgStr, Exec, Kind, Reply, Verb};
use crate::keyspace::Role::*;
use crate::queue::log::{append, checked};
use crate::queue::{existing_row, Row};

pub const KEYS: Keys = Keys::of(&[q(Job, Read), q(Log, Append)]);
pub const ARGS: &[Arg] = &[val("token", Ty::Str), val("line", Ty::Str).payload(), super::options::LOG_KEEP];
/// `KEEP n`: the log's newest n lines stay (TRA.ADDLOG's too).
/// The command, declared whole: registration, ACL, `COMMAND DOCS` and the reference take it
/// from here.
pub const COMMAND: Command = Command::new::<AppendLog>("TRA.LOG")
    .holder()
    .keys(KEYS)
    .args(ARGS)
    .creates()
    .fast()
    .summary("The holder appends a line to its job's log, keeping the newest n.")
    .complexity("O(1), plus the lines trimmed");

pub struct AppendLog;

pub struct Args<'a> {
    token: ArgStr<'a>,
    line: ArgStr<'a>,
    keep: Option<i64>,
}

impl Verb for AppendLog {
    type Args<'a> = Args<'a>;

    fn shape<'a>(args: &[ArgStr<'a>]) -> Result<Args<'a>, Refusal> {
        match args {
            [token, line, rest @ ..] => {
                Ok(Args { token: *token, line: *line, keep: domain::args::options(rest, &[Opt::Keep])?.keep })
            }
            _ => Err(Refusal::Usage),
        }
    }

    fn run<'a>(x: &mut Exec<'a>, a: Args<'a>) -> Result<Reply, Refusal> {
        let keep = checked(x, &a.line, a.keep)?;
        domain::token(&a.token)?;
        let row = existing_row(x)?;
        let log = x.open_as(Log, Kind::List)?;
        if !Row(&row).held_by(&a.token) {
            return Err(lease(x.id));
        }
        append(&log, a.line, keep)
    }
}
