//! RL.PAUSE, RL.RESUME and the PROBE option on a real redis-server with the test clock: a
//! pause on missing keys and on keys of every algorithm, extended and never shortened,
//! refusals counting the pause, peeks, refunds, RL.RELEASE and RL.INFO still answering,
//! the key's TTL, RL.RESUME, the probe flow (the prober dying, a new probe), replication of
//! a pause to a replica and DEBUG RELOAD.

use rl_testkit as common;
use rl_testkit::args;

use common::*;
use redis::{Connection, Value};

/// The integer fields of a reply (a token is read as -1, nil as -2).
fn ints(c: &mut Connection, a: &[String]) -> Vec<i64> {
    match ok(c, a) {
        Value::Array(items) => items
            .iter()
            .map(|v| match v {
                Value::Int(n) => *n,
                Value::Nil => -2,
                _ => -1,
            })
            .collect(),
        other => panic!("{a:?} answered {other:?}"),
    }
}

fn pause(c: &mut Connection, key: &str, ms: i64) -> i64 {
    int(&ok(c, &args!("RL.PAUSE", key, ms)))
}

fn pause_probe(c: &mut Connection, key: &str, ms: i64, probe_ms: i64) -> i64 {
    int(&ok(c, &args!("RL.PAUSE", key, ms, "PROBE", probe_ms)))
}

fn resume(c: &mut Connection, key: &str) -> i64 {
    int(&ok(c, &args!("RL.RESUME", key)))
}

/// One command of every algorithm, with the rule's numbers.
fn every_algorithm() -> Vec<Vec<String>> {
    vec![
        args!("RL.GCRA", "k:gcra", 5, 1, 1000),
        args!("RL.TOKENBUCKET", "k:tb", 5, 1, 1000),
        args!("RL.SLIDING", "k:sliding", 5, 1000),
        args!("RL.FIXED", "k:fixed", 5, 1000),
        args!("RL.LOG", "k:log", 5, 1000),
        args!("RL.QUEUE", "k:queue", 5, 100),
        args!("RL.ACQUIRE", "k:lease", 5, 1000),
    ]
}

#[test]
fn a_pause_on_a_missing_key_holds_only_the_pause() {
    let (_s, mut c) = Server::at_clock(T0);
    assert_eq!(pause(&mut c, "p", 5000), 5000);
    let m = info(&mut c, "p").unwrap();
    assert_eq!(m["algorithm"], "none");
    assert_eq!(info_int(&m, "paused_until_ms"), T0 + 5000);
    let p = pttl(&mut c, "p");
    assert!((4900..=5000).contains(&p), "PTTL {p}");
    // Any algorithm is refused, to the pause's end; nothing is written.
    for a in every_algorithm() {
        let mut a = a;
        a[1] = "p".into();
        let r = ints(&mut c, &a);
        assert_eq!((r[0], r[2], r[3]), (0, 0, 5000), "{a:?}: {r:?}");
    }
    assert_eq!(info(&mut c, "p").unwrap()["algorithm"], "none");
    // A peek answers (nothing remains), a refund creates nothing.
    let r = rate(&mut c, &args!("RL.GCRA", "p", 5, 1, 1000, "COST", 0));
    assert_eq!(r, [1, 5, 0, 0, 5000]);
    rate(&mut c, &args!("RL.GCRA", "p", 5, 1, 1000, "REFUND", 2));
    assert_eq!(info(&mut c, "p").unwrap()["algorithm"], "none");
    // After the end the first request starts the algorithm's fresh state.
    clock_advance(&mut c, 5000);
    let r = rate(&mut c, &args!("RL.FIXED", "p", 5, 1000));
    assert_eq!(&r[..3], &[1, 5, 4]);
    let m = info(&mut c, "p").unwrap();
    assert_eq!(m["algorithm"], "fixed");
    assert!(!m.contains_key("paused_until_ms"));
    // RL.PAUSE on a non-ratelimit value: WRONGTYPE; bad arguments change nothing.
    ok(&mut c, &args!("SET", "s", "x"));
    assert_eq!(err(&mut c, &args!("RL.PAUSE", "s", 10)), ERR_WRONGTYPE);
    assert_eq!(err(&mut c, &args!("RL.RESUME", "s")), ERR_WRONGTYPE);
    assert_eq!(
        err(&mut c, &args!("RL.PAUSE", "q", 0)),
        "ERR ms must be a positive integer"
    );
    assert_eq!(
        err(&mut c, &args!("RL.PAUSE", "q", 10, "PROBE")),
        ERR_SYNTAX
    );
    assert_eq!(err(&mut c, &args!("RL.PAUSE", "q", 10, "X", 1)), ERR_SYNTAX);
    assert_eq!(
        err(&mut c, &args!("RL.PAUSE", "q", 10, "PROBE", 0)),
        "ERR probe_ms must be a positive integer"
    );
    assert!(!exists(&mut c, "q"));
}

#[test]
fn every_algorithm_is_paused_and_resumed_with_its_state() {
    let (_s, mut c) = Server::at_clock(T0);
    for a in every_algorithm() {
        let key = a[1].clone();
        ints(&mut c, &a);
        let before = strip(info(&mut c, &key).unwrap(), &["ttl_ms", "tokens"]);
        assert_eq!(pause(&mut c, &key, 3000), 3000, "{a:?}");
        // A pause on any algorithm: the wrapped state is shown, with the pause.
        let m = info(&mut c, &key).unwrap();
        assert_eq!(info_int(&m, "paused_until_ms"), T0 + 3000, "{a:?}");
        assert!(pttl(&mut c, &key) > 2900, "{a:?}");
        let r = ints(&mut c, &a);
        assert_eq!((r[0], r[2], r[3]), (0, 0, 3000), "{a:?}: {r:?}");
        // Another algorithm on it: WRONGTYPE as before.
        let other = if key == "k:gcra" {
            args!("RL.FIXED", &key, 5, 1000)
        } else {
            args!("RL.GCRA", &key, 5, 1, 1000)
        };
        assert!(err(&mut c, &other).starts_with("WRONGTYPE"), "{a:?}");
        assert_eq!(resume(&mut c, &key), 1, "{a:?}");
        assert_eq!(resume(&mut c, &key), 0, "{a:?}");
        let after = strip(info(&mut c, &key).unwrap(), &["ttl_ms", "tokens"]);
        assert_eq!(after, before, "{a:?}: the wrapped state stays");
        let r = ints(&mut c, &a);
        assert_eq!(r[0], 1, "{a:?} after RL.RESUME: {r:?}");
    }
    assert_eq!(resume(&mut c, "missing"), 0);
    assert!(!exists(&mut c, "missing"));
    // RL.RESUME of a key holding only a pause deletes it.
    pause(&mut c, "only", 1000);
    assert_eq!(resume(&mut c, "only"), 1);
    assert!(!exists(&mut c, "only"));
    // RL.RESUME lifts a BLOCK penalty too.
    rate(&mut c, &args!("RL.FIXED", "b", 1, 60_000));
    rate(&mut c, &args!("RL.FIXED", "b", 1, 60_000, "BLOCK", 900_000));
    assert_eq!(resume(&mut c, "b"), 1);
    let m = info(&mut c, "b").unwrap();
    assert!(!m.contains_key("blocked_until_ms"));
    assert!(pttl(&mut c, "b") <= 60_000);
}

#[test]
fn a_pause_extends_never_shortens_and_counts_in_the_ttl() {
    let (_s, mut c) = Server::at_clock(T0);
    rate(&mut c, &args!("RL.FIXED", "w", 5, 60_000));
    // The window's own TTL is longer: kept.
    assert_eq!(pause(&mut c, "w", 1000), 1000);
    assert!(pttl(&mut c, "w") > 59_000);
    assert_eq!(pause(&mut c, "w", 90_000), 90_000);
    assert!(pttl(&mut c, "w") > 89_000);
    clock_advance(&mut c, 10_000);
    assert_eq!(pause(&mut c, "w", 1000), 80_000);
    // A BLOCK penalty is extended, never shortened, by a pause.
    rate(&mut c, &args!("RL.FIXED", "b", 1, 60_000));
    rate(&mut c, &args!("RL.FIXED", "b", 1, 60_000, "BLOCK", 900_000));
    assert_eq!(pause(&mut c, "b", 1000), 900_000);
    let m = info(&mut c, "b").unwrap();
    assert_eq!(info_int(&m, "paused_until_ms"), clock_get(&mut c) + 900_000);
    // Under the pause a BLOCK request writes nothing.
    let before = snap(&mut c, "b");
    let r = rate(
        &mut c,
        &args!("RL.FIXED", "b", 1, 60_000, "BLOCK", 2_000_000),
    );
    assert_eq!((r[0], r[3]), (0, 900_000));
    assert_eq!(snap(&mut c, "b"), before);
}

#[test]
fn peeks_refunds_and_leases_still_answer_under_a_pause() {
    let (_s, mut c) = Server::at_clock(T0);
    rate(&mut c, &args!("RL.GCRA", "g", 5, 1, 1000, "COST", 4));
    pause(&mut c, "g", 10_000);
    let r = rate(&mut c, &args!("RL.GCRA", "g", 5, 1, 1000, "COST", 0));
    assert_eq!(r, [1, 5, 0, 0, 10_000]);
    let r = rate(&mut c, &args!("RL.GCRA", "g", 5, 1, 1000, "REFUND", 3));
    assert_eq!(r, [1, 5, 0, 0, 10_000]);
    // The refund reached the wrapped state: after the pause 4 are admitted at once.
    clock_advance(&mut c, 10_000);
    let r = rate(&mut c, &args!("RL.GCRA", "g", 5, 1, 1000, "COST", 5));
    assert_eq!(r[0], 1);
    // Leases: RELEASE and RENEW act on them; the TTL keeps the pause.
    let v = ok(&mut c, &args!("RL.ACQUIRE", "l", 2, 1000));
    let Value::Array(items) = v else { panic!() };
    let token = text(&items[5]);
    pause(&mut c, "l", 5000);
    let r = ints(&mut c, &args!("RL.ACQUIRE", "l", 2, 1000));
    assert_eq!((r[0], r[3], r[5]), (0, 5000, -2));
    assert_eq!(int(&ok(&mut c, &args!("RL.RENEW", "l", &token, 3000))), 1);
    assert_eq!(int(&ok(&mut c, &args!("RL.RELEASE", "l", &token))), 1);
    assert!(pttl(&mut c, "l") > 4900);
    assert_eq!(
        info_int(&info(&mut c, "l").unwrap(), "paused_until_ms"),
        T0 + 15_000
    );
}

#[test]
fn the_probe_flow() {
    let (_s, mut c) = Server::at_clock(T0);
    let call = |c: &mut Connection, probe: bool| {
        let mut a = args!("RL.GCRA", "v", 5, 1, 1000);
        if probe {
            a.push("PROBE".into());
        }
        ints(c, &a)
    };
    // A PROBE request on a key that is not paused: decided normally, probe 0.
    assert_eq!(call(&mut c, true), vec![1, 5, 4, 0, 1000, 0]);
    assert_eq!(pause_probe(&mut c, "v", 5000, 2000), 5000);
    assert!(pttl(&mut c, "v") > 6900);
    assert_eq!(info_int(&info(&mut c, "v").unwrap(), "probe_ms"), 2000);
    // Before the end: everyone is refused, probes too.
    assert_eq!(call(&mut c, true), vec![0, 5, 0, 5000, 7000, 0]);
    clock_advance(&mut c, 5000);
    // After the end: without PROBE refused for probe_ms...
    assert_eq!(call(&mut c, false), vec![0, 5, 0, 2000, 2000]);
    // ... a dry-run probe would be the probe and changes nothing ...
    let before = snap(&mut c, "v");
    let r = ints(
        &mut c,
        &args!("RL.GCRA", "v", 5, 1, 1000, "PROBE", "DRYRUN"),
    );
    assert_eq!((r[0], r[5]), (1, 1));
    assert_eq!(snap(&mut c, "v"), before);
    // ... and the first PROBE request is the probe: the key paused again for probe_ms.
    assert_eq!(call(&mut c, true), vec![1, 5, 0, 0, 4000, 1]);
    let m = info(&mut c, "v").unwrap();
    assert_eq!(info_int(&m, "paused_until_ms"), clock_get(&mut c) + 2000);
    assert!(pttl(&mut c, "v") > 3900);
    assert_eq!(call(&mut c, true), vec![0, 5, 0, 2000, 4000, 0]);
    assert_eq!(call(&mut c, false), vec![0, 5, 0, 2000, 4000]);
    // The probe failed: the prober pauses again.
    assert_eq!(pause_probe(&mut c, "v", 3000, 2000), 3000);
    clock_advance(&mut c, 3000);
    // The next prober dies: after probe_ms the next PROBE request is the probe.
    assert_eq!(call(&mut c, true)[5], 1);
    clock_advance(&mut c, 1999);
    assert_eq!(call(&mut c, true)[5], 0);
    clock_advance(&mut c, 1);
    assert_eq!(call(&mut c, true)[5], 1);
    // It worked: RL.RESUME lifts the pause, everyone is admitted again.
    assert_eq!(resume(&mut c, "v"), 1);
    assert_eq!(call(&mut c, false)[0], 1);
    assert!(!info(&mut c, "v").unwrap().contains_key("probe_ms"));
    // A probe its algorithm refuses is refused and writes nothing.
    rate(&mut c, &args!("RL.GCRA", "x", 5, 1, 1000, "COST", 5));
    pause_probe(&mut c, "x", 1, 1000);
    clock_advance(&mut c, 1);
    let before = snap(&mut c, "x");
    let r = ints(&mut c, &args!("RL.GCRA", "x", 5, 1, 1000, "PROBE"));
    assert_eq!((r[0], r[3], r[5]), (0, 999, 0));
    assert_eq!(snap(&mut c, "x"), before);
    // PROBE on RL.ACQUIRE and RL.ALLOW; a refund cannot be a probe.
    let r = ints(&mut c, &args!("RL.ACQUIRE", "a", 2, 1000, "PROBE"));
    assert_eq!((r[0], r.len()), (1, 7));
    ok(
        &mut c,
        &args!("RL.POLICY", "SET", "api", "GCRA", 5, 1, 1000),
    );
    pause_probe(&mut c, "pa", 10, 1000);
    clock_advance(&mut c, 10);
    assert_eq!(
        ints(&mut c, &args!("RL.ALLOW", "pa", "api")),
        vec![0, 5, 0, 1000, 1000]
    );
    assert_eq!(
        ints(&mut c, &args!("RL.ALLOW", "pa", "api", "PROBE")),
        vec![1, 5, 0, 0, 2000, 1]
    );
    assert_eq!(
        err(
            &mut c,
            &args!("RL.GCRA", "v", 5, 1, 1000, "REFUND", 1, "PROBE")
        ),
        ERR_SYNTAX
    );
}

#[test]
fn a_probe_mode_pause_nobody_probes_lapses_with_the_key() {
    let s = Server::builder().real_clock().start();
    let mut c = s.con();
    // The real clock: the key's TTL is the pause's end plus probe_ms.
    pause_probe(&mut c, "lapse", 100, 100);
    let p = pttl(&mut c, "lapse");
    assert!((150..=200).contains(&p), "PTTL {p}");
    wait_until(
        "the probe-mode pause to lapse",
        std::time::Duration::from_secs(5),
        || !exists(&mut c, "lapse"),
    );
    let r = rate(&mut c, &args!("RL.GCRA", "lapse", 5, 1, 1000));
    assert_eq!(r[0], 1);
}

#[test]
fn a_pause_reaches_replicas_and_survives_debug_reload() {
    let primary = Server::start();
    let mut c = primary.con();
    clock_set(&mut c, T0);
    let replica = primary.start_replica();
    let mut r = replica.con();
    rate(&mut c, &args!("RL.GCRA", "g", 5, 1, 1000, "COST", 3));
    ints(&mut c, &args!("RL.LOG", "l", 5, 60_000));
    pause(&mut c, "g", 60_000);
    pause_probe(&mut c, "l", 1000, 30_000);
    pause_probe(&mut c, "none", 120_000, 1000);
    clock_advance(&mut c, 1000);
    // A probe on the log key: written as the whole state.
    assert_eq!(
        ints(&mut c, &args!("RL.LOG", "l", 5, 60_000, "PROBE"))[5],
        1
    );
    sync_replica(&mut c, &mut r);
    // RL.INFO shows a pause in force on the reading server's clock.
    clock_set(&mut r, clock_get(&mut c));
    let keys = ["g", "l", "none"];
    let clocked = ["ttl_ms", "tokens"];
    for k in keys {
        let p = strip(info(&mut c, k).unwrap(), &clocked);
        assert_eq!(strip(info(&mut r, k).unwrap(), &clocked), p, "{k}");
        assert_eq!(pexpiretime(&mut r, k), pexpiretime(&mut c, k), "{k}");
        assert_eq!(digest(&mut r, k), digest(&mut c, k), "{k}");
        assert!(p.contains_key("paused_until_ms"), "{k}: {p:?}");
    }
    // RL.RESUME reaches the replica too.
    assert_eq!(resume(&mut c, "g"), 1);
    sync_replica(&mut c, &mut r);
    assert!(!info(&mut r, "g").unwrap().contains_key("paused_until_ms"));
    let before: Vec<_> = keys
        .iter()
        .map(|k| {
            (
                strip(info(&mut c, k).unwrap(), &clocked),
                pexpiretime(&mut c, k),
            )
        })
        .collect();
    assert_eq!(text(&ok(&mut c, &args!("DEBUG", "RELOAD"))), "OK");
    let after: Vec<_> = keys
        .iter()
        .map(|k| {
            (
                strip(info(&mut c, k).unwrap(), &clocked),
                pexpiretime(&mut c, k),
            )
        })
        .collect();
    assert_eq!(after, before);
}
