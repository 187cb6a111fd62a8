//! Module configs (`CONFIG SET trafikey.<name>`), validated by the server against the ranges
//! registered in `lib.rs`. Verbs read them with `get`.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

/// Events kept per queue (`XADD … MAXLEN ~`); 0 turns events off.
pub static EVENTS_MAXLEN: AtomicI64 = AtomicI64::new(EVENTS_MAXLEN_DEFAULT);
pub const EVENTS_MAXLEN_DEFAULT: i64 = 10_000;
/// Completed jobs kept when COMPLETE gives no KEEP (-1: all). Bounded by default: unbounded
/// growth of finished jobs is the most common complaint about Lua job queues.
pub static KEEP_COMPLETED: AtomicI64 = AtomicI64::new(KEEP_COMPLETED_DEFAULT);
pub const KEEP_COMPLETED_DEFAULT: i64 = 1000;
/// Failed jobs kept when FAIL gives no KEEP, and for STALLED's failures.
pub static KEEP_FAILED: AtomicI64 = AtomicI64::new(KEEP_FAILED_DEFAULT);
pub const KEEP_FAILED_DEFAULT: i64 = 10_000;
/// Finished jobs one call may delete by retention (KEEP and AGE together).
pub static RETENTION_BATCH: AtomicI64 = AtomicI64::new(RETENTION_BATCH_DEFAULT);
pub const RETENTION_BATCH_DEFAULT: i64 = crate::domain::DELETE_PER_CALL;
/// Due delayed jobs one CLAIM promotes at most.
pub static PROMOTE_BATCH: AtomicI64 = AtomicI64::new(PROMOTE_BATCH_DEFAULT);
pub const PROMOTE_BATCH_DEFAULT: i64 = crate::domain::PROMOTE_PER_CALL;
/// Expired leases one STALLED reclaims when it gives no COUNT.
pub static STALLED_BATCH: AtomicI64 = AtomicI64::new(STALLED_BATCH_DEFAULT);
pub const STALLED_BATCH_DEFAULT: i64 = crate::domain::RECLAIM_PER_CALL;
/// Stalls a job survives when STALLED gives no MAXSTALLS.
pub static MAX_STALLS: AtomicI64 = AtomicI64::new(MAX_STALLS_DEFAULT);
pub const MAX_STALLS_DEFAULT: i64 = 1;
/// Largest data, result, error, payload or OPTS accepted, in bytes.
pub static MAX_PAYLOAD: AtomicI64 = AtomicI64::new(MAX_PAYLOAD_DEFAULT);
pub const MAX_PAYLOAD_DEFAULT: i64 = 1 << 20;
/// The bus dedup window: a message id seen this recently is a duplicate.
pub static BUS_WINDOW_MS: AtomicI64 = AtomicI64::new(BUS_WINDOW_MS_DEFAULT);
pub const BUS_WINDOW_MS_DEFAULT: i64 = 24 * 3600 * 1000;
/// Bus stream length kept when APPEND/PUBLISH give no MAXLEN.
pub static BUS_MAXLEN: AtomicI64 = AtomicI64::new(BUS_MAXLEN_DEFAULT);
pub const BUS_MAXLEN_DEFAULT: i64 = 100_000;

/// Build every replication effect even when nothing could receive it (`host::effects`).
pub static EFFECTS_ALWAYS: AtomicBool = AtomicBool::new(false);

/// Log lines kept per job when TRA.LOG gives no KEEP.
pub static LOG_KEEP: AtomicI64 = AtomicI64::new(LOG_KEEP_DEFAULT);
pub const LOG_KEEP_DEFAULT: i64 = 1000;

/// Upkeep: the module promotes due jobs and reclaims expired leases itself (`upkeep`).
pub static UPKEEP: AtomicBool = AtomicBool::new(true);
/// The longest upkeep sleeps between two looks, ms (it wakes earlier for a job due sooner).
pub static UPKEEP_TICK_MS: AtomicI64 = AtomicI64::new(UPKEEP_TICK_MS_DEFAULT);
pub const UPKEEP_TICK_MS_DEFAULT: i64 = 100;
/// Jobs one upkeep tick handles at most, over all queues (it also stops after 1 ms).
pub static UPKEEP_BATCH: AtomicI64 = AtomicI64::new(UPKEEP_BATCH_DEFAULT);
pub const UPKEEP_BATCH_DEFAULT: i64 = 1000;

pub fn get_bool(c: &AtomicBool) -> bool {
    c.load(Ordering::Relaxed)
}

pub fn get(c: &AtomicI64) -> i64 {
    c.load(Ordering::Relaxed)
}

pub fn max_payload() -> usize {
    usize::try_from(get(&MAX_PAYLOAD)).unwrap_or(0)
}
