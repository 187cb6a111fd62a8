//! `TRA.SETDATA 1 job data` against a real server, as src/CONTRACT.md ("Replacing data") and
//! src/verbs/README.md state it: any client replaces a job's data in every state, held or not,
//! and the next CLAIM and TRA.JOB read the new data; nothing else in the row changes and no
//! event is written; creation still never overwrites a row; refusals (no row, data over
//! `max-payload`, shape, id, layout, type, the fence, a full server, ACL) write nothing; the
//! command's flags, categories and key spec; replicas and the AOF hold the new data, which
//! reached them as an `HSET`, never as the command.
// A test may panic: that is how it fails. The module's own rules are for src/.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

use std::collections::HashMap;

use trafikey_support::*;

fn setdata(c: &mut Conn, q: &Q, id: &str, data: &[u8]) -> Reply {
    q.run(c, "TRA.SETDATA", id, &[data])
}

/// The row's fields, as HGETALL gives them.
fn row(c: &mut Conn, q: &Q, id: &str) -> HashMap<String, String> {
    let r = c.call(&[b"HGETALL", q.job(id).as_bytes()]);
    r.array().chunks(2).map(|p| (p[0].str(), p[1].str())).collect()
}

/// TRA.JOB's `data`.
fn job_data(c: &mut Conn, q: &Q, id: &str) -> String {
    let r = c.call(&[b"TRA.JOB", b"1", q.job(id).as_bytes()]);
    let at = r.array().chunks(2).position(|p| p[0].str() == "data").expect("TRA.JOB shows data");
    r.array()[2 * at + 1].str()
}

/// One CLAIM of one job: its id, data and attempt.
fn claim_one(c: &mut Conn, q: &Q, token: &str) -> (String, String, i64) {
    let r = q.run(c, "EMQ.CLAIM", "", &[token.as_bytes(), b"600000"]);
    let job = r.array()[0].array();
    (job[0].str(), job[2].str(), job[3].int())
}

/// SETDATA on `id`, checked: it answers 1, the row differs from before in `d` alone, TRA.JOB
/// shows the new data and the events stream is as it was.
fn replaces(c: &mut Conn, q: &Q, id: &str, data: &str) {
    let mut before = row(c, q, id);
    let events = q.events(c);
    assert_eq!(setdata(c, q, id, data.as_bytes()), Reply::Int(1), "{id}");
    before.insert("d".into(), data.into());
    assert_eq!(row(c, q, id), before, "{id}: only the data changed");
    assert_eq!(job_data(c, q, id), data);
    assert_eq!(q.events(c), events, "{id}: no event");
}

#[test]
fn the_data_is_replaced_in_every_state_and_the_next_reader_sees_it() {
    let (_s, mut c, q) = queue_on_quiet_server("sd");
    // wait, prio, delayed, active, completed, failed.
    assert_eq!(q.enqueue(&mut c, &jid(1), &[b"ATTEMPTS", b"3"]), Reply::Int(1));
    assert_eq!(q.enqueue(&mut c, &jid(2), &[b"ATTEMPTS", b"3"]), Reply::Int(1));
    assert_eq!(q.enqueue(&mut c, &jid(3), &[b"ATTEMPTS", b"3"]), Reply::Int(1));
    for (n, tok) in [(1, "t1"), (2, "t2"), (3, "t3")] {
        assert_eq!(claim_one(&mut c, &q, tok).0, jid(n));
    }
    assert_eq!(q.run(&mut c, "EMQ.COMPLETE", &jid(2), &[b"t2", b"ok"]), Reply::Int(1));
    let failed = q.run(&mut c, "EMQ.FAIL", &jid(3), &[b"t3", b"boom", b"FINAL"]);
    assert_eq!(failed, Reply::Simple("failed".into()));
    assert_eq!(q.enqueue(&mut c, &jid(4), &[]), Reply::Int(1));
    assert_eq!(q.enqueue(&mut c, &jid(5), &[b"PRIORITY", b"3"]), Reply::Int(1));
    assert_eq!(q.run(&mut c, "EMQ.SCHEDULE", &jid(6), &[b"+600000", b"job", b"{}"]), Reply::Int(1));
    let snap = q.check_invariant(&mut c);
    let states: Vec<Option<String>> = (1..=6).map(|n| snap.state_of(&jid(n))).collect();
    let want = ["active", "completed", "failed", "wait", "prio", "delayed"];
    assert_eq!(states, want.map(|s| Some(s.to_string())));

    // Every state, from a client that holds nothing; the active job's token stays its holder's.
    let mut other = _s.conn();
    for n in 1..=6 {
        replaces(&mut other, &q, &jid(n), &format!("{{\"step\":{n}}}"));
    }
    assert_eq!(q.check_invariant(&mut c).sets, snap.sets, "no job moved");

    // The next claim of each hands out the new data: the ready ones first (wait's, then prio's).
    assert_eq!(claim_one(&mut c, &q, "u"), (jid(4), "{\"step\":4}".into(), 1));
    assert_eq!(claim_one(&mut c, &q, "u"), (jid(5), "{\"step\":5}".into(), 1));
    // The held job: its holder still holds it, and its retry carries the data set meanwhile.
    let retry = q.run(&mut c, "EMQ.FAIL", &jid(1), &[b"t1", b"later"]);
    assert_eq!(retry, Reply::Simple("retry".into()));
    assert_eq!(claim_one(&mut c, &q, "u"), (jid(1), "{\"step\":1}".into(), 2));
    // The delayed one, once promoted; the finished ones, once reprocessed (data kept).
    assert_eq!(q.run(&mut c, "EMQ.PROMOTE", &jid(6), &[]), Reply::Int(1));
    assert_eq!(claim_one(&mut c, &q, "u"), (jid(6), "{\"step\":6}".into(), 1));
    assert_eq!(q.run(&mut c, "EMQ.REPROCESS", &jid(2), &[]), Reply::Int(1));
    assert_eq!(claim_one(&mut c, &q, "u"), (jid(2), "{\"step\":2}".into(), 1));
    assert_eq!(q.run(&mut c, "EMQ.REPROCESS", &jid(3), &[b"FROM", b"failed"]), Reply::Int(1));
    assert_eq!(claim_one(&mut c, &q, "u"), (jid(3), "{\"step\":3}".into(), 1));

    // Replaced again, while held: empty data, and data of exactly the limit.
    replaces(&mut c, &q, &jid(1), "");
    assert_eq!(c.call(&[b"CONFIG", b"SET", b"trafikey.max-payload", b"8"]), Reply::Simple("OK".into()));
    replaces(&mut c, &q, &jid(1), "12345678");
    // The immutable line: an ENQUEUE of the id still answers 0 and leaves the data.
    let r = unchanged(&mut c, |c| q.run(c, "EMQ.ENQUEUE", &jid(1), &[b"job", b"other"]));
    assert_eq!(r, Reply::Int(0));
    assert_eq!(job_data(&mut c, &q, &jid(1)), "12345678");
    q.check_invariant(&mut c);
}

#[test]
fn refusals_write_nothing() {
    let (_s, mut c, q) = queue_on_quiet_server("sdno");
    assert_eq!(q.enqueue(&mut c, &jid(1), &[]), Reply::Int(1));
    let e = unchanged(&mut c, |c| setdata(c, &q, &jid(9), b"{}"));
    assert_eq!(e.error(), format!("EMQNOJOB no job {}", jid(9)));

    // Over the limit: ENQUEUE's own refusal, word for word, at the default and at a set limit.
    let big = vec![b'x'; (1 << 20) + 1];
    let e = unchanged(&mut c, |c| setdata(c, &q, &jid(1), &big));
    assert_eq!(e.error(), "EMQARG data must be 0..=1048576 bytes");
    assert_eq!(c.call(&[b"CONFIG", b"SET", b"trafikey.max-payload", b"4"]), Reply::Simple("OK".into()));
    let e = unchanged(&mut c, |c| setdata(c, &q, &jid(1), b"12345"));
    let enq = unchanged(&mut c, |c| q.run(c, "EMQ.ENQUEUE", &jid(2), &[b"job", b"12345"]));
    assert_eq!(e.error(), "EMQARG data must be 0..=4 bytes");
    assert_eq!(e, enq, "the limit and the text ENQUEUE gives data");
    // The id gate comes before the range, and the range before the row.
    let e = unchanged(&mut c, |c| setdata(c, &q, "JOB42", b"12345"));
    assert_eq!(e.error(), "EMQID malformed job id JOB42");
    let e = unchanged(&mut c, |c| setdata(c, &q, &jid(9), b"12345"));
    assert!(e.error().starts_with("EMQARG"), "{e:?}");

    let row = q.job(&jid(1));
    let usage = "EMQSHAPE TRA.SETDATA takes data";
    for (argv, want) in [
        (vec![&b"TRA.SETDATA"[..], b"1", row.as_bytes()], usage),
        (vec![b"TRA.SETDATA", b"1", row.as_bytes(), b"a", b"b"], usage),
        (vec![b"TRA.SETDATA", b"2", row.as_bytes(), b"a"], "EMQSHAPE numkeys must be 1"),
        (
            vec![b"TRA.SETDATA", b"1", q.k("wait").as_bytes(), b"a"],
            "EMQLAYOUT key 1 must be emq:{Q}:job:<ID>",
        ),
    ] {
        let e = unchanged(&mut c, |c| c.call(&argv));
        assert_eq!(e.error(), want, "{argv:?}");
    }
    // A row of another type: the server's WRONGTYPE.
    let stray = q.job(&jid(3));
    c.call(&[b"SET", stray.as_bytes(), b"x"]);
    let e = unchanged(&mut c, |c| setdata(c, &q, &jid(3), b"{}"));
    assert!(e.error().starts_with("WRONGTYPE"), "{e:?}");

    // The fence, absent and foreign.
    c.call(&[b"DEL", b"{emq}:version"]);
    let e = unchanged(&mut c, |c| setdata(c, &q, &jid(1), b"{}"));
    assert_eq!(e.error(), "EMQWIRE expected echomq:6.0.0 but {emq}:version is absent");
    c.call(&[b"SET", b"{emq}:version", b"echomq:4.0.0"]);
    let e = unchanged(&mut c, |c| setdata(c, &q, &jid(1), b"{}"));
    assert_eq!(e.error(), "EMQWIRE expected echomq:6.0.0 found echomq:4.0.0");
    c.call(&[b"DEL", b"{emq}:version"]);
    assert_eq!(c.call(&[b"EMQ.INSTALL", b"1", b"{emq}:version"]), Reply::Int(1));

    // deny-oom: a full server refuses it before the module runs.
    c.call(&[b"CONFIG", b"SET", b"maxmemory", b"1"]);
    let e = unchanged(&mut c, |c| setdata(c, &q, &jid(1), b"{}"));
    assert!(e.error().starts_with("OOM"), "{e:?}");
    c.call(&[b"CONFIG", b"SET", b"maxmemory", b"0"]);
    assert_eq!(setdata(&mut c, &q, &jid(1), b"{}"), Reply::Int(1));
}

/// The row's key spec is RW ACCESS UPDATE: a user who may only read the row, or only write
/// it, is refused by the server; one who may read and write it replaces the data. A grant of
/// TRA.SETDATA alone is enough beside the fence key's read.
#[test]
fn acl_needs_read_and_write_on_the_row() {
    let s = Server::quiet();
    let mut admin = s.conn();
    let q = Q::new("sdacl");
    assert_eq!(q.enqueue(&mut admin, &jid(1), &[]), Reply::Int(1));
    for (who, rows) in [("reader", "%R~emq:{sdacl}:job:*"), ("writer", "%W~emq:{sdacl}:job:*")] {
        let rules = format!("resetkeys %R~{{emq}}:version {rows} -@all +@emq");
        let mut u = s.user(&mut admin, who, &rules);
        let e = unchanged(&mut admin, |_| setdata(&mut u, &q, &jid(1), b"{\"by\":1}"));
        assert!(e.error().starts_with("NOPERM"), "{who}: {e:?}");
    }
    let mut w =
        s.user(&mut admin, "editor", "resetkeys %R~{emq}:version ~emq:{sdacl}:job:* -@all +tra.setdata");
    assert_eq!(setdata(&mut w, &q, &jid(1), b"{\"by\":2}"), Reply::Int(1));
    assert_eq!(job_data(&mut admin, &q, &jid(1)), "{\"by\":2}");
    // Another queue's rows are not the editor's.
    let other = Q::new("sdacl2");
    assert_eq!(other.enqueue(&mut admin, &jid(1), &[]), Reply::Int(1));
    let e = unchanged(&mut admin, |_| setdata(&mut w, &other, &jid(1), b"{}"));
    assert!(e.error().starts_with("NOPERM"), "{e:?}");
    // The command is in @emq, @write and @fast: a user without @emq is refused.
    let mut plain = s.user(&mut admin, "plain", "resetkeys ~* -@all +@read +@write -@emq");
    let e = unchanged(&mut admin, |_| setdata(&mut plain, &q, &jid(1), b"{}"));
    assert!(e.error().starts_with("NOPERM"), "{e:?}");
}

#[test]
fn its_flags_categories_and_key_spec() {
    let s = Server::installed();
    let mut c = s.conn();
    let info = c.call(&[b"COMMAND", b"INFO", b"TRA.SETDATA"]);
    let entry = info.array()[0].array();
    let flags = entry[2].strings();
    for f in ["write", "denyoom", "fast"] {
        assert!(flags.iter().any(|x| x == f), "flag {f} in {flags:?}");
    }
    let cats = entry[6].strings();
    for cat in ["@emq", "@write", "@fast"] {
        assert!(cats.iter().any(|x| x == cat), "{cat} in {cats:?}");
    }
    // One key spec for the row, then the three naming the keys a verb finds itself.
    let specs = entry[8].array();
    assert_eq!(specs.len(), 1 + 3);
    let flags = specs[0].array().chunks(2).find(|kv| kv[0].str() == "flags").map(|kv| kv[1].strings());
    assert_eq!(flags.unwrap(), ["RW", "access", "update"]);
    let row = "emq:{k}:job:JOB0000000001a";
    let keys = c.call(&[b"COMMAND", b"GETKEYS", b"TRA.SETDATA", b"1", row.as_bytes(), b"{}"]);
    assert_eq!(keys.strings(), [row]);
}

/// The replica and the AOF replay hold the new data; both received an HSET of the row,
/// never TRA.SETDATA itself.
#[test]
fn replicas_and_the_aof_hold_the_new_data() {
    let primary = Server::quiet_aof();
    let replica = Server::quiet();
    let mut p = primary.conn();
    let mut r = replica.follow(&primary);
    let q = Q::new("sdrepl");
    for n in 1..=3 {
        assert_eq!(q.enqueue(&mut p, &jid(n), &[]), Reply::Int(1));
    }
    assert_eq!(claim_one(&mut p, &q, "t").0, jid(1));
    assert_eq!(claim_one(&mut p, &q, "t").0, jid(2));
    assert_eq!(q.run(&mut p, "EMQ.COMPLETE", &jid(2), &[b"t", b"ok"]), Reply::Int(1));
    for n in 1..=3 {
        assert_eq!(setdata(&mut p, &q, &jid(n), format!("new-{n}").as_bytes()), Reply::Int(1));
    }
    assert_eq!(p.call(&[b"WAIT", b"1", b"5000"]), Reply::Int(1));
    let d = digest(&mut p);
    assert_eq!(digest(&mut r), d, "the replica holds what the primary holds");
    for n in 1..=3 {
        let got = r.call(&[b"HGET", q.job(&jid(n)).as_bytes(), b"d"]).str();
        assert_eq!(got, format!("new-{n}"));
    }
    // The AOF names the effect, not the command.
    let mut aof = Vec::new();
    for e in std::fs::read_dir(primary.dir.join("appendonlydir")).unwrap() {
        let path = e.unwrap().path();
        if path.to_string_lossy().ends_with(".incr.aof") {
            aof.extend(std::fs::read(path).unwrap());
        }
    }
    let text = String::from_utf8_lossy(&aof).to_ascii_uppercase();
    assert!(!text.contains("TRA.SETDATA"), "the command itself is not in the AOF");
    assert!(text.contains("NEW-3"), "its effect is");
    let primary = primary.restart();
    let mut p = primary.conn();
    wait_for(|| info_field(&mut p, "persistence", "loading") == "0", "aof load");
    assert_eq!(digest(&mut p), d, "the AOF replays to the same keyspace");
}
