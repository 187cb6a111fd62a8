//! `TRA.SETDATA 1 job data` — any client replaces a job's data (row field `d`), whatever the
//! job's state and whoever holds it: BullMQ's `job.updateData`, on which its step-job pattern
//! rests (a worker records how far it got in the data it reads again after a retry). The data
//! has ENQUEUE's limit (0..=`trafikey.max-payload` bytes, the same `EMQARG`). Replies 1;
//! `EMQNOJOB` when the row is absent. No event: replacing the data moves the job nowhere, and
//! BullMQ's updateData appends none. The only command that replaces data; creation still
//! never does (an existing id answers 0: the immutable line). Fenced; `deny-oom`, as the data
//! may grow.

use crate::config;
use crate::domain;
use crate::errors::{self, Refusal};
use crate::host::command::{q, val, Arg, Command, Keys, Spec::*, Ty};
use crate::host::{ArgStr, Exec, Reply, Verb};
use crate::keyspace::Role::*;
use crate::queue::{existing_row, field};

pub const KEYS: Keys = Keys::of(&[q(Job, Update)]);
pub const ARGS: &[Arg] = &[val("data", Ty::Str).payload()];

pub const COMMAND: Command = Command::new::<SetData>("TRA.SETDATA")
    .keys(KEYS)
    .args(ARGS)
    .creates()
    .fast()
    .summary("Replace any job's data, held or not, in any state.")
    .complexity("O(1)");

pub struct SetData;

impl Verb for SetData {
    type Args<'a> = ArgStr<'a>;

    fn shape<'a>(args: &[ArgStr<'a>]) -> Result<ArgStr<'a>, Refusal> {
        match args {
            [data] => Ok(*data),
            _ => Err(Refusal::Usage),
        }
    }

    fn run<'a>(x: &mut Exec<'a>, data: ArgStr<'a>) -> Result<Reply, Refusal> {
        domain::job_id(x.id)?;
        // The limit and the text ENQUEUE, SCHEDULE and TRA.ADD give data (`NewJob::check`).
        domain::payload(&data, config::max_payload(), "data")?;
        let value = data.str_ref();
        if value.is_missing() {
            return Err(errors::host_reply());
        }
        let row = existing_row(x)?;
        row.hset(&[(&field::DATA, value)])?;
        Ok(Reply::Int(1))
    }
}
