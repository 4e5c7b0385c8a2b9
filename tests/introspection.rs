//! What users see around the commands: COMMAND DOCS, INFO ratelimit, configs, keyspace events.

use common::*;
use rate::*;
use redis::{Connection, Value};
use rl_testkit as common;
use rl_testkit::args;
use rl_testkit::rate;

fn flat(v: &Value) -> Vec<String> {
    match v {
        Value::Array(a) => a.iter().flat_map(flat).collect(),
        Value::Map(m) => m
            .iter()
            .flat_map(|(k, v)| [flat(k), flat(v)].concat())
            .collect(),
        other => vec![text(other)],
    }
}

#[test]
fn command_docs_describe_every_argument() {
    let s = Server::start();
    let mut c = s.con();
    for (cmd, words) in [
        (
            "rl.gcra",
            &[
                "key",
                "burst",
                "count",
                "period_ms",
                "COST",
                "DRYRUN",
                "optional",
                "O(1)",
            ][..],
        ),
        (
            "rl.tokenbucket",
            &["capacity", "refill_tokens", "refill_period_ms"][..],
        ),
        (
            "rl.sliding",
            &[
                "limit",
                "window_ms",
                "REFUND",
                "PARTIAL",
                "RESERVE",
                "BLOCK",
                "STAGGER",
            ][..],
        ),
        ("rl.queue", &["capacity", "interval_ms"][..]),
        ("rl.acquire", &["lease_ms", "DRYRUN"][..]),
        ("rl.release", &["token"][..]),
        ("rl.renew", &["token", "lease_ms"][..]),
        (
            "cl.throttle",
            &["max_burst", "count_per_period", "period", "quantity"][..],
        ),
        ("rl.all", &["numkeys", "rule", "multiple"][..]),
        (
            "rl.clock",
            &["GET", "SET", "unix_ms", "ADVANCE", "REAL"][..],
        ),
    ] {
        let docs = flat(&raw(&mut c, &args!("COMMAND", "DOCS", cmd)));
        for w in ["summary", "since", "complexity", "group", "arguments"]
            .iter()
            .chain(words)
        {
            assert!(docs.iter().any(|d| d == w), "{cmd}: no {w} in {docs:?}");
        }
    }
}

#[test]
fn info_section_counts_calls_and_decisions() {
    let (_s, mut c) = Server::at_clock(T0);
    for _ in 0..3 {
        rate(&mut c, &args!("RL.GCRA", "k", 2, 1, 1000));
    }
    err(&mut c, &args!("RL.GCRA", "k", 0, 1, 1000));
    let field = |c: &mut redis::Connection, f: &str| info_field(c, "ratelimit", f);
    assert_eq!(field(&mut c, "ratelimit_gcra_calls").as_deref(), Some("4"));
    assert_eq!(
        field(&mut c, "ratelimit_gcra_admitted").as_deref(),
        Some("2")
    );
    assert_eq!(
        field(&mut c, "ratelimit_gcra_refused").as_deref(),
        Some("1")
    );
    assert_eq!(field(&mut c, "ratelimit_gcra_errors").as_deref(), Some("1"));
    assert_eq!(
        field(&mut c, "ratelimit_clock_source").as_deref(),
        Some("test")
    );
    ok(&mut c, &args!("RL.CLOCK", "REAL"));
    let src = field(&mut c, "ratelimit_clock_source").unwrap();
    assert!(
        src == "system-microseconds" || src == "cached-microseconds",
        "{src}"
    );
}

/// The real clock has µs resolution on every server, Redis 7.0 included (no
/// `RedisModule_CachedMicroseconds` there: the module reads the system clock itself). A fresh
/// GCRA key's TAT is now plus a whole number of ms (1 per second): on a millisecond clock it
/// would always be ms-aligned. Over fresh keys (a bounded loop, not a timer) some is not.
#[test]
fn real_clock_has_microsecond_resolution() {
    let s = Server::start();
    let mut c = s.con();
    let src = info_field(&mut c, "ratelimit", "ratelimit_clock_source").unwrap();
    let redis7 = info_field(&mut c, "server", "redis_version")
        .is_some_and(|v| v.starts_with("7.0."))
        && info_field(&mut c, "server", "valkey_version").is_none();
    if redis7 {
        assert_eq!(src, "system-microseconds");
    }
    let mut tats = Vec::new();
    for i in 0..200 {
        let k = format!("us:{i}");
        rate(&mut c, &args!("RL.GCRA", k, 5, 1, 1000));
        let tat = info_int(&info(&mut c, &k).unwrap(), "tat_ns");
        tats.push(tat);
        if tat % 1_000_000 != 0 {
            break;
        }
    }
    assert!(
        tats.iter().any(|t| t % 1_000_000 != 0),
        "every TAT on a whole ms ({src}): {tats:?}"
    );
}

#[test]
fn configs_are_listed_settable_and_validated() {
    let s = Server::start();
    let mut c = s.con();
    let all = flat(&raw(&mut c, &args!("CONFIG", "GET", "ratelimit.*")));
    for name in [
        "ratelimit.test-clock",
        "ratelimit.log-max-limit",
        "ratelimit.acquire-max-limit",
    ] {
        assert!(all.iter().any(|x| x == name), "{name} in {all:?}");
    }
    ok(
        &mut c,
        &args!("CONFIG", "SET", "ratelimit.log-max-limit", 50),
    );
    assert!(err(&mut c, &args!("RL.LOG", "l", 51, 1000)).contains("ratelimit.log-max-limit"));
    assert_eq!(rate(&mut c, &args!("RL.LOG", "l", 50, 1000))[0], 1);
    for bad in ["0", "-1", "abc", "1000001"] {
        let e = err(
            &mut c,
            &args!("CONFIG", "SET", "ratelimit.log-max-limit", bad),
        );
        assert!(e.starts_with("ERR"), "{bad}: {e}");
    }
    let e = err(
        &mut c,
        &args!("CONFIG", "SET", "ratelimit.test-clock", "no"),
    );
    assert!(e.starts_with("ERR"), "test-clock is load-time only: {e}");
}

#[test]
fn configs_at_load_time() {
    let s = Server::builder()
        .config("ratelimit.log-max-limit", 7)
        .start();
    let mut c = s.con();
    let v = flat(&raw(
        &mut c,
        &args!("CONFIG", "GET", "ratelimit.log-max-limit"),
    ));
    assert_eq!(
        v,
        vec!["ratelimit.log-max-limit".to_string(), "7".to_string()]
    );
}

#[test]
fn writes_fire_keyspace_events() {
    let (s, mut c) = Server::at_clock(T0);
    ok(
        &mut c,
        &args!("CONFIG", "SET", "notify-keyspace-events", "Ed"),
    );
    let mut sub = s.con();
    let mut pubsub = sub.as_pubsub();
    pubsub.psubscribe("__keyevent@*__:*").unwrap();
    pubsub
        .set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    rate(&mut c, &args!("RL.GCRA", "g", 1, 1, 1000));
    rate(&mut c, &args!("RL.GCRA", "g", 1, 1, 1000)); // refused: no event
    rate(&mut c, &args!("RL.SLIDING", "s", 1, 1000));
    let mut got = vec![];
    for _ in 0..2 {
        let m = pubsub.get_message().unwrap();
        let payload: String = m.get_payload().unwrap();
        got.push((m.get_channel_name().to_string(), payload));
    }
    assert_eq!(
        got,
        vec![
            ("__keyevent@0__:ratelimit.gcra".to_string(), "g".to_string()),
            (
                "__keyevent@0__:ratelimit.sliding".to_string(),
                "s".to_string()
            ),
        ]
    );
}

#[test]
fn log_and_acquire_max_limit_configs() {
    let (_srv, mut c) = Server::at_clock(T0);
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
