//! Administration against a real server: TRA.REMOVE deletes one job from whatever state it is
//! in, refuses a held job without FORCE, writes nothing when it refuses, and replicates.

use trafikey_support::*;

fn remove(c: &mut Conn, q: &Q, id: &str, force: bool) -> Reply {
    let roles = ["job", "wait", "prio", "active", "delayed", "completed", "failed", "events"];
    let args: &[&[u8]] = if force { &[b"FORCE"] } else { &[] };
    let v = q.cmd("TRA.REMOVE", id, &roles, args);
    let refs: Vec<&[u8]> = v.iter().map(Vec::as_slice).collect();
    c.call(&refs)
}

#[test]
fn remove_deletes_a_job_from_any_state() {
    let primary = Server::quiet();
    let replica = Server::start(Opts::default());
    let mut r = replica.follow(&primary);
    let mut c = primary.conn();
    let q = Q::new("rm");
    for n in 1..=4 {
        q.enqueue(&mut c, &jid(n), &[]);
    }
    q.enqueue(&mut c, &jid(5), &[b"PRIORITY", b"3"]);
    q.run(&mut c, "EMQ.SCHEDULE", &jid(6), &[b"+100000", b"n", b"d"]);
    let got = q.run(&mut c, "EMQ.CLAIM", "", &[b"w", b"60000", b"COUNT", b"3"]);
    assert_eq!(got.array().len(), 3);
    q.run(&mut c, "EMQ.COMPLETE", &jid(1), &[b"w", b"ok"]);
    q.run(&mut c, "EMQ.FAIL", &jid(2), &[b"w", b"no", b"FINAL"]);
    // jid 3 is held, jid 4 waits, 5 in prio, 6 delayed, 1 completed, 2 failed.
    for (id, prev) in
        [(jid(4), "wait"), (jid(5), "prio"), (jid(6), "delayed"), (jid(1), "completed"), (jid(2), "failed")]
    {
        assert_eq!(remove(&mut c, &q, &id, false), Reply::Int(1), "{id}");
        let snap = q.check_invariant(&mut c);
        assert_eq!(snap.state_of(&id), None, "{id} gone");
        let ev = c.call(&[b"XREVRANGE", q.k("events").as_bytes(), b"+", b"-", b"COUNT", b"1"]);
        assert_eq!(ev.array()[0].array()[1].strings(), ["event", "removed", "id", &id, "prev", prev]);
    }
    assert_eq!(remove(&mut c, &q, &jid(4), false), Reply::Int(0), "already gone");
    // Held: only with FORCE; its holder then finds no job.
    let e = unchanged(&mut c, |c| remove(c, &q, &jid(3), false));
    assert!(e.error().starts_with("EMQSTATE"), "{e:?}");
    assert_eq!(remove(&mut c, &q, &jid(3), true), Reply::Int(1));
    let e = q.run(&mut c, "EMQ.COMPLETE", &jid(3), &[b"w", b"ok"]);
    assert!(e.error().starts_with("EMQNOJOB"), "{e:?}");
    q.check_invariant(&mut c);
    assert_eq!(c.call(&[b"WAIT", b"1", b"2000"]), Reply::Int(1));
    assert_eq!(digest(&mut c), digest(&mut r), "the replica holds what the primary holds");
    // Refusals write nothing: bad id, the fence.
    assert!(unchanged(&mut c, |c| remove(c, &q, "nope", false)).error().starts_with("EMQID"));
    c.call(&[b"DEL", b"{emq}:version"]);
    assert!(unchanged(&mut c, |c| remove(c, &q, &jid(9), false)).error().starts_with("EMQWIRE"));
}

fn drain(c: &mut Conn, q: &Q, extra: &[&[u8]]) -> Reply {
    let v = q.cmd("TRA.DRAIN", "", &["wait", "prio", "delayed", "events"], extra);
    let refs: Vec<&[u8]> = v.iter().map(Vec::as_slice).collect();
    c.call(&refs)
}

fn clean(c: &mut Conn, q: &Q, set: &str, extra: &[&[u8]]) -> Reply {
    let v = q.cmd("TRA.CLEAN", "", &[set, "events"], extra);
    let refs: Vec<&[u8]> = v.iter().map(Vec::as_slice).collect();
    c.call(&refs)
}

fn obliterate(c: &mut Conn, q: &Q, extra: &[&[u8]]) -> Reply {
    let roles = ["wait", "prio", "active", "delayed", "completed", "failed", "meta", "events"];
    let v = q.cmd("TRA.OBLITERATE", "", &roles, extra);
    let refs: Vec<&[u8]> = v.iter().map(Vec::as_slice).collect();
    c.call(&refs)
}

#[test]
fn progress_is_the_holders_to_report() {
    let s = Server::quiet();
    let mut c = s.conn();
    let q = Q::new("prog");
    q.enqueue(&mut c, &jid(1), &[]);
    q.run(&mut c, "EMQ.CLAIM", "", &[b"w", b"60000"]);
    assert_eq!(q.run(&mut c, "TRA.PROGRESS", &jid(1), &[b"w", b"{\"done\":40}"]), Reply::Int(1));
    assert_eq!(q.snapshot(&mut c).field(&jid(1), "g").as_deref(), Some("{\"done\":40}"));
    let r = c.call(&[b"TRA.JOB", b"1", q.job(&jid(1)).as_bytes()]);
    let p: Vec<(String, Reply)> = r.array().chunks(2).map(|p| (p[0].str(), p[1].clone())).collect();
    assert_eq!(
        p.iter().find(|(k, _)| k == "progress").map(|(_, v)| v.str()).as_deref(),
        Some("{\"done\":40}")
    );
    let e = unchanged(&mut c, |c| q.run(c, "TRA.PROGRESS", &jid(1), &[b"other", b"x"]));
    assert!(e.error().starts_with("EMQLEASE"), "{e:?}");
    let big = vec![b'x'; 4097];
    let e = unchanged(&mut c, |c| q.run(c, "TRA.PROGRESS", &jid(1), &[b"w", &big]));
    assert!(e.error().starts_with("EMQARG"), "{e:?}");
    assert_eq!(q.run(&mut c, "TRA.PROGRESS", &jid(1), &[b"w", &big[..4096]]), Reply::Int(1));
}

#[test]
fn drain_clean_and_obliterate_work_in_bounded_batches() {
    let s = Server::quiet();
    let mut c = s.conn();
    let q = Q::new("adm");
    for n in 1..=30 {
        q.enqueue(&mut c, &jid(n), if n % 3 == 0 { &[b"PRIORITY", b"2"] } else { &[] });
    }
    for n in 31..=35 {
        q.run(&mut c, "EMQ.SCHEDULE", &jid(n), &[b"+100000", b"n", b"d"]);
    }
    q.run(&mut c, "EMQ.CLAIM", "", &[b"w", b"60000", b"COUNT", b"4"]);
    // DRAIN: the waiting ones, 10 at a time; held and delayed stay (DELAYED takes those).
    assert_eq!(drain(&mut c, &q, &[b"COUNT", b"10"]), Reply::Int(10));
    q.check_invariant(&mut c);
    assert_eq!(drain(&mut c, &q, &[b"COUNT", b"10"]), Reply::Int(10));
    assert_eq!(drain(&mut c, &q, &[b"COUNT", b"10"]), Reply::Int(6));
    assert_eq!(drain(&mut c, &q, &[]), Reply::Int(0));
    assert_eq!(drain(&mut c, &q, &[b"DELAYED"]), Reply::Int(5));
    let snap = q.check_invariant(&mut c);
    assert_eq!(snap.rows.len(), 4, "the four held jobs remain");
    let ev = c.call(&[b"XREVRANGE", q.k("events").as_bytes(), b"+", b"-", b"COUNT", b"1"]);
    assert_eq!(ev.array()[0].array()[1].strings(), ["event", "cleaned", "count", "5"]);
    // CLEAN: finished jobs older than the grace, oldest first.
    let held: Vec<String> = snap.sets["active"].clone();
    for id in &held {
        q.run(&mut c, "EMQ.COMPLETE", id, &[b"w", b"ok", b"KEEP", b"-1"]);
    }
    assert_eq!(clean(&mut c, &q, "completed", &[b"GRACE", b"100000"]), Reply::Array(vec![]), "too young");
    std::thread::sleep(std::time::Duration::from_millis(20));
    let r = clean(&mut c, &q, "completed", &[b"GRACE", b"5", b"COUNT", b"3"]);
    assert_eq!(r.strings().len(), 3);
    assert_eq!(clean(&mut c, &q, "completed", &[b"GRACE", b"5"]).strings().len(), 1);
    q.check_invariant(&mut c);
    for (bad, class) in [
        (&[&b"GRACE"[..], b"-1"][..], "EMQARG"),
        (&[b"COUNT", b"5"], "EMQSHAPE"),
        (&[b"GRACE", b"1", b"COUNT", b"0"], "EMQARG"),
        (&[b"GRACE", b"1", b"COUNT", b"10001"], "EMQARG"),
    ] {
        assert!(unchanged(&mut c, |c| clean(c, &q, "failed", bad)).error().starts_with(class), "{bad:?}");
    }
    assert!(clean(&mut c, &q, "wait", &[b"GRACE", b"1"]).error().starts_with("EMQLAYOUT"));
    // OBLITERATE: refused while a job is active, then gone in bounded calls.
    for n in 40..=60 {
        q.enqueue(&mut c, &jid(n), &[]);
    }
    q.run(&mut c, "EMQ.CLAIM", "", &[b"w", b"60000"]);
    let e = unchanged(&mut c, |c| obliterate(c, &q, &[]));
    assert!(e.error().starts_with("EMQSTATE"), "{e:?}");
    let mut calls = 0;
    loop {
        let left = obliterate(&mut c, &q, &[b"FORCE", b"COUNT", b"8"]).int();
        calls += 1;
        q.check_invariant(&mut c);
        if left == 0 {
            break;
        }
        assert!(calls < 20, "it ends");
    }
    assert!(calls >= 3, "bounded: {calls} calls");
    let keys = c.call(&[b"KEYS", format!("emq:{{{}}}:*", q.0).as_bytes()]);
    assert_eq!(keys, Reply::Array(vec![]), "nothing of the queue is left");
}
