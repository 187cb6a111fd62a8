//! The handle audit (`trafikey.audit-handles`, off by default): a check that no call deletes,
//! or replaces the value of, a key that another open handle of the same call holds. The server
//! reads the value a handle opened when it closes it, so such a handle would read freed memory:
//! a module bug that corrupts the database without a crash a test would see. With the audit on,
//! every open handle is recorded by its key's name; a deletion or a replacement through one
//! handle while another holds the same value logs the key at warning level and stops the
//! server (abort), so the suite's tests, the model test and the fuzzer fail at the call that
//! did it. On, it costs a record per key opened; off, a flag read per open (a handle keeps it
//! for its close and its operations).
//!
//! With the audit on it also keeps the trace of the last command call: each key the call
//! opened, read, wrote or had ACL-checked as the caller (`Did`), which `INFO trafikey` shows
//! (`audit_last_call`). A test compares it with what the command declares and checks
//! (tests/access.rs): it is what the call did, observed, not what its declaration says.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::os::raw::c_char;

use valkey_module::raw::{RedisModuleCtx, RedisModuleKey, RedisModuleString};

use crate::config;

/// The open handles of the running call, each with its key's name. Pure bookkeeping: the
/// conflict rule is here, tested without a server.
#[derive(Default)]
pub struct Handles {
    open: Vec<(usize, Vec<u8>)>,
}

impl Handles {
    pub fn opened(&mut self, handle: usize, name: &[u8]) {
        self.open.push((handle, name.to_vec()));
    }

    pub fn closed(&mut self, handle: usize) {
        if let Some(i) = self.open.iter().rposition(|(h, _)| *h == handle) {
            self.open.swap_remove(i);
        }
    }

    /// The handles other than `handle` open on the key `name`.
    pub fn others<'a>(&'a self, handle: usize, name: &'a [u8]) -> impl Iterator<Item = usize> + 'a {
        self.open.iter().filter(move |(h, n)| *h != handle && n.as_slice() == name).map(|(h, _)| *h)
    }

    pub fn is_empty(&self) -> bool {
        self.open.is_empty()
    }
}

/// What a call did to one key: a set of these bits.
pub struct Did;

impl Did {
    pub const OPEN_READ: u8 = 1;
    pub const OPEN_WRITE: u8 = 1 << 1;
    /// Read its data (a value, a field, members, a range, its expiry, whether a member is
    /// there — a removal or an update that answers it reads that): what ACL calls access. Its
    /// type, whether it exists and how many elements it holds are not reads (as the server's
    /// own TYPE, EXISTS and LLEN need no read permission).
    pub const READ: u8 = 1 << 2;
    /// Changed it, or asked to: a removal of something that was not there is still a write,
    /// one of nothing is none.
    pub const WRITE: u8 = 1 << 3;
    /// Passed the caller's ACL check for a found key, with this access (`Caller::key`).
    pub const CHECK_READ: u8 = 1 << 4;
    pub const CHECK_UPDATE: u8 = 1 << 5;
    pub const CHECK_WRITE: u8 = 1 << 6;

    const WORDS: [(u8, &'static str); 7] = [
        (Did::OPEN_READ, "open-read"),
        (Did::OPEN_WRITE, "open-write"),
        (Did::READ, "read"),
        (Did::WRITE, "write"),
        (Did::CHECK_READ, "check-read"),
        (Did::CHECK_UPDATE, "check-update"),
        (Did::CHECK_WRITE, "check-write"),
    ];
}

/// The keys one command call touched, each with what it did to it, in the order first
/// touched. `call` is the number of command calls served when it began: a record made under a
/// later number starts a new trace, so nothing needs doing at a call's start.
#[derive(Default)]
pub struct Trace {
    call: u64,
    keys: Vec<(Vec<u8>, u8)>,
    /// Each key's place in `keys`: a call may touch thousands (a batch at its cap).
    at: BTreeMap<Vec<u8>, usize>,
}

impl Trace {
    pub fn note(&mut self, call: u64, name: &[u8], did: u8) {
        if call != self.call {
            self.call = call;
            self.keys.clear();
            self.at.clear();
        }
        match self.at.get(name).and_then(|&i| self.keys.get_mut(i)) {
            Some((_, d)) => *d |= did,
            None => {
                self.at.insert(name.to_vec(), self.keys.len());
                self.keys.push((name.to_vec(), did));
            }
        }
    }

    /// `n key=did,did key=did ...`: the number of the last call, `call`, then the keys it
    /// touched (none when the trace is an earlier call's). In a key's name a space, `=`, `,`,
    /// `\` and bytes outside printable ASCII are `\xHH`.
    pub fn render(&self, call: u64) -> String {
        let mut out = call.to_string();
        if call != self.call {
            return out;
        }
        for (name, did) in &self.keys {
            out.push(' ');
            for &b in name {
                if b.is_ascii_graphic() && !matches!(b, b'=' | b',' | b'\\') {
                    out.push(char::from(b));
                } else {
                    out.push_str(&format!("\\x{b:02x}"));
                }
            }
            out.push('=');
            let words: Vec<&str> =
                Did::WORDS.iter().filter(|(bit, _)| did & bit != 0).map(|(_, w)| *w).collect();
            out.push_str(&words.join(","));
        }
        out
    }
}

thread_local! {
    static OPEN: RefCell<Handles> = const { RefCell::new(Handles { open: Vec::new() }) };
    static TRACE: RefCell<Trace> = const { RefCell::new(Trace { call: 0, keys: Vec::new(), at: BTreeMap::new() }) };
}

/// Whether the audit is on: the one thing every key open and close pays, inlined; the rest
/// is out of line.
#[inline(always)]
pub(in crate::host) fn on() -> bool {
    config::get_bool(&config::AUDIT_HANDLES)
}

/// Records a handle just opened (`write`: for writing), in the open handles and the call's
/// trace. Called when the audit is on.
#[cold]
pub(in crate::host) fn opened(handle: *mut RedisModuleKey, name: *mut RedisModuleString, write: bool) {
    let name = super::strings::bytes_of(name);
    OPEN.with(|o| {
        if let Ok(mut o) = o.try_borrow_mut() {
            o.opened(handle as usize, name);
        }
    });
    did(name, if write { Did::OPEN_WRITE } else { Did::OPEN_READ });
}

/// Adds to the call's trace what it did to the key `name` (`Did` bits). Called when the
/// audit is on.
#[cold]
pub(in crate::host) fn did(name: &[u8], did: u8) {
    let call = crate::metrics::calls_served();
    TRACE.with(|t| {
        if let Ok(mut t) = t.try_borrow_mut() {
            t.note(call, name, did);
        }
    });
}

/// The last command call's trace as `Trace::render` writes it, while the audit is on.
pub fn last_call() -> Option<String> {
    if !on() {
        return None;
    }
    let call = crate::metrics::calls_served();
    Some(TRACE.with(|t| t.try_borrow().map(|t| t.render(call)).unwrap_or_default()))
}

/// Forgets a handle as it closes. The flag cannot change between a handle's open and its
/// close: both happen in one call (or one timer or unblock callback), and only a command
/// sets a config. Called when the audit is on.
#[cold]
pub(in crate::host) fn closed(handle: *mut RedisModuleKey) {
    OPEN.with(|o| {
        if let Ok(mut o) = o.try_borrow_mut() {
            o.closed(handle as usize);
        }
    });
}

/// Called before `handle` deletes the key `name` or replaces its value (`by_server`: before a
/// command the server runs by the key's name, which may do so under every handle, `handle`
/// too): stops the server if another open handle of the call holds that value (a handle opened
/// for writing on an absent key, which has created nothing, holds none).
#[cold]
pub(in crate::host) fn deleting(
    ctx: *mut RedisModuleCtx,
    handle: *mut RedisModuleKey,
    name: &[u8],
    by_server: bool,
) {
    let Some(kind) = api!(RedisModule_KeyType) else { return };
    let spared = if by_server { 0 } else { handle as usize };
    let held = OPEN.with(|o| {
        o.try_borrow().is_ok_and(|o| {
            o.others(spared, name).any(|h| {
                // SAFETY: an open handle of this call (closing forgets it), whose value is
                // still there: the deletion has not happened yet.
                (unsafe { kind(h as *mut RedisModuleKey) }) as isize
                    != valkey_module::raw::REDISMODULE_KEYTYPE_EMPTY
            })
        })
    });
    if !held {
        return;
    }
    let text = format!(
        "trafikey audit-handles: key '{}' deleted or replaced while another handle of the call holds it\0",
        String::from_utf8_lossy(name).replace('\0', "\\0")
    );
    if let Some(log) = api!(RedisModule_Log) {
        // SAFETY: live ctx; a NUL-terminated format with one %s and its NUL-terminated argument.
        unsafe { log(ctx, c"warning".as_ptr(), c"%s".as_ptr(), text.as_ptr().cast::<c_char>()) };
    }
    std::process::abort();
}

#[cfg(test)]
mod tests {
    use super::{Did, Handles, Trace};

    #[test]
    fn a_key_is_shared_only_while_another_handle_holds_it() {
        let mut h = Handles::default();
        let others = |h: &Handles, handle, name: &[u8]| h.others(handle, name).collect::<Vec<_>>();
        h.opened(1, b"emq:{q}:job:A");
        assert_eq!(others(&h, 1, b"emq:{q}:job:A"), [0usize; 0], "its own handle is not another");
        h.opened(2, b"emq:{q}:job:B");
        assert_eq!(others(&h, 1, b"emq:{q}:job:A"), [0usize; 0], "another key is not the same key");
        h.opened(3, b"emq:{q}:job:A");
        assert_eq!(others(&h, 1, b"emq:{q}:job:A"), [3]);
        assert_eq!(others(&h, 3, b"emq:{q}:job:A"), [1]);
        h.closed(3);
        assert_eq!(others(&h, 1, b"emq:{q}:job:A"), [0usize; 0], "a closed handle holds nothing");
        h.closed(1);
        h.closed(2);
        assert!(h.is_empty());
    }

    #[test]
    fn a_trace_is_its_call_s_keys_each_with_what_it_did() {
        let mut t = Trace::default();
        t.note(7, b"emq:{q}:job:A", Did::OPEN_WRITE);
        t.note(7, b"emq:{q}:job:A", Did::READ | Did::CHECK_UPDATE);
        t.note(7, b"a b=c,\\\xff", Did::WRITE);
        assert_eq!(
            t.render(7),
            "7 emq:{q}:job:A=open-write,read,check-update a\\x20b\\x3dc\\x2c\\x5c\\xff=write"
        );
        assert_eq!(t.render(8), "8", "a later call touched no key");
        t.note(9, b"k", Did::OPEN_READ);
        assert_eq!(t.render(9), "9 k=open-read", "a later call's record starts a new trace");
    }

    #[test]
    fn closing_an_unknown_handle_forgets_nothing() {
        let mut h = Handles::default();
        h.opened(1, b"k");
        h.closed(9);
        assert_eq!(h.others(2, b"k").collect::<Vec<_>>(), [1]);
    }
}
