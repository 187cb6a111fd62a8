//! A job's log: the lines TRA.LOG and TRA.ADDLOG append, its newest `keep` kept.

use crate::config;
use crate::domain;
use crate::errors::Refusal;
use crate::host::{ArgStr, Exec, Key, Reply};

/// The line range-checked and its KEEP decided: the job's log, its keys checked.
pub fn checked<'a>(x: &Exec<'a>, line: &ArgStr<'a>, keep: Option<i64>) -> Result<i64, Refusal> {
    domain::job_id(x.id)?;
    domain::payload(line, config::max_payload(), "line")?;
    domain::LOG_KEEP.check(keep.unwrap_or(config::get(&config::LOG_KEEP)))
}

/// Appends `line` to `log`, keeping its newest `keep` lines; replies the log's length.
pub fn append(log: &Key, line: ArgStr, keep: i64) -> Result<Reply, Refusal> {
    if line.str_ref().is_missing() {
        return Err(crate::errors::host_reply());
    }
    log.rpush(line.str_ref())?;
    let over = log.len().saturating_sub(u64::try_from(keep).unwrap_or(u64::MAX));
    log.lpop_drop(usize::try_from(over).unwrap_or(usize::MAX));
    Ok(Reply::Int(i64::try_from(log.len()).unwrap_or(i64::MAX)))
}
