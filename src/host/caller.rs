//! The caller and its ACL: keys a verb touches without declaring them (the fence key, job
//! rows found in sets, rows deleted by retention) are checked against the calling user, with
//! the server's own NOPERM text. The channel PUBLISH publishes on is declared instead
//! (`channel_request`): the server checks it before the call, with the declared keys.
//!
//! A found key is checked by the server's own rule for a whole command: some *one* selector
//! of the user must grant the command, every key it declares and this key. Checking the key
//! alone (`ACLCheckKeyPermissions`) would pass when any selector grants it, and a user whose
//! second selector grants only `GET` on rows could then claim jobs it cannot finish. So the
//! check hands the server a copy of the call's head (the command name, `numkeys` and the
//! declared keys) with the key appended behind a marker word (`FOUND_READ` …), which a key
//! spec of every command names (`register`): the server finds the declared keys and the found
//! one in that argv and judges them together, selector by selector
//! (`ACLCheckCommandPermissions`). Only the head: each check costs the length of what it is
//! handed, and a call finding a row per argument pair would otherwise cost the square.

use std::cell::RefCell;
use std::ffi::CStr;
use std::os::raw::c_int;
use std::ptr::NonNull;

use valkey_module::raw::{self, RedisModuleCtx, RedisModuleString, RedisModuleUser};

use super::strings::{Lit, Str, StrRef};
use crate::errors::{Refusal, NOPERM_KEY};

/// The marker words, one per access; no client sends them (each begins with a control byte),
/// so in a real call the key specs behind them find nothing.
pub const FOUND_READ: &CStr = c"\x01trafikey:found:read";
pub const FOUND_UPDATE: &CStr = c"\x01trafikey:found:update";
pub const FOUND_WRITE: &CStr = c"\x01trafikey:found:write";
static MARKS: [Lit; 3] = [Lit::new(FOUND_READ), Lit::new(FOUND_UPDATE), Lit::new(FOUND_WRITE)];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    Read,
    /// Read and change what is there.
    Update,
    /// Write only (a delete or a blind insert).
    Write,
}

impl Access {
    /// The marker word of this access, and the key spec flags the server judges it by.
    pub fn found(self) -> (&'static CStr, u32) {
        match self {
            Access::Read => (FOUND_READ, raw::REDISMODULE_CMD_KEY_RO | raw::REDISMODULE_CMD_KEY_ACCESS),
            Access::Update => (
                FOUND_UPDATE,
                raw::REDISMODULE_CMD_KEY_RW
                    | raw::REDISMODULE_CMD_KEY_ACCESS
                    | raw::REDISMODULE_CMD_KEY_UPDATE,
            ),
            Access::Write => (FOUND_WRITE, raw::REDISMODULE_CMD_KEY_OW | raw::REDISMODULE_CMD_KEY_UPDATE),
        }
    }

    /// The handle audit's record of a check passed with this access.
    fn did(self) -> u8 {
        match self {
            Access::Read => super::audit::Did::CHECK_READ,
            Access::Update => super::audit::Did::CHECK_UPDATE,
            Access::Write => super::audit::Did::CHECK_WRITE,
        }
    }

    fn mark(self) -> &'static Lit {
        match self {
            Access::Read => &MARKS[0],
            Access::Update => &MARKS[1],
            Access::Write => &MARKS[2],
        }
    }
}

/// The user behind the call, looked up once per command, and the head of the call's argv (for
/// judging a found key with the command). `None` means the server obeys the call without ACL
/// (replication stream, AOF load, a context with no user).
pub struct Caller {
    user: Option<NonNull<RedisModuleUser>>,
    /// The call's head, then room for a marker and a key.
    argv: RefCell<Vec<*mut RedisModuleString>>,
    /// Whether the handle audit records the checks passed (read once per call).
    audited: bool,
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
        Caller { user: None, argv: RefCell::new(Vec::new()), audited: false }
    }

    /// The caller of the call on `ctx` whose argv begins with `head` (the command and its keys).
    pub fn of(ctx: *mut RedisModuleCtx, head: &[*mut RedisModuleString]) -> Result<Caller, Refusal> {
        let Some(name_of) = api!(RedisModule_GetCurrentUserName) else { return Ok(Caller::server()) };
        // SAFETY: live ctx; the name is a new string we own. It is NULL for the clients the
        // server obeys without ACL (the primary's stream, AOF replay).
        let Some(name) = Str::adopt(ctx, unsafe { name_of(ctx) }) else { return Ok(Caller::server()) };
        let lookup = api!(RedisModule_GetModuleUserFromUserName).ok_or_else(crate::errors::host_reply)?;
        // SAFETY: a live name string.
        let user = NonNull::new(unsafe { lookup(name.raw()) });
        match user {
            Some(u) => {
                let mut copy = Vec::with_capacity(head.len().saturating_add(2));
                copy.extend_from_slice(head);
                Ok(Caller { user: Some(u), argv: RefCell::new(copy), audited: super::audit::on() })
            }
            // The user was deleted under the running command: nothing it may touch.
            None => Err(Refusal::NoPerm(NOPERM_KEY)),
        }
    }

    /// Whether the call may touch `key`, found by the verb, with `access`: judged with the
    /// command and its declared keys, by one selector at a time.
    pub fn key(&self, key: StrRef<'_>, access: Access) -> Result<(), Refusal> {
        let Some(u) = self.user else { return Ok(()) };
        let check = api!(RedisModule_ACLCheckCommandPermissions).ok_or_else(crate::errors::host_reply)?;
        let mark = access.mark().raw();
        if mark.is_null() {
            return Err(crate::errors::host_reply());
        }
        let mut argv = self.argv.borrow_mut();
        let base = argv.len();
        argv.push(mark);
        argv.push(key.raw());
        let argc = c_int::try_from(argv.len()).unwrap_or(c_int::MAX);
        // SAFETY: live user handle; argv holds the call's own live strings, the marker (kept
        // for the process) and the key name; the server only reads them.
        let ok = unsafe { check(u.as_ptr(), argv.as_mut_ptr(), argc) } == raw::REDISMODULE_OK as c_int;
        argv.truncate(base);
        if ok {
            if self.audited {
                super::audit::did(super::strings::bytes_of(key.raw()), access.did());
            }
            Ok(())
        } else {
            Err(Refusal::NoPerm(NOPERM_KEY))
        }
    }
}

/// When the server asks a command that declares a channel which channel a call would use (an
/// ACL check, not a call: nothing runs), answers the argument at `pos()` and returns true.
/// Asked first, the server's question costs every other call one API call, not the lookup.
pub fn channel_request(
    ctx: *mut RedisModuleCtx,
    argv: &[*mut RedisModuleString],
    pos: impl FnOnce() -> Option<usize>,
) -> bool {
    let (Some(asks), Some(answer)) =
        (api!(RedisModule_IsChannelsPositionRequest), api!(RedisModule_ChannelAtPosWithFlags))
    else {
        return false;
    };
    // SAFETY: live ctx.
    if unsafe { asks(ctx) } == 0 {
        return false;
    }
    if let Some(p) = pos().filter(|&p| p < argv.len()).and_then(|p| c_int::try_from(p).ok()) {
        // SAFETY: live ctx in a channel request, a position inside argv.
        unsafe { answer(ctx, p, raw::REDISMODULE_CMD_CHANNEL_PUBLISH as c_int) };
    }
    true
}
