//! The model's view of the server: the queue as the model holds it and as the server holds
//! it, read in one script; the invariant, the differences, and how both are printed.

use super::*;

#[derive(Debug, PartialEq)]
pub struct RowView {
    pub st: Vec<u8>,
    pub name: Vec<u8>,
    pub data: Vec<u8>,
    pub priority: i64,
    pub attempts: i64,
    pub created: i64,
    pub token: Option<Vec<u8>>,
    pub started: i64,
    pub made: i64,
    pub stalls: i64,
    pub claimed: Option<i64>,
    pub result: Option<Vec<u8>>,
    pub error: Option<Vec<u8>>,
    pub finished: Option<i64>,
    pub progress: Option<Vec<u8>>,
    pub expire: Option<i64>,
    pub stack: Option<Vec<u8>>,
    /// `k`: the job's ALIAS.
    pub alias: Option<Vec<u8>>,
    /// `de`: the job's DEDUP id.
    pub dedup: Option<Vec<u8>>,
    /// `w`: the worker's name the last claim with BY recorded.
    pub worker: Option<Vec<u8>>,
}

#[derive(Debug, PartialEq)]
pub struct View {
    /// Each job's log lines, oldest first (only jobs that have a log).
    pub logs: BTreeMap<Vec<u8>, Vec<Vec<u8>>>,
    /// Whether `meta` and `events` exist (OBLITERATE deletes them).
    pub meta_exists: bool,
    pub events_exist: bool,
    /// Claim order (the list's right end first).
    pub wait: Vec<Vec<u8>>,
    /// (member, score) in the set's order.
    pub prio: Vec<(Vec<u8>, i64)>,
    pub active: Vec<(Vec<u8>, i64)>,
    pub delayed: Vec<(Vec<u8>, i64)>,
    pub completed: Vec<(Vec<u8>, i64)>,
    pub failed: Vec<(Vec<u8>, i64)>,
    pub paused: bool,
    pub rows: BTreeMap<Vec<u8>, RowView>,
    /// The alias hash: key → id.
    pub aliases: BTreeMap<Vec<u8>, Vec<u8>>,
    /// The live DEDUP ids among `DEDUP_IDS`: id → (the job, its expiry time if it has one).
    pub dedups: BTreeMap<Vec<u8>, (Vec<u8>, Option<i64>)>,
    /// The times `meta` keeps for the limits: FOR's end and the rate window (jobs claimed in
    /// it, its end), 0 when absent. In the view so that a step whose reply does not show the
    /// instant it ran at (TRA.LIMIT FOR, a rate-limited CLAIM) pins it by what it wrote.
    pub limit_times: (i64, i64, i64),
    /// METRICS, completed then failed: the counter's `count`, `prevTS`, `prevCount` as stored
    /// (None where absent), and the series, newest first.
    pub tallies: [Tallied; 2],
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Tallied {
    pub count: Option<i64>,
    pub since: Option<i64>,
    pub at: Option<i64>,
    pub series: Vec<i64>,
}

pub fn cmd(parts: &[&[u8]]) -> Vec<Vec<u8>> {
    parts.iter().map(|p| p.to_vec()).collect()
}

pub fn bulk(r: &Reply) -> Result<Vec<u8>, String> {
    match r {
        Reply::Bulk(b) => Ok(b.clone()),
        Reply::Simple(s) => Ok(s.clone().into_bytes()),
        other => Err(format!("expected a string, got {other:?}")),
    }
}

pub fn arr(r: &Reply) -> Result<&[Reply], String> {
    match r {
        Reply::Array(a) => Ok(a),
        other => Err(format!("expected an array, got {other:?}")),
    }
}

pub fn int_of(b: &[u8]) -> Result<i64, String> {
    std::str::from_utf8(b)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("not an integer: {}", show(b)))
}

pub fn score_of(b: &[u8]) -> Result<i64, String> {
    let f: f64 = std::str::from_utf8(b)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("not a score: {}", show(b)))?;
    if f.fract() != 0.0 {
        return Err(format!("a fractional score {f}"));
    }
    Ok(f as i64)
}

/// The server's queue, plus the events appended since `last_event`.
pub fn read_view(
    c: &mut Conn,
    q: &Q,
    pool: usize,
    last_event: &mut Vec<u8>,
) -> Result<(View, Vec<Event>), String> {
    let mut cmds = vec![cmd(&[b"LRANGE", q.k("wait").as_bytes(), b"0", b"-1"])];
    for z in ["prio", "active", "delayed", "completed", "failed"] {
        cmds.push(cmd(&[b"ZRANGE", q.k(z).as_bytes(), b"0", b"-1", b"WITHSCORES"]));
    }
    cmds.push(cmd(&[b"HEXISTS", q.k("meta").as_bytes(), b"paused"]));
    for i in 0..pool {
        let mut k = format!("emq:{{{}}}:job:", q.0).into_bytes();
        k.extend(pool_id(i));
        cmds.push(vec![b"HGETALL".to_vec(), k]);
    }
    let mut start = b"(".to_vec();
    start.extend_from_slice(last_event);
    cmds.push(vec![b"XRANGE".to_vec(), q.k("events").into_bytes(), start, b"+".to_vec()]);
    for i in 0..pool {
        let mut k = format!("emq:{{{}}}:log:", q.0).into_bytes();
        k.extend(pool_id(i));
        cmds.push(vec![b"LRANGE".to_vec(), k, b"0".to_vec(), b"-1".to_vec()]);
    }
    cmds.push(cmd(&[b"EXISTS", q.k("meta").as_bytes()]));
    cmds.push(cmd(&[b"EXISTS", q.k("events").as_bytes()]));
    cmds.push(cmd(&[b"HGETALL", q.k("alias").as_bytes()]));
    for d in DEDUP_IDS {
        let mut k = format!("emq:{{{}}}:dedup:", q.0).into_bytes();
        k.extend_from_slice(d);
        cmds.push(vec![b"GET".to_vec(), k.clone()]);
        cmds.push(vec![b"PEXPIRETIME".to_vec(), k]);
    }
    cmds.push(cmd(&[b"HMGET", q.k("meta").as_bytes(), b"hold-until", b"rate"]));
    for kind in ["completed", "failed"] {
        let counter = q.k(&format!("metrics:{kind}"));
        cmds.push(cmd(&[b"HMGET", counter.as_bytes(), b"count", b"prevTS", b"prevCount"]));
        cmds.push(cmd(&[b"LRANGE", format!("{counter}:data").as_bytes(), b"0", b"-1"]));
    }
    let r = c.pipeline(&cmds);
    let mut wait: Vec<Vec<u8>> = arr(&r[0])?.iter().map(bulk).collect::<Result<_, _>>()?;
    wait.reverse();
    let mut zs = Vec::new();
    for reply in &r[1..6] {
        let flat = arr(reply)?;
        let mut v = Vec::new();
        for p in flat.chunks(2) {
            v.push((bulk(&p[0])?, score_of(&bulk(&p[1])?)?));
        }
        zs.push(v);
    }
    let paused = r[6] == Reply::Int(1);
    let mut rows = BTreeMap::new();
    let row_of = |flat: &[Reply]| -> Result<RowView, String> {
        let mut f: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        for p in flat.chunks(2) {
            f.insert(String::from_utf8_lossy(&bulk(&p[0])?).into_owned(), bulk(&p[1])?);
        }
        let int = |k: &str, d: i64| -> Result<i64, String> { f.get(k).map_or(Ok(d), |v| int_of(v)) };
        let opt_int = |k: &str| -> Result<Option<i64>, String> { f.get(k).map(|v| int_of(v)).transpose() };
        Ok(RowView {
            st: f.get("st").cloned().unwrap_or_default(),
            name: f.get("n").cloned().unwrap_or_default(),
            data: f.get("d").cloned().unwrap_or_default(),
            priority: int("p", 0)?,
            attempts: int("a", 1)?,
            created: int("c", -1)?,
            token: f.get("tk").cloned(),
            started: int("as", 0)?,
            made: int("am", 0)?,
            stalls: int("sc", 0)?,
            claimed: opt_int("ca")?,
            result: f.get("r").cloned(),
            error: f.get("e").cloned(),
            finished: opt_int("f")?,
            progress: f.get("g").cloned(),
            expire: opt_int("x")?,
            stack: f.get("s").cloned(),
            alias: f.get("k").cloned(),
            dedup: f.get("de").cloned(),
            worker: f.get("w").cloned(),
        })
    };
    for i in 0..pool {
        let flat = arr(&r[7 + i])?;
        if flat.is_empty() {
            continue;
        }
        rows.insert(pool_id(i), row_of(flat)?);
    }
    let mut logs = BTreeMap::new();
    for i in 0..pool {
        let lines: Vec<Vec<u8>> = arr(&r[8 + pool + i])?.iter().map(bulk).collect::<Result<_, _>>()?;
        if !lines.is_empty() {
            logs.insert(pool_id(i), lines);
        }
    }
    let meta_exists = r[8 + 2 * pool] == Reply::Int(1);
    let events_exist = r[9 + 2 * pool] == Reply::Int(1);
    let mut aliases = BTreeMap::new();
    for p in arr(&r[10 + 2 * pool])?.chunks(2) {
        aliases.insert(bulk(&p[0])?, bulk(&p[1])?);
    }
    let mut dedups = BTreeMap::new();
    for (i, d) in DEDUP_IDS.iter().enumerate() {
        let at = 11 + 2 * pool + 2 * i;
        if r[at].is_nil() {
            continue;
        }
        let until = match &r[at + 1] {
            Reply::Int(t) if *t >= 0 => Some(*t),
            _ => None,
        };
        dedups.insert(d.to_vec(), (bulk(&r[at])?, until));
    }
    let limit_times = {
        let at = 11 + 2 * pool + 2 * DEDUP_IDS.len();
        let got = arr(&r[at])?;
        let hold = if got[0].is_nil() { 0 } else { int_of(&bulk(&got[0])?)? };
        let rate = if got[1].is_nil() { Vec::new() } else { bulk(&got[1])? };
        let words: Vec<i64> = rate.split(|b| *b == b' ').filter_map(|w| int_of(w).ok()).collect();
        match words.as_slice() {
            [_, _, count, until] => (hold, *count, *until),
            _ => (hold, 0, 0),
        }
    };
    let mut tallies: [Tallied; 2] = Default::default();
    for (k, t) in tallies.iter_mut().enumerate() {
        let at = 12 + 2 * pool + 2 * DEDUP_IDS.len() + 2 * k;
        let got = arr(&r[at])?;
        let field = |i: usize| -> Result<Option<i64>, String> {
            if got[i].is_nil() {
                Ok(None)
            } else {
                int_of(&bulk(&got[i])?).map(Some)
            }
        };
        (t.count, t.since, t.at) = (field(0)?, field(1)?, field(2)?);
        t.series =
            arr(&r[at + 1])?.iter().map(|v| bulk(v).and_then(|b| int_of(&b))).collect::<Result<_, _>>()?;
    }
    let mut events = Vec::new();
    for e in arr(&r[7 + pool])? {
        let e = arr(e)?;
        *last_event = bulk(&e[0])?;
        events.push(arr(&e[1])?.iter().map(bulk).collect::<Result<Vec<_>, _>>()?);
    }
    if !events_exist {
        // OBLITERATE deleted the stream: the next one starts afresh (its ids may be lower).
        *last_event = b"0-0".to_vec();
    }
    // Jobs outside the pool (a job scheduler's iterations, ids the module made): their rows
    // and logs, read for every id a state set holds.
    let pooled: BTreeSet<Vec<u8>> = (0..pool).map(pool_id).collect();
    let extra: BTreeSet<Vec<u8>> = wait
        .iter()
        .cloned()
        .chain(zs.iter().flat_map(|z| z.iter().map(|(id, _)| id.clone())))
        .filter(|id| !pooled.contains(id))
        .collect();
    if !extra.is_empty() {
        let mut more = Vec::new();
        for id in &extra {
            let mut k = format!("emq:{{{}}}:job:", q.0).into_bytes();
            k.extend_from_slice(id);
            more.push(vec![b"HGETALL".to_vec(), k]);
            let mut l = format!("emq:{{{}}}:log:", q.0).into_bytes();
            l.extend_from_slice(id);
            more.push(vec![b"LRANGE".to_vec(), l, b"0".to_vec(), b"-1".to_vec()]);
        }
        let got = c.pipeline(&more);
        for (id, pair) in extra.iter().zip(got.chunks(2)) {
            let flat = arr(&pair[0])?;
            if !flat.is_empty() {
                rows.insert(id.clone(), row_of(flat)?);
            }
            let lines: Vec<Vec<u8>> = arr(&pair[1])?.iter().map(bulk).collect::<Result<_, _>>()?;
            if !lines.is_empty() {
                logs.insert(id.clone(), lines);
            }
        }
    }
    let mut zs = zs.into_iter();
    let mut next = || zs.next().unwrap_or_default();
    let view = View {
        wait,
        prio: next(),
        active: next(),
        delayed: next(),
        completed: next(),
        failed: next(),
        paused,
        rows,
        logs,
        meta_exists,
        events_exist,
        aliases,
        dedups,
        limit_times,
        tallies,
    };
    Ok((view, events))
}

pub fn same_reply(exp: &Reply, got: &Reply) -> bool {
    match (exp, got) {
        (Reply::Error(class), Reply::Error(text)) => text.split(' ').next() == Some(class.as_str()),
        _ => *exp == flat(got),
    }
}

/// A reply as RESP2 shows it: maps as flat pairs (TRA.JOB, TRA.COUNTS over RESP3).
pub fn flat(r: &Reply) -> Reply {
    match r {
        Reply::Map(pairs) => Reply::Array(pairs.iter().flat_map(|(k, v)| [flat(k), flat(v)]).collect()),
        Reply::Array(a) => Reply::Array(a.iter().map(flat).collect()),
        other => other.clone(),
    }
}

/// The invariant, read off the server's own view: every job id in at most one state set,
/// its row's `st` naming that set, a row iff the job is in a set, and no log without its row.
pub fn invariant(s: &View) -> Option<String> {
    let mut seen: BTreeMap<&Vec<u8>, &str> = BTreeMap::new();
    let sets: [(&str, Vec<&Vec<u8>>); 6] = [
        ("wait", s.wait.iter().collect()),
        ("prio", s.prio.iter().map(|(id, _)| id).collect()),
        ("active", s.active.iter().map(|(id, _)| id).collect()),
        ("delayed", s.delayed.iter().map(|(id, _)| id).collect()),
        ("completed", s.completed.iter().map(|(id, _)| id).collect()),
        ("failed", s.failed.iter().map(|(id, _)| id).collect()),
    ];
    for (name, ids) in &sets {
        for id in ids {
            if let Some(other) = seen.insert(id, name) {
                return Some(format!("{} is in {name} and in {other}", show(id)));
            }
            match s.rows.get(*id) {
                None => return Some(format!("{} is in {name} but has no row", show(id))),
                Some(r) if r.st != name.as_bytes() => {
                    return Some(format!("{} is in {name} but its row says {}", show(id), show(&r.st)))
                }
                _ => {}
            }
        }
    }
    if let Some(id) = s.rows.keys().find(|id| !seen.contains_key(id)) {
        return Some(format!("the row of {} is in no state set", show(id)));
    }
    if let Some(id) = s.logs.keys().find(|id| !s.rows.contains_key(*id)) {
        return Some(format!("the log of {} outlived its row", show(id)));
    }
    None
}

/// Where the model's step and the server's differ; None when they agree.
fn show_pairs(m: &BTreeMap<Vec<u8>, Vec<u8>>) -> Vec<(String, String)> {
    m.iter().map(|(k, v)| (show(k), show(v))).collect()
}

pub fn differences(
    exp: &Reply,
    got: &Reply,
    exp_ev: &[Event],
    got_ev: &[Event],
    m: &View,
    s: &View,
) -> Option<String> {
    let mut d = String::new();
    if !same_reply(exp, got) {
        let _ = writeln!(d, "  reply: model {} / server {}", show_reply(exp), show_reply(got));
    }
    if exp_ev != got_ev {
        let _ = writeln!(d, "  events: model {} / server {}", show_events(exp_ev), show_events(got_ev));
    }
    let show_dedups = |v: &View| {
        v.dedups
            .iter()
            .map(|(d, (j, t))| format!("{}={}@{t:?}", show(d), show(j)))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let sets: [(&str, String, String); 13] = [
        ("wait (claim order)", show_ids(&m.wait), show_ids(&s.wait)),
        ("prio", show_scored(&m.prio), show_scored(&s.prio)),
        ("active", show_scored(&m.active), show_scored(&s.active)),
        ("delayed", show_scored(&m.delayed), show_scored(&s.delayed)),
        ("completed", show_scored(&m.completed), show_scored(&s.completed)),
        ("failed", show_scored(&m.failed), show_scored(&s.failed)),
        ("paused", m.paused.to_string(), s.paused.to_string()),
        ("meta exists", m.meta_exists.to_string(), s.meta_exists.to_string()),
        ("events exist", m.events_exist.to_string(), s.events_exist.to_string()),
        ("aliases", format!("{:?}", show_pairs(&m.aliases)), format!("{:?}", show_pairs(&s.aliases))),
        ("dedup ids", show_dedups(m), show_dedups(s)),
        ("limit times (hold, count, until)", format!("{:?}", m.limit_times), format!("{:?}", s.limit_times)),
        ("metrics (completed, failed)", format!("{:?}", m.tallies), format!("{:?}", s.tallies)),
    ];
    for (name, a, b) in sets {
        if a != b {
            let _ = writeln!(d, "  {name}: model {a} / server {b}");
        }
    }
    let logs: BTreeSet<&Vec<u8>> = m.logs.keys().chain(s.logs.keys()).collect();
    for id in logs {
        let (a, b) = (m.logs.get(id), s.logs.get(id));
        if a != b {
            let _ = writeln!(
                d,
                "  log of {}: model {:?} / server {:?}",
                show(id),
                a.map(|l| show_ids(l)),
                b.map(|l| show_ids(l))
            );
        }
    }
    let ids: BTreeSet<&Vec<u8>> = m.rows.keys().chain(s.rows.keys()).collect();
    for id in ids {
        let (a, b) = (m.rows.get(id), s.rows.get(id));
        if a != b {
            let _ = writeln!(
                d,
                "  row {}:\n    model  {:?}\n    server {:?}",
                show(id),
                a.map(RowShow),
                b.map(RowShow)
            );
        }
    }
    (!d.is_empty()).then_some(d)
}

pub struct RowShow<'a>(pub &'a RowView);
impl std::fmt::Debug for RowShow<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let r = self.0;
        let o = |v: &Option<Vec<u8>>| v.as_ref().map_or("-".to_string(), |b| show(b));
        let oi = |v: &Option<i64>| v.map_or("-".to_string(), |i| i.to_string());
        write!(
            f,
            "st={} n={} d={} p={} a={} c={} tk={} as={} am={} sc={} ca={} r={} e={} f={} g={} x={} s={}",
            show(&r.st),
            show(&r.name),
            show(&r.data),
            r.priority,
            r.attempts,
            r.created,
            o(&r.token),
            r.started,
            r.made,
            r.stalls,
            oi(&r.claimed),
            o(&r.result),
            o(&r.error),
            oi(&r.finished),
            o(&r.progress),
            oi(&r.expire),
            o(&r.stack)
        )
    }
}

// ---------------------------------------------------------------------------------------
// Printing.

pub fn show(b: &[u8]) -> String {
    if b.len() > 40 && b.iter().all(|&c| c == b[0]) {
        return format!("{}×{}", show(&b[..1]), b.len());
    }
    escape(b)
}

pub fn show_ids(v: &[Vec<u8>]) -> String {
    format!("[{}]", v.iter().map(|i| show(i)).collect::<Vec<_>>().join(" "))
}

pub fn show_scored(v: &[(Vec<u8>, i64)]) -> String {
    format!("[{}]", v.iter().map(|(i, s)| format!("{}@{s}", show(i))).collect::<Vec<_>>().join(" "))
}

pub fn show_events(v: &[Event]) -> String {
    format!(
        "[{}]",
        v.iter()
            .map(|e| e.iter().map(|p| show(p)).collect::<Vec<_>>().join(" "))
            .collect::<Vec<_>>()
            .join(" | ")
    )
}

pub fn show_reply(r: &Reply) -> String {
    match r {
        Reply::Int(i) => i.to_string(),
        Reply::Bulk(b) => show(b),
        Reply::Simple(s) => format!("+{s}"),
        Reply::Error(e) => format!("(error {e})"),
        Reply::Nil => "nil".into(),
        Reply::Array(a) => format!("[{}]", a.iter().map(show_reply).collect::<Vec<_>>().join(" ")),
        other => format!("{other:?}"),
    }
}

pub fn show_argv(v: &[Vec<u8>]) -> String {
    v.iter().map(|a| show(a)).collect::<Vec<_>>().join(" ")
}
