//! A server at its memory limit (`maxmemory`, `maxmemory-policy noeviction`): filled with
//! ENQUEUE until it answers its OOM error, the producers (ENQUEUE, SCHEDULE, APPEND, PUBLISH,
//! FAILURES: `deny-oom`) are refused with that error and write nothing (`DEBUG DIGEST`
//! unchanged), while the verbs that move and finish jobs (CLAIM, EXTEND, EXTENDS, COMPLETE,
//! FAIL, REQUEUE, DELAY, STALLED, and PROMOTE, RESCHEDULE, REPROCESS) still work, and so does
//! upkeep: the queue drains (COMPLETE … KEEP 0 frees each job), and once enough is freed the
//! producers work again.

use std::thread::sleep;
use std::time::Duration;

use trafikey_support::reliability::*;
use trafikey_support::*;

const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'";

fn used(c: &mut Conn) -> u64 {
    info_field(c, "memory", "used_memory").parse().expect("used_memory")
}

fn ok(r: Reply) -> Reply {
    assert!(r.err().is_none(), "refused at the memory limit: {r:?}");
    r
}

/// One call of each producer, each on a fresh id or key.
fn producers(q: &Q, bus: &Q, n: u64) -> Vec<(&'static str, Vec<Vec<u8>>)> {
    let job = jid(900_000 + n);
    let sched = jid(950_000 + n);
    let msg = id_of("MSG", n);
    let fails = format!("emq:{{{}}}:fails:{msg}", bus.0);
    vec![
        ("EMQ.ENQUEUE", q.cmd("EMQ.ENQUEUE", &job, keys_of("EMQ.ENQUEUE"), &[b"job", b"{}"])),
        ("EMQ.SCHEDULE", q.cmd("EMQ.SCHEDULE", &sched, keys_of("EMQ.SCHEDULE"), &[b"+60000", b"job", b"{}"])),
        (
            "EMQ.APPEND",
            vec![
                b"EMQ.APPEND".to_vec(),
                b"2".to_vec(),
                bus.k("bus").into_bytes(),
                bus.k("seen").into_bytes(),
                msg.clone().into_bytes(),
                b"payload".to_vec(),
            ],
        ),
        (
            "EMQ.PUBLISH",
            vec![
                b"EMQ.PUBLISH".to_vec(),
                b"2".to_vec(),
                bus.k("bus").into_bytes(),
                bus.k("seen").into_bytes(),
                id_of("EVT", n).into_bytes(),
                b"payload".to_vec(),
            ],
        ),
        ("EMQ.FAILURES", vec![b"EMQ.FAILURES".to_vec(), b"1".to_vec(), fails.into_bytes()]),
    ]
}

fn call(c: &mut Conn, v: &[Vec<u8>]) -> Reply {
    let refs: Vec<&[u8]> = v.iter().map(Vec::as_slice).collect();
    c.call(&refs)
}

fn claim(q: &Q, c: &mut Conn, tok: &str, count: u64) -> Vec<String> {
    let n = count.to_string();
    let r = ok(q.run(c, "EMQ.CLAIM", "", &[tok.as_bytes(), b"600000", b"COUNT", n.as_bytes()]));
    r.array().iter().map(|j| j.array()[0].str()).collect()
}

#[test]
fn a_full_server_refuses_producers_and_still_drains() {
    // Upkeep looks only when something falls due (at most once a minute here), so STALLED below
    // meets the expired lease itself; a DELAY wakes upkeep later on.
    let s = Server::start(Opts {
        module_args: args(&["events-maxlen", "2000", "upkeep-tick-ms", "60000"]),
        ..Opts::default()
    });
    let mut c = s.conn();
    assert_eq!(c.call(&[b"EMQ.INSTALL", b"1", b"{emq}:version"]), Reply::Int(1));
    let q = Q::new("full");
    let bus = Q::new("fullbus");
    assert_eq!(c.call(&[b"CONFIG", b"SET", b"maxmemory-policy", b"noeviction"]), Reply::Simple("OK".into()));
    let limit = used(&mut c) + 4 * 1024 * 1024;
    assert_eq!(
        c.call(&[b"CONFIG", b"SET", b"maxmemory", limit.to_string().as_bytes()]),
        Reply::Simple("OK".into())
    );
    // Fill until the server says no.
    let data = vec![b'x'; 512];
    let mut jobs: Vec<String> = Vec::new();
    let mut refused = None;
    let mut n = 1;
    while refused.is_none() {
        assert!(n < 100_000, "never refused: used {} of {limit}", used(&mut c));
        let batch: Vec<String> = (n..n + 200).map(jid).collect();
        n += 200;
        let cmds: Vec<Vec<Vec<u8>>> = batch
            .iter()
            .map(|id| q.cmd("EMQ.ENQUEUE", id, keys_of("EMQ.ENQUEUE"), &[b"job", &data, b"ATTEMPTS", b"2"]))
            .collect();
        for (id, r) in batch.iter().zip(c.pipeline(&cmds)) {
            match r {
                Reply::Int(1) => jobs.push(id.clone()),
                Reply::Error(e) => refused = Some(e),
                other => panic!("ENQUEUE {id}: {other:?}"),
            }
        }
    }
    let e = refused.unwrap_or_default();
    assert!(e.starts_with(OOM), "the server's OOM error: {e}");
    let full = used(&mut c);
    eprintln!("full after {} jobs: used_memory {full} of maxmemory {limit}", jobs.len());
    // A margin below what is used, so nothing the server frees on its own (a client's buffers)
    // lets a producer through by chance.
    let limit = full - 512 * 1024;
    assert_eq!(
        c.call(&[b"CONFIG", b"SET", b"maxmemory", limit.to_string().as_bytes()]),
        Reply::Simple("OK".into())
    );

    // Every producer is refused with the OOM error and writes nothing.
    for (verb, cmd) in producers(&q, &bus, 1) {
        let r = unchanged(&mut c, |c| call(c, &cmd));
        assert!(r.err().is_some_and(|e| e.starts_with(OOM)), "{verb} at the limit: {r:?}");
    }
    // The verbs that move and finish jobs still work.
    let got = claim(&q, &mut c, "m1", 10);
    assert_eq!(got, jobs[..10].to_vec());
    assert!(ok(q.run(&mut c, "EMQ.EXTEND", &got[0], &[b"m1", b"600000"])).int() > 0);
    let r = ok(c.call(&[
        b"EMQ.EXTENDS",
        b"1",
        q.k("active").as_bytes(),
        b"600000",
        got[0].as_bytes(),
        b"m1",
        got[1].as_bytes(),
        b"m1",
    ]));
    assert!(r.array().iter().all(|d| d.int() > 0), "{r:?}");
    assert_eq!(ok(q.run(&mut c, "EMQ.COMPLETE", &got[0], &[b"m1", b"ok", b"KEEP", b"0"])), Reply::Int(1));
    assert_eq!(ok(q.run(&mut c, "EMQ.FAIL", &got[1], &[b"m1", b"boom"])), Reply::Simple("retry".into()));
    assert_eq!(
        ok(q.run(&mut c, "EMQ.FAIL", &got[2], &[b"m1", b"boom", b"FINAL", b"KEEP", b"0"])),
        Reply::Simple("failed".into())
    );
    assert_eq!(ok(q.run(&mut c, "EMQ.REQUEUE", &got[3], &[b"m1"])), Reply::Int(1));
    assert!(ok(q.run(&mut c, "EMQ.DELAY", &got[4], &[b"m1", b"+600000"])).int() > 0);
    assert!(ok(q.run(&mut c, "EMQ.RESCHEDULE", &got[4], &[b"+500000"])).int() > 0);
    assert_eq!(ok(q.run(&mut c, "EMQ.PROMOTE", &got[4], &[])), Reply::Int(1));
    assert!(ok(q.run(&mut c, "EMQ.EXTEND", &got[5], &[b"m1", b"1"])).int() > 0);
    sleep(Duration::from_millis(20));
    let r = ok(q.run(&mut c, "EMQ.STALLED", "", &[]));
    assert_eq!(r.array()[0].strings(), [got[5].clone()], "STALLED reclaims at the limit");
    assert_eq!(ok(q.run(&mut c, "EMQ.COMPLETE", &got[6], &[b"m1", b"ok", b"KEEP", b"-1"])), Reply::Int(1));
    assert_eq!(ok(q.run(&mut c, "EMQ.REPROCESS", &got[6], &[])), Reply::Int(1));
    assert_eq!(ok(q.run(&mut c, "EMQ.CLAIM", "", &[b"PAUSE"])), Reply::Int(1));
    assert_eq!(ok(q.run(&mut c, "EMQ.CLAIM", "", &[b"RESUME"])), Reply::Int(1));
    // Upkeep too: woken by a DELAY due at once, it promotes that job and reclaims an expired
    // lease at the limit.
    assert!(ok(q.run(&mut c, "EMQ.EXTEND", &got[7], &[b"m1", b"1"])).int() > 0);
    assert!(ok(q.run(&mut c, "EMQ.DELAY", &got[8], &[b"m1", b"+1"])).int() > 0);
    wait_for(
        || {
            let snap = q.snapshot(&mut c);
            snap.state_of(&got[7]).as_deref() == Some("wait")
                && snap.state_of(&got[8]).as_deref() == Some("wait")
        },
        "upkeep promotes and reclaims at the limit",
    );
    assert!(used(&mut c) > limit, "still over the limit");
    for (verb, cmd) in producers(&q, &bus, 2) {
        let r = unchanged(&mut c, |c| call(c, &cmd));
        assert!(r.err().is_some_and(|e| e.starts_with(OOM)), "{verb} still refused: {r:?}");
    }
    assert_eq!(ok(q.run(&mut c, "EMQ.COMPLETE", &got[9], &[b"m1", b"ok", b"KEEP", b"0"])), Reply::Int(1));
    q.check_invariant(&mut c);

    // Drain everything: claim, complete with KEEP 0 (the row goes at once).
    let mut finished = 0;
    for round in 0.. {
        let tok = format!("d{round}");
        let got = claim(&q, &mut c, &tok, 1000);
        if got.is_empty() {
            break;
        }
        let cmds: Vec<Vec<Vec<u8>>> = got
            .iter()
            .map(|id| {
                q.cmd("EMQ.COMPLETE", id, keys_of("EMQ.COMPLETE"), &[tok.as_bytes(), b"ok", b"KEEP", b"0"])
            })
            .collect();
        for (id, r) in got.iter().zip(c.pipeline(&cmds)) {
            assert_eq!(r, Reply::Int(1), "COMPLETE {id} while draining");
            finished += 1;
        }
    }
    // got[0], got[2] and got[9] left earlier with KEEP 0; got[6] was completed, reprocessed,
    // and ran again.
    assert_eq!(finished + 3, jobs.len(), "every job drained");
    let snap = q.check_invariant(&mut c);
    assert!(snap.rows.is_empty(), "KEEP 0 left no row: {}", snap.rows.len());
    let after = used(&mut c);
    eprintln!("drained {} jobs: used_memory {after} of maxmemory {limit}", jobs.len());
    assert!(after < limit, "the drain freed memory: {after} of {limit}");
    // Below the limit again: every producer works.
    for (verb, cmd) in producers(&q, &bus, 3) {
        let r = call(&mut c, &cmd);
        assert!(r.err().is_none() && !r.is_nil(), "{verb} after the drain: {r:?}");
    }
    q.check_invariant(&mut c);
}
