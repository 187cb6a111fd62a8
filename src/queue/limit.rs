//! A queue's rate limit and global concurrency, kept in its `meta` hash (`meta::RATE`,
//! `CONCURRENCY`, `HOLD_UNTIL`): read by CLAIM in the same lookup as `paused`,
//! the window recorded by CLAIM, the settings written by TRA.LIMIT. The decisions are
//! `domain::limit`'s.

use super::meta;
use crate::domain::{self, limit::Limits};
use crate::errors::Refusal;
use crate::host::{Exec, Key, Str};

fn int(v: Option<Str>) -> Option<i64> {
    v.and_then(|s| domain::args::int(s.bytes()))
}

/// The field `rate`: `max ms`, or `max ms count until` once a claim recorded its window.
fn rate(v: Option<Str>) -> Option<[i64; 4]> {
    let v = v?;
    let mut out = [0i64; 4];
    let mut n = 0usize;
    for part in v.bytes().split(|&c| c == b' ') {
        *out.get_mut(n)? = domain::args::int(part)?;
        n = n.saturating_add(1);
    }
    (n == 2 || n == 4).then_some(out)
}

/// The text of the field `rate`.
pub fn rate_text(x: &Exec, (max, ms): (i64, i64), window: Option<(i64, i64)>) -> Result<Str, Refusal> {
    let text = match window {
        Some((count, until)) => format!("{max} {ms} {count} {until}"),
        None => format!("{max} {ms}"),
    };
    x.string(text.as_bytes())
}

/// `paused` and the limits of the queue whose `meta` this is, in one lookup of four fields
/// (where CLAIM looked up `paused` alone).
pub fn read(meta: &Key) -> (bool, Limits) {
    let [paused, rate_field, concurrency, hold] =
        meta.hget_many(&[&meta::PAUSED, &meta::RATE, &meta::CONCURRENCY, &meta::HOLD_UNTIL]);
    let mut l = Limits {
        concurrency: domain::limit::setting(int(concurrency), domain::limit::MAX_MAX),
        hold: domain::limit::stored(int(hold)),
        ..Limits::default()
    };
    if let Some([max, ms, count, until]) = rate(rate_field) {
        let max = domain::limit::setting(Some(max), domain::limit::MAX_MAX);
        let ms = domain::limit::setting(Some(ms), domain::limit::MS_MAX);
        l.rate = max.zip(ms);
        if l.rate.is_some() {
            (l.count, l.until) = (domain::limit::stored(Some(count)), domain::limit::stored(Some(until)));
        }
    }
    (paused.is_some(), l)
}

/// Records in `meta` the window after a claim at `now` took `taken` jobs; nothing without a
/// rate limit or a job taken. A write of absolute values (an effect like any other).
pub fn record(x: &Exec, limits: &Limits, now: i64, taken: usize) -> Result<(), Refusal> {
    if taken == 0 {
        return Ok(());
    }
    let (Some(rate), Some(window)) = (limits.rate, limits.record(now, taken as u64)) else { return Ok(()) };
    let meta = x.write(crate::keyspace::Role::Meta)?;
    let text = rate_text(x, rate, Some(window))?;
    meta.hset(&[(&meta::RATE, text.str_ref())])
}
