//! Calls at their caps (`--only-caps`): how long the calls that tests/two_ms.rs holds to
//! their work take, beside a million waiting jobs, shown beside the 2 ms goal; and the longest
//! event-loop cycle of the server while upkeep catches up. The suite asserts the work (the
//! same on any machine); the microseconds are this report's (a busy machine makes them
//! larger, so the run waits for a quiet machine first, as every phase of the benchmark does).
//!
//! Two parts, each on a server of its own (started and stopped by pid like the main one):
//!
//! * **Calls**: N waiting jobs (10^6; the short mode 10^4) in one queue, upkeep off, 30 000 due
//!   delayed jobs, then each batch call at its cap (read from the server's refusal of more) and
//!   at its default, as in tests/two_ms.rs: its server CPU (`INFO cpu` around it, less what the
//!   two readings cost by themselves) and its own duration (`INFO commandstats` usec). Each pass
//!   fills a fresh keyspace; each figure is the median pass.
//! * **Upkeep catching up**: upkeep off, 10^5 jobs claimed with 1 ms leases (lapsed) and
//!   2·10^5 due delayed jobs beside them; `CONFIG RESETSTAT`, upkeep switched on, and the
//!   server's longest event-loop cycle (`INFO debug` `eventloop_duration_max`) read once upkeep
//!   has promoted and reclaimed them all. Then the same after a restart of the dataset
//!   (`DEBUG RELOAD`: upkeep scans the keyspace again, 10^6 keys).

use std::path::Path;
use std::thread::sleep;
use std::time::{Duration, Instant};

use crate::load::{self, Pipe};
use crate::queue::jid;
use crate::resp::{Conn, Reply};
use crate::server::{self, Server};

/// The goal: no call, and no event-loop cycle, over 2 ms.
pub const GOAL_US: f64 = 2000.0;

/// One call's figures over the passes.
pub struct Line {
    pub what: String,
    /// Items handed back or moved (the last pass's).
    pub items: i64,
    /// Server CPU, µs, every pass, lowest first.
    pub cpu_us: Vec<f64>,
    /// The command's own duration (commandstats), µs, every pass, lowest first.
    pub cmd_us: Vec<f64>,
}

pub struct Catchup {
    pub what: String,
    pub jobs: u64,
    pub seconds: f64,
    pub ticks: u64,
    /// The longest event-loop cycle (wall time, µs), every pass, lowest first.
    pub eventloop_max_us: Vec<f64>,
    /// Upkeep's own longest tick (`upkeep_tick_max_us`, since the pass's server started) and
    /// its ticks over 2 ms, every pass, lowest first; its queue steps (first pass). NaN when
    /// the module does not count them.
    pub tick_max_us: Vec<f64>,
    /// The server thread's CPU time in that longest tick (`upkeep_tick_max_cpu_us`): the tick's
    /// own work, without the time the machine took the thread away.
    pub tick_max_cpu_us: Vec<f64>,
    pub over_2ms: Vec<f64>,
    pub steps: f64,
}

pub struct Caps {
    pub jobs: u64,
    pub lines: Vec<Line>,
    pub catchup: Vec<Catchup>,
}

pub fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s[s.len() / 2]
}

fn k(q: &str, role: &str) -> Vec<u8> {
    format!("emq:{{{q}}}:{role}").into_bytes()
}

const Q: &str = "big";
const CLAIM_KEYS: &[&str] = &["wait", "prio", "active", "delayed", "meta", "events"];
const STALLED_KEYS: &[&str] = &["active", "wait", "prio", "failed", "events"];
const DATA: &[u8] = b"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// `verb numkeys keys… args…` for queue `Q`.
fn cmd(verb: &str, roles: &[&str], args: &[&[u8]]) -> Vec<Vec<u8>> {
    let mut v = vec![verb.as_bytes().to_vec(), roles.len().to_string().into_bytes()];
    v.extend(roles.iter().map(|r| k(Q, r)));
    v.extend(args.iter().map(|a| a.to_vec()));
    v
}

fn ok(r: Reply, what: &str) -> Result<Reply, String> {
    match r.err() {
        Some(e) => Err(format!("{what}: {e}")),
        None => Ok(r),
    }
}

fn claim(lease: &str, count: &str) -> Vec<Vec<u8>> {
    cmd("EMQ.CLAIM", CLAIM_KEYS, &[b"w", lease.as_bytes(), b"COUNT", count.as_bytes()])
}

/// Sends `calls` pipelined 1 000 at a time, every reply checked.
fn pipelined(c: &mut Conn, calls: impl Iterator<Item = Vec<Vec<u8>>>) -> Result<(), String> {
    let mut p = Pipe::new();
    let mut n = 0;
    let flush = |p: &mut Pipe, c: &mut Conn| -> Result<(), String> {
        for r in p.run(c)? {
            if let Some(e) = r.err() {
                return Err(format!("fill: {e}"));
            }
        }
        Ok(())
    };
    for v in calls {
        let refs: Vec<&[u8]> = v.iter().map(Vec::as_slice).collect();
        p.cmd(&refs);
        n += 1;
        if n % 1000 == 0 {
            flush(&mut p, c)?;
        }
    }
    flush(&mut p, c)
}

/// The cap in a refusal's text: the number after `..=` or after `at most`.
fn cap_in(e: &str) -> Option<String> {
    let t = e.rsplit("..=").next().filter(|_| e.contains("..=")).or_else(|| e.rsplit("at most ").next())?;
    let n: String = t.trim().chars().take_while(char::is_ascii_digit).collect();
    (!n.is_empty()).then_some(n)
}

fn count_cap(c: &mut Conn, v: &[Vec<u8>]) -> Result<String, String> {
    let r = c.call_v(v);
    r.err().and_then(cap_in).ok_or_else(|| format!("no cap in the refusal of too much: {r:?}"))
}

fn set_to_cap(c: &mut Conn, name: &str) -> Result<String, String> {
    let n = format!("trafikey.{name}");
    let r = c.call(&[b"CONFIG", b"SET", n.as_bytes(), b"999999999999"]);
    let cap = r
        .err()
        .and_then(|e| e.split("and ").nth(1).and_then(|t| t.split(' ').next()).map(str::to_owned))
        .ok_or_else(|| format!("no range in the refusal of {n}: {r:?}"))?;
    ok(c.call(&[b"CONFIG", b"SET", n.as_bytes(), cap.as_bytes()]), "CONFIG SET")?;
    Ok(cap)
}

/// Measures one call: server CPU around it, less what the readings cost alone (`idle`), and
/// the command's own duration from commandstats.
struct Meter {
    idle: f64,
    seen: Vec<(String, i64, f64, f64)>,
}

fn cmd_usec(c: &mut Conn, name: &str) -> f64 {
    let name = name.to_ascii_lowercase();
    server::commandstats(c).into_iter().find(|(n, _, _)| *n == name).map_or(0.0, |(_, _, u)| u as f64)
}

impl Meter {
    fn new(c: &mut Conn) -> Meter {
        // What a reading of CPU and commandstats costs by itself: the least of 5.
        let mut idle = f64::INFINITY;
        for _ in 0..5 {
            let a = server::cpu_us(c);
            cmd_usec(c, "ping");
            let b = server::cpu_us(c);
            idle = idle.min(b - a);
        }
        Meter { idle, seen: Vec::new() }
    }

    /// Runs one call; `items` says what it handed back or moved, from its reply.
    fn run(
        &mut self,
        c: &mut Conn,
        what: &str,
        v: &[Vec<u8>],
        items: fn(&Reply) -> i64,
    ) -> Result<Reply, String> {
        let name = String::from_utf8_lossy(v.first().map_or(&[][..], Vec::as_slice)).into_owned();
        let u0 = cmd_usec(c, &name);
        let t0 = server::cpu_us(c);
        let r = c.call_v(v);
        let t1 = server::cpu_us(c);
        let u1 = cmd_usec(c, &name);
        let r = ok(r, what)?;
        self.seen.push((what.to_owned(), items(&r), (t1 - t0 - self.idle).max(0.0), u1 - u0));
        Ok(r)
    }
}

fn len(r: &Reply) -> i64 {
    match r {
        Reply::Array(a) => a.len() as i64,
        _ => 0,
    }
}

/// The count an integer reply answers (DRAIN: jobs deleted).
fn int(r: &Reply) -> i64 {
    match r {
        Reply::Int(n) => *n,
        _ => 0,
    }
}

/// STALLED's `[[requeued] [failed]]`: both.
fn both(r: &Reply) -> i64 {
    match r {
        Reply::Array(a) => a.iter().map(len).sum(),
        _ => 0,
    }
}

/// TRA.JOBS's `[next, [rows]]`: the rows.
fn page_rows(r: &Reply) -> i64 {
    match r {
        Reply::Array(a) => a.get(1).map_or(0, len),
        _ => 0,
    }
}

/// A reply whose count is not the work (COMPLETE's 1, OBLITERATE's keys left).
fn none(_: &Reply) -> i64 {
    0
}

fn enqueue(n: u64) -> Vec<Vec<u8>> {
    let id = jid(n);
    vec![
        b"EMQ.ENQUEUE".to_vec(),
        b"4".to_vec(),
        [k(Q, "job:").as_slice(), &id].concat(),
        k(Q, "wait"),
        k(Q, "prio"),
        k(Q, "events"),
        b"n".to_vec(),
        DATA.to_vec(),
    ]
}

/// A job due at once (its time, 1 ms after the epoch, long past).
fn schedule(n: u64) -> Vec<Vec<u8>> {
    let id = jid(n);
    vec![
        b"EMQ.SCHEDULE".to_vec(),
        b"3".to_vec(),
        [k(Q, "job:").as_slice(), &id].concat(),
        k(Q, "delayed"),
        k(Q, "events"),
        b"1".to_vec(),
        b"n".to_vec(),
        DATA.to_vec(),
    ]
}

fn first_id(j: &Reply) -> Vec<u8> {
    match j {
        Reply::Array(a) => a.first().map(|x| x.str().into_bytes()).unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// One pass of the calls: a fresh keyspace of `jobs` waiting jobs, each batch call at its cap
/// and default. Returns (what, items, cpu µs, command µs) per call.
fn calls_pass(
    c: &mut Conn,
    u: &mut Conn,
    pid: u32,
    jobs: u64,
    defaults: &[(String, String)],
) -> Result<Vec<(String, i64, f64, f64)>, String> {
    ok(c.call(&[b"FLUSHALL", b"SYNC"]), "FLUSHALL")?;
    for (name, value) in defaults {
        ok(c.call(&[b"CONFIG", b"SET", name.as_bytes(), value.as_bytes()]), "CONFIG SET")?;
    }
    ok(c.call(&[b"EMQ.INSTALL", b"1", b"{emq}:version"]), "INSTALL")?;
    pipelined(c, (1..=jobs).map(enqueue))?;
    pipelined(c, (2_000_000_000..2_000_030_000).map(schedule))?;
    load::wait_quiet(pid, 0.15, Duration::from_secs(30));
    let mut m = Meter::new(c);
    let pdef = defaults.iter().find(|(n, _)| n == "trafikey.promote-batch").map_or("?", |(_, v)| v.as_str());
    m.run(
        c,
        &format!("CLAIM COUNT 1, promoting promote-batch {pdef} (default)"),
        &claim("600000", "1"),
        len,
    )?;
    let pcap = set_to_cap(c, "promote-batch")?;
    let cap = count_cap(c, &claim("1", "999999999999"))?;
    let what = format!("CLAIM COUNT {cap} (cap), promoting promote-batch {pcap} (cap)");
    m.run(c, &what, &claim("600000", &cap), len)?;
    while c.call(&[b"ZCARD", &k(Q, "delayed")]).int() > 0 {
        ok(c.call_v(&claim("600000", "1")), "CLAIM")?;
    }
    m.run(c, &format!("CLAIM COUNT {cap} (cap), nothing due"), &claim("600000", &cap), len)?;

    // 30 000 leases of 1 ms, lapsed.
    for _ in 0..(30_000 / cap.parse::<u64>().unwrap_or(50).max(1)) {
        ok(c.call_v(&claim("1", &cap)), "CLAIM")?;
    }
    sleep(Duration::from_millis(20));
    m.run(c, "STALLED (default COUNT: stalled-batch)", &cmd("EMQ.STALLED", STALLED_KEYS, &[]), both)?;
    let scap = count_cap(c, &cmd("EMQ.STALLED", STALLED_KEYS, &[b"COUNT", b"999999999999"]))?;
    let v = cmd("EMQ.STALLED", STALLED_KEYS, &[b"COUNT", scap.as_bytes()]);
    m.run(c, &format!("STALLED COUNT {scap} (cap)"), &v, both)?;

    // EXTENDS at its cap (read from the refusal of 1 001 pairs), by the default user and by a
    // user held to this queue (ACL checked on every row).
    let mut held: Vec<Vec<u8>> = Vec::new();
    while held.len() < 1001 {
        let r = ok(c.call_v(&claim("600000", &cap)), "CLAIM")?;
        if len(&r) == 0 {
            return Err("no jobs left to hold".into());
        }
        held.extend(r.array().iter().map(first_id));
    }
    let extends = |n: usize| {
        let mut v = cmd("EMQ.EXTENDS", &["active"], &[b"600000"]);
        for id in held.iter().take(n) {
            v.push(id.clone());
            v.push(b"w".to_vec());
        }
        v
    };
    let pairs: usize = count_cap(c, &extends(1001))?.parse().map_err(|e| format!("pairs: {e}"))?;
    m.run(c, &format!("EXTENDS {pairs} pairs (cap)"), &extends(pairs), len)?;
    let grant: [&[u8]; 8] =
        [b"ACL", b"SETUSER", b"billing", b"on", b">pw", b"~emq:{big}:*", b"%R~{emq}:version", b"+@emq"];
    ok(c.call(&grant), "ACL SETUSER")?;
    ok(c.call(&[b"ACL", b"SETUSER", b"billing", b"+info"]), "ACL SETUSER")?;
    ok(u.call(&[b"AUTH", b"billing", b"pw"]), "AUTH")?;
    m.run(u, &format!("EXTENDS {pairs} pairs (cap), a user held to one queue"), &extends(pairs), len)?;

    // TRA.COMPLETES of a whole claim.
    let batch = ok(c.call_v(&claim("600000", &cap)), "CLAIM")?;
    let mut v = cmd("TRA.COMPLETES", &["active", "completed", "events"], &[]);
    for j in batch.array() {
        v.extend([first_id(j), b"w".to_vec(), b"ok".to_vec()]);
    }
    m.run(c, &format!("TRA.COMPLETES {} jobs (cap)", len(&batch)), &v, len)?;

    // Retention: 30 000 completed kept, then COMPLETE KEEP 1 deletes a batch.
    let mut done = Vec::new();
    while done.len() < 30_000 {
        let r = ok(c.call_v(&claim("600000", &cap)), "CLAIM")?;
        done.extend(r.array().iter().map(first_id));
    }
    let complete = |id: &[u8], keep: &[u8]| {
        vec![
            b"EMQ.COMPLETE".to_vec(),
            b"4".to_vec(),
            [k(Q, "job:").as_slice(), id].concat(),
            k(Q, "active"),
            k(Q, "completed"),
            k(Q, "events"),
            b"w".to_vec(),
            b"ok".to_vec(),
            b"KEEP".to_vec(),
            keep.to_vec(),
        ]
    };
    let last = done.split_off(done.len() - 2);
    pipelined(c, done.iter().map(|id| complete(id, b"-1")))?;
    let rcap = set_to_cap(c, "retention-batch")?;
    let rdef =
        defaults.iter().find(|(n, _)| n == "trafikey.retention-batch").map_or("?", |(_, v)| v.as_str());
    let before = c.call(&[b"DBSIZE"]).int();
    m.run(
        c,
        &format!("COMPLETE KEEP 1, retention-batch {rcap} (cap; default {rdef})"),
        &complete(&last[0], b"1"),
        none,
    )?;
    if let Some(x) = m.seen.last_mut() {
        x.1 = before - c.call(&[b"DBSIZE"]).int();
    }

    // Inspection and administration at their caps.
    let page = count_cap(c, &cmd("TRA.JOBS", &["wait"], &[b"COUNT", b"999999999999"]))?;
    let from = (jobs / 2).to_string();
    let v = cmd("TRA.JOBS", &["wait"], &[b"FROM", from.as_bytes(), b"COUNT", page.as_bytes()]);
    m.run(c, &format!("TRA.JOBS wait COUNT {page} (cap), from the middle"), &v, page_rows)?;
    let drain = |n: &[u8]| cmd("TRA.DRAIN", &["wait", "prio", "delayed", "events"], &[b"COUNT", n]);
    let n = count_cap(c, &drain(b"999999999999"))?;
    let v = cmd("TRA.CLEAN", &["completed", "events"], &[b"GRACE", b"0", b"COUNT", n.as_bytes()]);
    m.run(c, &format!("TRA.CLEAN completed COUNT {n} (cap)"), &v, len)?;
    m.run(c, &format!("TRA.DRAIN COUNT {n} (cap)"), &drain(n.as_bytes()), int)?;
    let all = ["wait", "prio", "active", "delayed", "completed", "failed", "meta", "events"];
    let before = c.call(&[b"DBSIZE"]).int();
    let v = cmd("TRA.OBLITERATE", &all, &[b"FORCE", b"COUNT", n.as_bytes()]);
    m.run(c, &format!("TRA.OBLITERATE FORCE COUNT {n} (cap)"), &v, none)?;
    if let Some(x) = m.seen.last_mut() {
        x.1 = before - c.call(&[b"DBSIZE"]).int();
    }
    let _ = c.call(&[b"ACL", b"DELUSER", b"billing"]);
    Ok(m.seen)
}

/// The longest event-loop cycle while upkeep catches up over `leases` lapsed leases and `due`
/// due delayed jobs (beside `waiting` waiting jobs), then after a `DEBUG RELOAD`.
fn catchup(
    c: &mut Conn,
    pid: u32,
    (waiting, leases, due): (u64, u64, u64),
    floor: Duration,
) -> Result<Vec<Catchup>, String> {
    ok(c.call(&[b"FLUSHALL", b"SYNC"]), "FLUSHALL")?;
    ok(c.call(&[b"CONFIG", b"SET", b"trafikey.upkeep", b"no"]), "CONFIG SET")?;
    ok(c.call(&[b"EMQ.INSTALL", b"1", b"{emq}:version"]), "INSTALL")?;
    pipelined(c, (1..=leases).map(enqueue))?;
    pipelined(c, (0..leases.div_ceil(50)).map(|_| claim("1", "1000")))?;
    if c.call(&[b"ZCARD", &k(Q, "active")]).int() as u64 != leases {
        return Err("the leases were not all claimed".into());
    }
    pipelined(c, (leases + 1..=leases + waiting).map(enqueue))?;
    pipelined(c, (2_000_000_000..2_000_000_000 + due).map(schedule))?;
    sleep(Duration::from_millis(20));
    let mut out = Vec::new();
    let num = |c: &mut Conn, s: &str, f: &str| -> f64 {
        server::info(c, s, f).and_then(|v| v.parse().ok()).unwrap_or(f64::NAN)
    };
    let upkept = |c: &mut Conn| {
        num(c, "trafikey", "trafikey_upkeep_promoted") + num(c, "trafikey", "trafikey_upkeep_reclaimed")
    };
    // The floor: the same keyspace, upkeep off, read the same way for `floor` — what the
    // machine and the server's own cron give, upkeep aside.
    load::wait_quiet(pid, 0.15, Duration::from_secs(30));
    ok(c.call(&[b"CONFIG", b"RESETSTAT"]), "RESETSTAT")?;
    let t0 = Instant::now();
    while t0.elapsed() < floor {
        upkept(c);
        sleep(Duration::from_millis(5));
    }
    out.push(Catchup {
        what: format!("floor: upkeep off, the same keyspace, {} s of the same readings", floor.as_secs_f64()),
        jobs: 0,
        seconds: floor.as_secs_f64(),
        ticks: 0,
        eventloop_max_us: vec![num(c, "debug", "eventloop_duration_max")],
        tick_max_us: vec![],
        tick_max_cpu_us: vec![],
        over_2ms: vec![],
        steps: f64::NAN,
    });
    // Once: upkeep switched on over the backlog.
    load::wait_quiet(pid, 0.15, Duration::from_secs(30));
    let base = upkept(c);
    let ticks0 = num(c, "trafikey", "trafikey_upkeep_ticks");
    let over0 = num(c, "trafikey", "trafikey_upkeep_ticks_over_2ms");
    let steps0 = num(c, "trafikey", "trafikey_upkeep_steps");
    ok(c.call(&[b"CONFIG", b"RESETSTAT"]), "RESETSTAT")?;
    let t0 = Instant::now();
    ok(c.call(&[b"CONFIG", b"SET", b"trafikey.upkeep", b"yes"]), "CONFIG SET")?;
    let want = (leases + due) as f64;
    while upkept(c) - base < want {
        if t0.elapsed() > Duration::from_secs(120) {
            return Err(format!("upkeep did not catch up in 120 s ({} of {want})", upkept(c) - base));
        }
        sleep(Duration::from_millis(5));
    }
    let seconds = t0.elapsed().as_secs_f64();
    out.push(Catchup {
        what: format!("upkeep switched on over {leases} lapsed 1 ms leases and {due} due jobs, beside {waiting} waiting"),
        jobs: leases + due,
        seconds,
        ticks: (num(c, "trafikey", "trafikey_upkeep_ticks") - ticks0) as u64,
        eventloop_max_us: vec![num(c, "debug", "eventloop_duration_max")],
        tick_max_us: vec![num(c, "trafikey", "trafikey_upkeep_tick_max_us")],
        tick_max_cpu_us: vec![num(c, "trafikey", "trafikey_upkeep_tick_max_cpu_us")],
        over_2ms: vec![num(c, "trafikey", "trafikey_upkeep_ticks_over_2ms") - over0],
        steps: num(c, "trafikey", "trafikey_upkeep_steps") - steps0,
    });
    // After a restart of the dataset: the scan over every key, then nothing left to do but
    // the leases that lapse again (none: they were requeued).
    ok(c.call(&[b"CONFIG", b"SET", b"trafikey.upkeep", b"no"]), "CONFIG SET")?;
    let keys = c.call(&[b"DBSIZE"]).int();
    ok(c.call(&[b"DEBUG", b"RELOAD"]), "DEBUG RELOAD")?;
    load::wait_quiet(pid, 0.15, Duration::from_secs(30));
    let ticks0 = num(c, "trafikey", "trafikey_upkeep_ticks");
    let over0 = num(c, "trafikey", "trafikey_upkeep_ticks_over_2ms");
    let steps0 = num(c, "trafikey", "trafikey_upkeep_steps");
    ok(c.call(&[b"CONFIG", b"RESETSTAT"]), "RESETSTAT")?;
    let t0 = Instant::now();
    ok(c.call(&[b"CONFIG", b"SET", b"trafikey.upkeep", b"yes"]), "CONFIG SET")?;
    // The scan is over once `TRA.QUEUES` knows the queue again and a second has passed with
    // ticks coming no faster than the tick config (the scan ticks back to back).
    let mut last = num(c, "trafikey", "trafikey_upkeep_ticks");
    let mut calm = 0;
    while calm < 10 {
        sleep(Duration::from_millis(100));
        let now = num(c, "trafikey", "trafikey_upkeep_ticks");
        calm = if now - last <= 2.0 { calm + 1 } else { 0 };
        last = now;
        if t0.elapsed() > Duration::from_secs(300) {
            return Err("upkeep's scan did not end in 300 s".into());
        }
    }
    out.push(Catchup {
        what: format!("upkeep's scan after DEBUG RELOAD, {keys} keys"),
        jobs: keys as u64,
        seconds: t0.elapsed().as_secs_f64() - 1.0,
        ticks: (last - ticks0) as u64,
        eventloop_max_us: vec![num(c, "debug", "eventloop_duration_max")],
        tick_max_us: vec![num(c, "trafikey", "trafikey_upkeep_tick_max_us")],
        tick_max_cpu_us: vec![num(c, "trafikey", "trafikey_upkeep_tick_max_cpu_us")],
        over_2ms: vec![num(c, "trafikey", "trafikey_upkeep_ticks_over_2ms") - over0],
        steps: num(c, "trafikey", "trafikey_upkeep_steps") - steps0,
    });
    ok(c.call(&[b"CONFIG", b"SET", b"trafikey.upkeep", b"no"]), "CONFIG SET")?;
    Ok(out)
}

pub fn run(bin: &Path, module: &Path, scratch: &Path, short: bool, repeat: usize) -> Result<Caps, String> {
    let jobs: u64 = if short { 10_000 } else { 1_000_000 };
    let srv = Server::start(bin, module, scratch)?;
    let mut c = srv.conn()?;
    let mut u = srv.conn()?;
    ok(c.call(&[b"CONFIG", b"SET", b"trafikey.upkeep", b"no"]), "CONFIG SET")?;
    let mut defaults = Vec::new();
    for name in ["trafikey.promote-batch", "trafikey.retention-batch"] {
        defaults.push((name.to_owned(), crate::queue::config_get(&mut c, name)?));
    }
    let mut passes = Vec::new();
    for p in 0..repeat.max(1) {
        eprintln!("bench: calls at their caps beside {jobs} waiting jobs (pass {} of {repeat})", p + 1);
        let seen = calls_pass(&mut c, &mut u, srv.pid(), jobs, &defaults)?;
        for (what, items, cpu, us) in &seen {
            eprintln!("  {what:<64} {items:>5} items {cpu:>7.0} µs CPU {us:>7.0} µs in the command");
        }
        passes.push(seen);
        u = srv.conn()?;
    }
    let mut lines: Vec<Line> = Vec::new();
    for (i, (what, items, _, _)) in passes.first().cloned().unwrap_or_default().into_iter().enumerate() {
        let mut cpu: Vec<f64> = passes.iter().filter_map(|p| p.get(i).map(|x| x.2)).collect();
        let mut cmd: Vec<f64> = passes.iter().filter_map(|p| p.get(i).map(|x| x.3)).collect();
        cpu.sort_by(f64::total_cmp);
        cmd.sort_by(f64::total_cmp);
        lines.push(Line { what, items, cpu_us: cpu, cmd_us: cmd });
    }
    drop((c, u, srv));
    let (waiting, leases, due) = if short { (10_000, 1_000, 2_000) } else { (1_000_000, 100_000, 200_000) };
    // The floor's readings: 3 s; the short mode's half a second checks the same code.
    let floor = Duration::from_millis(if short { 500 } else { 3_000 });
    eprintln!("bench: upkeep catching up: {leases} lapsed leases, {due} due jobs, {waiting} waiting");
    let mut catchups: Vec<Catchup> = Vec::new();
    for p in 0..repeat.max(1) {
        eprintln!("  pass {} of {repeat}", p + 1);
        // A server of its own each pass: upkeep's longest tick counts from its start.
        let srv = Server::start_with(bin, module, scratch, &["--enable-debug-command", "local"])?;
        let mut c = srv.conn()?;
        for (i, x) in catchup(&mut c, srv.pid(), (waiting, leases, due), floor)?.into_iter().enumerate() {
            eprintln!(
                "  {}: {:.1} s, {} ticks, {} steps, longest event-loop cycle {:.0} µs, longest tick {:?} µs ({:?} µs CPU), ticks over 2 ms {:?}",
                x.what,
                x.seconds,
                x.ticks,
                x.steps,
                median(&x.eventloop_max_us),
                x.tick_max_us,
                x.tick_max_cpu_us,
                x.over_2ms
            );
            match catchups.get_mut(i) {
                Some(y) => {
                    for (into, from) in [
                        (&mut y.eventloop_max_us, x.eventloop_max_us),
                        (&mut y.tick_max_us, x.tick_max_us),
                        (&mut y.tick_max_cpu_us, x.tick_max_cpu_us),
                        (&mut y.over_2ms, x.over_2ms),
                    ] {
                        into.extend(from);
                        into.sort_by(f64::total_cmp);
                    }
                }
                None => catchups.push(x),
            }
        }
    }
    Ok(Caps { jobs, lines, catchup: catchups })
}

/// The report: a markdown table of each call beside the goal, and the catch-up's figures.
pub fn markdown(x: &Caps, machine: &str) -> String {
    let mut s = format!(
        "### Calls at their caps, beside {} waiting jobs\n\n{machine}\n\nServer CPU per call (`INFO cpu` around it, less the readings' own cost) and the command's own duration (`INFO commandstats`), median of the passes (lowest–highest); goal: {GOAL_US:.0} µs.\n\n| call | items | server CPU µs | in the command µs | goal µs | |\n|---|--:|--:|--:|--:|---|\n",
        x.jobs
    );
    for l in &x.lines {
        let m = median(&l.cpu_us);
        let range = match (l.cpu_us.first(), l.cpu_us.last()) {
            (Some(a), Some(b)) if l.cpu_us.len() > 1 => format!(" ({a:.0}–{b:.0})"),
            _ => String::new(),
        };
        let verdict = if m <= GOAL_US { "within" } else { "**over**" };
        s += &format!(
            "| {} | {} | {m:.0}{range} | {:.0} | {GOAL_US:.0} | {verdict} |\n",
            l.what,
            l.items,
            median(&l.cmd_us)
        );
    }
    s += "\n### Upkeep catching up\n\nThe server's longest event-loop cycle (`INFO debug` `eventloop_duration_max`, wall time, after `CONFIG RESETSTAT`) while upkeep works the backlog off, and upkeep's own longest tick (`upkeep_tick_max_us`, wall time; beside it the server thread's CPU time in that tick, `upkeep_tick_max_cpu_us`: the tick's own work, without the time a busy machine took the thread away) and ticks over 2 ms of wall time (`upkeep_ticks_over_2ms`); median of the passes (lowest–highest), each pass on a server of its own; seconds, ticks and queue steps of the first pass. The floor row is the same keyspace with upkeep off, read the same way: what the machine and the server's own cron give.\n\n| what | jobs or keys | seconds | ticks | steps | longest event-loop cycle µs | upkeep's longest tick µs | its CPU µs | ticks over 2 ms | goal µs | |\n|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|\n";
    for c in &x.catchup {
        let m = median(&c.eventloop_max_us);
        let range = match (c.eventloop_max_us.first(), c.eventloop_max_us.last()) {
            (Some(a), Some(b)) if c.eventloop_max_us.len() > 1 => format!(" ({a:.0}–{b:.0})"),
            _ => String::new(),
        };
        let verdict = if m <= GOAL_US { "within" } else { "**over**" };
        let fig = |v: &[f64]| match (v.first(), v.last()) {
            (Some(a), _) if a.is_nan() => "—".to_string(),
            (Some(a), Some(b)) if v.len() > 1 => format!("{:.0} ({a:.0}–{b:.0})", median(v)),
            (Some(a), _) => format!("{a:.0}"),
            _ => "—".to_string(),
        };
        let steps = if c.steps.is_nan() { "—".to_string() } else { format!("{:.0}", c.steps) };
        s += &format!(
            "| {} | {} | {:.1} | {} | {steps} | {m:.0}{range} | {} | {} | {} | {GOAL_US:.0} | {verdict} |\n",
            c.what,
            c.jobs,
            c.seconds,
            c.ticks,
            fig(&c.tick_max_us),
            fig(&c.tick_max_cpu_us),
            fig(&c.over_2ms)
        );
    }
    s
}

/// The figures as JSON (no serde in the bench: written by hand).
pub fn json(x: &Caps) -> String {
    let esc = |s: &str| s.replace('\\', "\\\\").replace('"', "\\\"");
    let num = |n: f64| if n.is_finite() { format!("{n:.0}") } else { "null".to_string() };
    let nums = |v: &[f64]| v.iter().map(|n| num(*n)).collect::<Vec<_>>().join(", ");
    let lines: Vec<String> = x
        .lines
        .iter()
        .map(|l| {
            format!(
                "    {{\"call\": \"{}\", \"items\": {}, \"server_cpu_us\": {{\"median\": {:.0}, \"passes\": [{}]}}, \"command_us\": {{\"median\": {:.0}, \"passes\": [{}]}}, \"goal_us\": {GOAL_US:.0}}}",
                esc(&l.what),
                l.items,
                median(&l.cpu_us),
                nums(&l.cpu_us),
                median(&l.cmd_us),
                nums(&l.cmd_us)
            )
        })
        .collect();
    let catchup: Vec<String> = x
        .catchup
        .iter()
        .map(|c| {
            format!(
                "    {{\"what\": \"{}\", \"jobs\": {}, \"seconds\": {:.2}, \"ticks\": {}, \"steps\": {}, \"eventloop_duration_max_us\": {{\"median\": {}, \"passes\": [{}]}}, \"upkeep_tick_max_us\": [{}], \"upkeep_tick_max_cpu_us\": [{}], \"upkeep_ticks_over_2ms\": [{}], \"goal_us\": {GOAL_US:.0}}}",
                esc(&c.what),
                c.jobs,
                c.seconds,
                c.ticks,
                num(c.steps),
                num(median(&c.eventloop_max_us)),
                nums(&c.eventloop_max_us),
                nums(&c.tick_max_us),
                nums(&c.tick_max_cpu_us),
                nums(&c.over_2ms)
            )
        })
        .collect();
    format!(
        "{{\n  \"waiting_jobs\": {},\n  \"calls\": [\n{}\n  ],\n  \"upkeep_catchup\": [\n{}\n  ]\n}}\n",
        x.jobs,
        lines.join(",\n"),
        catchup.join(",\n")
    )
}
