//! `TRA.JOB 1 job` — one job as a map (RESP2: flat pairs), in this order: `id state name data
//! opts priority attempts backoff created started made stalls claimed deadline due expire
//! progress result error finished stack alias dedup scheduler iteration count`; nil when the row is absent. A fact not set is null;
//! `priority`, `attempts`, `started`, `made` and `stalls` are integers with their defaults (0,
//! 1, 0, 0, 0); `backoff` is `FIXED <ms>` or `EXP <ms>`; `deadline` is the job's score in
//! `active` (its lease) and `due` its score in `delayed` — those sets are read as the caller,
//! undeclared. `progress` is the holder's last TRA.PROGRESS report; `expire` the job's EXPIRE time
//! (null without one); `stack` the last FAIL's STACK; `dedup` the DEDUP id the job was created
//! with (whether or not it still holds it); `scheduler`, `iteration` and `count` the job
//! scheduler that made the job, the iteration's time and its number (1 for the scheduler's
//! first; null for other jobs). Read-only, no fence.

use crate::domain::{self, Backoff};
use crate::errors::Refusal;
use crate::host::command::{q, Arg, Command, Keys, Spec::*};
use crate::host::{Access, ArgStr, Exec, Key, Kind, Lit, Reply, Str, Verb};
use crate::keyspace::Role::{self, *};
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

fn text(s: Option<Str>) -> Reply {
    s.map_or(Reply::Null, Reply::Str)
}

fn int(s: Option<Str>, default: Option<i64>) -> Reply {
    match s.and_then(|s| domain::args::int(s.bytes())).or(default) {
        Some(v) => Reply::Int(v),
        None => Reply::Null,
    }
}

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
        Ok(view(x.id, &row, text(state), deadline, due))
    }
}

/// A job's row as TRA.JOB shows it, its state, lease deadline and due time given by the
/// caller (TRA.JOB reads them).
pub fn view(id: &[u8], row: &Key, state: Reply, deadline: Reply, due: Reply) -> Reply {
    let mut get = read(row);
    let mut pairs = vec![
        ("id", Reply::bulk(id)),
        ("state", state),
        ("name", text(get(&field::NAME))),
        ("data", text(get(&field::DATA))),
    ];
    pairs.extend(facts(&mut get, deadline, due));
    Reply::Map(pairs)
}

/// A claimed job's row as `CLAIM … ROW` hands it out, read after the claim wrote it: TRA.JOB's
/// map without the facts the claim's entry already carries (id, name, data) and without those
/// not set, so the reply grows by what the worker did not have.
pub fn claimed_view(row: &Key, state: Reply, deadline: Reply) -> Reply {
    let mut get = read(row);
    let mut pairs = Vec::with_capacity(12);
    pairs.push(("state", state));
    pairs.extend(facts(&mut get, deadline, Reply::Null).into_iter().filter(|(_, v)| !matches!(v, Reply::Null)));
    Reply::Map(pairs)
}

/// The row read in one pass (a map shows nearly every field; a lookup each walked the row
/// once per field): a getter that hands out each field's value once.
fn read(row: &Key) -> impl FnMut(&Lit) -> Option<Str> {
    let mut fields: smallvec::SmallVec<[(&'static [u8], Str); 26]> = smallvec::SmallVec::new();
    row.hscan(|name, value| {
        if let Some(f) = field::ALL.iter().find(|f| f.bytes() == name) {
            fields.push((f.bytes(), value));
        }
    });
    move |f: &Lit| {
        let at = fields.iter().position(|(name, _)| *name == f.bytes())?;
        Some(fields.swap_remove(at).1)
    }
}

/// The facts after `id state name data`, in TRA.JOB's order: an array on the stack (a claim
/// with ROW builds one per job, and a vector of them is a heap block past the allocator's
/// fast sizes).
fn facts(get: &mut impl FnMut(&Lit) -> Option<Str>, deadline: Reply, due: Reply) -> [(&'static str, Reply); 22] {
    let backoff = get(&field::BACKOFF).and_then(|b| domain::backoff_decode(b.bytes())).map(|b| match b {
        Backoff::Fixed(ms) => format!("FIXED {ms}"),
        Backoff::Exp(ms) => format!("EXP {ms}"),
    });
    [
        ("opts", text(get(&field::OPTS))),
        ("priority", int(get(&field::PRIORITY), Some(0))),
        ("attempts", int(get(&field::ATTEMPTS), Some(1))),
        ("backoff", backoff.map_or(Reply::Null, |b| Reply::bulk(b.as_bytes()))),
        ("created", int(get(&field::CREATED), None)),
        ("started", int(get(&field::STARTED), Some(0))),
        ("made", int(get(&field::MADE), Some(0))),
        ("stalls", int(get(&field::STALLS), Some(0))),
        ("claimed", int(get(&field::CLAIMED), None)),
        ("deadline", deadline),
        ("due", due),
        ("expire", int(get(&field::EXPIRE), None)),
        ("progress", text(get(&field::PROGRESS))),
        ("result", text(get(&field::RESULT))),
        ("error", text(get(&field::ERROR))),
        ("finished", int(get(&field::FINISHED), None)),
        ("stack", text(get(&field::STACK))),
        ("alias", text(get(&field::ALIAS))),
        ("dedup", text(get(&field::DEDUP))),
        ("scheduler", text(get(&field::SCHEDULER))),
        ("iteration", int(get(&field::ITERATION), None)),
        ("count", int(get(&field::ROUND), None)),
    ]
}
