//! `TRA.REMOVE 8 job wait prio active delayed completed failed events [FORCE]` — deletes one
//! job: its row, its log, its alias entry, its DEDUP id (TTL or not) and its entry in the state
//! set the row names. A held job (in `active`) is
//! removed only with FORCE; its holder then gets `EMQLEASE` on whatever it does next. One
//! `removed` event (`prev`: the state it was in). Replies 1, or 0 when there is no such job.
//! Fenced, like every write.

use crate::domain::{self, args::Opt};
use crate::errors::{not_in, Refusal};
use crate::host::command::{flag, q, Arg, Command, Keys, Spec::*};
use crate::host::{ArgStr, Exec, Kind, Reply, Verb};
use crate::keyspace::Role::*;
use crate::queue::{Companions, Event, Events, Release, Row, Sets, State};

pub const KEYS: Keys = Keys::of(&[
    q(Job, Update),
    q(Wait, Update),
    q(Prio, Update),
    q(Active, Update),
    q(Delayed, Update),
    q(Completed, Update),
    q(Failed, Update),
    q(Events, Append),
]);
pub const ARGS: &[Arg] = &[flag("force", "FORCE")];

/// The command, declared whole: registration, ACL, `COMMAND DOCS` and the reference take it
/// from here.
pub const COMMAND: Command = Command::new::<Remove>("TRA.REMOVE")
    .keys(KEYS)
    .args(ARGS)
    .writes()
    .summary("Delete one job: its row and its set entry; a held job only with FORCE.")
    .complexity("O(log N), or O(N) for a job waiting in wait (LREM)");

pub struct Remove;

impl Verb for Remove {
    type Args<'a> = bool;

    fn shape(args: &[ArgStr]) -> Result<bool, Refusal> {
        Ok(domain::args::options(args, &[Opt::Force])?.force)
    }

    fn run(x: &mut Exec<'_>, force: bool) -> Result<Reply, Refusal> {
        domain::job_id(x.id)?;
        let row = x.write(Job)?;
        if !row.exists_as(Kind::Hash)? {
            return Ok(Reply::Int(0));
        }
        let wait = x.open_as(Wait, Kind::List)?;
        let sets = [
            (State::Prio, x.open_as(Prio, Kind::ZSet)?),
            (State::Active, x.open_as(Active, Kind::ZSet)?),
            (State::Delayed, x.open_as(Delayed, Kind::ZSet)?),
            (State::Completed, x.open_as(Completed, Kind::ZSet)?),
            (State::Failed, x.open_as(Failed, Kind::ZSet)?),
        ];
        let events = Events::open(x)?;
        let id = x.string(x.id)?;
        let state = Row(&row).state();
        if state == Some(State::Active) && !force {
            return Err(not_in(x.id, "removable while held: give FORCE"));
        }
        let job_id = x.id;
        let log = crate::queue::companions_of(x, job_id, &row)?;
        let alias = Companions::alias_of(x, log.as_ref())?;
        let release = Release::removing(x, job_id, &row)?;
        match state {
            Some(State::Wait) => {
                wait.lrem(id.str_ref())?;
            }
            Some(s) => {
                if let Some((_, set)) = sets.iter().find(|(st, _)| *st == s) {
                    set.zrem(id.str_ref());
                    if s == State::Active {
                        set.signal_ready();
                    }
                }
            }
            None => {}
        }
        row.delete();
        if let Some(c) = log {
            c.delete();
        }
        release.apply(x, &events, Sets::default())?;
        if let Some(prev) = state {
            events.emit(
                x,
                Some(id.str_ref()),
                Event::Removed { prev, alias: alias.as_ref().map(|a| a.str_ref()) },
            )?;
        }
        Ok(Reply::Int(1))
    }
}
