//! Scripts and transactions: every job verb (the wire's, the bus's and the module's own
//! `TRA.*`) inside `MULTI`/`EXEC` and inside `EVAL` (`redis.pcall('EMQ.…', …)`) behaves
//! exactly as outside. One sequence of calls
//! — every verb, its happy paths, its dedup and idempotent repeats, its refusals, the time
//! dependent ones (a due job promoted by CLAIM, an expired lease taken by STALLED, a blocking
//! CLAIM that must not block) — runs three times on three queues: call by call, as one
//! MULTI/EXEC per step, and as one EVAL per step. The replies are the same (modulo times and
//! stream entry ids), and so is each queue's keyspace: every key, its type and content, rows,
//! scores, events (modulo the queue's name and times). `EMQ.INSTALL` is deny-script: refused
//! in EVAL, writing nothing. A replica attached to the primary holds the same keyspace (after
//! WAIT), and so does the primary after reloading its AOF (`DEBUG LOADAOF`).
// A test may panic: that is how it fails. The module's own rules are for src/.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

use std::collections::BTreeMap;
use std::thread::sleep;
use std::time::Duration;

use trafikey::host::command::{Form, KeyRole};
use trafikey::keyspace::{self, Role};
use trafikey::verbs::COMMANDS;
use trafikey_support::reliability::*;
use trafikey_support::*;

/// A call of any command of the table, its keys by their declared roles: the job row (and
/// log) of `id`, `pick` where the command takes one of several roles, the queue's other keys.
fn table_call(name: &str, queue: &str, id: &str, pick: Option<Role>, args: &[&str]) -> Vec<Vec<u8>> {
    let cmd = COMMANDS.iter().find(|c| c.name == name).unwrap_or_else(|| panic!("no command {name}"));
    let mut v = vec![name.as_bytes().to_vec()];
    if cmd.form == Form::Keys {
        v.push(cmd.keys.len().to_string().into_bytes());
        for slot in cmd.keys {
            let role = match slot.role {
                KeyRole::Queue(r) => r,
                KeyRole::OneOf(roles) => pick.unwrap_or(roles[0]),
                other => panic!("{name}: a {other:?} key"),
            };
            v.push(keyspace::key(queue.as_bytes(), role, id.as_bytes()));
        }
    }
    v.extend(args.iter().map(|a| a.as_bytes().to_vec()));
    v
}

#[derive(Clone, Copy, Debug)]
enum Mode {
    Plain,
    Multi,
    Eval,
}

fn argv(parts: &[&str]) -> Vec<Vec<u8>> {
    parts.iter().map(|p| p.as_bytes().to_vec()).collect()
}

/// The sequence, in steps: each step runs as one MULTI or one EVAL; between steps the test
/// sleeps, so a 1 ms lease runs out whichever way the steps ran.
fn steps(name: &str) -> Vec<Vec<Vec<Vec<u8>>>> {
    let q = Q::new(name);
    let empty = Q::new(&format!("{name}-empty"));
    let j = |n| jid(n);
    let v = |verb: &str, id: &str, args: &[&str]| {
        let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
        q.cmd(verb, id, &keys_of(verb), &a)
    };
    let bus = |verb: &str, args: &[&str]| {
        let mut out = argv(&[verb, "2", &q.k("bus"), &q.k("seen")]);
        out.extend(argv(args));
        out
    };
    let fails =
        argv(&["EMQ.FAILURES", "1", &format!("emq:{{{name}}}:fails:{}", id_of("MSG", 1)), "TTL", "600000"]);
    vec![
        vec![
            v("EMQ.ENQUEUE", &j(1), &["n1", "d1"]),
            v("EMQ.ENQUEUE", &j(2), &["n2", "d2", "PRIORITY", "2", "ATTEMPTS", "3", "BACKOFF", "FIXED", "0"]),
            v("EMQ.ENQUEUE", &j(3), &["n3", "d3", "ATTEMPTS", "2", "BACKOFF", "EXP", "100000"]),
            v("EMQ.ENQUEUE", &j(4), &["n4", "d4", "LIFO", "OPTS", "blob"]),
            v("EMQ.ENQUEUE", &j(1), &["other", "data"]),
            v("EMQ.SCHEDULE", &j(5), &["+0", "n5", "d5"]),
            v("EMQ.SCHEDULE", &j(6), &["+600000", "n6", "d6", "PRIORITY", "1"]),
            v("EMQ.SCHEDULE", &j(7), &["1", "n7", "d7", "ATTEMPTS", "2"]),
            v("EMQ.ENQUEUE", &j(8), &["n8", "d8", "PRIORITY", "99999999"]),
            v("EMQ.ENQUEUE", "bad", &["n", "d"]),
            v("EMQ.ENQUEUE", &j(9), &["n9"]),
            bus("EMQ.APPEND", &[&id_of("MSG", 1), "p1"]),
            bus("EMQ.APPEND", &[&id_of("MSG", 1), "p1"]),
            bus("EMQ.PUBLISH", &[&id_of("MSG", 2), "p2", "MAXLEN", "100"]),
            fails.clone(),
            fails,
            empty.cmd("EMQ.CLAIM", "", &keys_of("EMQ.CLAIM"), &[b"w0", b"60000", b"BLOCK", b"50"]),
        ],
        vec![
            v("EMQ.CLAIM", "", &["t1", "60000", "COUNT", "3"]),
            v("EMQ.CLAIM", "", &["t2", "60000", "COUNT", "10"]),
            v("EMQ.EXTEND", &j(4), &["t1", "120000"]),
            {
                let mut e = argv(&["EMQ.EXTENDS", "1", &q.k("active"), "60000"]);
                e.extend(argv(&[&j(1), "t1", &j(3), "t1", &j(9), "t1", &j(2), "t1"]));
                e
            },
            v("EMQ.COMPLETE", &j(4), &["t1", "r4"]),
            v("EMQ.COMPLETE", &j(4), &["t1", "r4"]),
            v("EMQ.COMPLETE", &j(1), &["t2", "r1"]),
            v("EMQ.FAIL", &j(3), &["t1", "e3"]),
            v("EMQ.FAIL", &j(2), &["t2", "e2"]),
            v("EMQ.FAIL", &j(5), &["t2", "e5"]),
            v("EMQ.DELAY", &j(1), &["t1", "+600000"]),
            v("EMQ.RESCHEDULE", &j(1), &["+700000"]),
            v("EMQ.RESCHEDULE", &j(4), &["+700000"]),
            v("EMQ.PROMOTE", &j(6), &[]),
            v("EMQ.PROMOTE", &j(6), &[]),
            v("EMQ.REPROCESS", &j(4), &[]),
            v("EMQ.REPROCESS", &j(5), &[]),
            v("EMQ.REPROCESS", &j(2), &[]),
            v("EMQ.CLAIM", "", &["t3", "60000"]),
            v("EMQ.REQUEUE", &j(4), &["t3"]),
            v("EMQ.CLAIM", "", &["t4", "60000"]),
            v("EMQ.EXTEND", &j(4), &["t4", "1"]),
            v("EMQ.PROMOTE", &j(1), &[]),
            v("EMQ.CLAIM", "", &["PAUSE"]),
            v("EMQ.CLAIM", "", &["t5", "60000", "BLOCK", "50"]),
            v("EMQ.CLAIM", "", &["PAUSE"]),
            v("EMQ.CLAIM", "", &["RESUME"]),
            v("EMQ.REQUEUE", &j(7), &["t3"]),
            v("EMQ.DELAY", &j(6), &["nobody", "+1"]),
        ],
        vec![
            v("EMQ.STALLED", "", &[]),
            v("EMQ.STALLED", "", &["MAXSTALLS", "0"]),
            v("EMQ.CLAIM", "", &["t6", "60000", "COUNT", "100"]),
            v("EMQ.COMPLETE", &j(1), &["t6", "r1", "KEEP", "5"]),
            v("EMQ.COMPLETE", &j(2), &["t6", "r2", "KEEP", "1"]),
            v("EMQ.FAIL", &j(4), &["t6", "e4", "FINAL", "KEEP", "0"]),
            v("EMQ.COMPLETE", &j(5), &["t6", "r5", "KEEP", "-1"]),
            v("EMQ.COMPLETE", &j(6), &["t6", "r6", "KEEP", "0"]),
            v("EMQ.FAIL", &j(7), &["t6", "e7"]),
            v("EMQ.STALLED", "", &["COUNT", "1"]),
        ],
        // The module's own verbs beyond the wire (`TRA.*`), fenced and read-only alike.
        vec![
            table_call("TRA.PROGRESS", name, &j(7), None, &["t2", "half"]),
            table_call("TRA.PROGRESS", name, &j(7), None, &["t1", "half"]),
            table_call("TRA.LOG", name, &j(7), None, &["t2", "line 1"]),
            table_call("TRA.LOG", name, &j(7), None, &["t2", "line 2", "KEEP", "1"]),
            table_call("TRA.JOB", name, &j(7), None, &[]),
            table_call("TRA.JOB", name, &j(5), None, &[]),
            table_call("TRA.COUNTS", name, "", None, &[]),
            table_call("TRA.JOBS", name, "", Some(Role::Completed), &[]),
            table_call("TRA.JOBS", name, "", Some(Role::Active), &["REV", "COUNT", "1"]),
            table_call("TRA.REMOVE", name, &j(3), None, &[]),
            table_call("TRA.REMOVE", name, &j(7), None, &[]),
            table_call("TRA.CLEAN", name, "", Some(Role::Completed), &["GRACE", "0", "COUNT", "1"]),
            table_call("TRA.DRAIN", name, "", None, &["DELAYED"]),
            table_call("TRA.OBLITERATE", &format!("{name}-empty"), "", None, &[]),
        ],
    ]
}

const SCRIPT: &str = r#"
local out = {}
local pos = 2
for k = 1, tonumber(ARGV[1]) do
  local argc = tonumber(ARGV[pos])
  local args = {}
  for a = 1, argc do args[a] = ARGV[pos + a] end
  pos = pos + argc + 1
  out[k] = redis.pcall(unpack(args))
end
return out
"#;

fn run_step(c: &mut Conn, mode: Mode, calls: &[Vec<Vec<u8>>]) -> Vec<Reply> {
    match mode {
        Mode::Plain => {
            calls.iter().map(|v| c.call(&v.iter().map(Vec::as_slice).collect::<Vec<_>>())).collect()
        }
        Mode::Multi => {
            assert_eq!(c.call(&[b"MULTI"]), Reply::Simple("OK".into()));
            for v in calls {
                let r = c.call(&v.iter().map(Vec::as_slice).collect::<Vec<_>>());
                assert_eq!(r, Reply::Simple("QUEUED".into()), "queued");
            }
            c.call(&[b"EXEC"]).array().to_vec()
        }
        Mode::Eval => {
            let mut a: Vec<Vec<u8>> = vec![b"EVAL".to_vec(), SCRIPT.as_bytes().to_vec(), b"0".to_vec()];
            a.push(calls.len().to_string().into_bytes());
            for v in calls {
                a.push(v.len().to_string().into_bytes());
                a.extend(v.iter().cloned());
            }
            let r = c.call(&a.iter().map(Vec::as_slice).collect::<Vec<_>>());
            r.array().to_vec()
        }
    }
}

fn is_time(s: &str) -> bool {
    s.parse::<i64>().is_ok_and(|n| n > 1_000_000_000_000)
}

fn is_entry_id(s: &str) -> bool {
    s.split_once('-').is_some_and(|(a, b)| is_time(a) && b.parse::<u64>().is_ok())
}

/// A reply with its times and stream entry ids blanked and the queue's name written `Q`.
fn norm(r: &Reply, name: &str) -> Reply {
    match r {
        Reply::Int(n) if *n > 1_000_000_000_000 => Reply::Simple("<time>".into()),
        Reply::Bulk(b) if is_entry_id(&String::from_utf8_lossy(b)) => Reply::Simple("<entry>".into()),
        Reply::Array(a) => Reply::Array(a.iter().map(|x| norm(x, name)).collect()),
        Reply::Error(e) => Reply::Error(e.replace(name, "Q")),
        other => other.clone(),
    }
}

/// Every key of the queue (and its empty twin), its type and content, the queue's name
/// written `Q`, times and stream entry ids blanked.
fn dump(c: &mut Conn, name: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for pattern in [format!("emq:{{{name}}}:*"), format!("emq:{{{name}-empty}}:*")] {
        let mut cursor = b"0".to_vec();
        loop {
            let r = c.call(&[b"SCAN", &cursor, b"MATCH", pattern.as_bytes(), b"COUNT", b"1000"]);
            cursor = r.array()[0].bytes().to_vec();
            for k in r.array()[1].strings() {
                let ty = c.call(&[b"TYPE", k.as_bytes()]).str();
                let kb = k.as_bytes();
                let blank = |s: String| if is_time(&s) || is_entry_id(&s) { "<time>".to_string() } else { s };
                let content: Vec<String> = match ty.as_str() {
                    "hash" => {
                        let mut f: Vec<String> = c
                            .call(&[b"HGETALL", kb])
                            .array()
                            .chunks(2)
                            .map(|p| format!("{}={}", p[0].str(), blank(p[1].str())))
                            .collect();
                        f.sort();
                        f
                    }
                    "list" => c.call(&[b"LRANGE", kb, b"0", b"-1"]).strings(),
                    "zset" => c
                        .call(&[b"ZRANGE", kb, b"0", b"-1", b"WITHSCORES"])
                        .array()
                        .chunks(2)
                        .map(|p| format!("{}:{}", p[0].str(), blank(p[1].str())))
                        .collect(),
                    "stream" => c
                        .call(&[b"XRANGE", kb, b"-", b"+"])
                        .array()
                        .iter()
                        .map(|e| e.array()[1].strings().into_iter().map(blank).collect::<Vec<_>>().join(" "))
                        .collect(),
                    "string" => vec![c.call(&[b"GET", kb]).str()],
                    other => vec![format!("<{other}>")],
                };
                let ttl = c.call(&[b"PTTL", kb]).int() > 0;
                let key = k.replacen(&format!("{{{name}"), "{Q", 1);
                out.insert(key, format!("{ty}{} {}", if ttl { " (ttl)" } else { "" }, content.join(" | ")));
            }
            if cursor == b"0" {
                break;
            }
        }
    }
    out
}

#[test]
fn every_verb_in_multi_and_in_eval_behaves_as_outside() {
    // Upkeep off: the expired lease and the due jobs wait for the calls, in every run.
    let primary = Server::start(Opts {
        server_args: args(&["--appendonly", "yes"]),
        module_args: args(&["upkeep", "no"]),
        ..Opts::default()
    });
    let mut c = primary.conn();
    assert_eq!(c.call(&[b"EMQ.INSTALL", b"1", b"{emq}:version"]), Reply::Int(1));
    let replica = Server::start(Opts::default());
    let mut r = replica.follow(&primary);
    let modes = [(Mode::Plain, "plain"), (Mode::Multi, "multi"), (Mode::Eval, "eval")];
    let mut replies: Vec<Vec<Vec<Reply>>> = Vec::new();
    for (mode, name) in modes {
        let mut got = Vec::new();
        for step in steps(name) {
            let rs = run_step(&mut c, mode, &step);
            assert_eq!(rs.len(), step.len(), "{mode:?}: one reply per call");
            got.push(rs.iter().map(|x| norm(x, name)).collect::<Vec<_>>());
            sleep(Duration::from_millis(30));
        }
        replies.push(got);
    }
    // The same replies, call by call.
    let plain_steps = steps("plain");
    for (s, step) in plain_steps.iter().enumerate() {
        for (i, call) in step.iter().enumerate() {
            let shown: Vec<String> = call.iter().map(|a| String::from_utf8_lossy(a).into_owned()).collect();
            for (m, (mode, _)) in modes.iter().enumerate().skip(1) {
                assert_eq!(
                    replies[m][s][i],
                    replies[0][s][i],
                    "{mode:?}, step {s} call {i}: {}",
                    shown.join(" ")
                );
            }
        }
    }
    // The sequence meant something: refusals, idempotent repeats, dedup, an expired lease.
    let flat: Vec<&Reply> = replies[0].iter().flatten().collect();
    assert!(flat.iter().filter(|r| r.err().is_some()).count() >= 6, "refusals in the sequence: {flat:?}");
    assert_eq!(
        replies[0][2][0],
        Reply::Array(vec![Reply::Array(vec![Reply::Bulk(jid(4).into_bytes())]), Reply::Array(vec![])])
    );
    // The same keyspace, queue by queue.
    let want = dump(&mut c, "plain");
    assert!(want.len() >= 8, "the sequence left jobs and keys to compare: {want:#?}");
    for (mode, name) in &modes[1..] {
        let got = dump(&mut c, name);
        assert_eq!(got, want, "{mode:?}: the keyspace it left");
    }
    for (_, name) in &modes {
        check_rows(&mut c, &Q::new(name));
    }

    // INSTALL is deny-script: refused inside EVAL, nothing written (database 2 has no fence).
    assert_eq!(c.call(&[b"SELECT", b"2"]), Reply::Simple("OK".into()));
    for script in [
        &b"return redis.call('EMQ.INSTALL', '1', '{emq}:version')"[..],
        b"return redis.pcall('EMQ.INSTALL', '1', '{emq}:version')",
    ] {
        let e = unchanged(&mut c, |c| c.call(&[b"EVAL", script, b"1", b"{emq}:version"]));
        assert!(e.error().contains("not allowed from script"), "{e:?}");
    }
    assert_eq!(c.call(&[b"EXISTS", b"{emq}:version"]), Reply::Int(0));
    assert_eq!(
        c.call(&[b"EMQ.INSTALL", b"1", b"{emq}:version"]),
        Reply::Int(1),
        "outside a script it writes"
    );
    assert_eq!(c.call(&[b"SELECT", b"0"]), Reply::Simple("OK".into()));

    // The replica holds what the primary holds; so does the primary's AOF.
    assert_eq!(c.call(&[b"WAIT", b"1", b"5000"]), Reply::Int(1));
    let d = digest(&mut c);
    assert_eq!(digest(&mut r), d, "the replica");
    wait_for(|| info_field(&mut c, "persistence", "aof_rewrite_in_progress") == "0", "no rewrite running");
    assert_eq!(c.call(&[b"DEBUG", b"LOADAOF"]), Reply::Simple("OK".into()));
    assert_eq!(digest(&mut c), d, "the primary after reloading its AOF");
    for (mode, name) in &modes {
        assert_eq!(dump(&mut c, name), want, "{mode:?} after the AOF reload");
    }
}
