//! Custom ids: `ALIAS key` on a producer names the job by the client's key as well as by its
//! branded id, in the queue's alias hash `emq:{Q}:alias` (key → id). The hash is found, not
//! declared: opened as the caller. An entry lives exactly as long as its job's row (field
//! `k` holds the key): every path that deletes a row deletes the entry that still names it.

use crate::domain;
use crate::errors::Refusal;
use crate::host::{Access, Exec, Key, Kind, Str, StrRef};
use crate::keyspace::Role;

use super::{field, NewJob};

/// Longest alias, in bytes. A client's own id may be a URL or a composite key: BullMQ takes
/// any length, and 4 KiB holds what such ids are in practice.
pub const ALIAS_MAX: usize = 4096;

/// The range check of an `ALIAS key`: 1..=4096 bytes.
pub fn check(alias: &[u8]) -> Result<(), Refusal> {
    domain::bytes_len(alias, 1, ALIAS_MAX, "ALIAS")
}

/// The alias hash as a producer opens it: read (is the key live?), then written.
pub struct Aliases {
    key: Key,
}

impl Aliases {
    pub fn open(x: &mut Exec) -> Result<Aliases, Refusal> {
        let key = x.open_undeclared(Role::Alias, b"", Access::Update)?;
        key.exists_as(Kind::Hash)?;
        Ok(Aliases { key })
    }

    /// The key names a job now: a producer giving it creates nothing (as an existing id).
    pub fn live(&self, alias: StrRef<'_>) -> bool {
        self.key.hget_at(alias).is_some()
    }

    /// The job the key names now, if any.
    pub fn holder(&self, alias: StrRef<'_>) -> Option<Str> {
        self.key.hget_at(alias)
    }

    pub fn set(&self, alias: StrRef<'_>, id: StrRef<'_>) -> Result<(), Refusal> {
        self.key.hset_at(alias, id)
    }

    /// The handle closed (see `Key::close`); [`Aliases::reopen`] opens the hash again.
    pub fn close(&mut self) {
        self.key.close();
    }

    /// The hash opened again, seeing the call's writes since this handle was opened (an
    /// alias entry deleted through another handle may have emptied and deleted it).
    pub fn reopen(&self) -> Result<Aliases, Refusal> {
        Ok(Aliases { key: self.key.reopen(true)? })
    }
}

/// The alias entries of rows about to be deleted: decided and opened as the caller before
/// anything is written, deleted with the rows. A queue without an alias hash pays one
/// lookup per call, and its rows are not read.
#[derive(Default)]
pub struct Unalias {
    key: Option<Key>,
    fields: Vec<Str>,
}

impl Unalias {
    /// For the rows of jobs being deleted (each opened for writing). A call that deletes no
    /// row does nothing here; one that does looks the hash up once, and reads the rows' `k`
    /// only when the hash exists.
    pub fn plan<'r>(
        x: &mut Exec,
        rows: impl IntoIterator<Item = (&'r [u8], &'r Key)>,
    ) -> Result<Unalias, Refusal> {
        let mut rows = rows.into_iter().peekable();
        if rows.peek().is_none() || !x.undeclared_exists(Role::Alias, b"")? {
            return Ok(Unalias::default());
        }
        let named: Vec<(&[u8], Str)> =
            rows.filter_map(|(id, row)| row.hget(&field::ALIAS).map(|k| (id, k))).collect();
        Unalias::open(x, named)
    }

    /// For one row the call has open: its `k` read first, the hash looked up only with one.
    pub fn of_row(x: &mut Exec, id: &[u8], row: &Key) -> Result<Unalias, Refusal> {
        match row.hget(&field::ALIAS) {
            Some(k) => Unalias::open(x, vec![(id, k)]),
            None => Ok(Unalias::default()),
        }
    }

    /// The entries among `named` (id, its `k`) that still name their job, the hash opened
    /// as the caller.
    fn open(x: &mut Exec, named: Vec<(&[u8], Str)>) -> Result<Unalias, Refusal> {
        if named.is_empty() {
            return Ok(Unalias::default());
        }
        let key = x.open_undeclared(Role::Alias, b"", Access::Update)?;
        if !key.exists_as(Kind::Hash)? {
            return Ok(Unalias::default());
        }
        let fields: Vec<Str> = named
            .into_iter()
            .filter(|(id, k)| key.hget_at(k.str_ref()).is_some_and(|v| v.bytes() == *id))
            .map(|(_, k)| k)
            .collect();
        // Kept open only with entries of its own to delete: another Unalias of the same call
        // may empty the hash, and this handle would then point at the deleted key. While each
        // open one still has an entry there, none of the others can empty it.
        if fields.is_empty() {
            return Ok(Unalias::default());
        }
        Ok(Unalias { key: Some(key), fields })
    }

    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// The first entry planned: for one row's, its alias.
    pub fn first(&self) -> Option<&Str> {
        self.fields.first()
    }

    /// Delete the planned entries (one HDEL effect).
    pub fn apply(&self) {
        if let (Some(key), false) = (&self.key, self.fields.is_empty()) {
            key.hdel_at(&self.fields.iter().map(Str::str_ref).collect::<Vec<_>>());
        }
    }
}
/// The job's ALIAS already names a job of the queue.
pub fn live_alias(aliases: Option<&Aliases>, job: &NewJob) -> bool {
    matches!((aliases, job.alias), (Some(h), Some(a)) if h.live(a.str_ref()))
}

/// Record the job's ALIAS (when it has one) as naming `id`.
pub fn name_alias(aliases: Option<&Aliases>, job: &NewJob, id: &Str) -> Result<(), Refusal> {
    match (aliases, job.alias) {
        (Some(h), Some(a)) => h.set(a.str_ref(), id.str_ref()),
        _ => Ok(()),
    }
}
