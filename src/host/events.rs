//! Server events, subscribed to once for the whole module.
//!
//! The server keeps one callback per module and event: a second subscription to the same
//! event replaces the first, silently. So the parts of the module that need an event — the
//! replication effects (a change of role or of replicas) and upkeep's clock (a load, a flush,
//! a swap of databases, a change of role) — do not subscribe themselves: this subscribes
//! once to each event and hands every event to each of them.

use std::os::raw::{c_int, c_void};

use valkey_module::raw::{self, RedisModuleCtx, RedisModuleEvent};

use super::{effects, timer};

/// Every event any part of the module handles.
const EVENTS: [u64; 5] = [
    raw::REDISMODULE_EVENT_REPLICATION_ROLE_CHANGED,
    raw::REDISMODULE_EVENT_REPLICA_CHANGE,
    raw::REDISMODULE_EVENT_LOADING,
    raw::REDISMODULE_EVENT_FLUSHDB,
    raw::REDISMODULE_EVENT_SWAPDB,
];

/// Load time, once the parts are set up: one subscription to each event.
pub fn subscribe(ctx: super::Ctx<'_>) -> Result<(), String> {
    let ctx = ctx.raw();
    let subscribe = api!(RedisModule_SubscribeToServerEvent).ok_or("no SubscribeToServerEvent")?;
    for id in EVENTS {
        // SAFETY: load-time subscription with a callback that lives for the process.
        if unsafe { subscribe(ctx, RedisModuleEvent { id, dataver: 1 }, Some(on_event)) }
            != raw::REDISMODULE_OK as c_int
        {
            return Err(format!("cannot subscribe to server event {id}"));
        }
    }
    Ok(())
}

extern "C" fn on_event(_ctx: *mut RedisModuleCtx, eid: RedisModuleEvent, sub: u64, data: *mut c_void) {
    effects::on_event(eid.id);
    timer::on_event(eid.id, sub, data);
}
