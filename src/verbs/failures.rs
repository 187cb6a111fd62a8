//! `EMQ.FAILURES 1 fails:<ID> [TTL ms]`
//!
//! Counts one more failure of bus message `<ID>` (a branded id, gated like APPEND's) and
//! sets the counter's time to live to TTL ms from now (default 24 h), so a counter vanishes
//! a TTL after its last failure. TTL is 1 ms or more and must end within the time range
//! (now + TTL <= 2^53-1 ms); a TTL that does not parse is a shape error. A `fails:` key
//! holding anything but a count (another type, or a string that is not a decimal count)
//! answers `WRONGTYPE`. Replicated as `SET key <count>` and `PEXPIREAT key <absolute ms>`.
//! Replies the count.

use crate::domain::{self, args::Opt, bus, Stored};
use crate::errors::Refusal;
use crate::host::command::{opt, q, Arg, Command, Keys, Spec::*, Ty};
use crate::host::{stored, ArgStr, Exec, Reply, Verb};
use crate::keyspace::Role::*;

pub const KEYS: Keys = Keys::of(&[q(Fails, Update)]);
pub const ARGS: &[Arg] = &[opt("ttl", "TTL", "ms", Ty::Int).range(domain::bus::TTL)];

/// The command, declared whole: registration, ACL, `COMMAND DOCS` and the reference take it
/// from here.
pub const COMMAND: Command = Command::new::<Failures>("EMQ.FAILURES")
    .tokens(&["failures.incr"])
    .keys(KEYS)
    .args(ARGS)
    .creates()
    .fast()
    .summary("Count one more failure of a bus message and set its counter's TTL (default 24 h).")
    .complexity("O(1)");

pub struct Failures;

impl Verb for Failures {
    type Args<'a> = Option<i64>;

    fn shape(args: &[ArgStr]) -> Result<Option<i64>, Refusal> {
        Ok(domain::args::options(args, &[Opt::Ttl])?.ttl)
    }

    fn run(x: &mut Exec<'_>, ttl: Option<i64>) -> Result<Reply, Refusal> {
        domain::message_id(x.id)?;
        let at = bus::expiry(x.now(), ttl)?;
        let counter = x.write(Fails)?;
        let count = match stored(&counter)? {
            Stored::Absent => bus::next_count(None),
            Stored::Value(v) => bus::next_count(Some(v)),
            Stored::OtherType => None,
        }
        .ok_or(Refusal::WrongType)?;
        counter.set_string(count.to_string().as_bytes())?;
        counter.set_abs_expire(at)?;
        Ok(Reply::Int(count))
    }
}
