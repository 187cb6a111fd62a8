//! STALLED's decision over plain values: what becomes of each job whose lease expired.
//!
//! Each reclaimed lease counts one more stall. A job whose stalls then exceed `max_stalls`
//! fails for good (error `stalled`, one more attempt made); any other goes back to ready. An
//! id whose row is gone is dropped from `active` and counted, nothing else. When one call
//! fails more jobs than the failed set's retention keeps, the surplus is deleted at once
//! instead of entering the set: all of them finish at the same instant, so the lowest ids —
//! the oldest by mint order — are the ones retention would take first.

/// What becomes of one reclaimed lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    /// The row is gone: only the id leaves `active`.
    Orphan,
    /// Back to ready, at the front (the job was not at fault).
    Requeue { stalls: i64 },
    /// Failed for good, into the failed set.
    Fail { stalls: i64 },
    /// Failed for good and deleted at once: beyond what retention keeps.
    Retire { stalls: i64 },
}

impl Fate {
    pub const fn fails(self) -> bool {
        matches!(self, Fate::Fail { .. } | Fate::Retire { .. })
    }
}

/// The fate of a job that had `stalls` stalls before this one (`None`: its row is gone).
pub fn fate(stalls: Option<i64>, max_stalls: i64) -> Fate {
    match stalls {
        None => Fate::Orphan,
        Some(s) => {
            let stalls = s.saturating_add(1);
            if stalls > max_stalls {
                Fate::Fail { stalls }
            } else {
                Fate::Requeue { stalls }
            }
        }
    }
}

/// Marks the `retire_now` lowest ids among the failing jobs as retired at once.
pub fn retire_lowest(fates: &mut [Fate], ids: &[&[u8]], retire_now: u64) {
    let mut failing: Vec<usize> =
        (0..fates.len()).filter(|&i| fates.get(i).is_some_and(|f| f.fails())).collect();
    failing.sort_by_key(|&i| ids.get(i).copied().unwrap_or_default());
    for i in failing.into_iter().take(usize::try_from(retire_now).unwrap_or(usize::MAX)) {
        if let Some(slot) = fates.get_mut(i) {
            if let Fate::Fail { stalls } = *slot {
                *slot = Fate::Retire { stalls };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn past_max_stalls_fails_and_a_missing_row_is_an_orphan() {
        assert_eq!(fate(None, 1), Fate::Orphan);
        assert_eq!(fate(Some(0), 1), Fate::Requeue { stalls: 1 });
        assert_eq!(fate(Some(1), 1), Fate::Fail { stalls: 2 });
        assert_eq!(fate(Some(0), 0), Fate::Fail { stalls: 1 }, "MAXSTALLS 0: the first stall fails");
        assert_eq!(fate(Some(i64::MAX), 1000), Fate::Fail { stalls: i64::MAX });
    }

    proptest! {
        #[test]
        fn the_lowest_failing_ids_are_retired_and_nothing_else_changes(
            jobs in proptest::collection::vec((proptest::option::weighted(0.9, 0i64..4), any::<u16>()), 0..12),
            max_stalls in 0i64..3,
            retire_now in 0u64..14,
        ) {
            let ids: Vec<Vec<u8>> = jobs.iter().enumerate().map(|(i, (_, k))| format!("{k:05}-{i:02}").into_bytes()).collect();
            let refs: Vec<&[u8]> = ids.iter().map(Vec::as_slice).collect();
            let before: Vec<Fate> = jobs.iter().map(|(s, _)| fate(*s, max_stalls)).collect();
            let mut after = before.clone();
            retire_lowest(&mut after, &refs, retire_now);

            let failing: Vec<usize> = (0..before.len()).filter(|&i| before[i].fails()).collect();
            let retired: Vec<usize> = (0..after.len()).filter(|&i| matches!(after[i], Fate::Retire { .. })).collect();
            prop_assert_eq!(retired.len() as u64, retire_now.min(failing.len() as u64));
            // Every retired id is below every failing id kept.
            for &r in &retired {
                for &f in failing.iter().filter(|f| !retired.contains(f)) {
                    prop_assert!(refs[r] < refs[f]);
                }
            }
            for i in 0..before.len() {
                match (before[i], after[i]) {
                    (Fate::Fail { stalls: a }, Fate::Retire { stalls: b }) => prop_assert_eq!(a, b),
                    (b, a) => prop_assert_eq!(b, a),
                }
                // Fails exactly when the stalls, one more, exceed the maximum.
                let exceeds = jobs[i].0.is_some_and(|s| s + 1 > max_stalls);
                prop_assert_eq!(after[i].fails(), exceeds);
            }
        }
    }
}
