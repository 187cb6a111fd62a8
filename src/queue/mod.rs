//! The queue's shared mechanics, in the wire's terms, one concept a file: the job row and its
//! fields (`row`), making jobs ready and promotion (`ready`), taking jobs (`claim`),
//! finishing them for good (`finish`) and retention (`retention`), reclaiming lapsed leases
//! (`stall`), the holder's lease (`holder`), events (`events`), and the options' own
//! mechanics (`alias`, `dedup`, `limit`, `sched`, `tally`, `log`, `progress`, `view`); and
//! below, what the queue tells upkeep's agenda. Verbs compose these, opening each key by its
//! role; what two verbs share lives here, never in a verb's file.

#![forbid(unsafe_code)]

pub mod alias;
pub mod claim;
pub mod dedup;
pub mod events;
pub mod finish;
pub mod holder;
pub mod limit;
pub mod log;
pub mod progress;
pub mod ready;
pub mod retention;
pub mod row;
pub mod sched;
pub mod stall;
pub mod tally;
pub mod view;

pub use alias::Aliases;
pub use dedup::{DedupClaim, Release};
pub use events::{Event, Events};
pub use holder::Holder;
pub use ready::{drains, End, Expiry, Promotion, Ready, Sets};
pub use retention::{
    age, companions_of, doomed_rows, doomed_rows_opened, keep_for, log_of, open_doomed, Companions, Retire,
};
pub(crate) use row::Pairs;
pub use row::{existing_row, field, meta, Found, NewJob, Row, State};
pub use tally::{Tallied, Tally};

use crate::host::Exec;

/// Something of this queue falls due at `at_ms` (a scheduled or delayed job, a lease): upkeep
/// knows the queue from now on, and looks no later than then.
pub fn due_at(x: &Exec, at_ms: i64) {
    crate::registry::note(crate::host::timer::selected(x.ctx()), x.queue, Some(at_ms));
    crate::host::timer::wake_by(x.ctx(), at_ms);
}

/// Job `id` of this queue expires at `at_ms` (EXPIRE): upkeep fails it then if no CLAIM has
/// taken it. What upkeep knows of expiring jobs lives in memory like the rest of its agenda
/// (`registry`); after a restart its scan finds them again from their rows.
pub fn expiring(x: &Exec, id: &[u8], at_ms: i64) {
    let db = crate::host::timer::selected(x.ctx());
    crate::registry::note_expiry(db, x.queue, id, at_ms);
    due_at(x, at_ms);
}

/// A job was created in this queue: the node knows the queue from now on (`TRA.QUEUES`).
pub fn exists(x: &Exec) {
    crate::registry::note(crate::host::timer::selected(x.ctx()), x.queue, None);
}
