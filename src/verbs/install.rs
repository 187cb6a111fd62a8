//! `EMQ.INSTALL 1 {emq}:version`: write the module's identity once, administratively. The
//! caller cannot name a value: the constant or nothing.

use crate::domain;
use crate::errors::Refusal;
use crate::host::{stored, Exec, Reply, Verb};
use crate::keyspace;

pub struct Install;

impl Verb for Install {
    type Args<'a> = ();

    fn shape(args: &[&[u8]]) -> Result<(), Refusal> {
        super::version::no_arguments("EMQ.INSTALL", args)
    }

    fn run(x: &mut Exec<'_>, _: ()) -> Result<Reply, Refusal> {
        x.standalone()?;
        // Declared key: the server already checked the caller's permission on it.
        let key = x.open(0, true);
        match domain::install(stored(&key)?)? {
            domain::Install::Write => {
                key.set_string(keyspace::EPOCH)?;
                Ok(Reply::Int(1))
            }
            domain::Install::Equal => Ok(Reply::Int(0)),
        }
    }
}
