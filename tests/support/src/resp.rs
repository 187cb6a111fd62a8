//! A small, exact RESP2/RESP3 client for the tests and tools: raw bytes in, typed replies out,
//! pipelining, and pub/sub pushes. No server mock anywhere: it talks to a real socket.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Vec<u8>),
    Nil,
    Array(Vec<Reply>),
    Map(Vec<(Reply, Reply)>),
    Double(f64),
    Bool(bool),
    Push(Vec<Reply>),
}

impl Reply {
    pub fn err(&self) -> Option<&str> {
        match self {
            Reply::Error(e) => Some(e),
            _ => None,
        }
    }

    /// The error text; panics (in a test) when the reply is not an error.
    pub fn error(&self) -> &str {
        self.err().unwrap_or_else(|| panic!("expected an error, got {self:?}"))
    }

    /// Each entry of an array reply as an integer.
    pub fn ints(&self) -> Vec<i64> {
        self.array().iter().map(Reply::int).collect()
    }

    pub fn int(&self) -> i64 {
        match self {
            Reply::Int(i) => *i,
            other => panic!("expected an integer, got {other:?}"),
        }
    }

    pub fn bytes(&self) -> &[u8] {
        match self {
            Reply::Bulk(b) => b,
            Reply::Simple(s) => s.as_bytes(),
            other => panic!("expected a string, got {other:?}"),
        }
    }

    pub fn str(&self) -> String {
        String::from_utf8_lossy(self.bytes()).into_owned()
    }

    pub fn array(&self) -> &[Reply] {
        match self {
            Reply::Array(a) | Reply::Push(a) => a,
            other => panic!("expected an array, got {other:?}"),
        }
    }

    /// The strings of an array reply.
    pub fn strings(&self) -> Vec<String> {
        self.array().iter().map(Reply::str).collect()
    }

    pub fn is_nil(&self) -> bool {
        matches!(self, Reply::Nil)
    }
}

pub struct Conn {
    w: TcpStream,
    r: BufReader<TcpStream>,
}

/// A command's owned words as the slices `encode` takes.
fn words(args: &[Vec<u8>]) -> Vec<&[u8]> {
    args.iter().map(Vec::as_slice).collect()
}

pub fn encode(args: &[&[u8]], out: &mut Vec<u8>) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

impl Conn {
    pub fn connect(port: u16) -> io::Result<Conn> {
        let s = TcpStream::connect(("127.0.0.1", port))?;
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(Duration::from_secs(60)))?;
        Ok(Conn { r: BufReader::new(s.try_clone()?), w: s })
    }

    pub fn send(&mut self, args: &[&[u8]]) -> io::Result<()> {
        let mut out = Vec::new();
        encode(args, &mut out);
        self.w.write_all(&out)
    }

    pub fn send_raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.w.write_all(bytes)
    }

    pub fn call(&mut self, args: &[&[u8]]) -> Reply {
        self.try_call(args).expect("call")
    }

    /// `call` that hands back a broken connection instead of failing the test.
    pub fn try_call(&mut self, args: &[&[u8]]) -> io::Result<Reply> {
        self.send(args)?;
        self.read()
    }

    /// `call` with a command built as owned words.
    pub fn call_v(&mut self, args: &[Vec<u8>]) -> Reply {
        self.call(&words(args))
    }

    /// Several commands in one write, their replies in order.
    pub fn pipeline(&mut self, cmds: &[Vec<Vec<u8>>]) -> Vec<Reply> {
        let mut out = Vec::new();
        for c in cmds {
            encode(&words(c), &mut out);
        }
        self.w.write_all(&out).expect("send");
        cmds.iter().map(|_| self.read().expect("read")).collect()
    }

    fn line(&mut self) -> io::Result<Vec<u8>> {
        let mut l = Vec::new();
        self.r.read_until(b'\n', &mut l)?;
        if l.len() < 2 || !l.ends_with(b"\r\n") {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "short line"));
        }
        l.truncate(l.len() - 2);
        Ok(l)
    }

    fn num(l: &[u8]) -> io::Result<i64> {
        std::str::from_utf8(l)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "bad number"))
    }

    pub fn read(&mut self) -> io::Result<Reply> {
        let l = self.line()?;
        let (t, rest) = l.split_first().ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "empty"))?;
        let rest = rest.to_vec();
        Ok(match t {
            b'+' => Reply::Simple(String::from_utf8_lossy(&rest).into_owned()),
            b'-' | b'!' => {
                if *t == b'!' {
                    let n = Self::num(&rest)?;
                    let b = self.blob(n)?;
                    Reply::Error(String::from_utf8_lossy(&b).into_owned())
                } else {
                    Reply::Error(String::from_utf8_lossy(&rest).into_owned())
                }
            }
            b':' => Reply::Int(Self::num(&rest)?),
            b'$' | b'=' => {
                let n = Self::num(&rest)?;
                if n < 0 {
                    Reply::Nil
                } else {
                    Reply::Bulk(self.blob(n)?)
                }
            }
            b'_' => Reply::Nil,
            b'#' => Reply::Bool(rest == b"t"),
            b',' => Reply::Double(String::from_utf8_lossy(&rest).parse().unwrap_or(f64::NAN)),
            b'(' => Reply::Bulk(rest),
            b'*' | b'~' | b'>' => {
                let n = Self::num(&rest)?;
                if n < 0 {
                    return Ok(Reply::Nil);
                }
                let mut v = Vec::with_capacity(n as usize);
                for _ in 0..n {
                    v.push(self.read()?);
                }
                if *t == b'>' {
                    Reply::Push(v)
                } else {
                    Reply::Array(v)
                }
            }
            b'%' => {
                let n = Self::num(&rest)?;
                let mut v = Vec::with_capacity(n as usize);
                for _ in 0..n {
                    let k = self.read()?;
                    v.push((k, self.read()?));
                }
                Reply::Map(v)
            }
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("unknown type {}", *t as char),
                ))
            }
        })
    }

    fn blob(&mut self, n: i64) -> io::Result<Vec<u8>> {
        let mut b = vec![0u8; n as usize + 2];
        self.r.read_exact(&mut b)?;
        b.truncate(n as usize);
        Ok(b)
    }
}
