//! `TRA.JOB 1 job` — one job as a map (RESP2: flat pairs), in this order: `id state name data
//! opts priority attempts backoff created started made stalls claimed deadline due expire
//! progress result error finished stack alias dedup scheduler iteration count worker`; nil when
//! the row is absent. A fact not set is null;
//! `priority`, `attempts`, `started`, `made` and `stalls` are integers with their defaults (0,
//! 1, 0, 0, 0); `backoff` is `FIXED <ms>` or `EXP <ms>`; `deadline` is the job's score in
//! `active` (its lease) and `due` its score in `delayed` — those sets are read as the caller,
//! undeclared. `progress` is the holder's last TRA.PROGRESS report; `expire` the job's EXPIRE time
//! (null without one); `stack` the last FAIL's STACK; `dedup` the DEDUP id the job was created
//! with (whether or not it still holds it); `scheduler`, `iteration` and `count` the job
//! scheduler that made the job, the iteration's time and its number (1 for the scheduler's
//! first; null for other jobs); `worker` the name the last claim that gave `BY` recorded.
//! Read-only, no fence.

use crate::domain::{self};
use crate::errors::Refusal;
use crate::host::command::{q, Arg, Command, Keys, Spec::*};
use crate::host::{Access, ArgStr, Exec, Kind, Reply, Verb};
use crate::keyspace::Role::{self, *};
use crate::queue::view::view;
use crate::queue::{field, State};

pub const KEYS: Keys = Keys::of(&[q(Job, Read)]);
pub const ARGS: &[Arg] = &[];

/// The command, declared whole: registration, ACL, `COMMAND DOCS` and the reference take it
/// from here.
pub const COMMAND: Command = Command::new::<Inspect>("TRA.JOB")
    .keys(KEYS)
    .args(ARGS)
    .fast()
    .summary("One job: its state, fields, lease deadline and due time, as a map; nil when absent.")
    .complexity("O(1)");

pub struct Inspect;

impl Verb for Inspect {
    type Args<'a> = ();

    fn shape(args: &[ArgStr]) -> Result<(), Refusal> {
        super::no_arguments(args)
    }

    fn run(x: &mut Exec<'_>, _: ()) -> Result<Reply, Refusal> {
        domain::job_id(x.id)?;
        let row = x.read(Job)?;
        if !row.exists_as(Kind::Hash)? {
            return Ok(Reply::Null);
        }
        let state = row.hget(&field::STATE);
        let st = state.as_ref().and_then(|s| State::of(s.bytes()));
        let mut score_in = |role: Role, when: State| -> Result<Reply, Refusal> {
            if st != Some(when) {
                return Ok(Reply::Null);
            }
            let id = x.string(x.id)?;
            let set = x.open_undeclared(role, b"", Access::Read)?;
            set.exists_as(Kind::ZSet)?;
            Ok(set.zscore(id.str_ref()).map_or(Reply::Null, |s| Reply::Int(s as i64)))
        };
        let deadline = score_in(Active, State::Active)?;
        let due = score_in(Delayed, State::Delayed)?;
        Ok(view(x.id, &row, state.map_or(Reply::Null, Reply::Str), deadline, due))
    }
}
