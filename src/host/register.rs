//! Registration of the table the module hands down: each command with its flags, one key
//! spec per key position with that role's exact access (so per-role ACL rules and routing
//! see every key), three more for the keys a verb finds itself (each behind its marker word,
//! which only the module's own ACL check puts in an argv: `caller`), its docs — summary, complexity and every argument, so `COMMAND DOCS` is
//! complete — and its ACL categories.

use std::ffi::CString;
use std::mem::MaybeUninit;
use std::os::raw::{c_char, c_int};
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicI64};

use valkey_module::raw;
use valkey_module::{Context, ValkeyString};

use super::caller::Access;
use super::command::{Arg, Command, Form, KeyRole, Shape, Spec, Ty};
use super::Entry;

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
        Spec::Update => {
            raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_ACCESS | raw::REDISMODULE_CMD_KEY_UPDATE
        }
        Spec::Take => {
            raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_ACCESS | raw::REDISMODULE_CMD_KEY_DELETE
        }
    };
    u64::from(f)
}

const FOUND_NOTE: &std::ffi::CStr =
    c"a key the command finds itself (a job row, a log, the fence key), named here only by the module's own ACL check";

fn cstr(s: &str) -> Result<CString, String> {
    CString::new(s).map_err(|_| format!("NUL in {s:?}"))
}

/// The argument docs of one command as the server takes them: C structs pointing at strings
/// and at arrays of further structs, all owned here until the server has copied them.
#[derive(Default)]
struct Docs {
    strings: Vec<CString>,
    arrays: Vec<Vec<raw::RedisModuleCommandArg>>,
}

fn zeroed_arg() -> raw::RedisModuleCommandArg {
    // SAFETY: a struct of pointers and integers; all-zero is the array terminator.
    unsafe { MaybeUninit::zeroed().assume_init() }
}

impl Docs {
    fn text(&mut self, s: &str) -> Result<*const c_char, String> {
        let c = cstr(s)?;
        let p = c.as_ptr();
        self.strings.push(c);
        Ok(p)
    }

    /// A zero-terminated array that stays where it is while `self` lives.
    fn array(&mut self, mut items: Vec<raw::RedisModuleCommandArg>) -> *mut raw::RedisModuleCommandArg {
        items.push(zeroed_arg());
        let p = items.as_mut_ptr();
        self.arrays.push(items);
        p
    }

    fn plain(
        &mut self,
        name: &str,
        type_: raw::RedisModuleCommandArgType,
    ) -> Result<raw::RedisModuleCommandArg, String> {
        let mut a = zeroed_arg();
        a.name = self.text(name)?;
        a.type_ = type_;
        a.key_spec_index = -1;
        Ok(a)
    }

    fn arg(&mut self, d: &Arg) -> Result<raw::RedisModuleCommandArg, String> {
        let type_ = match d.shape {
            Shape::Value(Ty::Str) => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING,
            Shape::Value(Ty::Int) => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER,
            Shape::Word => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PURE_TOKEN,
            Shape::OneOf(_) => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_ONEOF,
            Shape::Block(_) => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_BLOCK,
        };
        let mut a = self.plain(&d.name.to_ascii_lowercase(), type_)?;
        // A word is its own token; an option's token is the word before its value.
        let token = match d.shape {
            Shape::Word => Some(d.display),
            _ => d.token,
        };
        if let Some(t) = token {
            a.token = self.text(t)?;
        }
        if matches!(d.shape, Shape::Value(_)) && d.display != d.name {
            a.display_text = self.text(d.display)?;
        }
        if let Shape::OneOf(items) | Shape::Block(items) = d.shape {
            let subs = items.iter().map(|i| self.arg(i)).collect::<Result<Vec<_>, _>>()?;
            a.subargs = self.array(subs);
        }
        let mut flags = raw::REDISMODULE_CMD_ARG_NONE;
        if d.optional {
            flags |= raw::REDISMODULE_CMD_ARG_OPTIONAL;
        }
        if d.multiple {
            flags |= raw::REDISMODULE_CMD_ARG_MULTIPLE;
        }
        a.flags = flags as c_int;
        Ok(a)
    }

    /// `numkeys`, each declared key by its role, then the arguments after the keys.
    fn of(&mut self, cmd: &Command) -> Result<*mut raw::RedisModuleCommandArg, String> {
        let mut top = Vec::new();
        if cmd.form == Form::Keys {
            top.push(self.plain("numkeys", raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER)?);
            for (i, slot) in cmd.keys.iter().enumerate() {
                let name = match slot.role {
                    KeyRole::Queue(r) => r.word().trim_end_matches(':'),
                    KeyRole::Version => "version",
                    KeyRole::Any => "key",
                    KeyRole::OneOf(_) => "set",
                };
                let mut k = self.plain(name, raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_KEY)?;
                k.key_spec_index = i as c_int;
                top.push(k);
            }
            if let Some(t) = cmd.tail {
                top.push(self.plain("n", raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER)?);
                let mut k = self.plain(
                    t.role.word().trim_end_matches(':'),
                    raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_KEY,
                )?;
                k.key_spec_index = cmd.keys.len() as c_int;
                k.flags = raw::REDISMODULE_CMD_ARG_MULTIPLE as c_int;
                top.push(k);
            }
        }
        for a in cmd.args {
            top.push(self.arg(a)?);
        }
        Ok(if top.is_empty() { ptr::null_mut() } else { self.array(top) })
    }
}

fn one(ctx: &Context, cmd: &Command, callback: super::Callback) -> Result<(), String> {
    let (create, get, set_info, set_acl) = (
        api!(RedisModule_CreateCommand).ok_or("no CreateCommand")?,
        api!(RedisModule_GetCommand).ok_or("no GetCommand")?,
        api!(RedisModule_SetCommandInfo).ok_or("no SetCommandInfo")?,
        api!(RedisModule_SetCommandACLCategories).ok_or("no SetCommandACLCategories")?,
    );
    let name = cstr(&cmd.name.to_ascii_lowercase())?;
    let flags = cstr(&cmd.flags())?;
    // SAFETY: load-time registration on the module's context; the strings live across the
    // calls and the server copies what it keeps.
    unsafe {
        if create(ctx.ctx, name.as_ptr(), Some(callback), flags.as_ptr(), 0, 0, 0)
            != raw::REDISMODULE_OK as c_int
        {
            return Err(format!("cannot create {}", cmd.name));
        }
        let handle = get(ctx.ctx, name.as_ptr());
        if handle.is_null() {
            return Err(format!("cannot find {}", cmd.name));
        }
        let mut specs = key_specs(cmd);
        // The array ends with a zeroed spec.
        specs.push(MaybeUninit::zeroed().assume_init());
        let summary = cstr(cmd.summary)?;
        let complexity = cstr(cmd.complexity)?;
        let since = cstr(env!("CARGO_PKG_VERSION"))?;
        let mut docs = Docs::default();
        let args = docs.of(cmd)?;
        let info = raw::RedisModuleCommandInfo {
            version: &INFO_VERSION,
            summary: summary.as_ptr(),
            complexity: complexity.as_ptr(),
            since: since.as_ptr(),
            history: ptr::null_mut(),
            tips: ptr::null(),
            arity: cmd.arity(),
            key_specs: specs.as_mut_ptr(),
            args,
        };
        if set_info(handle, &info) != raw::REDISMODULE_OK as c_int {
            return Err(format!("cannot describe {}", cmd.name));
        }
        let acl = cstr(&cmd.acl())?;
        if set_acl(handle, acl.as_ptr()) != raw::REDISMODULE_OK as c_int {
            return Err(format!("cannot set ACL categories of {}", cmd.name));
        }
    }
    Ok(())
}

/// The key specs of `cmd` as the server takes them: one per declared key (its index), the
/// tail's (its count, then that many keys), and the three that find a key the module checks
/// behind a marker word (read, update, write). The caller ends the array.
fn key_specs(cmd: &Command) -> Vec<raw::RedisModuleCommandKeySpec> {
    let mut specs: Vec<raw::RedisModuleCommandKeySpec> = cmd
        .keys
        .iter()
        .enumerate()
        .map(|(i, slot)| {
            spec(ptr::null_mut(), spec_flags(slot.spec), at_index((i as c_int).saturating_add(2)), one_key())
        })
        .collect();
    // The tail: its count at `n` (right after the declared keys), then that many keys.
    if let Some(t) = cmd.tail {
        let (fk_type, fk) = (
            raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_KEYNUM,
            raw::RedisModuleCommandKeySpec__bindgen_ty_2 {
                keynum: raw::RedisModuleCommandKeySpec__bindgen_ty_2__bindgen_ty_2 {
                    keynumidx: 0,
                    firstkey: 1,
                    keystep: 1,
                },
            },
        );
        let pos = (cmd.keys.len() as c_int).saturating_add(2);
        specs.push(spec(ptr::null_mut(), spec_flags(t.spec), at_index(pos), (fk_type, fk)));
    }
    let after_keys = match cmd.form {
        Form::Keys => (cmd.keys.len() as c_int).saturating_add(2),
        Form::Bare => 1,
    };
    for access in [Access::Read, Access::Update, Access::Write] {
        let (mark, flags) = access.found();
        let bs = (
            raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_KEYWORD,
            raw::RedisModuleCommandKeySpec__bindgen_ty_1 {
                keyword: raw::RedisModuleCommandKeySpec__bindgen_ty_1__bindgen_ty_2 {
                    keyword: mark.as_ptr(),
                    startfrom: after_keys,
                },
            },
        );
        specs.push(spec(FOUND_NOTE.as_ptr(), u64::from(flags), bs, one_key()));
    }
    specs
}

type BeginSearch = (raw::RedisModuleKeySpecBeginSearchType, raw::RedisModuleCommandKeySpec__bindgen_ty_1);
type FindKeys = (raw::RedisModuleKeySpecFindKeysType, raw::RedisModuleCommandKeySpec__bindgen_ty_2);

fn spec(
    notes: *const std::ffi::c_char,
    flags: u64,
    (bs_type, bs): BeginSearch,
    (fk_type, fk): FindKeys,
) -> raw::RedisModuleCommandKeySpec {
    raw::RedisModuleCommandKeySpec {
        notes,
        flags,
        begin_search_type: bs_type,
        bs,
        find_keys_type: fk_type,
        fk,
    }
}

/// The search starts at argv index `pos`.
fn at_index(pos: c_int) -> BeginSearch {
    (
        raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_INDEX,
        raw::RedisModuleCommandKeySpec__bindgen_ty_1 {
            index: raw::RedisModuleCommandKeySpec__bindgen_ty_1__bindgen_ty_1 { pos },
        },
    )
}

/// The key found is the one argument there.
fn one_key() -> FindKeys {
    (
        raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_RANGE,
        raw::RedisModuleCommandKeySpec__bindgen_ty_2 {
            range: raw::RedisModuleCommandKeySpec__bindgen_ty_2__bindgen_ty_1 {
                lastkey: 0,
                keystep: 1,
                limit: 0,
            },
        },
    )
}

/// Registers `table`, entry `i` serving command `i`. Called once, at load.
pub fn all(ctx: &Context, table: &'static [Command], entries: &'static [Entry]) -> Result<(), String> {
    if table.len() != entries.len() {
        return Err("every command needs its entry points".to_owned());
    }
    if !super::record(table, entries) {
        return Err("registered twice".to_owned());
    }
    crate::metrics::size(table.len());
    for (cmd, e) in table.iter().zip(entries) {
        one(ctx, cmd, e.call)?;
    }
    Ok(())
}

/// What runs when a config changes.
type OnChange<T> = Box<dyn Fn(&valkey_module::configuration::ConfigurationContext, &str, &'static T)>;

/// Registers every config the module declares (`config::INTS`, `config::FLAGS`), a value
/// given after `--loadmodule` as its starting value, then has the server load them. Called
/// once, at load; `wake` runs when a config that upkeep follows changes.
pub fn configs(ctx: &Context, args: &[ValkeyString], wake: fn()) -> Result<(), String> {
    use valkey_module::configuration::{self as c, ConfigurationFlags};
    for cfg in crate::config::INTS {
        let start = c::get_i64_default_config_value(args, cfg.name, cfg.default)
            .map_err(|e| format!("{}: {e}", cfg.name))?;
        let on_change: Option<OnChange<AtomicI64>> =
            cfg.wakes_upkeep.then(|| Box::new(move |_: &_, _: &_, _: &_| wake()) as Box<_>);
        c::register_i64_configuration(
            ctx,
            cfg.name,
            cfg.value(),
            start,
            cfg.min,
            cfg.max,
            ConfigurationFlags::DEFAULT,
            on_change,
            None,
        );
    }
    for cfg in crate::config::FLAGS {
        let start = c::get_bool_default_config_value(args, cfg.name, cfg.default)
            .map_err(|e| format!("{}: {e}", cfg.name))?;
        let on_change: Option<OnChange<AtomicBool>> =
            cfg.wakes_upkeep.then(|| Box::new(move |_: &_, _: &_, _: &_| wake()) as Box<_>);
        c::register_bool_configuration(
            ctx,
            cfg.name,
            cfg.value(),
            start,
            ConfigurationFlags::DEFAULT,
            on_change,
            None,
        );
    }
    let load = api!(RedisModule_LoadConfigs).ok_or("the server cannot load configs")?;
    // SAFETY: the load-time context; every config above is registered.
    if unsafe { load(ctx.ctx) } != raw::REDISMODULE_OK as c_int {
        return Err("the server refused a config value".to_owned());
    }
    Ok(())
}
