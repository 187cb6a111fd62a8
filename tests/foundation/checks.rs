//! The foundation checks: the fence, EMQ.INSTALL, EMQ.VERSION, TRA.CAPABILITIES and
//! EMQ.ENQUEUE against a real server. `foundation` runs each as a test on the project's
//! server; `compat` runs them all on every server the module is tested on.

use trafikey_support::*;

const VK: &[u8] = b"{emq}:version";

/// The capability tokens of wire 6, in the wire's fixed order (bit i of `bitmap_commands` is
/// token i), written out here as the test's own oracle rather than taken from the module's
/// table.
const WIRE: [&str; 17] = [
    "enqueue",
    "claim",
    "claim.pause",
    "extend",
    "extends",
    "complete.flat",
    "schedule",
    "promote",
    "reschedule",
    "delay",
    "fail.flat",
    "reprocess",
    "requeue",
    "stalled.check",
    "append",
    "failures.incr",
    "publish",
];

fn enqueue_cmd(q: &Q, id: &str) -> Vec<Vec<u8>> {
    q.cmd("EMQ.ENQUEUE", id, &keys_of("EMQ.ENQUEUE"), &[b"job", b"{}"])
}

pub fn version_is_the_six_entry_map_in_both_protocols() {
    let s = Server::start(Opts::default());
    let mut c = s.conn();
    let r = c.call(&[b"EMQ.VERSION"]);
    let flat = r.array();
    let keys: Vec<String> = flat.iter().step_by(2).map(Reply::str).collect();
    assert_eq!(keys, ["wire", "module", "module_version", "module_major", "build", "capabilities"]);
    assert_eq!(flat[1].str(), "echomq:6.0.0");
    assert_eq!(flat[3].str(), "trafikey");
    assert_eq!(flat[5].str(), env!("CARGO_PKG_VERSION"));
    assert_eq!(flat[7], Reply::Int(0));
    // MODULE LIST's `ver`: major·10000 + minor·100 + patch of the same version.
    let part = |s: &str| s.parse::<i64>().unwrap();
    let ver = part(env!("CARGO_PKG_VERSION_MAJOR")) * 10_000
        + part(env!("CARGO_PKG_VERSION_MINOR")) * 100
        + part(env!("CARGO_PKG_VERSION_PATCH"));
    let listed = c.call(&[b"MODULE", b"LIST"]);
    let entry = listed.array().iter().map(Reply::array).find(|m| m[1].str() == "trafikey").unwrap();
    assert_eq!((entry[2].str(), &entry[3]), ("ver".to_owned(), &Reply::Int(ver)));
    assert_eq!(flat[9], Reply::Nil, "build is unset unless the builder sets one");
    let caps = flat[11].strings();
    // The wire's seventeen tokens, in its order: every one is served.
    assert_eq!(caps, WIRE);

    // RESP3: a real map, same order.
    assert!(matches!(c.call(&[b"HELLO", b"3"]), Reply::Map(_)));
    match c.call(&[b"EMQ.VERSION"]) {
        Reply::Map(pairs) => {
            let k: Vec<String> = pairs.iter().map(|(k, _)| k.str()).collect();
            assert_eq!(k, keys);
            assert_eq!(pairs[4].1, Reply::Nil);
        }
        other => panic!("expected a map, got {other:?}"),
    }
    // Reads no key, runs no fence: it answers on a node without {emq}:version.
    assert_eq!(c.call(&[b"EXISTS", VK]), Reply::Int(0));
    assert!(c.call(&[b"EMQ.VERSION", b"x"]).error().starts_with("EMQSHAPE"));
}

pub fn capabilities_are_the_eight_pairs_of_this_build() {
    let s = Server::start(Opts::default());
    let mut c = s.conn();
    let r = c.call(&[b"TRA.CAPABILITIES"]);
    let flat = r.array();
    let keys: Vec<String> = flat.iter().step_by(2).map(Reply::str).collect();
    assert_eq!(
        keys,
        [
            "module",
            "version",
            "stage",
            "api_version",
            "bitmap_commands",
            "shared_api",
            "bundled_lua",
            "lua_scripts"
        ]
    );
    assert_eq!(flat[1].str(), "trafikey");
    assert_eq!(flat[7], Reply::Int(1));
    // bitmap_commands: bit i for the i-th wire token whose command is registered.
    let caps = c.call(&[b"EMQ.VERSION"]).array()[11].strings();
    let expect = caps.iter().map(|t| 1i64 << WIRE.iter().position(|w| w == t).unwrap()).sum::<i64>();
    assert_eq!(flat[9], Reply::Int(expect));
    assert_eq!(expect, 131071, "all seventeen");
    // Each token's command answers: a listed token never meets "unknown command".
    let info = c.call(&[b"COMMAND", b"LIST", b"FILTERBY", b"MODULE", b"trafikey"]).strings();
    for name in ["emq.enqueue", "emq.version", "emq.install", "tra.capabilities"] {
        assert!(info.iter().any(|n| n == name), "{name} registered");
    }
    assert_eq!(flat[11], Reply::Int(0));
    assert_eq!(flat[13], Reply::Int(0));
    assert_eq!(flat[15], Reply::Int(0));
}

pub fn install_answers_its_four_ways_and_carries_its_flags() {
    let s = Server::start(Opts::default());
    let mut c = s.conn();
    // absent → one SET, 1
    assert_eq!(c.call(&[b"EMQ.INSTALL", b"1", VK]), Reply::Int(1));
    assert_eq!(c.call(&[b"GET", VK]).str(), "echomq:6.0.0");
    // equal → 0, nothing written
    assert_eq!(unchanged(&mut c, |c| c.call(&[b"EMQ.INSTALL", b"1", VK])), Reply::Int(0));
    // another string → the fence's found text
    c.call(&[b"SET", VK, b"echomq:4.0.0"]);
    let e = unchanged(&mut c, |c| c.call(&[b"EMQ.INSTALL", b"1", VK]));
    assert_eq!(e.error(), "EMQWIRE expected echomq:6.0.0 found echomq:4.0.0");
    // a non-string → WRONGTYPE
    c.call(&[b"DEL", VK]);
    c.call(&[b"HSET", VK, b"f", b"v"]);
    let e = unchanged(&mut c, |c| c.call(&[b"EMQ.INSTALL", b"1", VK]));
    assert_eq!(e.error(), "WRONGTYPE Operation against a key holding the wrong kind of value");
    // layout: only {emq}:version; shape: numkeys 1, nothing after the key
    for bad in [vec![&b"EMQ.INSTALL"[..], b"1", b"{emq}:other"], vec![b"EMQ.INSTALL", b"1", b"emq:{q}:wait"]]
    {
        assert!(unchanged(&mut c, |c| c.call(&bad)).error().starts_with("EMQLAYOUT"), "{bad:?}");
    }
    for bad in [
        vec![&b"EMQ.INSTALL"[..]],
        vec![b"EMQ.INSTALL", b"2", VK, VK],
        vec![b"EMQ.INSTALL", b"1", VK, b"echomq:9"],
        vec![b"EMQ.INSTALL", b"x", VK],
    ] {
        assert!(unchanged(&mut c, |c| c.call(&bad)).error().starts_with("EMQSHAPE"), "{bad:?}");
    }
    // flags and ACL categories
    let info = c.call(&[b"COMMAND", b"INFO", b"EMQ.INSTALL"]);
    let entry = &info.array()[0];
    let flags = entry.array()[2].strings();
    for f in ["write", "denyoom", "admin", "noscript"] {
        assert!(flags.iter().any(|x| x == f), "flag {f} in {flags:?}");
    }
    let cats = entry.array()[6].strings();
    for cat in ["@write", "@admin", "@dangerous", "@slow"] {
        assert!(cats.iter().any(|x| x == cat), "category {cat} in {cats:?}");
    }
    assert!(!cats.iter().any(|x| x == "@emq"), "INSTALL is not in emq");
    // deny-script: a script cannot install.
    c.call(&[b"DEL", VK]);
    let e = c.call(&[b"EVAL", b"return server.call('EMQ.INSTALL', 1, KEYS[1])", b"1", VK]);
    assert!(e.err().is_some(), "{e:?}");
    assert_eq!(c.call(&[b"EXISTS", VK]), Reply::Int(0));
}

pub fn fence_lanes_refuse_and_write_nothing() {
    let s = Server::start(Opts::default());
    let mut c = s.conn();
    let q = Q::new("fence");
    let cmd = enqueue_cmd(&q, &jid(1));
    // absent
    let e = unchanged(&mut c, |c| c.call_v(&cmd));
    assert_eq!(e.error(), "EMQWIRE expected echomq:6.0.0 but {emq}:version is absent");
    // the scripted wire's value
    c.call(&[b"SET", VK, b"echomq:4.0.0"]);
    let e = unchanged(&mut c, |c| c.call_v(&cmd));
    assert_eq!(e.error(), "EMQWIRE expected echomq:6.0.0 found echomq:4.0.0");
    // any other value, printed safely: non-ASCII, NUL, space, and cut after 64 bytes
    c.call(&[b"SET", VK, b"echomq:6.0.0\x00\xff \xc3\xa9\r\n"]);
    let e = unchanged(&mut c, |c| c.call_v(&cmd));
    assert_eq!(
        e.error(),
        "EMQWIRE expected echomq:6.0.0 found echomq:6.0.0\\x00\\xFF\\x20\\xC3\\xA9\\x0D\\x0A"
    );
    let long = vec![b'v'; 100];
    c.call(&[b"SET", VK, &long]);
    let e = unchanged(&mut c, |c| c.call_v(&cmd));
    assert_eq!(e.error(), format!("EMQWIRE expected echomq:6.0.0 found {}...", "v".repeat(64)));
    // a wrong type passes the server's WRONGTYPE through
    c.call(&[b"DEL", VK]);
    c.call(&[b"LPUSH", VK, b"echomq:6.0.0"]);
    let e = unchanged(&mut c, |c| c.call_v(&cmd));
    assert!(e.error().starts_with("WRONGTYPE"));
    // the module's value passes
    c.call(&[b"DEL", VK]);
    assert_eq!(c.call(&[b"EMQ.INSTALL", b"1", VK]), Reply::Int(1));
    assert_eq!(c.call_v(&cmd), Reply::Int(1));
    assert_eq!(c.call(&[b"GET", VK]).str(), "echomq:6.0.0", "the fence never writes");
    // shape and layout are checked before the fence
    c.call(&[b"DEL", VK]);
    let mut bad = cmd.clone();
    bad[1] = b"3".to_vec();
    assert!(unchanged(&mut c, |c| c.call_v(&bad)).error().starts_with("EMQSHAPE"));
    let mut bad = cmd.clone();
    bad[3] = q.k("prio").into_bytes();
    assert!(unchanged(&mut c, |c| c.call_v(&bad)).error().starts_with("EMQLAYOUT"));
}

/// The fence key lives in the keyspace, and a keyspace is one database: each database a queue
/// lives in is installed on its own.
pub fn install_is_per_database() {
    let s = Server::installed();
    let mut c = s.conn();
    let q = Q::new("db");
    assert_eq!(c.call_v(&enqueue_cmd(&q, &jid(1))), Reply::Int(1), "database 0 is installed");
    assert_eq!(c.call(&[b"SELECT", b"1"]), Reply::Simple("OK".into()));
    let e = unchanged(&mut c, |c| c.call_v(&enqueue_cmd(&q, &jid(1))));
    assert_eq!(e.error(), "EMQWIRE expected echomq:6.0.0 but {emq}:version is absent");
    assert_eq!(c.call(&[b"EMQ.INSTALL", b"1", VK]), Reply::Int(1), "installed in database 1 too");
    assert_eq!(c.call_v(&enqueue_cmd(&q, &jid(1))), Reply::Int(1), "its own queue, its own ids");
    assert_eq!(c.call(&[b"SELECT", b"0"]), Reply::Simple("OK".into()));
    assert_eq!(c.call(&[b"LLEN", q.k("wait").as_bytes()]), Reply::Int(1));
    assert_eq!(c.call(&[b"FLUSHDB"]), Reply::Simple("OK".into()));
    let e = c.call_v(&enqueue_cmd(&q, &jid(2)));
    assert!(e.error().ends_with("is absent"), "FLUSHDB takes the fence key with it: {e:?}");
    c.call(&[b"SELECT", b"1"]);
    assert_eq!(c.call_v(&enqueue_cmd(&q, &jid(2))), Reply::Int(1), "database 1 keeps its own");
}

pub fn fence_reads_as_the_caller() {
    let s = Server::installed();
    let mut admin = s.conn();
    let q = Q::new("acl");
    // blind: all of the queue's keys, but not the fence key
    let mut blind = s.user(&mut admin, "blind", "~emq:* +@all");
    let e = unchanged(&mut blind, |c| c.call_v(&enqueue_cmd(&q, &jid(1))));
    assert_eq!(e.error(), "NOPERM No permissions to access a key");
    // seeing: the queue's keys and read on the fence key
    let mut seeing = s.user(&mut admin, "seeing", "~emq:* %R~{emq}:* +@all");
    assert_eq!(seeing.call_v(&enqueue_cmd(&q, &jid(1))), Reply::Int(1));
    // Declared keys are checked by the server per role: read-only on the queue cannot enqueue.
    let mut reader = s.user(&mut admin, "reader", "%R~emq:* %R~{emq}:* +@all");
    let e = reader.call_v(&enqueue_cmd(&q, &jid(2)));
    assert!(e.error().starts_with("NOPERM"), "{e:?}");
    // ACL categories: a user with +@emq only can run the verbs but not INSTALL.
    let mut worker = s.user(&mut admin, "worker", "~* +@emq");
    assert_eq!(worker.call_v(&enqueue_cmd(&q, &jid(3))), Reply::Int(1));
    assert!(worker.call(&[b"EMQ.INSTALL", b"1", VK]).error().starts_with("NOPERM"));
    assert!(worker.call(&[b"EMQ.VERSION"]).err().is_none());
}

pub fn cluster_enabled_server_is_refused_before_the_read() {
    let s = Server::start(Opts {
        server_args: vec![
            "--cluster-enabled".into(),
            "yes".into(),
            "--cluster-config-file".into(),
            "nodes.conf".into(),
        ],
        ..Opts::default()
    });
    let mut c = s.conn();
    // Own every slot first, or the server answers CLUSTERDOWN before the module runs.
    assert_eq!(c.call(&[b"CLUSTER", b"ADDSLOTSRANGE", b"0", b"16383"]), Reply::Simple("OK".into()));
    wait_for(|| c.call(&[b"CLUSTER", b"INFO"]).str().contains("cluster_state:ok"), "cluster_state:ok");
    let e = unchanged(&mut c, |c| c.call(&[b"EMQ.INSTALL", b"1", VK]));
    assert_eq!(e.error(), "EMQWIRE trafikey serves standalone servers only");
    c.call(&[b"SET", VK, b"echomq:6.0.0"]);
    let q = Q::new("c");
    let e = unchanged(&mut c, |c| c.call_v(&enqueue_cmd(&q, &jid(1))));
    assert_eq!(e.error(), "EMQWIRE trafikey serves standalone servers only");
}

pub fn enqueue_creates_the_row_and_makes_it_ready() {
    let s = Server::installed();
    let mut c = s.conn();
    let q = Q::new("orders");
    let (a, b, p, l) = (jid(1), jid(2), jid(3), jid(4));
    assert_eq!(q.enqueue(&mut c, &a, &[]), Reply::Int(1));
    assert_eq!(
        q.enqueue(&mut c, &b, &[b"ATTEMPTS", b"3", b"BACKOFF", b"EXP", b"100", b"OPTS", b"{\"x\":1}"]),
        Reply::Int(1)
    );
    assert_eq!(q.enqueue(&mut c, &p, &[b"priority", b"5"]), Reply::Int(1));
    assert_eq!(q.enqueue(&mut c, &l, &[b"LIFO"]), Reply::Int(1));
    let snap = q.check_invariant(&mut c);
    // wait is pushed left and claimed right: a, b in FIFO order, the LIFO job at the front.
    assert_eq!(snap.sets["wait"], vec![b.clone(), a.clone(), l.clone()]);
    assert_eq!(snap.sets["prio"], vec![p.clone()]);
    assert_eq!(c.call(&[b"ZSCORE", q.k("prio").as_bytes(), p.as_bytes()]).str(), "5");
    assert_eq!(snap.field(&a, "n").as_deref(), Some("job"));
    assert_eq!(snap.field(&a, "d").as_deref(), Some("{}"));
    assert_eq!(snap.field(&a, "p"), None, "defaults are not stored");
    assert_eq!(snap.field(&b, "a").as_deref(), Some("3"));
    assert_eq!(snap.field(&b, "b").as_deref(), Some("e100"));
    assert_eq!(snap.field(&b, "o").as_deref(), Some("{\"x\":1}"));
    let created: i64 = snap.field(&a, "c").unwrap().parse().unwrap();
    let now_ms = c.call(&[b"TIME"]).array()[0].str().parse::<i64>().unwrap() * 1000;
    assert!((now_ms - created).abs() < 5000, "created is the server clock");
    // one `added` event each
    let ev = c.call(&[b"XRANGE", q.k("events").as_bytes(), b"-", b"+"]);
    assert_eq!(ev.array().len(), 4);
    let first = ev.array()[0].array()[1].strings();
    assert_eq!(first, ["event", "added", "id", a.as_str(), "name", "job", "prio", "0"]);
    // an existing id: 0, nothing written, whatever the new name or data
    let r = unchanged(&mut c, |c| q.run(c, "EMQ.ENQUEUE", &a, &[b"other", b"data", b"PRIORITY", b"9"]));
    assert_eq!(r, Reply::Int(0));
}

pub fn enqueue_refuses_bad_input_with_its_class_and_writes_nothing() {
    let s = Server::installed();
    let mut c = s.conn();
    let q = Q::new("bad");
    q.enqueue(&mut c, &jid(1), &[]);
    let id = jid(2);
    let big = vec![b'x'; (1 << 20) + 1];
    let name257 = vec![b'n'; 257];
    let cases: Vec<(&str, Vec<&[u8]>)> = vec![
        ("EMQSHAPE", vec![b"job"]),
        ("EMQSHAPE", vec![]),
        ("EMQSHAPE", vec![b"job", b"d", b"PRIORITY"]),
        ("EMQSHAPE", vec![b"job", b"d", b"PRIORITY", b"x"]),
        ("EMQSHAPE", vec![b"job", b"d", b"PRIORITY", b"1.5"]),
        ("EMQSHAPE", vec![b"job", b"d", b"PRIORITY", b"99999999999999999999"]),
        ("EMQSHAPE", vec![b"job", b"d", b"PRIORITY", b"1", b"PRIORITY", b"2"]),
        ("EMQSHAPE", vec![b"job", b"d", b"NOPE"]),
        ("EMQSHAPE", vec![b"job", b"d", b"BACKOFF", b"LINEAR", b"5"]),
        ("EMQSHAPE", vec![b"job", b"d", b"BACKOFF", b"FIXED"]),
        ("EMQSHAPE", vec![b"job", b"d", b"KEEP", b"1"]),
        ("EMQARG", vec![b"job", b"d", b"PRIORITY", b"-1"]),
        ("EMQARG", vec![b"job", b"d", b"PRIORITY", b"2097152"]),
        ("EMQARG", vec![b"job", b"d", b"ATTEMPTS", b"0"]),
        ("EMQARG", vec![b"job", b"d", b"ATTEMPTS", b"1000001"]),
        ("EMQARG", vec![b"job", b"d", b"BACKOFF", b"EXP", b"-1"]),
        ("EMQARG", vec![b"job", b"d", b"BACKOFF", b"FIXED", b"2147483649"]),
        ("EMQARG", vec![b"", b"d"]),
        ("EMQARG", vec![&name257, b"d"]),
        ("EMQARG", vec![b"job", &big]),
        ("EMQARG", vec![b"job", b"d", b"OPTS", &big]),
    ];
    for (class, args) in &cases {
        let e = unchanged(&mut c, |c| q.run(c, "EMQ.ENQUEUE", &id, args));
        assert!(e.error().starts_with(class), "{args:?}: {e:?}");
    }
    // the id gate, after the fence
    for bad in ["JOB", "JOB0000000000!", "MSG00000000001", "JOBzzzzzzzzzzz", "job00000000001"] {
        let e = unchanged(&mut c, |c| q.run(c, "EMQ.ENQUEUE", bad, &[b"job", b"d"]));
        assert!(e.error().starts_with("EMQID"), "{bad}: {e:?}");
    }
    // layout: wrong role, two queues, empty suffix, not a queue key
    let base = q.cmd("EMQ.ENQUEUE", &id, &keys_of("EMQ.ENQUEUE"), &[b"job", b"d"]);
    let other = Q::new("other");
    for (pos, key) in [
        (3usize, q.k("prio")),
        (4, other.k("prio")),
        (2, format!("emq:{{{}}}:job:", q.0)),
        (5, "events".to_string()),
        (2, other.job(&id)),
    ] {
        let mut v = base.clone();
        v[pos] = key.into_bytes();
        let e = unchanged(&mut c, |c| c.call_v(&v));
        assert!(e.error().starts_with("EMQLAYOUT"), "{v:?}: {e:?}");
    }
    // numkeys
    for n in [&b"3"[..], b"5", b"-1", b"x", b""] {
        let mut v = base.clone();
        v[1] = n.to_vec();
        assert!(unchanged(&mut c, |c| c.call_v(&v)).error().starts_with("EMQSHAPE"));
    }
    assert!(unchanged(&mut c, |c| c.call(&[b"EMQ.ENQUEUE"])).error().starts_with("EMQSHAPE"));
    assert!(unchanged(&mut c, |c| c.call(&[b"EMQ.ENQUEUE", b"4", q.job(&id).as_bytes()]))
        .error()
        .starts_with("EMQSHAPE"));
    // wrong types on any key: WRONGTYPE, nothing written
    c.call(&[b"SET", q.k("wait").as_bytes(), b"x"]);
    let e = unchanged(&mut c, |c| q.enqueue(c, &id, &[]));
    assert!(e.error().starts_with("WRONGTYPE"));
    c.call(&[b"DEL", q.k("wait").as_bytes()]);
    c.call(&[b"SET", q.k("events").as_bytes(), b"x"]);
    assert!(unchanged(&mut c, |c| q.enqueue(c, &id, &[])).error().starts_with("WRONGTYPE"));
    c.call(&[b"DEL", q.k("events").as_bytes()]);
    c.call(&[b"SET", q.job(&id).as_bytes(), b"x"]);
    assert!(unchanged(&mut c, |c| q.enqueue(c, &id, &[])).error().starts_with("WRONGTYPE"));
    // and the refusals were counted per class
    assert!(info_field(&mut c, "trafikey", "trafikey_refused_emqshape").parse::<u64>().unwrap() > 10);
    assert!(info_field(&mut c, "trafikey", "trafikey_refused_emqlayout").parse::<u64>().unwrap() >= 5);
}

pub fn enqueue_replicates_its_effects_not_the_verb() {
    let primary =
        Server::start(Opts { server_args: vec!["--appendonly".into(), "yes".into()], ..Opts::default() });
    let replica = Server::start(Opts::default());
    let mut p = primary.conn();
    p.call(&[b"EMQ.INSTALL", b"1", VK]);
    let mut r = replica.follow(&primary);
    let q = Q::new("repl");
    for i in 0..50u64 {
        let prio = (i % 3).to_string();
        q.enqueue(&mut p, &jid(i), &[b"PRIORITY", prio.as_bytes()]);
    }
    assert_eq!(p.call(&[b"WAIT", b"1", b"5000"]), Reply::Int(1));
    assert_eq!(digest(&mut p), digest(&mut r));
    // The replica never ran the verb: its command stats hold only the effects.
    let stats = r.call(&[b"INFO", b"commandstats"]).str();
    assert!(!stats.contains("cmdstat_emq.enqueue"), "{stats}");
    assert!(stats.contains("cmdstat_hset"), "{stats}");
    // AOF replay, after a rewrite, holds the same keyspace.
    let before = digest(&mut p);
    p.call(&[b"BGREWRITEAOF"]);
    wait_for(|| info_field(&mut p, "persistence", "aof_rewrite_in_progress") == "0", "aof rewrite");
    for i in 50..60u64 {
        q.enqueue(&mut p, &jid(i), &[]);
    }
    let after = digest(&mut p);
    assert_ne!(before, after);
    let primary = primary.restart();
    let mut p = primary.conn();
    wait_for(|| info_field(&mut p, "persistence", "loading") == "0", "aof load");
    assert_eq!(digest(&mut p), after);
}

/// Calls `$m!` with the name of every check, so each runner lists them from here.
#[macro_export]
macro_rules! each_check {
    ($m:ident) => {
        $m!(
            version_is_the_six_entry_map_in_both_protocols
            capabilities_are_the_eight_pairs_of_this_build
            install_answers_its_four_ways_and_carries_its_flags
            fence_lanes_refuse_and_write_nothing
            install_is_per_database
            fence_reads_as_the_caller
            cluster_enabled_server_is_refused_before_the_read
            enqueue_creates_the_row_and_makes_it_ready
            enqueue_refuses_bad_input_with_its_class_and_writes_nothing
            enqueue_replicates_its_effects_not_the_verb
        );
    };
}
