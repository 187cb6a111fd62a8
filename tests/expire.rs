//! `EXPIRE when` on ENQUEUE and SCHEDULE against a real server: a job that no CLAIM has taken
//! by `when` is never handed out; it fails for good with error `expired` — by the CLAIM that
//! meets it (ready or due), or by upkeep on its own (waiting, by priority, delayed), also after
//! a restart — and the replica holds what the primary holds. Bad EXPIRE values are refused and
//! write nothing.
// A test may panic: that is how it fails. The module's own rules are for src/.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

use trafikey_support::*;

fn claim(c: &mut Conn, q: &Q, count: &str) -> Vec<String> {
    let r = q.run(c, "EMQ.CLAIM", "", &[b"w", b"60000", b"COUNT", count.as_bytes()]);
    r.array().iter().map(|j| j.array()[0].str()).collect()
}

/// The `failed` events of the stream, as (id, error).
fn failures(c: &mut Conn, q: &Q) -> Vec<(String, String)> {
    let r = c.call(&[b"XRANGE", q.k("events").as_bytes(), b"-", b"+"]);
    r.array()
        .iter()
        .filter_map(|e| {
            let f = e.array()[1].strings();
            let get = |k: &str| f.chunks(2).find(|kv| kv[0] == k).map(|kv| kv[1].clone());
            (get("event").as_deref() == Some("failed"))
                .then(|| (get("id").unwrap_or_default(), get("error").unwrap_or_default()))
        })
        .collect()
}

fn server_ms(c: &mut Conn) -> i64 {
    let t = c.call(&[b"TIME"]).strings();
    t[0].parse::<i64>().unwrap_or(0) * 1000 + t[1].parse::<i64>().unwrap_or(0) / 1000
}

fn expired(snap: &Snapshot, id: &str) -> bool {
    snap.state_of(id).as_deref() == Some("failed") && snap.field(id, "e").as_deref() == Some("expired")
}

#[test]
fn claim_never_hands_out_an_expired_job_and_fails_it() {
    let s = Server::quiet();
    let mut c = s.conn();
    let q = Q::new("exp");
    let now = server_ms(&mut c);
    let later = (now + 600_000).to_string();
    // Expires at the creating call's own instant: expired from the start (the boundary:
    // taken *by* its time means before it).
    assert_eq!(q.enqueue(&mut c, &jid(1), &[b"EXPIRE", b"+0"]), Reply::Int(1));
    assert_eq!(q.enqueue(&mut c, &jid(2), &[b"EXPIRE", later.as_bytes()]), Reply::Int(1));
    assert_eq!(q.enqueue(&mut c, &jid(3), &[b"PRIORITY", b"3", b"EXPIRE", b"1"]), Reply::Int(1));
    assert_eq!(q.run(&mut c, "EMQ.SCHEDULE", &jid(4), &[b"+0", b"n", b"d", b"EXPIRE", b"+0"]), Reply::Int(1));
    assert_eq!(q.enqueue(&mut c, &jid(5), &[]), Reply::Int(1));
    let job = c.call(&[b"TRA.JOB", b"1", q.job(&jid(2)).as_bytes()]);
    let fields = job.array();
    let at = fields.chunks(2).find(|kv| kv[0].str() == "expire").map(|kv| kv[1].clone());
    assert_eq!(at, Some(Reply::Int(now + 600_000)), "TRA.JOB shows the EXPIRE time");

    // One CLAIM meets all five: the due one (4) and the picked ones (1, 3) fail, 2 and 5 come.
    let got = claim(&mut c, &q, "5");
    assert_eq!(got, [jid(2), jid(5)]);
    let snap = q.check_invariant(&mut c);
    for id in [jid(1), jid(3), jid(4)] {
        assert!(expired(&snap, &id), "{id}: {:?}", snap.state_of(&id));
    }
    let mut f = failures(&mut c, &q);
    f.sort();
    assert_eq!(f, [jid(1), jid(3), jid(4)].map(|id| (id, "expired".to_string())));
    assert_eq!(info_field(&mut c, "trafikey", "trafikey_expired"), "3");
    // Failed for good: nothing comes back.
    assert!(claim(&mut c, &q, "5").is_empty());
}

/// Expired jobs do not use up a claim: one that met them takes more, and hands out every job
/// it took.
#[test]
fn a_claim_short_for_expired_jobs_takes_and_hands_out_more() {
    let (_s, mut c, q) = queue_on_quiet_server("expmore");
    for n in 1..=3 {
        assert_eq!(q.enqueue(&mut c, &jid(n), &[]), Reply::Int(1));
    }
    for n in 4..=5 {
        assert_eq!(q.enqueue(&mut c, &jid(n), &[b"EXPIRE", b"+0", b"LIFO"]), Reply::Int(1));
    }
    // wait: 5 4 1 2 3, the first two expired; a claim of 3 meets them, then takes 1, 2, 3.
    assert_eq!(claim(&mut c, &q, "3"), [jid(1), jid(2), jid(3)]);
    let snap = q.check_invariant(&mut c);
    assert_eq!(snap.sets["active"].len(), 3);
    assert!(expired(&snap, &jid(4)) && expired(&snap, &jid(5)));
}

/// A job failed for expiring counts for `keep-failed` as a failed job does: the oldest beyond
/// the cap go, and with 0 it is itself deleted at once.
#[test]
fn an_expired_job_counts_for_keep_failed() {
    let (_s, mut c, q) = queue_on_quiet_server("expkeep");
    c.call(&[b"CONFIG", b"SET", b"trafikey.keep-failed", b"1"]);
    assert_eq!(q.enqueue(&mut c, &jid(1), &[b"EXPIRE", b"+0"]), Reply::Int(1));
    assert!(claim(&mut c, &q, "1").is_empty());
    assert_eq!(q.enqueue(&mut c, &jid(2), &[b"EXPIRE", b"+0"]), Reply::Int(1));
    assert!(claim(&mut c, &q, "1").is_empty());
    let snap = q.check_invariant(&mut c);
    assert_eq!(snap.sets["failed"], [jid(2)], "the cap of 1 keeps the newer");
    c.call(&[b"CONFIG", b"SET", b"trafikey.keep-failed", b"0"]);
    assert_eq!(q.enqueue(&mut c, &jid(3), &[b"EXPIRE", b"+0"]), Reply::Int(1));
    assert!(claim(&mut c, &q, "1").is_empty());
    let snap = q.check_invariant(&mut c);
    assert_eq!(snap.sets["failed"], [jid(2)], "0 deletes the job failing, not the older ones");
    assert!(!snap.rows.contains_key(&jid(3)));
    assert_eq!(failures(&mut c, &q).len(), 3, "each with its event");
}

#[test]
fn upkeep_fails_what_expires_waiting_by_itself() {
    let s = Server::installed();
    let mut c = s.conn();
    let q = Q::new("lapse");
    assert_eq!(q.enqueue(&mut c, &jid(1), &[b"EXPIRE", b"+200"]), Reply::Int(1));
    assert_eq!(q.enqueue(&mut c, &jid(2), &[b"PRIORITY", b"2", b"EXPIRE", b"+200"]), Reply::Int(1));
    assert_eq!(
        q.run(&mut c, "EMQ.SCHEDULE", &jid(3), &[b"+600000", b"n", b"d", b"EXPIRE", b"+200"]),
        Reply::Int(1)
    );
    assert_eq!(q.enqueue(&mut c, &jid(4), &[b"EXPIRE", b"+600000"]), Reply::Int(1));
    assert_eq!(q.enqueue(&mut c, &jid(5), &[b"EXPIRE", b"+200"]), Reply::Int(1));
    assert_eq!(claim(&mut c, &q, "1"), [jid(1)], "claimed before its time: it is the holder's");
    wait_for(
        || {
            let snap = q.snapshot(&mut c);
            expired(&snap, &jid(2)) && expired(&snap, &jid(3)) && expired(&snap, &jid(5))
        },
        "upkeep fails the jobs that expired waiting",
    );
    let snap = q.check_invariant(&mut c);
    assert_eq!(snap.state_of(&jid(1)).as_deref(), Some("active"), "a claimed job does not expire");
    assert_eq!(snap.state_of(&jid(4)).as_deref(), Some("wait"));
    assert_eq!(info_field(&mut c, "trafikey", "trafikey_upkeep_expired"), "3");
    assert_eq!(q.run(&mut c, "EMQ.COMPLETE", &jid(1), &[b"w", b"ok"]), Reply::Int(1));
}

/// One upkeep step that both promotes a due job and meets another that expired waiting fails
/// the second: the promotion set aside only its own jobs.
#[test]
fn upkeep_fails_an_expired_job_in_the_step_that_promotes_another() {
    let s = Server::quiet();
    let mut c = s.conn();
    let q = Q::new("both");
    let at = (server_ms(&mut c) + 50).to_string();
    assert_eq!(q.run(&mut c, "EMQ.SCHEDULE", &jid(1), &[at.as_bytes(), b"n", b"d"]), Reply::Int(1));
    assert_eq!(q.enqueue(&mut c, &jid(2), &[b"EXPIRE", at.as_bytes()]), Reply::Int(1));
    let at: i64 = at.parse().unwrap();
    wait_for(|| server_ms(&mut c) > at, "both times pass with upkeep off");
    assert_eq!(c.call(&[b"CONFIG", b"SET", b"trafikey.upkeep", b"yes"]), Reply::Simple("OK".into()));
    wait_for(|| expired(&q.snapshot(&mut c), &jid(2)), "upkeep fails the expired job");
    let snap = q.check_invariant(&mut c);
    assert_eq!(snap.state_of(&jid(1)).as_deref(), Some("wait"), "and promotes the due one");
    assert_eq!(info_field(&mut c, "trafikey", "trafikey_upkeep_expired"), "1");
}

/// The index of EXPIRE times is kept in memory and not told of deletions: a job removed and
/// made again under its id without EXPIRE still has its old entry, which upkeep meets at that
/// time and must leave be (the row, not the index, says whether the job expired).
#[test]
fn upkeep_leaves_a_job_made_again_without_its_old_expire() {
    let s = Server::installed();
    let mut c = s.conn();
    let q = Q::new("again");
    let now = server_ms(&mut c);
    let (at, later) = ((now + 150).to_string(), (now + 151).to_string());
    assert_eq!(q.enqueue(&mut c, &jid(1), &[b"EXPIRE", at.as_bytes()]), Reply::Int(1));
    assert_eq!(q.run(&mut c, "TRA.REMOVE", &jid(1), &[]), Reply::Int(1));
    assert_eq!(q.enqueue(&mut c, &jid(1), &[]), Reply::Int(1));
    // A job expiring just after: once it is failed, upkeep has met the old entry too.
    assert_eq!(q.enqueue(&mut c, &jid(2), &[b"EXPIRE", later.as_bytes()]), Reply::Int(1));
    wait_for(|| expired(&q.snapshot(&mut c), &jid(2)), "upkeep fails the job that expired");
    let snap = q.check_invariant(&mut c);
    assert_eq!(snap.state_of(&jid(1)).as_deref(), Some("wait"));
    assert_eq!(info_field(&mut c, "trafikey", "trafikey_upkeep_expired"), "1");
}

/// Upkeep's work a call is bounded by a window at the tail of `wait` (where CLAIM takes from):
/// a job that expires deeper in a long list is left for the CLAIM that reaches it, whose
/// search for it is bounded too; one as old near the tail is failed by upkeep.
#[test]
fn upkeep_leaves_an_expired_job_deep_in_a_long_wait_list_to_claim() {
    let s = Server::installed();
    let mut c = s.conn();
    let q = Q::new("deep");
    let at = (server_ms(&mut c) + 400).to_string();
    assert_eq!(q.enqueue(&mut c, &jid(1), &[b"EXPIRE", at.as_bytes()]), Reply::Int(1));
    let calls: Vec<Vec<Vec<u8>>> = (2..=1201)
        .map(|i| q.cmd("EMQ.ENQUEUE", &jid(i), &keys_of("EMQ.ENQUEUE"), &[b"job", b"{}"]))
        .collect();
    assert!(c.pipeline(&calls).iter().all(|r| *r == Reply::Int(1)));
    assert_eq!(q.enqueue(&mut c, &jid(1202), &[b"EXPIRE", at.as_bytes()]), Reply::Int(1));
    // Both expire at the same moment, so one tick decides both.
    wait_for(|| expired(&q.snapshot(&mut c), &jid(1)), "upkeep fails the one near the tail");
    let snap = q.check_invariant(&mut c);
    assert_eq!(snap.state_of(&jid(1202)).as_deref(), Some("wait"), "1 201 jobs from the tail: CLAIM's");
    assert_eq!(info_field(&mut c, "trafikey", "trafikey_upkeep_expired"), "1");
}

#[test]
fn upkeep_finds_expiring_jobs_again_after_a_restart() {
    let s = Server::installed();
    let mut c = s.conn();
    let q = Q::new("again");
    assert_eq!(q.enqueue(&mut c, &jid(1), &[b"EXPIRE", b"+1500"]), Reply::Int(1));
    // The index lives in memory: a reload forgets it, the scan finds the row again.
    assert_eq!(c.call(&[b"DEBUG", b"RELOAD"]), Reply::Simple("OK".into()));
    wait_for(|| expired(&q.snapshot(&mut c), &jid(1)), "failed after the reload");
    q.check_invariant(&mut c);
}

#[test]
fn a_replica_holds_what_expiry_did_on_the_primary() {
    let primary = Server::installed();
    let replica = Server::start(Opts::default());
    let mut r = replica.follow(&primary);
    let mut p = primary.conn();
    let q = Q::new("mirror");
    for n in 1..=10 {
        q.enqueue(&mut p, &jid(n), &[b"EXPIRE", if n % 2 == 0 { b"+0".as_slice() } else { b"+150" }]);
    }
    claim(&mut p, &q, "3");
    wait_for(|| q.snapshot(&mut p).state_of(&jid(9)).as_deref() == Some("failed"), "upkeep");
    p.call(&[b"WAIT", b"1", b"2000"]);
    wait_for(|| digest(&mut p) == digest(&mut r), "the replica holds what the primary holds");
    q.check_invariant(&mut r);
}

#[test]
fn a_bad_expire_is_refused_and_writes_nothing() {
    let s = Server::quiet();
    let mut c = s.conn();
    let q = Q::new("bad");
    let cases: &[(&[&[u8]], &str)] = &[
        (&[b"EXPIRE"], "EMQSHAPE"),
        (&[b"EXPIRE", b"soon"], "EMQSHAPE"),
        (&[b"EXPIRE", b"-5"], "EMQSHAPE"),
        (&[b"EXPIRE", b"+-5"], "EMQSHAPE"),
        (&[b"EXPIRE", b"1", b"EXPIRE", b"2"], "EMQSHAPE"),
        (&[b"EXPIRE", b"9007199254740992"], "EMQARG"),
        (&[b"EXPIRE", b"+9007199254740992"], "EMQARG"),
    ];
    for (args, class) in cases {
        let r = unchanged(&mut c, |c| q.enqueue(c, &jid(1), args));
        assert!(r.err().is_some_and(|e| e.starts_with(class)), "{args:?}: {r:?}");
        let mut v: Vec<&[u8]> = vec![b"+1000", b"n", b"d"];
        v.extend_from_slice(args);
        let r = unchanged(&mut c, |c| q.run(c, "EMQ.SCHEDULE", &jid(1), &v));
        assert!(r.err().is_some_and(|e| e.starts_with(class)), "SCHEDULE {args:?}: {r:?}");
    }
}
