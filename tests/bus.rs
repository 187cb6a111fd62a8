//! The bus verbs against a real server (src/CONTRACT.md, "Bus"): EMQ.APPEND, EMQ.PUBLISH and
//! EMQ.FAILURES — dedup and its window, the stream cap, a real subscriber, channel ACL,
//! counters with TTLs, effects on a replica and in the AOF, and every bad input.
// A test may panic: that is how it fails. The module's own rules are for src/.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

use trafikey_support::*;

const VK: &[u8] = b"{emq}:version";

/// A bus topic's keys.
struct Topic(String);

impl Topic {
    fn new(name: &str) -> Topic {
        Topic(name.to_string())
    }
    fn bus(&self) -> String {
        format!("emq:{{{}}}:bus", self.0)
    }
    fn seen(&self) -> String {
        format!("emq:{{{}}}:seen", self.0)
    }
    fn fails(&self, id: &str) -> String {
        format!("emq:{{{}}}:fails:{id}", self.0)
    }
    /// `verb 2 bus seen id payload extra...` (APPEND or PUBLISH).
    fn cmd(&self, verb: &str, id: &str, payload: &[u8], extra: &[&[u8]]) -> Vec<Vec<u8>> {
        let mut v = vec![
            verb.as_bytes().to_vec(),
            b"2".to_vec(),
            self.bus().into_bytes(),
            self.seen().into_bytes(),
            id.as_bytes().to_vec(),
            payload.to_vec(),
        ];
        v.extend(extra.iter().map(|a| a.to_vec()));
        v
    }
    fn append(&self, c: &mut Conn, id: &str, payload: &[u8], extra: &[&[u8]]) -> Reply {
        c.call_v(&self.cmd("EMQ.APPEND", id, payload, extra))
    }
    fn publish(&self, c: &mut Conn, id: &str, payload: &[u8], extra: &[&[u8]]) -> Reply {
        c.call_v(&self.cmd("EMQ.PUBLISH", id, payload, extra))
    }
    fn failures(&self, c: &mut Conn, id: &str, extra: &[&[u8]]) -> Reply {
        let key = self.fails(id);
        let mut v: Vec<&[u8]> = vec![b"EMQ.FAILURES", b"1", key.as_bytes()];
        v.extend_from_slice(extra);
        c.call(&v)
    }
    /// The stream's entries as (entry id, fields).
    fn entries(&self, c: &mut Conn) -> Vec<(String, Vec<Vec<u8>>)> {
        let r = c.call(&[b"XRANGE", self.bus().as_bytes(), b"-", b"+"]);
        r.array()
            .iter()
            .map(|e| (e.array()[0].str(), e.array()[1].array().iter().map(|f| f.bytes().to_vec()).collect()))
            .collect()
    }
    fn xlen(&self, c: &mut Conn) -> i64 {
        c.call(&[b"XLEN", self.bus().as_bytes()]).int()
    }
    fn zcard(&self, c: &mut Conn) -> i64 {
        c.call(&[b"ZCARD", self.seen().as_bytes()]).int()
    }
}

fn mid(n: u64) -> String {
    id_of("MSG", n)
}

/// The server clock in ms.
fn now_ms(c: &mut Conn) -> i64 {
    let t = c.call(&[b"TIME"]).strings();
    t[0].parse::<i64>().unwrap() * 1000 + t[1].parse::<i64>().unwrap() / 1000
}

fn config_set(c: &mut Conn, name: &str, value: &str) {
    assert_eq!(
        c.call(&[b"CONFIG", b"SET", name.as_bytes(), value.as_bytes()]),
        Reply::Simple("OK".into()),
        "{name}"
    );
}

fn entry_fields(id: &str, payload: &[u8]) -> Vec<Vec<u8>> {
    vec![b"id".to_vec(), id.as_bytes().to_vec(), b"payload".to_vec(), payload.to_vec()]
}

#[test]
fn append_adds_a_message_once() {
    let s = Server::installed();
    let mut c = s.conn();
    let t = Topic::new("orders");
    let before = now_ms(&mut c);
    let e1 = t.append(&mut c, &mid(1), b"hello", &[]).str();
    let (ms, seq) = e1.split_once('-').expect("an entry id ms-seq");
    assert!(ms.parse::<i64>().unwrap() >= before && seq.parse::<u64>().is_ok(), "{e1}");
    assert_eq!(t.entries(&mut c), vec![(e1.clone(), entry_fields(&mid(1), b"hello"))]);
    // seen: id → first-append time (the server clock)
    let first: i64 = c.call(&[b"ZSCORE", t.seen().as_bytes(), mid(1).as_bytes()]).str().parse().unwrap();
    assert!(first >= before && first <= now_ms(&mut c), "{first}");
    // The same id again, whatever its payload: nil, nothing written.
    for payload in [&b"hello"[..], b"other"] {
        assert_eq!(unchanged(&mut c, |c| t.append(c, &mid(1), payload, &[])), Reply::Nil);
    }
    // Other ids, any brand, binary and empty payloads: entries in order, bytes intact.
    let binary = b"\x00\xff\r\n payload".to_vec();
    let e2 = t.append(&mut c, &id_of("EVT", 2), &binary, &[]).str();
    let e3 = t.append(&mut c, &mid(3), b"", &[]).str();
    let entries = t.entries(&mut c);
    assert_eq!(entries.iter().map(|e| e.0.clone()).collect::<Vec<_>>(), [e1, e2, e3]);
    assert_eq!(entries[1].1, entry_fields(&id_of("EVT", 2), &binary));
    assert_eq!(entries[2].1, entry_fields(&mid(3), b""));
    assert_eq!(t.zcard(&mut c), 3);
    // Topics are separate: the same id is new on another topic.
    assert!(matches!(Topic::new("other").append(&mut c, &mid(1), b"x", &[]), Reply::Bulk(_)));
    assert_eq!(info_field(&mut c, "trafikey", "trafikey_appended"), "4");
    assert_eq!(info_field(&mut c, "trafikey", "trafikey_duplicates"), "2");
    assert_eq!(info_field(&mut c, "trafikey", "trafikey_calls_emq_append"), "6");
}

#[test]
fn the_window_decides_duplicates_and_seen_is_trimmed_as_it_goes() {
    let s = Server::installed();
    let mut c = s.conn();
    let t = Topic::new("win");
    // Stale entries (first appended at the epoch) and fresh ones (now).
    let now = now_ms(&mut c).to_string();
    for i in 0..250u64 {
        c.call(&[b"ZADD", t.seen().as_bytes(), b"1", mid(1000 + i).as_bytes()]);
    }
    for i in 0..5u64 {
        c.call(&[b"ZADD", t.seen().as_bytes(), now.as_bytes(), mid(i).as_bytes()]);
    }
    // An id inside the window is a duplicate though it was never appended; a duplicate
    // trims nothing.
    assert_eq!(unchanged(&mut c, |c| t.append(c, &mid(0), b"x", &[])), Reply::Nil);
    // An id outside the window but not trimmed yet is new: appended, its time moved to now.
    assert!(matches!(t.append(&mut c, &mid(1249), b"x", &[]), Reply::Bulk(_)));
    let moved: i64 = c.call(&[b"ZSCORE", t.seen().as_bytes(), mid(1249).as_bytes()]).str().parse().unwrap();
    assert!(moved >= now.parse::<i64>().unwrap());
    // That call removed 100 stale entries (not counting the message's own), and each new
    // message removes up to 100 more: 255 → 155 → 56 → 8, the fresh ones always kept.
    assert_eq!(t.zcard(&mut c), 155);
    for (i, left) in [(10u64, 56), (11, 8)] {
        assert!(matches!(t.append(&mut c, &mid(i), b"x", &[]), Reply::Bulk(_)));
        assert_eq!(t.zcard(&mut c), left);
    }
    let mut kept = c.call(&[b"ZRANGE", t.seen().as_bytes(), b"0", b"-1"]).strings();
    kept.sort();
    let mut want: Vec<String> = [0, 1, 2, 3, 4, 10, 11, 1249].into_iter().map(mid).collect();
    want.sort();
    assert_eq!(kept, want, "no stale entry is left");
    assert_eq!(info_field(&mut c, "trafikey", "trafikey_seen_trimmed"), "249");

    // A short window: an id is a duplicate until its first append is that old.
    config_set(&mut c, "trafikey.bus-window-ms", "300");
    let t0 = std::time::Instant::now();
    assert!(matches!(t.append(&mut c, &mid(50), b"a", &[]), Reply::Bulk(_)));
    assert_eq!(t.append(&mut c, &mid(50), b"b", &[]), Reply::Nil);
    wait_for(|| !t.append(&mut c, &mid(50), b"c", &[]).is_nil(), "the window to pass");
    assert!(t0.elapsed() >= std::time::Duration::from_millis(290), "{:?}", t0.elapsed());
    let payloads: Vec<Vec<u8>> = t
        .entries(&mut c)
        .into_iter()
        .filter(|e| e.1[1] == mid(50).as_bytes())
        .map(|e| e.1[3].clone())
        .collect();
    assert_eq!(payloads, [b"a".to_vec(), b"c".to_vec()]);
    // Everything older than the window is gone after the next appends.
    std::thread::sleep(std::time::Duration::from_millis(350));
    assert!(matches!(t.append(&mut c, &mid(51), b"x", &[]), Reply::Bulk(_)));
    assert_eq!(c.call(&[b"ZRANGE", t.seen().as_bytes(), b"0", b"-1"]).strings(), [mid(51)]);
}

/// The window at its edge, in one instant: inside a script the server's clock stands still,
/// so an APPEND there reads the same `now` as the one that wrote the clock id's `seen` entry.
/// Entries written by hand at exactly `now − window + 1` (first appended `window − 1` ms ago)
/// and `now − window` (`window` ms ago): the first is a duplicate, the second is new; the
/// trim a new message makes removes what is `window` ms old and keeps what is younger. At
/// the default window and at a window set by CONFIG.
#[test]
fn the_window_is_exact_at_its_edge() {
    const SCRIPT: &[u8] = br#"
local bus, seen, w = KEYS[1], KEYS[2], tonumber(ARGV[1])
redis.call('EMQ.APPEND', 2, bus, seen, ARGV[2], 'clock')
local now = tonumber(redis.call('ZSCORE', seen, ARGV[2]))
local at = function(t) return string.format('%.0f', t) end
redis.call('ZADD', seen, at(now - w + 1), ARGV[3], at(now - w), ARGV[4])
redis.call('ZADD', seen, at(now - w + 1), ARGV[5], at(now - w), ARGV[6])
local inside = redis.call('EMQ.APPEND', 2, bus, seen, ARGV[3], 'inside')
local outside = redis.call('EMQ.APPEND', 2, bus, seen, ARGV[4], 'outside')
return {inside, outside, redis.call('ZSCORE', seen, ARGV[5]), redis.call('ZSCORE', seen, ARGV[6])}
"#;
    let s = Server::installed();
    let mut c = s.conn();
    let default = c.call(&[b"CONFIG", b"GET", b"trafikey.bus-window-ms"]).strings()[1].clone();
    for (n, window) in [(0u64, default.as_str()), (10, "300")] {
        config_set(&mut c, "trafikey.bus-window-ms", window);
        let t = Topic::new(&format!("edge{n}"));
        let ids: Vec<String> = (1..=5).map(|i| mid(n + i)).collect();
        let (bus, seen) = (t.bus(), t.seen());
        let mut v: Vec<&[u8]> =
            vec![b"EVAL", SCRIPT, b"2", bus.as_bytes(), seen.as_bytes(), window.as_bytes()];
        v.extend(ids.iter().map(|i| i.as_bytes()));
        let r = c.call(&v);
        let a = r.array();
        assert_eq!(a[0], Reply::Nil, "window {window}: first appended one ms less ago is a duplicate");
        assert!(
            matches!(a[1], Reply::Bulk(_)),
            "window {window}: first appended {window} ms ago is new: {r:?}"
        );
        assert!(matches!(a[2], Reply::Bulk(_)), "window {window}: the younger entry is kept: {r:?}");
        assert_eq!(a[3], Reply::Nil, "window {window}: the entry {window} ms old is trimmed");
        let appended: Vec<Vec<u8>> = t.entries(&mut c).into_iter().map(|e| e.1[1].clone()).collect();
        assert_eq!(appended, [ids[0].as_bytes(), ids[2].as_bytes()], "window {window}");
    }
}

#[test]
fn maxlen_caps_the_stream() {
    let s = Server::installed();
    let mut c = s.conn();
    let t = Topic::new("cap");
    // `~` trims whole stream nodes: small nodes make the cap visible.
    config_set(&mut c, "stream-node-max-entries", "4");
    let mut last = String::new();
    for i in 0..100u64 {
        last = t.append(&mut c, &mid(i), b"p", &[b"MAXLEN", b"10"]).str();
        assert!(t.xlen(&mut c) <= 10 + 4, "after {i}: {}", t.xlen(&mut c));
    }
    assert!(t.xlen(&mut c) >= 10);
    assert_eq!(t.entries(&mut c).last().map(|e| e.0.clone()), Some(last), "the newest entries stay");
    // The config's cap when the call gives none; MAXLEN is case-insensitive.
    config_set(&mut c, "trafikey.bus-maxlen", "20");
    for i in 100..200u64 {
        t.append(&mut c, &mid(i), b"p", &[]);
    }
    assert!((20..=24).contains(&t.xlen(&mut c)), "{}", t.xlen(&mut c));
    for i in 200..300u64 {
        t.publish(&mut c, &mid(i), b"p", &[b"maxlen", b"50"]);
    }
    assert!((50..=54).contains(&t.xlen(&mut c)), "{}", t.xlen(&mut c));
    // The dedup window is not the stream: trimmed messages are still duplicates.
    assert_eq!(t.append(&mut c, &mid(0), b"p", &[]), Reply::Nil);
}

/// The next pub/sub message on a subscribed connection, as (kind, channel, payload).
fn next_message(sub: &mut Conn) -> (String, String, Vec<u8>) {
    let m = sub.read().expect("a message");
    let parts = m.array();
    let kind = parts[0].str();
    let payload = parts.last().unwrap().bytes().to_vec();
    let channel = parts[parts.len() - 2].str();
    (kind, channel, payload)
}

#[test]
fn publish_reaches_a_real_subscriber_once() {
    let s = Server::installed();
    let mut c = s.conn();
    let t = Topic::new("live");
    let mut sub = s.conn();
    assert_eq!(sub.call(&[b"SUBSCRIBE", t.bus().as_bytes()]).array()[0].str(), "subscribe");
    let mut psub = s.conn();
    assert_eq!(psub.call(&[b"PSUBSCRIBE", b"emq:{live}:*"]).array()[0].str(), "psubscribe");

    let r = t.publish(&mut c, &mid(1), b"first", &[]);
    let entry = r.array()[0].str();
    assert_eq!(r.array()[1], Reply::Int(2), "receivers: the subscriber and the pattern");
    assert_eq!(next_message(&mut sub), ("message".into(), t.bus(), b"first".to_vec()));
    assert_eq!(next_message(&mut psub), ("pmessage".into(), t.bus(), b"first".to_vec()));
    // The durable lane holds the same message.
    assert_eq!(t.entries(&mut c), vec![(entry, entry_fields(&mid(1), b"first"))]);

    // A duplicate is neither appended nor republished: the next message the subscriber
    // gets is the next new one.
    assert_eq!(unchanged(&mut c, |c| t.publish(c, &mid(1), b"again", &[])), Reply::Nil);
    assert_eq!(t.publish(&mut c, &mid(2), b"", &[]).array()[1], Reply::Int(2));
    assert_eq!(next_message(&mut sub), ("message".into(), t.bus(), b"".to_vec()));
    let binary = b"\x00\r\n\xff".to_vec();
    t.publish(&mut c, &mid(3), &binary, &[]);
    assert_eq!(next_message(&mut sub).2, binary);
    // An id APPEND already took is a duplicate for PUBLISH too.
    t.append(&mut c, &mid(4), b"quiet", &[]);
    assert_eq!(t.publish(&mut c, &mid(4), b"loud", &[]), Reply::Nil);
    // No subscriber: appended all the same, 0 receivers.
    let quiet = Topic::new("quiet");
    assert_eq!(quiet.publish(&mut c, &mid(1), b"x", &[]).array()[1], Reply::Int(0));
    assert_eq!(quiet.xlen(&mut c), 1);
    assert_eq!(info_field(&mut c, "trafikey", "trafikey_published"), "4");
    assert_eq!(info_field(&mut c, "trafikey", "trafikey_receivers"), "6");
}

#[test]
fn publish_needs_the_callers_channel_permission() {
    let s = Server::installed();
    let mut admin = s.conn();
    let t = Topic::new("acl");
    t.append(&mut admin, &mid(1), b"x", &[]);
    let user = |a: &mut Conn, rules: &[&[u8]]| {
        let mut v: Vec<&[u8]> = vec![b"ACL", b"SETUSER"];
        v.extend_from_slice(rules);
        assert_eq!(a.call(&v), Reply::Simple("OK".into()));
    };
    // Every key, but no channel (a new user under the default `resetchannels`).
    user(&mut admin, &[b"mute", b"on", b">pw", b"~emq:*", b"%R~{emq}:*", b"+@all"]);
    // Another topic's channel only.
    user(&mut admin, &[b"elsewhere", b"on", b">pw", b"~emq:*", b"%R~{emq}:*", b"&emq:{other}:bus", b"+@all"]);
    // The channel granted, but by a second selector, which grants PUBLISH and not EMQ.PUBLISH:
    // the server judges a command, its keys and its channel by one selector at a time.
    let split: [&[u8]; 7] =
        [b"split", b"on", b">pw", b"~emq:*", b"%R~{emq}:*", b"+@all", b"(&emq:{acl}:bus -@all +publish)"];
    user(&mut admin, &split);
    for name in ["mute", "elsewhere", "split"] {
        let mut u = s.conn();
        assert_eq!(u.call(&[b"AUTH", name.as_bytes(), b"pw"]), Reply::Simple("OK".into()));
        // Refused by the server before the module runs, with its own text, whatever the call
        // carries: a duplicate, a bad id, a bad range.
        for (id, extra) in [
            (mid(2), &[][..]),
            (mid(1), &[][..]),
            ("MSG".to_owned(), &[][..]),
            (mid(2), &[&b"MAXLEN"[..], b"0"][..]),
        ] {
            let e = unchanged(&mut u, |u| t.publish(u, &id, b"x", extra));
            assert_eq!(e.error(), "NOPERM No permissions to access a channel", "{name} {id}");
        }
        // APPEND publishes nothing and needs no channel.
        assert!(matches!(
            t.append(&mut u, &id_of(&name[..3].to_ascii_uppercase(), 9), b"x", &[]),
            Reply::Bulk(_)
        ));
    }
    // The split user's second selector publishes with PUBLISH itself, as the server allows.
    let mut u = s.conn();
    u.call(&[b"AUTH", b"split", b"pw"]);
    assert_eq!(u.call(&[b"PUBLISH", b"emq:{acl}:bus", b"x"]), Reply::Int(0));
    // Granted the topic's channel, the same user publishes.
    user(&mut admin, &[b"mute", b"&emq:{acl}:*"]);
    let mut u = s.conn();
    u.call(&[b"AUTH", b"mute", b"pw"]);
    assert_eq!(t.publish(&mut u, &mid(2), b"x", &[]).array().len(), 2);
}

#[test]
fn failures_count_and_refresh_their_ttl() {
    let s = Server::installed();
    let mut c = s.conn();
    let t = Topic::new("f");
    let id = mid(7);
    let key = t.fails(&id);
    let pttl = |c: &mut Conn| c.call(&[b"PTTL", key.as_bytes()]).int();
    let day = 24 * 3600 * 1000;
    assert_eq!(t.failures(&mut c, &id, &[]), Reply::Int(1));
    assert!((day - 5000..=day).contains(&pttl(&mut c)), "default 24 h: {}", pttl(&mut c));
    assert_eq!(c.call(&[b"GET", key.as_bytes()]).str(), "1");
    // Each failure refreshes the TTL to the call's (or the default).
    assert_eq!(t.failures(&mut c, &id, &[b"TTL", b"60000"]), Reply::Int(2));
    assert!((55_000..=60_000).contains(&pttl(&mut c)), "{}", pttl(&mut c));
    assert_eq!(t.failures(&mut c, &id, &[]), Reply::Int(3));
    assert!(pttl(&mut c) > 60_000, "refreshed to 24 h again");
    // The TTL's absolute time is the server clock plus TTL.
    let before = now_ms(&mut c);
    assert_eq!(t.failures(&mut c, &id, &[b"ttl", b"500"]), Reply::Int(4));
    let at = c.call(&[b"PEXPIRETIME", key.as_bytes()]).int();
    assert!(at >= before + 500 && at <= now_ms(&mut c) + 500, "{at}");
    // The counter vanishes on its own, and counting starts again.
    wait_for(|| c.call(&[b"EXISTS", key.as_bytes()]) == Reply::Int(0), "the counter to expire");
    assert_eq!(t.failures(&mut c, &id, &[]), Reply::Int(1));
    // Counters are per message.
    assert_eq!(t.failures(&mut c, &id_of("EVT", 7), &[]), Reply::Int(1));
    assert_eq!(t.failures(&mut c, &id, &[]), Reply::Int(2));
}

#[test]
fn bus_verbs_replicate_their_effects_exactly() {
    let primary =
        Server::start(Opts { server_args: vec!["--appendonly".into(), "yes".into()], ..Opts::default() });
    let replica = Server::start(Opts::default());
    let mut p = primary.conn();
    p.call(&[b"EMQ.INSTALL", b"1", VK]);
    let mut r = replica.follow(&primary);
    // The replica's subscribers get the publishes too: the replicated PUBLISH effect.
    let mut sub = replica.conn();
    let t = Topic::new("repl");
    sub.call(&[b"SUBSCRIBE", t.bus().as_bytes()]);
    // Trims of both kinds happen: small stream nodes, a short window.
    config_set(&mut p, "stream-node-max-entries", "3");
    config_set(&mut p, "trafikey.bus-window-ms", "100");
    for i in 0..60u64 {
        if i % 2 == 0 {
            t.append(&mut p, &mid(i), format!("a{i}").as_bytes(), &[b"MAXLEN", b"7"]);
        } else {
            assert_eq!(
                t.publish(&mut p, &mid(i), format!("p{i}").as_bytes(), &[b"MAXLEN", b"7"]).array().len(),
                2
            );
        }
        t.append(&mut p, &mid(i), b"dup", &[]);
        t.failures(&mut p, &mid(i % 5), &[b"TTL", b"100000"]);
        if i == 30 {
            std::thread::sleep(std::time::Duration::from_millis(150));
        }
    }
    assert_eq!(p.call(&[b"WAIT", b"1", b"5000"]), Reply::Int(1));
    assert_eq!(digest(&mut p), digest(&mut r), "entries, ids, trims and TTLs agree");
    assert_eq!(t.entries(&mut p), t.entries(&mut r));
    let pexp = |c: &mut Conn| c.call(&[b"PEXPIRETIME", t.fails(&mid(0)).as_bytes()]).int();
    assert_eq!(pexp(&mut p), pexp(&mut r), "the TTL is an absolute time");
    for i in (1..60u64).step_by(2) {
        assert_eq!(next_message(&mut sub).2, format!("p{i}").into_bytes());
    }
    // The replica ran the effects only.
    let stats = r.call(&[b"INFO", b"commandstats"]).str();
    assert!(!stats.contains("cmdstat_emq."), "{stats}");
    for cmd in ["xadd", "xtrim", "zadd", "zrem", "publish", "set", "pexpireat"] {
        assert!(stats.contains(&format!("cmdstat_{cmd}:")), "{cmd} in {stats}");
    }
    // AOF replay (the PUBLISH effects deliver to no one) holds the same keyspace.
    let after = digest(&mut p);
    let primary = primary.restart();
    let mut p = primary.conn();
    wait_for(|| info_field(&mut p, "persistence", "loading") == "0", "aof load");
    assert_eq!(digest(&mut p), after);
}

#[test]
fn bus_rows_carry_their_flags_categories_and_key_specs() {
    let s = Server::installed();
    let mut c = s.conn();
    for (name, specs) in [
        ("EMQ.APPEND", &[&["RW", "update"][..], &["RW", "access", "update"]][..]),
        ("EMQ.PUBLISH", &[&["RW", "update"], &["RW", "access", "update"]]),
        ("EMQ.FAILURES", &[&["RW", "access", "update"]]),
    ] {
        let info = c.call(&[b"COMMAND", b"INFO", name.as_bytes()]);
        let entry = info.array()[0].array();
        let flags = entry[2].strings();
        for f in ["write", "denyoom", "fast"] {
            assert!(flags.iter().any(|x| x == f), "{name}: flag {f} in {flags:?}");
        }
        let cats = entry[6].strings();
        for cat in ["@emq", "@write", "@fast"] {
            assert!(cats.iter().any(|x| x == cat), "{name}: {cat} in {cats:?}");
        }
        let got = entry[8].array();
        // One key spec per key, then the three that name the keys a verb finds itself.
        assert_eq!(got.len(), specs.len() + 3, "{name}: one key spec per key");
        for (spec, want) in got.iter().zip(specs) {
            let flags =
                spec.array().chunks(2).find(|kv| kv[0].str() == "flags").map(|kv| kv[1].strings()).unwrap();
            assert_eq!(&flags, want, "{name}");
        }
    }
    // All seventeen tokens now, in wire order, and the bitmap full.
    let caps = c.call(&[b"EMQ.VERSION"]).array()[11].strings();
    assert_eq!(&caps[14..], ["append", "failures.incr", "publish"]);
    assert_eq!(caps.len(), 17);
    assert_eq!(c.call(&[b"TRA.CAPABILITIES"]).array()[9], Reply::Int(131071));
}

/// A refusal case: its class, then the id, payload and options of the call.
type BadCall<'a> = (&'a str, &'a str, &'a [u8], Vec<&'a [u8]>);

#[test]
fn bad_input_is_refused_with_its_class_and_writes_nothing() {
    let s = Server::installed();
    let mut c = s.conn();
    let t = Topic::new("bad");
    t.append(&mut c, &mid(1), b"x", &[]);
    t.failures(&mut c, &mid(1), &[]);
    let id = mid(2);
    let big = vec![b'x'; (1 << 20) + 1];
    for verb in ["EMQ.APPEND", "EMQ.PUBLISH"] {
        let cases: Vec<BadCall> = vec![
            ("EMQSHAPE", &id, b"x", vec![b"MAXLEN"]),
            ("EMQSHAPE", &id, b"x", vec![b"MAXLEN", b"ten"]),
            ("EMQSHAPE", &id, b"x", vec![b"MAXLEN", b"99999999999999999999"]),
            ("EMQSHAPE", &id, b"x", vec![b"MAXLEN", b"5", b"MAXLEN", b"6"]),
            ("EMQSHAPE", &id, b"x", vec![b"TTL", b"5"]),
            ("EMQSHAPE", &id, b"x", vec![b"NOPE"]),
            ("EMQSHAPE", &id, b"x", vec![b"~", b"5"]),
            ("EMQID", "MSG", b"x", vec![]),
            ("EMQID", "", b"x", vec![]),
            ("EMQID", "M1G00000000002", b"x", vec![]),
            ("EMQID", "MSG0000000000!", b"x", vec![]),
            ("EMQID", "MSGzzzzzzzzzzz", b"x", vec![]),
            ("EMQID", "MSG000000000002", b"x", vec![]),
            ("EMQID", "MSG", &big, vec![b"MAXLEN", b"0"]),
            ("EMQARG", &id, &big, vec![]),
            ("EMQARG", &id, b"x", vec![b"MAXLEN", b"0"]),
            ("EMQARG", &id, b"x", vec![b"MAXLEN", b"-1"]),
            ("EMQARG", &id, b"x", vec![b"MAXLEN", b"1000000001"]),
        ];
        for (class, id, payload, extra) in &cases {
            let e = unchanged(&mut c, |c| c.call_v(&t.cmd(verb, id, payload, extra)));
            assert!(e.error().starts_with(class), "{verb} {id} {extra:?}: {e:?}");
        }
        // Arity and numkeys.
        let good = t.cmd(verb, &id, b"x", &[]);
        for cut in [2usize, 4, 5] {
            let e = unchanged(&mut c, |c| c.call_v(&good[..cut]));
            assert!(e.error().starts_with("EMQSHAPE"), "{verb} cut {cut}: {e:?}");
        }
        for n in [&b"1"[..], b"3", b"x"] {
            let mut v = good.clone();
            v[1] = n.to_vec();
            assert!(unchanged(&mut c, |c| c.call_v(&v)).error().starts_with("EMQSHAPE"));
        }
        // Layout: the roles in order, one topic.
        let other = Topic::new("other");
        for (pos, key) in [
            (2usize, t.seen()),
            (3, t.bus()),
            (3, other.seen()),
            (2, other.bus()),
            (3, format!("emq:{{{}}}:wait", t.0)),
            (2, "bus".into()),
            (3, t.fails(&id)),
        ] {
            let mut v = good.clone();
            v[pos] = key.into_bytes();
            let e = unchanged(&mut c, |c| c.call_v(&v));
            assert!(e.error().starts_with("EMQLAYOUT"), "{verb} {v:?}: {e:?}");
        }
        // Wrong types on either key.
        for key in [t.bus(), t.seen()] {
            c.call(&[b"RENAME", key.as_bytes(), b"aside"]);
            c.call(&[b"SET", key.as_bytes(), b"x"]);
            let e = unchanged(&mut c, |c| c.call_v(&good));
            assert_eq!(
                e.error(),
                "WRONGTYPE Operation against a key holding the wrong kind of value",
                "{verb} {key}"
            );
            c.call(&[b"DEL", key.as_bytes()]);
            c.call(&[b"RENAME", b"aside", key.as_bytes()]);
        }
    }
    // The payload limit is the config: exactly max-payload bytes pass.
    config_set(&mut c, "trafikey.max-payload", "10");
    assert!(unchanged(&mut c, |c| t.append(c, &mid(3), &[b'y'; 11], &[])).error().starts_with("EMQARG"));
    assert!(matches!(t.append(&mut c, &mid(3), &[b'y'; 10], &[]), Reply::Bulk(_)));

    // FAILURES.
    let fcases: Vec<(&str, Vec<&[u8]>)> = vec![
        ("EMQSHAPE", vec![b"TTL"]),
        ("EMQSHAPE", vec![b"TTL", b"x"]),
        ("EMQSHAPE", vec![b"TTL", b"99999999999999999999"]),
        ("EMQSHAPE", vec![b"TTL", b"1", b"TTL", b"2"]),
        ("EMQSHAPE", vec![b"MAXLEN", b"5"]),
        ("EMQSHAPE", vec![b"5000"]),
        ("EMQARG", vec![b"TTL", b"0"]),
        ("EMQARG", vec![b"TTL", b"-1"]),
        ("EMQARG", vec![b"TTL", b"9007199254740991"]),
        ("EMQARG", vec![b"TTL", b"9223372036854775807"]),
    ];
    for (class, extra) in &fcases {
        let e = unchanged(&mut c, |c| t.failures(c, &mid(1), extra));
        assert!(e.error().starts_with(class), "{extra:?}: {e:?}");
    }
    for bad in ["MSG", "MSG0000000000!", "12300000000001", "JOBzzzzzzzzzzz"] {
        let e = unchanged(&mut c, |c| t.failures(c, bad, &[]));
        assert!(e.error().starts_with("EMQID"), "{bad}: {e:?}");
    }
    for key in [format!("emq:{{{}}}:fails:", t.0), t.bus(), format!("emq:{{{}}}:fail:{}", t.0, mid(1))] {
        let e = unchanged(&mut c, |c| c.call(&[b"EMQ.FAILURES", b"1", key.as_bytes()]));
        assert!(e.error().starts_with("EMQLAYOUT"), "{key}: {e:?}");
    }
    assert!(unchanged(&mut c, |c| c.call(&[b"EMQ.FAILURES", b"2", t.fails(&mid(1)).as_bytes()]))
        .error()
        .starts_with("EMQSHAPE"));
    // A fails key holding anything but a count.
    let odd = mid(9);
    for make in [
        &[&b"SET"[..], b"x"][..],
        &[b"SET", b"-3"],
        &[b"SET", b"9223372036854775807"],
        &[b"HSET", b"f", b"v"],
    ] {
        let key = t.fails(&odd);
        c.call(&[b"DEL", key.as_bytes()]);
        let mut v: Vec<&[u8]> = vec![make[0], key.as_bytes()];
        v.extend_from_slice(&make[1..]);
        c.call(&v);
        let e = unchanged(&mut c, |c| t.failures(c, &odd, &[]));
        assert!(e.error().starts_with("WRONGTYPE"), "{make:?}: {e:?}");
    }

    // Order: shape and layout before the fence, the fence before the id gate.
    c.call(&[b"DEL", VK]);
    assert!(unchanged(&mut c, |c| t.append(c, "MSG", b"x", &[b"MAXLEN"])).error().starts_with("EMQSHAPE"));
    assert!(unchanged(&mut c, |c| t.append(c, "MSG", b"x", &[])).error().starts_with("EMQWIRE"));
    assert!(unchanged(&mut c, |c| t.publish(c, &mid(5), b"x", &[])).error().starts_with("EMQWIRE"));
    assert!(unchanged(&mut c, |c| t.failures(c, "MSG", &[])).error().starts_with("EMQWIRE"));
    c.call(&[b"SET", VK, b"echomq:4.0.0"]);
    assert_eq!(
        unchanged(&mut c, |c| t.failures(c, &mid(1), &[])).error(),
        "EMQWIRE expected echomq:6.0.0 found echomq:4.0.0"
    );
    // No panic anywhere: the server still serves.
    assert_eq!(c.call(&[b"PING"]), Reply::Simple("PONG".into()));
}
