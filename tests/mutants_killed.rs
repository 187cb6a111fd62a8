//! Tests that kill mutants cargo-mutants found surviving the fast server tests
//! (scripts/mutants; the list, and the mutants written down as equivalent, in tests/MUTANTS.md).
//! Each test names the mutants it kills.

use trafikey_support::*;

fn claim_all(q: &Q, c: &mut Conn, token: &str) -> Vec<String> {
    let r = q.run(c, "EMQ.CLAIM", "", &[token.as_bytes(), b"60000", b"COUNT", b"100"]);
    r.array().iter().map(|j| j.array()[0].str()).collect()
}

fn complete(q: &Q, c: &mut Conn, id: &str, token: &str, opts: &[&[u8]]) -> Reply {
    let mut a: Vec<&[u8]> = vec![token.as_bytes(), b"ok"];
    a.extend_from_slice(opts);
    q.run(c, "EMQ.COMPLETE", id, &a)
}

fn completed(q: &Q, c: &mut Conn) -> Vec<String> {
    c.call(&[b"ZRANGE", q.k("completed").as_bytes(), b"0", b"-1"]).strings()
}

/// `n` jobs enqueued, claimed by `token` and completed with KEEP -1 (nothing retired).
fn finished(q: &Q, c: &mut Conn, ids: &[String], token: &str) {
    for id in ids {
        assert_eq!(q.enqueue(c, id, &[]), Reply::Int(1));
    }
    assert_eq!(claim_all(q, c, token).len(), ids.len());
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
        let v = q.cmd("EMQ.COMPLETE", id, keys_of("EMQ.COMPLETE"), &a);
        let refs: Vec<&[u8]> = v.iter().map(Vec::as_slice).collect();
        assert_eq!(c.call(&refs), Reply::Simple("QUEUED".into()));
    }
    assert_eq!(c.call(&[b"EXEC"]), Reply::Array(vec![Reply::Int(1), Reply::Int(1)]));
    let snap = q.check_invariant(&mut c);
    assert_eq!(snap.field(&ids[0], "f"), snap.field(&ids[1], "f"), "one instant in a MULTI");
    assert_eq!(completed(&q, &mut c), ids, "finished at now − 0 is not before it");
}

/// queue.rs `exists` → `()` (a queue whose first job was just created is not listed). Upkeep
/// is off, so no scan finds it: only the verb's own note does.
#[test]
fn the_first_job_makes_its_queue_known() {
    let s = Server::quiet();
    let mut c = s.conn();
    assert_eq!(c.call(&[b"TRA.QUEUES"]), Reply::Array(vec![Reply::Int(-1), Reply::Array(vec![])]));
    let q = Q::new("known");
    assert_eq!(q.enqueue(&mut c, &jid(1), &[]), Reply::Int(1));
    assert_eq!(
        c.call(&[b"TRA.QUEUES"]),
        Reply::Array(vec![Reply::Int(-1), Reply::Array(vec![Reply::Bulk(b"known".to_vec())])])
    );
}

/// verbs/extends.rs: `a.pairs.len() > EXTENDS_PAIRS_MAX` → `==` and → `>=` (1000 pairs are
/// allowed, 1001 are not).
#[test]
fn extends_takes_up_to_a_thousand_pairs() {
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
    let r = extends(&mut c, 1000);
    assert_eq!(r.array().len(), 1000, "{r:?}");
    assert!(r.array().iter().all(|d| d.int() > 0));
    let r = unchanged(&mut c, |c| extends(c, 1001));
    assert!(r.err().is_some_and(|e| e.starts_with("EMQARG") && e.contains("at most 1000 pairs")), "{r:?}");
}

fn reclaimed(c: &mut Conn) -> i64 {
    info_field(c, "trafikey", "trafikey_reclaimed").parse().unwrap()
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

/// A worker whose keys are the queue's roles and job rows, but not the jobs' logs.
fn no_log_user(admin: &mut Conn, q: &Q) -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = ["ACL", "SETUSER", "nolog", "on", ">pw", "-@all", "+@emq", "%R~{emq}:*"]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .collect();
    for role in ["wait", "prio", "active", "delayed", "completed", "failed", "meta", "events", "job:*"] {
        v.push(format!("~{}", q.k(role)).into_bytes());
    }
    let refs: Vec<&[u8]> = v.iter().map(Vec::as_slice).collect();
    assert_eq!(admin.call(&refs), Reply::Simple("OK".into()));
    v
}

fn log_line(c: &mut Conn, q: &Q, id: &str, token: &str) {
    let log_key = format!("emq:{{{}}}:log:{id}", q.0);
    let r = c.call(&[b"TRA.LOG", b"2", q.job(id).as_bytes(), log_key.as_bytes(), token.as_bytes(), b"line"]);
    assert!(r.err().is_none(), "{r:?}");
    assert_eq!(c.call(&[b"EXISTS", log_key.as_bytes()]), Reply::Int(1));
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

/// clean.rs `score < cutoff` → `<=` (a job finished exactly GRACE ms ago deleted): CLEAN
/// deletes what finished *more than* GRACE ms ago. A MULTI is one instant, so a job completed
/// in it finished 0 ms before a `CLEAN … GRACE 0` queued behind it.
#[test]
fn clean_deletes_only_what_finished_more_than_grace_ago() {
    let s = Server::quiet();
    let mut c = s.conn();
    let q = Q::new("cleancut");
    let ids = [jid(1)];
    finished(&q, &mut c, &ids, "w");
    let clean = q.cmd("TRA.CLEAN", "", &["completed", "events"], &[b"GRACE", b"0"]);
    let clean: Vec<&[u8]> = clean.iter().map(Vec::as_slice).collect();
    assert_eq!(c.call(&[b"MULTI"]), Reply::Simple("OK".into()));
    let done = q.cmd("EMQ.COMPLETE", &ids[0], keys_of("EMQ.COMPLETE"), &[b"w", b"ok", b"KEEP", b"-1"]);
    let done: Vec<&[u8]> = done.iter().map(Vec::as_slice).collect();
    assert_eq!(c.call(&done), Reply::Simple("QUEUED".into()));
    assert_eq!(c.call(&clean), Reply::Simple("QUEUED".into()));
    assert_eq!(c.call(&[b"EXEC"]), Reply::Array(vec![Reply::Int(1), Reply::Array(vec![])]));
    assert_eq!(completed(&q, &mut c), ids, "finished 0 ms ago is not more than 0 ms ago");
    std::thread::sleep(std::time::Duration::from_millis(3));
    assert_eq!(c.call(&clean).strings(), ids, "3 ms later it is");
}

/// completes.rs `jobs.len() > max` → `>=` (a full batch of 100 refused): TRA.COMPLETES takes
/// what one CLAIM hands out, 100 jobs, and refuses 101 with nothing written.
#[test]
fn completes_takes_a_full_claim_of_a_hundred() {
    let s = Server::quiet();
    let mut c = s.conn();
    let q = Q::new("full");
    for n in 1..=101 {
        assert_eq!(q.enqueue(&mut c, &jid(n), &[]), Reply::Int(1));
    }
    let held = claim_all(&q, &mut c, "w");
    assert_eq!(held.len(), 100);
    let triples = |ids: &[String]| -> Vec<Vec<u8>> {
        ids.iter().flat_map(|id| [id.clone().into_bytes(), b"w".to_vec(), b"ok".to_vec()]).collect()
    };
    let call = |c: &mut Conn, args: &[Vec<u8>]| {
        let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        let v = q.cmd("TRA.COMPLETES", "", &["active", "completed", "events"], &refs);
        let refs: Vec<&[u8]> = v.iter().map(Vec::as_slice).collect();
        c.call(&refs)
    };
    let mut over = held.clone();
    over.push(jid(101));
    let r = unchanged(&mut c, |c| call(c, &triples(&over)));
    assert!(r.err().is_some_and(|e| e.starts_with("EMQARG") && e.contains("at most 100 jobs")), "{r:?}");
    let r = call(&mut c, &triples(&held));
    assert_eq!(r.array().len(), 100);
    assert!(r.array().iter().all(|e| *e == Reply::Int(1)), "{r:?}");
}

/// completes.rs `keep == Keep::None` → `!=` (the jobs a TRA.COMPLETES finishes not counted by
/// retention): with `keep-completed 2`, finishing four jobs in one call keeps the two newest,
/// as four COMPLETEs would.
#[test]
fn completes_counts_what_it_finishes_for_retention() {
    let s = Server::quiet();
    let mut c = s.conn();
    assert_eq!(c.call(&[b"CONFIG", b"SET", b"trafikey.keep-completed", b"2"]), Reply::Simple("OK".into()));
    for (name, batch) in [("batch", true), ("single", false)] {
        let q = Q::new(name);
        for n in 1..=4 {
            assert_eq!(q.enqueue(&mut c, &jid(n), &[]), Reply::Int(1));
        }
        let held = claim_all(&q, &mut c, "w");
        assert_eq!(held.len(), 4);
        if batch {
            let args: Vec<Vec<u8>> =
                held.iter().flat_map(|id| [id.clone().into_bytes(), b"w".to_vec(), b"ok".to_vec()]).collect();
            let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
            let r = q.run(&mut c, "TRA.COMPLETES", "", &refs);
            assert_eq!(r.array().len(), 4, "{r:?}");
        } else {
            for id in &held {
                assert_eq!(complete(&q, &mut c, id, "w", &[]), Reply::Int(1));
            }
        }
        let kept = completed(&q, &mut c);
        assert_eq!(kept.len(), 2, "{name}: {kept:?}");
        q.check_invariant(&mut c);
    }
}

/// completes.rs `fate == DONE && gone` → `||` (logs opened for jobs whose rows stay, or that
/// it does not finish): TRA.COMPLETES opens only the logs of the rows it deletes at once, so a
/// worker without access to logs finishes jobs that have logs under the default retention,
/// and is refused only where a log would be deleted (keep-completed 0).
#[test]
fn completes_opens_only_the_logs_it_deletes() {
    let s = Server::quiet();
    let mut admin = s.conn();
    let q = Q::new("nolog");
    no_log_user(&mut admin, &q);
    let mut w = s.conn();
    assert_eq!(w.call(&[b"AUTH", b"nolog", b"pw"]), Reply::Simple("OK".into()));
    for n in 1..=3 {
        assert_eq!(q.enqueue(&mut admin, &jid(n), &[]), Reply::Int(1));
    }
    assert_eq!(claim_all(&q, &mut w, "w"), [jid(1), jid(2), jid(3)]);
    for n in 1..=3 {
        log_line(&mut admin, &q, &jid(n), "w");
    }
    let triples = |ids: &[(u64, &str)]| -> Vec<Vec<u8>> {
        ids.iter().flat_map(|(n, t)| [jid(*n).into_bytes(), t.as_bytes().to_vec(), b"ok".to_vec()]).collect()
    };
    let completes = |w: &mut Conn, args: Vec<Vec<u8>>| {
        let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        q.run(w, "TRA.COMPLETES", "", &refs)
    };
    // One finished, one held with another token: neither log is opened.
    let r = completes(&mut w, triples(&[(1, "w"), (2, "other")]));
    assert_eq!(r, Reply::Array(vec![Reply::Int(1), Reply::Int(-1)]));
    // A repeat of the finished one: its log is not opened either.
    let r = completes(&mut w, triples(&[(1, "w"), (2, "w")]));
    assert_eq!(r, Reply::Array(vec![Reply::Int(0), Reply::Int(1)]));
    // Under keep-completed 0 the row and its log go at once: the user is refused, nothing written.
    assert_eq!(
        admin.call(&[b"CONFIG", b"SET", b"trafikey.keep-completed", b"0"]),
        Reply::Simple("OK".into())
    );
    let r = unchanged(&mut admin, |_| completes(&mut w, triples(&[(3, "w")])));
    assert!(r.err().is_some_and(|e| e.starts_with("NOPERM")), "{r:?}");
    q.check_invariant(&mut admin);
}

/// drain.rs `left -= from_wait.len()` and `left -= from_prio.len()` → `+=` (a set drained past
/// COUNT): DRAIN COUNT n deletes n jobs in all — `wait` first, the rest from `prio`, then with
/// DELAYED from `delayed` — and no more.
#[test]
fn drain_count_spans_wait_and_prio() {
    let s = Server::quiet();
    let mut c = s.conn();
    let q = Q::new("span");
    for n in 1..=2 {
        assert_eq!(q.enqueue(&mut c, &jid(n), &[]), Reply::Int(1));
    }
    for n in 3..=7 {
        assert_eq!(q.enqueue(&mut c, &jid(n), &[b"PRIORITY", b"5"]), Reply::Int(1));
    }
    let drain = q.cmd("TRA.DRAIN", "", &["wait", "prio", "delayed", "events"], &[b"COUNT", b"3"]);
    let drain: Vec<&[u8]> = drain.iter().map(Vec::as_slice).collect();
    assert_eq!(c.call(&drain), Reply::Int(3));
    let snap = q.check_invariant(&mut c);
    let left: Vec<u64> = (1..=7).filter(|n| snap.state_of(&jid(*n)).is_some()).collect();
    assert_eq!(left, [4, 5, 6, 7], "the two waiting, then the first by priority order, are gone");
    // With DELAYED the rest of COUNT goes on to delayed: 4 prio jobs, then 2 of 3 delayed.
    for n in 8..=10 {
        assert_eq!(q.run(&mut c, "EMQ.SCHEDULE", &jid(n), &[b"+600000", b"job", b"{}"]), Reply::Int(1));
    }
    let drain = q.cmd("TRA.DRAIN", "", &["wait", "prio", "delayed", "events"], &[b"DELAYED", b"COUNT", b"6"]);
    let drain: Vec<&[u8]> = drain.iter().map(Vec::as_slice).collect();
    assert_eq!(c.call(&drain), Reply::Int(6));
    let snap = q.check_invariant(&mut c);
    let left: Vec<u64> = (1..=10).filter(|n| snap.state_of(&jid(*n)).is_some()).collect();
    assert_eq!(left, [10], "prio, then the delayed jobs by due time");
}

/// obliterate.rs: the COUNT budget and the reply (`active_len > 0` → `>=`, each `budget -=` →
/// `+=` or `/=`, `jobs_left` summed, `budget > 0` → `>=`, `keys_left += 1`, the kind test, `left == 0`):
/// OBLITERATE without FORCE takes a queue with nothing held, deletes COUNT jobs a call (wait
/// first, then each set in turn), then the queue's own keys, and answers what is left — jobs
/// plus keys — until 0.
#[test]
fn obliterate_spends_its_count_and_answers_what_is_left() {
    let s = Server::quiet();
    let mut c = s.conn();
    let q = Q::new("ob");
    // One completed and one failed job, then three waiting, two by priority, one delayed.
    for n in [7, 8] {
        assert_eq!(q.enqueue(&mut c, &jid(n), &[]), Reply::Int(1));
    }
    assert_eq!(claim_all(&q, &mut c, "w"), [jid(7), jid(8)]);
    assert_eq!(complete(&q, &mut c, &jid(7), "w", &[b"KEEP", b"-1"]), Reply::Int(1));
    let r = q.run(&mut c, "EMQ.FAIL", &jid(8), &[b"w", b"boom", b"FINAL", b"KEEP", b"-1"]);
    assert_eq!(r, Reply::Simple("failed".into()));
    for n in 1..=3 {
        assert_eq!(q.enqueue(&mut c, &jid(n), &[]), Reply::Int(1));
    }
    for n in 4..=5 {
        assert_eq!(q.enqueue(&mut c, &jid(n), &[b"PRIORITY", b"2"]), Reply::Int(1));
    }
    assert_eq!(q.run(&mut c, "EMQ.SCHEDULE", &jid(6), &[b"+600000", b"job", b"{}"]), Reply::Int(1));
    // A paused queue has its meta key.
    assert_eq!(q.run(&mut c, "EMQ.CLAIM", "", &[b"PAUSE"]), Reply::Int(1));
    let all = ["wait", "prio", "active", "delayed", "completed", "failed", "meta", "events"];
    let ob = q.cmd("TRA.OBLITERATE", "", &all, &[b"COUNT", b"2"]);
    let ob: Vec<&[u8]> = ob.iter().map(Vec::as_slice).collect();
    let jobs = |c: &mut Conn| -> Vec<u64> {
        let snap = q.check_invariant(c);
        (1..=8).filter(|n| snap.state_of(&jid(*n)).is_some()).collect()
    };
    let known = |c: &mut Conn| c.call(&[b"TRA.QUEUES"]).array()[1].strings().contains(&"ob".to_string());
    assert!(known(&mut c));
    // Jobs left, then the non-empty keys of wait, prio, delayed, completed, failed, meta, events.
    assert_eq!(c.call(&ob), Reply::Int(6 + 7));
    assert!(known(&mut c), "a queue with jobs left stays known");
    assert_eq!(jobs(&mut c), [3, 4, 5, 6, 7, 8], "two from the front of wait");
    assert_eq!(c.call(&ob), Reply::Int(4 + 6));
    assert_eq!(jobs(&mut c), [5, 6, 7, 8], "the last of wait, then one from prio");
    assert_eq!(c.call(&ob), Reply::Int(2 + 4));
    assert_eq!(jobs(&mut c), [7, 8], "prio, then delayed");
    assert_eq!(c.call(&ob), Reply::Int(2), "completed and failed; meta and events left");
    assert_eq!(jobs(&mut c), Vec::<u64>::new());
    // The queue's own keys are spent from the same COUNT: one a call at COUNT 1.
    let one = q.cmd("TRA.OBLITERATE", "", &all, &[b"COUNT", b"1"]);
    let one: Vec<&[u8]> = one.iter().map(Vec::as_slice).collect();
    assert_eq!(c.call(&one), Reply::Int(1), "meta deleted, events left");
    assert_eq!(c.call(&[b"EXISTS", q.k("events").as_bytes()]), Reply::Int(1));
    assert_eq!(c.call(&one), Reply::Int(0));
    assert!(!known(&mut c), "an obliterated queue is forgotten");
    for role in all {
        assert_eq!(c.call(&[b"EXISTS", q.k(role).as_bytes()]), Reply::Int(0), "{role}");
    }
    assert_eq!(c.call(&ob), Reply::Int(0), "an obliterated queue stays at 0");
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

fn used_memory(c: &mut Conn) -> i64 {
    info_field(c, "memory", "used_memory").parse().unwrap_or(0)
}

/// host/caller.rs `<impl Drop for Caller>::drop` → `()` (the user handle each call looks up
/// never freed): 100 000 fenced calls, each judged as its caller, leave the server's memory
/// where it was.
#[test]
fn the_callers_user_handle_is_freed_with_each_call() {
    let s = Server::quiet();
    let mut c = s.conn();
    let q = Q::new("leak");
    let claim = q.cmd("EMQ.CLAIM", "", keys_of("EMQ.CLAIM"), &[b"w", b"1000"]);
    let batch: Vec<Vec<Vec<u8>>> = vec![claim; 1000];
    // Once, so that every buffer the calls use exists before the first reading.
    assert!(c.pipeline(&batch).iter().all(|r| *r == Reply::Array(vec![])));
    let before = used_memory(&mut c);
    for _ in 0..100 {
        assert!(c.pipeline(&batch).iter().all(|r| *r == Reply::Array(vec![])));
    }
    let grown = used_memory(&mut c) - before;
    assert!(grown < 1 << 20, "100 000 calls grew the server's memory by {grown} bytes");
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
        keys_of("EMQ.EXTENDS"),
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

/// host/timer.rs `on_event` → `()` (a dataset loaded into a running primary not scanned for
/// queues): a queue the node had forgotten, brought back by `DEBUG RELOAD NOSAVE` from the RDB
/// saved before, is found again and its due job promoted by upkeep. (A reload empties the
/// database first, so the flush event alone starts the scan: the LOADING arm is a second way.)
#[test]
fn a_dataset_loaded_in_place_is_scanned_for_queues() {
    let s =
        Server::start(Opts { module_args: vec!["upkeep-tick-ms".into(), "20".into()], ..Opts::default() });
    let mut c = s.conn();
    assert_eq!(c.call(&[b"EMQ.INSTALL", b"1", b"{emq}:version"]), Reply::Int(1));
    let q = Q::new("back");
    assert_eq!(q.run(&mut c, "EMQ.SCHEDULE", &jid(1), &[b"+400", b"job", b"{}"]), Reply::Int(1));
    assert_eq!(c.call(&[b"SAVE"]), Reply::Simple("OK".into()));
    let all = ["wait", "prio", "active", "delayed", "completed", "failed", "meta", "events"];
    let ob = q.cmd("TRA.OBLITERATE", "", &all, &[]);
    let ob: Vec<&[u8]> = ob.iter().map(Vec::as_slice).collect();
    assert_eq!(c.call(&ob), Reply::Int(0), "gone, and forgotten");
    assert_eq!(c.call(&[b"DEBUG", b"RELOAD", b"NOSAVE"]), Reply::Simple("OK".into()));
    assert_eq!(q.snapshot(&mut c).state_of(&jid(1)).as_deref(), Some("delayed"), "back from the RDB");
    wait_for(|| q.snapshot(&mut c).state_of(&jid(1)).as_deref() == Some("wait"), "upkeep promotes it");
}

/// Every string of a reply, depth first.
fn words(r: &Reply, out: &mut Vec<String>) {
    match r {
        Reply::Array(items) => items.iter().for_each(|i| words(i, out)),
        Reply::Bulk(b) => out.push(String::from_utf8_lossy(b).into_owned()),
        Reply::Simple(s) => out.push(s.clone()),
        _ => {}
    }
}

/// The words COMMAND DOCS gives for argument `arg` of `cmd`: its fields up to the next
/// argument's name.
fn doc_of(c: &mut Conn, cmd: &str, arg: &str) -> Option<Vec<String>> {
    let mut w = Vec::new();
    words(&c.call(&[b"COMMAND", b"DOCS", cmd.as_bytes()]), &mut w);
    let at = w.windows(2).position(|p| p[0] == "name" && p[1] == arg)?;
    let rest = &w[at + 2..];
    let end = rest.iter().position(|x| x == "name").unwrap_or(rest.len());
    Some(rest[..end].to_vec())
}

/// The value of `field` in an argument's doc words.
fn doc_field<'a>(doc: &'a [String], field: &str) -> Option<&'a str> {
    doc.iter().position(|x| x == field).and_then(|i| doc.get(i + 1)).map(String::as_str)
}

/// host/register.rs `Docs::arg`: `flags |= MULTIPLE` → `&=` (COMMAND DOCS without an
/// argument's flags): the repeated block of EXTENDS is `multiple`, ENQUEUE's PRIORITY
/// `optional`, as the synopses say.
#[test]
fn command_docs_carry_each_arguments_flags() {
    let s = Server::installed();
    let mut c = s.conn();
    let flags_of = |c: &mut Conn, cmd: &str, arg: &str| -> Vec<String> {
        let doc = doc_of(c, cmd, arg).unwrap_or_else(|| panic!("{cmd} {arg}"));
        match doc.iter().position(|x| x == "flags") {
            Some(f) => doc[f + 1..]
                .iter()
                .filter(|x| ["optional", "multiple"].contains(&x.as_str()))
                .cloned()
                .collect(),
            None => Vec::new(),
        }
    };
    assert_eq!(flags_of(&mut c, "emq.extends", "job"), ["multiple"]);
    assert_eq!(flags_of(&mut c, "emq.enqueue", "priority"), ["optional"]);
    assert_eq!(flags_of(&mut c, "emq.complete", "token"), Vec::<String>::new());
}

/// host/register.rs `Docs::arg`: a display text only for a value whose shown name differs
/// from its name (`matches!(Value) && display != name`: `&&` → `||`, `!=` → `==`); and
/// `Docs::of`: `numkeys` only for the commands that take keys (`==` → `!=`).
#[test]
fn command_docs_show_display_names_and_numkeys_as_the_synopses_do() {
    let s = Server::installed();
    let mut c = s.conn();
    let doc =
        |c: &mut Conn, cmd: &str, arg: &str| doc_of(c, cmd, arg).unwrap_or_else(|| panic!("{cmd} {arg}"));
    // `[PRIORITY p]`: shown as `p`.
    assert_eq!(doc_field(&doc(&mut c, "emq.enqueue", "priority"), "display_text"), Some("p"));
    // None given to a value shown by its own name or to a word: the server shows the name.
    for (cmd, arg) in [("emq.complete", "token"), ("emq.enqueue", "lifo")] {
        assert_eq!(doc_field(&doc(&mut c, cmd, arg), "display_text"), Some(arg), "{cmd} {arg}");
    }
    assert_eq!(doc_field(&doc(&mut c, "emq.enqueue", "lifo"), "token"), Some("LIFO"));
    // A choice and a block have none at all.
    for arg in ["kind", "backoff"] {
        assert_eq!(doc_field(&doc(&mut c, "emq.enqueue", arg), "display_text"), None, "{arg}");
    }
    assert!(doc_of(&mut c, "emq.complete", "numkeys").is_some());
    assert!(doc_of(&mut c, "tra.queues", "numkeys").is_none());
}

/// host/timer.rs `Scan`'s Drop → `()`: each look at a database makes a scan cursor, and a
/// flush makes upkeep look again, so flushes in a loop under a 1 ms tick make one cursor a
/// tick. Without the Drop each stays allocated (a few dozen bytes, thousands of them).
#[test]
fn each_look_at_a_database_frees_its_scan_cursor() {
    let s = Server::start(Opts { module_args: vec!["upkeep-tick-ms".into(), "1".into()], ..Opts::default() });
    let mut c = s.conn();
    let used = |c: &mut Conn| info_field(c, "memory", "used_memory").parse::<i64>().expect("used_memory");
    let ticks =
        |c: &mut Conn| info_field(c, "trafikey", "trafikey_upkeep_ticks").parse::<i64>().expect("ticks");
    let flush_for = |c: &mut Conn, d: std::time::Duration| {
        let t0 = std::time::Instant::now();
        while t0.elapsed() < d {
            assert_eq!(c.call(&[b"FLUSHDB"]), Reply::Simple("OK".into()));
        }
    };
    flush_for(&mut c, std::time::Duration::from_millis(300));
    // The first INFO of each section leaves something behind: once, before measuring.
    let _ = (used(&mut c), ticks(&mut c));
    let (m0, t0) = (used(&mut c), ticks(&mut c));
    flush_for(&mut c, std::time::Duration::from_secs(3));
    let (m1, t1) = (used(&mut c), ticks(&mut c));
    eprintln!("{} ticks, used_memory {m0} → {m1}", t1 - t0);
    assert!(t1 - t0 > 500, "upkeep looked often: {} ticks", t1 - t0);
    // A leaked cursor is 16 bytes and the allocator's rounding: about 32 a look here.
    assert!(m1 - m0 < 8 * (t1 - t0), "{} bytes more after {} looks", m1 - m0, t1 - t0);
}

/// host/alloc.rs `served` → `false` (the module's heap taken from the system allocator, not
/// the server's): what the module keeps must be the server's memory, in `used_memory` and so
/// under `maxmemory`. 20 000 queues are made known, then their keys deleted by hand: upkeep is
/// off, so only the module's own list of queues still holds their names.
#[test]
fn what_the_module_keeps_counts_as_the_servers_memory() {
    let s = Server::quiet();
    let mut c = s.conn();
    let n = 20_000;
    let queues: Vec<Q> = (0..n).map(|i| Q::new(&format!("{i:0>128}"))).collect();
    let before = used_memory(&mut c);
    for chunk in queues.chunks(1000) {
        let calls: Vec<Vec<Vec<u8>>> = chunk
            .iter()
            .map(|q| q.cmd("EMQ.ENQUEUE", &jid(1), keys_of("EMQ.ENQUEUE"), &[b"job", b"{}"]))
            .collect();
        assert!(c.pipeline(&calls).iter().all(|r| *r == Reply::Int(1)));
        let dels: Vec<Vec<Vec<u8>>> = chunk
            .iter()
            .map(|q| {
                let mut d = vec![b"DEL".to_vec()];
                d.extend(["wait", "prio", "events", "meta"].iter().map(|r| q.k(r).into_bytes()));
                d.push(q.job(&jid(1)).into_bytes());
                d
            })
            .collect();
        assert!(c.pipeline(&dels).iter().all(|r| matches!(r, Reply::Int(k) if *k >= 2)));
    }
    assert_eq!(c.call(&[b"DBSIZE"]), Reply::Int(1), "only the version key is left");
    assert_eq!(c.call(&[b"TRA.QUEUES", b"COUNT", b"1000"]).array()[1].array().len(), 1000);
    let grown = used_memory(&mut c) - before;
    println!("{n} known queues: used_memory grew by {grown} bytes");
    assert!(grown > n * 128, "the module's list of {n} queues is not in used_memory: {grown} bytes");
}
