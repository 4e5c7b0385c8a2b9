//! Time never runs backwards for a key, on a real server with the test clock (RL.CLOCK SET
//! going back and forward), for every algorithm: a key exhausted under a clock that ran an
//! hour ahead is still exhausted when the clock reads earlier; the replies count the hour
//! the clock must catch up; refused and dry-run requests leave the key (and its
//! PEXPIRETIME) untouched, so the key still expires by the TTL it was given; admitted
//! requests under a clock that went back are recorded at the key's own time.

use rl_testkit as common;
use rl_testkit::args;
use rl_testkit::rate;

use common::*;
use rate::rate_ttl;
use redis::{Connection, Value};
use std::time::Duration;

/// One algorithm's command for a key, with a limit of 5 per `ms`.
struct Alg {
    name: &'static str,
    args: fn(&str, i64) -> Vec<String>,
}

fn algs() -> Vec<Alg> {
    vec![
        Alg {
            name: "gcra",
            args: |k, ms| args!("RL.GCRA", k, 5, 1, ms / 5),
        },
        Alg {
            name: "tokenbucket",
            args: |k, ms| args!("RL.TOKENBUCKET", k, 5, 1, ms / 5),
        },
        Alg {
            name: "queue",
            args: |k, ms| args!("RL.QUEUE", k, 5, ms / 5),
        },
        Alg {
            name: "sliding",
            args: |k, ms| args!("RL.SLIDING", k, 5, ms),
        },
        Alg {
            name: "fixed",
            args: |k, ms| args!("RL.FIXED", k, 5, ms),
        },
        Alg {
            name: "log",
            args: |k, ms| args!("RL.LOG", k, 5, ms),
        },
        Alg {
            name: "acquire",
            args: |k, ms| args!("RL.ACQUIRE", k, 5, ms),
        },
        Alg {
            name: "throttle",
            args: |k, ms| args!("CL.THROTTLE", k, 4, 5, ms / 1000),
        },
    ]
}

/// The first five fields of a reply (CL.THROTTLE's five, the rate commands' standard ones).
fn five(v: &Value) -> [i64; 5] {
    match v {
        Value::Array(items) if items.len() >= 5 => {
            let mut out = [0; 5];
            for (o, it) in out.iter_mut().zip(items) {
                *o = int(it);
            }
            out
        }
        other => panic!("expected an array of at least 5 fields, got {other:?}"),
    }
}

fn call(c: &mut Connection, a: &[String]) -> [i64; 5] {
    five(&ok(c, a))
}

/// Whether a reply admits (CL.THROTTLE's first field is `limited`).
fn admitted(alg: &Alg, r: &[i64; 5]) -> bool {
    if alg.name == "throttle" {
        r[0] == 0
    } else {
        r[0] == 1
    }
}

fn with_dryrun(alg: &Alg, mut a: Vec<String>) -> Option<Vec<String>> {
    (alg.name != "throttle").then(|| {
        a.push("DRYRUN".into());
        a
    })
}

/// Exhausted an hour ahead, read at the right time: refused with the hour counted, and
/// nothing written (same state, same PEXPIRETIME); back at the key's own time the key
/// continues where it was, never with a second allowance.
#[test]
fn a_key_exhausted_ahead_stays_exhausted() {
    let s = Server::start();
    let mut c = s.con();
    // Per 10 s windows (periods of 2 s), replies hand-computed for each algorithm.
    let want_back: [(&str, [i64; 5]); 8] = [
        ("gcra", [0, 5, 0, HOUR + 2_000, HOUR + 10_000]),
        ("tokenbucket", [0, 5, 0, HOUR + 2_000, HOUR + 10_000]),
        ("queue", [0, 5, 0, HOUR + 2_000, HOUR + 10_000]),
        // Room once a fifth of the next window has passed: the previous 5 weigh 4 then.
        ("sliding", [0, 5, 0, HOUR + 12_000, HOUR + 20_000]),
        ("fixed", [0, 5, 0, HOUR + 10_000, HOUR + 10_000]),
        ("log", [0, 5, 0, HOUR + 10_000, HOUR + 10_000]),
        ("acquire", [0, 5, 0, HOUR + 10_000, HOUR + 10_000]),
        // redis-cell's seconds: limited, limit 5, retry and reset rounded up.
        ("throttle", [1, 5, 0, 3_602, 3_610]),
    ];
    for (alg, (name, want)) in algs().iter().zip(want_back) {
        assert_eq!(alg.name, name);
        let key = format!("ahead:{}", alg.name);
        let a = (alg.args)(&key, 10_000);
        clock_set(&mut c, T0 + HOUR);
        for i in 0..5 {
            assert!(admitted(alg, &call(&mut c, &a)), "{name}: request {i}");
        }
        assert!(!admitted(alg, &call(&mut c, &a)), "{name}: a 6th");
        let before = snap(&mut c, &key);
        let ttl = pttl(&mut c, &key);
        assert!(ttl > 0 && ttl <= 20_000, "{name}: PTTL {ttl}");
        // The clock goes back an hour.
        clock_set(&mut c, T0);
        if let Some(d) = with_dryrun(alg, a.clone()) {
            assert_eq!(call(&mut c, &d), want, "{name}: DRYRUN an hour back");
        }
        for _ in 0..3 {
            assert_eq!(call(&mut c, &a), want, "{name}: an hour back");
        }
        assert_eq!(
            snap(&mut c, &key),
            before,
            "{name}: a refusal an hour back wrote"
        );
        // Half an hour later, still before the key's own time: the same, less the half hour.
        clock_advance(&mut c, HOUR / 2);
        let r = call(&mut c, &a);
        assert!(!admitted(alg, &r), "{name}: admitted before the key's time");
        if name != "throttle" {
            assert_eq!(r[3], want[3] - HOUR / 2, "{name}: retry half an hour on");
        }
        assert_eq!(snap(&mut c, &key), before, "{name}: wrote half an hour on");
        // The clock is right again (the key's own time): it continues where it was.
        clock_set(&mut c, T0 + HOUR);
        let r = call(&mut c, &a);
        assert!(
            !admitted(alg, &r),
            "{name}: a second allowance at its own time"
        );
        assert_eq!(snap(&mut c, &key), before, "{name}: wrote at its own time");
    }
}

/// Part of the limit used, then the clock goes back: at most the rest is admitted (windows,
/// log, leases: exactly the rest; GCRA family: the TAT is read at the earliest time it
/// allows, so possibly fewer), recorded at the key's own time, with the TTL (PTTL) equal to
/// reset_after_ms including the catch-up.
#[test]
fn partly_used_then_back_admits_at_most_the_rest() {
    let s = Server::start();
    let mut c = s.con();
    for alg in algs() {
        let key = format!("part:{}", alg.name);
        let a = (alg.args)(&key, 10_000);
        clock_set(&mut c, T0 + HOUR);
        for _ in 0..2 {
            assert!(admitted(&alg, &call(&mut c, &a)));
        }
        clock_set(&mut c, T0 + HOUR - 1_000);
        let mut n = 0;
        for _ in 0..10 {
            let out = multi(&mut c, &[a.clone(), args!("PTTL", key)]);
            let r = five(&out[0]);
            if !admitted(&alg, &r) {
                break;
            }
            n += 1;
            if alg.name != "throttle" {
                let p = int(&out[1]);
                assert_pttl_in_multi(p, r[4], &format!("{}: a second back", alg.name));
                assert!(r[4] > 1_000, "{}: reset without the catch-up", alg.name);
            }
        }
        let exact = !matches!(alg.name, "gcra" | "tokenbucket" | "queue" | "throttle");
        if exact {
            assert_eq!(n, 3, "{}: 2 used, then {n} a second back", alg.name);
        } else {
            assert!(n <= 3, "{}: 2 used, then {n} a second back", alg.name);
        }
        // Nothing more at the key's own time.
        clock_set(&mut c, T0 + HOUR);
        if exact {
            assert!(
                !admitted(&alg, &call(&mut c, &a)),
                "{}: more at its time",
                alg.name
            );
        }
    }
}

/// A key written under a clock that ran ahead expires by the TTL it was given then: once
/// the clock is corrected, the caller is blocked at most until that TTL runs out (a refusal
/// never extends it), then the key is fresh.
#[test]
fn a_key_written_ahead_expires_by_its_ttl() {
    let s = Server::start();
    let mut c = s.con();
    for alg in algs() {
        let key = format!("ttl:{}", alg.name);
        // Short windows (CL.THROTTLE's period is whole seconds: 1 s).
        let a = (alg.args)(&key, if alg.name == "throttle" { 1_000 } else { 300 });
        clock_set(&mut c, T0 + HOUR);
        for _ in 0..5 {
            call(&mut c, &a);
        }
        let at = pexpiretime(&mut c, &key);
        assert!(at > 0, "{}: no expiry", alg.name);
        clock_set(&mut c, T0);
        let r = call(&mut c, &a);
        if exists(&mut c, &key) {
            assert!(!admitted(&alg, &r), "{}: admitted an hour back", alg.name);
            assert_eq!(
                pexpiretime(&mut c, &key),
                at,
                "{}: refusal moved PEXPIRETIME",
                alg.name
            );
        }
        // Wait (for the condition, not a fixed time) until the key has expired.
        wait_until(
            &format!("{}: the key to expire", alg.name),
            Duration::from_secs(20),
            || !exists(&mut c, &key),
        );
        let r = call(&mut c, &a);
        assert!(
            admitted(&alg, &r),
            "{}: not fresh after its TTL: {r:?}",
            alg.name
        );
    }
}

/// A rule changed for an existing key carries the units over (GCRA family), and keeps the
/// debt when only the burst is lowered; windows and logs keep their counts and entries.
#[test]
fn rule_change_carries_the_state_over() {
    let (_s, mut c) = Server::at_clock(T0);
    for cmd in ["RL.GCRA", "RL.TOKENBUCKET"] {
        // 10 per hour, all spent; then 10 per second: free after one second.
        let key = format!("carry:{cmd}");
        assert_eq!(
            call(&mut c, &args!(cmd, key, 10, 10, HOUR, "COST", 10)),
            [1, 10, 0, 0, HOUR]
        );
        let fast = args!(cmd, key, 10, 10, 1000);
        let mut dry = fast.clone();
        dry.push("DRYRUN".into());
        let before = snap(&mut c, &key);
        assert_eq!(call(&mut c, &dry), [0, 10, 0, 100, 1000]);
        assert_eq!(snap(&mut c, &key), before, "{cmd}: DRYRUN wrote");
        // The first request under the new interval is refused and stores the re-timed
        // state: its TTL is now the new numbers' second.
        assert_eq!(call(&mut c, &fast), [0, 10, 0, 100, 1000]);
        let p = pttl(&mut c, &key);
        assert!(
            (990..=1000).contains(&p),
            "{cmd}: PTTL {p} after the re-timing"
        );
        let period = if cmd == "RL.GCRA" {
            "period_ms"
        } else {
            "refill_period_ms"
        };
        assert_eq!(info_of(&mut c, &key)[period], "1000");
        clock_advance(&mut c, 1000);
        assert_eq!(call(&mut c, &fast), [1, 10, 9, 0, 100]);
    }
    // Lowering a burst keeps the debt: 5 per 5 s spent, then burst 3.
    for cmd in ["RL.GCRA", "RL.TOKENBUCKET"] {
        clock_set(&mut c, T0);
        let key = format!("debt:{cmd}");
        call(&mut c, &args!(cmd, key, 5, 1, 1000, "COST", 5));
        let before = snap(&mut c, &key);
        let low = args!(cmd, key, 3, 1, 1000);
        assert_eq!(call(&mut c, &low), [0, 3, 0, 3000, 5000]);
        assert_eq!(snap(&mut c, &key), before, "{cmd}: a refusal wrote");
        clock_advance(&mut c, 2999);
        assert_eq!(call(&mut c, &low)[0], 0);
        clock_advance(&mut c, 1);
        assert_eq!(call(&mut c, &low), [1, 3, 0, 0, 3000]);
        // Raised again: the same state has room (TAT now + 3 s -> now + 4 s).
        assert_eq!(
            call(&mut c, &args!(cmd, key, 10, 1, 1000)),
            [1, 10, 6, 0, 4000]
        );
        assert_eq!(info_of(&mut c, &key)["tat_ns"], ns(T0 + 7000));
    }
    // Sliding: limit 10 -> 5 with 8 counted: refused, nothing written; 5 -> 20: room.
    clock_set(&mut c, T0);
    for _ in 0..8 {
        call(&mut c, &args!("RL.SLIDING", "carry:s", 10, 1000));
    }
    let before = snap(&mut c, "carry:s");
    let d = call(&mut c, &args!("RL.SLIDING", "carry:s", 5, 1000, "DRYRUN"));
    assert_eq!(d, [0, 5, 0, 1500, 2000]);
    assert_eq!(call(&mut c, &args!("RL.SLIDING", "carry:s", 5, 1000)), d);
    assert_eq!(snap(&mut c, "carry:s"), before, "sliding: a refusal wrote");
    assert_eq!(
        call(&mut c, &args!("RL.SLIDING", "carry:s", 20, 1000)),
        [1, 20, 11, 0, 2000]
    );
    // Log: 8 entries; limit 5: refused until 4 have left; a shorter window drops them.
    for _ in 0..8 {
        call(&mut c, &args!("RL.LOG", "carry:l", 10, 1000));
    }
    assert_eq!(
        call(&mut c, &args!("RL.LOG", "carry:l", 5, 1000)),
        [0, 5, 0, 1000, 1000]
    );
    clock_advance(&mut c, 600);
    assert_eq!(
        call(&mut c, &args!("RL.LOG", "carry:l", 5, 500)),
        [1, 5, 4, 0, 500]
    );
}

fn info_of(c: &mut Connection, key: &str) -> std::collections::BTreeMap<String, String> {
    info(c, key).unwrap_or_else(|| panic!("RL.INFO {key} is nil"))
}

fn ns(ms: i64) -> String {
    (ms as i128 * 1_000_000).to_string()
}

#[test]
fn test_clock_get_set_advance_real() {
    let (_s, mut c) = Server::at_clock(T0);
    // Real time passes (the server's TIME moves on); the test clock does not.
    let t = server_ms(&mut c);
    wait_until(
        "the server's time to move on",
        Duration::from_secs(5),
        || server_ms(&mut c) >= t + 20,
    );
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
