//! The foundation against a real server, one test per check (the checks are in `checks`).

mod checks;

macro_rules! tests {
    ($($name:ident)*) => { $( #[test] fn $name() { checks::$name() } )* };
}
each_check!(tests);
