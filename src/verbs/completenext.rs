//! `TRA.COMPLETENEXT 8 job wait prio active delayed completed meta events token result
//! lease_ms [KEEP n] [AGE ms] [ECHO] [METRICS max] [COUNT n] [ROW]` — finish and fetch in one
//! atomic call: COMPLETE of the held job (its checks, its retention, its `completed` event,
//! ECHO, METRICS), then a CLAIM of the same queue with the same token (COUNT, default 1; ROW),
//! under one fence read, with no moment between the two in which another client runs.
//! Replies `[done, jobs]`:
//! `done` as COMPLETE's reply (1, or 0 for the same token finishing again), `jobs` as CLAIM's.
//! A refusal of the finish (EMQLEASE, EMQNOJOB, ...) refuses the call and writes nothing.
//! Every declared key's type is checked before the finish writes; the claim can still meet
//! a found row it may not touch (NOPERM) or of another type (WRONGTYPE) after the finish has
//! written, and then `jobs` is empty: the finish stands, the claim wrote nothing, and the next
//! CLAIM answers the error. `drained` is written when the call leaves nothing to fetch, now or
//! later: nothing ready, active or delayed. Fenced.

use crate::domain::{self, args::Opt};
use crate::errors::Refusal;
use crate::host::command::{flag, opt, q, val, Arg, Command, Keys, Spec::*, Ty};
use crate::host::{ArgStr, Exec, Kind, Reply, Verb};
use crate::keyspace::Role::*;
use crate::queue::{Event, Events, Ready, Sets};

use super::claim::{Opened, Pass, Take};
use super::complete::{finish_leaving, Drained, Finish, Left, AGE, ECHO, KEEP, METRICS};

pub const KEYS: Keys = Keys::of(&[
    q(Job, Update),
    q(Wait, Update),
    q(Prio, Update),
    q(Active, Update),
    q(Delayed, Take),
    q(Completed, Update),
    q(Meta, Read),
    q(Events, Append),
]);
pub const ARGS: &[Arg] = &[
    val("token", Ty::Str),
    val("result", Ty::Str),
    val("lease_ms", Ty::Int).range(domain::LEASE),
    KEEP,
    AGE,
    ECHO,
    METRICS,
    opt("count", "COUNT", "n", Ty::Int).range(domain::CLAIM_COUNT),
    flag("row", "ROW"),
    super::claim::BY,
];

pub const COMMAND: Command = Command::new::<CompleteNext>("TRA.COMPLETENEXT")
    .holder()
    .keys(KEYS)
    .args(ARGS)
    .writes()
    .summary("COMPLETE a held job, then CLAIM the next of its queue with the same token, atomically.")
    .complexity("O((1 + n + p) log N) for n jobs taken and p promoted, plus retention");

pub struct CompleteNext;

pub struct Args<'a> {
    finish: Finish<'a>,
    take: (i64, Option<i64>, bool, Option<ArgStr<'a>>),
}

impl Verb for CompleteNext {
    type Args<'a> = Args<'a>;

    fn shape<'a>(args: &[ArgStr<'a>]) -> Result<Args<'a>, Refusal> {
        match args {
            [token, result, lease, rest @ ..] => {
                let lease = crate::domain::args::number(lease, "lease_ms")?;
                let o = crate::domain::args::options(
                    rest,
                    &[Opt::Keep, Opt::Age, Opt::Echo, Opt::Metrics, Opt::Count, Opt::Row, Opt::By],
                )?;
                Ok(Args { finish: Finish::of(*token, *result, &o), take: (lease, o.count, o.row, o.by) })
            }
            _ => Err(Refusal::Usage),
        }
    }

    fn run<'a>(x: &mut Exec<'a>, a: Args<'a>) -> Result<Reply, Refusal> {
        let (lease, count, row, by) = a.take;
        crate::domain::job_id(x.id)?;
        let take = Take::check(a.finish.token, lease, count, row, by)?;
        // Every declared key of the claim type-checked before the finish writes, and kept
        // open for the claim: the finish writes none of them but `active` and the events
        // stream, and hands those back open.
        let ready = Ready::open(x)?;
        let delayed = x.open_as(Delayed, Kind::ZSet)?;
        let meta = x.read(Meta)?;
        meta.exists_as(Kind::Hash)?;
        let sets = Sets { ready: Some(&ready), delayed: Some(&delayed) };
        let (done, Left { active, events }) = finish_leaving(x, a.finish, Drained::Leave, sets)?;
        let opened = Opened { meta, pass: Pass { ready, delayed, active, events } };
        let jobs = match take.run(x, Some(opened)) {
            Ok((jobs, _, _)) => {
                if jobs.is_empty() {
                    drained_if_idle(x)?;
                }
                jobs.reply()
            }
            // The finish has written: the reply must not read as a refusal (a script's caller
            // gets a nested error as the script's own). The claim wrote nothing, and the next
            // CLAIM, which writes nothing either, answers its error.
            Err(_) => Reply::Array(Vec::new()),
        };
        Ok(Reply::Array(vec![Reply::Int(done.into()), jobs]))
    }
}

/// After a finish and a claim that found nothing: `drained` when nothing is ready, active or
/// delayed. A worker that fetches is drained only when no job will come to it without a new
/// one: a retry waiting out its backoff, or a scheduler's next iteration, is work to come.
/// (COMPLETE, which fetches nothing, does not look at `delayed`.) The sets are opened again
/// for this alone, the claim having closed its handles.
pub fn drained_if_idle(x: &mut Exec) -> Result<(), Refusal> {
    let events = Events::open(x)?;
    let (ready, active) = (Ready::open(x)?, x.open_as(Active, Kind::ZSet)?);
    if events.on()
        && active.len() == 0
        && ready.wait.len() == 0
        && ready.prio.len() == 0
        && x.open_as(Delayed, Kind::ZSet)?.len() == 0
    {
        events.emit(x, None, Event::Drained)?;
    }
    Ok(())
}
