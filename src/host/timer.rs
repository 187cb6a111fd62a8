//! The module's clock: one timer that runs upkeep (`crate::upkeep::tick`) and re-arms itself
//! for the next moment anything falls due; a verb that makes something due earlier brings
//! the timer forward (`wake_by`). With upkeep off the timer is not re-armed — the server will
//! not unload a module while one of its timers is pending — and it is armed again the moment
//! upkeep is switched back on (`settings_changed`). Plus the server glue upkeep needs:
//! choosing a database, an incremental keyspace scan, and the server events that make upkeep
//! look for its queues again (a load, a flush, a change of role).

use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicPtr, AtomicU64, Ordering};
use std::sync::OnceLock;

use valkey_module::raw::{self, RedisModuleCtx, RedisModuleKey, RedisModuleString};

use super::strings::bytes_of;
use super::Ctx;

/// When the timer should fire next, as a tick decides.
pub enum Next {
    /// Upkeep is off: leave the timer unarmed.
    Off,
    /// Nothing known to be due: look again after the tick.
    Idle,
    /// At this time (ms, absolute; at most a tick away).
    At(i64),
}

/// What upkeep asks the host to run, once at load.
pub struct Hooks {
    /// One tick of upkeep.
    pub tick: fn(Ctx<'_>) -> Next,
    /// Whether upkeep is on (a disarmed timer is armed again only then).
    pub on: fn() -> bool,
    /// The dataset of this database (or all, -1) was replaced or is new to upkeep.
    pub rescan: fn(c_int),
}

static HOOKS: OnceLock<Hooks> = OnceLock::new();
/// The armed timer and the time it fires (ms, the server's clock).
static TIMER: AtomicU64 = AtomicU64::new(0);
static FIRES_AT: AtomicI64 = AtomicI64::new(i64::MAX);
/// Whether the module's context can arm timers yet (set once init has run).
static READY: AtomicBool = AtomicBool::new(false);
/// A context of the module's own that outlives init: a config change arms the timer with it.
static MODULE_CTX: AtomicPtr<RedisModuleCtx> = AtomicPtr::new(std::ptr::null_mut());

/// The longest the timer sleeps; set from the tick config.
pub static TICK_MS: AtomicI64 = AtomicI64::new(100);

pub fn now_ms() -> i64 {
    match api!(RedisModule_Milliseconds) {
        // SAFETY: a plain clock read.
        Some(f) => unsafe { f() },
        None => 0,
    }
}

/// A monotonic microsecond clock, for bounding a tick's work.
pub fn monotonic_us() -> u64 {
    match api!(RedisModule_MonotonicMicroseconds) {
        // SAFETY: a plain clock read.
        Some(f) => unsafe { f() },
        None => 0,
    }
}

/// This thread's CPU time, µs (`CLOCK_THREAD_CPUTIME_ID`): beside the monotonic clock it tells
/// a long tick from a tick the machine preempted. 0 if the clock cannot be read.
pub fn thread_cpu_us() -> u64 {
    #[repr(C)]
    struct Timespec {
        tv_sec: i64,
        tv_nsec: i64,
    }
    extern "C" {
        fn clock_gettime(clock: i32, tp: *mut Timespec) -> i32;
    }
    /// Linux's CLOCK_THREAD_CPUTIME_ID.
    const THREAD_CPUTIME: i32 = 3;
    let mut t = Timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a clock read into a timespec we own (64-bit Linux layout).
    if unsafe { clock_gettime(THREAD_CPUTIME, &mut t) } != 0 {
        return 0;
    }
    let secs = u64::try_from(t.tv_sec).unwrap_or(0);
    let nanos = u64::try_from(t.tv_nsec).unwrap_or(0);
    secs.saturating_mul(1_000_000).saturating_add(nanos / 1000)
}

/// Load time: remember the hooks, arm the timer (the server events come through `events`).
pub fn start(ctx: Ctx<'_>, hooks: Hooks) -> Result<(), String> {
    let ctx = ctx.raw();
    HOOKS.set(hooks).map_err(|_| "upkeep started twice".to_owned())?;
    let detached = api!(RedisModule_GetDetachedThreadSafeContext).ok_or("no GetDetachedThreadSafeContext")?;
    // SAFETY: load-time ctx; the detached context lives for the process.
    MODULE_CTX.store(unsafe { detached(ctx) }, Ordering::Relaxed);
    READY.store(true, Ordering::Relaxed);
    arm(ctx, 1);
    Ok(())
}

/// Upkeep's settings changed (`CONFIG SET`, on the main thread): switched on, the timer is
/// armed if it was not; a shorter tick brings a timer set for later forward.
pub fn settings_changed(tick_ms: i64) {
    TICK_MS.store(tick_ms.max(1), Ordering::Relaxed);
    let ctx = MODULE_CTX.load(Ordering::Relaxed);
    if !ctx.is_null() {
        wake_by(Ctx::of(ctx), now_ms().saturating_add(tick_ms.max(1)));
    }
}

fn arm(ctx: *mut RedisModuleCtx, in_ms: i64) {
    let Some(create) = api!(RedisModule_CreateTimer) else { return };
    let in_ms = in_ms.clamp(1, TICK_MS.load(Ordering::Relaxed).max(1));
    // SAFETY: the module's own context; the callback lives for the process and takes no data.
    let id = unsafe { create(ctx, in_ms, Some(fire), std::ptr::null_mut()) };
    TIMER.store(id, Ordering::Relaxed);
    FIRES_AT.store(now_ms().saturating_add(in_ms), Ordering::Relaxed);
}

/// Brings the timer forward to `at_ms` (absolute) if it would fire later. Verbs call this
/// when something falls due before upkeep would look again: a job scheduled or delayed.
pub fn wake_by(ctx: Ctx<'_>, at_ms: i64) {
    let ctx = ctx.raw();
    // Inside a tick the timer is not armed yet: the tick's own answer arms it, from the
    // agenda the tick's writes noted. Arming here too would leave a second timer running.
    if TICKING.load(Ordering::Relaxed) {
        return;
    }
    let fires_at = FIRES_AT.load(Ordering::Relaxed);
    if !READY.load(Ordering::Relaxed) || at_ms >= fires_at {
        return;
    }
    if fires_at == i64::MAX {
        // Not armed: upkeep was off. Armed again only if it is back on.
        if !HOOKS.get().is_some_and(|h| (h.on)()) {
            return;
        }
    } else if let Some(stop) = api!(RedisModule_StopTimer) {
        // SAFETY: our timer id (a stale one is refused by the server, harmlessly).
        unsafe { stop(ctx, TIMER.load(Ordering::Relaxed), std::ptr::null_mut()) };
    }
    arm(ctx, at_ms.saturating_sub(now_ms()));
}

/// A tick is running (upkeep's writes may note new due times; the tick's answer covers them).
static TICKING: AtomicBool = AtomicBool::new(false);

extern "C" fn fire(ctx: *mut RedisModuleCtx, _data: *mut c_void) {
    FIRES_AT.store(i64::MAX, Ordering::Relaxed);
    TICKING.store(true, Ordering::Relaxed);
    let next = std::panic::catch_unwind(|| HOOKS.get().map_or(Next::Idle, |h| (h.tick)(Ctx::of(ctx))))
        .unwrap_or(Next::Idle);
    TICKING.store(false, Ordering::Relaxed);
    let tick = TICK_MS.load(Ordering::Relaxed);
    match next {
        Next::Off => {}
        Next::Idle => arm(ctx, tick),
        Next::At(at) => arm(ctx, at.saturating_sub(now_ms())),
    }
}

/// A server event: a load, a flush, a swap of databases or a promotion means upkeep looks for
/// its queues again (after a flush, in the flushed database only; after SWAPDB, in the two
/// swapped; -1 is every database).
pub fn on_event(id: u64, sub: u64, data: *mut c_void) {
    let Some(h) = HOOKS.get() else { return };
    let dbs = match id {
        raw::REDISMODULE_EVENT_LOADING if sub == raw::REDISMODULE_SUBEVENT_LOADING_ENDED => [-1, -1],
        raw::REDISMODULE_EVENT_REPLICATION_ROLE_CHANGED
            if sub == raw::REDISMODULE_EVENT_REPLROLECHANGED_NOW_MASTER =>
        {
            [-1, -1]
        }
        // Only an event's own data is read, and only as its own type.
        raw::REDISMODULE_EVENT_FLUSHDB if sub == raw::REDISMODULE_SUBEVENT_FLUSHDB_END => {
            let db = flushed_db(data);
            [db, db]
        }
        // Each database now holds the other's queues: both are looked at again.
        raw::REDISMODULE_EVENT_SWAPDB => swapped_dbs(data),
        _ => return,
    };
    (h.rescan)(dbs[0]);
    if dbs[1] != dbs[0] {
        (h.rescan)(dbs[1]);
    }
}

/// The two databases SWAPDB exchanged, from its event's data (both -1, every database, if
/// it carries none).
fn swapped_dbs(data: *mut c_void) -> [c_int; 2] {
    if data.is_null() {
        return [-1, -1];
    }
    // SAFETY: the swap event's data is its RedisModuleSwapDbInfo.
    let info = unsafe { &*data.cast::<raw::RedisModuleSwapDbInfo>() };
    [info.dbnum_first, info.dbnum_second]
}

/// The database a flush emptied, from the flush event's data (-1: all of them, as FLUSHALL).
fn flushed_db(data: *mut c_void) -> c_int {
    if data.is_null() {
        return -1;
    }
    // SAFETY: the flush event's data is its RedisModuleFlushInfo.
    unsafe { (*data.cast::<raw::RedisModuleFlushInfo>()).dbnum }
}

/// Whether this node is a primary that is not loading: the only state upkeep acts in.
pub fn may_act(ctx: Ctx<'_>) -> bool {
    let ctx = ctx.raw();
    // SAFETY: live ctx.
    let flags = api!(RedisModule_GetContextFlags).map_or(0, |f| unsafe { f(ctx) }) as u32;
    flags & raw::REDISMODULE_CTX_FLAGS_MASTER != 0
        && flags & (raw::REDISMODULE_CTX_FLAGS_LOADING | raw::REDISMODULE_CTX_FLAGS_ASYNC_LOADING) == 0
}

/// Selects database `db` on `ctx`; false if the server refuses (no such database).
pub fn select(ctx: Ctx<'_>, db: c_int) -> bool {
    let ctx = ctx.raw();
    // SAFETY: live ctx.
    api!(RedisModule_SelectDb).is_some_and(|f| unsafe { f(ctx, db) } == raw::REDISMODULE_OK as c_int)
}

/// The database the call runs in.
pub fn selected(ctx: Ctx<'_>) -> c_int {
    let ctx = ctx.raw();
    // SAFETY: live ctx.
    api!(RedisModule_GetSelectedDb).map_or(0, |f| unsafe { f(ctx) })
}

/// An incremental scan of one database's key names, a bounded step at a time.
pub struct Scan {
    cursor: *mut raw::RedisModuleScanCursor,
}

// SAFETY: the cursor is only touched on the main thread, under the server's lock.
unsafe impl Send for Scan {}

impl Scan {
    pub fn new() -> Option<Scan> {
        // SAFETY: a fresh cursor, freed on drop.
        let cursor = api!(RedisModule_ScanCursorCreate).map(|f| unsafe { f() })?;
        (!cursor.is_null()).then_some(Scan { cursor })
    }

    /// One step over `ctx`'s selected database (a handful of keys), each name handed to
    /// `f`; false once the database has been covered.
    pub fn step(&mut self, ctx: Ctx<'_>, f: &mut dyn FnMut(&[u8])) -> bool {
        let ctx = ctx.raw();
        let Some(scan) = api!(RedisModule_Scan) else { return false };
        extern "C" fn each(
            _ctx: *mut RedisModuleCtx,
            name: *mut RedisModuleString,
            _key: *mut RedisModuleKey,
            data: *mut c_void,
        ) {
            // SAFETY: `data` is the `&mut dyn FnMut` passed below, alive for the call.
            let f = unsafe { &mut *data.cast::<&mut dyn FnMut(&[u8])>() };
            f(bytes_of(name));
        }
        let mut f = f;
        let data = (&mut f as *mut &mut dyn FnMut(&[u8])).cast::<c_void>();
        // SAFETY: live ctx and cursor; the callback only runs during this call.
        unsafe { scan(ctx, self.cursor, Some(each), data) != 0 }
    }
}

impl Drop for Scan {
    fn drop(&mut self) {
        if let Some(f) = api!(RedisModule_ScanCursorDestroy) {
            // SAFETY: our cursor, freed once.
            unsafe { f(self.cursor) }
        }
    }
}
