//! `WAIT ms` (the contract's "Waiting for room"): clients blocked in the server until
//! admitted or timed out, on the test clock (no test sleeps for time to pass: it waits for
//! the server to report its waiters, then moves the module clock): arrival order, no
//! barging (a large cost ahead of small ones), requests without WAIT behind waiters,
//! wake-ups by the clock, RELEASE, REFUND and DEL, timeouts, disconnection, CLIENT UNBLOCK,
//! no blocking in MULTI and scripts, the bounds, RL.ALLOW, and replicas holding the
//! primary's states after woken writes.

use common::*;
use redis::{Connection, Value};
use rl_testkit as common;
use rl_testkit::args;
use std::thread::{self, JoinHandle};
use std::time::Duration;

fn waiting(c: &mut Connection) -> i64 {
    info_i64(c, "ratelimit", "ratelimit_waiting_clients")
}

/// Waits until the server holds `n` waiting clients.
fn until_waiting(c: &mut Connection, n: i64) {
    wait_until(
        &format!("{n} waiting clients"),
        Duration::from_secs(20),
        || waiting(c) == n,
    );
}

/// Sends `a` on its own connection in a thread; the reply when it comes.
fn blocked(s: &Server, a: Vec<String>) -> JoinHandle<Value> {
    let mut c = s.con();
    thread::spawn(move || raw(&mut c, &a))
}

fn ints(v: &Value) -> Vec<i64> {
    match v {
        Value::Array(items) => items.iter().map(int).collect(),
        other => panic!("not an array: {other:?}"),
    }
}

#[test]
fn waiters_are_admitted_in_arrival_order_at_the_admissible_instant() {
    let (s, mut c) = Server::at_clock(T0);
    assert_eq!(rate(&mut c, &args!("RL.GCRA", "k", 1, 1, 1000))[0], 1);
    let mut hs = Vec::new();
    for i in 0..3 {
        hs.push(blocked(
            &s,
            args!("RL.GCRA", "k", 1, 1, 1000, "WAIT", 10_000),
        ));
        until_waiting(&mut c, i + 1);
    }
    // Behind the waiters, a request without WAIT is refused as if their units were spent.
    let r = ints(&raw(&mut c, &args!("RL.GCRA", "k", 1, 1, 1000)));
    assert_eq!(r[..4], [0, 1, 0, 4000], "3 units ahead, then this one");
    for (i, h) in hs.into_iter().enumerate() {
        clock_advance(&mut c, 1000);
        let r = ints(&h.join().unwrap());
        assert_eq!(
            r,
            vec![1, 1, 0, 0, 1000, 1000 * (i as i64 + 1)],
            "waiter {i}"
        );
        until_waiting(&mut c, 2 - i as i64);
    }
    let (st, _) = info_stats(&mut c);
    assert_eq!(st, (3, 3, 0));
}

/// `(started, admitted, timed out)`.
fn info_stats(c: &mut Connection) -> ((i64, i64, i64), i64) {
    (
        (
            info_i64(c, "ratelimit", "ratelimit_waits_started"),
            info_i64(c, "ratelimit", "ratelimit_waits_admitted"),
            info_i64(c, "ratelimit", "ratelimit_waits_timed_out"),
        ),
        info_i64(c, "ratelimit", "ratelimit_waits_refused_bounds"),
    )
}

#[test]
fn a_large_cost_is_not_overtaken_by_small_ones() {
    let (s, mut c) = Server::at_clock(T0);
    // 5 tokens, one back a second; 4 spent.
    rate(&mut c, &args!("RL.TOKENBUCKET", "b", 5, 1, 1000, "COST", 4));
    let big = blocked(
        &s,
        args!("RL.TOKENBUCKET", "b", 5, 1, 1000, "COST", 5, "WAIT", 60_000),
    );
    until_waiting(&mut c, 1);
    // One token is there, but the waiter ahead needs it: a small request waits behind.
    let small = blocked(&s, args!("RL.TOKENBUCKET", "b", 5, 1, 1000, "WAIT", 60_000));
    until_waiting(&mut c, 2);
    clock_advance(&mut c, 3000);
    until_waiting(&mut c, 2);
    clock_advance(&mut c, 1000);
    let r = ints(&big.join().unwrap());
    assert_eq!(r[..3], [1, 5, 0]);
    assert_eq!(r[5], 4000);
    until_waiting(&mut c, 1);
    clock_advance(&mut c, 1000);
    let r = ints(&small.join().unwrap());
    assert_eq!((r[0], r[5]), (1, 5000));
}

#[test]
fn timeouts_answer_the_refused_reply_of_that_instant() {
    let (s, mut c) = Server::at_clock(T0);
    rate(&mut c, &args!("RL.GCRA", "k", 1, 1, 10_000));
    let h = blocked(&s, args!("RL.GCRA", "k", 1, 1, 10_000, "WAIT", 2000));
    until_waiting(&mut c, 1);
    clock_advance(&mut c, 2000);
    let r = ints(&h.join().unwrap());
    assert_eq!(r, vec![0, 1, 0, 8000, 8000, 2000]);
    // Nothing was spent: the next request is refused with the same wait.
    assert_eq!(rate(&mut c, &args!("RL.GCRA", "k", 1, 1, 10_000))[3], 8000);
    // Answered at once: admitted, or WAIT 0, with waited_ms 0.
    assert_eq!(
        ints(&raw(
            &mut c,
            &args!("RL.GCRA", "n", 1, 1, 1000, "WAIT", 100)
        )),
        vec![1, 1, 0, 0, 1000, 0]
    );
    assert_eq!(
        ints(&raw(&mut c, &args!("RL.GCRA", "n", 1, 1, 1000, "WAIT", 0)))[..2],
        [0, 1]
    );
}

#[test]
fn release_refund_and_deletion_wake_waiters_at_once() {
    let (s, mut c) = Server::at_clock(T0);
    // RELEASE.
    let Value::Array(a) = raw(&mut c, &args!("RL.ACQUIRE", "jobs", 1, 60_000)) else {
        panic!()
    };
    let token = text(&a[5]);
    let h = blocked(&s, args!("RL.ACQUIRE", "jobs", 1, 60_000, "WAIT", 60_000));
    until_waiting(&mut c, 1);
    assert_eq!(int(&raw(&mut c, &args!("RL.RELEASE", "jobs", token))), 1);
    let Value::Array(r) = h.join().unwrap() else {
        panic!()
    };
    assert_eq!(int(&r[0]), 1);
    assert!(matches!(r[5], Value::BulkString(_)), "a token");
    assert_eq!(int(&r[6]), 0, "waited_ms: no clock move");
    // REFUND.
    rate(&mut c, &args!("RL.FIXED", "f", 2, 60_000, "COST", 2));
    let h = blocked(&s, args!("RL.FIXED", "f", 2, 60_000, "WAIT", 60_000));
    until_waiting(&mut c, 1);
    rate(&mut c, &args!("RL.FIXED", "f", 2, 60_000, "REFUND", 1));
    assert_eq!(ints(&h.join().unwrap())[..3], [1, 2, 0]);
    // DEL: a fresh key.
    rate(&mut c, &args!("RL.SLIDING", "s", 1, 60_000));
    let h = blocked(&s, args!("RL.SLIDING", "s", 1, 60_000, "WAIT", 60_000));
    until_waiting(&mut c, 1);
    assert_eq!(int(&raw(&mut c, &args!("DEL", "s"))), 1);
    assert_eq!(ints(&h.join().unwrap())[..3], [1, 1, 0]);
    // The key's expiry (its TTL runs on the server's clock).
    rate(&mut c, &args!("RL.FIXED", "e", 1, 60_000));
    let h = blocked(&s, args!("RL.FIXED", "e", 1, 60_000, "WAIT", 60_000));
    until_waiting(&mut c, 1);
    raw(&mut c, &args!("PEXPIRE", "e", 1));
    assert_eq!(ints(&h.join().unwrap())[..3], [1, 1, 0]);
}

#[test]
fn disconnection_and_client_unblock_leave_the_queue() {
    let (s, mut c) = Server::at_clock(T0);
    rate(&mut c, &args!("RL.GCRA", "k", 1, 1, 10_000));
    let mut w = s.con();
    let id: i64 = redis::cmd("CLIENT").arg("ID").query(&mut w).unwrap();
    let h = thread::spawn(move || {
        let _ = raw(&mut w, &args!("RL.GCRA", "k", 1, 1, 10_000, "WAIT", 60_000));
    });
    until_waiting(&mut c, 1);
    raw(&mut c, &args!("CLIENT", "KILL", "ID", id));
    until_waiting(&mut c, 0);
    let _ = h.join();
    // Nothing reserved any more: the next unit comes after 10 s, not 20 s.
    assert_eq!(
        rate(&mut c, &args!("RL.GCRA", "k", 1, 1, 10_000))[3],
        10_000
    );
    // CLIENT UNBLOCK: the refused reply of that instant; with ERROR, -UNBLOCKED.
    let mut w = s.con();
    let id: i64 = redis::cmd("CLIENT").arg("ID").query(&mut w).unwrap();
    let h =
        thread::spawn(move || raw(&mut w, &args!("RL.GCRA", "k", 1, 1, 10_000, "WAIT", 60_000)));
    until_waiting(&mut c, 1);
    clock_advance(&mut c, 1000);
    assert_eq!(int(&raw(&mut c, &args!("CLIENT", "UNBLOCK", id))), 1);
    assert_eq!(ints(&h.join().unwrap()), vec![0, 1, 0, 9000, 9000, 1000]);
    let mut w = s.con();
    let id: i64 = redis::cmd("CLIENT").arg("ID").query(&mut w).unwrap();
    let h =
        thread::spawn(move || raw(&mut w, &args!("RL.GCRA", "k", 1, 1, 10_000, "WAIT", 60_000)));
    until_waiting(&mut c, 1);
    assert_eq!(
        int(&raw(&mut c, &args!("CLIENT", "UNBLOCK", id, "ERROR"))),
        1
    );
    let e = error_text(&h.join().unwrap()).unwrap_or_default();
    assert!(e.starts_with("UNBLOCKED"), "{e}");
    until_waiting(&mut c, 0);
}

#[test]
fn where_a_client_cannot_block_wait_is_ignored() {
    let (_s, mut c) = Server::at_clock(T0);
    rate(&mut c, &args!("RL.GCRA", "k", 1, 1, 1000));
    let out = multi(&mut c, &[args!("RL.GCRA", "k", 1, 1, 1000, "WAIT", 5000)]);
    assert_eq!(ints(&out[0]), vec![0, 1, 0, 1000, 1000, 0]);
    let v = raw(
        &mut c,
        &args!(
            "EVAL",
            "return redis.call('RL.GCRA', KEYS[1], 1, 1, 1000, 'WAIT', 5000)",
            1,
            "k"
        ),
    );
    assert_eq!(ints(&v), vec![0, 1, 0, 1000, 1000, 0]);
    assert_eq!(waiting(&mut c), 0);
}

#[test]
fn bounds_and_option_errors() {
    let (s, mut c) = Server::at_clock(T0);
    ok(
        &mut c,
        &args!("CONFIG", "SET", "ratelimit.max-waiters-per-key", 1),
    );
    rate(&mut c, &args!("RL.GCRA", "k", 1, 1, 1000));
    let h = blocked(&s, args!("RL.GCRA", "k", 1, 1, 1000, "WAIT", 60_000));
    until_waiting(&mut c, 1);
    // Beyond the bound: answered at once, refused, counted.
    let r = ints(&raw(
        &mut c,
        &args!("RL.GCRA", "k", 1, 1, 1000, "WAIT", 60_000),
    ));
    assert_eq!((r[0], r[5]), (0, 0));
    assert_eq!(info_stats(&mut c).1, 1);
    clock_advance(&mut c, 1000);
    assert_eq!(
        int(&ints(&h.join().unwrap())
            .first()
            .map(|&x| Value::Int(x))
            .unwrap()),
        1
    );
    for (a, want) in [
        (
            args!("RL.GCRA", "k", 1, 1, 1000, "WAIT", -1),
            "ERR wait_ms must not be negative",
        ),
        (
            args!("RL.GCRA", "k", 1, 1, 1000, "WAIT", 86_400_001),
            "ERR wait_ms must be at most 86400000",
        ),
        (
            args!("RL.GCRA", "k", 1, 1, 1000, "WAIT", 10, "BLOCK", 100),
            "ERR syntax error",
        ),
        (
            args!("RL.GCRA", "k", 1, 1, 1000, "WAIT"),
            "ERR syntax error",
        ),
        (
            args!("RL.GCRA", "k", 1, 1, 1000, "WAIT", 10, "WAIT", 10),
            "ERR syntax error",
        ),
    ] {
        assert_eq!(err(&mut c, &a), want, "{a:?}");
    }
}

#[test]
fn allow_waits_and_replicas_hold_the_woken_writes() {
    let p = Server::start();
    let mut c = p.con();
    clock_set(&mut c, T0);
    let r = p.start_replica();
    let mut rc = r.con();
    ok(
        &mut c,
        &args!("RL.POLICY", "SET", "api", "GCRA", 2, 1, 1000),
    );
    for _ in 0..2 {
        allow_ok(&mut c);
    }
    let h = {
        let mut w = p.con();
        thread::spawn(move || raw(&mut w, &args!("RL.ALLOW", "u", "api", "WAIT", 5000)))
    };
    until_waiting(&mut c, 1);
    clock_advance(&mut c, 1000);
    assert_eq!(ints(&h.join().unwrap()), vec![1, 2, 0, 0, 2000, 1000]);
    sync_replica(&mut c, &mut rc);
    let a = strip(info(&mut c, "u").unwrap(), &["ttl_ms"]);
    let b = strip(info(&mut rc, "u").unwrap(), &["ttl_ms"]);
    assert_eq!(a, b);
    assert_eq!(pexpiretime(&mut c, "u"), pexpiretime(&mut rc, "u"));
}

fn allow_ok(c: &mut Connection) {
    assert_eq!(ints(&raw(c, &args!("RL.ALLOW", "u", "api")))[0], 1);
}

#[test]
fn waiters_wait_through_a_pause_and_resume_wakes_them() {
    let (s, mut c) = Server::at_clock(T0);
    // A vendor said "retry after 2 s": the key is paused; a live call waits through it.
    assert_eq!(int(&raw(&mut c, &args!("RL.PAUSE", "vendor", 2000))), 2000);
    let h = blocked(&s, args!("RL.GCRA", "vendor", 10, 10, 1000, "WAIT", 5000));
    until_waiting(&mut c, 1);
    clock_advance(&mut c, 1000);
    until_waiting(&mut c, 1);
    clock_advance(&mut c, 1000);
    let r = ints(&h.join().unwrap());
    assert_eq!((r[0], r[5]), (1, 2000), "admitted at the pause's end");
    // RL.RESUME wakes a waiter at once.
    raw(&mut c, &args!("RL.PAUSE", "vendor", 60_000));
    let h = blocked(&s, args!("RL.GCRA", "vendor", 10, 10, 1000, "WAIT", 5000));
    until_waiting(&mut c, 1);
    assert_eq!(int(&raw(&mut c, &args!("RL.RESUME", "vendor"))), 1);
    let r = ints(&h.join().unwrap());
    assert_eq!((r[0], r[5]), (1, 0));
    // A pause longer than the wait: out of time, refused with the pause's remaining time.
    raw(&mut c, &args!("RL.PAUSE", "vendor", 10_000));
    let h = blocked(&s, args!("RL.GCRA", "vendor", 10, 10, 1000, "WAIT", 3000));
    until_waiting(&mut c, 1);
    clock_advance(&mut c, 3000);
    let r = ints(&h.join().unwrap());
    assert_eq!((r[0], r[3], r[5]), (0, 7000, 3000));
}

/// An RL.ALL reply: `(allowed, refused_by, each rule's fields, waited_ms)`.
fn all_reply(v: &Value) -> (i64, i64, Vec<Vec<i64>>, Option<i64>) {
    let Value::Array(items) = v else {
        panic!("not an array: {v:?}")
    };
    let mut rules = Vec::new();
    let mut waited = None;
    for it in items.iter().skip(2) {
        match it {
            Value::Array(_) => rules.push(ints(it)),
            other => waited = Some(int(other)),
        }
    }
    (int(&items[0]), int(&items[1]), rules, waited)
}

const ONE_PER_S: [i64; 3] = [1, 1, 1000];

fn gcra_wait(key: &str, wait_ms: i64) -> Vec<String> {
    args!("RL.GCRA", key, 1, 1, 1000, "WAIT", wait_ms)
}

#[test]
fn all_waiters_wait_behind_the_earlier_waiters_of_each_key() {
    let (s, mut c) = Server::at_clock(T0);
    for k in ["a", "b"] {
        assert_eq!(rate(&mut c, &args!("RL.GCRA", k, 1, 1, 1000))[0], 1);
    }
    let [b, n, p] = ONE_PER_S;
    // W1 waits on a; W2 (RL.ALL on a and b) behind W1 on a and first on b; W3 behind W2 on b.
    let w1 = blocked(&s, gcra_wait("a", 10_000));
    until_waiting(&mut c, 1);
    let all = args!("RL.ALL", 2, "a", "b", "GCRA", b, n, p, "GCRA", b, n, p, "WAIT", 10_000);
    let w2 = blocked(&s, all);
    until_waiting(&mut c, 2);
    let w3 = blocked(&s, gcra_wait("b", 10_000));
    until_waiting(&mut c, 3);
    // One unit each on a and b: W1 takes a's; W2 needs a too and waits; W3 has room on b
    // but does not overtake W2.
    clock_advance(&mut c, 1000);
    assert_eq!(ints(&w1.join().unwrap()), vec![1, 1, 0, 0, 1000, 1000]);
    until_waiting(&mut c, 2);
    clock_advance(&mut c, 1000);
    let (allowed, refused_by, rules, waited) = all_reply(&w2.join().unwrap());
    assert_eq!((allowed, refused_by, waited), (1, 0, Some(2000)));
    assert_eq!(rules, vec![vec![1, 1, 0, 0, 1000], vec![1, 1, 0, 0, 1000]]);
    until_waiting(&mut c, 1);
    clock_advance(&mut c, 1000);
    assert_eq!(ints(&w3.join().unwrap()), vec![1, 1, 0, 0, 1000, 3000]);
    let (st, _) = info_stats(&mut c);
    assert_eq!(st, (3, 3, 0));
}

#[test]
fn all_waits_time_out_and_calls_stay_behind_waiters() {
    let (s, mut c) = Server::at_clock(T0);
    rate(&mut c, &args!("RL.GCRA", "a", 1, 1, 1000));
    rate(&mut c, &args!("RL.GCRA", "b", 1, 1, 5000));
    let all = args!("RL.ALL", 2, "a", "b", "GCRA", 1, 1, 1000, "GCRA", 1, 1, 5000, "WAIT", 1500);
    let h = blocked(&s, all.clone());
    until_waiting(&mut c, 1);
    clock_advance(&mut c, 1500);
    // Out of time: the refused reply of that instant (a alone would admit), nothing spent.
    let (allowed, refused_by, rules, waited) = all_reply(&h.join().unwrap());
    assert_eq!((allowed, refused_by, waited), (0, 2, Some(1500)));
    assert_eq!(
        rules,
        vec![vec![1, 1, 0, 0, 1000], vec![0, 1, 0, 3500, 3500]]
    );
    // Where a client cannot block: answered at once, waited_ms 0.
    let out = multi(&mut c, std::slice::from_ref(&all));
    assert_eq!(all_reply(&out[0]).3, Some(0));
    assert_eq!(waiting(&mut c), 0);
    // WAIT 0, and DRYRUN: answered at once; without WAIT there is no waited_ms.
    for tail in [args!("WAIT", 0), args!("DRYRUN", "WAIT", 100)] {
        let mut a = all[..all.len() - 2].to_vec();
        a.extend(tail);
        let (allowed, _, _, waited) = all_reply(&raw(&mut c, &a));
        assert_eq!((allowed, waited), (0, Some(0)), "{a:?}");
    }
    let plain = all[..all.len() - 2].to_vec();
    assert_eq!(all_reply(&raw(&mut c, &plain)).3, None);
    // A call (with or without WAIT) stays behind a key's waiters: x has 1 unit back after
    // 1 s, but a waiter ahead needs 2.
    for _ in 0..3 {
        rate(&mut c, &args!("RL.GCRA", "x", 3, 1, 1000));
    }
    let h = blocked(
        &s,
        args!("RL.GCRA", "x", 3, 1, 1000, "COST", 2, "WAIT", 10_000),
    );
    until_waiting(&mut c, 1);
    clock_advance(&mut c, 1000);
    until_waiting(&mut c, 1);
    let (allowed, refused_by, _, _) =
        all_reply(&raw(&mut c, &args!("RL.ALL", 1, "x", "GCRA", 3, 1, 1000)));
    assert_eq!((allowed, refused_by), (0, 1));
    clock_advance(&mut c, 1000);
    assert_eq!(ints(&h.join().unwrap())[0], 1);
    for (a, want) in [
        (
            args!("RL.ALL", 1, "x", "GCRA", 3, 1, 1000, "WAIT", -1),
            "ERR wait_ms must not be negative",
        ),
        (
            args!("RL.ALL", 1, "x", "GCRA", 3, 1, 1000, "WAIT", 1, "WAIT", 1),
            "ERR syntax error",
        ),
        (
            args!("RL.ALL", 1, "x", "GCRA", 3, 1, 1000, "WAIT"),
            "ERR syntax error",
        ),
    ] {
        assert_eq!(err(&mut c, &a), want, "{a:?}");
    }
}

#[test]
fn all_woken_writes_reach_the_replica() {
    let p = Server::start();
    let mut c = p.con();
    clock_set(&mut c, T0);
    let r = p.start_replica();
    let mut rc = r.con();
    rate(&mut c, &args!("RL.GCRA", "{u}a", 1, 1, 1000));
    let h = {
        let mut w = p.con();
        let a = args!(
            "RL.ALL", 2, "{u}a", "{u}b", "GCRA", 1, 1, 1000, "SLIDING", 5, 60_000, "WAIT", 5000
        );
        thread::spawn(move || raw(&mut w, &a))
    };
    until_waiting(&mut c, 1);
    clock_advance(&mut c, 1000);
    assert_eq!(all_reply(&h.join().unwrap()).0, 1);
    sync_replica(&mut c, &mut rc);
    for k in ["{u}a", "{u}b"] {
        let a = strip(info(&mut c, k).unwrap(), &["ttl_ms"]);
        let b = strip(info(&mut rc, k).unwrap(), &["ttl_ms"]);
        assert_eq!(a, b, "{k}");
        assert_eq!(pexpiretime(&mut c, k), pexpiretime(&mut rc, k), "{k}");
    }
}

#[test]
fn an_operators_change_to_a_policy_wakes_its_waiters() {
    let (s, mut c) = Server::at_clock(T0);
    ok(
        &mut c,
        &args!("RL.POLICY", "SET", "api", "GCRA", 1, 1, 60_000),
    );
    for k in ["{p}u", "{p}v", "{p}w"] {
        assert_eq!(ints(&raw(&mut c, &args!("RL.ALLOW", k, "api")))[0], 1);
    }
    let u = blocked(&s, args!("RL.ALLOW", "{p}u", "api", "WAIT", 30_000));
    until_waiting(&mut c, 1);
    let v = blocked(
        &s,
        args!("RL.ALL", 1, "{p}v", "POLICY", "api", "WAIT", 30_000),
    );
    until_waiting(&mut c, 2);
    // A change that keeps the policy as tight wakes nobody to be refused again...
    ok(
        &mut c,
        &args!("RL.POLICY", "SET", "api", "GCRA", 1, 1, 90_000),
    );
    until_waiting(&mut c, 2);
    // ... one that loosens it admits them at once, under the new version.
    ok(
        &mut c,
        &args!("RL.POLICY", "SET", "api", "GCRA", 5, 1, 60_000),
    );
    let r = ints(&u.join().unwrap());
    assert_eq!((r[0], r[1], r[5]), (1, 5, 0), "{r:?}");
    let (allowed, _, rules, waited) = all_reply(&v.join().unwrap());
    assert_eq!((allowed, rules[0][1], waited), (1, 5, Some(0)));
    // A deleted policy answers its waiters with the error a call gets.
    ok(
        &mut c,
        &args!("RL.POLICY", "SET", "api", "GCRA", 1, 1, 60_000),
    );
    let w = blocked(&s, args!("RL.ALLOW", "{p}w", "api", "WAIT", 30_000));
    until_waiting(&mut c, 1);
    ok(&mut c, &args!("RL.POLICY", "DEL", "api"));
    let e = error_text(&w.join().unwrap()).unwrap_or_default();
    assert!(e.contains("no such policy 'api'"), "{e}");
    until_waiting(&mut c, 0);
}

#[test]
fn the_aof_holds_the_woken_writes() {
    let s = Server::builder()
        .appendonly()
        .config("aof-use-rdb-preamble", "no")
        .start();
    let mut c = s.con();
    clock_set(&mut c, T0);
    rate(&mut c, &args!("RL.GCRA", "{a}g", 1, 1, 1000));
    rate(&mut c, &args!("RL.LOG", "{a}l", 1, 1000));
    let g = blocked(&s, args!("RL.GCRA", "{a}g", 1, 1, 1000, "WAIT", 5000));
    until_waiting(&mut c, 1);
    let all = args!("RL.ALL", 2, "{a}g", "{a}l", "GCRA", 1, 1, 1000, "LOG", 1, 1000, "WAIT", 5000);
    let a = blocked(&s, all);
    until_waiting(&mut c, 2);
    clock_advance(&mut c, 1000);
    assert_eq!(ints(&g.join().unwrap())[0], 1);
    until_waiting(&mut c, 1);
    clock_advance(&mut c, 1000);
    assert_eq!(all_reply(&a.join().unwrap()).0, 1);
    let keys = ["{a}g", "{a}l"];
    let want: Vec<_> = keys
        .iter()
        .map(|k| strip(info(&mut c, k).unwrap(), &["ttl_ms"]))
        .collect();
    // Reloaded an hour later on the module clock: the effects, not the commands.
    clock_advance(&mut c, 3_600_000);
    assert_eq!(text(&ok(&mut c, &args!("DEBUG", "LOADAOF"))), "OK");
    let got: Vec<_> = keys
        .iter()
        .map(|k| strip(info(&mut c, k).unwrap(), &["ttl_ms"]))
        .collect();
    assert_eq!(got, want);
}

/// `(requests, admitted, refused)` of policy `name`'s statistics.
fn policy_counts(c: &mut Connection, name: &str) -> (i64, i64, i64) {
    let Value::Array(v) = raw(c, &args!("RL.POLICY", "STATS", name)) else {
        panic!("STATS")
    };
    let field = |f: &str| {
        v.chunks(2)
            .find(|p| text(&p[0]) == f)
            .map_or(-1, |p| int(&p[1]))
    };
    (field("requests"), field("admitted"), field("refused"))
}

#[test]
fn a_request_that_waited_is_counted_once_in_its_policy_when_answered() {
    let (s, mut c) = Server::at_clock(T0);
    ok(
        &mut c,
        &args!("RL.POLICY", "SET", "api", "GCRA", 1, 1, 60_000),
    );
    assert_eq!(ints(&raw(&mut c, &args!("RL.ALLOW", "{p}u", "api")))[0], 1);
    assert_eq!(policy_counts(&mut c, "api"), (1, 1, 0));
    // Admitted after waiting: one request, admitted (not a refusal, then an admission).
    let h = blocked(&s, args!("RL.ALLOW", "{p}u", "api", "WAIT", 120_000));
    until_waiting(&mut c, 1);
    assert_eq!(
        policy_counts(&mut c, "api"),
        (1, 1, 0),
        "not counted while it waits"
    );
    clock_advance(&mut c, 60_000);
    assert_eq!(ints(&h.join().unwrap())[0], 1);
    assert_eq!(policy_counts(&mut c, "api"), (2, 2, 0));
    // Out of time: one request, refused. RL.ALL with a policy rule alike.
    let h = blocked(&s, args!("RL.ALLOW", "{p}u", "api", "WAIT", 1000));
    until_waiting(&mut c, 1);
    let all = args!("RL.ALL", 1, "{p}u", "POLICY", "api", "WAIT", 120_000);
    let a = blocked(&s, all);
    until_waiting(&mut c, 2);
    clock_advance(&mut c, 1000);
    assert_eq!(ints(&h.join().unwrap())[0], 0);
    assert_eq!(policy_counts(&mut c, "api"), (3, 2, 1));
    clock_advance(&mut c, 59_000);
    assert_eq!(all_reply(&a.join().unwrap()).0, 1);
    assert_eq!(policy_counts(&mut c, "api"), (4, 3, 1));
}
