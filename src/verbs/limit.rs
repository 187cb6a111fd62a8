//! `TRA.LIMIT 1 meta RATE max ms | RATE OFF | CONCURRENCY n | CONCURRENCY OFF | FOR ms | CLEAR`
//! — a queue's limits, kept in its `meta` and obeyed by every claim (CLAIM, TRA.COMPLETENEXT):
//! `RATE`: at most `max` (1..=2^31-1) jobs claimed per window of `ms` (1..=2^31), a window
//! opening with the first claim after the last one ended; `CONCURRENCY`: at most `n`
//! (1..=2^31-1) jobs active at once; `OFF` removes the one named (RATE OFF also forgets the
//! window). `FOR ms` (1..=2^31): nothing is claimed until now+ms, whatever else is set (a
//! later FOR replaces it). `CLEAR`: the window and a FOR end now. Replies 1, or 0 when OFF or
//! CLEAR found nothing to remove. A change that may let claims proceed wakes the claimers
//! waiting with BLOCK. Fenced.

use crate::domain::{
    self,
    limit::{CONCURRENCY, FOR_MS, RATE_MAX, RATE_MS},
};
use crate::errors::Refusal;
use crate::host::command::{block, one_of, q, val, word, Arg, Command, Keys, Spec::*, Ty};
use crate::host::{ArgStr, Exec, Kind, Reply, Verb};
use crate::keyspace::Role::*;
use crate::queue::{limit, meta, Row};

pub const KEYS: Keys = Keys::of(&[q(Meta, Update)]);
pub const ARGS: &[Arg] = &[one_of(
    "limit",
    None,
    &[
        block(
            "rate",
            Some("RATE"),
            &[val("max", Ty::Int).range(RATE_MAX), val("ms", Ty::Int).range(RATE_MS)],
        ),
        block("rate-off", Some("RATE"), &[word("OFF")]),
        block("concurrency", Some("CONCURRENCY"), &[val("n", Ty::Int).range(CONCURRENCY)]),
        block("concurrency-off", Some("CONCURRENCY"), &[word("OFF")]),
        block("for", Some("FOR"), &[val("ms", Ty::Int).range(FOR_MS)]),
        word("CLEAR"),
    ],
)];

pub const COMMAND: Command = Command::new::<Limit>("TRA.LIMIT")
    .keys(KEYS)
    .args(ARGS)
    .writes()
    .fast()
    .summary("Set or remove a queue's rate limit or global concurrency; limit it for ms; end its window now.")
    .complexity("O(1)");

pub struct Limit;

pub enum Args {
    Rate(Option<(i64, i64)>),
    Concurrency(Option<i64>),
    For(i64),
    Clear,
}

impl Verb for Limit {
    type Args<'a> = Args;

    fn shape(args: &[ArgStr]) -> Result<Args, Refusal> {
        let is = |a: &ArgStr, w: &[u8]| a.eq_ignore_ascii_case(w);
        let n = |a: &ArgStr, what| domain::args::number(a, what);
        match args {
            [w, off] if is(w, b"RATE") && is(off, b"OFF") => Ok(Args::Rate(None)),
            [w, max, ms] if is(w, b"RATE") => Ok(Args::Rate(Some((n(max, "max")?, n(ms, "ms")?)))),
            [w, off] if is(w, b"CONCURRENCY") && is(off, b"OFF") => Ok(Args::Concurrency(None)),
            [w, c] if is(w, b"CONCURRENCY") => Ok(Args::Concurrency(Some(n(c, "n")?))),
            [w, ms] if is(w, b"FOR") => Ok(Args::For(n(ms, "ms")?)),
            [w] if is(w, b"CLEAR") => Ok(Args::Clear),
            _ => Err(Refusal::Usage),
        }
    }

    fn run(x: &mut Exec<'_>, a: Args) -> Result<Reply, Refusal> {
        // Ranges first: a refusal writes nothing.
        let a = match a {
            Args::Rate(Some((max, ms))) => Args::Rate(Some((RATE_MAX.check(max)?, RATE_MS.check(ms)?))),
            Args::Concurrency(Some(c)) => Args::Concurrency(Some(CONCURRENCY.check(c)?)),
            Args::For(ms) => Args::For(FOR_MS.check(ms)?),
            other => other,
        };
        let meta = x.open_as(Meta, Kind::Hash)?;
        let (_, now_limits) = limit::read(&meta);
        // The window a claim recorded, kept with the field `rate` while the rate stays.
        let window = (now_limits.until != 0).then_some((now_limits.count, now_limits.until));
        let changed = match a {
            Args::Rate(Some(rate)) => {
                let text = limit::rate_text(x, rate, window)?;
                meta.hset(&[(&meta::RATE, text.str_ref())])?;
                true
            }
            Args::Concurrency(Some(c)) => {
                let c = x.int(c)?;
                meta.hset(&[(&meta::CONCURRENCY, c.str_ref())])?;
                true
            }
            Args::For(ms) => {
                let until = x.int(x.now().saturating_add(ms))?;
                meta.hset(&[(&meta::HOLD_UNTIL, until.str_ref())])?;
                // Nothing more may be claimed: no waiter to wake.
                return Ok(Reply::Int(1));
            }
            Args::Rate(None) => {
                let had = Row(&meta).get(&meta::RATE).is_some();
                meta.hdel(&[&meta::RATE])?;
                had
            }
            Args::Concurrency(None) => {
                let had = Row(&meta).get(&meta::CONCURRENCY).is_some();
                meta.hdel(&[&meta::CONCURRENCY])?;
                had
            }
            Args::Clear => {
                let held = Row(&meta).get(&meta::HOLD_UNTIL).is_some();
                meta.hdel(&[&meta::HOLD_UNTIL])?;
                if let (Some(rate), Some(_)) = (now_limits.rate, window) {
                    let text = limit::rate_text(x, rate, None)?;
                    meta.hset(&[(&meta::RATE, text.str_ref())])?;
                }
                held || window.is_some()
            }
        };
        // Claims held back by the old limits may proceed.
        meta.signal_ready();
        Ok(Reply::Int(changed.into()))
    }
}
