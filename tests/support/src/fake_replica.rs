//! A replica faked over raw TCP: it speaks the replication protocol to a primary
//! (`REPLCONF`, `PSYNC` or `SYNC`), reads the snapshot and then keeps every command of the
//! replication stream, exactly as the server sent it. Tests use it to see what a listener
//! really receives, and, with a partial `PSYNC` from the backlog's first byte, what the
//! replication backlog holds.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// How long any single expected reply may take before the test fails.
const PATIENCE: Duration = Duration::from_secs(60);

pub type Cmd = Vec<Vec<u8>>;

pub struct FakeReplica {
    stream: TcpStream,
    buf: Vec<u8>,
    pos: usize,
    /// Every command of the stream read so far.
    pub commands: Vec<Cmd>,
    /// The offset acknowledged while waiting for the stream (a primary starts the stream
    /// of a diskless sync at an ACK that comes after it has put the replica online, so a
    /// replica keeps acknowledging, as a real one does every second).
    ack: Option<(String, Instant)>,
}

/// The first line of a `PSYNC` answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Psync {
    FullResync { replid: String, offset: i64 },
    Continue,
}

impl FakeReplica {
    pub fn connect(port: u16) -> FakeReplica {
        let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect to the primary");
        stream
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        FakeReplica {
            stream,
            buf: Vec::new(),
            pos: 0,
            commands: Vec::new(),
            ack: None,
        }
    }

    /// `REPLCONF listening-port` and `REPLCONF capa eof capa psync2`, as a real replica
    /// announces itself (capa eof: it accepts a diskless snapshot).
    pub fn announce(&mut self, listening_port: u16) {
        let port = listening_port.to_string();
        self.send(&["REPLCONF", "listening-port", &port]);
        assert_eq!(self.line(), "+OK", "REPLCONF listening-port");
        self.send(&["REPLCONF", "capa", "eof", "capa", "psync2"]);
        assert_eq!(self.line(), "+OK", "REPLCONF capa");
    }

    pub fn send(&mut self, args: &[&str]) {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        self.stream.write_all(&out).expect("write to the primary");
    }

    /// Reads the answer to a `PSYNC` sent before (the primary may send newlines first while
    /// a full sync waits for its fork).
    pub fn psync_answer(&mut self) -> Psync {
        let l = self.line();
        let words: Vec<&str> = l.split(' ').collect();
        match words.as_slice() {
            ["+FULLRESYNC", id, off] => Psync::FullResync {
                replid: id.to_string(),
                offset: off.parse().expect("FULLRESYNC offset"),
            },
            ["+CONTINUE", ..] => Psync::Continue,
            _ => panic!("PSYNC answered {l:?}"),
        }
    }

    /// Reads the snapshot (`$<len>` then the bytes, or diskless `$EOF:<mark>` ... `<mark>`)
    /// and returns its size.
    pub fn read_snapshot(&mut self) -> usize {
        let l = self.line();
        if let Some(mark) = l.strip_prefix("$EOF:") {
            let mark = mark.as_bytes().to_vec();
            let start = self.pos;
            let deadline = Instant::now() + PATIENCE;
            loop {
                if let Some(i) = self.buf[start..]
                    .windows(mark.len())
                    .position(|w| w == mark.as_slice())
                {
                    self.pos = start + i + mark.len();
                    return i;
                }
                assert!(Instant::now() < deadline, "diskless snapshot did not end");
                self.fill();
            }
        }
        let n: usize = l
            .strip_prefix('$')
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("snapshot header {l:?}"));
        self.need(n);
        self.pos += n;
        n
    }

    /// Reads commands of the stream until one of them names `key` as its second argument
    /// (the effect of a write the test made last: everything before it has arrived).
    pub fn read_until_key(&mut self, key: &str) {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let c = self.command(deadline);
            let found = c.get(1).is_some_and(|k| k == key.as_bytes());
            self.commands.push(c);
            if found {
                return;
            }
        }
    }

    /// The names of the commands read, uppercased, with how often each came.
    pub fn names(&self) -> std::collections::BTreeMap<String, usize> {
        let mut m = std::collections::BTreeMap::new();
        for c in &self.commands {
            let n = String::from_utf8_lossy(&c[0]).to_uppercase();
            *m.entry(n).or_insert(0) += 1;
        }
        m
    }

    /// The keys named by the `RL._APPLY` commands read.
    pub fn applied_keys(&self) -> std::collections::BTreeSet<String> {
        self.commands
            .iter()
            .filter(|c| c[0].eq_ignore_ascii_case(b"RL._APPLY"))
            // `key payload [key payload ...]`: every key of the effect.
            .flat_map(|c| c.iter().skip(1).step_by(2))
            .map(|k| String::from_utf8_lossy(k).into_owned())
            .collect()
    }

    /// Acknowledges `offset` now and every 100 ms while waiting for data.
    pub fn keep_acking(&mut self, offset: i64) {
        let off = offset.to_string();
        self.send(&["REPLCONF", "ACK", &off]);
        self.ack = Some((off, Instant::now()));
    }

    /// Whether the primary closed the connection (reads until it does).
    pub fn wait_closed(&mut self) {
        let deadline = Instant::now() + PATIENCE;
        let mut chunk = [0u8; 4096];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => return,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if is_timeout(&e) => {}
                Err(_) => return,
            }
            assert!(Instant::now() < deadline, "the primary kept the link open");
        }
    }

    fn command(&mut self, deadline: Instant) -> Cmd {
        loop {
            if let Some((c, used)) = parse_command(&self.buf[self.pos..]) {
                self.pos += used;
                return c;
            }
            assert!(
                Instant::now() < deadline,
                "the stream stopped; read so far: {:?}",
                self.names()
            );
            self.fill();
        }
    }

    /// One line (without CRLF), skipping the bare newlines a primary sends as keepalives
    /// before a snapshot.
    fn line(&mut self) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            while self.buf.get(self.pos) == Some(&b'\n') {
                self.pos += 1;
            }
            if let Some(i) = self.buf[self.pos..].windows(2).position(|w| w == b"\r\n") {
                let l = String::from_utf8_lossy(&self.buf[self.pos..self.pos + i]).into_owned();
                self.pos += i + 2;
                return l;
            }
            assert!(Instant::now() < deadline, "no reply line from the primary");
            self.fill();
        }
    }

    fn need(&mut self, n: usize) {
        let deadline = Instant::now() + PATIENCE;
        while self.buf.len() - self.pos < n {
            assert!(Instant::now() < deadline, "short read from the primary");
            self.fill();
        }
    }

    /// Reads what has arrived (waits at most the socket's short read timeout).
    fn fill(&mut self) {
        let mut chunk = [0u8; 65536];
        match self.stream.read(&mut chunk) {
            Ok(0) => panic!("the primary closed the replication link"),
            Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
            Err(e) if is_timeout(&e) => {
                if let Some((off, at)) = self.ack.take() {
                    if at.elapsed() >= Duration::from_millis(100) {
                        self.keep_acking(off.parse().unwrap_or(0));
                    } else {
                        self.ack = Some((off, at));
                    }
                }
            }
            Err(e) => panic!("read from the primary: {e}"),
        }
    }
}

fn is_timeout(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    )
}

/// One RESP array of bulk strings from the front of `data`, and the bytes it used.
fn parse_command(data: &[u8]) -> Option<(Cmd, usize)> {
    fn line(data: &[u8], pos: &mut usize) -> Option<String> {
        let rel = data.get(*pos..)?.windows(2).position(|w| w == b"\r\n")?;
        let l = String::from_utf8_lossy(&data[*pos..*pos + rel]).into_owned();
        *pos += rel + 2;
        Some(l)
    }
    let mut pos = 0;
    let head = line(data, &mut pos)?;
    let n: usize = head
        .strip_prefix('*')
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("not a command in the stream: {:?}", clip(&head)));
    let mut cmd = Vec::with_capacity(n);
    for _ in 0..n {
        let l = line(data, &mut pos)?;
        let len: usize = l
            .strip_prefix('$')
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("not a bulk string in the stream: {:?}", clip(&l)));
        let arg = data.get(pos..pos + len)?.to_vec();
        pos += len + 2;
        if pos > data.len() {
            return None;
        }
        cmd.push(arg);
    }
    Some((cmd, pos))
}

fn clip(s: &str) -> String {
    s.chars().take(80).collect()
}
