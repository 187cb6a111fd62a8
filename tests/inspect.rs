//! Looking into a queue against a real server: TRA.JOB, TRA.COUNTS and TRA.JOBS — read-only,
//! unfenced, exact replies in both protocols, bounded pages, and a read-only user can look
//! but not change.
// A test may panic: that is how it fails. The module's own rules are for src/.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

use trafikey_support::*;

fn counts_cmd(q: &Q) -> Vec<Vec<u8>> {
    let mut v = vec![b"TRA.COUNTS".to_vec(), b"7".to_vec()];
    for r in ["wait", "prio", "active", "delayed", "completed", "failed", "meta"] {
        v.push(q.k(r).into_bytes());
    }
    v
}

fn job(c: &mut Conn, q: &Q, id: &str) -> Reply {
    c.call(&[b"TRA.JOB", b"1", q.job(id).as_bytes()])
}

/// A RESP2 flat map as (key, value) pairs.
fn pairs(r: &Reply) -> Vec<(String, Reply)> {
    r.array().chunks(2).map(|p| (p[0].str(), p[1].clone())).collect()
}

fn jobs(c: &mut Conn, q: &Q, set: &str, extra: &[&[u8]]) -> (i64, Vec<String>) {
    let key = q.k(set);
    let mut v: Vec<&[u8]> = vec![b"TRA.JOBS", b"1", key.as_bytes()];
    v.extend_from_slice(extra);
    let r = c.call(&v);
    (r.array()[0].int(), r.array()[1].strings())
}

#[test]
fn tra_job_shows_every_fact_in_order() {
    let s = Server::quiet();
    let mut c = s.conn();
    let q = Q::new("insp");
    assert_eq!(job(&mut c, &q, &jid(1)), Reply::Nil, "absent: nil");
    q.enqueue(
        &mut c,
        &jid(1),
        &[b"PRIORITY", b"4", b"ATTEMPTS", b"3", b"BACKOFF", b"EXP", b"50", b"OPTS", b"{o}"],
    );
    let r = job(&mut c, &q, &jid(1));
    let p = pairs(&r);
    let names: Vec<&str> = p.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        names,
        [
            "id",
            "state",
            "name",
            "data",
            "opts",
            "priority",
            "attempts",
            "backoff",
            "created",
            "started",
            "made",
            "stalls",
            "claimed",
            "deadline",
            "due",
            "expire",
            "progress",
            "result",
            "error",
            "finished",
            "stack",
            "alias",
            "dedup",
            "scheduler",
            "iteration",
            "count",
            "worker"
        ]
    );
    let get = |k: &str| p.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()).expect(k);
    assert_eq!(get("id").str(), jid(1));
    assert_eq!(get("state").str(), "prio");
    assert_eq!(
        (get("name").str(), get("data").str(), get("opts").str()),
        ("job".into(), "{}".into(), "{o}".into())
    );
    assert_eq!((get("priority"), get("attempts")), (Reply::Int(4), Reply::Int(3)));
    assert_eq!(get("backoff").str(), "EXP 50");
    assert!(get("created").int() > 1_700_000_000_000);
    assert_eq!((get("started"), get("made"), get("stalls")), (Reply::Int(0), Reply::Int(0), Reply::Int(0)));
    for k in
        ["claimed", "deadline", "due", "expire", "progress", "result", "error", "finished", "stack", "worker"]
    {
        assert_eq!(get(k), Reply::Nil, "{k} not set");
    }
    // Held: the lease deadline and the claim; finished: result and finish time.
    let r = q.run(&mut c, "EMQ.CLAIM", "", &[b"w", b"60000"]);
    assert_eq!(r.array()[0].array()[0].str(), jid(1));
    let p = pairs(&job(&mut c, &q, &jid(1)));
    let get = |k: &str| p.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()).expect(k);
    let score =
        c.call(&[b"ZSCORE", q.k("active").as_bytes(), jid(1).as_bytes()]).str().parse::<i64>().unwrap_or(0);
    assert_eq!(get("deadline"), Reply::Int(score));
    assert_eq!(get("started"), Reply::Int(1));
    assert!(get("claimed").int() > 0);
    q.run(&mut c, "EMQ.COMPLETE", &jid(1), &[b"w", b"the result"]);
    let p = pairs(&job(&mut c, &q, &jid(1)));
    let get = |k: &str| p.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()).expect(k);
    assert_eq!(
        (get("state").str(), get("result").str(), get("made")),
        ("completed".into(), "the result".into(), Reply::Int(1))
    );
    assert_eq!(get("deadline"), Reply::Nil);
    assert!(get("finished").int() > 0);
    // Scheduled: its due time.
    assert_eq!(q.run(&mut c, "EMQ.SCHEDULE", &jid(2), &[b"1999999999999", b"n", b"d"]), Reply::Int(1));
    let p = pairs(&job(&mut c, &q, &jid(2)));
    assert_eq!(
        p.iter().find(|(n, _)| n == "due").map(|(_, v)| v.clone()),
        Some(Reply::Int(1_999_999_999_999))
    );
    // RESP3: a real map in the same order.
    c.call(&[b"HELLO", b"3"]);
    match job(&mut c, &q, &jid(1)) {
        Reply::Map(m) => {
            assert_eq!(m.iter().map(|(k, _)| k.str()).collect::<Vec<_>>()[..3], ["id", "state", "name"])
        }
        other => panic!("a map: {other:?}"),
    }
    // Bad input: the id gate, shape; never a write.
    c.call(&[b"HELLO", b"2"]);
    let e = unchanged(&mut c, |c| c.call(&[b"TRA.JOB", b"1", q.job("nope").as_bytes()]));
    assert!(e.error().starts_with("EMQID"), "{e:?}");
    let e = unchanged(&mut c, |c| c.call(&[b"TRA.JOB", b"1", q.job(&jid(1)).as_bytes(), b"x"]));
    assert!(e.error().starts_with("EMQSHAPE"), "{e:?}");
    c.call(&[b"SET", q.job(&jid(9)).as_bytes(), b"x"]);
    assert!(job(&mut c, &q, &jid(9)).error().starts_with("WRONGTYPE"));
}

#[test]
fn tra_counts_reads_the_depth_in_one_call() {
    let s = Server::quiet();
    let mut c = s.conn();
    let q = Q::new("depth");
    let zero = c.call_v(&counts_cmd(&q));
    let as_pairs: Vec<(String, i64)> = pairs(&zero).into_iter().map(|(k, v)| (k, v.int())).collect();
    assert_eq!(
        as_pairs,
        [
            ("wait", 0),
            ("prio", 0),
            ("active", 0),
            ("delayed", 0),
            ("completed", 0),
            ("failed", 0),
            ("paused", 0)
        ]
        .map(|(k, v)| (k.to_string(), v))
    );
    for n in 1..=5 {
        q.enqueue(&mut c, &jid(n), &[]);
    }
    q.enqueue(&mut c, &jid(6), &[b"PRIORITY", b"1"]);
    q.run(&mut c, "EMQ.SCHEDULE", &jid(7), &[b"+100000", b"n", b"d"]);
    q.run(&mut c, "EMQ.CLAIM", "", &[b"w", b"60000", b"COUNT", b"2"]);
    q.run(&mut c, "EMQ.COMPLETE", &jid(1), &[b"w", b"ok"]);
    q.run(&mut c, "EMQ.CLAIM", "", &[b"PAUSE"]);
    let r = c.call_v(&counts_cmd(&q));
    let got: Vec<i64> = pairs(&r).into_iter().map(|(_, v)| v.int()).collect();
    assert_eq!(got, [3, 1, 1, 1, 1, 0, 1]);
    // No fence: it reads a node without {emq}:version too.
    c.call(&[b"DEL", b"{emq}:version"]);
    assert!(c.call_v(&counts_cmd(&q)).err().is_none());
    let mut bad = counts_cmd(&q);
    bad[8] = q.k("events").into_bytes();
    assert!(c.call_v(&bad).error().starts_with("EMQLAYOUT"));
}

#[test]
fn tra_jobs_pages_each_set_in_serving_order() {
    let s = Server::quiet();
    let mut c = s.conn();
    let q = Q::new("pages");
    for n in 1..=7 {
        q.enqueue(&mut c, &jid(n), &[]);
    }
    q.enqueue(&mut c, &jid(8), &[b"LIFO"]);
    // wait: the next claimed first (the LIFO job, then 1..7).
    let all: Vec<String> = std::iter::once(jid(8)).chain((1..=7).map(jid)).collect();
    assert_eq!(jobs(&mut c, &q, "wait", &[]), (-1, all.clone()));
    assert_eq!(jobs(&mut c, &q, "wait", &[b"COUNT", b"3"]), (3, all[..3].to_vec()));
    assert_eq!(jobs(&mut c, &q, "wait", &[b"FROM", b"3", b"COUNT", b"3"]), (6, all[3..6].to_vec()));
    assert_eq!(jobs(&mut c, &q, "wait", &[b"FROM", b"6", b"COUNT", b"3"]), (-1, all[6..].to_vec()));
    assert_eq!(jobs(&mut c, &q, "wait", &[b"FROM", b"100"]), (-1, vec![]));
    let mut rev = all.clone();
    rev.reverse();
    assert_eq!(jobs(&mut c, &q, "wait", &[b"REV", b"COUNT", b"2"]), (2, rev[..2].to_vec()));
    // The claim order agrees with the page.
    let r = q.run(&mut c, "EMQ.CLAIM", "", &[b"w", b"60000", b"COUNT", b"2"]);
    let claimed: Vec<String> = r.array().iter().map(|j| j.array()[0].str()).collect();
    assert_eq!(claimed, all[..2]);
    // prio: priority, then id; active: the next deadline first.
    q.enqueue(&mut c, &jid(20), &[b"PRIORITY", b"5"]);
    q.enqueue(&mut c, &jid(21), &[b"PRIORITY", b"1"]);
    q.enqueue(&mut c, &jid(22), &[b"PRIORITY", b"5"]);
    assert_eq!(jobs(&mut c, &q, "prio", &[]).1, [jid(21), jid(20), jid(22)]);
    assert_eq!(jobs(&mut c, &q, "prio", &[b"rev"]).1, [jid(22), jid(20), jid(21)]);
    q.run(&mut c, "EMQ.EXTEND", &jid(1), &[b"w", b"1000"]);
    assert_eq!(jobs(&mut c, &q, "active", &[]).1, [jid(1), jid(8)]);
    for set in ["delayed", "completed", "failed"] {
        assert_eq!(jobs(&mut c, &q, set, &[]), (-1, vec![]), "{set}");
    }
    // Bad input, nothing written.
    for (extra, class) in [
        (&[&b"COUNT"[..], b"0"][..], "EMQARG"),
        (&[b"COUNT", b"1001"], "EMQARG"),
        (&[b"FROM", b"-1"], "EMQARG"),
        (&[b"FROM", b"x"], "EMQSHAPE"),
        (&[b"SIDEWAYS"], "EMQSHAPE"),
    ] {
        let key = q.k("wait");
        let mut v: Vec<&[u8]> = vec![b"TRA.JOBS", b"1", key.as_bytes()];
        v.extend_from_slice(extra);
        assert!(unchanged(&mut c, |c| c.call(&v)).error().starts_with(class), "{extra:?}");
    }
    for bad in [q.k("events"), q.k("meta"), q.job(&jid(1)), "other".to_string()] {
        let e = c.call(&[b"TRA.JOBS", b"1", bad.as_bytes()]);
        assert!(e.error().starts_with("EMQLAYOUT"), "{bad}: {e:?}");
    }
}

#[test]
fn a_read_only_user_can_look_but_not_change() {
    let s = Server::quiet();
    let mut admin = s.conn();
    let q = Q::new("ro");
    q.enqueue(&mut admin, &jid(1), &[]);
    let mut d = s.user(&mut admin, "dash", "%R~emq:{ro}:* %R~{emq}:version +@emq");
    assert_eq!(pairs(&job(&mut d, &q, &jid(1)))[1].1.str(), "wait");
    assert!(d.call_v(&counts_cmd(&q)).err().is_none());
    assert_eq!(jobs(&mut d, &q, "wait", &[]).1, [jid(1)]);
    let e = unchanged(&mut admin, |_| q.enqueue(&mut d, &jid(2), &[]));
    assert!(e.error().starts_with("NOPERM"), "{e:?}");
    let e = q.run(&mut d, "EMQ.CLAIM", "", &[b"w", b"1000"]);
    assert!(e.error().starts_with("NOPERM"), "{e:?}");
    // Another queue is out of its sight.
    let other = Q::new("other");
    assert!(job(&mut d, &other, &jid(1)).error().starts_with("NOPERM"));
}
