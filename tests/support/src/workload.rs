//! A deterministic workload that leaves a state of every algorithm (and of CL.THROTTLE) in
//! varied shapes, and the helpers that read back everything durable about a key: RL.INFO,
//! PEXPIRETIME, DEBUG DIGEST-VALUE and DRYRUN replies. Generic over the connection, so the
//! same code runs on a plain connection and on a cluster connection. Also two workloads
//! on one server, over subsets of the algorithms, that leave the states in other shapes.
//! `rl_testkit::workload`.
//!
//! The workload runs on the test clock (the caller sets it, e.g. `RL.CLOCK SET T0`) and
//! moves it forward; every TTL it leaves is minutes long, so nothing expires while a
//! test runs.

use crate::rate::{acq, call, lease_op};
use crate::*;
use redis::{Connection, ConnectionLike, Value};
use std::collections::{BTreeMap, BTreeSet};

/// Runs a command that must not fail; the raw reply. Works on any connection, also a
/// cluster connection (which follows MOVED / ASK itself).
pub fn run<C: ConnectionLike>(c: &mut C, args: &[String]) -> Value {
    let mut cmd = redis::cmd(&args[0]);
    for a in &args[1..] {
        cmd.arg(a.as_str());
    }
    match c.req_command(&cmd) {
        Ok(v) => {
            if let Some(e) = error_text(&v) {
                panic!("{args:?} answered the error {e:?}");
            }
            v
        }
        Err(e) => panic!("{args:?} failed: {e}"),
    }
}

/// Runs a command; `Err(text)` for a server error (either way the client reports it).
pub fn try_run<C: ConnectionLike>(c: &mut C, args: &[String]) -> Result<Value, String> {
    let mut cmd = redis::cmd(&args[0]);
    for a in &args[1..] {
        cmd.arg(a.as_str());
    }
    match c.req_command(&cmd) {
        Ok(v) => match error_text(&v) {
            Some(e) => Err(e),
            None => Ok(v),
        },
        Err(e) => match (e.code(), e.detail()) {
            (Some(code), Some(d)) => Err(format!("{code} {d}")),
            (Some(code), None) => Err(code.to_string()),
            _ => Err(format!("{e}")),
        },
    }
}

/// A reply as a list of texts (integers in decimal, nil as "(nil)").
pub fn flat(v: &Value) -> Vec<String> {
    match v {
        Value::Array(items) => items.iter().map(text).collect(),
        other => vec![text(other)],
    }
}

/// Per key, the request whose DRYRUN shows where the key stands (None for CL.THROTTLE,
/// which has no DRYRUN).
pub type Probes = BTreeMap<String, Option<Vec<String>>>;

/// Leaves states of every algorithm under keys starting with `p` (which may carry a hash
/// tag, e.g. `{mv}:`). Moves the test clock forward by 25 minutes in all.
pub fn every_algorithm<C: ConnectionLike>(c: &mut C, p: &str) -> Probes {
    let mut probes = Probes::new();
    let mut go = |c: &mut C, a: Vec<String>, extra: &[&str]| -> Value {
        let mut full = a.clone();
        full.extend(extra.iter().map(|s| s.to_string()));
        let v = run(c, &full);
        if a[0] == "CL.THROTTLE" {
            probes.insert(a[1].clone(), None);
        } else if a[0] != "RL.RELEASE" && a[0] != "RL.RENEW" {
            probes.insert(a[1].clone(), Some(a));
        }
        v
    };
    let adv = |c: &mut C, ms: i64| {
        run(c, &args!("RL.CLOCK", "ADVANCE", ms));
    };
    let k = |s: &str| format!("{p}{s}");
    let mut tokens = Vec::new();
    for round in 0..4i64 {
        let cost = (1 + round % 3).to_string();
        go(
            c,
            args!("RL.GCRA", k("gcra:a"), 10, 3, 600_000),
            &["COST", &cost],
        );
        go(c, args!("RL.GCRA", k("gcra:full"), 5, 1, 600_000), &[]);
        go(c, args!("RL.GCRA", k("gcra:full"), 5, 1, 600_000), &[]);
        go(
            c,
            args!("RL.TOKENBUCKET", k("tb:a"), 20, 7, 600_000),
            &["COST", &cost],
        );
        go(
            c,
            args!("RL.SLIDING", k("sliding:a"), 50, 600_000),
            &["COST", &cost],
        );
        go(
            c,
            args!("RL.FIXED", k("fixed:a"), 40, 600_000),
            &["COST", &cost],
        );
        go(
            c,
            args!("RL.LOG", k("log:a"), 100, 600_000),
            &["COST", &cost],
        );
        go(
            c,
            args!("RL.LOG", k("log:big"), 5000, 1_200_000),
            &["COST", "300"],
        );
        go(c, args!("RL.QUEUE", k("queue:a"), 5, 60_000), &[]);
        let v = go(c, args!("RL.ACQUIRE", k("lease:a"), 6, 600_000), &[]);
        tokens.push(flat(&v)[5].clone());
        go(c, args!("CL.THROTTLE", k("cell:a"), 14, 2, 300), &["2"]);
        adv(c, 1_234 + 1_000 * round);
    }
    // Same millisecond: lease sequence numbers above 0.
    for _ in 0..2 {
        let v = go(c, args!("RL.ACQUIRE", k("lease:a"), 6, 600_000), &[]);
        tokens.push(flat(&v)[5].clone());
    }
    go(c, args!("RL.RELEASE", k("lease:a"), tokens[1]), &[]);
    go(c, args!("RL.RENEW", k("lease:a"), tokens[2], 900_000), &[]);
    // Into the next window of sliding / fixed: previous counts non-zero, some log entries
    // older than others.
    adv(c, 600_000);
    go(
        c,
        args!("RL.SLIDING", k("sliding:a"), 50, 600_000),
        &["COST", "4"],
    );
    go(
        c,
        args!("RL.FIXED", k("fixed:a"), 40, 600_000),
        &["COST", "4"],
    );
    go(c, args!("RL.LOG", k("log:a"), 100, 600_000), &["COST", "5"]);
    go(
        c,
        args!("RL.LOG", k("log:big"), 5000, 1_200_000),
        &["COST", "700"],
    );
    go(
        c,
        args!("RL.GCRA", k("gcra:a"), 10, 3, 600_000),
        &["COST", "2"],
    );
    go(
        c,
        args!("RL.TOKENBUCKET", k("tb:a"), 20, 7, 600_000),
        &["COST", "5"],
    );
    go(
        c,
        args!("RL.QUEUE", k("queue:a"), 5, 60_000),
        &["COST", "2"],
    );
    go(c, args!("RL.ACQUIRE", k("lease:a"), 6, 600_000), &[]);
    go(c, args!("CL.THROTTLE", k("cell:a"), 14, 2, 300), &[]);
    adv(c, 777);
    probes
}

/// Everything durable about a module key.
#[derive(Debug, PartialEq, Eq, Clone)]
pub struct Durable {
    /// RL.INFO without the skipped fields.
    pub info: BTreeMap<String, String>,
    pub pexpiretime: i64,
    pub digest: String,
}

pub fn durable<C: ConnectionLike>(c: &mut C, key: &str, skip: &[&str]) -> Durable {
    let mut info =
        parse_info(&run(c, &args!("RL.INFO", key))).unwrap_or_else(|| panic!("RL.INFO {key}: nil"));
    for f in skip {
        info.remove(*f);
    }
    let pexpiretime = match run(c, &args!("PEXPIRETIME", key)) {
        Value::Int(n) => n,
        other => panic!("PEXPIRETIME {key}: {other:?}"),
    };
    let digest = match run(c, &args!("DEBUG", "DIGEST-VALUE", key)) {
        Value::Array(v) if v.len() == 1 => text(&v[0]),
        other => panic!("DEBUG DIGEST-VALUE {key}: {other:?}"),
    };
    assert!(pexpiretime > 0, "{key} has no expiry: {pexpiretime}");
    Durable {
        info,
        pexpiretime,
        digest,
    }
}

pub fn durable_keys<'a, C: ConnectionLike>(
    c: &mut C,
    keys: impl IntoIterator<Item = &'a String>,
    skip: &[&str],
) -> BTreeMap<String, Durable> {
    keys.into_iter()
        .map(|k| (k.clone(), durable(c, k, skip)))
        .collect()
}

/// The DRYRUN reply of every probe (keys without a probe are left out).
pub fn dry_replies<C: ConnectionLike>(c: &mut C, probes: &Probes) -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    for (k, p) in probes {
        if let Some(a) = p {
            let mut d = a.clone();
            d.push("DRYRUN".into());
            out.insert(k.clone(), flat(&run(c, &d)));
        }
    }
    out
}

/// `want` and `got` hold the same keys with the same values; PEXPIRETIME may differ by
/// `expiry_slack_ms` (0: exactly equal).
pub fn assert_same_durable(
    label: &str,
    want: &BTreeMap<String, Durable>,
    got: &BTreeMap<String, Durable>,
    expiry_slack_ms: i64,
) {
    let wk: Vec<&String> = want.keys().collect();
    let gk: Vec<&String> = got.keys().collect();
    assert_eq!(wk, gk, "{label}: key sets differ");
    for (k, w) in want {
        let g = &got[k];
        assert_eq!(g.info, w.info, "{label}: RL.INFO of {k} differs");
        assert_eq!(
            g.digest, w.digest,
            "{label}: DEBUG DIGEST-VALUE of {k} differs"
        );
        assert!(
            (g.pexpiretime - w.pexpiretime).abs() <= expiry_slack_ms,
            "{label}: PEXPIRETIME of {k}: {} != {} (slack {expiry_slack_ms} ms)",
            g.pexpiretime,
            w.pexpiretime
        );
    }
}

/// Every algorithm (and CL.THROTTLE's gcra) appears among the states.
pub fn assert_every_algorithm(label: &str, d: &BTreeMap<String, Durable>) {
    for a in [
        "gcra",
        "tokenbucket",
        "sliding",
        "fixed",
        "log",
        "queue",
        "concurrency",
    ] {
        assert!(
            d.values()
                .any(|x| x.info.get("algorithm").map(String::as_str) == Some(a)),
            "{label}: no {a} state among {:?}",
            d.keys().collect::<Vec<_>>()
        );
    }
}

// ------------------------------------------------------------- workloads on one server

/// A workload over keys of RL.GCRA, RL.TOKENBUCKET and RL.SLIDING with clock moves, leaving varied states
/// (partly spent, drained, previous-window counts, fractional rates). Long periods keep
/// the real TTLs in minutes, so nothing expires while a test runs. Returns, per key, the
/// arguments of a cost-1 request on it.
pub fn gcra_tb_sliding_workload(c: &mut Connection, tag: &str) -> BTreeMap<String, Vec<String>> {
    let mut keys = BTreeMap::new();
    let mut req = |c: &mut Connection, a: Vec<String>, cost: i64| {
        let mut full = a.clone();
        full.extend(args!("COST", cost));
        let r = rate(c, &full);
        keys.insert(a[1].clone(), a);
        r
    };
    for i in 0..8i64 {
        for _ in 0..=i {
            req(
                c,
                args!("RL.GCRA", format!("{tag}g{i}"), 10, 1 + i % 3, 60000),
                1 + i % 4,
            );
            req(
                c,
                args!("RL.TOKENBUCKET", format!("{tag}t{i}"), 10, 1 + i % 3, 60000),
                1 + i % 4,
            );
            req(
                c,
                args!("RL.SLIDING", format!("{tag}s{i}"), 10, 60000),
                1 + i % 3,
            );
        }
        clock_advance(c, 1_111);
    }
    // Into the next sliding window: previous counts become non-zero.
    clock_advance(c, 61_000);
    for i in (0..8i64).step_by(2) {
        for _ in 0..2 {
            req(
                c,
                args!("RL.GCRA", format!("{tag}g{i}"), 10, 1 + i % 3, 60000),
                2,
            );
            req(
                c,
                args!("RL.TOKENBUCKET", format!("{tag}t{i}"), 10, 1 + i % 3, 60000),
                2,
            );
            req(c, args!("RL.SLIDING", format!("{tag}s{i}"), 10, 60000), 2);
        }
    }
    clock_advance(c, 1_234);
    for _ in 0..4 {
        req(c, args!("RL.GCRA", format!("{tag}gf"), 7, 3, 60000), 1);
        req(
            c,
            args!("RL.TOKENBUCKET", format!("{tag}tf"), 7, 3, 60000),
            1,
        );
        req(c, args!("RL.SLIDING", format!("{tag}sf"), 7, 70000), 2);
    }
    keys
}

/// A workload over keys of RL.FIXED, RL.LOG, RL.QUEUE, RL.ACQUIRE and CL.THROTTLE with clock moves, leaving varied states.
/// Long windows/leases keep real TTLs in minutes to hours, so nothing expires while a
/// test runs. Returns, per key, the arguments of a dry-run request that observes it.
pub fn fixed_log_queue_lease_workload(
    c: &mut Connection,
    tag: &str,
) -> BTreeMap<String, Vec<String>> {
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

/// Everything durable about every key of the database (SCAN), RL.INFO minus `skip`.
pub fn durable_all(c: &mut Connection, skip: &[&str]) -> BTreeMap<String, Durable> {
    let keys = scan_all(c);
    durable_keys(c, &keys, skip)
}

/// `want` and `got` are the same keys with exactly the same durable values.
pub fn assert_same(label: &str, want: &BTreeMap<String, Durable>, got: &BTreeMap<String, Durable>) {
    assert_same_durable(label, want, got, 0);
}

/// The digests are real (the type's digest callback is implemented): not all zeros, and
/// different states digest differently; and every algorithm of `algos` is among them.
pub fn assert_digests_meaningful(d: &BTreeMap<String, Durable>, algos: &[&str]) {
    let distinct: BTreeSet<&String> = d.values().map(|x| &x.digest).collect();
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
    for algo in algos {
        assert!(
            d.values()
                .any(|x| x.info.get("algorithm").map(String::as_str) == Some(*algo)),
            "no {algo} key in the workload"
        );
    }
}

/// The RL.INFO fields read on the reading server's own clock.
pub const CLOCK_FIELDS: &[&str] = &["tokens", "ttl_ms"];

/// The algorithms of `gcra_tb_sliding_workload`.
pub const GCRA_TB_SLIDING: &[&str] = &["gcra", "tokenbucket", "sliding"];
/// The algorithms of `fixed_log_queue_lease_workload` (CL.THROTTLE's state is a gcra).
pub const FIXED_LOG_QUEUE_LEASE: &[&str] = &["fixed", "log", "queue", "concurrency", "gcra"];
