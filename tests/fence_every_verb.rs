//! Every fenced command — each row of the command table (`trafikey::verbs::COMMANDS`) whose
//! `fenced` is true, not only ENQUEUE — against each outcome of the fence: `{emq}:version`
//! absent, holding the scripted wire's `echomq:4.0.0`, holding another string (printed byte by
//! byte), and holding a list. Each call is valid — with the fence in place it succeeds, which
//! the test shows afterwards — so the fence is the only reason it is refused: the answer is
//! the fence's exact text (or WRONGTYPE), and the keyspace is unchanged (`DEBUG DIGEST`); so
//! it is in a database where INSTALL never ran. A
//! blocking CLAIM on an empty queue answers at once too: it never waits behind a broken fence.
// A test may panic: that is how it fails. The module's own rules are for src/.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

use std::time::{Duration, Instant};

use trafikey::host::command::{Command, Form, KeyRole};
use trafikey::keyspace::{self, Role};
use trafikey::verbs::COMMANDS;
use trafikey_support::*;

const ABSENT: &str = "EMQWIRE expected echomq:6.0.0 but {emq}:version is absent";
const SCRIPTED: &str = "EMQWIRE expected echomq:6.0.0 found echomq:4.0.0";
const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

/// The queue the calls name, and an empty one for a blocking CLAIM.
const QUEUE: &str = "fv";
const EMPTY: &str = "fvempty";
/// A queue for TRA.OBLITERATE to delete.
const GONE: &str = "fvgone";

/// The call's keys, by the command's declared roles: the job row of `id`, the bus counter of
/// message `msg`, and the queue's other keys; for a position that takes one of several roles,
/// `pick` (else the first).
fn keys(cmd: &Command, queue: &str, id: &str, msg: &str, pick: Option<Role>) -> Vec<Vec<u8>> {
    let mut v = vec![cmd.name.as_bytes().to_vec()];
    if cmd.form == Form::Keys {
        v.push(cmd.keys.len().to_string().into_bytes());
        for slot in cmd.keys {
            v.push(match slot.role {
                KeyRole::Queue(Role::Fails) => keyspace::key(queue.as_bytes(), Role::Fails, msg.as_bytes()),
                KeyRole::Queue(r) => keyspace::key(queue.as_bytes(), r, id.as_bytes()),
                KeyRole::OneOf(roles) => {
                    keyspace::key(queue.as_bytes(), pick.unwrap_or(roles[0]), id.as_bytes())
                }
                other => panic!("{}: a fenced command with a {other:?} key", cmd.name),
            });
        }
    }
    v
}

/// The valid calls of `cmd` for the state `populate` made: each succeeds with the fence in
/// place. A fenced command without one here fails the test: give it its calls.
fn calls(cmd: &Command) -> Vec<Vec<Vec<u8>>> {
    let pick = |queue: &str, role: Role, args: &[&str]| {
        let mut v = keys(cmd, queue, "", "", Some(role));
        v.extend(args.iter().map(|a| a.as_bytes().to_vec()));
        v
    };
    let with = |queue: &str, id: &str, msg: &str, args: &[&str]| {
        let mut v = keys(cmd, queue, id, msg, None);
        v.extend(args.iter().map(|a| a.as_bytes().to_vec()));
        v
    };
    let (j, m) = (|n| jid(n), |n| id_of("MSG", n));
    match cmd.name {
        "EMQ.ENQUEUE" => vec![
            with(QUEUE, &j(100), "", &["job", "{}"]),
            with(
                QUEUE,
                &j(101),
                "",
                &["job", "{}", "PRIORITY", "3", "ATTEMPTS", "2", "BACKOFF", "EXP", "10", "LIFO"],
            ),
            with(QUEUE, &j(103), "", &["job", "{}", "DEDUP", "dx", "DEDUPTTL", "5000", "EXTEND", "REPLACE"]),
        ],
        "EMQ.CLAIM" => vec![
            with(QUEUE, "", "", &["c1", "60000", "COUNT", "2"]),
            with(QUEUE, "", "", &["PAUSE"]),
            with(QUEUE, "", "", &["RESUME"]),
            with(EMPTY, "", "", &["c2", "60000", "BLOCK", "200"]),
        ],
        "EMQ.EXTEND" => vec![with(QUEUE, &j(3), "", &["t3", "60000"])],
        "EMQ.EXTENDS" => vec![with(QUEUE, "", "", &["60000", &j(3), "t3", &j(4), "t4"])],
        "EMQ.COMPLETE" => vec![with(QUEUE, &j(4), "", &["t4", "ok"])],
        "TRA.COMPLETES" => vec![with(QUEUE, "", "", &[&j(3), "t3", "ok", &j(4), "t4", "ok"])],
        "EMQ.SCHEDULE" => vec![with(QUEUE, &j(102), "", &["+60000", "job", "{}"])],
        "EMQ.PROMOTE" => vec![with(QUEUE, &j(5), "", &[])],
        "EMQ.RESCHEDULE" => vec![with(QUEUE, &j(6), "", &["+5000"])],
        "EMQ.DELAY" => vec![with(QUEUE, &j(7), "", &["t7", "+1000"])],
        "EMQ.FAIL" => vec![
            with(QUEUE, &j(8), "", &["t8", "boom"]),
            with(QUEUE, &j(15), "", &["t15", "boom", "DELAY", "+1000", "STACK", "at x"]),
            with(QUEUE, &j(16), "", &["t16", "boom", "RETRY", "LIFO"]),
        ],
        "EMQ.REPROCESS" => vec![
            with(QUEUE, &j(9), "", &[]),
            with(QUEUE, &j(14), "", &["FROM", "failed", "KEEPMADE", "KEEPSTARTED", "KEEPPROGRESS", "LIFO"]),
        ],
        "EMQ.REQUEUE" => vec![with(QUEUE, &j(10), "", &["t10"])],
        "EMQ.STALLED" => {
            vec![with(QUEUE, "", "", &[]), with(QUEUE, "", "", &["MAXSTALLS", "0", "COUNT", "5"])]
        }
        "EMQ.APPEND" => vec![with(QUEUE, "", "", &[&m(1), "payload"])],
        "EMQ.FAILURES" => vec![with(QUEUE, "", &m(1), &[]), with(QUEUE, "", &m(2), &["TTL", "1000"])],
        "EMQ.PUBLISH" => vec![with(QUEUE, "", "", &[&m(3), "payload", "MAXLEN", "10"])],
        "TRA.REMOVE" => vec![
            with(QUEUE, &j(6), "", &[]),
            with(QUEUE, &j(3), "", &["FORCE"]),
            with(QUEUE, &j(99), "", &[]),
        ],
        "TRA.PROGRESS" => vec![with(QUEUE, &j(13), "", &["t13", "half"])],
        "TRA.LOG" => vec![
            with(QUEUE, &j(13), "", &["t13", "a line"]),
            with(QUEUE, &j(13), "", &["t13", "", "KEEP", "1"]),
        ],
        "TRA.DRAIN" => vec![with(QUEUE, "", "", &["COUNT", "1"]), with(QUEUE, "", "", &["DELAYED"])],
        "TRA.CLEAN" => vec![
            pick(QUEUE, Role::Completed, &["GRACE", "0"]),
            pick(QUEUE, Role::Failed, &["GRACE", "0", "COUNT", "10"]),
        ],
        "TRA.ADD" => {
            let (r1, r2) =
                (format!("emq:{{{QUEUE}}}:job:{}", j(200)), format!("emq:{{{QUEUE}}}:job:{}", j(201)));
            vec![with(
                QUEUE,
                "",
                "",
                &["2", &r1, &r2, "a", "{}", "0", "b", "{}", "4", "ALIAS", "x", "DELAY", "+5"],
            )]
        }
        "TRA.COMPLETESNEXT" => {
            let (r3, r4) = (format!("emq:{{{QUEUE}}}:job:{}", j(3)), format!("emq:{{{QUEUE}}}:job:{}", j(4)));
            vec![with(QUEUE, "", "", &["2", &r3, &r4, "t3", "ok", "t4", "ok", "c9", "60000", "ECHO", "ROW"])]
        }
        "TRA.OBLITERATE" => {
            vec![with(GONE, "", "", &["FORCE", "COUNT", "1"]), with(GONE, "", "", &["FORCE"])]
        }
        "TRA.SETPROGRESS" => vec![with(QUEUE, &j(13), "", &["half", "ECHO"])],
        "TRA.SETDATA" => vec![with(QUEUE, &j(13), "", &["{\"step\":2}"]), with(QUEUE, &j(17), "", &[""])],
        "TRA.ADDLOG" => vec![with(QUEUE, &j(13), "", &["a line", "KEEP", "5"])],
        "TRA.COMPLETENEXT" => vec![with(QUEUE, &j(17), "", &["t17", "ok", "60000", "COUNT", "1"])],
        "TRA.UNDEDUP" => vec![with(QUEUE, "d2", "", &["IF", &j(2)]), with(QUEUE, "d2", "", &[])],
        "TRA.PRIORITY" => vec![with(QUEUE, &j(13), "", &["7"]), with(QUEUE, &j(13), "", &["0", "LIFO"])],
        "TRA.LIMIT" => vec![
            with(QUEUE, "", "", &["RATE", "5", "1000"]),
            with(QUEUE, "", "", &["RATE", "OFF"]),
            with(QUEUE, "", "", &["CONCURRENCY", "3"]),
            with(QUEUE, "", "", &["CONCURRENCY", "OFF"]),
            with(QUEUE, "", "", &["FOR", "1000"]),
            with(QUEUE, "", "", &["CLEAR"]),
        ],
        "TRA.SCHEDULER" => vec![
            with(QUEUE, "fvs", "", &["SET", "EVERY", "60000", "JOB", "j", "{}"]),
            with(QUEUE, "fvs", "", &["DEL"]),
        ],
        other => panic!("no valid call of the fenced command {other}: add one to calls()"),
    }
}

/// A fence outcome: its name, how to make it, the answer every fenced call then gets.
type Outcome<'a> = (&'a str, &'a dyn Fn(&mut Conn), &'a str);

fn must(r: Reply, what: &str) {
    assert!(r.err().is_none(), "{what}: {r:?}");
}

/// Jobs in every state the calls need: ready jid(2), 12; held jid(3), 4, 7, 8, 10, 13, 15, 16, 17 by t3,
/// t4, …; delayed jid(5), 6; completed jid(9); failed jid(14); an expired lease jid(11) (for
/// STALLED); and a queue with a job of each kind to obliterate.
fn populate(c: &mut Conn) {
    let gone = Q::new(GONE);
    assert_eq!(gone.enqueue(c, &jid(1), &[]), Reply::Int(1));
    assert_eq!(gone.enqueue(c, &jid(2), &[]), Reply::Int(1));
    assert_eq!(gone.run(c, "EMQ.CLAIM", "", &[b"g", b"600000"]).array().len(), 1);
    assert_eq!(gone.run(c, "EMQ.SCHEDULE", &jid(3), &[b"+600000", b"job", b"{}"]), Reply::Int(1));
    let q = Q::new(QUEUE);
    for n in [3, 4, 7, 8, 9, 10, 11, 13, 14, 15, 16, 17] {
        assert_eq!(q.enqueue(c, &jid(n), &[b"ATTEMPTS", b"3"]), Reply::Int(1));
        let tok = format!("t{n}");
        let lease: &[u8] = if n == 11 { b"1" } else { b"600000" };
        let r = q.run(c, "EMQ.CLAIM", "", &[tok.as_bytes(), lease]);
        assert_eq!(r.array()[0].array()[0].str(), jid(n));
    }
    assert_eq!(q.run(c, "EMQ.COMPLETE", &jid(9), &[b"t9", b"ok"]), Reply::Int(1));
    assert_eq!(q.run(c, "EMQ.FAIL", &jid(14), &[b"t14", b"boom", b"FINAL"]), Reply::Simple("failed".into()));
    for n in [5, 6] {
        assert_eq!(q.run(c, "EMQ.SCHEDULE", &jid(n), &[b"+600000", b"job", b"{}"]), Reply::Int(1));
    }
    assert_eq!(q.enqueue(c, &jid(2), &[b"DEDUP", b"d2"]), Reply::Int(1));
    assert_eq!(q.enqueue(c, &jid(12), &[]), Reply::Int(1));
    q.check_invariant(c);
}

#[test]
fn every_fenced_command_answers_each_fence_outcome_and_writes_nothing() {
    // Upkeep off: nothing but the calls changes the keyspace (jid(11)'s lease stays expired).
    let s = Server::quiet();
    let mut c = s.conn();
    populate(&mut c);
    std::thread::sleep(Duration::from_millis(10));
    let fenced: Vec<&Command> = COMMANDS.iter().filter(|c| c.fenced).collect();
    let names: Vec<&str> = fenced.iter().map(|c| c.name).collect();
    assert!(names.len() >= 16, "the fenced commands: {names:?}");
    // The server registers every one.
    for cmd in &fenced {
        let info = c.call(&[b"COMMAND", b"INFO", cmd.name.as_bytes()]);
        assert!(!info.array()[0].is_nil(), "{} is registered", cmd.name);
    }
    let all: Vec<(&str, Vec<Vec<u8>>)> =
        fenced.iter().flat_map(|cmd| calls(cmd).into_iter().map(|v| (cmd.name, v))).collect();
    let outcomes: [Outcome; 4] = [
        ("absent", &|c| must(c.call(&[b"DEL", b"{emq}:version"]), "DEL"), ABSENT),
        ("echomq:4.0.0", &|c| must(c.call(&[b"SET", b"{emq}:version", b"echomq:4.0.0"]), "SET"), SCRIPTED),
        (
            "another string",
            &|c| must(c.call(&[b"SET", b"{emq}:version", b"echomq:6.0.0 \xff"]), "SET"),
            "EMQWIRE expected echomq:6.0.0 found echomq:6.0.0\\x20\\xFF",
        ),
        (
            "a list",
            &|c| {
                must(c.call(&[b"DEL", b"{emq}:version"]), "DEL");
                must(c.call(&[b"RPUSH", b"{emq}:version", b"echomq:6.0.0"]), "RPUSH");
            },
            WRONGTYPE,
        ),
    ];
    let mut refused = 0;
    for (what, set, want) in &outcomes {
        set(&mut c);
        for (name, v) in &all {
            let t0 = Instant::now();
            let r = unchanged(&mut c, |c| c.call_v(v));
            assert_eq!(r, Reply::Error(want.to_string()), "{name} with {{emq}}:version {what}");
            assert!(t0.elapsed() < Duration::from_secs(2), "{name} answered at once");
            refused += 1;
        }
    }
    // A database where INSTALL never ran: every call answers the absent fence there too.
    must(c.call(&[b"SELECT", b"1"]), "SELECT");
    for (name, v) in &all {
        let r = unchanged(&mut c, |c| c.call_v(v));
        assert_eq!(r, Reply::Error(ABSENT.to_string()), "{name} in database 1");
        refused += 1;
    }
    must(c.call(&[b"SELECT", b"0"]), "SELECT");
    // The fence back in place: every one of those calls succeeds, in order.
    must(c.call(&[b"DEL", b"{emq}:version"]), "DEL");
    assert_eq!(c.call(&[b"EMQ.INSTALL", b"1", b"{emq}:version"]), Reply::Int(1));
    for (name, v) in &all {
        let r = c.call_v(v);
        assert!(r.err().is_none(), "{name} with the fence in place: {r:?}");
    }
    Q::new(QUEUE).check_invariant(&mut c);
    let covered: std::collections::BTreeSet<&str> = all.iter().map(|(n, _)| *n).collect();
    assert_eq!(covered.len(), fenced.len(), "a call for every fenced command");
    eprintln!("{} fenced commands, {} calls, {refused} refusals, none wrote", fenced.len(), all.len());
}

/// The fence reads `{emq}:version` as the caller, and reading is what it needs: a user who
/// may do everything else — every command, every queue key, every channel — but may only
/// write the fence key is refused every fenced call with NOPERM, and nothing is written.
/// Given read access to the fence key instead, the same user makes each of those calls.
#[test]
fn every_fenced_command_refuses_a_user_who_may_only_write_the_fence_key() {
    let s = Server::quiet();
    let mut c = s.conn();
    populate(&mut c);
    std::thread::sleep(Duration::from_millis(10));
    let all: Vec<(&str, Vec<Vec<u8>>)> = COMMANDS
        .iter()
        .filter(|c| c.fenced)
        .flat_map(|cmd| calls(cmd).into_iter().map(|v| (cmd.name, v)))
        .collect();
    let user = |c: &mut Conn, version: &[u8]| {
        let r = c.call(&[
            b"ACL",
            b"SETUSER",
            b"wo",
            b"on",
            b">pw",
            b"resetkeys",
            version,
            b"~emq:*",
            b"allchannels",
            b"+@all",
        ]);
        must(r, "ACL SETUSER");
    };
    user(&mut c, b"%W~{emq}:version");
    let mut w = s.conn();
    must(w.call(&[b"AUTH", b"wo", b"pw"]), "AUTH");
    for (name, v) in &all {
        let r = unchanged(&mut c, |_| w.call_v(v));
        assert_eq!(r, Reply::Error("NOPERM No permissions to access a key".into()), "{name}");
    }
    user(&mut c, b"%R~{emq}:version");
    for (name, v) in &all {
        let r = w.call_v(v);
        assert!(r.err().is_none(), "{name} with read access to the fence key: {r:?}");
    }
    Q::new(QUEUE).check_invariant(&mut c);
}

/// The valid calls of the commands outside the fence (the controls, the reads, the coherence
/// drop). A command without one here fails the stray-argument test: give it its calls.
fn unfenced_calls(cmd: &Command) -> Vec<Vec<Vec<u8>>> {
    let with = |args: &[&str]| {
        let mut v = keys(cmd, QUEUE, &jid(2), "", None);
        v.extend(args.iter().map(|a| a.as_bytes().to_vec()));
        v
    };
    let bare = |args: &[&str]| {
        let mut v = vec![cmd.name.as_bytes().to_vec()];
        v.extend(args.iter().map(|a| a.as_bytes().to_vec()));
        v
    };
    match cmd.name {
        "EMQ.VERSION" | "TRA.CAPABILITIES" => vec![bare(&[])],
        "EMQ.INSTALL" => vec![bare(&["1", "{emq}:version"])],
        "TRA.DROP" => vec![bare(&["1", "cache:row", "v0000000000001"])],
        "TRA.QUEUES" => vec![bare(&[]), bare(&["FROM", "0", "COUNT", "10"])],
        "TRA.JOB" | "TRA.COUNTS" | "TRA.LIMITS" => vec![with(&[])],
        "TRA.DEDUP" => vec![keys(cmd, QUEUE, "d2", "", None)],
        "TRA.JOBS" => vec![with(&[]), with(&["FROM", "0", "COUNT", "5", "REV"])],
        "TRA.SCHEDULERS" => {
            vec![
                with(&["COUNT"]),
                with(&["GET", "fvs"]),
                with(&["LIST", "0", "-1"]),
                with(&["LIST", "0", "9", "DESC"]),
            ]
        }
        other => panic!("no valid call of the unfenced command {other}: add one to unfenced_calls()"),
    }
}

/// Every command of the table, given one of its valid calls with one more argument behind it,
/// refuses the call as malformed (EMQSHAPE) and writes nothing: no verb ignores what it was
/// not asked to take. The same calls without it succeed.
#[test]
fn every_command_refuses_a_stray_argument_and_writes_nothing() {
    let s = Server::quiet();
    let mut c = s.conn();
    populate(&mut c);
    let mut tried = std::collections::BTreeSet::new();
    for cmd in COMMANDS.iter() {
        let valid = if cmd.fenced { calls(cmd) } else { unfenced_calls(cmd) };
        for v in valid {
            let mut stray = v.clone();
            stray.push(b"STRAY".to_vec());
            let r = unchanged(&mut c, |c| c.call_v(&stray));
            let e = r.err().unwrap_or_else(|| panic!("{} took a stray argument: {r:?}", cmd.name));
            assert!(e.starts_with("EMQSHAPE"), "{} with a stray argument: {e}", cmd.name);
            tried.insert(cmd.name);
        }
    }
    assert_eq!(tried.len(), COMMANDS.len(), "every command of the table");
    // Each valid call without the stray argument goes through.
    for cmd in COMMANDS.iter().filter(|c| !c.fenced) {
        for v in unfenced_calls(cmd) {
            let r = c.call_v(&v);
            assert!(r.err().is_none(), "{}: {r:?}", cmd.name);
        }
    }
}

/// The fence's class answers the fence and nothing else, for every fenced command: with the
/// fence in place and the queue's events stream filled by hand up to the largest id a stream
/// can hold (the one server failure a client can force), each valid call either succeeds (it
/// appends no event) or answers the module's own `EMQHOST` — never `EMQWIRE`.
#[test]
fn every_fenced_command_answers_a_host_failure_with_its_own_class() {
    let s = Server::quiet();
    let mut c = s.conn();
    populate(&mut c);
    std::thread::sleep(Duration::from_millis(10));
    let events = Q::new(QUEUE).k("events");
    let full: &[u8] = b"18446744073709551615-18446744073709551615";
    must(c.call(&[b"XADD", events.as_bytes(), full, b"by", b"hand"]), "XADD");
    let fenced: Vec<&Command> = COMMANDS.iter().filter(|c| c.fenced).collect();
    let (mut host, mut ok) = (0, 0);
    for cmd in &fenced {
        for v in calls(cmd) {
            match c.call_v(&v) {
                Reply::Error(e) if e == "EMQHOST unexpected reply from the host" => host += 1,
                Reply::Error(e) => assert!(
                    !e.starts_with("EMQWIRE"),
                    "{}: the fence's class for a failure that is not the fence's: {e}",
                    cmd.name
                ),
                _ => ok += 1,
            }
        }
    }
    assert!(host > 0 && ok > 0, "{host} EMQHOST, {ok} served");
    assert_eq!(c.call(&[b"PING"]), Reply::Simple("PONG".into()));
    eprintln!("{host} calls answered EMQHOST, {ok} served");
}
