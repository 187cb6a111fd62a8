//! No job lost, no job twice.
//!
//! * N jobs, healthy workers and workers that claim and die without a word, leases short
//!   (300 ms) so the dead workers' leases expire and upkeep alone brings those jobs back: at
//!   the end every one of the N ids is completed or failed exactly once (one successful
//!   COMPLETE, or one failure for good), and the events stream (its cap raised so nothing is
//!   trimmed) holds exactly one `added` and one final event (`completed`, or `failed` for a job
//!   that ended failed) per id. A healthy worker is never refused a lease it certainly still
//!   holds.
//! * Sixteen connections claiming from one queue at once, in tight loops (`CLAIM COUNT k`),
//!   abandoning most of what they get so leases expire and jobs are handed out again and again:
//!   every grant (id, token, when) is recorded, and no two grants of one id overlap while the
//!   first's lease (150..450 ms, or longer after an EXTEND) is certainly live. The server's own
//!   count of grants (`active` events) equals the replies'.
//!
//! * Upkeep switched on at run time takes over what ran out while it was off.
//!
//! The tests take turns (a lock), so each has the machine's two cores to itself.
// A test may panic: that is how it fails. The module's own rules are for src/.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::sleep;
use std::time::{Duration, Instant};

use trafikey_support::reliability::*;
use trafikey_support::*;

static SERIAL: Mutex<()> = Mutex::new(());

/// Longer runs, off by default.
fn soak() -> bool {
    std::env::var("TRAFIKEY_SOAK").is_ok_and(|v| v == "1")
}

const LEASE_MS: u64 = 300;

fn claim_cmd(q: &Q, tok: &str, count: u64, block: Option<u64>) -> Vec<Vec<u8>> {
    claim_for(q, tok, LEASE_MS, count, block)
}

fn claim_for(q: &Q, tok: &str, lease_ms: u64, count: u64, block: Option<u64>) -> Vec<Vec<u8>> {
    let lease = lease_ms.to_string();
    let n = count.to_string();
    let b = block.map(|b| b.to_string()).unwrap_or_default();
    let mut a: Vec<&[u8]> = vec![tok.as_bytes(), lease.as_bytes(), b"COUNT", n.as_bytes()];
    if block.is_some() {
        a.extend([&b"BLOCK"[..], b.as_bytes()]);
    }
    q.cmd("EMQ.CLAIM", "", &keys_of("EMQ.CLAIM"), &a)
}

fn granted(r: &Reply) -> Vec<(String, i64)> {
    r.array().iter().map(|j| (j.array()[0].str(), j.array()[3].int())).collect()
}

/// Every event of the stream as (event, id, fields).
fn events(c: &mut Conn, q: &Q) -> Vec<(String, String, Vec<String>)> {
    let r = c.call(&[b"XRANGE", q.k("events").as_bytes(), b"-", b"+"]);
    r.array()
        .iter()
        .map(|e| {
            let f = e.array()[1].strings();
            (f[1].clone(), f.get(3).cloned().unwrap_or_default(), f)
        })
        .collect()
}

/// What a healthy worker saw.
#[derive(Default)]
struct Seen {
    completed: Vec<String>,
    failed: Vec<String>,
    /// COMPLETE/FAIL refused with EMQLEASE (the lease had expired and the job was taken back).
    late: usize,
}

#[test]
fn every_job_ends_exactly_once_while_workers_die_holding_jobs() {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // 2000 jobs (20000 with TRAFIKEY_SOAK=1).
    let n_jobs: u64 = if soak() { 20_000 } else { 2000 };
    let s = Server::start(Opts {
        module_args: args(&["events-maxlen", "1000000", "keep-completed", "-1", "keep-failed", "-1"]),
        ..Opts::default()
    });
    let mut admin = s.conn();
    assert_eq!(admin.call(&[b"EMQ.INSTALL", b"1", b"{emq}:version"]), Reply::Int(1));
    let q = Q::new("conserve");
    for chunk in (1..=n_jobs).collect::<Vec<_>>().chunks(200) {
        let cmds: Vec<Vec<Vec<u8>>> = chunk
            .iter()
            .map(|&n| {
                let p = (n % 3).to_string();
                q.cmd(
                    "EMQ.ENQUEUE",
                    &jid(n),
                    &keys_of("EMQ.ENQUEUE"),
                    &[b"job", b"{}", b"ATTEMPTS", b"2", b"PRIORITY", p.as_bytes()],
                )
            })
            .collect();
        assert!(admin.pipeline(&cmds).iter().all(|r| *r == Reply::Int(1)));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let port = s.port;
    let t0 = Instant::now();
    // Dying workers: a fresh connection, a claim, and gone — 150 deaths in all, in two bursts
    // (the second when the first burst's jobs are coming back, so some die twice over and
    // fail for good by their stalls).
    let died = Arc::new(AtomicUsize::new(0));
    let dying: Vec<_> = (0..2)
        .map(|w| {
            let (q, died) = (q.clone(), died.clone());
            std::thread::spawn(move || {
                let mut abandoned = 0;
                for n in 0..75 {
                    if n == 40 {
                        sleep(Duration::from_millis(LEASE_MS + 50));
                    }
                    let mut c = Conn::connect(port).expect("connect");
                    let tok = format!("d{w}-{n}");
                    abandoned += granted(&c.call_v(&claim_cmd(&q, &tok, 1 + n % 4, None))).len();
                    drop(c);
                    died.fetch_add(1, Ordering::Relaxed);
                }
                abandoned
            })
        })
        .collect();
    // Healthy workers: claim with BLOCK, then complete — or fail: ids divisible by 13 fail
    // their first attempt (and are retried), ids divisible by 101 fail for good.
    let healthy: Vec<_> = (0..6)
        .map(|w| {
            let (stop, q) = (stop.clone(), q.clone());
            std::thread::spawn(move || {
                let mut c = Conn::connect(port).expect("connect");
                let mut seen = Seen::default();
                for n in 0.. {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let tok = format!("h{w}-{n}");
                    let sent = Instant::now();
                    let got = granted(&c.call_v(&claim_cmd(&q, &tok, 1 + n % 4, Some(100))));
                    for (id, attempt) in got {
                        let k = snowflake(&id);
                        let (verb, args): (&str, Vec<&[u8]>) = if k.is_multiple_of(101) {
                            ("EMQ.FAIL", vec![tok.as_bytes(), b"bad", b"FINAL"])
                        } else if k.is_multiple_of(13) && attempt == 1 {
                            ("EMQ.FAIL", vec![tok.as_bytes(), b"flaky"])
                        } else {
                            ("EMQ.COMPLETE", vec![tok.as_bytes(), b"ok"])
                        };
                        let r = q.run(&mut c, verb, &id, &args);
                        let back = sent.elapsed();
                        match r {
                            Reply::Int(1) => seen.completed.push(id),
                            Reply::Simple(ref s) if s == "failed" => seen.failed.push(id),
                            Reply::Simple(ref s) if s == "retry" || s == "delayed" => {}
                            Reply::Error(ref e) if e.starts_with("EMQLEASE") => {
                                // Legitimate only once the lease may have run out.
                                assert!(
                                    back + Duration::from_millis(50) >= Duration::from_millis(LEASE_MS),
                                    "{verb} {id} refused {back:?} after its claim, inside its {LEASE_MS} ms lease: {e}"
                                );
                                seen.late += 1;
                            }
                            other => panic!("{verb} {id}: {other:?}"),
                        }
                    }
                }
                seen
            })
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let snap = q.snapshot(&mut admin);
        let open = (1..=n_jobs)
            .filter(|&n| !matches!(snap.state_of(&jid(n)).as_deref(), Some("completed" | "failed")))
            .count();
        if open == 0 && died.load(Ordering::Relaxed) >= 150 {
            break;
        }
        assert!(Instant::now() < deadline, "{open} jobs still open after {:?}", t0.elapsed());
        sleep(Duration::from_millis(100));
    }
    let took = t0.elapsed();
    stop.store(true, Ordering::Relaxed);
    let abandoned: usize = dying.into_iter().map(|h| h.join().expect("a dying worker")).sum();
    let mut done: HashMap<String, usize> = HashMap::new();
    let mut failed_by: HashMap<String, usize> = HashMap::new();
    let mut late = 0;
    for h in healthy {
        let seen = h.join().expect("a healthy worker");
        late += seen.late;
        for id in seen.completed {
            *done.entry(id).or_default() += 1;
        }
        for id in seen.failed {
            *failed_by.entry(id).or_default() += 1;
        }
    }
    let snap = check_rows(&mut admin, &q);
    let mut completed = 0;
    let mut failed = 0;
    let mut stalled_out = 0;
    for n in 1..=n_jobs {
        let id = jid(n);
        let (c, f) = (done.get(&id).copied().unwrap_or(0), failed_by.get(&id).copied().unwrap_or(0));
        match snap.state_of(&id).as_deref() {
            Some("completed") => {
                completed += 1;
                assert_eq!((c, f), (1, 0), "{id} completed: one successful COMPLETE, no failure for good");
            }
            Some("failed") => {
                failed += 1;
                assert_eq!(c, 0, "{id} failed but a COMPLETE succeeded");
                if f == 0 {
                    // Failed by upkeep: stalled past max-stalls.
                    assert_eq!(snap.field(&id, "e").as_deref(), Some("stalled"), "{id}");
                    stalled_out += 1;
                } else {
                    assert_eq!(f, 1, "{id} failed for good {f} times");
                }
            }
            other => panic!("{id} lost: {other:?}"),
        }
    }
    assert_eq!(snap.rows.len() as u64, n_jobs, "no job made up");
    // The events: one `added` and one final event per id.
    let mut count: BTreeMap<(String, String), usize> = BTreeMap::new();
    for (ev, id, _) in events(&mut admin, &q) {
        *count.entry((ev, id)).or_default() += 1;
    }
    let n_of = |ev: &str, id: &str| count.get(&(ev.to_string(), id.to_string())).copied().unwrap_or(0);
    for n in 1..=n_jobs {
        let id = jid(n);
        assert_eq!(n_of("added", &id), 1, "{id}: one added event");
        let end = snap.state_of(&id).unwrap_or_default();
        let (want_c, want_f) = if end == "completed" { (1, 0) } else { (0, 1) };
        assert_eq!(
            (n_of("completed", &id), n_of("failed", &id)),
            (want_c, want_f),
            "{id} ended {end}: one final event"
        );
    }
    let reclaimed: i64 =
        info_field(&mut admin, "trafikey", "trafikey_upkeep_reclaimed").parse().unwrap_or(-1);
    assert!(reclaimed >= 1, "the dead workers' jobs came back by upkeep");
    eprintln!(
        "conserved {n_jobs} of {n_jobs} jobs in {took:?}: {completed} completed, {failed} failed ({stalled_out} by stalls); \
         150 workers died holding {abandoned} jobs, upkeep reclaimed {reclaimed} leases, {late} late finishes refused"
    );
}

/// One grant: the job, its token, when the CLAIM was sent and its reply read, and when each
/// acknowledged EXTEND of it was sent.
struct Grant {
    id: String,
    tok: String,
    lease: Duration,
    sent: Duration,
    recv: Duration,
    extends: Vec<Duration>,
    completed: bool,
}

#[test]
fn sixteen_claimers_never_share_a_live_lease() {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    const JOBS: u64 = 300;
    let s = Server::start(Opts {
        module_args: args(&["events-maxlen", "1000000", "keep-completed", "-1", "max-stalls", "1000"]),
        ..Opts::default()
    });
    let mut admin = s.conn();
    assert_eq!(admin.call(&[b"EMQ.INSTALL", b"1", b"{emq}:version"]), Reply::Int(1));
    let q = Q::new("share");
    let cmds: Vec<Vec<Vec<u8>>> = (1..=JOBS)
        .map(|n| q.cmd("EMQ.ENQUEUE", &jid(n), &keys_of("EMQ.ENQUEUE"), &[b"job", b"{}"]))
        .collect();
    assert!(admin.pipeline(&cmds).iter().all(|r| *r == Reply::Int(1)));
    let epoch = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let port = s.port;
    let seed = seed("CONSERVE_SEED");
    let mut root = Rng(seed);
    let claimers: Vec<_> = (0..16)
        .map(|w| {
            let (stop, q) = (stop.clone(), q.clone());
            let mut rng = root.fork();
            std::thread::spawn(move || {
                let mut c = Conn::connect(port).expect("connect");
                let mut grants: Vec<Grant> = Vec::new();
                for n in 0.. {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let tok = format!("c{w}-{n}");
                    // Leases of 150..450 ms, so their ends are spread and an early reclaim
                    // of any of them shows.
                    let lease_ms = 150 + rng.below(300);
                    let sent = epoch.elapsed();
                    let got = granted(&c.call_v(&claim_for(&q, &tok, lease_ms, 1 + rng.below(3), None)));
                    let recv = epoch.elapsed();
                    if got.is_empty() {
                        sleep(Duration::from_millis(1));
                    }
                    for (id, _) in got {
                        let lease = Duration::from_millis(lease_ms);
                        let mut g = Grant {
                            id,
                            tok: tok.clone(),
                            lease,
                            sent,
                            recv,
                            extends: vec![],
                            completed: false,
                        };
                        match rng.below(100) {
                            // Done at once: the job leaves for good.
                            0..=3 => {
                                let r = q.run(&mut c, "EMQ.COMPLETE", &g.id, &[tok.as_bytes(), b"ok"]);
                                assert_eq!(
                                    r,
                                    Reply::Int(1),
                                    "COMPLETE {} by {tok} right after its claim",
                                    g.id
                                );
                                g.completed = true;
                            }
                            // Renewed once, then abandoned.
                            4..=19 => {
                                let at = epoch.elapsed();
                                let ms = lease_ms.to_string();
                                let r = q.run(&mut c, "EMQ.EXTEND", &g.id, &[tok.as_bytes(), ms.as_bytes()]);
                                assert!(
                                    matches!(r, Reply::Int(d) if d > 0),
                                    "EXTEND {} by {tok}: {r:?}",
                                    g.id
                                );
                                g.extends.push(at);
                            }
                            // Abandoned: the lease runs out and upkeep takes it back.
                            _ => {}
                        }
                        grants.push(g);
                    }
                }
                grants
            })
        })
        .collect();
    // Four seconds of claiming (sixty with TRAFIKEY_SOAK=1).
    sleep(Duration::from_secs(if soak() { 60 } else { 4 }));
    stop.store(true, Ordering::Relaxed);
    let mut grants: Vec<Grant> = claimers.into_iter().flat_map(|h| h.join().expect("a claimer")).collect();
    // Finish: every job still open is claimed once more and completed.
    let mut finals = 0;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let open = q
            .snapshot(&mut admin)
            .rows
            .values()
            .filter(|r| r.get("st").map(Vec::as_slice) != Some(b"completed"))
            .count();
        if open == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "{open} jobs open");
        let tok = format!("end-{finals}");
        let sent = epoch.elapsed();
        let got = granted(&admin.call_v(&claim_cmd(&q, &tok, 1000, Some(500))));
        let recv = epoch.elapsed();
        for (id, _) in got {
            assert_eq!(q.run(&mut admin, "EMQ.COMPLETE", &id, &[tok.as_bytes(), b"ok"]), Reply::Int(1));
            let lease = Duration::from_millis(LEASE_MS);
            grants.push(Grant { id, tok: tok.clone(), lease, sent, recv, extends: vec![], completed: true });
        }
        finals += 1;
    }
    // No two grants of one id while the earlier one's lease is certainly live. The margin
    // covers the server's clock read in whole ms.
    let margin = Duration::from_millis(10);
    let mut by_id: BTreeMap<&str, Vec<&Grant>> = BTreeMap::new();
    for g in &grants {
        by_id.entry(&g.id).or_default().push(g);
    }
    let mut pairs = 0;
    // How soon after the earliest its lease could end a job was handed out again (ms).
    let mut closest = f64::MAX;
    for (id, gs) in &mut by_id {
        gs.sort_by_key(|g| g.sent);
        assert!(gs.iter().filter(|g| g.completed).count() == 1, "{id} completed exactly once");
        assert!(gs.last().is_some_and(|g| g.completed), "{id}: no grant after its completion");
        for (i, a) in gs.iter().enumerate() {
            for b in &gs[i + 1..] {
                pairs += 1;
                if b.sent >= a.recv {
                    // a was granted first; its lease ran at least until a.sent + lease (or the
                    // last renewal's send + lease).
                    let end = a
                        .extends
                        .iter()
                        .map(|e| *e + a.lease)
                        .chain([a.sent + a.lease])
                        .max()
                        .unwrap_or_default();
                    assert!(
                        b.recv + margin >= end,
                        "{id} granted to {} {:?} before the lease of {} ran out",
                        b.tok,
                        end.saturating_sub(b.recv),
                        a.tok
                    );
                    closest = closest.min(b.recv.as_secs_f64() * 1e3 - end.as_secs_f64() * 1e3);
                } else {
                    // The two calls overlapped in time: both grants within their windows.
                    let span = (a.recv - a.sent) + (b.recv - b.sent);
                    assert!(
                        span + margin >= a.lease.min(b.lease),
                        "{id} granted to {} and {} at the same time",
                        a.tok,
                        b.tok
                    );
                }
            }
        }
    }
    // The server granted exactly what the replies show.
    let mut active: HashMap<String, usize> = HashMap::new();
    for (ev, id, _) in events(&mut admin, &q) {
        if ev == "active" {
            *active.entry(id).or_default() += 1;
        }
    }
    for (id, gs) in &by_id {
        assert_eq!(active.get(*id).copied().unwrap_or(0), gs.len(), "{id}: one active event per grant");
    }
    assert_eq!(by_id.len() as u64, JOBS);
    check_rows(&mut admin, &q);
    let regrants = grants.len() as u64 - JOBS;
    eprintln!(
        "{} grants of {JOBS} jobs ({regrants} after an expiry), {pairs} pairs checked; the closest re-grant \
         answered {closest:.2} ms after the earliest end of the lease before it",
        grants.len()
    );
    assert!(
        regrants > JOBS * 3,
        "leases expired and jobs came back often enough to test anything: {regrants}"
    );
}

/// Upkeep switched on at run time (`CONFIG SET trafikey.upkeep yes`) takes over what is
/// already there: a lease that ran out while it was off (its worker died) and a job that fell
/// due come back with no other call. Otherwise a queue whose workers are all gone keeps the
/// dead worker's job forever.
#[test]
fn upkeep_switched_on_brings_back_what_ran_out_while_it_was_off() {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let s = Server::start(Opts { module_args: args(&["upkeep", "no"]), ..Opts::default() });
    let mut c = s.conn();
    assert_eq!(c.call(&[b"EMQ.INSTALL", b"1", b"{emq}:version"]), Reply::Int(1));
    let q = Q::new("switch");
    assert_eq!(q.enqueue(&mut c, &jid(1), &[]), Reply::Int(1));
    assert_eq!(q.run(&mut c, "EMQ.SCHEDULE", &jid(2), &[b"+100", b"job", b"{}"]), Reply::Int(1));
    {
        // A worker claims and dies.
        let mut w = s.conn();
        let got = granted(&w.call_v(&claim_cmd(&q, "dead", 1, None)));
        assert_eq!(got[0].0, jid(1));
    }
    sleep(Duration::from_millis(LEASE_MS + 200));
    assert_eq!(c.call(&[b"CONFIG", b"SET", b"trafikey.upkeep", b"yes"]), Reply::Simple("OK".into()));
    // Upkeep looks at least once a tick (100 ms): three seconds is plenty.
    let t0 = Instant::now();
    let mut states = (None, None);
    while t0.elapsed() < Duration::from_secs(3) {
        let snap = q.snapshot(&mut c);
        states = (snap.state_of(&jid(1)), snap.state_of(&jid(2)));
        if states == (Some("wait".into()), Some("wait".into())) {
            break;
        }
        sleep(Duration::from_millis(50));
    }
    let ticks = info_field(&mut c, "trafikey", "trafikey_upkeep_ticks");
    assert_eq!(
        states,
        (Some("wait".into()), Some("wait".into())),
        "3 s after upkeep was switched on, the dead worker's expired lease and the due job have not come \
         back (upkeep_ticks {ticks}): nothing arms upkeep's timer until a verb makes something due"
    );
}
