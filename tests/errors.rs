//! Error handling on a real redis-server: WRONGTYPE, every bad input of the contract,
//! the internal replication command refused from normal clients, RL.CLOCK disabled
//! without the test-clock config. Every error must leave all state unchanged and the
//! server answering PING.

use rl_testkit as common;
use rl_testkit::args;
use rl_testkit::rate;

use common::*;
use rate::*;
use redis::{Connection, Value};

struct Alg {
    cmd: &'static str,
    algo: &'static str,
    names: &'static [&'static str],
    params: &'static [i64],
}

const ALGS: [Alg; 3] = [
    Alg {
        cmd: "RL.GCRA",
        algo: "gcra",
        names: &["burst", "count", "period_ms"],
        params: &[5, 1, 3_600_000],
    },
    Alg {
        cmd: "RL.TOKENBUCKET",
        algo: "tokenbucket",
        names: &["capacity", "refill_tokens", "refill_period_ms"],
        params: &[5, 1, 3_600_000],
    },
    Alg {
        cmd: "RL.SLIDING",
        algo: "sliding",
        names: &["limit", "window_ms"],
        params: &[5, 3_600_000],
    },
];

impl Alg {
    fn args(&self, key: &str, extra: &[&str]) -> Vec<String> {
        let mut a = args!(self.cmd, key);
        a.extend(self.params.iter().map(|p| p.to_string()));
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    }

    fn state_key(&self) -> String {
        format!("st:{}", self.algo)
    }
}

/// A server at the frozen clock T0 with, for each algorithm, a key holding a partly
/// spent state, plus keys of other types. Periods of an hour: no key expires (in real
/// time) while a test runs.
fn setup() -> (Server, Connection) {
    let (s, mut c) = Server::at_clock(T0);
    for a in &ALGS {
        let r = rate(&mut c, &a.args(&a.state_key(), &["COST", "2"]));
        assert_eq!(r[0], 1);
    }
    ok(&mut c, &args!("SET", "str", "hello", "PX", 100_000_000));
    ok(&mut c, &args!("HSET", "hash", "f", "v", "g", "w"));
    ok(&mut c, &args!("RPUSH", "list", "a", "b", "c"));
    ok(&mut c, &args!("SADD", "set", "x", "y"));
    ok(&mut c, &args!("ZADD", "zset", 1, "m"));
    ok(&mut c, &args!("XADD", "stream", "1-1", "f", "v"));
    clock_advance(&mut c, 250);
    (s, c)
}

/// Run `args`, which must answer an error accepted by `accept`, change no key, and
/// leave the server answering PING. Returns the error text.
fn refused(c: &mut Connection, args: &[String], accept: &dyn Fn(&str) -> bool) -> String {
    let before = snap_all(c);
    let v = raw(c, args);
    let e = error_text(&v).unwrap_or_else(|| panic!("{args:?} should fail, answered {v:?}"));
    assert!(accept(&e), "{args:?} answered the unexpected error {e:?}");
    assert_eq!(snap_all(c), before, "{args:?} ({e}) changed the data");
    ping(c);
    e
}

fn numeric_err(name: &str) -> impl Fn(&str) -> bool + '_ {
    move |e: &str| e == ERR_NOT_INT || e == format!("ERR {name} must be a positive integer")
}

fn is_arity(cmd: &str) -> impl Fn(&str) -> bool + '_ {
    // Redis's own text; the command name may be echoed as typed, so compare
    // case-insensitively.
    move |e: &str| e.eq_ignore_ascii_case(&arity_err(cmd))
}

const BAD_NUMBERS: [&str; 15] = [
    "abc",
    "1.5",
    "",
    "0",
    "-1",
    "-1000",
    "99999999999999999999",
    "-99999999999999999999",
    "18446744073709551616",
    "9223372036854775808",
    "1e3",
    "0x10",
    "5abc",
    " 5",
    "5 ",
];

// --------------------------------------------------------------------------- WRONGTYPE

#[test]
fn wrongtype_for_keys_of_other_types_and_key_untouched() {
    let (_s, mut c) = setup();
    for a in &ALGS {
        for key in ["str", "hash", "list", "set", "zset", "stream"] {
            for extra in [&[][..], &["DRYRUN"][..], &["COST", "2"][..]] {
                let e = refused(&mut c, &a.args(key, extra), &|e| e == ERR_WRONGTYPE);
                assert_eq!(e, ERR_WRONGTYPE);
            }
        }
    }
    assert_eq!(text(&ok(&mut c, &args!("GET", "str"))), "hello");
    assert!(pttl(&mut c, "str") > 99_000_000, "string key lost its TTL");
    assert_eq!(int(&ok(&mut c, &args!("HLEN", "hash"))), 2);
    assert_eq!(int(&ok(&mut c, &args!("LLEN", "list"))), 3);
    // RL.INFO on a non-module key.
    let e = refused(&mut c, &args!("RL.INFO", "str"), &|e| {
        e.starts_with("WRONGTYPE")
    });
    assert!(e.starts_with("WRONGTYPE"));
}

#[test]
fn wrongtype_for_a_state_of_another_algorithm() {
    let (_s, mut c) = setup();
    for held in &ALGS {
        let key = held.state_key();
        let want = format!(
            "WRONGTYPE key holds a ratelimit state of another algorithm ({})",
            held.algo
        );
        for other in ALGS.iter().filter(|o| o.algo != held.algo) {
            for extra in [&[][..], &["DRYRUN"][..], &["COST", "3"][..]] {
                // Interpretation: <algo> in the message names the algorithm the key holds.
                refused(&mut c, &other.args(&key, extra), &|e| e == want);
            }
        }
        let info = info(&mut c, &key).unwrap();
        assert_eq!(info["algorithm"], held.algo);
    }
}

// -------------------------------------------------------------------------- bad input

#[test]
fn missing_arguments_wrong_arity() {
    let (_s, mut c) = setup();
    for a in &ALGS {
        let full = a.args(&a.state_key(), &[]);
        for n in 1..full.len() {
            refused(&mut c, &full[..n], &is_arity(a.cmd));
            let mut lower = full[..n].to_vec();
            lower[0] = lower[0].to_lowercase();
            let e = refused(&mut c, &lower, &is_arity(a.cmd));
            assert_eq!(e, arity_err(a.cmd));
        }
    }
    refused(&mut c, &args!("RL.INFO"), &is_arity("RL.INFO"));
    refused(
        &mut c,
        &args!("RL.INFO", "st:gcra", "x"),
        &is_arity("RL.INFO"),
    );
    refused(&mut c, &args!("rl.info"), &|e| e == arity_err("rl.info"));
}

#[test]
fn extra_arguments_and_unknown_options_syntax_error() {
    let (_s, mut c) = setup();
    let cases: [&[&str]; 13] = [
        &["extra"],
        &["FOO"],
        &["COSTS", "1"],
        &["DRY"],
        &["DRYRUNX"],
        &["5"],
        &["NX"],
        &["PX", "100"],
        &["COST", "1", "extra"],
        &["DRYRUN", "extra"],
        &["COST", "1", "DRYRUN", "1"],
        &["-1"],
        &[""],
    ];
    for a in &ALGS {
        for key in [a.state_key(), "nokey".to_string()] {
            for extra in cases {
                refused(&mut c, &a.args(&key, extra), &|e| e == ERR_SYNTAX);
            }
        }
    }
}

#[test]
fn repeated_options_syntax_error() {
    let (_s, mut c) = setup();
    let cases: [&[&str]; 6] = [
        &["DRYRUN", "DRYRUN"],
        &["COST", "1", "COST", "1"],
        &["COST", "1", "DRYRUN", "COST", "2"],
        &["dryrun", "DRYRUN"],
        &["cost", "1", "COST", "1"],
        &["DRYRUN", "COST", "1", "dryrun"],
    ];
    for a in &ALGS {
        for key in [a.state_key(), "nokey".to_string()] {
            for extra in cases {
                refused(&mut c, &a.args(&key, extra), &|e| e == ERR_SYNTAX);
            }
        }
    }
}

#[test]
fn bad_numbers_in_every_parameter() {
    let (_s, mut c) = setup();
    for a in &ALGS {
        for (i, name) in a.names.iter().enumerate() {
            for bad in BAD_NUMBERS {
                for key in [a.state_key(), "nokey".to_string()] {
                    for extra in [&[][..], &["DRYRUN"][..], &["COST", "1"][..]] {
                        let mut args = a.args(&key, extra);
                        args[2 + i] = bad.to_string();
                        refused(&mut c, &args, &numeric_err(name));
                    }
                }
            }
        }
        // An option where a parameter belongs.
        let mut args = a.args("nokey", &[]);
        let last = args.len() - 1;
        args[last] = "DRYRUN".into();
        let name = a.names[a.names.len() - 1];
        refused(&mut c, &args, &|e| {
            numeric_err(name)(e) || e == ERR_SYNTAX || is_arity(a.cmd)(e)
        });
    }
}

#[test]
fn bad_cost() {
    let (_s, mut c) = setup();
    for a in &ALGS {
        let exceed = format!("ERR COST must not exceed {}", a.names[0]);
        for key in [a.state_key(), "nokey".to_string()] {
            // COST 0 is a peek (tests/options.rs); every other bad number is an error.
            for bad in BAD_NUMBERS.into_iter().filter(|b| *b != "0") {
                let positive_big = [
                    "99999999999999999999",
                    "18446744073709551616",
                    "9223372036854775808",
                ]
                .contains(&bad);
                for dry in [false, true] {
                    let mut extra = vec!["COST", bad];
                    if dry {
                        extra.push("DRYRUN");
                    }
                    refused(&mut c, &a.args(&key, &extra), &|e| {
                        numeric_err("cost")(e)
                            || e == "ERR cost must not be negative"
                            || (positive_big && e == exceed)
                    });
                }
            }
            // Above the limit (5), within 64 bits.
            for over in ["6", "7", "1000", "9223372036854775807"] {
                refused(&mut c, &a.args(&key, &["COST", over]), &|e| e == exceed);
                refused(&mut c, &a.args(&key, &["DRYRUN", "COST", over]), &|e| {
                    e == exceed
                });
            }
            // COST without its value.
            refused(&mut c, &a.args(&key, &["COST"]), &|e| {
                e == ERR_SYNTAX || is_arity(a.cmd)(e)
            });
            refused(&mut c, &a.args(&key, &["DRYRUN", "COST"]), &|e| {
                e == ERR_SYNTAX || is_arity(a.cmd)(e)
            });
            refused(&mut c, &a.args(&key, &["COST", "DRYRUN"]), &|e| {
                e == ERR_SYNTAX || numeric_err("cost")(e)
            });
        }
    }
}

#[test]
fn options_are_case_insensitive() {
    let (_s, mut c) = setup();
    for a in &ALGS {
        let key = format!("ci:{}", a.algo);
        // dryrun, any case: no key created.
        for d in ["dryrun", "DryRun", "dRYRUN"] {
            let r = rate(&mut c, &a.args(&key, &[d]));
            assert_eq!(r[0], 1);
            assert!(!exists(&mut c, &key), "{d} created the key");
        }
        // cost, any case, spends n.
        let r = rate(&mut c, &a.args(&key, &["cost", "2"]));
        assert_eq!(r[..3], [1, 5, 3], "cost 2: {r:?}");
        let r = rate(&mut c, &a.args(&key, &["Cost", "2", "dryrun"]));
        assert_eq!(r[..3], [1, 5, 1], "Cost 2 dryrun: {r:?}");
        let r = rate(&mut c, &a.args(&key, &["dryrun", "cOsT", "4"]));
        assert_eq!(r[..3], [0, 5, 3], "dryrun cOsT 4: {r:?}");
        let r = rate(&mut c, &a.args(&key, &["COST", "1"]));
        assert_eq!(r[..3], [1, 5, 2], "COST 1 after the dry runs: {r:?}");
        // The command name itself is case-insensitive too.
        let mut lower = a.args(&key, &["DRYRUN"]);
        lower[0] = lower[0].to_lowercase();
        assert_eq!(rate(&mut c, &lower)[..3], [1, 5, 1]);
    }
}

#[test]
fn parameters_that_would_overflow() {
    let (_s, mut c) = setup();
    const MAX: &str = "9223372036854775807";
    let cases: Vec<Vec<&str>> = vec![
        vec!["RL.GCRA", MAX, "1", "1000"],
        vec!["RL.GCRA", "1", "1", MAX],
        vec!["RL.GCRA", MAX, "1", MAX],
        vec!["RL.GCRA", "5", MAX, "1"],
        vec!["RL.GCRA", MAX, MAX, MAX],
        vec!["RL.GCRA", MAX, "1", "1000", "COST", MAX],
        vec!["RL.TOKENBUCKET", MAX, "1", "1000"],
        vec!["RL.TOKENBUCKET", "1", "1", MAX],
        vec!["RL.TOKENBUCKET", MAX, MAX, MAX, "COST", MAX],
        vec!["RL.SLIDING", MAX, "1000"],
        vec!["RL.SLIDING", "10", MAX],
        vec!["RL.SLIDING", MAX, MAX],
        vec!["RL.SLIDING", MAX, "1000", "COST", MAX],
    ];
    let mut n = 0;
    for case in cases {
        let algo = match case[0] {
            "RL.GCRA" => "gcra",
            "RL.TOKENBUCKET" => "tokenbucket",
            _ => "sliding",
        };
        for key in [format!("st:{algo}"), format!("big{n}")] {
            n += 1;
            let mut args = args!(case[0], key);
            args.extend(case[1..].iter().map(|s| s.to_string()));
            // Only this key: keys accepted earlier may have tiny TTLs and expire meanwhile.
            let before = snap(&mut c, &key);
            let out = multi(&mut c, &[args.clone(), args!("PTTL", key)]);
            ping(&mut c);
            match error_text(&out[0]) {
                Some(e) => {
                    assert!(
                        e.starts_with("ERR parameters too large")
                            || e == ERR_NOT_INT
                            || (e.starts_with("ERR ") && e.contains(" must be ")),
                        "{args:?}: unexpected error {e:?}"
                    );
                    let after = snap(&mut c, &key);
                    // A key written by an earlier accepted case may carry a ~1 ms TTL and
                    // expire between the two snapshots, or during the second one (after its
                    // TYPE, before its PEXPIRETIME or RL.INFO): not a change by this call.
                    let gone = after.ktype == "none"
                        || after.pexpiretime == -2
                        || (after.ktype == "ratelimit" && after.info.is_none());
                    let expired = gone && before.pexpiretime - server_ms(&mut c) < 1000;
                    assert!(
                        after == before || expired,
                        "{args:?} ({e}) changed the key: {before:?} -> {after:?}"
                    );
                }
                None => {
                    // Accepted: then it must be exact, and the key must carry its TTL.
                    let r = reply5(&out[0]).unwrap_or_else(|m| panic!("{args:?}: {m}"));
                    assert!(
                        r[1] > 0 && r[2] >= 0 && r[3] >= 0 && r[4] >= 0,
                        "{args:?}: {r:?}"
                    );
                    if r[0] == 1 {
                        let p = int(&out[1]);
                        assert_pttl_in_multi(p, r[4], &format!("{args:?} -> {r:?}"));
                    } else if key.starts_with("big") {
                        assert_eq!(snap(&mut c, &key), before, "{args:?}: refused but changed");
                    }
                    // (On the state keys these are rule changes: a refusal may persist
                    // a GCRA-family state re-timed under a new interval; see clock.rs.)
                }
            }
        }
    }
    for k in scan_all(&mut c) {
        if key_type(&mut c, &k) == "ratelimit" {
            assert_ne!(pttl(&mut c, &k), -1, "{k} has no TTL")
        }
    }
}

// ---------------------------------------------------------------------------- RL.INFO

#[test]
fn info_missing_key_is_nil() {
    let (_s, mut c) = setup();
    assert_eq!(raw(&mut c, &args!("RL.INFO", "nokey")), Value::Nil);
    assert!(!exists(&mut c, "nokey"));
    for a in &ALGS {
        let m = info(&mut c, &a.state_key()).unwrap();
        assert_eq!(m["algorithm"], a.algo);
    }
}

// -------------------------------------------------------------------------- RL._APPLY

#[test]
fn internal_apply_refused_from_a_normal_client() {
    let (_s, mut c) = setup();
    for key in ["st:gcra", "st:sliding", "nokey"] {
        for extra in [
            &["garbage"][..],
            &[""][..],
            &["\x00\x00\x00\x00\x00\x00\x00\x00\x01\x01"][..],
        ] {
            let mut args = args!("RL._APPLY", key);
            args.extend(extra.iter().map(|s| s.to_string()));
            refused(&mut c, &args, &|e| e == ERR_APPLY);
        }
        // Any other shape (a key without its payload) is an arity error.
        let args = args!("RL._APPLY", key, "garbage", "PXAT");
        refused(&mut c, &args, &|e| {
            e.starts_with("ERR wrong number of arguments")
        });
    }
    // Neither from inside MULTI nor from a script.
    let before = snap_all(&mut c);
    let out = multi(&mut c, &[args!("RL._APPLY", "st:gcra", "garbage")]);
    assert_eq!(error_text(&out[0]).as_deref(), Some(ERR_APPLY));
    let e = err(
        &mut c,
        &args!(
            "EVAL",
            "return redis.call('RL._APPLY', KEYS[1], ARGV[1])",
            1,
            "st:gcra",
            "garbage"
        ),
    );
    assert!(e.starts_with("ERR"), "{e}");
    assert_eq!(snap_all(&mut c), before);
    ping(&mut c);
}

#[test]
fn internal_apply_with_a_genuine_blob_refused() {
    // Take a real RL._APPLY (blob and all) from the AOF, replay it from a normal client:
    // it must be refused (else any client could reset its own limit). The AOF is read
    // back: every write reaches the file before its reply.
    let s = Server::builder().appendonly().start();
    let mut c = s.con();
    clock_set(&mut c, T0);
    let a = args!("RL.GCRA", "src", 5, 1, 1000);
    assert_eq!(rate(&mut c, &a), [1, 5, 4, 0, 1000]);
    for _ in 0..4 {
        rate(&mut c, &a);
    }
    assert_eq!(rate(&mut c, &a)[0], 0);
    let applies: Vec<Vec<Vec<u8>>> = aof_commands(&s)
        .into_iter()
        .filter(|cmd| cmd[0].eq_ignore_ascii_case(b"RL._APPLY"))
        .collect();
    assert_eq!(
        applies.len(),
        5,
        "expected one RL._APPLY per admitted request in the AOF"
    );
    assert_eq!(applies[0][1], b"src".to_vec());
    // The AOF holds the effect, never the clock-dependent command or the test clock.
    for cmd in aof_commands(&s) {
        let name = String::from_utf8_lossy(&cmd[0]).to_uppercase();
        assert!(
            name != "RL.GCRA" && name != "RL.CLOCK",
            "the AOF holds {name}"
        );
    }
    let before = snap(&mut c, "src");
    // Replay the first one (4 remaining) on the drained key, and on a new key.
    let v = raw_bytes(&mut c, &applies[0]);
    assert_eq!(error_text(&v).as_deref(), Some(ERR_APPLY));
    let mut other = applies[0].clone();
    other[1] = b"victim".to_vec();
    let v = raw_bytes(&mut c, &other);
    assert_eq!(error_text(&v).as_deref(), Some(ERR_APPLY));
    assert_eq!(snap(&mut c, "src"), before);
    assert!(!exists(&mut c, "victim"));
    assert_eq!(rate(&mut c, &a)[0], 0, "still drained");
    ping(&mut c);
}

// --------------------------------------------------------------------------- RL.CLOCK

#[test]
fn clock_refused_without_test_clock() {
    let s = Server::builder().real_clock().start();
    let mut c = s.con();
    for sub in [
        args!("RL.CLOCK", "GET"),
        args!("RL.CLOCK", "SET", T0),
        args!("RL.CLOCK", "ADVANCE", 1000),
        args!("RL.CLOCK", "ADVANCE", -1000),
        args!("RL.CLOCK", "REAL"),
    ] {
        assert_eq!(err(&mut c, &sub), ERR_CLOCK_DISABLED, "{sub:?}");
    }
    ping(&mut c);
    // The rate commands work on the server's clock.
    let out = multi(
        &mut c,
        &[args!("RL.GCRA", "k", 5, 1, 1000), args!("PTTL", "k")],
    );
    assert_eq!(reply5(&out[0]).unwrap(), [1, 5, 4, 0, 1000]);
    let p = int(&out[1]);
    assert!((998..=1000).contains(&p), "PTTL {p}");
}

#[test]
fn clock_bad_subcommands_are_errors() {
    let (_s, mut c) = Server::at_clock(T0);
    for bad in [
        args!("RL.CLOCK"),
        args!("RL.CLOCK", "FOO"),
        args!("RL.CLOCK", "SET"),
        args!("RL.CLOCK", "SET", "abc"),
        args!("RL.CLOCK", "ADVANCE"),
        args!("RL.CLOCK", "ADVANCE", "1.5"),
        args!("RL.CLOCK", "SET", 1, 2),
    ] {
        let e = err(&mut c, &bad);
        assert!(e.starts_with("ERR"), "{bad:?}: {e}");
        ping(&mut c);
    }
    assert_eq!(clock_get(&mut c), T0, "a bad RL.CLOCK call moved the clock");
}

#[test]
fn wrongtype_for_other_types_and_other_algorithms() {
    let (_srv, mut c) = Server::at_clock(T0);
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

#[test]
fn bad_input_is_refused_and_changes_nothing() {
    let (_srv, mut c) = Server::at_clock(T0);
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
