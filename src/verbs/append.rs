//! `EMQ.APPEND 2 bus seen id payload [MAXLEN n]`
//!
//! Appends a bus message to its topic's stream once: an entry `id <ID> payload <bytes>` with
//! the id the server picks, the stream then capped with `MAXLEN ~ n` (default
//! `trafikey.bus-maxlen`). The message id (a branded id, any three ASCII letters) goes into
//! `seen` with its first-append time; an id already there less than `trafikey.bus-window-ms`
//! ago is a duplicate: the reply is nil and nothing is written (not even a trim). Each
//! new message also removes up to 100 `seen` entries older than the window.
//! The payload is 0..=`trafikey.max-payload` bytes (default 1 MiB); an empty payload is a
//! message too. MAXLEN is 1..=1000000000. Replies the stream entry id, or nil.

use crate::bus::{plan, Message};
pub use crate::bus::{ARGS, KEYS};
use crate::errors::Refusal;
use crate::host::command::Command;
use crate::host::{ArgStr, Exec, Reply, Verb};

/// The command, declared whole: registration, ACL, `COMMAND DOCS` and the reference take it
/// from here.
pub const COMMAND: Command = Command::new::<Append>("EMQ.APPEND")
    .tokens(&["append"])
    .keys(KEYS)
    .args(ARGS)
    .creates()
    .fast()
    .summary("Append a bus message to its topic's stream once; nil and nothing written for an id inside the seen window.")
    .complexity("O(log N), plus the trims: up to 100 seen entries and whole stream nodes");

pub struct Append;

impl Verb for Append {
    type Args<'a> = Message<'a>;

    fn shape<'a>(args: &[ArgStr<'a>]) -> Result<Message<'a>, Refusal> {
        Message::shape(args)
    }

    fn run<'a>(x: &mut Exec<'a>, m: Message<'a>) -> Result<Reply, Refusal> {
        let cap = m.check()?;
        match plan(x, &m, cap)? {
            None => Ok(Reply::Null),
            Some(append) => Ok(Reply::Str(append.write()?)),
        }
    }
}
