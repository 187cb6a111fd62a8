//! What the reliability tests share (tests/crash.rs, tests/failover.rs, tests/conservation.rs,
//! tests/memory.rs, tests/transactions.rs, tests/fence_every_verb.rs): a seeded RNG, stopping
//! a server gracefully and starting it again, the forks a server made, the check that every
//! row's fields agree with its set, and a randomized job workload with an exact model.
//!
//! **The workload.** A `Worker` owns one queue and drives it from one connection over the job
//! verbs (ENQUEUE, SCHEDULE, CLAIM with COUNT, EXTEND, COMPLETE, FAIL with ATTEMPTS/BACKOFF,
//! REQUEUE, DELAY, PROMOTE, REPROCESS, STALLED), keeping a model of every job it created: its
//! state and, when it holds the job, the token. Several workers run at once, one thread and
//! one connection each, so the server interleaves their calls; upkeep runs beside them (it may
//! promote due jobs and reclaim leases the worker let expire on purpose, which the model
//! allows). A call counts as acknowledged when its reply came back and the caller's `ack`
//! agreed (for a failover test: `WAIT 1 ms` answered 1); the model takes only acknowledged
//! calls, and the one call sent but not acknowledged when the server died is `pending`: its
//! effect may or may not be there. Every reply is checked against the model as it comes (a
//! CLAIM that hands out a job the model holds under a live lease, a STALLED that takes a live
//! lease, a CLAIM that finds less ready than the model knows: each is a failure).
//!
//! After a crash, `verify` compares the model with the keyspace (every acknowledged write
//! there, every held lease held by its token), `resync` takes the keyspace as the truth for
//! what was pending (or lost), and `drain` finishes every job. Servers for the workload need
//! `keep-completed -1 keep-failed -1` (so retention deletes no row the model knows) and
//! `max-stalls 1000` (so upkeep never fails a job behind the model's back): `workload_args`.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::thread::sleep;
use std::time::{Duration, Instant};

use crate::{jid, keys_of, Conn, Reply, Server, Snapshot, Q};

/// SplitMix64: small, fast, and the same on every machine.
#[derive(Clone)]
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    /// An independent stream for a sub-task (a thread).
    pub fn fork(&mut self) -> Rng {
        Rng(self.next())
    }
}

/// The seed of a randomized test: `$var` when set (to replay a run), else from the clock.
/// Printed, so a failing run can be replayed.
pub fn seed(var: &str) -> u64 {
    let s = std::env::var(var).ok().and_then(|v| v.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
    });
    eprintln!("seed: {var}={s}");
    s
}

/// The module arguments a workload server needs (see the module comment).
pub fn workload_args() -> Vec<String> {
    ["keep-completed", "-1", "keep-failed", "-1", "max-stalls", "1000"]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

/// Strings as owned server arguments.
pub fn args(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

impl Server {
    /// The server process's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `SHUTDOWN <how...>` (e.g. `SAVE`), wait for the process to exit, then start it again on
    /// the same data dir and arguments (a new port): the graceful twin of `restart`.
    pub fn shutdown_restart(mut self, how: &[&[u8]]) -> Server {
        if let Ok(mut c) = Conn::connect(self.port) {
            let mut v: Vec<&[u8]> = vec![b"SHUTDOWN"];
            v.extend_from_slice(how);
            let _ = c.send(&v);
            if let Ok(Reply::Error(e)) = c.read() {
                panic!("SHUTDOWN refused: {e}");
            }
        }
        let t0 = Instant::now();
        loop {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            if t0.elapsed() > Duration::from_secs(60) {
                let _ = Command::new("kill").arg("-9").arg(self.child.id().to_string()).status();
                let _ = self.child.wait();
                panic!("SHUTDOWN did not stop the server");
            }
            sleep(Duration::from_millis(10));
        }
        let dir = self.dir.clone();
        let args = std::mem::take(&mut self.args);
        let bin = std::mem::take(&mut self.bin);
        // Exited and reaped: nothing left to kill.
        std::mem::forget(self);
        Server::respawn(dir, bin, args)
    }
}

/// The pids of `pid`'s children (a server's fork for a save or an AOF rewrite), from /proc.
pub fn children_of(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else { return out };
    for e in dir.flatten() {
        let Some(p) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
        if parent_of(p) == Some(pid) {
            out.push(p);
        }
    }
    out
}

fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "pid (comm) state ppid ...": comm may hold spaces, so read after its closing paren.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// Kills (-9) a process this test started (a server's orphaned fork), by its pid, if it is
/// still a valkey process.
pub fn kill_fork(pid: u32) {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    let cmd = std::fs::read_to_string(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    if comm.contains("valkey") || comm.contains("redis") || cmd.contains("valkey") {
        let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
    }
}

/// The snowflake of a branded id (`jid`'s inverse).
pub fn snowflake(id: &str) -> u64 {
    const ALPHABET: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    id.bytes().skip(3).fold(0u64, |n, b| {
        let d = ALPHABET.iter().position(|&a| a == b).unwrap_or_else(|| panic!("not an id: {id}"));
        n.wrapping_mul(62).wrapping_add(d as u64)
    })
}

/// The current server time in ms.
pub fn server_ms(c: &mut Conn) -> i64 {
    let t = c.call(&[b"TIME"]);
    t.array()[0].str().parse::<i64>().expect("secs") * 1000
        + t.array()[1].str().parse::<i64>().expect("us") / 1000
}

/// The queue's state sets with their scores (wait: its position) and all its rows, read in one
/// script, so nothing the server does on its own (upkeep) lands between two reads.
pub fn view(c: &mut Conn, q: &Q) -> (Snapshot, BTreeMap<String, BTreeMap<String, i64>>) {
    const SCRIPT: &[u8] = br#"
local p = 'emq:{' .. ARGV[1] .. '}:'
local out = { redis.call('LRANGE', p .. 'wait', 0, -1) }
for _, z in ipairs({'prio', 'active', 'delayed', 'completed', 'failed'}) do
  table.insert(out, redis.call('ZRANGE', p .. z, 0, -1, 'WITHSCORES'))
end
local rows = {}
local cursor = '0'
repeat
  local r = redis.call('SCAN', cursor, 'MATCH', p .. 'job:*', 'COUNT', 1000)
  cursor = r[1]
  for _, k in ipairs(r[2]) do
    table.insert(rows, k)
    table.insert(rows, redis.call('HGETALL', k))
  end
until cursor == '0'
table.insert(out, rows)
return out
"#;
    let r = c.call(&[b"EVAL", SCRIPT, b"0", q.0.as_bytes()]);
    let parts = r.array();
    let mut sets = std::collections::HashMap::new();
    let mut scores = BTreeMap::new();
    sets.insert("wait".to_string(), parts[0].strings());
    for (i, z) in ["prio", "active", "delayed", "completed", "failed"].iter().enumerate() {
        let mut ids = Vec::new();
        let mut sc = BTreeMap::new();
        for p in parts[i + 1].array().chunks(2) {
            ids.push(p[0].str());
            sc.insert(p[0].str(), p[1].str().parse::<f64>().expect("a score") as i64);
        }
        sets.insert(z.to_string(), ids);
        scores.insert(z.to_string(), sc);
    }
    let mut rows = std::collections::HashMap::new();
    for pair in parts[6].array().chunks(2) {
        let key = pair[0].str();
        let id = key.rsplit_once(":job:").map(|(_, i)| i.to_string()).unwrap_or_default();
        let mut fields = std::collections::HashMap::new();
        for f in pair[1].array().chunks(2) {
            fields.insert(f[0].str(), f[1].bytes().to_vec());
        }
        rows.insert(id, fields);
    }
    (Snapshot { sets, rows }, scores)
}

/// The invariant (`Q::check_invariant`: every id in at most one set, its row naming that set,
/// a row iff the job is in a set), and every row's fields agree with the set holding it: a
/// ready or delayed job carries no token and no finish; a held job its token, a claim time and
/// a deadline not before it; a completed job its token, result and finish time (its score); a
/// failed job its error and finish time (its score) and no token; `p` is the prio score;
/// attempts made never exceed attempts started. Read at one instant (`view`). Returns the
/// snapshot.
pub fn check_rows(c: &mut Conn, q: &Q) -> Snapshot {
    q.check_invariant(c);
    let (snap, scores) = view(c, q);
    let mut seen: BTreeMap<&str, &str> = BTreeMap::new();
    for (set, ids) in &snap.sets {
        for id in ids {
            if let Some(other) = seen.insert(id, set) {
                panic!("{id} in both {set} and {other}");
            }
        }
    }
    for id in snap.rows.keys() {
        assert!(seen.contains_key(id.as_str()), "row {id} is in no state set");
    }
    for (id, set) in &seen {
        assert!(snap.rows.contains_key(*id), "{id} in {set} has no row");
    }
    let num = |id: &str, f: &str| {
        snap.field(id, f).map(|v| v.parse::<i64>().unwrap_or_else(|_| panic!("{id} {f}={v}")))
    };
    for (id, row) in &snap.rows {
        let st = snap.field(id, "st").unwrap_or_default();
        let has = |f: &str| row.contains_key(f);
        let score = scores.get(st.as_str()).and_then(|m| m.get(id)).copied();
        let bad = |what: &str| -> ! {
            panic!("row of {id} in {st} (score {score:?}): {what}: {:?}", show_row(row))
        };
        if seen.get(id.as_str()).copied() != Some(st.as_str()) {
            bad(&format!("the job is in {:?}", seen.get(id.as_str())));
        }
        if !has("n") || !has("c") {
            bad("no name or creation time");
        }
        if num(id, "am").unwrap_or(0) > num(id, "as").unwrap_or(0) {
            bad("more attempts made than started");
        }
        if num(id, "sc").unwrap_or(0) > num(id, "as").unwrap_or(0) {
            bad("more stalls than claims");
        }
        match st.as_str() {
            "wait" | "prio" | "delayed" => {
                if has("tk") || has("f") {
                    bad("a token or a finish time on a job not held and not finished");
                }
                if st == "wait" && has("p") {
                    bad("a priority in wait");
                }
                if st == "prio" && num(id, "p") != score {
                    bad("its prio score is not its priority");
                }
            }
            "active" => {
                if !has("tk") || !has("ca") || num(id, "as").unwrap_or(0) < 1 || has("f") {
                    bad("held without a token, a claim time or a claim");
                }
                if score < num(id, "ca") {
                    bad("its deadline before its claim");
                }
            }
            "completed" => {
                if !has("tk") || !has("r") || num(id, "am").unwrap_or(0) < 1 || num(id, "f") != score {
                    bad("completed without its token, result, attempt or finish time");
                }
            }
            "failed" => {
                if has("tk") || !has("e") || num(id, "am").unwrap_or(0) < 1 || num(id, "f") != score {
                    bad("failed with a token, or without its error, attempt or finish time");
                }
            }
            other => bad(&format!("unknown state {other}")),
        }
    }
    snap
}

fn show_row(row: &std::collections::HashMap<String, Vec<u8>>) -> BTreeMap<String, String> {
    row.iter().map(|(k, v)| (k.clone(), String::from_utf8_lossy(v).into_owned())).collect()
}

// ---------------------------------------------------------------------------------------
// The workload.

/// A job's state as its worker knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum St {
    Ready,
    Delayed,
    /// Held by this token; `expiring` when the worker gave it a 1 ms lease on purpose (upkeep
    /// or STALLED may have taken it back).
    Held {
        tok: String,
        expiring: bool,
    },
    Completed,
    Failed,
}

/// A call sent whose acknowledgement never came.
#[derive(Clone, Debug)]
pub enum Op {
    Create(String),
    Claim(String),
    /// A holder verb (EXTEND, COMPLETE, FAIL, REQUEUE, DELAY) on this job.
    Hold(String, &'static str),
    Promote(String),
    Reprocess(String),
    Stalled,
}

/// What a worker's acknowledged calls were, for the report.
#[derive(Clone, Debug, Default)]
pub struct Acked {
    pub creates: u64,
    pub claims: u64,
    pub completes: u64,
    pub fails: u64,
    pub other: u64,
}

pub struct Worker {
    pub name: String,
    pub q: Q,
    pub jobs: BTreeMap<String, St>,
    pub pending: Option<Op>,
    pub rng: Rng,
    pub acked: Acked,
    /// Leases of held jobs the model says are live (ms); long, so none expires in a test.
    pub lease_ms: u64,
    next_id: u64,
    next_tok: u64,
    /// Every token this worker sent in a CLAIM.
    tokens: BTreeSet<String>,
    /// Each job's priority (0 = wait).
    prio: BTreeMap<String, u64>,
}

/// What `verify` found.
#[derive(Debug, Default)]
pub struct Verdict {
    /// Acknowledged transitions whose effect is not in the keyspace, one line each.
    pub lost: Vec<String>,
    /// Leases the model held that are still held by their token.
    pub leases_held: usize,
}

/// A call's reply, or None when the connection failed (the server died).
pub fn exchange(c: &mut Conn, argv: &[Vec<u8>]) -> Option<Reply> {
    let refs: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
    c.send(&refs).ok()?;
    c.read().ok()
}

impl Worker {
    /// Worker `n` of a run: queue `{prefix}{n}`, job ids `jid(n * 10^7 + k)`.
    pub fn new(prefix: &str, n: u64, rng: Rng) -> Worker {
        Worker {
            name: format!("{prefix}{n}"),
            q: Q::new(&format!("{prefix}{n}")),
            jobs: BTreeMap::new(),
            pending: None,
            rng,
            acked: Acked::default(),
            lease_ms: 600_000,
            next_id: n * 10_000_000 + 1,
            next_tok: 0,
            tokens: BTreeSet::new(),
            prio: BTreeMap::new(),
        }
    }

    fn ids_where(&self, f: impl Fn(&St) -> bool) -> Vec<String> {
        self.jobs.iter().filter(|(_, s)| f(s)).map(|(i, _)| i.clone()).collect()
    }

    /// The jobs held under a live lease, with their tokens.
    pub fn held(&self) -> Vec<(String, String)> {
        self.jobs
            .iter()
            .filter_map(|(i, s)| match s {
                St::Held { tok, expiring: false } => Some((i.clone(), tok.clone())),
                _ => None,
            })
            .collect()
    }

    fn cmd(&self, verb: &str, id: &str, args: &[&[u8]]) -> Vec<Vec<u8>> {
        self.q.cmd(verb, id, &keys_of(verb), args)
    }

    fn fail_here(&self, what: String) -> ! {
        panic!("{}: {what}", self.name)
    }

    /// One random call, checked and applied to the model once acknowledged. False when it was
    /// not acknowledged (the connection failed, or `ack` said no): the call is then `pending`
    /// and the worker must stop.
    pub fn step(&mut self, c: &mut Conn, ack: &mut dyn FnMut(&mut Conn) -> bool) -> bool {
        let held = self.held();
        let delayed = self.ids_where(|s| *s == St::Delayed);
        let finished = self.ids_where(|s| matches!(s, St::Completed | St::Failed));
        let roll = self.rng.below(100);
        let pick = |rng: &mut Rng, v: &[(String, String)]| v[rng.below(v.len() as u64) as usize].clone();
        match roll {
            32..=51 => self.claim(c, ack),
            52..=66 if !held.is_empty() => {
                let (id, tok) = pick(&mut self.rng, &held);
                self.hold(c, ack, &id, &tok, "EMQ.COMPLETE")
            }
            67..=73 if !held.is_empty() => {
                let (id, tok) = pick(&mut self.rng, &held);
                self.hold(c, ack, &id, &tok, "EMQ.FAIL")
            }
            74..=77 if !held.is_empty() => {
                let (id, tok) = pick(&mut self.rng, &held);
                self.hold(c, ack, &id, &tok, "EMQ.EXTEND")
            }
            78..=80 if !held.is_empty() => {
                let (id, tok) = pick(&mut self.rng, &held);
                self.hold(c, ack, &id, &tok, "EMQ.REQUEUE")
            }
            81..=83 if !held.is_empty() => {
                let (id, tok) = pick(&mut self.rng, &held);
                self.hold(c, ack, &id, &tok, "EMQ.DELAY")
            }
            84..=85 if !held.is_empty() => {
                let (id, tok) = pick(&mut self.rng, &held);
                self.hold(c, ack, &id, &tok, "EXPIRE")
            }
            86..=89 if !delayed.is_empty() => {
                let id = delayed[self.rng.below(delayed.len() as u64) as usize].clone();
                self.promote(c, ack, &id)
            }
            90..=93 if !finished.is_empty() => {
                let id = finished[self.rng.below(finished.len() as u64) as usize].clone();
                self.reprocess(c, ack, &id)
            }
            94..=96 => self.stalled(c, ack),
            25..=31 => self.create(c, ack, true),
            _ => self.create(c, ack, false),
        }
    }

    /// Sends `argv` as the pending `op`; the reply when it came and was acknowledged.
    fn send(
        &mut self,
        c: &mut Conn,
        ack: &mut dyn FnMut(&mut Conn) -> bool,
        op: Op,
        argv: Vec<Vec<u8>>,
    ) -> Option<Reply> {
        self.pending = Some(op);
        let r = exchange(c, &argv)?;
        if let Reply::Error(e) = &r {
            // No refusal is expected: every call is valid for the model's state.
            if !(e.starts_with("EMQSTATE") && matches!(self.pending, Some(Op::Promote(_)))) {
                let shown: Vec<String> =
                    argv.iter().map(|a| String::from_utf8_lossy(a).into_owned()).collect();
                self.fail_here(format!("{} answered {e}", shown.join(" ")));
            }
        }
        if !ack(c) {
            return None;
        }
        self.pending = None;
        Some(r)
    }

    fn create(&mut self, c: &mut Conn, ack: &mut dyn FnMut(&mut Conn) -> bool, scheduled: bool) -> bool {
        let id = jid(self.next_id);
        self.next_id += 1;
        let prio = if self.rng.chance(70) { 0 } else { 1 + self.rng.below(3) };
        let attempts = (1 + self.rng.below(3)).to_string();
        let p = prio.to_string();
        let mut a: Vec<Vec<u8>> = Vec::new();
        if scheduled {
            a.push(format!("+{}", self.rng.below(400)).into_bytes());
        }
        a.extend([b"job".to_vec(), format!("data-{id}").into_bytes()]);
        if prio > 0 {
            a.extend([b"PRIORITY".to_vec(), p.into_bytes()]);
        }
        a.extend([b"ATTEMPTS".to_vec(), attempts.into_bytes()]);
        match self.rng.below(4) {
            0 => a.extend([b"BACKOFF".to_vec(), b"FIXED".to_vec(), b"0".to_vec()]),
            1 => a.extend([b"BACKOFF".to_vec(), b"FIXED".to_vec(), b"50".to_vec()]),
            2 => a.extend([b"BACKOFF".to_vec(), b"EXP".to_vec(), b"20".to_vec()]),
            _ => {}
        }
        let refs: Vec<&[u8]> = a.iter().map(Vec::as_slice).collect();
        let verb = if scheduled { "EMQ.SCHEDULE" } else { "EMQ.ENQUEUE" };
        let argv = self.cmd(verb, &id, &refs);
        self.prio.insert(id.clone(), prio);
        let Some(r) = self.send(c, ack, Op::Create(id.clone()), argv) else { return false };
        if r != Reply::Int(1) {
            self.fail_here(format!("{verb} {id} answered {r:?}"));
        }
        self.acked.creates += 1;
        self.jobs.insert(id, if scheduled { St::Delayed } else { St::Ready });
        true
    }

    fn token(&mut self) -> String {
        self.next_tok += 1;
        let t = format!("{}-t{}", self.name, self.next_tok);
        self.tokens.insert(t.clone());
        t
    }

    fn claim(&mut self, c: &mut Conn, ack: &mut dyn FnMut(&mut Conn) -> bool) -> bool {
        let tok = self.token();
        let count = 1 + self.rng.below(5);
        let lease = self.lease_ms.to_string();
        let n = count.to_string();
        let argv = self.cmd("EMQ.CLAIM", "", &[tok.as_bytes(), lease.as_bytes(), b"COUNT", n.as_bytes()]);
        let ready = self.ids_where(|s| *s == St::Ready).len() as u64;
        let Some(r) = self.send(c, ack, Op::Claim(tok.clone()), argv) else { return false };
        let got: Vec<String> = r.array().iter().map(|j| j.array()[0].str()).collect();
        if (got.len() as u64) < count.min(ready) {
            self.fail_here(format!(
                "CLAIM COUNT {count} took {} jobs with {ready} ready: {got:?}",
                got.len()
            ));
        }
        let mut seen = BTreeSet::new();
        for id in &got {
            if !seen.insert(id.clone()) {
                self.fail_here(format!("CLAIM handed out {id} twice in one reply"));
            }
            match self.jobs.get(id) {
                Some(St::Ready | St::Delayed | St::Held { expiring: true, .. }) => {}
                other => self.fail_here(format!("CLAIM handed out {id}, which the model holds as {other:?}")),
            }
            self.jobs.insert(id.clone(), St::Held { tok: tok.clone(), expiring: false });
        }
        self.acked.claims += 1;
        true
    }

    fn hold(
        &mut self,
        c: &mut Conn,
        ack: &mut dyn FnMut(&mut Conn) -> bool,
        id: &str,
        tok: &str,
        verb: &'static str,
    ) -> bool {
        let lease = self.lease_ms.to_string();
        let when = format!("+{}", self.rng.below(300));
        let final_ = self.rng.chance(15);
        let (real, args): (&str, Vec<&[u8]>) = match verb {
            "EMQ.COMPLETE" => (verb, vec![tok.as_bytes(), b"ok"]),
            "EMQ.FAIL" if final_ => (verb, vec![tok.as_bytes(), b"boom", b"FINAL"]),
            "EMQ.FAIL" => (verb, vec![tok.as_bytes(), b"boom"]),
            "EMQ.EXTEND" => (verb, vec![tok.as_bytes(), lease.as_bytes()]),
            "EXPIRE" => ("EMQ.EXTEND", vec![tok.as_bytes(), b"1"]),
            "EMQ.REQUEUE" => (verb, vec![tok.as_bytes()]),
            "EMQ.DELAY" => (verb, vec![tok.as_bytes(), when.as_bytes()]),
            other => self.fail_here(format!("no holder verb {other}")),
        };
        let argv = self.cmd(real, id, &args);
        let Some(r) = self.send(c, ack, Op::Hold(id.to_string(), real), argv) else { return false };
        let next = match (verb, &r) {
            ("EMQ.COMPLETE", Reply::Int(1)) => {
                self.acked.completes += 1;
                St::Completed
            }
            ("EMQ.FAIL", Reply::Simple(s)) => {
                self.acked.fails += 1;
                match s.as_str() {
                    "retry" if !final_ => St::Ready,
                    "delayed" if !final_ => St::Delayed,
                    "failed" => St::Failed,
                    _ => self.fail_here(format!("FAIL {id} answered {s}")),
                }
            }
            ("EMQ.EXTEND", Reply::Int(d)) if *d > 0 => St::Held { tok: tok.to_string(), expiring: false },
            ("EXPIRE", Reply::Int(d)) if *d > 0 => St::Held { tok: tok.to_string(), expiring: true },
            ("EMQ.REQUEUE", Reply::Int(1)) => St::Ready,
            ("EMQ.DELAY", Reply::Int(d)) if *d > 0 => St::Delayed,
            _ => self.fail_here(format!("{verb} {id} answered {r:?}")),
        };
        if !matches!(verb, "EMQ.COMPLETE" | "EMQ.FAIL") {
            self.acked.other += 1;
        }
        self.jobs.insert(id.to_string(), next);
        true
    }

    fn promote(&mut self, c: &mut Conn, ack: &mut dyn FnMut(&mut Conn) -> bool, id: &str) -> bool {
        let argv = self.cmd("EMQ.PROMOTE", id, &[]);
        let Some(r) = self.send(c, ack, Op::Promote(id.to_string()), argv) else { return false };
        // EMQSTATE: upkeep promoted it first; ready either way.
        if r != Reply::Int(1) && !r.err().is_some_and(|e| e.starts_with("EMQSTATE")) {
            self.fail_here(format!("PROMOTE {id} answered {r:?}"));
        }
        self.acked.other += 1;
        self.jobs.insert(id.to_string(), St::Ready);
        true
    }

    fn reprocess(&mut self, c: &mut Conn, ack: &mut dyn FnMut(&mut Conn) -> bool, id: &str) -> bool {
        let argv = self.cmd("EMQ.REPROCESS", id, &[]);
        let Some(r) = self.send(c, ack, Op::Reprocess(id.to_string()), argv) else { return false };
        if r != Reply::Int(1) {
            self.fail_here(format!("REPROCESS {id} answered {r:?}"));
        }
        self.acked.other += 1;
        self.jobs.insert(id.to_string(), St::Ready);
        true
    }

    fn stalled(&mut self, c: &mut Conn, ack: &mut dyn FnMut(&mut Conn) -> bool) -> bool {
        let argv = self.cmd("EMQ.STALLED", "", &[]);
        let Some(r) = self.send(c, ack, Op::Stalled, argv) else { return false };
        let (requeued, failed) = (r.array()[0].strings(), r.array()[1].strings());
        for (ids, to) in [(requeued, St::Ready), (failed, St::Failed)] {
            for id in ids {
                if !matches!(self.jobs.get(&id), Some(St::Held { expiring: true, .. })) {
                    self.fail_here(format!(
                        "STALLED took {id}, which the model holds as {:?}",
                        self.jobs.get(&id)
                    ));
                }
                self.jobs.insert(id, to.clone());
            }
        }
        self.acked.other += 1;
        true
    }

    /// The model against the keyspace after a crash or a failover: the states every
    /// acknowledged call left, allowing what upkeep may have done since (promote a delayed
    /// job, take back an expiring lease) and what the pending call may have done. Rows the
    /// model never made are a failure here; what is missing is returned as `lost`.
    pub fn verify(&self, snap: &Snapshot) -> Verdict {
        let mut v = Verdict::default();
        let pending_claim = match &self.pending {
            Some(Op::Claim(t)) => Some(t.as_str()),
            _ => None,
        };
        for id in snap.rows.keys() {
            let pending_create = matches!(&self.pending, Some(Op::Create(p)) if p == id);
            if !self.jobs.contains_key(id) && !pending_create {
                self.fail_here(format!("row {id} in the keyspace that no acknowledged call made"));
            }
        }
        for (id, st) in &self.jobs {
            // The pending call on a held job may have reached the keyspace unacknowledged: an
            // EXTEND with a 1 ms lease leaves it active by its token but expiring, so it is not
            // counted among the leases `finish_held` must honour.
            let pending_on_it = matches!(&self.pending, Some(Op::Hold(p, _)) if p == id);
            let actual = snap.state_of(id);
            let tk = snap.field(id, "tk");
            let a = actual.as_deref();
            let ready = matches!(a, Some("wait" | "prio"));
            let by_pending_claim =
                a == Some("active") && pending_claim.is_some() && tk.as_deref() == pending_claim;
            let ok = match st {
                St::Ready => ready || by_pending_claim,
                St::Delayed => ready || a == Some("delayed") || by_pending_claim,
                St::Held { tok, expiring: false } => {
                    let held = a == Some("active") && tk.as_deref() == Some(tok.as_str());
                    v.leases_held += usize::from(held && !pending_on_it);
                    held
                }
                St::Held { tok, expiring: true } => {
                    (a == Some("active") && tk.as_deref() == Some(tok.as_str())) || ready || by_pending_claim
                }
                St::Completed => a == Some("completed"),
                St::Failed => a == Some("failed"),
            };
            let by_pending = match &self.pending {
                Some(Op::Hold(p, verb)) if p == id => match *verb {
                    "EMQ.COMPLETE" => a == Some("completed"),
                    "EMQ.FAIL" => ready || matches!(a, Some("delayed" | "failed")),
                    "EMQ.REQUEUE" => ready,
                    "EMQ.DELAY" => ready || a == Some("delayed"),
                    // EXTEND, with a 1 ms lease too: still held, or taken back since.
                    _ => a == Some("active") || ready,
                },
                Some(Op::Promote(p)) | Some(Op::Reprocess(p)) if p == id => ready,
                _ => false,
            };
            if !ok && !by_pending {
                v.lost.push(format!("{id}: the model says {st:?}, the keyspace {a:?} (tk {tk:?})"));
            }
        }
        v
    }

    /// Takes the keyspace as the truth for every job (what the pending call did, what was
    /// lost), so the worker can go on. A token the worker never sent is a failure.
    pub fn resync(&mut self, c: &mut Conn) {
        let now = server_ms(c);
        let (snap, scores) = view(c, &self.q);
        let deadlines = scores.get("active").cloned().unwrap_or_default();
        let mut ids: BTreeSet<String> = self.jobs.keys().cloned().collect();
        ids.extend(snap.rows.keys().cloned());
        for id in ids {
            let st = match snap.state_of(&id).as_deref() {
                None => {
                    self.jobs.remove(&id);
                    continue;
                }
                Some("wait" | "prio") => St::Ready,
                Some("delayed") => St::Delayed,
                Some("completed") => St::Completed,
                Some("failed") => St::Failed,
                Some("active") => {
                    let tok = snap.field(&id, "tk").unwrap_or_default();
                    if !self.tokens.contains(&tok) {
                        self.fail_here(format!("{id} is held by {tok:?}, a token this worker never sent"));
                    }
                    let live = deadlines.get(&id).is_some_and(|d| d - now > self.lease_ms as i64 / 2);
                    St::Held { tok, expiring: !live }
                }
                Some(other) => self.fail_here(format!("{id} in {other}")),
            };
            self.jobs.insert(id, st);
        }
        self.pending = None;
    }

    /// Finishes every job the worker holds under a live lease, in one pipeline: COMPLETE with
    /// its token (a tenth FAIL … FINAL). Each must answer as a holder's call does (1 or
    /// `failed`): the lease is honoured. Returns how many.
    pub fn finish_held(&mut self, c: &mut Conn) -> usize {
        let held = self.held();
        let cmds: Vec<Vec<Vec<u8>>> = held
            .iter()
            .map(|(id, tok)| {
                if self.rng.chance(10) {
                    self.cmd("EMQ.FAIL", id, &[tok.as_bytes(), b"drained", b"FINAL"])
                } else {
                    self.cmd("EMQ.COMPLETE", id, &[tok.as_bytes(), b"ok"])
                }
            })
            .collect();
        if cmds.is_empty() {
            return 0;
        }
        for ((id, tok), r) in held.iter().zip(c.pipeline(&cmds)) {
            let st = match r {
                Reply::Int(1) => St::Completed,
                Reply::Simple(ref s) if s == "failed" => St::Failed,
                other => self.fail_here(format!("{id} held by {tok} could not be finished: {other:?}")),
            };
            self.jobs.insert(id.clone(), st);
        }
        held.len()
    }

    /// Finishes every job: completes each held one (`finish_held`), promotes the delayed,
    /// reclaims the expiring, claims the ready, until none is left open.
    pub fn drain(&mut self, c: &mut Conn, limit: Duration) {
        let t0 = Instant::now();
        loop {
            self.finish_held(c);
            let open = self.ids_where(|s| !matches!(s, St::Completed | St::Failed));
            if open.is_empty() {
                return;
            }
            if t0.elapsed() > limit {
                self.fail_here(format!(
                    "jobs not finished after {limit:?}: {:?}",
                    &open[..open.len().min(20)]
                ));
            }
            for id in self.ids_where(|s| *s == St::Delayed) {
                let r = self.q.run(c, "EMQ.PROMOTE", &id, &[]);
                if r != Reply::Int(1) && !r.err().is_some_and(|e| e.starts_with("EMQSTATE")) {
                    self.fail_here(format!("PROMOTE {id} answered {r:?}"));
                }
                self.jobs.insert(id, St::Ready);
            }
            if self.jobs.values().any(|s| matches!(s, St::Held { expiring: true, .. }))
                && !self.stalled(c, &mut |_| true)
            {
                self.fail_here("the connection failed while draining".into());
            }
            let before = self.held().len();
            if !self.claim_all(c) {
                self.fail_here("the connection failed while draining".into());
            }
            if self.held().len() == before {
                sleep(Duration::from_millis(20));
            }
        }
    }

    fn claim_all(&mut self, c: &mut Conn) -> bool {
        let tok = self.token();
        let lease = self.lease_ms.to_string();
        let argv = self.cmd("EMQ.CLAIM", "", &[tok.as_bytes(), lease.as_bytes(), b"COUNT", b"1000"]);
        let Some(r) = exchange(c, &argv) else { return false };
        for j in r.array() {
            let id = j.array()[0].str();
            match self.jobs.get(&id) {
                Some(St::Ready | St::Delayed | St::Held { expiring: true, .. }) => {}
                other => self.fail_here(format!("CLAIM handed out {id}, which the model holds as {other:?}")),
            }
            self.jobs.insert(id, St::Held { tok: tok.clone(), expiring: false });
        }
        true
    }

    /// The end: every job completed or failed, and the keyspace says exactly what the model
    /// says. Returns (completed, failed).
    pub fn finished(&self, c: &mut Conn) -> (usize, usize) {
        let snap = check_rows(c, &self.q);
        let v = self.verify(&snap);
        assert!(v.lost.is_empty(), "{}: the keyspace disagrees with the model: {:?}", self.name, v.lost);
        assert_eq!(snap.rows.len(), self.jobs.len(), "{}: one row per job", self.name);
        let done = self.jobs.values().filter(|s| **s == St::Completed).count();
        let failed = self.jobs.values().filter(|s| **s == St::Failed).count();
        assert_eq!(done + failed, self.jobs.len(), "{}: every job finished", self.name);
        (done, failed)
    }

    /// Priority the job was created with.
    pub fn priority(&self, id: &str) -> u64 {
        self.prio.get(id).copied().unwrap_or(0)
    }
}
