//! What every rate command promises about its decision, on a real server with the test
//! clock: retry_after_ms is exact (refused 1 ms before, admitted on time); after every
//! admission the key's PTTL equals reset_after_ms; DRYRUN and refused requests change
//! nothing (DRYRUN on a missing key creates none).
use rl_testkit as common;
use rl_testkit::args;
use rl_testkit::rate;

use common::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rate::*;

#[test]
fn retry_after_is_exact_for_every_algorithm() {
    let (_s, mut c) = Server::at_clock(T0);
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
    let (_s, mut c) = Server::at_clock(T0);
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
    let (_s, mut c) = Server::at_clock(T0);
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
