//! The module's name and version, as `MODULE LIST`, EMQ.VERSION and TRA.CAPABILITIES show
//! them: cargo's version, read when the module is compiled.

#![forbid(unsafe_code)]

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
pub const MODULE_VER: i32 = module_ver(MODULE_MAJOR, MODULE_MINOR, MODULE_PATCH);

/// `MODULE LIST`'s `ver`: major·10000 + minor·100 + patch.
#[allow(clippy::arithmetic_side_effects)]
const fn module_ver(major: u32, minor: u32, patch: u32) -> i32 {
    (major * 10_000 + minor * 100 + patch) as i32
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
