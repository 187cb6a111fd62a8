//! Argument shape: numbers that parse, options that exist, once each, with their values.
//! Pure functions over byte strings; ranges are checked later, in the domain step, so a
//! shape error always wins over a range error.

use crate::errors::Refusal;

/// A strict decimal integer: optional `-`, digits only, fits in an i64.
pub fn int(arg: &[u8]) -> Option<i64> {
    let (neg, digits) = match arg.strip_prefix(b"-") {
        Some(d) => (true, d),
        None => (false, arg),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut v: i64 = 0;
    for &d in digits {
        v = v.checked_mul(10)?.checked_add(i64::from(d.wrapping_sub(b'0')))?;
    }
    Some(if neg { v.checked_neg()? } else { v })
}

pub fn number(arg: &[u8], what: &str) -> Result<i64, Refusal> {
    int(arg).ok_or_else(|| Refusal::Shape(format!("{what} is not an integer")))
}

/// A `when`: digits are an absolute time in ms, `+digits` ms from the server clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum When {
    At(i64),
    In(i64),
}

pub fn when(arg: &[u8]) -> Result<When, Refusal> {
    let bad = || Refusal::Shape("when must be <ms> or +<ms>".into());
    match arg.strip_prefix(b"+") {
        Some(rest) if !rest.starts_with(b"-") => int(rest).map(When::In).ok_or_else(bad),
        Some(_) => Err(bad()),
        None if !arg.starts_with(b"-") => int(arg).map(When::At).ok_or_else(bad),
        None => Err(bad()),
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backoff {
    Fixed(i64),
    Exp(i64),
}

/// The options a verb may take. Each is parsed by name, case-insensitively.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Opt {
    Priority,
    Attempts,
    Backoff,
    Opts,
    Lifo,
    Keep,
    Age,
    Final,
    Count,
    MaxStalls,
    MaxLen,
    Ttl,
    Block,
    From,
    Rev,
    Force,
    Delayed,
    Grace,
    Expire,
    Retry,
    Delay,
    Stack,
    /// `FROM completed|failed` (REPROCESS): a set's name, not a number as TRA.JOBS' FROM.
    FromSet,
    KeepMade,
    KeepStarted,
    KeepProgress,
    Echo,
    Row,
    Alias,
    /// `DEDUP id`: the producer's deduplication id.
    Dedup,
    /// `DEDUPTTL ms`: the id lives ms (a throttle), not until its job finishes.
    DedupTtl,
    /// `EXTEND`: a duplicate restarts the id's TTL.
    Extend,
    /// `REPLACE`: a duplicate replaces the id's job while that job is delayed.
    Replace,
    /// `KEEPLAST`: a duplicate arriving while the id's job is active is kept, and created when
    /// that job finishes.
    KeepLast,
    /// `METRICS max`: a finish counts its job by the minute, in a series of at most max points.
    Metrics,
    /// `BY worker`: a claim records the name of the worker that takes the job.
    By,
}

impl Opt {
    const fn word(self) -> &'static str {
        match self {
            Opt::Priority => "PRIORITY",
            Opt::Attempts => "ATTEMPTS",
            Opt::Backoff => "BACKOFF",
            Opt::Opts => "OPTS",
            Opt::Lifo => "LIFO",
            Opt::Keep => "KEEP",
            Opt::Age => "AGE",
            Opt::Final => "FINAL",
            Opt::Count => "COUNT",
            Opt::MaxStalls => "MAXSTALLS",
            Opt::MaxLen => "MAXLEN",
            Opt::Ttl => "TTL",
            Opt::Block => "BLOCK",
            Opt::From => "FROM",
            Opt::Rev => "REV",
            Opt::Force => "FORCE",
            Opt::Delayed => "DELAYED",
            Opt::Grace => "GRACE",
            Opt::Expire => "EXPIRE",
            Opt::Retry => "RETRY",
            Opt::Delay => "DELAY",
            Opt::Stack => "STACK",
            Opt::FromSet => "FROM",
            Opt::KeepMade => "KEEPMADE",
            Opt::KeepStarted => "KEEPSTARTED",
            Opt::KeepProgress => "KEEPPROGRESS",
            Opt::Echo => "ECHO",
            Opt::Row => "ROW",
            Opt::Alias => "ALIAS",
            Opt::Dedup => "DEDUP",
            Opt::DedupTtl => "DEDUPTTL",
            Opt::Extend => "EXTEND",
            Opt::Replace => "REPLACE",
            Opt::KeepLast => "KEEPLAST",
            Opt::Metrics => "METRICS",
            Opt::By => "BY",
        }
    }
}

/// DEDUP and its options as a producer gave them (`queue::dedup` checks how they go together).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DedupWords<S> {
    pub id: Option<S>,
    pub ttl: Option<i64>,
    pub extend: bool,
    pub replace: bool,
    pub keep_last: bool,
}

/// What the options of one call said. Absent options are `None`/`false`. `S` is how the
/// call's arguments arrive (byte slices here, the server's strings in the module): the OPTS
/// blob is kept as one of them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options<S> {
    pub priority: Option<i64>,
    pub attempts: Option<i64>,
    pub backoff: Option<Backoff>,
    pub opts: Option<S>,
    pub lifo: bool,
    pub keep: Option<i64>,
    pub age: Option<i64>,
    pub final_: bool,
    pub count: Option<i64>,
    pub max_stalls: Option<i64>,
    pub max_len: Option<i64>,
    pub ttl: Option<i64>,
    pub block: Option<i64>,
    pub from: Option<i64>,
    pub rev: bool,
    pub force: bool,
    pub delayed: bool,
    pub grace: Option<i64>,
    pub expire: Option<When>,
    pub retry: bool,
    pub delay: Option<When>,
    pub stack: Option<S>,
    pub from_set: Option<S>,
    pub keep_made: bool,
    pub keep_started: bool,
    pub keep_progress: bool,
    pub echo: bool,
    pub row: bool,
    pub alias: Option<S>,
    pub metrics: Option<i64>,
    pub by: Option<S>,
    /// Boxed: a call without them (most producers' calls) carries a pointer's width, as
    /// these options are moved about on the producers' path.
    pub dedup: Option<Box<DedupWords<S>>>,
}

impl<S> Default for Options<S> {
    fn default() -> Self {
        Options {
            priority: None,
            attempts: None,
            backoff: None,
            opts: None,
            lifo: false,
            keep: None,
            age: None,
            final_: false,
            count: None,
            max_stalls: None,
            max_len: None,
            ttl: None,
            block: None,
            from: None,
            rev: false,
            force: false,
            delayed: false,
            grace: None,
            expire: None,
            retry: false,
            delay: None,
            stack: None,
            from_set: None,
            keep_made: false,
            keep_started: false,
            keep_progress: false,
            echo: false,
            row: false,
            alias: None,
            metrics: None,
            by: None,
            dedup: None,
        }
    }
}

/// The DEDUP words of `o`, made on the first of them.
fn dedup_words<S>(o: &mut Options<S>) -> &mut DedupWords<S> {
    o.dedup.get_or_insert_with(|| {
        Box::new(DedupWords { id: None, ttl: None, extend: false, replace: false, keep_last: false })
    })
}

/// Parse `args` as options from `allowed`: an unknown or repeated option, an option without
/// its value or a value that does not parse is a shape error.
pub fn options<S: Copy + AsRef<[u8]>>(args: &[S], allowed: &[Opt]) -> Result<Options<S>, Refusal> {
    let mut o = Options::default();
    let mut seen: u64 = 0;
    let mut i = 0;
    while let Some(word) = args.get(i).map(AsRef::as_ref) {
        let opt =
            allowed.iter().copied().find(|opt| word.eq_ignore_ascii_case(opt.word().as_bytes())).ok_or_else(
                || Refusal::Shape(format!("unknown option {}", crate::errors::printable(word))),
            )?;
        let bit = 1u64.checked_shl(opt as u32).unwrap_or(0);
        if seen & bit != 0 {
            return Err(Refusal::Shape(format!("option {} given twice", opt.word())));
        }
        seen |= bit;
        i = i.saturating_add(1).saturating_add(take(&mut o, opt, args, i)?);
    }
    Ok(o)
}

/// Sets option `opt`, met at `args[at]`, from the values after it; returns how many values it
/// took.
#[inline(always)]
fn take<S: Copy + AsRef<[u8]>>(
    o: &mut Options<S>,
    opt: Opt,
    args: &[S],
    at: usize,
) -> Result<usize, Refusal> {
    let value = |k: usize| -> Result<S, Refusal> {
        args.get(at.saturating_add(1).saturating_add(k))
            .copied()
            .ok_or_else(|| Refusal::Shape(format!("option {} needs a value", opt.word())))
    };
    let num = |k: usize| -> Result<i64, Refusal> { number(value(k)?.as_ref(), opt.word()) };
    match opt {
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
        | Opt::KeepLast => {
            set_flag(o, opt);
            Ok(0)
        }
        Opt::Opts | Opt::Stack | Opt::FromSet | Opt::Alias | Opt::Dedup | Opt::By => {
            set_text(o, opt, value(0)?);
            Ok(1)
        }
        Opt::Delay => {
            o.delay = Some(when(value(0)?.as_ref())?);
            Ok(1)
        }
        Opt::Expire => {
            let w =
                when(value(0)?.as_ref()).map_err(|_| Refusal::Shape("EXPIRE takes <ms> or +<ms>".into()))?;
            o.expire = Some(w);
            Ok(1)
        }
        Opt::Backoff => {
            let kind = value(0)?;
            let kind = kind.as_ref();
            let ms = num(1)?;
            o.backoff = Some(if kind.eq_ignore_ascii_case(b"FIXED") {
                Backoff::Fixed(ms)
            } else if kind.eq_ignore_ascii_case(b"EXP") {
                Backoff::Exp(ms)
            } else {
                return Err(Refusal::Shape("BACKOFF takes FIXED or EXP".into()));
            });
            Ok(2)
        }
        Opt::Priority
        | Opt::Attempts
        | Opt::Keep
        | Opt::Age
        | Opt::Count
        | Opt::MaxStalls
        | Opt::MaxLen
        | Opt::Ttl
        | Opt::Block
        | Opt::From
        | Opt::Grace
        | Opt::Metrics
        | Opt::DedupTtl => {
            set_int(o, opt, num(0)?);
            Ok(1)
        }
    }
}

/// A word that takes no value.
#[inline(always)]
fn set_flag<S>(o: &mut Options<S>, opt: Opt) {
    match opt {
        Opt::Lifo => o.lifo = true,
        Opt::Final => o.final_ = true,
        Opt::Rev => o.rev = true,
        Opt::Force => o.force = true,
        Opt::Delayed => o.delayed = true,
        Opt::Echo => o.echo = true,
        Opt::Row => o.row = true,
        Opt::Retry => o.retry = true,
        Opt::KeepMade => o.keep_made = true,
        Opt::KeepStarted => o.keep_started = true,
        Opt::KeepProgress => o.keep_progress = true,
        Opt::Extend => dedup_words(o).extend = true,
        Opt::Replace => dedup_words(o).replace = true,
        Opt::KeepLast => dedup_words(o).keep_last = true,
        // Not of this kind: `take` sends each option to its kind's setter only.
        _ => {}
    }
}

/// An option whose value is kept as given.
#[inline(always)]
fn set_text<S>(o: &mut Options<S>, opt: Opt, v: S) {
    let v = Some(v);
    match opt {
        Opt::Opts => o.opts = v,
        Opt::Stack => o.stack = v,
        Opt::FromSet => o.from_set = v,
        Opt::Alias => o.alias = v,
        Opt::By => o.by = v,
        Opt::Dedup => dedup_words(o).id = v,
        // Not of this kind: `take` sends each option to its kind's setter only.
        _ => {}
    }
}

/// An option whose value is an integer.
#[inline(always)]
fn set_int<S>(o: &mut Options<S>, opt: Opt, v: i64) {
    let v = Some(v);
    match opt {
        Opt::Priority => o.priority = v,
        Opt::Attempts => o.attempts = v,
        Opt::Keep => o.keep = v,
        Opt::Age => o.age = v,
        Opt::Count => o.count = v,
        Opt::MaxStalls => o.max_stalls = v,
        Opt::MaxLen => o.max_len = v,
        Opt::Block => o.block = v,
        Opt::From => o.from = v,
        Opt::Grace => o.grace = v,
        Opt::Metrics => o.metrics = v,
        Opt::DedupTtl => dedup_words(o).ttl = v,
        Opt::Ttl => o.ttl = v,
        // Not of this kind: `take` sends each option to its kind's setter only.
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn integers() {
        assert_eq!(int(b"0"), Some(0));
        assert_eq!(int(b"-1"), Some(-1));
        assert_eq!(int(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(int(b"9223372036854775808"), None);
        assert_eq!(int(b"-9223372036854775808"), None, "i64::MIN is refused: no value range needs it");
        for bad in [&b""[..], b"-", b"+1", b" 1", b"1 ", b"1.0", b"0x1", b"1e3", b"\xff"] {
            assert_eq!(int(bad), None);
        }
    }

    #[test]
    fn whens() {
        assert_eq!(when(b"123"), Ok(When::At(123)));
        assert_eq!(when(b"+5"), Ok(When::In(5)));
        for bad in [&b"+"[..], b"-5", b"+-5", b"++5", b"x", b""] {
            assert!(matches!(when(bad), Err(Refusal::Shape(_))));
        }
    }

    #[test]
    fn option_rules() {
        let all = [Opt::Priority, Opt::Backoff, Opt::Lifo, Opt::Opts];
        let args: [&[u8]; 8] = [b"priority", b"7", b"BACKOFF", b"exp", b"100", b"lifo", b"OPTS", b"x y"];
        let o = options(&args, &all).unwrap();
        assert_eq!(o.priority, Some(7));
        assert_eq!(o.backoff, Some(Backoff::Exp(100)));
        assert!(o.lifo);
        assert_eq!(o.opts, Some(&b"x y"[..]));
        for bad in [
            &[&b"PRIORITY"[..]][..],
            &[b"PRIORITY", b"x"],
            &[b"PRIORITY", b"1", b"PRIORITY", b"2"],
            &[b"NOPE"],
            &[b"BACKOFF", b"LINEAR", b"1"],
            &[b"BACKOFF", b"FIXED"],
            &[b"ATTEMPTS", b"1"],
        ] {
            assert!(matches!(options::<&[u8]>(bad, &all), Err(Refusal::Shape(_))), "{bad:?}");
        }
    }

    proptest! {
        #[test]
        fn int_agrees_with_std(s in "-?[0-9]{1,20}") {
            let std = s.parse::<i64>().ok().filter(|v| *v != i64::MIN);
            prop_assert_eq!(int(s.as_bytes()), std);
        }

        #[test]
        fn options_never_panic(args in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..12), 0..8)) {
            let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
            let all = [Opt::Priority, Opt::Attempts, Opt::Backoff, Opt::Opts, Opt::Lifo, Opt::Keep, Opt::Age,
                       Opt::Final, Opt::Count, Opt::MaxStalls, Opt::MaxLen, Opt::Ttl, Opt::Block, Opt::From, Opt::Rev, Opt::Force, Opt::Delayed, Opt::Grace];
            let _ = options(&refs, &all);
        }
    }
}

/// Tests that kill the mutants cargo-mutants left alive (scripts/mutants; tests/MUTANTS.md).
#[cfg(test)]
mod mutants_killed {
    use super::*;

    /// Every option, with a valid value where it takes one.
    const EVERY: [(Opt, &[&[u8]]); 35] = [
        (Opt::Priority, &[b"1"]),
        (Opt::Attempts, &[b"2"]),
        (Opt::Backoff, &[b"FIXED", b"3"]),
        (Opt::Opts, &[b"blob"]),
        (Opt::Lifo, &[]),
        (Opt::Keep, &[b"4"]),
        (Opt::Age, &[b"5"]),
        (Opt::Final, &[]),
        (Opt::Count, &[b"6"]),
        (Opt::MaxStalls, &[b"7"]),
        (Opt::MaxLen, &[b"8"]),
        (Opt::Ttl, &[b"9"]),
        (Opt::Block, &[b"10"]),
        (Opt::From, &[b"11"]),
        (Opt::Rev, &[]),
        (Opt::Force, &[]),
        (Opt::Delayed, &[]),
        (Opt::Grace, &[b"12"]),
        (Opt::Expire, &[b"+13"]),
        (Opt::Retry, &[]),
        (Opt::Delay, &[b"14"]),
        (Opt::Stack, &[b"trace"]),
        (Opt::KeepMade, &[]),
        (Opt::KeepStarted, &[]),
        (Opt::KeepProgress, &[]),
        (Opt::Dedup, &[b"d1"]),
        (Opt::DedupTtl, &[b"15"]),
        (Opt::Extend, &[]),
        (Opt::Replace, &[]),
        (Opt::KeepLast, &[]),
        (Opt::Echo, &[]),
        (Opt::Row, &[]),
        (Opt::Alias, &[b"a1"]),
        (Opt::Metrics, &[b"16"]),
        (Opt::By, &[b"w1"]),
    ];

    fn call(opts: &[(Opt, &[&'static [u8]])]) -> Vec<&'static [u8]> {
        let mut v: Vec<&'static [u8]> = Vec::new();
        for (opt, values) in opts {
            v.push(opt.word().as_bytes());
            v.extend_from_slice(values);
        }
        v
    }

    #[test]
    fn each_option_lands_in_its_own_field() {
        let all: Vec<Opt> = EVERY.iter().map(|e| e.0).collect();
        for order in [EVERY.to_vec(), EVERY.iter().rev().copied().collect()] {
            let o = options(&call(&order), &all).unwrap();
            assert_eq!(o.priority, Some(1));
            assert_eq!(o.attempts, Some(2));
            assert_eq!(o.backoff, Some(Backoff::Fixed(3)));
            assert_eq!(o.opts, Some(&b"blob"[..]));
            assert!(o.lifo && o.final_ && o.rev && o.force && o.delayed);
            assert_eq!(o.keep, Some(4));
            assert_eq!(o.age, Some(5));
            assert_eq!(o.count, Some(6));
            assert_eq!(o.max_stalls, Some(7));
            assert_eq!(o.max_len, Some(8));
            assert_eq!(o.ttl, Some(9));
            assert_eq!(o.block, Some(10));
            assert_eq!(o.from, Some(11));
            assert_eq!(o.grace, Some(12));
            assert_eq!(o.expire, Some(When::In(13)));
            assert!(o.retry && o.keep_made && o.keep_started);
            assert_eq!(o.delay, Some(When::At(14)));
            assert_eq!(o.stack, Some(&b"trace"[..]));
            let d = o.dedup.as_deref().unwrap();
            assert_eq!(d.id, Some(&b"d1"[..]));
            assert_eq!(d.ttl, Some(15));
            assert!(d.extend && d.replace && d.keep_last);
            assert!(o.echo && o.row);
            assert_eq!(o.alias, Some(&b"a1"[..]));
            assert_eq!(o.metrics, Some(16));
            assert_eq!(o.by, Some(&b"w1"[..]));
        }
    }

    #[test]
    fn every_option_given_twice_is_refused_and_once_each_is_not() {
        for (i, e) in EVERY.iter().enumerate() {
            let word = e.0.word();
            let twice = call(&[*e, *e]);
            assert_eq!(
                options(&twice, &[e.0]),
                Err(Refusal::Shape(format!("option {word} given twice"))),
                "{word}"
            );
            // Beside every other option, once each: no two options share a bit.
            for f in &EVERY[i + 1..] {
                assert!(options(&call(&[*e, *f]), &[e.0, f.0]).is_ok(), "{word} {}", f.0.word());
            }
        }
    }
}
