//! The foundation against a real server, one test per check (the checks are in `checks`).
// A test may panic: that is how it fails. The module's own rules are for src/.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

mod checks;

macro_rules! tests {
    ($($name:ident)*) => { $( #[test] fn $name() { checks::$name() } )* };
}
each_check!(tests);
