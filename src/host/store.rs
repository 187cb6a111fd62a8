//! The low-level key API, and the only place that writes: every write replicates itself as
//! an effect with absolute values (HSET, ZADD with the resolved score, XADD with the id the
//! primary chose, ...), so replicas and AOF replay never run a verb with their own clock.
//! When nothing could receive an effect, it is counted instead of built (`effects`).

use std::ffi::CStr;
use std::os::raw::{c_char, c_int};
use std::ptr;

use valkey_module::raw::{self, RedisModuleCtx, RedisModuleKey, RedisModuleStreamID, RedisModuleString};

use super::strings::{one, Lit, Str, StrRef};
use super::Ctx;
use crate::errors::Refusal;

/// A stream entry id, `ms-seq`, written out on the stack (every event pays for it, and the
/// formatting machinery costs more than the digits).
fn stream_id(ms: u64, seq: u64) -> smallvec::SmallVec<[u8; 48]> {
    fn digits(out: &mut smallvec::SmallVec<[u8; 48]>, mut v: u64) {
        let mut tmp = [0u8; 20];
        let mut i = tmp.len();
        loop {
            i = i.saturating_sub(1);
            if let Some(d) = tmp.get_mut(i) {
                *d = b'0'.saturating_add((v % 10) as u8);
            }
            v /= 10;
            if v == 0 || i == 0 {
                break;
            }
        }
        out.extend_from_slice(tmp.get(i..).unwrap_or(&[]));
    }
    let mut out = smallvec::SmallVec::new();
    digits(&mut out, ms);
    out.push(b'-');
    digits(&mut out, seq);
    out
}

/// The arguments of one effect: short, so on the stack.
type Effect = smallvec::SmallVec<[*mut RedisModuleString; 16]>;

/// Propagate one command to replicas and AOF. All effects of one call are wrapped in
/// MULTI/EXEC by the server. When nothing could receive it, the write is only counted
/// (`effects`); callers that must make strings for an effect ask `effects::build()` first.
pub(in crate::host) fn replicate(ctx: *mut RedisModuleCtx, cmd: &CStr, args: &[*mut RedisModuleString]) {
    if !super::effects::build() {
        super::effects::skip(ctx);
        return;
    }
    crate::metrics::add(&crate::metrics::EFFECTS_BUILT, 1);
    let Some(f) = api!(RedisModule_Replicate) else { return };
    let c = cmd.as_ptr();
    // One `s` per argument up to twelve: the server sizes its argv from the format once,
    // where a `v` vector costs it a second allocation (two per effect, ~9 effects a job).
    macro_rules! by_arity {
        ($($fmt:literal [$($a:ident)+])*) => {
            match *args {
                $([$($a),+] => f(ctx, c, $fmt.as_ptr(), $($a),+),)*
                _ => f(ctx, c, c"v".as_ptr(), args.as_ptr(), args.len()),
            }
        };
    }
    // SAFETY: each `s` takes one live RedisModuleString, `v` takes (RedisModuleString **,
    // size_t); the server retains what it keeps.
    unsafe {
        by_arity! {
            c"s" [a]
            c"ss" [a b]
            c"sss" [a b d]
            c"ssss" [a b d e]
            c"sssss" [a b d e g]
            c"ssssss" [a b d e g h]
            c"sssssss" [a b d e g h i]
            c"ssssssss" [a b d e g h i j]
            c"sssssssss" [a b d e g h i j k]
            c"ssssssssss" [a b d e g h i j k l]
            c"sssssssssss" [a b d e g h i j k l m]
            c"ssssssssssss" [a b d e g h i j k l m n]
        }
    };
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Empty,
    String,
    List,
    Hash,
    ZSet,
    Stream,
    Other,
}

/// Delete the (writable) keys that exist; one effect `DEL k ...`.
pub fn delete_all(keys: &[Key]) {
    let Some(f) = api!(RedisModule_DeleteKey) else { return };
    let mut effect = Effect::new();
    let mut ctx = ptr::null_mut();
    for key in keys {
        key.writes();
        if let (Some(k), false) = (key.live(), key.kind() == Kind::Empty) {
            key.audit_deleting(0, false);
            // SAFETY: writable, existing key.
            unsafe { f(k) };
            effect.push(key.name());
            ctx = key.ctx;
        }
    }
    if !effect.is_empty() {
        replicate(ctx, c"DEL", &effect);
    }
}

/// A key's name: a string that outlives the key (a call argument, a constant), or one the
/// module made for it.
pub(in crate::host) enum Name {
    Arg(*mut RedisModuleString),
    Own(Str),
}

impl Name {
    fn ptr(&self) -> *mut RedisModuleString {
        match self {
            Name::Arg(p) => *p,
            Name::Own(s) => s.raw(),
        }
    }
}

/// An open key, closed on drop.
pub struct Key {
    ctx: *mut RedisModuleCtx,
    name: Name,
    ptr: *mut RedisModuleKey,
    /// Whether the handle audit was on when it opened: its close and its operations are
    /// recorded then, and cost a test of this field otherwise.
    audited: bool,
}

impl Drop for Key {
    fn drop(&mut self) {
        self.close();
    }
}

fn s(ctx: *mut RedisModuleCtx, b: &[u8]) -> Result<Str, Refusal> {
    Str::new(ctx, b).ok_or_else(crate::errors::host_reply)
}

/// A zset that takes a member and loses one on every job (the active set, the finished sets, a busy
/// priority or delayed set) is cheaper as a skiplist once it holds more than a few: the server's
/// compact encoding, which it keeps for a zset of up to 128 short members, rescans and reallocates
/// itself on each insert and delete, O(n) each, where a skiplist takes O(log n) at a fixed cost
/// that only pays off past about a dozen members (callgrind). The server builds a skiplist when a
/// member longer than any compact zset may hold comes in, and keeps that encoding when the member
/// goes; so a zset reaching `Skiplist::FROM` members is given such a member first and loses it
/// before the command ends. Nothing of it is replicated: a replica's encoding is its own concern,
/// and its data is the same.
struct Skiplist(Str);

impl Skiplist {
    /// Longer than `zset-max-listpack-value` (64 bytes by default) at any setting an operator
    /// would choose.
    const LEN: usize = 1024;

    /// Members from which a zset is better a skiplist.
    const FROM: u64 = 16;

    /// The placeholder, put in when `adding` members take the zset from below `FROM` to
    /// `FROM` or more (None otherwise: a zset that stays small, or one past it already).
    fn make(key: &Key, adding: usize) -> Result<Option<Skiplist>, Refusal> {
        let had = key.len();
        if had >= Skiplist::FROM || had.saturating_add(adding as u64) < Skiplist::FROM {
            return Ok(None);
        }
        let filler = s(key.ctx, &[0u8; Skiplist::LEN])?;
        key.zset_add(0, filler.str_ref())?;
        Ok(Some(Skiplist(filler)))
    }

    /// Takes the placeholder out again, once the real members are in (so the key stays).
    fn done(self, key: &Key) {
        if let (Some(k), Some(f)) = (key.live(), api!(RedisModule_ZsetRem)) {
            let mut deleted: c_int = 0;
            // SAFETY: writable zset key, live member.
            unsafe { f(k, self.0.raw(), &mut deleted) };
        }
    }
}

// A key's emptiness is its kind (`Kind::Empty`); `len` is a count, not a test of it.
#[allow(clippy::len_without_is_empty)]
impl Key {
    #[inline]
    pub(in crate::host) fn open(ctx: *mut RedisModuleCtx, name: Name, write: bool) -> Key {
        let mode = if write { raw::KeyMode::READ | raw::KeyMode::WRITE } else { raw::KeyMode::READ };
        let ptr = match api!(RedisModule_OpenKey) {
            // SAFETY: live ctx and name; a missing key opened for read gives NULL, handled below.
            Some(open) => unsafe { open(ctx, name.ptr(), mode.bits()).cast::<RedisModuleKey>() },
            None => ptr::null_mut(),
        };
        let audited = super::audit::on();
        if audited && !ptr.is_null() {
            super::audit::opened(ptr, name.ptr(), write);
        }
        Key { ctx, name, ptr, audited }
    }

    /// Adds to the call's trace what this operation does to the key (`audit::Did`).
    #[inline(always)]
    fn did(&self, did: u8) {
        if self.audited {
            super::audit::did(super::strings::bytes_of(self.name()), did);
        }
    }

    #[inline(always)]
    fn reads(&self) {
        self.did(super::audit::Did::READ);
    }

    #[inline(always)]
    fn writes(&self) {
        self.did(super::audit::Did::WRITE);
    }

    /// Before a write that deletes the key or replaces its value, or may (it removes
    /// `removing` elements and the key has no more; 0 for a deletion): the handle audit's
    /// check that no other handle of the call holds it (`audit`). The write goes through this
    /// handle, or with `by_server` is a command the server runs by the key's name, which
    /// this handle's value does not survive either.
    #[inline]
    fn audit_deleting(&self, removing: usize, by_server: bool) {
        if let (true, Some(k)) = (self.audited, self.live()) {
            if removing == 0 || self.len() <= removing as u64 {
                super::audit::deleting(self.ctx, k, super::strings::bytes_of(self.name()), by_server);
            }
        }
    }

    /// Opens the key named by a string the module made (it lives as long as the key).
    pub fn open_named(ctx: Ctx<'_>, name: Str, write: bool) -> Key {
        Key::open(ctx.raw(), Name::Own(name), write)
    }

    /// Closes the handle now; it reads as an absent key after. The server reads the value a
    /// handle opened when it closes it, so a handle on a key that another handle of the call
    /// is about to delete must be closed first.
    #[inline]
    pub fn close(&mut self) {
        if let (false, Some(close)) = (self.ptr.is_null(), api!(RedisModule_CloseKey)) {
            if self.audited {
                super::audit::closed(self.ptr);
            }
            // SAFETY: opened by us, closed once: the pointer is cleared below.
            unsafe { close(self.ptr) }
        }
        self.ptr = ptr::null_mut();
    }

    /// A new handle on this key, opened now. It sees what other handles of the call have
    /// written since this one was opened, emptied and deleted included, which this one would
    /// not: for a write planned (ACL- and type-checked) through this handle before those
    /// handles wrote.
    pub fn reopen(&self, write: bool) -> Result<Key, Refusal> {
        let name = match &self.name {
            Name::Arg(p) => Name::Arg(*p),
            Name::Own(s) => Name::Own(s.share().ok_or_else(crate::errors::host_reply)?),
        };
        Ok(Key::open(self.ctx, name, write))
    }

    pub(in crate::host) fn name(&self) -> *mut RedisModuleString {
        self.name.ptr()
    }

    pub fn kind(&self) -> Kind {
        let t = match (self.ptr.is_null(), api!(RedisModule_KeyType)) {
            // SAFETY: a live key handle.
            (false, Some(f)) => (unsafe { f(self.ptr) }) as isize,
            _ => raw::REDISMODULE_KEYTYPE_EMPTY,
        };
        match t {
            raw::REDISMODULE_KEYTYPE_EMPTY => Kind::Empty,
            raw::REDISMODULE_KEYTYPE_STRING => Kind::String,
            raw::REDISMODULE_KEYTYPE_LIST => Kind::List,
            raw::REDISMODULE_KEYTYPE_HASH => Kind::Hash,
            raw::REDISMODULE_KEYTYPE_ZSET => Kind::ZSet,
            raw::REDISMODULE_KEYTYPE_STREAM => Kind::Stream,
            _ => Kind::Other,
        }
    }

    /// Ok(true) when the key holds `want`, Ok(false) when it is absent, WRONGTYPE otherwise.
    pub fn exists_as(&self, want: Kind) -> Result<bool, Refusal> {
        match self.kind() {
            Kind::Empty => Ok(false),
            k if k == want => Ok(true),
            _ => Err(Refusal::WrongType),
        }
    }

    fn live(&self) -> Option<*mut RedisModuleKey> {
        (!self.ptr.is_null()).then_some(self.ptr)
    }

    /// Elements of a list, zset or stream; bytes of a string; 0 when absent.
    pub fn len(&self) -> u64 {
        match (self.live(), api!(RedisModule_ValueLength)) {
            // SAFETY: live key.
            (Some(k), Some(f)) => (unsafe { f(k) }) as u64,
            _ => 0,
        }
    }

    // ---- strings ----

    /// The value of a string key (call after `expect(Kind::String)` answered true).
    pub fn string(&self) -> Option<&[u8]> {
        self.reads();
        let (k, f) = (self.live()?, api!(RedisModule_StringDMA)?);
        let mut len = 0usize;
        // SAFETY: READ-mode DMA on a live string key; the bytes live while the key is open.
        let p = unsafe { f(k, &mut len, raw::KeyMode::READ.bits()) };
        if p.is_null() {
            return None;
        }
        // SAFETY: p points at len bytes owned by the key's value.
        Some(unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) })
    }

    pub fn set_string(&self, value: &[u8]) -> Result<(), Refusal> {
        self.writes();
        let (k, f) = (self.live().ok_or_else(crate::errors::host_reply)?, api!(RedisModule_StringSet));
        let v = s(self.ctx, value)?;
        self.audit_deleting(0, false);
        if let Some(f) = f {
            // SAFETY: writable key, live string.
            unsafe { f(k, v.raw()) };
        }
        replicate(self.ctx, c"SET", &[self.name(), v.raw()]);
        Ok(())
    }

    pub fn delete(&self) {
        delete_all(std::slice::from_ref(self));
    }

    // ---- hashes: field names are constant strings ----

    pub fn hget(&self, field: &Lit) -> Option<Str> {
        let [value, ..] = self.hget_many(&[field]);
        value
    }

    /// Up to four fields in one call (the rest of the answer is `None`).
    pub fn hget_many(&self, fields: &[&Lit]) -> [Option<Str>; 4] {
        self.reads();
        let mut out: [*mut RedisModuleString; 4] = [ptr::null_mut(); 4];
        let (Some(k), Some(f)) = (self.live(), api!(RedisModule_HashGet)) else {
            return [None, None, None, None];
        };
        // A NULL field ends the list, so unused slots are NULL.
        let name = |i: usize| fields.get(i).map_or(ptr::null_mut(), |l| l.raw());
        let [o0, o1, o2, o3] = &mut out;
        // SAFETY: field/out-pointer pairs, ended by the first NULL field; the server writes
        // only the out pointers of the fields it was given.
        unsafe {
            f(
                k,
                raw::REDISMODULE_HASH_NONE as c_int,
                name(0),
                o0 as *mut *mut RedisModuleString,
                name(1),
                o1 as *mut *mut RedisModuleString,
                name(2),
                o2 as *mut *mut RedisModuleString,
                name(3),
                o3 as *mut *mut RedisModuleString,
                ptr::null_mut::<c_char>(),
            )
        };
        out.map(|p| Str::adopt(self.ctx, p))
    }

    /// HSET of several fields, one effect.
    pub fn hset(&self, pairs: &[(&Lit, StrRef<'_>)]) -> Result<(), Refusal> {
        self.writes();
        let k = self.live().ok_or_else(crate::errors::host_reply)?;
        let Some(f) = api!(RedisModule_HashSet) else { return Err(crate::errors::host_reply()) };
        let mut effect = Effect::new();
        effect.push(self.name());
        // Six pairs per server call; a NULL field ends the list, so unused slots are NULL.
        for chunk in pairs.chunks(6) {
            let mut slot = [(ptr::null_mut::<RedisModuleString>(), ptr::null_mut::<RedisModuleString>()); 6];
            for (s, (field, value)) in slot.iter_mut().zip(chunk) {
                *s = (field.raw(), value.raw());
                effect.push(field.raw());
                effect.push(value.raw());
            }
            let [(f0, v0), (f1, v1), (f2, v2), (f3, v3), (f4, v4), (f5, v5)] = slot;
            // SAFETY: field/value pairs, ended by the first NULL field (or the final NULL).
            unsafe {
                f(
                    k,
                    raw::REDISMODULE_HASH_NONE as c_int,
                    f0,
                    v0,
                    f1,
                    v1,
                    f2,
                    v2,
                    f3,
                    v3,
                    f4,
                    v4,
                    f5,
                    v5,
                    ptr::null_mut::<c_char>(),
                )
            };
        }
        replicate(self.ctx, c"HSET", &effect);
        Ok(())
    }

    /// HDEL of the fields present; one effect, none if nothing was there.
    pub fn hdel(&self, fields: &[&Lit]) -> Result<(), Refusal> {
        if !fields.is_empty() {
            self.writes();
        }
        let (Some(k), Some(f)) = (self.live(), api!(RedisModule_HashSet)) else { return Ok(()) };
        self.audit_deleting(fields.len(), false);
        let mut effect = Effect::new();
        effect.push(self.name());
        for field in fields {
            // SAFETY: REDISMODULE_HASH_DELETE as the value deletes the field.
            let n = unsafe {
                f(
                    k,
                    raw::REDISMODULE_HASH_NONE as c_int,
                    field.raw(),
                    raw::REDISMODULE_HASH_DELETE,
                    ptr::null_mut::<c_char>(),
                )
            };
            if n > 0 {
                effect.push(field.raw());
            }
        }
        if effect.len() > 1 {
            replicate(self.ctx, c"HDEL", &effect);
        }
        Ok(())
    }

    // ---- hashes keyed by the client's strings (the alias hash) ----

    /// The value of field `field`, a server string (not a constant name).
    pub fn hget_at(&self, field: StrRef<'_>) -> Option<Str> {
        self.reads();
        let (k, f) = (self.live()?, api!(RedisModule_HashGet)?);
        let mut out: *mut RedisModuleString = ptr::null_mut();
        // SAFETY: one field/out-pointer pair, ended by NULL.
        unsafe {
            f(
                k,
                raw::REDISMODULE_HASH_NONE as c_int,
                field.raw(),
                &mut out as *mut *mut RedisModuleString,
                ptr::null_mut::<c_char>(),
            )
        };
        Str::adopt(self.ctx, out)
    }

    /// HSET of one field named by a server string; one effect.
    pub fn hset_at(&self, field: StrRef<'_>, value: StrRef<'_>) -> Result<(), Refusal> {
        self.writes();
        let (field, value) = (field.raw(), value.raw());
        let k = self.live().ok_or_else(crate::errors::host_reply)?;
        let Some(f) = api!(RedisModule_HashSet) else { return Err(crate::errors::host_reply()) };
        // SAFETY: one field/value pair, ended by NULL.
        unsafe { f(k, raw::REDISMODULE_HASH_NONE as c_int, field, value, ptr::null_mut::<c_char>()) };
        replicate(self.ctx, c"HSET", &[self.name(), field, value]);
        Ok(())
    }

    /// HDEL of fields named by server strings; one effect for those that were there.
    pub fn hdel_at(&self, fields: &[StrRef<'_>]) {
        if !fields.is_empty() {
            self.writes();
        }
        let (Some(k), Some(f)) = (self.live(), api!(RedisModule_HashSet)) else { return };
        self.audit_deleting(fields.len(), false);
        let mut effect = Effect::new();
        effect.push(self.name());
        for field in fields.iter().map(|f| f.raw()) {
            // SAFETY: REDISMODULE_HASH_DELETE as the value deletes the field.
            let n = unsafe {
                f(
                    k,
                    raw::REDISMODULE_HASH_NONE as c_int,
                    field,
                    raw::REDISMODULE_HASH_DELETE,
                    ptr::null_mut::<c_char>(),
                )
            };
            if n > 0 {
                effect.push(field);
            }
        }
        if effect.len() > 1 {
            replicate(self.ctx, c"HDEL", &effect);
        }
    }

    /// Every field of a hash with its value, in one pass over the hash (a row read whole costs
    /// one walk instead of a lookup per field). The values are the caller's to keep.
    pub fn hscan(&self, mut each: impl FnMut(&[u8], Str)) {
        self.reads();
        let (Some(k), Some(create), Some(scan), Some(destroy), Some(retain)) = (
            self.live(),
            api!(RedisModule_ScanCursorCreate),
            api!(RedisModule_ScanKey),
            api!(RedisModule_ScanCursorDestroy),
            api!(RedisModule_RetainString),
        ) else {
            return;
        };
        struct Visit<'f> {
            ctx: *mut RedisModuleCtx,
            retain: unsafe extern "C" fn(*mut RedisModuleCtx, *mut RedisModuleString),
            each: &'f mut dyn FnMut(&[u8], Str),
        }
        unsafe extern "C" fn one(
            _: *mut RedisModuleKey,
            field: *mut RedisModuleString,
            value: *mut RedisModuleString,
            visit: *mut std::os::raw::c_void,
        ) {
            // SAFETY: `visit` is the `Visit` below, alive for the whole scan; field and value
            // live for this callback, and the value is retained before it is kept.
            let v = unsafe { &mut *visit.cast::<Visit>() };
            if value.is_null() {
                return;
            }
            unsafe { (v.retain)(v.ctx, value) };
            if let Some(value) = Str::adopt(v.ctx, value) {
                (v.each)(super::strings::bytes_of(field), value);
            }
        }
        let mut visit = Visit { ctx: self.ctx, retain, each: &mut each };
        // SAFETY: a fresh cursor over a live hash key, destroyed after the last step; a step
        // answers 0 once every field was visited.
        unsafe {
            let cursor = create();
            if cursor.is_null() {
                return;
            }
            while scan(k, cursor, Some(one), (&mut visit as *mut Visit).cast()) != 0 {}
            destroy(cursor);
        }
    }

    // ---- lists: the head is the left ----

    fn push(&self, head: bool, v: StrRef<'_>) -> Result<(), Refusal> {
        self.writes();
        let v = v.raw();
        let (k, f) = (self.live().ok_or_else(crate::errors::host_reply)?, api!(RedisModule_ListPush));
        let side = if head { raw::REDISMODULE_LIST_HEAD } else { raw::REDISMODULE_LIST_TAIL };
        if let Some(f) = f {
            // SAFETY: writable list (or empty) key, live string.
            unsafe { f(k, side as c_int, v) };
        }
        replicate(self.ctx, if head { c"LPUSH" } else { c"RPUSH" }, &[self.name(), v]);
        Ok(())
    }

    /// A read the key API has no call for: `cmd key a b [extra]` run by the server itself (no
    /// ACL, no replication: the key is declared, so the server already checked it), its reply
    /// an array of strings. LRANGE and ZRANGE by rank, for paging a set without walking it.
    pub fn range_read(
        &self,
        cmd: &CStr,
        a: i64,
        b: i64,
        extra: Option<&CStr>,
    ) -> Result<Vec<Vec<u8>>, Refusal> {
        self.reads();
        self.range(cmd, a, b, extra)
    }

    /// `range_read` without its trace record: a read a write makes for itself.
    fn range(&self, cmd: &CStr, a: i64, b: i64, extra: Option<&CStr>) -> Result<Vec<Vec<u8>>, Refusal> {
        let (ctx, key) = (self.ctx, self.name());
        let (Some(call), Some(kind), Some(len), Some(at), Some(text), Some(free)) = (
            api!(RedisModule_Call),
            api!(RedisModule_CallReplyType),
            api!(RedisModule_CallReplyLength),
            api!(RedisModule_CallReplyArrayElement),
            api!(RedisModule_CallReplyStringPtr),
            api!(RedisModule_FreeCallReply),
        ) else {
            return Err(crate::errors::host_reply());
        };
        // SAFETY: live ctx and key; the reply is ours until freed below, and its strings live as
        // long as it.
        unsafe {
            let reply = match extra {
                Some(e) => call(
                    ctx,
                    cmd.as_ptr(),
                    c"sllc".as_ptr(),
                    key,
                    a as std::os::raw::c_longlong,
                    b as std::os::raw::c_longlong,
                    e.as_ptr(),
                ),
                None => call(
                    ctx,
                    cmd.as_ptr(),
                    c"sll".as_ptr(),
                    key,
                    a as std::os::raw::c_longlong,
                    b as std::os::raw::c_longlong,
                ),
            };
            if reply.is_null() {
                return Err(crate::errors::host_reply());
            }
            let out = if kind(reply) == raw::REDISMODULE_REPLY_ARRAY as c_int {
                let n = len(reply);
                let mut v = Vec::with_capacity(n);
                for i in 0..n {
                    let e = at(reply, i);
                    let mut l = 0usize;
                    let p = if e.is_null() { ptr::null() } else { text(e, &mut l) };
                    v.push(if p.is_null() {
                        Vec::new()
                    } else {
                        std::slice::from_raw_parts(p.cast::<u8>(), l).to_vec()
                    });
                }
                Ok(v)
            } else {
                Err(Refusal::WrongType)
            };
            free(reply);
            out
        }
    }

    /// Tells the server this key may now satisfy clients blocked on it (`host::blocking`):
    /// a write through the key API does not say so itself. Nearly free when nobody waits.
    pub fn signal_ready(&self) {
        if let Some(f) = api!(RedisModule_SignalKeyAsReady) {
            // SAFETY: live ctx and key name.
            unsafe { f(self.ctx, self.name()) };
        }
    }

    pub fn lpush(&self, v: StrRef<'_>) -> Result<(), Refusal> {
        self.push(true, v)
    }

    /// LPUSH of `values` in order (the last ends at the head), one effect for all of them.
    pub fn lpush_many(&self, values: &[StrRef<'_>]) -> Result<(), Refusal> {
        self.push_many(true, values)
    }

    /// RPUSH of `values` in order (the last ends at the tail), one effect for all of them.
    pub fn rpush_many(&self, values: &[StrRef<'_>]) -> Result<(), Refusal> {
        self.push_many(false, values)
    }

    fn push_many(&self, head: bool, values: &[StrRef<'_>]) -> Result<(), Refusal> {
        if values.is_empty() {
            return Ok(());
        }
        self.writes();
        let k = self.live().ok_or_else(crate::errors::host_reply)?;
        let Some(f) = api!(RedisModule_ListPush) else { return Err(crate::errors::host_reply()) };
        let side = if head { raw::REDISMODULE_LIST_HEAD } else { raw::REDISMODULE_LIST_TAIL };
        for v in values {
            // SAFETY: writable list (or empty) key, live string.
            unsafe { f(k, side as c_int, v.raw()) };
        }
        if super::effects::build() {
            let mut effect = Vec::with_capacity(values.len().saturating_add(1));
            effect.push(self.name());
            effect.extend(values.iter().map(|v| v.raw()));
            replicate(self.ctx, if head { c"LPUSH" } else { c"RPUSH" }, &effect);
        } else {
            super::effects::skip(self.ctx);
        }
        Ok(())
    }

    pub fn rpush(&self, v: StrRef<'_>) -> Result<(), Refusal> {
        self.push(false, v)
    }

    /// Drop up to `n` elements from the tail (the front of the queue), one effect `RPOP key
    /// n`; returns how many there were.
    pub fn rpop_drop(&self, n: usize) -> usize {
        self.pop_drop(false, n)
    }

    /// Drop up to `n` elements from the head, one effect `LPOP key n` (a log's oldest lines).
    pub fn lpop_drop(&self, n: usize) -> usize {
        self.pop_drop(true, n)
    }

    fn pop_drop(&self, head: bool, n: usize) -> usize {
        if n > 0 {
            self.writes();
        }
        let (Some(k), Some(f)) = (self.live(), api!(RedisModule_ListPop)) else { return 0 };
        self.audit_deleting(n, false);
        let side = if head { raw::REDISMODULE_LIST_HEAD } else { raw::REDISMODULE_LIST_TAIL };
        let mut popped = 0;
        while popped < n {
            // SAFETY: writable list key; each popped element is ours (freed as it drops).
            if Str::adopt(self.ctx, unsafe { f(k, side as c_int) }).is_none() {
                break;
            }
            popped = popped.saturating_add(1);
        }
        if popped > 0 {
            if let Ok(count) = Str::int(self.ctx, popped as i64).ok_or(()) {
                replicate(self.ctx, if head { c"LPOP" } else { c"RPOP" }, &[self.name(), count.raw()]);
            }
        }
        popped
    }

    // ---- sorted sets: every score the module writes is an integer (ms or priority) ----

    pub fn zscore(&self, member: StrRef<'_>) -> Option<f64> {
        self.reads();
        let member = member.raw();
        let (k, f) = (self.live()?, api!(RedisModule_ZsetScore)?);
        let mut score = 0f64;
        // SAFETY: live zset key, live member.
        (unsafe { f(k, member, &mut score) } == raw::REDISMODULE_OK as c_int).then_some(score)
    }

    /// ZADD of one member; a zset this makes large is turned into a skiplist (see `Skiplist`).
    pub fn zadd(&self, score: i64, member: StrRef<'_>) -> Result<(), Refusal> {
        if !super::effects::build() {
            self.writes();
            self.zset_add_one(score, member)?;
            super::effects::skip(self.ctx);
            return Ok(());
        }
        let sc = Str::int(self.ctx, score).ok_or_else(crate::errors::host_reply)?;
        self.zadd_as(score, &sc, member)
    }

    /// ZADD XX: moves the score of a member that is there, and says whether it was; a member
    /// that is not is left out (nothing written, nothing replicated).
    pub fn zadd_existing(&self, score: i64, member: StrRef<'_>) -> Result<bool, Refusal> {
        self.did(super::audit::Did::READ | super::audit::Did::WRITE);
        let member = member.raw();
        // On an absent key the server's ZsetAdd makes the set before it looks at XX, and an
        // empty set left in the keyspace breaks the server's own commands (DEBUG DIGEST
        // asserts): an absent set has no member to move.
        if self.kind() == Kind::Empty {
            return Ok(false);
        }
        let (k, f) = (self.live(), api!(RedisModule_ZsetAdd));
        let (Some(k), Some(f)) = (k, f) else { return Ok(false) };
        let mut flags = raw::REDISMODULE_ZADD_XX as c_int;
        // SAFETY: writable zset key; scores are below 2^53, exact in a double.
        if unsafe { f(k, score as f64, member, &mut flags) } != raw::REDISMODULE_OK as c_int
            || flags & raw::REDISMODULE_ZADD_NOP as c_int != 0
        {
            return Ok(false);
        }
        if super::effects::build() {
            let sc = Str::int(self.ctx, score).ok_or_else(crate::errors::host_reply)?;
            replicate(self.ctx, c"ZADD", &[self.name(), sc.raw(), member]);
        } else {
            super::effects::skip(self.ctx);
        }
        Ok(true)
    }

    fn zset_add(&self, score: i64, member: StrRef<'_>) -> Result<(), Refusal> {
        let member = member.raw();
        let (k, f) = (self.live().ok_or_else(crate::errors::host_reply)?, api!(RedisModule_ZsetAdd));
        if let Some(f) = f {
            let mut flags: c_int = 0;
            // SAFETY: writable zset (or empty) key; scores are below 2^53, exact in a double.
            unsafe { f(k, score as f64, member, &mut flags) };
        }
        Ok(())
    }

    /// One member in, the set turned into a skiplist if this takes it to `Skiplist::FROM`.
    fn zset_add_one(&self, score: i64, member: StrRef<'_>) -> Result<(), Refusal> {
        let skiplist = Skiplist::make(self, 1)?;
        self.zset_add(score, member)?;
        if let Some(s) = skiplist {
            s.done(self);
        }
        Ok(())
    }

    /// ZADD with the score's string already made (`text` is `score` written out). A zset this
    /// makes large is turned into a skiplist (see `Skiplist`).
    pub fn zadd_as(&self, score: i64, text: &Str, member: StrRef<'_>) -> Result<(), Refusal> {
        self.writes();
        self.zset_add_one(score, member)?;
        replicate(self.ctx, c"ZADD", &[self.name(), text.raw(), member.raw()]);
        Ok(())
    }

    /// Several members at one score, one effect `ZADD key s m s m ...`. A zset this makes
    /// large is turned into a skiplist (see `Skiplist`).
    pub fn zadd_many(&self, score: i64, members: &[StrRef<'_>]) -> Result<(), Refusal> {
        if members.is_empty() {
            return Ok(());
        }
        self.writes();
        // The score's string first: nothing can fail between the placeholder going in and out.
        let sc = super::effects::build()
            .then(|| Str::int(self.ctx, score).ok_or_else(crate::errors::host_reply))
            .transpose()?;
        let skiplist = Skiplist::make(self, members.len())?;
        if let Some(sc) = sc {
            let mut effect = Effect::with_capacity(members.len().saturating_mul(2).saturating_add(1));
            effect.push(self.name());
            for &m in members {
                self.zset_add(score, m)?;
                effect.push(sc.raw());
                effect.push(m.raw());
            }
            replicate(self.ctx, c"ZADD", &effect);
        } else {
            for &m in members {
                self.zset_add(score, m)?;
            }
            super::effects::skip(self.ctx);
        }
        if let Some(s) = skiplist {
            s.done(self);
        }
        Ok(())
    }

    /// Removes one member and answers whether it was there: a read of the set as well.
    pub fn zrem(&self, member: StrRef<'_>) -> bool {
        self.did(super::audit::Did::READ | super::audit::Did::WRITE);
        self.remove(&[member]) == 1
    }

    /// Remove members; one effect `ZREM key m ...` naming those that were there.
    pub fn zrem_many(&self, members: &[StrRef<'_>]) -> usize {
        if !members.is_empty() {
            self.writes();
        }
        self.remove(members)
    }

    fn remove(&self, members: &[StrRef<'_>]) -> usize {
        let (Some(k), Some(f)) = (self.live(), api!(RedisModule_ZsetRem)) else { return 0 };
        self.audit_deleting(members.len(), false);
        let mut effect = Effect::with_capacity(members.len().saturating_add(1));
        effect.push(self.name());
        for m in members.iter().map(|m| m.raw()) {
            let mut deleted: c_int = 0;
            // SAFETY: writable zset key, live member.
            unsafe { f(k, m, &mut deleted) };
            if deleted != 0 {
                effect.push(m);
            }
        }
        if effect.len() > 1 {
            replicate(self.ctx, c"ZREM", &effect);
        }
        effect.len().saturating_sub(1)
    }

    /// Walk members with min <= score <= max, lowest first (ties in member order), while `f`
    /// answers true. Lazy: a walk that stops early reads no further.
    pub fn zwalk(&self, min: f64, max: f64, mut f: impl FnMut(Str, f64) -> bool) {
        self.reads();
        let Some(k) = self.live() else { return };
        let (Some(first), Some(cur), Some(next), Some(end), Some(stop)) = (
            api!(RedisModule_ZsetFirstInScoreRange),
            api!(RedisModule_ZsetRangeCurrentElement),
            api!(RedisModule_ZsetRangeNext),
            api!(RedisModule_ZsetRangeEndReached),
            api!(RedisModule_ZsetRangeStop),
        ) else {
            return;
        };
        // SAFETY: a live zset key; the iterator is stopped before return; every element
        // handed out is a new string we own.
        unsafe {
            if first(k, min, max, 0, 0) != raw::REDISMODULE_OK as c_int {
                return;
            }
            while end(k) == 0 {
                let mut score = 0f64;
                let Some(m) = Str::adopt(self.ctx, cur(k, &mut score)) else { break };
                if !f(m, score) || next(k) == 0 {
                    break;
                }
            }
            stop(k);
        }
    }

    /// Up to `limit` members with min <= score <= max, lowest first.
    pub fn zrange(&self, min: f64, max: f64, limit: usize) -> Vec<(Str, f64)> {
        let mut out = Vec::new();
        if limit > 0 {
            self.zwalk(min, max, |m, s| {
                out.push((m, s));
                out.len() < limit
            });
        }
        out
    }

    /// Removes `member` from this list (its first occurrence from the head), one effect `LREM
    /// key 1 member`: the key API has no such call, so the server's own LREM runs it (O(N),
    /// as LREM is); replicated only when it removed one.
    pub fn lrem(&self, member: StrRef<'_>) -> Result<(), Refusal> {
        self.lrem_counting(one(), member)
    }

    /// Removes `member`'s occurrence nearest the tail, one effect `LREM key -1 member`: it
    /// stops where it finds it (after `near_tail`, within the window).
    pub fn lrem_from_tail(&self, member: StrRef<'_>) -> Result<(), Refusal> {
        static MINUS_ONE: Lit = Lit::new(c"-1");
        self.lrem_counting(&MINUS_ONE, member)
    }

    /// `LREM key count member` through the server's own command; its effect only when it
    /// removed one. The command runs by the key's name, beside this handle: it must not be
    /// the one to delete the key (see `lrem_only`), and no read by position (`lindex`) may
    /// come before it on this handle, whose cursor would then point into the changed list.
    fn lrem_counting(&self, count: &Lit, member: StrRef<'_>) -> Result<(), Refusal> {
        self.writes();
        if self.len() == 1 {
            return self.lrem_only(count, member);
        }
        // The server's LREM deletes a key it empties under every handle of the call, this one
        // too; only a longer list comes here, and the audit stops a change that sends one.
        self.audit_deleting(1, true);
        let (count, member) = (count.raw(), member.raw());
        let (Some(call), Some(int), Some(free)) =
            (api!(RedisModule_Call), api!(RedisModule_CallReplyInteger), api!(RedisModule_FreeCallReply))
        else {
            return Err(crate::errors::host_reply());
        };
        // SAFETY: live ctx, key name and member; the reply is freed once.
        let removed = unsafe {
            let r = call(self.ctx, c"LREM".as_ptr(), c"sss".as_ptr(), self.name(), count, member);
            if r.is_null() {
                return Err(crate::errors::host_reply());
            }
            let n = int(r);
            free(r);
            n
        };
        if removed > 0 {
            replicate(self.ctx, c"LREM", &[self.name(), count, member]);
        }
        Ok(())
    }

    /// A list of one emptied through this handle when its element is `member`. The server's
    /// LREM would delete the emptied key under the handle, which would then point at freed
    /// memory (closing it reads it); a pop through the handle deletes the key and tells the
    /// handle. A longer list keeps its key: LREM takes one element of it.
    fn lrem_only(&self, count: &Lit, member: StrRef<'_>) -> Result<(), Refusal> {
        let only = self.range(c"LRANGE", 0, 0, None)?;
        if only.first().map(Vec::as_slice) != Some(super::strings::bytes_of(member.raw())) {
            return Ok(());
        }
        let (Some(k), Some(pop)) = (self.live(), api!(RedisModule_ListPop)) else {
            return Err(crate::errors::host_reply());
        };
        self.audit_deleting(1, false);
        // SAFETY: a writable list key of one element; the popped string is ours (freed as it
        // drops).
        if Str::adopt(self.ctx, unsafe { pop(k, raw::REDISMODULE_LIST_TAIL as c_int) }).is_none() {
            return Err(crate::errors::host_reply());
        }
        replicate(self.ctx, c"LREM", &[self.name(), count.raw(), member.raw()]);
        Ok(())
    }

    /// Whether `member` is among the `window` elements nearest the tail (where CLAIM takes
    /// from): `LPOS … RANK -1 MAXLEN window`, work bounded by the window, not the list.
    pub fn near_tail(&self, member: StrRef<'_>, window: i64) -> Result<bool, Refusal> {
        self.reads();
        let member = member.raw();
        let (Some(call), Some(kind), Some(free)) =
            (api!(RedisModule_Call), api!(RedisModule_CallReplyType), api!(RedisModule_FreeCallReply))
        else {
            return Err(crate::errors::host_reply());
        };
        // SAFETY: live ctx, key name and member; the reply is freed once.
        unsafe {
            let r = call(
                self.ctx,
                c"LPOS".as_ptr(),
                c"sscccl".as_ptr(),
                self.name(),
                member,
                c"RANK".as_ptr(),
                c"-1".as_ptr(),
                c"MAXLEN".as_ptr(),
                window as std::os::raw::c_longlong,
            );
            if r.is_null() {
                return Err(crate::errors::host_reply());
            }
            let found = kind(r) == raw::REDISMODULE_REPLY_INTEGER as c_int;
            free(r);
            Ok(found)
        }
    }

    /// The list element at `index` (negative from the tail), if any.
    pub fn lindex(&self, index: i64) -> Option<Str> {
        self.reads();
        let (k, f) = (self.live()?, api!(RedisModule_ListGet)?);
        // SAFETY: a live list key; the element is a new string we own (NULL out of range).
        let p = unsafe { f(k, index as std::os::raw::c_long) };
        Str::adopt(self.ctx, p)
    }

    // ---- streams ----

    /// XADD with an id the server picks; the effect carries that id, so a replica holds the
    /// same entry. Returns the id as `ms-seq`.
    pub fn xadd(&self, fields: &[StrRef<'_>]) -> Result<Str, Refusal> {
        let (ms, seq) = self.stream_add(fields)?;
        let id = s(self.ctx, &stream_id(ms, seq))?;
        self.replicate_xadd(&id, fields);
        Ok(id)
    }

    /// XADD when the caller needs no id: with no receiver of effects, no id string is made.
    pub fn xadd_quiet(&self, fields: &[StrRef<'_>]) -> Result<(), Refusal> {
        let (ms, seq) = self.stream_add(fields)?;
        if super::effects::build() {
            let id = s(self.ctx, &stream_id(ms, seq))?;
            self.replicate_xadd(&id, fields);
        } else {
            super::effects::skip(self.ctx);
        }
        Ok(())
    }

    fn stream_add(&self, fields: &[StrRef<'_>]) -> Result<(u64, u64), Refusal> {
        self.writes();
        let k = self.live().ok_or_else(crate::errors::host_reply)?;
        let Some(f) = api!(RedisModule_StreamAdd) else { return Err(crate::errors::host_reply()) };
        let mut id = RedisModuleStreamID { ms: 0, seq: 0 };
        let mut argv: Effect = fields.iter().map(|f| f.raw()).collect();
        // SAFETY: writable stream (or empty) key; argv holds field/value pairs.
        let rc = unsafe {
            f(
                k,
                raw::REDISMODULE_STREAM_ADD_AUTOID as c_int,
                &mut id,
                argv.as_mut_ptr(),
                (fields.len() / 2) as i64,
            )
        };
        if rc != raw::REDISMODULE_OK as c_int {
            return Err(crate::errors::host_reply());
        }
        Ok((id.ms, id.seq))
    }

    fn replicate_xadd(&self, id: &Str, fields: &[StrRef<'_>]) {
        let mut effect = Effect::new();
        effect.push(self.name());
        effect.push(id.raw());
        effect.extend(fields.iter().map(|f| f.raw()));
        replicate(self.ctx, c"XADD", &effect);
    }

    /// `MAXLEN ~ cap`, replicated as its exact outcome: `XTRIM key MAXLEN = <length left>`.
    pub fn xtrim_approx(&self, cap: i64) -> Result<(), Refusal> {
        self.writes();
        let (Some(k), Some(f)) = (self.live(), api!(RedisModule_StreamTrimByLength)) else { return Ok(()) };
        // SAFETY: writable stream key.
        let removed = unsafe { f(k, raw::REDISMODULE_STREAM_TRIM_APPROX as c_int, cap) };
        if removed > 0 && !super::effects::build() {
            super::effects::skip(self.ctx);
        } else if removed > 0 {
            static MAXLEN: Lit = Lit::new(c"MAXLEN");
            static EXACT: Lit = Lit::new(c"=");
            let left = Str::int(self.ctx, self.len() as i64).ok_or_else(crate::errors::host_reply)?;
            replicate(self.ctx, c"XTRIM", &[self.name(), MAXLEN.raw(), EXACT.raw(), left.raw()]);
        }
        Ok(())
    }

    // ---- expiry ----

    /// The key's expiry, an absolute time in ms; None when it has none (or is absent).
    pub fn expires_at(&self) -> Option<i64> {
        self.reads();
        let (k, f) = (self.live()?, api!(RedisModule_GetAbsExpire)?);
        // SAFETY: live key handle.
        let at = unsafe { f(k) };
        (at >= 0).then_some(at)
    }

    /// The key's expiry dropped: it lives until deleted. Replicated as `PERSIST`.
    pub fn persist(&self) -> Result<(), Refusal> {
        self.writes();
        let k = self.live().ok_or_else(crate::errors::host_reply)?;
        if let Some(f) = api!(RedisModule_SetAbsExpire) {
            // SAFETY: writable existing key; NO_EXPIRE removes its expiry.
            unsafe { f(k, raw::REDISMODULE_NO_EXPIRE as i64) };
        }
        replicate(self.ctx, c"PERSIST", &[self.name()]);
        Ok(())
    }

    pub fn set_abs_expire(&self, at_ms: i64) -> Result<(), Refusal> {
        self.writes();
        let k = self.live().ok_or_else(crate::errors::host_reply)?;
        if let Some(f) = api!(RedisModule_SetAbsExpire) {
            // SAFETY: writable existing key.
            unsafe { f(k, at_ms) };
        }
        let at = Str::int(self.ctx, at_ms).ok_or_else(crate::errors::host_reply)?;
        replicate(self.ctx, c"PEXPIREAT", &[self.name(), at.raw()]);
        Ok(())
    }
}

/// PUBLISH of `message` on `channel`. The module API delivers to this server's subscribers
/// (and the cluster bus) but never to replicas, so the publish is also replicated as a
/// `PUBLISH` effect: a replica's subscribers get it, an AOF replay delivers it to no one.
/// The caller's channel permission is the verb's to check first (`Caller::publish`): the
/// API skips it. Returns the receivers on this server.
pub fn publish(ctx: Ctx<'_>, channel: StrRef<'_>, message: StrRef<'_>) -> Result<i64, Refusal> {
    let (ctx, channel, message) = (ctx.raw(), channel.raw(), message.raw());
    let f = api!(RedisModule_PublishMessage).ok_or_else(crate::errors::host_reply)?;
    // SAFETY: live ctx and strings; the server copies what it keeps.
    let receivers = unsafe { f(ctx, channel, message) };
    replicate(ctx, c"PUBLISH", &[channel, message]);
    Ok(i64::from(receivers))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn stream_ids_are_written_as_the_server_writes_them(ms in any::<u64>(), seq in any::<u64>()) {
            let (got, want) = (super::stream_id(ms, seq), format!("{ms}-{seq}"));
            prop_assert_eq!(got.as_slice(), want.as_bytes());
        }
    }

    #[test]
    fn stream_id_edges() {
        for (ms, seq) in [(0, 0), (9, 10), (u64::MAX, u64::MAX), (1_764_500_000_000, 1)] {
            assert_eq!(super::stream_id(ms, seq).as_slice(), format!("{ms}-{seq}").as_bytes());
        }
    }
}
