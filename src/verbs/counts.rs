//! `TRA.COUNTS 7 wait prio active delayed completed failed meta` — a queue's depth in one
//! call: a map (RESP2: flat pairs) `wait prio active delayed completed failed paused`, the
//! six set sizes and `paused` 0 or 1. Read-only, no fence: a dashboard may read a queue of any
//! node. A key of the wrong type answers `WRONGTYPE`.

use crate::errors::Refusal;
use crate::host::command::{q, Arg, Command, Keys, Spec::*};
use crate::host::{ArgStr, Exec, Kind, Reply, Verb};
use crate::keyspace::Role::{self, *};
use crate::queue::meta;

pub const KEYS: Keys = Keys::of(&[
    q(Wait, Read),
    q(Prio, Read),
    q(Active, Read),
    q(Delayed, Read),
    q(Completed, Read),
    q(Failed, Read),
    q(Meta, Read),
]);
pub const ARGS: &[Arg] = &[];

/// The command, declared whole: registration, ACL, `COMMAND DOCS` and the reference take it
/// from here.
pub const COMMAND: Command = Command::new::<Counts>("TRA.COUNTS")
    .keys(KEYS)
    .args(ARGS)
    .fast()
    .summary("A queue's depth: the size of each state set and whether it is paused.")
    .complexity("O(1)");

pub struct Counts;

impl Verb for Counts {
    type Args<'a> = ();

    fn shape(args: &[ArgStr]) -> Result<(), Refusal> {
        super::no_arguments(args)
    }

    fn run(x: &mut Exec<'_>, _: ()) -> Result<Reply, Refusal> {
        let len = |role: Role, kind: Kind| -> Result<i64, Refusal> {
            let k = x.read(role)?;
            k.exists_as(kind)?;
            Ok(i64::try_from(k.len()).unwrap_or(i64::MAX))
        };
        let mut out = vec![("wait", Reply::Int(len(Wait, Kind::List)?))];
        for (name, role) in [
            ("prio", Prio),
            ("active", Active),
            ("delayed", Delayed),
            ("completed", Completed),
            ("failed", Failed),
        ] {
            out.push((name, Reply::Int(len(role, Kind::ZSet)?)));
        }
        let meta = x.read(Meta)?;
        meta.exists_as(Kind::Hash)?;
        out.push(("paused", Reply::Int(i64::from(meta.hget(&meta::PAUSED).is_some()))));
        Ok(Reply::Map(out))
    }
}
