//! Every due time a transition sets is on upkeep's agenda: after the call that sets it, with no
//! other call (only reads), the server acts on time by itself — the delayed job becomes ready,
//! the lapsed lease is reclaimed, the expired job fails, the scheduler's iteration is made, the
//! claimer held back by a limit or waiting for work is woken and gets its job.
//!
//! Upkeep here sleeps up to a minute between looks (`upkeep-tick-ms 60000`), so only the
//! agenda the verbs feed and the wake-ups they give bring it in time; each case waits at most
//! 5 s for a time set 100 to 400 ms ahead, and asserts the work done, never a duration.
//!
//! The cases are tied to src/CONTRACT.md: every row of its "Transitions" table whose
//! destination is `delayed` or a lease must be named by a case, and every line of the
//! contract that sets a time something must happen at (a destination `delayed`, a lease, an
//! EXPIRE, a rate window or FOR, a scheduler's time, upkeep's promotion and reclaim) must hold
//! the anchor phrase of a case or be listed as setting none; a contract line that gains such a
//! time without a case fails `every_due_time_in_the_contract_has_a_case`.
// A test may panic: that is how it fails. The module's own rules are for src/.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

use std::time::{Duration, Instant};

use trafikey::host::command::{Form, KeyRole};
use trafikey::verbs::COMMANDS;
use trafikey_support::*;

/// One due time: the transition rows of the contract it stands for, the contract phrases it
/// answers to, and the case.
struct Case {
    name: &'static str,
    rows: &'static [&'static str],
    anchors: &'static [&'static str],
    run: fn(&mut Bench),
}

const CASES: &[Case] = &[
    Case {
        name: "SCHEDULE +100: promoted",
        rows: &["SCHEDULE"],
        anchors: &["promotes delayed jobs as they fall due"],
        run: schedule,
    },
    Case {
        name: "SCHEDULE REPLACE of a delayed holder: the new job promoted",
        rows: &["SCHEDULE"],
        anchors: &[],
        run: schedule_replace,
    },
    Case {
        name: "TRA.ADD DELAY +100: promoted",
        rows: &[],
        anchors: &["created in `delayed` as SCHEDULE"],
        run: add_delay,
    },
    Case {
        name: "TRA.ADD of several delays, the soonest first, last or between: each promoted in time",
        rows: &[],
        anchors: &["created in `delayed` as SCHEDULE"],
        run: add_delays,
    },
    Case { name: "RESCHEDULE sooner: promoted", rows: &["RESCHEDULE"], anchors: &[], run: reschedule },
    Case { name: "DELAY +100: promoted", rows: &["DELAY"], anchors: &[], run: delay },
    Case {
        name: "FAIL with BACKOFF FIXED: promoted",
        rows: &["FAIL → `delayed`"],
        anchors: &[],
        run: |b| fail_backoff(b, "FIXED"),
    },
    Case {
        name: "FAIL with BACKOFF EXP: promoted",
        rows: &["FAIL → `delayed`"],
        anchors: &[],
        run: |b| fail_backoff(b, "EXP"),
    },
    Case {
        name: "FAIL DELAY +100: promoted",
        rows: &["FAIL → `delayed`"],
        anchors: &["`DELAY when` on FAIL: `delayed` at `when`"],
        run: fail_delay,
    },
    Case {
        name: "CLAIM's lease: reclaimed",
        rows: &["CLAIM, take"],
        anchors: &["reclaims expired leases", "takes expired leases earliest deadline first"],
        run: claim_lease,
    },
    Case {
        name: "EXTEND to a shorter lease: reclaimed",
        rows: &["EXTEND / EXTENDS"],
        anchors: &[],
        run: |b| extend_sooner(b, "EMQ.EXTEND"),
    },
    Case {
        name: "EXTENDS to a shorter lease: reclaimed",
        rows: &["EXTEND / EXTENDS"],
        anchors: &[],
        run: |b| extend_sooner(b, "EMQ.EXTENDS"),
    },
    Case {
        name: "TRA.COMPLETENEXT's claim: its lease reclaimed",
        rows: &["CLAIM, take"],
        anchors: &[],
        run: |b| fetch_lease(b, "TRA.COMPLETENEXT"),
    },
    Case {
        name: "TRA.COMPLETESNEXT's claim: its lease reclaimed",
        rows: &["CLAIM, take"],
        anchors: &[],
        run: |b| fetch_lease(b, "TRA.COMPLETESNEXT"),
    },
    Case {
        name: "a kept job made delayed by COMPLETE of its holder: promoted",
        rows: &[],
        anchors: &["or `delayed` as long after the"],
        run: |b| kept(b, Finisher::Complete),
    },
    Case {
        name: "a kept job made delayed by TRA.COMPLETES of its holder: promoted",
        rows: &[],
        anchors: &["or `delayed` as long after the"],
        run: |b| kept(b, Finisher::Completes),
    },
    Case {
        name: "a kept job made delayed by FAIL FINAL of its holder: promoted",
        rows: &[],
        anchors: &["or `delayed` as long after the"],
        run: |b| kept(b, Finisher::Fail),
    },
    Case {
        name: "a kept job made delayed by upkeep failing its holder's lapsed lease: promoted",
        rows: &[],
        anchors: &["or `delayed` as long after the"],
        run: |b| kept(b, Finisher::Upkeep),
    },
    Case {
        name: "ENQUEUE EXPIRE +100: failed as expired",
        rows: &[],
        anchors: &["Jobs created with `EXPIRE when` that still wait at their time"],
        run: |b| expire(b, "EMQ.ENQUEUE"),
    },
    Case {
        name: "SCHEDULE EXPIRE +100, due later: failed as expired",
        rows: &[],
        anchors: &["Jobs created with `EXPIRE when` that still wait at their time"],
        run: |b| expire(b, "EMQ.SCHEDULE"),
    },
    Case {
        name: "TRA.ADD EXPIRE +100: failed as expired",
        rows: &[],
        anchors: &["Jobs created with `EXPIRE when` that still wait at their time"],
        run: |b| expire(b, "TRA.ADD"),
    },
    Case {
        name: "a kept job with EXPIRE, made when its holder completes: failed as expired",
        rows: &[],
        anchors: &["Jobs created with `EXPIRE when` that still wait at their time"],
        run: expire_kept,
    },
    Case {
        name: "a claim held back by a full rate window: woken at its end, gets the job",
        rows: &[],
        anchors: &["limit is put on upkeep's agenda by the claim"],
        run: rate_window,
    },
    Case {
        name: "a claim held back by FOR: woken at its end, gets the job",
        rows: &[],
        anchors: &["limit is put on upkeep's agenda by the claim"],
        run: for_hold,
    },
    Case {
        name: "a claim held back by concurrency: woken when upkeep fails the lapsed job, gets the next",
        rows: &[],
        anchors: &["Every verb that takes a job out of `active` signals `active`"],
        run: concurrency_freed,
    },
    Case {
        name: "a claim waiting for work: woken by upkeep's promotion, gets the job",
        rows: &["SCHEDULE"],
        anchors: &["by upkeep's promotion"],
        run: waiting_claim,
    },
    Case {
        name: "a scheduler's first iteration at START: promoted",
        rows: &[],
        anchors: &["SET makes the first iteration delayed at its time"],
        run: scheduler_first,
    },
    Case {
        name: "a scheduler with no worker: each iteration made at its time",
        rows: &[],
        anchors: &["score in `scheds` comes, upkeep makes that iteration ready"],
        run: scheduler_on_time,
    },
    Case {
        name: "a scheduler's pending iteration taken: its successor, delayed, promoted",
        rows: &[],
        anchors: &["in `delayed` at its"],
        run: scheduler_successor,
    },
];

/// Phrases that set a due time, by which a contract line is found.
const DUE: &[&str] = &[
    "→ delayed",
    "`delayed` at",
    "in `delayed`",
    "`delayed` as long after",
    "lease_ms)",
    "agenda",
    "`EXPIRE when`",
    "in `scheds` comes",
    "iteration delayed",
    "fall due",
    "expired leases",
    "upkeep's promotion",
    "signals `active`",
];

/// Lines those phrases find that set no time, each with why.
const NOT_DUE: &[(&str, &str)] = &[
    ("leaves nothing in `delayed`", "the `drained` event reads `delayed`; it sets no time"),
    ("`tests/agenda.rs`", "\"Adding a verb\" names this test; it sets no time"),
];

fn contract() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/CONTRACT.md")).expect("src/CONTRACT.md")
}

/// The "Transitions" table's rows whose destination (after the last `→`) is `delayed` or a
/// lease: their first cell.
fn due_rows(contract: &str) -> Vec<String> {
    let table = contract
        .split_once("### Transitions")
        .map(|(_, rest)| rest)
        .and_then(|rest| rest.split_once("\n### ").map(|(t, _)| t))
        .expect("the Transitions section");
    let rows: Vec<Vec<String>> = table
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| verb") && !l.starts_with("|---"))
        .map(|l| l.trim_matches('|').split(" | ").map(|c| c.trim().to_string()).collect())
        .collect();
    assert!(rows.len() >= 15, "the Transitions table read: {} rows", rows.len());
    rows.into_iter()
        .filter(|r| {
            let to = r[1].rsplit_once('→').map(|(_, to)| to).unwrap_or("");
            to.contains("delayed") || to.contains("lease_ms")
        })
        .map(|r| r[0].clone())
        .collect()
}

/// The cases whose due time the call gives as `when`, run again with a time already past.
/// A case's body.
type Run = fn(&mut Bench);

const DUE_NOW: &[(&str, Run)] = &[
    ("SCHEDULE", schedule),
    ("SCHEDULE REPLACE", schedule_replace),
    ("TRA.ADD DELAY", add_delay),
    ("RESCHEDULE", reschedule),
    ("DELAY", delay),
    ("FAIL DELAY", fail_delay),
];

#[test]
fn every_due_time_in_the_contract_has_a_case() {
    let text = contract();
    let rows = due_rows(&text);
    assert!(rows.len() >= 6, "due rows: {rows:?}");
    for row in &rows {
        assert!(CASES.iter().any(|c| c.rows.contains(&row.as_str())), "the transition `{row}` has no case");
    }
    for c in CASES {
        for row in c.rows {
            assert!(rows.iter().any(|r| r == row), "{}: `{row}` is not a due row of the table", c.name);
        }
        for a in c.anchors {
            assert!(text.lines().any(|l| l.contains(a)), "{}: `{a}` is not in the contract", c.name);
        }
        assert!(!c.rows.is_empty() || !c.anchors.is_empty(), "{}: tied to nothing", c.name);
    }
    for (phrase, _) in NOT_DUE {
        assert!(text.contains(phrase), "`{phrase}` is not in the contract");
    }
    let mut uncovered = Vec::new();
    for line in text.lines().filter(|l| DUE.iter().any(|p| l.contains(p))) {
        let row = line.strip_prefix("| ").and_then(|r| r.split_once(" | ")).map(|(v, _)| v);
        let by_row = row.is_some_and(|v| rows.iter().any(|r| r == v));
        let by_anchor = CASES.iter().any(|c| c.anchors.iter().any(|a| line.contains(a)));
        let exempt = NOT_DUE.iter().any(|(p, _)| line.contains(p));
        if !(by_row || by_anchor || exempt) {
            uncovered.push(line);
        }
    }
    assert!(uncovered.is_empty(), "contract lines that set a time with no case:\n{}", uncovered.join("\n"));
}

#[test]
fn each_due_time_is_kept_by_upkeep_alone() {
    let s =
        Server::start(Opts { module_args: vec!["upkeep-tick-ms".into(), "60000".into()], ..Opts::default() });
    assert_eq!(s.conn().call(&[b"EMQ.INSTALL", b"1", b"{emq}:version"]), Reply::Int(1));
    let mut b = Bench { c: s.conn(), w: s.conn(), n: 0, q: String::new(), soon: "+100" };
    let t0 = Instant::now();
    for case in CASES {
        let t = Instant::now();
        b.n += 1;
        b.q = format!("agenda{}", b.n);
        (case.run)(&mut b);
        eprintln!("{}: {:?}", case.name, t.elapsed());
    }
    // A time already past is a due time too: the job still goes through `delayed`, and
    // nothing but upkeep moves it on.
    b.soon = "0";
    for (name, run) in DUE_NOW {
        b.n += 1;
        b.q = format!("agenda{}", b.n);
        run(&mut b);
        eprintln!("{name}, when 0: done");
    }
    eprintln!("{} cases in {:?}", CASES.len() + DUE_NOW.len(), t0.elapsed());
}

// ---------------------------------------------------------------------------------------------
// The bench: a client for the calls, a second one for a claim that waits; a queue per case.

struct Bench {
    c: Conn,
    w: Conn,
    n: u64,
    q: String,
    /// The `when` the due-time cases give: soon (`+100`), or a time already past (`0`),
    /// which is due at once and still goes through `delayed`.
    soon: &'static str,
}

/// How long a case waits for what is due in 100 to 400 ms.
const BOUND: Duration = Duration::from_secs(5);

impl Bench {
    fn id(&mut self) -> String {
        self.n += 1;
        jid(self.n)
    }

    fn key(&self, role: &str) -> String {
        format!("emq:{{{}}}:{role}", self.q)
    }

    /// `cmd numkeys keys… args…` on this case's queue, the keys from the table (suffixed ones
    /// with `sfx`).
    fn argv(&self, cmd: &str, sfx: &str, args: &[&str]) -> Vec<Vec<u8>> {
        let c = COMMANDS.iter().find(|c| c.name == cmd).unwrap_or_else(|| panic!("no command {cmd}"));
        let mut v: Vec<Vec<u8>> = vec![cmd.as_bytes().to_vec()];
        if c.form == Form::Keys {
            v.push(c.keys.len().to_string().into_bytes());
            for slot in c.keys.iter() {
                let KeyRole::Queue(r) = slot.role else { panic!("{cmd}: a key of no queue role") };
                v.push(format!("{}{}", self.key(r.word()), if r.suffixed() { sfx } else { "" }).into_bytes());
            }
        }
        v.extend(args.iter().map(|a| a.as_bytes().to_vec()));
        v
    }

    /// A call that must succeed.
    fn ok(&mut self, cmd: &str, sfx: &str, args: &[&str]) -> Reply {
        let v = self.argv(cmd, sfx, args);
        let r = self.c.call_v(&v);
        assert!(r.err().is_none(), "{cmd} {args:?}: {r:?}");
        r
    }

    /// TRA.ADD of one job with `opts`.
    fn add(&mut self, id: &str, opts: &[&str]) {
        let k = opts.len().to_string();
        let row = self.key(&format!("job:{id}"));
        let mut args = vec!["1", &row, "n", "d", &k];
        args.extend_from_slice(opts);
        let v = self.argv("TRA.ADD", "", &args);
        assert_eq!(self.c.call_v(&v), Reply::Array(vec![Reply::Int(1)]));
    }

    fn enqueue(&mut self, id: &str, opts: &[&str]) {
        let mut a = vec!["n", "d"];
        a.extend_from_slice(opts);
        assert_eq!(self.ok("EMQ.ENQUEUE", id, &a), Reply::Int(1));
    }

    /// CLAIM by `token` for `lease` ms: the ids taken.
    fn claim(&mut self, token: &str, lease: &str) -> Vec<String> {
        let r = self.ok("EMQ.CLAIM", "", &[token, lease]);
        r.array().iter().map(|j| j.array()[0].str()).collect()
    }

    /// A job of its own, held by `t` for a minute.
    fn held(&mut self, opts: &[&str]) -> String {
        let id = self.id();
        self.enqueue(&id, opts);
        assert_eq!(self.claim("t", "60000"), std::slice::from_ref(&id));
        id
    }

    /// The claim of the second client, waiting (BLOCK) on this queue: sent, and seen waiting.
    fn wait_to_claim(&mut self) {
        let v = self.argv("EMQ.CLAIM", "", &["w", "60000", "BLOCK", "5000"]);
        self.w.send(&v.iter().map(Vec::as_slice).collect::<Vec<_>>()).expect("send");
        let t0 = Instant::now();
        while info_field(&mut self.c, "clients", "blocked_clients") != "1" {
            assert!(t0.elapsed() < BOUND, "the claim never waited");
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// The waiting claim's reply: the ids it got.
    fn claimed(&mut self) -> Vec<String> {
        let r = self.w.read().expect("the claim's reply");
        r.array().iter().map(|j| j.array()[0].str()).collect()
    }

    fn state(&mut self, id: &str) -> Option<String> {
        Q::new(&self.q).snapshot(&mut self.c).state_of(id)
    }

    fn field(&mut self, id: &str, f: &str) -> Option<String> {
        Q::new(&self.q).snapshot(&mut self.c).field(id, f)
    }

    /// Reads until `done` holds, at most `BOUND`.
    fn eventually(&mut self, what: &str, mut done: impl FnMut(&mut Bench) -> bool) {
        let t0 = Instant::now();
        while t0.elapsed() < BOUND {
            if done(self) {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("{}: not done within {BOUND:?}: {what}", self.q);
    }

    fn ready(&mut self, id: &str, what: &str) {
        let id = id.to_string();
        self.eventually(what, |b| b.state(&id).as_deref() == Some("wait"));
    }
}

// ---------------------------------------------------------------------------------------------
// The cases. Each ends with the call that sets the due time; only reads follow.

fn schedule(b: &mut Bench) {
    let (id, soon) = (b.id(), b.soon);
    b.ok("EMQ.SCHEDULE", &id, &[soon, "n", "d"]);
    b.ready(&id, "the scheduled job promoted");
}

fn schedule_replace(b: &mut Bench) {
    let (old, new) = (b.id(), b.id());
    b.ok("EMQ.SCHEDULE", &old, &["+600000", "n", "d", "DEDUP", "d"]);
    let soon = b.soon;
    b.ok("EMQ.SCHEDULE", &new, &[soon, "n", "d", "DEDUP", "d", "REPLACE"]);
    b.ready(&new, "the replacing job promoted");
}

fn add_delay(b: &mut Bench) {
    let (id, soon) = (b.id(), b.soon);
    b.add(&id, &["DELAY", soon]);
    b.ready(&id, "the delayed job of TRA.ADD promoted");
}

/// One call that sets several due times keeps the soonest, wherever it stands among them.
fn add_delays(b: &mut Bench) {
    for order in
        [["+100", "+600000", "+600000"], ["+600000", "+100", "+600000"], ["+600000", "+600000", "+100"]]
    {
        let ids = [b.id(), b.id(), b.id()];
        let rows: Vec<String> = ids.iter().map(|id| b.key(&format!("job:{id}"))).collect();
        let mut args = vec!["3"];
        args.extend(rows.iter().map(String::as_str));
        for when in &order {
            args.extend(["n", "d", "2", "DELAY", when]);
        }
        let v = b.argv("TRA.ADD", "", &args);
        assert_eq!(b.c.call_v(&v), Reply::Array(vec![Reply::Int(1); 3]));
        let soonest = order.iter().position(|w| *w == "+100").unwrap_or(0);
        b.ready(&ids[soonest], "the soonest job of a bulk add promoted");
    }
}

fn reschedule(b: &mut Bench) {
    let id = b.id();
    b.ok("EMQ.SCHEDULE", &id, &["+600000", "n", "d"]);
    let soon = b.soon;
    b.ok("EMQ.RESCHEDULE", &id, &[soon]);
    b.ready(&id, "the rescheduled job promoted at its new time");
}

fn delay(b: &mut Bench) {
    let (id, soon) = (b.held(&[]), b.soon);
    b.ok("EMQ.DELAY", &id, &["t", soon]);
    b.ready(&id, "the delayed job promoted");
}

fn fail_backoff(b: &mut Bench, kind: &str) {
    let id = b.held(&["ATTEMPTS", "2", "BACKOFF", kind, "100"]);
    assert_eq!(b.ok("EMQ.FAIL", &id, &["t", "boom"]).str(), "delayed");
    b.ready(&id, "the retry promoted after its backoff");
}

fn fail_delay(b: &mut Bench) {
    let (id, soon) = (b.held(&[]), b.soon);
    assert_eq!(b.ok("EMQ.FAIL", &id, &["t", "boom", "DELAY", soon]).str(), "delayed");
    b.ready(&id, "the failed job promoted at its DELAY");
}

fn claim_lease(b: &mut Bench) {
    let id = b.id();
    b.enqueue(&id, &[]);
    assert_eq!(b.claim("t", "100"), std::slice::from_ref(&id));
    b.ready(&id, "the lapsed lease reclaimed");
    assert_eq!(b.field(&id, "sc").as_deref(), Some("1"));
}

fn extend_sooner(b: &mut Bench, cmd: &str) {
    let id = b.held(&[]);
    match cmd {
        "EMQ.EXTEND" => b.ok(cmd, &id, &["t", "100"]),
        _ => b.ok(cmd, "", &["100", &id, "t"]),
    };
    b.ready(&id, "the lease, made shorter, reclaimed");
}

fn fetch_lease(b: &mut Bench, cmd: &str) {
    let held = b.held(&[]);
    let next = b.id();
    b.enqueue(&next, &[]);
    if cmd == "TRA.COMPLETENEXT" {
        b.ok(cmd, &held, &["t", "ok", "100"]);
    } else {
        let mut v = b.argv(cmd, "", &[]);
        v.push(b"1".to_vec());
        v.push(b.key(&format!("job:{held}")).into_bytes());
        v.extend(["t", "ok", "t2", "100"].iter().map(|a| a.as_bytes().to_vec()));
        let r = b.c.call_v(&v);
        assert!(r.err().is_none(), "{r:?}");
    }
    assert_eq!(b.state(&next).as_deref(), Some("active"));
    b.ready(&next, "the fetched job's lapsed lease reclaimed");
}

#[derive(Clone, Copy)]
enum Finisher {
    Complete,
    Completes,
    Fail,
    Upkeep,
}

/// A job kept by KEEPLAST while its holder is active, due 100 ms after its call; the holder's
/// finish makes it, delayed as long after the finish.
fn kept(b: &mut Bench, by: Finisher) {
    if matches!(by, Finisher::Upkeep) {
        // The queue's own limit: the first stall fails the holder.
        b.c.call(&[b"HSET", b.key("meta").as_bytes(), b"max-stalls", b"0"]);
    }
    let lease = if matches!(by, Finisher::Upkeep) { "150" } else { "60000" };
    let holder = b.id();
    b.enqueue(&holder, &["DEDUP", "d"]);
    assert_eq!(b.claim("t", lease), std::slice::from_ref(&holder));
    let kept = b.id();
    let r = b.ok("EMQ.SCHEDULE", &kept, &["+100", "n", "d", "DEDUP", "d", "KEEPLAST"]);
    assert_eq!(r.str(), holder, "kept for the holder");
    match by {
        Finisher::Complete => {
            b.ok("EMQ.COMPLETE", &holder, &["t", "ok"]);
        }
        Finisher::Completes => {
            b.ok("TRA.COMPLETES", "", &[&holder, "t", "ok"]);
        }
        Finisher::Fail => {
            b.ok("EMQ.FAIL", &holder, &["t", "boom", "FINAL"]);
        }
        // No call: upkeep reclaims the lapsed lease and fails the holder.
        Finisher::Upkeep => {}
    }
    b.eventually("the kept job made, delayed", |b| b.state(&kept).is_some());
    b.ready(&kept, "the kept job promoted");
}

fn expire(b: &mut Bench, cmd: &str) {
    let id = b.id();
    match cmd {
        "EMQ.ENQUEUE" => b.enqueue(&id, &["EXPIRE", "+100"]),
        "EMQ.SCHEDULE" => {
            b.ok(cmd, &id, &["+600000", "n", "d", "EXPIRE", "+100"]);
        }
        _ => b.add(&id, &["EXPIRE", "+100"]),
    }
    b.eventually("the job failed as expired", |b| b.state(&id).as_deref() == Some("failed"));
    assert_eq!(b.field(&id, "e").as_deref(), Some("expired"));
}

fn expire_kept(b: &mut Bench) {
    let holder = b.held(&["DEDUP", "d"]);
    let kept = b.id();
    b.ok("EMQ.ENQUEUE", &kept, &["n", "d", "EXPIRE", "+300", "DEDUP", "d", "KEEPLAST"]);
    b.ok("EMQ.COMPLETE", &holder, &["t", "ok"]);
    assert_eq!(b.state(&kept).as_deref(), Some("wait"), "made ready");
    b.eventually("the kept job failed as expired", |b| b.state(&kept).as_deref() == Some("failed"));
}

fn rate_window(b: &mut Bench) {
    b.ok("TRA.LIMIT", "", &["RATE", "1", "300"]);
    let (first, second) = (b.id(), b.id());
    b.enqueue(&first, &[]);
    b.enqueue(&second, &[]);
    assert_eq!(b.claim("t", "60000"), [first]);
    b.wait_to_claim();
    assert_eq!(b.claimed(), [second], "the held claim gets the job when the window ends");
}

fn for_hold(b: &mut Bench) {
    let id = b.id();
    b.enqueue(&id, &[]);
    b.ok("TRA.LIMIT", "", &["FOR", "300"]);
    b.wait_to_claim();
    assert_eq!(b.claimed(), [id], "the held claim gets the job when FOR ends");
}

fn concurrency_freed(b: &mut Bench) {
    // The lapsed job fails (the queue's max-stalls 0): it leaves `active` for `failed`, so
    // only `active`'s signal can wake the claim, which then takes the other job.
    b.c.call(&[b"HSET", b.key("meta").as_bytes(), b"max-stalls", b"0"]);
    b.ok("TRA.LIMIT", "", &["CONCURRENCY", "1"]);
    let (lapsing, next) = (b.id(), b.id());
    b.enqueue(&lapsing, &[]);
    assert_eq!(b.claim("t", "150"), std::slice::from_ref(&lapsing));
    b.enqueue(&next, &[]);
    b.wait_to_claim();
    assert_eq!(b.claimed(), [next], "woken when the lapsed job left active");
    assert_eq!(b.state(&lapsing).as_deref(), Some("failed"));
}

fn waiting_claim(b: &mut Bench) {
    b.wait_to_claim();
    let id = b.id();
    b.ok("EMQ.SCHEDULE", &id, &["+100", "n", "d"]);
    assert_eq!(b.claimed(), [id], "the waiting claim gets the promoted job");
}

fn scheduler_first(b: &mut Bench) {
    let start = (trafikey_support::reliability::server_ms(&mut b.c) + 150).to_string();
    let r = b.ok("TRA.SCHEDULER", "s", &["SET", "EVERY", "600000", "START", &start, "JOB", "n", "d"]);
    let id = r.array()[0].str();
    assert_eq!(b.state(&id).as_deref(), Some("delayed"));
    b.ready(&id, "the first iteration promoted at START");
}

fn scheduler_on_time(b: &mut Bench) {
    b.ok("TRA.SCHEDULER", "s", &["SET", "EVERY", "200", "JOB", "n", "d"]);
    let wait = b.key("wait");
    b.eventually("three iterations made, one a period", |b| b.c.call(&[b"LLEN", wait.as_bytes()]).int() >= 3);
}

fn scheduler_successor(b: &mut Bench) {
    // The first iteration, due now, taken at once: its successor is made, delayed at its own
    // time.
    b.ok("TRA.SCHEDULER", "s", &["SET", "EVERY", "300", "JOB", "n", "d"]);
    let taken = b.claim("t", "60000");
    assert_eq!(taken.len(), 1);
    let sched = b.key("sched:s");
    let next = b.c.call(&[b"HGET", sched.as_bytes(), b"job"]).str();
    assert_ne!(next, taken[0]);
    assert_eq!(b.state(&next).as_deref(), Some("delayed"));
    b.ready(&next, "the successor promoted at its time");
}
