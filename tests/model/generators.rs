//! The generators: symbolic steps, resolved against the model and the clock when run.

use super::*;

#[derive(Clone, Debug)]
pub enum IdC {
    Pool(usize),
    Bad(usize),
    /// The k-th (mod n) job the model has in active, else `Pool(k)`.
    Active(usize),
    /// The k-th job in delayed, else `Pool(k)`.
    Delayed(usize),
    /// The k-th job in completed or failed, else `Pool(k)`.
    Finished(usize),
}

#[derive(Clone, Debug)]
pub enum TokC {
    /// The token the row carries now (the holder's, or the completer's), else `w1`.
    Holder,
    /// The token of the job's last claim, cleared or not.
    Last,
    Pool(usize),
    Empty,
    /// 129 bytes.
    Long,
}

#[derive(Clone, Debug)]
pub enum ClaimTok {
    /// A token never used before.
    Fresh,
    Pool(usize),
    Empty,
    Long,
}

/// A claim's `BY`: one of two worker names, the longest name, or a refused one.
#[derive(Clone, Copy, Debug)]
pub enum ByC {
    Named(bool),
    Longest,
    Empty,
    Long,
}

impl ByC {
    pub fn name(self) -> Vec<u8> {
        match self {
            ByC::Named(first) => {
                if first {
                    b"w-a".to_vec()
                } else {
                    b"w-b".to_vec()
                }
            }
            ByC::Longest => vec![b'w'; NAME_MAX],
            ByC::Empty => vec![],
            ByC::Long => vec![b'w'; NAME_MAX + 1],
        }
    }
}

#[derive(Clone, Debug)]
pub enum WhenC {
    /// `+ms`.
    In(i64),
    /// Absolute: this many ms before the clock read just before the step.
    Ago(i64),
    /// Absolute: this many ms after it.
    Ahead(i64),
    /// Absolute, literally.
    Abs(i64),
}

/// Bytes that print as escaped text in a failing sequence.
#[derive(Clone)]
pub struct B(pub Vec<u8>);
impl std::fmt::Debug for B {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&show(&self.0))
    }
}

/// FAIL's decision, symbolic (DELAY's `when` resolved against the clock).
#[derive(Clone, Debug)]
pub enum DecisionC {
    Backoff,
    Final,
    Retry(bool),
    Delay(WhenC),
    Clash,
    LifoAlone,
}

#[derive(Clone, Debug)]
pub struct JobC {
    pub name: B,
    pub data: B,
    pub priority: Option<i64>,
    pub attempts: Option<i64>,
    pub backoff: Option<Backoff>,
    pub expire: Option<WhenC>,
    pub alias: Option<B>,
    pub dedup: Option<DedupC>,
}

impl JobC {
    /// A job named `alpha` with data `{}` and no option: the fixed cases' job.
    pub fn plain() -> JobC {
        JobC {
            name: B(b"alpha".to_vec()),
            data: B(b"{}".to_vec()),
            priority: None,
            attempts: None,
            backoff: None,
            expire: None,
            alias: None,
            dedup: None,
        }
    }
}

/// DEDUP as generated: an id (from a few, so they collide; or out of range), a TTL (long
/// enough never to run out during a case, or 0, out of range), EXTEND (only with a TTL, as
/// the shape rule wants), REPLACE.
#[derive(Clone, Debug)]
pub struct DedupC {
    pub id: B,
    pub ttl: Option<i64>,
    pub extend: bool,
    pub replace: bool,
}

/// With `share`, every job of a bulk add gives the first DEDUP of the call's id (its own
/// TTL, EXTEND and REPLACE if it gave DEDUP, else the first's REPLACE, and EXTEND with a TTL
/// 1 s longer than the first's when it has one), so that one call meets an id several times: its later EXTENDs, its REPLACEs, the
/// holders the call makes.
fn share_dedup(mut jobs: Vec<AddC>, share: bool) -> Vec<AddC> {
    let first = jobs.iter().find_map(|(_, j, ..)| j.dedup.clone());
    if let (true, Some(first)) = (share, first) {
        for (_, j, ..) in jobs.iter_mut() {
            match j.dedup.as_mut() {
                Some(d) => d.id = first.id.clone(),
                None => {
                    let ttl = first.ttl.filter(|t| *t > 0).map(|t| t + 1000);
                    j.dedup = Some(DedupC { ttl, extend: ttl.is_some(), ..first.clone() })
                }
            }
        }
    }
    jobs
}

/// Which job one TRA.COMPLETES entry names.
#[derive(Clone, Debug)]
pub enum EntryId {
    /// The next held job this call has not named yet, else the next pool id it has not
    /// named (distinct ids: the call is not refused for a repeat).
    Next,
    /// Any choice, so an id may come twice.
    Any(IdC),
}

/// One TRA.COMPLETES entry: which job, which token, the result.
pub type Entry = (EntryId, TokC, B);

/// One job of TRA.ADD: its id, the job, LIFO, `DELAY when`.
pub type AddC = (IdC, JobC, bool, Option<WhenC>);

#[derive(Clone, Debug)]
pub enum Op {
    SchedSet {
        sid: u8,
        every: i64,
        offset: Option<i64>,
        limit: Option<i64>,
        named: bool,
        lc: bool,
    },
    SchedDel {
        sid: u8,
        lc: bool,
    },
    Add {
        jobs: Vec<AddC>,
        lc: bool,
    },
    Enqueue {
        id: IdC,
        job: JobC,
        lifo: bool,
        lc: bool,
    },
    Schedule {
        id: IdC,
        when: WhenC,
        job: JobC,
        lc: bool,
    },
    Claim {
        tok: ClaimTok,
        lease: i64,
        count: Option<i64>,
        row: bool,
        by: Option<ByC>,
        lc: bool,
    },
    Pause(bool, bool),
    Extend {
        id: IdC,
        tok: TokC,
        lease: i64,
    },
    Extends {
        lease: i64,
        pairs: Vec<(IdC, TokC)>,
    },
    Complete {
        id: IdC,
        tok: TokC,
        result: B,
        keep: Option<i64>,
        age: Option<i64>,
        echo: bool,
        metrics: Option<i64>,
        lc: bool,
    },
    /// TRA.COMPLETENEXT: COMPLETE, then CLAIM with the same token.
    CompleteNext {
        id: IdC,
        tok: TokC,
        result: B,
        lease: i64,
        keep: Option<i64>,
        echo: bool,
        metrics: Option<i64>,
        count: Option<i64>,
        row: bool,
        by: Option<ByC>,
    },
    Promote {
        id: IdC,
    },
    Reschedule {
        id: IdC,
        when: WhenC,
    },
    Delay {
        id: IdC,
        tok: TokC,
        when: WhenC,
    },
    Fail {
        id: IdC,
        tok: TokC,
        error: B,
        keep: Option<i64>,
        age: Option<i64>,
        decision: DecisionC,
        stack: Option<B>,
        metrics: Option<i64>,
        lc: bool,
    },
    Reprocess {
        id: IdC,
        /// FROM: Some(true) completed, Some(false) failed.
        from: Option<bool>,
        keep_made: bool,
        keep_started: bool,
        keep_progress: bool,
        lifo: bool,
    },
    Priority {
        id: IdC,
        priority: i64,
        lifo: bool,
    },
    /// A client sets (Some) or deletes (None) the queue's own `max-stalls` in `meta`.
    MetaStalls(Option<B>),
    /// A client moves a METRICS counter's minute back by `minutes` (kind 0 completed, 1 failed).
    MetricsBack {
        kind: usize,
        minutes: i64,
    },
    Requeue {
        id: IdC,
        tok: TokC,
    },
    Stalled {
        max_stalls: Option<i64>,
        count: Option<i64>,
        lc: bool,
    },
    Progress {
        id: IdC,
        tok: TokC,
        progress: B,
        echo: bool,
    },
    /// TRA.SETPROGRESS: any job, no token.
    SetProgress {
        id: IdC,
        progress: B,
        echo: bool,
    },
    /// TRA.SETDATA: any job, no token.
    SetData {
        id: IdC,
        data: B,
    },
    /// TRA.ADDLOG: any job, no token.
    AddLog {
        id: IdC,
        line: B,
        keep: Option<i64>,
    },
    Log {
        id: IdC,
        tok: TokC,
        line: B,
        keep: Option<i64>,
    },
    Remove {
        id: IdC,
        force: bool,
    },
    Drain {
        delayed: bool,
        count: Option<i64>,
        lc: bool,
    },
    Clean {
        failed: bool,
        grace: i64,
        count: Option<i64>,
    },
    Obliterate {
        force: bool,
        count: Option<i64>,
    },
    Job {
        id: IdC,
    },
    Counts,
    /// TRA.LIMIT, with values in and out of range; TRA.LIMITS.
    Limit(LimitArg, bool),
    Limits,
    Jobs {
        set: usize,
        from: Option<i64>,
        count: Option<i64>,
        rev: bool,
        lc: bool,
    },
    /// TRA.COMPLETES; `fill`: padded with entries for jobs that do not exist (distinct ids
    /// outside the pool) to this many entries (100 is the most one call takes).
    Completes {
        entries: Vec<Entry>,
        fill: Option<usize>,
    },
    /// TRA.COMPLETESNEXT: entries as TRA.COMPLETES's, then a claim of one job for each
    /// finished (or repeated) with the call's claim token.
    CompletesNext {
        entries: Vec<Entry>,
        fill: Option<usize>,
        claim: ClaimTok,
        lease: i64,
        keep: Option<i64>,
        age: Option<i64>,
        echo: bool,
        metrics: Option<i64>,
        row: bool,
        by: Option<ByC>,
    },
    /// Real waiting, ms.
    Sleep(u64),
}

pub struct Resolver<'a> {
    pub m: &'a Model,
    pub pool: usize,
    pub clock: i64,
    pub fresh: &'a mut u64,
}

impl Resolver<'_> {
    pub fn id(&self, c: &IdC) -> Vec<u8> {
        let pick = |ids: Vec<&Vec<u8>>, k: usize| {
            if ids.is_empty() {
                pool_id(k % self.pool)
            } else {
                ids[k % ids.len()].clone()
            }
        };
        match c {
            IdC::Pool(i) => pool_id(*i % self.pool),
            IdC::Bad(i) => BAD_IDS[*i].to_vec(),
            IdC::Active(k) => pick(self.m.active.keys().collect(), *k),
            IdC::Delayed(k) => pick(self.m.delayed.keys().collect(), *k),
            IdC::Finished(k) => pick(self.m.completed.keys().chain(self.m.failed.keys()).collect(), *k),
        }
    }
    /// A claim's token: a fresh one, one of the pool's, or one out of range.
    pub fn claim_token(&mut self, tok: &ClaimTok) -> Vec<u8> {
        match tok {
            ClaimTok::Fresh => {
                *self.fresh += 1;
                format!("c{}", self.fresh).into_bytes()
            }
            ClaimTok::Pool(i) => TOKENS[*i].to_vec(),
            ClaimTok::Empty => vec![],
            ClaimTok::Long => vec![b't'; TOKEN_MAX + 1],
        }
    }

    /// TRA.COMPLETES's (and TRA.COMPLETESNEXT's) entries: the explicit choices first (two
    /// of them may name one job: refused), then each `Next` a job none of the others names;
    /// `fill` pads with jobs that do not exist.
    pub fn triples(&self, entries: &[Entry], fill: Option<usize>) -> Vec<(Vec<u8>, Vec<u8>, Vec<u8>)> {
        let chosen: Vec<Option<Vec<u8>>> = entries
            .iter()
            .map(|(e, _, _)| match e {
                EntryId::Any(c) => Some(self.id(c)),
                EntryId::Next => None,
            })
            .collect();
        let mut named: BTreeSet<Vec<u8>> = chosen.iter().flatten().cloned().collect();
        let mut held: Vec<Vec<u8>> = self.m.active.keys().cloned().collect();
        let mut triples = Vec::new();
        for ((_, t, r), c) in entries.iter().zip(chosen) {
            let id = c.unwrap_or_else(|| {
                held.retain(|h| !named.contains(h));
                let spare = (0..self.pool).map(pool_id).find(|p| !named.contains(p));
                if held.is_empty() {
                    spare.unwrap_or_else(|| pool_id(0))
                } else {
                    held.remove(0)
                }
            });
            named.insert(id.clone());
            triples.push((id.clone(), self.tok(t, &id), r.0.clone()));
        }
        let mut k = 0u64;
        while fill.is_some_and(|f| triples.len() < f) {
            triples.push((jid(900_000 + k).into_bytes(), TOKENS[0].to_vec(), b"ok".to_vec()));
            k += 1;
        }
        triples
    }

    pub fn tok(&self, c: &TokC, id: &[u8]) -> Vec<u8> {
        match c {
            TokC::Holder => {
                self.m.rows.get(id).and_then(|r| r.token.clone()).unwrap_or_else(|| TOKENS[0].to_vec())
            }
            TokC::Last => self.m.last_token.get(id).cloned().unwrap_or_else(|| TOKENS[0].to_vec()),
            TokC::Pool(i) => TOKENS[*i].to_vec(),
            TokC::Empty => vec![],
            TokC::Long => vec![b't'; TOKEN_MAX + 1],
        }
    }
    pub fn when(&self, c: &WhenC) -> WhenArg {
        match c {
            WhenC::In(d) => WhenArg::In(*d),
            WhenC::Ago(d) => WhenArg::At(self.clock - d),
            WhenC::Ahead(d) => WhenArg::At(self.clock + d),
            WhenC::Abs(t) => WhenArg::At(*t),
        }
    }
    pub fn job(&self, j: &JobC) -> NewJob {
        NewJob {
            name: j.name.0.clone(),
            data: j.data.0.clone(),
            priority: j.priority,
            attempts: j.attempts,
            backoff: j.backoff,
            expire: j.expire.as_ref().map(|w| self.when(w)),
            alias: j.alias.as_ref().map(|k| k.0.clone()),
            dedup: j.dedup.as_ref().map(|d| DedupArg {
                id: d.id.0.clone(),
                ttl: d.ttl,
                extend: d.extend && d.ttl.is_some(),
                replace: d.replace,
            }),
        }
    }

    /// The concrete call, and whether option words go in lower case.
    pub fn call(&mut self, op: &Op) -> (Call, bool) {
        match op {
            Op::SchedSet { sid, every, offset, limit, named, lc } => (
                Call::SchedSet {
                    sid: sched_id(*sid),
                    every: *every,
                    offset: *offset,
                    limit: *limit,
                    name: if *named { b"tick".to_vec() } else { Vec::new() },
                    data: b"{}".to_vec(),
                },
                *lc,
            ),
            Op::SchedDel { sid, lc } => (Call::SchedDel { sid: sched_id(*sid) }, *lc),
            Op::Enqueue { id, job, lifo, lc } => {
                (Call::Enqueue { id: self.id(id), job: self.job(job), lifo: *lifo }, *lc)
            }
            Op::Schedule { id, when, job, lc } => {
                (Call::Schedule { id: self.id(id), when: self.when(when), job: self.job(job) }, *lc)
            }
            Op::Add { jobs, lc } => {
                let jobs = jobs
                    .iter()
                    .map(|(id, job, lifo, delay)| AddJob {
                        id: self.id(id),
                        job: self.job(job),
                        lifo: *lifo,
                        delay: delay.as_ref().map(|w| self.when(w)),
                    })
                    .collect();
                (Call::Add { jobs }, *lc)
            }
            Op::Claim { tok, lease, count, row, by, lc } => {
                let token = self.claim_token(tok);
                (Call::Claim { token, lease: *lease, count: *count, row: *row, by: by.map(ByC::name) }, *lc)
            }
            Op::Pause(on, lc) => (Call::Pause(*on), *lc),
            Op::Extend { id, tok, lease } => {
                let id = self.id(id);
                (Call::Extend { token: self.tok(tok, &id), id, lease: *lease }, false)
            }
            Op::Extends { lease, pairs } => {
                let pairs = pairs
                    .iter()
                    .map(|(i, t)| {
                        let id = self.id(i);
                        (id.clone(), self.tok(t, &id))
                    })
                    .collect();
                (Call::Extends { lease: *lease, pairs }, false)
            }
            Op::Complete { id, tok, result, keep, age, echo, metrics, lc } => {
                let id = self.id(id);
                (
                    Call::Complete {
                        token: self.tok(tok, &id),
                        id,
                        result: result.0.clone(),
                        keep: *keep,
                        age: *age,
                        echo: *echo,
                        metrics: *metrics,
                    },
                    *lc,
                )
            }
            Op::CompleteNext { id, tok, result, lease, keep, echo, metrics, count, row, by } => {
                let id = self.id(id);
                (
                    Call::CompleteNext {
                        token: self.tok(tok, &id),
                        id,
                        result: result.0.clone(),
                        lease: *lease,
                        keep: *keep,
                        echo: *echo,
                        metrics: *metrics,
                        count: *count,
                        row: *row,
                        by: by.map(ByC::name),
                    },
                    false,
                )
            }
            Op::Promote { id } => (Call::Promote { id: self.id(id) }, false),
            Op::Reschedule { id, when } => {
                (Call::Reschedule { id: self.id(id), when: self.when(when) }, false)
            }
            Op::Delay { id, tok, when } => {
                let id = self.id(id);
                (Call::Delay { token: self.tok(tok, &id), id, when: self.when(when) }, false)
            }
            Op::Fail { id, tok, error, keep, age, decision, stack, metrics, lc } => {
                let id = self.id(id);
                let decision = match decision {
                    DecisionC::Backoff => Decision::Backoff,
                    DecisionC::Final => Decision::Final,
                    DecisionC::Retry(lifo) => Decision::Retry(*lifo),
                    DecisionC::Delay(w) => Decision::Delay(self.when(w)),
                    DecisionC::Clash => Decision::Clash,
                    DecisionC::LifoAlone => Decision::LifoAlone,
                };
                (
                    Call::Fail {
                        token: self.tok(tok, &id),
                        id,
                        error: error.0.clone(),
                        keep: *keep,
                        age: *age,
                        decision,
                        stack: stack.as_ref().map(|s| s.0.clone()),
                        metrics: *metrics,
                    },
                    *lc,
                )
            }
            Op::Reprocess { id, from, keep_made, keep_started, keep_progress, lifo } => (
                Call::Reprocess {
                    id: self.id(id),
                    from: from.map(|c| if c { St::Completed } else { St::Failed }),
                    keep_made: *keep_made,
                    keep_started: *keep_started,
                    keep_progress: *keep_progress,
                    lifo: *lifo,
                },
                false,
            ),
            Op::Priority { id, priority, lifo } => {
                (Call::Priority { id: self.id(id), priority: *priority, lifo: *lifo }, false)
            }
            Op::MetaStalls(v) => (Call::MetaStalls(v.as_ref().map(|b| b.0.clone())), false),
            Op::MetricsBack { kind, minutes } => {
                (Call::MetricsBack { kind: *kind, ms: minutes * 60_000 }, false)
            }
            Op::Requeue { id, tok } => {
                let id = self.id(id);
                (Call::Requeue { token: self.tok(tok, &id), id }, false)
            }
            Op::Stalled { max_stalls, count, lc } => {
                (Call::Stalled { max_stalls: *max_stalls, count: *count }, *lc)
            }
            Op::Progress { id, tok, progress, echo } => {
                let id = self.id(id);
                (
                    Call::Progress {
                        token: self.tok(tok, &id),
                        id,
                        progress: progress.0.clone(),
                        echo: *echo,
                    },
                    false,
                )
            }
            Op::SetProgress { id, progress, echo } => {
                (Call::SetProgress { id: self.id(id), progress: progress.0.clone(), echo: *echo }, false)
            }
            Op::SetData { id, data } => (Call::SetData { id: self.id(id), data: data.0.clone() }, false),
            Op::AddLog { id, line, keep } => {
                (Call::AddLog { id: self.id(id), line: line.0.clone(), keep: *keep }, false)
            }
            Op::Log { id, tok, line, keep } => {
                let id = self.id(id);
                (Call::Log { token: self.tok(tok, &id), id, line: line.0.clone(), keep: *keep }, false)
            }
            Op::Remove { id, force } => (Call::Remove { id: self.id(id), force: *force }, false),
            Op::Drain { delayed, count, lc } => (Call::Drain { delayed: *delayed, count: *count }, *lc),
            Op::Clean { failed, grace, count } => (
                Call::Clean {
                    set: if *failed { St::Failed } else { St::Completed },
                    grace: *grace,
                    count: *count,
                },
                false,
            ),
            Op::Obliterate { force, count } => (Call::Obliterate { force: *force, count: *count }, false),
            Op::Job { id } => (Call::Job { id: self.id(id) }, false),
            Op::Counts => (Call::Counts, false),
            Op::Limit(l, lc) => (Call::Limit(l.clone()), *lc),
            Op::Limits => (Call::Limits, false),
            Op::Jobs { set, from, count, rev, lc } => {
                let sets = [St::Wait, St::Prio, St::Active, St::Delayed, St::Completed, St::Failed];
                (Call::Jobs { set: sets[*set % 6], from: *from, count: *count, rev: *rev }, *lc)
            }
            Op::Completes { entries, fill } => {
                (Call::Completes { triples: self.triples(entries, *fill) }, false)
            }
            Op::CompletesNext { entries, fill, claim, lease, keep, age, echo, metrics, row, by } => {
                let triples = self.triples(entries, *fill);
                let claim = self.claim_token(claim);
                let (lease, keep, age, echo, metrics, row) = (*lease, *keep, *age, *echo, *metrics, *row);
                let by = by.map(ByC::name);
                (Call::CompletesNext { triples, claim, lease, keep, age, echo, metrics, row, by }, false)
            }
            Op::Sleep(_) => unreachable!("sleeps are not calls"),
        }
    }
}

/// A job scheduler's id: three short ones, and one a byte too long (refused).
pub fn sched_id(n: u8) -> Vec<u8> {
    if n == 3 {
        vec![b'x'; 201]
    } else {
        format!("s{n}").into_bytes()
    }
}

pub fn weighted<T: std::fmt::Debug + 'static>(arms: Vec<(u32, BoxedStrategy<T>)>) -> BoxedStrategy<T> {
    Union::new_weighted(arms).boxed()
}

pub fn id_c() -> BoxedStrategy<IdC> {
    weighted(vec![
        (40, (0..POOL_MAX).prop_map(IdC::Pool).boxed()),
        (1, (0..BAD_IDS.len()).prop_map(IdC::Bad).boxed()),
    ])
}

/// An id for a verb that wants a job in some state: mostly one that is, sometimes any.
pub fn id_in(state: fn(usize) -> IdC) -> BoxedStrategy<IdC> {
    weighted(vec![
        (30, (0..8usize).prop_map(state).boxed()),
        (12, (0..POOL_MAX).prop_map(IdC::Pool).boxed()),
        (1, (0..BAD_IDS.len()).prop_map(IdC::Bad).boxed()),
    ])
}

pub fn held_id() -> BoxedStrategy<IdC> {
    id_in(IdC::Active)
}

pub fn tok_c() -> BoxedStrategy<TokC> {
    weighted(vec![
        (60, Just(TokC::Holder).boxed()),
        (3, Just(TokC::Last).boxed()),
        (3, (0..TOKENS.len()).prop_map(TokC::Pool).boxed()),
        (1, Just(TokC::Empty).boxed()),
        (1, Just(TokC::Long).boxed()),
    ])
}

pub fn claim_tok() -> BoxedStrategy<ClaimTok> {
    weighted(vec![
        (40, Just(ClaimTok::Fresh).boxed()),
        (10, (0..TOKENS.len()).prop_map(ClaimTok::Pool).boxed()),
        (1, Just(ClaimTok::Empty).boxed()),
        (1, Just(ClaimTok::Long).boxed()),
    ])
}

pub fn by_c() -> BoxedStrategy<Option<ByC>> {
    weighted(vec![
        (60, Just(None).boxed()),
        (30, prop::bool::ANY.prop_map(|f| Some(ByC::Named(f))).boxed()),
        (2, Just(Some(ByC::Longest)).boxed()),
        (1, Just(Some(ByC::Empty)).boxed()),
        (1, Just(Some(ByC::Long)).boxed()),
    ])
}

pub fn lease() -> BoxedStrategy<i64> {
    weighted(vec![
        (30, (1i64..=5).boxed()),
        (10, (6i64..=20).boxed()),
        (25, Just(60_000i64).boxed()),
        (1, Just(0i64).boxed()),
        (1, Just(LEASE_MAX).boxed()),
        (1, Just(LEASE_MAX + 1).boxed()),
    ])
}

pub fn when_c() -> BoxedStrategy<WhenC> {
    weighted(vec![
        (12, (0i64..=20).prop_map(WhenC::In).boxed()),
        (8, Just(WhenC::In(60_000)).boxed()),
        (8, (1i64..=100_000).prop_map(WhenC::Ago).boxed()),
        (8, (0i64..=20).prop_map(WhenC::Ahead).boxed()),
        (5, Just(WhenC::Ahead(60_000)).boxed()),
        (1, Just(WhenC::Abs(0)).boxed()),
        (1, Just(WhenC::Abs(TIME_MAX)).boxed()),
        (1, Just(WhenC::Abs(TIME_MAX + 1)).boxed()),
        (1, Just(WhenC::In(TIME_MAX + 1)).boxed()),
    ])
}

pub fn job_c() -> BoxedStrategy<JobC> {
    let name = weighted(vec![
        (40, Just(b"alpha".to_vec()).boxed()),
        (20, Just(b"b".to_vec()).boxed()),
        (1, Just(vec![b'n'; NAME_MAX]).boxed()),
        (1, Just(vec![]).boxed()),
        (1, Just(vec![b'n'; NAME_MAX + 1]).boxed()),
    ]);
    let data = weighted(vec![
        (6, Just(b"{}".to_vec()).boxed()),
        (2, Just(vec![]).boxed()),
        (2, Just(b"\x00\xff\r\n data".to_vec()).boxed()),
    ]);
    let priority = weighted(vec![
        (40, Just(None).boxed()),
        (10, Just(Some(0i64)).boxed()),
        (30, (1i64..=3).prop_map(Some).boxed()),
        (1, Just(Some(PRIORITY_MAX)).boxed()),
        (1, Just(Some(PRIORITY_MAX + 1)).boxed()),
        (1, Just(Some(-1i64)).boxed()),
    ]);
    let attempts = weighted(vec![
        (30, Just(None).boxed()),
        (30, (1i64..=3).prop_map(Some).boxed()),
        (1, Just(Some(ATTEMPTS_MAX)).boxed()),
        (1, Just(Some(0i64)).boxed()),
        (1, Just(Some(ATTEMPTS_MAX + 1)).boxed()),
    ]);
    let backoff = weighted(vec![
        (40, Just(None).boxed()),
        (12, (0i64..=20).prop_map(|d| Some(Backoff::Fixed(d))).boxed()),
        (3, Just(Some(Backoff::Fixed(60_000))).boxed()),
        (12, (0i64..=10).prop_map(|d| Some(Backoff::Exp(d))).boxed()),
        (1, Just(Some(Backoff::Exp(BACKOFF_MAX))).boxed()),
        (1, Just(Some(Backoff::Fixed(BACKOFF_MAX + 1))).boxed()),
        (1, Just(Some(Backoff::Exp(-1))).boxed()),
    ]);
    // EXPIRE: mostly none; else past (expired from the start), +0, a few ms ahead (expires
    // during the sequence, often before a CLAIM), far ahead, and the range's edges.
    let expire = weighted(vec![
        (44, Just(None).boxed()),
        (4, (1i64..=100_000).prop_map(|d| Some(WhenC::Ago(d))).boxed()),
        (2, Just(Some(WhenC::In(0))).boxed()),
        (6, (1i64..=20).prop_map(|d| Some(WhenC::In(d))).boxed()),
        (4, (0i64..=20).prop_map(|d| Some(WhenC::Ahead(d))).boxed()),
        (3, Just(Some(WhenC::In(60_000))).boxed()),
        (1, Just(Some(WhenC::Ahead(60_000))).boxed()),
        (1, Just(Some(WhenC::Abs(0))).boxed()),
        (1, Just(Some(WhenC::Abs(TIME_MAX))).boxed()),
        (1, Just(Some(WhenC::Abs(TIME_MAX + 1))).boxed()),
        (1, Just(Some(WhenC::In(TIME_MAX + 1))).boxed()),
    ]);
    // ALIAS: mostly none; else one of a few keys (so they collide), and the range's edges.
    let alias = weighted(vec![
        (30, Just(None).boxed()),
        (
            12,
            prop::sample::select(vec![b"k1".to_vec(), b"k2".to_vec(), b"k3".to_vec()]).prop_map(Some).boxed(),
        ),
        (1, Just(Some(vec![b'a'; ALIAS_MAX])).boxed()),
        (1, Just(Some(vec![])).boxed()),
        (1, Just(Some(vec![b'a'; ALIAS_MAX + 1])).boxed()),
    ]);
    let dedup_id = weighted(vec![
        (30, prop::sample::select(DEDUP_IDS.iter().map(|d| d.to_vec()).collect::<Vec<_>>()).boxed()),
        (1, Just(vec![]).boxed()),
        (1, Just(vec![b'a'; DEDUP_MAX + 1]).boxed()),
    ]);
    let dedup_ttl = weighted(vec![
        (6, Just(None).boxed()),
        (5, (600_000i64..=900_000).prop_map(Some).boxed()),
        (1, Just(Some(0i64)).boxed()),
    ]);
    let dedup = weighted(vec![
        (30, Just(None).boxed()),
        (
            14,
            (dedup_id, dedup_ttl, any::<bool>(), any::<bool>())
                .prop_map(|(id, ttl, extend, replace)| Some(DedupC { id: B(id), ttl, extend, replace }))
                .boxed(),
        ),
    ]);
    (name, data, priority, attempts, backoff, expire, alias, dedup)
        .prop_map(|(name, data, priority, attempts, backoff, expire, alias, dedup)| JobC {
            name: B(name),
            data: B(data),
            priority,
            attempts,
            backoff,
            expire,
            alias: alias.map(B),
            dedup,
        })
        .boxed()
}

/// METRICS on a finish: mostly none; short series (so the trim shows), the cap, and past
/// both ends of 1..=10080.
pub fn metrics() -> BoxedStrategy<Option<i64>> {
    prop::option::weighted(0.3, prop::sample::select(vec![1i64, 2, 3, 60, METRICS_MAX, 0, METRICS_MAX + 1]))
        .boxed()
}

pub fn keep() -> BoxedStrategy<Option<i64>> {
    weighted(vec![
        (30, Just(None).boxed()),
        (6, Just(Some(-1i64)).boxed()),
        (6, Just(Some(0i64)).boxed()),
        (12, (1i64..=3).prop_map(Some).boxed()),
        (1, Just(Some(-2i64)).boxed()),
    ])
}

pub fn age() -> BoxedStrategy<Option<i64>> {
    weighted(vec![
        (50, Just(None).boxed()),
        (3, Just(Some(0i64)).boxed()),
        (6, (1i64..=200).prop_map(Some).boxed()),
        (1, Just(Some(TIME_MAX + 1)).boxed()),
        (1, Just(Some(-1i64)).boxed()),
    ])
}

/// FAIL's decision: mostly none, then each of the three, rarely a refused shape.
pub fn decision() -> BoxedStrategy<DecisionC> {
    weighted(vec![
        (16, Just(DecisionC::Backoff).boxed()),
        (4, Just(DecisionC::Final).boxed()),
        (4, prop::bool::ANY.prop_map(DecisionC::Retry).boxed()),
        (4, when_c().prop_map(DecisionC::Delay).boxed()),
        (1, Just(DecisionC::Clash).boxed()),
        (1, Just(DecisionC::LifoAlone).boxed()),
    ])
}

/// FAIL's STACK: mostly none; a short one; one over `max-payload` 4.
pub fn stack() -> BoxedStrategy<Option<B>> {
    weighted(vec![
        (6, Just(None).boxed()),
        (3, Just(Some(B(b"at x".to_vec()))).boxed()),
        (1, Just(Some(B(b"at y (y.js:1)".to_vec()))).boxed()),
    ])
}

pub fn lc() -> BoxedStrategy<bool> {
    prop::bool::weighted(0.2).boxed()
}

/// The ops of one case. `crashy` cases model workers that mostly die: the holder verbs are
/// rare, so leases pile up, expire together, and STALLED reclaims (and fails) several at once.
/// The ops of a case. A crashy case calls the holder's verbs less (its crashes end leases);
/// a deep one three times as often, and claims twice as often, so that jobs go round
/// claim, retry, delay and finish many times: the states a short, even mix rarely reaches
/// (retention at work, stall counts, repeated attempts, kept and expired jobs).
pub fn op(crashy: bool, deep: bool) -> BoxedStrategy<Op> {
    let h = |w: u32| {
        if crashy {
            (w / 4).max(1)
        } else if deep {
            w * 3
        } else {
            w
        }
    };
    let count = weighted(vec![
        (30, Just(None).boxed()),
        (24, (1i64..=3).prop_map(Some).boxed()),
        (2, Just(Some(CLAIM_COUNT_MAX)).boxed()),
        (1, Just(Some(0i64)).boxed()),
        (1, Just(Some(CLAIM_COUNT_MAX + 1)).boxed()),
    ]);
    let result = weighted(vec![
        (8, Just(b"ok".to_vec()).boxed()),
        (1, Just(vec![]).boxed()),
        (1, Just(b"\x00\xfe bin".to_vec()).boxed()),
    ]);
    let error = weighted(vec![
        (8, Just(b"boom".to_vec()).boxed()),
        (1, Just(vec![]).boxed()),
        (1, Just(b"\xc3\xa9 \x00".to_vec()).boxed()),
    ]);
    let max_stalls = weighted(vec![
        (24, Just(None).boxed()),
        (16, (0i64..=2).prop_map(Some).boxed()),
        (1, Just(Some(MAX_STALLS_MAX + 1)).boxed()),
        (1, Just(Some(-1i64)).boxed()),
    ]);
    let s_count = weighted(vec![
        (24, Just(None).boxed()),
        (16, (1i64..=2).prop_map(Some).boxed()),
        (1, Just(Some(0i64)).boxed()),
        (1, Just(Some(STALLED_COUNT_MAX + 1)).boxed()),
    ]);
    let every = weighted(vec![
        (4, Just(5i64).boxed()),
        (3, Just(1000i64).boxed()),
        (3, Just(60_000i64).boxed()),
        (1, Just(0i64).boxed()),
    ]);
    let sched_offset = weighted(vec![
        (6, Just(None).boxed()),
        (2, (0i64..=4).prop_map(Some).boxed()),
        (1, Just(Some(1_000_000i64)).boxed()),
    ]);
    let sched_limit = weighted(vec![
        (6, Just(None).boxed()),
        (2, (1i64..=2).prop_map(Some).boxed()),
        (1, Just(Some(0i64)).boxed()),
    ]);
    weighted(vec![
        (
            3,
            (0u8..=3, every, sched_offset, sched_limit, prop::bool::weighted(0.95), lc())
                .prop_map(|(sid, every, offset, limit, named, lc)| Op::SchedSet {
                    sid,
                    every,
                    offset,
                    limit,
                    named,
                    lc,
                })
                .boxed(),
        ),
        (1, (0u8..=3, lc()).prop_map(|(sid, lc)| Op::SchedDel { sid, lc }).boxed()),
        (
            16,
            (id_c(), job_c(), prop::bool::weighted(0.2), lc())
                .prop_map(|(id, job, lifo, lc)| Op::Enqueue { id, job, lifo, lc })
                .boxed(),
        ),
        (
            6,
            (id_c(), when_c(), job_c(), lc())
                .prop_map(|(id, when, job, lc)| Op::Schedule { id, when, job, lc })
                .boxed(),
        ),
        (
            5,
            (
                prop::collection::vec(
                    (id_c(), job_c(), prop::bool::weighted(0.15), prop::option::weighted(0.3, when_c())),
                    0..=4,
                ),
                lc(),
                prop::bool::weighted(0.4),
            )
                .prop_map(|(jobs, lc, share)| Op::Add { jobs: share_dedup(jobs, share), lc })
                .boxed(),
        ),
        (
            if deep { 28 } else { 14 },
            (claim_tok(), lease(), count.clone(), prop::bool::weighted(0.2), by_c(), lc())
                .prop_map(|(tok, lease, count, row, by, lc)| Op::Claim { tok, lease, count, row, by, lc })
                .boxed(),
        ),
        (1, lc().prop_map(|lc| Op::Pause(true, lc)).boxed()),
        (2, lc().prop_map(|lc| Op::Pause(false, lc)).boxed()),
        (
            h(4),
            (held_id(), tok_c(), lease()).prop_map(|(id, tok, lease)| Op::Extend { id, tok, lease }).boxed(),
        ),
        (
            h(3),
            (lease(), prop::collection::vec((held_id(), tok_c()), 1..=3))
                .prop_map(|(lease, pairs)| Op::Extends { lease, pairs })
                .boxed(),
        ),
        (
            h(9),
            (held_id(), tok_c(), result.clone(), keep(), age(), prop::bool::weighted(0.3), metrics(), lc())
                .prop_map(|(id, tok, result, keep, age, echo, metrics, lc)| Op::Complete {
                    id,
                    tok,
                    result: B(result),
                    keep,
                    age,
                    echo,
                    metrics,
                    lc,
                })
                .boxed(),
        ),
        (
            h(5),
            (
                held_id(),
                tok_c(),
                result,
                lease(),
                keep(),
                prop::bool::weighted(0.3),
                metrics(),
                count.clone(),
                prop::bool::weighted(0.2),
                by_c(),
            )
                .prop_map(|(id, tok, result, lease, keep, echo, metrics, count, row, by)| Op::CompleteNext {
                    id,
                    tok,
                    result: B(result),
                    lease,
                    keep,
                    echo,
                    metrics,
                    count,
                    row,
                    by,
                })
                .boxed(),
        ),
        (3, id_in(IdC::Delayed).prop_map(|id| Op::Promote { id }).boxed()),
        (3, (id_in(IdC::Delayed), when_c()).prop_map(|(id, when)| Op::Reschedule { id, when }).boxed()),
        (
            h(3),
            (held_id(), tok_c(), when_c()).prop_map(|(id, tok, when)| Op::Delay { id, tok, when }).boxed(),
        ),
        (
            h(9),
            (held_id(), tok_c(), error, keep(), age(), decision(), stack(), metrics(), lc())
                .prop_map(|(id, tok, error, keep, age, decision, stack, metrics, lc)| Op::Fail {
                    id,
                    tok,
                    error: B(error),
                    keep,
                    age,
                    decision,
                    stack,
                    metrics,
                    lc,
                })
                .boxed(),
        ),
        (
            4,
            (
                id_in(IdC::Finished),
                prop::option::weighted(0.3, prop::bool::ANY),
                prop::bool::weighted(0.3),
                prop::bool::weighted(0.3),
                prop::bool::weighted(0.3),
                prop::bool::weighted(0.3),
            )
                .prop_map(|(id, from, keep_made, keep_started, keep_progress, lifo)| Op::Reprocess {
                    id,
                    from,
                    keep_made,
                    keep_started,
                    keep_progress,
                    lifo,
                })
                .boxed(),
        ),
        (
            4,
            (
                id_c(),
                prop::sample::select(vec![0i64, 0, 1, 3, 7, PRIORITY_MAX, PRIORITY_MAX + 1, -1]),
                prop::bool::weighted(0.3),
            )
                .prop_map(|(id, priority, lifo)| Op::Priority { id, priority, lifo })
                .boxed(),
        ),
        (
            2,
            prop::option::weighted(
                0.8,
                prop::sample::select(vec![b"0".to_vec(), b"2".to_vec(), b"lots".to_vec(), b"1001".to_vec()])
                    .prop_map(B),
            )
            .prop_map(Op::MetaStalls)
            .boxed(),
        ),
        (
            2,
            (0usize..2, prop::sample::select(vec![1i64, 2, 3, 70, 20_000]))
                .prop_map(|(kind, minutes)| Op::MetricsBack { kind, minutes })
                .boxed(),
        ),
        (h(3), (held_id(), tok_c()).prop_map(|(id, tok)| Op::Requeue { id, tok }).boxed()),
        (
            16,
            (max_stalls, s_count, lc())
                .prop_map(|(max_stalls, count, lc)| Op::Stalled { max_stalls, count, lc })
                .boxed(),
        ),
        (8, (1u64..=25).prop_map(Op::Sleep).boxed()),
        (2, (100u64..=150).prop_map(Op::Sleep).boxed()),
        // The inspection and administration commands.
        (
            h(3),
            (held_id(), tok_c(), progress(), prop::bool::weighted(0.3))
                .prop_map(|(id, tok, progress, echo)| Op::Progress { id, tok, progress, echo })
                .boxed(),
        ),
        (
            2,
            (id_c(), progress(), prop::bool::weighted(0.3))
                .prop_map(|(id, progress, echo)| Op::SetProgress { id, progress, echo })
                .boxed(),
        ),
        (3, (id_c(), line(), log_keep()).prop_map(|(id, line, keep)| Op::AddLog { id, line, keep }).boxed()),
        (
            3,
            (weighted(vec![(2, id_c()), (1, held_id())]), new_data())
                .prop_map(|(id, data)| Op::SetData { id, data })
                .boxed(),
        ),
        (
            h(14),
            (held_id(), tok_c(), line(), log_keep())
                .prop_map(|(id, tok, line, keep)| Op::Log { id, tok, line, keep })
                .boxed(),
        ),
        (3, (id_c(), prop::bool::weighted(0.4)).prop_map(|(id, force)| Op::Remove { id, force }).boxed()),
        (
            1,
            (prop::bool::ANY, del_count(), lc())
                .prop_map(|(delayed, count, lc)| Op::Drain { delayed, count, lc })
                .boxed(),
        ),
        (
            3,
            (prop::bool::ANY, grace(), del_count())
                .prop_map(|(failed, grace, count)| Op::Clean { failed, grace, count })
                .boxed(),
        ),
        (
            1,
            (prop::bool::weighted(0.5), del_count())
                .prop_map(|(force, count)| Op::Obliterate { force, count })
                .boxed(),
        ),
        (h(6), completes().prop_map(|(entries, fill)| Op::Completes { entries, fill }).boxed()),
        (
            h(6),
            (
                completes(),
                claim_tok(),
                lease(),
                keep(),
                age(),
                prop::bool::weighted(0.3),
                metrics(),
                prop::bool::weighted(0.3),
                by_c(),
            )
                .prop_map(|((entries, fill), claim, lease, keep, age, echo, metrics, row, by)| {
                    Op::CompletesNext { entries, fill, claim, lease, keep, age, echo, metrics, row, by }
                })
                .boxed(),
        ),
        (4, id_c().prop_map(|id| Op::Job { id }).boxed()),
        (2, Just(Op::Counts).boxed()),
        (4, (limit_arg(), lc()).prop_map(|(l, lc)| Op::Limit(l, lc)).boxed()),
        (2, Just(Op::Limits).boxed()),
        (
            3,
            (0usize..6, page_from(), page_count(), prop::bool::weighted(0.3), lc())
                .prop_map(|(set, from, count, rev, lc)| Op::Jobs { set, from, count, rev, lc })
                .boxed(),
        ),
    ])
}

/// TRA.COMPLETES entries: mostly distinct held jobs with their holders' tokens; sometimes
/// any id (a finished job: the repeat's 0; a gone one: -2; one twice: refused), a stale or bad
/// token, a result too long for `max-payload` 4; rarely padded to 50 entries (the most one
/// call takes) or 51 (refused).
pub fn completes() -> BoxedStrategy<(Vec<Entry>, Option<usize>)> {
    let id = weighted(vec![
        (30, Just(EntryId::Next).boxed()),
        (4, (0..8usize).prop_map(|k| EntryId::Any(IdC::Finished(k))).boxed()),
        (3, id_c().prop_map(EntryId::Any).boxed()),
        (2, (0..8usize).prop_map(|k| EntryId::Any(IdC::Active(k))).boxed()),
    ]);
    let result = weighted(vec![
        (8, Just(b"ok".to_vec()).boxed()),
        (1, Just(vec![]).boxed()),
        (1, Just(b"\x00\xfe bin".to_vec()).boxed()),
    ]);
    let fill = weighted(vec![
        (40, Just(None).boxed()),
        (1, Just(Some(COMPLETES_MAX)).boxed()),
        (1, Just(Some(COMPLETES_MAX + 1)).boxed()),
    ]);
    (prop::collection::vec((id, tok_c(), result.prop_map(B)), 1..=4), fill).boxed()
}

pub fn progress() -> BoxedStrategy<B> {
    weighted(vec![
        (8, Just(b"50%".to_vec()).boxed()),
        (1, Just(vec![]).boxed()),
        (1, Just(vec![b'g'; PROGRESS_MAX]).boxed()),
        (1, Just(vec![b'g'; PROGRESS_MAX + 1]).boxed()),
    ])
    .prop_map(B)
    .boxed()
}

/// TRA.SETDATA's data: short (within the 4-byte `max-payload` some cases set), longer, empty,
/// binary.
pub fn new_data() -> BoxedStrategy<B> {
    weighted(vec![
        (4, Just(b"{s}".to_vec()).boxed()),
        (4, Just(b"{\"step\":2}".to_vec()).boxed()),
        (1, Just(vec![]).boxed()),
        (1, Just(b"\x00\xff\r\n new".to_vec()).boxed()),
    ])
    .prop_map(B)
    .boxed()
}

pub fn line() -> BoxedStrategy<B> {
    weighted(vec![
        (8, Just(b"line".to_vec()).boxed()),
        (1, Just(vec![]).boxed()),
        (1, Just(b"\x00\xff 5by".to_vec()).boxed()),
    ])
    .prop_map(B)
    .boxed()
}

pub fn log_keep() -> BoxedStrategy<Option<i64>> {
    weighted(vec![
        (20, Just(None).boxed()),
        (10, (1i64..=3).prop_map(Some).boxed()),
        (1, Just(Some(0i64)).boxed()),
        (1, Just(Some(LOG_KEEP_MAX)).boxed()),
        (1, Just(Some(LOG_KEEP_MAX + 1)).boxed()),
    ])
}

pub fn del_count() -> BoxedStrategy<Option<i64>> {
    weighted(vec![
        (10, Just(None).boxed()),
        (10, (1i64..=3).prop_map(Some).boxed()),
        (1, Just(Some(0i64)).boxed()),
        (1, Just(Some(DELETE_COUNT_MAX)).boxed()),
        (1, Just(Some(DELETE_COUNT_MAX + 1)).boxed()),
    ])
}

pub fn grace() -> BoxedStrategy<i64> {
    weighted(vec![
        (5, Just(0i64).boxed()),
        (5, (1i64..=60).boxed()),
        (2, Just(60_000i64).boxed()),
        (1, Just(-1i64).boxed()),
        (1, Just(TIME_MAX + 1).boxed()),
    ])
}

pub fn page_from() -> BoxedStrategy<Option<i64>> {
    weighted(vec![
        (10, Just(None).boxed()),
        (10, (0i64..=5).prop_map(Some).boxed()),
        (1, Just(Some(-1i64)).boxed()),
        (1, Just(Some(TIME_MAX + 1)).boxed()),
    ])
}

pub fn page_count() -> BoxedStrategy<Option<i64>> {
    weighted(vec![
        (10, Just(None).boxed()),
        (10, (1i64..=3).prop_map(Some).boxed()),
        (1, Just(Some(0i64)).boxed()),
        (1, Just(Some(PAGE_MAX + 1)).boxed()),
    ])
}

#[derive(Clone, Debug)]
pub struct Case {
    pub cfg: Cfg,
    /// How many ids the case draws from.
    pub pool: usize,
    pub crashy: bool,
    /// Send the verbs over RESP3 (the same replies in both protocols).
    pub resp3: bool,
    pub ops: Vec<Op>,
}

pub fn case(steps: usize) -> BoxedStrategy<Case> {
    let keep = || prop::sample::select(vec![-1i64, 0, 1, 2, 16, 1000]);
    let batch = || prop::sample::select(vec![1i64, 2, 100, 100]);
    let cfg = (
        (keep(), keep(), 0i64..=2, batch()),
        (batch(), batch(), prop::sample::select(vec![4usize, 1 << 20, 1 << 20]), prop::bool::weighted(0.85)),
        prop::sample::select(vec![1i64, 2, 1000]),
    )
        .prop_map(
            |(
                (keep_completed, keep_failed, max_stalls, stalled_batch),
                (promote_batch, retention_batch, max_payload, events),
                log_keep,
            )| Cfg {
                log_keep,
                keep_completed,
                keep_failed,
                max_stalls,
                stalled_batch,
                promote_batch,
                retention_batch,
                max_payload,
                events,
            },
        );
    let pool = prop::sample::select(vec![5usize, 5, 5, POOL_MAX]);
    // A third of the cases are deep (see `op`): twice as long, on a pool of 5 ids.
    (cfg, pool, prop::bool::weighted(0.3), prop::bool::weighted(0.3), prop::bool::weighted(0.3))
        .prop_flat_map(move |(cfg, pool, crashy, resp3, deep)| {
            let deep = deep && !crashy;
            let (pool, len) = if deep { (5, steps * 2) } else { (pool, steps) };
            prop::collection::vec(op(crashy, deep), 1..=len).prop_map(move |ops| Case {
                cfg,
                pool,
                crashy,
                resp3,
                ops,
            })
        })
        .boxed()
}

/// A TRA.LIMIT call: windows short enough to end while a sequence runs, or long; values at
/// and beyond the ranges' ends (refused, writing nothing).
pub fn limit_arg() -> impl Strategy<Value = LimitArg> {
    let max = prop::sample::select(vec![1i64, 1, 2, 3, 5, 0, LIMIT_MAX + 1]);
    let ms = prop::sample::select(vec![5i64, 30, 120, 60_000, 1, 0, LIMIT_MS_MAX + 1]);
    let n = prop::sample::select(vec![1i64, 2, 3, 0, -1, LIMIT_MAX + 1]);
    let hold = prop::sample::select(vec![10i64, 40, 60_000, 0, -5, LIMIT_MS_MAX + 1]);
    prop_oneof![
        3 => (max, ms).prop_map(|(m, t)| LimitArg::Rate(m, t)),
        1 => Just(LimitArg::RateOff),
        3 => n.prop_map(LimitArg::Concurrency),
        1 => Just(LimitArg::ConcurrencyOff),
        1 => hold.prop_map(LimitArg::For),
        2 => Just(LimitArg::Clear),
    ]
}
