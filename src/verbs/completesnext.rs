//! `TRA.COMPLETESNEXT 7 wait prio active delayed completed meta events n job:<ID1> … job:<IDn>
//! token1 result1 … tokenn resultn claim_token lease_ms [KEEP n] [AGE ms] [ECHO] [METRICS max]
//! [ROW]` — TRA.COMPLETENEXT for many held jobs of one queue in one call: a worker running
//! many jobs at once finishes all those that ended together, and fetches their successors,
//! in one request instead of one each. Each job is finished as TRA.COMPLETES finishes it, with
//! COMPLETE's options (retention counts the call's jobs together), and answers by a code: 1
//! completed, 0 a repeat of the same token's finish, -1 not held with that token, -2 no such
//! job. Then, under the same fence read, one CLAIM takes a job for each entry that answered 1
//! or 0, with `claim_token` (ROW as CLAIM's). Replies `[[code …], jobs]`, `jobs` as CLAIM's,
//! or empty when the claim is refused, as TRA.COMPLETENEXT answers it. Nothing is written when
//! no entry answers 1 or 0. The rows are keys of the call, after `n` (1 ≤ n ≤ 50), so ACL and
//! the server see each. An id given twice is refused. `drained` as TRA.COMPLETENEXT writes
//! it. Fenced.

use crate::config;
use crate::domain::{self, args::Opt};
use crate::errors::Refusal;
use crate::host::command::{block, flag, q, val, Arg, Command, Keys, Spec::*, Ty};
use crate::host::{ArgStr, Exec, Kind, Reply, Verb};
use crate::keyspace::Role::*;
use crate::queue::finish::{self, Drained, Finishing, Held, Writes};
use crate::queue::{Events, Ready, Sets};

use super::options::{AGE, BY, ECHO, KEEP, METRICS};
use crate::queue::claim::{Claiming, Opened, Pass};

pub const KEYS: Keys = Keys::of(&[
    q(Wait, Update),
    q(Prio, Update),
    q(Active, Update),
    q(Delayed, Take),
    q(Completed, Update),
    q(Meta, Read),
    q(Events, Append),
]);
pub const ARGS: &[Arg] = &[
    block("job", None, &[val("token", Ty::Str), val("result", Ty::Str).payload()]).multiple(),
    val("claim_token", Ty::Str),
    val("lease_ms", Ty::Int).range(domain::LEASE),
    KEEP,
    AGE,
    ECHO,
    METRICS,
    flag("row", "ROW"),
    BY,
];

/// The command, declared whole: registration, ACL, `COMMAND DOCS` and the reference take it
/// from here.
pub const COMMAND: Command = Command::new::<CompletesNext>("TRA.COMPLETESNEXT")
    .holder()
    .keys(KEYS)
    .tail(Job, Update, domain::FINISH_ROWS)
    .args(ARGS)
    .writes()
    .summary("COMPLETE many held jobs of a queue, then CLAIM one job for each finished, atomically.")
    .complexity("O((n + p) log N) for n jobs and p promoted, plus retention");

pub struct CompletesNext;

pub struct Args<'a> {
    pairs: Vec<[ArgStr<'a>; 2]>,
    token: ArgStr<'a>,
    lease: i64,
    how: Finishing,
    row: bool,
    by: Option<ArgStr<'a>>,
}

/// `token result` for each row key, then the claim's token and lease, then the options.
fn args<'a>(args: &[ArgStr<'a>], keys: usize) -> Result<Args<'a>, Refusal> {
    let (pairs, rest) = args.split_at_checked(keys.saturating_mul(2)).ok_or(Refusal::Usage)?;
    let [token, lease, rest @ ..] = rest else { return Err(Refusal::Usage) };
    let lease = domain::args::number(lease, "lease_ms")?;
    let o = domain::args::options(rest, &[Opt::Keep, Opt::Age, Opt::Echo, Opt::Metrics, Opt::Row, Opt::By])?;
    let pairs = pairs.chunks_exact(2).filter_map(|p| Some([*p.first()?, *p.get(1)?])).collect();
    let how = Finishing::of(&o);
    Ok(Args { pairs, token: *token, lease, how, row: o.row, by: o.by })
}

impl Verb for CompletesNext {
    type Args<'a> = Args<'a>;

    /// Without the count of row keys (no call at hand): accepted when some count of pairs
    /// makes the rest a claim and its options.
    fn shape<'a>(a: &[ArgStr<'a>]) -> Result<Args<'a>, Refusal> {
        (0..=a.len() / 2).find_map(|k| args(a, k).ok()).ok_or(Refusal::Usage)
    }

    fn shape_tail<'a>(a: &[ArgStr<'a>], keys: usize) -> Result<Args<'a>, Refusal> {
        args(a, keys)
    }

    fn run<'a>(x: &mut Exec<'a>, a: Args<'a>) -> Result<Reply, Refusal> {
        let rows: Vec<_> = x.tail().collect();
        let ids: Vec<&[u8]> = rows.iter().map(|(_, id)| *id).collect();
        let count = |n: usize| domain::FINISH_ROWS.check(i64::try_from(n).unwrap_or(i64::MAX)).map(drop);
        finish::check_entries(&ids, a.pairs.iter().map(|[token, result]| (token, result)), count)?;
        let count = i64::try_from(rows.len()).unwrap_or(i64::MAX);
        let take = Claiming::check(a.token, a.lease, Some(count), a.row, a.by)?;
        let checked = a.how.check(&config::KEEP_COMPLETED)?;
        // Every declared key type-checked before the first write, and kept open for the
        // claim, which then meets `active` and the events stream as the finishes left them.
        let ready = Ready::open(x)?;
        let delayed = x.open_as(Delayed, Kind::ZSet)?;
        let meta = x.read(Meta)?;
        meta.exists_as(Kind::Hash)?;
        let active = x.open_as(Active, Kind::ZSet)?;
        let completed = x.open_as(Completed, Kind::ZSet)?;
        let events = Events::open(x)?;
        let mut held = Vec::with_capacity(rows.len());
        for ((name, id), [token, result]) in rows.iter().zip(&a.pairs) {
            let row = x.open_tail(*name, true);
            let exists = row.exists_as(Kind::Hash)?;
            held.push(Held { id: x.string(id)?, row, exists, token: *token, result: *result });
        }
        let sets = Sets { ready: Some(&ready), delayed: Some(&delayed) };
        let into = Writes { active: &active, completed: &completed, events: &events };
        let fates = finish::finish_held(x, &mut held, &a.how, checked, into, sets, Drained::Leave)?;
        drop((held, completed));
        let wanted = fates.iter().filter(|f| **f >= 0).count();
        let codes = Reply::Array(fates.into_iter().map(Reply::Int).collect());
        if wanted == 0 {
            return Ok(Reply::Array(vec![codes, Reply::Array(Vec::new())]));
        }
        let take = take.at_most(wanted);
        let opened = Opened { meta, pass: Pass { ready, delayed, active, events } };
        let jobs = match take.run(x, Some(opened)) {
            Ok((jobs, _, _)) => {
                if jobs.is_empty() {
                    finish::drained_if_idle(x)?;
                }
                jobs.reply()
            }
            // As TRA.COMPLETENEXT: after the finishes wrote, a refused claim is no jobs.
            Err(_) => Reply::Array(Vec::new()),
        };
        Ok(Reply::Array(vec![codes, jobs]))
    }
}
