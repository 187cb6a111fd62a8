//! The job core against a real server, as src/CONTRACT.md and src/verbs/README.md state it:
//! each verb's happy path and refusals, leases, retries and backoff, pause, priorities,
//! delays, stalls, retention (KEEP and AGE at their edges), events, ACL on undeclared keys
//! (logs opened only where they are deleted). The state invariant is checked after every
//! test.
// A test may panic: that is how it fails. The module's own rules are for src/.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

use std::ops::RangeInclusive;

use trafikey_support::*;

/// Module arguments with upkeep off (see `Server::quiet`).
fn quiet() -> Vec<String> {
    vec!["upkeep".into(), "no".into()]
}

fn claim(q: &Q, c: &mut Conn, token: &str, lease: i64, count: i64) -> Vec<Vec<String>> {
    let r = q.run(
        c,
        "EMQ.CLAIM",
        "",
        &[token.as_bytes(), lease.to_string().as_bytes(), b"COUNT", count.to_string().as_bytes()],
    );
    r.array()
        .iter()
        .map(|j| {
            let a = j.array();
            vec![a[0].str(), a[1].str(), a[2].str(), a[3].int().to_string()]
        })
        .collect()
}

fn ids(jobs: &[Vec<String>]) -> Vec<String> {
    jobs.iter().map(|j| j[0].clone()).collect()
}

fn now_ms(c: &mut Conn) -> i64 {
    let t = c.call(&[b"TIME"]);
    t.array()[0].str().parse::<i64>().unwrap() * 1000 + t.array()[1].str().parse::<i64>().unwrap() / 1000
}

/// Runs `f` between two readings of the server's clock: the times a call in it read, plus
/// `ms` (a lease or a delay), lie in the range returned.
fn read_clock_around<T>(c: &mut Conn, ms: i64, f: impl FnOnce(&mut Conn) -> T) -> (T, RangeInclusive<i64>) {
    let t0 = now_ms(c);
    let r = f(c);
    let t1 = now_ms(c);
    (r, t0 + ms..=t1 + ms)
}

#[test]
fn a_worker_runs_a_queue_fifo_within_priorities() {
    let (_s, mut c, q) = queue_on_quiet_server("life");
    for i in 1..=3 {
        assert_eq!(q.enqueue(&mut c, &jid(i), &[]), Reply::Int(1));
    }
    q.enqueue(&mut c, &jid(10), &[b"PRIORITY", b"2"]);
    q.enqueue(&mut c, &jid(11), &[b"PRIORITY", b"1"]);
    q.enqueue(&mut c, &jid(9), &[b"PRIORITY", b"2"]);
    // wait first in FIFO (mint) order, then prio by priority, ties by id
    let (got, lease_end) = read_clock_around(&mut c, 30_000, |c| claim(&q, c, "w1", 30_000, 10));
    assert_eq!(ids(&got), [jid(1), jid(2), jid(3), jid(11), jid(9), jid(10)]);
    assert_eq!(got[0][1..], ["job".to_string(), "{}".to_string(), "1".to_string()]);
    let snap = q.check_invariant(&mut c);
    assert_eq!(snap.sets["active"].len(), 6);
    assert_eq!(snap.field(&jid(1), "tk").as_deref(), Some("w1"));
    assert_eq!(snap.field(&jid(1), "as").as_deref(), Some("1"));
    // the lease deadline is now + lease
    let dl = c.call(&[b"ZSCORE", q.k("active").as_bytes(), jid(1).as_bytes()]).str().parse::<i64>().unwrap();
    assert!(lease_end.contains(&dl), "{lease_end:?}: {dl}");
    for j in &got {
        assert_eq!(q.run(&mut c, "EMQ.COMPLETE", &j[0], &[b"w1", b"ok"]), Reply::Int(1));
    }
    let snap = q.check_invariant(&mut c);
    assert_eq!(snap.sets["completed"].len(), 6);
    assert_eq!(snap.field(&jid(1), "r").as_deref(), Some("ok"));
    assert_eq!(snap.field(&jid(1), "am").as_deref(), Some("1"));
    assert!(claim(&q, &mut c, "w1", 1000, 5).is_empty());
    let ev = q.events(&mut c);
    assert_eq!(ev.iter().filter(|e| e[1] == "added").count(), 6);
    assert_eq!(ev.iter().filter(|e| e[1] == "active").count(), 6);
    let done: Vec<_> = ev.iter().filter(|e| e[1] == "completed").collect();
    assert_eq!(done.len(), 6);
    assert_eq!(done[0][4..], ["attempt".to_string(), "1".to_string()]);
}

#[test]
fn leases_are_checked_on_every_holder_verb() {
    let (_s, mut c, q) = queue_on_quiet_server("lease");
    let id = jid(1);
    q.enqueue(&mut c, &id, &[]);
    // not held yet: every holder verb answers EMQLEASE and writes nothing
    for (verb, args) in [
        ("EMQ.EXTEND", vec![&b"t"[..], b"100"]),
        ("EMQ.COMPLETE", vec![b"t", b"r"]),
        ("EMQ.FAIL", vec![b"t", b"e"]),
        ("EMQ.DELAY", vec![b"t", b"+100"]),
        ("EMQ.REQUEUE", vec![b"t"]),
    ] {
        let e = unchanged(&mut c, |c| q.run(c, verb, &id, &args));
        assert!(e.error().starts_with("EMQLEASE"), "{verb}: {e:?}");
    }
    claim(&q, &mut c, "good", 60_000, 1);
    for (verb, args) in [
        ("EMQ.EXTEND", vec![&b"bad"[..], b"100"]),
        ("EMQ.COMPLETE", vec![b"bad", b"r"]),
        ("EMQ.FAIL", vec![b"bad", b"e"]),
        ("EMQ.DELAY", vec![b"bad", b"+100"]),
        ("EMQ.REQUEUE", vec![b"bad"]),
    ] {
        let e = unchanged(&mut c, |c| q.run(c, verb, &id, &args));
        assert!(e.error().starts_with("EMQLEASE"), "{verb}: {e:?}");
    }
    // EXTEND moves the deadline; EXTENDS answers per entry
    let (d, lease_end) =
        read_clock_around(&mut c, 120_000, |c| q.run(c, "EMQ.EXTEND", &id, &[b"good", b"120000"]).int());
    assert!(lease_end.contains(&d), "the call's now + the lease: {lease_end:?}, {d}");
    assert_eq!(c.call(&[b"ZSCORE", q.k("active").as_bytes(), id.as_bytes()]).str(), d.to_string());
    // To the ms, in a script: the deadline is the call's now + the lease.
    let script = format!(
        "{SCRIPT_NOW} return {{redis.call('EMQ.EXTEND', 2, KEYS[2], KEYS[3], ARGV[1], ARGV[2]), now + ARGV[2]}}"
    );
    let r = c.call(&[
        b"EVAL",
        script.as_bytes(),
        b"3",
        b"clock",
        q.k(&format!("job:{id}")).as_bytes(),
        q.k("active").as_bytes(),
        b"good",
        b"90000",
    ]);
    assert_eq!(r.ints()[0], r.ints()[1], "the deadline is the call's now + the lease: {r:?}");
    let r = c.call(&[
        b"EMQ.EXTENDS",
        b"1",
        q.k("active").as_bytes(),
        b"5000",
        id.as_bytes(),
        b"good",
        id.as_bytes(),
        b"bad",
        jid(7).as_bytes(),
        b"good",
    ]);
    let a = r.array();
    assert!(a[0].int() > 0);
    assert_eq!(a[1], Reply::Int(0));
    assert_eq!(a[2], Reply::Int(0));
    // a missing job: EMQNOJOB before the lease check
    let e = unchanged(&mut c, |c| q.run(c, "EMQ.COMPLETE", &jid(99), &[b"good", b"r"]));
    assert!(e.error().starts_with("EMQNOJOB"));
    // COMPLETE, then the same COMPLETE again (a retry after a lost reply) answers 0
    assert_eq!(q.run(&mut c, "EMQ.COMPLETE", &id, &[b"good", b"r"]), Reply::Int(1));
    assert_eq!(unchanged(&mut c, |c| q.run(c, "EMQ.COMPLETE", &id, &[b"good", b"r"])), Reply::Int(0));
    // another token on the finished job: EMQLEASE; and EXTEND of a finished job too
    assert!(unchanged(&mut c, |c| q.run(c, "EMQ.COMPLETE", &id, &[b"other", b"r"]))
        .error()
        .starts_with("EMQLEASE"));
    assert!(unchanged(&mut c, |c| q.run(c, "EMQ.EXTEND", &id, &[b"good", b"100"]))
        .error()
        .starts_with("EMQLEASE"));
    q.check_invariant(&mut c);
}

/// The lease is the row and the `active` set together: a row that says active with the
/// caller's token, whose id is not in `active` (a state no verb makes: the entry removed by
/// hand), is not held. Every holder verb refuses it with EMQLEASE and writes nothing; the
/// batch verbs answer it not held. Put back in `active`, the same calls go through.
/// EXTENDS of a job whose row says held while `active` is absent moves nothing and leaves no
/// empty set behind (the server's own commands assert on an empty sorted set).
#[test]
fn extends_on_an_absent_active_set_makes_no_empty_set() {
    let (_s, mut c, q) = queue_on_quiet_server("ghostset");
    let id = jid(1);
    assert_eq!(q.enqueue(&mut c, &id, &[]), Reply::Int(1));
    assert_eq!(ids(&claim(&q, &mut c, "t", 60_000, 1)), std::slice::from_ref(&id));
    assert_eq!(c.call(&[b"ZREM", q.k("active").as_bytes(), id.as_bytes()]), Reply::Int(1));
    let r = unchanged(&mut c, |c| {
        c.call(&[b"EMQ.EXTENDS", b"1", q.k("active").as_bytes(), b"5000", id.as_bytes(), b"t"])
    });
    assert_eq!(r, Reply::Array(vec![Reply::Int(0)]));
    assert_eq!(c.call(&[b"EXISTS", q.k("active").as_bytes()]), Reply::Int(0));
}

#[test]
fn a_row_held_by_the_token_but_not_in_active_is_not_held() {
    let (_s, mut c, q) = queue_on_quiet_server("ghost");
    let id = jid(1);
    // A second job stays in `active`, so the set is never empty.
    for n in 1..=2 {
        assert_eq!(q.enqueue(&mut c, &jid(n), &[b"ATTEMPTS", b"3"]), Reply::Int(1));
    }
    assert_eq!(ids(&claim(&q, &mut c, "t", 60_000, 2)), [id.clone(), jid(2)]);
    let deadline = c.call(&[b"ZSCORE", q.k("active").as_bytes(), id.as_bytes()]).str();
    assert_eq!(c.call(&[b"ZREM", q.k("active").as_bytes(), id.as_bytes()]), Reply::Int(1));
    let snap = q.snapshot(&mut c);
    assert_eq!(
        (snap.field(&id, "st").as_deref(), snap.field(&id, "tk").as_deref()),
        (Some("active"), Some("t"))
    );
    let holder: [(&str, Vec<&[u8]>); 8] = [
        ("EMQ.EXTEND", vec![b"t", b"100"]),
        ("EMQ.COMPLETE", vec![b"t", b"r"]),
        ("EMQ.FAIL", vec![b"t", b"e"]),
        ("EMQ.FAIL", vec![b"t", b"e", b"FINAL"]),
        ("EMQ.DELAY", vec![b"t", b"+100"]),
        ("EMQ.REQUEUE", vec![b"t"]),
        ("TRA.PROGRESS", vec![b"t", b"half"]),
        ("EMQ.COMPLETE", vec![b"t", b"r", b"KEEP", b"0"]),
    ];
    for (verb, args) in &holder {
        let e = unchanged(&mut c, |c| q.run(c, verb, &id, args));
        assert!(e.err().is_some_and(|e| e.starts_with("EMQLEASE ")), "{verb} {args:?}: {e:?}");
    }
    let r = unchanged(&mut c, |c| {
        c.call(&[b"EMQ.EXTENDS", b"1", q.k("active").as_bytes(), b"5000", id.as_bytes(), b"t"])
    });
    assert_eq!(r, Reply::Array(vec![Reply::Int(0)]), "EXTENDS");
    let v = q.cmd("TRA.COMPLETES", "", &keys_of("TRA.COMPLETES"), &[id.as_bytes(), b"t", b"r"]);
    let v: Vec<&[u8]> = v.iter().map(Vec::as_slice).collect();
    assert_eq!(unchanged(&mut c, |c| c.call(&v)), Reply::Array(vec![Reply::Int(-1)]), "TRA.COMPLETES");
    // The entry back: held again, and each verb that keeps the lease goes through.
    let r = c.call(&[b"ZADD", q.k("active").as_bytes(), deadline.as_bytes(), id.as_bytes()]);
    assert_eq!(r, Reply::Int(1));
    assert!(q.run(&mut c, "EMQ.EXTEND", &id, &[b"t", b"100"]).int() > 0);
    assert!(q.run(&mut c, "TRA.PROGRESS", &id, &[b"t", b"half"]).err().is_none());
    assert_eq!(q.run(&mut c, "EMQ.COMPLETE", &id, &[b"t", b"r"]), Reply::Int(1));
    q.check_invariant(&mut c);
}

#[test]
fn a_reclaimed_job_refuses_its_late_worker() {
    let (_s, mut c, q) = queue_on_quiet_server("late");
    let id = jid(1);
    q.enqueue(&mut c, &id, &[b"ATTEMPTS", b"3"]);
    claim(&q, &mut c, "slow", 50, 1);
    std::thread::sleep(std::time::Duration::from_millis(200));
    let r = q.run(&mut c, "EMQ.STALLED", "", &[]);
    assert_eq!(r.array()[0].strings(), std::slice::from_ref(&id));
    assert!(r.array()[1].array().is_empty());
    let snap = q.check_invariant(&mut c);
    assert_eq!(snap.state_of(&id).as_deref(), Some("wait"));
    assert_eq!(snap.field(&id, "sc").as_deref(), Some("1"));
    assert_eq!(snap.field(&id, "tk"), None, "the token is cleared");
    assert_eq!(snap.field(&id, "am"), None, "a requeue leaves made alone");
    // the late worker's completion changes nothing
    let e = unchanged(&mut c, |c| q.run(c, "EMQ.COMPLETE", &id, &[b"slow", b"late"]));
    assert!(e.error().starts_with("EMQLEASE"));
    // a second stall goes past MAXSTALLS 1: failed for good with error `stalled`
    claim(&q, &mut c, "slow2", 50, 1);
    std::thread::sleep(std::time::Duration::from_millis(200));
    let r = q.run(&mut c, "EMQ.STALLED", "", &[b"MAXSTALLS", b"1"]);
    assert_eq!(r.array()[1].strings(), std::slice::from_ref(&id));
    let snap = q.check_invariant(&mut c);
    assert_eq!(snap.state_of(&id).as_deref(), Some("failed"));
    assert_eq!(snap.field(&id, "e").as_deref(), Some("stalled"));
    assert_eq!(snap.field(&id, "am").as_deref(), Some("1"));
    let ev = q.events(&mut c);
    let kinds: Vec<&str> = ev.iter().map(|e| e[1].as_str()).collect();
    assert_eq!(kinds, ["added", "active", "stalled", "waiting", "active", "stalled", "failed"]);
    // a lease not yet expired is left alone
    q.enqueue(&mut c, &jid(2), &[]);
    claim(&q, &mut c, "fresh", 60_000, 1);
    let r = unchanged(&mut c, |c| q.run(c, "EMQ.STALLED", "", &[]));
    assert!(r.array()[0].array().is_empty() && r.array()[1].array().is_empty());
    // A lease lapses the ms after its deadline: in a script, deadlines at now and at now − 1,
    // and only the second is reclaimed.
    q.enqueue(&mut c, &jid(3), &[]);
    claim(&q, &mut c, "edge", 60_000, 2);
    let script = format!(
        "{SCRIPT_NOW} redis.call('ZADD', KEYS[2], 'XX', now, ARGV[1], now - 1, ARGV[2]) \
         return redis.call(unpack(ARGV, 3))"
    );
    let (clock, active) = (b"clock".to_vec(), q.k("active").into_bytes());
    let mut v: Vec<Vec<u8>> = vec![
        b"EVAL".to_vec(),
        script.into_bytes(),
        b"2".to_vec(),
        clock,
        active,
        jid(2).into(),
        jid(3).into(),
    ];
    v.extend(q.cmd("EMQ.STALLED", "", &keys_of("EMQ.STALLED"), &[]));
    let r = c.call_v(&v);
    assert_eq!(r.array()[0].strings(), [jid(3)], "at its deadline a lease still holds");
}

#[test]
fn fail_retries_then_backs_off_then_fails_for_good() {
    let (_s, mut c, q) = queue_on_quiet_server("retry");
    let (a, b) = (jid(1), jid(2));
    q.enqueue(&mut c, &a, &[b"ATTEMPTS", b"3"]);
    claim(&q, &mut c, "t", 60_000, 1);
    assert_eq!(q.run(&mut c, "EMQ.FAIL", &a, &[b"t", b"boom"]), Reply::Simple("retry".into()));
    let snap = q.check_invariant(&mut c);
    assert_eq!(snap.state_of(&a).as_deref(), Some("wait"));
    assert_eq!(snap.field(&a, "e").as_deref(), Some("boom"));
    assert_eq!(snap.field(&a, "am").as_deref(), Some("1"));
    let j = claim(&q, &mut c, "t2", 60_000, 1);
    assert_eq!(j[0][3], "2", "attempt = made + 1");
    assert_eq!(q.run(&mut c, "EMQ.FAIL", &a, &[b"t2", b"boom"]), Reply::Simple("retry".into()));
    claim(&q, &mut c, "t3", 60_000, 1);
    assert_eq!(q.run(&mut c, "EMQ.FAIL", &a, &[b"t3", b"last"]), Reply::Simple("failed".into()));
    let snap = q.check_invariant(&mut c);
    assert_eq!(snap.state_of(&a).as_deref(), Some("failed"));
    assert_eq!(snap.field(&a, "am").as_deref(), Some("3"));
    assert!(snap.field(&a, "f").is_some());

    // EXP backoff: 100·2^(made−1) ms after each failure
    q.enqueue(&mut c, &b, &[b"ATTEMPTS", b"5", b"BACKOFF", b"EXP", b"100"]);
    for (n, expect) in [(1, 100), (2, 200), (3, 400)] {
        claim(&q, &mut c, "x", 60_000, 1);
        let (r, due_at) = read_clock_around(&mut c, expect, |c| q.run(c, "EMQ.FAIL", &b, &[b"x", b"e"]));
        assert_eq!(r, Reply::Simple("delayed".into()));
        let due = c.call(&[b"ZSCORE", q.k("delayed").as_bytes(), b.as_bytes()]).str().parse::<i64>().unwrap();
        assert!(due_at.contains(&due), "attempt {n}: due {due}, now + {expect} in {due_at:?}");
        // not promoted before it is due, promoted after
        assert!(claim(&q, &mut c, "x", 60_000, 1).is_empty() || expect < 5);
        std::thread::sleep(std::time::Duration::from_millis(expect as u64 + 60));
        let got = claim(&q, &mut c, "x", 60_000, 1);
        assert_eq!(ids(&got), std::slice::from_ref(&b));
        q.run(&mut c, "EMQ.REQUEUE", &b, &[b"x"]);
    }
    // FINAL fails for good whatever the attempts; FIXED backoff is constant
    claim(&q, &mut c, "f", 60_000, 1);
    assert_eq!(q.run(&mut c, "EMQ.FAIL", &b, &[b"f", b"fatal", b"FINAL"]), Reply::Simple("failed".into()));
    q.enqueue(&mut c, &jid(3), &[b"ATTEMPTS", b"9", b"BACKOFF", b"FIXED", b"60000"]);
    claim(&q, &mut c, "g", 60_000, 1);
    let (r, due_at) = read_clock_around(&mut c, 60_000, |c| q.run(c, "EMQ.FAIL", &jid(3), &[b"g", b"e"]));
    assert_eq!(r, Reply::Simple("delayed".into()));
    let due =
        c.call(&[b"ZSCORE", q.k("delayed").as_bytes(), jid(3).as_bytes()]).str().parse::<i64>().unwrap();
    assert!(due_at.contains(&due), "due {due}, now + 60000 in {due_at:?}");
    q.check_invariant(&mut c);
}

#[test]
fn pause_stops_claims_but_not_promotion() {
    let (s, mut c, q) = queue_on_quiet_server("pause");
    q.enqueue(&mut c, &jid(1), &[]);
    assert_eq!(q.run(&mut c, "EMQ.CLAIM", "", &[b"PAUSE"]), Reply::Int(1));
    assert_eq!(unchanged(&mut c, |c| q.run(c, "EMQ.CLAIM", "", &[b"pause"])), Reply::Int(0));
    assert!(claim(&q, &mut c, "t", 1000, 5).is_empty());
    // a due delayed job is still promoted while paused
    q.run(&mut c, "EMQ.SCHEDULE", &jid(2), &[b"+0", b"job", b"d"]);
    assert!(claim(&q, &mut c, "t", 1000, 5).is_empty());
    let snap = q.check_invariant(&mut c);
    assert_eq!(snap.state_of(&jid(2)).as_deref(), Some("wait"));
    assert_eq!(q.run(&mut c, "EMQ.CLAIM", "", &[b"RESUME"]), Reply::Int(1));
    assert_eq!(q.run(&mut c, "EMQ.CLAIM", "", &[b"RESUME"]), Reply::Int(0));
    assert_eq!(ids(&claim(&q, &mut c, "t", 1000, 5)), [jid(1), jid(2)]);
    let kinds: Vec<String> = q.events(&mut c).iter().map(|e| e[1].clone()).collect();
    assert!(kinds.contains(&"paused".to_string()) && kinds.contains(&"resumed".to_string()));
    // PAUSE needs write permission on meta, which CLAIM only reads
    let mut admin = s.conn();
    let mut w = s.user(
        &mut admin,
        "worker",
        "-@all +@emq %R~{emq}:* ~emq:{pause}:wait ~emq:{pause}:prio ~emq:{pause}:active \
         ~emq:{pause}:delayed ~emq:{pause}:events ~emq:{pause}:job:* %R~emq:{pause}:meta",
    );
    q.enqueue(&mut c, &jid(3), &[]);
    assert_eq!(ids(&claim(&q, &mut w, "w", 1000, 1)), [jid(3)]);
    let before = digest(&mut c);
    let e = q.run(&mut w, "EMQ.CLAIM", "", &[b"PAUSE"]);
    assert_eq!(e.error(), "NOPERM No permissions to access a key");
    assert_eq!(digest(&mut c), before);
}

#[test]
fn delayed_jobs_become_ready_when_due_and_not_before() {
    let (_s, mut c, q) = queue_on_quiet_server("delay");
    let t = now_ms(&mut c);
    assert_eq!(
        q.run(&mut c, "EMQ.SCHEDULE", &jid(1), &[(t + 5000).to_string().as_bytes(), b"later", b"d"]),
        Reply::Int(1)
    );
    assert_eq!(
        q.run(&mut c, "EMQ.SCHEDULE", &jid(2), &[b"+1000", b"soon", b"d", b"PRIORITY", b"3"]),
        Reply::Int(1)
    );
    assert_eq!(q.run(&mut c, "EMQ.SCHEDULE", &jid(2), &[b"+1000", b"x", b"y"]), Reply::Int(0));
    assert_eq!(q.run(&mut c, "EMQ.SCHEDULE", &jid(3), &[b"5", b"past", b"d"]), Reply::Int(1));
    let snap = q.check_invariant(&mut c);
    assert_eq!(snap.sets["delayed"].len(), 3);
    // a past time is due now: promoted by the next claim (a second's margin before the next
    // is due, so that a slow machine, valgrind's included, still claims in time)
    assert_eq!(ids(&claim(&q, &mut c, "t", 60_000, 5)), [jid(3)]);
    std::thread::sleep(std::time::Duration::from_millis(1100));
    assert_eq!(ids(&claim(&q, &mut c, "t", 60_000, 5)), [jid(2)]);
    assert!(claim(&q, &mut c, "t", 60_000, 5).is_empty());
    // RESCHEDULE moves it, PROMOTE makes it ready now
    let due = q.run(&mut c, "EMQ.RESCHEDULE", &jid(1), &[b"+600000"]).int();
    assert!(due > t + 500_000);
    assert_eq!(q.last_event(&mut c), ["event", "delayed", "id", &jid(1), "due", &due.to_string()]);
    assert_eq!(q.run(&mut c, "EMQ.PROMOTE", &jid(1), &[]), Reply::Int(1));
    assert!(unchanged(&mut c, |c| q.run(c, "EMQ.PROMOTE", &jid(1), &[])).error().starts_with("EMQSTATE"));
    assert!(unchanged(&mut c, |c| q.run(c, "EMQ.RESCHEDULE", &jid(1), &[b"+5"]))
        .error()
        .starts_with("EMQSTATE"));
    assert_eq!(ids(&claim(&q, &mut c, "t", 60_000, 5)), [jid(1)]);
    // DELAY parks a held job without counting an attempt
    let due = q.run(&mut c, "EMQ.DELAY", &jid(1), &[b"t", b"+50"]).int();
    assert!(due >= t);
    let snap = q.check_invariant(&mut c);
    assert_eq!(snap.state_of(&jid(1)).as_deref(), Some("delayed"));
    assert_eq!(snap.field(&jid(1), "am"), None);
    assert_eq!(snap.field(&jid(1), "tk"), None);
    std::thread::sleep(std::time::Duration::from_millis(100));
    let j = claim(&q, &mut c, "t", 60_000, 5);
    assert_eq!(j[0][3], "1", "DELAY counted no attempt");
    assert_eq!(c.call(&[b"GET", b"x"]), Reply::Nil);
    q.check_invariant(&mut c);
}

#[test]
fn reprocess_and_requeue() {
    let (_s, mut c, q) = queue_on_quiet_server("again");
    q.enqueue(&mut c, &jid(1), &[]);
    q.enqueue(&mut c, &jid(2), &[]);
    claim(&q, &mut c, "t", 60_000, 1);
    // REQUEUE: back at the front, no attempt counted
    assert_eq!(q.run(&mut c, "EMQ.REQUEUE", &jid(1), &[b"t"]), Reply::Int(1));
    let j = claim(&q, &mut c, "u", 60_000, 1);
    assert_eq!(ids(&j), [jid(1)]);
    assert_eq!(j[0][3], "1");
    q.run(&mut c, "EMQ.COMPLETE", &jid(1), &[b"u", b"res"]);
    assert!(unchanged(&mut c, |c| q.run(c, "EMQ.REPROCESS", &jid(2), &[])).error().starts_with("EMQSTATE"));
    assert!(unchanged(&mut c, |c| q.run(c, "EMQ.REPROCESS", &jid(3), &[])).error().starts_with("EMQNOJOB"));
    assert_eq!(q.run(&mut c, "EMQ.REPROCESS", &jid(1), &[]), Reply::Int(1));
    let snap = q.check_invariant(&mut c);
    assert_eq!(snap.sets["wait"], [jid(1), jid(2)], "reprocessed jobs go to the back");
    for f in ["r", "f", "tk", "am", "as"] {
        assert_eq!(snap.field(&jid(1), f), None, "{f} cleared");
    }
    assert_eq!(snap.field(&jid(1), "n").as_deref(), Some("job"), "immutable fields stay");
    let kinds: Vec<String> = q
        .events(&mut c)
        .iter()
        .map(|e| format!("{}:{}", e[1], e.get(5).cloned().unwrap_or_default()))
        .collect();
    assert!(kinds.contains(&"waiting:completed".to_string()), "{kinds:?}");
}

#[test]
fn retention_keeps_the_newest_and_deletes_the_rest() {
    let (_s, mut c, q) = queue_on_quiet_server("keep");
    for i in 1..=6 {
        q.enqueue(&mut c, &jid(i), &[]);
    }
    let got = claim(&q, &mut c, "t", 60_000, 6);
    for (i, j) in got.iter().enumerate() {
        let keep = if i < 4 { "-1" } else { "2" };
        q.run(&mut c, "EMQ.COMPLETE", &j[0], &[b"t", b"r", b"KEEP", keep.as_bytes()]);
        std::thread::sleep(std::time::Duration::from_millis(3));
    }
    let snap = q.check_invariant(&mut c);
    assert_eq!(snap.sets["completed"], [jid(5), jid(6)]);
    assert_eq!(snap.rows.len(), 2, "trimmed rows are deleted");
    assert!(info_field(&mut c, "trafikey", "trafikey_retired").parse::<u64>().unwrap() >= 4);
    // KEEP 0 deletes the finished job at once
    q.enqueue(&mut c, &jid(7), &[]);
    claim(&q, &mut c, "t", 60_000, 1);
    assert_eq!(q.run(&mut c, "EMQ.COMPLETE", &jid(7), &[b"t", b"r", b"KEEP", b"0"]), Reply::Int(1));
    assert_eq!(c.call(&[b"EXISTS", q.job(&jid(7)).as_bytes()]), Reply::Int(0));
    // the config default applies without KEEP, and bounds failed jobs too
    c.call(&[b"CONFIG", b"SET", b"trafikey.keep-failed", b"1"]);
    for i in 20..23 {
        q.enqueue(&mut c, &jid(i), &[]);
        claim(&q, &mut c, "t", 60_000, 1);
        assert_eq!(q.run(&mut c, "EMQ.FAIL", &jid(i), &[b"t", b"e"]), Reply::Simple("failed".into()));
    }
    let snap = q.check_invariant(&mut c);
    assert_eq!(snap.sets["failed"], [jid(22)]);
    // AGE drops finished jobs older than that
    std::thread::sleep(std::time::Duration::from_millis(50));
    q.enqueue(&mut c, &jid(30), &[]);
    claim(&q, &mut c, "t", 60_000, 1);
    q.run(&mut c, "EMQ.COMPLETE", &jid(30), &[b"t", b"r", b"KEEP", b"-1", b"AGE", b"20"]);
    assert_eq!(q.check_invariant(&mut c).sets["completed"], [jid(30)]);
    // a bad config value is refused by the server
    assert!(c.call(&[b"CONFIG", b"SET", b"trafikey.keep-failed", b"-2"]).err().is_some());
}

#[test]
fn claim_count_is_bounded_and_orphans_are_dropped() {
    let (_s, mut c, q) = queue_on_quiet_server("orphan");
    for i in 1..=5 {
        q.enqueue(&mut c, &jid(i), &[]);
    }
    // an id in a set without its row: dropped and counted, never a reason to refuse
    c.call(&[b"DEL", q.job(&jid(2)).as_bytes()]);
    let got = claim(&q, &mut c, "t", 60_000, 3);
    assert_eq!(ids(&got), [jid(1), jid(3)]);
    assert_eq!(info_field(&mut c, "trafikey", "trafikey_orphans"), "1");
    q.check_invariant(&mut c);
    for (class, args) in [
        ("EMQARG", vec![&b"t"[..], b"1000", b"COUNT", b"0"]),
        ("EMQARG", vec![b"t", b"1000", b"COUNT", b"1001"]),
        ("EMQARG", vec![b"t", b"0"]),
        ("EMQARG", vec![b"t", b"2147483649"]),
        ("EMQARG", vec![b"", b"1000"]),
        ("EMQSHAPE", vec![b"t", b"1000", b"COUNT"]),
        ("EMQSHAPE", vec![b"t", b"1000", b"COUNT", b"1", b"COUNT", b"2"]),
        ("EMQSHAPE", vec![b"t", b"-x"]),
        ("EMQSHAPE", vec![b"t"]),
        ("EMQSHAPE", vec![]),
        ("EMQSHAPE", vec![b"PAUSE", b"RESUME"]),
    ] {
        let e = unchanged(&mut c, |c| q.run(c, "EMQ.CLAIM", "", &args));
        assert!(e.error().starts_with(class), "{args:?}: {e:?}");
    }
    let long = vec![b't'; 129];
    assert!(unchanged(&mut c, |c| q.run(c, "EMQ.CLAIM", "", &[&long, b"1000"]))
        .error()
        .starts_with("EMQARG"));
}

#[test]
fn every_verb_refuses_bad_input_and_writes_nothing() {
    let (_s, mut c, q) = queue_on_quiet_server("bad");
    q.enqueue(&mut c, &jid(1), &[]);
    q.run(&mut c, "EMQ.SCHEDULE", &jid(2), &[b"+600000", b"n", b"d"]);
    claim(&q, &mut c, "t", 60_000, 1);
    let long = vec![b'x'; 129];
    let cases: Vec<(&str, &str, Vec<&[u8]>, &str)> = vec![
        ("EMQ.EXTEND", "JOBbad", vec![b"t", b"10"], "EMQID"),
        ("EMQ.EXTEND", "x", vec![b"t", b"10"], "EMQID"),
        ("EMQ.EXTEND", "1", vec![b"t"], "EMQSHAPE"),
        ("EMQ.EXTEND", "1", vec![b"t", b"-5"], "EMQARG"),
        ("EMQ.EXTEND", "1", vec![b"t", b"99999999999999999999"], "EMQSHAPE"),
        ("EMQ.EXTEND", "1", vec![&long, b"5"], "EMQARG"),
        ("EMQ.COMPLETE", "1", vec![b"t"], "EMQSHAPE"),
        ("EMQ.COMPLETE", "1", vec![b"t", b"r", b"KEEP", b"-2"], "EMQARG"),
        ("EMQ.COMPLETE", "1", vec![b"t", b"r", b"KEEP"], "EMQSHAPE"),
        ("EMQ.COMPLETE", "1", vec![b"t", b"r", b"AGE", b"-1"], "EMQARG"),
        ("EMQ.COMPLETE", "1", vec![b"t", b"r", b"FINAL"], "EMQSHAPE"),
        ("EMQ.FAIL", "1", vec![b"t", b"e", b"FINAL", b"FINAL"], "EMQSHAPE"),
        ("EMQ.FAIL", "1", vec![b"t", b"e", b"LIFO"], "EMQSHAPE"),
        ("EMQ.DELAY", "1", vec![b"t", b"soon"], "EMQSHAPE"),
        ("EMQ.DELAY", "1", vec![b"t", b"9007199254740992"], "EMQARG"),
        ("EMQ.SCHEDULE", "3", vec![b"+-1", b"n", b"d"], "EMQSHAPE"),
        ("EMQ.SCHEDULE", "3", vec![b"+1", b"n"], "EMQSHAPE"),
        ("EMQ.SCHEDULE", "3", vec![b"+1", b"n", b"d", b"LIFO"], "EMQSHAPE"),
        ("EMQ.SCHEDULE", "3", vec![b"+1", b"", b"d"], "EMQARG"),
        ("EMQ.SCHEDULE", "3", vec![b"9007199254740992", b"n", b"d"], "EMQARG"),
        ("EMQ.RESCHEDULE", "2", vec![], "EMQSHAPE"),
        ("EMQ.RESCHEDULE", "9", vec![b"+5"], "EMQNOJOB"),
        ("EMQ.PROMOTE", "2", vec![b"x"], "EMQSHAPE"),
        ("EMQ.PROMOTE", "1", vec![], "EMQSTATE"),
        ("EMQ.REQUEUE", "1", vec![], "EMQSHAPE"),
        ("EMQ.REQUEUE", "9", vec![b"t"], "EMQNOJOB"),
        ("EMQ.STALLED", "", vec![b"COUNT", b"0"], "EMQARG"),
        ("EMQ.STALLED", "", vec![b"COUNT", b"10001"], "EMQARG"),
        ("EMQ.STALLED", "", vec![b"MAXSTALLS", b"-1"], "EMQARG"),
        ("EMQ.STALLED", "", vec![b"MAXSTALLS"], "EMQSHAPE"),
        ("EMQ.STALLED", "", vec![b"BOGUS"], "EMQSHAPE"),
    ];
    for (verb, n, args, class) in &cases {
        let id = if n.len() <= 2 { n.parse::<u64>().map(jid).unwrap_or_default() } else { n.to_string() };
        let id = if *n == "x" { "x".to_string() } else { id };
        let e = unchanged(&mut c, |c| q.run(c, verb, &id, args));
        assert!(e.error().starts_with(class), "{verb} {id} {args:?}: {e:?}");
    }
    // EXTENDS: pairs, ids, tokens
    let a = q.k("active");
    for (args, class) in [
        (vec![&b"EMQ.EXTENDS"[..], b"1", a.as_bytes(), b"100"], "EMQSHAPE"),
        (vec![b"EMQ.EXTENDS", b"1", a.as_bytes(), b"100", b"JOB00000000001"], "EMQSHAPE"),
        (vec![b"EMQ.EXTENDS", b"1", a.as_bytes(), b"100", b"JOBx", b"t"], "EMQID"),
        (vec![b"EMQ.EXTENDS", b"1", a.as_bytes(), b"0", b"JOB00000000001", b"t"], "EMQARG"),
        (vec![b"EMQ.EXTENDS", b"1", a.as_bytes(), b"10", b"JOB00000000001", b""], "EMQARG"),
        (vec![b"EMQ.EXTENDS", b"1", q.k("wait").as_bytes(), b"10", b"JOB00000000001", b"t"], "EMQLAYOUT"),
    ] {
        let e = unchanged(&mut c, |c| c.call(&args));
        assert!(e.error().starts_with(class), "{args:?}: {e:?}");
    }
    // a row overwritten with another type by hand: WRONGTYPE, nothing written
    c.call(&[b"DEL", q.job(&jid(1)).as_bytes()]);
    c.call(&[b"SET", q.job(&jid(1)).as_bytes(), b"oops"]);
    for (verb, args) in
        [("EMQ.COMPLETE", vec![&b"t"[..], b"r"]), ("EMQ.EXTEND", vec![b"t", b"5"]), ("EMQ.PROMOTE", vec![])]
    {
        let e = unchanged(&mut c, |c| q.run(c, verb, &jid(1), &args));
        assert!(e.error().starts_with("WRONGTYPE"), "{verb}: {e:?}");
    }
    // STALLED meeting a wrong-typed row refuses whole
    std::thread::sleep(std::time::Duration::from_millis(10));
    c.call(&[b"ZADD", q.k("active").as_bytes(), b"1", jid(1).as_bytes()]);
    let e = unchanged(&mut c, |c| q.run(c, "EMQ.STALLED", "", &[]));
    assert!(e.error().starts_with("WRONGTYPE"), "{e:?}");
}

#[test]
fn undeclared_rows_are_opened_as_the_caller() {
    let s = Server::quiet();
    let mut admin = s.conn();
    let q = Q::new("acl");
    for i in 1..=3 {
        q.enqueue(&mut admin, &jid(i), &[]);
    }
    // The worker may touch every role of the queue but the row of job 2.
    admin.call(&[
        b"ACL",
        b"SETUSER",
        b"w",
        b"on",
        b">pw",
        b"+@all",
        b"%R~{emq}:*",
        b"~emq:{acl}:wait",
        b"~emq:{acl}:prio",
        b"~emq:{acl}:active",
        b"~emq:{acl}:delayed",
        b"~emq:{acl}:meta",
        b"~emq:{acl}:events",
        b"~emq:{acl}:completed",
        b"~emq:{acl}:failed",
        b"~emq:{acl}:job:JOB00000000001",
        b"~emq:{acl}:job:JOB00000000003",
    ]);
    let mut w = s.conn();
    w.call(&[b"AUTH", b"w", b"pw"]);
    // CLAIM COUNT 2 would take jobs 1 and 2: refused before anything is written
    let before = digest(&mut admin);
    let e = q.run(&mut w, "EMQ.CLAIM", "", &[b"t", b"1000", b"COUNT", b"2"]);
    assert_eq!(e.error(), "NOPERM No permissions to access a key");
    assert_eq!(digest(&mut admin), before);
    assert_eq!(claim(&q, &mut w, "t", 50, 1).len(), 1);
    // STALLED, EXTENDS and retention check each row too
    let e = w.call(&[b"EMQ.EXTENDS", b"1", q.k("active").as_bytes(), b"100", jid(2).as_bytes(), b"t"]);
    assert!(e.error().starts_with("NOPERM"));
    claim(&q, &mut admin, "a", 50, 1); // job 2, held by admin
    std::thread::sleep(std::time::Duration::from_millis(150));
    let before = digest(&mut admin);
    let e = q.run(&mut w, "EMQ.STALLED", "", &[]);
    assert!(e.error().starts_with("NOPERM"), "{e:?}");
    assert_eq!(digest(&mut admin), before);
    let r = q.run(&mut admin, "EMQ.STALLED", "", &[]);
    assert_eq!(r.array()[0].array().len(), 2);
    q.check_invariant(&mut admin);
}

#[test]
fn replica_and_aof_hold_what_the_primary_holds() {
    let primary = Server::start(Opts {
        server_args: vec!["--appendonly".into(), "yes".into()],
        module_args: quiet(),
        ..Opts::default()
    });
    let replica = Server::start(Opts::default());
    let mut p = primary.conn();
    p.call(&[b"EMQ.INSTALL", b"1", b"{emq}:version"]);
    p.call(&[b"CONFIG", b"SET", b"trafikey.events-maxlen", b"50"]);
    p.call(&[b"CONFIG", b"SET", b"trafikey.keep-completed", b"20"]);
    let mut r = replica.follow(&primary);
    let q = Q::new("mix");
    // a mixed workload touching every verb
    for i in 0..200u64 {
        let prio = (i % 4).to_string();
        q.enqueue(
            &mut p,
            &jid(i),
            &[b"PRIORITY", prio.as_bytes(), b"ATTEMPTS", b"2", b"BACKOFF", b"FIXED", b"1"],
        );
    }
    for i in 200..220u64 {
        q.run(&mut p, "EMQ.SCHEDULE", &jid(i), &[b"+1", b"later", b"d"]);
    }
    std::thread::sleep(std::time::Duration::from_millis(5));
    for round in 0..10 {
        let got = claim(&q, &mut p, "w", if round % 3 == 0 { 1 } else { 60_000 }, 20);
        for (k, j) in got.iter().enumerate() {
            match k % 5 {
                0 => drop(q.run(&mut p, "EMQ.COMPLETE", &j[0], &[b"w", b"ok"])),
                1 => drop(q.run(&mut p, "EMQ.FAIL", &j[0], &[b"w", b"no"])),
                2 => drop(q.run(&mut p, "EMQ.DELAY", &j[0], &[b"w", b"+1"])),
                3 => drop(q.run(&mut p, "EMQ.EXTEND", &j[0], &[b"w", b"5"])),
                _ => drop(q.run(&mut p, "EMQ.REQUEUE", &j[0], &[b"w"])),
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
        q.run(&mut p, "EMQ.STALLED", "", &[b"MAXSTALLS", b"1"]);
    }
    let done = p.call(&[b"ZRANGE", q.k("completed").as_bytes(), b"0", b"-1"]).strings();
    for id in done.iter().take(3) {
        q.run(&mut p, "EMQ.REPROCESS", id, &[]);
    }
    q.check_invariant(&mut p);
    assert_eq!(p.call(&[b"WAIT", b"1", b"5000"]), Reply::Int(1));
    assert_eq!(digest(&mut p), digest(&mut r), "replica digest");
    let stats = r.call(&[b"INFO", b"commandstats"]).str();
    assert!(!stats.contains("cmdstat_emq."), "the replica ran no verb: {stats}");
    // AOF: rewrite, more work, restart from the AOF
    p.call(&[b"BGREWRITEAOF"]);
    wait_for(|| info_field(&mut p, "persistence", "aof_rewrite_in_progress") == "0", "aof rewrite");
    let got = claim(&q, &mut p, "z", 60_000, 10);
    for j in &got {
        q.run(&mut p, "EMQ.COMPLETE", &j[0], &[b"z", b"ok"]);
    }
    let want = digest(&mut p);
    assert_eq!(p.call(&[b"WAIT", b"1", b"5000"]), Reply::Int(1));
    assert_eq!(digest(&mut r), want);
    let primary = primary.restart();
    let mut p = primary.conn();
    wait_for(|| info_field(&mut p, "persistence", "loading") == "0", "aof load");
    assert_eq!(digest(&mut p), want, "AOF replay");
}

#[test]
fn info_counts_calls_promotions_and_reclaims() {
    let (_s, mut c, q) = queue_on_quiet_server("info");
    q.run(&mut c, "EMQ.SCHEDULE", &jid(1), &[b"+0", b"n", b"d"]);
    q.enqueue(&mut c, &jid(2), &[]);
    claim(&q, &mut c, "t", 20, 5);
    std::thread::sleep(std::time::Duration::from_millis(100));
    q.run(&mut c, "EMQ.STALLED", "", &[]);
    assert_eq!(info_field(&mut c, "trafikey", "trafikey_promoted"), "1");
    assert_eq!(info_field(&mut c, "trafikey", "trafikey_reclaimed"), "2");
    assert_eq!(info_field(&mut c, "trafikey", "trafikey_calls_emq_claim"), "1");
    assert_eq!(info_field(&mut c, "trafikey", "trafikey_calls_emq_stalled"), "1");
    // events off
    c.call(&[b"CONFIG", b"SET", b"trafikey.events-maxlen", b"0"]);
    c.call(&[b"DEL", q.k("events").as_bytes()]);
    q.enqueue(&mut c, &jid(3), &[]);
    assert_eq!(c.call(&[b"EXISTS", q.k("events").as_bytes()]), Reply::Int(0));
    q.check_invariant(&mut c);
}

#[test]
fn the_events_stream_is_capped() {
    let (_s, mut c, q) = queue_on_quiet_server("cap");
    c.call(&[b"CONFIG", b"SET", b"trafikey.events-maxlen", b"10"]);
    for i in 0..500 {
        q.enqueue(&mut c, &jid(i), &[]);
    }
    let len = c.call(&[b"XLEN", q.k("events").as_bytes()]).int();
    assert!(len <= 200, "MAXLEN ~ keeps the stream near its cap, got {len}");
    assert!(len >= 10);
}

#[test]
fn a_full_server_refuses_producers_but_still_drains() {
    let (_s, mut c, q) = queue_on_quiet_server("oom");
    q.enqueue(&mut c, &jid(1), &[]);
    q.enqueue(&mut c, &jid(2), &[]);
    claim(&q, &mut c, "t", 60_000, 2);
    c.call(&[b"CONFIG", b"SET", b"maxmemory", b"1"]);
    // Producers are deny-oom: the server refuses them before the module runs.
    let e = unchanged(&mut c, |c| q.enqueue(c, &jid(3), &[]));
    assert!(e.error().starts_with("OOM"), "{e:?}");
    let e = q.run(&mut c, "EMQ.SCHEDULE", &jid(4), &[b"+10", b"n", b"d"]);
    assert!(e.error().starts_with("OOM"), "{e:?}");
    // The verbs that move or finish jobs are not: workers keep draining a full server.
    assert_eq!(q.run(&mut c, "EMQ.COMPLETE", &jid(1), &[b"t", b"ok"]), Reply::Int(1));
    assert_eq!(q.run(&mut c, "EMQ.FAIL", &jid(2), &[b"t", b"no"]), Reply::Simple("failed".into()));
    c.call(&[b"CONFIG", b"SET", b"maxmemory", b"0"]);
    q.check_invariant(&mut c);
}

fn reclaimed(c: &mut Conn) -> i64 {
    info_field(c, "trafikey", "trafikey_reclaimed").parse().unwrap()
}

/// queue.rs `Retire::plan`: `(ids.len() as u64) < by_count` → `<=` (one row too many
/// deleted by KEEP n).
#[test]
fn keep_n_keeps_exactly_the_n_newest() {
    let s = Server::quiet();
    let mut c = s.conn();
    let q = Q::new("keepn");
    let ids: Vec<String> = (1..=6).map(jid).collect();
    finished(&q, &mut c, &ids, "w");
    for (i, id) in ids.iter().enumerate() {
        assert_eq!(complete(&q, &mut c, id, "w", &[b"KEEP", b"2"]), Reply::Int(1));
        let keep: Vec<String> = ids[i.saturating_sub(1)..=i].to_vec();
        assert_eq!(completed(&q, &mut c), keep, "after completing {id} with KEEP 2");
    }
    q.check_invariant(&mut c);
}

/// queue.rs `Retire::plan`: `take && (ids.len() as u64) < batch` → `take || …` and → `<=`
/// (AGE retires more than `trafikey.retention-batch` rows in one call).
#[test]
fn age_retires_at_most_one_batch_a_call() {
    let s = Server::quiet();
    let mut c = s.conn();
    assert_eq!(c.call(&[b"CONFIG", b"SET", b"trafikey.retention-batch", b"2"]), Reply::Simple("OK".into()));
    let q = Q::new("agebatch");
    let ids: Vec<String> = (1..=6).map(jid).collect();
    finished(&q, &mut c, &ids, "w");
    for id in &ids[..5] {
        assert_eq!(complete(&q, &mut c, id, "w", &[b"KEEP", b"-1"]), Reply::Int(1));
    }
    std::thread::sleep(std::time::Duration::from_millis(5));
    // AGE 0: all five finished before now; a batch of 2 goes, the oldest first.
    assert_eq!(complete(&q, &mut c, &ids[5], "w", &[b"KEEP", b"-1", b"AGE", b"0"]), Reply::Int(1));
    assert_eq!(completed(&q, &mut c), ids[2..].to_vec());
    q.check_invariant(&mut c);
}

/// queue.rs `Retire::plan`: `score < c` → `score <= c` (AGE also retires a job finished
/// exactly at now−AGE). In one MULTI the server clock stands still, so a job completed in it
/// finished exactly at now.
#[test]
fn age_retires_only_jobs_finished_before_the_cutoff() {
    let s = Server::quiet();
    let mut c = s.conn();
    let q = Q::new("agecut");
    let ids: Vec<String> = (1..=2).map(jid).collect();
    finished(&q, &mut c, &ids, "w");
    assert_eq!(c.call(&[b"MULTI"]), Reply::Simple("OK".into()));
    for (id, opts) in [(&ids[0], &[&b"KEEP"[..], b"-1"][..]), (&ids[1], &[b"KEEP", b"-1", b"AGE", b"0"])] {
        let mut a: Vec<&[u8]> = vec![b"w", b"ok"];
        a.extend_from_slice(opts);
        let v = q.cmd("EMQ.COMPLETE", id, &keys_of("EMQ.COMPLETE"), &a);
        let refs: Vec<&[u8]> = v.iter().map(Vec::as_slice).collect();
        assert_eq!(c.call(&refs), Reply::Simple("QUEUED".into()));
    }
    assert_eq!(c.call(&[b"EXEC"]), Reply::Array(vec![Reply::Int(1), Reply::Int(1)]));
    let snap = q.check_invariant(&mut c);
    assert_eq!(snap.field(&ids[0], "f"), snap.field(&ids[1], "f"), "one instant in a MULTI");
    assert_eq!(completed(&q, &mut c), ids, "finished at now − 0 is not before it");
}

/// verbs/extends.rs: `a.pairs.len() > EXTENDS_PAIRS_MAX` → `==` and → `>=` (250 pairs are
/// allowed, 251 are not).
#[test]
fn extends_takes_up_to_two_hundred_and_fifty_pairs() {
    let s = Server::quiet();
    let mut c = s.conn();
    let q = Q::new("ext");
    assert_eq!(q.enqueue(&mut c, &jid(1), &[]), Reply::Int(1));
    assert_eq!(claim_all(&q, &mut c, "w"), [jid(1)]);
    let extends = |c: &mut Conn, pairs: usize| {
        let mut v: Vec<Vec<u8>> =
            vec![b"EMQ.EXTENDS".to_vec(), b"1".to_vec(), q.k("active").into_bytes(), b"30000".to_vec()];
        for _ in 0..pairs {
            v.push(jid(1).into_bytes());
            v.push(b"w".to_vec());
        }
        let refs: Vec<&[u8]> = v.iter().map(Vec::as_slice).collect();
        c.call(&refs)
    };
    let r = extends(&mut c, 250);
    assert_eq!(r.array().len(), 250, "{r:?}");
    assert!(r.array().iter().all(|d| d.int() > 0));
    let r = unchanged(&mut c, |c| extends(c, 251));
    assert!(r.err().is_some_and(|e| e.starts_with("EMQARG") && e.contains("at most 250 pairs")), "{r:?}");
}

/// verbs/stalled.rs: `requeued.len() + dead.len()` → `-` (INFO's `reclaimed` counts both).
#[test]
fn stalled_counts_requeued_and_failed_leases_as_reclaimed() {
    let s = Server::quiet();
    let mut c = s.conn();
    let q = Q::new("recl");
    for i in 1..=3 {
        assert_eq!(q.enqueue(&mut c, &jid(i), &[]), Reply::Int(1));
    }
    // Two leases expire with no stall yet, one after a stall: MAXSTALLS 1 requeues two and
    // fails the third.
    let r = q.run(&mut c, "EMQ.CLAIM", "", &[b"w", b"20", b"COUNT", b"1"]);
    assert_eq!(r.array().len(), 1);
    std::thread::sleep(std::time::Duration::from_millis(40));
    let r = q.run(&mut c, "EMQ.STALLED", "", &[b"MAXSTALLS", b"1"]);
    assert_eq!(r.array()[0].strings(), [jid(1)]);
    let r = q.run(&mut c, "EMQ.CLAIM", "", &[b"w", b"20", b"COUNT", b"3"]);
    assert_eq!(r.array().len(), 3);
    std::thread::sleep(std::time::Duration::from_millis(40));
    let before = reclaimed(&mut c);
    let r = q.run(&mut c, "EMQ.STALLED", "", &[b"MAXSTALLS", b"1"]);
    let (mut requeued, dead) = (r.array()[0].strings(), r.array()[1].strings());
    requeued.sort();
    assert_eq!((requeued, dead), (vec![jid(2), jid(3)], vec![jid(1)]));
    assert_eq!(reclaimed(&mut c) - before, 3);
    q.check_invariant(&mut c);
}

/// verbs/fail.rs: `next == AfterFail::Fail && keep == Keep::None` → `||`, and verbs/stalled.rs:
/// `matches!(fate, Fate::Fail { .. }) && keep == Keep::None` → `||`: a job that is retried or
/// requeued keeps its log, so neither FAIL nor STALLED opens it — a caller without access to
/// logs is not refused.
#[test]
fn a_retry_or_requeue_under_keep_zero_leaves_the_log_unopened() {
    let s = Server::start(Opts {
        module_args: vec!["upkeep".into(), "no".into(), "keep-failed".into(), "0".into()],
        ..Opts::default()
    });
    let mut admin = s.conn();
    admin.call(&[b"EMQ.INSTALL", b"1", b"{emq}:version"]);
    let q = Q::new("nolog");
    no_log_user(&mut admin, &q);
    let mut w = s.conn();
    assert_eq!(w.call(&[b"AUTH", b"nolog", b"pw"]), Reply::Simple("OK".into()));

    // FAIL with attempts left, KEEP 0: retried, the log untouched.
    assert_eq!(q.enqueue(&mut admin, &jid(1), &[b"ATTEMPTS", b"3"]), Reply::Int(1));
    assert_eq!(claim_all(&q, &mut w, "w"), [jid(1)]);
    log_line(&mut admin, &q, &jid(1), "w");
    let r = q.run(&mut w, "EMQ.FAIL", &jid(1), &[b"w", b"boom", b"KEEP", b"0"]);
    assert!(r.err().is_none(), "{r:?}");
    assert_eq!(q.snapshot(&mut admin).state_of(&jid(1)).as_deref(), Some("wait"));

    // STALLED requeues (MAXSTALLS 1) under keep-failed 0: the log untouched.
    let r = q.run(&mut w, "EMQ.CLAIM", "", &[b"w2", b"20"]);
    assert_eq!(r.array().len(), 1);
    log_line(&mut admin, &q, &jid(1), "w2");
    std::thread::sleep(std::time::Duration::from_millis(40));
    let r = q.run(&mut w, "EMQ.STALLED", "", &[b"MAXSTALLS", b"1"]);
    assert!(r.err().is_none(), "{r:?}");
    assert_eq!(r.array()[0].strings(), [jid(1)]);

    // And the user really has no access to logs: failing the job for good under KEEP 0 would
    // delete its log, and is refused, writing nothing.
    assert_eq!(claim_all(&q, &mut w, "w3"), [jid(1)]);
    log_line(&mut admin, &q, &jid(1), "w3");
    let r = unchanged(&mut admin, |_| {
        q.run(&mut w, "EMQ.FAIL", &jid(1), &[b"w3", b"boom", b"FINAL", b"KEEP", b"0"])
    });
    assert!(r.err().is_some_and(|e| e.starts_with("NOPERM")), "{r:?}");
    q.check_invariant(&mut admin);
}

/// PROMOTE puts a job at the back of `wait`, behind the jobs already waiting (as upkeep's
/// promotion does); REQUEUE puts its job at the front, to be claimed next.
#[test]
fn promote_queues_at_the_back_and_requeue_at_the_front() {
    let s = Server::quiet();
    let mut c = s.conn();
    let q = Q::new("ends");
    assert_eq!(q.run(&mut c, "EMQ.SCHEDULE", &jid(1), &[b"+600000", b"j", b"{}"]), Reply::Int(1));
    for n in [2, 3] {
        assert_eq!(q.enqueue(&mut c, &jid(n), &[]), Reply::Int(1));
    }
    assert_eq!(q.run(&mut c, "EMQ.PROMOTE", &jid(1), &[]), Reply::Int(1));
    let one = q.run(&mut c, "EMQ.CLAIM", "", &[b"w", b"60000"]);
    assert_eq!(one.array()[0].array()[0].str(), jid(2));
    assert_eq!(q.run(&mut c, "EMQ.REQUEUE", &jid(2), &[b"w"]), Reply::Int(1));
    assert_eq!(claim_all(&q, &mut c, "w"), [jid(2), jid(3), jid(1)]);
}

/// promote.rs and reschedule.rs, `state != Delayed || not in delayed` → `&&`: PROMOTE and
/// RESCHEDULE need both — the row's state and the id in `delayed`. A row whose state was
/// written `delayed` by hand while the job waits is refused by both, so the job is neither put
/// in `wait` a second time nor added to `delayed` beside it.
#[test]
fn promote_and_reschedule_need_the_state_and_the_set_to_agree() {
    let s = Server::quiet();
    let mut c = s.conn();
    let q = Q::new("agree");
    assert_eq!(q.enqueue(&mut c, &jid(1), &[]), Reply::Int(1));
    assert_eq!(c.call(&[b"HSET", q.job(&jid(1)).as_bytes(), b"st", b"delayed"]), Reply::Int(0));
    for (verb, args) in [("EMQ.PROMOTE", &[][..]), ("EMQ.RESCHEDULE", &[&b"+5000"[..]][..])] {
        let r = unchanged(&mut c, |c| q.run(c, verb, &jid(1), args));
        assert!(r.err().is_some_and(|e| e.starts_with("EMQSTATE")), "{verb}: {r:?}");
    }
    assert_eq!(c.call(&[b"LRANGE", q.k("wait").as_bytes(), b"0", b"-1"]).strings(), [jid(1)]);
    assert_eq!(c.call(&[b"ZCARD", q.k("delayed").as_bytes()]), Reply::Int(0));
}

/// host/store.rs `Key::zadd_existing`: `call failed || NOP` → `&&` (a member not in the set
/// reported moved, and a ZADD replicated that would add it): EXTENDS renews only a job that is
/// in `active`. A row that says held while its id is not in `active` (the set written by hand)
/// answers 0 and nothing is written, here or on a replica.
#[test]
fn extends_renews_only_what_is_in_active() {
    let primary = Server::quiet();
    let replica = Server::start(Opts { module_args: vec!["upkeep".into(), "no".into()], ..Opts::default() });
    let mut r = replica.follow(&primary);
    let mut c = primary.conn();
    let q = Q::new("ghost");
    for n in 1..=2 {
        assert_eq!(q.enqueue(&mut c, &jid(n), &[]), Reply::Int(1));
    }
    assert_eq!(claim_all(&q, &mut c, "w"), [jid(1), jid(2)]);
    assert_eq!(c.call(&[b"ZREM", q.k("active").as_bytes(), jid(2).as_bytes()]), Reply::Int(1));
    let v = q.cmd(
        "EMQ.EXTENDS",
        "",
        &keys_of("EMQ.EXTENDS"),
        &[b"60000", jid(1).as_bytes(), b"w", jid(2).as_bytes(), b"w"],
    );
    let v: Vec<&[u8]> = v.iter().map(Vec::as_slice).collect();
    let got = c.call(&v);
    assert!(got.array()[0].int() > 0, "{got:?}");
    assert_eq!(got.array()[1], Reply::Int(0), "not in active: not held");
    assert_eq!(c.call(&[b"ZCARD", q.k("active").as_bytes()]), Reply::Int(1));
    c.call(&[b"WAIT", b"1", b"2000"]);
    wait_for(|| digest(&mut c) == digest(&mut r), "the replica holds what the primary holds");
}

/// An id a CLAIM meets twice (here `wait` holds it twice, which no verb does: a client wrote
/// it) is taken once; the second entry is dropped with the first. Expired under keep-failed
/// 0, the job is failed and deleted once, and nothing else is touched (`scripts/memcheck
/// jobs` watches the server for a handle left on the deleted row).
#[test]
fn an_id_met_twice_in_one_claim_is_taken_once() {
    let s = Server::start(Opts {
        module_args: vec!["upkeep".into(), "no".into(), "keep-failed".into(), "0".into()],
        ..Opts::default()
    });
    let mut c = s.conn();
    assert_eq!(c.call(&[b"EMQ.INSTALL", b"1", b"{emq}:version"]), Reply::Int(1));
    let q = Q::new("twice");
    let wait = q.k("wait");
    assert_eq!(q.enqueue(&mut c, &jid(1), &[]), Reply::Int(1));
    c.call(&[b"LPUSH", wait.as_bytes(), jid(1).as_bytes()]);
    assert_eq!(ids(&claim(&q, &mut c, "w", 60000, 2)), [jid(1)]);
    assert_eq!(c.call(&[b"EXISTS", wait.as_bytes()]), Reply::Int(0), "both entries dropped");
    q.run(&mut c, "EMQ.COMPLETE", &jid(1), &[b"w", b"ok"]);
    q.check_invariant(&mut c);
    // Expired: failed at once, its row deleted; the second entry goes too.
    assert_eq!(q.enqueue(&mut c, &jid(2), &[b"EXPIRE", b"+1"]), Reply::Int(1));
    c.call(&[b"LPUSH", wait.as_bytes(), jid(2).as_bytes()]);
    std::thread::sleep(std::time::Duration::from_millis(5));
    assert!(claim(&q, &mut c, "w", 60000, 2).is_empty());
    for key in [wait.clone(), q.job(&jid(2))] {
        assert_eq!(c.call(&[b"EXISTS", key.as_bytes()]), Reply::Int(0), "{key}");
    }
    let failed: Vec<String> =
        q.events(&mut c).iter().filter(|e| e[1] == "failed").map(|e| e[3].clone()).collect();
    assert_eq!(failed, [jid(2)], "failed once");
    q.check_invariant(&mut c);
}
