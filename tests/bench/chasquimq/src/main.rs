//! ChasquiMQ as a contender in trafikey's benchmark (tests/bench/chasquimq.rs runs this
//! binary). Runs the benchmark's workloads with ChasquiMQ's own `Producer` and `Consumer`
//! against the server the Rust tool started, and prints one JSON object per line on stdout,
//! each with its own timings and the server's CPU from `INFO cpu` around the measured part:
//!   {"workload":"enqueue","mode":"c50","jobs":N,"seconds":s,"cpu_us":u,"replica_cpu_us":r,"p50_us":a,"p99_us":b}
//!   {"workload":"memory","jobs":M,"bytes":d}
//!   {"error":"..."}
//! Progress goes to stderr.
//!
//! Usage: trafikey-bench-chasquimq --port P [--n N] [--mem M] [--conns 50] [--batch 32]
//!          [--deadline-s 120] [--only enqueue,process,lifecycle,memory,bulk] [--events on|off]
//!          [--replica-port P]
//!
//! Workloads: enqueue c50 = `conns` tasks, each calling `Producer::add` one job at a time
//! (so `conns` adds in flight on the producer's pool); enqueue p32 = the same tasks calling
//! `Producer::add_bulk` of `batch` jobs; process = a prefilled queue of N jobs drained by one
//! `Consumer` with ChasquiMQ's recommended worker settings (batch 256, concurrency 100, ack
//! batch 256), a no-op handler; lifecycle = that Consumer running while the `add_bulk` tasks
//! produce; bulk (only when asked for by name, the bulk add rows) = enqueue p32's tasks with
//! `add_bulk` of `batch`, reported as workload "bulk add", mode "add_bulk <batch>". A phase ends when every job has been handled and its stream entry acked and
//! deleted (XLEN 0). With --replica-port the replica's CPU is read around the same window,
//! after the replica has caught up with the primary's replication offset.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chasquimq::{Bytes, Consumer, ConsumerConfig, Job, Producer, ProducerConfig};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

const QUEUE: &str = "bench";

/// The job's data: when its add was sent, µs on the driver's clock (for the lifecycle's
/// latency), a few bytes as the other contenders' `{}`.
#[derive(Serialize, Deserialize, Clone)]
struct Data {
    t: u64,
}

struct Opts {
    port: u16,
    n: u64,
    mem: u64,
    conns: usize,
    batch: usize,
    deadline: Duration,
    only: Vec<String>,
    events: bool,
    replica: Option<u16>,
}

fn parse() -> Result<Opts, String> {
    let mut o = Opts {
        port: 0,
        n: 10_000,
        mem: 100_000,
        conns: 50,
        batch: 32,
        deadline: Duration::from_secs(120),
        only: vec![],
        events: true,
        replica: None,
    };
    let mut a = std::env::args().skip(1);
    while let Some(k) = a.next() {
        let v = a.next().ok_or(format!("{k} needs a value"))?;
        let num = || v.parse::<u64>().map_err(|_| format!("{k}: not a number: {v}"));
        match k.as_str() {
            "--port" => o.port = num()? as u16,
            "--n" => o.n = num()?,
            "--mem" => o.mem = num()?,
            "--conns" => o.conns = num()?.max(1) as usize,
            "--batch" => o.batch = num()?.max(1) as usize,
            "--deadline-s" => o.deadline = Duration::from_secs(num()?.max(1)),
            "--only" => o.only = v.split(',').map(String::from).collect(),
            "--events" => o.events = v != "off",
            "--replica-port" => o.replica = Some(num()? as u16),
            _ => return Err(format!("unknown argument {k}")),
        }
    }
    if o.port == 0 {
        return Err("--port is required".into());
    }
    Ok(o)
}

/// A control connection: plain RESP over a socket, for INFO and FLUSHALL only.
struct Ctl {
    r: BufReader<TcpStream>,
    w: TcpStream,
}

#[derive(Debug)]
#[allow(dead_code)] // Shown in errors ({:?}) only.
enum R {
    Simple(String),
    Err(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Vec<R>),
}

impl Ctl {
    fn connect(port: u16) -> Result<Ctl, String> {
        let w = TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("connect {port}: {e}"))?;
        let _ = w.set_nodelay(true);
        let r = BufReader::new(w.try_clone().map_err(|e| e.to_string())?);
        Ok(Ctl { r, w })
    }

    fn call(&mut self, args: &[&str]) -> Result<R, String> {
        let mut b = format!("*{}\r\n", args.len());
        for x in args {
            b.push_str(&format!("${}\r\n{x}\r\n", x.len()));
        }
        self.w.write_all(b.as_bytes()).map_err(|e| e.to_string())?;
        self.read()
    }

    fn read(&mut self) -> Result<R, String> {
        let mut line = String::new();
        self.r.read_line(&mut line).map_err(|e| e.to_string())?;
        let line = line.trim_end_matches(['\r', '\n']);
        let (kind, rest) = line.split_at(line.len().min(1));
        let int = || rest.parse::<i64>().map_err(|_| format!("bad reply line {line:?}"));
        Ok(match kind {
            "+" => R::Simple(rest.into()),
            "-" => R::Err(rest.into()),
            ":" => R::Int(int()?),
            "$" => {
                let n = int()?;
                if n < 0 {
                    R::Bulk(None)
                } else {
                    let mut v = vec![0; n as usize + 2];
                    self.r.read_exact(&mut v).map_err(|e| e.to_string())?;
                    v.truncate(n as usize);
                    R::Bulk(Some(v))
                }
            }
            "*" => {
                let n = int()?;
                let mut v = Vec::new();
                for _ in 0..n.max(0) {
                    v.push(self.read()?);
                }
                R::Array(v)
            }
            _ => return Err(format!("bad reply line {line:?}")),
        })
    }

    fn info(&mut self, section: &str) -> String {
        match self.call(&["INFO", section]) {
            Ok(R::Bulk(Some(b))) => String::from_utf8_lossy(&b).into_owned(),
            _ => String::new(),
        }
    }

    fn field(&mut self, section: &str, f: &str) -> Option<f64> {
        let text = self.info(section);
        text.lines().find_map(|l| l.strip_prefix(&format!("{f}:"))).and_then(|v| v.trim().parse().ok())
    }

    /// Server CPU so far, user + sys, µs.
    fn cpu_us(&mut self) -> f64 {
        let text = self.info("cpu");
        let get = |f: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("{f}:")))
                .and_then(|v| v.trim().parse::<f64>().ok())
                .unwrap_or(f64::NAN)
        };
        (get("used_cpu_sys") + get("used_cpu_user")) * 1e6
    }

    fn int(&mut self, args: &[&str]) -> Result<i64, String> {
        match self.call(args)? {
            R::Int(i) => Ok(i),
            other => Err(format!("{args:?}: {other:?}")),
        }
    }
}

/// The server's CPU (and the replica's) at one moment.
struct Cpu {
    primary: f64,
    replica: Option<f64>,
}

struct Ctx {
    o: Opts,
    ctl: Ctl,
    replica: Option<Ctl>,
    url: String,
    epoch: Instant,
}

impl Ctx {
    fn fresh(&mut self) -> Result<(), String> {
        match self.ctl.call(&["FLUSHALL", "SYNC"])? {
            R::Err(e) => Err(format!("FLUSHALL: {e}")),
            _ => self.synced(),
        }
    }

    /// Wait until the replica (if any) has applied everything the primary has sent.
    fn synced(&mut self) -> Result<(), String> {
        let Some(rep) = self.replica.as_mut() else { return Ok(()) };
        let t0 = Instant::now();
        loop {
            let p = self.ctl.field("replication", "master_repl_offset").unwrap_or(0.0);
            let r = rep.field("replication", "master_repl_offset").unwrap_or(-1.0);
            if r >= p {
                return Ok(());
            }
            if t0.elapsed() > Duration::from_secs(60) {
                return Err(format!("the replica did not catch up (offset {r} of {p})"));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn cpu(&mut self) -> Cpu {
        let primary = self.ctl.cpu_us();
        let replica = self.replica.as_mut().map(Ctl::cpu_us);
        Cpu { primary, replica }
    }

    /// The end of a measured part: the replica caught up, then both CPUs.
    fn cpu_end(&mut self) -> Result<Cpu, String> {
        self.synced()?;
        Ok(self.cpu())
    }

    fn stream_len(&mut self) -> Result<i64, String> {
        self.ctl.int(&["XLEN", &format!("{{chasqui:{QUEUE}}}:stream")])
    }

    async fn producer(&self) -> Result<Producer<Data>, String> {
        Producer::<Data>::connect(&self.url, ProducerConfig { queue_name: QUEUE.into(), ..Default::default() })
            .await
            .map_err(|e| format!("Producer::connect: {e}"))
    }

    /// ChasquiMQ's recommended worker settings (its `worker-concurrent` benchmark): batch 256,
    /// concurrency 100, ack batch 256; everything else at its defaults but the events switch.
    fn consumer_config(&self) -> ConsumerConfig {
        ConsumerConfig {
            queue_name: QUEUE.into(),
            batch: 256,
            concurrency: 100,
            ack_batch: 256,
            events_enabled: self.o.events,
            ..Default::default()
        }
    }
}

fn percentile(sorted: &[u32], p: f64) -> u32 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn figure(workload: &str, mode: &str, jobs: u64, secs: f64, c0: &Cpu, c1: &Cpu, lat: Option<Vec<u32>>) -> Value {
    let (p50, p99) = match lat {
        Some(mut l) if !l.is_empty() => {
            l.sort_unstable();
            (json!(percentile(&l, 50.0)), json!(percentile(&l, 99.0)))
        }
        _ => (Value::Null, Value::Null),
    };
    let replica = match (c0.replica, c1.replica) {
        (Some(a), Some(b)) => json!(b - a),
        _ => Value::Null,
    };
    json!({
        "workload": workload, "mode": mode, "jobs": jobs, "seconds": secs,
        "cpu_us": c1.primary - c0.primary, "replica_cpu_us": replica, "p50_us": p50, "p99_us": p99,
    })
}

fn share(n: u64, k: usize, i: usize) -> u64 {
    let k = k as u64;
    n / k + u64::from((i as u64) < n % k)
}

/// `conns` tasks, each adding its share one job at a time (`bulk` 0) or `bulk` at a time.
/// Latency per job: its call's round trip.
async fn produce(cx: &Ctx, p: &Arc<Producer<Data>>, n: u64, bulk: usize) -> Result<Vec<u32>, String> {
    let epoch = cx.epoch;
    let mut tasks = Vec::new();
    for i in 0..cx.o.conns {
        let p = p.clone();
        let mut left = share(n, cx.o.conns, i);
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::with_capacity(left as usize);
            while left > 0 {
                let t0 = Instant::now();
                let t = epoch.elapsed().as_micros() as u64;
                let m = if bulk == 0 {
                    p.add(Data { t }).await.map_err(|e| format!("add: {e}"))?;
                    1
                } else {
                    let m = (bulk as u64).min(left);
                    p.add_bulk((0..m).map(|_| Data { t }).collect()).await.map_err(|e| format!("add_bulk: {e}"))?;
                    m
                };
                let us = t0.elapsed().as_micros() as u32;
                lat.extend(std::iter::repeat_n(us, m as usize));
                left -= m;
            }
            Ok::<_, String>(lat)
        }));
    }
    let mut lat = Vec::new();
    for t in tasks {
        lat.extend(t.await.map_err(|e| format!("a producer task: {e}"))??);
    }
    Ok(lat)
}

async fn enqueue(cx: &mut Ctx, mode: &str) -> Result<Value, String> {
    cx.fresh()?;
    let p = Arc::new(cx.producer().await?);
    let bulk = if mode == "c50" { 0 } else { cx.o.batch };
    let n = cx.o.n;
    let c0 = cx.cpu();
    let t0 = Instant::now();
    let lat = tokio::time::timeout(cx.o.deadline, produce(cx, &p, n, bulk))
        .await
        .map_err(|_| format!("enqueue {mode}: ran past its time limit"))??;
    let secs = t0.elapsed().as_secs_f64();
    let c1 = cx.cpu_end()?;
    let _ = p.shutdown().await;
    let len = cx.stream_len()?;
    if len != n as i64 {
        return Err(format!("enqueue {mode}: the stream holds {len} entries, expected {n}"));
    }
    if mode == "bulk" {
        let m = format!("add_bulk {}", cx.o.batch);
        return Ok(figure("bulk add", &m, n, secs, &c0, &c1, Some(lat)));
    }
    Ok(figure("enqueue", mode, n, secs, &c0, &c1, Some(lat)))
}

/// A running Consumer: the jobs its handler has run, their latencies (add sent → handler).
struct Running {
    done: Arc<AtomicU64>,
    lat: Arc<Mutex<Vec<u32>>>,
    stop: CancellationToken,
    handle: tokio::task::JoinHandle<Result<(), String>>,
}

fn start_consumer(cx: &Ctx) -> Running {
    let done = Arc::new(AtomicU64::new(0));
    let lat = Arc::new(Mutex::new(Vec::with_capacity(cx.o.n as usize)));
    let stop = CancellationToken::new();
    let consumer = Consumer::<Data>::new(cx.url.clone(), cx.consumer_config());
    let (d, l, epoch) = (done.clone(), lat.clone(), cx.epoch);
    let handler = move |job: Job<Data>| {
        let (d, l) = (d.clone(), l.clone());
        async move {
            let now = epoch.elapsed().as_micros() as u64;
            if let Ok(mut v) = l.lock() {
                v.push(now.saturating_sub(job.payload.t) as u32);
            }
            d.fetch_add(1, Ordering::Relaxed);
            Ok(Bytes::new())
        }
    };
    let s = stop.clone();
    let handle = tokio::spawn(async move { consumer.run(handler, s).await.map_err(|e| format!("Consumer::run: {e}")) });
    Running { done, lat, stop, handle }
}

impl Running {
    /// Until `n` jobs have been handled and every entry acked and deleted.
    async fn finish(&self, cx: &mut Ctx, n: u64, what: &str) -> Result<(), String> {
        let t0 = Instant::now();
        loop {
            if self.handle.is_finished() {
                return Err(format!("{what}: the consumer stopped early"));
            }
            if self.done.load(Ordering::Relaxed) >= n && cx.stream_len()? == 0 {
                return Ok(());
            }
            if t0.elapsed() > cx.o.deadline {
                return Err(format!(
                    "{what}: ran past its time limit ({} of {n} handled)",
                    self.done.load(Ordering::Relaxed)
                ));
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    async fn stop(self) -> Result<Vec<u32>, String> {
        self.stop.cancel();
        match tokio::time::timeout(Duration::from_secs(40), self.handle).await {
            Ok(Ok(r)) => r?,
            Ok(Err(e)) => return Err(format!("the consumer task: {e}")),
            Err(_) => return Err("the consumer did not stop".into()),
        }
        Ok(std::mem::take(&mut *self.lat.lock().map_err(|_| "poisoned")?))
    }
}

/// Wait until the consumer's reader is waiting in XREADGROUP … BLOCK (the queue is empty).
async fn waiting(cx: &mut Ctx) -> Result<(), String> {
    let t0 = Instant::now();
    while cx.ctl.field("clients", "blocked_clients").unwrap_or(0.0) < 1.0 {
        if t0.elapsed() > Duration::from_secs(20) {
            return Err("the consumer did not start waiting".into());
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    Ok(())
}

async fn process(cx: &mut Ctx) -> Result<Value, String> {
    cx.fresh()?;
    let n = cx.o.n;
    let p = cx.producer().await?;
    let mut left = n;
    while left > 0 {
        let m = left.min(1000);
        p.add_bulk((0..m).map(|_| Data { t: 0 }).collect()).await.map_err(|e| format!("prefill: {e}"))?;
        left -= m;
    }
    let _ = p.shutdown().await;
    cx.synced()?;
    // The consumer's start (its connections, XGROUP CREATE) is inside the measured part: it
    // cannot wait on a full queue without taking from it.
    let c0 = cx.cpu();
    let t0 = Instant::now();
    let run = start_consumer(cx);
    let r = run.finish(cx, n, "process").await;
    let secs = t0.elapsed().as_secs_f64();
    let c1 = cx.cpu_end()?;
    let stopped = run.stop().await;
    r?;
    stopped?;
    Ok(figure("claim+complete", "p32", n, secs, &c0, &c1, None))
}

async fn lifecycle(cx: &mut Ctx) -> Result<Value, String> {
    cx.fresh()?;
    let n = cx.o.n;
    let run = start_consumer(cx);
    waiting(cx).await?;
    let p = Arc::new(cx.producer().await?);
    cx.synced()?;
    let c0 = cx.cpu();
    let t0 = Instant::now();
    let produced = tokio::time::timeout(cx.o.deadline, produce(cx, &p, n, cx.o.batch)).await;
    let r = match produced {
        Err(_) => Err("lifecycle producers: ran past their time limit".to_string()),
        Ok(Err(e)) => Err(e),
        Ok(Ok(_)) => run.finish(cx, n, "lifecycle").await,
    };
    let secs = t0.elapsed().as_secs_f64();
    let c1 = cx.cpu_end()?;
    let _ = p.shutdown().await;
    let lat = run.stop().await;
    r?;
    Ok(figure("lifecycle", "p32", n, secs, &c0, &c1, Some(lat?)))
}

async fn memory(cx: &mut Ctx) -> Result<Value, String> {
    cx.fresh()?;
    let p = cx.producer().await?;
    let m0 = cx.ctl.field("memory", "used_memory").unwrap_or(0.0);
    let mut left = cx.o.mem;
    while left > 0 {
        let m = left.min(1000);
        p.add_bulk((0..m).map(|_| Data { t: 0 }).collect()).await.map_err(|e| format!("memory: {e}"))?;
        left -= m;
    }
    let m1 = cx.ctl.field("memory", "used_memory").unwrap_or(0.0);
    let _ = p.shutdown().await;
    Ok(json!({ "workload": "memory", "jobs": cx.o.mem, "bytes": m1 - m0 }))
}

#[tokio::main]
async fn main() {
    let o = match parse() {
        Ok(o) => o,
        Err(e) => {
            println!("{}", json!({ "error": e }));
            std::process::exit(2);
        }
    };
    let ctl = match Ctl::connect(o.port) {
        Ok(c) => c,
        Err(e) => {
            println!("{}", json!({ "error": e }));
            std::process::exit(1);
        }
    };
    let replica = match o.replica.map(Ctl::connect).transpose() {
        Ok(r) => r,
        Err(e) => {
            println!("{}", json!({ "error": e }));
            std::process::exit(1);
        }
    };
    let url = format!("redis://127.0.0.1:{}", o.port);
    let wanted = |w: &str| o.only.is_empty() || o.only.iter().any(|x| x == w);
    let mut steps: Vec<&str> = ["enqueue", "process", "lifecycle", "memory"].into_iter().filter(|w| wanted(w)).collect();
    // The bulk add (add_bulk of --batch, 50 tasks) runs only when asked for by name.
    if o.only.iter().any(|x| x == "bulk") {
        steps.retain(|w| o.only.iter().any(|x| x == w));
        steps.push("bulk");
    }
    let mut cx = Ctx { o, ctl, replica, url, epoch: Instant::now() };
    let mut failed = false;
    for step in steps {
        let results = match step {
            "enqueue" => vec![enqueue(&mut cx, "c50").await, enqueue(&mut cx, "p32").await],
            "process" => vec![process(&mut cx).await],
            "bulk" => vec![enqueue(&mut cx, "bulk").await],
            "lifecycle" => vec![lifecycle(&mut cx).await],
            _ => vec![memory(&mut cx).await],
        };
        for r in results {
            match r {
                Ok(v) => {
                    eprintln!("chasquimq: {} {} done", v["workload"].as_str().unwrap_or(""), v["mode"].as_str().unwrap_or(""));
                    println!("{v}");
                }
                Err(e) => {
                    failed = true;
                    println!("{}", json!({ "error": e }));
                }
            }
        }
    }
    let _ = cx.fresh();
    std::process::exit(i32::from(failed));
}
