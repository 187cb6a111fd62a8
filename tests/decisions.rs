//! The client's decisions against a real server, as src/CONTRACT.md and src/verbs/README.md
//! state them: FAIL's `FINAL | RETRY [LIFO] | DELAY when` and `STACK`, the `attempts` fact of
//! every `failed` event, REPROCESS's `FROM`, `KEEPMADE`, `KEEPSTARTED`, `KEEPPROGRESS` and
//! `LIFO`, TRA.PRIORITY, and a queue's own `max-stalls` in `meta` (STALLED without MAXSTALLS,
//! and upkeep). Each new form's refusals write nothing, a replica holds what the primary
//! holds, and the reference page's examples of these sections are replayed as shown. The
//! invariant is checked after each test.
// A test may panic: that is how it fails. The module's own rules are for src/.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

use trafikey_support::*;

const PRIORITY_KEYS: &[&str] = &["job", "wait", "prio", "events"];

fn quiet() -> Vec<String> {
    vec!["upkeep".into(), "no".into()]
}

/// Claims the next ready job with `token` (60 s lease) and returns its id.
fn claim_one(q: &Q, c: &mut Conn, token: &str) -> String {
    let r = q.run(c, "EMQ.CLAIM", "", &[token.as_bytes(), b"60000"]);
    r.array()[0].array()[0].str()
}

fn fail(q: &Q, c: &mut Conn, id: &str, token: &str, args: &[&[u8]]) -> Reply {
    let mut a: Vec<&[u8]> = vec![token.as_bytes(), b"boom"];
    a.extend_from_slice(args);
    q.run(c, "EMQ.FAIL", id, &a)
}

fn priority(q: &Q, c: &mut Conn, id: &str, args: &[&[u8]]) -> Reply {
    let v = q.cmd("TRA.PRIORITY", id, PRIORITY_KEYS, args);
    let refs: Vec<&[u8]> = v.iter().map(Vec::as_slice).collect();
    c.call(&refs)
}

fn wait_list(c: &mut Conn, q: &Q) -> Vec<String> {
    c.call(&[b"LRANGE", q.k("wait").as_bytes(), b"0", b"-1"]).strings()
}

/// TRA.JOB as (name, value) pairs, in order.
fn job(c: &mut Conn, q: &Q, id: &str) -> Vec<(String, Reply)> {
    let r = c.call(&[b"TRA.JOB", b"1", q.job(id).as_bytes()]);
    r.array().chunks(2).map(|p| (p[0].str(), p[1].clone())).collect()
}

fn fact(c: &mut Conn, q: &Q, id: &str, name: &str) -> Reply {
    job(c, q, id).into_iter().find(|(k, _)| k == name).map(|(_, v)| v).unwrap()
}

#[test]
fn retry_and_delay_decide_over_attempts_and_backoff() {
    let (_s, mut c, q) = queue_on_quiet_server("decide");
    for i in 1..=4 {
        q.enqueue(&mut c, &jid(i), &[b"BACKOFF", b"FIXED", b"60000"]);
    }
    // No attempts left and a backoff: RETRY still makes it ready now, at the back.
    let a = claim_one(&q, &mut c, "t1");
    assert_eq!(fail(&q, &mut c, &a, "t1", &[b"RETRY"]), Reply::Simple("retry".into()));
    assert_eq!(wait_list(&mut c, &q).first(), Some(&a), "the back of wait (the left end)");
    assert_eq!(q.last_event(&mut c), ["event", "waiting", "id", &a, "prev", "active"]);
    let snap = q.check_invariant(&mut c);
    assert_eq!(snap.field(&a, "am").as_deref(), Some("1"));
    assert_eq!(snap.field(&a, "e").as_deref(), Some("boom"));
    assert_eq!(snap.field(&a, "tk"), None);
    // RETRY LIFO: the front, so it is claimed next.
    let b = claim_one(&q, &mut c, "t2");
    assert_eq!(fail(&q, &mut c, &b, "t2", &[b"retry", b"lifo"]), Reply::Simple("retry".into()));
    assert_eq!(wait_list(&mut c, &q).last(), Some(&b), "the front of wait (the right end)");
    assert_eq!(claim_one(&q, &mut c, "t3"), b);
    // DELAY at an absolute time: delayed there, whatever the backoff says.
    let at = b"4000000000000";
    assert_eq!(fail(&q, &mut c, &b, "t3", &[b"DELAY", at, b"KEEP", b"5"]), Reply::Simple("delayed".into()));
    let due = c.call(&[b"ZSCORE", q.k("delayed").as_bytes(), b.as_bytes()]).str();
    assert_eq!(due, "4000000000000");
    assert_eq!(q.last_event(&mut c), ["event", "delayed", "id", &b, "due", "4000000000000"]);
    assert_eq!(q.check_invariant(&mut c).field(&b, "am").as_deref(), Some("2"));
    // A past DELAY is due now: the next CLAIM promotes it.
    let d = claim_one(&q, &mut c, "t4");
    assert_eq!(fail(&q, &mut c, &d, "t4", &[b"DELAY", b"1"]), Reply::Simple("delayed".into()));
    assert_eq!(q.check_invariant(&mut c).state_of(&d).as_deref(), Some("delayed"));
    q.check_invariant(&mut c);

    // Another queue: a prioritised job's RETRY LIFO goes to prio (LIFO changes nothing
    // there), and FINAL fails for good with attempts left.
    let q = Q::new("decide2");
    q.enqueue(&mut c, &jid(9), &[b"PRIORITY", b"7", b"ATTEMPTS", b"5"]);
    let p = claim_one(&q, &mut c, "t5");
    assert_eq!(fail(&q, &mut c, &p, "t5", &[b"RETRY", b"LIFO"]), Reply::Simple("retry".into()));
    assert_eq!(q.check_invariant(&mut c).state_of(&p).as_deref(), Some("prio"));
    claim_one(&q, &mut c, "t6");
    assert_eq!(fail(&q, &mut c, &p, "t6", &[b"FINAL"]), Reply::Simple("failed".into()));
    assert_eq!(
        q.last_event(&mut c),
        ["event", "failed", "id", &p, "error", "boom", "attempt", "2", "attempts", "5"]
    );
    q.check_invariant(&mut c);
}

#[test]
fn every_failed_event_carries_the_max_attempts() {
    let (_s, mut c, q) = queue_on_quiet_server("facts");
    q.enqueue(&mut c, &jid(1), &[]);
    q.enqueue(&mut c, &jid(2), &[b"ATTEMPTS", b"3"]);
    q.enqueue(&mut c, &jid(3), &[b"EXPIRE", b"1"]);
    // The expired job is failed by the CLAIM that meets it, with its attempts.
    let a = claim_one(&q, &mut c, "t");
    assert_eq!(a, jid(1));
    assert_eq!(fail(&q, &mut c, &a, "t", &[]), Reply::Simple("failed".into()));
    assert_eq!(
        q.last_event(&mut c),
        ["event", "failed", "id", &a, "error", "boom", "attempt", "1", "attempts", "1"]
    );
    // A lease that stalls past MAXSTALLS 0.
    let r = q.run(&mut c, "EMQ.CLAIM", "", &[b"t", b"1", b"COUNT", b"5"]);
    assert_eq!(r.array().len(), 1, "the expired job is not handed out");
    std::thread::sleep(std::time::Duration::from_millis(5));
    let r = q.run(&mut c, "EMQ.STALLED", "", &[b"MAXSTALLS", b"0"]);
    assert_eq!(r.array()[1].strings(), [jid(2)]);
    let failed: Vec<Vec<String>> = q.events(&mut c).into_iter().filter(|e| e[1] == "failed").collect();
    assert_eq!(
        failed,
        [
            vec!["event", "failed", "id", &jid(1), "error", "boom", "attempt", "1", "attempts", "1"],
            vec!["event", "failed", "id", &jid(3), "error", "expired", "attempt", "0", "attempts", "1"],
            vec!["event", "failed", "id", &jid(2), "error", "stalled", "attempt", "1", "attempts", "3"],
        ]
    );
    q.check_invariant(&mut c);
}

#[test]
fn stack_is_the_last_failures_and_reprocess_keeps_it() {
    let (_s, mut c, q) = queue_on_quiet_server("stack");
    q.enqueue(&mut c, &jid(1), &[b"ATTEMPTS", b"9"]);
    let a = claim_one(&q, &mut c, "t1");
    assert_eq!(fact(&mut c, &q, &a, "stack"), Reply::Nil);
    let keys: Vec<String> = job(&mut c, &q, &a).into_iter().map(|(k, _)| k).collect();
    let tail: Vec<&str> = keys.iter().rev().take(7).rev().map(String::as_str).collect();
    assert_eq!(
        tail,
        ["stack", "alias", "dedup", "scheduler", "iteration", "count", "worker"],
        "stack is TRA.JOB's entry before alias"
    );
    fail(&q, &mut c, &a, "t1", &[b"STACK", b"at one (a.js:1)"]);
    assert_eq!(fact(&mut c, &q, &a, "stack"), Reply::Bulk(b"at one (a.js:1)".to_vec()));
    claim_one(&q, &mut c, "t2");
    fail(&q, &mut c, &a, "t2", &[b"STACK", b"at two (a.js:2)"]);
    assert_eq!(q.check_invariant(&mut c).field(&a, "s").as_deref(), Some("at two (a.js:2)"), "replaced");
    claim_one(&q, &mut c, "t3");
    fail(&q, &mut c, &a, "t3", &[]);
    assert_eq!(fact(&mut c, &q, &a, "stack"), Reply::Nil, "a FAIL without STACK deletes it");
    claim_one(&q, &mut c, "t4");
    fail(&q, &mut c, &a, "t4", &[b"STACK", b"at four (a.js:4)"]);
    claim_one(&q, &mut c, "t5");
    fail(&q, &mut c, &a, "t5", &[b"FINAL"]);
    assert_eq!(q.check_invariant(&mut c).state_of(&a).as_deref(), Some("failed"));
    assert_eq!(fact(&mut c, &q, &a, "stack"), Reply::Nil, "so does a final one, on the row it keeps");
    assert_eq!(q.run(&mut c, "EMQ.REPROCESS", &a, &[]), Reply::Int(1));
    claim_one(&q, &mut c, "t6");
    fail(&q, &mut c, &a, "t6", &[b"FINAL", b"STACK", b""]);
    assert_eq!(fact(&mut c, &q, &a, "stack"), Reply::Bulk(vec![]), "an empty stack is a stack");
    assert_eq!(q.run(&mut c, "EMQ.REPROCESS", &a, &[]), Reply::Int(1));
    assert_eq!(fact(&mut c, &q, &a, "stack"), Reply::Bulk(vec![]), "REPROCESS keeps it");
    q.check_invariant(&mut c);
}

#[test]
fn reprocess_from_keeps_counters_and_lifo() {
    let (_s, mut c, q) = queue_on_quiet_server("again");
    for i in 1..=3 {
        q.enqueue(&mut c, &jid(i), &[]);
    }
    let a = claim_one(&q, &mut c, "t");
    q.run(&mut c, "EMQ.COMPLETE", &a, &[b"t", b"ok"]);
    let b = claim_one(&q, &mut c, "t");
    fail(&q, &mut c, &b, "t", &[]);
    // FROM names the one set the job may be in.
    let refused = unchanged(&mut c, |c| q.run(c, "EMQ.REPROCESS", &a, &[b"FROM", b"failed"]));
    assert_eq!(refused.error(), format!("EMQSTATE job {a} is not failed"));
    let refused = unchanged(&mut c, |c| q.run(c, "EMQ.REPROCESS", &b, &[b"FROM", b"COMPLETED"]));
    assert_eq!(refused.error(), format!("EMQSTATE job {b} is not completed"));
    for id in [&a, &b] {
        assert_eq!(q.run(&mut c, "TRA.SETPROGRESS", id, &[b"half"]), Reply::Int(1));
    }
    // KEEPMADE keeps am, KEEPSTARTED keeps as, KEEPPROGRESS keeps g; LIFO puts it at the front.
    assert_eq!(
        q.run(&mut c, "EMQ.REPROCESS", &b, &[b"from", b"failed", b"KEEPMADE", b"LIFO", b"KEEPPROGRESS"]),
        Reply::Int(1)
    );
    let snap = q.check_invariant(&mut c);
    assert_eq!((snap.field(&b, "am").as_deref(), snap.field(&b, "as")), (Some("1"), None));
    assert_eq!(snap.field(&b, "g").as_deref(), Some("half"));
    assert_eq!(snap.field(&b, "e"), None);
    assert_eq!(wait_list(&mut c, &q).last(), Some(&b), "LIFO: the front of wait");
    assert_eq!(q.last_event(&mut c), ["event", "waiting", "id", &b, "prev", "failed"]);
    assert_eq!(q.run(&mut c, "EMQ.REPROCESS", &a, &[b"KEEPSTARTED", b"FROM", b"completed"]), Reply::Int(1));
    let snap = q.check_invariant(&mut c);
    assert_eq!((snap.field(&a, "am"), snap.field(&a, "as").as_deref()), (None, Some("1")));
    assert_eq!((snap.field(&a, "r"), snap.field(&a, "ca")), (None, None));
    assert_eq!(snap.field(&a, "g"), None, "without KEEPPROGRESS the report goes");
    assert_eq!(wait_list(&mut c, &q).first(), Some(&a), "without LIFO: the back");
}

#[test]
fn priority_moves_a_ready_job_as_the_new_value_needs() {
    let (_s, mut c, q) = queue_on_quiet_server("prio");
    for i in 1..=3 {
        q.enqueue(&mut c, &jid(i), &[]);
    }
    // wait → prio
    assert_eq!(priority(&q, &mut c, &jid(2), &[b"5"]), Reply::Int(1));
    let snap = q.check_invariant(&mut c);
    assert_eq!(snap.state_of(&jid(2)).as_deref(), Some("prio"));
    assert_eq!(snap.field(&jid(2), "p").as_deref(), Some("5"));
    assert_eq!(q.last_event(&mut c), ["event", "priority", "id", &jid(2), "priority", "5"]);
    // prio → prio: the new score
    priority(&q, &mut c, &jid(2), &[b"9"]);
    assert_eq!(c.call(&[b"ZSCORE", q.k("prio").as_bytes(), jid(2).as_bytes()]).str(), "9");
    // prio → wait, at the front with LIFO (claimed next), and the field deleted
    assert_eq!(priority(&q, &mut c, &jid(2), &[b"0", b"LIFO"]), Reply::Int(1));
    let snap = q.check_invariant(&mut c);
    assert_eq!(snap.field(&jid(2), "p"), None);
    assert_eq!(wait_list(&mut c, &q).last(), Some(&jid(2)));
    // wait → wait: its place kept
    let before = wait_list(&mut c, &q);
    priority(&q, &mut c, &jid(1), &[b"0"]);
    assert_eq!(wait_list(&mut c, &q), before);
    // prio → wait without LIFO: the back
    priority(&q, &mut c, &jid(3), &[b"4"]);
    priority(&q, &mut c, &jid(3), &[b"0"]);
    assert_eq!(wait_list(&mut c, &q).first(), Some(&jid(3)));
    // another state: only the field, used when the job is next ready
    let a = claim_one(&q, &mut c, "t");
    assert_eq!(priority(&q, &mut c, &a, &[b"3"]), Reply::Int(1));
    let snap = q.check_invariant(&mut c);
    assert_eq!((snap.state_of(&a).as_deref(), snap.field(&a, "p").as_deref()), (Some("active"), Some("3")));
    q.run(&mut c, "EMQ.REQUEUE", &a, &[b"t"]);
    assert_eq!(q.check_invariant(&mut c).state_of(&a).as_deref(), Some("prio"));
    assert_eq!(fact(&mut c, &q, &a, "priority"), Reply::Int(3));
}

#[test]
fn new_forms_refuse_bad_input_and_write_nothing() {
    let (_s, mut c, q) = queue_on_quiet_server("bad");
    q.enqueue(&mut c, &jid(1), &[b"ATTEMPTS", b"3"]);
    let a = claim_one(&q, &mut c, "t");
    c.call(&[b"CONFIG", b"SET", b"trafikey.max-payload", b"4"]);
    let fails: [(&[&[u8]], &str); 9] = [
        (&[b"FINAL", b"RETRY"], "EMQSHAPE FINAL, RETRY and DELAY exclude each other"),
        (&[b"RETRY", b"DELAY", b"+5"], "EMQSHAPE FINAL, RETRY and DELAY exclude each other"),
        (&[b"LIFO"], "EMQSHAPE LIFO goes with RETRY"),
        (&[b"FINAL", b"LIFO"], "EMQSHAPE LIFO goes with RETRY"),
        (&[b"DELAY", b"soon"], "EMQSHAPE when must be <ms> or +<ms>"),
        (&[b"DELAY"], "EMQSHAPE option DELAY needs a value"),
        (&[b"STACK"], "EMQSHAPE option STACK needs a value"),
        (&[b"DELAY", b"9007199254740992"], "EMQARG when must be 0..=9007199254740991"),
        (&[b"STACK", b"12345"], "EMQARG STACK must be 0..=4 bytes"),
    ];
    for (args, want) in fails {
        let r = unchanged(&mut c, |c| fail(&q, c, &a, "t", args));
        assert!(r.error().starts_with(want), "{args:?}: {}", r.error());
    }
    // The lease is checked after the ranges, as every holder verb's.
    let r = unchanged(&mut c, |c| fail(&q, c, &a, "other", &[b"RETRY"]));
    assert!(r.error().starts_with("EMQLEASE"), "{}", r.error());
    let reprocess: [(&[&[u8]], &str); 4] = [
        (&[b"FROM", b"active"], "EMQSHAPE FROM takes completed or failed"),
        (&[b"FROM"], "EMQSHAPE option FROM needs a value"),
        (&[b"KEEPMADE", b"KEEPMADE"], "EMQSHAPE option KEEPMADE given twice"),
        (&[], "EMQSTATE"),
    ];
    for (args, want) in reprocess {
        let r = unchanged(&mut c, |c| q.run(c, "EMQ.REPROCESS", &a, args));
        assert!(r.error().starts_with(want), "{args:?}: {}", r.error());
    }
    let prio: [(&str, &[&[u8]], &str); 7] = [
        (&a, &[], "EMQSHAPE"),
        (&a, &[b"high"], "EMQSHAPE priority is not an integer"),
        (&a, &[b"1", b"FIFO"], "EMQSHAPE unknown option FIFO"),
        (&a, &[b"2097152"], "EMQARG priority must be 0..=2097151"),
        (&a, &[b"-1"], "EMQARG priority must be 0..=2097151"),
        ("JOB42", &[b"1"], "EMQID malformed job id JOB42"),
        (&jid(77), &[b"1"], "EMQNOJOB"),
    ];
    for (id, args, want) in prio {
        let r = unchanged(&mut c, |c| priority(&q, c, id, args));
        assert!(r.error().starts_with(want), "{args:?}: {}", r.error());
    }
    // Layout: a key of another role.
    let v = q.cmd("TRA.PRIORITY", &a, &["job", "prio", "wait", "events"], &[b"1"]);
    let refs: Vec<&[u8]> = v.iter().map(Vec::as_slice).collect();
    let r = unchanged(&mut c, |c| c.call(&refs));
    assert!(r.error().starts_with("EMQLAYOUT"), "{}", r.error());
    q.check_invariant(&mut c);
}

/// A job STALLED fails for good counts for `keep-failed` as one FAIL fails: the oldest beyond
/// the cap go.
#[test]
fn a_job_stalled_for_good_counts_for_keep_failed() {
    let (_s, mut c, q) = queue_on_quiet_server("stallkeep");
    c.call(&[b"CONFIG", b"SET", b"trafikey.keep-failed", b"1"]);
    for n in 1..=2 {
        assert_eq!(q.enqueue(&mut c, &jid(n), &[]), Reply::Int(1));
        assert_eq!(q.run(&mut c, "EMQ.CLAIM", "", &[b"t", b"1"]).array().len(), 1);
        std::thread::sleep(std::time::Duration::from_millis(5));
        let r = q.run(&mut c, "EMQ.STALLED", "", &[b"MAXSTALLS", b"0"]);
        assert_eq!(r.array()[1].strings(), [jid(n)]);
    }
    let snap = q.check_invariant(&mut c);
    assert_eq!(snap.sets["failed"], [jid(2)], "the cap of 1 keeps the newer");
}

#[test]
fn a_queue_sets_its_own_max_stalls() {
    let (_s, mut c, q) = queue_on_quiet_server("stalls");
    let stall = |c: &mut Conn, args: &[&[u8]]| -> Reply {
        q.run(c, "EMQ.CLAIM", "", &[b"t", b"1"]);
        std::thread::sleep(std::time::Duration::from_millis(5));
        q.run(c, "EMQ.STALLED", "", args)
    };
    q.enqueue(&mut c, &jid(1), &[]);
    // The config (1): the first stall requeues.
    assert_eq!(stall(&mut c, &[]).array()[0].strings(), [jid(1)]);
    // The queue's own 0: the next stall (its second) fails it.
    c.call(&[b"HSET", q.k("meta").as_bytes(), b"max-stalls", b"0"]);
    assert_eq!(stall(&mut c, &[]).array()[1].strings(), [jid(1)]);
    // MAXSTALLS given wins over meta.
    q.run(&mut c, "EMQ.REPROCESS", &jid(1), &[]);
    assert_eq!(stall(&mut c, &[b"MAXSTALLS", b"5"]).array()[0].strings(), [jid(1)]);
    // A value that is not an integer 0..=1000 is ignored: the config's 1 lets a first stall
    // requeue (stalls are reset by failing the job and reprocessing it).
    for bad in [&b"many"[..], b"1001", b"-1", b""] {
        assert_eq!(stall(&mut c, &[b"MAXSTALLS", b"0"]).array()[1].strings(), [jid(1)]);
        q.run(&mut c, "EMQ.REPROCESS", &jid(1), &[]);
        c.call(&[b"HSET", q.k("meta").as_bytes(), b"max-stalls", bad]);
        let r = stall(&mut c, &[]);
        assert_eq!(r.array()[0].strings(), [jid(1)], "{bad:?}: the config's 1 allows the first stall");
    }
    // A meta of another type answers WRONGTYPE and writes nothing.
    q.run(&mut c, "EMQ.CLAIM", "", &[b"t", b"1"]);
    c.call(&[b"DEL", q.k("meta").as_bytes()]);
    c.call(&[b"SET", q.k("meta").as_bytes(), b"x"]);
    std::thread::sleep(std::time::Duration::from_millis(5));
    let r = unchanged(&mut c, |c| q.run(c, "EMQ.STALLED", "", &[]));
    assert!(r.error().starts_with("WRONGTYPE"), "{}", r.error());
    assert_eq!(q.run(&mut c, "EMQ.STALLED", "", &[b"MAXSTALLS", b"9"]).array()[0].strings(), [jid(1)]);
    q.check_invariant(&mut c);
}

#[test]
fn stalled_reads_meta_as_the_caller_only_without_maxstalls() {
    let (s, mut admin, q) = queue_on_quiet_server("aclm");
    q.enqueue(&mut admin, &jid(1), &[]);
    q.run(&mut admin, "EMQ.CLAIM", "", &[b"t", b"1"]);
    std::thread::sleep(std::time::Duration::from_millis(5));
    let mut c = s.user(
        &mut admin,
        "sweeper",
        "+@all ~{emq}:version ~emq:{aclm}:active ~emq:{aclm}:wait ~emq:{aclm}:prio ~emq:{aclm}:failed \
         ~emq:{aclm}:events ~emq:{aclm}:job:*",
    );
    let r = unchanged(&mut c, |c| q.run(c, "EMQ.STALLED", "", &[]));
    assert!(r.error().starts_with("NOPERM"), "{}", r.error());
    let r = q.run(&mut c, "EMQ.STALLED", "", &[b"MAXSTALLS", b"1"]);
    assert_eq!(r.array()[0].strings(), [jid(1)]);
    q.check_invariant(&mut admin);
}

#[test]
fn upkeep_honours_the_queues_max_stalls() {
    let s = Server::start(Opts::default());
    let mut c = s.conn();
    c.call(&[b"EMQ.INSTALL", b"1", b"{emq}:version"]);
    let q = Q::new("keep");
    c.call(&[b"HSET", q.k("meta").as_bytes(), b"max-stalls", b"0"]);
    q.enqueue(&mut c, &jid(1), &[]);
    q.run(&mut c, "EMQ.CLAIM", "", &[b"t", b"1"]);
    wait_for(
        || q.snapshot(&mut c).state_of(&jid(1)).as_deref() == Some("failed"),
        "upkeep fails the stalled job",
    );
    assert_eq!(q.check_invariant(&mut c).field(&jid(1), "e").as_deref(), Some("stalled"));
}

#[test]
fn a_replica_holds_what_the_new_forms_wrote() {
    let primary = Server::start(Opts { module_args: quiet(), ..Opts::default() });
    let replica = Server::start(Opts { module_args: quiet(), ..Opts::default() });
    let mut p = primary.conn();
    p.call(&[b"EMQ.INSTALL", b"1", b"{emq}:version"]);
    let mut r = replica.follow(&primary);
    let q = Q::new("rep");
    for i in 1..=12 {
        q.enqueue(&mut p, &jid(i), &[b"ATTEMPTS", b"2"]);
    }
    p.call(&[b"HSET", q.k("meta").as_bytes(), b"max-stalls", b"0"]);
    let decisions: [&[&[u8]]; 6] = [
        &[b"RETRY", b"STACK", b"s1"],
        &[b"RETRY", b"LIFO"],
        &[b"DELAY", b"+1"],
        &[b"DELAY", b"4000000000000", b"STACK", b"s2"],
        &[b"FINAL", b"STACK", b"s3"],
        &[],
    ];
    for (k, d) in decisions.iter().enumerate() {
        let id = claim_one(&q, &mut p, "w");
        assert!(fail(&q, &mut p, &id, "w", d).err().is_none(), "{k}");
    }
    for i in 1..=12 {
        priority(&q, &mut p, &jid(i), &[(i % 3).to_string().as_bytes(), b"LIFO"]);
    }
    let done = p.call(&[b"ZRANGE", q.k("failed").as_bytes(), b"0", b"-1"]).strings();
    for id in &done {
        q.run(&mut p, "EMQ.REPROCESS", id, &[b"FROM", b"failed", b"KEEPMADE", b"KEEPSTARTED", b"LIFO"]);
    }
    q.run(&mut p, "EMQ.CLAIM", "", &[b"w", b"1", b"COUNT", b"3"]);
    std::thread::sleep(std::time::Duration::from_millis(5));
    q.run(&mut p, "EMQ.STALLED", "", &[]);
    q.check_invariant(&mut p);
    assert_eq!(p.call(&[b"WAIT", b"1", b"5000"]), Reply::Int(1));
    assert_eq!(digest(&mut p), digest(&mut r), "replica digest");
}

/// The reference page's examples of EMQ.FAIL, EMQ.REPROCESS, EMQ.STALLED's meta and
/// TRA.PRIORITY, replayed with the jobs they assume: each reply as the page shows it.
#[test]
fn the_reference_examples_replay() {
    let (_s, mut c, q) = queue_on_quiet_server("mail");
    let tokens = ["w1-7f3a", "w1-7f3b", "w1-7f3c", "w1-7f3d"];
    let ids: Vec<String> = ["JOB0000000001a", "JOB0000000001b", "JOB0000000001c", "JOB0000000001d"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    for id in &ids {
        q.enqueue(&mut c, id, &[b"ATTEMPTS", b"3", b"BACKOFF", b"EXP", b"1000"]);
    }
    for (id, t) in ids.iter().zip(tokens) {
        assert_eq!(&claim_one(&q, &mut c, t), id);
    }
    let f = |c: &mut Conn, i: usize, err: &[u8], more: &[&[u8]]| {
        let mut a: Vec<&[u8]> = vec![tokens[i].as_bytes(), err];
        a.extend_from_slice(more);
        q.run(c, "EMQ.FAIL", &ids[i], &a)
    };
    assert_eq!(f(&mut c, 0, b"smtp 451", &[]), Reply::Simple("delayed".into()));
    let stack: &[&[u8]] = &[b"RETRY", b"LIFO", b"STACK", b"at send (mail.js:12)"];
    assert_eq!(f(&mut c, 1, b"smtp 451", stack), Reply::Simple("retry".into()));
    assert_eq!(f(&mut c, 2, b"rate limited", &[b"DELAY", b"+60000"]), Reply::Simple("delayed".into()));
    assert_eq!(
        f(&mut c, 3, b"bad address", &[b"FINAL", b"RETRY"]).error(),
        "EMQSHAPE FINAL, RETRY and DELAY exclude each other"
    );
    // REPROCESS: 1a completed, 1e failed, 1f completed.
    let (e, g) = ("JOB0000000001e", "JOB0000000001f");
    q.enqueue(&mut c, e, &[]);
    q.enqueue(&mut c, g, &[]);
    q.run(&mut c, "EMQ.PROMOTE", &ids[0], &[]);
    let mut claimed = Vec::new();
    for _ in 0..4 {
        claimed.push(claim_one(&q, &mut c, "x"));
    }
    for id in &claimed {
        if id.as_str() == e {
            q.run(&mut c, "EMQ.FAIL", id, &[b"x", b"no", b"FINAL"]);
        } else {
            q.run(&mut c, "EMQ.COMPLETE", id, &[b"x", b"ok"]);
        }
    }
    assert_eq!(q.check_invariant(&mut c).state_of(&ids[0]).as_deref(), Some("completed"));
    assert_eq!(q.run(&mut c, "EMQ.REPROCESS", &ids[0], &[]), Reply::Int(1));
    assert_eq!(q.run(&mut c, "EMQ.REPROCESS", e, &[b"FROM", b"failed", b"KEEPMADE", b"LIFO"]), Reply::Int(1));
    assert_eq!(
        q.run(&mut c, "EMQ.REPROCESS", g, &[b"FROM", b"failed"]).error(),
        "EMQSTATE job JOB0000000001f is not failed"
    );
    // TRA.PRIORITY on 1a (waiting).
    assert_eq!(priority(&q, &mut c, &ids[0], &[b"5"]), Reply::Int(1));
    assert_eq!(priority(&q, &mut c, &ids[0], &[b"0", b"LIFO"]), Reply::Int(1));
    assert_eq!(priority(&q, &mut c, &ids[0], &[b"9999999"]).error(), "EMQARG priority must be 0..=2097151");
    q.check_invariant(&mut c);

    // STALLED with the queue's own max-stalls: a fresh queue, 1a held and lapsed twice.
    let (_s, mut c, q) = queue_on_quiet_server("mail");
    q.enqueue(&mut c, "JOB0000000001a", &[]);
    q.run(&mut c, "EMQ.CLAIM", "", &[b"w", b"1"]);
    std::thread::sleep(std::time::Duration::from_millis(5));
    let r = q.run(&mut c, "EMQ.STALLED", "", &[]);
    assert_eq!(
        (r.array()[0].strings(), r.array()[1].strings()),
        (vec!["JOB0000000001a".to_string()], vec![])
    );
    assert_eq!(c.call(&[b"HSET", q.k("meta").as_bytes(), b"max-stalls", b"0"]), Reply::Int(1));
    q.run(&mut c, "EMQ.CLAIM", "", &[b"w", b"1"]);
    std::thread::sleep(std::time::Duration::from_millis(5));
    let r = q.run(&mut c, "EMQ.STALLED", "", &[]);
    assert_eq!(
        (r.array()[0].strings(), r.array()[1].strings()),
        (vec![], vec!["JOB0000000001a".to_string()])
    );
}
