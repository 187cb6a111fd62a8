//! `TRA.COMPLETES`: many held jobs finished in one call, each entry answering as COMPLETE
//! would (1, 0 for a repeat, -1 not held, -2 no such job), rows opened as the caller,
//! retention as COMPLETE's, the replica holding what the primary holds; bad input refused
//! with nothing written.
// A test may panic: that is how it fails. The module's own rules are for src/.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

use trafikey_support::*;

fn completes(q: &Q, jobs: &[(&str, &str, &str)]) -> Vec<Vec<u8>> {
    let mut a: Vec<&[u8]> = Vec::new();
    for (id, tok, res) in jobs {
        a.extend([id.as_bytes(), tok.as_bytes(), res.as_bytes()]);
    }
    q.cmd("TRA.COMPLETES", "", &["active", "completed", "events"], &a)
}

fn claim(c: &mut Conn, q: &Q, tok: &str, n: usize) -> Vec<String> {
    let count = n.to_string();
    let r = q.run(c, "EMQ.CLAIM", "", &[tok.as_bytes(), b"60000", b"COUNT", count.as_bytes()]);
    r.array().iter().map(|j| j.array()[0].str()).collect()
}

#[test]
fn each_entry_answers_as_complete_would() {
    let primary = Server::quiet();
    let replica = Server::start(Opts::default());
    let mut r = replica.follow(&primary);
    let mut c = primary.conn();
    let q = Q::new("batch");
    for n in 1..=6 {
        q.enqueue(&mut c, &jid(n), &[]);
    }
    let held = claim(&mut c, &q, "w", 4);
    assert_eq!(held, [jid(1), jid(2), jid(3), jid(4)]);
    let batch = completes(
        &q,
        &[
            (&jid(1), "w", "r1"),
            (&jid(2), "w", "r2"),
            (&jid(3), "other", "r3"),
            (&jid(9), "w", "r9"),
            (&jid(5), "w", "r5"),
        ],
    );
    assert_eq!(c.call_v(&batch).ints(), [1, 1, -1, -2, -1]);
    let snap = q.check_invariant(&mut c);
    for (id, res) in [(jid(1), "r1"), (jid(2), "r2")] {
        assert_eq!(snap.state_of(&id).as_deref(), Some("completed"));
        assert_eq!(snap.field(&id, "r").as_deref(), Some(res));
        assert_eq!(snap.field(&id, "am").as_deref(), Some("1"));
    }
    assert_eq!(snap.state_of(&jid(3)).as_deref(), Some("active"), "not its token: untouched");
    assert_eq!(snap.state_of(&jid(5)).as_deref(), Some("wait"));
    // The same batch again: the two completed answer 0 and nothing is written.
    let again = unchanged(&mut c, |c| c.call_v(&batch));
    assert_eq!(again.ints(), [0, 0, -1, -2, -1]);
    // One `completed` event per job finished.
    let ev = c.call(&[b"XRANGE", q.k("events").as_bytes(), b"-", b"+"]);
    let done = ev.array().iter().filter(|e| e.array()[1].strings()[1] == "completed").count();
    assert_eq!(done, 2);
    // And COMPLETE agrees with what the batch did.
    assert_eq!(q.run(&mut c, "EMQ.COMPLETE", &jid(3), &[b"w", b"r"]), Reply::Int(1));
    c.call(&[b"WAIT", b"1", b"2000"]);
    wait_for(|| digest(&mut c) == digest(&mut r), "the replica holds what the primary holds");
}

#[test]
fn retention_and_acl_apply_as_to_complete() {
    let s = Server::quiet();
    let mut c = s.conn();
    let q = Q::new("keep");
    for n in 1..=3 {
        q.enqueue(&mut c, &jid(n), &[]);
    }
    claim(&mut c, &q, "w", 3);
    // A user without the rows: refused, nothing written.
    let rules = "resetkeys %R~{emq}:version ~emq:{keep}:active ~emq:{keep}:completed ~emq:{keep}:events -@all +tra.completes";
    let mut u = s.user(&mut c, "norows", rules);
    let batch = completes(&q, &[(&jid(1), "w", "a"), (&jid(2), "w", "b"), (&jid(3), "w", "c")]);
    let e = unchanged(&mut c, |_| u.call_v(&batch));
    assert!(e.err().is_some_and(|e| e.starts_with("NOPERM")), "{e:?}");
    // keep-completed 0: each finished row is deleted at once.
    c.call(&[b"CONFIG", b"SET", b"trafikey.keep-completed", b"0"]);
    assert_eq!(c.call_v(&batch).ints(), [1, 1, 1]);
    let snap = q.check_invariant(&mut c);
    assert!((1..=3).all(|n| snap.state_of(&jid(n)).is_none()), "deleted by retention");
}

#[test]
fn bad_input_is_refused_and_writes_nothing() {
    let s = Server::quiet();
    let mut c = s.conn();
    let q = Q::new("bad");
    q.enqueue(&mut c, &jid(1), &[]);
    claim(&mut c, &q, "w", 1);
    let many: Vec<(String, String, String)> = (1..=101).map(|n| (jid(n), "w".into(), "r".into())).collect();
    let many: Vec<(&str, &str, &str)> =
        many.iter().map(|(a, b, c)| (a.as_str(), b.as_str(), c.as_str())).collect();
    let big = "x".repeat(2 << 20);
    let cases: Vec<(Vec<Vec<u8>>, &str)> = vec![
        (q.cmd("TRA.COMPLETES", "", &["active", "completed", "events"], &[]), "EMQSHAPE"),
        (
            q.cmd("TRA.COMPLETES", "", &["active", "completed", "events"], &[jid(1).as_bytes(), b"w"]),
            "EMQSHAPE",
        ),
        (completes(&q, &[(&jid(1), "w", "a"), (&jid(1), "w", "b")]), "EMQARG"),
        (completes(&q, &[(&jid(1), "w", "a"), ("JOBnope", "w", "b")]), "EMQID"),
        (completes(&q, &[(&jid(1), "", "a")]), "EMQARG"),
        (completes(&q, &[(&jid(1), "w", &big)]), "EMQARG"),
        (completes(&q, &many), "EMQARG"),
        (
            q.cmd("TRA.COMPLETES", "", &["active", "wait", "events"], &[jid(1).as_bytes(), b"w", b"r"]),
            "EMQLAYOUT",
        ),
    ];
    for (v, class) in cases {
        let r = unchanged(&mut c, |c| c.call_v(&v));
        assert!(r.err().is_some_and(|e| e.starts_with(class)), "{class}: {r:?}");
    }
}

/// completes.rs `jobs.len() > max` → `>=` (a full batch of 50 refused): TRA.COMPLETES takes
/// what one CLAIM hands out, 50 jobs, and refuses 51 with nothing written.
#[test]
fn completes_takes_a_full_claim_of_fifty() {
    let s = Server::quiet();
    let mut c = s.conn();
    let q = Q::new("full");
    for n in 1..=51 {
        assert_eq!(q.enqueue(&mut c, &jid(n), &[]), Reply::Int(1));
    }
    let held = claim_all(&q, &mut c, "w");
    assert_eq!(held.len(), 50);
    let triples = |ids: &[String]| -> Vec<Vec<u8>> {
        ids.iter().flat_map(|id| [id.clone().into_bytes(), b"w".to_vec(), b"ok".to_vec()]).collect()
    };
    let call = |c: &mut Conn, args: &[Vec<u8>]| {
        let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        c.call_v(&q.cmd("TRA.COMPLETES", "", &["active", "completed", "events"], &refs))
    };
    let mut over = held.clone();
    over.push(jid(51));
    let r = unchanged(&mut c, |c| call(c, &triples(&over)));
    assert!(r.err().is_some_and(|e| e.starts_with("EMQARG") && e.contains("at most 50 jobs")), "{r:?}");
    let r = call(&mut c, &triples(&held));
    assert_eq!(r.array().len(), 50);
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

/// A repeat's row sits in `completed`, where the batch's retention may delete it: the call
/// holds no handle on it by then (memcheck reads the server's closing of each handle).
#[test]
fn retention_may_delete_a_repeats_row_in_the_same_call() {
    let (_s, mut c, q) = queue_on_quiet_server("repeat");
    for n in 1..=3 {
        q.enqueue(&mut c, &jid(n), &[]);
    }
    assert_eq!(claim(&mut c, &q, "w", 3).len(), 3);
    assert_eq!(complete(&q, &mut c, &jid(1), "w", &[]), Reply::Int(1));
    let keep_one = [&b"CONFIG"[..], b"SET", b"trafikey.keep-completed", b"1"];
    assert_eq!(c.call(&keep_one), Reply::Simple("OK".into()));
    let r = c.call_v(&completes(&q, &[(&jid(1), "w", "again"), (&jid(2), "w", "ok")]));
    assert_eq!(r, Reply::Array(vec![Reply::Int(0), Reply::Int(1)]));
    // TRA.COMPLETESNEXT the same: 2 repeated, 3 finished, 2 retired.
    let mut v = q.cmd(
        "TRA.COMPLETESNEXT",
        "",
        &["wait", "prio", "active", "delayed", "completed", "meta", "events"],
        &[],
    );
    v.push(b"2".to_vec());
    v.extend([q.job(&jid(2)), q.job(&jid(3))].map(String::into_bytes));
    v.extend([&b"w"[..], b"ok", b"w", b"ok", b"w", b"60000", b"KEEP", b"1"].map(<[u8]>::to_vec));
    let r = c.call_v(&v);
    assert_eq!(r.array()[0], Reply::Array(vec![Reply::Int(0), Reply::Int(1)]));
    let snap = q.check_invariant(&mut c);
    assert_eq!(snap.sets["completed"], [jid(3)]);
    assert_eq!(snap.rows.len(), 1);
}

/// A job written by hand into its finished set while it is held (no verb does this; a client
/// can): the finish that moves it there does not retire it as an old entry. Retention would
/// otherwise delete its row through a second handle while the finish holds the first, and the
/// server would read freed memory (memcheck runs this file).
#[test]
fn a_finishing_job_already_in_its_finished_set_is_not_retired() {
    let (_s, mut c, q) = queue_on_quiet_server("twice");
    let plant = |c: &mut Conn, set: &str, id: &str| {
        assert_eq!(c.call(&[b"ZADD", q.k(set).as_bytes(), b"1", id.as_bytes()]), Reply::Int(1));
    };
    // COMPLETE keeping one: the older job goes, the finishing one stays with its row.
    finished(&q, &mut c, &[jid(1)], "w");
    assert_eq!(complete(&q, &mut c, &jid(1), "w", &[]), Reply::Int(1));
    finished(&q, &mut c, &[jid(2)], "w");
    plant(&mut c, "completed", &jid(2));
    assert_eq!(complete(&q, &mut c, &jid(2), "w", &[b"KEEP", b"1"]), Reply::Int(1));
    let snap = q.check_invariant(&mut c);
    assert_eq!(snap.sets["completed"], [jid(2)]);
    assert_eq!(snap.field(&jid(2), "st").as_deref(), Some("completed"));

    // COMPLETE keeping none: the row goes once, by the finish.
    finished(&q, &mut c, &[jid(3)], "w");
    plant(&mut c, "completed", &jid(3));
    assert_eq!(complete(&q, &mut c, &jid(3), "w", &[b"KEEP", b"0"]), Reply::Int(1));
    assert_eq!(c.call(&[b"EXISTS", q.job(&jid(3)).as_bytes()]), Reply::Int(0));
    assert_eq!(c.call(&[b"ZREM", q.k("completed").as_bytes(), jid(3).as_bytes()]), Reply::Int(1));

    // TRA.COMPLETES: the same for each job it finishes.
    finished(&q, &mut c, &[jid(4), jid(5)], "w");
    plant(&mut c, "completed", &jid(5));
    c.call(&[b"CONFIG", b"SET", b"trafikey.keep-completed", b"2"]);
    assert_eq!(c.call_v(&completes(&q, &[(&jid(4), "w", "ok"), (&jid(5), "w", "ok")])).ints(), [1, 1]);
    let snap = q.check_invariant(&mut c);
    assert_eq!(snap.sets["completed"], [jid(4), jid(5)]);

    // FAIL for good, into `failed` where it already is.
    finished(&q, &mut c, &[jid(6)], "w");
    plant(&mut c, "failed", &jid(6));
    let r = q.run(&mut c, "EMQ.FAIL", &jid(6), &[b"w", b"boom", b"KEEP", b"1", b"FINAL"]);
    assert_eq!(r, Reply::Simple("failed".into()));
    let snap = q.check_invariant(&mut c);
    assert_eq!(snap.sets["failed"], [jid(6)]);

    // STALLED's final failure, the same.
    assert_eq!(q.enqueue(&mut c, &jid(7), &[]), Reply::Int(1));
    let r = q.run(&mut c, "EMQ.CLAIM", "", &[b"w", b"1"]);
    assert_eq!(r.array().len(), 1);
    plant(&mut c, "failed", &jid(7));
    std::thread::sleep(std::time::Duration::from_millis(20));
    c.call(&[b"CONFIG", b"SET", b"trafikey.keep-failed", b"1"]);
    let r = q.run(&mut c, "EMQ.STALLED", "", &[b"MAXSTALLS", b"0"]);
    assert!(r.err().is_none(), "{r:?}");
    let snap = q.check_invariant(&mut c);
    assert_eq!(snap.sets["failed"], [jid(7)]);

    // A claim failing a job past its EXPIRE time, the same.
    assert_eq!(q.enqueue(&mut c, &jid(8), &[b"EXPIRE", b"1"]), Reply::Int(1));
    plant(&mut c, "failed", &jid(8));
    std::thread::sleep(std::time::Duration::from_millis(20));
    let r = q.run(&mut c, "EMQ.CLAIM", "", &[b"w", b"60000"]);
    assert_eq!(r.array().len(), 0, "the expired job is not handed out");
    let snap = q.check_invariant(&mut c);
    assert_eq!(snap.sets["failed"], [jid(8)]);
    assert_eq!(snap.field(&jid(8), "e").as_deref(), Some("expired"));
    assert_eq!(c.call(&[b"PING"]), Reply::Simple("PONG".into()));
}
