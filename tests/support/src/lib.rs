//! The test library shared by every integration test, an ordinary crate (a dev-dependency:
//! `use rl_testkit as common;`), built once for all of them:
//! - `server`: the one server launcher (builder, restart, kill, replicas, version gates,
//!   `wait_until`), re-exported here;
//! - `cluster`: a cluster of such servers made with `redis-cli --cluster create`;
//! - `rate` (calling the rate commands), `workload`, `dump` (DUMP payloads),
//!   `fake_replica` (a replica over a raw socket);
//! - here: thin helpers that keep server replies raw (`redis::Value`, errors as their
//!   exact text), the test clock, RL.INFO, key snapshots, the AOF reader.
//!
//! Env: `RL_SERVER` (server binary, default `redis-server`), `RL_MODULE` (module path,
//! default `<crate>/target/release/libredis_ratelimit.so`), `RL_CLI` (default `redis-cli`).

pub mod cluster;
pub mod dump;
pub mod fake_replica;
pub mod rate;
mod server;
pub mod workload;
pub use server::*;

/// The repository's root (the module's crate).
pub const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

use redis::{Connection, ConnectionLike, Value};
use std::collections::BTreeMap;
use std::fs;
use std::path::PathBuf;
use std::time::Instant;

/// A unix time in ms aligned to 60000 (and so to every window that divides 60000).
pub const T0: i64 = 1_700_000_040_000;
pub const HOUR: i64 = 3_600_000;
pub const DAY_MS: i64 = 86_400_000;

/// Exact texts from docs/internals.md.
pub const ERR_NOT_INT: &str = "ERR value is not an integer or out of range";
pub const ERR_SYNTAX: &str = "ERR syntax error";
pub const ERR_WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
pub const ERR_APPLY: &str =
    "ERR RL._APPLY is internal: only accepted from the primary link or the AOF";
pub const ERR_CLOCK_DISABLED: &str =
    "ERR RL.CLOCK is disabled: load the module with ratelimit.test-clock yes";

/// `args!(a, b, 3)` -> `Vec<String>`: every argument through `to_string()`.
#[macro_export]
macro_rules! args {
    ($($x:expr),* $(,)?) => {
        vec![$(($x).to_string()),*] as Vec<String>
    };
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

pub fn ping(con: &mut Connection) {
    let v = raw(con, &args!("PING"));
    assert_eq!(text(&v), "PONG", "PING answered {v:?}");
}

impl Server {
    /// A server with the module and the test clock set to `ms`, and a connection to it.
    pub fn at_clock(ms: i64) -> (Server, Connection) {
        let s = Server::start();
        let mut c = s.con();
        clock_set(&mut c, ms);
        (s, c)
    }
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

/// PTTL of every key, read in one MULTI.
pub fn pttls(c: &mut Connection, keys: &[String]) -> Vec<i64> {
    let cmds: Vec<Vec<String>> = keys.iter().map(|k| args!("PTTL", k)).collect();
    multi(c, &cmds).iter().map(int).collect()
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

/// Every key in the database with everything observable about it.
pub fn snap_all(c: &mut Connection) -> BTreeMap<String, KeySnap> {
    scan_all(c)
        .into_iter()
        .map(|k| (k.clone(), snap(c, &k)))
        .collect()
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

/// BGREWRITEAOF, and wait until that rewrite has finished, successfully.
pub fn bgrewriteaof(c: &mut Connection) {
    let done = info_i64(c, "persistence", "aof_rewrites");
    ok(c, &args!("BGREWRITEAOF"));
    wait_until("BGREWRITEAOF", std::time::Duration::from_secs(30), || {
        info_i64(c, "persistence", "aof_rewrites") > done
            && info_i64(c, "persistence", "aof_rewrite_in_progress") == 0
            && info_i64(c, "persistence", "aof_rewrite_scheduled") == 0
    });
    assert_eq!(
        info_field(c, "persistence", "aof_last_bgrewrite_status").as_deref(),
        Some("ok")
    );
}

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

/// The server's clock in ms (TIME).
pub fn server_ms(c: &mut Connection) -> i64 {
    match raw(c, &args!("TIME")) {
        Value::Array(t) => {
            text(&t[0]).parse::<i64>().unwrap() * 1000 + text(&t[1]).parse::<i64>().unwrap() / 1000
        }
        other => panic!("TIME answered {other:?}"),
    }
}
