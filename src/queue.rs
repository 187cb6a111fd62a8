//! The queue's shared mechanics, in the wire's terms: the job row and its fields, the states,
//! making a job ready, the holder's lease, events, and retention of finished jobs. Verbs
//! compose these, opening each key by its role.

use valkey_module::raw::RedisModuleString;

use crate::config;
use crate::domain::{self, args::Options, Backoff, Keep};
use crate::errors::{self, Refusal};
use crate::host::{Access, ArgStr, Exec, Key, Kind, Lit, Str};
use crate::keyspace::Role;
use crate::metrics;

/// The job row's fields. Short names: a row is most of a waiting job's memory. A field at
/// its default is not stored.
pub mod field {
    use crate::host::Lit;
    macro_rules! fields {
        ($($(#[$doc:meta])* $name:ident = $text:literal;)*) => {
            $($(#[$doc])* pub static $name: Lit = Lit::new($text);)*
        };
    }
    fields! {
        /// The state set that holds the job: wait, prio, active, delayed, completed, failed.
        STATE = c"st";
        NAME = c"n";
        DATA = c"d";
        /// Priority, when not 0.
        PRIORITY = c"p";
        /// Max attempts, when not 1.
        ATTEMPTS = c"a";
        /// Backoff, `f<ms>` or `e<ms>`, when given.
        BACKOFF = c"b";
        /// The client's opaque OPTS blob, when given.
        OPTS = c"o";
        /// Creation time, ms.
        CREATED = c"c";
        /// The token of the current holder, or of the holder that completed the job.
        TOKEN = c"tk";
        /// Attempts started (claims).
        STARTED = c"as";
        /// Attempts made (finished by COMPLETE, FAIL or a final stall).
        MADE = c"am";
        /// Stalls: leases STALLED took back.
        STALLS = c"sc";
        /// Time of the last claim, ms.
        CLAIMED = c"ca";
        RESULT = c"r";
        /// The last error.
        ERROR = c"e";
        /// Finish time, ms.
        FINISHED = c"f";
        /// The holder's last progress report (TRA.PROGRESS), opaque.
        PROGRESS = c"g";
        /// The time the job expires if no CLAIM has taken it (EXPIRE), ms; deleted by the CLAIM
        /// that takes it in time.
        EXPIRE = c"x";
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Wait,
    Prio,
    Active,
    Delayed,
    Completed,
    Failed,
}

impl State {
    pub const fn word(self) -> &'static str {
        match self {
            State::Wait => "wait",
            State::Prio => "prio",
            State::Active => "active",
            State::Delayed => "delayed",
            State::Completed => "completed",
            State::Failed => "failed",
        }
    }

    /// The state's word as a constant server string.
    pub fn lit(self) -> &'static Lit {
        static WORDS: [Lit; 6] = [
            Lit::new(c"wait"),
            Lit::new(c"prio"),
            Lit::new(c"active"),
            Lit::new(c"delayed"),
            Lit::new(c"completed"),
            Lit::new(c"failed"),
        ];
        &WORDS[self as usize]
    }

    pub fn of(b: &[u8]) -> Option<State> {
        [State::Wait, State::Prio, State::Active, State::Delayed, State::Completed, State::Failed]
            .into_iter()
            .find(|s| s.word().as_bytes() == b)
    }
}

/// Reads of a job row.
pub struct Row<'k>(pub &'k Key);

impl Row<'_> {
    pub fn get(&self, f: &Lit) -> Option<Str> {
        self.0.hget(f)
    }

    pub fn int(&self, f: &Lit, default: i64) -> i64 {
        self.get(f).and_then(|s| domain::args::int(s.bytes())).unwrap_or(default)
    }

    pub fn state(&self) -> Option<State> {
        self.get(&field::STATE).and_then(|s| State::of(s.bytes()))
    }

    pub fn priority(&self) -> i64 {
        self.int(&field::PRIORITY, 0)
    }

    /// Held: in active, and the row carries this token.
    pub fn held_by(&self, token: &[u8]) -> bool {
        let [st, tk, ..] = self.0.hget_many(&[&field::STATE, &field::TOKEN]);
        st.and_then(|s| State::of(s.bytes())) == Some(State::Active) && tk.is_some_and(|t| t.bytes() == token)
    }

    /// Completed by this token: the same COMPLETE repeated after a lost reply (answered 0).
    pub fn completed_by(&self, token: &[u8]) -> bool {
        self.state() == Some(State::Completed) && self.get(&field::TOKEN).is_some_and(|t| t.bytes() == token)
    }

    pub fn backoff(&self) -> Option<Backoff> {
        self.get(&field::BACKOFF).and_then(|s| domain::backoff_decode(s.bytes()))
    }
}

/// A job found in a set (not named by the caller), its row opened as the caller before
/// anything is written.
pub struct Found {
    pub id: Str,
    pub row: Key,
    /// The row is missing: the id is dropped from its set and counted, never a refusal.
    pub orphan: bool,
    /// Read only when asked for (a promoted job goes where its priority says; a job taken
    /// from a ready set needs none): 0 otherwise.
    pub priority: i64,
    /// Past its EXPIRE time: never promoted nor handed out, failed with `expired` instead.
    pub expired: bool,
    /// It has an EXPIRE time (which a CLAIM in time spends).
    pub expires: bool,
}

impl Found {
    pub fn open(x: &mut Exec, id: Str, with_priority: bool) -> Result<Found, Refusal> {
        let row = x.open_undeclared(Role::Job, id.bytes(), Access::Update)?;
        let orphan = !row.exists_as(Kind::Hash)?;
        let int = |v: Option<Str>| v.and_then(|v| domain::args::int(v.bytes()));
        let (priority, expire) = if orphan {
            (0, None)
        } else if with_priority {
            let [p, e, ..] = row.hget_many(&[&field::PRIORITY, &field::EXPIRE]);
            (int(p).unwrap_or(0), int(e))
        } else {
            (0, int(Row(&row).get(&field::EXPIRE)))
        };
        let expired = domain::expired(expire, x.now());
        Ok(Found { id, row, orphan, priority, expired, expires: expire.is_some() })
    }

    /// Neither orphan nor expired: a job to promote or hand out.
    pub fn live(&self) -> bool {
        !self.orphan && !self.expired
    }
}

/// Jobs a call found past their EXPIRE time, failed for good with error `expired` (under
/// `keep-failed`) instead of being promoted or handed out. Planned before anything is
/// written: the failed set (found, not declared, by CLAIM: opened as the caller), the
/// retention the failures cause, the logs of rows deleted at once.
pub struct Expiry<'f> {
    jobs: Vec<&'f Found>,
    plan: Option<ExpiryPlan>,
}

struct ExpiryPlan {
    failed: Key,
    retire: Retire,
    keep: Keep,
    /// Per job: deleted at once (keep-failed 0, or beyond the cap), with its log.
    at_once: Vec<Option<Option<Key>>>,
}

impl<'f> Expiry<'f> {
    pub fn plan(x: &mut Exec, jobs: Vec<&'f Found>) -> Result<Expiry<'f>, Refusal> {
        if jobs.is_empty() {
            return Ok(Expiry { jobs, plan: None });
        }
        let keep = keep_for(None, &config::KEEP_FAILED)?;
        let failed = x.open_undeclared(Role::Failed, b"", Access::Update)?;
        failed.exists_as(Kind::ZSet)?;
        let adding = if keep == Keep::None { 0 } else { jobs.len() as u64 };
        let retire = Retire::plan(x, &failed, adding, x.now(), keep, None)?;
        let ids: Vec<Option<&[u8]>> = jobs.iter().map(|j| Some(j.id.bytes())).collect();
        let gone = domain::gone_at_once(&ids, retire.drop_new, keep == Keep::None);
        let mut at_once = Vec::with_capacity(jobs.len());
        for (job, gone) in jobs.iter().zip(gone) {
            at_once.push(if gone { Some(log_of(x, job.id.bytes())?) } else { None });
        }
        Ok(Expiry { jobs, plan: Some(ExpiryPlan { failed, retire, keep, at_once }) })
    }

    /// Each job, already out of the set it waited in: failed, its `failed` event. Returns how
    /// many.
    pub fn apply(self, x: &Exec, events: &Events) -> Result<u64, Refusal> {
        let Some(p) = self.plan else { return Ok(0) };
        for (job, at_once) in self.jobs.iter().zip(p.at_once) {
            let made = Row(&job.row).int(&field::MADE, 0);
            let (keep, log) = match at_once {
                Some(log) => (Keep::None, log),
                None => (p.keep, None),
            };
            finish(
                x,
                &job.row,
                &p.failed,
                &job.id,
                State::Failed,
                keep,
                &[(&field::ERROR, word::EXPIRED.get())],
                log,
            )?;
            events.emit(
                x,
                Some(job.id.ptr()),
                Event::Failed { error: word::EXPIRED.get(), attempt: made },
            )?;
        }
        p.retire.apply(&p.failed);
        let n = self.jobs.len() as u64;
        metrics::add(&metrics::EXPIRED, n);
        Ok(n)
    }
}

/// The delayed jobs due now, earliest due first, at most a batch: read and checked first,
/// written by `apply`. CLAIM promotes before it takes; upkeep promotes on its timer.
pub struct Promotion {
    pub jobs: Vec<Found>,
}

impl Promotion {
    /// The due jobs that expired first: the caller fails them (`Expiry`).
    pub fn expired(&self) -> impl Iterator<Item = &Found> {
        self.jobs.iter().filter(|j| j.expired && !j.orphan)
    }

    pub fn read(x: &mut Exec, delayed: &Key, now: i64, batch: usize) -> Result<Promotion, Refusal> {
        let due = delayed.zrange(f64::NEG_INFINITY, now as f64, batch);
        let mut jobs = Vec::with_capacity(due.len());
        for (id, _) in due {
            jobs.push(Found::open(x, id, true)?);
        }
        Ok(Promotion { jobs })
    }

    /// Each job out of delayed and ready by its priority (which wakes a waiting claimer),
    /// its row's state set, one `waiting` event (`prev delayed`); an orphan id is dropped and
    /// counted. Returns how many were promoted.
    pub fn apply(&self, x: &Exec, ready: &Ready, delayed: &Key, events: &Events) -> Result<u64, Refusal> {
        let due: Vec<_> = self.jobs.iter().map(|p| p.id.ptr()).collect();
        delayed.zrem_many(&due);
        let mut promoted = 0u64;
        for p in &self.jobs {
            if p.orphan {
                metrics::add(&metrics::ORPHANS, 1);
                continue;
            }
            if p.expired {
                // Failed by the caller's `Expiry`, not promoted.
                continue;
            }
            let state = ready.put(p.id.ptr(), p.priority, false)?;
            p.row.hset(&[(&field::STATE, state.lit().get())])?;
            events.emit(x, Some(p.id.ptr()), Event::Waiting { prev: State::Delayed })?;
            promoted += 1;
        }
        metrics::add(&metrics::PROMOTED, promoted);
        Ok(promoted)
    }
}

/// Fields and values of one row write.
type Pairs<'l> = smallvec::SmallVec<[(&'l Lit, *mut RedisModuleString); 8]>;

/// A new job as ENQUEUE and SCHEDULE take it, range-checked.
pub struct NewJob<'a> {
    pub name: ArgStr<'a>,
    pub data: ArgStr<'a>,
    pub priority: i64,
    pub attempts: i64,
    pub backoff: Option<Backoff>,
    pub opts: Option<ArgStr<'a>>,
    /// EXPIRE, as an absolute time.
    pub expire: Option<i64>,
}

impl<'a> NewJob<'a> {
    pub fn check(
        name: ArgStr<'a>,
        data: ArgStr<'a>,
        o: &Options<ArgStr<'a>>,
        now: i64,
    ) -> Result<NewJob<'a>, Refusal> {
        domain::bytes_len(&name, 1, domain::NAME_MAX, "name")?;
        let max = config::max_payload();
        domain::payload(&data, max, "data")?;
        if let Some(opts) = o.opts {
            domain::payload(&opts, max, "OPTS")?;
        }
        Ok(NewJob {
            name,
            data,
            priority: domain::range(o.priority.unwrap_or(0), 0, domain::PRIORITY_MAX, "PRIORITY")?,
            attempts: domain::range(o.attempts.unwrap_or(1), 1, domain::ATTEMPTS_MAX, "ATTEMPTS")?,
            backoff: o.backoff.map(domain::backoff).transpose()?,
            opts: o.opts,
            expire: o.expire.map(|w| domain::expiry(w, now)).transpose()?,
        })
    }

    /// Write the row: its state and the immutable fields. The name, data and OPTS go in as
    /// the server strings they arrived in, uncopied.
    pub fn create(&self, x: &Exec, row: &Key, state: State, now: i64) -> Result<(), Refusal> {
        let (name, data) = (self.name.ptr(), self.data.ptr());
        if name.is_null() || data.is_null() || self.opts.is_some_and(|o| o.ptr().is_null()) {
            return Err(errors::host_reply());
        }
        let created = x.int(now)?;
        let prio = (self.priority != 0).then(|| x.int(self.priority)).transpose()?;
        let attempts = (self.attempts != 1).then(|| x.int(self.attempts)).transpose()?;
        let backoff = self.backoff.map(|b| x.string(domain::backoff_encode(b).as_bytes())).transpose()?;
        let mut pairs: Pairs = smallvec::smallvec![
            (&field::STATE, state.lit().get()),
            (&field::NAME, name),
            (&field::DATA, data),
            (&field::CREATED, created.ptr())
        ];
        pairs.extend(prio.as_ref().map(|v| (&field::PRIORITY, v.ptr())));
        pairs.extend(attempts.as_ref().map(|v| (&field::ATTEMPTS, v.ptr())));
        pairs.extend(backoff.as_ref().map(|v| (&field::BACKOFF, v.ptr())));
        pairs.extend(self.opts.map(|v| (&field::OPTS, v.ptr())));
        let expire = self.expire.map(|t| x.int(t)).transpose()?;
        pairs.extend(expire.as_ref().map(|v| (&field::EXPIRE, v.ptr())));
        row.hset(&pairs)?;
        if let Some(at) = self.expire {
            expiring(x, at);
        }
        Ok(())
    }
}

/// The two ready sets of a queue, type-checked.
pub struct Ready {
    pub wait: Key,
    pub prio: Key,
}

impl Ready {
    /// The call's declared `wait` and `prio`.
    pub fn open(x: &Exec) -> Result<Ready, Refusal> {
        Ok(Ready { wait: x.open_as(Role::Wait, Kind::List)?, prio: x.open_as(Role::Prio, Kind::ZSet)? })
    }

    /// Make a job ready by its priority: wait (at the back, or the front for requeues and
    /// LIFO) for priority 0, else prio (priority, then id), and wake a claimer waiting on
    /// that set. Returns the state the job now has.
    pub fn put(&self, id: *mut RedisModuleString, priority: i64, front: bool) -> Result<State, Refusal> {
        if priority == 0 {
            if front {
                self.wait.rpush(id)?;
            } else {
                self.wait.lpush(id)?;
            }
            self.wait.signal_ready();
            Ok(State::Wait)
        } else {
            self.prio.zadd(priority, id)?;
            self.prio.signal_ready();
            Ok(State::Prio)
        }
    }
}

/// The queue's events stream: `event <name> id <ID>` plus facts, capped with `MAXLEN ~`.
pub struct Events {
    /// Not even opened while events are off.
    key: Option<Key>,
    cap: i64,
}

/// One transition's event: its name and its facts (the reference page's events table).
pub enum Event {
    /// `name` is the call's own argument string: no copy.
    Added {
        name: *mut RedisModuleString,
        prio: i64,
    },
    Delayed {
        due: i64,
    },
    Waiting {
        prev: State,
    },
    Active {
        attempt: i64,
    },
    Completed {
        attempt: i64,
    },
    Failed {
        error: *mut RedisModuleString,
        attempt: i64,
    },
    Stalled {
        stalls: i64,
    },
    Paused,
    Resumed,
    /// The holder reported progress (no facts: the report is in the row).
    Progress,
    /// TRA.DRAIN or TRA.CLEAN deleted `count` jobs (no id).
    Cleaned {
        count: i64,
    },
    /// TRA.REMOVE deleted the job; `prev` the state it was in.
    Removed {
        prev: State,
    },
}

mod word {
    use crate::host::Lit;
    pub static EVENT: Lit = Lit::new(c"event");
    pub static ID: Lit = Lit::new(c"id");
    pub static ADDED: Lit = Lit::new(c"added");
    pub static DELAYED: Lit = Lit::new(c"delayed");
    pub static WAITING: Lit = Lit::new(c"waiting");
    pub static ACTIVE: Lit = Lit::new(c"active");
    pub static COMPLETED: Lit = Lit::new(c"completed");
    pub static FAILED: Lit = Lit::new(c"failed");
    pub static STALLED: Lit = Lit::new(c"stalled");
    pub static EXPIRED: Lit = Lit::new(c"expired");
    pub static PAUSED: Lit = Lit::new(c"paused");
    pub static RESUMED: Lit = Lit::new(c"resumed");
    pub static REMOVED: Lit = Lit::new(c"removed");
    pub static PROGRESS: Lit = Lit::new(c"progress");
    pub static CLEANED: Lit = Lit::new(c"cleaned");
    pub static COUNT: Lit = Lit::new(c"count");
    pub static NAME: Lit = Lit::new(c"name");
    pub static PRIO: Lit = Lit::new(c"prio");
    pub static DUE: Lit = Lit::new(c"due");
    pub static PREV: Lit = Lit::new(c"prev");
    pub static ATTEMPT: Lit = Lit::new(c"attempt");
    pub static ERROR: Lit = Lit::new(c"error");
    pub static STALLS: Lit = Lit::new(c"stalls");
    pub static ZERO: Lit = Lit::new(c"0");
}

enum Val {
    Lit(&'static Lit),
    Str(*mut RedisModuleString),
    Int(i64),
}

impl Events {
    /// The call's declared events stream.
    pub fn open(x: &Exec) -> Result<Events, Refusal> {
        let cap = config::get(&config::EVENTS_MAXLEN);
        let key = if cap > 0 { Some(x.open_as(Role::Events, Kind::Stream)?) } else { None };
        Ok(Events { key, cap })
    }

    /// Append `e` for job `id` (no id for queue-wide events), then trim to the cap.
    pub fn emit(&self, x: &Exec, id: Option<*mut RedisModuleString>, e: Event) -> Result<(), Refusal> {
        let Some(key) = &self.key else { return Ok(()) };
        let (name, facts): (&Lit, [Option<(&Lit, Val)>; 2]) = match e {
            Event::Added { name, prio } => {
                (&word::ADDED, [Some((&word::NAME, Val::Str(name))), Some((&word::PRIO, Val::Int(prio)))])
            }
            Event::Delayed { due } => (&word::DELAYED, [Some((&word::DUE, Val::Int(due))), None]),
            Event::Waiting { prev } => (&word::WAITING, [Some((&word::PREV, Val::Lit(prev.lit()))), None]),
            Event::Active { attempt } => (&word::ACTIVE, [Some((&word::ATTEMPT, Val::Int(attempt))), None]),
            Event::Completed { attempt } => {
                (&word::COMPLETED, [Some((&word::ATTEMPT, Val::Int(attempt))), None])
            }
            Event::Failed { error, attempt } => (
                &word::FAILED,
                [Some((&word::ERROR, Val::Str(error))), Some((&word::ATTEMPT, Val::Int(attempt)))],
            ),
            Event::Stalled { stalls } => (&word::STALLED, [Some((&word::STALLS, Val::Int(stalls))), None]),
            Event::Paused => (&word::PAUSED, [None, None]),
            Event::Progress => (&word::PROGRESS, [None, None]),
            Event::Cleaned { count } => (&word::CLEANED, [Some((&word::COUNT, Val::Int(count))), None]),
            Event::Removed { prev } => (&word::REMOVED, [Some((&word::PREV, Val::Lit(prev.lit()))), None]),
            Event::Resumed => (&word::RESUMED, [None, None]),
        };
        let mut own: [Option<Str>; 2] = [None, None];
        let mut argv: [*mut RedisModuleString; 8] = [std::ptr::null_mut(); 8];
        let mut n = 0;
        let mut push = |p: *mut RedisModuleString| {
            if let Some(slot) = argv.get_mut(n) {
                *slot = p;
                n += 1;
            }
        };
        push(word::EVENT.get());
        push(name.get());
        if let Some(id) = id {
            push(word::ID.get());
            push(id);
        }
        for (fact, slot) in facts.into_iter().zip(own.iter_mut()) {
            let Some((k, v)) = fact else { continue };
            push(k.get());
            let p = match v {
                Val::Lit(l) => l.get(),
                Val::Str(p) => p,
                Val::Int(0) => word::ZERO.get(),
                Val::Int(i) => slot.insert(x.int(i)?).ptr(),
            };
            push(p);
        }
        let fields = argv.get(..n).unwrap_or(&[]);
        if fields.iter().any(|p| p.is_null()) {
            return Err(errors::host_reply());
        }
        key.xadd_quiet(fields)?;
        key.xtrim_approx(self.cap)
    }
}

/// Retention of a finished set, decided and ACL-checked before anything is written and
/// carried out after: the oldest entries beyond `keep`, and with `age` those finished
/// before now−age, at most `trafikey.retention-batch` in one call.
pub struct Retire {
    ids: Vec<Str>,
    rows: Vec<Key>,
    /// How many of the jobs being added are themselves beyond the cap (only when one call
    /// finishes more jobs than the cap keeps): the oldest of them — with one finish time,
    /// the lowest ids — are deleted at once instead of entering the set.
    pub drop_new: u64,
}

impl Retire {
    /// Plan for `set` as it will be once `adding` more jobs (finished now, so the newest)
    /// are in it: entries already there are retired oldest first, then, if the cap is below
    /// `adding`, `drop_new` of the jobs being added.
    pub fn plan(
        x: &mut Exec,
        set: &Key,
        adding: u64,
        now: i64,
        keep: Keep,
        age: Option<i64>,
    ) -> Result<Retire, Refusal> {
        let batch = u64::try_from(config::get(&config::RETENTION_BATCH)).unwrap_or(0);
        let by_count = domain::trim_count(set.len().saturating_add(adding), keep, batch);
        let cutoff = age.map(|a| now.saturating_sub(a));
        let mut ids: Vec<Str> = Vec::new();
        if by_count > 0 || cutoff.is_some() {
            set.zwalk(f64::NEG_INFINITY, f64::INFINITY, |m, score| {
                let take = (ids.len() as u64) < by_count || cutoff.is_some_and(|c| score < c as f64);
                if take {
                    ids.push(m);
                }
                take && (ids.len() as u64) < batch
            });
        }
        let rows = doomed_rows(x, &ids)?;
        let drop_new = by_count.saturating_sub(set.len()).min(adding);
        Ok(Retire { ids, rows, drop_new })
    }

    pub fn apply(self, set: &Key) {
        let members: Vec<_> = self.ids.iter().map(Str::ptr).collect();
        set.zrem_many(&members);
        crate::host::store::delete_all(&self.rows);
        metrics::add(&metrics::RETIRED, (self.ids.len() as u64).saturating_add(self.drop_new));
    }
}

/// The rows of jobs about to be deleted (retention, DRAIN, CLEAN, OBLITERATE), found not
/// declared: opened as the caller for writing, each a hash or absent, before anything is
/// written.
/// Each row comes with its job's log, if it has one (a job's log never outlives its row).
pub fn doomed_rows(x: &mut Exec, ids: &[Str]) -> Result<Vec<Key>, Refusal> {
    let mut rows = Vec::with_capacity(ids.len());
    for m in ids {
        let row = x.open_undeclared(Role::Job, m.bytes(), Access::Write)?;
        row.exists_as(Kind::Hash)?;
        rows.push(row);
        rows.extend(log_of(x, m.bytes())?);
    }
    Ok(rows)
}

/// The log of job `id`, opened as the caller to be deleted with its row; None without one.
pub fn log_of(x: &mut Exec, id: &[u8]) -> Result<Option<Key>, Refusal> {
    x.open_undeclared_existing(Role::Log, id, Access::Write)
}

/// Finish a job for good: into `set` (completed or failed, score = now) with its state,
/// finish time and `fields`, the token cleared unless the job completed (COMPLETE keeps it
/// for its idempotent repeat) — or, under KEEP 0, the row deleted at once.
#[allow(clippy::too_many_arguments)]
pub fn finish(
    x: &Exec,
    row: &Key,
    set: &Key,
    id: &Str,
    state: State,
    keep: Keep,
    fields: &[(&Lit, *mut RedisModuleString)],
    log: Option<Key>,
) -> Result<(), Refusal> {
    let now = x.now();
    if keep == Keep::None {
        row.delete();
        if let Some(log) = log {
            log.delete();
        }
        return Ok(());
    }
    let finished = x.int(now)?;
    set.zadd_as(now, &finished, id.ptr())?;
    let mut pairs: Pairs =
        smallvec::smallvec![(&field::STATE, state.lit().get()), (&field::FINISHED, finished.ptr())];
    pairs.extend_from_slice(fields);
    row.hset(&pairs)?;
    if state != State::Completed {
        row.hdel(&[&field::TOKEN])?;
    }
    Ok(())
}

/// Something of this queue falls due at `at_ms` (a scheduled or delayed job, a lease): upkeep
/// knows the queue from now on, and looks no later than then.
pub fn due_at(x: &Exec, at_ms: i64) {
    crate::registry::note(crate::host::timer::selected(x.ctx()), x.queue, Some(at_ms));
    crate::host::timer::wake_by(x.ctx(), at_ms);
}

/// A job of this queue expires at `at_ms` (EXPIRE): upkeep fails it then if no CLAIM has
/// taken it. What upkeep knows of expiring jobs lives in memory like the rest of its agenda
/// (`registry`); after a restart its scan finds them again from their rows.
pub fn expiring(x: &Exec, at_ms: i64) {
    let db = crate::host::timer::selected(x.ctx());
    crate::registry::note_expiry(db, x.queue, x.id, at_ms);
    due_at(x, at_ms);
}

/// A job was created in this queue: the node knows the queue from now on (`TRA.QUEUES`).
pub fn exists(x: &Exec) {
    crate::registry::note(crate::host::timer::selected(x.ctx()), x.queue, None);
}

/// The call's own job row: it must exist.
pub fn existing_row(x: &Exec) -> Result<Key, Refusal> {
    let row = x.open(Role::Job, true)?;
    if row.exists_as(Kind::Hash)? {
        Ok(row)
    } else {
        Err(no_job(x.id))
    }
}

/// The job a holder verb (EXTEND, COMPLETE, FAIL, DELAY, REQUEUE) acts on: its row, which
/// must exist, and the active set. Opened first; the verb then opens its other keys, and
/// only then asks whether the job is held — so a wrong-typed key answers before a lease.
pub struct Holder {
    pub row: Key,
    pub active: Key,
    pub id: Str,
}

impl Holder {
    pub fn open(x: &Exec) -> Result<Holder, Refusal> {
        let row = existing_row(x)?;
        let active = x.open_as(Role::Active, Kind::ZSet)?;
        Ok(Holder { row, active, id: x.string(x.id)? })
    }

    /// Held by `token`: the row says active with this token, and the active set agrees.
    pub fn holds(&self, token: &[u8]) -> bool {
        Row(&self.row).held_by(token) && self.active.zscore(self.id.ptr()).is_some()
    }

    /// `EMQLEASE` unless held by `token`: a wrong token, a reclaimed lease and a finished job
    /// are one condition to the holder.
    pub fn check(&self, token: &[u8]) -> Result<(), Refusal> {
        if self.holds(token) {
            Ok(())
        } else {
            Err(lease(self.id.bytes()))
        }
    }
}

/// The KEEP a finish uses: the call's, or the config default for that set.
pub fn keep_for(given: Option<i64>, default: &std::sync::atomic::AtomicI64) -> Result<Keep, Refusal> {
    match given {
        Some(k) => domain::keep(k),
        None => Ok(domain::keep_default(config::get(default))),
    }
}

pub fn age(given: Option<i64>) -> Result<Option<i64>, Refusal> {
    given.map(|a| domain::range(a, 0, domain::TIME_MAX, "AGE")).transpose()
}

/// The NOJOB refusal for the call's job.
pub fn no_job(id: &[u8]) -> Refusal {
    Refusal::NoJob(format!("no job {}", errors::printable(id)))
}

pub fn lease(id: &[u8]) -> Refusal {
    Refusal::Lease(format!("job {} is not held with this token", errors::printable(id)))
}

/// The EMQSTATE refusal: the job is not where the verb needs it.
pub fn not_in(id: &[u8], where_: &str) -> Refusal {
    Refusal::State(format!("job {} is not {where_}", errors::printable(id)))
}
