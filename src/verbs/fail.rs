//! `EMQ.FAIL 7 job active wait prio delayed failed events token error [KEEP n] [AGE ms]
//! [FINAL]`
//!
//! Counts the attempt (`am+1`), keeps the error, clears the token, then: `am >= attempts`
//! or FINAL → failed for good (retention as COMPLETE, default `trafikey.keep-failed`),
//! reply `failed`; else the backoff delay (FIXED d, or EXP d·2^(am−1)): 0 or none → ready
//! again at the back, reply `retry`; above 0 → delayed, reply `delayed`.

use crate::config;
use crate::domain::{self, args::Opt, AfterFail, Keep};
use crate::errors::Refusal;
use crate::host::{Exec, Reply, Verb};
use crate::queue::{self, existing_row, field, held, zset, Event, Events, Ready, Retire, Row, State};

pub struct Fail;

pub struct Args<'a> {
    token: &'a [u8],
    error: &'a [u8],
    keep: Option<i64>,
    age: Option<i64>,
    final_: bool,
}

impl Verb for Fail {
    type Args<'a> = Args<'a>;

    fn shape<'a>(args: &[&'a [u8]]) -> Result<Args<'a>, Refusal> {
        match args {
            [token, error, rest @ ..] => {
                let o = domain::args::options(rest, &[Opt::Keep, Opt::Age, Opt::Final])?;
                Ok(Args { token, error, keep: o.keep, age: o.age, final_: o.final_ })
            }
            _ => Err(Refusal::Shape("EMQ.FAIL takes token error [KEEP n] [AGE ms] [FINAL]".into())),
        }
    }

    fn run<'a>(x: &mut Exec<'a>, a: Args<'a>) -> Result<Reply, Refusal> {
        domain::job_id(x.id)?;
        domain::token(a.token)?;
        domain::payload(a.error, config::max_payload(), "error")?;
        let keep = queue::keep_for(a.keep, &config::KEEP_FAILED)?;
        let age = queue::age(a.age)?;
        let row = existing_row(x)?;
        let active = zset(x, 1)?;
        let ready = Ready::open(x.open(2, true), x.open(3, true))?;
        let delayed = zset(x, 4)?;
        let failed = zset(x, 5)?;
        let events = Events::open(x, 6)?;
        let id = x.string(x.id)?;
        if !held(&row, &active, &id, a.token) {
            return Err(queue::lease(x.id));
        }
        let r = Row(&row);
        let made = r.int(&field::MADE, 0).saturating_add(1);
        let next = domain::after_fail(made, r.int(&field::ATTEMPTS, 1), a.final_, r.backoff());
        let now = x.now();
        let retire = match next {
            AfterFail::Fail => Some(Retire::plan(x, &failed, u64::from(keep != Keep::None), now, keep, age)?),
            _ => None,
        };

        active.zrem(id.ptr());
        let (error, made_s) = (x.arg_str(1), x.int(made)?);
        let reply = match next {
            AfterFail::Fail => {
                queue::finish(x, &row, &failed, &id, State::Failed, keep, &[(&field::ERROR, error), (&field::MADE, made_s.ptr())])?;
                events.emit(x, Some(id.ptr()), Event::Failed { error, attempt: made })?;
                c"failed"
            }
            AfterFail::Retry => {
                let state = ready.put(id.ptr(), r.priority(), false)?;
                row.hset(&[(&field::STATE, state.lit().get()), (&field::ERROR, error), (&field::MADE, made_s.ptr())])?;
                row.hdel(&[&field::TOKEN])?;
                events.emit(x, Some(id.ptr()), Event::Waiting { prev: State::Active })?;
                c"retry"
            }
            AfterFail::Delay(d) => {
                let due = now.saturating_add(d).min(domain::TIME_MAX);
                delayed.zadd(due, id.ptr())?;
                row.hset(&[(&field::STATE, State::Delayed.lit().get()), (&field::ERROR, error), (&field::MADE, made_s.ptr())])?;
                row.hdel(&[&field::TOKEN])?;
                events.emit(x, Some(id.ptr()), Event::Delayed { due })?;
                c"delayed"
            }
        };
        if let Some(retire) = retire {
            retire.apply(&failed);
        }
        Ok(Reply::Simple(reply))
    }
}
