//! `EMQ.VERSION`: which build serves the node. Read-only, reads no key, runs no fence.

use crate::errors::Refusal;
use crate::host::{Exec, Reply, Verb};
use crate::{keyspace, table, MODULE_MAJOR, MODULE_NAME, MODULE_VERSION};

/// Set by the builder (`TRAFIKEY_BUILD=… cargo build`); reported, never compared.
pub const BUILD: Option<&str> = option_env!("TRAFIKEY_BUILD");

pub struct Version;

impl Verb for Version {
    type Args<'a> = ();

    fn shape(args: &[&[u8]]) -> Result<(), Refusal> {
        no_arguments("EMQ.VERSION", args)
    }

    fn run(_: &mut Exec<'_>, _: ()) -> Result<Reply, Refusal> {
        Ok(Reply::Map(vec![
            ("wire", Reply::bulk(keyspace::EPOCH)),
            ("module", Reply::bulk(MODULE_NAME.as_bytes())),
            ("module_version", Reply::bulk(MODULE_VERSION.as_bytes())),
            ("module_major", Reply::Int(i64::from(MODULE_MAJOR))),
            ("build", BUILD.map_or(Reply::Null, |b| Reply::bulk(b.as_bytes()))),
            ("capabilities", Reply::Array(table::capabilities().iter().map(|t| Reply::bulk(t.as_bytes())).collect())),
        ]))
    }
}

pub fn no_arguments(name: &str, args: &[&[u8]]) -> Result<(), Refusal> {
    if args.is_empty() {
        Ok(())
    } else {
        Err(Refusal::Shape(format!("{name} takes no arguments")))
    }
}
