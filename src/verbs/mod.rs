//! The commands, one file each, written in the wire's terms, and **the one list of them**.
//!
//! Each verb file declares its command whole: its keys (`KEYS`, in order, each with its role
//! and access), its arguments (`ARGS`, as `COMMAND DOCS` and the reference page show them),
//! `COMMAND` (name, tokens, what it does, summary, complexity; flags, ACL categories and the
//! fence follow), and a `host::Verb`: its argument shape, then its domain step; `host::drive`
//! runs shape → layout → fence → domain around them, and the verb opens each key by its role.
//! The list below names every command in order: registration, the capability tokens of
//! `EMQ.VERSION`, the `bitmap_commands` of `TRA.CAPABILITIES`, `COMMAND INFO`/`COMMAND DOCS`
//! and the reference page's synopses all come from it. Adding a command: its file here, its
//! line in the list and its module line (a test checks that the two name the same files),
//! its section on the reference page (README.md beside this file).

#![forbid(unsafe_code)]

use crate::errors::Refusal;
use crate::host::command::Command;
use crate::host::ArgStr;
use crate::host::{entry, Entry};

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

/// The arguments several verbs share (not a verb: no command of its own).
pub mod options;

// The verb files, declared as modules outside the list: tools that read the module tree
// without expanding macros (cargo-mutants) then find them.
pub mod add;
pub mod addlog;
pub mod append;
pub mod capabilities;
pub mod claim;
pub mod clean;
pub mod complete;
pub mod completenext;
pub mod completes;
pub mod completesnext;
pub mod counts;
pub mod dedup;
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
pub mod limit;
pub mod limits;
pub mod log;
pub mod obliterate;
pub mod priority;
pub mod progress;
pub mod promote;
pub mod publish;
pub mod queues;
pub mod remove;
pub mod reprocess;
pub mod requeue;
pub mod reschedule;
pub mod schedule;
pub mod scheduler;
pub mod schedulers;
pub mod setdata;
pub mod setprogress;
pub mod stalled;
pub mod undedup;
pub mod version;

/// The one list of commands, in the wire's order (its capability tokens come in that order).
/// Each line names a verb's file, whose `COMMAND` declares the command whole; from this list
/// come `COMMANDS`, the table every other part reads, and `ENTRIES`, the C entry points that
/// serve them, one each.
macro_rules! table {
    ($($verb:ident)*) => {
        pub static COMMANDS: [Command; table!(@count $($verb)*)] = [$($verb::COMMAND),*];
        pub static ENTRIES: [Entry; table!(@count $($verb)*)] = table!(@entries [] (0usize) $($verb)*);
    };
    (@count) => { 0usize };
    (@count $head:ident $($rest:ident)*) => { 1usize + table!(@count $($rest)*) };
    (@entries [$($done:expr,)*] ($n:expr)) => { [$($done,)*] };
    (@entries [$($done:expr,)*] ($n:expr) $head:ident $($rest:ident)*) => {
        table!(@entries [$($done,)* entry::<{ $n }>(),] ($n + 1usize) $($rest)*)
    };
}

table! {
    enqueue
    claim
    extend
    extends
    complete
    schedule
    promote
    reschedule
    delay
    fail
    reprocess
    requeue
    stalled
    append
    failures
    publish
    version
    install
    capabilities
    drop
    queues
    job
    counts
    jobs
    remove
    completes
    progress
    log
    drain
    clean
    obliterate
    setprogress
    addlog
    completenext
    priority
    add
    limit
    limits
    dedup
    undedup
    scheduler
    schedulers
    completesnext
    setdata
}

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

    /// The list and the module lines name the same verbs, and every file here is one of them:
    /// a verb file left out of the list would be compiled and never registered.
    #[test]
    fn the_list_names_every_verb_file_once() {
        let text = include_str!("mod.rs");
        let mut listed: Vec<&str> = text
            .split_once("\ntable! {\n")
            .and_then(|(_, rest)| rest.split_once("\n}\n"))
            .map(|(list, _)| list.split_whitespace().collect())
            .unwrap_or_default();
        let mut declared: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("pub mod ").and_then(|m| m.strip_suffix(';')))
            .filter(|m| *m != "options")
            .collect();
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/verbs");
        let mut files: Vec<String> = std::fs::read_dir(dir)
            .expect("src/verbs")
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter_map(|f| f.strip_suffix(".rs").map(str::to_string))
            .filter(|f| f != "mod" && f != "options")
            .collect();
        assert_eq!(listed.len(), COMMANDS.len(), "one line a command");
        listed.sort_unstable();
        declared.sort_unstable();
        files.sort_unstable();
        assert_eq!(listed, declared);
        assert_eq!(files, declared);
    }

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
            assert!(a.name.is_ascii() && a.flags().is_ascii() && a.acl().is_ascii());
            assert!(COMMANDS.iter().skip(i + 1).all(|b| !b.name.eq_ignore_ascii_case(a.name)));
            // EMQ write verbs are fenced and in the emq category; controls are not fenced.
            if !a.tokens.is_empty() {
                assert!(
                    a.fenced && a.acl().starts_with("emq write") && a.flags().starts_with("write"),
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
        assert_eq!(
            row("TRA.ADD").synopsis(),
            "TRA.ADD 4 emq:{Q}:wait emq:{Q}:prio emq:{Q}:delayed emq:{Q}:events n emq:{Q}:job:<ID> [emq:{Q}:job:<ID> ...] name data k [option [option ...]] [name data k [option [option ...]] ...]"
        );
        assert_eq!(capabilities().len(), WIRE_TOKENS.len(), "all seventeen tokens");
        assert_eq!(bitmap(), (1 << 17) - 1);
        let drop = row("TRA.DROP");
        assert!(!drop.fenced && !drop.acl().contains("emq"));
    }

    /// The flags, ACL categories and fence each command's few facts give, spelled out.
    #[test]
    fn flags_and_categories_follow_from_the_facts() {
        let want = [
            (enqueue::COMMAND, "write deny-oom fast", "emq write fast", true),
            (claim::COMMAND, "write", "emq write", true),
            (extend::COMMAND, "write fast", "emq write fast", true),
            (extends::COMMAND, "write", "emq write", true),
            (complete::COMMAND, "write", "emq write", true),
            (schedule::COMMAND, "write deny-oom fast", "emq write fast", true),
            (promote::COMMAND, "write fast", "emq write fast", true),
            (reschedule::COMMAND, "write fast", "emq write fast", true),
            (delay::COMMAND, "write fast", "emq write fast", true),
            (fail::COMMAND, "write", "emq write", true),
            (reprocess::COMMAND, "write fast", "emq write fast", true),
            (requeue::COMMAND, "write fast", "emq write fast", true),
            (stalled::COMMAND, "write", "emq write", true),
            (append::COMMAND, "write deny-oom fast", "emq write fast", true),
            (failures::COMMAND, "write deny-oom fast", "emq write fast", true),
            (publish::COMMAND, "write deny-oom fast getchannels-api", "emq write fast", true),
            (version::COMMAND, "readonly fast allow-loading allow-stale", "emq read fast", false),
            (install::COMMAND, "write deny-oom admin deny-script", "write admin dangerous slow", false),
            (capabilities::COMMAND, "readonly fast allow-loading allow-stale", "read fast", false),
            (drop::COMMAND, "write fast", "write fast", false),
            (queues::COMMAND, "readonly", "emq read", false),
            (job::COMMAND, "readonly fast", "emq read fast", false),
            (counts::COMMAND, "readonly fast", "emq read fast", false),
            (jobs::COMMAND, "readonly", "emq read", false),
            (remove::COMMAND, "write", "emq write", true),
            (completes::COMMAND, "write", "emq write", true),
            (progress::COMMAND, "write fast", "emq write fast", true),
            (log::COMMAND, "write deny-oom fast", "emq write fast", true),
            (drain::COMMAND, "write", "emq write", true),
            (clean::COMMAND, "write", "emq write", true),
            (obliterate::COMMAND, "write", "emq write", true),
            (setprogress::COMMAND, "write fast", "emq write fast", true),
            (addlog::COMMAND, "write deny-oom fast", "emq write fast", true),
            (completenext::COMMAND, "write", "emq write", true),
            (priority::COMMAND, "write fast", "emq write fast", true),
            (add::COMMAND, "write deny-oom", "emq write", true),
            (limit::COMMAND, "write fast", "emq write fast", true),
            (limits::COMMAND, "readonly fast", "emq read fast", false),
            (dedup::COMMAND, "readonly fast", "emq read fast", false),
            (undedup::COMMAND, "write fast", "emq write fast", true),
            (scheduler::COMMAND, "write deny-oom", "emq write", true),
            (schedulers::COMMAND, "readonly", "emq read", false),
            (completesnext::COMMAND, "write", "emq write", true),
            (setdata::COMMAND, "write deny-oom fast", "emq write fast", true),
        ];
        assert_eq!(want.len(), COMMANDS.len());
        for (cmd, flags, acl, fenced) in want {
            assert_eq!(
                (cmd.flags().as_str(), cmd.acl().as_str(), cmd.fenced),
                (flags, acl, fenced),
                "{}",
                cmd.name
            );
        }
    }

    #[test]
    fn synopsis_reads_like_the_wire() {
        assert_eq!(
            COMMANDS[0].synopsis(),
            "EMQ.ENQUEUE 4 emq:{Q}:job:<ID> emq:{Q}:wait emq:{Q}:prio emq:{Q}:events name data [PRIORITY p] [ATTEMPTS n] [BACKOFF FIXED|EXP ms] [OPTS blob] [EXPIRE when] [LIFO] [ALIAS key] [DEDUP id [DEDUPTTL ms [EXTEND] | KEEPLAST] [REPLACE]]"
        );
    }
}
