//! The guarantees page (`src/GUARANTEES.md`) and the code agree:
//!
//! * every class in the page's table of the module's errors is produced somewhere in `src/`
//!   (its word is in the source), and the table lists exactly the classes of
//!   `trafikey::errors::Class`; every error the page says a job fails with (`stalled`, ...)
//!   is a string literal in `src/`;
//! * every error text of `src/errors.rs` — each constant, and the fixed part of each string
//!   literal that starts with a class word — is on the page;
//! * every example block marked `valkey` is replayed, in page order, each on a fresh
//!   connection to one real server with `EMQ.INSTALL` done, and each reply must be exactly
//!   the one the page shows (rendered as `valkey-cli` prints it); together the blocks show
//!   an error of every module class;
//! * the replies the page shows for what one connection cannot replay — a blocked CLAIM ended
//!   by `CLIENT UNBLOCK … ERROR` or by its node becoming a replica, a write sent to a
//!   replica — are the ones a real server gives.
// A test may panic: that is how it fails. The module's own rules are for src/.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

use std::path::Path;
use std::thread::sleep;
use std::time::Duration;

use trafikey::errors::{self, Class};
use trafikey_support::page::{examples, render, words};
use trafikey_support::*;

fn page() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/GUARANTEES.md"))
        .expect("src/GUARANTEES.md")
}

/// Every `.rs` file under `dir`, with its text.
fn sources(dir: &Path, out: &mut Vec<(String, String)>) {
    for e in std::fs::read_dir(dir).expect("read src/") {
        let p = e.expect("dir entry").path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push((p.display().to_string(), std::fs::read_to_string(&p).expect("read a source")));
        }
    }
}

/// The class words of the page's table of the module's errors (its rows' first cells).
fn module_classes(page: &str) -> Vec<String> {
    let start = page.find("### The module's errors").expect("the section of the module's errors");
    let section = &page[start..];
    let end = section[4..].find("\n#").map_or(section.len(), |i| i + 4);
    section[..end]
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split_once('`').map(|(w, _)| w.to_string()))
        .collect()
}

#[test]
fn every_class_on_the_page_is_produced_in_src_and_every_class_is_on_the_page() {
    let page = page();
    let listed = module_classes(&page);
    let mut src = Vec::new();
    sources(Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/src")), &mut src);
    assert!(src.len() > 10, "the sources of src/");
    for class in &listed {
        let at = src.iter().find(|(_, text)| text.contains(class.as_str()));
        assert!(at.is_some(), "the page lists {class}, which nothing in src/ produces");
    }
    let code: Vec<String> = Class::ALL.iter().map(|c| c.word().to_string()).collect();
    let mut a = listed.clone();
    let mut b = code.clone();
    a.sort();
    b.sort();
    assert_eq!(a, b, "the page's table of the module's errors lists exactly errors::Class::ALL");
    // The errors a job fails with: each a literal the module writes.
    let start = page.find("### Errors a job fails with").expect("the section of the errors a job fails with");
    let section = &page[start + 4..];
    let section = &section[..section.find("\n#").unwrap_or(section.len())];
    let words: Vec<&str> =
        section.lines().filter_map(|l| l.strip_prefix("* `")).filter_map(|l| l.split('`').next()).collect();
    assert!(!words.is_empty(), "the errors a job fails with");
    for w in words {
        let lit = format!("\"{w}\"");
        assert!(
            src.iter().any(|(_, t)| t.contains(&lit)),
            "the page says jobs fail with `{w}`; src/ never writes it"
        );
    }
}

/// The string literals of a Rust source (plain `"…"` ones, `\"` and `\\` unescaped).
fn literals(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                let mut s = String::new();
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => {
                            if let Some(n) = chars.next() {
                                s.push(n);
                            }
                        }
                        '"' => break,
                        c => s.push(c),
                    }
                }
                out.push(s);
            }
            // A char literal like '"' must not open a string.
            '\'' => {
                let rest: String = chars.clone().take(3).collect();
                if rest.starts_with("\"'") {
                    chars.next();
                    chars.next();
                }
            }
            // Comments hold no error texts.
            '/' if chars.clone().next() == Some('/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
            }
            _ => {}
        }
    }
    out
}

#[test]
fn every_error_text_of_errors_rs_is_on_the_page() {
    let page = page();
    for text in [
        errors::WIRE_ABSENT,
        errors::WIRE_FOUND.trim_end(),
        errors::WIRE_CLUSTER,
        errors::HOST_REPLY,
        errors::WRONGTYPE,
        errors::NOPERM_KEY,
    ] {
        assert!(page.contains(text), "the page lacks the error text `{text}`");
    }
    let file =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/errors.rs")).expect("errors.rs");
    let code = file.split("#[cfg(test)]").next().unwrap_or(&file);
    let mut checked = 0;
    for lit in literals(code) {
        let word: String = lit.chars().take_while(char::is_ascii_uppercase).collect();
        if word.len() < 3 {
            continue;
        }
        // The fixed part: up to a format placeholder (`{0}`).
        let fixed = lit.split("{0}").next().unwrap_or(&lit).trim_end();
        assert!(page.contains(fixed), "the page lacks `{fixed}` (src/errors.rs: \"{lit}\")");
        checked += 1;
    }
    assert!(checked >= 10 + 7, "the literals of errors.rs were read ({checked})");
}

#[test]
fn every_checked_example_is_what_a_real_server_answers() {
    let page = page();
    let blocks = examples(&page);
    assert!(blocks.len() >= 8, "the page's checked examples ({})", blocks.len());
    let s = Server::installed();
    let mut shown_classes = Vec::new();
    for block in &blocks {
        let mut c = s.conn();
        for (cmd, want) in block {
            let argv = words(cmd);
            let refs: Vec<&[u8]> = argv.iter().map(|w| w.as_bytes()).collect();
            let got = render(&c.call(&refs));
            assert_eq!(&got, want, "the page's reply to `{cmd}`");
            // The class of every error shown, also inside an array (`2) (error) …`).
            for l in want {
                if let Some((_, e)) = l.split_once("(error) ") {
                    shown_classes.push(e.split(' ').next().unwrap_or_default().to_string());
                }
            }
        }
    }
    for class in Class::ALL {
        assert!(
            shown_classes.iter().any(|w| w == class.word()),
            "no checked example on the page shows {} (shown: {shown_classes:?})",
            class.word()
        );
    }
    // The server's own, shown and checked too.
    for word in ["OOM", "EXECABORT", "ERR"] {
        assert!(shown_classes.iter().any(|w| w == word), "no checked example shows {word}");
    }
}

fn claim_block(q: &Q) -> Vec<Vec<u8>> {
    q.cmd("EMQ.CLAIM", "", &keys_of("EMQ.CLAIM"), &[b"w1", b"30000", b"BLOCK", b"0"])
}

fn send(c: &mut Conn, argv: &[Vec<u8>]) {
    let refs: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
    c.send(&refs).expect("send");
}

fn blocked(admin: &mut Conn) {
    wait_for(|| info_field(admin, "clients", "blocked_clients") == "1", "the CLAIM blocked");
}

fn on_page(page: &str, e: &str) {
    assert!(page.contains(e), "the page does not show the server's reply `{e}`");
}

#[test]
fn unblocked_and_readonly_are_as_on_the_page() {
    let page = page();
    let other = Server::installed();
    let s = Server::installed();
    let (mut admin, mut w) = (s.conn(), s.conn());
    let q = Q::new("idle");
    // CLIENT UNBLOCK … ERROR.
    let id = w.call(&[b"CLIENT", b"ID"]).int().to_string();
    send(&mut w, &claim_block(&q));
    blocked(&mut admin);
    assert_eq!(admin.call(&[b"CLIENT", b"UNBLOCK", id.as_bytes(), b"ERROR"]), Reply::Int(1));
    let e = w.read().expect("the waiter's reply");
    on_page(&page, &format!("(error) {}", e.error()));
    assert!(e.error().starts_with("UNBLOCKED"), "{e:?}");
    // The node becomes a replica under a waiter.
    send(&mut w, &claim_block(&q));
    blocked(&mut admin);
    admin.call(&[b"REPLICAOF", b"127.0.0.1", other.port.to_string().as_bytes()]);
    let e = w.read().expect("the waiter's reply");
    assert!(e.error().starts_with("UNBLOCKED"), "{e:?}");
    on_page(&page, &format!("`{}`", e.error()));
    // A write sent to the replica.
    wait_for(
        || admin.call(&[b"INFO", b"replication"]).str().contains("master_link_status:up"),
        "the replica link",
    );
    sleep(Duration::from_millis(10));
    let r = q.enqueue(&mut admin, &jid(1), &[]);
    assert!(r.error().starts_with("READONLY"), "{r:?}");
    on_page(&page, &format!("(error) {}", r.error()));
    on_page(&page, &format!("`{}`", r.error()));
    admin.call(&[b"REPLICAOF", b"NO", b"ONE"]);
}
