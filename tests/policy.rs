//! Policies (the contract's "Policies: rules stored in the server"): RL.POLICY's
//! subcommands and errors, RL.ALLOW against the rate command with the same rule, version
//! changes carried over by units, rollout and rollback, shadow mode, statistics and the
//! top-keys sketch against an exact count, RL.ALL's POLICY rule, and persistence (DEBUG
//! RELOAD, AOF with and without the RDB preamble, a replica, a failover, a late full sync).

use common::*;
use redis::{Connection, Value};
use rl_testkit as common;
use rl_testkit::args;
use std::collections::BTreeMap;

/// A field/value reply (flat array on RESP2) as a map of its fields' texts.
fn fields(v: &Value) -> BTreeMap<String, String> {
    parse_info(v).unwrap_or_else(|| panic!("not a field/value reply: {v:?}"))
}

fn get(c: &mut Connection, name: &str) -> Option<BTreeMap<String, String>> {
    match raw(c, &args!("RL.POLICY", "GET", name)) {
        Value::Nil => None,
        v => Some(fields(&v)),
    }
}

fn set(c: &mut Connection, a: &[String]) -> i64 {
    let v = raw(c, a);
    match v {
        Value::Int(n) => n,
        other => panic!("{a:?} answered {other:?}"),
    }
}

fn list(c: &mut Connection) -> Vec<BTreeMap<String, String>> {
    match raw(c, &args!("RL.POLICY", "LIST")) {
        Value::Array(v) => v.iter().map(fields).collect(),
        other => panic!("LIST answered {other:?}"),
    }
}

/// `(counters, top keys)` of RL.POLICY STATS.
fn stats(
    c: &mut Connection,
    name: &str,
    reset: bool,
) -> (BTreeMap<String, i64>, Vec<(String, i64)>) {
    let mut a = args!("RL.POLICY", "STATS", name);
    if reset {
        a.push("RESET".into());
    }
    let Value::Array(v) = raw(c, &a) else {
        panic!("STATS answered otherwise")
    };
    let mut m = BTreeMap::new();
    let mut top = Vec::new();
    for pair in v.chunks(2) {
        let k = text(&pair[0]);
        match &pair[1] {
            Value::Int(n) => {
                m.insert(k, *n);
            }
            Value::Array(entries) => {
                for e in entries {
                    let Value::Array(kv) = e else { panic!("{e:?}") };
                    top.push((text(&kv[0]), int(&kv[1])));
                }
            }
            other => panic!("{other:?}"),
        }
    }
    (m, top)
}

fn allow(c: &mut Connection, key: &str, policy: &str, extra: &[&str]) -> Vec<Value> {
    let mut a = args!("RL.ALLOW", key, policy);
    a.extend(extra.iter().map(|s| s.to_string()));
    match raw(c, &a) {
        Value::Array(v) => v,
        other => panic!("{a:?} answered {other:?}"),
    }
}

fn five(v: &[Value]) -> Vec<i64> {
    v.iter().take(5).map(int).collect()
}

#[test]
fn subcommands_and_their_errors() {
    let (_s, mut c) = Server::at_clock(T0);
    assert_eq!(get(&mut c, "api"), None);
    assert_eq!(
        set(
            &mut c,
            &args!("RL.POLICY", "SET", "api", "GCRA", 10, 1, 1000)
        ),
        1
    );
    assert_eq!(
        set(
            &mut c,
            &args!("RL.POLICY", "set", "api", "gcra", 20, 2, 1000)
        ),
        2
    );
    let g = get(&mut c, "api").unwrap();
    assert_eq!(g["name"], "api");
    assert_eq!(g["version"], "2");
    assert_eq!(g["rule"], "GCRA 20 2 1000");
    assert_eq!(g["mode"], "enforce");
    assert_eq!(g["candidate_version"], "0");
    assert_eq!(g["rollout"], "0");
    assert_eq!(g["digest"].len(), 16);
    // Every algorithm, with the rule-level options where the algorithm takes them.
    for (name, rule) in [
        ("p:tb", args!("TOKENBUCKET", 10, 2, 1000)),
        (
            "p:sliding",
            args!("SLIDING", 5, 60000, "STAGGER", "BLOCK", 500),
        ),
        ("p:fixed", args!("FIXED", 5, 60000)),
        ("p:log", args!("LOG", 5, 60000)),
        ("p:queue", args!("QUEUE", 5, 100)),
        ("p:conc", args!("CONCURRENCY", 2, 30000)),
    ] {
        let mut a = args!("RL.POLICY", "SET", name);
        a.extend(rule);
        assert_eq!(set(&mut c, &a), 1, "{a:?}");
    }
    assert_eq!(
        get(&mut c, "p:sliding").unwrap()["rule"],
        "SLIDING 5 60000 STAGGER BLOCK 500"
    );
    // Errors, and nothing changed by them.
    let before = list(&mut c);
    for (a, want) in [
        (
            args!("RL.POLICY", "SET", "bad name", "GCRA", 1, 1, 1),
            "ERR policy name must be",
        ),
        (
            args!("RL.POLICY", "SET", "x", "NOPE", 1, 1, 1),
            "ERR a policy's rule starts with its algorithm",
        ),
        (
            args!("RL.POLICY", "SET", "x", "GCRA", 0, 1, 1000),
            "ERR burst must be a positive integer",
        ),
        (
            args!("RL.POLICY", "SET", "x", "GCRA", 1, 1),
            "ERR syntax error",
        ),
        (
            args!("RL.POLICY", "SET", "x", "GCRA", 1, 1, 1000, "STAGGER"),
            "ERR syntax error",
        ),
        (
            args!("RL.POLICY", "SET", "x", "CONCURRENCY", 1, 1000, "BLOCK", 5),
            "ERR syntax error",
        ),
        (
            args!(
                "RL.POLICY",
                "SET",
                "x",
                "GCRA",
                1,
                1,
                1000,
                "SHADOW",
                "SHADOW"
            ),
            "ERR syntax error",
        ),
        (
            args!("RL.POLICY", "SET", "x", "GCRA", 1, 1, 1000, "ROLLOUT", 0),
            "ERR percent must be between 1 and 100",
        ),
        (
            args!("RL.POLICY", "SET", "x", "GCRA", 1, 1, 1000, "ROLLOUT", 10),
            "ERR ROLLOUT needs a current version",
        ),
        (
            args!("RL.POLICY", "SET", "x", "LOG", 1_000_000, 1000),
            "ERR limit must be at most 10000",
        ),
        (
            args!("RL.POLICY", "ROLLOUT", "api", 50),
            "ERR the policy has no candidate",
        ),
        (
            args!("RL.POLICY", "ROLLOUT", "nope", 50),
            "ERR no such policy 'nope'",
        ),
        (
            args!("RL.POLICY", "ROLLBACK", "p:tb"),
            "ERR the policy has no candidate and no earlier version",
        ),
        (
            args!("RL.POLICY", "HISTORY", "nope"),
            "ERR no such policy 'nope'",
        ),
        (
            args!("RL.POLICY", "STATS", "nope"),
            "ERR no such policy 'nope'",
        ),
        (
            args!("RL.POLICY", "STATS", "api", "NOW"),
            "ERR syntax error",
        ),
        (args!("RL.ALLOW", "k", "nope"), "ERR no such policy 'nope'"),
        (args!("RL.ALLOW", "k", "api", "STAGGER"), "ERR syntax error"),
        (
            args!("RL.ALLOW", "k", "api", "COST", 21),
            "ERR COST must not exceed burst",
        ),
        (
            args!("RL.ALL", 1, "k", "POLICY", "nope"),
            "ERR no such policy 'nope'",
        ),
        (
            args!("RL.ALL", 1, "k", "POLICY", "p:conc"),
            "ERR RL.ALL takes no CONCURRENCY policy",
        ),
    ] {
        let e = err(&mut c, &a);
        assert!(e.starts_with(want), "{a:?}: {e}");
    }
    assert!(!exists(&mut c, "k"), "an unknown policy creates no key");
    assert_eq!(list(&mut c), before);
    assert!(err(&mut c, &args!("RL.POLICY", "GET")).contains("wrong number of arguments"));
    assert!(err(&mut c, &args!("RL.POLICY", "NOPE"))
        .to_lowercase()
        .contains("unknown subcommand"));
    // LIST by name, with a pattern; DEL.
    let names: Vec<String> = list(&mut c).iter().map(|m| m["name"].clone()).collect();
    assert_eq!(
        names,
        [
            "api",
            "p:conc",
            "p:fixed",
            "p:log",
            "p:queue",
            "p:sliding",
            "p:tb"
        ]
    );
    let Value::Array(some) = raw(&mut c, &args!("RL.POLICY", "LIST", "p:[fl]*")) else {
        panic!()
    };
    assert_eq!(some.len(), 2);
    assert_eq!(int(&raw(&mut c, &args!("RL.POLICY", "DEL", "p:fixed"))), 1);
    assert_eq!(int(&raw(&mut c, &args!("RL.POLICY", "DEL", "p:fixed"))), 0);
    assert_eq!(get(&mut c, "p:fixed"), None);
}

#[test]
fn allow_answers_as_the_rate_command_with_the_same_rule() {
    let (_s, mut c) = Server::at_clock(T0);
    type Calls = &'static [&'static [&'static str]];
    let cases: [(&str, Vec<String>, Calls); 5] = [
        (
            "RL.GCRA",
            args!(5, 2, 1000),
            &[
                &[],
                &["COST", "2"],
                &["DRYRUN"],
                &["COST", "0"],
                &["PARTIAL", "COST", "4"],
                &["REFUND", "1"],
                &["RESERVE", "1"],
            ],
        ),
        (
            "RL.TOKENBUCKET",
            args!(5, 2, 1000),
            &[&[], &["COST", "3"], &["COST", "3"]],
        ),
        (
            "RL.SLIDING",
            args!(4, 1000),
            &[&[], &["COST", "2"], &["COST", "2"]],
        ),
        (
            "RL.LOG",
            args!(3, 1000),
            &[&[], &[], &["REFUND", "1"], &[], &[]],
        ),
        ("RL.QUEUE", args!(3, 100), &[&[], &[], &[], &[]]),
    ];
    for (cmd, nums, calls) in cases {
        let algo = &cmd[3..];
        let mut a = args!("RL.POLICY", "SET", algo);
        a.push(algo.to_string());
        a.extend(nums.clone());
        set(&mut c, &a);
        for (i, extra) in calls.iter().enumerate() {
            let mut direct = args!(cmd, format!("direct:{algo}"));
            direct.extend(nums.clone());
            direct.extend(extra.iter().map(|s| s.to_string()));
            let want = raw(&mut c, &direct);
            let got = Value::Array(allow(&mut c, &format!("policy:{algo}"), algo, extra));
            assert_eq!(got, want, "{cmd} call {i} {extra:?}");
            clock_advance(&mut c, 150);
        }
        let d = strip(
            info(&mut c, &format!("direct:{algo}")).unwrap(),
            &["ttl_ms"],
        );
        let p = strip(
            info(&mut c, &format!("policy:{algo}")).unwrap(),
            &["ttl_ms"],
        );
        assert_eq!(d, p, "{cmd}: the same state");
        // The same TTL, but for the real time between the two calls (their expiries are
        // set on the server's clock).
        let (a, b) = (
            pexpiretime(&mut c, &format!("direct:{algo}")),
            pexpiretime(&mut c, &format!("policy:{algo}")),
        );
        assert!((a - b).abs() <= 200, "{cmd}: expiries {a} and {b}");
    }
    // A concurrency policy is RL.ACQUIRE: a lease token.
    set(
        &mut c,
        &args!("RL.POLICY", "SET", "conc", "CONCURRENCY", 1, 30000),
    );
    let r = allow(&mut c, "jobs", "conc", &[]);
    assert_eq!(five(&r)[..3], [1, 1, 0]);
    assert!(matches!(r[5], Value::BulkString(_)));
    let r = allow(&mut c, "jobs", "conc", &[]);
    assert_eq!(r[0], Value::Int(0));
    assert_eq!(r[5], Value::Nil);
}

#[test]
fn a_new_version_carries_the_state_over_by_units() {
    let (_s, mut c) = Server::at_clock(T0);
    set(
        &mut c,
        &args!("RL.POLICY", "SET", "p", "GCRA", 10, 10, 3_600_000),
    );
    for _ in 0..10 {
        assert_eq!(int(&allow(&mut c, "k", "p", &[])[0]), 1);
    }
    assert_eq!(int(&allow(&mut c, "k", "p", &[])[0]), 0);
    // 10 per hour -> 10 per second: the caller who spent 10 is free one second after the
    // change.
    set(
        &mut c,
        &args!("RL.POLICY", "SET", "p", "GCRA", 10, 10, 1000),
    );
    assert_eq!(five(&allow(&mut c, "k", "p", &[]))[..4], [0, 10, 0, 100]);
    clock_advance(&mut c, 1000);
    assert_eq!(five(&allow(&mut c, "k", "p", &[]))[..3], [1, 10, 9]);
    // Another algorithm: the key starts afresh under it (a refusal writes nothing).
    set(&mut c, &args!("RL.POLICY", "SET", "p", "SLIDING", 2, 60000));
    assert_eq!(five(&allow(&mut c, "k", "p", &[]))[..3], [1, 2, 1]);
    assert_eq!(info(&mut c, "k").unwrap()["algorithm"], "sliding");
    // A key of the old algorithm written directly is still refused by a plain command.
    assert!(err(&mut c, &args!("RL.GCRA", "k", 1, 1, 1000)).starts_with("WRONGTYPE"));
    // Not a ratelimit value at all: WRONGTYPE.
    ok(&mut c, &args!("SET", "str", "x"));
    assert!(err(&mut c, &args!("RL.ALLOW", "str", "p")).starts_with("WRONGTYPE"));
}

#[test]
fn rollout_shares_keys_by_a_fixed_hash_and_rollback_restores() {
    let (_s, mut c) = Server::at_clock(T0);
    set(
        &mut c,
        &args!("RL.POLICY", "SET", "p", "GCRA", 100, 1, 1000),
    );
    assert_eq!(
        set(
            &mut c,
            &args!("RL.POLICY", "SET", "p", "GCRA", 7, 1, 1000, "ROLLOUT", 10)
        ),
        2
    );
    let g = get(&mut c, "p").unwrap();
    assert_eq!(
        (
            g["version"].as_str(),
            g["candidate_version"].as_str(),
            g["rollout"].as_str()
        ),
        ("1", "2", "10")
    );
    let n = 2000;
    let limit_of = |c: &mut Connection, k: &str| int(&allow(c, k, "p", &["DRYRUN"])[1]);
    let on: Vec<bool> = (0..n)
        .map(|i| limit_of(&mut c, &format!("user:{i}")) == 7)
        .collect();
    let share = on.iter().filter(|&&b| b).count();
    assert!((140..=260).contains(&share), "10% of {n} keys: {share}");
    // No request sees a mix: a key stays on its version, call after call.
    for (i, &was) in on.iter().enumerate().take(50) {
        let k = format!("user:{i}");
        for _ in 0..3 {
            assert_eq!(limit_of(&mut c, &k) == 7, was);
        }
    }
    // Moving the share only adds keys.
    assert_eq!(
        int(&raw(&mut c, &args!("RL.POLICY", "ROLLOUT", "p", 50))),
        2
    );
    for (i, &was) in on.iter().enumerate().take(400) {
        if was {
            assert_eq!(limit_of(&mut c, &format!("user:{i}")), 7);
        }
    }
    // Rollback drops the candidate.
    assert_eq!(int(&raw(&mut c, &args!("RL.POLICY", "ROLLBACK", "p"))), 1);
    assert!((0..200).all(|i| limit_of(&mut c, &format!("user:{i}")) == 100));
    // A candidate at 100 becomes current; rollback then goes back to the earlier rule as a
    // new version.
    set(
        &mut c,
        &args!("RL.POLICY", "SET", "p", "GCRA", 7, 1, 1000, "ROLLOUT", 30),
    );
    assert_eq!(
        int(&raw(&mut c, &args!("RL.POLICY", "ROLLOUT", "p", 100))),
        3
    );
    assert!((0..100).all(|i| limit_of(&mut c, &format!("user:{i}")) == 7));
    assert_eq!(int(&raw(&mut c, &args!("RL.POLICY", "ROLLBACK", "p"))), 4);
    let g = get(&mut c, "p").unwrap();
    assert_eq!(
        (g["version"].as_str(), g["rule"].as_str()),
        ("4", "GCRA 100 1 1000")
    );
    let Value::Array(h) = raw(&mut c, &args!("RL.POLICY", "HISTORY", "p")) else {
        panic!()
    };
    let h: Vec<_> = h.iter().map(fields).collect();
    let versions: Vec<&str> = h.iter().map(|m| m["version"].as_str()).collect();
    assert_eq!(
        versions,
        ["4", "3", "1"],
        "the dropped candidate never was current"
    );
    assert_eq!(h[0]["status"], "current");
    assert_eq!(h[1]["status"], "previous");
    assert_eq!(h[0]["set_ms"], T0.to_string());
}

#[test]
fn shadow_versions_never_refuse_and_count_what_they_would_have() {
    let (_s, mut c) = Server::at_clock(T0);
    set(
        &mut c,
        &args!("RL.POLICY", "SET", "tight", "GCRA", 2, 1, 60000, "SHADOW"),
    );
    set(
        &mut c,
        &args!("RL.POLICY", "SET", "loose", "GCRA", 100, 1, 1000),
    );
    for _ in 0..5 {
        let r = allow(&mut c, "u1", "tight", &[]);
        assert_eq!(int(&r[0]), 1, "a shadow policy never refuses");
        assert_eq!(int(&r[3]), 0);
    }
    let (m, top) = stats(&mut c, "tight", false);
    assert_eq!(m["requests"], 5);
    assert_eq!(m["admitted"], 2);
    assert_eq!(m["refused"], 0);
    assert_eq!(m["shadow_refusals"], 3);
    assert_eq!(m["units_spent"], 2);
    assert_eq!(top, [("u1".to_string(), 3)]);
    assert_eq!(get(&mut c, "tight").unwrap()["mode"], "shadow");
    // Beside an enforced rule in one RL.ALL: the shadow rule never refuses the call.
    for i in 0..4 {
        let Value::Array(r) = raw(
            &mut c,
            &args!("RL.ALL", 2, "{u2}:a", "{u2}:b", "POLICY", "loose", "POLICY", "tight"),
        ) else {
            panic!()
        };
        assert_eq!((int(&r[0]), int(&r[1])), (1, 0), "call {i}");
    }
    let (m, _) = stats(&mut c, "tight", true);
    assert_eq!(m["shadow_refusals"], 5);
    let (m, top) = stats(&mut c, "tight", false);
    assert_eq!((m["requests"], m["shadow_refusals"]), (0, 0), "RESET");
    assert!(top.is_empty());
    let (m, _) = stats(&mut c, "loose", false);
    assert_eq!((m["requests"], m["admitted"], m["units_spent"]), (4, 4, 4));
}

#[test]
fn the_top_keys_match_an_exact_count_within_the_bound() {
    let (_s, mut c) = Server::at_clock(T0);
    set(
        &mut c,
        &args!("RL.POLICY", "SET", "p", "FIXED", 1, 3_600_000),
    );
    // Key i is refused 3 * i times (after its one admission), among 200 keys refused once.
    let mut exact = BTreeMap::new();
    let mut calls = Vec::new();
    for i in 1..=30 {
        for _ in 0..=(3 * i) {
            calls.push(format!("hot:{i:02}"));
        }
        exact.insert(format!("hot:{i:02}"), 3 * i as i64);
    }
    for i in 0..200 {
        calls.push(format!("cold:{i}"));
        calls.push(format!("cold:{i}"));
    }
    // A fixed interleaving.
    let mut x: u64 = 11;
    for i in (1..calls.len()).rev() {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        calls.swap(i, (x >> 33) as usize % (i + 1));
    }
    let mut pipe = redis::pipe();
    for k in &calls {
        pipe.cmd("RL.ALLOW").arg(k).arg("p").ignore();
    }
    let () = pipe.query(&mut c).unwrap();
    let (m, top) = stats(&mut c, "p", false);
    let refusals = m["refused"];
    assert_eq!(refusals, exact.values().sum::<i64>() + 200);
    let Value::Array(v) = raw(&mut c, &args!("RL.POLICY", "STATS", "p")) else {
        panic!()
    };
    let bound = int(&v[13]);
    assert!(bound <= refusals / 64, "{bound} > {refusals} / 64");
    assert_eq!(top.len(), 10);
    for (k, n) in &top {
        let truth = exact.get(k).copied().unwrap_or(1);
        assert!(
            *n >= truth && *n - truth <= bound,
            "{k}: {n} vs {truth} (bound {bound})"
        );
    }
    // The ten hottest keys are the ten shown.
    let mut want: Vec<&String> = exact.keys().collect();
    want.sort_by_key(|k| -exact[*k]);
    let mut shown: Vec<&String> = top.iter().map(|(k, _)| k).collect();
    shown.sort();
    let mut want: Vec<&String> = want[..10].to_vec();
    want.sort();
    assert_eq!(shown, want);
}

fn definitions(c: &mut Connection) -> Vec<(String, String, String)> {
    list(c)
        .into_iter()
        .map(|m| (m["name"].clone(), m["version"].clone(), m["digest"].clone()))
        .collect()
}

fn some_policies(c: &mut Connection) {
    set(c, &args!("RL.POLICY", "SET", "a", "GCRA", 10, 1, 1000));
    set(
        c,
        &args!(
            "RL.POLICY",
            "SET",
            "a",
            "GCRA",
            5,
            1,
            1000,
            "SHADOW",
            "ROLLOUT",
            25
        ),
    );
    set(c, &args!("RL.POLICY", "SET", "b", "LOG", 5, 60000));
    set(c, &args!("RL.POLICY", "SET", "gone", "FIXED", 5, 60000));
    raw(c, &args!("RL.POLICY", "DEL", "gone"));
}

#[test]
fn policies_survive_debug_reload_and_restarts() {
    let s = Server::builder()
        .config("enable-debug-command", "yes")
        .start();
    let mut c = s.con();
    clock_set(&mut c, T0);
    some_policies(&mut c);
    let want = definitions(&mut c);
    assert_eq!(want.len(), 2);
    let hist = raw(&mut c, &args!("RL.POLICY", "HISTORY", "a"));
    ok(&mut c, &args!("DEBUG", "RELOAD"));
    assert_eq!(definitions(&mut c), want);
    assert_eq!(raw(&mut c, &args!("RL.POLICY", "HISTORY", "a")), hist);
    // An RDB with no policy clears them on load.
    for n in ["a", "b"] {
        raw(&mut c, &args!("RL.POLICY", "DEL", n));
    }
    ok(&mut c, &args!("DEBUG", "RELOAD"));
    assert!(definitions(&mut c).is_empty());
}

fn aof_restart(preamble: &str) {
    let mut s = Server::builder()
        .appendonly()
        .config("aof-use-rdb-preamble", preamble)
        .start();
    let mut c = s.con();
    clock_set(&mut c, T0);
    if preamble == "no" {
        // An AOF rewrite without the RDB preamble could not carry policies: refused.
        let e = err(&mut c, &args!("RL.POLICY", "SET", "a", "GCRA", 10, 1, 1000));
        assert!(e.contains("aof-use-rdb-preamble yes"), "{e}");
        assert!(definitions(&mut c).is_empty());
        return;
    }
    some_policies(&mut c);
    let want = definitions(&mut c);
    // From the AOF's commands, then from its rewritten RDB preamble.
    s.restart();
    let mut c = s.con();
    assert_eq!(definitions(&mut c), want);
    bgrewriteaof(&mut c);
    s.restart();
    let mut c = s.con();
    assert_eq!(definitions(&mut c), want);
}

#[test]
fn policies_survive_an_aof_restart_with_the_rdb_preamble() {
    aof_restart("yes");
}

#[test]
fn without_the_rdb_preamble_a_policy_is_refused_clearly() {
    aof_restart("no");
}

#[test]
fn policies_reach_replicas_and_survive_a_failover() {
    let p = Server::start();
    let mut pc = p.con();
    clock_set(&mut pc, T0);
    // One replica from the start (the stream), one that joins later (the RDB of a full
    // sync).
    let r1 = p.start_replica();
    some_policies(&mut pc);
    let r2 = p.start_replica();
    let want = definitions(&mut pc);
    let mut rc1 = r1.con();
    let mut rc2 = r2.con();
    sync_replica(&mut pc, &mut rc1);
    assert_eq!(definitions(&mut rc1), want);
    assert_eq!(definitions(&mut rc2), want);
    // RL._POLICY is internal.
    assert!(err(&mut pc, &args!("RL._POLICY", "x")).contains("only accepted"));
    // A failover: the replica becomes a primary and enforces the same policy.
    ok(&mut rc1, &args!("REPLICAOF", "NO", "ONE"));
    clock_set(&mut rc1, T0);
    assert_eq!(five(&allow(&mut rc1, "k", "b", &[]))[..3], [1, 5, 4]);
    set(&mut rc1, &args!("RL.POLICY", "SET", "b", "LOG", 9, 60000));
    assert_eq!(get(&mut rc1, "b").unwrap()["version"], "2");
}
