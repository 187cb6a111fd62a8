//! `TRA.UNDEDUP 1 dedup [IF job]` — releases a deduplication id: deletes `emq:{Q}:dedup:<id>`,
//! or, with `IF job`, only while it names that job. Replies 1 released, 0 not (absent, or naming
//! another job). The job, if any, is left as it is; a job kept for the id (`KEEPLAST`,
//! `emq:{Q}:kept:<id>`, found and opened as the caller) is deleted with it. A command of its
//! own, apart from TRA.DEDUP, so that ACL can grant reading ids without releasing them. Fenced.

use crate::errors::Refusal;
use crate::host::command::{opt, q, Arg, Command, Keys, Spec::*, Ty};
use crate::host::{Access, ArgStr, Exec, Kind, Reply, Verb};
use crate::keyspace::Role::{self, *};

pub const KEYS: Keys = Keys::of(&[q(Dedup, Update)]);
pub const ARGS: &[Arg] = &[opt("job", "IF", "job", Ty::Str)];

/// The command, declared whole: registration, ACL, `COMMAND DOCS` and the reference take it
/// from here.
pub const COMMAND: Command = Command::new::<Undedup>("TRA.UNDEDUP")
    .keys(KEYS)
    .args(ARGS)
    .writes()
    .fast()
    .summary("Release a deduplication id (with IF, only while it names that job): 1 released, 0 not.")
    .complexity("O(1)");

pub struct Undedup;

impl Verb for Undedup {
    type Args<'a> = Option<ArgStr<'a>>;

    fn shape<'a>(args: &[ArgStr<'a>]) -> Result<Option<ArgStr<'a>>, Refusal> {
        match args {
            [] => Ok(None),
            [word, job] if word.eq_ignore_ascii_case(b"IF") => Ok(Some(*job)),
            [word, ..] if !word.eq_ignore_ascii_case(b"IF") => {
                Err(Refusal::Shape(format!("unknown option {}", crate::errors::printable(word))))
            }
            _ => Err(Refusal::Usage),
        }
    }

    fn run<'a>(x: &mut Exec<'a>, job: Option<ArgStr<'a>>) -> Result<Reply, Refusal> {
        crate::queue::dedup::check_id(x.id)?;
        if let Some(j) = &job {
            crate::domain::job_id(j)?;
        }
        let key = x.write(Dedup)?;
        if !key.exists_as(Kind::String)? {
            return Ok(Reply::Int(0));
        }
        if job.is_some_and(|j| key.string() != Some(j.bytes())) {
            return Ok(Reply::Int(0));
        }
        // A job kept for the id (KEEPLAST) goes with it: found, opened as the caller.
        let kept = if x.undeclared_exists(Role::Kept, x.id)? {
            let k = x.open_undeclared(Role::Kept, x.id, Access::Write)?;
            (k.kind() == Kind::Hash).then_some(k)
        } else {
            None
        };
        key.delete();
        if let Some(k) = kept {
            k.delete();
        }
        Ok(Reply::Int(1))
    }
}
