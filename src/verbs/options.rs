//! The arguments several commands share, declared once: each command's file lists them in its
//! `ARGS` beside its own, so a shared option reads, ranges and documents alike everywhere.

use crate::domain::{self, args::options, args::Opt, args::Options};
use crate::errors::Refusal;
use crate::host::command::{block, flag, one_of, opt, val, word, Arg, Ty};
use crate::host::ArgStr;

/// The creation options ENQUEUE and SCHEDULE share.
pub const PRIORITY: Arg = opt("priority", "PRIORITY", "p", Ty::Int).range(domain::PRIORITY);
pub const ATTEMPTS: Arg = opt("attempts", "ATTEMPTS", "n", Ty::Int).range(domain::ATTEMPTS);
pub const BACKOFF: Arg = block(
    "backoff",
    Some("BACKOFF"),
    &[one_of("kind", None, &[word("FIXED"), word("EXP")]), val("ms", Ty::Int).range(domain::BACKOFF)],
)
.optional();
pub const OPTS: Arg = opt("opts", "OPTS", "blob", Ty::Str).payload();
/// A job no CLAIM has taken by `when` (`ms`, or `+ms` from now) fails with `expired`.
pub const EXPIRE: Arg = opt("expire", "EXPIRE", "when", Ty::Str).range(domain::EXPIRE);
/// The client's own id for the job, unique in the queue while the job exists.
pub const ALIAS: Arg = opt("alias", "ALIAS", "key", Ty::Str);
/// Deduplication: the id, its TTL (a duplicate restarting it) or a duplicate kept while the
/// holder is active, a duplicate replacing a delayed holder. Shown nested as the rules of
/// `queue::dedup::shape` have it; parsed as options, in any order.
pub const DEDUP: Arg = block(
    "dedup",
    Some("DEDUP"),
    &[
        val("id", Ty::Str),
        one_of(
            "lifetime",
            None,
            &[
                block(
                    "dedupttl",
                    Some("DEDUPTTL"),
                    &[val("ms", Ty::Int).range(domain::DEDUP_TTL), flag("extend", "EXTEND")],
                ),
                word("KEEPLAST"),
            ],
        )
        .optional(),
        flag("replace", "REPLACE"),
    ],
)
.optional();

/// KEEP and AGE, the retention options COMPLETE and FAIL share.
pub const KEEP: Arg = opt("keep", "KEEP", "n", Ty::Int).range(domain::KEEP);
pub const AGE: Arg = opt("age", "AGE", "ms", Ty::Int).range(domain::AGE);
/// ECHO: the event carries the value (a finish's result, a progress report).
pub const ECHO: Arg = flag("echo", "ECHO");
/// METRICS: the finish counts its job by the minute (COMPLETE, TRA.COMPLETENEXT, FAIL).
pub const METRICS: Arg = opt("metrics", "METRICS", "max", Ty::Int).range(domain::tally::METRICS);
/// `BY worker`, on every verb that claims: the name each row it takes records.
pub const BY: Arg = opt("by", "BY", "worker", Ty::Str);

/// KEEP of a job's log: how many of its newest lines it keeps.
pub const LOG_KEEP: Arg = opt("keep", "KEEP", "n", Ty::Int).range(domain::LOG_KEEP);

/// Splits `name data [options]`, the form ENQUEUE and SCHEDULE share.
pub fn job_args<'a>(
    args: &[ArgStr<'a>],
    allowed: &[Opt],
) -> Result<(ArgStr<'a>, ArgStr<'a>, Options<ArgStr<'a>>), Refusal> {
    match args {
        [name, data, rest @ ..] => {
            let o = options(rest, allowed)?;
            crate::queue::dedup::shape(&o)?;
            Ok((*name, *data, o))
        }
        _ => Err(Refusal::Usage),
    }
}
