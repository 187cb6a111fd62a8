//! No call holds the server, on a big queue: 1 000 000 jobs (pipelined ENQUEUE), then every
//! inspection and administration command at its defaults, each held to its work — a page of
//! at most its COUNT, at most 200 jobs deleted a call (and the queue's own keys once it is
//! empty) — whatever the queue's size; DRAIN and OBLITERATE loops finish the job. Each call's
//! server CPU time (`INFO cpu` around it) is printed, never asserted: a busy machine would
//! fail a timed assertion; the benchmark (`scripts/bench --only-caps`) reports the times.
// A test may panic: that is how it fails. The module's own rules are for src/.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

use std::time::Instant;

use trafikey_support::*;

const JOBS: u64 = 1_000_000;

fn cmd(q: &Q, verb: &str, roles: &[&str], args: &[&[u8]]) -> Vec<Vec<u8>> {
    q.cmd(verb, "", roles, args)
}

/// The server process's CPU time so far, µs.
fn cpu_us(c: &mut Conn) -> i64 {
    let mut secs = |f: &str| info_field(c, "cpu", f).parse::<f64>().unwrap_or(0.0);
    ((secs("used_cpu_user") + secs("used_cpu_sys")) * 1e6) as i64
}

/// Rows and keys one call may delete at most (`domain::DELETE_PER_CALL`), and the queue's own
/// keys OBLITERATE deletes once no job is left.
const DELETE_PER_CALL: i64 = 200;
const QUEUE_KEYS: i64 = 8;

/// Runs one call, keeping the most server CPU any call used (printed at the end).
fn timed(c: &mut Conn, v: &[Vec<u8>], most: &mut (String, i64)) -> Reply {
    let t0 = cpu_us(c);
    let r = c.call_v(v);
    let used = cpu_us(c) - t0;
    if used > most.1 {
        *most = (String::from_utf8_lossy(&v[0]).into_owned(), used);
    }
    r
}

fn dbsize(c: &mut Conn) -> i64 {
    c.call(&[b"DBSIZE"]).int()
}

#[test]
fn a_million_jobs_and_every_call_bounded_by_its_work() {
    let s = Server::quiet();
    let mut c = s.conn();
    let q = Q::new("big");
    let t0 = Instant::now();
    let batch: Vec<Vec<Vec<u8>>> = Vec::new();
    let mut batch = batch;
    for n in 1..=JOBS {
        let prio: &[&[u8]] = if n % 10 == 0 { &[b"PRIORITY", b"3"] } else { &[] };
        let mut args: Vec<&[u8]> =
            vec![b"n", b"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"];
        args.extend_from_slice(prio);
        batch.push(q.cmd("EMQ.ENQUEUE", &jid(n), &keys_of("EMQ.ENQUEUE"), &args));
        if batch.len() == 1000 {
            for r in c.pipeline(&batch) {
                assert_eq!(r, Reply::Int(1));
            }
            batch.clear();
        }
    }
    eprintln!("{JOBS} jobs enqueued in {:?}", t0.elapsed());
    for n in 1..=1000 {
        q.run(&mut c, "EMQ.SCHEDULE", &id_of("JOB", JOBS + n), &[b"+100000000", b"n", b"d"]);
    }
    for _ in 0..20 {
        // 50 a call: what one CLAIM hands out at most.
        q.run(&mut c, "EMQ.CLAIM", "", &[b"w", b"600000", b"COUNT", b"1000"]);
    }
    let mut over = (String::new(), 0i64);

    // Inspection, deep into each set.
    let sets = ["wait", "prio", "active", "delayed", "completed", "failed", "meta"];
    assert_eq!(timed(&mut c, &cmd(&q, "TRA.COUNTS", &sets, &[]), &mut over).array()[1], Reply::Int(899_000));
    for set in ["wait", "prio", "active", "delayed"] {
        for from in [b"0".as_slice(), b"500000", b"899000"] {
            let r =
                timed(&mut c, &cmd(&q, "TRA.JOBS", &[set], &[b"FROM", from, b"COUNT", b"1000"]), &mut over);
            assert!(r.err().is_none(), "{r:?}");
            assert!(r.array().len() <= 2000, "a page of at most COUNT jobs (id and score each)");
        }
        assert!(timed(&mut c, &cmd(&q, "TRA.JOBS", &[set], &[b"REV", b"COUNT", b"1000"]), &mut over)
            .err()
            .is_none());
    }
    assert!(c.call(&[b"TRA.JOB", b"1", q.job(&jid(500_000)).as_bytes()]).err().is_none());
    c.call(&[b"TRA.QUEUES"]);
    // Administration: DRAIN until 0, then OBLITERATE until 0.
    let t0 = Instant::now();
    let mut drained = 0;
    let mut calls = 0;
    loop {
        let n = c.call_v(&cmd(&q, "TRA.DRAIN", &["wait", "prio", "delayed", "events"], &[b"DELAYED"])).int();
        assert!(n <= DELETE_PER_CALL, "DRAIN deleted {n} jobs in one call");
        calls += 1;
        if n == 0 {
            break;
        }
        drained += n;
    }
    eprintln!("drained {drained} jobs in {calls} calls, {:?}", t0.elapsed());
    assert_eq!(drained, 1_000_000, "every waiting and delayed job");
    let t0 = Instant::now();
    let all = ["wait", "prio", "active", "delayed", "completed", "failed", "meta", "events"];
    let mut calls = 0;
    loop {
        let before = dbsize(&mut c);
        let left = timed(&mut c, &cmd(&q, "TRA.OBLITERATE", &all, &[b"FORCE"]), &mut over).int();
        let gone = before - dbsize(&mut c);
        assert!(gone <= DELETE_PER_CALL + QUEUE_KEYS, "OBLITERATE deleted {gone} keys in one call");
        if left == 0 {
            break;
        }
        calls += 1;
        assert!(calls < 100, "it ends");
    }
    eprintln!("obliterated in {} calls, {:?}", calls + 1, t0.elapsed());
    assert_eq!(c.call(&[b"DBSIZE"]), Reply::Int(1), "only the fence key is left");
    eprintln!("the most server CPU one measured call used: {} µs ({})", over.1, over.0);
}
