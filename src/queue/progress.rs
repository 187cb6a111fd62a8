//! A job's progress: the value TRA.PROGRESS (its holder) and TRA.SETPROGRESS (anyone) store
//! in its row, with its `progress` event.

use crate::domain::{self, args::Opt};
use crate::errors::Refusal;
use crate::host::{ArgStr, Exec, Key};

use super::{field, Event, Events};

/// A progress report and whether its event carries it.
#[derive(Clone, Copy)]
pub struct Report<'a> {
    pub value: ArgStr<'a>,
    pub echo: bool,
}

impl<'a> Report<'a> {
    pub fn shape(value: ArgStr<'a>, rest: &[ArgStr<'a>]) -> Result<Report<'a>, Refusal> {
        Ok(Report { value, echo: domain::args::options(rest, &[Opt::Echo])?.echo })
    }

    pub fn check(&self) -> Result<(), Refusal> {
        domain::payload(&self.value, domain::PROGRESS_MAX, "progress")
    }

    /// Stores the report in `row` and writes its event.
    pub fn write(&self, x: &Exec, row: &Key, id: &crate::host::Str, events: &Events) -> Result<(), Refusal> {
        let value = self.value.str_ref();
        if value.is_missing() {
            return Err(crate::errors::host_reply());
        }
        row.hset(&[(&field::PROGRESS, value)])?;
        events.emit(x, Some(id.str_ref()), Event::Progress { value: self.echo.then_some(value) })
    }
}
