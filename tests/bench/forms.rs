//! The module 0.3.0 forms beside their rivals (BullMQ-on-trafikey runs from bench.rs): the
//! bulk add `TRA.ADD`, the finish-and-fetch lifecycle with one `TRA.COMPLETENEXT` per job (and
//! with one `TRA.COMPLETESNEXT` for all a connection holds), and claim+complete with
//! `CLAIM … ROW` beside it without. Each is a phase of `load::phase` on the bench queue, its
//! replies checked.

use crate::load::{self, Ctx, Measured, Pipe};
use crate::queue::{expect_one, jid, Shape, QUEUE};
use crate::resp::Reply;
use crate::server::Server;

/// The rows' workloads and modes.
pub use crate::report::{BULK, NEXT, NEXT_ADD, NEXT_ADD_DROP, NEXT_MANY, ROW_PAIR, WITHOUT_ROW, WITH_ROW};
/// TRA.ADD's batches: 32, and 256 capped at the verb's 250.
pub const BATCHES: [(usize, &str, &str); 2] = crate::report::BULK_LANES;

const NAME: &[u8] = b"bench";
const DATA: &[u8] = b"{}";
const RESULT: &[u8] = b"ok";
const LEASE_MS: &[u8] = b"600000";

struct K {
    wait: Vec<u8>,
    prio: Vec<u8>,
    active: Vec<u8>,
    delayed: Vec<u8>,
    completed: Vec<u8>,
    meta: Vec<u8>,
    events: Vec<u8>,
}

impl K {
    fn new() -> K {
        let k = |r: &str| format!("emq:{{{QUEUE}}}:{r}").into_bytes();
        K {
            wait: k("wait"),
            prio: k("prio"),
            active: k("active"),
            delayed: k("delayed"),
            completed: k("completed"),
            meta: k("meta"),
            events: k("events"),
        }
    }

    fn job(id: &[u8]) -> Vec<u8> {
        let mut v = format!("emq:{{{QUEUE}}}:job:").into_bytes();
        v.extend_from_slice(id);
        v
    }

    fn claim(&self, p: &mut Pipe, token: &[u8], count: usize, row: bool) {
        let n = count.to_string();
        let mut a: Vec<&[u8]> = vec![
            b"EMQ.CLAIM",
            b"6",
            &self.wait,
            &self.prio,
            &self.active,
            &self.delayed,
            &self.meta,
            &self.events,
            token,
            LEASE_MS,
            b"COUNT",
            n.as_bytes(),
        ];
        if row {
            a.push(b"ROW");
        }
        p.cmd(&a);
    }

    fn complete(&self, p: &mut Pipe, id: &[u8], token: &[u8]) {
        let job = K::job(id);
        p.cmd(&[b"EMQ.COMPLETE", b"4", &job, &self.active, &self.completed, &self.events, token, RESULT]);
    }

    fn enqueue(&self, p: &mut Pipe, id: &[u8]) {
        let job = K::job(id);
        p.cmd(&[b"EMQ.ENQUEUE", b"4", &job, &self.wait, &self.prio, &self.events, NAME, DATA]);
    }

    /// One TRA.ADD of the jobs numbered `jobs`, each with no options.
    fn add(&self, p: &mut Pipe, jobs: &[u64]) {
        let rows: Vec<Vec<u8>> = jobs.iter().map(|&j| K::job(&jid(j))).collect();
        let count = jobs.len().to_string();
        let mut a: Vec<&[u8]> = Vec::with_capacity(7 + 4 * jobs.len());
        a.extend_from_slice(&[
            b"TRA.ADD",
            b"4",
            &self.wait,
            &self.prio,
            &self.delayed,
            &self.events,
            count.as_bytes(),
        ]);
        a.extend(rows.iter().map(Vec::as_slice));
        for _ in jobs {
            a.extend_from_slice(&[NAME, DATA, b"0"]);
        }
        p.cmd(&a);
    }

    /// The queue keys both finish-and-fetch verbs declare after their rows, in their order.
    fn finish_keys(&self) -> [&[u8]; 7] {
        [&self.wait, &self.prio, &self.active, &self.delayed, &self.completed, &self.meta, &self.events]
    }

    /// One TRA.COMPLETESNEXT finishing every job of `ids` and fetching as many.
    fn completes_next(&self, p: &mut Pipe, ids: &[Vec<u8>], token: &[u8]) {
        let n = ids.len().to_string();
        let jobs: Vec<Vec<u8>> = ids.iter().map(|id| K::job(id)).collect();
        let mut a: Vec<&[u8]> = vec![b"TRA.COMPLETESNEXT", b"7"];
        a.extend(self.finish_keys());
        a.push(n.as_bytes());
        a.extend(jobs.iter().map(Vec::as_slice));
        for _ in ids {
            a.extend([token, RESULT]);
        }
        a.extend([token, LEASE_MS]);
        p.cmd(&a);
    }

    fn complete_next(&self, p: &mut Pipe, id: &[u8], token: &[u8], kept: Kept) {
        let job = K::job(id);
        let mut a: Vec<&[u8]> = vec![b"TRA.COMPLETENEXT", b"8", &job];
        a.extend(self.finish_keys());
        a.extend([token, RESULT, LEASE_MS]);
        if kept == Kept::None {
            a.extend([b"KEEP".as_slice(), b"0"]);
        }
        p.cmd(&a);
    }
}

/// The ids of a CLAIM reply, `[id name data attempt]` or with ROW `[id name data attempt row]`.
fn ids(r: &Reply, row: bool) -> Result<Vec<Vec<u8>>, String> {
    let want = if row { 5 } else { 4 };
    match r {
        Reply::Array(jobs) => jobs
            .iter()
            .map(|j| match j {
                Reply::Array(f) if f.len() == want => match &f[0] {
                    Reply::Bulk(id) => Ok(id.clone()),
                    other => Err(format!("CLAIM gave a job id {other:?}")),
                },
                other => Err(format!("CLAIM gave a job {other:?} (ROW {row})")),
            })
            .collect(),
        other => Err(format!("CLAIM answered {other:?}")),
    }
}

/// The commands each row's time inside is read from.
pub const ADD_NAMES: &[&str] = &["tra.add"];
pub const MANY_NAMES: &[&str] = &["emq.enqueue", "emq.claim", "tra.completesnext"];
pub const ROW_NAMES: &[&str] = &["emq.claim", "emq.complete"];

/// Jobs `0..n` added with `TRA.ADD`, `per_call` a call, one call at a time on each connection
/// (50 calls in flight, as ChasquiMQ's `add_bulk` tasks). Every job's entry must be 1.
pub fn bulk_add(srv: &Server, n: u64, per_call: usize, s: Shape) -> Result<Measured<()>, String> {
    let k = K::new();
    load::phase(srv, s.conns, s.limit, |cx| {
        let mut p = Pipe::new();
        let mine: Vec<u64> = load::share(n, s.conns, cx.index).collect();
        for chunk in mine.chunks(per_call) {
            cx.check_time()?;
            k.add(&mut p, chunk);
            let t0 = std::time::Instant::now();
            let r = p.run(cx.conn)?;
            cx.record(t0, chunk.len());
            match r.as_slice() {
                [Reply::Array(e)] if e.len() == chunk.len() => {
                    for x in e {
                        expect_one(x, "TRA.ADD entry")?;
                    }
                }
                other => return Err(format!("TRA.ADD of {} jobs answered {other:?}", chunk.len())),
            }
        }
        Ok((mine.len() as u64, ()))
    })
}

/// How the finish-and-fetch lifecycle's connections enqueue the `depth` jobs of a write.
#[derive(Clone, Copy)]
pub enum Producer {
    /// One `EMQ.ENQUEUE` a job, as trafikey's own p32 lifecycle.
    Enqueue,
    /// One `TRA.ADD` of them all, as ChasquiMQ's lifecycle producers call `add_bulk` of 32.
    Add,
}

/// What a finish keeps of the job it completes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Kept {
    /// The row in `completed`, the server's `trafikey.keep-completed` of them (1 000 here).
    Default,
    /// Nothing: `KEEP 0` deletes the row as the job completes, as ChasquiMQ deletes each
    /// entry it acks (BullMQ's `removeOnComplete: true`).
    None,
}

impl Producer {
    /// The commands a finish-and-fetch row's time inside is read from, with these producers.
    pub const fn names(self) -> &'static [&'static str] {
        match self {
            Producer::Enqueue => &["emq.enqueue", "emq.claim", "tra.completenext"],
            Producer::Add => &["tra.add", "emq.claim", "tra.completenext"],
        }
    }
}

/// The lifecycle with finish-and-fetch: each connection enqueues its share `depth` per write
/// (as `producer` says); in the same write it finishes every job it holds with one
/// `TRA.COMPLETENEXT` each, which fetches the next job (one call per job; `kept` says what it
/// keeps of the job), or with `many` one `TRA.COMPLETESNEXT` for all it holds; a connection holding nothing claims
/// `CLAIM … COUNT depth` once. A connection ends when it has enqueued its share, holds nothing
/// and its claim found nothing ready: every job enqueued before that claim is held by someone
/// who finishes it, and every later one is enqueued by a connection still running.
pub fn lifecycle_next(
    srv: &Server,
    n: u64,
    s: Shape,
    many: bool,
    producer: Producer,
    kept: Kept,
) -> Result<Measured<()>, String> {
    let k = K::new();
    let m = load::phase(srv, s.conns, s.limit, |cx: &mut Ctx| {
        let mut p = Pipe::new();
        let mine: Vec<u64> = load::share(n, s.conns, cx.index).collect();
        let mut chunks = mine.chunks(s.depth);
        let tok = format!("n{}", cx.index).into_bytes();
        let mut held: Vec<Vec<u8>> = Vec::new();
        let mut done = 0u64;
        loop {
            cx.check_time()?;
            let chunk = chunks.next();
            let jobs = chunk.unwrap_or(&[]);
            let e = match producer {
                Producer::Enqueue => {
                    for &j in jobs {
                        k.enqueue(&mut p, &jid(j));
                    }
                    jobs.len()
                }
                Producer::Add if jobs.is_empty() => 0,
                Producer::Add => {
                    k.add(&mut p, jobs);
                    1
                }
            };
            let claiming = held.is_empty();
            if claiming {
                k.claim(&mut p, &tok, s.depth, false);
            } else if many {
                k.completes_next(&mut p, &held, &tok);
            } else {
                for id in &held {
                    k.complete_next(&mut p, id, &tok, kept);
                }
            }
            let t0 = std::time::Instant::now();
            let r = p.run(cx.conn)?;
            let want = e + if claiming || many { 1 } else { held.len() };
            if r.len() != want {
                return Err(format!("{} replies for {want} commands", r.len()));
            }
            for x in &r[..e] {
                match (producer, x) {
                    (Producer::Enqueue, x) => expect_one(x, "ENQUEUE")?,
                    (Producer::Add, Reply::Array(a)) if a.len() == jobs.len() => {
                        for x in a {
                            expect_one(x, "TRA.ADD entry")?;
                        }
                    }
                    (Producer::Add, other) => {
                        return Err(format!("TRA.ADD of {} jobs answered {other:?}", jobs.len()))
                    }
                }
            }
            let mut next = Vec::new();
            if claiming {
                next = ids(&r[e], false)?;
                if next.is_empty() && chunk.is_none() {
                    return Ok((done, ()));
                }
            } else if many {
                match &r[e] {
                    Reply::Array(a) if a.len() == 2 => {
                        let codes = match &a[0] {
                            Reply::Array(c) => c,
                            other => return Err(format!("TRA.COMPLETESNEXT gave codes {other:?}")),
                        };
                        if codes.len() != held.len() {
                            return Err(format!("{} codes for {} jobs", codes.len(), held.len()));
                        }
                        for c in codes {
                            expect_one(c, "TRA.COMPLETESNEXT's finish")?;
                        }
                        next = ids(&a[1], false)?;
                    }
                    other => return Err(format!("TRA.COMPLETESNEXT answered {other:?}")),
                }
                cx.record(t0, held.len());
                done += held.len() as u64;
            } else {
                for x in &r[e..] {
                    match x {
                        Reply::Array(a) if a.len() == 2 => {
                            expect_one(&a[0], "TRA.COMPLETENEXT's finish")?;
                            next.extend(ids(&a[1], false)?);
                        }
                        other => return Err(format!("TRA.COMPLETENEXT answered {other:?}")),
                    }
                }
                cx.record(t0, held.len());
                done += held.len() as u64;
            }
            held = next;
        }
    })?;
    all_done(m, n)
}

/// claim+complete of n prefilled jobs, pipelined: each write the COMPLETEs of the last claim
/// and `CLAIM … COUNT depth`, with `ROW` or without.
pub fn claim_complete_row(srv: &Server, n: u64, s: Shape, row: bool) -> Result<Measured<()>, String> {
    let k = K::new();
    let m = load::phase(srv, s.conns, s.limit, |cx| {
        let mut p = Pipe::new();
        let tok = format!("r{}", cx.index).into_bytes();
        let mut held: Vec<Vec<u8>> = Vec::new();
        let mut done = 0u64;
        loop {
            cx.check_time()?;
            for id in &held {
                k.complete(&mut p, id, &tok);
            }
            k.claim(&mut p, &tok, s.depth, row);
            let t0 = std::time::Instant::now();
            let r = p.run(cx.conn)?;
            if r.len() != held.len() + 1 {
                return Err(format!("{} replies for {} commands", r.len(), held.len() + 1));
            }
            for x in &r[..held.len()] {
                expect_one(x, "COMPLETE")?;
            }
            if !held.is_empty() {
                cx.record(t0, held.len());
            }
            done += held.len() as u64;
            held = ids(&r[held.len()], row)?;
            if held.is_empty() {
                return Ok((done, ()));
            }
        }
    })?;
    all_done(m, n)
}

/// A phase's result, unless it finished other than n jobs.
fn all_done(m: Measured<()>, n: u64) -> Result<Measured<()>, String> {
    if m.jobs == n {
        Ok(m)
    } else {
        Err(format!("{} jobs finished of {n}", m.jobs))
    }
}
