//! The handle audit (`trafikey.audit-handles`, off by default): a check that no call deletes,
//! or replaces the value of, a key that another open handle of the same call holds. The server
//! reads the value a handle opened when it closes it, so such a handle would read freed memory:
//! a module bug that corrupts the database without a crash a test would see. With the audit on,
//! every open handle is recorded by its key's name; a deletion or a replacement through one
//! handle while another holds the same value logs the key at warning level and stops the
//! server (abort), so the suite's tests, the model test and the fuzzer fail at the call that
//! did it. On, it costs a record per key opened; off, a flag read per open and per close.

use std::cell::RefCell;
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

thread_local! {
    static OPEN: RefCell<Handles> = const { RefCell::new(Handles { open: Vec::new() }) };
}

/// Whether the audit is on: the one thing every key open and close pays, inlined; the rest
/// is out of line.
#[inline(always)]
pub(in crate::host) fn on() -> bool {
    config::get_bool(&config::AUDIT_HANDLES)
}

/// Records a handle just opened. Called when the audit is on.
#[cold]
pub(in crate::host) fn opened(handle: *mut RedisModuleKey, name: *mut RedisModuleString) {
    OPEN.with(|o| {
        if let Ok(mut o) = o.try_borrow_mut() {
            o.opened(handle as usize, super::strings::bytes_of(name));
        }
    });
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
    use super::Handles;

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
    fn closing_an_unknown_handle_forgets_nothing() {
        let mut h = Handles::default();
        h.opened(1, b"k");
        h.closed(9);
        assert_eq!(h.others(2, b"k").collect::<Vec<_>>(), [1]);
    }
}
