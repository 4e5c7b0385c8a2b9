//! One effect per RL.ALL call: `RL._APPLY key payload [key payload ...]` (up to four pairs
//! a command), its keys declared, applied on replicas and from the AOF like one key's.

use common::*;
use redis::Value;
use rl_testkit as common;
use rl_testkit::args;

fn keys_of(c: &mut redis::Connection, call: &[String]) -> Vec<String> {
    let mut g = args!("COMMAND", "GETKEYS");
    g.extend(call.iter().cloned());
    let v = raw(c, &g);
    let Value::Array(keys) = v else {
        panic!("{g:?}: {v:?}")
    };
    keys.iter().map(text).collect()
}

#[test]
fn every_pair_declares_its_key() {
    let s = Server::start();
    let mut c = s.con();
    assert_eq!(keys_of(&mut c, &args!("RL._APPLY", "{t}a", "p")), ["{t}a"]);
    assert_eq!(
        keys_of(
            &mut c,
            &args!("RL._APPLY", "{t}a", "p", "{t}b", "q", "{t}c", "r")
        ),
        ["{t}a", "{t}b", "{t}c"]
    );
    // Still refused from a client, whatever the number of pairs.
    assert!(err(&mut c, &args!("RL._APPLY", "{t}a", "p", "{t}b", "q")).starts_with("ERR"));
    assert!(err(&mut c, &args!("RL._APPLY", "{t}a", "p", "{t}b")).starts_with("ERR"));
    assert!(err(&mut c, &args!("RL._APPLY", "{t}a")).contains("wrong number"));
}

/// Calls of 1 to 6 keys (more than one command's four pairs, and more than the keys held
/// on the stack), fixed-size and growing states together.
fn calls() -> Vec<Vec<String>> {
    let rules: [&[&str]; 6] = [
        &["GCRA", "10", "1", "1000"],
        &["SLIDING", "5", "60000"],
        &["LOG", "4", "60000"],
        &["FIXED", "6", "60000", "STAGGER"],
        &["QUEUE", "3", "200"],
        &["TOKENBUCKET", "8", "1", "1000"],
    ];
    let mut out = Vec::new();
    for n in 1..=rules.len() {
        let mut a = args!("RL.ALL", n);
        for i in 0..n {
            a.push(format!("{{p}}k{n}:{i}"));
        }
        for r in rules.iter().take(n) {
            a.extend(r.iter().map(|w| w.to_string()));
        }
        out.push(a);
    }
    out
}

fn every_key() -> Vec<String> {
    (1..=6)
        .flat_map(|n| (0..n).map(move |i| format!("{{p}}k{n}:{i}")))
        .collect()
}

#[test]
fn replicas_and_the_aof_hold_what_the_primary_holds() {
    let mut s = Server::builder()
        .appendonly()
        .config("aof-use-rdb-preamble", "no")
        .start();
    let mut c = s.con();
    clock_set(&mut c, T0);
    let r = s.start_replica();
    let mut rc = r.con();
    for round in 0..6 {
        for call in calls() {
            raw(&mut c, &call);
        }
        if round % 2 == 1 {
            clock_advance(&mut c, 700);
        }
    }
    sync_replica(&mut c, &mut rc);
    let keys = every_key();
    let before: Vec<(String, i64)> = keys
        .iter()
        .map(|k| (digest(&mut c, k), pexpiretime(&mut c, k)))
        .collect();
    for (k, b) in keys.iter().zip(&before) {
        assert_eq!((digest(&mut rc, k), pexpiretime(&mut rc, k)), *b, "{k}");
    }
    // One effect per call: no more RL._APPLY commands than calls that wrote.
    let applies = aof_commands(&s)
        .iter()
        .filter(|cmd| cmd[0].eq_ignore_ascii_case(b"RL._APPLY"))
        .count();
    assert!(applies <= 6 * 8, "{applies} RL._APPLY for 36 calls");
    assert!(applies >= 8, "{applies} RL._APPLY for 36 calls");
    let held = keys.iter().filter(|k| exists(&mut c, k)).count();
    assert!(held >= 15, "{held} of {} keys", keys.len());
    s.restart();
    let mut c = s.con();
    for (k, b) in keys.iter().zip(&before) {
        assert_eq!(
            (digest(&mut c, k), pexpiretime(&mut c, k)),
            *b,
            "{k} after AOF load"
        );
    }
}
