//! `METRICS max` on a finish: the job is counted by the minute in `emq:{Q}:metrics:<kind>`
//! (the counter: `count`, `prevTS`, `prevCount`) and `emq:{Q}:metrics:<kind>:data` (the
//! series, newest first, at most `max` points), as `domain::tally` decides. Both keys are
//! found, not declared: opened as the caller, their types checked before the finish writes;
//! the series only when the count ends a minute, the only time it is written.

use crate::domain::{self, tally};
use crate::errors::Refusal;
use crate::host::{Access, Exec, Key, Kind, Lit, Str};
use crate::keyspace::Role;

static COUNT: Lit = Lit::new(c"count");
static PREV_TS: Lit = Lit::new(c"prevTS");
static PREV_COUNT: Lit = Lit::new(c"prevCount");
static ZERO: Lit = Lit::new(c"0");
/// Up to this many zeros a count pushes its points onto the series' head; beyond, it
/// rebuilds the series from the tail, which costs far less per point.
const HEAD_PUSHES: usize = 64;

/// What a finish counts in: its jobs' end.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Tallied {
    Completed,
    Failed,
}

impl Tallied {
    fn suffixes(self) -> (&'static [u8], &'static [u8]) {
        match self {
            Tallied::Completed => (b"completed", b"completed:data"),
            Tallied::Failed => (b"failed", b"failed:data"),
        }
    }
}

/// The range check of `METRICS max`.
pub fn check(max: Option<i64>) -> Result<Option<i64>, Refusal> {
    max.map(|m| tally::METRICS.check(m)).transpose()
}

/// A finish's count, planned before the finish writes: the counter read and the step decided,
/// the series opened only when a minute ended (most finishes only move the count).
pub struct Tally {
    counter: Key,
    before: tally::Counter,
    step: tally::Step,
    /// With the step's points: the series, and its length cap.
    series: Option<(Key, i64)>,
}

impl Tally {
    /// For `n` jobs finishing now, as `kind`: opened as the caller (ACL first, then the types)
    /// before anything is written; none without METRICS.
    pub fn open(x: &mut Exec, kind: Tallied, max: Option<i64>, n: i64) -> Result<Option<Tally>, Refusal> {
        let Some(max) = check(max)? else { return Ok(None) };
        let (counter, series) = kind.suffixes();
        let counter = x.open_undeclared(Role::Metrics, counter, Access::Update)?;
        counter.exists_as(Kind::Hash)?;
        let int = |v: &Option<Str>| v.as_ref().and_then(|v| domain::args::int(v.bytes()));
        let [count, since, at_since, _] = counter.hget_many(&[&COUNT, &PREV_TS, &PREV_COUNT]);
        let before = tally::Counter {
            count: int(&count).unwrap_or(0),
            since: int(&since),
            at_since: int(&at_since).unwrap_or(0),
        };
        let step = tally::step(before, n, x.now(), max);
        let series = match step.points {
            Some(_) => {
                let key = x.open_undeclared(Role::Metrics, series, Access::Update)?;
                key.exists_as(Kind::List)?;
                Some((key, max))
            }
            None => None,
        };
        Ok(Some(Tally { counter, before, step, series }))
    }

    /// Write the planned count: the counter (one HSET effect, of `count` alone within a
    /// minute), and when a minute ended the new points, the series kept within its cap.
    pub fn apply(&self, x: &Exec) -> Result<(), Refusal> {
        let after = self.step.counter;
        let (count, at_since) = (x.int(after.count)?, x.int(after.at_since)?);
        let since = x.int(after.since.unwrap_or_else(|| x.now()))?;
        let pairs =
            [(&COUNT, count.str_ref()), (&PREV_TS, since.str_ref()), (&PREV_COUNT, at_since.str_ref())];
        let moved = (after.since, after.at_since) != (self.before.since, self.before.at_since);
        self.counter.hset(if moved { &pairs } else { &pairs[..1] })?;
        if let (Some((ended, zeros)), Some((series, max))) = (self.step.points, &self.series) {
            let ended = x.int(ended)?;
            let zeros = usize::try_from(zeros).unwrap_or(0);
            let (len, max) = (series.len(), u64::try_from(*max).unwrap_or(0));
            // The old points that stay: the newest, as many as the cap leaves room for.
            let keep = len.min(max.saturating_sub(zeros as u64).saturating_sub(1));
            if zeros < HEAD_PUSHES {
                // A few points: the oldest beyond the cap dropped (one RPOP), the new ones
                // pushed onto the head (one LPUSH): the minute that ended, then the zeros.
                series.rpop_drop(usize::try_from(len.saturating_sub(keep)).unwrap_or(0));
                let mut points = Vec::with_capacity(zeros.saturating_add(1));
                points.push(ended.str_ref());
                points.extend((0..zeros).map(|_| ZERO.str_ref()));
                series.lpush_many(&points)?;
            } else {
                // A long gap: each push onto a list's head moves what the head node holds, so
                // the series is rebuilt from its tail instead (one DEL, one RPUSH): the zeros
                // (newest first), the minute that ended, then the old points that stay.
                let stay = match keep {
                    0 => Vec::new(),
                    k => series.range_read(
                        c"LRANGE",
                        0,
                        i64::try_from(k).unwrap_or(0).saturating_sub(1),
                        None,
                    )?,
                };
                let stay = stay.iter().map(|p| x.string(p)).collect::<Result<Vec<_>, _>>()?;
                series.delete();
                let mut points = Vec::with_capacity(zeros.saturating_add(1).saturating_add(stay.len()));
                points.extend((0..zeros).map(|_| ZERO.str_ref()));
                points.push(ended.str_ref());
                points.extend(stay.iter().map(Str::str_ref));
                series.rpush_many(&points)?;
            }
        }
        Ok(())
    }
}
