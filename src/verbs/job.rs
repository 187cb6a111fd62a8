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
    let mut fields = Fields::read(row);
    let mut get = |f: &Lit| fields.take(f);
    let mut pairs = Vec::with_capacity(FACTS.saturating_add(4));
    pairs.extend([
        ("id", Reply::bulk(id)),
        ("state", state),
        ("name", text(get(&field::NAME))),
        ("data", text(get(&field::DATA))),
    ]);
    facts(&mut get, deadline, due, |name, v| pairs.push((name, v)));
    Reply::Map(pairs)
}

/// A claimed job's row as `CLAIM … ROW` hands it out: TRA.JOB's map after the claim, without
/// what the worker has already — the entry's id, name and data, the state (`active`, as every
/// claimed job) — and without the facts that are null or at their defaults (priority 0,
/// attempts 1, made 0, stalls 0), so the reply grows only by what the worker did not have.
/// `fields` is the row as read before the claim wrote it (name and data taken out); the
/// claim's own writes are given.
pub fn claimed_view(
    mut fields: Fields,
    started: i64,
    claimed: i64,
    expire_spent: bool,
    deadline: i64,
) -> Reply {
    fields.take(&field::STARTED);
    fields.take(&field::CLAIMED);
    if expire_spent {
        fields.take(&field::EXPIRE);
    }
    // Every field left may show, and the three the claim gives.
    let mut pairs = Vec::with_capacity(fields.0.len().saturating_add(3));
    let mut get = |f: &Lit| fields.take(f);
    facts(&mut get, Reply::Int(deadline), Reply::Null, |name, v| {
        let v = match name {
            "started" => Reply::Int(started),
            "claimed" => Reply::Int(claimed),
            _ => v,
        };
        let default = matches!(
            (name, &v),
            (_, Reply::Null) | ("priority" | "made" | "stalls", Reply::Int(0)) | ("attempts", Reply::Int(1))
        );
        if !default {
            pairs.push((name, v));
        }
    });
    Reply::Map(pairs)
}

/// A row read in one pass (a map shows nearly every field; a lookup each walked the row once
/// per field): each field's value is handed out once.
pub struct Fields(smallvec::SmallVec<[(&'static [u8], Str); 26]>);

impl Fields {
    pub fn read(row: &Key) -> Fields {
        let mut fields = smallvec::SmallVec::new();
        row.hscan(|name, value| {
            if let Some(f) = field::ALL.iter().find(|f| same(f.bytes(), name)) {
                fields.push((f.bytes(), value));
            }
        });
        Fields(fields)
    }

    pub fn take(&mut self, f: &Lit) -> Option<Str> {
        let at = self.0.iter().position(|(name, _)| same(name, f.bytes()))?;
        Some(self.0.swap_remove(at).1)
    }

    pub fn peek(&self, f: &Lit) -> Option<&Str> {
        self.0.iter().find(|(name, _)| same(name, f.bytes())).map(|(_, v)| v)
    }
}

/// Field names are one or two bytes: compared in line, where a call to compare memory cost
/// more than the comparison (a view makes some 200 of them).
#[inline(always)]
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

/// How many facts `facts` hands out.
const FACTS: usize = 22;

/// The facts after `id state name data`, in TRA.JOB's order, each handed to `put` as it is
/// read: a claim with ROW keeps only a few of them, and gathering all first (an array of
/// every fact, then a filtered copy) cost more than reading them.
fn facts(
    get: &mut impl FnMut(&Lit) -> Option<Str>,
    deadline: Reply,
    due: Reply,
    mut put: impl FnMut(&'static str, Reply),
) {
    let backoff = get(&field::BACKOFF).and_then(|b| domain::backoff_decode(b.bytes())).map(|b| match b {
        Backoff::Fixed(ms) => format!("FIXED {ms}"),
        Backoff::Exp(ms) => format!("EXP {ms}"),
    });
    put("opts", text(get(&field::OPTS)));
    put("priority", int(get(&field::PRIORITY), Some(0)));
    put("attempts", int(get(&field::ATTEMPTS), Some(1)));
    put("backoff", backoff.map_or(Reply::Null, |b| Reply::bulk(b.as_bytes())));
    put("created", int(get(&field::CREATED), None));
    put("started", int(get(&field::STARTED), Some(0)));
    put("made", int(get(&field::MADE), Some(0)));
    put("stalls", int(get(&field::STALLS), Some(0)));
    put("claimed", int(get(&field::CLAIMED), None));
    put("deadline", deadline);
    put("due", due);
    put("expire", int(get(&field::EXPIRE), None));
    put("progress", text(get(&field::PROGRESS)));
    put("result", text(get(&field::RESULT)));
    put("error", text(get(&field::ERROR)));
    put("finished", int(get(&field::FINISHED), None));
    put("stack", text(get(&field::STACK)));
    put("alias", text(get(&field::ALIAS)));
    put("dedup", text(get(&field::DEDUP)));
    put("scheduler", text(get(&field::SCHEDULER)));
    put("iteration", int(get(&field::ITERATION), None));
    put("count", int(get(&field::ROUND), None));
}
