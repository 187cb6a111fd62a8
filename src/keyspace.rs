//! The native mirror of `EchoMQ.Keyspace`: the reserve, the fence key, the wire identity and
//! the queue space `emq:{Q}:<role>`. Builders and a strict parser; nothing else in the module
//! spells a key.

#![forbid(unsafe_code)]

/// The core's reserved space: cross-queue keys, first-byte-disjoint from every queue's keys.
pub const RESERVE: &[u8] = b"{emq}:";
/// The fence key, as `Keyspace.version_key/0` builds it.
pub const VERSION_KEY: &[u8] = VERSION_KEY_C.to_bytes();
/// The same, NUL-terminated, for the server's C API.
pub const VERSION_KEY_C: &std::ffi::CStr = c"{emq}:version";
/// The only value the fence accepts: this module's wire identity.
pub const EPOCH: &[u8] = b"echomq:6.0.0";

const PREFIX: &[u8] = b"emq:{";
/// Longest queue name: keeps every key short and the hashtag exactly `{Q}`.
pub const MAX_QUEUE: usize = 128;

/// The role of a key inside a queue space. The suffixed roles (`Role::suffixed`) carry a
/// suffix after their word (`job:<ID>`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Wait,
    Prio,
    Active,
    Delayed,
    Completed,
    Failed,
    Meta,
    Events,
    Job,
    Bus,
    Seen,
    Fails,
    /// A job's log lines (TRA.LOG): a list, deleted with its row.
    Log,
    /// The queue's custom ids (`ALIAS key`): a hash, the client's key → the job's branded id.
    Alias,
    /// One deduplication id (`DEDUP id`): a string, the branded id of the job that holds it,
    /// with the server's own expiry when the id was given a TTL.
    Dedup,
    /// The job kept for a deduplication id (`KEEPLAST`, `kept:<id>`): a hash, the job a
    /// duplicate brought while the id's holder was active, created when the holder finishes.
    Kept,
    /// The queue's job schedulers: a zset, scheduler id → the time of its pending iteration.
    Scheds,
    /// One job scheduler (`sched:<id>`): a hash, its rule, its job template and its state.
    Sched,
    /// Finished jobs counted by the minute (`METRICS`): `metrics:<kind>` a hash (the counter),
    /// `metrics:<kind>:data` a list (the series), for the kinds `completed` and `failed`.
    Metrics,
}

impl Role {
    pub const ALL: [Role; 19] = [
        Role::Wait,
        Role::Prio,
        Role::Active,
        Role::Delayed,
        Role::Completed,
        Role::Failed,
        Role::Meta,
        Role::Events,
        Role::Job,
        Role::Bus,
        Role::Seen,
        Role::Fails,
        Role::Log,
        Role::Alias,
        Role::Dedup,
        Role::Kept,
        Role::Scheds,
        Role::Sched,
        Role::Metrics,
    ];

    /// The role's word in the key; suffixed roles end with the `:` before the suffix.
    pub const fn word(self) -> &'static str {
        match self {
            Role::Wait => "wait",
            Role::Prio => "prio",
            Role::Active => "active",
            Role::Delayed => "delayed",
            Role::Completed => "completed",
            Role::Failed => "failed",
            Role::Meta => "meta",
            Role::Events => "events",
            Role::Job => "job:",
            Role::Bus => "bus",
            Role::Seen => "seen",
            Role::Fails => "fails:",
            Role::Log => "log:",
            Role::Alias => "alias",
            Role::Dedup => "dedup:",
            Role::Kept => "kept:",
            Role::Scheds => "scheds",
            Role::Sched => "sched:",
            Role::Metrics => "metrics:",
        }
    }

    pub const fn suffixed(self) -> bool {
        matches!(
            self,
            Role::Job | Role::Fails | Role::Log | Role::Dedup | Role::Kept | Role::Sched | Role::Metrics
        )
    }
}

/// A parsed queue-space key: its queue, its role and (for `job:`/`fails:`) its suffix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Parsed<'a> {
    pub queue: &'a [u8],
    pub role: Role,
    pub suffix: &'a [u8],
}

/// `Q` is 1..=128 bytes with no `{`, `}` and no byte below 0x21.
pub fn valid_queue(q: &[u8]) -> bool {
    !q.is_empty() && q.len() <= MAX_QUEUE && q.iter().all(|&b| b > 0x20 && b != b'{' && b != b'}')
}

/// `emq:{Q}:<role>`, or `emq:{Q}:<role><suffix>` for a suffixed role.
pub fn key(queue: &[u8], role: Role, suffix: &[u8]) -> Vec<u8> {
    let word = role.word().as_bytes();
    let mut k = Vec::with_capacity(
        PREFIX
            .len()
            .saturating_add(queue.len())
            .saturating_add(word.len())
            .saturating_add(suffix.len())
            .saturating_add(2),
    );
    k.extend_from_slice(PREFIX);
    k.extend_from_slice(queue);
    k.extend_from_slice(b"}:");
    k.extend_from_slice(word);
    if role.suffixed() {
        k.extend_from_slice(suffix);
    }
    k
}

/// `emq:{Q}:` split off a key: the queue and what follows it.
fn split(key: &[u8]) -> Option<(&[u8], &[u8])> {
    let rest = key.strip_prefix(PREFIX)?;
    let close = rest.iter().position(|&b| b == b'}')?;
    let (queue, tail) = rest.split_at(close);
    Some((queue, tail.strip_prefix(b"}:")?)).filter(|_| valid_queue(queue))
}

/// `tail` (what follows `emq:{Q}:`) as `role`: its suffix (empty for unsuffixed roles).
fn role_suffix(tail: &[u8], role: Role) -> Option<&[u8]> {
    let word = role.word().as_bytes();
    if role.suffixed() {
        tail.strip_prefix(word).filter(|s| !s.is_empty())
    } else {
        (tail == word).then_some(&b""[..])
    }
}

/// The strict parser: the exact inverse of [`key`] over valid queues. A suffixed role needs a
/// non-empty suffix; an unsuffixed one must match its word exactly.
pub fn parse(key: &[u8]) -> Option<Parsed<'_>> {
    let (queue, tail) = split(key)?;
    Role::ALL.iter().find_map(|&role| role_suffix(tail, role).map(|suffix| Parsed { queue, role, suffix }))
}

/// [`parse`] for a key that must be `role` (the layout check): the queue and the suffix.
pub fn parse_as(key: &[u8], role: Role) -> Option<Parsed<'_>> {
    let (queue, tail) = split(key)?;
    role_suffix(tail, role).map(|suffix| Parsed { queue, role, suffix })
}

/// [`parse_as`] for a key that must also name `queue`, already known valid: its suffix.
pub fn parse_in<'k>(key: &'k [u8], queue: &[u8], role: Role) -> Option<&'k [u8]> {
    let rest = key.strip_prefix(PREFIX)?.strip_prefix(queue)?.strip_prefix(b"}:")?;
    role_suffix(rest, role)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn fence_constants_are_the_wires() {
        assert_eq!(VERSION_KEY, b"{emq}:version");
        assert!(VERSION_KEY.starts_with(RESERVE));
        assert_eq!(EPOCH, b"echomq:6.0.0");
        // The reserve is first-byte-disjoint from every queue key.
        assert_ne!(RESERVE[0], PREFIX[0]);
        assert_eq!(parse(VERSION_KEY), None);
    }

    proptest! {
        /// Within a known queue, the quick parse agrees with the full one.
        #[test]
        fn parse_in_agrees_with_parse_as(q in "[a-z{}]{1,4}", k in "emq:\\{[a-z{}]{0,4}\\}:(wait|job:[A-Z0-9]{0,3}|prio|xx)", r in 0usize..Role::ALL.len()) {
            let role = Role::ALL[r];
            if valid_queue(q.as_bytes()) {
                let full = parse_as(k.as_bytes(), role).filter(|p| p.queue == q.as_bytes()).map(|p| p.suffix);
                prop_assert_eq!(parse_in(k.as_bytes(), q.as_bytes(), role), full);
            }
        }
    }

    #[test]
    fn known_keys() {
        assert_eq!(key(b"q", Role::Wait, b""), b"emq:{q}:wait");
        assert_eq!(key(b"q", Role::Job, b"JOB00000000001"), b"emq:{q}:job:JOB00000000001");
        let p = parse(b"emq:{orders}:job:JOB1").unwrap();
        assert_eq!((p.queue, p.role, p.suffix), (&b"orders"[..], Role::Job, &b"JOB1"[..]));
        for bad in [
            &b"emq:{q}:job:"[..],
            b"emq:{q}:fails:",
            b"emq:{}:wait",
            b"emq:{q}:waits",
            b"emq:{q}:wai",
            b"emq:{q}wait",
            b"emq:{q{}:wait",
            b"emq:{q}}:wait",
            b"emq:{a b}:wait",
            b"emq:q:wait",
            b"EMQ:{q}:wait",
            b"",
        ] {
            assert_eq!(parse(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
        let long = vec![b'x'; MAX_QUEUE + 1];
        assert_eq!(parse(&key(&long, Role::Wait, b"")), None);
    }

    fn queue() -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::vec(
            (0x21u8..=0xff).prop_filter("brace", |b| *b != b'{' && *b != b'}'),
            1..=MAX_QUEUE,
        )
    }

    proptest! {
        #[test]
        fn build_then_parse_round_trips(q in queue(), r in 0usize..Role::ALL.len(), s in proptest::collection::vec(any::<u8>(), 1..40)) {
            let role = Role::ALL[r];
            let k = key(&q, role, &s);
            let p = parse(&k).expect("a built key parses");
            prop_assert_eq!(p.queue, &q[..]);
            prop_assert_eq!(p.role, role);
            if role.suffixed() { prop_assert_eq!(p.suffix, &s[..]); } else { prop_assert!(p.suffix.is_empty()); }
        }

        #[test]
        fn invalid_queues_are_refused(q in proptest::collection::vec(any::<u8>(), 0..200), r in 0usize..Role::ALL.len()) {
            prop_assume!(!valid_queue(&q));
            // A queue holding `}` can be cut short by the parser; it must then fail or name a
            // different (valid) queue, never the invalid one.
            match parse(&key(&q, Role::ALL[r], b"JOB1")) {
                None => {}
                Some(p) => prop_assert_ne!(p.queue, &q[..]),
            }
        }

        #[test]
        fn parse_never_panics(k in proptest::collection::vec(any::<u8>(), 0..300)) {
            if let Some(p) = parse(&k) {
                prop_assert!(valid_queue(p.queue));
                prop_assert_eq!(&key(p.queue, p.role, p.suffix), &k);
            }
            // parse_as agrees with parse for every role
            for role in Role::ALL {
                prop_assert_eq!(parse_as(&k, role), parse(&k).filter(|p| p.role == role));
            }
        }
    }
}
