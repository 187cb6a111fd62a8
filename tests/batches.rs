//! The pure rule for a call that finishes many jobs at once (an expiry, TRA.COMPLETES): which
//! go at once instead of into their finished set. No server needed.
// A test may panic: that is how it fails. The module's own rules are for src/.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

use proptest::prelude::*;
use trafikey::domain::gone_at_once;

#[test]
fn keep_zero_takes_every_finishing_job_and_nothing_else() {
    let ids = [Some(&b"JOB3"[..]), None, Some(b"JOB1")];
    assert_eq!(gone_at_once(&ids, 0, true).as_slice(), [true, false, true]);
    assert_eq!(gone_at_once(&ids, 0, false).as_slice(), [false, false, false]);
    assert_eq!(gone_at_once(&ids, 1, false).as_slice(), [false, false, true], "the lowest id first");
    assert_eq!(
        gone_at_once(&ids, 9, false).as_slice(),
        [true, false, true],
        "never one that does not finish"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]
    #[test]
    fn exactly_the_n_lowest_finishing_ids(
        ids in prop::collection::vec(prop::option::of(prop::collection::vec(any::<u8>(), 0..4)), 0..20),
        n in 0u64..25,
    ) {
        let refs: Vec<Option<&[u8]>> = ids.iter().map(|i| i.as_deref()).collect();
        let gone = gone_at_once(&refs, n, false);
        prop_assert_eq!(gone.len(), refs.len());
        let finishing = refs.iter().filter(|i| i.is_some()).count();
        prop_assert_eq!(gone.iter().filter(|g| **g).count(), finishing.min(n as usize));
        // Every id that goes is at most every finishing id that stays.
        for (i, a) in refs.iter().enumerate() {
            for (j, b) in refs.iter().enumerate() {
                if let (Some(a), Some(b), true, false) = (a, b, gone[i], gone[j]) {
                    prop_assert!(a <= b);
                }
            }
            prop_assert!(!(gone[i] && a.is_none()));
        }
    }
}
