//! The servers the module is tested on, and the ones it refuses.
//!
//! Every foundation check runs on Valkey 9.1.2, 9.1.0 and 8.1.8, each from its pinned wheel
//! (`scripts/valkey-server-path VERSION`): the server binary is the only difference. And a
//! server the module cannot serve — Debian's Redis 7.0 — gets a refused load that leaves it
//! running, never a crash.
// A test may panic: that is how it fails. The module's own rules are for src/.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

#[path = "foundation/checks.rs"]
mod checks;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use trafikey_support::*;

macro_rules! all_checks {
    ($($name:ident)*) => {
        fn run_all_checks(version: &str) {
            let bin = server_path(&[version]);
            with_server(bin, || {
                $( eprintln!("compat {version}: {}", stringify!($name)); checks::$name(); )*
            });
        }
    };
}
each_check!(all_checks);

#[test]
fn foundation_on_valkey_9_1_2() {
    run_all_checks("9.1.2");
}

#[test]
fn foundation_on_valkey_9_1_0() {
    run_all_checks("9.1.0");
}

#[test]
fn foundation_on_valkey_8_1_8() {
    run_all_checks("8.1.8");
}

/// Debian's redis-server, where `scripts/setup test` installs it.
const OLD_SERVER: &str = "/usr/bin/redis-server";

struct Plain {
    child: std::process::Child,
    port: u16,
    dir: std::path::PathBuf,
}

impl Drop for Plain {
    fn drop(&mut self) {
        let _ = Command::new("kill").arg("-9").arg(self.child.id().to_string()).status();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Starts Debian's redis-server on loopback with only the arguments it knows.
fn old_server(extra: &[String]) -> Plain {
    let port = free_port();
    let dir = std::env::temp_dir().join(format!("trafikey-old-{}-{port}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let log = std::fs::File::create(dir.join("server.log")).expect("log");
    let child = Command::new(OLD_SERVER)
        .args(["--bind", "127.0.0.1", "--port", &port.to_string(), "--save", "", "--appendonly", "no"])
        .args(["--dir", &dir.display().to_string(), "--enable-module-command", "yes", "--daemonize", "no"])
        .args(extra)
        .stdout(Stdio::from(log.try_clone().expect("log")))
        .stderr(Stdio::from(log))
        .spawn()
        .expect("spawn redis-server");
    Plain { child, port, dir }
}

fn log_of(p: &Plain) -> String {
    std::fs::read_to_string(p.dir.join("server.log")).unwrap_or_default()
}

#[test]
fn refuses_to_load_into_a_server_it_cannot_serve() {
    if !std::path::Path::new(OLD_SERVER).exists() {
        eprintln!("SKIPPED refuses_to_load_into_a_server_it_cannot_serve: {OLD_SERVER} is not installed (scripts/setup test installs Debian's redis-server; apt could not provide it here)");
        return;
    }
    let module = module_path().display().to_string();

    // MODULE LOAD: the client gets an error, the server lives on.
    let s = old_server(&[]);
    let t0 = Instant::now();
    let mut c = loop {
        if let Ok(mut c) = Conn::connect(s.port) {
            if c.call(&[b"PING"]) == Reply::Simple("PONG".into()) {
                break c;
            }
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "redis-server did not start: {}", log_of(&s));
        std::thread::sleep(Duration::from_millis(20));
    };
    let version = c.call(&[b"INFO", b"server"]).str();
    assert!(version.contains("redis_version:7."), "Debian's Redis 7: {version}");
    let e = c.call(&[b"MODULE", b"LOAD", module.as_bytes()]);
    assert!(e.error().starts_with("ERR"), "the load is refused with an error: {e:?}");
    assert_eq!(c.call(&[b"PING"]), Reply::Simple("PONG".into()), "the server is alive");
    assert_eq!(c.call(&[b"SET", b"k", b"v"]), Reply::Simple("OK".into()));
    assert_eq!(c.call(&[b"MODULE", b"LIST"]), Reply::Array(vec![]), "nothing stays loaded");
    assert!(c.call(&[b"EMQ.VERSION"]).error().contains("unknown command"));
    let log = log_of(&s);
    let line = log
        .lines()
        .find(|l| l.contains("trafikey needs Valkey 8.0 or later"))
        .unwrap_or_else(|| panic!("one log line: {log}"));
    assert!(line.contains("7.0."), "the line names the version found: {line}");
    assert!(!log.contains("crashed by signal"), "{log}");
    drop(s);

    // --loadmodule at start: the server stops with its own error, not a crash.
    let mut s = old_server(&["--loadmodule".into(), module]);
    let t0 = Instant::now();
    let status = loop {
        if let Ok(Some(st)) = s.child.try_wait() {
            break st;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the server neither served nor stopped: {}",
            log_of(&s)
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let log = log_of(&s);
    assert_eq!(status.code(), Some(1), "a clean exit, no signal: {log}");
    assert!(
        log.contains("trafikey needs Valkey 8.0 or later") && !log.contains("crashed by signal"),
        "{log}"
    );
}
