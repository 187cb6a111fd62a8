//! Job schedulers against a real server, as src/CONTRACT.md ("Job schedulers") and the
//! reference (TRA.SCHEDULER, TRA.SCHEDULERS) state them: SET creates or replaces a scheduler
//! and its one pending iteration (a delayed job `repeat:<id>:<ms>`, numbered); each next
//! iteration is made once, at its own time, ready (upkeep, with no worker at all, one per
//! period), or when a claim takes the pending one (CLAIM with or without ROW,
//! TRA.COMPLETENEXT), delayed at its time, whichever is first — an old iteration taken again
//! makes none; after downtime one late iteration then the present, never a burst; LIMIT, END, START,
//! OFFSET, cron patterns in a time zone, IMMEDIATELY; GET, LIST, COUNT and DEL; a failover and
//! an AOF replay carry a scheduler on with nothing doubled or missed, replica and AOF digests
//! equal to the primary's; every refusal writes nothing.
// A test may panic: that is how it fails. The module's own rules are for src/.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

use std::collections::{BTreeMap, BTreeSet};
use std::thread::sleep;
use std::time::Duration;

use trafikey_support::reliability::server_ms;
use trafikey_support::*;

const SCHED_KEYS: [&str; 3] = ["scheds", "delayed", "events"];

fn set_cmd(q: &Q, id: &str, args: &[&str]) -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = vec![b"TRA.SCHEDULER".to_vec(), b"4".to_vec()];
    v.push(format!("emq:{{{}}}:sched:{id}", q.0).into_bytes());
    v.extend(SCHED_KEYS.iter().map(|r| q.k(r).into_bytes()));
    v.extend(args.iter().map(|a| a.as_bytes().to_vec()));
    v
}

/// `TRA.SCHEDULER … SET args…`: the pending job's id and time.
fn set(c: &mut Conn, q: &Q, id: &str, args: &[&str]) -> (String, i64) {
    let mut a = vec!["SET"];
    a.extend_from_slice(args);
    let r = c.call_v(&set_cmd(q, id, &a));
    assert!(r.err().is_none(), "SET {id} {args:?}: {r:?}");
    (r.array()[0].str(), r.array()[1].int())
}

fn sched(c: &mut Conn, q: &Q, id: &str, args: &[&str]) -> Reply {
    c.call_v(&set_cmd(q, id, args))
}

fn reads(c: &mut Conn, q: &Q, args: &[&str]) -> Reply {
    let mut v: Vec<&[u8]> = vec![b"TRA.SCHEDULERS", b"1"];
    let k = q.k("scheds");
    v.push(k.as_bytes());
    v.extend(args.iter().map(|a| a.as_bytes()));
    c.call(&v)
}

/// A scheduler as GET shows it, its facts as text (`nil` for null); None when absent.
fn get(c: &mut Conn, q: &Q, id: &str) -> Option<BTreeMap<String, String>> {
    let r = reads(c, q, &["GET", id]);
    if r.is_nil() {
        return None;
    }
    Some(pairs(&r))
}

fn pairs(r: &Reply) -> BTreeMap<String, String> {
    r.array()
        .chunks(2)
        .map(|p| {
            let v = match &p[1] {
                Reply::Int(i) => i.to_string(),
                v if v.is_nil() => "nil".into(),
                v => v.str(),
            };
            (p[0].str(), v)
        })
        .collect()
}

fn num(m: &BTreeMap<String, String>, f: &str) -> i64 {
    m[f].parse().unwrap_or_else(|_| panic!("{f} = {}", m[f]))
}

/// Every iteration job of the queue: (scheduler, iteration time) → (id, state), read in one
/// script (upkeep cannot land between two reads).
fn iterations(c: &mut Conn, q: &Q) -> BTreeMap<(String, i64), (String, String)> {
    const SCRIPT: &[u8] = br#"
local out = {}
for _, k in ipairs(redis.call('KEYS', 'emq:{' .. ARGV[1] .. '}:job:*')) do
  local f = redis.call('HMGET', k, 'rs', 'rt', 'st')
  if f[1] then table.insert(out, {string.sub(k, #ARGV[1] + 12), f[1], f[2], f[3]}) end
end
return out"#;
    let r = c.call(&[b"EVAL", SCRIPT, b"0", q.0.as_bytes()]);
    let mut out = BTreeMap::new();
    for e in r.array() {
        let s = e.strings();
        let key = (s[1].clone(), s[2].parse::<i64>().unwrap());
        assert!(out.insert(key.clone(), (s[0].clone(), s[3].clone())).is_none(), "iteration {key:?} twice");
    }
    out
}

fn job_field(c: &mut Conn, q: &Q, id: &str, f: &str) -> Option<String> {
    let r = c.call(&[b"HGET", q.job(id).as_bytes(), f.as_bytes()]);
    (!r.is_nil()).then(|| r.str())
}

/// `EMQ.CLAIM … token 60000 BLOCK ms`: the ids handed out.
fn claim_block(c: &mut Conn, q: &Q, token: &str, ms: &str) -> Vec<String> {
    let r = q.run(c, "EMQ.CLAIM", "", &[token.as_bytes(), b"60000", b"BLOCK", ms.as_bytes()]);
    r.array().iter().map(|j| j.array()[0].str()).collect()
}

fn alias_of(c: &mut Conn, q: &Q, alias: &str) -> Option<String> {
    let r = c.call(&[b"HGET", q.k("alias").as_bytes(), alias.as_bytes()]);
    (!r.is_nil()).then(|| r.str())
}

fn job_map(c: &mut Conn, q: &Q, id: &str) -> BTreeMap<String, String> {
    pairs(&c.call(&[b"TRA.JOB", b"1", q.job(id).as_bytes()]))
}

#[test]
fn set_makes_one_pending_iteration_and_upkeep_hands_each_to_a_waiting_worker() {
    let s = Server::installed();
    let mut c = s.conn();
    let q = Q::new("every");
    let now = server_ms(&mut c);
    let start = now + 400;
    let (id, at) = set(
        &mut c,
        &q,
        "s1",
        &[
            "EVERY",
            "300",
            "START",
            &start.to_string(),
            "JOB",
            "tick",
            "{\"n\":1}",
            "PRIORITY",
            "2",
            "ATTEMPTS",
            "3",
        ],
    );
    assert_eq!(at, start, "START is the first time");
    // The pending iteration: a delayed job at its time, its custom id, naming its scheduler.
    let job = c.call(&[b"TRA.JOB", b"1", q.job(&id).as_bytes()]);
    let m = pairs(&job);
    assert_eq!(m["state"], "delayed");
    assert_eq!(m["due"], at.to_string());
    assert_eq!(m["alias"], format!("repeat:s1:{at}"));
    assert_eq!((m["scheduler"].as_str(), m["iteration"].as_str()), ("s1", at.to_string().as_str()));
    assert_eq!(m["count"], "1");
    assert_eq!((m["name"].as_str(), m["data"].as_str(), m["priority"].as_str()), ("tick", "{\"n\":1}", "2"));
    assert_eq!(m["attempts"], "3");
    assert_eq!(alias_of(&mut c, &q, &format!("repeat:s1:{at}")), Some(id.clone()));
    let g = get(&mut c, &q, "s1").unwrap();
    assert_eq!(
        (num(&g, "every"), num(&g, "offset"), num(&g, "count"), num(&g, "next")),
        (300, start % 300, 1, at)
    );
    assert_eq!(g["job"], id);

    // A worker waits; nothing else talks to the server. Each iteration reaches it at its time,
    // and the claim that takes it makes the one after, delayed at its own time.
    let mut w = s.conn();
    let mut seen = Vec::new();
    let mut rounds = Vec::new();
    for _ in 0..3 {
        let got = claim_block(&mut w, &q, "w", "10000");
        assert_eq!(got.len(), 1, "an iteration reached the waiting worker");
        let m = job_map(&mut c, &q, &got[0]);
        let rt: i64 = m["iteration"].parse().unwrap();
        assert!(m["claimed"].parse::<i64>().unwrap() >= rt, "not before its time");
        seen.push(rt);
        rounds.push(m["count"].parse::<i64>().unwrap());
    }
    assert_eq!(rounds, [1, 2, 3], "numbered in order");
    // In order, in the scheduler's phase (a window missed while the machine stalled is skipped,
    // never made late twice).
    assert_eq!(seen[0], at);
    assert!(seen.windows(2).all(|w| w[1] > w[0] && (w[1] - w[0]) % 300 == 0), "{seen:?}");
    let g = get(&mut c, &q, "s1").unwrap();
    assert!(num(&g, "count") >= 4 && num(&g, "next") >= at + 900);
    assert!(info_field(&mut c, "trafikey", "trafikey_claim_iterations").parse::<i64>().unwrap() >= 3);
}

/// A pending iteration promoted early brings its successor with the claim that takes it: CLAIM
/// with ROW, and TRA.COMPLETENEXT's claim; an old iteration taken again (retried,
/// reprocessed) makes none.
#[test]
fn row_claims_and_completenext_make_the_successor_and_old_iterations_make_none() {
    let s = Server::quiet();
    let mut c = s.conn();
    let q = Q::new("takers");
    let start = (server_ms(&mut c) + 600_000).to_string();
    let (first, _) =
        set(&mut c, &q, "s", &["EVERY", "60000", "START", &start, "JOB", "j", "{}", "ATTEMPTS", "5"]);
    // Promoted early, then taken with ROW: the entry carries the row, its count 1; the claim
    // made the next iteration, delayed.
    assert_eq!(q.run(&mut c, "EMQ.PROMOTE", &first, &[]), Reply::Int(1));
    let r = q.run(&mut c, "EMQ.CLAIM", "", &[b"w", b"60000", b"ROW"]);
    let e = r.array()[0].array();
    assert_eq!(e[0].str(), first);
    assert_eq!(pairs(&e[4])["count"], "1");
    let g = get(&mut c, &q, "s").unwrap();
    assert_eq!(num(&g, "count"), 2);
    let second = g["job"].clone();
    assert_eq!(job_field(&mut c, &q, &second, "st").as_deref(), Some("delayed"));
    // The first fails and is retried at once: taking it again makes nothing.
    let r = q.run(&mut c, "EMQ.FAIL", &first, &[b"w", b"boom", b"RETRY"]);
    assert_eq!(r, Reply::Simple("retry".into()));
    let again = unchanged_scheds(&mut c, &q, |c| claim_all(&q, c, "w2"));
    assert_eq!(again, std::slice::from_ref(&first));
    // COMPLETENEXT finishes it, and its claim takes the second (promoted early): the third.
    assert_eq!(q.run(&mut c, "EMQ.PROMOTE", &second, &[]), Reply::Int(1));
    let r = q.run(&mut c, "TRA.COMPLETENEXT", &first, &[b"w2", b"ok", b"60000"]);
    assert!(r.err().is_none(), "{r:?}");
    assert_eq!(r.array()[1].array()[0].array()[0].str(), second);
    let g = get(&mut c, &q, "s").unwrap();
    assert_eq!(num(&g, "count"), 3);
    assert_eq!(job_map(&mut c, &q, &g["job"])["count"], "3");
    // The first reprocessed and taken again: nothing made.
    assert_eq!(q.run(&mut c, "EMQ.REPROCESS", &first, &[]), Reply::Int(1));
    let again = unchanged_scheds(&mut c, &q, |c| claim_all(&q, c, "w3"));
    assert_eq!(again, [first]);
    q.check_invariant(&mut c);
}

/// Two schedulers whose iteration ids share their low bits (`s2709` and `s12106` hash alike
/// in the id's 22 bits) and whose iterations fall at the same times: one claim that takes both
/// pending iterations makes two successors, each its own job, under its own scheduler and
/// custom id (the second takes the next free id, not the one the first just chose).
#[test]
fn one_call_makes_colliding_schedulers_iterations_apart() {
    let s = Server::quiet();
    let mut c = s.conn();
    let q = Q::new("collide");
    let start = (server_ms(&mut c) + 600_000).to_string();
    let args = ["EVERY", "60000", "START", &start, "JOB", "j", "{}"];
    let (a, at) = set(&mut c, &q, "s2709", &args);
    let (b, bt) = set(&mut c, &q, "s12106", &args);
    assert_eq!(at, bt);
    assert_ne!(a, b);
    for id in [&a, &b] {
        assert_eq!(q.run(&mut c, "EMQ.PROMOTE", id, &[]), Reply::Int(1));
    }
    let took: BTreeSet<String> = claim_all(&q, &mut c, "w").into_iter().collect();
    assert_eq!(took, BTreeSet::from([a, b]));
    let its = iterations(&mut c, &q);
    assert_eq!(its.len(), 4, "{its:?}");
    let next = at + 60000;
    for sid in ["s2709", "s12106"] {
        let g = get(&mut c, &q, sid).unwrap();
        assert_eq!(num(&g, "count"), 2);
        let (id, st) = &its[&(sid.to_string(), next)];
        assert_eq!((id, st.as_str()), (&g["job"], "delayed"));
        assert_eq!(alias_of(&mut c, &q, &format!("repeat:{sid}:{next}")).as_deref(), Some(id.as_str()));
    }
    q.check_invariant(&mut c);
}

/// The scheduler's hash, list and iterations as they are; `f` must change none of them.
fn unchanged_scheds<R>(c: &mut Conn, q: &Q, f: impl FnOnce(&mut Conn) -> R) -> R {
    let before = (get(c, q, "s"), reads(c, q, &["LIST", "0", "-1"]), iterations(c, q).len());
    let r = f(c);
    assert_eq!(before, (get(c, q, "s"), reads(c, q, &["LIST", "0", "-1"]), iterations(c, q).len()));
    r
}

/// The scheduler's score in `scheds`: the time of its next iteration, not yet made.
fn score(c: &mut Conn, q: &Q, id: &str) -> Option<i64> {
    match c.call(&[b"ZSCORE", q.k("scheds").as_bytes(), id.as_bytes()]) {
        Reply::Nil => None,
        Reply::Double(d) => Some(d as i64),
        r => Some(r.str().parse::<f64>().unwrap() as i64),
    }
}

/// With no worker and no client call, upkeep makes one iteration per period, each at its own
/// time, straight into `wait`: the first (due at once) has no successor until that time; each
/// next time is the predecessor's plus the period, or — when the machine stalled past it —
/// the first slot after the making. None waits in `delayed`.
#[test]
fn without_a_worker_one_iteration_per_period_on_time() {
    let s = Server::installed();
    let mut c = s.conn();
    let q = Q::new("idle");
    let (_, at) = set(&mut c, &q, "s", &["EVERY", "100", "JOB", "j", "{}"]);
    let first = iterations(&mut c, &q);
    assert_eq!(first.len(), 1, "no successor made in advance: {first:?}");
    assert_eq!(score(&mut c, &q, "s"), Some(at + 100));
    wait_for(|| get(&mut c, &q, "s").is_some_and(|g| num(&g, "count") >= 8), "eight iterations");
    c.call(&[b"CONFIG", b"SET", b"trafikey.upkeep", b"no"]);
    let g = get(&mut c, &q, "s").unwrap();
    let its = iterations(&mut c, &q);
    let mine: Vec<(i64, &(String, String))> =
        its.iter().filter(|((s, _), _)| s == "s").map(|((_, t), v)| (*t, v)).collect();
    assert_eq!(mine.len() as i64, num(&g, "count"), "one job per iteration made");
    assert_eq!(mine[0].0, at);
    assert!(mine.iter().all(|(_, (_, st))| st == "wait"), "{mine:?}");
    let last = mine.last().unwrap();
    assert_eq!((last.0, &last.1 .0), (num(&g, "next"), &g["job"]));
    let mut made_prev = at;
    for (n, pair) in mine.windows(2).enumerate() {
        let ((t0, _), (t1, (id1, _))) = (pair[0], pair[1]);
        let m = job_map(&mut c, &q, id1);
        let made: i64 = m["created"].parse().unwrap();
        assert_eq!(m["count"], (n + 2).to_string());
        assert!(made >= t1, "{id1} made at {made}, before its time {t1}");
        let want =
            if made_prev < t0 + 100 { t0 + 100 } else { made_prev + 100 - (made_prev - at).rem_euclid(100) };
        assert_eq!(t1, want, "{id1} after {t0}, made at {made_prev}");
        made_prev = made;
    }
    assert!(score(&mut c, &q, "s").unwrap() > last.0);
    assert_eq!(info_field(&mut c, "trafikey", "trafikey_claim_iterations"), "0");
    assert_eq!(info_field(&mut c, "trafikey", "trafikey_upkeep_iterations"), (mine.len() - 1).to_string());
    q.check_invariant(&mut c);
}

/// Promoted early and taken, a pending iteration brings its successor at once, delayed at the
/// next time on the grid after its own; neither its own time nor the successor's makes
/// anything more; the time after the successor's, upkeep makes that iteration, ready by the
/// template's priority.
#[test]
fn an_early_take_makes_the_successor_and_its_old_time_makes_nothing() {
    let s = Server::installed();
    let mut c = s.conn();
    let q = Q::new("early");
    let made = |c: &mut Conn, f: &str| info_field(c, "trafikey", f).parse::<i64>().unwrap();
    let start = server_ms(&mut c) + 1500;
    let (first, at) = set(
        &mut c,
        &q,
        "s",
        &["EVERY", "1500", "START", &start.to_string(), "JOB", "j", "{}", "PRIORITY", "3"],
    );
    assert_eq!(q.run(&mut c, "EMQ.PROMOTE", &first, &[]), Reply::Int(1));
    assert_eq!(claim_all(&q, &mut c, "w"), std::slice::from_ref(&first));
    let g = get(&mut c, &q, "s").unwrap();
    assert_eq!((num(&g, "count"), num(&g, "next")), (2, at + 1500));
    assert_eq!(job_map(&mut c, &q, &g["job"])["count"], "2");
    assert_eq!(job_field(&mut c, &q, &g["job"], "st").as_deref(), Some("delayed"));
    assert_eq!(score(&mut c, &q, "s"), Some(at + 3000));
    assert_eq!(
        (made(&mut c, "trafikey_claim_iterations"), made(&mut c, "trafikey_upkeep_iterations")),
        (1, 0)
    );
    // The old time passes (upkeep's timer was armed for it): nothing more.
    while server_ms(&mut c) < at + 300 {
        sleep(Duration::from_millis(50));
    }
    assert_eq!(iterations(&mut c, &q).len(), 2);
    assert_eq!(made(&mut c, "trafikey_upkeep_iterations"), 0);
    assert_eq!(num(&get(&mut c, &q, "s").unwrap(), "next"), at + 1500);
    // The successor's time: it becomes ready; nothing is made.
    let second = g["job"].clone();
    while server_ms(&mut c) < at + 1800 {
        sleep(Duration::from_millis(50));
    }
    assert_eq!(job_field(&mut c, &q, &second, "st").as_deref(), Some("prio"));
    assert_eq!(iterations(&mut c, &q).len(), 2);
    assert_eq!(made(&mut c, "trafikey_upkeep_iterations"), 0);
    // The time after it: upkeep makes the third, ready in `prio` (its priority), at its time.
    wait_for(|| num(&get(&mut c, &q, "s").unwrap(), "count") == 3, "the third iteration");
    assert_eq!(made(&mut c, "trafikey_upkeep_iterations"), 1);
    let times: Vec<i64> = iterations(&mut c, &q).keys().map(|(_, t)| *t).collect();
    assert_eq!(times, [at, at + 1500, at + 3000]);
    let third = get(&mut c, &q, "s").unwrap()["job"].clone();
    let m = job_map(&mut c, &q, &third);
    assert_eq!(m["state"], "prio");
    assert!(m["created"].parse::<i64>().unwrap() >= at + 3000, "made at its time, not before");
    // Its event: `added`, as ENQUEUE's, with its priority and custom id.
    let log = c.call(&[b"XRANGE", q.k("events").as_bytes(), b"-", b"+"]);
    let mine: Vec<Vec<String>> =
        log.array().iter().map(|e| e.array()[1].strings()).filter(|f| f.contains(&third)).collect();
    assert_eq!(mine.len(), 1, "{mine:?}");
    assert_eq!(mine[0][..2], ["event", "added"]);
    assert!(mine[0].windows(2).any(|w| w == ["prio", "3"]), "{mine:?}");
    assert!(mine[0].contains(&format!("repeat:s:{}", at + 3000)), "{mine:?}");
    assert_eq!(score(&mut c, &q, "s"), Some(at + 4500));
    q.check_invariant(&mut c);
}

#[test]
fn limit_end_offset_and_immediately() {
    let s = Server::installed();
    let mut c = s.conn();
    let q = Q::new("bounds");
    // LIMIT 3: three iterations, then the scheduler is gone.
    set(&mut c, &q, "lim", &["EVERY", "50", "LIMIT", "3", "JOB", "j", "{}"]);
    wait_for(|| get(&mut c, &q, "lim").is_none(), "the limited scheduler to end");
    assert_eq!(c.call(&[b"EXISTS", q.k("sched:lim").as_bytes()]), Reply::Int(0), "its hash is deleted");
    let its = iterations(&mut c, &q);
    let times: Vec<i64> = its.keys().filter(|(s, _)| s == "lim").map(|(_, t)| *t).collect();
    assert_eq!(times.len(), 3, "{times:?}");
    assert!(times.windows(2).all(|w| w[1] > w[0] && (w[1] - w[0]) % 50 == 0), "{times:?}");

    // END: iterations up to END, none after.
    let now = server_ms(&mut c);
    let end = now + 400;
    set(&mut c, &q, "end", &["EVERY", "100", "END", &end.to_string(), "JOB", "j", "{}"]);
    wait_for(|| get(&mut c, &q, "end").is_none(), "the ended scheduler to go");
    assert_eq!(c.call(&[b"EXISTS", q.k("sched:end").as_bytes()]), Reply::Int(0), "its hash is deleted");
    let times: Vec<i64> =
        iterations(&mut c, &q).keys().filter(|(s, _)| s == "end").map(|(_, t)| *t).collect();
    assert!(!times.is_empty() && times.iter().all(|t| *t <= end), "{times:?} within {end}");

    // OFFSET: times k·every + offset, after now.
    let now = server_ms(&mut c);
    let (_, at) = set(&mut c, &q, "off", &["EVERY", "60000", "OFFSET", "1234", "JOB", "j", "{}"]);
    assert_eq!(at % 60000, 1234);
    assert!(at > now && at <= now + 60000);

    // A pattern with IMMEDIATELY: the first iteration now, the next at the pattern's time,
    // not made before it.
    let now = server_ms(&mut c);
    let (_, at) = set(&mut c, &q, "imm", &["PATTERN", "0 0 1 1 *", "IMMEDIATELY", "JOB", "j", "{}"]);
    assert!(at >= now && at <= server_ms(&mut c));
    let first = get(&mut c, &q, "imm").unwrap()["job"].clone();
    wait_for(|| job_field(&mut c, &q, &first, "st").as_deref() == Some("wait"), "the first ready");
    let g = get(&mut c, &q, "imm").unwrap();
    assert_eq!((num(&g, "count"), num(&g, "next")), (1, at));
    assert!(score(&mut c, &q, "imm").unwrap() > now + 1000, "the next is New Year's, not now");
    assert_eq!(g["immediately"], "1");
}

/// A scheduler whose one iteration (END at its time) was made and then removed ends when that
/// time comes: its score, the last iteration's own time, marks that there is none after it,
/// and the removed one is not made again.
#[test]
fn a_last_iteration_removed_is_not_made_again_at_its_time() {
    let s = Server::installed();
    let mut c = s.conn();
    let q = Q::new("lastgone");
    let start = (server_ms(&mut c) + 300).to_string();
    let (id, at) =
        set(&mut c, &q, "s", &["EVERY", "60000", "START", &start, "END", &start, "JOB", "j", "{}"]);
    assert_eq!(score(&mut c, &q, "s"), Some(at));
    let roles = ["job", "wait", "prio", "active", "delayed", "completed", "failed", "events"];
    assert_eq!(c.call_v(&q.cmd("TRA.REMOVE", &id, &roles, &[])), Reply::Int(1));
    assert!(iterations(&mut c, &q).is_empty());
    wait_for(|| get(&mut c, &q, "s").is_none(), "the scheduler to end");
    assert_eq!(score(&mut c, &q, "s"), None);
    assert!(iterations(&mut c, &q).is_empty(), "{:?}", iterations(&mut c, &q));
    assert_eq!(alias_of(&mut c, &q, &format!("repeat:s:{at}")), None);
    assert_eq!(info_field(&mut c, "trafikey", "trafikey_upkeep_iterations"), "0");
    q.check_invariant(&mut c);
}

/// A scheduler whose hash holds no rule the module can read (a client wrote it) is dropped
/// from `scheds`, once, when upkeep comes to its time or a claim takes its pending iteration,
/// and counted in `orphans`; the hash, a client's, is left alone.
#[test]
fn a_scheduler_without_a_readable_rule_is_dropped_by_upkeep_and_by_a_claim() {
    let s = Server::installed();
    let mut c = s.conn();
    let (by_upkeep, by_claim) = (Q::new("orphan-upkeep"), Q::new("orphan-claim"));
    set(&mut c, &by_upkeep, "s", &["EVERY", "500", "JOB", "j", "{}"]);
    set(&mut c, &by_claim, "s", &["EVERY", "60000", "JOB", "j", "{}"]);
    for q in [&by_upkeep, &by_claim] {
        assert_eq!(c.call(&[b"HDEL", q.k("sched:s").as_bytes(), b"every"]), Reply::Int(1));
    }
    let orphans = |c: &mut Conn| info_field(c, "trafikey", "trafikey_orphans");
    assert_eq!(orphans(&mut c), "0");
    // Upkeep, when its next time comes.
    wait_for(|| score(&mut c, &by_upkeep, "s").is_none(), "upkeep to drop the scheduler");
    assert_eq!(orphans(&mut c), "1");
    // A claim that takes the pending iteration.
    let q = &by_claim;
    let pending = c.call(&[b"LRANGE", q.k("wait").as_bytes(), b"0", b"-1"]).strings();
    assert_eq!(pending.len(), 1);
    assert_eq!(claim_all(q, &mut c, "w"), pending);
    assert_eq!(score(&mut c, q, "s"), None);
    assert_eq!(orphans(&mut c), "2");
    for q in [&by_upkeep, &by_claim] {
        assert_eq!(c.call(&[b"EXISTS", q.k("sched:s").as_bytes()]), Reply::Int(1), "the client's hash stays");
        assert!(reads(&mut c, q, &["LIST", "0", "-1"]).array().is_empty());
    }
    // Nothing more is counted: neither is met again.
    sleep(Duration::from_millis(300));
    assert_eq!(orphans(&mut c), "2");
}

/// When upkeep comes to a scheduler's time and finds its custom id held by a client's job, it
/// makes the next free time's iteration, which lies after now: delayed at that time (event
/// `delayed`), not ready early.
#[test]
fn upkeep_passing_a_held_time_makes_the_next_iteration_delayed() {
    let s = Server::installed();
    let mut c = s.conn();
    let q = Q::new("heldnext");
    let (_, at) = set(&mut c, &q, "s", &["EVERY", "2000", "JOB", "j", "{}"]);
    let held = format!("repeat:s:{}", at + 2000);
    assert_eq!(q.enqueue(&mut c, &jid(1), &[b"ALIAS", held.as_bytes()]), Reply::Int(1));
    wait_for(|| get(&mut c, &q, "s").is_some_and(|g| num(&g, "count") == 2), "the second iteration");
    let g = get(&mut c, &q, "s").unwrap();
    let (id, next) = (g["job"].clone(), num(&g, "next"));
    assert!(next > at + 2000 && (next - at) % 2000 == 0, "{next} after {at}");
    let m = job_map(&mut c, &q, &id);
    assert!(next > m["created"].parse::<i64>().unwrap(), "{m:?}");
    let log = c.call(&[b"XRANGE", q.k("events").as_bytes(), b"-", b"+"]);
    let first = log.array().iter().map(|e| e.array()[1].strings()).find(|f| f.contains(&id)).unwrap();
    assert_eq!(first[..2], ["event", "delayed"], "{first:?}");
    assert_eq!(alias_of(&mut c, &q, &held), Some(jid(1)));
}

#[test]
fn cron_patterns_take_seconds_and_a_time_zone() {
    use chrono::{Datelike, TimeZone, Timelike};
    let s = Server::installed();
    let mut c = s.conn();
    let q = Q::new("cron");
    let now = server_ms(&mut c);
    let (_, at) =
        set(&mut c, &q, "paris", &["PATTERN", "0 30 9 * * *", "TZ", "Europe/Paris", "JOB", "j", "{}"]);
    let local = chrono_tz::Europe::Paris.timestamp_millis_opt(at).unwrap();
    assert_eq!((local.hour(), local.minute(), local.second()), (9, 30, 0));
    assert!(at > now && at - now <= 25 * 3600 * 1000);
    let g = get(&mut c, &q, "paris").unwrap();
    assert_eq!(
        (g["pattern"].as_str(), g["tz"].as_str(), g["every"].as_str()),
        ("0 30 9 * * *", "Europe/Paris", "nil")
    );
    // Last day of the month and the n-th weekday parse and land on their days.
    let (_, at) = set(&mut c, &q, "last", &["PATTERN", "0 0 L * *", "JOB", "j", "{}"]);
    let d = chrono::Utc.timestamp_millis_opt(at).unwrap();
    let next_day = d + chrono::Duration::days(1);
    assert_eq!((next_day.day(), d.hour()), (1, 0), "{d}");
    let (_, at) = set(&mut c, &q, "third-friday", &["PATTERN", "0 0 * * 5#3", "JOB", "j", "{}"]);
    let d = chrono::Utc.timestamp_millis_opt(at).unwrap();
    assert_eq!((d.format("%a").to_string(), (d.day() - 1) / 7), ("Fri".to_string(), 2), "{d}");
    // Every second, with the seconds field: iterations on whole seconds, one a second.
    set(&mut c, &q, "sec", &["PATTERN", "*/1 * * * * *", "JOB", "j", "{}"]);
    wait_for(|| get(&mut c, &q, "sec").is_some_and(|g| num(&g, "count") >= 4), "four iterations");
    let times: Vec<i64> =
        iterations(&mut c, &q).keys().filter(|(s, _)| s == "sec").map(|(_, t)| *t).collect();
    assert!(times.iter().all(|t| t % 1000 == 0), "{times:?}");
    assert!(times.windows(2).all(|w| w[1] > w[0] && (w[1] - w[0]) % 1000 == 0), "{times:?}");
}

#[test]
fn upsert_replaces_the_pending_iteration_and_del_removes_it() {
    let s = Server::quiet();
    let mut c = s.conn();
    let q = Q::new("upsert");
    let (a, ta) = set(&mut c, &q, "s", &["EVERY", "60000", "OFFSET", "5", "JOB", "old", "{}"]);
    // Same interval and phase: the same time, a new job with the new template, the count kept.
    let (b, tb) = set(&mut c, &q, "s", &["EVERY", "60000", "JOB", "new", "{\"v\":2}", "OPTS", "o"]);
    assert_eq!(tb, ta);
    assert_ne!(a, b);
    assert!(c.call(&[b"EXISTS", q.job(&a).as_bytes()]) == Reply::Int(0), "the replaced job is gone");
    assert_eq!(alias_of(&mut c, &q, &format!("repeat:s:{ta}")), Some(b.clone()));
    assert_eq!(job_field(&mut c, &q, &b, "n").as_deref(), Some("new"));
    let g = get(&mut c, &q, "s").unwrap();
    assert_eq!(
        (num(&g, "count"), num(&g, "offset"), g["name"].as_str(), g["opts"].as_str()),
        (1, 5, "new", "o")
    );
    // The same interval with the same OFFSET keeps the time; a new OFFSET moves the phase.
    let (_, tb) = set(&mut c, &q, "s", &["EVERY", "60000", "OFFSET", "5", "JOB", "new", "{}"]);
    assert_eq!(tb, ta);
    let (_, t9) = set(&mut c, &q, "s", &["EVERY", "60000", "OFFSET", "9", "JOB", "new", "{}"]);
    assert_eq!(t9.rem_euclid(60_000), 9, "{t9}");
    let (b, t5) = set(&mut c, &q, "s", &["EVERY", "60000", "OFFSET", "5", "JOB", "new", "{}"]);
    // Another interval: a new time, still one pending job.
    let (d, td) = set(&mut c, &q, "s", &["EVERY", "7000", "JOB", "new", "{}"]);
    assert_ne!(td, t5, "a new interval does not keep the old time");
    assert_ne!(d, b);
    let its = iterations(&mut c, &q);
    assert_eq!(its.len(), 1, "one pending iteration: {its:?}");
    assert_eq!(c.call(&[b"ZCARD", q.k("delayed").as_bytes()]), Reply::Int(1));
    // A pattern replaces the rule whole.
    let now = server_ms(&mut c);
    let (e, te) = set(&mut c, &q, "s", &["PATTERN", "0 0 * * *", "JOB", "new", "{}"]);
    assert!(te > now && te % 86_400_000 == 0);
    let g = get(&mut c, &q, "s").unwrap();
    assert_eq!((g["every"].as_str(), g["offset"].as_str(), g["job"].as_str()), ("nil", "nil", e.as_str()));
    assert_eq!(iterations(&mut c, &q).len(), 1);
    // DEL: the scheduler and its pending job; a second DEL finds nothing.
    assert_eq!(sched(&mut c, &q, "s", &["DEL"]), Reply::Int(1));
    assert_eq!(sched(&mut c, &q, "s", &["DEL"]), Reply::Int(0));
    assert!(get(&mut c, &q, "s").is_none());
    assert!(iterations(&mut c, &q).is_empty());
    assert_eq!(c.call(&[b"HLEN", q.k("alias").as_bytes()]), Reply::Int(0));
    let removed = c.call(&[b"XRANGE", q.k("events").as_bytes(), b"-", b"+"]);
    let last = removed.array().last().unwrap().array()[1].strings();
    assert_eq!(last[..4], ["event", "removed", "id", e.as_str()]);
    // DEL deletes a scheduler of which only the hash or only the listing is left.
    set(&mut c, &q, "h", &["EVERY", "1000", "JOB", "x", "{}"]);
    assert_eq!(c.call(&[b"ZREM", q.k("scheds").as_bytes(), b"h"]), Reply::Int(1));
    assert_eq!(sched(&mut c, &q, "h", &["DEL"]), Reply::Int(1));
    assert_eq!(c.call(&[b"EXISTS", format!("emq:{{{}}}:sched:h", q.0).as_bytes()]), Reply::Int(0));
    set(&mut c, &q, "l", &["EVERY", "1000", "JOB", "x", "{}"]);
    assert_eq!(c.call(&[b"DEL", format!("emq:{{{}}}:sched:l", q.0).as_bytes()]), Reply::Int(1));
    assert_eq!(sched(&mut c, &q, "l", &["DEL"]), Reply::Int(1));
    assert!(c.call(&[b"ZSCORE", q.k("scheds").as_bytes(), b"l"]).is_nil());
    // A scheduler of which only the listing was left (its hash and pending job deleted by
    // hand) is set anew: its rule's first time, not the one after the time still listed.
    let (z, tz) = set(&mut c, &q, "z", &["EVERY", "60000", "JOB", "x", "{}"]);
    c.call(&[b"DEL", format!("emq:{{{}}}:sched:z", q.0).as_bytes(), q.job(&z).as_bytes()]);
    c.call(&[b"ZREM", q.k("delayed").as_bytes(), z.as_bytes()]);
    c.call(&[b"HDEL", q.k("alias").as_bytes(), format!("repeat:z:{tz}").as_bytes()]);
    let (_, tz2) = set(&mut c, &q, "z", &["EVERY", "60000", "JOB", "x", "{}"]);
    assert!(tz2 < tz + 60_000, "{tz2}: not the one after {tz}");
    assert_eq!(sched(&mut c, &q, "z", &["DEL"]), Reply::Int(1));
    // A rule whose first time is now (IMMEDIATELY), set again later unchanged: the pending
    // iteration keeps its time rather than starting anew.
    let (_, t1) = set(&mut c, &q, "i", &["EVERY", "60000", "IMMEDIATELY", "JOB", "x", "{}"]);
    sleep(Duration::from_millis(5));
    let (i, t2) = set(&mut c, &q, "i", &["EVERY", "60000", "IMMEDIATELY", "JOB", "x", "{}"]);
    assert_eq!(t2, t1);
    // Its iteration taken, the same rule set again goes on after it instead of running at once.
    let r = q.run(&mut c, "EMQ.CLAIM", "", &[b"w", b"60000", b"COUNT", b"10"]);
    assert!(r.array().iter().any(|j| j.array()[0].str() == i), "{r:?}");
    let (_, t3) = set(&mut c, &q, "i", &["EVERY", "60000", "IMMEDIATELY", "JOB", "x", "{}"]);
    assert!(t3 >= t1 + 60_000, "{t3} after {t1}");
    // A pending job that already became ready stays when its scheduler goes.
    let (f, _) = set(&mut c, &q, "t", &["EVERY", "1000", "JOB", "x", "{}"]);
    assert_eq!(q.run(&mut c, "EMQ.PROMOTE", &f, &[]), Reply::Int(1));
    assert_eq!(sched(&mut c, &q, "t", &["DEL"]), Reply::Int(1));
    assert_eq!(job_field(&mut c, &q, &f, "st").as_deref(), Some("wait"));
    // And one that became ready in `prio`.
    let (g, _) = set(&mut c, &q, "u", &["EVERY", "1000", "JOB", "x", "{}", "PRIORITY", "5"]);
    assert_eq!(q.run(&mut c, "EMQ.PROMOTE", &g, &[]), Reply::Int(1));
    assert_eq!(sched(&mut c, &q, "u", &["DEL"]), Reply::Int(1));
    assert_eq!(job_field(&mut c, &q, &g, "st").as_deref(), Some("prio"));
    assert!(!c.call(&[b"ZSCORE", q.k("prio").as_bytes(), g.as_bytes()]).is_nil(), "still in prio");
}

/// A row that names the scheduler and says `delayed` (or `prio`) but is not in that set (a
/// keyspace changed by hand) is not its pending iteration: SET neither deletes nor moves it.
#[test]
fn upsert_leaves_a_row_its_set_does_not_hold() {
    let (_s, mut c, q) = queue_on_quiet_server("stray");
    let (a, _) = set(&mut c, &q, "s", &["EVERY", "60000", "JOB", "j", "{}"]);
    assert_eq!(c.call(&[b"ZREM", q.k("delayed").as_bytes(), a.as_bytes()]), Reply::Int(1));
    let before = c.call(&[b"HGETALL", q.job(&a).as_bytes()]);
    let r = sched(&mut c, &q, "s", &["SET", "EVERY", "7000", "JOB", "k", "{}"]);
    assert!(r.err().is_none(), "{r:?}");
    assert_eq!(c.call(&[b"HGETALL", q.job(&a).as_bytes()]), before, "the stray row as it was");
    assert_eq!(c.call(&[b"ZSCORE", q.k("delayed").as_bytes(), a.as_bytes()]), Reply::Nil);
    // The same for one promoted early to `prio` that `prio` (holding another job) does not hold.
    let (p, _) = set(&mut c, &q, "p", &["EVERY", "60000", "JOB", "j", "{}", "PRIORITY", "3"]);
    assert_eq!(q.run(&mut c, "EMQ.PROMOTE", &p, &[]), Reply::Int(1));
    assert_eq!(q.enqueue(&mut c, &jid(1), &[b"PRIORITY", b"1"]), Reply::Int(1));
    assert_eq!(c.call(&[b"ZREM", q.k("prio").as_bytes(), p.as_bytes()]), Reply::Int(1));
    let before = c.call(&[b"HGETALL", q.job(&p).as_bytes()]);
    let r = sched(&mut c, &q, "p", &["SET", "EVERY", "7000", "JOB", "k", "{}", "PRIORITY", "3"]);
    assert!(r.err().is_none(), "{r:?}");
    assert_eq!(c.call(&[b"HGETALL", q.job(&p).as_bytes()]), before, "the stray row as it was");
}

#[test]
fn list_pages_by_next_time_and_count_counts() {
    let s = Server::quiet();
    let mut c = s.conn();
    let q = Q::new("list");
    let now = server_ms(&mut c);
    for i in [3, 1, 4, 2, 5] {
        let start = (now + 100_000 * i).to_string();
        set(&mut c, &q, &format!("s{i}"), &["EVERY", "1000", "START", &start, "JOB", "j", "{}"]);
    }
    let ids = |r: &Reply| -> Vec<String> { r.array().iter().map(|m| pairs(m)["id"].clone()).collect() };
    assert_eq!(ids(&reads(&mut c, &q, &["LIST", "0", "-1"])), ["s1", "s2", "s3", "s4", "s5"]);
    assert_eq!(ids(&reads(&mut c, &q, &["LIST", "0", "-1", "DESC"])), ["s5", "s4", "s3", "s2", "s1"]);
    assert_eq!(ids(&reads(&mut c, &q, &["LIST", "1", "2"])), ["s2", "s3"]);
    assert_eq!(ids(&reads(&mut c, &q, &["LIST", "2", "2"])), ["s3"]);
    assert_eq!(ids(&reads(&mut c, &q, &["LIST", "-2", "-1"])), ["s4", "s5"]);
    assert!(reads(&mut c, &q, &["LIST", "7", "9"]).array().is_empty());
    assert_eq!(reads(&mut c, &q, &["COUNT"]), Reply::Int(5));
    assert_eq!(sched(&mut c, &q, "s3", &["DEL"]), Reply::Int(1));
    assert_eq!(reads(&mut c, &q, &["COUNT"]), Reply::Int(4));
    assert!(reads(&mut c, &q, &["GET", "s3"]).is_nil());
    assert_eq!(reads(&mut c, &Q::new("none"), &["COUNT"]), Reply::Int(0));
}

/// LIST answers at most 1 000 schedulers a call, from `start` on.
#[test]
fn list_answers_at_most_a_thousand_a_call() {
    let (_s, mut c, q) = queue_on_quiet_server("many");
    let cmds: Vec<Vec<Vec<u8>>> = (0..1001)
        .map(|i| set_cmd(&q, &format!("s{i:04}"), &["SET", "EVERY", "60000", "JOB", "j", "{}"]))
        .collect();
    assert!(c.pipeline(&cmds).iter().all(|r| r.err().is_none()));
    assert_eq!(reads(&mut c, &q, &["COUNT"]), Reply::Int(1001));
    assert_eq!(reads(&mut c, &q, &["LIST", "0", "-1"]).array().len(), 1000);
    assert_eq!(reads(&mut c, &q, &["LIST", "1", "1001"]).array().len(), 1000);
    assert_eq!(reads(&mut c, &q, &["LIST", "5", "-1"]).array().len(), 996);
}

#[test]
fn refusals_write_nothing() {
    let s = Server::quiet();
    let mut c = s.conn();
    let q = Q::new("refuse");
    set(&mut c, &q, "kept", &["EVERY", "1000", "JOB", "j", "{}"]);
    let now = server_ms(&mut c);
    let past = (now - 1000).to_string();
    let later = (now + 100_000).to_string();
    let long = "x".repeat(201);
    let sooner = (now + 50_000).to_string();
    let cases: Vec<(&str, Vec<&str>, &str)> = vec![
        ("kept", vec!["SET", "PATTERN", "61 * * * * *", "JOB", "j", "{}"], "EMQARG"),
        ("kept", vec!["SET", "PATTERN", "* * *", "JOB", "j", "{}"], "EMQARG"),
        ("kept", vec!["SET", "PATTERN", "0 0 30 2 *", "JOB", "j", "{}"], "EMQARG"),
        ("kept", vec!["SET", "PATTERN", "0 * * * *", "TZ", "Mars/Olympus", "JOB", "j", "{}"], "EMQARG"),
        ("kept", vec!["SET", "EVERY", "0", "JOB", "j", "{}"], "EMQARG"),
        ("kept", vec!["SET", "EVERY", "100", "OFFSET", "100", "JOB", "j", "{}"], "EMQARG"),
        ("kept", vec!["SET", "EVERY", "100", "END", &past, "JOB", "j", "{}"], "EMQARG"),
        ("kept", vec!["SET", "EVERY", "100", "START", &later, "END", &sooner, "JOB", "j", "{}"], "EMQARG"),
        ("kept", vec!["SET", "EVERY", "100", "LIMIT", "0", "JOB", "j", "{}"], "EMQARG"),
        ("kept", vec!["SET", "EVERY", "100", "JOB", "", "{}"], "EMQARG"),
        ("kept", vec!["SET", "EVERY", "100", "JOB", "j", "{}", "PRIORITY", "99999999"], "EMQARG"),
        ("kept", vec!["SET", "EVERY", "100", "PATTERN", "* * * * *", "JOB", "j", "{}"], "EMQSHAPE"),
        ("kept", vec!["SET", "JOB", "j", "{}"], "EMQSHAPE"),
        ("kept", vec!["SET", "EVERY", "100", "TZ", "UTC", "JOB", "j", "{}"], "EMQSHAPE"),
        ("kept", vec!["SET", "PATTERN", "* * * * *", "OFFSET", "1", "JOB", "j", "{}"], "EMQSHAPE"),
        ("kept", vec!["SET", "EVERY", "100", "IMMEDIATELY", "START", &later, "JOB", "j", "{}"], "EMQARG"),
        ("kept", vec!["SET", "EVERY", "100"], "EMQSHAPE"),
        ("kept", vec!["SET", "EVERY", "x", "JOB", "j", "{}"], "EMQSHAPE"),
        ("kept", vec!["SET", "EVERY", "100", "EVERY", "100", "JOB", "j", "{}"], "EMQSHAPE"),
        ("kept", vec!["SET", "EVERY", "100", "JOB", "j", "{}", "LIFO"], "EMQSHAPE"),
        ("kept", vec!["SET", "EVERY", "100", "JOB", "j"], "EMQSHAPE"),
        ("kept", vec!["PUT"], "EMQSHAPE"),
        ("kept", vec!["PUT", "EVERY", "100", "JOB", "j", "{}"], "EMQSHAPE"),
        ("kept", vec!["DEL", "x"], "EMQSHAPE"),
        (&long, vec!["SET", "EVERY", "100", "JOB", "j", "{}"], "EMQARG"),
        (&long, vec!["DEL"], "EMQARG"),
    ];
    for (id, args, class) in cases {
        let r = unchanged(&mut c, |c| sched(c, &q, id, &args));
        assert!(r.err().is_some_and(|e| e.starts_with(class)), "{args:?}: {r:?}, want {class}");
    }
    // Layout, numkeys and the read command's shape.
    let mut bad = set_cmd(&q, "kept", &["DEL"]);
    bad[3] = b"emq:{refuse}:wait".to_vec();
    let r = unchanged(&mut c, |c| c.call_v(&bad));
    assert!(r.error().starts_with("EMQLAYOUT"), "{r:?}");
    for args in [&["LIST", "0"][..], &["SIZE"], &["PAGE", "0", "1"], &["GET"]] {
        let r = reads(&mut c, &q, args);
        assert!(r.error().starts_with("EMQSHAPE"), "{args:?}: {r:?}");
    }
    // A wrong type under a declared key: WRONGTYPE, nothing written.
    c.call(&[b"SET", q.k("scheds").as_bytes(), b"x"]);
    let r = unchanged(&mut c, |c| sched(c, &q, "other", &["SET", "EVERY", "100", "JOB", "j", "{}"]));
    assert!(r.error().starts_with("WRONGTYPE"), "{r:?}");
}

/// After downtime a scheduler makes its one late iteration, then goes on from the present:
/// never one job per missed window.
#[test]
fn after_downtime_one_late_iteration_not_a_burst() {
    let s = Server::start(Opts { server_args: vec!["--appendonly".into(), "yes".into()], ..Opts::default() });
    let mut c = s.conn();
    assert_eq!(c.call(&[b"EMQ.INSTALL", b"1", b"{emq}:version"]), Reply::Int(1));
    let q = Q::new("down");
    set(&mut c, &q, "s", &["EVERY", "100", "JOB", "j", "{}"]);
    wait_for(|| get(&mut c, &q, "s").is_some_and(|g| num(&g, "count") >= 3), "three iterations");
    // Down: upkeep off, then the server killed and started again from its AOF.
    c.call(&[b"CONFIG", b"SET", b"trafikey.upkeep", b"no"]);
    let before = iterations(&mut c, &q);
    let pending = score(&mut c, &q, "s").unwrap();
    let down = server_ms(&mut c);
    sleep(Duration::from_millis(1000));
    let s = s.restart();
    let mut c = s.conn();
    wait_for(|| info_field(&mut c, "persistence", "loading") == "0", "aof load");
    let back = down + 1000;
    wait_for(|| iterations(&mut c, &q).len() > before.len() + 1, "two more iterations");
    let after = iterations(&mut c, &q);
    // The iteration due in the downtime is made once, late and ready; the one after it is in
    // the present, not in the gap.
    let made: Vec<(i64, &String)> =
        after.iter().filter(|(k, _)| !before.contains_key(*k)).map(|((_, t), (id, _))| (*t, id)).collect();
    assert_eq!(made[0].0, pending, "{made:?}");
    let late = job_map(&mut c, &q, made[0].1);
    assert!(late["created"].parse::<i64>().unwrap() >= back, "made after the restart");
    assert_ne!(late["state"], "delayed", "the late one is ready");
    assert!(made[1..].iter().all(|(t, _)| *t > back), "no more in the downtime: {made:?} (back at {back})");
}

/// A scheduler firing across a failover: the replica holds the primary's keyspace (digests
/// equal), the promoted replica goes on from the pending iteration it holds — nothing made
/// twice, nothing missed — and its AOF replays to the same digest.
#[test]
fn a_failover_carries_a_scheduler_on_with_nothing_doubled_or_missed() {
    let primary = Server::installed();
    let mut p = primary.conn();
    let replica =
        Server::start(Opts { server_args: vec!["--appendonly".into(), "yes".into()], ..Opts::default() });
    let mut r = replica.follow(&primary);
    let q = Q::new("fo");
    set(&mut p, &q, "a", &["EVERY", "100", "JOB", "j", "{}"]);
    set(&mut p, &q, "b", &["PATTERN", "* * * * * *", "JOB", "k", "{}"]);
    wait_for(|| get(&mut p, &q, "a").is_some_and(|g| num(&g, "count") >= 5), "iterations on the primary");
    // Freeze the primary's upkeep so that the two can be compared at one point.
    p.call(&[b"CONFIG", b"SET", b"trafikey.upkeep", b"no"]);
    assert_eq!(p.call(&[b"WAIT", b"1", b"2000"]), Reply::Int(1));
    wait_for(|| digest(&mut p) == digest(&mut r), "the replica's digest");
    let on_primary = iterations(&mut p, &q);
    let pending: Vec<i64> = ["a", "b"].iter().map(|s| num(&get(&mut p, &q, s).unwrap(), "next")).collect();
    drop(p);
    drop(primary);
    assert_eq!(r.call(&[b"REPLICAOF", b"NO", b"ONE"]), Reply::Simple("OK".into()));
    wait_for(
        || get(&mut r, &q, "a").is_some_and(|g| num(&g, "count") as usize >= on_primary.len() + 3),
        "iterations on the new primary",
    );
    r.call(&[b"CONFIG", b"SET", b"trafikey.upkeep", b"no"]);
    let on_new = iterations(&mut r, &q);
    for (k, v) in &on_primary {
        assert_eq!(on_new.get(k).map(|v| &v.0), Some(&v.0), "iteration {k:?} kept with its job");
    }
    for (s, pend) in ["a", "b"].iter().zip(&pending) {
        let times: Vec<i64> = on_new.keys().filter(|(x, _)| x == s).map(|(_, t)| *t).collect();
        let g = get(&mut r, &q, s).unwrap();
        assert_eq!(times.len() as i64, num(&g, "count"), "{s}: one job per iteration made: {times:?}");
        assert!(times.contains(pend), "{s}: the pending iteration at the failover ran: {times:?}");
        let step = if *s == "a" { 100 } else { 1000 };
        assert!(times.windows(2).all(|w| w[1] > w[0] && (w[1] - w[0]) % step == 0), "{s}: {times:?}");
    }
    // The new primary's AOF replays to the same keyspace. The schedulers are deleted first
    // (their pending jobs with them): the restarted server's upkeep runs before a test can
    // turn it off, and must find nothing due.
    for s in ["a", "b"] {
        assert_eq!(sched(&mut r, &q, s, &["DEL"]), Reply::Int(1));
    }
    let want = digest(&mut r);
    drop(r);
    let replica = replica.restart();
    let mut c = replica.conn();
    wait_for(|| info_field(&mut c, "persistence", "loading") == "0", "aof load");
    c.call(&[b"CONFIG", b"SET", b"trafikey.upkeep", b"no"]);
    assert_eq!(digest(&mut c), want, "AOF replay");
}

/// Many schedulers, workers taking their iterations: each iteration is made once (one job per
/// (scheduler, time), as many as each scheduler counts), and its custom id names its job.
#[test]
fn many_schedulers_make_each_iteration_exactly_once() {
    let s = Server::installed();
    let mut c = s.conn();
    let q = Q::new("many");
    for i in 0..40 {
        let every = (50 + 7 * i).to_string();
        set(&mut c, &q, &format!("s{i}"), &["EVERY", &every, "JOB", "j", "{}"]);
    }
    let mut w = s.conn();
    let mut taken = BTreeSet::new();
    while taken.len() < 300 {
        for id in claim_block(&mut w, &q, "w", "5000") {
            assert!(taken.insert(id.clone()), "{id} handed out twice");
            complete(&q, &mut w, &id, "w", &[b"KEEP", b"-1"]);
        }
    }
    c.call(&[b"CONFIG", b"SET", b"trafikey.upkeep", b"no"]);
    let its = iterations(&mut c, &q);
    for i in 0..40 {
        let sid = format!("s{i}");
        let g = get(&mut c, &q, &sid).unwrap();
        let mine: Vec<_> = its.iter().filter(|((x, _), _)| *x == sid).collect();
        assert_eq!(mine.len() as i64, num(&g, "count"), "{sid}");
        for ((_, t), (id, _)) in mine {
            assert_eq!(alias_of(&mut c, &q, &format!("repeat:{sid}:{t}")).as_deref(), Some(id.as_str()));
        }
    }
    q.check_invariant(&mut c);
}

/// Upkeep's timer stays one timer: making an iteration inside a tick notes its time for the
/// tick's own answer, and arms nothing more (a second timer per iteration would make the
/// ticks grow with the iterations made).
#[test]
fn iterations_do_not_multiply_upkeeps_ticks() {
    let s = Server::installed();
    let mut c = s.conn();
    let q = Q::new("ticks");
    let ticks = |c: &mut Conn| info_field(c, "trafikey", "trafikey_upkeep_ticks").parse::<i64>().unwrap();
    let made = |c: &mut Conn| info_field(c, "trafikey", "trafikey_upkeep_iterations").parse::<i64>().unwrap();
    set(&mut c, &q, "s", &["EVERY", "20", "JOB", "j", "{}"]);
    wait_for(|| made(&mut c) >= 5, "five iterations");
    let (t0, m0) = (ticks(&mut c), made(&mut c));
    wait_for(|| made(&mut c) >= m0 + 60, "sixty more");
    let (t1, m1) = (ticks(&mut c), made(&mut c));
    assert!(t1 - t0 <= 3 * (m1 - m0) + 20, "{} ticks for {} iterations", t1 - t0, m1 - m0);
}

/// The keys TRA.SCHEDULER finds (the pending job's row, the alias hash) and TRA.SCHEDULERS
/// finds (the scheduler hashes) are judged as the caller's: a user granted only the declared
/// keys gets NOPERM and nothing is written; granted the rows and the alias hash too, it works.
#[test]
fn found_keys_are_judged_as_the_callers() {
    let s = Server::quiet();
    let mut c = s.conn();
    let q = Q::new("acl");
    let user = |c: &mut Conn, keys: &[&str]| {
        let mut v: Vec<&[u8]> =
            vec![b"ACL", b"SETUSER", b"u", b"on", b">pw", b"-@all", b"+@emq", b"resetkeys"];
        v.push(b"%R~{emq}:*");
        v.extend(keys.iter().map(|k| k.as_bytes()));
        assert!(c.call(&v).err().is_none());
    };
    let declared = ["~emq:{acl}:sched:*", "~emq:{acl}:scheds", "~emq:{acl}:delayed", "~emq:{acl}:events"];
    user(&mut c, &declared);
    let mut u = s.conn();
    assert_eq!(u.call(&[b"AUTH", b"u", b"pw"]), Reply::Simple("OK".into()));
    let r = unchanged(&mut c, |_| sched(&mut u, &q, "s", &["SET", "EVERY", "1000", "JOB", "j", "{}"]));
    assert_eq!(r.error(), "NOPERM No permissions to access a key");
    // The read command finds the hash only when the zset names it: set one up as the admin.
    set(&mut c, &q, "s", &["EVERY", "1000", "JOB", "j", "{}"]);
    user(&mut c, &["~emq:{acl}:scheds"]);
    assert_eq!(reads(&mut u, &q, &["COUNT"]), Reply::Int(1));
    assert_eq!(reads(&mut u, &q, &["GET", "s"]).error(), "NOPERM No permissions to access a key");
    let mut all = declared.to_vec();
    all.extend(["~emq:{acl}:job:*", "~emq:{acl}:alias", "~emq:{acl}:log:*"]);
    user(&mut c, &all);
    let r = sched(&mut u, &q, "s", &["SET", "EVERY", "2000", "JOB", "j", "{}"]);
    assert!(r.err().is_none(), "{r:?}");
    assert_eq!(num(&get(&mut u, &q, "s").unwrap(), "every"), 2000);
}

/// `TRA.DRAIN … args`.
fn drain(c: &mut Conn, q: &Q, args: &[&[u8]]) -> Reply {
    let v = q.cmd("TRA.DRAIN", "", &["wait", "prio", "delayed", "events"], args);
    c.call_v(&v)
}

/// `TRA.OBLITERATE … FORCE COUNT n`.
fn obliterate(c: &mut Conn, q: &Q, n: usize) -> Reply {
    let all = ["wait", "prio", "active", "delayed", "completed", "failed", "meta", "events"];
    let n = n.to_string();
    let v = q.cmd("TRA.OBLITERATE", "", &all, &[b"FORCE", b"COUNT", n.as_bytes()]);
    c.call_v(&v)
}

/// DRAIN keeps every scheduler's pending iteration — delayed, or promoted early to `wait` or
/// `prio` — and passes over it: COUNT counts the jobs deleted, so a pending iteration at the
/// front of `wait` never stops a drain early, and `wait` keeps its order.
#[test]
fn drain_keeps_pending_iterations_wherever_they_wait() {
    let s = Server::quiet();
    let mut c = s.conn();
    let q = Q::new("drain");
    let start = (server_ms(&mut c) + 600_000).to_string();
    let every = ["EVERY", "60000", "START", start.as_str()];
    let with =
        |tail: &[&'static str]| -> Vec<&str> { every.iter().copied().chain(tail.iter().copied()).collect() };
    assert_eq!(q.enqueue(&mut c, &jid(1), &[]), Reply::Int(1));
    let (in_wait, _) = set(&mut c, &q, "w", &with(&["JOB", "a", "{}"]));
    assert_eq!(q.run(&mut c, "EMQ.PROMOTE", &in_wait, &[]), Reply::Int(1));
    assert_eq!(q.enqueue(&mut c, &jid(2), &[]), Reply::Int(1));
    assert_eq!(q.enqueue(&mut c, &jid(3), &[b"PRIORITY", b"1"]), Reply::Int(1));
    let (in_prio, _) = set(&mut c, &q, "p", &with(&["JOB", "b", "{}", "PRIORITY", "3"]));
    assert_eq!(q.run(&mut c, "EMQ.PROMOTE", &in_prio, &[]), Reply::Int(1));
    let (in_delayed, _) = set(&mut c, &q, "d", &with(&["JOB", "c", "{}"]));
    let far = (server_ms(&mut c) + 600_000).to_string();
    assert_eq!(q.run(&mut c, "EMQ.SCHEDULE", &jid(4), &[far.as_bytes(), b"j", b"{}"]), Reply::Int(1));
    assert_eq!(q.enqueue(&mut c, &jid(5), &[]), Reply::Int(1));
    let wait_of = |c: &mut Conn| c.call(&[b"LRANGE", q.k("wait").as_bytes(), b"0", b"-1"]);
    let before: Vec<String> = wait_of(&mut c).array().iter().map(Reply::str).collect();
    assert_eq!(before.len(), 4);
    let scheds = |c: &mut Conn| (["w", "p", "d"].map(|s| get(c, &q, s)), reads(c, &q, &["LIST", "0", "-1"]));
    let kept = scheds(&mut c);
    // Refusals write nothing.
    unchanged(&mut c, |c| assert!(drain(c, &q, &[b"COUNT", b"0"]).error().starts_with("EMQARG")));
    // One a call, until none but the pending iterations is left; the first takes the front
    // of `wait` (its tail) that is not pending, the rest keeps its order.
    assert_eq!(drain(&mut c, &q, &[b"COUNT", b"1"]), Reply::Int(1));
    let front = before.iter().rev().find(|id| **id != in_wait).unwrap().clone();
    let rest: Vec<String> = before.iter().filter(|id| **id != front).cloned().collect();
    assert_eq!(wait_of(&mut c).array().iter().map(Reply::str).collect::<Vec<_>>(), rest);
    let mut deleted = 1;
    loop {
        match drain(&mut c, &q, &[b"DELAYED", b"COUNT", b"1"]) {
            Reply::Int(0) => break,
            Reply::Int(1) => deleted += 1,
            r => panic!("{r:?}"),
        }
    }
    assert_eq!(deleted, 5, "three in wait, one in prio, one delayed");
    assert_eq!(
        wait_of(&mut c).array().iter().map(Reply::str).collect::<Vec<_>>(),
        std::slice::from_ref(&in_wait)
    );
    let prio = c.call(&[b"ZRANGE", q.k("prio").as_bytes(), b"0", b"-1"]);
    assert_eq!(prio.array().iter().map(Reply::str).collect::<Vec<_>>(), std::slice::from_ref(&in_prio));
    let delayed = c.call(&[b"ZRANGE", q.k("delayed").as_bytes(), b"0", b"-1"]);
    assert_eq!(delayed.array().iter().map(Reply::str).collect::<Vec<_>>(), std::slice::from_ref(&in_delayed));
    assert_eq!(kept, scheds(&mut c), "the schedulers are as they were");
    for id in [&in_wait, &in_prio, &in_delayed] {
        assert!(job_field(&mut c, &q, id, "rs").is_some(), "{id} kept with its row");
    }
    // Without DELAYED, with a large COUNT: the pending iterations in wait stay, in their
    // order, among the jobs deleted around them.
    assert_eq!(q.enqueue(&mut c, &jid(6), &[]), Reply::Int(1));
    let (in_wait2, _) = set(&mut c, &q, "w2", &with(&["JOB", "e", "{}"]));
    assert_eq!(q.run(&mut c, "EMQ.PROMOTE", &in_wait2, &[]), Reply::Int(1));
    assert_eq!(q.enqueue(&mut c, &jid(7), &[]), Reply::Int(1));
    let pending: Vec<String> = wait_of(&mut c)
        .array()
        .iter()
        .map(Reply::str)
        .filter(|id| *id == in_wait || *id == in_wait2)
        .collect();
    assert_eq!(pending.len(), 2);
    assert_eq!(drain(&mut c, &q, &[]), Reply::Int(2));
    assert_eq!(wait_of(&mut c).array().iter().map(Reply::str).collect::<Vec<_>>(), pending);
    assert_eq!(drain(&mut c, &q, &[b"DELAYED"]), Reply::Int(0));
    q.check_invariant(&mut c);
}

/// An iteration whose time came and whose successor was made is no longer pending: DRAIN
/// deletes it (the successor, delayed, stays).
#[test]
fn drain_deletes_an_iteration_that_is_no_longer_pending() {
    let s = Server::quiet();
    let mut c = s.conn();
    let q = Q::new("drained");
    let start = (server_ms(&mut c) + 600_000).to_string();
    let (first, _) = set(&mut c, &q, "s", &["EVERY", "60000", "START", &start, "JOB", "j", "{}"]);
    assert_eq!(q.run(&mut c, "EMQ.PROMOTE", &first, &[]), Reply::Int(1));
    assert_eq!(claim_all(&q, &mut c, "w"), std::slice::from_ref(&first));
    let second = get(&mut c, &q, "s").unwrap()["job"].clone();
    assert_eq!(q.run(&mut c, "EMQ.FAIL", &first, &[b"w", b"boom", b"RETRY"]), Reply::Simple("retry".into()));
    assert_eq!(drain(&mut c, &q, &[b"DELAYED"]), Reply::Int(1));
    assert_eq!(job_field(&mut c, &q, &first, "st"), None);
    assert_eq!(job_field(&mut c, &q, &second, "st").as_deref(), Some("delayed"));
}

/// OBLITERATE deletes the queue's schedulers — each `sched:<id>` hash and `scheds` — first,
/// within its COUNT budget (one key a scheduler), then the jobs; the reply counts what is left.
/// A caller who may not touch the scheduler hashes is refused, and nothing is written.
#[test]
fn obliterate_deletes_the_schedulers_within_its_budget() {
    let s = Server::quiet();
    let mut c = s.conn();
    let q = Q::new("gone");
    for sid in ["a", "b", "c"] {
        set(&mut c, &q, sid, &["EVERY", "60000", "JOB", "j", "{}"]);
    }
    assert_eq!(q.enqueue(&mut c, &jid(1), &[]), Reply::Int(1));
    assert_eq!(reads(&mut c, &q, &["COUNT"]), Reply::Int(3));
    // Refused as the caller: scheds readable, the hashes not writable.
    let user = &[
        &b"ACL"[..],
        b"SETUSER",
        b"u",
        b"on",
        b">pw",
        b"-@all",
        b"+@emq",
        b"resetkeys",
        b"%R~{emq}:*",
        b"~emq:{gone}:wait",
        b"~emq:{gone}:prio",
        b"~emq:{gone}:active",
        b"~emq:{gone}:delayed",
        b"~emq:{gone}:completed",
        b"~emq:{gone}:failed",
        b"~emq:{gone}:meta",
        b"~emq:{gone}:events",
        b"~emq:{gone}:job:*",
        b"~emq:{gone}:log:*",
        b"~emq:{gone}:alias",
        b"~emq:{gone}:scheds",
        b"%R~emq:{gone}:sched:*",
    ];
    assert!(c.call(user).err().is_none());
    let mut u = s.conn();
    assert_eq!(u.call(&[b"AUTH", b"u", b"pw"]), Reply::Simple("OK".into()));
    let r = unchanged(&mut c, |_| obliterate(&mut u, &q, 1000));
    assert_eq!(r.error(), "NOPERM No permissions to access a key");
    // COUNT 2: two schedulers go; the third, four jobs (one row each) and the queue's keys are left.
    let left = obliterate(&mut c, &q, 2).int();
    assert_eq!(reads(&mut c, &q, &["COUNT"]), Reply::Int(1));
    assert_eq!(c.call(&[b"KEYS", format!("emq:{{{}}}:sched:*", q.0).as_bytes()]).array().len(), 1);
    assert!(left > 5, "{left}");
    while obliterate(&mut c, &q, 2).int() > 0 {}
    assert_eq!(reads(&mut c, &q, &["COUNT"]), Reply::Int(0));
    let keys = c.call(&[b"KEYS", format!("emq:{{{}}}:*", q.0).as_bytes()]);
    assert!(keys.array().is_empty(), "{keys:?}");
}

/// SET replaces a pending iteration promoted early to `wait` or `prio` as it replaces a delayed
/// one (event `removed` with its state, the new one delayed at the kept time); DEL leaves such
/// a job to run.
#[test]
fn upsert_replaces_a_pending_iteration_that_became_ready_early() {
    let s = Server::quiet();
    let mut c = s.conn();
    let q = Q::new("ready");
    // A field of a client's own in `meta`: the queue is not paused for it.
    c.call(&[b"HSET", q.k("meta").as_bytes(), b"app:owner", b"billing"]);
    let start = (server_ms(&mut c) + 600_000).to_string();
    for (sid, prio, set_name, state) in [("w", None, "wait", "wait"), ("p", Some("4"), "prio", "prio")] {
        let mut args = vec!["EVERY", "60000", "START", start.as_str(), "JOB", "j", "{}"];
        args.extend(prio.map(|p| ["PRIORITY", p]).into_iter().flatten());
        let (old, at) = set(&mut c, &q, sid, &args);
        assert_eq!(q.run(&mut c, "EMQ.PROMOTE", &old, &[]), Reply::Int(1));
        assert_eq!(job_field(&mut c, &q, &old, "st").as_deref(), Some(state));
        let (new, again) = set(&mut c, &q, sid, &args);
        assert_eq!(again, at, "{sid}: the same rule keeps its time");
        assert_ne!(new, old);
        assert_eq!(job_field(&mut c, &q, &old, "st"), None, "{sid}: the ready one is replaced");
        assert_eq!(job_field(&mut c, &q, &new, "st").as_deref(), Some("delayed"));
        let k = q.k(set_name);
        let members = if set_name == "wait" {
            c.call(&[b"LRANGE", k.as_bytes(), b"0", b"-1"])
        } else {
            c.call(&[b"ZRANGE", k.as_bytes(), b"0", b"-1"])
        };
        assert!(members.array().is_empty(), "{sid}: {members:?}");
        assert_eq!(num(&get(&mut c, &q, sid).unwrap(), "count"), 1, "the count is kept");
        let ev = c.call(&[b"XRANGE", q.k("events").as_bytes(), b"-", b"+"]);
        let removed: Vec<Vec<String>> =
            ev.array().iter().map(|e| e.array()[1].strings()).filter(|f| f[1] == "removed").collect();
        assert_eq!(removed.last().unwrap()[2..6], ["id", old.as_str(), "prev", state]);
    }
    q.check_invariant(&mut c);
    // A paused queue's ready iteration is left to run on resume; the scheduler goes on from it.
    let (z, zt) = set(&mut c, &q, "z", &["EVERY", "60000", "START", &start, "JOB", "z", "{}"]);
    assert_eq!(q.run(&mut c, "EMQ.PROMOTE", &z, &[]), Reply::Int(1));
    assert_eq!(q.run(&mut c, "EMQ.CLAIM", "", &[b"PAUSE"]), Reply::Int(1));
    let (z2, zt2) = set(&mut c, &q, "z", &["EVERY", "60000", "START", &start, "JOB", "z", "{}"]);
    assert_eq!(job_field(&mut c, &q, &z, "st").as_deref(), Some("wait"));
    assert_eq!((zt2, job_field(&mut c, &q, &z2, "st").as_deref()), (zt + 60000, Some("delayed")));
    assert_eq!(q.run(&mut c, "EMQ.CLAIM", "", &[b"RESUME"]), Reply::Int(1));
    // DEL leaves a pending iteration that became ready to run.
    let (g, _) = set(&mut c, &q, "g", &["EVERY", "60000", "START", &start, "JOB", "x", "{}"]);
    assert_eq!(q.run(&mut c, "EMQ.PROMOTE", &g, &[]), Reply::Int(1));
    assert_eq!(sched(&mut c, &q, "g", &["DEL"]), Reply::Int(1));
    assert_eq!(job_field(&mut c, &q, &g, "st").as_deref(), Some("wait"));
}

/// With its pending iteration removed (TRA.REMOVE), SET of the same scheduler goes on after
/// the last iteration made rather than making that time again.
#[test]
fn upsert_after_its_pending_iteration_was_removed_goes_on_after_it() {
    let (_s, mut c, q) = queue_on_quiet_server("gone");
    let (first, at) = set(&mut c, &q, "s", &["PATTERN", "0 0 1 1 *", "JOB", "j", "{}"]);
    assert_eq!(q.run(&mut c, "TRA.REMOVE", &first, &[]), Reply::Int(1));
    let (next, again) = set(&mut c, &q, "s", &["PATTERN", "0 0 1 1 *", "JOB", "j", "{}"]);
    assert_ne!(next, first);
    assert!(again > at, "{again} after {at}");
}

/// A PATTERN scheduler set again while its first time's iteration is still held (taken, not
/// finished: the scheduler was deleted and set again) is refused, nothing written; EVERY
/// passes over such a time.
#[test]
fn upsert_of_a_pattern_whose_iteration_is_held_is_refused() {
    let s = Server::quiet();
    let mut c = s.conn();
    let q = Q::new("held");
    let (first, at) = set(&mut c, &q, "s", &["PATTERN", "0 0 1 1 *", "JOB", "j", "{}"]);
    assert_eq!(q.run(&mut c, "EMQ.PROMOTE", &first, &[]), Reply::Int(1));
    assert_eq!(claim_all(&q, &mut c, "w"), std::slice::from_ref(&first));
    assert_eq!(sched(&mut c, &q, "s", &["DEL"]), Reply::Int(1));
    let r = unchanged(&mut c, |c| sched(c, &q, "s", &["SET", "PATTERN", "0 0 1 1 *", "JOB", "j", "{}"]));
    assert_eq!(r.error(), format!("EMQSTATE iteration repeat:s:{at} already exists"));
    assert!(get(&mut c, &q, "s").is_none());
    // Finished, the id is free again.
    assert_eq!(complete(&q, &mut c, &first, "w", &[b"KEEP", b"0"]), Reply::Int(1));
    let (_, again) = set(&mut c, &q, "s", &["PATTERN", "0 0 1 1 *", "JOB", "j", "{}"]);
    assert_eq!(again, at);
    // EVERY: the held time is passed over.
    let start = (server_ms(&mut c) + 600_000).to_string();
    let (e, et) = set(&mut c, &q, "e", &["EVERY", "60000", "START", &start, "JOB", "j", "{}"]);
    assert_eq!(q.run(&mut c, "EMQ.PROMOTE", &e, &[]), Reply::Int(1));
    assert_eq!(claim_all(&q, &mut c, "w"), [e]);
    assert_eq!(sched(&mut c, &q, "e", &["DEL"]), Reply::Int(1));
    let (_, next) = set(&mut c, &q, "e", &["EVERY", "60000", "START", &start, "JOB", "j", "{}"]);
    assert_eq!(next, et + 60000);
}
