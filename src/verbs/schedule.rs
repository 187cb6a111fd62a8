//! `EMQ.SCHEDULE 3 job delayed events when name data [PRIORITY p] [ATTEMPTS n]
//! [BACKOFF FIXED|EXP ms] [OPTS blob]`
//!
//! ENQUEUE for later: creates the row in state delayed with score = due (`when` is absolute
//! ms or `+ms`; a time in the past is due now, and the next CLAIM promotes it). An existing
//! row makes the call a no-op answering 0. LIFO is not taken: a scheduled job becomes
//! ready in due order.

use crate::domain::{self, args::Opt, args::Options, When};
use crate::errors::Refusal;
use crate::host::{Exec, Kind, Reply, Verb};
use crate::queue::{zset, Event, Events, NewJob, State};

pub struct Schedule;

pub struct Args<'a> {
    when: When,
    name: &'a [u8],
    data: &'a [u8],
    o: Options<'a>,
}

impl Verb for Schedule {
    type Args<'a> = Args<'a>;

    fn shape<'a>(args: &[&'a [u8]]) -> Result<Args<'a>, Refusal> {
        let [when, rest @ ..] = args else { return Err(Refusal::Shape("EMQ.SCHEDULE takes when name data [options]".into())) };
        let when = domain::args::when(when)?;
        let (name, data, o) = super::enqueue::job_args("EMQ.SCHEDULE", rest, &[Opt::Priority, Opt::Attempts, Opt::Backoff, Opt::Opts])?;
        Ok(Args { when, name, data, o })
    }

    fn run<'a>(x: &mut Exec<'a>, a: Args<'a>) -> Result<Reply, Refusal> {
        domain::job_id(x.id)?;
        let job = NewJob::check(a.name, a.data, &a.o)?;
        let now = x.now();
        let due = domain::due(a.when, now)?;
        let row = x.open(0, true);
        if row.exists_as(Kind::Hash)? {
            return Ok(Reply::Int(0));
        }
        let delayed = zset(x, 1)?;
        let events = Events::open(x, 2)?;
        let id = x.string(x.id)?;
        job.create(x, &row, State::Delayed, now, 1)?;
        delayed.zadd(due, id.ptr())?;
        events.emit(x, Some(id.ptr()), Event::Delayed { due })?;
        Ok(Reply::Int(1))
    }
}
