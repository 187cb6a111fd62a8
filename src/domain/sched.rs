//! Job schedulers' times: when a scheduler's first iteration falls, when the one after an
//! iteration falls, and the id of an iteration's job. Pure: the clock is an argument.
//!
//! A scheduler repeats `EVERY ms` (phase `OFFSET`: its times are `k·every + offset`) or at the
//! times of a cron `PATTERN` in a time zone (`TZ`, UTC by default); `START` and `END` bound
//! its times and `LIMIT` its iterations. The time after an iteration is always after now, so
//! a scheduler that missed windows (the server was down) makes one late iteration, then
//! goes on from the present: never a burst.

use std::str::FromStr;

use chrono::DateTime;
use chrono_tz::Tz;
use croner::parser::{CronParser, Seconds, Year};
use croner::Cron;

use super::{fnv::fnv, id, Range, TIME_MAX};
use crate::errors::{printable, Refusal};

/// Longest scheduler id, in bytes: its iterations' custom ids `repeat:<id>:<ms>` stay well
/// within an ALIAS's 4096 bytes.
pub const ID_MAX: usize = 200;
/// Longest cron pattern, in bytes.
pub const PATTERN_MAX: usize = 256;
/// Longest time zone name, in bytes.
pub const TZ_MAX: usize = 64;
/// `EVERY ms`, its `OFFSET` (at most EVERY−1 besides), `START`, `END` (after now besides)
/// and `LIMIT`.
pub const EVERY: Range = Range::new("EVERY", 1, TIME_MAX);
pub const OFFSET: Range = Range::new("OFFSET", 0, TIME_MAX - 1);
pub const START: Range = Range::new("START", 0, TIME_MAX);
pub const END: Range = Range::new("END", 0, TIME_MAX);
pub const LIMIT: Range = Range::new("LIMIT", 1, TIME_MAX);
/// TRA.SCHEDULERS LIST's `start` and `stop`: any integer, as ZRANGE takes them.
pub const LIST_START: Range = Range::new("start", -i64::MAX, i64::MAX);
pub const LIST_STOP: Range = Range::new("stop", -i64::MAX, i64::MAX);
/// How many times after a taken one are tried for an iteration whose custom id is taken.
pub const TRIES: usize = 8;

/// How a scheduler repeats.
#[derive(Clone, Debug)]
pub enum Repeat {
    /// Times `k·every + offset`, `0 <= offset < every`.
    Every { every: i64, offset: i64 },
    /// The times of a cron pattern in a time zone.
    Pattern { cron: Box<Cron>, tz: Tz },
}

/// A scheduler's rule, range-checked.
#[derive(Clone, Debug)]
pub struct Spec {
    pub repeat: Repeat,
    pub start: Option<i64>,
    pub end: Option<i64>,
    pub limit: Option<i64>,
    pub immediately: bool,
}

/// A cron pattern as BullMQ's takes it: five fields, or six with seconds first; no year.
pub fn cron(pattern: &[u8]) -> Result<Cron, Refusal> {
    let bad =
        |why: String| Refusal::Arg(format!("PATTERN {} is not a cron pattern: {why}", printable(pattern)));
    super::bytes_len(pattern, 1, PATTERN_MAX, "PATTERN")?;
    let text = std::str::from_utf8(pattern).map_err(|_| bad("not ASCII".into()))?;
    if !text.is_ascii() {
        return Err(bad("not ASCII".into()));
    }
    let parser = CronParser::builder().seconds(Seconds::Optional).year(Year::Disallowed).build();
    parser.parse(text).map_err(|e| bad(printable(e.to_string().as_bytes())))
}

/// Whether some day of the 28 years from `year` on matches the pattern's day and month
/// fields (the calendar's weekdays and leap days repeat every 28 years). A pattern that never
/// matches would make the search for its next time walk to the year 5000, tens of ms: SET
/// refuses it after this bounded look instead.
pub fn ever_matches(cron: &Cron, year: i32) -> bool {
    let p = &cron.pattern;
    (year..year.saturating_add(28)).any(|y| {
        (1u32..=12).filter(|&m| p.month_match(m).unwrap_or(false)).any(|m| {
            (1u32..=31).any(|d| {
                chrono::NaiveDate::from_ymd_opt(y, m, d).is_some() && p.day_match(y, m, d).unwrap_or(false)
            })
        })
    })
}

/// The year of `ms` in UTC (a pattern's zone shifts it by a day at most).
pub fn year_of(ms: i64) -> i32 {
    use chrono::Datelike;
    DateTime::from_timestamp_millis(ms).map_or(1970, |d| d.year())
}

/// A time zone of the tz database, by its name (`Europe/Paris`, `UTC`).
pub fn tz(name: &[u8]) -> Result<Tz, Refusal> {
    let bad = || Refusal::Arg(format!("TZ {} is not a time zone", printable(name)));
    super::bytes_len(name, 1, TZ_MAX, "TZ")?;
    std::str::from_utf8(name).ok().and_then(|n| Tz::from_str(n).ok()).ok_or_else(bad)
}

/// The checks of an `EVERY ms [OFFSET ms]`: every 1..=2^53-1, offset 0..every.
pub fn every(every: i64, offset: Option<i64>) -> Result<Repeat, Refusal> {
    let every = EVERY.check(every)?;
    let offset = match offset {
        Some(o) => super::range(o, OFFSET.lo, every.saturating_sub(1).min(OFFSET.hi), OFFSET.what)?,
        None => 0,
    };
    Ok(Repeat::Every { every, offset })
}

/// The checks of START, END and LIMIT against each other and the clock.
pub fn bounds(start: Option<i64>, end: Option<i64>, limit: Option<i64>, now: i64) -> Result<(), Refusal> {
    if let Some(s) = start {
        START.check(s)?;
    }
    if let Some(e) = end {
        END.check(e)?;
        if e <= now {
            return Err(Refusal::Arg("END must be after now".into()));
        }
        if start.is_some_and(|s| e < s) {
            return Err(Refusal::Arg("END must not be before START".into()));
        }
    }
    if let Some(l) = limit {
        LIMIT.check(l)?;
    }
    Ok(())
}

/// `t` rounded down to a multiple of `every` (both non-negative), plus `offset`.
fn slot(t: i64, every: i64, offset: i64) -> i64 {
    t.checked_div(every).unwrap_or(0).saturating_mul(every).saturating_add(offset)
}

/// The first time of a pattern strictly after `after` (ms), or at it when `inclusive`.
/// Patterns name whole seconds: the search starts at the second `after` falls in.
fn cron_next(cron: &Cron, tz: Tz, after: i64, inclusive: bool) -> Option<i64> {
    let second = slot(after, 1000, 0);
    let from = DateTime::from_timestamp_millis(second)?.with_timezone(&tz);
    let at = cron.find_next_occurrence(&from, inclusive && second == after).ok()?.timestamp_millis();
    (at <= TIME_MAX).then_some(at)
}

impl Spec {
    /// The phase an `EVERY` scheduler keeps when none was given: that of its first time (so
    /// that a scheduler started with START keeps its times aligned on START).
    pub fn settle_offset(&mut self, first: i64) {
        if let Repeat::Every { every, offset } = &mut self.repeat {
            if *offset == 0 {
                *offset = first.checked_rem(*every).unwrap_or(0);
            }
        }
    }

    /// The time of a new scheduler's first iteration: EVERY at once (or its next `offset`
    /// slot, or START), a pattern at its first time after now (at or after START), or now
    /// with IMMEDIATELY. None when it has none within END.
    pub fn first(&self, now: i64) -> Option<i64> {
        self.first_phased(now, false)
    }

    /// `first`, where `phased` says the caller gave the OFFSET: then EVERY starts at its next
    /// slot even for OFFSET 0 (times k·ms), as an OFFSET above 0 always does.
    pub fn first_phased(&self, now: i64, phased: bool) -> Option<i64> {
        let t = match (&self.repeat, self.start) {
            (_, Some(s)) if s > now => match &self.repeat {
                Repeat::Every { .. } => s,
                Repeat::Pattern { cron, tz } => cron_next(cron, *tz, s, true)?,
            },
            (_, _) if self.immediately => now,
            (Repeat::Every { every, offset }, _) => {
                if *offset > 0 || phased {
                    let t = slot(now, *every, *offset);
                    if t <= now {
                        t.saturating_add(*every)
                    } else {
                        t
                    }
                } else {
                    now
                }
            }
            (Repeat::Pattern { cron, tz }, _) => cron_next(cron, *tz, now, false)?,
        };
        self.within(t)
    }

    /// The time of the iteration after the one at `prev`, always after `now`: EVERY adds one
    /// interval, or after missed windows takes its next slot after now; a pattern takes its
    /// first time after both. None when it has none within END.
    pub fn after(&self, prev: i64, now: i64) -> Option<i64> {
        let t = match &self.repeat {
            Repeat::Every { every, offset } => {
                let t = prev.saturating_add(*every);
                if t > now {
                    t
                } else {
                    let s = slot(now, *every, *offset);
                    if s <= now {
                        s.saturating_add(*every)
                    } else {
                        s
                    }
                }
            }
            Repeat::Pattern { cron, tz } => cron_next(cron, *tz, prev.max(now), false)?,
        };
        self.within(t)
    }

    fn within(&self, t: i64) -> Option<i64> {
        (t <= TIME_MAX && self.end.is_none_or(|e| t <= e)).then_some(t)
    }

    /// Whether one more iteration, after `made`, is within LIMIT.
    pub fn may_make(&self, made: i64) -> bool {
        self.limit.is_none_or(|l| made < l)
    }
}

/// The custom id of the iteration at `at`: `repeat:<scheduler>:<ms>`.
pub fn alias(scheduler: &[u8], at: i64) -> Vec<u8> {
    let mut a = Vec::with_capacity(scheduler.len().saturating_add(24));
    a.extend_from_slice(b"repeat:");
    a.extend_from_slice(scheduler);
    a.push(b':');
    a.extend_from_slice(at.to_string().as_bytes());
    a
}

/// The branded id of the iteration at `at`, `probe`-th try: a snowflake whose high 42 bits
/// are the time (so iterations sort by time, as client-minted ids do) and whose low 22 come
/// from the scheduler's id (its FNV-1a), plus the probe when an id is taken.
pub fn iteration_id(scheduler: &[u8], at: i64, probe: u64) -> [u8; id::LEN] {
    let time = u64::try_from(at).unwrap_or(0) & ((1u64 << 42) - 1);
    let low = fnv(scheduler).wrapping_add(probe) & ((1u64 << 22) - 1);
    id::encode(id::JOB_BRAND, (time << 22) | low)
}

/// A scheduler id's range check.
pub fn scheduler_id(sid: &[u8]) -> Result<(), Refusal> {
    super::bytes_len(sid, 1, ID_MAX, "scheduler id")
}

#[cfg(test)]
fn utc(ms: i64) -> DateTime<Tz> {
    use chrono::TimeZone as _;
    Tz::UTC.timestamp_millis_opt(ms).single().unwrap_or_else(|| Tz::UTC.timestamp_millis_opt(0).unwrap())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn every_spec(every: i64, offset: i64) -> Spec {
        Spec {
            repeat: Repeat::Every { every, offset },
            start: None,
            end: None,
            limit: None,
            immediately: false,
        }
    }

    fn pattern_spec(p: &str, zone: &str) -> Spec {
        let cron = Box::new(cron(p.as_bytes()).unwrap());
        Spec {
            repeat: Repeat::Pattern { cron, tz: tz(zone.as_bytes()).unwrap() },
            start: None,
            end: None,
            limit: None,
            immediately: false,
        }
    }

    /// 2017-02-07T09:24:00Z
    const T0: i64 = 1_486_459_440_000;

    #[test]
    fn bullmq_patterns_parse() {
        for p in [
            "*/10 * * * * *",
            "0 * * * *",
            "0 0 12 * * *",
            "*/1 * * * * *",
            "0 30 9 * * MON-FRI",
            "0 0 L * *",
            "0 0 * * 5#3",
            "0 0 * * FRI#L",
            "15 10 * JAN,JUL *",
            "0-10/2 * * * * *",
            "0 0 1,15 * *",
            "@daily",
        ] {
            assert!(cron(p.as_bytes()).is_ok(), "{p}");
        }
        for p in ["", "* * *", "61 * * * * *", "* * * * * * 2020", "0 0 32 * *", "x * * * *", "* * * * ? ?é"]
        {
            assert!(matches!(cron(p.as_bytes()), Err(Refusal::Arg(_))), "{p}");
        }
        assert!(tz(b"Europe/Paris").is_ok() && tz(b"UTC").is_ok() && tz(b"America/New_York").is_ok());
        assert!(tz(b"Mars/Olympus").is_err() && tz(b"").is_err());
    }

    #[test]
    fn cron_times_in_a_zone() {
        // Every day at 09:00 in Paris (UTC+1 in February): 08:00Z.
        let s = pattern_spec("0 9 * * *", "Europe/Paris");
        let t = s.first(T0).unwrap();
        assert_eq!(utc(t).to_rfc3339(), "2017-02-08T08:00:00+00:00");
        // With seconds, every 10 s: the next multiple of 10 s, strictly after.
        let s = pattern_spec("*/10 * * * * *", "UTC");
        assert_eq!(s.first(T0), Some(T0 + 10_000));
        assert_eq!(s.first(T0 + 1), Some(T0 + 10_000));
        assert_eq!(s.after(T0 + 10_000, T0 + 10_000), Some(T0 + 20_000));
        // Missed windows: the first time after now, not after the old time.
        assert_eq!(s.after(T0, T0 + 95_000), Some(T0 + 100_000));
        // Last day of the month.
        let s = pattern_spec("0 0 L * *", "UTC");
        assert_eq!(utc(s.first(T0).unwrap()).to_rfc3339(), "2017-02-28T00:00:00+00:00");
        // Third Friday.
        let s = pattern_spec("0 0 * * 5#3", "UTC");
        assert_eq!(utc(s.first(T0).unwrap()).to_rfc3339(), "2017-02-17T00:00:00+00:00");
    }

    #[test]
    fn a_pattern_that_never_matches_has_no_time() {
        let s = pattern_spec("0 0 30 2 *", "UTC");
        assert_eq!(s.first(T0), None);
        let year = year_of(T0);
        assert_eq!(year, 2017);
        let t = std::time::Instant::now();
        for (p, ever) in [
            ("0 0 30 2 *", false),
            ("0 0 31 4,6,9,11 *", false),
            ("0 0 29 2 *", true),
            ("0 0 * 2 MON#5", true),
            ("* * * * *", true),
            ("0 0 L 2 *", true),
            ("0 0 15W * *", true),
        ] {
            assert_eq!(ever_matches(&cron(p.as_bytes()).unwrap(), year), ever, "{p}");
        }
        eprintln!("seven feasibility checks in {:?}", t.elapsed());
    }

    #[test]
    fn every_times() {
        let s = every_spec(1000, 0);
        assert_eq!(s.first(T0 + 7), Some(T0 + 7));
        assert_eq!(s.after(T0 + 7, T0 + 7), Some(T0 + 1007));
        // OFFSET 0 given: its next slot, as any other phase.
        assert_eq!(s.first_phased(T0 + 7, true), Some(T0 + 1000));
        assert_eq!(s.first_phased(T0, true), Some(T0 + 1000));
        // Missed windows: next slot after now, in the scheduler's phase.
        assert_eq!(s.after(T0, T0 + 5500), Some(T0 + 6000));
        let s = every_spec(1000, 250);
        assert_eq!(s.first(T0 + 100), Some(T0 + 250));
        assert_eq!(s.first(T0 + 250), Some(T0 + 1250));
        assert_eq!(s.after(T0 + 250, T0 + 5300), Some(T0 + 6250));
        let mut s = every_spec(1000, 0);
        s.start = Some(T0 + 5123);
        assert_eq!(s.first(T0), Some(T0 + 5123));
        s.settle_offset(T0 + 5123);
        assert_eq!(s.after(T0 + 5123, T0 + 9000), Some(T0 + 9123));
        s.end = Some(T0 + 9000);
        assert_eq!(s.after(T0 + 5123, T0 + 6000), Some(T0 + 6123));
        assert_eq!(s.after(T0 + 8123, T0 + 8200), None);
        s.limit = Some(2);
        assert!(s.may_make(1) && !s.may_make(2));
    }

    #[test]
    fn bounds_and_ranges() {
        assert!(bounds(Some(5), Some(10), Some(1), 0).is_ok());
        assert!(bounds(None, Some(10), None, 10).is_err());
        assert!(bounds(Some(11), Some(10), None, 0).is_err());
        assert!(bounds(None, None, Some(0), 0).is_err());
        assert!(every(0, None).is_err());
        assert!(every(10, Some(10)).is_err());
        assert!(every(10, Some(9)).is_ok());
        assert!(scheduler_id(b"").is_err() && scheduler_id(&[b'a'; 201]).is_err());
        assert_eq!(alias(b"s1", 42), b"repeat:s1:42");
    }

    #[test]
    fn a_pattern_s_start_counts_when_it_is_one_of_its_times() {
        let mut s = pattern_spec("*/10 * * * * *", "UTC");
        s.start = Some(T0 + 10_000);
        assert_eq!(s.first(T0), Some(T0 + 10_000), "START on a time of the pattern is the first");
        s.start = Some(T0 + 10_500);
        assert_eq!(s.first(T0), Some(T0 + 20_000), "never before START");
        s.start = Some(T0);
        assert_eq!(s.first(T0), Some(T0 + 10_000), "START now: the first time after now");
    }

    #[test]
    fn a_start_in_the_past_is_no_start() {
        let mut s = every_spec(1000, 0);
        s.start = Some(T0 - 5_000);
        assert_eq!(s.first(T0), Some(T0));
        let mut s = pattern_spec("*/10 * * * * *", "UTC");
        s.start = Some(T0 - 5_000);
        assert_eq!(s.first(T0), Some(T0 + 10_000));
    }

    #[test]
    fn immediately_is_now_unless_start_is_later() {
        let mut s = every_spec(1000, 250);
        s.immediately = true;
        assert_eq!(s.first(T0 + 100), Some(T0 + 100));
        s.start = Some(T0 + 5_000);
        assert_eq!(s.first(T0 + 100), Some(T0 + 5_000));
        let mut s = pattern_spec("*/10 * * * * *", "UTC");
        s.immediately = true;
        assert_eq!(s.first(T0 + 1), Some(T0 + 1));
    }

    #[test]
    fn an_iteration_due_exactly_now_is_past() {
        let s = every_spec(1000, 0);
        assert_eq!(s.after(T0, T0 + 1000), Some(T0 + 2000));
        assert_eq!(s.after(T0, T0 + 999), Some(T0 + 1000));
    }

    #[test]
    fn end_may_equal_start() {
        assert!(bounds(Some(10), Some(10), None, 0).is_ok());
        assert!(bounds(Some(11), Some(10), None, 0).is_err());
    }

    #[test]
    fn each_probe_is_another_id_before_the_next_millisecond_s() {
        let ids: Vec<_> = (0..8).map(|p| iteration_id(b"s", T0, p)).collect();
        let distinct: std::collections::BTreeSet<_> = ids.iter().collect();
        assert_eq!(distinct.len(), ids.len());
        let next = iteration_id(b"s", T0 + 1, 0);
        assert!(ids.iter().all(|i| *i < next));
    }

    proptest! {
        /// The time after an iteration is after it and after now, and an EVERY scheduler's
        /// times stay in its phase.
        #[test]
        fn after_is_in_the_future(every in 1i64..100_000, offset in 0i64..100_000, prev in 0i64..(1 << 45), lag in 0i64..1_000_000) {
            let offset = offset % every;
            let s = every_spec(every, offset);
            let now = prev + lag;
            let t = s.after(prev, now).unwrap();
            prop_assert!(t > now && t > prev);
            if t != prev + every {
                prop_assert_eq!(t % every, offset);
                prop_assert!(t - now <= every);
            }
        }

        #[test]
        fn cron_after_is_in_the_future(prev in T0..T0 + (1 << 36), lag in 0i64..10_000_000) {
            let s = pattern_spec("*/7 * * * * *", "UTC");
            let now = prev + lag;
            let t = s.after(prev, now).unwrap();
            prop_assert!(t > now && t - now <= 7_000 + 1000);
            prop_assert_eq!(t % 1000, 0);
        }

        #[test]
        fn iteration_ids_are_job_ids_in_time_order(a in 0i64..(1 << 42), b in 0i64..(1 << 42), sid in "[a-z]{1,8}") {
            let (x, y) = (iteration_id(sid.as_bytes(), a, 0), iteration_id(sid.as_bytes(), b, 0));
            prop_assert!(id::is_job_id(&x));
            prop_assert_eq!(a.cmp(&b), x.cmp(&y));
        }

        #[test]
        fn cron_never_panics(p in "[0-9*/,#LW? A-Z-]{0,30}") {
            let _ = cron(p.as_bytes()).map(|c| cron_next(&c, Tz::UTC, T0, false));
        }
    }
}
