//! Deduplication: `DEDUP id` on a producer names the job by a deduplication id, one key a id,
//! `emq:{Q}:dedup:<id>`, a string holding the branded id of the job that holds it. Found, not
//! declared, by the producers and the paths that finish or delete rows: opened as the caller.
//!
//! While the key exists the id is live: a producer giving it creates nothing and answers the
//! holder's id (`deduplicated` event). Without `DEDUPTTL` the key lives until its job
//! finishes (completed, failed for good, expired) or is deleted; with `DEDUPTTL ms` it lives
//! ms, by the server's own expiry (an absolute time, replicated as `PEXPIREAT`), whatever
//! becomes of its job — unless a client deletes the job (REMOVE, CLEAN, DRAIN, OBLITERATE),
//! which releases it too. `EXTEND` makes a duplicate restart the TTL; `REPLACE` makes a
//! duplicate replace the holder while the holder is delayed (deleted, the new job created and
//! holding the id). Every release deletes the key only while it still names the job (the
//! job's row keeps its id in field `de`).
//!
//! `KEEPLAST` makes a duplicate that arrives while the holder is active wait for it: the job
//! is kept whole in `emq:{Q}:kept:<id>` (a hash: the row's own fields, and `id`, `lifo`,
//! `delay`), in place of any job kept before it, and the id's TTL is dropped so that it lives
//! until the holder finishes. When the holder finishes (completed, failed for good by FAIL, a
//! stall or its EXPIRE) the kept job is created then, by the finishing call: ready (or, with
//! a delay, due that long after), holding the id with no TTL. A client's delete of the holder
//! (REMOVE, CLEAN, DRAIN, OBLITERATE) or TRA.UNDEDUP drops the kept job with the id, and so
//! does a finish that finds its id's row existing or its ALIAS live.

use crate::domain::{self, args::Options};
use crate::errors::Refusal;
use crate::host::{one, Access, ArgStr, Exec, Key, Kind, Lit, Str, StrRef};
use crate::keyspace::Role;

use super::{companions_of, field, Aliases, Companions, End, Event, Events, NewJob, Ready, Row, Sets, State};

/// Longest deduplication id, in bytes (as an ALIAS).
pub const DEDUP_MAX: usize = 256;

/// A kept job's own fields, beside the row fields it keeps (`n`, `d` and the options given).
pub mod kept {
    use crate::host::Lit;
    /// Its branded id.
    pub static ID: Lit = Lit::new(c"id");
    /// LIFO given: made ready at the front of `wait`.
    pub static LIFO: Lit = Lit::new(c"lifo");
    /// A scheduled job's delay, ms: due that long after its holder finishes.
    pub static DELAY: Lit = Lit::new(c"delay");
}

/// The row fields a kept job carries over to its row.
static KEPT_FIELDS: [&Lit; 8] = [
    &field::NAME,
    &field::DATA,
    &field::PRIORITY,
    &field::ATTEMPTS,
    &field::BACKOFF,
    &field::OPTS,
    &field::EXPIRE,
    &field::ALIAS,
];

/// A producer's DEDUP and its options, range-checked.
#[derive(Clone, Copy)]
pub struct Dedup<'a> {
    pub id: ArgStr<'a>,
    /// DEDUPTTL: 1..=TIME_MAX ms.
    pub ttl: Option<i64>,
    pub extend: bool,
    pub replace: bool,
    pub keep_last: bool,
    /// The producer's ALIAS, carried by its `deduplicated` event.
    pub alias: Option<ArgStr<'a>>,
}

/// DEDUPTTL, EXTEND, REPLACE and KEEPLAST go with DEDUP, EXTEND with DEDUPTTL, and KEEPLAST
/// without it (a kept job's holder holds the id until it finishes): shape rules.
#[inline]
pub fn shape<S>(o: &Options<S>) -> Result<(), Refusal> {
    let Some(d) = o.dedup.as_deref() else { return Ok(()) };
    if d.id.is_none() {
        return Err(Refusal::Shape("DEDUPTTL, EXTEND, REPLACE and KEEPLAST go with DEDUP".into()));
    }
    if d.extend && d.ttl.is_none() {
        return Err(Refusal::Shape("EXTEND goes with DEDUPTTL".into()));
    }
    if d.keep_last && d.ttl.is_some() {
        return Err(Refusal::Shape("KEEPLAST does not go with DEDUPTTL".into()));
    }
    Ok(())
}

/// The range check of a deduplication id: 1..=256 bytes.
pub fn check_id(id: &[u8]) -> Result<(), Refusal> {
    domain::bytes_len(id, 1, DEDUP_MAX, "DEDUP")
}

impl<'a> Dedup<'a> {
    pub fn check(o: &Options<ArgStr<'a>>) -> Result<Option<Dedup<'a>>, Refusal> {
        shape(o)?;
        let Some(d) = o.dedup.as_deref() else { return Ok(None) };
        let Some(id) = d.id else { return Ok(None) };
        check_id(&id)?;
        let ttl = d.ttl.map(|t| domain::DEDUP_TTL.check(t)).transpose()?;
        Ok(Some(Dedup {
            id,
            ttl,
            extend: d.extend,
            replace: d.replace,
            keep_last: d.keep_last,
            alias: o.alias,
        }))
    }

    /// The `deduplicated` event this producer's DEDUP writes: `refused` its own id (kept, when
    /// `kept`), or `replaced` the holder it deleted.
    pub fn event<'s>(
        &'s self,
        refused: Option<StrRef<'s>>,
        kept: bool,
        replaced: Option<StrRef<'s>>,
    ) -> Event<'s> {
        Event::Deduplicated {
            dedup: self.id.str_ref(),
            refused,
            kept,
            replaced,
            alias: self.alias.map(|a| a.str_ref()),
        }
    }
}

/// What a producer's DEDUP decided, before anything is written.
pub enum Verdict {
    /// The id is free: the job is created and holds it.
    Fresh,
    /// The id is live: nothing is created, the reply is the holder's id.
    Duplicate(Str),
    /// KEEPLAST, and the holder is active: nothing is created, the job is kept under `kept`
    /// (opened as the caller), the reply is the holder's id.
    Keep { holder: Str, kept: Key },
    /// REPLACE, and the holder is delayed: it is deleted, the new job holds the id. `until`:
    /// the holder's expiry, kept when the new job gives DEDUPTTL without EXTEND.
    Replace { old: Str, row: Key, companions: Option<Companions>, until: Option<i64> },
}

/// The job a producer's KEEPLAST keeps: as it would be created, with its LIFO and its due
/// time (a scheduled job).
pub struct Keeping<'j, 'a> {
    pub job: &'j NewJob<'a>,
    pub lifo: bool,
    pub due: Option<i64>,
}

/// A producer's DEDUP planned: the id's key opened as the caller, the verdict taken.
pub struct DedupClaim<'a> {
    d: Dedup<'a>,
    key: Key,
    pub verdict: Verdict,
    /// The delayed set, found (ENQUEUE does not declare it), when REPLACE needs it.
    delayed: Option<Key>,
    /// The DEDUPTTL of the last later job of the same bulk add that gave EXTEND for this id:
    /// its TTL restart, written after this claim's own writes.
    later_extend: Option<i64>,
}

impl<'a> DedupClaim<'a> {
    /// `delayed`: the call's declared delayed set, if it has one (a second handle on it
    /// would go stale when the first empties it). `ours`: ids the call writes rows for,
    /// which a REPLACE must not delete under them, and which are not active.
    pub fn plan(
        x: &mut Exec,
        d: Dedup<'a>,
        delayed: Option<&Key>,
        ours: &dyn Fn(&[u8]) -> bool,
    ) -> Result<DedupClaim<'a>, Refusal> {
        let key = x.open_undeclared(Role::Dedup, d.id.bytes(), Access::Update)?;
        if !key.exists_as(Kind::String)? {
            return Ok(DedupClaim { d, key, verdict: Verdict::Fresh, delayed: None, later_extend: None });
        }
        let holder = x.string(key.string().unwrap_or_default())?;
        if ours(holder.bytes()) {
            return Ok(DedupClaim {
                d,
                key,
                verdict: Verdict::Duplicate(holder),
                delayed: None,
                later_extend: None,
            });
        }
        if d.replace {
            let own = match delayed {
                Some(_) => None,
                None => {
                    let k = x.open_undeclared(Role::Delayed, b"", Access::Update)?;
                    k.exists_as(Kind::ZSet)?;
                    Some(k)
                }
            };
            let set = delayed.or(own.as_ref());
            if set.and_then(|s| s.zscore(holder.str_ref())).is_some() {
                let row = x.open_undeclared(Role::Job, holder.bytes(), Access::Update)?;
                row.exists_as(Kind::Hash)?;
                let companions = companions_of(x, holder.bytes(), &row)?;
                let until = key.expires_at();
                let verdict = Verdict::Replace { old: holder, row, companions, until };
                return Ok(DedupClaim { d, key, verdict, delayed: own, later_extend: None });
            }
        }
        if d.keep_last {
            let row = x.open_undeclared(Role::Job, holder.bytes(), Access::Read)?;
            if row.kind() == Kind::Hash && Row(&row).state() == Some(State::Active) {
                let kept = x.open_undeclared(Role::Kept, d.id.bytes(), Access::Write)?;
                kept.exists_as(Kind::Hash)?;
                return Ok(DedupClaim {
                    d,
                    key,
                    verdict: Verdict::Keep { holder, kept },
                    delayed: None,
                    later_extend: None,
                });
            }
        }
        Ok(DedupClaim { d, key, verdict: Verdict::Duplicate(holder), delayed: None, later_extend: None })
    }

    /// The holder's id when the id is live and nothing is to be created (KEEPLAST's kept
    /// job included).
    pub fn duplicate(&self) -> Option<&Str> {
        match &self.verdict {
            Verdict::Duplicate(h) | Verdict::Keep { holder: h, .. } => Some(h),
            _ => None,
        }
    }

    /// KEEPLAST, and the holder is active: a producer with KEEPLAST is kept.
    pub fn keeps(&self) -> bool {
        matches!(self.verdict, Verdict::Keep { .. })
    }

    /// A later job of the same bulk add meets this id again: its EXTEND restarts the TTL as
    /// its own ENQUEUE would have, after whatever this claim writes.
    pub fn extend_later(&mut self, later: &Dedup<'_>) {
        if let (true, Some(ttl)) = (later.extend, later.ttl) {
            self.later_extend = Some(ttl);
        }
    }

    /// A later job of the bulk add with KEEPLAST takes this claim: its keep drops the TTL
    /// after the EXTENDs of the jobs before it, which are forgotten.
    pub fn handed_on(mut self: Box<Self>) -> Box<Self> {
        self.later_extend = None;
        self
    }

    fn restart_later(&self, x: &Exec) -> Result<(), Refusal> {
        match self.later_extend {
            Some(ttl) => self.key.set_abs_expire(x.now().saturating_add(ttl)),
            None => Ok(()),
        }
    }

    /// A duplicate: the TTL restarted under EXTEND, the `deduplicated` event on the holder
    /// (`refused`: the id the producer gave). KEEPLAST's duplicate is [`DedupClaim::keep`]'s.
    pub fn refuse(&self, x: &Exec, events: &Events, refused: &Str) -> Result<(), Refusal> {
        let Verdict::Duplicate(holder) = &self.verdict else { return Ok(()) };
        if let (true, Some(ttl)) = (self.d.extend, self.d.ttl) {
            self.key.set_abs_expire(x.now().saturating_add(ttl))?;
        }
        self.restart_later(x)?;
        events.emit(x, Some(holder.str_ref()), self.d.event(Some(refused.str_ref()), false, None))
    }

    /// KEEPLAST's duplicate, the holder active: the job `id` kept in place of any kept before
    /// it, the id's TTL dropped (it lives until the holder finishes), the `deduplicated` event
    /// on the holder naming the job `kept`.
    pub fn keep(&self, x: &Exec, events: &Events, id: &Str, k: &Keeping) -> Result<(), Refusal> {
        let Verdict::Keep { holder, kept } = &self.verdict else { return Ok(()) };
        if kept.kind() != Kind::Empty {
            kept.delete();
        }
        let delay = k.due.map(|due| x.int(due.saturating_sub(x.now()).max(0))).transpose()?;
        let mut mid: smallvec::SmallVec<[(&Lit, StrRef); 2]> = smallvec::SmallVec::new();
        if k.lifo {
            mid.push((&kept::LIFO, one().str_ref()));
        }
        mid.extend(delay.as_ref().map(|d| (&kept::DELAY, d.str_ref())));
        k.job.write(x, kept, &[(&kept::ID, id.str_ref())], &mid, None)?;
        if self.key.expires_at().is_some() {
            self.key.persist()?;
        }
        self.restart_later(x)?;
        // The event is the kept job's producer's (its ALIAS): in a bulk add, not always the
        // job that planned the claim.
        let d = k.job.dedup.as_deref().copied().unwrap_or(self.d);
        events.emit(x, Some(holder.str_ref()), d.event(Some(id.str_ref()), true, None))
    }

    /// The job `id` is being created: it holds the id from now on (a replaced holder deleted
    /// first, with its `removed` event, then `deduplicated` naming it). Returns the replaced
    /// holder's log and alias entry, for the caller to delete once its own alias is written
    /// (the alias hash must not be emptied under the producer's handle on it).
    pub fn take(
        self,
        x: &Exec,
        events: &Events,
        id: &Str,
        delayed: Option<&Key>,
    ) -> Result<Option<Companions>, Refusal> {
        let now = x.now();
        let until = match &self.verdict {
            Verdict::Duplicate(_) | Verdict::Keep { .. } => return Ok(None),
            Verdict::Fresh => self.d.ttl.map(|t| now.saturating_add(t)),
            Verdict::Replace { old, row, companions, until } => {
                if let Some(set) = delayed.or(self.delayed.as_ref()) {
                    set.zrem(old.str_ref());
                }
                row.delete();
                let alias = companions.as_ref().and_then(Companions::alias);
                events.emit(x, Some(old.str_ref()), Event::Removed { prev: State::Delayed, alias })?;
                match (self.d.ttl, self.d.extend) {
                    (Some(_), false) => until.or(self.d.ttl.map(|t| now.saturating_add(t))),
                    (ttl, _) => ttl.map(|t| now.saturating_add(t)),
                }
            }
        };
        self.key.set_string(id.bytes())?;
        if let Some(at) = until {
            self.key.set_abs_expire(at)?;
        }
        self.restart_later(x)?;
        match self.verdict {
            Verdict::Replace { old, companions, .. } => {
                events.emit(x, Some(id.str_ref()), self.d.event(None, false, Some(old.str_ref())))?;
                Ok(companions)
            }
            _ => Ok(None),
        }
    }
}

/// What a single producer's DEDUP came to.
pub enum Produced {
    /// The id is live: nothing is to be created; the holder's id is the reply.
    Duplicate(Str),
    /// The job is to be created and holds the id: the replaced holder's log and alias entry,
    /// for the producer to delete once its own alias is written.
    Holds(Option<Companions>),
}

/// ENQUEUE's and SCHEDULE's DEDUP, once every other check has passed: planned, then applied
/// (a duplicate's event and EXTEND, a kept job, or the id taken). Kept out of line: a
/// producer without DEDUP never runs it.
#[cold]
#[inline(never)]
pub fn produce(
    x: &mut Exec,
    d: Dedup,
    events: &Events,
    delayed: Option<&Key>,
    keeping: &Keeping,
) -> Result<Produced, Refusal> {
    let own = x.id;
    let claim = DedupClaim::plan(x, d, delayed, &|h| h == own)?;
    let id = x.string(x.id)?;
    match &claim.verdict {
        Verdict::Duplicate(_) => claim.refuse(x, events, &id)?,
        Verdict::Keep { .. } => claim.keep(x, events, &id, keeping)?,
        _ => return Ok(Produced::Holds(claim.take(x, events, &id, delayed)?)),
    }
    match claim.verdict {
        Verdict::Duplicate(holder) | Verdict::Keep { holder, .. } => Ok(Produced::Duplicate(holder)),
        _ => Err(crate::errors::host_reply()),
    }
}

/// A row's deduplication id, released with it: planned and opened as the caller before
/// anything is written, deleted with the writes. A job without one costs one field read.
#[derive(Default)]
pub struct Release {
    key: Option<Key>,
    next: Option<Box<Next>>,
}

/// The job kept for the id being released.
struct Next {
    dedup: Str,
    kept: Key,
    /// None: it is dropped (a client's delete of the holder, or it cannot be created).
    job: Option<KeptJob>,
}

/// A kept job read and checked, to be created when its holder's finish writes. Its row, the
/// alias hash and the found sets are opened (as the caller) and checked now, closed, and
/// opened again when it is made: other writes of the call may empty and delete them in
/// between.
struct KeptJob {
    id: Str,
    row: Key,
    fields: smallvec::SmallVec<[(&'static Lit, Str); 8]>,
    priority: i64,
    lifo: bool,
    delay: Option<i64>,
    expire: Option<i64>,
    alias: Option<(Aliases, Str)>,
    ready: Option<Ready>,
    delayed: Option<Key>,
}

impl Release {
    /// Nothing to release: the job had no DEDUP id, or the id no longer names it.
    pub fn is_empty(&self) -> bool {
        self.key.is_none() && self.next.is_none()
    }

    /// A job finishing (completed, failed for good, expired): its id is released unless it
    /// has a TTL, which it then lives out; a job kept for the id is planned, to be created
    /// through `sets`.
    pub fn finishing(x: &mut Exec, id: &[u8], row: &Key, sets: Sets) -> Result<Release, Refusal> {
        Release::open(x, id, row.hget(&field::DEDUP), false, Some(sets))
    }

    /// A job a client deletes (REMOVE, CLEAN, DRAIN, OBLITERATE): its id is released, TTL or
    /// not, and a job kept for it is dropped.
    pub fn removing(x: &mut Exec, id: &[u8], row: &Key) -> Result<Release, Refusal> {
        Release::open(x, id, row.hget(&field::DEDUP), true, None)
    }

    /// [`Release::finishing`] for a caller that read the row's `de` with other fields.
    #[inline]
    pub fn finishing_of(x: &mut Exec, id: &[u8], dedup: Option<Str>, sets: Sets) -> Result<Release, Refusal> {
        if dedup.is_none() {
            return Ok(Release::default());
        }
        Release::open(x, id, dedup, false, Some(sets))
    }

    /// Kept out of line: a job without DEDUP never runs it.
    #[cold]
    #[inline(never)]
    fn open(
        x: &mut Exec,
        id: &[u8],
        dedup: Option<Str>,
        with_ttl: bool,
        sets: Option<Sets>,
    ) -> Result<Release, Refusal> {
        let Some(dedup) = dedup else { return Ok(Release::default()) };
        let key = x.open_undeclared(Role::Dedup, dedup.bytes(), Access::Update)?;
        let names = key.kind() == Kind::String && key.string() == Some(id);
        let held = names && (with_ttl || key.expires_at().is_none());
        if !held {
            return Ok(Release::default());
        }
        let next = if x.undeclared_exists(Role::Kept, dedup.bytes())? {
            // A finish reads the kept job to make it; a delete drops it unread.
            let access = if sets.is_some() { Access::Update } else { Access::Write };
            let kept = x.open_undeclared(Role::Kept, dedup.bytes(), access)?;
            match (kept.kind(), sets) {
                (Kind::Hash, Some(sets)) => {
                    let job = KeptJob::plan(x, &kept, sets)?;
                    Some(Box::new(Next { dedup, kept, job }))
                }
                (Kind::Hash, None) => Some(Box::new(Next { dedup, kept, job: None })),
                // Not a kept job: left alone.
                _ => None,
            }
        } else {
            None
        };
        Ok(Release { key: Some(key), next })
    }

    /// The keys to delete, for a caller that deletes its keys together: the id's, and a
    /// dropped kept job's.
    pub fn into_keys(self) -> impl Iterator<Item = Key> {
        self.key.into_iter().chain(self.next.map(|n| n.kept))
    }

    /// The id released, or handed to the job kept for it, made now. True when a kept job
    /// was made (it is ready or delayed: the queue is not drained).
    #[inline]
    pub fn apply(&self, x: &Exec, events: &Events, sets: Sets) -> Result<bool, Refusal> {
        match &self.key {
            None => Ok(false),
            Some(key) => self.hand_on(x, events, sets, key),
        }
    }

    /// [`Release::apply`] of a held id. Kept out of line: a job without DEDUP never runs it.
    #[cold]
    #[inline(never)]
    fn hand_on(&self, x: &Exec, events: &Events, sets: Sets, key: &Key) -> Result<bool, Refusal> {
        let made = match self.next.as_deref() {
            Some(next) => {
                let made = match &next.job {
                    Some(job) => job.make(x, events, key, &next.dedup, sets)?,
                    None => false,
                };
                next.kept.delete();
                made
            }
            None => false,
        };
        if !made {
            key.delete();
        }
        Ok(made)
    }
}

impl KeptJob {
    /// The kept job read, checked and its keys opened; None when it cannot be created (no
    /// valid id, name or data; its row exists; its ALIAS is live), and is dropped.
    fn plan(x: &mut Exec, kept: &Key, sets: Sets) -> Result<Option<KeptJob>, Refusal> {
        let (mut id, mut lifo, mut delay) = (None, false, None);
        let mut fields: smallvec::SmallVec<[(&'static Lit, Str); 8]> = smallvec::SmallVec::new();
        kept.hscan(|name, value| {
            if name == kept::ID.bytes() {
                id = Some(value);
            } else if name == kept::LIFO.bytes() {
                lifo = true;
            } else if name == kept::DELAY.bytes() {
                delay = Some(domain::args::int(value.bytes()).filter(|d| *d >= 0));
            } else if let Some(f) = KEPT_FIELDS.iter().find(|f| f.bytes() == name) {
                fields.push((*f, value));
            }
        });
        let value = |f: &Lit| fields.iter().find(|(g, _)| std::ptr::eq(*g, f)).map(|(_, v)| v);
        // A number field: Some(None) when absent, None when present but not a number (the
        // kept job is then dropped, as it would be refused).
        let number = |v: Option<Option<i64>>| v.map_or(Some(None), |n| n.map(Some));
        let int = |f: &Lit| number(value(f).map(|v| domain::args::int(v.bytes())));
        let priority =
            int(&field::PRIORITY).map(|p| p.unwrap_or(0)).filter(|p| (0..=domain::PRIORITY_MAX).contains(p));
        let named = value(&field::NAME).is_some() && value(&field::DATA).is_some();
        let id = id.filter(|id| domain::job_id(id.bytes()).is_ok());
        let (Some(id), Some(priority), Some(delay), Some(expire), true) =
            (id, priority, number(delay), int(&field::EXPIRE), named)
        else {
            return Ok(None);
        };
        let alias = value(&field::ALIAS).map(|a| x.string(a.bytes())).transpose()?;
        let row = x.open_undeclared(Role::Job, id.bytes(), Access::Write)?;
        if row.kind() != Kind::Empty {
            return Ok(None);
        }
        let alias = match alias {
            Some(a) => {
                let h = Aliases::open(x)?;
                if h.live(a.str_ref()) {
                    return Ok(None);
                }
                Some((h, a))
            }
            None => None,
        };
        let ready = match (delay, sets.ready) {
            (None, None) => Some(Ready {
                wait: x.open_undeclared(Role::Wait, b"", Access::Update)?,
                prio: x.open_undeclared(Role::Prio, b"", Access::Update)?,
            }),
            _ => None,
        };
        if let Some(r) = &ready {
            r.wait.exists_as(Kind::List)?;
            r.prio.exists_as(Kind::ZSet)?;
        }
        let delayed = match (delay, sets.delayed) {
            (Some(_), None) => {
                let k = x.open_undeclared(Role::Delayed, b"", Access::Update)?;
                k.exists_as(Kind::ZSet)?;
                Some(k)
            }
            _ => None,
        };
        let mut job = KeptJob { id, row, fields, priority, lifo, delay, expire, alias, ready, delayed };
        job.close();
        Ok(Some(job))
    }

    /// The handles checked above, closed until the job is made: the call's writes in between
    /// may empty and delete those keys, and the server reads a handle's value when it closes
    /// it. [`KeptJob::make`] opens them again by name.
    fn close(&mut self) {
        self.row.close();
        if let Some((h, _)) = &mut self.alias {
            h.close();
        }
        if let Some(r) = &mut self.ready {
            r.wait.close();
            r.prio.close();
        }
        if let Some(k) = &mut self.delayed {
            k.close();
        }
    }

    /// Creates the job, holding `dedup` through `key`: its row, its alias entry, ready (or
    /// delayed), its event. False, and nothing written, when its row or ALIAS has been
    /// taken by the call since it was planned.
    fn make(&self, x: &Exec, events: &Events, key: &Key, dedup: &Str, sets: Sets) -> Result<bool, Refusal> {
        let row = self.row.reopen(true)?;
        let aliases = self.alias.as_ref().map(|(h, a)| h.reopen().map(|h| (h, a))).transpose()?;
        if row.kind() != Kind::Empty || aliases.as_ref().is_some_and(|(h, a)| h.live(a.str_ref())) {
            return Ok(false);
        }
        // Where it goes, resolved before the first write: the call's set, or the found one
        // opened again.
        let (own_ready, own_delayed) = match (self.delay, sets.ready, sets.delayed) {
            (None, None, _) => match &self.ready {
                Some(r) => (Some(Ready { wait: r.wait.reopen(true)?, prio: r.prio.reopen(true)? }), None),
                None => return Err(crate::errors::host_reply()),
            },
            (Some(_), _, None) => match &self.delayed {
                Some(k) => (None, Some(k.reopen(true)?)),
                None => return Err(crate::errors::host_reply()),
            },
            _ => (None, None),
        };
        let now = x.now();
        let due = self.delay.map(|d| now.saturating_add(d));
        let state = match due {
            Some(_) => State::Delayed,
            None if self.priority == 0 => State::Wait,
            None => State::Prio,
        };
        let created = x.int(now)?;
        let mut pairs: super::Pairs = smallvec::smallvec![(&field::STATE, state.lit().str_ref())];
        pairs.extend(self.fields.iter().map(|(f, v)| (*f, v.str_ref())));
        pairs.push((&field::CREATED, created.str_ref()));
        pairs.push((&field::DEDUP, dedup.str_ref()));
        row.hset(&pairs)?;
        if let Some(at) = self.expire {
            super::expiring(x, self.id.bytes(), at);
        }
        if let Some((h, a)) = &aliases {
            h.set(a.str_ref(), self.id.str_ref())?;
        }
        key.set_string(self.id.bytes())?;
        let id = self.id.str_ref();
        let name = self
            .fields
            .iter()
            .find(|(f, _)| std::ptr::eq(*f, &field::NAME))
            .map_or(StrRef::MISSING, |(_, v)| v.str_ref());
        let alias = self.alias.as_ref().map(|(_, a)| a.str_ref());
        match (due, sets.delayed.or(own_delayed.as_ref()), sets.ready.or(own_ready.as_ref())) {
            (Some(due), Some(set), _) => {
                set.zadd(due, id)?;
                events.emit(x, Some(id), Event::Scheduled { due, name, alias })?;
                super::due_at(x, due);
            }
            (None, _, Some(ready)) => {
                ready.put(id, self.priority, End::lifo(self.lifo))?;
                events.emit(x, Some(id), Event::Added { name, prio: self.priority, alias })?;
            }
            _ => return Err(crate::errors::host_reply()),
        }
        super::exists(x);
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::args::{options, Opt};

    const ALL: [Opt; 5] = [Opt::Dedup, Opt::DedupTtl, Opt::Extend, Opt::Replace, Opt::KeepLast];

    fn shaped(words: &[&[u8]]) -> Result<(), Refusal> {
        shape(&options(words, &ALL)?)
    }

    /// DEDUPTTL, EXTEND and REPLACE need DEDUP, EXTEND needs DEDUPTTL; any order otherwise.
    #[test]
    fn the_words_go_together() {
        for ok in [
            &[][..],
            &[&b"DEDUP"[..], b"a"],
            &[b"REPLACE", b"DEDUP", b"a"],
            &[b"extend", b"DEDUPTTL", b"5", b"DEDUP", b"a", b"REPLACE"],
        ] {
            assert_eq!(shaped(ok), Ok(()), "{ok:?}");
        }
        let alone = Refusal::Shape("DEDUPTTL, EXTEND, REPLACE and KEEPLAST go with DEDUP".into());
        assert_eq!(shaped(&[b"DEDUPTTL", b"5"]), Err(alone.clone()));
        assert_eq!(shaped(&[b"EXTEND", b"DEDUPTTL", b"5"]), Err(alone.clone()));
        assert_eq!(shaped(&[b"REPLACE"]), Err(alone.clone()));
        let extend = Refusal::Shape("EXTEND goes with DEDUPTTL".into());
        assert_eq!(shaped(&[b"DEDUP", b"a", b"EXTEND"]), Err(extend));
        assert_eq!(shaped(&[b"KEEPLAST"]), Err(alone));
        assert_eq!(shaped(&[b"keeplast", b"DEDUP", b"a", b"REPLACE"]), Ok(()));
        let keep = Refusal::Shape("KEEPLAST does not go with DEDUPTTL".into());
        assert_eq!(shaped(&[b"DEDUP", b"a", b"KEEPLAST", b"DEDUPTTL", b"5"]), Err(keep));
    }
}
