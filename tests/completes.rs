//! `TRA.COMPLETES`: many held jobs finished in one call, each entry answering as COMPLETE
//! would (1, 0 for a repeat, -1 not held, -2 no such job), rows opened as the caller,
//! retention as COMPLETE's, the replica holding what the primary holds; bad input refused
//! with nothing written.

use trafikey_support::*;

fn call(c: &mut Conn, v: &[Vec<u8>]) -> Reply {
    let refs: Vec<&[u8]> = v.iter().map(Vec::as_slice).collect();
    c.call(&refs)
}

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

fn ints(r: &Reply) -> Vec<i64> {
    r.array().iter().map(Reply::int).collect()
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
    assert_eq!(ints(&call(&mut c, &batch)), [1, 1, -1, -2, -1]);
    let snap = q.check_invariant(&mut c);
    for (id, res) in [(jid(1), "r1"), (jid(2), "r2")] {
        assert_eq!(snap.state_of(&id).as_deref(), Some("completed"));
        assert_eq!(snap.field(&id, "r").as_deref(), Some(res));
        assert_eq!(snap.field(&id, "am").as_deref(), Some("1"));
    }
    assert_eq!(snap.state_of(&jid(3)).as_deref(), Some("active"), "not its token: untouched");
    assert_eq!(snap.state_of(&jid(5)).as_deref(), Some("wait"));
    // The same batch again: the two completed answer 0 and nothing is written.
    let again = unchanged(&mut c, |c| call(c, &batch));
    assert_eq!(ints(&again), [0, 0, -1, -2, -1]);
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
    let rules = "on >pw resetkeys %R~{emq}:version ~emq:{keep}:active ~emq:{keep}:completed ~emq:{keep}:events -@all +tra.completes";
    let mut args: Vec<&[u8]> = vec![b"ACL", b"SETUSER", b"norows"];
    args.extend(rules.split_whitespace().map(str::as_bytes));
    assert_eq!(c.call(&args), Reply::Simple("OK".into()));
    let mut u = s.conn();
    assert_eq!(u.call(&[b"AUTH", b"norows", b"pw"]), Reply::Simple("OK".into()));
    let batch = completes(&q, &[(&jid(1), "w", "a"), (&jid(2), "w", "b"), (&jid(3), "w", "c")]);
    let e = unchanged(&mut c, |_| call(&mut u, &batch));
    assert!(e.err().is_some_and(|e| e.starts_with("NOPERM")), "{e:?}");
    // keep-completed 0: each finished row is deleted at once.
    c.call(&[b"CONFIG", b"SET", b"trafikey.keep-completed", b"0"]);
    assert_eq!(ints(&call(&mut c, &batch)), [1, 1, 1]);
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
        let r = unchanged(&mut c, |c| call(c, &v));
        assert!(r.err().is_some_and(|e| e.starts_with(class)), "{class}: {r:?}");
    }
}
