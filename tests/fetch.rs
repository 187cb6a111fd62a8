//! A claim that returns the job (`CLAIM … ROW`) and finish-and-fetch in one atomic call
//! (`TRA.COMPLETENEXT`, and `TRA.COMPLETESNEXT` for many jobs), against a real server: what they answer, what they write, that a
//! refusal writes nothing, and that a replica holds the same.
// A test may panic: that is how it fails. The module's own rules are for src/.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

use trafikey_support::*;

fn map(r: &Reply) -> Vec<(String, Reply)> {
    r.array().chunks(2).map(|p| (p[0].str(), p[1].clone())).collect()
}

fn next(q: &Q, c: &mut Conn, id: &str, token: &str, extra: &[&[u8]]) -> Reply {
    let mut args: Vec<&[u8]> = vec![token.as_bytes(), b"ok", b"30000"];
    args.extend_from_slice(extra);
    q.run(c, "TRA.COMPLETENEXT", id, &args)
}

fn events(c: &mut Conn, q: &Q) -> Vec<String> {
    let r = c.call(&[b"XRANGE", q.k("events").as_bytes(), b"-", b"+"]);
    r.array().iter().map(|e| e.array()[1].array()[1].str()).collect()
}

#[test]
fn claim_with_row_returns_what_tra_job_shows() {
    let s = Server::quiet();
    let mut c = s.conn();
    let q = Q::new("row");
    assert_eq!(q.enqueue(&mut c, &jid(1), &[b"ATTEMPTS", b"3", b"OPTS", b"{\"a\":1}"]), Reply::Int(1));
    // A value past the server's small-hash limit: this row is read as a hash table, not a
    // packed list.
    let long = format!("{{\"pad\":\"{}\"}}", "x".repeat(300));
    // An EXPIRE time the claim spends: the row handed out has none, as TRA.JOB shows after.
    assert_eq!(q.enqueue(&mut c, &jid(2), &[b"OPTS", long.as_bytes(), b"EXPIRE", b"+600000"]), Reply::Int(1));
    let r = q.run(&mut c, "EMQ.CLAIM", "", &[b"w1", b"30000", b"COUNT", b"2", b"ROW"]);
    let jobs = r.array();
    assert_eq!(jobs.len(), 2);
    for (j, id) in jobs.iter().zip([jid(1), jid(2)]) {
        let e = j.array();
        assert_eq!(e.len(), 5, "[id name data attempt row]");
        assert_eq!(
            (e[0].str(), e[1].str(), e[2].str(), e[3].int()),
            (id.clone(), "job".into(), "{}".into(), 1)
        );
        let shown = c.call(&[b"TRA.JOB", b"1", q.job(&id).as_bytes()]);
        let at_default = |k: &str, v: &Reply| {
            matches!((k, v), ("priority" | "made" | "stalls", Reply::Int(0)) | ("attempts", Reply::Int(1)))
        };
        let full = map(&shown);
        let shown: Vec<_> = full
            .iter()
            .filter(|(k, v)| {
                !["id", "name", "data", "state"].contains(&k.as_str())
                    && *v != Reply::Nil
                    && !at_default(k, v)
            })
            .cloned()
            .collect();
        assert_eq!(
            map(&e[4]),
            shown,
            "the row as TRA.JOB shows it after the claim, less id, name, data, state, nils and defaults"
        );
        assert!(full.iter().any(|(k, v)| k == "state" && v.str() == "active"));
        let row = map(&e[4]);
        let get = |k: &str| row.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()).unwrap();
        assert!(get("deadline").int() > 0);
        assert_eq!(get("started").int(), 1);
        assert!(get("claimed").int() > 0);
        for k in ["state", "priority", "made", "stalls"] {
            assert!(row.iter().all(|(n, _)| n != k), "{k} left out");
        }
    }
    let row2 = map(&jobs[1].array()[4]);
    assert!(row2.iter().any(|(k, v)| k == "opts" && v.str() == long));
    assert!(row2.iter().all(|(k, _)| k != "expire"), "EXPIRE spent by the claim");
    let row1 = map(&jobs[0].array()[4]);
    assert!(row1.iter().any(|(k, v)| k == "attempts" && *v == Reply::Int(3)));
    assert!(row1.iter().any(|(k, v)| k == "opts" && v.str() == "{\"a\":1}"));
    // Claimed again after a failed attempt: the entry's attempt, and the row's started and
    // made, count the earlier attempt.
    assert!(q.run(&mut c, "EMQ.FAIL", &jid(1), &[b"w1", b"no", b"RETRY"]).err().is_none());
    let r = q.run(&mut c, "EMQ.CLAIM", "", &[b"w2", b"30000", b"ROW"]);
    let e = r.array()[0].array();
    assert_eq!((e[0].str(), e[3].int()), (jid(1), 2), "the second attempt");
    let row = map(&e[4]);
    let get = |k: &str| row.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    assert_eq!((get("started"), get("made")), (Some(Reply::Int(2)), Some(Reply::Int(1))));
    // Without ROW the entries stay four long.
    assert_eq!(q.enqueue(&mut c, &jid(3), &[]), Reply::Int(1));
    let r = q.run(&mut c, "EMQ.CLAIM", "", &[b"w1", b"30000"]);
    assert_eq!(r.array()[0].array().len(), 4);
    // ROW is a flag: a value after it is an unknown option, and nothing is written.
    assert_eq!(q.enqueue(&mut c, &jid(4), &[]), Reply::Int(1));
    let e = unchanged(&mut c, |c| q.run(c, "EMQ.CLAIM", "", &[b"w1", b"30000", b"ROW", b"ROW"]));
    assert!(e.error().starts_with("EMQSHAPE"), "{e:?}");
}

#[test]
fn completenext_finishes_then_claims_the_next_in_one_call() {
    let primary = Server::quiet();
    let replica = Server::quiet();
    let mut r = replica.follow(&primary);
    let mut c = primary.conn();
    let q = Q::new("next");
    for n in 1..=3 {
        assert_eq!(q.enqueue(&mut c, &jid(n), &[]), Reply::Int(1));
    }
    let got = q.run(&mut c, "EMQ.CLAIM", "", &[b"w1", b"30000"]);
    assert_eq!(got.array()[0].array()[0].str(), jid(1));

    let reply = next(&q, &mut c, &jid(1), "w1", &[]);
    let parts = reply.array();
    assert_eq!(parts[0], Reply::Int(1), "the finish");
    let jobs = parts[1].array();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].array()[0].str(), jid(2), "the next job, taken with the same token");
    let snap = q.snapshot(&mut c);
    assert_eq!(snap.state_of(&jid(1)).as_deref(), Some("completed"));
    assert_eq!(snap.state_of(&jid(2)).as_deref(), Some("active"));
    assert_eq!(snap.field(&jid(2), "tk").as_deref(), Some("w1"));

    // The same finish again: 0, and the claim still runs (COUNT 2, ROW).
    let reply = next(&q, &mut c, &jid(1), "w1", &[b"COUNT", b"2", b"ROW"]);
    assert_eq!(reply.array()[0], Reply::Int(0));
    let jobs = reply.array()[1].array();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].array().len(), 5, "ROW as CLAIM's");
    assert_eq!(jobs[0].array()[0].str(), jid(3));

    // Not held: refused, nothing written (the claim never runs).
    assert_eq!(q.enqueue(&mut c, &jid(4), &[]), Reply::Int(1));
    let e = unchanged(&mut c, |c| next(&q, c, &jid(2), "other", &[]));
    assert!(e.error().starts_with("EMQLEASE"), "{e:?}");
    for (args, class) in [
        (vec![&b"w1"[..], b"ok"], "EMQSHAPE"),
        (vec![b"w1", b"ok", b"0"], "EMQARG"),
        (vec![b"w1", b"ok", b"30000", b"COUNT", b"0"], "EMQARG"),
        (vec![b"w1", b"ok", b"30000", b"BLOCK", b"10"], "EMQSHAPE"),
        (vec![b"w1", b"ok", b"30000", b"KEEP", b"-2"], "EMQARG"),
    ] {
        let e = unchanged(&mut c, |c| q.run(c, "TRA.COMPLETENEXT", &jid(2), &args));
        assert!(e.error().starts_with(class), "{args:?}: {e:?}");
    }
    // A declared key of the wrong type refuses before the finish writes.
    c.call(&[b"SET", q.k("delayed").as_bytes(), b"x"]);
    let e = unchanged(&mut c, |c| next(&q, c, &jid(2), "w1", &[]));
    assert!(e.error().starts_with("WRONGTYPE"), "{e:?}");
    c.call(&[b"DEL", q.k("delayed").as_bytes()]);

    // The last jobs: finishing them with nothing left writes `drained` once, after `completed`.
    let reply = next(&q, &mut c, &jid(2), "w1", &[b"ECHO"]);
    assert_eq!(reply.array()[1].array()[0].array()[0].str(), jid(4));
    assert_eq!(next(&q, &mut c, &jid(3), "w1", &[]).array()[1], Reply::Array(vec![]));
    assert!(!events(&mut c, &q).contains(&"drained".to_string()), "jid(4) is still active");
    assert_eq!(next(&q, &mut c, &jid(4), "w1", &[]).array()[1], Reply::Array(vec![]));
    let ev = events(&mut c, &q);
    assert_eq!(ev.iter().filter(|e| *e == "drained").count(), 1);
    assert_eq!(&ev[ev.len() - 2..], ["completed", "drained"]);
    q.check_invariant(&mut c);

    c.call(&[b"WAIT", b"1", b"5000"]);
    wait_for(|| digest(&mut r) == digest(&mut c), "the replica holds what the primary holds");
}

/// The claim part meets a found row the caller may not write after the finish wrote: the
/// finish stands, the claim takes nothing, and the next CLAIM, which writes nothing, answers
/// the error. Through a script too: an error inside the reply would become the script's.
#[test]
fn completenext_leaves_a_refused_claim_to_the_next_claim() {
    let s = Server::quiet();
    let mut c = s.conn();
    let q = Q::new("acl");
    for n in 1..=2 {
        assert_eq!(q.enqueue(&mut c, &jid(n), &[]), Reply::Int(1));
    }
    assert_eq!(q.run(&mut c, "EMQ.CLAIM", "", &[b"w1", b"30000"]).array().len(), 1);
    let user = format!(
        "ACL SETUSER nx on >pw resetkeys %R~{{emq}}:version ~emq:{{acl}}:wait ~emq:{{acl}}:prio ~emq:{{acl}}:active ~emq:{{acl}}:delayed ~emq:{{acl}}:completed ~emq:{{acl}}:meta ~emq:{{acl}}:events ~emq:{{acl}}:job:{} -@all +tra.completenext",
        jid(1)
    );
    let argv: Vec<&[u8]> = user.split(' ').map(str::as_bytes).collect();
    assert_eq!(c.call(&argv), Reply::Simple("OK".into()));
    let mut u = s.conn();
    assert_eq!(u.call(&[b"AUTH", b"nx", b"pw"]), Reply::Simple("OK".into()));
    let reply = next(&q, &mut u, &jid(1), "w1", &[]);
    assert_eq!(reply, Reply::Array(vec![Reply::Int(1), Reply::Array(vec![])]));
    let snap = q.snapshot(&mut c);
    assert_eq!(snap.state_of(&jid(1)).as_deref(), Some("completed"));
    assert_eq!(snap.state_of(&jid(2)).as_deref(), Some("wait"), "the claim wrote nothing");
    let claim = q.run(&mut c, "EMQ.CLAIM", "", &[b"w1", b"30000"]).array().len();
    assert_eq!(claim, 1, "the default user takes it");
    // A row of another type in `wait`, finished and fetched inside a script.
    assert_eq!(q.enqueue(&mut c, &jid(3), &[]), Reply::Int(1));
    let row = q.job(&jid(3));
    assert_eq!(c.call(&[b"DEL", row.as_bytes()]), Reply::Int(1));
    assert_eq!(c.call(&[b"SET", row.as_bytes(), b"x"]), Reply::Simple("OK".into()));
    let mut call = vec![b"EVAL".to_vec(), b"return server.pcall(unpack(ARGV))".to_vec(), b"0".to_vec()];
    call.extend(q.cmd("TRA.COMPLETENEXT", &jid(2), &keys_of("TRA.COMPLETENEXT"), &[b"w1", b"ok", b"30000"]));
    let call: Vec<&[u8]> = call.iter().map(Vec::as_slice).collect();
    assert_eq!(c.call(&call), Reply::Array(vec![Reply::Int(1), Reply::Array(vec![])]));
    assert_eq!(q.snapshot(&mut c).state_of(&jid(2)).as_deref(), Some("completed"));
    let refused = q.run(&mut c, "EMQ.CLAIM", "", &[b"w1", b"30000"]);
    assert!(refused.error().starts_with("WRONGTYPE"), "{refused:?}");
}

/// `drained` means nothing is left to claim: a finish that empties `active` while `prio` (or
/// `wait`) still holds a job writes none, with COMPLETE … ECHO as with TRA.COMPLETENEXT.
#[test]
fn a_finish_with_a_job_left_in_either_ready_set_is_not_drained() {
    let s = Server::quiet();
    let mut c = s.conn();
    for (i, ready) in [&[b"PRIORITY".as_slice(), b"5"][..], &[]].into_iter().enumerate() {
        let q = Q::new(&format!("left{i}"));
        assert_eq!(q.enqueue(&mut c, &jid(1), &[]), Reply::Int(1));
        let claimed = q.run(&mut c, "EMQ.CLAIM", "", &[b"w", b"60000"]);
        assert_eq!(claimed.array()[0].array()[0].str(), jid(1));
        assert_eq!(q.enqueue(&mut c, &jid(2), ready), Reply::Int(1));
        assert_eq!(q.run(&mut c, "EMQ.COMPLETE", &jid(1), &[b"w", b"ok", b"ECHO"]), Reply::Int(1));
        assert!(!events(&mut c, &q).contains(&"drained".to_string()), "{i}: jid(2) is still ready");
        let claimed = q.run(&mut c, "EMQ.CLAIM", "", &[b"w", b"60000"]);
        assert_eq!(claimed.array()[0].array()[0].str(), jid(2));
        assert_eq!(q.run(&mut c, "EMQ.COMPLETE", &jid(2), &[b"w", b"ok", b"ECHO"]), Reply::Int(1));
        assert_eq!(events(&mut c, &q).last().map(String::as_str), Some("drained"), "{i}");
    }
}

/// A finish that fetches is drained only when no job is delayed either (a retry waiting out
/// its backoff is work to come), with TRA.COMPLETENEXT as with TRA.COMPLETESNEXT; COMPLETE,
/// which fetches nothing, looks at the ready sets and `active` alone.
#[test]
fn a_finish_that_fetches_with_a_job_delayed_is_not_drained() {
    let s = Server::quiet();
    let mut c = s.conn();
    let drained = |c: &mut Conn, q: &Q| events(c, q).iter().filter(|e| *e == "drained").count();
    for verb in ["TRA.COMPLETENEXT", "TRA.COMPLETESNEXT", "EMQ.COMPLETE"] {
        let q = Q::new(&format!("later-{verb}"));
        assert_eq!(q.enqueue(&mut c, &jid(1), &[]), Reply::Int(1));
        assert_eq!(q.run(&mut c, "EMQ.SCHEDULE", &jid(2), &[b"+600000", b"n", b"{}"]), Reply::Int(1));
        let claimed = q.run(&mut c, "EMQ.CLAIM", "", &[b"w", b"60000"]);
        assert_eq!(claimed.array()[0].array()[0].str(), jid(1));
        let finish = |c: &mut Conn, id: &str| match verb {
            "TRA.COMPLETESNEXT" => many(&q, c, &[(id.to_string(), "w")], "w", &[]),
            "TRA.COMPLETENEXT" => q.run(c, verb, id, &[b"w", b"ok", b"60000"]),
            _ => q.run(c, verb, id, &[b"w", b"ok"]),
        };
        let reply = finish(&mut c, &jid(1));
        assert!(reply.err().is_none(), "{verb}: {reply:?}");
        if verb == "EMQ.COMPLETE" {
            assert_eq!(drained(&mut c, &q), 1, "COMPLETE fetches nothing: drained with a job delayed");
            continue;
        }
        assert_eq!(drained(&mut c, &q), 0, "{verb}: jid(2) is delayed, work to come");
        // The delayed job made ready and taken: its finish leaves nothing at all.
        assert_eq!(q.run(&mut c, "EMQ.PROMOTE", &jid(2), &[]), Reply::Int(1));
        let claimed = q.run(&mut c, "EMQ.CLAIM", "", &[b"w", b"60000"]);
        assert_eq!(claimed.array()[0].array()[0].str(), jid(2));
        assert!(finish(&mut c, &jid(2)).err().is_none());
        assert_eq!(drained(&mut c, &q), 1, "{verb}");
        assert_eq!(events(&mut c, &q).last().map(String::as_str), Some("drained"));
        q.check_invariant(&mut c);
    }
}

/// `TRA.COMPLETESNEXT`: each `(id, token)` finished with the result `r:<id>`, then jobs
/// claimed with `claim` for 30 s.
fn many(q: &Q, c: &mut Conn, entries: &[(String, &str)], claim: &str, extra: &[&[u8]]) -> Reply {
    let mut v: Vec<Vec<u8>> = vec![b"TRA.COMPLETESNEXT".to_vec(), b"7".to_vec()];
    for role in ["wait", "prio", "active", "delayed", "completed", "meta", "events"] {
        v.push(q.k(role).into_bytes());
    }
    v.push(entries.len().to_string().into_bytes());
    v.extend(entries.iter().map(|(id, _)| q.job(id).into_bytes()));
    for (id, token) in entries {
        v.push(token.as_bytes().to_vec());
        v.push(format!("r:{id}").into_bytes());
    }
    v.push(claim.as_bytes().to_vec());
    v.push(b"30000".to_vec());
    v.extend(extra.iter().map(|e| e.to_vec()));
    let refs: Vec<&[u8]> = v.iter().map(Vec::as_slice).collect();
    c.call(&refs)
}

fn ids(r: &Reply) -> Vec<String> {
    r.array().iter().map(|j| j.array()[0].str()).collect()
}

#[test]
fn completesnext_finishes_many_then_claims_one_for_each_finished() {
    let primary = Server::quiet();
    let replica = Server::quiet();
    let mut r = replica.follow(&primary);
    let mut c = primary.conn();
    let q = Q::new("many");
    for n in 1..=6 {
        assert_eq!(q.enqueue(&mut c, &jid(n), &[]), Reply::Int(1));
    }
    assert_eq!(q.run(&mut c, "EMQ.CLAIM", "", &[b"w1", b"30000", b"COUNT", b"3"]).array().len(), 3);
    let before = events(&mut c, &q).len();

    // Two held, one with a wrong token, one with no row: two finish, two jobs are claimed.
    let entries = [(jid(1), "w1"), (jid(2), "w1"), (jid(3), "other"), (jid(9), "w1")];
    let reply = many(&q, &mut c, &entries, "w2", &[b"ECHO", b"METRICS", b"5"]);
    assert_eq!(reply.array()[0].ints(), [1, 1, -1, -2]);
    assert_eq!(ids(&reply.array()[1]), [jid(4), jid(5)]);
    let snap = q.check_invariant(&mut c);
    for (id, state) in
        [(1, "completed"), (2, "completed"), (3, "active"), (4, "active"), (5, "active"), (6, "wait")]
    {
        assert_eq!(snap.state_of(&jid(id)).as_deref(), Some(state), "{}", jid(id));
    }
    assert_eq!(snap.field(&jid(2), "r").as_deref(), Some(format!("r:{}", jid(2)).as_str()));
    assert_eq!(snap.field(&jid(3), "tk").as_deref(), Some("w1"), "not held by `other`: untouched");
    assert_eq!(snap.field(&jid(4), "tk").as_deref(), Some("w2"), "claimed with the claim's token");
    let ev = events(&mut c, &q);
    assert_eq!(&ev[before..], ["completed", "completed", "active", "active"]);
    let echoed = c.call(&[b"XREVRANGE", q.k("events").as_bytes(), b"+", b"-", b"COUNT", b"3"]);
    let fields: Vec<String> = echoed.array()[2].array()[1].array().iter().map(Reply::str).collect();
    assert_eq!(fields[fields.len() - 2..], ["result".to_string(), format!("r:{}", jid(2))], "ECHO");
    let counted = c.call(&[b"HGET", q.k("metrics:completed").as_bytes(), b"count"]);
    assert_eq!(counted.str(), "2", "METRICS counts the jobs finished");

    // The same call again: the two finishes are repeats (0, nothing written for them), and
    // each still fetches: one job is left to take.
    let reply = many(&q, &mut c, &entries, "w2", &[]);
    assert_eq!(reply.array()[0].ints(), [0, 0, -1, -2]);
    assert_eq!(ids(&reply.array()[1]), [jid(6)]);

    // No entry finishes nor repeats: nothing is written, not even a claim.
    let reply = unchanged(&mut c, |c| many(&q, c, &[(jid(3), "other"), (jid(8), "w1")], "w2", &[]));
    assert_eq!(
        reply,
        Reply::Array(vec![Reply::Array(vec![Reply::Int(-1), Reply::Int(-2)]), Reply::Array(vec![])])
    );

    // Refusals write nothing.
    let held = [(jid(3), "w1"), (jid(4), "w2")];
    let twice = [(jid(3), "w1"), (jid(3), "w1")];
    let no_token = [(jid(3), "")];
    type Case<'a> = (&'a [(String, &'a str)], &'a [&'a [u8]], &'a str);
    let cases: [Case; 6] = [
        (&held, &[b"KEEP", b"-2"], "EMQARG"),
        (&held, &[b"METRICS", b"0"], "EMQARG"),
        (&held, &[b"COUNT", b"2"], "EMQSHAPE"),
        (&held, &[b"ROW", b"ROW"], "EMQSHAPE"),
        (&twice, &[], "EMQARG"),
        (&no_token, &[], "EMQARG"),
    ];
    for (entries, extra, class) in cases {
        let e = unchanged(&mut c, |c| many(&q, c, entries, "w2", extra));
        assert!(e.error().starts_with(class), "{entries:?} {extra:?}: {e:?}");
    }
    // At most 50 jobs a call: 50 answer each for itself (none here, so nothing is written),
    // 51 are refused as such.
    let absent: Vec<(String, &str)> = (100..151).map(|i| (jid(i), "w1")).collect();
    let reply = unchanged(&mut c, |c| many(&q, c, &absent[..50], "w2", &[]));
    assert_eq!(reply.array()[0].ints(), [-2; 50]);
    let e = unchanged(&mut c, |c| many(&q, c, &absent, "w2", &[]));
    assert_eq!(e.error(), "EMQARG n must be 1..=50");
    // The lease, and a pair missing: the row keys say how many pairs there are.
    let base: Vec<Vec<u8>> = ["TRA.COMPLETESNEXT", "7"]
        .iter()
        .map(|w| w.as_bytes().to_vec())
        .chain(
            ["wait", "prio", "active", "delayed", "completed", "meta", "events"]
                .iter()
                .map(|r| q.k(r).into_bytes()),
        )
        .chain([b"2".to_vec(), q.job(&jid(3)).into_bytes(), q.job(&jid(4)).into_bytes()])
        .collect();
    let tails: [(&[&[u8]], &str); 3] = [
        (&[b"w1", b"ok", b"w2", b"ok", b"w2", b"0"], "EMQARG"),
        (&[b"w1", b"ok", b"w2", b"ok", b"30000"], "EMQSHAPE"),
        (&[b"w1", b"ok", b"w2", b"30000"], "EMQSHAPE"),
    ];
    for (tail, class) in tails {
        let mut v: Vec<&[u8]> = base.iter().map(Vec::as_slice).collect();
        v.extend_from_slice(tail);
        let e = unchanged(&mut c, |c| c.call(&v));
        assert!(e.error().starts_with(class), "{tail:?}: {e:?}");
    }
    // A row of another queue is refused by the layout check.
    let other = Q::new("other");
    let mut v: Vec<&[u8]> = base.iter().map(Vec::as_slice).collect();
    let foreign = other.job(&jid(4));
    let last = v.len() - 1;
    v[last] = foreign.as_bytes();
    v.extend_from_slice(&[b"w1", b"ok", b"w2", b"ok", b"w2", b"30000"]);
    let e = unchanged(&mut c, |c| c.call(&v));
    assert!(e.error().starts_with("EMQ"), "{e:?}");
    // A declared key of the wrong type refuses before the first write.
    c.call(&[b"SET", q.k("delayed").as_bytes(), b"x"]);
    let e = unchanged(&mut c, |c| many(&q, c, &held, "w2", &[]));
    assert!(e.error().starts_with("WRONGTYPE"), "{e:?}");
    c.call(&[b"DEL", q.k("delayed").as_bytes()]);

    // The last three held jobs, finished with KEEP 0 and nothing left to take: their rows
    // go, and the call ends with one `drained`.
    let last = [(jid(3), "w1"), (jid(4), "w2"), (jid(5), "w2"), (jid(6), "w2")];
    let reply = many(&q, &mut c, &last, "w3", &[b"KEEP", b"0", b"ROW"]);
    assert_eq!(reply.array()[0].ints(), [1, 1, 1, 1]);
    assert_eq!(reply.array()[1], Reply::Array(vec![]));
    let snap = q.check_invariant(&mut c);
    assert!(last.iter().all(|(id, _)| !snap.rows.contains_key(id)), "KEEP 0 deletes the rows");
    let ev = events(&mut c, &q);
    assert_eq!(ev.iter().filter(|e| *e == "drained").count(), 1);
    assert_eq!(ev.last().map(String::as_str), Some("drained"));

    c.call(&[b"WAIT", b"1", b"5000"]);
    wait_for(|| digest(&mut r) == digest(&mut c), "the replica holds what the primary holds");
}

/// ROW hands out each claimed job's row as CLAIM … ROW does, and the claim takes no more
/// jobs than entries finished, however many are ready.
#[test]
fn completesnext_with_row_answers_as_claim_with_row() {
    let s = Server::quiet();
    let mut c = s.conn();
    let q = Q::new("rows");
    for n in 1..=8 {
        assert_eq!(q.enqueue(&mut c, &jid(n), &[b"OPTS", b"{\"a\":1}"]), Reply::Int(1));
    }
    assert_eq!(q.run(&mut c, "EMQ.CLAIM", "", &[b"w", b"30000", b"COUNT", b"2"]).array().len(), 2);
    let reply = many(&q, &mut c, &[(jid(1), "w"), (jid(2), "w")], "w", &[b"ROW"]);
    let jobs = reply.array()[1].array();
    assert_eq!(ids(&reply.array()[1]), [jid(3), jid(4)]);
    for j in jobs {
        let e = j.array();
        assert_eq!(e.len(), 5, "[id name data attempt row]");
        assert!(map(&e[4]).iter().any(|(k, v)| k == "opts" && v.str() == "{\"a\":1}"));
    }
    let snap = q.snapshot(&mut c);
    assert_eq!((5..=8).filter(|n| snap.state_of(&jid(*n)).as_deref() == Some("wait")).count(), 4);
}

/// `BY worker` on every verb that claims records the worker's name in each row it takes
/// (`w`), which TRA.JOB shows as `worker` and ROW hands out; a claim without BY leaves the
/// name the last one recorded. A refused BY writes nothing, and a replica holds the names.
#[test]
fn a_claim_by_a_worker_records_its_name() {
    let primary = Server::quiet();
    let replica = Server::quiet();
    let mut r = replica.follow(&primary);
    let mut c = primary.conn();
    let q = Q::new("by");
    for n in 1..=6 {
        assert_eq!(q.enqueue(&mut c, &jid(n), &[]), Reply::Int(1));
    }
    let worker = |c: &mut Conn, n: u64| {
        let m = map(&c.call(&[b"TRA.JOB", b"1", q.job(&jid(n)).as_bytes()]));
        m.into_iter().find(|(k, _)| k == "worker").map(|(_, v)| v).expect("a worker fact")
    };
    let row_of = |claim: &Reply, at: usize| map(&claim.array()[at].array()[4]);
    let named = |row: &[(String, Reply)]| row.iter().find(|(k, _)| k == "worker").map(|(_, v)| v.str());

    // CLAIM: the row records it, ROW shows it; a claim without BY records nothing.
    let got = q.run(&mut c, "EMQ.CLAIM", "", &[b"w1", b"30000", b"BY", b"alpha", b"ROW"]);
    assert_eq!(named(&row_of(&got, 0)).as_deref(), Some("alpha"));
    assert_eq!(worker(&mut c, 1).str(), "alpha");
    assert_eq!(q.snapshot(&mut c).field(&jid(1), "w").as_deref(), Some("alpha"));
    let got = q.run(&mut c, "EMQ.CLAIM", "", &[b"w2", b"30000", b"ROW"]);
    assert_eq!(named(&row_of(&got, 0)), None);
    assert_eq!(worker(&mut c, 2), Reply::Nil);

    // Retried and claimed again without BY: the name of the claim before stays, and ROW
    // shows it; a claim with another BY replaces it.
    assert!(q.run(&mut c, "EMQ.FAIL", &jid(1), &[b"w1", b"no", b"RETRY"]).err().is_none());
    assert!(q.run(&mut c, "EMQ.FAIL", &jid(2), &[b"w2", b"no", b"FINAL"]).err().is_none());
    let got = q.run(&mut c, "EMQ.CLAIM", "", &[b"w3", b"30000", b"ROW"]);
    assert_eq!(got.array()[0].array()[0].str(), jid(3), "the retried job went to the back of wait");
    assert!(q.run(&mut c, "EMQ.COMPLETE", &jid(3), &[b"w3", b"ok"]).err().is_none());
    let got = q.run(&mut c, "EMQ.CLAIM", "", &[b"w4", b"30000", b"COUNT", b"3", b"ROW"]);
    let claimed: Vec<String> = got.array().iter().map(|j| j.array()[0].str()).collect();
    assert_eq!(claimed, [jid(4), jid(5), jid(6)]);
    assert!(q.run(&mut c, "EMQ.FAIL", &jid(4), &[b"w4", b"no", b"RETRY"]).err().is_none());
    let got = q.run(&mut c, "EMQ.CLAIM", "", &[b"w5", b"30000", b"COUNT", b"2", b"ROW"]);
    let claimed: Vec<String> = got.array().iter().map(|j| j.array()[0].str()).collect();
    assert_eq!(claimed, [jid(1), jid(4)]);
    assert_eq!(named(&row_of(&got, 0)).as_deref(), Some("alpha"), "kept from the first claim");
    assert_eq!(worker(&mut c, 1).str(), "alpha");
    assert_eq!(worker(&mut c, 4), Reply::Nil);

    // TRA.COMPLETENEXT: the finished job keeps its name, the fetched one gets BY's.
    assert_eq!(q.enqueue(&mut c, &jid(7), &[]), Reply::Int(1));
    let reply = next(&q, &mut c, &jid(1), "w5", &[b"BY", b"beta", b"ROW"]);
    let jobs = reply.array()[1].array();
    assert_eq!(jobs[0].array()[0].str(), jid(7));
    assert_eq!(named(&map(&jobs[0].array()[4])).as_deref(), Some("beta"));
    assert_eq!((worker(&mut c, 1).str(), worker(&mut c, 7).str()), ("alpha".into(), "beta".into()));

    // TRA.COMPLETESNEXT: each job it fetches.
    for n in 8..=9 {
        assert_eq!(q.enqueue(&mut c, &jid(n), &[]), Reply::Int(1));
    }
    let reply = many(&q, &mut c, &[(jid(4), "w5"), (jid(5), "w4")], "w6", &[b"BY", b"gamma"]);
    assert_eq!(ids(&reply.array()[1]), [jid(8), jid(9)]);
    assert_eq!((worker(&mut c, 8).str(), worker(&mut c, 9).str()), ("gamma".into(), "gamma".into()));

    // A claim that waited (BLOCK) records its BY when it takes the job.
    let mut w = primary.conn();
    let v = q.cmd(
        "EMQ.CLAIM",
        "",
        &keys_of("EMQ.CLAIM"),
        &[b"w7", b"30000", b"BLOCK", b"10000", b"BY", b"delta"],
    );
    w.send(&v.iter().map(Vec::as_slice).collect::<Vec<_>>()).expect("send");
    wait_for(|| info_field(&mut c, "clients", "blocked_clients") == "1", "the claim waits");
    assert_eq!(q.enqueue(&mut c, &jid(10), &[]), Reply::Int(1));
    let got = w.read().expect("a reply");
    assert_eq!(got.array()[0].array()[0].str(), jid(10));
    assert_eq!(worker(&mut c, 10).str(), "delta");

    // Refused BY: nothing written.
    assert_eq!(q.enqueue(&mut c, &jid(11), &[]), Reply::Int(1));
    let long = vec![b'n'; 257];
    for (args, class) in [
        (vec![&b"w8"[..], b"30000", b"BY", b""], "EMQARG"),
        (vec![b"w8", b"30000", b"BY", &long], "EMQARG"),
        (vec![b"w8", b"30000", b"BY"], "EMQSHAPE"),
        (vec![b"w8", b"30000", b"BY", b"a", b"BY", b"b"], "EMQSHAPE"),
    ] {
        let e = unchanged(&mut c, |c| q.run(c, "EMQ.CLAIM", "", &args));
        assert!(e.error().starts_with(class), "{args:?}: {e:?}");
    }
    let e = unchanged(&mut c, |c| next(&q, c, &jid(10), "w7", &[b"BY", b""]));
    assert!(e.error().starts_with("EMQARG"), "{e:?}");
    let e = unchanged(&mut c, |c| many(&q, c, &[(jid(10), "w7")], "w9", &[b"BY", &long]));
    assert!(e.error().starts_with("EMQARG"), "{e:?}");
    // 256 bytes is a name.
    let most = vec![b'n'; 256];
    let got = q.run(&mut c, "EMQ.CLAIM", "", &[b"w8", b"30000", b"BY", &most]);
    assert_eq!(got.array()[0].array()[0].str(), jid(11));
    assert_eq!(worker(&mut c, 11).str(), "n".repeat(256));
    q.check_invariant(&mut c);

    c.call(&[b"WAIT", b"1", b"5000"]);
    wait_for(|| digest(&mut r) == digest(&mut c), "the replica holds what the primary holds");
}
