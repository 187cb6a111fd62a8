//! Waiting for work with the server's own machinery: a call that finds nothing to do blocks
//! its client on some of its declared keys (`RM_BlockClientOnKeysWithFlags`), and the server
//! runs the same call again — shape, layout, fence, domain — each time one of those keys is
//! signalled ready (`Key::signal_ready`, which every verb that makes a job ready calls, and
//! any native write to the key). No polling loop, no timer of the module's: an idle waiter
//! costs nothing. The server serves the clients blocked on a key in the order they began to
//! wait, and a retry that finds nothing again leaves its client where it is, so the first
//! waiter gets the first job and no job goes to two.
//!
//! A retry that would wait on more keys than its client waits on (the queue took a limit
//! that makes it wait on `active` too, after the client began to wait) answers the empty
//! array instead of waiting on too few: the client's next call waits on all of them.
//!
//! A retry that answers (a result or a refusal) ends the wait; the timeout and
//! `CLIENT UNBLOCK … TIMEOUT` answer an empty array; `CLIENT UNBLOCK … ERROR`, and the node
//! becoming a replica, answer the server's own UNBLOCKED error. Inside MULTI or a script the
//! call never blocks: it answers an empty array at once, as BLPOP answers nil there.

use std::os::raw::c_int;

use valkey_module::raw::{self, RedisModuleCtx, RedisModuleString};

use super::reply::{self, Reply};
use super::Callback;
use crate::metrics;

/// Whether the call's context may block its client (not inside MULTI, a script, or a
/// blocked client's own retry).
pub fn may_block(flags: c_int) -> bool {
    flags & raw::REDISMODULE_CTX_FLAGS_DENY_BLOCKING as c_int == 0
}

/// Blocks the calling client on `keys` for `timeout_ms` (0: no limit); `retry` is run each
/// time one of them is signalled. False when the server would not block it.
pub fn block(
    ctx: *mut RedisModuleCtx,
    keys: &mut [*mut RedisModuleString],
    timeout_ms: i64,
    retry: Callback,
) -> bool {
    let Some(block) = api!(RedisModule_BlockClientOnKeysWithFlags) else { return false };
    let Ok(n) = c_int::try_from(keys.len()) else { return false };
    // SAFETY: live ctx and key names (the server retains what it keeps); the callbacks live
    // for the process. UNBLOCK_DELETED: a queue key deleted or replaced under a waiter runs
    // the retry too, which then sees what the key has become.
    let bc = unsafe {
        block(
            ctx,
            Some(retry),
            Some(timed_out),
            None,
            timeout_ms,
            keys.as_mut_ptr(),
            n,
            // The number of keys, kept as the wait's private data (no allocation, nothing to
            // free): a retry compares it with the keys it would wait on.
            std::ptr::without_provenance_mut(keys.len()),
            raw::REDISMODULE_BLOCK_UNBLOCK_DELETED as c_int,
        )
    };
    if bc.is_null() {
        return false;
    }
    metrics::add(&metrics::BLOCKED, 1);
    true
}

/// How many keys the client whose retry this is waits on (None outside a retry).
pub fn waiting_on(ctx: *mut RedisModuleCtx) -> Option<usize> {
    let get = api!(RedisModule_GetBlockedClientPrivateData)?;
    // SAFETY: live ctx; the private data is the count `block` stored, never dereferenced.
    let p = unsafe { get(ctx) };
    (!p.is_null()).then(|| p.addr())
}

/// The wait ended without work: the empty array, as the call would have answered at once.
extern "C" fn timed_out(ctx: *mut RedisModuleCtx, _argv: *mut *mut RedisModuleString, _argc: c_int) -> c_int {
    metrics::add(&metrics::BLOCK_TIMEOUTS, 1);
    reply::send(ctx, &Reply::Array(Vec::new()));
    raw::REDISMODULE_OK as c_int
}
