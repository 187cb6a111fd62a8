//! Administration against a real server: TRA.REMOVE deletes one job from whatever state it is
//! in, refuses a held job without FORCE, writes nothing when it refuses, and replicates.
//! DRAIN, CLEAN and OBLITERATE spend their COUNT exactly (OBLITERATE answers what is left),
//! and CLEAN's GRACE is strict.
// A test may panic: that is how it fails. The module's own rules are for src/.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

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
        assert_eq!(q.last_event(&mut c), ["event", "removed", "id", &id, "prev", prev]);
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

/// A waiting job taken out of a `wait` that holds only it leaves no `wait`: TRA.REMOVE and
/// TRA.PRIORITY empty the list through the module's own handle on it (the server's LREM there
/// would delete the key from under that handle), here and on the replica. Out of a longer
/// `wait`, the others stay in their order. (`scripts/memcheck admin` watches the server for
/// a read of freed memory on these paths.)
#[test]
fn the_only_waiting_job_taken_out_leaves_no_wait_here_or_on_the_replica() {
    let primary = Server::quiet();
    let replica = Server::start(Opts::default());
    let mut r = replica.follow(&primary);
    let mut c = primary.conn();
    let q = Q::new("one");
    let wait = q.k("wait");
    let listed = |c: &mut Conn| c.call(&[b"LRANGE", wait.as_bytes(), b"0", b"-1"]).strings();
    q.enqueue(&mut c, &jid(1), &[]);
    let v = q.cmd("TRA.PRIORITY", &jid(1), &["job", "wait", "prio", "events"], &[b"5"]);
    let refs: Vec<&[u8]> = v.iter().map(Vec::as_slice).collect();
    assert_eq!(c.call(&refs).err(), None);
    assert_eq!(c.call(&[b"EXISTS", wait.as_bytes()]), Reply::Int(0), "moved to prio");
    q.enqueue(&mut c, &jid(2), &[]);
    assert_eq!(remove(&mut c, &q, &jid(2), false), Reply::Int(1));
    assert_eq!(c.call(&[b"EXISTS", wait.as_bytes()]), Reply::Int(0), "removed");
    for n in 3..=5 {
        q.enqueue(&mut c, &jid(n), &[]);
    }
    assert_eq!(remove(&mut c, &q, &jid(4), false), Reply::Int(1));
    assert_eq!(listed(&mut c), [jid(5), jid(3)]);
    q.check_invariant(&mut c);
    assert_eq!(c.call(&[b"WAIT", b"1", b"2000"]), Reply::Int(1));
    assert_eq!(digest(&mut c), digest(&mut r), "the replica holds what the primary holds");
}

/// A job whose id `wait` holds twice (no verb does that; a client can) is deleted once by
/// DRAIN, which counts it once, and by OBLITERATE (`scripts/memcheck admin` watches the server
/// for a second handle left on the deleted row).
#[test]
fn drain_and_obliterate_delete_a_job_met_twice_once() {
    let s = Server::quiet();
    let mut c = s.conn();
    let q = Q::new("dup");
    let wait = q.k("wait");
    for n in 1..=2 {
        q.enqueue(&mut c, &jid(n), &[]);
    }
    c.call(&[b"LPUSH", wait.as_bytes(), jid(1).as_bytes()]);
    assert_eq!(drain(&mut c, &q, &[]), Reply::Int(2), "two jobs");
    for key in [wait.clone(), q.job(&jid(1)), q.job(&jid(2))] {
        assert_eq!(c.call(&[b"EXISTS", key.as_bytes()]), Reply::Int(0), "{key}");
    }
    assert_eq!(q.last_event(&mut c), ["event", "cleaned", "count", "2"]);
    q.enqueue(&mut c, &jid(3), &[]);
    c.call(&[b"LPUSH", wait.as_bytes(), jid(3).as_bytes()]);
    assert_eq!(obliterate(&mut c, &q, &[]), Reply::Int(0), "nothing left");
    assert_eq!(c.call(&[b"EXISTS", q.job(&jid(3)).as_bytes(), wait.as_bytes()]), Reply::Int(0));
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
    assert_eq!(q.last_event(&mut c), ["event", "cleaned", "count", "5"]);
    // CLEAN: finished jobs older than the grace, oldest first.
    let held: Vec<String> = snap.sets["active"].clone();
    for id in &held {
        q.run(&mut c, "EMQ.COMPLETE", id, &[b"w", b"ok", b"KEEP", b"-1"]);
    }
    assert_eq!(clean(&mut c, &q, "completed", &[b"GRACE", b"100000"]), Reply::Array(vec![]), "too young");
    std::thread::sleep(std::time::Duration::from_millis(20));
    let r = clean(&mut c, &q, "completed", &[b"GRACE", b"5", b"COUNT", b"3"]);
    assert_eq!(r.strings().len(), 3);
    assert_eq!(q.last_event(&mut c), ["event", "cleaned", "count", "3"]);
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

fn log(c: &mut Conn, q: &Q, id: &str, token: &str, line: &str, extra: &[&[u8]]) -> Reply {
    let mut args: Vec<&[u8]> = vec![token.as_bytes(), line.as_bytes()];
    args.extend_from_slice(extra);
    let mut v = vec![
        b"TRA.LOG".to_vec(),
        b"2".to_vec(),
        q.job(id).into_bytes(),
        format!("emq:{{{}}}:log:{id}", q.0).into_bytes(),
    ];
    v.extend(args.iter().map(|a| a.to_vec()));
    let refs: Vec<&[u8]> = v.iter().map(Vec::as_slice).collect();
    c.call(&refs)
}

fn log_len(c: &mut Conn, q: &Q, id: &str) -> i64 {
    c.call(&[b"LLEN", format!("emq:{{{}}}:log:{id}", q.0).as_bytes()]).int()
}

/// Every `emq:{Q}:log:<ID>` has its row.
fn no_log_without_its_row(c: &mut Conn, q: &Q) {
    let logs = c.call(&[b"KEYS", format!("emq:{{{}}}:log:*", q.0).as_bytes()]).strings();
    for l in logs {
        let id = l.rsplit_once(":log:").map(|(_, i)| i.to_string()).unwrap_or_default();
        assert_eq!(c.call(&[b"EXISTS", q.job(&id).as_bytes()]), Reply::Int(1), "{l} has no row");
    }
}

#[test]
fn a_log_is_the_holders_and_goes_with_its_job() {
    let s = Server::quiet();
    let mut c = s.conn();
    let q = Q::new("logs");
    let claim = |c: &mut Conn, n: u64| {
        q.enqueue(c, &jid(n), &[]);
        let r = q.run(c, "EMQ.CLAIM", "", &[b"w", b"60000"]);
        assert_eq!(r.array()[0].array()[0].str(), jid(n));
    };
    claim(&mut c, 1);
    for n in 1..=5 {
        assert_eq!(
            log(&mut c, &q, &jid(1), "w", &format!("line {n}"), &[b"KEEP", b"3"]),
            Reply::Int(n.min(3))
        );
    }
    let lines =
        c.call(&[b"LRANGE", format!("emq:{{{}}}:log:{}", q.0, jid(1)).as_bytes(), b"0", b"-1"]).strings();
    assert_eq!(lines, ["line 3", "line 4", "line 5"], "the newest three, oldest first");
    assert!(unchanged(&mut c, |c| log(c, &q, &jid(1), "other", "x", &[])).error().starts_with("EMQLEASE"));
    let mut v = vec![
        b"TRA.LOG".to_vec(),
        b"2".to_vec(),
        q.job(&jid(1)).into_bytes(),
        format!("emq:{{{}}}:log:{}", q.0, jid(2)).into_bytes(),
    ];
    v.extend([b"w".to_vec(), b"x".to_vec()]);
    let refs: Vec<&[u8]> = v.iter().map(Vec::as_slice).collect();
    assert!(c.call(&refs).error().starts_with("EMQLAYOUT"), "both keys name one job");
    // KEEP 0: the job and its log go at once.
    assert_eq!(q.run(&mut c, "EMQ.COMPLETE", &jid(1), &[b"w", b"ok", b"KEEP", b"0"]), Reply::Int(1));
    assert_eq!(log_len(&mut c, &q, &jid(1)), 0);
    // Retention by count: the retired job's log goes with it.
    for n in 2..=4 {
        claim(&mut c, n);
        log(&mut c, &q, &jid(n), "w", "hello", &[]);
        q.run(&mut c, "EMQ.COMPLETE", &jid(n), &[b"w", b"ok", b"KEEP", b"1"]);
    }
    assert_eq!(
        (log_len(&mut c, &q, &jid(2)), log_len(&mut c, &q, &jid(3)), log_len(&mut c, &q, &jid(4))),
        (0, 0, 1)
    );
    // REMOVE, CLEAN, DRAIN and OBLITERATE.
    claim(&mut c, 5);
    log(&mut c, &q, &jid(5), "w", "x", &[]);
    let v = q.cmd(
        "TRA.REMOVE",
        &jid(5),
        &["job", "wait", "prio", "active", "delayed", "completed", "failed", "events"],
        &[b"FORCE"],
    );
    let refs: Vec<&[u8]> = v.iter().map(Vec::as_slice).collect();
    assert_eq!(c.call(&refs), Reply::Int(1));
    assert_eq!(log_len(&mut c, &q, &jid(5)), 0, "REMOVE");
    std::thread::sleep(std::time::Duration::from_millis(5));
    let v = q.cmd("TRA.CLEAN", "", &["completed", "events"], &[b"GRACE", b"0"]);
    let refs: Vec<&[u8]> = v.iter().map(Vec::as_slice).collect();
    assert_eq!(c.call(&refs).strings(), [jid(4)]);
    assert_eq!(log_len(&mut c, &q, &jid(4)), 0, "CLEAN");
    // A log of a job that waits (written while it was held, then requeued) goes with DRAIN.
    claim(&mut c, 6);
    log(&mut c, &q, &jid(6), "w", "x", &[]);
    q.run(&mut c, "EMQ.REQUEUE", &jid(6), &[b"w"]);
    let v = q.cmd("TRA.DRAIN", "", &["wait", "prio", "delayed", "events"], &[]);
    let refs: Vec<&[u8]> = v.iter().map(Vec::as_slice).collect();
    assert_eq!(c.call(&refs), Reply::Int(1));
    assert_eq!(log_len(&mut c, &q, &jid(6)), 0, "DRAIN");
    claim(&mut c, 7);
    log(&mut c, &q, &jid(7), "w", "x", &[]);
    let all = ["wait", "prio", "active", "delayed", "completed", "failed", "meta", "events"];
    let v = q.cmd("TRA.OBLITERATE", "", &all, &[b"FORCE"]);
    let refs: Vec<&[u8]> = v.iter().map(Vec::as_slice).collect();
    assert_eq!(c.call(&refs), Reply::Int(0));
    assert_eq!(log_len(&mut c, &q, &jid(7)), 0, "OBLITERATE");
    no_log_without_its_row(&mut c, &q);
    assert_eq!(c.call(&[b"KEYS", format!("emq:{{{}}}:*", q.0).as_bytes()]), Reply::Array(vec![]));
}

#[test]
fn stalled_failures_under_keep_zero_take_their_logs() {
    let s = Server::start(Opts {
        module_args: vec!["upkeep".into(), "no".into(), "keep-failed".into(), "0".into()],
        ..Opts::default()
    });
    let mut c = s.conn();
    c.call(&[b"EMQ.INSTALL", b"1", b"{emq}:version"]);
    let q = Q::new("stall");
    q.enqueue(&mut c, &jid(1), &[]);
    // A lease long enough that the LOG lands inside it on a loaded machine.
    q.run(&mut c, "EMQ.CLAIM", "", &[b"w", b"400"]);
    log(&mut c, &q, &jid(1), "w", "working", &[]);
    std::thread::sleep(std::time::Duration::from_millis(600));
    let r = q.run(&mut c, "EMQ.STALLED", "", &[b"MAXSTALLS", b"0"]);
    assert_eq!(r.array()[1].strings(), [jid(1)], "failed for good");
    assert_eq!(log_len(&mut c, &q, &jid(1)), 0);
    no_log_without_its_row(&mut c, &q);
}

/// clean.rs `score < cutoff` → `<=` (a job finished exactly GRACE ms ago deleted): CLEAN
/// deletes what finished *more than* GRACE ms ago. A MULTI is one instant, so a job completed
/// in it finished 0 ms before a `CLEAN … GRACE 0` queued behind it.
#[test]
fn clean_deletes_what_finished_grace_ago_or_earlier() {
    let s = Server::quiet();
    let mut c = s.conn();
    let q = Q::new("cleancut");
    let ids = [jid(1)];
    finished(&q, &mut c, &ids, "w");
    let clean = |grace: &[u8]| q.cmd("TRA.CLEAN", "", &["completed", "events"], &[b"GRACE", grace]);
    let (one, zero) = (clean(b"1"), clean(b"0"));
    // One transaction, one clock: the job finishes at the ms both cleans read.
    assert_eq!(c.call(&[b"MULTI"]), Reply::Simple("OK".into()));
    let done = q.cmd("EMQ.COMPLETE", &ids[0], &keys_of("EMQ.COMPLETE"), &[b"w", b"ok", b"KEEP", b"-1"]);
    for cmd in [&done, &one, &zero] {
        let cmd: Vec<&[u8]> = cmd.iter().map(Vec::as_slice).collect();
        assert_eq!(c.call(&cmd), Reply::Simple("QUEUED".into()));
    }
    let id = Reply::Bulk(ids[0].clone().into_bytes());
    assert_eq!(
        c.call(&[b"EXEC"]),
        Reply::Array(vec![Reply::Int(1), Reply::Array(vec![]), Reply::Array(vec![id])]),
        "finished 0 ms ago: not 1 ms ago or earlier, but 0 ms ago or earlier"
    );
    assert!(completed(&q, &mut c).is_empty());
}

/// drain.rs `left -= from_wait.len()` and `left -= from_prio.len()` → `+=` (a set drained past
/// COUNT): DRAIN COUNT n deletes n jobs in all — `wait` first, the rest from `prio`, then with
/// DELAYED from `delayed` — and no more.
#[test]
fn drain_count_spans_wait_and_prio() {
    let s = Server::quiet();
    let mut c = s.conn();
    let q = Q::new("span");
    for n in 1..=2 {
        assert_eq!(q.enqueue(&mut c, &jid(n), &[]), Reply::Int(1));
    }
    for n in 3..=7 {
        assert_eq!(q.enqueue(&mut c, &jid(n), &[b"PRIORITY", b"5"]), Reply::Int(1));
    }
    let drain = q.cmd("TRA.DRAIN", "", &["wait", "prio", "delayed", "events"], &[b"COUNT", b"3"]);
    let drain: Vec<&[u8]> = drain.iter().map(Vec::as_slice).collect();
    assert_eq!(c.call(&drain), Reply::Int(3));
    let snap = q.check_invariant(&mut c);
    let left: Vec<u64> = (1..=7).filter(|n| snap.state_of(&jid(*n)).is_some()).collect();
    assert_eq!(left, [4, 5, 6, 7], "the two waiting, then the first by priority order, are gone");
    // With DELAYED the rest of COUNT goes on to delayed: 4 prio jobs, then 2 of 3 delayed.
    for n in 8..=10 {
        assert_eq!(q.run(&mut c, "EMQ.SCHEDULE", &jid(n), &[b"+600000", b"job", b"{}"]), Reply::Int(1));
    }
    let drain = q.cmd("TRA.DRAIN", "", &["wait", "prio", "delayed", "events"], &[b"DELAYED", b"COUNT", b"6"]);
    let drain: Vec<&[u8]> = drain.iter().map(Vec::as_slice).collect();
    assert_eq!(c.call(&drain), Reply::Int(6));
    let snap = q.check_invariant(&mut c);
    let left: Vec<u64> = (1..=10).filter(|n| snap.state_of(&jid(*n)).is_some()).collect();
    assert_eq!(left, [10], "prio, then the delayed jobs by due time");
}

/// obliterate.rs: the COUNT budget and the reply (`active_len > 0` → `>=`, each `budget -=` →
/// `+=` or `/=`, `jobs_left` summed, `budget > 0` → `>=`, `keys_left += 1`, the kind test, `left == 0`):
/// OBLITERATE without FORCE takes a queue with nothing held, deletes COUNT jobs a call (wait
/// first, then each set in turn), then the queue's own keys, and answers what is left — jobs
/// plus keys — until 0.
#[test]
fn obliterate_spends_its_count_and_answers_what_is_left() {
    let s = Server::quiet();
    let mut c = s.conn();
    let q = Q::new("ob");
    // One completed and one failed job, then three waiting, two by priority, one delayed.
    for n in [7, 8] {
        assert_eq!(q.enqueue(&mut c, &jid(n), &[]), Reply::Int(1));
    }
    assert_eq!(claim_all(&q, &mut c, "w"), [jid(7), jid(8)]);
    assert_eq!(complete(&q, &mut c, &jid(7), "w", &[b"KEEP", b"-1"]), Reply::Int(1));
    let r = q.run(&mut c, "EMQ.FAIL", &jid(8), &[b"w", b"boom", b"FINAL", b"KEEP", b"-1"]);
    assert_eq!(r, Reply::Simple("failed".into()));
    for n in 1..=3 {
        assert_eq!(q.enqueue(&mut c, &jid(n), &[]), Reply::Int(1));
    }
    for n in 4..=5 {
        assert_eq!(q.enqueue(&mut c, &jid(n), &[b"PRIORITY", b"2"]), Reply::Int(1));
    }
    assert_eq!(q.run(&mut c, "EMQ.SCHEDULE", &jid(6), &[b"+600000", b"job", b"{}"]), Reply::Int(1));
    // A paused queue has its meta key.
    assert_eq!(q.run(&mut c, "EMQ.CLAIM", "", &[b"PAUSE"]), Reply::Int(1));
    let all = ["wait", "prio", "active", "delayed", "completed", "failed", "meta", "events"];
    let ob = q.cmd("TRA.OBLITERATE", "", &all, &[b"COUNT", b"2"]);
    let ob: Vec<&[u8]> = ob.iter().map(Vec::as_slice).collect();
    let jobs = |c: &mut Conn| -> Vec<u64> {
        let snap = q.check_invariant(c);
        (1..=8).filter(|n| snap.state_of(&jid(*n)).is_some()).collect()
    };
    let known = |c: &mut Conn| c.call(&[b"TRA.QUEUES"]).array()[1].strings().contains(&"ob".to_string());
    assert!(known(&mut c));
    // Jobs left, then the non-empty keys of wait, prio, delayed, completed, failed, meta, events.
    assert_eq!(c.call(&ob), Reply::Int(6 + 7));
    assert!(known(&mut c), "a queue with jobs left stays known");
    assert_eq!(jobs(&mut c), [3, 4, 5, 6, 7, 8], "two from the front of wait");
    assert_eq!(c.call(&ob), Reply::Int(4 + 6));
    assert_eq!(jobs(&mut c), [5, 6, 7, 8], "the last of wait, then one from prio");
    assert_eq!(c.call(&ob), Reply::Int(2 + 4));
    assert_eq!(jobs(&mut c), [7, 8], "prio, then delayed");
    assert_eq!(c.call(&ob), Reply::Int(2), "completed and failed; meta and events left");
    assert_eq!(jobs(&mut c), Vec::<u64>::new());
    // The queue's own keys are spent from the same COUNT: one a call at COUNT 1.
    let one = q.cmd("TRA.OBLITERATE", "", &all, &[b"COUNT", b"1"]);
    let one: Vec<&[u8]> = one.iter().map(Vec::as_slice).collect();
    assert_eq!(c.call(&one), Reply::Int(1), "meta deleted, events left");
    assert_eq!(c.call(&[b"EXISTS", q.k("events").as_bytes()]), Reply::Int(1));
    assert_eq!(c.call(&one), Reply::Int(0));
    assert!(!known(&mut c), "an obliterated queue is forgotten");
    for role in all {
        assert_eq!(c.call(&[b"EXISTS", q.k(role).as_bytes()]), Reply::Int(0), "{role}");
    }
    assert_eq!(c.call(&ob), Reply::Int(0), "an obliterated queue stays at 0");
}
