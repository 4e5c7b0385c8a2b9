//! Test harness shared by the integration tests: starts a real `redis-server` with the
//! freshly built module (and the test clock) on a free 127.0.0.1 port, and offers thin
//! helpers that keep server replies raw (`redis::Value`, errors as their exact text).
//!
//! Env: `RL_SERVER` (server binary, default `redis-server`), `RL_MODULE` (module path,
//! default `<crate>/target/release/libredis_ratelimit.so`).
#![allow(dead_code)]

use redis::{Connection, ConnectionLike, Value};
use std::collections::BTreeMap;
use std::fs::{self, File};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant, SystemTime};

/// A unix time in ms aligned to 60000 (and so to every window that divides 60000).
pub const T0: i64 = 1_700_000_040_000;

/// Exact texts from docs/internals.md.
pub const ERR_NOT_INT: &str = "ERR value is not an integer or out of range";
pub const ERR_SYNTAX: &str = "ERR syntax error";
pub const ERR_WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
pub const ERR_APPLY: &str =
    "ERR RL._APPLY is internal: only accepted from the primary link or the AOF";
pub const ERR_CLOCK_DISABLED: &str =
    "ERR RL.CLOCK is disabled: load the module with ratelimit.test-clock yes";

/// `args!(a, b, 3)` -> `Vec<String>`: every argument through `to_string()`.
macro_rules! args {
    ($($x:expr),* $(,)?) => {
        vec![$(($x).to_string()),*] as Vec<String>
    };
}

static COUNTER: AtomicUsize = AtomicUsize::new(0);

pub fn module_path() -> PathBuf {
    match std::env::var_os("RL_MODULE") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release/libredis_ratelimit.so"),
    }
}

pub fn server_bin() -> String {
    match std::env::var("RL_SERVER") {
        Ok(s) if !s.is_empty() => s,
        _ => "redis-server".to_string(),
    }
}

fn newest_mtime(dir: &Path) -> Option<SystemTime> {
    let mut newest = None;
    for entry in fs::read_dir(dir).ok()? {
        let entry = entry.ok()?;
        let path = entry.path();
        let t = if path.is_dir() {
            newest_mtime(&path)
        } else {
            entry.metadata().ok()?.modified().ok()
        };
        if let Some(t) = t {
            if newest.is_none_or(|n| t > n) {
                newest = Some(t);
            }
        }
    }
    newest
}

fn check_module(so: &Path) {
    if !so.exists() {
        panic!(
            "module not found at {}: run `cargo build --release` first (or set RL_MODULE)",
            so.display()
        );
    }
    if std::env::var_os("RL_MODULE").is_none() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        if let (Some(s), Ok(m)) = (newest_mtime(&src), so.metadata().and_then(|m| m.modified())) {
            if s > m {
                eprintln!(
                    "WARNING: {} is older than src/: run `cargo build --release` first",
                    so.display()
                );
            }
        }
    }
}

fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    l.local_addr().unwrap().port()
}

fn tail(path: &Path, lines: usize) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[derive(Clone, Debug)]
pub struct ServerOptions {
    /// Load the module with `test-clock yes`.
    pub test_clock: bool,
    /// Start as a replica of 127.0.0.1:<port>.
    pub replica_of: Option<u16>,
    pub appendonly: bool,
    /// Extra `--name value` arguments.
    pub extra: Vec<String>,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            test_clock: true,
            replica_of: None,
            appendonly: false,
            extra: Vec::new(),
        }
    }
}

/// A redis-server child process, killed (and its directory removed) on drop.
pub struct Server {
    child: Child,
    pub port: u16,
    pub dir: PathBuf,
}

impl Server {
    /// A server with the module and the test clock.
    pub fn start() -> Server {
        Server::start_with(ServerOptions::default())
    }

    pub fn start_with(opts: ServerOptions) -> Server {
        let so = module_path();
        check_module(&so);
        let mut last_log = String::new();
        for _attempt in 0..8 {
            let port = free_port();
            let dir = std::env::temp_dir().join(format!(
                "rl-it-{}-{}-{}",
                std::process::id(),
                COUNTER.fetch_add(1, Ordering::SeqCst),
                port
            ));
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(&dir).expect("create server dir");
            let dir = dir.canonicalize().unwrap();
            let log = dir.join("redis.log");
            let stderr = File::create(dir.join("stderr.log")).unwrap();
            let mut cmd = Command::new(server_bin());
            cmd.arg("--port")
                .arg(port.to_string())
                .arg("--bind")
                .arg("127.0.0.1")
                .arg("--save")
                .arg("")
                .arg("--appendonly")
                .arg(if opts.appendonly { "yes" } else { "no" })
                .arg("--dir")
                .arg(&dir)
                .arg("--logfile")
                .arg(&log)
                .arg("--daemonize")
                .arg("no")
                .arg("--enable-debug-command")
                .arg("yes")
                // Full syncs start at once (the default waits 5 s for more replicas).
                .arg("--repl-diskless-sync-delay")
                .arg("0")
                // Every write reaches the AOF file before its reply: a test that reads the
                // AOF (or kills the server) right after a write never races a background
                // fsync (under `everysec` the server postpones the write for up to 2 s).
                .arg("--appendfsync")
                .arg("always");
            if let Some(p) = opts.replica_of {
                cmd.arg("--replicaof").arg("127.0.0.1").arg(p.to_string());
            }
            for e in &opts.extra {
                cmd.arg(e);
            }
            // Module last, so its args cannot be mistaken for another option's.
            cmd.arg("--loadmodule").arg(&so);
            if opts.test_clock {
                cmd.arg("test-clock").arg("yes");
            }
            cmd.stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::from(stderr));
            let child = cmd
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {}: {e}", server_bin()));
            let mut server = Server { child, port, dir };
            match server.wait_ready() {
                Ok(()) => return server,
                Err(msg) => {
                    last_log = msg;
                    if last_log.contains("Address already in use")
                        || last_log.contains("not our server")
                    {
                        continue; // port race with another test: try another port
                    }
                    panic!("redis-server did not start:\n{last_log}");
                }
            }
        }
        panic!("redis-server did not start after several ports:\n{last_log}");
    }

    fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!(
                    "server exited ({status}); log:\n{}\nstderr:\n{}",
                    tail(&self.dir.join("redis.log"), 30),
                    tail(&self.dir.join("stderr.log"), 30)
                ));
            }
            if let Ok(client) = redis::Client::open(format!("redis://127.0.0.1:{}/", self.port)) {
                if let Ok(mut con) = client.get_connection_with_timeout(Duration::from_secs(1)) {
                    let _ = con.set_read_timeout(Some(Duration::from_secs(5)));
                    if let Ok(Value::SimpleString(s)) = con.req_command(&redis::cmd("PING")) {
                        if s == "PONG" {
                            // Make sure the server answering is ours, not another test's.
                            let dir = con.req_command(redis::cmd("CONFIG").arg("GET").arg("dir"));
                            let ours = match dir {
                                Ok(Value::Array(v)) if v.len() == 2 => {
                                    text(&v[1]) == self.dir.to_string_lossy()
                                }
                                _ => false,
                            };
                            if ours {
                                return Ok(());
                            }
                            let _ = self.child.kill();
                            let _ = self.child.wait();
                            return Err("not our server on that port".into());
                        }
                    }
                }
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                return Err(format!(
                    "server did not answer PING in time; log:\n{}",
                    tail(&self.dir.join("redis.log"), 30)
                ));
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// A new connection to this server (RESP2), with a read timeout.
    pub fn con(&self) -> Connection {
        let client = redis::Client::open(format!("redis://127.0.0.1:{}/", self.port)).unwrap();
        let con = client
            .get_connection_with_timeout(Duration::from_secs(5))
            .expect("connect to redis-server");
        con.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        con
    }

    /// Start a replica of this server (module + test clock loaded) and wait until its
    /// link is up and it has caught up.
    pub fn start_replica(&self) -> Server {
        self.start_replica_with(ServerOptions::default())
    }

    pub fn start_replica_with(&self, mut opts: ServerOptions) -> Server {
        opts.replica_of = Some(self.port);
        let replica = Server::start_with(opts);
        let mut rc = replica.con();
        let deadline = Instant::now() + Duration::from_secs(20);
        while info_field(&mut rc, "replication", "master_link_status").as_deref() != Some("up") {
            assert!(
                Instant::now() < deadline,
                "replica link did not come up; replica log:\n{}",
                tail(&replica.dir.join("redis.log"), 30)
            );
            thread::sleep(Duration::from_millis(20));
        }
        sync_replica(&mut self.con(), &mut rc);
        replica
    }

    pub fn log_tail(&self) -> String {
        tail(&self.dir.join("redis.log"), 40)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if thread::panicking() {
            eprintln!(
                "--- redis-server :{} log tail ({}) ---\n{}",
                self.port,
                self.dir.display(),
                self.log_tail()
            );
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// Wait until the replica has applied everything the primary has produced so far (the
/// "primary" may itself be a replica, of which `replica` is one in a chain: no WAIT there).
pub fn sync_replica(primary: &mut Connection, replica: &mut Connection) {
    if info_field(primary, "replication", "role").as_deref() == Some("master") {
        let acked = int(&ok(primary, &args!("WAIT", 1, 10000)));
        assert!(acked >= 1, "WAIT: the replica did not acknowledge");
    }
    let target: i64 = info_field(primary, "replication", "master_repl_offset")
        .unwrap()
        .parse()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let off: i64 = info_field(replica, "replication", "master_repl_offset")
            .unwrap()
            .parse()
            .unwrap();
        if off >= target {
            return;
        }
        assert!(Instant::now() < deadline, "replica did not catch up");
        thread::sleep(Duration::from_millis(5));
    }
}

/// One field of `INFO <section>`.
pub fn info_field(con: &mut Connection, section: &str, field: &str) -> Option<String> {
    let v = con
        .req_command(redis::cmd("INFO").arg(section))
        .expect("INFO");
    let t = text(&v);
    t.lines().find_map(|l| {
        l.strip_prefix(field)
            .and_then(|r| r.strip_prefix(':'))
            .map(|r| r.trim().to_string())
    })
}

// ---------------------------------------------------------------- raw commands

/// Run one command, reply kept raw: a server error comes back as `Value::ServerError`.
/// A connection failure panics (the server crashed or hung).
pub fn raw(con: &mut Connection, args: &[String]) -> Value {
    let mut c = redis::cmd(&args[0]);
    for a in &args[1..] {
        c.arg(a.as_str());
    }
    match con.req_command(&c) {
        Ok(v) => v,
        Err(e) => panic!("connection failure on {args:?}: {e} (server crashed or hung?)"),
    }
}

/// Like `raw`, with binary-safe arguments.
pub fn raw_bytes(con: &mut Connection, args: &[Vec<u8>]) -> Value {
    let mut c = redis::cmd(std::str::from_utf8(&args[0]).unwrap());
    for a in &args[1..] {
        c.arg(a.as_slice());
    }
    match con.req_command(&c) {
        Ok(v) => v,
        Err(e) => panic!("connection failure: {e} (server crashed or hung?)"),
    }
}

/// The full text of an error reply ("ERR ...", "WRONGTYPE ..."), if it is one.
pub fn error_text(v: &Value) -> Option<String> {
    match v {
        Value::ServerError(e) => Some(match e.details() {
            Some(d) => format!("{} {}", e.code(), d),
            None => e.code().to_string(),
        }),
        _ => None,
    }
}

/// Run a command that must succeed.
pub fn ok(con: &mut Connection, args: &[String]) -> Value {
    let v = raw(con, args);
    if let Some(e) = error_text(&v) {
        panic!("{args:?} answered the error {e:?}");
    }
    v
}

/// Run a command that must fail; its error text.
pub fn err(con: &mut Connection, args: &[String]) -> String {
    let v = raw(con, args);
    match error_text(&v) {
        Some(e) => e,
        None => panic!("{args:?} should have answered an error, got {v:?}"),
    }
}

/// A rate command's standard 5-field reply.
pub fn rate(con: &mut Connection, args: &[String]) -> [i64; 5] {
    let v = ok(con, args);
    reply5(&v).unwrap_or_else(|m| panic!("{args:?}: {m}"))
}

pub fn reply5(v: &Value) -> Result<[i64; 5], String> {
    match v {
        Value::Array(items) if items.len() == 5 => {
            let mut out = [0i64; 5];
            for (i, it) in items.iter().enumerate() {
                match it {
                    Value::Int(n) => out[i] = *n,
                    other => return Err(format!("field {} is not an integer: {other:?}", i + 1)),
                }
            }
            Ok(out)
        }
        other => Err(format!("expected an array of 5 integers, got {other:?}")),
    }
}

/// MULTI + commands + EXEC in one round trip; the EXEC reply's elements, raw.
pub fn multi(con: &mut Connection, cmds: &[Vec<String>]) -> Vec<Value> {
    let started = Instant::now();
    let out = multi_inner(con, cmds);
    let ms = i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX);
    LAST_MULTI_MS.with(|c| c.set(ms.saturating_add(1)));
    out
}

thread_local! {
    static LAST_MULTI_MS: std::cell::Cell<i64> = const { std::cell::Cell::new(0) };
}

/// The real time the last `multi` of this thread took, in ms rounded up. A PTTL read in the
/// same MULTI as the write that set the TTL is short of it by at most this (plus 1 ms of
/// rounding): the bound a test allows, instead of a guess at how fast the machine is.
pub fn last_multi_ms() -> i64 {
    LAST_MULTI_MS.with(|c| c.get())
}

/// Asserts that a PTTL read in the same MULTI as the write that set `want` is `want`, up to
/// the real time that MULTI took.
pub fn assert_pttl_in_multi(p: i64, want: i64, what: &str) {
    let slack = last_multi_ms() + 2;
    assert!(
        p <= want && p >= want - slack,
        "{what}: PTTL {p}, expected {want} (less at most {slack} ms: the MULTI's real time)"
    );
}

fn multi_inner(con: &mut Connection, cmds: &[Vec<String>]) -> Vec<Value> {
    let mut p = redis::pipe();
    p.atomic();
    for a in cmds {
        let c = p.cmd(&a[0]);
        for x in &a[1..] {
            c.arg(x.as_str());
        }
    }
    let packed = p.get_packed_pipeline();
    let mut resp = con
        .req_packed_commands(&packed, cmds.len() + 1, 1)
        .unwrap_or_else(|e| panic!("MULTI/EXEC of {cmds:?} failed: {e}"));
    match resp.pop() {
        Some(Value::Array(items)) => {
            assert_eq!(items.len(), cmds.len(), "EXEC reply length");
            items
        }
        other => panic!("EXEC answered {other:?}"),
    }
}

pub fn int(v: &Value) -> i64 {
    match v {
        Value::Int(n) => *n,
        Value::BulkString(b) => String::from_utf8_lossy(b)
            .parse()
            .unwrap_or_else(|_| panic!("not an integer: {v:?}")),
        Value::SimpleString(s) => s
            .parse()
            .unwrap_or_else(|_| panic!("not an integer: {v:?}")),
        other => panic!("expected an integer, got {other:?}"),
    }
}

/// Any scalar reply as text (integers in decimal); nil as "(nil)".
pub fn text(v: &Value) -> String {
    match v {
        Value::Nil => "(nil)".into(),
        Value::Int(n) => n.to_string(),
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        Value::Okay => "OK".into(),
        Value::Double(d) => d.to_string(),
        Value::VerbatimString { text, .. } => text.clone(),
        other => format!("{other:?}"),
    }
}

pub fn ping(con: &mut Connection) {
    let v = raw(con, &args!("PING"));
    assert_eq!(text(&v), "PONG", "PING answered {v:?}");
}

pub fn clock_set(con: &mut Connection, ms: i64) {
    ok(con, &args!("RL.CLOCK", "SET", ms));
    assert_eq!(clock_get(con), ms, "RL.CLOCK GET after SET");
}

pub fn clock_advance(con: &mut Connection, ms: i64) {
    ok(con, &args!("RL.CLOCK", "ADVANCE", ms));
}

pub fn clock_get(con: &mut Connection) -> i64 {
    int(&ok(con, &args!("RL.CLOCK", "GET")))
}

pub fn pttl(con: &mut Connection, key: &str) -> i64 {
    int(&ok(con, &args!("PTTL", key)))
}

pub fn pexpiretime(con: &mut Connection, key: &str) -> i64 {
    int(&ok(con, &args!("PEXPIRETIME", key)))
}

pub fn exists(con: &mut Connection, key: &str) -> bool {
    int(&ok(con, &args!("EXISTS", key))) == 1
}

pub fn key_type(con: &mut Connection, key: &str) -> String {
    text(&ok(con, &args!("TYPE", key)))
}

/// `DEBUG DIGEST-VALUE key`: the key's 40-hex-digit value digest.
pub fn digest(con: &mut Connection, key: &str) -> String {
    match ok(con, &args!("DEBUG", "DIGEST-VALUE", key)) {
        Value::Array(v) if v.len() == 1 => text(&v[0]),
        other => panic!("DEBUG DIGEST-VALUE answered {other:?}"),
    }
}

/// Parse an RL.INFO reply: None for nil, else field -> value (as text).
pub fn parse_info(v: &Value) -> Option<BTreeMap<String, String>> {
    match v {
        Value::Nil => None,
        Value::Array(items) => {
            assert!(
                items.len() % 2 == 0,
                "RL.INFO: odd number of elements: {v:?}"
            );
            let mut m = BTreeMap::new();
            for pair in items.chunks(2) {
                let prev = m.insert(text(&pair[0]), text(&pair[1]));
                assert!(prev.is_none(), "RL.INFO: duplicate field in {v:?}");
            }
            Some(m)
        }
        Value::Map(items) => Some(items.iter().map(|(k, v)| (text(k), text(v))).collect()),
        other => panic!("RL.INFO answered {other:?}"),
    }
}

pub fn info(con: &mut Connection, key: &str) -> Option<BTreeMap<String, String>> {
    parse_info(&ok(con, &args!("RL.INFO", key)))
}

/// An integer field of RL.INFO.
pub fn info_int(m: &BTreeMap<String, String>, field: &str) -> i64 {
    m.get(field)
        .unwrap_or_else(|| panic!("RL.INFO has no field {field}: {m:?}"))
        .parse()
        .unwrap_or_else(|_| panic!("RL.INFO field {field} is not an integer: {m:?}"))
}

/// RL.INFO without the fields that depend on the reading server's real clock.
pub fn strip(mut m: BTreeMap<String, String>, fields: &[&str]) -> BTreeMap<String, String> {
    for f in fields {
        m.remove(*f);
    }
    m
}

/// Everything observable about a key that must not change when a command must not
/// write: existence, type, absolute expiry, and the value (RL.INFO minus the real-clock
/// `ttl_ms` for module keys, DUMP for others).
#[derive(Debug, PartialEq, Eq, Clone)]
pub struct KeySnap {
    pub ktype: String,
    pub pexpiretime: i64,
    pub info: Option<BTreeMap<String, String>>,
    pub dump: Option<Vec<u8>>,
}

pub fn snap(con: &mut Connection, key: &str) -> KeySnap {
    let ktype = key_type(con, key);
    let pexpiretime = pexpiretime(con, key);
    let (info_v, dump) = if ktype == "ratelimit" {
        (info(con, key).map(|m| strip(m, &["ttl_ms"])), None)
    } else if ktype == "none" {
        (None, None)
    } else {
        match ok(con, &args!("DUMP", key)) {
            Value::BulkString(b) => (None, Some(b)),
            other => panic!("DUMP answered {other:?}"),
        }
    };
    KeySnap {
        ktype,
        pexpiretime,
        info: info_v,
        dump,
    }
}

/// All keys of the current database (SCAN).
pub fn scan_all(con: &mut Connection) -> Vec<String> {
    let mut cursor = "0".to_string();
    let mut keys = Vec::new();
    loop {
        let v = ok(con, &args!("SCAN", cursor, "COUNT", 1000));
        match v {
            Value::Array(parts) if parts.len() == 2 => {
                cursor = text(&parts[0]);
                match &parts[1] {
                    Value::Array(ks) => keys.extend(ks.iter().map(text)),
                    other => panic!("SCAN keys: {other:?}"),
                }
            }
            other => panic!("SCAN answered {other:?}"),
        }
        if cursor == "0" {
            break;
        }
    }
    keys.sort();
    keys.dedup();
    keys
}

// ---------------------------------------------------------------- AOF reading

/// Every command in the server's AOF increment files (Redis 7 multi-part AOF), in order.
pub fn aof_commands(server: &Server) -> Vec<Vec<Vec<u8>>> {
    let aof_dir = server.dir.join("appendonlydir");
    let mut files: Vec<PathBuf> = fs::read_dir(&aof_dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", aof_dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".incr.aof"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let data = fs::read(&f).unwrap();
        out.extend(parse_resp_commands(&data));
    }
    out
}

fn parse_resp_commands(data: &[u8]) -> Vec<Vec<Vec<u8>>> {
    fn line(data: &[u8], pos: &mut usize) -> Option<String> {
        let start = *pos;
        let rel = data[start..].windows(2).position(|w| w == b"\r\n")?;
        *pos = start + rel + 2;
        Some(String::from_utf8_lossy(&data[start..start + rel]).into_owned())
    }
    let mut pos = 0;
    let mut cmds = Vec::new();
    while pos < data.len() {
        let Some(l) = line(data, &mut pos) else { break };
        let Some(n) = l.strip_prefix('*').and_then(|n| n.parse::<usize>().ok()) else {
            break;
        };
        let mut cmd = Vec::with_capacity(n);
        for _ in 0..n {
            let Some(l) = line(data, &mut pos) else {
                return cmds;
            };
            let len: usize = l.strip_prefix('$').and_then(|n| n.parse().ok()).unwrap();
            cmd.push(data[pos..pos + len].to_vec());
            pos += len + 2;
        }
        cmds.push(cmd);
    }
    cmds
}

// ---------------------------------------------------------------- server version

/// The server under test and what it supports, read from `INFO server` (never from the
/// binary's name): tests gate on features by version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerVersion {
    pub valkey: bool,
    /// (major, minor, patch) of Redis, or of Valkey when `valkey`.
    pub version: (u32, u32, u32),
}

impl ServerVersion {
    pub fn of(con: &mut Connection) -> ServerVersion {
        let valkey = info_field(con, "server", "valkey_version");
        let v = valkey
            .clone()
            .or_else(|| info_field(con, "server", "redis_version"))
            .expect("INFO server has no version");
        let mut it = v.split('.').map(|x| x.parse::<u32>().unwrap_or(0));
        ServerVersion {
            valkey: valkey.is_some(),
            version: (
                it.next().unwrap_or(0),
                it.next().unwrap_or(0),
                it.next().unwrap_or(0),
            ),
        }
    }

    fn at_least(&self, redis: (u32, u32), valkey: (u32, u32)) -> bool {
        let (ma, mi, _) = self.version;
        (ma, mi) >= if self.valkey { valkey } else { redis }
    }

    /// Module commands can carry the server's ACL categories (`SetCommandACLCategories`:
    /// Redis 7.2+, every Valkey).
    pub fn module_acl_categories(&self) -> bool {
        self.at_least((7, 2), (7, 2))
    }

    /// A module can create its own ACL category (`AddACLCategory`: Redis 7.4+, Valkey 8+).
    pub fn module_acl_category(&self) -> bool {
        self.at_least((7, 4), (8, 0))
    }

    /// `ACL CAT <module category>` lists the module's commands (Redis 8.0+, Valkey 8.1+;
    /// earlier servers that have module categories list nothing).
    pub fn acl_cat_lists_module_commands(&self) -> bool {
        self.at_least((8, 0), (8, 1))
    }

    /// Atomic slot migration, `CLUSTER MIGRATESLOTS` (Valkey 9.0+).
    pub fn atomic_slot_migration(&self) -> bool {
        self.valkey && self.at_least((u32::MAX, 0), (9, 0))
    }

    /// `RedisModule_CachedMicroseconds` (Redis 7.2+, every Valkey).
    pub fn cached_microseconds(&self) -> bool {
        self.at_least((7, 2), (7, 2))
    }
}

/// The server's clock in ms (TIME).
pub fn server_ms(c: &mut Connection) -> i64 {
    match raw(c, &args!("TIME")) {
        Value::Array(t) => {
            text(&t[0]).parse::<i64>().unwrap() * 1000 + text(&t[1]).parse::<i64>().unwrap() / 1000
        }
        other => panic!("TIME answered {other:?}"),
    }
}
