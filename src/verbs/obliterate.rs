//! `TRA.OBLITERATE 8 wait prio active delayed completed failed meta events [FORCE] [COUNT n]`
//! — deletes a whole queue, at most n keys a call (1..=10000, default 1000): its job
//! schedulers first (the `sched:<id>` hashes `scheds` names, and their entries), then the rows
//! of its jobs (taken from the sets, in this order: wait, prio, active, delayed, completed,
//! failed), then, once no job is left, the sets, `meta`, `events`, the alias hash and the
//! METRICS keys (`metrics:completed`, `metrics:failed` and their `:data`). Refuses with
//! `EMQSTATE` while jobs are active, unless FORCE (their holders then find no job). Replies the
//! number of keys still left (schedulers, rows and the queue's own keys): the client repeats
//! until 0; the queue then leaves `TRA.QUEUES`. Rows, `scheds`, the scheduler hashes, the
//! alias hash and the METRICS keys are opened as the caller. Fenced.

use crate::domain::{self, args::Opt};
use crate::errors::Refusal;
use crate::host::command::{flag, opt, q, Arg, Command, Keys, Spec::*, Ty};
use crate::host::{timer, Access, ArgStr, Exec, Key, Kind, Reply, Str, Verb};
use crate::keyspace::Role::*;
use crate::queue::doomed_rows;
use crate::registry;

pub const KEYS: Keys = Keys::of(&[
    q(Wait, Take),
    q(Prio, Take),
    q(Active, Take),
    q(Delayed, Take),
    q(Completed, Take),
    q(Failed, Take),
    q(Meta, Take),
    q(Events, Take),
]);
pub const ARGS: &[Arg] =
    &[flag("force", "FORCE"), opt("count", "COUNT", "n", Ty::Int).range(domain::DELETE_COUNT)];

/// The command, declared whole: registration, ACL, `COMMAND DOCS` and the reference take it
/// from here.
pub const COMMAND: Command = Command::new::<Obliterate>("TRA.OBLITERATE")
    .keys(KEYS)
    .args(ARGS)
    .writes()
    .summary(
        "Delete a whole queue, a bounded number of keys a call; refused while jobs are active unless FORCE.",
    )
    .complexity("O(n log N) for n keys");

pub struct Obliterate;

impl Verb for Obliterate {
    type Args<'a> = (bool, Option<i64>);

    fn shape(args: &[ArgStr]) -> Result<(bool, Option<i64>), Refusal> {
        let o = domain::args::options(args, &[Opt::Force, Opt::Count])?;
        Ok((o.force, o.count))
    }

    fn run(x: &mut Exec<'_>, (force, count): (bool, Option<i64>)) -> Result<Reply, Refusal> {
        let count = domain::delete_count(count)?;
        let mut budget = count;
        let wait = x.open_as(Wait, Kind::List)?;
        let mut zsets = Vec::with_capacity(5);
        for role in [Prio, Active, Delayed, Completed, Failed] {
            zsets.push((role, x.open_as(role, Kind::ZSet)?));
        }
        let meta = x.open_as(Meta, Kind::Hash)?;
        let events = x.open_as(Events, Kind::Stream)?;
        // The alias hash is found, not declared: checked as the caller when there is one, before
        // anything is written. Its handle is closed at once: deleting the rows deletes their
        // entries through a handle of its own, which may empty the hash, and a handle opened
        // before that would still point at the hash it held.
        drop(x.open_undeclared_existing(Alias, b"", Access::Write)?);
        let metrics = metrics_keys(x)?;
        let active_len = zsets.iter().find(|(r, _)| *r == Active).map_or(0, |(_, k)| k.len());
        if active_len > 0 && !force {
            return Err(Refusal::State(format!("queue has {active_len} active jobs: give FORCE")));
        }
        // The queue's job schedulers go first, so that none makes an iteration while the
        // queue is being deleted.
        let schedulers = Schedulers::read(x, budget)?;
        budget = budget.saturating_sub(schedulers.ids.len());
        // Read first: the ids whose rows go in this call, and those rows, as the caller.
        let from_wait: Vec<Vec<u8>> = match budget.min(usize::try_from(wait.len()).unwrap_or(usize::MAX)) {
            0 => Vec::new(),
            n => wait.range_read(c"LRANGE", (n as i64).saturating_neg(), -1, None)?,
        };
        budget = budget.saturating_sub(from_wait.len());
        let mut ids: Vec<Str> = Vec::new();
        for id in &from_wait {
            ids.push(x.string(id)?);
        }
        let mut from_sets: Vec<Vec<Str>> = Vec::with_capacity(zsets.len());
        for (_, set) in &zsets {
            let taken: Vec<Str> =
                set.zrange(f64::NEG_INFINITY, f64::INFINITY, budget).into_iter().map(|(m, _)| m).collect();
            budget = budget.saturating_sub(taken.len());
            from_sets.push(taken);
        }
        let doomed: Vec<Str> = ids.iter().chain(from_sets.iter().flatten()).filter_map(Str::share).collect();
        let rows = doomed_rows(x, &doomed)?;
        // Write: the schedulers, the rows and their entries; the queue's own keys once no job
        // is left.
        let scheds_left = schedulers.delete();
        wait.rpop_drop(from_wait.len());
        for ((_, set), taken) in zsets.iter().zip(&from_sets) {
            set.zrem_many(&taken.iter().map(Str::str_ref).collect::<Vec<_>>());
        }
        rows.delete();
        let alias = x.open_undeclared_existing(Alias, b"", Access::Write)?;
        let jobs_left = zsets.iter().fold(wait.len(), |n, (_, k)| n.saturating_add(k.len()));
        let own: Vec<&Key> = std::iter::once(&wait)
            .chain(zsets.iter().map(|(_, k)| k))
            .chain([&meta, &events])
            .chain(&alias)
            .chain(&metrics)
            .collect();
        let keys_left = if jobs_left == 0 {
            delete_within(&own, &mut budget)
        } else {
            own.iter().filter(|k| k.kind() != Kind::Empty).count() as u64
        };
        let left = jobs_left.saturating_add(keys_left).saturating_add(scheds_left);
        if left == 0 {
            registry::forget(&(timer::selected(x.ctx()), x.queue.to_vec()));
        }
        Ok(Reply::Int(i64::try_from(left).unwrap_or(i64::MAX)))
    }
}

/// The queue's METRICS keys that exist, opened as the caller (found, not declared).
fn metrics_keys(x: &mut Exec<'_>) -> Result<Vec<Key>, Refusal> {
    let mut keys = Vec::new();
    for suffix in [&b"completed"[..], b"completed:data", b"failed", b"failed:data"] {
        keys.extend(x.open_undeclared_existing(Metrics, suffix, Access::Write)?);
    }
    Ok(keys)
}

/// `scheds` and the `sched:<id>` hashes it names, found and opened as the caller, each
/// hash counted against the call's budget.
struct Schedulers {
    scheds: Option<Key>,
    ids: Vec<Str>,
    hashes: Vec<Key>,
}

impl Schedulers {
    fn read(x: &mut Exec<'_>, budget: usize) -> Result<Schedulers, Refusal> {
        let scheds = x.open_undeclared_existing(Scheds, b"", Access::Update)?;
        let (mut ids, mut hashes) = (Vec::new(), Vec::new());
        if let Some(z) = &scheds {
            z.exists_as(Kind::ZSet)?;
            for (sid, _) in z.zrange(f64::NEG_INFINITY, f64::INFINITY, budget) {
                if domain::sched::scheduler_id(sid.bytes()).is_ok() {
                    hashes.push(x.open_undeclared(Sched, sid.bytes(), Access::Write)?);
                }
                ids.push(sid);
            }
        }
        Ok(Schedulers { scheds, ids, hashes })
    }

    /// Deletes them; returns how many schedulers are left for a later call.
    fn delete(&self) -> u64 {
        for h in &self.hashes {
            h.delete();
        }
        match &self.scheds {
            Some(z) => {
                z.zrem_many(&self.ids.iter().map(Str::str_ref).collect::<Vec<_>>());
                z.len()
            }
            None => 0,
        }
    }
}

/// Deletes each of the queue's own keys that exists while `budget` lasts; returns how many
/// are left.
fn delete_within(own: &[&Key], budget: &mut usize) -> u64 {
    let mut left = 0u64;
    for k in own {
        if k.kind() != Kind::Empty {
            if *budget > 0 {
                k.delete();
                *budget = budget.saturating_sub(1);
            } else {
                left = left.saturating_add(1);
            }
        }
    }
    left
}
