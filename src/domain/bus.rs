//! The bus's pure rules: the dedup window, the stream cap, the
//! failure counter and its expiry time.

use super::{Range, TIME_MAX};
use crate::errors::Refusal;

/// Largest MAXLEN a call may give (and `trafikey.bus-maxlen` may hold).
pub const MAXLEN_MAX: i64 = 1_000_000_000;
/// Entries of `seen` older than the window one call removes at most: the zset shrinks by up
/// to this many per call while it grows by one, so it cannot grow without limit.
pub const SEEN_TRIM_BATCH: usize = 100;
/// A call's MAXLEN.
pub const MAXLEN: Range = Range::new("MAXLEN", 1, MAXLEN_MAX);
/// FAILURES' TTL; also now + TTL must be a time (at most `TIME_MAX`).
pub const TTL: Range = Range::new("TTL", 1, TIME_MAX);
/// The failure counter's time to live when FAILURES gives no TTL: 24 h.
pub const FAILURES_TTL_DEFAULT: i64 = 24 * 3600 * 1000;

/// The newest first-append time that is already outside the window at `now`: an id whose
/// `seen` score is above it is a duplicate; entries at or below it are trimmed.
pub fn window_floor(now: i64, window: i64) -> i64 {
    now.saturating_sub(window)
}

/// A message id seen at `seen_at` (its `seen` score), at `now`, with a window of `window`
/// ms, is a duplicate: seen less than `window` ms ago — or "in the future", after the
/// server clock went back.
pub fn duplicate(seen_at: Option<f64>, now: i64, window: i64) -> bool {
    seen_at.is_some_and(|s| s > window_floor(now, window) as f64)
}

/// The stream cap of one call: its MAXLEN, else the config's.
pub fn max_len(given: Option<i64>, default: i64) -> Result<i64, Refusal> {
    MAXLEN.check(given.unwrap_or(default))
}

/// The counter's absolute expiry: `now + ttl`, with `ttl` from 1 ms and the sum a time.
pub fn expiry(now: i64, ttl: Option<i64>) -> Result<i64, Refusal> {
    let ttl = TTL.check(ttl.unwrap_or(FAILURES_TTL_DEFAULT))?;
    now.checked_add(ttl)
        .filter(|at| *at <= TIME_MAX)
        .ok_or_else(|| Refusal::Arg(format!("TTL must be 1..={} from now", TIME_MAX.saturating_sub(now))))
}

/// The failure count after one more failure, over what the counter holds (absent: none
/// yet). A string that is not a decimal count below `i64::MAX` is not a counter: `None`.
pub fn next_count(stored: Option<&[u8]>) -> Option<i64> {
    match stored {
        None => Some(1),
        Some(b) => super::args::int(b).filter(|n| *n >= 0)?.checked_add(1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn window_edges() {
        // window 10 at now 100: seen at 91..=100 (and later) is a duplicate, at 90 it is not.
        assert!(!duplicate(None, 100, 10));
        assert!(duplicate(Some(100.0), 100, 10));
        assert!(duplicate(Some(91.0), 100, 10));
        assert!(!duplicate(Some(90.0), 100, 10));
        assert!(duplicate(Some(150.0), 100, 10), "the clock went back: still a duplicate");
        assert_eq!(window_floor(100, 10), 90);
        assert_eq!(window_floor(5, TIME_MAX), 5 - TIME_MAX);
        assert_eq!(window_floor(i64::MIN + 1, 10), i64::MIN);
    }

    #[test]
    fn caps_and_ttls() {
        assert_eq!(max_len(None, 7), Ok(7));
        assert_eq!(max_len(Some(1), 7), Ok(1));
        assert_eq!(max_len(Some(MAXLEN_MAX), 7), Ok(MAXLEN_MAX));
        for bad in [0, -1, MAXLEN_MAX + 1, i64::MIN + 1] {
            assert!(matches!(max_len(Some(bad), 7), Err(Refusal::Arg(_))), "{bad}");
        }
        assert_eq!(expiry(1000, None), Ok(1000 + FAILURES_TTL_DEFAULT));
        assert_eq!(expiry(1000, Some(1)), Ok(1001));
        assert_eq!(expiry(0, Some(TIME_MAX)), Ok(TIME_MAX));
        for bad in [0, -1, TIME_MAX + 1, i64::MAX] {
            assert!(matches!(expiry(1000, Some(bad)), Err(Refusal::Arg(_))), "{bad}");
        }
        assert!(
            matches!(expiry(1000, Some(TIME_MAX)), Err(Refusal::Arg(_))),
            "the sum overflows the time range"
        );
    }

    #[test]
    fn counts() {
        assert_eq!(next_count(None), Some(1));
        assert_eq!(next_count(Some(b"0")), Some(1));
        assert_eq!(next_count(Some(b"41")), Some(42));
        for bad in [&b""[..], b"x", b"1.5", b" 1", b"-1", b"9223372036854775807", b"99999999999999999999"] {
            assert_eq!(next_count(Some(bad)), None, "{bad:?}");
        }
    }

    proptest! {
        #[test]
        fn expiry_is_after_now_and_a_time(now in 0..TIME_MAX, ttl in any::<i64>()) {
            if let Ok(at) = expiry(now, Some(ttl)) {
                prop_assert!(at > now && at <= TIME_MAX);
                prop_assert_eq!(at - now, ttl);
            }
        }

        #[test]
        fn duplicate_means_seen_less_than_a_window_ago(seen in 0..TIME_MAX, now in 0..TIME_MAX, window in 1..=TIME_MAX) {
            // Times below 2^53 are exact in a score.
            prop_assert_eq!(duplicate(Some(seen as f64), now, window), now - seen < window);
        }
    }
}

/// Tests that kill the mutants cargo-mutants left alive (scripts/mutants; tests/MUTANTS.md).
#[cfg(test)]
mod mutants_killed {
    use super::*;

    #[test]
    fn the_failure_counter_lives_a_day_by_default() {
        // src/CONTRACT.md: FAILURES TTL defaults to 86400000 (24 h).
        assert_eq!(FAILURES_TTL_DEFAULT, 86_400_000);
        assert_eq!(expiry(0, None), Ok(86_400_000));
    }
}
