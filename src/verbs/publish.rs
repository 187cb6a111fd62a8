//! `EMQ.PUBLISH 2 bus seen id payload [MAXLEN n]`
//!
//! APPEND, then PUBLISH of the payload on the channel named by the bus key
//! (`emq:{T}:bus`): the durable lane and the live lane in one atomic step. A duplicate is
//! neither appended nor published (reply nil). The command declares the channel (the table's
//! `getchannels-api`), so the server judges the caller's permission to publish on it together
//! with the command and its keys, before this runs (users made with `ACL SETUSER` have no
//! channels under the server's default `acl-pubsub-default resetchannels`: grant `&emq:*` or
//! the topic's channel).
//! The publish is replicated as a `PUBLISH` effect with the stream entry, so a replica's
//! subscribers get the message too. Replies `[entry id, receivers]`, receivers counted on
//! this server as PUBLISH counts them.

use crate::bus::{plan, Message};
pub use crate::bus::{ARGS, KEYS};
use crate::errors::Refusal;
use crate::host::command::Command;
use crate::host::{publish, ArgStr, Exec, Reply, Verb};
use crate::keyspace::Role;
use crate::metrics;

/// The command, declared whole: registration, ACL, `COMMAND DOCS` and the reference take it
/// from here.
pub const COMMAND: Command = Command::new::<Publish>("EMQ.PUBLISH")
    .tokens(&["publish"])
    .keys(KEYS)
    .args(ARGS)
    .creates()
    .fast()
    .publishes()
    .summary("APPEND, then publish the payload on the channel named by the bus key; nil for a duplicate.")
    .complexity("O(log N + S) for S subscribers, plus APPEND's trims");

pub struct Publish;

impl Verb for Publish {
    type Args<'a> = Message<'a>;

    fn shape<'a>(args: &[ArgStr<'a>]) -> Result<Message<'a>, Refusal> {
        Message::shape(args)
    }

    fn run<'a>(x: &mut Exec<'a>, m: Message<'a>) -> Result<Reply, Refusal> {
        let cap = m.check()?;
        let channel = x.key_name(Role::Bus)?;
        let Some(append) = plan(x, &m, cap)? else { return Ok(Reply::Null) };
        let entry = append.write()?;
        let receivers = publish(x.ctx(), channel, m.payload.str_ref())?;
        metrics::add(&metrics::PUBLISHED, 1);
        metrics::add(&metrics::RECEIVERS, receivers.unsigned_abs());
        Ok(Reply::Array(vec![Reply::Str(entry), Reply::Int(receivers)]))
    }
}
