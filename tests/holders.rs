//! Holder answers, exact: every command whose table row says it acts on jobs its caller holds
//! (`Command::holder`: EXTEND, EXTENDS, COMPLETE, TRA.COMPLETES, TRA.COMPLETENEXT,
//! TRA.COMPLETESNEXT, FAIL in each of its forms, DELAY, REQUEUE, TRA.PROGRESS, TRA.LOG, and
//! whatever is declared so later), put through every way a token can stand to its job: the
//! right one; a wrong one; a lease past its deadline before and after upkeep reclaims it; a
//! stale token whose job was reclaimed and claimed again, finished by another, or finished,
//! reprocessed and claimed by a third; a true repeat (finished with its own token), with and
//! without its row; the job failed or given back by its own token; a row that says held whose
//! `active` entry is gone; the job removed while held. Each answer is the contract's, word for
//! word (src/CONTRACT.md, "Held", "COMPLETE is idempotent for its holder", the batch codes);
//! an answer that refuses, or answers a code that writes nothing, leaves the keyspace as it
//! was (`DEBUG DIGEST` and expiry times), and a queue with a job ready beside it shows that a
//! finish-and-fetch hands a stale worker nothing. All cases on one server, one queue each.
// A test may panic: that is how it fails. The module's own rules are for src/.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

use std::time::{Duration, Instant};

use trafikey::host::command::{Arg, Command, KeyRole, Shape};
use trafikey::keyspace;
use trafikey::verbs::COMMANDS;
use trafikey_support::*;

/// The job each case is about, and the job left ready beside it for a finish-and-fetch.
const JOB: u64 = 1;
const READY: u64 = 2;
/// The token that claimed the job, the one that is not it, and the later holders'.
const MINE: &str = "mine";
const WRONG: &str = "not-mine";
const OTHER: &str = "other";
const THIRD: &str = "third";
/// The lease the calls ask for, and the claims' own (long, so only the cases expire).
const LEASE: i64 = 30_000;
const LONG: &[u8] = b"600000";
/// DELAY's and FAIL DELAY's time: absolute, so the reply is known before the call.
const WHEN: i64 = 4_102_444_800_000;

/// How the token stands to the job when the call comes.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Stands {
    /// Held with this token (past its deadline too, until a reclaim).
    Held,
    /// Not held with it: wrong, reclaimed, finished, given back.
    NotHeld,
    /// Completed with this very token, row kept: COMPLETE's repeat.
    Repeat,
    /// The row is gone.
    NoRow,
    /// The row says active with the token; the job is not in `active`.
    RowOnly,
}

/// What a command answers, by how the token stands: the contract's words.
#[derive(Clone, Debug, PartialEq)]
enum Want {
    /// The form's own success.
    Done,
    /// Refused with this error, nothing written.
    Refused(String),
    /// This reply, nothing written.
    Quiet(Reply),
    /// COMPLETE's repeat through a finish-and-fetch: this code, then the ready job claimed.
    Fetches(Reply),
}

/// A form of a holder command: the words after its entry's token, and what it answers when
/// it goes through (`now` is the call's clock).
struct Form {
    label: &'static str,
    extra: &'static [&'static str],
    done: fn(i64) -> Reply,
}

/// A holder command's calls and answers, from the reference page's section on it.
struct Holder {
    /// The arguments after the keys for job `id` and `token`, with the form's words.
    args: fn(&str, &str, &[&str]) -> Vec<String>,
    forms: Vec<Form>,
    /// Its answers to a job not held with the token, to a job with no row, and to a repeat
    /// of its own finish (for the verbs that do not finish, a repeat is a job not held).
    not_held: fn(&str) -> Want,
    no_row: fn(&str) -> Want,
    repeat: fn(&str) -> Want,
    /// Whether the row alone decides (TRA.LOG: `active` is not among its keys).
    row_decides: bool,
}

fn lease(id: &str) -> Want {
    Want::Refused(format!("EMQLEASE job {id} is not held with this token"))
}

fn no_job(id: &str) -> Want {
    Want::Refused(format!("EMQNOJOB no job {id}"))
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|a| a.to_string()).collect()
}

/// The job a finish-and-fetch hands out: the ready job, in CLAIM's reply shape.
fn fetched() -> Reply {
    Reply::Array(vec![Reply::Array(vec![
        Reply::Bulk(jid(READY).into_bytes()),
        Reply::Bulk(b"job".to_vec()),
        Reply::Bulk(b"{}".to_vec()),
        Reply::Int(1),
    ])])
}

fn simple(w: &str) -> Reply {
    Reply::Simple(w.into())
}

fn codes(code: i64) -> Reply {
    Reply::Array(vec![Reply::Int(code)])
}

/// The holder commands' calls and answers. A command declared `holder` without a line here
/// fails the test: give it its calls and the contract's answers.
fn holder(name: &str) -> Option<Holder> {
    let refuses = |args: fn(&str, &str, &[&str]) -> Vec<String>, forms: Vec<Form>| Holder {
        args,
        forms,
        not_held: lease,
        no_row: no_job,
        repeat: lease,
        row_decides: false,
    };
    let one = |label: &'static str, done: fn(i64) -> Reply| vec![Form { label, extra: &[], done }];
    Some(match name {
        "EMQ.EXTEND" => refuses(
            |_, t, x| [s(&[t, &LEASE.to_string()]), s(x)].concat(),
            one("", |now| Reply::Int(now + LEASE)),
        ),
        "EMQ.EXTENDS" => Holder {
            args: |id, t, x| [s(&[&LEASE.to_string(), id, t]), s(x)].concat(),
            forms: one("", |now| Reply::Array(vec![Reply::Int(now + LEASE)])),
            not_held: |_| Want::Quiet(codes(0)),
            no_row: |_| Want::Quiet(codes(0)),
            repeat: |_| Want::Quiet(codes(0)),
            row_decides: false,
        },
        "EMQ.COMPLETE" => Holder {
            repeat: |_| Want::Quiet(Reply::Int(0)),
            ..refuses(|_, t, x| [s(&[t, "ok"]), s(x)].concat(), one("", |_| Reply::Int(1)))
        },
        "TRA.COMPLETES" => Holder {
            args: |id, t, x| [s(&[id, t, "ok"]), s(x)].concat(),
            forms: one("", |_| codes(1)),
            not_held: |_| Want::Quiet(codes(-1)),
            no_row: |_| Want::Quiet(codes(-2)),
            repeat: |_| Want::Quiet(codes(0)),
            row_decides: false,
        },
        "TRA.COMPLETENEXT" => Holder {
            repeat: |_| Want::Fetches(Reply::Int(0)),
            ..refuses(
                |_, t, x| [s(&[t, "ok", &LEASE.to_string()]), s(x)].concat(),
                one("", |_| Reply::Array(vec![Reply::Int(1), fetched()])),
            )
        },
        "TRA.COMPLETESNEXT" => Holder {
            args: |_, t, x| [s(&[t, "ok", "next", &LEASE.to_string()]), s(x)].concat(),
            forms: one("", |_| Reply::Array(vec![codes(1), fetched()])),
            not_held: |_| Want::Quiet(Reply::Array(vec![codes(-1), Reply::Array(vec![])])),
            no_row: |_| Want::Quiet(Reply::Array(vec![codes(-2), Reply::Array(vec![])])),
            repeat: |_| Want::Fetches(codes(0)),
            row_decides: false,
        },
        "EMQ.DELAY" => {
            refuses(|_, t, x| [s(&[t, &WHEN.to_string()]), s(x)].concat(), one("", |_| Reply::Int(WHEN)))
        }
        "EMQ.FAIL" => {
            // The job has two attempts and no backoff: a plain FAIL retries it.
            refuses(
                |_, t, x| [s(&[t, "boom"]), s(x)].concat(),
                vec![
                    Form { label: "", extra: &[], done: |_| simple("retry") },
                    Form { label: " FINAL", extra: &["FINAL"], done: |_| simple("failed") },
                    Form { label: " RETRY", extra: &["RETRY"], done: |_| simple("retry") },
                    Form {
                        label: " RETRY LIFO",
                        extra: &["RETRY", "LIFO", "STACK", "at x"],
                        done: |_| simple("retry"),
                    },
                    Form { label: " DELAY", extra: &["DELAY", "4102444800000"], done: |_| simple("delayed") },
                    Form { label: " KEEP 0", extra: &["FINAL", "KEEP", "0"], done: |_| simple("failed") },
                ],
            )
        }
        "EMQ.REQUEUE" => refuses(|_, t, x| [s(&[t]), s(x)].concat(), one("", |_| Reply::Int(1))),
        "TRA.PROGRESS" => refuses(|_, t, x| [s(&[t, "half"]), s(x)].concat(), one("", |_| Reply::Int(1))),
        "TRA.LOG" => Holder {
            row_decides: true,
            ..refuses(|_, t, x| [s(&[t, "a line"]), s(x)].concat(), one("", |_| Reply::Int(1)))
        },
        _ => return None,
    })
}

/// The call of `cmd` on job `id` of queue `q`: its declared keys by role (the job's own row
/// and log), the tail's one row, then the arguments.
fn call(cmd: &Command, q: &str, id: &str, args: &[String]) -> Vec<Vec<u8>> {
    let mut v = vec![cmd.name.as_bytes().to_vec(), cmd.keys.len().to_string().into_bytes()];
    for slot in cmd.keys {
        match slot.role {
            KeyRole::Queue(r) => v.push(keyspace::key(q.as_bytes(), r, id.as_bytes())),
            other => panic!("{}: a holder command with a {other:?} key", cmd.name),
        }
    }
    if let Some(t) = cmd.tail {
        v.push(b"1".to_vec());
        v.push(keyspace::key(q.as_bytes(), t.role, id.as_bytes()));
    }
    v.extend(args.iter().map(|a| a.as_bytes().to_vec()));
    v
}

/// Whether an argument list names a `token` of its own or in a repeated entry: a holder's.
/// (A claim's token sits in one of its modes, and is the token it gives, not one it checks.)
fn takes_a_token(args: &[Arg]) -> bool {
    args.iter().any(|a| {
        a.name == "token" || (a.multiple && matches!(a.shape, Shape::Block(items) if takes_a_token(items)))
    })
}

/// How a case stands its job: what it does before the clock runs past the short leases,
/// after, and whether upkeep reclaims in between.
struct Case {
    label: &'static str,
    /// The job claimed by MINE with a 1 ms lease (else a long one).
    short: bool,
    /// Upkeep reclaims it (the queue's max-stalls 0: as a final stall).
    upkeep: Option<&'static str>,
    /// Calls after the claim (and after its lease ran out), `{T}` the token that claimed.
    then: &'static [&'static [&'static str]],
    /// The token the call gives.
    token: &'static str,
    stands: Stands,
}

/// The cases, each a script of calls on its own queue after `ENQUEUE job` (two attempts) and
/// `CLAIM` by MINE. Verb names stand for their calls on the job: `COMPLETE t`, `FAIL t …`.
fn cases() -> Vec<Case> {
    fn c(
        label: &'static str,
        short: bool,
        upkeep: Option<&'static str>,
        then: &'static [&'static [&'static str]],
        token: &'static str,
        stands: Stands,
    ) -> Case {
        Case { label, short, upkeep, then, token, stands }
    }
    use Stands::*;
    vec![
        c("the right token", false, None, &[], MINE, Held),
        c("a wrong token", false, None, &[], WRONG, NotHeld),
        c("its lease ran out, not yet reclaimed", true, None, &[], MINE, Held),
        c("its lease ran out, another token", true, None, &[], WRONG, NotHeld),
        c("its lease ran out and upkeep took it back", true, Some("1"), &[], MINE, NotHeld),
        c("its lease ran out and upkeep failed it (max-stalls 0)", true, Some("0"), &[], MINE, NotHeld),
        c(
            "reclaimed and claimed again by another",
            true,
            None,
            &[&["STALLED"], &["CLAIM", OTHER]],
            MINE,
            NotHeld,
        ),
        c(
            "reclaimed, claimed by another and finished by it",
            true,
            None,
            &[&["STALLED"], &["CLAIM", OTHER], &["COMPLETE", OTHER]],
            MINE,
            NotHeld,
        ),
        c(
            "finished by another, reprocessed and claimed by a third",
            true,
            None,
            &[&["STALLED"], &["CLAIM", OTHER], &["COMPLETE", OTHER], &["REPROCESS"], &["CLAIM", THIRD]],
            MINE,
            NotHeld,
        ),
        c("a true repeat: completed with its own token", false, None, &[&["COMPLETE", MINE]], MINE, Repeat),
        c(
            "completed with its own token, the row deleted by KEEP 0",
            false,
            None,
            &[&["COMPLETE", MINE, "KEEP", "0"]],
            MINE,
            NoRow,
        ),
        c("failed for good by its own token", false, None, &[&["FAIL", MINE, "FINAL"]], MINE, NotHeld),
        c("retried by its own token's FAIL", false, None, &[&["FAIL", MINE]], MINE, NotHeld),
        c("given back by its own token", false, None, &[&["REQUEUE", MINE]], MINE, NotHeld),
        c("delayed by its own token", false, None, &[&["DELAY", MINE]], MINE, NotHeld),
        c("its row says held, its active entry is gone", false, None, &[&["ZREM active"]], MINE, RowOnly),
        c("removed while held", false, None, &[&["REMOVE FORCE"]], MINE, NoRow),
    ]
}

/// One step of a case on queue `q`.
fn step(c: &mut Conn, q: &Q, words: &[&str]) {
    let id = jid(JOB);
    let r = match words {
        ["STALLED"] => q.run(c, "EMQ.STALLED", "", &[]),
        ["CLAIM", t] => q.run(c, "EMQ.CLAIM", "", &[t.as_bytes(), LONG]),
        ["COMPLETE", t, rest @ ..] => {
            let mut a: Vec<&[u8]> = vec![t.as_bytes(), b"ok"];
            a.extend(rest.iter().map(|w| w.as_bytes()));
            q.run(c, "EMQ.COMPLETE", &id, &a)
        }
        ["FAIL", t, rest @ ..] => {
            let mut a: Vec<&[u8]> = vec![t.as_bytes(), b"boom"];
            a.extend(rest.iter().map(|w| w.as_bytes()));
            q.run(c, "EMQ.FAIL", &id, &a)
        }
        ["REQUEUE", t] => q.run(c, "EMQ.REQUEUE", &id, &[t.as_bytes()]),
        ["DELAY", t] => q.run(c, "EMQ.DELAY", &id, &[t.as_bytes(), b"+600000"]),
        ["REPROCESS"] => q.run(c, "EMQ.REPROCESS", &id, &[]),
        ["ZREM active"] => c.call(&[b"ZREM", q.k("active").as_bytes(), id.as_bytes()]),
        ["REMOVE FORCE"] => q.run(c, "TRA.REMOVE", &id, &[b"FORCE"]),
        other => panic!("no step {other:?}"),
    };
    assert!(r.err().is_none(), "{} {words:?}: {r:?}", q.0);
    if words[0] == "CLAIM" {
        assert_eq!(r.array().len(), 1, "{} {words:?} takes the job: {r:?}", q.0);
    }
}

/// Runs `argv` in a script whose clock stands still, so the verb's `now` is known: (now, reply).
fn at_now(c: &mut Conn, argv: &[Vec<u8>]) -> (i64, Reply) {
    // The scratch key goes at once: left to expire, it would change a later digest.
    let script = format!("{SCRIPT_NOW} redis.call('DEL', KEYS[1]) return {{now, redis.pcall(unpack(ARGV))}}");
    let mut v: Vec<Vec<u8>> =
        vec![b"EVAL".to_vec(), script.into_bytes(), b"1".to_vec(), b"holders:now".to_vec()];
    v.extend(argv.iter().cloned());
    let r = c.call_v(&v);
    let parts = r.array();
    (parts[0].int(), parts[1].clone())
}

fn shown(argv: &[Vec<u8>]) -> String {
    argv.iter().map(|a| escape(a)).collect::<Vec<_>>().join(" ")
}

/// Every holder command, in each of its forms, through every case: each answer the contract's.
#[test]
fn every_holder_command_answers_each_way_a_token_stands_exactly() {
    let t0 = Instant::now();
    let holders: Vec<&Command> = COMMANDS.iter().filter(|c| c.holder).collect();
    let names: Vec<&str> = holders.iter().map(|c| c.name).collect();
    // The declaration and the arguments agree: a command taking a holder's token is declared.
    for cmd in COMMANDS.iter() {
        assert_eq!(
            cmd.holder,
            takes_a_token(cmd.args),
            "{}: a command that takes a job's token is declared `.holder()` (and only such a command)",
            cmd.name
        );
    }
    for want in [
        "EMQ.EXTEND",
        "EMQ.EXTENDS",
        "EMQ.COMPLETE",
        "TRA.COMPLETES",
        "TRA.COMPLETENEXT",
        "TRA.COMPLETESNEXT",
    ] {
        assert!(names.contains(&want), "{want} is a holder command: {names:?}");
    }
    let missing: Vec<&str> = names.iter().copied().filter(|n| holder(n).is_none()).collect();
    assert!(
        missing.is_empty(),
        "holder commands without their calls and answers: {missing:?}; add each to holder() in tests/holders.rs"
    );

    let s = Server::quiet();
    let mut c = s.conn();
    // (command, form, case, queue)
    let mut runs = Vec::new();
    for cmd in &holders {
        let h = holder(cmd.name).unwrap();
        for (f, _) in h.forms.iter().enumerate() {
            for (k, _) in cases().iter().enumerate() {
                let q = Q::new(&format!("h{}", runs.len()));
                runs.push((*cmd, f, k, q));
            }
        }
    }
    let cases = cases();
    // Each job enqueued and claimed by MINE; the short leases, then the time past them.
    for (_, _, k, q) in &runs {
        let case = &cases[*k];
        assert_eq!(q.enqueue(&mut c, &jid(JOB), &[b"ATTEMPTS", b"2"]), Reply::Int(1));
        if let Some(max) = case.upkeep {
            c.call(&[b"HSET", q.k("meta").as_bytes(), b"max-stalls", max.as_bytes()]);
        }
        let lease: &[u8] = if case.short { b"1" } else { LONG };
        let r = q.run(&mut c, "EMQ.CLAIM", "", &[MINE.as_bytes(), lease]);
        assert_eq!(r.array().len(), 1, "{}: {r:?}", q.0);
    }
    std::thread::sleep(Duration::from_millis(5));
    // Upkeep takes back the leases it is meant to; the others stay as they are.
    let upkept: Vec<&Q> =
        runs.iter().filter(|(_, _, k, _)| cases[*k].upkeep.is_some()).map(|r| &r.3).collect();
    let untouched: Vec<&Q> = runs
        .iter()
        .filter(|(_, _, k, _)| cases[*k].short && cases[*k].upkeep.is_none())
        .map(|r| &r.3)
        .collect();
    let in_active = |c: &mut Conn, q: &Q| {
        c.call(&[b"ZSCORE", q.k("active").as_bytes(), jid(JOB).as_bytes()]) != Reply::Nil
    };
    // The leases upkeep must not see are renewed far ahead for now, then set back to their
    // deadlines once it is off again.
    let mut deadlines = Vec::new();
    for q in &untouched {
        let d = c.call(&[b"ZSCORE", q.k("active").as_bytes(), jid(JOB).as_bytes()]).str();
        c.call(&[b"ZADD", q.k("active").as_bytes(), b"XX", b"9000000000000", jid(JOB).as_bytes()]);
        deadlines.push(d);
    }
    assert_eq!(c.call(&[b"CONFIG", b"SET", b"trafikey.upkeep", b"yes"]), Reply::Simple("OK".into()));
    let t1 = Instant::now();
    wait_for(|| upkept.iter().all(|q| !in_active(&mut c, q)), "upkeep reclaims the expired leases");
    let upkeep = t1.elapsed();
    assert_eq!(c.call(&[b"CONFIG", b"SET", b"trafikey.upkeep", b"no"]), Reply::Simple("OK".into()));
    for (q, d) in untouched.iter().zip(&deadlines) {
        c.call(&[b"ZADD", q.k("active").as_bytes(), b"XX", d.as_bytes(), jid(JOB).as_bytes()]);
    }
    // The steps after, then the job left ready beside each.
    for (_, _, k, q) in &runs {
        for words in cases[*k].then {
            let words: Vec<&str> = words.to_vec();
            step(&mut c, q, &words);
        }
        assert_eq!(q.enqueue(&mut c, &jid(READY), &[]), Reply::Int(1));
    }
    let setup = t0.elapsed();

    // Every answer is checked, and every wrong one listed at the end.
    let mut wrong: Vec<String> = Vec::new();
    let mut checked = 0;
    for (cmd, f, k, q) in &runs {
        let h = holder(cmd.name).unwrap();
        let form = &h.forms[*f];
        let case = &cases[*k];
        let id = jid(JOB);
        let want = match case.stands {
            Stands::Held => Want::Done,
            Stands::NotHeld => (h.not_held)(&id),
            Stands::NoRow => (h.no_row)(&id),
            Stands::Repeat => (h.repeat)(&id),
            Stands::RowOnly if h.row_decides => Want::Done,
            Stands::RowOnly => (h.not_held)(&id),
        };
        let argv = call(cmd, &q.0, &id, &(h.args)(&id, case.token, form.extra));
        let what = format!("{}{} on a job {} ({}): {}", cmd.name, form.label, case.label, q.0, shown(&argv));
        match want {
            Want::Refused(_) | Want::Quiet(_) => {
                let before = digest(&mut c);
                let r = c.call_v(&argv);
                let expected = match want {
                    Want::Refused(e) => Reply::Error(e),
                    Want::Quiet(r) => r,
                    _ => unreachable!(),
                };
                if r != expected {
                    wrong.push(format!(
                        "{what}\n    answered {}\n    wanted   {}",
                        reply_text(&r),
                        reply_text(&expected)
                    ));
                } else if digest(&mut c) != before {
                    wrong.push(format!("{what}\n    answered {} and wrote", reply_text(&r)));
                }
            }
            Want::Done | Want::Fetches(_) => {
                let (now, r) = at_now(&mut c, &argv);
                let expected = match want {
                    Want::Done => (form.done)(now),
                    Want::Fetches(code) => Reply::Array(vec![code, fetched()]),
                    _ => unreachable!(),
                };
                if r != expected {
                    wrong.push(format!(
                        "{what}\n    answered {}\n    wanted   {}",
                        reply_text(&r),
                        reply_text(&expected)
                    ));
                }
            }
        }
        if case.stands != Stands::RowOnly && wrong.is_empty() {
            // (That case broke the invariant by hand.)
            q.check_invariant(&mut c);
        }
        // Done with: its keys go, so the digests and scans of the cases after stay small.
        let mut del: Vec<Vec<u8>> = vec![b"DEL".to_vec()];
        for role in ["wait", "prio", "active", "delayed", "completed", "failed", "meta", "events", "alias"] {
            del.push(q.k(role).into_bytes());
        }
        for n in [JOB, READY] {
            del.push(q.job(&jid(n)).into_bytes());
            del.push(keyspace::key(q.0.as_bytes(), keyspace::Role::Log, jid(n).as_bytes()));
        }
        c.call_v(&del);
        checked += 1;
    }
    assert!(
        wrong.is_empty(),
        "{} of {checked} answers are not the contract's:\n{}",
        wrong.len(),
        wrong.iter().take(40).cloned().collect::<Vec<_>>().join("\n")
    );
    assert_eq!(c.call(&[b"DBSIZE"]), Reply::Int(1), "only the fence key is left");
    eprintln!(
        "{} holder commands ({} forms) x {} cases: {checked} answers, setup {:?} (upkeep's reclaim {:?}), all {:?}",
        holders.len(),
        runs.len() / cases.len(),
        cases.len(),
        setup,
        upkeep,
        t0.elapsed()
    );
}
