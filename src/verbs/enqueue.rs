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

use crate::domain::{
    self,
    args::{options, Opt, Options},
};
use crate::errors::Refusal;
use crate::host::command::{block, flag, one_of, opt, q, val, word, Arg, Command, Keys, Spec::*, Ty};
use crate::host::{ArgStr, Exec, Kind, Reply, Str, Verb};
use crate::keyspace::Role::*;
use crate::queue::dedup::{self, Keeping, Produced};
use crate::queue::{Aliases, End, Event, Events, NewJob, Ready, State};

pub const KEYS: Keys = Keys::of(&[q(Job, Insert), q(Wait, Insert), q(Prio, Insert), q(Events, Append)]);

/// The creation options ENQUEUE and SCHEDULE share.
pub const PRIORITY: Arg = opt("priority", "PRIORITY", "p", Ty::Int).range(domain::PRIORITY);
pub const ATTEMPTS: Arg = opt("attempts", "ATTEMPTS", "n", Ty::Int).range(domain::ATTEMPTS);
pub const BACKOFF: Arg = block(
    "backoff",
    Some("BACKOFF"),
    &[one_of("kind", None, &[word("FIXED"), word("EXP")]), val("ms", Ty::Int).range(domain::BACKOFF)],
)
.optional();
pub const OPTS: Arg = opt("opts", "OPTS", "blob", Ty::Str);
/// A job no CLAIM has taken by `when` (`ms`, or `+ms` from now) fails with `expired`.
pub const EXPIRE: Arg = opt("expire", "EXPIRE", "when", Ty::Str).range(domain::EXPIRE);
/// The client's own id for the job, unique in the queue while the job exists.
pub const ALIAS: Arg = opt("alias", "ALIAS", "key", Ty::Str);
/// Deduplication: the id, its TTL (a duplicate restarting it) or a duplicate kept while the
/// holder is active, a duplicate replacing a delayed holder. Shown nested as the rules of
/// `queue::dedup::shape` have it; parsed as options, in any order.
pub const DEDUP: Arg = block(
    "dedup",
    Some("DEDUP"),
    &[
        val("id", Ty::Str),
        one_of(
            "lifetime",
            None,
            &[
                block(
                    "dedupttl",
                    Some("DEDUPTTL"),
                    &[val("ms", Ty::Int).range(domain::DEDUP_TTL), flag("extend", "EXTEND")],
                ),
                word("KEEPLAST"),
            ],
        )
        .optional(),
        flag("replace", "REPLACE"),
    ],
)
.optional();

pub const ARGS: &[Arg] = &[
    val("name", Ty::Str),
    val("data", Ty::Str),
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

/// Splits `name data [options]`, the form ENQUEUE and SCHEDULE share.
pub fn job_args<'a>(
    args: &[ArgStr<'a>],
    allowed: &[Opt],
) -> Result<(ArgStr<'a>, ArgStr<'a>, Options<ArgStr<'a>>), Refusal> {
    match args {
        [name, data, rest @ ..] => {
            let o = options(rest, allowed)?;
            crate::queue::dedup::shape(&o)?;
            Ok((*name, *data, o))
        }
        _ => Err(Refusal::Usage),
    }
}

/// The job's ALIAS already names a job of the queue.
pub fn live_alias(aliases: Option<&Aliases>, job: &NewJob) -> bool {
    matches!((aliases, job.alias), (Some(h), Some(a)) if h.live(a.str_ref()))
}

/// Record the job's ALIAS (when it has one) as naming `id`.
pub fn name_alias(aliases: Option<&Aliases>, job: &NewJob, id: &Str) -> Result<(), Refusal> {
    match (aliases, job.alias) {
        (Some(h), Some(a)) => h.set(a.str_ref(), id.str_ref()),
        _ => Ok(()),
    }
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
