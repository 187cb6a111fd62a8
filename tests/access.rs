//! The access matrix, generated from the command table (`trafikey::verbs::COMMANDS`) and its
//! valid calls (`common/calls.rs`): for every call, every key it touches — each key its
//! command declares and each key it finds by name (job rows in sets, dedup ids, kept jobs,
//! aliases, schedulers, the fence key …) — and each grant of that key (none, read-only `%R~`,
//! write-only `%W~`), with every other key granted read-write by its exact name, the call is
//! refused with NOPERM and writes nothing when the grant lacks what the call needs of that
//! key, and otherwise answers what the admin's call answered on the same state.
//!
//! What a call needs is observed, not read from the declaration under test: the handle audit
//! (`trafikey.audit-handles`, on in every test server) traces each key the last call opened,
//! read, wrote and had ACL-checked as the caller (`INFO trafikey`,
//! `audit_last_call`). A key spec serves every call of its command, so a declared key needs
//! what any call of that command does at its position; a check written once in a verb serves
//! every key it meets, so a found key needs what any call of the command does to a key of its
//! role (`keyspace::Role`) checked the same way. The traces also check, call by call, that a
//! declared key written is declared for writing and one read for reading (`COMMAND
//! GETKEYSANDFLAGS`), that a found key is checked for at least what the call did to it, and —
//! in every case — that the user's call did nothing to a key beyond its grant. A call may
//! also do without a key it may not touch instead of refusing, where its contract says so
//! (TRA.COMPLETESNEXT's claim, COMPLETE's `drained` event): the user's trace then shows it
//! left the key alone.
//!
//! Every case starts from the same state: the table's populated queue is kept in database 9
//! and copied into database 0 before each call (`COPY … DB 0`), so cases are independent and
//! the admin's reply is the one to match, the call's own times aside.
// A test may panic: that is how it fails. The module's own rules are for src/.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use trafikey::host::command::{Arg, Command, Form, Shape};
use trafikey::keyspace;
use trafikey::verbs::COMMANDS;
use trafikey_support::*;

#[path = "common/calls.rs"]
mod calls;
use calls::*;

/// Permissions as bits: what a grant gives, what a call needs of a key.
type Perm = u8;
const READ: Perm = 1;
const WRITE: Perm = 2;
const ALL: Perm = READ | WRITE;

fn perm_name(p: Perm) -> &'static str {
    ["nothing", "read", "write", "read-write"][usize::from(p & ALL)]
}

/// The grants each key is given in turn, every other key read-write: the name, what it
/// gives, its ACL rule's prefix.
const GRANTS: [(&str, Perm, Option<&str>); 3] =
    [("no access", 0, None), ("read-only %R~", READ, Some("%R~")), ("write-only %W~", WRITE, Some("%W~"))];

const NOPERM: &str = "NOPERM No permissions to access a key";

/// The database the populated state is kept in; the calls run in database 0.
const PRISTINE: &[u8] = b"9";

/// Key specs and checks that ask more than any call of the table does, left as they are: the
/// command, where (a declared key's position `Head(i)` or `Tail`; a found key's role and the
/// access its check asks, `wait checked read-write`), what they ask beyond, and why. Each is
/// added to what the command's calls need there; an entry no case needs fails the test.
const BEYOND: &[(&str, &str, Perm, &str)] = &[
    ("EMQ.INSTALL", "Head(0)", WRITE, "it writes the fence key only where it is absent, and the table's state is installed"),
    ("TRA.COUNTS", "Head(0)", READ, COUNTED),
    ("TRA.COUNTS", "Head(1)", READ, COUNTED),
    ("TRA.COUNTS", "Head(2)", READ, COUNTED),
    ("TRA.COUNTS", "Head(3)", READ, COUNTED),
    ("TRA.COUNTS", "Head(4)", READ, COUNTED),
    ("TRA.COUNTS", "Head(5)", READ, COUNTED),
    ("TRA.LIMITS", "Head(1)", READ, COUNTED),
    ("TRA.REMOVE", "Head(1)", READ, "a job leaves `wait` by LREM, which reads nothing (the server's LREM is RW DELETE)"),
    ("TRA.PRIORITY", "Head(1)", READ, "a job leaves `wait` by LREM and enters it by a push, neither a read"),
    ("TRA.OBLITERATE", "Head(6)", READ, "`meta` is deleted whole, never read"),
    ("TRA.OBLITERATE", "Head(7)", READ, "`events` is deleted whole, never read"),
    ("TRA.SETPROGRESS", "Head(0)", READ, PRESENCE),
    ("TRA.SETDATA", "Head(0)", READ, PRESENCE),
    ("TRA.ADDLOG", "Head(0)", READ, PRESENCE),
    (
        "TRA.COMPLETESNEXT",
        "Head(1)",
        ALL,
        "its claim takes from `wait` first, and the table's state has more jobs waiting than the call finishes",
    ),
    (
        "TRA.OBLITERATE",
        "alias checked write",
        WRITE,
        "the alias hash is checked for deleting before the call knows whether COUNT lets it go that far",
    ),
    ("EMQ.COMPLETE", "wait checked read-write", READ, KEPT),
    ("EMQ.COMPLETE", "prio checked read-write", ALL, KEPT),
];

/// Why TRA.COUNTS and TRA.LIMITS declare read access to sets they only count.
const COUNTED: &str = "counted only (the server's own LLEN and ZCARD need no read permission), declared RO ACCESS: how many jobs wait is the queue's data to a dashboard";
/// Why some verbs declare read access to a row they only write.
const PRESENCE: &str = "the row's presence decides the answer (EMQNOJOB), which these verbs count as reading it; ENQUEUE's and TRA.ADD's rows (INSERT) do not";
/// Why a finish opens `wait` and `prio` for update.
const KEPT: &str = "a kept job made when its holder finishes goes to `wait`, `prio` or `delayed`: both ready sets are opened for update before the job's place is known, and one is pushed to without a read";

/// Option words the table's calls need not use: the command, the word, why.
const UNCALLED: &[(&str, &str, &str)] = &[(
    "TRA.SCHEDULER",
    "IMMEDIATELY",
    "its first iteration's id is made from the time of the call, so the admin's call and the user's touch different rows",
)];

/// What one call did to one key, as the audit traced it.
#[derive(Clone, Copy, Debug, Default)]
struct Did {
    opened: bool,
    /// Read its data, wrote it.
    did: Perm,
    /// The access the caller's ACL check granted (a found key's, or a declared key's checked
    /// again for what its spec does not cover).
    checked: Perm,
}

/// A trace: the number of the last command call, and each key it touched.
type Trace = (u64, Vec<(String, Did)>);

fn trace(c: &mut Conn) -> Trace {
    let line = info_field(c, "trafikey", "trafikey_audit_last_call");
    let mut words = line.split(' ');
    let n = words.next().and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("a trace: {line}"));
    let keys = words
        .filter(|e| !e.is_empty())
        .map(|e| {
            let (name, words) = e.rsplit_once('=').unwrap_or_else(|| panic!("a trace entry: {e}"));
            let mut d = Did::default();
            for w in words.split(',') {
                match w {
                    "open-read" | "open-write" => d.opened = true,
                    "read" => d.did |= READ,
                    "write" => d.did |= WRITE,
                    "check-read" => d.checked |= READ,
                    "check-update" => d.checked |= ALL,
                    "check-write" => d.checked |= WRITE,
                    other => panic!("an unknown word in the trace: {other}"),
                }
            }
            (unescape(name), d)
        })
        .collect();
    (n, keys)
}

/// A key's name as the trace writes it (`\xHH` for the bytes it escapes).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let (mut out, mut i) = (Vec::new(), 0);
    while i < b.len() {
        if b[i] == b'\\' && b.get(i + 1) == Some(&b'x') && i + 3 < b.len() {
            out.push(u8::from_str_radix(&s[i + 2..i + 4], 16).unwrap());
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap()
}

/// Where a declared key stands: its position among the declared keys, or in the tail.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Slot {
    Head(usize),
    Tail,
}

/// One key of one call.
#[derive(Clone, Debug)]
struct Touched {
    name: String,
    /// Its role in the keyspace (`job`, `dedup`, …), or what else it is.
    role: String,
    /// Where the command declares it, with its key spec's flags; None for a found key.
    declared: Option<(Slot, BTreeSet<String>)>,
    did: Did,
}

impl Touched {
    fn new(name: String, declared: Option<(Slot, BTreeSet<String>)>, did: Did) -> Touched {
        let role = role_of(&name);
        Touched { name, role, declared, did }
    }

    fn kind(&self) -> &'static str {
        if self.declared.is_some() {
            "declared"
        } else {
            "found"
        }
    }
}

fn role_of(name: &str) -> String {
    if name.as_bytes() == keyspace::VERSION_KEY {
        return "the fence key".into();
    }
    keyspace::parse(name.as_bytes())
        .map_or_else(|| "a key outside the keyspace".into(), |p| format!("{:?}", p.role).to_lowercase())
}

/// What the server demands for a key spec's flags: read for ACCESS, write for INSERT, UPDATE
/// and DELETE (as ACL judges them).
fn spec_perm(flags: &BTreeSet<String>) -> Perm {
    let mut p = 0;
    if flags.contains("ACCESS") {
        p |= READ;
    }
    if ["INSERT", "UPDATE", "DELETE"].iter().any(|f| flags.contains(*f)) {
        p |= WRITE;
    }
    p
}

/// A call's declared keys and their key specs' flags, as the server finds them in its argv.
fn declared(c: &mut Conn, cmd: &Command, argv: &[Vec<u8>]) -> Vec<(String, Slot, BTreeSet<String>)> {
    if cmd.form == Form::Bare {
        return Vec::new();
    }
    let mut q: Vec<Vec<u8>> = vec![b"COMMAND".to_vec(), b"GETKEYSANDFLAGS".to_vec()];
    q.extend(argv.iter().cloned());
    let head = cmd.keys.len();
    c.call_v(&q)
        .array()
        .iter()
        .enumerate()
        .map(|(i, k)| {
            let e = k.array();
            let flags = e[1].array().iter().map(|f| f.str().to_uppercase()).collect();
            (e[0].str(), if i < head { Slot::Head(i) } else { Slot::Tail }, flags)
        })
        .collect()
}

/// A reply with the call's own times blanked (ms since the epoch, stream ids): the admin's
/// call and the user's ran a moment apart on the same state.
fn timeless(r: &Reply) -> Reply {
    fn ms(t: &str) -> bool {
        t.len() == 13 && t.bytes().all(|b| b.is_ascii_digit())
    }
    fn time(s: &str) -> bool {
        ms(s)
            || s.split_once('-')
                .is_some_and(|(a, b)| ms(a) && !b.is_empty() && b.bytes().all(|x| x.is_ascii_digit()))
    }
    match r {
        Reply::Int(n) if (1_000_000_000_000..10_000_000_000_000).contains(n) => {
            Reply::Simple("<time>".into())
        }
        Reply::Bulk(b) if std::str::from_utf8(b).is_ok_and(time) => Reply::Simple("<time>".into()),
        Reply::Array(a) => Reply::Array(a.iter().map(timeless).collect()),
        Reply::Map(m) => Reply::Map(m.iter().map(|(k, v)| (timeless(k), timeless(v))).collect()),
        other => other.clone(),
    }
}

/// An exact ACL pattern for `name`.
fn exact(name: &str) -> String {
    let mut p = String::new();
    for ch in name.chars() {
        if matches!(ch, '*' | '?' | '[' | ']' | '\\') {
            p.push('\\');
        }
        p.push(ch);
    }
    p
}

/// Every option word a command takes (`PRIORITY`, `LIFO`, `FROM` …).
fn words(args: &[Arg], out: &mut BTreeSet<String>) {
    for a in args {
        if let Some(t) = a.token {
            out.insert(t.to_string());
        }
        match a.shape {
            Shape::Word => {
                out.insert(a.display.to_string());
            }
            Shape::OneOf(alts) | Shape::Block(alts) => words(alts, out),
            Shape::Value(_) => {}
        }
    }
}

fn show(argv: &[Vec<u8>]) -> String {
    argv.iter().map(|a| escape(a)).collect::<Vec<_>>().join(" ")
}

/// The test's server: the populated state kept in database 9, an admin connection on
/// database 0, and a user (`acc`, every command and channel) whose keys each case sets.
struct Bench {
    _s: Server,
    admin: Conn,
    user: Conn,
    /// The kept state's keys, and the digest of the keyspace with them copied.
    kept: Vec<Vec<u8>>,
    digest: String,
    /// The number of the last command call a trace showed.
    last: u64,
}

impl Bench {
    fn new() -> Bench {
        let s = Server::quiet();
        let mut admin = s.conn();
        // The fence in database 9, the state made there; database 0 starts empty.
        assert_eq!(admin.call(&[b"SELECT", PRISTINE]), Reply::Simple("OK".into()));
        assert_eq!(admin.call(&[b"EMQ.INSTALL", b"1", b"{emq}:version"]), Reply::Int(1));
        populate(&mut admin);
        // Retention at its smallest: every finish trims its set, reading it and deleting the
        // rows it drops (found keys) with their logs and alias entries.
        for cap in [&b"trafikey.keep-completed"[..], b"trafikey.keep-failed"] {
            assert_eq!(admin.call(&[b"CONFIG", b"SET", cap, b"1"]), Reply::Simple("OK".into()));
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
        let kept = admin.call(&[b"KEYS", b"*"]).array().iter().map(|k| k.bytes().to_vec()).collect();
        assert_eq!(admin.call(&[b"SELECT", b"0"]), Reply::Simple("OK".into()));
        let user = s.user(&mut admin, "acc", "allchannels +@all resetkeys");
        let mut b = Bench { _s: s, admin, user, kept, digest: String::new(), last: 0 };
        b.restore();
        b.digest = digest(&mut b.admin);
        b
    }

    /// Database 0 made the kept state again.
    fn restore(&mut self) {
        let mut cmds = vec![vec![b"FLUSHDB".to_vec()], vec![b"SELECT".to_vec(), PRISTINE.to_vec()]];
        for k in &self.kept {
            cmds.push(vec![b"COPY".to_vec(), k.clone(), k.clone(), b"DB".to_vec(), b"0".to_vec()]);
        }
        cmds.push(vec![b"SELECT".to_vec(), b"0".to_vec()]);
        for r in self.admin.pipeline(&cmds) {
            assert!(r.err().is_none(), "restoring the state: {r:?}");
        }
    }

    /// The user's keys: these rules alone.
    fn grant(&mut self, rules: &[String]) {
        let mut a: Vec<&[u8]> = vec![b"ACL", b"SETUSER", b"acc", b"resetkeys"];
        a.extend(rules.iter().map(String::as_bytes));
        assert_eq!(self.admin.call(&a), Reply::Simple("OK".into()), "ACL SETUSER acc {rules:?}");
    }

    /// The keys the last call touched; none when the module did not run (the server refused
    /// the call before it).
    fn touched(&mut self) -> Vec<(String, Did)> {
        let (n, keys) = trace(&mut self.admin);
        let ran = n != self.last;
        self.last = n;
        if ran {
            keys
        } else {
            Vec::new()
        }
    }
}

/// One call of the table as the admin made it on the kept state: its reply and every key it
/// touched.
struct Observed {
    argv: Vec<Vec<u8>>,
    reply: Reply,
    keys: Vec<Touched>,
}

fn observe(b: &mut Bench, cmd: &Command, argv: Vec<Vec<u8>>) -> Observed {
    b.restore();
    let reply = b.admin.call_v(&argv);
    assert!(
        reply.err().is_none(),
        "{}: a valid call of the table refused on its state: {reply:?}",
        show(&argv)
    );
    let traced = b.touched();
    let mut keys: Vec<Touched> = declared(&mut b.admin, cmd, &argv)
        .into_iter()
        .map(|(name, slot, flags)| {
            let did = traced.iter().find(|(n, _)| *n == name).map(|(_, d)| *d).unwrap_or_default();
            Touched::new(name, Some((slot, flags)), did)
        })
        .collect();
    for (name, did) in traced {
        if !keys.iter().any(|k| k.name == name) {
            keys.push(Touched::new(name, None, did));
        }
    }
    Observed { argv, reply, keys }
}

/// What a command's calls need of each key, observed over all of them.
#[derive(Default)]
struct Needs {
    /// What the key spec at each declared position must grant: what the calls did there
    /// beyond what the verb checked again itself (CLAIM's PAUSE checks `meta` for writing).
    spec: BTreeMap<Slot, Perm>,
    /// What the verb's own checks must grant, by where the check is written — a declared
    /// key's position, or a found key's role — and the access it asks: every key one check
    /// meets, in any call of the command.
    checked: BTreeMap<(String, Perm), Perm>,
}

impl Needs {
    fn of(calls: &[Observed]) -> Needs {
        let mut n = Needs::default();
        for k in calls.iter().flat_map(|o| &o.keys) {
            let d = k.did;
            if let Some((slot, _)) = &k.declared {
                *n.spec.entry(*slot).or_default() |= d.did & !d.checked;
            }
            if d.checked != 0 {
                *n.checked.entry((Needs::site(k), d.checked)).or_default() |= d.did;
            }
        }
        n
    }

    fn site(k: &Touched) -> String {
        match &k.declared {
            Some((slot, _)) => format!("{slot:?}"),
            None => format!("{} checked {}", k.role, perm_name(k.did.checked)),
        }
    }

    /// What the call needs of key `k`.
    fn of_key(&self, k: &Touched) -> Perm {
        let own = if k.did.checked != 0 { self.checked[&(Needs::site(k), k.did.checked)] } else { k.did.did };
        match &k.declared {
            Some((slot, _)) => self.spec[slot] | if k.did.checked != 0 { own } else { 0 },
            None => own,
        }
    }
}

/// What the declarations and the checks must cover, call by call: a declared key written is
/// declared for writing (or checked again for it), one read is declared for reading, and its
/// flags agree with each other; a found key is checked for at least what the call did to it,
/// and one opened without a check is only looked up (whether it exists).
fn static_faults(o: &Observed) -> Vec<String> {
    let mut faults = Vec::new();
    let at = show(&o.argv);
    for k in &o.keys {
        let d = k.did;
        match &k.declared {
            Some((slot, flags)) => {
                let spec = spec_perm(flags);
                if d.did & !(spec | d.checked) != 0 {
                    faults.push(format!(
                        "{at}: declared key {} ({}, {slot:?}) is {flags:?}, which grants {}, but the call did {}",
                        k.name,
                        k.role,
                        perm_name(spec),
                        perm_name(d.did)
                    ));
                }
                let one_of = ["RO", "RW", "OW", "RM"].iter().filter(|f| flags.contains(**f)).count();
                if one_of != 1
                    || (flags.contains("RO") && spec & WRITE != 0)
                    || (flags.contains("OW") && flags.contains("ACCESS"))
                    || (flags.contains("RM") && !flags.contains("DELETE"))
                {
                    faults.push(format!("{at}: declared key {} has flags that disagree: {flags:?}", k.name));
                }
            }
            None if d.did & !d.checked != 0 => faults.push(format!(
                "{at}: found key {} ({}) checked for {} but the call did {}",
                k.name,
                k.role,
                perm_name(d.checked),
                perm_name(d.did)
            )),
            None => {}
        }
    }
    faults
}

/// What the matrix found for some commands of the table.
#[derive(Default)]
struct Outcome {
    cases: usize,
    /// Cases where the call did without a key it may not touch instead of refusing.
    held_back: usize,
    faults: Vec<String>,
    /// `command role (declared|found)` for every key the matrix varied.
    covered: BTreeSet<String>,
    /// The `BEYOND` entries some case needed: (command, where).
    allowed: BTreeSet<(String, String)>,
    /// The commands the matrix ran.
    commands: BTreeSet<String>,
}

/// One case: `o`'s call as the user with these grants (`gives` of the varied key `j`, every
/// other key read-write), refused or not as `refused` says.
struct Case<'a> {
    o: &'a Observed,
    varied: Option<(usize, Perm)>,
    refused: bool,
    what: String,
}

fn run(b: &mut Bench, out: &mut Outcome, c: Case) {
    out.cases += 1;
    let o = c.o;
    let at = show(&o.argv);
    let rules: Vec<String> = o
        .keys
        .iter()
        .enumerate()
        .filter_map(|(i, k)| match c.varied {
            Some((j, gives)) if i == j => GRANTS
                .iter()
                .find(|g| g.1 == gives)
                .and_then(|g| g.2)
                .map(|p| format!("{p}{}", exact(&k.name))),
            _ => Some(format!("~{}", exact(&k.name))),
        })
        .collect();
    b.grant(&rules);
    b.restore();
    let r = b.user.call_v(&o.argv);
    let grant = |name: &str| -> Perm {
        match o.keys.iter().position(|k| k.name == name) {
            Some(i) => match c.varied {
                Some((j, gives)) if i == j => gives,
                _ => ALL,
            },
            None => 0,
        }
    };
    // Whatever the case, the call did nothing to a key beyond its grant.
    let mut beyond = false;
    for (name, did) in b.touched() {
        let t = Touched::new(
            name.clone(),
            o.keys.iter().find(|k| k.name == name).and_then(|k| k.declared.clone()),
            did,
        );
        if t.did.did & !grant(&name) != 0 {
            beyond = true;
            out.faults.push(format!(
                "{at}: with {}: the call did {} to {} ({}), granted {}",
                c.what,
                perm_name(t.did.did),
                name,
                t.role,
                perm_name(grant(&name))
            ));
        }
    }
    if c.refused {
        if r == Reply::Error(NOPERM.into()) {
            if digest(&mut b.admin) != b.digest {
                out.faults.push(format!("{at}: with {}: refused, and wrote", c.what));
            }
        } else if r.err().is_some() {
            out.faults.push(format!("{at}: with {}: {r:?}, not NOPERM", c.what));
        } else if !beyond {
            out.held_back += 1;
        }
    } else if timeless(&r) != timeless(&o.reply) {
        out.faults
            .push(format!("{at}: with {}: {r:?}, where the admin's call answered {:?}", c.what, o.reply));
    }
}

/// The matrix for the commands `which` picks, on a server of its own.
fn matrix(which: impl Fn(usize) -> bool) -> Outcome {
    let mut b = Bench::new();
    let mut out = Outcome::default();
    for (_, cmd) in COMMANDS.iter().enumerate().filter(|(i, _)| which(*i)) {
        out.commands.insert(cmd.name.to_string());
        let observed: Vec<Observed> = valid_calls(cmd).into_iter().map(|v| observe(&mut b, cmd, v)).collect();
        let needs = Needs::of(&observed);
        for o in &observed {
            out.faults.extend(static_faults(o));
            // Every key read-write by its exact name: the call as the admin's.
            run(
                &mut b,
                &mut out,
                Case { o, varied: None, refused: false, what: "every key read-write".into() },
            );
            for (j, k) in o.keys.iter().enumerate() {
                let need = needs.of_key(k);
                let site = Needs::site(k);
                let allowed: Perm =
                    BEYOND.iter().filter(|e| e.0 == cmd.name && e.1 == site).fold(0, |a, e| a | e.2);
                out.covered.insert(format!("{} {} ({})", cmd.name, k.role, k.kind()));
                for (grant, gives, _) in GRANTS {
                    // A declared key refuses a user with no pattern for it, whatever it needs.
                    let unnamed = k.declared.is_some() && gives == 0;
                    let refused = (need | allowed) & !gives != 0 || unnamed;
                    if refused && need & !gives == 0 && !unnamed {
                        out.allowed.insert((cmd.name.to_string(), site.clone()));
                    }
                    let what = format!(
                        "{grant} on {} key {} ({}; it needs {})",
                        k.kind(),
                        k.name,
                        k.role,
                        perm_name(need)
                    );
                    run(&mut b, &mut out, Case { o, varied: Some((j, gives)), refused, what });
                }
            }
        }
    }
    out
}

fn report(name: &str, t0: Instant, out: Outcome) {
    eprintln!(
        "{name}: {} cases ({} held back) in {:.1} s; keys varied: {:?}",
        out.cases,
        out.held_back,
        t0.elapsed().as_secs_f64(),
        out.covered
    );
    let mut faults = out.faults;
    for (cmd, site, _, _) in BEYOND {
        if out.commands.contains(*cmd) && !out.allowed.contains(&(cmd.to_string(), site.to_string())) {
            faults.push(format!("BEYOND's entry for {cmd} at {site} is needed by no case: drop it"));
        }
    }
    assert!(faults.is_empty(), "{} faults:\n{}", faults.len(), faults.join("\n"));
}

/// Every command of the table has valid calls, and they use every option word it takes: a
/// new command or option is in the matrix the day it is added.
#[test]
fn the_table_calls_every_command_with_every_option() {
    let mut missing = Vec::new();
    for cmd in COMMANDS.iter() {
        let calls = valid_calls(cmd);
        assert!(!calls.is_empty(), "{}: no valid calls in tests/common/calls.rs", cmd.name);
        let mut want = BTreeSet::new();
        words(cmd.args, &mut want);
        for w in want {
            let uncalled = UNCALLED.iter().any(|(c, u, _)| *c == cmd.name && *u == w);
            if !uncalled && !calls.iter().any(|v| v.iter().any(|a| a.eq_ignore_ascii_case(w.as_bytes()))) {
                missing.push(format!("{} {w}", cmd.name));
            }
        }
    }
    assert!(missing.is_empty(), "options no valid call uses: {missing:?}");
}

/// The first half of the table.
#[test]
fn access_matrix_first_half() {
    let t0 = Instant::now();
    report("first half", t0, matrix(|i| i < COMMANDS.len() / 2));
}

/// The second half of the table.
#[test]
fn access_matrix_second_half() {
    let t0 = Instant::now();
    report("second half", t0, matrix(|i| i >= COMMANDS.len() / 2));
}
