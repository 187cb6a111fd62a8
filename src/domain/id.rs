//! The branded-id gate: 14 bytes, a 3-byte brand and the 11-byte zero-padded
//! Base62 form of a 64-bit snowflake. Fixed width and an alphabet in ASCII order make byte
//! order equal mint order, so ids are compared and stored as plain bytes.

pub const LEN: usize = 14;
pub const BRAND_LEN: usize = 3;
pub const JOB_BRAND: &[u8; 3] = b"JOB";
/// `u64::MAX` in the payload's alphabet; a payload above it is malformed.
pub const PAYLOAD_MAX: &[u8; 11] = b"LygHa16AHYF";
const ALPHABET: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

fn payload_ok(payload: &[u8]) -> bool {
    payload.len() == LEN - BRAND_LEN
        && payload.iter().all(u8::is_ascii_alphanumeric)
        && payload <= &PAYLOAD_MAX[..]
}

/// A job id: brand `JOB` and a payload no greater than `u64::MAX`.
pub fn is_job_id(id: &[u8]) -> bool {
    id.len() == LEN && id.starts_with(JOB_BRAND) && id.get(BRAND_LEN..).is_some_and(payload_ok)
}

/// A bus message id: any three ASCII letters as brand, the same payload rule.
pub fn is_message_id(id: &[u8]) -> bool {
    id.len() == LEN
        && id.get(..BRAND_LEN).is_some_and(|b| b.iter().all(u8::is_ascii_alphabetic))
        && id.get(BRAND_LEN..).is_some_and(payload_ok)
}

/// The id of snowflake `n` under `brand` (used by tests and tools; the module never mints).
pub fn encode(brand: &[u8; 3], mut n: u64) -> [u8; LEN] {
    let mut out = [b'0'; LEN];
    out[..BRAND_LEN].copy_from_slice(brand);
    for slot in out[BRAND_LEN..].iter_mut().rev() {
        *slot = ALPHABET.get((n % 62) as usize).copied().unwrap_or(b'0');
        n /= 62;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn edges() {
        assert!(is_job_id(b"JOB00000000000"));
        assert!(is_job_id(b"JOBLygHa16AHYF"));
        assert!(!is_job_id(b"JOBLygHa16AHYG"));
        assert!(!is_job_id(b"JOBzzzzzzzzzzz"));
        assert!(!is_job_id(b"JOB0000000000"));
        assert!(!is_job_id(b"JOB000000000000"));
        assert!(!is_job_id(b"job00000000001"));
        assert!(!is_job_id(b"MSG00000000001"));
        assert!(!is_job_id(b"JOB0000000000-"));
        assert!(is_message_id(b"MSG00000000001"));
        assert!(is_message_id(b"abc00000000001"));
        assert!(!is_message_id(b"M1G00000000001"));
        assert_eq!(&encode(JOB_BRAND, u64::MAX), b"JOBLygHa16AHYF");
        assert_eq!(&encode(JOB_BRAND, 0), b"JOB00000000000");
    }

    proptest! {
        #[test]
        fn every_snowflake_passes(n in any::<u64>()) {
            prop_assert!(is_job_id(&encode(JOB_BRAND, n)));
        }

        #[test]
        fn byte_order_is_mint_order(a in any::<u64>(), b in any::<u64>()) {
            prop_assert_eq!(encode(JOB_BRAND, a).cmp(&encode(JOB_BRAND, b)), a.cmp(&b));
        }

        #[test]
        fn everything_else_is_refused(s in proptest::collection::vec(any::<u8>(), 0..30)) {
            let well_formed = s.len() == LEN && s.starts_with(b"JOB")
                && s[3..].iter().all(u8::is_ascii_alphanumeric)
                && decode(&s[3..]).is_some();
            prop_assert_eq!(is_job_id(&s), well_formed);
        }

        #[test]
        fn alphanumeric_payloads_pass_iff_they_fit(p in proptest::collection::vec(proptest::sample::select(ALPHABET.to_vec()), 11)) {
            let mut id = b"JOB".to_vec();
            id.extend_from_slice(&p);
            prop_assert_eq!(is_job_id(&id), decode(&p).is_some());
        }
    }

    /// An independent decoder for the oracle: the payload's value, if it fits in a u64.
    fn decode(p: &[u8]) -> Option<u64> {
        p.iter().try_fold(0u64, |acc, &c| {
            let d = ALPHABET.iter().position(|&a| a == c)? as u64;
            acc.checked_mul(62)?.checked_add(d)
        })
    }
}
