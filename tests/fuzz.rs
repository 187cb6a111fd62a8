//! A fuzzer over the live server: every command of the table (`trafikey::verbs::COMMANDS`,
//! checked against the server's own `COMMAND LIST FILTERBY MODULE trafikey`) gets thousands
//! of random argument vectors — a valid call built from its key roles and its synopsis, then
//! bent: wrong or malformed `numkeys`, too few or too many arguments, keys of the wrong role,
//! of two queues, of wrongly typed keys, malformed and odd ids, huge and empty strings,
//! random bytes with NUL and non-UTF-8, negative, overflowing and odd numbers, repeated,
//! unknown, lower-case and value-less options — sent over RESP2 and RESP3, as the default
//! user and as users with narrower ACLs, to one server holding populated queues.
//!
//! Every command means every one: the job verbs, the bus, the controls, and the inspection
//! and administration commands (TRA.JOB, TRA.COUNTS, TRA.JOBS, TRA.QUEUES, TRA.PROGRESS,
//! TRA.SETDATA, TRA.LOG, TRA.REMOVE, TRA.DRAIN, TRA.CLEAN, TRA.OBLITERATE, the job schedulers'
//! TRA.SCHEDULER and TRA.SCHEDULERS with their `sched:<id>` and `scheds` keys), options included (CLAIM's BLOCK
//! is cut to 1–3 ms, and never waits inside MULTI or a script). New options and commands
//! join by themselves: the calls are built from the table's synopses (so EXPIRE on ENQUEUE
//! and SCHEDULE is fuzzed too, and DEDUP with its options, from three ids so they collide).
//!
//! Calls go in pipelined batches of 20 over one user's connection. Each call is framed: in
//! one batch of ten by `DEBUG DIGEST` before and after it, in the others (cheaply) by the
//! server's count of writes and its replication offset (`INFO persistence replication`).
//! After each call: an error reply is ASCII, one line, and its first word is a known class
//! (EMQSHAPE EMQLAYOUT EMQWIRE EMQID EMQARG EMQNOJOB EMQSTATE EMQLEASE WRONGTYPE NOPERM; the
//! server's own ERR only from a script, EXECABORT only from MULTI); an error leaves its frame
//! unchanged (a refusal writes nothing). The fence key stays in place, so an EMQWIRE is a
//! failure too, and so is EMQHOST (a caught panic or a failed server call: not a known class).
//! Each batch ends with a PING (the server lives), then the invariant is checked on the
//! fuzzed queues: every job id in at most one state set, its row's `st` naming it, a row iff
//! the job is in a set, no `log:` key without its row, and a DEDUP id without a TTL names an
//! unfinished job whose row names it. Every 200 calls and at the end a
//! replica holds the primary's keyspace (`DEBUG DIGEST`), and the queues are populated
//! afresh (held jobs with logs and progress among them); at the end the server log shows no
//! panic, and every command has met both values and refusals.
//!
//! For 60 calls in every 1000 the fence key is absent, `echomq:4.0.0` or a list: the fence's
//! refusals (`EMQWIRE expected echomq:6.0.0 …`) and WRONGTYPE are then expected where a call
//! passes shape and layout.
//!
//! A few calls go through `EVAL` (`server.pcall`) or `MULTI`/`EXEC`, and a tenth also through
//! `COMMAND GETKEYSANDFLAGS`, so the server's key-spec extraction meets the same vectors.
//!
//! Deterministic: `FUZZ_SEED` (default fixed), `FUZZ_CALLS` (default 100 000, about 40 s on
//! two cores); e.g. `FUZZ_CALLS=1000000 FUZZ_SEED=7 scripts/test --test fuzz` for a soak.
// A test may panic: that is how it fails. The module's own rules are for src/.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

use trafikey_support::*;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Instant;

use trafikey::host::command::{Command, Form, KeyRole};
use trafikey::keyspace::{self, Role};
use trafikey::verbs::COMMANDS;

const CLASSES: [&str; 12] = [
    "EMQSHAPE",
    "EMQLAYOUT",
    "EMQWIRE",
    "EMQID",
    "EMQARG",
    "EMQNOJOB",
    "EMQSTATE",
    "EMQLEASE",
    "WRONGTYPE",
    "NOPERM",
    "ERR",
    "EXECABORT",
];

/// The queues: `fz` (populated, fuzzed), `fz2` (a second populated queue, for mixed-queue
/// calls), `fzt` (keys of the wrong types), `fzr` (rows of the wrong type). Tokens: the
/// holders' (`tok<N>` holds `jid(N)`, see `populate`) and two that hold nothing.
/// The DEDUP ids producers give and TRA.DEDUP/TRA.UNDEDUP name (`populate` makes two live).
const DEDUP_IDS: [&str; 3] = ["d1", "d2", "d3"];

const TOKENS: [&str; 8] = ["tok5", "tok6", "tok7", "tok8", "tok11", "tok12", "w", "zz"];

/// SplitMix64: small, fast, and the same on every machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len())]
    }
    fn bytes(&mut self, max: usize) -> Vec<u8> {
        let n = self.below(max + 1);
        (0..n).map(|_| self.next() as u8).collect()
    }
}

// ---------------------------------------------------------------------------------------
// The valid call: keys from the roles, arguments from the synopsis.

/// One piece of a synopsis: a word, or a bracketed group (optional; `...` repeats it) of
/// alternatives (`[FINAL | RETRY [LIFO] | DELAY when]`), each a list of items.
#[derive(Debug)]
enum Item {
    Word(String),
    Group(Vec<Vec<Item>>, bool),
}

/// Items up to the closing `]` (or the end), split into alternatives at each ` | `.
fn parse_alts(words: &mut std::vec::IntoIter<String>) -> Vec<Vec<Item>> {
    let mut alts: Vec<Vec<Item>> = vec![Vec::new()];
    while let Some(w) = words.next() {
        match w.as_str() {
            "]" => break,
            "|" => alts.push(Vec::new()),
            "[" => {
                let inner = parse_alts(words);
                let repeat = inner.iter().flatten().any(|i| matches!(i, Item::Word(x) if x == "..."));
                let inner = inner
                    .into_iter()
                    .map(|alt| {
                        alt.into_iter().filter(|i| !matches!(i, Item::Word(x) if x == "...")).collect()
                    })
                    .collect();
                alts.last_mut().unwrap().push(Item::Group(inner, repeat));
            }
            _ => alts.last_mut().unwrap().push(Item::Word(w)),
        }
    }
    alts
}

/// A synopsis's alternatives (`a | b | c` at the top level), each a list of items.
fn synopsis(args: &str) -> Vec<Vec<Item>> {
    let spaced = args.replace('[', " [ ").replace(']', " ] ");
    let words: Vec<String> = spaced.split_whitespace().map(str::to_string).collect();
    parse_alts(&mut words.into_iter())
}

/// A `BLOCK ms` the server would honour becomes a wait of 1–3 ms, so no call waits long
/// (BLOCK 0 would wait forever on a connection that sends nothing else); values it refuses
/// (not a number, out of range) stay as they are.
fn short_waits(rng: &mut Rng, v: &mut [Vec<u8>]) {
    for i in 1..v.len() {
        let is_block = v.get(i - 1).is_some_and(|w| w.eq_ignore_ascii_case(b"BLOCK"));
        // The module's integers: an optional '-', then digits ("-0" is 0).
        let digits = v[i].strip_prefix(b"-").unwrap_or(&v[i]);
        let value = (!digits.is_empty() && digits.iter().all(u8::is_ascii_digit))
            .then(|| std::str::from_utf8(&v[i]).ok()?.parse::<i128>().ok())
            .flatten();
        let honoured = value.is_some_and(|ms| (0..=1 << 31).contains(&ms));
        if is_block && honoured {
            v[i] = (1 + rng.below(3)).to_string().into_bytes();
        }
    }
}

/// All option-like words (upper case) of every synopsis: the fuzzer's option vocabulary.
fn option_words() -> Vec<String> {
    let mut v: Vec<String> = COMMANDS
        .iter()
        .flat_map(|c| {
            c.args_synopsis()
                .split(|ch: char| ch.is_whitespace() || "[]|".contains(ch))
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .filter(|w| !w.is_empty() && w.chars().all(|c| c.is_ascii_uppercase()))
        .collect();
    v.sort();
    v.dedup();
    v
}

struct Ctx {
    /// Job ids whose rows exist in `fz` (and mostly in `fz2`), plus two that never do.
    ids: Vec<String>,
    now_ms: i64,
    options: Vec<String>,
}

/// A value for a synopsis placeholder. `id` is the job the call is about: its holder's token
/// (`tok<N>` for `jid(N)`, see `populate`) is the likeliest token.
fn value(rng: &mut Rng, ctx: &Ctx, cmd: &Command, placeholder: &str, id: &str) -> Vec<u8> {
    let job_verb = cmd
        .keys
        .iter()
        .any(|k| k.role == KeyRole::Queue(Role::Job) || k.role == KeyRole::Queue(Role::Active));
    let s: String = match placeholder {
        "name" => rng.pick(&["alpha", "b", "x"]).to_string(),
        // TRA.SETDATA's data at the run's max-payload (4096) and one byte past it.
        "data" if cmd.name == "TRA.SETDATA" && rng.chance(20) => {
            "d".repeat(if rng.chance(50) { 4096 } else { 4097 })
        }
        "data" | "result" | "error" | "payload" | "blob" | "progress" | "line" => {
            rng.pick(&["{}", "", "ok", "boom"]).to_string()
        }
        "token" if rng.chance(50) => {
            ctx.ids.iter().position(|i| i == id).map_or("tok5".to_string(), |n| format!("tok{}", n + 1))
        }
        "token" => rng.pick(&TOKENS).to_string(),
        "lease_ms" => rng.pick(&["60000", "1", "10", "2147483648"]).to_string(),
        "when" => match rng.below(4) {
            0 => "+0".into(),
            1 => "+100".into(),
            2 => (ctx.now_ms + 600_000).to_string(),
            _ => "1".into(),
        },
        // DEDUP ids: a few, so they collide (ENQUEUE's and SCHEDULE's option value).
        "id" if matches!(cmd.name, "EMQ.ENQUEUE" | "EMQ.SCHEDULE") && rng.chance(70) => {
            rng.pick(&DEDUP_IDS).to_string()
        }
        "id" if job_verb => rng.pick(&ctx.ids).clone(),
        // TRA.UNDEDUP's job.
        "job" if rng.chance(90) => rng.pick(&ctx.ids).clone(),
        "job" => "JOB!".into(),
        "id" => id_of(rng.pick::<&str>(&["MSG", "abc", "XYZ"]), rng.below(5) as u64),
        "version" => rng
            .pick(&[
                "JOB00000000009",
                "JOBzzzzzzzzzzz",
                "JOB00000000000",
                "JOB00000000005",
                "abc",
                "JOB000000000099",
            ])
            .to_string(),
        "ms" | "n" | "p" => {
            rng.pick(&["0", "1", "2", "5", "100", "-1", "1000", "10000", "10001"]).to_string()
        }
        // TRA.PRIORITY: both ends of 0..=2097151 and just past them.
        "priority" => rng.pick(&["0", "1", "5", "2097151", "2097152", "-1"]).to_string(),
        // TRA.LIMIT RATE: both ends of 1..=2^31-1 and just past them; METRICS: 1..=10080.
        "max" => rng.pick(&["1", "2", "0", "-1", "10080", "10081", "2147483647", "2147483648"]).to_string(),
        // A claim's BY: names, and both ends of 1..=256 bytes and just past them.
        "worker" => match rng.below(5) {
            0 => String::new(),
            1 => "w".repeat(256),
            2 => "w".repeat(257),
            _ => rng.pick(&["w-a", "w-b"]).to_string(),
        },
        // TRA.JOBS / TRA.QUEUES positions.
        "i" => rng.pick(&["0", "1", "3", "100", "-1"]).to_string(),
        // EXPIRE when (ENQUEUE, SCHEDULE): its synopsis says `[EXPIRE when]`, so the arm for
        // "when" above gives it values (`1` has expired already, `+0` expires at once), and
        // the option vocabulary (`option_words`) picks the word up from the table.
        _ => "1".into(),
    };
    s.into_bytes()
}

fn emit(rng: &mut Rng, ctx: &Ctx, cmd: &Command, items: &[Item], id: &str, out: &mut Vec<Vec<u8>>) {
    for it in items {
        match it {
            Item::Word(w) if w.contains('|') => {
                let alts: Vec<&str> = w.split('|').collect();
                out.push(rng.pick(&alts).as_bytes().to_vec());
            }
            Item::Word(w) if w.chars().all(|c| c.is_ascii_uppercase()) => out.push(w.as_bytes().to_vec()),
            Item::Word(w) => out.push(value(rng, ctx, cmd, w, id)),
            Item::Group(alts, repeat) => {
                let times = if *repeat { rng.below(3) } else { usize::from(rng.chance(45)) };
                for _ in 0..times {
                    let alt = &alts[rng.below(alts.len())];
                    emit(rng, ctx, cmd, alt, id, out);
                }
            }
        }
    }
}

fn role_key(queue: &str, role: Role, id: &str) -> Vec<u8> {
    keyspace::key(queue.as_bytes(), role, id.as_bytes())
}

/// A valid call of `cmd` on one queue (mostly `fz`; `fz2`; `fzt` with its wrongly typed
/// keys; `fzr` with wrongly typed rows): keys by role, arguments by the synopsis.
fn valid(rng: &mut Rng, ctx: &Ctx, cmd: &Command) -> (Vec<Vec<u8>>, usize) {
    let mut v = vec![cmd.name.as_bytes().to_vec()];
    let queue = match rng.below(20) {
        0..=12 => "fz",
        13 | 14 => "fz2",
        15 | 16 => "fzt",
        _ => "fzr",
    };
    let id = rng.pick(&ctx.ids).clone();
    if cmd.form == Form::Keys {
        v.push(cmd.keys.len().to_string().into_bytes());
        for k in cmd.keys {
            v.push(match k.role {
                KeyRole::Version => b"{emq}:version".to_vec(),
                KeyRole::Queue(Role::Fails) => {
                    role_key(queue, Role::Fails, &id_of("MSG", rng.below(3) as u64))
                }
                // A DEDUP id: mostly one the producers give, now and then a job id.
                KeyRole::Queue(Role::Dedup) => {
                    let d = if rng.chance(80) { rng.pick(&DEDUP_IDS).to_string() } else { id.clone() };
                    role_key(queue, Role::Dedup, &d)
                }
                KeyRole::Queue(r) => role_key(queue, r, &id),
                // A key that may be any of some roles: one of them, now and then another role.
                KeyRole::OneOf(sets) => {
                    let r = if rng.chance(10) { *rng.pick(&Role::ALL) } else { *rng.pick(sets) };
                    role_key(queue, r, &id)
                }
                // TRA.DROP's cache row: mostly the rows `populate` wrote, sometimes anything.
                KeyRole::Any => match rng.below(8) {
                    0..=5 => format!("fzc:{}", rng.below(5)).into_bytes(),
                    6 => role_key(queue, *rng.pick(&Role::ALL), &id),
                    _ => b"{emq}:version".to_vec(),
                },
            });
        }
    }
    if let Some(tail) = cmd.tail {
        return tail_call(rng, ctx, cmd, queue, tail.role, v);
    }
    let first_arg = v.len();
    let alts = synopsis(&cmd.args_synopsis());
    let alt = &alts[rng.below(alts.len())];
    emit(rng, ctx, cmd, alt, &id, &mut v);
    (v, first_arg)
}

/// A call with a tail of keys: `n`, n keys of the tail's role (ids of the pool, so some exist
/// and some repeat), then for TRA.COMPLETESNEXT a finish per key, the claim and options; for
/// TRA.ADD one job per key — `name data k` and k option words, from the table's option
/// vocabulary with values that parse (an ALIAS of a few keys, so they collide). Now and then
/// LIFO beside DELAY, which is refused.
fn tail_call(
    rng: &mut Rng,
    ctx: &Ctx,
    cmd: &Command,
    queue: &str,
    role: Role,
    mut v: Vec<Vec<u8>>,
) -> (Vec<Vec<u8>>, usize) {
    let n = match rng.below(10) {
        0 => 0,
        1..=6 => 1 + rng.below(3),
        _ => 4 + rng.below(5),
    };
    v.push(n.to_string().into_bytes());
    let ids: Vec<String> = (0..n).map(|_| rng.pick(&ctx.ids).clone()).collect();
    v.extend(ids.iter().map(|id| role_key(queue, role, id)));
    let first_arg = v.len();
    if cmd.name == "TRA.COMPLETESNEXT" {
        // A `token result` pair per row, the claim's token and lease, then options.
        for id in &ids {
            v.push(value(rng, ctx, cmd, "token", id));
            v.push(value(rng, ctx, cmd, "result", id));
        }
        v.push(value(rng, ctx, cmd, "token", ""));
        v.push(value(rng, ctx, cmd, "lease_ms", ""));
        for _ in 0..rng.below(4) {
            let w: &[&str] = match rng.below(6) {
                0 => &["KEEP", *rng.pick(&["-1", "0", "3", "-2"])],
                1 => &["AGE", *rng.pick(&["0", "1000"])],
                2 => &["ECHO"],
                3 => &["METRICS", *rng.pick(&["1", "10080", "0"])],
                4 => &["BY", *rng.pick(&["w-a", "", "w-b"])],
                _ => &["ROW"],
            };
            v.extend(w.iter().map(|x| x.as_bytes().to_vec()));
        }
        return (v, first_arg);
    }
    for id in &ids {
        v.push(value(rng, ctx, cmd, "name", id));
        v.push(value(rng, ctx, cmd, "data", id));
        let mut words: Vec<Vec<u8>> = Vec::new();
        for _ in 0..rng.below(4) {
            let w: &[&str] = match rng.below(13) {
                12 => &["KEEPLAST"],
                8 => &["DEDUP", *rng.pick(&DEDUP_IDS)],
                9 => &["DEDUPTTL", *rng.pick(&["600000", "0", "5"])],
                10 => &["EXTEND"],
                11 => &["REPLACE"],
                0 => &["PRIORITY", *rng.pick(&["0", "3", "2097152"])],
                1 => &["ATTEMPTS", *rng.pick(&["1", "3", "0"])],
                2 => &["ALIAS", *rng.pick(&["k1", "k2", "k3", ""])],
                3 => &["DELAY", *rng.pick(&["+0", "+100", "1"])],
                4 => &["LIFO"],
                5 => &["EXPIRE", *rng.pick(&["+100", "1"])],
                6 => &["BACKOFF", "FIXED", "5"],
                _ => &["OPTS", "{}"],
            };
            words.extend(w.iter().map(|x| x.as_bytes().to_vec()));
        }
        v.push(words.len().to_string().into_bytes());
        v.extend(words);
    }
    (v, first_arg)
}

// ---------------------------------------------------------------------------------------
// Bending it.

const NUMBERS: [&str; 32] = [
    "-1",
    "0",
    "-0",
    "1",
    "9223372036854775807",
    "-9223372036854775808",
    "9223372036854775808",
    "-9223372036854775809",
    "99999999999999999999999",
    "1e3",
    "0x10",
    " 5",
    "5 ",
    "+5",
    "++5",
    "+-5",
    "2147483648",
    "2147483649",
    "9007199254740991",
    "9007199254740992",
    "NaN",
    "inf",
    "1.5",
    "00000000000000000000001",
    "-",
    "+",
    "1000",
    "1001",
    "10000",
    "10001",
    "4096",
    "4097",
];

fn odd_id(rng: &mut Rng) -> Vec<u8> {
    match rng.below(10) {
        0 => b"JOBzzzzzzzzzzz".to_vec(),
        1 => b"JOBLygHa16AHYG".to_vec(),
        2 => b"JOBLygHa16AHYF".to_vec(),
        3 => b"JOB0000000001".to_vec(),
        4 => b"JOB000000000001".to_vec(),
        5 => b"job00000000001".to_vec(),
        6 => [&b"JOB"[..], &[0u8; 11]].concat(),
        7 => [&b"JOB0000000000"[..], &[0xff]].concat(),
        8 => id_of("MSG", 1).into_bytes(),
        _ => rng.bytes(20),
    }
}

fn odd_string(rng: &mut Rng) -> Vec<u8> {
    match rng.below(12) {
        0 => vec![],
        1 => vec![b'x'; 4097],
        2 => vec![b'y'; 129],
        3 => vec![b'n'; 257],
        // Past the default max-payload too; rare, it is a megabyte on the wire.
        4 if rng.chance(15) => vec![b'z'; (1 << 20) + 1],
        5 => b"\x00".to_vec(),
        6 => b"\xff\xfe\x00\r\n".to_vec(),
        7 => "é€".as_bytes().to_vec(),
        8 => rng.pick(&NUMBERS).as_bytes().to_vec(),
        9 => odd_id(rng),
        _ => rng.bytes(24),
    }
}

fn odd_key(rng: &mut Rng, cmd: &Command, pos: usize) -> Vec<u8> {
    let roles = Role::ALL;
    let id = id_of("JOB", 5);
    match rng.below(12) {
        // Another role of the same queue.
        0 | 1 => role_key("fz", *rng.pick(&roles), &id),
        // The right role of another queue (two queues in one call).
        2 | 3 => match cmd.keys.get(pos).map(|k| k.role) {
            Some(KeyRole::Queue(r)) => role_key(rng.pick::<&str>(&["fz2", "fzt"]), r, &id),
            _ => role_key("fz2", Role::Wait, &id),
        },
        4 => b"emq:{fz}:job:".to_vec(),
        5 => b"emq:{fz}:fails:".to_vec(),
        6 => b"emq:{}:wait".to_vec(),
        7 => b"emq:{a b}:wait".to_vec(),
        8 => b"{emq}:version".to_vec(),
        9 => [&b"emq:{fz}:job:"[..], &odd_id(rng)].concat(),
        10 => vec![b'k'; 5000],
        _ => rng.bytes(30),
    }
}

fn mutate(rng: &mut Rng, ctx: &Ctx, cmd: &Command, v: &mut Vec<Vec<u8>>, first_arg: usize) {
    let nkeys = cmd.keys.len();
    match rng.below(14) {
        // numkeys
        0 => {
            let bad: Vec<u8> = match rng.below(4) {
                0 => (nkeys as i64 + if rng.chance(50) { 1 } else { -1 }).to_string().into_bytes(),
                1 => rng.pick(&NUMBERS).as_bytes().to_vec(),
                2 => b"x".to_vec(),
                _ => rng.bytes(4),
            };
            if cmd.form == Form::Keys && v.len() > 1 {
                v[1] = bad;
            } else {
                v.insert(1, bad);
            }
        }
        // too few
        1 => {
            let k = 1 + rng.below(v.len().saturating_sub(1).max(1));
            v.truncate(v.len().saturating_sub(k).max(1));
        }
        // too many
        2 => {
            for _ in 0..1 + rng.below(4) {
                let extra =
                    if rng.chance(50) { rng.pick(&ctx.options).as_bytes().to_vec() } else { odd_string(rng) };
                v.push(extra);
            }
        }
        // a key of the wrong role, queue or type
        3 if nkeys > 0 => {
            let pos = rng.below(nkeys);
            if 2 + pos < v.len() {
                v[2 + pos] = odd_key(rng, cmd, pos);
            }
        }
        // the job suffix malformed, everywhere it appears
        4 if nkeys > 0 => {
            let id = odd_id(rng);
            for (pos, k) in cmd.keys.iter().enumerate() {
                if k.role == KeyRole::Queue(Role::Job) && 2 + pos < v.len() {
                    v[2 + pos] = [&b"emq:{fz}:job:"[..], &id].concat();
                }
            }
        }
        // an argument replaced by an odd string or number
        5 | 6 | 11 | 12 | 13 if v.len() > first_arg => {
            let i = first_arg + rng.below(v.len() - first_arg);
            v[i] = if rng.chance(50) { rng.pick(&NUMBERS).as_bytes().to_vec() } else { odd_string(rng) };
        }
        // an option repeated, in lower case, or without its value
        7 if v.len() > first_arg => {
            let i = first_arg + rng.below(v.len() - first_arg);
            let w = v[i].clone();
            match rng.below(3) {
                0 => {
                    let tail: Vec<Vec<u8>> = v[i..].to_vec();
                    v.extend(tail);
                }
                1 => v[i] = w.to_ascii_lowercase(),
                _ => v.truncate(i + 1),
            }
        }
        // an option word inserted somewhere
        8 => {
            let at = first_arg.min(v.len()) + rng.below(v.len().saturating_sub(first_arg) + 1);
            let w = match rng.below(4) {
                0 => b"NOPE".to_vec(),
                1 => b"KEEPX".to_vec(),
                _ => rng.pick(&ctx.options).as_bytes().to_vec(),
            };
            v.insert(at.min(v.len()), w);
        }
        // two arguments swapped
        9 if v.len() > 2 => {
            let (a, b) = (1 + rng.below(v.len() - 1), 1 + rng.below(v.len() - 1));
            v.swap(a, b);
        }
        // noise
        _ => {
            let n = rng.below(10);
            v.truncate(1);
            for _ in 0..n {
                let a = match rng.below(4) {
                    0 => rng.pick(&ctx.options).as_bytes().to_vec(),
                    1 => odd_key(rng, cmd, 0),
                    2 => rng.pick(&NUMBERS).as_bytes().to_vec(),
                    _ => odd_string(rng),
                };
                v.push(a);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// The server's state.

fn run(c: &mut Conn, q: &Q, verb: &str, id: &str, args: &[&str]) -> Reply {
    let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
    q.run(c, verb, id, &a)
}

/// Jobs in every state in `fz`, `fz2` and `fzr`, wrongly typed keys in `fzt`, and in `fzr`
/// some rows of the wrong type while their ids sit in wait, prio, active, delayed, failed
/// (so CLAIM, STALLED and retention meet them half-way through a call), and held and expired
/// jobs also in `completed` or `failed`.
fn populate(c: &mut Conn) -> Vec<String> {
    assert_eq!(c.call(&[b"FLUSHALL"]), Reply::Simple("OK".into()));
    assert_eq!(c.call(&[b"EMQ.INSTALL", b"1", b"{emq}:version"]), Reply::Int(1));
    let expire = COMMANDS.iter().any(|c| c.name == "EMQ.ENQUEUE" && c.args_synopsis().contains("[EXPIRE "));
    for q in [Q::new("fz"), Q::new("fz2"), Q::new("fzr")] {
        // Claimed in this order: 5..8 (8 with a 1 ms lease, so it is expired), 11, 12.
        // 5 holds DEDUP d3, for which a job is kept below (KEEPLAST) while 5 is active.
        for i in [5, 6, 7, 8, 11, 12] {
            let mut a = vec!["job", "{}", "ATTEMPTS", "3", "BACKOFF", "FIXED", "10"];
            if i == 5 {
                a.extend(["DEDUP", "d3"]);
            }
            assert_eq!(run(c, &q, "EMQ.ENQUEUE", &jid(i), &a), Reply::Int(1));
        }
        for i in [5, 6, 7, 8, 11, 12] {
            let lease = if i == 8 { "1" } else { "600000" };
            let r = run(c, &q, "EMQ.CLAIM", "", &[&format!("tok{i}"), lease]);
            assert_eq!(r.array()[0].array()[0].str(), jid(i), "{r:?}");
        }
        // Kept for d3 (made when 5 finishes); in `fz2` the kept job's key is of the wrong type.
        if q.k("") == Q::new("fz2").k("") {
            c.call(&[b"SET", q.k("kept:d3").as_bytes(), b"x"]);
        } else {
            let r =
                run(c, &q, "EMQ.ENQUEUE", &jid(41), &["job", "{}", "DEDUP", "d3", "KEEPLAST", "ALIAS", "k4"]);
            assert_eq!(r, Reply::Bulk(jid(5).into_bytes()));
        }
        assert_eq!(run(c, &q, "EMQ.COMPLETE", &jid(11), &["tok11", "done", "KEEP", "-1"]), Reply::Int(1));
        assert_eq!(
            run(c, &q, "EMQ.FAIL", &jid(12), &["tok12", "boom", "KEEP", "-1", "FINAL"]),
            Reply::Simple("failed".into())
        );
        // Logs of two held jobs (every path that deletes a row deletes its log), a progress
        // report on a third.
        for (i, lines) in [(5, 2), (6, 1)] {
            for n in 0..lines {
                let (row, log, tok) = (q.job(&jid(i)), q.k(&format!("log:{}", jid(i))), format!("tok{i}"));
                let argv: [&[u8]; 6] =
                    [b"TRA.LOG", b"2", row.as_bytes(), log.as_bytes(), tok.as_bytes(), b"line"];
                assert_eq!(c.call(&argv), Reply::Int(n + 1));
            }
        }
        let row = q.job(&jid(7));
        let (active, events) = (q.k("active"), q.k("events"));
        let argv: [&[u8]; 7] =
            [b"TRA.PROGRESS", b"3", row.as_bytes(), active.as_bytes(), events.as_bytes(), b"tok7", b"50%"];
        assert_eq!(c.call(&argv), Reply::Int(1));
        run(c, &q, "EMQ.ENQUEUE", &jid(1), &["job", "{}"]);
        run(c, &q, "EMQ.ENQUEUE", &jid(2), &["job", "{}", "DEDUP", "d2", "DEDUPTTL", "600000"]);
        run(c, &q, "EMQ.ENQUEUE", &jid(3), &["job", "{}", "PRIORITY", "5"]);
        run(c, &q, "EMQ.ENQUEUE", &jid(4), &["job", "{}", "LIFO"]);
        run(c, &q, "EMQ.SCHEDULE", &jid(9), &["+600000", "job", "{}", "DEDUP", "d1"]);
        run(c, &q, "EMQ.SCHEDULE", &jid(10), &["1", "job", "{}", "PRIORITY", "2"]);
        // Jobs past their EXPIRE time, one at the front of wait and one due (when the table
        // has EXPIRE): the next CLAIM fails them with `expired` instead of handing them out.
        if expire {
            for r in [
                run(c, &q, "EMQ.ENQUEUE", &jid(13), &["job", "{}", "EXPIRE", "1", "LIFO"]),
                run(c, &q, "EMQ.SCHEDULE", &jid(14), &["1", "job", "{}", "EXPIRE", "1"]),
            ] {
                assert_eq!(r, Reply::Int(1));
            }
        }
        q.check_invariant(c);
    }
    // A queue's own max stalls (STALLED without MAXSTALLS, upkeep): 0 in `fz`, a value that
    // is ignored in `fz2`; `fzt`'s meta is a string.
    for (q, v) in [("fz", &b"0"[..]), ("fz2", b"lots")] {
        assert_eq!(c.call(&[b"HSET", Q::new(q).k("meta").as_bytes(), b"max-stalls", v]), Reply::Int(1));
    }
    let t = Q::new("fzt");
    for (k, ty) in [
        ("wait", "string"),
        ("active", "hash"),
        ("events", "list"),
        ("meta", "string"),
        ("delayed", "string"),
    ] {
        let key = t.k(k);
        let r = match ty {
            "string" => c.call(&[b"SET", key.as_bytes(), b"x"]),
            "hash" => c.call(&[b"HSET", key.as_bytes(), b"f", b"v"]),
            _ => c.call(&[b"LPUSH", key.as_bytes(), b"x"]),
        };
        assert!(r.err().is_none(), "{r:?}");
    }
    for i in [1, 5, 11] {
        c.call(&[b"SET", t.job(&jid(i)).as_bytes(), b"x"]);
    }
    // A DEDUP id's key of the wrong type.
    c.call(&[b"HSET", t.k("dedup:d1").as_bytes(), b"f", b"v"]);
    c.call(&[b"ZADD", t.k("completed").as_bytes(), b"1", jid(11).as_bytes()]);
    // A log of the wrong type beside a good row (TRA.LOG answers WRONGTYPE; REMOVE, DRAIN and
    // the others delete it with its row whatever its type).
    let log = Q::new("fz2").k(&format!("log:{}", jid(7)));
    c.call(&[b"DEL", log.as_bytes()]);
    c.call(&[b"SET", log.as_bytes(), b"x"]);
    // TRA.DROP's cache rows: a frame newer and older than the versions, a short one, a hash.
    for (k, v) in [
        ("fzc:0", &b"JOB00000000005rest"[..]),
        ("fzc:1", b"JOBzzzzzzzzzzz"),
        ("fzc:2", b"short"),
        ("fzc:3", b"JOB00000000009"),
    ] {
        c.call(&[b"SET", k.as_bytes(), v]);
    }
    c.call(&[b"HSET", b"fzc:4", b"f", b"v"]);
    let r = Q::new("fzr");
    for (i, ty) in [(2, "string"), (3, "list"), (7, "string"), (8, "list"), (9, "string"), (12, "string")] {
        let key = r.job(&jid(i));
        c.call(&[b"DEL", key.as_bytes()]);
        let rep = if ty == "string" {
            c.call(&[b"SET", key.as_bytes(), b"x"])
        } else {
            c.call(&[b"RPUSH", key.as_bytes(), b"x"])
        };
        assert!(rep.err().is_none(), "{rep:?}");
    }
    // Held and expired jobs of `fzr` also in the finished sets they may go to, as the oldest
    // entries (no verb does this; a client can): a finish must not retire its own job.
    for (set, i) in [("completed", 5), ("completed", 6), ("failed", 6), ("failed", 13), ("failed", 14)] {
        assert_eq!(c.call(&[b"ZADD", r.k(set).as_bytes(), b"0", jid(i).as_bytes()]), Reply::Int(1));
    }
    // ids[k] is jid(k + 1), held (if at all) by token `tok{k + 1}`; 13 and 14 expired.
    let mut ids: Vec<String> = (1..=14).map(jid).collect();
    ids.extend([jid(40), jid(41)]);
    ids
}

fn show(b: &[u8]) -> String {
    if b.len() > 60 {
        let head = show(&b[..24]);
        return format!("{head}…({} bytes)", b.len());
    }
    escape(b)
}

fn show_argv(v: &[Vec<u8>]) -> String {
    v.iter().map(|a| show(a)).collect::<Vec<_>>().join(" ")
}

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Who sends a batch of calls: a user, over one connection (RESP2 or RESP3).
struct Who {
    name: &'static str,
    conn: Conn,
    weight: usize,
}

/// The state of the fuzzed queues, read in one script (atomic): per queue, the six state
/// sets, every row's `st` (or why there is none) and every log key's job id.
const STATE_SCRIPT: &[u8] = br#"
local out = {}
for _, q in ipairs(ARGV) do
  local p = 'emq:{' .. q .. '}:'
  local function safe(...) local ok, r = pcall(redis.call, ...) if ok then return r end return {} end
  local part = { safe('LRANGE', p .. 'wait', 0, -1) }
  for _, z in ipairs({'prio', 'active', 'delayed', 'completed', 'failed'}) do
    table.insert(part, safe('ZRANGE', p .. z, 0, -1))
  end
  local rows, logs, dedups = {}, {}, {}
  local cursor = '0'
  repeat
    local r = redis.call('SCAN', cursor, 'MATCH', p .. '*', 'COUNT', 1000)
    cursor = r[1]
    for _, k in ipairs(r[2]) do
      local rest = string.sub(k, #p + 1)
      local kind = string.sub(rest, 1, 4)
      if kind == 'job:' then
        local ok, st = pcall(redis.call, 'HGET', k, 'st')
        if not ok then st = '<not a hash>' elseif not st then st = '<no st>' end
        table.insert(rows, string.sub(rest, 5))
        table.insert(rows, st)
      elseif kind == 'log:' then
        table.insert(logs, string.sub(rest, 5))
      elseif string.sub(rest, 1, 6) == 'dedup:' then
        local ok, v = pcall(redis.call, 'GET', k)
        if ok and v then
          local row = p .. 'job:' .. v
          local st = safe('HGET', row, 'st')
          local de = safe('HGET', row, 'de')
          if type(st) ~= 'string' then st = '' end
          if type(de) ~= 'string' then de = '' end
          table.insert(dedups, { string.sub(rest, 7), v, redis.call('PTTL', k), st, de })
        end
      end
    end
  until cursor == '0'
  table.insert(part, rows)
  table.insert(part, logs)
  table.insert(part, dedups)
  table.insert(out, part)
end
return out
"#;

const SETS: [&str; 6] = ["wait", "prio", "active", "delayed", "completed", "failed"];

/// The invariant on each queue: every job id in at most one state set (and once in it), its
/// row's `st` naming that set, a row iff the job is in a set, and no `log:` key without its
/// row. `Err` says what broke.
fn invariant(c: &mut Conn, queues: &[&str]) -> Result<(), String> {
    let mut argv: Vec<&[u8]> = vec![b"EVAL", STATE_SCRIPT, b"0"];
    argv.extend(queues.iter().map(|q| q.as_bytes()));
    let r = c.call(&argv);
    let Reply::Array(parts) = &r else { return Err(format!("the state script answered {r:?}")) };
    for (q, part) in queues.iter().zip(parts) {
        let part = part.array();
        let mut seen: BTreeMap<Vec<u8>, &str> = BTreeMap::new();
        for (set, ids) in SETS.iter().zip(part) {
            for id in ids.array() {
                if let Some(other) = seen.insert(id.bytes().to_vec(), set) {
                    return Err(format!("queue {q}: {} in {set} and in {other}", show(id.bytes())));
                }
            }
        }
        let mut rows: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        for pair in part[6].array().chunks(2) {
            rows.insert(pair[0].bytes().to_vec(), pair[1].bytes().to_vec());
        }
        for (id, set) in &seen {
            match rows.get(id) {
                None => return Err(format!("queue {q}: {} is in {set} but has no row", show(id))),
                Some(st) if st.as_slice() != set.as_bytes() => {
                    return Err(format!("queue {q}: {} is in {set} but its row says {}", show(id), show(st)))
                }
                _ => {}
            }
        }
        if let Some(id) = rows.keys().find(|id| !seen.contains_key(*id)) {
            return Err(format!("queue {q}: the row of {} is in no state set", show(id)));
        }
        for log in part[7].array() {
            if !rows.contains_key(log.bytes()) {
                return Err(format!("queue {q}: the log of {} outlived its row", show(log.bytes())));
            }
        }
        // A DEDUP id without a TTL names a job that is neither finished nor gone, and that
        // job's row names the id: every finish and every deletion released it.
        for d in part[8].array() {
            let f = d.array();
            let (id, job, pttl, st, de) =
                (f[0].bytes(), f[1].bytes(), f[2].int(), f[3].bytes(), f[4].bytes());
            if pttl == -1 && (st.is_empty() || st == b"completed" || st == b"failed" || de != id) {
                return Err(format!(
                    "queue {q}: the DEDUP id {} outlived its job {} (state {}, de {})",
                    show(id),
                    show(job),
                    show(st),
                    show(de)
                ));
            }
        }
    }
    Ok(())
}

/// What one slot of a pipelined batch is.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Slot {
    Before,
    GetKeys,
    Multi,
    Call,
    Exec,
    After,
    Install,
    Ping,
}

/// One fuzzed call of a batch and what came back.
struct Sent {
    cmd: &'static Command,
    line: String,
    wrap: &'static str,
    reply: Option<Reply>,
    queued: Option<Reply>,
    exec: Option<Reply>,
    before: Option<Option<String>>,
    after: Option<Option<String>>,
}

/// What frames a call: the keyspace's digest (`DEBUG DIGEST`), or — cheap, for most batches
/// — the server's count of writes (`rdb_changes_since_last_save`: every key write a module
/// makes counts) with the replication offset (every effect a verb replicates moves it).
/// A refusal leaves it unchanged. None for a reply that is neither.
fn fingerprint(r: &Reply, exact: bool) -> Option<String> {
    match r {
        Reply::Simple(d) if exact => Some(d.clone()),
        Reply::Bulk(d) if exact => Some(String::from_utf8_lossy(d).into_owned()),
        Reply::Bulk(info) if !exact => {
            let text = String::from_utf8_lossy(info);
            let field =
                |name: &str| text.lines().find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_string()));
            Some(format!(
                "writes {} offset {}",
                field("rdb_changes_since_last_save:")?,
                field("master_repl_offset:")?
            ))
        }
        _ => None,
    }
}

/// The live fuzzer. `FUZZ_CALLS` calls (default 100 000) from seed `FUZZ_SEED` (default
/// fixed); e.g. `FUZZ_CALLS=1000000 FUZZ_SEED=7 scripts/test --test fuzz`. Calls go in
/// pipelined batches of 20 over one user's connection, each framed by `DEBUG DIGEST` before
/// and after (a refusal must leave it unchanged), the batch closed by a PING; the invariant
/// (with logs) is checked after every batch, the replica's digest every 200 calls and at the
/// end, when the queues are also populated afresh.
#[test]
fn every_command_survives_random_arguments() {
    const BATCH: usize = 20;
    let seed = env_num("FUZZ_SEED", 0x6675_7a7a);
    let calls = env_num("FUZZ_CALLS", 100_000) as usize;
    eprintln!("fuzz: {calls} calls, FUZZ_SEED={seed}");
    let srv = Server::quiet();
    let mut c = srv.conn();
    // A replica: whatever the fuzzer did, its effects (and only they) reach it.
    let replica = Server::start(Opts::default());
    let mut rc = replica.follow(&srv);
    rc.call(&[b"DEBUG", b"SET-ACTIVE-EXPIRE", b"0"]);

    // Every command the server registered for the module is in the table, and the reverse.
    let mut served = c.call(&[b"COMMAND", b"LIST", b"FILTERBY", b"MODULE", b"trafikey"]).strings();
    served.sort();
    let mut table: Vec<String> = COMMANDS.iter().map(|c| c.name.to_ascii_lowercase()).collect();
    table.sort();
    assert_eq!(served, table, "the fuzzer covers exactly the registered commands");

    // A small max-payload, so payload ranges bite without megabyte arguments.
    assert!(c.call(&[b"CONFIG", b"SET", b"trafikey.max-payload", b"4096"]).err().is_none());
    // Keys with a TTL must not vanish between the two digests of one call.
    c.call(&[b"DEBUG", b"SET-ACTIVE-EXPIRE", b"0"]);
    // Nor may the primary's own PING to its replica (every repl-ping-replica-period) move
    // the replication offset inside a call's frame.
    for conn in [&mut c, &mut rc] {
        assert!(conn.call(&[b"CONFIG", b"SET", b"repl-timeout", b"3600"]).err().is_none());
    }
    assert!(c.call(&[b"CONFIG", b"SET", b"repl-ping-replica-period", b"3600"]).err().is_none());
    // Users: narrower key permissions, read-only keys, no fence-key access, a worker. Each
    // may run INFO and DEBUG DIGEST, which frame every call of its batches.
    for acl in [
        &["ACL", "SETUSER", "narrow", "on", ">pw", "~emq:{fz}:*", "%R~{emq}:*", "+@all"][..],
        &["ACL", "SETUSER", "reader", "on", ">pw", "%R~emq:*", "%R~{emq}:*", "+@all"],
        &["ACL", "SETUSER", "blind", "on", ">pw", "~emq:*", "+@all"],
        &[
            "ACL", "SETUSER", "worker", "on", ">pw", "~*", "+@emq", "+ping", "+multi", "+exec", "+eval",
            "+debug", "+info",
        ],
    ] {
        let a: Vec<&[u8]> = acl.iter().map(|s| s.as_bytes()).collect();
        assert_eq!(c.call(&a), Reply::Simple("OK".into()));
    }
    let login = |user: &str| {
        let mut x = srv.conn();
        assert_eq!(x.call(&[b"AUTH", user.as_bytes(), b"pw"]), Reply::Simple("OK".into()));
        x
    };
    let mut resp3 = srv.conn();
    assert!(matches!(resp3.call(&[b"HELLO", b"3"]), Reply::Map(_)));
    let mut who = [
        Who { name: "default", conn: srv.conn(), weight: 60 },
        Who { name: "default/RESP3", conn: resp3, weight: 20 },
        Who { name: "narrow", conn: login("narrow"), weight: 8 },
        Who { name: "reader", conn: login("reader"), weight: 4 },
        Who { name: "blind", conn: login("blind"), weight: 4 },
        Who { name: "worker", conn: login("worker"), weight: 4 },
    ];
    let total_weight: usize = who.iter().map(|w| w.weight).sum();

    let mut rng = Rng(seed);
    let mut ctx = Ctx { ids: populate(&mut c), now_ms: 0, options: option_words() };
    let mut classes: BTreeMap<(String, String), u64> = BTreeMap::new();
    let mut samples: BTreeMap<String, String> = BTreeMap::new();
    let mut recent: Vec<String> = Vec::new();
    let mut fence: Option<usize> = None;
    let t0 = Instant::now();
    let in_sync = |c: &mut Conn, at: usize, recent: &[String]| {
        assert_eq!(c.call(&[b"WAIT", b"1", b"5000"]), Reply::Int(1), "the replica acknowledges");
        let (a, b) = (digest(c), digest(&mut replica.conn()));
        assert_eq!(
            a,
            b,
            "FUZZ_SEED={seed}: the replica's keyspace differs from the primary's by call {at}\nthe last calls:\n{}",
            recent.join("\n")
        );
    };
    let fail = |what: String, line: &str, recent: &[String]| -> ! {
        let log = srv.log();
        let tail: Vec<&str> = log.lines().rev().take(15).collect::<Vec<_>>().into_iter().rev().collect();
        // The handle audit's report, which a crash report's many lines would push out of the tail.
        let audit: Vec<&str> = log.lines().filter(|l| l.contains("trafikey audit-handles")).collect();
        panic!(
            "FUZZ_SEED={seed}: {what}\n  call {line}\nthe last calls (this batch's, in order):\n{}\nserver log, the handle audit:\n{}\nserver log tail:\n{}",
            recent.join("\n"),
            audit.join("\n"),
            tail.join("\n")
        );
    };

    let mut moved = 0u64;
    let mut i = 0;
    while i < calls {
        if i > 0 && i % 200 == 0 && fence.is_none() {
            in_sync(&mut c, i, &recent);
            ctx.ids = populate(&mut c);
        }
        // Fence phases: for 60 calls in every 1000 the fence key is absent, the scripted
        // wire's, or of the wrong type; then the fence's EMQWIRE refusals and WRONGTYPE are expected.
        if i % 1000 == 900 {
            fence = Some(i / 1000 % 3);
            match i / 1000 % 3 {
                0 => c.call(&[b"DEL", b"{emq}:version"]),
                1 => c.call(&[b"SET", b"{emq}:version", b"echomq:4.0.0"]),
                _ => {
                    c.call(&[b"DEL", b"{emq}:version"]);
                    c.call(&[b"LPUSH", b"{emq}:version", b"echomq:6.0.0"])
                }
            };
        }
        if i % 1000 == 960 {
            fence = None;
            c.call(&[b"DEL", b"{emq}:version"]);
            assert_eq!(c.call(&[b"EMQ.INSTALL", b"1", b"{emq}:version"]), Reply::Int(1));
        }
        if i % 100 == 0 {
            let t = c.call(&[b"TIME"]).strings();
            ctx.now_ms = t[0].parse::<i64>().unwrap_or(0) * 1000 + t[1].parse::<i64>().unwrap_or(0) / 1000;
        }
        let phase = match fence {
            Some(0) => " (fence key absent)",
            Some(1) => " (fence key echomq:4.0.0)",
            Some(_) => " (fence key a list)",
            None => "",
        };
        let mut pick = rng.below(total_weight);
        let w = who
            .iter()
            .position(|w| {
                if pick < w.weight {
                    true
                } else {
                    pick -= w.weight;
                    false
                }
            })
            .unwrap_or(0);
        let w = &mut who[w];
        let default_user = w.name.starts_with("default");

        // The batch: each call framed by the write counters (or, in every tenth batch, by
        // DEBUG DIGEST), then a PING.
        let end = (i + BATCH).min(calls);
        let exact = (i / BATCH).is_multiple_of(10);
        let frame: &[&[u8]] =
            if exact { &[b"DEBUG", b"DIGEST"] } else { &[b"INFO", b"persistence", b"replication"] };
        let mut sent: Vec<Sent> = Vec::with_capacity(end - i);
        let mut slots: Vec<(usize, Slot)> = Vec::new();
        let mut wire: Vec<u8> = Vec::new();
        let put = |wire: &mut Vec<u8>, slots: &mut Vec<(usize, Slot)>, k: usize, s: Slot, argv: &[&[u8]]| {
            resp::encode(argv, wire);
            slots.push((k, s));
        };
        recent.clear();
        for n in i..end {
            let k = n - i;
            let cmd = &COMMANDS[n % COMMANDS.len()];
            let (mut v, first_arg) = valid(&mut rng, &ctx, cmd);
            let bends = match rng.below(10) {
                0 | 1 => 0,
                2..=7 => 1,
                8 => 2,
                _ => 3,
            };
            for _ in 0..bends {
                mutate(&mut rng, &ctx, cmd, &mut v, first_arg);
            }
            short_waits(&mut rng, &mut v);
            // Mostly sent as it is; sometimes from a script, or inside MULTI/EXEC.
            let wrap = match rng.below(100) {
                0..=4 => "script",
                5..=7 => "multi",
                _ => "plain",
            };
            let line = format!("#{n} as {}{phase}: {} [{wrap}]", w.name, show_argv(&v));
            recent.push(line.clone());
            put(&mut wire, &mut slots, k, Slot::Before, frame);
            // The server's key extraction from the command's key specs, on the same vector.
            if rng.chance(10) {
                let mut g: Vec<&[u8]> = vec![b"COMMAND", b"GETKEYSANDFLAGS"];
                g.extend(v.iter().map(Vec::as_slice));
                put(&mut wire, &mut slots, k, Slot::GetKeys, &g);
            }
            let refs: Vec<&[u8]> = v.iter().map(Vec::as_slice).collect();
            match wrap {
                "script" => {
                    let mut e: Vec<&[u8]> = vec![b"EVAL", b"return server.pcall(unpack(ARGV))", b"0"];
                    e.extend(&refs);
                    put(&mut wire, &mut slots, k, Slot::Call, &e);
                }
                "multi" => {
                    put(&mut wire, &mut slots, k, Slot::Multi, &[b"MULTI"]);
                    put(&mut wire, &mut slots, k, Slot::Call, &refs);
                    put(&mut wire, &mut slots, k, Slot::Exec, &[b"EXEC"]);
                }
                _ => put(&mut wire, &mut slots, k, Slot::Call, &refs),
            }
            put(&mut wire, &mut slots, k, Slot::After, frame);
            // TRA.DROP takes any key: it may delete the fence key (a 12-byte frame is short),
            // as the coherence drop's reference Lua script (tests/fixtures/coherence_drop.lua)
            // would. Put it back at once outside the fence phases (only the default user may).
            if cmd.name == "TRA.DROP" && default_user && fence.is_none() {
                put(&mut wire, &mut slots, k, Slot::Install, &[b"EMQ.INSTALL", b"1", b"{emq}:version"]);
            }
            sent.push(Sent {
                cmd,
                line,
                wrap,
                reply: None,
                queued: None,
                exec: None,
                before: None,
                after: None,
            });
        }
        put(&mut wire, &mut slots, end - i, Slot::Ping, &[b"PING"]);
        if w.conn.send_raw(&wire).is_err() {
            fail("could not send (the server closed the connection)".into(), &recent[0], &recent);
        }
        for (k, slot) in &slots {
            let line = recent.get(*k).cloned().unwrap_or_else(|| "(the batch's PING)".into());
            let r = match w.conn.read() {
                Ok(r) => r,
                Err(e) => fail(format!("no reply ({e}): did the server die?"), &line, &recent),
            };
            match slot {
                Slot::Ping => {
                    if !matches!(&r, Reply::Simple(s) if s == "PONG") {
                        fail(format!("PING answered {r:?}"), &line, &recent);
                    }
                }
                Slot::Install => {
                    if !matches!(r, Reply::Int(0 | 1)) {
                        fail(format!("EMQ.INSTALL after TRA.DROP answered {r:?}"), &line, &recent);
                    }
                }
                Slot::GetKeys => {}
                Slot::Multi => {
                    if r.err().is_some() {
                        fail(format!("MULTI refused: {r:?}"), &line, &recent);
                    }
                }
                Slot::Before => sent[*k].before = Some(fingerprint(&r, exact)),
                Slot::After => sent[*k].after = Some(fingerprint(&r, exact)),
                Slot::Call if sent[*k].wrap == "multi" => sent[*k].queued = Some(r),
                Slot::Call => sent[*k].reply = Some(r),
                Slot::Exec => sent[*k].exec = Some(r),
            }
        }
        for s in &mut sent {
            if s.wrap == "multi" {
                // QUEUED (or an error at queue time), then EXEC's one-element array.
                s.reply = Some(match (s.queued.take(), s.exec.take()) {
                    (Some(Reply::Error(e)), _) => Reply::Error(e),
                    (_, Some(Reply::Array(mut a))) if a.len() == 1 => a.remove(0),
                    (_, Some(Reply::Error(e))) => Reply::Error(e),
                    (_, other) => fail(format!("EXEC answered {other:?}"), &s.line, &recent),
                });
            }
            let reply = s.reply.take().unwrap_or(Reply::Nil);
            let outcome = match &reply {
                Reply::Error(e) => {
                    if !e.is_ascii() || e.contains(['\r', '\n']) {
                        fail(format!("an error line that is not one line of ASCII: {e:?}"), &s.line, &recent);
                    }
                    let class = e.split(' ').next().unwrap_or("").to_string();
                    if !CLASSES.contains(&class.as_str()) {
                        fail(format!("an error of no known class: {e:?}"), &s.line, &recent);
                    }
                    // The server's own ERR comes only from a script (its ACL failure, a
                    // command scripts may not run), EXECABORT only from MULTI.
                    // A command with a tail of keys registers an arity (`Command::arity`): a
                    // call too short for it is the server's own arity error.
                    let arity = s.cmd.arity() != -1 && e.starts_with("ERR wrong number of arguments");
                    if (class == "ERR" && s.wrap != "script" && !arity)
                        || (class == "EXECABORT" && s.wrap != "multi")
                    {
                        fail(
                            format!(
                                "{class} outside a {}: {e:?}",
                                if class == "ERR" { "script" } else { "transaction" }
                            ),
                            &s.line,
                            &recent,
                        );
                    }
                    let fence_text = e.starts_with("EMQWIRE expected echomq:6.0.0 ");
                    if class == "EMQWIRE" && !(fence.is_some() && fence_text) {
                        fail(
                            format!(
                                "EMQWIRE {} (the fence's class outside the fence): {e:?}",
                                if fence.is_some() {
                                    "that is not a fence refusal"
                                } else {
                                    "with the fence key in place"
                                }
                            ),
                            &s.line,
                            &recent,
                        );
                    }
                    if s.before != s.after || s.before.as_ref().is_none_or(|d| d.is_none()) {
                        fail(
                            format!(
                                "a refusal ({e}) changed the keyspace ({} {:?} -> {:?})",
                                if exact { "DEBUG DIGEST" } else { "writes, replication offset" },
                                s.before,
                                s.after
                            ),
                            &s.line,
                            &recent,
                        );
                    }
                    samples.entry(format!("{} {class}", s.cmd.name)).or_insert_with(|| e.clone());
                    class
                }
                _ => {
                    // The frame is live: values that wrote something moved it.
                    if s.before != s.after {
                        moved += 1;
                    }
                    "ok".to_string()
                }
            };
            *classes.entry((s.cmd.name.to_string(), outcome)).or_default() += 1;
        }
        if let Err(e) = invariant(&mut c, &["fz", "fz2"]) {
            fail(
                format!("the invariant broke in this batch: {e}"),
                recent.last().map_or("", String::as_str),
                &recent,
            );
        }
        i = end;
    }
    in_sync(&mut c, calls, &recent);
    if let Err(e) = invariant(&mut c, &["fz", "fz2"]) {
        panic!("FUZZ_SEED={seed}: the invariant broke at the end: {e}");
    }
    let log = srv.log();
    assert!(!log.contains("panicked"), "the module panicked (caught, but a bug):\n{log}");

    let mut summary = String::new();
    let mut last = String::new();
    for ((name, class), n) in &classes {
        if *name != last {
            let _ = write!(summary, "\n  {name}:");
            last = name.clone();
        }
        let _ = write!(summary, " {class}={n}");
    }
    eprintln!("fuzz: {calls} calls in {:.1?}; outcomes per command:{summary}", t0.elapsed());
    // What the fuzz made the module do beyond replies (jobs expired, retired, promoted...).
    let info = c.call(&[b"INFO", b"trafikey"]);
    let facts: Vec<String> = String::from_utf8_lossy(info.bytes())
        .lines()
        .filter(|l| {
            ["expired", "retired", "promoted", "orphans", "reclaimed", "blocked", "timeouts"]
                .iter()
                .any(|f| l.starts_with(&format!("trafikey_{f}:")))
        })
        .map(str::to_string)
        .collect();
    eprintln!("fuzz: module counters: {}", facts.join(" "));
    if std::env::var("FUZZ_SAMPLES").is_ok() {
        for (k, e) in &samples {
            eprintln!("  {k}: {e}");
        }
    }
    assert!(
        calls < 1000 || moved > calls as u64 / 100,
        "the frames moved for only {moved} values: are they live?"
    );
    // Every command met both: values it served and refusals (the fuzz reached past shape).
    if calls >= 10_000 {
        for cmd in COMMANDS.iter() {
            let ok = classes.get(&(cmd.name.to_string(), "ok".to_string())).copied().unwrap_or(0);
            let refused: u64 =
                classes.iter().filter(|((n, o), _)| n == cmd.name && o != "ok").map(|(_, k)| *k).sum();
            assert!(ok > 0 && refused > 0, "{}: {ok} values and {refused} refusals", cmd.name);
        }
    }
}

/// Found while fuzzing EXPIRE (fixed: expired jobs no longer use up a claim): a job past its
/// EXPIRE time at the front of `wait` took the claim's place, so `EMQ.CLAIM … COUNT 1 BLOCK ms` fails it with `expired` and then waits
/// the whole timeout (with BLOCK 0, for ever) while another job sits ready behind it. The
/// contract: "With jobs ready at the call, BLOCK changes nothing", and the caller waits only
/// "until a job of the queue becomes ready".
#[test]
fn claim_block_takes_the_ready_job_behind_an_expired_one() {
    if !COMMANDS.iter().any(|c| c.name == "EMQ.ENQUEUE" && c.args_synopsis().contains("[EXPIRE ")) {
        return;
    }
    let srv = Server::quiet();
    let mut c = srv.conn();
    let q = Q::new("exp");
    assert_eq!(q.enqueue(&mut c, &jid(1), &[b"EXPIRE", b"1"]), Reply::Int(1));
    assert_eq!(q.enqueue(&mut c, &jid(2), &[]), Reply::Int(1));
    let t = Instant::now();
    let r = q.run(&mut c, "EMQ.CLAIM", "", &[b"w1", b"60000", b"COUNT", b"1", b"BLOCK", b"2000"]);
    let waited = t.elapsed();
    assert_eq!(
        q.check_invariant(&mut c).state_of(&jid(1)).as_deref(),
        Some("failed"),
        "the expired job failed"
    );
    assert!(
        matches!(&r, Reply::Array(a) if a.len() == 1 && a[0].array()[0].str() == jid(2)),
        "the ready job is handed out, got {r:?} after {waited:?}"
    );
    assert!(waited.as_millis() < 1000, "answered at once, not after {waited:?}");
}

/// Found while fuzzing EXPIRE (fixed: a claim in time spends EXPIRE): ENQUEUE's doc says EXPIRE fails "a job no CLAIM has taken by
/// `when`", but a job claimed in time whose first attempt fails (a retry, ATTEMPTS 3) after
/// that time is failed with `expired` by the next CLAIM: its other attempts never run. The
/// same for a job completed in time and then REPROCESSed.
#[test]
fn expire_spares_a_job_a_claim_took_in_time() {
    if !COMMANDS.iter().any(|c| c.name == "EMQ.ENQUEUE" && c.args_synopsis().contains("[EXPIRE ")) {
        return;
    }
    let srv = Server::quiet();
    let mut c = srv.conn();
    let q = Q::new("exp");
    let id = jid(1);
    assert_eq!(q.enqueue(&mut c, &id, &[b"ATTEMPTS", b"3", b"EXPIRE", b"+50"]), Reply::Int(1));
    let r = q.run(&mut c, "EMQ.CLAIM", "", &[b"w1", b"60000"]);
    assert_eq!(r.array()[0].array()[0].str(), id, "claimed in time");
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert_eq!(q.run(&mut c, "EMQ.FAIL", &id, &[b"w1", b"boom"]), Reply::Simple("retry".into()));
    let r = q.run(&mut c, "EMQ.CLAIM", "", &[b"w2", b"60000"]);
    let snap = q.check_invariant(&mut c);
    assert!(
        matches!(&r, Reply::Array(a) if a.len() == 1),
        "the retry is handed out, got {r:?}; the job is {:?} with error {:?}",
        snap.state_of(&id),
        snap.field(&id, "e")
    );
}
