//! A queue's rate limit and global concurrency, kept in its `meta` hash (`meta::RATE_*`,
//! `CONCURRENCY`, `HOLD_UNTIL`): read by CLAIM in the same lookup as `paused`, the window
//! recorded by CLAIM, the settings written by TRA.LIMIT. The decisions are
//! `domain::limit`'s.

use super::meta;
use crate::domain::{self, limit::Limits};
use crate::errors::Refusal;
use crate::host::{Exec, Key, Str};
use crate::keyspace::Role;

fn int(v: Option<Str>) -> Option<i64> {
    v.and_then(|s| domain::args::int(s.bytes()))
}

/// `paused` and the limits of the queue whose `meta` this is. An unlimited queue pays one
/// lookup of four fields (the one CLAIM made for `paused` alone before); the window's fields
/// are read only under a rate limit.
pub fn read(meta: &Key) -> (bool, Limits) {
    let [paused, max, concurrency, hold] =
        meta.hget_many(&[&meta::PAUSED, &meta::RATE_MAX, &meta::CONCURRENCY, &meta::HOLD_UNTIL]);
    let mut l = Limits {
        concurrency: domain::limit::setting(int(concurrency), domain::limit::MAX_MAX),
        hold: domain::limit::stored(int(hold)),
        ..Limits::default()
    };
    if let Some(max) = domain::limit::setting(int(max), domain::limit::MAX_MAX) {
        let [ms, count, until, _] = meta.hget_many(&[&meta::RATE_MS, &meta::RATE_COUNT, &meta::RATE_UNTIL]);
        l.rate = domain::limit::setting(int(ms), domain::limit::MS_MAX).map(|ms| (max, ms));
        l.count = domain::limit::stored(int(count));
        l.until = domain::limit::stored(int(until));
    }
    (paused.is_some(), l)
}

/// Records in `meta` the window after a claim at `now` took `taken` jobs; nothing without a
/// rate limit or a job taken. A write of absolute values (an effect like any other).
pub fn record(x: &Exec, limits: &Limits, now: i64, taken: usize) -> Result<(), Refusal> {
    if taken == 0 {
        return Ok(());
    }
    let Some((count, until)) = limits.record(now, taken as u64) else { return Ok(()) };
    let meta = x.write(Role::Meta)?;
    let (count, until) = (x.int(count)?, x.int(until)?);
    meta.hset(&[(&meta::RATE_COUNT, count.ptr()), (&meta::RATE_UNTIL, until.ptr())])
}
