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

use trafikey::host::command::Command;
use trafikey::verbs::COMMANDS;
use trafikey_support::*;

#[path = "common/calls.rs"]
mod calls;
use calls::*;

const ABSENT: &str = "EMQWIRE expected echomq:6.0.0 but {emq}:version is absent";
const SCRIPTED: &str = "EMQWIRE expected echomq:6.0.0 found echomq:4.0.0";
const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

/// A fence outcome: its name, how to make it, the answer every fenced call then gets.
type Outcome<'a> = (&'a str, &'a dyn Fn(&mut Conn), &'a str);

fn must(r: Reply, what: &str) {
    assert!(r.err().is_none(), "{what}: {r:?}");
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
