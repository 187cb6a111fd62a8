//! `EMQ.COMPLETE 4 job active completed events token result [KEEP n] [AGE ms] [ECHO]
//! [METRICS max]`
//!
//! Moves a held job to completed (row: result, finish time, `am+1`; the finishing token
//! stays, so the same COMPLETE repeated after a lost reply answers 0 and writes nothing).
//! Retention: KEEP n trims completed to its n newest, deleting the trimmed rows; KEEP 0
//! deletes this job at once; -1 keeps all; without KEEP, `trafikey.keep-completed`. AGE ms
//! also drops jobs finished before now−ms. At most `trafikey.retention-batch` per call.
//! ECHO: the `completed` event carries the result too (for event readers that need it after
//! retention deleted the row). A finish that leaves nothing ready or active also writes
//! `drained`. The job's DEDUP id, if it has one without a TTL, is released. METRICS max: the
//! job is counted by the minute in `metrics:completed` (`queue::tally`), a series of at most
//! max points.

use super::options::{AGE, ECHO, KEEP, METRICS};
use crate::config;
use crate::domain::{self, args::Opt};
use crate::errors::{self, Refusal};
use crate::host::command::{q, val, Arg, Command, Keys, Spec::*, Ty};
use crate::host::{ArgStr, Exec, Kind, Reply, Verb};
use crate::keyspace::Role::*;
use crate::queue::finish::{self, Drained, Finishing, Held, Writes};
use crate::queue::{Events, Holder, Sets};

pub const KEYS: Keys = Keys::of(&[q(Job, Update), q(Active, Take), q(Completed, Update), q(Events, Append)]);
pub const ARGS: &[Arg] = &[val("token", Ty::Str), val("result", Ty::Str).payload(), KEEP, AGE, ECHO, METRICS];

/// The command, declared whole: registration, ACL, `COMMAND DOCS` and the reference take it
/// from here.
pub const COMMAND: Command = Command::new::<Complete>("EMQ.COMPLETE")
    .holder()
    .tokens(&["complete.flat"])
    .keys(KEYS)
    .args(ARGS)
    .writes()
    .summary("Finish a held job with its result; 0 when the same token already completed it.")
    .complexity("O(log N), plus O(r log N) for r jobs retired");

pub struct Complete;

pub struct Args<'a> {
    token: ArgStr<'a>,
    result: ArgStr<'a>,
    how: Finishing,
}

impl Verb for Complete {
    type Args<'a> = Args<'a>;

    /// `token result [KEEP n] [AGE ms] [ECHO] [METRICS max]`.
    fn shape<'a>(args: &[ArgStr<'a>]) -> Result<Args<'a>, Refusal> {
        match args {
            [token, result, rest @ ..] => {
                let o = domain::args::options(rest, &[Opt::Keep, Opt::Age, Opt::Echo, Opt::Metrics])?;
                Ok(Args { token: *token, result: *result, how: Finishing::of(&o) })
            }
            _ => Err(Refusal::Usage),
        }
    }

    /// The batch finish for one job, its codes read as COMPLETE answers them.
    fn run<'a>(x: &mut Exec<'a>, a: Args<'a>) -> Result<Reply, Refusal> {
        finish::check_entries(&[x.id], std::iter::once((&a.token, &a.result)), |_| Ok(()))?;
        let checked = a.how.check(&config::KEEP_COMPLETED)?;
        let job = Holder::open(x)?;
        let completed = x.open_as(Completed, Kind::ZSet)?;
        let events = Events::open(x)?;
        let mut held = [Held { id: job.id, row: job.row, exists: true, token: a.token, result: a.result }];
        let into = Writes { active: &job.active, completed: &completed, events: &events };
        let fates = finish::finish_held(x, &mut held, &a.how, checked, into, Sets::default(), Drained::Ask)?;
        match fates.first().copied() {
            Some(finish::DONE) => Ok(Reply::Int(1)),
            Some(finish::REPEAT) => Ok(Reply::Int(0)),
            _ => Err(errors::lease(x.id)),
        }
    }
}
