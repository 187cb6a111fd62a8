//! The cases: random sequences against the model, the sequences it found once (replayed on
//! every run), and the fixed cases of the log and of CLAIM past expired jobs.

use super::*;

/// The settings of the fixed sequences: every batch 100 but promotion's, failed jobs kept up
/// to `keep_failed` (-1: all), every completed one.
fn fixed(keep_failed: i64, promote_batch: i64) -> Cfg {
    Cfg {
        log_keep: 1000,
        keep_completed: -1,
        keep_failed,
        max_stalls: 0,
        stalled_batch: 100,
        promote_batch,
        retention_batch: 100,
        max_payload: 1 << 20,
        events: true,
    }
}

/// Random sequences against the model: batches of `MODEL_CASES` cases (100), each batch under
/// its own seed (`MODEL_SEED`, then the next), until at least `MODEL_MIN` cases (500) have run
/// and `MODEL_SECONDS` (45) have passed, at most `MODEL_BATCHES` (20) batches. A failure names
/// its batch's seed: `MODEL_SEED=<it> MODEL_BATCHES=1` replays it.
pub fn job_core_agrees_with_its_model() {
    let per_batch = env_num("MODEL_CASES", 100) as u32;
    let min_cases = env_num("MODEL_MIN", 500);
    let budget = Duration::from_secs(env_num("MODEL_SECONDS", 45));
    let max_batches = env_num("MODEL_BATCHES", 20);
    let steps = env_num("MODEL_STEPS", 60) as usize;
    let first_seed = env_num("MODEL_SEED", 0x7472_6166_696b_6579);
    let pair = Pair::start();
    let t = Instant::now();
    let (ran, steps_run) = (std::cell::Cell::new(0u64), std::cell::Cell::new(0u64));
    let cov = Coverage::default();
    let mut batch = 0u64;
    while batch < max_batches && (ran.get() < min_cases || t.elapsed() < budget) {
        let seed = first_seed.wrapping_add(batch);
        batch += 1;
        let mut seed_bytes = [0u8; 32];
        seed_bytes[..8].copy_from_slice(&seed.to_le_bytes());
        eprintln!(
            "model: batch {batch}: {per_batch} cases of up to {steps} steps (deep: {}), MODEL_SEED={seed}",
            steps * 2
        );
        let config = Config {
            cases: per_batch,
            failure_persistence: None,
            max_shrink_iters: env_num("MODEL_SHRINK_ITERS", 4000) as u32,
            max_shrink_time: env_num("MODEL_SHRINK_MS", 120_000) as u32,
            ..Config::default()
        };
        let mut runner =
            TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes));
        let result = runner.run(&case(steps), |case| {
            ran.set(ran.get() + 1);
            steps_run.set(steps_run.get() + case.ops.len() as u64);
            run_case(&pair, &case, &cov).map_err(TestCaseError::fail)
        });
        match result {
            Ok(()) => {}
            Err(TestError::Fail(reason, case)) => {
                let ops: Vec<String> =
                    case.ops.iter().enumerate().map(|(i, o)| format!("{i:>3} {o:?}")).collect();
                panic!(
                    "the module and the model disagree (MODEL_SEED={seed} MODEL_BATCHES=1 replays it).\n\nminimal sequence ({:?}, {} ids, crashy {}, resp3 {}):\n{}\n\nits run (TIME bracket, command, reply):\n{reason}",
                    case.cfg,
                    case.pool,
                    case.crashy,
                    case.resp3,
                    ops.join("\n")
                )
            }
            Err(TestError::Abort(reason)) => panic!("aborted (MODEL_SEED={seed}): {reason}"),
        }
    }
    let mut summary = String::new();
    for ((verb, out), k) in cov.borrow().iter() {
        let _ = write!(summary, "{verb}:{out}={k}  ");
    }
    eprintln!("model: outcomes: {summary}");
    eprintln!(
        "model: {} sequences in {batch} batches, {} steps (shrinking included) in {:.1?}",
        ran.get(),
        steps_run.get(),
        t.elapsed()
    );
}

/// The shrunk sequences the random test found where the module departed from the contract,
/// replayed on every run whatever the random seed: regressions once the module is fixed.
pub fn found_divergences_replay() {
    let job = JobC::plain;
    let enqueue = |i| Op::Enqueue { id: IdC::Pool(i), job: job(), lifo: false, lc: false };
    let cfg = fixed(1, 100);
    let case = |ops| Case { cfg, pool: 5, crashy: false, resp3: false, ops };
    let claim1 =
        || Op::Claim { tok: ClaimTok::Fresh, lease: 60_000, count: Some(1), row: false, by: None, lc: false };
    let complete_all = || Op::Complete {
        id: IdC::Active(0),
        tok: TokC::Holder,
        result: B(b"ok".to_vec()),
        keep: Some(-1),
        age: None,
        echo: false,
        metrics: None,
        lc: false,
    };
    let fail = |decision, stack: Option<&str>| Op::Fail {
        id: IdC::Active(0),
        tok: TokC::Holder,
        error: B(b"boom".to_vec()),
        keep: None,
        age: None,
        decision,
        stack: stack.map(|s| B(s.as_bytes().to_vec())),
        metrics: None,
        lc: false,
    };
    let found: Vec<(&str, Case)> = vec![
        (
            "STALLED failing more jobs in one call than keep-failed left them all in `failed` \
             (fixed in de15125): src/CONTRACT.md (KEEP n trims that finished set to its n newest; \
             without KEEP the config's default applies) and src/verbs/README.md (the default is \
             a soft cap, exact below 16). Retire::plan only trimmed entries already in the set.",
            case(vec![
                enqueue(0),
                enqueue(1),
                Op::Claim { tok: ClaimTok::Fresh, lease: 1, count: Some(2), row: false, by: None, lc: false },
                Op::Sleep(20),
                Op::Stalled { max_stalls: None, count: None, lc: false },
            ]),
        ),
        (
            "the same, with the leases expiring in the other order than the ids: the jobs one \
             call fails share a finish time, so the lowest ids are the oldest and go first",
            case(vec![
                enqueue(0),
                enqueue(1),
                enqueue(2),
                Op::Claim { tok: ClaimTok::Fresh, lease: 9, count: Some(1), row: false, by: None, lc: false },
                Op::Claim { tok: ClaimTok::Fresh, lease: 5, count: Some(1), row: false, by: None, lc: false },
                Op::Claim { tok: ClaimTok::Fresh, lease: 1, count: Some(1), row: false, by: None, lc: false },
                Op::Sleep(30),
                Op::Stalled { max_stalls: None, count: None, lc: false },
            ]),
        ),
        (
            "Fixed (ATTEMPTS read before the finish): a job STALLED failed and retention deleted \
             at once (beyond keep-failed 1) had `attempts 1` in its `failed` event whatever its \
             ATTEMPTS. src/verbs/README.md, Events: `failed` carries the job's max attempts.",
            case(vec![
                Op::Enqueue { id: IdC::Pool(0), job: JobC { attempts: Some(3), ..job() }, lifo: false, lc: false },
                enqueue(1),
                Op::Claim { tok: ClaimTok::Fresh, lease: 1, count: Some(2), row: false, by: None, lc: false },
                Op::Sleep(20),
                Op::Stalled { max_stalls: None, count: None, lc: false },
            ]),
        ),
        (
            "Fixed (the CLAIM in time deletes `x`): REPROCESS revived a spent EXPIRE. src/verbs/README.md, EMQ.ENQUEUE's \
             `EXPIRE when`: once a CLAIM has taken a job in time, its EXPIRE is spent — a retry \
             after FAIL, a stall or REPROCESS makes it wait again, and it is handed out as any \
             job. REPROCESS deletes `as`, and `domain::expired` reads `as` 0 as never claimed: \
             the next CLAIM fails the reprocessed job with `expired` instead of handing it out.",
            case(vec![
                Op::Enqueue {
                    id: IdC::Pool(0),
                    job: JobC { expire: Some(WhenC::In(30)), ..job() },
                    lifo: false,
                    lc: false,
                },
                claim1(),
                complete_all(),
                Op::Reprocess {
                    id: IdC::Finished(0),
                    from: None,
                    keep_made: false,
                    keep_started: false,
                    keep_progress: false,
                    lifo: false,
                },
                Op::Sleep(40),
                claim1(),
            ]),
        ),
        (
            "Fixed (nothing finishes, nothing is written): a TRA.COMPLETES that finished no job still trimmed `completed`. \
             src/verbs/README.md, TRA.COMPLETES: 0 (a repeat) and -1/-2 write nothing; \
             retention is COMPLETE's without KEEP, and COMPLETE trims only when a job finishes \
             (src/CONTRACT.md, Retention: a job finishing may trim that set). completes.rs runs \
             `Retire::plan` whether or not an entry finished: here keep-completed 1 and two \
             jobs kept by KEEP -1; an entry for a job that does not exist (-2) deletes the older.",
            Case {
                cfg: Cfg { keep_completed: 1, ..cfg },
                ..case(vec![
                    enqueue(0),
                    enqueue(1),
                    Op::Claim { tok: ClaimTok::Fresh, lease: 60_000, count: Some(2), row: false, by: None, lc: false },
                    complete_all(),
                    complete_all(),
                    Op::Completes {
                        entries: vec![(EntryId::Any(IdC::Pool(2)), TokC::Pool(0), B(b"ok".to_vec()))],
                        fill: None,
                    },
                ])
            },
        ),
        (
            "Fixed (every id gated first): TRA.COMPLETES checked a triple's token and result before the next \
             triple's id. src/CONTRACT.md, order of checks: the id gate (the key suffix or id \
             arguments) comes before the value ranges, so a bad id anywhere answers EMQID, as \
             EXTENDS does; completes.rs answers EMQARG for a bad token in an earlier triple.",
            case(vec![
                enqueue(0),
                claim1(),
                Op::Completes {
                    entries: vec![
                        (EntryId::Next, TokC::Long, B(b"ok".to_vec())),
                        (EntryId::Any(IdC::Bad(0)), TokC::Pool(0), B(b"ok".to_vec())),
                    ],
                    fill: None,
                },
            ]),
        ),
        (
            "Fixed (every id gated first): the same for more than 50 entries: completes.rs refuses the count \
             (EMQARG) before it gates the ids (EMQID first, by the order of checks).",
            case(vec![Op::Completes {
                entries: vec![(EntryId::Any(IdC::Bad(0)), TokC::Pool(0), B(b"ok".to_vec()))],
                fill: Some(COMPLETES_MAX + 1),
            }]),
        ),
        (
            "Planted, and missed by the random cases: a final FAIL without STACK that left an earlier \
             FAIL's stack on the failed row it keeps (each FAIL replaces the stack; one without \
             STACK deletes it).",
            case(vec![enqueue(0), claim1(), fail(DecisionC::Retry(false), Some("at x")), claim1(), fail(DecisionC::Final, None)]),
        ),
    ];
    let pair = Pair::start();
    let cov = Coverage::default();
    let mut failures = Vec::new();
    for (what, case) in &found {
        if let Err(e) = run_case(&pair, case, &cov) {
            failures.push(format!("== {what}\n{e}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} known divergence(s) still reproduce:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

/// Every path that deletes a row deletes its job's log (a log never outlives its row), each
/// run once as a fixed sequence against the model — whatever the random cases happen to
/// reach: retention by count (KEEP n) and by age (AGE), KEEP 0, STALLED's failure under
/// `keep-failed 0`, TRA.COMPLETES under `keep-completed 0`, REMOVE … FORCE of a held job,
/// DRAIN, CLEAN and OBLITERATE … FORCE.
pub fn every_path_deletes_the_log_with_its_row() {
    let job = JobC::plain;
    let enqueue = |i| Op::Enqueue { id: IdC::Pool(i), job: job(), lifo: false, lc: false };
    let claim = |count, lease| Op::Claim {
        tok: ClaimTok::Fresh,
        lease,
        count: Some(count),
        row: false,
        by: None,
        lc: false,
    };
    let log = |k| Op::Log { id: IdC::Active(k), tok: TokC::Holder, line: B(b"line".to_vec()), keep: None };
    let complete = |keep, age| Op::Complete {
        id: IdC::Active(0),
        tok: TokC::Holder,
        result: B(b"ok".to_vec()),
        keep,
        age,
        echo: false,
        metrics: None,
        lc: false,
    };
    let cfg = fixed(1000, 100);
    let case = |cfg, ops| Case { cfg, pool: 5, crashy: false, resp3: false, ops };
    let paths: Vec<(&str, Case)> = vec![
        (
            "EMQ.COMPLETE",
            // KEEP 1: the older completed job goes, with its log.
            case(
                cfg,
                vec![
                    enqueue(0),
                    enqueue(1),
                    claim(2, 60_000),
                    log(0),
                    log(1),
                    complete(Some(-1), None),
                    complete(Some(1), None),
                ],
            ),
        ),
        (
            "EMQ.COMPLETE",
            // AGE 1: a job finished more than 1 ms ago goes, with its log.
            case(
                cfg,
                vec![
                    enqueue(0),
                    claim(1, 60_000),
                    log(0),
                    complete(Some(-1), None),
                    Op::Sleep(5),
                    enqueue(1),
                    claim(1, 60_000),
                    complete(Some(-1), Some(1)),
                ],
            ),
        ),
        (
            "EMQ.FAIL",
            // KEEP 0: the job goes at once, with its log.
            case(
                cfg,
                vec![
                    enqueue(0),
                    claim(1, 60_000),
                    log(0),
                    Op::Fail {
                        id: IdC::Active(0),
                        tok: TokC::Holder,
                        error: B(b"boom".to_vec()),
                        keep: Some(0),
                        age: None,
                        decision: DecisionC::Final,
                        stack: None,
                        metrics: None,
                        lc: false,
                    },
                ],
            ),
        ),
        (
            "EMQ.STALLED",
            // keep-failed 0: a stalled job failing for good goes at once, with its log.
            case(
                Cfg { keep_failed: 0, ..cfg },
                vec![
                    enqueue(0),
                    claim(1, 1),
                    log(0),
                    Op::Sleep(10),
                    Op::Stalled { max_stalls: Some(0), count: None, lc: false },
                ],
            ),
        ),
        (
            "TRA.COMPLETES",
            // keep-completed 0: the finished job goes at once, with its log.
            case(
                Cfg { keep_completed: 0, ..cfg },
                vec![
                    enqueue(0),
                    claim(1, 60_000),
                    log(0),
                    Op::Completes {
                        entries: vec![(EntryId::Next, TokC::Holder, B(b"ok".to_vec()))],
                        fill: None,
                    },
                ],
            ),
        ),
        (
            "TRA.REMOVE",
            case(
                cfg,
                vec![enqueue(0), claim(1, 60_000), log(0), Op::Remove { id: IdC::Pool(0), force: true }],
            ),
        ),
        (
            "TRA.DRAIN",
            case(
                cfg,
                vec![
                    enqueue(0),
                    claim(1, 60_000),
                    log(0),
                    Op::Requeue { id: IdC::Active(0), tok: TokC::Holder },
                    Op::Drain { delayed: false, count: None, lc: false },
                ],
            ),
        ),
        (
            "TRA.CLEAN",
            case(
                cfg,
                vec![
                    enqueue(0),
                    claim(1, 60_000),
                    log(0),
                    complete(Some(-1), None),
                    Op::Sleep(5),
                    Op::Clean { failed: false, grace: 0, count: None },
                ],
            ),
        ),
        (
            "TRA.OBLITERATE",
            case(
                cfg,
                vec![enqueue(0), claim(1, 60_000), log(0), Op::Obliterate { force: true, count: None }],
            ),
        ),
    ];
    let pair = Pair::start();
    let mut failures = Vec::new();
    for (verb, case) in &paths {
        let cov = Coverage::default();
        if let Err(e) = run_case(&pair, case, &cov) {
            failures.push(format!("== {verb}\n{e}"));
        } else if !cov.borrow().contains_key(&(verb.to_string(), "logs deleted".to_string())) {
            failures.push(format!("== {verb}: the sequence deleted no log ({:?})", cov.borrow()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// CLAIM goes past expired jobs, pass by pass, as fixed sequences against the model: each
/// pass promotes again (`promote-batch` 1 here, so one due job a pass), at most 4 passes, the
/// expired jobs failed under `keep-failed` 1 (the cap bites: beyond it a job goes at once);
/// also while paused (promotion runs, nothing is handed out); and a job met expired in `wait`
/// does not use up the claim: the job behind it is handed out by the same call.
pub fn claim_goes_past_expired_jobs() {
    let job = |expire| JobC { expire, ..JobC::plain() };
    let expired = || Some(WhenC::Ago(5));
    let schedule =
        |i, expire| Op::Schedule { id: IdC::Pool(i), when: WhenC::Ago(10), job: job(expire), lc: false };
    let enqueue = |i, expire| Op::Enqueue { id: IdC::Pool(i), job: job(expire), lifo: false, lc: false };
    let claim = |count| Op::Claim {
        tok: ClaimTok::Fresh,
        lease: 60_000,
        count: Some(count),
        row: false,
        by: None,
        lc: false,
    };
    let cfg = fixed(1, 1);
    let case = |ops| Case { cfg, pool: 24, crashy: false, resp3: false, ops };
    // (what, sequence, jobs expired in all)
    let cases: Vec<(&str, Case, u64)> = vec![
        (
            "only a CLAIM's first pass promotes: two claims, promote-batch 1, two expired jobs",
            case(vec![
                schedule(0, expired()),
                schedule(1, expired()),
                schedule(2, expired()),
                schedule(3, expired()),
                schedule(4, None),
                claim(1),
                claim(1),
            ]),
            2,
        ),
        (
            "the same while paused: promotion (and expiry) runs, nothing is handed out",
            case(vec![
                Op::Pause(true, false),
                schedule(0, expired()),
                schedule(1, expired()),
                schedule(2, None),
                claim(2),
                Op::Pause(false, false),
                claim(2),
            ]),
            2,
        ),
        (
            "expired jobs in wait and prio do not use up the claim",
            case(vec![
                enqueue(0, expired()),
                enqueue(1, Some(WhenC::In(0))),
                enqueue(2, None),
                Op::Enqueue {
                    id: IdC::Pool(3),
                    job: JobC { priority: Some(1), ..job(expired()) },
                    lifo: false,
                    lc: false,
                },
                enqueue(4, Some(WhenC::In(60_000))),
                claim(2),
                claim(2),
            ]),
            3,
        ),
    ];
    let pair = Pair::start();
    let mut failures = Vec::new();
    for (what, case, want) in &cases {
        let cov = Coverage::default();
        if let Err(e) = run_case(&pair, case, &cov) {
            failures.push(format!("== {what}\n{e}"));
            continue;
        }
        let got = cov.borrow().get(&("EMQ.CLAIM".to_string(), "expired".to_string())).copied().unwrap_or(0);
        if got != *want {
            failures.push(format!("== {what}: {got} jobs expired, not {want} ({:?})", cov.borrow()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// A claim's BY, as a fixed sequence against the model (the row's `w` compared at every step):
/// a named claim records the name, a retried job taken again without BY keeps it, and
/// TRA.COMPLETENEXT and TRA.COMPLETESNEXT record theirs in the jobs they fetch.
pub fn a_claims_worker_name_stays_until_the_next_named_claim() {
    let enqueue = |i| Op::Enqueue { id: IdC::Pool(i), job: JobC::plain(), lifo: false, lc: false };
    let claim = |count, by| Op::Claim {
        tok: ClaimTok::Fresh,
        lease: 60_000,
        count: Some(count),
        row: true,
        by,
        lc: false,
    };
    let cfg = fixed(-1, 100);
    let case = Case {
        cfg,
        pool: 5,
        crashy: false,
        resp3: false,
        ops: vec![
            enqueue(0),
            enqueue(1),
            claim(1, Some(ByC::Named(true))),
            Op::Fail {
                id: IdC::Active(0),
                tok: TokC::Holder,
                error: B(b"boom".to_vec()),
                keep: None,
                age: None,
                decision: DecisionC::Retry(false),
                stack: None,
                metrics: None,
                lc: false,
            },
            // Job 1, then the retried job 0: taken without BY, it keeps its name.
            claim(2, None),
            enqueue(2),
            enqueue(3),
            Op::CompleteNext {
                id: IdC::Active(0),
                tok: TokC::Holder,
                result: B(b"ok".to_vec()),
                lease: 60_000,
                keep: None,
                echo: false,
                metrics: None,
                count: None,
                row: true,
                by: Some(ByC::Named(false)),
            },
            enqueue(4),
            Op::CompletesNext {
                entries: vec![
                    (EntryId::Next, TokC::Holder, B(b"ok".to_vec())),
                    (EntryId::Next, TokC::Holder, B(b"ok".to_vec())),
                ],
                fill: None,
                claim: ClaimTok::Fresh,
                lease: 60_000,
                keep: None,
                age: None,
                echo: false,
                metrics: None,
                row: false,
                by: Some(ByC::Longest),
            },
            claim(1, Some(ByC::Empty)),
        ],
    };
    let pair = Pair::start();
    let cov = Coverage::default();
    if let Err(e) = run_case(&pair, &case, &cov) {
        panic!("{e}");
    }
    let cov = cov.borrow();
    for (verb, outcome) in [("EMQ.CLAIM", "1 jobs"), ("EMQ.CLAIM", "2 jobs"), ("EMQ.CLAIM", "EMQARG")] {
        assert!(cov.contains_key(&(verb.to_string(), outcome.to_string())), "{verb} {outcome}: {cov:?}");
    }
}
