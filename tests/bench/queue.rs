//! The EchoMQ contenders and their workloads: trafikey's `EMQ.*` verbs and the scripted twin
//! (`tests/bench/lua/`, run with EVALSHA) share one command shape, so every workload is
//! written once for both; plus the floor (the lifecycle's writes as plain commands) and the
//! plain SET reference.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::load::{self, Ctx, Measured, Pipe};
use crate::resp::{Conn, Reply};
use crate::server::Server;

pub const QUEUE: &str = "bench";
const JOB_NAME: &[u8] = b"bench";
const JOB_DATA: &[u8] = b"{}";
const RESULT: &[u8] = b"ok";
/// Long enough that no lease runs out during a run.
const LEASE_MS: &[u8] = b"600000";

const ALPHABET: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// The job id of snowflake n: `JOB` + 11-char zero-padded Base62.
pub fn jid(mut n: u64) -> [u8; 14] {
    let mut out = *b"JOB00000000000";
    for slot in out[3..].iter_mut().rev() {
        *slot = ALPHABET[(n % 62) as usize];
        n /= 62;
    }
    out
}

/// The snowflake of a job id made by `jid`.
pub fn jnum(id: &[u8]) -> Option<u64> {
    let p = id.get(3..14)?;
    p.iter().try_fold(0u64, |acc, &b| {
        let d = ALPHABET.iter().position(|&a| a == b)? as u64;
        acc.checked_mul(62)?.checked_add(d)
    })
}

/// The scripted twin's sources, built into the binary.
const LUA_COMMON: &str = include_str!("lua/common.lua");
const LUA_ENQUEUE: &str = include_str!("lua/enqueue.lua");
const LUA_CLAIM: &str = include_str!("lua/claim.lua");
const LUA_COMPLETE: &str = include_str!("lua/complete.lua");

/// The module configs the twin mirrors: (name in common.lua, module config).
const MIRRORED: [(&str, &str); 5] = [
    ("EVENTS_MAXLEN", "trafikey.events-maxlen"),
    ("KEEP_COMPLETED", "trafikey.keep-completed"),
    ("RETENTION_BATCH", "trafikey.retention-batch"),
    ("PROMOTE_BATCH", "trafikey.promote-batch"),
    ("MAX_PAYLOAD", "trafikey.max-payload"),
];

/// Which implementation serves the verbs.
#[derive(Clone)]
pub enum Engine {
    Native,
    Lua { enqueue: String, claim: String, complete: String },
}

#[derive(Clone, Copy)]
enum Verb {
    Enqueue,
    Claim,
    Complete,
}

impl Engine {
    /// Load the twin with the server's current module configs.
    pub fn load_lua(c: &mut Conn) -> Result<Engine, String> {
        let mut prelude = String::with_capacity(LUA_COMMON.len());
        for line in LUA_COMMON.lines() {
            let mut l = line.to_string();
            for (var, cfg) in MIRRORED {
                if line.starts_with(&format!("local {var} = ")) {
                    let v = config_get(c, cfg)?;
                    l = format!("local {var} = {v} -- {cfg}, as the server has it");
                }
            }
            prelude.push_str(&l);
            prelude.push('\n');
        }
        let mut load = |body: &str| -> Result<String, String> {
            let src = format!("{prelude}{body}");
            match c.call(&[b"SCRIPT", b"LOAD", src.as_bytes()]) {
                Reply::Bulk(b) => Ok(String::from_utf8_lossy(&b).into_owned()),
                other => Err(format!("SCRIPT LOAD: {other:?}")),
            }
        };
        Ok(Engine::Lua {
            enqueue: load(LUA_ENQUEUE)?,
            claim: load(LUA_CLAIM)?,
            complete: load(LUA_COMPLETE)?,
        })
    }

    fn head(&self, v: Verb) -> Vec<&[u8]> {
        match (self, v) {
            (Engine::Native, Verb::Enqueue) => vec![b"EMQ.ENQUEUE"],
            (Engine::Native, Verb::Claim) => vec![b"EMQ.CLAIM"],
            (Engine::Native, Verb::Complete) => vec![b"EMQ.COMPLETE"],
            (Engine::Lua { enqueue, .. }, Verb::Enqueue) => vec![b"EVALSHA", enqueue.as_bytes()],
            (Engine::Lua { claim, .. }, Verb::Claim) => vec![b"EVALSHA", claim.as_bytes()],
            (Engine::Lua { complete, .. }, Verb::Complete) => vec![b"EVALSHA", complete.as_bytes()],
        }
    }

    /// The top-level commands this engine's calls show in commandstats.
    pub fn commands(&self) -> &'static [&'static str] {
        match self {
            Engine::Native => &["emq.enqueue", "emq.claim", "emq.complete"],
            Engine::Lua { .. } => &["evalsha"],
        }
    }
}

pub fn config_get(c: &mut Conn, name: &str) -> Result<String, String> {
    let r = c.call(&[b"CONFIG", b"GET", name.as_bytes()]);
    let v = match &r {
        Reply::Array(a) if a.len() == 2 => a[1].str(),
        Reply::Map(m) if m.len() == 1 => m[0].1.str(),
        other => return Err(format!("CONFIG GET {name}: {other:?}")),
    };
    Ok(v)
}

pub fn config_set(c: &mut Conn, name: &str, value: &str) -> Result<(), String> {
    match c.call(&[b"CONFIG", b"SET", name.as_bytes(), value.as_bytes()]) {
        Reply::Simple(_) => Ok(()),
        other => Err(format!("CONFIG SET {name} {value}: {other:?}")),
    }
}

/// The keys of the bench queue, built once.
pub struct Keys {
    wait: Vec<u8>,
    prio: Vec<u8>,
    active: Vec<u8>,
    delayed: Vec<u8>,
    completed: Vec<u8>,
    meta: Vec<u8>,
    events: Vec<u8>,
    job_prefix: Vec<u8>,
}

impl Keys {
    pub fn new(q: &str) -> Keys {
        let k = |r: &str| format!("emq:{{{q}}}:{r}").into_bytes();
        Keys {
            wait: k("wait"),
            prio: k("prio"),
            active: k("active"),
            delayed: k("delayed"),
            completed: k("completed"),
            meta: k("meta"),
            events: k("events"),
            job_prefix: k("job:"),
        }
    }

    pub fn wait(&self) -> &[u8] {
        &self.wait
    }

    pub fn prio(&self) -> &[u8] {
        &self.prio
    }

    pub fn active(&self) -> &[u8] {
        &self.active
    }

    pub fn job(&self, id: &[u8]) -> Vec<u8> {
        let mut v = self.job_prefix.clone();
        v.extend_from_slice(id);
        v
    }
}

/// Builds the three verbs' commands for one engine and queue.
pub struct Cmds<'a> {
    pub engine: &'a Engine,
    pub keys: &'a Keys,
}

impl Cmds<'_> {
    pub fn enqueue(&self, p: &mut Pipe, id: &[u8]) {
        self.enqueue_at(p, id, None);
    }

    /// ENQUEUE, with `PRIORITY p` when given.
    pub fn enqueue_at(&self, p: &mut Pipe, id: &[u8], priority: Option<u64>) {
        let job = self.keys.job(id);
        let prio = priority.map(|v| v.to_string());
        let mut a = self.engine.head(Verb::Enqueue);
        a.extend_from_slice(&[
            b"4",
            &job,
            &self.keys.wait,
            &self.keys.prio,
            &self.keys.events,
            JOB_NAME,
            JOB_DATA,
        ]);
        if let Some(v) = &prio {
            a.extend_from_slice(&[b"PRIORITY", v.as_bytes()]);
        }
        p.cmd(&a);
    }

    pub fn claim(&self, p: &mut Pipe, token: &[u8], count: usize) {
        self.claim_block(p, token, count, None);
    }

    /// `CLAIM … [COUNT n] [BLOCK ms]` (trafikey only: the twin has no BLOCK).
    pub fn claim_block(&self, p: &mut Pipe, token: &[u8], count: usize, block_ms: Option<u64>) {
        let k = self.keys;
        let n = count.to_string();
        let ms = block_ms.map(|b| b.to_string());
        let mut a = self.engine.head(Verb::Claim);
        a.extend_from_slice(&[
            b"6", &k.wait, &k.prio, &k.active, &k.delayed, &k.meta, &k.events, token, LEASE_MS,
        ]);
        if count > 1 {
            a.extend_from_slice(&[b"COUNT", n.as_bytes()]);
        }
        if let Some(ms) = &ms {
            a.extend_from_slice(&[b"BLOCK", ms.as_bytes()]);
        }
        p.cmd(&a);
    }

    /// `EMQ.SCHEDULE 3 job delayed events when name data` (trafikey only).
    pub fn schedule(&self, p: &mut Pipe, id: &[u8], when: &[u8]) {
        let job = self.keys.job(id);
        let k = self.keys;
        p.cmd(&[b"EMQ.SCHEDULE", b"3", &job, &k.delayed, &k.events, when, JOB_NAME, JOB_DATA]);
    }

    pub fn complete(&self, p: &mut Pipe, id: &[u8], token: &[u8]) {
        let job = self.keys.job(id);
        let k = self.keys;
        let mut a = self.engine.head(Verb::Complete);
        a.extend_from_slice(&[b"4", &job, &k.active, &k.completed, &k.events, token, RESULT]);
        p.cmd(&a);
    }

    /// `TRA.COMPLETES 3 active completed events id token result …` of the jobs `held`, all
    /// claimed with `token` (trafikey only; at most 100 jobs).
    pub fn completes(&self, p: &mut Pipe, held: &[Vec<u8>], token: &[u8]) {
        let k = self.keys;
        let mut a: Vec<&[u8]> = Vec::with_capacity(5 + 3 * held.len());
        a.extend_from_slice(&[b"TRA.COMPLETES", b"3", &k.active, &k.completed, &k.events]);
        for id in held {
            a.extend_from_slice(&[id, token, RESULT]);
        }
        p.cmd(&a);
    }

    /// The finish of the jobs `held` (claimed with `token`): one COMPLETE each, or one
    /// TRA.COMPLETES of them all. How many replies it queued.
    pub fn finish(&self, p: &mut Pipe, held: &[Vec<u8>], token: &[u8], how: Finish) -> usize {
        match how {
            Finish::Each => {
                for id in held {
                    self.complete(p, id, token);
                }
                held.len()
            }
            Finish::Batch if held.is_empty() => 0,
            Finish::Batch => {
                self.completes(p, held, token);
                1
            }
        }
    }
}

/// How a worker finishes the jobs of its last claim: one `EMQ.COMPLETE` per job, or one
/// `TRA.COMPLETES` with all of them (the batch-finish lane).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Finish {
    Each,
    Batch,
}

/// Check the replies `Cmds::finish` queued for `jobs` jobs: every COMPLETE 1, or one
/// TRA.COMPLETES answering an array of `jobs` entries, each 1.
pub fn check_finish(replies: &[Reply], jobs: usize, how: Finish) -> Result<(), String> {
    match how {
        Finish::Each => {
            if replies.len() != jobs {
                return Err(format!("{} COMPLETE replies for {jobs} jobs", replies.len()));
            }
            replies.iter().try_for_each(|r| expect_one(r, "COMPLETE"))
        }
        Finish::Batch if jobs == 0 => match replies {
            [] => Ok(()),
            other => Err(format!("replies for a finish of no jobs: {other:?}")),
        },
        Finish::Batch => match replies {
            [Reply::Array(entries)] if entries.len() == jobs => {
                for (i, r) in entries.iter().enumerate() {
                    expect_one(r, &format!("TRA.COMPLETES entry {i}"))?;
                }
                Ok(())
            }
            other => Err(format!("TRA.COMPLETES of {jobs} jobs answered {other:?}")),
        },
    }
}

pub fn expect_one(r: &Reply, what: &str) -> Result<(), String> {
    match r {
        Reply::Int(1) => Ok(()),
        other => Err(format!("{what} answered {other:?}")),
    }
}

/// The ids of a CLAIM reply `[[id name data attempt] ...]`.
pub fn claimed(r: &Reply) -> Result<Vec<Vec<u8>>, String> {
    match r {
        Reply::Array(jobs) => jobs
            .iter()
            .map(|j| match j {
                Reply::Array(f) if f.len() == 4 => match &f[0] {
                    Reply::Bulk(id) => Ok(id.clone()),
                    other => Err(format!("CLAIM gave a job id {other:?}")),
                },
                other => Err(format!("CLAIM gave a job {other:?}")),
            })
            .collect(),
        other => Err(format!("CLAIM answered {other:?}")),
    }
}

pub fn token(cx: &Ctx, n: u64) -> Vec<u8> {
    format!("w{}-{n}", cx.index).into_bytes()
}

/// The shape of a run: connections, pipeline depth (1 = one call at a time, and CLAIM takes
/// one job), a time limit per phase.
#[derive(Clone, Copy)]
pub struct Shape {
    pub conns: usize,
    pub depth: usize,
    pub limit: Duration,
}

/// Enqueue jobs `0..n`: each connection its share, `depth` per write. Latency: the call's
/// round trip (with pipelining, the batch's), per job.
pub fn enqueue(srv: &Server, e: &Engine, n: u64, s: Shape) -> Result<Measured<()>, String> {
    let keys = Keys::new(QUEUE);
    let cmds = Cmds { engine: e, keys: &keys };
    load::phase(srv, s.conns, s.limit, |cx| {
        let mut p = Pipe::new();
        let mine: Vec<u64> = load::share(n, s.conns, cx.index).collect();
        for chunk in mine.chunks(s.depth) {
            cx.check_time()?;
            let t = Instant::now();
            for &j in chunk {
                cmds.enqueue(&mut p, &jid(j));
            }
            for r in p.run(cx.conn)? {
                expect_one(&r, "ENQUEUE")?;
            }
            cx.record(t, chunk.len());
        }
        Ok((mine.len() as u64, ()))
    })
}

/// Claim and complete until the queue is empty. One at a time: CLAIM, then COMPLETE. With
/// depth d: each write carries the COMPLETEs of the jobs the last CLAIM gave and the next
/// `CLAIM … COUNT d`. Latency per job: its CLAIM sent → its COMPLETE answered.
pub fn claim_complete(srv: &Server, e: &Engine, n: u64, s: Shape) -> Result<Measured<()>, String> {
    claim_complete_with(srv, e, n, s, Finish::Each)
}

/// `claim_complete`, the jobs of each claim finished as `how` says (the batch-finish lane:
/// one `TRA.COMPLETES` in place of the COMPLETEs, everything else the same).
pub fn claim_complete_with(
    srv: &Server,
    e: &Engine,
    n: u64,
    s: Shape,
    how: Finish,
) -> Result<Measured<()>, String> {
    let keys = Keys::new(QUEUE);
    let cmds = Cmds { engine: e, keys: &keys };
    load::phase(srv, s.conns, s.limit, |cx| {
        let mut p = Pipe::new();
        let mut done = 0u64;
        let mut held: Vec<Vec<u8>> = Vec::new();
        let mut tok = token(cx, 0);
        let mut sent = Instant::now();
        for round in 1..=n + 2 {
            cx.check_time()?;
            let next = token(cx, round);
            let finishing = cmds.finish(&mut p, &held, &tok, how);
            let mut t = Instant::now();
            if s.depth == 1 {
                // One call at a time: the COMPLETE (if any) is its own round trip.
                if !held.is_empty() {
                    check_finish(&p.run(cx.conn)?, held.len(), how)?;
                    cx.record(sent, held.len());
                    done += held.len() as u64;
                }
                t = Instant::now();
                cmds.claim(&mut p, &next, 1);
                let r = p.run(cx.conn)?;
                held = claimed(&r[0])?;
            } else {
                cmds.claim(&mut p, &next, s.depth);
                let r = p.run(cx.conn)?;
                let (fin, cl) = r.split_at(finishing);
                check_finish(fin, held.len(), how)?;
                if !held.is_empty() {
                    cx.record(sent, held.len());
                    done += held.len() as u64;
                }
                match cl {
                    [c] => held = claimed(c)?,
                    other => return Err(format!("{} replies where one CLAIM's was due", other.len())),
                }
            }
            sent = t;
            tok = next;
            if held.is_empty() {
                return Ok((done, ()));
            }
        }
        Err("claim+complete did not drain in its bounded rounds".into())
    })
}

/// Send-time of each job's ENQUEUE, ns since the phase's epoch (for end-to-end latency).
pub struct Sent(Vec<AtomicU64>);

impl Sent {
    pub fn new(n: u64) -> Sent {
        Sent((0..n).map(|_| AtomicU64::new(0)).collect())
    }
    pub fn mark(&self, cx: &Ctx, j: u64) {
        if let Some(a) = self.0.get(j as usize) {
            a.store(cx.epoch.elapsed().as_nanos() as u64, Ordering::Relaxed);
        }
    }
    /// Latency of job `id`, µs, from its ENQUEUE sent to now.
    pub fn since(&self, cx: &Ctx, id: &[u8]) -> u32 {
        let now = cx.epoch.elapsed().as_nanos() as u64;
        let t = jnum(id).and_then(|j| self.0.get(j as usize)).map_or(now, |a| a.load(Ordering::Relaxed));
        u32::try_from(now.saturating_sub(t) / 1000).unwrap_or(u32::MAX)
    }
}

/// The full lifecycle of jobs `0..n`. One at a time: ENQUEUE, CLAIM, COMPLETE, each its own
/// round trip. With depth d: each write carries d ENQUEUEs, the COMPLETEs of the jobs the last
/// CLAIM gave and `CLAIM … COUNT d`. Latency per job: its ENQUEUE sent → its COMPLETE answered.
pub fn lifecycle(srv: &Server, e: &Engine, n: u64, s: Shape) -> Result<Measured<()>, String> {
    lifecycle_with(srv, e, n, s, Finish::Each)
}

/// `lifecycle`, the jobs of each claim finished as `how` says (pipelined only: one call at a
/// time always sends one COMPLETE per job).
pub fn lifecycle_with(
    srv: &Server,
    e: &Engine,
    n: u64,
    s: Shape,
    how: Finish,
) -> Result<Measured<()>, String> {
    let keys = Keys::new(QUEUE);
    let cmds = Cmds { engine: e, keys: &keys };
    let sent = Sent::new(n);
    load::phase(srv, s.conns, s.limit, |cx| {
        let mut p = Pipe::new();
        let mine: Vec<u64> = load::share(n, s.conns, cx.index).collect();
        let mut held: Vec<Vec<u8>> = Vec::new();
        let mut tok = token(cx, 0);
        let mut owed = 0usize; // enqueued by this connection and not yet claimed by it
        let mut done = 0u64;
        let mut round = 0u64;
        let mut chunks = mine.chunks(s.depth);
        loop {
            cx.check_time()?;
            round += 1;
            if round > n + 2 * mine.len() as u64 + 4 {
                return Err("lifecycle did not finish in its bounded rounds".into());
            }
            let chunk = chunks.next();
            if chunk.is_none() && held.is_empty() && owed == 0 {
                return Ok((done, ()));
            }
            let next = token(cx, round);
            if s.depth == 1 {
                if let Some(ch) = chunk {
                    sent.mark(cx, ch[0]);
                    cmds.enqueue(&mut p, &jid(ch[0]));
                    expect_one(&p.run(cx.conn)?[0], "ENQUEUE")?;
                    owed += 1;
                }
                if owed > 0 {
                    cmds.claim(&mut p, &next, 1);
                    held = claimed(&p.run(cx.conn)?[0])?;
                    owed -= held.len().min(owed);
                }
                for id in &held {
                    cmds.complete(&mut p, id, &next);
                    expect_one(&p.run(cx.conn)?[0], "COMPLETE")?;
                    cx.lat.push(sent.since(cx, id));
                    done += 1;
                }
                held.clear();
            } else {
                let k = chunk.map_or(0, <[u64]>::len);
                for &j in chunk.unwrap_or(&[]) {
                    sent.mark(cx, j);
                    cmds.enqueue(&mut p, &jid(j));
                }
                let finishing = cmds.finish(&mut p, &held, &tok, how);
                owed += k;
                let want = owed.min(s.depth);
                if want > 0 {
                    cmds.claim(&mut p, &next, want);
                }
                let r = p.run(cx.conn)?;
                if r.len() != k + finishing + usize::from(want > 0) {
                    return Err(format!(
                        "{} replies for {} commands",
                        r.len(),
                        k + finishing + usize::from(want > 0)
                    ));
                }
                for x in &r[..k] {
                    expect_one(x, "ENQUEUE")?;
                }
                check_finish(&r[k..k + finishing], held.len(), how)?;
                for id in &held {
                    cx.lat.push(sent.since(cx, id));
                    done += 1;
                }
                held = if want > 0 { claimed(&r[k + finishing])? } else { Vec::new() };
                owed -= held.len().min(owed);
                tok = next;
            }
        }
    })
}

/// The jobs one connection holds: (job id, the token it claimed them with).
pub type Held = Vec<(Vec<u8>, Vec<u8>)>;

/// CLAIM alone, one at a time, until empty; each connection keeps what it holds (for
/// `complete_only`). Gives per-call server CPU for CLAIM.
pub fn claim_only(srv: &Server, e: &Engine, n: u64, s: Shape) -> Result<Measured<Held>, String> {
    let keys = Keys::new(QUEUE);
    let cmds = Cmds { engine: e, keys: &keys };
    load::phase(srv, s.conns, s.limit, |cx| {
        let mut p = Pipe::new();
        let mut mine = Vec::new();
        for round in 1..=n + 1 {
            cx.check_time()?;
            let tok = token(cx, round);
            let t = Instant::now();
            cmds.claim(&mut p, &tok, 1);
            let got = claimed(&p.run(cx.conn)?[0])?;
            if got.is_empty() {
                return Ok((mine.len() as u64, mine));
            }
            cx.record(t, 1);
            mine.extend(got.into_iter().map(|id| (id, tok.clone())));
        }
        Err("claim did not drain in its bounded rounds".into())
    })
}

/// COMPLETE alone, one at a time, of the jobs each connection holds.
pub fn complete_only(srv: &Server, e: &Engine, held: &[Held], s: Shape) -> Result<Measured<()>, String> {
    let keys = Keys::new(QUEUE);
    let cmds = Cmds { engine: e, keys: &keys };
    load::phase(srv, held.len(), s.limit, |cx| {
        let mut p = Pipe::new();
        let mine = &held[cx.index];
        for (id, tok) in mine {
            cx.check_time()?;
            let t = Instant::now();
            cmds.complete(&mut p, id, tok);
            expect_one(&p.run(cx.conn)?[0], "COMPLETE")?;
            cx.record(t, 1);
        }
        Ok((mine.len() as u64, ()))
    })
}

/// The writes the module replicates for one job's ENQUEUE, CLAIM and COMPLETE (events on
/// unless the cap is 0, the default retention), as plain commands: the floor's material.
struct FloorWrites {
    keys: Keys,
    cap: String,
    events: bool,
    keep: u64,
}

impl FloorWrites {
    fn new(keep: u64, events_maxlen: u64) -> FloorWrites {
        FloorWrites {
            keys: Keys::new("floor"),
            cap: events_maxlen.to_string(),
            events: events_maxlen > 0,
            keep: keep.max(1),
        }
    }

    fn event(&self, p: &mut Pipe, id: &[u8], name: &[u8], facts: &[&[u8]]) {
        if self.events {
            let mut a: Vec<&[u8]> = vec![
                b"XADD",
                &self.keys.events,
                b"MAXLEN",
                b"~",
                self.cap.as_bytes(),
                b"*",
                b"event",
                name,
                b"id",
                id,
            ];
            a.extend_from_slice(facts);
            p.cmd(&a);
        }
    }

    fn enqueue(&self, p: &mut Pipe, j: u64, now: &[u8]) {
        let id = jid(j);
        p.cmd(&[b"HSET", &self.keys.job(&id), b"st", b"wait", b"n", JOB_NAME, b"d", JOB_DATA, b"c", now]);
        p.cmd(&[b"LPUSH", &self.keys.wait, &id]);
        self.event(p, &id, b"added", &[b"name", JOB_NAME, b"prio", b"0"]);
    }

    fn claim(&self, p: &mut Pipe, j: u64, tok: &[u8], now: &[u8], deadline: &[u8]) {
        let id = jid(j);
        p.cmd(&[b"RPOP", &self.keys.wait]);
        p.cmd(&[b"ZADD", &self.keys.active, deadline, &id]);
        p.cmd(&[b"HSET", &self.keys.job(&id), b"st", b"active", b"tk", tok, b"as", b"1", b"ca", now]);
        self.event(p, &id, b"active", &[b"attempt", b"1"]);
    }

    /// With the default retention: a soft cap trimmed back to `keep` in one batch once it is
    /// over by its slack (the module's Keep::Soft), counted by `j` as if jobs finish in order.
    fn complete(&self, p: &mut Pipe, j: u64, now: &[u8]) {
        let id = jid(j);
        p.cmd(&[b"ZREM", &self.keys.active, &id]);
        p.cmd(&[b"ZADD", &self.keys.completed, now, &id]);
        p.cmd(&[b"HSET", &self.keys.job(&id), b"st", b"completed", b"r", RESULT, b"f", now, b"am", b"1"]);
        self.event(p, &id, b"completed", &[b"attempt", b"1"]);
        let (keep, slack) = (self.keep, (self.keep / 16).min(64));
        if j >= keep + slack && (j - keep) % (slack + 1) == slack {
            let olds: Vec<[u8; 14]> = (j - keep - slack..=j - keep).map(jid).collect();
            let rows: Vec<Vec<u8>> = olds.iter().map(|o| self.keys.job(o)).collect();
            let mut zrem: Vec<&[u8]> = vec![b"ZREM", &self.keys.completed];
            zrem.extend(olds.iter().map(|o| &o[..]));
            p.cmd(&zrem);
            let mut del: Vec<&[u8]> = vec![b"DEL"];
            del.extend(rows.iter().map(Vec::as_slice));
            p.cmd(&del);
        }
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

fn run_plain(p: &mut Pipe, conn: &mut Conn) -> Result<(), String> {
    match p.run(conn)?.iter().find_map(Reply::err) {
        Some(e) => Err(format!("floor: {e}")),
        None => Ok(()),
    }
}

/// The floor: the writes a lifecycle makes (what the module replicates for ENQUEUE, CLAIM
/// and COMPLETE with events on and the default retention), sent as plain commands, `depth`
/// jobs per write. No reads, no checks, no fence: the least work the same keyspace outcome
/// can cost. Latency: the batch's round trip, per job.
pub fn floor(srv: &Server, n: u64, keep: u64, events_maxlen: u64, s: Shape) -> Result<Measured<()>, String> {
    let w = FloorWrites::new(keep, events_maxlen);
    load::phase(srv, s.conns, s.limit, |cx| {
        let mut p = Pipe::new();
        let mine: Vec<u64> = load::share(n, s.conns, cx.index).collect();
        let tok = token(cx, 0);
        for chunk in mine.chunks(s.depth) {
            cx.check_time()?;
            let t = Instant::now();
            let now = now_ms();
            let (now_s, deadline_s) = (now.to_string(), (now + 600_000).to_string());
            for &j in chunk {
                w.enqueue(&mut p, j, now_s.as_bytes());
                w.claim(&mut p, j, &tok, now_s.as_bytes(), deadline_s.as_bytes());
                w.complete(&mut p, j, now_s.as_bytes());
            }
            run_plain(&mut p, cx.conn)?;
            cx.record(t, chunk.len());
        }
        Ok((mine.len() as u64, ()))
    })
}

/// The per-call floors: CLAIM's writes, then COMPLETE's, for one job at a time, each job's
/// writes sent together in one round trip (plain commands, not even MULTI): what the server
/// spends on the writes one verb call makes, with the per-request cost of one call. The
/// jobs' rows and wait list are written first, unmeasured.
pub fn floor_per_call(
    srv: &Server,
    n: u64,
    keep: u64,
    events_maxlen: u64,
    s: Shape,
) -> Result<(Measured<()>, Measured<()>), String> {
    let w = FloorWrites::new(keep, events_maxlen);
    load::phase(srv, s.conns, s.limit, |cx| {
        let mut p = Pipe::new();
        let now = now_ms().to_string();
        for chunk in load::share(n, s.conns, cx.index).collect::<Vec<_>>().chunks(32) {
            for &j in chunk {
                w.enqueue(&mut p, j, now.as_bytes());
            }
            run_plain(&mut p, cx.conn)?;
        }
        Ok((0, ()))
    })?;
    // `claim`: CLAIM's writes for each job; otherwise COMPLETE's.
    let one_at_a_time = |claim: bool| {
        load::phase(srv, s.conns, s.limit, |cx| {
            let mut p = Pipe::new();
            let mine = load::share(n, s.conns, cx.index);
            let count = mine.end - mine.start;
            let tok = token(cx, 0);
            for j in mine {
                cx.check_time()?;
                let t = Instant::now();
                let now = now_ms();
                let (now_s, deadline_s) = (now.to_string(), (now + 600_000).to_string());
                if claim {
                    w.claim(&mut p, j, &tok, now_s.as_bytes(), deadline_s.as_bytes());
                } else {
                    w.complete(&mut p, j, now_s.as_bytes());
                }
                run_plain(&mut p, cx.conn)?;
                cx.record(t, 1);
            }
            Ok((count, ()))
        })
    };
    Ok((one_at_a_time(true)?, one_at_a_time(false)?))
}

/// The per-request reference: `SET` of a new small key, one call at a time.
pub fn plain_set(srv: &Server, n: u64, s: Shape) -> Result<Measured<()>, String> {
    load::phase(srv, s.conns, s.limit, |cx| {
        let mut p = Pipe::new();
        let mine = load::share(n, s.conns, cx.index);
        let count = mine.end - mine.start;
        for j in mine {
            cx.check_time()?;
            let key = format!("set:{j}");
            let t = Instant::now();
            p.cmd(&[b"SET", key.as_bytes(), JOB_DATA]);
            match &p.run(cx.conn)?[0] {
                Reply::Simple(_) => {}
                other => return Err(format!("SET answered {other:?}")),
            }
            cx.record(t, 1);
        }
        Ok((count, ()))
    })
}

/// `used_memory` growth over `m` waiting jobs enqueued into an empty queue, bytes per job.
pub fn memory_per_job(srv: &Server, e: &Engine, m: u64, limit: Duration) -> Result<f64, String> {
    let keys = Keys::new(QUEUE);
    let cmds = Cmds { engine: e, keys: &keys };
    let mut c = srv.conn()?;
    let m0 = crate::server::used_memory(&mut c);
    let t0 = Instant::now();
    let mut p = Pipe::new();
    let mut j = 0;
    while j < m {
        if t0.elapsed() > limit {
            return Err("memory: ran past its time limit".into());
        }
        let end = (j + 1000).min(m);
        for k in j..end {
            cmds.enqueue(&mut p, &jid(k));
        }
        for r in p.run(&mut c)? {
            expect_one(&r, "ENQUEUE")?;
        }
        j = end;
    }
    let m1 = crate::server::used_memory(&mut c);
    Ok((m1 - m0) as f64 / m as f64)
}

/// After a workload: the queue's sets hold what they should (`waiting` jobs in wait, none
/// active, none left ready when `waiting` is 0).
pub fn check_sets(srv: &Server, waiting: u64) -> Result<(), String> {
    let keys = Keys::new(QUEUE);
    let mut c = srv.conn()?;
    let wait = c.call(&[b"LLEN", &keys.wait]);
    let active = c.call(&[b"ZCARD", &keys.active]);
    match (&wait, &active) {
        (Reply::Int(w), Reply::Int(0)) if *w as u64 == waiting => Ok(()),
        _ => Err(format!(
            "after the workload: wait {wait:?} (expected {waiting}), active {active:?} (expected 0)"
        )),
    }
}
