//! `EMQ.ENQUEUE 4 job wait prio events name data [PRIORITY p] [ATTEMPTS n]
//! [BACKOFF FIXED|EXP ms] [OPTS blob] [EXPIRE when] [LIFO] [ALIAS key]
//! [DEDUP id [DEDUPTTL ms [EXTEND] | KEEPLAST] [REPLACE]]`
//!
//! Creates the row (state and immutable fields) and makes the job ready: `wait` for priority
//! 0 (at the back, or the front with LIFO), else `prio`. One `added` event. An existing row,
//! in any state, makes the call a no-op answering 0: the immutable line. So does a live
//! ALIAS: the queue's alias hash (found, opened as the caller) already holds the key.
//! `[DEDUP id [DEDUPTTL ms [EXTEND] | KEEPLAST] [REPLACE]]` (`queue::dedup`): while the id is
//! live the call creates nothing and answers the id of the job that holds it, with a
//! `deduplicated` event; with KEEPLAST, while that job is active, the job is kept and created
//! when it finishes.

use super::options::{job_args, ALIAS, ATTEMPTS, BACKOFF, DEDUP, EXPIRE, OPTS, PRIORITY};
use crate::domain::args::{Opt, Options};
use crate::errors::Refusal;
use crate::host::command::{flag, q, val, Arg, Command, Keys, Spec::*, Ty};
use crate::host::{ArgStr, Exec, Kind, Reply, Verb};
use crate::keyspace::Role::*;
use crate::queue::alias::{live_alias, name_alias};
use crate::queue::dedup::{self, Keeping, Produced};
use crate::queue::{Aliases, End, Event, Events, NewJob, Ready, State};

pub const KEYS: Keys = Keys::of(&[q(Job, Insert), q(Wait, Insert), q(Prio, Insert), q(Events, Append)]);

pub const ARGS: &[Arg] = &[
    val("name", Ty::Str),
    val("data", Ty::Str).payload(),
    PRIORITY,
    ATTEMPTS,
    BACKOFF,
    OPTS,
    EXPIRE,
    flag("lifo", "LIFO"),
    ALIAS,
    DEDUP,
];

/// The command, declared whole: registration, ACL, `COMMAND DOCS` and the reference take it
/// from here.
pub const COMMAND: Command = Command::new::<Enqueue>("EMQ.ENQUEUE")
    .tokens(&["enqueue"])
    .keys(KEYS)
    .args(ARGS)
    .creates()
    .fast()
    .summary(
        "Create a job and make it ready; 0 and nothing written when the id or its ALIAS exists, the holder's id when its DEDUP id is live.",
    )
    .complexity("O(log N) with N the jobs of its priority band");

pub struct Enqueue;

pub struct Args<'a> {
    name: ArgStr<'a>,
    data: ArgStr<'a>,
    o: Options<ArgStr<'a>>,
}

impl Verb for Enqueue {
    type Args<'a> = Args<'a>;

    fn shape<'a>(args: &[ArgStr<'a>]) -> Result<Args<'a>, Refusal> {
        let (name, data, o) = job_args(
            args,
            &[
                Opt::Priority,
                Opt::Attempts,
                Opt::Backoff,
                Opt::Opts,
                Opt::Expire,
                Opt::Lifo,
                Opt::Alias,
                Opt::Dedup,
                Opt::DedupTtl,
                Opt::Extend,
                Opt::Replace,
                Opt::KeepLast,
            ],
        )?;
        Ok(Args { name, data, o })
    }

    fn run<'a>(x: &mut Exec<'a>, a: Args<'a>) -> Result<Reply, Refusal> {
        crate::domain::job_id(x.id)?;
        let job = NewJob::check(a.name, a.data, &a.o, x.now())?;
        let row = x.write(Job)?;
        if row.exists_as(Kind::Hash)? {
            return Ok(Reply::Int(0));
        }
        let aliases = job.alias.map(|_| Aliases::open(x)).transpose()?;
        if live_alias(aliases.as_ref(), &job) {
            return Ok(Reply::Int(0));
        }
        let ready = Ready::open(x)?;
        let events = Events::open(x)?;
        let keeping = Keeping { job: &job, lifo: a.o.lifo, due: None };
        let replaced =
            match job.dedup.as_deref().map(|d| dedup::produce(x, *d, &events, None, &keeping)).transpose()? {
                Some(Produced::Duplicate(holder)) => return Ok(Reply::Str(holder)),
                Some(Produced::Holds(replaced)) => replaced,
                None => None,
            };
        let now = x.now();
        let id = x.string(x.id)?;
        let state = if job.priority == 0 { State::Wait } else { State::Prio };
        job.create(x, &row, x.id, state, x.int(now)?.str_ref())?;
        name_alias(aliases.as_ref(), &job, &id)?;
        if let Some(c) = replaced {
            c.delete();
        }
        ready.put(id.str_ref(), job.priority, End::lifo(a.o.lifo))?;
        let alias = job.alias.map(|a| a.str_ref());
        events.emit(
            x,
            Some(id.str_ref()),
            Event::Added { name: a.name.str_ref(), prio: job.priority, alias },
        )?;
        crate::queue::exists(x);
        Ok(Reply::Int(1))
    }
}
