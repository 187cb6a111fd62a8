//! Module configs (`CONFIG SET trafikey.<name>`, or `--loadmodule … <name> <value>`), each
//! declared once here — name, default, range, meaning — with its live value. Registration
//! (`host::register::configs`) and the reference page's config table come from these
//! declarations (`tests/reference.rs` checks the page against them); the server validates
//! every value against the range. Verbs read them with `get`.

#![forbid(unsafe_code)]

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

use crate::domain;

/// A numeric config.
pub struct Int {
    pub name: &'static str,
    pub default: i64,
    pub min: i64,
    pub max: i64,
    /// What it means, one line: the reference page's table shows it as it is.
    pub doc: &'static str,
    /// Changing it may wake upkeep sooner or later (the tick and the switch).
    pub wakes_upkeep: bool,
    value: AtomicI64,
}

impl Int {
    const fn new(name: &'static str, default: i64, min: i64, max: i64, doc: &'static str) -> Int {
        Int { name, default, min, max, doc, wakes_upkeep: false, value: AtomicI64::new(default) }
    }

    const fn waking_upkeep(mut self) -> Int {
        self.wakes_upkeep = true;
        self
    }

    /// The value the server reads and writes.
    pub fn value(&self) -> &AtomicI64 {
        &self.value
    }
}

/// A yes/no config.
pub struct Flag {
    pub name: &'static str,
    pub default: bool,
    pub doc: &'static str,
    pub wakes_upkeep: bool,
    value: AtomicBool,
}

impl Flag {
    const fn new(name: &'static str, default: bool, doc: &'static str) -> Flag {
        Flag { name, default, doc, wakes_upkeep: false, value: AtomicBool::new(default) }
    }

    const fn waking_upkeep(mut self) -> Flag {
        self.wakes_upkeep = true;
        self
    }

    pub fn value(&self) -> &AtomicBool {
        &self.value
    }
}

const BILLION: i64 = 1_000_000_000;

pub static EVENTS_MAXLEN: Int =
    Int::new("events-maxlen", 10_000, 0, BILLION, "events kept per queue (`MAXLEN ~`); 0 turns events off");
/// Bounded by default: unbounded growth of finished jobs is the most common complaint about
/// Lua job queues.
pub static KEEP_COMPLETED: Int = Int::new(
    "keep-completed",
    1000,
    -1,
    BILLION,
    "completed jobs kept when COMPLETE gives no KEEP (-1 all, 0 none); a soft cap, exceeded by at most 1/16 (≤ 64) before a batch trim",
);
pub static KEEP_FAILED: Int = Int::new(
    "keep-failed",
    10_000,
    -1,
    BILLION,
    "failed jobs kept when FAIL gives no KEEP, and for STALLED; a soft cap like `keep-completed`",
);
pub static RETENTION_BATCH: Int = Int::new(
    "retention-batch",
    domain::DELETE_PER_CALL,
    1,
    domain::DELETE_PER_CALL,
    "rows one call may delete by retention",
);
pub static PROMOTE_BATCH: Int = Int::new(
    "promote-batch",
    domain::PROMOTE_PER_CALL,
    1,
    domain::PROMOTE_PER_CALL,
    "due delayed jobs one CLAIM promotes (upkeep promotes the rest)",
);
pub static STALLED_BATCH: Int = Int::new(
    "stalled-batch",
    domain::RECLAIM_PER_CALL,
    1,
    domain::RECLAIM_PER_CALL,
    "STALLED's default COUNT",
);
pub static MAX_STALLS: Int = Int::new(
    "max-stalls",
    1,
    0,
    domain::MAX_STALLS_MAX,
    "STALLED's default MAXSTALLS, for a queue whose `meta` sets no `max-stalls` of its own",
);
pub static MAX_PAYLOAD: Int = Int::new(
    "max-payload",
    1 << 20,
    0,
    512 << 20,
    "largest data, result, error, payload, OPTS or STACK, in bytes",
);
pub static BUS_WINDOW_MS: Int =
    Int::new("bus-window-ms", 24 * 3600 * 1000, 1, domain::TIME_MAX, "the bus dedup window");
pub static BUS_MAXLEN: Int = Int::new(
    "bus-maxlen",
    100_000,
    1,
    domain::bus::MAXLEN_MAX,
    "bus stream length kept when APPEND/PUBLISH give no MAXLEN",
);
pub static LOG_KEEP: Int = Int::new(
    "log-keep",
    1000,
    domain::LOG_KEEP.lo,
    domain::LOG_KEEP.hi,
    "log lines kept per job when TRA.LOG gives no KEEP",
);
pub static UPKEEP_TICK_MS: Int = Int::new(
    "upkeep-tick-ms",
    100,
    1,
    60_000,
    "the longest upkeep sleeps between two looks; it wakes earlier for anything due sooner",
)
.waking_upkeep();
pub static UPKEEP_BATCH: Int = Int::new(
    "upkeep-batch",
    1000,
    1,
    100_000,
    "jobs one upkeep tick handles at most, over all queues (a tick also stops after about 1 ms)",
);

pub static EFFECTS_ALWAYS: Flag = Flag::new(
    "effects-always",
    false,
    "build every replication effect even when nothing could receive it (see the README's operator notes)",
);
pub static UPKEEP: Flag = Flag::new(
    "upkeep",
    true,
    "the module promotes due jobs and reclaims expired leases itself (see Upkeep below)",
)
.waking_upkeep();

/// Every numeric config, in the reference page's order.
pub static INTS: [&Int; 13] = [
    &EVENTS_MAXLEN,
    &KEEP_COMPLETED,
    &KEEP_FAILED,
    &RETENTION_BATCH,
    &PROMOTE_BATCH,
    &STALLED_BATCH,
    &MAX_STALLS,
    &MAX_PAYLOAD,
    &BUS_WINDOW_MS,
    &BUS_MAXLEN,
    &LOG_KEEP,
    &UPKEEP_TICK_MS,
    &UPKEEP_BATCH,
];

pub static AUDIT_HANDLES: Flag = Flag::new(
    "audit-handles",
    false,
    "for tests: stop the server with a report if a call deletes a key another of its open handles holds (see the README's operator notes)",
);

pub static FLAGS: [&Flag; 3] = [&EFFECTS_ALWAYS, &UPKEEP, &AUDIT_HANDLES];

pub fn get(c: &Int) -> i64 {
    c.value.load(Ordering::Relaxed)
}

pub fn get_bool(c: &Flag) -> bool {
    c.value.load(Ordering::Relaxed)
}

pub fn max_payload() -> usize {
    usize::try_from(get(&MAX_PAYLOAD)).unwrap_or(0)
}

/// A number as the reference page writes it: powers of ten from a billion as `10^k`, whole
/// MiB above 64 MiB as `n MiB`, the largest exact double integer as `2^53−1`.
pub fn shown(n: i64) -> String {
    if n == domain::TIME_MAX {
        return "2^53−1".to_owned();
    }
    let mut p = 1i64;
    for k in 0..19 {
        if n == p && k >= 9 {
            return format!("10^{k}");
        }
        p = p.saturating_mul(10);
    }
    if n > 1 << 26 && n % (1 << 20) == 0 {
        return format!("{} MiB", n >> 20);
    }
    n.to_string()
}

/// The reference page's config table row of each config, in order.
pub fn table_rows() -> Vec<String> {
    let ints = INTS.iter().map(|c| {
        format!("| `{}` | {} | {}..={} | {} |", c.name, c.default, shown(c.min), shown(c.max), c.doc)
    });
    let flag = |c: &Flag| {
        format!("| `{}` | {} | yes, no | {} |", c.name, if c.default { "yes" } else { "no" }, c.doc)
    };
    ints.chain(FLAGS.iter().map(|c| flag(c))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_as_the_page_writes_them() {
        assert_eq!(shown(1_000_000_000), "10^9");
        assert_eq!(shown(1_000_000), "1000000");
        assert_eq!(shown(100_000), "100000");
        assert_eq!(shown(512 << 20), "512 MiB");
        assert_eq!(shown(1 << 20), "1048576");
        assert_eq!(shown(1 << 26), "67108864", "MiB only above 64 MiB");
        assert_eq!(shown(65 << 20), "65 MiB");
        assert_eq!(shown((65 << 20) + 1), "68157441");
        assert_eq!(shown(domain::TIME_MAX), "2^53−1");
        assert_eq!(shown(-1), "-1");
    }

    #[test]
    fn names_are_unique_and_defaults_in_range() {
        let names: Vec<&str> = INTS.iter().map(|c| c.name).chain(FLAGS.iter().map(|c| c.name)).collect();
        for (i, n) in names.iter().enumerate() {
            assert!(!names.iter().skip(i + 1).any(|m| m == n), "{n} twice");
        }
        for c in INTS {
            assert!(c.min <= c.default && c.default <= c.max, "{}", c.name);
            assert_eq!(get(c), c.default);
        }
    }
}
