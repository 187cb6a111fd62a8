//! Server-side upkeep against a real server: due jobs promoted and expired leases reclaimed by
//! the module's own timer, on the primary only, replicated as effects, found again after a
//! restart, a flush and a failover; bounded per tick; off on demand. And the worker a user
//! writes now: CLAIM … BLOCK, work, COMPLETE or FAIL — no sweeper anywhere. The queues it
//! keeps: a queue is known from its first job on, and a dataset loaded in place (DEBUG
//! RELOAD) is scanned for queues again.
// A test may panic: that is how it fails. The module's own rules are for src/.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::sleep;
use std::time::{Duration, Instant};

use trafikey_support::*;

fn upkeep(c: &mut Conn, field: &str) -> i64 {
    info_field(c, "trafikey", &format!("trafikey_upkeep_{field}")).parse().unwrap_or(-1)
}

/// A server, installed, whose upkeep sleeps at most `ms` between looks (`upkeep-tick-ms`).
fn ticking_at_most_every(ms: &str) -> Server {
    let s = Server::start(Opts { module_args: vec!["upkeep-tick-ms".into(), ms.into()], ..Opts::default() });
    assert_eq!(s.conn().call(&[b"EMQ.INSTALL", b"1", b"{emq}:version"]), Reply::Int(1));
    s
}

fn schedule(c: &mut Conn, q: &Q, id: &str, when: &str) {
    assert_eq!(q.run(c, "EMQ.SCHEDULE", id, &[when.as_bytes(), b"n", b"d"]), Reply::Int(1));
}

/// Calls sent in one write: the server runs them back to back, with no tick between.
fn one_write(c: &mut Conn, calls: &[&[&[u8]]]) -> Vec<Reply> {
    let calls: Vec<Vec<Vec<u8>>> = calls.iter().map(|a| a.iter().map(|x| x.to_vec()).collect()).collect();
    c.pipeline(&calls)
}

fn state(c: &mut Conn, q: &Q, id: &str) -> Option<String> {
    q.snapshot(c).state_of(id)
}

#[test]
fn due_jobs_are_promoted_with_no_claim_and_expired_leases_come_back() {
    let s = Server::installed();
    let mut c = s.conn();
    let q = Q::new("keep");
    schedule(&mut c, &q, &jid(1), "+150");
    schedule(&mut c, &q, &jid(2), "+100000");
    assert_eq!(state(&mut c, &q, &jid(1)).as_deref(), Some("delayed"));
    wait_for(|| state(&mut c, &q, &jid(1)).as_deref() == Some("wait"), "jid 1 promoted by upkeep");
    assert_eq!(state(&mut c, &q, &jid(2)).as_deref(), Some("delayed"), "not due: left alone");
    let ev = c.call(&[b"XRANGE", q.k("events").as_bytes(), b"-", b"+"]);
    let last = ev.array().last().map(|e| e.array()[1].strings()).unwrap_or_default();
    assert_eq!(last, ["event", "waiting", "id", &jid(1), "prev", "delayed"]);
    // A lease left to expire: back to ready (first stall), then failed past max-stalls.
    let r = q.run(&mut c, "EMQ.CLAIM", "", &[b"w", b"100"]);
    assert_eq!(r.array()[0].array()[0].str(), jid(1));
    wait_for(|| state(&mut c, &q, &jid(1)).as_deref() == Some("wait"), "the lease reclaimed");
    assert_eq!(q.snapshot(&mut c).field(&jid(1), "sc").as_deref(), Some("1"));
    q.run(&mut c, "EMQ.CLAIM", "", &[b"w", b"100"]);
    wait_for(|| state(&mut c, &q, &jid(1)).as_deref() == Some("failed"), "failed after its second stall");
    let snap = q.check_invariant(&mut c);
    assert_eq!(snap.field(&jid(1), "e").as_deref(), Some("stalled"));
    assert!(upkeep(&mut c, "promoted") >= 1 && upkeep(&mut c, "reclaimed") >= 2);
    // TRA.QUEUES lists the queue upkeep knows.
    let r = c.call(&[b"TRA.QUEUES"]);
    assert_eq!(r.array()[0], Reply::Int(-1));
    assert_eq!(r.array()[1].strings(), ["keep"]);
}

#[test]
fn a_waiting_worker_gets_a_scheduled_job_when_it_falls_due() {
    let s = Server::installed();
    let (mut c, mut w) = (s.conn(), s.conn());
    let q = Q::new("sched");
    let v = q.cmd("EMQ.CLAIM", "", &keys_of("EMQ.CLAIM"), &[b"w", b"30000", b"BLOCK", b"5000"]);
    let refs: Vec<&[u8]> = v.iter().map(Vec::as_slice).collect();
    w.send(&refs).expect("send");
    wait_for(|| info_field(&mut c, "clients", "blocked_clients") == "1", "the worker waits");
    let t0 = Instant::now();
    schedule(&mut c, &q, &jid(1), "+200");
    let r = w.read().expect("a job");
    let took = t0.elapsed();
    assert_eq!(r.array()[0].array()[0].str(), jid(1));
    assert!(took >= Duration::from_millis(190) && took < Duration::from_millis(1500), "{took:?}");
}

#[test]
fn upkeep_off_leaves_promotion_to_claim_and_reclaiming_to_stalled() {
    let s = Server::start(Opts { module_args: vec!["upkeep".into(), "no".into()], ..Opts::default() });
    let mut c = s.conn();
    c.call(&[b"EMQ.INSTALL", b"1", b"{emq}:version"]);
    let q = Q::new("manual");
    schedule(&mut c, &q, &jid(1), "+50");
    q.enqueue(&mut c, &jid(2), &[]);
    q.run(&mut c, "EMQ.CLAIM", "", &[b"w", b"50"]);
    sleep(Duration::from_millis(300));
    assert_eq!(state(&mut c, &q, &jid(1)).as_deref(), Some("delayed"), "no upkeep: still delayed");
    assert_eq!(state(&mut c, &q, &jid(2)).as_deref(), Some("active"), "no upkeep: the lease stays");
    assert_eq!(upkeep(&mut c, "ticks"), 0);
    let r = q.run(&mut c, "EMQ.STALLED", "", &[]);
    assert_eq!(r.array()[0].strings(), [jid(2)]);
    let r = q.run(&mut c, "EMQ.CLAIM", "", &[b"w", b"1000", b"COUNT", b"5"]);
    let got: Vec<String> = r.array().iter().map(|j| j.array()[0].str()).collect();
    assert_eq!(got, [jid(2), jid(1)], "CLAIM promotes what is due itself");
    // On again: upkeep resumes with the next thing that falls due.
    assert_eq!(c.call(&[b"CONFIG", b"SET", b"trafikey.upkeep", b"yes"]), Reply::Simple("OK".into()));
    schedule(&mut c, &q, &jid(3), "+50");
    wait_for(|| state(&mut c, &q, &jid(3)).as_deref() == Some("wait"), "upkeep on again");
}

#[test]
fn upkeep_runs_on_the_primary_and_replicas_hold_the_same() {
    let primary = Server::installed();
    let replica = Server::start(Opts::default());
    let mut r = replica.follow(&primary);
    let mut p = primary.conn();
    let q = Q::new("repl");
    for n in 1..=20 {
        schedule(&mut p, &q, &jid(n), "+100");
    }
    q.enqueue(&mut p, &jid(30), &[]);
    q.run(&mut p, "EMQ.CLAIM", "", &[b"w", b"80"]);
    wait_for(
        || upkeep(&mut p, "promoted") >= 20 && upkeep(&mut p, "reclaimed") >= 1,
        "upkeep on the primary",
    );
    p.call(&[b"WAIT", b"1", b"2000"]);
    wait_for(|| digest(&mut p) == digest(&mut r), "the replica holds what the primary holds");
    assert_eq!(upkeep(&mut r, "promoted"), 0, "a replica does no upkeep");
    assert_eq!(upkeep(&mut r, "reclaimed"), 0);
    q.check_invariant(&mut r);
}

#[test]
fn upkeep_finds_its_queues_again_after_a_restart_from_rdb_and_from_aof() {
    for persistence in ["rdb", "aof"] {
        let args = match persistence {
            "aof" => vec!["--appendonly".into(), "yes".into(), "--appendfsync".into(), "always".into()],
            _ => vec![],
        };
        let s = Server::start(Opts { server_args: args, ..Opts::default() });
        let mut c = s.conn();
        c.call(&[b"EMQ.INSTALL", b"1", b"{emq}:version"]);
        let q = Q::new("restart");
        schedule(&mut c, &q, &jid(1), "+1500");
        c.call(&[b"SELECT", b"2"]);
        c.call(&[b"EMQ.INSTALL", b"1", b"{emq}:version"]);
        schedule(&mut c, &q, &jid(2), "+1500");
        if persistence == "rdb" {
            assert_eq!(c.call(&[b"SAVE"]), Reply::Simple("OK".into()));
        }
        drop(c);
        let s = s.restart();
        let mut c = s.conn();
        assert_eq!(state(&mut c, &q, &jid(1)).as_deref(), Some("delayed"), "{persistence}");
        wait_for(|| state(&mut c, &q, &jid(1)).as_deref() == Some("wait"), "promoted after the restart");
        c.call(&[b"SELECT", b"2"]);
        wait_for(|| state(&mut c, &q, &jid(2)).as_deref() == Some("wait"), "and in database 2");
        assert_eq!(c.call(&[b"TRA.QUEUES"]).array()[1].strings(), ["restart"]);
    }
}

#[test]
fn a_promoted_replica_takes_upkeep_over() {
    let primary = Server::installed();
    let replica = Server::start(Opts::default());
    let mut r = replica.follow(&primary);
    let mut p = primary.conn();
    let q = Q::new("failover");
    schedule(&mut p, &q, &jid(1), "+800");
    q.enqueue(&mut p, &jid(2), &[]);
    q.run(&mut p, "EMQ.CLAIM", "", &[b"w", b"600"]);
    // And a queue in another database: the promotion looks in every database.
    p.call(&[b"SELECT", b"2"]);
    assert_eq!(p.call(&[b"EMQ.INSTALL", b"1", b"{emq}:version"]), Reply::Int(1));
    schedule(&mut p, &q, &jid(3), "+800");
    assert_eq!(p.call(&[b"WAIT", b"1", b"2000"]), Reply::Int(1));
    drop(p);
    drop(primary);
    assert_eq!(r.call(&[b"REPLICAOF", b"NO", b"ONE"]), Reply::Simple("OK".into()));
    wait_for(|| state(&mut r, &q, &jid(1)).as_deref() == Some("wait"), "the new primary promotes");
    wait_for(|| state(&mut r, &q, &jid(2)).as_deref() == Some("wait"), "and reclaims");
    q.check_invariant(&mut r);
    r.call(&[b"SELECT", b"2"]);
    wait_for(|| state(&mut r, &q, &jid(3)).as_deref() == Some("wait"), "and promotes in database 2");
}

#[test]
fn an_old_primary_promoted_back_looks_for_the_queues_made_meanwhile() {
    // P fails over to R and comes back as R's replica with a partial resync (no load); a
    // queue made on R then reaches P only as effects. Promoted back, P must look for it.
    let args = vec!["--repl-ping-replica-period".into(), "3600".into()];
    let p_srv = Server::start(Opts { server_args: args, ..Opts::default() });
    let mut p = p_srv.conn();
    assert_eq!(p.call(&[b"EMQ.INSTALL", b"1", b"{emq}:version"]), Reply::Int(1));
    let r_srv = Server::start(Opts::default());
    let mut r = r_srv.follow(&p_srv);
    // R must hold all of P's stream before it is promoted, or P, ahead of it, cannot resync
    // partially (a busy machine can leave R a few bytes behind when the link comes up).
    let offset = |c: &mut Conn| info_field(c, "replication", "master_repl_offset");
    let p_offset = offset(&mut p);
    wait_for(|| offset(&mut r) == p_offset, "R has all of P's stream");
    assert_eq!(r.call(&[b"REPLICAOF", b"NO", b"ONE"]), Reply::Simple("OK".into()));
    let mut p = p_srv.follow(&r_srv);
    assert_eq!(info_field(&mut r, "stats", "sync_partial_ok"), "1", "P resynced partially: no load");
    let q = Q::new("meanwhile");
    schedule(&mut r, &q, &jid(1), "+300");
    assert_eq!(r.call(&[b"WAIT", b"1", b"2000"]), Reply::Int(1));
    assert_eq!(p.call(&[b"REPLICAOF", b"NO", b"ONE"]), Reply::Simple("OK".into()));
    drop(r);
    drop(r_srv);
    wait_for(|| state(&mut p, &q, &jid(1)).as_deref() == Some("wait"), "P promotes the queue made on R");
}

#[test]
fn a_queue_in_another_database_is_kept_in_its_own() {
    // Installed and scheduled after upkeep's first look: upkeep knows the queue only from the
    // SCHEDULE, which must note the database it ran in.
    let s = Server::installed();
    let mut c = s.conn();
    c.call(&[b"SELECT", b"2"]);
    assert_eq!(c.call(&[b"EMQ.INSTALL", b"1", b"{emq}:version"]), Reply::Int(1));
    let q = Q::new("elsewhere");
    schedule(&mut c, &q, &jid(1), "+200");
    wait_for(|| state(&mut c, &q, &jid(1)).as_deref() == Some("wait"), "upkeep promotes in database 2");
}

/// A queue whose keys were all deleted behind upkeep's back (not by a flush, which upkeep
/// hears of) is forgotten at its next visit, which finds none of them.
#[test]
fn a_queue_whose_keys_are_gone_is_forgotten_at_its_next_visit() {
    let s = Server::installed();
    let mut c = s.conn();
    let q = Q::new("gone");
    schedule(&mut c, &q, &jid(1), "+150");
    assert_eq!(c.call(&[b"TRA.QUEUES"]).array()[1].strings(), ["gone"]);
    let keys = [q.k("delayed"), q.k("events"), q.job(&jid(1))];
    let mut del: Vec<&[u8]> = vec![b"DEL"];
    del.extend(keys.iter().map(|k| k.as_bytes()));
    assert_eq!(c.call(&del), Reply::Int(3));
    assert_eq!(c.call(&[b"KEYS", b"emq:{gone}:*"]).array().len(), 0);
    wait_for(|| c.call(&[b"TRA.QUEUES"]).array()[1].array().is_empty(), "the visit forgets the queue");
}

#[test]
fn a_flush_forgets_and_an_uninstalled_database_is_left_alone() {
    let s = Server::installed();
    let mut c = s.conn();
    let q = Q::new("flush");
    schedule(&mut c, &q, &jid(1), "+100000");
    assert_eq!(c.call(&[b"TRA.QUEUES"]).array()[1].strings(), ["flush"]);
    c.call(&[b"FLUSHALL"]);
    wait_for(|| c.call(&[b"TRA.QUEUES"]).array()[1].array().is_empty(), "the flush forgets the queue");
    // Database 3, never installed: a delayed job written there by hand is not upkeep's.
    c.call(&[b"SELECT", b"3"]);
    c.call(&[b"HSET", q.job(&jid(2)).as_bytes(), b"st", b"delayed", b"n", b"n", b"d", b"d", b"c", b"1"]);
    c.call(&[b"ZADD", q.k("delayed").as_bytes(), b"1", jid(2).as_bytes()]);
    c.call(&[b"SELECT", b"0"]);
    c.call(&[b"EMQ.INSTALL", b"1", b"{emq}:version"]);
    c.call(&[b"DEBUG", b"RELOAD"]);
    wait_for(|| upkeep(&mut c, "refused") >= 1, "the fence refuses upkeep there");
    c.call(&[b"SELECT", b"3"]);
    assert_eq!(state(&mut c, &q, &jid(2)).as_deref(), Some("delayed"));
}

#[test]
fn a_flush_of_one_database_does_not_narrow_a_pending_look_at_all() {
    let s = Server::installed();
    let mut c = s.conn();
    let q = Q::new("rescan");
    schedule(&mut c, &q, &jid(1), "+300");
    // A reload makes upkeep forget its queues and look at every database again; a flush of
    // another database, before upkeep has looked (one write: no tick between them), must
    // not leave it looking at the flushed one only.
    let replies =
        one_write(&mut c, &[&[b"DEBUG", b"RELOAD"], &[b"SELECT", b"3"], &[b"FLUSHDB"], &[b"SELECT", b"0"]]);
    assert!(replies.iter().all(|r| *r == Reply::Simple("OK".into())), "{replies:?}");
    wait_for(|| state(&mut c, &q, &jid(1)).as_deref() == Some("wait"), "upkeep finds the queue and promotes");
}

#[test]
fn a_flush_of_one_database_forgets_only_its_queues() {
    // Forgetting every database's queues would leave upkeep blind to them until a scan of the
    // whole keyspace found them again. One write: no tick runs between the four calls.
    let s = Server::installed();
    let mut c = s.conn();
    let q = Q::new("kept");
    schedule(&mut c, &q, &jid(1), "+100000");
    let replies =
        one_write(&mut c, &[&[b"SELECT", b"5"], &[b"FLUSHDB"], &[b"SELECT", b"0"], &[b"TRA.QUEUES"]]);
    assert!(replies[..3].iter().all(|r| *r == Reply::Simple("OK".into())), "{replies:?}");
    assert_eq!(replies[3].array()[1].strings(), ["kept"], "database 0's queue still known");
}

/// SWAPDB moves every queue of two databases into the other: upkeep forgets what it knew of
/// both and looks at both again, so a delayed job that moved falls due where it now is, and
/// nothing is looked for where it was.
#[test]
fn a_swap_of_databases_moves_upkeep_with_the_queues() {
    let s = Server::installed();
    let mut c = s.conn();
    let q = Q::new("swapped");
    schedule(&mut c, &q, &jid(1), "+300");
    assert_eq!(c.call(&[b"SWAPDB", b"0", b"1"]), Reply::Simple("OK".into()));
    assert_eq!(c.call(&[b"EXISTS", q.k("delayed").as_bytes()]), Reply::Int(0), "database 0 no longer has it");
    c.call(&[b"SELECT", b"1"]);
    wait_for(|| state(&mut c, &q, &jid(1)).as_deref() == Some("wait"), "upkeep promotes it in database 1");
    assert_eq!(c.call(&[b"TRA.QUEUES"]).array()[1].strings(), ["swapped"]);
    c.call(&[b"SELECT", b"0"]);
    assert!(c.call(&[b"TRA.QUEUES"]).array()[1].array().is_empty(), "nothing known in database 0");
}

#[test]
fn one_tick_does_a_bounded_batch_and_the_rest_follows() {
    let s = Server::start(Opts {
        module_args: vec!["upkeep-batch".into(), "7".into(), "upkeep".into(), "no".into()],
        ..Opts::default()
    });
    let mut c = s.conn();
    c.call(&[b"EMQ.INSTALL", b"1", b"{emq}:version"]);
    let q = Q::new("batch");
    for n in 1..=100 {
        schedule(&mut c, &q, &jid(n), "1");
    }
    c.call(&[b"CONFIG", b"SET", b"trafikey.upkeep", b"yes"]);
    schedule(&mut c, &q, &jid(101), "1");
    wait_for(|| upkeep(&mut c, "promoted") == 101, "all promoted, a batch at a time");
    let ticks = upkeep(&mut c, "ticks");
    assert!(ticks >= 15, "at most 7 a tick: {ticks} ticks");
    assert_eq!(c.call(&[b"LLEN", q.k("wait").as_bytes()]), Reply::Int(101));
    q.check_invariant(&mut c);
}

#[test]
fn one_tick_stops_at_its_time_budget() {
    // A batch far larger than a millisecond's work: each tick stops at about a millisecond,
    // so 20 000 due jobs take many ticks, not one long one.
    let s = Server::start(Opts {
        module_args: vec!["upkeep-batch".into(), "100000".into(), "upkeep".into(), "no".into()],
        ..Opts::default()
    });
    let mut c = s.conn();
    c.call(&[b"EMQ.INSTALL", b"1", b"{emq}:version"]);
    let q = Q::new("budget");
    let n = 20_000;
    for chunk in (1..=n).collect::<Vec<u64>>().chunks(500) {
        for &i in chunk {
            let v = q.cmd("EMQ.SCHEDULE", &jid(i), &keys_of("EMQ.SCHEDULE"), &[b"1", b"n", b"d"]);
            let refs: Vec<&[u8]> = v.iter().map(Vec::as_slice).collect();
            c.send(&refs).expect("send");
        }
        for _ in chunk {
            assert_eq!(c.read().expect("reply"), Reply::Int(1));
        }
    }
    c.call(&[b"CONFIG", b"SET", b"trafikey.upkeep", b"yes"]);
    wait_for(|| upkeep(&mut c, "promoted") == n as i64, "all promoted");
    let ticks = upkeep(&mut c, "ticks");
    assert!(ticks >= 10, "each tick about a millisecond of work: {ticks} ticks for {n} jobs");
    // The work of one step, which bounds a tick's overshoot of its budget: at most 32 jobs
    // (upkeep::STEP_JOBS), whatever the batch allows — the same on any machine.
    let steps = upkeep(&mut c, "steps");
    assert!(steps * 32 >= n as i64, "at most 32 jobs a step: {steps} steps for {n} jobs");
}

#[test]
fn bringing_the_timer_forward_leaves_one_timer() {
    // Each SCHEDULE below falls due before upkeep's timer would fire, so each brings it
    // forward: the armed timer is stopped and one armed sooner. Were it not stopped, every
    // one would go on ticking by itself.
    let s = ticking_at_most_every("200");
    let mut c = s.conn();
    let q = Q::new("forward");
    for (k, ms) in (1..=19).rev().map(|t| t * 10).enumerate() {
        schedule(&mut c, &q, &jid(k as u64 + 1), &format!("+{ms}"));
    }
    wait_for(|| upkeep(&mut c, "promoted") == 19, "all promoted");
    let t0 = upkeep(&mut c, "ticks");
    std::thread::sleep(std::time::Duration::from_secs(2));
    let ticks = upkeep(&mut c, "ticks") - t0;
    assert!(ticks <= 15, "one timer, a tick every 200 ms: {ticks} ticks in 2 s");
}

/// Upkeep sleeps up to `upkeep-tick-ms` (here a minute) between looks, and each verb that
/// sets a time sooner brings it forward: SCHEDULE, RESCHEDULE, DELAY, a FAIL's backoff, a
/// delayed job of TRA.ADD and a job scheduler's first iteration at its START (each job
/// promoted then), and a CLAIM's lease (the job reclaimed once it runs out).
#[test]
fn each_due_time_a_verb_sets_wakes_upkeep_by_then() {
    let s = ticking_at_most_every("60000");
    let mut c = s.conn();
    let promoted = |c: &mut Conn, n: i64| wait_for(|| upkeep(c, "promoted") == n, &format!("{n} promoted"));
    let q = Q::new("wake-schedule");
    schedule(&mut c, &q, &jid(1), "+300");
    promoted(&mut c, 1);
    let q = Q::new("wake-reschedule");
    schedule(&mut c, &q, &jid(1), "+600000");
    assert!(q.run(&mut c, "EMQ.RESCHEDULE", &jid(1), &[b"+300"]).int() > 0);
    promoted(&mut c, 2);
    let q = Q::new("wake-delay");
    q.enqueue(&mut c, &jid(1), &[]);
    assert_eq!(claim_all(&q, &mut c, "w"), [jid(1)]);
    assert!(q.run(&mut c, "EMQ.DELAY", &jid(1), &[b"w", b"+300"]).err().is_none());
    promoted(&mut c, 3);
    let q = Q::new("wake-backoff");
    q.enqueue(&mut c, &jid(1), &[b"ATTEMPTS", b"2", b"BACKOFF", b"FIXED", b"300"]);
    assert_eq!(claim_all(&q, &mut c, "w"), [jid(1)]);
    assert!(q.run(&mut c, "EMQ.FAIL", &jid(1), &[b"w", b"boom"]).err().is_none());
    assert_eq!(c.call(&[b"ZCARD", q.k("delayed").as_bytes()]), Reply::Int(1));
    promoted(&mut c, 4);
    let q = Q::new("wake-add");
    let add = q.add_cmd(&[(&jid(1), "n", &["DELAY", "+300"])]);
    assert_eq!(c.call_v(&add), Reply::Array(vec![Reply::Int(1)]));
    promoted(&mut c, 5);
    let q = Q::new("wake-scheduler");
    let start = (trafikey_support::reliability::server_ms(&mut c) + 300).to_string();
    let v = q.cmd(
        "TRA.SCHEDULER",
        "",
        &["sched:s", "scheds", "delayed", "events"],
        &[b"SET", b"EVERY", b"600000", b"START", start.as_bytes(), b"JOB", b"j", b"{}"],
    );
    let set = c.call_v(&v);
    assert!(set.err().is_none(), "{set:?}");
    promoted(&mut c, 6);
    let q = Q::new("wake-lease");
    q.enqueue(&mut c, &jid(1), &[]);
    assert!(!q.run(&mut c, "EMQ.CLAIM", "", &[b"w", b"300"]).array().is_empty());
    wait_for(|| upkeep(&mut c, "reclaimed") == 1, "the lease reclaimed");
    assert_eq!(c.call(&[b"LRANGE", q.k("wait").as_bytes(), b"0", b"-1"]).strings(), [jid(1)]);
}

#[test]
fn the_module_unloads_once_upkeep_is_off() {
    let s = Server::installed();
    let mut c = s.conn();
    let e = c.call(&[b"MODULE", b"UNLOAD", b"trafikey"]);
    assert!(e.err().is_some(), "its timer is pending: {e:?}");
    c.call(&[b"CONFIG", b"SET", b"trafikey.upkeep", b"no"]);
    wait_for(|| c.call(&[b"MODULE", b"UNLOAD", b"trafikey"]) == Reply::Simple("OK".into()), "unloaded");
}

/// The whole worker a user writes: CLAIM … BLOCK, do the job (renewing its lease with
/// EXTENDS when it runs long), COMPLETE or FAIL. Some workers die holding a job, without a
/// word; no one runs a sweeper. Every job ends completed or failed exactly once.
#[test]
fn workers_that_wait_and_die_need_no_sweeper() {
    let s = Server::installed();
    let q = Q::new("work");
    const JOBS: u64 = 300;
    let mut admin = s.conn();
    for n in 1..=JOBS {
        // Jobs whose id ends in 0 fail their first attempt and are retried (3 attempts).
        q.enqueue(&mut admin, &jid(n), &[b"ATTEMPTS", b"3"]);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let port = s.port;
    let workers: Vec<_> = (0..6)
        .map(|w| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let q = Q::new("work");
                let mut c = Conn::connect(port).expect("connect");
                let token = |n: usize| format!("w{w}-{n}");
                let mut outcomes: Vec<(String, &'static str)> = Vec::new();
                for n in 0.. {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let t = token(n);
                    let r = c.call_v(&q.cmd(
                        "EMQ.CLAIM",
                        "",
                        &keys_of("EMQ.CLAIM"),
                        &[t.as_bytes(), b"1000", b"BLOCK", b"200"],
                    ));
                    let Some(job) = r.array().first() else { continue };
                    let (id, attempt) = (job.array()[0].str(), job.array()[3].int());
                    // Workers 0 and 1 die now and then, holding the job, and never come back.
                    if w < 2 && n % 25 == 7 {
                        return outcomes;
                    }
                    if n % 40 == 3 {
                        // A long job: renew the lease while working.
                        for _ in 0..3 {
                            sleep(Duration::from_millis(400));
                            let r = c.call_v(&q.cmd(
                                "EMQ.EXTENDS",
                                "",
                                &["active"],
                                &[b"1000", id.as_bytes(), t.as_bytes()],
                            ));
                            assert!(r.array()[0].int() > 0, "still held");
                        }
                    }
                    let fails = id.ends_with('0') && attempt == 1;
                    let (verb, arg): (&str, &[u8]) =
                        if fails { ("EMQ.FAIL", b"boom") } else { ("EMQ.COMPLETE", b"ok") };
                    let r = c.call_v(&q.cmd(verb, &id, &keys_of(verb), &[t.as_bytes(), arg]));
                    match r {
                        Reply::Int(1) => outcomes.push((id, "completed")),
                        Reply::Simple(ref s) if s == "retry" => {}
                        other => panic!("{verb} {id}: {other:?}"),
                    }
                }
                outcomes
            })
        })
        .collect();
    let t0 = Instant::now();
    wait_for(
        || {
            let snap = q.snapshot(&mut admin);
            (1..=JOBS)
                .all(|n| matches!(snap.state_of(&jid(n)).as_deref(), Some("completed") | Some("failed")))
        },
        "every job finished",
    );
    stop.store(true, Ordering::Relaxed);
    let mut done: HashMap<String, usize> = HashMap::new();
    for h in workers {
        for (id, _) in h.join().expect("a worker") {
            *done.entry(id).or_default() += 1;
        }
    }
    let snap = q.check_invariant(&mut admin);
    let completed = (1..=JOBS).filter(|n| snap.state_of(&jid(*n)).as_deref() == Some("completed")).count();
    assert!(done.values().all(|&n| n == 1), "no job completed twice");
    assert_eq!(done.len(), completed, "each completed job completed by exactly one worker");
    // The events: one `added` and one final event per job.
    let ev = admin.call(&[b"XRANGE", q.k("events").as_bytes(), b"-", b"+"]);
    let mut finals: HashMap<String, usize> = HashMap::new();
    let mut added: HashMap<String, usize> = HashMap::new();
    for e in ev.array() {
        let f = e.array()[1].strings();
        let (name, id) = (f[1].clone(), f.get(3).cloned().unwrap_or_default());
        match name.as_str() {
            "added" => *added.entry(id).or_default() += 1,
            "completed" => *finals.entry(id).or_default() += 1,
            "failed" if snap.state_of(&id).as_deref() == Some("failed") => {
                *finals.entry(id).or_default() += 1
            }
            _ => {}
        }
    }
    assert!((1..=JOBS).all(|n| added.get(&jid(n)) == Some(&1)), "one added per job");
    assert!((1..=JOBS).all(|n| finals.get(&jid(n)) == Some(&1)), "one final event per job: {finals:?}");
    assert!(upkeep(&mut admin, "reclaimed") >= 1, "the dead workers' jobs came back by upkeep alone");
    eprintln!(
        "{JOBS} jobs in {:?}, {} completed, reclaimed {}",
        t0.elapsed(),
        completed,
        upkeep(&mut admin, "reclaimed")
    );
}

/// queue.rs `exists` → `()` (a queue whose first job was just created is not listed). Upkeep
/// is off, so no scan finds it: only the verb's own note does.
#[test]
fn the_first_job_makes_its_queue_known() {
    let s = Server::quiet();
    let mut c = s.conn();
    assert_eq!(c.call(&[b"TRA.QUEUES"]), Reply::Array(vec![Reply::Int(-1), Reply::Array(vec![])]));
    let q = Q::new("known");
    assert_eq!(q.enqueue(&mut c, &jid(1), &[]), Reply::Int(1));
    assert_eq!(
        c.call(&[b"TRA.QUEUES"]),
        Reply::Array(vec![Reply::Int(-1), Reply::Array(vec![Reply::Bulk(b"known".to_vec())])])
    );
}

/// host/timer.rs `on_event` → `()` (a dataset loaded into a running primary not scanned for
/// queues): a queue the node had forgotten, brought back by `DEBUG RELOAD NOSAVE` from the RDB
/// saved before, is found again and its due job promoted by upkeep. (A reload empties the
/// database first, so the flush event alone starts the scan: the LOADING arm is a second way.)
/// A scan too long for one tick goes on over as many as it needs, though no queue is due yet:
/// a queue behind 200 000 other keys is found after a load and its job promoted.
#[test]
fn a_scan_longer_than_a_tick_goes_on_until_it_is_done() {
    let s = Server::installed();
    let mut c = s.conn();
    assert_eq!(c.call(&[b"DEBUG", b"POPULATE", b"200000", b"filler"]), Reply::Simple("OK".into()));
    let q = Q::new("behind");
    assert_eq!(q.run(&mut c, "EMQ.SCHEDULE", &jid(1), &[b"+300", b"job", b"{}"]), Reply::Int(1));
    assert_eq!(c.call(&[b"DEBUG", b"RELOAD"]), Reply::Simple("OK".into()));
    wait_for(
        || q.snapshot(&mut c).state_of(&jid(1)).as_deref() == Some("wait"),
        "upkeep finds and promotes it",
    );
}

#[test]
fn a_dataset_loaded_in_place_is_scanned_for_queues() {
    let s = ticking_at_most_every("20");
    let mut c = s.conn();
    let q = Q::new("back");
    assert_eq!(q.run(&mut c, "EMQ.SCHEDULE", &jid(1), &[b"+400", b"job", b"{}"]), Reply::Int(1));
    assert_eq!(c.call(&[b"SAVE"]), Reply::Simple("OK".into()));
    let all = ["wait", "prio", "active", "delayed", "completed", "failed", "meta", "events"];
    let ob = q.cmd("TRA.OBLITERATE", "", &all, &[]);
    let ob: Vec<&[u8]> = ob.iter().map(Vec::as_slice).collect();
    assert_eq!(c.call(&ob), Reply::Int(0), "gone, and forgotten");
    assert_eq!(c.call(&[b"DEBUG", b"RELOAD", b"NOSAVE"]), Reply::Simple("OK".into()));
    assert_eq!(q.snapshot(&mut c).state_of(&jid(1)).as_deref(), Some("delayed"), "back from the RDB");
    wait_for(|| q.snapshot(&mut c).state_of(&jid(1)).as_deref() == Some("wait"), "upkeep promotes it");
}
