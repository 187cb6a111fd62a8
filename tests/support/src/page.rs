//! Checked examples in the project's pages: ```valkey blocks of `> command` lines, each
//! followed by the reply as valkey-cli prints it, replayed against a real server.

use crate::resp::Reply;

/// A command line of an example: words split on spaces, `'…'` and `"…"` quoting a word.
pub fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        while chars.peek() == Some(&' ') {
            chars.next();
        }
        let Some(&c) = chars.peek() else { break };
        let mut w = String::new();
        if c == '\'' || c == '"' {
            chars.next();
            for d in chars.by_ref() {
                if d == c {
                    break;
                }
                w.push(d);
            }
        } else {
            while let Some(&d) = chars.peek() {
                if d == ' ' {
                    break;
                }
                w.push(d);
                chars.next();
            }
        }
        out.push(w);
    }
    out
}

/// A bulk string as valkey-cli shows it.
pub fn repr(b: &[u8]) -> String {
    let mut s = String::from("\"");
    for &c in b {
        match c {
            b'\\' => s.push_str("\\\\"),
            b'"' => s.push_str("\\\""),
            b'\n' => s.push_str("\\n"),
            b'\r' => s.push_str("\\r"),
            b'\t' => s.push_str("\\t"),
            0x20..=0x7e => s.push(char::from(c)),
            _ => s.push_str(&format!("\\x{c:02x}")),
        }
    }
    s.push('"');
    s
}

/// A reply as valkey-cli prints it on a terminal.
pub fn render(r: &Reply) -> Vec<String> {
    match r {
        Reply::Int(n) => vec![format!("(integer) {n}")],
        Reply::Simple(s) => vec![s.clone()],
        Reply::Error(e) => vec![format!("(error) {e}")],
        Reply::Bulk(b) => vec![repr(b)],
        Reply::Nil => vec!["(nil)".into()],
        Reply::Array(items) if items.is_empty() => vec!["(empty array)".into()],
        Reply::Array(items) => {
            let width = items.len().to_string().len();
            let mut out = Vec::new();
            for (i, item) in items.iter().enumerate() {
                let prefix = format!("{:>width$}) ", i + 1);
                for (k, line) in render(item).into_iter().enumerate() {
                    let lead = if k == 0 { prefix.clone() } else { " ".repeat(prefix.len()) };
                    out.push(format!("{lead}{line}"));
                }
            }
            out
        }
        other => panic!("no valkey-cli rendering for {other:?} here"),
    }
}

/// The page's `valkey` blocks: each a list of (command line, the reply lines shown).
pub fn examples(page: &str) -> Vec<Vec<(String, Vec<String>)>> {
    let mut blocks = Vec::new();
    let mut lines = page.lines();
    while let Some(l) = lines.next() {
        if l.trim() != "```valkey" {
            continue;
        }
        let mut block: Vec<(String, Vec<String>)> = Vec::new();
        for l in lines.by_ref() {
            if l.trim_start().starts_with("```") {
                break;
            }
            if let Some(cmd) = l.strip_prefix("> ") {
                block.push((cmd.to_string(), Vec::new()));
            } else {
                let last = block.last_mut().expect("a reply line before any command");
                last.1.push(l.to_string());
            }
        }
        blocks.push(block);
    }
    blocks
}

/// A reply's lines with what no page can know written as placeholders: a stream entry id
/// (`"<id>"`) and a time in ms (`(integer) <ms>`, any integer from 10^12).
pub fn placeheld(lines: Vec<String>) -> Vec<String> {
    let is_id = |w: &str| {
        w.split_once('-').is_some_and(|(a, b)| {
            !a.is_empty() && !b.is_empty() && a.bytes().chain(b.bytes()).all(|c| c.is_ascii_digit())
        })
    };
    lines
        .into_iter()
        .map(|l| {
            if let Some((head, quoted)) = l.split_once('"') {
                if let Some(inner) = quoted.strip_suffix('"') {
                    if is_id(inner) {
                        return format!("{head}\"<id>\"");
                    }
                }
            }
            match l.rsplit_once("(integer) ") {
                Some((head, n)) if n.parse::<i64>().is_ok_and(|v| v >= 1_000_000_000_000) => {
                    format!("{head}(integer) <ms>")
                }
                _ => l,
            }
        })
        .collect()
}
