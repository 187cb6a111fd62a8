//! FNV-1a: a cheap, stable hash of short byte strings. Used where the inputs are a call's own
//! few ids (at most a few hundred, so even a caller who makes them all collide costs a
//! bounded quadratic) and where the value must not change between builds (a scheduler's
//! iteration ids are derived from it).

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

const BASIS: u64 = 0xcbf2_9ce4_8422_2325;
const PRIME: u64 = 0x0100_0000_01b3;

/// FNV-1a of `b`.
pub fn fnv(b: &[u8]) -> u64 {
    extend(BASIS, b)
}

/// The hash `h` carried on over `b`.
fn extend(h: u64, b: &[u8]) -> u64 {
    b.iter().fold(h, |h, &c| (h ^ u64::from(c)).wrapping_mul(PRIME))
}

/// FNV-1a as a `Hasher`, for the sets and maps of one call.
pub struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Fnv {
        Fnv(BASIS)
    }
}

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, b: &[u8]) {
        self.0 = extend(self.0, b);
    }
}

pub type FnvSet<T> = HashSet<T, BuildHasherDefault<Fnv>>;
pub type FnvMap<K, V> = HashMap<K, V, BuildHasherDefault<Fnv>>;

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_values() {
        // The published FNV-1a 64 test vectors.
        assert_eq!(fnv(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv(b"foobar"), 0x8594_4171_f739_67e8);
    }

    proptest! {
        /// The hasher fed the bytes in any two pieces agrees with the function.
        #[test]
        fn hasher_is_the_function(b in proptest::collection::vec(any::<u8>(), 0..40), cut in 0usize..40) {
            let cut = cut.min(b.len());
            let mut h = Fnv::default();
            h.write(&b[..cut]);
            h.write(&b[cut..]);
            prop_assert_eq!(h.finish(), fnv(&b));
        }

        /// A set keeps every distinct id once, whatever collides.
        #[test]
        fn set_counts_distinct(ids in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..6), 0..60)) {
            let s: FnvSet<&[u8]> = ids.iter().map(Vec::as_slice).collect();
            let std: HashSet<&[u8]> = ids.iter().map(Vec::as_slice).collect();
            prop_assert_eq!(s.len(), std.len());
            prop_assert!(ids.iter().all(|i| s.contains(i.as_slice())));
        }
    }
}
