//! The bus's shared mechanics, in the wire's terms: a message appended once to its topic's
//! stream `emq:{T}:bus` (entry `id <ID> payload <bytes>`, capped with `MAXLEN ~`), deduplicated
//! through the `emq:{T}:seen` window (id → first-append time, trimmed as it goes). APPEND and
//! PUBLISH compose these; both declare `bus` then `seen` and take `id payload [MAXLEN n]`.

use valkey_module::raw::RedisModuleString;

use crate::config;
use crate::domain::{self, args::Opt, bus};
use crate::errors::{self, Refusal};
use crate::host::{Exec, Key, Kind, Lit, Str};
use crate::metrics;

/// The fields of a bus stream entry: `id <ID> payload <bytes>`.
static ID: Lit = Lit::new(c"id");
static PAYLOAD: Lit = Lit::new(c"payload");

/// The arguments of APPEND and PUBLISH, shaped.
pub struct Message<'a> {
    pub id: &'a [u8],
    pub payload: &'a [u8],
    max_len: Option<i64>,
}

impl<'a> Message<'a> {
    pub fn shape(verb: &str, args: &[&'a [u8]]) -> Result<Message<'a>, Refusal> {
        match args {
            [id, payload, rest @ ..] => Ok(Message { id, payload, max_len: domain::args::options(rest, &[Opt::MaxLen])?.max_len }),
            _ => Err(Refusal::Shape(format!("{verb} takes id payload [MAXLEN n]"))),
        }
    }

    /// Domain, before any key is read: the id gate, then the ranges. Returns the stream cap.
    pub fn check(&self) -> Result<i64, Refusal> {
        domain::message_id(self.id)?;
        domain::payload(self.payload, config::max_payload(), "payload")?;
        bus::max_len(self.max_len, config::get(&config::BUS_MAXLEN))
    }
}

/// A new message, checked against the keyspace; nothing written yet.
pub struct Append {
    bus: Key,
    seen: Key,
    cap: i64,
    now: i64,
    /// `seen` entries already outside the window, at most `SEEN_TRIM_BATCH`.
    stale: Vec<Str>,
}

/// Opens `bus` (key 0) and `seen` (key 1), type-checks them and reads the window: `None` for
/// a duplicate — an id whose first append is less than `trafikey.bus-window-ms` old, whether
/// or not a trim has run — which writes nothing.
pub fn plan(x: &Exec, m: &Message, cap: i64) -> Result<Option<Append>, Refusal> {
    let stream = x.open(0, true);
    stream.exists_as(Kind::Stream)?;
    let seen = x.open(1, true);
    seen.exists_as(Kind::ZSet)?;
    let now = x.now();
    let window = config::get(&config::BUS_WINDOW_MS);
    if bus::duplicate(seen.zscore(x.arg_str(0)), now, window) {
        metrics::add(&metrics::BUS_DUPLICATES, 1);
        return Ok(None);
    }
    // The message's own old entry is not trimmed: the ZADD below moves it.
    let floor = bus::window_floor(now, window) as f64;
    let stale: Vec<Str> = seen
        .zrange(f64::NEG_INFINITY, floor, bus::SEEN_TRIM_BATCH.saturating_add(1))
        .into_iter()
        .map(|(member, _)| member)
        .filter(|s| s.bytes() != m.id)
        .take(bus::SEEN_TRIM_BATCH)
        .collect();
    Ok(Some(Append { bus: stream, seen, cap, now, stale }))
}

impl Append {
    /// The writes, XADD first (the only one the server could refuse): the entry with the id
    /// the server picks, the stream's trim, the window's trim, then the id's first-append
    /// time. Each replicates itself as its exact effect. Returns the entry id.
    pub fn write(self, x: &Exec) -> Result<Str, Refusal> {
        let id = x.arg_str(0);
        let fields: [*mut RedisModuleString; 4] = [ID.get(), id, PAYLOAD.get(), x.arg_str(1)];
        if fields.iter().any(|p| p.is_null()) {
            return Err(errors::host_reply());
        }
        let entry = self.bus.xadd(&fields)?;
        self.bus.xtrim_approx(self.cap)?;
        let stale: Vec<*mut RedisModuleString> = self.stale.iter().map(Str::ptr).collect();
        let trimmed = self.seen.zrem_many(&stale);
        self.seen.zadd(self.now, id)?;
        metrics::add(&metrics::BUS_APPENDED, 1);
        metrics::add(&metrics::SEEN_TRIMMED, trimmed as u64);
        Ok(entry)
    }
}
