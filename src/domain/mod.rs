//! Pure decisions: no server types, each a plain function with its unit tests. The verbs ask
//! these; the host carries out what they decide.

#![forbid(unsafe_code)]

pub mod args;
pub mod bus;
pub mod claim;
pub mod coherence;
pub mod fnv;
pub mod id;
pub mod limit;
pub mod sched;
pub mod stalled;
pub mod tally;

use crate::errors::{self, Refusal};
use crate::keyspace;
pub use args::{Backoff, When};

/// The value ranges every verb checks (src/CONTRACT.md lists them with their reasons).
pub const PRIORITY_MAX: i64 = (1 << 21) - 1;
pub const ATTEMPTS_MAX: i64 = 1_000_000;
pub const BACKOFF_MAX: i64 = 1 << 31;
pub const LEASE_MAX: i64 = 1 << 31;
/// The largest page of TRA.QUEUES (and the other listing commands).
pub const PAGE_MAX: i64 = 1000;
/// The largest progress report a holder may store, bytes.
pub const PROGRESS_MAX: usize = 4096;
/// The COUNT one DRAIN, CLEAN or OBLITERATE call takes, and its default.
pub const DELETE_COUNT_MAX: i64 = 10_000;
pub const DELETE_COUNT_DEFAULT: i64 = 1000;

/// The most one call does, whatever its COUNT or a config asks: no call may hold the server
/// for more than about 2 ms of CPU, on a queue of any size. tests/two_ms.rs holds each call to
/// this work at its cap beside a million waiting jobs (items moved, keys read, server calls
/// made); the benchmark's `--only-caps` measures each one's microseconds there beside the 2 ms
/// goal (about 10 µs a job at that size). What is left waits for the next call, or for upkeep;
/// so a reply shorter than COUNT does not mean that nothing is left.
/// Jobs one CLAIM hands out (and meets in all its passes), and jobs one TRA.COMPLETES or
/// TRA.COMPLETESNEXT takes: 50, so that a CLAIM at its COUNT cap that also promotes
/// `promote-batch` at its cap fits.
pub const CLAIM_PER_CALL: i64 = 50;
/// Due jobs one CLAIM promotes (the cap of `promote-batch`); upkeep promotes the rest.
pub const PROMOTE_PER_CALL: i64 = 100;
/// Expired leases one STALLED reclaims (the cap and default of `stalled-batch`).
pub const RECLAIM_PER_CALL: i64 = 100;
/// Jobs one DRAIN, CLEAN or OBLITERATE call deletes, and rows one retention pass deletes.
pub const DELETE_PER_CALL: i64 = 200;
/// Jobs one TRA.ADD creates at most (its `n`).
pub const ADD_PER_CALL: i64 = 250;
/// The `n` of TRA.ADD (its rows) and of TRA.COMPLETESNEXT (the held jobs it finishes).
pub const ADD_ROWS: Range = Range::new("n", 1, ADD_PER_CALL);
pub const FINISH_ROWS: Range = Range::new("n", 1, CLAIM_PER_CALL);

/// A COUNT checked against its range, then cut to what one call does.
pub fn batch(v: i64, r: Range, per_call: i64) -> Result<usize, Refusal> {
    let v = r.check(v)?;
    Ok(usize::try_from(v.min(per_call)).unwrap_or(0))
}

/// The COUNT of a DRAIN, CLEAN or OBLITERATE (default `DELETE_COUNT_DEFAULT`), checked and cut
/// to what one call deletes.
pub fn delete_count(count: Option<i64>) -> Result<usize, Refusal> {
    batch(count.unwrap_or(DELETE_COUNT_DEFAULT), DELETE_COUNT, DELETE_PER_CALL)
}
/// The longest CLAIM … BLOCK wait, ms (0 waits without a limit).
pub const BLOCK_MAX: i64 = 1 << 31;
pub const CLAIM_COUNT_MAX: i64 = 1000;
pub const STALLED_COUNT_MAX: i64 = 10_000;
pub const MAX_STALLS_MAX: i64 = 1000;
/// Pairs one EXTENDS renews (about 3–4 µs a pair beside a million jobs: 250 fit in 2 ms).
pub const EXTENDS_PAIRS_MAX: usize = 250;
pub const TOKEN_MAX: usize = 128;
pub const NAME_MAX: usize = 256;
/// Times are ms in a double's exact range.
pub const TIME_MAX: i64 = (1 << 53) - 1;

/// A numeric argument's accepted values, `lo..=hi`, declared once: its declaration in the
/// command table carries it (`host::command::Arg::range`) and the domain step checks it, so
/// the two cannot disagree; tests/edges.rs tries each at both ends and one past each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Range {
    /// The argument as its refusal names it.
    pub what: &'static str,
    pub lo: i64,
    pub hi: i64,
}

impl Range {
    pub const fn new(what: &'static str, lo: i64, hi: i64) -> Range {
        Range { what, lo, hi }
    }

    pub const fn contains(&self, v: i64) -> bool {
        self.lo <= v && v <= self.hi
    }

    /// `v`, or the EMQARG naming the argument (`<what> must be lo..=hi`).
    #[inline]
    pub fn check(&self, v: i64) -> Result<i64, Refusal> {
        range(v, self.lo, self.hi, self.what)
    }
}

/// The ranges of the numeric arguments (src/CONTRACT.md, "Value ranges"); those of a concern
/// with a module of its own live there (`limit`, `bus`, `sched`, `tally`).
pub const PRIORITY: Range = Range::new("PRIORITY", 0, PRIORITY_MAX);
/// TRA.PRIORITY's new priority.
pub const NEW_PRIORITY: Range = Range::new("priority", 0, PRIORITY_MAX);
pub const ATTEMPTS: Range = Range::new("ATTEMPTS", 1, ATTEMPTS_MAX);
pub const BACKOFF: Range = Range::new("backoff", 0, BACKOFF_MAX);
pub const LEASE: Range = Range::new("lease_ms", 1, LEASE_MAX);
pub const CLAIM_COUNT: Range = Range::new("COUNT", 1, CLAIM_COUNT_MAX);
pub const BLOCK: Range = Range::new("BLOCK", 0, BLOCK_MAX);
pub const STALLED_COUNT: Range = Range::new("COUNT", 1, STALLED_COUNT_MAX);
pub const MAX_STALLS: Range = Range::new("MAXSTALLS", 0, MAX_STALLS_MAX);
/// The COUNT of DRAIN, CLEAN and OBLITERATE.
pub const DELETE_COUNT: Range = Range::new("COUNT", 1, DELETE_COUNT_MAX);
/// The COUNT of a listing (TRA.JOBS, TRA.QUEUES).
pub const PAGE_COUNT: Range = Range::new("COUNT", 1, PAGE_MAX);
/// TRA.JOBS' FROM, a position in a state set.
pub const JOBS_FROM: Range = Range::new("FROM", 0, TIME_MAX);
/// TRA.QUEUES' FROM, a position in the list of queues.
pub const QUEUES_FROM: Range = Range::new("FROM", 0, i64::MAX);
pub const GRACE: Range = Range::new("GRACE", 0, TIME_MAX);
pub const AGE: Range = Range::new("AGE", 0, TIME_MAX);
/// -1 (all), 0 (none) or a count; refused as `KEEP must be -1, 0 or a count`.
pub const KEEP: Range = Range::new("KEEP", -1, i64::MAX);
/// The KEEP of TRA.LOG and TRA.ADDLOG (and `trafikey.log-keep`'s range).
pub const LOG_KEEP: Range = Range::new("KEEP", 1, 1_000_000);
pub const DEDUP_TTL: Range = Range::new("DEDUPTTL", 1, TIME_MAX);
/// A `when` once resolved (`ms`, or `+ms` from now): a past time is due now.
pub const WHEN: Range = Range::new("when", 0, TIME_MAX);
/// An EXPIRE `when` once resolved: a past time is kept (the job has expired).
pub const EXPIRE: Range = Range::new("EXPIRE", 0, TIME_MAX);

/// `lo..=hi`, or the EMQARG naming the argument.
pub fn range(v: i64, lo: i64, hi: i64, what: &str) -> Result<i64, Refusal> {
    if (lo..=hi).contains(&v) {
        Ok(v)
    } else {
        Err(Refusal::Arg(format!("{what} must be {lo}..={hi}")))
    }
}

pub fn bytes_len(b: &[u8], lo: usize, hi: usize, what: &str) -> Result<(), Refusal> {
    if (lo..=hi).contains(&b.len()) {
        Ok(())
    } else {
        Err(Refusal::Arg(format!("{what} must be {lo}..={hi} bytes")))
    }
}

pub fn token(t: &[u8]) -> Result<(), Refusal> {
    bytes_len(t, 1, TOKEN_MAX, "token")
}

/// A claim's `BY`: the worker's name, as a job's name is bounded.
pub fn worker(w: &[u8]) -> Result<(), Refusal> {
    bytes_len(w, 1, NAME_MAX, "BY")
}

pub fn payload(b: &[u8], max: usize, what: &str) -> Result<(), Refusal> {
    bytes_len(b, 0, max, what)
}

pub fn job_id(id: &[u8]) -> Result<(), Refusal> {
    if id::is_job_id(id) {
        Ok(())
    } else {
        Err(Refusal::Id(format!("malformed job id {}", errors::printable(id))))
    }
}

pub fn message_id(id: &[u8]) -> Result<(), Refusal> {
    if id::is_message_id(id) {
        Ok(())
    } else {
        Err(Refusal::Id(format!("malformed message id {}", errors::printable(id))))
    }
}

/// The due time of a `when` at server time `now`: a time in the past is due now.
pub fn due(when: When, now: i64) -> Result<i64, Refusal> {
    let at = match when {
        When::At(t) => t,
        When::In(d) => now.saturating_add(d),
    };
    let t = WHEN.check(at)?;
    Ok(t.max(now))
}

/// The time a job expires (its EXPIRE): like `due`, but a time already past is kept as given
/// (the job is then expired from the start: never handed out, failed by the first CLAIM or
/// upkeep that meets it).
pub fn expiry(when: When, now: i64) -> Result<i64, Refusal> {
    let at = match when {
        When::At(t) => t,
        When::In(d) => now.saturating_add(d),
    };
    EXPIRE.check(at)
}

/// Whether a job that expires at `at` has expired at `now`: from its EXPIRE time on (taken
/// *by* that time means before it) it is no longer handed out. A CLAIM that takes it in time
/// spends its EXPIRE (deletes it from the row), so a retry, a stall or REPROCESS that makes it
/// wait again does not expire it.
pub fn expired(at: Option<i64>, now: i64) -> bool {
    at.is_some_and(|at| now >= at)
}

/// Which of the jobs one call finishes go at once instead of into their finished set: every
/// one with `all` (KEEP 0), else the `n` lowest ids among those finishing (`Some`) — with one
/// finish time for the whole call, the lowest ids are the oldest jobs, the ones retention
/// would take first.
pub fn gone_at_once(ids: &[Option<&[u8]>], n: u64, all: bool) -> smallvec::SmallVec<[bool; 8]> {
    let mut gone: smallvec::SmallVec<[bool; 8]> = ids.iter().map(|id| all && id.is_some()).collect();
    if n == 0 {
        return gone;
    }
    let mut finishing: Vec<(usize, &[u8])> =
        ids.iter().enumerate().filter_map(|(i, id)| id.map(|b| (i, b))).collect();
    finishing.sort_by(|a, b| a.1.cmp(b.1));
    for (i, _) in finishing.into_iter().take(usize::try_from(n).unwrap_or(usize::MAX)) {
        if let Some(g) = gone.get_mut(i) {
            *g = true;
        }
    }
    gone
}

/// A lease's deadline: `now + lease_ms`, both already range-checked.
pub fn deadline(now: i64, lease_ms: i64) -> i64 {
    now.saturating_add(lease_ms).min(TIME_MAX)
}

pub fn backoff(b: Backoff) -> Result<Backoff, Refusal> {
    match b {
        Backoff::Fixed(ms) => BACKOFF.check(ms).map(Backoff::Fixed),
        Backoff::Exp(ms) => BACKOFF.check(ms).map(Backoff::Exp),
    }
}

/// The delay before the next attempt, after `made` finished attempts (made >= 1):
/// FIXED d, or EXP d·2^(made−1), saturating at the time range.
pub fn backoff_delay(b: Option<Backoff>, made: i64) -> i64 {
    match b {
        None => 0,
        Some(Backoff::Fixed(d)) => d,
        Some(Backoff::Exp(d)) => {
            let shift = made.saturating_sub(1).clamp(0, 63) as u32;
            let factor = 1i64.checked_shl(shift).filter(|f| *f > 0).unwrap_or(i64::MAX);
            d.saturating_mul(factor).min(TIME_MAX)
        }
    }
}

/// The row's stored form of a backoff: `f<ms>` or `e<ms>`.
pub fn backoff_encode(b: Backoff) -> String {
    match b {
        Backoff::Fixed(ms) => format!("f{ms}"),
        Backoff::Exp(ms) => format!("e{ms}"),
    }
}

pub fn backoff_decode(s: &[u8]) -> Option<Backoff> {
    match s.split_first()? {
        (b'f', ms) => args::int(ms).map(Backoff::Fixed),
        (b'e', ms) => args::int(ms).map(Backoff::Exp),
        _ => None,
    }
}

/// What FAIL does with a held job after counting the attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AfterFail {
    /// Ready again now.
    Retry,
    /// Delayed by this many ms.
    Delay(i64),
    /// Failed for good.
    Fail,
}

pub fn after_fail(made: i64, attempts: i64, final_: bool, b: Option<Backoff>) -> AfterFail {
    if final_ || made >= attempts {
        return AfterFail::Fail;
    }
    match backoff_delay(b, made) {
        0 => AfterFail::Retry,
        d => AfterFail::Delay(d),
    }
}

/// Retention: `KEEP` -1 keeps everything, 0 deletes the finished job at once, n keeps the n
/// newest of the finished set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keep {
    All,
    None,
    /// Exactly the n newest (a call's `KEEP n`).
    Newest(u64),
    /// About the n newest (the config default): trimmed back to n once it is over by
    /// [`slack`], so retention's deletes come in batches instead of one per finish.
    Soft(u64),
}

/// How far a soft cap of n may be exceeded before it is trimmed: n/16, at most 64 (0 for
/// n < 16, where the cap is exact).
pub fn slack(n: u64) -> u64 {
    (n / 16).min(64)
}

/// The config default's retention: a soft cap, or all / none.
pub fn keep_default(v: i64) -> Keep {
    match keep(v) {
        Ok(Keep::Newest(n)) => Keep::Soft(n),
        Ok(k) => k,
        Err(_) => Keep::All,
    }
}

pub fn keep(v: i64) -> Result<Keep, Refusal> {
    match v {
        _ if !KEEP.contains(v) => Err(Refusal::Arg("KEEP must be -1, 0 or a count".into())),
        -1 => Ok(Keep::All),
        0 => Ok(Keep::None),
        n => Ok(Keep::Newest(n.unsigned_abs())),
    }
}

/// How many of the oldest entries to drop from a finished set holding `len` entries (the
/// finished job included) under `keep`, at most `batch` in one call.
pub fn trim_count(len: u64, keep: Keep, batch: u64) -> u64 {
    match keep {
        Keep::All | Keep::None => 0,
        Keep::Newest(n) => len.saturating_sub(n).min(batch),
        Keep::Soft(n) if len > n.saturating_add(slack(n)) => len.saturating_sub(n).min(batch),
        Keep::Soft(_) => 0,
    }
}

/// What a read of `{emq}:version` found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stored<'a> {
    Absent,
    Value(&'a [u8]),
    OtherType,
}

/// The fence's verdict over its one read: only the module's identity passes.
pub fn fence(stored: Stored<'_>) -> Result<(), Refusal> {
    match stored {
        Stored::Value(v) if v == keyspace::EPOCH => Ok(()),
        Stored::Value(v) => Err(errors::wire_found(v)),
        Stored::Absent => Err(errors::wire_absent()),
        Stored::OtherType => Err(Refusal::WrongType),
    }
}

/// EMQ.INSTALL's decision, before its single write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Install {
    /// Absent: one SET of the constant, reply 1.
    Write,
    /// Already the module's value: nothing written, reply 0.
    Equal,
}

pub fn install(stored: Stored<'_>) -> Result<Install, Refusal> {
    match stored {
        Stored::Absent => Ok(Install::Write),
        Stored::Value(v) if v == keyspace::EPOCH => Ok(Install::Equal),
        Stored::Value(v) => Err(errors::wire_found(v)),
        Stored::OtherType => Err(Refusal::WrongType),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn fence_and_install_lanes() {
        assert_eq!(fence(Stored::Value(b"echomq:6.0.0")), Ok(()));
        assert_eq!(fence(Stored::Absent), Err(errors::wire_absent()));
        assert_eq!(fence(Stored::Value(b"echomq:4.0.0")), Err(errors::wire_found(b"echomq:4.0.0")));
        assert_eq!(fence(Stored::OtherType), Err(Refusal::WrongType));
        assert_eq!(install(Stored::Absent), Ok(Install::Write));
        assert_eq!(install(Stored::Value(keyspace::EPOCH)), Ok(Install::Equal));
        assert_eq!(install(Stored::Value(b"echomq:6.0.0 ")), Err(errors::wire_found(b"echomq:6.0.0 ")));
        assert_eq!(install(Stored::OtherType), Err(Refusal::WrongType));
    }

    #[test]
    fn backoff_math() {
        assert_eq!(backoff_delay(None, 3), 0);
        assert_eq!(backoff_delay(Some(Backoff::Fixed(50)), 9), 50);
        assert_eq!(backoff_delay(Some(Backoff::Exp(100)), 1), 100);
        assert_eq!(backoff_delay(Some(Backoff::Exp(100)), 2), 200);
        assert_eq!(backoff_delay(Some(Backoff::Exp(100)), 4), 800);
        assert_eq!(backoff_delay(Some(Backoff::Exp(BACKOFF_MAX)), 1_000_000), TIME_MAX);
        assert_eq!(backoff_delay(Some(Backoff::Exp(0)), 64), 0);
        assert_eq!(after_fail(1, 3, false, None), AfterFail::Retry);
        assert_eq!(after_fail(1, 3, false, Some(Backoff::Exp(10))), AfterFail::Delay(10));
        assert_eq!(after_fail(3, 3, false, None), AfterFail::Fail);
        assert_eq!(after_fail(1, 3, true, None), AfterFail::Fail);
        assert_eq!(backoff_decode(backoff_encode(Backoff::Exp(7)).as_bytes()), Some(Backoff::Exp(7)));
        assert_eq!(backoff_decode(b"x1"), None);
    }

    #[test]
    fn times() {
        assert_eq!(due(When::At(5), 10), Ok(10), "past is due now");
        assert_eq!(due(When::At(50), 10), Ok(50));
        assert_eq!(due(When::In(5), 10), Ok(15));
        assert!(matches!(due(When::At(TIME_MAX + 1), 10), Err(Refusal::Arg(_))));
        assert!(matches!(due(When::In(i64::MAX), 10), Err(Refusal::Arg(_))));
    }

    #[test]
    fn retention() {
        assert_eq!(keep(-1), Ok(Keep::All));
        assert_eq!(keep(0), Ok(Keep::None));
        assert_eq!(keep(3), Ok(Keep::Newest(3)));
        assert!(keep(-2).is_err());
        assert_eq!(trim_count(10, Keep::Newest(3), 1000), 7);
        assert_eq!(trim_count(10, Keep::Newest(3), 5), 5);
        assert_eq!(trim_count(2, Keep::Newest(3), 5), 0);
        assert_eq!(trim_count(2, Keep::All, 5), 0);
        // the soft cap: 1000 may grow to 1062, then goes back to 1000 in one call
        assert_eq!(slack(1000), 62);
        assert_eq!(trim_count(1062, Keep::Soft(1000), 1000), 0);
        assert_eq!(trim_count(1063, Keep::Soft(1000), 1000), 63);
        assert_eq!(trim_count(1063, Keep::Soft(1000), 10), 10);
        assert_eq!(slack(100_000), 64);
        assert_eq!(trim_count(2, Keep::Soft(1), 5), 1, "small caps are exact");
        assert_eq!(keep_default(1000), Keep::Soft(1000));
        assert_eq!(keep_default(0), Keep::None);
        assert_eq!(keep_default(-1), Keep::All);
    }

    proptest! {
        #[test]
        fn backoff_never_overflows(d in 0..=BACKOFF_MAX, made in any::<i64>()) {
            let v = backoff_delay(Some(Backoff::Exp(d)), made);
            prop_assert!((0..=TIME_MAX).contains(&v));
        }

        #[test]
        fn due_is_never_before_now(t in any::<i64>(), now in 0..TIME_MAX, rel in any::<bool>()) {
            let w = if rel { When::In(t.saturating_abs()) } else { When::At(t.saturating_abs()) };
            if let Ok(d) = due(w, now) { prop_assert!(d >= now && d <= TIME_MAX); }
        }
    }
}

/// Tests that kill the mutants cargo-mutants left alive (scripts/mutants; tests/MUTANTS.md).
#[cfg(test)]
mod mutants_killed {
    use super::*;

    #[test]
    fn the_ranges_are_the_contracts_numbers() {
        // src/CONTRACT.md, "Argument ranges": written out, not computed as the code does.
        assert_eq!(PRIORITY_MAX, 2_097_151);
        assert_eq!(BACKOFF_MAX, 2_147_483_648);
        assert_eq!(LEASE_MAX, 2_147_483_648);
        assert_eq!(BLOCK_MAX, 2_147_483_648);
        assert_eq!(TIME_MAX, 9_007_199_254_740_991);
    }

    #[test]
    fn a_batch_is_range_checked_then_cut_to_one_call() {
        let r = Range::new("COUNT", 1, 1000);
        assert_eq!(batch(1, r, 100), Ok(1));
        assert_eq!(batch(7, r, 100), Ok(7));
        assert_eq!(batch(100, r, 100), Ok(100));
        assert_eq!(batch(1000, r, 100), Ok(100));
        for bad in [0, -1, 1001] {
            assert_eq!(batch(bad, r, 100), Err(Refusal::Arg("COUNT must be 1..=1000".into())));
        }
    }

    #[test]
    fn a_delete_count_defaults_to_1000_and_deletes_200_at_most() {
        assert_eq!(delete_count(None), Ok(200));
        assert_eq!(delete_count(Some(1)), Ok(1));
        assert_eq!(delete_count(Some(199)), Ok(199));
        assert_eq!(delete_count(Some(10_000)), Ok(200));
        for bad in [0, 10_001] {
            assert_eq!(delete_count(Some(bad)), Err(Refusal::Arg("COUNT must be 1..=10000".into())));
        }
    }

    #[test]
    fn byte_lengths_tokens_payloads_and_ids_are_gated() {
        assert_eq!(bytes_len(b"ab", 1, 3, "x"), Ok(()));
        assert_eq!(bytes_len(b"", 1, 3, "x"), Err(Refusal::Arg("x must be 1..=3 bytes".into())));
        assert!(bytes_len(b"abcd", 1, 3, "x").is_err());
        assert_eq!(token(b"w"), Ok(()));
        assert_eq!(token(&[b'w'; TOKEN_MAX]), Ok(()));
        assert!(token(b"").is_err());
        assert!(token(&[b'w'; TOKEN_MAX + 1]).is_err());
        assert_eq!(payload(b"", 2, "data"), Ok(()));
        assert_eq!(payload(b"ab", 2, "data"), Ok(()));
        assert_eq!(payload(b"abc", 2, "data"), Err(Refusal::Arg("data must be 0..=2 bytes".into())));
        assert_eq!(job_id(b"JOB00000000001"), Ok(()));
        assert!(matches!(job_id(b"MSG00000000001"), Err(Refusal::Id(m)) if m.contains("malformed job id")));
        assert_eq!(message_id(b"MSG00000000001"), Ok(()));
        assert!(
            matches!(message_id(b"M1G00000000001"), Err(Refusal::Id(m)) if m.contains("malformed message id"))
        );
    }

    #[test]
    fn a_deadline_is_now_plus_the_lease_within_the_time_range() {
        assert_eq!(deadline(100, 50), 150);
        assert_eq!(deadline(0, LEASE_MAX), LEASE_MAX);
        assert_eq!(deadline(TIME_MAX - 1, 10), TIME_MAX);
    }

    #[test]
    fn both_backoff_kinds_decode() {
        assert_eq!(backoff_decode(b"f250"), Some(Backoff::Fixed(250)));
        assert_eq!(backoff_decode(backoff_encode(Backoff::Fixed(0)).as_bytes()), Some(Backoff::Fixed(0)));
        assert_eq!(backoff_decode(b"e9"), Some(Backoff::Exp(9)));
        assert_eq!(backoff_decode(b"f"), None);
        assert_eq!(backoff_decode(b""), None);
    }

    #[test]
    fn an_expiry_keeps_a_past_time_and_a_job_expires_from_that_time_on() {
        assert_eq!(expiry(When::At(5), 10), Ok(5), "unlike due, a past time is kept");
        assert_eq!(expiry(When::At(50), 10), Ok(50));
        assert_eq!(expiry(When::In(5), 10), Ok(15));
        assert!(matches!(expiry(When::At(TIME_MAX + 1), 10), Err(Refusal::Arg(_))));
        assert!(matches!(expiry(When::In(i64::MAX), 10), Err(Refusal::Arg(_))));
        assert!(!expired(None, 10));
        assert!(!expired(Some(11), 10));
        assert!(expired(Some(10), 10), "at its EXPIRE time a job has expired");
        assert!(expired(Some(9), 10));
    }
}
