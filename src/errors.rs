//! The error classes and the fence's exact texts. Every refusal is one of these; the
//! first word of the text is the class, and every text is ASCII (the crate's reply path
//! mangles other characters, and a NUL would abort the server).

#![forbid(unsafe_code)]

use std::fmt::Write;

/// The fence read found no `{emq}:version`.
pub const WIRE_ABSENT: &str = "EMQWIRE expected echomq:6.0.0 but {emq}:version is absent";
/// The fence read found another value; the stored value follows, through [`printable`].
pub const WIRE_FOUND: &str = "EMQWIRE expected echomq:6.0.0 found ";
/// A cluster-enabled server, refused by the fence and by INSTALL before they read: a queue's
/// keys share one slot, but the fence key does not.
pub const WIRE_CLUSTER: &str = "EMQWIRE trafikey serves standalone servers only";
/// A server call failed where it cannot (a bug, or a broken server): the module's own class,
/// never the fence's, so a client can tell a fault of this node from a wrong wire.
pub const HOST_REPLY: &str = "EMQHOST unexpected reply from the host";
/// The server's own texts, passed through unchanged.
pub const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
pub const NOPERM_KEY: &str = "NOPERM No permissions to access a key";

/// How many stored bytes a `found` text shows before it is cut with `...`.
pub const PRINTABLE_MAX: usize = 64;

/// A stored value made safe for an error line: bytes 0x21..=0x7E as they are, every other
/// byte (space, controls, NUL, non-ASCII) as `\xHH`, cut after 64 bytes with `...`.
/// The result is always ASCII with no NUL, whatever the input.
pub fn printable(bytes: &[u8]) -> String {
    let shown = bytes.get(..PRINTABLE_MAX).unwrap_or(bytes);
    let mut out = String::with_capacity(shown.len().saturating_add(3));
    for &b in shown {
        if (0x21..=0x7e).contains(&b) {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "\\x{b:02X}");
        }
    }
    if bytes.len() > PRINTABLE_MAX {
        out.push_str("...");
    }
    out
}

/// The class of a refusal: the first word of its text, and its `INFO trafikey` counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    Shape,
    Layout,
    Wire,
    Id,
    Arg,
    NoJob,
    State,
    Lease,
    WrongType,
    NoPerm,
    Host,
}

impl Class {
    pub const ALL: [Class; 11] = [
        Class::Shape,
        Class::Layout,
        Class::Wire,
        Class::Id,
        Class::Arg,
        Class::NoJob,
        Class::State,
        Class::Lease,
        Class::WrongType,
        Class::NoPerm,
        Class::Host,
    ];

    pub const fn word(self) -> &'static str {
        match self {
            Class::Shape => "EMQSHAPE",
            Class::Layout => "EMQLAYOUT",
            Class::Wire => "EMQWIRE",
            Class::Id => "EMQID",
            Class::Arg => "EMQARG",
            Class::NoJob => "EMQNOJOB",
            Class::State => "EMQSTATE",
            Class::Lease => "EMQLEASE",
            Class::WrongType => "WRONGTYPE",
            Class::NoPerm => "NOPERM",
            Class::Host => "EMQHOST",
        }
    }

    pub const fn index(self) -> usize {
        self as usize
    }
}

/// A refusal: written before anything is, so it always leaves the keyspace as it was.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("EMQSHAPE {0}")]
    Shape(String),
    /// The arguments are not the command's: answered with what it takes (`Command::usage`),
    /// which only the host knows; the text here is the fallback.
    #[error("EMQSHAPE wrong arguments")]
    Usage,
    #[error("EMQLAYOUT {0}")]
    Layout(String),
    /// A complete EMQWIRE line (the fence's texts are whole sentences).
    #[error("{0}")]
    Wire(String),
    #[error("EMQID {0}")]
    Id(String),
    #[error("EMQARG {0}")]
    Arg(String),
    #[error("EMQNOJOB {0}")]
    NoJob(String),
    #[error("EMQSTATE {0}")]
    State(String),
    #[error("EMQLEASE {0}")]
    Lease(String),
    #[error("{WRONGTYPE}")]
    WrongType,
    #[error("{0}")]
    NoPerm(&'static str),
    /// An internal failure: a server call that failed where it cannot, or a caught panic.
    #[error("{HOST_REPLY}")]
    Host,
}

impl Refusal {
    pub const fn class(&self) -> Class {
        match self {
            Refusal::Shape(_) | Refusal::Usage => Class::Shape,
            Refusal::Layout(_) => Class::Layout,
            Refusal::Wire(_) => Class::Wire,
            Refusal::Id(_) => Class::Id,
            Refusal::Arg(_) => Class::Arg,
            Refusal::NoJob(_) => Class::NoJob,
            Refusal::State(_) => Class::State,
            Refusal::Lease(_) => Class::Lease,
            Refusal::WrongType => Class::WrongType,
            Refusal::NoPerm(_) => Class::NoPerm,
            Refusal::Host => Class::Host,
        }
    }

    /// The error line sent to the client: ASCII, no NUL, no CR/LF (user bytes never reach
    /// it unescaped — they go through [`printable`]).
    pub fn line(&self) -> String {
        let text = self.to_string();
        if text.bytes().all(|b| (0x20..0x7f).contains(&b)) {
            text
        } else {
            // Defence in depth: a text built from user bytes by mistake still cannot abort the
            // server or break the protocol.
            let word = self.class().word();
            format!("{word} {}", printable(text.as_bytes().get(word.len()..).unwrap_or(b"")))
        }
    }
}

/// The fence's `found` refusal, with the stored value printed safely.
pub fn wire_found(stored: &[u8]) -> Refusal {
    Refusal::Wire(format!("{WIRE_FOUND}{}", printable(stored)))
}

pub fn wire_absent() -> Refusal {
    Refusal::Wire(WIRE_ABSENT.to_owned())
}

pub fn wire_cluster() -> Refusal {
    Refusal::Wire(WIRE_CLUSTER.to_owned())
}

pub const fn host_reply() -> Refusal {
    Refusal::Host
}

/// The NOJOB refusal for the call's job.
pub fn no_job(id: &[u8]) -> Refusal {
    Refusal::NoJob(format!("no job {}", printable(id)))
}

pub fn lease(id: &[u8]) -> Refusal {
    Refusal::Lease(format!("job {} is not held with this token", printable(id)))
}

/// The EMQSTATE refusal: the job is not where the verb needs it.
pub fn not_in(id: &[u8], where_: &str) -> Refusal {
    Refusal::State(format!("job {} is not {where_}", printable(id)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn fence_texts() {
        assert_eq!(wire_absent().to_string(), "EMQWIRE expected echomq:6.0.0 but {emq}:version is absent");
        assert_eq!(
            wire_found(b"echomq:4.0.0").to_string(),
            "EMQWIRE expected echomq:6.0.0 found echomq:4.0.0"
        );
        assert_eq!(wire_cluster().to_string(), "EMQWIRE trafikey serves standalone servers only");
        assert_eq!(Refusal::WrongType.to_string(), WRONGTYPE);
        assert_eq!(Refusal::Shape("x".into()).class().word(), "EMQSHAPE");
        assert_eq!(host_reply().to_string(), "EMQHOST unexpected reply from the host");
        assert_eq!(host_reply().class(), Class::Host);
        assert!(Class::ALL.iter().enumerate().all(|(i, c)| c.index() == i));
    }

    #[test]
    fn printable_escapes_and_cuts() {
        assert_eq!(printable(b"a b\0\xff~"), "a\\x20b\\x00\\xFF~");
        let long = vec![b'a'; 65];
        assert_eq!(printable(&long), format!("{}...", "a".repeat(64)));
        assert_eq!(printable(&long[..64]), "a".repeat(64));
        assert_eq!(printable(b""), "");
    }

    proptest! {
        #[test]
        fn printable_is_always_safe_ascii(b in proptest::collection::vec(any::<u8>(), 0..300)) {
            let p = printable(&b);
            prop_assert!(p.bytes().all(|c| (0x21..=0x7e).contains(&c)));
            prop_assert!(p.len() <= PRINTABLE_MAX * 4 + 3);
            let line = wire_found(&b).line();
            prop_assert!(line.starts_with(WIRE_FOUND));
        }

        #[test]
        fn lines_are_always_safe(s in ".*") {
            let line = Refusal::Arg(s).line();
            prop_assert!(line.bytes().all(|c| (0x20..0x7f).contains(&c)));
            prop_assert!(line.starts_with("EMQARG "));
        }
    }
}
