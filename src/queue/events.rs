//! The queue's events stream: one entry per transition, its name and its facts.

use crate::config;
use crate::errors::{self, Refusal};
use crate::host::{Exec, Key, Kind, Lit, Str, StrRef};
use crate::keyspace::Role;

use super::State;

/// The queue's events stream: `event <name> id <ID>` plus facts, capped with `MAXLEN ~`.
pub struct Events {
    /// Not even opened while events are off.
    key: Option<Key>,
    cap: i64,
}

/// One transition's event: its name and its facts (the reference page's events table).
pub enum Event<'s> {
    /// `name` is the call's own argument string: no copy.
    Added {
        name: StrRef<'s>,
        prio: i64,
        /// The job's ALIAS, when it has one.
        alias: Option<StrRef<'s>>,
    },
    /// SCHEDULE (and TRA.ADD's DELAY) created a delayed job: a `delayed` event that also
    /// names the job, so a consumer tells a new job from one put off.
    Scheduled {
        due: i64,
        name: StrRef<'s>,
        alias: Option<StrRef<'s>>,
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
    /// `result`: the job's result when the call asked for it (`ECHO`), else none. `alias`:
    /// the job's ALIAS when the finish deletes its row at once (the row that would tell a
    /// reader which job it was is gone), else none.
    Completed {
        attempt: i64,
        result: Option<StrRef<'s>>,
        alias: Option<StrRef<'s>>,
    },
    /// `attempts` is the job's max attempts (`a`, 1 by default): beside `attempt` it tells a
    /// consumer whether retries were exhausted. `alias` as for `Completed`.
    Failed {
        error: StrRef<'s>,
        attempt: i64,
        attempts: i64,
        alias: Option<StrRef<'s>>,
    },
    /// TRA.PRIORITY rewrote the job's priority.
    Priority {
        priority: i64,
    },
    Stalled {
        stalls: i64,
    },
    Paused,
    Resumed,
    /// Progress was reported; `value` the report when the call asked for it (`ECHO`),
    /// else none (the report is in the row).
    Progress {
        value: Option<StrRef<'s>>,
    },
    /// A finish left nothing ready or active in the queue (no id).
    Drained,
    /// TRA.DRAIN or TRA.CLEAN deleted `count` jobs (no id).
    Cleaned {
        count: i64,
    },
    /// The job was deleted (TRA.REMOVE, a REPLACE, a scheduler's change); `prev` the state it
    /// was in, `alias` its ALIAS when it had one.
    Removed {
        prev: State,
        alias: Option<StrRef<'s>>,
    },
    /// A producer's DEDUP id was live: on the holder, `refused` the id the producer gave (or
    /// `kept` it, KEEPLAST while the holder is active); or REPLACE replaced a delayed holder:
    /// on the new job, `replaced` the deleted one.
    Deduplicated {
        dedup: StrRef<'s>,
        refused: Option<StrRef<'s>>,
        /// The producer's job was kept, not refused: `refused` names it under `kept`.
        kept: bool,
        replaced: Option<StrRef<'s>>,
        /// The producer's ALIAS, if it gave one: a client that named its job by a key knows
        /// the refused or replacing job by that key, not by the branded id.
        alias: Option<StrRef<'s>>,
    },
}

pub(crate) mod word {
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
    /// The event a pause writes is named as the field that holds it.
    pub use crate::queue::meta::PAUSED;
    pub static RESUMED: Lit = Lit::new(c"resumed");
    pub static REMOVED: Lit = Lit::new(c"removed");
    pub static PROGRESS: Lit = Lit::new(c"progress");
    pub static CLEANED: Lit = Lit::new(c"cleaned");
    pub static DRAINED: Lit = Lit::new(c"drained");
    pub static RESULT: Lit = Lit::new(c"result");
    pub static COUNT: Lit = Lit::new(c"count");
    pub static NAME: Lit = Lit::new(c"name");
    pub static PRIO: Lit = Lit::new(c"prio");
    pub static DUE: Lit = Lit::new(c"due");
    pub static ALIAS: Lit = Lit::new(c"alias");
    pub static PREV: Lit = Lit::new(c"prev");
    pub static ATTEMPT: Lit = Lit::new(c"attempt");
    pub static ERROR: Lit = Lit::new(c"error");
    pub static STALLS: Lit = Lit::new(c"stalls");
    pub static ATTEMPTS: Lit = Lit::new(c"attempts");
    pub static PRIORITY: Lit = Lit::new(c"priority");
    pub static ZERO: Lit = Lit::new(c"0");
    pub static DEDUPLICATED: Lit = Lit::new(c"deduplicated");
    pub static DEDUP: Lit = Lit::new(c"dedup");
    pub static REFUSED: Lit = Lit::new(c"refused");
    pub static KEPT: Lit = Lit::new(c"kept");
    pub static REPLACED: Lit = Lit::new(c"replaced");
}

/// An event's facts before its alias: at most three.
type Facts<'l, 's> = [Option<(&'l Lit, Val<'s>)>; 3];

enum Val<'s> {
    Lit(&'static Lit),
    Str(StrRef<'s>),
    Int(i64),
}

impl Events {
    /// The call's declared events stream.
    pub fn open(x: &Exec) -> Result<Events, Refusal> {
        let cap = config::get(&config::EVENTS_MAXLEN);
        let key = if cap > 0 { Some(x.open_as(Role::Events, Kind::Stream)?) } else { None };
        Ok(Events { key, cap })
    }

    /// Whether events are on (the stream is written at all).
    pub fn on(&self) -> bool {
        self.key.is_some()
    }

    /// Append `e` for job `id` (no id for queue-wide events), then trim to the cap.
    pub fn emit(&self, x: &Exec, id: Option<StrRef<'_>>, e: Event<'_>) -> Result<(), Refusal> {
        let Some(key) = &self.key else { return Ok(()) };
        let (name, facts, alias) = e.facts();
        let mut own: [Option<Str>; 3] = [None, None, None];
        let mut argv: [StrRef; 12] = [StrRef::MISSING; 12];
        let mut n = 0;
        let mut push = |p| {
            if let Some(slot) = argv.get_mut(n) {
                *slot = p;
                n = n.saturating_add(1);
            }
        };
        push(word::EVENT.str_ref());
        push(name.str_ref());
        if let Some(id) = id {
            push(word::ID.str_ref());
            push(id);
        }
        for (fact, slot) in facts.into_iter().zip(own.iter_mut()) {
            let Some((k, v)) = fact else { continue };
            push(k.str_ref());
            let p = match v {
                Val::Lit(l) => l.str_ref(),
                Val::Str(p) => p,
                Val::Int(0) => word::ZERO.str_ref(),
                Val::Int(i) => slot.insert(x.int(i)?).str_ref(),
            };
            push(p);
        }
        if let Some(a) = alias {
            push(word::ALIAS.str_ref());
            push(a);
        }
        let fields = argv.get(..n).unwrap_or(&[]);
        if fields.iter().any(|p| p.is_missing()) {
            return Err(errors::host_reply());
        }
        key.xadd_quiet(fields)?;
        key.xtrim_approx(self.cap)
    }
}

impl<'s> Event<'s> {
    /// The event's name, up to three facts, and an alias (a string) after them.
    #[inline(always)]
    fn facts(self) -> (&'static Lit, Facts<'static, 's>, Option<StrRef<'s>>) {
        match self {
            Event::Added { name, prio, alias } => (
                &word::ADDED,
                [Some((&word::NAME, Val::Str(name))), Some((&word::PRIO, Val::Int(prio))), None],
                alias,
            ),
            Event::Delayed { due } => (&word::DELAYED, [Some((&word::DUE, Val::Int(due))), None, None], None),
            Event::Scheduled { due, name, alias } => (
                &word::DELAYED,
                [Some((&word::DUE, Val::Int(due))), Some((&word::NAME, Val::Str(name))), None],
                alias,
            ),
            Event::Waiting { prev } => {
                (&word::WAITING, [Some((&word::PREV, Val::Lit(prev.lit()))), None, None], None)
            }
            Event::Active { attempt } => {
                (&word::ACTIVE, [Some((&word::ATTEMPT, Val::Int(attempt))), None, None], None)
            }
            Event::Completed { attempt, result, alias } => (
                &word::COMPLETED,
                [
                    Some((&word::ATTEMPT, Val::Int(attempt))),
                    result.map(|r| (&word::RESULT, Val::Str(r))),
                    None,
                ],
                alias,
            ),
            Event::Failed { error, attempt, attempts, alias } => (
                &word::FAILED,
                [
                    Some((&word::ERROR, Val::Str(error))),
                    Some((&word::ATTEMPT, Val::Int(attempt))),
                    Some((&word::ATTEMPTS, Val::Int(attempts))),
                ],
                alias,
            ),
            Event::Priority { priority } => {
                (&word::PRIORITY, [Some((&word::PRIORITY, Val::Int(priority))), None, None], None)
            }
            Event::Stalled { stalls } => {
                (&word::STALLED, [Some((&word::STALLS, Val::Int(stalls))), None, None], None)
            }
            Event::Paused => (&word::PAUSED, [None, None, None], None),
            Event::Progress { value } => {
                (&word::PROGRESS, [value.map(|v| (&word::PROGRESS, Val::Str(v))), None, None], None)
            }
            Event::Drained => (&word::DRAINED, [None, None, None], None),
            Event::Cleaned { count } => {
                (&word::CLEANED, [Some((&word::COUNT, Val::Int(count))), None, None], None)
            }
            Event::Removed { prev, alias } => {
                (&word::REMOVED, [Some((&word::PREV, Val::Lit(prev.lit()))), None, None], alias)
            }
            Event::Resumed => (&word::RESUMED, [None, None, None], None),
            Event::Deduplicated { dedup, refused, kept, replaced, alias } => (
                &word::DEDUPLICATED,
                [
                    Some((&word::DEDUP, Val::Str(dedup))),
                    refused.map(|r| (if kept { &word::KEPT } else { &word::REFUSED }, Val::Str(r))),
                    replaced.map(|r| (&word::REPLACED, Val::Str(r))),
                ],
                alias,
            ),
        }
    }
}
