//! `EMQ.REPROCESS 6 job completed failed wait prio events [FROM completed|failed] [KEEPMADE]
//! [KEEPSTARTED] [KEEPPROGRESS] [LIFO]` — send a completed or failed job back to ready (at the
//! back of wait, the front with LIFO, or prio), clearing its result, error, finish time, token,
//! progress, stalls and last claim time and setting its attempt counters to 0 — unless KEEPMADE
//! or KEEPSTARTED keeps `am` or `as` (a retry that still counts what was spent), or
//! KEEPPROGRESS the last progress report (shown until the next run reports one). `EMQSTATE`
//! when the job is not finished, or with FROM, not in that set. The last FAIL's stack stays.

use crate::domain::{self, args::Opt};
use crate::errors::{not_in, Refusal};
use crate::host::command::{block, flag, one_of, q, word, Arg, Command, Keys, Spec::*};
use crate::host::{ArgStr, Exec, Kind, Lit, Reply, Verb};
use crate::keyspace::Role::*;
use crate::queue::{existing_row, field, End, Event, Events, Ready, Row, State};

pub const KEYS: Keys = Keys::of(&[
    q(Job, Update),
    q(Completed, Take),
    q(Failed, Take),
    q(Wait, Insert),
    q(Prio, Insert),
    q(Events, Append),
]);
pub const ARGS: &[Arg] = &[
    block("from", Some("FROM"), &[one_of("set", None, &[word("completed"), word("failed")])]).optional(),
    flag("keepmade", "KEEPMADE"),
    flag("keepstarted", "KEEPSTARTED"),
    flag("keepprogress", "KEEPPROGRESS"),
    flag("lifo", "LIFO"),
];

/// The command, declared whole: registration, ACL, `COMMAND DOCS` and the reference take it
/// from here.
pub const COMMAND: Command = Command::new::<Reprocess>("EMQ.REPROCESS")
    .tokens(&["reprocess"])
    .keys(KEYS)
    .args(ARGS)
    .writes()
    .fast()
    .summary("Send a completed or failed job back to ready with its counters reset (or kept).")
    .complexity("O(log N)");

pub struct Reprocess;

pub struct Args {
    /// FROM: the one finished state the caller expects the job in.
    from: Option<State>,
    keep_made: bool,
    keep_started: bool,
    keep_progress: bool,
    lifo: bool,
}

impl Verb for Reprocess {
    type Args<'a> = Args;

    fn shape(args: &[ArgStr]) -> Result<Args, Refusal> {
        let o = domain::args::options(
            args,
            &[Opt::FromSet, Opt::KeepMade, Opt::KeepStarted, Opt::KeepProgress, Opt::Lifo],
        )?;
        let from = match o.from_set {
            None => None,
            Some(s) if s.eq_ignore_ascii_case(b"completed") => Some(State::Completed),
            Some(s) if s.eq_ignore_ascii_case(b"failed") => Some(State::Failed),
            Some(_) => return Err(Refusal::Shape("FROM takes completed or failed".into())),
        };
        Ok(Args {
            from,
            keep_made: o.keep_made,
            keep_started: o.keep_started,
            keep_progress: o.keep_progress,
            lifo: o.lifo,
        })
    }

    fn run(x: &mut Exec<'_>, a: Args) -> Result<Reply, Refusal> {
        domain::job_id(x.id)?;
        let row = existing_row(x)?;
        let completed = x.open_as(Completed, Kind::ZSet)?;
        let failed = x.open_as(Failed, Kind::ZSet)?;
        let ready = Ready::open(x)?;
        let events = Events::open(x)?;
        let id = x.string(x.id)?;
        let r = Row(&row);
        let expected = match a.from {
            Some(State::Completed) => "completed",
            Some(_) => "failed",
            None => "completed or failed",
        };
        let (prev, set) = match r.state() {
            Some(State::Completed) if a.from != Some(State::Failed) => (State::Completed, &completed),
            Some(State::Failed) if a.from != Some(State::Completed) => (State::Failed, &failed),
            _ => return Err(not_in(x.id, expected)),
        };
        if !set.zrem(id.str_ref()) {
            return Err(not_in(x.id, expected));
        }
        let state = ready.put(id.str_ref(), r.priority(), End::lifo(a.lifo))?;
        row.hset(&[(&field::STATE, state.lit().str_ref())])?;
        let mut cleared: smallvec::SmallVec<[&Lit; 9]> = smallvec::smallvec![
            &field::RESULT,
            &field::ERROR,
            &field::FINISHED,
            &field::TOKEN,
            &field::STALLS,
            &field::CLAIMED,
        ];
        if !a.keep_progress {
            cleared.push(&field::PROGRESS);
        }
        if !a.keep_started {
            cleared.push(&field::STARTED);
        }
        if !a.keep_made {
            cleared.push(&field::MADE);
        }
        row.hdel(&cleared)?;
        events.emit(x, Some(id.str_ref()), Event::Waiting { prev })?;
        Ok(Reply::Int(1))
    }
}
