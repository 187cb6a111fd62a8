//! Replies, written element by element with the raw reply calls: maps keep their order (the
//! crate's maps do not), and strings go out without copies.

use std::ffi::{CStr, CString};
use std::os::raw::{c_char, c_long};

use valkey_module::raw::RedisModuleCtx;

use super::strings::Str;
use crate::errors::Refusal;

pub enum Reply {
    Int(i64),
    Simple(&'static CStr),
    Bulk(Vec<u8>),
    Str(Str),
    Null,
    Array(Vec<Reply>),
    /// An error inside a reply (a part of the call refused, the rest done).
    Error(Refusal),
    /// A RESP3 map; RESP2 clients get the flat pairs.
    Map(Vec<(&'static str, Reply)>),
    /// Rows of four: `[[a b c d] ...]`, in one allocation for the whole reply (CLAIM's jobs:
    /// a nested array per job would cost an allocation per job).
    Rows4(Vec<[Reply; 4]>),
    /// Nothing to answer yet: wait until one of the declared keys of these roles is signalled
    /// ready, at most `timeout_ms` (0: no limit), then run the call again (`host::blocking`).
    /// Where the call cannot wait, and when the wait ends without work: the empty array.
    Block {
        timeout_ms: i64,
        roles: &'static [crate::keyspace::Role],
    },
}

impl Reply {
    pub fn bulk(b: &[u8]) -> Reply {
        Reply::Bulk(b.to_vec())
    }
}

pub fn send(ctx: *mut RedisModuleCtx, r: &Reply) {
    // SAFETY (all arms): ctx is the live command context; every pointer handed over lives
    // for the duration of the call.
    unsafe {
        match r {
            Reply::Int(v) => {
                if let Some(f) = api!(RedisModule_ReplyWithLongLong) {
                    f(ctx, *v);
                }
            }
            Reply::Simple(s) => {
                if let Some(f) = api!(RedisModule_ReplyWithSimpleString) {
                    f(ctx, s.as_ptr());
                }
            }
            Reply::Bulk(b) => {
                if let Some(f) = api!(RedisModule_ReplyWithStringBuffer) {
                    f(ctx, b.as_ptr().cast::<c_char>(), b.len());
                }
            }
            Reply::Str(s) => {
                if let Some(f) = api!(RedisModule_ReplyWithString) {
                    f(ctx, s.raw());
                }
            }
            Reply::Null => {
                if let Some(f) = api!(RedisModule_ReplyWithNull) {
                    f(ctx);
                }
            }
            Reply::Array(items) => {
                if let Some(f) = api!(RedisModule_ReplyWithArray) {
                    f(ctx, items.len() as c_long);
                }
                for i in items {
                    send(ctx, i);
                }
            }
            Reply::Block { .. } => send(ctx, &Reply::Array(Vec::new())),
            Reply::Rows4(rows) => {
                if let Some(f) = api!(RedisModule_ReplyWithArray) {
                    f(ctx, rows.len() as c_long);
                    for row in rows {
                        f(ctx, 4);
                        for i in row {
                            send(ctx, i);
                        }
                    }
                }
            }
            Reply::Error(e) => refuse(ctx, e),
            Reply::Map(pairs) => {
                if let Some(f) = api!(RedisModule_ReplyWithMap) {
                    f(ctx, pairs.len() as c_long);
                }
                let bulk = api!(RedisModule_ReplyWithStringBuffer);
                for (k, v) in pairs {
                    if let Some(f) = bulk {
                        f(ctx, k.as_ptr().cast::<c_char>(), k.len());
                    }
                    send(ctx, v);
                }
            }
        }
    }
}

pub fn refuse(ctx: *mut RedisModuleCtx, r: &Refusal) {
    // Refusal::line is ASCII without NUL; the fallback only guards that promise.
    let line =
        CString::new(r.line()).unwrap_or_else(|_| CString::from(c"EMQHOST unexpected reply from the host"));
    if let Some(f) = api!(RedisModule_ReplyWithError) {
        // SAFETY: live ctx, NUL-terminated text.
        unsafe { f(ctx, line.as_ptr()) };
    }
}
