//! The reference page and the command table agree: every registered command is documented,
//! in table order, with the synopsis the table registers; and the server's COMMAND DOCS
//! carry the table's summary and complexity, each argument's flags, and display names and
//! `numkeys` as the synopses show them.
// A test may panic: that is how it fails. The module's own rules are for src/.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

use trafikey::verbs::COMMANDS;
use trafikey_support::*;

fn documented() -> Vec<(String, String)> {
    let page = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/verbs/README.md"))
        .expect("reference page");
    let mut out = Vec::new();
    let mut lines = page.lines().peekable();
    while let Some(l) = lines.next() {
        if let Some(name) = l.strip_prefix("### ") {
            // the synopsis is the first non-empty line after the heading, in backticks
            let syn = lines.by_ref().find(|l| !l.trim().is_empty()).unwrap_or_default();
            out.push((name.trim().to_string(), syn.trim().trim_matches('`').to_string()));
        }
    }
    out
}

#[test]
fn every_command_is_documented_in_table_order() {
    let docs = documented();
    let names: Vec<&str> = docs.iter().map(|(n, _)| n.as_str()).collect();
    let table: Vec<&str> = COMMANDS.iter().map(|c| c.name).collect();
    assert_eq!(names, table, "the reference page's commands, in table order");
    for (c, (_, syn)) in COMMANDS.iter().zip(&docs) {
        assert_eq!(syn, &c.synopsis(), "synopsis of {}", c.name);
    }
}

#[test]
fn command_docs_come_from_the_table() {
    let s = Server::start(Opts::default());
    let mut conn = s.conn();
    for c in COMMANDS.iter() {
        let r = conn.call(&[b"COMMAND", b"DOCS", c.name.as_bytes()]);
        let entry = &r.array()[1];
        let fields = entry.array();
        let get = |k: &str| fields.chunks(2).find(|p| p[0].str() == k).map(|p| p[1].str());
        assert_eq!(get("summary").as_deref(), Some(c.summary), "{}", c.name);
        assert_eq!(get("complexity").as_deref(), Some(c.complexity), "{}", c.name);
        assert_eq!(get("module").as_deref(), Some("trafikey"));
    }
}

/// Every name, token and display text in a COMMAND DOCS argument tree, and the key names.
fn walk_docs(args: &[Reply], words: &mut Vec<String>, keys: &mut Vec<String>) {
    for a in args {
        let f = a.array();
        let get = |k: &str| f.chunks(2).find(|p| p[0].str() == k).map(|p| &p[1]);
        let name = get("name").map(Reply::str).unwrap_or_default();
        if get("type").map(Reply::str).as_deref() == Some("key") {
            keys.push(name.clone());
        }
        words.push(name);
        for k in ["token", "display_text"] {
            if let Some(v) = get(k) {
                words.push(v.str());
            }
        }
        if let Some(sub) = get("arguments") {
            walk_docs(sub.array(), words, keys);
        }
    }
}

/// COMMAND DOCS lists every argument and option of every command, as the reference page
/// (written by hand, not generated) shows them: `numkeys`, each key by its role, each value
/// placeholder and each option word.
#[test]
fn command_docs_list_every_argument_of_the_reference_page() {
    let s = Server::start(Opts::default());
    let mut conn = s.conn();
    for (name, syn) in documented() {
        let r = conn.call(&[b"COMMAND", b"DOCS", name.as_bytes()]);
        let fields = r.array()[1].array();
        let args = fields
            .chunks(2)
            .find(|p| p[0].str() == "arguments")
            .map(|p| p[1].array().to_vec())
            .unwrap_or_default();
        let (mut words, mut keys) = (Vec::new(), Vec::new());
        walk_docs(&args, &mut words, &mut keys);
        let mut parts = syn.split_whitespace().skip(1).peekable();
        if parts.peek().is_some_and(|p| p.chars().all(|c| c.is_ascii_digit())) {
            let n: usize = parts.next().map_or(0, |p| p.parse().unwrap_or(0));
            assert!(words.iter().any(|w| w == "numkeys"), "{name}: numkeys");
            let role = |k: &str| {
                let role = k.strip_prefix("emq:{Q}:").unwrap_or(k);
                let role = role.trim_end_matches("<ID>").trim_end_matches(':');
                let role = role.trim_start_matches('<').trim_end_matches('>');
                if role == "{emq}:version" {
                    "version".to_string()
                } else {
                    role.to_string()
                }
            };
            let mut page_keys: Vec<String> = parts.by_ref().take(n).map(role).collect();
            // A counted tail of keys: `n key [key ...]`.
            if parts.peek() == Some(&"n") {
                assert!(words.iter().any(|w| w == "n"), "{name}: n");
                parts.next();
                page_keys.extend(parts.next().map(role));
                while parts.peek().is_some_and(|p| p.starts_with("[emq:") || *p == "...]") {
                    parts.next();
                }
            }
            assert_eq!(keys, page_keys, "{name}: every key, in order, by its role");
        }
        for w in parts.flat_map(|p| p.split(['[', ']', '|'])).filter(|w| !w.is_empty() && *w != "...") {
            assert!(
                words.iter().any(|d| d.eq_ignore_ascii_case(w)),
                "{name}: COMMAND DOCS lacks {w:?} (has {words:?})"
            );
        }
    }
}

/// The page's config table is the declarations' (`trafikey::config`), row for row; and the
/// server registers each config with its declared default and range.
#[test]
fn the_config_table_comes_from_the_declarations() {
    let page = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/verbs/README.md"))
        .expect("reference page");
    let head = "| config | default | range | meaning |\n|---|---|---|---|\n";
    let start = page.find(head).expect("the config table") + head.len();
    let rows: Vec<&str> = page[start..].lines().take_while(|l| l.starts_with('|')).collect();
    assert_eq!(rows, trafikey::config::table_rows(), "the reference page's config table");

    // Registered as declared: without the harness's own setting of the audit.
    let s = Server::start(Opts { module_args: vec!["audit-handles".into(), "no".into()], ..Opts::default() });
    let mut c = s.conn();
    for cfg in trafikey::config::INTS {
        let name = format!("trafikey.{}", cfg.name);
        let got = c.call(&[b"CONFIG", b"GET", name.as_bytes()]).strings();
        assert_eq!(got, vec![name.clone(), cfg.default.to_string()]);
        for bad in [cfg.min.saturating_sub(1), cfg.max.saturating_add(1)] {
            let r = c.call(&[b"CONFIG", b"SET", name.as_bytes(), bad.to_string().as_bytes()]);
            assert!(r.err().is_some(), "{name} {bad} is out of range: {r:?}");
        }
        assert_eq!(
            c.call(&[b"CONFIG", b"SET", name.as_bytes(), cfg.max.to_string().as_bytes()]),
            Reply::Simple("OK".into())
        );
    }
    for cfg in trafikey::config::FLAGS {
        let name = format!("trafikey.{}", cfg.name);
        let want = if cfg.default { "yes" } else { "no" };
        assert_eq!(
            c.call(&[b"CONFIG", b"GET", name.as_bytes()]).strings(),
            vec![name.clone(), want.to_string()]
        );
    }
}

/// A value given after `--loadmodule` is the config's starting value.
#[test]
fn load_arguments_set_configs() {
    let s = Server::start(Opts {
        module_args: vec!["upkeep".into(), "no".into(), "log-keep".into(), "7".into()],
        ..Opts::default()
    });
    let mut c = s.conn();
    assert_eq!(c.call(&[b"CONFIG", b"GET", b"trafikey.upkeep"]).strings(), ["trafikey.upkeep", "no"]);
    assert_eq!(c.call(&[b"CONFIG", b"GET", b"trafikey.log-keep"]).strings(), ["trafikey.log-keep", "7"]);
}

/// Every string of a reply, depth first.
fn words(r: &Reply, out: &mut Vec<String>) {
    match r {
        Reply::Array(items) => items.iter().for_each(|i| words(i, out)),
        Reply::Bulk(b) => out.push(String::from_utf8_lossy(b).into_owned()),
        Reply::Simple(s) => out.push(s.clone()),
        _ => {}
    }
}

/// The words COMMAND DOCS gives for argument `arg` of `cmd`: its fields up to the next
/// argument's name.
fn doc_of(c: &mut Conn, cmd: &str, arg: &str) -> Option<Vec<String>> {
    let mut w = Vec::new();
    words(&c.call(&[b"COMMAND", b"DOCS", cmd.as_bytes()]), &mut w);
    let at = w.windows(2).position(|p| p[0] == "name" && p[1] == arg)?;
    let rest = &w[at + 2..];
    let end = rest.iter().position(|x| x == "name").unwrap_or(rest.len());
    Some(rest[..end].to_vec())
}

/// The value of `field` in an argument's doc words.
fn doc_field<'a>(doc: &'a [String], field: &str) -> Option<&'a str> {
    doc.iter().position(|x| x == field).and_then(|i| doc.get(i + 1)).map(String::as_str)
}

/// host/register.rs `Docs::arg`: `flags |= MULTIPLE` → `&=` (COMMAND DOCS without an
/// argument's flags): the repeated block of EXTENDS is `multiple`, ENQUEUE's PRIORITY
/// `optional`, as the synopses say.
#[test]
fn command_docs_carry_each_arguments_flags() {
    let s = Server::installed();
    let mut c = s.conn();
    let flags_of = |c: &mut Conn, cmd: &str, arg: &str| -> Vec<String> {
        let doc = doc_of(c, cmd, arg).unwrap_or_else(|| panic!("{cmd} {arg}"));
        match doc.iter().position(|x| x == "flags") {
            Some(f) => doc[f + 1..]
                .iter()
                .filter(|x| ["optional", "multiple"].contains(&x.as_str()))
                .cloned()
                .collect(),
            None => Vec::new(),
        }
    };
    assert_eq!(flags_of(&mut c, "emq.extends", "job"), ["multiple"]);
    assert_eq!(flags_of(&mut c, "emq.enqueue", "priority"), ["optional"]);
    assert_eq!(flags_of(&mut c, "emq.complete", "token"), Vec::<String>::new());
}

/// host/register.rs `Docs::arg`: a display text only for a value whose shown name differs
/// from its name (`matches!(Value) && display != name`: `&&` → `||`, `!=` → `==`); and
/// `Docs::of`: `numkeys` only for the commands that take keys (`==` → `!=`).
#[test]
fn command_docs_show_display_names_and_numkeys_as_the_synopses_do() {
    let s = Server::installed();
    let mut c = s.conn();
    let doc =
        |c: &mut Conn, cmd: &str, arg: &str| doc_of(c, cmd, arg).unwrap_or_else(|| panic!("{cmd} {arg}"));
    // `[PRIORITY p]`: shown as `p`.
    assert_eq!(doc_field(&doc(&mut c, "emq.enqueue", "priority"), "display_text"), Some("p"));
    // None given to a value shown by its own name or to a word: the server shows the name.
    for (cmd, arg) in [("emq.complete", "token"), ("emq.enqueue", "lifo")] {
        assert_eq!(doc_field(&doc(&mut c, cmd, arg), "display_text"), Some(arg), "{cmd} {arg}");
    }
    assert_eq!(doc_field(&doc(&mut c, "emq.enqueue", "lifo"), "token"), Some("LIFO"));
    // A choice and a block have none at all.
    for arg in ["kind", "backoff"] {
        assert_eq!(doc_field(&doc(&mut c, "emq.enqueue", arg), "display_text"), None, "{arg}");
    }
    assert!(doc_of(&mut c, "emq.complete", "numkeys").is_some());
    assert!(doc_of(&mut c, "tra.queues", "numkeys").is_none());
}

/// The reference page's checked examples (```valkey blocks), replayed in page order on one
/// server where INSTALL ran, each block on a fresh connection: every reply must be the one
/// shown, stream ids and times written as `"<id>"` and `(integer) <ms>`.
#[test]
fn the_reference_pages_checked_examples_are_what_a_real_server_answers() {
    use trafikey_support::page::{examples, placeheld, render, words};
    let page = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/verbs/README.md"))
        .expect("reference page");
    let blocks = examples(&page);
    assert!(blocks.len() >= 3, "the page's checked examples ({})", blocks.len());
    let s = Server::installed();
    for block in &blocks {
        let mut c = s.conn();
        for (cmd, want) in block {
            let argv = words(cmd);
            let refs: Vec<&[u8]> = argv.iter().map(|w| w.as_bytes()).collect();
            assert_eq!(&placeheld(render(&c.call(&refs))), want, "the page's reply to `{cmd}`");
        }
    }
}
