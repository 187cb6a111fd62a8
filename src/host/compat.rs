//! Which servers the module can serve, decided at load before anything is registered.
//!
//! The module binds to the server through function pointers the server fills in at load; an
//! API the server lacks is a null pointer, and calling one kills the server. So the load
//! first checks the server (Valkey, 8.0 or later) and then every API the module will ever
//! call, and refuses to load — one log line, an error from `MODULE LOAD`, the server
//! unharmed — when anything is missing. The module initialises itself through the server's
//! Redis-compatible entry point (the crate's `use-redismodule-api`), which every server of
//! this family has, so that this check runs on servers it refuses too: the Valkey entry
//! point dereferences a Valkey-only API before any module code can run.

use std::ffi::CStr;
use std::os::raw::{c_int, c_void};

/// The oldest server the module is built for and tested on.
pub const MIN_VALKEY: (u32, u32, u32) = (8, 0, 0);

/// Every server API the module calls, by the name of the crate's pointer: the module's own
/// calls and those the crate makes while loading it. A unit test keeps this list whole.
macro_rules! apis {
    ($($name:ident)*) => {
        fn missing() -> Vec<&'static str> {
            let mut v = Vec::new();
            $( if api!($name).is_none() { v.push(stringify!($name)); } )*
            v
        }
        #[cfg(test)]
        const LISTED: &[&str] = &[$(stringify!($name)),*];
    };
}

apis! {
    RedisModule_ACLCheckCommandPermissions RedisModule_AddACLCategory RedisModule_ChannelAtPosWithFlags
    RedisModule_IsChannelsPositionRequest
    RedisModule_Alloc RedisModule_BlockClientOnKeysWithFlags RedisModule_GetBlockedClientPrivateData RedisModule_Call RedisModule_CallReplyArrayElement
    RedisModule_CallReplyInteger RedisModule_CallReplyLength RedisModule_CallReplyStringPtr RedisModule_CallReplyType RedisModule_FreeCallReply
    RedisModule_Calloc RedisModule_Free RedisModule_Realloc
    RedisModule_CachedMicroseconds RedisModule_CloseKey RedisModule_CreateTimer RedisModule_StopTimer
    RedisModule_MonotonicMicroseconds RedisModule_SelectDb RedisModule_GetSelectedDb RedisModule_Scan
    RedisModule_ScanCursorCreate RedisModule_ScanCursorDestroy RedisModule_ScanKey RedisModule_CommandFilterArgGet
    RedisModule_CreateCommand RedisModule_CreateString RedisModule_CreateStringFromLongLong
    RedisModule_DeleteKey RedisModule_FreeModuleUser RedisModule_FreeServerInfo RedisModule_FreeString
    RedisModule_GetCommand RedisModule_GetContextFlags RedisModule_GetCurrentUserName
    RedisModule_GetDetachedThreadSafeContext
    RedisModule_GetModuleUserFromUserName RedisModule_GetServerInfo RedisModule_GetServerVersion
    RedisModule_HashGet RedisModule_HashSet RedisModule_KeyType RedisModule_ListGet RedisModule_ListPop
    RedisModule_ListPush RedisModule_LoadConfigs RedisModule_Log RedisModule_Milliseconds RedisModule_OpenKey
    RedisModule_PublishMessage RedisModule_RegisterBoolConfig RedisModule_RegisterCommandFilter
    RedisModule_RegisterInfoFunc RedisModule_RegisterNumericConfig RedisModule_Replicate
    RedisModule_ReplicateVerbatim RedisModule_ReplyWithArray RedisModule_ReplyWithError
    RedisModule_ReplyWithLongLong RedisModule_ReplyWithMap RedisModule_ReplyWithNull
    RedisModule_ReplyWithSimpleString RedisModule_ReplyWithString RedisModule_ReplyWithStringBuffer
    RedisModule_RetainString RedisModule_ServerInfoGetFieldC RedisModule_ServerInfoGetFieldSigned
    RedisModule_GetAbsExpire RedisModule_SetAbsExpire RedisModule_SetCommandACLCategories RedisModule_SetCommandInfo RedisModule_SignalKeyAsReady
    RedisModule_StreamAdd RedisModule_StreamTrimByLength RedisModule_StringDMA RedisModule_StringPtrLen
    RedisModule_StringSet RedisModule_SubscribeToServerEvent RedisModule_ValueLength RedisModule_ZsetAdd
    RedisModule_ZsetFirstInScoreRange RedisModule_ZsetRangeCurrentElement RedisModule_ZsetRangeEndReached
    RedisModule_ZsetRangeNext RedisModule_ZsetRangeStop RedisModule_ZsetRem RedisModule_ZsetScore
}

/// `0x00MMmmpp` as the server reports its version.
fn split(v: c_int) -> (u32, u32, u32) {
    let v = v as u32;
    ((v >> 16) & 0xff, (v >> 8) & 0xff, v & 0xff)
}

/// Below the oldest Valkey the module is built for; that version itself is served.
fn too_old(v: (u32, u32, u32)) -> bool {
    v < MIN_VALKEY
}

/// Whether the server exposes its API under the Valkey names too: only Valkey does. A Redis
/// 8 reports a version above the minimum without being a server the module was built for.
fn is_valkey() -> bool {
    let Some(get) = api!(RedisModule_GetApi) else { return false };
    let mut p: *mut c_void = std::ptr::null_mut();
    let name: &CStr = c"ValkeyModule_GetServerVersion";
    // SAFETY: GetApi writes one function pointer into `p` when it knows the name.
    let ok = unsafe { get(name.as_ptr(), (&mut p as *mut *mut c_void).cast()) };
    ok == valkey_module::raw::REDISMODULE_OK as c_int && !p.is_null()
}

/// Ok when the module can serve this server; else the one line the log gets.
pub fn check() -> Result<(), String> {
    let need = format!("trafikey needs Valkey {}.{} or later", MIN_VALKEY.0, MIN_VALKEY.1);
    // SAFETY: a plain read of a number, when the server has the call.
    let version = api!(RedisModule_GetServerVersion).map(|f| split(unsafe { f() }));
    let Some((ma, mi, pa)) = version else {
        return Err(format!("{need}; this server does not report its version"));
    };
    if !is_valkey() {
        return Err(format!("{need}; this server is not Valkey (it reports version {ma}.{mi}.{pa})"));
    }
    if too_old((ma, mi, pa)) {
        return Err(format!("{need}; this server is Valkey {ma}.{mi}.{pa}"));
    }
    let gone = missing();
    if !gone.is_empty() {
        return Err(format!("{need}; this server (Valkey {ma}.{mi}.{pa}) lacks {}", gone.join(", ")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `RedisModule_*` the sources name is in the list the load checks.
    #[test]
    fn every_api_the_sources_call_is_checked_at_load() {
        fn walk(dir: &std::path::Path, out: &mut Vec<String>) {
            for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                let p = e.path();
                if p.is_dir() {
                    walk(&p, out);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    out.push(std::fs::read_to_string(&p).unwrap_or_default());
                }
            }
        }
        let mut sources = Vec::new();
        walk(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut sources);
        let mut named = std::collections::BTreeSet::new();
        for s in &sources {
            for (i, _) in s.match_indices("RedisModule_") {
                let rest = &s[i..];
                let end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(rest.len());
                let name = &rest[..end];
                // Types (RedisModuleCtx...) have no underscore after the prefix; the entry points
                // and GetApi itself are not pointers the server fills in.
                if name.len() > "RedisModule_".len()
                    && name.as_bytes()["RedisModule_".len()].is_ascii_uppercase()
                {
                    named.insert(name.to_owned());
                }
            }
        }
        for skip in ["RedisModule_GetApi", "RedisModule_OnLoad", "RedisModule_OnUnload"] {
            named.remove(skip);
        }
        assert!(named.len() > 40, "the scan finds the sources' calls: {named:?}");
        let unlisted: Vec<_> = named.iter().filter(|n| !LISTED.contains(&n.as_str())).collect();
        assert!(unlisted.is_empty(), "add to compat's list: {unlisted:?}");
    }

    #[test]
    fn versions_split_and_order() {
        assert_eq!(split(0x0009_0102), (9, 1, 2));
        assert_eq!(split(0x0007_000f), (7, 0, 15));
        assert!(too_old(split(0x0007_0204)) && too_old(split(0x0007_ffff)));
        assert!(!too_old(split(0x0008_0000)) && !too_old(MIN_VALKEY) && !too_old(split(0x0009_0102)));
    }
}
