//! `EMQ.INSTALL 1 {emq}:version`: write the module's identity once, administratively. The
//! caller cannot name a value: the constant or nothing.

use crate::domain;
use crate::errors::Refusal;
use crate::host::command::{Arg, Command, KeyRole, Keys, Slot, Spec};
use crate::host::{stored, ArgStr, Exec, Reply, Verb};
use crate::keyspace;

pub const KEYS: Keys = Keys::of(&[Slot { role: KeyRole::Version, spec: Spec::Update }]);
pub const ARGS: &[Arg] = &[];

/// The command, declared whole: registration, ACL, `COMMAND DOCS` and the reference take it
/// from here.
pub const COMMAND: Command = Command::new::<Install>("EMQ.INSTALL")
    .keys(KEYS)
    .args(ARGS)
    .admin()
    .creates()
    .summary("Write the module's wire identity into {emq}:version, once.")
    .complexity("O(1)");

pub struct Install;

impl Verb for Install {
    type Args<'a> = ();

    fn shape(args: &[ArgStr]) -> Result<(), Refusal> {
        super::no_arguments(args)
    }

    fn run(x: &mut Exec<'_>, _: ()) -> Result<Reply, Refusal> {
        x.standalone()?;
        // Declared key: the server already checked the caller's permission on it.
        let key = x.write(KeyRole::Version)?;
        match domain::install(stored(&key)?)? {
            domain::Install::Write => {
                key.set_string(keyspace::EPOCH)?;
                Ok(Reply::Int(1))
            }
            domain::Install::Equal => Ok(Reply::Int(0)),
        }
    }
}
