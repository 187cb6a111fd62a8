//! The job row: its fields, its state, reading it, creating it, and a row found in a set.

use std::ffi::CStr;

use crate::config;
use crate::domain::{self, args::Options, Backoff};
use crate::errors::{self, no_job, Refusal};
use crate::host::{Access, ArgStr, Exec, Key, Kind, Lit, Str, StrRef};
use crate::keyspace::Role;

use super::expiring;

/// The job row's fields. Short names: a row is most of a waiting job's memory. A field at
/// its default is not stored.
pub mod field {
    use crate::host::Lit;
    macro_rules! fields {
        ($($(#[$doc:meta])* $name:ident = $text:literal;)*) => {
            $($(#[$doc])* pub static $name: Lit = Lit::new($text);)*
            /// Every field, for a caller that reads a row whole.
            pub static ALL: &[&Lit] = &[$(&$name),*];
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
        /// The last FAIL's STACK, opaque; each FAIL replaces it (one without STACK deletes it).
        STACK = c"s";
        /// Finish time, ms.
        FINISHED = c"f";
        /// The holder's last progress report (TRA.PROGRESS), opaque.
        PROGRESS = c"g";
        /// The time the job expires if no CLAIM has taken it (EXPIRE), ms; deleted by the CLAIM
        /// that takes it in time.
        EXPIRE = c"x";
        /// The job's custom id (`ALIAS key`), its entry in the queue's alias hash.
        ALIAS = c"k";
        /// The job's deduplication id (`DEDUP id`): its key `emq:{Q}:dedup:<id>`.
        DEDUP = c"de";
        /// The job scheduler that made the job (an iteration of it).
        SCHEDULER = c"rs";
        /// The iteration's time, ms: when its scheduler was due.
        ITERATION = c"rt";
        /// The iteration's number: 1 for its scheduler's first.
        ROUND = c"rn";
        /// The worker that made the last claim naming itself (`BY`).
        WORKER = c"w";
    }
}

/// The queue's `meta` hash: the module's own fields. Every other field belongs to clients.
pub mod meta {
    use crate::host::Lit;
    /// Present (value `1`) while the queue is paused: CLAIM hands out nothing.
    pub static PAUSED: Lit = Lit::new(c"paused");
    /// Written by clients: the queue's own max stalls (0..=1000), over `trafikey.max-stalls`.
    pub static MAX_STALLS: Lit = Lit::new(c"max-stalls");
    /// `<max> <ms>` (TRA.LIMIT): at most max jobs claimed per window of ms; CLAIM appends
    /// ` <count> <until>`, the jobs claimed in the window that ends at until (ms). One field,
    /// so that a claim reads it in the lookup of `paused` and writes one field.
    pub static RATE: Lit = Lit::new(c"rate");
    /// Written by TRA.LIMIT: at most `concurrency` jobs active; nothing claimed before
    /// `hold-until` (ms).
    pub static CONCURRENCY: Lit = Lit::new(c"concurrency");
    pub static HOLD_UNTIL: Lit = Lit::new(c"hold-until");
    /// The fields clients write by hand that the module reads back within a range, each with
    /// it: a value outside is ignored (the config stands in). `tests/edges.rs` takes each to
    /// both ends of its range and one past.
    pub static STORED: [(&Lit, crate::domain::Range); 1] = [(&MAX_STALLS, crate::domain::MAX_STALLS)];
}

/// Where a job is: each state names the set that holds it, and is written in its row.
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
    pub const ALL: [State; 6] =
        [State::Wait, State::Prio, State::Active, State::Delayed, State::Completed, State::Failed];

    /// The state's word: the one place each is written.
    const fn text(self) -> &'static CStr {
        match self {
            State::Wait => c"wait",
            State::Prio => c"prio",
            State::Active => c"active",
            State::Delayed => c"delayed",
            State::Completed => c"completed",
            State::Failed => c"failed",
        }
    }

    pub const fn word(self) -> &'static str {
        match self.text().to_str() {
            Ok(w) => w,
            Err(_) => "",
        }
    }

    /// The state's word as a constant server string.
    pub fn lit(self) -> &'static Lit {
        static WAIT: Lit = Lit::new(State::Wait.text());
        static PRIO: Lit = Lit::new(State::Prio.text());
        static ACTIVE: Lit = Lit::new(State::Active.text());
        static DELAYED: Lit = Lit::new(State::Delayed.text());
        static COMPLETED: Lit = Lit::new(State::Completed.text());
        static FAILED: Lit = Lit::new(State::Failed.text());
        match self {
            State::Wait => &WAIT,
            State::Prio => &PRIO,
            State::Active => &ACTIVE,
            State::Delayed => &DELAYED,
            State::Completed => &COMPLETED,
            State::Failed => &FAILED,
        }
    }

    /// The state a row's word names. Compared as bytes: `word()` checks UTF-8 each time.
    pub fn of(b: &[u8]) -> Option<State> {
        State::ALL.into_iter().find(|s| s.text().to_bytes() == b)
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

/// The call's own job row: it must exist.
pub fn existing_row(x: &Exec) -> Result<Key, Refusal> {
    let row = x.write(Role::Job)?;
    if row.exists_as(Kind::Hash)? {
        Ok(row)
    } else {
        Err(no_job(x.id))
    }
}

/// Fields and values of one row write.
pub(crate) type Pairs<'l> = smallvec::SmallVec<[(&'l Lit, StrRef<'l>); 8]>;

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
    /// ALIAS: the client's key for the job.
    pub alias: Option<ArgStr<'a>>,
    /// DEDUP and its options (boxed: a job without them carries a pointer's width).
    pub dedup: Option<Box<super::dedup::Dedup<'a>>>,
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
        if let Some(alias) = o.alias {
            super::alias::check(&alias)?;
        }
        Ok(NewJob {
            name,
            data,
            priority: domain::PRIORITY.check(o.priority.unwrap_or(0))?,
            attempts: domain::ATTEMPTS.check(o.attempts.unwrap_or(1))?,
            backoff: o.backoff.map(domain::backoff).transpose()?,
            opts: o.opts,
            expire: o.expire.map(|w| domain::expiry(w, now)).transpose()?,
            alias: o.alias,
            dedup: super::dedup::Dedup::check(o)?.map(Box::new),
        })
    }

    /// Write job `id`'s row: its state and the immutable fields. The name, data, OPTS and
    /// ALIAS go in as the server strings they arrived in, uncopied; `created` is the call's
    /// clock, made once for all the rows a call creates.
    pub fn create(
        &self,
        x: &Exec,
        row: &Key,
        id: &[u8],
        state: State,
        created: StrRef<'_>,
    ) -> Result<(), Refusal> {
        let dedup = self.dedup.as_ref().map(|d| (&field::DEDUP, d.id.str_ref()));
        self.write(x, row, &[(&field::STATE, state.lit().str_ref())], &[(&field::CREATED, created)], dedup)?;
        if let Some(at) = self.expire {
            expiring(x, id, at);
        }
        Ok(())
    }

    /// The job's name, data and the options it gave, as its row holds them, written to `key`
    /// between `head` and `mid` (before the options) and `last` (after them).
    pub fn write(
        &self,
        x: &Exec,
        key: &Key,
        head: &[(&Lit, StrRef<'_>)],
        mid: &[(&Lit, StrRef<'_>)],
        last: Option<(&Lit, StrRef<'_>)>,
    ) -> Result<(), Refusal> {
        let (name, data) = (self.name.str_ref(), self.data.str_ref());
        let null = |a: Option<ArgStr>| a.is_some_and(|a| a.str_ref().is_missing());
        if name.is_missing() || data.is_missing() || null(self.opts) || null(self.alias) {
            return Err(errors::host_reply());
        }
        if head.iter().chain(mid).chain(&last).any(|(_, v)| v.is_missing()) {
            return Err(errors::host_reply());
        }
        let prio = (self.priority != 0).then(|| x.int(self.priority)).transpose()?;
        let attempts = (self.attempts != 1).then(|| x.int(self.attempts)).transpose()?;
        let backoff = self.backoff.map(|b| x.string(domain::backoff_encode(b).as_bytes())).transpose()?;
        // Declared before `pairs`, which borrows it, so that it outlives it.
        let expire;
        let mut pairs: Pairs = smallvec::SmallVec::new();
        pairs.extend_from_slice(head);
        pairs.push((&field::NAME, name));
        pairs.push((&field::DATA, data));
        pairs.extend_from_slice(mid);
        expire = self.expire.map(|t| x.int(t)).transpose()?;
        // Pushed one by one: a job gives few of them, and each push is a store.
        for (f, v) in [
            (&field::PRIORITY, prio.as_ref().map(Str::str_ref)),
            (&field::ATTEMPTS, attempts.as_ref().map(Str::str_ref)),
            (&field::BACKOFF, backoff.as_ref().map(Str::str_ref)),
            (&field::OPTS, self.opts.map(|v| v.str_ref())),
            (&field::EXPIRE, expire.as_ref().map(Str::str_ref)),
            (&field::ALIAS, self.alias.map(|v| v.str_ref())),
        ] {
            if let Some(v) = v {
                pairs.push((f, v));
            }
        }
        if let Some(p) = last {
            pairs.push(p);
        }
        key.hset(&pairs)
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
    /// The job scheduler that made it (`rs`), read with the fields above: a claim that takes
    /// the scheduler's pending iteration makes the next one.
    pub scheduler: Option<Str>,
}

impl Found {
    /// A job taken from a ready set: its priority is not needed (it leaves the set).
    pub fn taken(x: &mut Exec, id: Str) -> Result<Found, Refusal> {
        Found::open(x, id, false)
    }

    /// A delayed job falling due: its priority decides where it goes.
    pub fn due(x: &mut Exec, id: Str) -> Result<Found, Refusal> {
        Found::open(x, id, true)
    }

    fn open(x: &mut Exec, id: Str, with_priority: bool) -> Result<Found, Refusal> {
        let row = x.open_undeclared(Role::Job, id.bytes(), Access::Update)?;
        let orphan = !row.exists_as(Kind::Hash)?;
        let int = |v: Option<Str>| v.and_then(|v| domain::args::int(v.bytes()));
        // `rs` rides in the same lookup: a queue without schedulers pays one absent field.
        let (priority, expire, scheduler) = if orphan {
            (0, None, None)
        } else if with_priority {
            let [p, e, s, _] = row.hget_many(&[&field::PRIORITY, &field::EXPIRE, &field::SCHEDULER]);
            (int(p).unwrap_or(0), int(e), s)
        } else {
            let [e, s, ..] = row.hget_many(&[&field::EXPIRE, &field::SCHEDULER]);
            (0, int(e), s)
        };
        let expired = domain::expired(expire, x.now());
        Ok(Found { id, row, orphan, priority, expired, expires: expire.is_some(), scheduler })
    }

    /// Neither orphan nor expired: a job to promote or hand out.
    pub fn live(&self) -> bool {
        !self.orphan && !self.expired
    }
}

#[cfg(test)]
mod tests {
    use super::State;

    #[test]
    fn a_row_s_state_word_reads_back_as_that_state_and_nothing_else_does() {
        for s in State::ALL {
            assert_eq!(State::of(s.word().as_bytes()), Some(s));
        }
        for other in [&b""[..], b"Active", b"activ", b"actives", b"waiting", b"prioritized"] {
            assert_eq!(State::of(other), None, "{}", String::from_utf8_lossy(other));
        }
    }
}
