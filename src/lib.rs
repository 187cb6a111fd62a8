//! trafikey: EchoMQ wire 6 — the `EMQ.*` job queue — as a native Valkey module.
//!
//! `lib.rs` only declares the module: its name, configs, ACL category and init, and hands the
//! command table down to the host. The layers, each using only those below it:
//! `verbs` (the commands and their table) → `queue`, `bus` (their shared mechanics) → `host`
//! (the server glue, the only `unsafe`) → `domain`, `keyspace`, `errors`, `config` (pure).
//! Only `host` holds the server's pointers: above it a server string is a `host::StrRef`
//! borrowed from its owner, and every other module forbids `unsafe` (clippy.toml disallows
//! the server's types outside `host`).

// Unit tests may panic: a panic there is a failed test, never a served call.
#![cfg_attr(
    test,
    allow(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::indexing_slicing,
        clippy::arithmetic_side_effects
    )
)]

pub mod bus;
pub mod config;
pub mod domain;
pub mod errors;
pub mod host;
pub mod keyspace;
pub mod metrics;
pub mod queue;
pub mod registry;
pub mod upkeep;
pub mod verbs;

use valkey_module::{Context, InfoContext, Status, ValkeyResult, ValkeyString};
use valkey_module_macros::info_command_handler;

pub const MODULE_NAME: &str = "trafikey";
pub const MODULE_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Evaluated when the module is compiled, on cargo's own version digits.
#[allow(clippy::indexing_slicing, clippy::arithmetic_side_effects)]
const fn parse_u32(s: &str) -> u32 {
    let b = s.as_bytes();
    let mut i = 0;
    let mut v = 0u32;
    while i < b.len() {
        v = v * 10 + (b[i] - b'0') as u32;
        i += 1;
    }
    v
}

pub const MODULE_MAJOR: u32 = parse_u32(env!("CARGO_PKG_VERSION_MAJOR"));
const MODULE_MINOR: u32 = parse_u32(env!("CARGO_PKG_VERSION_MINOR"));
const MODULE_PATCH: u32 = parse_u32(env!("CARGO_PKG_VERSION_PATCH"));
const MODULE_VER: i32 = module_ver(MODULE_MAJOR, MODULE_MINOR, MODULE_PATCH);

/// `MODULE LIST`'s `ver`: major·10000 + minor·100 + patch.
#[allow(clippy::arithmetic_side_effects)]
const fn module_ver(major: u32, minor: u32, patch: u32) -> i32 {
    (major * 10_000 + minor * 100 + patch) as i32
}

/// Before anything is registered: a server the module cannot serve is refused, with one log
/// line saying what was found and what is needed, and keeps running.
fn preload(ctx: &Context, _args: &[ValkeyString]) -> Status {
    match host::compat::check() {
        Ok(()) => Status::Ok,
        Err(e) => {
            ctx.log_warning(&format!("trafikey: not loaded: {e}"));
            Status::Err
        }
    }
}

fn init(ctx: &Context, args: &[ValkeyString]) -> Status {
    let started = host::register::configs(ctx, args, upkeep::settings_changed)
        .and_then(|()| host::register::all(ctx, &verbs::COMMANDS, &verbs::ENTRIES))
        .and_then(|()| host::effects::init(ctx.into()))
        .and_then(|()| upkeep::start(ctx.into()))
        .and_then(|()| host::events::subscribe(ctx.into()));
    match started {
        Ok(()) => Status::Ok,
        Err(e) => {
            ctx.log_warning(&format!("trafikey: {e}"));
            Status::Err
        }
    }
}

#[info_command_handler]
fn info(ctx: &InfoContext, _for_crash_report: bool) -> ValkeyResult<()> {
    let mut names = host::commands().iter().map(|c| c.name);
    metrics::info(
        ctx,
        metrics::Facts {
            commands: &mut names,
            queues_known: registry::len(),
            receivers_seen: host::effects::targets_seen(),
            audit: host::audit::last_call(),
        },
    )
}

/// The module's entry points. The crate's macro that makes them names the server's types,
/// which clippy.toml keeps to `host`: it expands here, apart.
#[allow(clippy::disallowed_types)]
mod entry {
    use super::{host, init, preload, MODULE_NAME, MODULE_VER};
    use valkey_module::valkey_module;

    valkey_module! {
        name: MODULE_NAME,
        version: MODULE_VER,
        allocator: (host::alloc::Alloc, host::alloc::Alloc),
        data_types: [],
        preload: preload,
        init: init,
        acl_categories: ["emq"]
        commands: [],
    }
}

#[cfg(test)]
mod tests {
    // Parts of several digits, and a major and a patch other than 0: a version such as
    // 0.3.0 cannot tell `v * 10` from `v / 10`, nor `+ patch` from `- patch`.
    #[test]
    fn the_version_s_numbers() {
        assert_eq!(super::parse_u32("0"), 0);
        assert_eq!(super::parse_u32("7"), 7);
        assert_eq!(super::parse_u32("307"), 307);
        assert_eq!(super::module_ver(1, 2, 3), 10_203);
        assert_eq!(super::module_ver(0, 3, 0), 300);
    }
}
