//! The holder of a job: the lease a worker's token gives it, checked by the row and the
//! active set together.

use crate::errors::{lease, Refusal};
use crate::host::{Exec, Key, Kind, Str};
use crate::keyspace::Role;

use super::{existing_row, Row};

/// The job a holder verb (EXTEND, COMPLETE, FAIL, DELAY, REQUEUE) acts on: its row, which
/// must exist, and the active set. Opened first; the verb then opens its other keys, and
/// only then asks whether the job is held — so a wrong-typed key answers before a lease.
pub struct Holder {
    pub row: Key,
    pub active: Key,
    pub id: Str,
}

impl Holder {
    pub fn open(x: &Exec) -> Result<Holder, Refusal> {
        let row = existing_row(x)?;
        let active = x.open_as(Role::Active, Kind::ZSet)?;
        Ok(Holder { row, active, id: x.string(x.id)? })
    }

    /// Held by `token`: the row says active with this token, and the active set agrees.
    pub fn holds(&self, token: &[u8]) -> bool {
        Row(&self.row).held_by(token) && self.active.zscore(self.id.str_ref()).is_some()
    }

    /// `EMQLEASE` unless held by `token`: a wrong token, a reclaimed lease and a finished job
    /// are one condition to the holder.
    pub fn check(&self, token: &[u8]) -> Result<(), Refusal> {
        if self.holds(token) {
            Ok(())
        } else {
            Err(lease(self.id.bytes()))
        }
    }
}
