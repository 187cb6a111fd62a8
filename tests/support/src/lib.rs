//! The real-server harness: finds (or fetches) `valkey-server`, builds the release module
//! when the test command did not, starts servers on 127.0.0.1 and free ports with the module
//! loaded, and stops each by its pid. Plus the queue helpers the tests use.
//!
//! A crate of its own (tests/support, a dev-dependency of trafikey), so each test takes what
//! it needs: `use trafikey_support::*;`.

pub mod page;
pub mod reliability;
pub mod resp;

use std::collections::{HashMap, HashSet};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::thread::sleep;
use std::time::{Duration, Instant};

pub use resp::{Conn, Reply};

/// The project's root (where scripts/ and target/ are): two levels above this crate.
fn root() -> PathBuf {
    static ROOT: OnceLock<PathBuf> = OnceLock::new();
    ROOT.get_or_init(|| {
        // The package whose tests run (cargo and nextest name it at run time) is the project;
        // the path this crate was built at comes second, as it goes stale where one target
        // directory serves several copies of the tree (scripts/mutants' scratch copies).
        let up = std::env::var_os("CARGO_MANIFEST_DIR")
            .map(PathBuf::from)
            .filter(|p| p.join("scripts/valkey-server-path").is_file())
            .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."));
        up.canonicalize().unwrap_or(up)
    })
    .clone()
}

/// What `scripts/valkey-server-path` prints for these arguments.
pub fn server_path(args: &[&str]) -> PathBuf {
    let out = Command::new(root().join("scripts/valkey-server-path"))
        .args(args)
        .output()
        .expect("run scripts/valkey-server-path");
    assert!(
        out.status.success(),
        "cannot find or fetch valkey-server: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

thread_local! {
    /// A server binary this thread's servers use instead of the project's (`with_server`).
    static SERVER_OVERRIDE: std::cell::RefCell<Option<PathBuf>> = const { std::cell::RefCell::new(None) };
}

/// Runs `f` with every server this thread starts being `bin`.
pub fn with_server<R>(bin: PathBuf, f: impl FnOnce() -> R) -> R {
    SERVER_OVERRIDE.with(|o| *o.borrow_mut() = Some(bin));
    let r = f();
    SERVER_OVERRIDE.with(|o| *o.borrow_mut() = None);
    r
}

/// The valkey-server binary: this thread's override, else $VALKEY_SERVER, PATH, or the
/// pinned wheel (scripts/valkey-server-path).
pub fn server_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    if let Some(b) = SERVER_OVERRIDE.with(|o| o.borrow().clone()) {
        return b;
    }
    BIN.get_or_init(|| server_path(&[])).clone()
}

/// The module: $TRAFIKEY_MODULE (set by scripts/test), else a release build of the root crate
/// made here, in a target dir of its own so it never waits on the cargo that runs the tests.
pub fn module_path() -> PathBuf {
    static SO: OnceLock<PathBuf> = OnceLock::new();
    SO.get_or_init(|| {
        if let Ok(p) = std::env::var("TRAFIKEY_MODULE") {
            return PathBuf::from(p);
        }
        let dir = root().join("target/module");
        let st = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .args(["build", "--release", "--lib", "--target-dir"])
            .arg(&dir)
            .current_dir(root())
            .status()
            .expect("cargo build");
        assert!(st.success(), "module build failed");
        dir.join("release/libtrafikey.so")
    })
    .clone()
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port")
}

/// Whether the server answering on a port is `child`: Some(true) if so, Some(false) if another
/// process answers (a port found free is free only until someone binds it, and tests start
/// servers in parallel), None while nothing answers yet or the connection breaks (a server
/// another test is stopping may still accept on the port, then reset).
fn answers(c: &mut Conn, child: &Child) -> Option<bool> {
    if c.try_call(&[b"PING"]).ok()? != Reply::Simple("PONG".into()) {
        return None;
    }
    let info = c.try_call(&[b"INFO", b"server"]).ok()?.str();
    let pid = info.lines().find_map(|l| l.strip_prefix("process_id:")).map(str::trim);
    Some(pid == Some(child.id().to_string().as_str()))
}

pub struct Server {
    child: Child,
    pub port: u16,
    pub dir: PathBuf,
    bin: PathBuf,
    args: Vec<String>,
}

impl Drop for Server {
    fn drop(&mut self) {
        // Stopped by its pid.
        let _ = Command::new("kill").arg("-9").arg(self.child.id().to_string()).status();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub struct Opts {
    pub module_args: Vec<String>,
    pub server_args: Vec<String>,
    pub module: bool,
}

impl Default for Opts {
    fn default() -> Self {
        Opts { module_args: vec![], server_args: vec![], module: true }
    }
}

impl Server {
    /// A server with the module loaded and `EMQ.INSTALL` run.
    pub fn installed() -> Server {
        let s = Server::start(Opts::default());
        assert_eq!(s.conn().call(&[b"EMQ.INSTALL", b"1", b"{emq}:version"]), Reply::Int(1));
        s
    }

    /// A server with the module loaded and installed, and its upkeep off: nothing changes the
    /// keyspace but the calls a test makes (leases stay expired until STALLED, due jobs wait
    /// for CLAIM), so a test can compare against a model or a digest at any moment.
    pub fn quiet() -> Server {
        let s = Server::start(Opts { module_args: vec!["upkeep".into(), "no".into()], ..Opts::default() });
        assert_eq!(s.conn().call(&[b"EMQ.INSTALL", b"1", b"{emq}:version"]), Reply::Int(1));
        s
    }

    /// [`Server::quiet`] with the AOF on: a restart replays the primary's effects.
    pub fn quiet_aof() -> Server {
        let s = Server::start(Opts {
            server_args: vec!["--appendonly".into(), "yes".into()],
            module_args: vec!["upkeep".into(), "no".into()],
            ..Opts::default()
        });
        assert_eq!(s.conn().call(&[b"EMQ.INSTALL", b"1", b"{emq}:version"]), Reply::Int(1));
        s
    }

    pub fn start(o: Opts) -> Server {
        for _ in 0..5 {
            if let Some(s) = Server::try_start(&o, None) {
                return s;
            }
        }
        panic!("valkey-server did not start");
    }

    fn try_start(o: &Opts, dir: Option<PathBuf>) -> Option<Server> {
        let port = free_port();
        let dir = dir.unwrap_or_else(|| {
            // Named by a count, not the port: two servers may try the same port at once.
            static STARTED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            let n = STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let d = std::env::temp_dir().join(format!("trafikey-test-{}-{n}", std::process::id()));
            let _ = std::fs::remove_dir_all(&d);
            std::fs::create_dir_all(&d).expect("temp dir");
            d
        });
        let mut args: Vec<String> = vec![
            "--bind".into(),
            "127.0.0.1".into(),
            "--port".into(),
            port.to_string(),
            "--save".into(),
            "".into(),
            "--dir".into(),
            dir.display().to_string(),
            "--enable-debug-command".into(),
            "yes".into(),
            "--enable-module-command".into(),
            "yes".into(),
            "--repl-diskless-sync-delay".into(),
            "0".into(),
            "--locale-collate".into(),
            "C".into(),
        ];
        args.extend(o.server_args.iter().cloned());
        if o.module {
            args.push("--loadmodule".into());
            args.push(module_path().display().to_string());
            args.extend(o.module_args.iter().cloned());
            // Every test's calls under the handle audit, unless the test sets it: a call that
            // deletes a key another of its handles holds stops the server, and the test fails
            // at that call.
            if !o.module_args.iter().any(|a| a == "audit-handles") {
                args.extend(["audit-handles".into(), "yes".into()]);
            }
        }
        let log = std::fs::File::create(dir.join("server.log")).ok()?;
        let bin = server_bin();
        let child = Command::new(&bin)
            .args(&args)
            .stdout(Stdio::from(log.try_clone().ok()?))
            .stderr(Stdio::from(log))
            .spawn()
            .ok()?;
        let mut s = Server { child, port, dir, bin, args };
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(_)) = s.child.try_wait() {
                return None;
            }
            if let Ok(mut c) = Conn::connect(port) {
                match answers(&mut c, &s.child) {
                    Some(true) => return Some(s),
                    Some(false) => return None,
                    None => {}
                }
            }
            sleep(Duration::from_millis(20));
        }
        let _ = s.child.kill();
        None
    }

    /// Stop and start again on the same data dir and arguments (e.g. to replay the AOF).
    pub fn restart(mut self) -> Server {
        let _ = Command::new("kill").arg("-9").arg(self.child.id().to_string()).status();
        let _ = self.child.wait();
        let dir = self.dir.clone();
        let args = std::mem::take(&mut self.args);
        let bin = std::mem::take(&mut self.bin);
        // Killed and reaped: nothing left to stop.
        std::mem::forget(self);
        Server::respawn(dir, bin, args)
    }

    /// Starts a stopped server again on `dir` with `args`, on a new port.
    fn respawn(dir: PathBuf, bin: PathBuf, args: Vec<String>) -> Server {
        let port_idx = args.iter().position(|a| a == "--port").map(|i| i + 1).unwrap_or(3);
        for _ in 0..5 {
            let port = free_port();
            let mut a = args.clone();
            a[port_idx] = port.to_string();
            let log = std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .open(dir.join("server.log"))
                .expect("log");
            let child = Command::new(&bin)
                .args(&a)
                .stdout(Stdio::from(log.try_clone().expect("log")))
                .stderr(Stdio::from(log))
                .spawn()
                .expect("spawn");
            let mut s = Server { child, port, dir: dir.clone(), bin: bin.clone(), args: a };
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_secs(20) {
                if let Ok(Some(_)) = s.child.try_wait() {
                    break;
                }
                if let Ok(mut c) = Conn::connect(port) {
                    match answers(&mut c, &s.child) {
                        Some(true) => return s,
                        Some(false) => break,
                        None => {}
                    }
                }
                sleep(Duration::from_millis(20));
            }
            let _ = s.child.kill();
            let _ = s.child.wait();
            std::mem::forget(s);
        }
        panic!("restart failed");
    }

    /// Make this server a replica of `primary` and wait until the link is up.
    pub fn follow(&self, primary: &Server) -> Conn {
        let mut r = self.conn();
        r.call(&[b"REPLICAOF", b"127.0.0.1", primary.port.to_string().as_bytes()]);
        wait_for(
            || r.call(&[b"INFO", b"replication"]).str().contains("master_link_status:up"),
            "replica link",
        );
        r
    }

    pub fn conn(&self) -> Conn {
        Conn::connect(self.port).expect("connect")
    }

    /// `ACL SETUSER who on >pw` with `rules` (space-separated, as the command takes them) run
    /// by `admin`, and a new connection authenticated as `who`.
    pub fn user(&self, admin: &mut Conn, who: &str, rules: &str) -> Conn {
        let mut args: Vec<&[u8]> = vec![b"ACL", b"SETUSER", who.as_bytes(), b"on", b">pw"];
        args.extend(rules.split_whitespace().map(str::as_bytes));
        assert_eq!(admin.call(&args), Reply::Simple("OK".into()), "ACL SETUSER {who}");
        let mut c = self.conn();
        assert_eq!(c.call(&[b"AUTH", who.as_bytes(), b"pw"]), Reply::Simple("OK".into()), "AUTH {who}");
        c
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }
}

/// Every key that expires at least `ARGV[1]` ms from now, in every database, with its expiry
/// time (`db key ms`, sorted); a key the caller may not read shows `?`. A key about to expire
/// is left out, as a copy read a moment later may already hide it. `KEYS`, not `SCAN`: it
/// skips an expired key without deleting it, so reading writes nothing, even on a primary.
const EXPIRY_TIMES: &[u8] = br"
local t = redis.call('TIME')
local horizon = t[1] * 1000 + math.floor(t[2] / 1000) + ARGV[1]
local out = {}
for db = 0, 15 do
  if not pcall(redis.call, 'SELECT', db) then break end
  for _, k in ipairs(redis.call('KEYS', '*')) do
    local ok, at = pcall(redis.call, 'PEXPIRETIME', k)
    if not ok then
      out[#out + 1] = db .. ' ' .. k .. ' ?'
    elseif at ~= -1 and at >= horizon then
      out[#out + 1] = db .. ' ' .. k .. ' ' .. at
    end
  end
end
table.sort(out)
return out
";

/// How soon a key may expire and still have its expiry time in a digest: 20 s, far from the
/// TTLs the fuzzer and the model give (10 s at most, or 10 min and more).
const EXPIRY_HORIZON_MS: &[u8] = b"20000";

/// The keyspace's fingerprint: `DEBUG DIGEST`, which sees that a key has an expiry time but
/// not which, and the expiry time of each key not about to expire. So two servers (a replica,
/// an AOF replay) or two moments (before and after a refusal) compare equal only with the same
/// expiry times too.
pub fn digest(c: &mut Conn) -> String {
    let sum = c.call(&[b"DEBUG", b"DIGEST"]).str();
    match c.call(&[b"EVAL_RO", EXPIRY_TIMES, b"0", EXPIRY_HORIZON_MS]) {
        Reply::Array(times) => {
            format!("{sum} {}", times.iter().map(Reply::str).collect::<Vec<_>>().join(", "))
        }
        // A caller without the scripting commands: the digest alone, marked as such.
        other => format!("{sum} (expiry times unread: {other:?})"),
    }
}

/// Run `f`, and assert the keyspace is exactly as it was (the refusal wrote nothing).
pub fn unchanged<R>(c: &mut Conn, f: impl FnOnce(&mut Conn) -> R) -> R {
    let before = digest(c);
    let r = f(c);
    assert_eq!(digest(c), before, "a refusal changed the keyspace");
    r
}

pub fn info_field(c: &mut Conn, section: &str, field: &str) -> String {
    let text = c.call(&[b"INFO", section.as_bytes()]).str();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")).map(|v| v.trim().to_string()))
        .unwrap_or_else(|| panic!("no {field} in INFO {section}"))
}

const ALPHABET: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// A branded id of snowflake n (byte order = mint order).
pub fn id_of(brand: &str, mut n: u64) -> String {
    let mut p = [b'0'; 11];
    for slot in p.iter_mut().rev() {
        *slot = ALPHABET[(n % 62) as usize];
        n /= 62;
    }
    format!("{brand}{}", String::from_utf8_lossy(&p))
}

/// A quiet server, a connection to it and the keys of queue `name`.
pub fn queue_on_quiet_server(name: &str) -> (Server, Conn, Q) {
    let s = Server::quiet();
    let c = s.conn();
    (s, c, Q::new(name))
}

pub fn jid(n: u64) -> String {
    id_of("JOB", n)
}

/// Keys of one queue.
#[derive(Clone)]
pub struct Q(pub String);

impl Q {
    pub fn new(name: &str) -> Q {
        Q(name.to_string())
    }
    pub fn k(&self, role: &str) -> String {
        format!("emq:{{{}}}:{role}", self.0)
    }
    pub fn job(&self, id: &str) -> String {
        format!("emq:{{{}}}:job:{id}", self.0)
    }

    /// `EMQ.<verb> n keys... args...` where keys are given by role ("job" means this id's row).
    pub fn cmd(&self, verb: &str, id: &str, roles: &[&str], args: &[&[u8]]) -> Vec<Vec<u8>> {
        let mut v: Vec<Vec<u8>> = vec![verb.as_bytes().to_vec(), roles.len().to_string().into_bytes()];
        for r in roles {
            v.push(if *r == "job" { self.job(id).into_bytes() } else { self.k(r).into_bytes() });
        }
        v.extend(args.iter().map(|a| a.to_vec()));
        v
    }

    /// `TRA.ADD 4 wait prio delayed events n rows… jobs…`: each job `(id, name, options)`,
    /// its data `{}`.
    pub fn add_cmd(&self, jobs: &[(&str, &str, &[&str])]) -> Vec<Vec<u8>> {
        let mut v = self.cmd("TRA.ADD", "", &["wait", "prio", "delayed", "events"], &[]);
        v.push(jobs.len().to_string().into_bytes());
        v.extend(jobs.iter().map(|(id, ..)| self.job(id).into_bytes()));
        for (_, name, opts) in jobs {
            v.extend([name.as_bytes().to_vec(), b"{}".to_vec(), opts.len().to_string().into_bytes()]);
            v.extend(opts.iter().map(|o| o.as_bytes().to_vec()));
        }
        v
    }

    pub fn run(&self, c: &mut Conn, verb: &str, id: &str, args: &[&[u8]]) -> Reply {
        c.call_v(&self.cmd(verb, id, &keys_of(verb), args))
    }

    /// The queue's events stream, oldest first: each entry's fields and values in order.
    pub fn events(&self, c: &mut Conn) -> Vec<Vec<String>> {
        let r = c.call(&[b"XRANGE", self.k("events").as_bytes(), b"-", b"+"]);
        r.array().iter().map(|e| e.array()[1].strings()).collect()
    }

    pub fn enqueue(&self, c: &mut Conn, id: &str, args: &[&[u8]]) -> Reply {
        let mut a: Vec<&[u8]> = vec![b"job", b"{}"];
        a.extend_from_slice(args);
        self.run(c, "EMQ.ENQUEUE", id, &a)
    }

    /// Every job id per state set, and every row, read straight from the keyspace.
    /// The queue's six state sets and all its rows, read in one script: atomic, so nothing
    /// the server does on its own (upkeep) can land between two reads of one snapshot. A key
    /// of the wrong type reads as empty.
    pub fn snapshot(&self, c: &mut Conn) -> Snapshot {
        const SCRIPT: &[u8] = br#"
local p = 'emq:{' .. ARGV[1] .. '}:'
local function safe(...) local ok, r = pcall(redis.call, ...) if ok then return r end return {} end
local out = { safe('LRANGE', p .. 'wait', 0, -1) }
for _, z in ipairs({'prio', 'active', 'delayed', 'completed', 'failed'}) do
  table.insert(out, safe('ZRANGE', p .. z, 0, -1))
end
local rows = {}
local cursor = '0'
repeat
  local r = redis.call('SCAN', cursor, 'MATCH', p .. 'job:*', 'COUNT', 1000)
  cursor = r[1]
  for _, k in ipairs(r[2]) do
    table.insert(rows, k)
    table.insert(rows, safe('HGETALL', k))
  end
until cursor == '0'
table.insert(out, rows)
return out
"#;
        let r = c.call(&[b"EVAL", SCRIPT, b"0", self.0.as_bytes()]);
        let parts = r.array();
        let mut sets = HashMap::new();
        for (i, name) in ["wait", "prio", "active", "delayed", "completed", "failed"].iter().enumerate() {
            sets.insert(name.to_string(), parts[i].strings());
        }
        let mut rows = HashMap::new();
        for pair in parts[6].array().chunks(2) {
            let key = pair[0].str();
            let id = key.rsplit_once(":job:").map(|(_, i)| i.to_string()).unwrap_or_default();
            let mut fields = HashMap::new();
            for f in pair[1].array().chunks(2) {
                fields.insert(f[0].str(), f[1].bytes().to_vec());
            }
            rows.insert(id, fields);
        }
        Snapshot { sets, rows }
    }

    /// The queue's newest event: its name and its fields, after the stream id.
    pub fn last_event(&self, c: &mut Conn) -> Vec<String> {
        let r = c.call(&[b"XREVRANGE", self.k("events").as_bytes(), b"+", b"-", b"COUNT", b"1"]);
        r.array()[0].array()[1].strings()
    }

    /// The invariant: every job id in at most one state set, its row's state naming it, and
    /// a row iff the job exists (is in a set); a job scheduler's hash iff its id is in `scheds`.
    pub fn check_invariant(&self, c: &mut Conn) -> Snapshot {
        let s = self.snapshot(c);
        let mut seen: HashMap<String, String> = HashMap::new();
        for (set, ids) in &s.sets {
            let mut uniq = HashSet::new();
            for id in ids {
                assert!(uniq.insert(id.clone()), "{id} twice in {set}");
                if let Some(other) = seen.insert(id.clone(), set.clone()) {
                    panic!("{id} in both {set} and {other}");
                }
            }
        }
        for (id, set) in &seen {
            let row = s.rows.get(id).unwrap_or_else(|| panic!("{id} in {set} has no row"));
            let st = String::from_utf8_lossy(row.get("st").map(Vec::as_slice).unwrap_or(b"")).into_owned();
            assert_eq!(&st, set, "row of {id} says {st} but the job is in {set}");
        }
        for id in s.rows.keys() {
            assert!(seen.contains_key(id), "row {id} is in no state set");
        }
        let (listed, hashes) = self.schedulers(c);
        assert_eq!(listed, hashes, "the schedulers in scheds, and those with a hash");
        s
    }

    /// The job schedulers' ids in `scheds`, and the ids of the `sched:<id>` hashes, each
    /// sorted, read in one script.
    pub fn schedulers(&self, c: &mut Conn) -> (Vec<String>, Vec<String>) {
        const SCRIPT: &[u8] = br#"
local p = 'emq:{' .. ARGV[1] .. '}:'
local ok, listed = pcall(redis.call, 'ZRANGE', p .. 'scheds', 0, -1)
local hashes = {}
local cursor = '0'
repeat
  local r = redis.call('SCAN', cursor, 'MATCH', p .. 'sched:*', 'COUNT', 1000)
  cursor = r[1]
  for _, k in ipairs(r[2]) do table.insert(hashes, string.sub(k, #p + 7)) end
until cursor == '0'
return { ok and listed or {}, hashes }
"#;
        let r = c.call(&[b"EVAL", SCRIPT, b"0", self.0.as_bytes()]);
        let mut listed = r.array()[0].strings();
        let mut hashes = r.array()[1].strings();
        listed.sort();
        hashes.sort();
        (listed, hashes)
    }
}

pub struct Snapshot {
    pub sets: HashMap<String, Vec<String>>,
    pub rows: HashMap<String, HashMap<String, Vec<u8>>>,
}

impl Snapshot {
    pub fn state_of(&self, id: &str) -> Option<String> {
        self.sets.iter().find(|(_, ids)| ids.iter().any(|i| i == id)).map(|(s, _)| s.clone())
    }
    pub fn field(&self, id: &str, f: &str) -> Option<String> {
        self.rows.get(id)?.get(f).map(|v| String::from_utf8_lossy(v).into_owned())
    }
}

/// The key roles of each verb, in order, as the command table declares them (each a queue
/// key's role word: `job`, `wait`, …).
pub fn keys_of(verb: &str) -> Vec<&'static str> {
    use trafikey::host::command::KeyRole;
    let cmd = trafikey::verbs::COMMANDS
        .iter()
        .find(|c| c.name.eq_ignore_ascii_case(verb))
        .unwrap_or_else(|| panic!("no command {verb} in the table"));
    cmd.keys
        .into_iter()
        .map(|slot| match slot.role {
            KeyRole::Queue(r) => r.word().trim_end_matches(':'),
            other => panic!("{verb}: a key of role {other:?} is not a queue key"),
        })
        .collect()
}

pub fn wait_for(mut f: impl FnMut() -> bool, what: &str) {
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(20) {
        if f() {
            return;
        }
        sleep(Duration::from_millis(20));
    }
    panic!("timed out waiting for {what}");
}

/// A reply as a person reads it: strings as text, arrays in brackets.
pub fn reply_text(r: &Reply) -> String {
    match r {
        Reply::Bulk(b) => escape(b),
        Reply::Simple(s) => format!("+{s}"),
        Reply::Error(e) => format!("(error) {e}"),
        Reply::Int(i) => i.to_string(),
        Reply::Array(a) => format!("[{}]", a.iter().map(reply_text).collect::<Vec<_>>().join(", ")),
        other => format!("{other:?}"),
    }
}

/// Bytes as a readable token for failure messages: printable ASCII as it is (but `"` and
/// `\`), everything else `\xhh`, the empty string as `""`.
pub fn escape(b: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    for &c in b {
        if (0x21..0x7f).contains(&c) && c != b'"' && c != b'\\' {
            s.push(c as char);
        } else {
            let _ = write!(s, "\\x{c:02x}");
        }
    }
    if s.is_empty() {
        "\"\"".into()
    } else {
        s
    }
}

/// A script's prefix that sets `now` to the script's clock, which stands still while it runs
/// (KEYS[1] is a scratch key it sets with a 1 ms expiry): a verb called after it in the same
/// script sees that very ms.
pub const SCRIPT_NOW: &str =
    "redis.call('SET', KEYS[1], 'x', 'PX', 1) local now = redis.call('PEXPIRETIME', KEYS[1]) - 1 ";

/// Every job `token` can claim in one call (COUNT 100, a long lease): their ids.
pub fn claim_all(q: &Q, c: &mut Conn, token: &str) -> Vec<String> {
    let r = q.run(c, "EMQ.CLAIM", "", &[token.as_bytes(), b"60000", b"COUNT", b"100"]);
    r.array().iter().map(|j| j.array()[0].str()).collect()
}

/// A worker (`nolog`, password `pw`) whose keys are the queue's roles and job rows, but not the
/// jobs' logs: the `ACL SETUSER` it was made with.
pub fn no_log_user(admin: &mut Conn, q: &Q) -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = ["ACL", "SETUSER", "nolog", "on", ">pw", "-@all", "+@emq", "%R~{emq}:*"]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .collect();
    for role in ["wait", "prio", "active", "delayed", "completed", "failed", "meta", "events", "job:*"] {
        v.push(format!("~{}", q.k(role)).into_bytes());
    }
    let refs: Vec<&[u8]> = v.iter().map(Vec::as_slice).collect();
    assert_eq!(admin.call(&refs), Reply::Simple("OK".into()));
    v
}

/// The holder `token` logs a line on job `id`; the log exists after.
pub fn log_line(c: &mut Conn, q: &Q, id: &str, token: &str) {
    let log_key = format!("emq:{{{}}}:log:{id}", q.0);
    let r = c.call(&[b"TRA.LOG", b"2", q.job(id).as_bytes(), log_key.as_bytes(), token.as_bytes(), b"line"]);
    assert!(r.err().is_none(), "{r:?}");
    assert_eq!(c.call(&[b"EXISTS", log_key.as_bytes()]), Reply::Int(1));
}

/// EMQ.COMPLETE of job `id` by `token` with result `ok` and these options.
pub fn complete(q: &Q, c: &mut Conn, id: &str, token: &str, opts: &[&[u8]]) -> Reply {
    let mut a: Vec<&[u8]> = vec![token.as_bytes(), b"ok"];
    a.extend_from_slice(opts);
    q.run(c, "EMQ.COMPLETE", id, &a)
}

/// The queue's completed set, oldest first.
pub fn completed(q: &Q, c: &mut Conn) -> Vec<String> {
    c.call(&[b"ZRANGE", q.k("completed").as_bytes(), b"0", b"-1"]).strings()
}

/// The jobs `ids` enqueued and all claimed by `token` (left active, for the caller to finish).
pub fn finished(q: &Q, c: &mut Conn, ids: &[String], token: &str) {
    for id in ids {
        assert_eq!(q.enqueue(c, id, &[]), Reply::Int(1));
    }
    assert_eq!(claim_all(q, c, token).len(), ids.len());
}
