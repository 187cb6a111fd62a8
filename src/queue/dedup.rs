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

use crate::domain::{self, args::Options};
use crate::errors::Refusal;
use crate::host::{Access, ArgStr, Exec, Key, Kind, Str, StrRef};
use crate::keyspace::Role;

use super::{companions_of, field, Companions, Event, Events, State};

/// Longest deduplication id, in bytes (as an ALIAS).
pub const DEDUP_MAX: usize = 256;

/// A producer's DEDUP and its options, range-checked.
#[derive(Clone, Copy)]
pub struct Dedup<'a> {
    pub id: ArgStr<'a>,
    /// DEDUPTTL: 1..=TIME_MAX ms.
    pub ttl: Option<i64>,
    pub extend: bool,
    pub replace: bool,
    /// The producer's ALIAS, carried by its `deduplicated` event.
    pub alias: Option<ArgStr<'a>>,
}

/// DEDUPTTL, EXTEND and REPLACE go with DEDUP, and EXTEND with DEDUPTTL: a shape rule.
#[inline]
pub fn shape<S>(o: &Options<S>) -> Result<(), Refusal> {
    let Some(d) = o.dedup.as_deref() else { return Ok(()) };
    if d.id.is_none() {
        return Err(Refusal::Shape("DEDUPTTL, EXTEND and REPLACE go with DEDUP".into()));
    }
    if d.extend && d.ttl.is_none() {
        return Err(Refusal::Shape("EXTEND goes with DEDUPTTL".into()));
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
        let ttl = d.ttl.map(|t| domain::range(t, 1, domain::TIME_MAX, "DEDUPTTL")).transpose()?;
        Ok(Some(Dedup { id, ttl, extend: d.extend, replace: d.replace, alias: o.alias }))
    }

    /// The `deduplicated` event this producer's DEDUP writes: `refused` its own id, or
    /// `replaced` the holder it deleted.
    pub fn event<'s>(&'s self, refused: Option<StrRef<'s>>, replaced: Option<StrRef<'s>>) -> Event<'s> {
        Event::Deduplicated {
            dedup: self.id.str_ref(),
            refused,
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
    /// REPLACE, and the holder is delayed: it is deleted, the new job holds the id. `until`:
    /// the holder's expiry, kept when the new job gives DEDUPTTL without EXTEND.
    Replace { old: Str, row: Key, companions: Option<Companions>, until: Option<i64> },
}

/// A producer's DEDUP planned: the id's key opened as the caller, the verdict taken.
pub struct Claim<'a> {
    d: Dedup<'a>,
    key: Key,
    pub verdict: Verdict,
    /// The delayed set, found (ENQUEUE does not declare it), when REPLACE needs it.
    delayed: Option<Key>,
}

impl<'a> Claim<'a> {
    /// `delayed`: the call's declared delayed set, if it has one (a second handle on it
    /// would go stale when the first empties it). `ours`: ids the call writes rows for,
    /// which a REPLACE must not delete under them.
    pub fn plan(
        x: &mut Exec,
        d: Dedup<'a>,
        delayed: Option<&Key>,
        ours: &dyn Fn(&[u8]) -> bool,
    ) -> Result<Claim<'a>, Refusal> {
        let key = x.open_undeclared(Role::Dedup, d.id.bytes(), Access::Update)?;
        if !key.exists_as(Kind::String)? {
            return Ok(Claim { d, key, verdict: Verdict::Fresh, delayed: None });
        }
        let holder = x.string(key.string().unwrap_or_default())?;
        if !d.replace || ours(holder.bytes()) {
            return Ok(Claim { d, key, verdict: Verdict::Duplicate(holder), delayed: None });
        }
        let own = match delayed {
            Some(_) => None,
            None => {
                let k = x.open_undeclared(Role::Delayed, b"", Access::Update)?;
                k.exists_as(Kind::ZSet)?;
                Some(k)
            }
        };
        let set = delayed.or(own.as_ref());
        if set.and_then(|s| s.zscore(holder.str_ref())).is_none() {
            return Ok(Claim { d, key, verdict: Verdict::Duplicate(holder), delayed: None });
        }
        let row = x.open_undeclared(Role::Job, holder.bytes(), Access::Write)?;
        row.exists_as(Kind::Hash)?;
        let companions = companions_of(x, holder.bytes(), &row)?;
        let until = key.expires_at();
        let verdict = Verdict::Replace { old: holder, row, companions, until };
        Ok(Claim { d, key, verdict, delayed: own })
    }

    /// The holder's id when the id is live and nothing is to be created.
    pub fn duplicate(&self) -> Option<&Str> {
        match &self.verdict {
            Verdict::Duplicate(h) => Some(h),
            _ => None,
        }
    }

    /// A duplicate: the TTL restarted under EXTEND, the `deduplicated` event on the holder
    /// (`refused`: the id the producer gave).
    pub fn refuse(&self, x: &Exec, events: &Events, refused: &Str) -> Result<(), Refusal> {
        let Verdict::Duplicate(holder) = &self.verdict else { return Ok(()) };
        if let (true, Some(ttl)) = (self.d.extend, self.d.ttl) {
            self.key.set_abs_expire(x.now().saturating_add(ttl))?;
        }
        events.emit(x, Some(holder.str_ref()), self.d.event(Some(refused.str_ref()), None))
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
            Verdict::Duplicate(_) => return Ok(None),
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
        match self.verdict {
            Verdict::Replace { old, companions, .. } => {
                events.emit(x, Some(id.str_ref()), self.d.event(None, Some(old.str_ref())))?;
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
/// (a duplicate's event and EXTEND, or the id taken). Kept out of line: a producer without
/// DEDUP never runs it.
#[cold]
#[inline(never)]
pub fn produce(x: &mut Exec, d: Dedup, events: &Events, delayed: Option<&Key>) -> Result<Produced, Refusal> {
    let own = x.id;
    let claim = Claim::plan(x, d, delayed, &|h| h == own)?;
    let id = x.string(x.id)?;
    if claim.duplicate().is_some() {
        claim.refuse(x, events, &id)?;
        if let Verdict::Duplicate(holder) = claim.verdict {
            return Ok(Produced::Duplicate(holder));
        }
        return Err(crate::errors::host_reply());
    }
    Ok(Produced::Holds(claim.take(x, events, &id, delayed)?))
}

/// A row's deduplication id, released with it: planned and opened as the caller before
/// anything is written, deleted with the writes. A job without one costs one field read.
#[derive(Default)]
pub struct Release {
    key: Option<Key>,
}

impl Release {
    /// A job finishing (completed, failed for good, expired): its id is released unless it
    /// has a TTL, which it then lives out.
    pub fn finishing(x: &mut Exec, id: &[u8], row: &Key) -> Result<Release, Refusal> {
        Release::plan(x, id, row, false)
    }

    /// A job a client deletes (REMOVE, CLEAN, DRAIN, OBLITERATE): its id is released, TTL or
    /// not.
    pub fn removing(x: &mut Exec, id: &[u8], row: &Key) -> Result<Release, Refusal> {
        Release::plan(x, id, row, true)
    }

    /// [`Release::finishing`] for a caller that read the row's `de` with other fields.
    pub fn finishing_of(x: &mut Exec, id: &[u8], dedup: Option<Str>) -> Result<Release, Refusal> {
        Release::open(x, id, dedup, false)
    }

    fn plan(x: &mut Exec, id: &[u8], row: &Key, with_ttl: bool) -> Result<Release, Refusal> {
        Release::open(x, id, row.hget(&field::DEDUP), with_ttl)
    }

    fn open(x: &mut Exec, id: &[u8], dedup: Option<Str>, with_ttl: bool) -> Result<Release, Refusal> {
        let Some(dedup) = dedup else { return Ok(Release::default()) };
        let key = x.open_undeclared(Role::Dedup, dedup.bytes(), Access::Update)?;
        let names = key.kind() == Kind::String && key.string() == Some(id);
        let held = names && (with_ttl || key.expires_at().is_none());
        Ok(Release { key: held.then_some(key) })
    }

    /// The key to delete, for a caller that deletes its keys together.
    pub fn into_key(self) -> Option<Key> {
        self.key
    }

    pub fn apply(&self) {
        if let Some(k) = &self.key {
            k.delete();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::args::{options, Opt};

    const ALL: [Opt; 4] = [Opt::Dedup, Opt::DedupTtl, Opt::Extend, Opt::Replace];

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
        let alone = Refusal::Shape("DEDUPTTL, EXTEND and REPLACE go with DEDUP".into());
        assert_eq!(shaped(&[b"DEDUPTTL", b"5"]), Err(alone.clone()));
        assert_eq!(shaped(&[b"EXTEND", b"DEDUPTTL", b"5"]), Err(alone.clone()));
        assert_eq!(shaped(&[b"REPLACE"]), Err(alone));
        let extend = Refusal::Shape("EXTEND goes with DEDUPTTL".into());
        assert_eq!(shaped(&[b"DEDUP", b"a", b"EXTEND"]), Err(extend));
    }
}
