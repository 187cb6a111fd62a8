//! The queues this node knows, and when each next needs upkeep: the list `TRA.QUEUES` shows
//! and the agenda upkeep works from.
//!
//! Kept in memory only, never in the keyspace, so no verb pays a write for it. A queue is
//! noted by the verbs that create jobs in it, and with the time something falls due by
//! those that give upkeep something to do — a job scheduled or delayed (its due time), a
//! lease granted (its deadline). It is also found by an incremental scan of every database
//! after the module loads, after a dataset is loaded (a restart from RDB or AOF, a full
//! sync), after a flush or a SWAPDB (of the databases it touched) and when the node becomes
//! a primary (a failover). A restart or a failover therefore loses nothing that matters:
//! the keyspace holds every job, and the scan finds every queue again. Upkeep visits only
//! the queues whose time has come; a queue leaves the list when upkeep finds none of its
//! keys left.

#![forbid(unsafe_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::os::raw::c_int;
use std::sync::{Mutex, MutexGuard};

/// A queue: its database and its name `Q`.
pub type Queue = (c_int, Vec<u8>);

struct Known {
    /// Each queue and the earliest time it needs upkeep (ms), if any.
    due: BTreeMap<Queue, Option<i64>>,
    /// The same, by time: the agenda.
    agenda: BTreeSet<(i64, Queue)>,
    /// The queue noted last and its time: the hot path's usual case (the same queue, nothing
    /// earlier) costs a comparison, not a lookup.
    last: Option<(Queue, Option<i64>)>,
    /// Jobs created with an EXPIRE time, per queue, by time: upkeep fails those still waiting
    /// when their time comes. Found again from their rows by the scan after a load.
    expiring: BTreeMap<Queue, BTreeSet<(i64, Vec<u8>)>>,
}

static KNOWN: Mutex<Known> = Mutex::new(Known {
    due: BTreeMap::new(),
    agenda: BTreeSet::new(),
    last: None,
    expiring: BTreeMap::new(),
});

fn known() -> MutexGuard<'static, Known> {
    // Nothing is left half-done under this lock that a panic elsewhere could expose.
    KNOWN.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether `have` (a queue's time) already covers `want`: nothing new to record.
fn covers(have: Option<i64>, want: Option<i64>) -> bool {
    match (have, want) {
        (_, None) => true,
        (Some(h), Some(w)) => h <= w,
        (None, Some(_)) => false,
    }
}

impl Known {
    fn set(&mut self, queue: Queue, at: Option<i64>) {
        if let Some(Some(old)) = self.due.insert(queue.clone(), at) {
            self.agenda.remove(&(old, queue.clone()));
        }
        if let Some(at) = at {
            self.agenda.insert((at, queue.clone()));
        }
        self.last = Some((queue, at));
    }
}

/// Queue `q` of database `db` exists, and needs upkeep at `at` (ms) or before, if given.
pub fn note(db: c_int, q: &[u8], at: Option<i64>) {
    let mut k = known();
    if k.last.as_ref().is_some_and(|((d, n), t)| *d == db && n == q && covers(*t, at)) {
        return;
    }
    let queue = (db, q.to_vec());
    match k.due.get(&queue) {
        Some(&t) if covers(t, at) => k.last = Some((queue, t)),
        _ => k.set(queue, at),
    }
}

/// Job `id` of queue `q` in database `db` expires at `at` (ms) unless claimed before.
pub fn note_expiry(db: c_int, q: &[u8], id: &[u8], at: i64) {
    known().expiring.entry((db, q.to_vec())).or_default().insert((at, id.to_vec()));
}

/// The ids of `queue` whose EXPIRE time is at or before `now`, at most `n`, taken off the
/// index (upkeep fails those still waiting and drops the rest).
pub fn take_expired(queue: &Queue, now: i64, n: usize) -> Vec<Vec<u8>> {
    let mut k = known();
    let Some(set) = k.expiring.get_mut(queue) else { return Vec::new() };
    let mut out = Vec::new();
    while out.len() < n {
        match set.first() {
            Some((at, _)) if *at <= now => {}
            _ => break,
        }
        if let Some((_, id)) = set.pop_first() {
            out.push(id);
        }
    }
    if set.is_empty() {
        k.expiring.remove(queue);
    }
    out
}

/// When the next job of `queue` known to upkeep expires.
pub fn next_expiry(queue: &Queue) -> Option<i64> {
    known().expiring.get(queue).and_then(|s| s.first()).map(|(at, _)| *at)
}

/// After upkeep visited `queue`: its next time (None: nothing pending).
pub fn reschedule(queue: &Queue, next: Option<i64>) {
    known().set(queue.clone(), next);
}

/// `queue` is gone (none of its keys is left): off the agenda and out of the known queues.
pub fn forget(queue: &Queue) {
    let mut k = known();
    if let Some(Some(old)) = k.due.remove(queue) {
        k.agenda.remove(&(old, queue.clone()));
    }
    k.expiring.remove(queue);
    k.last = None;
}

/// The queue whose time comes first, if it has come by `now`; it stays on the agenda until
/// `reschedule`.
pub fn first_due(now: i64) -> Option<Queue> {
    known().agenda.first().filter(|(at, _)| *at <= now).map(|(_, q)| q.clone())
}

/// When the earliest queue needs upkeep.
pub fn next_due() -> Option<i64> {
    known().agenda.first().map(|(at, _)| *at)
}

/// Forgets the queues of database `db`, or of all with -1 (the scan finds them again).
pub fn clear(db: c_int) {
    let mut k = known();
    k.due.retain(|(d, _), _| db >= 0 && *d != db);
    k.agenda.retain(|(_, (d, _))| db >= 0 && *d != db);
    k.expiring.retain(|(d, _), _| db >= 0 && *d != db);
    k.last = None;
}

pub fn len() -> usize {
    known().due.len()
}

/// Database `db`'s queues in name order, from position `from`, at most `count`: the page,
/// and the position to continue from (None at the end).
pub fn page(db: c_int, from: usize, count: usize) -> (Vec<Vec<u8>>, Option<usize>) {
    let k = known();
    let names =
        k.due.range::<Queue, _>((db, Vec::new())..).take_while(|((d, _), _)| *d == db).map(|((_, n), _)| n);
    let page: Vec<Vec<u8>> = names.clone().skip(from).take(count).cloned().collect();
    let end = from.saturating_add(page.len());
    let more = names.clone().nth(end).is_some();
    (page, more.then_some(end))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The registry is process-wide: its tests take turns.
    static TURN: Mutex<()> = Mutex::new(());

    /// This test's turn, on an empty registry.
    fn fresh() -> MutexGuard<'static, ()> {
        let turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
        clear(-1);
        turn
    }

    fn q(db: c_int, name: &[u8]) -> Queue {
        (db, name.to_vec())
    }

    #[test]
    fn an_agenda_by_time_and_a_list_by_name() {
        let _turn = fresh();
        note(0, b"b", Some(50));
        note(0, b"a", Some(70));
        note(0, b"c", None);
        note(0, b"c", Some(60));
        note(0, b"a", Some(80)); // later than it has: no change
        note(0, b"a", None); // already known: no change
        note(0, b"a", Some(40)); // earlier: moves up
        note(3, b"z", Some(10));
        assert_eq!(len(), 4);
        assert_eq!(page(0, 0, 2), (vec![b"a".to_vec(), b"b".to_vec()], Some(2)));
        assert_eq!(page(0, 2, 2), (vec![b"c".to_vec()], None));
        assert_eq!(page(3, 0, 10), (vec![b"z".to_vec()], None));
        assert_eq!(page(1, 0, 10), (vec![], None));
        assert_eq!(first_due(5), None, "nothing due yet");
        assert_eq!(first_due(45), Some(q(3, b"z")));
        reschedule(&q(3, b"z"), Some(100));
        assert_eq!(first_due(45), Some(q(0, b"a")));
        reschedule(&q(0, b"a"), None);
        assert_eq!(next_due(), Some(50), "nothing pending: off the agenda");
        assert_eq!(len(), 4, "but still known");
        forget(&q(0, b"a"));
        assert_eq!(len(), 3, "gone");
        clear(3);
        assert_eq!(len(), 2);
        clear(-1);
        assert_eq!((len(), next_due()), (0, None));
    }

    #[test]
    fn noting_a_known_queue_never_loses_its_time() {
        let _turn = fresh();
        note(0, b"a", Some(70));
        note(0, b"b", Some(50));
        note(0, b"a", None); // `b` noted last: the lookup decides
        note(0, b"b", None); // `b` noted last: the shortcut decides
        assert_eq!(first_due(100), Some(q(0, b"b")));
        reschedule(&q(0, b"b"), None);
        assert_eq!(next_due(), Some(70), "a keeps its time");
        // The same name in another database is another queue, even right after it.
        note(0, b"a", None);
        note(3, b"a", None);
        assert_eq!(len(), 3);
        assert_eq!(page(3, 0, 10), (vec![b"a".to_vec()], None));
        clear(-1);
    }

    #[test]
    fn expiring_jobs_come_due_in_time_order() {
        let _turn = fresh();
        let (mine, other) = (q(0, b"q"), q(1, b"q"));
        note_expiry(0, b"q", b"j2", 20);
        note_expiry(0, b"q", b"j1", 10);
        note_expiry(0, b"q", b"j3", 30);
        note_expiry(0, b"q", b"j4", 30);
        note_expiry(1, b"q", b"k", 5);
        assert_eq!(next_expiry(&mine), Some(10));
        assert_eq!(take_expired(&mine, 9, 10), Vec::<Vec<u8>>::new(), "none due yet");
        assert_eq!(take_expired(&mine, 20, 0), Vec::<Vec<u8>>::new(), "at most n");
        assert_eq!(take_expired(&mine, 20, 10), [b"j1".to_vec(), b"j2".to_vec()], "due at their time");
        assert_eq!(next_expiry(&mine), Some(30));
        assert_eq!(take_expired(&mine, 100, 1), [b"j3".to_vec()]);
        assert_eq!(take_expired(&mine, 100, 5), [b"j4".to_vec()]);
        assert_eq!(next_expiry(&mine), None, "taken off the index");
        assert_eq!(next_expiry(&other), Some(5), "another database's queue is its own");
        clear(-1);
        assert_eq!(next_expiry(&other), None);
    }

    #[test]
    fn clearing_one_database_keeps_the_others() {
        let _turn = fresh();
        note(0, b"a", Some(50));
        note(1, b"b", Some(10));
        note_expiry(0, b"a", b"j", 60);
        note_expiry(1, b"b", b"k", 20);
        clear(1);
        assert_eq!(len(), 1);
        assert_eq!(page(1, 0, 10), (vec![], None));
        assert_eq!(first_due(100), Some(q(0, b"a")), "db 1's time is off the agenda");
        assert_eq!((next_expiry(&q(0, b"a")), next_expiry(&q(1, b"b"))), (Some(60), None));
        clear(-1);
        assert_eq!((len(), next_due(), next_expiry(&q(0, b"a"))), (0, None, None));
    }
}
