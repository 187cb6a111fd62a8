//! Finishing a job for good and retention of the finished sets: KEEP, AGE, the rows and logs
//! deleted with them.

use crate::config;
use crate::domain::{self, Keep};
use crate::errors::Refusal;
use crate::host::{Access, Exec, Key, Kind, Lit, Str, StrRef};
use crate::keyspace::Role;
use crate::metrics;

use super::alias::Unalias;
use super::{field, Pairs, State};

/// Retention of a finished set, decided and ACL-checked before anything is written and
/// carried out after: the oldest entries beyond `keep`, and with `age` those finished
/// before now−age, at most `trafikey.retention-batch` in one call.
pub struct Retire {
    ids: Vec<Str>,
    rows: Doomed,
    /// How many of the jobs being added are themselves beyond the cap (only when one call
    /// finishes more jobs than the cap keeps): the oldest of them — with one finish time,
    /// the lowest ids — are deleted at once instead of entering the set.
    pub drop_new: u64,
}

impl Retire {
    /// Plan for `set` as it will be once `adding` more jobs (finished now, so the newest)
    /// are in it: entries already there are retired oldest first, then, if the cap is below
    /// `adding`, `drop_new` of the jobs being added.
    ///
    /// `finishing`: the jobs the call moves into `set` (STALLED: every job it takes back),
    /// whose rows it holds open to write. Found in `set` already (written there by hand: no
    /// verb does it), such a job is not an old entry, and is passed over: a second handle
    /// deleting its row would leave the call's own on freed memory.
    pub fn plan(
        x: &mut Exec,
        set: &Key,
        adding: u64,
        now: i64,
        keep: Keep,
        age: Option<i64>,
        finishing: &[&[u8]],
    ) -> Result<Retire, Refusal> {
        let batch = u64::try_from(config::get(&config::RETENTION_BATCH)).unwrap_or(0);
        let by_count = domain::trim_count(set.len().saturating_add(adding), keep, batch);
        let cutoff = age.map(|a| now.saturating_sub(a));
        let mut ids: Vec<Str> = Vec::new();
        if by_count > 0 || cutoff.is_some() {
            // Compared in turn: a call finishes at most 50, and the walk stops at the batch.
            set.zwalk(f64::NEG_INFINITY, f64::INFINITY, |m, score| {
                if finishing.contains(&m.bytes()) {
                    return true;
                }
                let take = (ids.len() as u64) < by_count || cutoff.is_some_and(|c| score < c as f64);
                if take {
                    ids.push(m);
                }
                take && (ids.len() as u64) < batch
            });
        }
        let rows = doomed(x, &ids, false)?;
        let drop_new = by_count.saturating_sub(set.len()).min(adding);
        Ok(Retire { ids, rows, drop_new })
    }

    pub fn apply(self, set: &Key) {
        let members: Vec<_> = self.ids.iter().map(Str::str_ref).collect();
        set.zrem_many(&members);
        self.rows.delete();
        metrics::add(&metrics::RETIRED, (self.ids.len() as u64).saturating_add(self.drop_new));
    }
}

/// The rows of jobs a client deletes (DRAIN, CLEAN, OBLITERATE), found not declared: opened
/// as the caller for update (read, then deleted), each a hash or absent, before anything is written. Each row
/// goes with its job's log, if it has one, its alias entry, if it still names the job
/// (neither outlives its row), and its DEDUP id, if it still names the job (TTL or not).
/// An id met twice (a list holding it twice, or two sets holding it: no verb makes either, a
/// client can) is one job: its row is opened once, since a row deleted through one handle
/// leaves another pointing at freed memory. (Retention's ids come from one sorted set.)
pub fn doomed_rows(x: &mut Exec, ids: &[Str]) -> Result<Doomed, Refusal> {
    let keep = first_of_each(ids);
    let ids = ids
        .iter()
        .zip(keep)
        .filter(|(_, k)| *k)
        .map(|(m, _)| m.share().ok_or_else(crate::errors::host_reply))
        .collect::<Result<Vec<Str>, Refusal>>()?;
    doomed(x, &ids, true)
}

/// [`doomed_rows`]; retention (`undedup` false) leaves DEDUP ids alone: a finished job's id
/// was released when it finished, unless it has a TTL, which it lives out.
fn doomed(x: &mut Exec, ids: &[Str], undedup: bool) -> Result<Doomed, Refusal> {
    let mut rows = Vec::with_capacity(ids.len());
    for m in ids {
        rows.push(x.open_undeclared(Role::Job, m.bytes(), Access::Update)?);
    }
    doomed_opened(x, ids, rows, undedup)
}

/// [`doomed_rows`] for rows the call already opened for update (`rows[i]` is `ids[i]`'s,
/// opened with [`open_doomed`]): DRAIN reads each one's `rs` first.
pub fn doomed_rows_opened(x: &mut Exec, ids: &[Str], rows: Vec<Key>) -> Result<Doomed, Refusal> {
    if ids.len() != rows.len() {
        return Err(crate::errors::host_reply());
    }
    // Met twice: the later handles are closed here, before anything is written.
    let keep = first_of_each(ids);
    let pairs = ids
        .iter()
        .zip(rows)
        .zip(keep)
        .filter(|(_, k)| *k)
        .map(|((m, row), _)| m.share().map(|m| (m, row)).ok_or_else(crate::errors::host_reply))
        .collect::<Result<Vec<(Str, Key)>, Refusal>>()?;
    let (ids, rows): (Vec<Str>, Vec<Key>) = pairs.into_iter().unzip();
    doomed_opened(x, &ids, rows, true)
}

/// A row a call may delete, opened as the caller for update: its fields are read to find what goes with it (see [`doomed_rows_opened`]).
pub fn open_doomed(x: &mut Exec, id: &[u8]) -> Result<Key, Refusal> {
    x.open_undeclared(Role::Job, id, Access::Update)
}

fn doomed_opened(x: &mut Exec, ids: &[Str], rows: Vec<Key>, undedup: bool) -> Result<Doomed, Refusal> {
    let jobs = rows.len();
    let mut logs = Vec::new();
    for (m, row) in ids.iter().zip(&rows) {
        row.exists_as(Kind::Hash)?;
        if undedup {
            logs.extend(super::Release::removing(x, m.bytes(), row)?.into_keys());
        }
        logs.extend(x.open_undeclared_existing(Role::Log, m.bytes(), Access::Write)?);
    }
    let unalias = Unalias::plan(x, ids.iter().map(Str::bytes).zip(&rows))?;
    let mut rows = rows;
    rows.extend(logs);
    Ok(Doomed { keys: rows, unalias, jobs })
}

/// For each id, whether it is the first of its value: a few compared pairwise, more through
/// a set.
fn first_of_each(ids: &[Str]) -> Vec<bool> {
    if ids.len() <= 16 {
        return (0..ids.len())
            .map(|i| ids.get(i).is_some_and(|m| !ids.iter().take(i).any(|p| p.bytes() == m.bytes())))
            .collect();
    }
    let mut seen = std::collections::HashSet::with_capacity(ids.len());
    ids.iter().map(|m| seen.insert(m.bytes())).collect()
}

/// Rows (with their logs and alias entries) planned for deletion by [`doomed_rows`].
pub struct Doomed {
    keys: Vec<Key>,
    unalias: Unalias,
    jobs: usize,
}

impl Doomed {
    /// How many jobs' rows go (each once, however often its id was met).
    pub fn jobs(&self) -> usize {
        self.jobs
    }

    pub fn delete(&self) {
        self.unalias.apply();
        crate::host::store::delete_all(&self.keys);
    }
}

/// What goes with job `id`'s row when the row is deleted at once (KEEP 0, beyond the cap):
/// its log and its alias entry, opened as the caller; None when it has neither.
pub fn log_of(x: &mut Exec, id: &[u8]) -> Result<Option<Companions>, Refusal> {
    let log = x.open_undeclared_existing(Role::Log, id, Access::Write)?;
    let unalias = if x.undeclared_exists(Role::Alias, b"")? {
        let row = x.open_undeclared(Role::Job, id, Access::Update)?;
        Unalias::of_row(x, id, &row)?
    } else {
        Unalias::default()
    };
    Ok((log.is_some() || !unalias.is_empty()).then_some(Companions { log, unalias }))
}

/// [`log_of`] for a row the call has open (TRA.REMOVE): its `k` read from it.
pub fn companions_of(x: &mut Exec, id: &[u8], row: &Key) -> Result<Option<Companions>, Refusal> {
    let log = x.open_undeclared_existing(Role::Log, id, Access::Write)?;
    let unalias = Unalias::of_row(x, id, row)?;
    Ok((log.is_some() || !unalias.is_empty()).then_some(Companions { log, unalias }))
}

/// A job's log and alias entry, deleted with its row.
pub struct Companions {
    log: Option<Key>,
    unalias: Unalias,
}

impl Companions {
    /// The job's alias, when its entry is among them: for the event of a call that deletes
    /// the row. Free: deleting the entry read it.
    pub fn alias(&self) -> Option<StrRef<'_>> {
        self.unalias.first().map(Str::str_ref)
    }

    /// [`Companions::alias`], copied: for an event written after they are deleted.
    pub fn alias_of(x: &Exec, c: Option<&Companions>) -> Result<Option<Str>, Refusal> {
        c.and_then(|c| c.unalias.first()).map(|a| x.string(a.bytes())).transpose()
    }

    pub fn delete(self) {
        self.unalias.apply();
        if let Some(log) = self.log {
            log.delete();
        }
    }
}

/// A finished job's row, written for `finish::Ending` alone: into `set` (completed or failed,
/// score = now) with its state,
/// finish time and `fields`, the token cleared unless the job completed (COMPLETE keeps it
/// for its idempotent repeat) — or, under KEEP 0, the row deleted at once.
#[allow(clippy::too_many_arguments)]
pub(super) fn write_finished(
    x: &Exec,
    row: &Key,
    set: &Key,
    id: &Str,
    state: State,
    keep: Keep,
    fields: &[(&Lit, StrRef<'_>)],
    log: Option<Companions>,
) -> Result<(), Refusal> {
    let now = x.now();
    if keep == Keep::None {
        row.delete();
        if let Some(c) = log {
            c.delete();
        }
        return Ok(());
    }
    let finished = x.int(now)?;
    set.zadd_as(now, &finished, id.str_ref())?;
    let mut pairs: Pairs =
        smallvec::smallvec![(&field::STATE, state.lit().str_ref()), (&field::FINISHED, finished.str_ref())];
    pairs.extend_from_slice(fields);
    row.hset(&pairs)?;
    if state != State::Completed {
        row.hdel(&[&field::TOKEN])?;
    }
    Ok(())
}

/// The KEEP a finish uses: the call's, or the config default for that set.
pub fn keep_for(given: Option<i64>, default: &config::Int) -> Result<Keep, Refusal> {
    match given {
        Some(k) => domain::keep(k),
        None => Ok(domain::keep_default(config::get(default))),
    }
}

pub fn age(given: Option<i64>) -> Result<Option<i64>, Refusal> {
    given.map(|a| domain::AGE.check(a)).transpose()
}
