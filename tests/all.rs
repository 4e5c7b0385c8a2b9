//! RL.ALL: several limits checked and spent atomically, all or nothing.

use common::*;
use redis::Value;
use rl_testkit as common;
use rl_testkit::args;

const USER: &str = "rl:{org:7}:user:42";
const ORG: &str = "rl:{org:7}";

/// `[allowed, refused_by, rule replies...]`
fn all(c: &mut redis::Connection, args: &[String]) -> (i64, i64, Vec<Vec<i64>>) {
    let v = raw(c, args);
    let Value::Array(items) = v else {
        panic!("{args:?} answered {v:?}")
    };
    let rules = items[2..]
        .iter()
        .map(|r| match r {
            Value::Array(f) => f.iter().map(int).collect(),
            other => panic!("rule reply {other:?}"),
        })
        .collect();
    (int(&items[0]), int(&items[1]), rules)
}

#[test]
fn organisation_runs_out_first_and_the_user_allowance_is_untouched() {
    let (_s, mut c) = Server::at_clock(T0);
    let call = args!("RL.ALL", 2, USER, ORG, "GCRA", 10, 1, 1000, "SLIDING", 3, 60000);
    for i in 0..3 {
        let (ok, by, r) = all(&mut c, &call);
        assert_eq!((ok, by), (1, 0));
        assert_eq!(r[0], vec![1, 10, 9 - i, 0, 1000 * (i + 1)]);
        assert_eq!(r[1][..3], [1, 3, 2 - i]);
    }
    let user_before = strip(info(&mut c, USER).unwrap(), &["ttl_ms"]);
    let org_before = strip(info(&mut c, ORG).unwrap(), &["ttl_ms"]);
    let (ok, by, r) = all(&mut c, &call);
    assert_eq!((ok, by), (0, 2), "the organisation's rule refused");
    assert_eq!(r[0][..3], [1, 10, 6], "the user's rule alone would admit");
    assert_eq!(r[1][0], 0);
    assert!(r[1][3] > 0);
    assert_eq!(
        strip(info(&mut c, USER).unwrap(), &["ttl_ms"]),
        user_before,
        "nothing spent"
    );
    assert_eq!(strip(info(&mut c, ORG).unwrap(), &["ttl_ms"]), org_before);
    // The user alone still has its 7 left.
    assert_eq!(rate(&mut c, &args!("RL.GCRA", USER, 10, 1, 1000))[2], 6);
}

#[test]
fn a_rule_of_each_algorithm() {
    let (_s, mut c) = Server::at_clock(T0);
    let call = args!(
        "RL.ALL",
        6,
        "{a}1",
        "{a}2",
        "{a}3",
        "{a}4",
        "{a}5",
        "{a}6",
        "GCRA",
        5,
        1,
        1000,
        "TOKENBUCKET",
        5,
        1,
        1000,
        "SLIDING",
        5,
        1000,
        "FIXED",
        5,
        1000,
        "LOG",
        5,
        1000,
        "QUEUE",
        5,
        1000,
        "COST",
        2
    );
    let (ok, by, r) = all(&mut c, &call);
    assert_eq!((ok, by), (1, 0));
    assert_eq!(r[0], vec![1, 5, 4, 0, 1000]);
    assert_eq!(r[1], vec![1, 5, 4, 0, 1000]);
    assert_eq!(r[2], vec![1, 5, 4, 0, 2000]);
    assert_eq!(r[3], vec![1, 5, 4, 0, 1000]);
    assert_eq!(r[4], vec![1, 5, 4, 0, 1000]);
    assert_eq!(r[5], vec![1, 5, 3, 0, 2000, 0], "QUEUE carries delay_ms");
    for (k, algo) in [
        ("{a}1", "gcra"),
        ("{a}2", "tokenbucket"),
        ("{a}3", "sliding"),
        ("{a}4", "fixed"),
        ("{a}5", "log"),
        ("{a}6", "queue"),
    ] {
        let m = info(&mut c, k).expect("written");
        assert_eq!(m["algorithm"], algo);
        let p = pttl(&mut c, k);
        assert!(p > 0, "{k} has a TTL");
    }
    // DRYRUN: the same reply, nothing written.
    let state = |c: &mut redis::Connection, i: i32| {
        strip(info(c, &format!("{{a}}{i}")).unwrap(), &["ttl_ms"])
    };
    let before: Vec<_> = (1..=6).map(|i| state(&mut c, i)).collect();
    let mut dry = call.clone();
    dry.push("DRYRUN".into());
    let (ok, _, r) = all(&mut c, &dry);
    assert_eq!(ok, 1);
    assert_eq!(r[0], vec![1, 5, 3, 0, 2000]);
    let after: Vec<_> = (1..=6).map(|i| state(&mut c, i)).collect();
    assert_eq!(before, after);
}

#[test]
fn bad_input_in_any_rule_refuses_the_whole_call() {
    let (_s, mut c) = Server::at_clock(T0);
    rate(&mut c, &args!("RL.GCRA", "{k}g", 5, 1, 1000));
    ok(&mut c, &args!("SET", "{k}s", "x", "PX", 100000));
    let before = strip(info(&mut c, "{k}g").unwrap(), &["ttl_ms"]);
    let bad: Vec<Vec<String>> = vec![
        args!("RL.ALL", 2, "{k}g", "{k}n", "GCRA", 5, 1, 1000, "GCRA", 0, 1, 1000),
        args!("RL.ALL", 2, "{k}g", "{k}n", "GCRA", 5, 1, 1000, "SLIDING", 5),
        args!("RL.ALL", 2, "{k}g", "{k}n", "GCRA", 5, 1, 1000, "NOPE", 5, 1000),
        args!("RL.ALL", 2, "{k}g", "{k}n", "GCRA", 5, 1, 1000, "FIXED", 5, 1000, "COST", 6),
        args!("RL.ALL", 2, "{k}g", "{k}n", "GCRA", 5, 1, 1000, "FIXED", 5, 1000, "EXTRA"),
        args!("RL.ALL", 2, "{k}g", "{k}g", "GCRA", 5, 1, 1000, "GCRA", 5, 1, 1000),
        args!("RL.ALL", 3, "{k}g", "{k}n", "GCRA", 5, 1, 1000),
        args!("RL.ALL", 0, "GCRA", 5, 1, 1000),
        args!("RL.ALL", "x", "{k}g", "GCRA", 5, 1, 1000),
        args!("RL.ALL", 2, "{k}g", "{k}n", "GCRA", 5, 1, 1000, "LOG", 100000, 1000),
        // WRONGTYPE in the second rule: the first (valid) rule spends nothing either.
        args!("RL.ALL", 2, "{k}g", "{k}s", "GCRA", 5, 1, 1000, "FIXED", 5, 1000),
        args!("RL.ALL", 2, "{k}n", "{k}g", "GCRA", 5, 1, 1000, "FIXED", 5, 1000),
    ];
    for b in &bad {
        let e = err(&mut c, b);
        assert!(
            e.starts_with("ERR") || e.starts_with("WRONGTYPE"),
            "{b:?}: {e}"
        );
        assert_eq!(
            strip(info(&mut c, "{k}g").unwrap(), &["ttl_ms"]),
            before,
            "{b:?}"
        );
        assert!(!exists(&mut c, "{k}n"), "{b:?} created a key");
        assert_eq!(text(&raw(&mut c, &args!("GET", "{k}s"))), "x");
    }
    ping(&mut c);
}

#[test]
fn effects_replicate_as_one_unit() {
    let (s, mut c) = Server::at_clock(T0);
    let r = s.start_replica();
    let mut rc = r.con();
    for _ in 0..4 {
        all(
            &mut c,
            &args!("RL.ALL", 2, USER, ORG, "GCRA", 10, 1, 1000, "FIXED", 3, 60000),
        );
    }
    sync_replica(&mut c, &mut rc);
    for k in [USER, ORG] {
        assert_eq!(digest(&mut c, k), digest(&mut rc, k));
        assert_eq!(pexpiretime(&mut c, k), pexpiretime(&mut rc, k));
    }
    assert_eq!(info_int(&info(&mut rc, ORG).unwrap(), "count"), 3);
}

#[test]
fn cluster_keys_are_declared() {
    let s = Server::start();
    let mut c = s.con();
    let v = raw(
        &mut c,
        &args!("COMMAND", "GETKEYS", "RL.ALL", 2, USER, ORG, "GCRA", 1, 1, 1, "FIXED", 1, 1),
    );
    let Value::Array(keys) = v else {
        panic!("{v:?}")
    };
    let keys: Vec<String> = keys.iter().map(text).collect();
    assert_eq!(keys, vec![USER.to_string(), ORG.to_string()]);
}
