//! `EMQ.FAIL 7 job active wait prio delayed failed events token error [KEEP n] [AGE ms]
//! [FINAL]`
//!
//! Counts the attempt (`am+1`), keeps the error, clears the token, then: `am >= attempts`
//! or FINAL → failed for good (retention as COMPLETE, default `trafikey.keep-failed`),
//! reply `failed`; else the backoff delay (FIXED d, or EXP d·2^(am−1)): 0 or none → ready
//! again at the back, reply `retry`; above 0 → delayed, reply `delayed`.

use super::complete::{AGE, KEEP};
use crate::config;
use crate::domain::{self, args::Opt, AfterFail, Keep};
use crate::errors::Refusal;
use crate::host::command::{flag, q, val, Arg, Command, Keys, Spec::*, Ty};
use crate::host::{ArgStr, Exec, Kind, Reply, Verb};
use crate::keyspace::Role::*;
use crate::queue::{self, field, Event, Events, Holder, Ready, Retire, Row, State};

pub const KEYS: Keys = Keys::of(&[
    q(Job, Update),
    q(Active, Take),
    q(Wait, Insert),
    q(Prio, Insert),
    q(Delayed, Insert),
    q(Failed, Update),
    q(Events, Append),
]);
pub const ARGS: &[Arg] = &[val("token", Ty::Str), val("error", Ty::Str), KEEP, AGE, flag("final", "FINAL")];

/// The command, declared whole: registration, ACL, `COMMAND DOCS` and the reference take it
/// from here.
pub const COMMAND: Command = Command::new::<Fail>("EMQ.FAIL")
    .tokens(&["fail.flat"])
    .keys(KEYS)
    .args(ARGS)
    .writes()
    .summary("Count a held job's failed attempt: retry, delay by its backoff, or fail it for good.")
    .complexity("O(log N), plus O(r log N) for r jobs retired");

pub struct Fail;

pub struct Args<'a> {
    token: ArgStr<'a>,
    error: ArgStr<'a>,
    keep: Option<i64>,
    age: Option<i64>,
    final_: bool,
}

impl Verb for Fail {
    type Args<'a> = Args<'a>;

    fn shape<'a>(args: &[ArgStr<'a>]) -> Result<Args<'a>, Refusal> {
        match args {
            [token, error, rest @ ..] => {
                let o = domain::args::options(rest, &[Opt::Keep, Opt::Age, Opt::Final])?;
                Ok(Args { token: *token, error: *error, keep: o.keep, age: o.age, final_: o.final_ })
            }
            _ => Err(Refusal::Usage),
        }
    }

    fn run<'a>(x: &mut Exec<'a>, a: Args<'a>) -> Result<Reply, Refusal> {
        domain::job_id(x.id)?;
        domain::token(&a.token)?;
        domain::payload(&a.error, config::max_payload(), "error")?;
        let keep = queue::keep_for(a.keep, &config::KEEP_FAILED)?;
        let age = queue::age(a.age)?;
        let job = Holder::open(x)?;
        let ready = Ready::open(x)?;
        let delayed = x.open_as(Delayed, Kind::ZSet)?;
        let failed = x.open_as(Failed, Kind::ZSet)?;
        let events = Events::open(x)?;
        job.check(&a.token)?;
        let (row, id) = (&job.row, &job.id);
        let r = Row(row);
        let made = r.int(&field::MADE, 0).saturating_add(1);
        let next = domain::after_fail(made, r.int(&field::ATTEMPTS, 1), a.final_, r.backoff());
        let now = x.now();
        let retire = match next {
            AfterFail::Fail => Some(Retire::plan(x, &failed, u64::from(keep != Keep::None), now, keep, age)?),
            _ => None,
        };
        let id_bytes = x.id;
        let mut log =
            if next == AfterFail::Fail && keep == Keep::None { queue::log_of(x, id_bytes)? } else { None };

        job.active.zrem(id.ptr());
        let (error, made_s) = (a.error.ptr(), x.int(made)?);
        let reply = match next {
            AfterFail::Fail => {
                queue::finish(
                    x,
                    row,
                    &failed,
                    id,
                    State::Failed,
                    keep,
                    &[(&field::ERROR, error), (&field::MADE, made_s.ptr())],
                    log.take(),
                )?;
                events.emit(x, Some(id.ptr()), Event::Failed { error, attempt: made })?;
                c"failed"
            }
            AfterFail::Retry => {
                let state = ready.put(id.ptr(), r.priority(), false)?;
                row.hset(&[
                    (&field::STATE, state.lit().get()),
                    (&field::ERROR, error),
                    (&field::MADE, made_s.ptr()),
                ])?;
                row.hdel(&[&field::TOKEN])?;
                events.emit(x, Some(id.ptr()), Event::Waiting { prev: State::Active })?;
                c"retry"
            }
            AfterFail::Delay(d) => {
                let due = now.saturating_add(d).min(domain::TIME_MAX);
                delayed.zadd(due, id.ptr())?;
                row.hset(&[
                    (&field::STATE, State::Delayed.lit().get()),
                    (&field::ERROR, error),
                    (&field::MADE, made_s.ptr()),
                ])?;
                row.hdel(&[&field::TOKEN])?;
                events.emit(x, Some(id.ptr()), Event::Delayed { due })?;
                queue::due_at(x, due);
                c"delayed"
            }
        };
        if let Some(retire) = retire {
            retire.apply(&failed);
        }
        Ok(Reply::Simple(reply))
    }
}
