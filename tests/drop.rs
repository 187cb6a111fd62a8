//! TRA.DROP against a real server: the differential property test against the coherence
//! drop's reference Lua script `:coherence_drop` (tests/fixtures/coherence_drop.lua), and the
//! verb's edges, flags and effects.
// A test may panic: that is how it fails. The module's own rules are for src/.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

use std::cell::{Cell, RefCell};
use trafikey_support::*;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

/// The reference Lua script of the coherence drop, byte for byte as the fixture holds it.
const SCRIPT: &str = include_str!("fixtures/coherence_drop.lua");

const ALPHABET: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// One case: what the row holds before (None: absent) and the incoming 14-byte version.
type Case = (Option<Vec<u8>>, Vec<u8>);

fn brand() -> impl Strategy<Value = String> {
    prop_oneof![Just("ECC".to_string()), Just("JOB".to_string()), "[A-Za-z]{3}"]
}

fn tail() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), 0..12)
}

/// Versions and frames in mint order: the stored frame's version equal to, older or newer
/// than the incoming one (by one, or by anything), under any brands, followed by a value.
fn minted() -> impl Strategy<Value = Case> {
    (
        any::<u64>(),
        prop_oneof![Just(0i128), Just(-1), Just(1), any::<i64>().prop_map(i128::from)],
        brand(),
        brand(),
        tail(),
    )
        .prop_map(|(n, delta, b1, b2, value)| {
            let stored = (i128::from(n) + delta).clamp(0, i128::from(u64::MAX)) as u64;
            let frame = [id_of(&b2, stored).into_bytes(), value].concat();
            (Some(frame), id_of(&b1, n).into_bytes())
        })
}

/// Any 14 bytes as the version (Base62 or not, NUL and high bytes included), and a frame
/// that is absent, short, random, or the version with one byte of its payload changed.
fn raw() -> impl Strategy<Value = Case> {
    let version = prop_oneof![
        proptest::collection::vec(any::<u8>(), 14),
        proptest::collection::vec(proptest::sample::select(ALPHABET.to_vec()), 14),
    ];
    version.prop_flat_map(|v| {
        let near = {
            let v = v.clone();
            (0usize..14, any::<u8>(), tail()).prop_map(move |(i, b, value)| {
                let mut f = v.clone();
                f[i] = b;
                Some([f, value].concat())
            })
        };
        let frame = prop_oneof![
            Just(None),
            proptest::collection::vec(any::<u8>(), 0..14).prop_map(Some),
            proptest::collection::vec(any::<u8>(), 14..40).prop_map(Some),
            Just(Some(v.clone())),
            near,
        ];
        (frame, Just(v))
    })
}

/// Every string in a nested reply, in order.
fn strings_in(r: &Reply) -> Vec<String> {
    match r {
        Reply::Array(items) => items.iter().flat_map(strings_in).collect(),
        Reply::Bulk(_) | Reply::Simple(_) => vec![r.str()],
        _ => vec![],
    }
}

fn set_or_del(key: &str, frame: &Option<Vec<u8>>) -> Vec<Vec<u8>> {
    match frame {
        Some(f) => vec![b"SET".to_vec(), key.as_bytes().to_vec(), f.clone()],
        None => vec![b"DEL".to_vec(), key.as_bytes().to_vec()],
    }
}

#[test]
fn drop_agrees_with_the_reference_script_on_every_version() {
    let s = Server::start(Opts::default());
    let c = RefCell::new(s.conn());
    // Lua compares strings with strcoll: only the C collation makes it byte-wise.
    assert_eq!(
        c.borrow_mut().call(&[b"CONFIG", b"GET", b"locale-collate"]).strings(),
        ["locale-collate", "C"]
    );
    // Batches of cases, each batch one pipeline: 64 × 64 = 4096 cases.
    let batch = proptest::collection::vec(prop_oneof![minted(), raw()], 64);
    let mut runner = TestRunner::new(Config { cases: 64, failure_persistence: None, ..Config::default() });
    let compared = Cell::new(0usize);
    let verdicts = [Cell::new(0usize), Cell::new(0usize)];
    runner
        .run(&batch, |cases| {
            let mut cmds = Vec::with_capacity(cases.len() * 6);
            for (i, (frame, version)) in cases.iter().enumerate() {
                let (lua, native) = (format!("ecc:{{lua}}:{i}"), format!("ecc:{{native}}:{i}"));
                cmds.push(set_or_del(&lua, frame));
                cmds.push(set_or_del(&native, frame));
                cmds.push(vec![
                    b"EVAL".to_vec(),
                    SCRIPT.as_bytes().to_vec(),
                    b"1".to_vec(),
                    lua.clone().into_bytes(),
                    version.clone(),
                ]);
                cmds.push(vec![
                    b"TRA.DROP".to_vec(),
                    b"1".to_vec(),
                    native.clone().into_bytes(),
                    version.clone(),
                ]);
                cmds.push(vec![b"GET".to_vec(), lua.into_bytes()]);
                cmds.push(vec![b"GET".to_vec(), native.into_bytes()]);
            }
            let replies = c.borrow_mut().pipeline(&cmds);
            for ((frame, version), r) in cases.iter().zip(replies.chunks(6)) {
                prop_assert!(r[0].err().is_none() && r[1].err().is_none());
                prop_assert_eq!(&r[2], &r[3], "replies differ: frame {:?} version {:?}", frame, version);
                prop_assert_eq!(&r[4], &r[5], "rows differ: frame {:?} version {:?}", frame, version);
                // The verdict is the row's fate: 1 exactly when a row was there and is gone.
                let dropped = r[3] == Reply::Int(1);
                prop_assert_eq!(dropped, frame.is_some() && r[5].is_nil());
                let v = &verdicts[usize::from(dropped)];
                v.set(v.get() + 1);
                compared.set(compared.get() + 1);
            }
            Ok(())
        })
        .unwrap_or_else(|e| panic!("TRA.DROP and the reference script diverge: {e}"));
    assert_eq!(compared.get(), 64 * 64);
    // Both verdicts are well represented, so the comparison is not vacuous.
    let counts = verdicts.map(|v| v.get());
    assert!(counts.iter().all(|&n| n > 500), "verdicts [kept, dropped] {counts:?}");
}

#[test]
fn drop_takes_the_four_branches_and_needs_no_fence() {
    // No EMQ.INSTALL: TRA.DROP is not an EMQ wire verb.
    let s = Server::start(Opts::default());
    let mut c = s.conn();
    let drop = |c: &mut Conn, key: &str, v: &str| c.call(&[b"TRA.DROP", b"1", key.as_bytes(), v.as_bytes()]);
    let frame = format!("{}{{\"name\":\"ada\"}}", id_of("ECC", 500));
    // (1) the row gone
    assert_eq!(unchanged(&mut c, |c| drop(c, "ecc:{users}:1", &id_of("ECC", 1))), Reply::Int(0));
    // (2) a short frame
    c.call(&[b"SET", b"ecc:{users}:1", b"JOB0000"]);
    assert_eq!(drop(&mut c, "ecc:{users}:1", &id_of("ECC", 0)), Reply::Int(1));
    assert_eq!(c.call(&[b"EXISTS", b"ecc:{users}:1"]), Reply::Int(0));
    // (3) strictly newer; (4) equal or older stays
    c.call(&[b"SET", b"ecc:{users}:1", frame.as_bytes()]);
    for n in [0, 499, 500] {
        assert_eq!(unchanged(&mut c, |c| drop(c, "ecc:{users}:1", &id_of("ECC", n))), Reply::Int(0), "{n}");
    }
    assert_eq!(drop(&mut c, "ecc:{users}:1", &id_of("ECC", 501)), Reply::Int(1));
    assert_eq!(c.call(&[b"EXISTS", b"ecc:{users}:1"]), Reply::Int(0));
    // Any key name, a queue key's included.
    c.call(&[b"SET", b"emq:{q}:wait", b"x"]);
    assert_eq!(drop(&mut c, "emq:{q}:wait", &id_of("ECC", 1)), Reply::Int(1));
    assert_eq!(info_field(&mut c, "trafikey", "trafikey_dropped"), "3");
    assert_eq!(info_field(&mut c, "trafikey", "trafikey_kept"), "4");
}

#[test]
fn drop_refuses_bad_input_and_writes_nothing() {
    let s = Server::start(Opts::default());
    let mut c = s.conn();
    let row = b"ecc:{t}:1";
    c.call(&[b"SET", row, b"JOB00000000005value"]);
    let v = id_of("ECC", 9).into_bytes();
    let cases: Vec<(&str, Vec<&[u8]>)> = vec![
        ("EMQARG", vec![b"TRA.DROP", b"1", row, b"ECC0000000009"]),
        ("EMQARG", vec![b"TRA.DROP", b"1", row, b"ECC000000000009"]),
        ("EMQARG", vec![b"TRA.DROP", b"1", row, b""]),
        ("EMQSHAPE", vec![b"TRA.DROP", b"1", row]),
        ("EMQSHAPE", vec![b"TRA.DROP", b"1", row, &v, &v]),
        ("EMQSHAPE", vec![b"TRA.DROP", b"2", row, &v]),
        ("EMQSHAPE", vec![b"TRA.DROP", b"x", row, &v]),
        ("EMQSHAPE", vec![b"TRA.DROP"]),
    ];
    for (class, args) in &cases {
        let e = unchanged(&mut c, |c| c.call(args));
        assert!(e.error().starts_with(class), "{args:?}: {e:?}");
    }
    // A row that is not a string: the server's WRONGTYPE, as the script's GET answers.
    for (make, key) in [
        (&[&b"HSET"[..], b"ecc:{t}:h", b"f", b"v"][..], &b"ecc:{t}:h"[..]),
        (&[b"RPUSH", b"ecc:{t}:l", b"JOB00000000001"], b"ecc:{t}:l"),
    ] {
        c.call(make);
        let e = unchanged(&mut c, |c| c.call(&[b"TRA.DROP", b"1", key, &v]));
        assert_eq!(e.error(), "WRONGTYPE Operation against a key holding the wrong kind of value");
        let e = c.call(&[b"EVAL", SCRIPT.as_bytes(), b"1", key, &v]);
        assert!(e.error().contains("WRONGTYPE"), "the script agrees: {e:?}");
    }
    assert_eq!(c.call(&[b"GET", row]).str(), "JOB00000000005value");
}

#[test]
fn drop_is_declared_and_replicated_as_its_effect() {
    let primary = Server::start(Opts::default());
    let replica = Server::start(Opts::default());
    let mut p = primary.conn();
    // Flags, categories and the key spec: a write of one declared key, RW ACCESS DELETE.
    let info = p.call(&[b"COMMAND", b"INFO", b"TRA.DROP"]);
    let entry = info.array()[0].array();
    let flags = entry[2].strings();
    assert!(flags.iter().any(|f| f == "write") && flags.iter().any(|f| f == "fast"), "{flags:?}");
    assert!(!flags.iter().any(|f| f == "denyoom"), "a drop frees memory: {flags:?}");
    let cats = entry[6].strings();
    assert!(cats.iter().any(|x| x == "@write") && !cats.iter().any(|x| x == "@emq"), "{cats:?}");
    let spec = strings_in(&entry[8]);
    for f in ["RW", "access", "delete"] {
        assert!(spec.iter().any(|s| s == f), "key spec {spec:?}");
    }
    assert_eq!(
        p.call(&[b"COMMAND", b"GETKEYS", b"TRA.DROP", b"1", b"ecc:{t}:1", b"v"]).strings(),
        ["ecc:{t}:1"]
    );
    // A caller who may only read the row cannot drop it.
    let mut reader = primary.user(&mut p, "reader", "%R~* +@all");
    p.call(&[b"SET", b"ecc:{t}:1", b"ECC00000000005v"]);
    assert!(reader.call(&[b"TRA.DROP", b"1", b"ecc:{t}:1", b"ECC00000000009"]).error().starts_with("NOPERM"));

    let mut r = replica.follow(&primary);
    for i in 0..20u64 {
        let key = format!("ecc:{{t}}:{i}");
        p.call(&[b"SET", key.as_bytes(), format!("{}v", id_of("ECC", 10)).as_bytes()]);
        // Even rows get a newer version (dropped), odd rows an older one (kept).
        let n = if i % 2 == 0 { 11 } else { 9 };
        let want = Reply::Int(i64::from(i % 2 == 0));
        assert_eq!(p.call(&[b"TRA.DROP", b"1", key.as_bytes(), id_of("ECC", n).as_bytes()]), want);
    }
    assert_eq!(p.call(&[b"WAIT", b"1", b"5000"]), Reply::Int(1));
    assert_eq!(digest(&mut p), digest(&mut r));
    assert_eq!(r.call(&[b"DBSIZE"]), Reply::Int(10));
    // The replica ran the effects only: ten DELs, and no TRA.DROP.
    let stats = r.call(&[b"INFO", b"commandstats"]).str();
    assert!(!stats.contains("cmdstat_tra.drop"), "{stats}");
    assert!(stats.contains("cmdstat_del:calls=10,"), "{stats}");
}
