//! `TRA.SCHEDULERS 1 scheds GET id | LIST start stop [DESC] | COUNT` — a queue's job
//! schedulers, read-only, no fence. GET answers one scheduler as a map (RESP2: flat pairs), in
//! this order: `id every offset pattern tz start end limit immediately count next job name data
//! priority attempts backoff opts` (a fact not set is null; `count` the iterations made, the
//! pending one included; `next` its time; `job` its job's id), nil when there is no such
//! scheduler. LIST answers the schedulers of ranks start..=stop in order of their next time
//! (earliest first, DESC latest first; negative ranks count from the end, as ZRANGE's), at
//! most 1000 of them, each as GET shows it. COUNT answers how many there are. The scheduler
//! hashes are found, not declared: read as the caller.

use crate::domain::{self, Backoff};
use crate::errors::Refusal;
use crate::host::command::{block, flag, one_of, q, val, word, Arg, Command, Keys, Spec::*, Ty};
use crate::host::{Access, ArgStr, Exec, Key, Kind, Lit, Reply, Verb};
use crate::keyspace::Role::*;
use crate::queue::sched::sfield;
use crate::queue::view::{int, text};

pub const KEYS: Keys = Keys::of(&[q(Scheds, Read)]);
pub const ARGS: &[Arg] = &[one_of(
    "what",
    None,
    &[
        block("get", Some("GET"), &[val("id", Ty::Str)]),
        block(
            "list",
            Some("LIST"),
            &[
                val("start", Ty::Int).range(domain::sched::LIST_START),
                val("stop", Ty::Int).range(domain::sched::LIST_STOP),
                flag("desc", "DESC"),
            ],
        ),
        word("COUNT"),
    ],
)];

/// The command, declared whole: registration, ACL, `COMMAND DOCS` and the reference take it
/// from here.
pub const COMMAND: Command = Command::new::<Schedulers>("TRA.SCHEDULERS")
    .keys(KEYS)
    .args(ARGS)
    .summary("A queue's job schedulers: one by id, a page by next time, or their count.")
    .complexity("O(log N + n) for n schedulers answered");

/// Schedulers one LIST answers at most.
pub const LIST_MAX: i64 = 1000;

pub struct Schedulers;

pub enum Args<'a> {
    Get(ArgStr<'a>),
    List { start: i64, stop: i64, desc: bool },
    Count,
}

impl Verb for Schedulers {
    type Args<'a> = Args<'a>;

    fn shape<'a>(args: &[ArgStr<'a>]) -> Result<Args<'a>, Refusal> {
        match args {
            [w, id] if w.eq_ignore_ascii_case(b"GET") => Ok(Args::Get(*id)),
            [w] if w.eq_ignore_ascii_case(b"COUNT") => Ok(Args::Count),
            [w, start, stop, rest @ ..] if w.eq_ignore_ascii_case(b"LIST") => {
                let desc = match rest {
                    [] => false,
                    [d] if d.eq_ignore_ascii_case(b"DESC") => true,
                    _ => return Err(Refusal::Usage),
                };
                let start = domain::args::number(start, "start")?;
                let stop = domain::args::number(stop, "stop")?;
                Ok(Args::List { start, stop, desc })
            }
            _ => Err(Refusal::Usage),
        }
    }

    fn run<'a>(x: &mut Exec<'a>, a: Args<'a>) -> Result<Reply, Refusal> {
        let scheds = x.read(Scheds)?;
        scheds.exists_as(Kind::ZSet)?;
        match a {
            Args::Count => Ok(Reply::Int(i64::try_from(scheds.len()).unwrap_or(i64::MAX))),
            Args::Get(id) => {
                domain::sched::scheduler_id(&id)?;
                let sid = x.string(&id)?;
                if scheds.zscore(sid.str_ref()).is_none() {
                    return Ok(Reply::Null);
                }
                view(x, &id)
            }
            Args::List { start, stop, desc } => {
                let len = i64::try_from(scheds.len()).unwrap_or(i64::MAX);
                // As ZRANGE: a negative rank counts from the end; a start before the first is
                // the first, a stop before the first leaves nothing.
                let from_end = |i: i64| if i < 0 { len.saturating_add(i) } else { i };
                let (start, stop) = (from_end(start).max(0), from_end(stop).min(len.saturating_sub(1)));
                if len == 0 || start > stop {
                    return Ok(Reply::Array(Vec::new()));
                }
                let stop = stop.min(start.saturating_add(LIST_MAX - 1));
                let ids = scheds.range_read(c"ZRANGE", start, stop, desc.then_some(c"REV"))?;
                let mut out = Vec::with_capacity(ids.len());
                for id in ids {
                    out.push(view(x, &id)?);
                }
                Ok(Reply::Array(out))
            }
        }
    }
}

/// One scheduler as GET shows it; nil without its hash.
fn view(x: &mut Exec, id: &[u8]) -> Result<Reply, Refusal> {
    let h = x.open_undeclared(Sched, id, Access::Read)?;
    if !h.exists_as(Kind::Hash)? {
        return Ok(Reply::Null);
    }
    Ok(map(id, &h))
}

fn map(id: &[u8], h: &Key) -> Reply {
    let get = |f: &Lit| h.hget(f);
    let every = get(&sfield::EVERY).is_some();
    let backoff = get(&sfield::BACKOFF).and_then(|b| domain::backoff_decode(b.bytes())).map(|b| match b {
        Backoff::Fixed(ms) => format!("FIXED {ms}"),
        Backoff::Exp(ms) => format!("EXP {ms}"),
    });
    Reply::Map(vec![
        ("id", Reply::bulk(id)),
        ("every", int(get(&sfield::EVERY), None)),
        ("offset", if every { int(get(&sfield::OFFSET), Some(0)) } else { Reply::Null }),
        ("pattern", text(get(&sfield::PATTERN))),
        ("tz", text(get(&sfield::TZ))),
        ("start", int(get(&sfield::START), None)),
        ("end", int(get(&sfield::END), None)),
        ("limit", int(get(&sfield::LIMIT), None)),
        ("immediately", Reply::Int(i64::from(get(&sfield::IMMEDIATELY).is_some()))),
        ("count", int(get(&sfield::COUNT), Some(0))),
        ("next", int(get(&sfield::NEXT), None)),
        ("job", text(get(&sfield::JOB))),
        ("name", text(get(&sfield::NAME))),
        ("data", text(get(&sfield::DATA))),
        ("priority", int(get(&sfield::PRIORITY), Some(0))),
        ("attempts", int(get(&sfield::ATTEMPTS), Some(1))),
        ("backoff", backoff.map_or(Reply::Null, |b| Reply::bulk(b.as_bytes()))),
        ("opts", text(get(&sfield::OPTS))),
    ])
}
