//! `EMQ.EXTENDS 1 active lease_ms id token [id token ...]` — EXTEND for many held jobs in
//! one call (a worker renewing all its leases). Each entry answers its new deadline, or 0
//! when that job is not held with that token. Rows are opened as the caller (read).

use crate::domain;
use crate::errors::Refusal;
use crate::host::command::{block, q, val, Arg, Command, Keys, Spec::*, Ty};
use crate::host::{Access, ArgStr, Exec, Kind, Reply, Verb};
use crate::keyspace::Role::{self, *};
use crate::queue::Row;

pub const KEYS: Keys = Keys::of(&[q(Active, Update)]);
pub const ARGS: &[Arg] = &[
    val("lease_ms", Ty::Int).range(domain::LEASE),
    block("job", None, &[val("id", Ty::Str), val("token", Ty::Str)]).multiple(),
];

/// The command, declared whole: registration, ACL, `COMMAND DOCS` and the reference take it
/// from here.
pub const COMMAND: Command = Command::new::<Extends>("EMQ.EXTENDS")
    .holder()
    .tokens(&["extends"])
    .keys(KEYS)
    .args(ARGS)
    .writes()
    .summary("EXTEND many held jobs at once; 0 for each job not held with its token.")
    .complexity("O(n log N) for n pairs");

pub struct Extends;

pub struct Args<'a> {
    lease: i64,
    pairs: Vec<(ArgStr<'a>, ArgStr<'a>)>,
}

impl Verb for Extends {
    type Args<'a> = Args<'a>;

    fn shape<'a>(args: &[ArgStr<'a>]) -> Result<Args<'a>, Refusal> {
        match args {
            [lease, rest @ ..] if !rest.is_empty() && rest.len() % 2 == 0 => Ok(Args {
                lease: domain::args::number(lease, "lease_ms")?,
                pairs: rest.chunks_exact(2).filter_map(|p| Some((*p.first()?, *p.get(1)?))).collect(),
            }),
            _ => Err(Refusal::Usage),
        }
    }

    fn run<'a>(x: &mut Exec<'a>, a: Args<'a>) -> Result<Reply, Refusal> {
        for (id, _) in &a.pairs {
            domain::job_id(id)?;
        }
        let ms = domain::LEASE.check(a.lease)?;
        if a.pairs.len() > domain::EXTENDS_PAIRS_MAX {
            return Err(Refusal::Arg(format!("at most {} pairs", domain::EXTENDS_PAIRS_MAX)));
        }
        for (_, token) in &a.pairs {
            domain::token(token)?;
        }
        let active = x.open_as(Active, Kind::ZSet)?;
        let mut rows = Vec::with_capacity(a.pairs.len());
        for (id, _) in &a.pairs {
            let row = x.open_undeclared(Role::Job, id, Access::Read)?;
            row.exists_as(Kind::Hash)?;
            rows.push(row);
        }
        let deadline = domain::deadline(x.now(), ms);
        let mut out = Vec::with_capacity(rows.len());
        let mut renewed = false;
        for (row, (id, token)) in rows.iter().zip(&a.pairs) {
            // Held: the row carries the token and the job is in active (ZADD XX moves only
            // a member that is there).
            if Row(row).held_by(token) && active.zadd_existing(deadline, id.str_ref())? {
                out.push(Reply::Int(deadline));
                renewed = true;
            } else {
                out.push(Reply::Int(0));
            }
        }
        // A shorter lease runs out before the one upkeep knows of.
        if renewed {
            crate::queue::due_at(x, deadline);
        }
        Ok(Reply::Array(out))
    }
}
