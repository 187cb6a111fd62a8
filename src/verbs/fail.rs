//! `EMQ.FAIL 7 job active wait prio delayed failed events token error [KEEP n] [AGE ms]
//! [FINAL | RETRY [LIFO] | DELAY when] [STACK blob] [METRICS max]`
//!
//! Counts the attempt (`am+1`), keeps the error, clears the token, stores STACK in `s` (a
//! FAIL without it deletes `s`: the row holds the last failure's stack), then: the client's
//! decision when it gives one — FINAL failed for good, RETRY ready now (front of wait with
//! LIFO), DELAY delayed until `when` — whatever attempts and backoff say; else
//! `am >= attempts` → failed for good (retention as COMPLETE, default
//! `trafikey.keep-failed`), reply `failed`; else the backoff delay (FIXED d, or EXP
//! d·2^(am−1)): 0 or none → ready again at the back, reply `retry`; above 0 → delayed,
//! reply `delayed`. METRICS max: a job failed for good is counted by the minute in
//! `metrics:failed` (`queue::tally`); a retried or delayed one is not.

use super::options::{AGE, KEEP, METRICS};
use crate::config;
use crate::domain::args::When;
use crate::domain::{self, args::Opt, AfterFail, Backoff, Keep};
use crate::errors::Refusal;
use crate::host::command::{block, flag, one_of, opt, q, val, word, Arg, Command, Keys, Spec::*, Ty};
use crate::host::{ArgStr, Exec, Key, Kind, Lit, Reply, Str, Verb};
use crate::keyspace::Role::*;
use crate::queue::finish::{Ending, Finishing};
use crate::queue::{self, field, End, Event, Events, Holder, Ready, Row, Sets, State, Tallied, Tally};

pub const KEYS: Keys = Keys::of(&[
    q(Job, Update),
    q(Active, Take),
    q(Wait, Insert),
    q(Prio, Insert),
    q(Delayed, Insert),
    q(Failed, Update),
    q(Events, Append),
]);
pub const ARGS: &[Arg] = &[
    val("token", Ty::Str),
    val("error", Ty::Str).payload(),
    KEEP,
    AGE,
    one_of(
        "decision",
        None,
        &[
            word("FINAL"),
            block("retry", None, &[word("RETRY"), flag("lifo", "LIFO")]),
            block("delay", Some("DELAY"), &[val("when", Ty::Str).range(domain::WHEN)]),
        ],
    )
    .optional(),
    opt("stack", "STACK", "blob", Ty::Str).payload(),
    METRICS,
];

/// The command, declared whole: registration, ACL, `COMMAND DOCS` and the reference take it
/// from here.
pub const COMMAND: Command = Command::new::<Fail>("EMQ.FAIL")
    .holder()
    .tokens(&["fail.flat"])
    .keys(KEYS)
    .args(ARGS)
    .writes()
    .summary("Count a held job's failed attempt: retry, delay, or fail it for good, by its backoff or the caller's decision.")
    .complexity("O(log N), plus O(r log N) for r jobs retired");

pub struct Fail;

pub struct Args<'a> {
    token: ArgStr<'a>,
    error: ArgStr<'a>,
    how: Finishing,
    decision: Decision,
    stack: Option<ArgStr<'a>>,
}

/// What the caller decided, over the job's attempts and backoff.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Decision {
    /// Nothing: attempts and backoff decide.
    Backoff,
    Final,
    Retry {
        lifo: bool,
    },
    Delay(When),
}

impl Verb for Fail {
    type Args<'a> = Args<'a>;

    fn shape<'a>(args: &[ArgStr<'a>]) -> Result<Args<'a>, Refusal> {
        match args {
            [token, error, rest @ ..] => {
                let o = domain::args::options(
                    rest,
                    &[
                        Opt::Keep,
                        Opt::Age,
                        Opt::Final,
                        Opt::Retry,
                        Opt::Lifo,
                        Opt::Delay,
                        Opt::Stack,
                        Opt::Metrics,
                    ],
                )?;
                let decision = match (o.final_, o.retry, o.delay) {
                    (false, false, None) => Decision::Backoff,
                    (true, false, None) => Decision::Final,
                    (false, true, None) => Decision::Retry { lifo: o.lifo },
                    (false, false, Some(when)) => Decision::Delay(when),
                    _ => return Err(Refusal::Shape("FINAL, RETRY and DELAY exclude each other".into())),
                };
                if o.lifo && !o.retry {
                    return Err(Refusal::Shape("LIFO goes with RETRY".into()));
                }
                Ok(Args { token: *token, error: *error, how: Finishing::of(&o), decision, stack: o.stack })
            }
            _ => Err(Refusal::Usage),
        }
    }

    fn run<'a>(x: &mut Exec<'a>, a: Args<'a>) -> Result<Reply, Refusal> {
        domain::job_id(x.id)?;
        domain::token(&a.token)?;
        domain::payload(&a.error, config::max_payload(), "error")?;
        let (keep, age) = a.how.check(&config::KEEP_FAILED)?;
        let chosen_due = match a.decision {
            Decision::Delay(when) => Some(domain::due(when, x.now())?),
            _ => None,
        };
        if let Some(stack) = &a.stack {
            domain::payload(stack, config::max_payload(), "STACK")?;
        }
        let job = Holder::open(x)?;
        let ready = Ready::open(x)?;
        let delayed = x.open_as(Delayed, Kind::ZSet)?;
        let failed = x.open_as(Failed, Kind::ZSet)?;
        let events = Events::open(x)?;
        job.check(&a.token)?;
        let (row, id) = (&job.row, &job.id);
        // Attempts made and allowed, and the DEDUP id, in one read of the row.
        let [made, attempts, dedup, ..] = row.hget_many(&[&field::MADE, &field::ATTEMPTS, &field::DEDUP]);
        let int =
            |v: Option<crate::host::Str>, d: i64| v.and_then(|v| domain::args::int(v.bytes())).unwrap_or(d);
        let (made, attempts) = (int(made, 0).saturating_add(1), int(attempts, 1));
        let now = x.now();
        let next = a.decision.next(made, attempts, chosen_due, now, Row(row).backoff());
        let sets = Sets { ready: Some(&ready), delayed: Some(&delayed) };
        let mut ending = match next {
            AfterFail::Fail => {
                let tally = Tally::open(x, Tallied::Failed, a.how.metrics, 1)?;
                let ending = smallvec::smallvec![Some((x.id, dedup))];
                Some(Ending::plan(x, &failed, keep, age, ending, &[x.id], tally, sets)?)
            }
            _ => None,
        };

        // Write.
        job.active.zrem(id.str_ref());
        job.active.signal_ready();
        let (error, made_s) = (a.error.str_ref(), x.int(made)?);
        let mut fields: queue::Pairs =
            smallvec::smallvec![(&field::ERROR, error), (&field::MADE, made_s.str_ref())];
        fields.extend(a.stack.map(|s| (&field::STACK, s.str_ref())));
        let reply = match (next, ending.as_mut()) {
            (AfterFail::Fail, Some(ending)) => {
                let alias = ending.end(x, 0, row, &failed, id, State::Failed, &fields)?;
                // The row holds the last failure's stack: an earlier one goes.
                if a.stack.is_none() && keep != Keep::None {
                    row.hdel(&[&field::STACK])?;
                }
                let alias = alias.as_ref().map(|a| a.str_ref());
                events.emit(
                    x,
                    Some(id.str_ref()),
                    Event::Failed { error, attempt: made, attempts, alias },
                )?;
                c"failed"
            }
            (AfterFail::Fail, None) => return Err(crate::errors::host_reply()),
            (back, _) => {
                let lifo = matches!(a.decision, Decision::Retry { lifo: true });
                let to = Back { row, id, ready: &ready, delayed: &delayed, events: &events };
                to.put(x, back, fields, a.stack.is_some(), lifo, now)?
            }
        };
        if let Some(ending) = ending {
            ending.close(x, &failed, &events, sets)?;
        }
        Ok(Reply::Simple(reply))
    }
}

impl Decision {
    /// What follows the failure: the caller's decision wins over attempts and backoff; a
    /// delay is then its due time.
    fn next(
        self,
        made: i64,
        attempts: i64,
        chosen_due: Option<i64>,
        now: i64,
        backoff: Option<Backoff>,
    ) -> AfterFail {
        match (self, chosen_due) {
            (Decision::Retry { .. }, _) => AfterFail::Retry,
            (Decision::Delay(_), Some(due)) => AfterFail::Delay(due.saturating_sub(now)),
            (d, _) => domain::after_fail(made, attempts, d == Decision::Final, backoff),
        }
    }
}

/// A failed job going back: ready again, or delayed.
struct Back<'k> {
    row: &'k Key,
    id: &'k Str,
    ready: &'k Ready,
    delayed: &'k Key,
    events: &'k Events,
}

impl Back<'_> {
    /// Writes the row (`fields`, its new state; leaving active clears the token, and the
    /// stack of an earlier failure unless this one gives STACK), its set and its event.
    /// Replies `retry` or `delayed`.
    fn put(
        &self,
        x: &Exec,
        next: AfterFail,
        mut fields: queue::Pairs,
        stack: bool,
        lifo: bool,
        now: i64,
    ) -> Result<&'static std::ffi::CStr, Refusal> {
        let cleared: &[&Lit] = if stack { &[&field::TOKEN] } else { &[&field::TOKEN, &field::STACK] };
        let id = self.id.str_ref();
        match next {
            AfterFail::Delay(d) => {
                let due = now.saturating_add(d).min(domain::TIME_MAX);
                self.delayed.zadd(due, id)?;
                fields.push((&field::STATE, State::Delayed.lit().str_ref()));
                self.row.hset(&fields)?;
                self.row.hdel(cleared)?;
                self.events.emit(x, Some(id), Event::Delayed { due })?;
                queue::due_at(x, due);
                Ok(c"delayed")
            }
            _ => {
                let state = self.ready.put(id, Row(self.row).priority(), End::lifo(lifo))?;
                fields.push((&field::STATE, state.lit().str_ref()));
                self.row.hset(&fields)?;
                self.row.hdel(cleared)?;
                self.events.emit(x, Some(id), Event::Waiting { prev: State::Active })?;
                Ok(c"retry")
            }
        }
    }
}
