//! `TRA.CAPABILITIES`: the facts of this build, as eight pairs in a fixed order.

use crate::about::{MODULE_NAME, MODULE_VERSION};
use crate::errors::Refusal;
use crate::host::command::{Arg, Command, Keys};
use crate::host::{ArgStr, Exec, Reply, Verb};

pub const KEYS: Keys = Keys::of(&[]);
pub const ARGS: &[Arg] = &[];

/// The release stage of this build: `beta` — all seventeen wire tokens served, tested
/// against a model and benchmarked, not yet proven in production (then `ga`).
pub const STAGE: &str = "beta";
/// The version of this reply's shape.
pub const API_VERSION: i64 = 1;

/// The command, declared whole: registration, ACL, `COMMAND DOCS` and the reference take it
/// from here.
pub const COMMAND: Command = Command::new::<Capabilities>("TRA.CAPABILITIES")
    .bare()
    .keys(KEYS)
    .args(ARGS)
    .plain()
    .fast()
    .anytime()
    .summary("The facts of this build as eight pairs.")
    .complexity("O(1)");

pub struct Capabilities;

impl Verb for Capabilities {
    type Args<'a> = ();

    fn shape(args: &[ArgStr]) -> Result<(), Refusal> {
        super::no_arguments(args)
    }

    fn run(_: &mut Exec<'_>, _: ()) -> Result<Reply, Refusal> {
        Ok(Reply::Map(vec![
            ("module", Reply::bulk(MODULE_NAME.as_bytes())),
            ("version", Reply::bulk(MODULE_VERSION.as_bytes())),
            ("stage", Reply::bulk(STAGE.as_bytes())),
            ("api_version", Reply::Int(API_VERSION)),
            ("bitmap_commands", Reply::Int(super::bitmap())),
            // No API exported to other modules, no Lua inside: every transition is native.
            ("shared_api", Reply::Int(0)),
            ("bundled_lua", Reply::Int(0)),
            ("lua_scripts", Reply::Int(0)),
        ]))
    }
}
