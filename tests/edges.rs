//! Every numeric argument of every command and every numeric config, at the edges of the range
//! it declares: the smallest and the largest accepted value are accepted and take effect as the
//! contract states (a rate limit at its largest window still limits, a lease at its longest is
//! that long, a COUNT at its cap takes that many, a config at its largest is honoured), and one
//! past each end is refused with the contract's error, nothing written (`DEBUG DIGEST` and the
//! keys' expiry times unchanged).
//!
//! The ranges come from the declarations, not from this file: each argument's `Arg::range` in
//! the command table (the constant its domain step checks it against) and each config's
//! `min`/`max` (`trafikey::config::INTS`). A numeric argument or config without a case here, or
//! a case for one that is not declared, fails `every_declared_range_has_its_case`.
// A test may panic: that is how it fails. The module's own rules are for src/.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

use std::collections::BTreeSet;
use std::thread::sleep;
use std::time::Duration;

use trafikey::config;
use trafikey::domain::limit::Limits;
use trafikey::domain::{Range, TIME_MAX};
use trafikey::host::command::{Arg, Form, KeyRole, Shape, Ty};
use trafikey::verbs::COMMANDS;
use trafikey_support::*;

// ---------------------------------------------------------------------------------------------
// The declarations.

/// Every numeric argument of the table as `(label, range)`, the label `"<command> <path>"` (the
/// argument's name behind the names of the blocks it sits in, or `n` for the count of a tail
/// of keys); a numeric argument declared without a range has `None`.
fn declared() -> Vec<(String, Option<Range>)> {
    fn walk(
        cmd: &str,
        path: &mut Vec<&'static str>,
        args: &'static [Arg],
        out: &mut Vec<(String, Option<Range>)>,
    ) {
        for a in args {
            path.push(a.name);
            match a.shape {
                Shape::Value(ty) if ty == Ty::Int || a.range.is_some() => {
                    out.push((format!("{cmd} {}", path.join(".")), a.range));
                }
                Shape::OneOf(inner) | Shape::Block(inner) => walk(cmd, path, inner, out),
                Shape::Value(_) | Shape::Word => {}
            }
            path.pop();
        }
    }
    let mut out = Vec::new();
    for c in COMMANDS.iter() {
        if let Some(t) = c.tail {
            out.push((format!("{} n", c.name), Some(t.count)));
        }
        walk(c.name, &mut Vec::new(), c.args, &mut out);
    }
    out
}

fn range_of(label: &str) -> Range {
    declared()
        .into_iter()
        .find(|(l, _)| l == label)
        .and_then(|(_, r)| r)
        .unwrap_or_else(|| panic!("{label} is not declared with a range"))
}

type Edge = fn(&mut Lab, &str, Range);
/// A call with one value in place.
type Call = Box<dyn Fn(&str) -> Vec<Vec<u8>>>;
type ConfigEdge = fn(&mut Lab, &config::Int);

/// One case per declared argument; the number says which server test runs it (each has a
/// server of its own, so the three run side by side).
const CASES: &[(&str, Edge, u8)] = &[
    ("EMQ.ENQUEUE priority", priority, 1),
    ("EMQ.ENQUEUE attempts", attempts, 1),
    ("EMQ.ENQUEUE backoff.ms", backoff, 1),
    ("EMQ.ENQUEUE expire", expire, 1),
    ("EMQ.ENQUEUE dedup.lifetime.dedupttl.ms", dedup_ttl, 1),
    ("EMQ.SCHEDULE when", when, 1),
    ("EMQ.SCHEDULE priority", priority, 1),
    ("EMQ.SCHEDULE attempts", attempts, 1),
    ("EMQ.SCHEDULE backoff.ms", backoff, 1),
    ("EMQ.SCHEDULE expire", expire, 1),
    ("EMQ.SCHEDULE dedup.lifetime.dedupttl.ms", dedup_ttl, 1),
    ("TRA.SCHEDULER action.set.job.priority", priority, 1),
    ("TRA.SCHEDULER action.set.job.attempts", attempts, 1),
    ("TRA.SCHEDULER action.set.job.backoff.ms", backoff, 1),
    ("EMQ.RESCHEDULE when", when, 1),
    ("EMQ.DELAY when", when, 1),
    ("EMQ.FAIL decision.delay.when", when, 1),
    ("EMQ.CLAIM mode.take.lease_ms", lease, 1),
    ("EMQ.EXTEND lease_ms", lease, 1),
    ("EMQ.EXTENDS lease_ms", lease, 1),
    ("TRA.COMPLETENEXT lease_ms", lease, 1),
    ("TRA.COMPLETESNEXT lease_ms", lease, 1),
    ("TRA.COMPLETESNEXT n", finish_n, 1),
    ("EMQ.CLAIM mode.take.count", claim_count, 1),
    ("TRA.COMPLETENEXT count", claim_count, 1),
    ("EMQ.CLAIM mode.take.block", block, 1),
    ("EMQ.COMPLETE keep", keep, 2),
    ("EMQ.FAIL keep", keep, 2),
    ("TRA.COMPLETENEXT keep", keep, 2),
    ("TRA.COMPLETESNEXT keep", keep, 2),
    ("EMQ.COMPLETE age", age, 2),
    ("EMQ.FAIL age", age, 2),
    ("TRA.COMPLETENEXT age", age, 2),
    ("TRA.COMPLETESNEXT age", age, 2),
    ("EMQ.COMPLETE metrics", metrics, 2),
    ("EMQ.FAIL metrics", metrics, 2),
    ("TRA.COMPLETENEXT metrics", metrics, 2),
    ("TRA.COMPLETESNEXT metrics", metrics, 2),
    ("EMQ.STALLED maxstalls", max_stalls, 2),
    ("EMQ.STALLED count", stalled_count, 2),
    ("TRA.DRAIN count", delete_count, 2),
    ("TRA.CLEAN count", delete_count, 2),
    ("TRA.OBLITERATE count", delete_count, 2),
    ("TRA.CLEAN grace", grace, 2),
    ("TRA.PRIORITY priority", new_priority, 2),
    ("TRA.ADD job.k", add_k, 2),
    ("TRA.ADD n", add_n, 2),
    ("TRA.JOBS from", jobs_from, 2),
    ("TRA.JOBS count", jobs_count, 2),
    ("TRA.QUEUES from", queues_from, 2),
    ("TRA.QUEUES count", queues_count, 2),
    ("TRA.LOG keep", log_keep, 3),
    ("TRA.ADDLOG keep", log_keep, 3),
    ("TRA.LIMIT limit.rate.max", rate_max, 3),
    ("TRA.LIMIT limit.rate.ms", rate_ms, 3),
    ("TRA.LIMIT limit.concurrency.n", concurrency, 3),
    ("TRA.LIMIT limit.for.ms", for_ms, 3),
    ("TRA.SCHEDULER action.set.repeat.every.ms", every, 3),
    ("TRA.SCHEDULER action.set.repeat.every.offset", offset, 3),
    ("TRA.SCHEDULER action.set.start", start, 3),
    ("TRA.SCHEDULER action.set.end", end, 3),
    ("TRA.SCHEDULER action.set.limit", sched_limit, 3),
    ("TRA.SCHEDULERS what.list.start", list_rank, 3),
    ("TRA.SCHEDULERS what.list.stop", list_rank, 3),
    ("EMQ.APPEND maxlen", maxlen, 3),
    ("EMQ.PUBLISH maxlen", maxlen, 3),
    ("EMQ.FAILURES ttl", failures_ttl, 3),
];

/// One case per numeric config.
const CONFIGS: &[(&str, ConfigEdge)] = &[
    ("events-maxlen", cfg_events_maxlen),
    ("keep-completed", cfg_keep),
    ("keep-failed", cfg_keep),
    ("retention-batch", cfg_retention_batch),
    ("promote-batch", cfg_promote_batch),
    ("stalled-batch", cfg_stalled_batch),
    ("max-stalls", cfg_max_stalls),
    ("max-payload", cfg_max_payload),
    ("bus-window-ms", cfg_bus_window),
    ("bus-maxlen", cfg_bus_maxlen),
    ("log-keep", cfg_log_keep),
    ("upkeep-tick-ms", cfg_upkeep_tick),
    ("upkeep-batch", cfg_upkeep_batch),
];

#[test]
fn every_declared_range_has_its_case() {
    let declared = declared();
    let unranged: Vec<&String> = declared.iter().filter(|(_, r)| r.is_none()).map(|(l, _)| l).collect();
    assert!(unranged.is_empty(), "numeric arguments declared without a range: {unranged:?}");
    let have: BTreeSet<&str> = declared.iter().map(|(l, _)| l.as_str()).collect();
    let cases: BTreeSet<&str> = CASES.iter().map(|(l, ..)| *l).collect();
    assert_eq!(cases.len(), CASES.len(), "a label twice in CASES");
    let missing: Vec<_> = have.difference(&cases).collect();
    let stray: Vec<_> = cases.difference(&have).collect();
    assert!(missing.is_empty(), "declared ranges without an edge case: {missing:?}");
    assert!(stray.is_empty(), "edge cases of nothing declared: {stray:?}");
    let ints: BTreeSet<&str> = config::INTS.iter().map(|c| c.name).collect();
    let cfgs: BTreeSet<&str> = CONFIGS.iter().map(|(n, _)| *n).collect();
    assert_eq!(ints, cfgs, "every numeric config has its edge case");
}

fn run_cases(shard: u8) {
    let mut lab = Lab::quiet();
    for (label, case, s) in CASES {
        if *s != shard {
            continue;
        }
        let cmd = label.split_once(' ').map(|(c, _)| c).unwrap_or(label);
        let t0 = std::time::Instant::now();
        case(&mut lab, cmd, range_of(label));
        eprintln!("{label}: {:?}", t0.elapsed());
    }
}

#[test]
fn producers_and_holders_at_their_edges() {
    run_cases(1);
}

#[test]
fn finishes_batches_and_listings_at_their_edges() {
    run_cases(2);
}

#[test]
fn logs_limits_schedulers_and_the_bus_at_their_edges() {
    run_cases(3);
}

#[test]
fn configs_at_their_edges() {
    let mut lab = Lab::quiet();
    for (name, case) in CONFIGS {
        let c = config::INTS.iter().find(|c| c.name == *name).expect("a declared config");
        let t0 = std::time::Instant::now();
        lab.config_edges(c);
        case(&mut lab, c);
        // Each case leaves its config as it found it.
        assert_eq!(lab.config(c.name), c.default.to_string(), "{name} restored");
        eprintln!("config {name}: {:?}", t0.elapsed());
    }
}

/// Each field of `meta` a client writes and the module reads back within a range
/// (`queue::meta::STORED`), and its case: at both ends of the range it takes effect; one past,
/// it is ignored and the config stands in.
/// A stored field's case.
type StoredCase = fn(&mut Lab, Range);

const STORED: &[(&str, StoredCase)] = &[("max-stalls", stored_max_stalls)];

#[test]
fn stored_fields_at_their_edges() {
    let mut lab = Lab::quiet();
    for (field, r) in trafikey::queue::meta::STORED.iter() {
        let name = String::from_utf8_lossy(field.bytes()).into_owned();
        let (_, case) =
            STORED.iter().find(|(n, _)| *n == name).unwrap_or_else(|| panic!("meta {name}: no case"));
        case(&mut lab, *r);
    }
}

/// STALLED without MAXSTALLS (and upkeep) reads `meta`'s `max-stalls`: a job whose stall
/// reaches it is requeued, one past it failed; a value past the range leaves the config's
/// (default 1) in force.
fn stored_max_stalls(lab: &mut Lab, r: Range) {
    // (the value in meta, the job's stalls before, requeued)
    for (v, before, requeued) in
        [(r.lo, 0, false), (r.hi, r.hi - 1, true), (r.hi, r.hi, false), (r.hi + 1, r.hi, false)]
    {
        let q = lab.q();
        lab.raw(&["HSET", &key(&q, "meta"), "max-stalls", &v.to_string()]);
        let ids = lapsed(lab, &q, 1);
        lab.raw(&["HSET", &key(&q, &format!("job:{}", ids[0])), "sc", &before.to_string()]);
        let s = lab.ok(&argv("EMQ.STALLED", &q, "", &[]));
        let at = if requeued { 0 } else { 1 };
        assert_eq!(s.array()[at].strings(), ids, "meta max-stalls {v}, stalls {before}: requeued {requeued}");
    }
}

// ---------------------------------------------------------------------------------------------
// The lab: one quiet server (no upkeep: nothing moves but the calls made), a queue per use.

/// A scratch key for `SCRIPT_NOW`; gone again (1 ms) before any digest is taken.
const SCRATCH: &str = "edges:now";

struct Lab {
    s: Server,
    c: Conn,
    n: u64,
}

/// `cmd numkeys keys… args…` for queue `q`: its declared keys from the table, each suffixed
/// role with `sfx` (a job's id, a dedup id, a scheduler id), a key of one of several roles
/// named by `sfx` (`completed`, `wait`).
fn argv(cmd: &str, q: &str, sfx: &str, args: &[&str]) -> Vec<Vec<u8>> {
    let c = COMMANDS.iter().find(|c| c.name == cmd).unwrap_or_else(|| panic!("no command {cmd}"));
    let mut v: Vec<Vec<u8>> = vec![cmd.as_bytes().to_vec()];
    if c.form == Form::Keys {
        v.push(c.keys.len().to_string().into_bytes());
        for slot in c.keys.iter() {
            v.push(
                match slot.role {
                    KeyRole::Queue(r) => {
                        format!("emq:{{{q}}}:{}{}", r.word(), if r.suffixed() { sfx } else { "" })
                    }
                    KeyRole::Version => "{emq}:version".to_string(),
                    KeyRole::Any => sfx.to_string(),
                    KeyRole::OneOf(_) => format!("emq:{{{q}}}:{sfx}"),
                }
                .into_bytes(),
            );
        }
    }
    v.extend(args.iter().map(|a| a.as_bytes().to_vec()));
    v
}

/// A command with a counted tail of job rows (TRA.ADD, TRA.COMPLETESNEXT): its declared keys,
/// `n`, the n rows, then `args`.
fn tail_argv(cmd: &str, q: &str, rows: &[&str], args: &[&str]) -> Vec<Vec<u8>> {
    let mut v = argv(cmd, q, "", &[]);
    v.push(rows.len().to_string().into_bytes());
    v.extend(rows.iter().map(|id| format!("emq:{{{q}}}:job:{id}").into_bytes()));
    v.extend(args.iter().map(|a| a.as_bytes().to_vec()));
    v
}

fn key(q: &str, role: &str) -> String {
    format!("emq:{{{q}}}:{role}")
}

fn show(v: &[Vec<u8>]) -> String {
    v.iter().map(|a| String::from_utf8_lossy(a).into_owned()).collect::<Vec<_>>().join(" ")
}

/// One past each end, and whether the module parses it as a number (a value that does not
/// parse is a shape error: `EMQSHAPE`).
fn past(r: Range) -> [(String, bool); 2] {
    let out = |v: i128| (v.to_string(), v > i128::from(i64::MIN) && v <= i128::from(i64::MAX));
    [out(i128::from(r.lo) - 1), out(i128::from(r.hi) + 1)]
}

/// The domain step's refusal of a value out of `r`.
fn arg_error(r: Range) -> String {
    format!("EMQARG {} must be {}..={}", r.what, r.lo, r.hi)
}

impl Lab {
    fn quiet() -> Lab {
        let s = Server::quiet();
        let c = s.conn();
        Lab { s, c, n: 0 }
    }

    fn q(&mut self) -> String {
        self.n += 1;
        format!("edge{}", self.n)
    }

    fn id(&mut self) -> String {
        self.n += 1;
        jid(self.n)
    }

    fn raw(&mut self, args: &[&str]) -> Reply {
        let v: Vec<Vec<u8>> = args.iter().map(|a| a.as_bytes().to_vec()).collect();
        self.c.call_v(&v)
    }

    fn ok(&mut self, v: &[Vec<u8>]) -> Reply {
        let r = self.c.call_v(v);
        assert!(r.err().is_none(), "{}: {r:?}", show(v));
        r
    }

    /// `v` refused with `want` (its whole text; a text ending in `…`, its beginning), and the
    /// keyspace as it was.
    fn refused(&mut self, v: &[Vec<u8>], want: &str) {
        let before = digest(&mut self.c);
        let r = self.c.call_v(v);
        let e = r.err().unwrap_or_else(|| panic!("{} accepted: {r:?}", show(v)));
        match want.strip_suffix('…') {
            Some(head) => assert!(e.starts_with(head), "{}: {e}, not {want}", show(v)),
            None => assert_eq!(e, want, "{}", show(v)),
        }
        assert_eq!(digest(&mut self.c), before, "{} refused but wrote", show(v));
    }

    /// Both values one past `r` refused: a number out of range with `want`, one that does not
    /// parse with `EMQSHAPE`.
    fn refuses_past(&mut self, r: Range, want: &str, call: impl Fn(&str) -> Vec<Vec<u8>>) {
        for (v, parses) in past(r) {
            self.refused(&call(&v), if parses { want } else { "EMQSHAPE …" });
        }
    }

    /// `v` run at a known instant: the script's clock, which the verb it calls sees too.
    /// Returns that instant, the verb's reply, and the replies of `reads` made right after it
    /// in the same script (keys read there cannot have expired yet).
    fn at_now(&mut self, v: &[Vec<u8>], reads: &[&[&str]]) -> (i64, Reply, Vec<Reply>) {
        let mut script =
            format!("{SCRIPT_NOW} local out = {{now, redis.call(unpack(ARGV, 1, {}))}} ", v.len());
        let mut args: Vec<Vec<u8>> = v.to_vec();
        for read in reads {
            let from = args.len() + 1;
            args.extend(read.iter().map(|a| a.as_bytes().to_vec()));
            script.push_str(&format!(
                "table.insert(out, redis.call(unpack(ARGV, {from}, {}))) ",
                from + read.len() - 1
            ));
        }
        script.push_str("return out");
        let mut call: Vec<Vec<u8>> =
            vec![b"EVAL".to_vec(), script.into_bytes(), b"1".to_vec(), SCRATCH.into()];
        call.extend(args);
        let r = self.c.call_v(&call);
        assert!(r.err().is_none(), "{}: {r:?}", show(v));
        self.scratch_gone();
        let a = r.array();
        (a[0].int(), a[1].clone(), a[2..].to_vec())
    }

    /// The script clock's scratch key gone (so a digest never sees it come and go).
    fn scratch_gone(&mut self) {
        self.gone(SCRATCH);
    }

    /// `k` gone: an expiring key read until it has expired (the read deletes it).
    fn gone(&mut self, k: &str) {
        wait_for(|| self.raw(&["EXISTS", k]) == Reply::Int(0), &format!("{k} expired"));
    }

    fn zscore(&mut self, k: &str, member: &str) -> Option<i64> {
        match self.raw(&["ZSCORE", k, member]) {
            Reply::Nil => None,
            r => Some(r.str().parse::<f64>().expect("a score") as i64),
        }
    }

    fn zcard(&mut self, k: &str) -> i64 {
        self.raw(&["ZCARD", k]).int()
    }

    fn zmembers(&mut self, k: &str) -> Vec<String> {
        self.raw(&["ZRANGE", k, "0", "-1"]).strings()
    }

    fn hget(&mut self, k: &str, f: &str) -> Option<String> {
        match self.raw(&["HGET", k, f]) {
            Reply::Nil => None,
            r => Some(r.str()),
        }
    }

    fn field(&mut self, q: &str, id: &str, f: &str) -> Option<String> {
        self.hget(&key(q, &format!("job:{id}")), f)
    }

    fn now(&mut self) -> i64 {
        trafikey_support::reliability::server_ms(&mut self.c)
    }

    fn enqueue(&mut self, q: &str, id: &str, opts: &[&str]) {
        let mut a = vec!["n", "d"];
        a.extend_from_slice(opts);
        assert_eq!(self.ok(&argv("EMQ.ENQUEUE", q, id, &a)), Reply::Int(1));
    }

    /// `n` jobs ready in `q` (TRA.ADD, 250 a call), their ids.
    fn ready(&mut self, q: &str, n: usize) -> Vec<String> {
        let ids: Vec<String> = (0..n).map(|_| self.id()).collect();
        for chunk in ids.chunks(250) {
            let rows: Vec<&str> = chunk.iter().map(String::as_str).collect();
            let mut args: Vec<&str> = Vec::new();
            for _ in chunk {
                args.extend(["n", "d", "0"]);
            }
            let r = self.ok(&tail_argv("TRA.ADD", q, &rows, &args));
            assert!(r.ints().iter().all(|&x| x == 1), "{r:?}");
        }
        ids
    }

    /// CLAIM by `token` with `lease` and `opts`: the ids handed out.
    fn claim(&mut self, q: &str, token: &str, lease: &str, opts: &[&str]) -> Vec<String> {
        let mut a = vec![token, lease];
        a.extend_from_slice(opts);
        let r = self.ok(&argv("EMQ.CLAIM", q, "", &a));
        r.array().iter().map(|j| j.array()[0].str()).collect()
    }

    /// Every ready job of `q` claimed by `token` (50 a call).
    fn claim_all(&mut self, q: &str, token: &str, lease: &str) -> Vec<String> {
        let mut all = Vec::new();
        loop {
            let got = self.claim(q, token, lease, &["COUNT", "50"]);
            if got.is_empty() {
                return all;
            }
            all.extend(got);
        }
    }

    /// A job of its own, held by token `t` (a lease of a minute).
    fn held(&mut self, q: &str) -> String {
        let id = self.id();
        self.enqueue(q, &id, &[]);
        assert_eq!(self.claim(q, "t", "60000", &[]), std::slice::from_ref(&id));
        id
    }

    /// `n` jobs of `q` completed (their ids, oldest first).
    fn completed(&mut self, q: &str, n: usize) -> Vec<String> {
        let ids = self.ready(q, n);
        let got = self.claim_all(q, "c", "60000");
        assert_eq!(got.len(), n);
        for chunk in got.chunks(50) {
            let mut args: Vec<&str> = Vec::new();
            for id in chunk {
                args.extend([id.as_str(), "c", "ok"]);
            }
            let r = self.ok(&argv("TRA.COMPLETES", q, "", &args));
            assert!(r.ints().iter().all(|&x| x == 1), "{r:?}");
        }
        ids
    }

    fn config(&mut self, name: &str) -> String {
        let r = self.raw(&["CONFIG", "GET", &format!("trafikey.{name}")]);
        r.array()[1].str()
    }

    fn set_config(&mut self, name: &str, v: &str) {
        let r = self.raw(&["CONFIG", "SET", &format!("trafikey.{name}"), v]);
        assert_eq!(r, Reply::Simple("OK".into()), "CONFIG SET {name} {v}");
    }

    /// A numeric config's edges: its least and greatest value accepted (and read back), one
    /// past each refused with nothing changed; left at its default.
    fn config_edges(&mut self, c: &config::Int) {
        let name = format!("trafikey.{}", c.name);
        for (v, _) in past(Range::new(c.name, c.min, c.max)) {
            let before = digest(&mut self.c);
            let r = self.raw(&["CONFIG", "SET", &name, &v]);
            assert!(r.err().is_some_and(|e| e.starts_with("ERR")), "CONFIG SET {name} {v}: {r:?}");
            assert_eq!(self.config(c.name), c.default.to_string(), "{name} unchanged by {v}");
            assert_eq!(digest(&mut self.c), before);
        }
        for v in [c.min, c.max] {
            self.set_config(c.name, &v.to_string());
            assert_eq!(self.config(c.name), v.to_string());
        }
        self.set_config(c.name, &c.default.to_string());
    }

    /// Fills list `k` with `n` entries by hand (a script, 1000 a push).
    fn fill_list(&mut self, k: &str, n: usize) {
        const FILL: &str = "local t = {} for i = 1, 1000 do t[i] = i end \
            for j = 1, tonumber(ARGV[1]) / 1000 do redis.call('RPUSH', KEYS[1], unpack(t)) end \
            return redis.call('LLEN', KEYS[1])";
        assert_eq!(n % 1000, 0);
        let r = self.raw(&["EVAL", FILL, "1", k, &n.to_string()]);
        assert_eq!(r, Reply::Int(n as i64));
    }

    /// Adds `n` entries to stream `k` by hand.
    fn fill_stream(&mut self, k: &str, n: usize) {
        const FILL: &str = "for i = 1, tonumber(ARGV[1]) do redis.call('XADD', KEYS[1], '*', 'f', i) end \
            return redis.call('XLEN', KEYS[1])";
        let r = self.raw(&["EVAL", FILL, "1", k, &n.to_string()]);
        assert!(r.int() >= n as i64, "{r:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// Producers' options: ENQUEUE, SCHEDULE (due now) and a job scheduler's template.

/// The call that makes a job with `opts`, due now: ENQUEUE, SCHEDULE at 0 (a past time, due
/// now), or a job scheduler (`sched:<id>`) whose first iteration is now.
fn produce_argv(cmd: &str, q: &str, id: &str, opts: &[&str]) -> Vec<Vec<u8>> {
    let mut a: Vec<&str> = match cmd {
        "EMQ.ENQUEUE" => vec!["n", "d"],
        "EMQ.SCHEDULE" => vec!["0", "n", "d"],
        "TRA.SCHEDULER" => vec!["SET", "EVERY", "600000", "JOB", "n", "d"],
        other => panic!("not a producer: {other}"),
    };
    a.extend_from_slice(opts);
    argv(cmd, q, id, &a)
}

/// Makes that job; its id (a scheduler's iteration has one of its own).
fn produce(lab: &mut Lab, cmd: &str, q: &str, opts: &[&str]) -> String {
    let id = lab.id();
    let r = lab.ok(&produce_argv(cmd, q, &id, opts));
    match cmd {
        "TRA.SCHEDULER" => r.array()[0].str(),
        _ => {
            assert_eq!(r, Reply::Int(1));
            id
        }
    }
}

fn priority(lab: &mut Lab, cmd: &str, r: Range) {
    let (q, id) = (lab.q(), lab.id());
    lab.refuses_past(r, &arg_error(r), |v| produce_argv(cmd, &q, &id, &["PRIORITY", v]));
    for v in [r.lo, r.hi] {
        // Served after a job of priority 1 only at a priority above it; 0 is no priority.
        let q = lab.q();
        let job = produce(lab, cmd, &q, &["PRIORITY", &v.to_string()]);
        assert_eq!(lab.field(&q, &job, "p"), (v != 0).then(|| v.to_string()), "{cmd} PRIORITY {v}");
        let marker = lab.id();
        lab.enqueue(&q, &marker, &["PRIORITY", "1"]);
        let want = if v == 0 { [job, marker] } else { [marker, job] };
        assert_eq!(lab.claim(&q, "t", "60000", &["COUNT", "2"]), want, "{cmd} PRIORITY {v}");
    }
}

fn attempts(lab: &mut Lab, cmd: &str, r: Range) {
    let (q, id) = (lab.q(), lab.id());
    lab.refuses_past(r, &arg_error(r), |v| produce_argv(cmd, &q, &id, &["ATTEMPTS", v]));
    let fail = |lab: &mut Lab, q: &str, id: &str| lab.ok(&argv("EMQ.FAIL", q, id, &["t", "boom"])).str();
    // One attempt: the first failure is the last.
    let q = lab.q();
    let job = produce(lab, cmd, &q, &["ATTEMPTS", &r.lo.to_string()]);
    assert_eq!(lab.claim(&q, "t", "60000", &[]), std::slice::from_ref(&job));
    assert_eq!(fail(lab, &q, &job), "failed");
    // The most: retried, and failed for good at that many attempts made (the count before the
    // last written by hand, as a client may read it).
    let q = lab.q();
    let job = produce(lab, cmd, &q, &["ATTEMPTS", &r.hi.to_string()]);
    assert_eq!(lab.claim(&q, "t", "60000", &[]), std::slice::from_ref(&job));
    assert_eq!(fail(lab, &q, &job), "retry");
    assert_eq!(lab.claim(&q, "t", "60000", &[]), std::slice::from_ref(&job));
    lab.raw(&["HSET", &key(&q, &format!("job:{job}")), "am", &(r.hi - 1).to_string()]);
    assert_eq!(fail(lab, &q, &job), "failed");
    assert_eq!(lab.field(&q, &job, "am"), Some(r.hi.to_string()));
}

fn backoff(lab: &mut Lab, cmd: &str, r: Range) {
    let (q, id) = (lab.q(), lab.id());
    for kind in ["FIXED", "EXP"] {
        lab.refuses_past(r, &arg_error(r), |v| {
            produce_argv(cmd, &q, &id, &["ATTEMPTS", "2", "BACKOFF", kind, v])
        });
    }
    for (kind, v) in [("FIXED", r.lo), ("EXP", r.lo), ("FIXED", r.hi), ("EXP", r.hi)] {
        let q = lab.q();
        let job = produce(lab, cmd, &q, &["ATTEMPTS", "2", "BACKOFF", kind, &v.to_string()]);
        assert_eq!(lab.claim(&q, "t", "60000", &[]), std::slice::from_ref(&job));
        let (now, reply, _) = lab.at_now(&argv("EMQ.FAIL", &q, &job, &["t", "boom"]), &[]);
        if v == 0 {
            assert_eq!(reply.str(), "retry", "{cmd} BACKOFF {kind} 0: ready again now");
        } else {
            // The first retry waits the whole backoff (EXP: d·2^0).
            assert_eq!(reply.str(), "delayed");
            assert_eq!(lab.zscore(&key(&q, "delayed"), &job), Some(now + v), "{cmd} BACKOFF {kind} {v}");
        }
    }
}

fn expire(lab: &mut Lab, cmd: &str, r: Range) {
    let (q, id) = (lab.q(), lab.id());
    lab.refused(&produce_argv(cmd, &q, &id, &["EXPIRE", "-1"]), "EMQSHAPE EXPIRE takes <ms> or +<ms>");
    lab.refused(&produce_argv(cmd, &q, &id, &["EXPIRE", &(r.hi + 1).to_string()]), &arg_error(r));
    // 0, a time past: expired from the start, never handed out, failed by the claim that meets it.
    let q = lab.q();
    let job = produce(lab, cmd, &q, &["EXPIRE", &r.lo.to_string()]);
    assert_eq!(lab.claim(&q, "t", "60000", &[]), Vec::<String>::new());
    assert_eq!(lab.zmembers(&key(&q, "failed")), std::slice::from_ref(&job));
    assert_eq!(lab.field(&q, &job, "e").as_deref(), Some("expired"));
    // The last time there is: kept on the row, and the job is handed out.
    let q = lab.q();
    let job = produce(lab, cmd, &q, &["EXPIRE", &r.hi.to_string()]);
    assert_eq!(lab.field(&q, &job, "x"), Some(r.hi.to_string()));
    assert_eq!(lab.claim(&q, "t", "60000", &[]), [job]);
}

fn dedup_ttl(lab: &mut Lab, cmd: &str, r: Range) {
    let (q, id) = (lab.q(), lab.id());
    lab.refuses_past(r, &arg_error(r), |v| produce_argv(cmd, &q, &id, &["DEDUP", "d", "DEDUPTTL", v]));
    for v in [r.lo, r.hi] {
        let q = lab.q();
        let dkey = key(&q, "dedup:d");
        let (first, second) = (lab.id(), lab.id());
        let ttl = v.to_string();
        let (now, reply, reads) = lab.at_now(
            &produce_argv(cmd, &q, &first, &["DEDUP", "d", "DEDUPTTL", &ttl]),
            &[&["PEXPIRETIME", &dkey]],
        );
        assert_eq!(reply, Reply::Int(1));
        // The id lives exactly ms from the call (read past 2^53 outside the script, whose
        // numbers are doubles).
        let at = if v == r.lo { reads[0].int() } else { lab.raw(&["PEXPIRETIME", &dkey]).int() };
        assert_eq!(at, now + v, "{cmd} DEDUPTTL {v}");
        if v == r.lo {
            lab.gone(&dkey);
            assert_eq!(lab.ok(&produce_argv(cmd, &q, &second, &["DEDUP", "d"])), Reply::Int(1), "released");
        } else {
            let dup = lab.ok(&produce_argv(cmd, &q, &second, &["DEDUP", "d"]));
            assert_eq!(dup.str(), first, "a duplicate answers the holder");
        }
    }
    // The same top on a duplicate's EXTEND: the id's life restarts from that call.
    let (q, first, dup) = (lab.q(), lab.id(), lab.id());
    let dkey = key(&q, "dedup:d");
    assert_eq!(lab.ok(&produce_argv(cmd, &q, &first, &["DEDUP", "d", "DEDUPTTL", "60000"])), Reply::Int(1));
    let top = r.hi.to_string();
    let (now, reply, _) =
        lab.at_now(&produce_argv(cmd, &q, &dup, &["DEDUP", "d", "DEDUPTTL", &top, "EXTEND"]), &[]);
    assert_eq!(reply.str(), first, "{cmd}: the duplicate answers the holder");
    assert_eq!(
        lab.raw(&["PEXPIRETIME", &dkey]).int(),
        now + r.hi,
        "{cmd} DEDUPTTL {top} EXTEND restarts the id's life"
    );
}

// ---------------------------------------------------------------------------------------------
// Times: `when` of SCHEDULE, RESCHEDULE, DELAY and FAIL's DELAY.

/// The call that sets a job's due time to `v`, and the job: a new scheduled job, a scheduled
/// job rescheduled, a held job delayed, a held job failed with DELAY.
fn when_call(lab: &mut Lab, cmd: &str, q: &str) -> (String, impl Fn(&str) -> Vec<Vec<u8>>) {
    let id = match cmd {
        "EMQ.SCHEDULE" => lab.id(),
        "EMQ.RESCHEDULE" => {
            let id = lab.id();
            assert_eq!(lab.ok(&argv("EMQ.SCHEDULE", q, &id, &["+600000", "n", "d"])), Reply::Int(1));
            id
        }
        _ => lab.held(q),
    };
    let (cmd, q2, id2) = (cmd.to_string(), q.to_string(), id.clone());
    let call = move |v: &str| -> Vec<Vec<u8>> {
        match cmd.as_str() {
            "EMQ.SCHEDULE" => argv(&cmd, &q2, &id2, &[v, "n", "d"]),
            "EMQ.RESCHEDULE" => argv(&cmd, &q2, &id2, &[v]),
            "EMQ.DELAY" => argv(&cmd, &q2, &id2, &["t", v]),
            _ => argv(&cmd, &q2, &id2, &["t", "boom", "DELAY", v]),
        }
    };
    (id, call)
}

fn when(lab: &mut Lab, cmd: &str, r: Range) {
    let q = lab.q();
    let (_, call) = when_call(lab, cmd, &q);
    lab.refused(&call("-1"), "EMQSHAPE when must be <ms> or +<ms>");
    lab.refused(&call(&(r.hi + 1).to_string()), &arg_error(r));
    for v in [r.lo, r.hi] {
        let q = lab.q();
        let (job, call) = when_call(lab, cmd, &q);
        let (now, _, _) = lab.at_now(&call(&v.to_string()), &[]);
        let due = lab.zscore(&key(&q, "delayed"), &job);
        if v == r.lo {
            // A time past is due now: the next claim takes the job.
            assert_eq!(due, Some(now), "{cmd} {v}");
            assert_eq!(lab.claim(&q, "t2", "60000", &[]), [job]);
        } else {
            assert_eq!(due, Some(v), "{cmd} {v}");
            assert_eq!(lab.claim(&q, "t2", "60000", &[]), Vec::<String>::new());
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Leases, claims and waits.

/// A call that sets a lease of `v` and the job it leases: CLAIM of a ready job, EXTEND and
/// EXTENDS of a held one, TRA.COMPLETENEXT and TRA.COMPLETESNEXT claiming the next job.
fn lease_call(lab: &mut Lab, cmd: &str, q: &str) -> (String, Call) {
    let q = q.to_string();
    match cmd {
        "EMQ.CLAIM" => {
            let id = lab.id();
            lab.enqueue(&q, &id, &[]);
            (id, Box::new(move |v| argv("EMQ.CLAIM", &q, "", &["t2", v])))
        }
        "EMQ.EXTEND" => {
            let id = lab.held(&q);
            let i = id.clone();
            (id, Box::new(move |v| argv("EMQ.EXTEND", &q, &i, &["t", v])))
        }
        "EMQ.EXTENDS" => {
            let id = lab.held(&q);
            let i = id.clone();
            (id, Box::new(move |v| argv("EMQ.EXTENDS", &q, "", &[v, &i, "t"])))
        }
        "TRA.COMPLETENEXT" => {
            let held = lab.held(&q);
            let next = lab.id();
            lab.enqueue(&q, &next, &[]);
            (next, Box::new(move |v| argv("TRA.COMPLETENEXT", &q, &held, &["t", "ok", v])))
        }
        _ => {
            let held = lab.held(&q);
            let next = lab.id();
            lab.enqueue(&q, &next, &[]);
            (next, Box::new(move |v| tail_argv("TRA.COMPLETESNEXT", &q, &[&held], &["t", "ok", "t2", v])))
        }
    }
}

fn lease(lab: &mut Lab, cmd: &str, r: Range) {
    let q = lab.q();
    let (_, call) = lease_call(lab, cmd, &q);
    lab.refuses_past(r, &arg_error(r), call);
    for v in [r.lo, r.hi] {
        let q = lab.q();
        let (job, call) = lease_call(lab, cmd, &q);
        let (now, _, _) = lab.at_now(&call(&v.to_string()), &[]);
        // The deadline is exactly the lease from the call.
        assert_eq!(lab.zscore(&key(&q, "active"), &job), Some(now + v), "{cmd} lease {v}");
        if v == r.lo {
            sleep(Duration::from_millis(5));
            let s = lab.ok(&argv("EMQ.STALLED", &q, "", &[]));
            assert_eq!(s.array()[0].strings(), [job], "{cmd}: a lease of 1 ms has run out");
        } else {
            let s = lab.ok(&argv("EMQ.STALLED", &q, "", &[]));
            assert!(s.array()[0].array().is_empty(), "{cmd}: the longest lease still holds");
        }
    }
}

/// The claim after a held job's finish (TRA.COMPLETENEXT) or a plain CLAIM, with COUNT `v`.
fn count_call(cmd: &str, q: &str, held: &str, v: &str) -> Vec<Vec<u8>> {
    match cmd {
        "EMQ.CLAIM" => argv(cmd, q, "", &["t2", "60000", "COUNT", v]),
        _ => argv(cmd, q, held, &["t", "ok", "60000", "COUNT", v]),
    }
}

fn claim_count(lab: &mut Lab, cmd: &str, r: Range) {
    let q = lab.q();
    let held = lab.held(&q);
    lab.ready(&q, 3);
    lab.refuses_past(r, &arg_error(r), |v| count_call(cmd, &q, &held, v));
    // COUNT is the most one call hands out, cut to 50 a call.
    for (v, ready, want) in [(r.lo, 3, 1), (r.hi, 60, 50)] {
        let q = lab.q();
        let held = lab.held(&q);
        lab.ready(&q, ready);
        let reply = lab.ok(&count_call(cmd, &q, &held, &v.to_string()));
        let jobs = if cmd == "EMQ.CLAIM" { reply.array().len() } else { reply.array()[1].array().len() };
        assert_eq!(jobs, want, "{cmd} COUNT {v}");
        assert_eq!(lab.zcard(&key(&q, "active")) as usize, want + usize::from(cmd == "EMQ.CLAIM"));
    }
}

fn block(lab: &mut Lab, cmd: &str, r: Range) {
    let q = lab.q();
    lab.refuses_past(r, &arg_error(r), |v| argv(cmd, &q, "", &["t", "60000", "BLOCK", v]));
    // 0 waits without a limit, the most waits that long: both wait, and get the job made ready
    // (that the most is not waited out as no limit would take 24 days to see).
    for v in [r.lo, r.hi] {
        let q = lab.q();
        let mut w = lab.s.conn();
        let v = v.to_string();
        let call = argv(cmd, &q, "", &["t", "60000", "BLOCK", &v]);
        w.send(&call.iter().map(Vec::as_slice).collect::<Vec<_>>()).expect("send");
        wait_for(|| info_field(&mut lab.c, "clients", "blocked_clients") == "1", "the claim waits");
        let id = lab.id();
        lab.enqueue(&q, &id, &[]);
        let got = w.read().expect("a reply");
        assert_eq!(got.array()[0].array()[0].str(), id, "BLOCK {v}");
    }
}

// ---------------------------------------------------------------------------------------------
// Finishes: KEEP, AGE and METRICS of COMPLETE, FAIL (for good), TRA.COMPLETENEXT and
// TRA.COMPLETESNEXT.

fn finish_argv(cmd: &str, q: &str, id: &str, opts: &[&str]) -> Vec<Vec<u8>> {
    let with = |head: &[&str]| -> Vec<String> { head.iter().chain(opts).map(|s| s.to_string()).collect() };
    let args = match cmd {
        "EMQ.COMPLETE" => with(&["t", "ok"]),
        "EMQ.FAIL" => with(&["t", "boom", "FINAL"]),
        "TRA.COMPLETENEXT" => with(&["t", "ok", "60000"]),
        _ => with(&["t", "ok", "t2", "60000"]),
    };
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match cmd {
        "TRA.COMPLETESNEXT" => tail_argv(cmd, q, &[id], &args),
        _ => argv(cmd, q, id, &args),
    }
}

/// The set a finish of `cmd` moves its job to.
fn finished_set(cmd: &str) -> &'static str {
    if cmd == "EMQ.FAIL" {
        "failed"
    } else {
        "completed"
    }
}

/// A held job finished by `cmd` with `opts`: its id.
fn finish(lab: &mut Lab, cmd: &str, q: &str, opts: &[&str]) -> String {
    let id = lab.held(q);
    let r = lab.ok(&finish_argv(cmd, q, &id, opts));
    let code = match cmd {
        "EMQ.COMPLETE" => r.int(),
        "EMQ.FAIL" => i64::from(r.str() == "failed"),
        "TRA.COMPLETENEXT" => r.array()[0].int(),
        _ => r.array()[0].array()[0].int(),
    };
    assert_eq!(code, 1, "{cmd}: {r:?}");
    id
}

fn keep(lab: &mut Lab, cmd: &str, r: Range) {
    let q = lab.q();
    let id = lab.held(&q);
    lab.refuses_past(r, "EMQARG KEEP must be -1, 0 or a count", |v| finish_argv(cmd, &q, &id, &["KEEP", v]));
    // Under a default of none kept, -1 and the largest count both keep every job.
    let cfg = if cmd == "EMQ.FAIL" { "keep-failed" } else { "keep-completed" };
    let was = lab.config(cfg);
    lab.set_config(cfg, "0");
    let q = lab.q();
    let set = key(&q, finished_set(cmd));
    let mut kept = Vec::new();
    for v in [r.lo, r.lo, r.hi, r.hi] {
        kept.push(finish(lab, cmd, &q, &["KEEP", &v.to_string()]));
        assert_eq!(lab.zmembers(&set), kept, "{cmd} KEEP {v}");
    }
    let gone = finish(lab, cmd, &q, &[]);
    assert_eq!(lab.zscore(&set, &gone), None, "the default, none kept, would have deleted them");
    lab.set_config(cfg, &was);
}

fn age(lab: &mut Lab, cmd: &str, r: Range) {
    let q = lab.q();
    let id = lab.held(&q);
    lab.refuses_past(r, &arg_error(r), |v| finish_argv(cmd, &q, &id, &["AGE", v]));
    for v in [r.lo, r.hi] {
        let q = lab.q();
        let set = key(&q, finished_set(cmd));
        let old = finish(lab, cmd, &q, &[]);
        sleep(Duration::from_millis(3));
        let new = finish(lab, cmd, &q, &["AGE", &v.to_string()]);
        // AGE 0 takes every job finished before now; the most, none.
        let want = if v == r.lo { vec![new] } else { vec![old, new] };
        assert_eq!(lab.zmembers(&set), want, "{cmd} AGE {v}");
    }
}

fn metrics(lab: &mut Lab, cmd: &str, r: Range) {
    let q = lab.q();
    let id = lab.held(&q);
    lab.refuses_past(r, &arg_error(r), |v| finish_argv(cmd, &q, &id, &["METRICS", v]));
    let kind = finished_set(cmd);
    for v in [r.lo, r.hi] {
        // A counter whose minute began 20 000 minutes ago (as BullMQ's layout holds it): the
        // finish pushes that minute's count and a 0 for each empty minute since, up to max.
        let q = lab.q();
        let counter = key(&q, &format!("metrics:{kind}"));
        let then = (lab.now() - 20_000 * 60_000).to_string();
        lab.raw(&["HSET", &counter, "count", "3", "prevTS", &then, "prevCount", "0"]);
        finish(lab, cmd, &q, &["METRICS", &v.to_string()]);
        let series = format!("{counter}:data");
        assert_eq!(lab.raw(&["LLEN", &series]).int(), v, "{cmd} METRICS {v}: that many points");
        assert_eq!(lab.raw(&["LINDEX", &series, "-1"]).str(), "3", "the oldest point is the ended minute");
        assert_eq!(lab.hget(&counter, "count").as_deref(), Some("4"));
    }
}

// ---------------------------------------------------------------------------------------------
// Batches: STALLED, DRAIN, CLEAN, OBLITERATE.

/// `n` jobs of `q` whose leases have run out (claimed for 1 ms).
fn lapsed(lab: &mut Lab, q: &str, n: usize) -> Vec<String> {
    lab.ready(q, n);
    let ids = lab.claim_all(q, "t", "1");
    sleep(Duration::from_millis(5));
    ids
}

fn max_stalls(lab: &mut Lab, cmd: &str, r: Range) {
    let q = lab.q();
    lab.refuses_past(r, &arg_error(r), |v| argv(cmd, &q, "", &["MAXSTALLS", v]));
    // 0: the first stall fails the job.
    let q = lab.q();
    let ids = lapsed(lab, &q, 1);
    let s = lab.ok(&argv(cmd, &q, "", &["MAXSTALLS", &r.lo.to_string()]));
    assert_eq!((s.array()[0].strings(), s.array()[1].strings()), (vec![], ids));
    // The most: requeued until its stalls exceed it (those before written by hand).
    let q = lab.q();
    let ids = lapsed(lab, &q, 1);
    lab.raw(&["HSET", &key(&q, &format!("job:{}", ids[0])), "sc", &(r.hi - 1).to_string()]);
    let hi = r.hi.to_string();
    let s = lab.ok(&argv(cmd, &q, "", &["MAXSTALLS", &hi]));
    assert_eq!(s.array()[0].strings(), ids, "stall {} of at most {hi}: requeued", r.hi);
    assert_eq!(lab.claim_all(&q, "t", "1"), ids);
    sleep(Duration::from_millis(5));
    let s = lab.ok(&argv(cmd, &q, "", &["MAXSTALLS", &hi]));
    assert_eq!(s.array()[1].strings(), ids, "one stall more: failed");
}

fn stalled_count(lab: &mut Lab, cmd: &str, r: Range) {
    let q = lab.q();
    lab.refuses_past(r, &arg_error(r), |v| argv(cmd, &q, "", &["COUNT", v]));
    for (v, n, want) in [(r.lo, 3, 1), (r.hi, 120, 100)] {
        let q = lab.q();
        lapsed(lab, &q, n);
        let s = lab.ok(&argv(cmd, &q, "", &["COUNT", &v.to_string()]));
        assert_eq!(s.array()[0].array().len(), want, "STALLED COUNT {v}: that many, 100 a call");
    }
}

fn delete_count(lab: &mut Lab, cmd: &str, r: Range) {
    let call = |q: &str, v: &str| match cmd {
        "TRA.CLEAN" => argv(cmd, q, "completed", &["GRACE", "0", "COUNT", v]),
        "TRA.OBLITERATE" => argv(cmd, q, "", &["COUNT", v]),
        _ => argv(cmd, q, "", &["COUNT", v]),
    };
    let fill = |lab: &mut Lab, q: &str, n: usize| {
        if cmd == "TRA.CLEAN" {
            lab.completed(q, n);
            sleep(Duration::from_millis(2));
        } else {
            lab.ready(q, n);
        }
    };
    let q = lab.q();
    fill(lab, &q, 3);
    lab.refuses_past(r, &arg_error(r), |v| call(&q, v));
    // COUNT deletes that many, 200 a call.
    for (v, n, want) in [(r.lo, 3, 1), (r.hi, 250, 200)] {
        let q = lab.q();
        fill(lab, &q, n);
        let rows = |lab: &mut Lab| lab.raw(&["KEYS", &key(&q, "job:*")]).array().len();
        assert_eq!(rows(lab), n);
        let reply = lab.ok(&call(&q, &v.to_string()));
        assert_eq!(rows(lab), n - want, "{cmd} COUNT {v}: {reply:?}");
    }
}

fn grace(lab: &mut Lab, cmd: &str, r: Range) {
    let q = lab.q();
    lab.completed(&q, 1);
    lab.refuses_past(r, &arg_error(r), |v| argv(cmd, &q, "completed", &["GRACE", v]));
    for v in [r.lo, r.hi] {
        let q = lab.q();
        let ids = lab.completed(&q, 1);
        sleep(Duration::from_millis(2));
        let gone = lab.ok(&argv(cmd, &q, "completed", &["GRACE", &v.to_string()])).strings();
        // GRACE 0 takes what finished before now; the most, nothing.
        assert_eq!(gone, if v == r.lo { ids } else { vec![] }, "CLEAN GRACE {v}");
    }
}

// ---------------------------------------------------------------------------------------------
// TRA.PRIORITY, TRA.ADD's k, listings.

fn new_priority(lab: &mut Lab, cmd: &str, r: Range) {
    let q = lab.q();
    let id = lab.id();
    lab.enqueue(&q, &id, &["PRIORITY", "5"]);
    lab.refuses_past(r, &arg_error(r), |v| argv(cmd, &q, &id, &[v]));
    // 0 moves it to wait, the most to the end of prio.
    lab.ok(&argv(cmd, &q, &id, &[&r.lo.to_string()]));
    assert_eq!(lab.raw(&["LRANGE", &key(&q, "wait"), "0", "-1"]).strings(), std::slice::from_ref(&id));
    lab.ok(&argv(cmd, &q, &id, &[&r.hi.to_string()]));
    assert_eq!(lab.zscore(&key(&q, "prio"), &id), Some(r.hi));
    let other = lab.id();
    lab.enqueue(&q, &other, &["PRIORITY", &(r.hi - 1).to_string()]);
    assert_eq!(lab.claim(&q, "t", "60000", &["COUNT", "2"]), [other, id]);
}

fn add_k(lab: &mut Lab, cmd: &str, r: Range) {
    let q = lab.q();
    let id = lab.id();
    let max = (TIME_MAX).to_string();
    // Every option a job may give at once: `k` words.
    let all: Vec<&str> = vec![
        "PRIORITY", "5", "ATTEMPTS", "3", "BACKOFF", "FIXED", "10", "OPTS", "o", "EXPIRE", &max, "ALIAS",
        "a", "DELAY", &max, "DEDUP", "d", "DEDUPTTL", "60000", "EXTEND", "REPLACE",
    ];
    assert_eq!(all.len() as i64, r.hi, "the declared k is every option a job may give");
    let job = |k: &str, opts: &[&str]| -> Vec<Vec<u8>> {
        let mut a = vec!["n", "d", k];
        a.extend_from_slice(opts);
        tail_argv(cmd, &q, &[&id], &a)
    };
    lab.refused(&job("-1", &[]), "EMQSHAPE …");
    let mut more = all.clone();
    more.push("LIFO");
    lab.refused(&job(&(r.hi + 1).to_string(), &more), "EMQSHAPE …");
    // No option: a job ready; every one: a job with all of them.
    let plain = lab.id();
    let k = r.hi.to_string();
    let mut a = vec!["n", "d", "0", "n", "d", &k];
    a.extend(all.iter().copied());
    let r2 = lab.ok(&tail_argv(cmd, &q, &[&plain, &id], &a));
    assert_eq!(r2.ints(), [1, 1]);
    assert_eq!(lab.raw(&["LRANGE", &key(&q, "wait"), "0", "-1"]).strings(), [plain]);
    assert_eq!(lab.zscore(&key(&q, "delayed"), &id), Some(TIME_MAX));
    for (f, v) in
        [("p", "5"), ("a", "3"), ("b", "f10"), ("o", "o"), ("x", max.as_str()), ("k", "a"), ("de", "d")]
    {
        assert_eq!(lab.field(&q, &id, f).as_deref(), Some(v), "field {f}");
    }
}

/// TRA.ADD of `n` jobs (new ids): its rows and jobs.
fn add_call(lab: &mut Lab, cmd: &str, q: &str, n: i64) -> (Vec<String>, Vec<Vec<u8>>) {
    let ids: Vec<String> = (0..n).map(|_| lab.id()).collect();
    let rows: Vec<&str> = ids.iter().map(String::as_str).collect();
    let jobs: Vec<&str> = ids.iter().flat_map(|_| ["n", "d", "0"]).collect();
    let v = tail_argv(cmd, q, &rows, &jobs);
    (ids, v)
}

fn add_n(lab: &mut Lab, cmd: &str, r: Range) {
    let q = lab.q();
    for n in [r.lo - 1, r.hi + 1] {
        let (_, v) = add_call(lab, cmd, &q, n);
        lab.refused(&v, &arg_error(r));
    }
    // One job, and the most: each created.
    for n in [r.lo, r.hi] {
        let (ids, v) = add_call(lab, cmd, &q, n);
        let got = lab.ok(&v).ints();
        assert_eq!(got, vec![1; n as usize], "TRA.ADD n {n}");
        assert_eq!(lab.field(&q, &ids[ids.len() - 1], "st").as_deref(), Some("wait"));
    }
    assert_eq!(lab.raw(&["LLEN", &key(&q, "wait")]).int(), r.lo + r.hi);
}

/// TRA.COMPLETESNEXT of `held` (each held by `t`): finishes them, then claims as many.
fn finish_many(q: &str, held: &[String]) -> Vec<Vec<u8>> {
    let rows: Vec<&str> = held.iter().map(String::as_str).collect();
    let mut args: Vec<&str> = held.iter().flat_map(|_| ["t", "ok"]).collect();
    args.extend(["t2", "60000"]);
    tail_argv("TRA.COMPLETESNEXT", q, &rows, &args)
}

fn finish_n(lab: &mut Lab, _: &str, r: Range) {
    let q = lab.q();
    for n in [r.lo - 1, r.hi + 1] {
        let ids: Vec<String> = (0..n).map(|_| lab.id()).collect();
        lab.refused(&finish_many(&q, &ids), &arg_error(r));
    }
    // One held job, and the most: each finished, and as many claimed.
    for n in [r.lo, r.hi] {
        let q = lab.q();
        lab.ready(&q, n as usize);
        let held = lab.claim_all(&q, "t", "60000");
        assert_eq!(held.len() as i64, n);
        lab.ready(&q, n as usize);
        let reply = lab.ok(&finish_many(&q, &held));
        assert_eq!(reply.array()[0].ints(), vec![1; n as usize], "TRA.COMPLETESNEXT n {n}: each finished");
        assert_eq!(reply.array()[1].array().len() as i64, n, "and as many claimed");
    }
}

fn jobs_from(lab: &mut Lab, cmd: &str, r: Range) {
    let q = lab.q();
    let ids = lab.ready(&q, 3);
    lab.refuses_past(r, &arg_error(r), |v| argv(cmd, &q, "wait", &["FROM", v]));
    let page = lab.ok(&argv(cmd, &q, "wait", &["FROM", &r.lo.to_string()]));
    assert_eq!(page.array()[1].strings(), ids, "FROM 0: from the front");
    let page = lab.ok(&argv(cmd, &q, "wait", &["FROM", &r.hi.to_string()]));
    assert_eq!(page, Reply::Array(vec![Reply::Int(-1), Reply::Array(vec![])]), "FROM at its most: the end");
}

fn jobs_count(lab: &mut Lab, cmd: &str, r: Range) {
    let q = lab.q();
    // Ids written by hand: a listing reads the set only.
    let n = r.hi as usize + 1;
    let ids: Vec<String> = (0..n).map(|i| id_of("JOB", 1_000_000 + i as u64)).collect();
    for chunk in ids.chunks(500) {
        let mut a = vec!["RPUSH".to_string(), key(&q, "wait")];
        a.extend(chunk.iter().cloned());
        lab.raw(&a.iter().map(String::as_str).collect::<Vec<_>>());
    }
    lab.refuses_past(r, &arg_error(r), |v| argv(cmd, &q, "wait", &["COUNT", v]));
    for v in [r.lo, r.hi] {
        let page = lab.ok(&argv(cmd, &q, "wait", &["COUNT", &v.to_string()]));
        assert_eq!(page.array()[1].array().len() as i64, v, "COUNT {v}: that many of {n}");
        assert_eq!(page.array()[0], Reply::Int(v), "and where the next page begins");
    }
    lab.raw(&["DEL", &key(&q, "wait")]);
}

fn queues_from(lab: &mut Lab, cmd: &str, r: Range) {
    lab.refuses_past(r, &arg_error(r), |v| argv(cmd, "", "", &["FROM", v]));
    let first = lab.ok(&argv(cmd, "", "", &["FROM", &r.lo.to_string()]));
    assert!(!first.array()[1].array().is_empty(), "FROM 0: the first page");
    let last = lab.ok(&argv(cmd, "", "", &["FROM", &r.hi.to_string()]));
    assert_eq!(last, Reply::Array(vec![Reply::Int(-1), Reply::Array(vec![])]), "FROM at its most: the end");
}

fn queues_count(lab: &mut Lab, cmd: &str, r: Range) {
    // In a database of its own, one more queue than the largest page.
    lab.raw(&["SELECT", "9"]);
    assert_eq!(lab.raw(&["EMQ.INSTALL", "1", "{emq}:version"]), Reply::Int(1));
    let calls: Vec<Vec<Vec<u8>>> =
        (0..=r.hi).map(|i| argv("EMQ.ENQUEUE", &format!("many{i:05}"), &jid(1), &["n", "d"])).collect();
    for chunk in calls.chunks(200) {
        assert!(lab.c.pipeline(chunk).iter().all(|x| *x == Reply::Int(1)));
    }
    lab.refuses_past(r, &arg_error(r), |v| argv(cmd, "", "", &["COUNT", v]));
    for v in [r.lo, r.hi] {
        let page = lab.ok(&argv(cmd, "", "", &["COUNT", &v.to_string()]));
        assert_eq!(page.array()[1].array().len() as i64, v, "COUNT {v}");
        assert_eq!(page.array()[0], Reply::Int(v), "and where the next page begins");
    }
    lab.raw(&["FLUSHDB"]);
    lab.raw(&["SELECT", "0"]);
}

// ---------------------------------------------------------------------------------------------
// Logs, limits, schedulers, the bus.

fn log_keep(lab: &mut Lab, cmd: &str, r: Range) {
    let q = lab.q();
    let id = lab.held(&q);
    let call = |v: &str| -> Vec<Vec<u8>> {
        let mut a = if cmd == "TRA.LOG" { vec!["t", "line"] } else { vec!["line"] };
        a.extend(["KEEP", v]);
        argv(cmd, &q, &id, &a)
    };
    lab.refuses_past(r, &arg_error(r), call);
    let log = key(&q, &format!("log:{id}"));
    lab.ok(&call(&r.lo.to_string()));
    assert_eq!(lab.ok(&call(&r.lo.to_string())), Reply::Int(1), "KEEP 1: the newest line");
    // The most: a log that long keeps that many, its oldest line out for the new one.
    lab.raw(&["DEL", &log]);
    lab.fill_list(&log, r.hi as usize);
    assert_eq!(lab.ok(&call(&r.hi.to_string())), Reply::Int(r.hi), "KEEP {}", r.hi);
    assert_eq!(lab.raw(&["LINDEX", &log, "0"]).str(), "2");
    assert_eq!(lab.raw(&["LINDEX", &log, "-1"]).str(), "line");
    lab.raw(&["DEL", &log]);
}

fn set_limit(lab: &mut Lab, q: &str, args: &[&str]) {
    assert_eq!(lab.ok(&argv("TRA.LIMIT", q, "", args)), Reply::Int(1), "TRA.LIMIT {args:?}");
}

/// TRA.LIMITS as name → value.
fn limits(lab: &mut Lab, q: &str) -> std::collections::HashMap<String, Reply> {
    let r = lab.ok(&argv("TRA.LIMITS", q, "", &[]));
    r.array().chunks(2).map(|p| (p[0].str(), p[1].clone())).collect()
}

fn rate_max(lab: &mut Lab, cmd: &str, r: Range) {
    let q = lab.q();
    lab.refuses_past(r, &arg_error(r), |v| argv(cmd, &q, "", &["RATE", v, "60000"]));
    // 1 a window: one claim, then none.
    let q = lab.q();
    lab.ready(&q, 3);
    set_limit(lab, &q, &["RATE", &r.lo.to_string(), "60000"]);
    assert_eq!(lab.claim(&q, "t", "60000", &["COUNT", "3"]).len(), 1);
    assert!(lab.claim(&q, "t", "60000", &[]).is_empty(), "RATE 1: the window is full");
    // The most a window: it still counts, and a full window still holds (the count before the
    // last claim written as a claim records it).
    let q = lab.q();
    lab.ready(&q, 5);
    let hi = r.hi.to_string();
    set_limit(lab, &q, &["RATE", &hi, "60000"]);
    assert_eq!(lab.claim(&q, "t", "60000", &["COUNT", "3"]).len(), 3);
    let meta = key(&q, "meta");
    let rate = lab.hget(&meta, "rate").expect("the window recorded");
    let f: Vec<&str> = rate.split(' ').collect();
    assert_eq!(f[..3], [hi.as_str(), "60000", "3"], "RATE {hi}: the window counts");
    let nearly = format!("{hi} 60000 {} {}", r.hi - 1, f[3]);
    lab.raw(&["HSET", &meta, "rate", &nearly]);
    assert_eq!(lab.claim(&q, "t", "60000", &["COUNT", "3"]).len(), 1, "room for one");
    assert!(lab.claim(&q, "t", "60000", &[]).is_empty(), "RATE {hi}: a full window holds");
}

fn rate_ms(lab: &mut Lab, cmd: &str, r: Range) {
    let q = lab.q();
    lab.refuses_past(r, &arg_error(r), |v| argv(cmd, &q, "", &["RATE", "1", v]));
    // A window of 1 ms is over a moment later.
    let q = lab.q();
    lab.ready(&q, 2);
    set_limit(lab, &q, &["RATE", "1", &r.lo.to_string()]);
    assert_eq!(lab.claim(&q, "t", "60000", &[]).len(), 1);
    sleep(Duration::from_millis(3));
    assert_eq!(lab.claim(&q, "t", "60000", &[]).len(), 1, "RATE 1 1: the window has ended");
    // The longest window lasts that long from its first claim, and holds.
    let q = lab.q();
    lab.ready(&q, 2);
    set_limit(lab, &q, &["RATE", "1", &r.hi.to_string()]);
    let (now, got, _) = lab.at_now(&argv("EMQ.CLAIM", &q, "", &["t", "60000"]), &[]);
    assert_eq!(got.array().len(), 1);
    let until = lab.hget(&key(&q, "meta"), "rate").expect("a window").rsplit(' ').next().map(str::to_string);
    assert_eq!(until, Some((now + r.hi).to_string()), "the window ends {} ms after it opened", r.hi);
    assert!(lab.claim(&q, "t", "60000", &[]).is_empty(), "and holds");
}

fn concurrency(lab: &mut Lab, cmd: &str, r: Range) {
    let q = lab.q();
    lab.refuses_past(r, &arg_error(r), |v| argv(cmd, &q, "", &["CONCURRENCY", v]));
    // 1: one active at a time, the next once it is done.
    let q = lab.q();
    lab.ready(&q, 3);
    set_limit(lab, &q, &["CONCURRENCY", &r.lo.to_string()]);
    let got = lab.claim(&q, "t", "60000", &["COUNT", "3"]);
    assert_eq!(got.len(), 1);
    assert!(lab.claim(&q, "t", "60000", &[]).is_empty(), "CONCURRENCY 1: one at a time");
    lab.ok(&argv("EMQ.COMPLETE", &q, &got[0], &["t", "ok"]));
    assert_eq!(lab.claim(&q, "t", "60000", &[]).len(), 1);
    // The most: read back as the claim reads it (`TRA.LIMITS` parses `meta` with the claim's
    // own reader), no stop to claims below it; and that many active stop the next claim (the
    // claim's decision itself: 2^31−1 active jobs are more than a test can make).
    let q = lab.q();
    lab.ready(&q, 3);
    set_limit(lab, &q, &["CONCURRENCY", &r.hi.to_string()]);
    assert_eq!(limits(lab, &q)["concurrency"], Reply::Int(r.hi));
    assert_eq!(lab.claim(&q, "t", "60000", &["COUNT", "3"]).len(), 3);
    let l = Limits { concurrency: Some(r.hi), ..Limits::default() };
    assert_eq!(l.allow(0, r.hi as u64 - 1).take, 1);
    assert_eq!(l.allow(0, r.hi as u64).take, 0, "CONCURRENCY {}: that many active hold the claim", r.hi);
}

fn for_ms(lab: &mut Lab, cmd: &str, r: Range) {
    let q = lab.q();
    lab.refuses_past(r, &arg_error(r), |v| argv(cmd, &q, "", &["FOR", v]));
    let q = lab.q();
    lab.ready(&q, 1);
    set_limit(lab, &q, &["FOR", &r.lo.to_string()]);
    sleep(Duration::from_millis(3));
    assert_eq!(lab.claim(&q, "t", "60000", &[]).len(), 1, "FOR 1: over a moment later");
    // The longest: nothing claimed until then.
    let q = lab.q();
    lab.ready(&q, 1);
    let (now, _, _) = lab.at_now(&argv(cmd, &q, "", &["FOR", &r.hi.to_string()]), &[]);
    assert_eq!(lab.hget(&key(&q, "meta"), "hold-until"), Some((now + r.hi).to_string()));
    assert!(lab.claim(&q, "t", "60000", &[]).is_empty(), "FOR {}: held", r.hi);
}

fn scheduler(q: &str, args: &[&str]) -> Vec<Vec<u8>> {
    let mut a = vec!["SET"];
    a.extend_from_slice(args);
    a.extend(["JOB", "n", "d"]);
    argv("TRA.SCHEDULER", q, "s", &a)
}

/// A scheduler set now: the instant, its first iteration's time, and the score `scheds`
/// holds (the time of the next one not yet made; its own when there is none).
fn set_scheduler(lab: &mut Lab, q: &str, args: &[&str]) -> (i64, i64, i64) {
    let (now, r, _) = lab.at_now(&scheduler(q, args), &[]);
    let score = lab.zscore(&key(q, "scheds"), "s").expect("scheduled");
    (now, r.array()[1].int(), score)
}

fn every(lab: &mut Lab, _: &str, r: Range) {
    let q = lab.q();
    lab.refuses_past(r, &arg_error(r), |v| scheduler(&q, &["EVERY", v]));
    // Every ms: the next iteration a ms after the first, which is now.
    let (now, first, next) = {
        let q = lab.q();
        set_scheduler(lab, &q, &["EVERY", &r.lo.to_string()])
    };
    assert_eq!((first, next), (now, now + 1));
    // The longest: the first now; the next would be past the last time there is, so none.
    let (now, first, next) = {
        let q = lab.q();
        set_scheduler(lab, &q, &["EVERY", &r.hi.to_string()])
    };
    assert_eq!((first, next), (now, now), "EVERY {}: one iteration", r.hi);
}

fn offset(lab: &mut Lab, _: &str, r: Range) {
    let q = lab.q();
    let every = TIME_MAX.to_string();
    lab.refuses_past(r, &arg_error(r), |v| scheduler(&q, &["EVERY", &every, "OFFSET", v]));
    // Beside a shorter EVERY the most is EVERY−1.
    lab.refused(&scheduler(&q, &["EVERY", "1000", "OFFSET", "1000"]), "EMQARG OFFSET must be 0..=999");
    let (_, first, _) = {
        let q = lab.q();
        set_scheduler(lab, &q, &["EVERY", "1000", "OFFSET", &r.lo.to_string()])
    };
    assert_eq!(first % 1000, 0, "OFFSET 0: on the second");
    let (_, first, _) = {
        let q = lab.q();
        set_scheduler(lab, &q, &["EVERY", &every, "OFFSET", &r.hi.to_string()])
    };
    assert_eq!(first, r.hi, "OFFSET {}: at that time", r.hi);
}

fn start(lab: &mut Lab, _: &str, r: Range) {
    let q = lab.q();
    lab.refuses_past(r, &arg_error(r), |v| scheduler(&q, &["EVERY", "1000", "START", v]));
    let (now, first, _) = {
        let q = lab.q();
        set_scheduler(lab, &q, &["EVERY", "1000", "START", &r.lo.to_string()])
    };
    assert_eq!(first, now, "START 0, long past: from now");
    let (_, first, _) = {
        let q = lab.q();
        set_scheduler(lab, &q, &["EVERY", "1000", "START", &r.hi.to_string()])
    };
    assert_eq!(first, r.hi, "START {}: the first then", r.hi);
}

fn end(lab: &mut Lab, _: &str, r: Range) {
    let q = lab.q();
    lab.refuses_past(r, &arg_error(r), |v| scheduler(&q, &["EVERY", "1000", "END", v]));
    // Accepted from 0 on, and after now besides.
    lab.refused(&scheduler(&q, &["EVERY", "1000", "END", &r.lo.to_string()]), "EMQARG END must be after now");
    // The soonest END, a ms from now: one iteration, none after it.
    let q = lab.q();
    let script = format!(
        "{SCRIPT_NOW} return {{now, redis.call('TRA.SCHEDULER', 4, KEYS[2], KEYS[3], KEYS[4], KEYS[5], \
         'SET', 'EVERY', '1000', 'END', string.format('%.0f', now + 1), 'JOB', 'n', 'd')}}"
    );
    let keys: Vec<String> =
        argv("TRA.SCHEDULER", &q, "s", &[])[2..].iter().map(|k| String::from_utf8_lossy(k).into()).collect();
    let mut call = vec!["EVAL", script.as_str(), "5", SCRATCH];
    call.extend(keys.iter().map(String::as_str));
    let reply = lab.raw(&call);
    lab.scratch_gone();
    let (now, first) = (reply.array()[0].int(), reply.array()[1].array()[1].int());
    assert_eq!(first, now);
    assert_eq!(lab.zscore(&key(&q, "scheds"), "s"), Some(now), "END now+1: no iteration after the first");
    let (_, first, next) = {
        let q = lab.q();
        set_scheduler(lab, &q, &["EVERY", "1000", "END", &r.hi.to_string()])
    };
    assert_eq!(next, first + 1000, "END {}: the next as usual", r.hi);
}

fn limit_n(lab: &mut Lab, v: i64) -> (String, String) {
    let q = lab.q();
    let (_, first, _) = set_scheduler(lab, &q, &["EVERY", "600000", "LIMIT", &v.to_string()]);
    let got = lab.claim(&q, "t", "60000", &[]);
    assert_eq!(got.len(), 1, "the first iteration, due now at {first}");
    (q, got[0].clone())
}

fn sched_limit(lab: &mut Lab, _: &str, r: Range) {
    let q = lab.q();
    lab.refuses_past(r, &arg_error(r), |v| scheduler(&q, &["EVERY", "1000", "LIMIT", v]));
    // LIMIT 1: the scheduler ends when its one iteration is taken.
    let (q, _) = limit_n(lab, r.lo);
    assert_eq!(lab.raw(&["EXISTS", &key(&q, "sched:s")]), Reply::Int(0), "LIMIT 1: ended");
    // The most: the taken iteration makes the next.
    let (q, _) = limit_n(lab, r.hi);
    assert_eq!(lab.hget(&key(&q, "sched:s"), "count").as_deref(), Some("2"), "LIMIT {}: goes on", r.hi);
}

fn list_rank(lab: &mut Lab, cmd: &str, r: Range) {
    let q = lab.q();
    for s in ["a", "b", "c"] {
        lab.ok(&argv("TRA.SCHEDULER", &q, s, &["SET", "EVERY", "600000", "JOB", "n", "d"]));
    }
    let start = cmd == "TRA.SCHEDULERS" && r.what == "start";
    let call = |v: &str| -> Vec<Vec<u8>> {
        if start {
            argv(cmd, &q, "", &["LIST", v, "-1"])
        } else {
            argv(cmd, &q, "", &["LIST", "0", v])
        }
    };
    lab.refuses_past(r, &arg_error(r), call);
    // From before the first rank, or to past the last: all of them; from past the last, none.
    let edge = if start { r.lo } else { r.hi };
    let all = lab.ok(&call(&edge.to_string())).array().len();
    assert_eq!(all, 3, "LIST at the {} edge", r.what);
    let none = lab.ok(&if start {
        argv(cmd, &q, "", &["LIST", &r.hi.to_string(), "-1"])
    } else {
        argv(cmd, &q, "", &["LIST", "0", &r.lo.to_string()])
    });
    assert!(none.array().is_empty(), "LIST past the ranks there are: {none:?}");
}

fn maxlen(lab: &mut Lab, cmd: &str, r: Range) {
    let q = lab.q();
    let msg = |n: u64| id_of("MSG", n);
    lab.refuses_past(r, &arg_error(r), |v| argv(cmd, &q, "", &[&msg(1), "p", "MAXLEN", v]));
    let bus = key(&q, "bus");
    // 1: trimmed to about one (whole stream nodes of 100 go); the most: nothing trimmed.
    lab.fill_stream(&bus, 300);
    lab.ok(&argv(cmd, &q, "", &[&msg(2), "p", "MAXLEN", &r.lo.to_string()]));
    let len = lab.raw(&["XLEN", &bus]).int();
    assert!(len <= 101, "MAXLEN 1: {len} left");
    let q = lab.q();
    let bus = key(&q, "bus");
    lab.fill_stream(&bus, 300);
    lab.ok(&argv(cmd, &q, "", &[&msg(3), "p", "MAXLEN", &r.hi.to_string()]));
    assert_eq!(lab.raw(&["XLEN", &bus]).int(), 301, "MAXLEN {}: nothing trimmed", r.hi);
}

fn failures_ttl(lab: &mut Lab, cmd: &str, r: Range) {
    let q = lab.q();
    let id = id_of("MSG", 7);
    let counter = key(&q, &format!("fails:{id}"));
    lab.refuses_past(r, &arg_error(r), |v| argv(cmd, &q, &id, &["TTL", v]));
    // 1 ms: the counter expires a ms after the call.
    let (now, n, reads) =
        lab.at_now(&argv(cmd, &q, &id, &["TTL", &r.lo.to_string()]), &[&["PEXPIRETIME", &counter]]);
    assert_eq!((n, reads[0].int()), (Reply::Int(1), now + 1));
    lab.gone(&counter);
    // The most from now is what reaches the last time there is; a ms more is refused.
    let script = |extra: i64| {
        format!(
            "{SCRIPT_NOW} local ttl = string.format('%.0f', {TIME_MAX} - now + {extra}) \
             return {{now, redis.pcall('EMQ.FAILURES', 1, KEYS[2], 'TTL', ttl), redis.call('PEXPIRETIME', KEYS[2])}}"
        )
    };
    let before = digest(&mut lab.c);
    let over = lab.raw(&["EVAL", &script(1), "2", SCRATCH, &counter]);
    lab.scratch_gone();
    let now = over.array()[0].int();
    assert_eq!(over.array()[1].error(), format!("EMQARG TTL must be 1..={} from now", TIME_MAX - now));
    assert_eq!(digest(&mut lab.c), before, "refused, nothing written");
    let top = lab.raw(&["EVAL", &script(0), "2", SCRATCH, &counter]);
    lab.scratch_gone();
    assert_eq!((top.array()[1].clone(), top.array()[2].int()), (Reply::Int(1), TIME_MAX));
    lab.raw(&["DEL", &counter]);
}

// ---------------------------------------------------------------------------------------------
// Configs: each at its least and greatest value, taking effect.

fn cfg_events_maxlen(lab: &mut Lab, c: &config::Int) {
    // 0: events off, the stream untouched.
    lab.set_config(c.name, &c.min.to_string());
    let q = lab.q();
    let id = lab.id();
    lab.enqueue(&q, &id, &[]);
    assert_eq!(lab.raw(&["EXISTS", &key(&q, "events")]), Reply::Int(0), "events-maxlen 0: no events");
    // The most: a stream past the default is not trimmed.
    lab.set_config(c.name, &c.max.to_string());
    let q = lab.q();
    let events = key(&q, "events");
    let n = c.default as usize + 300;
    lab.fill_stream(&events, n);
    let id = lab.id();
    lab.enqueue(&q, &id, &[]);
    assert_eq!(lab.raw(&["XLEN", &events]).int(), n as i64 + 1, "events-maxlen {}: kept", c.max);
    lab.raw(&["DEL", &events]);
    lab.set_config(c.name, &c.default.to_string());
}

/// Fills finished set `set` with `n` old entries by hand (their rows are absent: retention
/// deletes what it finds).
fn fill_finished(lab: &mut Lab, set: &str, n: usize) {
    const FILL: &str = "for i = 1, tonumber(ARGV[1]) do redis.call('ZADD', KEYS[1], i, 'JOBold' .. i) end \
        return redis.call('ZCARD', KEYS[1])";
    assert_eq!(lab.raw(&["EVAL", FILL, "1", set, &n.to_string()]), Reply::Int(n as i64));
}

fn cfg_keep(lab: &mut Lab, c: &config::Int) {
    let cmd = if c.name == "keep-failed" { "EMQ.FAIL" } else { "EMQ.COMPLETE" };
    // -1 keeps all; the most keeps that many: a set past the default's soft cap stays whole.
    let over = c.default as usize + 100;
    for v in [c.min, c.max] {
        lab.set_config(c.name, &v.to_string());
        let q = lab.q();
        let set = key(&q, finished_set(cmd));
        fill_finished(lab, &set, over);
        finish(lab, cmd, &q, &[]);
        assert_eq!(lab.zcard(&set), over as i64 + 1, "{} {v}: every one kept", c.name);
        lab.raw(&["DEL", &set]);
    }
    // 0 keeps none (within the range: its own meaning).
    lab.set_config(c.name, "0");
    let q = lab.q();
    let id = finish(lab, cmd, &q, &[]);
    assert_eq!(lab.zscore(&key(&q, finished_set(cmd)), &id), None);
    lab.set_config(c.name, &c.default.to_string());
}

fn cfg_retention_batch(lab: &mut Lab, c: &config::Int) {
    // KEEP 1 over 300 old entries: one call deletes at most the batch.
    for v in [c.min, c.max] {
        lab.set_config(c.name, &v.to_string());
        let q = lab.q();
        let set = key(&q, "completed");
        fill_finished(lab, &set, 300);
        finish(lab, "EMQ.COMPLETE", &q, &["KEEP", "1"]);
        assert_eq!(lab.zcard(&set), 301 - v, "retention-batch {v}");
        lab.raw(&["DEL", &set]);
    }
    lab.set_config(c.name, &c.default.to_string());
}

fn cfg_promote_batch(lab: &mut Lab, c: &config::Int) {
    for v in [c.min, c.max] {
        lab.set_config(c.name, &v.to_string());
        let q = lab.q();
        let ids: Vec<String> = (0..150).map(|_| lab.id()).collect();
        let rows: Vec<&str> = ids.iter().map(String::as_str).collect();
        let mut a = Vec::new();
        for _ in &ids {
            a.extend(["n", "d", "2", "DELAY", "0"]);
        }
        lab.ok(&tail_argv("TRA.ADD", &q, &rows, &a));
        lab.claim(&q, "t", "60000", &[]);
        assert_eq!(lab.zcard(&key(&q, "delayed")), 150 - v, "promote-batch {v}: that many promoted");
    }
    lab.set_config(c.name, &c.default.to_string());
}

fn cfg_stalled_batch(lab: &mut Lab, c: &config::Int) {
    for v in [c.min, c.max] {
        lab.set_config(c.name, &v.to_string());
        let q = lab.q();
        lapsed(lab, &q, 120);
        let s = lab.ok(&argv("EMQ.STALLED", &q, "", &[]));
        assert_eq!(s.array()[0].array().len() as i64, v, "stalled-batch {v}: STALLED's default COUNT");
    }
    lab.set_config(c.name, &c.default.to_string());
}

fn cfg_max_stalls(lab: &mut Lab, c: &config::Int) {
    lab.set_config(c.name, &c.min.to_string());
    let q = lab.q();
    let ids = lapsed(lab, &q, 1);
    let s = lab.ok(&argv("EMQ.STALLED", &q, "", &[]));
    assert_eq!(s.array()[1].strings(), ids, "max-stalls 0: the first stall fails");
    lab.set_config(c.name, &c.max.to_string());
    let q = lab.q();
    let ids = lapsed(lab, &q, 1);
    lab.raw(&["HSET", &key(&q, &format!("job:{}", ids[0])), "sc", &(c.max - 1).to_string()]);
    let s = lab.ok(&argv("EMQ.STALLED", &q, "", &[]));
    assert_eq!(s.array()[0].strings(), ids, "max-stalls {}: stall {} requeued", c.max, c.max);
    lab.claim_all(&q, "t", "1");
    sleep(Duration::from_millis(5));
    let s = lab.ok(&argv("EMQ.STALLED", &q, "", &[]));
    assert_eq!(s.array()[1].strings(), ids, "one more: failed");
    lab.set_config(c.name, &c.default.to_string());
}

fn cfg_max_payload(lab: &mut Lab, c: &config::Int) {
    // 0: only empty data.
    lab.set_config(c.name, &c.min.to_string());
    let q = lab.q();
    let id = lab.id();
    lab.refused(&argv("EMQ.ENQUEUE", &q, &id, &["n", "x"]), "EMQARG data must be 0..=0 bytes");
    lab.ok(&argv("EMQ.ENQUEUE", &q, &id, &["n", ""]));
    // The most: data past the default is taken. (The whole 512 MiB is not sent: the server's
    // own bulk limit is that size too.)
    lab.set_config(c.name, &c.max.to_string());
    let big = "x".repeat(c.default as usize + 1);
    let id = lab.id();
    lab.ok(&argv("EMQ.ENQUEUE", &q, &id, &["n", &big]));
    assert_eq!(lab.raw(&["HSTRLEN", &key(&q, &format!("job:{id}")), "d"]).int(), big.len() as i64);
    lab.raw(&["DEL", &key(&q, &format!("job:{id}"))]);
    lab.set_config(c.name, &c.default.to_string());
    let id = lab.id();
    lab.refused(&argv("EMQ.ENQUEUE", &q, &id, &["n", &big]), "EMQARG data must be 0..=1048576 bytes");
    payloads_at_the_top(lab, c);
}

fn cfg_bus_window(lab: &mut Lab, c: &config::Int) {
    let msg = id_of("MSG", 42);
    // 1 ms: a message is new again a moment later.
    lab.set_config(c.name, &c.min.to_string());
    let q = lab.q();
    let append = |q: &str| argv("EMQ.APPEND", q, "", &[&msg, "p"]);
    assert!(!lab.ok(&append(&q)).is_nil());
    sleep(Duration::from_millis(3));
    assert!(!lab.ok(&append(&q)).is_nil(), "bus-window-ms 1: new again");
    // The most: a message first seen in 1970 is still a duplicate.
    lab.set_config(c.name, &c.max.to_string());
    let q = lab.q();
    lab.raw(&["ZADD", &key(&q, "seen"), "1", &msg]);
    assert!(lab.ok(&append(&q)).is_nil(), "bus-window-ms {}: a duplicate", c.max);
    lab.set_config(c.name, &c.default.to_string());
    assert!(!lab.ok(&append(&q)).is_nil(), "under the default window it is new");
}

fn cfg_bus_maxlen(lab: &mut Lab, c: &config::Int) {
    let msg = |n: u64| id_of("MSG", n);
    lab.set_config(c.name, &c.min.to_string());
    let q = lab.q();
    let bus = key(&q, "bus");
    lab.fill_stream(&bus, 300);
    lab.ok(&argv("EMQ.APPEND", &q, "", &[&msg(1), "p"]));
    assert!(lab.raw(&["XLEN", &bus]).int() <= 101, "bus-maxlen 1");
    lab.set_config(c.name, &c.max.to_string());
    let q = lab.q();
    let bus = key(&q, "bus");
    let n = c.default as usize + 300;
    lab.fill_stream(&bus, n);
    lab.ok(&argv("EMQ.APPEND", &q, "", &[&msg(2), "p"]));
    assert_eq!(lab.raw(&["XLEN", &bus]).int(), n as i64 + 1, "bus-maxlen {}: nothing trimmed", c.max);
    lab.raw(&["DEL", &bus]);
    lab.set_config(c.name, &c.default.to_string());
}

fn cfg_log_keep(lab: &mut Lab, c: &config::Int) {
    let q = lab.q();
    let id = lab.id();
    lab.enqueue(&q, &id, &[]);
    let log = key(&q, &format!("log:{id}"));
    let add = argv("TRA.ADDLOG", &q, &id, &["line"]);
    lab.set_config(c.name, &c.min.to_string());
    lab.ok(&add);
    assert_eq!(lab.ok(&add), Reply::Int(1), "log-keep 1");
    lab.set_config(c.name, &c.max.to_string());
    lab.raw(&["DEL", &log]);
    lab.fill_list(&log, c.max as usize);
    assert_eq!(lab.ok(&add), Reply::Int(c.max), "log-keep {}", c.max);
    lab.raw(&["DEL", &log]);
    lab.set_config(c.name, &c.default.to_string());
}

/// Upkeep's ticks in `ms` with nothing due.
fn ticks_in(lab: &mut Lab, ms: u64) -> i64 {
    let ticks =
        |lab: &mut Lab| info_field(&mut lab.c, "trafikey", "trafikey_upkeep_ticks").parse::<i64>().unwrap();
    let t0 = ticks(lab);
    sleep(Duration::from_millis(ms));
    ticks(lab) - t0
}

fn cfg_upkeep_tick(_: &mut Lab, c: &config::Int) {
    // A server of its own: upkeep turned on here would act on the other cases' queues.
    let lab = &mut Lab::quiet();
    lab.set_config("upkeep", "yes");
    lab.set_config(c.name, &c.min.to_string());
    let fast = ticks_in(lab, 300);
    lab.set_config(c.name, &c.max.to_string());
    sleep(Duration::from_millis(5));
    let slow = ticks_in(lab, 600);
    lab.set_config(c.name, &c.default.to_string());
    lab.set_config("upkeep", "no");
    // A look every ms, against a look a minute (about 300 and 0; 6 at the default).
    assert!(fast >= 30, "upkeep-tick-ms 1: {fast} ticks in 300 ms");
    assert!(slow <= 1, "upkeep-tick-ms {}: {slow} ticks in 600 ms", c.max);
}

fn cfg_upkeep_batch(_: &mut Lab, c: &config::Int) {
    let lab = &mut Lab::quiet();
    let ticks =
        |lab: &mut Lab| info_field(&mut lab.c, "trafikey", "trafikey_upkeep_ticks").parse::<i64>().unwrap();
    let promoted = |lab: &mut Lab| {
        info_field(&mut lab.c, "trafikey", "trafikey_upkeep_promoted").parse::<i64>().unwrap()
    };
    for (v, n) in [(c.min, 20i64), (c.max, 300)] {
        lab.set_config(c.name, &v.to_string());
        let q = lab.q();
        for _ in 0..n {
            let id = lab.id();
            assert_eq!(lab.ok(&argv("EMQ.SCHEDULE", &q, &id, &["0", "n", "d"])), Reply::Int(1));
        }
        let (t0, p0) = (ticks(lab), promoted(lab));
        lab.set_config("upkeep", "yes");
        wait_for(|| promoted(lab) == p0 + n, "all promoted");
        lab.set_config("upkeep", "no");
        let used = ticks(lab) - t0;
        if v == c.min {
            assert!(used >= n, "upkeep-batch 1: a job a tick, {used} ticks for {n}");
        } else {
            assert!(used < n / 10, "upkeep-batch {v}: many a tick, {used} ticks for {n}");
        }
    }
    lab.set_config(c.name, &c.default.to_string());
}

/// Every argument the table marks bounded by `trafikey.max-payload` (`Arg::payload`), named
/// as `declared` names them.
fn payload_args() -> Vec<String> {
    fn walk(cmd: &str, path: &mut Vec<&'static str>, args: &'static [Arg], out: &mut Vec<String>) {
        for a in args {
            path.push(a.name);
            if a.payload {
                out.push(format!("{cmd} {}", path.join(".")));
            }
            if let Shape::OneOf(inner) | Shape::Block(inner) = a.shape {
                walk(cmd, path, inner, out);
            }
            path.pop();
        }
    }
    let mut out = Vec::new();
    for c in COMMANDS.iter() {
        walk(c.name, &mut Vec::new(), c.args, &mut out);
    }
    out
}

/// A valid call giving `blob` as one payload-bounded argument, on queue `q` (each makes the job
/// it needs), and the argument's name in the refusal.
type PayloadCall = fn(&mut Lab, &str, &str) -> Vec<Vec<u8>>;

/// Every argument `payload_args` finds, and its call.
const PAYLOADS: &[(&str, &str, PayloadCall)] = &[
    ("EMQ.ENQUEUE data", "data", |lab, q, b| argv("EMQ.ENQUEUE", q, &lab.id(), &["n", b])),
    ("EMQ.ENQUEUE opts", "OPTS", |lab, q, b| argv("EMQ.ENQUEUE", q, &lab.id(), &["n", "d", "OPTS", b])),
    ("EMQ.SCHEDULE data", "data", |lab, q, b| argv("EMQ.SCHEDULE", q, &lab.id(), &["0", "n", b])),
    ("EMQ.SCHEDULE opts", "OPTS", |lab, q, b| {
        argv("EMQ.SCHEDULE", q, &lab.id(), &["0", "n", "d", "OPTS", b])
    }),
    ("TRA.ADD job.data", "data", |lab, q, b| tail_argv("TRA.ADD", q, &[&lab.id()], &["n", b, "0"])),
    ("TRA.SETDATA data", "data", |lab, q, b| {
        let id = lab.id();
        lab.enqueue(q, &id, &[]);
        argv("TRA.SETDATA", q, &id, &[b])
    }),
    ("TRA.SCHEDULER action.set.job.data", "data", |_, q, b| {
        argv("TRA.SCHEDULER", q, "s", &["SET", "EVERY", "600000", "JOB", "n", b])
    }),
    ("TRA.SCHEDULER action.set.job.opts", "OPTS", |_, q, b| {
        argv("TRA.SCHEDULER", q, "s", &["SET", "EVERY", "600000", "JOB", "n", "d", "OPTS", b])
    }),
    ("EMQ.COMPLETE result", "result", |lab, q, b| argv("EMQ.COMPLETE", q, &lab.held(q), &["t", b])),
    ("TRA.COMPLETES job.result", "result", |lab, q, b| argv("TRA.COMPLETES", q, "", &[&lab.held(q), "t", b])),
    ("TRA.COMPLETENEXT result", "result", |lab, q, b| {
        argv("TRA.COMPLETENEXT", q, &lab.held(q), &["t", b, "60000"])
    }),
    ("TRA.COMPLETESNEXT job.result", "result", |lab, q, b| {
        tail_argv("TRA.COMPLETESNEXT", q, &[&lab.held(q)], &["t", b, "t2", "60000"])
    }),
    ("EMQ.FAIL error", "error", |lab, q, b| argv("EMQ.FAIL", q, &lab.held(q), &["t", b])),
    ("EMQ.FAIL stack", "STACK", |lab, q, b| argv("EMQ.FAIL", q, &lab.held(q), &["t", "boom", "STACK", b])),
    ("TRA.LOG line", "line", |lab, q, b| argv("TRA.LOG", q, &lab.held(q), &["t", b])),
    ("TRA.ADDLOG line", "line", |lab, q, b| argv("TRA.ADDLOG", q, &lab.held(q), &[b])),
    ("EMQ.APPEND payload", "payload", |lab, q, b| {
        lab.id();
        argv("EMQ.APPEND", q, "", &[&id_of("MSG", lab.n), b])
    }),
    ("EMQ.PUBLISH payload", "payload", |lab, q, b| {
        lab.id();
        argv("EMQ.PUBLISH", q, "", &[&id_of("MSG", lab.n), b])
    }),
];

/// Every argument the table bounds by `trafikey.max-payload`, tried under the config's top
/// with one byte past its default (taken) and under the default (refused, nothing written):
/// a bound that ignores the config, or keeps the default's, on any of them fails here.
fn payloads_at_the_top(lab: &mut Lab, c: &config::Int) {
    let found = payload_args();
    for name in &found {
        assert!(PAYLOADS.iter().any(|(n, ..)| n == name), "{name}: bounded by max-payload, with no case");
    }
    for (name, ..) in PAYLOADS {
        assert!(found.iter().any(|n| n == name), "{name}: a case for no argument the table bounds");
    }
    let big = "x".repeat(c.default as usize + 1);
    for (name, what, call) in PAYLOADS {
        lab.set_config(c.name, &c.max.to_string());
        let q = lab.q();
        let v = call(lab, &q, &big);
        lab.ok(&v);
        lab.set_config(c.name, &c.default.to_string());
        let q = lab.q();
        let v = call(lab, &q, &big);
        lab.refused(&v, &format!("EMQARG {what} must be 0..={} bytes", c.default));
        eprintln!("{name}: taken at the top, refused at the default");
    }
}
