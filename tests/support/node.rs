//! A server process that survives its own restart: same directory, same port, same
//! arguments, so a test can SAVE / write an AOF, kill it and start it again on the files it
//! left. Also used for cluster nodes (`--cluster-port` chosen here, so the bus port never
//! collides or overflows). Binary and module as in `common` (`RL_SERVER`, `RL_MODULE`); the
//! module is always loaded with the test clock. Killed and its directory removed on drop.
//!
//! Included by the tests that need it with `#[path = "support/node.rs"] mod node;` after
//! `#[macro_use] mod common;`.
#![allow(dead_code)]

use crate::common::{info_field, module_path, server_bin, text};
use redis::{Connection, ConnectionLike, Value};
use std::fs::{self, File};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// Which server the tests run against (from `INFO server`, not from the binary's name).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Redis,
    Valkey,
}

/// The kind of the server behind `con`.
pub fn server_kind(con: &mut Connection) -> Kind {
    match info_field(con, "server", "server_name").as_deref() {
        Some("valkey") => Kind::Valkey,
        _ => Kind::Redis,
    }
}

/// A free 127.0.0.1 port whose `+ 10000` is a valid port too (some tools assume the
/// default cluster bus offset).
pub fn free_port() -> u16 {
    loop {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let p = l.local_addr().unwrap().port();
        if p < 55_000 {
            return p;
        }
    }
}

fn tail(path: &Path, lines: usize) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

pub struct Node {
    child: Option<Child>,
    pub port: u16,
    /// The cluster bus port, when started with `cluster`.
    pub bus_port: Option<u16>,
    pub dir: PathBuf,
    extra: Vec<String>,
}

impl Node {
    /// A standalone server with extra `--name value` arguments.
    pub fn start(extra: &[String]) -> Node {
        Node::start_inner(extra, false)
    }

    /// A cluster node (`cluster-enabled yes`, its own `nodes.conf` in its own directory).
    pub fn start_cluster(extra: &[String]) -> Node {
        Node::start_inner(extra, true)
    }

    fn start_inner(extra: &[String], cluster: bool) -> Node {
        let mut last = String::new();
        for _ in 0..8 {
            let port = free_port();
            let bus_port = if cluster {
                let mut b = free_port();
                while b == port {
                    b = free_port();
                }
                Some(b)
            } else {
                None
            };
            let dir = std::env::temp_dir().join(format!(
                "rl-node-{}-{}-{}",
                std::process::id(),
                COUNTER.fetch_add(1, Ordering::SeqCst),
                port
            ));
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(&dir).expect("create node dir");
            let dir = dir.canonicalize().unwrap();
            let mut extra = extra.to_vec();
            if let Some(b) = bus_port {
                extra.extend(
                    [
                        "--cluster-enabled",
                        "yes",
                        "--cluster-config-file",
                        "nodes.conf",
                        "--cluster-port",
                        &b.to_string(),
                        "--cluster-node-timeout",
                        "5000",
                    ]
                    .map(String::from),
                );
            }
            let mut node = Node {
                child: None,
                port,
                bus_port,
                dir,
                extra,
            };
            match node.spawn_and_wait() {
                Ok(()) => return node,
                Err(e) => {
                    last = e;
                    if last.contains("Address already in use") {
                        continue;
                    }
                    panic!("server did not start:\n{last}");
                }
            }
        }
        panic!("server did not start after several ports:\n{last}");
    }

    fn spawn_and_wait(&mut self) -> Result<(), String> {
        let log = self.dir.join("server.log");
        let stderr = File::options()
            .create(true)
            .append(true)
            .open(self.dir.join("stderr.log"))
            .unwrap();
        let mut cmd = Command::new(server_bin());
        cmd.arg("--port")
            .arg(self.port.to_string())
            .arg("--bind")
            .arg("127.0.0.1")
            .arg("--save")
            .arg("")
            .arg("--dir")
            .arg(&self.dir)
            .arg("--logfile")
            .arg(&log)
            .arg("--daemonize")
            .arg("no")
            .arg("--enable-debug-command")
            .arg("yes")
            .arg("--repl-diskless-sync-delay")
            .arg("0")
            // AOF writes land before the reply (see tests/common: no race with fsync).
            .arg("--appendfsync")
            .arg("always");
        for e in &self.extra {
            cmd.arg(e);
        }
        cmd.arg("--loadmodule")
            .arg(module_path())
            .arg("test-clock")
            .arg("yes");
        cmd.current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(stderr));
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", server_bin()));
        self.child = Some(child);
        self.wait_ready()
    }

    /// Until PING answers PONG (not LOADING) on our port, from our server.
    fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(c) = self.child.as_mut() {
                if let Ok(Some(status)) = c.try_wait() {
                    self.child = None;
                    return Err(format!(
                        "server exited ({status}); log:\n{}\nstderr:\n{}",
                        tail(&self.dir.join("server.log"), 30),
                        tail(&self.dir.join("stderr.log"), 30)
                    ));
                }
            }
            if let Ok(client) = redis::Client::open(format!("redis://127.0.0.1:{}/", self.port)) {
                if let Ok(mut con) = client.get_connection_with_timeout(Duration::from_secs(1)) {
                    let _ = con.set_read_timeout(Some(Duration::from_secs(5)));
                    if let Ok(Value::SimpleString(s)) = con.req_command(&redis::cmd("PING")) {
                        if s == "PONG" {
                            let dir = con.req_command(redis::cmd("CONFIG").arg("GET").arg("dir"));
                            return match dir {
                                Ok(Value::Array(v))
                                    if v.len() == 2
                                        && text(&v[1]) == self.dir.to_string_lossy() =>
                                {
                                    Ok(())
                                }
                                _ => {
                                    self.kill();
                                    Err("Address already in use (another server answered)".into())
                                }
                            };
                        }
                    }
                }
            }
            if Instant::now() > deadline {
                self.kill();
                return Err(format!(
                    "server not ready in time; log:\n{}",
                    tail(&self.dir.join("server.log"), 30)
                ));
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn con(&self) -> Connection {
        let client = redis::Client::open(format!("redis://127.0.0.1:{}/", self.port)).unwrap();
        let con = client
            .get_connection_with_timeout(Duration::from_secs(5))
            .expect("connect to the server");
        con.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        con
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// SIGKILL: a crash. Whatever the server had not written to its files is lost.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Start again on the same directory, port and arguments; the time it took until the
    /// server answered PING (after loading its RDB / AOF).
    pub fn restart(&mut self) -> Duration {
        self.kill();
        let t = Instant::now();
        self.spawn_and_wait()
            .unwrap_or_else(|e| panic!("restart on :{} failed: {e}", self.port));
        t.elapsed()
    }

    pub fn log_tail(&self) -> String {
        tail(&self.dir.join("server.log"), 40)
    }

    /// Every file name in the server's directory and its `appendonlydir`.
    pub fn files(&self) -> Vec<String> {
        let mut out = Vec::new();
        for d in [self.dir.clone(), self.dir.join("appendonlydir")] {
            if let Ok(rd) = fs::read_dir(&d) {
                for e in rd.flatten() {
                    out.push(e.file_name().to_string_lossy().into_owned());
                }
            }
        }
        out.sort();
        out
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if thread::panicking() {
            eprintln!(
                "--- server :{} log tail ({}) ---\n{}",
                self.port,
                self.dir.display(),
                self.log_tail()
            );
        }
        self.kill();
        let _ = fs::remove_dir_all(&self.dir);
    }
}
