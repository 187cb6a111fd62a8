//! `TRA.LIMITS 2 meta active` — a queue's limits and where they stand now: a map (RESP2: flat
//! pairs) `rate-max rate-ms concurrency count window hold ttl active`. `rate-max`, `rate-ms`
//! and `concurrency` are the settings (nil when not set); `count` the jobs claimed in the
//! current rate window (0 when none is open); `window` the ms until that window ends and
//! `hold` the ms until a TRA.LIMIT FOR ends (each -2 when there is none, as PTTL answers a
//! missing key); `ttl` the ms until a claim may take a job again by the rate limit or a FOR
//! (0: it may now; concurrency is not a matter of time); `active` the jobs active now.
//! Read-only, no fence. A key of the wrong type answers `WRONGTYPE`.

use crate::errors::Refusal;
use crate::host::command::{q, Arg, Command, Keys, Spec::*};
use crate::host::{ArgStr, Exec, Kind, Reply, Verb};
use crate::keyspace::Role::*;
use crate::queue::limit;

pub const KEYS: Keys = Keys::of(&[q(Meta, Read), q(Active, Read)]);
pub const ARGS: &[Arg] = &[];

pub const COMMAND: Command = Command::new::<Limits>("TRA.LIMITS")
    .keys(KEYS)
    .args(ARGS)
    .fast()
    .summary(
        "A queue's rate limit and global concurrency, its current window and the time until it may claim.",
    )
    .complexity("O(1)");

pub struct Limits;

impl Verb for Limits {
    type Args<'a> = ();

    fn shape(args: &[ArgStr]) -> Result<(), Refusal> {
        super::no_arguments(args)
    }

    fn run(x: &mut Exec<'_>, _: ()) -> Result<Reply, Refusal> {
        let meta = x.read(Meta)?;
        meta.exists_as(Kind::Hash)?;
        let active = x.read(Active)?;
        active.exists_as(Kind::ZSet)?;
        let (_, l) = limit::read(&meta);
        let now = x.now();
        let opt = |v: Option<i64>| v.map_or(Reply::Null, Reply::Int);
        let left = |t: i64| crate::domain::limit::left(t, now);
        let window = l.window(now);
        Ok(Reply::Map(vec![
            ("rate-max", opt(l.rate.map(|r| r.0))),
            ("rate-ms", opt(l.rate.map(|r| r.1))),
            ("concurrency", opt(l.concurrency)),
            ("count", Reply::Int(window.map_or(0, |w| w.0))),
            ("window", Reply::Int(window.map_or(-2, |w| left(w.1)))),
            ("hold", Reply::Int(left(l.hold))),
            ("ttl", Reply::Int(l.ttl(now))),
            ("active", Reply::Int(i64::try_from(active.len()).unwrap_or(i64::MAX))),
        ]))
    }
}
