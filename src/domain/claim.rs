//! CLAIM's pick order, over plain values: which jobs one claim takes, and in what order.
//!
//! A claim first promotes the due delayed jobs, then takes up to `count` ready jobs as the
//! queue would serve them after those promotions: the front of `wait` first; then the
//! promoted jobs of priority 0, which joined `wait` at its back (so behind everything that
//! was there) in due order; then `prio` and the promoted jobs of a priority together, lowest
//! priority first and, within one priority, lowest id (mint order) first. Jobs without a
//! priority always come before jobs with one. A promoted job whose row is gone is never
//! picked (it is dropped and counted).

/// Where a picked job comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Pick {
    /// The i-th job from the front of `wait`.
    Wait(usize),
    /// The i-th job this call promotes (in due order).
    Promoted(usize),
    /// The i-th of `prio`'s lowest entries.
    Prio(usize),
}

/// The first half of a claim's decision, made before `prio` is read.
pub struct Plan {
    picks: Vec<Pick>,
    count: usize,
}

impl Plan {
    /// `wait_len` jobs in `wait`; `promoted` the priority of each job this call promotes, in
    /// due order (`None` for one whose row is gone).
    pub fn new(wait_len: usize, promoted: &[Option<i64>], count: usize) -> Plan {
        let mut picks: Vec<Pick> = (0..wait_len.min(count)).map(Pick::Wait).collect();
        let waiting =
            promoted.iter().enumerate().filter(|(_, p)| **p == Some(0)).map(|(i, _)| Pick::Promoted(i));
        picks.extend(waiting.take(count.saturating_sub(picks.len())));
        Plan { picks, count }
    }

    /// How many of `prio`'s lowest entries the rest of the decision needs.
    pub fn prio_needed(&self) -> usize {
        self.count.saturating_sub(self.picks.len())
    }

    /// The picks, in the order they are handed out: `promoted` as given to `new`, with ids;
    /// `prio` the lowest entries of `prio` as (priority, id), lowest first.
    pub fn finish(mut self, promoted: &[(Option<i64>, &[u8])], prio: &[(i64, &[u8])]) -> Vec<Pick> {
        let left = self.prio_needed();
        if left == 0 {
            return self.picks;
        }
        let mut cands: Vec<(i64, &[u8], Pick)> =
            prio.iter().take(left).enumerate().map(|(i, (p, id))| (*p, *id, Pick::Prio(i))).collect();
        for (i, (p, id)) in promoted.iter().enumerate() {
            if let Some(p) = p.filter(|p| *p != 0) {
                cands.push((p, id, Pick::Promoted(i)));
            }
        }
        cands.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
        self.picks.extend(cands.into_iter().take(left).map(|c| c.2));
        self.picks
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::{BTreeSet, VecDeque};

    /// The queue served job by job, as a worker would see it: promotions applied first (to
    /// wait's back, or into prio), then `count` pops — wait's front, else prio's lowest.
    fn served(
        wait: &[Vec<u8>],
        promoted: &[(Option<i64>, Vec<u8>)],
        prio: &[(i64, Vec<u8>)],
        count: usize,
    ) -> Vec<Vec<u8>> {
        let mut w: VecDeque<Vec<u8>> = wait.iter().cloned().collect();
        let mut p: BTreeSet<(i64, Vec<u8>)> = prio.iter().cloned().collect();
        for (pr, id) in promoted {
            match pr {
                Some(0) => w.push_back(id.clone()),
                Some(n) => {
                    p.insert((*n, id.clone()));
                }
                None => {}
            }
        }
        let mut out = Vec::new();
        while out.len() < count {
            if let Some(id) = w.pop_front() {
                out.push(id);
            } else if let Some(first) = p.pop_first() {
                out.push(first.1);
            } else {
                break;
            }
        }
        out
    }

    fn ids(prefix: u8, n: usize) -> Vec<Vec<u8>> {
        (0..n).map(|i| vec![prefix, b'0' + (i / 10) as u8, b'0' + (i % 10) as u8]).collect()
    }

    proptest! {
        #[test]
        fn picks_are_the_jobs_the_queue_serves_next(
            wait_n in 0usize..6,
            promoted_prios in proptest::collection::vec(proptest::option::weighted(0.8, 0i64..4), 0..6),
            prio_prios in proptest::collection::vec(1i64..4, 0..6),
            count in 1usize..12,
        ) {
            let wait = ids(b'w', wait_n);
            let promoted: Vec<(Option<i64>, Vec<u8>)> = promoted_prios.iter().copied().zip(ids(b'd', promoted_prios.len())).collect();
            let mut prio: Vec<(i64, Vec<u8>)> = prio_prios.iter().copied().zip(ids(b'p', prio_prios.len())).collect();
            prio.sort();

            let plan = Plan::new(wait.len(), &promoted.iter().map(|p| p.0).collect::<Vec<_>>(), count);
            let needed = plan.prio_needed();
            let prom: Vec<(Option<i64>, &[u8])> = promoted.iter().map(|(p, id)| (*p, id.as_slice())).collect();
            let lowest: Vec<(i64, &[u8])> = prio.iter().take(needed).map(|(p, id)| (*p, id.as_slice())).collect();
            let picks = plan.finish(&prom, &lowest);

            let got: Vec<Vec<u8>> = picks.iter().map(|p| match *p {
                Pick::Wait(i) => wait[i].clone(),
                Pick::Promoted(i) => promoted[i].1.clone(),
                Pick::Prio(i) => prio[i].1.clone(),
            }).collect();
            prop_assert_eq!(got, served(&wait, &promoted, &prio, count));
            // Only the lowest `needed` prio entries are ever read.
            prop_assert!(picks.iter().all(|p| !matches!(p, Pick::Prio(i) if *i >= needed)));
            let distinct: BTreeSet<_> = picks.iter().collect();
            prop_assert_eq!(distinct.len(), picks.len(), "no job twice");
        }
    }

    #[test]
    fn wait_first_then_promoted_then_by_priority_and_id() {
        let plan = Plan::new(1, &[Some(2), Some(0), None, Some(2)], 10);
        assert_eq!(plan.prio_needed(), 8);
        let picks = plan.finish(
            &[(Some(2), b"d2"), (Some(0), b"d0"), (None, b"dx"), (Some(2), b"d1")],
            &[(1, b"p9"), (2, b"d15")],
        );
        assert_eq!(
            picks,
            [
                Pick::Wait(0),
                Pick::Promoted(1),
                Pick::Prio(0),
                Pick::Promoted(3),
                Pick::Prio(1),
                Pick::Promoted(0)
            ]
        );
        assert_eq!(
            Plan::new(5, &[Some(0)], 3).finish(&[(Some(0), b"d")], &[]),
            [Pick::Wait(0), Pick::Wait(1), Pick::Wait(2)]
        );
    }
}
