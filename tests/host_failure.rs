//! An internal failure answers the module's own class, `EMQHOST`, never the fence's
//! `EMQWIRE`, and is counted as `refused_emqhost` in `INFO trafikey`.
//!
//! The one server call a client can make fail is the XADD of an event into an events stream
//! that a plain `XADD` filled up to the largest stream id. It comes after the verb's other
//! writes (src/CONTRACT.md, "Decisions"): the test shows what then stands — the transition
//! without its event — and that a replica holds exactly the same.
// A test may panic: that is how it fails. The module's own rules are for src/.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

use trafikey_support::*;

const FULL: &[u8] = b"18446744073709551615-18446744073709551615";
const HOST: &str = "EMQHOST unexpected reply from the host";

fn refused(c: &mut Conn, class: &str) -> i64 {
    info_field(c, "trafikey", &format!("trafikey_refused_{class}")).parse().expect("a count")
}

#[test]
fn a_full_events_stream_answers_emqhost_and_every_copy_holds_the_same() {
    let primary = Server::quiet();
    let replica = Server::quiet();
    let mut r = replica.follow(&primary);
    let mut c = primary.conn();
    let q = Q::new("hf");
    assert_eq!(q.enqueue(&mut c, &jid(1), &[]), Reply::Int(1));
    let claimed = q.run(&mut c, "EMQ.CLAIM", "", &[b"w1", b"30000"]);
    assert_eq!(claimed.array().len(), 1);
    let events = q.k("events");
    assert_eq!(c.call(&[b"XADD", events.as_bytes(), FULL, b"f", b"v"]).bytes(), FULL);
    let (host, wire) = (refused(&mut c, "emqhost"), refused(&mut c, "emqwire"));

    // ENQUEUE: the row and the ready set are written, the event cannot be.
    assert_eq!(q.enqueue(&mut c, &jid(2), &[]).error(), HOST);
    assert_eq!(q.snapshot(&mut c).state_of(&jid(2)).as_deref(), Some("wait"));
    // COMPLETE: the job is completed, its event missing.
    assert_eq!(q.run(&mut c, "EMQ.COMPLETE", &jid(1), &[b"w1", b"ok"]).error(), HOST);
    assert_eq!(q.snapshot(&mut c).state_of(&jid(1)).as_deref(), Some("completed"));
    assert_eq!(c.call(&[b"XLEN", events.as_bytes()]).int(), 3, "added, active and the full entry only");

    assert_eq!(refused(&mut c, "emqhost"), host + 2);
    assert_eq!(refused(&mut c, "emqwire"), wire, "the fence's class answers the fence only");

    // Every copy holds the same: the writes that stood reached the replica as effects.
    c.call(&[b"WAIT", b"1", b"5000"]);
    wait_for(|| digest(&mut r) == digest(&mut c), "the replica holds what the primary holds");

    // A queue whose stream is not full is served as ever.
    let ok = Q::new("hf2");
    assert_eq!(ok.enqueue(&mut c, &jid(3), &[]), Reply::Int(1));
}
