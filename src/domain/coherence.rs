//! The coherence drop: the verdict of its reference Lua script (`:coherence_drop`) over
//! a row's stored frame and an incoming 14-byte version. A frame is `version <> value`, the
//! version a branded id whose bytes 4..14 (Rust `[3..14]`) are the snowflake payload, in
//! mint order byte-wise.

use super::id;
use crate::errors::Refusal;

/// The payload of a version or frame: bytes `[3..14]`.
const PAYLOAD: std::ops::Range<usize> = id::BRAND_LEN..id::LEN;

/// The incoming version must be exactly 14 bytes (the script would compare a shorter one's
/// prefix; the native verb refuses it).
pub fn version(v: &[u8]) -> Result<(), Refusal> {
    if v.len() == id::LEN {
        Ok(())
    } else {
        Err(Refusal::Arg(format!("version must be {} bytes", id::LEN)))
    }
}

/// Whether the row holding `frame` is dropped for the 14-byte `version`: a frame shorter
/// than a version cannot be trusted (drop); otherwise drop only when the incoming payload
/// is strictly greater, byte-wise, than the frame's — a late, stale or repeated version
/// never erases a newer row. (The absent row is the caller's branch: nothing to drop.)
pub fn drops(frame: &[u8], version: &[u8]) -> bool {
    match (frame.get(PAYLOAD), version.get(PAYLOAD)) {
        (None, _) => true,
        (Some(stored), Some(incoming)) => incoming > stored,
        (Some(_), None) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::id::{encode, JOB_BRAND};
    use proptest::prelude::*;

    #[test]
    fn the_reference_scripts_branches() {
        let v = |n| encode(JOB_BRAND, n);
        let frame = |n, value: &[u8]| [&v(n)[..], value].concat();
        // (2) a short frame is dropped, whatever the version
        assert!(drops(b"", &v(0)));
        assert!(drops(&v(9)[..13], &v(0)));
        // (3) strictly newer drops; equal and older stay
        assert!(drops(&frame(5, b"row"), &v(6)));
        assert!(!drops(&frame(5, b"row"), &v(5)));
        assert!(!drops(&frame(5, b"row"), &v(4)));
        // exactly 14 bytes is a frame with an empty value
        assert!(drops(&v(5), &v(6)));
        assert!(!drops(&v(5), &v(5)));
        // the brand is not compared
        assert!(!drops(&frame(5, b""), &encode(b"ZZZ", 5)));
        assert!(drops(&frame(5, b""), &encode(b"AAA", 6)));
        // bytes compare unsigned
        assert!(drops(b"JOB0000000000\x7f", b"JOB0000000000\x80"));
        assert!(!drops(b"JOB0000000000\xff", b"JOB0000000000\x00"));
    }

    #[test]
    fn versions_are_fourteen_bytes() {
        assert_eq!(version(&encode(JOB_BRAND, 1)), Ok(()));
        for bad in [&b""[..], b"JOB0000000000", b"JOB000000000000"] {
            assert!(matches!(version(bad), Err(Refusal::Arg(_))));
        }
        assert!(version(&[0u8; 14]).is_ok(), "any 14 bytes: the script gates nothing");
    }

    proptest! {
        #[test]
        fn newer_wins_in_mint_order(a in any::<u64>(), b in any::<u64>(), value in proptest::collection::vec(any::<u8>(), 0..8)) {
            let frame = [&encode(JOB_BRAND, a)[..], &value].concat();
            prop_assert_eq!(drops(&frame, &encode(JOB_BRAND, b)), b > a);
        }

        #[test]
        fn agrees_with_the_script_read_literally(frame in proptest::collection::vec(any::<u8>(), 0..20), v in proptest::collection::vec(any::<u8>(), 14)) {
            // #cur < 14 → drop; else sub(ARGV[1], 4, 14) > sub(cur, 4, 14).
            let expect = frame.len() < 14 || v[3..14] > frame[3..14];
            prop_assert_eq!(drops(&frame, &v), expect);
        }
    }
}
