//! A server at its memory limit (`maxmemory`, `maxmemory-policy noeviction`): filled with
//! ENQUEUE until it answers its OOM error, the producers (ENQUEUE, SCHEDULE, APPEND, PUBLISH,
//! FAILURES: `deny-oom`) are refused with that error and write nothing (`DEBUG DIGEST`
//! unchanged), while the verbs that move and finish jobs (CLAIM, EXTEND, EXTENDS, COMPLETE,
//! FAIL, REQUEUE, DELAY, STALLED, and PROMOTE, RESCHEDULE, REPROCESS) still work, and so does
//! upkeep: the queue drains (COMPLETE … KEEP 0 frees each job), and once enough is freed the
//! producers work again.
//!
//! And the module's own memory: what it keeps is the server's (counted in `used_memory`), and
//! nothing is left behind by a call (the caller's user handle) or by upkeep's look at a
//! database (its scan cursor).
// A test may panic: that is how it fails. The module's own rules are for src/.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

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
        ("EMQ.ENQUEUE", q.cmd("EMQ.ENQUEUE", &job, &keys_of("EMQ.ENQUEUE"), &[b"job", b"{}"])),
        (
            "EMQ.SCHEDULE",
            q.cmd("EMQ.SCHEDULE", &sched, &keys_of("EMQ.SCHEDULE"), &[b"+60000", b"job", b"{}"]),
        ),
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
            .map(|id| q.cmd("EMQ.ENQUEUE", id, &keys_of("EMQ.ENQUEUE"), &[b"job", &data, b"ATTEMPTS", b"2"]))
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
        let r = unchanged(&mut c, |c| c.call_v(&cmd));
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
    // Upkeep, which knows the shortened lease, would reclaim it first: off for STALLED's turn.
    assert_eq!(c.call(&[b"CONFIG", b"SET", b"trafikey.upkeep", b"no"]), Reply::Simple("OK".into()));
    assert!(ok(q.run(&mut c, "EMQ.EXTEND", &got[5], &[b"m1", b"1"])).int() > 0);
    sleep(Duration::from_millis(20));
    let r = ok(q.run(&mut c, "EMQ.STALLED", "", &[]));
    assert_eq!(c.call(&[b"CONFIG", b"SET", b"trafikey.upkeep", b"yes"]), Reply::Simple("OK".into()));
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
        let r = unchanged(&mut c, |c| c.call_v(&cmd));
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
                q.cmd("EMQ.COMPLETE", id, &keys_of("EMQ.COMPLETE"), &[tok.as_bytes(), b"ok", b"KEEP", b"0"])
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
        let r = c.call_v(&cmd);
        assert!(r.err().is_none() && !r.is_nil(), "{verb} after the drain: {r:?}");
    }
    q.check_invariant(&mut c);
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
    let claim = q.cmd("EMQ.CLAIM", "", &keys_of("EMQ.CLAIM"), &[b"w", b"1000"]);
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
            .map(|q| q.cmd("EMQ.ENQUEUE", &jid(1), &keys_of("EMQ.ENQUEUE"), &[b"job", b"{}"]))
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
