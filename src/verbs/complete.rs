//! `EMQ.COMPLETE 4 job active completed events token result [KEEP n] [AGE ms]`
//!
//! Moves a held job to completed (row: result, finish time, `am+1`; the finishing token
//! stays, so the same COMPLETE repeated after a lost reply answers 0 and writes nothing).
//! Retention: KEEP n trims completed to its n newest, deleting the trimmed rows; KEEP 0
//! deletes this job at once; -1 keeps all; without KEEP, `trafikey.keep-completed`. AGE ms
//! also drops jobs finished before now−ms. At most `trafikey.retention-batch` per call.

use crate::config;
use crate::domain::{self, args::Opt, Keep};
use crate::errors::Refusal;
use crate::host::{Exec, Reply, Verb};
use crate::queue::{self, existing_row, field, held, zset, Event, Events, Retire, Row, State};

pub struct Complete;

pub struct Args<'a> {
    token: &'a [u8],
    result: &'a [u8],
    keep: Option<i64>,
    age: Option<i64>,
}

impl Verb for Complete {
    type Args<'a> = Args<'a>;

    fn shape<'a>(args: &[&'a [u8]]) -> Result<Args<'a>, Refusal> {
        match args {
            [token, result, rest @ ..] => {
                let o = domain::args::options(rest, &[Opt::Keep, Opt::Age])?;
                Ok(Args { token, result, keep: o.keep, age: o.age })
            }
            _ => Err(Refusal::Shape("EMQ.COMPLETE takes token result [KEEP n] [AGE ms]".into())),
        }
    }

    fn run<'a>(x: &mut Exec<'a>, a: Args<'a>) -> Result<Reply, Refusal> {
        domain::job_id(x.id)?;
        domain::token(a.token)?;
        domain::payload(a.result, config::max_payload(), "result")?;
        let keep = queue::keep_for(a.keep, &config::KEEP_COMPLETED)?;
        let age = queue::age(a.age)?;
        let row = existing_row(x)?;
        let active = zset(x, 1)?;
        let completed = zset(x, 2)?;
        let events = Events::open(x, 3)?;
        let id = x.string(x.id)?;
        if !held(&row, &active, &id, a.token) {
            let r = Row(&row);
            if r.state() == Some(State::Completed) && r.get(&field::TOKEN).is_some_and(|t| t.bytes() == a.token) {
                return Ok(Reply::Int(0));
            }
            return Err(queue::lease(x.id));
        }
        let now = x.now();
        let made = Row(&row).int(&field::MADE, 0).saturating_add(1);
        let retire = Retire::plan(x, &completed, u64::from(keep != Keep::None), now, keep, age)?;

        active.zrem(id.ptr());
        let made_s = x.int(made)?;
        queue::finish(x, &row, &completed, &id, State::Completed, keep, &[(&field::RESULT, x.arg_str(1)), (&field::MADE, made_s.ptr())])?;
        events.emit(x, Some(id.ptr()), Event::Completed { attempt: made })?;
        retire.apply(&completed);
        Ok(Reply::Int(1))
    }
}
