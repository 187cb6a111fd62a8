//! STALLED's decision over plain values: what becomes of each job whose lease expired.
//!
//! Each reclaimed lease counts one more stall. A job whose stalls then exceed `max_stalls`
//! fails for good (error `stalled`, one more attempt made); any other goes back to ready. An
//! id whose row is gone is dropped from `active` and counted, nothing else. Which failed jobs
//! retention deletes at once is every finish's rule (`domain::gone_at_once`).

/// What becomes of one reclaimed lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    /// The row is gone: only the id leaves `active`.
    Orphan,
    /// Back to ready, at the front (the job was not at fault).
    Requeue { stalls: i64 },
    /// Failed for good (into the failed set, or deleted at once beyond what its retention
    /// keeps: `domain::gone_at_once` picks which).
    Fail { stalls: i64 },
}

impl Fate {
    pub const fn fails(self) -> bool {
        matches!(self, Fate::Fail { .. })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn past_max_stalls_fails_and_a_missing_row_is_an_orphan() {
        assert_eq!(fate(None, 1), Fate::Orphan);
        assert_eq!(fate(Some(0), 1), Fate::Requeue { stalls: 1 });
        assert_eq!(fate(Some(1), 1), Fate::Fail { stalls: 2 });
        assert_eq!(fate(Some(0), 0), Fate::Fail { stalls: 1 }, "MAXSTALLS 0: the first stall fails");
        assert_eq!(fate(Some(i64::MAX), 1000), Fate::Fail { stalls: i64::MAX });
    }
}
