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
