//! The commands, one file each, written in the wire's terms (WIRE6 §5–§7). Each is a
//! `host::Verb`: its argument shape, then its domain step; `host::drive` runs shape → layout
//! → fence → domain around them.

pub mod append;
pub mod capabilities;
pub mod claim;
pub mod complete;
pub mod delay;
pub mod drop;
pub mod enqueue;
pub mod extend;
pub mod extends;
pub mod fail;
pub mod failures;
pub mod install;
pub mod promote;
pub mod publish;
pub mod reprocess;
pub mod requeue;
pub mod reschedule;
pub mod schedule;
pub mod stalled;
pub mod version;
