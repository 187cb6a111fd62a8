//! The caller and its ACL: keys a verb touches without declaring them (the fence key, job
//! rows found in sets, rows deleted by retention) and channels it publishes to are checked
//! against the calling user, with the server's own NOPERM texts.

use std::os::raw::c_int;
use std::ptr::NonNull;

use valkey_module::raw::{self, RedisModuleCtx, RedisModuleString, RedisModuleUser};

use super::strings::Str;
use crate::errors::{Refusal, NOPERM_CHANNEL, NOPERM_KEY};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    Read,
    /// Read and change what is there.
    Update,
    /// Write only (a delete or a blind insert).
    Write,
}

/// The user behind the call, looked up once per command. `None` means the server obeys the
/// call without ACL (replication stream, AOF load, a context with no user).
pub struct Caller {
    user: Option<NonNull<RedisModuleUser>>,
}

impl Drop for Caller {
    fn drop(&mut self) {
        if let (Some(u), Some(free)) = (self.user, api!(RedisModule_FreeModuleUser)) {
            // SAFETY: a user handle we obtained and free once.
            unsafe { free(u.as_ptr()) };
        }
    }
}

impl Caller {
    /// The module itself (upkeep): the server, to which no ACL applies.
    pub const fn server() -> Caller {
        Caller { user: None }
    }

    pub fn of(ctx: *mut RedisModuleCtx) -> Result<Caller, Refusal> {
        let Some(name_of) = api!(RedisModule_GetCurrentUserName) else { return Ok(Caller { user: None }) };
        // SAFETY: live ctx; the name is a new string we own. It is NULL for the clients the
        // server obeys without ACL (the primary's stream, AOF replay).
        let Some(name) = Str::adopt(ctx, unsafe { name_of(ctx) }) else { return Ok(Caller { user: None }) };
        let lookup = api!(RedisModule_GetModuleUserFromUserName).ok_or_else(crate::errors::host_reply)?;
        // SAFETY: a live name string.
        let user = NonNull::new(unsafe { lookup(name.ptr()) });
        match user {
            Some(u) => Ok(Caller { user: Some(u) }),
            // The user was deleted under the running command: nothing it may touch.
            None => Err(Refusal::NoPerm(NOPERM_KEY)),
        }
    }

    pub fn key(&self, key: *mut RedisModuleString, access: Access) -> Result<(), Refusal> {
        let Some(u) = self.user else { return Ok(()) };
        let flags = match access {
            Access::Read => raw::REDISMODULE_CMD_KEY_ACCESS,
            Access::Update => raw::REDISMODULE_CMD_KEY_ACCESS | raw::REDISMODULE_CMD_KEY_UPDATE,
            Access::Write => raw::REDISMODULE_CMD_KEY_UPDATE,
        };
        let check = api!(RedisModule_ACLCheckKeyPermissions).ok_or_else(crate::errors::host_reply)?;
        // SAFETY: live user handle and key name.
        let ok = unsafe { check(u.as_ptr(), key, flags as c_int) } == raw::REDISMODULE_OK as c_int;
        if ok {
            Ok(())
        } else {
            Err(Refusal::NoPerm(NOPERM_KEY))
        }
    }

    pub fn publish(&self, channel: *mut RedisModuleString) -> Result<(), Refusal> {
        let Some(u) = self.user else { return Ok(()) };
        let check = api!(RedisModule_ACLCheckChannelPermissions).ok_or_else(crate::errors::host_reply)?;
        // SAFETY: live user handle and channel name.
        let ok = unsafe { check(u.as_ptr(), channel, raw::REDISMODULE_CMD_CHANNEL_PUBLISH as c_int) }
            == raw::REDISMODULE_OK as c_int;
        if ok {
            Ok(())
        } else {
            Err(Refusal::NoPerm(NOPERM_CHANNEL))
        }
    }
}
