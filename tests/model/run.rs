//! Running a case against the server (and its replica) and the model, step by step.

use super::*;

/// The clock and the keyspace's digest, in one round trip.
pub fn time_and_digest(c: &mut Conn) -> Result<(i64, String), String> {
    let r = c.pipeline(&[cmd(&[b"TIME"]), cmd(&[b"DEBUG", b"DIGEST"])]);
    let a = arr(&r[0])?;
    let t = int_of(&bulk(&a[0])?)? * 1000 + int_of(&bulk(&a[1])?)? / 1000;
    Ok((t, String::from_utf8_lossy(&bulk(&r[1])?).into_owned()))
}

pub fn ok(c: &mut Conn, args: &[&[u8]]) -> Result<(), String> {
    match c.call(args) {
        Reply::Error(e) => Err(format!("{}: {e}", show_argv(&cmd(args)))),
        _ => Ok(()),
    }
}

/// How often each verb met each outcome (success, 0, or an error class), for the summary.
pub type Coverage = std::cell::RefCell<BTreeMap<(String, String), u64>>;

fn outcome_int(r: &Reply) -> String {
    if let Reply::Int(i) = r {
        i.to_string()
    } else {
        "?".into()
    }
}

pub fn outcome(call: &Call, r: &Reply) -> String {
    match (call, r) {
        (_, Reply::Error(e)) => e.split(' ').next().unwrap_or("").to_string(),
        (Call::Pause(on), Reply::Int(i)) => format!("{} {i}", if *on { "PAUSE" } else { "RESUME" }),
        (_, Reply::Int(0)) => "0".into(),
        (_, Reply::Simple(s)) => s.clone(),
        (Call::Claim { .. }, Reply::Array(a)) => format!("{} jobs", a.len().min(2)),
        (Call::CompleteNext { .. }, Reply::Array(a)) => match a.as_slice() {
            [done, Reply::Array(jobs)] => format!("{} + {} jobs", outcome_int(done), jobs.len().min(2)),
            _ => "?".into(),
        },
        (Call::Stalled { .. }, Reply::Array(a)) => {
            let n =
                |i: usize| a.get(i).map_or(0, |x| if let Reply::Array(v) = x { v.len().min(1) } else { 0 });
            format!("requeued {} failed {}", n(0), n(1))
        }
        (Call::CompletesNext { .. }, Reply::Array(a)) => match a.as_slice() {
            [Reply::Array(codes), Reply::Array(jobs)] => {
                let seen: Vec<String> = [1, 0, -1, -2]
                    .iter()
                    .filter(|v| codes.contains(&Reply::Int(**v)))
                    .map(i64::to_string)
                    .collect();
                format!("[{}] + {} jobs", seen.join(" "), jobs.len().min(2))
            }
            _ => "?".into(),
        },
        (Call::Completes { .. }, Reply::Array(a)) => {
            let mut seen: Vec<String> = Vec::new();
            for v in [1, 0, -1, -2] {
                if a.contains(&Reply::Int(v)) {
                    seen.push(v.to_string());
                }
            }
            format!("[{}]", seen.join(" "))
        }
        (Call::Extends { .. }, Reply::Array(a)) => {
            if a.contains(&Reply::Int(0)) {
                "some 0".into()
            } else {
                "all extended".into()
            }
        }
        _ => "ok".into(),
    }
}

/// A primary with the module installed and a replica following it: every case's effects must
/// reach the replica (verbs replicate their resolved writes, never the verb).
pub struct Pair {
    pub primary: Server,
    pub replica: Server,
}

impl Pair {
    pub fn start() -> Pair {
        let primary = Server::quiet();
        let replica = Server::start(Opts::default());
        replica.follow(&primary);
        Pair { primary, replica }
    }

    /// The replica holds exactly the primary's keyspace.
    pub fn in_sync(&self) -> Result<(), String> {
        let mut p = self.primary.conn();
        if p.call(&[b"WAIT", b"1", b"5000"]) != Reply::Int(1) {
            return Err("the replica did not acknowledge within 5 s".into());
        }
        let (a, b) = (digest(&mut p), digest(&mut self.replica.conn()));
        if a != b {
            return Err(format!(
                "the replica's keyspace differs from the primary's (DEBUG DIGEST {a} / {b})"
            ));
        }
        Ok(())
    }
}

pub fn run_case(pair: &Pair, case: &Case, cov: &Coverage) -> Result<(), String> {
    let srv = &pair.primary;
    let mut c = srv.conn();
    ok(&mut c, &[b"FLUSHALL"])?;
    ok(&mut c, &[b"EMQ.INSTALL", b"1", b"{emq}:version"])?;
    let cfg = case.cfg;
    for (k, v) in [
        ("keep-completed", cfg.keep_completed),
        ("keep-failed", cfg.keep_failed),
        ("max-stalls", cfg.max_stalls),
        ("stalled-batch", cfg.stalled_batch),
        ("promote-batch", cfg.promote_batch),
        ("retention-batch", cfg.retention_batch),
        ("events-maxlen", if cfg.events { 100_000 } else { 0 }),
        ("max-payload", cfg.max_payload as i64),
        ("log-keep", cfg.log_keep),
    ] {
        ok(&mut c, &[b"CONFIG", b"SET", format!("trafikey.{k}").as_bytes(), v.to_string().as_bytes()])?;
    }
    let q = Q::new("model");
    let mut m = Model::new(cfg);
    let mut log = format!(
        "configs: {cfg:?}, {} ids{}{}\n",
        case.pool,
        if case.crashy { ", crashy workers" } else { "" },
        if case.resp3 { ", verbs over RESP3" } else { "" }
    );
    // The verbs go over `vc`; reads of the queue and the clock over `c` (RESP2).
    let mut vc = srv.conn();
    if case.resp3 && !matches!(vc.call(&[b"HELLO", b"3"]), Reply::Map(_)) {
        return Err("HELLO 3 failed".into());
    }
    let mut fresh = 0u64;
    let mut last_event = b"0-0".to_vec();
    for (i, op) in case.ops.iter().enumerate() {
        if let Op::Sleep(ms) = op {
            std::thread::sleep(Duration::from_millis(*ms));
            let _ = writeln!(log, "{i:>3} (sleep {ms} ms)");
            continue;
        }
        let (t0, before) = time_and_digest(&mut c)?;
        let (call, lc) = Resolver { m: &m, pool: case.pool, clock: t0, fresh: &mut fresh }.call(op);
        let argv = call.argv(&q, lc);
        let refs: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
        let reply = vc.call(&refs);
        let (t1, after) = time_and_digest(&mut c)?;
        let (view, events) = read_view(&mut c, &q, case.pool, &mut last_event)
            .map_err(|e| format!("{log}reading the queue: {e}"))?;
        let _ = writeln!(log, "{i:>3} [{t0}..{t1}] {} -> {}", show_argv(&argv), show_reply(&reply));
        if reply.err().is_some() && before != after {
            return Err(format!("{log}\nA REFUSAL WROTE at step {i}: DEBUG DIGEST {before} -> {after}"));
        }
        if let Some(e) = invariant(&view) {
            return Err(format!(
                "{log}\nINVARIANT (each job in at most one state set, named by its row; no log without its row) broken at step {i}: {e}"
            ));
        }
        *cov.borrow_mut().entry((call.verb().to_string(), outcome(&call, &reply))).or_default() += 1;
        let step = |now: i64| {
            let mut next = m.clone();
            let mut ev = Vec::new();
            let exp = match next.apply(&call, now, &mut ev) {
                Ok(r) => r,
                Err(class) => {
                    next = m.clone();
                    ev.clear();
                    Reply::Error(class.to_string())
                }
            };
            if !next.cfg.events {
                ev.clear();
            }
            if !ev.is_empty() {
                next.events_exist = true;
            }
            let d = differences(&exp, &reply, &ev, &events, &next.view(), &view);
            (next, d)
        };
        let mut first_diff = None;
        let mut agreed = None;
        for now in t0..=t1.max(t0) {
            let (next, d) = step(now);
            match d {
                None => {
                    agreed = Some(next);
                    break;
                }
                Some(d) => {
                    first_diff.get_or_insert((now, d));
                }
            }
        }
        match agreed {
            Some(next) => {
                // Which paths deleted a log with its row (the summary shows each).
                let gone = m.logs.keys().filter(|id| !next.logs.contains_key(*id)).count() as u64;
                // Jobs a CLAIM failed as expired (the reply does not show them; the events,
                // which agree, do — unless events are off).
                let expired = events
                    .iter()
                    .filter(|e| e.windows(2).any(|w| w == [b"error".to_vec(), b"expired".to_vec()]))
                    .count() as u64;
                if expired > 0 {
                    *cov.borrow_mut().entry((call.verb().to_string(), "expired".into())).or_default() +=
                        expired;
                }
                if gone > 0 {
                    *cov.borrow_mut().entry((call.verb().to_string(), "logs deleted".into())).or_default() +=
                        gone;
                }
                m = next
            }
            None => {
                let (now, d) = first_diff.unwrap_or_default();
                // Tell a clock-bracket problem (the harness's) from a real divergence.
                let outside = (t0 - 200..t0).chain(t1 + 1..t1 + 200).find(|t| step(*t).1.is_none());
                let note = match outside {
                    Some(t) => format!(
                        "\nNOTE: the model agrees at now={t}, outside the TIME bracket [{t0}, {t1}]: a clock problem, not a divergence"
                    ),
                    None => String::new(),
                };
                return Err(format!(
                    "{log}\nDIVERGENCE at step {i} (model run at now={now} of [{t0}, {t1}]):\n{d}{note}"
                ));
            }
        }
    }
    let inv = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        q.check_invariant(&mut c);
    }));
    if let Err(p) = inv {
        let msg = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        return Err(format!(
            "{log}\nINVARIANT (each job in at most one state set, named by its row) broken at the end: {msg}"
        ));
    }
    pair.in_sync().map_err(|e| format!("{log}\nREPLICATION (verbs replicate their resolved writes): {e}"))?;
    Ok(())
}

pub fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}
