//! `EMQ.COMPLETE 4 job active completed events token result [KEEP n] [AGE ms]`
//!
//! Moves a held job to completed (row: result, finish time, `am+1`; the finishing token
//! stays, so the same COMPLETE repeated after a lost reply answers 0 and writes nothing).
//! Retention: KEEP n trims completed to its n newest, deleting the trimmed rows; KEEP 0
//! deletes this job at once; -1 keeps all; without KEEP, `trafikey.keep-completed`. AGE ms
//! also drops jobs finished before now−ms. At most `trafikey.retention-batch` per call.

use crate::config;
use crate::domain::{self, args::Opt, Keep};
use crate::errors::{self, Refusal};
use crate::host::command::{opt, q, val, Arg, Command, Keys, Spec::*, Ty};
use crate::host::{drive, ArgStr, Exec, Kind, Reply, Verb};
use crate::keyspace::Role::*;
use crate::queue::{self, field, Event, Events, Holder, Retire, Row, State};

pub const KEYS: Keys = Keys::of(&[q(Job, Update), q(Active, Take), q(Completed, Update), q(Events, Append)]);
/// KEEP and AGE, the retention options COMPLETE and FAIL share.
pub const KEEP: Arg = opt("keep", "KEEP", "n", Ty::Int);
pub const AGE: Arg = opt("age", "AGE", "ms", Ty::Int);
pub const ARGS: &[Arg] = &[val("token", Ty::Str), val("result", Ty::Str), KEEP, AGE];

/// The command, declared whole: registration, ACL, `COMMAND DOCS` and the reference take it
/// from here.
pub const COMMAND: Command = Command::new("EMQ.COMPLETE", drive::<Complete>)
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
    keep: Option<i64>,
    age: Option<i64>,
}

impl Verb for Complete {
    type Args<'a> = Args<'a>;

    fn shape<'a>(args: &[ArgStr<'a>]) -> Result<Args<'a>, Refusal> {
        match args {
            [token, result, rest @ ..] => {
                let o = domain::args::options(rest, &[Opt::Keep, Opt::Age])?;
                Ok(Args { token: *token, result: *result, keep: o.keep, age: o.age })
            }
            _ => Err(Refusal::Usage),
        }
    }

    fn run<'a>(x: &mut Exec<'a>, a: Args<'a>) -> Result<Reply, Refusal> {
        domain::job_id(x.id)?;
        domain::token(&a.token)?;
        domain::payload(&a.result, config::max_payload(), "result")?;
        let keep = queue::keep_for(a.keep, &config::KEEP_COMPLETED)?;
        let age = queue::age(a.age)?;
        let job = Holder::open(x)?;
        let completed = x.open_as(Completed, Kind::ZSet)?;
        let events = Events::open(x)?;
        if !job.holds(&a.token) {
            // The same token finishing again: its reply was lost, the job is done.
            if Row(&job.row).completed_by(&a.token) {
                return Ok(Reply::Int(0));
            }
            return Err(errors::lease(x.id));
        }
        let now = x.now();
        let made = Row(&job.row).int(&field::MADE, 0).saturating_add(1);
        let retire = Retire::plan(x, &completed, u64::from(keep != Keep::None), now, keep, age)?;

        let id = x.id;
        let log = if keep == Keep::None { queue::log_of(x, id)? } else { None };

        job.active.zrem(job.id.ptr());
        let made_s = x.int(made)?;
        let fields = [(&field::RESULT, a.result.ptr()), (&field::MADE, made_s.ptr())];
        queue::finish(x, &job.row, &completed, &job.id, State::Completed, keep, &fields, log)?;
        events.emit(x, Some(job.id.ptr()), Event::Completed { attempt: made })?;
        retire.apply(&completed);
        Ok(Reply::Int(1))
    }
}
