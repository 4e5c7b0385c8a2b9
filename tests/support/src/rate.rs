//! Calling the rate commands from the integration tests: every call with the key's PTTL in
//! the same MULTI (after an admitted request PTTL equals reset_after_ms), replies split
//! into the standard five fields and the extra ones (RL.QUEUE's delay_ms, RL.ACQUIRE's
//! token), RL.INFO fields, expected error texts, and many clients hammering one key.
//! `rl_testkit::rate`.

use crate::*;
use redis::{Connection, Value};
use std::collections::BTreeMap;
use std::sync::{Arc, Barrier};
use std::thread;

pub fn is_dry(a: &[String]) -> bool {
    a.iter().any(|x| x.eq_ignore_ascii_case("DRYRUN"))
}

/// `a` followed by `extra`.
pub fn with(a: &[String], extra: &[&str]) -> Vec<String> {
    let mut v = a.to_vec();
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

/// Runs a rate command and PTTL of its key in one MULTI. Returns the five standard fields
/// and the fields after them, raw. After an admitted, non-dry-run request the key's PTTL
/// must equal reset_after_ms (PTTL reads the real clock: less by at most the MULTI's real
/// time).
pub fn call(c: &mut Connection, a: &[String]) -> ([i64; 5], Vec<Value>) {
    let out = multi(c, &[a.to_vec(), args!("PTTL", a[1])]);
    if let Some(e) = error_text(&out[0]) {
        panic!("{a:?} answered the error {e:?}");
    }
    let items = match &out[0] {
        Value::Array(v) if v.len() >= 5 => v.clone(),
        other => panic!("{a:?}: expected an array of at least 5 fields, got {other:?}"),
    };
    let f = reply5(&Value::Array(items[..5].to_vec())).unwrap_or_else(|m| panic!("{a:?}: {m}"));
    if f[0] == 1 && !is_dry(a) {
        let p = int(&out[1]);
        assert_pttl_in_multi(p, f[4], &format!("{a:?} -> {f:?}: reset_after_ms"));
    }
    (f, items[5..].to_vec())
}

/// A command whose reply has exactly the five standard fields.
pub fn r5(c: &mut Connection, a: &[String]) -> [i64; 5] {
    let (f, x) = call(c, a);
    assert!(x.is_empty(), "{a:?}: expected 5 fields, got extra {x:?}");
    f
}

/// RL.QUEUE: the five fields and delay_ms.
pub fn q6(c: &mut Connection, a: &[String]) -> [i64; 6] {
    let (f, x) = call(c, a);
    assert_eq!(x.len(), 1, "{a:?}: expected 6 fields, extra {x:?}");
    let d = match &x[0] {
        Value::Int(n) => *n,
        other => panic!("{a:?}: delay_ms is not an integer: {other:?}"),
    };
    [f[0], f[1], f[2], f[3], f[4], d]
}

/// RL.ACQUIRE: the five fields and the token (None for nil).
pub fn acq(c: &mut Connection, a: &[String]) -> ([i64; 5], Option<String>) {
    let (f, x) = call(c, a);
    assert_eq!(x.len(), 1, "{a:?}: expected 6 fields, extra {x:?}");
    let t = match &x[0] {
        Value::Nil => None,
        Value::BulkString(b) => Some(String::from_utf8(b.clone()).unwrap()),
        other => panic!("{a:?}: token is neither a bulk string nor nil: {other:?}"),
    };
    assert_eq!(
        t.is_some(),
        f[0] == 1,
        "{a:?}: token {t:?} with allowed {}",
        f[0]
    );
    (f, t)
}

pub fn tok(ms: i64, seq: i64) -> String {
    format!("{ms}-{seq}")
}

/// A token as (ms, seq), ordered like a stream ID.
pub fn parse_tok(t: &str) -> (u64, u64) {
    let (a, b) = t
        .split_once('-')
        .unwrap_or_else(|| panic!("token {t:?} is not <ms>-<seq>"));
    (
        a.parse().unwrap_or_else(|_| panic!("token {t:?}")),
        b.parse().unwrap_or_else(|_| panic!("token {t:?}")),
    )
}

/// RL.RELEASE / RL.RENEW with the key's PTTL in one MULTI: (reply, PTTL).
pub fn lease_op(c: &mut Connection, a: &[String]) -> (i64, i64) {
    let out = multi(c, &[a.to_vec(), args!("PTTL", a[1])]);
    if let Some(e) = error_text(&out[0]) {
        panic!("{a:?} answered the error {e:?}");
    }
    let r = match &out[0] {
        Value::Int(n) => *n,
        other => panic!("{a:?}: expected an integer, got {other:?}"),
    };
    (r, int(&out[1]))
}

pub fn info_of(c: &mut Connection, key: &str) -> BTreeMap<String, String> {
    info(c, key).unwrap_or_else(|| panic!("RL.INFO {key} is nil"))
}

pub fn s<T: ToString>(v: T) -> String {
    v.to_string()
}

pub fn us(ms: i64) -> String {
    (ms * 1000).to_string()
}

pub fn ns(ms: i64) -> String {
    (ms as i128 * 1_000_000).to_string()
}

pub fn arity_err(cmd: &str) -> String {
    format!(
        "ERR wrong number of arguments for '{}' command",
        cmd.to_lowercase()
    )
}

pub fn other_algo(name: &str) -> String {
    format!("WRONGTYPE key holds a ratelimit state of another algorithm ({name})")
}

/// RL.INFO of `key` has the `expected` fields with these values.
pub fn assert_info<V: AsRef<str>>(c: &mut Connection, key: &str, expected: &[(&str, V)]) {
    let m = info_of(c, key);
    for (f, v) in expected {
        assert_eq!(
            m.get(*f).map(String::as_str),
            Some(v.as_ref()),
            "RL.INFO {key} field {f}: {m:?} (expected {})",
            v.as_ref()
        );
    }
}

/// Run a rate command and PTTL in one MULTI; after an admitted (non-dry-run) request the
/// key's PTTL must equal reset_after_ms (at most 2 ms less: PTTL reads the real clock).
pub fn rate_ttl(con: &mut Connection, args: &[String]) -> [i64; 5] {
    let key = args[1].clone();
    let out = multi(con, &[args.to_vec(), args!("PTTL", key)]);
    if let Some(e) = error_text(&out[0]) {
        panic!("{args:?} answered the error {e:?}");
    }
    let r = reply5(&out[0]).unwrap_or_else(|m| panic!("{args:?}: {m}"));
    if r[0] == 1 && !is_dry(args) {
        let p = int(&out[1]);
        assert_pttl_in_multi(p, r[4], &format!("{args:?} -> {r:?}: reset_after_ms"));
    }
    r
}

/// (command, key prefix, params) for each algorithm, with small limits.
pub fn algos() -> Vec<(&'static str, Vec<i64>)> {
    vec![
        ("RL.GCRA", vec![4, 1, 1000]),
        ("RL.TOKENBUCKET", vec![4, 1, 1000]),
        ("RL.SLIDING", vec![4, 1000]),
    ]
}

pub fn build(cmd: &str, key: &str, params: &[i64], cost: Option<i64>, dry: bool) -> Vec<String> {
    let mut a = args!(cmd, key);
    a.extend(params.iter().map(|p| p.to_string()));
    if let Some(n) = cost {
        a.extend(args!("COST", n));
    }
    if dry {
        a.push("DRYRUN".into());
    }
    a
}

/// 50 clients, each on its own connection, fire `per_client` requests at one key at a
/// frozen clock. Returns the `remaining` of every admitted request.
pub fn hammer(args: Vec<String>, per_client: usize) -> (usize, Vec<i64>) {
    let s = Server::start();
    let mut c = s.con();
    clock_set(&mut c, T0);
    let barrier = Arc::new(Barrier::new(50));
    let handles: Vec<_> = (0..50)
        .map(|_| {
            let mut con = s.con();
            let barrier = barrier.clone();
            let args = args.clone();
            thread::spawn(move || {
                barrier.wait();
                let mut out = Vec::new();
                for _ in 0..per_client {
                    out.push(rate(&mut con, &args));
                }
                out
            })
        })
        .collect();
    let mut total = 0;
    let mut remaining = Vec::new();
    for h in handles {
        for r in h.join().expect("client thread panicked") {
            total += 1;
            if r[0] == 1 {
                remaining.push(r[2]);
            }
        }
    }
    assert_eq!(total, 50 * per_client);
    ping(&mut c);
    remaining.sort();
    (total, remaining)
}
