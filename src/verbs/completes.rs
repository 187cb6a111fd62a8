//! `TRA.COMPLETES 3 active completed events id token result [id token result ...]` — COMPLETE
//! for many held jobs in one call: a worker that processed a batch finishes it in one request
//! instead of one per job. Each entry answers as COMPLETE would: 1 completed; 0 when that
//! token already completed it (a repeat after a lost reply: nothing written); -1 when the job
//! is not held with that token (what COMPLETE answers `EMQLEASE` for); -2 when there is no
//! such job (`EMQNOJOB`). Rows are found from the ids, not declared: opened as the caller,
//! as EXTENDS opens them. Retention as COMPLETE without KEEP (`trafikey.keep-completed`).
//! At most `domain::CLAIM_PER_CALL` jobs a call (what one CLAIM hands out); an id given twice
//! is refused. Fenced.

use crate::config;
use crate::domain::{self};
use crate::errors::Refusal;
use crate::host::command::{block, q, val, Arg, Command, Keys, Spec::*, Ty};
use crate::host::{Access, ArgStr, Exec, Kind, Reply, Verb};
use crate::keyspace::Role::{self, *};
use crate::queue::finish::{self, Drained, Finishing, Held, Writes};
use crate::queue::{Events, Sets};

pub const KEYS: Keys = Keys::of(&[q(Active, Take), q(Completed, Update), q(Events, Append)]);
pub const ARGS: &[Arg] =
    &[block("job", None, &[val("id", Ty::Str), val("token", Ty::Str), val("result", Ty::Str).payload()])
        .multiple()];

/// The command, declared whole: registration, ACL, `COMMAND DOCS` and the reference take it
/// from here.
pub const COMMAND: Command = Command::new::<Completes>("TRA.COMPLETES")
    .holder()
    .keys(KEYS)
    .args(ARGS)
    .writes()
    .summary("COMPLETE many held jobs at once: 1, 0 (a repeat), -1 (not held) or -2 (no such job) for each.")
    .complexity("O(n log N) for n jobs");

pub struct Completes;

pub struct Args<'a> {
    jobs: Vec<[ArgStr<'a>; 3]>,
}

impl Verb for Completes {
    type Args<'a> = Args<'a>;

    fn shape<'a>(args: &[ArgStr<'a>]) -> Result<Args<'a>, Refusal> {
        if args.is_empty() || !args.len().is_multiple_of(3) {
            return Err(Refusal::Usage);
        }
        let jobs = args.chunks_exact(3).filter_map(|t| Some([*t.first()?, *t.get(1)?, *t.get(2)?])).collect();
        Ok(Args { jobs })
    }

    fn run<'a>(x: &mut Exec<'a>, a: Args<'a>) -> Result<Reply, Refusal> {
        let ids: Vec<&[u8]> = a.jobs.iter().map(|[id, ..]| id.bytes()).collect();
        let max = usize::try_from(domain::CLAIM_PER_CALL).unwrap_or(0);
        let count =
            |n: usize| if n > max { Err(Refusal::Arg(format!("at most {max} jobs"))) } else { Ok(()) };
        finish::check_entries(&ids, a.jobs.iter().map(|[_, token, result]| (token, result)), count)?;
        let how = Finishing::default();
        let checked = how.check(&config::KEEP_COMPLETED)?;
        let active = x.open_as(Active, Kind::ZSet)?;
        let completed = x.open_as(Completed, Kind::ZSet)?;
        let events = Events::open(x)?;
        let mut held = Vec::with_capacity(a.jobs.len());
        for [id, token, result] in &a.jobs {
            let row = x.open_undeclared(Role::Job, id, Access::Update)?;
            let exists = row.exists_as(Kind::Hash)?;
            held.push(Held { id: x.string(id)?, row, exists, token: *token, result: *result });
        }
        let into = Writes { active: &active, completed: &completed, events: &events };
        let fates = finish::finish_held(x, &mut held, &how, checked, into, Sets::default(), Drained::Leave)?;
        Ok(Reply::Array(fates.into_iter().map(Reply::Int).collect()))
    }
}
