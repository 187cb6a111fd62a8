//! Registration from the one table: each command with its flags, one key spec per key
//! position with that role's exact access (so per-role ACL rules and routing see every
//! key), its docs and its ACL categories.

use std::ffi::CString;
use std::mem::MaybeUninit;
use std::os::raw::c_int;
use std::ptr;

use valkey_module::raw;
use valkey_module::Context;

use super::CALLBACKS;
use crate::table::{Command, Spec, COMMANDS};

const INFO_VERSION: raw::RedisModuleCommandInfoVersion = raw::RedisModuleCommandInfoVersion {
    version: 1,
    sizeof_historyentry: std::mem::size_of::<raw::RedisModuleCommandHistoryEntry>(),
    sizeof_keyspec: std::mem::size_of::<raw::RedisModuleCommandKeySpec>(),
    sizeof_arg: std::mem::size_of::<raw::RedisModuleCommandArg>(),
};

fn spec_flags(s: Spec) -> u64 {
    let f = match s {
        Spec::Read => raw::REDISMODULE_CMD_KEY_RO | raw::REDISMODULE_CMD_KEY_ACCESS,
        Spec::Insert => raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_INSERT,
        Spec::Append => raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_UPDATE,
        Spec::Update => raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_ACCESS | raw::REDISMODULE_CMD_KEY_UPDATE,
        Spec::Take => raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_ACCESS | raw::REDISMODULE_CMD_KEY_DELETE,
    };
    u64::from(f)
}

fn cstr(s: &str) -> Result<CString, String> {
    CString::new(s).map_err(|_| format!("NUL in {s:?}"))
}

fn one(ctx: &Context, cmd: &Command, callback: super::Callback) -> Result<(), String> {
    let (create, get, set_info, set_acl) = (
        api!(RedisModule_CreateCommand).ok_or("no CreateCommand")?,
        api!(RedisModule_GetCommand).ok_or("no GetCommand")?,
        api!(RedisModule_SetCommandInfo).ok_or("no SetCommandInfo")?,
        api!(RedisModule_SetCommandACLCategories).ok_or("no SetCommandACLCategories")?,
    );
    let name = cstr(&cmd.name.to_ascii_lowercase())?;
    let flags = cstr(cmd.flags)?;
    // SAFETY: load-time registration on the module's context; the strings live across the
    // calls and the server copies what it keeps.
    unsafe {
        if create(ctx.ctx, name.as_ptr(), Some(callback), flags.as_ptr(), 0, 0, 0) != raw::REDISMODULE_OK as c_int {
            return Err(format!("cannot create {}", cmd.name));
        }
        let handle = get(ctx.ctx, name.as_ptr());
        if handle.is_null() {
            return Err(format!("cannot find {}", cmd.name));
        }
        let mut specs: Vec<raw::RedisModuleCommandKeySpec> = cmd
            .keys
            .iter()
            .enumerate()
            .map(|(i, slot)| raw::RedisModuleCommandKeySpec {
                notes: ptr::null_mut(),
                flags: spec_flags(slot.spec),
                begin_search_type: raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_INDEX,
                bs: raw::RedisModuleCommandKeySpec__bindgen_ty_1 {
                    index: raw::RedisModuleCommandKeySpec__bindgen_ty_1__bindgen_ty_1 { pos: 2 + i as c_int },
                },
                find_keys_type: raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_RANGE,
                fk: raw::RedisModuleCommandKeySpec__bindgen_ty_2 {
                    range: raw::RedisModuleCommandKeySpec__bindgen_ty_2__bindgen_ty_1 { lastkey: 0, keystep: 1, limit: 0 },
                },
            })
            .collect();
        // The array ends with a zeroed spec.
        specs.push(MaybeUninit::zeroed().assume_init());
        let summary = cstr(cmd.summary)?;
        let complexity = cstr(cmd.complexity)?;
        let since = cstr(env!("CARGO_PKG_VERSION"))?;
        let info = raw::RedisModuleCommandInfo {
            version: &INFO_VERSION,
            summary: summary.as_ptr(),
            complexity: complexity.as_ptr(),
            since: since.as_ptr(),
            history: ptr::null_mut(),
            tips: ptr::null(),
            // Permissive: every shape error is the module's own EMQSHAPE (§8).
            arity: -1,
            key_specs: if cmd.keys.is_empty() { ptr::null_mut() } else { specs.as_mut_ptr() },
            args: ptr::null_mut(),
        };
        if set_info(handle, &info) != raw::REDISMODULE_OK as c_int {
            return Err(format!("cannot describe {}", cmd.name));
        }
        let acl = cstr(cmd.acl)?;
        if set_acl(handle, acl.as_ptr()) != raw::REDISMODULE_OK as c_int {
            return Err(format!("cannot set ACL categories of {}", cmd.name));
        }
    }
    Ok(())
}

pub fn all(ctx: &Context) -> Result<(), String> {
    for (cmd, cb) in COMMANDS.iter().zip(CALLBACKS) {
        one(ctx, cmd, *cb)?;
    }
    Ok(())
}
