//! A job as the module shows it: TRA.JOB's map of its row, and the part of it `CLAIM … ROW`
//! hands a worker with each job.

use crate::domain::{self, Backoff};
use crate::host::{Key, Lit, Reply, Str};

use super::field;

/// A stored string as a reply: nil when absent.
pub fn text(s: Option<Str>) -> Reply {
    s.map_or(Reply::Null, Reply::Str)
}

/// A stored integer as a reply: `default` (or nil) when absent or not an integer.
pub fn int(s: Option<Str>, default: Option<i64>) -> Reply {
    match s.and_then(|s| domain::args::int(s.bytes())).or(default) {
        Some(v) => Reply::Int(v),
        None => Reply::Null,
    }
}

/// A job's row as TRA.JOB shows it, its state, lease deadline and due time given by the
/// caller (TRA.JOB reads them).
pub fn view(id: &[u8], row: &Key, state: Reply, deadline: Reply, due: Reply) -> Reply {
    let mut fields = Fields::read(row);
    let mut pairs = Vec::with_capacity(FACTS.len().saturating_add(4));
    pairs.extend([
        ("id", Reply::bulk(id)),
        ("state", state),
        ("name", text(fields.take(&field::NAME))),
        ("data", text(fields.take(&field::DATA))),
    ]);
    let (mut deadline, mut due) = (Some(deadline), Some(due));
    for fact in FACTS.iter() {
        let v = match fact.show {
            Show::Deadline => deadline.take().unwrap_or(Reply::Null),
            Show::Due => due.take().unwrap_or(Reply::Null),
            _ => fact.field.map_or(Reply::Null, |f| fact.show.of(fields.take(f))),
        };
        pairs.push((fact.name, v));
    }
    Reply::Map(pairs)
}

/// A claimed job's row as `CLAIM … ROW` hands it out: TRA.JOB's map after the claim, without
/// what the worker has already — the entry's id, name and data, the state (`active`, as every
/// claimed job) — and without the facts that are null or at their defaults (priority 0,
/// attempts 1, made 0, stalls 0), so the reply grows only by what the worker did not have.
/// `fields` is the row as read before the claim wrote it (name and data taken out); the
/// claim's own writes are given (`worker`: its BY, when it named one). Only the fields the row holds are looked at (a fresh job's
/// row has two more), not every fact.
pub fn claimed_view(
    fields: &mut Fields,
    started: i64,
    claimed: i64,
    expire_spent: bool,
    deadline: i64,
    worker: Option<&Str>,
) -> Reply {
    fields.take(&field::STARTED);
    fields.take(&field::CLAIMED);
    if expire_spent {
        fields.take(&field::EXPIRE);
    }
    let worker = worker.map(|w| {
        fields.take(&field::WORKER);
        (WORKER_AT, w.share().map_or_else(|| Reply::bulk(w.bytes()), Reply::Str))
    });
    let mut shown: smallvec::SmallVec<[(usize, Reply); 8]> = smallvec::SmallVec::new();
    shown.extend([
        (STARTED_AT, Reply::Int(started)),
        (CLAIMED_AT, Reply::Int(claimed)),
        (DEADLINE_AT, Reply::Int(deadline)),
    ]);
    shown.extend(worker);
    for (lit, value) in fields.0.drain(..) {
        let Some((at, fact)) =
            FACTS.iter().enumerate().find(|(_, f)| f.field.is_some_and(|f| std::ptr::eq(f, lit)))
        else {
            continue;
        };
        let v = fact.show.of(Some(value));
        if !fact.show.is_default(&v) {
            shown.push((at, v));
        }
    }
    shown.sort_unstable_by_key(|(at, _)| *at);
    Reply::Map(shown.into_iter().filter_map(|(at, v)| Some((FACTS.get(at)?.name, v))).collect())
}

/// A row read in one pass (a map shows nearly every field; a lookup each walked the row once
/// per field): each field's value is handed out once. A field is named by its static `Lit`,
/// found by address (each static has its own).
pub struct Fields(smallvec::SmallVec<[(&'static Lit, Str); 26]>);

impl Fields {
    pub fn read(row: &Key) -> Fields {
        let mut fields = smallvec::SmallVec::new();
        row.hscan(|name, value| {
            if let Some(f) = field::ALL.iter().find(|f| same(f.bytes(), name)) {
                fields.push((*f, value));
            }
        });
        Fields(fields)
    }

    pub fn take(&mut self, f: &Lit) -> Option<Str> {
        let at = self.0.iter().position(|(lit, _)| std::ptr::eq(*lit, f))?;
        Some(self.0.swap_remove(at).1)
    }

    pub fn peek(&self, f: &Lit) -> Option<&Str> {
        self.0.iter().find(|(lit, _)| std::ptr::eq(*lit, f)).map(|(_, v)| v)
    }
}

/// Field names are one or two bytes: compared in line, where a call to compare memory cost
/// more than the comparison.
#[inline(always)]
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

/// How a fact shows its field's value.
#[derive(Clone, Copy)]
enum Show {
    Text,
    /// An integer, with the value it has when the field is absent.
    Int(Option<i64>),
    /// `FIXED <ms>` or `EXP <ms>`.
    Backoff,
    /// Not a field: the job's score in `active`.
    Deadline,
    /// Not a field: the job's score in `delayed`.
    Due,
}

impl Show {
    fn of(self, s: Option<Str>) -> Reply {
        match self {
            Show::Text => text(s),
            Show::Int(default) => int(s, default),
            Show::Backoff => s.and_then(|b| domain::backoff_decode(b.bytes())).map_or(Reply::Null, |b| {
                Reply::bulk(
                    match b {
                        Backoff::Fixed(ms) => format!("FIXED {ms}"),
                        Backoff::Exp(ms) => format!("EXP {ms}"),
                    }
                    .as_bytes(),
                )
            }),
            Show::Deadline | Show::Due => Reply::Null,
        }
    }

    /// Null, or the integer the field has when absent: what `CLAIM … ROW` leaves out.
    fn is_default(self, v: &Reply) -> bool {
        match (self, v) {
            (_, Reply::Null) => true,
            (Show::Int(Some(d)), Reply::Int(v)) => d == *v,
            _ => false,
        }
    }
}

/// One fact of the map after `id state name data`.
struct Fact {
    name: &'static str,
    field: Option<&'static Lit>,
    show: Show,
}

const fn fact(name: &'static str, field: &'static Lit, show: Show) -> Fact {
    Fact { name, field: Some(field), show }
}

/// The facts after `id state name data`, in TRA.JOB's order.
static FACTS: [Fact; 23] = [
    fact("opts", &field::OPTS, Show::Text),
    fact("priority", &field::PRIORITY, Show::Int(Some(0))),
    fact("attempts", &field::ATTEMPTS, Show::Int(Some(1))),
    fact("backoff", &field::BACKOFF, Show::Backoff),
    fact("created", &field::CREATED, Show::Int(None)),
    fact("started", &field::STARTED, Show::Int(Some(0))),
    fact("made", &field::MADE, Show::Int(Some(0))),
    fact("stalls", &field::STALLS, Show::Int(Some(0))),
    fact("claimed", &field::CLAIMED, Show::Int(None)),
    Fact { name: "deadline", field: None, show: Show::Deadline },
    Fact { name: "due", field: None, show: Show::Due },
    fact("expire", &field::EXPIRE, Show::Int(None)),
    fact("progress", &field::PROGRESS, Show::Text),
    fact("result", &field::RESULT, Show::Text),
    fact("error", &field::ERROR, Show::Text),
    fact("finished", &field::FINISHED, Show::Int(None)),
    fact("stack", &field::STACK, Show::Text),
    fact("alias", &field::ALIAS, Show::Text),
    fact("dedup", &field::DEDUP, Show::Text),
    fact("scheduler", &field::SCHEDULER, Show::Text),
    fact("iteration", &field::ITERATION, Show::Int(None)),
    fact("count", &field::ROUND, Show::Int(None)),
    fact("worker", &field::WORKER, Show::Text),
];

/// Where `CLAIM … ROW`'s given facts stand in `FACTS`.
const STARTED_AT: usize = 5;
const CLAIMED_AT: usize = 8;
const DEADLINE_AT: usize = 9;
const WORKER_AT: usize = 22;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_given_facts_stand_where_their_names_are() {
        let at = |name: &str| FACTS.iter().position(|f| f.name == name);
        assert_eq!(at("started"), Some(STARTED_AT));
        assert_eq!(at("claimed"), Some(CLAIMED_AT));
        assert_eq!(at("deadline"), Some(DEADLINE_AT));
        assert_eq!(at("worker"), Some(WORKER_AT));
    }

    #[test]
    fn a_fact_is_left_out_at_its_default_or_null_only() {
        assert!(Show::Int(Some(1)).is_default(&Reply::Int(1)));
        assert!(!Show::Int(Some(1)).is_default(&Reply::Int(2)));
        assert!(!Show::Int(None).is_default(&Reply::Int(0)));
        assert!(Show::Text.is_default(&Reply::Null));
        assert!(!Show::Backoff.is_default(&Reply::bulk(b"FIXED 5")));
    }
}
