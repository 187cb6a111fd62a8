//! The one command table. Registration, the capability tokens of `EMQ.VERSION`, the
//! `bitmap_commands` of `TRA.CAPABILITIES`, `COMMAND INFO`/`COMMAND DOCS` and the reference
//! page's synopses all come from here: a verb is added by adding its row.

use crate::errors::Refusal;
use crate::host::{drive, Exec, Reply};
use crate::keyspace::Role;
use crate::verbs;

pub type Run = for<'a> fn(&mut Exec<'a>, &'static Command) -> Result<Reply, Refusal>;

/// The seventeen capability tokens of wire 6, in the seed's order. Bit i of
/// `bitmap_commands` stands for token i.
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

/// How a command takes its keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// `CMD numkeys key... arg...`: the FCALL convention, `numkeys` fixed per command.
    Keys,
    /// `CMD arg...`: no keys at all.
    Bare,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyRole {
    Queue(Role),
    /// `{emq}:version`, exactly.
    Version,
    /// Any key at all (TRA.DROP's cache row): layout checks nothing but its presence.
    Any,
}

/// What a command does with the key at one position: its key spec, and so the ACL
/// permission the server demands for it (read for `Access`, write for the rest).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spec {
    /// RO ACCESS: read only.
    Read,
    /// RW INSERT: adds, never reads or changes what is there.
    Insert,
    /// RW UPDATE: writes without reading (appends and trims, as XADD's own spec says).
    Append,
    /// RW ACCESS UPDATE: reads and changes, deletions included (a key spec names one of
    /// INSERT, UPDATE, DELETE; UPDATE is "any other write").
    Update,
    /// RW ACCESS DELETE: takes elements out and uses them.
    Take,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    pub role: KeyRole,
    pub spec: Spec,
}

const fn q(role: Role, spec: Spec) -> Slot {
    Slot { role: KeyRole::Queue(role), spec }
}

pub struct Command {
    pub name: &'static str,
    /// Capability tokens this command provides (none for the controls).
    pub tokens: &'static [&'static str],
    pub form: Form,
    pub keys: &'static [Slot],
    /// The arguments after the keys, as the reference page writes them.
    pub args: &'static str,
    pub flags: &'static str,
    pub acl: &'static str,
    /// Whether the fence runs before the domain step.
    pub fenced: bool,
    pub summary: &'static str,
    pub complexity: &'static str,
    pub run: Run,
}

use Role::*;
use Spec::*;

pub static COMMANDS: [Command; 20] = [
    Command {
        name: "EMQ.ENQUEUE",
        tokens: &["enqueue"],
        form: Form::Keys,
        keys: &[q(Job, Insert), q(Wait, Insert), q(Prio, Insert), q(Events, Append)],
        args: "name data [PRIORITY p] [ATTEMPTS n] [BACKOFF FIXED|EXP ms] [OPTS blob] [LIFO]",
        flags: "write deny-oom fast",
        acl: "emq write fast",
        fenced: true,
        summary: "Create a job and make it ready; 0 and nothing written when the id exists.",
        complexity: "O(log N) with N the jobs of its priority band",
        run: drive::<verbs::enqueue::Enqueue>,
    },
    Command {
        name: "EMQ.CLAIM",
        tokens: &["claim", "claim.pause"],
        form: Form::Keys,
        keys: &[q(Wait, Update), q(Prio, Update), q(Active, Insert), q(Delayed, Take), q(Meta, Read), q(Events, Append)],
        args: "token lease_ms [COUNT n] | PAUSE | RESUME",
        flags: "write",
        acl: "emq write",
        fenced: true,
        summary: "Promote due delayed jobs, then take up to COUNT ready jobs under a lease; or pause/resume the queue.",
        complexity: "O((n + p) log N) for n jobs taken and p promoted",
        run: drive::<verbs::claim::Claim>,
    },
    Command {
        name: "EMQ.EXTEND",
        tokens: &["extend"],
        form: Form::Keys,
        keys: &[q(Job, Read), q(Active, Update)],
        args: "token lease_ms",
        flags: "write fast",
        acl: "emq write fast",
        fenced: true,
        summary: "Move a held job's lease deadline to now+lease_ms.",
        complexity: "O(log N)",
        run: drive::<verbs::extend::Extend>,
    },
    Command {
        name: "EMQ.EXTENDS",
        tokens: &["extends"],
        form: Form::Keys,
        keys: &[q(Active, Update)],
        args: "lease_ms id token [id token ...]",
        flags: "write",
        acl: "emq write",
        fenced: true,
        summary: "EXTEND many held jobs at once; 0 for each job not held with its token.",
        complexity: "O(n log N) for n pairs",
        run: drive::<verbs::extends::Extends>,
    },
    Command {
        name: "EMQ.COMPLETE",
        tokens: &["complete.flat"],
        form: Form::Keys,
        keys: &[q(Job, Update), q(Active, Take), q(Completed, Update), q(Events, Append)],
        args: "token result [KEEP n] [AGE ms]",
        flags: "write",
        acl: "emq write",
        fenced: true,
        summary: "Finish a held job with its result; 0 when the same token already completed it.",
        complexity: "O(log N), plus O(r log N) for r jobs retired",
        run: drive::<verbs::complete::Complete>,
    },
    Command {
        name: "EMQ.SCHEDULE",
        tokens: &["schedule"],
        form: Form::Keys,
        keys: &[q(Job, Insert), q(Delayed, Insert), q(Events, Append)],
        args: "when name data [PRIORITY p] [ATTEMPTS n] [BACKOFF FIXED|EXP ms] [OPTS blob]",
        flags: "write deny-oom fast",
        acl: "emq write fast",
        fenced: true,
        summary: "Create a job that becomes ready at `when`; 0 and nothing written when the id exists.",
        complexity: "O(log N)",
        run: drive::<verbs::schedule::Schedule>,
    },
    Command {
        name: "EMQ.PROMOTE",
        tokens: &["promote"],
        form: Form::Keys,
        keys: &[q(Job, Update), q(Delayed, Take), q(Wait, Insert), q(Prio, Insert), q(Events, Append)],
        args: "",
        flags: "write fast",
        acl: "emq write fast",
        fenced: true,
        summary: "Make a delayed job ready now.",
        complexity: "O(log N)",
        run: drive::<verbs::promote::Promote>,
    },
    Command {
        name: "EMQ.RESCHEDULE",
        tokens: &["reschedule"],
        form: Form::Keys,
        keys: &[q(Job, Read), q(Delayed, Update), q(Events, Append)],
        args: "when",
        flags: "write fast",
        acl: "emq write fast",
        fenced: true,
        summary: "Move a delayed job's due time.",
        complexity: "O(log N)",
        run: drive::<verbs::reschedule::Reschedule>,
    },
    Command {
        name: "EMQ.DELAY",
        tokens: &["delay"],
        form: Form::Keys,
        keys: &[q(Job, Update), q(Active, Take), q(Delayed, Insert), q(Events, Append)],
        args: "token when",
        flags: "write fast",
        acl: "emq write fast",
        fenced: true,
        summary: "Park a held job in delayed until `when`, counting no attempt.",
        complexity: "O(log N)",
        run: drive::<verbs::delay::Delay>,
    },
    Command {
        name: "EMQ.FAIL",
        tokens: &["fail.flat"],
        form: Form::Keys,
        keys: &[
            q(Job, Update),
            q(Active, Take),
            q(Wait, Insert),
            q(Prio, Insert),
            q(Delayed, Insert),
            q(Failed, Update),
            q(Events, Append),
        ],
        args: "token error [KEEP n] [AGE ms] [FINAL]",
        flags: "write",
        acl: "emq write",
        fenced: true,
        summary: "Count a held job's failed attempt: retry, delay by its backoff, or fail it for good.",
        complexity: "O(log N), plus O(r log N) for r jobs retired",
        run: drive::<verbs::fail::Fail>,
    },
    Command {
        name: "EMQ.REPROCESS",
        tokens: &["reprocess"],
        form: Form::Keys,
        keys: &[q(Job, Update), q(Completed, Take), q(Failed, Take), q(Wait, Insert), q(Prio, Insert), q(Events, Append)],
        args: "",
        flags: "write fast",
        acl: "emq write fast",
        fenced: true,
        summary: "Send a completed or failed job back to ready with its counters reset.",
        complexity: "O(log N)",
        run: drive::<verbs::reprocess::Reprocess>,
    },
    Command {
        name: "EMQ.REQUEUE",
        tokens: &["requeue"],
        form: Form::Keys,
        keys: &[q(Job, Update), q(Active, Take), q(Wait, Insert), q(Prio, Insert), q(Events, Append)],
        args: "token",
        flags: "write fast",
        acl: "emq write fast",
        fenced: true,
        summary: "Give a held job back: ready again at the front, no attempt counted.",
        complexity: "O(log N)",
        run: drive::<verbs::requeue::Requeue>,
    },
    Command {
        name: "EMQ.STALLED",
        tokens: &["stalled.check"],
        form: Form::Keys,
        keys: &[q(Active, Take), q(Wait, Insert), q(Prio, Insert), q(Failed, Update), q(Events, Append)],
        args: "[MAXSTALLS n] [COUNT n]",
        flags: "write",
        acl: "emq write",
        fenced: true,
        summary: "Reclaim jobs whose lease expired: requeue them, or fail them past MAXSTALLS.",
        complexity: "O(n log N) for n jobs reclaimed",
        run: drive::<verbs::stalled::Stalled>,
    },
    Command {
        name: "EMQ.APPEND",
        tokens: &["append"],
        form: Form::Keys,
        keys: &[q(Bus, Append), q(Seen, Update)],
        args: "id payload [MAXLEN n]",
        flags: "write deny-oom fast",
        acl: "emq write fast",
        fenced: true,
        summary: "Append a bus message to its topic's stream once; nil and nothing written for an id inside the seen window.",
        complexity: "O(log N), plus the trims: up to 100 seen entries and whole stream nodes",
        run: drive::<verbs::append::Append>,
    },
    Command {
        name: "EMQ.FAILURES",
        tokens: &["failures.incr"],
        form: Form::Keys,
        keys: &[q(Fails, Update)],
        args: "[TTL ms]",
        flags: "write deny-oom fast",
        acl: "emq write fast",
        fenced: true,
        summary: "Count one more failure of a bus message and set its counter's TTL (default 24 h).",
        complexity: "O(1)",
        run: drive::<verbs::failures::Failures>,
    },
    Command {
        name: "EMQ.PUBLISH",
        tokens: &["publish"],
        form: Form::Keys,
        keys: &[q(Bus, Append), q(Seen, Update)],
        args: "id payload [MAXLEN n]",
        flags: "write deny-oom fast",
        acl: "emq write fast",
        fenced: true,
        summary: "APPEND, then publish the payload on the channel named by the bus key; nil for a duplicate.",
        complexity: "O(log N + S) for S subscribers, plus APPEND's trims",
        run: drive::<verbs::publish::Publish>,
    },
    Command {
        name: "EMQ.VERSION",
        tokens: &[],
        form: Form::Bare,
        keys: &[],
        args: "",
        flags: "readonly fast allow-loading allow-stale",
        acl: "emq read fast",
        fenced: false,
        summary: "The module's identity: wire, module, version, major, build, capabilities.",
        complexity: "O(1)",
        run: drive::<verbs::version::Version>,
    },
    Command {
        name: "EMQ.INSTALL",
        tokens: &[],
        form: Form::Keys,
        keys: &[Slot { role: KeyRole::Version, spec: Update }],
        args: "",
        flags: "write deny-oom admin deny-script",
        acl: "write admin dangerous slow",
        fenced: false,
        summary: "Write the module's wire identity into {emq}:version, once.",
        complexity: "O(1)",
        run: drive::<verbs::install::Install>,
    },
    Command {
        name: "TRA.CAPABILITIES",
        tokens: &[],
        form: Form::Bare,
        keys: &[],
        args: "",
        flags: "readonly fast allow-loading allow-stale",
        acl: "read fast",
        fenced: false,
        summary: "The facts of this build as eight pairs.",
        complexity: "O(1)",
        run: drive::<verbs::capabilities::Capabilities>,
    },
    Command {
        name: "TRA.DROP",
        tokens: &[],
        form: Form::Keys,
        keys: &[Slot { role: KeyRole::Any, spec: Take }],
        args: "version",
        flags: "write fast",
        acl: "write fast",
        fenced: false,
        summary: "The coherence drop: delete a cache row when the incoming 14-byte version is newer than its stored frame's.",
        complexity: "O(1)",
        run: drive::<verbs::drop::CoherenceDrop>,
    },
];

/// The capability tokens of the registered commands, in table order.
pub fn capabilities() -> Vec<&'static str> {
    COMMANDS.iter().flat_map(|c| c.tokens.iter().copied()).collect()
}

/// Bit i set when wire token i is provided by a registered command.
pub fn bitmap() -> i64 {
    capabilities().iter().filter_map(|t| WIRE_TOKENS.iter().position(|w| w == t)).fold(0i64, |acc, i| acc | (1i64 << i))
}

/// The synopsis of a command, as the reference page and COMMAND DOCS show it.
pub fn synopsis(c: &Command) -> String {
    let mut s = c.name.to_owned();
    if c.form == Form::Keys {
        s.push_str(&format!(" {}", c.keys.len()));
        for k in c.keys {
            match k.role {
                KeyRole::Version => s.push_str(" {emq}:version"),
                KeyRole::Any => s.push_str(" key"),
                KeyRole::Queue(r) if r.suffixed() => s.push_str(&format!(" emq:{{Q}}:{}<ID>", r.word())),
                KeyRole::Queue(r) => s.push_str(&format!(" emq:{{Q}}:{}", r.word())),
            }
        }
    }
    if !c.args.is_empty() {
        s.push(' ');
        s.push_str(c.args);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_wire_tokens_in_wire_order() {
        let caps = capabilities();
        let positions: Vec<usize> = caps.iter().map(|t| WIRE_TOKENS.iter().position(|w| w == t).expect("a wire token")).collect();
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
                assert!(a.fenced && a.acl.starts_with("emq write") && a.flags.starts_with("write"), "{}", a.name);
            }
        }
    }

    #[test]
    fn bus_and_drop_rows() {
        let row = |n: &str| COMMANDS.iter().find(|c| c.name == n).expect("a row");
        assert_eq!(synopsis(row("EMQ.APPEND")), "EMQ.APPEND 2 emq:{Q}:bus emq:{Q}:seen id payload [MAXLEN n]");
        assert_eq!(synopsis(row("EMQ.PUBLISH")), "EMQ.PUBLISH 2 emq:{Q}:bus emq:{Q}:seen id payload [MAXLEN n]");
        assert_eq!(synopsis(row("EMQ.FAILURES")), "EMQ.FAILURES 1 emq:{Q}:fails:<ID> [TTL ms]");
        assert_eq!(synopsis(row("TRA.DROP")), "TRA.DROP 1 key version");
        assert_eq!(capabilities().len(), WIRE_TOKENS.len(), "all seventeen tokens");
        assert_eq!(bitmap(), (1 << 17) - 1);
        let drop = row("TRA.DROP");
        assert!(!drop.fenced && !drop.acl.contains("emq") && COMMANDS.last().map(|c| c.name) == Some("TRA.DROP"));
    }

    #[test]
    fn synopsis_reads_like_the_wire() {
        assert_eq!(
            synopsis(&COMMANDS[0]),
            "EMQ.ENQUEUE 4 emq:{Q}:job:<ID> emq:{Q}:wait emq:{Q}:prio emq:{Q}:events name data [PRIORITY p] [ATTEMPTS n] [BACKOFF FIXED|EXP ms] [OPTS blob] [LIFO]"
        );
    }
}
