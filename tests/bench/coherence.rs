//! The coherence drop: `TRA.DROP 1 <row> <version>` beside `EVALSHA` of the coherence drop's
//! reference Lua script (tests/fixtures/coherence_drop.lua, read and loaded with SCRIPT LOAD
//! when the run starts), each on a set of rows of its own
//! holding the same frames, hit once each with the same versions.
//!
//! Row `i` holds a frame: a 14-byte version (`ECC` + 11 Base62 chars of a snowflake) and a
//! small value. Its incoming version is, by a hash of `i`, newer (half the rows: dropped),
//! equal or older (a quarter each: kept). After a lane has run, every row is read back: the
//! dropped ones gone, the kept ones unchanged; the caller compares the lanes' dropped rows.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::load::{self, Measured, Pipe};
use crate::queue::{jid, Shape};
use crate::resp::{Conn, Reply};
use crate::server::Server;

/// The brand of the versions.
const BRAND: &[u8; 3] = b"ECC";
/// What follows the version in a frame.
const VALUE: &[u8] = b"{\"name\":\"row\",\"qty\":3,\"ok\":true}";
/// The snowflakes start here: ms since the Unix epoch (late 2023), shifted as a snowflake's
/// timestamp is; the low 22 bits are worker and sequence.
const BASE_MS: u64 = 1_700_000_000_000;

/// Who serves the drop.
pub enum Lane {
    Native,
    /// The reference script, by its SHA1.
    Script(String),
}

impl Lane {
    /// Load the reference script from `path` (read now, never copied) with SCRIPT LOAD.
    pub fn load_script(c: &mut Conn, path: &Path) -> Result<Lane, String> {
        let src = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
        match c.call(&[b"SCRIPT", b"LOAD", &src]) {
            Reply::Bulk(b) => Ok(Lane::Script(String::from_utf8_lossy(&b).into_owned())),
            other => Err(format!("SCRIPT LOAD {}: {other:?}", path.display())),
        }
    }

    /// Whether the module of this server has TRA.DROP.
    pub fn native_here(c: &mut Conn) -> bool {
        match c.call(&[b"COMMAND", b"INFO", b"TRA.DROP"]) {
            Reply::Array(a) => a.first().is_some_and(|x| !x.is_nil()),
            _ => false,
        }
    }

    /// The lane's own set of rows: same key length in both lanes.
    fn key(&self, i: u64) -> Vec<u8> {
        match self {
            Lane::Native => format!("cache:{{t}}:{i}").into_bytes(),
            Lane::Script(_) => format!("cache:{{l}}:{i}").into_bytes(),
        }
    }

    fn drop_cmd(&self, p: &mut Pipe, key: &[u8], version: &[u8]) {
        match self {
            Lane::Native => p.cmd(&[b"TRA.DROP", b"1", key, version]),
            Lane::Script(sha) => p.cmd(&[b"EVALSHA", sha.as_bytes(), b"1", key, version]),
        }
    }

    /// The top-level command its calls show in commandstats.
    pub fn commands(&self) -> &'static [&'static str] {
        match self {
            Lane::Native => &["tra.drop"],
            Lane::Script(_) => &["evalsha"],
        }
    }
}

/// The version of snowflake `n`: `ECC` + 11 Base62 chars.
pub fn version(n: u64) -> [u8; 14] {
    let mut v = jid(n);
    v[..3].copy_from_slice(BRAND);
    v
}

fn mix(mut z: u64) -> u64 {
    // splitmix64
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Row `i`'s (stored snowflake, incoming snowflake): stored somewhere in a day of mints;
/// incoming newer by up to ~17 minutes (half the rows), the same, or older by as much.
pub fn snowflakes(i: u64) -> (u64, u64) {
    let h = mix(i);
    let g = mix(h);
    let stored = ((BASE_MS + h % 86_400_000) << 22) | (g & 0x3f_ffff);
    let delta = 1 + (g >> 22) % (1 << 32);
    let incoming = match h >> 62 {
        0 | 1 => stored + delta,
        2 => stored,
        _ => stored - delta,
    };
    (stored, incoming)
}

/// Row `i`'s frame: its stored version, then the value.
pub fn frame(i: u64) -> Vec<u8> {
    [&version(snowflakes(i).0)[..], VALUE].concat()
}

/// Whether row `i` should be dropped: the incoming version's bytes `[3..14]` strictly
/// greater than the frame's (the rule `TRA.DROP` applies), computed here on the bytes, not
/// the numbers.
pub fn expected_drop(i: u64) -> bool {
    let (s, v) = snowflakes(i);
    version(v)[3..] > version(s)[3..]
}

/// Rows `0..n` of the lane set to their frames (not measured).
pub fn populate(srv: &Server, lane: &Lane, n: u64, limit: Duration) -> Result<(), String> {
    let mut c = srv.conn()?;
    let t0 = Instant::now();
    let mut p = Pipe::new();
    let mut i = 0;
    while i < n {
        if t0.elapsed() > limit {
            return Err("populating the rows ran past the time limit".into());
        }
        let end = (i + 1000).min(n);
        for j in i..end {
            p.cmd(&[b"SET", &lane.key(j), &frame(j)]);
        }
        for r in p.run(&mut c)? {
            if !matches!(r, Reply::Simple(_)) {
                return Err(format!("SET of a row answered {r:?}"));
            }
        }
        i = end;
    }
    Ok(())
}

/// Each row `0..n` of the lane hit once with its incoming version: each connection its
/// share, `depth` calls per write. Each connection hands back the rows its calls dropped
/// (answered 1). Latency: the call's round trip (pipelined: its batch's), per call.
pub fn drops(srv: &Server, lane: &Lane, n: u64, s: Shape) -> Result<Measured<Vec<u64>>, String> {
    load::phase(srv, s.conns, s.limit, |cx| {
        let mut p = Pipe::new();
        let mine: Vec<u64> = load::share(n, s.conns, cx.index).collect();
        let mut dropped = Vec::new();
        for chunk in mine.chunks(s.depth) {
            cx.check_time()?;
            let keys: Vec<(Vec<u8>, [u8; 14])> =
                chunk.iter().map(|&i| (lane.key(i), version(snowflakes(i).1))).collect();
            let t = Instant::now();
            for (key, v) in &keys {
                lane.drop_cmd(&mut p, key, v);
            }
            let r = p.run(cx.conn)?;
            cx.record(t, chunk.len());
            for (&i, r) in chunk.iter().zip(&r) {
                match r {
                    Reply::Int(1) => dropped.push(i),
                    Reply::Int(0) => {}
                    other => return Err(format!("the drop of row {i} answered {other:?}")),
                }
            }
        }
        Ok((mine.len() as u64, dropped))
    })
}

/// After a lane ran: the rows its calls said they dropped are exactly those with a newer
/// version, and the keyspace agrees — those rows gone, every other row still its frame.
/// Gives the dropped rows, sorted.
pub fn verify(srv: &Server, lane: &Lane, n: u64, said: &[Vec<u64>]) -> Result<Vec<u64>, String> {
    let mut dropped: Vec<u64> = said.iter().flatten().copied().collect();
    dropped.sort_unstable();
    let want: Vec<u64> = (0..n).filter(|&i| expected_drop(i)).collect();
    if dropped != want {
        let first = (0..n)
            .find(|i| dropped.binary_search(i).is_ok() != expected_drop(*i))
            .map_or_else(|| "a row answered twice".into(), |i| format!("row {i}"));
        return Err(format!(
            "{} rows answered dropped where {} have a newer version (first difference: {first})",
            dropped.len(),
            want.len()
        ));
    }
    let mut c = srv.conn()?;
    let mut p = Pipe::new();
    let mut i = 0;
    while i < n {
        let end = (i + 1000).min(n);
        for j in i..end {
            p.cmd(&[b"GET", &lane.key(j)]);
        }
        for (j, r) in (i..end).zip(p.run(&mut c)?) {
            let ok = if expected_drop(j) { r.is_nil() } else { r == Reply::Bulk(frame(j)) };
            if !ok {
                return Err(format!(
                    "row {j} holds {r:?} after its drop (expected {})",
                    if expected_drop(j) { "none" } else { "its frame" }
                ));
            }
        }
        i = end;
    }
    Ok(dropped)
}
