//! `METRICS max` on the finish verbs against a real server, as src/CONTRACT.md ("Metrics") and
//! src/verbs/README.md state it: COMPLETE, TRA.COMPLETENEXT and a FAIL for good count the job
//! by the minute in `metrics:<kind>` and `metrics:<kind>:data`; a retry counts nothing; an
//! ended minute is pushed with the empty ones after it, cut to max; refusals write nothing;
//! ACL judges both keys as the caller's; replicas and the AOF hold the same; OBLITERATE
//! deletes them.
// A test may panic: that is how it fails. The module's own rules are for src/.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

use trafikey_support::*;

/// `count`, `prevTS`, `prevCount` of a kind's counter (None where absent).
fn counter(c: &mut Conn, q: &Q, kind: &str) -> [Option<i64>; 3] {
    let r =
        c.call(&[b"HMGET", q.k(&format!("metrics:{kind}")).as_bytes(), b"count", b"prevTS", b"prevCount"]);
    let v: Vec<Option<i64>> =
        r.array().iter().map(|x| if x.is_nil() { None } else { Some(x.str().parse().unwrap()) }).collect();
    [v[0], v[1], v[2]]
}

/// A kind's series, newest first.
fn series(c: &mut Conn, q: &Q, kind: &str) -> Vec<i64> {
    let key = q.k(&format!("metrics:{kind}:data"));
    c.call(&[b"LRANGE", key.as_bytes(), b"0", b"-1"]).strings().iter().map(|s| s.parse().unwrap()).collect()
}

/// A client writes the completed counter: `count`, the minute entered at `since`, `prevCount`.
fn plant(c: &mut Conn, q: &Q, count: i64, since: i64, at: i64) {
    let (count, since, at) = (count.to_string(), since.to_string(), at.to_string());
    let key = q.k("metrics:completed");
    let r = c.call(&[
        b"HSET",
        key.as_bytes(),
        b"count",
        count.as_bytes(),
        b"prevTS",
        since.as_bytes(),
        b"prevCount",
        at.as_bytes(),
    ]);
    assert!(r.err().is_none(), "{r:?}");
}

fn now_ms(c: &mut Conn) -> i64 {
    let t = c.call(&[b"TIME"]).strings();
    t[0].parse::<i64>().unwrap() * 1000 + t[1].parse::<i64>().unwrap() / 1000
}

/// Jobs 1..=n enqueued and claimed by `t`.
fn held(c: &mut Conn, q: &Q, n: u64) -> Vec<String> {
    let ids: Vec<String> = (1..=n).map(jid).collect();
    finished(q, c, &ids, "t");
    ids
}

fn fail(c: &mut Conn, q: &Q, id: &str, opts: &[&[u8]]) -> Reply {
    let mut a: Vec<&[u8]> = vec![b"t", b"boom"];
    a.extend_from_slice(opts);
    q.run(c, "EMQ.FAIL", id, &a)
}

#[test]
fn finishes_count_their_jobs_by_kind() {
    let s = Server::quiet();
    let mut c = s.conn();
    let q = Q::new("count");
    let ids = held(&mut c, &q, 4);
    let before = now_ms(&mut c);
    assert_eq!(complete(&q, &mut c, &ids[0], "t", &[b"METRICS", b"60"]), Reply::Int(1));
    let [count, since, at] = counter(&mut c, &q, "completed");
    assert_eq!((count, at), (Some(1), Some(0)));
    assert!(since.unwrap() >= before, "the first job starts the first minute");
    // A repeat counts nothing; a finish without METRICS neither.
    assert_eq!(complete(&q, &mut c, &ids[0], "t", &[b"METRICS", b"60"]), Reply::Int(0));
    assert_eq!(complete(&q, &mut c, &ids[1], "t", &[]), Reply::Int(1));
    assert_eq!(counter(&mut c, &q, "completed")[0], Some(1));
    // A FAIL that retries counts nothing and opens nothing; one for good counts as failed.
    assert_eq!(fail(&mut c, &q, &ids[2], &[b"RETRY", b"METRICS", b"60"]), Reply::Simple("retry".into()));
    assert_eq!(c.call(&[b"EXISTS", q.k("metrics:failed").as_bytes()]), Reply::Int(0));
    assert_eq!(fail(&mut c, &q, &ids[3], &[b"FINAL", b"METRICS", b"60"]), Reply::Simple("failed".into()));
    assert_eq!(counter(&mut c, &q, "failed")[0], Some(1));
    assert_eq!(series(&mut c, &q, "completed"), Vec::<i64>::new());
    // TRA.COMPLETENEXT counts the job it finishes (the retried one, claimed again).
    assert_eq!(claim_all(&q, &mut c, "t"), vec![ids[2].clone()]);
    let next = jid(9);
    assert_eq!(q.enqueue(&mut c, &next, &[]), Reply::Int(1));
    let r = q.run(&mut c, "TRA.COMPLETENEXT", &ids[2], &[b"t", b"ok", b"60000", b"METRICS", b"60"]);
    assert_eq!(r.array()[0], Reply::Int(1), "{r:?}");
    assert_eq!(r.array()[1].array()[0].array()[0].str(), next, "and fetches the next");
    assert_eq!(counter(&mut c, &q, "completed")[0], Some(2));
    q.check_invariant(&mut c);
}

#[test]
fn a_later_minute_pushes_the_ended_one_and_the_empty_ones_cut_to_max() {
    let s = Server::quiet();
    let mut c = s.conn();
    let q = Q::new("minutes");
    let ids = held(&mut c, &q, 3);
    let key = q.k("metrics:completed");
    let now = now_ms(&mut c);
    // Five jobs counted, two of them before the minute that began three minutes ago.
    let three_ago = (now / 60_000 - 3) * 60_000;
    plant(&mut c, &q, 5, three_ago, 2);
    assert_eq!(complete(&q, &mut c, &ids[0], "t", &[b"METRICS", b"60"]), Reply::Int(1));
    let [count, since, at] = counter(&mut c, &q, "completed");
    assert_eq!((count, at), (Some(6), Some(5)));
    let since = since.unwrap();
    assert!(since >= now);
    // Three minutes later, or four if a minute began since `now` was read.
    let mut want = vec![0; (since / 60_000 - three_ago / 60_000 - 1) as usize];
    want.push(3);
    assert!(want.len() >= 3);
    assert_eq!(series(&mut c, &q, "completed"), want, "the ended minute, then the empty ones");
    // Within the minute only the count moves.
    assert_eq!(complete(&q, &mut c, &ids[1], "t", &[b"METRICS", b"60"]), Reply::Int(1));
    assert!(series(&mut c, &q, "completed").len() <= want.len() + 1);
    assert_eq!(counter(&mut c, &q, "completed")[0], Some(7));
    // A gap longer than the series fills it once, at max points.
    c.call(&[b"HSET", key.as_bytes(), b"prevTS", b"0", b"prevCount", b"4"]);
    assert_eq!(complete(&q, &mut c, &ids[2], "t", &[b"METRICS", b"5"]), Reply::Int(1));
    assert_eq!(series(&mut c, &q, "completed"), vec![0, 0, 0, 0, 3]);
}

#[test]
fn a_long_gap_keeps_the_newest_old_points_that_fit() {
    let primary = Server::quiet();
    let replica = Server::quiet();
    let mut c = primary.conn();
    let mut r = replica.follow(&primary);
    let q = Q::new("long");
    let ids = held(&mut c, &q, 2);
    let data = q.k("metrics:completed:data");
    for (max, gap, want_kept) in [(100i64, 71i64, 5usize), (72, 71, 1)] {
        c.call(&[b"DEL", data.as_bytes()]);
        c.call(&[b"RPUSH", data.as_bytes(), b"5", b"4", b"3", b"2", b"1"]);
        // Nine jobs counted, two of them in the minute `gap` minutes back; the minutes that
        // passed are read back from the counter, in case a minute began meanwhile.
        let now = now_ms(&mut c);
        let since = (now / 60_000 - gap) * 60_000;
        plant(&mut c, &q, 9, since, 7);
        let id = &ids[if max == 100 { 0 } else { 1 }];
        assert_eq!(complete(&q, &mut c, id, "t", &[b"METRICS", max.to_string().as_bytes()]), Reply::Int(1));
        let got = series(&mut c, &q, "completed");
        let minutes = (counter(&mut c, &q, "completed")[1].unwrap() / 60_000 - since / 60_000) as usize;
        let mut want = vec![0; minutes - 1];
        want.push(2);
        want.extend([5, 4, 3, 2, 1].iter().take(want_kept.min(max as usize - minutes)));
        assert_eq!(got, want, "METRICS {max} after {minutes} minutes");
    }
    assert_eq!(c.call(&[b"WAIT", b"1", b"5000"]), Reply::Int(1));
    assert_eq!(digest(&mut c), digest(&mut r));
}

/// Calls of `cmd` the server counted (INFO commandstats), the module's own included.
fn calls(c: &mut Conn, cmd: &str) -> i64 {
    let info = c.call(&[b"INFO", b"commandstats"]).str();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("cmdstat_{cmd}:calls=")))
        .map_or(0, |v| v.split(',').next().unwrap().parse().unwrap())
}

#[test]
fn a_gap_of_64_empty_minutes_or_more_rebuilds_the_series_fewer_push_onto_its_head() {
    let s = Server::quiet();
    let mut c = s.conn();
    let q = Q::new("paths");
    let ids = held(&mut c, &q, 2);
    let data = q.k("metrics:completed:data");
    for (id, gap) in ids.iter().zip([64i64, 65]) {
        c.call(&[b"DEL", data.as_bytes()]);
        c.call(&[b"RPUSH", data.as_bytes(), b"7", b"6"]);
        let since = (now_ms(&mut c) / 60_000 - gap) * 60_000;
        plant(&mut c, &q, 3, since, 1);
        let before = calls(&mut c, "lrange");
        assert_eq!(complete(&q, &mut c, id, "t", &[b"METRICS", b"1000"]), Reply::Int(1));
        let read = calls(&mut c, "lrange") - before;
        // The minutes that passed, read back (a minute may have begun meanwhile).
        let minutes = (counter(&mut c, &q, "completed")[1].unwrap() / 60_000 - since / 60_000) as usize;
        let mut want = vec![0; minutes - 1];
        want.extend([2, 7, 6]);
        assert_eq!(series(&mut c, &q, "completed"), want);
        // The rebuild reads the old points that stay (one LRANGE inside the call); a few
        // new points are pushed onto the head without reading anything.
        let empty = minutes - 1;
        assert_eq!(read, i64::from(empty >= 64), "{empty} empty minutes");
    }
}

#[test]
fn the_longest_series_fills_in_one_call() {
    let s = Server::quiet();
    let mut c = s.conn();
    let q = Q::new("week");
    let ids = held(&mut c, &q, 1);
    plant(&mut c, &q, 1, 0, 0);
    assert_eq!(complete(&q, &mut c, &ids[0], "t", &[b"METRICS", b"10080"]), Reply::Int(1));
    let key = q.k("metrics:completed:data");
    assert_eq!(c.call(&[b"LLEN", key.as_bytes()]), Reply::Int(10_080));
    assert_eq!(c.call(&[b"LINDEX", key.as_bytes(), b"-1"]).str(), "1");
}

#[test]
fn refusals_write_nothing() {
    let s = Server::quiet();
    let mut c = s.conn();
    let q = Q::new("refused");
    let ids = held(&mut c, &q, 2);
    unchanged(&mut c, |c| {
        for bad in [&b"0"[..], b"10081", b"-1"] {
            let r = complete(&q, c, &ids[0], "t", &[b"METRICS", bad]);
            assert!(r.error().starts_with("EMQARG METRICS must be 1..=10080"), "{r:?}");
            let r = fail(c, &q, &ids[0], &[b"FINAL", b"METRICS", bad]);
            assert!(r.error().starts_with("EMQARG"), "{r:?}");
        }
        let r = complete(&q, c, &ids[0], "t", &[b"METRICS", b"ten"]);
        assert!(r.error().starts_with("EMQSHAPE"), "{r:?}");
        let r = complete(&q, c, &ids[0], "t", &[b"METRICS"]);
        assert!(r.error().starts_with("EMQSHAPE"), "{r:?}");
        let r = complete(&q, c, &ids[0], "other", &[b"METRICS", b"60"]);
        assert!(r.error().starts_with("EMQLEASE"), "{r:?}");
    });
    // A METRICS key of another type: WRONGTYPE before the finish writes. The series is
    // opened only by a count that ends a minute, as this one does.
    plant(&mut c, &q, 1, 0, 0);
    c.call(&[b"SET", q.k("metrics:completed:data").as_bytes(), b"x"]);
    c.call(&[b"SET", q.k("metrics:failed").as_bytes(), b"x"]);
    unchanged(&mut c, |c| {
        let r = complete(&q, c, &ids[0], "t", &[b"METRICS", b"60"]);
        assert!(r.error().starts_with("WRONGTYPE"), "{r:?}");
        let r = fail(c, &q, &ids[1], &[b"FINAL", b"METRICS", b"60"]);
        assert!(r.error().starts_with("WRONGTYPE"), "{r:?}");
    });
    // A FAIL that retries opens neither key.
    assert_eq!(fail(&mut c, &q, &ids[1], &[b"RETRY", b"METRICS", b"60"]), Reply::Simple("retry".into()));
    assert_eq!(complete(&q, &mut c, &ids[0], "t", &[]), Reply::Int(1));
}

#[test]
fn acl_judges_both_keys_as_the_callers() {
    let s = Server::quiet();
    let mut admin = s.conn();
    let q = Q::new("acl");
    let ids = held(&mut admin, &q, 3);
    // A count that ends a minute, so that the series is opened.
    plant(&mut admin, &q, 1, 0, 0);
    let mut setuser: Vec<Vec<u8>> =
        ["ACL", "SETUSER", "w", "on", ">pw", "-@all", "+@emq", "resetkeys", "%R~{emq}:*"]
            .iter()
            .map(|s| s.as_bytes().to_vec())
            .collect();
    for role in [
        "wait",
        "prio",
        "active",
        "delayed",
        "completed",
        "failed",
        "meta",
        "events",
        "job:*",
        "metrics:completed",
    ] {
        setuser.push(format!("~{}", q.k(role)).into_bytes());
    }
    let refs: Vec<&[u8]> = setuser.iter().map(Vec::as_slice).collect();
    assert_eq!(admin.call(&refs), Reply::Simple("OK".into()));
    let mut w = s.conn();
    assert_eq!(w.call(&[b"AUTH", b"w", b"pw"]), Reply::Simple("OK".into()));
    unchanged(&mut admin, |_| {
        let r = complete(&q, &mut w, &ids[0], "t", &[b"METRICS", b"60"]);
        assert!(r.error().starts_with("NOPERM"), "the series is not the user's: {r:?}");
        let r = fail(&mut w, &q, &ids[1], &[b"FINAL", b"METRICS", b"60"]);
        assert!(r.error().starts_with("NOPERM"), "{r:?}");
    });
    // Without METRICS the same user finishes: no such key is opened.
    assert_eq!(complete(&q, &mut w, &ids[0], "t", &[]), Reply::Int(1));
    assert_eq!(fail(&mut w, &q, &ids[1], &[b"RETRY", b"METRICS", b"60"]), Reply::Simple("retry".into()));
    // Within the minute a count touches the counter alone (the minute entered a day ahead:
    // as a clock gone back, it goes on whenever the call runs).
    let now = (now_ms(&mut admin) + 86_400_000).to_string();
    admin.call(&[b"HSET", q.k("metrics:completed").as_bytes(), b"prevTS", now.as_bytes()]);
    assert_eq!(complete(&q, &mut w, &ids[2], "t", &[b"METRICS", b"60"]), Reply::Int(1));
    assert_eq!(counter(&mut admin, &q, "completed")[0], Some(2));
}

#[test]
fn replicas_and_the_aof_hold_what_the_primary_holds() {
    let primary = Server::quiet_aof();
    let replica = Server::quiet();
    let mut p = primary.conn();
    let mut r = replica.follow(&primary);
    let q = Q::new("repl");
    let ids = held(&mut p, &q, 4);
    complete(&q, &mut p, &ids[0], "t", &[b"METRICS", b"30"]);
    // An ended minute with empty ones after it, and a trim, replicated as values.
    p.call(&[b"HSET", q.k("metrics:completed").as_bytes(), b"prevTS", b"0", b"prevCount", b"0"]);
    complete(&q, &mut p, &ids[1], "t", &[b"METRICS", b"30"]);
    complete(&q, &mut p, &ids[2], "t", &[b"METRICS", b"20"]);
    fail(&mut p, &q, &ids[3], &[b"FINAL", b"METRICS", b"30"]);
    assert_eq!(p.call(&[b"WAIT", b"1", b"5000"]), Reply::Int(1));
    let d = digest(&mut p);
    assert_eq!(d, digest(&mut r));
    assert_eq!(series(&mut r, &q, "completed").len(), 30);
    let primary = primary.restart();
    let mut p = primary.conn();
    assert_eq!(digest(&mut p), d, "the AOF replays to the same counters and series");
}

#[test]
fn obliterate_deletes_the_metrics_keys() {
    let s = Server::quiet();
    let mut c = s.conn();
    let q = Q::new("gone");
    let ids = held(&mut c, &q, 2);
    complete(&q, &mut c, &ids[0], "t", &[b"METRICS", b"60"]);
    fail(&mut c, &q, &ids[1], &[b"FINAL", b"METRICS", b"60"]);
    c.call(&[b"HSET", q.k("metrics:completed").as_bytes(), b"prevTS", b"0"]);
    c.call(&[b"RPUSH", q.k("metrics:completed:data").as_bytes(), b"1"]);
    c.call(&[b"RPUSH", q.k("metrics:failed:data").as_bytes(), b"1"]);
    let roles = ["wait", "prio", "active", "delayed", "completed", "failed", "meta", "events"];
    let v = q.cmd("TRA.OBLITERATE", "", &roles, &[]);
    let r = c.call(&v.iter().map(Vec::as_slice).collect::<Vec<_>>());
    assert_eq!(r, Reply::Int(0));
    for k in ["metrics:completed", "metrics:completed:data", "metrics:failed", "metrics:failed:data"] {
        assert_eq!(c.call(&[b"EXISTS", q.k(k).as_bytes()]), Reply::Int(0), "{k}");
    }
    assert_eq!(c.call(&[b"DBSIZE"]), Reply::Int(1), "only the fence is left");
}
