//! The commands, one file each, written in the wire's terms, and **the one command table**.
//!
//! Each verb file declares its keys (`KEYS`, in order, each with its role and access) and
//! its arguments (`ARGS`, as `COMMAND DOCS` and the reference page show them) next to its
//! code, and is a `host::Verb`: its argument shape, then its domain step; `host::drive` runs
//! shape → layout → fence → domain around them, and the verb opens each key by its role.
//! The table below lists every command in order: registration, the capability tokens of
//! `EMQ.VERSION`, the `bitmap_commands` of `TRA.CAPABILITIES`, `COMMAND INFO`/`COMMAND DOCS`
//! and the reference page's synopses all come from it. Adding a command: its file here, its
//! `mod` line and row below, its section on the reference page (README.md beside this file).

pub mod append;
pub mod capabilities;
pub mod claim;
pub mod clean;
pub mod complete;
pub mod completes;
pub mod counts;
pub mod delay;
pub mod drain;
pub mod drop;
pub mod enqueue;
pub mod extend;
pub mod extends;
pub mod fail;
pub mod failures;
pub mod install;
pub mod job;
pub mod jobs;
pub mod log;
pub mod obliterate;
pub mod progress;
pub mod promote;
pub mod publish;
pub mod queues;
pub mod remove;
pub mod reprocess;
pub mod requeue;
pub mod reschedule;
pub mod schedule;
pub mod stalled;
pub mod version;

use crate::errors::Refusal;
use crate::host::command::{Command, Form};
use crate::host::{drive, ArgStr};

/// The seventeen capability tokens of wire 6, in the wire's order. Bit i of
/// `bitmap_commands` stands for token i; the table lists its commands in this order.
pub const WIRE_TOKENS: [&str; 17] = [
    "enqueue",
    "claim",
    "claim.pause",
    "extend",
    "extends",
    "complete.flat",
    "schedule",
    "promote",
    "reschedule",
    "delay",
    "fail.flat",
    "reprocess",
    "requeue",
    "stalled.check",
    "append",
    "failures.incr",
    "publish",
];

pub static COMMANDS: [Command; 31] = [
    Command {
        name: "EMQ.ENQUEUE",
        tokens: &["enqueue"],
        form: Form::Keys,
        keys: enqueue::KEYS,
        args: enqueue::ARGS,
        flags: "write deny-oom fast",
        acl: "emq write fast",
        fenced: true,
        summary: "Create a job and make it ready; 0 and nothing written when the id exists.",
        complexity: "O(log N) with N the jobs of its priority band",
        run: drive::<enqueue::Enqueue>,
    },
    Command {
        name: "EMQ.CLAIM",
        tokens: &["claim", "claim.pause"],
        form: Form::Keys,
        keys: claim::KEYS,
        args: claim::ARGS,
        flags: "write",
        acl: "emq write",
        fenced: true,
        summary: "Promote due delayed jobs, then take up to COUNT ready jobs under a lease; or pause/resume the queue.",
        complexity: "O((n + p) log N) for n jobs taken and p promoted",
        run: drive::<claim::Claim>,
    },
    Command {
        name: "EMQ.EXTEND",
        tokens: &["extend"],
        form: Form::Keys,
        keys: extend::KEYS,
        args: extend::ARGS,
        flags: "write fast",
        acl: "emq write fast",
        fenced: true,
        summary: "Move a held job's lease deadline to now+lease_ms.",
        complexity: "O(log N)",
        run: drive::<extend::Extend>,
    },
    Command {
        name: "EMQ.EXTENDS",
        tokens: &["extends"],
        form: Form::Keys,
        keys: extends::KEYS,
        args: extends::ARGS,
        flags: "write",
        acl: "emq write",
        fenced: true,
        summary: "EXTEND many held jobs at once; 0 for each job not held with its token.",
        complexity: "O(n log N) for n pairs",
        run: drive::<extends::Extends>,
    },
    Command {
        name: "EMQ.COMPLETE",
        tokens: &["complete.flat"],
        form: Form::Keys,
        keys: complete::KEYS,
        args: complete::ARGS,
        flags: "write",
        acl: "emq write",
        fenced: true,
        summary: "Finish a held job with its result; 0 when the same token already completed it.",
        complexity: "O(log N), plus O(r log N) for r jobs retired",
        run: drive::<complete::Complete>,
    },
    Command {
        name: "EMQ.SCHEDULE",
        tokens: &["schedule"],
        form: Form::Keys,
        keys: schedule::KEYS,
        args: schedule::ARGS,
        flags: "write deny-oom fast",
        acl: "emq write fast",
        fenced: true,
        summary: "Create a job that becomes ready at `when`; 0 and nothing written when the id exists.",
        complexity: "O(log N)",
        run: drive::<schedule::Schedule>,
    },
    Command {
        name: "EMQ.PROMOTE",
        tokens: &["promote"],
        form: Form::Keys,
        keys: promote::KEYS,
        args: promote::ARGS,
        flags: "write fast",
        acl: "emq write fast",
        fenced: true,
        summary: "Make a delayed job ready now.",
        complexity: "O(log N)",
        run: drive::<promote::Promote>,
    },
    Command {
        name: "EMQ.RESCHEDULE",
        tokens: &["reschedule"],
        form: Form::Keys,
        keys: reschedule::KEYS,
        args: reschedule::ARGS,
        flags: "write fast",
        acl: "emq write fast",
        fenced: true,
        summary: "Move a delayed job's due time.",
        complexity: "O(log N)",
        run: drive::<reschedule::Reschedule>,
    },
    Command {
        name: "EMQ.DELAY",
        tokens: &["delay"],
        form: Form::Keys,
        keys: delay::KEYS,
        args: delay::ARGS,
        flags: "write fast",
        acl: "emq write fast",
        fenced: true,
        summary: "Park a held job in delayed until `when`, counting no attempt.",
        complexity: "O(log N)",
        run: drive::<delay::Delay>,
    },
    Command {
        name: "EMQ.FAIL",
        tokens: &["fail.flat"],
        form: Form::Keys,
        keys: fail::KEYS,
        args: fail::ARGS,
        flags: "write",
        acl: "emq write",
        fenced: true,
        summary: "Count a held job's failed attempt: retry, delay by its backoff, or fail it for good.",
        complexity: "O(log N), plus O(r log N) for r jobs retired",
        run: drive::<fail::Fail>,
    },
    Command {
        name: "EMQ.REPROCESS",
        tokens: &["reprocess"],
        form: Form::Keys,
        keys: reprocess::KEYS,
        args: reprocess::ARGS,
        flags: "write fast",
        acl: "emq write fast",
        fenced: true,
        summary: "Send a completed or failed job back to ready with its counters reset.",
        complexity: "O(log N)",
        run: drive::<reprocess::Reprocess>,
    },
    Command {
        name: "EMQ.REQUEUE",
        tokens: &["requeue"],
        form: Form::Keys,
        keys: requeue::KEYS,
        args: requeue::ARGS,
        flags: "write fast",
        acl: "emq write fast",
        fenced: true,
        summary: "Give a held job back: ready again at the front, no attempt counted.",
        complexity: "O(log N)",
        run: drive::<requeue::Requeue>,
    },
    Command {
        name: "EMQ.STALLED",
        tokens: &["stalled.check"],
        form: Form::Keys,
        keys: stalled::KEYS,
        args: stalled::ARGS,
        flags: "write",
        acl: "emq write",
        fenced: true,
        summary: "Reclaim jobs whose lease expired: requeue them, or fail them past MAXSTALLS.",
        complexity: "O(n log N) for n jobs reclaimed",
        run: drive::<stalled::Stalled>,
    },
    Command {
        name: "EMQ.APPEND",
        tokens: &["append"],
        form: Form::Keys,
        keys: append::KEYS,
        args: append::ARGS,
        flags: "write deny-oom fast",
        acl: "emq write fast",
        fenced: true,
        summary: "Append a bus message to its topic's stream once; nil and nothing written for an id inside the seen window.",
        complexity: "O(log N), plus the trims: up to 100 seen entries and whole stream nodes",
        run: drive::<append::Append>,
    },
    Command {
        name: "EMQ.FAILURES",
        tokens: &["failures.incr"],
        form: Form::Keys,
        keys: failures::KEYS,
        args: failures::ARGS,
        flags: "write deny-oom fast",
        acl: "emq write fast",
        fenced: true,
        summary: "Count one more failure of a bus message and set its counter's TTL (default 24 h).",
        complexity: "O(1)",
        run: drive::<failures::Failures>,
    },
    Command {
        name: "EMQ.PUBLISH",
        tokens: &["publish"],
        form: Form::Keys,
        keys: publish::KEYS,
        args: publish::ARGS,
        flags: "write deny-oom fast getchannels-api",
        acl: "emq write fast",
        fenced: true,
        summary: "APPEND, then publish the payload on the channel named by the bus key; nil for a duplicate.",
        complexity: "O(log N + S) for S subscribers, plus APPEND's trims",
        run: drive::<publish::Publish>,
    },
    Command {
        name: "EMQ.VERSION",
        tokens: &[],
        form: Form::Bare,
        keys: version::KEYS,
        args: version::ARGS,
        flags: "readonly fast allow-loading allow-stale",
        acl: "emq read fast",
        fenced: false,
        summary: "The module's identity: wire, module, version, major, build, capabilities.",
        complexity: "O(1)",
        run: drive::<version::Version>,
    },
    Command {
        name: "EMQ.INSTALL",
        tokens: &[],
        form: Form::Keys,
        keys: install::KEYS,
        args: install::ARGS,
        flags: "write deny-oom admin deny-script",
        acl: "write admin dangerous slow",
        fenced: false,
        summary: "Write the module's wire identity into {emq}:version, once.",
        complexity: "O(1)",
        run: drive::<install::Install>,
    },
    Command {
        name: "TRA.CAPABILITIES",
        tokens: &[],
        form: Form::Bare,
        keys: capabilities::KEYS,
        args: capabilities::ARGS,
        flags: "readonly fast allow-loading allow-stale",
        acl: "read fast",
        fenced: false,
        summary: "The facts of this build as eight pairs.",
        complexity: "O(1)",
        run: drive::<capabilities::Capabilities>,
    },
    Command {
        name: "TRA.DROP",
        tokens: &[],
        form: Form::Keys,
        keys: drop::KEYS,
        args: drop::ARGS,
        flags: "write fast",
        acl: "write fast",
        fenced: false,
        summary: "The coherence drop: delete a cache row when the incoming 14-byte version is newer than its stored frame's.",
        complexity: "O(1)",
        run: drive::<drop::CoherenceDrop>,
    },
    Command {
        name: "TRA.QUEUES",
        tokens: &[],
        form: Form::Bare,
        keys: queues::KEYS,
        args: queues::ARGS,
        flags: "readonly",
        acl: "emq read",
        fenced: false,
        summary: "The queues upkeep knows in this database, a page at a time.",
        complexity: "O(log Q + n) for a page of n of Q queues",
        run: drive::<queues::Queues>,
    },
    Command {
        name: "TRA.JOB",
        tokens: &[],
        form: Form::Keys,
        keys: job::KEYS,
        args: job::ARGS,
        flags: "readonly fast",
        acl: "emq read fast",
        fenced: false,
        summary: "One job: its state, fields, lease deadline and due time, as a map; nil when absent.",
        complexity: "O(1)",
        run: drive::<job::Inspect>,
    },
    Command {
        name: "TRA.COUNTS",
        tokens: &[],
        form: Form::Keys,
        keys: counts::KEYS,
        args: counts::ARGS,
        flags: "readonly fast",
        acl: "emq read fast",
        fenced: false,
        summary: "A queue's depth: the size of each state set and whether it is paused.",
        complexity: "O(1)",
        run: drive::<counts::Counts>,
    },
    Command {
        name: "TRA.JOBS",
        tokens: &[],
        form: Form::Keys,
        keys: jobs::KEYS,
        args: jobs::ARGS,
        flags: "readonly",
        acl: "emq read",
        fenced: false,
        summary: "A page of one state set's ids, in serving order.",
        complexity: "O(log N + n) for a page of n",
        run: drive::<jobs::Jobs>,
    },
    Command {
        name: "TRA.REMOVE",
        tokens: &[],
        form: Form::Keys,
        keys: remove::KEYS,
        args: remove::ARGS,
        flags: "write",
        acl: "emq write",
        fenced: true,
        summary: "Delete one job: its row and its set entry; a held job only with FORCE.",
        complexity: "O(log N), or O(N) for a job waiting in wait (LREM)",
        run: drive::<remove::Remove>,
    },
    Command {
        name: "TRA.COMPLETES",
        tokens: &[],
        form: Form::Keys,
        keys: completes::KEYS,
        args: completes::ARGS,
        flags: "write",
        acl: "emq write",
        fenced: true,
        summary: "COMPLETE many held jobs at once: 1, 0 (a repeat), -1 (not held) or -2 (no such job) for each.",
        complexity: "O(n log N) for n jobs",
        run: drive::<completes::Completes>,
    },
    Command {
        name: "TRA.PROGRESS",
        tokens: &[],
        form: Form::Keys,
        keys: progress::KEYS,
        args: progress::ARGS,
        flags: "write fast",
        acl: "emq write fast",
        fenced: true,
        summary: "The holder reports its progress on a job: stored in the row, one event.",
        complexity: "O(log N)",
        run: drive::<progress::Progress>,
    },
    Command {
        name: "TRA.LOG",
        tokens: &[],
        form: Form::Keys,
        keys: log::KEYS,
        args: log::ARGS,
        flags: "write deny-oom fast",
        acl: "emq write fast",
        fenced: true,
        summary: "The holder appends a line to its job's log, keeping the newest n.",
        complexity: "O(1), plus the lines trimmed",
        run: drive::<log::AppendLog>,
    },
    Command {
        name: "TRA.DRAIN",
        tokens: &[],
        form: Form::Keys,
        keys: drain::KEYS,
        args: drain::ARGS,
        flags: "write",
        acl: "emq write",
        fenced: true,
        summary: "Delete jobs waiting to run (and delayed ones with DELAYED), a bounded batch a call.",
        complexity: "O(n log N) for n jobs",
        run: drive::<drain::Drain>,
    },
    Command {
        name: "TRA.CLEAN",
        tokens: &[],
        form: Form::Keys,
        keys: clean::KEYS,
        args: clean::ARGS,
        flags: "write",
        acl: "emq write",
        fenced: true,
        summary: "Delete finished jobs older than GRACE ms, oldest first, a bounded batch a call.",
        complexity: "O(n log N) for n jobs",
        run: drive::<clean::Clean>,
    },
    Command {
        name: "TRA.OBLITERATE",
        tokens: &[],
        form: Form::Keys,
        keys: obliterate::KEYS,
        args: obliterate::ARGS,
        flags: "write",
        acl: "emq write",
        fenced: true,
        summary: "Delete a whole queue, a bounded number of keys a call; refused while jobs are active unless FORCE.",
        complexity: "O(n log N) for n keys",
        run: drive::<obliterate::Obliterate>,
    },
];

/// The capability tokens of the registered commands, in table order.
pub fn capabilities() -> Vec<&'static str> {
    COMMANDS.iter().flat_map(|c| c.tokens.iter().copied()).collect()
}

/// Bit i set when wire token i is provided by a registered command.
pub fn bitmap() -> i64 {
    capabilities()
        .iter()
        .filter_map(|t| WIRE_TOKENS.iter().position(|w| w == t))
        .fold(0i64, |acc, i| acc | (1i64 << i))
}

/// A command that takes nothing after its keys.
fn no_arguments(args: &[ArgStr]) -> Result<(), Refusal> {
    if args.is_empty() {
        Ok(())
    } else {
        Err(Refusal::Usage)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_wire_tokens_in_wire_order() {
        let caps = capabilities();
        let positions: Vec<usize> =
            caps.iter().map(|t| WIRE_TOKENS.iter().position(|w| w == t).expect("a wire token")).collect();
        assert!(positions.windows(2).all(|w| w[0] < w[1]), "table order is wire order: {caps:?}");
        assert_eq!(bitmap().count_ones() as usize, caps.len());
    }

    #[test]
    fn names_are_unique_and_ascii() {
        for (i, a) in COMMANDS.iter().enumerate() {
            assert!(a.name.is_ascii() && a.flags.is_ascii() && a.acl.is_ascii());
            assert!(COMMANDS.iter().skip(i + 1).all(|b| !b.name.eq_ignore_ascii_case(a.name)));
            // EMQ write verbs are fenced and in the emq category; controls are not fenced.
            if !a.tokens.is_empty() {
                assert!(
                    a.fenced && a.acl.starts_with("emq write") && a.flags.starts_with("write"),
                    "{}",
                    a.name
                );
            }
        }
    }

    #[test]
    fn bus_and_drop_rows() {
        let row = |n: &str| COMMANDS.iter().find(|c| c.name == n).expect("a row");
        assert_eq!(
            row("EMQ.APPEND").synopsis(),
            "EMQ.APPEND 2 emq:{Q}:bus emq:{Q}:seen id payload [MAXLEN n]"
        );
        assert_eq!(
            row("EMQ.PUBLISH").synopsis(),
            "EMQ.PUBLISH 2 emq:{Q}:bus emq:{Q}:seen id payload [MAXLEN n]"
        );
        assert_eq!(row("EMQ.FAILURES").synopsis(), "EMQ.FAILURES 1 emq:{Q}:fails:<ID> [TTL ms]");
        assert_eq!(row("TRA.DROP").synopsis(), "TRA.DROP 1 key version");
        assert_eq!(capabilities().len(), WIRE_TOKENS.len(), "all seventeen tokens");
        assert_eq!(bitmap(), (1 << 17) - 1);
        let drop = row("TRA.DROP");
        assert!(!drop.fenced && !drop.acl.contains("emq"));
    }

    #[test]
    fn synopsis_reads_like_the_wire() {
        assert_eq!(
            COMMANDS[0].synopsis(),
            "EMQ.ENQUEUE 4 emq:{Q}:job:<ID> emq:{Q}:wait emq:{Q}:prio emq:{Q}:events name data [PRIORITY p] [ATTEMPTS n] [BACKOFF FIXED|EXP ms] [OPTS blob] [EXPIRE when] [LIFO]"
        );
    }
}
