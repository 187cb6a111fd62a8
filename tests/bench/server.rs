//! The one Valkey a benchmark run uses: started by the tool on 127.0.0.1 and a free port,
//! `--save ''`, the module loaded; stopped by its pid when dropped. Plus the INFO readings
//! the figures come from.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use crate::resp::{Conn, Reply};

pub struct Server {
    child: Child,
    pub port: u16,
    dir: PathBuf,
    /// A second server attached as `--replicaof` this one (the replica mode), stopped with it.
    pub replica: Option<Box<Server>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        drop(self.replica.take());
        // Stopped by its pid, and waited for.
        let _ = Command::new("kill").arg(self.child.id().to_string()).status();
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(5) {
            if let Ok(Some(_)) = self.child.try_wait() {
                let _ = std::fs::remove_dir_all(&self.dir);
                return;
            }
            sleep(Duration::from_millis(20));
        }
        let _ = Command::new("kill").arg("-9").arg(self.child.id().to_string()).status();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn free_port() -> std::io::Result<u16> {
    TcpListener::bind("127.0.0.1:0")?.local_addr().map(|a| a.port())
}

impl Server {
    pub fn start(bin: &Path, module: &Path, scratch: &Path) -> Result<Server, String> {
        Server::start_with(bin, module, scratch, &[])
    }

    /// A server with `extra` arguments after the usual ones (e.g. `--appendonly yes`, or
    /// `--replicaof 127.0.0.1 <port>`).
    pub fn start_with(bin: &Path, module: &Path, scratch: &Path, extra: &[&str]) -> Result<Server, String> {
        let mut last = String::new();
        for _ in 0..5 {
            let port = free_port().map_err(|e| format!("no free port: {e}"))?;
            let dir = scratch.join(format!("server-{}-{port}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            let log = std::fs::File::create(dir.join("server.log")).map_err(|e| e.to_string())?;
            let err = log.try_clone().map_err(|e| e.to_string())?;
            let child = Command::new(bin)
                .args([
                    "--bind",
                    "127.0.0.1",
                    "--port",
                    &port.to_string(),
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                ])
                .arg("--dir")
                .arg(&dir)
                // Byte order for Lua string comparison (the twin's id gate), as in the tests.
                .args(["--locale-collate", "C"])
                .arg("--loadmodule")
                .arg(module)
                .args(extra)
                .stdin(Stdio::null())
                .stdout(Stdio::from(log))
                .stderr(Stdio::from(err))
                .spawn()
                .map_err(|e| format!("cannot run {}: {e}", bin.display()))?;
            let mut s = Server { child, port, dir, replica: None };
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_secs(10) {
                if let Ok(Some(_)) = s.child.try_wait() {
                    last = std::fs::read_to_string(s.dir.join("server.log")).unwrap_or_default();
                    break;
                }
                if let Ok(mut c) = Conn::connect(port) {
                    if c.call(&[b"PING"]) == Reply::Simple("PONG".into()) {
                        return Ok(s);
                    }
                }
                sleep(Duration::from_millis(20));
            }
            drop(s);
        }
        Err(format!(
            "valkey-server did not start: {}",
            last.lines().rev().take(5).collect::<Vec<_>>().join(" | ")
        ))
    }

    /// A primary (with `primary_extra` arguments) with one replica attached: a second server
    /// (the module loaded too, as a replica that may be promoted would have it) started as
    /// `--replicaof` it, in sync before this returns.
    pub fn start_replicated(
        bin: &Path,
        module: &Path,
        scratch: &Path,
        primary_extra: &[&str],
    ) -> Result<Server, String> {
        let mut p = Server::start_with(bin, module, scratch, primary_extra)?;
        let port = p.port.to_string();
        let r = Server::start_with(bin, module, scratch, &["--replicaof", "127.0.0.1", &port])?;
        let mut c = r.conn()?;
        let t0 = Instant::now();
        while info(&mut c, "replication", "master_link_status").as_deref() != Some("up") {
            if t0.elapsed() > Duration::from_secs(20) {
                return Err("the replica did not connect to its primary".into());
            }
            sleep(Duration::from_millis(20));
        }
        p.replica = Some(Box::new(r));
        Ok(p)
    }

    /// Wait until the replica (if any) has applied everything the primary sent it.
    pub fn synced(&self, c: &mut Conn) -> Result<(), String> {
        let Some(r) = &self.replica else { return Ok(()) };
        let mut rc = r.conn()?;
        let offset = |c: &mut Conn| {
            info(c, "replication", "master_repl_offset").and_then(|v| v.parse::<i64>().ok()).unwrap_or(-1)
        };
        let t0 = Instant::now();
        loop {
            let (p, q) = (offset(c), offset(&mut rc));
            if q >= p && p >= 0 {
                return Ok(());
            }
            if t0.elapsed() > Duration::from_secs(60) {
                return Err(format!("the replica did not catch up (offset {q} of {p})"));
            }
            sleep(Duration::from_millis(1));
        }
    }

    /// The replica's CPU so far (µs), if there is one.
    pub fn replica_cpu_us(&self) -> Option<f64> {
        let r = self.replica.as_ref()?;
        r.conn().ok().map(|mut c| cpu_us(&mut c))
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn conn(&self) -> Result<Conn, String> {
        Conn::connect(self.port).map_err(|e| format!("connect: {e}"))
    }
}

/// One field of an INFO section, as text.
pub fn info(c: &mut Conn, section: &str, field: &str) -> Option<String> {
    let r = c.call(&[b"INFO", section.as_bytes()]);
    let text = match &r {
        Reply::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
        _ => return None,
    };
    text.lines().find_map(|l| l.strip_prefix(&format!("{field}:")).map(|v| v.trim().to_string()))
}

/// Server CPU so far, user + sys, in µs (the whole process, every thread).
pub fn cpu_us(c: &mut Conn) -> f64 {
    let r = c.call(&[b"INFO", b"cpu"]);
    let text = match &r {
        Reply::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
        _ => return f64::NAN,
    };
    let get = |f: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{f}:")))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .unwrap_or(f64::NAN)
    };
    (get("used_cpu_sys") + get("used_cpu_user")) * 1e6
}

pub fn used_memory(c: &mut Conn) -> i64 {
    info(c, "memory", "used_memory").and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// Time spent inside each command (µs) and its calls, from `INFO commandstats`: what the
/// command itself costs, without the per-request work around it.
pub fn commandstats(c: &mut Conn) -> Vec<(String, u64, u64)> {
    let r = c.call(&[b"INFO", b"commandstats"]);
    let text = match &r {
        Reply::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
        _ => return vec![],
    };
    let mut out = Vec::new();
    for l in text.lines() {
        let Some(rest) = l.strip_prefix("cmdstat_") else { continue };
        let Some((name, fields)) = rest.split_once(':') else { continue };
        let mut calls = 0;
        let mut usec = 0;
        for kv in fields.split(',') {
            match kv.split_once('=') {
                Some(("calls", v)) => calls = v.parse().unwrap_or(0),
                Some(("usec", v)) => usec = v.parse().unwrap_or(0),
                _ => {}
            }
        }
        out.push((name.to_string(), calls, usec));
    }
    out
}
