//! The queue's shared mechanics, in the wire's terms: the job row and its fields, the states,
//! making a job ready, events, and retention of finished jobs. Verbs compose these.

use std::ffi::CStr;

use valkey_module::raw::RedisModuleString;

use crate::config;
use crate::domain::{self, args::Options, Backoff, Keep};
use crate::errors::{self, Refusal};
use crate::host::{Access, Exec, Key, Kind, Str};
use crate::keyspace::Role;
use crate::metrics;

/// The job row's fields. Short names: a row is most of a waiting job's memory. A field at
/// its default is not stored.
pub mod field {
    use std::ffi::CStr;
    /// The state set that holds the job: wait, prio, active, delayed, completed, failed.
    pub const STATE: &CStr = c"st";
    pub const NAME: &CStr = c"n";
    pub const DATA: &CStr = c"d";
    /// Priority, when not 0.
    pub const PRIORITY: &CStr = c"p";
    /// Max attempts, when not 1.
    pub const ATTEMPTS: &CStr = c"a";
    /// Backoff, `f<ms>` or `e<ms>`, when given.
    pub const BACKOFF: &CStr = c"b";
    /// The client's opaque OPTS blob, when given.
    pub const OPTS: &CStr = c"o";
    /// Creation time, ms.
    pub const CREATED: &CStr = c"c";
    /// The token of the current holder, or of the holder that completed the job.
    pub const TOKEN: &CStr = c"tk";
    /// Attempts started (claims).
    pub const STARTED: &CStr = c"as";
    /// Attempts made (finished by COMPLETE, FAIL or a final stall).
    pub const MADE: &CStr = c"am";
    /// Stalls: leases STALLED took back.
    pub const STALLS: &CStr = c"sc";
    /// Time of the last claim, ms.
    pub const CLAIMED: &CStr = c"ca";
    pub const RESULT: &CStr = c"r";
    /// The last error.
    pub const ERROR: &CStr = c"e";
    /// Finish time, ms.
    pub const FINISHED: &CStr = c"f";
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

    pub fn of(b: &[u8]) -> Option<State> {
        [State::Wait, State::Prio, State::Active, State::Delayed, State::Completed, State::Failed]
            .into_iter()
            .find(|s| s.word().as_bytes() == b)
    }

    pub const fn role(self) -> Role {
        match self {
            State::Wait => Role::Wait,
            State::Prio => Role::Prio,
            State::Active => Role::Active,
            State::Delayed => Role::Delayed,
            State::Completed => Role::Completed,
            State::Failed => Role::Failed,
        }
    }
}

/// Reads of a job row.
pub struct Row<'k>(pub &'k Key);

impl Row<'_> {
    pub fn get(&self, f: &CStr) -> Option<Str> {
        self.0.hget(f)
    }

    pub fn int(&self, f: &CStr, default: i64) -> i64 {
        self.get(f).and_then(|s| domain::args::int(s.bytes())).unwrap_or(default)
    }

    pub fn state(&self) -> Option<State> {
        self.get(field::STATE).and_then(|s| State::of(s.bytes()))
    }

    pub fn priority(&self) -> i64 {
        self.int(field::PRIORITY, 0)
    }

    /// Held: in active, and the row carries this token.
    pub fn held_by(&self, token: &[u8]) -> bool {
        self.state() == Some(State::Active) && self.get(field::TOKEN).is_some_and(|t| t.bytes() == token)
    }

    pub fn backoff(&self) -> Option<Backoff> {
        self.get(field::BACKOFF).and_then(|s| domain::backoff_decode(s.bytes()))
    }
}

/// A new job as ENQUEUE and SCHEDULE take it, range-checked.
pub struct NewJob<'a> {
    pub name: &'a [u8],
    pub data: &'a [u8],
    pub priority: i64,
    pub attempts: i64,
    pub backoff: Option<Backoff>,
    pub opts: Option<&'a [u8]>,
}

impl<'a> NewJob<'a> {
    pub fn check(name: &'a [u8], data: &'a [u8], o: &Options<'a>) -> Result<NewJob<'a>, Refusal> {
        domain::bytes_len(name, 1, domain::NAME_MAX, "name")?;
        let max = config::max_payload();
        domain::payload(data, max, "data")?;
        if let Some(opts) = o.opts {
            domain::payload(opts, max, "OPTS")?;
        }
        Ok(NewJob {
            name,
            data,
            priority: domain::range(o.priority.unwrap_or(0), 0, domain::PRIORITY_MAX, "PRIORITY")?,
            attempts: domain::range(o.attempts.unwrap_or(1), 1, domain::ATTEMPTS_MAX, "ATTEMPTS")?,
            backoff: o.backoff.map(domain::backoff).transpose()?,
            opts: o.opts,
        })
    }

    /// Write the row: its state and the immutable fields.
    pub fn create(&self, x: &Exec, row: &Key, state: State, now: i64) -> Result<(), Refusal> {
        let st = x.string(state.word().as_bytes())?;
        let name = x.string(self.name)?;
        let data = x.string(self.data)?;
        let created = x.int(now)?;
        let prio = (self.priority != 0).then(|| x.int(self.priority)).transpose()?;
        let attempts = (self.attempts != 1).then(|| x.int(self.attempts)).transpose()?;
        let backoff = self.backoff.map(|b| x.string(domain::backoff_encode(b).as_bytes())).transpose()?;
        let opts = self.opts.map(|o| x.string(o)).transpose()?;
        let mut pairs: Vec<(&CStr, &Str)> = vec![(field::STATE, &st), (field::NAME, &name), (field::DATA, &data), (field::CREATED, &created)];
        pairs.extend(prio.as_ref().map(|v| (field::PRIORITY, v)));
        pairs.extend(attempts.as_ref().map(|v| (field::ATTEMPTS, v)));
        pairs.extend(backoff.as_ref().map(|v| (field::BACKOFF, v)));
        pairs.extend(opts.as_ref().map(|v| (field::OPTS, v)));
        row.hset(&pairs)
    }
}

/// The two ready sets of a queue, type-checked.
pub struct Ready {
    pub wait: Key,
    pub prio: Key,
}

impl Ready {
    pub fn open(wait: Key, prio: Key) -> Result<Ready, Refusal> {
        wait.expect(Kind::List)?;
        prio.expect(Kind::ZSet)?;
        Ok(Ready { wait, prio })
    }

    /// Make a job ready by its priority: wait (at the back, or the front for requeues and
    /// LIFO) for priority 0, else prio (priority, then id). Returns the state it now has.
    pub fn put(&self, id: *mut RedisModuleString, priority: i64, front: bool) -> Result<State, Refusal> {
        if priority == 0 {
            if front {
                self.wait.rpush(id)?;
            } else {
                self.wait.lpush(id)?;
            }
            Ok(State::Wait)
        } else {
            self.prio.zadd(priority, id)?;
            Ok(State::Prio)
        }
    }
}

/// The queue's events stream: `event <name> id <ID>` plus facts, capped with `MAXLEN ~`.
pub struct Events {
    key: Key,
    cap: i64,
}

pub enum Fact<'a> {
    Bytes(&'a [u8]),
    Str(*mut RedisModuleString),
    Int(i64),
}

impl Events {
    pub fn open(key: Key) -> Result<Events, Refusal> {
        let cap = config::get(&config::EVENTS_MAXLEN);
        if cap > 0 {
            key.expect(Kind::Stream)?;
        }
        Ok(Events { key, cap })
    }

    pub fn emit(&self, x: &Exec, name: &str, id: Option<*mut RedisModuleString>, facts: &[(&str, Fact<'_>)]) -> Result<(), Refusal> {
        if self.cap <= 0 {
            return Ok(());
        }
        let mut own: Vec<Str> = Vec::with_capacity(4 + 2 * facts.len());
        let mut argv: Vec<*mut RedisModuleString> = Vec::with_capacity(4 + 2 * facts.len());
        let push_own = |own: &mut Vec<Str>, argv: &mut Vec<*mut RedisModuleString>, s: Str| {
            argv.push(s.ptr());
            own.push(s);
        };
        push_own(&mut own, &mut argv, x.string(b"event")?);
        push_own(&mut own, &mut argv, x.string(name.as_bytes())?);
        if let Some(id) = id {
            push_own(&mut own, &mut argv, x.string(b"id")?);
            argv.push(id);
        }
        for (k, v) in facts {
            push_own(&mut own, &mut argv, x.string(k.as_bytes())?);
            match v {
                Fact::Bytes(b) => push_own(&mut own, &mut argv, x.string(b)?),
                Fact::Int(i) => push_own(&mut own, &mut argv, x.int(*i)?),
                Fact::Str(s) => argv.push(*s),
            }
        }
        self.key.xadd(&argv)?;
        self.key.xtrim_approx(self.cap)
    }
}

/// Retention of a finished set, decided and ACL-checked before anything is written and
/// carried out after: the oldest entries beyond `keep`, and with `age` those finished
/// before now−age, at most `trafikey.retention-batch` in one call.
pub struct Retire {
    ids: Vec<Str>,
    rows: Vec<Key>,
}

impl Retire {
    /// Plan for `set` as it will be once `adding` more jobs (finished now) are in it. The
    /// jobs being added are the newest, so only entries already there are retired.
    pub fn plan(x: &mut Exec, set: &Key, adding: u64, now: i64, keep: Keep, age: Option<i64>) -> Result<Retire, Refusal> {
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
        let mut rows = Vec::with_capacity(ids.len());
        for m in &ids {
            let row = x.open_undeclared(Role::Job, m.bytes(), Access::Write)?;
            row.expect(Kind::Hash)?;
            rows.push(row);
        }
        Ok(Retire { ids, rows })
    }

    pub fn apply(self, set: &Key) {
        for (m, row) in self.ids.iter().zip(&self.rows) {
            set.zrem(m.ptr());
            row.delete();
        }
        metrics::add(&metrics::RETIRED, self.ids.len() as u64);
    }
}

/// The call's own job row (declared key 0): it must exist.
pub fn existing_row(x: &Exec) -> Result<Key, Refusal> {
    let row = x.open(0, true);
    if row.expect(Kind::Hash)? {
        Ok(row)
    } else {
        Err(no_job(x.id))
    }
}

/// Declared key `i`, opened for writing, which must be a zset or absent.
pub fn zset(x: &Exec, i: usize) -> Result<Key, Refusal> {
    let k = x.open(i, true);
    k.expect(Kind::ZSet)?;
    Ok(k)
}

/// Held: in active with this token — the row says so and the active set agrees.
pub fn held(row: &Key, active: &Key, id: &Str, token: &[u8]) -> bool {
    Row(row).held_by(token) && active.zscore(id.ptr()).is_some()
}

/// The KEEP a finish uses: the call's, or the config default for that set.
pub fn keep_for(given: Option<i64>, default: &std::sync::atomic::AtomicI64) -> Result<Keep, Refusal> {
    match given {
        Some(k) => domain::keep(k),
        None => domain::keep(config::get(default)).or(Ok(Keep::All)),
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
