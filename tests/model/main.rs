//! Model-based property test of the job queue: a pure Rust model of the thirteen job verbs
//! (ENQUEUE, CLAIM with PAUSE/RESUME, EXTEND, EXTENDS, COMPLETE, SCHEDULE, PROMOTE,
//! RESCHEDULE, DELAY, FAIL, REPROCESS, REQUEUE, STALLED; ENQUEUE and SCHEDULE with and without
//! `EXPIRE when`; CLAIM with ROW, CLAIM, TRA.COMPLETENEXT and TRA.COMPLETESNEXT with `BY worker` (and its
//! refused names), COMPLETE with ECHO; COMPLETE, TRA.COMPLETENEXT and FAIL with
//! `METRICS max`, whose counters and series the view compares, and whose minute a client moves
//! back (`HINCRBY … prevTS`) so that counts end minutes; FAIL with the caller's `FINAL | RETRY
//! [LIFO] | DELAY when`, its refused shapes, and `STACK`; REPROCESS with `FROM`, `KEEPMADE`,
//! `KEEPSTARTED`, `KEEPPROGRESS`, `LIFO`; STALLED without MAXSTALLS honouring a queue's own `max-stalls`,
//! which the steps set and delete in `meta` with HSET/HDEL as a client would) and of the
//! inspection and administration commands (TRA.PRIORITY, TRA.COMPLETES, TRA.COMPLETENEXT,
//! TRA.PROGRESS with ECHO, TRA.SETPROGRESS, TRA.SETDATA (any job's data, in any state), TRA.LOG, TRA.ADDLOG, TRA.REMOVE with and without FORCE,
//! TRA.DRAIN with and without DELAYED, TRA.CLEAN of either finished set, TRA.OBLITERATE with
//! and without FORCE, and the reads TRA.JOB, TRA.COUNTS, TRA.JOBS, whose replies are checked
//! against the model's own view; job schedulers' TRA.SCHEDULER SET (EVERY, OFFSET, LIMIT) and
//! DEL, whose pending iterations — delayed jobs with the module's own ids, custom ids
//! `repeat:<id>:<ms>` — the model makes, replaces and deletes as the contract says, and which
//! CLAIM then promotes and hands out like any job), written from the contract (src/CONTRACT.md), the reference
//! page (src/verbs/README.md) and the verbs' doc comments — not from the module's code — run
//! side by side with a live server on random sequences of verbs.
//!
//! After every step the test compares: the reply (value, or the class of an error: its first
//! word; RESP3 maps as their RESP2 pairs), the events the step appended (the contract's
//! events table: names, ids and facts, in order), and the whole queue — every state set with
//! its scores (lease deadlines, due times, finish times, priorities), `wait` in claim order,
//! the paused flag, whether `meta` and `events` exist, every job's log (`emq:{Q}:log:<ID>`,
//! line by line), and every job row's fields the model tracks (state, name, data, priority,
//! attempts, created, token, started, made, stalls, claimed, result, error, finished,
//! progress, expire, stack). After every step the invariant holds on the server's own view — every
//! job id in at most one state set, its row's `st` naming it, a row iff the job is in a set,
//! no log without its row — and a refusal leaves `DEBUG DIGEST` unchanged (a refusal writes
//! nothing). Every path that deletes a row deletes its log in the model (retention by count
//! and by age, KEEP 0, STALLED's failures under retention, REMOVE, DRAIN, CLEAN, OBLITERATE),
//! so the server must too; the summary counts the logs each verb deleted. After every
//! sequence `Q::check_invariant` runs, and a replica of the server must hold the same
//! keyspace (`DEBUG DIGEST`): the verbs replicate their effects.
//!
//! DEDUP. Producers (ENQUEUE, SCHEDULE, each job of TRA.ADD) give `DEDUP id` now and then, from
//! three ids (so they collide) or out of range, with or without `DEDUPTTL` (long enough never
//! to run out during a case, or 0), `EXTEND` and `REPLACE`: a live id answers its holder's id
//! with a `deduplicated` event; REPLACE swaps a delayed holder for the new job; every finish
//! releases an id without a TTL, every deletion by a client any id, retention none. The view
//! compares each id's key (the job it names, its expiry time) and every row's `de`.
//!
//! Time. The model never assumes the server's clock: the test reads `TIME` before and after
//! each step (separate round trips, so each command runs in an event-loop turn of its own)
//! and accepts the step if the model, run at *some* instant `now` in that bracket, produces
//! exactly what the server did. Every time-dependent value (deadlines, due times, finish
//! times, which leases have expired and which delayed jobs are due) is then exact, so leases
//! of 1–20 ms and `when`s a few ms ahead are fine: they expire during real sleeps (1–25 ms
//! and 100–150 ms steps) or simply while the sequence runs, and the model follows.
//!
//! EXPIRE. A job created with `EXPIRE when` (past, +0, a few ms ahead, far ahead, absolute,
//! and out of range) that no CLAIM has taken by then is never handed out: the CLAIM that meets
//! it — promoting it when due, or taking it from `wait`/`prio` — fails it for good with
//! `expired` (`f` = now, a `failed` event with `attempt` = `am`, under `keep-failed`, deleted
//! at once with 0 or beyond the cap), and goes on to the jobs behind it: another pass while the
//! last one met an expired job, at most 4, meeting at most 50 jobs in all (each pass promotes
//! again). Once a CLAIM took the job in time its EXPIRE is spent for good — a retry, a stall or
//! REPROCESS does not revive it (the reference page says so in as many words). The server runs
//! with upkeep off, so only CLAIM expires jobs.
//!
//! TRA.COMPLETES: up to 50 `id token result` triples (sometimes padded with jobs that do not
//! exist to exactly 50, or 51), each answered as COMPLETE would (1, 0 for the finishing
//! token's repeat, -1 not held, -2 no job), `keep-completed` retention when a job finished;
//! refused whole (the id gate on every id first, then the count, tokens, results, an id twice).
//!
//! Every config the model depends on is set per case, at random, and modelled:
//! `keep-completed`, `keep-failed`, `max-stalls`, `stalled-batch`, `promote-batch`,
//! `retention-batch` (1 and 2 make the bounds bite), `max-payload` (4 bytes makes payload
//! ranges bite), `log-keep` (1 and 2 make TRA.LOG's default trim bite) and `events-maxlen`
//! (0 turns events off).
//!
//! Cases are of three kinds: ordinary workers; "crashy" ones whose holder verbs are rare, so
//! leases pile up and STALLED reclaims several at once; and "deep" ones, twice as long on five
//! ids, whose claims and holder verbs are frequent, so jobs go round retries, delays, finishes
//! and retention many times. Some cases send the verbs over RESP3 (the replies must be the same).
//!
//! Scale: batches of `MODEL_CASES` (default 100) cases of up to `MODEL_STEPS` (default 60)
//! steps, each batch under its own seed from `MODEL_SEED` on (default fixed, so CI is
//! reproducible; any u64 explores elsewhere), until at least `MODEL_MIN` (500) cases ran and
//! `MODEL_SECONDS` (45) passed, at most `MODEL_BATCHES` (20) batches.
//! Shrinking a failure is bounded by `MODEL_SHRINK_MS` (default 120000) and
//! `MODEL_SHRINK_ITERS` (default 4000).
//! A failure prints the shrunk sequence, every command it sent with the reply, and the
//! difference between the model and the server. Sequences it found where the module departed
//! from the contract are replayed by `found_divergences_replay` on every run, whatever the
//! seed (regressions once fixed).
//!
//! The files: `model.rs` (the contract's constants and the model of the verbs), `calls.rs` (a
//! call as it is sent), `view.rs` (the queue as the model and as the server hold it, the
//! invariant, the differences, their printing), `generators.rs` (the random steps and cases),
//! `run.rs` (one case against a server, its replica and the model) and `cases.rs` (the tests,
//! named below as they always were).
// A test may panic: that is how it fails. The module's own rules are for src/.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

use trafikey_support::*;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::strategy::Union;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};

mod calls;
mod cases;
mod generators;
mod model;
mod run;
mod view;

use calls::*;
use generators::*;
use model::*;
use run::*;
use view::*;

macro_rules! tests {
    ($($name:ident)*) => { $( #[test] fn $name() { cases::$name() } )* };
}
tests!(
    job_core_agrees_with_its_model
    found_divergences_replay
    every_path_deletes_the_log_with_its_row
    claim_goes_past_expired_jobs
    a_claims_worker_name_stays_until_the_next_named_claim
);
