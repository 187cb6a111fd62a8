//! `TRA.ADD 4 wait prio delayed events n job:<ID1> … job:<IDn> job…` — ENQUEUE (or, with
//! `DELAY when`, SCHEDULE) of n jobs of one queue in one call, each job
//! `name data k option…` with k the number of option words after it: ENQUEUE's options
//! (PRIORITY ATTEMPTS BACKOFF OPTS EXPIRE LIFO ALIAS DEDUP DEDUPTTL EXTEND REPLACE KEEPLAST)
//! and `DELAY when`, which makes it a scheduled job (LIFO then is refused, as SCHEDULE does
//! not take it). The rows are keys of the call, after `n` (a key spec reads the count there),
//! so ACL and the server see each; they are `emq:{Q}:job:<ID>` of the call's queue.
//! 1 ≤ n ≤ 250. All or nothing: every id, range, row and the alias hash is checked before the
//! first write, and any refusal writes nothing. Replies one integer per job, in order: 1
//! created, 0 existed — its row exists, an earlier job of the call has its id, or its ALIAS is
//! live (or taken by an earlier job of the call). A job whose DEDUP id is live answers the
//! holder's id instead (`deduplicated` event), as does a later job of the call giving the id
//! an earlier one took; REPLACE replaces only a holder outside the call; of the call's jobs
//! that KEEPLAST would keep for one id, the last is kept. Each created job has ENQUEUE's or
//! SCHEDULE's event. Fenced.

use crate::domain::{self, args::Opt, args::Options, fnv::FnvMap, fnv::FnvSet};
use crate::errors::Refusal;
use crate::host::command::{block, q, val, Arg, Command, Keys, Spec::*, Ty};
use crate::host::{ArgStr, Exec, Kind, Reply, Verb};
use crate::keyspace::Role::*;
use crate::queue::dedup::Keeping;
use crate::queue::{self, Aliases, Claim, End, Event, Events, NewJob, Ready, State};

pub const KEYS: Keys = Keys::of(&[q(Wait, Insert), q(Prio, Insert), q(Delayed, Insert), q(Events, Append)]);
pub const ARGS: &[Arg] = &[block(
    "job",
    None,
    &[
        val("name", Ty::Str),
        val("data", Ty::Str),
        val("k", Ty::Int).range(OPTION_WORDS),
        val("option", Ty::Str).optional().multiple(),
    ],
)
.multiple()];

/// `k`: the option words after a job's data, at most as many as every option it may give at
/// once (all but LIFO, which DELAY excludes, and KEEPLAST, which DEDUPTTL excludes); more is
/// `EMQSHAPE`, as no job can give them.
pub const OPTION_WORDS: domain::Range = domain::Range::new("k", 0, 21);

/// The options a job of TRA.ADD takes.
const OPTIONS: &[Opt] = &[
    Opt::Priority,
    Opt::Attempts,
    Opt::Backoff,
    Opt::Opts,
    Opt::Expire,
    Opt::Lifo,
    Opt::Alias,
    Opt::Delay,
    Opt::Dedup,
    Opt::DedupTtl,
    Opt::Extend,
    Opt::Replace,
    Opt::KeepLast,
];

/// A DEDUP id an earlier job of the bulk add decided.
struct Held {
    /// The job that holds it.
    holder: Vec<u8>,
    /// The job of the call that carries its KEEPLAST claim, if one does.
    keeper: Option<usize>,
    /// The job whose fate carries the id's claim: the first to meet it, or that keeper.
    claim_at: usize,
}

/// A job of the call as decided before the first write.
enum Fate<'a> {
    /// Not created: its row exists, an earlier job has its id, or its ALIAS is live.
    Exists,
    /// Created, holding its DEDUP id when it gives one.
    New(Option<Box<Claim<'a>>>),
    /// Its DEDUP id is live: the holder's id. `claim`: the id's key when this job is the
    /// first of the call to find it live, or the last to keep a job for it (the EXTENDs of
    /// the call's later jobs for the id restart the TTL through it).
    Dup { holder: Vec<u8>, claim: Option<Box<Claim<'a>>> },
}

/// The command, declared whole: registration, ACL, `COMMAND DOCS` and the reference take it
/// from here.
pub const COMMAND: Command = Command::new::<Add>("TRA.ADD")
    .keys(KEYS)
    .tail(Job, Insert, domain::ADD_ROWS)
    .args(ARGS)
    .creates()
    .summary("Create up to 250 jobs of one queue at once, all or nothing: 1 created or 0 existed for each.")
    .complexity("O(n log N) for n jobs");

pub struct Add;

pub struct Job<'a> {
    name: ArgStr<'a>,
    data: ArgStr<'a>,
    o: Options<ArgStr<'a>>,
}

/// `name data k option…`, repeated to the end.
fn jobs<'a>(mut args: &[ArgStr<'a>]) -> Result<Vec<Job<'a>>, Refusal> {
    let mut out = Vec::with_capacity(args.len() / 3);
    while let [name, data, k, rest @ ..] = args {
        let k = domain::args::number(k, "k")?;
        if !OPTION_WORDS.contains(k) {
            return Err(Refusal::Usage);
        }
        let opts = usize::try_from(k).ok().and_then(|k| rest.get(..k)).ok_or(Refusal::Usage)?;
        let o = domain::args::options(opts, OPTIONS)?;
        if o.lifo && o.delay.is_some() {
            return Err(Refusal::Shape("LIFO does not go with DELAY".into()));
        }
        queue::dedup::shape(&o)?;
        out.push(Job { name: *name, data: *data, o });
        args = rest.get(opts.len()..).unwrap_or(&[]);
    }
    if args.is_empty() {
        Ok(out)
    } else {
        Err(Refusal::Usage)
    }
}

impl Verb for Add {
    type Args<'a> = Vec<Job<'a>>;

    fn shape<'a>(args: &[ArgStr<'a>]) -> Result<Vec<Job<'a>>, Refusal> {
        jobs(args)
    }

    /// One job for each row key.
    fn shape_tail<'a>(args: &[ArgStr<'a>], keys: usize) -> Result<Vec<Job<'a>>, Refusal> {
        let jobs = jobs(args)?;
        if jobs.len() != keys {
            return Err(Refusal::Shape(format!("{keys} row keys but {} jobs", jobs.len())));
        }
        Ok(jobs)
    }

    fn run<'a>(x: &mut Exec<'a>, jobs: Vec<Job<'a>>) -> Result<Reply, Refusal> {
        let rows: Vec<_> = x.tail().collect();
        for (_, id) in &rows {
            domain::job_id(id)?;
        }
        domain::ADD_ROWS.check(i64::try_from(rows.len()).unwrap_or(i64::MAX))?;
        let now = x.now();
        // Every row of the call is created at the same instant: one string for all.
        let created_at = x.int(now)?;
        let mut checked = Vec::with_capacity(jobs.len());
        for j in &jobs {
            let job = NewJob::check(j.name, j.data, &j.o, now)?;
            let due = j.o.delay.map(|w| domain::due(w, now)).transpose()?;
            checked.push((job, due, j.o.lifo));
        }
        let ready = Ready::open(x)?;
        let delayed = x.open_as(Delayed, Kind::ZSet)?;
        let events = Events::open(x)?;
        let aliases =
            if checked.iter().any(|(j, ..)| j.alias.is_some()) { Some(Aliases::open(x)?) } else { None };

        // Decide each job before the first write: every row opened and type-checked, every
        // DEDUP id's key opened as the caller.
        // The call's ids, which a REPLACE leaves alone: gathered only when a job gives DEDUP.
        let tail_ids: FnvSet<&[u8]> = if checked.iter().any(|(j, ..)| j.dedup.is_some()) {
            rows.iter().map(|(_, id)| *id).collect()
        } else {
            FnvSet::default()
        };
        let mut keys = Vec::with_capacity(rows.len());
        let mut fates = Vec::with_capacity(rows.len());
        let mut ids: FnvSet<&[u8]> = FnvSet::with_capacity_and_hasher(rows.len(), Default::default());
        let mut named: FnvSet<&[u8]> = FnvSet::default();
        // DEDUP ids decided by an earlier job of the call.
        let mut held: FnvMap<&[u8], Held> = FnvMap::default();
        // DEDUP ids a job of the call gives KEEPLAST: the first job to meet one live plans the
        // keep, and the claim passes to each later job with KEEPLAST, so that the last is kept.
        let keeps: FnvSet<&[u8]> = checked
            .iter()
            .filter_map(|(j, ..)| j.dedup.as_deref().filter(|d| d.keep_last).map(|d| d.id.bytes()))
            .collect();
        for ((name, id), (job, ..)) in rows.iter().zip(&checked) {
            let row = x.open_tail(*name, true);
            let exists = row.exists_as(Kind::Hash)?;
            let alias_free = match (job.alias, &aliases) {
                (Some(a), Some(h)) => !named.contains(a.bytes()) && !h.live(a.str_ref()),
                _ => true,
            };
            let new = !exists && !ids.contains(id) && alias_free;
            let fate = match (new, job.dedup.as_deref().copied()) {
                (false, _) => Fate::Exists,
                (true, None) => Fate::New(None),
                (true, Some(d)) => match held.get_mut(d.id.bytes()) {
                    Some(Held { holder, keeper, claim_at }) => {
                        let claim = match (*keeper, d.keep_last) {
                            (Some(i), true) => {
                                *keeper = Some(fates.len());
                                *claim_at = fates.len();
                                match fates.get_mut(i) {
                                    Some(Fate::Dup { claim, .. }) => claim.take().map(Claim::handed_on),
                                    _ => None,
                                }
                            }
                            _ => {
                                if let Some(Fate::Dup { claim: Some(c), .. } | Fate::New(Some(c))) =
                                    fates.get_mut(*claim_at)
                                {
                                    c.extend_later(&d);
                                }
                                None
                            }
                        };
                        Fate::Dup { holder: holder.clone(), claim }
                    }
                    None => {
                        let plan = queue::dedup::Dedup { keep_last: keeps.contains(d.id.bytes()), ..d };
                        let claim =
                            Box::new(Claim::plan(x, plan, Some(&delayed), &|h| tail_ids.contains(h))?);
                        let holder = claim.duplicate().map(|h| h.bytes().to_vec());
                        let keeper = claim.keeps().then_some(fates.len());
                        let holder_id = holder.clone().unwrap_or_else(|| id.to_vec());
                        held.insert(d.id.bytes(), Held { holder: holder_id, keeper, claim_at: fates.len() });
                        match holder {
                            Some(holder) => Fate::Dup { holder, claim: Some(claim) },
                            None => Fate::New(Some(claim)),
                        }
                    }
                },
            };
            if matches!(fate, Fate::New(_)) {
                ids.insert(id);
                named.extend(job.alias.map(|a| a.bytes()));
            }
            keys.push(row);
            fates.push(fate);
        }

        // Write.
        let mut created = false;
        let mut reply = Vec::with_capacity(rows.len());
        let mut replaced = Vec::new();
        for ((((_, id), (job, due, lifo)), row), fate) in rows.iter().zip(&checked).zip(&keys).zip(fates) {
            if matches!(fate, Fate::Exists) {
                reply.push(Reply::Int(0));
                continue;
            }
            let id_s = x.string(id)?;
            let claim = match fate {
                Fate::Exists => continue,
                Fate::Dup { holder, claim } => {
                    let keep_last = job.dedup.as_deref().is_some_and(|d| d.keep_last);
                    match (claim, job.dedup.as_deref()) {
                        (Some(c), _) if c.keeps() && keep_last => {
                            c.keep(x, &events, &id_s, &Keeping { job, lifo: *lifo, due: *due })?
                        }
                        (Some(c), _) if !c.keeps() => c.refuse(x, &events, &id_s)?,
                        (_, Some(d)) => {
                            let holder = x.string(&holder)?;
                            events.emit(
                                x,
                                Some(holder.str_ref()),
                                d.event(Some(id_s.str_ref()), false, None),
                            )?;
                        }
                        (_, None) => {}
                    }
                    reply.push(Reply::Bulk(holder));
                    continue;
                }
                Fate::New(claim) => claim,
            };
            if let Some(c) = claim {
                replaced.extend(c.take(x, &events, &id_s, Some(&delayed))?);
            }
            let alias = job.alias.map(|a| a.str_ref());
            match due {
                None => {
                    let state = if job.priority == 0 { State::Wait } else { State::Prio };
                    job.create(x, row, id, state, created_at.str_ref())?;
                    super::enqueue::name_alias(aliases.as_ref(), job, &id_s)?;
                    ready.put(id_s.str_ref(), job.priority, End::lifo(*lifo))?;
                    let name = job.name.str_ref();
                    events.emit(x, Some(id_s.str_ref()), Event::Added { name, prio: job.priority, alias })?;
                }
                Some(due) => {
                    job.create(x, row, id, State::Delayed, created_at.str_ref())?;
                    super::enqueue::name_alias(aliases.as_ref(), job, &id_s)?;
                    delayed.zadd(*due, id_s.str_ref())?;
                    let name = job.name.str_ref();
                    events.emit(x, Some(id_s.str_ref()), Event::Scheduled { due: *due, name, alias })?;
                    queue::due_at(x, *due);
                }
            }
            created = true;
            reply.push(Reply::Int(1));
        }
        // The replaced holders' logs and alias entries, once every alias of the call is written
        // and the call's handle on the alias hash is closed: deleting its last entry deletes the
        // hash, which that handle (open whenever a job gives ALIAS, written or not) would read.
        drop(aliases);
        for c in replaced {
            c.delete();
        }
        if created {
            queue::exists(x);
        }
        Ok(Reply::Array(reply))
    }
}
