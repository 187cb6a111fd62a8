//! No call holds the server for more than about 2 ms, on a queue of any size, at the defaults
//! and at every cap. A queue of 1 000 000 waiting jobs, plus due delayed jobs, expired leases
//! and finished jobs by the tens of thousands; then each command that does a batch runs at
//! its largest batch — promote-batch and retention-batch at their caps, COUNT at its cap — and
//! each call's server CPU time (`INFO cpu` around it, so the figure is the call's own work on a
//! machine busy with other things) must stay within `LIMIT_US`. `SLOWLOG` runs at 2 000 µs
//! beside it and its entries are printed (wall time: on a loaded machine a preempted call can
//! land there without having worked longer).
//!
//! One call is the client's to size, not the queue's: EXTENDS renews as many leases as it is
//! given pairs (up to the 1 000 the wire allows), each a row read and a score update, about
//! 2–4 µs a pair; at its cap it is held to `EXTENDS_LIMIT_US` instead, and a worker holding
//! hundreds of jobs renews them in calls of a few hundred.

use std::thread::sleep;
use std::time::{Duration, Instant};

use trafikey_support::*;

const JOBS: u64 = 1_000_000;
/// About 2 ms: the bound, with room for the `INFO` call inside the measurement and for the
/// slower clock of a machine whose other core is busy (CPU time, not wall time, but a loaded
/// sibling core still slows the work down).
const LIMIT_US: i64 = 3_000;
const EXTENDS_LIMIT_US: i64 = 6_000;

fn call(c: &mut Conn, v: &[Vec<u8>]) -> Reply {
    let refs: Vec<&[u8]> = v.iter().map(Vec::as_slice).collect();
    c.call(&refs)
}

fn cpu_us(c: &mut Conn) -> i64 {
    let mut secs = |f: &str| info_field(c, "cpu", f).parse::<f64>().unwrap_or(0.0);
    ((secs("used_cpu_user") + secs("used_cpu_sys")) * 1e6) as i64
}

struct Meter {
    seen: Vec<(String, i64)>,
}

impl Meter {
    /// Runs one call, keeps its server CPU time under `what`.
    fn run(&mut self, c: &mut Conn, what: &str, v: &[Vec<u8>]) -> Reply {
        let t0 = cpu_us(c);
        let r = call(c, v);
        let used = cpu_us(c) - t0;
        eprintln!("{what:<48} {used:>6} µs  {}", brief(&r));
        self.seen.push((what.to_owned(), used));
        r
    }

    /// A call that may run again with the same effect (a read, a renewal): the least of three
    /// runs, so that a moment's load elsewhere on the machine does not count as its work.
    fn least_of_three(&mut self, c: &mut Conn, what: &str, v: &[Vec<u8>]) -> Reply {
        let mut best: Option<(i64, Reply)> = None;
        for _ in 0..3 {
            let t0 = cpu_us(c);
            let r = call(c, v);
            let used = cpu_us(c) - t0;
            if best.as_ref().is_none_or(|(b, _)| used < *b) {
                best = Some((used, r));
            }
        }
        let (used, r) = best.expect("three runs");
        eprintln!("{what:<48} {used:>6} µs  {} (least of 3)", brief(&r));
        self.seen.push((what.to_owned(), used));
        r
    }
}

fn brief(r: &Reply) -> String {
    match r {
        Reply::Array(a) => format!("[{} items]", a.len()),
        other => format!("{other:?}").chars().take(60).collect(),
    }
}

fn pipelined(c: &mut Conn, calls: Vec<Vec<Vec<u8>>>) {
    for chunk in calls.chunks(1000) {
        for r in c.pipeline(chunk) {
            assert!(r.err().is_none(), "{r:?}");
        }
    }
}

/// Sets a config to the largest value the server takes for it (read from its refusal of
/// more).
fn set_to_cap(c: &mut Conn, name: &str) -> String {
    let n = format!("trafikey.{name}");
    let r = c.call(&[b"CONFIG", b"SET", n.as_bytes(), TOO_MANY]);
    let e = r.err().expect("a refusal of too much").to_owned();
    let cap = e.split("and ").nth(1).and_then(|t| t.split(' ').next()).expect("the range").to_owned();
    assert_eq!(c.call(&[b"CONFIG", b"SET", n.as_bytes(), cap.as_bytes()]), Reply::Simple("OK".into()));
    cap
}

/// The largest COUNT a command takes, read from its refusal of more (which writes nothing).
fn count_cap(c: &mut Conn, v: Vec<Vec<u8>>) -> String {
    let r = call(c, &v);
    let e = r.err().unwrap_or_else(|| panic!("a refusal of too much: {r:?}")).to_owned();
    e.rsplit("..=").next().expect("the range").trim().to_owned()
}

const REMOVE_KEYS: &[&str] = &["job", "wait", "prio", "active", "delayed", "completed", "failed", "events"];
const TOO_MANY: &[u8] = b"999999999999";

fn claim(q: &Q, lease: &str, count: &str) -> Vec<Vec<u8>> {
    q.cmd("EMQ.CLAIM", "", keys_of("EMQ.CLAIM"), &[b"w", lease.as_bytes(), b"COUNT", count.as_bytes()])
}

#[test]
fn no_call_over_two_milliseconds_at_the_defaults_and_at_every_cap() {
    let s = Server::quiet();
    let mut c = s.conn();
    assert_eq!(c.call(&[b"CONFIG", b"SET", b"slowlog-log-slower-than", b"2000"]), Reply::Simple("OK".into()));
    let q = Q::new("big");
    let t0 = Instant::now();
    let data: &[u8] = b"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    let jobs = (1..=JOBS).map(|n| q.cmd("EMQ.ENQUEUE", &jid(n), keys_of("EMQ.ENQUEUE"), &[b"n", data]));
    pipelined(&mut c, jobs.collect());
    eprintln!("{JOBS} jobs enqueued in {:?}", t0.elapsed());
    let mut m = Meter { seen: Vec::new() };
    c.call(&[b"SLOWLOG", b"RESET"]);

    // Promotion: 30 000 due delayed jobs; one CLAIM promotes a batch, at the default and the cap.
    let due = (1..=30_000u64)
        .map(|n| q.cmd("EMQ.SCHEDULE", &jid(2_000_000 + n), keys_of("EMQ.SCHEDULE"), &[b"1", b"n", data]));
    pipelined(&mut c, due.collect());
    m.run(&mut c, "CLAIM promoting promote-batch (default)", &claim(&q, "600000", "1"));
    let cap = set_to_cap(&mut c, "promote-batch");
    m.run(&mut c, &format!("CLAIM promoting promote-batch {cap} (cap)"), &claim(&q, "600000", "1"));

    // CLAIM at its largest COUNT.
    let cap =
        count_cap(&mut c, q.cmd("EMQ.CLAIM", "", keys_of("EMQ.CLAIM"), &[b"w", b"1", b"COUNT", TOO_MANY]));
    m.run(&mut c, &format!("CLAIM COUNT {cap} (cap)"), &claim(&q, "600000", &cap));

    // Expired leases: 30 000 claimed with a 1 ms lease; STALLED at its default and its cap.
    for _ in 0..300 {
        call(&mut c, &claim(&q, "1", "1000"));
    }
    sleep(Duration::from_millis(20));
    let stalled = |count: Option<&[u8]>| {
        let mut a: Vec<&[u8]> = vec![];
        if let Some(n) = count {
            a.extend([b"COUNT".as_slice(), n]);
        }
        q.cmd("EMQ.STALLED", "", keys_of("EMQ.STALLED"), &a)
    };
    m.run(&mut c, "STALLED (default COUNT)", &stalled(None));
    let cap = count_cap(&mut c, stalled(Some(TOO_MANY)));
    m.run(&mut c, &format!("STALLED COUNT {cap} (cap)"), &stalled(Some(cap.as_bytes())));

    // EXTENDS of the most pairs it takes.
    let held: Vec<Reply> =
        (0..10).flat_map(|_| call(&mut c, &claim(&q, "600000", "1000")).array().to_vec()).collect();
    let mut a: Vec<Vec<u8>> = vec![b"600000".to_vec()];
    for j in &held {
        a.push(j.array()[0].str().into_bytes());
        a.push(b"w".to_vec());
    }
    let refs: Vec<&[u8]> = a.iter().map(Vec::as_slice).collect();
    let what = format!("EXTENDS {} pairs (cap)", held.len());
    m.least_of_three(&mut c, &what, &q.cmd("EMQ.EXTENDS", "", keys_of("EMQ.EXTENDS"), &refs));

    // TRA.COMPLETES of the most jobs it takes (what one CLAIM hands out).
    let batch = call(&mut c, &claim(&q, "600000", "100"));
    let mut a: Vec<Vec<u8>> = Vec::new();
    for j in batch.array() {
        a.extend([j.array()[0].str().into_bytes(), b"w".to_vec(), b"ok".to_vec()]);
    }
    let refs: Vec<&[u8]> = a.iter().map(Vec::as_slice).collect();
    let what = format!("TRA.COMPLETES {} jobs (cap)", batch.array().len());
    m.run(&mut c, &what, &q.cmd("TRA.COMPLETES", "", &["active", "completed", "events"], &refs));

    // Retention: 30 000 completed kept (KEEP -1), then COMPLETEs with KEEP 1 (a batch of rows
    // deleted each), at the default and the cap.
    let mut done = Vec::new();
    for _ in 0..300 {
        for j in call(&mut c, &claim(&q, "600000", "1000")).array() {
            let id = j.array()[0].str();
            done.push(q.cmd("EMQ.COMPLETE", &id, keys_of("EMQ.COMPLETE"), &[b"w", b"ok", b"KEEP", b"-1"]));
        }
    }
    pipelined(&mut c, done);
    let last = call(&mut c, &claim(&q, "600000", "2"));
    let ids: Vec<String> = last.array().iter().map(|j| j.array()[0].str()).collect();
    let complete =
        |id: &str| q.cmd("EMQ.COMPLETE", id, keys_of("EMQ.COMPLETE"), &[b"w", b"ok", b"KEEP", b"1"]);
    m.run(&mut c, "COMPLETE KEEP 1 (retention-batch default)", &complete(&ids[0]));
    let cap = set_to_cap(&mut c, "retention-batch");
    m.run(&mut c, &format!("COMPLETE KEEP 1 (retention-batch {cap}, cap)"), &complete(&ids[1]));

    // Inspection and administration at their largest COUNT.
    let page = count_cap(&mut c, q.cmd("TRA.JOBS", "", &["wait"], &[b"COUNT", TOO_MANY]));
    let jobs = q.cmd("TRA.JOBS", "", &["wait"], &[b"FROM", b"500000", b"COUNT", page.as_bytes()]);
    m.least_of_three(&mut c, &format!("TRA.JOBS wait COUNT {page} (cap)"), &jobs);
    let drain = |n: &[u8]| q.cmd("TRA.DRAIN", "", &["wait", "prio", "delayed", "events"], &[b"COUNT", n]);
    let n = count_cap(&mut c, drain(TOO_MANY));
    let clean = q.cmd("TRA.CLEAN", "", &["completed", "events"], &[b"GRACE", b"0", b"COUNT", n.as_bytes()]);
    m.run(&mut c, &format!("TRA.CLEAN completed COUNT {n} (cap)"), &clean);
    m.run(&mut c, "TRA.REMOVE the last waiting job", &q.cmd("TRA.REMOVE", &jid(JOBS), REMOVE_KEYS, &[]));
    m.run(&mut c, &format!("TRA.DRAIN COUNT {n} (cap)"), &drain(n.as_bytes()));
    let all = ["wait", "prio", "active", "delayed", "completed", "failed", "meta", "events"];
    let obliterate = q.cmd("TRA.OBLITERATE", "", &all, &[b"FORCE", b"COUNT", n.as_bytes()]);
    m.run(&mut c, &format!("TRA.OBLITERATE FORCE COUNT {n} (cap)"), &obliterate);

    let slow = c.call(&[b"SLOWLOG", b"GET", b"100"]);
    for e in slow.array() {
        let f = e.array();
        eprintln!("SLOWLOG {} µs: {:?}", f[2].int(), f[3].array().first().map(Reply::str));
    }
    let limit = |what: &str| if what.starts_with("EXTENDS") { EXTENDS_LIMIT_US } else { LIMIT_US };
    let over: Vec<_> = m.seen.iter().filter(|(what, us)| *us > limit(what)).collect();
    assert!(
        over.is_empty(),
        "calls over {LIMIT_US} µs of server CPU (EXTENDS: {EXTENDS_LIMIT_US}): {over:?}"
    );
}

/// A user held to one queue pays for a batch what an unrestricted user does: the module judges
/// each row it finds with the command's head (name and declared keys), not the whole call, so a
/// check does not grow with the call's argument count (with the whole call, 1 000 pairs cost
/// 39 ms: each of the thousand checks searched two thousand arguments).
#[test]
fn a_restricted_user_pays_for_a_batch_what_any_user_does() {
    let s = Server::quiet();
    let mut c = s.conn();
    let q = Q::new("acl");
    pipelined(
        &mut c,
        (1..=1000).map(|n| q.cmd("EMQ.ENQUEUE", &jid(n), keys_of("EMQ.ENQUEUE"), &[b"job", b"{}"])).collect(),
    );
    let held: Vec<Reply> =
        (0..10).flat_map(|_| call(&mut c, &claim(&q, "600000", "100")).array().to_vec()).collect();
    let mut a: Vec<Vec<u8>> = vec![b"600000".to_vec()];
    for j in &held {
        a.push(j.array()[0].str().into_bytes());
        a.push(b"w".to_vec());
    }
    let refs: Vec<&[u8]> = a.iter().map(Vec::as_slice).collect();
    let extends = q.cmd("EMQ.EXTENDS", "", keys_of("EMQ.EXTENDS"), &refs);
    let mut m = Meter { seen: Vec::new() };
    let any = m.least_of_three(&mut c, "EXTENDS 1000 pairs, default user", &extends);
    let mut u = s.conn();
    let grant: [&[u8]; 8] =
        [b"ACL", b"SETUSER", b"billing", b"on", b">pw", b"~emq:{acl}:*", b"%R~{emq}:version", b"+@emq"];
    assert_eq!(c.call(&grant), Reply::Simple("OK".into()));
    assert_eq!(c.call(&[b"ACL", b"SETUSER", b"billing", b"+info"]), Reply::Simple("OK".into()));
    assert_eq!(u.call(&[b"AUTH", b"billing", b"pw"]), Reply::Simple("OK".into()));
    let mine = m.least_of_three(&mut u, "EXTENDS 1000 pairs, one-queue user", &extends);
    assert_eq!(mine.array().len(), 1000);
    assert!(mine.array().iter().all(|d| d.int() > 0), "every lease renewed by the restricted user");
    assert_eq!(any.array().len(), 1000);
    let [(_, default_us), (_, restricted_us)] = m.seen[..] else { panic!("two figures") };
    assert!(
        restricted_us <= 2 * default_us + 500,
        "a one-queue user's EXTENDS took {restricted_us} µs against {default_us} µs for the default user"
    );
}
