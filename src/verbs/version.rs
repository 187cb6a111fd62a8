//! `EMQ.VERSION`: which build serves the node. Read-only, reads no key, runs no fence.

use crate::about::{MODULE_MAJOR, MODULE_NAME, MODULE_VERSION};
use crate::errors::Refusal;
use crate::host::command::{Arg, Command, Keys};
use crate::host::{ArgStr, Exec, Reply, Verb};
use crate::keyspace;

pub const KEYS: Keys = Keys::of(&[]);
pub const ARGS: &[Arg] = &[];

/// Set by the builder (`TRAFIKEY_BUILD=… cargo build`); reported, never compared.
pub const BUILD: Option<&str> = option_env!("TRAFIKEY_BUILD");

/// The command, declared whole: registration, ACL, `COMMAND DOCS` and the reference take it
/// from here.
pub const COMMAND: Command = Command::new::<Version>("EMQ.VERSION")
    .bare()
    .keys(KEYS)
    .args(ARGS)
    .fast()
    .anytime()
    .summary("The module's identity: wire, module, version, major, build, capabilities.")
    .complexity("O(1)");

pub struct Version;

impl Verb for Version {
    type Args<'a> = ();

    fn shape(args: &[ArgStr]) -> Result<(), Refusal> {
        super::no_arguments(args)
    }

    fn run(_: &mut Exec<'_>, _: ()) -> Result<Reply, Refusal> {
        Ok(Reply::Map(vec![
            ("wire", Reply::bulk(keyspace::EPOCH)),
            ("module", Reply::bulk(MODULE_NAME.as_bytes())),
            ("module_version", Reply::bulk(MODULE_VERSION.as_bytes())),
            ("module_major", Reply::Int(i64::from(MODULE_MAJOR))),
            ("build", BUILD.map_or(Reply::Null, |b| Reply::bulk(b.as_bytes()))),
            (
                "capabilities",
                Reply::Array(super::capabilities().iter().map(|t| Reply::bulk(t.as_bytes())).collect()),
            ),
        ]))
    }
}
