//! The pure parsers at scale: property tests (`PARSER_CASES` cases each, default 10 000) over
//! the public API of every parser the module runs before it touches the server — numbers,
//! `when`s, options (`domain::args`), ids (`domain::id`), the value ranges and decisions of
//! `domain` and `domain::bus`, the coherence drop's version, keys (`keyspace`), the fence's
//! verdict, error lines (`errors`) — and every command's argument shape (`Verb::shape`, over
//! vectors generated from the command table's own argument tree, `host::command::Arg`).
//!
//! Each asserts properties: no panic on any bytes, round trips, bounds respected, refusals
//! of the documented class for what is out of range — not only that the code runs.
//! No server is started: these are plain functions.
// A test may panic: that is how it fails. The module's own rules are for src/.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

use std::panic::{catch_unwind, AssertUnwindSafe};

use proptest::prelude::*;
use proptest::test_runner::Config;

use trafikey::domain::args::{self, Backoff, Opt, When};
use trafikey::domain::{self, bus, coherence, id, Keep, Stored};
use trafikey::errors::{self, Class, Refusal};
use trafikey::host::command::ShapeFn;
use trafikey::host::command::{Arg, Shape, Ty};
use trafikey::host::ArgStr;
use trafikey::keyspace::{self, Role};
use trafikey::verbs::COMMANDS;

fn cases() -> u32 {
    std::env::var("PARSER_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000)
}

fn config() -> Config {
    Config { cases: cases(), failure_persistence: None, ..Config::default() }
}

/// Bytes that are often near a parser's edges: digits, signs, option words, NUL, non-ASCII.
fn edgy() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..24),
        "[-+]{0,2}[0-9]{0,21}".prop_map(String::into_bytes),
        "[-+ 0-9a-zA-Z.]{0,12}".prop_map(String::into_bytes),
        proptest::sample::select(WORDS.to_vec()).prop_map(|(w, _)| w.as_bytes().to_vec()),
    ]
}

// ---------------------------------------------------------------------------------------
// Numbers and times.

proptest! {
    #![proptest_config(config())]

    /// `int` is the strict decimal: optional `-`, digits, an i64 other than i64::MIN; every
    /// other byte string is refused, and it never panics.
    #[test]
    fn int_is_the_strict_decimal(b in edgy()) {
        let text = std::str::from_utf8(&b).ok();
        let shaped = text.is_some_and(|t| {
            let d = t.strip_prefix('-').unwrap_or(t);
            !d.is_empty() && d.bytes().all(|c| c.is_ascii_digit())
        });
        let exact = text.filter(|_| shaped).and_then(|t| t.parse::<i128>().ok());
        let expect = exact.and_then(|v| i64::try_from(v).ok()).filter(|v| *v != i64::MIN);
        prop_assert_eq!(args::int(&b), expect);
        // number() is int() with the shape refusal naming the argument.
        match args::number(&b, "COUNT") {
            Ok(v) => prop_assert_eq!(Some(v), expect),
            Err(e) => {
                prop_assert!(expect.is_none());
                prop_assert_eq!(e.class(), Class::Shape);
                prop_assert!(e.to_string().contains("COUNT"));
            }
        }
    }

    /// Every i64 but MIN round-trips through its decimal text, with or without leading zeros.
    #[test]
    fn int_round_trips(v in any::<i64>(), zeros in 0usize..4) {
        prop_assume!(v != i64::MIN);
        prop_assert_eq!(args::int(v.to_string().as_bytes()), Some(v));
        let padded = if v < 0 { format!("-{}{}", "0".repeat(zeros), v.unsigned_abs()) } else { format!("{}{v}", "0".repeat(zeros)) };
        prop_assert_eq!(args::int(padded.as_bytes()), Some(v));
    }

    /// `when`: digits are absolute (≥ 0), `+digits` relative (≥ 0); anything else — a sign
    /// other than one leading `+`, no digits, junk — is the shape refusal.
    #[test]
    fn when_parses_exactly_the_two_forms(b in edgy()) {
        match args::when(&b) {
            Ok(When::At(t)) => {
                prop_assert!(t >= 0);
                prop_assert_eq!(args::int(&b), Some(t));
            }
            Ok(When::In(d)) => {
                prop_assert!(d >= 0);
                prop_assert_eq!(b.first(), Some(&b'+'));
                prop_assert_eq!(args::int(&b[1..]), Some(d));
            }
            Err(e) => {
                prop_assert_eq!(e.class(), Class::Shape);
                let fine = match b.strip_prefix(b"+") {
                    Some(rest) => !rest.starts_with(b"-") && args::int(rest).is_some(),
                    None => !b.starts_with(b"-") && args::int(&b).is_some(),
                };
                prop_assert!(!fine, "refused a well-formed when {:?}", b);
            }
        }
    }

    #[test]
    fn when_round_trips(t in 0..=i64::MAX) {
        prop_assert_eq!(args::when(t.to_string().as_bytes()), Ok(When::At(t)));
        prop_assert_eq!(args::when(format!("+{t}").as_bytes()), Ok(When::In(t)));
        let (neg, plus_neg) = (format!("-{}", t), format!("+-{}", t));
        prop_assert!(args::when(neg.as_bytes()).is_err());
        prop_assert!(args::when(plus_neg.as_bytes()).is_err());
    }

    /// A due time is never before now nor past the time range; in range it is exact.
    #[test]
    fn due_is_bounded_and_exact(t in any::<i64>(), now in 0..=domain::TIME_MAX, rel in any::<bool>()) {
        let t = t.checked_abs().unwrap_or(i64::MAX);
        let w = if rel { When::In(t) } else { When::At(t) };
        let at = if rel { now.checked_add(t) } else { Some(t) };
        match domain::due(w, now) {
            Ok(d) => {
                prop_assert!(d >= now && d <= domain::TIME_MAX);
                prop_assert_eq!(d, at.unwrap_or(i64::MAX).max(now));
            }
            Err(e) => {
                prop_assert_eq!(e.class(), Class::Arg);
                prop_assert!(at.is_none_or(|a| a > domain::TIME_MAX));
            }
        }
    }

    /// Ranges: in is Ok (the value itself), out is the EMQARG naming it.
    #[test]
    fn ranges_refuse_exactly_what_is_outside(v in any::<i64>(), lo in -5i64..5, span in 0i64..10) {
        let hi = lo + span;
        match domain::range(v, lo, hi, "X") {
            Ok(x) => { prop_assert_eq!(x, v); prop_assert!((lo..=hi).contains(&v)); }
            Err(e) => {
                prop_assert!(!(lo..=hi).contains(&v));
                prop_assert_eq!(e.class(), Class::Arg);
                prop_assert_eq!(e.to_string(), format!("EMQARG X must be {lo}..={hi}"));
            }
        }
    }

    #[test]
    fn byte_lengths(b in proptest::collection::vec(any::<u8>(), 0..300), max in 0usize..200) {
        prop_assert_eq!(domain::token(&b).is_ok(), (1..=domain::TOKEN_MAX).contains(&b.len()));
        prop_assert_eq!(domain::payload(&b, max, "data").is_ok(), b.len() <= max);
        if let Err(e) = domain::payload(&b, max, "data") { prop_assert_eq!(e.class(), Class::Arg); }
    }

    /// COUNT → a batch: out of range is EMQARG; in range it is cut to what one call does.
    #[test]
    fn batches_are_cut(v in any::<i64>(), max in 1i64..20_000, per in 1i64..500) {
        match domain::batch(v, domain::Range::new("COUNT", 1, max), per) {
            Ok(n) => { prop_assert!((1..=max).contains(&v)); prop_assert_eq!(n as i64, v.min(per)); }
            Err(e) => { prop_assert!(!(1..=max).contains(&v)); prop_assert_eq!(e.class(), Class::Arg); }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Backoff, retention, fail decisions.

proptest! {
    #![proptest_config(config())]

    #[test]
    fn backoff_range_and_row_form(ms in any::<i64>(), exp in any::<bool>()) {
        let b = if exp { Backoff::Exp(ms) } else { Backoff::Fixed(ms) };
        prop_assert_eq!(domain::backoff(b).is_ok(), (0..=domain::BACKOFF_MAX).contains(&ms));
        // The row's form round-trips for every value (i64::MIN's text does not parse back:
        // no value range lets it in).
        if ms != i64::MIN {
            prop_assert_eq!(domain::backoff_decode(domain::backoff_encode(b).as_bytes()), Some(b));
        }
    }

    /// A stored backoff of any bytes decodes to a kind and a strict integer, or to nothing.
    #[test]
    fn backoff_decode_never_panics(b in edgy()) {
        if let Some(d) = domain::backoff_decode(&b) {
            let (kind, ms) = match d { Backoff::Fixed(ms) => (b'f', ms), Backoff::Exp(ms) => (b'e', ms) };
            prop_assert_eq!(b[0], kind);
            prop_assert_eq!(args::int(&b[1..]), Some(ms));
        }
    }

    /// The delay is bounded, FIXED is constant, EXP doubles per attempt until it saturates.
    #[test]
    fn backoff_delays(d in 0..=domain::BACKOFF_MAX, made in 1i64..200) {
        let e = domain::backoff_delay(Some(Backoff::Exp(d)), made);
        prop_assert!((0..=domain::TIME_MAX).contains(&e));
        prop_assert!(domain::backoff_delay(Some(Backoff::Exp(d)), made + 1) >= e);
        prop_assert_eq!(domain::backoff_delay(Some(Backoff::Fixed(d)), made), d);
        prop_assert_eq!(domain::backoff_delay(None, made), 0);
        let exact = if made > 63 {
            if d == 0 { 0 } else { domain::TIME_MAX as i128 }
        } else {
            ((d as i128) << (made - 1)).min(domain::TIME_MAX as i128)
        };
        prop_assert_eq!(e as i128, exact);
    }

    #[test]
    fn after_fail_decides_by_attempts(made in 1i64..10, attempts in 1i64..10, fin in any::<bool>(), d in 0i64..3, kind in 0u8..3) {
        let b = match kind { 0 => None, 1 => Some(Backoff::Fixed(d)), _ => Some(Backoff::Exp(d)) };
        let r = domain::after_fail(made, attempts, fin, b);
        let expect = if fin || made >= attempts {
            domain::AfterFail::Fail
        } else if domain::backoff_delay(b, made) == 0 {
            domain::AfterFail::Retry
        } else {
            domain::AfterFail::Delay(domain::backoff_delay(b, made))
        };
        prop_assert_eq!(r, expect);
    }

    /// KEEP: -1 all, 0 none, n the n newest; below -1 is EMQARG. Trims never exceed the batch
    /// nor the set, and leave the n newest (exactly, or within the soft cap's slack).
    #[test]
    fn retention(v in any::<i64>(), len in 0u64..3000, batch in 1u64..2000) {
        match domain::keep(v) {
            Ok(Keep::All) => prop_assert_eq!(v, -1),
            Ok(Keep::None) => prop_assert_eq!(v, 0),
            Ok(Keep::Newest(n)) => prop_assert_eq!(n as i64, v),
            Ok(Keep::Soft(_)) => prop_assert!(false, "a call's KEEP is exact"),
            Err(e) => { prop_assert!(v < -1); prop_assert_eq!(e.class(), Class::Arg); }
        }
        let n = v.unsigned_abs() % 5000;
        let slack = domain::slack(n);
        prop_assert!(slack <= 64 && slack <= n / 16);
        let hard = domain::trim_count(len, Keep::Newest(n), batch);
        prop_assert_eq!(hard, len.saturating_sub(n).min(batch));
        let soft = domain::trim_count(len, Keep::Soft(n), batch);
        prop_assert_eq!(soft, if len > n + slack { (len - n).min(batch) } else { 0 });
        prop_assert_eq!(domain::trim_count(len, Keep::All, batch), 0);
        prop_assert_eq!(domain::trim_count(len, Keep::None, batch), 0);
        // The config default: a soft cap, or all / none; never a refusal.
        let d = domain::keep_default(v);
        prop_assert!(matches!((v, d), (-1, Keep::All) | (0, Keep::None) | (_, Keep::Soft(_)) | (_, Keep::All)));
    }
}

// ---------------------------------------------------------------------------------------
// Ids, keys, the fence, error lines.

/// An independent Base62 decoder: the payload's value, if it fits in a u64.
fn decode62(p: &[u8]) -> Option<u64> {
    const A: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    p.iter()
        .try_fold(0u64, |acc, &c| acc.checked_mul(62)?.checked_add(A.iter().position(|&a| a == c)? as u64))
}

fn near_id() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..20),
        "(JOB|MSG|job|J0B|abc)[0-9A-Za-z]{9,12}".prop_map(String::into_bytes),
        "JOB[L-Z][a-z0-9]{10}".prop_map(String::into_bytes),
        any::<u64>().prop_map(|n| id::encode(id::JOB_BRAND, n).to_vec()),
    ]
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn job_and_message_ids(b in near_id()) {
        let payload_ok = b.len() == id::LEN
            && b[3..].iter().all(u8::is_ascii_alphanumeric)
            && decode62(&b[3..]).is_some();
        prop_assert_eq!(id::is_job_id(&b), payload_ok && &b[..3] == b"JOB");
        prop_assert_eq!(id::is_message_id(&b), payload_ok && b[..3].iter().all(u8::is_ascii_alphabetic));
        // The gates: Ok, or EMQID with a safe line.
        match domain::job_id(&b) {
            Ok(()) => prop_assert!(id::is_job_id(&b)),
            Err(e) => {
                prop_assert_eq!(e.class(), Class::Id);
                prop_assert!(e.line().bytes().all(|c| (0x20..0x7f).contains(&c)));
            }
        }
        prop_assert_eq!(domain::message_id(&b).is_ok(), id::is_message_id(&b));
    }

    /// encode is decodable, passes the gate, and byte order is number order.
    #[test]
    fn ids_round_trip(a in any::<u64>(), b in any::<u64>()) {
        let (x, y) = (id::encode(id::JOB_BRAND, a), id::encode(b"MSG", b));
        prop_assert_eq!(decode62(&x[3..]), Some(a));
        prop_assert!(id::is_job_id(&x) && id::is_message_id(&y) && !id::is_job_id(&y));
        prop_assert_eq!(x[3..].cmp(&y[3..]), a.cmp(&b));
    }

    /// Keys of every role (the log and the bus included) round-trip; any bytes parse to a
    /// key that builds back to themselves, or to nothing.
    #[test]
    fn keys_round_trip(q in proptest::collection::vec((0x21u8..=0xff).prop_filter("brace", |b| *b != b'{' && *b != b'}'), 1..=keyspace::MAX_QUEUE),
                       r in 0usize..Role::ALL.len(), s in proptest::collection::vec(any::<u8>(), 1..30)) {
        let role = Role::ALL[r];
        let k = keyspace::key(&q, role, &s);
        let p = keyspace::parse(&k).expect("a built key parses");
        prop_assert_eq!((p.queue, p.role), (&q[..], role));
        prop_assert_eq!(p.suffix, if role.suffixed() { &s[..] } else { &b""[..] });
        prop_assert_eq!(keyspace::parse_as(&k, role), Some(p));
        prop_assert_eq!(keyspace::parse_in(&k, &q, role), Some(p.suffix));
        for other in Role::ALL.iter().filter(|o| **o != role) {
            prop_assert_eq!(keyspace::parse_as(&k, *other), None);
        }
    }

    #[test]
    fn any_key_bytes(k in prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..60),
        "emq:\\{[a-z{}]{0,3}\\}:(wait|log:|job:|fails:|bus|seen|meta|events|x)[A-Z0-9]{0,3}".prop_map(String::into_bytes),
    ]) {
        if let Some(p) = keyspace::parse(&k) {
            prop_assert!(keyspace::valid_queue(p.queue));
            prop_assert_eq!(keyspace::key(p.queue, p.role, p.suffix), k.clone());
            prop_assert!(!p.role.suffixed() || !p.suffix.is_empty());
        }
        for role in Role::ALL {
            prop_assert_eq!(keyspace::parse_as(&k, role), keyspace::parse(&k).filter(|p| p.role == role));
        }
    }

    /// The fence passes exactly the wire's value; INSTALL writes only over nothing.
    #[test]
    fn fence_verdicts(v in prop_oneof![edgy(), Just(keyspace::EPOCH.to_vec()), Just(b"echomq:4.0.0".to_vec())]) {
        let f = domain::fence(Stored::Value(&v));
        prop_assert_eq!(f.is_ok(), v == keyspace::EPOCH);
        if let Err(e) = f {
            prop_assert_eq!(e.class(), Class::Wire);
            prop_assert!(e.line().starts_with(errors::WIRE_FOUND));
            prop_assert!(e.line().bytes().all(|c| (0x20..0x7f).contains(&c)));
        }
        prop_assert_eq!(domain::install(Stored::Value(&v)).is_ok(), v == keyspace::EPOCH);
    }

    /// The bus's counters, caps and versions.
    #[test]
    fn bus_and_drop(n in 0i64..i64::MAX, b in edgy(), m in any::<i64>(), v in proptest::collection::vec(any::<u8>(), 0..20)) {
        prop_assert_eq!(bus::next_count(Some(n.to_string().as_bytes())), n.checked_add(1));
        if let Some(c) = bus::next_count(Some(&b)) {
            prop_assert!(c >= 1);
            prop_assert_eq!(args::int(&b), Some(c - 1));
        }
        prop_assert_eq!(bus::max_len(Some(m), 7).is_ok(), (1..=bus::MAXLEN_MAX).contains(&m));
        prop_assert_eq!(coherence::version(&v).is_ok(), v.len() == id::LEN);
    }
}

// ---------------------------------------------------------------------------------------
// Options.

/// Every option word and its `Opt` (the parser's own table is private). A new option fails
/// to compile in `parsed` below until it is listed here too.
/// `FROM` is listed once, for TRA.JOBS' number; REPROCESS's `FROM completed|failed`
/// (`Opt::FromSet`, a word) is parsed by the same code as OPTS' blob.
const WORDS: [(&str, Opt); 35] = [
    ("PRIORITY", Opt::Priority),
    ("ATTEMPTS", Opt::Attempts),
    ("BACKOFF", Opt::Backoff),
    ("OPTS", Opt::Opts),
    ("LIFO", Opt::Lifo),
    ("KEEP", Opt::Keep),
    ("AGE", Opt::Age),
    ("FINAL", Opt::Final),
    ("COUNT", Opt::Count),
    ("MAXSTALLS", Opt::MaxStalls),
    ("MAXLEN", Opt::MaxLen),
    ("TTL", Opt::Ttl),
    ("BLOCK", Opt::Block),
    ("FROM", Opt::From),
    ("REV", Opt::Rev),
    ("FORCE", Opt::Force),
    ("DELAYED", Opt::Delayed),
    ("GRACE", Opt::Grace),
    ("EXPIRE", Opt::Expire),
    ("ECHO", Opt::Echo),
    ("ROW", Opt::Row),
    ("RETRY", Opt::Retry),
    ("DELAY", Opt::Delay),
    ("STACK", Opt::Stack),
    ("KEEPMADE", Opt::KeepMade),
    ("KEEPSTARTED", Opt::KeepStarted),
    ("KEEPPROGRESS", Opt::KeepProgress),
    ("ALIAS", Opt::Alias),
    ("DEDUP", Opt::Dedup),
    ("DEDUPTTL", Opt::DedupTtl),
    ("EXTEND", Opt::Extend),
    ("REPLACE", Opt::Replace),
    ("KEEPLAST", Opt::KeepLast),
    ("METRICS", Opt::Metrics),
    ("BY", Opt::By),
];

fn is_flag(o: Opt) -> bool {
    matches!(
        o,
        Opt::Lifo
            | Opt::Final
            | Opt::Rev
            | Opt::Force
            | Opt::Delayed
            | Opt::Echo
            | Opt::Row
            | Opt::Retry
            | Opt::KeepMade
            | Opt::KeepStarted
            | Opt::KeepProgress
            | Opt::Extend
            | Opt::Replace
            | Opt::KeepLast
    )
}

/// One option with a valid value, as words: (the words, the value it must parse to).
fn option_words(o: Opt, v: i64, lower: bool) -> Vec<Vec<u8>> {
    let w = WORDS.iter().find(|(_, x)| *x == o).map(|(w, _)| *w).unwrap_or("?");
    let w = if lower { w.to_ascii_lowercase() } else { w.to_string() };
    let mut out = vec![w.into_bytes()];
    match o {
        _ if is_flag(o) => {}
        Opt::Backoff => out.extend([
            if v % 2 == 0 { b"fixed".to_vec() } else { b"EXP".to_vec() },
            v.to_string().into_bytes(),
        ]),
        Opt::Opts | Opt::Stack => out.push(format!("blob {v}").into_bytes()),
        Opt::Expire | Opt::Delay => {
            out.push(if v % 2 == 0 { format!("+{v}") } else { v.to_string() }.into_bytes())
        }
        Opt::Alias => out.push(format!("key {v}").into_bytes()),
        Opt::Dedup => out.push(format!("id {v}").into_bytes()),
        Opt::By => out.push(format!("worker {v}").into_bytes()),
        _ => out.push(v.to_string().into_bytes()),
    }
    out
}

/// What `options` says about one option of `o`, as comparable values.
fn parsed(o: &args::Options<&[u8]>, opt: Opt) -> Option<String> {
    let n = |x: Option<i64>| x.map(|v| v.to_string());
    let f = |b: bool| b.then(|| "set".to_string());
    match opt {
        Opt::Priority => n(o.priority),
        Opt::Attempts => n(o.attempts),
        Opt::Backoff => o.backoff.map(|b| match b {
            Backoff::Fixed(v) | Backoff::Exp(v) => v.to_string(),
        }),
        Opt::Opts => o.opts.map(|b| String::from_utf8_lossy(b).into_owned()),
        Opt::Lifo => f(o.lifo),
        Opt::Keep => n(o.keep),
        Opt::Age => n(o.age),
        Opt::Final => f(o.final_),
        Opt::Count => n(o.count),
        Opt::MaxStalls => n(o.max_stalls),
        Opt::MaxLen => n(o.max_len),
        Opt::Ttl => n(o.ttl),
        Opt::Block => n(o.block),
        Opt::From => n(o.from),
        Opt::Rev => f(o.rev),
        Opt::Force => f(o.force),
        Opt::Delayed => f(o.delayed),
        Opt::Echo => f(o.echo),
        Opt::Row => f(o.row),
        Opt::Grace => n(o.grace),
        Opt::Metrics => n(o.metrics),
        Opt::Expire | Opt::Delay => (if opt == Opt::Delay { o.delay } else { o.expire }).map(|w| match w {
            When::At(t) => t.to_string(),
            When::In(d) => d.to_string(),
        }),
        Opt::Retry => f(o.retry),
        Opt::KeepMade => f(o.keep_made),
        Opt::KeepStarted => f(o.keep_started),
        Opt::KeepProgress => f(o.keep_progress),
        Opt::Stack => o.stack.map(|b| String::from_utf8_lossy(b).into_owned()),
        Opt::FromSet => o.from_set.map(|b| String::from_utf8_lossy(b).into_owned()),
        Opt::Alias => o.alias.map(|b| String::from_utf8_lossy(b).into_owned()),
        Opt::Dedup => o.dedup.as_ref().and_then(|d| d.id).map(|b| String::from_utf8_lossy(b).into_owned()),
        Opt::DedupTtl => n(o.dedup.as_ref().and_then(|d| d.ttl)),
        Opt::Extend => f(o.dedup.as_ref().is_some_and(|d| d.extend)),
        Opt::Replace => f(o.dedup.as_ref().is_some_and(|d| d.replace)),
        Opt::KeepLast => f(o.dedup.as_ref().is_some_and(|d| d.keep_last)),
        Opt::By => o.by.map(|b| String::from_utf8_lossy(b).into_owned()),
    }
}

fn expected(opt: Opt, v: i64) -> String {
    match opt {
        _ if is_flag(opt) => "set".into(),
        Opt::Opts | Opt::Stack => format!("blob {v}"),
        Opt::Alias => format!("key {v}"),
        Opt::Dedup => format!("id {v}"),
        Opt::By => format!("worker {v}"),
        _ => v.to_string(),
    }
}

/// The options each command of the table takes (its argument tree's option words).
fn allowed_sets() -> Vec<(&'static str, Vec<Opt>)> {
    fn walk(a: &Arg, out: &mut Vec<Opt>) {
        let word = a.token.or(if a.shape == Shape::Word && a.optional { Some(a.display) } else { None });
        if let Some(o) = word.and_then(|w| WORDS.iter().find(|(x, _)| *x == w)) {
            out.push(o.1);
        }
        match a.shape {
            Shape::OneOf(xs) | Shape::Block(xs) => xs.iter().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    COMMANDS
        .iter()
        .map(|c| {
            let mut v = Vec::new();
            c.args.iter().for_each(|a| walk(a, &mut v));
            (c.name, v)
        })
        .collect()
}

/// Distinct options from `allowed` in any order, each with a valid value, parse to exactly
/// those values; the same list with one option repeated, an unknown word, or a value
/// missing at the end is the shape refusal.
fn options_model(allowed: &[Opt], picks: &[(usize, i64, bool)]) -> Result<(), TestCaseError> {
    let mut chosen: Vec<(Opt, i64)> = Vec::new();
    let mut argv: Vec<Vec<u8>> = Vec::new();
    for &(k, v, lower) in picks {
        let o = allowed[k % allowed.len()];
        if chosen.iter().any(|(c, _)| *c == o) {
            continue;
        }
        chosen.push((o, v));
        argv.extend(option_words(o, v, lower));
    }
    let refs: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
    let got = args::options(&refs, allowed);
    prop_assert!(
        got.is_ok(),
        "{:?} refused {:?}",
        refs.iter().map(|b| String::from_utf8_lossy(b)).collect::<Vec<_>>(),
        got
    );
    let got = got.unwrap();
    for o in allowed {
        let want = chosen.iter().find(|(c, _)| c == o).map(|(c, v)| expected(*c, *v));
        prop_assert_eq!(parsed(&got, *o), want, "{:?}", o);
    }
    if let Some((o, v)) = chosen.first() {
        let mut twice = argv.clone();
        twice.extend(option_words(*o, *v, false));
        let r: Vec<&[u8]> = twice.iter().map(Vec::as_slice).collect();
        prop_assert!(matches!(args::options(&r, allowed), Err(Refusal::Shape(_))));
        if !is_flag(*o) {
            let mut cut = argv.clone();
            cut.extend(option_words(*o, *v, false).into_iter().take(1));
            // The word again without its value: given twice, or missing its value.
            let r: Vec<&[u8]> = cut.iter().map(Vec::as_slice).collect();
            prop_assert!(matches!(args::options(&r, allowed), Err(Refusal::Shape(_))));
        }
    }
    let mut unknown = argv.clone();
    unknown.push(b"NOPE".to_vec());
    let r: Vec<&[u8]> = unknown.iter().map(Vec::as_slice).collect();
    prop_assert!(matches!(args::options(&r, allowed), Err(Refusal::Shape(_))));
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    /// Any words at all: no panic, and only shape refusals.
    #[test]
    fn options_never_panic(v in proptest::collection::vec(edgy(), 0..10), sub in proptest::collection::vec(0usize..WORDS.len(), 0..WORDS.len())) {
        let allowed: Vec<Opt> = sub.iter().map(|i| WORDS[*i].1).collect();
        let refs: Vec<&[u8]> = v.iter().map(Vec::as_slice).collect();
        let r = catch_unwind(AssertUnwindSafe(|| args::options(&refs, &allowed).map(|_| ())));
        prop_assert!(r.is_ok(), "options panicked on {:?}", v);
        if let Ok(Err(e)) = r { prop_assert_eq!(e.class(), Class::Shape); }
    }

    /// Each command's own options, as the table lists them.
    #[test]
    fn options_of_every_command(cmd in 0usize..COMMANDS.len(), picks in proptest::collection::vec((0usize..20, 0i64..1_000_000, any::<bool>()), 0..8)) {
        let sets = allowed_sets();
        let (_, allowed) = &sets[cmd];
        if !allowed.is_empty() {
            options_model(allowed, &picks)?;
        }
    }
}

/// The same over the whole vocabulary: any two distinct options parse, whatever their mix.
/// Regression: the "given twice" check kept one bit per option in a u16
/// (`1u16 << (opt as u16)`) while there were 18 options, so DELAYED (16) shared PRIORITY's
/// bit and GRACE (17) ATTEMPTS's in a release build (the shift wraps: `options(&[b"PRIORITY",
/// b"1", b"DELAYED"], &[Opt::Priority, Opt::Delayed])` answered `EMQSHAPE option DELAYED
/// given twice`), and a debug build panicked (`attempt to shift left with overflow`, so
/// `cargo test` builds could not parse TRA.DRAIN … DELAYED or TRA.CLEAN … GRACE at all);
/// EXPIRE (18) would have shared BACKOFF's on ENQUEUE and SCHEDULE. Now a u32.
#[test]
fn options_of_the_whole_vocabulary() {
    let all: Vec<Opt> = WORDS.iter().map(|(_, o)| *o).collect();
    let two = |a: Opt, b: Opt| {
        let mut argv = option_words(a, 1, false);
        argv.extend(option_words(b, 2, false));
        let refs: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
        catch_unwind(AssertUnwindSafe(|| args::options(&refs, &all).map(|_| ())))
    };
    let mut broken = Vec::new();
    for (a, _) in WORDS.iter().enumerate() {
        for (b, _) in WORDS.iter().enumerate().filter(|(b, _)| *b != a) {
            match two(WORDS[a].1, WORDS[b].1) {
                Ok(Ok(())) => {}
                other => broken.push(format!("{} then {}: {other:?}", WORDS[a].0, WORDS[b].0)),
            }
        }
    }
    assert!(broken.is_empty(), "distinct options refused:\n{}", broken.join("\n"));
}

// ---------------------------------------------------------------------------------------
// Every command's argument shape, from the table's argument tree.

// Each command carries its verb's shape (`Command::shape`): no list of them to keep here.

/// SplitMix64, for building argument vectors from one drawn seed.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// A word as the client may spell it: options and keywords are case-insensitive.
fn spell(rng: &mut Rng, w: &str) -> Vec<u8> {
    w.bytes().map(|c| if rng.below(3) == 0 { c.to_ascii_lowercase() } else { c }).collect()
}

/// A well-formed instance of `a`: every value parses (integers as integers, a `when` as a
/// when), option words in any case, optional parts now and then, repeats 1–3 times.
fn instance(rng: &mut Rng, a: &Arg, out: &mut Vec<Vec<u8>>) {
    if a.optional && rng.below(2) == 0 {
        return;
    }
    let times = if a.multiple { 1 + rng.below(3) } else { 1 };
    for _ in 0..times {
        if let Some(t) = a.token {
            out.push(spell(rng, t));
        }
        match a.shape {
            Shape::Value(Ty::Int) => out.push((rng.next() as i64 / 2).to_string().into_bytes()),
            Shape::Value(Ty::Str) if a.name == "when" || a.display == "when" => {
                let t = rng.below(1 << 50);
                out.push(if rng.below(2) == 0 { format!("+{t}") } else { t.to_string() }.into_bytes());
            }
            Shape::Value(Ty::Str) => {
                let n = rng.below(6) as usize;
                out.push((0..n).map(|_| rng.next() as u8).collect());
            }
            Shape::Word => out.push(spell(rng, a.display)),
            Shape::OneOf(alts) => {
                let k = rng.below(alts.len() as u64) as usize;
                instance(rng, &alts[k], out)
            }
            Shape::Block(items) => items.iter().for_each(|i| instance(rng, i, out)),
        }
    }
}

/// TRA.ADD's jobs, well formed: `name data k` and k option words (each job's options
/// distinct, LIFO never beside DELAY), 1–3 jobs.
fn add_instance(rng: &mut Rng, out: &mut Vec<Vec<u8>>) {
    const OPTS: [Opt; 8] = [
        Opt::Priority,
        Opt::Attempts,
        Opt::Backoff,
        Opt::Opts,
        Opt::Expire,
        Opt::Lifo,
        Opt::Alias,
        Opt::Delay,
    ];
    for _ in 0..1 + rng.below(3) {
        out.extend([b"name".to_vec(), b"data".to_vec()]);
        let mut words = Vec::new();
        let mut taken = Vec::new();
        for _ in 0..rng.below(4) {
            let o = OPTS[rng.below(OPTS.len() as u64) as usize];
            let clash = (o == Opt::Lifo && taken.contains(&Opt::Delay))
                || (o == Opt::Delay && taken.contains(&Opt::Lifo));
            if taken.contains(&o) || clash {
                continue;
            }
            taken.push(o);
            words.extend(option_words(o, rng.below(1000) as i64, rng.below(2) == 0));
        }
        // DEDUP with its own options, as `queue::dedup::shape` takes them, now and then.
        if rng.below(2) == 0 {
            words.extend(option_words(Opt::Dedup, rng.below(1000) as i64, rng.below(2) == 0));
            // A TTL (EXTEND with it, or not) or KEEPLAST, or neither: KEEPLAST goes without it.
            match rng.below(3) {
                0 => {
                    words.extend(option_words(Opt::DedupTtl, 1 + rng.below(1000) as i64, false));
                    if rng.below(2) == 0 {
                        words.extend(option_words(Opt::Extend, 0, rng.below(2) == 0));
                    }
                }
                1 => words.extend(option_words(Opt::KeepLast, 0, rng.below(2) == 0)),
                _ => {}
            }
            if rng.below(2) == 0 {
                words.extend(option_words(Opt::Replace, 0, false));
            }
        }
        out.push(words.len().to_string().into_bytes());
        out.extend(words);
    }
}

fn run_shape(f: ShapeFn, v: &[Vec<u8>]) -> Result<Result<(), Refusal>, String> {
    let args: Vec<ArgStr> = v.iter().map(|b| ArgStr::detached(b)).collect();
    catch_unwind(AssertUnwindSafe(|| f(&args))).map_err(|_| "panicked".to_string())
}

proptest! {
    #![proptest_config(config())]

    /// The table's argument tree and the verb's shape agree: every well-formed vector (values
    /// that parse, option words in any case, optional parts or not, repeats) is accepted, and
    /// the same with one unknown word more is refused with a shape refusal — never a panic.
    #[test]
    fn shapes_accept_what_the_table_documents(cmd in 0usize..COMMANDS.len(), seed in any::<u64>()) {
        let c = &COMMANDS[cmd];
        let f = c.shape;
        let mut rng = Rng(seed);
        let mut v = Vec::new();
        if c.name == "TRA.ADD" {
            add_instance(&mut rng, &mut v);
        } else {
            c.args.iter().for_each(|a| instance(&mut rng, a, &mut v));
        }
        let shown = || v.iter().map(|b| String::from_utf8_lossy(b).into_owned()).collect::<Vec<_>>();
        let r = run_shape(f, &v).map_err(TestCaseError::fail)?;
        prop_assert!(r.is_ok(), "{} refused its own synopsis's {:?}: {:?}", c.name, shown(), r);
        let mut more = v.clone();
        more.push(b"NOPE".to_vec());
        let r = run_shape(f, &more).map_err(TestCaseError::fail)?;
        prop_assert!(matches!(r, Err(Refusal::Shape(_) | Refusal::Usage)), "{} took {:?} + NOPE: {:?}", c.name, shown(), r);
    }

    /// Any vector at all: no panic, and only the shape class.
    #[test]
    fn shapes_never_panic(cmd in 0usize..COMMANDS.len(), v in proptest::collection::vec(edgy(), 0..9)) {
        let c = &COMMANDS[cmd];
        let f = c.shape;
        match run_shape(f, &v).map_err(TestCaseError::fail)? {
            Ok(()) => {}
            Err(e) => prop_assert_eq!(e.class(), Class::Shape, "{}: {:?}", c.name, e),
        }
    }
}

proptest! {
    #![proptest_config(config())]

    /// Every error line is one line of ASCII whose first word is its class.
    #[test]
    fn error_lines(s in ".{0,80}", b in proptest::collection::vec(any::<u8>(), 0..200)) {
        for r in [Refusal::Shape(s.clone()), Refusal::Arg(s.clone()), Refusal::NoJob(s.clone()), errors::wire_found(&b)] {
            let line = r.line();
            prop_assert!(line.bytes().all(|c| (0x20..0x7f).contains(&c)));
            prop_assert_eq!(line.split(' ').next(), Some(r.class().word()));
        }
        let p = errors::printable(&b);
        prop_assert!(p.len() <= errors::PRINTABLE_MAX * 4 + 3);
        prop_assert!(p.bytes().all(|c| (0x21..=0x7e).contains(&c)));
    }
}

/// The table itself (`host::command`): each synopsis names the command, its numkeys and
/// every key and option word of its argument tree, its brackets balance, its usage refusal
/// is a safe shape line, and each declared role is found at its own position.
#[test]
fn the_table_describes_itself() {
    use trafikey::host::command::{Form, KeyRole};
    fn words(a: &Arg, out: &mut Vec<&'static str>) {
        out.extend(a.token);
        if a.shape == Shape::Word {
            out.push(a.display);
        }
        if let Shape::OneOf(xs) | Shape::Block(xs) = a.shape {
            xs.iter().for_each(|x| words(x, out));
        }
    }
    for c in COMMANDS.iter() {
        let syn = c.synopsis();
        let mut parts = syn.split(' ');
        assert_eq!(parts.next(), Some(c.name));
        if c.form == Form::Keys {
            assert_eq!(parts.next(), Some(c.keys.len().to_string().as_str()), "{syn}");
            for (i, k) in c.keys.iter().enumerate() {
                assert_eq!(c.position(k.role), Some(i), "{}: role {:?}", c.name, k.role);
                if let KeyRole::Queue(r) = k.role {
                    assert!(syn.contains(&format!("emq:{{Q}}:{}", r.word())), "{syn}");
                }
            }
        } else {
            assert!(c.keys.is_empty(), "{}", c.name);
        }
        let mut depth = 0i32;
        for ch in syn.chars() {
            depth += match ch {
                '[' => 1,
                ']' => -1,
                _ => 0,
            };
            assert!(depth >= 0, "{syn}");
        }
        assert_eq!(depth, 0, "{syn}");
        let mut w = Vec::new();
        c.args.iter().for_each(|a| words(a, &mut w));
        for word in w {
            assert!(syn.contains(word), "{syn} lacks {word}");
        }
        let usage = c.usage();
        assert_eq!(usage.class(), Class::Shape);
        assert!(usage.line().starts_with("EMQSHAPE ") && usage.line().is_ascii(), "{}", usage.line());
    }
}
