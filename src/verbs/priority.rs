//! `TRA.PRIORITY 4 job wait prio events priority [LIFO]` — change a job's priority (0..=
//! 2097151), a scheduling fact of a waiting job, not its data. The row's `p` is rewritten
//! (deleted for 0, the default, as ENQUEUE stores no default). A ready job moves as the new
//! value needs: from `wait` to `prio` for a value above 0; from `prio` to `wait` for 0 (at
//! the back, the front with LIFO); a job in `prio` that stays there only gets its new score,
//! and a job in `wait` that stays there keeps its place. In any other state only `p` changes
//! (it applies when the job is next made ready). One `priority` event. Reply 1; `EMQNOJOB`
//! without a row. Fenced.

use crate::domain::{self, args::Opt};
use crate::errors::Refusal;
use crate::host::command::{flag, q, val, Arg, Command, Keys, Spec::*, Ty};
use crate::host::{ArgStr, Exec, Reply, Verb};
use crate::queue::{existing_row, field, End, Event, Events, Ready, Row, State};

use crate::keyspace::Role::*;

pub const KEYS: Keys = Keys::of(&[q(Job, Update), q(Wait, Update), q(Prio, Update), q(Events, Append)]);
pub const ARGS: &[Arg] = &[val("priority", Ty::Int).range(domain::NEW_PRIORITY), flag("lifo", "LIFO")];

/// The command, declared whole: registration, ACL, `COMMAND DOCS` and the reference take it
/// from here.
pub const COMMAND: Command = Command::new::<Priority>("TRA.PRIORITY")
    .keys(KEYS)
    .args(ARGS)
    .writes()
    .fast()
    .summary("Change a job's priority; a ready job moves between wait and prio as the new value needs.")
    .complexity("O(log N), or O(N) for a job moved out of wait (LREM)");

pub struct Priority;

pub struct Args {
    priority: i64,
    lifo: bool,
}

impl Verb for Priority {
    type Args<'a> = Args;

    fn shape(args: &[ArgStr]) -> Result<Args, Refusal> {
        let [priority, rest @ ..] = args else { return Err(Refusal::Usage) };
        let priority = domain::args::number(priority, "priority")?;
        let lifo = domain::args::options(rest, &[Opt::Lifo])?.lifo;
        Ok(Args { priority, lifo })
    }

    fn run(x: &mut Exec<'_>, a: Args) -> Result<Reply, Refusal> {
        domain::job_id(x.id)?;
        let p = domain::NEW_PRIORITY.check(a.priority)?;
        let row = existing_row(x)?;
        let ready = Ready::open(x)?;
        let events = Events::open(x)?;
        let id = x.string(x.id)?;
        let state = Row(&row).state();
        let value = (p != 0).then(|| x.int(p)).transpose()?;
        let moved = match (state, p) {
            (Some(State::Wait), 0) => None,
            (Some(State::Wait), _) => {
                ready.wait.lrem(id.str_ref())?;
                Some(ready.put(id.str_ref(), p, End::Back)?)
            }
            (Some(State::Prio), 0) => {
                ready.prio.zrem(id.str_ref());
                Some(ready.put(id.str_ref(), 0, End::lifo(a.lifo))?)
            }
            (Some(State::Prio), _) => {
                ready.prio.zadd(p, id.str_ref())?;
                None
            }
            _ => None,
        };
        match (&value, moved) {
            (Some(v), Some(st)) => {
                row.hset(&[(&field::PRIORITY, v.str_ref()), (&field::STATE, st.lit().str_ref())])?
            }
            (Some(v), None) => row.hset(&[(&field::PRIORITY, v.str_ref())])?,
            (None, Some(st)) => {
                row.hset(&[(&field::STATE, st.lit().str_ref())])?;
                row.hdel(&[&field::PRIORITY])?;
            }
            (None, None) => row.hdel(&[&field::PRIORITY])?,
        }
        events.emit(x, Some(id.str_ref()), Event::Priority { priority: p })?;
        Ok(Reply::Int(1))
    }
}
