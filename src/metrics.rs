//! `INFO trafikey`: calls per verb, refusals per error class, and what the sweeps did.

#![forbid(unsafe_code)]

use std::sync::atomic::{AtomicU64, Ordering};

use valkey_module::{InfoContext, ValkeyResult};

use crate::errors::Class;

/// One call counter per registered command (as many as the host has callbacks).
/// Calls per registered command, sized by the table at load.
static CALLS: std::sync::OnceLock<Box<[AtomicU64]>> = std::sync::OnceLock::new();

/// Makes a counter for each of the `n` registered commands (once, at load).
pub fn size(n: usize) {
    let _ = CALLS.set((0..n).map(|_| AtomicU64::new(0)).collect());
}

fn calls() -> &'static [AtomicU64] {
    CALLS.get().map_or(&[], |c| c)
}
static REFUSALS: [AtomicU64; Class::ALL.len()] = [const { AtomicU64::new(0) }; Class::ALL.len()];
/// Delayed jobs CLAIM made ready.
pub static PROMOTED: AtomicU64 = AtomicU64::new(0);
/// Expired leases STALLED took back (requeued or failed).
pub static RECLAIMED: AtomicU64 = AtomicU64::new(0);
/// Jobs failed with `expired` (by CLAIM or upkeep) instead of being handed out.
pub static EXPIRED: AtomicU64 = AtomicU64::new(0);
/// Ids found in a set without their row: dropped, never a reason to refuse.
pub static ORPHANS: AtomicU64 = AtomicU64::new(0);
/// Rows deleted by retention.
pub static RETIRED: AtomicU64 = AtomicU64::new(0);
/// Bus messages APPEND and PUBLISH added, and the duplicates they answered nil.
pub static BUS_APPENDED: AtomicU64 = AtomicU64::new(0);
pub static BUS_DUPLICATES: AtomicU64 = AtomicU64::new(0);
/// `seen` entries removed for being older than the window.
pub static SEEN_TRIMMED: AtomicU64 = AtomicU64::new(0);
/// Messages PUBLISH delivered, and the receivers they reached on this server.
pub static PUBLISHED: AtomicU64 = AtomicU64::new(0);
pub static RECEIVERS: AtomicU64 = AtomicU64::new(0);
/// TRA.DROP verdicts: rows deleted (1), rows left alone or absent (0).
pub static DROPPED: AtomicU64 = AtomicU64::new(0);
pub static KEPT: AtomicU64 = AtomicU64::new(0);
/// Calls that blocked waiting for work, waits that ended with an answer (a job or a
/// refusal), and waits that timed out.
pub static BLOCKED: AtomicU64 = AtomicU64::new(0);
pub static WOKEN: AtomicU64 = AtomicU64::new(0);
pub static BLOCK_TIMEOUTS: AtomicU64 = AtomicU64::new(0);
/// Upkeep: ticks that acted, jobs promoted and leases reclaimed, queues it could not keep
/// (a refusal: not installed, a key of the wrong type).
pub static UPKEEP_TICKS: AtomicU64 = AtomicU64::new(0);
pub static UPKEEP_PROMOTED: AtomicU64 = AtomicU64::new(0);
pub static UPKEEP_RECLAIMED: AtomicU64 = AtomicU64::new(0);
pub static UPKEEP_EXPIRED: AtomicU64 = AtomicU64::new(0);
pub static UPKEEP_REFUSED: AtomicU64 = AtomicU64::new(0);
/// Job schedulers' iterations made, each once: by upkeep when the pending one's time came, or
/// by the claim that took the pending one before its time.
pub static UPKEEP_ITERATIONS: AtomicU64 = AtomicU64::new(0);
pub static CLAIM_ITERATIONS: AtomicU64 = AtomicU64::new(0);
/// Upkeep's queue steps (each at most `upkeep::STEP_JOBS` jobs on one queue), its longest tick
/// (µs, since load) and its ticks longer than 2 ms: what bounds one event-loop cycle.
pub static UPKEEP_STEPS: AtomicU64 = AtomicU64::new(0);
pub static UPKEEP_TICK_MAX_US: AtomicU64 = AtomicU64::new(0);
pub static UPKEEP_TICKS_OVER_2MS: AtomicU64 = AtomicU64::new(0);
/// The server thread's CPU time in upkeep's longest tick by it (µs, since load): the tick's own
/// work, without the time a busy machine took the thread away.
pub static UPKEEP_TICK_MAX_CPU_US: AtomicU64 = AtomicU64::new(0);
/// Replication effects built (something could receive them), and writes counted without one
/// (nothing could): see `host::effects`.
pub static EFFECTS_BUILT: AtomicU64 = AtomicU64::new(0);
pub static EFFECTS_SKIPPED: AtomicU64 = AtomicU64::new(0);

pub fn called(i: usize) {
    if let Some(c) = calls().get(i) {
        c.fetch_add(1, Ordering::Relaxed);
    }
}

/// Command calls served since load (a blocked call run again counts once).
pub fn calls_served() -> u64 {
    calls().iter().fold(0u64, |n, c| n.wrapping_add(c.load(Ordering::Relaxed)))
}

pub fn refused(class: Class) {
    if let Some(c) = REFUSALS.get(class.index()) {
        c.fetch_add(1, Ordering::Relaxed);
    }
}

pub fn add(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

fn field_name(s: &str) -> String {
    s.to_ascii_lowercase().replace('.', "_")
}

/// The facts INFO shows that live elsewhere: the module hands them in, so this layer uses
/// none above it.
pub struct Facts<'a> {
    /// The registered commands' names, in registration order.
    pub commands: &'a mut dyn Iterator<Item = &'static str>,
    pub queues_known: usize,
    pub receivers_seen: bool,
    /// The handle audit's trace of the last command call, shown only while the audit is on.
    pub audit: Option<String>,
}

pub fn info(ctx: &InfoContext, facts: Facts) -> ValkeyResult<()> {
    let calls: Vec<(String, u64)> = facts
        .commands
        .zip(calls().iter())
        .map(|(name, n)| (format!("calls_{}", field_name(name)), n.load(Ordering::Relaxed)))
        .collect();
    let refusals: Vec<(String, u64)> = Class::ALL
        .iter()
        .map(|c| {
            (
                format!("refused_{}", c.word().to_ascii_lowercase()),
                REFUSALS.get(c.index()).map_or(0, |n| n.load(Ordering::Relaxed)),
            )
        })
        .collect();
    let mut b = ctx.builder().add_section("calls");
    for (k, v) in &calls {
        b = b.field(k, v.to_string())?;
    }
    let mut b = b.build_section()?.add_section("refusals");
    for (k, v) in &refusals {
        b = b.field(k, v.to_string())?;
    }
    let mut b = b
        .build_section()?
        .add_section("jobs")
        .field("promoted", PROMOTED.load(Ordering::Relaxed).to_string())?
        .field("reclaimed", RECLAIMED.load(Ordering::Relaxed).to_string())?
        .field("expired", EXPIRED.load(Ordering::Relaxed).to_string())?
        .field("retired", RETIRED.load(Ordering::Relaxed).to_string())?
        .field("orphans", ORPHANS.load(Ordering::Relaxed).to_string())?
        .build_section()?
        .add_section("waiting")
        .field("blocked", BLOCKED.load(Ordering::Relaxed).to_string())?
        .field("woken", WOKEN.load(Ordering::Relaxed).to_string())?
        .field("timeouts", BLOCK_TIMEOUTS.load(Ordering::Relaxed).to_string())?
        .build_section()?
        .add_section("upkeep")
        .field("upkeep_ticks", UPKEEP_TICKS.load(Ordering::Relaxed).to_string())?
        .field("upkeep_promoted", UPKEEP_PROMOTED.load(Ordering::Relaxed).to_string())?
        .field("upkeep_reclaimed", UPKEEP_RECLAIMED.load(Ordering::Relaxed).to_string())?
        .field("upkeep_expired", UPKEEP_EXPIRED.load(Ordering::Relaxed).to_string())?
        .field("upkeep_refused", UPKEEP_REFUSED.load(Ordering::Relaxed).to_string())?
        .field("upkeep_iterations", UPKEEP_ITERATIONS.load(Ordering::Relaxed).to_string())?
        .field("claim_iterations", CLAIM_ITERATIONS.load(Ordering::Relaxed).to_string())?
        .field("upkeep_steps", UPKEEP_STEPS.load(Ordering::Relaxed).to_string())?
        .field("upkeep_tick_max_us", UPKEEP_TICK_MAX_US.load(Ordering::Relaxed).to_string())?
        .field("upkeep_ticks_over_2ms", UPKEEP_TICKS_OVER_2MS.load(Ordering::Relaxed).to_string())?
        .field("upkeep_tick_max_cpu_us", UPKEEP_TICK_MAX_CPU_US.load(Ordering::Relaxed).to_string())?
        .field("upkeep_queues", facts.queues_known.to_string())?
        .build_section()?
        .add_section("bus")
        .field("appended", BUS_APPENDED.load(Ordering::Relaxed).to_string())?
        .field("duplicates", BUS_DUPLICATES.load(Ordering::Relaxed).to_string())?
        .field("seen_trimmed", SEEN_TRIMMED.load(Ordering::Relaxed).to_string())?
        .field("published", PUBLISHED.load(Ordering::Relaxed).to_string())?
        .field("receivers", RECEIVERS.load(Ordering::Relaxed).to_string())?
        .build_section()?
        .add_section("coherence")
        .field("dropped", DROPPED.load(Ordering::Relaxed).to_string())?
        .field("kept", KEPT.load(Ordering::Relaxed).to_string())?
        .build_section()?
        .add_section("effects")
        .field("effects_built", EFFECTS_BUILT.load(Ordering::Relaxed).to_string())?
        .field("effects_skipped", EFFECTS_SKIPPED.load(Ordering::Relaxed).to_string())?
        .field("effects_receivers_seen", u8::from(facts.receivers_seen).to_string())?
        .build_section()?;
    if let Some(trace) = facts.audit {
        b = b.add_section("audit").field("audit_last_call", trace)?.build_section()?;
    }
    b.build_info()?;
    Ok(())
}
