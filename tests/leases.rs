//! Integration tests of the issue-3 commands on a real redis-server: RL.FIXED, RL.LOG,
//! RL.QUEUE (6th field delay_ms), RL.ACQUIRE (6th field token), RL.RELEASE, RL.RENEW.
//! Every reply field is hand-computed from the contract (docs/commands.md)
//! at a frozen, minute-aligned test clock; after every admitted request the key's PTTL
//! equals reset_after_ms; DRYRUN and refused requests change nothing; WRONGTYPE and bad
//! input; the issue's behaviours (boundary attack, queue shaping, concurrency leases and
//! fencing tokens); randomized runs against exact models; replication and DEBUG RELOAD.

#[macro_use]
mod common;

use common::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redis::{Connection, Value};
use std::collections::BTreeMap;
use std::thread;
use std::time::Duration;

// ------------------------------------------------------------------------------ helpers

fn is_dry(a: &[String]) -> bool {
    a.iter().any(|x| x.eq_ignore_ascii_case("DRYRUN"))
}

/// `a` followed by `extra`.
fn with(a: &[String], extra: &[&str]) -> Vec<String> {
    let mut v = a.to_vec();
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

/// Runs a rate command and PTTL of its key in one MULTI. Returns the five standard fields
/// and the fields after them, raw. After an admitted, non-dry-run request the key's PTTL
/// must equal reset_after_ms (PTTL reads the real clock: up to 2 ms less).
fn call(c: &mut Connection, a: &[String]) -> ([i64; 5], Vec<Value>) {
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
        assert!(
            p <= f[4] && p >= f[4] - 2,
            "{a:?} -> {f:?}: PTTL {p} != reset_after_ms {}",
            f[4]
        );
    }
    (f, items[5..].to_vec())
}

/// A command whose reply has exactly the five standard fields.
fn r5(c: &mut Connection, a: &[String]) -> [i64; 5] {
    let (f, x) = call(c, a);
    assert!(x.is_empty(), "{a:?}: expected 5 fields, got extra {x:?}");
    f
}

/// RL.QUEUE: the five fields and delay_ms.
fn q6(c: &mut Connection, a: &[String]) -> [i64; 6] {
    let (f, x) = call(c, a);
    assert_eq!(x.len(), 1, "{a:?}: expected 6 fields, extra {x:?}");
    let d = match &x[0] {
        Value::Int(n) => *n,
        other => panic!("{a:?}: delay_ms is not an integer: {other:?}"),
    };
    [f[0], f[1], f[2], f[3], f[4], d]
}

/// RL.ACQUIRE: the five fields and the token (None for nil).
fn acq(c: &mut Connection, a: &[String]) -> ([i64; 5], Option<String>) {
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

fn tok(ms: i64, seq: i64) -> String {
    format!("{ms}-{seq}")
}

/// A token as (ms, seq), ordered like a stream ID.
fn parse_tok(t: &str) -> (u64, u64) {
    let (a, b) = t
        .split_once('-')
        .unwrap_or_else(|| panic!("token {t:?} is not <ms>-<seq>"));
    (
        a.parse().unwrap_or_else(|_| panic!("token {t:?}")),
        b.parse().unwrap_or_else(|_| panic!("token {t:?}")),
    )
}

/// RL.RELEASE / RL.RENEW with the key's PTTL in one MULTI: (reply, PTTL).
fn lease_op(c: &mut Connection, a: &[String]) -> (i64, i64) {
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

fn assert_pttl_near(p: i64, want: i64, what: &str) {
    assert_pttl_in_multi(p, want, what);
}

fn info_of(c: &mut Connection, key: &str) -> BTreeMap<String, String> {
    info(c, key).unwrap_or_else(|| panic!("RL.INFO {key} is nil"))
}

fn assert_info(c: &mut Connection, key: &str, expected: &[(&str, String)]) {
    let m = info_of(c, key);
    for (f, v) in expected {
        assert_eq!(
            m.get(*f),
            Some(v),
            "RL.INFO {key} field {f}: {m:?} (expected {v})"
        );
    }
}

fn s<T: ToString>(v: T) -> String {
    v.to_string()
}

fn us(ms: i64) -> String {
    (ms * 1000).to_string()
}

fn ns(ms: i64) -> String {
    (ms as i128 * 1_000_000).to_string()
}

/// Every key in the database with everything observable about it.
fn snap_all(c: &mut Connection) -> BTreeMap<String, KeySnap> {
    scan_all(c)
        .into_iter()
        .map(|k| (k.clone(), snap(c, &k)))
        .collect()
}

fn arity_err(cmd: &str) -> String {
    format!(
        "ERR wrong number of arguments for '{}' command",
        cmd.to_lowercase()
    )
}

fn other_algo(name: &str) -> String {
    format!("WRONGTYPE key holds a ratelimit state of another algorithm ({name})")
}

// ----------------------------------------------------------------------------- RL.FIXED

#[test]
fn fixed_reply_fields_across_windows() {
    let srv = Server::start();
    let mut c = srv.con();
    // Windows of 10 s aligned to the epoch: [T0, T0+10 s), [T0+10 s, T0+20 s), ...
    clock_set(&mut c, T0 + 2_000);
    let f = args!("RL.FIXED", "f", 3, 10_000);
    assert_eq!(r5(&mut c, &f), [1, 3, 2, 0, 8_000]);
    assert_eq!(r5(&mut c, &with(&f, &["COST", "2"])), [1, 3, 0, 0, 8_000]);
    assert_info(
        &mut c,
        "f",
        &[
            ("algorithm", s("fixed")),
            ("limit", s(3)),
            ("window_ms", s(10_000)),
            ("window_start_ms", s(T0)),
            ("count", s(3)),
        ],
    );
    // Full: retry and reset are the time to the window's end; nothing changes.
    let before = snap(&mut c, "f");
    assert_eq!(r5(&mut c, &f), [0, 3, 0, 8_000, 8_000]);
    assert_eq!(
        snap(&mut c, "f"),
        before,
        "a refused RL.FIXED changed the key"
    );
    clock_set(&mut c, T0 + 9_999);
    assert_eq!(r5(&mut c, &f), [0, 3, 0, 1, 1]);
    // The next window starts empty.
    clock_set(&mut c, T0 + 10_000);
    assert_eq!(r5(&mut c, &f), [1, 3, 2, 0, 10_000]);
    assert_info(
        &mut c,
        "f",
        &[("window_start_ms", s(T0 + 10_000)), ("count", s(1))],
    );
    // COST 3 does not fit (1 + 3 > 3): refused, remaining 2, nothing spent.
    assert_eq!(
        r5(&mut c, &with(&f, &["COST", "3"])),
        [0, 3, 2, 10_000, 10_000]
    );
    assert_eq!(r5(&mut c, &with(&f, &["cost", "2"])), [1, 3, 0, 0, 10_000]);
    clock_set(&mut c, T0 + 15_500);
    assert_eq!(r5(&mut c, &f), [0, 3, 0, 4_500, 4_500]);
    // Two windows later: a fresh key's answers.
    clock_set(&mut c, T0 + 35_000);
    assert_eq!(r5(&mut c, &f), [1, 3, 2, 0, 5_000]);
    // New numbers for an existing key: the count is read under the new limit.
    assert_eq!(
        r5(&mut c, &args!("RL.FIXED", "f", 5, 10_000)),
        [1, 5, 3, 0, 5_000]
    );
    assert_eq!(
        r5(&mut c, &args!("RL.FIXED", "f", 1, 10_000)),
        [0, 1, 0, 5_000, 5_000]
    );
    // COST equal to the limit on a fresh key.
    assert_eq!(
        r5(&mut c, &args!("RL.FIXED", "g", 4, 60_000, "COST", 4)),
        [1, 4, 0, 0, 25_000]
    );
}

// ------------------------------------------------------------------------------- RL.LOG

#[test]
fn log_reply_fields_across_the_trailing_window() {
    let srv = Server::start();
    let mut c = srv.con();
    clock_set(&mut c, T0);
    let l = args!("RL.LOG", "l", 3, 1_000);
    assert_eq!(r5(&mut c, &l), [1, 3, 2, 0, 1_000]);
    clock_set(&mut c, T0 + 100);
    assert_eq!(r5(&mut c, &l), [1, 3, 1, 0, 1_000]);
    clock_set(&mut c, T0 + 200);
    assert_eq!(r5(&mut c, &l), [1, 3, 0, 0, 1_000]);
    assert_info(
        &mut c,
        "l",
        &[
            ("algorithm", s("log")),
            ("limit", s(3)),
            ("window_ms", s(1_000)),
            ("entries", s(3)),
            ("oldest_us", us(T0)),
            ("newest_us", us(T0 + 200)),
        ],
    );
    clock_set(&mut c, T0 + 300);
    let before = snap(&mut c, "l");
    // COST 2 needs the two oldest entries (T0, T0+100) gone: at T0+1100. Fresh once the
    // newest (T0+200) has left: T0+1200.
    assert_eq!(r5(&mut c, &with(&l, &["COST", "2"])), [0, 3, 0, 800, 900]);
    assert_eq!(r5(&mut c, &l), [0, 3, 0, 700, 900]);
    assert_eq!(
        snap(&mut c, "l"),
        before,
        "a refused RL.LOG changed the key"
    );
    clock_set(&mut c, T0 + 999);
    assert_eq!(r5(&mut c, &l), [0, 3, 0, 1, 201]);
    // The entry at T0 leaves the window (now - 1000, now] at exactly T0+1000.
    clock_set(&mut c, T0 + 1_000);
    assert_eq!(r5(&mut c, &l), [1, 3, 0, 0, 1_000]);
    assert_eq!(r5(&mut c, &with(&l, &["COST", "2"])), [0, 3, 0, 200, 1_000]);
    clock_set(&mut c, T0 + 1_200);
    assert_eq!(r5(&mut c, &with(&l, &["COST", "2"])), [1, 3, 0, 0, 1_000]);
    // Memory is bounded by the limit: exactly the 3 live units are stored.
    assert_info(
        &mut c,
        "l",
        &[
            ("entries", s(3)),
            ("oldest_us", us(T0 + 1_000)),
            ("newest_us", us(T0 + 1_200)),
        ],
    );
    // Long idle: a fresh key's answers.
    clock_set(&mut c, T0 + 5_000);
    assert_eq!(r5(&mut c, &l), [1, 3, 2, 0, 1_000]);
    let m = info_of(&mut c, "l");
    assert!(info_int(&m, "entries") <= 3, "{m:?}");
    assert_eq!(m["newest_us"], us(T0 + 5_000));
    // New numbers for an existing key: limit 2 with 1 live entry.
    assert_eq!(
        r5(&mut c, &args!("RL.LOG", "l", 2, 1_000)),
        [1, 2, 0, 0, 1_000]
    );
    assert_eq!(
        r5(&mut c, &args!("RL.LOG", "l", 2, 1_000)),
        [0, 2, 0, 1_000, 1_000]
    );
}

// ----------------------------------------------------------------------------- RL.QUEUE

#[test]
fn queue_shapes_one_per_interval() {
    let srv = Server::start();
    let mut c = srv.con();
    clock_set(&mut c, T0);
    let q = args!("RL.QUEUE", "q", 5, 1_000);
    // 8 at once: 5 admitted with delays 0..4000, 3 refused.
    for i in 0..5 {
        assert_eq!(
            q6(&mut c, &q),
            [1, 5, 4 - i, 0, 1_000 * (i + 1), 1_000 * i],
            "request {}",
            i + 1
        );
    }
    let before = snap(&mut c, "q");
    for i in 5..8 {
        assert_eq!(
            q6(&mut c, &q),
            [0, 5, 0, 1_000, 5_000, 0],
            "request {}",
            i + 1
        );
    }
    assert_eq!(
        snap(&mut c, "q"),
        before,
        "a refused RL.QUEUE changed the key"
    );
    assert_info(
        &mut c,
        "q",
        &[
            ("algorithm", s("queue")),
            ("capacity", s(5)),
            ("interval_ms", s(1_000)),
            ("tat_ns", ns(T0 + 5_000)),
        ],
    );
    // It drains one per interval: each interval exactly one more, waiting 4000 ms.
    for k in 1..=4 {
        clock_set(&mut c, T0 + 1_000 * k);
        assert_eq!(q6(&mut c, &q), [1, 5, 0, 0, 5_000, 4_000], "at +{k} s");
        assert_eq!(q6(&mut c, &q), [0, 5, 0, 1_000, 5_000, 0], "at +{k} s");
    }
    clock_set(&mut c, T0 + 4_999);
    assert_eq!(q6(&mut c, &q), [0, 5, 0, 1, 4_001, 0]);
    // 2.5 s later: 2.5 places freed, 2 whole.
    clock_set(&mut c, T0 + 6_500);
    assert_eq!(q6(&mut c, &q), [1, 5, 1, 0, 3_500, 2_500]);
    assert_eq!(q6(&mut c, &q), [1, 5, 0, 0, 4_500, 3_500]);
    assert_eq!(q6(&mut c, &q), [0, 5, 0, 500, 4_500, 0]);
    // COST n waits for n places.
    let q2 = args!("RL.QUEUE", "q2", 5, 1_000, "COST", 2);
    assert_eq!(q6(&mut c, &q2), [1, 5, 3, 0, 2_000, 0]);
    assert_eq!(q6(&mut c, &q2), [1, 5, 1, 0, 4_000, 2_000]);
    assert_eq!(q6(&mut c, &q2), [0, 5, 1, 1_000, 4_000, 0]);
    assert_eq!(
        q6(&mut c, &args!("RL.QUEUE", "q2", 5, 1_000)),
        [1, 5, 0, 0, 5_000, 4_000]
    );
    // Idle longer than the reset: fresh.
    clock_set(&mut c, T0 + 60_000);
    assert_eq!(q6(&mut c, &q), [1, 5, 4, 0, 1_000, 0]);
}

// --------------------------------------------------------- RL.ACQUIRE/RELEASE/RENEW

#[test]
fn concurrency_limit_release_expiry_renew() {
    let srv = Server::start();
    let mut c = srv.con();
    clock_set(&mut c, T0);
    let a = args!("RL.ACQUIRE", "a", 3, 10_000);
    let (r, t0) = acq(&mut c, &a);
    assert_eq!(
        (r, t0.as_deref()),
        ([1, 3, 2, 0, 10_000], Some(&*tok(T0, 0)))
    );
    // Same millisecond: the sequence counts up.
    let (r, t1) = acq(&mut c, &a);
    assert_eq!(
        (r, t1.as_deref()),
        ([1, 3, 1, 0, 10_000], Some(&*tok(T0, 1)))
    );
    clock_set(&mut c, T0 + 2_000);
    let (r, t2) = acq(&mut c, &a);
    assert_eq!(
        (r, t2.as_deref()),
        ([1, 3, 0, 0, 10_000], Some(&*tok(T0 + 2_000, 0)))
    );
    let (t0, t1, t2) = (t0.unwrap(), t1.unwrap(), t2.unwrap());
    assert_info(
        &mut c,
        "a",
        &[
            ("algorithm", s("concurrency")),
            ("limit", s(3)),
            ("max_lease_ms", s(10_000)),
            ("leases", s(3)),
            ("last_token", tok(T0 + 2_000, 0)),
            ("horizon_us", us(T0 + 12_000)),
        ],
    );
    // The 4th is refused: retry when the earliest lease (T0+10 s) expires, reset when the
    // last one (T0+12 s) does. Nothing changes.
    clock_set(&mut c, T0 + 3_000);
    let before = snap(&mut c, "a");
    assert_eq!(acq(&mut c, &a), ([0, 3, 0, 7_000, 9_000], None));
    assert_eq!(
        snap(&mut c, "a"),
        before,
        "a refused RL.ACQUIRE changed the key"
    );

    // RELEASE frees a slot (the key lives on until the last lease expires).
    let (r, p) = lease_op(&mut c, &args!("RL.RELEASE", "a", t1));
    assert_eq!(r, 1, "RELEASE of a live lease");
    assert_pttl_near(p, 9_000, "after RELEASE");
    assert_eq!(lease_op(&mut c, &args!("RL.RELEASE", "a", t1)).0, 0);
    assert_eq!(lease_op(&mut c, &args!("RL.RENEW", "a", t1, 5_000)).0, 0);
    let (r, t3) = acq(&mut c, &a);
    assert_eq!(
        (r, t3.as_deref()),
        ([1, 3, 0, 0, 10_000], Some(&*tok(T0 + 3_000, 0)))
    );
    let t3 = t3.unwrap();
    assert_eq!(acq(&mut c, &a), ([0, 3, 0, 7_000, 10_000], None));

    // An expired lease frees its slot without a RELEASE.
    clock_set(&mut c, T0 + 9_999);
    assert_eq!(acq(&mut c, &a), ([0, 3, 0, 1, 3_001], None));
    clock_set(&mut c, T0 + 10_000);
    let (r, t4) = acq(&mut c, &a);
    assert_eq!(
        (r, t4.as_deref()),
        ([1, 3, 0, 0, 10_000], Some(&*tok(T0 + 10_000, 0)))
    );
    let t4 = t4.unwrap();
    // A stale (expired) token: RELEASE and RENEW answer 0 and free nothing.
    let before = snap(&mut c, "a");
    assert_eq!(lease_op(&mut c, &args!("RL.RELEASE", "a", t0)).0, 0);
    assert_eq!(lease_op(&mut c, &args!("RL.RENEW", "a", t0, 60_000)).0, 0);
    assert_eq!(
        lease_op(&mut c, &args!("RL.RELEASE", "a", tok(T0 + 99_000, 0))).0,
        0
    );
    assert_eq!(
        snap(&mut c, "a"),
        before,
        "a stale RELEASE/RENEW changed the key"
    );
    assert_eq!(acq(&mut c, &a), ([0, 3, 0, 2_000, 10_000], None));

    // RENEW extends the lease and moves the TTL: t2 now expires at T0+40 s.
    let (r, p) = lease_op(&mut c, &args!("RL.RENEW", "a", &t2, 30_000));
    assert_eq!(r, 1);
    assert_pttl_near(p, 30_000, "after RENEW");
    // Earliest expiry now t3 at T0+13 s.
    assert_eq!(acq(&mut c, &a), ([0, 3, 0, 3_000, 30_000], None));
    clock_set(&mut c, T0 + 12_500);
    // t2 would have expired at T0+12 s without the RENEW: still live, so still full.
    assert_eq!(acq(&mut c, &a), ([0, 3, 0, 500, 27_500], None));
    // t3 expires at T0+13 s: one slot free; the key lives until t2's new expiry.
    clock_set(&mut c, T0 + 13_000);
    let (r, t5) = acq(&mut c, &a);
    assert_eq!(
        (r, t5.as_deref()),
        ([1, 3, 0, 0, 27_000], Some(&*tok(T0 + 13_000, 0)))
    );
    assert_info(
        &mut c,
        "a",
        &[
            ("max_lease_ms", s(30_000)),
            ("last_token", tok(T0 + 13_000, 0)),
            ("horizon_us", us(T0 + 40_000)),
        ],
    );
    // RELEASE/RENEW on a key that does not exist: 0, no key created.
    assert_eq!(
        lease_op(&mut c, &args!("RL.RELEASE", "nokey", tok(T0, 0))).0,
        0
    );
    assert_eq!(
        lease_op(&mut c, &args!("RL.RENEW", "nokey", tok(T0, 0), 1000)).0,
        0
    );
    assert!(!exists(&mut c, "nokey"));
    // Tokens strictly increased throughout.
    let all = [t0, t1, t2, t3, t4, t5.unwrap()];
    for w in all.windows(2) {
        assert!(parse_tok(&w[0]) < parse_tok(&w[1]), "tokens {all:?}");
    }
}

/// RENEW sets the lease's expiry to now + lease_ms, also earlier than before, and the
/// key's TTL is the time until the last lease expires (contract, RL.ACQUIRE section).
#[test]
fn renew_can_shorten_a_lease_and_the_ttl_follows() {
    let srv = Server::start();
    let mut c = srv.con();
    clock_set(&mut c, T0);
    let a = args!("RL.ACQUIRE", "a", 2, 10_000);
    let (r, t) = acq(&mut c, &a);
    assert_eq!(r, [1, 2, 1, 0, 10_000]);
    let t = t.unwrap();
    let (r, p) = lease_op(&mut c, &args!("RL.RENEW", "a", &t, 1_000));
    assert_eq!(r, 1);
    // The lease is now the only one and expires at T0+1 s.
    assert_pttl_near(p, 1_000, "after RENEW to 1000 ms");
    clock_set(&mut c, T0 + 999);
    assert_eq!(acq(&mut c, &with(&a, &["DRYRUN"])).0, [1, 2, 0, 0, 10_000]);
    clock_set(&mut c, T0 + 1_000);
    // Expired: both slots free; RENEW/RELEASE of it answer 0.
    assert_eq!(lease_op(&mut c, &args!("RL.RENEW", "a", &t, 5_000)).0, 0);
    let (r, t2) = acq(&mut c, &args!("RL.ACQUIRE", "a", 2, 2_000));
    assert_eq!(
        r,
        [1, 2, 1, 0, 2_000],
        "a fresh key's answer after the renewed lease expired"
    );
    assert!(parse_tok(&t) < parse_tok(&t2.unwrap()));
}

#[test]
fn tokens_increase_across_release_expiry_and_recreation() {
    let srv = Server::start();
    let mut c = srv.con();
    clock_set(&mut c, T0);
    let mut seen: Vec<String> = Vec::new();
    let short = args!("RL.ACQUIRE", "t", 3, 50);
    // RELEASE of every lease does not let a later ACQUIRE at the same ms reuse a token.
    let (r, a) = acq(&mut c, &short);
    assert_eq!(r, [1, 3, 2, 0, 50]);
    let a = a.unwrap();
    assert_eq!(lease_op(&mut c, &args!("RL.RELEASE", "t", &a)).0, 1);
    let (_, b) = acq(&mut c, &short);
    let b = b.unwrap();
    assert!(parse_tok(&a) < parse_tok(&b), "{a} then {b} at the same ms");
    seen.extend([a.clone(), b.clone()]);
    // Let the key expire in real time, with the test clock moved along.
    thread::sleep(Duration::from_millis(120));
    clock_advance(&mut c, 120);
    assert!(!exists(&mut c, "t"), "the key outlived its leases");
    // Re-created with a long lease, so it stays while the stale tokens are tried.
    let long = args!("RL.ACQUIRE", "t", 3, 60_000);
    let (r, d) = acq(&mut c, &long);
    assert_eq!(r, [1, 3, 2, 0, 60_000]);
    let d = d.unwrap();
    assert_eq!(d, tok(T0 + 120, 0));
    seen.push(d.clone());
    // Tokens from before the re-creation are stale: 0, nothing freed.
    let before = snap(&mut c, "t");
    for old in [&a, &b] {
        assert_eq!(lease_op(&mut c, &args!("RL.RELEASE", "t", old)).0, 0);
        assert_eq!(lease_op(&mut c, &args!("RL.RENEW", "t", old, 50)).0, 0);
    }
    assert_eq!(snap(&mut c, "t"), before);
    assert_eq!(
        acq(&mut c, &with(&long, &["DRYRUN"])).0,
        [1, 3, 1, 0, 60_000]
    );

    // The same with the real clock: the key expires, is re-created, tokens go on rising.
    ok(&mut c, &args!("RL.CLOCK", "REAL"));
    let real = args!("RL.ACQUIRE", "r", 2, 50);
    let mut prev: Option<String> = None;
    for round in 0..3 {
        let (r, t) = acq(&mut c, &real);
        assert_eq!(r[0], 1, "round {round}");
        let t = t.unwrap();
        let (r2, t2) = acq(&mut c, &real);
        assert_eq!(r2[0], 1, "round {round}");
        let t2 = t2.unwrap();
        assert!(parse_tok(&t) < parse_tok(&t2), "{t} then {t2}");
        if let Some(p) = &prev {
            assert!(parse_tok(p) < parse_tok(&t), "{p} then {t}");
            // A re-created key exists only after every earlier lease expired.
            assert!(
                parse_tok(&t).0 >= parse_tok(p).0 + 50,
                "re-created key's token {t} not 50 ms after {p}"
            );
            assert_eq!(lease_op(&mut c, &args!("RL.RELEASE", "r", p)).0, 0);
        }
        prev = Some(t2);
        thread::sleep(Duration::from_millis(100));
        assert!(
            !exists(&mut c, "r"),
            "round {round}: the key did not expire"
        );
    }
}

// -------------------------------------------------------------------- boundary attack

#[test]
fn boundary_attack() {
    let srv = Server::start();
    let mut c = srv.con();
    let (limit, w) = (100, 60_000);
    let fixed = args!("RL.FIXED", "fixed", limit, w);
    let log = args!("RL.LOG", "log", limit, w);
    let sliding = args!("RL.SLIDING", "sliding", limit, w);
    let mut admitted: BTreeMap<String, i64> = BTreeMap::new();
    let mut run = |c: &mut Connection, a: &[String], n: usize, out: &mut Vec<[i64; 5]>| {
        for _ in 0..n {
            let r = r5(c, a);
            *admitted.entry(a[0].clone()).or_default() += r[0];
            out.push(r);
        }
    };
    // 100 requests at 59.5 s of the window [T0, T0+60 s): all admitted everywhere.
    clock_set(&mut c, T0 + 59_500);
    for (a, reset) in [(&fixed, 500), (&log, 60_000), (&sliding, 60_500)] {
        let mut out = Vec::new();
        run(&mut c, a, 100, &mut out);
        for (i, r) in out.iter().enumerate() {
            assert_eq!(*r, [1, 100, 99 - i as i64, 0, reset], "{} #{}", a[0], i + 1);
        }
    }
    // The 101st: refused. Sliding: in the next window the 100 weigh 100*(1 - e/W); room
    // for 1 once e >= 600 ms, i.e. 1100 ms from now.
    assert_eq!(r5(&mut c, &fixed), [0, 100, 0, 500, 500]);
    assert_eq!(r5(&mut c, &log), [0, 100, 0, 60_000, 60_000]);
    assert_eq!(r5(&mut c, &sliding), [0, 100, 0, 1_100, 60_500]);

    // 100 more at 60.5 s, 500 ms into the next window.
    clock_set(&mut c, T0 + 60_500);
    let mut out = Vec::new();
    run(&mut c, &fixed, 100, &mut out);
    for (i, r) in out.iter().enumerate() {
        assert_eq!(
            *r,
            [1, 100, 99 - i as i64, 0, 59_500],
            "RL.FIXED #{}",
            i + 101
        );
    }
    let mut out = Vec::new();
    run(&mut c, &log, 100, &mut out);
    // The first burst leaves the trailing window at 59.5 s + 60 s.
    assert!(
        out.iter().all(|r| *r == [0, 100, 0, 59_000, 59_000]),
        "{out:?}"
    );
    let mut out = Vec::new();
    run(&mut c, &sliding, 100, &mut out);
    // estimate = 100 * 59.5/60 = 99.17: no room; room at e = 600 ms.
    assert!(
        out.iter().all(|r| *r == [0, 100, 0, 100, 59_500]),
        "{out:?}"
    );
    assert_eq!(admitted["RL.FIXED"], 200, "RL.FIXED admits twice the limit");
    assert_eq!(admitted["RL.LOG"], 100);
    assert_eq!(admitted["RL.SLIDING"], 100);

    // RL.LOG: nothing until the first burst has left the trailing window, then 100.
    clock_set(&mut c, T0 + 119_499);
    assert_eq!(r5(&mut c, &log), [0, 100, 0, 1, 1]);
    clock_set(&mut c, T0 + 119_500);
    for i in 0..100 {
        assert_eq!(r5(&mut c, &log), [1, 100, 99 - i, 0, 60_000], "late #{i}");
    }
    assert_eq!(r5(&mut c, &log), [0, 100, 0, 60_000, 60_000]);
    // RL.SLIDING: exactly one fits at 60.6 s, the next 600 ms later.
    clock_set(&mut c, T0 + 60_600);
    assert_eq!(r5(&mut c, &sliding), [1, 100, 0, 0, 119_400]);
    assert_eq!(r5(&mut c, &sliding), [0, 100, 0, 600, 119_400]);
}

// ------------------------------------------------------------- randomized vs. models

/// The contract's fixed window: admitted iff count + cost <= limit; retry = reset = end.
fn fixed_model(st: &mut (i64, i64), limit: i64, w: i64, now: i64, cost: i64) -> [i64; 5] {
    let start = now - now.rem_euclid(w);
    if st.0 != start {
        *st = (start, 0);
    }
    let to_end = start + w - now;
    if st.1 + cost <= limit {
        st.1 += cost;
        [1, limit, limit - st.1, 0, to_end]
    } else {
        let reset = if st.1 > 0 { to_end } else { 0 };
        [0, limit, limit - st.1, to_end, reset]
    }
}

/// The contract's exact log: admitted iff live cost in (now - w, now] + cost <= limit.
fn log_model(entries: &mut Vec<i64>, limit: i64, w: i64, now: i64, cost: i64) -> [i64; 5] {
    entries.retain(|&e| e + w > now);
    let live = entries.len() as i64;
    if live + cost <= limit {
        entries.extend(std::iter::repeat_n(now, cost as usize));
        [1, limit, limit - live - cost, 0, w]
    } else {
        let k = (live + cost - limit) as usize;
        let retry = entries[k - 1] + w - now;
        let reset = entries[entries.len() - 1] + w - now;
        [0, limit, limit - live, retry, reset]
    }
}

/// The contract's queue (a GCRA with one request per interval, capacity at once):
/// (five fields, delay). `tat` in ms (every quantity is whole ms here).
fn queue_model(tat: &mut i64, cap: i64, iv: i64, now: i64, cost: i64) -> [i64; 6] {
    let tau = cap * iv;
    let cur = (*tat).max(now);
    let next = cur + cost * iv;
    if next - now <= tau {
        *tat = next;
        [1, cap, (tau - (next - now)) / iv, 0, next - now, cur - now]
    } else {
        [
            0,
            cap,
            (tau - (cur - now)) / iv,
            next - tau - now,
            cur - now,
            0,
        ]
    }
}

#[test]
fn randomized_runs_match_the_contract_models() {
    let srv = Server::start();
    let mut c = srv.con();
    let mut rng = StdRng::seed_from_u64(0x5eed_0003);
    for round in 0..6 {
        let limit: i64 = rng.gen_range(1..=8);
        // Windows/intervals in whole seconds and up to minutes, so no key expires in real
        // time while the run lasts.
        let w: i64 = [3_000, 7_000, 60_000, 10_000][round % 4];
        let iv: i64 = [1_000, 2_500, 700][round % 3];
        clock_set(&mut c, T0 + rng.gen_range(0..w));
        let (kf, kl, kq) = (
            format!("f{round}"),
            format!("l{round}"),
            format!("q{round}"),
        );
        let mut fst = (0i64, 0i64);
        let mut log: Vec<i64> = Vec::new();
        let mut tat = 0i64;
        for step in 0..250 {
            let dt = match rng.gen_range(0..10) {
                0..=3 => 0,
                4..=7 => rng.gen_range(1..=w / 4),
                _ => rng.gen_range(1..=2 * w),
            };
            clock_advance(&mut c, dt);
            let mut now = clock_get(&mut c);
            // A RL.FIXED key's TTL is the time to its window's end, and TTLs run on the
            // real clock: keep 300 ms of it, so the key cannot expire before its window
            // ends on the test clock (the exact last-ms answers are tested above).
            if now % w > w - 300 {
                clock_advance(&mut c, 300);
                now = clock_get(&mut c);
            }
            let cost = if rng.gen_bool(0.7) {
                1
            } else {
                rng.gen_range(1..=limit)
            };
            let dry = rng.gen_bool(0.15);
            let mut opts: Vec<String> = Vec::new();
            if cost != 1 || rng.gen_bool(0.2) {
                opts.extend(args!("COST", cost));
            }
            if dry {
                opts.push("DRYRUN".into());
            }
            let o: Vec<&str> = opts.iter().map(String::as_str).collect();
            let ctx = format!(
                "round {round} step {step} now +{} cost {cost} dry {dry}",
                now - T0
            );

            let mut f2 = fst;
            let want = fixed_model(if dry { &mut f2 } else { &mut fst }, limit, w, now, cost);
            let got = r5(&mut c, &with(&args!("RL.FIXED", &kf, limit, w), &o));
            assert_eq!(got, want, "RL.FIXED {ctx}");

            let mut l2 = log.clone();
            let want = log_model(if dry { &mut l2 } else { &mut log }, limit, w, now, cost);
            let got = r5(&mut c, &with(&args!("RL.LOG", &kl, limit, w), &o));
            assert_eq!(got, want, "RL.LOG {ctx}");

            let mut t2 = tat;
            let want = queue_model(if dry { &mut t2 } else { &mut tat }, limit, iv, now, cost);
            let got = q6(&mut c, &with(&args!("RL.QUEUE", &kq, limit, iv), &o));
            assert_eq!(got, want, "RL.QUEUE {ctx}");
        }
    }
}

// -------------------------------------------------------------------------- DRYRUN

#[test]
fn dryrun_creates_and_changes_nothing() {
    let srv = Server::start();
    let mut c = srv.con();
    clock_set(&mut c, T0 + 1_234);
    let cmds = [
        args!("RL.FIXED", "d:f", 3, 60_000),
        args!("RL.LOG", "d:l", 3, 60_000),
        args!("RL.QUEUE", "d:q", 3, 1_000),
        args!("RL.ACQUIRE", "d:a", 3, 60_000),
    ];
    for a in &cmds {
        let key = a[1].clone();
        for i in 0..5 {
            let before = snap(&mut c, &key);
            let dry = call(&mut c, &with(a, &["DRYRUN"]));
            let dry_lower = call(&mut c, &with(a, &["dryrun"]));
            assert_eq!(dry, dry_lower);
            assert_eq!(
                snap(&mut c, &key),
                before,
                "{a:?} DRYRUN #{i} changed the key"
            );
            if i == 0 {
                assert!(!exists(&mut c, &key), "{a:?} DRYRUN created the key");
            }
            // The real request then answers exactly what the dry run said (the same
            // token for RL.ACQUIRE, the same delay for RL.QUEUE).
            let real = call(&mut c, a);
            assert_eq!(real, dry, "{a:?} #{i}: DRYRUN {dry:?}, real {real:?}");
            clock_advance(&mut c, 7);
        }
        // Refused by now (limit 3): a dry run says so too, and changes nothing.
        assert_eq!(call(&mut c, &with(a, &["DRYRUN"])).0[0], 0);
    }
    // With COST, in either order.
    for a in &cmds[..3] {
        let k = format!("{}:cost", a[1]);
        let mut b = a.clone();
        b[1] = k.clone();
        let d1 = call(&mut c, &with(&b, &["COST", "2", "DRYRUN"]));
        let d2 = call(&mut c, &with(&b, &["DRYRUN", "COST", "2"]));
        assert_eq!(d1, d2);
        assert!(!exists(&mut c, &k), "{b:?} COST 2 DRYRUN created the key");
        assert_eq!(call(&mut c, &with(&b, &["COST", "2"])), d1);
    }
    assert_eq!(scan_all(&mut c).len(), 7);
}

// ----------------------------------------------------------------------- refused

#[test]
fn refused_requests_change_nothing() {
    let srv = Server::start();
    let mut c = srv.con();
    clock_set(&mut c, T0 + 500);
    let cmds = [
        args!("RL.FIXED", "x:f", 2, 60_000),
        args!("RL.LOG", "x:l", 2, 60_000),
        args!("RL.QUEUE", "x:q", 2, 1_000),
        args!("RL.ACQUIRE", "x:a", 2, 60_000),
    ];
    for a in &cmds {
        assert_eq!(call(&mut c, a).0[0], 1);
        clock_advance(&mut c, 100);
        assert_eq!(call(&mut c, a).0[0], 1);
        clock_advance(&mut c, 100);
        let before = snap(&mut c, &a[1]);
        let info_before = info_of(&mut c, &a[1]);
        let mut extras: Vec<Vec<&str>> = vec![vec![], vec!["DRYRUN"]];
        if a[0] != "RL.ACQUIRE" {
            extras.push(vec!["COST", "2"]);
            extras.push(vec!["COST", "1"]);
        }
        for x in &extras {
            let r = call(&mut c, &with(a, x));
            assert_eq!(r.0[0], 0, "{a:?} {x:?}");
            assert_eq!(r.0[2], 0, "{a:?} {x:?}: remaining");
            assert!(r.0[3] > 0, "{a:?} {x:?}: retry_after_ms");
            assert_eq!(snap(&mut c, &a[1]), before, "{a:?} {x:?} changed the key");
        }
        let info_after = info_of(&mut c, &a[1]);
        assert_eq!(
            strip(info_after, &["ttl_ms"]),
            strip(info_before, &["ttl_ms"])
        );
    }
}

// -------------------------------------------------------------------- WRONGTYPE

#[test]
fn wrongtype_for_other_types_and_other_algorithms() {
    let srv = Server::start();
    let mut c = srv.con();
    clock_set(&mut c, T0);
    let hour = 3_600_000;
    // One key per algorithm, named after it.
    let makers = [
        ("gcra", args!("RL.GCRA", "gcra", 5, 1, hour)),
        (
            "tokenbucket",
            args!("RL.TOKENBUCKET", "tokenbucket", 5, 1, hour),
        ),
        ("sliding", args!("RL.SLIDING", "sliding", 5, hour)),
        ("fixed", args!("RL.FIXED", "fixed", 5, hour)),
        ("log", args!("RL.LOG", "log", 5, hour)),
        ("queue", args!("RL.QUEUE", "queue", 5, hour)),
        ("concurrency", args!("RL.ACQUIRE", "concurrency", 5, hour)),
    ];
    for (_, a) in &makers {
        assert_eq!(call(&mut c, a).0[0], 1, "{a:?}");
    }
    ok(&mut c, &args!("SET", "str", "hello", "PX", 100_000_000));
    ok(&mut c, &args!("SET", "num", "1700000041000000000"));
    ok(&mut c, &args!("HSET", "hash", "f", "v"));
    ok(&mut c, &args!("RPUSH", "list", "a", "b"));
    ok(&mut c, &args!("SADD", "set", "x"));
    ok(&mut c, &args!("ZADD", "zset", 1, "m"));
    let before = snap_all(&mut c);
    for (key, _) in &makers {
        assert_eq!(info_of(&mut c, key)["algorithm"], *key);
    }
    // The new commands, with their own algorithm's name.
    let cmds: Vec<(&str, Vec<String>)> = vec![
        ("fixed", args!("RL.FIXED", "K", 5, hour)),
        ("log", args!("RL.LOG", "K", 5, hour)),
        ("queue", args!("RL.QUEUE", "K", 5, hour)),
        ("concurrency", args!("RL.ACQUIRE", "K", 5, hour)),
        ("concurrency", args!("RL.RELEASE", "K", tok(T0, 0))),
        ("concurrency", args!("RL.RENEW", "K", tok(T0, 0), 1000)),
        ("gcra", args!("RL.GCRA", "K", 5, 1, hour)),
        ("tokenbucket", args!("RL.TOKENBUCKET", "K", 5, 1, hour)),
        ("sliding", args!("RL.SLIDING", "K", 5, hour)),
    ];
    for (own, a) in &cmds {
        let dry_ok = !matches!(a[0].as_str(), "RL.RELEASE" | "RL.RENEW");
        let variants: Vec<Vec<String>> = if dry_ok {
            vec![a.clone(), with(a, &["DRYRUN"])]
        } else {
            vec![a.clone()]
        };
        for v in variants {
            for key in ["str", "num", "hash", "list", "set", "zset"] {
                let mut x = v.clone();
                x[1] = key.to_string();
                assert_eq!(err(&mut c, &x), ERR_WRONGTYPE, "{x:?}");
            }
            for (algo, _) in &makers {
                if algo == own {
                    continue;
                }
                let mut x = v.clone();
                x[1] = algo.to_string();
                assert_eq!(err(&mut c, &x), other_algo(algo), "{x:?}");
            }
        }
    }
    assert_eq!(snap_all(&mut c), before, "a WRONGTYPE request changed data");
    ping(&mut c);
}

// -------------------------------------------------------------------- bad input

#[test]
fn bad_input_is_refused_and_changes_nothing() {
    let srv = Server::start();
    let mut c = srv.con();
    clock_set(&mut c, T0);
    let hour = 3_600_000;
    for a in [
        args!("RL.FIXED", "f", 3, hour),
        args!("RL.LOG", "l", 3, hour),
        args!("RL.QUEUE", "q", 3, hour),
        args!("RL.ACQUIRE", "a", 3, hour),
    ] {
        assert_eq!(call(&mut c, &a).0[0], 1);
    }
    let before = snap_all(&mut c);
    let tok_a = info_of(&mut c, "a")["last_token"].clone();
    let not_int = ERR_NOT_INT.to_string();
    let syntax = ERR_SYNTAX.to_string();
    let pos = |n: &str| format!("ERR {n} must be a positive integer");
    let span = |n: &str| format!("ERR {n} must be at most 1000000000000");
    let mut cases: Vec<(Vec<String>, String)> = Vec::new();
    // The window commands: limit window_ms.
    for (cmd, key) in [("RL.FIXED", "f"), ("RL.LOG", "l")] {
        cases.push((args!(cmd), arity_err(cmd)));
        cases.push((args!(cmd, key), arity_err(cmd)));
        cases.push((args!(cmd, key, 3), arity_err(cmd)));
        for bad in [
            "abc",
            "1.5",
            "",
            "99999999999999999999",
            "18446744073709551616",
            "1e3",
        ] {
            cases.push((args!(cmd, key, bad, hour), not_int.clone()));
            cases.push((args!(cmd, key, 3, bad), not_int.clone()));
            cases.push((args!(cmd, key, 3, hour, "COST", bad), not_int.clone()));
        }
        for bad in ["0", "-1", "-9223372036854775808"] {
            cases.push((args!(cmd, key, bad, hour), pos("limit")));
            cases.push((args!(cmd, key, 3, bad), pos("window_ms")));
            if bad != "0" {
                // COST 0 is a peek.
                cases.push((
                    args!(cmd, key, 3, hour, "COST", bad),
                    s("ERR cost must not be negative"),
                ));
            }
        }
        cases.push((args!(cmd, key, 3, 1_000_000_000_001i64), span("window_ms")));
        cases.push((
            args!(cmd, key, 3, hour, "COST", 4),
            s("ERR COST must not exceed limit"),
        ));
        cases.push((args!(cmd, key, 3, hour, "COST"), syntax.clone()));
        cases.push((
            args!(cmd, key, 3, hour, "COST", 1, "COST", 1),
            syntax.clone(),
        ));
        cases.push((args!(cmd, key, 3, hour, "DRYRUN", "DRYRUN"), syntax.clone()));
        cases.push((args!(cmd, key, 3, hour, "FOO"), syntax.clone()));
        cases.push((args!(cmd, key, 3, hour, "DRYRUN", "1"), syntax.clone()));
    }
    // RL.QUEUE: capacity interval_ms.
    let q = "RL.QUEUE";
    cases.push((args!(q, "q", 3), arity_err(q)));
    cases.push((args!(q, "q", "x", hour), not_int.clone()));
    cases.push((args!(q, "q", 3, "99999999999999999999"), not_int.clone()));
    cases.push((args!(q, "q", 0, hour), pos("capacity")));
    cases.push((args!(q, "q", -3, hour), pos("capacity")));
    cases.push((args!(q, "q", 3, 0), pos("interval_ms")));
    cases.push((args!(q, "q", 3, -1), pos("interval_ms")));
    cases.push((args!(q, "q", 3, 1_000_000_000_001i64), span("interval_ms")));
    cases.push((
        args!(q, "q", 3, hour, "COST", 4),
        s("ERR COST must not exceed capacity"),
    ));
    cases.push((
        args!(q, "q", 3, hour, "COST", -1),
        s("ERR cost must not be negative"),
    ));
    cases.push((args!(q, "q", 3, hour, "BOGUS"), syntax.clone()));
    // RL.ACQUIRE: limit lease_ms, DRYRUN only.
    let a = "RL.ACQUIRE";
    cases.push((args!(a, "a"), arity_err(a)));
    cases.push((args!(a, "a", 3), arity_err(a)));
    cases.push((args!(a, "a", "x", hour), not_int.clone()));
    cases.push((args!(a, "a", 3, "1.0"), not_int.clone()));
    cases.push((args!(a, "a", 0, hour), pos("limit")));
    cases.push((args!(a, "a", 3, 0), pos("lease_ms")));
    cases.push((args!(a, "a", 3, -100), pos("lease_ms")));
    cases.push((args!(a, "a", 3, 1_000_000_000_001i64), span("lease_ms")));
    cases.push((args!(a, "a", 3, hour, "COST", 1), syntax.clone()));
    cases.push((args!(a, "a", 3, hour, "COST", 2), syntax.clone()));
    cases.push((args!(a, "a", 3, hour, "DRYRUN", "DRYRUN"), syntax.clone()));
    cases.push((args!(a, "a", 3, hour, "X"), syntax.clone()));
    // RL.RELEASE key token, RL.RENEW key token lease_ms.
    let tok_err = s("ERR token must be of the form <unix_ms>-<seq>");
    cases.push((args!("RL.RELEASE", "a"), arity_err("RL.RELEASE")));
    cases.push((args!("RL.RELEASE", "a", &tok_a, 1), arity_err("RL.RELEASE")));
    cases.push((args!("RL.RENEW", "a", &tok_a), arity_err("RL.RENEW")));
    cases.push((args!("RL.RENEW", "a", &tok_a, 1, 1), arity_err("RL.RENEW")));
    for bad in [
        "", "abc", "1", "1-", "-1", "1-x", "x-1", "1-2-3", "1.5-1", "+1-1", "1 -1",
    ] {
        cases.push((args!("RL.RELEASE", "a", bad), tok_err.clone()));
        cases.push((args!("RL.RENEW", "a", bad, 1000), tok_err.clone()));
    }
    cases.push((args!("RL.RENEW", "a", &tok_a, 0), pos("lease_ms")));
    cases.push((args!("RL.RENEW", "a", &tok_a, -5), pos("lease_ms")));
    cases.push((args!("RL.RENEW", "a", &tok_a, "abc"), not_int.clone()));
    cases.push((
        args!("RL.RENEW", "a", &tok_a, 1_000_000_000_001i64),
        span("lease_ms"),
    ));

    for (args, want) in &cases {
        let e = err(&mut c, args);
        assert_eq!(&e, want, "{args:?}");
    }
    // Parameters whose arithmetic would overflow: an error, never a crash.
    let e = err(&mut c, &args!("RL.QUEUE", "q", 2, 1_000_000_000_000i64));
    assert!(e.starts_with("ERR parameters too large"), "{e}");
    assert_eq!(snap_all(&mut c), before, "bad input changed data");
    ping(&mut c);
}

#[test]
fn log_and_acquire_max_limit_configs() {
    let srv = Server::start();
    let mut c = srv.con();
    clock_set(&mut c, T0);
    let get = |c: &mut Connection, name: &str| match ok(c, &args!("CONFIG", "GET", name)) {
        Value::Array(v) if v.len() == 2 => text(&v[1]),
        other => panic!("CONFIG GET {name}: {other:?}"),
    };
    for (cmd, cfg, extra) in [
        ("RL.LOG", "ratelimit.log-max-limit", 60_000),
        ("RL.ACQUIRE", "ratelimit.acquire-max-limit", 60_000),
    ] {
        let above = |max: i64| format!("ERR limit must be at most {max} (config {cfg})");
        assert_eq!(get(&mut c, cfg), "10000");
        let k = format!("{cmd}:k");
        assert_eq!(err(&mut c, &args!(cmd, &k, 10_001, extra)), above(10_000));
        assert!(!exists(&mut c, &k));
        assert_eq!(
            call(&mut c, &args!(cmd, &k, 10_000, extra)).0[..3],
            [1, 10_000, 9_999]
        );
        // CONFIG SET raises it...
        assert_eq!(
            text(&ok(&mut c, &args!("CONFIG", "SET", cfg, 20_000))),
            "OK"
        );
        assert_eq!(get(&mut c, cfg), "20000");
        assert_eq!(
            call(&mut c, &args!(cmd, &k, 10_001, extra)).0[..3],
            [1, 10_001, 9_999]
        );
        assert_eq!(err(&mut c, &args!(cmd, &k, 20_001, extra)), above(20_000));
        // ...and lowers it.
        assert_eq!(text(&ok(&mut c, &args!("CONFIG", "SET", cfg, 5))), "OK");
        let before = snap(&mut c, &k);
        assert_eq!(err(&mut c, &args!(cmd, &k, 6, extra)), above(5));
        assert_eq!(snap(&mut c, &k), before);
        assert_eq!(
            call(&mut c, &args!(cmd, "small", 5, extra)).0[..3],
            [1, 5, 4]
        );
        ok(&mut c, &args!("DEL", "small"));
        // Out of its range 1..1000000: refused, value unchanged.
        for bad in ["0", "-1", "1000001", "abc"] {
            let v = raw(&mut c, &args!("CONFIG", "SET", cfg, bad));
            assert!(
                error_text(&v).is_some(),
                "CONFIG SET {cfg} {bad} answered {v:?}"
            );
            assert_eq!(get(&mut c, cfg), "5");
        }
        assert_eq!(
            text(&ok(&mut c, &args!("CONFIG", "SET", cfg, 10_000))),
            "OK"
        );
    }
    // Each config bounds only its own command.
    ok(
        &mut c,
        &args!("CONFIG", "SET", "ratelimit.log-max-limit", 3),
    );
    assert_eq!(call(&mut c, &args!("RL.ACQUIRE", "z:a", 4, 1000)).0[0], 1);
    assert_eq!(call(&mut c, &args!("RL.FIXED", "z:f", 4, 1000)).0[0], 1);
    assert!(err(&mut c, &args!("RL.LOG", "z:l", 4, 1000)).contains("log-max-limit"));
    ping(&mut c);
}

// ------------------------------------------------------ replication and DEBUG RELOAD

const HOUR: i64 = 3_600_000;
const DAY_MS: i64 = 86_400_000;

/// A workload over keys of the new algorithms with clock moves, leaving varied states.
/// Long windows/leases keep real TTLs in minutes to hours, so nothing expires while a
/// test runs. Returns, per key, the arguments of a dry-run request that observes it.
fn workload(c: &mut Connection, tag: &str) -> BTreeMap<String, Vec<String>> {
    let mut probes = BTreeMap::new();
    let mut add = |k: String, a: Vec<String>| {
        probes.insert(k, a);
    };
    for i in 0..6i64 {
        let (kf, kl, kq, ka) = (
            format!("{tag}f{i}"),
            format!("{tag}l{i}"),
            format!("{tag}q{i}"),
            format!("{tag}a{i}"),
        );
        let mut tokens = Vec::new();
        for j in 0..=i {
            let cost = 1 + (i + j) % 3;
            call(c, &args!("RL.FIXED", &kf, 10, HOUR, "COST", cost));
            call(c, &args!("RL.LOG", &kl, 10, HOUR, "COST", cost));
            call(c, &args!("RL.QUEUE", &kq, 10, 600_000, "COST", cost));
            let (r, t) = acq(c, &args!("RL.ACQUIRE", &ka, 5, HOUR + 1_000 * j));
            if r[0] == 1 {
                tokens.push(t.unwrap());
            }
            clock_advance(c, 1_111 * (j + 1));
        }
        if i % 2 == 1 {
            assert_eq!(lease_op(c, &args!("RL.RELEASE", &ka, &tokens[0])).0, 1);
        }
        if i >= 2 {
            assert_eq!(
                lease_op(c, &args!("RL.RENEW", &ka, &tokens[1], 2 * HOUR)).0,
                1
            );
        }
        add(kf.clone(), args!("RL.FIXED", kf, 10, HOUR, "DRYRUN"));
        add(kl.clone(), args!("RL.LOG", kl, 10, HOUR, "DRYRUN"));
        add(kq.clone(), args!("RL.QUEUE", kq, 10, 600_000, "DRYRUN"));
        add(ka.clone(), args!("RL.ACQUIRE", ka, 5, HOUR, "DRYRUN"));
    }
    // CL.THROTTLE states, one adopted from redis-cell's string state.
    let now_ns = clock_get(c) as i128 * 1_000_000;
    let kc = format!("{tag}cell");
    ok(c, &args!("SET", &kc, now_ns + 1_000_000_000_000));
    let kt = format!("{tag}thr");
    for _ in 0..3 {
        ok(c, &args!("CL.THROTTLE", &kc, 9, 10, 3600));
        ok(c, &args!("CL.THROTTLE", &kt, 9, 7, 3600, 2));
    }
    assert_eq!(key_type(c, &kc), "ratelimit");
    for k in [kc, kt] {
        add(k.clone(), Vec::new());
    }
    probes
}

#[derive(Debug, PartialEq, Eq, Clone)]
struct Durable {
    info: BTreeMap<String, String>,
    pexpiretime: i64,
    digest: String,
}

fn durable_all(c: &mut Connection) -> BTreeMap<String, Durable> {
    let mut out = BTreeMap::new();
    for k in scan_all(c) {
        let m = info(c, &k).unwrap_or_else(|| panic!("RL.INFO {k} nil"));
        out.insert(
            k.clone(),
            Durable {
                // Only ttl_ms (and a token bucket's tokens) read the server's own clock.
                info: strip(m, &["ttl_ms", "tokens"]),
                pexpiretime: pexpiretime(c, &k),
                digest: digest(c, &k),
            },
        );
    }
    out
}

fn assert_same(label: &str, want: &BTreeMap<String, Durable>, got: &BTreeMap<String, Durable>) {
    assert_eq!(
        want.keys().collect::<Vec<_>>(),
        got.keys().collect::<Vec<_>>(),
        "{label}: key sets differ"
    );
    for (k, w) in want {
        assert_eq!(&got[k], w, "{label}: key {k} differs");
    }
}

fn assert_digests_meaningful(d: &BTreeMap<String, Durable>) {
    let distinct: std::collections::BTreeSet<&String> = d.values().map(|x| &x.digest).collect();
    assert!(
        !d.values().any(|x| x.digest.chars().all(|ch| ch == '0')),
        "DEBUG DIGEST-VALUE is all zeros for a module key: {d:?}"
    );
    assert!(
        distinct.len() > d.len() / 2,
        "DEBUG DIGEST-VALUE hardly depends on the state: {} distinct for {} keys",
        distinct.len(),
        d.len()
    );
    for algo in ["fixed", "log", "queue", "concurrency", "gcra"] {
        assert!(
            d.values().any(|x| x.info["algorithm"] == algo),
            "no {algo} key in the workload"
        );
    }
}

#[test]
fn replica_holds_the_new_states_whatever_its_clock() {
    let p = Server::builder()
        .config("repl-ping-replica-period", 3600)
        .start();
    let mut pc = p.con();
    clock_set(&mut pc, T0);
    let r1 = p.start_replica();
    let mut rc1 = r1.con();
    clock_set(&mut rc1, T0 - DAY_MS);
    let probes = workload(&mut pc, "a:");
    sync_replica(&mut pc, &mut rc1);
    // A second replica attached after the workload (full sync), a week ahead.
    let r2 = p.start_replica();
    let mut rc2 = r2.con();
    clock_set(&mut rc2, T0 + 7 * DAY_MS);
    clock_advance(&mut pc, 5_000);
    let more = workload(&mut pc, "b:");
    sync_replica(&mut pc, &mut rc1);
    sync_replica(&mut pc, &mut rc2);

    let want = durable_all(&mut pc);
    assert_eq!(want.len(), probes.len() + more.len());
    assert_digests_meaningful(&want);
    assert_same("replica 1 (a day behind)", &want, &durable_all(&mut rc1));
    assert_same("replica 2 (a week ahead)", &want, &durable_all(&mut rc2));

    // Refused, dry-run, stale RELEASE/RENEW and read-only calls propagate nothing.
    let offset = |c: &mut Connection| info_field(c, "replication", "master_repl_offset").unwrap();
    let o1 = offset(&mut pc);
    for (k, a) in probes.iter().chain(more.iter()) {
        if !a.is_empty() {
            call(&mut pc, a);
        }
        ok(&mut pc, &args!("RL.INFO", k));
    }
    for i in 0..6 {
        let kf = format!("a:f{i}");
        let full = args!("RL.FIXED", &kf, 1, HOUR);
        assert_eq!(call(&mut pc, &full).0[0], 0, "{full:?}");
        let ka = format!("a:a{i}");
        assert_eq!(lease_op(&mut pc, &args!("RL.RELEASE", &ka, tok(1, 0))).0, 0);
        assert_eq!(
            lease_op(&mut pc, &args!("RL.RENEW", &ka, tok(1, 0), 5)).0,
            0
        );
    }
    for a in [
        args!("RL.FIXED", "new:f", 3, HOUR, "DRYRUN"),
        args!("RL.LOG", "new:l", 3, HOUR, "DRYRUN"),
        args!("RL.QUEUE", "new:q", 3, HOUR, "DRYRUN"),
        args!("RL.ACQUIRE", "new:a", 3, HOUR, "DRYRUN"),
    ] {
        assert_eq!(call(&mut pc, &a).0[0], 1);
    }
    assert_eq!(
        lease_op(&mut pc, &args!("RL.RELEASE", "new:a", tok(T0, 0))).0,
        0
    );
    assert_eq!(
        offset(&mut pc),
        o1,
        "refused / dry-run / no-op calls were propagated"
    );
    assert_eq!(scan_all(&mut pc).len(), want.len());
    assert_same("primary after no-op calls", &want, &durable_all(&mut pc));
}

#[test]
fn debug_reload_keeps_the_new_states() {
    let srv = Server::start();
    let mut c = srv.con();
    clock_set(&mut c, T0);
    let probes = workload(&mut c, "");
    let before = durable_all(&mut c);
    assert_eq!(before.len(), probes.len());
    assert_digests_meaningful(&before);
    let names: Vec<String> = probes.keys().cloned().collect();
    let dry_before: Vec<([i64; 5], Vec<Value>)> = probes
        .values()
        .filter(|a| !a.is_empty())
        .map(|a| call(&mut c, a))
        .collect();
    let pttls = |c: &mut Connection| -> Vec<i64> {
        let cmds: Vec<Vec<String>> = names.iter().map(|k| args!("PTTL", k)).collect();
        multi(c, &cmds).iter().map(int).collect()
    };
    let started = std::time::Instant::now();
    let pttl_before = pttls(&mut c);
    assert_eq!(text(&ok(&mut c, &args!("DEBUG", "RELOAD"))), "OK");
    let pttl_after = pttls(&mut c);
    // Short of the first readings by at most the real time between them.
    let gap = i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX) + 2;
    assert_same("after DEBUG RELOAD", &before, &durable_all(&mut c));
    for (i, k) in names.iter().enumerate() {
        let (b, a) = (pttl_before[i], pttl_after[i]);
        assert!(b > 0, "{k}: PTTL {b}");
        assert!(
            a <= b && a >= b - gap,
            "{k}: PTTL {b} before DEBUG RELOAD, {a} after"
        );
    }
    let dry_after: Vec<([i64; 5], Vec<Value>)> = probes
        .values()
        .filter(|a| !a.is_empty())
        .map(|a| call(&mut c, a))
        .collect();
    assert_eq!(
        dry_before, dry_after,
        "the algorithms answer differently after DEBUG RELOAD"
    );
    // And they carry on: the leases are still there to RELEASE.
    let m = info_of(&mut c, "a5");
    let last = m["last_token"].clone();
    assert_eq!(lease_op(&mut c, &args!("RL.RELEASE", "a5", last)).0, 1);
}
