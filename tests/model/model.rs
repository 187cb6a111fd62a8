//! The model: the contract's constants, and a pure Rust model of the verbs — the state
//! each call leaves, the reply and the events it makes, at a given instant.

use super::*;

// The contract's constants (src/CONTRACT.md, "Value ranges").

pub const TIME_MAX: i64 = (1 << 53) - 1;
pub const PRIORITY_MAX: i64 = (1 << 21) - 1;
pub const ATTEMPTS_MAX: i64 = 1_000_000;
pub const BACKOFF_MAX: i64 = 1 << 31;
pub const LEASE_MAX: i64 = 1 << 31;
pub const CLAIM_COUNT_MAX: i64 = 1000;
pub const STALLED_COUNT_MAX: i64 = 10_000;
/// What one call does at most, whatever COUNT asks (the module's `domain::*_PER_CALL`).
pub const CLAIM_PER_CALL: i64 = 50;
pub const RECLAIM_PER_CALL: i64 = 100;
/// Passes one CLAIM makes at most while the jobs it meets keep turning out expired (the
/// reference page's "a few passes"; the module's `claim::PASSES`).
pub const CLAIM_PASSES: usize = 4;
/// Jobs one TRA.COMPLETES finishes at most (more is refused).
pub const COMPLETES_MAX: usize = 50;
pub const MAX_STALLS_MAX: i64 = 1000;
pub const EXTENDS_PAIRS_MAX: usize = 250;
pub const TOKEN_MAX: usize = 128;
pub const NAME_MAX: usize = 256;
/// ALIAS: 1..=4096 bytes.
pub const ALIAS_MAX: usize = 4096;
/// A DEDUP id: 1..=256 bytes.
pub const DEDUP_MAX: usize = 256;
/// The DEDUP ids the generator draws from (so they collide); the view reads each one's key.
pub const DEDUP_IDS: [&[u8]; 3] = [b"d1", b"d2", b"d3"];
/// Jobs one TRA.ADD takes (its n: 1..=250).
pub const ADD_MAX: usize = 250;
pub const PROGRESS_MAX: usize = 4096;
pub const LOG_KEEP_MAX: i64 = 1_000_000;
/// The longest METRICS series (one week of minutes).
pub const METRICS_MAX: i64 = 10_080;
pub const DELETE_COUNT_DEFAULT: i64 = 1000;
pub const DELETE_COUNT_MAX: i64 = 10_000;
pub const PAGE_MAX: i64 = 1000;
/// TRA.LIMIT's ranges: `max` and `n` 1..=2^31-1, `ms` 1..=2^31.
pub const LIMIT_MAX: i64 = (1 << 31) - 1;
pub const LIMIT_MS_MAX: i64 = 1 << 31;

/// A queue's limits as the contract states them (TRA.LIMIT), and the rate window claims keep.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Lim {
    pub rate: Option<(i64, i64)>,
    pub conc: Option<i64>,
    /// Jobs claimed in the window that ends at `until` (0, 0: no window recorded).
    pub count: i64,
    pub until: i64,
    /// FOR's end, 0 when none was set (or CLEAR ended it).
    pub hold: i64,
}

impl Lim {
    /// Whether `meta` holds any of it.
    pub fn stored(&self) -> bool {
        self.rate.is_some() || self.conc.is_some() || self.hold != 0 || self.until != 0
    }

    /// The window in force at `now`: (jobs claimed in it, its end).
    pub fn window(&self, now: i64) -> Option<(i64, i64)> {
        (self.rate.is_some() && self.until > now).then_some((self.count, self.until))
    }

    /// When a claim may take a job again by the rate limit or a FOR, if not now.
    pub fn reopen(&self, now: i64) -> Option<i64> {
        let full = match (self.rate, self.window(now)) {
            (Some((max, _)), Some((count, until))) if count >= max => Some(until),
            _ => None,
        };
        let hold = (self.hold > now).then_some(self.hold);
        full.max(hold)
    }
}

/// The id pool: small, so verbs collide on the same jobs (5 ids), or larger in some cases
/// (24 ids), so finished sets outgrow small retention caps.
pub const POOL_MAX: usize = 24;
pub fn pool_id(i: usize) -> Vec<u8> {
    jid(1000 + i as u64).into_bytes()
}
/// Ids the id gate refuses: above u64::MAX, 13 bytes, wrong brand case, just past the max.
pub const BAD_IDS: [&[u8]; 4] = [b"JOBzzzzzzzzzzz", b"JOB0000000001", b"job0000000000A", b"JOBLygHa16AHYG"];
pub const TOKENS: [&[u8]; 3] = [b"w1", b"w2", b"w3"];

/// The id gate, written from the contract ("Branded ids"): 14 bytes, brand `JOB`, 11 Base62
/// characters whose value fits in a u64 (the alphabet is in ASCII order, so compare bytes).
pub fn is_job_id(id: &[u8]) -> bool {
    id.len() == 14
        && &id[..3] == b"JOB"
        && id[3..].iter().all(u8::is_ascii_alphanumeric)
        && id[3..] <= b"LygHa16AHYF"[..]
}

// ---------------------------------------------------------------------------------------
// The model.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum St {
    Wait,
    Prio,
    Active,
    Delayed,
    Completed,
    Failed,
}

impl St {
    pub fn word(self) -> &'static str {
        match self {
            St::Wait => "wait",
            St::Prio => "prio",
            St::Active => "active",
            St::Delayed => "delayed",
            St::Completed => "completed",
            St::Failed => "failed",
        }
    }
}

/// A job row as the model sees it. The comparison with the server goes through `RowView`.
#[derive(Clone, Debug)]
pub struct Row {
    pub state: St,
    pub name: Vec<u8>,
    pub data: Vec<u8>,
    pub priority: i64,
    pub attempts: i64,
    pub backoff: Option<Backoff>,
    pub created: i64,
    /// The current holder's token, or the token that completed the job.
    pub token: Option<Vec<u8>>,
    pub started: i64,
    pub made: i64,
    pub stalls: i64,
    pub claimed: Option<i64>,
    pub result: Option<Vec<u8>>,
    pub error: Option<Vec<u8>>,
    pub finished: Option<i64>,
    /// The holder's last TRA.PROGRESS report.
    pub progress: Option<Vec<u8>>,
    /// EXPIRE, absolute ms (row field `x`).
    pub expire: Option<i64>,
    /// The last FAIL's STACK (row field `s`): each FAIL replaces it, one without STACK
    /// deletes it, REPROCESS keeps it.
    pub stack: Option<Vec<u8>>,
    /// A CLAIM has taken the job (in time): its EXPIRE is spent for good — a retry after
    /// FAIL, a stall or REPROCESS makes it wait again, and it is handed out as any job
    /// (src/verbs/README.md, EMQ.ENQUEUE's "EXPIRE when"). Not a row field.
    pub spent: bool,
    /// `k`: the job's ALIAS.
    pub alias: Option<Vec<u8>>,
    /// `de`: the job's DEDUP id.
    pub dedup: Option<Vec<u8>>,
    /// `rs`, `rt` and `rn`: the job scheduler that made the job, the iteration's time and
    /// its number.
    pub made_by: Option<(Vec<u8>, i64, i64)>,
    /// `w`: the worker's name the last claim with BY recorded.
    pub worker: Option<Vec<u8>>,
}

#[derive(Clone, Copy, Debug)]
pub struct Cfg {
    /// TRA.LOG's default KEEP.
    pub log_keep: i64,
    pub keep_completed: i64,
    pub keep_failed: i64,
    pub max_stalls: i64,
    pub stalled_batch: i64,
    /// Due jobs one CLAIM promotes at most (earliest due first).
    pub promote_batch: i64,
    /// Finished jobs one call deletes by retention at most (oldest first).
    pub retention_batch: i64,
    /// Largest data, result, error accepted.
    pub max_payload: usize,
    /// `events-maxlen` 0 turns events off.
    pub events: bool,
}

#[derive(Clone, Debug)]
pub struct Model {
    pub cfg: Cfg,
    pub rows: BTreeMap<Vec<u8>, Row>,
    /// `wait` in claim order: the front is claimed first.
    pub wait: VecDeque<Vec<u8>>,
    /// `prio` in claim order: (priority, id).
    pub prio: BTreeSet<(i64, Vec<u8>)>,
    /// id → lease deadline.
    pub active: BTreeMap<Vec<u8>, i64>,
    /// id → due time.
    pub delayed: BTreeMap<Vec<u8>, i64>,
    /// id → finish time.
    pub completed: BTreeMap<Vec<u8>, i64>,
    pub failed: BTreeMap<Vec<u8>, i64>,
    pub paused: bool,
    /// The queue's own `max-stalls` in `meta`, as a client wrote it (any bytes).
    pub meta_stalls: Option<Vec<u8>>,
    /// The queue's limits (TRA.LIMIT) and its rate window, in `meta`.
    pub lim: Lim,
    /// The last token each job was claimed with (kept after it is cleared): for stale holders.
    pub last_token: BTreeMap<Vec<u8>, Vec<u8>>,
    /// Each job's log (TRA.LOG), oldest line first: deleted with its row, always.
    pub logs: BTreeMap<Vec<u8>, Vec<Vec<u8>>>,
    /// Whether the events stream exists (an event was appended since the last OBLITERATE).
    pub events_exist: bool,
    /// The alias hash: each live ALIAS key → its job (deleted with the job's row, always).
    pub aliases: BTreeMap<Vec<u8>, Vec<u8>>,
    /// The live DEDUP ids: id → (the job holding it, its expiry when it has a TTL). No TTL a
    /// case draws runs out during the case.
    pub dedups: BTreeMap<Vec<u8>, (Vec<u8>, Option<i64>)>,
    /// Job schedulers (EVERY only), by id: SET and DEL change them, and a CLAIM that takes
    /// one's pending iteration makes the next. The server runs with upkeep off, so the other
    /// maker of iterations (upkeep, at an iteration's own time) never acts here.
    pub scheds: BTreeMap<Vec<u8>, Sched>,
    /// METRICS, completed then failed: each counter's fields as stored and its series.
    pub tallies: [Tallied; 2],
}

/// A job scheduler as the contract describes it ("Job schedulers").
#[derive(Clone, Debug)]
pub struct Sched {
    pub every: i64,
    pub offset: i64,
    /// Iterations made, the pending one included.
    pub count: i64,
    /// The pending iteration's time and job.
    pub next: i64,
    pub job: Vec<u8>,
    /// The next iteration's time, not yet made (its score in `scheds`).
    pub score: i64,
    pub limit: Option<i64>,
    /// The template.
    pub name: Vec<u8>,
    pub data: Vec<u8>,
}

/// EVERY's next slot k·every + offset after now.
fn slot_after(now: i64, every: i64, offset: i64) -> i64 {
    let s = now / every * every + offset;
    if s <= now {
        s + every
    } else {
        s
    }
}

/// The time after an iteration at `prev`: one interval on, or the next slot after now.
fn every_after(prev: i64, every: i64, offset: i64, now: i64) -> i64 {
    if prev + every > now {
        prev + every
    } else {
        slot_after(now, every, offset)
    }
}

/// The module's id for an iteration (CONTRACT, "Branded ids"): the time's low 42 bits, then
/// 22 bits of the scheduler id's FNV-1a plus the probe.
pub fn iteration_id(sid: &[u8], at: i64, probe: u64) -> Vec<u8> {
    let h = sid.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &c| (h ^ c as u64).wrapping_mul(0x0100_0000_01b3));
    let n = ((at as u64 & ((1 << 42) - 1)) << 22) | (h.wrapping_add(probe) & ((1 << 22) - 1));
    id_of("JOB", n).into_bytes()
}

/// One event's fields, flat: `event <name> [id <ID>] facts...`.
pub type Event = Vec<Vec<u8>>;

pub fn event(name: &str, id: Option<&[u8]>, facts: &[(&str, Vec<u8>)]) -> Event {
    let mut e = vec![b"event".to_vec(), name.as_bytes().to_vec()];
    if let Some(id) = id {
        e.extend([b"id".to_vec(), id.to_vec()]);
    }
    for (k, v) in facts {
        e.extend([k.as_bytes().to_vec(), v.clone()]);
    }
    e
}

pub fn n(v: i64) -> Vec<u8> {
    v.to_string().into_bytes()
}

pub type Refused = &'static str;

pub fn gate(id: &[u8]) -> Result<(), Refused> {
    if is_job_id(id) {
        Ok(())
    } else {
        Err("EMQID")
    }
}

pub fn within(v: i64, lo: i64, hi: i64) -> Result<i64, Refused> {
    if (lo..=hi).contains(&v) {
        Ok(v)
    } else {
        Err("EMQARG")
    }
}

/// A claim's BY: a name as a job's is bounded.
pub fn by_ok(by: &Option<Vec<u8>>) -> Result<Option<&[u8]>, Refused> {
    match by {
        Some(w) if !(1..=NAME_MAX).contains(&w.len()) => Err("EMQARG"),
        w => Ok(w.as_deref()),
    }
}

pub fn token_ok(t: &[u8]) -> Result<(), Refused> {
    if (1..=TOKEN_MAX).contains(&t.len()) {
        Ok(())
    } else {
        Err("EMQARG")
    }
}

/// `when` at `now`: absolute or `+ms`, ≤ 2^53−1, a time in the past is due now.
pub fn due_of(w: WhenArg, now: i64) -> Result<i64, Refused> {
    let at = match w {
        WhenArg::At(t) => t,
        WhenArg::In(d) => now.checked_add(d).ok_or("EMQARG")?,
    };
    Ok(within(at, 0, TIME_MAX)?.max(now))
}

/// EXPIRE `when` at `now`: absolute or `+ms`, 0..=2^53−1, a time already past kept as given
/// (the job is expired from the start).
pub fn expire_of(w: WhenArg, now: i64) -> Result<i64, Refused> {
    let at = match w {
        WhenArg::At(t) => t,
        WhenArg::In(d) => now.checked_add(d).ok_or("EMQARG")?,
    };
    within(at, 0, TIME_MAX)
}

/// KEEP: -1 all, 0 delete this job now, n the n newest; default: the config.
pub fn keep_of(given: Option<i64>, default: i64) -> Result<i64, Refused> {
    match given {
        Some(k) if k < -1 => Err("EMQARG"),
        Some(k) => Ok(k),
        None => Ok(default),
    }
}

pub fn age_of(given: Option<i64>) -> Result<Option<i64>, Refused> {
    given.map(|a| within(a, 0, TIME_MAX)).transpose()
}

/// The backoff delay after `made` finished attempts: FIXED d, or EXP d·2^(made−1), saturating.
pub fn backoff_delay(b: Option<Backoff>, made: i64) -> i64 {
    match b {
        None => 0,
        Some(Backoff::Fixed(d)) => d,
        Some(Backoff::Exp(d)) => {
            let e = made - 1;
            let factor = if e >= 62 { i64::MAX } else { 1i64 << e };
            d.saturating_mul(factor).min(TIME_MAX)
        }
    }
}

pub struct Checked {
    pub name: Vec<u8>,
    pub data: Vec<u8>,
    pub priority: i64,
    pub attempts: i64,
    pub backoff: Option<Backoff>,
    pub expire: Option<i64>,
    pub alias: Option<Vec<u8>>,
    pub dedup: Option<DedupArg>,
}

pub fn check_new(j: &NewJob, max_payload: usize, now: i64) -> Result<Checked, Refused> {
    if !(1..=NAME_MAX).contains(&j.name.len()) {
        return Err("EMQARG");
    }
    if j.data.len() > max_payload {
        return Err("EMQARG");
    }
    let priority = within(j.priority.unwrap_or(0), 0, PRIORITY_MAX)?;
    let attempts = within(j.attempts.unwrap_or(1), 1, ATTEMPTS_MAX)?;
    let backoff = match j.backoff {
        Some(Backoff::Fixed(ms)) => Some(Backoff::Fixed(within(ms, 0, BACKOFF_MAX)?)),
        Some(Backoff::Exp(ms)) => Some(Backoff::Exp(within(ms, 0, BACKOFF_MAX)?)),
        None => None,
    };
    let expire = j.expire.map(|w| expire_of(w, now)).transpose()?;
    if j.alias.as_ref().is_some_and(|k| !(1..=ALIAS_MAX).contains(&k.len())) {
        return Err("EMQARG");
    }
    let alias = j.alias.clone();
    if let Some(d) = &j.dedup {
        if !(1..=DEDUP_MAX).contains(&d.id.len()) {
            return Err("EMQARG");
        }
        d.ttl.map(|t| within(t, 1, TIME_MAX)).transpose()?;
    }
    let dedup = j.dedup.clone();
    Ok(Checked {
        name: j.name.clone(),
        data: j.data.clone(),
        priority,
        attempts,
        backoff,
        expire,
        alias,
        dedup,
    })
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Finished {
    Completed,
    Failed,
}

impl Model {
    pub fn new(cfg: Cfg) -> Model {
        Model {
            cfg,
            rows: BTreeMap::new(),
            wait: VecDeque::new(),
            prio: BTreeSet::new(),
            active: BTreeMap::new(),
            delayed: BTreeMap::new(),
            completed: BTreeMap::new(),
            failed: BTreeMap::new(),
            paused: false,
            meta_stalls: None,
            lim: Lim::default(),
            last_token: BTreeMap::new(),
            logs: BTreeMap::new(),
            events_exist: false,
            aliases: BTreeMap::new(),
            dedups: BTreeMap::new(),
            scheds: BTreeMap::new(),
            tallies: Default::default(),
        }
    }

    /// METRICS' range, checked with the other values.
    pub fn metrics_ok(max: Option<i64>) -> Result<(), Refused> {
        max.map_or(Ok(()), |m| within(m, 1, METRICS_MAX).map(|_| ()))
    }

    /// One job of `kind` (0 completed, 1 failed) counted by the minute at `now`, as the
    /// contract's "Metrics" says: the first job starts the first minute; a job in a later
    /// minute than `prevTS`'s pushes the ended minute's count and a 0 for each empty minute
    /// between, at most `max` points, trims the series to `max`, and enters its minute.
    pub fn count_metrics(&mut self, kind: usize, max: Option<i64>, now: i64) {
        let Some(max) = max else { return };
        let t = &mut self.tallies[kind];
        let before = t.count.unwrap_or(0);
        t.count = Some(before + 1);
        let Some(since) = t.since else {
            (t.since, t.at) = (Some(now), Some(before));
            return;
        };
        let minutes = (now.div_euclid(60_000) - since.div_euclid(60_000)).min(max);
        if minutes <= 0 {
            return;
        }
        let ended = (before - t.at.unwrap_or(0)).max(0);
        t.series.insert(0, ended);
        for _ in 1..minutes {
            t.series.insert(0, 0);
        }
        t.series.truncate(max as usize);
        (t.since, t.at) = (Some(now), Some(before));
    }

    /// Release job `id`'s DEDUP id while it names the job: a finish (`with_ttl` false) leaves
    /// an id with a TTL to it, a client deleting the job (`with_ttl` true) does not.
    pub fn release(&mut self, id: &[u8], with_ttl: bool) {
        let Some(d) = self.rows.get(id).and_then(|r| r.dedup.clone()) else { return };
        if self.dedups.get(&d).is_some_and(|(h, ttl)| h == id && (with_ttl || ttl.is_none())) {
            self.dedups.remove(&d);
        }
    }

    /// A producer's DEDUP, every other check passed: None when the job is to be created (the
    /// id taken; a delayed holder replaced under REPLACE, with its events), else the reply
    /// (the holder's id, its `deduplicated` event written). `ours`: ids of the call, which a
    /// REPLACE leaves alone.
    pub fn dedup(
        &mut self,
        j: &Checked,
        id: &[u8],
        ours: &dyn Fn(&[u8]) -> bool,
        now: i64,
        ev: &mut Vec<Event>,
    ) -> Option<Reply> {
        let d = j.dedup.as_ref()?;
        let fresh = d.ttl.map(|t| now + t);
        let Some((holder, until)) = self.dedups.get(&d.id).cloned() else {
            self.dedups.insert(d.id.clone(), (id.to_vec(), fresh));
            return None;
        };
        if d.replace && !ours(&holder) && self.delayed.contains_key(&holder) {
            self.delayed.remove(&holder);
            let facts = self.with_alias(&holder, vec![("prev", b"delayed".to_vec())]);
            self.drop_row(&holder);
            ev.push(event("removed", Some(&holder), &facts));
            let until = if d.ttl.is_some() && !d.extend { until.or(fresh) } else { fresh };
            self.dedups.insert(d.id.clone(), (id.to_vec(), until));
            let mut facts = vec![("dedup", d.id.clone()), ("replaced", holder)];
            facts.extend(Model::alias_fact(j));
            ev.push(event("deduplicated", Some(id), &facts));
            return None;
        }
        if d.extend {
            if let Some(e) = self.dedups.get_mut(&d.id) {
                e.1 = fresh;
            }
        }
        let mut facts = vec![("dedup", d.id.clone()), ("refused", id.to_vec())];
        facts.extend(Model::alias_fact(j));
        ev.push(event("deduplicated", Some(&holder), &facts));
        Some(Reply::Bulk(holder))
    }

    /// Delete a job's row, and its log and its alias entry with it (every path that deletes a
    /// row does; an entry naming another job stays).
    pub fn drop_row(&mut self, id: &[u8]) {
        if let Some(k) = self.rows.remove(id).and_then(|r| r.alias) {
            if self.aliases.get(&k).is_some_and(|v| v == id) {
                self.aliases.remove(&k);
            }
        }
        self.logs.remove(id);
    }

    /// Take a job out of whatever state set holds it.
    pub fn unset(&mut self, id: &[u8]) {
        self.wait.retain(|w| w != id);
        self.prio.retain(|(_, w)| w != id);
        for m in [&mut self.active, &mut self.delayed, &mut self.completed, &mut self.failed] {
            m.remove(id);
        }
    }

    /// A state set's ids in the order TRA.JOBS pages it (the order the queue serves them).
    pub fn ordered(&self, set: St) -> Vec<Vec<u8>> {
        let by_score = |m: &BTreeMap<Vec<u8>, i64>| {
            let mut v: Vec<(i64, Vec<u8>)> = m.iter().map(|(id, s)| (*s, id.clone())).collect();
            v.sort();
            v.into_iter().map(|(_, id)| id).collect()
        };
        match set {
            St::Wait => self.wait.iter().cloned().collect(),
            St::Prio => self.prio.iter().map(|(_, id)| id.clone()).collect(),
            St::Active => by_score(&self.active),
            St::Delayed => by_score(&self.delayed),
            St::Completed => by_score(&self.completed),
            St::Failed => by_score(&self.failed),
        }
    }

    pub fn set_len(&self, set: St) -> usize {
        match set {
            St::Wait => self.wait.len(),
            St::Prio => self.prio.len(),
            St::Active => self.active.len(),
            St::Delayed => self.delayed.len(),
            St::Completed => self.completed.len(),
            St::Failed => self.failed.len(),
        }
    }

    pub fn row(&mut self, id: &[u8]) -> &mut Row {
        self.rows.get_mut(id).expect("the model's own row")
    }

    /// Held: in active, and the row carries the token.
    pub fn held(&self, id: &[u8], token: &[u8]) -> bool {
        self.active.contains_key(id)
            && self.rows.get(id).is_some_and(|r| r.state == St::Active && r.token.as_deref() == Some(token))
    }

    /// Make a job ready by its priority: wait (back, or front for the "not at fault"
    /// returns and LIFO) for priority 0, else prio.
    pub fn ready(&mut self, id: &[u8], front: bool) {
        let p = self.rows[id].priority;
        if p == 0 {
            if front {
                self.wait.push_front(id.to_vec());
            } else {
                self.wait.push_back(id.to_vec());
            }
            self.row(id).state = St::Wait;
        } else {
            self.prio.insert((p, id.to_vec()));
            self.row(id).state = St::Prio;
        }
    }

    /// Retention of a finished set: after `added` (finished now, so the newest)
    /// joined the entries `before`, keep the `keep` newest (n > 0), and with AGE drop entries
    /// finished before now−age, at most `retention-batch` per call. Trimmed rows are deleted.
    /// Entries are ordered as the set orders them, by (finish time, id): jobs finished in the
    /// same call share a finish time, so among them the lowest ids are the oldest.
    ///
    /// `soft`: the keep is the config's default, which the project documents as a soft cap
    /// (src/verbs/README.md): the set may grow past n by n/16 (at most 64; exact below 16)
    /// and is then trimmed back to n.
    ///
    /// A job of `added` trimmed too (a call finishing more jobs than the cap keeps) is deleted
    /// at once, so its finishing event, the last of `ev` naming it, gets its `alias` (the
    /// contract's "Custom ids": "when the finish deletes the row at once (KEEP 0, or beyond
    /// the cap)").
    #[allow(clippy::too_many_arguments)]
    pub fn retire(
        &mut self,
        which: Finished,
        before: Vec<(i64, Vec<u8>)>,
        added: Vec<Vec<u8>>,
        keep: i64,
        soft: bool,
        age: Option<i64>,
        now: i64,
        ev: &mut [Event],
    ) {
        let mut order: Vec<(i64, Vec<u8>)> = before;
        order.sort();
        let older = order.len();
        let mut added = added;
        added.sort();
        order.extend(added.into_iter().map(|id| (now, id)));
        let slack = if soft && keep > 0 { (keep as usize / 16).min(64) } else { 0 };
        let by_count =
            if keep > 0 && order.len() > keep as usize + slack { order.len() - keep as usize } else { 0 };
        let cutoff = age.map(|a| now - a);
        let mut budget = self.cfg.retention_batch;
        for (i, (score, id)) in order.iter().enumerate() {
            if budget > 0 && (i < by_count || cutoff.is_some_and(|c| *score < c)) {
                budget -= 1;
                match which {
                    Finished::Completed => self.completed.remove(id),
                    Finished::Failed => self.failed.remove(id),
                };
                let alias = self.rows.get(id).and_then(|r| r.alias.clone());
                if let (true, Some(k)) = (i >= older, alias) {
                    let named = |e: &&mut Event| e.get(2).is_some_and(|f| f == b"id") && e.get(3) == Some(id);
                    if let Some(e) = ev.iter_mut().rev().find(named) {
                        e.extend([b"alias".to_vec(), k]);
                    }
                }
                self.drop_row(id);
            }
        }
    }

    pub fn finished_before(&self, which: Finished) -> Vec<(i64, Vec<u8>)> {
        let set = if which == Finished::Completed { &self.completed } else { &self.failed };
        set.iter().map(|(id, s)| (*s, id.clone())).collect()
    }

    /// Run one call at server time `now`. On a refusal the caller discards this model (a
    /// refusal writes nothing), so the arms may check as they go.
    pub fn apply(&mut self, call: &Call, now: i64, ev: &mut Vec<Event>) -> Result<Reply, Refused> {
        match call {
            Call::SchedSet { sid, every, offset, limit, name, data } => {
                within(sid.len() as i64, 1, 200)?;
                let every = within(*every, 1, TIME_MAX)?;
                if let Some(o) = offset {
                    within(*o, 0, every - 1)?;
                }
                if let Some(l) = limit {
                    within(*l, 1, TIME_MAX)?;
                }
                if !(1..=NAME_MAX).contains(&name.len()) || data.len() > self.cfg.max_payload {
                    return Err("EMQARG");
                }
                let old = self.scheds.get(sid).cloned();
                // The pending job not yet taken: delayed, or promoted to wait (unless the queue
                // is paused) or prio.
                let paused = self.paused;
                let pending = old.as_ref().map(|o| o.job.clone()).filter(|j| {
                    self.rows.get(j).is_some_and(|r| match r.state {
                        St::Delayed | St::Prio => true,
                        St::Wait => !paused,
                        _ => false,
                    })
                });
                let pending_state = pending.as_ref().and_then(|j| self.rows.get(j)).map(|r| r.state);
                let kept = old.as_ref().filter(|o| o.every == every && offset.is_none_or(|x| x == o.offset));
                let mut off = kept.map_or(offset.unwrap_or(0), |o| o.offset);
                let mut at = match (&pending, &old) {
                    (Some(_), Some(o)) if kept.is_some() => o.next,
                    (None, Some(o)) => every_after(o.next, every, off, now),
                    _ => {
                        // A phase given (OFFSET 0 included) puts the first time on its next
                        // slot; none given, the first time is now, and its phase the scheduler's.
                        let t = if off > 0 || offset.is_some() { slot_after(now, every, off) } else { now };
                        if kept.is_none() && offset.is_none() && off == 0 {
                            off = t % every;
                        }
                        t
                    }
                };
                let made = old.as_ref().map_or(0, |o| o.count) - i64::from(pending.is_some());
                if limit.is_some_and(|l| made >= l) {
                    return Err("EMQARG");
                }
                // A custom id naming another live job moves the time on; then the first free id.
                let mut tries = 0;
                while self
                    .aliases
                    .get(&format!("repeat:{}:{at}", String::from_utf8_lossy(sid)).into_bytes())
                    .is_some_and(|j| Some(j) != pending.as_ref())
                {
                    tries += 1;
                    if tries == 8 {
                        return Err("EMQSTATE");
                    }
                    at = every_after(at, every, off, now);
                }
                let id = (0..8u64)
                    .map(|p| iteration_id(sid, at, p))
                    .find(|i| Some(i) != pending.as_ref() && !self.rows.contains_key(i))
                    .ok_or("EMQSTATE")?;
                if let Some(p) = &pending {
                    self.unset(p);
                    let prev = pending_state.map_or("delayed", |st| st.word());
                    let facts = self.with_alias(p, vec![("prev", prev.as_bytes().to_vec())]);
                    self.drop_row(p);
                    ev.push(event("removed", Some(p), &facts));
                }
                self.make_iteration((sid, at), &id, (name, data), made + 1, now, ev);
                self.scheds.insert(
                    sid.clone(),
                    Sched {
                        every,
                        offset: off,
                        count: made + 1,
                        next: at,
                        job: id.clone(),
                        score: every_after(at, every, off, now),
                        limit: *limit,
                        name: name.clone(),
                        data: data.clone(),
                    },
                );
                Ok(Reply::Array(vec![Reply::Bulk(id), Reply::Int(at)]))
            }
            Call::SchedDel { sid } => {
                within(sid.len() as i64, 1, 200)?;
                let Some(old) = self.scheds.remove(sid) else { return Ok(Reply::Int(0)) };
                let j = old.job;
                if self.rows.get(&j).is_some_and(|r| r.state == St::Delayed) && self.delayed.contains_key(&j)
                {
                    self.unset(&j);
                    let facts = self.with_alias(&j, vec![("prev", b"delayed".to_vec())]);
                    self.drop_row(&j);
                    ev.push(event("removed", Some(&j), &facts));
                }
                Ok(Reply::Int(1))
            }
            Call::Enqueue { id, job, lifo } => {
                gate(id)?;
                let j = check_new(job, self.cfg.max_payload, now)?;
                if self.rows.contains_key(id) || self.alias_live(&j) {
                    return Ok(Reply::Int(0));
                }
                if let Some(r) = self.dedup(&j, id, &|h| h == &id[..], now, ev) {
                    return Ok(r);
                }
                self.create(id, &j, now);
                self.ready(id, *lifo);
                let mut facts = vec![("name", j.name.clone()), ("prio", n(j.priority))];
                facts.extend(Model::alias_fact(&j));
                ev.push(event("added", Some(id), &facts));
                Ok(Reply::Int(1))
            }
            Call::Schedule { id, when, job } => {
                gate(id)?;
                let j = check_new(job, self.cfg.max_payload, now)?;
                let due = due_of(*when, now)?;
                if self.rows.contains_key(id) || self.alias_live(&j) {
                    return Ok(Reply::Int(0));
                }
                if let Some(r) = self.dedup(&j, id, &|h| h == &id[..], now, ev) {
                    return Ok(r);
                }
                self.create(id, &j, now);
                self.row(id).state = St::Delayed;
                self.delayed.insert(id.clone(), due);
                let mut facts = vec![("due", n(due)), ("name", j.name.clone())];
                facts.extend(Model::alias_fact(&j));
                ev.push(event("delayed", Some(id), &facts));
                Ok(Reply::Int(1))
            }
            Call::Add { jobs } => {
                // Shape first (LIFO beside DELAY), then every id, the count, each job's ranges.
                if jobs.iter().any(|j| j.lifo && j.delay.is_some()) {
                    return Err("EMQSHAPE");
                }
                for j in jobs {
                    gate(&j.id)?;
                }
                if jobs.is_empty() || jobs.len() > ADD_MAX {
                    return Err("EMQARG");
                }
                let mut checked = Vec::new();
                for j in jobs {
                    let c = check_new(&j.job, self.cfg.max_payload, now)?;
                    let due = j.delay.map(|w| due_of(w, now)).transpose()?;
                    checked.push((c, due));
                }
                let mut out = Vec::new();
                let ours: BTreeSet<Vec<u8>> = jobs.iter().map(|j| j.id.clone()).collect();
                // ALIAS is judged before the call writes (a REPLACE deleting a holder does not
                // free its alias for a later job of the call), and against earlier jobs.
                let aliases_before = self.aliases.clone();
                let mut named: BTreeSet<Vec<u8>> = BTreeSet::new();
                // DEDUP ids an earlier job of the call decided: the job holding each.
                let mut held: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
                for (j, (c, due)) in jobs.iter().zip(checked) {
                    let alias_taken =
                        c.alias.as_ref().is_some_and(|k| aliases_before.contains_key(k) || named.contains(k));
                    if self.rows.contains_key(&j.id) || alias_taken {
                        out.push(Reply::Int(0));
                        continue;
                    }
                    if let Some(d) = &c.dedup {
                        if let Some(h) = held.get(&d.id) {
                            // Its EXTEND restarts the TTL, as its own ENQUEUE's would.
                            if let (true, Some(e)) = (d.extend, self.dedups.get_mut(&d.id)) {
                                e.1 = d.ttl.map(|t| now + t);
                            }
                            let mut facts = vec![("dedup", d.id.clone()), ("refused", j.id.clone())];
                            facts.extend(Model::alias_fact(&c));
                            ev.push(event("deduplicated", Some(h), &facts));
                            out.push(Reply::Bulk(h.clone()));
                            continue;
                        }
                        let r = self.dedup(&c, &j.id, &|h| ours.contains(h), now, ev);
                        let holder = match &r {
                            Some(Reply::Bulk(h)) => h.clone(),
                            _ => j.id.clone(),
                        };
                        held.insert(d.id.clone(), holder);
                        if let Some(r) = r {
                            out.push(r);
                            continue;
                        }
                    }
                    self.create(&j.id, &c, now);
                    named.extend(c.alias.clone());
                    match due {
                        None => {
                            self.ready(&j.id, j.lifo);
                            let mut facts = vec![("name", c.name.clone()), ("prio", n(c.priority))];
                            facts.extend(Model::alias_fact(&c));
                            ev.push(event("added", Some(&j.id), &facts));
                        }
                        Some(due) => {
                            self.row(&j.id).state = St::Delayed;
                            self.delayed.insert(j.id.clone(), due);
                            let mut facts = vec![("due", n(due)), ("name", c.name.clone())];
                            facts.extend(Model::alias_fact(&c));
                            ev.push(event("delayed", Some(&j.id), &facts));
                        }
                    }
                    out.push(Reply::Int(1));
                }
                Ok(Reply::Array(out))
            }
            Call::Pause(on) => {
                if self.paused == *on {
                    return Ok(Reply::Int(0));
                }
                self.paused = *on;
                ev.push(event(if *on { "paused" } else { "resumed" }, None, &[]));
                Ok(Reply::Int(1))
            }
            Call::Claim { token, lease, count, row, by } => {
                token_ok(token)?;
                let lease = within(*lease, 1, LEASE_MAX)?;
                let count = within(count.unwrap_or(1), 1, CLAIM_COUNT_MAX)?.min(CLAIM_PER_CALL) as usize;
                let by = by_ok(by)?;
                Ok(self.claim(token, lease, count, *row, by, now, ev))
            }
            Call::Extend { id, token, lease } => {
                gate(id)?;
                token_ok(token)?;
                let lease = within(*lease, 1, LEASE_MAX)?;
                if !self.rows.contains_key(id) {
                    return Err("EMQNOJOB");
                }
                if !self.held(id, token) {
                    return Err("EMQLEASE");
                }
                let deadline = (now + lease).min(TIME_MAX);
                self.active.insert(id.clone(), deadline);
                Ok(Reply::Int(deadline))
            }
            Call::Extends { lease, pairs } => {
                for (id, _) in pairs {
                    gate(id)?;
                }
                let lease = within(*lease, 1, LEASE_MAX)?;
                if pairs.is_empty() || pairs.len() > EXTENDS_PAIRS_MAX {
                    return Err("EMQARG");
                }
                for (_, t) in pairs {
                    token_ok(t)?;
                }
                let deadline = (now + lease).min(TIME_MAX);
                let mut out = Vec::new();
                for (id, t) in pairs {
                    if self.held(id, t) {
                        self.active.insert(id.clone(), deadline);
                        out.push(Reply::Int(deadline));
                    } else {
                        out.push(Reply::Int(0));
                    }
                }
                Ok(Reply::Array(out))
            }
            Call::Complete { id, token, result, keep, age, echo, metrics } => {
                gate(id)?;
                token_ok(token)?;
                self.complete(id, token, result, *keep, *age, *echo, *metrics, true, now, ev)
            }
            Call::CompleteNext { id, token, result, lease, keep, echo, metrics, count, row, by } => {
                // The id gate, then the claim's values, then the finish's.
                gate(id)?;
                token_ok(token)?;
                let lease = within(*lease, 1, LEASE_MAX)?;
                let count = within(count.unwrap_or(1), 1, CLAIM_COUNT_MAX)?.min(CLAIM_PER_CALL) as usize;
                let by = by_ok(by)?;
                let done = self.complete(id, token, result, *keep, None, *echo, *metrics, false, now, ev)?;
                let jobs = self.claim(token, lease, count, *row, by, now, ev);
                if jobs == Reply::Array(vec![]) && self.drained_for_fetch() {
                    ev.push(event("drained", None, &[]));
                }
                Ok(Reply::Array(vec![done, jobs]))
            }
            Call::Promote { id } => {
                gate(id)?;
                let Some(r) = self.rows.get(id) else { return Err("EMQNOJOB") };
                if r.state != St::Delayed {
                    return Err("EMQSTATE");
                }
                self.delayed.remove(id);
                self.ready(id, false);
                ev.push(event("waiting", Some(id), &[("prev", b"delayed".to_vec())]));
                Ok(Reply::Int(1))
            }
            Call::Reschedule { id, when } => {
                gate(id)?;
                let due = due_of(*when, now)?;
                let Some(r) = self.rows.get(id) else { return Err("EMQNOJOB") };
                if r.state != St::Delayed {
                    return Err("EMQSTATE");
                }
                self.delayed.insert(id.clone(), due);
                ev.push(event("delayed", Some(id), &[("due", n(due))]));
                Ok(Reply::Int(due))
            }
            Call::Delay { id, token, when } => {
                gate(id)?;
                token_ok(token)?;
                let due = due_of(*when, now)?;
                if !self.rows.contains_key(id) {
                    return Err("EMQNOJOB");
                }
                if !self.held(id, token) {
                    return Err("EMQLEASE");
                }
                self.active.remove(id);
                self.delayed.insert(id.clone(), due);
                let r = self.row(id);
                r.state = St::Delayed;
                r.token = None;
                ev.push(event("delayed", Some(id), &[("due", n(due))]));
                Ok(Reply::Int(due))
            }
            Call::Fail { id, token, error, keep, age, decision, stack, metrics } => {
                // Shape: FINAL, RETRY and DELAY exclude each other; LIFO only with RETRY.
                if matches!(decision, Decision::Clash | Decision::LifoAlone) {
                    return Err("EMQSHAPE");
                }
                gate(id)?;
                token_ok(token)?;
                if error.len() > self.cfg.max_payload {
                    return Err("EMQARG");
                }
                let soft = keep.is_none();
                let keep = keep_of(*keep, self.cfg.keep_failed)?;
                let age = age_of(*age)?;
                let chosen_due = match decision {
                    Decision::Delay(w) => Some(due_of(*w, now)?),
                    _ => None,
                };
                if stack.as_ref().is_some_and(|s| s.len() > self.cfg.max_payload) {
                    return Err("EMQARG");
                }
                Model::metrics_ok(*metrics)?;
                if !self.rows.contains_key(id) {
                    return Err("EMQNOJOB");
                }
                if !self.held(id, token) {
                    return Err("EMQLEASE");
                }
                let before = self.finished_before(Finished::Failed);
                self.active.remove(id);
                let (made, attempts, backoff) = {
                    let r = self.row(id);
                    r.made += 1;
                    r.error = Some(error.clone());
                    r.token = None;
                    r.stack = stack.clone();
                    (r.made, r.attempts, r.backoff)
                };
                // The caller's RETRY or DELAY wins over attempts and backoff.
                if let Decision::Retry(lifo) = decision {
                    self.ready(id, *lifo);
                    ev.push(event("waiting", Some(id), &[("prev", b"active".to_vec())]));
                    return Ok(Reply::Simple("retry".into()));
                }
                if let Some(due) = chosen_due {
                    self.row(id).state = St::Delayed;
                    self.delayed.insert(id.clone(), due);
                    ev.push(event("delayed", Some(id), &[("due", n(due))]));
                    return Ok(Reply::Simple("delayed".into()));
                }
                if matches!(decision, Decision::Final) || made >= attempts {
                    let mut added = vec![];
                    self.release(id, false);
                    let facts = self.with_alias_if(
                        keep == 0,
                        id,
                        vec![("error", error.clone()), ("attempt", n(made)), ("attempts", n(attempts))],
                    );
                    if keep == 0 {
                        self.drop_row(id);
                    } else {
                        let r = self.row(id);
                        r.state = St::Failed;
                        r.finished = Some(now);
                        self.failed.insert(id.clone(), now);
                        added.push(id.clone());
                    }
                    ev.push(event("failed", Some(id), &facts));
                    self.retire(Finished::Failed, before, added, keep, soft, age, now, ev);
                    self.count_metrics(1, *metrics, now);
                    return Ok(Reply::Simple("failed".into()));
                }
                let d = backoff_delay(backoff, made);
                if d == 0 {
                    self.ready(id, false);
                    ev.push(event("waiting", Some(id), &[("prev", b"active".to_vec())]));
                    Ok(Reply::Simple("retry".into()))
                } else {
                    let due = (now + d).min(TIME_MAX);
                    self.row(id).state = St::Delayed;
                    self.delayed.insert(id.clone(), due);
                    ev.push(event("delayed", Some(id), &[("due", n(due))]));
                    Ok(Reply::Simple("delayed".into()))
                }
            }
            Call::Reprocess { id, from, keep_made, keep_started, keep_progress, lifo } => {
                gate(id)?;
                let Some(r) = self.rows.get(id) else { return Err("EMQNOJOB") };
                let prev = r.state;
                if from.is_some_and(|f| f != prev) {
                    return Err("EMQSTATE");
                }
                match prev {
                    St::Completed => self.completed.remove(id),
                    St::Failed => self.failed.remove(id),
                    _ => return Err("EMQSTATE"),
                };
                let r = self.row(id);
                r.result = None;
                r.error = None;
                r.finished = None;
                r.token = None;
                // KEEPSTARTED and KEEPMADE keep the attempt counters; the last stack stays.
                if !keep_started {
                    r.started = 0;
                }
                if !keep_made {
                    r.made = 0;
                }
                r.stalls = 0;
                // The last claim's time belongs to the attempts just reset.
                r.claimed = None;
                // KEEPPROGRESS shows the last report until the next run reports one.
                if !keep_progress {
                    r.progress = None;
                }
                self.ready(id, *lifo);
                ev.push(event("waiting", Some(id), &[("prev", prev.word().as_bytes().to_vec())]));
                Ok(Reply::Int(1))
            }
            Call::Priority { id, priority, lifo } => {
                gate(id)?;
                let p = within(*priority, 0, PRIORITY_MAX)?;
                let Some(r) = self.rows.get(id) else { return Err("EMQNOJOB") };
                let (state, old) = (r.state, r.priority);
                self.row(id).priority = p;
                // A ready job moves as the new value needs; one that stays keeps its place
                // (wait) or gets its new score (prio); any other state: only the field.
                match (state, p) {
                    (St::Wait, 0) => {}
                    (St::Wait, _) => {
                        self.wait.retain(|w| w != id);
                        self.ready(id, false);
                    }
                    (St::Prio, _) => {
                        self.prio.remove(&(old, id.clone()));
                        self.ready(id, *lifo);
                    }
                    _ => {}
                }
                ev.push(event("priority", Some(id), &[("priority", n(p))]));
                Ok(Reply::Int(1))
            }
            Call::MetricsBack { kind, ms } => {
                let t = &mut self.tallies[*kind];
                let v = t.since.unwrap_or(0) - ms;
                t.since = Some(v);
                Ok(Reply::Int(v))
            }
            Call::MetaStalls(v) => {
                let had = self.meta_stalls.is_some();
                self.meta_stalls = v.clone();
                Ok(Reply::Int(i64::from(if v.is_some() { !had } else { had })))
            }
            Call::Requeue { id, token } => {
                gate(id)?;
                token_ok(token)?;
                if !self.rows.contains_key(id) {
                    return Err("EMQNOJOB");
                }
                if !self.held(id, token) {
                    return Err("EMQLEASE");
                }
                self.active.remove(id);
                self.row(id).token = None;
                self.ready(id, true);
                ev.push(event("waiting", Some(id), &[("prev", b"active".to_vec())]));
                Ok(Reply::Int(1))
            }
            Call::Stalled { max_stalls, count } => {
                // Without MAXSTALLS: the queue's own `max-stalls` when it is an integer
                // 0..=1000, else the config.
                let own = self
                    .meta_stalls
                    .as_ref()
                    .and_then(|v| std::str::from_utf8(v).ok()?.parse::<i64>().ok())
                    .filter(|m| (0..=MAX_STALLS_MAX).contains(m));
                let max_stalls = match max_stalls {
                    Some(m) => within(*m, 0, MAX_STALLS_MAX)?,
                    None => own.unwrap_or(self.cfg.max_stalls),
                };
                let count = within(count.unwrap_or(self.cfg.stalled_batch), 1, STALLED_COUNT_MAX)?
                    .min(RECLAIM_PER_CALL);
                let keep = self.cfg.keep_failed;
                // Leases whose deadline has passed, earliest first.
                let mut expired: Vec<(i64, Vec<u8>)> =
                    self.active.iter().filter(|(_, d)| **d < now).map(|(id, d)| (*d, id.clone())).collect();
                expired.sort();
                expired.truncate(count as usize);
                let before = self.finished_before(Finished::Failed);
                let (mut requeued, mut dead, mut added) = (vec![], vec![], vec![]);
                for (_, id) in expired {
                    self.active.remove(&id);
                    let stalls = {
                        let r = self.row(&id);
                        r.stalls += 1;
                        r.token = None;
                        r.stalls
                    };
                    ev.push(event("stalled", Some(&id), &[("stalls", n(stalls))]));
                    if stalls > max_stalls {
                        let (made, attempts) = {
                            let r = self.row(&id);
                            r.made += 1;
                            r.error = Some(b"stalled".to_vec());
                            r.finished = Some(now);
                            r.state = St::Failed;
                            (r.made, r.attempts)
                        };
                        self.release(&id, false);
                        let facts = self.with_alias_if(
                            keep == 0,
                            &id,
                            vec![
                                ("error", b"stalled".to_vec()),
                                ("attempt", n(made)),
                                ("attempts", n(attempts)),
                            ],
                        );
                        if keep == 0 {
                            self.drop_row(&id);
                        } else {
                            self.failed.insert(id.clone(), now);
                            added.push(id.clone());
                        }
                        ev.push(event("failed", Some(&id), &facts));
                        dead.push(Reply::Bulk(id));
                    } else {
                        self.ready(&id, true);
                        ev.push(event("waiting", Some(&id), &[("prev", b"active".to_vec())]));
                        requeued.push(Reply::Bulk(id));
                    }
                }
                self.retire(Finished::Failed, before, added, keep, true, None, now, ev);
                Ok(Reply::Array(vec![Reply::Array(requeued), Reply::Array(dead)]))
            }
            Call::Progress { id, token, progress, echo } => {
                gate(id)?;
                token_ok(token)?;
                if progress.len() > PROGRESS_MAX {
                    return Err("EMQARG");
                }
                if !self.rows.contains_key(id) {
                    return Err("EMQNOJOB");
                }
                if !self.held(id, token) {
                    return Err("EMQLEASE");
                }
                self.report(id, progress, *echo, ev);
                Ok(Reply::Int(1))
            }
            Call::SetProgress { id, progress, echo } => {
                gate(id)?;
                if progress.len() > PROGRESS_MAX {
                    return Err("EMQARG");
                }
                if !self.rows.contains_key(id) {
                    return Err("EMQNOJOB");
                }
                self.report(id, progress, *echo, ev);
                Ok(Reply::Int(1))
            }
            Call::SetData { id, data } => {
                gate(id)?;
                if data.len() > self.cfg.max_payload {
                    return Err("EMQARG");
                }
                let Some(r) = self.rows.get_mut(id) else { return Err("EMQNOJOB") };
                // Any state, no token, no event: only the data changes.
                r.data = data.clone();
                Ok(Reply::Int(1))
            }
            Call::AddLog { id, line, keep } => {
                gate(id)?;
                if line.len() > self.cfg.max_payload {
                    return Err("EMQARG");
                }
                let keep = within(keep.unwrap_or(self.cfg.log_keep), 1, LOG_KEEP_MAX)?;
                if !self.rows.contains_key(id) {
                    return Err("EMQNOJOB");
                }
                Ok(self.log_line(id, line, keep))
            }
            Call::Log { id, token, line, keep } => {
                gate(id)?;
                token_ok(token)?;
                if line.len() > self.cfg.max_payload {
                    return Err("EMQARG");
                }
                let keep = within(keep.unwrap_or(self.cfg.log_keep), 1, LOG_KEEP_MAX)?;
                if !self.rows.contains_key(id) {
                    return Err("EMQNOJOB");
                }
                if !self.held(id, token) {
                    return Err("EMQLEASE");
                }
                Ok(self.log_line(id, line, keep))
            }
            Call::Remove { id, force } => {
                gate(id)?;
                let Some(r) = self.rows.get(id) else { return Ok(Reply::Int(0)) };
                let prev = r.state;
                if prev == St::Active && !force {
                    return Err("EMQSTATE");
                }
                self.unset(id);
                self.release(id, true);
                let facts = self.with_alias(id, vec![("prev", prev.word().as_bytes().to_vec())]);
                self.drop_row(id);
                ev.push(event("removed", Some(id), &facts));
                Ok(Reply::Int(1))
            }
            Call::Drain { delayed, count } => {
                let count = within(count.unwrap_or(DELETE_COUNT_DEFAULT), 1, DELETE_COUNT_MAX)? as usize;
                let mut doomed: Vec<Vec<u8>> = self.ordered(St::Wait);
                doomed.extend(self.ordered(St::Prio));
                if *delayed {
                    doomed.extend(self.ordered(St::Delayed));
                }
                // A scheduler's pending iteration stays, passed over.
                doomed.retain(|id| !self.scheds.values().any(|sc| sc.job == *id));
                doomed.truncate(count);
                for id in &doomed {
                    self.unset(id);
                    self.release(id, true);
                    self.drop_row(id);
                }
                if !doomed.is_empty() {
                    ev.push(event("cleaned", None, &[("count", n(doomed.len() as i64))]));
                }
                Ok(Reply::Int(doomed.len() as i64))
            }
            Call::Clean { set, grace, count } => {
                let grace = within(*grace, 0, TIME_MAX)?;
                let count = within(count.unwrap_or(DELETE_COUNT_DEFAULT), 1, DELETE_COUNT_MAX)? as usize;
                let cutoff = now - grace;
                let finished = if *set == St::Completed { &self.completed } else { &self.failed };
                let mut old: Vec<(i64, Vec<u8>)> =
                    finished.iter().filter(|(_, f)| **f <= cutoff).map(|(id, f)| (*f, id.clone())).collect();
                old.sort();
                old.truncate(count);
                for (_, id) in &old {
                    self.unset(id);
                    self.release(id, true);
                    self.drop_row(id);
                }
                if !old.is_empty() {
                    ev.push(event("cleaned", None, &[("count", n(old.len() as i64))]));
                }
                Ok(Reply::Array(old.into_iter().map(|(_, id)| Reply::Bulk(id)).collect()))
            }
            Call::Obliterate { force, count } => {
                let mut budget = within(count.unwrap_or(DELETE_COUNT_DEFAULT), 1, DELETE_COUNT_MAX)? as usize;
                if !self.active.is_empty() && !force {
                    return Err("EMQSTATE");
                }
                // The schedulers first, in `scheds` order (time, then id), one key each.
                let mut order: Vec<(i64, Vec<u8>)> =
                    self.scheds.iter().map(|(sid, sc)| (sc.score, sid.clone())).collect();
                order.sort();
                let gone = order.len().min(budget);
                budget -= gone;
                for (_, sid) in order.iter().take(gone) {
                    self.scheds.remove(sid);
                }
                let scheds_left = self.scheds.len();
                // Then the rows, from the sets in this order, at most COUNT.
                let mut doomed = Vec::new();
                for set in [St::Wait, St::Prio, St::Active, St::Delayed, St::Completed, St::Failed] {
                    let ids = self.ordered(set);
                    let take = ids.len().min(budget);
                    budget -= take;
                    doomed.extend(ids.into_iter().take(take));
                }
                for id in &doomed {
                    self.unset(id);
                    self.release(id, true);
                    self.drop_row(id);
                }
                let sets = [St::Wait, St::Prio, St::Active, St::Delayed, St::Completed, St::Failed];
                let jobs_left: usize = sets.iter().map(|s| self.set_len(*s)).sum();
                // Then, once no job is left, the queue's own keys (a set is gone with its
                // last job; meta exists while paused or holding max-stalls; events once one
                // was written; the alias hash while it holds an entry), in that order.
                // Then the METRICS keys: each kind's counter, then its series.
                let mut keys_left = 0;
                let own = |m: &Model| {
                    let counter = |t: &Tallied| t.count.is_some() || t.since.is_some() || t.at.is_some();
                    [
                        m.meta_exists(),
                        m.events_exist,
                        !m.aliases.is_empty(),
                        counter(&m.tallies[0]),
                        !m.tallies[0].series.is_empty(),
                        counter(&m.tallies[1]),
                        !m.tallies[1].series.is_empty(),
                    ]
                };
                if jobs_left == 0 {
                    for (i, exists) in own(self).into_iter().enumerate() {
                        if !exists {
                            continue;
                        }
                        if budget > 0 {
                            budget -= 1;
                            match i {
                                0 => {
                                    self.paused = false;
                                    self.meta_stalls = None;
                                    self.lim = Lim::default();
                                }
                                1 => self.events_exist = false,
                                2 => self.aliases.clear(),
                                3 | 5 => {
                                    let t = &mut self.tallies[(i - 3) / 2];
                                    (t.count, t.since, t.at) = (None, None, None);
                                }
                                _ => self.tallies[(i - 4) / 2].series.clear(),
                            }
                        } else {
                            keys_left += 1;
                        }
                    }
                } else {
                    keys_left = sets.iter().filter(|s| self.set_len(**s) > 0).count()
                        + own(self).into_iter().filter(|e| *e).count();
                }
                Ok(Reply::Int((jobs_left + keys_left + scheds_left) as i64))
            }
            Call::Job { id } => {
                gate(id)?;
                Ok(self.job_view(id))
            }
            Call::Limit(arg) => {
                let l = &mut self.lim;
                let changed = match arg {
                    LimitArg::Rate(max, ms) => {
                        let max = within(*max, 1, LIMIT_MAX)?;
                        let ms = within(*ms, 1, LIMIT_MS_MAX)?;
                        l.rate = Some((max, ms));
                        true
                    }
                    LimitArg::RateOff => {
                        let had = l.rate.is_some();
                        (l.rate, l.count, l.until) = (None, 0, 0);
                        had
                    }
                    LimitArg::Concurrency(n) => {
                        l.conc = Some(within(*n, 1, LIMIT_MAX)?);
                        true
                    }
                    LimitArg::ConcurrencyOff => l.conc.take().is_some(),
                    LimitArg::For(ms) => {
                        l.hold = now + within(*ms, 1, LIMIT_MS_MAX)?;
                        true
                    }
                    LimitArg::Clear => {
                        let had = l.hold != 0 || l.until != 0;
                        (l.hold, l.count, l.until) = (0, 0, 0);
                        had
                    }
                };
                Ok(Reply::Int(i64::from(changed)))
            }
            Call::Limits => {
                let l = &self.lim;
                let opt = |v: Option<i64>| v.map_or(Reply::Nil, Reply::Int);
                let left = |t: i64| if t > now { t - now } else { -2 };
                let win = l.window(now);
                let fields = [
                    ("rate-max", opt(l.rate.map(|r| r.0))),
                    ("rate-ms", opt(l.rate.map(|r| r.1))),
                    ("concurrency", opt(l.conc)),
                    ("count", Reply::Int(win.map_or(0, |w| w.0))),
                    ("window", Reply::Int(win.map_or(-2, |w| left(w.1)))),
                    ("hold", Reply::Int(left(l.hold))),
                    ("ttl", Reply::Int(l.reopen(now).map_or(0, |t| t - now))),
                    ("active", Reply::Int(self.active.len() as i64)),
                ];
                Ok(Reply::Array(
                    fields.into_iter().flat_map(|(k, v)| [Reply::Bulk(k.as_bytes().to_vec()), v]).collect(),
                ))
            }
            Call::Counts => {
                let mut out = Vec::new();
                for set in [St::Wait, St::Prio, St::Active, St::Delayed, St::Completed, St::Failed] {
                    out.extend([
                        Reply::Bulk(set.word().as_bytes().to_vec()),
                        Reply::Int(self.set_len(set) as i64),
                    ]);
                }
                out.extend([Reply::Bulk(b"paused".to_vec()), Reply::Int(i64::from(self.paused))]);
                Ok(Reply::Array(out))
            }
            Call::Completes { triples } => {
                if triples.is_empty() {
                    return Err("EMQSHAPE");
                }
                self.triples_ok(triples)?;
                // Each entry as COMPLETE would answer it; retention as COMPLETE without KEEP.
                let keep = self.cfg.keep_completed;
                let before = self.finished_before(Finished::Completed);
                let (codes, added) = self.finish_each(triples, keep, false, now, ev);
                if codes.contains(&1) {
                    self.retire(Finished::Completed, before, added, keep, true, None, now, ev);
                }
                Ok(Reply::Array(codes.into_iter().map(Reply::Int).collect()))
            }
            Call::CompletesNext { triples, claim, lease, keep, age, echo, metrics, row, by } => {
                // The entries as TRA.COMPLETES checks them, then the claim's values, then the
                // options.
                self.triples_ok(triples)?;
                token_ok(claim)?;
                let lease = within(*lease, 1, LEASE_MAX)?;
                let by = by_ok(by)?;
                let soft = keep.is_none();
                let keep = keep_of(*keep, self.cfg.keep_completed)?;
                let age = age_of(*age)?;
                Model::metrics_ok(*metrics)?;
                // Each entry as TRA.COMPLETES answers it, with COMPLETE's options.
                let before = self.finished_before(Finished::Completed);
                let (codes, added) = self.finish_each(triples, keep, *echo, now, ev);
                if codes.contains(&1) {
                    self.retire(Finished::Completed, before, added, keep, soft, age, now, ev);
                    for _ in codes.iter().filter(|c| **c == 1) {
                        self.count_metrics(0, *metrics, now);
                    }
                }
                let wanted = codes.iter().filter(|c| **c >= 0).count();
                let codes = Reply::Array(codes.into_iter().map(Reply::Int).collect());
                if wanted == 0 {
                    return Ok(Reply::Array(vec![codes, Reply::Array(vec![])]));
                }
                let jobs = self.claim(claim, lease, wanted, *row, by, now, ev);
                if jobs == Reply::Array(vec![]) && self.drained_for_fetch() {
                    ev.push(event("drained", None, &[]));
                }
                Ok(Reply::Array(vec![codes, jobs]))
            }
            Call::Jobs { set, from, count, rev } => {
                let from = within(from.unwrap_or(0), 0, TIME_MAX)?;
                let count = within(count.unwrap_or(100), 1, PAGE_MAX)?;
                let mut ids = self.ordered(*set);
                if *rev {
                    ids.reverse();
                }
                let total = ids.len() as i64;
                let page: Vec<Reply> =
                    ids.into_iter().skip(from as usize).take(count as usize).map(Reply::Bulk).collect();
                let end = from + page.len() as i64;
                let next = if end < total { end } else { -1 };
                Ok(Reply::Array(vec![Reply::Int(next), Reply::Array(page)]))
            }
        }
    }

    /// The entries of TRA.COMPLETES and TRA.COMPLETESNEXT, checked in order: every id (the
    /// gate), their count (1..=50), each token and result, an id given twice.
    fn triples_ok(&self, triples: &[(Vec<u8>, Vec<u8>, Vec<u8>)]) -> Result<(), Refused> {
        for (id, _, _) in triples {
            gate(id)?;
        }
        if triples.is_empty() || triples.len() > COMPLETES_MAX {
            return Err("EMQARG");
        }
        for (_, t, r) in triples {
            token_ok(t)?;
            if r.len() > self.cfg.max_payload {
                return Err("EMQARG");
            }
        }
        let distinct: BTreeSet<&Vec<u8>> = triples.iter().map(|(id, _, _)| id).collect();
        if distinct.len() != triples.len() {
            return Err("EMQARG");
        }
        Ok(())
    }

    /// TRA.COMPLETES' answer for each `(id, token, result)`: 1 completed (its row kept unless
    /// `keep` is 0, its `completed` event with the result under `echo`), 0 a repeat of that
    /// token's finish, -1 not held with that token, -2 no such job. Also the ids kept in
    /// `completed`, for retention.
    fn finish_each(
        &mut self,
        triples: &[(Vec<u8>, Vec<u8>, Vec<u8>)],
        keep: i64,
        echo: bool,
        now: i64,
        ev: &mut Vec<Event>,
    ) -> (Vec<i64>, Vec<Vec<u8>>) {
        let mut codes = Vec::new();
        let mut added = Vec::new();
        for (id, token, result) in triples {
            let Some(r) = self.rows.get(id) else {
                codes.push(-2);
                continue;
            };
            if !self.held(id, token) {
                let repeat = r.state == St::Completed && r.token.as_deref() == Some(&token[..]);
                codes.push(if repeat { 0 } else { -1 });
                continue;
            }
            added.extend(self.complete_held(id, result, keep, echo, now, ev));
            codes.push(1);
        }
        (codes, added)
    }

    /// Completes a job its caller holds: out of `active` and its lease, its row deleted when
    /// `keep` is 0, else in `completed` with its result; its `completed` event (the result
    /// under `echo`). The id when it is kept in `completed`, for retention.
    fn complete_held(
        &mut self,
        id: &Vec<u8>,
        result: &[u8],
        keep: i64,
        echo: bool,
        now: i64,
        ev: &mut Vec<Event>,
    ) -> Option<Vec<u8>> {
        self.active.remove(id);
        let made = self.rows.get(id).map_or(0, |r| r.made) + 1;
        self.release(id, false);
        let mut facts = vec![("attempt", n(made))];
        if echo {
            facts.push(("result", result.to_vec()));
        }
        let facts = self.with_alias_if(keep == 0, id, facts);
        let mut added = None;
        if keep == 0 {
            self.drop_row(id);
        } else {
            let r = self.row(id);
            r.state = St::Completed;
            r.result = Some(result.to_vec());
            r.finished = Some(now);
            r.made = made;
            self.completed.insert(id.clone(), now);
            added = Some(id.clone());
        }
        ev.push(event("completed", Some(id), &facts));
        added
    }

    /// Whether `meta` exists: while paused, holding `max-stalls`, or any limit or window.
    pub fn meta_exists(&self) -> bool {
        self.paused || self.meta_stalls.is_some() || self.lim.stored()
    }

    /// Whether a job met at `now` has expired: its EXPIRE time has come and no CLAIM ever took it.
    pub fn expired(&self, id: &[u8], now: i64) -> bool {
        self.rows.get(id).is_some_and(|r| !r.spent && r.expire.is_some_and(|x| now >= x))
    }

    /// CLAIM's passes: expired jobs do not use up a claim — another pass while the last one
    /// met any, at most CLAIM_PASSES, all of them meeting at most CLAIM_PER_CALL jobs. With
    /// `row` each entry also carries the job as `claimed_view` shows it, after the claim; `by`
    /// is recorded in each row taken.
    #[allow(clippy::too_many_arguments)]
    pub fn claim(
        &mut self,
        token: &[u8],
        lease: i64,
        count: usize,
        row: bool,
        by: Option<&[u8]>,
        now: i64,
        ev: &mut Vec<Event>,
    ) -> Reply {
        let mut out = Vec::new();
        // The queue's limits bound the claim (TRA.LIMIT): the room left in the rate window, none
        // while a FOR holds, the room left under the global concurrency.
        let l = &self.lim;
        let mut count = count;
        if let Some((max, _)) = l.rate {
            let used = l.window(now).map_or(0, |w| w.0);
            count = count.min((max - used).max(0) as usize);
        }
        if l.hold > now {
            count = 0;
        }
        if let Some(c) = l.conc {
            count = count.min((c - self.active.len() as i64).max(0) as usize);
        }
        let (mut want, mut met) = (count, 0usize);
        for pass in 0..CLAIM_PASSES {
            // Only the first pass promotes: one CLAIM promotes at most promote-batch.
            let (got, expired) = self.claim_pass(token, lease, want, by, now, pass == 0, ev);
            met += got.len() + expired;
            out.extend(got);
            want = (count - out.len()).min((CLAIM_PER_CALL as usize).saturating_sub(met));
            if expired == 0 || want == 0 {
                break;
            }
        }
        // A claim that handed out jobs under a rate limit counts them in the window in force,
        // or opens one [now, now+ms).
        if let (Some((_, ms)), false) = (self.lim.rate, out.is_empty()) {
            let k = out.len() as i64;
            match self.lim.window(now) {
                Some((used, _)) => self.lim.count = used + k,
                None => (self.lim.count, self.lim.until) = (k, now + ms),
            }
        }
        if row {
            for entry in &mut out {
                if let Reply::Array(e) = entry {
                    let view = e.first().and_then(|id| {
                        if let Reply::Bulk(id) = id {
                            Some(self.claimed_view(id))
                        } else {
                            None
                        }
                    });
                    e.extend(view);
                }
            }
        }
        Reply::Array(out)
    }

    /// COMPLETE of a held job (the id and token already gated). `drained`: write the
    /// `drained` event when the finish leaves nothing ready or active (COMPLETE does;
    /// TRA.COMPLETENEXT decides after its claim).
    #[allow(clippy::too_many_arguments)]
    pub fn complete(
        &mut self,
        id: &Vec<u8>,
        token: &[u8],
        result: &[u8],
        keep: Option<i64>,
        age: Option<i64>,
        echo: bool,
        metrics: Option<i64>,
        drained: bool,
        now: i64,
        ev: &mut Vec<Event>,
    ) -> Result<Reply, Refused> {
        if result.len() > self.cfg.max_payload {
            return Err("EMQARG");
        }
        let soft = keep.is_none();
        let keep = keep_of(keep, self.cfg.keep_completed)?;
        let age = age_of(age)?;
        Model::metrics_ok(metrics)?;
        let Some(r) = self.rows.get(id) else { return Err("EMQNOJOB") };
        if !self.held(id, token) {
            // The same token repeating a COMPLETE it already made: 0, nothing written.
            if r.state == St::Completed && r.token.as_deref() == Some(token) {
                return Ok(Reply::Int(0));
            }
            return Err("EMQLEASE");
        }
        let before = self.finished_before(Finished::Completed);
        let added = self.complete_held(id, result, keep, echo, now, ev).into_iter().collect();
        if drained && self.drained() {
            ev.push(event("drained", None, &[]));
        }
        self.retire(Finished::Completed, before, added, keep, soft, age, now, ev);
        self.count_metrics(0, metrics, now);
        Ok(Reply::Int(1))
    }

    /// Nothing ready (`wait`, `prio`) and nothing active.
    pub fn drained(&self) -> bool {
        self.wait.is_empty() && self.prio.is_empty() && self.active.is_empty()
    }

    /// The finishes that fetch are drained only when nothing is delayed either: a delayed job
    /// is work to come.
    pub fn drained_for_fetch(&self) -> bool {
        self.drained() && self.delayed.is_empty()
    }

    /// A progress report stored in the row, and its event (with the report under ECHO).
    pub fn report(&mut self, id: &[u8], progress: &[u8], echo: bool, ev: &mut Vec<Event>) {
        self.row(id).progress = Some(progress.to_vec());
        let facts: Vec<(&str, Vec<u8>)> = if echo { vec![("progress", progress.to_vec())] } else { vec![] };
        ev.push(event("progress", Some(id), &facts));
    }

    /// A line appended to the job's log, its newest `keep` kept: the log's length.
    pub fn log_line(&mut self, id: &[u8], line: &[u8], keep: i64) -> Reply {
        let log = self.logs.entry(id.to_vec()).or_default();
        log.push(line.to_vec());
        let over = log.len().saturating_sub(keep as usize);
        log.drain(..over);
        Reply::Int(log.len() as i64)
    }

    /// The row `CLAIM … ROW` hands out: TRA.JOB's pairs without id, name, data and state (the
    /// claim's entry carries them, and a claimed job is active) and without the facts that
    /// are nil or at their defaults (priority 0, attempts 1, made 0, stalls 0).
    pub fn claimed_view(&self, id: &[u8]) -> Reply {
        let Reply::Array(all) = self.job_view(id) else { return Reply::Nil };
        let at_default = |k: &[u8], v: &Reply| {
            matches!(
                (k, v),
                (b"priority" | b"made" | b"stalls", Reply::Int(0)) | (b"attempts", Reply::Int(1))
            )
        };
        let kept = all
            .chunks(2)
            .filter(|p| match p {
                [_, Reply::Nil] => false,
                [Reply::Bulk(k), v] => {
                    ![&b"id"[..], b"name", b"data", b"state"].contains(&k.as_slice()) && !at_default(k, v)
                }
                _ => true,
            })
            .flat_map(|p| p.to_vec());
        Reply::Array(kept.collect())
    }

    /// A job as TRA.JOB shows it (nil without its row).
    pub fn job_view(&self, id: &[u8]) -> Reply {
        let Some(r) = self.rows.get(id) else { return Reply::Nil };
        let int = Reply::Int;
        let opt_int = |v: Option<i64>| v.map_or(Reply::Nil, Reply::Int);
        let opt_bulk = |v: &Option<Vec<u8>>| v.clone().map_or(Reply::Nil, Reply::Bulk);
        let backoff = r.backoff.map_or(Reply::Nil, |b| {
            Reply::Bulk(match b {
                Backoff::Fixed(ms) => format!("FIXED {ms}").into_bytes(),
                Backoff::Exp(ms) => format!("EXP {ms}").into_bytes(),
            })
        });
        let score = |st: St, m: &BTreeMap<Vec<u8>, i64>| {
            if r.state == st {
                opt_int(m.get(id).copied())
            } else {
                Reply::Nil
            }
        };
        let facts = [
            ("id", Reply::Bulk(id.to_vec())),
            ("state", Reply::Bulk(r.state.word().as_bytes().to_vec())),
            ("name", Reply::Bulk(r.name.clone())),
            ("data", Reply::Bulk(r.data.clone())),
            ("opts", Reply::Nil),
            ("priority", int(r.priority)),
            ("attempts", int(r.attempts)),
            ("backoff", backoff),
            ("created", int(r.created)),
            ("started", int(r.started)),
            ("made", int(r.made)),
            ("stalls", int(r.stalls)),
            ("claimed", opt_int(r.claimed)),
            ("deadline", score(St::Active, &self.active)),
            ("due", score(St::Delayed, &self.delayed)),
            ("expire", opt_int(r.expire)),
            ("progress", opt_bulk(&r.progress)),
            ("result", opt_bulk(&r.result)),
            ("error", opt_bulk(&r.error)),
            ("finished", opt_int(r.finished)),
            ("stack", opt_bulk(&r.stack)),
            ("alias", opt_bulk(&r.alias)),
            ("dedup", opt_bulk(&r.dedup)),
            ("scheduler", opt_bulk(&r.made_by.as_ref().map(|m| m.0.clone()))),
            ("iteration", opt_int(r.made_by.as_ref().map(|m| m.1))),
            ("count", opt_int(r.made_by.as_ref().map(|m| m.2))),
            ("worker", opt_bulk(&r.worker)),
        ];
        Reply::Array(facts.into_iter().flat_map(|(k, v)| [Reply::Bulk(k.as_bytes().to_vec()), v]).collect())
    }

    /// One pass of CLAIM: due delayed jobs first (earliest due first, at most
    /// `promote-batch`), each ready at the back — or, expired, failed instead; then, unless
    /// paused, up to `want` ready jobs in serving order, the expired among them failed instead
    /// of handed out. Events: the promotions' `waiting`, then the expired jobs' `failed` (the
    /// promoted ones first, then those met in the ready sets), then the claims' `active`.
    /// Returns the reply rows and how many jobs expired.
    #[allow(clippy::too_many_arguments)]
    pub fn claim_pass(
        &mut self,
        token: &[u8],
        lease: i64,
        want: usize,
        by: Option<&[u8]>,
        now: i64,
        promote: bool,
        ev: &mut Vec<Event>,
    ) -> (Vec<Reply>, usize) {
        let mut due: Vec<(i64, Vec<u8>)> =
            self.delayed.iter().filter(|(_, d)| **d <= now).map(|(id, d)| (*d, id.clone())).collect();
        due.sort();
        due.truncate(if promote { self.cfg.promote_batch as usize } else { 0 });
        let mut expired = Vec::new();
        for (_, id) in due {
            self.delayed.remove(&id);
            if self.expired(&id, now) {
                expired.push(id);
            } else {
                self.ready(&id, false);
                ev.push(event("waiting", Some(&id), &[("prev", b"delayed".to_vec())]));
            }
        }
        let mut picked = Vec::new();
        if !self.paused {
            for _ in 0..want {
                let id = if let Some(id) = self.wait.pop_front() {
                    id
                } else if let Some((p, id)) = self.prio.iter().next().cloned() {
                    self.prio.remove(&(p, id.clone()));
                    id
                } else {
                    break;
                };
                if self.expired(&id, now) {
                    expired.push(id);
                } else {
                    picked.push(id);
                }
            }
        }
        if !expired.is_empty() {
            // Failed for good with `expired`, under keep-failed (a soft cap; 0 deletes them).
            let keep = self.cfg.keep_failed;
            let before = self.finished_before(Finished::Failed);
            let mut added = Vec::new();
            for id in &expired {
                let (made, attempts) = {
                    let r = self.row(id);
                    r.state = St::Failed;
                    r.error = Some(b"expired".to_vec());
                    r.finished = Some(now);
                    r.token = None;
                    (r.made, r.attempts)
                };
                self.release(id, false);
                let facts = self.with_alias_if(
                    keep == 0,
                    id,
                    vec![("error", b"expired".to_vec()), ("attempt", n(made)), ("attempts", n(attempts))],
                );
                if keep == 0 {
                    self.drop_row(id);
                } else {
                    self.failed.insert(id.clone(), now);
                    added.push(id.clone());
                }
                ev.push(event("failed", Some(id), &facts));
            }
            self.retire(Finished::Failed, before, added, keep, true, None, now, ev);
        }
        let mut out = Vec::new();
        let taken_ids = picked.clone();
        for id in picked {
            let r = self.row(&id);
            r.state = St::Active;
            r.token = Some(token.to_vec());
            r.started += 1;
            r.claimed = Some(now);
            r.spent = true;
            // The CLAIM deletes `x` from the row: EXPIRE is spent.
            r.expire = None;
            if let Some(w) = by {
                r.worker = Some(w.to_vec());
            }
            let attempt = r.made + 1;
            let (name, data) = (r.name.clone(), r.data.clone());
            self.active.insert(id.clone(), (now + lease).min(TIME_MAX));
            self.last_token.insert(id.clone(), token.to_vec());
            ev.push(event("active", Some(&id), &[("attempt", n(attempt))]));
            out.push(Reply::Array(vec![
                Reply::Bulk(id),
                Reply::Bulk(name),
                Reply::Bulk(data),
                Reply::Int(attempt),
            ]));
        }
        for id in &taken_ids {
            self.succeed(id, now, ev);
        }
        (out, expired.len())
    }

    /// A job taken that its scheduler names as pending: the next iteration, at the scheduler's
    /// next time not yet made (past already when upkeep is off: delayed all the same), past
    /// times whose custom id a live job holds (8 tries); without one (LIMIT, no free id) the
    /// scheduler ends. Its next time is then the one after it.
    pub fn succeed(&mut self, id: &[u8], now: i64, ev: &mut Vec<Event>) {
        let Some((sid, _, _)) = self.rows.get(id).and_then(|r| r.made_by.clone()) else { return };
        let Some(sc) = self.scheds.get(&sid).cloned() else { return };
        if sc.job != id {
            return;
        }
        let alias_of = |at: i64| format!("repeat:{}:{at}", String::from_utf8_lossy(&sid)).into_bytes();
        let mut at = sc.score;
        let mut free = sc.limit.is_none_or(|l| sc.count < l);
        let mut tries = 0;
        while free && self.aliases.contains_key(&alias_of(at)) {
            tries += 1;
            if tries == 8 {
                free = false;
            }
            at = every_after(at, sc.every, sc.offset, now);
        }
        let jid = if free {
            (0..8u64).map(|p| iteration_id(&sid, at, p)).find(|i| !self.rows.contains_key(i))
        } else {
            None
        };
        let Some(jid) = jid else {
            self.scheds.remove(&sid);
            return;
        };
        self.make_iteration((&sid, at), &jid, (&sc.name, &sc.data), sc.count + 1, now, ev);
        let score = every_after(at, sc.every, sc.offset, now);
        self.scheds.insert(sid, Sched { count: sc.count + 1, next: at, job: jid, score, ..sc });
    }

    /// Scheduler `sid`'s iteration number `round` at `at`, as job `id` in `delayed`: its
    /// template's name and data, its custom id `repeat:<sid>:<at>`, one `delayed` event.
    fn make_iteration(
        &mut self,
        (sid, at): (&[u8], i64),
        id: &[u8],
        (name, data): (&Vec<u8>, &Vec<u8>),
        round: i64,
        now: i64,
        ev: &mut Vec<Event>,
    ) {
        let alias = format!("repeat:{}:{at}", String::from_utf8_lossy(sid)).into_bytes();
        let j = Checked {
            name: name.clone(),
            data: data.clone(),
            priority: 0,
            attempts: 1,
            backoff: None,
            expire: None,
            alias: Some(alias.clone()),
            dedup: None,
        };
        self.create(id, &j, now);
        self.row(id).state = St::Delayed;
        self.row(id).made_by = Some((sid.to_vec(), at, round));
        self.delayed.insert(id.to_vec(), at);
        ev.push(event("delayed", Some(id), &[("due", n(at)), ("name", name.clone()), ("alias", alias)]));
    }

    pub fn create(&mut self, id: &[u8], j: &Checked, now: i64) {
        self.rows.insert(
            id.to_vec(),
            Row {
                state: St::Wait,
                name: j.name.clone(),
                data: j.data.clone(),
                priority: j.priority,
                attempts: j.attempts,
                backoff: j.backoff,
                created: now,
                token: None,
                started: 0,
                made: 0,
                stalls: 0,
                claimed: None,
                result: None,
                error: None,
                finished: None,
                progress: None,
                expire: j.expire,
                stack: None,
                spent: false,
                alias: j.alias.clone(),
                dedup: j.dedup.as_ref().map(|d| d.id.clone()),
                made_by: None,
                worker: None,
            },
        );
        if let Some(k) = &j.alias {
            self.aliases.insert(k.clone(), id.to_vec());
        }
    }

    /// The job's ALIAS names a live job: a producer creates nothing.
    pub fn alias_live(&self, j: &Checked) -> bool {
        j.alias.as_ref().is_some_and(|k| self.aliases.contains_key(k))
    }

    /// The facts `alias` adds to an event, when the job has one.
    pub fn alias_fact(j: &Checked) -> Vec<(&'static str, Vec<u8>)> {
        j.alias.iter().map(|k| ("alias", k.clone())).collect()
    }

    /// `facts`, then `alias` when the row of `id` has one: a removal's event, read before the
    /// row goes.
    pub fn with_alias(
        &self,
        id: &[u8],
        mut facts: Vec<(&'static str, Vec<u8>)>,
    ) -> Vec<(&'static str, Vec<u8>)> {
        facts.extend(self.rows.get(id).and_then(|r| r.alias.clone()).map(|k| ("alias", k)));
        facts
    }

    /// A finish's event: `alias` only when the finish deletes the row at once (`gone`).
    pub fn with_alias_if(
        &self,
        gone: bool,
        id: &[u8],
        facts: Vec<(&'static str, Vec<u8>)>,
    ) -> Vec<(&'static str, Vec<u8>)> {
        if gone {
            self.with_alias(id, facts)
        } else {
            facts
        }
    }

    pub fn view(&self) -> View {
        let zset = |m: &BTreeMap<Vec<u8>, i64>| {
            let mut v: Vec<(i64, Vec<u8>)> = m.iter().map(|(id, s)| (*s, id.clone())).collect();
            v.sort();
            v.into_iter().map(|(s, id)| (id, s)).collect::<Vec<_>>()
        };
        View {
            wait: self.wait.iter().cloned().collect(),
            prio: self.prio.iter().map(|(p, id)| (id.clone(), *p)).collect(),
            active: zset(&self.active),
            delayed: zset(&self.delayed),
            completed: zset(&self.completed),
            failed: zset(&self.failed),
            paused: self.paused,
            rows: self
                .rows
                .iter()
                .map(|(id, r)| {
                    (
                        id.clone(),
                        RowView {
                            st: r.state.word().as_bytes().to_vec(),
                            name: r.name.clone(),
                            data: r.data.clone(),
                            priority: r.priority,
                            attempts: r.attempts,
                            created: r.created,
                            token: r.token.clone(),
                            started: r.started,
                            made: r.made,
                            stalls: r.stalls,
                            claimed: r.claimed,
                            result: r.result.clone(),
                            error: r.error.clone(),
                            finished: r.finished,
                            progress: r.progress.clone(),
                            expire: r.expire,
                            stack: r.stack.clone(),
                            alias: r.alias.clone(),
                            dedup: r.dedup.clone(),
                            worker: r.worker.clone(),
                        },
                    )
                })
                .collect(),
            logs: self
                .logs
                .iter()
                .filter(|(_, l)| !l.is_empty())
                .map(|(id, l)| (id.clone(), l.clone()))
                .collect(),
            meta_exists: self.meta_exists(),
            events_exist: self.events_exist,
            aliases: self.aliases.clone(),
            dedups: self.dedups.clone(),
            limit_times: (self.lim.hold, self.lim.count, self.lim.until),
            tallies: self.tallies.clone(),
        }
    }
}
