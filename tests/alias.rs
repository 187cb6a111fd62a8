//! Custom ids and the bulk add against a real server, as src/CONTRACT.md and
//! src/verbs/README.md state them: `ALIAS key` on ENQUEUE, SCHEDULE and TRA.ADD (a live alias
//! answers 0 and writes nothing; the entry goes with its row on every path that deletes one),
//! SCHEDULE's `delayed` event naming the job, TRA.ADD's all-or-nothing batch with its rows
//! declared through a key spec; refusals leave the digest as it was, replicas hold the same,
//! and ACL judges the alias hash and every row as the caller's.
// A test may panic: that is how it fails. The module's own rules are for src/.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

use trafikey_support::*;

/// The alias hash as a map alias → id.
fn aliases(c: &mut Conn, q: &Q) -> Vec<(String, String)> {
    let v = c.call(&[b"HGETALL", q.k("alias").as_bytes()]).strings();
    let mut out: Vec<(String, String)> = v.chunks(2).map(|p| (p[0].clone(), p[1].clone())).collect();
    out.sort();
    out
}

fn job_map(c: &mut Conn, q: &Q, id: &str) -> Vec<String> {
    let r = c.call(&[b"TRA.JOB", b"1", q.job(id).as_bytes()]);
    r.array()
        .iter()
        .map(|v| match v {
            Reply::Int(i) => i.to_string(),
            v if v.is_nil() => "nil".to_string(),
            v => v.str(),
        })
        .collect()
}

/// The newest `name` event of job `id`, from its `event` word on.
fn event_of(c: &mut Conn, q: &Q, name: &str, id: &str) -> Vec<String> {
    let ev = q.events(c);
    ev.into_iter().rev().find(|e| e.len() > 3 && e[1] == name && e[3] == id).unwrap_or_default()
}

fn remove(c: &mut Conn, q: &Q, id: &str) -> Reply {
    c.call_v(&q.cmd("TRA.REMOVE", id, &keys_of("TRA.REMOVE"), &[]))
}

/// The `name` of every argument doc in a `COMMAND DOCS` reply, depth first.
fn arg_names(r: &Reply, out: &mut Vec<String>) {
    if let Reply::Array(v) = r {
        if v.len() >= 2 && v[0] == Reply::Bulk(b"name".to_vec()) {
            out.push(v[1].str());
        }
        v.iter().for_each(|x| arg_names(x, out));
    }
}

/// Every string of a reply, nested arrays flattened.
fn flat(r: &Reply, out: &mut Vec<String>) {
    match r {
        Reply::Array(v) => v.iter().for_each(|x| flat(x, out)),
        Reply::Int(i) => out.push(i.to_string()),
        x if x.is_nil() => {}
        x => out.push(x.str()),
    }
}

#[test]
fn an_alias_names_one_live_job_and_its_events_carry_it() {
    let (_s, mut c, q) = queue_on_quiet_server("al");
    assert_eq!(q.enqueue(&mut c, &jid(1), &[b"ALIAS", b"order-7"]), Reply::Int(1));
    assert_eq!(aliases(&mut c, &q), [("order-7".to_string(), jid(1))]);
    // The same key again, under another id, by ENQUEUE or SCHEDULE: 0, nothing written.
    unchanged(&mut c, |c| {
        assert_eq!(q.enqueue(c, &jid(2), &[b"ALIAS", b"order-7"]), Reply::Int(0));
        let r = q.run(c, "EMQ.SCHEDULE", &jid(3), &[b"+1000", b"job", b"{}", b"ALIAS", b"order-7"]);
        assert_eq!(r, Reply::Int(0));
    });
    let r = q.run(&mut c, "EMQ.SCHEDULE", &jid(4), &[b"+60000", b"mail", b"{}", b"ALIAS", b"order-8"]);
    assert_eq!(r, Reply::Int(1));
    let r = q.run(&mut c, "EMQ.SCHEDULE", &jid(5), &[b"+60000", b"mail", b"{}"]);
    assert_eq!(r, Reply::Int(1));
    let ev = q.events(&mut c);
    assert_eq!(ev[0], ["event", "added", "id", &jid(1), "name", "job", "prio", "0", "alias", "order-7"]);
    assert_eq!(&ev[1][..4], ["event", "delayed", "id", &jid(4)]);
    assert_eq!(ev[1][4], "due");
    assert_eq!(ev[1][6..], ["name", "mail", "alias", "order-8"]);
    assert_eq!(ev[2][6..], ["name", "mail"], "no ALIAS, no alias fact");
    // TRA.JOB: `alias`, null without one.
    let alias_of = |c: &mut Conn, id: &str| {
        let m = job_map(c, &q, id);
        let at = m.iter().position(|k| k == "alias").expect("an alias entry");
        m[at + 1].clone()
    };
    assert_eq!(alias_of(&mut c, &jid(1)), "order-7");
    assert_eq!(alias_of(&mut c, &jid(5)), "nil");
    let snap = q.check_invariant(&mut c);
    assert_eq!(snap.field(&jid(1), "k").as_deref(), Some("order-7"));
    assert_eq!(snap.field(&jid(5), "k"), None);
}

/// A finish under KEEP 0 AGE 0 that also retires an older job whose alias entry is already gone
/// (deleted by hand here): the retirement finds nothing of its own to delete in the alias
/// hash, and the finish's own entry was the last one there, so deleting it deletes the hash.
/// Both jobs go, with the hash, here and on the replica (`scripts/memcheck alias` watches the
/// server for a handle left on the deleted hash).
#[test]
fn a_finish_that_empties_the_alias_hash_beside_a_retirement_with_nothing_to_unalias() {
    let primary = Server::quiet();
    let replica = Server::quiet();
    let mut r = replica.follow(&primary);
    let mut c = primary.conn();
    let q = Q::new("lastalias");
    let claim = |c: &mut Conn| q.run(c, "EMQ.CLAIM", "", &[b"t", b"60000"]).array()[0].array()[0].str();
    q.enqueue(&mut c, &jid(1), &[b"ALIAS", b"old"]);
    assert_eq!(claim(&mut c), jid(1));
    assert_eq!(q.run(&mut c, "EMQ.COMPLETE", &jid(1), &[b"t", b"ok", b"KEEP", b"-1"]), Reply::Int(1));
    assert_eq!(c.call(&[b"HDEL", q.k("alias").as_bytes(), b"old"]), Reply::Int(1));
    q.enqueue(&mut c, &jid(2), &[b"ALIAS", b"new"]);
    assert_eq!(aliases(&mut c, &q), [("new".to_string(), jid(2))]);
    assert_eq!(claim(&mut c), jid(2));
    // AGE 0 retires every job finished before now: jid(1), a millisecond or more ago.
    std::thread::sleep(std::time::Duration::from_millis(3));
    let done = q.run(&mut c, "EMQ.COMPLETE", &jid(2), &[b"t", b"ok", b"KEEP", b"0", b"AGE", b"0"]);
    assert_eq!(done, Reply::Int(1));
    for key in [q.k("alias"), q.k(&format!("job:{}", jid(1))), q.k(&format!("job:{}", jid(2)))] {
        assert_eq!(c.call(&[b"EXISTS", key.as_bytes()]), Reply::Int(0), "{key}");
    }
    q.check_invariant(&mut c);
    c.call(&[b"WAIT", b"1", b"5000"]);
    wait_for(|| digest(&mut r) == digest(&mut c), "the replica holds what the primary holds");
}

#[test]
fn an_alias_goes_with_its_row_on_every_path_that_deletes_one() {
    let (_s, mut c, q) = queue_on_quiet_server("gone");
    let tok = |c: &mut Conn, t: &str| {
        let r = q.run(c, "EMQ.CLAIM", "", &[t.as_bytes(), b"60000"]);
        r.array()[0].array()[0].str()
    };
    let live =
        |c: &mut Conn, a: &str| c.call(&[b"HEXISTS", q.k("alias").as_bytes(), a.as_bytes()]) == Reply::Int(1);
    // TRA.REMOVE
    q.enqueue(&mut c, &jid(1), &[b"ALIAS", b"a1"]);
    assert_eq!(remove(&mut c, &q, &jid(1)), Reply::Int(1));
    assert!(!live(&mut c, "a1"));
    // The events that may be a job's last name it by its alias too: its row may be gone.
    assert_eq!(event_of(&mut c, &q, "removed", &jid(1))[4..], ["prev", "wait", "alias", "a1"]);
    assert_eq!(q.enqueue(&mut c, &jid(2), &[b"ALIAS", b"a1"]), Reply::Int(1), "the key is free again");
    // COMPLETE under KEEP 0
    assert_eq!(tok(&mut c, "t2"), jid(2));
    assert_eq!(q.run(&mut c, "EMQ.COMPLETE", &jid(2), &[b"t2", b"ok", b"KEEP", b"0"]), Reply::Int(1));
    assert!(!live(&mut c, "a1"));
    assert_eq!(event_of(&mut c, &q, "completed", &jid(2))[4..], ["attempt", "1", "alias", "a1"]);
    // FAIL under KEEP 0
    q.enqueue(&mut c, &jid(3), &[b"ALIAS", b"a3"]);
    tok(&mut c, "t3");
    assert!(q.run(&mut c, "EMQ.FAIL", &jid(3), &[b"t3", b"no", b"KEEP", b"0"]).err().is_none());
    assert!(!live(&mut c, "a3"));
    let failed = event_of(&mut c, &q, "failed", &jid(3));
    assert_eq!(failed[4..], ["error", "no", "attempt", "1", "attempts", "1", "alias", "a3"]);
    // Retention: KEEP 1 deletes the older completed job, and its alias.
    for (i, a) in [(4, "a4"), (5, "a5")] {
        q.enqueue(&mut c, &jid(i), &[b"ALIAS", a.as_bytes()]);
        tok(&mut c, "t");
        assert_eq!(q.run(&mut c, "EMQ.COMPLETE", &jid(i), &[b"t", b"ok", b"KEEP", b"1"]), Reply::Int(1));
    }
    assert!(!live(&mut c, "a4") && live(&mut c, "a5"));
    // TRA.CLEAN
    std::thread::sleep(std::time::Duration::from_millis(3));
    let r =
        c.call(&[b"TRA.CLEAN", b"2", q.k("completed").as_bytes(), q.k("events").as_bytes(), b"GRACE", b"0"]);
    assert_eq!(r.strings(), [jid(5)]);
    assert!(!live(&mut c, "a5"));
    // TRA.DRAIN
    q.enqueue(&mut c, &jid(6), &[b"ALIAS", b"a6"]);
    q.enqueue(&mut c, &jid(7), &[]);
    let drain = q.cmd("TRA.DRAIN", "", &["wait", "prio", "delayed", "events"], &[]);
    assert_eq!(c.call_v(&drain), Reply::Int(2));
    assert!(!live(&mut c, "a6"));
    // TRA.COMPLETES under keep-completed 0
    c.call(&[b"CONFIG", b"SET", b"trafikey.keep-completed", b"0"]);
    q.enqueue(&mut c, &jid(8), &[b"ALIAS", b"a8"]);
    tok(&mut c, "t8");
    let r = q.run(&mut c, "TRA.COMPLETES", "", &[jid(8).as_bytes(), b"t8", b"ok"]);
    assert_eq!(r.ints(), [1]);
    assert!(!live(&mut c, "a8"));
    assert_eq!(event_of(&mut c, &q, "completed", &jid(8))[4..], ["attempt", "1", "alias", "a8"]);
    // TRA.OBLITERATE deletes the hash with the queue's keys.
    q.enqueue(&mut c, &jid(9), &[b"ALIAS", b"a9"]);
    let mut ob: Vec<Vec<u8>> = vec![b"TRA.OBLITERATE".to_vec(), b"8".to_vec()];
    for r in ["wait", "prio", "active", "delayed", "completed", "failed", "meta", "events"] {
        ob.push(q.k(r).into_bytes());
    }
    assert_eq!(c.call_v(&ob), Reply::Int(0));
    assert_eq!(c.call(&[b"EXISTS", q.k("alias").as_bytes()]), Reply::Int(0));
    q.check_invariant(&mut c);
}

/// An entry that names another job (written by a client) is left alone when a row with that
/// `k` goes.
#[test]
fn only_an_entry_that_still_names_the_job_is_deleted() {
    let (_s, mut c, q) = queue_on_quiet_server("other");
    q.enqueue(&mut c, &jid(1), &[b"ALIAS", b"x"]);
    c.call(&[b"HSET", q.k("alias").as_bytes(), b"x", jid(9).as_bytes()]);
    assert_eq!(remove(&mut c, &q, &jid(1)), Reply::Int(1));
    assert_eq!(aliases(&mut c, &q), [("x".to_string(), jid(9))]);
}

#[test]
fn alias_refusals_write_nothing() {
    let (_s, mut c, q) = queue_on_quiet_server("refuse");
    q.enqueue(&mut c, &jid(1), &[b"ALIAS", b"k"]);
    let long = vec![b'a'; 4097];
    unchanged(&mut c, |c| {
        let r = q.enqueue(c, &jid(2), &[b"ALIAS", b""]);
        assert_eq!(r.error(), "EMQARG ALIAS must be 1..=4096 bytes");
        assert_eq!(q.enqueue(c, &jid(2), &[b"ALIAS", &long]).error(), "EMQARG ALIAS must be 1..=4096 bytes");
        assert_eq!(q.enqueue(c, &jid(2), &[b"ALIAS"]).error(), "EMQSHAPE option ALIAS needs a value");
        let r = q.run(c, "EMQ.SCHEDULE", &jid(2), &[b"+5", b"n", b"{}", b"ALIAS", b"a", b"ALIAS", b"b"]);
        assert_eq!(r.error(), "EMQSHAPE option ALIAS given twice");
    });
    // The alias hash of another type: WRONGTYPE, before anything is written.
    c.call(&[b"SET", b"emq:{refuse2}:alias", b"x"]);
    let q2 = Q::new("refuse2");
    unchanged(&mut c, |c| {
        let r = q2.enqueue(c, &jid(3), &[b"ALIAS", b"k"]);
        assert!(r.error().starts_with("WRONGTYPE"), "{r:?}");
        let r = c.call_v(&q2.add_cmd(&[(&jid(4), "n", &[]), (&jid(5), "n", &["ALIAS", "k"])]));
        assert!(r.error().starts_with("WRONGTYPE"), "{r:?}");
    });
    assert_eq!(q2.enqueue(&mut c, &jid(3), &[]), Reply::Int(1), "without ALIAS the hash is not opened");
}

#[test]
fn the_bulk_add_creates_each_job_as_enqueue_or_schedule_would() {
    let (_s, mut c, q) = queue_on_quiet_server("bulk");
    q.enqueue(&mut c, &jid(1), &[]);
    q.enqueue(&mut c, &jid(2), &[b"ALIAS", b"taken"]);
    let (j1, j3, j4, j5, j6, j7, j8) = (jid(1), jid(3), jid(4), jid(5), jid(6), jid(7), jid(8));
    let r = c.call_v(&q.add_cmd(&[
        (&j3, "a", &[]),
        (&j1, "exists", &[]),
        (&j4, "b", &["PRIORITY", "5", "ALIAS", "k4"]),
        (&j5, "c", &["DELAY", "+60000", "ALIAS", "k5", "ATTEMPTS", "3"]),
        (&j3, "again", &[]),
        (&j6, "d", &["ALIAS", "taken"]),
        (&j7, "e", &["ALIAS", "k4"]),
        (&j8, "f", &["LIFO"]),
    ]));
    assert_eq!(r.ints(), [1, 0, 1, 1, 0, 0, 0, 1]);
    let snap = q.check_invariant(&mut c);
    // LIFO went to the front (right end), the rest to the back.
    assert_eq!(
        c.call(&[b"LRANGE", q.k("wait").as_bytes(), b"0", b"-1"]).strings(),
        [j3.clone(), jid(2), j1.clone(), j8.clone()]
    );
    assert_eq!(snap.sets["prio"], std::slice::from_ref(&j4));
    assert_eq!(snap.sets["delayed"], std::slice::from_ref(&j5));
    assert_eq!(snap.field(&j5, "a").as_deref(), Some("3"));
    assert_eq!(snap.field(&j3, "n").as_deref(), Some("a"), "the first of a repeated id is created");
    assert_eq!(snap.rows.len(), 6);
    assert_eq!(
        aliases(&mut c, &q),
        [("k4".to_string(), j4.clone()), ("k5".to_string(), j5.clone()), ("taken".to_string(), jid(2))]
    );
    let ev = q.events(&mut c);
    assert_eq!(ev.len(), 2 + 4);
    assert_eq!(ev[2], ["event", "added", "id", &j3, "name", "a", "prio", "0"]);
    assert_eq!(ev[3], ["event", "added", "id", &j4, "name", "b", "prio", "5", "alias", "k4"]);
    assert_eq!(ev[4][..4], ["event", "delayed", "id", &j5]);
    assert_eq!(ev[4][6..], ["name", "c", "alias", "k5"]);
    // COMMAND GETKEYS sees every row.
    let v = q.add_cmd(&[(&jid(20), "a", &[]), (&jid(21), "b", &["LIFO"])]);
    let mut g: Vec<Vec<u8>> = vec![b"COMMAND".to_vec(), b"GETKEYS".to_vec()];
    g.extend(v);
    let keys = c.call_v(&g).strings();
    assert_eq!(
        keys,
        [q.k("wait"), q.k("prio"), q.k("delayed"), q.k("events"), q.job(&jid(20)), q.job(&jid(21))]
    );
}

#[test]
fn a_refused_bulk_add_writes_nothing() {
    let (s, mut c, q) = queue_on_quiet_server("all");
    q.enqueue(&mut c, &jid(1), &[]);
    c.call(&[b"SET", q.job(&jid(9)).as_bytes(), b"x"]);
    let (a, b) = (jid(2), jid(3));
    let cases: Vec<(Vec<Vec<u8>>, &str)> = vec![
        (q.add_cmd(&[]), "EMQARG n must be 1..=250"),
        (
            q.add_cmd(&[(&a, "x", &[]), (&b, "y", &["PRIORITY", "9999999"])]),
            "EMQARG PRIORITY must be 0..=2097151",
        ),
        (q.add_cmd(&[(&a, "x", &[]), (&b, "", &[])]), "EMQARG name must be 1..=256 bytes"),
        (q.add_cmd(&[(&a, "x", &[]), (&b, "y", &["ALIAS", ""])]), "EMQARG ALIAS must be 1..=4096 bytes"),
        (q.add_cmd(&[(&a, "x", &["DELAY", "+9007199254740992"])]), "EMQARG"),
        (q.add_cmd(&[(&a, "x", &[]), ("JOB!", "y", &[])]), "EMQID malformed job id JOB!"),
        (q.add_cmd(&[(&a, "x", &["LIFO", "DELAY", "5"])]), "EMQSHAPE LIFO does not go with DELAY"),
        (q.add_cmd(&[(&a, "x", &["DELAY", "-5"])]), "EMQSHAPE when must be <ms> or +<ms>"),
        (q.add_cmd(&[(&a, "x", &["KEEP", "5"])]), "EMQSHAPE unknown option KEEP"),
        (q.add_cmd(&[(&a, "x", &["PRIORITY"])]), "EMQSHAPE option PRIORITY needs a value"),
        (q.add_cmd(&[(&a, "x", &[]), (&jid(9), "y", &[])]), "WRONGTYPE"),
    ];
    unchanged(&mut c, |c| {
        for (v, want) in &cases {
            let r = c.call_v(v);
            assert!(r.error().starts_with(want), "{want}: {r:?}");
        }
        // The count and the rows: n not a number, fewer rows than n, a job per row, layout.
        let mut v = q.add_cmd(&[(&a, "x", &[])]);
        v[6] = b"x".to_vec();
        assert_eq!(c.call_v(&v).error(), "EMQSHAPE n is not an integer");
        let mut v = q.add_cmd(&[(&a, "x", &[])]);
        v[6] = b"5".to_vec();
        assert_eq!(c.call_v(&v).error(), "EMQSHAPE TRA.ADD needs 5 keys after n");
        let mut v = q.add_cmd(&[(&a, "x", &[]), (&b, "y", &[])]);
        v.truncate(v.len() - 3);
        assert_eq!(c.call_v(&v).error(), "EMQSHAPE 2 row keys but 1 jobs");
        let mut v = q.add_cmd(&[(&a, "x", &[])]);
        v.push(b"y".to_vec());
        assert!(c.call_v(&v).error().starts_with("EMQSHAPE TRA.ADD takes"), "a job cut short");
        let mut v = q.add_cmd(&[(&a, "x", &["LIFO"])]);
        *v.last_mut().unwrap() = b"PRIORITY".to_vec();
        let k = v.len() - 2;
        v[k] = b"9".to_vec();
        assert!(c.call_v(&v).error().starts_with("EMQSHAPE TRA.ADD takes"), "k beyond the words");
        let mut v = q.add_cmd(&[(&a, "x", &[])]);
        v[7] = Q::new("elsewhere").job(&a).into_bytes();
        assert_eq!(c.call_v(&v).error(), "EMQLAYOUT all keys must name one queue");
        let mut v = q.add_cmd(&[(&a, "x", &[])]);
        v[7] = q.k("wait").into_bytes();
        assert_eq!(c.call_v(&v).error(), "EMQLAYOUT key 5 must be emq:{Q}:job:<ID>");
    });
    // Shorter than `n`'s position: the server's arity error (its key spec reads `n` there),
    // and the server lives — also through COMMAND GETKEYS and as a user with key rules.
    let short = &q.add_cmd(&[(&a, "x", &[])])[..6];
    unchanged(&mut c, |c| {
        assert!(
            c.call_v(short).error().starts_with("ERR wrong number of arguments"),
            "{:?}",
            c.call_v(short)
        );
        let mut g: Vec<Vec<u8>> = vec![b"COMMAND".to_vec(), b"GETKEYS".to_vec()];
        g.extend(short.iter().cloned());
        assert!(c.call_v(&g).err().is_some());
    });
    let mut few = s.user(&mut c, "few", "~emq:{all}:* %R~{emq}:* +@all");
    assert!(few.call_v(short).error().starts_with("ERR wrong number of arguments"));
    assert_eq!(c.call(&[b"PING"]), Reply::Simple("PONG".into()));
    // 251 jobs: refused as a whole.
    let many: Vec<String> = (100..351).map(jid).collect();
    let jobs: Vec<(&str, &str, &[&str])> = many.iter().map(|i| (i.as_str(), "n", &[][..])).collect();
    unchanged(&mut c, |c| assert_eq!(c.call_v(&q.add_cmd(&jobs)).error(), "EMQARG n must be 1..=250"));
    assert_eq!(c.call_v(&q.add_cmd(&jobs[..250])).ints().iter().sum::<i64>(), 250);
    c.call(&[b"DEL", q.job(&jid(9)).as_bytes()]);
    q.check_invariant(&mut c);
}

#[test]
fn replicas_hold_what_the_primary_holds() {
    let primary = Server::quiet();
    let replica = Server::quiet();
    let mut p = primary.conn();
    let mut r = replica.follow(&primary);
    let q = Q::new("rep");
    q.enqueue(&mut p, &jid(1), &[b"ALIAS", b"one"]);
    q.run(&mut p, "EMQ.SCHEDULE", &jid(2), &[b"+100000", b"s", b"{}", b"ALIAS", b"two"]);
    let (a, b, d) = (jid(3), jid(4), jid(5));
    p.call_v(&q.add_cmd(&[
        (&a, "x", &["ALIAS", "three"]),
        (&b, "y", &["DELAY", "+5000"]),
        (&d, "z", &["PRIORITY", "2"]),
    ]));
    remove(&mut p, &q, &jid(1));
    assert_eq!(p.call(&[b"WAIT", b"1", b"5000"]), Reply::Int(1));
    assert_eq!(digest(&mut p), digest(&mut r));
    assert_eq!(aliases(&mut r, &q).len(), 2);
}

#[test]
fn acl_judges_the_alias_hash_and_every_row_as_the_callers() {
    let s = Server::quiet();
    let mut admin = s.conn();
    let q = Q::new("acl");
    // May touch the queue but not its alias hash, nor the row of jid(66).
    let mut w = s.user(
        &mut admin,
        "w",
        "-@all +@emq resetkeys %R~{emq}:* ~emq:{acl}:wait ~emq:{acl}:prio ~emq:{acl}:delayed \
         ~emq:{acl}:events ~emq:{acl}:job:JOB0000000000? ~emq:{acl}:active ~emq:{acl}:completed \
         ~emq:{acl}:failed",
    );
    unchanged(&mut admin, |_| {
        assert!(q.enqueue(&mut w, &jid(1), &[b"ALIAS", b"k"]).error().starts_with("NOPERM"));
        let r = q.run(&mut w, "EMQ.SCHEDULE", &jid(1), &[b"+5", b"n", b"{}", b"ALIAS", b"k"]);
        assert!(r.error().starts_with("NOPERM"));
        let r = w.call_v(&q.add_cmd(&[(&jid(1), "n", &[]), (&jid(2), "n", &["ALIAS", "k"])]));
        assert!(r.error().starts_with("NOPERM"), "{r:?}");
        // A row the user may not write: the server refuses before the module runs.
        let r = w.call_v(&q.add_cmd(&[(&jid(1), "n", &[]), (&jid(66), "n", &[])]));
        assert!(r.error().starts_with("NOPERM"), "{r:?}");
    });
    assert_eq!(w.call_v(&q.add_cmd(&[(&jid(1), "n", &[]), (&jid(2), "n", &[])])).ints(), [1, 1]);
    // With the alias hash present, deleting a job without an alias does not open it.
    q.enqueue(&mut admin, &jid(3), &[b"ALIAS", b"k"]);
    let mut rm = q.cmd(
        "TRA.REMOVE",
        &jid(1),
        &["job", "wait", "prio", "active", "delayed", "completed", "failed", "events"],
        &[],
    );
    assert_eq!(w.call_v(&rm), Reply::Int(1));
    // An aliased one: NOPERM, nothing written.
    rm = q.cmd(
        "TRA.REMOVE",
        &jid(3),
        &["job", "wait", "prio", "active", "delayed", "completed", "failed", "events"],
        &[],
    );
    unchanged(&mut admin, |_| assert!(w.call_v(&rm).error().starts_with("NOPERM")));
    // The alias hash gone (deleted by hand), the row still naming its alias: a finish under
    // KEEP 0 looks the hash up, finds none and opens nothing of it.
    assert_eq!(admin.call(&[b"DEL", q.k("alias").as_bytes()]), Reply::Int(1));
    assert_eq!(claim_all(&q, &mut admin, "t").len(), 2);
    assert_eq!(complete(&q, &mut w, &jid(3), "t", &[b"KEEP", b"0"]), Reply::Int(1));
    assert_eq!(admin.call(&[b"EXISTS", q.job(&jid(3)).as_bytes()]), Reply::Int(0));
}

#[test]
fn command_docs_list_the_new_forms() {
    let (_s, mut c, _q) = queue_on_quiet_server("docs");
    let docs = |c: &mut Conn, name: &[u8]| {
        let mut out = Vec::new();
        flat(&c.call(&[b"COMMAND", b"DOCS", name]), &mut out);
        out
    };
    let add = docs(&mut c, b"TRA.ADD");
    let mut names = Vec::new();
    arg_names(&c.call(&[b"COMMAND", b"DOCS", b"TRA.ADD"]), &mut names);
    let want =
        ["numkeys", "wait", "prio", "delayed", "events", "n", "job", "job", "name", "data", "k", "option"];
    assert_eq!(names, want);
    // The row keys take the tail's key spec (index 4), several of them.
    let at = add.iter().rposition(|s| s == "key_spec_index").unwrap();
    assert_eq!(add[at + 1..at + 4], ["4", "flags", "multiple"]);
    for verb in [&b"EMQ.ENQUEUE"[..], b"EMQ.SCHEDULE"] {
        let d = docs(&mut c, verb);
        assert!(d.windows(2).any(|w| w[0] == "token" && w[1] == "ALIAS"), "{d:?}");
    }
}
