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
use crate::host::{ArgStr, Exec, Key, Kind, Reply, Str, StrRef, Verb};
use crate::keyspace::Role::*;
use crate::queue::dedup::Keeping;
use crate::queue::{self, Aliases, DedupClaim, End, Event, Events, NewJob, Ready, State};

pub const KEYS: Keys = Keys::of(&[q(Wait, Insert), q(Prio, Insert), q(Delayed, Insert), q(Events, Append)]);
pub const ARGS: &[Arg] = &[block(
    "job",
    None,
    &[
        val("name", Ty::Str),
        val("data", Ty::Str).payload(),
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
    New(Option<Box<DedupClaim<'a>>>),
    /// Its DEDUP id is live: the holder's id. `claim`: the id's key when this job is the
    /// first of the call to find it live, or the last to keep a job for it (the EXTENDs of
    /// the call's later jobs for the id restart the TTL through it).
    Dup { holder: Vec<u8>, claim: Option<Box<DedupClaim<'a>>> },
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
        let rows: Vec<(StrRef<'a>, &'a [u8])> = x.tail().collect();
        let now = x.now();
        let checked = check(&rows, &jobs, now)?;
        let ready = Ready::open(x)?;
        let delayed = x.open_as(Delayed, Kind::ZSet)?;
        let events = Events::open(x)?;
        let aliases =
            if checked.iter().any(|c| c.job.alias.is_some()) { Some(Aliases::open(x)?) } else { None };
        let (keys, fates) = decide(x, &rows, &checked, aliases.as_ref(), &delayed)?;

        // Write.
        let w = Writing { ready: &ready, delayed: &delayed, events: &events, aliases: aliases.as_ref() };
        // Every row of the call is created at the same instant: one string for all.
        let created_at = x.int(now)?;
        let mut created = false;
        let mut reply = Vec::with_capacity(rows.len());
        let mut replaced = Vec::new();
        for ((((_, id), c), row), fate) in rows.iter().zip(&checked).zip(&keys).zip(fates) {
            let id_s = match fate {
                Fate::Exists => {
                    reply.push(Reply::Int(0));
                    continue;
                }
                _ => x.string(id)?,
            };
            match fate {
                Fate::Exists => {}
                Fate::Dup { holder, claim } => reply.push(w.duplicate(x, c, &id_s, holder, claim)?),
                Fate::New(claim) => {
                    if let Some(claim) = claim {
                        replaced.extend(claim.take(x, &events, &id_s, Some(&delayed))?);
                    }
                    w.create(x, c, row, id, &id_s, &created_at)?;
                    created = true;
                    reply.push(Reply::Int(1));
                }
            }
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

/// A job of the call, its values checked: the job, its due time (DELAY), LIFO.
struct Checked<'a> {
    job: NewJob<'a>,
    due: Option<i64>,
    lifo: bool,
}

/// The domain step's checks, before any key is opened: every row key's id, their count, then
/// each job's values.
fn check<'a>(
    rows: &[(StrRef<'a>, &'a [u8])],
    jobs: &[Job<'a>],
    now: i64,
) -> Result<Vec<Checked<'a>>, Refusal> {
    for (_, id) in rows {
        domain::job_id(id)?;
    }
    domain::ADD_ROWS.check(i64::try_from(rows.len()).unwrap_or(i64::MAX))?;
    let mut checked = Vec::with_capacity(jobs.len());
    for j in jobs {
        let job = NewJob::check(j.name, j.data, &j.o, now)?;
        let due = j.o.delay.map(|w| domain::due(w, now)).transpose()?;
        checked.push(Checked { job, due, lifo: j.o.lifo });
    }
    Ok(checked)
}

/// Decides each job before the first write: every row opened and type-checked, every DEDUP
/// id's key opened as the caller. Returns the rows' handles and the jobs' fates.
fn decide<'a>(
    x: &mut Exec<'a>,
    rows: &[(StrRef<'a>, &'a [u8])],
    checked: &[Checked<'a>],
    aliases: Option<&Aliases>,
    delayed: &Key,
) -> Result<(Vec<Key>, Vec<Fate<'a>>), Refusal> {
    let mut d = Deciding {
        // The call's ids, which a REPLACE leaves alone: gathered only when a job gives DEDUP.
        tail_ids: if checked.iter().any(|c| c.job.dedup.is_some()) {
            rows.iter().map(|(_, id)| *id).collect()
        } else {
            FnvSet::default()
        },
        held: FnvMap::default(),
        // DEDUP ids a job of the call gives KEEPLAST: the first job to meet one live plans
        // the keep, and the claim passes to each later job with KEEPLAST, so that the last
        // is kept.
        keeps: checked
            .iter()
            .filter_map(|c| c.job.dedup.as_deref().filter(|d| d.keep_last).map(|d| d.id.bytes()))
            .collect(),
        fates: Vec::with_capacity(rows.len()),
    };
    let mut keys = Vec::with_capacity(rows.len());
    let mut ids: FnvSet<&[u8]> = FnvSet::with_capacity_and_hasher(rows.len(), Default::default());
    let mut named: FnvSet<&[u8]> = FnvSet::default();
    for ((name, id), c) in rows.iter().zip(checked) {
        let row = x.open_tail(*name, true);
        let exists = row.exists_as(Kind::Hash)?;
        let alias_free = match (c.job.alias, aliases) {
            (Some(a), Some(h)) => !named.contains(a.bytes()) && !h.live(a.str_ref()),
            _ => true,
        };
        let new = !exists && !ids.contains(id) && alias_free;
        let fate = match (new, c.job.dedup.as_deref().copied()) {
            (false, _) => Fate::Exists,
            (true, None) => Fate::New(None),
            (true, Some(dedup)) => d.dedup(x, id, dedup, delayed)?,
        };
        if matches!(fate, Fate::New(_)) {
            ids.insert(id);
            named.extend(c.job.alias.map(|a| a.bytes()));
        }
        keys.push(row);
        d.fates.push(fate);
    }
    Ok((keys, d.fates))
}

/// What [`decide`] knows of the call's DEDUP ids as it goes.
struct Deciding<'a> {
    tail_ids: FnvSet<&'a [u8]>,
    /// DEDUP ids decided by an earlier job of the call.
    held: FnvMap<&'a [u8], Held>,
    keeps: FnvSet<&'a [u8]>,
    fates: Vec<Fate<'a>>,
}

impl<'a> Deciding<'a> {
    /// The fate of a new job giving DEDUP `d`: decided by an earlier job of the call, or
    /// planned now against the id's key.
    fn dedup(
        &mut self,
        x: &mut Exec,
        id: &[u8],
        d: queue::dedup::Dedup<'a>,
        delayed: &Key,
    ) -> Result<Fate<'a>, Refusal> {
        let here = self.fates.len();
        if let Some(Held { holder, keeper, claim_at }) = self.held.get_mut(d.id.bytes()) {
            let claim = match (*keeper, d.keep_last) {
                (Some(i), true) => {
                    *keeper = Some(here);
                    *claim_at = here;
                    match self.fates.get_mut(i) {
                        Some(Fate::Dup { claim, .. }) => claim.take().map(DedupClaim::handed_on),
                        _ => None,
                    }
                }
                _ => {
                    if let Some(Fate::Dup { claim: Some(c), .. } | Fate::New(Some(c))) =
                        self.fates.get_mut(*claim_at)
                    {
                        c.extend_later(&d);
                    }
                    None
                }
            };
            return Ok(Fate::Dup { holder: holder.clone(), claim });
        }
        let plan = queue::dedup::Dedup { keep_last: self.keeps.contains(d.id.bytes()), ..d };
        let tail_ids = &self.tail_ids;
        let claim = Box::new(DedupClaim::plan(x, plan, Some(delayed), &|h| tail_ids.contains(h))?);
        let holder = claim.duplicate().map(|h| h.bytes().to_vec());
        let keeper = claim.keeps().then_some(here);
        let holder_id = holder.clone().unwrap_or_else(|| id.to_vec());
        self.held.insert(d.id.bytes(), Held { holder: holder_id, keeper, claim_at: here });
        Ok(match holder {
            Some(holder) => Fate::Dup { holder, claim: Some(claim) },
            None => Fate::New(Some(claim)),
        })
    }
}

/// The keys the writes go through.
struct Writing<'k> {
    ready: &'k Ready,
    delayed: &'k Key,
    events: &'k Events,
    aliases: Option<&'k Aliases>,
}

impl Writing<'_> {
    /// A job whose DEDUP id is live: kept (KEEPLAST), refused with its event, or named in the
    /// holder's `deduplicated` event. Replies the holder's id.
    fn duplicate(
        &self,
        x: &Exec,
        c: &Checked,
        id_s: &Str,
        holder: Vec<u8>,
        claim: Option<Box<DedupClaim>>,
    ) -> Result<Reply, Refusal> {
        let dedup = c.job.dedup.as_deref();
        let keep_last = dedup.is_some_and(|d| d.keep_last);
        match (claim, dedup) {
            (Some(claim), _) if claim.keeps() && keep_last => {
                claim.keep(x, self.events, id_s, &Keeping { job: &c.job, lifo: c.lifo, due: c.due })?
            }
            (Some(claim), _) if !claim.keeps() => claim.refuse(x, self.events, id_s)?,
            (_, Some(d)) => {
                let holder = x.string(&holder)?;
                self.events.emit(x, Some(holder.str_ref()), d.event(Some(id_s.str_ref()), false, None))?;
            }
            (_, None) => {}
        }
        Ok(Reply::Bulk(holder))
    }

    /// A new job: its row, its ALIAS, its place (ready, or delayed until its due time), its
    /// event.
    fn create(
        &self,
        x: &Exec,
        c: &Checked,
        row: &Key,
        id: &[u8],
        id_s: &Str,
        created_at: &Str,
    ) -> Result<(), Refusal> {
        let job = &c.job;
        let alias = job.alias.map(|a| a.str_ref());
        let name = job.name.str_ref();
        match c.due {
            None => {
                let state = if job.priority == 0 { State::Wait } else { State::Prio };
                job.create(x, row, id, state, created_at.str_ref())?;
                queue::alias::name_alias(self.aliases, job, id_s)?;
                self.ready.put(id_s.str_ref(), job.priority, End::lifo(c.lifo))?;
                self.events.emit(
                    x,
                    Some(id_s.str_ref()),
                    Event::Added { name, prio: job.priority, alias },
                )?;
            }
            Some(due) => {
                job.create(x, row, id, State::Delayed, created_at.str_ref())?;
                queue::alias::name_alias(self.aliases, job, id_s)?;
                self.delayed.zadd(due, id_s.str_ref())?;
                self.events.emit(x, Some(id_s.str_ref()), Event::Scheduled { due, name, alias })?;
                queue::due_at(x, due);
            }
        }
        Ok(())
    }
}
