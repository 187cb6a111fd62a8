//! `TRA.DEDUP 1 dedup` — the job that holds a deduplication id (`DEDUP id` on a producer):
//! its id, or nil when the id is not live. The key is `emq:{Q}:dedup:<id>`, a string. Read-
//! only, no fence.

use crate::errors::Refusal;
use crate::host::command::{q, Arg, Command, Keys, Spec::*};
use crate::host::{ArgStr, Exec, Kind, Reply, Verb};
use crate::keyspace::Role::*;

pub const KEYS: Keys = Keys::of(&[q(Dedup, Read)]);
pub const ARGS: &[Arg] = &[];

/// The command, declared whole: registration, ACL, `COMMAND DOCS` and the reference take it
/// from here.
pub const COMMAND: Command = Command::new::<ReadDedup>("TRA.DEDUP")
    .keys(KEYS)
    .args(ARGS)
    .fast()
    .summary("The id of the job that holds a deduplication id; nil when the id is not live.")
    .complexity("O(1)");

pub struct ReadDedup;

impl Verb for ReadDedup {
    type Args<'a> = ();

    fn shape(args: &[ArgStr]) -> Result<(), Refusal> {
        super::no_arguments(args)
    }

    fn run(x: &mut Exec<'_>, _: ()) -> Result<Reply, Refusal> {
        crate::queue::dedup::check_id(x.id)?;
        let key = x.read(Dedup)?;
        if !key.exists_as(Kind::String)? {
            return Ok(Reply::Null);
        }
        Ok(key.string().map_or(Reply::Null, Reply::bulk))
    }
}
