//! The ACL recipes of the README, each tested as written: a producer, a worker, a dashboard
//! (read-only) and an admin for one queue, `billing`. Each can do its job and nothing else;
//! no one can touch another queue.
// A test may panic: that is how it fails. The module's own rules are for src/.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

use trafikey_support::*;

/// The README's recipes, as ACL SETUSER rules (after `on >pw`).
const RECIPES: &[(&str, &str)] = &[
    (
        "producer",
        "resetkeys %R~{emq}:version %W~emq:{billing}:job:* %W~emq:{billing}:wait %W~emq:{billing}:prio \
         %W~emq:{billing}:delayed %W~emq:{billing}:events -@all +emq.enqueue +emq.schedule",
    ),
    (
        "worker",
        "resetkeys %R~{emq}:version ~emq:{billing}:wait ~emq:{billing}:prio ~emq:{billing}:active \
         ~emq:{billing}:delayed ~emq:{billing}:completed ~emq:{billing}:failed ~emq:{billing}:events \
         ~emq:{billing}:job:* ~emq:{billing}:log:* %R~emq:{billing}:meta -@all +emq.claim +emq.extend \
         +emq.extends +emq.complete +emq.fail +emq.requeue +emq.delay +tra.progress +tra.log",
    ),
    (
        "dashboard",
        "resetkeys %R~{emq}:version %R~emq:{billing}:* -@all +tra.job +tra.counts +tra.jobs +tra.queues +emq.version",
    ),
    ("admin", "resetkeys %R~{emq}:version ~emq:{billing}:* -@all +@emq"),
];

fn login(s: &Server, admin: &mut Conn, who: &str) -> Conn {
    let (_, rules) = RECIPES.iter().find(|(n, _)| *n == who).expect("a recipe");
    s.user(admin, who, rules)
}

fn denied(r: &Reply) -> bool {
    r.err().is_some_and(|e| e.starts_with("NOPERM"))
}

#[test]
fn each_recipe_does_its_job_and_nothing_else() {
    let s = Server::quiet();
    let mut root = s.conn();
    let q = Q::new("billing");
    let other = Q::new("payroll");
    let mut producer = login(&s, &mut root, "producer");
    let mut worker = login(&s, &mut root, "worker");
    let mut dash = login(&s, &mut root, "dashboard");
    let mut admin = login(&s, &mut root, "admin");

    // Producer: enqueue and schedule; nothing else, no other queue.
    assert_eq!(q.enqueue(&mut producer, &jid(1), &[]), Reply::Int(1));
    assert_eq!(q.run(&mut producer, "EMQ.SCHEDULE", &jid(2), &[b"+100000", b"n", b"d"]), Reply::Int(1));
    assert!(denied(&q.run(&mut producer, "EMQ.CLAIM", "", &[b"p", b"1000"])));
    assert!(denied(&unchanged(&mut root, |_| other.enqueue(&mut producer, &jid(1), &[]))));

    // Worker: claim, log, progress, complete; it cannot pause, enqueue or reach payroll.
    let r = q.run(&mut worker, "EMQ.CLAIM", "", &[b"w", b"60000"]);
    assert_eq!(r.array()[0].array()[0].str(), jid(1));
    assert_eq!(q.run(&mut worker, "TRA.PROGRESS", &jid(1), &[b"w", b"50%"]), Reply::Int(1));
    let log_key = format!("emq:{{billing}}:log:{}", jid(1));
    let r = worker.call(&[b"TRA.LOG", b"2", q.job(&jid(1)).as_bytes(), log_key.as_bytes(), b"w", b"step 1"]);
    assert_eq!(r, Reply::Int(1));
    assert_eq!(q.run(&mut worker, "EMQ.COMPLETE", &jid(1), &[b"w", b"ok"]), Reply::Int(1));
    assert!(
        denied(&unchanged(&mut root, |_| q.run(&mut worker, "EMQ.CLAIM", "", &[b"PAUSE"]))),
        "read-only meta"
    );
    assert!(denied(&q.enqueue(&mut worker, &jid(3), &[])));
    other.enqueue(&mut root, &jid(9), &[]);
    assert!(denied(&unchanged(&mut root, |_| other.run(&mut worker, "EMQ.CLAIM", "", &[b"w", b"1000"]))));

    // Dashboard: every inspection, no change.
    assert_eq!(dash.call(&[b"TRA.JOB", b"1", q.job(&jid(1)).as_bytes()]).array()[3].str(), "completed");
    let mut counts: Vec<Vec<u8>> = vec![b"TRA.COUNTS".to_vec(), b"7".to_vec()];
    for r in ["wait", "prio", "active", "delayed", "completed", "failed", "meta"] {
        counts.push(q.k(r).into_bytes());
    }
    let refs: Vec<&[u8]> = counts.iter().map(Vec::as_slice).collect();
    assert!(dash.call(&refs).err().is_none());
    assert_eq!(dash.call(&[b"TRA.JOBS", b"1", q.k("delayed").as_bytes()]).array()[1].strings(), [jid(2)]);
    assert!(dash.call(&[b"TRA.QUEUES"]).err().is_none());
    assert!(denied(&unchanged(&mut root, |_| q.run(&mut dash, "EMQ.CLAIM", "", &[b"d", b"1000"]))));
    assert!(denied(&dash.call(&[b"TRA.JOB", b"1", other.job(&jid(9)).as_bytes()])));

    // Admin: pause, remove, obliterate its queue; not payroll.
    assert_eq!(q.run(&mut admin, "EMQ.CLAIM", "", &[b"PAUSE"]), Reply::Int(1));
    let all = ["wait", "prio", "active", "delayed", "completed", "failed", "meta", "events"];
    let v = q.cmd("TRA.OBLITERATE", "", &all, &[]);
    let refs: Vec<&[u8]> = v.iter().map(Vec::as_slice).collect();
    assert_eq!(admin.call(&refs), Reply::Int(0));
    let v = other.cmd("TRA.OBLITERATE", "", &all, &[]);
    let refs: Vec<&[u8]> = v.iter().map(Vec::as_slice).collect();
    assert!(denied(&unchanged(&mut root, |_| admin.call(&refs))));
    assert!(denied(&admin.call(&[b"EMQ.INSTALL", b"1", b"{emq}:version"])), "INSTALL is outside @emq");
}

/// The state keys of queue `b`, and read on the version key: what a user of that queue is
/// granted besides its rows.
const DECLARED_B: &str = "%R~{emq}:version ~emq:{b}:wait ~emq:{b}:prio ~emq:{b}:active ~emq:{b}:delayed \
                          ~emq:{b}:meta ~emq:{b}:events ~emq:{b}:completed ~emq:{b}:failed";

fn setuser(admin: &mut Conn, s: &Server, who: &str, rules: &str) -> Conn {
    s.user(admin, who, &format!("resetkeys {rules}"))
}

/// The keys a verb finds itself (rows in CLAIM, STALLED, EXTENDS, retention; the fence key)
/// are judged as the server judges a whole command: one selector must grant the command,
/// its declared keys and the found key. A user whose rows are granted only by a second
/// selector with `+get` can neither claim nor complete (before, it could claim — the row was
/// written — and then not complete); a user whose one selector grants it all does both.
#[test]
fn a_found_key_needs_the_selector_that_grants_the_command() {
    let s = Server::quiet();
    let mut root = s.conn();
    let q = Q::new("b");
    let declared = DECLARED_B;
    let mut split =
        setuser(&mut root, &s, "split", &format!("{declared} -@all +@emq (~emq:{{b}}:job:* -@all +get)"));
    let mut whole =
        setuser(&mut root, &s, "whole", &format!("-@all ({declared} ~emq:{{b}}:job:* -@all +@emq)"));
    for i in 1..=2 {
        assert_eq!(q.enqueue(&mut root, &jid(i), &[]), Reply::Int(1));
    }

    // The split user: the row is granted only by a selector that does not grant EMQ.CLAIM.
    let r = unchanged(&mut root, |_| q.run(&mut split, "EMQ.CLAIM", "", &[b"t", b"60000"]));
    assert!(denied(&r), "{r:?}");
    assert_eq!(root.call(&[b"HGET", q.job(&jid(1)).as_bytes(), b"st"]), Reply::Bulk(b"wait".to_vec()));
    // It may still GET a row through its second selector (a plain command, one selector).
    assert!(!denied(&split.call(&[b"GET", q.job(&jid(1)).as_bytes()])));

    // The whole user: every key in the one selector that grants the command.
    let r = q.run(&mut whole, "EMQ.CLAIM", "", &[b"t", b"60000"]);
    assert_eq!(r.array()[0].array()[0].str(), jid(1), "{r:?}");
    assert_eq!(q.run(&mut whole, "EMQ.COMPLETE", &jid(1), &[b"t", b"ok"]), Reply::Int(1));
    let r = whole.call(&[b"TRA.JOB", b"1", q.job(&jid(2)).as_bytes()]);
    assert!(!denied(&r), "{r:?}");

    // No client sends a marker word; one that does has the argument after it judged as a key
    // as well — a stricter check, never a looser one.
    let marker = b"\x01trafikey:found:read";
    let r =
        unchanged(&mut root, |_| q.run(&mut whole, "EMQ.ENQUEUE", &jid(3), &[marker, b"emq:{elsewhere}:x"]));
    assert!(denied(&r), "{r:?}");
    let r = q.run(&mut whole, "EMQ.ENQUEUE", &jid(3), &[marker, q.job(&jid(3)).as_bytes()]);
    assert_eq!(r, Reply::Int(1));
}

/// A found key is judged for the access the verb makes of it: CLAIM reads and rewrites each
/// row it takes, so a user who may only read the rows, or only write them, claims nothing and
/// writes nothing; reading and writing them, it claims.
#[test]
fn a_found_key_needs_the_access_the_verb_makes_of_it() {
    let s = Server::quiet();
    let mut root = s.conn();
    let q = Q::new("b");
    let declared = DECLARED_B;
    assert_eq!(q.enqueue(&mut root, &jid(1), &[]), Reply::Int(1));
    for (who, rows) in [("reads", "%R~emq:{b}:job:*"), ("writes", "%W~emq:{b}:job:*")] {
        let mut c = setuser(&mut root, &s, who, &format!("{declared} {rows} -@all +@emq"));
        let r = unchanged(&mut root, |_| q.run(&mut c, "EMQ.CLAIM", "", &[b"t", b"60000"]));
        assert!(denied(&r), "{who}: {r:?}");
    }
    let mut c = setuser(&mut root, &s, "both", &format!("{declared} %RW~emq:{{b}}:job:* -@all +@emq"));
    let r = q.run(&mut c, "EMQ.CLAIM", "", &[b"t", b"60000"]);
    assert_eq!(r.array()[0].array()[0].str(), jid(1), "{r:?}");
}

/// A found key the verb only reads needs read access, and write access alone does not
/// grant it: EXTENDS reads each row (it writes `active`), TRA.JOB reads `active` or
/// `delayed` for a held or delayed job's deadline. A user who may only write those keys is
/// refused with NOPERM and nothing is written; one who may read them is answered.
#[test]
fn a_found_key_the_verb_reads_needs_read_access() {
    let s = Server::quiet();
    let mut root = s.conn();
    let q = Q::new("b");
    let declared = DECLARED_B;
    assert_eq!(q.enqueue(&mut root, &jid(1), &[]), Reply::Int(1));
    let r = q.run(&mut root, "EMQ.CLAIM", "", &[b"t", b"60000"]);
    assert_eq!(r.array()[0].array()[0].str(), jid(1), "{r:?}");
    assert_eq!(q.run(&mut root, "EMQ.SCHEDULE", &jid(2), &[b"+600000", b"job", b"{}"]), Reply::Int(1));
    let extends = |c: &mut Conn| {
        c.call(&[b"EMQ.EXTENDS", b"1", q.k("active").as_bytes(), b"60000", jid(1).as_bytes(), b"t"])
    };
    let job = |c: &mut Conn, n: u64| c.call(&[b"TRA.JOB", b"1", q.job(&jid(n)).as_bytes()]);

    // EXTENDS: the rows write-only, then readable.
    let mut c = setuser(&mut root, &s, "wrows", &format!("{declared} %W~emq:{{b}}:job:* -@all +@emq"));
    let r = unchanged(&mut root, |_| extends(&mut c));
    assert_eq!(r, Reply::Error("NOPERM No permissions to access a key".into()), "EXTENDS");
    let mut c = setuser(&mut root, &s, "rrows", &format!("{declared} %R~emq:{{b}}:job:* -@all +@emq"));
    let r = extends(&mut c);
    assert!(r.array()[0].int() > 0, "EXTENDS with readable rows: {r:?}");

    // TRA.JOB: the row readable, the set with the job's deadline write-only, then readable.
    for (n, set) in [(1, "active"), (2, "delayed")] {
        let rules = |access: &str| format!("%R~emq:{{b}}:job:* {access}~emq:{{b}}:{set} -@all +@emq");
        let mut c = setuser(&mut root, &s, &format!("w{set}"), &rules("%W"));
        let r = unchanged(&mut root, |_| job(&mut c, n));
        assert_eq!(r, Reply::Error("NOPERM No permissions to access a key".into()), "TRA.JOB, {set}");
        let mut c = setuser(&mut root, &s, &format!("r{set}"), &rules("%R"));
        let r = job(&mut c, n);
        assert!(r.err().is_none() && !r.is_nil(), "TRA.JOB with {set} readable: {r:?}");
    }
}
