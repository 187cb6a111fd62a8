//! trafikey: EchoMQ wire 6 — the `EMQ.*` job queue — as a native Valkey module.
//!
//! `lib.rs` only declares the module: its configs, ACL category and init (its name and version
//! are `about`'s), and hands the command table down to the host. The layers, each using only those below it:
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

pub mod about;
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
    use super::about::{MODULE_NAME, MODULE_VER};
    use super::{host, init, preload};
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
