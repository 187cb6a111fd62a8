//! What event readers and any client may do beside the holder, against a real server:
//! progress and logs from anyone (`TRA.SETPROGRESS`, `TRA.ADDLOG`), the facts events carry
//! on request (`ECHO` on COMPLETE and the progress commands), and the `drained` event.
// A test may panic: that is how it fails. The module's own rules are for src/.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

use trafikey_support::*;

fn names(c: &mut Conn, q: &Q) -> Vec<String> {
    let r = c.call(&[b"XRANGE", q.k("events").as_bytes(), b"-", b"+"]);
    r.array().iter().map(|e| e.array()[1].array()[1].str()).collect()
}

fn addlog(c: &mut Conn, q: &Q, id: &str, line: &str, extra: &[&[u8]]) -> Reply {
    let (row, log) = (q.job(id), q.k(&format!("log:{id}")));
    let mut argv: Vec<&[u8]> = vec![b"TRA.ADDLOG", b"2", row.as_bytes(), log.as_bytes(), line.as_bytes()];
    argv.extend_from_slice(extra);
    c.call(&argv)
}

#[test]
fn progress_and_logs_from_any_client_in_any_state() {
    let primary = Server::quiet();
    let replica = Server::quiet();
    let mut r = replica.follow(&primary);
    let mut c = primary.conn();
    let q = Q::new("any");
    assert_eq!(q.enqueue(&mut c, &jid(1), &[]), Reply::Int(1));
    // Waiting, held by nobody: reported and logged all the same.
    assert_eq!(q.run(&mut c, "TRA.SETPROGRESS", &jid(1), &[b"10"]), Reply::Int(1));
    assert_eq!(q.last_event(&mut c), ["event", "progress", "id", &jid(1)]);
    assert_eq!(q.run(&mut c, "TRA.SETPROGRESS", &jid(1), &[b"20", b"ECHO"]), Reply::Int(1));
    assert_eq!(q.last_event(&mut c), ["event", "progress", "id", &jid(1), "progress", "20"]);
    assert_eq!(addlog(&mut c, &q, &jid(1), "one", &[]), Reply::Int(1));
    assert_eq!(addlog(&mut c, &q, &jid(1), "two", &[b"KEEP", b"1"]), Reply::Int(1));
    assert_eq!(
        c.call(&[b"LRANGE", q.k(&format!("log:{}", jid(1))).as_bytes(), b"0", b"-1"]).strings(),
        ["two"]
    );
    // Held by a worker: anyone still reports; the holder's own command too, with ECHO.
    assert_eq!(q.run(&mut c, "EMQ.CLAIM", "", &[b"w1", b"30000"]).array().len(), 1);
    assert_eq!(q.run(&mut c, "TRA.SETPROGRESS", &jid(1), &[b"30"]), Reply::Int(1));
    assert_eq!(q.run(&mut c, "TRA.PROGRESS", &jid(1), &[b"w1", b"40", b"ECHO"]), Reply::Int(1));
    assert_eq!(q.last_event(&mut c), ["event", "progress", "id", &jid(1), "progress", "40"]);
    let job = c.call(&[b"TRA.JOB", b"1", q.job(&jid(1)).as_bytes()]);
    let at = job.array().iter().position(|f| *f == Reply::Bulk(b"progress".to_vec())).unwrap();
    assert_eq!(job.array()[at + 1].str(), "40");
    // Finished: still reported and logged.
    assert_eq!(q.run(&mut c, "EMQ.COMPLETE", &jid(1), &[b"w1", b"done"]), Reply::Int(1));
    assert_eq!(q.run(&mut c, "TRA.SETPROGRESS", &jid(1), &[b"100"]), Reply::Int(1));
    assert_eq!(addlog(&mut c, &q, &jid(1), "three", &[]), Reply::Int(2));

    // Refusals write nothing.
    let long = "x".repeat(4097);
    for (args, class) in [
        (vec![long.as_bytes()], "EMQARG"),
        (vec![], "EMQSHAPE"),
        (vec![&b"1"[..], b"ECHO", b"ECHO"], "EMQSHAPE"),
        (vec![b"1", b"LOUD"], "EMQSHAPE"),
    ] {
        let e = unchanged(&mut c, |c| q.run(c, "TRA.SETPROGRESS", &jid(1), &args));
        assert!(e.error().starts_with(class), "{args:?}: {e:?}");
    }
    let e = unchanged(&mut c, |c| q.run(c, "TRA.SETPROGRESS", &jid(9), &[b"1"]));
    assert_eq!(e.error(), format!("EMQNOJOB no job {}", jid(9)));
    let e = unchanged(&mut c, |c| addlog(c, &q, &jid(9), "x", &[]));
    assert_eq!(e.error(), format!("EMQNOJOB no job {}", jid(9)));
    let e = unchanged(&mut c, |c| addlog(c, &q, &jid(1), "x", &[b"KEEP", b"0"]));
    assert!(e.error().starts_with("EMQARG"), "{e:?}");
    let e = unchanged(&mut c, |c| {
        c.call(&[
            b"TRA.ADDLOG",
            b"2",
            q.job(&jid(1)).as_bytes(),
            q.k(&format!("log:{}", jid(2))).as_bytes(),
            b"x",
        ])
    });
    assert!(e.error().starts_with("EMQLAYOUT"), "{e:?}");

    c.call(&[b"WAIT", b"1", b"5000"]);
    wait_for(|| digest(&mut r) == digest(&mut c), "the replica holds what the primary holds");
}

/// ACL grants the holder's commands and anyone's apart: a worker granted TRA.PROGRESS and
/// TRA.LOG cannot report on a job it does not hold.
#[test]
fn acl_tells_the_holders_reports_from_anyones() {
    let s = Server::quiet();
    let mut c = s.conn();
    let q = Q::new("grant");
    assert_eq!(q.enqueue(&mut c, &jid(1), &[]), Reply::Int(1));
    let user = "ACL SETUSER w on >pw resetkeys %R~{emq}:version ~emq:{grant}:* -@all +tra.progress +tra.log";
    let argv: Vec<&[u8]> = user.split(' ').map(str::as_bytes).collect();
    assert_eq!(c.call(&argv), Reply::Simple("OK".into()));
    let mut w = s.conn();
    assert_eq!(w.call(&[b"AUTH", b"w", b"pw"]), Reply::Simple("OK".into()));
    let e = unchanged(&mut c, |_| q.run(&mut w, "TRA.SETPROGRESS", &jid(1), &[b"1"]));
    assert!(e.error().starts_with("NOPERM"), "{e:?}");
    let e = unchanged(&mut c, |_| addlog(&mut w, &q, &jid(1), "x", &[]));
    assert!(e.error().starts_with("NOPERM"), "{e:?}");
    let e = unchanged(&mut c, |_| q.run(&mut w, "TRA.PROGRESS", &jid(1), &[b"t", b"1"]));
    assert!(e.error().starts_with("EMQLEASE"), "{e:?}");
}

#[test]
fn complete_echoes_its_result_and_a_drained_queue_says_so() {
    let s = Server::quiet();
    let mut c = s.conn();
    let q = Q::new("echo");
    for n in 1..=2 {
        assert_eq!(q.enqueue(&mut c, &jid(n), &[]), Reply::Int(1));
    }
    assert_eq!(q.run(&mut c, "EMQ.CLAIM", "", &[b"w1", b"30000", b"COUNT", b"2"]).array().len(), 2);
    assert_eq!(q.run(&mut c, "EMQ.COMPLETE", &jid(1), &[b"w1", b"r1", b"ECHO"]), Reply::Int(1));
    assert_eq!(q.last_event(&mut c), ["event", "completed", "id", &jid(1), "attempt", "1", "result", "r1"]);
    // One job still active: not drained. Without ECHO the event is lean.
    assert!(!names(&mut c, &q).contains(&"drained".to_string()));
    assert_eq!(q.run(&mut c, "EMQ.COMPLETE", &jid(2), &[b"w1", b"r2", b"KEEP", b"0"]), Reply::Int(1));
    let ev = names(&mut c, &q);
    assert_eq!(&ev[ev.len() - 2..], ["completed", "drained"]);
    assert_eq!(q.last_event(&mut c), ["event", "drained"]);
    let e = unchanged(&mut c, |c| q.run(c, "EMQ.COMPLETE", &jid(2), &[b"w1", b"r2", b"ECHO", b"ECHO"]));
    assert!(e.error().starts_with("EMQSHAPE"), "{e:?}");

    // Something ready left: no drained.
    let q2 = Q::new("echo2");
    for n in 1..=2 {
        assert_eq!(q2.enqueue(&mut c, &jid(n), &[]), Reply::Int(1));
    }
    assert_eq!(q2.run(&mut c, "EMQ.CLAIM", "", &[b"w1", b"30000"]).array().len(), 1);
    assert_eq!(q2.run(&mut c, "EMQ.COMPLETE", &jid(1), &[b"w1", b"r"]), Reply::Int(1));
    assert!(!names(&mut c, &q2).contains(&"drained".to_string()));

    // A caller who may not read `wait` finishes all the same, without a drained event.
    let q3 = Q::new("echo3");
    assert_eq!(q3.enqueue(&mut c, &jid(1), &[]), Reply::Int(1));
    assert_eq!(q3.run(&mut c, "EMQ.CLAIM", "", &[b"w1", b"30000"]).array().len(), 1);
    let user = "ACL SETUSER f on >pw resetkeys %R~{emq}:version ~emq:{echo3}:active ~emq:{echo3}:completed ~emq:{echo3}:events ~emq:{echo3}:job:* -@all +emq.complete";
    let argv: Vec<&[u8]> = user.split(' ').map(str::as_bytes).collect();
    assert_eq!(c.call(&argv), Reply::Simple("OK".into()));
    let mut f = s.conn();
    assert_eq!(f.call(&[b"AUTH", b"f", b"pw"]), Reply::Simple("OK".into()));
    assert_eq!(q3.run(&mut f, "EMQ.COMPLETE", &jid(1), &[b"w1", b"r"]), Reply::Int(1));
    assert_eq!(names(&mut c, &q3).last().map(String::as_str), Some("completed"));
}
