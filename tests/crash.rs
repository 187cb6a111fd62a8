//! Crash and restart. A randomized workload over the job verbs (ENQUEUE, SCHEDULE, CLAIM with
//! COUNT, EXTEND, COMPLETE, FAIL with ATTEMPTS/BACKOFF, REQUEUE, DELAY, PROMOTE, REPROCESS,
//! STALLED) runs from several connections at once, one thread and one queue each, with an
//! exact model of every acknowledged call (`trafikey_support::reliability::Worker`); the
//! server dies mid-workload and comes back on the same data dir:
//!
//! * AOF with `appendfsync always`, `kill -9`: every acknowledged call is there after the
//!   restart (ENQUEUE, COMPLETE, FAIL and every other transition), and every lease a worker
//!   held (a CLAIM it got a reply for and did not finish; leases are ten minutes, so none
//!   expires) is still honoured by its token: COMPLETE with it answers 1.
//! * AOF with `appendfsync everysec`, `kill -9`: acknowledged writes may be lost (how many is
//!   reported); none is half-applied: the invariant holds and every row's fields agree with
//!   its set.
//! * RDB: `SHUTDOWN SAVE` mid-workload, then a start on the same dir: as with `always`.
//! * `kill -9` while `BGREWRITEAOF` runs (slowed with `rdb-key-save-delay`, checked with
//!   `aof_rewrite_in_progress:1` just before the kill): as with `always`.
//!
//! After each the work goes on and then drains: every job ends completed or failed, and the
//! keyspace holds exactly what the model holds; that final state then survives one more
//! `kill -9` and restart bit for bit (`DEBUG DIGEST`).
//!
//! Each test crashes twice (`CRASH_ROUNDS=<n>`; 20 with `TRAFIKEY_SOAK=1`). Seeded: the seed is
//! printed; `CRASH_SEED=<n>` replays a run (the interleaving of the threads and the moment of
//! the kill still vary; each worker's choices do not).
// A test may panic: that is how it fails. The module's own rules are for src/.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{sleep, JoinHandle};
use std::time::{Duration, Instant};

use trafikey_support::reliability::*;
use trafikey_support::*;

const WORKERS: u64 = 4;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Mode {
    Always,
    Everysec,
    Rdb,
    Rewrite,
}

fn server_args(m: Mode) -> Vec<String> {
    match m {
        Mode::Always | Mode::Rewrite => args(&["--appendonly", "yes", "--appendfsync", "always"]),
        Mode::Everysec => args(&["--appendonly", "yes", "--appendfsync", "everysec"]),
        Mode::Rdb => vec![],
    }
}

/// Runs each worker on its own connection until the server goes away (or `stop`, or `steps`
/// calls), then hands it back.
fn spawn(
    port: u16,
    workers: Vec<Worker>,
    steps: Option<usize>,
    stop: &Arc<AtomicBool>,
) -> Vec<JoinHandle<Worker>> {
    workers
        .into_iter()
        .map(|mut w| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let Ok(mut c) = Conn::connect(port) else { return w };
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) && steps.is_none_or(|s| n < s) {
                    if !w.step(&mut c, &mut |_| true) {
                        break;
                    }
                    n += 1;
                }
                w
            })
        })
        .collect()
}

fn join(h: Vec<JoinHandle<Worker>>) -> Vec<Worker> {
    h.into_iter().map(|h| h.join().expect("a worker panicked")).collect()
}

fn loaded(s: &Server) -> Conn {
    let mut c = s.conn();
    wait_for(
        || matches!(c.call(&[b"INFO", b"persistence"]), Reply::Bulk(ref b) if String::from_utf8_lossy(b).contains("loading:0")),
        "the dataset loaded",
    );
    c
}

/// Rounds of work and crash per test: `CRASH_ROUNDS`, else 2 (20 with `TRAFIKEY_SOAK=1`).
fn rounds() -> u64 {
    let soak = std::env::var("TRAFIKEY_SOAK").is_ok_and(|v| v == "1");
    std::env::var("CRASH_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(if soak { 20 } else { 2 })
}

/// Runs the workers until the server dies the way `mode` says; returns the server started
/// again and the workers.
fn crash(mode: Mode, s: Server, workers: Vec<Worker>, rng: &mut Rng) -> (Server, Vec<Worker>, Duration) {
    let mut c = s.conn();
    if mode == Mode::Rewrite {
        // Keys for the rewrite to take its time over (1 ms each, below).
        assert_eq!(c.call(&[b"DEBUG", b"POPULATE", b"4000", b"filler"]), Reply::Simple("OK".into()));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let t0 = Instant::now();
    let running = spawn(s.port, workers, None, &stop);
    let run_for = Duration::from_millis(400 + rng.below(1000));
    let s = match mode {
        Mode::Always | Mode::Everysec => {
            sleep(run_for);
            s.restart()
        }
        Mode::Rdb => {
            sleep(run_for);
            s.shutdown_restart(&[b"SAVE"])
        }
        Mode::Rewrite => {
            sleep(run_for / 2);
            assert_eq!(
                c.call(&[b"CONFIG", b"SET", b"rdb-key-save-delay", b"1000"]),
                Reply::Simple("OK".into())
            );
            let r = c.call(&[b"BGREWRITEAOF"]);
            assert!(r.err().is_none(), "{r:?}");
            wait_for(
                || info_field(&mut c, "persistence", "aof_rewrite_in_progress") == "1",
                "the rewrite running",
            );
            sleep(run_for / 2);
            assert_eq!(
                info_field(&mut c, "persistence", "aof_rewrite_in_progress"),
                "1",
                "the rewrite is still running at the kill"
            );
            let forks = children_of(s.pid());
            assert!(!forks.is_empty(), "the rewrite's fork");
            let s = s.restart();
            for f in forks {
                kill_fork(f);
            }
            s
        }
    };
    let workers = join(running);
    (s, workers, t0.elapsed())
}

/// Keeps the data dir (AOF, RDB, log) of a failed check for a post-mortem, and says what each
/// worker had pending at the crash.
fn keep_evidence(s: &Server, workers: &[Worker], tag: &str) {
    let to = std::env::temp_dir().join(format!("trafikey-crash-evidence-{tag}"));
    let _ = std::fs::remove_dir_all(&to);
    let copied = std::process::Command::new("cp").arg("-r").arg(&s.dir).arg(&to).status();
    eprintln!("the data dir is kept in {} ({copied:?})", to.display());
    for w in workers {
        eprintln!("{} had pending: {:?}", w.name, w.pending);
    }
}

fn crash_and_restart(mode: Mode) {
    let seed = seed("CRASH_SEED");
    let mut rng = Rng(seed ^ (mode as u64).wrapping_mul(0x1000_0000_01b3));
    let mut s = Server::start(Opts {
        server_args: server_args(mode),
        module_args: workload_args(),
        ..Opts::default()
    });
    assert_eq!(s.conn().call(&[b"EMQ.INSTALL", b"1", b"{emq}:version"]), Reply::Int(1));
    let mut workers: Vec<Worker> =
        (0..WORKERS).map(|n| Worker::new(&format!("crash{mode:?}"), n, rng.fork())).collect();
    let (mut lost_total, mut held_total, mut honoured_total) = (0, 0, 0);
    for round in 1..=rounds() {
        let (s2, w2, ran) = crash(mode, s, workers, &mut rng);
        (s, workers) = (s2, w2);
        let mut c = loaded(&s);
        // The verdict: nothing acknowledged lost (but with everysec), nothing half-applied.
        let mut lost = Vec::new();
        let mut held = 0;
        let checked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            for w in &workers {
                let snap = check_rows(&mut c, &w.q);
                let v = w.verify(&snap);
                held += v.leases_held;
                lost.extend(v.lost);
            }
        }));
        if let Err(e) = checked {
            keep_evidence(&s, &workers, &format!("{mode:?}-{seed}-round{round}"));
            std::panic::resume_unwind(e);
        }
        let acked: u64 = workers.iter().map(|w| w.acked.creates + w.acked.completes + w.acked.fails).sum();
        let calls: u64 = workers
            .iter()
            .map(|w| w.acked.creates + w.acked.claims + w.acked.completes + w.acked.fails + w.acked.other)
            .sum();
        eprintln!(
            "{mode:?} round {round}: killed after {ran:?}; {calls} acknowledged calls so far ({acked} ENQUEUE/SCHEDULE, \
             COMPLETE, FAIL); {} lost; {held} leases held across the restart",
            lost.len()
        );
        if mode == Mode::Everysec {
            for l in lost.iter().take(10) {
                eprintln!("  lost: {l}");
            }
        } else {
            assert!(
                lost.is_empty(),
                "{mode:?} (seed {seed}, round {round}): acknowledged calls lost: {lost:#?}"
            );
        }
        lost_total += lost.len();
        held_total += held;
        for w in &mut workers {
            w.resync(&mut c);
        }
        // Every lease held across the restart is honoured by its token, first thing.
        let honoured: usize = workers.iter_mut().map(|w| w.finish_held(&mut c)).sum();
        if mode != Mode::Everysec {
            assert!(honoured >= held, "every lease held before the crash finished by its token");
        }
        honoured_total += honoured;
    }
    if mode == Mode::Everysec {
        eprintln!("{mode:?}: acknowledged writes lost under everysec: {lost_total}");
    }
    // The work goes on, then drains.
    let mut c = s.conn();
    let stop = Arc::new(AtomicBool::new(false));
    let mut workers = join(spawn(s.port, workers, Some(150), &stop));
    let (mut done, mut failed) = (0, 0);
    for w in &mut workers {
        w.drain(&mut c, Duration::from_secs(60));
        let (d, f) = w.finished(&mut c);
        done += d;
        failed += f;
    }
    eprintln!(
        "{mode:?}: {held_total} leases held across the restarts, {honoured_total} finished by their tokens after; \
         the end: {done} completed, {failed} failed"
    );
    // The final state survives one more crash exactly.
    if mode == Mode::Rdb {
        assert_eq!(c.call(&[b"SAVE"]), Reply::Simple("OK".into()));
    }
    if mode == Mode::Rewrite {
        let r = c.call(&[b"BGREWRITEAOF"]);
        assert!(r.err().is_none(), "{r:?}");
        wait_for(
            || {
                info_field(&mut c, "persistence", "aof_rewrite_in_progress") == "0"
                    && info_field(&mut c, "persistence", "aof_rewrite_scheduled") == "0"
            },
            "the rewrite done",
        );
        assert_eq!(info_field(&mut c, "persistence", "aof_last_bgrewrite_status"), "ok");
    }
    let want = digest(&mut c);
    drop(c);
    let s = s.restart();
    let mut c = loaded(&s);
    assert_eq!(digest(&mut c), want, "{mode:?}: the final state after one more restart");
    for w in &workers {
        w.finished(&mut c);
    }
}

#[test]
fn aof_always_keeps_every_acknowledged_call_and_lease_across_kill_9() {
    crash_and_restart(Mode::Always);
}

#[test]
fn aof_everysec_loses_at_most_whole_calls_across_kill_9() {
    crash_and_restart(Mode::Everysec);
}

#[test]
fn rdb_shutdown_save_keeps_every_acknowledged_call() {
    crash_and_restart(Mode::Rdb);
}

#[test]
fn kill_9_during_an_aof_rewrite_keeps_every_acknowledged_call() {
    crash_and_restart(Mode::Rewrite);
}
