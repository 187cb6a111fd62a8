//! The reference page and the command table agree: every registered command is documented,
//! in table order, with the synopsis the table registers; and the server's COMMAND DOCS
//! carry the table's summary and complexity.

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
            let page_keys: Vec<String> = parts
                .by_ref()
                .take(n)
                .map(|k| {
                    let role = k.strip_prefix("emq:{Q}:").unwrap_or(k);
                    let role = role.trim_end_matches("<ID>").trim_end_matches(':');
                    let role = role.trim_start_matches('<').trim_end_matches('>');
                    if role == "{emq}:version" {
                        "version".to_string()
                    } else {
                        role.to_string()
                    }
                })
                .collect();
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
