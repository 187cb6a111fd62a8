//! Replication effects are built exactly when something could receive them (`host::effects`):
//! a server with no replica, no backlog and no AOF only counts its writes; every way a
//! receiver can appear — a replica syncing, a replica attached before the module loaded, a
//! primary restarted from an RDB that keeps its backlog, a replica promoted with its
//! backlog — turns the effects on in time, and the replica ends up with the primary's
//! keyspace.
// A test may panic: that is how it fails. The module's own rules are for src/.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

use trafikey_support::*;

/// Module arguments with upkeep off (see `Server::quiet`).
fn quiet() -> Vec<String> {
    vec!["upkeep".into(), "no".into()]
}

/// A mixed lifecycle over jobs `from..to` of queue `q`: enqueues at several priorities,
/// schedules, claims, and every way a claim ends.
fn workload(c: &mut Conn, q: &Q, from: u64, to: u64) {
    for i in from..to {
        let prio = (i % 3).to_string();
        if i % 7 == 0 {
            q.run(c, "EMQ.SCHEDULE", &jid(i), &[b"+0", b"later", b"d"]);
        } else {
            q.enqueue(c, &jid(i), &[b"PRIORITY", prio.as_bytes(), b"ATTEMPTS", b"2"]);
        }
    }
    let tok = format!("w{from}");
    let got = q.run(c, "EMQ.CLAIM", "", &[tok.as_bytes(), b"60000", b"COUNT", b"1000"]);
    for (k, job) in got.array().iter().enumerate() {
        let id = job.array()[0].str();
        let r = match k % 4 {
            0 => q.run(c, "EMQ.COMPLETE", &id, &[tok.as_bytes(), b"ok"]),
            1 => q.run(c, "EMQ.FAIL", &id, &[tok.as_bytes(), b"no"]),
            2 => q.run(c, "EMQ.DELAY", &id, &[tok.as_bytes(), b"+1"]),
            _ => q.run(c, "EMQ.EXTEND", &id, &[tok.as_bytes(), b"5"]),
        };
        assert!(r.err().is_none(), "{r:?}");
    }
}

fn effects(c: &mut Conn) -> (u64, u64, String) {
    let n = |c: &mut Conn, f: &str| info_field(c, "trafikey", f).parse::<u64>().expect("a count");
    (
        n(c, "trafikey_effects_built"),
        n(c, "trafikey_effects_skipped"),
        info_field(c, "trafikey", "trafikey_effects_receivers_seen"),
    )
}

fn changes(c: &mut Conn) -> u64 {
    info_field(c, "persistence", "rdb_changes_since_last_save").parse().expect("a count")
}

fn same_keyspace(p: &mut Conn, r: &mut Conn) {
    assert_eq!(p.call(&[b"WAIT", b"1", b"5000"]), Reply::Int(1), "the replica acknowledged");
    assert_eq!(digest(p), digest(r), "the replica holds what the primary holds");
}

#[test]
fn with_nothing_listening_writes_are_counted_not_built() {
    let quiet = Server::quiet();
    let always = Server::start(Opts {
        module_args: vec!["effects-always".into(), "yes".into(), "upkeep".into(), "no".into()],
        ..Opts::default()
    });
    let mut a = quiet.conn();
    let mut b = always.conn();
    assert_eq!(b.call(&[b"EMQ.INSTALL", b"1", b"{emq}:version"]), Reply::Int(1));
    let q = Q::new("quiet");
    let (a0, b0) = (changes(&mut a), changes(&mut b));
    workload(&mut a, &q, 1, 60);
    workload(&mut b, &q, 1, 60);
    let (built, skipped, seen) = effects(&mut a);
    assert_eq!((built, seen.as_str()), (0, "0"), "no receiver: no effect built");
    assert!(skipped > 100, "{skipped}");
    let (built_b, skipped_b, _) = effects(&mut b);
    assert_eq!(skipped_b, 0);
    // The server's change counter (save points) sees every write either way.
    assert_eq!(changes(&mut a) - a0, changes(&mut b) - b0, "the same changes counted");
    assert_eq!(skipped, built_b, "the same writes, INSTALL's SET included");

    // A replica syncs: from then on every effect is built, and it keeps up.
    let replica = Server::start(Opts::default());
    let mut r = replica.follow(&quiet);
    assert_eq!(effects(&mut a).2, "1");
    workload(&mut a, &q, 60, 120);
    let (built, skipped_after, _) = effects(&mut a);
    assert!(built > 100, "{built}");
    assert_eq!(skipped_after, skipped, "nothing skipped once a replica synced");
    same_keyspace(&mut a, &mut r);
}

#[test]
fn a_flush_or_a_reload_with_nothing_listening_builds_no_effects() {
    // Only a change of role or of replicas says a receiver may have come: a flush or a load
    // of the dataset (server events too) does not.
    let quiet = Server::quiet();
    let mut c = quiet.conn();
    let q = Q::new("alone");
    workload(&mut c, &q, 1, 20);
    assert_eq!(c.call(&[b"FLUSHALL"]), Reply::Simple("OK".into()));
    assert_eq!(c.call(&[b"EMQ.INSTALL", b"1", b"{emq}:version"]), Reply::Int(1));
    workload(&mut c, &q, 20, 40);
    assert_eq!(c.call(&[b"DEBUG", b"RELOAD"]), Reply::Simple("OK".into()));
    workload(&mut c, &q, 40, 60);
    let (built, skipped, seen) = effects(&mut c);
    assert_eq!((built, seen.as_str()), (0, "0"), "no receiver: no effect built");
    assert!(skipped > 100, "{skipped}");
}

#[test]
fn the_events_streams_trims_reach_the_replica() {
    // The events stream capped low, so that its appends trim it (whole nodes at a time): the
    // replica gets each trim as an exact one, to the length the primary kept.
    let primary = Server::quiet();
    let replica = Server::start(Opts::default());
    let mut r = replica.follow(&primary);
    let mut p = primary.conn();
    assert_eq!(p.call(&[b"CONFIG", b"SET", b"trafikey.events-maxlen", b"10"]), Reply::Simple("OK".into()));
    let q = Q::new("trimmed");
    let events = q.k("events");
    let mut trims = 0;
    let mut before = 0;
    for i in 1..=400 {
        q.enqueue(&mut p, &jid(i), &[]);
        let len = p.call(&[b"XLEN", events.as_bytes()]).int();
        trims += i64::from(len < before + 1);
        before = len;
        // Each call's trim with the call, not mended by a later one.
        assert_eq!(p.call(&[b"WAIT", b"1", b"5000"]), Reply::Int(1));
        assert_eq!(r.call(&[b"XLEN", events.as_bytes()]).int(), len, "after job {i}");
    }
    assert!(trims > 0, "the stream was trimmed");
    same_keyspace(&mut p, &mut r);
}

#[test]
fn a_replica_attached_before_the_module_loads_gets_every_effect() {
    let primary = Server::start(Opts { module: false, ..Opts::default() });
    let replica = Server::start(Opts::default());
    let mut r = replica.follow(&primary);
    let mut p = primary.conn();
    let path = module_path().display().to_string();
    assert_eq!(p.call(&[b"MODULE", b"LOAD", path.as_bytes(), b"upkeep", b"no"]), Reply::Simple("OK".into()));
    assert_eq!(p.call(&[b"EMQ.INSTALL", b"1", b"{emq}:version"]), Reply::Int(1));
    workload(&mut p, &Q::new("late"), 1, 80);
    same_keyspace(&mut p, &mut r);
    let (built, skipped, seen) = effects(&mut p);
    assert_eq!((skipped, seen.as_str()), (0, "1"));
    assert!(built > 100, "{built}");
}

#[test]
fn a_primary_restarted_with_its_backlog_replicates_into_it() {
    // No periodic PING to the replica: its offset stays the saved one until the restart.
    let args = vec!["--repl-ping-replica-period".into(), "3600".into()];
    let primary = Server::start(Opts { server_args: args, module_args: quiet(), ..Opts::default() });
    let replica = Server::start(Opts::default());
    let mut p = primary.conn();
    assert_eq!(p.call(&[b"EMQ.INSTALL", b"1", b"{emq}:version"]), Reply::Int(1));
    let mut r = replica.follow(&primary);
    let q = Q::new("again");
    workload(&mut p, &q, 1, 40);
    same_keyspace(&mut p, &mut r);
    // The RDB carries the replication id and offset: the restarted primary keeps a backlog
    // for the replica's partial resync.
    assert_eq!(p.call(&[b"SAVE"]), Reply::Simple("OK".into()));
    let primary = primary.restart();
    let mut p = primary.conn();
    wait_for(|| info_field(&mut p, "persistence", "loading") == "0", "rdb load");
    assert_eq!(info_field(&mut p, "replication", "repl_backlog_active"), "1");
    // Written while the replica is away: it can only get these through the backlog.
    workload(&mut p, &q, 40, 90);
    r.call(&[b"REPLICAOF", b"127.0.0.1", primary.port.to_string().as_bytes()]);
    wait_for(|| r.call(&[b"INFO", b"replication"]).str().contains("master_link_status:up"), "replica link");
    assert_eq!(info_field(&mut p, "stats", "sync_partial_ok"), "1", "a partial resync, from the backlog");
    same_keyspace(&mut p, &mut r);
    let (built, skipped, _) = effects(&mut p);
    assert_eq!(skipped, 0, "a backlog is a receiver");
    assert!(built > 100, "{built}");
}

#[test]
fn writes_while_a_replica_syncs_reach_it() {
    let primary = Server::quiet();
    let replica = Server::start(Opts::default());
    let mut p = primary.conn();
    let q = Q::new("sync");
    // Nothing listens yet: counted, not built; the snapshot will carry them.
    workload(&mut p, &q, 1, 30);
    let skipped = effects(&mut p).1;
    assert!(skipped > 50, "{skipped}");
    // A slow snapshot (20 ms a key), so the sync is still running while we write.
    p.call(&[b"CONFIG", b"SET", b"rdb-key-save-delay", b"20000"]);
    let mut r = replica.conn();
    r.call(&[b"REPLICAOF", b"127.0.0.1", primary.port.to_string().as_bytes()]);
    wait_for(|| info_field(&mut p, "persistence", "rdb_bgsave_in_progress") == "1", "the replica's snapshot");
    // After the fork: these reach the replica only as effects, through its sync buffer.
    workload(&mut p, &q, 30, 80);
    assert_eq!(info_field(&mut p, "persistence", "rdb_bgsave_in_progress"), "1", "written during the sync");
    p.call(&[b"CONFIG", b"SET", b"rdb-key-save-delay", b"0"]);
    wait_for(|| r.call(&[b"INFO", b"replication"]).str().contains("master_link_status:up"), "replica link");
    same_keyspace(&mut p, &mut r);
    assert_eq!(effects(&mut p).1, skipped, "nothing skipped once the replica asked to sync");
}

#[test]
fn a_promoted_replica_replicates_into_its_backlog() {
    // No periodic PING to the replica: the old primary's offset stays the one the node was
    // promoted at, so it can resync partially.
    let args = vec!["--repl-ping-replica-period".into(), "3600".into()];
    let primary = Server::start(Opts { server_args: args, module_args: quiet(), ..Opts::default() });
    assert_eq!(primary.conn().call(&[b"EMQ.INSTALL", b"1", b"{emq}:version"]), Reply::Int(1));
    let node = Server::start(Opts { module_args: quiet(), ..Opts::default() });
    let mut n = node.conn();
    // The node's first call reads INFO as a primary with nothing attached: effects off.
    assert_eq!(n.call(&[b"EMQ.INSTALL", b"1", b"{emq}:version"]), Reply::Int(1));
    assert_eq!(effects(&mut n).2, "0");
    let skipped = effects(&mut n).1;
    let mut p = primary.conn();
    let mut n = node.follow(&primary);
    let q = Q::new("promoted");
    workload(&mut p, &q, 1, 40);
    same_keyspace(&mut p, &mut n);
    // Promoted, the node keeps the backlog it had as a replica, for the old primary to
    // resync from: a receiver, though no replica has asked it for anything yet.
    assert_eq!(n.call(&[b"REPLICAOF", b"NO", b"ONE"]), Reply::Simple("OK".into()));
    assert_eq!(info_field(&mut n, "replication", "repl_backlog_active"), "1");
    workload(&mut n, &q, 40, 90);
    assert_eq!(effects(&mut n).1, skipped, "nothing skipped once promoted");
    let mut p = primary.follow(&node);
    assert_eq!(info_field(&mut n, "stats", "sync_partial_ok"), "1", "a partial resync, from the backlog");
    same_keyspace(&mut n, &mut p);
}

/// The argument lists of every `cmd` in the AOF's incremental files, in order.
fn aof_commands(dir: &std::path::Path, cmd: &str) -> Vec<Vec<String>> {
    let mut text = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(dir.join("appendonlydir"))
        .expect("appendonlydir")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(".incr.aof"))
        .collect();
    files.sort();
    for f in files {
        text.extend(std::fs::read(f).expect("aof"));
    }
    let lines: Vec<String> = String::from_utf8_lossy(&text).split("\r\n").map(str::to_owned).collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if let Some(n) = lines[i].strip_prefix('*').and_then(|n| n.parse::<usize>().ok()) {
            // *n, then $len and the value for each argument.
            let args: Vec<String> = (0..n).filter_map(|k| lines.get(i + 2 + 2 * k).cloned()).collect();
            if args.first().is_some_and(|a| a.eq_ignore_ascii_case(cmd)) {
                out.push(args);
            }
            i += 1 + 2 * n;
        } else {
            i += 1;
        }
    }
    out
}

#[test]
fn an_hdel_effect_names_only_the_fields_that_were_there() {
    let server = Server::start(Opts {
        server_args: vec!["--appendonly".into(), "yes".into(), "--appendfsync".into(), "always".into()],
        module_args: quiet(),
        ..Opts::default()
    });
    let mut c = server.conn();
    assert_eq!(c.call(&[b"EMQ.INSTALL", b"1", b"{emq}:version"]), Reply::Int(1));
    let q = Q::new("fields");
    let id = jid(1);
    q.enqueue(&mut c, &id, &[]);
    let got = q.run(&mut c, "EMQ.CLAIM", "", &[b"w", b"60000"]);
    assert_eq!(got.array().len(), 1);
    assert_eq!(q.run(&mut c, "EMQ.COMPLETE", &id, &[b"w", b"ok"]), Reply::Int(1));
    let had: Vec<String> = c.call(&[b"HKEYS", q.job(&id).as_bytes()]).strings();
    // REPROCESS deletes every field of a finished run; this job has no error, stalls or
    // progress, so its HDEL names only the others.
    assert_eq!(q.run(&mut c, "EMQ.REPROCESS", &id, &[]), Reply::Int(1));
    let hdels = aof_commands(&server.dir, "HDEL");
    let last = hdels.last().expect("an HDEL in the AOF");
    assert_eq!(last.get(1), Some(&q.job(&id)));
    let named = &last[2..];
    assert!(!named.is_empty());
    for f in named {
        assert!(had.contains(f), "HDEL names {f}, which the row did not have ({had:?})");
    }
    for f in ["r", "tk", "f"] {
        assert!(named.iter().any(|n| n == f), "{f} deleted: {named:?}");
    }
}

#[test]
fn the_aof_alone_holds_every_write() {
    let server = Server::start(Opts {
        server_args: vec!["--appendonly".into(), "yes".into()],
        module_args: quiet(),
        ..Opts::default()
    });
    let mut c = server.conn();
    assert_eq!(c.call(&[b"EMQ.INSTALL", b"1", b"{emq}:version"]), Reply::Int(1));
    workload(&mut c, &Q::new("aof"), 1, 60);
    assert_eq!(effects(&mut c).1, 0, "an AOF is a receiver");
    let want = digest(&mut c);
    let server = server.restart();
    let mut c = server.conn();
    wait_for(|| info_field(&mut c, "persistence", "loading") == "0", "aof load");
    assert_eq!(digest(&mut c), want, "AOF replay");
}

/// The members of a zset, lowest score first.
fn members(c: &mut Conn, key: &str) -> Vec<String> {
    c.call(&[b"ZRANGE", key.as_bytes(), b"0", b"-1"]).array().iter().map(Reply::str).collect()
}

fn encoding(c: &mut Conn, key: &str) -> String {
    c.call(&[b"OBJECT", b"ENCODING", key.as_bytes()]).str()
}

#[test]
fn a_busy_active_set_is_a_skiplist_on_the_primary_and_the_same_set_on_the_replica() {
    let primary = Server::quiet();
    let replica = Server::start(Opts::default());
    let mut r = replica.follow(&primary);
    let mut p = primary.conn();
    let (busy, few) = (Q::new("busy"), Q::new("few"));
    for i in 1..=40 {
        busy.enqueue(&mut p, &jid(i), &[]);
    }
    for i in 41..=43 {
        few.enqueue(&mut p, &jid(i), &[]);
    }
    // One job a claim, as workers of concurrency 1 take them.
    let mut held = Vec::new();
    for k in 0..40 {
        let tok = format!("w{k}");
        let got = busy.run(&mut p, "EMQ.CLAIM", "", &[tok.as_bytes(), b"60000"]);
        held.push((got.array()[0].array()[0].str(), tok));
        let want = if k + 1 < 16 { "listpack" } else { "skiplist" };
        assert_eq!(encoding(&mut p, &busy.k("active")), want, "after {} claims", k + 1);
    }
    let few_ids = claim_all(&few, &mut p, "f");
    assert_eq!(few_ids.len(), 3);
    assert_eq!(encoding(&mut p, &few.k("active")), "listpack", "a small set stays compact");
    let mut claimed: Vec<String> = held.iter().map(|(id, _)| id.clone()).collect();
    claimed.sort();
    let mut active = members(&mut p, &busy.k("active"));
    active.sort();
    assert_eq!(active, claimed, "the active set holds the claimed jobs and nothing else");
    // Finished one by one into a completed set kept whole, which grows past the bound too.
    for (id, tok) in &held[..20] {
        assert_eq!(complete(&busy, &mut p, id, tok, &[b"KEEP", b"-1"]), Reply::Int(1));
    }
    assert_eq!(encoding(&mut p, &busy.k("completed")), "skiplist");
    let done: Vec<String> = held[..20].iter().map(|(id, _)| id.clone()).collect();
    assert_eq!(completed(&busy, &mut p), done, "completed in the order finished, nothing else");
    assert_eq!(p.call(&[b"ZCARD", busy.k("active").as_bytes()]).int(), 20);
    same_keyspace(&mut p, &mut r);
    assert_eq!(members(&mut r, &busy.k("active")), members(&mut p, &busy.k("active")));
}

#[test]
fn with_nothing_listening_busy_sets_become_skiplists_too() {
    let server = Server::quiet();
    let mut c = server.conn();
    let q = Q::new("alone");
    for i in 1..=16 {
        let p = (i % 5 + 1).to_string();
        q.enqueue(&mut c, &jid(i), &[b"PRIORITY", p.as_bytes()]);
        q.run(&mut c, "EMQ.SCHEDULE", &jid(100 + i), &[b"+60000", b"later", b"d"]);
        let want = if i < 16 { "listpack" } else { "skiplist" };
        assert_eq!(encoding(&mut c, &q.k("prio")), want, "prio after {i}");
        assert_eq!(encoding(&mut c, &q.k("delayed")), want, "delayed after {i}");
    }
    let claimed = claim_all(&q, &mut c, "t");
    assert_eq!(claimed.len(), 16);
    assert_eq!(encoding(&mut c, &q.k("active")), "skiplist");
    assert_eq!(members(&mut c, &q.k("delayed")).len(), 16, "the placeholder never stays");
    let (built, ..) = effects(&mut c);
    assert_eq!(built, 0, "no effect was built: the path without a receiver");
}
