//! `TRA.DROP 1 <row key> <version>` — the coherence drop done natively: read the row,
//! compare, delete, in one step, with the verdict of the reference Lua script.
//!
//! The row gone → 0; a stored frame shorter than 14 bytes → deleted, 1; the incoming
//! version's payload (bytes `[3..14]`) strictly greater, byte-wise, than the frame's →
//! deleted, 1; otherwise 0 and the row stays. The version must be exactly 14 bytes
//! (`EMQARG`); a row that is not a string answers `WRONGTYPE`. The key is any key (a cache
//! row, not a queue key) and there is no fence: it is not an EMQ wire verb. Replicated as
//! its effect: a `DEL`, or nothing.

use crate::domain::{coherence, Stored};
use crate::errors::Refusal;
use crate::host::command::{val, Arg, Command, KeyRole, Keys, Slot, Spec, Ty};
use crate::host::{stored, ArgStr, Exec, Reply, Verb};
use crate::metrics;

pub const KEYS: Keys = Keys::of(&[Slot { role: KeyRole::Any, spec: Spec::Take }]);
pub const ARGS: &[Arg] = &[val("version", Ty::Str)];

/// The command, declared whole: registration, ACL, `COMMAND DOCS` and the reference take it
/// from here.
pub const COMMAND: Command = Command::new::<CoherenceDrop>("TRA.DROP")
    .keys(KEYS)
    .args(ARGS)
    .plain()
    .writes()
    .fast()
    .summary("The coherence drop: delete a cache row when the incoming 14-byte version is newer than its stored frame's.")
    .complexity("O(1)");

pub struct CoherenceDrop;

impl Verb for CoherenceDrop {
    type Args<'a> = &'a [u8];

    fn shape<'a>(args: &[ArgStr<'a>]) -> Result<&'a [u8], Refusal> {
        match args {
            [version] => Ok(version.bytes()),
            _ => Err(Refusal::Usage),
        }
    }

    fn run<'a>(x: &mut Exec<'a>, version: &'a [u8]) -> Result<Reply, Refusal> {
        coherence::version(version)?;
        let row = x.write(KeyRole::Any)?;
        let drop = match stored(&row)? {
            Stored::Absent => false,
            Stored::Value(frame) => coherence::drops(frame, version),
            Stored::OtherType => return Err(Refusal::WrongType),
        };
        if drop {
            row.delete();
        }
        metrics::add(if drop { &metrics::DROPPED } else { &metrics::KEPT }, 1);
        Ok(Reply::Int(i64::from(drop)))
    }
}
