//! The commands, one file each, written in the wire's terms (WIRE6 §5–§7). Each is a
//! `host::Verb`: its argument shape, then its domain step; `host::drive` runs shape → layout
//! → fence → domain around them.

pub mod capabilities;
pub mod enqueue;
pub mod install;
pub mod version;
