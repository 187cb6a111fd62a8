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
use crate::queue::finish::{self, Drained, Finishing, Held, Writes};
use crate::queue::{Events, Holder, Ready, Sets};

use super::options::{AGE, BY, ECHO, KEEP, METRICS};
use crate::queue::claim::{Claiming, Opened, Pass};

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
    val("result", Ty::Str).payload(),
    val("lease_ms", Ty::Int).range(domain::LEASE),
    KEEP,
    AGE,
    ECHO,
    METRICS,
    opt("count", "COUNT", "n", Ty::Int).range(domain::CLAIM_COUNT),
    flag("row", "ROW"),
    BY,
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
    token: ArgStr<'a>,
    result: ArgStr<'a>,
    how: Finishing,
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
                let how = Finishing::of(&o);
                Ok(Args { token: *token, result: *result, how, take: (lease, o.count, o.row, o.by) })
            }
            _ => Err(Refusal::Usage),
        }
    }

    fn run<'a>(x: &mut Exec<'a>, a: Args<'a>) -> Result<Reply, Refusal> {
        let (lease, count, row, by) = a.take;
        finish::check_entries(&[x.id], std::iter::once((&a.token, &a.result)), |_| Ok(()))?;
        let take = Claiming::check(a.token, lease, count, row, by)?;
        let checked = a.how.check(&crate::config::KEEP_COMPLETED)?;
        // Every declared key of the claim type-checked before the finish writes, and kept
        // open for the claim: the finish writes none of them but `active` and the events
        // stream, through the handles the claim then uses.
        let ready = Ready::open(x)?;
        let delayed = x.open_as(Delayed, Kind::ZSet)?;
        let meta = x.read(Meta)?;
        meta.exists_as(Kind::Hash)?;
        let job = Holder::open(x)?;
        let completed = x.open_as(Completed, Kind::ZSet)?;
        let events = Events::open(x)?;
        let sets = Sets { ready: Some(&ready), delayed: Some(&delayed) };
        let mut held = [Held { id: job.id, row: job.row, exists: true, token: a.token, result: a.result }];
        let into = Writes { active: &job.active, completed: &completed, events: &events };
        let fates = finish::finish_held(x, &mut held, &a.how, checked, into, sets, Drained::Leave)?;
        let done = match fates.first().copied() {
            Some(finish::DONE) => 1,
            Some(finish::REPEAT) => 0,
            _ => return Err(crate::errors::lease(x.id)),
        };
        drop((held, completed));
        let opened = Opened { meta, pass: Pass { ready, delayed, active: job.active, events } };
        let jobs = match take.run(x, Some(opened)) {
            Ok((jobs, _, _)) => {
                if jobs.is_empty() {
                    finish::drained_if_idle(x)?;
                }
                jobs.reply()
            }
            // The finish has written: the reply must not read as a refusal (a script's caller
            // gets a nested error as the script's own). The claim wrote nothing, and the next
            // CLAIM, which writes nothing either, answers its error.
            Err(_) => Reply::Array(Vec::new()),
        };
        Ok(Reply::Array(vec![Reply::Int(done), jobs]))
    }
}
