//! Finishing jobs for good, the one way every call does it: COMPLETE, TRA.COMPLETES and the
//! finish-and-fetch verbs (a batch of held jobs into `completed`, COMPLETE being the batch of
//! one), and FAIL's final failure, STALLED past its stalls and a CLAIM meeting expired jobs
//! (into `failed`). [`Ending`] is what they share: retention planned for the jobs together,
//! each row kept in its set or deleted at once with its log and alias entry, its DEDUP id
//! released (bringing in a job kept for it), its minute counted — all planned before the
//! first write, so a refused call writes nothing.

use crate::config;
use crate::domain::{self, args::Options, Keep};
use crate::errors::Refusal;
use crate::host::{ArgStr, Exec, Key, Kind, Lit, Str, StrRef};

/// A call's per-job lists: on the stack for the usual few jobs (COMPLETE finishes one), so
/// a finish pays no allocation for them.
pub type Few<T> = smallvec::SmallVec<[T; 4]>;
/// Per-job lists moved whole between the steps of a finish: in line for one job (COMPLETE,
/// FAIL), where each move is a copy of what is in line.
pub type One<T> = smallvec::SmallVec<[T; 1]>;

use super::{
    drains, field, keep_for, log_of, Companions, Event, Events, Ready, Release, Retire, Row, Sets, State,
    Tally,
};

/// How a call finishes its jobs: KEEP and AGE (retention), ECHO (the event carries the
/// result), METRICS (the jobs counted by the minute). COMPLETE's options; FAIL shares all but
/// ECHO.
#[derive(Clone, Copy, Default)]
pub struct Finishing {
    pub keep: Option<i64>,
    pub age: Option<i64>,
    pub echo: bool,
    pub metrics: Option<i64>,
}

impl Finishing {
    pub fn of<S>(o: &Options<S>) -> Finishing {
        Finishing { keep: o.keep, age: o.age, echo: o.echo, metrics: o.metrics }
    }

    /// The options' ranges, before any key is opened: the KEEP to use (the call's, or
    /// `default`'s), AGE, METRICS.
    pub fn check(&self, default: &config::Int) -> Result<(Keep, Option<i64>), Refusal> {
        let keep = keep_for(self.keep, default)?;
        let age = super::age(self.age)?;
        super::tally::check(self.metrics)?;
        Ok((keep, age))
    }
}

/// The checks of a finish's entries, in the order of the domain step: each id through the
/// gate, then how many (`count`), each token and result, and no id given twice.
pub fn check_entries<'a>(
    ids: &[&[u8]],
    entries: impl Iterator<Item = (&'a ArgStr<'a>, &'a ArgStr<'a>)>,
    count: impl FnOnce(usize) -> Result<(), Refusal>,
) -> Result<(), Refusal> {
    for id in ids {
        domain::job_id(id)?;
    }
    count(ids.len())?;
    let payload_max = config::max_payload();
    for (token, result) in entries {
        domain::token(token)?;
        domain::payload(result, payload_max, "result")?;
    }
    if ids.len() > 1 {
        let mut sorted = ids.to_vec();
        sorted.sort_unstable();
        if sorted.windows(2).any(|w| w.first() == w.get(1)) {
            return Err(Refusal::Arg("an id given twice".into()));
        }
    }
    Ok(())
}

/// What one entry of a batch finish came to.
pub const DONE: i64 = 1;
/// The same token finished it already: a repeat after a lost reply, nothing written.
pub const REPEAT: i64 = 0;
/// Not held with that token (COMPLETE's `EMQLEASE`).
pub const NOT_HELD: i64 = -1;
/// No such job (COMPLETE's `EMQNOJOB`).
pub const NO_JOB: i64 = -2;

/// A job a batch finishes: its id, its row (open, and whether it exists), the token that
/// should hold it and its result.
pub struct Held<'a> {
    pub id: Str,
    pub row: Key,
    pub exists: bool,
    pub token: ArgStr<'a>,
    pub result: ArgStr<'a>,
}

/// Whether a finish writes `drained` itself (COMPLETE), or leaves it to its caller, which
/// knows more after it (the finish-and-fetch verbs claim next; TRA.COMPLETES writes none).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Drained {
    Ask,
    Leave,
}

/// The keys a batch finish writes, open: `active`, `completed` and the events stream. A
/// caller that claims after the finish keeps `active` and the stream for its claim.
pub struct Writes<'k> {
    pub active: &'k Key,
    pub completed: &'k Key,
    pub events: &'k Events,
}

/// Each job as COMPLETE finishes it, answered by a code: [`DONE`], [`REPEAT`], [`NOT_HELD`],
/// [`NO_JOB`]. Everything is read and checked first, then written; nothing is written when no
/// job finishes. Retention counts the batch's finished jobs together, as one COMPLETE of them
/// all would. `sets`: the ready sets the call has open, through which jobs kept for the
/// finished jobs' DEDUP ids are made. `keep` and `age` as [`Finishing::check`] gave them.
pub fn finish_held(
    x: &mut Exec,
    held: &mut [Held],
    how: &Finishing,
    (keep, age): (Keep, Option<i64>),
    into: Writes,
    sets: Sets,
    drained: Drained,
) -> Result<Few<i64>, Refusal> {
    let fates = fates(held, into.active);
    let finishing = fates.iter().filter(|f| **f == DONE).count();
    if finishing == 0 {
        // Nothing finishes: nothing is written, retention included.
        return Ok(fates);
    }
    // Per job: attempts made once it finishes, read with its DEDUP id.
    let mut made_of: Few<i64> = Few::with_capacity(held.len());
    let mut ending: One<Option<(&[u8], Option<Str>)>> = One::with_capacity(held.len());
    for (h, fate) in held.iter().zip(&fates) {
        if *fate == DONE {
            let [made, dedup, ..] = h.row.hget_many(&[&field::MADE, &field::DEDUP]);
            made_of.push(made.and_then(|m| domain::args::int(m.bytes())).unwrap_or(0).saturating_add(1));
            ending.push(Some((h.id.bytes(), dedup)));
        } else {
            made_of.push(0);
            ending.push(None);
        }
    }
    let n = i64::try_from(finishing).unwrap_or(i64::MAX);
    let tally = Tally::open(x, super::Tallied::Completed, how.metrics, n)?;
    let done: Few<&[u8]> = ending.iter().flatten().map(|(id, _)| *id).collect();
    let mut end = Ending::plan(x, into.completed, keep, age, ending, &done, tally, sets)?;
    drop(done);
    let drains = drained == Drained::Ask && into.events.on() && drains(x, into.active, finishing);
    if held.iter().any(|h| h.result.str_ref().is_missing()) {
        return Err(crate::errors::host_reply());
    }

    // Write.
    let taken: Few<_> =
        held.iter().zip(&fates).filter(|(_, f)| **f == DONE).map(|(h, _)| h.id.str_ref()).collect();
    into.active.zrem_many(&taken);
    drop(taken);
    into.active.signal_ready();
    for (i, ((h, fate), made)) in held.iter().zip(&fates).zip(made_of).enumerate() {
        if *fate != DONE {
            continue;
        }
        let made_s = x.int(made)?;
        let result = h.result.str_ref();
        let fields = [(&field::RESULT, result), (&field::MADE, made_s.str_ref())];
        let alias = end.end(x, i, &h.row, into.completed, &h.id, State::Completed, &fields)?;
        let echoed = how.echo.then_some(result);
        let alias = alias.as_ref().map(|a| a.str_ref());
        into.events.emit(
            x,
            Some(h.id.str_ref()),
            Event::Completed { attempt: made, result: echoed, alias },
        )?;
    }
    // The other entries' rows closed before retention deletes rows through its own (a
    // repeat's row sits in `completed`, where retention may delete it); a finished job's row
    // retention passes over (`open`).
    for (h, fate) in held.iter_mut().zip(&fates) {
        if *fate != DONE {
            h.row.close();
        }
    }
    let brought = end.close(x, into.completed, into.events, sets)?;
    // A job kept for a DEDUP id made ready (or delayed): the queue is not drained.
    if drains && !brought {
        into.events.emit(x, None, Event::Drained)?;
    }
    Ok(fates)
}

/// Each entry's code, from its row and `active`: held when the row says active with this
/// token and `active` agrees.
fn fates(held: &[Held], active: &Key) -> Few<i64> {
    held.iter()
        .map(|h| {
            if !h.exists {
                NO_JOB
            } else if Row(&h.row).held_by(&h.token) && active.zscore(h.id.str_ref()).is_some() {
                DONE
            } else if Row(&h.row).completed_by(&h.token) {
                REPEAT
            } else {
                NOT_HELD
            }
        })
        .collect()
}

/// Jobs of one call leaving for good into `set` (`completed` or `failed`), planned before
/// anything is written: the set's retention for them together, which of them go at once
/// (KEEP 0, or beyond the cap: the lowest ids, the oldest with one finish time) with their
/// logs and alias entries, their DEDUP ids released, their minute counted. The call then
/// writes each job's row with [`Ending::end`] (and its event), and [`Ending::close`] last.
pub struct Ending {
    retire: Retire,
    keep: Keep,
    /// Per job of the call: whether it ends here.
    ends: Few<bool>,
    /// The ending jobs deleted at once (KEEP 0, or beyond the cap), by their index in the
    /// call, with what goes with each; the usual finish has none and allocates nothing.
    gone: Vec<(usize, Option<Companions>)>,
    /// The DEDUP ids released; a job without one adds nothing.
    releases: Vec<Release>,
    /// Boxed: a finish without METRICS moves only the empty pointer.
    tally: Option<Box<Tally>>,
}

impl Ending {
    /// `ending`: per job of the call, its id and DEDUP id when it ends here, None when it
    /// does not (a batch entry refused, a stalled job requeued). `open`: the ids of every row
    /// the call holds open, which retention must not delete through a handle of its own.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub fn plan(
        x: &mut Exec,
        set: &Key,
        keep: Keep,
        age: Option<i64>,
        ending: One<Option<(&[u8], Option<Str>)>>,
        open: &[&[u8]],
        tally: Option<Tally>,
        sets: Sets,
    ) -> Result<Ending, Refusal> {
        let n = ending.iter().flatten().count() as u64;
        let adding = if keep == Keep::None { 0 } else { n };
        let retire = Retire::plan(x, set, adding, x.now(), keep, age, open)?;
        // Kept in the set, every one, unless KEEP 0 or the batch overflows retention's cap.
        let gone = if keep == Keep::None || retire.drop_new > 0 {
            let ids: Few<Option<&[u8]>> = ending.iter().map(|e| e.as_ref().map(|(id, _)| *id)).collect();
            domain::gone_at_once(&ids, retire.drop_new, keep == Keep::None)
        } else {
            smallvec::smallvec![false; ending.len()]
        };
        let mut ends = Few::with_capacity(ending.len());
        let (mut gone_now, mut releases) = (Vec::new(), Vec::new());
        for (i, e) in ending.into_iter().enumerate() {
            ends.push(e.is_some());
            let Some((id, dedup)) = e else { continue };
            if gone.get(i).copied().unwrap_or(false) {
                gone_now.push((i, log_of(x, id)?));
            }
            let release = Release::finishing_of(x, id, dedup, sets)?;
            if !release.is_empty() {
                releases.push(release);
            }
        }
        Ok(Ending { retire, keep, ends, gone: gone_now, releases, tally: tally.map(Box::new) })
    }

    /// Job `i` of the call ends: its row into `set` with `state` and `fields`, or deleted at
    /// once with its companions. Returns the alias its event names it by when the row went at
    /// once (the entry read as it was deleted).
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub fn end(
        &mut self,
        x: &Exec,
        i: usize,
        row: &Key,
        set: &Key,
        id: &Str,
        state: State,
        fields: &[(&Lit, StrRef<'_>)],
    ) -> Result<Option<Str>, Refusal> {
        if !self.ends.get(i).copied().unwrap_or(false) {
            return Err(crate::errors::host_reply());
        }
        // In the call's order, so sorted by index.
        let (keep, log) = match self.gone.binary_search_by_key(&i, |(j, _)| *j) {
            Ok(at) => (Keep::None, self.gone.get_mut(at).and_then(|(_, log)| log.take())),
            Err(_) => (self.keep, None),
        };
        let alias = Companions::alias_of(x, log.as_ref())?;
        super::retention::write_finished(x, row, set, id, state, keep, fields, log)?;
        Ok(alias)
    }

    /// After every job's row: the DEDUP ids released (a job kept for one made ready or
    /// delayed through `sets`), retention applied, the minute counted. True when a kept job
    /// was brought in.
    #[inline]
    pub fn close(self, x: &Exec, set: &Key, events: &Events, sets: Sets) -> Result<bool, Refusal> {
        let mut brought = false;
        for r in &self.releases {
            brought |= r.apply(x, events, sets)?;
        }
        self.retire.apply(set);
        if let Some(t) = &self.tally {
            t.apply(x)?;
        }
        Ok(brought)
    }
}

/// After a finish and a claim that found nothing: `drained` when nothing is ready, active or
/// delayed. A worker that fetches is drained only when no job will come to it without a new
/// one: a retry waiting out its backoff, or a scheduler's next iteration, is work to come.
/// (COMPLETE, which fetches nothing, does not look at `delayed`.) The sets are opened again
/// for this alone, the claim having closed its handles.
pub fn drained_if_idle(x: &mut Exec) -> Result<(), Refusal> {
    let events = Events::open(x)?;
    let (ready, active) = (Ready::open(x)?, x.open_as(crate::keyspace::Role::Active, Kind::ZSet)?);
    if events.on()
        && active.len() == 0
        && ready.wait.len() == 0
        && ready.prio.len() == 0
        && x.open_as(crate::keyspace::Role::Delayed, Kind::ZSet)?.len() == 0
    {
        events.emit(x, None, Event::Drained)?;
    }
    Ok(())
}
