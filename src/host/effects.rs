//! Whether this call's writes build their replication effects.
//!
//! The server drops every effect when nothing could receive it — no replica, no replication
//! backlog, no AOF (`shouldPropagate` in server.c) — but only after the module has paid to
//! build it: `RM_Replicate` looks the command up by name and makes an argv, about 2 700
//! instructions an effect, nine effects a job (callgrind). Plain commands and scripts never
//! pay that when nothing listens. So the module builds effects exactly when the server could
//! keep them, and otherwise counts each write with `RM_ReplicateVerbatim` — which, with no
//! receiver, propagates nothing and only bumps the server's change counter, as `RM_Replicate`
//! would have (save points see the same number of changes).
//!
//! "Something may receive effects" is sticky, set and never cleared:
//! - a client sends SYNC or PSYNC (a command filter sees it before the server runs it, so
//!   before the backlog or the replica exists; dual-channel sync sends SYNC too);
//! - the replication role changes, or a replica comes or goes (server events): a replica
//!   promoted keeps its backlog for the others to resync from, and a full sync is always
//!   preceded by the change of role;
//! - INFO replication shows a replica, a backlog or a non-primary role: read before the first
//!   call after the module loads (a replica attached before `MODULE LOAD`; a primary started
//!   from an RDB that carries replication info, which keeps a backlog for partial resyncs —
//!   the server loads modules before the dataset, and serves no call while loading).
//!   Loads later in the process's life need no reading: a replica's is announced by its
//!   change of role, and `DEBUG RELOAD` does not restore a backlog.
//!
//! Per call, AOF on, being a replica or loading also mean build, and so does the config
//! `trafikey.effects-always`.

use std::os::raw::c_int;
use std::sync::atomic::{AtomicBool, Ordering};

use valkey_module::raw::{self, RedisModuleCommandFilterCtx, RedisModuleCtx};

use super::strings::bytes_of;
use crate::{config, metrics};

/// A replica, a backlog or a non-primary role has been seen: effects from now on.
static TARGETS: AtomicBool = AtomicBool::new(false);
/// INFO replication is to be read before the next call decides (the first after the module
/// loads).
static PROBE: AtomicBool = AtomicBool::new(true);
/// This call's decision. Commands run one at a time on the main thread.
static BUILD: AtomicBool = AtomicBool::new(true);

/// Context flags under which every effect is built, whatever else holds (SLAVE: this node is
/// a replica; the crate keeps the old names).
const ALWAYS_FLAGS: u32 = raw::REDISMODULE_CTX_FLAGS_AOF
    | raw::REDISMODULE_CTX_FLAGS_SLAVE
    | raw::REDISMODULE_CTX_FLAGS_LOADING
    | raw::REDISMODULE_CTX_FLAGS_ASYNC_LOADING
    | raw::REDISMODULE_CTX_FLAGS_REPLICATED;

/// Load time: the command filter (the server events come through `events`).
pub fn init(ctx: super::Ctx<'_>) -> Result<(), String> {
    let ctx = ctx.raw();
    let filter = api!(RedisModule_RegisterCommandFilter).ok_or("no RegisterCommandFilter")?;
    // SAFETY: load-time registration on the module's context with a callback that lives for
    // the process.
    if unsafe { filter(ctx, Some(on_command), raw::REDISMODULE_CMDFILTER_NOSELF as c_int) }.is_null() {
        return Err("cannot register the command filter".into());
    }
    Ok(())
}

/// The start of every call: decide for its writes.
pub fn begin(ctx: *mut RedisModuleCtx, flags: c_int) {
    if PROBE.swap(false, Ordering::Relaxed) {
        probe(ctx);
    }
    let build = config::get_bool(&config::EFFECTS_ALWAYS)
        || TARGETS.load(Ordering::Relaxed)
        || (flags as u32) & ALWAYS_FLAGS != 0;
    BUILD.store(build, Ordering::Relaxed);
}

/// Whether this call's writes build their effects.
pub fn build() -> bool {
    BUILD.load(Ordering::Relaxed)
}

/// A write whose effect nothing could receive: counted, not built.
pub fn skip(ctx: *mut RedisModuleCtx) {
    if let Some(f) = api!(RedisModule_ReplicateVerbatim) {
        // SAFETY: live command context. With no receiver the server propagates nothing and
        // only counts the change.
        unsafe { f(ctx) };
    }
    metrics::add(&metrics::EFFECTS_SKIPPED, 1);
}

/// For INFO: whether a receiver of effects has been seen.
pub fn targets_seen() -> bool {
    TARGETS.load(Ordering::Relaxed)
}

fn seen() {
    TARGETS.store(true, Ordering::Relaxed);
}

/// Is `name` a command by which a replica asks for the stream?
pub fn is_sync(name: &[u8]) -> bool {
    name.eq_ignore_ascii_case(b"sync") || name.eq_ignore_ascii_case(b"psync")
}

extern "C" fn on_command(fctx: *mut RedisModuleCommandFilterCtx) {
    if TARGETS.load(Ordering::Relaxed) {
        return;
    }
    let Some(get) = api!(RedisModule_CommandFilterArgGet) else {
        seen();
        return;
    };
    // SAFETY: the filter context of the command being filtered; argument 0 is its name.
    let name = unsafe { get(fctx, 0) };
    if is_sync(bytes_of(name)) {
        seen();
    }
}

/// A server event: a change of role or of replicas means effects from now on.
pub fn on_event(id: u64) {
    if id == raw::REDISMODULE_EVENT_REPLICATION_ROLE_CHANGED || id == raw::REDISMODULE_EVENT_REPLICA_CHANGE {
        seen();
    }
}

/// INFO replication: a replica, an active backlog or any role but primary means effects. A
/// field that cannot be read counts as a receiver.
fn probe(ctx: *mut RedisModuleCtx) {
    let (Some(get), Some(field), Some(text), Some(free)) = (
        api!(RedisModule_GetServerInfo),
        api!(RedisModule_ServerInfoGetFieldSigned),
        api!(RedisModule_ServerInfoGetFieldC),
        api!(RedisModule_FreeServerInfo),
    ) else {
        seen();
        return;
    };
    // SAFETY: a live context; the info data is ours until freed below, and the field
    // texts live as long as it.
    unsafe {
        let info = get(ctx, c"replication".as_ptr());
        if info.is_null() {
            seen();
            return;
        }
        let number = |name: &std::ffi::CStr| {
            let mut err: c_int = 0;
            let v = field(info, name.as_ptr(), &mut err);
            if err != 0 {
                None
            } else {
                Some(v)
            }
        };
        let role = text(info, c"role".as_ptr());
        let primary = !role.is_null() && std::ffi::CStr::from_ptr(role).to_bytes() == b"master";
        let replicas = number(c"connected_slaves");
        let backlog = number(c"repl_backlog_active");
        if !primary || replicas != Some(0) || backlog != Some(0) {
            seen();
        }
        free(ctx, info);
    }
}

#[cfg(test)]
mod tests {
    use super::is_sync;

    #[test]
    fn sync_commands_in_any_case() {
        for yes in [&b"SYNC"[..], b"sync", b"PSync", b"psync"] {
            assert!(is_sync(yes));
        }
        for no in [&b"SYNCX"[..], b"", b"replconf", b"PSYN", b"ssync"] {
            assert!(!is_sync(no));
        }
    }
}
