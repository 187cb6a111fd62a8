//! The command table's valid calls, shared by the tests that run every command
//! (`fence_every_verb.rs`, `access.rs`, each including this file with `#[path]`): for each
//! command of `trafikey::verbs::COMMANDS`, calls that succeed on the state `populate` makes.
//! A command without calls here fails those tests: give it its calls.
#![allow(dead_code)]

use trafikey::host::command::{Command, Form, KeyRole};
use trafikey::keyspace::{self, Role};
use trafikey_support::*;

/// The queue the calls name, and an empty one for a blocking CLAIM.
pub const QUEUE: &str = "fv";
pub const EMPTY: &str = "fvempty";
/// A queue for TRA.OBLITERATE to delete.
pub const GONE: &str = "fvgone";
/// A queue no other call touches, whose two ready jobs TRA.PRIORITY moves between `wait` and
/// `prio`.
pub const SIDE: &str = "fvside";

/// The call's keys, by the command's declared roles: the job row of `id`, the bus counter of
/// message `msg`, and the queue's other keys; for a position that takes one of several roles,
/// `pick` (else the first).
pub fn keys(cmd: &Command, queue: &str, id: &str, msg: &str, pick: Option<Role>) -> Vec<Vec<u8>> {
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
pub fn calls(cmd: &Command) -> Vec<Vec<Vec<u8>>> {
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
                &j(104),
                "",
                &["job", "{}", "ALIAS", "al2", "EXPIRE", "+600000", "BACKOFF", "FIXED", "10", "OPTS", "o"],
            ),
            with(QUEUE, &j(105), "", &["job", "{}", "DEDUP", "dk", "KEEPLAST"]),
            with(QUEUE, &j(108), "", &["job", "{}", "DEDUP", "d2"]),
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
            with(QUEUE, "", "", &["c3", "60000", "COUNT", "10", "ROW", "BY", "w1"]),
            with(QUEUE, "", "", &["PAUSE"]),
            with(QUEUE, "", "", &["RESUME"]),
            with(EMPTY, "", "", &["c2", "60000", "BLOCK", "200"]),
        ],
        "EMQ.EXTEND" => vec![with(QUEUE, &j(3), "", &["t3", "60000"])],
        "EMQ.EXTENDS" => vec![with(QUEUE, "", "", &["60000", &j(3), "t3", &j(4), "t4"])],
        "EMQ.COMPLETE" => vec![
            with(QUEUE, &j(4), "", &["t4", "ok"]),
            with(QUEUE, &j(20), "", &["t20", "ok", "KEEP", "0", "AGE", "600000", "ECHO", "METRICS", "100"]),
            with(QUEUE, &j(21), "", &["t21", "ok"]),
        ],
        "TRA.COMPLETES" => vec![with(QUEUE, "", "", &[&j(3), "t3", "ok", &j(4), "t4", "ok"])],
        "EMQ.SCHEDULE" => vec![
            with(QUEUE, &j(102), "", &["+60000", "job", "{}"]),
            with(
                QUEUE,
                &j(106),
                "",
                &[
                    "+60000", "job", "{}", "PRIORITY", "2", "ATTEMPTS", "2", "BACKOFF", "EXP", "5", "OPTS",
                    "o", "EXPIRE", "+600000", "ALIAS", "al3", "DEDUP", "ds", "DEDUPTTL", "1000", "EXTEND",
                    "REPLACE",
                ],
            ),
            with(
                QUEUE,
                &j(107),
                "",
                &["+60000", "job", "{}", "BACKOFF", "FIXED", "5", "DEDUP", "dk", "KEEPLAST"],
            ),
        ],
        "EMQ.PROMOTE" => vec![with(QUEUE, &j(5), "", &[]), with(QUEUE, &j(27), "", &[])],
        "EMQ.RESCHEDULE" => vec![with(QUEUE, &j(6), "", &["+5000"])],
        "EMQ.DELAY" => vec![with(QUEUE, &j(7), "", &["t7", "+1000"])],
        "EMQ.FAIL" => vec![
            with(QUEUE, &j(8), "", &["t8", "boom"]),
            with(QUEUE, &j(15), "", &["t15", "boom", "DELAY", "+1000", "STACK", "at x"]),
            with(QUEUE, &j(16), "", &["t16", "boom", "RETRY", "LIFO"]),
            with(
                QUEUE,
                &j(19),
                "",
                &["t19", "boom", "FINAL", "KEEP", "2", "AGE", "600000", "METRICS", "100"],
            ),
        ],
        "EMQ.REPROCESS" => vec![
            with(QUEUE, &j(9), "", &["FROM", "completed"]),
            with(QUEUE, &j(14), "", &["FROM", "failed", "KEEPMADE", "KEEPSTARTED", "KEEPPROGRESS", "LIFO"]),
        ],
        "EMQ.REQUEUE" => vec![with(QUEUE, &j(10), "", &["t10"]), with(QUEUE, &j(26), "", &["t26"])],
        "EMQ.STALLED" => {
            vec![with(QUEUE, "", "", &[]), with(QUEUE, "", "", &["MAXSTALLS", "0", "COUNT", "5"])]
        }
        "EMQ.APPEND" => {
            vec![
                with(QUEUE, "", "", &[&m(1), "payload"]),
                with(QUEUE, "", "", &[&m(4), "payload", "MAXLEN", "10"]),
            ]
        }
        "EMQ.FAILURES" => vec![with(QUEUE, "", &m(1), &[]), with(QUEUE, "", &m(2), &["TTL", "1000"])],
        "EMQ.PUBLISH" => vec![with(QUEUE, "", "", &[&m(3), "payload", "MAXLEN", "10"])],
        "TRA.REMOVE" => vec![
            with(QUEUE, &j(6), "", &[]),
            with(QUEUE, &j(3), "", &["FORCE"]),
            with(QUEUE, &j(99), "", &[]),
            with(QUEUE, &j(12), "", &["FORCE"]),
            with(QUEUE, &j(9), "", &["FORCE"]),
            with(QUEUE, &j(14), "", &["FORCE"]),
            with(QUEUE, &j(18), "", &["FORCE"]),
            with(QUEUE, &j(23), "", &["FORCE"]),
            with(QUEUE, &j(21), "", &["FORCE"]),
        ],
        "TRA.PROGRESS" => {
            vec![with(QUEUE, &j(13), "", &["t13", "half"]), with(QUEUE, &j(13), "", &["t13", "half", "ECHO"])]
        }
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
            let row = |n| format!("emq:{{{QUEUE}}}:job:{}", j(n));
            let (r1, r2, r3) = (row(200), row(201), row(202));
            vec![with(
                QUEUE,
                "",
                "",
                &[
                    "3", &r1, &r2, &r3, "a", "{}", "2", "PRIORITY", "3", "b", "{}", "4", "ALIAS", "x",
                    "DELAY", "+5", "c", "{}", "0",
                ],
            )]
        }
        "TRA.COMPLETESNEXT" => {
            let (r3, r4) = (format!("emq:{{{QUEUE}}}:job:{}", j(3)), format!("emq:{{{QUEUE}}}:job:{}", j(4)));
            vec![with(
                QUEUE,
                "",
                "",
                &[
                    "2", &r3, &r4, "t3", "ok", "t4", "ok", "c9", "60000", "KEEP", "-1", "AGE", "600000",
                    "ECHO", "METRICS", "100", "ROW", "BY", "w3",
                ],
            )]
        }
        "TRA.OBLITERATE" => {
            vec![with(GONE, "", "", &["FORCE", "COUNT", "1"]), with(GONE, "", "", &["FORCE"])]
        }
        "TRA.SETPROGRESS" => vec![with(QUEUE, &j(13), "", &["half", "ECHO"])],
        "TRA.SETDATA" => vec![with(QUEUE, &j(13), "", &["{\"step\":2}"]), with(QUEUE, &j(17), "", &[""])],
        "TRA.ADDLOG" => vec![with(QUEUE, &j(13), "", &["a line", "KEEP", "5"])],
        "TRA.COMPLETENEXT" => vec![
            with(QUEUE, &j(17), "", &["t17", "ok", "60000", "COUNT", "1"]),
            with(
                QUEUE,
                &j(24),
                "",
                &[
                    "t24", "ok", "60000", "COUNT", "10", "KEEP", "-1", "AGE", "600000", "ECHO", "METRICS",
                    "100", "ROW", "BY", "w2",
                ],
            ),
        ],
        "TRA.UNDEDUP" => {
            vec![
                with(QUEUE, "d2", "", &["IF", &j(2)]),
                with(QUEUE, "d2", "", &[]),
                with(QUEUE, "dk", "", &[]),
            ]
        }
        "TRA.PRIORITY" => vec![
            with(QUEUE, &j(13), "", &["7"]),
            with(QUEUE, &j(13), "", &["0", "LIFO"]),
            with(SIDE, &j(1), "", &["5"]),
            with(SIDE, &j(2), "", &["0"]),
        ],
        "TRA.LIMIT" => vec![
            with(QUEUE, "", "", &["RATE", "5", "1000"]),
            with(QUEUE, "", "", &["RATE", "OFF"]),
            with(QUEUE, "", "", &["CONCURRENCY", "3"]),
            with(QUEUE, "", "", &["CONCURRENCY", "OFF"]),
            with(QUEUE, "", "", &["FOR", "1000"]),
            with(QUEUE, "", "", &["CLEAR"]),
        ],
        "TRA.SCHEDULER" => vec![
            with(
                QUEUE,
                "fvs",
                "",
                &[
                    "SET", "EVERY", "60000", "OFFSET", "10", "START", FAR, "LIMIT", "3", "JOB", "j", "{}",
                    "PRIORITY", "1", "ATTEMPTS", "2", "BACKOFF", "FIXED", "5", "OPTS", "o",
                ],
            ),
            with(
                QUEUE,
                "fvs2",
                "",
                &[
                    "SET",
                    "PATTERN",
                    "0 0 * * *",
                    "TZ",
                    "Europe/Paris",
                    "START",
                    FAR,
                    "END",
                    FARTHER,
                    "JOB",
                    "j",
                    "{}",
                    "BACKOFF",
                    "EXP",
                    "5",
                ],
            ),
            with(QUEUE, "fvs", "", &["DEL"]),
        ],
        other => panic!("no valid call of the fenced command {other}: add one to calls()"),
    }
}

/// A time no call reaches (2100-01-01), and one after it: fixed scheduler bounds, so an
/// iteration's id (made from its time) is the same in every run.
const FAR: &str = "4102444800000";
const FARTHER: &str = "4133980800000";

/// Jobs in every state the calls need, so each call's every path to a key is taken: ready
/// the first iteration of job scheduler `fvs`, jid(2) (holding DEDUP d2), 12, 23 (ALIAS al1)
/// in `wait` and 18 in `prio`; held jid(3), 4, 7,
/// 8, 10, 13, 15, 16, 17, 19, 20, 21 (holding DEDUP dk, with a kept duplicate, jid(22)), 24, 26
/// by t3, t4, …, of which 10, 16 with a priority; delayed jid(5) (with a priority), 6, 27;
/// completed jid(9) (with a log line); failed jid(14) (with a priority); expired leases
/// jid(11) (with a priority) and 25, for STALLED; the queue's limits (`meta`); a counter of failures; two cache
/// rows for TRA.DROP; a paused queue with a job in each state to obliterate; and a queue with
/// one job in `wait` and one in `prio`.
pub fn populate(c: &mut Conn) {
    let gone = Q::new(GONE);
    for n in [1, 5, 6] {
        assert_eq!(gone.enqueue(c, &jid(n), &[]), Reply::Int(1));
        assert_eq!(gone.run(c, "EMQ.CLAIM", "", &[b"g", b"600000"]).array().len(), 1);
    }
    assert_eq!(gone.run(c, "EMQ.COMPLETE", &jid(5), &[b"g", b"ok"]), Reply::Int(1));
    assert_eq!(gone.run(c, "EMQ.FAIL", &jid(6), &[b"g", b"boom", b"FINAL"]), Reply::Simple("failed".into()));
    assert_eq!(gone.enqueue(c, &jid(2), &[b"ALIAS", b"ga"]), Reply::Int(1));
    assert_eq!(gone.enqueue(c, &jid(4), &[b"PRIORITY", b"2"]), Reply::Int(1));
    assert_eq!(gone.run(c, "EMQ.SCHEDULE", &jid(3), &[b"+600000", b"job", b"{}"]), Reply::Int(1));
    every_hour(c, &gone, "gs");
    assert_eq!(gone.run(c, "EMQ.CLAIM", "", &[b"PAUSE"]), Reply::Int(1));
    let side = Q::new(SIDE);
    assert_eq!(side.enqueue(c, &jid(1), &[]), Reply::Int(1));
    assert_eq!(side.enqueue(c, &jid(2), &[b"PRIORITY", b"3"]), Reply::Int(1));
    let q = Q::new(QUEUE);
    for n in [3, 4, 7, 8, 9, 10, 11, 13, 14, 15, 16, 17, 19, 20, 21, 24, 25, 26] {
        let mut args: Vec<&[u8]> = vec![b"ATTEMPTS", b"3"];
        args.extend_from_slice(match n {
            10 => &[b"PRIORITY", b"4"],
            11 => &[b"PRIORITY", b"5"],
            14 => &[b"PRIORITY", b"3"],
            16 => &[b"PRIORITY", b"6"],
            21 => &[b"DEDUP", b"dk"],
            _ => &[],
        });
        assert_eq!(q.enqueue(c, &jid(n), &args), Reply::Int(1));
        let tok = format!("t{n}");
        let lease: &[u8] = if n == 11 || n == 25 { b"1" } else { b"600000" };
        let r = q.run(c, "EMQ.CLAIM", "", &[tok.as_bytes(), lease]);
        assert_eq!(r.array()[0].array()[0].str(), jid(n));
    }
    assert_eq!(q.run(c, "EMQ.COMPLETE", &jid(9), &[b"t9", b"ok"]), Reply::Int(1));
    assert_eq!(q.run(c, "EMQ.FAIL", &jid(14), &[b"t14", b"boom", b"FINAL"]), Reply::Simple("failed".into()));
    assert_eq!(
        q.run(c, "EMQ.SCHEDULE", &jid(5), &[b"+600000", b"job", b"{}", b"PRIORITY", b"2"]),
        Reply::Int(1)
    );
    for n in [6, 27] {
        assert_eq!(q.run(c, "EMQ.SCHEDULE", &jid(n), &[b"+600000", b"job", b"{}"]), Reply::Int(1));
    }
    let meta = q.k("meta");
    assert_eq!(c.call(&[b"TRA.LIMIT", b"1", meta.as_bytes(), b"CONCURRENCY", b"1000"]).err(), None);
    every_hour(c, &q, "fvs");
    assert_eq!(q.enqueue(c, &jid(2), &[b"DEDUP", b"d2"]), Reply::Int(1));
    assert_eq!(q.enqueue(c, &jid(12), &[]), Reply::Int(1));
    assert_eq!(q.enqueue(c, &jid(18), &[b"PRIORITY", b"2"]), Reply::Int(1));
    assert_eq!(q.enqueue(c, &jid(22), &[b"DEDUP", b"dk", b"KEEPLAST"]).err(), None);
    assert_eq!(q.enqueue(c, &jid(23), &[b"ALIAS", b"al1"]), Reply::Int(1));
    let (row9, log9) = (q.job(&jid(9)), q.k(&format!("log:{}", jid(9))));
    assert_eq!(c.call(&[b"TRA.ADDLOG", b"2", row9.as_bytes(), log9.as_bytes(), b"a line"]).err(), None);
    let fails = q.k(&format!("fails:{}", id_of("MSG", 1)));
    assert_eq!(c.call(&[b"EMQ.FAILURES", b"1", fails.as_bytes()]), Reply::Int(1));
    assert_eq!(c.call(&[b"SET", b"cache:row", b"v0000000000009 frame"]), Reply::Simple("OK".into()));
    assert_eq!(c.call(&[b"SET", b"cache:row2", b"v0000000000001 frame"]), Reply::Simple("OK".into()));
    // Each METRICS counter's minute ended 70 minutes ago, its series holding three points: a
    // finish given METRICS 100 ends that minute and, the gap past 64 minutes, rebuilds the
    // series from its tail, reading the points that stay.
    let now = trafikey_support::reliability::server_ms(c);
    let ended = (now - 70 * 60_000).to_string();
    for kind in ["completed", "failed"] {
        let (counter, series) = (q.k(&format!("metrics:{kind}")), q.k(&format!("metrics:{kind}:data")));
        let set: [&[u8]; 8] =
            [b"HSET", counter.as_bytes(), b"count", b"5", b"prevTS", ended.as_bytes(), b"prevCount", b"2"];
        assert_eq!(c.call(&set), Reply::Int(3));
        assert_eq!(c.call(&[b"RPUSH", series.as_bytes(), b"1", b"2", b"3"]), Reply::Int(3));
    }
    q.check_invariant(c);
}

/// Job scheduler `id` of queue `q`, an iteration an hour from now: its first is ready at once.
fn every_hour(c: &mut Conn, q: &Q, id: &str) {
    let keys = [q.k(&format!("sched:{id}")), q.k("scheds"), q.k("delayed"), q.k("events")];
    let mut set: Vec<&[u8]> = vec![b"TRA.SCHEDULER", b"4"];
    set.extend(keys.iter().map(|k| k.as_bytes()));
    set.extend([&b"SET"[..], b"EVERY", b"3600000", b"JOB", b"j", b"{}"]);
    assert_eq!(c.call(&set).err(), None);
}

/// The valid calls of the commands outside the fence (the controls, the reads, the coherence
/// drop). A command without one here fails the stray-argument test: give it its calls.
pub fn unfenced_calls(cmd: &Command) -> Vec<Vec<Vec<u8>>> {
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
        "TRA.DROP" => {
            vec![bare(&["1", "cache:row", "v0000000000001"]), bare(&["1", "cache:row2", "v9999999999999"])]
        }
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

/// The valid calls of any command of the table: `calls` for a fenced one, `unfenced_calls`
/// for the rest.
pub fn valid_calls(cmd: &Command) -> Vec<Vec<Vec<u8>>> {
    if cmd.fenced {
        calls(cmd)
    } else {
        unfenced_calls(cmd)
    }
}
