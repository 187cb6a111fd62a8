//! `EMQ.ENQUEUE 4 job wait prio events name data [PRIORITY p] [ATTEMPTS n]
//! [BACKOFF FIXED|EXP ms] [OPTS blob] [LIFO]`
//!
//! Creates the row (state and immutable fields) and makes the job ready: `wait` for priority
//! 0 (at the back, or the front with LIFO), else `prio`. One `added` event. An existing row,
//! in any state, makes the call a no-op answering 0: the immutable line.

use crate::domain::args::{options, Opt, Options};
use crate::errors::Refusal;
use crate::host::{Exec, Kind, Reply, Verb};
use crate::queue::{Event, Events, NewJob, Ready, State};

pub struct Enqueue;

pub struct Args<'a> {
    name: &'a [u8],
    data: &'a [u8],
    o: Options<'a>,
}

/// Splits `name data [options]`, the form ENQUEUE and SCHEDULE share.
pub fn job_args<'a>(verb: &str, args: &[&'a [u8]], allowed: &[Opt]) -> Result<(&'a [u8], &'a [u8], Options<'a>), Refusal> {
    match args {
        [name, data, rest @ ..] => Ok((name, data, options(rest, allowed)?)),
        _ => Err(Refusal::Shape(format!("{verb} needs name and data"))),
    }
}

impl Verb for Enqueue {
    type Args<'a> = Args<'a>;

    fn shape<'a>(args: &[&'a [u8]]) -> Result<Args<'a>, Refusal> {
        let (name, data, o) = job_args("EMQ.ENQUEUE", args, &[Opt::Priority, Opt::Attempts, Opt::Backoff, Opt::Opts, Opt::Lifo])?;
        Ok(Args { name, data, o })
    }

    fn run<'a>(x: &mut Exec<'a>, a: Args<'a>) -> Result<Reply, Refusal> {
        crate::domain::job_id(x.id)?;
        let job = NewJob::check(a.name, a.data, &a.o)?;
        let row = x.open(0, true);
        if row.exists_as(Kind::Hash)? {
            return Ok(Reply::Int(0));
        }
        let ready = Ready::open(x.open(1, true), x.open(2, true))?;
        let events = Events::open(x, 3)?;
        let now = x.now();
        let id = x.string(x.id)?;
        let state = if job.priority == 0 { State::Wait } else { State::Prio };
        job.create(x, &row, state, now, 0)?;
        ready.put(id.ptr(), job.priority, a.o.lifo)?;
        events.emit(x, Some(id.ptr()), Event::Added { name: x.arg_str(0), prio: job.priority })?;
        Ok(Reply::Int(1))
    }
}
