//! `EMQ.CLAIM … BLOCK ms` against a real server: a worker that waits inside the server for
//! work, woken by every kind of readiness, served in the order it began to wait, never handed
//! a job another waiter got, and never blocking inside MULTI or a script.
// A test may panic: that is how it fails. The module's own rules are for src/.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

use std::collections::HashSet;
use std::thread::sleep;
use std::time::{Duration, Instant};

use trafikey_support::*;

/// Sends `EMQ.CLAIM … token lease [COUNT n] BLOCK ms` without reading the reply.
fn send_claim(c: &mut Conn, q: &Q, token: &str, extra: &[&[u8]]) {
    let mut args: Vec<&[u8]> = vec![token.as_bytes(), b"30000"];
    args.extend_from_slice(extra);
    let v = q.cmd("EMQ.CLAIM", "", &keys_of("EMQ.CLAIM"), &args);
    let refs: Vec<&[u8]> = v.iter().map(Vec::as_slice).collect();
    c.send(&refs).expect("send");
}

fn read(c: &mut Conn) -> Reply {
    c.read().expect("a reply")
}

/// The ids of a CLAIM reply.
fn ids(r: &Reply) -> Vec<String> {
    r.array().iter().map(|j| j.array()[0].str()).collect()
}

/// Waits until the server counts `n` clients blocked.
fn blocked(c: &mut Conn, n: usize) {
    wait_for(
        || info_field(c, "clients", "blocked_clients") == n.to_string(),
        &format!("{n} blocked clients"),
    );
}

fn claim_now(c: &mut Conn, q: &Q, token: &str) -> Reply {
    q.run(c, "EMQ.CLAIM", "", &[token.as_bytes(), b"30000"])
}

#[test]
fn a_waiting_worker_gets_the_job_an_enqueue_makes_ready() {
    let s = Server::installed();
    let (mut admin, mut w) = (s.conn(), s.conn());
    let q = Q::new("wake");
    // Ready at the call: no wait at all, as without BLOCK.
    q.enqueue(&mut admin, &jid(1), &[]);
    send_claim(&mut w, &q, "w", &[b"BLOCK", b"5000"]);
    assert_eq!(ids(&read(&mut w)), [jid(1)]);
    // Nothing ready: the call waits, and the next ENQUEUE hands it over.
    send_claim(&mut w, &q, "w", &[b"BLOCK", b"5000"]);
    blocked(&mut admin, 1);
    let t0 = Instant::now();
    q.enqueue(&mut admin, &jid(2), &[]);
    let r = read(&mut w);
    assert!(t0.elapsed() < Duration::from_secs(2));
    assert_eq!(r.array()[0].array()[0].str(), jid(2));
    assert_eq!(r.array()[0].array()[3], Reply::Int(1), "attempt 1: the reply of a plain CLAIM");
    let snap = q.check_invariant(&mut admin);
    assert_eq!(snap.state_of(&jid(2)).as_deref(), Some("active"));
    assert_eq!(snap.field(&jid(2), "tk").as_deref(), Some("w"));
    // Priority jobs wake it too.
    send_claim(&mut w, &q, "w", &[b"BLOCK", b"0"]);
    blocked(&mut admin, 1);
    q.enqueue(&mut admin, &jid(3), &[b"PRIORITY", b"5"]);
    assert_eq!(ids(&read(&mut w)), [jid(3)]);
    assert_eq!(info_field(&mut admin, "trafikey", "trafikey_woken"), "2");
}

#[test]
fn a_wait_times_out_with_the_empty_array_and_writes_nothing() {
    let s = Server::installed();
    let (mut admin, mut w) = (s.conn(), s.conn());
    let q = Q::new("idle");
    let before = digest(&mut admin);
    let t0 = Instant::now();
    send_claim(&mut w, &q, "w", &[b"BLOCK", b"150"]);
    assert_eq!(read(&mut w), Reply::Array(vec![]));
    let took = t0.elapsed();
    assert!(took >= Duration::from_millis(140) && took < Duration::from_secs(3), "{took:?}");
    assert_eq!(digest(&mut admin), before, "a wait writes nothing");
    assert_eq!(info_field(&mut admin, "trafikey", "trafikey_timeouts"), "1");
}

#[test]
fn bad_block_values_are_refused_and_write_nothing() {
    let s = Server::installed();
    let mut c = s.conn();
    let q = Q::new("bad");
    q.enqueue(&mut c, &jid(1), &[]);
    for (bad, class) in [
        (&[&b"BLOCK"[..], b"x"][..], "EMQSHAPE"),
        (&[b"BLOCK"], "EMQSHAPE"),
        (&[b"BLOCK", b"1", b"BLOCK", b"2"], "EMQSHAPE"),
        (&[b"BLOCK", b"1.5"], "EMQSHAPE"),
        (&[b"BLOCK", b"-1"], "EMQARG"),
        (&[b"BLOCK", b"2147483649"], "EMQARG"),
    ] {
        let mut args: Vec<&[u8]> = vec![b"w", b"1000"];
        args.extend_from_slice(bad);
        let e = unchanged(&mut c, |c| q.run(c, "EMQ.CLAIM", "", &args));
        assert!(e.error().starts_with(class), "{bad:?}: {e:?}");
    }
    // The limits themselves are accepted (the job is ready, so neither waits).
    assert_eq!(ids(&q.run(&mut c, "EMQ.CLAIM", "", &[b"w", b"1000", b"block", b"2147483648"])), [jid(1)]);
}

#[test]
fn every_verb_that_makes_a_job_ready_wakes_a_waiter() {
    let s = Server::installed();
    let (mut admin, mut w) = (s.conn(), s.conn());
    let q = Q::new("kinds");
    let wake = |admin: &mut Conn, w: &mut Conn, what: &str, id: &str, act: &dyn Fn(&mut Conn)| {
        send_claim(w, &q, "w2", &[b"BLOCK", b"5000"]);
        blocked(admin, 1);
        act(admin);
        let r = read(w);
        assert_eq!(ids(&r), [id.to_string()], "{what} wakes the waiter");
        // Hand it back to the admin for the next step.
        assert_eq!(q.run(admin, "EMQ.REQUEUE", id, &[b"w2"]), Reply::Int(1), "{what}");
        assert_eq!(ids(&claim_now(admin, &q, "a")), [id.to_string()], "{what}");
    };
    let a = jid(1);
    q.enqueue(&mut admin, &a, &[b"ATTEMPTS", b"5"]);
    assert_eq!(ids(&claim_now(&mut admin, &q, "a")), std::slice::from_ref(&a));
    wake(&mut admin, &mut w, "REQUEUE", &a, &|c| {
        assert_eq!(q.run(c, "EMQ.REQUEUE", &a, &[b"a"]), Reply::Int(1))
    });
    wake(&mut admin, &mut w, "FAIL's retry", &a, &|c| {
        assert_eq!(q.run(c, "EMQ.FAIL", &a, &[b"a", b"boom"]).str(), "retry")
    });
    wake(&mut admin, &mut w, "STALLED's requeue", &a, &|c| {
        // Upkeep, which knows the shortened lease, would reclaim it first: off for this step.
        c.call(&[b"CONFIG", b"SET", b"trafikey.upkeep", b"no"]);
        q.run(c, "EMQ.EXTEND", &a, &[b"a", b"1"]);
        sleep(Duration::from_millis(20));
        let r = q.run(c, "EMQ.STALLED", "", &[b"MAXSTALLS", b"5"]);
        c.call(&[b"CONFIG", b"SET", b"trafikey.upkeep", b"yes"]);
        assert_eq!(r.array()[0].strings(), std::slice::from_ref(&a));
    });
    wake(&mut admin, &mut w, "PROMOTE", &a, &|c| {
        assert!(q.run(c, "EMQ.DELAY", &a, &[b"a", b"+100000"]).int() > 0);
        assert_eq!(q.run(c, "EMQ.PROMOTE", &a, &[]), Reply::Int(1));
    });
    wake(&mut admin, &mut w, "REPROCESS", &a, &|c| {
        assert_eq!(q.run(c, "EMQ.COMPLETE", &a, &[b"a", b"ok"]), Reply::Int(1));
        assert_eq!(q.run(c, "EMQ.REPROCESS", &a, &[]), Reply::Int(1));
    });
    // A paused queue: the waiter waits for RESUME, even with a job ready.
    assert_eq!(q.run(&mut admin, "EMQ.COMPLETE", &a, &[b"a", b"ok", b"KEEP", b"0"]), Reply::Int(1));
    assert_eq!(q.run(&mut admin, "EMQ.CLAIM", "", &[b"PAUSE"]), Reply::Int(1));
    q.enqueue(&mut admin, &jid(2), &[]);
    send_claim(&mut w, &q, "w2", &[b"BLOCK", b"5000"]);
    blocked(&mut admin, 1);
    sleep(Duration::from_millis(50));
    assert_eq!(info_field(&mut admin, "clients", "blocked_clients"), "1", "paused: still waiting");
    assert_eq!(q.run(&mut admin, "EMQ.CLAIM", "", &[b"RESUME"]), Reply::Int(1));
    assert_eq!(ids(&read(&mut w)), [jid(2)], "RESUME wakes it");
    q.check_invariant(&mut admin);
}

#[test]
fn several_jobs_arriving_at_once_fill_a_waiters_count() {
    let s = Server::installed();
    let (mut admin, mut w) = (s.conn(), s.conn());
    let q = Q::new("many");
    send_claim(&mut w, &q, "w", &[b"COUNT", b"10", b"BLOCK", b"5000"]);
    blocked(&mut admin, 1);
    // One transaction makes three jobs ready: the waiter runs once, after it.
    admin.call(&[b"MULTI"]);
    for n in 1..=3 {
        let v = q.cmd("EMQ.ENQUEUE", &jid(n), &keys_of("EMQ.ENQUEUE"), &[b"n", b"d"]);
        let refs: Vec<&[u8]> = v.iter().map(Vec::as_slice).collect();
        admin.call(&refs);
    }
    assert_eq!(admin.call(&[b"EXEC"]).array().len(), 3);
    assert_eq!(ids(&read(&mut w)), [jid(1), jid(2), jid(3)]);
}

#[test]
fn waiters_are_served_in_the_order_they_began_to_wait() {
    let s = Server::installed();
    let mut admin = s.conn();
    let q = Q::new("fifo");
    let mut ws: Vec<Conn> = (0..4).map(|_| s.conn()).collect();
    for (i, w) in ws.iter_mut().enumerate() {
        send_claim(w, &q, &format!("w{i}"), &[b"BLOCK", b"5000"]);
        blocked(&mut admin, i + 1);
    }
    for n in 1..=4 {
        q.enqueue(&mut admin, &jid(n), &[]);
    }
    for (i, w) in ws.iter_mut().enumerate() {
        assert_eq!(ids(&read(w)), [jid(i as u64 + 1)], "waiter {i} gets the {i}th job");
    }
}

#[test]
fn many_waiters_and_many_jobs_hand_out_each_job_once() {
    let s = Server::installed();
    let q = Q::new("crowd");
    const WORKERS: usize = 12;
    const JOBS: u64 = 600;
    let port = s.port;
    let handles: Vec<_> = (0..WORKERS)
        .map(|i| {
            let q = Q::new("crowd");
            std::thread::spawn(move || {
                let mut c = Conn::connect(port).expect("connect");
                let mut got = Vec::new();
                loop {
                    send_claim(&mut c, &q, &format!("w{i}"), &[b"COUNT", b"3", b"BLOCK", b"400"]);
                    let r = c.read().expect("reply");
                    if r.array().is_empty() {
                        return got;
                    }
                    for id in ids(&r) {
                        let v = q.cmd(
                            "EMQ.COMPLETE",
                            &id,
                            &keys_of("EMQ.COMPLETE"),
                            &[format!("w{i}").as_bytes(), b"ok"],
                        );
                        let refs: Vec<&[u8]> = v.iter().map(Vec::as_slice).collect();
                        assert_eq!(c.call(&refs), Reply::Int(1), "{id} completes once by its holder");
                        got.push(id);
                    }
                }
            })
        })
        .collect();
    let mut admin = s.conn();
    blocked(&mut admin, WORKERS);
    for n in 1..=JOBS {
        q.enqueue(&mut admin, &jid(n), &[]);
        if n % 50 == 0 {
            sleep(Duration::from_millis(5));
        }
    }
    let mut all = Vec::new();
    for h in handles {
        all.extend(h.join().expect("a worker"));
    }
    let distinct: HashSet<&String> = all.iter().collect();
    assert_eq!(all.len() as u64, JOBS, "every job handed out");
    assert_eq!(distinct.len() as u64, JOBS, "none twice");
    let snap = q.check_invariant(&mut admin);
    assert!((1..=JOBS).all(|n| snap.state_of(&jid(n)).as_deref() == Some("completed")));
}

#[test]
fn multi_and_scripts_never_block() {
    let s = Server::installed();
    let mut c = s.conn();
    let q = Q::new("tx");
    let v = q.cmd("EMQ.CLAIM", "", &keys_of("EMQ.CLAIM"), &[b"w", b"1000", b"BLOCK", b"0"]);
    let refs: Vec<&[u8]> = v.iter().map(Vec::as_slice).collect();
    c.call(&[b"MULTI"]);
    assert_eq!(c.call(&refs), Reply::Simple("QUEUED".into()));
    assert_eq!(c.call(&[b"EXEC"]), Reply::Array(vec![Reply::Array(vec![])]), "answers at once, empty");
    let mut script: Vec<&[u8]> = vec![b"EVAL", b"return redis.call(unpack(ARGV))", b"0"];
    script.extend_from_slice(&refs);
    assert_eq!(c.call(&script), Reply::Array(vec![]));
    assert_eq!(info_field(&mut c, "clients", "blocked_clients"), "0");
    // And inside MULTI a ready job is claimed as without BLOCK.
    q.enqueue(&mut c, &jid(1), &[]);
    c.call(&[b"MULTI"]);
    c.call(&refs);
    let r = c.call(&[b"EXEC"]);
    assert_eq!(ids(&r.array()[0]), [jid(1)]);
}

#[test]
fn client_unblock_ends_a_wait_either_way_and_a_closed_waiter_loses_nothing() {
    let s = Server::installed();
    let (mut admin, mut w) = (s.conn(), s.conn());
    let q = Q::new("unblock");
    let id = w.call(&[b"CLIENT", b"ID"]).int().to_string();
    send_claim(&mut w, &q, "w", &[b"BLOCK", b"0"]);
    blocked(&mut admin, 1);
    assert_eq!(admin.call(&[b"CLIENT", b"UNBLOCK", id.as_bytes(), b"TIMEOUT"]), Reply::Int(1));
    assert_eq!(read(&mut w), Reply::Array(vec![]), "TIMEOUT: the empty array");
    send_claim(&mut w, &q, "w", &[b"BLOCK", b"0"]);
    blocked(&mut admin, 1);
    assert_eq!(admin.call(&[b"CLIENT", b"UNBLOCK", id.as_bytes(), b"ERROR"]), Reply::Int(1));
    let e = read(&mut w);
    assert!(e.error().starts_with("UNBLOCKED"), "{e:?}");
    // A waiter that goes away: the job it would have got stays ready for the next claimer.
    send_claim(&mut w, &q, "w", &[b"BLOCK", b"0"]);
    blocked(&mut admin, 1);
    drop(w);
    blocked(&mut admin, 0);
    q.enqueue(&mut admin, &jid(1), &[]);
    assert_eq!(ids(&claim_now(&mut admin, &q, "next")), [jid(1)]);
    q.check_invariant(&mut admin);
}

#[test]
fn a_waiter_whose_queue_is_deleted_or_replaced() {
    let s = Server::installed();
    let (mut admin, mut w) = (s.conn(), s.conn());
    let q = Q::new("gone");
    // Deleted: an empty queue is still a queue: the waiter goes on waiting, and gets the next job.
    q.enqueue(&mut admin, &jid(1), &[]);
    assert_eq!(ids(&claim_now(&mut admin, &q, "a")), [jid(1)]);
    q.enqueue(&mut admin, &jid(2), &[]);
    assert_eq!(ids(&claim_now(&mut admin, &q, "a")), [jid(2)]);
    send_claim(&mut w, &q, "w", &[b"BLOCK", b"5000"]);
    blocked(&mut admin, 1);
    admin.call(&[b"DEL", q.k("wait").as_bytes(), q.k("prio").as_bytes(), q.k("meta").as_bytes()]);
    sleep(Duration::from_millis(50));
    assert_eq!(info_field(&mut admin, "clients", "blocked_clients"), "1", "still waiting");
    q.enqueue(&mut admin, &jid(3), &[]);
    assert_eq!(ids(&read(&mut w)), [jid(3)]);
    // Replaced by a value of another type: the queue can no longer be fed (every verb that
    // would make a job ready answers WRONGTYPE), so the waiter waits on; once the key is
    // repaired the next job reaches it. A waiter with a timeout ends it with the empty array,
    // and its next CLAIM answers WRONGTYPE.
    send_claim(&mut w, &q, "w", &[b"BLOCK", b"0"]);
    blocked(&mut admin, 1);
    admin.call(&[b"SET", q.k("wait").as_bytes(), b"not a list"]);
    let e = q.enqueue(&mut admin, &jid(4), &[b"PRIORITY", b"2"]);
    assert!(e.error().starts_with("WRONGTYPE"), "{e:?}");
    assert_eq!(info_field(&mut admin, "clients", "blocked_clients"), "1");
    admin.call(&[b"DEL", q.k("wait").as_bytes()]);
    q.enqueue(&mut admin, &jid(4), &[b"PRIORITY", b"2"]);
    assert_eq!(ids(&read(&mut w)), [jid(4)]);
    send_claim(&mut w, &q, "w", &[b"BLOCK", b"100"]);
    blocked(&mut admin, 1);
    admin.call(&[b"SET", q.k("wait").as_bytes(), b"not a list"]);
    assert_eq!(read(&mut w), Reply::Array(vec![]));
    assert!(claim_now(&mut w, &q, "w").error().starts_with("WRONGTYPE"));
}

#[test]
fn the_claim_a_waiter_gets_replicates_as_a_plain_claim() {
    let primary = Server::installed();
    let replica = Server::start(Opts::default());
    let mut r = replica.follow(&primary);
    let (mut admin, mut w) = (primary.conn(), primary.conn());
    let q = Q::new("repl");
    send_claim(&mut w, &q, "w", &[b"COUNT", b"2", b"BLOCK", b"5000"]);
    blocked(&mut admin, 1);
    q.enqueue(&mut admin, &jid(1), &[b"PRIORITY", b"3"]);
    assert_eq!(ids(&read(&mut w)), [jid(1)]);
    admin.call(&[b"WAIT", b"1", b"2000"]);
    wait_for(|| digest(&mut admin) == digest(&mut r), "replica digest equals the primary's");
    let snap = q.check_invariant(&mut r);
    assert_eq!(snap.state_of(&jid(1)).as_deref(), Some("active"));
}

#[test]
fn waiters_get_unblocked_when_the_node_becomes_a_replica() {
    let other = Server::installed();
    let s = Server::installed();
    let (mut admin, mut w) = (s.conn(), s.conn());
    let q = Q::new("demote");
    send_claim(&mut w, &q, "w", &[b"BLOCK", b"0"]);
    blocked(&mut admin, 1);
    admin.call(&[b"REPLICAOF", b"127.0.0.1", other.port.to_string().as_bytes()]);
    let e = read(&mut w);
    assert!(e.error().starts_with("UNBLOCKED"), "{e:?}");
    admin.call(&[b"REPLICAOF", b"NO", b"ONE"]);
}

#[test]
fn the_module_is_not_unloaded_under_its_waiters() {
    let s = Server::installed();
    let (mut admin, mut w) = (s.conn(), s.conn());
    let q = Q::new("unload");
    send_claim(&mut w, &q, "w", &[b"BLOCK", b"0"]);
    blocked(&mut admin, 1);
    let e = admin.call(&[b"MODULE", b"UNLOAD", b"trafikey"]);
    assert!(e.err().is_some(), "refused while a client waits: {e:?}");
    q.enqueue(&mut admin, &jid(1), &[]);
    assert_eq!(ids(&read(&mut w)), [jid(1)], "the waiter is still served");
}
