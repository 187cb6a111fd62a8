//! Failover.
//!
//! * A replica attached mid-workload — with a diskless sync and with a disk-based one — ends
//!   with the primary's keyspace (`WAIT`, then `DEBUG DIGEST` on both), every row agreeing with
//!   its set on the replica too.
//! * With `WAIT 1 ms` after every call, nothing acknowledged is lost when the primary is killed
//!   (`kill -9`) and the replica promoted (`REPLICAOF NO ONE`): the randomized workload's model
//!   (`trafikey_support::reliability::Worker`) holds on the new primary, and every lease whose
//!   claim reached the replica is finished with its token there. The call in flight at the kill
//!   may have reached the replica unacknowledged; an EXTEND to 1 ms among them is replayed on
//!   purpose, and its job is not counted as a lease to honour.
//! * Sentinel: one primary, one replica, three sentinels (the same valkey-server binary with
//!   `--sentinel`, no module); workers that find the primary through a sentinel, claim with
//!   BLOCK and complete, and on any error find it again; producers that count a job as
//!   acknowledged only once `WAIT 1 1000` says the replica has it. The primary is killed mid
//!   workload: the failover time is reported (kill → a sentinel names the new primary → the
//!   first call that succeeds there), every acknowledged job ends completed or failed on the
//!   new primary, none is completed twice on one node, and re-runs (a job completed on the old
//!   primary whose completion never reached the replica runs again: at-least-once) are counted
//!   and reported.
//!
//! Seeded (the workload): `FAILOVER_SEED=<n>` replays a run.
// A test may panic: that is how it fails. The module's own rules are for src/.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

use std::collections::{BTreeMap, BTreeSet};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::{sleep, JoinHandle};
use std::time::{Duration, Instant};

use trafikey_support::reliability::*;
use trafikey_support::*;

/// Runs each worker on its own connection until `stop` or until a call is not acknowledged.
fn spawn(
    port: u16,
    workers: Vec<Worker>,
    stop: &Arc<AtomicBool>,
    wait_ms: Option<u64>,
) -> Vec<JoinHandle<Worker>> {
    workers
        .into_iter()
        .map(|mut w| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let Ok(mut c) = Conn::connect(port) else { return w };
                let ms = wait_ms.map(|m| m.to_string()).unwrap_or_default();
                let mut ack = |c: &mut Conn| match wait_ms {
                    None => true,
                    Some(_) => matches!(
                        exchange(c, &[b"WAIT".to_vec(), b"1".to_vec(), ms.as_bytes().to_vec()]),
                        Some(Reply::Int(n)) if n >= 1
                    ),
                };
                while !stop.load(Ordering::Relaxed) {
                    if !w.step(&mut c, &mut ack) {
                        break;
                    }
                }
                w
            })
        })
        .collect()
}

fn join(h: Vec<JoinHandle<Worker>>) -> Vec<Worker> {
    h.into_iter().map(|h| h.join().expect("a worker panicked")).collect()
}

fn attach_mid_workload(diskless: bool) {
    let seed = seed("FAILOVER_SEED");
    let mut rng = Rng(seed ^ u64::from(diskless));
    let sync = if diskless { "yes" } else { "no" };
    let primary = Server::start(Opts {
        server_args: args(&["--repl-diskless-sync", sync]),
        module_args: workload_args(),
        ..Opts::default()
    });
    let mut p = primary.conn();
    assert_eq!(p.call(&[b"EMQ.INSTALL", b"1", b"{emq}:version"]), Reply::Int(1));
    let replica = Server::start(Opts { module_args: workload_args(), ..Opts::default() });
    let workers: Vec<Worker> = (0..3).map(|n| Worker::new(&format!("attach{sync}"), n, rng.fork())).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let running = spawn(primary.port, workers, &stop, None);
    sleep(Duration::from_millis(300 + rng.below(400)));
    let mut r = replica.follow(&primary);
    sleep(Duration::from_millis(300 + rng.below(400)));
    stop.store(true, Ordering::Relaxed);
    let workers = join(running);
    assert_eq!(info_field(&mut p, "stats", "sync_full"), "1", "one full sync");
    let log = primary.log();
    let kind = if diskless {
        "Streamed RDB transfer with replica"
    } else {
        "Starting BGSAVE for SYNC with target: disk"
    };
    assert!(log.contains(kind), "a {} sync: {log}", if diskless { "diskless" } else { "disk-based" });
    // Once upkeep has nothing left to do (due jobs promoted, expiring leases taken back), the
    // replica holds exactly the primary's keyspace.
    wait_for(
        || {
            p.call(&[b"WAIT", b"1", b"2000"]) == Reply::Int(1) && {
                let d = digest(&mut p);
                d == digest(&mut r) && d == digest(&mut p)
            }
        },
        "the replica in sync",
    );
    let calls: u64 = workers
        .iter()
        .map(|w| w.acked.creates + w.acked.claims + w.acked.completes + w.acked.fails + w.acked.other)
        .sum();
    for w in &workers {
        check_rows(&mut r, &w.q);
        assert!(w.verify(&w.q.snapshot(&mut r)).lost.is_empty(), "the replica holds the model");
    }
    eprintln!(
        "attached a replica ({} sync) mid-workload: {calls} calls; digests equal",
        if diskless { "diskless" } else { "disk" }
    );
}

#[test]
fn a_replica_attached_mid_workload_with_a_diskless_sync_holds_the_primary_keyspace() {
    attach_mid_workload(true);
}

#[test]
fn a_replica_attached_mid_workload_with_a_disk_sync_holds_the_primary_keyspace() {
    attach_mid_workload(false);
}

#[test]
fn with_wait_nothing_acknowledged_is_lost_when_the_primary_dies() {
    let seed = seed("FAILOVER_SEED");
    let mut rng = Rng(seed ^ 0xfa11);
    let primary = Server::start(Opts { module_args: workload_args(), ..Opts::default() });
    let mut p = primary.conn();
    assert_eq!(p.call(&[b"EMQ.INSTALL", b"1", b"{emq}:version"]), Reply::Int(1));
    let replica = Server::start(Opts { module_args: workload_args(), ..Opts::default() });
    let mut r = replica.follow(&primary);
    drop(p);
    let workers: Vec<Worker> = (0..4).map(|n| Worker::new("promote", n, rng.fork())).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let running = spawn(primary.port, workers, &stop, Some(2000));
    sleep(Duration::from_millis(500 + rng.below(1000)));
    drop(primary);
    let mut workers = join(running);
    assert_eq!(r.call(&[b"REPLICAOF", b"NO", b"ONE"]), Reply::Simple("OK".into()));
    let mut held = 0;
    for w in &workers {
        let snap = check_rows(&mut r, &w.q);
        let v = w.verify(&snap);
        assert!(v.lost.is_empty(), "seed {seed}: acknowledged calls lost in the failover: {:#?}", v.lost);
        held += v.leases_held;
    }
    for w in &mut workers {
        w.resync(&mut r);
    }
    let honoured: usize = workers.iter_mut().map(|w| w.finish_held(&mut r)).sum();
    assert!(honoured >= held, "every lease whose claim reached the replica finished by its token");
    let (mut done, mut failed) = (0, 0);
    for w in &mut workers {
        w.drain(&mut r, Duration::from_secs(60));
        let (d, f) = w.finished(&mut r);
        done += d;
        failed += f;
    }
    let acked: u64 = workers
        .iter()
        .map(|w| w.acked.creates + w.acked.claims + w.acked.completes + w.acked.fails + w.acked.other)
        .sum();
    eprintln!(
        "primary killed: {acked} acknowledged (WAITed) calls, none lost; {held} leases finished by their tokens \
         on the new primary; the end: {done} completed, {failed} failed"
    );
}

/// The call in flight when the primary dies may reach the replica without its `WAIT`: an EXTEND
/// with a 1 ms lease then leaves its job active by its token but expiring. That job is not a
/// lease the new primary must honour, and `finish_held` leaves it to be taken back.
#[test]
fn an_unacknowledged_short_extend_that_reached_the_replica_is_not_a_lease_to_honour() {
    let seed = seed("FAILOVER_SEED");
    let primary = Server::start(Opts { module_args: workload_args(), ..Opts::default() });
    let mut p = primary.conn();
    assert_eq!(p.call(&[b"EMQ.INSTALL", b"1", b"{emq}:version"]), Reply::Int(1));
    let replica = Server::start(Opts { module_args: workload_args(), ..Opts::default() });
    let mut r = replica.follow(&primary);
    let mut w = Worker::new("shortextend", 0, Rng(seed));
    for _ in 0..2000 {
        if w.held().len() >= 2 {
            break;
        }
        assert!(w.step(&mut p, &mut |_| true), "the primary answers");
    }
    let before = w.held();
    assert!(before.len() >= 2, "the workload holds two jobs: {before:?}");
    let (id, tok) = before[0].clone();
    assert!(matches!(w.q.run(&mut p, "EMQ.EXTEND", &id, &[tok.as_bytes(), b"1"]), Reply::Int(d) if d > 0));
    w.pending = Some(Op::Hold(id.clone(), "EMQ.EXTEND"));
    assert_eq!(p.call(&[b"WAIT", b"1", b"2000"]), Reply::Int(1), "the replica has the EXTEND");
    drop(p);
    drop(primary);
    assert_eq!(r.call(&[b"REPLICAOF", b"NO", b"ONE"]), Reply::Simple("OK".into()));
    let snap = check_rows(&mut r, &w.q);
    let v = w.verify(&snap);
    assert!(v.lost.is_empty(), "seed {seed}: nothing acknowledged lost: {:#?}", v.lost);
    assert_eq!(v.leases_held, before.len() - 1, "the extended job is not counted");
    w.resync(&mut r);
    assert_eq!(w.finish_held(&mut r), v.leases_held, "every counted lease finished by its token");
}

// ---------------------------------------------------------------------------------------
// Sentinel.

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port")
}

/// A sentinel: the server binary with `--sentinel` on a config of its own, stopped by its pid.
struct Sentinel {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        let _ = Command::new("kill").arg("-9").arg(self.child.id().to_string()).status();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Sentinel {
    fn start(primary_port: u16) -> Sentinel {
        let port = free_port();
        let dir = std::env::temp_dir().join(format!("trafikey-sentinel-{}-{port}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("sentinel dir");
        let conf = dir.join("sentinel.conf");
        std::fs::write(
            &conf,
            format!(
                "port {port}\nbind 127.0.0.1\ndir {}\nsentinel resolve-hostnames no\n\
                 sentinel monitor m 127.0.0.1 {primary_port} 2\nsentinel down-after-milliseconds m 500\n\
                 sentinel failover-timeout m 2000\n",
                dir.display()
            ),
        )
        .expect("sentinel.conf");
        let log = std::fs::File::create(dir.join("sentinel.log")).expect("log");
        let child = Command::new(server_bin())
            .arg(&conf)
            .arg("--sentinel")
            .stdout(Stdio::from(log.try_clone().expect("log")))
            .stderr(Stdio::from(log))
            .spawn()
            .expect("spawn a sentinel");
        let s = Sentinel { child, port, dir };
        wait_for(
            || {
                Conn::connect(port)
                    .map(|mut c| c.call(&[b"PING"]) == Reply::Simple("PONG".into()))
                    .unwrap_or(false)
            },
            "a sentinel",
        );
        s
    }

    fn conn(&self) -> Option<Conn> {
        Conn::connect(self.port).ok()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("sentinel.log")).unwrap_or_default()
    }
}

/// The primary's port as sentinel `port` names it.
fn primary_of(port: u16) -> Option<u16> {
    let mut c = Conn::connect(port).ok()?;
    c.send(&[b"SENTINEL", b"get-master-addr-by-name", b"m"]).ok()?;
    match c.read().ok()? {
        Reply::Array(a) if a.len() == 2 => a[1].str().parse().ok(),
        _ => None,
    }
}

/// What the test's clients share: which sentinels to ask, and when the first call succeeded
/// on a node other than the first primary.
struct World {
    sentinels: Vec<u16>,
    first_primary: u16,
    epoch: Instant,
    /// ms since `epoch` of the first successful call on the new primary (0: none yet).
    first_success: AtomicU64,
}

impl World {
    /// Asks the sentinels in turn for the primary and connects to it.
    fn connect(&self, n: &mut usize) -> (Conn, u16) {
        loop {
            *n += 1;
            if let Some(port) = primary_of(self.sentinels[*n % self.sentinels.len()]) {
                if let Ok(c) = Conn::connect(port) {
                    return (c, port);
                }
            }
            sleep(Duration::from_millis(20));
        }
    }

    fn succeeded(&self, port: u16) {
        if port != self.first_primary {
            let ms = self.epoch.elapsed().as_millis().max(1) as u64;
            let _ = self.first_success.compare_exchange(0, ms, Ordering::Relaxed, Ordering::Relaxed);
        }
    }
}

/// One worker's record: each finish a COMPLETE answered (id, token, node), and how many of
/// its jobs it carried across the failover and finished there with their token.
#[derive(Default)]
struct Done {
    completed: Vec<(String, String, u16)>,
    carried: usize,
    refused: usize,
    /// Jobs in hand whose row the new primary does not have (their ENQUEUE never reached it).
    missing: Vec<String>,
}

fn sentinel_worker(world: Arc<World>, q: Q, w: usize, stop: Arc<AtomicBool>) -> Done {
    let mut done = Done::default();
    let mut n = w;
    let (mut c, mut port) = world.connect(&mut n);
    let mut pending: Option<(String, String, u16)> = None;
    let mut seq = 0;
    // On stop, the job in hand is finished first (its COMPLETE may be a retry).
    while !stop.load(Ordering::Relaxed) || pending.is_some() {
        if let Some((id, tok, claimed_on)) = pending.clone() {
            let cmd = q.cmd("EMQ.COMPLETE", &id, &keys_of("EMQ.COMPLETE"), &[tok.as_bytes(), b"ok"]);
            match exchange(&mut c, &cmd) {
                // 0: this token completed it already (a reply lost on the way).
                Some(Reply::Int(1 | 0)) => {
                    world.succeeded(port);
                    done.carried += usize::from(claimed_on != port);
                    done.completed.push((id, tok, port));
                    pending = None;
                }
                Some(Reply::Error(e)) if e.starts_with("EMQLEASE") => {
                    // Its claim never reached the new primary, or its lease ran out there.
                    world.succeeded(port);
                    done.refused += 1;
                    pending = None;
                }
                Some(Reply::Error(e)) if e.starts_with("EMQNOJOB") => {
                    // Created on the old primary and never replicated: it is not here.
                    world.succeeded(port);
                    done.missing.push(id);
                    pending = None;
                }
                Some(Reply::Error(e))
                    if e.starts_with("READONLY")
                        || e.starts_with("UNBLOCKED")
                        || e.starts_with("LOADING") =>
                {
                    (c, port) = world.connect(&mut n);
                }
                Some(other) => panic!("COMPLETE {id}: {other:?}"),
                None => (c, port) = world.connect(&mut n),
            }
            continue;
        }
        seq += 1;
        let tok = format!("s{w}-{seq}");
        let cmd = q.cmd("EMQ.CLAIM", "", &keys_of("EMQ.CLAIM"), &[tok.as_bytes(), b"2000", b"BLOCK", b"200"]);
        match exchange(&mut c, &cmd) {
            Some(Reply::Array(jobs)) => {
                world.succeeded(port);
                if let Some(j) = jobs.first() {
                    pending = Some((j.array()[0].str(), tok, port));
                    // The work itself: a job is in hand for a while, so the kill finds some.
                    sleep(Duration::from_millis(2));
                }
            }
            Some(Reply::Error(e))
                if e.starts_with("READONLY") || e.starts_with("UNBLOCKED") || e.starts_with("LOADING") =>
            {
                sleep(Duration::from_millis(20));
                (c, port) = world.connect(&mut n);
            }
            Some(other) => panic!("CLAIM: {other:?}"),
            None => (c, port) = world.connect(&mut n),
        }
    }
    done
}

/// What producers made: jobs acknowledged by WAIT, jobs written on the new primary (which has
/// no replica: not WAITed), and jobs whose ENQUEUE got no reply.
#[derive(Default)]
struct Made {
    acked: Vec<String>,
    after: Vec<String>,
    unknown: Vec<String>,
    unreplicated: Vec<String>,
}

fn producer(world: Arc<World>, q: Q, p: u64, stop: Arc<AtomicBool>, after_max: usize) -> Made {
    let mut made = Made::default();
    let mut n = p as usize;
    let (mut c, mut port) = world.connect(&mut n);
    let mut k = 0;
    while !stop.load(Ordering::Relaxed) && made.after.len() < after_max {
        k += 1;
        let id = jid(p * 1_000_000 + k);
        let cmd = q.cmd("EMQ.ENQUEUE", &id, &keys_of("EMQ.ENQUEUE"), &[b"job", b"{}"]);
        match exchange(&mut c, &cmd) {
            Some(Reply::Int(1)) if port == world.first_primary => {
                match exchange(&mut c, &[b"WAIT".to_vec(), b"1".to_vec(), b"1000".to_vec()]) {
                    Some(Reply::Int(r)) if r >= 1 => {
                        made.acked.push(id);
                        sleep(Duration::from_millis(2));
                    }
                    Some(_) => made.unreplicated.push(id),
                    None => {
                        made.unknown.push(id);
                        (c, port) = world.connect(&mut n);
                    }
                }
            }
            Some(Reply::Int(1)) => {
                world.succeeded(port);
                made.after.push(id);
                sleep(Duration::from_millis(5));
            }
            Some(Reply::Error(e)) if e.starts_with("READONLY") || e.starts_with("LOADING") => {
                made.unknown.push(id);
                sleep(Duration::from_millis(20));
                (c, port) = world.connect(&mut n);
            }
            Some(other) => panic!("ENQUEUE {id}: {other:?}"),
            None => {
                made.unknown.push(id);
                (c, port) = world.connect(&mut n);
            }
        }
    }
    made
}

#[test]
fn sentinel_fails_over_and_every_acknowledged_job_ends_once() {
    let args = args(&["keep-completed", "-1", "keep-failed", "-1"]);
    let primary = Server::start(Opts { module_args: args.clone(), ..Opts::default() });
    let mut p = primary.conn();
    assert_eq!(p.call(&[b"EMQ.INSTALL", b"1", b"{emq}:version"]), Reply::Int(1));
    let replica = Server::start(Opts { module_args: args, ..Opts::default() });
    replica.follow(&primary);
    let sentinels: Vec<Sentinel> = (0..3).map(|_| Sentinel::start(primary.port)).collect();
    // Every sentinel knows the replica and the two other sentinels.
    for s in &sentinels {
        wait_for(
            || {
                let Some(mut c) = s.conn() else { return false };
                let ok = c.call(&[b"SENTINEL", b"CKQUORUM", b"m"]);
                let replicas = c.call(&[b"SENTINEL", b"REPLICAS", b"m"]);
                matches!(ok, Reply::Simple(ref t) if t.contains("3 usable"))
                    && matches!(replicas, Reply::Array(ref a) if !a.is_empty())
            },
            "the sentinels know each other and the replica",
        );
    }
    let q = Q::new("sentinel");
    let world = Arc::new(World {
        sentinels: sentinels.iter().map(|s| s.port).collect(),
        first_primary: primary.port,
        epoch: Instant::now(),
        first_success: AtomicU64::new(0),
    });
    let stop_workers = Arc::new(AtomicBool::new(false));
    let stop_producers = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..3)
        .map(|w| {
            let (world, q, stop) = (world.clone(), q.clone(), stop_workers.clone());
            std::thread::spawn(move || sentinel_worker(world, q, w, stop))
        })
        .collect();
    let producers: Vec<_> = (1..=2)
        .map(|n| {
            let (world, q, stop) = (world.clone(), q.clone(), stop_producers.clone());
            std::thread::spawn(move || producer(world, q, n, stop, 50))
        })
        .collect();
    sleep(Duration::from_millis(1500));
    let old = primary.port;
    drop(p);
    let killed = world.epoch.elapsed();
    drop(primary);
    // The sentinels' verdict, then the first call that succeeds on the new primary.
    let t0 = Instant::now();
    let mut named = None;
    while t0.elapsed() < Duration::from_secs(30) {
        if let Some(port) = sentinels.iter().find_map(|s| primary_of(s.port).filter(|&p| p != old)) {
            named = Some((world.epoch.elapsed(), port));
            break;
        }
        sleep(Duration::from_millis(10));
    }
    let Some((named_at, new)) = named else {
        panic!("no failover within 30 s; sentinel log:\n{}", sentinels[0].log());
    };
    assert_eq!(new, replica.port, "the replica is the new primary");
    wait_for(|| world.first_success.load(Ordering::Relaxed) > 0, "a call succeeding on the new primary");
    let first = Duration::from_millis(world.first_success.load(Ordering::Relaxed));
    let made: Vec<Made> = producers.into_iter().map(|h| h.join().expect("a producer")).collect();
    stop_producers.store(true, Ordering::Relaxed);
    let acked: Vec<&String> = made.iter().flat_map(|m| &m.acked).collect();
    let after: Vec<&String> = made.iter().flat_map(|m| &m.after).collect();
    let unknown: Vec<&String> = made.iter().flat_map(|m| m.unknown.iter().chain(&m.unreplicated)).collect();
    // Everything acknowledged, and everything written on the new primary, ends finished there.
    let mut r = replica.conn();
    let must_end: BTreeSet<&String> = acked.iter().chain(after.iter()).copied().collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let snap = q.snapshot(&mut r);
        let open: Vec<&&String> = must_end
            .iter()
            .filter(|id| !matches!(snap.state_of(id).as_deref(), Some("completed" | "failed")))
            .collect();
        let busy = snap
            .rows
            .values()
            .filter(|row| !matches!(row.get("st").map(Vec::as_slice), Some(b"completed" | b"failed")))
            .count();
        if open.is_empty() && busy == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{} acknowledged jobs not finished after the failover, e.g. {:?} ({:?}); {busy} jobs open",
            open.len(),
            open.first(),
            open.first().map(|id| snap.state_of(id))
        );
        sleep(Duration::from_millis(100));
    }
    stop_workers.store(true, Ordering::Relaxed);
    let dones: Vec<Done> = workers.into_iter().map(|h| h.join().expect("a worker")).collect();
    let snap = check_rows(&mut r, &q);
    // Who completed what, and where.
    let mut by_id: BTreeMap<&str, Vec<(&str, u16)>> = BTreeMap::new();
    for d in &dones {
        for (id, tok, port) in &d.completed {
            by_id.entry(id).or_default().push((tok, *port));
        }
    }
    let mut reruns = 0;
    for d in &dones {
        for id in &d.missing {
            assert!(!must_end.contains(&id), "{id} acknowledged, yet the new primary has no such job");
        }
    }
    for id in &must_end {
        let st = snap.state_of(id);
        assert!(matches!(st.as_deref(), Some("completed" | "failed")), "{id} acknowledged and lost: {st:?}");
    }
    for (id, row) in &snap.rows {
        let st = snap.field(id, "st").unwrap_or_default();
        let finishes = by_id.get(id.as_str()).cloned().unwrap_or_default();
        for node in [old, new] {
            assert!(
                finishes.iter().filter(|(_, p)| *p == node).count() <= 1,
                "{id} completed twice on one node: {finishes:?}"
            );
        }
        if st == "completed" {
            let tk = String::from_utf8_lossy(&row["tk"]).into_owned();
            assert!(
                finishes.iter().any(|(t, _)| *t == tk),
                "{id} completed by {tk}, a COMPLETE no worker saw succeed: {finishes:?}"
            );
        }
        reruns += usize::from(finishes.len() > 1);
    }
    let failed = snap.sets["failed"].len();
    let carried: usize = dones.iter().map(|d| d.carried).sum();
    let refused: usize = dones.iter().map(|d| d.refused).sum();
    let missing: usize = dones.iter().map(|d| d.missing.len()).sum();
    eprintln!(
        "sentinel failover: killed at {killed:?}; a sentinel named the new primary {:?} later, the first call \
         succeeded there {:?} after the kill",
        named_at - killed,
        first.saturating_sub(killed)
    );
    eprintln!(
        "sentinel failover: {} jobs acknowledged (WAIT 1 1000), {} written on the new primary, {} unacknowledged; \
         all acknowledged ended: {} completed, {failed} failed; {reruns} re-runs; {carried} leases carried over and \
         finished by their tokens on the new primary, {refused} finishes refused (lease not on the new primary), \
         {missing} jobs in hand the new primary never got (unacknowledged ENQUEUEs)",
        acked.len(),
        after.len(),
        unknown.len(),
        snap.sets["completed"].len()
    );
    assert!(acked.len() > 20, "enough acknowledged before the kill to mean something");
}
