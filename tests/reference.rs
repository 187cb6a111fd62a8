//! The reference page and the command table agree: every registered command is documented,
//! in table order, with the synopsis the table registers; and the server's COMMAND DOCS
//! carry the table's summary and complexity.

mod common;
use common::*;
use trafikey::verbs::COMMANDS;

fn documented() -> Vec<(String, String)> {
    let page = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/verbs/README.md")).expect("reference page");
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
