//! Deduplication against a real server, as src/CONTRACT.md and src/verbs/README.md state it:
//! `DEDUP id [DEDUPTTL ms [EXTEND] | KEEPLAST] [REPLACE]` on ENQUEUE, SCHEDULE and TRA.ADD; a
//! live id answers its holder's id with a `deduplicated` event and creates nothing; the id is
//! released by every path that finishes (without a TTL) or deletes its job; a TTL is the
//! server's own expiry; a job KEEPLAST keeps while the holder is active is made by the
//! holder's finish; TRA.DEDUP and TRA.UNDEDUP; refusals write nothing; replicas and the AOF
//! hold what the primary holds; ACL judges the id's key as the caller's.
// A test may panic: that is how it fails. The module's own rules are for src/.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

use trafikey_support::*;

fn dkey(q: &Q, id: &str) -> String {
    q.k(&format!("dedup:{id}"))
}

/// TRA.DEDUP: the holder's id, or None.
fn holder(c: &mut Conn, q: &Q, id: &str) -> Option<String> {
    let r = c.call(&[b"TRA.DEDUP", b"1", dkey(q, id).as_bytes()]);
    (!r.is_nil()).then(|| r.str())
}

fn schedule(c: &mut Conn, q: &Q, id: &str, when: &str, opts: &[&[u8]]) -> Reply {
    let mut a: Vec<&[u8]> = vec![when.as_bytes(), b"job", b"{}"];
    a.extend_from_slice(opts);
    q.run(c, "EMQ.SCHEDULE", id, &a)
}

fn claim(c: &mut Conn, q: &Q, token: &str) -> String {
    let r = q.run(c, "EMQ.CLAIM", "", &[token.as_bytes(), b"60000"]);
    r.array()[0].array()[0].str()
}

fn pttl(c: &mut Conn, key: &str) -> i64 {
    c.call(&[b"PTTL", key.as_bytes()]).int()
}

fn bulk(s: &str) -> Reply {
    Reply::Bulk(s.as_bytes().to_vec())
}

/// The id of the job kept for a deduplication id (KEEPLAST), if any.
fn kept(c: &mut Conn, q: &Q, id: &str) -> Option<String> {
    let r = c.call(&[b"HGET", q.k(&format!("kept:{id}")).as_bytes(), b"id"]);
    (!r.is_nil()).then(|| r.str())
}

/// A job kept for `d` while `j(n)` holds it active: ENQUEUE … DEDUP d KEEPLAST answers the holder.
fn keep(c: &mut Conn, q: &Q, n: u64, holder: u64, d: &str, opts: &[&[u8]]) {
    let mut a: Vec<&[u8]> = vec![b"DEDUP", d.as_bytes(), b"KEEPLAST"];
    a.extend_from_slice(opts);
    assert_eq!(q.enqueue(c, &jid(n), &a), bulk(&jid(holder)));
    assert_eq!(kept(c, q, d), Some(jid(n)));
}

#[test]
fn a_live_id_answers_its_holder_and_creates_nothing() {
    let (_s, mut c, q) = queue_on_quiet_server("simple");
    assert_eq!(q.enqueue(&mut c, &jid(1), &[b"DEDUP", b"d"]), Reply::Int(1));
    assert_eq!(holder(&mut c, &q, "d"), Some(jid(1)));
    assert_eq!(pttl(&mut c, &dkey(&q, "d")), -1, "without DEDUPTTL the id has no expiry");
    // ENQUEUE, SCHEDULE and TRA.ADD giving the id: the holder's id, no row, one event each.
    assert_eq!(q.enqueue(&mut c, &jid(2), &[b"DEDUP", b"d"]), bulk(&jid(1)));
    assert_eq!(schedule(&mut c, &q, &jid(3), "+60000", &[b"DEDUP", b"d"]), bulk(&jid(1)));
    let r = c.call_v(&q.add_cmd(&[(&jid(4), "a", &["DEDUP", "d"]), (&jid(5), "b", &[])]));
    assert_eq!(r, Reply::Array(vec![bulk(&jid(1)), Reply::Int(1)]));
    let snap = q.check_invariant(&mut c);
    assert_eq!(snap.rows.len(), 2);
    assert_eq!(snap.field(&jid(1), "de").as_deref(), Some("d"));
    let ev = q.events(&mut c);
    for (e, refused) in ev[1..4].iter().zip([jid(2), jid(3), jid(4)]) {
        assert_eq!(e, &["event", "deduplicated", "id", &jid(1), "dedup", "d", "refused", &refused]);
    }
    // TRA.JOB shows the id.
    let dedup_of = |c: &mut Conn, id: &str| {
        let m = c.call(&[b"TRA.JOB", b"1", q.job(id).as_bytes()]).array().to_vec();
        let at = m.iter().position(|v| *v == bulk("dedup")).expect("a dedup entry");
        m[at + 1].clone()
    };
    assert_eq!(dedup_of(&mut c, &jid(1)), bulk("d"));
    // A job without DEDUP has none.
    assert!(dedup_of(&mut c, &jid(5)).is_nil());
    // The holder completes: the id is free, the next job takes it.
    assert_eq!(claim(&mut c, &q, "t"), jid(1));
    assert_eq!(complete(&q, &mut c, &jid(1), "t", &[]), Reply::Int(1));
    assert_eq!(holder(&mut c, &q, "d"), None);
    assert_eq!(q.enqueue(&mut c, &jid(6), &[b"DEDUP", b"d"]), Reply::Int(1));
    assert_eq!(holder(&mut c, &q, "d"), Some(jid(6)));
}

#[test]
fn the_id_goes_with_every_finish_and_every_deletion() {
    let (_s, mut c, q) = queue_on_quiet_server("paths");
    let live = |c: &mut Conn, d: &str| c.call(&[b"EXISTS", dkey(&q, d).as_bytes()]) == Reply::Int(1);
    let mut n = 0;
    let mut next = |c: &mut Conn, d: &str, opts: &[&[u8]]| {
        n += 1;
        let id = jid(n);
        let mut a: Vec<&[u8]> = vec![b"DEDUP", d.as_bytes()];
        a.extend_from_slice(opts);
        assert_eq!(q.enqueue(c, &id, &a), Reply::Int(1));
        assert!(live(c, d));
        id
    };
    // COMPLETE under KEEP 0.
    let a = next(&mut c, "c0", &[]);
    claim(&mut c, &q, "t");
    assert_eq!(complete(&q, &mut c, &a, "t", &[b"KEEP", b"0"]), Reply::Int(1));
    assert!(!live(&mut c, "c0"));
    // FAIL: a retry keeps the id, the final failure releases it.
    let a = next(&mut c, "f", &[b"ATTEMPTS", b"2"]);
    claim(&mut c, &q, "t");
    assert_eq!(q.run(&mut c, "EMQ.FAIL", &a, &[b"t", b"no"]), Reply::Simple("retry".into()));
    assert!(live(&mut c, "f"));
    claim(&mut c, &q, "t");
    assert_eq!(q.run(&mut c, "EMQ.FAIL", &a, &[b"t", b"no"]), Reply::Simple("failed".into()));
    assert!(!live(&mut c, "f"));
    // TRA.COMPLETES.
    let a = next(&mut c, "cs", &[]);
    claim(&mut c, &q, "t");
    let r = q.run(&mut c, "TRA.COMPLETES", "", &[a.as_bytes(), b"t", b"ok"]);
    assert_eq!(r, Reply::Array(vec![Reply::Int(1)]));
    assert!(!live(&mut c, "cs"));
    // TRA.COMPLETENEXT.
    let a = next(&mut c, "cn", &[]);
    claim(&mut c, &q, "t");
    let r = q.run(&mut c, "TRA.COMPLETENEXT", &a, &[b"t", b"ok", b"60000"]);
    assert_eq!(r.array()[0], Reply::Int(1));
    assert!(!live(&mut c, "cn"));
    // STALLED's final failure (MAXSTALLS 0), after the lease ran out.
    let a = next(&mut c, "st", &[]);
    let r = q.run(&mut c, "EMQ.CLAIM", "", &[b"t", b"1"]);
    assert_eq!(r.array()[0].array()[0].str(), a);
    std::thread::sleep(std::time::Duration::from_millis(5));
    let r = q.run(&mut c, "EMQ.STALLED", "", &[b"MAXSTALLS", b"0"]);
    assert_eq!(r.array()[1].strings(), std::slice::from_ref(&a));
    assert!(!live(&mut c, "st"));
    // An expiry: the CLAIM that meets the expired job fails it.
    let a = next(&mut c, "x", &[b"EXPIRE", b"1"]);
    let r = q.run(&mut c, "EMQ.CLAIM", "", &[b"t", b"60000"]);
    assert_eq!(r, Reply::Array(vec![]));
    assert_eq!(q.snapshot(&mut c).state_of(&a).as_deref(), Some("failed"));
    assert!(!live(&mut c, "x"));
    // TRA.REMOVE.
    let a = next(&mut c, "r", &[]);
    assert_eq!(c.call_v(&q.cmd("TRA.REMOVE", &a, &keys_of("TRA.REMOVE"), &[])), Reply::Int(1));
    assert!(!live(&mut c, "r"));
    // TRA.DRAIN.
    next(&mut c, "dr", &[]);
    let drain = q.cmd("TRA.DRAIN", "", &["wait", "prio", "delayed", "events"], &[]);
    assert_eq!(c.call_v(&drain), Reply::Int(1));
    assert!(!live(&mut c, "dr"));
    // TRA.CLEAN of a completed job whose id has a TTL: a client deleting the job releases it.
    let a = next(&mut c, "cl", &[b"DEDUPTTL", b"600000"]);
    claim(&mut c, &q, "t");
    complete(&q, &mut c, &a, "t", &[]);
    assert!(live(&mut c, "cl"), "a TTL outlives the finish");
    std::thread::sleep(std::time::Duration::from_millis(3));
    let r =
        c.call(&[b"TRA.CLEAN", b"2", q.k("completed").as_bytes(), q.k("events").as_bytes(), b"GRACE", b"0"]);
    assert!(r.strings().contains(&a));
    assert!(!live(&mut c, "cl"));
    // TRA.OBLITERATE.
    next(&mut c, "ob", &[]);
    let mut ob: Vec<Vec<u8>> = vec![b"TRA.OBLITERATE".to_vec(), b"8".to_vec()];
    for r in ["wait", "prio", "active", "delayed", "completed", "failed", "meta", "events"] {
        ob.push(q.k(r).into_bytes());
    }
    assert_eq!(c.call_v(&ob), Reply::Int(0));
    assert!(!live(&mut c, "ob"));
    assert_eq!(c.call(&[b"KEYS", b"emq:{paths}:*"]), Reply::Array(vec![]));
}

/// An id that names another job (rewritten by a client) is left alone when a job with it goes.
#[test]
fn only_an_id_that_still_names_the_job_is_released() {
    let (_s, mut c, q) = queue_on_quiet_server("other");
    q.enqueue(&mut c, &jid(1), &[b"DEDUP", b"d"]);
    c.call(&[b"SET", dkey(&q, "d").as_bytes(), jid(9).as_bytes()]);
    assert_eq!(c.call_v(&q.cmd("TRA.REMOVE", &jid(1), &keys_of("TRA.REMOVE"), &[])), Reply::Int(1));
    assert_eq!(holder(&mut c, &q, "d"), Some(jid(9)));
}

#[test]
fn a_ttl_is_the_servers_expiry_and_outlives_the_finish() {
    let (_s, mut c, q) = queue_on_quiet_server("ttl");
    assert_eq!(q.enqueue(&mut c, &jid(1), &[b"DEDUP", b"t", b"DEDUPTTL", b"300"]), Reply::Int(1));
    let t = pttl(&mut c, &dkey(&q, "t"));
    assert!(t > 0 && t <= 300, "{t}");
    claim(&mut c, &q, "w");
    complete(&q, &mut c, &jid(1), "w", &[]);
    assert_eq!(holder(&mut c, &q, "t"), Some(jid(1)), "a throttle: the id lives its TTL");
    assert_eq!(q.enqueue(&mut c, &jid(2), &[b"DEDUP", b"t", b"DEDUPTTL", b"300"]), bulk(&jid(1)));
    // Past the TTL the server has dropped the key, and the id is free.
    wait_for(|| c.call(&[b"EXISTS", dkey(&q, "t").as_bytes()]) == Reply::Int(0), "the id to expire");
    assert_eq!(holder(&mut c, &q, "t"), None);
    assert_eq!(q.enqueue(&mut c, &jid(3), &[b"DEDUP", b"t", b"DEDUPTTL", b"300"]), Reply::Int(1));
    assert_eq!(q.snapshot(&mut c).rows.len(), 2);
}

/// Retention deletes a finished job's row, not its throttle: an id with a TTL outlives the
/// job it named, as it outlives the finish.
#[test]
fn retention_leaves_an_id_with_a_ttl_to_its_ttl() {
    let (_s, mut c, q) = queue_on_quiet_server("retire");
    assert_eq!(q.enqueue(&mut c, &jid(1), &[b"DEDUP", b"t", b"DEDUPTTL", b"600000"]), Reply::Int(1));
    claim(&mut c, &q, "w");
    complete(&q, &mut c, &jid(1), "w", &[b"KEEP", b"1"]);
    q.enqueue(&mut c, &jid(2), &[]);
    claim(&mut c, &q, "w");
    complete(&q, &mut c, &jid(2), "w", &[b"KEEP", b"1"]);
    let snap = q.check_invariant(&mut c);
    assert!(!snap.rows.contains_key(&jid(1)), "KEEP 1 retired the first job");
    assert_eq!(holder(&mut c, &q, "t"), Some(jid(1)));
    assert!(pttl(&mut c, &dkey(&q, "t")) > 500000);
    assert_eq!(q.enqueue(&mut c, &jid(3), &[b"DEDUP", b"t"]), bulk(&jid(1)));
}

#[test]
fn extend_restarts_the_ttl_on_each_duplicate() {
    let (_s, mut c, q) = queue_on_quiet_server("ext");
    let key = dkey(&q, "e");
    let expiretime = |c: &mut Conn| c.call(&[b"PEXPIRETIME", key.as_bytes()]).int();
    let now = |c: &mut Conn| {
        let t = c.call(&[b"TIME"]).strings();
        t[0].parse::<i64>().unwrap() * 1000 + t[1].parse::<i64>().unwrap() / 1000
    };
    q.enqueue(&mut c, &jid(1), &[b"DEDUP", b"e", b"DEDUPTTL", b"1000"]);
    let first = expiretime(&mut c);
    // A duplicate without EXTEND leaves the TTL as it was.
    q.enqueue(&mut c, &jid(2), &[b"DEDUP", b"e", b"DEDUPTTL", b"500000"]);
    assert_eq!(expiretime(&mut c), first);
    // With EXTEND: now + its DEDUPTTL.
    let before = now(&mut c);
    assert_eq!(
        q.enqueue(&mut c, &jid(3), &[b"DEDUP", b"e", b"DEDUPTTL", b"500000", b"EXTEND"]),
        bulk(&jid(1))
    );
    let after = now(&mut c);
    let t = expiretime(&mut c);
    assert!(t >= before + 500000 && t <= after + 500000, "{before} {t} {after}");
    assert_eq!(holder(&mut c, &q, "e"), Some(jid(1)));
    let ev = q.events(&mut c);
    assert_eq!(ev[2], ["event", "deduplicated", "id", &jid(1), "dedup", "e", "refused", &jid(3)]);
}

#[test]
fn replace_swaps_a_delayed_holder_for_the_new_job() {
    let (_s, mut c, q) = queue_on_quiet_server("rep");
    assert_eq!(schedule(&mut c, &q, &jid(1), "+600000", &[b"DEDUP", b"r", b"ALIAS", b"a1"]), Reply::Int(1));
    log_line_any(&mut c, &q, &jid(1));
    // ENQUEUE … REPLACE: the delayed holder is deleted with its log and alias, the new job holds the id.
    assert_eq!(q.enqueue(&mut c, &jid(2), &[b"DEDUP", b"r", b"REPLACE", b"ALIAS", b"a2"]), Reply::Int(1));
    let snap = q.check_invariant(&mut c);
    assert!(!snap.rows.contains_key(&jid(1)));
    assert_eq!(snap.sets["wait"], [jid(2)]);
    assert!(snap.sets["delayed"].is_empty());
    assert_eq!(holder(&mut c, &q, "r"), Some(jid(2)));
    assert_eq!(c.call(&[b"EXISTS", format!("emq:{{rep}}:log:{}", jid(1)).as_bytes()]), Reply::Int(0));
    assert_eq!(c.call(&[b"HEXISTS", q.k("alias").as_bytes(), b"a1"]), Reply::Int(0));
    let ev = q.events(&mut c);
    let n = ev.len();
    assert_eq!(
        ev[n - 3],
        ["event", "removed", "id", &jid(1), "prev", "delayed", "alias", "a1"],
        "named by its alias too"
    );
    let replaced = ["event", "deduplicated", "id", &jid(2), "dedup", "r", "replaced", &jid(1), "alias", "a2"];
    assert_eq!(ev[n - 2], replaced, "the producer's ALIAS names the job it made");
    assert_eq!(ev[n - 1][..4], ["event", "added", "id", &jid(2)]);
    // A holder that is not delayed is not replaced: a plain duplicate.
    assert_eq!(schedule(&mut c, &q, &jid(3), "+600000", &[b"DEDUP", b"r", b"REPLACE"]), bulk(&jid(2)));
    // SCHEDULE … REPLACE of a delayed holder, a TTL given without EXTEND: the holder's TTL kept.
    schedule(&mut c, &q, &jid(4), "+600000", &[b"DEDUP", b"s", b"DEDUPTTL", b"900000"]);
    let until = c.call(&[b"PEXPIRETIME", dkey(&q, "s").as_bytes()]).int();
    let r = schedule(&mut c, &q, &jid(5), "+700000", &[b"DEDUP", b"s", b"DEDUPTTL", b"5000000", b"REPLACE"]);
    assert_eq!(r, Reply::Int(1));
    assert_eq!(c.call(&[b"PEXPIRETIME", dkey(&q, "s").as_bytes()]).int(), until);
    let snap = q.check_invariant(&mut c);
    assert_eq!(snap.sets["delayed"], [jid(5)]);
    // With EXTEND the new job's TTL starts afresh.
    let r = c.call_v(&q.add_cmd(&[(
        &jid(6),
        "x",
        &["DELAY", "+5", "DEDUP", "s", "DEDUPTTL", "5000000", "EXTEND", "REPLACE"],
    )]));
    assert_eq!(r, Reply::Array(vec![Reply::Int(1)]));
    assert!(c.call(&[b"PEXPIRETIME", dkey(&q, "s").as_bytes()]).int() > until + 1_000_000);
    assert_eq!(holder(&mut c, &q, "s"), Some(jid(6)));
    let snap = q.check_invariant(&mut c);
    assert_eq!(snap.sets["delayed"], [jid(6)]);
    assert!(!snap.rows.contains_key(&jid(5)));
}

#[test]
fn without_replace_a_delayed_holder_is_kept() {
    let (_s, mut c, q) = queue_on_quiet_server("keep");
    assert_eq!(schedule(&mut c, &q, &jid(1), "+600000", &[b"DEDUP", b"k"]), Reply::Int(1));
    // A delayed holder, and each producer verb without REPLACE: a duplicate, nothing replaced.
    assert_eq!(q.enqueue(&mut c, &jid(2), &[b"DEDUP", b"k"]), bulk(&jid(1)));
    assert_eq!(schedule(&mut c, &q, &jid(3), "+5", &[b"DEDUP", b"k"]), bulk(&jid(1)));
    let r = c.call_v(
        &q.add_cmd(&[(&jid(4), "x", &["DEDUP", "k"]), (&jid(5), "x", &["DELAY", "+5", "DEDUP", "k"])]),
    );
    assert_eq!(r, Reply::Array(vec![bulk(&jid(1)), bulk(&jid(1))]));
    let snap = q.check_invariant(&mut c);
    assert_eq!(snap.sets["delayed"], [jid(1)]);
    assert!(snap.sets["wait"].is_empty());
    assert_eq!(snap.rows.keys().collect::<Vec<_>>(), [&jid(1)]);
    assert_eq!(holder(&mut c, &q, "k"), Some(jid(1)));
    let refused: Vec<_> = q.events(&mut c).into_iter().filter(|e| e[1] == "deduplicated").collect();
    assert_eq!(refused.len(), 4);
    assert!(refused.iter().all(|e| e[3] == jid(1) && e[6] == "refused"));
}

/// A holder's log, written with TRA.ADDLOG (no lease needed).
fn log_line_any(c: &mut Conn, q: &Q, id: &str) {
    let log = format!("emq:{{{}}}:log:{id}", q.0);
    let r = c.call(&[b"TRA.ADDLOG", b"2", q.job(id).as_bytes(), log.as_bytes(), b"line"]);
    assert_eq!(r, Reply::Int(1));
}

#[test]
fn the_bulk_add_dedups_against_the_queue_and_within_the_call() {
    let (_s, mut c, q) = queue_on_quiet_server("bulk");
    q.enqueue(&mut c, &jid(1), &[b"DEDUP", b"old"]);
    let (j2, j3, j4, j5) = (jid(2), jid(3), jid(4), jid(5));
    let r = c.call_v(&q.add_cmd(&[
        (&j2, "a", &["DEDUP", "old", "ALIAS", "k2"]),
        (&j3, "b", &["DEDUP", "new"]),
        (&j4, "c", &["DEDUP", "new", "DELAY", "+5000", "ALIAS", "k4"]),
        (&j5, "d", &["DEDUP", "old", "REPLACE"]),
    ]));
    assert_eq!(r, Reply::Array(vec![bulk(&jid(1)), Reply::Int(1), bulk(&j3), bulk(&jid(1))]));
    assert_eq!(holder(&mut c, &q, "new"), Some(j3.clone()));
    let snap = q.check_invariant(&mut c);
    assert_eq!(snap.rows.len(), 2);
    let ev = q.events(&mut c);
    // A refused producer's ALIAS is named in its event, and names no job.
    assert_eq!(
        ev[1],
        ["event", "deduplicated", "id", &jid(1), "dedup", "old", "refused", &j2, "alias", "k2"]
    );
    assert_eq!(ev[2][..4], ["event", "added", "id", &j3]);
    assert_eq!(ev[3], ["event", "deduplicated", "id", &j3, "dedup", "new", "refused", &j4, "alias", "k4"]);
    assert_eq!(c.call(&[b"EXISTS", q.k("alias").as_bytes()]), Reply::Int(0));
    assert_eq!(ev[4], ["event", "deduplicated", "id", &jid(1), "dedup", "old", "refused", &j5]);
}

/// A bulk add's duplicate of a live id is refused as ENQUEUE's is: with KEEPLAST while the
/// holder only waits (nothing kept, a `refused` event), and with EXTEND the TTL restarted.
#[test]
fn the_bulk_adds_duplicates_are_refused_as_enqueues_are() {
    let (_s, mut c, q) = queue_on_quiet_server("bulkdup");
    q.enqueue(&mut c, &jid(1), &[b"DEDUP", b"w", b"DEDUPTTL", b"1000"]);
    let before = c.call(&[b"PEXPIRETIME", dkey(&q, "w").as_bytes()]).int();
    let (j2, j3) = (jid(2), jid(3));
    let r = c.call_v(&q.add_cmd(&[
        (&j2, "a", &["DEDUP", "w", "KEEPLAST"]),
        (&j3, "b", &["DEDUP", "w", "DEDUPTTL", "500000", "EXTEND"]),
    ]));
    assert_eq!(r, Reply::Array(vec![bulk(&jid(1)), bulk(&jid(1))]));
    assert_eq!(kept(&mut c, &q, "w"), None, "the holder waits: nothing is kept");
    let after = c.call(&[b"PEXPIRETIME", dkey(&q, "w").as_bytes()]).int();
    assert!(after >= before + 400000, "EXTEND restarts the TTL: {before} then {after}");
    let ev = q.events(&mut c);
    assert_eq!(ev[1], ["event", "deduplicated", "id", &jid(1), "dedup", "w", "refused", &j2]);
    assert_eq!(ev[2], ["event", "deduplicated", "id", &jid(1), "dedup", "w", "refused", &j3]);
    assert_eq!(ev.len(), 3);

    // The holder active: in order, a kept job, an EXTEND, a later kept job (which drops the
    // TTL again, as its ENQUEUE would) ...
    assert_eq!(claim(&mut c, &q, "t"), jid(1));
    let pttl_w = |c: &mut Conn| pttl(c, &dkey(&q, "w"));
    let (j4, j5, j6, j7) = (jid(4), jid(5), jid(6), jid(7));
    let r = c.call_v(&q.add_cmd(&[
        (&j4, "a", &["DEDUP", "w", "KEEPLAST"]),
        (&j5, "b", &["DEDUP", "w", "DEDUPTTL", "500000", "EXTEND"]),
        (&j6, "c", &["DEDUP", "w", "KEEPLAST"]),
    ]));
    assert_eq!(r, Reply::Array(vec![bulk(&jid(1)), bulk(&jid(1)), bulk(&jid(1))]));
    assert_eq!(kept(&mut c, &q, "w"), Some(j6.clone()));
    assert_eq!(pttl_w(&mut c), -1);
    // ... and an EXTEND after the last kept job restarts it.
    let r = c.call_v(&q.add_cmd(&[
        (&j7, "d", &["DEDUP", "w", "KEEPLAST"]),
        (&jid(8), "e", &["DEDUP", "w", "DEDUPTTL", "600000", "EXTEND"]),
    ]));
    assert_eq!(r, Reply::Array(vec![bulk(&jid(1)), bulk(&jid(1))]));
    assert_eq!(kept(&mut c, &q, "w"), Some(j7.clone()));
    assert!(pttl_w(&mut c) > 500000, "the EXTEND after the kept job");

    // A job without KEEPLAST, then one with it whose row exists (another job's, so it is not
    // added): the first is refused as ENQUEUE refuses it, with its event; the kept job stays.
    assert_eq!(q.enqueue(&mut c, &jid(10), &[]), Reply::Int(1));
    let r = c
        .call_v(&q.add_cmd(&[(&jid(9), "f", &["DEDUP", "w"]), (&jid(10), "g", &["DEDUP", "w", "KEEPLAST"])]));
    assert_eq!(r, Reply::Array(vec![bulk(&jid(1)), Reply::Int(0)]));
    assert_eq!(kept(&mut c, &q, "w"), Some(j7));
    assert_eq!(
        q.last_event(&mut c),
        ["event", "deduplicated", "id", &jid(1), "dedup", "w", "refused", &jid(9)]
    );
}

#[test]
fn the_id_is_read_and_released_by_its_commands() {
    let (_s, mut c, q) = queue_on_quiet_server("cmds");
    assert_eq!(holder(&mut c, &q, "d"), None);
    let undedup = |c: &mut Conn, job: &[&[u8]]| {
        let key = dkey(&q, "d");
        let mut a: Vec<&[u8]> = vec![b"TRA.UNDEDUP", b"1", key.as_bytes()];
        if !job.is_empty() {
            a.push(b"IF");
        }
        a.extend_from_slice(job);
        c.call(&a)
    };
    assert_eq!(undedup(&mut c, &[]), Reply::Int(0));
    q.enqueue(&mut c, &jid(1), &[b"DEDUP", b"d"]);
    assert_eq!(undedup(&mut c, &[jid(2).as_bytes()]), Reply::Int(0), "names another job");
    assert_eq!(holder(&mut c, &q, "d"), Some(jid(1)));
    assert_eq!(undedup(&mut c, &[jid(1).as_bytes()]), Reply::Int(1));
    assert_eq!(holder(&mut c, &q, "d"), None);
    assert_eq!(q.enqueue(&mut c, &jid(2), &[b"DEDUP", b"d"]), Reply::Int(1), "free again");
    assert_eq!(undedup(&mut c, &[]), Reply::Int(1));
    assert_eq!(holder(&mut c, &q, "d"), None);
    // The job stays; its later finish finds the id gone and leaves the key a new job took.
    q.enqueue(&mut c, &jid(3), &[b"DEDUP", b"d"]);
    assert_eq!(claim(&mut c, &q, "t"), jid(1));
    assert_eq!(claim(&mut c, &q, "t"), jid(2));
    complete(&q, &mut c, &jid(2), "t", &[]);
    assert_eq!(holder(&mut c, &q, "d"), Some(jid(3)));
}

#[test]
fn dedup_refusals_write_nothing() {
    let (_s, mut c, q) = queue_on_quiet_server("refuse");
    q.enqueue(&mut c, &jid(1), &[b"DEDUP", b"k"]);
    let long = vec![b'a'; 257];
    unchanged(&mut c, |c| {
        let cases: Vec<(Vec<&[u8]>, &str)> = vec![
            (vec![b"DEDUP", b""], "EMQARG DEDUP must be 1..=256 bytes"),
            (vec![b"DEDUP", &long], "EMQARG DEDUP must be 1..=256 bytes"),
            (vec![b"DEDUP"], "EMQSHAPE option DEDUP needs a value"),
            (vec![b"DEDUP", b"a", b"DEDUPTTL", b"0"], "EMQARG DEDUPTTL must be 1..="),
            (vec![b"DEDUP", b"a", b"DEDUPTTL", b"x"], "EMQSHAPE DEDUPTTL is not an integer"),
            (vec![b"DEDUPTTL", b"5"], "EMQSHAPE DEDUPTTL, EXTEND, REPLACE and KEEPLAST go with DEDUP"),
            (vec![b"REPLACE"], "EMQSHAPE DEDUPTTL, EXTEND, REPLACE and KEEPLAST go with DEDUP"),
            (vec![b"KEEPLAST"], "EMQSHAPE DEDUPTTL, EXTEND, REPLACE and KEEPLAST go with DEDUP"),
            (vec![b"DEDUP", b"a", b"EXTEND"], "EMQSHAPE EXTEND goes with DEDUPTTL"),
            (
                vec![b"DEDUP", b"a", b"KEEPLAST", b"DEDUPTTL", b"5"],
                "EMQSHAPE KEEPLAST does not go with DEDUPTTL",
            ),
            (vec![b"DEDUP", b"a", b"KEEPLAST", b"KEEPLAST"], "EMQSHAPE option KEEPLAST given twice"),
            (vec![b"DEDUP", b"a", b"DEDUP", b"b"], "EMQSHAPE option DEDUP given twice"),
        ];
        for (opts, want) in &cases {
            let r = q.enqueue(c, &jid(2), opts);
            assert!(r.error().starts_with(want), "{want}: {r:?}");
            let mut a: Vec<&[u8]> = vec![b"+5", b"n", b"{}"];
            a.extend_from_slice(opts);
            let r = q.run(c, "EMQ.SCHEDULE", &jid(2), &a);
            assert!(r.error().starts_with(want), "{want}: {r:?}");
            let o: Vec<String> = opts.iter().map(|o| String::from_utf8_lossy(o).into_owned()).collect();
            let o: Vec<&str> = o.iter().map(String::as_str).collect();
            let r = c.call_v(&q.add_cmd(&[(&jid(3), "n", &[]), (&jid(2), "n", &o)]));
            assert!(r.error().starts_with(want), "{want}: {r:?}");
        }
        // The commands: an id out of range, a malformed job id, a wrong-typed key.
        let r = c.call(&[b"TRA.UNDEDUP", b"1", dkey(&q, "k").as_bytes(), b"IF", b"JOB!"]);
        assert!(r.error().starts_with("EMQID"), "{r:?}");
        let big = dkey(&q, &"a".repeat(257));
        assert!(c.call(&[b"TRA.UNDEDUP", b"1", big.as_bytes()]).error().starts_with("EMQARG DEDUP"));
        assert!(c.call(&[b"TRA.DEDUP", b"1", big.as_bytes()]).error().starts_with("EMQARG DEDUP"));
        for extra in [&[&b"a"[..], b"b"][..], &[b"IF"], &[b"IF", b"a", b"b"], &[b"JOB00000000001"]] {
            let key = dkey(&q, "k");
            let mut a: Vec<&[u8]> = vec![b"TRA.UNDEDUP", b"1", key.as_bytes()];
            a.extend_from_slice(extra);
            let r = c.call(&a);
            assert!(r.error().starts_with("EMQSHAPE"), "{extra:?}: {r:?}");
            // A word other than IF is named; IF with the wrong count of words gets the synopsis.
            let named = extra.first() != Some(&&b"IF"[..]);
            assert_eq!(r.error().contains("unknown option"), named, "{extra:?}: {r:?}");
        }
        let r = c.call(&[b"TRA.DEDUP", b"1", q.k("wait").as_bytes()]);
        assert!(r.error().starts_with("EMQLAYOUT"), "{r:?}");
    });
    // The id's key of another type: WRONGTYPE, before anything is written.
    c.call(&[b"HSET", dkey(&q, "h").as_bytes(), b"x", b"y"]);
    unchanged(&mut c, |c| {
        let r = q.enqueue(c, &jid(4), &[b"DEDUP", b"h"]);
        assert!(r.error().starts_with("WRONGTYPE"), "{r:?}");
        let r = c.call_v(&q.add_cmd(&[(&jid(4), "n", &[]), (&jid(5), "n", &["DEDUP", "h"])]));
        assert!(r.error().starts_with("WRONGTYPE"), "{r:?}");
        assert!(c.call(&[b"TRA.DEDUP", b"1", dkey(&q, "h").as_bytes()]).error().starts_with("WRONGTYPE"));
        assert!(c.call(&[b"TRA.UNDEDUP", b"1", dkey(&q, "h").as_bytes()]).error().starts_with("WRONGTYPE"));
    });
    assert_eq!(q.enqueue(&mut c, &jid(4), &[]), Reply::Int(1), "without DEDUP no key is opened");
}

#[test]
fn replicas_and_the_aof_hold_what_the_primary_holds() {
    let primary = Server::quiet_aof();
    let replica = Server::quiet();
    let mut p = primary.conn();
    let mut r = replica.follow(&primary);
    let q = Q::new("repl");
    q.enqueue(&mut p, &jid(1), &[b"DEDUP", b"a"]);
    q.enqueue(&mut p, &jid(2), &[b"DEDUP", b"b", b"DEDUPTTL", b"100000"]);
    q.enqueue(&mut p, &jid(3), &[b"DEDUP", b"b", b"DEDUPTTL", b"200000", b"EXTEND"]);
    schedule(&mut p, &q, &jid(4), "+100000", &[b"DEDUP", b"c", b"DEDUPTTL", b"300000"]);
    schedule(&mut p, &q, &jid(5), "+100000", &[b"DEDUP", b"c", b"DEDUPTTL", b"300000", b"REPLACE"]);
    p.call_v(&q.add_cmd(&[(&jid(6), "x", &["DEDUP", "d"]), (&jid(7), "y", &["DEDUP", "a"])]));
    assert_eq!(claim(&mut p, &q, "t"), jid(1));
    complete(&q, &mut p, &jid(1), "t", &[]);
    p.call(&[b"TRA.UNDEDUP", b"1", dkey(&q, "d").as_bytes()]);
    // KEEPLAST: a job kept (the id's TTL dropped), and a scheduled one kept, then made.
    q.enqueue(&mut p, &jid(11), &[b"DEDUP", b"k1", b"DEDUPTTL", b"600000"]);
    q.enqueue(&mut p, &jid(12), &[b"DEDUP", b"k2"]);
    claim_all(&q, &mut p, "u");
    keep(&mut p, &q, 13, 11, "k1", &[b"ALIAS", b"a13"]);
    assert_eq!(schedule(&mut p, &q, &jid(14), "+90000", &[b"DEDUP", b"k2", b"KEEPLAST"]), bulk(&jid(12)));
    complete(&q, &mut p, &jid(12), "u", &[]);
    assert_eq!(p.call(&[b"WAIT", b"1", b"5000"]), Reply::Int(1));
    let d = digest(&mut p);
    assert_eq!(d, digest(&mut r), "rows, ids and their expiry times, kept jobs agree");
    assert_eq!(holder(&mut r, &q, "c"), Some(jid(5)));
    assert_eq!((kept(&mut r, &q, "k1"), holder(&mut r, &q, "k2")), (Some(jid(13)), Some(jid(14))));
    // The AOF replays to the same keyspace, expiry times included.
    let primary = primary.restart();
    let mut p = primary.conn();
    assert_eq!(digest(&mut p), d);
}

#[test]
fn acl_judges_the_ids_key_as_the_callers() {
    let s = Server::quiet();
    let mut admin = s.conn();
    let q = Q::new("acl");
    let mut w = s.user(
        &mut admin,
        "w",
        "-@all +@emq resetkeys %R~{emq}:* ~emq:{acl}:wait ~emq:{acl}:prio ~emq:{acl}:active \
         ~emq:{acl}:completed ~emq:{acl}:delayed ~emq:{acl}:events ~emq:{acl}:job:* \
         ~emq:{acl}:dedup:mine",
    );
    unchanged(&mut admin, |_| {
        assert!(q.enqueue(&mut w, &jid(1), &[b"DEDUP", b"theirs"]).error().starts_with("NOPERM"));
        let r = w.call_v(&q.add_cmd(&[(&jid(1), "n", &[]), (&jid(2), "n", &["DEDUP", "theirs"])]));
        assert!(r.error().starts_with("NOPERM"), "{r:?}");
    });
    assert_eq!(q.enqueue(&mut w, &jid(1), &[b"DEDUP", b"mine"]), Reply::Int(1));
    assert_eq!(q.enqueue(&mut w, &jid(2), &[]), Reply::Int(1));
    // Finishing a job whose id the caller may not touch: NOPERM, nothing written.
    q.enqueue(&mut admin, &jid(3), &[b"DEDUP", b"theirs"]);
    for _ in 0..3 {
        claim(&mut admin, &q, "t");
    }
    unchanged(&mut admin, |_| assert!(complete(&q, &mut w, &jid(3), "t", &[]).error().starts_with("NOPERM")));
    assert_eq!(complete(&q, &mut w, &jid(1), "t", &[]), Reply::Int(1));
    assert_eq!(complete(&q, &mut w, &jid(2), "t", &[]), Reply::Int(1), "a job without DEDUP opens no id");
}

#[test]
fn keeplast_keeps_the_last_duplicate_until_the_active_holder_finishes() {
    let (_s, mut c, q) = queue_on_quiet_server("keep");
    assert_eq!(q.enqueue(&mut c, &jid(1), &[b"DEDUP", b"d", b"KEEPLAST"]), Reply::Int(1));
    // The holder waits: a plain duplicate, nothing kept.
    assert_eq!(q.enqueue(&mut c, &jid(2), &[b"DEDUP", b"d", b"KEEPLAST"]), bulk(&jid(1)));
    assert_eq!(kept(&mut c, &q, "d"), None);
    assert_eq!(claim(&mut c, &q, "t"), jid(1));
    // The holder is active: each duplicate with KEEPLAST is kept in place of the one before.
    keep(&mut c, &q, 3, 1, "d", &[b"PRIORITY", b"5", b"ALIAS", b"a3"]);
    keep(&mut c, &q, 4, 1, "d", &[b"ALIAS", b"a4", b"ATTEMPTS", b"3", b"OPTS", b"{\"o\":1}"]);
    // One without KEEPLAST is refused and leaves the kept job alone.
    assert_eq!(q.enqueue(&mut c, &jid(5), &[b"DEDUP", b"d"]), bulk(&jid(1)));
    assert_eq!(kept(&mut c, &q, "d"), Some(jid(4)));
    let snap = q.check_invariant(&mut c);
    assert_eq!(snap.rows.len(), 1, "a kept job has no row");
    assert_eq!(c.call(&[b"HLEN", q.k("alias").as_bytes()]), Reply::Int(0), "nor an alias entry");
    let ev = q.events(&mut c);
    let dedup = |what: &str, id: u64| -> Vec<String> {
        ["event", "deduplicated", "id", &jid(1), "dedup", "d", what, &jid(id)].map(String::from).to_vec()
    };
    assert_eq!(ev[1], dedup("refused", 2));
    assert_eq!(ev[3][..8], dedup("kept", 3)[..]);
    assert_eq!(ev[3][8..], ["alias", "a3"]);
    assert_eq!(ev[4][..8], dedup("kept", 4)[..]);
    assert_eq!(ev[5], dedup("refused", 5));
    // The holder completes: the last kept job is made, ready, holding the id with no TTL.
    assert_eq!(complete(&q, &mut c, &jid(1), "t", &[]), Reply::Int(1));
    assert_eq!(kept(&mut c, &q, "d"), None);
    assert_eq!(holder(&mut c, &q, "d"), Some(jid(4)));
    assert_eq!(pttl(&mut c, &dkey(&q, "d")), -1);
    let snap = q.check_invariant(&mut c);
    assert_eq!(snap.sets["wait"], [jid(4)]);
    for (f, v) in
        [("st", "wait"), ("n", "job"), ("d", "{}"), ("a", "3"), ("o", "{\"o\":1}"), ("k", "a4"), ("de", "d")]
    {
        assert_eq!(snap.field(&jid(4), f).as_deref(), Some(v), "{f}");
    }
    assert!(snap.field(&jid(4), "p").is_none(), "the kept job is the last one given, whole");
    let r = c.call(&[b"HGET", q.k("alias").as_bytes(), b"a4"]);
    assert_eq!(r, bulk(&jid(4)));
    // Its `added` event follows the holder's `completed`, and the queue is not drained.
    let ev = q.events(&mut c);
    let tail: Vec<&str> = ev[ev.len() - 2..].iter().map(|e| e[1].as_str()).collect();
    assert_eq!(tail, ["completed", "added"]);
    assert_eq!(ev.last().unwrap()[..4], ["event", "added", "id", &jid(4)]);
    // It runs as any job; its finish, with nothing kept, releases the id.
    assert_eq!(claim(&mut c, &q, "u"), jid(4));
    assert_eq!(complete(&q, &mut c, &jid(4), "u", &[]), Reply::Int(1));
    assert_eq!(holder(&mut c, &q, "d"), None);
    assert_eq!(q.last_event(&mut c)[1], "drained");
}

#[test]
fn every_finish_makes_the_kept_job_and_every_delete_drops_it() {
    let (_s, mut c, q) = queue_on_quiet_server("kpaths");
    let mut n = 0;
    // A holder of `d`, active under `t` (alone in the queue), with a job kept for it.
    let mut held = |c: &mut Conn, d: &str, opts: &[&[u8]]| -> (String, String) {
        n += 2;
        let mut a: Vec<&[u8]> = vec![b"DEDUP", d.as_bytes()];
        a.extend_from_slice(opts);
        assert_eq!(q.enqueue(c, &jid(n - 1), &a), Reply::Int(1));
        let r = q.run(c, "EMQ.CLAIM", "", &[b"t", b"60000"]);
        assert_eq!(r.array()[0].array()[0].str(), jid(n - 1));
        keep(c, &q, n, n - 1, d, &[]);
        (jid(n - 1), jid(n))
    };
    let made = |c: &mut Conn, d: &str, next: &str| {
        assert_eq!(kept(c, &q, d), None);
        assert_eq!(holder(c, &q, d).as_deref(), Some(next));
        q.check_invariant(c).state_of(next)
    };
    // FAIL: a retry keeps both; the final failure makes the kept job.
    let (a, b) = held(&mut c, "f", &[b"ATTEMPTS", b"2"]);
    assert_eq!(q.run(&mut c, "EMQ.FAIL", &a, &[b"t", b"no"]), Reply::Simple("retry".into()));
    assert_eq!(kept(&mut c, &q, "f"), Some(b.clone()));
    claim(&mut c, &q, "t");
    assert_eq!(q.run(&mut c, "EMQ.FAIL", &a, &[b"t", b"no", b"KEEP", b"0"]), Reply::Simple("failed".into()));
    assert_eq!(made(&mut c, "f", &b).as_deref(), Some("wait"));
    claim(&mut c, &q, "t");
    complete(&q, &mut c, &b, "t", &[]);
    // COMPLETE under KEEP 0.
    let (a, b) = held(&mut c, "c0", &[]);
    assert_eq!(complete(&q, &mut c, &a, "t", &[b"KEEP", b"0"]), Reply::Int(1));
    assert_eq!(made(&mut c, "c0", &b).as_deref(), Some("wait"));
    claim(&mut c, &q, "t");
    complete(&q, &mut c, &b, "t", &[]);
    // TRA.COMPLETES.
    let (a, b) = held(&mut c, "cs", &[]);
    let r = q.run(&mut c, "TRA.COMPLETES", "", &[a.as_bytes(), b"t", b"ok"]);
    assert_eq!(r, Reply::Array(vec![Reply::Int(1)]));
    assert_eq!(made(&mut c, "cs", &b).as_deref(), Some("wait"));
    claim(&mut c, &q, "t");
    complete(&q, &mut c, &b, "t", &[]);
    // TRA.COMPLETENEXT: the kept job is made, and fetched by the same call.
    let (a, b) = held(&mut c, "cn", &[]);
    let r = q.run(&mut c, "TRA.COMPLETENEXT", &a, &[b"t", b"ok", b"60000"]);
    assert_eq!(r.array()[0], Reply::Int(1));
    assert_eq!(r.array()[1].array()[0].array()[0].str(), b);
    assert_eq!(made(&mut c, "cn", &b).as_deref(), Some("active"));
    complete(&q, &mut c, &b, "t", &[]);
    // TRA.COMPLETESNEXT: the same.
    let (a, b) = held(&mut c, "csn", &[]);
    let mut v = q.cmd(
        "TRA.COMPLETESNEXT",
        "",
        &["wait", "prio", "active", "delayed", "completed", "meta", "events"],
        &[],
    );
    v.extend([
        b"1".to_vec(),
        q.job(&a).into_bytes(),
        b"t".to_vec(),
        b"ok".to_vec(),
        b"t".to_vec(),
        b"60000".to_vec(),
    ]);
    let r = c.call_v(&v);
    assert_eq!(r.array()[1].array()[0].array()[0].str(), b, "{r:?}");
    assert_eq!(made(&mut c, "csn", &b).as_deref(), Some("active"));
    complete(&q, &mut c, &b, "t", &[]);
    // STALLED's final failure, after the lease ran out.
    let (a, b) = held(&mut c, "st", &[]);
    c.call_v(&q.cmd("EMQ.EXTEND", &a, &keys_of("EMQ.EXTEND"), &[b"t", b"1"]));
    std::thread::sleep(std::time::Duration::from_millis(5));
    let r = q.run(&mut c, "EMQ.STALLED", "", &[b"MAXSTALLS", b"0"]);
    assert_eq!(r.array()[1].strings(), std::slice::from_ref(&a));
    assert_eq!(made(&mut c, "st", &b).as_deref(), Some("wait"));
    claim(&mut c, &q, "t");
    complete(&q, &mut c, &b, "t", &[]);
    // A client's delete of the holder drops the kept job with the id: TRA.REMOVE …
    let (a, b) = held(&mut c, "r", &[]);
    let r = c.call_v(&q.cmd("TRA.REMOVE", &a, &keys_of("TRA.REMOVE"), &[b"FORCE"]));
    assert_eq!(r, Reply::Int(1));
    assert_eq!((kept(&mut c, &q, "r"), holder(&mut c, &q, "r")), (None, None));
    assert!(!q.check_invariant(&mut c).rows.contains_key(&b));
    // … and TRA.UNDEDUP, the holder left as it is.
    let (a, _) = held(&mut c, "u", &[]);
    assert_eq!(c.call(&[b"TRA.UNDEDUP", b"1", dkey(&q, "u").as_bytes()]), Reply::Int(1));
    assert_eq!(kept(&mut c, &q, "u"), None);
    assert_eq!(complete(&q, &mut c, &a, "t", &[]), Reply::Int(1));
    assert_eq!(holder(&mut c, &q, "u"), None);
    // … and TRA.OBLITERATE: no key of the queue is left.
    held(&mut c, "ob", &[]);
    let mut ob: Vec<Vec<u8>> = vec![b"TRA.OBLITERATE".to_vec(), b"8".to_vec()];
    for r in ["wait", "prio", "active", "delayed", "completed", "failed", "meta", "events"] {
        ob.push(q.k(r).into_bytes());
    }
    ob.push(b"FORCE".to_vec());
    assert_eq!(c.call_v(&ob), Reply::Int(0));
    assert_eq!(c.call(&[b"KEYS", b"emq:{kpaths}:*"]), Reply::Array(vec![]));
}

#[test]
fn a_kept_job_keeps_its_delay_and_the_bulk_add_keeps_its_last() {
    let (_s, mut c, q) = queue_on_quiet_server("kdelay");
    let now = |c: &mut Conn| {
        let t = c.call(&[b"TIME"]).strings();
        t[0].parse::<i64>().unwrap() * 1000 + t[1].parse::<i64>().unwrap() / 1000
    };
    // The holder took the id with a TTL: keeping a job drops it, so that it outlives the holder.
    q.enqueue(&mut c, &jid(1), &[b"DEDUP", b"d", b"DEDUPTTL", b"600000"]);
    assert_eq!(claim(&mut c, &q, "t"), jid(1));
    assert!(pttl(&mut c, &dkey(&q, "d")) > 0);
    assert_eq!(schedule(&mut c, &q, &jid(2), "+60000", &[b"DEDUP", b"d", b"KEEPLAST"]), bulk(&jid(1)));
    assert_eq!(pttl(&mut c, &dkey(&q, "d")), -1);
    let delay: i64 = c.call(&[b"HGET", q.k("kept:d").as_bytes(), b"delay"]).str().parse().unwrap();
    assert!((59000..=60000).contains(&delay), "{delay}");
    // Made delayed, due its delay after the holder's finish, with a `delayed` event.
    let before = now(&mut c);
    complete(&q, &mut c, &jid(1), "t", &[]);
    let after = now(&mut c);
    let snap = q.check_invariant(&mut c);
    assert_eq!(snap.sets["delayed"], [jid(2)]);
    let due =
        c.call(&[b"ZSCORE", q.k("delayed").as_bytes(), jid(2).as_bytes()]).str().parse::<i64>().unwrap();
    assert!(due >= before + delay && due <= after + delay, "{before} {due} {after}");
    assert_eq!(q.last_event(&mut c)[..4], ["event", "delayed", "id", &jid(2)]);
    assert_eq!(holder(&mut c, &q, "d"), Some(jid(2)));

    // TRA.ADD against an active holder: the last job of the call with KEEPLAST is kept, the
    // others are refused; a first job without KEEPLAST does not stop a later one keeping.
    q.enqueue(&mut c, &jid(10), &[b"DEDUP", b"e"]);
    assert_eq!(claim(&mut c, &q, "u"), jid(10));
    let r = c.call_v(&q.add_cmd(&[
        (&jid(11), "a", &["DEDUP", "e"]),
        (&jid(12), "b", &["DEDUP", "e", "KEEPLAST", "LIFO"]),
        (&jid(13), "c", &["DEDUP", "e"]),
        (&jid(14), "d", &["DEDUP", "e", "KEEPLAST", "PRIORITY", "2"]),
        (&jid(15), "e", &["DEDUP", "e"]),
    ]));
    assert_eq!(r, Reply::Array(vec![bulk(&jid(10)); 5]));
    assert_eq!(kept(&mut c, &q, "e"), Some(jid(14)));
    let ev = q.events(&mut c);
    let words: Vec<(&str, &str)> =
        ev[ev.len() - 5..].iter().map(|e| (e[6].as_str(), e[7].as_str())).collect();
    let refused = |n| ("refused", jid(n));
    let want = [refused(11), refused(12), refused(13), ("kept", jid(14)), refused(15)];
    assert_eq!(words, want.iter().map(|(w, id)| (*w, id.as_str())).collect::<Vec<_>>());
    complete(&q, &mut c, &jid(10), "u", &[]);
    let snap = q.check_invariant(&mut c);
    assert_eq!(snap.sets["prio"], [jid(14)]);
    assert_eq!(snap.field(&jid(14), "n").as_deref(), Some("d"));
    // A kept job with LIFO goes to the front of wait.
    q.enqueue(&mut c, &jid(20), &[]);
    q.enqueue(&mut c, &jid(21), &[b"DEDUP", b"l"]);
    let r = q.run(&mut c, "EMQ.CLAIM", "", &[b"w", b"60000", b"COUNT", b"3"]);
    assert_eq!(r.array().len(), 3);
    let r = c.call_v(&q.add_cmd(&[(&jid(22), "l", &["DEDUP", "l", "KEEPLAST", "LIFO"])]));
    assert_eq!(r, Reply::Array(vec![bulk(&jid(21))]));
    q.enqueue(&mut c, &jid(23), &[]);
    complete(&q, &mut c, &jid(21), "w", &[]);
    assert_eq!(q.check_invariant(&mut c).sets["wait"], [jid(23), jid(22)], "wait: back first, front last");
}

#[test]
fn a_kept_job_whose_id_or_alias_is_taken_is_dropped_and_refusals_write_nothing() {
    let (_s, mut c, q) = queue_on_quiet_server("kdrop");
    // Its id taken meanwhile: dropped, the id released.
    q.enqueue(&mut c, &jid(1), &[b"DEDUP", b"d"]);
    claim(&mut c, &q, "t");
    keep(&mut c, &q, 2, 1, "d", &[]);
    q.enqueue(&mut c, &jid(2), &[]);
    complete(&q, &mut c, &jid(1), "t", &[]);
    assert_eq!((kept(&mut c, &q, "d"), holder(&mut c, &q, "d")), (None, None));
    assert!(
        q.check_invariant(&mut c).field(&jid(2), "de").is_none(),
        "the job made by ENQUEUE is left alone"
    );
    claim(&mut c, &q, "t");
    complete(&q, &mut c, &jid(2), "t", &[]);
    // Its ALIAS taken meanwhile: the same.
    q.enqueue(&mut c, &jid(3), &[b"DEDUP", b"d"]);
    claim(&mut c, &q, "t");
    keep(&mut c, &q, 4, 3, "d", &[b"ALIAS", b"x"]);
    q.enqueue(&mut c, &jid(5), &[b"ALIAS", b"x"]);
    complete(&q, &mut c, &jid(3), "t", &[]);
    assert_eq!((kept(&mut c, &q, "d"), holder(&mut c, &q, "d")), (None, None));
    assert!(!q.check_invariant(&mut c).rows.contains_key(&jid(4)));
    // A kept hash that is not a whole job (written by a client: no data, a delay that is not
    // a number, an id that is not an id): dropped, the id released.
    for (n, fields) in [
        (20, &[&b"id"[..], b"JOB00000000021", b"n", b"job"][..]),
        (22, &[b"id", b"JOB00000000021", b"n", b"job", b"d", b"{}", b"delay", b"soon"]),
        (24, &[b"id", b"JOB!", b"n", b"job", b"d", b"{}"]),
    ] {
        q.enqueue(&mut c, &jid(n), &[b"DEDUP", b"m"]);
        claim_all(&q, &mut c, "t");
        let key = q.k("kept:m");
        let mut argv: Vec<&[u8]> = vec![b"HSET", key.as_bytes()];
        argv.extend_from_slice(fields);
        c.call(&argv);
        assert_eq!(complete(&q, &mut c, &jid(n), "t", &[]), Reply::Int(1));
        assert_eq!((kept(&mut c, &q, "m"), holder(&mut c, &q, "m")), (None, None));
        assert!(!q.check_invariant(&mut c).rows.contains_key(&jid(21)));
    }
    // Its key of another type: a producer keeping is refused, nothing written; a finish
    // leaves the key alone and releases the id.
    q.enqueue(&mut c, &jid(6), &[b"DEDUP", b"w"]);
    claim_all(&q, &mut c, "t");
    c.call(&[b"SET", q.k("kept:w").as_bytes(), b"x"]);
    unchanged(&mut c, |c| {
        let r = q.enqueue(c, &jid(7), &[b"DEDUP", b"w", b"KEEPLAST"]);
        assert!(r.error().starts_with("WRONGTYPE"), "{r:?}");
        let r = c.call_v(&q.add_cmd(&[(&jid(7), "n", &["DEDUP", "w", "KEEPLAST"])]));
        assert!(r.error().starts_with("WRONGTYPE"), "{r:?}");
    });
    assert_eq!(complete(&q, &mut c, &jid(6), "t", &[]), Reply::Int(1));
    assert_eq!(holder(&mut c, &q, "w"), None);
    assert_eq!(c.call(&[b"GET", q.k("kept:w").as_bytes()]), bulk("x"));
    // A finish that may not write the keys the kept job goes to: NOPERM, nothing written.
    let mut w = _s.user(
        &mut c,
        "w",
        "-@all +@emq resetkeys %R~{emq}:* ~emq:{kdrop}:active ~emq:{kdrop}:completed \
         ~emq:{kdrop}:events ~emq:{kdrop}:job:* ~emq:{kdrop}:dedup:*",
    );
    q.enqueue(&mut c, &jid(8), &[b"DEDUP", b"a"]);
    claim_all(&q, &mut c, "t");
    keep(&mut c, &q, 9, 8, "a", &[]);
    unchanged(&mut c, |_| {
        let r = complete(&q, &mut w, &jid(8), "t", &[]);
        assert!(r.error().starts_with("NOPERM"), "{r:?}");
    });
    assert_eq!(complete(&q, &mut c, &jid(8), "t", &[]), Reply::Int(1));
    assert_eq!(holder(&mut c, &q, "a"), Some(jid(9)));
}

/// A kept job's EXPIRE holds once it is made: upkeep fails it if no claim takes it by then.
#[test]
fn a_kept_job_made_with_an_expire_is_failed_by_upkeep_in_time() {
    let s = Server::installed();
    let mut c = s.conn();
    let q = Q::new("kexp");
    q.enqueue(&mut c, &jid(1), &[b"DEDUP", b"d"]);
    assert_eq!(claim(&mut c, &q, "t"), jid(1));
    keep(&mut c, &q, 2, 1, "d", &[b"EXPIRE", b"+300"]);
    assert_eq!(complete(&q, &mut c, &jid(1), "t", &[]), Reply::Int(1));
    assert_eq!(q.snapshot(&mut c).state_of(&jid(2)).as_deref(), Some("wait"));
    wait_for(|| q.snapshot(&mut c).state_of(&jid(2)).as_deref() == Some("failed"), "upkeep fails it");
    let snap = q.check_invariant(&mut c);
    assert_eq!(snap.field(&jid(2), "e").as_deref(), Some("expired"));
    assert_eq!(holder(&mut c, &q, "d"), None, "its failure released the id");
}

/// Two holders finished by one call, each with a job kept under the same id (or the same
/// ALIAS): the first is made, the second finds it taken when its turn comes, and is dropped.
#[test]
fn one_call_finishing_two_holders_makes_one_of_two_kept_jobs_with_one_id_or_alias() {
    let (_s, mut c, q) = queue_on_quiet_server("ktwice");
    q.enqueue(&mut c, &jid(1), &[b"DEDUP", b"a"]);
    q.enqueue(&mut c, &jid(3), &[b"DEDUP", b"b"]);
    assert_eq!(claim_all(&q, &mut c, "t").len(), 2);
    // The same branded id kept for both.
    keep(&mut c, &q, 9, 1, "a", &[b"OPTS", b"first"]);
    keep(&mut c, &q, 9, 3, "b", &[b"OPTS", b"second"]);
    let r =
        q.run(&mut c, "TRA.COMPLETES", "", &[jid(1).as_bytes(), b"t", b"ok", jid(3).as_bytes(), b"t", b"ok"]);
    assert_eq!(r, Reply::Array(vec![Reply::Int(1), Reply::Int(1)]));
    let snap = q.check_invariant(&mut c);
    assert_eq!(snap.sets["wait"], [jid(9)]);
    assert_eq!(snap.field(&jid(9), "o").as_deref(), Some("first"));
    assert_eq!((holder(&mut c, &q, "a"), holder(&mut c, &q, "b")), (Some(jid(9)), None));
    assert_eq!((kept(&mut c, &q, "a"), kept(&mut c, &q, "b")), (None, None));
    // The same ALIAS kept for both.
    q.enqueue(&mut c, &jid(11), &[b"DEDUP", b"c"]);
    q.enqueue(&mut c, &jid(13), &[b"DEDUP", b"e"]);
    assert_eq!(claim_all(&q, &mut c, "u").len(), 3);
    keep(&mut c, &q, 12, 11, "c", &[b"ALIAS", b"x"]);
    keep(&mut c, &q, 14, 13, "e", &[b"ALIAS", b"x"]);
    let r = q.run(
        &mut c,
        "TRA.COMPLETES",
        "",
        &[jid(11).as_bytes(), b"u", b"ok", jid(13).as_bytes(), b"u", b"ok"],
    );
    assert_eq!(r, Reply::Array(vec![Reply::Int(1), Reply::Int(1)]));
    let snap = q.check_invariant(&mut c);
    assert_eq!(snap.sets["wait"], [jid(12)]);
    assert!(!snap.rows.contains_key(&jid(14)));
    assert_eq!(c.call(&[b"HGET", q.k("alias").as_bytes(), b"x"]), bulk(&jid(12)));
    assert_eq!(holder(&mut c, &q, "e"), None);
}

/// The holder's finish deletes its row at once and, with it, the last entry of the alias hash
/// (the hash goes): the kept job's ALIAS then makes the hash anew. Memcheck watches the
/// handles the plan opened on the hash being closed.
#[test]
fn a_kept_job_named_by_alias_survives_its_holder_emptying_the_alias_hash() {
    let (_s, mut c, q) = queue_on_quiet_server("kalias");
    q.enqueue(&mut c, &jid(1), &[b"DEDUP", b"d", b"ALIAS", b"ha"]);
    assert_eq!(claim(&mut c, &q, "t"), jid(1));
    keep(&mut c, &q, 2, 1, "d", &[b"ALIAS", b"ja"]);
    assert_eq!(complete(&q, &mut c, &jid(1), "t", &[b"KEEP", b"0"]), Reply::Int(1));
    let all = c.call(&[b"HGETALL", q.k("alias").as_bytes()]);
    assert_eq!(all.strings(), ["ja".to_string(), jid(2)]);
    assert_eq!(q.check_invariant(&mut c).sets["wait"], [jid(2)]);
}
