//! Server strings: borrowed views of the call's arguments and owned strings the module makes,
//! and `StrRef`, the borrowed handle the key API takes: code above the host never holds the
//! server's pointer itself.

use std::marker::PhantomData;
use std::os::raw::c_char;
use std::ptr::NonNull;

use valkey_module::raw::{RedisModuleCtx, RedisModuleString};

/// A server string owned by something else — a call's argument (`ArgStr`), a `Str`, a `Lit`
/// — borrowed for `'a`, so it cannot outlive its owner. Only the host reads the pointer
/// inside; it is the pointer and nothing more, so passing one costs what passing the
/// pointer did.
#[derive(Clone, Copy, Debug)]
#[repr(transparent)]
pub struct StrRef<'a> {
    ptr: *mut RedisModuleString,
    owner: PhantomData<&'a RedisModuleString>,
}

impl StrRef<'static> {
    /// No server string behind it (a detached argument's, a constant the server could not
    /// make): a write of one refuses.
    pub const MISSING: StrRef<'static> = StrRef::of(std::ptr::null_mut());
}

impl<'a> StrRef<'a> {
    /// The caller vouches that `ptr` lives for `'a` (or is NULL).
    #[inline(always)]
    pub(in crate::host) const fn of(ptr: *mut RedisModuleString) -> StrRef<'a> {
        StrRef { ptr, owner: PhantomData }
    }

    #[inline(always)]
    pub(in crate::host) fn raw(self) -> *mut RedisModuleString {
        self.ptr
    }

    /// Whether there is no server string behind it (`MISSING`).
    #[inline(always)]
    pub fn is_missing(self) -> bool {
        self.ptr.is_null()
    }
}

/// A server string: owned (freed on drop), or one of the shared constants for small numbers.
pub struct Str {
    ctx: *mut RedisModuleCtx,
    ptr: NonNull<RedisModuleString>,
    owned: bool,
}

/// The numbers 0..=15 as constant strings: attempt counts and the like, written with every
/// job, cost no allocation.
static SMALL: [Lit; 16] = [
    Lit::new(c"0"),
    Lit::new(c"1"),
    Lit::new(c"2"),
    Lit::new(c"3"),
    Lit::new(c"4"),
    Lit::new(c"5"),
    Lit::new(c"6"),
    Lit::new(c"7"),
    Lit::new(c"8"),
    Lit::new(c"9"),
    Lit::new(c"10"),
    Lit::new(c"11"),
    Lit::new(c"12"),
    Lit::new(c"13"),
    Lit::new(c"14"),
    Lit::new(c"15"),
];

/// The constant server string `1` (a flag's value, a count).
pub fn one() -> &'static Lit {
    let [_, one, ..] = &SMALL;
    one
}

impl Str {
    pub(in crate::host) fn new(ctx: *mut RedisModuleCtx, bytes: &[u8]) -> Option<Str> {
        let create = api!(RedisModule_CreateString)?;
        // SAFETY: bytes is a live slice; the server copies it.
        let p = unsafe { create(ctx, bytes.as_ptr().cast::<c_char>(), bytes.len()) };
        Str::adopt(ctx, p)
    }

    pub(in crate::host) fn int(ctx: *mut RedisModuleCtx, v: i64) -> Option<Str> {
        if let Some(lit) = usize::try_from(v).ok().and_then(|i| SMALL.get(i)) {
            return NonNull::new(lit.raw()).map(|ptr| Str { ctx, ptr, owned: false });
        }
        let create = api!(RedisModule_CreateStringFromLongLong)?;
        // SAFETY: plain value in, new string out.
        let p = unsafe { create(ctx, v) };
        Str::adopt(ctx, p)
    }

    /// Take ownership of a string the server handed out (e.g. a hash value or list element).
    pub(in crate::host) fn adopt(ctx: *mut RedisModuleCtx, p: *mut RedisModuleString) -> Option<Str> {
        NonNull::new(p).map(|ptr| Str { ctx, ptr, owned: true })
    }

    /// Another handle on the same server string: a reference, not a copy (None only if the
    /// server lacks the call).
    pub fn share(&self) -> Option<Str> {
        if self.owned {
            let retain = api!(RedisModule_RetainString)?;
            // SAFETY: a live string; the new handle owns the reference taken here and frees it.
            unsafe { retain(self.ctx, self.ptr.as_ptr()) };
        }
        Some(Str { ctx: self.ctx, ptr: self.ptr, owned: self.owned })
    }

    /// This string, borrowed.
    #[inline(always)]
    pub fn str_ref(&self) -> StrRef<'_> {
        StrRef::of(self.ptr.as_ptr())
    }

    #[inline(always)]
    pub(in crate::host) fn raw(&self) -> *mut RedisModuleString {
        self.ptr.as_ptr()
    }

    pub fn bytes(&self) -> &[u8] {
        bytes_of(self.ptr.as_ptr())
    }
}

impl Drop for Str {
    fn drop(&mut self) {
        if let (true, Some(free)) = (self.owned, api!(RedisModule_FreeString)) {
            // SAFETY: we own this string and free it once.
            unsafe { free(self.ctx, self.ptr.as_ptr()) }
        }
    }
}

/// The bytes of a server string, valid while the string lives.
pub(in crate::host) fn bytes_of<'a>(s: *mut RedisModuleString) -> &'a [u8] {
    let Some(ptr_len) = api!(RedisModule_StringPtrLen) else { return &[] };
    if s.is_null() {
        return &[];
    }
    let mut len = 0usize;
    // SAFETY: s is a live server string; the returned pointer stays valid while it lives,
    // which the callers guarantee by the lifetime they choose ('a is bounded by the call).
    unsafe {
        let p = ptr_len(s, &mut len);
        if p.is_null() {
            &[]
        } else {
            std::slice::from_raw_parts(p.cast::<u8>(), len)
        }
    }
}

/// A constant server string, made once (on first use, on the main thread) and kept for the
/// process's life: field names, state and event words, the fence key. Spares every call the
/// allocations of making them again. The server only ever reads or shares such a string.
pub struct Lit {
    text: &'static std::ffi::CStr,
    ptr: std::sync::atomic::AtomicPtr<RedisModuleString>,
}

impl Lit {
    pub const fn new(text: &'static std::ffi::CStr) -> Lit {
        Lit { text, ptr: std::sync::atomic::AtomicPtr::new(std::ptr::null_mut()) }
    }

    pub fn bytes(&self) -> &'static [u8] {
        self.text.to_bytes()
    }

    pub fn c(&self) -> &'static std::ffi::CStr {
        self.text
    }

    /// The server string, borrowed (`StrRef::MISSING` only if the server could not make it,
    /// which callers treat as a host failure).
    #[inline(always)]
    pub fn str_ref(&self) -> StrRef<'_> {
        StrRef::of(self.raw())
    }

    /// The server string (NULL only if the server could not make it).
    pub(in crate::host) fn raw(&self) -> *mut RedisModuleString {
        use std::sync::atomic::Ordering;
        let p = self.ptr.load(Ordering::Relaxed);
        if !p.is_null() {
            return p;
        }
        let Some(create) = api!(RedisModule_CreateString) else { return p };
        let b = self.bytes();
        // SAFETY: a NULL context makes a string owned by no call; we keep it forever.
        let made = unsafe { create(std::ptr::null_mut(), b.as_ptr().cast::<c_char>(), b.len()) };
        self.ptr.store(made, Ordering::Relaxed);
        made
    }
}
