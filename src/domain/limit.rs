//! Rate limit and global concurrency of a queue: how many jobs a claim may take, and when a
//! limited queue may claim again. Pure: the verbs read the queue's `meta` fields and ask here.

/// The largest `max` of a rate limit and the largest concurrency.
pub const MAX_MAX: i64 = (1 << 31) - 1;
/// The longest rate window and the longest manual limit, ms (as a lease or a BLOCK).
pub const MS_MAX: i64 = 1 << 31;
/// TRA.LIMIT's values: `RATE max ms`, `CONCURRENCY n`, `FOR ms`.
pub const RATE_MAX: super::Range = super::Range::new("max", 1, MAX_MAX);
pub const RATE_MS: super::Range = super::Range::new("ms", 1, MS_MAX);
pub const CONCURRENCY: super::Range = super::Range::new("n", 1, MAX_MAX);
pub const FOR_MS: super::Range = super::Range::new("ms", 1, MS_MAX);

/// A queue's limits as its `meta` holds them, each field parsed (a field that does not parse
/// or is out of range counts as absent: the module reads only what TRA.LIMIT could write).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    /// At most `max` jobs claimed per window of `ms`.
    pub rate: Option<(i64, i64)>,
    /// At most this many jobs active at once.
    pub concurrency: Option<i64>,
    /// Jobs claimed in the window that ends at `until` (both 0 when no window was opened).
    pub count: i64,
    pub until: i64,
    /// Nothing is claimed before this time (a manual limit), 0 when none.
    pub hold: i64,
}

/// A stored setting: an integer in 1..=hi, else absent.
pub fn setting(v: Option<i64>, hi: i64) -> Option<i64> {
    v.filter(|v| (1..=hi).contains(v))
}

/// A stored time or count: an integer in 0..=2^53-1, else 0.
pub fn stored(v: Option<i64>) -> i64 {
    v.filter(|v| (0..=super::TIME_MAX).contains(v)).unwrap_or(0)
}

/// Ms from `now` until `t`, or -2 when `t` is not after `now` (a window or a manual limit that
/// has ended, or none: -2 as PTTL answers for a key that is gone).
pub fn left(t: i64, now: i64) -> i64 {
    if t > now {
        t.saturating_sub(now)
    } else {
        -2
    }
}

/// What a claim at `now` may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Allow {
    /// Jobs it may take at most (u64::MAX: no limit applies).
    pub take: u64,
    /// When the rate limit or a manual limit lets it claim again, when that is what stops it.
    pub reopen: Option<i64>,
    /// Whether global concurrency is what stops it (it may claim once a job leaves `active`).
    pub by_concurrency: bool,
}

impl Limits {
    /// Whether any limit is set or in force: an unlimited queue skips all of this.
    pub fn any(&self) -> bool {
        self.rate.is_some() || self.concurrency.is_some() || self.hold != 0
    }

    /// The rate window in force at `now`: jobs claimed in it and its end, or None (the next
    /// claim opens a new one).
    pub fn window(&self, now: i64) -> Option<(i64, i64)> {
        (self.until > now).then_some((self.count, self.until))
    }

    /// What a claim may take at `now` with `active` jobs active.
    pub fn allow(&self, now: i64, active: u64) -> Allow {
        let mut take = u64::MAX;
        let mut reopen: Option<i64> = None;
        if let Some((max, _)) = self.rate {
            let (count, until) = self.window(now).unwrap_or((0, now));
            let room = u64::try_from(max.saturating_sub(count)).unwrap_or(0);
            if room == 0 {
                reopen = Some(until);
            }
            take = take.min(room);
        }
        if self.hold > now {
            take = 0;
            reopen = Some(reopen.map_or(self.hold, |r| r.max(self.hold)));
        }
        let mut by_concurrency = false;
        if let Some(c) = self.concurrency {
            let room = u64::try_from(c).unwrap_or(0).saturating_sub(active);
            if room == 0 && take > 0 {
                by_concurrency = true;
            }
            take = take.min(room);
        }
        Allow { take, reopen, by_concurrency }
    }

    /// The window to record after a claim at `now` took `taken` jobs (> 0) under a rate
    /// limit: the window in force counts them, or a new one opens `[now, now+ms)`.
    pub fn record(&self, now: i64, taken: u64) -> Option<(i64, i64)> {
        let (_, ms) = self.rate?;
        let taken = i64::try_from(taken).unwrap_or(i64::MAX);
        Some(match self.window(now) {
            Some((count, until)) => (count.saturating_add(taken), until),
            None => (taken, now.saturating_add(ms)),
        })
    }

    /// Ms until the queue may claim again by its rate limit or a manual limit (0: it may now);
    /// concurrency is not a matter of time and is not counted.
    pub fn ttl(&self, now: i64) -> i64 {
        self.allow(now, 0).reopen.map_or(0, |t| t.saturating_sub(now).max(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn rate(max: i64, ms: i64) -> Limits {
        Limits { rate: Some((max, ms)), ..Limits::default() }
    }

    #[test]
    fn unlimited_takes_anything() {
        let l = Limits::default();
        assert!(!l.any());
        assert_eq!(l.allow(5, 1000), Allow { take: u64::MAX, reopen: None, by_concurrency: false });
        assert_eq!(l.record(5, 3), None);
        assert_eq!(l.ttl(5), 0);
    }

    #[test]
    fn a_window_opens_fills_and_reopens() {
        let mut l = rate(3, 100);
        assert_eq!(l.allow(10, 0).take, 3);
        assert_eq!(l.record(10, 2), Some((2, 110)));
        (l.count, l.until) = (2, 110);
        assert_eq!(l.allow(50, 0).take, 1);
        assert_eq!(l.record(50, 1), Some((3, 110)));
        l.count = 3;
        assert_eq!(l.allow(50, 0), Allow { take: 0, reopen: Some(110), by_concurrency: false });
        assert_eq!(l.ttl(50), 60);
        // At its end the window is over: a new one opens with the next claim.
        assert_eq!(l.allow(110, 0).take, 3);
        assert_eq!(l.record(110, 1), Some((1, 210)));
        assert_eq!(l.ttl(110), 0);
    }

    #[test]
    fn a_lower_max_holds_a_fuller_window() {
        let mut l = rate(10, 100);
        (l.count, l.until) = (5, 100);
        l.rate = Some((2, 100));
        assert_eq!(l.allow(0, 0), Allow { take: 0, reopen: Some(100), by_concurrency: false });
    }

    #[test]
    fn a_manual_limit_stops_every_claim_until_its_end() {
        let l = Limits { hold: 100, ..Limits::default() };
        assert!(l.any());
        assert_eq!(l.allow(0, 0), Allow { take: 0, reopen: Some(100), by_concurrency: false });
        assert_eq!(l.ttl(40), 60);
        assert_eq!(l.allow(100, 0).take, u64::MAX);
        // With a full window ending later, the later of the two.
        let l = Limits { hold: 100, count: 1, until: 150, ..rate(1, 200) };
        assert_eq!(l.allow(0, 0).reopen, Some(150));
        let l = Limits { hold: 300, count: 1, until: 150, ..rate(1, 200) };
        assert_eq!(l.allow(0, 0).reopen, Some(300));
    }

    #[test]
    fn concurrency_counts_the_active_jobs() {
        let l = Limits { concurrency: Some(2), ..Limits::default() };
        assert_eq!(l.allow(0, 0).take, 2);
        assert_eq!(l.allow(0, 1).take, 1);
        assert_eq!(l.allow(0, 2), Allow { take: 0, reopen: None, by_concurrency: true });
        assert_eq!(l.allow(0, 7).take, 0);
        // A rate limit that stops the claim first is what it waits for.
        let l = Limits { concurrency: Some(2), count: 1, until: 50, ..rate(1, 50) };
        assert_eq!(l.allow(0, 2), Allow { take: 0, reopen: Some(50), by_concurrency: false });
    }

    #[test]
    fn left_counts_down_to_the_end_and_is_minus_two_from_it() {
        assert_eq!(left(1_005, 1_000), 5);
        assert_eq!(left(1_001, 1_000), 1);
        assert_eq!(left(1_000, 1_000), -2, "a limit that ends now has ended");
        assert_eq!(left(0, 1_000), -2, "none");
    }

    #[test]
    fn stored_values_out_of_range_are_absent() {
        assert_eq!(setting(Some(0), MAX_MAX), None);
        assert_eq!(setting(Some(MAX_MAX + 1), MAX_MAX), None);
        assert_eq!(setting(Some(3), MAX_MAX), Some(3));
        assert_eq!(setting(None, MAX_MAX), None);
        assert_eq!(stored(Some(-1)), 0);
        assert_eq!(stored(Some(super::super::TIME_MAX + 1)), 0);
        assert_eq!(stored(Some(7)), 7);
    }

    #[test]
    fn the_ranges_are_the_contracts_numbers() {
        // Written out, not computed as the constants are.
        assert_eq!(MAX_MAX, 2_147_483_647);
        assert_eq!(MS_MAX, 2_147_483_648);
    }

    #[test]
    fn any_one_limit_alone_is_a_limit() {
        assert!(rate(1, 10).any());
        assert!(Limits { concurrency: Some(1), ..Limits::default() }.any());
        assert!(Limits { hold: 5, ..Limits::default() }.any());
        assert!(!Limits { count: 3, until: 9, ..Limits::default() }.any(), "a window's tally is not a limit");
    }

    proptest! {
        /// Over any sequence of claims, no window of the rate limit hands out more than `max`
        /// jobs, and no claim takes a job while a manual limit is in force.
        #[test]
        fn never_more_than_max_in_a_window(
            max in 1i64..6, ms in 1i64..50, hold in 0i64..200,
            claims in proptest::collection::vec((0i64..30, 1u64..8), 1..40),
        ) {
            let mut l = Limits { hold, ..rate(max, ms) };
            let mut now = 0i64;
            let mut opened: Vec<(i64, i64)> = Vec::new(); // (window start, jobs)
            for (step, want) in claims {
                now += step;
                let a = l.allow(now, 0);
                let took = a.take.min(want);
                if now < hold {
                    prop_assert_eq!(took, 0);
                }
                if took > 0 {
                    let (count, until) = l.record(now, took).unwrap_or_default();
                    if l.window(now).is_none() {
                        opened.push((now, 0));
                    }
                    if let Some(last) = opened.last_mut() {
                        last.1 += took as i64;
                    }
                    (l.count, l.until) = (count, until);
                    prop_assert!(count <= max);
                    prop_assert_eq!(until, opened.last().map_or(0, |o| o.0) + ms);
                }
            }
            prop_assert!(opened.iter().all(|(_, n)| *n <= max));
            prop_assert!(opened.windows(2).all(|w| w[1].0 >= w[0].0 + ms));
        }
    }
}
