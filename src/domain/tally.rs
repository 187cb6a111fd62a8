//! Finished jobs counted by the minute (`METRICS max` on the finish verbs), in the layout
//! BullMQ's metrics use, so that its readers work unchanged: a counter (`count`, and the
//! minute boundary last recorded: `prevTS`, `prevCount`) and a series of per-minute counts,
//! newest first, at most `max` long.
//!
//! A minute's count is written when the first job of a later minute is counted: the jobs
//! counted since the last boundary, then one 0 for each whole minute in between in which
//! none was. A job is counted in the minute of the server's clock when it finished.

/// One point of the series.
pub const MINUTE_MS: i64 = 60_000;
/// The longest series (one week of minutes): filling a gap pushes at most this many points,
/// which one call does well within its 2 ms.
pub const MAX_POINTS: i64 = 10_080;
/// `METRICS max`: the longest series a finish keeps.
pub const METRICS: super::Range = super::Range::new("METRICS", 1, MAX_POINTS);

/// A kind's counter as stored.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counter {
    /// Jobs counted so far.
    pub count: i64,
    /// When the last minute boundary was recorded (ms); none before the first job counted.
    pub since: Option<i64>,
    /// `count` at that boundary.
    pub at_since: i64,
}

/// What counting jobs writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    /// The counter after it.
    pub counter: Counter,
    /// Pushed onto the series' head when a later minute began: the jobs of the minute that
    /// ended (pushed first), then this many zeros for the empty minutes after it (newer).
    pub points: Option<(i64, i64)>,
}

/// Count `n` jobs finished at `now` into a series of at most `max` points.
pub fn step(c: Counter, n: i64, now: i64, max: i64) -> Step {
    let count = c.count.saturating_add(n.max(0));
    let Some(since) = c.since else {
        // The first job counted starts the first minute.
        return Step { counter: Counter { count, since: Some(now), at_since: c.count }, points: None };
    };
    let minutes = now.div_euclid(MINUTE_MS).saturating_sub(since.div_euclid(MINUTE_MS)).min(max.max(1));
    if minutes <= 0 {
        // The same minute, or a clock that went back: the minute goes on.
        return Step { counter: Counter { count, since: c.since, at_since: c.at_since }, points: None };
    }
    let ended = c.count.saturating_sub(c.at_since).max(0);
    Step {
        counter: Counter { count, since: Some(now), at_since: c.count },
        points: Some((ended, minutes.saturating_sub(1))),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::arithmetic_side_effects, clippy::indexing_slicing)]
    use super::*;
    use proptest::prelude::*;

    /// The series after counting one job at each time, newest first, cut to `max`.
    fn replay(times: &[i64], max: i64) -> (Counter, Vec<i64>) {
        let mut c = Counter::default();
        let mut series: Vec<i64> = Vec::new();
        for &t in times {
            let s = step(c, 1, t, max);
            if let Some((ended, zeros)) = s.points {
                series.insert(0, ended);
                for _ in 0..zeros {
                    series.insert(0, 0);
                }
                series.truncate(max as usize);
            }
            c = s.counter;
        }
        (c, series)
    }

    #[test]
    fn a_minute_is_written_when_the_next_begins() {
        let m = MINUTE_MS;
        // Two jobs in minute 0, one in minute 1, none in 2 and 3, one in minute 4.
        let (c, series) = replay(&[10, 20, m + 5, 4 * m + 1], 100);
        assert_eq!(c.count, 4);
        assert_eq!(c.since, Some(4 * m + 1));
        assert_eq!(c.at_since, 3);
        assert_eq!(series, vec![0, 0, 1, 2]);
    }

    #[test]
    fn the_first_job_starts_the_first_minute() {
        let s = step(Counter::default(), 1, 123, 10);
        assert_eq!(s, Step { counter: Counter { count: 1, since: Some(123), at_since: 0 }, points: None });
    }

    #[test]
    fn a_gap_longer_than_the_series_fills_it_once() {
        let c = Counter { count: 7, since: Some(0), at_since: 2 };
        let s = step(c, 1, 1_000 * MINUTE_MS, 60);
        assert_eq!(s.points, Some((5, 59)));
        assert_eq!(s.counter, Counter { count: 8, since: Some(1_000 * MINUTE_MS), at_since: 7 });
    }

    #[test]
    fn a_clock_that_went_back_keeps_the_minute() {
        let c = Counter { count: 3, since: Some(10 * MINUTE_MS), at_since: 1 };
        let s = step(c, 2, 5 * MINUTE_MS, 60);
        assert_eq!(s, Step { counter: Counter { count: 5, ..c }, points: None });
    }

    proptest! {
        /// Every job is in the counter, and the series never outgrows `max`; with a series
        /// long enough, its points plus the current minute's jobs are every job counted.
        #[test]
        fn counts_every_job(mut gaps in proptest::collection::vec(0i64..200_000, 1..60), max in 1i64..500) {
            let mut t = 0i64;
            for g in gaps.iter_mut() {
                t += *g;
                *g = t;
            }
            let (c, series) = replay(&gaps, max);
            prop_assert_eq!(c.count, gaps.len() as i64);
            prop_assert!(series.len() as i64 <= max);
            let minutes = gaps.last().unwrap() / MINUTE_MS - gaps[0] / MINUTE_MS;
            if minutes < max {
                prop_assert_eq!(series.iter().sum::<i64>() + (c.count - c.at_since), c.count);
                prop_assert_eq!(series.len() as i64, minutes);
            }
        }

        #[test]
        fn never_panics(count in any::<i64>(), since in proptest::option::of(any::<i64>()), at in any::<i64>(),
                        n in any::<i64>(), now in any::<i64>(), max in any::<i64>()) {
            let s = step(Counter { count, since, at_since: at }, n, now, max);
            if let Some((ended, zeros)) = s.points {
                prop_assert!(ended >= 0 && zeros >= 0 && zeros < max.max(1));
            }
        }
    }
}
