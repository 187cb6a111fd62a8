//! A queue's rate limit and global concurrency (`TRA.LIMIT`, `TRA.LIMITS`) against a real
//! server: windows across claims and COUNT, their reopening, FOR and CLEAR, concurrency across
//! workers, BLOCK waiters woken when the window reopens (by upkeep) and when an active job
//! leaves, the readings, refusals that write nothing, and replicas and the AOF holding what
//! the primary holds.
// A test may panic: that is how it fails. The module's own rules are for src/.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

use std::collections::HashMap;

use trafikey_support::*;

fn limit(c: &mut Conn, q: &Q, args: &[&str]) -> Reply {
    let meta = q.k("meta");
    let mut v: Vec<&[u8]> = vec![b"TRA.LIMIT", b"1", meta.as_bytes()];
    v.extend(args.iter().map(|a| a.as_bytes()));
    c.call(&v)
}

/// TRA.LIMITS as a map of name to reply.
fn limits(c: &mut Conn, q: &Q) -> HashMap<String, Reply> {
    let (meta, active) = (q.k("meta"), q.k("active"));
    let r = c.call(&[b"TRA.LIMITS", b"2", meta.as_bytes(), active.as_bytes()]);
    let a = r.array();
    let names: Vec<String> = a.chunks(2).map(|p| p[0].str()).collect();
    assert_eq!(names, ["rate-max", "rate-ms", "concurrency", "count", "window", "hold", "ttl", "active"]);
    a.chunks(2).map(|p| (p[0].str(), p[1].clone())).collect()
}

fn int(m: &HashMap<String, Reply>, f: &str) -> i64 {
    m[f].int()
}

fn claim(c: &mut Conn, q: &Q, token: &str, count: usize) -> Vec<String> {
    let n = count.to_string();
    let r = q.run(c, "EMQ.CLAIM", "", &[token.as_bytes(), b"60000", b"COUNT", n.as_bytes()]);
    assert!(r.err().is_none(), "{r:?}");
    r.array().iter().map(|j| j.array()[0].str()).collect()
}

fn fill(c: &mut Conn, q: &Q, n: u64) {
    for i in 1..=n {
        assert_eq!(q.enqueue(c, &jid(i), &[]), Reply::Int(1));
    }
}

fn send_claim(c: &mut Conn, q: &Q, token: &str, block_ms: &str) {
    let v = q.cmd(
        "EMQ.CLAIM",
        "",
        &keys_of("EMQ.CLAIM"),
        &[token.as_bytes(), b"60000", b"BLOCK", block_ms.as_bytes()],
    );
    let refs: Vec<&[u8]> = v.iter().map(Vec::as_slice).collect();
    c.send(&refs).expect("send");
}

fn blocked(c: &mut Conn, n: usize) {
    wait_for(
        || info_field(c, "clients", "blocked_clients") == n.to_string(),
        &format!("{n} blocked clients"),
    );
}

#[test]
fn a_window_hands_out_at_most_max_across_claims_and_count() {
    let s = Server::quiet();
    let mut c = s.conn();
    let q = Q::new("rate");
    fill(&mut c, &q, 10);
    assert_eq!(limit(&mut c, &q, &["RATE", "3", "600000"]), Reply::Int(1));
    let m = limits(&mut c, &q);
    assert_eq!((int(&m, "rate-max"), int(&m, "rate-ms")), (3, 600000));
    assert!(m["concurrency"].is_nil());
    assert_eq!((int(&m, "count"), int(&m, "window"), int(&m, "hold"), int(&m, "ttl")), (0, -2, -2, 0));
    // COUNT 2 then COUNT 5: the window's three, then nothing.
    assert_eq!(claim(&mut c, &q, "w", 2), [jid(1), jid(2)]);
    let m = limits(&mut c, &q);
    assert_eq!(int(&m, "count"), 2);
    assert!((1..=600000).contains(&int(&m, "window")));
    assert_eq!(int(&m, "ttl"), 0, "one more may be claimed");
    assert_eq!(claim(&mut c, &q, "w", 5), [jid(3)]);
    assert!(claim(&mut c, &q, "x", 5).is_empty());
    let m = limits(&mut c, &q);
    assert_eq!(int(&m, "count"), 3);
    assert_eq!(int(&m, "active"), 3);
    assert!(int(&m, "ttl") > 0 && int(&m, "ttl") == int(&m, "window"), "{m:?}");
    // The window is the queue's, not the worker's; completing frees nothing.
    assert_eq!(complete(&q, &mut c, &jid(1), "w", &[]), Reply::Int(1));
    assert!(claim(&mut c, &q, "w", 1).is_empty());
    // TRA.COMPLETENEXT's claim obeys it too: it finishes, and takes nothing.
    let r = q.run(&mut c, "TRA.COMPLETENEXT", &jid(2), &[b"w", b"ok", b"60000", b"COUNT", b"3"]);
    assert_eq!(r.array()[0], Reply::Int(1));
    assert!(r.array()[1].array().is_empty(), "{r:?}");
    // CLEAR: the window reopens now and a new one opens with the next claim.
    assert_eq!(limit(&mut c, &q, &["CLEAR"]), Reply::Int(1));
    assert_eq!(limit(&mut c, &q, &["CLEAR"]), Reply::Int(0));
    let r = q.run(&mut c, "TRA.COMPLETENEXT", &jid(3), &[b"w", b"ok", b"60000", b"COUNT", b"5"]);
    assert_eq!(r.array()[1].array().len(), 3);
    assert_eq!(int(&limits(&mut c, &q), "count"), 3);
    assert_eq!(q.snapshot(&mut c).sets["active"].len(), 3);
    // RATE OFF: unlimited again, the window forgotten.
    assert_eq!(limit(&mut c, &q, &["RATE", "OFF"]), Reply::Int(1));
    assert_eq!(limit(&mut c, &q, &["RATE", "OFF"]), Reply::Int(0));
    assert_eq!(claim(&mut c, &q, "w", 10).len(), 4);
    let m = limits(&mut c, &q);
    assert!(m["rate-max"].is_nil() && m["rate-ms"].is_nil());
    assert_eq!((int(&m, "count"), int(&m, "window"), int(&m, "ttl")), (0, -2, 0));
    q.check_invariant(&mut c);
    assert_eq!(c.call(&[b"EXISTS", q.k("meta").as_bytes()]), Reply::Int(0), "nothing left in meta");
}

#[test]
fn a_window_reopens_at_its_end() {
    let s = Server::quiet();
    let mut c = s.conn();
    let q = Q::new("reopen");
    fill(&mut c, &q, 5);
    limit(&mut c, &q, &["RATE", "2", "150"]);
    assert_eq!(claim(&mut c, &q, "w", 5).len(), 2);
    // The next window opens with the first claim after this one ended: two more, then none.
    let mut got = Vec::new();
    wait_for(
        || {
            got = claim(&mut c, &q, "w", 5);
            !got.is_empty()
        },
        "the next window",
    );
    assert_eq!(got, [jid(3), jid(4)]);
    assert_eq!(int(&limits(&mut c, &q), "count"), 2);
}

#[test]
fn for_stops_every_claim_until_cleared_or_over() {
    let s = Server::quiet();
    let mut c = s.conn();
    let q = Q::new("for");
    fill(&mut c, &q, 3);
    // Without any rate limit set.
    assert_eq!(limit(&mut c, &q, &["FOR", "600000"]), Reply::Int(1));
    assert!(claim(&mut c, &q, "w", 3).is_empty());
    let m = limits(&mut c, &q);
    assert!((1..=600000).contains(&int(&m, "hold")));
    assert_eq!(int(&m, "ttl"), int(&m, "hold"));
    assert_eq!((int(&m, "count"), int(&m, "window")), (0, -2));
    assert_eq!(limit(&mut c, &q, &["CLEAR"]), Reply::Int(1));
    assert_eq!(int(&limits(&mut c, &q), "hold"), -2);
    assert_eq!(claim(&mut c, &q, "w", 1), [jid(1)]);
    // A short one ends by itself.
    limit(&mut c, &q, &["FOR", "100"]);
    assert!(claim(&mut c, &q, "w", 1).is_empty());
    wait_for(|| claim(&mut c, &q, "w", 1) == [jid(2)], "the FOR's end");
    // The hold ends exactly `ms` after the call: read in a script, where the clock stands still.
    let script = format!(
        "{SCRIPT_NOW} redis.call('TRA.LIMIT', 1, KEYS[2], 'FOR', ARGV[1]) \
         return {{tonumber(redis.call('HGET', KEYS[2], 'hold-until')), now + ARGV[1]}}"
    );
    let meta = q.k("meta");
    let r = c.call(&[b"EVAL", script.as_bytes(), b"2", b"clock", meta.as_bytes(), b"600000"]);
    assert_eq!(r.ints()[0], r.ints()[1], "the hold's end is the call's now + ms: {r:?}");
}

#[test]
fn concurrency_bounds_the_active_jobs_of_all_workers() {
    let s = Server::quiet();
    let (mut a, mut b) = (s.conn(), s.conn());
    let q = Q::new("conc");
    fill(&mut a, &q, 6);
    assert_eq!(limit(&mut a, &q, &["CONCURRENCY", "3"]), Reply::Int(1));
    assert_eq!(claim(&mut a, &q, "a", 2).len(), 2);
    assert_eq!(claim(&mut b, &q, "b", 5), [jid(3)]);
    assert!(claim(&mut b, &q, "b", 1).is_empty());
    let m = limits(&mut a, &q);
    assert_eq!((int(&m, "concurrency"), int(&m, "active"), int(&m, "ttl")), (3, 3, 0));
    // A job leaving active makes room for one.
    assert_eq!(complete(&q, &mut a, &jid(1), "a", &[]), Reply::Int(1));
    assert_eq!(claim(&mut b, &q, "b", 5), [jid(4)]);
    // Raising it makes room; OFF removes it.
    assert_eq!(limit(&mut a, &q, &["CONCURRENCY", "4"]), Reply::Int(1));
    assert_eq!(claim(&mut b, &q, "b", 5), [jid(5)]);
    assert_eq!(limit(&mut a, &q, &["CONCURRENCY", "OFF"]), Reply::Int(1));
    assert_eq!(limit(&mut a, &q, &["CONCURRENCY", "OFF"]), Reply::Int(0));
    assert!(limits(&mut a, &q)["concurrency"].is_nil());
    assert_eq!(claim(&mut b, &q, "b", 5), [jid(6)]);
    q.check_invariant(&mut a);
}

#[test]
fn a_waiter_held_by_the_window_is_woken_when_it_reopens() {
    // Upkeep on: it visits the queue when the window ends and signals its waiters.
    let s = Server::installed();
    let (mut admin, mut w) = (s.conn(), s.conn());
    let q = Q::new("wakerate");
    fill(&mut admin, &q, 3);
    limit(&mut admin, &q, &["RATE", "1", "1500"]);
    assert_eq!(claim(&mut admin, &q, "a", 3), [jid(1)]);
    send_claim(&mut w, &q, "w", "20000");
    blocked(&mut admin, 1);
    let r = w.read().expect("a reply");
    assert_eq!(r.array().len(), 1, "{r:?}");
    assert_eq!(r.array()[0].array()[0].str(), jid(2));
    assert_eq!(info_field(&mut admin, "trafikey", "trafikey_woken"), "1", "woken once, not polled");
    // A FOR holds a waiter the same way, and CLEAR wakes it at once.
    limit(&mut admin, &q, &["FOR", "600000"]);
    send_claim(&mut w, &q, "w", "20000");
    blocked(&mut admin, 1);
    limit(&mut admin, &q, &["CLEAR"]);
    let r = w.read().expect("a reply");
    assert_eq!(r.array()[0].array()[0].str(), jid(3));
}

#[test]
fn a_waiter_held_by_a_for_is_woken_by_upkeep_when_it_ends() {
    // No rate limit: the FOR alone holds the waiter, and its end alone wakes it. A second
    // is long enough for the claim to be waiting before the FOR ends on a busy machine.
    let s = Server::installed();
    let (mut admin, mut w) = (s.conn(), s.conn());
    let q = Q::new("wakefor");
    fill(&mut admin, &q, 1);
    limit(&mut admin, &q, &["FOR", "1000"]);
    send_claim(&mut w, &q, "w", "20000");
    blocked(&mut admin, 1);
    let r = w.read().expect("a reply");
    assert_eq!(r.array().len(), 1, "{r:?}");
    assert_eq!(r.array()[0].array()[0].str(), jid(1));
    assert_eq!(info_field(&mut admin, "trafikey", "trafikey_woken"), "1", "woken once, not polled");
    // The same with the ready job in `prio` and `wait` empty.
    assert_eq!(q.enqueue(&mut admin, &jid(2), &[b"PRIORITY", b"3"]), Reply::Int(1));
    limit(&mut admin, &q, &["FOR", "1000"]);
    send_claim(&mut w, &q, "w", "20000");
    blocked(&mut admin, 1);
    let r = w.read().expect("a reply");
    assert_eq!(r.array().len(), 1, "{r:?}");
    assert_eq!(r.array()[0].array()[0].str(), jid(2));
    assert_eq!(info_field(&mut admin, "trafikey", "trafikey_woken"), "2");
}

#[test]
fn a_waiter_held_by_concurrency_is_woken_when_a_job_leaves_active() {
    let s = Server::quiet();
    let (mut admin, mut w) = (s.conn(), s.conn());
    let q = Q::new("wakeconc");
    fill(&mut admin, &q, 6);
    limit(&mut admin, &q, &["CONCURRENCY", "2"]);
    // jid(1) stays held throughout, so `active` is never emptied (deleting a key would wake
    // its waiters by itself): each wake below is the verb's own signal.
    assert_eq!(claim(&mut admin, &q, "keep", 1), [jid(1)]);
    assert_eq!(claim(&mut admin, &q, "a", 1), [jid(2)]);
    // COMPLETE lets the next one in.
    send_claim(&mut w, &q, "w", "20000");
    blocked(&mut admin, 1);
    assert_eq!(complete(&q, &mut admin, &jid(2), "a", &[]), Reply::Int(1));
    assert_eq!(w.read().unwrap().array()[0].array()[0].str(), jid(3));
    // FAIL, DELAY and REQUEUE take a job out of active too.
    send_claim(&mut w, &q, "v", "20000");
    blocked(&mut admin, 1);
    assert!(q.run(&mut admin, "EMQ.FAIL", &jid(3), &[b"w", b"boom"]).err().is_none());
    assert_eq!(w.read().unwrap().array()[0].array()[0].str(), jid(4));
    send_claim(&mut w, &q, "u", "20000");
    blocked(&mut admin, 1);
    assert!(q.run(&mut admin, "EMQ.DELAY", &jid(4), &[b"v", b"+600000"]).err().is_none());
    assert_eq!(w.read().unwrap().array()[0].array()[0].str(), jid(5));
    send_claim(&mut w, &q, "t", "20000");
    blocked(&mut admin, 1);
    assert!(q.run(&mut admin, "EMQ.REQUEUE", &jid(5), &[b"u"]).err().is_none());
    assert_eq!(w.read().unwrap().array()[0].array()[0].str(), jid(5));
    // Raising the limit wakes a waiter too.
    send_claim(&mut w, &q, "s", "20000");
    blocked(&mut admin, 1);
    limit(&mut admin, &q, &["CONCURRENCY", "3"]);
    assert_eq!(w.read().unwrap().array()[0].array()[0].str(), jid(6));
    assert_eq!(info_field(&mut admin, "trafikey", "trafikey_woken"), "5");
    assert_eq!(q.snapshot(&mut admin).sets["active"].len(), 3);
    q.check_invariant(&mut admin);
}

#[test]
fn a_waiter_from_before_the_concurrency_limit_is_answered_so_that_it_waits_on_active_too() {
    let s = Server::quiet();
    let (mut admin, mut w) = (s.conn(), s.conn());
    let q = Q::new("lateconc");
    fill(&mut admin, &q, 2);
    assert_eq!(claim(&mut admin, &q, "keep", 1), [jid(1)]);
    assert_eq!(claim(&mut admin, &q, "a", 1), [jid(2)]);
    // Nothing ready, no limit: the waiter waits on wait, prio and meta.
    send_claim(&mut w, &q, "w", "0");
    blocked(&mut admin, 1);
    // The limit's signal wakes it; now it would wait on active too, which it does not: the
    // empty answer, from the retry (no timeout: it waits without one).
    limit(&mut admin, &q, &["CONCURRENCY", "2"]);
    assert_eq!(w.read().unwrap(), Reply::Array(vec![]));
    blocked(&mut admin, 0);
    assert_eq!(info_field(&mut admin, "trafikey", "trafikey_timeouts"), "0");
    // Asked again, it waits on all four, so a job leaving active lets it in.
    assert_eq!(q.enqueue(&mut admin, &jid(3), &[]), Reply::Int(1));
    send_claim(&mut w, &q, "w", "0");
    blocked(&mut admin, 1);
    assert_eq!(complete(&q, &mut admin, &jid(2), "a", &[]), Reply::Int(1));
    assert_eq!(w.read().unwrap().array()[0].array()[0].str(), jid(3));
    q.check_invariant(&mut admin);
}

#[test]
fn completes_stalled_and_remove_wake_a_waiter_held_by_concurrency_too() {
    let s = Server::quiet();
    let (mut admin, mut w) = (s.conn(), s.conn());
    let q = Q::new("wakeconc2");
    fill(&mut admin, &q, 5);
    limit(&mut admin, &q, &["CONCURRENCY", "2"]);
    assert_eq!(claim(&mut admin, &q, "keep", 1), [jid(1)]);
    assert_eq!(claim(&mut admin, &q, "a", 1), [jid(2)]);
    send_claim(&mut w, &q, "w", "20000");
    blocked(&mut admin, 1);
    let r = q.run(&mut admin, "TRA.COMPLETES", "", &[jid(2).as_bytes(), b"a", b"ok"]);
    assert_eq!(r, Reply::Array(vec![Reply::Int(1)]));
    assert_eq!(w.read().unwrap().array()[0].array()[0].str(), jid(3));
    // The lease of `id` held by `holder` runs out while `waiter` waits; STALLED with `max`.
    let stall = |admin: &mut Conn, w: &mut Conn, id: &str, holder: &[u8], waiter: &str, max: &[u8]| {
        let r = q.run(admin, "EMQ.EXTEND", id, &[holder, b"1"]);
        assert!(r.err().is_none(), "{r:?}");
        std::thread::sleep(std::time::Duration::from_millis(5));
        send_claim(w, &q, waiter, "20000");
        blocked(admin, 1);
        q.run(admin, "EMQ.STALLED", "", &[b"MAXSTALLS", max])
    };
    // A lease that ran out, reclaimed by STALLED.
    let r = stall(&mut admin, &mut w, &jid(3), b"w", "v", b"5");
    assert_eq!(r.array()[0].strings(), [jid(3)], "{r:?}");
    assert_eq!(w.read().unwrap().array()[0].array()[0].str(), jid(3));
    // TRA.REMOVE of a held job.
    send_claim(&mut w, &q, "u", "20000");
    blocked(&mut admin, 1);
    let keys: Vec<String> = std::iter::once(q.job(&jid(3)))
        .chain(["wait", "prio", "active", "delayed", "completed", "failed", "events"].iter().map(|r| q.k(r)))
        .collect();
    let mut argv: Vec<&[u8]> = vec![b"TRA.REMOVE", b"8"];
    argv.extend(keys.iter().map(|k| k.as_bytes()));
    argv.push(b"FORCE");
    assert_eq!(admin.call(&argv), Reply::Int(1));
    assert_eq!(w.read().unwrap().array()[0].array()[0].str(), jid(4));
    // STALLED failing a job for good: nothing goes back to wait, only active is left.
    let r = stall(&mut admin, &mut w, &jid(4), b"u", "t", b"0");
    assert_eq!(r.array()[1].strings(), [jid(4)], "{r:?}");
    assert_eq!(w.read().unwrap().array()[0].array()[0].str(), jid(5));
    assert_eq!(info_field(&mut admin, "trafikey", "trafikey_woken"), "4");
    q.check_invariant(&mut admin);
}

#[test]
fn refusals_write_nothing() {
    let s = Server::quiet();
    let mut c = s.conn();
    let q = Q::new("refuse");
    limit(&mut c, &q, &["RATE", "2", "1000"]);
    let cases: &[(&[&str], &str)] = &[
        (&["RATE", "0", "1000"], "EMQARG max must be 1..=2147483647"),
        (&["RATE", "2147483648", "1000"], "EMQARG max must be 1..=2147483647"),
        (&["RATE", "1", "0"], "EMQARG ms must be 1..=2147483648"),
        (&["RATE", "1", "2147483649"], "EMQARG ms must be 1..=2147483648"),
        (&["CONCURRENCY", "0"], "EMQARG n must be 1..=2147483647"),
        (&["CONCURRENCY", "-1"], "EMQARG n must be 1..=2147483647"),
        (&["FOR", "0"], "EMQARG ms must be 1..=2147483648"),
        (&["FOR", "-5"], "EMQARG ms must be 1..=2147483648"),
        (&["RATE", "x", "1"], "EMQSHAPE max is not an integer"),
        (&["FOR", "1.5"], "EMQSHAPE ms is not an integer"),
        (&["RATE", "1"], "EMQSHAPE"),
        (&["RATE"], "EMQSHAPE"),
        (&["CLEAR", "NOW"], "EMQSHAPE"),
        (&["BURST", "1"], "EMQSHAPE"),
        (&["CONCURRENCY", "2", "1000"], "EMQSHAPE"),
        (&["BURST", "2", "1000"], "EMQSHAPE"),
        (&[], "EMQSHAPE"),
    ];
    for (args, want) in cases {
        let r = unchanged(&mut c, |c| limit(c, &q, args));
        assert!(r.err().is_some_and(|e| e.starts_with(want)), "{args:?}: {r:?}");
    }
    // A meta of another type.
    c.call(&[b"SET", q.k("meta").as_bytes(), b"x"]);
    let r = unchanged(&mut c, |c| limit(c, &q, &["CONCURRENCY", "1"]));
    assert!(r.err().is_some_and(|e| e.starts_with("WRONGTYPE")), "{r:?}");
    let (meta, active) = (q.k("meta"), q.k("active"));
    let r = c.call(&[b"TRA.LIMITS", b"2", meta.as_bytes(), active.as_bytes()]);
    assert!(r.err().is_some_and(|e| e.starts_with("WRONGTYPE")), "{r:?}");
    // Not installed: the fence refuses, TRA.LIMITS still reads.
    c.call(&[b"DEL", q.k("meta").as_bytes()]);
    c.call(&[b"DEL", b"{emq}:version"]);
    let r = unchanged(&mut c, |c| limit(c, &q, &["CONCURRENCY", "1"]));
    assert!(r.err().is_some_and(|e| e.starts_with("EMQWIRE")), "{r:?}");
    assert!(limits(&mut c, &q)["concurrency"].is_nil());
}

#[test]
fn limited_claims_reach_replicas_and_the_aof_as_they_are() {
    let p = Server::quiet_aof();
    let r = Server::start(Opts { module_args: vec!["upkeep".into(), "no".into()], ..Opts::default() });
    let mut c = p.conn();
    let mut rc = r.follow(&p);
    let q = Q::new("repl");
    fill(&mut c, &q, 8);
    limit(&mut c, &q, &["RATE", "3", "600000"]);
    limit(&mut c, &q, &["CONCURRENCY", "5"]);
    assert_eq!(claim(&mut c, &q, "w", 2).len(), 2);
    assert_eq!(claim(&mut c, &q, "w", 2).len(), 1);
    limit(&mut c, &q, &["CLEAR"]);
    assert_eq!(claim(&mut c, &q, "w", 5).len(), 2, "concurrency 5 with three active");
    limit(&mut c, &q, &["FOR", "600000"]);
    assert_eq!(c.call(&[b"WAIT", b"1", b"5000"]), Reply::Int(1));
    let want = digest(&mut c);
    assert_eq!(digest(&mut rc), want, "the replica holds what the primary holds");
    drop(rc);
    drop(r);
    let p = p.restart();
    let mut c = p.conn();
    wait_for(|| info_field(&mut c, "persistence", "loading") == "0", "aof load");
    assert_eq!(digest(&mut c), want, "AOF replay");
}

#[test]
fn the_limits_live_in_meta_and_what_trafikey_could_not_have_written_is_no_limit() {
    let s = Server::quiet();
    let mut c = s.conn();
    let q = Q::new("stored");
    fill(&mut c, &q, 6);
    limit(&mut c, &q, &["RATE", "2", "600000"]);
    limit(&mut c, &q, &["CONCURRENCY", "4"]);
    let meta = q.k("meta");
    assert_eq!(c.call(&[b"HGET", meta.as_bytes(), b"rate"]).str(), "2 600000");
    assert_eq!(claim(&mut c, &q, "w", 1).len(), 1);
    let rate = c.call(&[b"HGET", meta.as_bytes(), b"rate"]).str();
    let parts: Vec<&str> = rate.split(' ').collect();
    assert_eq!(parts[..3], ["2", "600000", "1"], "{rate}");
    assert!(parts[3].parse::<i64>().unwrap() > 1_000_000_000_000, "an absolute time: {rate}");
    // A new RATE keeps the window a claim counts in; CLEAR forgets it, not the rate.
    limit(&mut c, &q, &["RATE", "1", "600000"]);
    assert!(claim(&mut c, &q, "w", 1).is_empty(), "the window's one is taken");
    limit(&mut c, &q, &["CLEAR"]);
    assert_eq!(c.call(&[b"HGET", meta.as_bytes(), b"rate"]).str(), "1 600000");
    // A client's own values that TRA.LIMIT could not have written limit nothing.
    for (field, value) in [("rate", "0 100"), ("rate", "x"), ("rate", "1 2 3"), ("concurrency", "0")] {
        c.call(&[b"DEL", meta.as_bytes()]);
        c.call(&[b"HSET", meta.as_bytes(), field.as_bytes(), value.as_bytes()]);
        let m = limits(&mut c, &q);
        assert!(m["rate-max"].is_nil() && m["concurrency"].is_nil(), "{field} {value}: {m:?}");
    }
    assert_eq!(claim(&mut c, &q, "w", 10).len(), 5);
    q.check_invariant(&mut c);
}
