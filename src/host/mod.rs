//! The server glue and nothing else: how a call is served (the order of checks), the fence,
//! the caller, the clock, the key API with its effects, replies and registration. The verbs
//! above it are written in the wire's terms.
//!
//! Raw pointers here are the server's own handles (context, strings, keys) for the duration of
//! one call; the host is the boundary that holds them, so its functions take them plainly.
//! Above it they are `StrRef` and `Ctx`, borrowed from their owners: the server's types are
//! disallowed everywhere else (clippy.toml), allowed here.
#![allow(clippy::not_unsafe_ptr_arg_deref, clippy::disallowed_types)]

/// A server API function pointer. The crate keeps them in `static mut`s written once at
/// load, before any command runs; reading one is a plain copy.
macro_rules! api {
    ($name:ident) => {{
        // SAFETY: written once by the module's init, only read afterwards.
        #[allow(unused_unsafe)]
        let f = unsafe { valkey_module::raw::$name };
        f
    }};
}

pub mod alloc;
pub mod audit;
pub mod blocking;
pub mod caller;
pub mod command;
pub mod compat;
pub mod effects;
pub mod events;
pub mod register;
pub mod reply;
pub mod store;
pub mod strings;
pub mod timer;

use std::os::raw::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;

use valkey_module::raw::{self, RedisModuleCtx, RedisModuleString};

pub use caller::{Access, Caller};
pub use reply::Reply;
use store::Name;
pub use store::{publish, Key, Kind};
use strings::bytes_of;
pub use strings::{one, Lit, Str, StrRef};

use crate::domain::{self, Stored};
use crate::errors::{self, Refusal};
use crate::keyspace::{self, Role};
use crate::metrics;
use command::{Command, Form, KeyRole};

/// A verb in the wire's terms: its argument shape, then its domain step. `drive` runs them
/// in the order of checks around the host's own: shape, layout, fence, domain.
pub trait Verb {
    type Args<'a>;
    /// Shape: the arguments after the keys; no server access, no range checks. A refusal of
    /// `Refusal::Usage` is answered with the command's synopsis.
    fn shape<'a>(args: &[ArgStr<'a>]) -> Result<Self::Args<'a>, Refusal>;
    /// Shape of a command with a tail of keys (`Command::tail`), which carried `keys` of them.
    fn shape_tail<'a>(args: &[ArgStr<'a>], keys: usize) -> Result<Self::Args<'a>, Refusal> {
        let _ = keys;
        Self::shape(args)
    }
    /// Domain: runs after layout and fence; reads and checks everything before it writes.
    fn run<'a>(x: &mut Exec<'a>, args: Self::Args<'a>) -> Result<Reply, Refusal>;
}

/// A verb's argument shape alone, its value dropped: what `Command::shape` holds.
pub fn shape_only<V: Verb>(args: &[ArgStr]) -> Result<(), Refusal> {
    V::shape(args).map(|_| ())
}

/// shape → layout → fence → domain, for every command.
pub fn drive<'a, V: Verb>(x: &mut Exec<'a>, cmd: &'static Command) -> Result<Reply, Refusal> {
    x.numkeys(cmd)?;
    let rest = x.rest();
    let args =
        V::shape_tail(&rest, x.tail_len).map_err(|e| if e == Refusal::Usage { cmd.usage() } else { e })?;
    x.layout(cmd)?;
    if cmd.fenced {
        x.fence()?;
    }
    V::run(x, args)
}

/// The server's context of a call (or of the module's timer), borrowed for `'a`: what the
/// host's calls outside a verb's `Exec` take. Only the host reads the pointer inside.
#[derive(Clone, Copy)]
#[repr(transparent)]
pub struct Ctx<'a> {
    ptr: *mut RedisModuleCtx,
    call: std::marker::PhantomData<&'a RedisModuleCtx>,
}

impl<'a> Ctx<'a> {
    /// The caller vouches that `ptr` is live for `'a`.
    #[inline(always)]
    pub(in crate::host) fn of(ptr: *mut RedisModuleCtx) -> Ctx<'a> {
        Ctx { ptr, call: std::marker::PhantomData }
    }

    #[inline(always)]
    pub(in crate::host) fn raw(self) -> *mut RedisModuleCtx {
        self.ptr
    }

    /// A new server string holding `bytes`, owned by the module (None only if the server
    /// could not make it).
    pub fn string(self, bytes: &[u8]) -> Option<Str> {
        Str::new(self.ptr, bytes)
    }
}

impl<'a> From<&'a valkey_module::Context> for Ctx<'a> {
    fn from(ctx: &'a valkey_module::Context) -> Ctx<'a> {
        Ctx::of(ctx.ctx)
    }
}

/// An argument after the keys, as it arrived: its bytes, and the server string that holds
/// them, so a verb stores a name or a payload without copying it.
#[derive(Clone, Copy, Debug)]
pub struct ArgStr<'a> {
    bytes: &'a [u8],
    string: StrRef<'a>,
}

impl<'a> ArgStr<'a> {
    /// Bytes with no server string behind them (shape tests): every write of one refuses.
    pub const fn detached(bytes: &'a [u8]) -> ArgStr<'a> {
        ArgStr { bytes, string: StrRef::MISSING }
    }

    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The server string it arrived in, borrowed for the call (`StrRef::MISSING` when
    /// detached).
    #[inline(always)]
    pub fn str_ref(&self) -> StrRef<'a> {
        self.string
    }
}

impl std::ops::Deref for ArgStr<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.bytes
    }
}

impl AsRef<[u8]> for ArgStr<'_> {
    fn as_ref(&self) -> &[u8] {
        self.bytes
    }
}

/// One call in progress.
pub struct Exec<'a> {
    ctx: *mut RedisModuleCtx,
    argv: &'a [*mut RedisModuleString],
    cmd: &'static Command,
    /// Index in argv of the first argument after the keys.
    first_arg: usize,
    /// Where the tail of keys begins in argv, and how many it has (`Command::tail`).
    tail_at: usize,
    tail_len: usize,
    /// The queue all declared keys share, and the suffix of the `job:`/`fails:` key.
    pub queue: &'a [u8],
    pub id: &'a [u8],
    /// The state set a `StateSet` key named.
    pub set: Option<Role>,
    now: std::cell::Cell<Option<i64>>,
    caller: Option<Caller>,
    /// The context's flags, read once per call.
    flags: c_int,
}

impl<'a> Exec<'a> {
    fn new(ctx: *mut RedisModuleCtx, argv: &'a [*mut RedisModuleString], cmd: &'static Command) -> Exec<'a> {
        // SAFETY: live ctx.
        let flags = api!(RedisModule_GetContextFlags).map_or(0, |f| unsafe { f(ctx) });
        effects::begin(ctx, flags);
        Exec {
            ctx,
            argv,
            cmd,
            first_arg: 1,
            tail_at: 0,
            tail_len: 0,
            queue: b"",
            id: b"",
            set: None,
            now: std::cell::Cell::new(None),
            caller: None,
            flags,
        }
    }

    /// The call's context.
    pub fn ctx(&self) -> Ctx<'a> {
        Ctx::of(self.ctx)
    }

    fn arg(&self, i: usize) -> &'a [u8] {
        self.argv.get(i).map_or(&[][..], |&p| bytes_of(p))
    }

    /// The arguments after the declared keys (a handful: on the stack).
    fn rest(&self) -> smallvec::SmallVec<[ArgStr<'a>; 12]> {
        self.argv
            .iter()
            .skip(self.first_arg)
            .map(|&p| ArgStr { bytes: bytes_of(p), string: StrRef::of(p) })
            .collect()
    }

    /// The declared key with this role, as the server string it arrived in. A role the
    /// command does not declare is a bug in its verb, answered as a host failure.
    #[inline]
    pub fn key_name(&self, role: impl Into<KeyRole>) -> Result<StrRef<'a>, Refusal> {
        self.key_arg(role.into()).map(StrRef::of)
    }

    /// `key_name`'s pointer, for the host's own calls.
    #[inline]
    fn key_arg(&self, role: KeyRole) -> Result<*mut RedisModuleString, Refusal> {
        let i = self.cmd.position(role).ok_or_else(errors::host_reply)?;
        self.argv.get(i.saturating_add(2)).copied().ok_or_else(errors::host_reply)
    }

    /// Opens the declared key with this role for reading.
    pub fn read(&self, role: impl Into<KeyRole>) -> Result<Key, Refusal> {
        Ok(Key::open(self.ctx, Name::Arg(self.key_arg(role.into())?), false))
    }

    /// Opens the declared key with this role for writing.
    pub fn write(&self, role: impl Into<KeyRole>) -> Result<Key, Refusal> {
        Ok(Key::open(self.ctx, Name::Arg(self.key_arg(role.into())?), true))
    }

    /// Opens the declared key with this role for writing; it must be absent or of `kind`.
    pub fn open_as(&self, role: impl Into<KeyRole>, kind: Kind) -> Result<Key, Refusal> {
        let k = self.write(role)?;
        k.exists_as(kind)?;
        Ok(k)
    }

    /// A key of this queue the caller did not declare: ACL-checked as the caller, then opened.
    pub fn open_undeclared(&mut self, role: Role, suffix: &[u8], access: Access) -> Result<Key, Refusal> {
        let name = self.string(&keyspace::key(self.queue, role, suffix))?;
        self.caller()?.key(name.str_ref(), access)?;
        Ok(Key::open(self.ctx, Name::Own(name), access != Access::Read))
    }

    /// An undeclared key of this queue that may well not exist (a job's log): None when it is
    /// absent — nothing to check or touch — else ACL-checked as the caller and opened.
    pub fn open_undeclared_existing(
        &mut self,
        role: Role,
        suffix: &[u8],
        access: Access,
    ) -> Result<Option<Key>, Refusal> {
        let name = self.string(&keyspace::key(self.queue, role, suffix))?;
        if Key::open(self.ctx, Name::Arg(name.raw()), false).kind() == Kind::Empty {
            return Ok(None);
        }
        self.caller()?.key(name.str_ref(), access)?;
        Ok(Some(Key::open(self.ctx, Name::Own(name), access != Access::Read)))
    }

    /// Whether an undeclared key of this queue exists: a lookup, no ACL check (nothing of
    /// it is read or answered), so a verb opens it as the caller only when there is work.
    pub fn undeclared_exists(&self, role: Role, suffix: &[u8]) -> Result<bool, Refusal> {
        let name = self.string(&keyspace::key(self.queue, role, suffix))?;
        Ok(Key::open(self.ctx, Name::Arg(name.raw()), false).kind() != Kind::Empty)
    }

    /// The tail's keys (`Command::tail`), each with its suffix (a row's id), as layout
    /// checked them.
    pub fn tail(&self) -> impl Iterator<Item = (StrRef<'a>, &'a [u8])> + '_ {
        let role = self.cmd.tail.map(|t| t.role);
        self.argv
            .iter()
            .skip(self.tail_at)
            .take(self.tail_len)
            .filter_map(move |&p| Some((StrRef::of(p), keyspace::parse_in(bytes_of(p), self.queue, role?)?)))
    }

    /// Opens a key of the tail (declared: the server checked it with the command).
    pub fn open_tail(&self, name: StrRef<'a>, write: bool) -> Key {
        Key::open(self.ctx, Name::Arg(name.raw()), write)
    }

    pub fn string(&self, b: &[u8]) -> Result<Str, Refusal> {
        Str::new(self.ctx, b).ok_or_else(errors::host_reply)
    }

    pub fn int(&self, v: i64) -> Result<Str, Refusal> {
        Str::int(self.ctx, v).ok_or_else(errors::host_reply)
    }

    /// The server clock in ms, read once per call (the server caches it per command, so a
    /// verb sees one instant however long it runs).
    pub fn now(&self) -> i64 {
        if let Some(t) = self.now.get() {
            return t;
        }
        let us = match (api!(RedisModule_CachedMicroseconds), api!(RedisModule_Milliseconds)) {
            // SAFETY: plain clock reads.
            (Some(f), _) => (unsafe { f() }) / 1000,
            (None, Some(f)) => unsafe { f() },
            (None, None) => 0,
        };
        self.now.set(Some(us));
        us
    }

    pub fn caller(&mut self) -> Result<&Caller, Refusal> {
        if self.caller.is_none() {
            // The command and its declared keys are all the server needs to judge a found
            // key with them; the arguments after (up to 2 000 of them) would be searched for
            // the marker word on every check.
            let head = self.argv.get(..self.first_arg).unwrap_or(self.argv);
            self.caller = Some(Caller::of(self.ctx, head)?);
        }
        self.caller.as_ref().ok_or_else(errors::host_reply)
    }

    /// A cluster-enabled server is refused before anything is read: the queue's keys are one
    /// hash slot, but the fence key and other queues are not.
    pub fn standalone(&self) -> Result<(), Refusal> {
        if self.flags & raw::REDISMODULE_CTX_FLAGS_CLUSTER as c_int != 0 {
            Err(errors::wire_cluster())
        } else {
            Ok(())
        }
    }

    /// `{emq}:version`, found by the fence (not declared): opened for reading, as the caller.
    /// INSTALL, which writes it, declares it.
    fn version_key(&mut self) -> Result<Key, Refusal> {
        static VERSION_KEY: Lit = Lit::new(keyspace::VERSION_KEY_C);
        let name = VERSION_KEY.str_ref();
        if name.is_missing() {
            return Err(errors::host_reply());
        }
        self.caller()?.key(name, Access::Read)?;
        Ok(Key::open(self.ctx, Name::Arg(name.raw()), false))
    }

    /// The fence: standalone, one read of `{emq}:version` as the caller, only
    /// `echomq:6.0.0` passes. It never writes.
    pub fn fence(&mut self) -> Result<(), Refusal> {
        self.standalone()?;
        let key = self.version_key()?;
        domain::fence(stored(&key)?)
    }

    /// Shape, first part: `numkeys` is the verb's and every key is there.
    fn numkeys(&mut self, cmd: &Command) -> Result<(), Refusal> {
        match cmd.form {
            Form::Bare => {
                self.first_arg = 1;
                Ok(())
            }
            Form::Keys => {
                let n = cmd.keys.len();
                let given = domain::args::int(self.arg(1));
                if given != Some(n as i64) {
                    return Err(Refusal::Shape(format!("numkeys must be {n}")));
                }
                if self.argv.len() < n.saturating_add(2) {
                    return Err(Refusal::Shape(format!("{} needs {n} keys", cmd.name)));
                }
                self.first_arg = n.saturating_add(2);
                if cmd.tail.is_some() {
                    // `n key1 … keyn` after the declared keys.
                    let at = self.first_arg;
                    let count = domain::args::number(self.arg(at), "n")?;
                    let count = usize::try_from(count)
                        .map_err(|_| Refusal::Shape(format!("{} needs n keys after n", cmd.name)))?;
                    self.tail_at = at.saturating_add(1);
                    self.tail_len = count;
                    self.first_arg = self.tail_at.saturating_add(count);
                    if self.argv.len() < self.first_arg {
                        return Err(Refusal::Shape(format!("{} needs {count} keys after n", cmd.name)));
                    }
                }
                Ok(())
            }
        }
    }

    /// Layout: each key is the role of its position, all of one queue.
    fn layout(&mut self, cmd: &Command) -> Result<(), Refusal> {
        for (i, slot) in cmd.keys.iter().enumerate() {
            let k = self.arg(i.saturating_add(2));
            match slot.role {
                KeyRole::Any => {}
                KeyRole::OneOf(roles) => {
                    let p = keyspace::parse(k).filter(|p| roles.contains(&p.role)).ok_or_else(|| {
                        let words: Vec<&str> = roles.iter().map(|r| r.word()).collect();
                        Refusal::Layout(format!(
                            "key {} must be emq:{{Q}}:<set>, one of {}",
                            i.saturating_add(1),
                            words.join(" ")
                        ))
                    })?;
                    if !self.queue.is_empty() && p.queue != self.queue {
                        return Err(Refusal::Layout("all keys must name one queue".into()));
                    }
                    self.queue = p.queue;
                    self.set = Some(p.role);
                }
                KeyRole::Version => {
                    if k != keyspace::VERSION_KEY {
                        return Err(Refusal::Layout("the key must be {emq}:version".into()));
                    }
                }
                KeyRole::Queue(role) => {
                    // After the first key only its queue is known to be valid: the others must
                    // spell that same queue, which a comparison decides. A full parse only
                    // picks the refusal's text.
                    let known =
                        (!self.queue.is_empty()).then(|| keyspace::parse_in(k, self.queue, role)).flatten();
                    let suffix = match known {
                        Some(suffix) => suffix,
                        None => {
                            let p = keyspace::parse_as(k, role).ok_or_else(|| {
                                Refusal::Layout(format!(
                                    "key {} must be emq:{{Q}}:{}{}",
                                    i.saturating_add(1),
                                    role.word(),
                                    if role.suffixed() { "<ID>" } else { "" }
                                ))
                            })?;
                            if !self.queue.is_empty() && p.queue != self.queue {
                                return Err(Refusal::Layout("all keys must name one queue".into()));
                            }
                            self.queue = p.queue;
                            p.suffix
                        }
                    };
                    if role.suffixed() {
                        // A job's row and its log name one job.
                        if !self.id.is_empty() && suffix != self.id {
                            return Err(Refusal::Layout("all keys must name one job".into()));
                        }
                        self.id = suffix;
                    }
                }
            }
        }
        if let Some(tail) = cmd.tail {
            for (j, &p) in self.argv.iter().skip(self.tail_at).take(self.tail_len).enumerate() {
                let k = bytes_of(p);
                if keyspace::parse_in(k, self.queue, tail.role).is_some() {
                    continue;
                }
                return Err(match keyspace::parse_as(k, tail.role) {
                    Some(_) => Refusal::Layout("all keys must name one queue".into()),
                    None => Refusal::Layout(format!(
                        "key {} must be emq:{{Q}}:{}{}",
                        cmd.keys.len().saturating_add(j).saturating_add(1),
                        tail.role.word(),
                        if tail.role.suffixed() { "<ID>" } else { "" }
                    )),
                });
            }
        }
        Ok(())
    }
}

/// What a key read as the fence reads it holds.
pub fn stored(key: &Key) -> Result<Stored<'_>, Refusal> {
    Ok(match key.kind() {
        Kind::Empty => Stored::Absent,
        Kind::String => Stored::Value(key.string().ok_or_else(errors::host_reply)?),
        _ => Stored::OtherType,
    })
}

/// Runs `cmd` for the module itself (upkeep), not for a client: the same order of checks —
/// so the fence too — and the same effects, as the server: no ACL applies. `argv` as a
/// client would send it.
pub fn run_internal(ctx: Ctx<'_>, cmd: &'static Command, argv: &[Str]) -> Result<Reply, Refusal> {
    let argv: smallvec::SmallVec<[*mut RedisModuleString; 16]> = argv.iter().map(Str::raw).collect();
    catch_unwind(AssertUnwindSafe(|| {
        let mut x = Exec::new(ctx.raw(), &argv, cmd);
        x.caller = Some(Caller::server());
        (cmd.run)(&mut x, cmd)
    }))
    .unwrap_or_else(|_| Err(errors::host_reply()))
}

/// Slot in the table for each command's C callback.
pub type Callback = extern "C" fn(*mut RedisModuleCtx, *mut *mut RedisModuleString, c_int) -> c_int;

/// The commands registered at load, in registration order, each with its entry points.
static COMMANDS: OnceLock<(&'static [Command], &'static [Entry])> = OnceLock::new();

/// The table registration was handed (empty before load).
pub fn commands() -> &'static [Command] {
    COMMANDS.get().map_or(&[], |t| t.0)
}

/// The C entry points of the command at position `I` of the table: its call, and its run
/// again when a key it waits on is ready. The table makes one for each of its commands.
#[derive(Clone, Copy)]
pub struct Entry {
    pub call: Callback,
    retry: Callback,
}

pub const fn entry<const I: usize>() -> Entry {
    Entry { call: call::<I>, retry: retry::<I> }
}

/// Records the table once, at load; false when it was recorded already.
pub(crate) fn record(table: &'static [Command], entries: &'static [Entry]) -> bool {
    COMMANDS.set((table, entries)).is_ok()
}

extern "C" fn call<const I: usize>(
    ctx: *mut RedisModuleCtx,
    argv: *mut *mut RedisModuleString,
    argc: c_int,
) -> c_int {
    serve(ctx, argv, argc, I, false)
}

/// A blocked call of command `I` runs again: its key was signalled ready.
extern "C" fn retry<const I: usize>(
    ctx: *mut RedisModuleCtx,
    argv: *mut *mut RedisModuleString,
    argc: c_int,
) -> c_int {
    serve(ctx, argv, argc, I, true)
}

/// What a call came to, once its verb has run.
enum Served {
    Reply(Reply),
    Refused(Refusal),
    /// Wait on these keys (for at most this many ms, 0: no limit), then run again; the
    /// call's context flags say whether it may wait.
    Wait(smallvec::SmallVec<[*mut RedisModuleString; 4]>, i64, c_int),
}

/// Serves one call of command `i`. `retrying`: the server runs a blocked call again, and
/// then finding nothing keeps the client waiting (REDISMODULE_ERR) and answers nothing.
fn serve(
    ctx: *mut RedisModuleCtx,
    argv: *mut *mut RedisModuleString,
    argc: c_int,
    i: usize,
    retrying: bool,
) -> c_int {
    let argv: &[*mut RedisModuleString] = match (argv.is_null(), usize::try_from(argc)) {
        // SAFETY: the server hands argc live argument strings.
        (false, Ok(n)) => unsafe { std::slice::from_raw_parts(argv, n) },
        _ => &[],
    };
    if caller::channel_request(ctx, argv, || commands().get(i).and_then(Command::channel)) {
        return raw::REDISMODULE_OK as c_int;
    }
    // The last line of defence: a bug that panics answers an error instead of aborting the
    // user's server. The verbs never panic by design (no unwrap, no indexing, checked math).
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let cmd = commands().get(i)?;
        if !retrying {
            metrics::called(i);
        }
        let mut x = Exec::new(ctx, argv, cmd);
        Some(match (cmd.run)(&mut x, cmd) {
            Ok(Reply::Block { timeout_ms, roles }) => {
                let keys = roles.iter().filter_map(|r| x.key_arg((*r).into()).ok()).collect();
                Served::Wait(keys, timeout_ms, x.flags)
            }
            Ok(r) => Served::Reply(r),
            Err(e) => Served::Refused(e),
        })
    }));
    match outcome {
        // Still nothing to do: keep waiting, unless the call now waits on more keys than its
        // client does, which then asks again (blocking.rs).
        Ok(Some(Served::Wait(keys, ..))) if retrying => {
            if blocking::waiting_on(ctx).is_none_or(|n| keys.len() <= n) {
                return raw::REDISMODULE_ERR as c_int;
            }
            reply::send(ctx, &Reply::Array(Vec::new()));
        }
        Ok(Some(Served::Wait(mut keys, timeout, flags))) => {
            let waits = blocking::may_block(flags)
                && COMMANDS
                    .get()
                    .and_then(|t| t.1.get(i))
                    .is_some_and(|e| blocking::block(ctx, &mut keys, timeout, e.retry));
            if !waits {
                reply::send(ctx, &Reply::Array(Vec::new()));
            }
        }
        Ok(Some(Served::Reply(r))) => reply::send(ctx, &r),
        Ok(Some(Served::Refused(e))) => {
            metrics::refused(e.class());
            reply::refuse(ctx, &e);
        }
        Ok(None) | Err(_) => {
            let e = errors::host_reply();
            metrics::refused(e.class());
            reply::refuse(ctx, &e);
        }
    }
    if retrying {
        metrics::add(&metrics::WOKEN, 1);
    }
    raw::REDISMODULE_OK as c_int
}
