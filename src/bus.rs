//! The bus's shared mechanics, in the wire's terms: a message appended once to its topic's
//! stream `emq:{T}:bus` (entry `id <ID> payload <bytes>`, capped with `MAXLEN ~`), deduplicated
//! through the `emq:{T}:seen` window (id → first-append time, trimmed as it goes). APPEND and
//! PUBLISH compose these; both declare `bus` then `seen` and take `id payload [MAXLEN n]`.

#![forbid(unsafe_code)]

use crate::config;
use crate::domain::{self, args::Opt, bus};
use crate::errors::{self, Refusal};
use crate::host::command::{opt, q, val, Arg, Keys, Spec::*, Ty};
use crate::host::{ArgStr, Exec, Key, Kind, Lit, Str, StrRef};
use crate::keyspace::Role::*;
use crate::metrics;

/// The fields of a bus stream entry: `id <ID> payload <bytes>`.
static ID: Lit = Lit::new(c"id");
static PAYLOAD: Lit = Lit::new(c"payload");

/// The keys and arguments of APPEND and PUBLISH.
pub const KEYS: Keys = Keys::of(&[q(Bus, Append), q(Seen, Update)]);
pub const ARGS: &[Arg] = &[
    val("id", Ty::Str),
    val("payload", Ty::Str).payload(),
    opt("maxlen", "MAXLEN", "n", Ty::Int).range(bus::MAXLEN),
];

/// The arguments of APPEND and PUBLISH, shaped.
pub struct Message<'a> {
    pub id: ArgStr<'a>,
    pub payload: ArgStr<'a>,
    max_len: Option<i64>,
}

impl<'a> Message<'a> {
    pub fn shape(args: &[ArgStr<'a>]) -> Result<Message<'a>, Refusal> {
        match args {
            [id, payload, rest @ ..] => Ok(Message {
                id: *id,
                payload: *payload,
                max_len: domain::args::options(rest, &[Opt::MaxLen])?.max_len,
            }),
            _ => Err(Refusal::Usage),
        }
    }

    /// Domain, before any key is read: the id gate, then the ranges. Returns the stream cap.
    pub fn check(&self) -> Result<i64, Refusal> {
        domain::message_id(&self.id)?;
        domain::payload(&self.payload, config::max_payload(), "payload")?;
        bus::max_len(self.max_len, config::get(&config::BUS_MAXLEN))
    }
}

/// A new message, checked against the keyspace; nothing written yet.
pub struct Append<'a> {
    bus: Key,
    seen: Key,
    cap: i64,
    now: i64,
    /// `seen` entries already outside the window, at most `SEEN_TRIM_BATCH`.
    stale: Vec<Str>,
    id: StrRef<'a>,
    payload: StrRef<'a>,
}

/// Opens `bus` and `seen`, type-checks them and reads the window: `None` for
/// a duplicate — an id whose first append is less than `trafikey.bus-window-ms` old, whether
/// or not a trim has run — which writes nothing.
pub fn plan<'a>(x: &Exec, m: &Message<'a>, cap: i64) -> Result<Option<Append<'a>>, Refusal> {
    let stream = x.open_as(Bus, Kind::Stream)?;
    let seen = x.open_as(Seen, Kind::ZSet)?;
    let now = x.now();
    let window = config::get(&config::BUS_WINDOW_MS);
    if bus::duplicate(seen.zscore(m.id.str_ref()), now, window) {
        metrics::add(&metrics::BUS_DUPLICATES, 1);
        return Ok(None);
    }
    // The message's own old entry is not trimmed: the ZADD below moves it.
    let floor = bus::window_floor(now, window) as f64;
    let stale: Vec<Str> = seen
        .zrange(f64::NEG_INFINITY, floor, bus::SEEN_TRIM_BATCH.saturating_add(1))
        .into_iter()
        .map(|(member, _)| member)
        .filter(|s| s.bytes() != m.id.bytes())
        .take(bus::SEEN_TRIM_BATCH)
        .collect();
    Ok(Some(Append { bus: stream, seen, cap, now, stale, id: m.id.str_ref(), payload: m.payload.str_ref() }))
}

impl Append<'_> {
    /// The writes, XADD first (the only one the server could refuse): the entry with the id
    /// the server picks, the stream's trim, the window's trim, then the id's first-append
    /// time. Each replicates itself as its exact effect. Returns the entry id.
    pub fn write(self) -> Result<Str, Refusal> {
        let id = self.id;
        let fields: [StrRef; 4] = [ID.str_ref(), id, PAYLOAD.str_ref(), self.payload];
        if fields.iter().any(|p| p.is_missing()) {
            return Err(errors::host_reply());
        }
        let entry = self.bus.xadd(&fields)?;
        self.bus.xtrim_approx(self.cap)?;
        let stale: Vec<StrRef> = self.stale.iter().map(Str::str_ref).collect();
        let trimmed = self.seen.zrem_many(&stale);
        self.seen.zadd(self.now, id)?;
        metrics::add(&metrics::BUS_APPENDED, 1);
        metrics::add(&metrics::SEEN_TRIMMED, trimmed as u64);
        Ok(entry)
    }
}
