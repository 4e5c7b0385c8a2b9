//! Integration tests of RL.GCRA, RL.TOKENBUCKET and RL.SLIDING on a real redis-server:
//! every reply field across window boundaries (hand-computed), COST, DRYRUN, refused
//! requests, TTL == reset_after_ms, a randomized run checked against an exact model,
//! and concurrent clients. All algorithm time goes through the test clock (RL.CLOCK).

#[macro_use]
mod common;

use common::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redis::Connection;
use std::collections::BTreeMap;
use std::sync::{Arc, Barrier};
use std::thread;

fn is_dryrun(args: &[String]) -> bool {
    args.iter().any(|a| a.eq_ignore_ascii_case("DRYRUN"))
}

/// Run a rate command and PTTL in one MULTI; after an admitted (non-dry-run) request the
/// key's PTTL must equal reset_after_ms (at most 2 ms less: PTTL reads the real clock).
fn rate_ttl(con: &mut Connection, args: &[String]) -> [i64; 5] {
    let key = args[1].clone();
    let out = multi(con, &[args.to_vec(), args!("PTTL", key)]);
    if let Some(e) = error_text(&out[0]) {
        panic!("{args:?} answered the error {e:?}");
    }
    let r = reply5(&out[0]).unwrap_or_else(|m| panic!("{args:?}: {m}"));
    if r[0] == 1 && !is_dryrun(args) {
        let p = int(&out[1]);
        assert_pttl_in_multi(p, r[4], &format!("{args:?} -> {r:?}: reset_after_ms"));
    }
    r
}

fn info_of(con: &mut Connection, key: &str) -> BTreeMap<String, String> {
    info(con, key).unwrap_or_else(|| panic!("RL.INFO {key} is nil"))
}

fn assert_info(con: &mut Connection, key: &str, expected: &[(&str, &str)]) {
    let m = info_of(con, key);
    for (f, v) in expected {
        assert_eq!(
            m.get(*f).map(String::as_str),
            Some(*v),
            "RL.INFO {key} field {f}: {m:?}"
        );
    }
}

fn ns(ms: i64) -> String {
    (ms as i128 * 1_000_000).to_string()
}

// ------------------------------------------------------------------------------ GCRA

#[test]
fn gcra_reply_fields_across_boundaries() {
    let s = Server::start();
    let mut c = s.con();
    clock_set(&mut c, T0);
    let cmd = args!("RL.GCRA", "k", 5, 1, 1000);
    // Fresh key: five admissions, remaining 4..0, reset 1000..5000.
    for i in 1..=5 {
        assert_eq!(
            rate_ttl(&mut c, &cmd),
            [1, 5, 5 - i, 0, 1000 * i],
            "request {i}"
        );
    }
    assert_info(
        &mut c,
        "k",
        &[
            ("algorithm", "gcra"),
            ("burst", "5"),
            ("count", "1"),
            ("period_ms", "1000"),
            ("tat_ns", &ns(T0 + 5000)),
        ],
    );
    assert!(info_of(&mut c, "k").contains_key("ttl_ms"));
    // 6th refused: retry 1000, reset 5000.
    assert_eq!(rate_ttl(&mut c, &cmd), [0, 5, 0, 1000, 5000]);
    clock_advance(&mut c, 999);
    assert_eq!(rate_ttl(&mut c, &cmd), [0, 5, 0, 1, 4001]);
    clock_advance(&mut c, 1);
    assert_eq!(rate_ttl(&mut c, &cmd), [1, 5, 0, 0, 5000]);
    assert_info(&mut c, "k", &[("tat_ns", &ns(T0 + 6000))]);
    // 2500 ms later (now T0+3500, tat T0+6000): admitted, one more left.
    clock_advance(&mut c, 2500);
    assert_eq!(rate_ttl(&mut c, &cmd), [1, 5, 1, 0, 3500]);
    // Long idle: back to a fresh key.
    clock_advance(&mut c, 100_000);
    assert_eq!(rate_ttl(&mut c, &cmd), [1, 5, 4, 0, 1000]);
}

#[test]
fn gcra_non_unit_rates() {
    let s = Server::start();
    let mut c = s.con();
    clock_set(&mut c, T0);
    // burst 3, 2 per 1000 ms: emission interval 500 ms.
    let cmd = args!("RL.GCRA", "half", 3, 2, 1000);
    assert_eq!(rate_ttl(&mut c, &cmd), [1, 3, 2, 0, 500]);
    assert_eq!(rate_ttl(&mut c, &cmd), [1, 3, 1, 0, 1000]);
    assert_eq!(rate_ttl(&mut c, &cmd), [1, 3, 0, 0, 1500]);
    assert_eq!(rate_ttl(&mut c, &cmd), [0, 3, 0, 500, 1500]);
    clock_advance(&mut c, 499);
    assert_eq!(rate_ttl(&mut c, &cmd), [0, 3, 0, 1, 1001]);
    clock_advance(&mut c, 1);
    assert_eq!(rate_ttl(&mut c, &cmd), [1, 3, 0, 0, 1500]);
    assert_info(&mut c, "half", &[("tat_ns", &ns(T0 + 2000))]);

    // burst 2, 3 per 1000 ms: emission interval 333.33.. ms (not a whole ms or µs).
    let t1 = T0 + 10_000_000;
    clock_set(&mut c, t1);
    let cmd = args!("RL.GCRA", "third", 2, 3, 1000);
    assert_eq!(rate_ttl(&mut c, &cmd), [1, 2, 1, 0, 334]);
    assert_eq!(rate_ttl(&mut c, &cmd), [1, 2, 0, 0, 667]);
    // allowed again at tat - burst*T + T = 333.33 ms: retry 334 (rounded up)
    assert_eq!(rate_ttl(&mut c, &cmd), [0, 2, 0, 334, 667]);
    clock_advance(&mut c, 333);
    assert_eq!(rate_ttl(&mut c, &cmd), [0, 2, 0, 1, 334]);
    clock_advance(&mut c, 1);
    // tat becomes 3T = 1000 ms after t1; now t1+334.
    assert_eq!(rate_ttl(&mut c, &cmd), [1, 2, 0, 0, 666]);
}

#[test]
fn gcra_cost() {
    let s = Server::start();
    let mut c = s.con();
    clock_set(&mut c, T0);
    let with_cost = |n: i64| args!("RL.GCRA", "c", 5, 1, 1000, "COST", n);
    assert_eq!(rate_ttl(&mut c, &with_cost(3)), [1, 5, 2, 0, 3000]);
    assert_eq!(rate_ttl(&mut c, &with_cost(3)), [0, 5, 2, 1000, 3000]);
    assert_eq!(rate_ttl(&mut c, &with_cost(2)), [1, 5, 0, 0, 5000]);
    assert_info(&mut c, "c", &[("tat_ns", &ns(T0 + 5000))]);
    clock_advance(&mut c, 2000);
    assert_eq!(rate_ttl(&mut c, &with_cost(2)), [1, 5, 0, 0, 5000]);
    // Whole burst at once: only when the key is back to fresh.
    assert_eq!(rate_ttl(&mut c, &with_cost(5)), [0, 5, 0, 5000, 5000]);
    clock_advance(&mut c, 4999);
    assert_eq!(rate_ttl(&mut c, &with_cost(5)), [0, 5, 4, 1, 1]);
    clock_advance(&mut c, 1);
    assert_eq!(rate_ttl(&mut c, &with_cost(5)), [1, 5, 0, 0, 5000]);
    // COST 1 written out equals the default.
    clock_advance(&mut c, 60_000);
    assert_eq!(rate_ttl(&mut c, &with_cost(1)), [1, 5, 4, 0, 1000]);
    assert_eq!(
        rate_ttl(&mut c, &args!("RL.GCRA", "c", 5, 1, 1000)),
        [1, 5, 3, 0, 2000]
    );
}

// ------------------------------------------------------------------------ TOKENBUCKET

#[test]
fn tokenbucket_reply_fields_and_tokens() {
    let s = Server::start();
    let mut c = s.con();
    clock_set(&mut c, T0);
    let cmd = args!("RL.TOKENBUCKET", "tb", 5, 1, 1000);
    for i in 1..=5 {
        assert_eq!(
            rate_ttl(&mut c, &cmd),
            [1, 5, 5 - i, 0, 1000 * i],
            "request {i}"
        );
        assert_info(&mut c, "tb", &[("tokens", &(5 - i).to_string())]);
    }
    assert_info(
        &mut c,
        "tb",
        &[
            ("algorithm", "tokenbucket"),
            ("capacity", "5"),
            ("refill_tokens", "1"),
            ("refill_period_ms", "1000"),
            ("tokens", "0"),
            ("tat_ns", &ns(T0 + 5000)),
        ],
    );
    assert!(info_of(&mut c, "tb").contains_key("ttl_ms"));
    assert_eq!(rate_ttl(&mut c, &cmd), [0, 5, 0, 1000, 5000]);
    clock_advance(&mut c, 999);
    assert_info(&mut c, "tb", &[("tokens", "0")]);
    assert_eq!(rate_ttl(&mut c, &cmd), [0, 5, 0, 1, 4001]);
    clock_advance(&mut c, 1);
    assert_info(&mut c, "tb", &[("tokens", "1")]);
    assert_eq!(rate_ttl(&mut c, &cmd), [1, 5, 0, 0, 5000]);
    clock_advance(&mut c, 2500);
    assert_info(&mut c, "tb", &[("tokens", "2")]);
    // Capped at capacity however long the idle time.
    clock_advance(&mut c, 100_000);
    assert_info(&mut c, "tb", &[("tokens", "5")]);
    assert_eq!(
        rate_ttl(
            &mut c,
            &args!("RL.TOKENBUCKET", "tb", 5, 1, 1000, "COST", 3)
        ),
        [1, 5, 2, 0, 3000]
    );
    assert_info(&mut c, "tb", &[("tokens", "2")]);
    // 3 tokens per 2000 ms, capacity 4: 666.67 ms per token.
    let cmd = args!("RL.TOKENBUCKET", "tb3", 4, 3, 2000, "COST", 4);
    assert_eq!(rate_ttl(&mut c, &cmd), [1, 4, 0, 0, 2667]);
    clock_advance(&mut c, 1334);
    assert_info(&mut c, "tb3", &[("tokens", "2")]);
    assert_eq!(rate_ttl(&mut c, &cmd), [0, 4, 2, 1333, 1333]);
}

#[test]
fn tokenbucket_decisions_equal_gcra() {
    let s = Server::start();
    let mut c = s.con();
    let mut rng = StdRng::seed_from_u64(0x7b_9c_a1);
    clock_set(&mut c, T0);
    // (capacity/burst, tokens/count, period_ms), including rates with fractional intervals.
    let params = [
        (5, 1, 1000),
        (7, 3, 1000),
        (10, 7, 3000),
        (3, 2, 999),
        (1, 1, 250),
        (20, 13, 1700),
    ];
    for (n, &(cap, per, period)) in params.iter().enumerate() {
        let g = format!("g{n}");
        let t = format!("t{n}");
        let interval = period as f64 / per as f64;
        let mut admitted = 0;
        for step in 0..250 {
            let adv = match rng.gen_range(0..10) {
                0..=3 => 0,
                4..=7 => rng.gen_range(1..=(interval as i64 + 1)),
                _ => rng.gen_range(1..=(interval as i64 * cap + 2)),
            };
            if adv > 0 {
                clock_advance(&mut c, adv);
            }
            let cost = if rng.gen_bool(0.6) {
                1
            } else {
                rng.gen_range(1..=cap)
            };
            let dry = rng.gen_bool(0.15);
            let mut ga = args!("RL.GCRA", g, cap, per, period, "COST", cost);
            let mut ta = args!("RL.TOKENBUCKET", t, cap, per, period, "COST", cost);
            if dry {
                ga.push("DRYRUN".into());
                ta.push("DRYRUN".into());
            }
            let out = multi(&mut c, &[ga.clone(), ta.clone(), args!("RL.INFO", t)]);
            let gr = reply5(&out[0]).unwrap_or_else(|m| panic!("{ga:?}: {m}"));
            let tr = reply5(&out[1]).unwrap_or_else(|m| panic!("{ta:?}: {m}"));
            assert_eq!(
                gr[0], tr[0],
                "params {cap}/{per}/{period} step {step}: allowed differs: gcra {gr:?} tokenbucket {tr:?}"
            );
            assert_eq!(
                gr, tr,
                "params {cap}/{per}/{period} step {step}: replies differ: gcra {gr:?} tokenbucket {tr:?}"
            );
            admitted += gr[0];
            if !dry {
                if let Some(m) = parse_info(&out[2]) {
                    assert_eq!(
                        info_int(&m, "tokens"),
                        tr[2],
                        "step {step}: RL.INFO tokens != remaining of {tr:?}"
                    );
                }
            }
        }
        assert!(
            admitted > 10,
            "schedule too restrictive for {cap}/{per}/{period}"
        );
    }
}

// ---------------------------------------------------------------------------- SLIDING

#[test]
fn sliding_weighted_estimate_across_boundary() {
    let s = Server::start();
    let mut c = s.con();
    clock_set(&mut c, T0);
    let cmd = args!("RL.SLIDING", "s", 10, 1000);
    for i in 1..=10 {
        assert_eq!(
            rate_ttl(&mut c, &cmd),
            [1, 10, 10 - i, 0, 2000],
            "request {i}"
        );
    }
    assert_info(
        &mut c,
        "s",
        &[
            ("algorithm", "sliding"),
            ("limit", "10"),
            ("window_ms", "1000"),
            ("window_start_ms", &T0.to_string()),
            ("previous_count", "0"),
            ("current_count", "10"),
        ],
    );
    assert!(info_of(&mut c, "s").contains_key("ttl_ms"));
    // Full: next window, the estimate 10*(1-f) + 1 <= 10 needs f >= 0.1: 1100 ms.
    assert_eq!(rate_ttl(&mut c, &cmd), [0, 10, 0, 1100, 2000]);
    // 250 ms into the next window: estimate 7.5, so exactly 2 more.
    clock_advance(&mut c, 1250);
    assert_eq!(rate_ttl(&mut c, &cmd), [1, 10, 1, 0, 1750]); // 8.5
    assert_eq!(rate_ttl(&mut c, &cmd), [1, 10, 0, 0, 1750]); // 9.5
                                                             // 10*(1-f) + 2 + 1 <= 10 needs f >= 0.3: 50 ms from now, inside this window.
    assert_eq!(rate_ttl(&mut c, &cmd), [0, 10, 0, 50, 1750]);
    assert_info(
        &mut c,
        "s",
        &[
            ("window_start_ms", &(T0 + 1000).to_string()),
            ("previous_count", "10"),
            ("current_count", "2"),
        ],
    );
    clock_advance(&mut c, 49);
    assert_eq!(rate_ttl(&mut c, &cmd), [0, 10, 0, 1, 1701]);
    clock_advance(&mut c, 1);
    assert_eq!(rate_ttl(&mut c, &cmd), [1, 10, 0, 0, 1700]); // 7 + 3 = 10
                                                             // COST 2 at f = 0.3: 10*(1-f) + 3 + 2 <= 10 needs f >= 0.5: 200 ms, inside this window.
    assert_eq!(
        rate_ttl(&mut c, &args!("RL.SLIDING", "s", 10, 1000, "COST", 2)),
        [0, 10, 0, 200, 1700]
    );
    // Window 2 starts: previous = 3, current = 0.
    clock_advance(&mut c, 700);
    assert_eq!(rate_ttl(&mut c, &cmd), [1, 10, 6, 0, 2000]);
    assert_info(
        &mut c,
        "s",
        &[
            ("window_start_ms", &(T0 + 2000).to_string()),
            ("previous_count", "3"),
            ("current_count", "1"),
        ],
    );
}

#[test]
fn sliding_retry_and_reset_rules() {
    let s = Server::start();
    let mut c = s.con();
    clock_set(&mut c, T0);
    let cmd = args!("RL.SLIDING", "full", 10, 1000);
    for _ in 0..10 {
        rate_ttl(&mut c, &cmd);
    }
    // 50 ms into the next window: current 0, previous 10, estimate 9.5: refused;
    // reset_after = end of the current window (current count is zero).
    clock_advance(&mut c, 1050);
    assert_eq!(rate_ttl(&mut c, &cmd), [0, 10, 0, 50, 950]);
    clock_advance(&mut c, 49);
    assert_eq!(rate_ttl(&mut c, &cmd), [0, 10, 0, 1, 901]);
    clock_advance(&mut c, 1);
    // estimate 9 + 1: admitted; reset = end of the next window.
    assert_eq!(rate_ttl(&mut c, &cmd), [1, 10, 0, 0, 1900]);
    // current 1, previous 10 at f = 0.1: needs 10*(1-f) <= 8: f >= 0.2.
    assert_eq!(rate_ttl(&mut c, &cmd), [0, 10, 0, 100, 1900]);

    // One request mid-window: reset = end of the next window.
    let one = args!("RL.SLIDING", "one", 10, 1000);
    let t1 = T0 + 60_000;
    clock_set(&mut c, t1 + 300);
    assert_eq!(rate_ttl(&mut c, &one), [1, 10, 9, 0, 1700]);
    // Next window, 200 ms in: previous 1 weighs 0.8.
    clock_advance(&mut c, 900);
    assert_eq!(rate_ttl(&mut c, &one), [1, 10, 8, 0, 1800]);
    // Two windows after the last write: both counters are out, fresh again.
    clock_advance(&mut c, 2000);
    assert_eq!(rate_ttl(&mut c, &one), [1, 10, 9, 0, 1800]);

    // Windows aligned to multiples of window_ms since the epoch: T0 % 7000 == 4000.
    let t2 = T0 + 120_000; // t2 % 7000 == (4000 + 120000) % 7000 == 5000
    assert_eq!(t2 % 7000, 5000);
    clock_set(&mut c, t2 - 1000);
    let w7 = args!("RL.SLIDING", "w7", 3, 7000);
    assert_eq!(rate_ttl(&mut c, &w7), [1, 3, 2, 0, 10000]);
    assert_eq!(rate_ttl(&mut c, &w7), [1, 3, 1, 0, 10000]);
    assert_eq!(rate_ttl(&mut c, &w7), [1, 3, 0, 0, 10000]);
    // Next window: 3*(1-f) + 1 <= 3 needs f >= 1/3: 2333.33 ms in -> 3000 + 2334.
    assert_eq!(rate_ttl(&mut c, &w7), [0, 3, 0, 5334, 10000]);
    clock_advance(&mut c, 5333);
    assert_eq!(rate_ttl(&mut c, &w7), [0, 3, 0, 1, 4667]);
    clock_advance(&mut c, 1);
    assert_eq!(rate_ttl(&mut c, &w7), [1, 3, 0, 0, 11666]);
}

#[test]
fn sliding_cost() {
    let s = Server::start();
    let mut c = s.con();
    clock_set(&mut c, T0);
    let with_cost = |n: i64| args!("RL.SLIDING", "sc", 10, 1000, "COST", n);
    assert_eq!(rate_ttl(&mut c, &with_cost(4)), [1, 10, 6, 0, 2000]);
    // 4 + 7 > 10 for the rest of this window; next window 4*(1-f) + 7 <= 10: f >= 0.25.
    assert_eq!(rate_ttl(&mut c, &with_cost(7)), [0, 10, 6, 1250, 2000]);
    assert_eq!(rate_ttl(&mut c, &with_cost(6)), [1, 10, 0, 0, 2000]);
    assert_info(&mut c, "sc", &[("current_count", "10")]);
    // Whole limit at once: only when the current window's 10 are entirely out.
    assert_eq!(rate_ttl(&mut c, &with_cost(10)), [0, 10, 0, 2000, 2000]);
    clock_advance(&mut c, 1999);
    // 999 ms into the next window: estimate 10*0.001, 9 cost-1 requests would fit.
    assert_eq!(rate_ttl(&mut c, &with_cost(10)), [0, 10, 9, 1, 1]);
    clock_advance(&mut c, 1);
    assert_eq!(rate_ttl(&mut c, &with_cost(10)), [1, 10, 0, 0, 2000]);
}

// ------------------------------------------------------- all algorithms: generic rules

/// (command, key prefix, params) for each algorithm, with small limits.
fn algos() -> Vec<(&'static str, Vec<i64>)> {
    vec![
        ("RL.GCRA", vec![4, 1, 1000]),
        ("RL.TOKENBUCKET", vec![4, 1, 1000]),
        ("RL.SLIDING", vec![4, 1000]),
    ]
}

fn build(cmd: &str, key: &str, params: &[i64], cost: Option<i64>, dry: bool) -> Vec<String> {
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

#[test]
fn retry_after_is_exact_for_every_algorithm() {
    let s = Server::start();
    let mut c = s.con();
    clock_set(&mut c, T0);
    let cases: Vec<(&str, Vec<i64>, i64)> = vec![
        ("RL.GCRA", vec![5, 1, 1000], 1),
        ("RL.GCRA", vec![3, 7, 1000], 2),
        ("RL.GCRA", vec![4, 3, 997], 4),
        ("RL.TOKENBUCKET", vec![5, 1, 1000], 1),
        ("RL.TOKENBUCKET", vec![4, 3, 1000], 3),
        ("RL.SLIDING", vec![10, 1000], 1),
        ("RL.SLIDING", vec![7, 1300], 3),
        ("RL.SLIDING", vec![5, 333], 5),
    ];
    for (n, (cmd, params, cost)) in cases.iter().enumerate() {
        let key = format!("r{n}");
        let a = build(cmd, &key, params, Some(*cost), false);
        for round in 0..6 {
            // Spend until refused.
            let mut r = rate_ttl(&mut c, &a);
            let mut guard = 0;
            while r[0] == 1 {
                r = rate_ttl(&mut c, &a);
                guard += 1;
                assert!(guard < 100, "{a:?} never refused");
            }
            let retry = r[3];
            assert!(retry > 0, "{a:?} refused with retry_after {retry}");
            clock_advance(&mut c, retry - 1);
            let early = rate_ttl(&mut c, &a);
            assert_eq!(
                early[0], 0,
                "{a:?} round {round}: admitted {retry}-1 ms after a refusal with retry_after {retry}: {early:?}"
            );
            assert_eq!(early[3], 1, "{a:?}: 1 ms before, retry_after should be 1");
            clock_advance(&mut c, 1);
            let on_time = rate_ttl(&mut c, &a);
            assert_eq!(
                on_time[0], 1,
                "{a:?} round {round}: refused exactly retry_after {retry} ms later: {on_time:?}"
            );
            clock_advance(&mut c, (round * 137) % 700);
        }
    }
}

#[test]
fn dryrun_changes_nothing_and_creates_no_key() {
    let s = Server::start();
    let mut c = s.con();
    clock_set(&mut c, T0);
    for (cmd, params) in algos() {
        // Missing key: answers as if made, creates nothing.
        let key = format!("dry:{cmd}");
        for cost in [None, Some(1), Some(3)] {
            let d = rate_ttl(&mut c, &build(cmd, &key, &params, cost, true));
            assert!(!exists(&mut c, &key), "{cmd} DRYRUN created {key}");
            assert_eq!(info(&mut c, &key), None);
            assert_eq!(d[0], 1, "{cmd} DRYRUN on a fresh key would be admitted");
        }
        let d = rate_ttl(&mut c, &build(cmd, &key, &params, Some(2), true));
        let real = rate_ttl(&mut c, &build(cmd, &key, &params, Some(2), false));
        assert_eq!(
            d, real,
            "{cmd}: DRYRUN reply differs from the real request's"
        );
        assert!(exists(&mut c, &key));
        // Existing key, admitted and refused dry runs: nothing changes.
        clock_advance(&mut c, 300);
        for cost in [1, 2, 3, 4] {
            let before = snap(&mut c, &key);
            let d = rate_ttl(&mut c, &build(cmd, &key, &params, Some(cost), true));
            assert_eq!(
                snap(&mut c, &key),
                before,
                "{cmd} DRYRUN COST {cost} changed the key"
            );
            let d2 = rate_ttl(&mut c, &build(cmd, &key, &params, Some(cost), true));
            assert_eq!(d, d2, "{cmd}: two DRYRUNs differ");
        }
        // The dry run predicts the real request exactly, admitted or refused.
        for cost in [2, 1, 1, 4] {
            let d = rate_ttl(&mut c, &build(cmd, &key, &params, Some(cost), true));
            let real = rate_ttl(&mut c, &build(cmd, &key, &params, Some(cost), false));
            assert_eq!(
                d, real,
                "{cmd} COST {cost}: DRYRUN reply differs from the real one"
            );
        }
        // Option order does not matter.
        let mut a = args!(cmd, key);
        a.extend(params.iter().map(|p| p.to_string()));
        a.extend(args!("DRYRUN", "COST", 2));
        let before = snap(&mut c, &key);
        assert_eq!(
            rate_ttl(&mut c, &a),
            rate_ttl(&mut c, &build(cmd, &key, &params, Some(2), true))
        );
        assert_eq!(snap(&mut c, &key), before);
    }
}

#[test]
fn refused_request_changes_nothing() {
    let s = Server::start();
    let mut c = s.con();
    clock_set(&mut c, T0);
    for (cmd, params) in algos() {
        let key = format!("ref:{cmd}");
        let a = build(cmd, &key, &params, None, false);
        while rate_ttl(&mut c, &a)[0] == 1 {}
        clock_advance(&mut c, 100);
        let before = snap(&mut c, &key);
        let started = std::time::Instant::now();
        let pttl_before = pttl(&mut c, &key);
        let first = rate_ttl(&mut c, &a);
        assert_eq!(first[0], 0);
        for cost in [None, Some(1), Some(2), Some(4)] {
            let r = rate_ttl(&mut c, &build(cmd, &key, &params, cost, false));
            assert_eq!(r[0], 0, "{cmd} COST {cost:?} should be refused");
            assert_eq!(
                snap(&mut c, &key),
                before,
                "{cmd}: a refused request changed the key"
            );
        }
        // Refusals did not spend anything: the same request is refused identically.
        assert_eq!(rate_ttl(&mut c, &a), first);
        let pttl_after = pttl(&mut c, &key);
        // Short of the first reading by at most the real time between them.
        let gap = i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX) + 2;
        assert!(
            pttl_after <= pttl_before && pttl_after >= pttl_before - gap,
            "{cmd}: PTTL {pttl_before} -> {pttl_after} after refusals"
        );
    }
}

#[test]
fn pttl_equals_reset_after_on_every_admission() {
    let s = Server::start();
    let mut c = s.con();
    let mut rng = StdRng::seed_from_u64(42);
    clock_set(&mut c, T0 + 123);
    let cases: Vec<(&str, Vec<i64>)> = vec![
        ("RL.GCRA", vec![6, 2, 1000]),
        ("RL.GCRA", vec![3, 3, 1000]),
        ("RL.TOKENBUCKET", vec![6, 5, 1500]),
        ("RL.SLIDING", vec![6, 1000]),
        ("RL.SLIDING", vec![4, 777]),
    ];
    let mut admitted = 0;
    for _ in 0..300 {
        let (cmd, params) = &cases[rng.gen_range(0..cases.len())];
        let key = format!("p:{cmd}:{}", params[0]);
        let cost = rng.gen_range(1..=2);
        let r = rate_ttl(&mut c, &build(cmd, &key, params, Some(cost), false));
        if r[0] == 1 {
            assert!(r[4] > 0, "{cmd}: admitted with reset_after_ms 0: {r:?}");
            admitted += 1;
        }
        clock_advance(&mut c, rng.gen_range(0..400));
    }
    assert!(admitted > 50);
}

// Rule changes and clock jumps back: tests/clock.rs.

// ------------------------------------------------------------- randomized model run

#[derive(Clone, Copy, Debug, PartialEq)]
enum Alg {
    Gcra,
    Tb,
    Sliding,
}

#[derive(Clone, Debug)]
struct Cfg {
    alg: Alg,
    p: Vec<i64>,
}

impl Cfg {
    fn limit(&self) -> i64 {
        self.p[0]
    }

    fn cmd(&self, key: &str, cost: i64, explicit_cost: bool, dry: bool) -> Vec<String> {
        let name = match self.alg {
            Alg::Gcra => "RL.GCRA",
            Alg::Tb => "RL.TOKENBUCKET",
            Alg::Sliding => "RL.SLIDING",
        };
        build(
            name,
            key,
            &self.p,
            if explicit_cost || cost != 1 {
                Some(cost)
            } else {
                None
            },
            dry,
        )
    }
}

fn ceil_div(a: i128, b: i128) -> i128 {
    assert!(b > 0);
    -((-a).div_euclid(b))
}

/// GCRA / token bucket, exact in ns (the test only uses intervals that are whole µs).
/// Returns the reply and, if admitted, the new theoretical arrival time.
fn gcra_model(p: &[i64], tat: Option<i128>, now_ms: i64, cost: i64) -> ([i64; 5], Option<i128>) {
    let (burst, count, period) = (p[0] as i128, p[1] as i128, p[2] as i128);
    let t = period * 1_000_000 / count;
    assert_eq!(
        t * count,
        period * 1_000_000,
        "test uses exact intervals only"
    );
    let now = now_ms as i128 * 1_000_000;
    let cost = cost as i128;
    let tat = tat.unwrap_or(now).max(now);
    let new_tat = tat + cost * t;
    let allow_at = new_tat - burst * t;
    if allow_at <= now {
        let remaining = (now + burst * t - new_tat).div_euclid(t);
        let reset = ceil_div(new_tat - now, 1_000_000);
        (
            [1, burst as i64, remaining as i64, 0, reset as i64],
            Some(new_tat),
        )
    } else {
        let remaining = (now + burst * t - tat).div_euclid(t).max(0);
        let retry = ceil_div(allow_at - now, 1_000_000);
        let reset = ceil_div(tat - now, 1_000_000);
        (
            [
                0,
                burst as i64,
                remaining as i64,
                retry as i64,
                reset as i64,
            ],
            None,
        )
    }
}

fn tokens_model(p: &[i64], tat: i128, now_ms: i64) -> i64 {
    let (cap, count, period) = (p[0] as i128, p[1] as i128, p[2] as i128);
    let t = period * 1_000_000 / count;
    let now = now_ms as i128 * 1_000_000;
    ((now + cap * t - tat.max(now)).div_euclid(t)).clamp(0, cap) as i64
}

/// Sliding window counter, exact, per the contract. State: (window_start_ms, previous,
/// current). Returns the reply and, if admitted, the new state.
fn sliding_model(
    p: &[i64],
    state: Option<(i64, i64, i64)>,
    now: i64,
    cost: i64,
) -> ([i64; 5], Option<(i64, i64, i64)>) {
    let (l, w) = (p[0] as i128, p[1] as i128);
    let now_i = now as i128;
    let cs = now_i.div_euclid(w) * w;
    let (prev, cur) = match state {
        Some((ws, pc, cc)) if ws as i128 == cs => (pc as i128, cc as i128),
        Some((ws, _, cc)) if ws as i128 == cs - w => (cc as i128, 0),
        _ => (0, 0),
    };
    let e = now_i - cs;
    let cost = cost as i128;
    let est_w = prev * (w - e) + cur * w; // estimate * window
    if est_w + cost * w <= l * w {
        let cur2 = cur + cost;
        let remaining = (l * w - prev * (w - e) - cur2 * w).div_euclid(w);
        let reset = cs + 2 * w - now_i;
        (
            [1, l as i64, remaining as i64, 0, reset as i64],
            Some((cs as i64, prev as i64, cur2 as i64)),
        )
    } else {
        let remaining = (l * w - est_w).div_euclid(w).max(0);
        let reset = if cur > 0 {
            cs + 2 * w - now_i
        } else if prev > 0 {
            cs + w - now_i
        } else {
            0
        };
        let retry = if cur + cost <= l {
            // Inside this window: prev*(w - t) <= (l - cur - cost)*w.
            ceil_div(w * (prev - (l - cur - cost)), prev) - e
        } else {
            // Next window: cur*(w - t) <= (l - cost)*w.
            (cs + w - now_i) + ceil_div(w * (cur - (l - cost)), cur)
        };
        (
            [0, l as i64, remaining as i64, retry as i64, reset as i64],
            None,
        )
    }
}

fn random_cfg(rng: &mut StdRng, i: usize) -> Cfg {
    let alg = [Alg::Gcra, Alg::Tb, Alg::Sliding][i % 3];
    let limit = if rng.gen_bool(0.2) {
        rng.gen_range(1..=3)
    } else {
        rng.gen_range(1..=20)
    };
    let p = match alg {
        Alg::Gcra | Alg::Tb => {
            let count = [1, 2, 4, 5, 8, 10][rng.gen_range(0..6)];
            let period = rng.gen_range(1..=3000);
            vec![limit, count, period]
        }
        Alg::Sliding => {
            let window = match rng.gen_range(0..10) {
                0 => rng.gen_range(1..=20),
                1 => 1000,
                _ => rng.gen_range(100..=3000),
            };
            vec![limit, window]
        }
    };
    Cfg { alg, p }
}

#[test]
fn randomized_run_matches_model_and_no_key_lacks_ttl() {
    let s = Server::start();
    let mut c = s.con();
    let mut rng = StdRng::seed_from_u64(0x5EED_2024);
    let mut now = T0;
    clock_set(&mut c, now);
    let cfgs: Vec<Cfg> = (0..200).map(|i| random_cfg(&mut rng, i)).collect();
    let mut admitted = 0;
    let mut refused = 0;
    for step in 0..4000 {
        let adv = match rng.gen_range(0..20) {
            0..=9 => 0,
            10..=15 => rng.gen_range(1..=20),
            16..=18 => rng.gen_range(21..=500),
            _ => rng.gen_range(501..=5000),
        };
        if adv > 0 {
            clock_advance(&mut c, adv);
            now += adv;
        }
        // Mostly a hot subset, so that keys fill up and get refused.
        let i = if rng.gen_bool(0.7) {
            rng.gen_range(0..20)
        } else {
            rng.gen_range(0..cfgs.len())
        };
        let cfg = &cfgs[i];
        let key = format!("rk:{i}");
        let cost = if rng.gen_bool(0.7) {
            1
        } else {
            rng.gen_range(1..=cfg.limit())
        };
        let dry = rng.gen_bool(0.15);
        let cmd = cfg.cmd(&key, cost, rng.gen_bool(0.5), dry);
        let out = multi(
            &mut c,
            &[
                args!("EXISTS", key),
                args!("PEXPIRETIME", key),
                args!("RL.INFO", key),
                cmd.clone(),
                args!("PTTL", key),
                args!("PEXPIRETIME", key),
                args!("RL.INFO", key),
                args!("EXISTS", key),
            ],
        );
        let ctx_s = format!(
            "step {step} now {now} {cmd:?} cfg {cfg:?} before {:?}",
            out[2]
        );
        let ctx = || ctx_s.clone();
        if let Some(e) = error_text(&out[3]) {
            panic!("{}: error {e}", ctx());
        }
        let got = reply5(&out[3]).unwrap_or_else(|m| panic!("{}: {m}", ctx()));
        let before = parse_info(&out[2]);
        let after = parse_info(&out[6]);
        assert_eq!(int(&out[0]) == 1, before.is_some(), "{}", ctx());
        // Model.
        match cfg.alg {
            Alg::Gcra | Alg::Tb => {
                let tat = before
                    .as_ref()
                    .map(|m| m["tat_ns"].parse::<i128>().expect("tat_ns"));
                let (want, new_tat) = gcra_model(&cfg.p, tat, now, cost);
                assert_eq!(got, want, "{}", ctx());
                if let (Some(nt), false) = (new_tat, dry) {
                    let m = after
                        .as_ref()
                        .unwrap_or_else(|| panic!("{}: no key", ctx()));
                    assert_eq!(m["tat_ns"], nt.to_string(), "{}: tat_ns", ctx());
                    let names: [&str; 4] = if cfg.alg == Alg::Gcra {
                        ["gcra", "burst", "count", "period_ms"]
                    } else {
                        [
                            "tokenbucket",
                            "capacity",
                            "refill_tokens",
                            "refill_period_ms",
                        ]
                    };
                    assert_eq!(m["algorithm"], names[0], "{}", ctx());
                    for (f, v) in names[1..].iter().zip(&cfg.p) {
                        assert_eq!(m[*f], v.to_string(), "{}: field {f}", ctx());
                    }
                    if cfg.alg == Alg::Tb {
                        assert_eq!(
                            info_int(m, "tokens"),
                            tokens_model(&cfg.p, nt, now),
                            "{}: tokens",
                            ctx()
                        );
                        assert_eq!(info_int(m, "tokens"), got[2], "{}: tokens", ctx());
                    }
                }
            }
            Alg::Sliding => {
                let st = before.as_ref().map(|m| {
                    (
                        info_int(m, "window_start_ms"),
                        info_int(m, "previous_count"),
                        info_int(m, "current_count"),
                    )
                });
                let (want, new_state) = sliding_model(&cfg.p, st, now, cost);
                assert_eq!(got, want, "{}", ctx());
                if let (Some(ns), false) = (new_state, dry) {
                    let m = after
                        .as_ref()
                        .unwrap_or_else(|| panic!("{}: no key", ctx()));
                    assert_eq!(m["algorithm"], "sliding");
                    assert_eq!(info_int(m, "limit"), cfg.p[0]);
                    assert_eq!(info_int(m, "window_ms"), cfg.p[1]);
                    let got_state = (
                        info_int(m, "window_start_ms"),
                        info_int(m, "previous_count"),
                        info_int(m, "current_count"),
                    );
                    assert_eq!(got_state, ns, "{}: stored state", ctx());
                }
            }
        }
        // Effects.
        if got[0] == 1 && !dry {
            admitted += 1;
            assert_eq!(int(&out[7]), 1, "{}: admitted but no key", ctx());
            let p = int(&out[4]);
            assert!(
                p <= got[4] && p >= got[4] - 2,
                "{}: PTTL {p} != reset_after_ms {}",
                ctx(),
                got[4]
            );
            let m = after.unwrap();
            let ttl = info_int(&m, "ttl_ms");
            assert!((ttl - p).abs() <= 1, "{}: ttl_ms {ttl} vs PTTL {p}", ctx());
        } else {
            if got[0] == 0 {
                refused += 1;
            }
            assert_eq!(out[0], out[7], "{}: existence changed", ctx());
            assert_eq!(out[1], out[5], "{}: PEXPIRETIME changed", ctx());
            assert_eq!(
                before.map(|m| strip(m, &["ttl_ms"])),
                after.map(|m| strip(m, &["ttl_ms"])),
                "{}: state changed",
                ctx()
            );
        }
        // Sometimes: the same request is refused at retry_after - 1 and admitted at
        // retry_after (dry runs, in one MULTI so no real-time expiry can interfere).
        if got[0] == 0 && rng.gen_bool(0.3) {
            let r = got[3];
            let dcmd = cfg.cmd(&key, cost, true, true);
            let o = multi(
                &mut c,
                &[
                    args!("EXISTS", key),
                    args!("RL.CLOCK", "ADVANCE", r - 1),
                    dcmd.clone(),
                    args!("RL.CLOCK", "ADVANCE", 1),
                    dcmd.clone(),
                ],
            );
            now += r;
            if int(&o[0]) == 1 {
                let early = reply5(&o[2]).unwrap();
                let late = reply5(&o[4]).unwrap();
                assert_eq!(
                    early[0],
                    0,
                    "{}: admitted at retry_after-1: {early:?}",
                    ctx()
                );
                assert_eq!(late[0], 1, "{}: refused at retry_after: {late:?}", ctx());
            }
        }
    }
    assert!(
        admitted > 500 && refused > 100,
        "admitted {admitted} refused {refused}"
    );
    assert_eq!(clock_get(&mut c), now);
    // No key anywhere without a TTL.
    let keys = scan_all(&mut c);
    assert!(!keys.is_empty(), "no key left to check");
    for k in &keys {
        let p = pttl(&mut c, k);
        assert_ne!(p, -1, "key {k} has no TTL");
    }
}

// ------------------------------------------------------------------------ concurrency

/// 50 clients, each on its own connection, fire `per_client` requests at one key at a
/// frozen clock. Returns the `remaining` of every admitted request.
fn hammer(args: Vec<String>, per_client: usize) -> (usize, Vec<i64>) {
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

#[test]
fn concurrent_clients_gcra_exactly_burst() {
    let (_, remaining) = hammer(args!("RL.GCRA", "hot", 10, 1, 60000), 6);
    assert_eq!(remaining.len(), 10, "admissions: {remaining:?}");
    assert_eq!(remaining, (0..10).collect::<Vec<_>>());
}

#[test]
fn concurrent_clients_tokenbucket_exactly_capacity() {
    let (_, remaining) = hammer(args!("RL.TOKENBUCKET", "hot", 10, 1, 60000), 6);
    assert_eq!(remaining, (0..10).collect::<Vec<_>>());
}

#[test]
fn concurrent_clients_sliding_exactly_limit() {
    let (_, remaining) = hammer(args!("RL.SLIDING", "hot", 10, 60000), 6);
    assert_eq!(remaining.len(), 10, "admissions: {remaining:?}");
    assert_eq!(remaining, (0..10).collect::<Vec<_>>());
}

// ----------------------------------------------------------------------------- clock

#[test]
fn test_clock_get_set_advance_real() {
    let s = Server::start();
    let mut c = s.con();
    clock_set(&mut c, T0);
    thread::sleep(std::time::Duration::from_millis(20));
    assert_eq!(clock_get(&mut c), T0, "SET freezes the clock");
    clock_advance(&mut c, 1500);
    assert_eq!(clock_get(&mut c), T0 + 1500);
    clock_advance(&mut c, -500);
    assert_eq!(clock_get(&mut c), T0 + 1000);
    ok(&mut c, &args!("RL.CLOCK", "REAL"));
    let real = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let got = clock_get(&mut c);
    assert!(
        (got - real).abs() < 5000,
        "REAL: module clock {got}, system {real}"
    );
    // The real clock works for the rate commands too.
    let r = rate_ttl(&mut c, &args!("RL.GCRA", "real", 5, 1, 1000));
    assert_eq!(r, [1, 5, 4, 0, 1000]);
}
